"""kwatt.measure: the energy a block of Python code used, per source and domain.

    with kwatt.measure() as m:
        train()
    m.energy      # DataFrame: per domain, measured, the block's share, idle, unattributed
    m.samples     # DataFrame: per interval and domain
    print(m.report())

    @kwatt.measure(period=0.1)
    def train(): ...
    train(); train.last.energy

The work is done by kwatt's C++ meter (kwatt._core.Meter, doc/meter/README.md): the sources (RAPL,
NVML GPUs, the node's wattmeter through Kwollect), the activity of this process and its children,
the cputime formula. This module only gathers the options and shapes the results.
"""
from __future__ import annotations

import functools
import os
from typing import (TYPE_CHECKING, Any, Callable, Literal, Mapping, Optional, Protocol, Sequence,
                    TypedDict, TypeVar, cast)

from . import _core
from ._convert import KwollectClientOptions
from .documents import MeterDomain, MeterHealth, MeterResult

if TYPE_CHECKING:
    import pandas as pd
    from typing_extensions import ParamSpec, Unpack

    _P = ParamSpec("_P")

_R = TypeVar("_R")


class KwollectSource(TypedDict, total=False):
    """measure(kwollect=...): the node whose wattmeter to read through Kwollect, its power metric
    (default: the best the node has) and the client's options."""
    node: str
    metric: str
    client: KwollectClientOptions


class MeterOptions(TypedDict, total=False):
    """The options of measure() besides targets and period: those of `kwatt meter`
    (doc/meter/running.md), each None for its default."""
    sources: Optional[Sequence[Literal["rapl", "nvml", "kwollect"]]]
    rapl_path: Optional[Literal["auto", "perf", "powercap"]]
    rapl_domains: Optional[Sequence[str]]
    kwollect: Optional[KwollectSource]
    pids: Optional[Sequence[int]]
    trees: Optional[bool]
    cgroups: Optional[Sequence[str]]
    commands: Optional[Sequence[str]]
    all_processes: Optional[bool]
    cgroup_depth: Optional[int]
    counters: Optional[bool]
    attribute: Optional[bool]
    read_period: Optional[float]
    formula: Optional[Literal["cputime", "smartwatts"]]
    idle_policy: Optional[Literal["none", "proportional", "equal"]]
    idle_power: Optional[Mapping[str, float]]
    outputs: Optional[Sequence[str]]
    listen_host: Optional[str]
    listen_port: Optional[int]
    state_file: Optional[str]
    sysfs_root: Optional[str]
    procfs_root: Optional[str]
    cgroup_root: Optional[str]
    nvml_library: Optional[str]
    hostname: Optional[str]
    output_node: Optional[str]
    site: Optional[str]
    max_targets: Optional[int]


class Measurement:
    """What one measured block used. Energies are in joules, from integer microjoules."""

    def __init__(self, result: MeterResult, what: str) -> None:
        self._result = result
        self.what = what
        self.sensor: str = result["sensor"]
        self.domains: list[MeterDomain] = result["domains"]
        self.notes: list[str] = result["notes"]
        self.warnings: list[str] = result["warnings"]
        self.health: MeterHealth = result["health"]
        self.error: Optional[str] = result["error"]
        totals = result["totals"]
        self.start_ns: int = totals["start"]
        self.end_ns: int = totals["end"]
        self.seconds: float = (self.end_ns - self.start_ns) / 1e9
        self._totals = totals
        selected = totals["targets"]
        self.cpu_seconds: float = sum(t["cpu_us"] for t in selected) / 1e6
        n = len(self.domains)
        self._block_uj = [sum(t["uj"][d] for t in selected) for d in range(n)]

    @property
    def joules(self) -> dict[str, float]:
        """The block's energy per domain name (its share of what each domain measured)."""
        return {d["domain"]: uj / 1e6 for d, uj in zip(self.domains, self._block_uj)}

    @property
    def measured_joules(self) -> dict[str, float]:
        """What each domain measured over the block, whoever used it."""
        return {d["domain"]: uj / 1e6
                for d, uj in zip(self.domains, self._totals["measured_uj"])}

    @property
    def energy(self) -> pd.DataFrame:
        """A DataFrame, one row per domain: measured_j, block_j, idle_j, unattributed_j, share
        (block_j / measured_j), block_mean_w, flags. Domains overlap (a package holds its cores;
        psys and a node's wattmeter hold everything): do not add them up."""
        import pandas as pd
        t = self._totals
        rows = []
        for d, domain in enumerate(self.domains):
            measured = t["measured_uj"][d] / 1e6
            block = self._block_uj[d] / 1e6
            rows.append({
                "source": domain["source"], "domain": domain["domain"], "kind": domain["kind"],
                "measured_j": measured, "block_j": block, "idle_j": t["idle_uj"][d] / 1e6,
                "unattributed_j": t["unattributed_uj"][d] / 1e6,
                "share": block / measured if measured > 0 else float("nan"),
                "block_mean_w": block / self.seconds if self.seconds > 0 else float("nan"),
                "flags": t["flags"][d],
            })
        frame: pd.DataFrame = pd.DataFrame(rows).set_index(["source", "domain"])
        return frame

    @property
    def samples(self) -> pd.DataFrame:
        """A DataFrame, one row per interval and domain: start, end (UTC), source, domain, kind
        (categories), measured_j, block_j, idle_j, unattributed_j, flags (words, as in energy:
        "wrapped", "reset", "may have missed a wrap", "unreadable", joined by ", "; "" for none),
        busy_cpus (the machine's busy CPUs on average over the interval), block_cpus (the
        block's)."""
        import pandas as pd
        s = self._result["samples"]
        codes = s["domain"]
        seconds = (s["end"] - s["start"]) / 1e9
        seconds[seconds <= 0] = float("nan")

        def category(key: str) -> pd.Categorical:
            return pd.Categorical([self.domains[i][key] for i in codes])

        return pd.DataFrame({
            "start": pd.to_datetime(s["start"], utc=True),
            "end": pd.to_datetime(s["end"], utc=True),
            "source": category("source"),
            "domain": category("domain"),
            "kind": category("kind"),
            "measured_j": s["measured_uj"] / 1e6,
            "block_j": s["targets_uj"] / 1e6,
            "idle_j": s["idle_uj"] / 1e6,
            "unattributed_j": s["unattributed_uj"] / 1e6,
            "flags": s["flags"],
            "busy_cpus": s["busy_us"] / 1e6 / seconds,
            "block_cpus": s["targets_cpu_us"] / 1e6 / seconds,
        })

    def report(self) -> str:
        """The block's energy as `kwatt meter -- COMMAND` prints a command's."""
        lines = [f"{self.what}: {self.seconds:.2f} s, {self.cpu_seconds:.2f} s of CPU", "",
                 f"   {'source':<9} {'domain':<14} {'measured':>14} {'block':>14} {'share':>8} "
                 f"{'block mean':>11}"]
        t = self._totals
        for d, domain in enumerate(self.domains):
            measured = t["measured_uj"][d] / 1e6
            block = self._block_uj[d] / 1e6
            share = f"{100 * block / measured:.1f} %" if measured > 0 else "-"
            mean = f"{block / self.seconds:.2f} W" if self.seconds > 0 else "-"
            flags = f"  ({t['flags'][d]})" if t["flags"][d] else ""
            lines.append(f"   {domain['source']:<9} {domain['domain']:<14} {measured:>12.3f} J "
                         f"{block:>12.3f} J {share:>8} {mean:>11}{flags}")
        return "\n".join(lines)

    def __repr__(self) -> str:
        joules = ", ".join(f"{name} {j:.3f} J" for name, j in self.joules.items())
        return f"<kwatt.Measurement {self.what}: {self.seconds:.2f} s; {joules}>"


class measure:
    """Measures the energy of a block (`with kwatt.measure() as m:`) or of each call of a
    function (`@kwatt.measure()`).

    By default the block's targets are this process and its children (``targets="self"``), and
    the sources every local one found (RAPL, NVML GPUs); on a machine with neither, give
    ``sources=["kwollect"]`` (the node's wattmeter through Kwollect; ``kwollect={"node": ...,
    "client": {...}}``) or a simulated machine (``sysfs_root=``, kwatt simulate rapl). Options are
    those of `kwatt meter` (doc/python.md): period (seconds), read_period, formula
    ("cputime" or "smartwatts": models on the targets' hardware counters), idle_policy,
    idle_power ({"package": 12.5}), pids, trees, cgroups, commands, all_processes,
    cgroup_depth, counters, outputs (["csv:/tmp/m.csv"]), listen_port, state_file, sources,
    rapl_path, rapl_domains, sysfs_root, procfs_root, cgroup_root, nvml_library, hostname.
    Everything is checked when the block starts; errors are kwatt.KwattError subclasses.

    The meter's own threads run in this process: their CPU time is taken off the block's (it
    shows as unattributed).
    """

    def __init__(self, *, targets: Literal["self", "given"] = "self", period: float = 0.1,
                 **options: Unpack[MeterOptions]) -> None:
        if targets not in ("self", "given"):
            raise ValueError('targets is "self" (this process and its children) or "given" '
                             '(only pids=, cgroups=, commands=...)')
        self._options: dict[str, Any] = dict(options, period=period)
        if targets == "self":
            self._options["pids"] = [os.getpid(), *self._options.get("pids", [])]
        self._meter: Optional[_core.Meter] = None
        self._blocks: list[measure] = []  # the blocks begun and not ended, innermost last
        self.measurement: Optional[Measurement] = None

    def __enter__(self) -> "measure":
        """Begins a block and returns its own object: each `with` gets a fresh result, so that a
        measure used again, or nested in itself, never overwrites an earlier block's. The
        measure itself shows its last ended block's."""
        block = measure.__new__(measure)
        block._options = self._options
        block._blocks = []
        block.measurement = None
        block._meter = _core.Meter(self._options)
        block._meter.start()
        self._blocks.append(block)
        return block

    def __exit__(self, *exc_info: object) -> None:
        block = self._blocks.pop()
        meter, block._meter = block._meter, None
        assert meter is not None  # set by __enter__
        block.measurement = Measurement(meter.stop(), "block")
        self.measurement = block.measurement

    def __repr__(self) -> str:
        if self.measurement is None:
            return "<kwatt.measure: not measured yet>" if self._meter is None and \
                not self._blocks else "<kwatt.measure: measuring>"
        return repr(self.measurement)

    # The measurement's own attributes, once the block ended.
    def __getattr__(self, name: str) -> Any:
        if name.startswith("_") or name == "measurement":
            raise AttributeError(name)
        if self.measurement is None:
            raise AttributeError(f"{name}: the block is still being measured")
        return getattr(self.measurement, name)

    def __call__(self, func: Callable[_P, _R]) -> MeasuredFunction[_P, _R]:
        options = self._options

        @functools.wraps(func)
        def measured(*args: _P.args, **kwargs: _P.kwargs) -> _R:
            meter = _core.Meter(options)
            meter.start()
            try:
                return func(*args, **kwargs)
            finally:
                measurement = Measurement(meter.stop(), f"{func.__qualname__}()")
                wrapper.measurements.append(measurement)
                wrapper.last = measurement

        # The function as called, with the measurements of its calls as attributes.
        wrapper = cast("MeasuredFunction[_P, _R]", measured)
        wrapper.measurements = []
        wrapper.last = None
        return wrapper


if TYPE_CHECKING:
    class MeasuredFunction(Protocol[_P, _R]):
        """A function decorated with @kwatt.measure(): called as the function, each call measured;
        `measurements` holds every call's Measurement, `last` the last one's (None before)."""
        measurements: list[Measurement]
        last: Optional[Measurement]
        __wrapped__: Callable[_P, _R]

        def __call__(self, *args: _P.args, **kwargs: _P.kwargs) -> _R: ...
