"""kwatt: the energy and the metrics of Grid'5000 experiments, from Kwollect.

    import kwatt
    k = kwatt.Kwollect(roles=roles["compute"])   # EnOSlib hosts, or nodes=["nova-1.lyon", ...]
    k.deploy(); k.start(); ...; k.stop()
    data = k.get_metrics(metrics=["wattmetre_power_watt"])   # {node: [row dicts]}
    df = k.to_pandas()                                       # one DataFrame
    k.energy()                                               # energy per node, role, phase
    k.backup("my_experiment"); kwatt.load("my_experiment")   # lossless archive, and back

The work is done by kwatt's C++ core (kwatt._core); see doc/python.md.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from . import _core
from .errors import (AuthenticationError, CorruptionError, DeployError, IncompleteError,
                     InvalidArgumentError, KwattError, KwattIOError, KwattPermissionError,
                     NotFoundError, UnavailableError)
from .frames import (compare_runs, energy_frame, load, manifest, runs_summary, source_checks_frame,
                     stats_frame, table_frame)
from .measure import Measurement, measure
from .report import report

__version__: str = _core.__version__

if TYPE_CHECKING:  # what __getattr__ gives, as type checkers should see it
    from . import service
    from .service import Kwollect


def __getattr__(name: str) -> Any:
    # kwatt.Kwollect subclasses EnOSlib's Service, and importing EnOSlib takes time (and Ansible):
    # it is imported when Kwollect is first used, not by `import kwatt` (kwatt.load needs none).
    if name == "Kwollect":
        from .service import Kwollect
        return Kwollect
    if name == "service":
        from . import service
        return service
    raise AttributeError(f"module 'kwatt' has no attribute {name!r}")

__all__ = [
    "Kwollect", "measure", "Measurement", "load", "manifest", "table_frame", "energy_frame",
    "source_checks_frame", "stats_frame", "runs_summary", "compare_runs", "report",
    "KwattError", "InvalidArgumentError", "NotFoundError", "CorruptionError", "KwattIOError",
    "UnavailableError", "AuthenticationError", "KwattPermissionError", "IncompleteError",
    "DeployError",
]
