"""kwatt.report(): `kwatt report` from Python (doc/report.md).

The report is made by the `kwatt` command installed with this package (its C++ core computes
every figure, this package's matplotlib draws them): this runs it, with the arguments named as
Python users name them, and raises kwatt's exceptions with its message.
"""

from __future__ import annotations

import os
import subprocess
import sys
from typing import Any, Iterable, Mapping, Optional, Union

from ._convert import Path, Paths, path_list
from .errors import InvalidArgumentError, KwattError
from .simulator import find_kwatt


# Phases of report(): {name: (start, end)} or [(name, start, end)], seconds after each run's start.
ReportPhases = Union[Mapping[str, tuple[float, float]], Iterable[tuple[str, float, float]]]


def _phase_arguments(phases: ReportPhases) -> list[str]:
    """--phase NAME=+A..+B from {name: (start_s, end_s)} or [(name, start_s, end_s)], seconds
    after each run's start."""
    # Each item's shape is checked here (a wrong one is InvalidArgumentError), whatever was given.
    items: Iterable[Any] = phases.items() if hasattr(phases, "items") else phases
    out = []
    for item in items:
        try:
            name, (a, b) = item if hasattr(phases, "items") else (item[0], item[1:])
            a, b = float(a), float(b)
        except (TypeError, ValueError):
            raise InvalidArgumentError(f"phases: {item!r} is not a name with (start, end) "
                                       "seconds after each run's start") from None
        out += ["--phase", f"{name}=+{a:g}..+{b:g}"]
    return out


def report(runs: Paths, output: Path, versus: Paths = None, phases: Optional[ReportPhases] = None,
           roles: Optional[Mapping[str, Iterable[str]]] = None, api: Optional[str] = None,
           title: Optional[str] = None, accuracies: Optional[Mapping[str, str]] = None,
           clock_offset: Optional[float] = None, confidence: Optional[float] = None,
           carbon_intensity: Union[float, Path, None] = None, carbon_source: Optional[str] = None,
           pue: Optional[float] = None, pue_source: Optional[str] = None, quiet: bool = True,
           with_archives: Paths = None) -> str:
    """Writes `kwatt report`'s directory `output` (doc/report.md) and returns its path.

    runs: the runs of set A, each an archive directory (kwatt backup, Kwollect.backup()) or a job
    "SITE:ID"; versus: set B's, compared with A. phases: {name: (start, end)} in seconds after each
    run's start. roles: {name: [node, ...]}. accuracies: {metric: "P%+WW"}. carbon_intensity:
    grams of CO2e per kWh, or the path of RTE's eCO2mix export (or CSV time,grams_per_kwh), with
    carbon_source naming it; pue with pue_source. with_archives: `kwatt meter -o archive:`
    recordings on the runs' nodes, each read with the runs it meets (its RAPL and GPU domains
    checked against the wall: `--with-archive`). A run that could not be read whole, or figures
    that could not be drawn, raise KwattError after the report is written; bad arguments raise
    InvalidArgumentError."""
    runs = path_list(runs)
    if not runs:
        raise InvalidArgumentError("report: give at least one run")
    argv = [find_kwatt(), "report", *runs, "-o", os.fspath(output)]
    for run in path_list(versus):
        argv += ["--versus", run]
    if phases:
        argv += _phase_arguments(phases)
    for name, nodes in (roles or {}).items():
        argv += ["--role", f"{name}={','.join(nodes)}"]
    for metric, accuracy in (accuracies or {}).items():
        argv += ["--accuracy", f"{metric}={accuracy}"]
    for recording in path_list(with_archives):
        argv += ["--with-archive", recording]
    for flag, value in (("--api", api), ("--title", title), ("--clock-offset", clock_offset),
                        ("--confidence", confidence), ("--carbon-intensity", carbon_intensity),
                        ("--carbon-source", carbon_source), ("--pue", pue),
                        ("--pue-source", pue_source)):
        if value is not None:
            argv += [flag, os.fspath(value) if isinstance(value, os.PathLike) else str(value)]
    if quiet:
        argv.append("-q")
    # The figures are drawn by this interpreter's package.
    env = dict(os.environ, KWATT_PYTHON=os.environ.get("KWATT_PYTHON", sys.executable))
    result = subprocess.run(argv, capture_output=True, text=True, env=env)
    message = result.stderr.strip().replace("kwatt report: ", "")
    if result.returncode == 2:
        raise InvalidArgumentError(message)
    if result.returncode != 0:
        raise KwattError(message or f"kwatt report exited with status {result.returncode}")
    return os.fspath(output)
