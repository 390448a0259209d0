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
echo "== the whole job, every metric of its 4 nodes, streamed"
curl -s -o "$OUT/job.json" -w "  %{size_download} bytes in %{time_total} s\n" "$URL/sites/lyon/metrics?job_id=1001"
python3 - "$OUT/job.json" <<'PY'
import json, sys, collections
rows = json.load(open(sys.argv[1]))
print(f"  {len(rows)} rows")
power = collections.defaultdict(list)
for r in rows:
    if r["metric_id"] == "wattmetre_power_watt":
        power[r["device_id"]].append(r["value"])
for node, values in sorted(power.items()):
    print(f"  {node}: wattmeter mean {sum(values)/len(values):6.1f} W, peak {max(values):6.1f} W over {len(values)} samples")
PY
echo
echo "== 5-minute summary of nova-1's power (summary=true)"
curl -s "$URL/sites/lyon/metrics?nodes=nova-1&metrics=wattmetre_power_watt&summary=true&job_id=1001" | python3 -c '
import json, sys
for r in json.load(sys.stdin):
    print("  %s  %6.1f W" % (r["timestamp"], r["value"]))'
