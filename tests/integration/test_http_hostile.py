"""kwatt's three HTTP endpoints (`kwatt serve`, `kwatt collect --listen`, `kwatt meter --listen`)
as an attacker meets them: thousands of idle connections and slow readers while a normal request
is timed, memory and open files before and after; requests smuggled in a body, framings that
disagree, header floods (doc/server.md, "The HTTP server")."""

import json
import os
import resource
import signal
import socket
import statistics
import subprocess
import time
import urllib.request

import pytest

from conftest import KWATT, start_server
from test_meter import SimulatedRapl

IDLE = 2000
SLOW_READERS = 100


@pytest.fixture(autouse=True)
def small_sanitizer_quarantine(monkeypatch):
    # AddressSanitizer keeps freed memory aside (256 MB by default) to find uses after free:
    # the memory figures below would measure its quarantine, not the server.
    options = os.environ.get("ASAN_OPTIONS", "")
    monkeypatch.setenv("ASAN_OPTIONS", (options + ":" if options else "") + "quarantine_size_mb=8")


def port_of(url):
    return int(url.split(":")[2].split("/")[0])


class Endpoint:
    def __init__(self, process, port, path, big_path):
        self.process, self.port, self.path, self.big_path = process, port, path, big_path

    def rss_kib(self):
        for line in open(f"/proc/{self.process.pid}/status"):
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
        return 0

    def open_files(self):
        return len(os.listdir(f"/proc/{self.process.pid}/fd"))


@pytest.fixture(params=["serve", "collect", "meter"])
def endpoint(request, tmp_path):
    if request.param == "serve":
        server = start_server("--threads", "4")
        now = int(time.time())
        # A day of two nodes' metrics: tens of megabytes, streamed.
        big = (f"/stable/sites/lyon/metrics?nodes=nova-1,nova-4&start_time={now - 86400}"
               f"&end_time={now - 60}")
        yield Endpoint(server.process, server.port, "/stable/sites", big)
        assert server.stop() == 0
        return
    if request.param == "collect":
        config = tmp_path / "conf"
        config.mkdir()
        # A device that refuses connections: the collector runs, counting failures.
        (config / "metrics.yaml").write_text(json.dumps([
            {"name": "node", "device_id": "nova-1", "url": "prometheus://127.0.0.1:1/"}]))
        command = [KWATT, "collect", "--config", str(config), "--store",
                   str(tmp_path / "s.store"), "--listen", "127.0.0.1:0", "--quiet"]
        rapl = None
    else:
        rapl = SimulatedRapl(tmp_path / "sys")
        command = [KWATT, "meter", "--sysfs-root", str(rapl.root), "--no-attribution",
                   "--period", "200ms", "--listen", "127.0.0.1:0", "-q"]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        url = process.stdout.readline().strip()
        assert url.startswith("http://127.0.0.1:"), process.stderr.read()
        yield Endpoint(process, port_of(url), "/metrics", "/metrics")
    finally:
        process.send_signal(signal.SIGTERM)
        process.communicate(timeout=60)
        if rapl:
            rapl.stop()
    assert process.returncode == 0


def timed_get(port, path):
    began = time.monotonic()
    with socket.create_connection(("127.0.0.1", port), timeout=60) as s:
        s.sendall(b"GET " + path.encode() + b" HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        answer = b""
        while chunk := s.recv(65536):
            answer += chunk
    return answer.split(b" ", 2)[1], time.monotonic() - began


def test_idle_clients_and_slow_readers_cost_a_socket_not_the_server(endpoint):
    # Before (cpp-httplib, a thread per connection): 64 idle connections made a GET take 15 s,
    # 2,000 left it unanswered after 200 s, 16 slow readers 59 s.
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard < IDLE + SLOW_READERS + 200:
        pytest.skip(f"this machine allows {hard} open files; the test needs "
                    f"{IDLE + SLOW_READERS + 200}")
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    time.sleep(0.5)
    files_before, rss_before = endpoint.open_files(), endpoint.rss_kib()
    held = []
    try:
        # Idle: a request line begun and never finished (held to the 10 s header deadline), and
        # silent connections (closed after 2 s idle).
        for n in range(IDLE):
            s = socket.create_connection(("127.0.0.1", endpoint.port), timeout=60)
            if n % 2 == 0:
                s.sendall(b"GET " + endpoint.path.encode())
            held.append(s)
        # Slow readers: an answer asked for and never read.
        for _ in range(SLOW_READERS):
            s = socket.socket()
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            s.connect(("127.0.0.1", endpoint.port))
            s.sendall(b"GET " + endpoint.big_path.encode() + b" HTTP/1.1\r\nHost: x\r\n\r\n")
            held.append(s)
        took = []
        for _ in range(20):
            status, seconds = timed_get(endpoint.port, endpoint.path)
            assert status == b"200"
            took.append(seconds)
        # The benchmark's bounds are 0.1 s median, 1 s at most (BENCHMARKS.md); this is the
        # sanitized build on a shared machine.
        assert statistics.median(took) < 1.0 and max(took) < 5.0, took
    finally:
        for s in held:
            s.close()
    # Every connection's file descriptor is given back, and the memory they took is bounded.
    deadline = time.monotonic() + 30
    while endpoint.open_files() > files_before + 2 and time.monotonic() < deadline:
        time.sleep(0.2)
    assert endpoint.open_files() <= files_before + 2, (files_before, endpoint.open_files())
    grown_mb = (endpoint.rss_kib() - rss_before) / 1024
    assert grown_mb < 200, f"the server grew {grown_mb:.0f} MB for {IDLE} idle connections"
    status, _ = timed_get(endpoint.port, endpoint.path)
    assert status == b"200"


def raw(port, data, timeout=10):
    """Sends `data` on a new connection and returns all the server sends until it closes or
    `timeout` passes without a byte."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(data)
        answer = b""
        try:
            while chunk := s.recv(65536):
                answer += chunk
        except (socket.timeout, ConnectionResetError):
            pass
        return answer


AUTH = b"Authorization: Basic YWxpY2U6c2VjcmV0\r\n"  # alice:secret


def test_a_request_in_a_get_body_is_never_run(tmp_path):
    # Before: the body of a GET with Content-Length was taken as the next request, and a POST of
    # rows hidden in it was stored.
    server = start_server("--auth", "alice:secret")
    try:
        rows = json.dumps([{"timestamp": int(time.time()) - 5, "device_id": "nova-1",
                            "metric_id": "smuggled", "value": 1}]).encode()
        inner = (b"POST /stable/sites/lyon/metrics HTTP/1.1\r\nHost: x\r\n" + AUTH +
                 b"Content-Type: application/json\r\nContent-Length: " +
                 str(len(rows)).encode() + b"\r\n\r\n" + rows)
        outer = (b"GET /stable/sites HTTP/1.1\r\nHost: x\r\n" + AUTH + b"Content-Length: " +
                 str(len(inner)).encode() + b"\r\n\r\n" + inner +
                 b"GET /stable/ HTTP/1.1\r\nHost: x\r\n" + AUTH + b"Connection: close\r\n\r\n")
        answer = raw(server.port, outer)
        # Two answers: the GET (its body dropped) and the request after it; none to the POST.
        assert answer.count(b"HTTP/1.1 200") == 2, answer[:2000]
        assert b"HTTP/1.1 201" not in answer and b"HTTP/1.1 204" not in answer
        now = int(time.time())
        request = urllib.request.Request(
            f"{server.url}/sites/lyon/metrics?nodes=nova-1&metrics=smuggled"
            f"&start_time={now - 60}&end_time={now + 5}",
            headers={"Authorization": "Basic YWxpY2U6c2VjcmV0"})
        assert json.loads(urllib.request.urlopen(request, timeout=30).read()) == []
        # The same POST sent as a request of its own is stored: the check above could fail.
        assert raw(server.port, inner.replace(b"Host: x\r\n", b"Host: x\r\nConnection: close\r\n")
                   ).startswith(b"HTTP/1.1 201"), "the smuggled POST is not a valid request"
        assert len(json.loads(urllib.request.urlopen(request, timeout=30).read())) == 1
    finally:
        assert server.stop() == 0


@pytest.mark.parametrize("headers,status", [
    (b"Content-Length: 5\r\nTransfer-Encoding: chunked\r\n", b"400"),
    (b"Transfer-Encoding: xchunked\r\n", b"501"),
    (b"Transfer-Encoding: chunked, identity\r\n", b"501"),
    (b"Transfer-Encoding : chunked\r\nContent-Length: 5\r\n", b"400"),
    (b"Transfer-Encoding: chunked\r\n\r\n-5\r\n", b"400"),
    (b"Host: y\r\n", b"400"),
    (b"X-A: 1\r\n folded\r\n", b"400"),
])
def test_framings_that_disagree_are_refused_at_once(headers, status):
    # Before: an unknown coding or a negative chunk size held a thread 60 s; a second Host, a
    # folded line and whitespace before a colon were taken.
    server = start_server()
    try:
        began = time.monotonic()
        head = b"POST /stable/sites/lyon/metrics HTTP/1.1\r\nHost: x\r\n" + headers
        answer = raw(server.port, head if head.endswith(b"-5\r\n") else head + b"\r\n", 30)
        assert answer.split(b" ", 2)[1] == status, answer
        assert time.monotonic() - began < 5
    finally:
        assert server.stop() == 0


def test_header_floods_and_large_chunked_bodies_are_refused_and_leave_no_memory(tmp_path):
    # Before: one request of 1,000,000 headers was parsed whole (883 MB kept after 16), and a
    # 300 MiB chunked upload read whole (1.4 GB) where Content-Length got 413.
    server = start_server("--auth", "alice:secret")
    try:
        rss = lambda: int(next(line for line in open(f"/proc/{server.process.pid}/status")
                               if line.startswith("VmRSS:")).split()[1])
        before = rss()
        flood = b"GET /stable/sites HTTP/1.1\r\nHost: x\r\n" + b"X-F: y\r\n" * 1_000_000 + b"\r\n"
        for _ in range(4):
            answer = raw(server.port, flood)
            assert answer.startswith(b"HTTP/1.1 431"), answer[:200]
        with socket.create_connection(("127.0.0.1", server.port), timeout=30) as s:
            s.sendall(b"POST /stable/sites/lyon/metrics HTTP/1.1\r\nHost: x\r\n" + AUTH +
                      b"Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n")
            chunk = b"100000\r\n" + b" " * 0x100000 + b"\r\n"  # 1 MiB each
            answer = b""
            try:
                for _ in range(70):  # over the 64 MiB limit
                    s.sendall(chunk)
            except (BrokenPipeError, ConnectionResetError):
                pass
            try:
                while piece := s.recv(65536):
                    answer += piece
            except (socket.timeout, ConnectionResetError):
                pass
        assert answer.startswith(b"HTTP/1.1 413"), answer[:200]
        grown_mb = (rss() - before) / 1024
        assert grown_mb < 150, f"{grown_mb:.0f} MB kept after the floods"
    finally:
        assert server.stop() == 0
