#!/usr/bin/env python3
"""The energy of an EnOSlib experiment, with Kwollect's wattmeters at 50 Hz.

On Grid'5000 (the default):

    python examples/enoslib_monitor.py [--backup DIR]

reserves 2 nodes of lyon/nova with EnOSlib in a job of type ``monitor=wattmetre_power_watt``
(Kwollect then records the nodes' wattmeters at 50 values per second instead of one), measures
them with ``kwatt.Kwollect`` while a workload runs in three phases (idle baseline, every CPU busy
with stress-ng, cool-down), prints the energy per node, role and phase, writes a lossless archive
of every metric of the window (DIR, default ``enoslib_monitor_backup``), and releases the nodes.
It needs what EnOSlib needs: Grid'5000 access and ``~/.python-grid5000.yaml``.

Without Grid'5000 (this is what the tests run):

    python examples/enoslib_monitor.py --simulate [--kwatt PATH] [--backup DIR]

The rule: ``--simulate``, and only it, selects the simulation. In it, the API is the one of
``$KWATT_API_URL`` when that variable is set (a ``kwatt serve --simulate`` serving the jobs of
examples/jobs.json, or of a file with the same job), otherwise the script starts ``kwatt serve
--simulate --port 0 --jobs examples/jobs.json`` itself (the ``kwatt`` command given by --kwatt,
else $KWATT_BIN, else the one next to this Python, else on the PATH) and stops it at the end.
The simulation builds the very same EnOSlib configuration (and provider object) but does not
reserve anything: the nodes are those of the simulated job lyon:1001, as EnOSlib ``Roles`` of
``Host`` objects, and the phases are marked at instants inside that job instead of running
commands (see measure_simulated). Everything after the measurement (energy, backup) is the same
code for both.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import shutil
import tempfile
import time
from pathlib import Path

import enoslib as en
import pandas as pd

import kwatt
import kwatt.simulator

HERE = Path(__file__).resolve().parent

# The experiment's timeline, in seconds. The simulated job lyon:1001 of examples/jobs.json idles
# 300 s from its start, then has every CPU busy for 300 s: the simulated stress phase is that one.
BASELINE_S = 60
STRESS_S = 300
COOLDOWN_S = 60
SIMULATED_JOB = ("lyon", 1001)
SIMULATED_BUSY_OFFSET_S = 300

# Every CPU busy for STRESS_S seconds: stress-ng when the node has it, else one busy shell loop
# per CPU (Grid'5000's standard environment may not include stress-ng, and a job that is not of
# type deploy cannot install packages without sudo-g5k).
STRESS = (f"if command -v stress-ng >/dev/null; then stress-ng --cpu 0 --timeout {STRESS_S}s; "
          f"else for i in $(seq $(nproc)); do timeout {STRESS_S} sh -c 'while :; do :; done' & "
          "done; wait; fi")


def configuration() -> en.G5kConf:
    """The EnOSlib reservation: 2 nova nodes, in a job whose type switches on Kwollect's 50 Hz
    wattmeter data for its nodes (`monitor=<regex>`: the on-demand metrics matching it;
    EnOSlib's setting monitor="wattmetre_power_watt" adds the same type)."""
    return (en.G5kConf.from_settings(job_name="kwatt-enoslib-monitor",
                                     job_type=["monitor=wattmetre_power_watt"],
                                     walltime="00:30:00")
            .add_machine(roles=["compute"], cluster="nova", nodes=2))


def measure_on_grid5000(roles: en.Roles) -> kwatt.Kwollect:
    """The real experiment: kwatt records the instants while the workload runs."""
    # `with` checks that every node is measured by Kwollect (deploy), starts the window now and
    # stops it when the block ends; each mark() starts a phase that lasts until the next one.
    with kwatt.Kwollect(roles=roles) as k:
        k.mark("baseline")
        time.sleep(BASELINE_S)
        k.mark("stress")
        en.run_command(STRESS, roles=roles["compute"])
        k.mark("cooldown")
        time.sleep(COOLDOWN_S)
    return k


def measure_simulated(roles: en.Roles, api: str) -> kwatt.Kwollect:
    """The same measurement over the simulated job, at instants written out.

    Nothing runs on the simulated nodes: their load is what the jobs file says (the job alternates
    300 s idle and 300 s with every CPU busy), and the simulated metrics exist only for the past
    instants of that job (April 2025), not for "now". So instead of running the workload and
    letting start(), mark() and stop() take the current time, we give them the instants at which
    the simulated job was idle, then busy (our "stress"), then idle again.
    """
    site, job_id = SIMULATED_JOB
    job = kwatt.Kwollect.from_job(site, job_id, api=api, progress=False)
    assert job.start_time is not None  # from_job's window is the job's
    busy = job.start_time + SIMULATED_BUSY_OFFSET_S  # epoch seconds
    k = kwatt.Kwollect(roles=roles, api=api, progress=False)
    k.deploy()
    k.start(busy - BASELINE_S)
    k.mark("baseline", busy - BASELINE_S)
    k.mark("stress", busy)
    k.mark("cooldown", busy + STRESS_S)
    k.stop(busy + STRESS_S + COOLDOWN_S)
    return k


def report(k: kwatt.Kwollect, backup_dir: str) -> pd.DataFrame:
    """Energy per node, role and phase, then the archive of the window: the same either way."""
    print(k.info())
    energy = k.energy(baseline="baseline")
    table = energy[["scope", "name", "phase", "joules", "wh", "mean_watts", "coverage",
                    "baseline_joules"]].copy()
    table["name"] = table["name"].str.replace(".grid5000.fr", "", regex=False)
    table["above_baseline_j"] = table["joules"] - table["baseline_joules"]
    table = table.drop(columns="baseline_joules")
    print("\nenergy (baseline: each node's mean power in the phase 'baseline')")
    with pd.option_context("display.width", 200, "display.max_rows", 200):
        print(table.to_string(index=False, float_format=lambda v: f"{v:.2f}"))
    stress = energy[(energy["scope"] == "total") & (energy["phase"] == "stress")].iloc[0]
    print(f"\nthe stress phase used {stress['joules'] / 1000:.1f} kJ, "
          f"{(stress['joules'] - stress['baseline_joules']) / 1000:.1f} kJ more than idling")

    if Path(backup_dir).exists():
        # A backup resumes an unfinished one of the same query; a directory holding another
        # query's archive is refused, so each run of this example starts afresh.
        shutil.rmtree(backup_dir)
    archive = k.backup(backup_dir)
    manifest = kwatt.manifest(archive)
    print(f"\nbackup: {archive} ({manifest['rows']:,} rows, complete: {manifest['complete']}); "
          f"check it with: kwatt inspect {archive} --verify")
    return energy


def simulate(args: argparse.Namespace) -> None:
    server = None
    api = os.environ.get("KWATT_API_URL")
    if api:
        print(f"simulated Kwollect API: {api} (KWATT_API_URL)")
    else:
        server = kwatt.simulator.SimulatedKwollect(args.jobs, kwatt=args.kwatt)
        api = server.url
        print(f"simulated Kwollect API: {api} (kwatt serve --simulate --jobs {args.jobs})")
    home = tempfile.mkdtemp(prefix="enoslib-monitor-home-")
    try:
        # EnOSlib reads the API's address from ~/.python-grid5000.yaml: a HOME of our own points
        # it (and kwatt) at the simulated testbed, whose reference API answers what
        # add_machine(cluster="nova") asks (the cluster's site, whether it is exotic).
        Path(home, ".python-grid5000.yaml").write_text(f"uri: {api}\nverify_ssl: false\n")
        os.environ["HOME"] = home
        conf = configuration()
        provider = en.G5k(conf)  # checks the configuration; provider.init() is not called
        print(f"EnOSlib reservation (not submitted): {len(conf.machines)} group(s), "
              f"{conf.machines[0].nodes} x {conf.machines[0].cluster} on {conf.machines[0].site}, "
              f"job types {provider.provider_conf.job_type}, walltime {conf.walltime}")
        # What provider.init() would give: Roles of Hosts, here the first nodes of the simulated
        # job (as many as the configuration asks for).
        site, job_id = SIMULATED_JOB
        nodes = kwatt.Kwollect.from_job(site, job_id, api=api, progress=False).nodes
        hosts = [en.Host(node) for node in nodes[:conf.machines[0].nodes]]
        roles = en.Roles({"compute": hosts})
        print(f"roles: compute = {', '.join(sorted(h.address for h in hosts))} "
              f"(job {site}:{job_id})\n")
        k = measure_simulated(roles, api)
        report(k, args.backup)
    finally:
        shutil.rmtree(home, ignore_errors=True)
        if server is not None:
            server.stop()


def on_grid5000(args: argparse.Namespace) -> None:
    provider = en.G5k(configuration())
    roles, networks = provider.init()
    try:
        k = measure_on_grid5000(roles)
        report(k, args.backup)
    finally:
        provider.destroy()


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--simulate", action="store_true",
                        help="no Grid'5000: a simulated job of kwatt serve --simulate")
    parser.add_argument("--backup", default="enoslib_monitor_backup",
                        help="the archive's directory (replaced if it exists)")
    parser.add_argument("--kwatt", help="the kwatt command (--simulate without KWATT_API_URL)")
    parser.add_argument("--jobs", default=str(HERE / "jobs.json"),
                        help="jobs file of the simulated server (--simulate without KWATT_API_URL)")
    args = parser.parse_args()
    started = dt.datetime.now()
    if args.simulate:
        simulate(args)
    else:
        on_grid5000(args)
    print(f"done in {(dt.datetime.now() - started).total_seconds():.1f} s")


if __name__ == "__main__":
    main()
