"""`kwatt fetch` against the real server on loopback."""
import csv
import io
import json
import os
import pty
import subprocess
import threading
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
import requests

from conftest import KWATT, run_kwatt as run, start_server
from test_server import JOBS, T0

NOVA1 = "nova-1.lyon.grid5000.fr"


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    s = start_server(jobs=JOBS, tmp_path=tmp_path_factory.mktemp("jobs"))
    yield s
    s.stop()


def fetch(*args, env=None, check=True, timeout=300):
    result = subprocess.run([KWATT, "fetch", "--quiet", *map(str, args)], capture_output=True,
                            timeout=timeout, env=env)
    if check:
        assert result.returncode == 0, result.stderr.decode()
    return result


def lines(result):
    return [line for line in result.stdout.decode().split("\n") if line]


def server_rows(server, site, **params):
    """The server's own answer, row texts in its order."""
    body = requests.get(f"{server.url}/sites/{site}/metrics", params=params, timeout=120).text
    inner = body[1:-1]
    return [] if not inner else inner.split(",\n")


def per_node(rows):
    out = {}
    for text in rows:
        out.setdefault(json.loads(text)["device_id"], []).append(text)
    return out


def test_every_node_form_gives_the_same_rows(server):
    window = ["--start", T0 + 100, "--end", T0 + 102]
    expected = server_rows(server, "lyon", nodes="nova-1", start_time=T0 + 100,
                           end_time=T0 + 102)
    assert len(expected) > 100
    for name in (NOVA1, "nova-1.lyon", "nova-1-kavlan-4.lyon.grid5000.fr",
                 "nova-1-ipv6.lyon.grid5000.fr", "nova-1-kavlan-12-ipv6.lyon.grid5000.fr."):
        assert lines(fetch("--api", server.url, "--nodes", name, *window)) == expected, name


def test_several_sites_in_one_call_in_query_order(server):
    window = dict(start_time=T0 + 10, end_time=T0 + 20)
    result = fetch("--api", server.url, "--nodes",
                   f"yeti-1.grenoble.grid5000.fr,{NOVA1},ecotype-7.nantes,nova-4.lyon",
                   "--start", T0 + 10, "--end", T0 + 20)
    got = lines(result)
    grenoble = server_rows(server, "grenoble", nodes="yeti-1", **window)
    lyon = server_rows(server, "lyon", nodes="nova-1,nova-4", **window)
    nantes = server_rows(server, "nantes", nodes="ecotype-7", **window)
    assert len(got) == len(grenoble) + len(lyon) + len(nantes)
    # Sites come in the order they first appear; each node's rows are the server's, in order.
    assert got[:len(grenoble)] == grenoble
    assert per_node(got[len(grenoble):len(grenoble) + len(lyon)]) == per_node(lyon)
    assert got[len(grenoble) + len(lyon):] == nantes


def test_time_forms(server):
    expected = lines(fetch("--api", server.url, "--nodes", NOVA1, "--start", T0 - 10,
                           "--end", T0 - 5))
    assert sum("wattmetre_power_watt" in r for r in expected) == 6
    for start, end, tz in [("2025-04-18T13:59:50+02:00", "2025-04-18T11:59:55Z", "UTC"),
                           ("2025-04-18T13:59:50", "2025-04-18 13:59:55", "Europe/Paris"),
                           ("2025-04-18T11:59:50", "2025-04-18T11:59:55", "UTC"),
                           (f"{T0 - 10}.0", f"{T0 - 5}", "UTC")]:
        env = dict(os.environ, TZ=tz)
        assert lines(fetch("--api", server.url, "--nodes", NOVA1, "--start", start,
                           "--end", end, env=env)) == expected, (start, end, tz)
    recent = fetch("--api", server.url, "--nodes", NOVA1, "--metrics", "wattmetre_power_watt",
                   "--start", "now", "--end", "now")
    assert len(lines(recent)) <= 1
    bad = fetch("--api", server.url, "--nodes", NOVA1, "--start", "yesterday", "--end", "now",
                check=False)
    assert bad.returncode == 2 and b"--start" in bad.stderr


def test_job_scoped_fetch_and_exact_rows(server):
    got = lines(fetch("--api", server.url, "--job", "lyon:1001"))
    expected = server_rows(server, "lyon", job_id=1001)
    assert len(got) == len(expected) > 200000
    assert per_node(got) == per_node(expected)
    narrowed = lines(fetch("--api", server.url, "--job", "lyon:1001", "--nodes", "nova-4.lyon",
                           "--metrics", "wattmetre_power_watt", "--end", T0 + 1))
    assert len(narrowed) == 51 and all('"nova-4"' in r for r in narrowed)
    missing = fetch("--api", server.url, "--job", "lyon:4242", check=False)
    assert missing.returncode == 1 and b"job 4242 not found on site lyon" in missing.stderr


def test_slices_neither_lose_nor_duplicate_boundary_rows(server):
    # A budget of 500 rows makes ~370 requests for the 3 nodes of the job, cut at times where
    # wattmeter samples fall (every 20 ms).
    small = lines(fetch("--api", server.url, "--job", "lyon:1001", "--start", T0 + 595,
                        "--end", T0 + 605, "--rows-per-request", 500))
    expected = server_rows(server, "lyon", nodes="nova-1,nova-4,taurus-3", start_time=T0 + 595,
                           end_time=T0 + 605)
    assert len(small) == len(expected) and len(set(small)) == len(small)
    assert per_node(small) == per_node(expected)


def test_summary(server):
    got = lines(fetch("--api", server.url, "--job", "lyon:1001", "--summary"))
    expected = server_rows(server, "lyon", job_id=1001, summary="true")
    assert per_node(got) == per_node(expected) and len(got) > 50


def test_csv(server):
    result = fetch("--api", server.url, "--nodes", f"{NOVA1},yeti-1.grenoble", "--format", "csv",
                   "--start", T0 + 600, "--end", T0 + 601)
    rows = list(csv.DictReader(io.StringIO(result.stdout.decode())))
    raw = [json.loads(r) for r in lines(fetch("--api", server.url, "--nodes",
                                              f"{NOVA1},yeti-1.grenoble", "--start", T0 + 600,
                                              "--end", T0 + 601))]
    assert list(rows[0]) == ["timestamp", "site", "node", "device_id", "metric_id", "value",
                             "labels"]
    assert len(rows) == len(raw)
    for row, original in zip(rows, raw):
        assert row["timestamp"] == original["timestamp"]
        assert row["node"] == f"{original['device_id']}.{row['site']}.grid5000.fr"
        assert float(row["value"]) == original["value"]
        assert json.loads(row["labels"]) == original["labels"]
        assert row["labels"] == json.dumps(original["labels"], separators=(",", ":"))


def test_row_limit_is_split_and_retried(server, server_factory):
    s = server_factory("--max-rows", 3000, jobs=JOBS)
    result = run("fetch", "--api", s.url, "--job", "lyon:1001", "--end", T0 + 100)
    assert result.returncode == 0, result.stderr
    assert b" 0 splits" not in result.stderr
    got = [l for l in result.stdout.decode().split("\n") if l]
    assert per_node(got) == per_node(server_rows(server, "lyon", job_id=1001,
                                                 end_time=T0 + 100))


def test_faults_give_the_same_bytes(server, server_factory):
    clean = fetch("--api", server.url, "--job", "lyon:1001", "--end", T0 + 300).stdout
    faulty = server_factory("--fail-rate", 0.3, jobs=JOBS)
    result = run("fetch", "--api", faulty.url, "--job", "lyon:1001", "--end", T0 + 300,
                 "--rows-per-request", 5000, "--backoff", 0.05)
    assert result.returncode == 0, result.stderr
    assert b" 0 retries" not in result.stderr
    assert result.stdout == clean


def test_incomplete_fetch_is_reported_and_keeps_what_was_fetched(server_factory, tmp_path):
    s = server_factory("--fail-rate", 1.0, jobs=JOBS)
    out = tmp_path / "rows.jsonl"
    result = run("fetch", "--api", s.url, "--nodes", NOVA1, "--start", T0, "--end", T0 + 10,
                 "--retries", 1, "--backoff", 0.01, "-o", out)
    assert result.returncode == 1
    assert b"NOT FETCHED: site lyon, nodes nova-1" in result.stderr
    assert b"gave up after 2 attempts" in result.stderr
    assert out.exists()


def test_credentials_from_the_yaml_file(server_factory, tmp_path):
    s = server_factory("--auth", "alice:s3cret-pw", jobs=JOBS)
    home = tmp_path / "home"
    home.mkdir()
    (home / ".python-grid5000.yaml").write_text(
        f"uri: {s.url}\nusername: alice\npassword: s3cret-pw\nverify_ssl: false\n")
    env = dict(os.environ, HOME=str(home))
    ok = fetch("--nodes", NOVA1, "--start", T0, "--end", T0 + 1, env=env)
    assert len(lines(ok)) > 50
    (home / ".python-grid5000.yaml").write_text(
        f"uri: {s.url}\nusername: alice\npassword: wrong-pw\n")
    denied = fetch("--nodes", NOVA1, "--start", T0, "--end", T0 + 1, env=env, check=False)
    assert denied.returncode == 1
    assert b"HTTP 401" in denied.stderr and b"password" in denied.stderr
    assert b"wrong-pw" not in denied.stderr + denied.stdout


def test_clear_errors(server):
    cases = [
        (["--nodes", "nova-99.lyon"], b"unknown node nova-99.lyon"),
        (["--nodes", "nova-1.paris"], b'unknown site "paris"'),
        (["--nodes", "gemini-1.lyon"], b'site lyon has no cluster "gemini"'),
        (["--nodes", "nova-1"], b"has no site"),
    ]
    for args, message in cases:
        result = fetch("--api", server.url, *args, "--start", T0, "--end", T0 + 1, check=False)
        assert result.returncode != 0 and message in result.stderr, (args, result.stderr)
    refused = fetch("--api", "http://127.0.0.1:9/stable", "--nodes", NOVA1, "--start", T0,
                    "--end", T0 + 1, check=False)
    assert refused.returncode == 1 and b"Couldn't connect" in refused.stderr
    backwards = fetch("--api", server.url, "--nodes", NOVA1, "--start", T0 + 1, "--end", T0,
                      check=False)
    assert backwards.returncode == 2 and b"before it starts" in backwards.stderr


class CorruptingProxy(BaseHTTPRequestHandler):
    """Forwards to the real server, but damages metrics bodies (a malformed answer)."""
    upstream = ""

    def do_GET(self):
        with urllib.request.urlopen(self.upstream + self.path[len("/stable"):]) as answer:
            body = answer.read()
        if "/metrics" in self.path:
            body = body.replace(b'"value":', b'"value":x', 1)
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def test_malformed_body_is_an_error_not_a_shorter_answer(server):
    CorruptingProxy.upstream = server.url
    proxy = ThreadingHTTPServer(("127.0.0.1", 0), CorruptingProxy)
    thread = threading.Thread(target=proxy.serve_forever, daemon=True)
    thread.start()
    try:
        result = fetch("--api", f"http://127.0.0.1:{proxy.server_address[1]}/stable", "--nodes",
                       NOVA1, "--start", T0, "--end", T0 + 1, "--retries", 1, "--backoff", 0.01,
                       check=False)
        assert result.returncode == 1
        assert b"malformed answer" in result.stderr and b"NOT FETCHED" in result.stderr
    finally:
        proxy.shutdown()


def test_progress_line_on_a_terminal(server):
    primary, secondary = pty.openpty()
    process = subprocess.Popen([KWATT, "fetch", "--api", server.url, "--job", "lyon:1001",
                                "-o", os.devnull], stderr=secondary, stdout=subprocess.DEVNULL)
    os.close(secondary)
    output = b""
    while True:
        try:
            chunk = os.read(primary, 4096)
        except OSError:
            break
        if not chunk:
            break
        output += chunk
    assert process.wait(timeout=120) == 0
    os.close(primary)
    assert b"requests" in output and b"rows" in output and b"ETA" in output
