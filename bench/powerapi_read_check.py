"""Checks, with PowerAPI's own code (run in bench/.venv-powerapi), that kwatt's power reports are
PowerAPI's: every line of every PowerReport.csv under a `kwatt meter ... -o powerapi-csv:DIR`
directory parses with PowerReport.from_csv_lines (the CSV input's parser), and every line of a
`-o powerapi-json:FILE` with PowerReport.from_json, the two agreeing report for report.

    python powerapi_read_check.py DIR FILE
"""
import csv
import json
import math
import sys
from pathlib import Path

from powerapi.report import PowerReport


def main(directory, json_path):
    from_csv = {}
    files = sorted(Path(directory).rglob("PowerReport.csv"))
    assert files, f"no PowerReport.csv under {directory}"
    for path in files:
        with open(path, encoding="utf-8") as f:
            reader = csv.DictReader(f)
            assert reader.fieldnames[:5] == ["timestamp", "sensor", "target", "power", "socket"], \
                (path, reader.fieldnames)
            for row in reader:
                report = PowerReport.from_csv_lines([(path.name, row)])
                # (its reader keeps socket as a column, not in the metadata)
                key = (report.timestamp, report.sensor, report.target, int(row["socket"]))
                assert key not in from_csv, key
                from_csv[key] = report
    from_json = {}
    for line in Path(json_path).read_text(encoding="utf-8").splitlines():
        report = PowerReport.from_json(json.loads(line))
        from_json[(report.timestamp, report.sensor, report.target, report.metadata["socket"])] = report
    assert from_csv.keys() == from_json.keys(), "the CSV and JSON outputs hold other reports"
    for key, a in from_csv.items():
        b = from_json[key]
        assert math.isclose(a.power, b.power, rel_tol=0, abs_tol=1e-12), (key, a.power, b.power)
        assert a.metadata["formula"] == b.metadata["formula"]
        assert a.metadata["scope"] == b.metadata["scope"]
        # PowerAPI writes the parsed report back with the same columns.
        a.metadata["socket"] = key[3]
        header, lines = PowerReport.to_csv_lines(a, ["socket", "scope"])
        assert header == ["timestamp", "sensor", "target", "power", "socket"]
        assert lines["PowerReport"][0]["target"] == key[2]
    print(f"read {len(from_csv)} power reports from CSV and {len(from_json)} from JSON")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
