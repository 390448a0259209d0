"""Issue 10 from Python: credentials never kept, files never replaced (a progress function's
own exception is raised as it was: test_kwollect.py::test_progress_function)."""
import datetime as dt
import os
import stat
import subprocess
import sys
import zoneinfo
from pathlib import Path
from urllib.parse import quote

import pytest

import kwatt
from conftest import JOBS, start_server

PARIS = zoneinfo.ZoneInfo("Europe/Paris")
NOVA1 = "nova-1.lyon.grid5000.fr"
T0 = dt.datetime(2025, 4, 18, 14, 4, tzinfo=PARIS).timestamp()
PASSWORD = "p@ss:w0rd@x"


def with_credentials(url):
    scheme, rest = url.split("://", 1)
    return f"{scheme}://alice:{quote(PASSWORD, safe='@:')}@{rest}"


def test_credentials_in_the_api_url_are_used_and_never_kept(tmp_path, no_config):
    s = start_server("--auth", f"alice:{PASSWORD}", "--jobs", JOBS, tmp_path=tmp_path)
    try:
        k = kwatt.Kwollect(nodes=[NOVA1], api=with_credentials(s.url), progress=False)
        assert k.api == s.url
        k.start(T0)
        k.stop(T0 + 5)
        assert len(k.get_metrics(metrics=["wattmetre_power_watt"])[NOVA1]) > 100
        path = k.backup(backup_dir=tmp_path / "exp")
        assert kwatt.manifest(path)["query"]["api"] == s.url
        assert "w0rd" not in (Path(path) / "manifest.json").read_text()
        # The credentials are what authenticates: without them, the API refuses.
        with pytest.raises(kwatt.AuthenticationError) as refused:
            kwatt.Kwollect(nodes=[NOVA1], api=s.url, progress=False).deploy()
        assert "w0rd" not in str(refused.value)
    finally:
        s.stop()


def test_parquet_export_writes_through_a_fifo(server, tmp_path):
    k = kwatt.Kwollect(nodes=[NOVA1], api=server.url, progress=False)
    k.start(T0)
    k.stop(T0 + 5)
    path = k.backup(backup_dir=tmp_path / "exp")
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    reader = subprocess.Popen(["cat", str(fifo)], stdout=subprocess.PIPE)
    result = subprocess.run([sys.executable, "-m", "kwatt", "export", path, "--to", "parquet",
                             "-o", str(fifo)], capture_output=True, text=True, timeout=120)
    received = reader.communicate(timeout=60)[0]
    assert result.returncode == 0, result.stderr
    assert stat.S_ISFIFO(fifo.lstat().st_mode)
    assert received[:4] == b"PAR1" and received[-4:] == b"PAR1"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["exp", "pipe"]


def test_custom_metrics_pushed_to_the_server_are_fetched_by_name(tmp_path, no_config):
    import requests
    s = start_server("--auth", f"alice:{PASSWORD}", tmp_path=tmp_path)
    try:
        rows = [{"timestamp": T0 + i, "device_id": "nova-1", "metric_id": "app_phase",
                 "value": i, "labels": {"step": str(i)}} for i in range(3)]
        pushed = requests.post(s.url + "/sites/lyon/metrics", json=rows,
                               auth=("alice", PASSWORD), timeout=10)
        assert pushed.status_code == 201
        k = kwatt.Kwollect(nodes=[NOVA1], api=with_credentials(s.url), progress=False)
        k.start(T0)
        k.stop(T0 + 5)
        with pytest.raises(kwatt.NotFoundError, match=r"custom_metrics=True in Python"):
            k.get_metrics(metrics=["app_phase"])
        got = k.get_metrics(metrics=["app_phase"], custom_metrics=True)[NOVA1]
        assert [(r["value"], r["labels"]) for r in got] == [(i, {"step": str(i)}) for i in range(3)]
        frame = k.to_pandas(metrics=["app_phase"], custom_metrics=True)
        assert list(frame["value"]) == [0, 1, 2]
    finally:
        s.stop()
