#!/bin/bash
# The set-up times of doc/install.md ("How long it takes"), measured on a machine where nothing
# was installed: a minimal Debian bookworm root (mmdebstrap --variant=apt, with make and git
# added, as a fresh machine would have them to clone kwatt), entered with chroot, into which this
# checkout's HEAD is cloned.
# In it, one after the other, each timed:
#   make demo                       from the fresh clone (installs the build's packages, builds)
#   make test                       then (installs the tests' packages and peers, every tree)
#   make test after touching one .cc file
# Usage, as root: bash bench/setup_times.sh [demo|test|all] (default all). The compiler cache is
# the root's own (empty at first), so the first build is cold. Prints "TIME step: N s" lines.
set -euo pipefail
what=${1:-all}
here=$(cd "$(dirname "$0")/.." && pwd)
[ "$(id -u)" = 0 ] || { echo "run as root (chroot, mounts)" >&2; exit 2; }
root=$(mktemp -d /var/tmp/kwatt-fresh-XXXXXX)
echo "root: $root"
mmdebstrap --variant=apt --include=python3,python3-venv,ca-certificates,make,git bookworm "$root" \
  >"$root.mmdebstrap.log" 2>&1
cp /etc/resolv.conf "$root/etc/resolv.conf"
# This machine's own certificate authorities (a network whose TLS is inspected), as its
# administrator would have them on any of its machines.
if compgen -G '/usr/local/share/ca-certificates/*.crt' >/dev/null; then
  cp /usr/local/share/ca-certificates/*.crt "$root/usr/local/share/ca-certificates/"
  chroot "$root" update-ca-certificates >/dev/null
fi
# The environment that points the package clients at those authorities, passed through.
pass=()
for name in PIP_CERT REQUESTS_CA_BUNDLE SSL_CERT_FILE CURL_CA_BUNDLE NODE_EXTRA_CA_CERTS GIT_SSL_CAINFO; do
  [ -n "${!name:-}" ] && pass+=("$name=${!name}")
done
git clone -q "$here" "$root/kwatt"

run_in_root() {  # a command as root in the root, with /proc, /sys, /dev and a fresh /tmp
  unshare --mount --propagation private --fork sh -c "
    mount -t proc proc '$root/proc' && mount --rbind /sys '$root/sys' &&
    mount --rbind /dev '$root/dev' && mount -t tmpfs tmpfs '$root/tmp' &&
    mount -t tmpfs tmpfs '$root/dev/shm' &&
    exec chroot '$root' env -i HOME=/root PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
      LANG=C.UTF-8 TERM=dumb ${pass[*]} bash -c 'cd /kwatt && $1'"
}

timed() {  # timed STEP COMMAND
  local start=$(date +%s)
  if run_in_root "$2" >"$root.$1.log" 2>&1; then status=ok; else status="FAILED (see $root.$1.log)"; fi
  echo "TIME $1: $(( $(date +%s) - start )) s, $status"
}

if [ "$what" = demo ] || [ "$what" = all ]; then timed demo "make demo"; fi
if [ "$what" = test ] || [ "$what" = all ]; then
  timed test "make test"
  timed test-after-touch "touch src/energy/energy.cc && make test"
fi
echo "logs: $root.*.log; remove the root with: rm -rf $root"
