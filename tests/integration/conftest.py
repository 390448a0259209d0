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


def start_server(*args, jobs=None, tmp_path=None):
    """Starts `kwatt serve --simulate --port 0 ARGS` and returns once it printed its URL."""
    command = [KWATT, "serve", "--simulate", "--port", "0", *map(str, args)]
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


def port_is_free(port):
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
            return True
        except OSError:
            return False
