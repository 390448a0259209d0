"""An archive's rows as a Parquet file, written in bounded memory (`python -m kwatt export`).

The archive is read piece by piece by the C++ core (kwatt._core.load): each node's file alone, in
time slices of about `rows_per_read` rows by the manifest's counts, and then the rows of other
devices (the _other.<site> files) in time slices. Each piece becomes Parquet row groups of at most
`rows_per_group` rows before the next is read, so memory holds one piece (and the compressed file
it comes from) and one row group being encoded, whatever the size of the archive: about 140 bytes
per row read, some 130 MB with the defaults. The price: the core decompresses a node's whole file
for each of its slices (it selects frames by file, not by time), so a node file of many times
`rows_per_read` rows is decompressed that many times; a streaming reader in kwatt._core (the C++
ArchiveReader) would remove both. The rows are kwatt.load()'s with the same filters, in its
order: node files in manifest order, each in time order, then other devices'.

Every row group has one schema: the columns of kwatt.load(), the text ones dictionary-encoded
with int32 codes (each row group has its own dictionaries).
"""

from __future__ import annotations

import glob
import math
import os
from typing import IO, Any, Iterable, Mapping, Optional, Union

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.parquet as pq

from . import _core
from ._convert import Path
from .frames import manifest as read_manifest

# Rows of a Parquet row group (DuckDB writes 122,880): what pyarrow's writer buffers, encoded.
ROWS_PER_GROUP = 1 << 17
# Rows read from the archive at once, about: each slice of a node's file decompresses it whole.
ROWS_PER_READ = 1 << 20
# Before any instant: a selection with start = end = this reads no row (the core still checks
# the archive, its nodes and metrics).
_BEFORE_ALL = -2**63

_TEXT = pa.dictionary(pa.int32(), pa.string())
SCHEMA = pa.schema([("timestamp", pa.timestamp("ns", tz="UTC")), ("site", _TEXT),
                    ("node", _TEXT), ("device_id", _TEXT), ("metric_id", _TEXT),
                    ("value", pa.float64()), ("labels", _TEXT)])


class _File:
    """A data file as the export plans its pieces: its node (None: other devices), the rows it
    holds for the selection (an estimate for an incomplete archive) and the span of its rows
    (ns, inclusive; None when unknown)."""

    def __init__(self, node: Optional[str], rows: int, first: Optional[int],
                 last: Optional[int]) -> None:
        self.node, self.rows, self.first, self.last = node, rows, first, last


def _instant(text: Optional[str]) -> Optional[int]:
    return None if not text else int(_core.parse_time(text))


def _files(directory: str, manifest: Mapping[str, Any], metrics: list[str]) -> list[_File]:
    """The archive's data files in manifest order."""
    if manifest["complete"]:
        files = []
        for f in manifest["files"]:
            rows = f["rows"]
            if metrics and f.get("metrics"):
                rows = sum(f["metrics"].get(m, 0) for m in metrics)
            files.append(_File(f.get("node"), rows, _instant(f.get("first")),
                               _instant(f.get("last"))))
        return files
    # Incomplete: manifest.json was written when the backup started; what is committed is in the
    # journal, which the core reads (manifest["rows"]). Each file's share is taken by its size on
    # disk, its span is the window: estimates, which only size the pieces.
    paths = [(n["node"], os.path.join(directory, n["file"])) for n in manifest["nodes"]]
    paths += [(None, p) for p in sorted(glob.glob(os.path.join(directory, "data",
                                                               "_other.*.jsonl.zst")))]
    sizes = [os.path.getsize(p) if os.path.exists(p) else 0 for _, p in paths]
    window = manifest.get("window") or {}
    first, last = window.get("start_ns"), window.get("end_ns")
    total = sum(sizes) or 1
    return [_File(node, manifest["rows"] * size // total, first, last)
            for (node, _), size in zip(paths, sizes)]


# A time slice: (start, end) in ns, inclusive; None: open.
_Slice = tuple[Optional[int], Optional[int]]


def _slices(rows: int, first: Optional[int], last: Optional[int], start: Optional[int],
            end: Optional[int], rows_per_read: int) -> list[_Slice]:
    """[(start, end)] (ns, inclusive; None: open) cutting [first, last] ∩ [start, end] into time
    slices of about rows_per_read rows each, rows spread evenly over [first, last]. The first
    slice begins at `start` and the last ends at `end`, so that together they cover every row
    the selection keeps, wherever the estimates are wrong."""
    if first is None or last is None or last <= first:
        return [(start, end)]
    low = first if start is None else max(first, start)
    high = last if end is None else min(last, end)
    if high < low:
        return []
    selected = rows * (high - low + 1) / (last - first + 1)
    count = min(math.ceil(selected / rows_per_read), high - low + 1)
    if count <= 1:
        return [(start, end)]
    cuts = [low + (high - low + 1) * i // count for i in range(1, count)]
    return list(zip([start, *cuts], [*(c - 1 for c in cuts), end]))


def _arrow(table: _core.Table, keep: Optional[npt.NDArray[np.bool_]] = None) -> pa.Table:
    """A pyarrow Table (SCHEMA) of a _core.Table's rows, those `keep` (booleans) selects."""
    def text(codes: npt.NDArray[np.int32], names: list[str]) -> pa.DictionaryArray:
        return pa.DictionaryArray.from_arrays(pa.array(codes, pa.int32()),
                                              pa.array(names, pa.string()))
    out = pa.Table.from_arrays([
        pa.array(table.time.view("datetime64[ns]"), pa.timestamp("ns", tz="UTC")),
        text(table.site_codes, table.sites), text(table.node_codes, table.nodes),
        text(table.device_codes, table.devices), text(table.metric_codes, table.metrics),
        pa.array(table.value, pa.float64(), from_pandas=True),  # NaN as null, as pandas writes
        text(table.labels_codes, table.label_texts)], schema=SCHEMA)
    return out if keep is None else out.filter(pa.array(keep))


class _CountingFile:
    """A file written from its start to its end that tells its position by counting what was
    written: Parquet's writer asks for it, which a FIFO or a device cannot answer."""

    def __init__(self, raw: IO[bytes]) -> None:
        self._raw = raw
        self._written = 0
        self.closed = False

    def write(self, data: bytes) -> int:
        self._raw.write(data)
        self._written += len(data)
        return len(data)

    def tell(self) -> int:
        return self._written

    def flush(self) -> None:
        self._raw.flush()

    def writable(self) -> bool:
        return True

    def close(self) -> None:
        self.closed = True


class ParquetExport:
    """The export of an archive's selected rows, planned: the archive, its nodes and metrics are
    checked when it is made (kwatt.load()'s errors: NotFoundError, IncompleteError,
    CorruptionError...), and write() writes them.

    nodes: FQDNs or other node names (default: every file, other devices' too); metrics: ids;
    start, end: ns (inclusive); rows_per_read: about the most rows read at once;
    rows_per_group: the most rows of a Parquet row group."""

    def __init__(self, directory: Path, *, nodes: Iterable[str] = (),
                 metrics: Iterable[str] = (), start: Optional[int] = None,
                 end: Optional[int] = None, allow_incomplete: bool = False,
                 rows_per_read: int = ROWS_PER_READ, rows_per_group: int = ROWS_PER_GROUP
                 ) -> None:
        self.directory = os.fspath(directory)
        self._metrics = list(metrics)
        self._allow_incomplete = allow_incomplete
        self.rows_per_group = rows_per_group
        nodes = list(nodes)
        self._load(nodes, _BEFORE_ALL, _BEFORE_ALL)  # everything checked, no row read
        manifest = read_manifest(self.directory)
        self.complete = bool(manifest["complete"])
        self._archive_nodes = {n["node"] for n in manifest["nodes"]}
        files = _files(self.directory, manifest, self._metrics)
        wanted = {_core.node_fqdn(n) for n in nodes}
        # (nodes to load, start, end, whether to keep the rows of other devices only)
        self.pieces = []
        for f in files:
            if f.node is None or (wanted and f.node not in wanted):
                continue
            if self.complete and f.rows == 0:
                continue  # nothing of the selection in it
            self.pieces += [([f.node], a, b, False)
                            for a, b in _slices(f.rows, f.first, f.last, start, end,
                                                rows_per_read)]
        others = [f for f in files if f.node is None and not (self.complete and f.rows == 0)]
        if others and not wanted:
            # Read with every file's rows over the same times (the core selects files by node
            # only): slices sized by the rows of the whole archive, within the span of theirs
            # (exact in a complete archive; an estimate otherwise, so open-ended there).
            # In a complete archive, a file with rows has its first and last (checked on reading).
            first = min(f.first for f in others if f.first is not None) if self.complete else None
            last = max(f.last for f in others if f.last is not None) if self.complete else None
            low = first if start is None or first is None else max(first, start)
            high = last if end is None or last is None else min(last, end)
            if low is None or high is None or low <= high:
                rows = sum(f.rows for f in files)
                span = (first, last) if self.complete else (files[0].first, files[0].last)
                self.pieces += [([], a, b, True)
                                for a, b in _slices(rows, *span, low, high, rows_per_read)]

    def _load(self, nodes: list[str], start: Optional[int], end: Optional[int]) -> _core.Table:
        return _core.load(self.directory, nodes=nodes, metrics=self._metrics, start=start,
                          end=end, allow_incomplete=self._allow_incomplete, threads=0)

    def write(self, sink: Union[str, _CountingFile]) -> int:
        """Writes the rows to `sink` (a path, or a binary file object written in order, which
        _CountingFile makes of a FIFO's) piece after piece; returns how many."""
        rows = 0
        with pq.ParquetWriter(sink, SCHEMA) as writer:
            for nodes, start, end, others_only in self.pieces:
                table = self._load(nodes, start, end)
                keep = None
                if others_only:
                    foreign = np.array([n not in self._archive_nodes for n in table.nodes],
                                       dtype=bool)
                    keep = foreign[table.node_codes]
                piece = _arrow(table, keep)
                del table
                if piece.num_rows:
                    writer.write_table(piece, row_group_size=self.rows_per_group)
                    rows += piece.num_rows
                del piece
                # The next piece is read by the C++ core: what Arrow's allocator keeps of this
                # one is given back to the system first.
                pa.default_memory_pool().release_unused()
        return rows
