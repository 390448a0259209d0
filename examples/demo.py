#!/usr/bin/env python3
"""`make demo`, in Python: the energy of an experiment with the kwatt package.

    python examples/demo.py [OUTPUT_DIR] [--kwatt PATH]

Starts `kwatt serve --simulate` with examples/jobs.json, then tells the story of
examples/energy_notebook.ipynb in a terminal: the 4 nova nodes of the simulated job lyon:1001
(wattmeters at 50 Hz), 20 minutes alternating idle and busy phases, the metrics fetched, the energy
per node and phase, a lossless archive read back, and kwatt's energy compared with the simulator's
truth. Writes the power plot and the energy plot as PNG files in OUTPUT_DIR (default
demo-output/), with the archive (OUTPUT_DIR/archive, replaced on each run).

--kwatt: the kwatt command (default: the one next to this Python, installed with the package,
else build/kwatt).
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only, no display needed

import pandas as pd  # noqa: E402

import kwatt  # noqa: E402
import kwatt.plots  # noqa: E402
import kwatt.simulator  # noqa: E402

HERE = Path(__file__).resolve().parent
JOBS = HERE / "jobs.json"
DAY = "2025-04-18"
PHASES = [("idle-1", "14:00"), ("busy-1", "14:05"), ("idle-2", "14:10"), ("busy-2", "14:15")]
START, STOP = "14:00", "14:20"


def paris(hhmm: str) -> str:
    return f"{DAY}T{hhmm}:00+02:00"


def default_kwatt() -> str:
    beside = Path(sys.executable).with_name("kwatt")
    return str(beside) if beside.is_file() else str(HERE.parent / "build" / "kwatt")


def section(title: str) -> None:
    print(f"\n== {title}")


def story(kwatt_bin: str, api: str, out: Path) -> None:
    section("the experiment: job lyon:1001, 20 minutes, idle and busy phases of 5 minutes")
    k = kwatt.Kwollect.from_job("lyon", 1001, api=api, progress=False)
    k.start(paris(START))
    for name, hhmm in PHASES:
        k.mark(name, paris(hhmm))
    k.stop(paris(STOP))
    print(k.info())

    section("the metrics")
    t = time.perf_counter()
    rows = k.get_metrics(metrics=["wattmetre_power_watt"])
    seconds = time.perf_counter() - t
    count = sum(len(r) for r in rows.values())
    print(f"get_metrics(wattmetre_power_watt): {count:,} rows for {len(rows)} nodes in "
          f"{seconds:.2f} s ({count / seconds / 1e3:,.0f} k rows/s)")
    print(f"  first row of {k.nodes[0]}: {json.dumps(rows[k.nodes[0]][0])}")
    t = time.perf_counter()
    df = k.to_pandas()
    seconds = time.perf_counter() - t
    print(f"to_pandas(): {len(df):,} rows, {df['metric_id'].nunique()} metrics, in "
          f"{seconds:.2f} s ({len(df) / seconds / 1e3:,.0f} k rows/s)")

    section("energy per node and phase (kJ), baseline: each node's mean power in idle-1")
    energy = k.energy(baseline="idle-1")
    kept = energy[energy["scope"].isin(["node", "total"])]
    table = kept.pivot_table(index="name", columns="phase", values="joules", sort=False) / 1e3
    table = table[["window"] + [name for name, _ in PHASES]]
    table.index = [str(n).replace(".grid5000.fr", "") for n in table.index]
    print(table.round(1).to_string())
    busy = energy[(energy["scope"] == "total") & energy["phase"].str.startswith("busy")]
    extra = (busy["joules"] - busy["baseline_joules"]).sum()
    print(f"the busy phases used {extra / 3600:.1f} Wh more than idling; "
          f"coverage {energy['coverage'].min():.3f}..{energy['coverage'].max():.3f}")

    section("archive: backup, load, energy from the archive")
    archive = out / "archive"
    if archive.exists():
        shutil.rmtree(archive)  # a backup directory holds one query: start afresh
    t = time.perf_counter()
    k.backup(archive)
    seconds = time.perf_counter() - t
    size = sum(f.stat().st_size for f in archive.rglob("*") if f.is_file())
    manifest = kwatt.manifest(archive)
    print(f"backup: {archive}, {manifest['rows']:,} rows in {size / 1e6:.2f} MB "
          f"({size / manifest['rows']:.1f} bytes per row), {seconds:.2f} s")
    t = time.perf_counter()
    loaded = kwatt.load(archive)
    print(f"kwatt.load: {len(loaded):,} rows in {time.perf_counter() - t:.2f} s "
          f"({'the same count as' if len(loaded) == len(df) else 'NOT the count of'} to_pandas())")
    from_archive = k.energy(baseline="idle-1", source=archive)
    difference = (from_archive["joules"] - energy["joules"]).abs().max()
    total = from_archive[(from_archive["scope"] == "total") & (from_archive["phase"] == "window")]
    print(f"energy from the archive: {total['joules'].iloc[0] / 1e3:.1f} kJ in total, "
          f"largest difference with the API's figures {difference:g} J")

    section("kwatt vs the simulator's true energy (kwatt simulate energy)")
    nodes = energy[(energy["scope"] == "node") & (energy["phase"] == "window")]
    window_joules = nodes.set_index("name")["joules"]
    worst = 0.0
    for node in k.nodes:
        result = subprocess.run([kwatt_bin, "simulate", "energy", "--node", node, "--start",
                                 paris(START), "--end", paris(STOP), "--jobs", str(JOBS),
                                 "--json"], capture_output=True, text=True, check=True)
        truth = json.loads(result.stdout)["joules"]
        measured = float(window_joules[node])
        error = (measured - truth) / truth
        worst = max(worst, abs(error))
        print(f"  {node.split('.')[0]}: kwatt {measured:12.1f} J, truth {truth:12.1f} J, "
              f"relative error {error:+.2e}")
    print(f"largest relative error: {worst:.2e}")

    section("plots")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(11, 4.5))
    k.plot_power(data=df, ax=ax)
    power_png = out / "power.png"
    fig.savefig(power_png, dpi=110)
    plt.close(fig)
    fig, ax = plt.subplots(figsize=(9, 4))
    kwatt.plots.plot_energy(energy, ax=ax)
    fig.tight_layout()
    energy_png = out / "energy.png"
    fig.savefig(energy_png, dpi=110)
    plt.close(fig)
    print(f"power over time: {power_png}")
    print(f"energy per node and phase: {energy_png}")


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("output", nargs="?", default="demo-output",
                        help="directory for the PNG files and the archive (default demo-output)")
    parser.add_argument("--kwatt", default=None,
                        help="the kwatt command (default: next to this Python, else build/kwatt)")
    args = parser.parse_args()
    kwatt_bin = args.kwatt or default_kwatt()
    out = Path(args.output)
    out.mkdir(parents=True, exist_ok=True)

    started = time.perf_counter()
    with kwatt.simulator.SimulatedKwollect(JOBS, kwatt=kwatt_bin) as server:
        print(f"kwatt serve --simulate is up at {server.url} (jobs from examples/jobs.json)")
        with pd.option_context("display.width", 120):
            story(kwatt_bin, server.url, out)
    print(f"\ndemo done in {time.perf_counter() - started:.1f} s")


if __name__ == "__main__":
    main()
