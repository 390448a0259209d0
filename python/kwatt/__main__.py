"""python -m kwatt export DIR --to parquet -o PATH: an archive's rows as a Parquet file; python -m
kwatt report-figures DIR: the figures of `kwatt report` (kwatt.report_figures).

`kwatt export --to parquet` runs this (the C++ CLI has no Parquet writer: pyarrow is the well-kept
one, and it comes with the Python package). The columns are those of kwatt.load(): timestamp
(UTC, ns), site, node, device_id, metric_id (dictionary-encoded), value (double), labels (the
labels object's JSON text, dictionary-encoded). The archive is read and written piece by piece
(kwatt._parquet): memory does not grow with the archive. A regular file is written under a
temporary name and renamed once whole (a damaged archive never leaves a shorter file that looks
finished); a device or a FIFO is written through, never replaced: the C++ core's OutputFile
decides, as for `kwatt export --to csv`.
"""

from __future__ import annotations

import argparse
import sys
from typing import Optional, Sequence

from . import _core
from ._convert import to_ns
from .errors import IncompleteError, KwattError


def _rows(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value <= 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive number of rows")
    return value


def _export(args: argparse.Namespace) -> int:
    if args.to != "parquet":
        print("python -m kwatt export: only --to parquet here; CSV: kwatt export --to csv",
              file=sys.stderr)
        return 2
    try:
        from ._parquet import ParquetExport, _CountingFile
    except ImportError as e:
        print(f"kwatt export: Parquet is written by pyarrow, which is not installed ({e}): pip "
              "install 'kwatt[parquet]'", file=sys.stderr)
        return 1
    options = {name: getattr(args, name) for name in ("rows_per_read", "rows_per_group")
               if getattr(args, name) is not None}

    def split(text: Optional[str]) -> list[str]:
        return [s.strip() for s in text.split(",") if s.strip()] if text else []

    try:
        export = ParquetExport(args.dir, nodes=split(args.nodes), metrics=split(args.metrics),
                               start=to_ns(args.start, "--start"), end=to_ns(args.end, "--end"),
                               allow_incomplete=args.allow_incomplete, **options)
    except IncompleteError as e:
        print(f"kwatt export: {e}", file=sys.stderr)
        return 1
    except KwattError as e:
        print(f"kwatt export: {e}", file=sys.stderr)
        return 2 if isinstance(e, ValueError) else 1
    try:
        target = _core.OutputFile.plan(args.output, [args.dir])  # never into the archive read
    except KwattError as e:
        print(f"kwatt export: -o: {e}", file=sys.stderr)
        return 2 if isinstance(e, ValueError) else 1
    try:
        if target.replaces:
            rows = export.write(target.write_path)
        else:  # a device or a FIFO: written in order, its position counted (it cannot seek)
            with open(target.write_path, "wb") as out:
                rows = export.write(_CountingFile(out))
        target.commit()
    except KwattError as e:  # a data file found damaged while it was read
        target.abandon()
        print(f"kwatt export: {e}", file=sys.stderr)
        return 1
    except BaseException:
        target.abandon()
        raise
    if not export.complete:
        print(f"kwatt export: WARNING: {args.dir} is INCOMPLETE: wrote only the rows its "
              "interrupted backup committed", file=sys.stderr)
    print(f"kwatt export: {rows} rows to {args.output}", file=sys.stderr)
    return 0


def _report_figures(args: argparse.Namespace) -> int:
    try:
        from .report_figures import draw
        import matplotlib  # noqa: F401  (the plot extra)
    except ImportError as e:
        print(f"kwatt report: the figures are drawn by matplotlib, which is not installed ({e}): "
              "pip install 'kwatt[plot]'", file=sys.stderr)
        return 1
    draw(args.dir)
    return 0


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m kwatt")
    commands = parser.add_subparsers(dest="command", required=True)
    export = commands.add_parser("export", help="an archive's rows as a Parquet file")
    export.add_argument("dir", help="archive directory (kwatt backup)")
    export.add_argument("--to", required=True, choices=["parquet", "csv"])
    export.add_argument("-o", "--output", required=True, help="output file")
    export.add_argument("--nodes", help="comma-separated nodes (default: all)")
    export.add_argument("--metrics", help="comma-separated metric ids (default: all)")
    export.add_argument("--start", help="first instant kept (epoch seconds or ISO 8601)")
    export.add_argument("--end", help="last instant kept")
    export.add_argument("--allow-incomplete", action="store_true",
                        help="export the committed rows of an interrupted backup")
    export.add_argument("--rows-per-read", type=_rows,
                        help="about the most rows read from the archive at once (default "
                             "1048576; fewer: less memory, but a node's file is decompressed "
                             "once per slice of that many rows)")
    export.add_argument("--rows-per-group", type=_rows,
                        help="the most rows of a Parquet row group (default 131072)")
    figures = commands.add_parser("report-figures",
                                  help="draw the figures of a kwatt report's directory")
    figures.add_argument("dir", help="the directory kwatt report is writing (its report.json)")
    args = parser.parse_args(argv)
    if args.command == "report-figures":
        return _report_figures(args)
    return _export(args)


if __name__ == "__main__":
    sys.exit(main())
