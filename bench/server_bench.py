#!/usr/bin/env python3
"""Benchmark of `kwatt serve --simulate`: metrics throughput on one core, and peak memory.

Usage: python3 bench/server_bench.py [KWATT_BINARY] [--repeats N] [--no-write]

What it does (standard library only, plus `curl` and `taskset`):
  1. writes a jobs file: one Lyon job over the 20 nova nodes, of type
     monitor=wattmetre_power_watt (each node's wattmeter then reports 50 rows/s), 6 h long,
     one busy phase;
  2. starts the server pinned to core 0 (`taskset -c 0`) with that file;
  3. throughput: `curl -s URL -o /dev/null`, pinned to core 1, for ~1 M and ~10 M rows of
     wattmetre_power_watt over the 20 nodes (20 nodes x 50 rows/s = 1000 rows/s, so windows of
     1000 s and 10000 s); the rows are counted exactly in a separate, untimed run; the timed runs
     take curl's own transfer time (time_total); median of N runs (default 3);
  4. memory: the server's peak RSS (VmHWM), a fresh server per case, for a 10-row answer and for a
     10 M-row answer;
  5. prints a markdown table and writes the section "## Server (`kwatt serve --simulate`)" of
     BENCHMARKS.md (the other sections are kept), and bench/out/server_bench.json.

Every server started is stopped (SIGTERM, then SIGKILL), even on error; temp files are removed.
MB means 10^6 bytes throughout.
"""

from __future__ import annotations

import argparse
import datetime
import os
import shutil
import signal
import sys
import tempfile
import time

import harness as h

SECTION_TITLE = "## Server (`kwatt serve --simulate`)"

# The bars of the issue.
BAR_ROWS_PER_S = 1_000_000
BAR_MEMORY_MB = 50.0

SERVER_CORE = 0
CLIENT_CORE = 1


# ---------------------------------------------------------------------------------------------
# Measurements


def throughput_case(server: h.Server, label: str, target_rows: int, repeats: int,
                    client_core: int | None) -> dict:
    window = h.window_for_rows(target_rows)
    url = h.metrics_url(server.base_url, h.NODES, h.JOB_START_EPOCH, h.JOB_START_EPOCH + window)
    h.log(f"{label}: counting rows ({window} s window, 20 nodes)")
    rows, size = h.curl_count_rows(url, client_core)
    want = h.expected_rows(len(h.NODES), window)
    if rows != want:
        h.log(f"WARNING: {label}: {rows} rows, expected {want} from 50 rows/s/node")
    runs = []
    for i in range(repeats):
        cpu0 = server.cpu_seconds()
        run = h.curl_timed(url, client_core)
        run["server_cpu_seconds"] = server.cpu_seconds() - cpu0
        if run["bytes"] != size:
            raise h.BenchError(f"{label}: run {i + 1} got {run['bytes']} bytes, the counting run "
                             f"{size}: the answer is not deterministic")
        runs.append(run)
        h.log(f"{label}: run {i + 1}/{repeats}: {run['seconds']:.3f} s, "
            f"{rows / run['seconds'] / 1e6:.2f} M rows/s, {size / run['seconds'] / 1e6:.0f} MB/s, "
            f"server CPU {run['server_cpu_seconds']:.2f} s")
    seconds = h.median_of(runs, "seconds")
    return {
        "label": label, "window_s": window, "rows": rows, "bytes": size,
        "runs_seconds": h.runs_of(runs, "seconds"),
        "median_seconds": seconds,
        "rows_per_s": rows / seconds,
        "mb_per_s": size / seconds / 1e6,
        "server_cpu_seconds_median": h.median_of(runs, "server_cpu_seconds"),
        "bytes_per_row": size / rows if rows else 0,
    }


def memory_case(binary: str, jobs_file: str, tmpdir: str, label: str, nodes: list[str],
                window: int, server_core: int | None, client_core: int | None) -> dict:
    """A fresh server, one query: its peak RSS before and after."""
    with h.Server(binary, jobs_file, tmpdir, server_core, f"mem-{label}") as server:
        idle = server.peak_rss_mb()
        url = h.metrics_url(server.base_url, nodes, h.JOB_START_EPOCH, h.JOB_START_EPOCH + window)
        h.log(f"memory, {label}: fresh server, peak RSS at start {idle:.1f} MB")
        rows, size = h.curl_count_rows(url, client_core)  # untimed: only the memory matters
        if not server.alive():
            raise h.BenchError(f"server died during the {label} query: {server.stderr()}")
        peak = server.peak_rss_mb()
        rss = server.rss_mb()
        h.log(f"memory, {label}: {size} bytes; peak RSS {peak:.1f} MB, RSS after {rss:.1f} MB")
    return {"label": label, "rows": rows, "bytes": size,
            "peak_rss_at_start_mb": idle, "peak_rss_mb": peak, "rss_after_mb": rss}


# ---------------------------------------------------------------------------------------------
# Report


def render(results: dict) -> str:
    m = results["machine"]
    tp = results["throughput"]
    mem = results["memory"]
    small, big = mem["small"], mem["large"]
    diff = big["peak_rss_mb"] - small["peak_rss_mb"]
    best_tp = min(c["rows_per_s"] for c in tp)
    lines = [
        SECTION_TITLE,
        "",
        f"- Date: {results['date']}",
        f"- Machine: {m['nproc']} cores ({m['cpu_model']}), "
        f"{m['mem_gib']:.1f} GiB of memory, Linux {m['kernel']}; {results['version']}; "
        f"load average {results['loadavg_start']} at the start",
        f"- Reproduce: `make bench`, or `python3 bench/server_bench.py build/kwatt`",
        f"- Setup: server pinned to core {results['server_core']} (`taskset -c "
        f"{results['server_core']}`), `curl -s URL -o /dev/null` pinned to core "
        f"{results['client_core']}; one Lyon job over the 20 nova nodes of type "
        f"`monitor={h.METRIC}` (50 rows/s/node); `metrics={h.METRIC}`, all 20 nodes; "
        f"time = curl's transfer time, median of {results['repeats']} runs; rows counted "
        f"exactly in a separate run. Memory: peak RSS (`VmHWM`) of a fresh server per case. "
        f"MB = 10^6 bytes.",
        "",
        "| case | rows | answer (MB) | time (s, median) | rows/s | MB/s | server CPU (s) |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for c in tp:
        lines.append(
            f"| {c['label']} ({c['window_s']} s window) | {c['rows']:,} | {c['bytes'] / 1e6:,.1f} "
            f"| {c['median_seconds']:.3f} | {c['rows_per_s']:,.0f} | {c['mb_per_s']:,.0f} "
            f"| {c['server_cpu_seconds_median']:.2f} |")
    lines += [
        "",
        "| memory case | rows | answer (MB) | peak RSS at start (MB) | peak RSS (MB) |",
        "|---|---:|---:|---:|---:|",
    ]
    for c in (small, big):
        lines.append(f"| {c['label']} | {c['rows']:,} | {c['bytes'] / 1e6:,.1f} "
                     f"| {c['peak_rss_at_start_mb']:.1f} | {c['peak_rss_mb']:.1f} |")
    busy = [c for c in tp if c["server_cpu_seconds_median"] < 0.9 * c["median_seconds"]]
    if busy:
        lines += ["", "Note: the server got less than 90 % of its core during "
                  + ", ".join(c["label"] for c in busy)
                  + " (server CPU time < 0.9 × wall time: another process shared core "
                  f"{results['server_core']}; load average {results['loadavg_start']} at the "
                  f"start, {results['loadavg_end']} at the end): its rates are lower bounds."]
    tp_ratio = best_tp / BAR_ROWS_PER_S
    mem_ratio = diff / BAR_MEMORY_MB
    lines += [
        "",
        "| bar | target | measured | ratio | met |",
        "|---|---:|---:|---:|---|",
        f"| throughput on one core (lower of the two sizes) | ≥ {BAR_ROWS_PER_S:,} rows/s "
        f"| {best_tp:,.0f} rows/s | {tp_ratio:.2f}× the bar | {'yes' if tp_ratio >= 1 else 'no'} |",
        f"| peak memory, 10 M rows minus 10 rows | ≤ {BAR_MEMORY_MB:.0f} MB | {diff:+.1f} MB "
        f"| {mem_ratio:.2f} of the allowance | {'yes' if diff <= BAR_MEMORY_MB else 'no'} |",
        "",
    ]
    return "\n".join(lines)


# Helpers of the other benchmarks (fetch_bench, backup_bench), which import this module.

# ---------------------------------------------------------------------------------------------


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("binary", nargs="?", default=os.path.join(h.ROOT, "build", "kwatt"),
                    help="the kwatt binary (default: build/kwatt)")
    ap.add_argument("--repeats", type=int, default=3, help="timed runs per size (median kept)")
    ap.add_argument("--sizes", default="1000000,10000000",
                    help="rows of the throughput queries, comma-separated")
    ap.add_argument("--no-write", action="store_true",
                    help="do not touch BENCHMARKS.md nor bench/out/")
    ap.add_argument("--benchmarks-md", default=os.path.join(h.ROOT, "BENCHMARKS.md"))
    args = ap.parse_args()

    binary = os.path.abspath(args.binary)
    if not os.access(binary, os.X_OK):
        h.log(f"no executable kwatt at {binary} (build it with `make build`)")
        return 2
    for tool in ("curl", "taskset"):
        if shutil.which(tool) is None:
            h.log(f"`{tool}` is missing (apt-get install curl util-linux)")
            return 2
    ncpu = os.cpu_count() or 1
    server_core, client_core = SERVER_CORE, CLIENT_CORE
    if ncpu < 2:
        h.log("only one core: server and curl share core 0")
        client_core = SERVER_CORE
    sizes = [int(s) for s in args.sizes.split(",") if s]
    if h.window_for_rows(max(sizes)) > h.JOB_SECONDS:
        h.log(f"the job lasts {h.JOB_SECONDS} s: at most {h.JOB_SECONDS * 1000:,} rows")
        return 2

    signal.signal(signal.SIGTERM, h.on_signal)
    signal.signal(signal.SIGHUP, h.on_signal)
    t_start = time.monotonic()
    tmpdir = tempfile.mkdtemp(prefix="kwatt-server-bench-")
    try:
        jobs_file = os.path.join(tmpdir, "jobs.json")
        h.write_jobs_file(jobs_file)

        results: dict = {
            "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
            "machine": h.machine_info(),
            "version": h.kwatt_version(binary),
            "binary": binary,
            "repeats": args.repeats,
            "server_core": server_core,
            "client_core": client_core,
            "loadavg_start": h.loadavg(),
        }

        # Throughput, on one server.
        with h.Server(binary, jobs_file, tmpdir, server_core, "throughput") as server:
            results["throughput"] = [
                throughput_case(server, f"{n / 1e6:g} M rows", n, args.repeats, client_core)
                for n in sizes]
            results["throughput_server_peak_rss_mb"] = server.peak_rss_mb()

        # Memory, a fresh server per case: 10 rows (10 nodes, one instant), then 10 M rows.
        big_window = h.window_for_rows(10_000_000)
        results["memory"] = {
            "small": memory_case(binary, jobs_file, tmpdir, "10 rows", h.NODES[:10], 0,
                                 server_core, client_core),
            "large": memory_case(binary, jobs_file, tmpdir, "10 M rows", h.NODES, big_window,
                                 server_core, client_core),
        }
        large = results["memory"]["large"]
        for c in results["throughput"]:
            if c["window_s"] == big_window and c["bytes"] != large["bytes"]:
                raise h.BenchError("the 10 M-row answer differs between two servers")

        results["loadavg_end"] = h.loadavg()
        results["elapsed_s"] = time.monotonic() - t_start
        section = render(results)
        print(section)
        if not args.no_write:
            h.publish(args.benchmarks_md, section, SECTION_TITLE, results, "server_bench")
        h.log(f"done in {results['elapsed_s']:.0f} s")
        return 0
    except h.BenchError as e:
        h.log(f"FAILED: {e}")
        return 1
    finally:
        h.stop_all_servers()
        shutil.rmtree(tmpdir, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
