"""python -m kwatt export DIR --to parquet -o PATH: an archive's rows as a Parquet file.

`kwatt export --to parquet` runs this (the C++ CLI has no Parquet writer: pyarrow is the well-kept
one, and it comes with the Python package). The columns are those of kwatt.load(): timestamp
(UTC, ns), site, node, device_id, metric_id (dictionary-encoded), value (double), labels (the
labels object's JSON text, dictionary-encoded). A regular file is written under a temporary name
and renamed once whole (a damaged archive never leaves a shorter file that looks finished); a
device or a FIFO is written through, never replaced: the C++ core's OutputFile decides, as for
`kwatt export --to csv`.
"""

import argparse
import io
import sys

from . import _core, load
from .errors import IncompleteError, KwattError


def _export(args):
    if args.to != "parquet":
        print("python -m kwatt export: only --to parquet here; CSV: kwatt export --to csv",
              file=sys.stderr)
        return 2
    split = (lambda text: [s.strip() for s in text.split(",") if s.strip()] if text else None)
    try:
        frame = load(args.dir, nodes=split(args.nodes), metrics=split(args.metrics),
                     start=args.start, end=args.end, allow_incomplete=args.allow_incomplete)
    except IncompleteError as e:
        print(f"kwatt export: {e}", file=sys.stderr)
        return 1
    except KwattError as e:
        print(f"kwatt export: {e}", file=sys.stderr)
        return 2 if isinstance(e, ValueError) else 1
    try:
        target = _core.OutputFile.plan(args.output)
    except KwattError as e:
        print(f"kwatt export: -o: {e}", file=sys.stderr)
        return 2 if isinstance(e, ValueError) else 1
    try:
        if target.replaces:
            frame.to_parquet(target.write_path, index=False)
        else:  # a device or a FIFO cannot seek, as Parquet's writer does: made in memory first
            content = io.BytesIO()
            frame.to_parquet(content, index=False)
            with open(target.write_path, "wb") as out:
                out.write(content.getbuffer())
        target.commit()
    except BaseException:
        target.abandon()
        raise
    if not frame.attrs["kwatt"]["complete"]:
        print(f"kwatt export: WARNING: {args.dir} is INCOMPLETE: wrote only the rows its "
              "interrupted backup committed", file=sys.stderr)
    print(f"kwatt export: {len(frame)} rows to {args.output}", file=sys.stderr)
    return 0


def main(argv=None):
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
    args = parser.parse_args(argv)
    return _export(args)


if __name__ == "__main__":
    sys.exit(main())
