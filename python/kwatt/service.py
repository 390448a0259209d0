"""kwatt.Kwollect: the metrics and energy of an experiment's nodes, as an EnOSlib service."""
from __future__ import annotations

import os
import sys
import time
from typing import (TYPE_CHECKING, Any, Iterable, Literal, Mapping, Optional, TypeVar, Union,
                    cast)

from . import _core
from ._convert import (ClientOptions, HostGroup, Hosts, Instant, Path, Paths, Phases, Progress,
                       ProgressFunction, _client, _progress_printer, fqdn, host_list,
                       node_name, path_list, role_map, to_ns, unique)
from .documents import ApiRow, EnergyReport, MetricDescription, NodeFound
from .errors import DeployError, IncompleteError, InvalidArgumentError
from .frames import (LoadOptions, energy_frame, load, source_checks_frame, stats_frame,
                     table_frame)

if TYPE_CHECKING:
    import pandas as pd
    from matplotlib.axes import Axes
    from typing_extensions import Unpack

    # EnOSlib ships no types: to a type checker, Kwollect's base is a plain class.
    class _ServiceBase:
        pass
else:
    try:  # Subclass EnOSlib's Service when EnOSlib is there; work without it.
        from enoslib.service.service import Service as _ServiceBase
    except Exception:  # pragma: no cover - depends on the environment
        class _ServiceBase:
            pass

# Metric ids: one, several, or None for every metric.
Metrics = Union[str, Iterable[str], None]
# Rows as get_metrics() returns them: {node FQDN: [the API's row, as json.loads gives it]}.
Rows = dict[str, list[ApiRow]]
# Roles as _core takes them: [(role name, [FQDN])].
_RoleList = list[tuple[str, list[str]]]

_T = TypeVar("_T")
_Self = TypeVar("_Self", bound="Kwollect")


def _in_notebook() -> bool:
    return "ipykernel" in sys.modules


def _is_tuple_of(item: object, length: int) -> bool:
    return isinstance(item, (tuple, list)) and len(item) == length


def _phase_list(phases: Phases) -> list[tuple[str, Instant, Instant]]:
    """[(name, start, end)] of phases given as {name: (start, end)} or [(name, start, end)];
    InvalidArgumentError for anything else."""
    shape = "phases are (name, start, end) tuples, or a dict {name: (start, end)}"
    if hasattr(phases, "items"):
        out = []
        for name, bounds in phases.items():
            if not _is_tuple_of(bounds, 2):
                raise InvalidArgumentError(f"{shape}: phase {name!r} is {bounds!r}")
            out.append((name, bounds[0], bounds[1]))
        return out
    if isinstance(phases, (str, bytes)) or not hasattr(phases, "__iter__"):
        raise InvalidArgumentError(f"{shape}, not {phases!r}")
    phases = list(phases)
    for phase in phases:
        if not _is_tuple_of(phase, 3):
            raise InvalidArgumentError(f"{shape}: {phase!r} is not one")
    return [(phase[0], phase[1], phase[2]) for phase in phases]


class Kwollect(_ServiceBase):
    """Metrics and energy of Grid'5000 nodes over the instants of an experiment.

    Args:
        roles: EnOSlib hosts: a Roles (every role's hosts; role names are kept for energy()
            and stats()), a list of Hosts (``roles["compute"]``), or one Host.
        nodes: instead of roles: hostnames ("nova-1.lyon.grid5000.fr", "nova-1.lyon",
            KaVLAN and IPv6 names) or objects with ``.address``.
        api: the API's base URL (default: ``~/.python-grid5000.yaml``'s ``uri``, the
            KWATT_API_URL environment variable, else https://api.grid5000.fr/stable).
        config: the python-grid5000 YAML file with credentials (default
            ``~/.python-grid5000.yaml``); KWATT_USERNAME / KWATT_PASSWORD also work.
        progress: True to print a progress line on long fetches, False for none, or a
            function called with a dict (requests_done, requests_total, rows, bytes, seconds).
            Default: on in terminals and notebooks.
        client_options: concurrency, per_site, rows_per_request, retries, backoff, timeout,
            connect_timeout, verify_tls, ca_file, username, password.

    start() and stop() record instants (no API call); any number of instances may run, nested
    or overlapping, each with its own window. ``with Kwollect(...) as k:`` deploys, starts,
    and stops on exit (unless stop() was called in the block).
    """

    def __init__(self, roles: Optional[Hosts] = None, nodes: Optional[Hosts] = None,
                 api: Optional[str] = None, *, config: Optional[Path] = None,
                 progress: Progress = None, **client_options: Unpack[ClientOptions]) -> None:
        if roles is not None and nodes is not None:
            raise InvalidArgumentError("give roles or nodes, not both")
        given = roles if roles is not None else nodes
        self.hosts = host_list(given)  # as given: EnOSlib Hosts or names
        if not self.hosts:
            raise InvalidArgumentError("no node given: pass roles=... or nodes=[...]")
        self._names = [node_name(h) for h in self.hosts]
        self.nodes = unique(fqdn(h) for h in self.hosts)
        self.roles = role_map(roles)
        # As given, less any user:password@ (the credentials go to the client options only).
        self.api: Optional[str] = None if api is None else _core.url_without_credentials(str(api))
        self._client = _client(api, config, client_options)
        self.progress: Progress = progress
        # epoch seconds, as EnOSlib's Kwollect has them
        self.start_time: Optional[float] = None
        self.stop_time: Optional[float] = None
        self._start_ns: Optional[int] = None
        self._stop_ns: Optional[int] = None
        self._job: Optional[tuple[str, int]] = None
        self._job_types: list[str] = []
        # True while the window is the job's (from_job, no start() or stop() since): backup()
        # then asks for the job, whose end a running job has not reached yet.
        self._window_is_job = False
        self._stopped = False  # stop() was called since the last start()
        self.marks: list[tuple[str, int]] = []  # [(name, ns)]
        self.deployed = False
        self._lookup: Optional[dict[str, NodeFound]] = None

    # ---- lifecycle ---------------------------------------------------------------------------

    @classmethod
    def from_job(cls: type[_Self], site: str, job_id: int, api: Optional[str] = None, *,
                 config: Optional[Path] = None, progress: Progress = None,
                 **client_options: Unpack[ClientOptions]) -> _Self:
        """An instance over a past (or running) job: its nodes, and its window (start and stop
        of the job; a running job's stop is now). start()/stop() may still change it.

        Until they do, backup() backs the job up as `kwatt backup --job SITE:ID` does: the
        backup of a running job stays incomplete (and resumable) until the job has ended."""
        client = _client(api, config, client_options)
        resolved = _core.resolve(client, nodes=[], start=None, end=None,
                                 job=(str(site), int(job_id)))
        self = cls(nodes=resolved["nodes"], api=api, config=config, progress=progress,
                   **client_options)
        self._job = (str(site), int(job_id))
        self._job_types = list(resolved["job_types"])
        self._set_start(resolved["start"])
        self._set_stop(resolved["end"])
        self._window_is_job = True
        return self

    def deploy(self) -> None:
        """Checks that every node is a Grid'5000 node known to the reference API whose cluster
        reports metrics; raises DeployError naming every offending node and why. The nodes of a
        site whose API cannot be read (down: a 503, a proxy's page) are not checked: a
        RuntimeWarning names them, and their rows are fetched when the site is back (until then
        a fetch reports them as not fetched)."""
        found = _core.look_up_nodes(self._client, self._names)
        if found["unavailable"]:
            import warnings
            lines = "\n".join(f"  {name}: {why}" for name, why in found["unavailable"])
            warnings.warn(f"{len(found['unavailable'])} of {len(self._names)} nodes could not be "
                          f"checked:\n{lines}", RuntimeWarning, stacklevel=2)
        problems = {name: why for name, why in found["problems"]}
        for node in found["nodes"]:
            if not _core.catalogue_metrics(node["catalogue"], node["uid"]):
                problems[node["name"]] = (f"cluster {node['cluster']} reports no metric to "
                                          "Kwollect")
        if problems:
            lines = "\n".join(f"  {name}: {why}" for name, why in problems.items())
            raise DeployError(f"{len(problems)} of {len(self._names)} nodes cannot be measured "
                              f"with Kwollect:\n{lines}", problems)
        self._lookup = {node["node"]: node for node in found["nodes"]}
        self.deployed = True

    def destroy(self) -> None:
        """Nothing to undo: Kwollect measures the nodes anyway."""

    def start(self, timestamp: Optional[Instant] = None, *,
              start_time: Optional[Instant] = None) -> None:
        """Records the start of the window: now, or `timestamp` (epoch seconds, datetime,
        ISO 8601 text; `start_time=` as EnOSlib's Kwollect names it). No API call.

        start() begins a new window: the previous window's stop and marks are forgotten (an
        instance may measure one experiment after another: start, marks, stop, start...)."""
        timestamp = start_time if timestamp is None else timestamp
        self._set_start(time.time_ns() if timestamp is None else to_ns(timestamp, "start"))
        self._set_stop(None)
        self.marks = []
        self._stopped = False
        self._window_is_job = False

    def stop(self, timestamp: Optional[Instant] = None, *,
             stop_time: Optional[Instant] = None) -> None:
        """Records the end of the window: now, or `timestamp` (`stop_time=` as EnOSlib's
        Kwollect names it). No API call. Once per window: a second stop() raises
        InvalidArgumentError (call start() for a new window). A from_job instance's window ends
        at the job's end until stop() moves it."""
        timestamp = stop_time if timestamp is None else timestamp
        if self._start_ns is None:
            raise InvalidArgumentError("stop() before start(): call start() first")
        if self._stopped:
            assert self._stop_ns is not None  # stop() set both
            raise InvalidArgumentError(
                f"already stopped at {_core.format_paris(self._stop_ns)}: a window stops once "
                "(call start() to begin a new one)")
        stop = time.time_ns() if timestamp is None else to_ns(timestamp, "stop")
        if stop < self._start_ns:
            raise InvalidArgumentError(
                f"stop {_core.format_paris(stop)} is before start {_core.format_paris(self._start_ns)}")
        self._set_stop(stop)
        self._stopped = True
        self._window_is_job = False

    def mark(self, name: str, timestamp: Optional[Instant] = None) -> int:
        """Marks the start of a phase named `name` (now, or at `timestamp`); a phase lasts until
        the next mark, or the end of the window. energy() and stats() report each phase. Before
        start() (no window yet) it raises InvalidArgumentError."""
        if self._start_ns is None:
            raise InvalidArgumentError(f"mark() before start(): call start() first (mark "
                                       f"{name!r} would belong to no window)")
        at = time.time_ns() if timestamp is None else to_ns(timestamp, "mark")
        self.marks.append((str(name), at))
        return at

    def __enter__(self: _Self) -> _Self:
        self.deploy()
        self.start()
        return self

    def __exit__(self, *exc: object) -> Literal[False]:
        if not self._stopped:
            self.stop()
        return False

    def _set_start(self, ns: Optional[int]) -> None:
        self._start_ns = ns
        self.start_time = None if ns is None else ns / 1e9

    def _set_stop(self, ns: Optional[int]) -> None:
        self._stop_ns = ns
        self.stop_time = None if ns is None else ns / 1e9

    # ---- what is asked ----------------------------------------------------------------------

    @property
    def window(self) -> tuple[Optional[int], Optional[int]]:
        """(start, stop) in ns since the epoch, UTC (stop None while running)."""
        return (self._start_ns, self._stop_ns)

    def _window(self) -> tuple[int, int]:
        if self._start_ns is None:
            raise InvalidArgumentError("no window yet: call start() and stop() first (or use "
                                       "Kwollect.from_job)")
        # A window still running ends now: metrics so far.
        return self._start_ns, (self._stop_ns if self._stop_ns is not None else time.time_ns())

    def _subset(self, roles: Optional[Hosts] = None, nodes: Optional[Hosts] = None) -> list[str]:
        if roles is not None and nodes is not None:
            raise InvalidArgumentError("give roles or nodes, not both")
        given = roles if roles is not None else nodes
        if given is None:
            return list(self.nodes)
        names = unique(fqdn(h) for h in host_list(given))
        outside = [n for n in names if n not in self.nodes]
        if outside:
            raise InvalidArgumentError(
                f"not nodes of this Kwollect instance: {', '.join(outside)} (its nodes: "
                f"{', '.join(self.nodes)}); give a subset of them")
        return names

    def _progress(self, verb: str) -> Optional[ProgressFunction]:
        p = self.progress
        if p is None:
            p = sys.stderr.isatty() or _in_notebook()
        if p is True:
            return _progress_printer(verb)
        if p is False:
            return None
        return p

    def _fetch(self, metrics: Metrics, roles: Optional[Hosts], nodes: Optional[Hosts],
               summary: bool, verb: str, check_metrics: bool = True,
               as_rate: bool = False) -> tuple[list[str], _core.Table]:
        subset = self._subset(roles, nodes)
        start, stop = self._window()
        metrics = [metrics] if isinstance(metrics, str) else list(metrics or [])
        table = _core.fetch(self._client, nodes=subset, start=start, end=stop, job=None,
                            metrics=metrics, summary=bool(summary), progress=self._progress(verb),
                            check_metrics=check_metrics, as_rate=bool(as_rate))
        return subset, table

    @staticmethod
    def _check_complete(table: _core.Table, result: _T, allow_incomplete: bool) -> _T:
        return Kwollect._check_report(table.report, result, allow_incomplete)

    @staticmethod
    def _check_report(report: Mapping[str, Any], result: _T, allow_incomplete: bool) -> _T:
        """`result`, or IncompleteError (``.partial`` = result) when the fetch behind it
        (`report`: its "fetch" dict) could not get everything: one rule for get_metrics,
        to_pandas, energy and stats, as the CLI exits 1 for all of them."""
        if report["complete"]:
            return result
        failures = report["failures"]
        text = "; ".join(f"{f['site']} {','.join(f['nodes'])}: {f['error']}" for f in failures[:5])
        message = (f"{len(failures)} piece(s) of the query could not be fetched ({text}); the "
                   "rows that were fetched are in .partial")
        if allow_incomplete:
            import warnings
            warnings.warn(message, RuntimeWarning, stacklevel=4)
            return result
        raise IncompleteError(message, partial=result, failures=failures)

    # ---- metrics -----------------------------------------------------------------------------

    def get_metrics(self, metrics: Metrics = None, nodes: Optional[Hosts] = None,
                    summary: bool = False, *, roles: Optional[Hosts] = None,
                    allow_incomplete: bool = False, custom_metrics: bool = False,
                    as_rate: bool = False) -> Rows:
        """Every row Kwollect holds for the nodes over the window.

        Returns {node FQDN: [rows]}: every node of the subset (an empty list when it has no
        data), rows in chronological order, each row the dict json.loads gives for the API's
        row: {'timestamp': '2024-11-26T15:44:04+01:00', 'device_id': 'nova-1', 'metric_id':
        'wattmetre_power_watt', 'value': 6.914999999999997, 'labels': {'_device_orig': [...]}}.

        Arguments in EnOSlib's order (metrics, nodes, summary: its positional calls work).
        metrics: metric ids (default: all); nodes / roles: a subset of the instance's nodes;
        summary: 5-minute aggregates. A fetch that could not get everything raises
        IncompleteError (``.partial`` holds the rows obtained) unless allow_incomplete.
        custom_metrics: metrics may name custom metrics (pushed with POST), which no catalogue
        lists; otherwise a metric the catalogues do not list raises NotFoundError.
        as_rate: each value as its series' rate per second, as Kwollect's as_rate=true gives it
        (None for a series' first row; a counter's wrap counted), over the whole window.
        """
        subset, table = self._fetch(metrics, roles, nodes, summary, "kwatt get_metrics",
                                    check_metrics=not custom_metrics, as_rate=as_rate)
        return self._check_complete(table, table.rows_by_node(subset), allow_incomplete)

    def to_pandas(self, metrics: Metrics = None, nodes: Optional[Hosts] = None,
                  summary: bool = False, *, roles: Optional[Hosts] = None,
                  allow_incomplete: bool = False, custom_metrics: bool = False,
                  as_rate: bool = False) -> pd.DataFrame:
        """The same rows as one DataFrame: timestamp (UTC-aware), site, node, device_id,
        metric_id, value, labels (JSON text). See kwatt.frames.table_frame."""
        _, table = self._fetch(metrics, roles, nodes, summary, "kwatt to_pandas",
                               check_metrics=not custom_metrics, as_rate=as_rate)
        return self._check_complete(table, table_frame(table), allow_incomplete)

    def get_metrics_pandas(self, metrics: Metrics = None, nodes: Optional[Hosts] = None,
                           summary: bool = False, *, roles: Optional[Hosts] = None,
                           allow_incomplete: bool = False, custom_metrics: bool = False,
                           as_rate: bool = False) -> pd.DataFrame:
        """EnOSlib's name for to_pandas()."""
        return self.to_pandas(metrics, nodes, summary, roles=roles,
                              allow_incomplete=allow_incomplete, custom_metrics=custom_metrics,
                              as_rate=as_rate)

    def backup(self, backup_dir: Optional[Path] = None, metrics: Metrics = None,
               nodes: Optional[Hosts] = None, summary: bool = False, *,
               roles: Optional[Hosts] = None) -> str:
        """Archives every row of the window (doc/archive_format.md): lossless, compressed,
        written as it is fetched, resumable. Returns the archive's directory (default:
        kwatt_backup/<start>_<stop>, or kwatt_backup/<site>_<job id> for a job's window). A
        backup that could not fetch everything keeps what it has and raises IncompleteError: run
        the same backup again to complete it.

        An instance of Kwollect.from_job whose window was not changed by start() or stop() backs
        the job up, as `kwatt backup --job SITE:ID` does (roles / nodes narrow it as --nodes
        does): the backup of a running job holds its rows so far and raises IncompleteError
        until the job has ended; the first backup() into the same directory after its end
        completes it."""
        subset = self._subset(roles, nodes)
        start: Optional[int]
        stop: Optional[int]
        start, stop = window = self._window()
        job = None
        if self._window_is_job:
            job = self._job
            assert job is not None  # from_job set it
            start = stop = None
            if backup_dir is None:
                backup_dir = os.path.join("kwatt_backup", f"{job[0]}_{job[1]}")
            if sorted(subset) == sorted(self.nodes):
                subset = []  # all the job's nodes, as `kwatt backup --job` asks for them
        if backup_dir is None:
            backup_dir = os.path.join("kwatt_backup", f"{window[0] // 1000}_{window[1] // 1000}")
        backup_dir = os.fspath(backup_dir)
        metrics = [metrics] if isinstance(metrics, str) else list(metrics or [])
        outcome = _core.backup(self._client, backup_dir, nodes=subset, start=start, end=stop,
                               job=job, metrics=metrics, summary=bool(summary),
                               progress=self._progress("kwatt backup"))
        if not outcome["complete"]:
            raise IncompleteError(f"backup {backup_dir} is incomplete: {outcome['error']}",
                                  partial=backup_dir, failures=outcome["fetch"]["failures"])
        return backup_dir

    @staticmethod
    def load(backup_dir: Path, **kwargs: Unpack[LoadOptions]) -> pd.DataFrame:
        """kwatt.load(): an archive as a DataFrame."""
        return load(backup_dir, **kwargs)

    # ---- what the nodes can report ---------------------------------------------------------

    def _looked_up(self) -> dict[str, NodeFound]:
        if self._lookup is None:
            self.deploy()
        assert self._lookup is not None  # deploy() sets it, or raises
        return self._lookup

    def available_metrics(self, nodes: Optional[Hosts] = None,
                          job_types: Optional[Iterable[str]] = None
                          ) -> dict[str, list[MetricDescription]]:
        """{node FQDN: [metric descriptions]} from the reference API's catalogues: prometheus
        groups expanded to metric ids, `only_for` honoured. Each description: name,
        description, period (ms; 0: on demand only), optional_period (ms, with a `monitor`
        job type), protocol, group (the catalogue entry of an expanded id), on_demand, and
        period_in_job (the period in a job of `job_types`; default: the instance's job's)."""
        lookup = self._looked_up()
        types = list(self._job_types if job_types is None else job_types)
        # A node of a site that was down when deploy() looked it up: none known.
        return {n: _core.catalogue_metrics(lookup[n]["catalogue"], lookup[n]["uid"], types)
                if n in lookup else [] for n in self._subset(nodes=nodes)}

    def info(self) -> str:
        """A readable summary: nodes by site and cluster, the window, marks, and per cluster
        what its nodes report, and which metrics need a `monitor` job type."""
        lookup = self._looked_up()
        lines = [f"kwatt.Kwollect: {len(self.nodes)} node(s)"]
        start, stop = self._start_ns, self._stop_ns
        if start is None:
            lines.append("window: not started")
        else:
            end = _core.format_paris(stop) if stop is not None else "running"
            length = f" ({(stop - start) / 1e9:.1f} s)" if stop is not None else ""
            lines.append(f"window: {_core.format_paris(start)} .. {end}{length}")
        if self._job:
            lines.append(f"job: {self._job[0]}:{self._job[1]} types {self._job_types}")
        for name, at in self.marks:
            lines.append(f"mark {name}: {_core.format_paris(at)}")
        by_cluster: dict[tuple[str, str], list[str]] = {}
        for n in self.nodes:
            if n not in lookup:
                lines.append(f"{n}: not checked (its site's API could not be read)")
                continue
            info = lookup[n]
            by_cluster.setdefault((info["site"], info["cluster"]), []).append(info["uid"])
        for (site, cluster), uids in by_cluster.items():
            info = lookup[f"{uids[0]}.{site}.grid5000.fr"]
            metrics = _core.catalogue_metrics(info["catalogue"], info["uid"], self._job_types)
            regular = [m for m in metrics if m["period"] > 0]
            on_demand = [m for m in metrics if m["period"] == 0]
            power = [m["name"] for m in metrics if m["name"].endswith("power_watt")]
            lines.append(f"{site}/{cluster}: {', '.join(uids)}")
            lines.append(f"  {len(regular)} metrics collected by default, {len(on_demand)} on "
                         "demand only (job type monitor or monitor=<regex>)")
            if power:
                def period(m: Mapping[str, Any]) -> str:
                    text = f"{m['name']} {m['period']} ms"
                    if self._job_types and m["period_in_job"] != m["period"]:
                        return text + f" ({m['period_in_job']} ms in this job)"
                    if m["optional_period"]:
                        return text + f" ({m['optional_period']} ms with monitor)"
                    return text
                lines.append("  power: " + "; ".join(period(m) for m in metrics
                                                      if m["name"] in power))
            else:
                lines.append("  power: none (no wattmeter, PDU or BMC power metric)")
        return "\n".join(lines)

    def __repr__(self) -> str:
        start = "-" if self._start_ns is None else _core.format_paris(self._start_ns)
        stop = "-" if self._stop_ns is None else _core.format_paris(self._stop_ns)
        return f"<kwatt.Kwollect {len(self.nodes)} nodes {start} .. {stop}>"

    # ---- energy and statistics ------------------------------------------------------------------

    def phases(self, phases: Optional[Phases] = None) -> list[tuple[str, int, int]]:
        """[(name, start ns, end ns)]: the marks (each phase until the next mark or the end of the
        window), then `phases` given as {name: (start, end)} or [(name, start, end)] (anything
        else raises InvalidArgumentError)."""
        start, stop = self._window()
        out = []
        marks = sorted(self.marks, key=lambda m: m[1])
        for i, (name, at) in enumerate(marks):
            # Two marks at one instant make an empty phase: energy() and stats() refuse it, naming
            # it, rather than leaving it out unsaid.
            out.append((name, at, marks[i + 1][1] if i + 1 < len(marks) else stop))
        if phases:
            for name, a, b in _phase_list(phases):
                out.append((str(name), to_ns(a, f"phase {name}"), to_ns(b, f"phase {name}")))
        return out

    def _roles_and_nodes(self, roles: Optional[Hosts],
                         nodes: Optional[Hosts]) -> tuple[_RoleList, list[str]]:
        """(roles as _core takes them, the nodes) for energy and stats: roles a mapping {name:
        hosts} (default: the instance's), or hosts (a list, EnOSlib's roles["compute"], one
        Host), which narrow the nodes as nodes= does, without roles."""
        if roles is not None and not hasattr(roles, "items"):
            if nodes is not None:
                raise InvalidArgumentError("give roles or nodes, not both")
            return [], self._subset(roles, None)
        if nodes is not None:
            if roles is not None:
                raise InvalidArgumentError("give roles or nodes, not both")
            return [], self._subset(None, nodes)
        # None or a mapping {name: hosts} (the hosts were returned above).
        return self._roles(cast("Optional[Mapping[str, HostGroup]]", roles)), list(self.nodes)

    def _roles(self, roles: Union[Mapping[str, HostGroup], Iterable[tuple[str, HostGroup]], None]
               ) -> _RoleList:
        given = self.roles if roles is None else roles
        out = []
        for name, hosts in (given.items() if hasattr(given, "items") else given):
            nodes = unique(fqdn(h) for h in host_list(hosts))
            if not nodes:
                raise InvalidArgumentError(f"role {name} has no node: a role's energy and "
                                           "statistics are those of its nodes (give it some)")
            out.append((str(name), nodes))
        return out

    def _source(self, source: Optional[Path], nodes: list[str],
                with_archives: Paths = None) -> _core.Selection:
        """What _core.energy/stats read: the nodes, from an archive (narrowed to the window when
        there is one; a node it lacks is an error) or over the instance's window."""
        if source is not None:
            return _core.Selection(archive=os.fspath(source), nodes=nodes, start=self._start_ns,
                                   end=self._stop_ns, with_archives=path_list(with_archives))
        start, stop = self._window()
        return _core.Selection(nodes=nodes, start=start, end=stop,
                               with_archives=path_list(with_archives))

    def energy_report(self, phases: Optional[Phases] = None, roles: Optional[Hosts] = None,
                      metric: Optional[str] = None, baseline: Optional[str] = None,
                      source: Optional[Path] = None, gap_factor: float = 3.0,
                      accuracies: Optional[Mapping[str, str]] = None,
                      clock_offset: Optional[float] = None, allow_incomplete: bool = False,
                      with_archives: Paths = None,
                      nodes: Optional[Hosts] = None) -> EnergyReport:
        """energy() as a dict (typed: kwatt.documents.EnergyReport): the JSON `kwatt energy --json` prints (start, end, requested_start,
        requested_end, notes, nodes_without_power, phases, nodes, roles, role_phases,
        phase_totals, total, source_checks; each figure's "interval"), plus `fetch` (what was
        fetched, failures, the with_archives read). with_archives: as energy()'s. A fetch that
        could not get everything raises IncompleteError (``.partial`` holds the report) unless
        allow_incomplete."""
        report = self._energy(phases, roles, metric, baseline, source, gap_factor, accuracies,
                              clock_offset, with_archives, nodes)
        return self._check_report(report["fetch"], report, allow_incomplete)

    def _energy(self, phases: Optional[Phases], roles: Optional[Hosts], metric: Optional[str],
                baseline: Optional[str], source: Optional[Path], gap_factor: float,
                accuracies: Optional[Mapping[str, str]] = None,
                clock_offset: Optional[float] = None, with_archives: Paths = None,
                nodes: Optional[Hosts] = None) -> EnergyReport:
        role_list, subset = self._roles_and_nodes(roles, nodes)
        selection = self._source(source, subset, with_archives)
        accuracy_texts = [f"{m}={a}" for m, a in (accuracies or {}).items()]
        if clock_offset is None:
            clock_offset = _core.DEFAULT_CLOCK_OFFSET
        elif isinstance(clock_offset, bool) or not isinstance(clock_offset, (int, float)):
            raise InvalidArgumentError(f"clock_offset should be a number of seconds, not "
                                       f"{clock_offset!r}")
        options = _core.EnergyOptions(phases=self.phases(phases), roles=role_list,
                                      metric=metric or "", baseline=baseline or "",
                                      gap_factor=float(gap_factor), accuracies=accuracy_texts,
                                      clock_offset=float(clock_offset))
        return _core.energy(self._client, selection, options,
                            progress=self._progress("kwatt energy"))

    def energy(self, phases: Optional[Phases] = None, roles: Optional[Hosts] = None,
               metric: Optional[str] = None, baseline: Optional[str] = None,
               source: Optional[Path] = None, gap_factor: float = 3.0,
               accuracies: Optional[Mapping[str, str]] = None,
               clock_offset: Optional[float] = None, allow_incomplete: bool = False,
               with_archives: Paths = None, nodes: Optional[Hosts] = None) -> pd.DataFrame:
        """The energy of the experiment, as a DataFrame with one row per node, role and total,
        for the whole window (phase "window") and each phase (marks, and `phases`).

        Each node's power comes from its best source (wattmeter, then PDU, then BMC; or
        `metric`), integrated on the real timestamps; gaps are estimated and counted, coverage
        reported. The window and phases are clipped to the data's window (never extrapolated);
        ``frame.attrs["kwatt"]["notes"]`` says what was clipped or merged. roles: {name: hosts}
        (default: the Roles given), or hosts (EnOSlib's ``roles["compute"]``), which narrow the
        nodes as nodes= does: a subset of the instance's nodes (then no roles). baseline: a phase whose mean power is the idle baseline
        (baseline_joules then tells the energy at idle). source: an archive directory instead
        of the API. Columns: scope (node, role, total), name, phase, metric, joules, wh,
        mean_watts, peak_watts, seconds, coverage, gaps, gap_joules, counter_joules (energy
        counter cross-check), baseline_joules, then the energy's 95 % interval: half_width_joules,
        low_joules, high_joules and its terms accuracy_joules, resolution_joules,
        sampling_joules, gaps_and_edges_joules, clock_joules (doc/energy.md, "How far to trust
        it"), then reason. accuracies: {metric: "P%+WW"} replacing the documented stated
        accuracies; clock_offset: the most, in seconds, the clock that took the marks may be off
        the meters' (default 0.1). with_archives: other archives of the same nodes read with the
        rows (a path or a list), such as `kwatt meter -o archive:` recordings on them, whose RAPL
        and GPU domains source_checks() then checks against the wall (`kwatt energy
        --with-archive`). A fetch that could not get everything raises IncompleteError
        (``.partial`` holds the DataFrame) unless allow_incomplete.
        """
        report = self._energy(phases, roles, metric, baseline, source, gap_factor, accuracies,
                              clock_offset, with_archives, nodes)
        return self._check_report(report["fetch"], energy_frame(report), allow_incomplete)

    def source_checks(self, phases: Optional[Phases] = None, roles: Optional[Hosts] = None,
                      source: Optional[Path] = None, gap_factor: float = 3.0,
                      accuracies: Optional[Mapping[str, str]] = None,
                      allow_incomplete: bool = False, with_archives: Paths = None,
                      nodes: Optional[Hosts] = None) -> pd.DataFrame:
        """Each node's power sources checked against each other (doc/energy.md, "How far to trust
        it"), as a DataFrame with one row per node, interval (window, then each phase) and source
        compared with the node's chosen one: node, interval, metric, reference, verdict (agrees,
        disagrees, part_of_node, part_above_wall, not_comparable), joules (its energy),
        reference_joules, difference_joules, relative, allowed_joules (what the two stated
        accuracies allow), rest_watts (for a part of the node: the mean power it does not see),
        why.
        accuracies: {metric: "P%+WW"} replacing the documented defaults (e.g.
        {"bmc_node_power_watt": "5%+2W"}). with_archives: as energy()'s (a kwatt meter
        recording on a node: its RAPL and GPU domains checked against the node's wall power)."""
        report = self._energy(phases, roles, None, None, source, gap_factor, accuracies,
                              with_archives=with_archives, nodes=nodes)
        return self._check_report(report["fetch"], source_checks_frame(report), allow_incomplete)

    def stats(self, metrics: Metrics = None, phases: Optional[Phases] = None,
              roles: Optional[Hosts] = None, source: Optional[Path] = None,
              allow_incomplete: bool = False, nodes: Optional[Hosts] = None) -> pd.DataFrame:
        """Per interval (window, then each phase), node (and role) and metric: count, mean,
        min, max, last; counters' increase, rate and resets; CPU usage (cpu_busy, 0..1). A
        fetch that could not get everything raises IncompleteError (``.partial`` holds the
        DataFrame) unless allow_incomplete."""
        role_list, subset = self._roles_and_nodes(roles, nodes)
        selection = self._source(source, subset)
        metric_ids = [metrics] if isinstance(metrics, str) else list(metrics or [])
        report = _core.stats(self._client, selection, metrics=metric_ids,
                             phases=self.phases(phases), roles=role_list,
                             progress=self._progress("kwatt stats"))
        return self._check_report(report["fetch"], stats_frame(report), allow_incomplete)

    # ---- plots -------------------------------------------------------------------------------

    def plot_power(self, data: Optional[pd.DataFrame] = None, ax: Optional[Axes] = None,
                   metric: Optional[str] = None) -> Axes:
        """Power over time per node, with the window's start and stop and the phase marks.
        data: a DataFrame from to_pandas() or kwatt.load() (default: fetched now)."""
        from .plots import plot_power
        if data is None:
            # Without `metric`, the power sources to try: those the nodes lack are no error.
            _, table = self._fetch([metric] if metric else _core.power_metrics(), None, None,
                                   False, "kwatt plot_power", check_metrics=bool(metric))
            data = self._check_complete(table, table_frame(table), False)
        return plot_power(data, ax=ax, window=self.window, phases=self.phases(), metric=metric)
