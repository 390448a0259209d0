#!/usr/bin/env python3
"""A job's window served from a store (doc/store.md): 20 nodes x 50 Hz x 1 h (3.6 M rows) backed up
from `kwatt serve --simulate`, imported into the embedded store and into PostgreSQL, then fetched
through `kwatt serve --store` by `kwatt fetch --job` and by one curl request, side by side with the
same fetches from the simulated server. Rewrites the section "## Serving a store" of BENCHMARKS.md
(the method: BENCHMARKS.md's header and bench/harness.py).

Usage: python3 bench/serve_store_bench.py [KWATT_BINARY] [--repeats N] [--no-write]
"""
from __future__ import annotations

import argparse
import datetime
import os
import shutil
import statistics
import sys
import tempfile
import time

import harness as h

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "peers"))
import throwaway_peer  # noqa: E402  (kwatt_test_peers' client)

ROOT = h.ROOT
SECTION_TITLE = "## Serving a store (`kwatt serve --store` to `kwatt fetch`)"
SECONDS = 3600
BAR_ROWS_PER_S = 1_000_000  # issue 11: a job's window through serve --store to kwatt fetch


def jobs_file(path: str) -> None:
    """The benchmark's job: harness.py's 20 nova nodes at 50 Hz, for one hour."""
    h.write_jobs_file(path)
    import json
    with open(path) as f:
        jobs = json.load(f)
    jobs["jobs"][0]["stopped_at"] = h.JOB_START_EPOCH + SECONDS
    jobs["jobs"][0]["phases"][0]["duration"] = SECONDS
    with open(path, "w") as f:
        json.dump(jobs, f)


def postgres_cluster(kwatt: str) -> throwaway_peer.Postgres:
    """A throwaway PostgreSQL 15 cluster on a Unix socket, fsync on (kwatt_test_peers postgres
    --durable, as the tests start one); close() stops it and removes it."""
    return throwaway_peer.Postgres(throwaway_peer.peers_binary(kwatt), durable=True)


def count_lines(path: str) -> int:
    with open(path, "rb") as f:
        return sum(chunk.count(b"\n") for chunk in iter(lambda: f.read(1 << 20), b""))


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("kwatt", nargs="?", default=os.path.join(ROOT, "build", "kwatt"))
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args()
    kwatt = os.path.abspath(args.kwatt)
    load = h.loadavg()
    tmp = tempfile.mkdtemp(prefix="kwatt_serve_store_bench_")
    env = dict(os.environ)
    postgres = None
    try:
        jobs = os.path.join(tmp, "jobs.json")
        jobs_file(jobs)
        job = f"{h.SITE}:4242"
        query = ["--job", job, "--metrics", h.METRIC]
        archive = os.path.join(tmp, "archive")
        with h.Server(kwatt, jobs, tmp, None, "simulated") as simulated:
            backup = h.run_measured([kwatt, "backup", "--api", simulated.base_url, *query, "-o",
                                      archive, "--quiet"], env, tmp, "backup")
            if backup["returncode"] != 0:
                raise h.BenchError(f"kwatt backup failed: {backup['stderr']}")
        stores = {"embedded": os.path.join(tmp, "store.kwatt")}
        postgres = postgres_cluster(kwatt)
        stores["PostgreSQL"] = postgres.uri()
        imports = {}
        for name, uri in stores.items():
            imported = h.run_measured([kwatt, "import", archive, "--store", uri], env, tmp,
                                      f"import-{name}")
            if imported["returncode"] != 0:
                raise h.BenchError(f"kwatt import into {name} failed: {imported['stderr']}")
            imports[name] = imported
        expected = None
        results: dict[str, dict] = {}
        servers = {"simulated (`--simulate`)": h.Server(kwatt, jobs, tmp, None, "sim")}
        for name, uri in stores.items():
            servers[f"{name} store (`--store`)"] = h.Server(kwatt, jobs, tmp, None, name,
                                                            store=uri)
        for label, server in servers.items():
            with server:
                url = h.metrics_url(server.base_url, h.NODES, h.JOB_START_EPOCH,
                                    h.JOB_START_EPOCH + SECONDS) + f"&metrics={h.METRIC}"
                rows, _ = h.curl_count_rows(url, None)
                expected = expected or rows
                if rows != expected:
                    raise h.BenchError(f"{label}: curl counted {rows} rows, not {expected}")
                fetch_times, curl_times = [], []
                cpu_before = server.cpu_seconds()
                for i in range(args.repeats):
                    out = os.path.join(tmp, "fetched.jsonl")
                    run = h.run_measured([kwatt, "fetch", "--api", server.base_url, *query, "-o",
                                           out, "--quiet"], env, tmp, "fetch")
                    if run["returncode"] != 0:
                        raise h.BenchError(f"{label}: kwatt fetch failed: {run['stderr']}")
                    got = count_lines(out)
                    if got != expected:
                        raise h.BenchError(f"{label}: kwatt fetch wrote {got} rows, not "
                                           f"{expected}")
                    os.unlink(out)
                    fetch_times.append(run["wall_s"])
                    curl_times.append(h.curl_timed(url, None)["seconds"])
                results[label] = {
                    "fetch_s": statistics.median(fetch_times),
                    "curl_s": statistics.median(curl_times),
                    "server_cpu_s": (server.cpu_seconds() - cpu_before) / args.repeats,
                    "server_peak_mb": server.peak_rss_mb(),
                }
    finally:
        h.stop_all_servers()
        if postgres:
            postgres.close()
        shutil.rmtree(tmp, ignore_errors=True)

    simulated_fetch = results["simulated (`--simulate`)"]["fetch_s"]
    m = h.machine_info()
    lines = [
        SECTION_TITLE,
        "",
        f"- Date: {datetime.datetime.utcnow():%Y-%m-%d %H:%M} UTC",
        f"- Machine: {m['nproc']} cores ({m['cpu_model']}), {m['mem_gib']:.1f} GiB of memory, "
        f"Linux {m['kernel']}; {h.kwatt_version(kwatt)}; load average {load} at the start",
        "- Reproduce: `make bench`, or `python3 bench/serve_store_bench.py build/kwatt`",
        f"- Data: the job {job}, {len(h.NODES)} nova nodes of type `monitor={h.METRIC}` (50 "
        f"rows/s/node) for {SECONDS} s: {expected:,} rows of `{h.METRIC}`, backed up from "
        "`kwatt serve --simulate` and imported (`kwatt import`) into an embedded store and into "
        "PostgreSQL 15 (a cluster of the benchmark's own, on a Unix socket).",
        f"- Each server in turn, nothing pinned (server and client share the 2 cores): `kwatt "
        f"fetch --job {job} --metrics {h.METRIC} -o FILE` (wall time; its rows counted), and one "
        "`curl` of the whole window (curl's transfer time); median of "
        f"{args.repeats}. Server CPU: per fetch, from /proc. Peak RSS: the server's VmHWM.",
        "",
        f"`kwatt backup` from the simulated server: {backup['wall_s']:.1f} s; `kwatt import` "
        + "; ".join(f"into the {name} store: {r['wall_s']:.1f} s "
                    f"({expected / r['wall_s']:,.0f} rows/s)" for name, r in imports.items())
        + ".",
        "",
        "| server | kwatt fetch (s) | rows/s | vs simulated | curl, one request (s) | "
        "server CPU a fetch (s) | server peak RSS (MB) |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for label, r in results.items():
        lines.append(f"| {label} | {r['fetch_s']:.2f} | {expected / r['fetch_s']:,.0f} | "
                     f"{r['fetch_s'] / simulated_fetch:.2f}× the time | {r['curl_s']:.2f} | "
                     f"{r['server_cpu_s']:.2f} | {r['server_peak_mb']:.0f} |")
    embedded = results["embedded store (`--store`)"]["fetch_s"]
    rate = expected / embedded
    lines += [
        "",
        "| bar | target | measured | met |",
        "|---|---:|---:|---|",
        f"| embedded store through `kwatt serve --store` to `kwatt fetch` | ≥ "
        f"{BAR_ROWS_PER_S:,} rows/s | {rate:,.0f} rows/s ({rate / BAR_ROWS_PER_S:.2f}× the bar) "
        f"| {'yes' if rate >= BAR_ROWS_PER_S else 'no'} |",
    ]
    section = "\n".join(lines) + "\n"
    print(section)
    if not args.no_write:
        h.publish(os.path.join(ROOT, "BENCHMARKS.md"), section, SECTION_TITLE,
                  {"results": results, "rows": expected}, "serve_store_bench")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except h.BenchError as error:
        print(f"serve_store_bench: {error}", file=sys.stderr)
        sys.exit(1)
