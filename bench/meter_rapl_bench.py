#!/usr/bin/env python3
"""Benchmark of the meter's RAPL sampling (`OpenRapl`'s powercap source) on a simulated tree.

Usage: python3 bench/meter_rapl_bench.py [KWATT_BINARY] [--seconds S] [--no-write]

What it does (standard library only):
  1. for each read rate (1 Hz, 10 Hz, 100 Hz, 1 kHz), starts `kwatt simulate rapl ROOT` (two
     sockets, package and dram, updated every millisecond) with counters small enough to wrap many
     times (the range grows with the period so that a read never sees two wraps);
  2. runs build/kwatt_meter_rapl_bench (bench/meter_rapl_bench.cc) on the tree for S seconds with
     absolute deadlines: ticks on time (started within a tenth of the period), CPU % of one core,
     each domain's total against the simulator's exact truth over the same span;
  3. side by side at the same rates, what users otherwise run in Python: pyJoules and pyRAPL
     hard-code /sys/class/powercap (no root can be given to them), so the peer is the loop they
     run, in plain Python: each read opens, reads and closes every energy_uj (pyJoules' way;
     pyRAPL keeps them open and seeks); neither handles wraps, so the loop adds
     max_energy_range_uj when a counter goes back (the usual fix);
  4. writes the section "## Meter: RAPL sampling" of BENCHMARKS.md and bench/out/meter_rapl.json.

Simulated sysfs is a lower bound of the cost of real reads: a real energy_uj read makes the
kernel read an MSR on the package's CPU (an IPI when that is another CPU).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time

import harness as h

ROOT = h.ROOT
SECTION_TITLE = "## Meter: RAPL sampling"
RATES = [1, 10, 100, 1000]
# Counter bits per rate: 2^bits counts of 2^-14 J (package; dram's 2^-16 J is 4 times smaller).
# At 1 kHz 2^16 counts are 4 J: a wrap every 67 ms at 60 W; at 1 Hz 2^23 counts are 512 J. No
# smaller: the simulator is a process on a shared machine, and a late update (tens of ms) must not
# move a counter by a whole range, which real hardware never does.
BITS = {1: 23, 10: 20, 100: 18, 1000: 16}
WATTS = "package=60,dram=10"
# The 1 kHz cases again under SCHED_FIFO, as a meter daemon may run on a loaded machine.
FIFO = ["chrt", "-f", "20"]


def start_simulator(kwatt: str, root: str, bits: int) -> subprocess.Popen:
    process = subprocess.Popen(
        [kwatt, "simulate", "rapl", root, "--counter-bits", str(bits), "--period-ms", "1",
         "--watts", WATTS], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    line = process.stdout.readline()
    if line.strip() != root:
        raise RuntimeError(f"kwatt simulate rapl did not start: {process.stderr.read()}")
    return process


def stop(process: subprocess.Popen) -> None:
    process.send_signal(signal.SIGTERM)
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def read_truth(root: str) -> tuple[int, dict]:
    with open(os.path.join(root, "kwatt_truth")) as f:
        lines = f.read().split("\n")
    update = int(lines[1].split()[1])
    return update, {l.split()[0]: int(l.split()[1]) for l in lines[2:] if l.strip()}


def run_case(argv: list[str], kwatt: str, rate: int, root: str) -> dict:
    """Runs a reader (argv + [ROOT, RATE, SECONDS]) on a fresh simulated tree: its loop, then the
    simulator stopped (the tree holds its last update), then its last read and its JSON line."""
    simulator = start_simulator(kwatt, root, BITS[rate])
    try:
        bench = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        assert bench.stdout.readline().strip() == "loop-done"
        stop(simulator)
        out, _ = bench.communicate("go\n", timeout=60)
        return json.loads(out.strip().splitlines()[-1])
    finally:
        stop(simulator)
        shutil.rmtree(root, ignore_errors=True)


def kwatt_case(helper: str, kwatt: str, rate: int, seconds: float, tmpdir: str,
               fifo: bool = False) -> dict:
    root = os.path.join(tmpdir, f"kwatt-{rate}")
    return run_case(FIFO * fifo + [helper, root, str(rate), str(seconds)], kwatt, rate, root)


# The peer: a Python loop as pyJoules/pyRAPL-style readers do it, on the same tree.
PEER = r"""
import glob, json, os, sys, time
root, rate, seconds = sys.argv[1], float(sys.argv[2]), float(sys.argv[3])
zones = sorted(glob.glob(os.path.join(root, "class/powercap/intel-rapl:*")))
names, paths, ranges = [], [], []
for z in zones:
    name = open(os.path.join(z, "name")).read().strip()
    parent = os.path.basename(z).split(":")
    if len(parent) == 3:
        package = open(os.path.join(root, "class/powercap", ":".join(parent[:2]), "name")).read().strip()
        name = name + "-" + package.split("-")[1]
    names.append(name)
    paths.append(os.path.join(z, "energy_uj"))
    ranges.append(int(open(os.path.join(z, "max_energy_range_uj")).read()))

def read_all():
    values = []
    for p in paths:
        with open(p) as f:
            values.append(int(f.readline()))
    return values

def truth():
    lines = open(os.path.join(root, "kwatt_truth")).read().split("\n")
    return int(lines[1].split()[1]), {l.split()[0]: int(l.split()[1]) for l in lines[2:] if l.strip()}

while True:
    before = truth()
    last = read_all()
    if truth() == before:
        break
start_truth = before[1]
totals = [0] * len(paths)


def accumulate(last):
    # Reads every counter and adds what it counted since `last` (a counter that went back
    # wrapped: max_energy_range_uj is added, the usual fix).
    values = read_all()
    for i, v in enumerate(values):
        delta = v - last[i]
        if delta < 0:
            delta += ranges[i]
        totals[i] += delta
    return values


period = 1.0 / rate
ticks = int(seconds * rate)
on_time = 0
cpu0, wall0 = time.process_time(), time.monotonic()
for k in range(1, ticks + 1):
    deadline = wall0 + k * period
    delay = deadline - time.monotonic()
    if delay > 0:
        time.sleep(delay)
    if time.monotonic() - deadline <= period / 10:
        on_time += 1
    last = accumulate(last)
wall, cpu = time.monotonic() - wall0, time.process_time() - cpu0
print("loop-done", flush=True)
sys.stdin.readline()
accumulate(last)
end_truth = truth()[1]
print(json.dumps({"rate_hz": rate, "ticks": ticks, "on_time": on_time, "wall_s": wall,
                  "cpu_s": cpu, "domains": {n: {"microjoules": totals[i],
                  "truth_microjoules": end_truth[n] - start_truth[n]} for i, n in enumerate(names)}}))
"""


def python_case(kwatt: str, rate: int, seconds: float, tmpdir: str, fifo: bool = False) -> dict:
    root = os.path.join(tmpdir, f"python-{rate}")
    return run_case(FIFO * fifo + [sys.executable, "-c", PEER, root, str(rate), str(seconds)],
                    kwatt, rate, root)


def meter_case(kwatt: str, seconds: float, tmpdir: str, fifo: bool = False) -> dict:
    """The whole `kwatt meter` (sampler, formula, an output) reading at 1 kHz: its own count of
    ticks late and missed (its end line), its CPU from /proc (user + system of every thread)."""
    root = os.path.join(tmpdir, "meter")
    simulator = start_simulator(kwatt, root, BITS[1000])
    try:
        meter = subprocess.Popen(
            FIFO * fifo + [kwatt, "meter", "--sysfs-root", root, "--no-attribution", "--period",
                           "1s", "--read-period", "1ms", "-o", "jsonl:/dev/null"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        time.sleep(1.0)
        before = h.cpu_seconds(meter.pid)
        started = time.monotonic()
        time.sleep(seconds)
        used = h.cpu_seconds(meter.pid) - before
        wall = time.monotonic() - started
        meter.send_signal(signal.SIGTERM)
        _, err = meter.communicate(timeout=60)
        line = [x for x in err.splitlines() if " reads (" in x][-1]
        reads = int(line.split(" reports, ")[1].split(" reads")[0])
        late = int(line.split(" reads (")[1].split(" late")[0])
        missed = int(line.split(" late, ")[1].split(" missed")[0])
        return {"reads": reads, "late": late, "missed": missed, "cpu_s": used, "wall_s": wall,
                "line": line}
    finally:
        stop(simulator)
        shutil.rmtree(root, ignore_errors=True)


def summary(result: dict) -> dict:
    errors = []
    worst_uj = 0
    for d in result["domains"].values():
        truth = d["truth_microjoules"]
        diff = d["microjoules"] - truth
        worst_uj = max(worst_uj, abs(diff))
        errors.append(abs(diff) / truth if truth else 0.0)
    return {"on_time_pct": 100.0 * result["on_time"] / result["ticks"],
            "cpu_pct": 100.0 * result["cpu_s"] / result["wall_s"],
            "read_cpu_pct": 100.0 * result.get("read_cpu_s", 0) / result["wall_s"],
            "worst_error_pct": 100.0 * max(errors), "worst_error_uj": worst_uj}


def render(results: dict, seconds: float) -> str:
    lines = [SECTION_TITLE, "",
             f"`python3 bench/meter_rapl_bench.py` ({results['date']}; {results['machine']}; load "
             f"{results['load']}). Each case reads the powercap tree of `kwatt simulate rapl` "
             f"(2 sockets, package and dram, {WATTS}, updated every 1 ms in another process) for "
             f"{seconds:g} s on absolute deadlines. A tick is on time when it starts within a "
             "tenth of the period of its deadline. Error: each domain's total against the "
             "simulator's exact truth over the same span (the worst of the 4 domains). "
             "Counters are made small so that they wrap many times (package 2^bits counts of "
             "2^-14 J, dram of 2^-16 J).", "",
             "| rate | counter bits | wraps read | kwatt: on time | kwatt: CPU of one core "
             "(its Read alone) | kwatt: worst error | Python loop: on time | Python: CPU "
             "| Python: worst error | CPU ratio |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for key in [str(r) for r in RATES] + ["1000-fifo"]:
        if key not in results["kwatt"]:
            continue
        k, p = results["kwatt"][key], results["python"][key]
        ks, ps = summary(k), summary(p)
        wraps = sum(n for flags, n in k["flags"].items() if "wrapped" in flags)
        ratio = ps["cpu_pct"] / ks["cpu_pct"] if ks["cpu_pct"] > 0 else float("inf")
        rate = key.replace("-fifo", " Hz, SCHED_FIFO") if "fifo" in key else key + " Hz"
        bits = BITS[int(key.split("-")[0])]
        lines.append(
            f"| {rate} | {bits} | {wraps} | {ks['on_time_pct']:.2f} % "
            f"| {ks['cpu_pct']:.3f} % ({ks['read_cpu_pct']:.3f} %) "
            f"| {ks['worst_error_pct']:.6f} % ({ks['worst_error_uj']} uJ) "
            f"| {ps['on_time_pct']:.2f} % | {ps['cpu_pct']:.3f} % "
            f"| {ps['worst_error_pct']:.6f} % ({ps['worst_error_uj']} uJ) | {ratio:.1f}x |")
    if results.get("meter"):
        lines += ["", "The whole `kwatt meter` (its sampler, formula thread and a JSON Lines output "
                  "to /dev/null; `--no-attribution --period 1s --read-period 1ms`), reading the "
                  "same tree at 1 kHz (16-bit counters), for the same time after a second of "
                  "warm-up; late and missed ticks as it counts them (late: more than a tenth of "
                  "the period after its deadline; missed: skipped because a read outlived it), CPU "
                  "of all its threads from /proc:", "",
                  "| case | reads | on time | late | missed | CPU of one core |",
                  "|---|---|---|---|---|---|"]
        for key, label in (("1000", "kwatt meter, 1 kHz"),
                           ("1000-fifo", "kwatt meter, 1 kHz, SCHED_FIFO")):
            m = results["meter"].get(key)
            if not m:
                continue
            on_time = 100.0 * (m["reads"] - m["late"] - m["missed"]) / max(m["reads"], 1)
            lines.append(f"| {label} | {m['reads']} | {on_time:.2f} % | {m['late']} "
                         f"| {m['missed']} | {100.0 * m['cpu_s'] / m['wall_s']:.2f} % |")
    other = {}
    for key, result in results["kwatt"].items():
        for flags, n in result["flags"].items():
            if flags != "wrapped":
                other[f"{key} Hz: {flags}"] = n
    lines += ["",
              "Flags other than `wrapped` seen by kwatt: " + (json.dumps(other) if other else "none")
              + ". kwatt's error is the quantisation of the counters (a count, 61 uJ or 15 uJ, at "
              "each end): it turns energy_uj back into hardware counts and counts them in the "
              "hardware's unit. The Python loop reads as pyJoules does (open, readline, close at "
              "each read; pyRAPL keeps the files open and seeks; both hard-code "
              "/sys/class/powercap, so neither can be pointed at this tree) and sums energy_uj as "
              "the kernel reports it, in a unit truncated to whole nanojoules (15258 nJ for dram's "
              "2^-16 J: 0.005 % low); neither library handles wraps: the loop adds "
              "max_energy_range_uj at a wrap, the usual fix, one count short of the modulus. kwatt's CPU is the "
              "whole sampling loop, sleeping as the meter's sampler does (the meter's clock, a timer "
              "slack of 1 ns: waking 1,000 times a second costs most of it on this VM); in "
              "brackets, its Read() alone (4 domains). On time: the Python loop keeps Linux's "
              "default timer slack (50 us), which makes many 1 kHz ticks late by a tenth of the "
              "period; the SCHED_FIFO rows are `chrt -f 20`. A flag `may have missed a wrap` is "
              "an interval longer than half the counters' wrap period (66 ms at 16 bits and "
              "60 W): the VM did not run the reader for that long.",
              "Simulated sysfs is a lower bound of real reads: a real energy_uj read makes the "
              "kernel read an MSR on the package's CPU (an IPI when it is another CPU); the tree "
              "here is files on a disk's page cache.", ""]
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("kwatt", nargs="?", default=os.path.join(ROOT, "build", "kwatt"))
    parser.add_argument("--seconds", type=float, default=20)
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args()
    helper = os.path.join(os.path.dirname(args.kwatt), "kwatt_meter_rapl_bench")
    for path in (args.kwatt, helper):
        if not os.access(path, os.X_OK):
            h.log(f"missing {path}: build it first (cmake --build build --target kwatt "
                  "kwatt_meter_rapl_bench)")
            return 1
    results = {"date": time.strftime("%Y-%m-%d"), "machine": "", "load": h.loadavg(),
               "kwatt": {}, "python": {}}
    info = h.machine_info()
    results["machine"] = f"{info['nproc']} CPUs, {info['cpu_model']}"
    with tempfile.TemporaryDirectory(prefix="kwatt-rapl-bench-") as tmpdir:
        for rate in RATES:
            h.log(f"kwatt at {rate} Hz for {args.seconds:g} s")
            results["kwatt"][str(rate)] = kwatt_case(helper, args.kwatt, rate, args.seconds, tmpdir)
            h.log(f"  {summary(results['kwatt'][str(rate)])}")
            h.log(f"Python loop at {rate} Hz")
            results["python"][str(rate)] = python_case(args.kwatt, rate, args.seconds, tmpdir)
            h.log(f"  {summary(results['python'][str(rate)])}")
        if shutil.which("chrt"):
            h.log("kwatt at 1000 Hz under SCHED_FIFO")
            results["kwatt"]["1000-fifo"] = kwatt_case(helper, args.kwatt, 1000, args.seconds,
                                                       tmpdir, fifo=True)
            h.log(f"  {summary(results['kwatt']['1000-fifo'])}")
            h.log("Python loop at 1000 Hz under SCHED_FIFO")
            results["python"]["1000-fifo"] = python_case(args.kwatt, 1000, args.seconds, tmpdir,
                                                         fifo=True)
            h.log(f"  {summary(results['python']['1000-fifo'])}")
    with tempfile.TemporaryDirectory(prefix="kwatt-rapl-bench-") as tmpdir:
        results["meter"] = {}
        h.log("kwatt meter reading at 1 kHz")
        results["meter"]["1000"] = meter_case(args.kwatt, args.seconds, tmpdir)
        h.log(f"  {results['meter']['1000']['line']}")
        if shutil.which("chrt"):
            h.log("kwatt meter reading at 1 kHz under SCHED_FIFO")
            results["meter"]["1000-fifo"] = meter_case(args.kwatt, args.seconds, tmpdir, fifo=True)
            h.log(f"  {results['meter']['1000-fifo']['line']}")
    section = render(results, args.seconds)
    print(section)
    if not args.no_write:
        h.publish(os.path.join(ROOT, "BENCHMARKS.md"), section, SECTION_TITLE, results,
                  "meter_rapl")
    return 0


if __name__ == "__main__":
    sys.exit(main())
