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
