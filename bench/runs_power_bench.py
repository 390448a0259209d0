#!/usr/bin/env python3
"""The power of `kwatt energy --run ... --versus ...` (doc/energy.md, "Runs compared").

Usage: python3 bench/runs_power_bench.py [KWATT_BINARY] [--comparisons N] [--no-write]

What it does: runs build/kwatt_runs_power_bench (bench/runs_power_bench.cc): for true differences
of 0 to 5 % between two sets of simulated runs (nova-1, 10-minute runs whose work phase's energy
varies by 1 % from run to run, src/testing/runs_truth.h) and 3, 5 and 10 runs a set, N
comparisons each (default 400), as kwatt energy --run compares them (ComputeEnergy on each run's
wattmeter rows, then Welch's t test at 95 %): how often a difference is claimed, and how often the
interval of the difference holds the true one. Seed 1's table is shown, and seeds 1 to 3's range
where there is no difference. Writes the section "## Runs compared: the power of
the test" of BENCHMARKS.md and bench/out/runs_power.json. No timing: the figures do not depend on
the machine.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time

import harness as h

ROOT = h.ROOT
SECTION_TITLE = "## Runs compared: the power of the test"
SEEDS = [1, 2, 3]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("kwatt", nargs="?", default=os.path.join(ROOT, "build", "kwatt"))
    parser.add_argument("--comparisons", type=int, default=400)
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args()
    program = os.path.join(os.path.dirname(os.path.abspath(args.kwatt)), "kwatt_runs_power_bench")
    if not os.access(program, os.X_OK):
        h.log(f"no {program}: build the tests (make build-tests)")
        return 2
    outputs = {}
    for seed in SEEDS:
        h.log(f"seed {seed}: {args.comparisons} comparisons a cell")
        out = subprocess.run([program, "--comparisons", str(args.comparisons), "--seed",
                              str(seed)], capture_output=True, text=True, timeout=1800)
        if out.returncode != 0:
            raise h.BenchError(f"{program} failed: {out.stderr.strip()}")
        outputs[seed] = out.stdout
    first = outputs[SEEDS[0]]
    print(first)
    # Each seed's row of no true difference: the false alarms and the intervals holding 0.
    alarms, held = [], []
    for text in outputs.values():
        row = next(line for line in text.splitlines() if line.startswith("| 0 % |"))
        cells = [float(c.strip().rstrip("%")) for c in row.split("|")[2:-1]]
        alarms += cells[0::2]
        held += cells[1::2]
    results = {"date": time.strftime("%Y-%m-%d"), "comparisons": args.comparisons,
               "outputs": outputs}
    section = "\n".join([
        SECTION_TITLE, "",
        f"`python3 bench/runs_power_bench.py` ({results['date']}; the figures do not depend on "
        "the machine): `build/kwatt_runs_power_bench` (bench/runs_power_bench.cc, "
        "src/testing/runs_truth.cc). Each comparison is two sets of simulated runs of nova-1 "
        "(10 minutes: 2 idle, 6 of work, 2 idle), the work phase's CPU level drawn for each run "
        "so that its energy varies by 1 % from run to run (a normal spread), set B's levels "
        "higher by the true difference; each run's energy is ComputeEnergy's on the wattmeter's "
        "rows, the sets compared as `kwatt energy --run ... --versus ...` compares them (Welch's "
        "t test, 95 %). *Difference claimed*: the share of comparisons whose interval of the "
        "difference excludes 0 (at a true difference of 0: the false alarms, 5 % expected; "
        "above: the test's power); *interval holds it*: the share whose interval holds the true "
        "difference (95 % expected).", "", f"Seed {SEEDS[0]}:", "", first.strip(), "",
        f"The cells of a column share their draws (one seed). Over seeds "
        f"{', '.join(map(str, SEEDS))}, with no true difference, the false alarms range from "
        f"{min(alarms):.1f} to {max(alarms):.1f} % and the intervals hold it in "
        f"{min(held):.1f} to {max(held):.1f} % of {args.comparisons} comparisons (a binomial's "
        f"standard deviation there is {100 * (0.05 * 0.95 / args.comparisons) ** 0.5:.1f} %).",
        ""])
    if not args.no_write:
        h.publish(os.path.join(ROOT, "BENCHMARKS.md"), section, SECTION_TITLE, results,
                  "runs_power")
    return 0


if __name__ == "__main__":
    sys.exit(main())
