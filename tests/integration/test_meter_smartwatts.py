"""`kwatt simulate hwpc` and `kwatt meter smartwatts`, as processes: post-mortem on CSV and JSON,
the live socket stream end to end, errors, and PowerAPI's own code reading what kwatt writes."""
import csv
import json
import os
import signal
import subprocess
from collections import defaultdict
from pathlib import Path

import pytest

from conftest import KWATT, ROOT, run_kwatt

POWERAPI_VENV = Path(os.environ.get("POWERAPI_VENV", ROOT / "bench" / ".venv-powerapi"))


def power_rows(path):
    """PowerAPI JSON power reports: {(timestamp, socket, target): watts}."""
    rows = {}
    for line in Path(path).read_text().splitlines():
        doc = json.loads(line)
        rows[(doc["timestamp"], doc["metadata"]["socket"], doc["target"])] = doc["power"]
    return rows


def truth_rows(path):
    with open(path) as f:
        return {(int(r["timestamp"]), int(r["socket"]), r["target"]): float(r["dynamic_watts"])
                for r in csv.DictReader(f)}


def simulate(tmp_path, *args):
    result = run_kwatt("simulate", "hwpc", "--csv", tmp_path / "csv", "--json", tmp_path / "r.json",
                       "--truth", tmp_path / "truth.csv", *args)
    assert result.returncode == 0, result.stderr
    return result


def test_post_mortem_csv_and_json_give_the_same_reports_close_to_the_truth(tmp_path):
    simulate(tmp_path, "--duration", "300")
    for kind, where in (("csv", tmp_path / "csv"), ("json", tmp_path / "r.json")):
        result = run_kwatt("meter", "smartwatts", "--input", f"{kind}:{where}",
                           "--cpu-error-threshold", "0.5",
                           "-o", f"powerapi-json:{tmp_path / kind}.jsonl",
                           "-o", f"powerapi-csv:{tmp_path / kind}-dir")
        assert result.returncode == 0, result.stderr
        assert b"1200 reports, 300 ticks" in result.stderr
    assert (tmp_path / "csv.jsonl").read_text() == (tmp_path / "json.jsonl").read_text()
    ours = power_rows(tmp_path / "csv.jsonl")
    truth = truth_rows(tmp_path / "truth.csv")
    # 300 ticks x 2 sockets x (rapl + 3 cgroups); every tick, the targets within the socket's power.
    assert len(ours) == 300 * 2 * 4
    errors = []
    for (ts, socket, target), watts in ours.items():
        if target == "rapl":
            assert sum(ours[(ts, socket, t)] for t in ("/kwatt/web", "/kwatt/batch", "/kwatt/db")) \
                <= watts + 1e-6
        elif ts >= 1700000000000 + 60000:  # once learned
            errors.append(abs(watts - truth[(ts, socket, target)]))
    assert sum(errors) / len(errors) < 0.5
    # PowerAPI's CSV layout: SENSOR-TARGET/PowerReport.csv, a cgroup path as subdirectories.
    web = (tmp_path / "csv-dir" / "kwatt-sim-" / "kwatt" / "web" / "PowerReport.csv").read_text()
    assert web.startswith("timestamp,sensor,target,power,socket,formula,ratio,scope\n")
    assert len(web.splitlines()) == 1 + 600


def test_the_socket_stream_end_to_end(tmp_path):
    meter = subprocess.Popen(
        [KWATT, "meter", "smartwatts", "--input", "listen:127.0.0.1:0",
         "--sensor-reports-frequency", "100", "--cpu-error-threshold", "0.5",
         "-o", f"powerapi-json:{tmp_path / 'live.jsonl'}",
         "-o", f"powerapi-formula-json:{tmp_path / 'models.jsonl'}"],
        stderr=subprocess.PIPE, text=True)
    try:
        line = meter.stderr.readline()
        assert "listening on 127.0.0.1:" in line, line
        port = int(line.rsplit(":", 1)[1])
        # Real time: a tick every 100 ms, sent as it ends, as hwpc-sensor sends them.
        sensor = run_kwatt("simulate", "hwpc", "--connect", f"127.0.0.1:{port}",
                           "--period-ms", "100", "--duration", "4", "--start", "now",
                           "--json", tmp_path / "sent.json", timeout=60)
        assert sensor.returncode == 0, sensor.stderr
    finally:
        meter.send_signal(signal.SIGTERM)
        _, err = meter.communicate(timeout=30)
    assert meter.returncode == 0, err
    # Every tick sent was reported (the ticks held for late reports flushed at SIGTERM)...
    assert "160 reports, 40 ticks" in err
    live = (tmp_path / "live.jsonl").read_text()
    assert len(live.splitlines()) == 40 * 2 * 4
    # ...and the stream's reports are those of a post-mortem run on what was sent.
    again = run_kwatt("meter", "smartwatts", "--input", f"json:{tmp_path / 'sent.json'}",
                      "--sensor-reports-frequency", "100", "--cpu-error-threshold", "0.5",
                      "-o", f"powerapi-json:{tmp_path / 'again.jsonl'}")
    assert again.returncode == 0, again.stderr
    assert (tmp_path / "again.jsonl").read_text() == live
    models = [json.loads(x) for x in (tmp_path / "models.jsonl").read_text().splitlines()]
    assert models and {"scope", "socket", "layer_frequency", "pkg_frequency", "samples", "id",
                       "error", "intercept", "coef"} <= set(models[-1]["metadata"])


def test_errors_are_named_before_anything_starts(tmp_path):
    cases = [
        (["--input", "mongodb:x", "-o", "powerapi-json:x"], 2, b"csv:DIR, json:FILE"),
        (["--input", f"csv:{tmp_path}/none", "-o", "powerapi-json:x"], 1, b"no such directory"),
        (["--input", f"json:{tmp_path}/r.json"], 2, b"no output"),
        (["--input", f"json:{tmp_path}/r.json", "-o", "influx:x"], 2, b"unknown kind 'influx'"),
        (["--input", f"json:{tmp_path}/r.json", "-o", "powerapi-json:x",
          "--learn-min-samples-required", "100"], 2, b"learn-min-samples-required"),
        (["--input", f"json:{tmp_path}/r.json", "-o", "powerapi-json:x",
          "--learn-error-window-method", "mode"], 2, b"median or mean"),
        (["--input", "listen:127.0.0.1:notaport", "-o", "powerapi-json:x"], 2, b"listen:HOST:PORT"),
        # An output that cannot be written is said before the meter listens.
        (["--input", "listen:127.0.0.1:0", "-o", f"powerapi-json:{tmp_path}/no/such/dir/x"], 2,
         b"no/such/dir does not exist: create it first"),
    ]
    for args, code, message in cases:
        result = run_kwatt("meter", "smartwatts", *args)
        assert result.returncode == code, (args, result.stderr)
        assert message in result.stderr, (args, result.stderr)
    # Hostile input: the file and line in the message, what was read before still written.
    simulate(tmp_path, "--duration", "20")
    lines = (tmp_path / "r.json").read_text().splitlines()
    lines[44] = lines[44].replace('"RAPL_ENERGY_PKG":', '"RAPL_ENERGY_PKG":-')  # tick 12's "all"
    (tmp_path / "bad.json").write_text("\n".join(lines) + "\n")
    result = run_kwatt("meter", "smartwatts", "--input", f"json:{tmp_path / 'bad.json'}",
                       "-o", f"powerapi-json:{tmp_path / 'out.jsonl'}")
    assert result.returncode == 1
    assert b"bad.json:45: group rapl, socket 0, cpu 0: RAPL_ENERGY_PKG is -" in result.stderr
    assert (tmp_path / "out.jsonl").read_text().count('"target":"rapl"') == 2 * 11
    result = run_kwatt("simulate", "hwpc", "--json", tmp_path / "x.json", "--sockets", "0")
    assert result.returncode == 2 and b"sockets: 1 to 64" in result.stderr
    result = run_kwatt("simulate", "hwpc")
    assert result.returncode == 2 and b"nothing to write" in result.stderr


def test_an_output_that_cannot_be_written_is_named(tmp_path):
    # (Each output on its own thread, one failing losing only its own reports, the run going on:
    # the fan-out's unit tests.) An output that cannot begin (its header on a full disk) stops the
    # run before any tick, naming it.
    simulate(tmp_path, "--duration", "20")
    result = run_kwatt("meter", "smartwatts", "--input", f"csv:{tmp_path / 'csv'}",
                       "-o", f"powerapi-json:{tmp_path / 'ok.jsonl'}", "-o", "jsonl:/dev/full")
    err = result.stderr.decode()
    assert result.returncode == 1, err
    assert "output jsonl:/dev/full: cannot write /dev/full: No space left on device" in err, err


def test_simulate_hwpc_is_deterministic_by_seed(tmp_path):
    a = run_kwatt("simulate", "hwpc", "--json", "-", "--duration", "5", "--seed", "7")
    b = run_kwatt("simulate", "hwpc", "--json", "-", "--duration", "5", "--seed", "7")
    c = run_kwatt("simulate", "hwpc", "--json", "-", "--duration", "5", "--seed", "8")
    assert a.returncode == 0 and a.stdout == b.stdout and a.stdout != c.stdout
    assert len(a.stdout.splitlines()) == 5 * 4


def test_powerapi_reads_kwatts_power_reports(tmp_path):
    # PowerAPI itself, in its own venv (make test makes it): its parsers read what kwatt writes.
    assert (POWERAPI_VENV / "bin" / "python").exists(), \
        f"PowerAPI's venv ({POWERAPI_VENV}) is missing: make test and make bench-deps make it"
    simulate(tmp_path, "--duration", "30")
    result = run_kwatt("meter", "smartwatts", "--input", f"csv:{tmp_path / 'csv'}",
                       "-o", f"powerapi-csv:{tmp_path / 'out'}",
                       "-o", f"powerapi-json:{tmp_path / 'p.jsonl'}")
    assert result.returncode == 0, result.stderr
    check = subprocess.run([POWERAPI_VENV / "bin" / "python", ROOT / "bench" / "powerapi_read_check.py",
                            tmp_path / "out", tmp_path / "p.jsonl"],
                           capture_output=True, text=True, timeout=120)
    assert check.returncode == 0, check.stdout + check.stderr
    assert "read 240 power reports from CSV and 240 from JSON" in check.stdout, check.stdout


def test_kwatt_meters_own_outputs_take_the_formulas_reports(tmp_path):
    simulate(tmp_path, "--duration", "30")
    jsonl = tmp_path / "r.jsonl"
    result = run_kwatt("meter", "smartwatts", "--input", f"csv:{tmp_path / 'csv'}",
                       "-o", f"jsonl:{jsonl}", "-o", f"powerapi-json:{tmp_path / 'p.jsonl'}")
    assert result.returncode == 0, result.stderr
    lines = [json.loads(line) for line in jsonl.read_text().splitlines()]
    assert lines[0]["type"] == "header" and lines[0]["formula"] == "smartwatts"
    intervals = [line for line in lines if line["type"] == "interval"]
    assert intervals and lines[-1]["type"] == "end"
    for interval in intervals:
        for domain in interval["domains"]:
            shares = sum(t["microjoules"] for t in domain.get("targets", []))
            assert domain["measured"]["microjoules"] == (
                domain["idle"]["microjoules"] + domain["unattributed"]["microjoules"] + shares)
