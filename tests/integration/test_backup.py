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


def test_ctrl_c_says_the_same_command_completes_the_backup(server, tmp_path):
    slow = start_server("--rows-per-second", 30000, jobs=JOBS, tmp_path=tmp_path)
    try:
        target = tmp_path / "stopped"
        process = subprocess.Popen([KWATT, "backup", "--api", slow.url, "--job", "lyon:1001",
                                    "-q", "-o", target], stderr=subprocess.PIPE)
        time.sleep(1.0)
        process.send_signal(signal.SIGINT)
        _, stderr = process.communicate(timeout=30)
        assert process.returncode == 130
        assert (f"kwatt backup: interrupted; the rows written so far stay in {target}: run the "
                "same kwatt backup command again to complete it").encode() in stderr
        assert json.loads((target / "manifest.json").read_text())["state"] == "incomplete"
        again = run("backup", "--api", slow.url, "--job", "lyon:1001", "-q", "-o", target)
        assert again.returncode == 0, again.stderr
        assert json.loads((target / "manifest.json").read_text())["state"] == "complete"
    finally:
        slow.stop()


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
        # Resumed from the same API (its address), now at full speed.
        slow.stop()
        slow = start_server(jobs=JOBS, tmp_path=tmp_path, port=slow.port)
        resumed = run("backup", "--api", slow.url, "--job", "lyon:1001", "-o", target)
        assert resumed.returncode == 0, resumed.stderr
        assert b"completing the interrupted backup" in resumed.stderr
        assert data_files(target) == data_files(reference)
        assert json.loads((target / "manifest.json").read_text())["files"] == \
            json.loads((reference / "manifest.json").read_text())["files"]
        again = run("backup", "--api", slow.url, "--job", "lyon:1001", "-o", target)
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
    mended = start_server(jobs=JOBS, tmp_path=tmp_path, port=flaky.port)  # the API, mended
    try:
        second = run("backup", "--api", mended.url, "--job", "lyon:1001", "--rows-per-request",
                     20000, "-o", target)
    finally:
        mended.stop()
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


def small_backup(server, target, *extra):
    return run("backup", "--api", server.url, "--nodes", NODES[0], "--start", T0, "--end",
               T0 + 90, "--metrics", "wattmetre_power_watt", *extra, "-o", target)


def interrupted(server, target):
    """A backup stopped after committing each file whole, before marking the archive complete:
    the manifest incomplete and a journal recording each file, as the writer writes them."""
    assert small_backup(server, target, "-q").returncode == 0
    manifest = json.loads((target / "manifest.json").read_text())
    journal = "".join(
        json.dumps({"file": f["path"], "bytes": f["bytes"], "rows": f["rows"],
                    "frames": f["frames"], "next": manifest["window"]["end_ns"] + 1,
                    "first": f["first"] or "", "last": f["last"] or "",
                    "metrics": f["metrics"]}) + "\n"
        for f in manifest["files"])
    for key in ("files", "fetch", "completed_at"):
        del manifest[key]
    manifest["state"] = "incomplete"
    (target / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")
    (target / "journal.jsonl").write_text(journal)
    return manifest


def test_leftovers_of_a_backup_killed_at_once_are_a_fresh_start(server, tmp_path):
    # What a backup killed in its first milliseconds leaves: data/ and the first manifest's
    # temporary file, maybe cut.
    for tmp in ['{\n  "format": "kwatt-archive",\n  "format_ver', ""]:
        target = tmp_path / f"leftovers{len(tmp)}"
        (target / "data").mkdir(parents=True)
        (target / "manifest.json.tmp").write_text(tmp)
        result = small_backup(server, target)
        assert result.returncode == 0, result.stderr
        assert json.loads((target / "manifest.json").read_text())["state"] == "complete"
        assert not (target / "manifest.json.tmp").exists()
    # Not its own: refused, untouched.
    target = tmp_path / "not-leftovers"
    (target / "data").mkdir(parents=True)
    (target / "data" / "mine.jsonl.zst").write_bytes(b"my rows")
    result = small_backup(server, target)
    assert result.returncode == 2 and b"holds no kwatt archive" in result.stderr
    assert (target / "data" / "mine.jsonl.zst").read_bytes() == b"my rows"


def test_resume_trusts_no_journal_record(server, tmp_path):
    reference = tmp_path / "reference"
    assert small_backup(server, reference, "-q").returncode == 0
    target = tmp_path / "archive"
    interrupted(server, target)
    (tmp_path / "victim.jsonl.zst").write_bytes(b"precious")
    with open(target / "journal.jsonl", "a") as journal:
        journal.write('{"file": "data/../../victim.jsonl.zst", "bytes": 0, "rows": 0, '
                      '"frames": 0, "next": 0}\n')
        journal.write('{"file": "data/../../escaped.jsonl.zst", "bytes": 0, "rows": 0, '
                      '"frames": 0, "next": 0}\n')
        journal.write(f'{{"file": "data/{NODES[0]}.jsonl.zst", "bytes": "12"}}\n')
        journal.write(f'{{"file": "data/{NODES[0]}.jsonl.zst", "bytes": 0, "rows": 0, '
                      '"frames": 0}\n')
    result = small_backup(server, target)
    assert result.returncode == 0, result.stderr
    assert b"completing the interrupted backup" in result.stderr
    assert (tmp_path / "victim.jsonl.zst").read_bytes() == b"precious"
    assert not (tmp_path / "escaped.jsonl.zst").exists()
    assert data_files(target) == data_files(reference)


def test_resume_refuses_a_damaged_manifest_without_crashing(server, tmp_path):
    target = tmp_path / "archive"
    manifest = interrupted(server, target)
    for window in ({"start": manifest["window"]["start"]},  # no end
                   dict(manifest["window"], start=""),
                   dict(manifest["window"], end_ns="soon")):
        (target / "manifest.json").write_text(json.dumps(dict(manifest, window=window)))
        result = small_backup(server, target)
        assert result.returncode == 1, result.stderr
        assert b"manifest.json" in result.stderr and b"window" in result.stderr
    # Without start_ns and end_ns (which inspect --verify accepts), it resumes from the texts.
    window = {"start": manifest["window"]["start"], "end": manifest["window"]["end"]}
    (target / "manifest.json").write_text(json.dumps(dict(manifest, window=window)))
    result = small_backup(server, target)
    assert result.returncode == 0, result.stderr


@pytest.mark.parametrize("damage", ["truncated", "deleted"])
def test_resume_refuses_data_files_that_lack_what_the_journal_committed(server, tmp_path, damage):
    target = tmp_path / "archive"
    interrupted(server, target)
    path = target / "data" / f"{NODES[0]}.jsonl.zst"
    size = path.stat().st_size
    if damage == "truncated":
        with open(path, "r+b") as f:
            f.truncate(size // 2)
    else:
        path.unlink()
    result = small_backup(server, target)
    assert result.returncode == 1, result.stderr
    assert f"data/{NODES[0]}.jsonl.zst".encode() in result.stderr
    assert b"back up again into a new directory" in result.stderr
    # Not grown back with zeros, not marked complete.
    assert (path.stat().st_size == size // 2) if damage == "truncated" else not path.exists()
    assert json.loads((target / "manifest.json").read_text())["state"] == "incomplete"


def test_a_window_ending_after_now_stays_incomplete_and_resumable(server, tmp_path):
    target = tmp_path / "future"
    now = int(time.time())
    args = ("backup", "--api", server.url, "--nodes", NODES[0], "--metrics",
            "wattmetre_power_watt", "--start", now - 30, "--end", now + 3600, "-o", target)
    first = run(*args)
    assert first.returncode == 1, first.stderr
    assert b"after now" in first.stderr and b"rerun the same kwatt backup command after" in \
        first.stderr
    assert json.loads((target / "manifest.json").read_text())["state"] == "incomplete"
    again = run(*args)
    assert again.returncode == 1, again.stderr
    assert b"already holds the complete backup" not in again.stderr
    assert b"completing the interrupted backup" in again.stderr and b"after now" in again.stderr


def test_a_running_job_stays_incomplete_until_it_ends(server_factory, tmp_path):
    started = int(time.time()) - 90
    job = {"site": "lyon", "uid": 4242, "user": "alice", "nodes": ["nova-1"],
           "started_at": started, "types": ["monitor"]}
    running = server_factory(jobs={"jobs": [job]})
    target = tmp_path / "running"
    args = ("backup", "--job", "lyon:4242", "--metrics", "wattmetre_power_watt", "-o", target)
    first = run(*args[:1], "--api", running.url, *args[1:])
    assert first.returncode == 1, first.stderr
    assert b"job lyon:4242 has not ended" in first.stderr
    assert b"rerun the same kwatt backup command after the job ends" in first.stderr
    manifest = json.loads((target / "manifest.json").read_text())
    assert manifest["state"] == "incomplete"
    again = run(*args[:1], "--api", running.url, *args[1:])
    assert again.returncode == 1, again.stderr
    assert b"completing the interrupted backup" in again.stderr and b"has not ended" in again.stderr
    assert json.loads((target / "manifest.json").read_text())["window"]["end_ns"] > \
        manifest["window"]["end_ns"]
    # The job has ended (same simulated data, the same API restarted): the next run completes the
    # archive, as a backup taken after its end would be.
    running.stop()
    ended = start_server(jobs={"jobs": [dict(job, stopped_at=int(time.time()) - 1)]},
                         tmp_path=tmp_path, port=running.port)
    last = run(*args[:1], "--api", ended.url, *args[1:])
    assert last.returncode == 0, last.stderr
    reference = tmp_path / "reference"
    assert run("backup", "--api", ended.url, *args[1:-1], reference, "-q").returncode == 0
    assert data_files(target) == data_files(reference)
    assert run("inspect", target, "--verify").returncode == 0
    ended.stop()
