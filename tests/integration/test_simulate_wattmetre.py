"""`kwatt simulate wattmetre`: the line stream of a simulated Omegawatt wattmeter, against its own
--truth (the exact energies of the simulator's model) and `kwatt simulate energy`."""
import json
import signal
import subprocess
import time
from collections import defaultdict

import pytest

from conftest import KWATT, run_kwatt

T0 = 1744977600  # 2025-04-18T14:00:00+02:00
# Load changes inside the window: ramps and steps the per-second means must follow.
JOBS = {"jobs": [
    {"site": "lyon", "uid": 8001, "nodes": ["nova-1", "nova-5"], "started_at": T0 + 20,
     "stopped_at": T0 + 200, "types": [],
     "phases": [{"name": "busy", "duration": 37, "cpu": 1.0},
                {"name": "half", "duration": 23, "cpu": 0.5}], "repeat_phases": True},
]}


def ports_of(line, version):
    fields = line.split(",")
    if version == 2:
        assert fields[3] == "OK", line
        return float(fields[2]), [float(v) for v in fields[4:]]
    assert fields[1] == "true", line
    count = (len(fields) - 11) // 2
    return float(fields[0]), [float(fields[6 + 2 * i]) for i in range(count)]


def integrate(lines, version, period):
    """What kwatt collect writes (each port's mean of each second, at the second's start),
    integrated: the sum of each second's mean times the time its samples cover."""
    sums = defaultdict(lambda: defaultdict(float))
    counts = defaultdict(lambda: defaultdict(int))
    for line in lines:
        t, values = ports_of(line, version)
        second = int(t)
        for port, value in enumerate(values):
            sums[port][second] += value
            counts[port][second] += 1
    return {port: sum(sums[port][s] / counts[port][s] * counts[port][s] * period
                      for s in sums[port]) for port in sums}


@pytest.fixture(scope="module")
def jobs_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("wattmetre") / "jobs.json"
    path.write_text(json.dumps(JOBS))
    return path


@pytest.mark.parametrize("version", [2, 3])
def test_second_means_integrate_to_the_truth(tmp_path, jobs_file, version):
    truth_file, mapping = tmp_path / "truth.json", tmp_path / "mapping.yaml"
    result = run_kwatt("simulate", "wattmetre", "--nodes", "nova-1,nova-1,nova-5,taurus-3.lyon",
                       "--id", "wattmetre7", "--version", version, "--start", T0, "--duration",
                       300, "--fast", "--jobs", jobs_file, "--truth", truth_file,
                       "--mapping-out", mapping)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.decode().splitlines()
    assert len(lines) == 300 * 50
    assert lines[1].split(",")[2 if version == 2 else 0] == f"{T0}.020000"
    truth = json.loads(truth_file.read_text())
    assert truth["samples"] == 15000
    assert (truth["start_ns"], truth["end_ns"]) == (T0 * 10**9, (T0 + 300) * 10**9)
    measured = integrate(lines, version, 0.02)
    for port, joules in measured.items():
        expected = truth["ports"][f"wattmetre7-port{port}"]["joules"]
        assert joules == pytest.approx(expected, rel=1e-3)
        assert joules == pytest.approx(expected, rel=1e-6)  # in fact far closer
    # Two PSUs: half each, the node's energy is their sum.
    assert truth["ports"]["wattmetre7-port0"]["joules"] == truth["ports"]["wattmetre7-port1"][
        "joules"]
    assert measured[0] + measured[1] == pytest.approx(truth["nodes"]["nova-1"]["joules"], rel=1e-3)
    # The truth is the simulator's, as `kwatt simulate energy` gives it.
    energy = json.loads(run_kwatt("simulate", "energy", "--node", "nova-5.lyon", "--start", T0,
                                  "--end", T0 + 300, "--jobs", jobs_file, "--json").stdout)
    assert truth["nodes"]["nova-5"]["joules"] == pytest.approx(energy["joules"], rel=1e-12)
    assert mapping.read_text().splitlines()[1:] == [
        "nova-1: [wattmetre7-port0, wattmetre7-port1]", "nova-5: [wattmetre7-port2]",
        "taurus-3: [wattmetre7-port3]"]


def test_real_time_until_sigterm_then_the_truth_of_what_was_printed(tmp_path):
    truth_file = tmp_path / "truth.json"
    process = subprocess.Popen([KWATT, "simulate", "wattmetre", "--nodes", "nova-1,nova-3",
                                "--truth", str(truth_file)], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
    try:
        lines = [process.stdout.readline()]  # line-buffered: each line as it is measured
        began = time.monotonic()
        while time.monotonic() - began < 0.5:
            lines.append(process.stdout.readline())
        elapsed = time.monotonic() - began
        process.send_signal(signal.SIGTERM)
        rest, errors = process.communicate(timeout=10)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 0, errors
    lines += rest.splitlines()
    lines = [line.strip() for line in lines if line.strip()]
    # 50 lines a second by the wall clock (loosely: a loaded machine).
    assert 0.5 * 50 * elapsed <= len(lines) - 1 <= 1.5 * 50 * elapsed + 5
    first, _ = ports_of(lines[0], 2)
    assert abs(first - time.time()) < 30
    truth = json.loads(truth_file.read_text())
    assert truth["samples"] == len(lines)
    measured = integrate(lines, 2, 0.02)
    assert measured[0] == pytest.approx(truth["ports"]["wattmetre1-port0"]["joules"], rel=1e-3)
    assert measured[1] == pytest.approx(truth["nodes"]["nova-3"]["joules"], rel=1e-3)


def test_a_closed_pipe_ends_it_cleanly(tmp_path):
    truth_file = tmp_path / "truth.json"
    process = subprocess.Popen([KWATT, "simulate", "wattmetre", "--nodes", "nova-1", "--fast",
                                "--truth", str(truth_file)], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE)
    read = process.stdout.read(100000)
    process.stdout.close()
    assert process.wait(timeout=10) == 0
    assert process.stderr.read() == b""
    truth = json.loads(truth_file.read_text())
    # The lines counted are those the reader was given whole.
    assert truth["samples"] >= read.count(b"\n")


def test_bad_options_are_usage_errors():
    for args in (["--version", "4"], ["--rate", "0"], ["--start", "yesterday-ish"],
                 ["--duration", "-1"], ["--id", ""]):
        result = run_kwatt("simulate", "wattmetre", "--nodes", "nova-1", *args)
        assert result.returncode == 2, (args, result.stderr)
        assert b"kwatt simulate wattmetre: --" in result.stderr, (args, result.stderr)
    result = run_kwatt("simulate", "wattmetre", "--nodes", "nova-1,,nova-2")
    assert result.returncode == 2
    assert b"--nodes: an empty node name" in result.stderr
