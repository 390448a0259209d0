"""Issue 21 from Python: a running job's backup, plots across DST changes and gaps, Parquet export
in bounded memory, meaningless arguments and calls out of order, kwatt.manifest()'s keys, load()'s
threads, archives read for the instance's nodes, a resume against another API. Against the real
`kwatt serve --simulate` and archives written by the real `kwatt backup`.
"""
import datetime as dt
import json
import math
import subprocess
import sys
import time
import zoneinfo
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import kwatt
from conftest import JOBS, assert_same_energy, run_kwatt, start_server

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


# ---- item 17: Parquet export in bounded memory ------------------------------------------------

@pytest.fixture(scope="module")
def archives(simulator, tmp_path_factory):
    """Job lyon:1001 (4 nodes, 30 min, 516,004 rows), job grenoble:2001 (2 nodes, 1 h, 956,162
    rows) and the first quarter of the latter."""
    directory = tmp_path_factory.mktemp("archives")
    return {"lyon": backup(simulator, directory / "lyon", "--job", "lyon:1001"),
            "grenoble": backup(simulator, directory / "grenoble", "--job", "grenoble:2001"),
            "quarter": backup(simulator, directory / "quarter", "--job", "grenoble:2001", "--end",
                              "2025-04-18T14:15:00+02:00")}


def export(archive, output, *args):
    """`python -m kwatt export ARCHIVE --to parquet -o OUTPUT ARGS`: its peak RSS in bytes, and
    the most rows the C++ core read at once (kwatt._core.load's tables, spied on)."""
    code = ("import resource, runpy, sys\n"
            "import kwatt._core as core\n"
            "largest, read = [0], core.load\n"
            "def load(*args, **kwargs):\n"
            "    table = read(*args, **kwargs)\n"
            "    largest[0] = max(largest[0], len(table))\n"
            "    return table\n"
            "core.load = load\n"
            "sys.argv = ['python -m kwatt'] + sys.argv[1:]\n"
            "try:\n    runpy.run_module('kwatt', run_name='__main__')\n"
            "except SystemExit as e:\n    status = e.code\n"
            "print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, largest[0])\n"
            "sys.exit(status)\n")
    done = subprocess.run([sys.executable, "-c", code, "export", str(archive), "--to", "parquet",
                           "-o", str(output), *map(str, args)], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr
    peak, largest = done.stdout.split()[-2:]
    return int(peak) * 1024, int(largest)


def as_text(frame):
    """A DataFrame with its categorical columns as plain text, to compare values."""
    return frame.astype({c: str for c in ("site", "node", "device_id", "metric_id", "labels")})


def test_parquet_export_writes_each_piece_as_it_is_read(archives, tmp_path):
    import pyarrow.parquet as pq
    whole = archives["lyon"]
    out = tmp_path / "whole.parquet"
    # Each node's file (129,001 rows) read in time slices of about 30,000 rows, written in row
    # groups of at most 20,000.
    _, largest = export(whole, out, "--rows-per-read", 30000, "--rows-per-group", 20000)
    assert 20000 < largest <= 30000
    frame = kwatt.load(whole)
    parquet = pq.ParquetFile(out)
    groups = [parquet.metadata.row_group(i).num_rows for i in range(parquet.num_row_groups)]
    assert sum(groups) == len(frame) == 516004
    assert max(groups) <= 20000 and len(groups) >= 4 * 5 * 2
    # One schema for every row group: dictionary columns of int32 codes.
    assert str(parquet.schema_arrow.field("node").type) == "dictionary<values=string, " \
                                                          "indices=int32, ordered=0>"
    back = parquet.read().to_pandas()
    assert list(back.columns) == kwatt.frames.COLUMNS
    assert str(back["timestamp"].dtype) == "datetime64[ns, UTC]"
    # The rows of kwatt.load(), in its order (node files in manifest order, each in time order).
    pd.testing.assert_frame_equal(as_text(back), as_text(frame))

    # Filters, as kwatt.load takes them (--nodes in any order: the archive's order).
    out = tmp_path / "filtered.parquet"
    export(whole, out, "--rows-per-read", 5000, "--nodes", "nova-6.lyon,nova-1.lyon",
           "--metrics", "wattmetre_power_watt,prom_node_load1", "--start",
           "2025-04-18T14:10:00.01+02:00", "--end", "2025-04-18T14:12:00+02:00")
    expected = kwatt.load(whole, nodes=["nova-1.lyon", "nova-6.lyon"],
                          metrics=["wattmetre_power_watt", "prom_node_load1"],
                          start="2025-04-18T14:10:00.01+02:00", end="2025-04-18T14:12:00+02:00")
    assert set(expected["node"]) == {"nova-1.lyon.grid5000.fr", "nova-6.lyon.grid5000.fr"}
    pd.testing.assert_frame_equal(as_text(pq.read_table(out).to_pandas()), as_text(expected))


def test_parquet_export_memory_does_not_grow_with_the_archive(archives, tmp_path):
    # The whole job holds 4 times the rows of its first quarter. Read 50,000 rows at a time, the
    # export's peak memory must grow by far less than what those rows take in a DataFrame (it
    # grows by the compressed node files, read whole: 3 to 8 MB here). The old export loaded the
    # whole archive into one DataFrame, then one Arrow table: 56 MB more at the peak, for 16 MB
    # of DataFrame more.
    data = {name: int(kwatt.load(archives[name]).memory_usage(deep=True).sum())
            for name in ("grenoble", "quarter")}
    assert data["grenoble"] - data["quarter"] > 15e6
    peak = {name: export(archives[name], tmp_path / f"{name}.parquet", "--rows-per-read",
                         50000, "--rows-per-group", 50000)[0] for name in data}
    assert peak["grenoble"] - peak["quarter"] < data["grenoble"] - data["quarter"], (peak, data)


def with_other_devices(archive, device="wattmetre1-port6"):
    """The archive with a data/_other.lyon.jsonl.zst file (rows of a device that is not a node:
    here the first node's rows under `device`), as doc/archive_format.md describes it: a zstd
    frame made by the zstd command, its XXH64 as `kwatt inspect --verify` computes it."""
    archive = Path(archive)
    lines = run_kwatt("cat", archive, "--nodes", "nova-1.lyon").stdout.decode().splitlines()
    lines = [line.replace('"device_id":"nova-1"', f'"device_id":"{device}"') for line in lines]
    rows = [json.loads(line) for line in lines]
    assert rows and {row["device_id"] for row in rows} == {device}
    text = "".join(line + "\n" for line in lines)
    plain = archive.parent / "_other.lyon.jsonl"  # from a file: the frame records its size
    plain.write_text(text)
    path = archive / "data" / "_other.lyon.jsonl.zst"
    path.write_bytes(subprocess.run(["zstd", "-q", "-3", "-c", str(plain)], capture_output=True,
                                    check=True).stdout)
    plain.unlink()
    metrics = {}
    for row in rows:
        metrics[row["metric_id"]] = metrics.get(row["metric_id"], 0) + 1
    manifest = json.loads((archive / "manifest.json").read_text())
    entry = {"path": "data/_other.lyon.jsonl.zst", "node": None, "rows": len(rows),
             "bytes": path.stat().st_size, "frames": 1, "xxh64": "0" * 16,
             "first": rows[0]["timestamp"], "last": rows[-1]["timestamp"], "metrics": metrics}
    manifest["files"].append(entry)
    (archive / "manifest.json").write_text(json.dumps(manifest))
    verify = run_kwatt("inspect", archive, "--verify").stderr.decode()
    entry["xxh64"] = verify.split("its XXH64 is ")[1][:16]
    (archive / "manifest.json").write_text(json.dumps(manifest))
    assert run_kwatt("inspect", archive, "--verify").returncode == 0
    return len(rows)


def test_parquet_export_has_the_rows_of_other_devices(simulator, tmp_path):
    import pyarrow.parquet as pq
    archive = backup(simulator, tmp_path / "exp", "--nodes", ",".join(NOVA), "--start",
                     f"{T0:.0f}", "--end", f"{T0 + 30:.0f}")
    other = with_other_devices(archive)
    frame = kwatt.load(archive)
    assert (frame["device_id"] == "wattmetre1-port6").sum() == other
    out = tmp_path / "rows.parquet"
    export(archive, out, "--rows-per-read", 1000, "--rows-per-group", 1000)
    pd.testing.assert_frame_equal(as_text(pq.read_table(out).to_pandas()), as_text(frame))
    # Named nodes: their files only, as kwatt.load reads them.
    export(archive, out, "--nodes", "nova-4.lyon")
    pd.testing.assert_frame_equal(as_text(pq.read_table(out).to_pandas()),
                                  as_text(kwatt.load(archive, nodes=["nova-4.lyon"])))


def test_parquet_export_of_an_incomplete_archive(tmp_path):
    import pyarrow.parquet as pq
    # A tenth of the requests fail and none is retried: an incomplete archive, whose committed
    # rows the journal records (manifest.json was written when the backup started).
    failing = start_server("--fail-rate", "0.1", "--seed", "3", "--jobs", JOBS,
                           tmp_path=tmp_path)
    try:
        k = kwatt.Kwollect(nodes=NOVA, api=failing.url, progress=False, retries=0,
                           rows_per_request=5000)
        k.start(T0 - 240)
        k.stop(T0 + 360)  # 30,000 rows of 50 Hz per node: frames of 1 MiB are committed
        with pytest.raises(kwatt.IncompleteError):
            k.backup(tmp_path / "exp", metrics=["wattmetre_power_watt"])
    finally:
        failing.stop()
    archive = tmp_path / "exp"
    out = tmp_path / "rows.parquet"
    done = subprocess.run([sys.executable, "-m", "kwatt", "export", str(archive), "--to",
                           "parquet", "-o", str(out)], capture_output=True, text=True)
    assert done.returncode == 1 and "incomplete archive" in done.stderr and not out.exists()
    _, largest = export(archive, out, "--allow-incomplete", "--rows-per-read", 2000)
    partial = kwatt.load(archive, allow_incomplete=True)
    assert 0 < len(partial) < 3 * (600 * 50 + 1) and largest < len(partial) / 2
    pd.testing.assert_frame_equal(as_text(pq.read_table(out).to_pandas()), as_text(partial))


def test_parquet_export_refuses_what_load_refuses(simulator, tmp_path):
    archive = backup(simulator, tmp_path / "exp", "--nodes", NOVA[0], "--start", f"{T0:.0f}",
                     "--end", f"{T0 + 5:.0f}")
    for args, message in [(["--nodes", "nova-9.lyon"], "nova-9.lyon.grid5000.fr is not in"),
                          (["--metrics", "wattmeter_power_watt"], "wattmeter_power_watt is not"),
                          (["--rows-per-group", "0"], "--rows-per-group"),
                          (["--rows-per-read", "-5"], "--rows-per-read")]:
        out = tmp_path / "x.parquet"
        done = subprocess.run([sys.executable, "-m", "kwatt", "export", archive, "--to",
                               "parquet", "-o", str(out), *args], capture_output=True, text=True)
        assert done.returncode != 0 and message in done.stderr, (args, done.stderr)
        assert not out.exists() and sorted(p.name for p in tmp_path.iterdir()) == ["exp"]


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


def test_load_with_far_too_many_threads_is_refused(small_archive):
    # In a process of its own: the C++ core aborted the process that asked for 100,000 threads.
    code = ("import sys, kwatt\n"
            "try:\n    rows = len(kwatt.load(sys.argv[1], threads=100000))\n"
            "except kwatt.InvalidArgumentError as e:\n    print('refused:', e)\n"
            "else:\n    print('rows:', rows)\n")
    done = subprocess.run([sys.executable, "-c", code, small_archive], capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("refused: threads must be 0"), done.stdout


# ---- item 11: energy(source=DIR) and stats(source=DIR) are the instance's nodes' ---------------

@pytest.fixture(scope="module")
def two_nodes(simulator, tmp_path_factory):
    """Two nodes' wattmeter rows over [T0, T0 + 120], as a Kwollect of both backs them up."""
    k = make(simulator, NOVA[:2])
    k.start(T0)
    k.stop(T0 + 120)
    return k.backup(backup_dir=tmp_path_factory.mktemp("two") / "exp",
                    metrics=["wattmetre_power_watt"])


def test_an_archive_is_read_for_the_instance_nodes_only(simulator, two_nodes):
    one = make(simulator, NOVA[:1])
    one.start(T0)
    one.stop(T0 + 120)
    from_archive = one.energy(source=two_nodes)
    assert sorted(from_archive[from_archive["scope"] == "node"]["name"].unique()) == NOVA[:1]
    assert_same_energy(from_archive, one.energy())
    assert set(one.stats(source=two_nodes)["node"].dropna().unique()) == {NOVA[0]}


def test_a_node_the_archive_lacks_is_named(simulator, two_nodes):
    other = make(simulator, NOVA[2:])
    other.start(T0)
    other.stop(T0 + 120)
    for call in (other.energy, other.stats):
        with pytest.raises(kwatt.InvalidArgumentError, match="nova-5.lyon.grid5000.fr is not in"):
            call(source=two_nodes)


# ---- item 1: a resume against another API is refused --------------------------------------------

def test_a_backup_resumed_against_another_api_is_refused(simulator, tmp_path):
    other = start_server("--jobs", JOBS, tmp_path=tmp_path)
    try:
        k = make(simulator, NOVA[:1])
        now = time.time()
        k.start(now - 30)
        k.stop(now + 3600)  # a window ending after now: the backup stays incomplete, resumable
        target = tmp_path / "b"
        with pytest.raises(kwatt.IncompleteError):
            k.backup(backup_dir=target, metrics=["wattmetre_power_watt"])
        moved = make(other, NOVA[:1])
        moved.start(k.start_time)
        moved.stop(k.stop_time)
        with pytest.raises(kwatt.InvalidArgumentError, match="from another API"):
            moved.backup(backup_dir=target, metrics=["wattmetre_power_watt"])
    finally:
        other.stop()
