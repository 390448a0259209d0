"""Issue 10, as a new user and an attacker would try kwatt: files it was not asked to write,
credentials in URLs, server options that make no sense. Each test failed before its fix."""
import json
import os
import socket
import stat
import subprocess
import threading

import pytest

from conftest import KWATT, run_kwatt as run, start_server
from test_server import JOBS, T0

NOVA1 = "nova-1.lyon.grid5000.fr"


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    s = start_server(jobs=JOBS, tmp_path=tmp_path_factory.mktemp("jobs"))
    yield s
    s.stop()


@pytest.fixture(scope="module")
def archive(server, tmp_path_factory):
    path = tmp_path_factory.mktemp("archive") / "a"
    result = run("backup", "--api", server.url, "--nodes", NOVA1, "--start", T0,
                 "--end", T0 + 20, "-q", "-o", path)
    assert result.returncode == 0, result.stderr
    return path


# ---- 1. kwatt export never replaces a file it was not asked to write ---------------------------

def test_export_writes_through_a_device_node(archive, tmp_path):
    if os.geteuid() != 0:
        pytest.skip("creating a device node needs root (CI runs as root)")
    device = tmp_path / "null"
    os.mknod(device, 0o666 | stat.S_IFCHR, os.makedev(1, 3))  # /dev/null's numbers
    result = run("export", archive, "--to", "csv", "-o", device)
    assert result.returncode == 0, result.stderr
    assert stat.S_ISCHR(device.lstat().st_mode), "the device node was replaced by a file"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["null"]


def test_export_writes_through_a_fifo(archive, tmp_path):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    received = []
    reader = threading.Thread(target=lambda: received.append(fifo.read_bytes()))
    reader.start()
    result = run("export", archive, "--to", "csv", "-o", fifo, timeout=60)
    reader.join(timeout=60)
    assert result.returncode == 0, result.stderr
    assert stat.S_ISFIFO(fifo.lstat().st_mode)
    whole = run("export", archive, "--to", "csv", "-o", "-").stdout
    assert received == [whole] and whole.count(b"\n") > 20


def test_export_replaces_a_link_target_not_the_link(archive, tmp_path):
    target, link = tmp_path / "target.csv", tmp_path / "link.csv"
    target.write_text("old\n")
    link.symlink_to(target)
    assert run("export", archive, "--to", "csv", "-o", link).returncode == 0
    assert link.is_symlink() and target.read_bytes().startswith(b"timestamp,")


def test_export_refuses_a_directory_or_an_empty_name(archive, tmp_path):
    for output, message in [(tmp_path, b"is a directory"), ("", b"-o")]:
        result = run("export", archive, "--to", "csv", "-o", output)
        assert result.returncode == 2 and message in result.stderr, result.stderr
    assert list(tmp_path.iterdir()) == []


# ---- 2. credentials never stored or shown --------------------------------------------------------

PASSWORD = "p@ss:w0rd@x"  # '@' and ':' inside: redaction must not stop at the first '@'


def with_credentials(url, user="alice", password=PASSWORD):
    from urllib.parse import quote
    scheme, rest = url.split("://", 1)
    return f"{scheme}://{user}:{quote(password, safe='@:')}@{rest}"


def test_credentials_in_the_api_url_authenticate_and_are_never_stored(tmp_path):
    s = start_server("--auth", f"alice:{PASSWORD}", jobs=JOBS, tmp_path=tmp_path)
    try:
        api = with_credentials(s.url)
        env = dict(os.environ, HOME=str(tmp_path))  # no ~/.python-grid5000.yaml
        out = tmp_path / "a"
        backup = run("backup", "--api", api, "--nodes", NOVA1, "--start", T0, "--end", T0 + 5,
                     "-o", out, env=env)
        assert backup.returncode == 0, backup.stderr
        manifest = (out / "manifest.json").read_text()
        assert json.loads(manifest)["query"]["api"] == s.url
        shown = [backup.stdout + backup.stderr, manifest.encode()]
        for args in (["inspect", out], ["inspect", out, "--json"]):
            result = run(*args, env=env)
            assert result.returncode == 0, result.stderr
            shown.append(result.stdout + result.stderr)
        for text in shown:
            assert b"w0rd" not in text and b"alice:" not in text
    finally:
        s.stop()


def test_credentials_are_not_printed_in_errors():
    # Nothing listens on port 9: the message names the address, without the password.
    api = with_credentials("http://127.0.0.1:9/stable")
    result = run("fetch", "--api", api, "--nodes", NOVA1, "--start", T0, "--end", T0 + 1)
    assert result.returncode == 1
    assert b"127.0.0.1:9" in result.stderr
    assert b"w0rd" not in result.stderr and b"p@ss" not in result.stderr


def test_an_archive_written_with_credentials_does_not_show_them(archive, tmp_path):
    # An archive of an older kwatt may hold them: inspect shows the address without them.
    import shutil
    old = tmp_path / "old"
    shutil.copytree(archive, old)
    manifest = json.loads((old / "manifest.json").read_text())
    manifest["query"]["api"] = with_credentials(manifest["query"]["api"])
    (old / "manifest.json").write_text(json.dumps(manifest))
    for args in (["inspect", old], ["inspect", old, "--json"]):
        result = run(*args)
        assert result.returncode == 0, result.stderr
        assert b"w0rd" not in result.stdout + result.stderr


# ---- 10. server options that make no sense -------------------------------------------------------

def test_serve_refuses_a_port_out_of_range():
    result = run("serve", "--simulate", "--port", 70000, timeout=30)
    assert result.returncode == 2 and b"--port" in result.stderr, result.stderr


def test_serve_refuses_a_port_another_server_listens_on(tmp_path):
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    first = subprocess.Popen([KWATT, "serve", "--simulate", "--port", str(port)],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert first.stdout.readline().startswith("http://")
        second = run("serve", "--simulate", "--port", port, timeout=30)
        assert second.returncode == 1, second.stderr
        assert b"cannot listen" in second.stderr and str(port).encode() in second.stderr
    finally:
        first.terminate()
        first.wait(timeout=10)


def test_the_request_log_shows_the_query(tmp_path):
    s = start_server("--log", jobs=JOBS, tmp_path=tmp_path)
    try:
        result = run("fetch", "--api", s.url, "--nodes", NOVA1, "--start", T0, "--end", T0 + 1,
                     "--metrics", "wattmetre_power_watt", "--quiet")
        assert result.returncode == 0, result.stderr
    finally:
        s.stop()
    log = s.process.stderr.read()
    assert "GET /stable/sites/lyon/metrics?nodes=nova-1&start_time=" in log, log
    assert "metrics=wattmetre_power_watt" in log and 'HTTP/1.1" 200 ' in log


def test_a_request_that_is_not_utf8_gets_an_answer_and_the_server_stays_up(server):
    # Found by fuzz/server_query_fuzzer: the error message quoting the path failed to render
    # and the uncaught exception ended the server.
    port = int(server.url.split(":")[2].split("/")[0])
    for target in (b"/stable/sites/\x80\xa3lyon", b"/stable/sites/lyon/metrics?nodes=\xff&job_id=1"):
        with socket.create_connection(("127.0.0.1", port), timeout=10) as connection:
            connection.sendall(b"GET " + target + b" HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            answer = b""
            while chunk := connection.recv(65536):
                answer += chunk
        assert answer.startswith(b"HTTP/1.1 4"), answer[:200]
        json.loads(answer.split(b"\r\n\r\n", 1)[1])  # a JSON error body
    assert server.process.poll() is None
    assert run("fetch", "--api", server.url, "--nodes", NOVA1, "--start", T0, "--end", T0 + 1,
               "--quiet").returncode == 0


# ---- 10. options that contradict each other or are empty ----------------------------------------

def test_contradicting_or_empty_options_exit_2_naming_them(server, archive, tmp_path):
    for command in ("energy", "stats"):
        result = run(command, archive, "--json", "--csv")
        assert result.returncode == 2 and b"--json" in result.stderr and b"--csv" in result.stderr, \
            result.stderr
    query = ["--api", server.url, "--nodes", NOVA1, "--start", T0, "--end", T0 + 1]
    for args in (["fetch", *query, "-o", ""], ["backup", *query, "-o", ""],
                 ["export", archive, "--to", "csv", "-o", ""]):
        result = run(*args)
        assert result.returncode == 2 and b"-o" in result.stderr and b"empty" in result.stderr, \
            (args, result.stderr)


def test_an_html_error_page_is_named_on_one_line(tmp_path):
    s = start_server("--fail-rate", 1, "--fail-status", 500, jobs=JOBS, tmp_path=tmp_path)
    try:
        result = run("fetch", "--api", s.url, "--nodes", NOVA1, "--start", T0, "--end", T0 + 16,
                     "--backoff", 0.01, "--quiet")
    finally:
        s.stop()
    assert result.returncode == 1
    failures = [line for line in result.stderr.split(b"\n") if b"NOT FETCHED" in line]
    assert len(failures) == 1, result.stderr
    assert b"500 Internal Server Error (an HTML page)" in failures[0]
    assert b"<html>" not in result.stderr
