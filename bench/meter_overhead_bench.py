#!/usr/bin/env python3
"""What measuring costs (doc/meter/attribution.md, "Cost"): the CPU of `kwatt meter --pid P` and
of `kwatt.measure` (the meter in the measured Python process) on a machine with 600 processes
alive, at 1 s and 100 ms, side by side with the same meter without attribution
(`--no-attribution`, `attribute=False`), in one run; and the share of the energy given to a
target that only sleeps (the meter's own work is never a target's). Rewrites the section
"## Meter: what measuring costs" of BENCHMARKS.md.

The meter reads a simulated RAPL machine (`kwatt simulate rapl`, 2 packages and 2 DRAMs, in
another process) and this machine's real /proc. CPU is the kernel's nanosecond run time of the
meter's threads (task/*/schedstat), over the run after a warm-up: for `kwatt meter` every thread
of its process; for kwatt.measure every thread of the Python process (whose own thread sleeps).

Usage: python3 bench/meter_overhead_bench.py [KWATT_BINARY] [--seconds S] [--before OLD_KWATT]
       [--no-write]
(--before: the same `kwatt meter` cases with another binary, for a before/after.)
"""
from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time

import harness as h

ROOT = h.ROOT
SECTION_TITLE = "## Meter: what measuring costs"
PROCESSES = 600
WARMUP_S = 2.0

# kwatt.measure's side: a block that only sleeps, measured in this Python process; prints the
# process's CPU over the run (every thread's schedstat) and the block's share of the energy.
MEASURE_CODE = r"""
import json, os, sys, time
import kwatt
sysfs, period, seconds, warmup = sys.argv[1], float(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4])
attribute = sys.argv[5] == "1"

def cpu_ns():
    total = 0
    for tid in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{tid}/schedstat") as f:
                total += int(f.read().split()[0])
        except OSError:
            pass
    return total

with kwatt.measure(period=period, sysfs_root=sysfs, sources=["rapl"], attribute=attribute) as m:
    time.sleep(warmup)
    c0, w0 = cpu_ns(), time.monotonic()
    time.sleep(seconds)
    c1, w1 = cpu_ns(), time.monotonic()
measured = sum(m.measured_joules.values())
block = sum(m.joules.values())
print(json.dumps({"cpu_s": (c1 - c0) / 1e9, "wall_s": w1 - w0,
                  "share": block / measured if measured > 0 and attribute else None}))
"""


def tasks_cpu_seconds(pid: int) -> float:
    """Every thread's run time of `pid` (schedstat, nanoseconds)."""
    total = 0
    try:
        for tid in os.listdir(f"/proc/{pid}/task"):
            try:
                with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                    total += int(f.read().split()[0])
            except OSError:
                pass
    except OSError:
        pass
    return total / 1e9


def processes_alive() -> int:
    return sum(1 for d in os.listdir("/proc") if d.isdigit())


def run_cli(kwatt: str, sysfs: str, pid: int, period: str, attribute: bool, seconds: float,
            tmp: str) -> dict:
    out = os.path.join(tmp, "m.jsonl")
    argv = [kwatt, "meter", "--sysfs-root", sysfs, "--source", "rapl", "--period", period,
            "-o", f"jsonl:{out}"]
    argv += ["--pid", str(pid)] if attribute else ["--no-attribution"]
    process = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        time.sleep(WARMUP_S)
        if process.poll() is not None:
            raise RuntimeError(f"kwatt meter exited: {process.stderr.read()}")
        c0, w0 = tasks_cpu_seconds(process.pid), time.monotonic()
        time.sleep(seconds)
        c1, w1 = tasks_cpu_seconds(process.pid), time.monotonic()
    finally:
        process.send_signal(signal.SIGINT)
        process.wait(timeout=30)
    share = None
    if attribute:
        target = measured = 0
        with open(out) as f:
            for line in f:
                report = json.loads(line)
                if report.get("type") != "interval":
                    continue
                for domain in report.get("domains", []):
                    measured += domain["measured"]["microjoules"]
                    target += sum(t["microjoules"] for t in domain.get("targets", []))
        share = target / measured if measured else None
    return {"cpu_s": c1 - c0, "wall_s": w1 - w0, "share": share}


def run_measure(sysfs: str, period: float, attribute: bool, seconds: float) -> dict:
    python = os.path.join(ROOT, ".venv", "bin", "python")  # kwatt installed there (make build)
    if not os.path.exists(python):
        python = sys.executable
    done = subprocess.run(
        [python, "-c", MEASURE_CODE, sysfs, str(period), str(seconds), str(WARMUP_S),
         "1" if attribute else "0"],
        capture_output=True, text=True, timeout=seconds + 120)
    if done.returncode != 0:
        raise RuntimeError(f"kwatt.measure failed: {done.stderr}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("kwatt", nargs="?", default=os.path.join(ROOT, "build", "kwatt"))
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--before", default=None)
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args()
    kwatt = os.path.abspath(args.kwatt)
    tmp = tempfile.mkdtemp(prefix="kwatt_overhead_")
    sysfs = os.path.join(tmp, "sys")
    simulator = subprocess.Popen(
        [kwatt, "simulate", "rapl", sysfs, "--watts", "package=60,dram=6", "--period-ms", "10"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    simulator.stdout.readline()
    sleepers = [subprocess.Popen(["sleep", "3600"]) for _ in range(PROCESSES)]
    load = h.loadavg()
    rows = []
    try:
        alive = processes_alive()
        h.log(f"{alive} processes alive")
        binaries = [("kwatt", kwatt)] + ([("before", os.path.abspath(args.before))]
                                          if args.before else [])
        for period_text, period in (("1s", 1.0), ("100ms", 0.1)):
            for label, binary in binaries:
                for attribute in (True, False):
                    what = (f"`kwatt meter --pid P`" if attribute else
                            "`kwatt meter --no-attribution`") + (
                                " (before)" if label == "before" else "")
                    r = run_cli(binary, sysfs, sleepers[0].pid, period_text, attribute,
                                args.seconds, tmp)
                    rows.append({"case": what, "period": period_text, **r})
                    h.log(f"{what} at {period_text}: {r}")
            for attribute in (True, False):
                what = "`kwatt.measure()`" if attribute else "`kwatt.measure(attribute=False)`"
                r = run_measure(sysfs, period, attribute, args.seconds)
                rows.append({"case": what, "period": period_text, **r})
                h.log(f"{what} at {period_text}: {r}")
    finally:
        for s in sleepers:
            s.kill()
        for s in sleepers:
            s.wait()
        simulator.send_signal(signal.SIGTERM)
        simulator.wait(timeout=10)

    bars = {"1s": 0.3, "100ms": 1.0}
    lines = [SECTION_TITLE, "",
             f"`python3 bench/meter_overhead_bench.py` ({time.strftime('%Y-%m-%d')}; "
             f"{h.machine_info()['cpu_model']}, {os.cpu_count()} CPUs; load {load} at the "
             f"start; {alive} processes alive, {PROCESSES} of them `sleep`s started by the "
             f"benchmark). Each case runs {args.seconds:.0f} s after a warm-up of {WARMUP_S:.0f} s, "
             "reading a simulated RAPL machine (`kwatt simulate rapl`, 4 domains) and this "
             "machine's /proc; CPU = the run time of every thread of the meter's process "
             "(task/*/schedstat, nanoseconds), for kwatt.measure the Python process whose block "
             "only sleeps. The target (`--pid` of one of the sleeps, the block) only sleeps: its "
             "share of the energy is what the meter would wrongly give it.", "",
             "| case | period | CPU (% of a core) | bar | share of the energy given to the "
             "sleeping target |",
             "|---|---|---:|---:|---:|"]
    for r in rows:
        percent = 100 * r["cpu_s"] / r["wall_s"]
        bar = f"≤ {bars[r['period']]} %" if "no-attribution" not in r["case"] and \
            "attribute=False" not in r["case"] and "before" not in r["case"] else "–"
        share = "–" if r["share"] is None else f"{100 * r['share']:.3f} %"
        lines.append(f"| {r['case']} | {r['period']} | {percent:.3f} % | {bar} | {share} |")
    lines.append("")
    lines.append("Reading a pid's tree follows `/proc/PID/task/TID/children` from its members, so "
                 "it costs the tree's size, not the machine's (before: one scan of every process "
                 "of /proc per read); the meter's own threads (and the server's handlers of its "
                 "exposition) are counted by `kwatt/core/own_cpu.h` and taken off the process "
                 "they run in.")
    section = "\n".join(lines) + "\n"
    print(section)
    if not args.no_write:
        h.publish(os.path.join(ROOT, "BENCHMARKS.md"), section, SECTION_TITLE,
                  {"rows": rows, "processes_alive": alive}, h.NAME)
    return 0


if __name__ == "__main__":
    sys.exit(main())
