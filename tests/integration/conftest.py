"""Fixtures that run the real `kwatt` binary: servers on loopback, ports chosen by the kernel."""
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
KWATT = os.environ.get("KWATT_BIN", str(ROOT / "build" / "kwatt"))
sys.path.insert(0, str(ROOT / "tests" / "peers"))
import throwaway_peer  # noqa: E402  (kwatt_test_peers' client)

# kwatt_test_peers (tests/peers/test_peers.cc): the throwaway peers' one starter.
PEERS = throwaway_peer.peers_binary(KWATT)


class RunningServer:
    def __init__(self, process, url):
        self.process = process
        self.url = url  # http://127.0.0.1:PORT/stable
        self.port = int(url.split(":")[2].split("/")[0])

    def stop(self, sig=signal.SIGTERM, timeout=10):
        if self.process.poll() is None:
            self.process.send_signal(sig)
            self.process.wait(timeout=timeout)
        return self.process.returncode


def run_kwatt(*args, timeout=300, env=None):
    """Runs `kwatt ARGS` to its end; stdout and stderr captured as bytes."""
    return subprocess.run([KWATT, *map(str, args)], capture_output=True, timeout=timeout, env=env)


def wait_until(condition, what, timeout=30, every=0.05):
    """Asks `condition()` every `every` seconds until it gives something true, and returns that;
    fails the test, naming `what`, after `timeout` seconds. A test waits for a state of its peer
    (a counter on its /metrics, a row in its store), never for an amount of time: a loaded machine
    only makes it wait longer, and an idle one does not wait at all."""
    deadline = time.monotonic() + timeout
    while True:
        got = condition()
        if got:
            return got
        if time.monotonic() > deadline:
            pytest.fail(f"waited {timeout} s for {what}")
        time.sleep(every)


def start_server(*args, jobs=None, tmp_path=None, store=None, port=0):
    """Starts `kwatt serve --simulate --port 0 ARGS` (`--store STORE` instead of `--simulate` when
    a store is given) and returns once it printed its URL. `port`: another server's, stopped, to
    serve at the same address (a resumed backup must use the API it began with)."""
    source = ["--simulate"] if store is None else ["--store", str(store)]
    command = [KWATT, "serve", *source, "--port", str(port), *map(str, args)]
    if jobs is not None:
        path = Path(tmp_path) / f"jobs-{time.monotonic_ns()}.json"
        path.write_text(json.dumps(jobs))
        command += ["--jobs", str(path)]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    line = process.stdout.readline().strip()
    if not line.startswith("http://"):
        process.kill()
        raise RuntimeError(f"server did not start: {line!r} {process.stderr.read()}")
    return RunningServer(process, line)


@pytest.fixture
def server_factory(tmp_path):
    servers = []

    def make(*args, jobs=None):
        server = start_server(*args, jobs=jobs, tmp_path=tmp_path)
        servers.append(server)
        return server

    yield make
    for server in servers:
        server.stop()


def store_of_simulation(directory, pieces, jobs=None, store=None):
    """A store holding what the simulated testbed serves, as a user makes one: `kwatt backup` of
    each piece (the arguments of a backup: `--job lyon:1001`, or nodes and a window) from
    `kwatt serve --simulate` with `jobs` (a path, or a dict written to a file), then `kwatt import`
    of each archive. Returns the store's URI (`store`, or an embedded store in `directory`)."""
    directory = Path(directory)
    store = store or str(directory / "store.kwatt")
    if isinstance(jobs, dict):
        path = directory / "jobs.json"
        path.write_text(json.dumps(jobs))
        jobs = path
    server = start_server(*(["--jobs", jobs] if jobs else []), tmp_path=directory)
    try:
        for i, piece in enumerate(pieces):
            archive = directory / f"piece-{i}"
            done = run_kwatt("backup", "--api", server.url, *piece, "-o", archive, "--quiet")
            assert done.returncode == 0, done.stderr
            imported = run_kwatt("import", archive, "--store", store)
            assert imported.returncode == 0, imported.stderr
    finally:
        server.stop()
    return store


def port_is_free(port):
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
            return True
        except OSError:
            return False


class RunningPostgres(throwaway_peer.Postgres):
    """A throwaway PostgreSQL cluster (kwatt_test_peers postgres, as src/testing/postgres.h starts
    one for the C++ tests): Debian's, on a Unix socket in its own directory, as `nobody` when root
    (initdb refuses root). close() stops it and removes its directory."""

    def __init__(self):
        super().__init__(PEERS)
        self.dir = Path(self.dir)
        self.bin = Path(self.bin)


@pytest.fixture(scope="session")
def postgres():
    running = RunningPostgres()
    yield running
    running.close()
