"""pandas views of kwatt's columnar tables, and kwatt.load(DIR) for archives."""

import os

import numpy as np
import pandas as pd

from . import _core
from ._convert import fqdn, host_list, to_ns
from .errors import IncompleteError

COLUMNS = ["timestamp", "site", "node", "device_id", "metric_id", "value", "labels"]


def _categorical(codes, categories):
    return pd.Categorical.from_codes(codes, categories=pd.Index(categories, dtype=object))


def table_frame(table):
    """The DataFrame of a _core.Table: timestamp (UTC-aware datetime64[ns]), site, node,
    device_id, metric_id (categoricals), value (float64; NaN for null and "NaN"), labels (the
    labels object's compact JSON text, as a categorical: `json.loads` it for a dict)."""
    timestamp = pd.DatetimeIndex(table.time.view("datetime64[ns]")).tz_localize("UTC")
    frame = pd.DataFrame({
        "timestamp": timestamp,
        "site": _categorical(table.site_codes, table.sites),
        "node": _categorical(table.node_codes, table.nodes),
        "device_id": _categorical(table.device_codes, table.devices),
        "metric_id": _categorical(table.metric_codes, table.metrics),
        "value": np.asarray(table.value, dtype=np.float64),
        "labels": _categorical(table.labels_codes, table.label_texts),
    })
    return frame


def load(directory, nodes=None, metrics=None, start=None, end=None, allow_incomplete=False,
         threads=0):
    """Loads an archive written by `kwatt backup` (or Kwollect.backup) as a DataFrame.

    nodes: names or EnOSlib Hosts whose rows to read (default: all); metrics: metric ids;
    start, end: instants bounding the rows (inclusive). An incomplete archive raises
    IncompleteError (its ``partial`` holds the committed rows) unless allow_incomplete.
    Every byte read is checked: a damaged archive raises CorruptionError naming the file.
    """
    directory = os.fspath(directory)
    names = [fqdn(h) for h in host_list(nodes)]
    table = _core.load(directory, names, list(metrics or []), to_ns(start, "start"),
                       to_ns(end, "end"), True, int(threads))
    frame = table_frame(table)
    frame.attrs["kwatt"] = {"archive": directory, "complete": table.complete,
                            "window": (table.report["start"], table.report["end"])}
    if not table.complete and not allow_incomplete:
        raise IncompleteError(
            f"{directory} is an incomplete archive (a backup that stopped before its end): run "
            "the same backup again to complete it, or pass allow_incomplete=True to read what it "
            "holds", partial=frame)
    return frame


def manifest(directory):
    """What an archive's manifest says (window, nodes, rows per metric, completeness)."""
    return _core.read_manifest(os.fspath(directory))
