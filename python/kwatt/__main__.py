"""python -m kwatt export DIR --to parquet -o PATH: an archive's rows as a Parquet file; python -m
kwatt report RUN ... -o DIR: `kwatt report` with its figures drawn (kwatt.report).

Both are what the C++ CLI leaves to the Python package, which runs them in its own process: the
CLI has no Parquet writer (pyarrow is the well-kept one, and comes with the Python package) and
draws no figures (matplotlib does, here); neither starts the other. Export: the columns are
those of kwatt.load(): timestamp (UTC, ns), site, node, device_id, metric_id (dictionary-encoded),
value (double), labels (the labels object's JSON text, dictionary-encoded). The archive is read and written piece by piece
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
from ._convert import KwollectClientOptions, to_ns
from .errors import IncompleteError, InvalidArgumentError, KwattError


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


def _report(args: argparse.Namespace) -> int:
    """`kwatt report`'s arguments, the report written by the core and its figures drawn here."""
    from .report import request, write
    try:
        asked = request(args.runs, versus=args.versus, api=args.api, title=args.title,
                        clock_offset=args.clock_offset, confidence=args.confidence,
                        carbon_intensity=args.carbon_intensity, carbon_source=args.carbon_source,
                        pue=args.pue, pue_source=args.pue_source, with_archives=args.with_archive,
                        metric=args.metric, gap_factor=args.gap_factor)
        if args.job:
            raise InvalidArgumentError("give each job as a run (kwatt report lyon:1234 ...), not "
                                       "--job")
        asked.phases, asked.roles, asked.accuracies = args.phase, args.role, args.accuracy
        asked.config = args.config or ""
        asked.nodes = [n.strip() for n in args.nodes.split(",") if n.strip()] if args.nodes else []
        asked.start = to_ns(args.start, "--start")
        asked.end = to_ns(args.end, "--end")
        asked.summary = args.summary
        client: KwollectClientOptions = {}
        if args.api:
            client["api_url"] = args.api
        if args.config:
            client["config"] = args.config
        for key in ("concurrency", "per_site", "retries", "backoff", "rows_per_request"):
            if getattr(args, key) is not None:
                client[key] = getattr(args, key)
        written = write(asked, args.output, _core.Client(client), quiet=args.quiet)
    except KwattError as e:
        print(f"kwatt report: {e}", file=sys.stderr)
        return 2 if isinstance(e, ValueError) else 1
    if not args.quiet:
        print(f"kwatt report: {written.dir}/report.html ({written.runs} run"
              f"{'' if written.runs == 1 else 's'})", file=sys.stderr)
    return 0


def main(argv: Optional[Sequence[str]] = None, prog: str = "python -m kwatt") -> int:
    """`python -m kwatt ARGV` (the wheel's `kwatt` command runs it as `kwatt` for report and
    export --to parquet): its exit status."""
    parser = argparse.ArgumentParser(prog=prog)
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
    report = commands.add_parser("report", help="kwatt report, its figures drawn (doc/report.md)")
    report.add_argument("runs", nargs="+", help="runs: archive directories or jobs SITE:ID (A)")
    report.add_argument("--versus", nargs="+", action="extend", default=[], help="a run of set B")
    report.add_argument("-o", "--output", required=True, help="the directory to write (new)")
    report.add_argument("--api", help="the Kwollect API (default Grid'5000's)")
    report.add_argument("--config", help="the credentials file")
    report.add_argument("--nodes", help="comma-separated: some of each run's nodes")
    report.add_argument("--start", help="narrows each run's window (epoch seconds or ISO 8601)")
    report.add_argument("--end", help="narrows each run's window")
    report.add_argument("--summary", action="store_true", help="a job's 5-minute aggregates")
    report.add_argument("--job", help=argparse.SUPPRESS)  # refused: each job is a run
    for option, kind, key in (("--concurrency", int, "concurrency"),
                              ("--per-site", int, "per_site"), ("--retries", int, "retries"),
                              ("--backoff", float, "backoff"),
                              ("--rows-per-request", int, "rows_per_request")):
        report.add_argument(option, type=kind, dest=key, help=f"the client's {key} (as kwatt's)")
    report.add_argument("--phase", nargs="+", action="extend", default=[],
                        help="NAME=+SECONDS..+SECONDS after each run's start, or NAME=START..END")
    report.add_argument("--role", nargs="+", action="extend", default=[], help="NAME=NODE,NODE")
    report.add_argument("--metric", help="use this power metric for every node")
    report.add_argument("--accuracy", nargs="+", action="extend", default=[],
                        help="a power source's stated accuracy METRIC=P%%+WW")
    report.add_argument("--clock-offset", type=float,
                        help="the most the marks' clock may be off the meters', in seconds")
    report.add_argument("--gap-factor", type=float, help="a gap: no sample for this many periods")
    report.add_argument("--confidence", type=float, help="the runs' intervals' confidence")
    report.add_argument("--carbon-intensity", help="grams of CO2e per kWh, or a file of them")
    report.add_argument("--carbon-source", help="where the carbon intensity comes from")
    report.add_argument("--pue", type=float, help="the data centre's PUE")
    report.add_argument("--pue-source", help="where the PUE comes from")
    report.add_argument("--with-archive", nargs="+", action="extend", default=[],
                        help="a kwatt meter recording on the runs' nodes (repeatable)")
    report.add_argument("--title", help="the report's title")
    report.add_argument("-q", "--quiet", action="store_true", help="no progress line")
    args = parser.parse_args(argv)
    if args.command == "report":
        return _report(args)
    return _export(args)


if __name__ == "__main__":
    sys.exit(main())
