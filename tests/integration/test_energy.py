"""`kwatt energy` against the simulator's ground truth (`kwatt simulate energy`)."""
import csv
import io
import json
import os
import subprocess
import sys
import time

import pytest
import requests

from conftest import KWATT, start_server

T0 = 1744977600  # 2025-04-18T14:00:00+02:00
PHASES = [{"name": "idle", "duration": 300, "cpu": 0.0},
          {"name": "busy", "duration": 300, "cpu": 1.0, "network": 0.3}]
ENERGY_JOBS = {
    "jobs": [
        {"site": "lyon", "uid": 7001, "nodes": ["nova-1", "nova-5", "taurus-3"], "started_at": T0,
         "stopped_at": T0 + 1800, "types": [], "phases": PHASES, "repeat_phases": True},
        {"site": "lyon", "uid": 7002, "nodes": ["nova-4"], "started_at": T0,
         "stopped_at": T0 + 1800, "types": ["monitor=wattmetre_power_watt"], "phases": PHASES,
         "repeat_phases": True},
        {"site": "grenoble", "uid": 7003, "nodes": ["yeti-1"], "started_at": T0,
         "stopped_at": T0 + 1800, "types": ["monitor=wattmetre"], "phases": PHASES,
         "repeat_phases": True},
    ],
    "outages": [{"site": "lyon", "device": "nova-5", "metric": "wattmetre_power_watt",
                 "start": T0 + 600, "end": T0 + 720}],
}


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    directory = tmp_path_factory.mktemp("energy")
    jobs_file = directory / "jobs.json"
    jobs_file.write_text(json.dumps(ENERGY_JOBS))
    server = start_server("--jobs", jobs_file, tmp_path=directory)
    yield server, jobs_file
    server.stop()


def truth(jobs_file, node, start, end):
    out = subprocess.run([KWATT, "simulate", "energy", "--node", node, "--start", str(start),
                          "--end", str(end), "--jobs", str(jobs_file), "--json"],
                         capture_output=True,
                         check=True, timeout=60)
    return json.loads(out.stdout)["joules"]


def energy(server, *args, check=True, api=None):
    result = subprocess.run([KWATT, "energy", "--api", api or server.url, "--json",
                             *map(str, args)],
                            capture_output=True, timeout=300)
    if check:
        assert result.returncode == 0, result.stderr
    return json.loads(result.stdout), result


def node_of(report, fqdn):
    return next(n for n in report["nodes"] if n["node"] == fqdn)


def test_wattmeter_at_1s_and_20ms_against_the_truth(setup):
    server, jobs = setup
    report, _ = energy(server, "--nodes", "nova-1.lyon,nova-4.lyon", "--start", T0,
                       "--end", T0 + 1800)
    one_second = node_of(report, "nova-1.lyon.grid5000.fr")
    fifty_hz = node_of(report, "nova-4.lyon.grid5000.fr")
    assert one_second["metric"] == "wattmetre_power_watt" and one_second["period_s"] == 1
    assert fifty_hz["period_s"] == pytest.approx(0.02)
    for node, tolerance in ((one_second, 0.005), (fifty_hz, 0.0005)):
        expected = truth(jobs, node["node"], T0, T0 + 1800)
        assert node["window"]["joules"] == pytest.approx(expected, rel=tolerance)
        assert node["window"]["coverage"] == pytest.approx(1.0) and node["window"]["gaps"] == 0
    total = report["total"]["joules"]
    assert total == pytest.approx(one_second["window"]["joules"] + fifty_hz["window"]["joules"])


def test_a_window_across_a_monitor_jobs_start_and_the_minute_before_it(setup):
    # nova-4's wattmeter: every second before its monitor job (7002, from T0), every 20 ms in it.
    # Both rates are complete data: the wattmeter is kept, nothing is a gap, the edges are
    # interpolated from the rows read around the window, and the truth is within the interval.
    server, jobs = setup
    for a, b, phase in ((T0 - 300, T0 + 300, (T0 - 20, T0 + 20)), (T0 - 60, T0, (T0 - 30, T0 - 20))):
        report, _ = energy(server, "--nodes", "nova-4.lyon", "--start", a, "--end", b,
                           "--phase", f"around={phase[0]}..{phase[1]}")
        node = node_of(report, "nova-4.lyon.grid5000.fr")
        assert node["metric"] == "wattmetre_power_watt", node["reason"]
        for figures, (lo, hi) in ((node["window"], (a, b)), (node["phases"]["around"], phase)):
            assert figures["coverage"] == pytest.approx(1.0) and figures["gaps"] == 0
            true = truth(jobs, "nova-4.lyon", lo, hi)
            assert figures["joules"] == pytest.approx(true, rel=0.01)
            assert abs(figures["joules"] - true) <= \
                figures["interval"]["half_width_without_accuracy_joules"]


def test_every_figure_has_an_interval_that_holds_the_truth(setup):
    server, jobs = setup
    # Boundaries in the middle of the 1 s power ramps, marks taken by a clock 0.25 s late.
    report, _ = energy(server, "--nodes", "nova-1.lyon,nova-4.lyon,nova-5.lyon", "--start", T0,
                       "--end", T0 + 1800, "--phase", f"busy={T0 + 299.5}..{T0 + 600.5}",
                       "--clock-offset", "0.25")
    assert report["clock_offset_s"] == 0.25
    for fqdn in ("nova-1.lyon.grid5000.fr", "nova-4.lyon.grid5000.fr", "nova-5.lyon.grid5000.fr"):
        node = node_of(report, fqdn)
        for figures, (a, b) in ((node["window"], (T0, T0 + 1800)),
                                (node["phases"]["busy"], (T0 + 299.5, T0 + 600.5))):
            interval = figures["interval"]
            terms = interval["terms_joules"]
            assert interval["confidence"] == 0.95
            assert interval["low_joules"] < figures["joules"] < interval["high_joules"]
            # The half-width is the root of the sum of the terms' squares.
            assert interval["half_width_joules"] == pytest.approx(
                sum(v * v for v in terms.values()) ** 0.5)
            # The wattmeter's stated 1 % + 0.1 W, as a rectangular bound at 95 %.
            bound = 0.01 * figures["joules"] + 0.1 * figures["seconds"] * figures["coverage"]
            assert terms["accuracy"] == pytest.approx(1.96 * bound / 3 ** 0.5, rel=1e-6)
            # The simulator's meters have no class error: the truth within what the data and
            # the marks' clock allow, the marks 0.25 s late.
            true = truth(jobs, fqdn, a + 0.25, b + 0.25)
            assert abs(figures["joules"] - true) <= interval["half_width_without_accuracy_joules"]
    # nova-5's outage (2 minutes): its estimate's uncertainty is in the gaps term.
    outage = node_of(report, "nova-5.lyon.grid5000.fr")["window"]["interval"]["terms_joules"]
    steady = node_of(report, "nova-1.lyon.grid5000.fr")["window"]["interval"]["terms_joules"]
    assert outage["gaps_and_edges"] > 100 * steady["gaps_and_edges"]
    # In CSV, and in the table.
    result = subprocess.run([KWATT, "energy", "--api", server.url, "--csv", "-q", "--nodes",
                             "nova-1.lyon", "--start", str(T0), "--end", str(T0 + 1800)],
                            capture_output=True, text=True, timeout=120, check=True)
    row = next(csv.DictReader(io.StringIO(result.stdout)))
    window = node_of(report, "nova-1.lyon.grid5000.fr")["window"]
    assert float(row["low_joules"]) < float(row["joules"]) < float(row["high_joules"])
    for term in ("accuracy", "resolution", "sampling", "gaps_and_edges", "clock"):
        assert float(row[f"{term}_joules"]) >= 0
    table = subprocess.run([KWATT, "energy", "--api", server.url, "-q", "--nodes", "nova-1.lyon",
                            "--start", str(T0), "--end", str(T0 + 1800)],
                           capture_output=True, text=True, timeout=120, check=True).stdout
    assert "± 95 % (J)" in table and "--clock-offset" in table
    assert window["joules"] > 0
    # A clock offset that is no bound is refused before anything is fetched.
    bad = subprocess.run([KWATT, "energy", "--api", server.url, "--nodes", "nova-1.lyon",
                          "--start", str(T0), "--end", str(T0 + 60), "--clock-offset", "-1"],
                         capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "--clock-offset" in bad.stderr


def test_phase_boundaries_between_samples_are_interpolated(setup):
    server, jobs = setup
    # Boundaries half-way between 1 s samples, in the middle of the 1 s power ramps.
    phases = [("first", T0 + 299.5, T0 + 600.5), ("second", T0 + 600.5, T0 + 899.25)]
    args = []
    for name, a, b in phases:
        args += ["--phase", f"{name}={a}..{b}"]
    report, _ = energy(server, "--nodes", "nova-1.lyon", "--start", T0, "--end", T0 + 1800,
                       *args)
    node = node_of(report, "nova-1.lyon.grid5000.fr")
    for name, a, b in phases:
        assert node["phases"][name]["joules"] == pytest.approx(truth(jobs, node["node"], a, b),
                                                               rel=0.005)
        assert node["phases"][name]["seconds"] == pytest.approx(b - a)


def test_two_psu_node_is_counted_once(setup):
    server, jobs = setup
    report, _ = energy(server, "--nodes", "yeti-1.grenoble", "--start", T0, "--end", T0 + 1800)
    node = node_of(report, "yeti-1.grenoble.grid5000.fr")
    assert node["series"] == 1  # the summed alias rows; the ports' own rows are not added
    assert node["window"]["joules"] == pytest.approx(truth(jobs, node["node"], T0, T0 + 1800),
                                                     rel=0.0005)


def test_bmc_is_flagged_coarse(setup):
    server, jobs = setup
    report, _ = energy(server, "--nodes", "taurus-3.lyon", "--start", T0, "--end", T0 + 1800,
                       "--metric", "bmc_node_power_watt")
    node = node_of(report, "taurus-3.lyon.grid5000.fr")
    assert node["metric"] == "bmc_node_power_watt" and node["coarse"] is True
    assert node["period_s"] == pytest.approx(5, rel=0.01)
    assert "coarse" in node["reason"]
    assert node["window"]["joules"] == pytest.approx(truth(jobs, node["node"], T0, T0 + 1800),
                                                     rel=0.1)
    # By default the wattmeter is preferred.
    default, _ = energy(server, "--nodes", "taurus-3.lyon", "--start", T0, "--end", T0 + 1800)
    assert node_of(default, "taurus-3.lyon.grid5000.fr")["metric"] == "wattmetre_power_watt"


def test_outage_is_a_gap_with_its_duration_and_coverage(setup):
    server, jobs = setup
    report, _ = energy(server, "--nodes", "nova-5.lyon", "--start", T0, "--end", T0 + 1800)
    node = node_of(report, "nova-5.lyon.grid5000.fr")
    window = node["window"]
    assert window["gaps"] == 1
    assert window["coverage"] == pytest.approx(1 - 121 / 1800, abs=1.5 / 1800)
    assert window["gap_joules"] > 0
    # The last sample before the outage is at T0 + 599 s, the first after at T0 + 720 s: what was
    # measured is the truth outside that gap; the gap's estimate is kept apart.
    outside = truth(jobs, node["node"], T0, T0 + 599) + truth(jobs, node["node"], T0 + 720,
                                                               T0 + 1800)
    assert window["measured_joules"] == pytest.approx(outside, rel=0.005)
    assert window["joules"] == pytest.approx(window["measured_joules"] + window["gap_joules"])
    table = subprocess.run([KWATT, "energy", "--api", server.url, "--nodes", "nova-5.lyon",
                            "--start", str(T0), "--end", str(T0 + 1800), "-q"],
                           capture_output=True, text=True, timeout=120)
    assert "1 gap(s), 121 s uncovered" in table.stdout


def test_node_without_power_metric_is_named_not_zero(setup):
    server, _ = setup
    report, result = energy(server, "--nodes", "nova-1.lyon,taurus-3.lyon", "--start", T0,
                            "--end", T0 + 600, "--metric", "bmc_node_power_watt", check=False)
    assert result.returncode == 1
    nova = node_of(report, "nova-1.lyon.grid5000.fr")
    assert nova["metric"] is None and nova["window"] is None
    assert "no power metric" in nova["reason"]
    taurus = node_of(report, "taurus-3.lyon.grid5000.fr")
    assert report["total"]["joules"] == pytest.approx(taurus["window"]["joules"])


def test_roles_phases_baseline_and_job(setup):
    server, jobs = setup
    report, _ = energy(server, "--job", "lyon:7001", "--role", "compute=nova-1.lyon,nova-5.lyon",
                       "--phase", f"idle={T0}..{T0 + 300}", "--phase",
                       f"busy={T0 + 300}..{T0 + 600}", "--baseline", "idle")
    compute = report["roles"]["compute"]
    nodes = [node_of(report, f"nova-{i}.lyon.grid5000.fr") for i in (1, 5)]
    assert compute["joules"] == pytest.approx(sum(n["window"]["joules"] for n in nodes))
    for n in nodes:
        assert n["baseline_watts"] == pytest.approx(n["phases"]["idle"]["mean_watts"])
        assert n["phases"]["busy"]["mean_watts"] > n["baseline_watts"] + 80
    assert report["phase_totals"]["busy"]["joules"] > report["phase_totals"]["idle"]["joules"]
    bad = subprocess.run([KWATT, "energy", "--api", server.url, "--job", "lyon:7001", "--role",
                          "x=nova-9.lyon"], capture_output=True, timeout=120)
    assert bad.returncode == 2 and b"nova-9.lyon.grid5000.fr is not one of the nodes" in bad.stderr


def test_stats_cpu_usage_and_counters(setup):
    server, _ = setup
    result = subprocess.run([KWATT, "stats", "--api", server.url, "--json", "--job", "lyon:7001",
                             "--nodes", "nova-1.lyon", "--metrics",
                             "prom_node_cpu_seconds_total,network_ifacein_bytes_total,"
                             "wattmetre_power_watt",
                             "--phase", f"busy={T0 + 305}..{T0 + 595}"],
                            capture_output=True, timeout=300)
    assert result.returncode == 0, result.stderr
    stats = json.loads(result.stdout)
    window = stats["window"]["nova-1.lyon.grid5000.fr"]
    busy = stats["busy"]["nova-1.lyon.grid5000.fr"]
    # Three busy phases of five in 30 minutes of 5-minute phases... cycle idle/busy: half busy.
    assert window["cpu_busy"] == pytest.approx(0.5, abs=0.05)
    assert busy["cpu_busy"] == pytest.approx(0.97, abs=0.03)
    cpu = window["metrics"]["prom_node_cpu_seconds_total"]
    assert cpu["resets"] == 0 and cpu["rate_per_s"] == pytest.approx(32, rel=0.01)  # 32 CPUs
    net = window["metrics"]["network_ifacein_bytes_total"]
    assert net["increase"] > 0 and net["resets"] == 0
    power = busy["metrics"]["wattmetre_power_watt"]
    assert power["count"] == 291 and power["min"] <= power["mean"] <= power["max"]


def without_intervals(report):
    """The report without its figures' intervals and source checks."""
    if isinstance(report, dict):
        return {k: without_intervals(v) for k, v in report.items()
                if k not in ("interval", "source_checks")}
    if isinstance(report, list):
        return [without_intervals(v) for v in report]
    return report


def intervals_of(report, out=None):
    """Every figure's interval half-width, in document order."""
    out = [] if out is None else out
    if isinstance(report, dict):
        for k, v in report.items():
            if k == "interval":
                out.append(v["half_width_joules"])
            elif k != "source_checks":
                intervals_of(v, out)
    elif isinstance(report, list):
        for v in report:
            intervals_of(v, out)
    return out


def test_the_same_figures_from_an_archive_and_a_live_query(setup, tmp_path):
    server, _ = setup
    archive = tmp_path / "archive"
    backup = subprocess.run([KWATT, "backup", "--api", server.url, "--job", "lyon:7001", "-q",
                             "-o", str(archive)], capture_output=True, timeout=300)
    assert backup.returncode == 0, backup.stderr
    phases = ["--phase", f"busy={T0 + 300}..{T0 + 600}", "--role", "pair=nova-1.lyon,nova-5.lyon"]
    live, _ = energy(server, "--job", "lyon:7001", *phases)
    result = subprocess.run([KWATT, "energy", str(archive), "--json", *phases],
                            capture_output=True, timeout=300)
    assert result.returncode == 0, result.stderr
    archived = json.loads(result.stdout)
    # The same figures. Their intervals may differ a little: a live query reads rows 15 s beyond
    # the window (doc/energy.md, "Edges"), the archive holds its window's only.
    assert without_intervals(archived) == without_intervals(live)
    for ours, theirs in zip(intervals_of(archived), intervals_of(live)):
        assert ours == pytest.approx(theirs, rel=0.05)
    assert [[c["verdict"] for c in check["comparisons"]] for check in archived["source_checks"]] \
        == [[c["verdict"] for c in check["comparisons"]] for check in live["source_checks"]]
    stats_live = subprocess.run([KWATT, "stats", "--api", server.url, "--job", "lyon:7001",
                                 "--json", "--metrics", "wattmetre_power_watt"],
                                capture_output=True, timeout=300)
    stats_archive = subprocess.run([KWATT, "stats", str(archive), "--json", "--metrics",
                                    "wattmetre_power_watt"], capture_output=True, timeout=300)
    assert stats_archive.returncode == 0, stats_archive.stderr
    assert json.loads(stats_archive.stdout) == json.loads(stats_live.stdout)
    both = subprocess.run([KWATT, "energy", str(archive), "--job", "lyon:7001"],
                          capture_output=True, timeout=60)
    assert both.returncode == 2 and b"not both" in both.stderr


# ---- issue 10: no energy for times without data; partial totals; unions ----------------------

def test_archive_asked_for_a_wider_window_is_clipped_not_extrapolated(setup, tmp_path):
    server, _ = setup
    archive = tmp_path / "archive"
    backup = subprocess.run([KWATT, "backup", "--api", server.url, "--nodes", "nova-1.lyon",
                             "--start", str(T0), "--end", str(T0 + 600), "-q", "-o",
                             str(archive)], capture_output=True, timeout=300)
    assert backup.returncode == 0, backup.stderr
    inside = subprocess.run([KWATT, "energy", str(archive), "--json"], capture_output=True,
                            timeout=120)
    assert inside.returncode == 0, inside.stderr
    wide = subprocess.run([KWATT, "energy", str(archive), "--json", "--start", str(T0 - 600),
                           "--end", str(T0 + 1200)], capture_output=True, timeout=120)
    assert wide.returncode == 0, wide.stderr
    inside, wide = json.loads(inside.stdout), json.loads(wide.stdout)
    # Was three times the archive's energy (the first and last values held over 20 minutes).
    # Now the data's window: the archive's 600 s and one 1 s period held either side.
    assert wide["total"]["seconds"] == pytest.approx(602, abs=0.01)
    assert wide["total"]["joules"] == pytest.approx(inside["total"]["joules"], rel=0.005)
    assert any(n.startswith("window clipped to") for n in wide["notes"])
    table = subprocess.run([KWATT, "energy", str(archive), "-q", "--start", str(T0 - 600),
                            "--end", str(T0 + 1200)], capture_output=True, text=True, timeout=120)
    assert "window clipped to" in table.stdout
    # A phase with no data at all: refused, not a number with exit 0.
    outside = subprocess.run([KWATT, "energy", str(archive), "--json", "--phase",
                              f"later={T0 + 900}..{T0 + 1000}"], capture_output=True, timeout=120)
    assert outside.returncode == 2, outside.stdout
    assert b"phase later has no power data" in outside.stderr
    # A phase partly outside: clipped, and said so.
    partly = subprocess.run([KWATT, "energy", str(archive), "--json", "--phase",
                             f"end={T0 + 500}..{T0 + 1000}"], capture_output=True, timeout=120)
    assert partly.returncode == 0, partly.stderr
    report = json.loads(partly.stdout)
    assert report["phase_totals"]["end"]["seconds"] == pytest.approx(100, abs=2)
    assert any(n.startswith("phase end clipped to") for n in report["notes"])


def test_job_still_running_is_clipped_to_the_data_not_the_clients_clock(tmp_path):
    # The simulated clock is at T0 + 600 s; the job runs on (no stopped_at), so its window ends
    # at the client's clock, months later: was 14 GJ at 0 % coverage, exit 0.
    jobs = {"jobs": [{"site": "lyon", "uid": 7100, "nodes": ["nova-1"], "started_at": T0,
                      "walltime": 86400 * 365}]}
    server = start_server("--now", T0 + 600, jobs=jobs, tmp_path=tmp_path)
    try:
        report, result = energy(server, "--job", "lyon:7100")
    finally:
        server.stop()
    node = node_of(report, "nova-1.lyon.grid5000.fr")
    assert node["window"]["seconds"] == pytest.approx(600, abs=60)
    assert node["window"]["coverage"] == pytest.approx(1, abs=0.01)
    assert node["window"]["joules"] < 600 * 1000  # a node draws < 1 kW
    assert any(n.startswith("window clipped to") for n in report["notes"])


def test_total_over_a_node_without_power_is_partial(setup):
    server, _ = setup
    report, result = energy(server, "--nodes", "nova-1.lyon,taurus-3.lyon", "--start", T0,
                            "--end", T0 + 600, "--metric", "bmc_node_power_watt", check=False)
    assert result.returncode == 1
    assert report["total"]["coverage"] == pytest.approx(0.5, abs=0.01)  # was 100 %
    assert report["nodes_without_power"] == ["nova-1.lyon.grid5000.fr"]
    table = subprocess.run([KWATT, "energy", "--api", server.url, "--nodes",
                            "nova-1.lyon,taurus-3.lyon", "--start", str(T0), "--end",
                            str(T0 + 600), "--metric", "bmc_node_power_watt", "-q"],
                           capture_output=True, text=True, timeout=120)
    assert "total: partial, no power data for nova-1.lyon.grid5000.fr" in table.stdout


def test_roles_with_one_name_and_overlapping_phase_intervals_are_unions(setup):
    server, _ = setup
    report, _ = energy(server, "--nodes", "nova-1.lyon,nova-5.lyon", "--start", T0, "--end",
                       T0 + 300, "--role", "r=nova-1.lyon", "--role", "r=nova-5.lyon,nova-1.lyon",
                       "--phase", f"p={T0}..{T0 + 200}", "--phase", f"p={T0 + 100}..{T0 + 300}")
    nodes = [node_of(report, f"nova-{i}.lyon.grid5000.fr") for i in (1, 5)]
    # Both roles were kept as one entry, the last only (nova-5 and nova-1 summed, but the
    # first definition lost); now one role, the union, each node once.
    assert list(report["roles"]) == ["r"]
    assert report["roles"]["r"]["joules"] == pytest.approx(
        sum(n["window"]["joules"] for n in nodes))
    # The phase covers 0 .. 300 s once: its energy is the window's, not 100 s more.
    for n in nodes:
        assert n["phases"]["p"]["seconds"] == pytest.approx(300)
        assert n["phases"]["p"]["joules"] == pytest.approx(n["window"]["joules"], rel=1e-9)
    assert any("overlapping intervals merged" in n for n in report["notes"])


@pytest.mark.parametrize("command", ["serve", "simulate"])
def test_jobs_file_field_of_the_wrong_type_is_named(tmp_path, command):
    jobs = tmp_path / "jobs.json"
    jobs.write_text(json.dumps({"jobs": [
        {"site": "lyon", "uid": 1, "nodes": ["nova-1"], "started_at": T0},
        {"site": "lyon", "uid": 2, "nodes": ["nova-2"], "started_at": T0, "user": 3}]}))
    if command == "serve":
        args = ["serve", "--simulate", "--port", "0", "--jobs", str(jobs)]
    else:
        args = ["simulate", "energy", "--node", "nova-1.lyon", "--start", str(T0), "--end",
                str(T0 + 10), "--jobs", str(jobs)]
    result = subprocess.run([KWATT, *args], capture_output=True, text=True, timeout=60)
    assert result.returncode == 2, (result.returncode, result.stderr)  # was 134 (abort)
    assert f"jobs file {jobs}: jobs[1].user should be a string, not a number" in result.stderr


def test_stats_keeps_every_interval_of_a_phase_and_merges_roles_with_one_name(setup):
    server, _ = setup
    result = subprocess.run([KWATT, "stats", "--api", server.url, "--json", "--nodes",
                             "nova-1.lyon,nova-5.lyon", "--start", str(T0), "--end",
                             str(T0 + 600), "--metrics", "wattmetre_power_watt",
                             "--phase", f"idle={T0}..{T0 + 100}",
                             "--phase", f"idle={T0 + 200}..{T0 + 250}",
                             "--role", "r=nova-1.lyon", "--role", "r=nova-5.lyon"],
                            capture_output=True, timeout=300)
    assert result.returncode == 0, result.stderr
    stats = json.loads(result.stdout)
    assert list(stats) == ["window", "idle", "idle (2)"]  # the second was written over the first
    power = "wattmetre_power_watt"
    assert stats["idle"]["nova-1.lyon.grid5000.fr"]["metrics"][power]["count"] == 101
    assert stats["idle (2)"]["nova-1.lyon.grid5000.fr"]["metrics"][power]["count"] == 51
    role = stats["window"]["role r"]["metrics"][power]["count"]
    assert role == sum(stats["window"][f"nova-{i}.lyon.grid5000.fr"]["metrics"][power]["count"]
                       for i in (1, 5))


@pytest.mark.parametrize("start,message", [
    ("3000-01-01T00:00:00Z",
     "3000-01-01T00:00:00Z is outside the times kwatt handles (1677-09-21 .. 2262-04-11)"),
    ("20000000000", "20000000000 is outside the times kwatt handles"),
    ("2025-10-26T02:30", "2025-10-26T02:30:00 is ambiguous in Europe/Paris (that hour happens "
                         "twice): 2025-10-26T02:30:00+02:00 or 2025-10-26T02:30:00+01:00; give "
                         "the offset"),
    ("2025-03-30T02:30", "2025-03-30T02:30:00 does not exist in Europe/Paris"),
])
def test_times_out_of_range_or_ambiguous_are_refused_before_any_request(start, message):
    # Were read as 1830 / wrapped / moved silently; nothing listens on port 9: the time is
    # refused before any request.
    import os
    result = subprocess.run([KWATT, "energy", "--api", "http://127.0.0.1:9/stable", "--nodes",
                             "nova-1.lyon", "--start", start, "--end", "2025-10-27T00:00Z", "-q"],
                            capture_output=True, text=True, timeout=60,
                            env={**os.environ, "TZ": "Europe/Paris"})
    assert result.returncode == 2, result.stderr
    assert f"kwatt energy: --start: {message}" in result.stderr


# ---- issue 21: energy hardening ----------------------------------------------------------------

@pytest.mark.parametrize("value", ["0", "-1", "nan", "0.5"])
def test_a_gap_factor_that_is_no_number_of_at_least_one_is_refused(value):
    # Nothing listens on port 9: the option is refused before any request.
    result = subprocess.run([KWATT, "energy", "--api", "http://127.0.0.1:9/stable", "--nodes",
                             "nova-1.lyon", "--start", str(T0), "--end", str(T0 + 60), "-q",
                             f"--gap-factor={value}"], capture_output=True, text=True, timeout=60)
    assert result.returncode == 2, result.stderr
    assert "kwatt energy: --gap-factor should be a finite number of at least 1" in result.stderr


@pytest.mark.parametrize("command", ["energy", "stats"])
@pytest.mark.parametrize("phase,message", [
    (f"window={T0}..{T0 + 30}", 'the phase name "window" is reserved'),
    (f"p={T0 + 30}..{T0 + 30}",
     "phase p is empty: it starts and ends at 2025-04-18T14:00:30+02:00"),
])
def test_a_phase_named_window_or_empty_is_refused(command, phase, message):
    # Nothing listens on port 9: the phase is refused before any request.
    result = subprocess.run([KWATT, command, "--api", "http://127.0.0.1:9/stable", "--nodes",
                             "nova-1.lyon", "--start", str(T0), "--end", str(T0 + 60), "-q",
                             "--phase", phase], capture_output=True, text=True, timeout=60)
    assert result.returncode == 2, result.stderr
    assert f"kwatt {command}: --phase {phase}: {message}" in result.stderr


def test_no_power_data_is_null_not_zero(setup):
    server, _ = setup
    # nova-1 has no BMC power metric: no power data at all.
    report, result = energy(server, "--nodes", "nova-1.lyon", "--start", T0, "--end", T0 + 600,
                            "--metric", "bmc_node_power_watt", "--role", "r=nova-1.lyon",
                            "--phase", f"p={T0}..{T0 + 60}", check=False)
    assert result.returncode == 1
    for figures in (report["total"], report["roles"]["r"], report["phase_totals"]["p"]):
        for key in ("joules", "wh", "measured_joules", "gap_joules", "mean_watts", "peak_watts"):
            assert figures[key] is None, (key, figures)  # was 0.0
        assert figures["coverage"] == 0


def test_peaks_of_a_short_phase_and_of_sums(setup):
    server, _ = setup
    report, _ = energy(server, "--nodes", "nova-1.lyon,nova-5.lyon", "--start", T0, "--end",
                       T0 + 600, "--role", "both=nova-1.lyon,nova-5.lyon",
                       "--phase", f"short={T0 + 100.25}..{T0 + 100.75}")
    nodes = [node_of(report, f"nova-{i}.lyon.grid5000.fr") for i in (1, 5)]
    for n in nodes:
        short = n["phases"]["short"]  # between two 1 s samples: none of its own
        assert short["peak_watts"] >= short["mean_watts"] > 0, short  # the peak was 0
    # The peak of the summed power: at most the sum of the nodes' peaks, at least the highest.
    for figures, key in ((report["total"], "window"), (report["roles"]["both"], "window"),
                         (report["phase_totals"]["short"], "short")):
        peaks = [n[key]["peak_watts"] if key == "window" else n["phases"][key]["peak_watts"]
                 for n in nodes]
        assert max(peaks) <= figures["peak_watts"] <= sum(peaks) + 1e-9
        assert figures["peak_watts"] >= figures["mean_watts"]


def push(server, rows, auth=("alice", "s3cret")):
    """Pushes custom rows (POST /sites/lyon/metrics) to a server started with --auth."""
    pushed = requests.post(server.url + "/sites/lyon/metrics", json=rows, auth=auth, timeout=10)
    assert pushed.status_code == 201, pushed.text


def test_a_power_value_that_is_not_finite_or_absurd_is_refused_naming_node_and_metric(
        server_factory):
    server = server_factory("--auth", "alice:s3cret")
    push(server, [{"timestamp": T0 + i, "device_id": "nova-1", "metric_id": "my_power_watt",
                   "value": 1e308 if i == 5 else 100, "labels": {}} for i in range(11)])
    api = server.url.replace("http://", "http://alice:s3cret@")
    result = subprocess.run([KWATT, "energy", "--api", api, "--nodes", "nova-1.lyon", "--start",
                             str(T0), "--end", str(T0 + 10), "--metric", "my_power_watt",
                             "--json"], capture_output=True, text=True, timeout=120)
    assert result.returncode == 1, result.stdout  # was "joules": inf, exit 0
    assert ("nova-1.lyon.grid5000.fr: my_power_watt reads 1e+308 W at 2025-04-18T14:00:05+02:00"
            in result.stderr), result.stderr


def test_rows_pushed_beside_the_wattmeter_are_set_aside_not_summed(server_factory):
    server = server_factory("--auth", "alice:s3cret")
    # One stray row, and two under another label set, beside nova-1's real wattmeter series.
    push(server, [{"timestamp": T0 + 900, "device_id": "nova-1",
                   "metric_id": "wattmetre_power_watt", "value": 5000, "labels": {}},
                  *[{"timestamp": T0 + t, "device_id": "nova-1",
                     "metric_id": "wattmetre_power_watt", "value": 5000,
                     "labels": {"run": "x"}} for t in (100, 101)]])
    api = server.url.replace("http://", "http://alice:s3cret@")
    report, _ = energy(server, "--nodes", "nova-1.lyon", "--start", T0, "--end", T0 + 1800,
                       api=api)
    node = node_of(report, "nova-1.lyon.grid5000.fr")
    assert node["metric"] == "wattmetre_power_watt" and node["series"] == 1
    assert node["window"]["coverage"] == pytest.approx(1)  # was 0.0006
    expected = subprocess.run([KWATT, "simulate", "energy", "--node", "nova-1.lyon", "--start",
                               str(T0), "--end", str(T0 + 1800), "--json"], capture_output=True,
                              check=True, timeout=60)
    assert node["window"]["joules"] == pytest.approx(json.loads(expected.stdout)["joules"],
                                                     rel=0.005)
    assert "set aside, no meter of this node: " in node["reason"]
    assert "wattmetre_power_watt {} (1 sample in the window" in node["reason"]
    assert 'wattmetre_power_watt {"run":"x"} (2 samples in the window' in node["reason"]


def test_summary_rows_are_bucket_means_live_and_from_an_archive(setup, tmp_path):
    server, jobs = setup
    phases = ["--phase", f"idle={T0}..{T0 + 300}", "--phase", f"busy={T0 + 300}..{T0 + 600}"]
    live, _ = energy(server, "--summary", "--nodes", "nova-1.lyon", "--start", T0, "--end",
                     T0 + 1800, *phases)
    node = node_of(live, "nova-1.lyon.grid5000.fr")
    assert node["period_s"] == 300 and "5-minute summary rows" in node["reason"]
    assert node["window"]["coverage"] == pytest.approx(1)
    assert node["window"]["joules"] == pytest.approx(truth(jobs, node["node"], T0, T0 + 1800),
                                                     rel=0.01)
    # Were +87 % (idle) and -32 % (busy): the rows were read as samples at their buckets' starts.
    for name, a, b in (("idle", T0, T0 + 300), ("busy", T0 + 300, T0 + 600)):
        assert node["phases"][name]["joules"] == pytest.approx(truth(jobs, node["node"], a, b),
                                                               rel=0.02), name
    assert node["phases"]["busy"]["peak_watts"] >= node["phases"]["busy"]["mean_watts"]
    # An archive of summaries: the same figures.
    archive = tmp_path / "summary"
    backup = subprocess.run([KWATT, "backup", "--api", server.url, "--summary", "--nodes",
                             "nova-1.lyon", "--start", str(T0), "--end", str(T0 + 1800), "-q",
                             "-o", str(archive)], capture_output=True, timeout=300)
    assert backup.returncode == 0, backup.stderr
    result = subprocess.run([KWATT, "energy", str(archive), "--json", *phases],
                            capture_output=True, timeout=120)
    assert result.returncode == 0, result.stderr
    stored = node_of(json.loads(result.stdout), "nova-1.lyon.grid5000.fr")
    assert stored["reason"] == node["reason"]
    for key in ("window", "phases"):
        assert stored[key] == node[key]


def test_energy_csv_has_roles_and_totals_and_quotes_names(setup):
    server, _ = setup
    result = subprocess.run([KWATT, "energy", "--api", server.url, "--csv", "-q", "--nodes",
                             "nova-1.lyon,nova-5.lyon", "--start", str(T0), "--end",
                             str(T0 + 600), "--role", "web, db=nova-1.lyon,nova-5.lyon",
                             "--phase", f'say "hi"={T0}..{T0 + 300}'],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    rows = list(csv.DictReader(io.StringIO(result.stdout)))
    assert list(rows[0]) == ["scope", "name", "phase", "metric", "joules", "wh", "mean_watts",
                             "peak_watts", "seconds", "coverage", "gaps", "gap_joules",
                             "counter_joules", "baseline_joules", "half_width_joules",
                             "low_joules", "high_joules", "accuracy_joules", "resolution_joules",
                             "sampling_joules", "gaps_and_edges_joules", "clock_joules",
                             "reason"]
    # Names with a comma or a quote come back whole (they were split into extra columns).
    names = ["nova-1.lyon.grid5000.fr", "nova-5.lyon.grid5000.fr"]
    assert [(r["scope"], r["name"], r["phase"]) for r in rows] == [
        (scope, name, phase)
        for scope, name in [("node", names[0]), ("node", names[1]), ("role", "web, db"),
                            ("total", "total")]
        for phase in ("window", 'say "hi"')]
    report, _ = energy(server, "--nodes", "nova-1.lyon,nova-5.lyon", "--start", T0, "--end",
                       T0 + 600, "--role", "web, db=nova-1.lyon,nova-5.lyon",
                       "--phase", f'say "hi"={T0}..{T0 + 300}')
    # The same figures as JSON, to the last bit (the shortest text that reads back the same).
    assert float(rows[4]["joules"]) == report["roles"]["web, db"]["joules"]
    assert float(rows[7]["peak_watts"]) == report["phase_totals"]['say "hi"']["peak_watts"]
    assert float(rows[6]["joules"]) == report["total"]["joules"]


def test_stats_csv_numbers_are_the_shortest_text_that_reads_back(setup):
    server, _ = setup
    result = subprocess.run([KWATT, "stats", "--api", server.url, "--csv", "-q", "--nodes",
                             "nova-1.lyon", "--start", str(T0), "--end", str(T0 + 60),
                             "--metrics", "wattmetre_power_watt,network_ifacein_bytes_total"],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    rows = list(csv.DictReader(io.StringIO(result.stdout)))
    assert rows
    for row in rows:
        for key in ("mean", "min", "max", "last", "increase", "rate_per_s"):
            text = row[key]
            if text == "":
                continue
            # 68.55, not 68.549999999999997: no longer than Python's shortest repr.
            assert len(text) <= len(repr(float(text))), (key, text)


def test_a_faulty_source_lies_by_what_the_jobs_file_says(tmp_path):
    # The simulator's faults (doc/jobs_file.md, "Faults"): the BMC of taurus-3 reads 10 W high all
    # along, its wattmeter 10 % high over the busy phase; the same testbed without faults, and the
    # truth, are what they were.
    honest_jobs = {"jobs": [{"site": "lyon", "uid": 7101, "nodes": ["taurus-3"], "started_at": T0,
                             "stopped_at": T0 + 600, "phases": PHASES}]}
    lying_jobs = dict(honest_jobs, faults=[
        {"site": "lyon", "device": "taurus-3", "metric": "bmc_node_power_watt", "bias": 10},
        {"site": "lyon", "device": "taurus-3.lyon.grid5000.fr", "metric": "wattmetre_power_watt",
         "scale": 1.1, "start": T0 + 300, "end": T0 + 600}])
    files = {}
    for name, jobs in (("honest", honest_jobs), ("lying", lying_jobs)):
        files[name] = tmp_path / f"{name}.json"
        files[name].write_text(json.dumps(jobs))
    reports = {}
    for name in files:
        server = start_server("--jobs", files[name], tmp_path=tmp_path)
        try:
            for metric in ("bmc_node_power_watt", "wattmetre_power_watt"):
                reports[name, metric], _ = energy(
                    server, "--job", "lyon:7101", "--metric", metric,
                    # Clear of the fault's edges, where a line joins a true and a lying sample.
                    "--phase", f"idle={T0}..{T0 + 290}", "--phase", f"busy={T0 + 310}..{T0 + 590}")
        finally:
            server.stop()

    def figures(name, metric, phase=None):
        node = reports[name, metric]["nodes"][0]
        return node["window"] if phase is None else node["phases"][phase]

    bmc = figures("lying", "bmc_node_power_watt")
    assert bmc["joules"] - figures("honest", "bmc_node_power_watt")["joules"] == \
        pytest.approx(10 * bmc["seconds"], rel=1e-6)
    assert figures("lying", "wattmetre_power_watt", "idle")["joules"] == \
        pytest.approx(figures("honest", "wattmetre_power_watt", "idle")["joules"], rel=1e-9)
    assert figures("lying", "wattmetre_power_watt", "busy")["joules"] == \
        pytest.approx(1.1 * figures("honest", "wattmetre_power_watt", "busy")["joules"], rel=1e-9)
    assert truth(files["lying"], "taurus-3.lyon.grid5000.fr", T0, T0 + 600) == \
        truth(files["honest"], "taurus-3.lyon.grid5000.fr", T0, T0 + 600)


def test_sources_are_checked_against_each_other_and_the_lying_one_is_flagged(tmp_path):
    # taurus-3's and taurus-4's wattmeters and BMCs agree within their stated accuracies
    # (doc/energy.md, "How far to trust it"), until taurus-4's BMC reads 20 % low from the busy
    # phase on: flagged there and over the window, not in the idle phase, and not on taurus-3.
    jobs = {"jobs": [{"site": "lyon", "uid": 7102, "nodes": ["taurus-3", "taurus-4"],
                      "started_at": T0, "stopped_at": T0 + 600, "phases": PHASES}],
            "faults": [{"site": "lyon", "device": "taurus-4", "metric": "bmc_node_power_watt",
                        "scale": 0.8, "start": T0 + 300}]}
    path = tmp_path / "jobs.json"
    path.write_text(json.dumps(jobs))
    server = start_server("--jobs", path, tmp_path=tmp_path)
    try:
        phases = ["--phase", f"idle={T0}..{T0 + 300}", "--phase", f"busy={T0 + 300}..{T0 + 600}"]
        report, _ = energy(server, "--job", "lyon:7102", *phases)
        verdicts = {(c["node"].split(".")[0], c["interval"]): c["comparisons"][0]["verdict"]
                    for c in report["source_checks"]}
        assert verdicts == {("taurus-3", "window"): "agrees", ("taurus-3", "idle"): "agrees",
                            ("taurus-3", "busy"): "agrees", ("taurus-4", "window"): "disagrees",
                            ("taurus-4", "idle"): "agrees", ("taurus-4", "busy"): "disagrees"}
        busy = next(c for c in report["source_checks"]
                    if c["node"].startswith("taurus-4") and c["interval"] == "busy")
        assert [s["metric"] for s in busy["sources"]] == ["wattmetre_power_watt",
                                                          "bmc_node_power_watt"]
        comparison = busy["comparisons"][0]
        assert comparison["reference"] == "wattmetre_power_watt"
        assert abs(comparison["joules"]) > comparison["allowed_joules"]
        assert comparison["relative"] == pytest.approx(
            busy["sources"][1]["joules"] / busy["sources"][0]["joules"] - 1)
        # The table says it too, in capitals.
        text = subprocess.run([KWATT, "energy", "--api", server.url, "--job", "lyon:7102",
                               "--quiet", *phases], capture_output=True, text=True, timeout=300)
        assert text.returncode == 0, text.stderr
        assert "taurus-4.lyon.grid5000.fr, busy: bmc_node_power_watt DISAGREES: " \
            "bmc_node_power_watt is" in text.stdout, text.stdout
        # A BMC stated at 30 % agrees everywhere.
        loose, _ = energy(server, "--job", "lyon:7102", *phases,
                          "--accuracy", "bmc_node_power_watt=30%+5W")
        assert {c["comparisons"][0]["verdict"] for c in loose["source_checks"]} == {"agrees"}
        bad = subprocess.run([KWATT, "energy", "--api", server.url, "--job", "lyon:7102",
                              "--accuracy", "bmc_node_power_watt=30"], capture_output=True,
                             text=True, timeout=60)
        assert bad.returncode == 2
        assert "--accuracy: accuracy 'bmc_node_power_watt=30': '30' is neither a percentage " \
            "nor watts" in bad.stderr, bad.stderr
    finally:
        server.stop()


def meter_taurus_3(server, tmp_path, *outputs):
    """Runs a real `kwatt meter` for 8 s on a simulated taurus-3 (RAPL: a package of 20 W and a
    DRAM of 3 W on each of its 2 sockets), pushing to `server`'s Kwollect (user u:p) and writing
    to `outputs` too; returns when it ran (start, end)."""
    root = tmp_path / "sys"
    rapl = subprocess.Popen([KWATT, "simulate", "rapl", str(root), "--watts", "package=20,dram=3",
                             "--period-ms", "10"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    try:
        assert rapl.stdout.readline().strip() == str(root), rapl.stderr.read()
        start = time.time()
        push = server.url.replace("http://", "http://u:p@") + "/sites/lyon"
        extra = [a for output in outputs for a in ("-o", output)]
        metered = subprocess.run([KWATT, "meter", "--sysfs-root", root, "--period", "1s",
                                  "--output-node", "taurus-3", "--site", "lyon",
                                  "-o", f"kwollect:{push}", *extra, "--", "sleep", "8"],
                                 capture_output=True, text=True, timeout=120)
        assert metered.returncode == 0, metered.stderr
        assert "dropped" not in metered.stderr, metered.stderr
        return start, time.time()
    finally:
        rapl.terminate()
        rapl.wait(timeout=10)


def test_rapl_recorded_by_the_meter_is_a_part_of_the_node_below_its_wattmeter(tmp_path):
    # `kwatt meter` pushes the RAPL domains of a (simulated) taurus-3 to Kwollect while it runs;
    # `kwatt energy` over that time then finds the domains below the node's wattmeter: the rest
    # is the platform's, named as such and never flagged.
    server = start_server("--auth", "u:p", tmp_path=tmp_path)
    try:
        start, end = meter_taurus_3(server, tmp_path)
        env = dict(os.environ, KWATT_USERNAME="u", KWATT_PASSWORD="p")
        result = subprocess.run([KWATT, "energy", "--api", server.url, "--json",
                                 "--nodes", "taurus-3.lyon", "--start", f"{start + 2:.3f}",
                                 "--end", f"{end - 1:.3f}"],
                                capture_output=True, text=True, timeout=300, env=env)
        assert result.returncode == 0, result.stderr
        report = json.loads(result.stdout)
    finally:
        server.stop()
    check = next(c for c in report["source_checks"] if c["interval"] == "window")
    part = next(c for c in check["comparisons"]
                if c["metric"] == "kwatt_meter_domain_power_watt")
    assert part["reference"] == "wattmetre_power_watt"
    assert part["verdict"] == "part_of_node", part
    wall = next(s for s in check["sources"] if s["metric"] == "wattmetre_power_watt")
    domains = next(s for s in check["sources"] if s["metric"] == "kwatt_meter_domain_power_watt")
    assert domains["mean_watts"] == pytest.approx(46, rel=0.05)  # 2 x (20 + 3) W
    assert part["rest_watts"] == pytest.approx(wall["mean_watts"] - domains["mean_watts"], rel=1e-6)
    assert "the rest of the platform" in part["why"] and "error" not in part["why"]


def test_a_meters_recording_is_checked_against_the_nodes_archive(tmp_path):
    # The same, from archives: a real `kwatt meter` records a (simulated) taurus-3's RAPL domains
    # into an archive (and pushes them to Kwollect); the job's wattmeter is backed up into
    # another. `kwatt energy BACKUP --with-archive RECORDING` reads the two together. Over the API,
    # the domains the meter pushed are the API's: the recording's are not read a second time.
    server = start_server("--auth", "u:p", tmp_path=tmp_path)
    recording = tmp_path / "recording"
    env = dict(os.environ, KWATT_USERNAME="u", KWATT_PASSWORD="p")
    try:
        start, end = meter_taurus_3(server, tmp_path, f"archive:{recording}")
        window = ["--nodes", "taurus-3.lyon", "--start", f"{start + 2:.3f}",
                  "--end", f"{end - 1:.3f}"]
        backup = tmp_path / "backup"
        subprocess.run([KWATT, "backup", "--api", server.url, *window, "--metrics",
                        "wattmetre_power_watt", "-o", backup, "--quiet"],
                       capture_output=True, text=True, timeout=300, env=env, check=True)

        def energy_of(*source):
            result = subprocess.run([KWATT, "energy", "--json", *source], capture_output=True,
                                    text=True, timeout=300, env=env)
            assert result.returncode == 0, result.stderr
            return json.loads(result.stdout)

        alone = energy_of(backup)
        together = energy_of(backup, "--with-archive", recording)
        over_api = energy_of("--api", server.url, *window, "--with-archive", recording)
        refused = subprocess.run([KWATT, "energy", "--api", server.url, "--nodes", "nova-1.lyon",
                                  "--start", f"{start + 2:.3f}", "--end", f"{end - 1:.3f}",
                                  "--with-archive", recording], capture_output=True, text=True,
                                 timeout=300, env=env)
        # kwatt report reads it with the run it meets, and names it in the provenance.
        paper = tmp_path / "paper"
        made = subprocess.run([KWATT, "report", backup, "--with-archive", recording, "-o", paper,
                               "-q"], capture_output=True, text=True, timeout=300, env=env)
        assert made.returncode == 0, made.stderr
        # An archive of another node meets no run: refused, nothing written.
        other = tmp_path / "nova-1"
        subprocess.run([KWATT, "backup", "--api", server.url, "--nodes", "nova-1.lyon",
                        *window[2:], "--metrics", "wattmetre_power_watt", "-o", other, "--quiet"],
                       capture_output=True, text=True, timeout=300, env=env, check=True)
        nowhere = subprocess.run([KWATT, "report", backup, "--with-archive", other, "-o",
                                  tmp_path / "unwritten", "-q"], capture_output=True, text=True,
                                 timeout=300, env=env)
    finally:
        server.stop()

    def checked(report):
        check = next(c for c in report["source_checks"] if c["interval"] == "window")
        return {s["metric"]: s for s in check["sources"]}, \
            {c["metric"]: c for c in check["comparisons"]}

    assert alone["source_checks"] == []  # the wattmeter alone: nothing to check it against
    for report in (together, over_api):
        sources, comparisons = checked(report)
        part = comparisons["kwatt_meter_domain_power_watt"]
        assert part["verdict"] == "part_of_node", part
        assert sources["kwatt_meter_domain_power_watt"]["mean_watts"] == \
            pytest.approx(46, rel=0.05)  # 2 x (20 + 3) W, once: never the pushed and recorded
    # The node's energy is its wattmeter's, with or without the recording.
    assert together["total"]["joules"] == alone["total"]["joules"]
    assert refused.returncode == 2
    assert "holds node taurus-3.lyon.grid5000.fr, which is not among the nodes read " \
        "(nova-1.lyon.grid5000.fr)" in refused.stderr, refused.stderr
    report = json.loads((paper / "report.json").read_text())
    run = report["sets"]["a"][0]["energy"]
    assert checked(run)[1]["kwatt_meter_domain_power_watt"]["verdict"] == "part_of_node"
    provenance = json.loads((paper / "provenance.json").read_text())
    assert provenance["runs"][0]["with_archives"] == [str(recording)]
    assert f"--with-archive {recording}" in provenance["reproduce"][-1]
    assert "part_of_node" in (paper / "report.html").read_text()
    assert nowhere.returncode == 2, nowhere.stderr
    assert f"--with-archive {other}: no run has its nodes during its window" in nowhere.stderr
    assert not (tmp_path / "unwritten").exists()


# Runs of one experiment: ten minutes of nova-1 each (2 idle, 6 of work, 2 idle), 20 minutes apart;
# set A works at 50, 51 and 52 % of the CPU, set B at 60, 61 and 62 %, set C as A.
RUN_LEVELS = {"a": [0.50, 0.51, 0.52], "b": [0.60, 0.61, 0.62], "c": [0.50, 0.51, 0.52]}


def runs_jobs():
    jobs = []
    for s, (name, levels) in enumerate(RUN_LEVELS.items()):
        for i, level in enumerate(levels):
            start = T0 + (3 * s + i) * 1200
            jobs.append({"site": "lyon", "uid": 9000 + 3 * s + i, "nodes": ["nova-1"],
                         "started_at": start, "stopped_at": start + 600,
                         "phases": [{"name": "idle", "duration": 120, "cpu": 0},
                                    {"name": "work", "duration": 360, "cpu": level},
                                    {"name": "idle", "duration": 120, "cpu": 0}]})
    return {"jobs": jobs}


def run_args(name, flag):
    return [a for i in range(3) for a in (flag, f"lyon:{9000 + 3 * 'abc'.index(name) + i}")]


def test_runs_are_summarized_and_compared_with_the_truth(tmp_path):
    jobs = runs_jobs()
    jobs_file = tmp_path / "runs.json"
    jobs_file.write_text(json.dumps(jobs))
    server = start_server("--jobs", jobs_file, tmp_path=tmp_path)
    try:
        report, _ = energy(server, *run_args("a", "--run"), *run_args("b", "--versus"),
                           "--phase", "work=+120..+480")
        truths = {name: [truth(jobs_file, "nova-1.lyon", j["started_at"] + 120,
                               j["started_at"] + 480)
                         for j in jobs["jobs"][3 * s:3 * s + 3]]
                  for s, name in enumerate("abc")}
        assert report["confidence"] == 0.95
        assert [r["run"] for r in report["runs"]["a"]] == ["lyon:9000", "lyon:9001", "lyon:9002"]
        assert all(r["complete"] for r in report["runs"]["a"] + report["runs"]["b"])
        work = next(s for s in report["a"] if s["scope"] == "total" and s["phase"] == "work")
        assert work["runs"] == 3
        assert work["mean_joules"] == pytest.approx(sum(truths["a"]) / 3, rel=0.005)
        assert work["low_joules"] < sum(truths["a"]) / 3 < work["high_joules"]
        compared = next(c for c in report["comparison"]
                        if c["scope"] == "total" and c["phase"] == "work")
        true_difference = (sum(truths["b"]) - sum(truths["a"])) / 3
        assert compared["significant"] and compared["p_value"] < 0.05
        assert compared["low_joules"] < true_difference < compared["high_joules"]
        assert compared["difference_joules"] == pytest.approx(true_difference, rel=0.01)
        # The same levels at other times: no difference claimed.
        same, _ = energy(server, *run_args("a", "--run"), *run_args("c", "--versus"),
                         "--phase", "work=+120..+480")
        assert not any(c["significant"] for c in same["comparison"])
        # CSV: the comparison's rows; the table says it.
        result = subprocess.run([KWATT, "energy", "--api", server.url, "--csv", "-q",
                                 *run_args("a", "--run"), *run_args("b", "--versus"),
                                 "--phase", "work=+120..+480"],
                                capture_output=True, text=True, timeout=120, check=True)
        rows = list(csv.DictReader(io.StringIO(result.stdout)))
        assert list(rows[0])[:5] == ["scope", "name", "phase", "runs_a", "runs_b"]
        assert {(r["scope"], r["phase"], r["significant"]) for r in rows} >= {
            ("total", "work", "true")}
        table = subprocess.run([KWATT, "energy", "--api", server.url, "-q",
                                *run_args("a", "--run"), *run_args("b", "--versus")],
                               capture_output=True, text=True, timeout=120, check=True).stdout
        assert "B against A" in table and "B uses more energy than A" in table
        # Wrong runs are named.
        for args, expected in ((["--run", "nowhere"], "neither an archive directory nor a job"),
                               (["--run", "lyon:9000", "--job", "lyon:9001"], "--run"),
                               (["--run", "lyon:9000", "--confidence", "95"], "--confidence"),
                               (["--run", "lyon:9000", "--phase", "w=+1..2025-04-18"],
                                "both ends"),
                               (["--run", "lyon:9000", "--phase", "w=+1e12..+1e13"],
                                "is no offset")):
            bad = subprocess.run([KWATT, "energy", "--api", server.url, *args],
                                 capture_output=True, text=True, timeout=60)
            assert bad.returncode == 2 and expected in bad.stderr, (args, bad.stderr)
    finally:
        server.stop()


def test_a_phase_may_be_given_after_the_windows_start(setup):
    server, jobs = setup
    absolute, _ = energy(server, "--nodes", "nova-1.lyon", "--start", T0, "--end", T0 + 1800,
                         "--phase", f"busy={T0 + 300}..{T0 + 600}")
    relative, _ = energy(server, "--nodes", "nova-1.lyon", "--start", T0, "--end", T0 + 1800,
                         "--phase", "busy=+300..+600")
    assert relative["nodes"][0]["phases"]["busy"] == absolute["nodes"][0]["phases"]["busy"]


def test_a_misspelt_metric_is_named_not_taken_for_nodes_without_power(setup):
    server, _ = setup
    result = subprocess.run([KWATT, "energy", "--api", server.url, "--nodes", "nova-1.lyon",
                             "--start", str(T0), "--end", str(T0 + 60), "--metric",
                             "wattmeter_power_watt", "-q"],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 1
    assert "no node of the query reports the metric 'wattmeter_power_watt' (a misspelling?); " \
        "their power metrics: " in result.stderr
    assert "wattmetre_power_watt" in result.stderr and "NO POWER DATA" not in result.stdout
