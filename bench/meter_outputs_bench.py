#!/usr/bin/env python3
"""Benchmark of the meter's outputs, side by side with PowerAPI's own outputs.

Usage: python3 bench/meter_outputs_bench.py [KWATT_BINARY] [--no-write]

What it does:
  1. builds a stream of reports (bench/meter_outputs_bench.cc, the real cputime attribution) and
     writes it to each of kwatt's outputs: CPU time of the writing thread per interval (what the
     meter's output thread spends), for a node of 1,000 processes and 4 RAPL domains over 100
     intervals, and for short-lived processes (100 new ones every interval, 600 intervals);
     the HTTP outputs against real peers started here on 127.0.0.1: Debian's influxd 1.6 and
     `kwatt serve --auth`, every row sent (rows per second, wall time, including the peer);
  2. side by side, PowerAPI 2.10.0's own Prometheus and CSV outputs (bench/.venv-powerapi, `make
     bench-deps`) fed the same power reports per interval (bench/meter_outputs_powerapi.py): its
     PrometheusDB (a Gauge set per report, then a scrape per interval) and CsvDB;
  3. writes the section "## Meter: outputs" of BENCHMARKS.md and bench/out/meter_outputs.json.

Every server started is stopped, temporary files removed.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import urllib.request

import harness as h

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "peers"))
import throwaway_peer  # noqa: E402  (kwatt_test_peers' client)

ROOT = h.ROOT
SECTION_TITLE = "## Meter: outputs"
DRIVER = os.path.join(ROOT, "build", "kwatt_meter_outputs_bench")  # beside the kwatt binary
POWERAPI_VENV = os.environ.get("POWERAPI_VENV", os.path.join(ROOT, "bench", ".venv-powerapi"))


def driver(args: list[str]) -> list[dict]:
    out = subprocess.run([DRIVER, *args], capture_output=True, text=True, timeout=1800)
    if out.returncode != 0:
        raise RuntimeError(f"{DRIVER} failed: {out.stderr}")
    rows = [json.loads(line) for line in out.stdout.splitlines() if line.strip()]
    for row in rows:
        if row.get("error"):
            raise RuntimeError(f"{row['output']}: {row['error']}")
    return rows


def powerapi(targets: int, domains: int, reports: int, churn: bool, tmp: str) -> dict:
    python = os.path.join(POWERAPI_VENV, "bin", "python")
    if not os.access(python, os.X_OK):
        raise RuntimeError(f"{python} is missing: run make bench-deps")
    csv_dir = tempfile.mkdtemp(dir=tmp)
    argv = [python, os.path.join(ROOT, "bench", "meter_outputs_powerapi.py"), "--targets",
            str(targets), "--domains", str(domains), "--reports", str(reports), "--csv", csv_dir]
    if churn:
        argv.append("--churn")
    out = subprocess.run(argv, capture_output=True, text=True, timeout=3600)
    if out.returncode != 0:
        raise RuntimeError(f"PowerAPI's outputs failed: {out.stderr[-2000:]}")
    shutil.rmtree(csv_dir, ignore_errors=True)
    return {row["output"]: row for row in map(json.loads, out.stdout.splitlines())}


class Influxd(throwaway_peer.ThrowawayPeer):
    """Debian's influxd 1.6 on 127.0.0.1, data in a directory of its own (kwatt_test_peers influxd,
    as src/testing/influxd.h starts it for the unit tests)."""

    def __init__(self, kwatt: str):
        super().__init__(throwaway_peer.peers_binary(kwatt), "influxd")
        self.url = self.where["url"]

    def count(self, db: str) -> int:
        query = urllib.parse.urlencode({"db": db, "q": "SELECT count(energy_uj) FROM "
                                                       "power_consumption"})
        with urllib.request.urlopen(f"{self.url}/query?{query}", timeout=60) as answer:
            doc = json.load(answer)
        return doc["results"][0]["series"][0]["values"][0][1]

    def stop(self) -> None:
        self.close()


def per_interval_ms(row: dict) -> float:
    return row["cpu_s"] / row["reports"] * 1e3


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("binary", nargs="?", default=os.path.join(ROOT, "build", "kwatt"))
    ap.add_argument("--no-write", action="store_true")
    ap.add_argument("--benchmarks-md", default=os.path.join(ROOT, "BENCHMARKS.md"))
    args = ap.parse_args()
    kwatt = os.path.abspath(args.binary)
    global DRIVER
    DRIVER = os.path.join(os.path.dirname(kwatt), "kwatt_meter_outputs_bench")
    tmp = tempfile.mkdtemp(prefix="kwatt_outputs_bench_")
    servers = []
    results: dict = {"machine": h.machine_info(), "loadavg": h.loadavg()}
    try:
        # A node of 1,000 processes, 4 domains, 100 intervals.
        big = ["--targets", "1000", "--domains", "4", "--reports", "100"]
        h.log("kwatt's file outputs and the exposition, 1,000 processes")
        files = driver(big + ["--prometheus", "--output", f"csv:{tmp}/m.csv", "--output",
                              f"jsonl:{tmp}/m.jsonl", "--output", f"textfile:{tmp}", "--output",
                              f"archive:{tmp}/archive"])
        every = driver(big + ["--max-targets", "0", "--prometheus"])
        h.log("PowerAPI's outputs, 1,000 processes")
        peer = powerapi(1000, 4, 100, False, tmp)
        # Short-lived processes: 100 new ones every interval, 600 intervals.
        churn = ["--targets", "100", "--domains", "4", "--reports", "600", "--churn"]
        h.log("churn: kwatt's exposition, then PowerAPI's")
        churn_kwatt = driver(churn + ["--prometheus"])
        churn_peer = powerapi(100, 4, 600, True, tmp)
        # HTTP outputs against their real peers, every target's rows.
        h.log("InfluxDB and Kwollect, against influxd and kwatt serve")
        influxd = Influxd(kwatt)
        servers.append(influxd)
        serve = subprocess.Popen([kwatt, "serve", "--simulate", "--port", "0", "--auth",
                                  "bench:bench"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                 text=True)
        servers.append(serve)
        api = serve.stdout.readline().strip()
        if not api.startswith("http://"):
            raise RuntimeError(f"kwatt serve did not start: {serve.stderr.read()}")
        authed = api.replace("http://", "http://bench:bench@")
        http = driver(big + ["--max-targets", "0", "--output", f"influxdb:{influxd.url}/bench",
                             "--output", f"kwollect:{authed}/sites/lyon"])
        results["influx_points_stored"] = influxd.count("bench")
        results.update({"files": files, "every_target": every, "powerapi": peer,
                        "churn_kwatt": churn_kwatt, "churn_powerapi": churn_peer, "http": http})
    finally:
        for server in servers:
            if isinstance(server, Influxd):
                server.stop()
            elif server.poll() is None:
                server.terminate()
                server.wait(timeout=30)
        shutil.rmtree(tmp, ignore_errors=True)

    section = render(results)
    print(section)
    if not args.no_write:
        h.publish(args.benchmarks_md, section, SECTION_TITLE, results, "meter_outputs")
    return 0


def render(r: dict) -> str:
    by = {row["output"].split(":")[0]: row for row in r["files"]}
    prom10 = by["prometheus"]
    prom_all = r["every_target"][0]
    peer_prom, peer_csv = r["powerapi"]["powerapi-prometheus"], r["powerapi"]["powerapi-csv"]
    churn, churn_peer = r["churn_kwatt"][0], r["churn_powerapi"]["powerapi-prometheus"]
    http = {row["output"].split(":")[0]: row for row in r["http"]}
    m = r["machine"]
    lines = [
        SECTION_TITLE,
        "",
        f"`python3 bench/meter_outputs_bench.py` on {m['nproc']} CPUs ({m['cpu_model']}), load "
        f"{r['loadavg']}. CPU time of the writing thread per interval (what the meter's output "
        "thread spends), a node of 1,000 processes and 4 RAPL domains (2 packages, 2 DRAMs) over "
        "100 intervals; PowerAPI 2.10.0's own outputs fed the same power reports per interval "
        "(one per domain and one per target and domain, tags scope and socket).",
        "",
        "kwatt's exposition holds a counter and a gauge per series (PowerAPI's a gauge), and the "
        "domains' and the meter's own families.",
        "",
        "| output | CPU per interval | rows or series | PowerAPI's | PowerAPI / kwatt |",
        "|---|---|---|---|---|",
        f"| Prometheus, every target (render + a scrape per interval) | {per_interval_ms(prom_all):.2f} ms "
        f"| {prom_all['lines']:,} series, {prom_all['bytes'] / 1e6:.2f} MB | "
        f"{per_interval_ms(peer_prom):.1f} ms, {peer_prom['lines']:,} series | "
        f"{peer_prom['cpu_s'] / prom_all['cpu_s']:.0f}x |",
        f"| Prometheus, top 10 targets (the default) | {per_interval_ms(prom10):.2f} ms | "
        f"{prom10['lines']:,} series, {prom10['bytes'] / 1e3:.0f} kB | (every target, above) | "
        f"{peer_prom['cpu_s'] / prom10['cpu_s']:.0f}x |",
        f"| CSV (every target) | {per_interval_ms(by['csv']):.2f} ms | "
        f"{by['csv']['rows'] // by['csv']['reports']:,} rows | {per_interval_ms(peer_csv):.1f} ms |"
        f" {peer_csv['cpu_s'] / by['csv']['cpu_s']:.0f}x |",
        f"| JSON Lines (every target) | {per_interval_ms(by['jsonl']):.2f} ms | one line | | |",
        f"| textfile (top 10) | {per_interval_ms(by['textfile']):.2f} ms | "
        f"{by['textfile']['rows'] // by['textfile']['reports']} rows | | |",
        f"| archive (top 10) | {per_interval_ms(by['archive']):.2f} ms | "
        f"{by['archive']['rows'] // by['archive']['reports']} rows | | |",
        "",
        "Short-lived processes (100 new ones every interval, 600 intervals): the exposition after "
        "the last interval, and the CPU per interval.",
        "",
        "| | series exposed at the end | text | CPU per interval |",
        "|---|---|---|---|",
        f"| kwatt (top 10 + `other`, counters kept) | {churn['lines']:,} | "
        f"{churn['bytes'] / 1e3:.0f} kB | {per_interval_ms(churn):.2f} ms |",
        f"| PowerAPI (every target ever seen) | {churn_peer['lines']:,} | "
        f"{churn_peer['bytes'] / 1e6:.1f} MB | {per_interval_ms(churn_peer):.1f} ms |",
        "",
        "HTTP outputs against their real peers on loopback, every target's rows (no bound), "
        "batched as the defaults say (at most 5,000 rows a request):",
        "",
        "| output | rows | wall | rows/s | client CPU per interval |",
        "|---|---|---|---|---|",
    ]
    for key, label in (("influxdb", "InfluxDB line protocol to influxd 1.6"),
                       ("kwollect", "Kwollect push to `kwatt serve --auth`")):
        row = http[key]
        lines.append(f"| {label} | {row['rows']:,} | {row['wall_s']:.1f} s | "
                     f"{row['rows'] / row['wall_s']:,.0f} | {per_interval_ms(row):.1f} ms |")
    lines += [
        "",
        f"influxd holds {r['influx_points_stored']:,} points afterwards (every one sent). PowerAPI's "
        "Prometheus output keeps a series for every target it ever saw (and, given no tags, "
        "makes every metadata key a label, the ratio included: a new series each interval); kwatt "
        "exposes a bounded set whose counters never go down (doc/meter/outputs.md, \"Outputs\").",
    ]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
