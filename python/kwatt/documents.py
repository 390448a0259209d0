"""The types of the documents kwatt's C++ core gives Python: the energy report (the JSON that
`kwatt energy --json` prints, rendered once, in C++, and read as these dicts), and what a fetch
did. Type checkers see every key and its type (doc/energy.md, "JSON output", says what they
mean); at run time they are plain dicts."""
from __future__ import annotations

from typing import TYPE_CHECKING, Literal, Optional, TypedDict

if TYPE_CHECKING:  # _core's stub imports this module
    from ._core import Catalogue


class IntervalTerms(TypedDict):
    """The terms of a figure's 95 % interval, in joules (doc/energy.md, "How far to trust it");
    accuracy is None when a source has no stated accuracy."""
    accuracy: Optional[float]
    resolution: float
    sampling: float
    gaps_and_edges: float
    clock: float


class EnergyInterval(TypedDict):
    """A figure's 95 % interval: its energy is within [low_joules, high_joules]."""
    confidence: float
    half_width_joules: float
    low_joules: float
    high_joules: float
    half_width_without_accuracy_joules: float
    terms_joules: IntervalTerms


class Figures(TypedDict):
    """The energy of a node, role or total over the window or a phase; the energy, mean and peak
    are None without power data (never 0), as is the interval."""
    joules: Optional[float]
    wh: Optional[float]
    measured_joules: Optional[float]
    gap_joules: Optional[float]
    seconds: float
    mean_watts: Optional[float]
    peak_watts: Optional[float]
    coverage: float
    gaps: int
    counter_joules: Optional[float]
    baseline_joules: Optional[float]
    interval: Optional[EnergyInterval]


class NodeEnergy(TypedDict):
    """A node: its power source (metric, None when it has none, and why: reason), its window's
    figures (None without a source) and each phase's."""
    node: str
    metric: Optional[str]
    reason: str
    period_s: float
    series: int
    coarse: bool
    counter_metric: str
    window: Optional[Figures]
    phases: dict[str, Figures]
    baseline_watts: Optional[float]


class FetchFailure(TypedDict):
    """A piece of a query that could not be fetched: its site, nodes, window, metrics and the
    error."""
    site: str
    nodes: list[str]
    start: int
    end: int
    metrics: list[str]
    error: str


class _Fetch(TypedDict):
    complete: bool
    failures: list[FetchFailure]
    nodes: list[str]
    start: int
    end: int
    job_types: list[str]
    catalogues: dict[str, Catalogue]  # by cluster
    requests: int
    retries: int
    splits: int
    rows: int
    bytes: int
    seconds: float


class FetchReport(_Fetch, total=False):
    """What a fetch (or an archive's read) did: complete is False when a piece failed (failures
    say which); the resolved nodes and window; requests, retries, splits, rows, bytes, seconds;
    with_archives (energy() only): the other archives read with the rows."""
    with_archives: list[str]


class SourceEnergy(TypedDict):
    """One power source of a node over an interval (None without its power data)."""
    metric: str
    joules: Optional[float]
    coverage: Optional[float]
    mean_watts: Optional[float]


class SourceComparison(TypedDict):
    """A source compared with the node's chosen one (`reference`): the verdict, the difference
    (joules, relative), what the two stated accuracies allow, for a part of the node the mean
    power it does not see (rest_watts), and why."""
    metric: str
    reference: str
    verdict: Literal["agrees", "disagrees", "part_of_node", "part_above_wall", "not_comparable"]
    joules: Optional[float]
    relative: Optional[float]
    allowed_joules: Optional[float]
    rest_watts: Optional[float]
    why: str


class SourceCheck(TypedDict):
    """A node's power sources checked against each other over an interval (the window or a
    phase)."""
    node: str
    interval: str
    sources: list[SourceEnergy]
    comparisons: list[SourceComparison]


class EnergyReport(TypedDict):
    """Kwollect.energy_report(): the report `kwatt energy --json` prints, and `fetch`. Times are
    Paris-time text, as the CLI prints them."""
    start: str
    end: str
    requested_start: str
    requested_end: str
    notes: list[str]
    nodes_without_power: list[str]
    phases: list[str]
    clock_offset_s: float
    nodes: list[NodeEnergy]
    roles: dict[str, Figures]
    role_phases: dict[str, dict[str, Figures]]
    phase_totals: dict[str, Figures]
    total: Figures
    # Each node's sources checked against each other (Kwollect.source_checks(), doc/energy.md).
    source_checks: list[SourceCheck]
    fetch: FetchReport
