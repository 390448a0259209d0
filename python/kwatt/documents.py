"""The types of the documents kwatt's C++ core gives Python: the energy report (the document
`kwatt energy --json` prints, rendered once, in C++, and built as these dicts with no text in
between), what a fetch, a backup, a node lookup and stats did, a node's metrics, and the meter's
header and results. Type checkers see every key and its type (doc/energy.md, "JSON output", says
what they mean); at run time they are plain dicts, checked against these types by the tests
(python/tests/typed.py)."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal, Optional, TypedDict, Union

if TYPE_CHECKING:  # _core's stub imports this module
    from ._core import Catalogue


class ApiRow(TypedDict):
    """A row as the Kwollect API serves it, as json.loads would give it (doc/kwollect_api.md):
    value an int, a float, None or the text "NaN"/"Infinity"/"-Infinity"."""
    timestamp: str
    device_id: str
    metric_id: str
    value: Union[int, float, str, None]
    labels: dict[str, Any]


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


class BackupOutcome(TypedDict):
    """What _core.backup() did: the archive's directory; whether it was complete before, resumed,
    or is complete now (else error says why); what it wrote and its fetch."""
    dir: str
    already_complete: bool
    resuming: bool
    rows_written: int
    bytes_written: int
    fetch: FetchReport
    complete: bool
    error: Optional[str]


class MetricStats(TypedDict):
    """One metric's statistics over an interval (Kwollect.stats(), doc/python.md): mean, min,
    max, last are None without a value; increase, rate_per_s for a counter only."""
    count: int
    mean: Optional[float]
    min: Optional[float]
    max: Optional[float]
    last: Optional[float]
    counter: bool
    increase: Optional[float]
    rate_per_s: Optional[float]
    resets: int


class NodeStats(TypedDict):
    """A node's statistics over an interval: its CPU usage (0..1; None without a source) and
    each metric's."""
    node: str
    cpu_busy: Optional[float]
    cpu_source: str
    metrics: dict[str, MetricStats]


class StatsInterval(TypedDict):
    """The window or a phase (name, start and end in ns), with its nodes' statistics."""
    name: str
    start: int
    end: int
    nodes: list[NodeStats]


class StatsReport(TypedDict):
    """_core.stats(): per interval (the window, then each phase), the nodes' statistics, and the
    fetch."""
    fetch: FetchReport
    intervals: list[StatsInterval]


class NodeFound(TypedDict):
    """A node the reference API knows: the name as given, its FQDN, uid, site, cluster and its
    cluster's catalogue."""
    name: str
    node: str
    uid: str
    site: str
    cluster: str
    catalogue: Catalogue


class NodesLookedUp(TypedDict):
    """_core.look_up_nodes(): the nodes found; the names that are wrong (name, why); those of a
    site whose API could not be read (name, why), unchecked."""
    nodes: list[NodeFound]
    problems: list[tuple[str, str]]
    unavailable: list[tuple[str, str]]


class MetricDescription(TypedDict):
    """A metric a node can report (Kwollect.available_metrics()): its id, description, period
    (ms; 0: on demand only), optional_period (ms, with a `monitor` job type), protocol, labels,
    group (the catalogue entry of an expanded id), on_demand and the period in a job of the
    given types."""
    name: str
    description: str
    period: int
    optional_period: int
    protocol: str
    labels: dict[str, str]
    group: Optional[str]
    on_demand: bool
    period_in_job: int


class MeterDomain(TypedDict):
    """A domain the meter measures: its source (rapl, nvml, kwollect), name, kind, socket and
    origin (the file or device read)."""
    source: str
    domain: str
    kind: str
    socket: int
    origin: str


class MeterHeader(TypedDict):
    """What a meter measures (_core.Meter.header()): its sensor, domains, notes, warnings, and the
    URL of its /metrics (None without)."""
    sensor: str
    domains: list[MeterDomain]
    notes: list[str]
    warnings: list[str]
    url: Optional[str]


class MeterTarget(TypedDict):
    """A target's totals: key, kind, name, pid, CPU time (us) and energy per domain (uJ)."""
    key: str
    kind: str
    name: str
    pid: int
    cpu_us: int
    uj: list[int]


class MeterTotals(TypedDict):
    """A run's totals per domain (uJ; flags as words), its targets', and the CPU time (us)."""
    start: int
    end: int
    measured_uj: list[int]
    idle_uj: list[int]
    unattributed_uj: list[int]
    flags: list[str]
    targets: list[MeterTarget]
    busy_us: int
    capacity_us: int


class MeterHealth(TypedDict):
    """How the meter kept time and its reports: ticks, late and missed ones, merged samples, the
    largest lag, reports written, counter wraps and resets, reports an output dropped."""
    ticks: int
    late_ticks: int
    missed_ticks: int
    merged_samples: int
    max_lag_seconds: float
    reports: int
    wraps: int
    resets: int
    dropped_reports: list[tuple[str, int]]  # (output, reports it dropped)


class MeterResult(MeterHeader):
    """_core.Meter.stop(): the header, the samples (one per interval and domain, as columns: numpy
    arrays, flags a list of words), the totals, the health, and the error that stopped it (None)."""
    samples: dict[str, Any]
    totals: MeterTotals
    health: MeterHealth
    error: Optional[str]
