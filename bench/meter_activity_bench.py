#!/usr/bin/env python3
"""The activity reader of `kwatt meter` (doc/meter/attribution.md, "Activity and targets") at scale: 10,000
processes and a realistic cgroup tree read at 1 Hz and attributed, in one period or not; side by
side with what users otherwise use, psutil (PyPI) iterating every process's cpu_times, on the same
tree (psutil.PROCFS_PATH pointed at it) and on this machine's own /proc with 2,000 real processes,
in one run, as ratios. Rewrites the section "## Meter: activity" of BENCHMARKS.md.

kwatt's side is build/kwatt_meter_activity_bench (bench/meter_activity_bench.cc): each read is
timed (wall and thread CPU) together with the cputime attribution of an interval's energy among
every target. psutil runs in its own virtualenv (make bench-deps: bench/.venv-psutil).

Usage: python3 bench/meter_activity_bench.py [KWATT_BINARY] [--reads K] [--no-write]
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import time

import harness as h

ROOT = h.ROOT
SECTION_TITLE = "## Meter: activity"
PROCESSES = 10_000
REAL_PROCESSES = 2_000
PERIOD_MS = 1000

# psutil's side, run with the psutil virtualenv's Python: per pass, the machine's cpu_times and
# every process's (user + system + children's), then each process's share of what they used in
# the period: the attribution a user writes around psutil.
PSUTIL_CODE = r"""
import json, sys, time
import psutil
procfs, reads, period = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
psutil.PROCFS_PATH = procfs
wall, cpu = [], []
previous, targets = {}, 0
deadline = time.monotonic()
for i in range(reads + 1):
    time.sleep(max(0.0, deadline - time.monotonic()))
    deadline += period
    w0, c0 = time.perf_counter(), time.thread_time()
    machine = psutil.cpu_times()
    current = {}
    for p in psutil.process_iter(["cpu_times"]):
        t = p.info["cpu_times"]
        if t is not None:
            current[p.pid] = t.user + t.system + t.children_user + t.children_system
    used = {pid: v - previous.get(pid, v) for pid, v in current.items()}
    busy = sum(used.values()) or 1.0
    shares = {pid: u / busy for pid, u in used.items()}
    w1, c1 = time.perf_counter(), time.thread_time()
    previous, targets = current, len(current)
    if i > 0:
        wall.append((w1 - w0) * 1e3)
        cpu.append((c1 - c0) * 1e3)
print(json.dumps({"wall_ms": wall, "cpu_ms": cpu, "targets": targets,
                  "version": psutil.__version__}))
"""


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(p * (len(ordered) - 1) + 0.5))]


def run_kwatt(helper: str, args: list[str]) -> dict:
    argv = [helper] + args
    h.log("running " + " ".join(argv))
    done = subprocess.run(argv, capture_output=True, text=True, timeout=3600)
    if done.returncode != 0:
        raise h.BenchError(f"{helper} failed ({done.returncode}): {done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def run_psutil(python: str, procfs: str, reads: int) -> dict:
    h.log(f"psutil on {procfs}: {reads} passes at 1 Hz")
    done = subprocess.run([python, "-c", PSUTIL_CODE, procfs, str(reads), str(PERIOD_MS / 1000)],
                          capture_output=True, text=True, timeout=3600)
    if done.returncode != 0:
        raise h.BenchError(f"psutil failed ({done.returncode}): {done.stderr[-2000:]}")
    result = json.loads(done.stdout)
    wall, cpu = result["wall_ms"], result["cpu_ms"]
    return {"targets": result["targets"], "version": result["version"],
            "total_median_ms": statistics.median(wall), "total_p99_ms": percentile(wall, 0.99),
            "total_max_ms": max(wall), "cpu_median_ms": statistics.median(cpu),
            "cpu_percent": 100 * sum(cpu) / (len(cpu) * PERIOD_MS)}


def spawn_sleepers(count: int) -> list[subprocess.Popen]:
    h.log(f"starting {count} real sleeping processes")
    return [subprocess.Popen(["sleep", "3600"], stdin=subprocess.DEVNULL,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            for _ in range(count)]


def stop_sleepers(sleepers: list[subprocess.Popen]) -> None:
    for p in sleepers:
        p.send_signal(signal.SIGKILL)
    for p in sleepers:
        p.wait()


def verdict(ms: float) -> str:
    return "yes" if ms < PERIOD_MS else "no"


def render(results: dict) -> str:
    m = results["machine"]
    fake, fake_ps = results["fake"], results["fake_psutil"]
    real, real_ps = results["real"], results["real_psutil"]
    rows = [
        (f"{PROCESSES:,} fake processes, {fake['cgroup_targets']} cgroups (tmpfs)", "kwatt", fake,
         fake["targets"]),
        ("10,000 fake processes (tmpfs)", f"psutil {fake_ps['version']}", fake_ps,
         fake_ps["targets"]),
        (f"this machine's /proc, {REAL_PROCESSES:,} real sleeping processes + the rest", "kwatt",
         real, real["targets"]),
        (f"this machine's /proc, {REAL_PROCESSES:,} real sleeping processes + the rest",
         f"psutil {real_ps['version']}", real_ps, real_ps["targets"]),
    ]
    lines = [
        SECTION_TITLE,
        "",
        f"- Date: {results['date']}",
        f"- Machine: {m['nproc']} cores ({m['cpu_model']}), {m['mem_gib']:.1f} GiB of memory, "
        f"Linux {m['kernel']}; load average {results['load']} at the start",
        "- Reproduce: `make bench-deps bench`, or `python3 bench/meter_activity_bench.py "
        "build/kwatt` (psutil from `bench/.venv-psutil`)",
        f"- Setup: {results['reads']} reads at 1 Hz after a first one (which fills the reader's "
        "tables). kwatt: `ActivityReader::Read` of every process (`all_processes`), 2 process "
        "trees and every cgroup to depth 4, then `Attribute` of an interval's energy among every "
        "target (`build/kwatt_meter_activity_bench`); psutil: `psutil.cpu_times()` and "
        "`process_iter(['cpu_times'])`, then each process's share of the period, the loop a "
        "Python user writes (`psutil.PROCFS_PATH` pointed at the same tree). Between two reads "
        "of the fake tree (not timed): 5 % of the processes run, 20 exit and are reaped, 20 are "
        "born, 50 cgroups use CPU. Time = wall time of one read + attribution; CPU = the "
        "reading thread's CPU time. The fake tree is on tmpfs: a kernel's procfs formats each "
        "file on read, so the real /proc rows are the truth of a node, the fake ones of scale.",
        "",
        "| case | tool | targets | time (ms, median) | p99 | max | CPU per read (ms) | "
        "CPU at 1 Hz | within one period |",
        "|---|---|---:|---:|---:|---:|---:|---:|---|",
    ]
    for label, tool, r, targets in rows:
        lines.append(
            f"| {label} | {tool} | {targets:,} | {r['total_median_ms']:.1f} | "
            f"{r['total_p99_ms']:.1f} | {r['total_max_ms']:.1f} | {r['cpu_median_ms']:.1f} | "
            f"{r['cpu_percent']:.1f} % | {verdict(r['total_max_ms'])} |")
    lines += [
        "",
        "| ratio (psutil / kwatt) | time per read | CPU per read |",
        "|---|---:|---:|",
        f"| 10,000 fake processes | {fake_ps['total_median_ms'] / fake['total_median_ms']:.1f}× | "
        f"{fake_ps['cpu_median_ms'] / fake['cpu_median_ms']:.1f}× |",
        f"| this machine's /proc | {real_ps['total_median_ms'] / real['total_median_ms']:.1f}× | "
        f"{real_ps['cpu_median_ms'] / real['cpu_median_ms']:.1f}× |",
        "",
        f"Bar (issue): 10,000 processes attributed at 1 Hz within one period: kwatt's slowest "
        f"read and attribution took {fake['total_max_ms']:.0f} ms of the 1,000 ms period "
        f"({fake['cpu_percent']:.1f} % of a core), {verdict(fake['total_max_ms'])}. kwatt reads "
        "per process `stat` and, for nanoseconds, the process's CPU-time clock on this machine's "
        "/proc (one syscall) or `schedstat` on the fake tree (a second file); psutil reads `stat` "
        "alone. kwatt also reads the cgroups (psutil has none).",
    ]
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("kwatt", nargs="?", default=os.path.join(ROOT, "build", "kwatt"))
    parser.add_argument("--reads", type=int, default=30)
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args()
    build = os.path.dirname(os.path.abspath(args.kwatt))
    helper = os.path.join(build, "kwatt_meter_activity_bench")
    if not os.access(helper, os.X_OK):
        raise h.BenchError(f"no {helper}: build it (cmake --build build --target "
                           "kwatt_meter_activity_bench)")
    venv = os.environ.get("PSUTIL_VENV", os.path.join(ROOT, "bench", ".venv-psutil"))
    python = os.path.join(venv, "bin", "python")
    if not os.access(python, os.X_OK):
        raise h.BenchError(f"no psutil virtualenv at {venv}: make bench-deps")
    base = "/dev/shm" if os.path.isdir("/dev/shm") else "/tmp"
    tree = os.path.join(base, f"kwatt_meter_activity_bench_{os.getpid()}")
    results = {"date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
               "machine": h.machine_info(), "load": h.loadavg(), "reads": args.reads}
    try:
        results["fake"] = run_kwatt(helper, ["fake", "--root", tree, "--processes",
                                             str(PROCESSES), "--reads", str(args.reads),
                                             "--period-ms", str(PERIOD_MS), "--keep"])
        results["fake_psutil"] = run_psutil(python, os.path.join(tree, "proc"), args.reads)
    finally:
        shutil.rmtree(tree, ignore_errors=True)
    sleepers = spawn_sleepers(REAL_PROCESSES)
    try:
        time.sleep(1)
        results["real"] = run_kwatt(helper, ["real", "--reads", str(args.reads),
                                             "--period-ms", str(PERIOD_MS)])
        results["real_psutil"] = run_psutil(python, "/proc", args.reads)
    finally:
        stop_sleepers(sleepers)
    section = render(results)
    print(section)
    if not args.no_write:
        h.write_section(os.path.join(ROOT, "BENCHMARKS.md"), section, SECTION_TITLE)
    return 0 if results["fake"]["total_max_ms"] < PERIOD_MS else 1


if __name__ == "__main__":
    try:
        sys.exit(main())
    except h.BenchError as error:
        h.log(f"error: {error}")
        sys.exit(2)
