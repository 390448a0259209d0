"""Plots with matplotlib: power over time per node, energy per node and phase.

Times are labelled in Europe/Paris time, as Kwollect writes them, on an axis of instants (UTC):
the hour that Paris lives twice in autumn is drawn once after the other, and the hour it skips in
spring takes no room.
"""

from __future__ import annotations

import datetime as _dt
import zoneinfo
from typing import TYPE_CHECKING, Iterable, Literal, Optional, Sequence

import numpy as np
import numpy.typing as npt

from . import _core
from .errors import InvalidArgumentError

if TYPE_CHECKING:
    import pandas as pd
    from matplotlib.axes import Axes
    from matplotlib.dates import DateLocator

# A window: (start, stop) in ns since the epoch, UTC; None for an open end.
Window = tuple[Optional[int], Optional[int]]
# Phases as drawn: (name, start ns, end ns).
PhaseSpans = Iterable[tuple[str, int, int]]

PARIS = "Europe/Paris"
# A line is broken where its series has a gap: an interval longer than this many times the
# series' median interval, as energy() counts gaps (doc/energy.md).
GAP_FACTOR = 3.0


def _axes(ax: Optional[Axes], size: tuple[float, float]) -> Axes:
    if ax is not None:
        return ax
    import matplotlib.pyplot as plt
    _, ax = plt.subplots(figsize=size)
    return ax


def _date_numbers(ns: npt.ArrayLike) -> npt.NDArray[np.float64]:
    """matplotlib's date numbers of instants (int ns since the epoch, UTC), in their order."""
    from matplotlib import dates
    numbers: npt.NDArray[np.float64] = dates.date2num(
        np.asarray(ns, dtype=np.int64).view("datetime64[ns]"))
    return numbers


def _date_number(ns: int) -> float:
    return float(_date_numbers([int(ns)])[0])


def _broken_at_gaps(times: npt.NDArray[np.int64], values: npt.NDArray[np.float64]
                    ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float64]]:
    """(times, values) of one series in time order, with a NaN value inserted in each gap
    (GAP_FACTOR), so that matplotlib does not draw a line across it."""
    if len(times) < 3:
        return times, values
    steps = np.diff(times)
    median = np.median(steps)
    if median <= 0:
        return times, values
    gaps = np.flatnonzero(steps > GAP_FACTOR * median)
    if len(gaps) == 0:
        return times, values
    return (np.insert(times, gaps + 1, times[gaps] + steps[gaps] // 2),
            np.insert(values, gaps + 1, np.nan))


def _paris_time_axis(ax: Axes) -> None:
    """Labels the x axis of date numbers in Europe/Paris time."""
    from matplotlib import dates
    paris = zoneinfo.ZoneInfo(PARIS)

    class ParisLocator(dates.AutoDateLocator):
        """Ticks on Paris's calendar, except for a view of less than 3 days across a change of
        its UTC offset: there, on the UTC grid (Paris is whole hours from UTC, so a whole UTC
        minute or hour is a whole Paris one), where Paris's rules would skip or crowd ticks."""

        def get_locator(self, dmin: _dt.datetime, dmax: _dt.datetime) -> DateLocator:
            across = dmin.astimezone(paris).utcoffset() != dmax.astimezone(paris).utcoffset()
            short = abs(dmax - dmin) < _dt.timedelta(days=3)
            self.set_tzinfo(_dt.timezone.utc if across and short else paris)
            locator: DateLocator = super().get_locator(dmin, dmax)
            return locator

    ax.xaxis_date(paris)
    locator = ParisLocator(tz=paris)
    ax.xaxis.set_major_locator(locator)
    ax.xaxis.set_major_formatter(dates.ConciseDateFormatter(locator, tz=paris))


def _power_sources(power: pd.DataFrame, window: Optional[Window],
                   metric: Optional[str]) -> dict[str, Optional[str]]:
    """{node: metric} as energy() chooses them (kwatt._core.power_sources) for these rows."""
    if power.empty:
        return {}
    power = power.sort_values("timestamp", kind="stable")
    times = power["timestamp"].dt.tz_convert("UTC").dt.tz_localize(None).astype("int64")
    start, stop = window if window is not None else (None, None)
    start = int(times.min()) if start is None else int(start)
    stop = int(times.max()) + 1 if stop is None else int(stop)
    if stop <= start:
        stop = start + 1
    columns = dict(nodes=power["node"].astype(str).tolist(),
                   metrics=power["metric_id"].astype(str).tolist(),
                   labels=power["labels"].astype(str).tolist(), times=times.to_numpy(),
                   values=power["value"].astype("float64").to_numpy(), metric=metric or "")
    try:
        return _core.power_sources(**columns, start=start, end=stop)
    except InvalidArgumentError:  # a window outside these rows: choose over the rows' span
        return _core.power_sources(**columns, start=int(times.min()), end=int(times.max()) + 1)


def plot_power(data: pd.DataFrame, ax: Optional[Axes] = None, window: Optional[Window] = None,
               phases: Optional[PhaseSpans] = (), metric: Optional[str] = None) -> Axes:
    """Power over time, one line per node (per series when a node has several: two PDU
    outlets, several PSUs), from a DataFrame of to_pandas() or kwatt.load(). Each node's power
    metric is the one energy() chooses over the window (the C++ choice: the first of wattmeter,
    PDU, BMC covering 95 % of it, else the best covered), or `metric`. window: (start, stop)
    ns, drawn as vertical lines (default for the choice: the data's span); phases: [(name,
    start ns, end ns)], drawn as shaded spans. Returns the matplotlib Axes.

    The x axis holds instants (matplotlib date numbers from UTC), labelled in Europe/Paris
    time: in order across DST changes. A series' line is broken over its gaps (intervals longer
    than GAP_FACTOR times its median interval), never drawn across them."""
    ax = _axes(ax, (11, 4.5))
    preference = [metric] if metric else _core.power_metrics()
    power = data[data["metric_id"].isin(preference)]
    sources = _power_sources(power, window, metric)
    drawn = 0
    for node, rows in power.groupby("node", observed=True, sort=True):
        chosen = sources.get(str(node))
        if chosen is None:
            continue
        rows = rows[rows["metric_id"] == chosen]
        series = list(rows.groupby("labels", observed=True, sort=False))
        for labels, one in series:
            one = one.sort_values("timestamp", kind="stable")
            times = one["timestamp"].dt.tz_convert("UTC").dt.tz_localize(None).to_numpy(
                dtype="datetime64[ns]").view(np.int64)
            times, values = _broken_at_gaps(times, one["value"].to_numpy(dtype=np.float64))
            name = str(node).split(".")[0]
            label = f"{name} ({chosen})" if len(series) == 1 else f"{name} {labels} ({chosen})"
            ax.plot(_date_numbers(times), values, label=label, linewidth=0.8)
            drawn += 1
    if window is not None:
        for ns, text in zip(window, ("start", "stop")):
            if ns is not None:
                ax.axvline(_date_number(ns), color="black", linestyle="--", linewidth=1)
                ax.annotate(text, (_date_number(ns), 0.02), xycoords=("data", "axes fraction"),
                            rotation=90, va="bottom", ha="right", fontsize=8)
    colours = ["tab:orange", "tab:green", "tab:purple", "tab:brown", "tab:pink", "tab:olive"]
    for i, (name, start, end) in enumerate(phases or ()):
        ax.axvspan(_date_number(start), _date_number(end), color=colours[i % len(colours)],
                   alpha=0.12)
        ax.annotate(name, (_date_number(start), 0.98), xycoords=("data", "axes fraction"),
                    va="top", fontsize=8)
    _paris_time_axis(ax)
    ax.set_xlabel("time (Europe/Paris)")
    ax.set_ylabel("power (W)")
    ax.set_title("Power per node")
    if drawn:
        # Room above the curves for the phase names; the legend beside the plot, not on it.
        low, high = ax.get_ylim()
        ax.set_ylim(low, high + 0.12 * (high - low))
        ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1), borderaxespad=0)
        from matplotlib.figure import Figure
        # An Axes of a subfigure (Figure.subfigures) has a SubFigure, which has no tight_layout:
        # its layout is the whole figure's, left to whoever made it.
        if isinstance(ax.figure, Figure):
            ax.figure.tight_layout()
    ax.grid(alpha=0.3)
    return ax


def plot_energy(energy: pd.DataFrame, ax: Optional[Axes] = None,
                unit: Literal["J", "kJ", "Wh"] = "kJ") -> Axes:
    """Energy per node, one bar per phase (the whole window first), from Kwollect.energy()'s
    DataFrame. unit: "J", "kJ" or "Wh". Returns the matplotlib Axes."""
    scale = {"J": 1.0, "kJ": 1e-3, "Wh": 1 / 3600}[unit]
    ax = _axes(ax, (9, 4))
    nodes = energy[(energy["scope"] == "node") & energy["joules"].notna()]
    table = nodes.pivot_table(index="name", columns="phase", values="joules", sort=False) * scale
    order = ["window"] + [p for p in table.columns if p != "window"]
    table = table[[p for p in order if p in table.columns]]
    table.index = [str(n).split(".")[0] for n in table.index]
    table.plot.bar(ax=ax, rot=0)
    ax.set_xlabel("node")
    ax.set_ylabel(f"energy ({unit})")
    ax.set_title("Energy per node and phase")
    ax.grid(axis="y", alpha=0.3)
    return ax
