"""kwatt's exceptions: one class per kind of failure, all subclasses of KwattError.

Each also derives from the built-in exception a Python user would catch for it
(ValueError for bad arguments, LookupError for unknown nodes, sites, jobs or files,
OSError for the file system, ConnectionError for an API that is down...).
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Optional

if TYPE_CHECKING:
    from .documents import FetchFailure


class KwattError(Exception):
    """Any error kwatt reports."""


class InvalidArgumentError(KwattError, ValueError):
    """An argument is wrong (a time, a node name, an option); the message names it."""


class NotFoundError(KwattError, LookupError):
    """A named thing does not exist: site, cluster, node, job, archive, metric."""


class CorruptionError(KwattError):
    """Stored or received data is damaged; the message names the file or request."""


class KwattIOError(KwattError, OSError):
    """The operating system refused (a file that cannot be read or written)."""


class UnavailableError(KwattError, ConnectionError):
    """The API could not be reached or kept failing (5xx, refused, cut)."""


class AuthenticationError(KwattError, PermissionError):
    """Credentials are missing or were refused."""


class KwattPermissionError(KwattError, PermissionError):
    """The system refused for want of a permission; the message names the one to grant
    (a root-only file, perf_event_paranoid, a capability)."""


class IncompleteError(KwattError):
    """An operation stopped before its end: some pieces could not be fetched.

    Nothing is lost: ``partial`` holds what was obtained (the object the call
    would have returned), ``failures`` the pieces that failed, each a dict with
    site, nodes, start, end (ns), metrics and error.
    """

    def __init__(self, message: str, partial: Any = None,
                 failures: Optional[list[FetchFailure]] = None) -> None:
        super().__init__(message)
        # What the call would have returned: rows by node, a DataFrame, a report, a directory.
        self.partial: Any = partial
        self.failures: list[FetchFailure] = failures or []


class DeployError(KwattError, ValueError):
    """deploy() found nodes Kwollect cannot serve; ``problems`` maps each to why."""

    def __init__(self, message: str, problems: dict[str, str]) -> None:
        super().__init__(message)
        self.problems: dict[str, str] = problems
