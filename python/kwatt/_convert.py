"""Conversions between what users pass and what the C++ core takes: instants, nodes, options.

It also names the types of what users pass (Instant, Host, Hosts, Phases, Paths, Progress,
ClientOptions), which the public API's annotations use."""
from __future__ import annotations

import datetime as _dt
import math
import numbers
import os
import re
import sys
from typing import (TYPE_CHECKING, Any, Callable, Iterable, Mapping, Optional, Protocol,
                    TypedDict, TypeVar, Union, cast, overload)

import numpy as np

from . import _core
from .errors import InvalidArgumentError

if TYPE_CHECKING:
    import pandas as pd


class _Addressed(Protocol):
    """An EnOSlib Host, or any object with the node's name as `.address`."""

    @property
    def address(self) -> Optional[str]: ...


class _Aliased(Protocol):
    """Any object with the node's name as `.alias`."""

    @property
    def alias(self) -> Optional[str]: ...


# An instant: epoch seconds (int, float, numpy integers and floats), a datetime (pandas'
# Timestamp is one), or a text ("now", epoch seconds, ISO 8601). numpy's datetime64 is refused.
Instant = Union[int, float, str, _dt.datetime, np.integer[Any], np.floating[Any]]
# A node: its name, an EnOSlib Host, or an object with .address or .alias.
Host = Union[str, _Addressed, _Aliased]
# Some nodes: one, a collection of them (EnOSlib's roles["compute"]), or an EnOSlib Roles
# (role name -> hosts).
HostGroup = Union[Host, Iterable[Host]]
Hosts = Union[HostGroup, Mapping[str, HostGroup]]
# Phases: {name: (start, end)} or [(name, start, end)].
Phases = Union[Mapping[str, tuple[Instant, Instant]], Iterable[tuple[str, Instant, Instant]]]
# One path or several (None: none).
Path = Union[str, "os.PathLike[str]"]
Paths = Union[Path, Iterable[Path], None]
# What a progress function receives: requests_done, requests_total, rows, bytes, seconds.
ProgressFunction = Callable[[dict[str, float]], object]
# progress=: True (a line on stderr), False (none), None (the default), or a function.
Progress = Union[bool, None, ProgressFunction]


class ClientOptions(TypedDict, total=False):
    """The Kwollect client's options (kwatt.Kwollect's **client_options; doc/fetch.md), each None
    for its default."""
    concurrency: Optional[int]
    per_site: Optional[int]
    rows_per_request: Optional[int]
    retries: Optional[int]
    backoff: Optional[float]
    timeout: Optional[float]
    connect_timeout: Optional[float]
    verify_tls: Optional[bool]
    ca_file: Optional[str]
    username: Optional[str]
    password: Optional[str]


class KwollectClientOptions(ClientOptions, total=False):
    """The client options of kwatt.Kwollect, with what its api= and config= give (those
    kwatt._core.Client takes)."""
    api_url: Optional[str]
    config: Optional[str]


_T = TypeVar("_T")

_EPOCH = _dt.datetime(1970, 1, 1, tzinfo=_dt.timezone.utc)


@overload
def to_ns(value: None, what: str = ...) -> None: ...


@overload
def to_ns(value: Instant, what: str = ...) -> int: ...


def to_ns(value: Optional[Instant], what: str = "time") -> Optional[int]:
    """Nanoseconds since the epoch (UTC) of an instant given as epoch seconds (int or float,
    as time.time() gives), a datetime (naive ones are in the machine's local time), a pandas
    Timestamp, or a text ("now", epoch seconds, ISO 8601; without an offset: local time). None
    stays None. A numpy datetime64 is refused: it has no time zone, and numpy and pandas read it
    differently (give a Timestamp with its tz).

    Naive datetimes and Timestamps are read by the C++ core's rule for local times, as texts
    without an offset are (one algorithm): a local time that does not exist (spring forward) or
    happens twice (autumn) is refused with InvalidArgumentError naming both readings."""
    if value is None:
        return None
    ns = _to_ns(value, what)
    if not -2**63 <= ns < 2**63:
        # As the C++ parsers say it (kwatt::OutOfRange): int64 nanoseconds hold no more.
        raise InvalidArgumentError(f"{what}: {value!r} is outside the times kwatt handles "
                                   "(1677-09-21 .. 2262-04-11)")
    return ns


def _to_ns(value: object, what: str) -> int:
    if isinstance(value, bool):
        raise InvalidArgumentError(f"{what}: {value!r} is not an instant")
    if hasattr(value, "value") and hasattr(value, "tz_localize"):  # pandas.Timestamp
        stamp = cast("pd.Timestamp", value)
        if stamp.tzinfo is None:
            return _local_ns(stamp.isoformat(), what)
        return int(stamp.value)
    if isinstance(value, _dt.datetime):
        if value.tzinfo is None:
            return _local_ns(value.isoformat(), what)
        delta = value - _EPOCH
        return (delta.days * 86400 + delta.seconds) * 1_000_000_000 + delta.microseconds * 1000
    if type(value).__name__ == "datetime64":
        # No time zone, and two readings in common use: numpy's own (UTC: what a frame column's
        # .values gives, kwatt's frames being UTC) and pandas' (pandas.Timestamp(it) is naive:
        # local time, as kwatt reads naive datetimes). Either would be silently wrong for the
        # other: refused, saying how to be explicit.
        raise InvalidArgumentError(
            f"{what}: {value!r} is a numpy datetime64, which has no time zone (numpy reads it as "
            "UTC, pandas.Timestamp of it as local time): give pandas.Timestamp(value, tz='UTC') "
            "when it came from a frame's .values (kwatt's timestamps are UTC), or a datetime "
            "or Timestamp with its time zone")
    if isinstance(value, numbers.Integral):
        return int(value) * 1_000_000_000
    if isinstance(value, numbers.Real):
        if not math.isfinite(float(value)):
            raise InvalidArgumentError(f"{what}: {value!r} is not an instant")
        # Kwollect's resolution is the microsecond: 1732630000.123456 stays exact.
        return int(round(float(value) * 1e6)) * 1000
    if isinstance(value, str):
        try:
            return int(_core.parse_time(value))
        except InvalidArgumentError as e:
            raise InvalidArgumentError(f"{what}: {e}") from None
    raise InvalidArgumentError(
        f"{what}: {value!r} is not an instant (give epoch seconds, a datetime or an ISO 8601 text)")


def _local_ns(text: str, what: str) -> int:
    """A local wall-clock time (ISO 8601 text without an offset) read by the C++ core."""
    try:
        return int(_core.parse_time(text))
    except InvalidArgumentError as e:
        raise InvalidArgumentError(f"{what}: {e}") from None


def node_name(host: Host) -> str:
    """The FQDN of a node given as an EnOSlib Host (or any object with .address, or .alias),
    or a name: FQDN, KaVLAN or IPv6 name, uid.site."""
    if isinstance(host, str):
        return host
    name = getattr(host, "address", None) or getattr(host, "alias", None)
    if not isinstance(name, str):
        raise InvalidArgumentError(
            f"{host!r} is not a node: give an EnOSlib Host, an object with .address, or a "
            "name like nova-1.lyon.grid5000.fr")
    return name


def fqdn(host: Host) -> str:
    return _core.node_fqdn(node_name(host))


def _natural_key(host: Host) -> tuple[str, str, int, str]:
    """nova-2 before nova-10: (site, cluster, number) of a node name."""
    name = node_name(host)
    uid, _, site = name.partition(".")
    match = re.fullmatch(r"(.*?)-(\d+)(-.*)?", uid)
    if match:
        return (site, match.group(1), int(match.group(2)), name)
    return (site, uid, 0, name)


def host_list(hosts: Optional[Hosts]) -> list[Host]:
    """A flat list of hosts from an EnOSlib Roles (every role's hosts), a list or a single one.

    Lists and tuples keep their order. Other collections (EnOSlib's role views are sets, whose
    order changes from one process to the next) are sorted by site, cluster and node number, so
    that the same Roles always give the same nodes in the same order (and the same backup)."""
    if hosts is None:
        return []
    if isinstance(hosts, str) or not hasattr(hosts, "__iter__"):
        return [hosts]
    if hasattr(hosts, "keys") and hasattr(hosts, "__getitem__"):  # Roles: role -> hosts
        out = []
        for role in hosts.keys():
            out.extend(host_list(hosts[role]))
        return out
    if isinstance(hosts, (list, tuple)):
        return list(hosts)
    # A collection that is neither a list nor a mapping (a set, EnOSlib's role views).
    return sorted(cast("Iterable[Host]", hosts), key=_natural_key)


def role_map(roles: Optional[Hosts]) -> dict[str, list[str]]:
    """{role name: [FQDN]} of an EnOSlib Roles (or a dict of host lists); {} for a list."""
    if roles is None or isinstance(roles, str) or not (
            hasattr(roles, "keys") and hasattr(roles, "__getitem__")):
        return {}
    return {str(role): unique(fqdn(h) for h in host_list(roles[role])) for role in roles.keys()}


def unique(items: Iterable[_T]) -> list[_T]:
    seen: set[_T] = set()
    out: list[_T] = []
    for item in items:
        if item not in seen:
            seen.add(item)
            out.append(item)
    return out


def path_list(paths: Paths) -> list[str]:
    """Paths as strings, from one path (str or os.PathLike) or an iterable of them; [] for None."""
    if paths is None:
        return []
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    return [os.fspath(p) for p in paths]


def _progress_printer(verb: str) -> ProgressFunction:
    """A progress function printing one line, rewritten in place, on stderr."""
    state = {"shown": False}

    def show(p: dict[str, float]) -> None:
        total = max(p["requests_total"], 1)
        line = (f"\r{verb}: {p['requests_done']}/{total} requests, {p['rows']:,} rows, "
                f"{p['bytes'] / 1e6:.1f} MB, {p['seconds']:.1f} s")
        if p["seconds"] >= 1 or state["shown"]:
            sys.stderr.write(line)
            sys.stderr.flush()
            state["shown"] = True
            if p["requests_done"] >= total:
                sys.stderr.write("\n")
                state["shown"] = False
    return show


def _client(api: Optional[str], config: Optional[Path],
            client_options: ClientOptions) -> _core.Client:
    """The C++ client's options (kwatt._core.Client, checked once: a wrong one raises
    InvalidArgumentError here) from api=, config= and the client options."""
    client: KwollectClientOptions = {
        **client_options, "api_url": None if api is None else str(api),
        "config": None if config is None else os.fspath(config)}  # None: the default
    return _core.Client(client)
