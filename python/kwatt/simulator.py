"""The simulated testbed from Python: `kwatt serve --simulate` in a child process.

    with kwatt.simulator.SimulatedKwollect(jobs="examples/jobs.json") as api:
        k = kwatt.Kwollect(nodes=["nova-1.lyon"], api=api.url)

The server is the `kwatt` command (doc/server.md): it binds a free port on 127.0.0.1 and its
answers follow Kwollect's API over 7 simulated clusters (the jobs file adds jobs, load phases,
`monitor` types and outages: doc/jobs_file.md).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Literal, Optional, Union

from .errors import KwattError, NotFoundError


def find_kwatt() -> str:
    """The `kwatt` command: $KWATT_BIN, else the one installed beside this Python (pip install
    of the package puts it there), else the one on the PATH."""
    given = os.environ.get("KWATT_BIN")
    if given:
        return given
    beside = Path(sys.executable).with_name("kwatt")
    if beside.is_file():
        return str(beside)
    found = shutil.which("kwatt")
    if found:
        return found
    raise NotFoundError("no kwatt command: install the kwatt package (pip install ., or make "
                        "python in kwatt's source) or set KWATT_BIN to its path")


class SimulatedKwollect:
    """A running `kwatt serve --simulate`; `url` is its API's base URL (.../stable).

    jobs: a jobs file; options: more `kwatt serve` options ("--seed", "3", "--fail-rate",
    "0.1"...); kwatt: the command (default: find_kwatt()). Stopped by stop() or on leaving a
    `with` block."""

    def __init__(self, jobs: Union[str, os.PathLike[str], None] = None,
                 *options: Union[str, int, float],
                 kwatt: Union[str, os.PathLike[str], None] = None) -> None:
        command: list[Union[str, os.PathLike[str]]] = [kwatt or find_kwatt(), "serve",
                                                         "--simulate", "--port", "0"]
        if jobs is not None:
            command += ["--jobs", os.fspath(jobs)]
        command += [str(o) for o in options]
        self.process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                        text=True)
        assert self.process.stdout is not None and self.process.stderr is not None  # PIPE
        self.url: str = self.process.stdout.readline().strip()  # its first line: the base URL
        if not self.url.startswith("http"):
            self.process.kill()
            error = self.process.stderr.read().strip()
            raise KwattError(f"kwatt serve did not start: {error or self.url!r}")

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        for stream in (self.process.stdout, self.process.stderr):
            if stream:
                stream.close()

    def __enter__(self) -> SimulatedKwollect:
        return self

    def __exit__(self, *exc: object) -> Literal[False]:
        self.stop()
        return False

    def __repr__(self) -> str:
        return f"<kwatt serve --simulate at {self.url}>"
