"""Conversions between what users pass and what the C++ core takes: instants, nodes, options."""

import datetime as _dt
import math
import numbers
import os
import re

from . import _core
from .errors import InvalidArgumentError

_EPOCH = _dt.datetime(1970, 1, 1, tzinfo=_dt.timezone.utc)


def to_ns(value, what="time"):
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


def _to_ns(value, what):
    if isinstance(value, bool):
        raise InvalidArgumentError(f"{what}: {value!r} is not an instant")
    if hasattr(value, "value") and hasattr(value, "tz_localize"):  # pandas.Timestamp
        if value.tzinfo is None:
            return _local_ns(value.isoformat(), what)
        return int(value.value)
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


def _local_ns(text, what):
    """A local wall-clock time (ISO 8601 text without an offset) read by the C++ core."""
    try:
        return int(_core.parse_time(text))
    except InvalidArgumentError as e:
        raise InvalidArgumentError(f"{what}: {e}") from None


def node_name(host):
    """The FQDN of a node given as an EnOSlib Host (or any object with .address, or .alias),
    or a name: FQDN, KaVLAN or IPv6 name, uid.site."""
    name = host
    if not isinstance(host, str):
        name = getattr(host, "address", None) or getattr(host, "alias", None)
        if not isinstance(name, str):
            raise InvalidArgumentError(
                f"{host!r} is not a node: give an EnOSlib Host, an object with .address, or a "
                "name like nova-1.lyon.grid5000.fr")
    return name


def fqdn(host):
    return _core.node_fqdn(node_name(host))


def _natural_key(host):
    """nova-2 before nova-10: (site, cluster, number) of a node name."""
    name = node_name(host)
    uid, _, site = name.partition(".")
    match = re.fullmatch(r"(.*?)-(\d+)(-.*)?", uid)
    if match:
        return (site, match.group(1), int(match.group(2)), name)
    return (site, uid, 0, name)


def host_list(hosts):
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
    return sorted(hosts, key=_natural_key)


def role_map(roles):
    """{role name: [FQDN]} of an EnOSlib Roles (or a dict of host lists); {} for a list."""
    if roles is None or isinstance(roles, str) or not (
            hasattr(roles, "keys") and hasattr(roles, "__getitem__")):
        return {}
    return {str(role): unique(fqdn(h) for h in host_list(roles[role])) for role in roles.keys()}


def unique(items):
    seen, out = set(), []
    for item in items:
        if item not in seen:
            seen.add(item)
            out.append(item)
    return out


def path_list(paths):
    """Paths as strings, from one path (str or os.PathLike) or an iterable of them; [] for None."""
    if paths is None:
        return []
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    return [os.fspath(p) for p in paths]
