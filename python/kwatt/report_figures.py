"""The figures of `kwatt report` (doc/report.md), drawn from the report's report.json.

`kwatt report` computes every figure in its C++ core and writes them into report.json; this only
draws them (matplotlib, the Python package's `plot` extra), each as PNG (for slides), PDF (for a
paper) and SVG (inlined in report.html):
- power.*: each run's power over its window, summed over its nodes, one line a run (set A blue,
  set B orange), the phases of the first run shaded;
- energy.*: each run's total energy per phase with its 95 % interval as an error bar;
- runs.*: with two sets, each phase's mean of A and of B with the mean's interval, and the runs.
"""

from __future__ import annotations

import json
import os
from typing import TYPE_CHECKING, Any, Iterator, Mapping, Optional

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

# report.json as a dict (doc/report.md).
ReportJson = Mapping[str, Any]


COLORS = {"a": "#1f77b4", "b": "#ff7f0e"}


def _save(fig: Figure, directory: str, name: str) -> None:
    for ext in ("png", "pdf", "svg"):
        kwargs: dict[str, Any] = {"dpi": 150} if ext == "png" else {}
        # A fixed date and no random ids: the same report gives the same files.
        metadata = {"CreationDate": None} if ext == "pdf" else (
            {"Date": None} if ext == "svg" else {})
        fig.savefig(os.path.join(directory, f"{name}.{ext}"), bbox_inches="tight",
                    metadata=metadata, **kwargs)


def _subplots() -> tuple[Figure, Axes]:
    """A figure of the report's size, and its axes: a Figure of its own, never pyplot's (the
    report is drawn in the caller's process: its backend, open figures and settings are left as
    they were)."""
    from matplotlib.figure import Figure
    fig = Figure(figsize=(9, 3.6))
    return fig, fig.subplots()


def _text(name: object) -> str:
    """A run's or phase's name as matplotlib shows it: never read as math ($...$)."""
    return str(name).replace("$", r"\$")


def _runs(report: ReportJson) -> Iterator[tuple[str, dict[str, Any]]]:
    for set_name in ("a", "b"):
        for run in report["sets"][set_name]:
            yield set_name, run


def power_figure(report: ReportJson) -> Figure:
    fig, ax = _subplots()
    labelled = set()
    first = None
    for set_name, run in _runs(report):
        curves = run["power"]
        if not curves:
            continue
        first = first or run
        # The nodes' curves share their buckets: summed where all have a value.
        seconds: list[float] = []
        total: Optional[dict[float, float]] = None
        for curve in curves.values():
            points = dict(zip(curve["seconds"], curve["watts"]))
            if total is None:
                seconds, total = list(points), points
            else:
                total = {t: w + points[t] for t, w in total.items() if t in points}
                seconds = [t for t in seconds if t in total]
        assert total is not None  # curves is not empty
        label = f"set {set_name.upper()}" if set_name not in labelled and report["sets"]["b"] \
            else (None if set_name in labelled else _text(run["run"]))
        labelled.add(set_name)
        ax.plot([t / 60 for t in seconds], [total[t] for t in seconds], lw=1,
                color=COLORS[set_name] if report["sets"]["b"] else None, alpha=0.8, label=label)
    if first is not None:
        shown = set()
        for p in first["phase_seconds"]:
            ax.axvspan(p["start_s"] / 60, p["end_s"] / 60, color="0.85", zorder=0)
            if p["name"] not in shown:
                shown.add(p["name"])
                ax.text(p["start_s"] / 60, 1.0, f" {_text(p['name'])}",
                        transform=ax.get_xaxis_transform(), va="top", fontsize=8, color="0.3")
    ax.set_xlabel("minutes since the run's start")
    ax.set_ylabel("power (W), all nodes")
    ax.grid(alpha=0.3)
    if labelled:
        ax.legend(fontsize=8, loc="lower right")
    return fig


def energy_figure(report: ReportJson) -> Figure:
    runs = list(_runs(report))
    phases = ["window"] + list(runs[0][1]["energy"]["phases"]) if runs else ["window"]
    fig, ax = _subplots()
    width = 0.8 / max(len(runs), 1)
    for i, (set_name, run) in enumerate(runs):
        energy = run["energy"]
        values, errors = [], []
        for phase in phases:
            f = energy["total"] if phase == "window" else energy["phase_totals"].get(phase)
            ok = f is not None and f["joules"] is not None
            values.append(f["joules"] / 1e3 if ok else 0)
            errors.append(f["interval"]["half_width_joules"] / 1e3 if ok and f["interval"] else 0)
        x = [k + (i - (len(runs) - 1) / 2) * width for k in range(len(phases))]
        ax.bar(x, values, width * 0.9, yerr=errors, capsize=2,
               color=COLORS[set_name] if report["sets"]["b"] else None, alpha=0.85,
               label=_text(run["run"]))
    ax.set_xticks(range(len(phases)))
    ax.set_xticklabels([_text(p) for p in phases])
    ax.set_ylabel("energy (kJ), 95 % interval")
    ax.grid(axis="y", alpha=0.3)
    if len(runs) <= 12:
        # Above the axes, never over the bars (it hid the window's bars of a few runs).
        ax.legend(fontsize=7, ncol=min(len(runs), 6), loc="lower left", bbox_to_anchor=(0, 1.02),
                  frameon=False)
    return fig


def runs_figure(report: ReportJson) -> Figure:
    summaries = {s: [x for x in report["summary"][s] if x["scope"] == "total"]
                 for s in ("a", "b")}
    phases = [x["phase"] for x in summaries["a"]]
    fig, ax = _subplots()
    for offset, set_name in ((-0.15, "a"), (0.15, "b")):
        for k, phase in enumerate(phases):
            s = next((x for x in summaries[set_name] if x["phase"] == phase), None)
            if s is None:
                continue
            low = s["low_joules"] if s["low_joules"] is not None else s["mean_joules"]
            high = s["high_joules"] if s["high_joules"] is not None else s["mean_joules"]
            ax.errorbar(k + offset, s["mean_joules"] / 1e3,
                        yerr=[[(s["mean_joules"] - low) / 1e3], [(high - s["mean_joules"]) / 1e3]],
                        fmt="o", color=COLORS[set_name], capsize=4,
                        label=f"set {set_name.upper()} (mean, {100 * report['confidence']:g} %)"
                        if k == 0 else None)
        for _, run in ((s, r) for s, r in _runs(report) if s == set_name):
            for k, phase in enumerate(phases):
                f = run["energy"]["total"] if phase == "window" else \
                    run["energy"]["phase_totals"].get(phase)
                if f and f["joules"] is not None:
                    ax.plot(k + offset * 1.6, f["joules"] / 1e3, ".", color=COLORS[set_name],
                            alpha=0.5)
    ax.set_xticks(range(len(phases)))
    ax.set_xticklabels([_text(p) for p in phases])
    ax.set_ylabel("energy per run (kJ)")
    ax.grid(axis="y", alpha=0.3)
    ax.legend(fontsize=8)
    return fig


def draw(directory: str) -> None:
    """Draws the figures of the report in `directory` into its figures/ folder."""
    with open(os.path.join(directory, "report.json"), encoding="utf-8") as file:
        report = json.load(file)
    import matplotlib
    out = os.path.join(directory, "figures")
    os.makedirs(out, exist_ok=True)
    figures = [("power", power_figure), ("energy", energy_figure)]
    if report["sets"]["b"]:
        figures.append(("runs", runs_figure))
    # Settings for these figures only (no random SVG ids: the same report gives the same files).
    with matplotlib.rc_context({"svg.hashsalt": "kwatt"}):
        for name, make in figures:
            _save(make(report), out, name)
