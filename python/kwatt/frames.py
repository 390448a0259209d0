"""pandas views of kwatt's results: the columnar tables, kwatt.load(DIR), energy and stats reports."""
from __future__ import annotations

import json
import numbers
import os
from typing import TYPE_CHECKING, Any, Iterable, Mapping, Optional, TypedDict, Union

import numpy as np
import numpy.typing as npt
import pandas as pd

from . import _core
from ._convert import Hosts, Instant, Path, fqdn, host_list, to_ns
from .documents import EnergyReport, StatsReport
from .errors import IncompleteError, InvalidArgumentError

if TYPE_CHECKING:
    from .service import Kwollect

# A run compared by runs_summary() and compare_runs(): its energy frame, or a Kwollect instance
# (its energy()).
Run = Union[pd.DataFrame, "Kwollect"]

COLUMNS = ["timestamp", "site", "node", "device_id", "metric_id", "value", "labels"]
ENERGY_COLUMNS = ["scope", "name", "phase", "metric", "joules", "wh", "mean_watts", "peak_watts",
                  "seconds", "coverage", "gaps", "gap_joules", "counter_joules",
                  "baseline_joules", "half_width_joules", "low_joules", "high_joules",
                  "accuracy_joules", "resolution_joules", "sampling_joules",
                  "gaps_and_edges_joules", "clock_joules", "reason"]
STATS_COLUMNS = ["interval", "node", "metric", "count", "mean", "min", "max", "last", "counter",
                 "increase", "rate_per_s", "resets", "cpu_busy", "cpu_source"]


def _categorical(codes: npt.NDArray[np.int32], categories: list[str]) -> pd.Categorical:
    return pd.Categorical.from_codes(codes, categories=pd.Index(categories, dtype=object))


def table_frame(table: _core.Table) -> pd.DataFrame:
    """The DataFrame of a _core.Table: timestamp (UTC-aware datetime64[ns]), site, node,
    device_id, metric_id (categoricals), value (float64; NaN for null and "NaN"), labels (the
    labels object's compact JSON text, as a categorical: `json.loads` it for a dict)."""
    timestamp = pd.DatetimeIndex(table.time.view("datetime64[ns]")).tz_localize("UTC")
    frame = pd.DataFrame({
        "timestamp": timestamp,
        "site": _categorical(table.site_codes, table.sites),
        "node": _categorical(table.node_codes, table.nodes),
        "device_id": _categorical(table.device_codes, table.devices),
        "metric_id": _categorical(table.metric_codes, table.metrics),
        "value": np.asarray(table.value, dtype=np.float64),
        "labels": _categorical(table.labels_codes, table.label_texts),
    })
    return frame


class LoadOptions(TypedDict, total=False):
    """load()'s options after the directory (Kwollect.load's keyword arguments)."""
    nodes: Optional[Hosts]
    metrics: Optional[Iterable[str]]
    start: Optional[Instant]
    end: Optional[Instant]
    allow_incomplete: bool
    threads: Optional[int]


def _thread_count(threads: Optional[int]) -> int:
    """`threads` as the C++ core takes it (0: automatic), or InvalidArgumentError."""
    if threads is None:
        return 0
    if isinstance(threads, bool) or not isinstance(threads, numbers.Integral):
        raise InvalidArgumentError(f"threads: {threads!r} is not a whole number (give 0 for as "
                                   "many as the machine has, or a number of threads)")
    if threads < 0:
        raise InvalidArgumentError(f"threads: {threads} is negative (give 0 for as many as the "
                                   "machine has, or a number of threads)")
    if threads >= 2**31:
        raise InvalidArgumentError(f"threads: {threads} is more than a process can run")
    return int(threads)


def load(directory: Path, nodes: Optional[Hosts] = None,
         metrics: Union[str, Iterable[str], None] = None,
         start: Optional[Instant] = None, end: Optional[Instant] = None,
         allow_incomplete: bool = False, threads: Optional[int] = 0) -> pd.DataFrame:
    """Loads an archive written by `kwatt backup` (or Kwollect.backup) as a DataFrame.

    nodes: names or EnOSlib Hosts whose rows to read (default: all); metrics: a metric id or ids;
    start, end: instants bounding the rows (inclusive). An incomplete archive raises
    IncompleteError (its ``partial`` holds the committed rows) unless allow_incomplete.
    Every byte read is checked: a damaged archive raises CorruptionError naming the file.
    threads: threads reading and decompressing (an int; 0 or None: as many as the machine
    has); anything else raises InvalidArgumentError.
    """
    directory = os.fspath(directory)
    names = [fqdn(h) for h in host_list(nodes)]
    metric_ids = [metrics] if isinstance(metrics, str) else list(metrics or [])
    table = _core.load(directory, nodes=names, metrics=metric_ids,
                       start=to_ns(start, "start"), end=to_ns(end, "end"), allow_incomplete=True,
                       threads=_thread_count(threads))
    frame = table_frame(table)
    frame.attrs["kwatt"] = {"archive": directory, "complete": table.complete,
                            "window": (table.report["start"], table.report["end"])}
    if not table.complete and not allow_incomplete:
        raise IncompleteError(
            f"{directory} is an incomplete archive (a backup that stopped before its end): run "
            "the same backup again to complete it, or pass allow_incomplete=True to read what it "
            "holds", partial=frame)
    return frame


def manifest(directory: Path) -> dict[str, Any]:
    """What an archive's manifest says: the object of its manifest.json, with its keys
    (doc/archive_format.md: format, format_version, kwatt_version, state, created_at,
    completed_at, query, window, sites, job_types, job, nodes, catalogue, files, fetch, as the
    file has them), checked first as every reader checks it (a damaged or foreign manifest raises
    CorruptionError).

    Four keys that are not in the file add it up: ``complete`` (state is "complete"), ``rows``
    and ``bytes`` (over every data file) and ``metric_rows`` ({metric id: rows}). For an
    incomplete archive they count what its journal records as committed (manifest.json, written
    when the backup started, does not)."""
    directory = os.fspath(directory)
    summary = _core.read_manifest(directory)
    with open(os.path.join(directory, "manifest.json"), encoding="utf-8") as file:
        out: dict[str, Any] = json.load(file)
    out.update(complete=summary["complete"], rows=summary["rows"], bytes=summary["bytes"],
               metric_rows=summary["metric_rows"])
    return out


def energy_frame(report: EnergyReport) -> pd.DataFrame:
    """The long DataFrame of an energy report (the JSON of `kwatt energy --json`, as a dict;
    see Kwollect.energy)."""
    rows: list[dict[str, Any]] = []

    def add(scope: str, name: str, phase: str, metric: Optional[str],
            figures: Optional[Mapping[str, Any]], reason: str = "") -> None:
        row: dict[str, Any] = {"scope": scope, "name": name, "phase": phase, "metric": metric,
                               "reason": reason}
        if figures is not None:
            row.update({k: figures[k] for k in ENERGY_COLUMNS if k in figures})
            interval = figures.get("interval")
            if interval:
                row.update({k: interval[k] for k in ("half_width_joules", "low_joules",
                                                     "high_joules")})
                row.update({f"{term}_joules": value
                            for term, value in interval["terms_joules"].items()})
        rows.append(row)

    def add_all(scope: str, name: str, metric: Optional[str], window: Optional[Mapping[str, Any]],
                phases: Mapping[str, Optional[Mapping[str, Any]]], reason: str = "") -> None:
        add(scope, name, "window", metric, window, reason)
        for phase, figures in phases.items():
            add(scope, name, phase, metric, figures, reason)

    for n in report["nodes"]:
        add_all("node", n["node"], n["metric"], n["window"], n["phases"], n["reason"])
    for role, figures in report["roles"].items():
        add_all("role", role, None, figures, report["role_phases"][role])
    add_all("total", "total", None, report["total"], report["phase_totals"])
    frame = pd.DataFrame(rows, columns=ENERGY_COLUMNS)
    for column in ENERGY_COLUMNS[4:-1]:
        frame[column] = pd.to_numeric(frame[column], errors="coerce").astype("float64")
    frame["gaps"] = frame["gaps"].astype("Int64")
    frame.attrs["kwatt"] = {"start": report["start"], "end": report["end"],
                            "notes": report.get("notes", []),
                            "nodes_without_power": report.get("nodes_without_power", []),
                            "failures": report["fetch"]["failures"]}
    return frame


SOURCE_CHECK_COLUMNS = ["node", "interval", "metric", "reference", "verdict", "joules",
                        "reference_joules", "difference_joules", "relative", "allowed_joules",
                        "rest_watts", "why"]


def source_checks_frame(report: EnergyReport) -> pd.DataFrame:
    """The DataFrame of an energy report's source checks (its "source_checks"; see
    Kwollect.source_checks): one row per node, interval and source compared."""
    rows = []
    for check in report.get("source_checks", []):
        energy = {s["metric"]: s["joules"] for s in check["sources"]}
        for c in check["comparisons"]:
            rows.append({"node": check["node"], "interval": check["interval"],
                         "metric": c["metric"], "reference": c["reference"],
                         "verdict": c["verdict"], "joules": energy.get(c["metric"]),
                         "reference_joules": energy.get(c["reference"]),
                         "difference_joules": c["joules"], "relative": c["relative"],
                         "allowed_joules": c["allowed_joules"], "rest_watts": c["rest_watts"],
                         "why": c["why"]})
    frame = pd.DataFrame(rows, columns=SOURCE_CHECK_COLUMNS)
    for column in SOURCE_CHECK_COLUMNS[5:-1]:
        frame[column] = pd.to_numeric(frame[column], errors="coerce").astype("float64")
    frame.attrs["kwatt"] = {"start": report["start"], "end": report["end"],
                            "failures": report["fetch"]["failures"]}
    return frame


RUNS_SUMMARY_COLUMNS = ["scope", "name", "phase", "runs", "mean_joules", "sd_joules",
                        "low_joules", "high_joules", "mean_seconds", "mean_half_width_joules"]
RUNS_COMPARISON_COLUMNS = ["scope", "name", "phase", "runs_a", "runs_b", "mean_a_joules",
                           "mean_b_joules", "difference_joules", "relative", "low_joules",
                           "high_joules", "t", "dof", "p_value", "significant", "why"]


def _run_rows(run: Run, what: str) -> list[_core.FigureRow]:
    """A run's figures as _core's rows: (scope, name, phase, joules, half-width, seconds), from an
    energy frame (Kwollect.energy(), kwatt.energy_frame) or a Kwollect instance (its energy())."""
    if hasattr(run, "energy") and callable(run.energy):
        run = run.energy()
    if not isinstance(run, pd.DataFrame) or not {"joules", "half_width_joules"} <= set(run.columns):
        raise InvalidArgumentError(f"{what}: a run is an energy frame (Kwollect.energy()) or a "
                                   f"Kwollect instance, not {type(run).__name__}")
    columns = [run[c] for c in ("scope", "name", "phase")]
    values = [pd.to_numeric(run[c], errors="coerce").astype("float64")
               for c in ("joules", "half_width_joules", "seconds")]
    return list(zip(*(c.astype(str) for c in columns), *values))


def _runs(runs: Iterable[Run], what: str) -> list[list[_core.FigureRow]]:
    runs = list(runs)
    if not runs:
        raise InvalidArgumentError(f"{what}: no run given")
    return [_run_rows(run, what) for run in runs]


def _confidence(confidence: float) -> float:
    if isinstance(confidence, bool) or not isinstance(confidence, numbers.Real):
        raise InvalidArgumentError(f"confidence should be a number from 0.5 to 0.999, not "
                                   f"{confidence!r}")
    return float(confidence)


def runs_summary(runs: Iterable[Run], confidence: float = 0.95) -> pd.DataFrame:
    """Runs of one experiment summarized (doc/energy.md, "Runs compared"): `runs` are their
    energy frames (each run's Kwollect.energy(), with its own marks) or Kwollect instances. One
    row per figure (scope, name, phase) found in any run: runs (how many have it), mean_joules,
    sd_joules, low_joules and high_joules (the mean's interval at `confidence`, Student's t),
    mean_seconds, mean_half_width_joules (the runs' own 95 % intervals, on average)."""
    columns = _core.runs_summary(_runs(runs, "runs_summary"), confidence=_confidence(confidence))
    frame = pd.DataFrame(columns, columns=RUNS_SUMMARY_COLUMNS)
    frame["runs"] = frame["runs"].astype("int64")
    return frame


def compare_runs(a: Iterable[Run], b: Iterable[Run], confidence: float = 0.95) -> pd.DataFrame:
    """Set B of runs against set A (doc/energy.md, "Runs compared"), each a list of energy frames
    or Kwollect instances: one row per figure both sets have, with runs_a, runs_b, mean_a_joules,
    mean_b_joules, difference_joules (B - A), relative, low_joules and high_joules (its interval at
    `confidence`), t, dof and p_value (Welch's t test), significant (the interval excludes 0) and
    why."""
    columns = _core.compare_runs(_runs(a, "compare_runs (a)"), _runs(b, "compare_runs (b)"),
                                 confidence=_confidence(confidence))
    frame = pd.DataFrame(columns, columns=RUNS_COMPARISON_COLUMNS)
    for column in ("runs_a", "runs_b"):
        frame[column] = frame[column].astype("int64")
    frame["significant"] = frame["significant"].astype(bool)
    return frame


def stats_frame(report: StatsReport) -> pd.DataFrame:
    """The long DataFrame of a stats report (see Kwollect.stats)."""
    rows: list[dict[str, object]] = []
    for interval in report["intervals"]:
        for n in interval["nodes"]:
            for metric, s in n["metrics"].items():
                rows.append({"interval": interval["name"], "node": n["node"], "metric": metric,
                             "cpu_busy": n["cpu_busy"], "cpu_source": n["cpu_source"], **s})
    frame = pd.DataFrame(rows, columns=STATS_COLUMNS)
    for column in ("mean", "min", "max", "last", "increase", "rate_per_s", "cpu_busy"):
        frame[column] = pd.to_numeric(frame[column], errors="coerce").astype("float64")
    frame["count"] = frame["count"].astype("int64")
    frame["resets"] = frame["resets"].astype("int64")
    frame["counter"] = frame["counter"].astype(bool)
    frame.attrs["kwatt"] = {"failures": report["fetch"]["failures"]}
    return frame
