#!/usr/bin/env bash
# Runs every benchmark of bench/ (each bench/*_bench.py) against a kwatt binary; `make bench`
# calls it. Each benchmark prints its table and rewrites its own section of BENCHMARKS.md.
# Usage: bash bench/run_all.sh [KWATT_BINARY]   (default: build/kwatt)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(dirname "$here")"
kwatt="${1:-$root/build/kwatt}"
if [ ! -x "$kwatt" ]; then
  echo "run_all.sh: no executable kwatt binary at '$kwatt' (make build)" >&2
  exit 2
fi
kwatt="$(cd "$(dirname "$kwatt")" && pwd)/$(basename "$kwatt")"
python="$root/.venv/bin/python"
[ -x "$python" ] || python="$(command -v python3)"

failed=()
shopt -s nullglob
for bench in "$here"/*_bench.py; do
  name="$(basename "$bench" .py)"
  echo "=== $name ==="
  if ! "$python" "$bench" "$kwatt"; then
    failed+=("$name")
  fi
done
if [ "${#failed[@]}" -gt 0 ]; then
  echo "run_all.sh: failed: ${failed[*]}" >&2
  exit 1
fi
