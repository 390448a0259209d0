"""Issue 21, the Python package at the experimenter's edges: an archive read for the instance's
nodes, a resume against another API refused, a load that takes no absurd thread count. Each test failed before its fix."""
import datetime as dt
import subprocess
import sys
import textwrap
import zoneinfo

import pandas as pd
import pytest

import kwatt
from conftest import JOBS, start_server

PARIS = zoneinfo.ZoneInfo("Europe/Paris")
NOVA = ["nova-1.lyon.grid5000.fr", "nova-4.lyon.grid5000.fr", "nova-5.lyon.grid5000.fr"]
T0 = dt.datetime(2025, 4, 18, 14, 4, tzinfo=PARIS).timestamp()
T1 = T0 + 120


def make(server, hosts=NOVA):
    k = kwatt.Kwollect(nodes=hosts, api=server.url, progress=False)
    k.start(T0)
    k.stop(T1)
    return k


@pytest.fixture(scope="module")
def archive(server, tmp_path_factory):
    """Two nodes' wattmeter rows over [T0, T1], as a Kwollect of both backs them up."""
    path = tmp_path_factory.mktemp("archive") / "two"
    make(server, NOVA[:2]).backup(backup_dir=path, metrics=["wattmetre_power_watt"])
    return path


# ---- 11. energy(source=DIR) and stats(source=DIR) are the instance's nodes' ----------------------

def test_an_archive_is_read_for_the_instance_nodes_only(server, archive):
    one = make(server, NOVA[:1])
    from_archive = one.energy(source=archive)
    assert sorted(from_archive[from_archive["scope"] == "node"]["name"].unique()) == NOVA[:1]
    pd.testing.assert_frame_equal(from_archive, one.energy())
    stats = one.stats(source=archive)
    assert set(stats["node"].dropna().unique()) == {NOVA[0]}


def test_a_node_the_archive_lacks_is_named(server, archive):
    other = make(server, NOVA[2:])
    for call in (other.energy, other.stats):
        with pytest.raises(kwatt.InvalidArgumentError, match="nova-5.lyon.grid5000.fr is not in"):
            call(source=archive)


# ---- 1. a resume against another API is refused --------------------------------------------------

def test_a_backup_resumed_against_another_api_is_refused(server, tmp_path):
    other = start_server("--jobs", JOBS, tmp_path=tmp_path)
    try:
        k = kwatt.Kwollect(nodes=NOVA[:1], api=server.url, progress=False)
        now = dt.datetime.now().timestamp()
        k.start(now - 30)
        k.stop(now + 3600)  # a window ending after now: the backup stays incomplete, resumable
        target = tmp_path / "b"
        with pytest.raises(kwatt.IncompleteError):
            k.backup(backup_dir=target, metrics=["wattmetre_power_watt"])
        moved = kwatt.Kwollect(nodes=NOVA[:1], api=other.url, progress=False)
        moved.start(k.start_time)
        moved.stop(k.stop_time)
        with pytest.raises(kwatt.InvalidArgumentError, match="from another API"):
            moved.backup(backup_dir=target, metrics=["wattmetre_power_watt"])
    finally:
        other.stop()


# ---- 16. load() takes no absurd thread count (Ctrl-C between frames: archive reader_test) -------

@pytest.mark.parametrize("threads", [-1, 100000])
def test_load_refuses_a_thread_count_out_of_range(archive, threads):
    # In a child: before the fix, 100000 threads aborted the interpreter.
    code = textwrap.dedent(f"""
        import kwatt
        try:
            kwatt.load({str(archive)!r}, threads={threads})
        except kwatt.InvalidArgumentError as e:
            print("refused:", e)
    """)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    assert "refused: threads must be 0" in done.stdout
