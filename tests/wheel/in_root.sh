#!/bin/bash
# Runs inside a minimal Debian root (python3, python3-venv, ca-certificates; no compiler, no -dev
# package), as an unprivileged user, what a Grid'5000 user does with the wheel: a virtualenv,
# `pip install kwatt-*.whl`, then the CLI against a simulator it starts, the embedded store, the
# meter on a simulated machine, the collector, a report with its figures, a parquet export and the
# Python service with pandas.
# HOME holds the wheel (one kwatt-*.whl), other/ (another CPython's wheel), wheels/ (numpy, pandas, matplotlib, pyarrow and their
# dependencies, for an offline install) and jobs.json; PYTHON names the interpreter (default the
# root's python3). Each step prints "ok: STEP"; the first failure stops it.
set -euo pipefail
cd "$HOME"
step() { echo "ok: $*"; }

[ "$(id -u)" != 0 ] || { echo "must run as an unprivileged user" >&2; exit 1; }
for compiler in cc c++ gcc g++ clang; do
  ! command -v "$compiler" >/dev/null || { echo "a compiler is here: $compiler" >&2; exit 1; }
done
step "no compiler, user $(id -u)"

"${PYTHON:-python3}" -m venv venv
# Another CPython's wheel (other/) is refused by pip, with the reason.
if venv/bin/pip install -q --no-index --find-links wheels other/kwatt-*.whl 2>refused.err; then
  echo "pip installed $(basename other/kwatt-*.whl) with $("${PYTHON:-python3}" --version)" >&2; exit 1
fi
grep -q "is not a supported wheel on this platform" refused.err || { cat refused.err >&2; exit 1; }
step "$(basename other/kwatt-*.whl) refused: $(grep -o 'is not a supported wheel on this platform' refused.err)"
venv/bin/pip install -q --no-index --find-links wheels "$(ls ./kwatt-*.whl)[plot,parquet]"
. venv/bin/activate
kwatt --version
step "pip install of $(basename ./kwatt-*.whl) with $(python3 --version)"

# The simulated testbed; its first line is its URL.
kwatt serve --simulate --port 0 --jobs jobs.json >serve.out 2>serve.err &
trap 'kill $(jobs -p) 2>/dev/null || true' EXIT
for _ in $(seq 100); do [ -s serve.out ] && break; sleep 0.1; done
URL=$(head -1 serve.out)
case "$URL" in http://127.0.0.1:*) ;; *) echo "serve did not start: $(cat serve.err)" >&2; exit 1 ;; esac
step "serve --simulate at $URL"

WINDOW=(--start 2025-04-18T14:04:00+02:00 --end 2025-04-18T14:06:00+02:00)
kwatt fetch --api "$URL" --nodes nova-1.lyon,nova-4.lyon --metrics wattmetre_power_watt \
  "${WINDOW[@]}" -o rows.jsonl --quiet
rows=$(wc -l <rows.jsonl)
# 2 nodes x 121 s x 50 values/s under the monitor job
[ "$rows" -ge 12000 ] || { echo "fetch gave $rows rows" >&2; exit 1; }
step "fetch: $rows rows"

kwatt backup --api "$URL" --nodes nova-1.lyon,nova-4.lyon "${WINDOW[@]}" -o archive --quiet
kwatt inspect archive --verify | tee inspect.out
grep -q COMPLETE inspect.out
step "backup, inspect --verify"

kwatt energy archive --json >energy.json
kwatt simulate energy --node nova-1.lyon "${WINDOW[@]}" --jobs jobs.json --json >truth.json
python3 - <<'PY'
import json
energy = json.load(open("energy.json"))
truth = json.load(open("truth.json"))
nodes = {n["node"]: n for n in energy["nodes"]}
got = nodes["nova-1.lyon.grid5000.fr"]["window"]["joules"]
want = truth["joules"]
assert abs(got - want) <= 1e-3 * want, (got, want)
print(f"nova-1: {got:.1f} J, truth {want:.1f} J")
PY
step "energy of the archive against the simulator's truth"

# A report with its figures, drawn by this virtualenv's matplotlib through the wheel's kwatt.
kwatt report archive -o report 2>report.err || { cat report.err >&2; exit 1; }
for figure in power energy; do
  for format in png pdf svg; do [ -s "report/figures/$figure.$format" ] || { echo "no $figure.$format" >&2; exit 1; }; done
done
! grep -q 'id="no-figures"' report/report.html
step "report with its figures"

kwatt export archive --to parquet -o rows.parquet
python3 - <<'PY'
import pyarrow.parquet as pq
table = pq.read_table("rows.parquet")
assert table.num_rows >= 12000, table.num_rows
print(f"parquet: {table.num_rows} rows")
PY
step "export --to parquet"

# The embedded store: the archive imported, then served as Kwollect's API.
kwatt import archive --store lab.store
kwatt serve --store lab.store --port 0 >store.out 2>store.err &
for _ in $(seq 100); do [ -s store.out ] && break; sleep 0.1; done
STORE_URL=$(head -1 store.out)
case "$STORE_URL" in http://127.0.0.1:*) ;; *) echo "serve --store: $(cat store.err)" >&2; exit 1 ;; esac
kwatt fetch --api "$STORE_URL" --nodes nova-1.lyon,nova-4.lyon --metrics wattmetre_power_watt \
  "${WINDOW[@]}" -o store-rows.jsonl --quiet
cmp <(sort rows.jsonl) <(sort store-rows.jsonl)
step "import, serve --store: the same $(wc -l <store-rows.jsonl) rows"

# The meter on a simulated machine (no RAPL here), measuring a command.
kwatt simulate rapl sim --watts package=40 --duration 30 >/dev/null 2>&1 &
for _ in $(seq 100); do [ -d sim/class/powercap ] && break; sleep 0.1; done
kwatt meter --sysfs-root sim -o jsonl:meter.jsonl -- sleep 1.5 2>meter.err
grep -q "'sleep 1.5' exited with status 0" meter.err
grep -q '"domain":"package-0"' meter.jsonl
step "meter -- sleep 1.5 on a simulated RAPL tree"

# The collector: a simulated wattmeter's stream into a store.
kwatt simulate wattmetre --id wattmetre1 --nodes nova-1 --fast --duration 0.02 \
  --mapping-out wattmetre1.yaml >/dev/null
mkdir -p conf
cat >conf/metrics.yaml <<EOF
[{"name": "wattmetre_power_watt", "device_id": "wattmetre1", "url": "wattmetre://wattmetre1/",
  "command": ["$(command -v kwatt)", "simulate", "wattmetre", "--id", "wattmetre1", "--nodes", "nova-1"],
  "mapping": "$HOME/wattmetre1.yaml"}]
EOF
kwatt collect --config conf --store collected.store --site lyon --duration 3s --quiet
collected=$(kwatt store cat collected.store | grep -c '"metric_id":"wattmetre_power_watt"' || true)
[ "$collected" -ge 2 ] || { echo "collect stored $collected wattmeter rows" >&2; exit 1; }
step "collect: a wattmeter stream into a store ($collected rows)"

# Python: the package, the EnOSlib-style service against the simulator, pandas.
python3 - "$URL" <<'PY'
import sys
import kwatt
url = sys.argv[1]
k = kwatt.Kwollect(nodes=["nova-1.lyon.grid5000.fr"], api=url)
k.start(timestamp="2025-04-18T14:04:00+02:00")
k.stop(timestamp="2025-04-18T14:04:10+02:00")
rows = k.get_metrics(metrics=["wattmetre_power_watt"])
frame = k.to_pandas(metrics=["wattmetre_power_watt"])
assert len(rows["nova-1.lyon.grid5000.fr"]) == len(frame) > 500, (len(frame),)
energy = k.energy()
joules = float(energy.loc[energy["scope"] == "node", "joules"].iloc[0])
assert 500 < joules < 5000, joules  # 10 s of a node drawing 50-500 W
print(f"kwatt {kwatt.__version__}: {len(frame)} rows in pandas, {joules:.1f} J")
PY
step "import kwatt, kwatt.Kwollect, pandas"
