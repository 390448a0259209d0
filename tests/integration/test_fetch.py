"""`kwatt fetch` against the real server on loopback."""
import csv
import io
import json
import os
import pty
import re
import subprocess
import threading
import time
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


def forward(handler, change=lambda body: body):
    """Answers `handler`'s GET with the real server's answer (at handler.upstream), changed."""
    with urllib.request.urlopen(handler.upstream + handler.path[len("/stable"):]) as answer:
        body = change(answer.read())
    handler.send_response(200)
    handler.send_header("Content-Type", "application/json")
    handler.send_header("Content-Length", str(len(body)))
    handler.end_headers()
    handler.wfile.write(body)


class CorruptingProxy(BaseHTTPRequestHandler):
    """Forwards to the real server, but damages metrics bodies (a malformed answer)."""
    upstream = ""

    def do_GET(self):
        forward(self, lambda body: body.replace(b'"value":', b'"value":x', 1)
                if "/metrics" in self.path else body)

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


# ---- faults: bounded requests, merged failures (issue 10, defect 8) -----------------------------

SUMMARY = re.compile(rb"\((\d+) requests, (\d+) retries, (\d+) splits\)")


def counts(result):
    """(requests, retries, splits) of the summary line."""
    found = SUMMARY.search(result.stderr)
    assert found, result.stderr
    return tuple(int(n) for n in found.groups())


def not_fetched(result):
    return [line for line in result.stderr.decode().split("\n") if "NOT FETCHED" in line]


def test_a_persistent_html_500_is_retried_a_few_times_not_split(server_factory):
    s = server_factory("--fail-rate", 1, "--fail-status", 500, jobs=JOBS)
    result = run("fetch", "--api", s.url, "--nodes", NOVA1, "--start", T0, "--end", T0 + 16,
                 "--retries", 2, "--backoff", 0.01, "-o", os.devnull, timeout=60)
    assert result.returncode == 1, result.stderr
    assert counts(result) == (3, 2, 0)
    failures = not_fetched(result)
    assert len(failures) == 1, failures
    assert "HTTP 500" in failures[0] and "Internal Server Error" in failures[0]
    assert "gave up after 3 attempts" in failures[0]


def test_a_job_behind_a_failing_proxy_ends_with_one_merged_failure(server_factory):
    # lyon:1001 (30 min, 3 nodes) planned in tens of requests, each refused with an HTML 500.
    s = server_factory("--fail-rate", 1, "--fail-status", 500, jobs=JOBS)
    result = run("fetch", "--api", s.url, "--job", "lyon:1001", "--rows-per-request", 20000,
                 "--retries", 1, "--backoff", 0.01, "-o", os.devnull, timeout=120)
    assert result.returncode == 1, result.stderr
    requests, retries, splits = counts(result)
    assert splits == 0 and requests == 2 * retries and retries >= 10, (requests, retries)
    failures = not_fetched(result)
    assert len(failures) == 1, failures
    assert ("site lyon, nodes nova-1,nova-4,taurus-3, 2025-04-18T12:00:00Z .. "
            "2025-04-18T12:30:00Z:") in failures[0]


def densest(server, site, node, start, end):
    """The server's rows of `node` over [start, end], the most rows one metric has in a second,
    and the most rows all metrics have in a second."""
    rows = server_rows(server, site, nodes=node, start_time=start, end_time=end)
    per_metric, per_second = {}, {}
    for text in rows:
        row = json.loads(text)
        second = row["timestamp"][:19]
        per_metric[second, row["metric_id"]] = per_metric.get((second, row["metric_id"]), 0) + 1
        per_second[second] = per_second.get(second, 0) + 1
    return rows, max(per_metric.values()), max(per_second.values())


def test_a_second_too_large_for_the_server_is_split_by_metric(server, server_factory):
    # yeti-1 in job grenoble:2001 (monitor): 1024 rows of prom_node_cpu_seconds_total at each
    # scrape instant, with other metrics in the same second. No time slice can cut an instant.
    rows, one_metric, all_metrics = densest(server, "grenoble", "yeti-1", T0 + 100, T0 + 103)
    limit = one_metric + 20  # each metric fits in it over a second, all of them do not
    assert all_metrics > limit
    s = server_factory("--max-rows", limit, jobs=JOBS)
    result = run("fetch", "--api", s.url, "--nodes", "yeti-1.grenoble", "--start", T0 + 100,
                 "--end", T0 + 103, timeout=120)
    assert result.returncode == 0, result.stderr
    got = [line for line in result.stdout.decode().split("\n") if line]
    assert sorted(got) == sorted(rows) and len(set(got)) == len(got)
    requests, retries, splits = counts(result)
    assert splits > 0 and requests < 200, counts(result)


def test_what_even_one_metric_cannot_fetch_is_reported_in_a_few_lines(server, server_factory):
    # nova-1 in job lyon:1001: 50 wattmeter rows a second (and 256 rows of CPU counters at each
    # node exporter scrape), a few rows of other metrics.
    _, one_metric, _ = densest(server, "lyon", "nova-1", T0 + 100, T0 + 103)
    s = server_factory("--max-rows", one_metric // 2, jobs=JOBS)
    result = run("fetch", "--api", s.url, "--nodes", NOVA1, "--start", T0 + 100,
                 "--end", T0 + 107, timeout=120)
    assert result.returncode == 1, result.stderr
    requests, retries, splits = counts(result)
    assert requests < 200 and retries == 0, counts(result)
    failures = not_fetched(result)
    assert 1 <= len(failures) <= 3, failures
    # The wattmeter's 7 s, refused piece by piece, are one line.
    assert any("2025-04-18T12:01:40Z .. 2025-04-18T12:01:47Z, metrics wattmetre_power_watt: "
               "too much data for Kwollect even in the smallest piece" in line
               for line in failures), failures
    failed_metrics = {m for line in failures for m in line.split(", metrics ")[1].split(":")[0]
                      .split(",")}
    expected = server_rows(server, "lyon", nodes="nova-1", start_time=T0 + 100,
                           end_time=T0 + 107)
    got = [line for line in result.stdout.decode().split("\n") if line]
    assert set(got) <= set(expected) and len(set(got)) == len(got)
    assert {r for r in expected if json.loads(r)["metric_id"] not in failed_metrics} <= set(got)


# ---- messages that name the real cause (issue 10, defect 9) --------------------------------------

def test_an_unknown_metric_is_named_in_every_command(server, tmp_path):
    window = ["--nodes", NOVA1, "--start", T0, "--end", T0 + 10, "--metrics",
              "wattmeter_power_watt"]
    for command in (["fetch", "-o", os.devnull], ["backup", "-o", tmp_path / "archive"],
                    ["stats"]):
        result = run(*command, "--api", server.url, *window)
        assert result.returncode == 1, (command, result.stderr)
        assert b"unknown metric wattmeter_power_watt for cluster nova (lyon)" in result.stderr
        assert b"did you mean wattmetre_power_watt?" in result.stderr
    # A metric that only some node of the query has is fine (only_for, on-demand metrics).
    ok = fetch("--api", server.url, "--nodes", f"{NOVA1},yeti-1.grenoble", "--start", T0,
               "--end", T0 + 1, "--metrics", "wattmetre_power_watt")
    assert lines(ok)


class FixedAnswer(BaseHTTPRequestHandler):
    """Answers every request with `status`, `extra_headers` and `body`; `hits` counts them."""
    status, extra_headers, body, hits = 200, {}, b"", 0

    def do_GET(self):
        type(self).hits += 1
        self.send_response(self.status)
        for name, value in self.headers_to_send().items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(self.body)))
        self.end_headers()
        self.wfile.write(self.body)

    def headers_to_send(self):
        return {name: value.replace("{path}", self.path)
                for name, value in self.extra_headers.items()}

    def log_message(self, *args):
        pass


def serve(handler):
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    return httpd, f"http://127.0.0.1:{httpd.server_address[1]}/stable"


def answering(status, body=b"", **headers):
    return type("Answer", (FixedAnswer,),
                dict(status=status, body=body, extra_headers=headers, hits=0))


def test_each_misleading_answer_is_named(server):
    query = ["--nodes", NOVA1, "--start", T0, "--end", T0 + 1]
    # --api without /stable: the server has no /sites/lyon, and no /sites either.
    bare = server.url[:-len("/stable")]
    result = fetch("--api", bare, *query, check=False)
    assert result.returncode == 1
    assert b"looks wrong" in result.stderr and b"should end with /stable" in result.stderr
    assert b"unknown site" not in result.stderr
    result = fetch("--api", bare, "--job", "lyon:1001", check=False)
    assert b"looks wrong" in result.stderr and b"not found" not in result.stderr.split(b":")[0]
    # An unknown site in --job is an unknown site, not an unknown job.
    result = fetch("--api", server.url, "--job", "lyonx:123", check=False)
    assert result.returncode == 1
    assert b'unknown site "lyonx" (sites: ' in result.stderr and b"lyon " in result.stderr
    # An empty 200, a redirect to another host.
    real = server.url[:-len("/stable")]
    for handler, message in [
            (answering(200), b"empty answer (HTTP 200 without a body)"),
            (answering(301, Location=real + "{path}"),
             b"redirects to " + server.url.encode() + b"/sites/lyon; kwatt does not follow "
             b"redirects: give --api " + server.url.encode())]:
        httpd, url = serve(handler)
        try:
            result = fetch("--api", url, *query, check=False)
            assert result.returncode != 0 and message in result.stderr, result.stderr
        finally:
            httpd.shutdown()


class RateLimited(BaseHTTPRequestHandler):
    """Forwards to the real server, but answers each metrics request first with a 429 asking to
    wait 1 s (forever when `always`)."""
    upstream, always, seen, refused = "", False, set(), 0

    def do_GET(self):
        cls = type(self)
        if "/metrics" in self.path and (cls.always or self.path not in cls.seen):
            cls.seen.add(self.path)
            cls.refused += 1
            self.send_response(429)
            self.send_header("Retry-After", "1")
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        forward(self)

    def log_message(self, *args):
        pass


def test_a_429_is_retried_after_its_retry_after(server):
    expected = lines(fetch("--api", server.url, "--nodes", NOVA1, "--start", T0, "--end", T0 + 2))
    for always in (False, True):
        handler = type("Limited", (RateLimited,), dict(upstream=server.url, always=always,
                                                          seen=set(), refused=0))
        httpd, url = serve(handler)
        try:
            began = time.monotonic()
            result = run("fetch", "--api", url, "--nodes", NOVA1, "--start", T0, "--end", T0 + 2,
                         "--retries", 2, "--backoff", 0.01, timeout=60)
            took = time.monotonic() - began
        finally:
            httpd.shutdown()
        if not always:
            assert result.returncode == 0, result.stderr
            assert lines(result) == expected and handler.refused == 1
            assert took >= 1.0  # it waited as asked, not --backoff's 0.01 s
        else:
            assert result.returncode == 1 and handler.refused == 3 and took >= 2.0
            assert b"HTTP 429" in result.stderr and b"limits the request rate" in result.stderr


def test_a_wrong_password_is_not_a_missing_one(server_factory, tmp_path):
    s = server_factory("--auth", "alice:s3cret-pw", jobs=JOBS)
    env = dict(os.environ, HOME=str(tmp_path))
    for name in ("KWATT_API_URL", "KWATT_USERNAME", "KWATT_PASSWORD"):
        env.pop(name, None)
    query = ["--api", s.url, "--nodes", NOVA1, "--start", T0, "--end", T0 + 1]
    missing = fetch(*query, env=env, check=False)
    assert missing.returncode == 1 and b"needs credentials" in missing.stderr, missing.stderr
    assert b"KWATT_USERNAME" in missing.stderr
    wrong = fetch(*query, env=dict(env, KWATT_USERNAME="alice", KWATT_PASSWORD="nope-pw"),
                  check=False)
    assert wrong.returncode == 1
    assert b"refused the credentials of user alice" in wrong.stderr, wrong.stderr
    assert b"nope-pw" not in wrong.stderr


# ---- options that mean nothing are refused (issue 10, defect 10) ---------------------------------

def test_meaningless_client_options_exit_2_naming_the_option(server):
    query = ["--api", server.url, "--nodes", NOVA1, "--start", T0, "--end", T0 + 1]
    for option, value in [("--concurrency", 0), ("--concurrency", -1), ("--per-site", 0),
                          ("--rows-per-request", 0), ("--rows-per-request", -5),
                          ("--retries", -1), ("--backoff", -0.5)]:
        result = fetch(*query, option, value, check=False, timeout=30)
        assert result.returncode == 2, (option, value, result.stderr)
        assert option.encode() in result.stderr, result.stderr
    assert fetch(*query, "--retries", 0, "--backoff", 0).returncode == 0


def test_start_and_end_narrow_a_job_never_widen_it(server):
    # Bounds outside the job's window [T0, T0 + 1800] are clipped to it.
    widened = lines(fetch("--api", server.url, "--job", "lyon:1001", "--nodes", "nova-4.lyon",
                          "--metrics", "wattmetre_power_watt", "--start", T0 - 600,
                          "--end", T0 + 1))
    narrowed = lines(fetch("--api", server.url, "--job", "lyon:1001", "--nodes", "nova-4.lyon",
                           "--metrics", "wattmetre_power_watt", "--end", T0 + 1))
    assert widened == narrowed and len(narrowed) == 51
    late = lines(fetch("--api", server.url, "--job", "lyon:1001", "--nodes", "nova-4.lyon",
                       "--metrics", "wattmetre_power_watt", "--start", T0 + 1799,
                       "--end", T0 + 5000))
    assert late and all(json.loads(r)["timestamp"] <= "2025-04-18T14:30:00+02:00" for r in late)
    # A window that does not meet the job's is refused.
    for bounds, message in [(["--start", T0 + 1801], b"after the end of job lyon:1001"),
                            (["--end", T0 - 1], b"before the start of job lyon:1001")]:
        result = fetch("--api", server.url, "--job", "lyon:1001", *bounds, check=False)
        assert result.returncode == 2 and message in result.stderr, result.stderr


def test_a_site_that_is_down_does_not_stop_the_others(tmp_path):
    down = start_server("--down-site", "nantes", tmp_path=tmp_path)
    try:
        result = run("fetch", "--api", down.url, "--nodes", "nova-1.lyon,ecotype-1.nantes",
                     "--metrics", "wattmetre_power_watt", "--start",
                     "2025-04-18T14:00:00+02:00", "--end", "2025-04-18T14:00:10+02:00",
                     "--retries", 0)
    finally:
        down.stop()
    assert result.returncode == 1
    rows = [json.loads(line) for line in result.stdout.decode().splitlines()]
    assert rows and {r["device_id"] for r in rows} == {"nova-1"}
    stderr = result.stderr.decode()
    assert ("NOT FETCHED: site nantes, nodes ecotype-1" in stderr
            and "the API of site nantes could not be read: HTTP 503" in stderr
            and "503 Service Unavailable No server is available to handle this request. (an HTML "
                "page)" in stderr), stderr
