"""Issue 21 from Python: a running job's backup, plots across DST changes and gaps, Parquet export
in bounded memory, meaningless arguments and calls out of order, kwatt.manifest()'s keys, load()'s
threads. Against the real `kwatt serve --simulate` and archives written by the real `kwatt backup`.
"""
import datetime as dt
import json
import math
import os
import subprocess
import sys
import time
import zoneinfo
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import kwatt
from conftest import JOBS, run_kwatt, start_server

PARIS = zoneinfo.ZoneInfo("Europe/Paris")
UTC = dt.timezone.utc
NOVA = ["nova-1.lyon.grid5000.fr", "nova-4.lyon.grid5000.fr", "nova-5.lyon.grid5000.fr"]
# Inside job lyon:1001 (examples/jobs.json): idle 14:00-14:05, busy 14:05-14:10, ...
T0 = dt.datetime(2025, 4, 18, 14, 4, tzinfo=PARIS).timestamp()


def make(server, hosts=NOVA, **kwargs):
    return kwatt.Kwollect(nodes=hosts, api=server.url, progress=False, **kwargs)


@pytest.fixture(scope="module")
def simulator(tmp_path_factory):
    """`kwatt serve --simulate` with examples/jobs.json, for the archives of this module."""
    running = start_server("--jobs", JOBS, tmp_path=tmp_path_factory.mktemp("simulator"))
    yield running
    running.stop()


def backup(server, target, *args):
    """`kwatt backup ARGS -o TARGET` from `server`, as a user runs it."""
    done = run_kwatt("backup", "--api", server.url, *args, "-o", target, "--quiet")
    assert done.returncode == 0, done.stderr
    return str(target)


# ---- item 3: the backup of a running job ----------------------------------------------------

def test_the_backup_of_a_running_job_stays_resumable_until_it_ends(tmp_path):
    # A job started 20 s ago that ends in 10 s (no stopped_at: it runs until its walltime). The
    # backup of Kwollect.from_job(...) was marked complete with a window ending at the call, and a
    # rerun was refused as "another query"; `kwatt backup --job` stays resumable.
    started = math.floor(time.time()) - 20
    jobs = {"jobs": [{"site": "lyon", "uid": 4242, "nodes": ["nova-1", "nova-4"],
                      "started_at": started, "walltime": 30}]}
    server = start_server(jobs=jobs, tmp_path=tmp_path)
    try:
        k = kwatt.Kwollect.from_job("lyon", 4242, api=server.url, progress=False)
        target = tmp_path / "job"
        with pytest.raises(kwatt.IncompleteError, match="has not ended") as error:
            k.backup(target, metrics=["wattmetre_power_watt"])
        assert error.value.partial == str(target)
        stored = json.loads((target / "manifest.json").read_text())
        assert stored["state"] == "incomplete"
        assert stored["query"]["job"] == {"site": "lyon", "id": 4242}
        assert stored["query"]["start"] is None and stored["query"]["end"] is None
        # Run again while the job runs: the same query, resumed (not refused), still incomplete.
        with pytest.raises(kwatt.IncompleteError, match="has not ended"):
            k.backup(target, metrics=["wattmetre_power_watt"])
        # A subset of the job's nodes is backed up by job too (kwatt backup --job --nodes).
        subset = tmp_path / "subset"
        with pytest.raises(kwatt.IncompleteError, match="has not ended"):
            k.backup(subset, nodes=["nova-4.lyon"], metrics=["wattmetre_power_watt"])
        assert json.loads((subset / "manifest.json").read_text())["query"]["nodes"] == [
            "nova-4.lyon.grid5000.fr"]

        time.sleep(max(0.0, started + 30 + 1 - time.time()))
        again = kwatt.Kwollect.from_job("lyon", 4242, api=server.url, progress=False)
        assert again.backup(target, metrics=["wattmetre_power_watt"]) == str(target)
        assert run_kwatt("inspect", target, "--verify").returncode == 0
        # Byte for byte the archive of a backup taken after the job's end.
        after = backup(server, tmp_path / "after", "--job", "lyon:4242", "--metrics",
                       "wattmetre_power_watt")
        for name in ("nova-1.lyon.grid5000.fr.jsonl.zst", "nova-4.lyon.grid5000.fr.jsonl.zst"):
            assert (target / "data" / name).read_bytes() == (Path(after) / "data" /
                                                              name).read_bytes()
        assert len(kwatt.load(target)) == 2 * 31

        # A window set with start() and stop() is that window, backed up as nodes and times.
        k.start(started + 5)
        k.stop(started + 10)
        window = k.backup(tmp_path / "window", metrics=["wattmetre_power_watt"])
        query = json.loads((Path(window) / "manifest.json").read_text())["query"]
        assert query["job"] is None and query["start"] == f"{started + 5}.000000"
    finally:
        server.stop()


# ---- item 14: power plots across DST changes and gaps -----------------------------------------

def test_plot_power_is_drawn_in_order_across_the_autumn_change_and_breaks_at_gaps(tmp_path):
    import matplotlib
    matplotlib.use("Agg")
    # Europe/Paris goes back from 03:00 +02:00 to 02:00 +01:00 at 2025-10-26 01:00 UTC: in Paris
    # wall-clock time the hour 02:00-03:00 happens twice. nova-1's wattmeter (1 Hz outside
    # monitoring jobs) reports nothing for 30 s after the change.
    change = dt.datetime(2025, 10, 26, 1, 0, tzinfo=UTC).timestamp()
    jobs = {"jobs": [], "outages": [{"site": "lyon", "device": "nova-1",
                                     "metric": "wattmetre_power_watt",
                                     "start": change + 30, "end": change + 60}]}
    server = start_server(jobs=jobs, tmp_path=tmp_path)
    try:
        k = make(server, hosts=NOVA[:1])
        k.start(change - 120)
        k.stop(change + 120)
        data = k.to_pandas(metrics=["wattmetre_power_watt"])
        offsets = {t.utcoffset() for t in data["timestamp"].dt.tz_convert(PARIS)}
        assert offsets == {dt.timedelta(hours=2), dt.timedelta(hours=1)}
        ax = k.plot_power(data)
    finally:
        server.stop()
    (line,) = [line for line in ax.get_lines() if not line.get_label().startswith("_")]
    x = np.asarray(line.get_xdata(orig=False), dtype=float)
    y = np.asarray(line.get_ydata(orig=False), dtype=float)
    # Strictly increasing through the repeated hour: time on the axis is the instant's.
    assert (np.diff(x) > 0).all()
    # One break, in the outage: the line is not drawn across it.
    (gap,) = np.flatnonzero(np.isnan(y))
    before, after = (matplotlib.dates.num2date(x[i]).timestamp() for i in (gap - 1, gap + 1))
    assert before < change + 30 and after >= change + 60
    assert np.isnan(y).sum() == 1 and len(y) == len(data) + 1
    # Labels in Europe/Paris time: the minutes 02:59 (+02:00) and 02:01 (+01:00) are both ticks.
    ax.figure.canvas.draw()
    labels = {tick.get_text() for tick in ax.get_xticklabels()}
    assert {"02:59", "02:01"} <= labels, labels
    # The window's start and stop lines are on the same axis: at the instants themselves.
    _, start_line, stop_line = ax.get_lines()
    for drawn, instant in ((start_line, change - 120), (stop_line, change + 120)):
        at = matplotlib.dates.num2date(drawn.get_xdata(orig=False)[0]).timestamp()
        assert at == pytest.approx(instant, abs=1e-3)


# ---- item 20: meaningless arguments, calls out of order ----------------------------------------

def test_an_empty_role_is_refused_by_name(server):
    k = make(server)
    k.start(T0)
    k.stop(T0 + 5)
    for call in (lambda: k.energy(roles={"spare": []}),
                 lambda: k.energy(roles={"compute": NOVA[:1], "spare": []}),
                 lambda: k.stats(metrics=["wattmetre_power_watt"], roles={"spare": []})):
        with pytest.raises(kwatt.InvalidArgumentError, match="role spare has no node"):
            call()


@pytest.mark.parametrize("phases", [[("p", T0)], [("p", T0, T0 + 1, T0 + 2)], ["p"],
                                    {"p": (T0,)}, {"p": (T0, T0 + 1, T0 + 2)}, {"p": T0}])
def test_phases_of_another_shape_are_refused(phases):
    k = kwatt.Kwollect(nodes=NOVA)
    k.start(T0)
    k.stop(T0 + 10)
    with pytest.raises(kwatt.InvalidArgumentError, match=r"\(name, start, end\)"):
        k.phases(phases)


def test_lifecycle_calls_out_of_order():
    k = kwatt.Kwollect(nodes=NOVA)
    with pytest.raises(kwatt.InvalidArgumentError, match=r"mark\(\) before start\(\)"):
        k.mark("warmup", T0)
    assert k.marks == []
    k.start(T0)
    k.mark("warmup", T0 + 1)
    k.stop(T0 + 10)
    with pytest.raises(kwatt.InvalidArgumentError,
                       match=r"already stopped at 2025-04-18T14:04:10\+02:00"):
        k.stop(T0 + 20)
    assert k.window == (int(T0) * 10**9, int(T0 + 10) * 10**9)
    # start() after stop() begins a new window: the previous one's marks are gone with it.
    k.start(T0 + 30)
    assert k.marks == [] and k.window == (int(T0 + 30) * 10**9, None)
    k.mark("again", T0 + 31)
    k.stop(T0 + 40)
    assert k.phases() == [("again", int(T0 + 31) * 10**9, int(T0 + 40) * 10**9)]


def test_leaving_a_with_block_after_stop_stops_nothing_more(server):
    with make(server) as k:
        k.stop()
        stopped = k.window[1]
        time.sleep(0.01)
    assert k.window[1] == stopped


# ---- item 21: kwatt.manifest() has the keys of manifest.json -----------------------------------

def test_manifest_has_the_keys_of_manifest_json(server, tmp_path):
    archive = backup(server, tmp_path / "exp", "--nodes", ",".join(NOVA[:2]), "--start",
                     f"{T0:.0f}", "--end", f"{T0 + 10:.0f}", "--metrics",
                     "wattmetre_power_watt,bmc_ambient_temp_celsius")
    stored = json.loads((Path(archive) / "manifest.json").read_text())
    manifest = kwatt.manifest(archive)
    assert {key: manifest[key] for key in stored} == stored
    assert manifest["state"] == "complete" and manifest["format"] == "kwatt-archive"
    assert [n["node"] for n in manifest["nodes"]] == NOVA[:2]
    assert manifest["window"]["start_ns"] == int(T0) * 10**9
    assert manifest["query"]["api"] == server.url
    # What the manifest adds up, under keys of their own (documented in doc/python.md).
    frame = kwatt.load(archive)
    assert manifest["complete"] is True and manifest["rows"] == len(frame)
    assert manifest["bytes"] == sum(f["bytes"] for f in stored["files"])
    assert manifest["metric_rows"] == frame["metric_id"].astype(str).value_counts().to_dict()
    assert set(manifest) == set(stored) | {"complete", "rows", "bytes", "metric_rows"}


# ---- item 16: load()'s threads ---------------------------------------------------------------------

@pytest.fixture(scope="module")
def small_archive(simulator, tmp_path_factory):
    return backup(simulator, tmp_path_factory.mktemp("small") / "exp", "--nodes", NOVA[0],
                  "--start", f"{T0:.0f}", "--end", f"{T0 + 5:.0f}", "--metrics",
                  "wattmetre_power_watt")


@pytest.mark.parametrize("threads", [-1, "x", "4", 1.5, True, 2**31])
def test_load_refuses_meaningless_threads(small_archive, threads):
    with pytest.raises(kwatt.InvalidArgumentError, match="threads"):
        kwatt.load(small_archive, threads=threads)


def test_load_takes_zero_or_a_positive_number_of_threads(small_archive):
    rows = len(kwatt.load(small_archive))
    for threads in (0, None, 1, np.int64(2)):
        assert len(kwatt.load(small_archive, threads=threads)) == rows


def test_load_with_far_too_many_threads_is_refused_or_capped(small_archive):
    # In a process of its own: the C++ core aborted the process that asked for 100,000 threads.
    code = ("import sys, kwatt\n"
            "try:\n    rows = len(kwatt.load(sys.argv[1], threads=100000))\n"
            "except kwatt.InvalidArgumentError as e:\n    print('refused:', e)\n"
            "else:\n    print('rows:', rows)\n")
    done = subprocess.run([sys.executable, "-c", code, small_archive], capture_output=True,
                          text=True, timeout=300)
    if done.returncode < 0:  # killed by a signal (SIGABRT)
        pytest.xfail("the C++ core still aborts on threads=100000 (issue 21 item 16, C++ "
                     f"side): exit status {done.returncode}, {done.stderr[-300:]!r}")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(("refused:", f"rows: {5 * 50 + 1}")), done.stdout
