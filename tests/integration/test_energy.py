"""`kwatt energy` against the simulator's ground truth (`kwatt simulate energy`)."""
import json
import subprocess

import pytest

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


def energy(server, *args, check=True):
    result = subprocess.run([KWATT, "energy", "--api", server.url, "--json", *map(str, args)],
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
    assert json.loads(result.stdout) == live
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
