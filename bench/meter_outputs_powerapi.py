"""PowerAPI's own outputs fed the same stream of power reports as bench/meter_outputs_bench.cc
feeds kwatt's, for bench/meter_outputs_bench.py. Runs in bench/.venv-powerapi (PowerAPI 2.10.0).

Usage: python meter_outputs_powerapi.py --targets T --domains D --reports N [--churn] --csv DIR

Per interval, the reports a PowerAPI formula emits: one per domain (target "rapl") and one per
target and domain, with the metadata scope and socket (the tags a user gives PowerAPI's
Prometheus output; with every metadata key as a label, as it does when given none, the ratio would
make a new series at each interval). Prometheus: PrometheusDB.save_many, then a scrape
(prometheus_client's generate_latest) per interval. CSV: CsvDB.save_many per interval. Prints one
JSON object per output: CPU seconds of this process, series exposed at the end, text bytes.
"""

from __future__ import annotations

import argparse
import datetime
import json
import time

from powerapi.database.csv.csvdb import CsvDB
from powerapi.database.prometheus.prometheus_db import PrometheusDB
from powerapi.report import PowerReport
from prometheus_client import REGISTRY, generate_latest

TAGS = ["scope", "socket"]


def intervals(targets: int, domains: int, reports: int, churn: bool):
    start = datetime.datetime(2025, 4, 18, 18, 13, 20)
    for r in range(reports):
        ts = start + datetime.timedelta(seconds=r + 1)
        batch = []
        for d in range(domains):
            scope, socket = ("cpu" if d % 2 == 0 else "dram"), d // 2
            meta = {"scope": scope, "socket": socket}
            batch.append(PowerReport(ts, "nova-1", "rapl", 80.0 if d % 2 == 0 else 12.0,
                                     dict(meta)))
            for t in range(targets):
                pid = 100000 + r * targets + t if churn else 100 + t
                power = (1000 + (t * 37 + r * 11) % 5000) / 1e4
                batch.append(PowerReport(ts, "nova-1", f"pid:{pid}:{1000 + pid}", power,
                                         dict(meta)))
        yield batch


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--targets", type=int, required=True)
    ap.add_argument("--domains", type=int, required=True)
    ap.add_argument("--reports", type=int, required=True)
    ap.add_argument("--churn", action="store_true")
    ap.add_argument("--csv", required=True, help="a new directory for PowerAPI's CSV output")
    args = ap.parse_args()
    batches = list(intervals(args.targets, args.domains, args.reports, args.churn))

    prometheus = PrometheusDB(PowerReport, 0, "127.0.0.1", "powerapi_power_watts",
                              "PowerAPI's power reports", list(TAGS))
    cpu = time.process_time()
    size = 0
    for batch in batches:
        prometheus.save_many(batch)
        size = len(generate_latest(REGISTRY))  # a scrape per interval
    cpu = time.process_time() - cpu
    text = generate_latest(REGISTRY).decode()
    series = sum(1 for line in text.splitlines() if line.startswith("powerapi_power_watts{"))
    print(json.dumps({"output": "powerapi-prometheus", "cpu_s": cpu, "reports": args.reports,
                      "bytes": size, "lines": series}), flush=True)

    csv = CsvDB(PowerReport, list(TAGS), args.csv)
    csv.connect()
    cpu = time.process_time()
    for batch in batches:
        csv.save_many(batch)
    csv.disconnect()
    cpu = time.process_time() - cpu
    print(json.dumps({"output": "powerapi-csv", "cpu_s": cpu, "reports": args.reports}),
          flush=True)


if __name__ == "__main__":
    main()
