"""Issue 21, the experimenter's path at its edges, with the real kwatt and server: a second run at
the same time, a rerun with something else changed, valid syntax that is nonsense, an output that
cannot be written. Each test failed before its fix."""
import json
import os
import subprocess
import threading
import time
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import requests

from conftest import KWATT, run_kwatt as run, start_server
from test_hostile import archive, server  # noqa: F401  (the simulated testbed, and an archive of it)
from test_server import JOBS, T0

NOVA1 = "nova-1.lyon.grid5000.fr"
POWER = "wattmetre_power_watt"


class Proxy:
    """An API in front of the real server that changes what it answers: `change(path, body)`
    returns the body to send (after `delay` seconds for metrics requests)."""

    def __init__(self, upstream, change=lambda path, body: body, delay=0.0):
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):
                url = upstream + self.path[len("/stable"):]
                with urllib.request.urlopen(url) as answer:
                    body = answer.read()
                if "/metrics" in self.path:
                    time.sleep(proxy.delay)
                body = change(self.path, body)
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.delay = delay
        self.http = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.http.server_address[1]}/stable"
        threading.Thread(target=self.http.serve_forever, daemon=True).start()

    def close(self):
        self.http.shutdown()


def data_files(directory):
    return {p.name: p.read_bytes() for p in sorted((Path(directory) / "data").iterdir())}


# ---- 1, 2. a resume matches the API; one writer at a time, seen by readers -----------------------

def test_a_backup_resumed_against_another_api_is_refused(server, server_factory, tmp_path):
    target = tmp_path / "b"
    now = int(time.time())
    query = ("--nodes", NOVA1, "--metrics", POWER, "--start", now - 30, "--end", now + 3600,
             "-o", target)
    first = run("backup", "--api", server.url, *query)
    assert first.returncode == 1 and b"after now" in first.stderr, first.stderr
    other = server_factory(jobs=JOBS)
    mixed = run("backup", "--api", other.url, *query)
    assert mixed.returncode == 2, mixed.stderr
    assert b"holds a backup from another API" in mixed.stderr
    assert f"--api {server.url}".encode() in mixed.stderr
    same = run("backup", "--api", server.url, *query)
    assert same.returncode == 1 and b"completing the interrupted backup" in same.stderr


def test_a_running_backup_holds_its_directory(server, tmp_path):
    slow = Proxy(server.url, delay=1.5)
    target = tmp_path / "b"
    query = ("--nodes", NOVA1, "--metrics", POWER, "--start", T0, "--end", T0 + 60, "-q")
    try:
        first = subprocess.Popen([KWATT, "backup", "--api", slow.url, *map(str, query),
                                  "-o", str(target)], stderr=subprocess.PIPE)
        deadline = time.monotonic() + 30
        while not (target / "manifest.json").exists() and time.monotonic() < deadline:
            time.sleep(0.02)
        assert (target / "manifest.json").exists()
        second = run("backup", "--api", slow.url, *query, "-o", target)
        looked = run("inspect", target)
        read = run("cat", target)
        assert first.wait(timeout=60) == 0, first.stderr.read()
    finally:
        slow.close()
    assert second.returncode == 1, second.stderr
    assert b"another kwatt process is writing" in second.stderr
    assert b"being written by a kwatt backup running now" in looked.stdout, looked.stdout
    assert read.returncode == 1 and b"being written by a kwatt backup running now" in read.stderr
    assert b"interrupted" not in read.stderr and b"Run the same" not in read.stderr
    assert run("inspect", target, "--verify").returncode == 0


# ---- 4. nothing is written before the inputs are validated -----------------------------------------

def test_a_failed_fetch_leaves_an_existing_output_as_it_was(server, tmp_path):
    output = tmp_path / "rows.jsonl"
    output.write_text("my earlier rows\n")
    for wrong in (["--metrics", "wattmetre_power_wat"], ["--nodes", "nova-99.lyon"]):
        args = {"--nodes": NOVA1, "--metrics": POWER}
        args.update(dict(zip(wrong[::2], wrong[1::2])))
        result = run("fetch", "--api", server.url, *sum(args.items(), ()), "--start", T0,
                     "--end", T0 + 5, "-q", "-o", output)
        assert result.returncode != 0, result.stderr
        assert b"nothing was written" in result.stderr, result.stderr
        assert output.read_text() == "my earlier rows\n"
        if b"unknown metric" in result.stderr:  # the hint names the methods that take it (19)
            assert b"custom_metrics=True in Python's get_metrics and to_pandas" in result.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["rows.jsonl"]
    good = run("fetch", "--api", server.url, "--nodes", NOVA1, "--metrics", POWER, "--start", T0,
               "--end", T0 + 5, "-q", "-o", output)
    assert good.returncode == 0 and output.read_text().count("\n") > 100


def test_a_refused_backup_leaves_nothing_that_blocks_the_corrected_one(server, tmp_path):
    target = tmp_path / "b"
    for wrong in (["--metrics", "wattmetre_power_wat", "--nodes", NOVA1],
                  ["--metrics", POWER, "--nodes", "nova-99.lyon"]):
        refused = run("backup", "--api", server.url, *wrong, "--start", T0, "--end", T0 + 5,
                      "-o", target)
        assert refused.returncode in (1, 2), refused.stderr
        assert not target.exists()
    job = run("backup", "--api", server.url, "--job", "lyon:999999", "-o", target)
    assert job.returncode != 0 and not target.exists(), job.stderr
    target.mkdir()  # an empty directory given by the user stays, empty
    refused = run("backup", "--api", server.url, "--metrics", "nope", "--nodes", NOVA1, "--start",
                  T0, "--end", T0 + 5, "-o", target)
    assert refused.returncode in (1, 2) and list(target.iterdir()) == []
    good = run("backup", "--api", server.url, "--metrics", POWER, "--nodes", NOVA1, "--start", T0,
               "--end", T0 + 5, "-q", "-o", target)
    assert good.returncode == 0, good.stderr


# ---- 5. an output is never inside an input -----------------------------------------------------

@pytest.mark.parametrize("to", ["csv", "parquet"])
def test_export_refuses_an_output_inside_the_archive(archive, to):
    before = (archive / "manifest.json").read_bytes()
    for inside in (archive / "manifest.json", archive / "data" / "x.csv", archive / "new.csv"):
        result = run("export", archive, "--to", to, "-o", inside)
        assert result.returncode == 2, result.stderr
        assert b"which this command reads" in result.stderr
    assert (archive / "manifest.json").read_bytes() == before
    assert not (archive / "new.csv").exists()
    assert run("inspect", archive, "--verify").returncode == 0


# ---- 6. rows out of time order are refused when fetching ---------------------------------------

def swap_two_rows(path, body):
    if "/metrics" not in path:
        return body
    rows = json.loads(body)
    if len(rows) > 10:
        rows[3], rows[8] = rows[8], rows[3]
    return json.dumps(rows).encode()


def test_an_answer_out_of_time_order_is_never_backed_up_as_complete(server, tmp_path):
    proxy = Proxy(server.url, swap_two_rows)
    try:
        args = ("--api", proxy.url, "--nodes", NOVA1, "--metrics", POWER, "--start", T0, "--end",
                T0 + 5, "--retries", 1, "--backoff", 0.01)
        fetched = run("fetch", *args, "-o", tmp_path / "rows.jsonl")
        backup = run("backup", *args, "-o", tmp_path / "b")
    finally:
        proxy.close()
    for result in (fetched, backup):
        assert result.returncode == 1, result.stderr
        assert b"rows out of time order" in result.stderr and b"NOT FETCHED" in result.stderr
    assert b"INCOMPLETE" in backup.stderr
    manifest = json.loads((tmp_path / "b" / "manifest.json").read_text())
    assert manifest["state"] == "incomplete"


# ---- 7. no command exits 0 when its output is lost -----------------------------------------------

def test_every_report_fails_when_stdout_cannot_be_written(archive, server, tmp_path):
    store = tmp_path / "store.kwatt"
    assert run("import", archive, "--store", store).returncode == 0
    added = run("jobs", "add", "--store", store, "--site", "lyon", "--nodes", "nova-1",
                "--start", T0, "--stop", T0 + 20)
    assert added.returncode == 0, added.stderr
    commands = [
        ["energy", archive], ["stats", archive], ["inspect", archive],
        ["simulate", "energy", "--node", NOVA1, "--start", T0, "--end", T0 + 20],
        ["store", "info", store], ["jobs", "list", "--store", store, "--site", "lyon"],
        ["energy", "--api", server.url, "--nodes", NOVA1, "--start", T0, "--end", T0 + 20],
    ]
    for command in commands:
        with open("/dev/full", "wb") as full:
            result = subprocess.run([KWATT, *map(str, command)], stdout=full,
                                    stderr=subprocess.PIPE, timeout=120)
        assert result.returncode == 1, (command, result.stderr)
        assert b"cannot write its output (stdout)" in result.stderr, (command, result.stderr)


# ---- 9. a node named twice is one node -----------------------------------------------------------

def name_a_node_twice(path, body):
    """A job whose assigned nodes name one node twice (as a jobs file naming nova-1 and
    nova-1.lyon.grid5000.fr made the simulator answer)."""
    if "/jobs/" not in path:
        return body
    job = json.loads(body)
    job["assigned_nodes"] = job["assigned_nodes"] + job["assigned_nodes"][:1]
    return json.dumps(job).encode()


def test_a_node_named_twice_in_a_job_counts_once(server, tmp_path):
    proxy = Proxy(server.url, name_a_node_twice)
    try:
        query = ("--job", "lyon:1001", "--start", T0, "--end", T0 + 30)
        once = run("energy", "--api", server.url, *query, "--json")
        twice = run("energy", "--api", proxy.url, *query, "--json")
        target = tmp_path / "b"
        backup = run("backup", "--api", proxy.url, *query, "--metrics", POWER, "-q", "-o", target)
    finally:
        proxy.close()
    assert once.returncode == 0 and twice.returncode == 0, twice.stderr
    a, b = json.loads(once.stdout), json.loads(twice.stdout)
    assert b["total"]["joules"] == pytest.approx(a["total"]["joules"])
    assert len(b["nodes"]) == len(a["nodes"])
    assert backup.returncode == 0, backup.stderr
    assert run("inspect", target, "--verify").returncode == 0


# ---- 15. inputs that reach too far ---------------------------------------------------------------

def test_a_job_site_that_is_not_a_name_is_refused_before_any_request(server):
    result = run("fetch", "--api", server.url, "--job", "lyon/../../../sid/sites/lyon:1001")
    assert result.returncode == 2 and b"is not a site name" in result.stderr, result.stderr
    negative = run("fetch", "--api", server.url, "--job", "lyon:-5")
    assert negative.returncode == 2 and b"not an OAR job id" in negative.stderr


def test_an_api_url_that_is_no_http_base_url_is_refused(server, tmp_path):
    secret = tmp_path / "secret.json"
    secret.write_text('["the content of a private file"]')
    for api, why in [(f"{server.url}?x=1", b"without a query"), (f"{server.url}#top",
                     b"without a query"), (f"file://{tmp_path}", b"http:// or https://"),
                     ("ftp://127.0.0.1/stable", b"http:// or https://")]:
        result = run("fetch", "--api", api, "--job", "lyon:1001")
        assert result.returncode == 2 and why in result.stderr, (api, result.stderr)
        assert b"private file" not in result.stderr


# ---- 18. hundreds of metric ids are split over requests, not one URL too long ------------------------

def test_four_hundred_metric_ids_are_fetched_in_several_requests(server):
    custom = [f"my_custom_metric_number_{k:03d}" for k in range(420)]
    result = run("fetch", "--api", server.url, "--nodes", NOVA1, "--start", T0, "--end", T0 + 2,
                 "--metrics", ",".join([POWER] + custom), "--custom-metrics")
    assert result.returncode == 0, result.stderr[-2000:]
    rows = [json.loads(line) for line in result.stdout.splitlines()]
    assert rows and {row["metric_id"] for row in rows} == {POWER}
    times = [row["timestamp"] for row in rows]
    assert len(times) == len(set(times)) == 101  # 50 Hz over [T0, T0 + 2]: each row once


@pytest.mark.parametrize("cut", ["budget", "url"])
def test_a_backup_cut_by_metric_keeps_every_row_of_every_piece(server, tmp_path, cut):
    # The pieces of one window cut by metric (a small budget of rows per request, or lists too
    # long for a URL) each hold rows of the whole window: delivered one after the other, the
    # second's rows before the first's last committed frame were dropped from the archive (9 of
    # 90,363 here), which still said it was complete.
    query = ("--api", server.url, "--job", "lyon:1001", "--start", T0, "--end", T0 + 600, "-q")
    metrics = [POWER, "bmc_ambient_temp_celsius"]
    whole, target = tmp_path / "whole", tmp_path / "cut"
    assert run("backup", *query, "--metrics", ",".join(metrics), "-o", whole).returncode == 0
    if cut == "budget":
        extra = ("--metrics", ",".join(metrics), "--rows-per-request", 200)
    else:
        custom = [f"my_custom_metric_number_{k:03d}" for k in range(420)]
        extra = ("--metrics", ",".join([metrics[0], *custom, metrics[1]]), "--custom-metrics")
    done = run("backup", *query, *extra, "-o", target)
    assert done.returncode == 0, done.stderr
    assert run("inspect", target, "--verify").returncode == 0
    rows = [sorted(run("cat", d).stdout.splitlines()) for d in (whole, target)]
    assert len(rows[0]) > 90000 and rows[1] == rows[0]


# ---- 19. messages that say what is wrong ---------------------------------------------------------

def test_backup_into_a_file_says_it_is_a_file(server, tmp_path):
    target = tmp_path / "results.txt"
    target.write_text("mine")
    result = run("backup", "--api", server.url, "--nodes", NOVA1, "--start", T0, "--end", T0 + 5,
                 "-o", target)
    assert result.returncode == 2 and b"is a file, not a directory" in result.stderr
    assert target.read_text() == "mine"


def test_help_of_an_unknown_command_is_an_error():
    result = run("nosuch", "--help")
    assert result.returncode == 2, result.stdout


# ---- 21. a pushed null comes back as null, "NaN" as "NaN" ----------------------------------------

@pytest.fixture(params=["memory", "sqlite", "postgresql"])
def pushable_server(request, tmp_path):
    store = {"memory": None, "sqlite": tmp_path / "site.db"}.get(request.param)
    if request.param == "postgresql":
        store = request.getfixturevalue("postgres").new_database()
    running = start_server("--auth", "alice:s3cret", store=store, tmp_path=tmp_path)
    yield running
    running.stop()


def test_a_pushed_null_comes_back_as_null(pushable_server):
    server = pushable_server
    # Bucket one: nulls only; bucket two (5 minutes later): a null beside 4 and 6.
    rows = [{"timestamp": T0 + t, "device_id": "nova-1", "metric_id": "my_reading",
             "value": value, "labels": {}}
            for t, value in ((0, None), (1, None), (300, None), (301, 4), (302, 6))]
    pushed = requests.post(server.url + "/sites/lyon/metrics", json=rows,
                           auth=("alice", "s3cret"), timeout=30)
    assert pushed.status_code == 201, pushed.text
    query = {"nodes": "nova-1", "metrics": "my_reading", "start_time": T0, "end_time": T0 + 599}
    auth = ("alice", "s3cret")
    answer = requests.get(server.url + "/sites/lyon/metrics", params=query, auth=auth, timeout=30)
    assert [r["value"] for r in answer.json()] == [None, None, None, 4, 6], answer.text  # "NaN"
    summary = requests.get(server.url + "/sites/lyon/metrics", params={**query, "summary": "true"},
                           auth=auth, timeout=30)
    # As Kwollect's aggregate (SQL's avg skips nulls): a bucket of nulls is null.
    assert [r["value"] for r in summary.json()] == [None, 5], summary.text
    api = server.url.replace("http://", "http://alice:s3cret@")
    fetched = run("fetch", "--api", api, "--nodes", "nova-1.lyon", "--metrics", "my_reading",
                  "--custom-metrics",
                  "--start", T0, "--end", T0 + 599)
    assert fetched.returncode == 0, fetched.stderr
    assert [json.loads(line)["value"] for line in fetched.stdout.splitlines()] == [
        None, None, None, 4, 6]
