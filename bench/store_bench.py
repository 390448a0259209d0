#!/usr/bin/env python3
"""The store (doc/store.md): the embedded engine against a plain indexed SQLite table
(build/kwatt_store_bench), and the PostgreSQL engine against Kwollect's plain table, then at a
volume of 100 M rows (build/kwatt_postgres_bench). Both are C++ programs that print Markdown
tables; this script runs them in one go, checks the bars of issue 11 and rewrites the section
"## Store" of BENCHMARKS.md (the method: BENCHMARKS.md's header).

Usage: python3 bench/store_bench.py [KWATT_BINARY] [--volume N] [--no-write]
"""
from __future__ import annotations

import argparse
import datetime
import os
import re
import subprocess
import sys
import time

import harness as h

ROOT = h.ROOT
SECTION_TITLE = "## Store (`kwatt/store`: embedded SQLite engine, PostgreSQL engine)"

# The bars of issue 11.
BAR_EMBEDDED_INGEST = 500_000  # rows/s while a query runs
BAR_EMBEDDED_BYTES = 16.0      # bytes a row on disk
BAR_PG_INGEST = 100_000        # rows/s with its indexes
BAR_PG_QUERY_MS = 50.0         # 10 nodes x 1 metric x 10 min at 100 M rows


def run(argv: list[str]) -> tuple[str, float]:
    h.log("running " + " ".join(argv))
    began = time.monotonic()
    done = subprocess.run(argv, capture_output=True, text=True, timeout=4 * 3600)
    if done.returncode != 0:
        raise h.BenchError(f"{argv[0]} failed ({done.returncode}): {done.stderr[-2000:]}")
    return done.stdout, time.monotonic() - began


def cells(table: str, label: str) -> list[str]:
    """The cells after the first of the Markdown row whose first cell starts with `label`."""
    for line in table.splitlines():
        parts = [p.strip() for p in line.strip().strip("|").split("|")]
        if parts and parts[0].startswith(label):
            return parts[1:]
    raise h.BenchError(f"no row '{label}' in:\n{table}")


def number(text: str) -> float:
    return float(re.sub(r"[^0-9.eE+-]", "", text))


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("kwatt", nargs="?", default=os.path.join(ROOT, "build", "kwatt"))
    parser.add_argument("--volume", type=int, default=100_000_000)
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args()
    build = os.path.dirname(os.path.abspath(args.kwatt))
    load = h.loadavg()
    embedded, embedded_s = run([os.path.join(build, "kwatt_store_bench")])
    postgres, postgres_s = run([os.path.join(build, "kwatt_postgres_bench"),
                                "--volume", str(args.volume)])

    ingest = number(cells(embedded, "ingest, rows/s")[0])
    busy = number(re.search(r"in a loop .*?: ([0-9.]+) rows/s", embedded).group(1))
    bytes_row = number(cells(embedded, "on disk, bytes/row")[0])
    pg_ingest = number(cells(postgres, "kwatt engine")[2])
    plain_ingest = number(cells(postgres, "plain table")[2])
    pg_median = number(cells(postgres, "median of")[0])
    pg_slowest = number(cells(postgres, "slowest")[0])
    volume = re.search(r"query at ([0-9,]+) rows", postgres).group(1)

    def bar(label: str, target: str, measured: str, ok: bool) -> str:
        return f"| {label} | {target} | {measured} | {'yes' if ok else 'no'} |"

    m = h.machine_info()
    lines = [
        SECTION_TITLE,
        "",
        f"- Date: {datetime.datetime.utcnow():%Y-%m-%d %H:%M} UTC",
        f"- Machine: {m['nproc']} cores ({m['cpu_model']}), {m['mem_gib']:.1f} GiB of memory, "
        f"Linux {m['kernel']}; {h.kwatt_version(args.kwatt)}; load average {load} at "
        f"the start",
        "- Reproduce: `make bench`, or `python3 bench/store_bench.py build/kwatt` (the two "
        "programs alone: `build/kwatt_store_bench`, `build/kwatt_postgres_bench`; their options "
        "are in their first comment)",
        "- Data: 20 wattmeters at 50 Hz for 1 h (3.6 M rows), power as random walks of 0.1 W "
        "steps in 95.0..250.0 W, one batch per second of data as a collector writes them.",
        "- Embedded engine against a plain SQLite table `rows(time, device, metric, value, labels)`"
        " indexed on (device, metric, time), both in WAL mode with synchronous=NORMAL, committing "
        "about once a second; the query: 10 nodes, 1 metric, 10 min, on a store opened afresh, "
        f"best of 5 ({embedded_s:.0f} s in all).",
        "- PostgreSQL 15 (a cluster of the benchmark's own, fsync on): the engine (binary COPY "
        "into the partitioned table, a transaction per batch) against Kwollect's plain table and "
        "index filled with a prepared INSERT per row in a transaction per batch (what a client "
        "library's executemany does); then the table filled to the volume inside the server "
        "(INSERT ... SELECT from generate_series: 200 devices x 5 metrics at 1 Hz, indexes "
        "maintained, then VACUUM ANALYZE as autovacuum would), and 20 queries of 10 nodes x 1 metric "
        "x 10 min (6,000 rows each) through "
        f"the engine at random places, the first one just after the fill ({postgres_s:.0f} s in "
        "all).",
        "",
        "Embedded engine (`kwatt_store_bench`):",
        "",
        embedded.strip(),
        "",
        "PostgreSQL engine (`kwatt_postgres_bench`):",
        "",
        postgres.strip(),
        "",
        "| bar | target | measured | met |",
        "|---|---:|---:|---|",
        bar("embedded: ingest while a query runs", f"≥ {BAR_EMBEDDED_INGEST:,} rows/s",
            f"{busy:,.0f} rows/s ({busy / BAR_EMBEDDED_INGEST:.2f}× the bar)",
            busy >= BAR_EMBEDDED_INGEST),
        bar("embedded: bytes a row on disk", f"≤ {BAR_EMBEDDED_BYTES:.0f}", f"{bytes_row:.2f}",
            bytes_row <= BAR_EMBEDDED_BYTES),
        bar("PostgreSQL: ingest with its indexes", f"≥ {BAR_PG_INGEST:,} rows/s",
            f"{pg_ingest:,.0f} rows/s ({pg_ingest / plain_ingest:.1f}× the plain INSERTs)",
            pg_ingest >= BAR_PG_INGEST),
        bar(f"PostgreSQL: query at {volume} rows (median; slowest)",
            f"< {BAR_PG_QUERY_MS:.0f} ms", f"{pg_median:.1f} ms; {pg_slowest:.1f} ms",
            pg_median < BAR_PG_QUERY_MS),
        "",
        f"Not measured yet: `kwatt serve --store` to `kwatt fetch` (the serving part of issue 11 "
        f"comes next); embedded ingest alone was {ingest:,.0f} rows/s.",
    ]
    section = "\n".join(lines) + "\n"
    print(section)
    if not args.no_write:
        h.publish(os.path.join(ROOT, "BENCHMARKS.md"), section, SECTION_TITLE,
                  {"embedded": embedded, "postgres": postgres}, "store_bench")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except h.BenchError as error:
        print(f"store_bench: {error}", file=sys.stderr)
        sys.exit(1)
