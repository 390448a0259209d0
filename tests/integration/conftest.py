"""Fixtures that run the real `kwatt` binary: servers on loopback, ports chosen by the kernel."""
import json
import os
import signal
import socket
import subprocess
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
KWATT = os.environ.get("KWATT_BIN", str(ROOT / "build" / "kwatt"))


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


class RunningPostgres:
    """A throwaway PostgreSQL cluster (Debian's, from `make deps`) listening on a Unix socket in
    its own directory only, as src/testing/postgres.h starts one for the C++ tests: initdb
    refuses root, so as root it runs as `nobody`."""

    def __init__(self, directory):
        self.dir = Path(directory)
        bins = sorted(Path("/usr/lib/postgresql").glob("*/bin/initdb"))
        if not bins:
            raise RuntimeError("PostgreSQL's initdb is not in /usr/lib/postgresql/*/bin: run make deps")
        self.bin = bins[-1].parent
        self.prefix = []
        if os.geteuid() == 0:
            import pwd
            nobody = pwd.getpwnam("nobody")
            os.chown(self.dir, nobody.pw_uid, nobody.pw_gid)
            self.prefix = ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups"]
        self._run("initdb", "-D", self.dir / "data", "-A", "trust", "-U", "postgres", "--no-sync",
                  "-E", "UTF8", "--locale=C")
        self.start()
        self.databases = 0

    def start(self):
        """Starts the server (again, after stop())."""
        self._run("pg_ctl", "-D", self.dir / "data", "-w", "-l", self.dir / "server.log", "-o",
                  f"-k {self.dir} -c listen_addresses='' -F", "start")

    def _run(self, program, *args):
        subprocess.run([*self.prefix, str(self.bin / program), *map(str, args)], check=True,
                       cwd=self.dir, capture_output=True, timeout=120)

    def uri(self, db="postgres"):
        return f"postgresql:///{db}?host={self.dir}&user=postgres"

    def new_database(self):
        self.databases += 1
        name = f"kwatt_{self.databases}"
        subprocess.run([str(self.bin / "psql"), "-q", "-d", self.uri(), "-c",
                        f"CREATE DATABASE {name}"], check=True, capture_output=True, timeout=60)
        return self.uri(name)

    def stop(self):
        self._run("pg_ctl", "-D", self.dir / "data", "-m", "immediate", "stop")


@pytest.fixture(scope="session")
def postgres():
    # Not under pytest's temporary directory: its parents are private to root, and the cluster
    # runs as nobody.
    import shutil
    import tempfile
    directory = tempfile.mkdtemp(prefix="kwatt_pg_")
    running = RunningPostgres(directory)
    yield running
    running.stop()
    shutil.rmtree(directory, ignore_errors=True)
