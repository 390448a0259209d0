#!/usr/bin/env bash
# `make demo`: the simulated testbed serving a Kwollect-compatible API, and a first query.
set -euo pipefail
KWATT=${1:-build/kwatt}
HERE=$(cd "$(dirname "$0")" && pwd)
OUT=$(mktemp -d)
trap 'kill $SERVER 2>/dev/null || true; wait $SERVER 2>/dev/null || true; rm -rf "$OUT"' EXIT

"$KWATT" serve --simulate --port 0 --jobs "$HERE/jobs.json" > "$OUT/url" 2> "$OUT/server.log" &
SERVER=$!
for _ in $(seq 50); do [ -s "$OUT/url" ] && break; sleep 0.1; done
URL=$(head -1 "$OUT/url")
echo "kwatt serve --simulate is up at $URL (jobs from examples/jobs.json)"
echo
echo "== the sites and the clusters of the simulated testbed"
curl -s "$URL/sites" | python3 -c '
import json, sys
for site in json.load(sys.stdin)["items"]:
    print(" ", site["uid"])'
curl -s "$URL/sites/lyon/clusters/nova" | python3 -c '
import json, sys
c = json.load(sys.stdin)
print("  lyon/nova (%s): %d catalogue entries, e.g. %s" % (c["model"], len(c["metrics"]),
      ", ".join(m["name"] for m in c["metrics"][:3])))'
echo
echo "== job 1001 on lyon (monitor=wattmetre_power_watt: the wattmeter at 50 values/s)"
curl -s "$URL/sites/lyon/jobs/1001" | python3 -c '
import json, sys
j = json.load(sys.stdin)
print("  %s, %s, nodes %s, types %s" % (j["uid"], j["state"], ", ".join(j["assigned_nodes"]), j["types"]))'
echo
echo "== GET /sites/lyon/metrics?nodes=nova-1&metrics=wattmetre_power_watt, the first 0.1 s of the busy phase (power ramping up)"
curl -s "$URL/sites/lyon/metrics?nodes=nova-1.lyon.grid5000.fr&metrics=wattmetre_power_watt&start_time=2025-04-18T14:05:00%2B02:00&end_time=2025-04-18T14:05:00.1%2B02:00"
echo; echo
echo "== kwatt fetch --job lyon:1001: every row of the job's 4 nodes, in parallel requests"
"$KWATT" fetch --api "$URL" --job lyon:1001 -o "$OUT/job.jsonl"
python3 - "$OUT/job.jsonl" <<'PY'
import json, sys, collections
power = collections.defaultdict(list)
rows = 0
for line in open(sys.argv[1]):
    r = json.loads(line)
    rows += 1
    if r["metric_id"] == "wattmetre_power_watt":
        power[r["device_id"]].append(r["value"])
print(f"  {rows} rows")
for node, values in sorted(power.items()):
    print(f"  {node}: wattmeter mean {sum(values)/len(values):6.1f} W, peak {max(values):6.1f} W over {len(values)} samples")
PY
echo
echo "== kwatt fetch across 3 sites, CSV"
"$KWATT" fetch --api "$URL" --nodes nova-1.lyon,yeti-1.grenoble.grid5000.fr,ecotype-6.nantes \
  --metrics wattmetre_power_watt,pdu_outlet_power_watt --start 2025-04-18T14:20:00+02:00 \
  --end 2025-04-18T14:20:01+02:00 --format csv --quiet | awk 'NR<=4 || /nantes/ && !n++'
echo
echo "== kwatt backup --job lyon:1001: a compressed, lossless archive of the job"
"$KWATT" backup --api "$URL" --job lyon:1001 -o "$OUT/archive"
ls -l "$OUT/archive" "$OUT/archive/data" | sed 's/^/  /'
echo
echo "== kwatt inspect --verify: what the archive holds, every checksum and row count checked"
"$KWATT" inspect "$OUT/archive" --verify | sed -n '1,16s/^/  /p'
echo "  ..."
echo
echo "== kwatt energy on the archive: per node and phase, idle baseline"
"$KWATT" energy "$OUT/archive" --phase idle=2025-04-18T14:00:00+02:00..2025-04-18T14:05:00+02:00 \
  --phase busy=2025-04-18T14:05:00+02:00..2025-04-18T14:10:00+02:00 --baseline idle \
  --role pair=nova-1.lyon,nova-4.lyon | sed 's/^/  /'
echo "  the simulator's truth for nova-1:"
"$KWATT" simulate energy --node nova-1.lyon --start 2025-04-18T14:00:00+02:00 \
  --end 2025-04-18T14:30:00+02:00 --jobs "$HERE/jobs.json" | sed 's/^/    /'
echo
echo "== 5-minute summary of nova-1's power (summary=true)"
curl -s "$URL/sites/lyon/metrics?nodes=nova-1&metrics=wattmetre_power_watt&summary=true&job_id=1001" | python3 -c '
import json, sys
for r in json.load(sys.stdin):
    print("  %s  %6.1f W" % (r["timestamp"], r["value"]))'
