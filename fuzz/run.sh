#!/usr/bin/env bash
# Runs kwatt's libFuzzer harnesses (fuzz/README.md).
#   run.sh check    BUILD_DIR RUNS NAME...     every seed and regression input, then RUNS inputs of
#                                              fuzzing each from a fixed seed (so that the same
#                                              tree gives the same run), in a scratch corpus
#                                              (make test-fuzz)
#   run.sh campaign BUILD_DIR SECONDS NAME...  SECONDS each, growing BUILD_DIR/corpus/NAME (make fuzz)
# Exits non-zero on the first harness that finds something, naming the input it kept.
set -euo pipefail
mode=$1 build=$2 amount=$3
shift 3
here=$(cd "$(dirname "$0")" && pwd)
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:allocator_may_return_null=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
status=0
for name in "$@"; do
  fuzzer=$build/${name}_fuzzer
  seeds=$here/corpus/$name regressions=$here/regressions/$name
  findings=$build/findings/$name
  mkdir -p "$findings"
  inputs=()
  for d in "$seeds" "$regressions"; do [ -d "$d" ] && inputs+=("$d"); done
  if [ "$mode" = check ]; then
    corpus=$(mktemp -d)
    # Replays every committed input (-runs=0 runs each file once), then fuzzes a little.
    if ! "$fuzzer" -runs=0 -artifact_prefix="$findings/" "${inputs[@]}" >"$findings/replay.log" 2>&1; then
      echo "fuzz $name: a committed input fails; see $findings/replay.log" >&2
      tail -30 "$findings/replay.log" >&2
      status=1
      rm -rf "$corpus"
      continue
    fi
    log=$findings/check.log
    limit=(-runs="$amount" -seed=1)
  else
    corpus=$build/corpus/$name
    mkdir -p "$corpus"
    log=$findings/campaign.log
    limit=(-max_total_time="$amount")
  fi
  start=$(date +%s)
  if "$fuzzer" "${limit[@]}" -timeout=20 -rss_limit_mb=4096 -max_len=65536 \
      -artifact_prefix="$findings/" -print_final_stats=1 "$corpus" "${inputs[@]}" >"$log" 2>&1; then
    runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo '?')
    echo "fuzz $name: $runs inputs in $(( $(date +%s) - start )) s, no finding"
  else
    echo "fuzz $name: FINDING, kept in $findings/ (log: $log)" >&2
    grep -m1 -A25 'ERROR\|property violated\|runtime error' "$log" >&2 || tail -30 "$log" >&2
    status=1
  fi
  [ "$mode" = check ] && rm -rf "$corpus"
done
exit $status
