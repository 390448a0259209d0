"""Type stubs of kwatt._core, the C++ core (python/bindings/core.cc). Private: use the kwatt
package. Times are int nanoseconds since the epoch (UTC); a client is a Client, its options
checked once."""
from typing import Any, Callable, Optional, Sequence

import numpy as np
import numpy.typing as npt

from ._convert import KwollectClientOptions
from .documents import (ApiRow, BackupOutcome, EnergyReport, FetchFailure, FetchReport,
                        MeterHeader, MeterResult, MetricDescription, NodesLookedUp, StatsReport)

__version__: str


class Client:
    """The Kwollect client's options (python/bindings/kwollect.cc), those given (api_url,
    username, password, verify_tls, ca_file, timeout, connect_timeout, concurrency, per_site,
    rows_per_request, retries, backoff) checked when it is made (a wrong or unknown one raises
    InvalidArgumentError), over the credentials file's (options["config"], else
    ~/.python-grid5000.yaml), read when a request first needs them (never for an archive)."""
    def __init__(self, options: KwollectClientOptions = ...) -> None: ...
    @property
    def api_url(self) -> str: ...
    @property
    def username(self) -> str: ...
    @property
    def verify_tls(self) -> bool: ...
    @property
    def timeout(self) -> float: ...
    @property
    def connect_timeout(self) -> float: ...
    @property
    def concurrency(self) -> int: ...
    @property
    def per_site(self) -> int: ...
    @property
    def rows_per_request(self) -> int: ...
    @property
    def retries(self) -> int: ...
    @property
    def backoff(self) -> float: ...

Job = Optional[tuple[str, int]]
Progress = Optional[Callable[[dict[str, float]], Any]]
Phases = Sequence[tuple[str, int, int]]
Roles = Sequence[tuple[str, Sequence[str]]]


class Table:
    """Rows in columns (numpy views of the C++ table), string columns as codes into lists."""
    def __len__(self) -> int: ...
    @property
    def time(self) -> npt.NDArray[np.int64]: ...
    @property
    def utc_offset(self) -> npt.NDArray[np.int32]: ...
    @property
    def value(self) -> npt.NDArray[np.float64]: ...
    @property
    def site_codes(self) -> npt.NDArray[np.int32]: ...
    @property
    def node_codes(self) -> npt.NDArray[np.int32]: ...
    @property
    def device_codes(self) -> npt.NDArray[np.int32]: ...
    @property
    def metric_codes(self) -> npt.NDArray[np.int32]: ...
    @property
    def labels_codes(self) -> npt.NDArray[np.int32]: ...
    @property
    def sites(self) -> list[str]: ...
    @property
    def nodes(self) -> list[str]: ...
    @property
    def devices(self) -> list[str]: ...
    @property
    def metrics(self) -> list[str]: ...
    @property
    def label_texts(self) -> list[str]: ...
    @property
    def report(self) -> FetchReport: ...
    @property
    def complete(self) -> bool: ...
    def rows_by_node(self, nodes: Sequence[str]) -> dict[str, list[ApiRow]]: ...


class OutputFile:
    """How a file kwatt was asked to write is written: a regular file under a temporary name
    renamed once whole, a device or FIFO written through."""
    @staticmethod
    def plan(path: str, inputs: Sequence[str] = ...) -> "OutputFile": ...
    @property
    def write_path(self) -> str: ...
    @property
    def replaces(self) -> bool: ...
    def commit(self) -> None: ...
    def abandon(self) -> None: ...


def fetch(client: Client, *, nodes: Sequence[str], start: Optional[int], end: Optional[int],
          job: Job, metrics: Sequence[str], summary: bool, progress: Progress,
          check_metrics: bool = True, as_rate: bool = False) -> Table: ...
def load(dir: str, *, nodes: Sequence[str], metrics: Sequence[str], start: Optional[int],
         end: Optional[int], allow_incomplete: bool, threads: int) -> Table: ...
def backup(client: Client, dir: str, *, nodes: Sequence[str], start: Optional[int],
           end: Optional[int], job: Job, metrics: Sequence[str], summary: bool,
           progress: Progress) -> BackupOutcome: ...
class Selection:
    """What energy() and stats() read (python/bindings/energy.cc): an archive directory, else a
    query of the client over nodes and a window (int ns) or a job; with_archives: other archives
    of the same nodes read with it."""
    archive: Optional[str]
    nodes: list[str]
    start: Optional[int]
    end: Optional[int]
    job: Optional[tuple[str, int]]
    with_archives: list[str]
    def __init__(self, *, archive: Optional[str] = None, nodes: Sequence[str] = ...,
                 start: Optional[int] = None, end: Optional[int] = None, job: Job = None,
                 with_archives: Sequence[str] = ...) -> None: ...


class EnergyOptions:
    """How energy() computes: phases (name, start ns, end ns), roles (name, [FQDN]), the power
    metric ("": each node's best), the baseline phase, the gap factor, stated accuracies
    METRIC=P%+WW, the clock offset in seconds."""
    phases: list[tuple[str, int, int]]
    roles: list[tuple[str, list[str]]]
    metric: str
    baseline: str
    gap_factor: float
    accuracies: list[str]
    clock_offset: float
    def __init__(self, *, phases: Phases = ..., roles: Roles = ..., metric: str = "",
                 baseline: str = "", gap_factor: float = ..., accuracies: Sequence[str] = ...,
                 clock_offset: float = ...) -> None: ...


def energy(client: Client, selection: Selection, options: EnergyOptions, *,
           progress: Progress = None) -> EnergyReport: ...
def stats(client: Client, selection: Selection, *, metrics: Sequence[str], phases: Phases,
          roles: Roles, progress: Progress = None) -> StatsReport: ...
def look_up_nodes(client: Client, names: Sequence[str]) -> NodesLookedUp: ...
def resolve(client: Client, *, nodes: Sequence[str], start: Optional[int], end: Optional[int],
            job: Job) -> FetchReport: ...
class Catalogue:
    @staticmethod
    def from_json(text: str) -> Catalogue: ...
    @property
    def json(self) -> str: ...
    def __len__(self) -> int: ...
def catalogue_metrics(catalogue: Catalogue, uid: str,
                      job_types: Sequence[str] = ...) -> list[MetricDescription]: ...
def power_sources(*, nodes: Sequence[str], metrics: Sequence[str], labels: Sequence[str],
                  times: npt.ArrayLike, values: npt.ArrayLike, start: int, end: int,
                  metric: str = "") -> dict[str, Optional[str]]: ...
def power_metrics() -> list[str]: ...
DEFAULT_CLOCK_OFFSET: float
FigureRow = tuple[str, str, str, float, float, float]
# Columns, each a list (text, bool) or a float64 array, named as the frames name them.
Columns = dict[str, Any]
def runs_summary(runs: Sequence[Sequence[FigureRow]], *, confidence: float) -> Columns: ...
def compare_runs(a: Sequence[Sequence[FigureRow]], b: Sequence[Sequence[FigureRow]], *,
                 confidence: float) -> Columns: ...
def node_fqdn(name: str) -> str: ...
def parse_time(text: str) -> int: ...
def url_without_credentials(url: str) -> str: ...
def format_paris(t: int) -> str: ...
def read_manifest(dir: str) -> dict[str, Any]: ...


class ReportRequest:
    """What kwatt.report() asks of the core (python/bindings/report.cc): each field as `kwatt
    report`'s option. nodes are checked names (a wrong one raises InvalidArgumentError); start and
    end narrow each run's window (int ns); phases NAME=+A..+B or NAME=START..END; roles
    NAME=NODE,NODE; accuracies METRIC=P%+WW."""
    runs: list[str]
    versus: list[str]
    api: str
    config: str
    confidence: float
    carbon_intensity: str
    carbon_source: str
    pue: float
    pue_source: str
    title: str
    nodes: list[str]
    start: Optional[int]
    end: Optional[int]
    summary: bool
    phases: list[str]
    roles: list[str]
    metric: str
    accuracies: list[str]
    clock_offset: float
    gap_factor: float
    with_archives: list[str]
    def __init__(self) -> None: ...
    def command(self, output: str) -> list[str]: ...


class ReportWritten:
    """What write_report() wrote: the directory, its runs, whether every run was read whole,
    whether the figures were drawn (and why not, when asked)."""
    @property
    def dir(self) -> str: ...
    @property
    def runs(self) -> int: ...
    @property
    def complete(self) -> bool: ...
    @property
    def figures(self) -> bool: ...
    @property
    def figures_error(self) -> Optional[str]: ...
    @property
    def failures(self) -> list[tuple[str, list[FetchFailure]]]: ...


def write_report(request: ReportRequest, output: str, *, client: Client,
                 draw: Optional[Callable[[str], Any]],
                 progress: Progress = None) -> ReportWritten: ...


class Meter:
    """The power meter (kwatt.measure's engine, python/bindings/meter.cc): opened from a dict of
    options (those of kwatt.measure), everything checked before it starts."""
    def __init__(self, config: dict[str, Any]) -> None: ...
    def start(self) -> None:
        """Takes the first reading and starts the meter's threads."""
    def stop(self) -> MeterResult:
        """Stops (the last interval ends now); returns header, samples (numpy columns), totals,
        health and error."""
    def header(self) -> MeterHeader:
        """Sensor, domains, notes, warnings, the metrics URL."""
