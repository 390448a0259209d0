"""kwatt.report(): the report a paper can use (doc/report.md), in this process.

The C++ core reads the runs, computes every figure and writes the directory (kwatt._core's
write_report, the same call `kwatt report` makes); this package's matplotlib draws the figures
when the core asks, in this interpreter. No process is started either way.
"""

from __future__ import annotations

import os
import sys
from typing import Any, Iterable, Mapping, Optional, Union

from . import _core
from ._convert import Path, Paths, _client, _progress_printer, path_list
from .errors import InvalidArgumentError, KwattError

# Phases of report(): {name: (start, end)} or [(name, start, end)], seconds after each run's start.
ReportPhases = Union[Mapping[str, tuple[float, float]], Iterable[tuple[str, float, float]]]


def _phase_texts(phases: ReportPhases) -> list[str]:
    """NAME=+A..+B (`kwatt report --phase`) from {name: (start_s, end_s)} or
    [(name, start_s, end_s)], seconds after each run's start."""
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
        out.append(f"{name}=+{a:g}..+{b:g}")
    return out


def _draw(directory: str) -> None:
    """The figures of the report being written in `directory` (the core calls this once its
    report.json is there): matplotlib's, from the plot extra."""
    try:
        import matplotlib  # noqa: F401
    except ImportError as e:
        raise KwattError(f"the figures are drawn by matplotlib, which is not installed ({e}): "
                         "pip install 'kwatt[plot]'") from None
    from .report_figures import draw
    draw(directory)


def request(runs: Paths, versus: Paths = None, phases: Optional[ReportPhases] = None,
            roles: Optional[Mapping[str, Iterable[str]]] = None, api: Optional[str] = None,
            title: Optional[str] = None, accuracies: Optional[Mapping[str, str]] = None,
            clock_offset: Optional[float] = None, confidence: Optional[float] = None,
            carbon_intensity: Union[float, Path, None] = None, carbon_source: Optional[str] = None,
            pue: Optional[float] = None, pue_source: Optional[str] = None,
            with_archives: Paths = None, metric: Optional[str] = None,
            gap_factor: Optional[float] = None) -> _core.ReportRequest:
    """The request report() makes of the core: a kwatt._core.ReportRequest, each field as `kwatt
    report`'s option (its command() is the command line that makes the report again)."""
    r = _core.ReportRequest()
    r.runs = path_list(runs)
    if not r.runs:
        raise InvalidArgumentError("report: give at least one run")
    r.versus = path_list(versus)
    r.phases = _phase_texts(phases) if phases else []
    r.roles = [f"{name}={','.join(nodes)}" for name, nodes in (roles or {}).items()]
    r.accuracies = [f"{metric_id}={accuracy}" for metric_id, accuracy in
                    (accuracies or {}).items()]
    r.with_archives = path_list(with_archives)
    if api is not None:
        r.api = api
    if title is not None:
        r.title = title
    if metric is not None:
        r.metric = metric
    try:
        for name, value in (("clock_offset", clock_offset), ("confidence", confidence),
                            ("pue", pue), ("gap_factor", gap_factor)):
            if value is not None:
                setattr(r, name, float(value))
    except (TypeError, ValueError) as e:
        raise InvalidArgumentError(f"report: {e}") from None
    if carbon_intensity is not None:
        r.carbon_intensity = (os.fspath(carbon_intensity)
                              if isinstance(carbon_intensity, os.PathLike)
                              else str(carbon_intensity))
    if carbon_source is not None:
        r.carbon_source = carbon_source
    if pue_source is not None:
        r.pue_source = pue_source
    return r


def report(runs: Paths, output: Path, versus: Paths = None, phases: Optional[ReportPhases] = None,
           roles: Optional[Mapping[str, Iterable[str]]] = None, api: Optional[str] = None,
           title: Optional[str] = None, accuracies: Optional[Mapping[str, str]] = None,
           clock_offset: Optional[float] = None, confidence: Optional[float] = None,
           carbon_intensity: Union[float, Path, None] = None, carbon_source: Optional[str] = None,
           pue: Optional[float] = None, pue_source: Optional[str] = None, quiet: bool = True,
           with_archives: Paths = None, metric: Optional[str] = None,
           gap_factor: Optional[float] = None, figures: bool = True) -> str:
    """Writes `kwatt report`'s directory `output` (doc/report.md) and returns its path.

    runs: the runs of set A, each an archive directory (kwatt backup, Kwollect.backup()) or a job
    "SITE:ID"; versus: set B's, compared with A. phases: {name: (start, end)} in seconds after each
    run's start. roles: {name: [node, ...]}. accuracies: {metric: "P%+WW"}. carbon_intensity:
    grams of CO2e per kWh, or the path of RTE's eCO2mix export (or CSV time,grams_per_kwh), with
    carbon_source naming it; pue with pue_source. with_archives: `kwatt meter -o archive:`
    recordings on the runs' nodes, each read with the runs it meets (its RAPL and GPU domains
    checked against the wall: `--with-archive`). figures: drawn by matplotlib in this process
    (the plot extra). A run that could not be read whole, or figures that could not be drawn,
    raise KwattError after the report is written; bad arguments raise InvalidArgumentError."""
    asked = request(runs, versus=versus, phases=phases, roles=roles, api=api, title=title,
                    accuracies=accuracies, clock_offset=clock_offset, confidence=confidence,
                    carbon_intensity=carbon_intensity, carbon_source=carbon_source, pue=pue,
                    pue_source=pue_source, with_archives=with_archives, metric=metric,
                    gap_factor=gap_factor)
    write(asked, output, client=_client(api, None, {}), quiet=quiet, figures=figures)
    return os.fspath(output)


def write(asked: _core.ReportRequest, output: Path, client: _core.Client, quiet: bool = True,
          figures: bool = True) -> _core.ReportWritten:
    """Writes the report `asked` into `output` (report() and `python -m kwatt report`): its figures
    drawn in this process. KwattError, after the report is written, when a run could not be read
    whole or the figures could not be drawn."""
    written = _core.write_report(asked, os.fspath(output), client=client,
                                 draw=_draw if figures else None,
                                 progress=None if quiet else _progress_printer("kwatt report"))
    pieces = [f"{run}: {f['site']} {','.join(f['nodes'])}: {f['error']}"
              for run, failures in written.failures for f in failures]
    if not quiet:
        for piece in pieces:
            print(f"kwatt report: NOT FETCHED: {piece}", file=sys.stderr)
    if not written.complete:
        what = (f"{len(pieces)} piece(s) could not be read ({'; '.join(pieces[:5])})" if pieces
                else "a node has no power data (see provenance.json's notes)")
        raise KwattError(f"{written.dir}: written, but {what}")
    if written.figures_error is not None:
        raise KwattError(f"{written.dir}: written without figures: {written.figures_error}")
    return written
