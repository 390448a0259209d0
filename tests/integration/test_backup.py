"""`kwatt backup` against the real server: round trip, kill -9 and resume, refusals."""
import json
import signal
import subprocess
import time
from pathlib import Path

import pytest

from conftest import KWATT, run_kwatt as run, start_server
from test_server import JOBS, T0

NODES = ["nova-1.lyon.grid5000.fr", "nova-4.lyon.grid5000.fr", "taurus-3.lyon.grid5000.fr"]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    s = start_server(jobs=JOBS, tmp_path=tmp_path_factory.mktemp("jobs"))
    yield s
    s.stop()


def unpack(path):
    return subprocess.run(["zstd", "-dc", str(path)], capture_output=True, check=True).stdout


def data_files(directory):
    return {p.name: p.read_bytes() for p in sorted((Path(directory) / "data").iterdir())}


def test_round_trip_is_exact(server, tmp_path):
    backup = run("backup", "--api", server.url, "--job", "lyon:1001", "-o", tmp_path / "a")
    assert backup.returncode == 0, backup.stderr
    assert b"times smaller" in backup.stderr
    fetched = run("fetch", "--api", server.url, "--job", "lyon:1001", "--quiet").stdout
    rows = [line for line in fetched.decode().split("\n") if line]
    manifest = json.loads((tmp_path / "a" / "manifest.json").read_text())
    assert manifest["format"] == "kwatt-archive" and manifest["state"] == "complete"
    assert [n["node"] for n in manifest["nodes"]] == NODES
    assert "lyon/nova" in manifest["catalogue"] and "lyon/taurus" in manifest["catalogue"]
    assert not (tmp_path / "a" / "journal.jsonl").exists()
    total = 0
    for entry, node in zip(manifest["files"], NODES):
        uid = node.split(".")[0]
        mine = [r for r in rows if json.loads(r)["device_id"] == uid]
        text = unpack(tmp_path / "a" / entry["path"]).decode()
        assert text == "".join(r + "\n" for r in mine)  # byte for byte, in the API's order
        assert entry["rows"] == len(mine) and sum(entry["metrics"].values()) == len(mine)
        assert entry["bytes"] == (tmp_path / "a" / entry["path"]).stat().st_size
        assert entry["first"] == json.loads(mine[0])["timestamp"]
        total += len(mine)
    assert total == len(rows)


@pytest.mark.parametrize("kill_after", [0.3, 1.5, 3.0])
def test_kill_and_resume_gives_the_uninterrupted_archive(server, tmp_path, kill_after):
    reference = tmp_path / "reference"
    assert run("backup", "--api", server.url, "--job", "lyon:1001", "-q",
               "-o", reference).returncode == 0
    slow = start_server("--rows-per-second", 30000, jobs=JOBS, tmp_path=tmp_path)
    try:
        target = tmp_path / "killed"
        process = subprocess.Popen([KWATT, "backup", "--api", slow.url, "--job", "lyon:1001",
                                    "-q", "-o", target])
        time.sleep(kill_after)
        process.send_signal(signal.SIGKILL)
        process.wait()
        manifest = json.loads((target / "manifest.json").read_text())
        assert manifest["state"] == "incomplete"
        # Resumed through another address: only the API moved, the query is the same.
        resumed = run("backup", "--api", server.url, "--job", "lyon:1001", "-o", target)
        assert resumed.returncode == 0, resumed.stderr
        assert b"completing the interrupted backup" in resumed.stderr
        assert data_files(target) == data_files(reference)
        assert json.loads((target / "manifest.json").read_text())["files"] == \
            json.loads((reference / "manifest.json").read_text())["files"]
        again = run("backup", "--api", server.url, "--job", "lyon:1001", "-o", target)
        assert again.returncode == 0 and b"already holds the complete backup" in again.stderr
    finally:
        slow.stop()


def test_failed_pieces_leave_it_incomplete_then_a_rerun_completes_it(server, tmp_path):
    flaky = start_server("--fail-rate", 0.5, jobs=JOBS, tmp_path=tmp_path)  # same seed: same data
    target = tmp_path / "flaky"
    try:
        first = run("backup", "--api", flaky.url, "--job", "lyon:1001", "--retries", 0,
                    "--rows-per-request", 20000, "-o", target)
    finally:
        flaky.stop()
    assert first.returncode == 1
    assert b"NOT FETCHED" in first.stderr and b"run the same kwatt backup command again" in \
        first.stderr
    assert json.loads((target / "manifest.json").read_text())["state"] == "incomplete"
    second = run("backup", "--api", server.url, "--job", "lyon:1001", "--rows-per-request", 20000,
                 "-o", target)
    assert second.returncode == 0, second.stderr
    reference = tmp_path / "reference"
    assert run("backup", "--api", server.url, "--job", "lyon:1001", "-q",
               "-o", reference).returncode == 0
    assert data_files(target) == data_files(reference)


def test_refuses_another_query_or_a_foreign_directory(server, tmp_path):
    target = tmp_path / "b"
    assert run("backup", "--api", server.url, "--nodes", NODES[0], "--start", T0, "--end",
               T0 + 10, "-q", "-o", target).returncode == 0
    other = run("backup", "--api", server.url, "--nodes", NODES[0], "--start", T0, "--end",
                T0 + 20, "-o", target)
    assert other.returncode == 2 and b"holds the backup of another query" in other.stderr
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    (foreign / "notes.txt").write_text("my results")
    refused = run("backup", "--api", server.url, "--nodes", NODES[0], "--start", T0, "--end",
                  T0 + 10, "-o", foreign)
    assert refused.returncode == 2 and b"holds no kwatt archive" in refused.stderr
    assert (foreign / "notes.txt").read_text() == "my results"
