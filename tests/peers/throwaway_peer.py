"""The Python side of kwatt_test_peers (tests/peers/test_peers.cc): a throwaway peer (PostgreSQL,
influxd, snmpd, ipmi_sim) started as the C++ tests start it, for the integration tests
(tests/integration/conftest.py) and the benchmarks (bench/*.py)."""
from __future__ import annotations

import json
import os
import subprocess


def peers_binary(kwatt: str) -> str:
    """kwatt_test_peers, built beside the kwatt binary (or $KWATT_PEERS_BIN)."""
    return os.environ.get("KWATT_PEERS_BIN",
                          os.path.join(os.path.dirname(os.path.abspath(kwatt)), "kwatt_test_peers"))


class ThrowawayPeer:
    """`kwatt_test_peers KIND ARGS...` in the foreground: `where` is the JSON line saying where the
    peer is; command() sends one command line and returns its answer; close() ends the program's
    input, which stops the peer and removes its directory."""

    def __init__(self, binary: str, kind: str, *args):
        self.kind = kind
        self.process = subprocess.Popen([binary, kind, *map(str, args)], stdin=subprocess.PIPE,
                                        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        line = self.process.stdout.readline()
        if not line:
            raise RuntimeError(f"{kind} did not start: {self.process.stderr.read()}")
        self.where = json.loads(line)

    def command(self, line: str) -> str:
        self.process.stdin.write(line + "\n")
        self.process.stdin.flush()
        return self.process.stdout.readline().strip()

    def expect_ok(self, line: str) -> None:
        """Sends a command; CalledProcessError when it does not answer "ok"."""
        answer = self.command(line)
        if answer != "ok":
            raise subprocess.CalledProcessError(1, f"kwatt_test_peers {self.kind}: {line}",
                                                stderr=answer)

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.stdin.close()
            self.process.wait(timeout=120)


class Postgres(ThrowawayPeer):
    """`kwatt_test_peers postgres`: Debian's PostgreSQL on a Unix socket in a directory of its own
    (as `nobody`, through setpriv, when root); fsync off unless `durable` (benchmarks)."""

    def __init__(self, binary: str, durable: bool = False):
        super().__init__(binary, "postgres", *(["--durable"] if durable else []))
        self.dir = self.where["dir"]
        self.bin = self.where["bin"]
        self.pid = self.where["pid"]

    def uri(self, db: str = "postgres") -> str:
        return f"postgresql:///{db}?host={self.dir}&user=postgres"

    def new_database(self) -> str:
        answer = self.command("database")
        if answer.startswith("error: "):
            raise RuntimeError(f"kwatt_test_peers postgres: {answer}")
        return answer

    def stop(self, mode: str = "immediate") -> None:
        """Stops the server (a peer down); start() starts it again."""
        self.expect_ok(f"stop {mode}")

    def start(self) -> None:
        self.expect_ok("start")
