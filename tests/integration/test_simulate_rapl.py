"""`kwatt simulate rapl ROOT`: a simulated RAPL machine's powercap tree, updated in real time by a
process, read here as any RAPL reader would (plain file reads), against its own truth."""
import json
import signal
import subprocess
import time

from conftest import KWATT

UNIT_UJ = 1e6 / 2**14  # the package's hardware unit, 2^-14 J


def start(root, *args):
    process = subprocess.Popen([KWATT, "simulate", "rapl", str(root), *map(str, args)],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    line = process.stdout.readline()
    assert line.strip() == str(root), process.stderr.read()
    return process


def read_uj(root, zone):
    return int((root / "class" / "powercap" / zone / "energy_uj").read_text())


def stop(process):
    process.send_signal(signal.SIGTERM)
    assert process.wait(timeout=10) == 0, process.stderr.read()


def test_counters_follow_the_power_and_wrap(tmp_path):
    root, truth_file = tmp_path / "sys", tmp_path / "truth.json"
    # 2^16 counts of 2^-14 J: the package counter wraps every 4 J, at 60 W every 67 ms.
    process = start(root, "--counter-bits", 16, "--period-ms", 2, "--watts", "package=60,dram=6",
                    "--truth", truth_file)
    try:
        zone = root / "class" / "powercap" / "intel-rapl:0"
        assert (zone / "name").read_text() == "package-0\n"
        max_range = int((zone / "max_energy_range_uj").read_text())
        assert max_range == (2**16 - 1) * 61035 // 1000
        # Read every 5 ms as a careful reader would, undoing wraps with the modulus.
        modulus = 2**16 * UNIT_UJ
        total, last, wraps = 0.0, read_uj(root, "intel-rapl:0"), 0
        first_truth = None
        for _ in range(200):
            time.sleep(0.005)
            value = read_uj(root, "intel-rapl:0")
            assert 0 <= value <= max_range
            if value < last:
                wraps += 1
                total += value + modulus - last
            else:
                total += value - last
            last = value
        assert wraps >= 10
        assert 0.5 * 60e6 < total < 2 * 60e6  # about a second at 60 W
    finally:
        stop(process)
    truth = json.loads(truth_file.read_text())
    assert set(truth["domains"]) == {"package-0", "dram-0", "package-1", "dram-1"}
    seconds = truth["nanoseconds"] / 1e9
    # Constant power: the truth is the power times the time, to the microjoule.
    assert abs(truth["domains"]["package-0"]["microjoules"] - 60e6 * seconds) <= 1
    assert abs(truth["domains"]["dram-1"]["microjoules"] - 6e6 * seconds) <= 1
    # The tree stays, with the last update: the live truth file agrees with the JSON.
    live = (root / "kwatt_truth").read_text().splitlines()
    assert live[0] == "kwatt-simulated-rapl-truth 1"
    assert f"package-0 {truth['domains']['package-0']['microjoules']}" in live


def busy_and_total():
    fields = [int(v) for v in open("/proc/stat").readline().split()[1:9]]
    busy = fields[0] + fields[1] + fields[2] + fields[5] + fields[6] + fields[7]
    return busy, busy + fields[3] + fields[4]


def test_follow_cpu_power_is_idle_plus_dynamic_times_the_busy_fraction(tmp_path):
    root = tmp_path / "sys"
    process = start(root, "--layout", "intel-client", "--follow-cpu", "--watts", "package=5",
                    "--dynamic-watts", "package=200", "--period-ms", 10)
    truth = root / "kwatt_truth"

    def package_uj():
        for line in truth.read_text().splitlines():
            if line.startswith("package-0 "):
                return int(line.split()[1])
        raise AssertionError(truth.read_text())

    def watts_and_busy(seconds):
        e0, (b0, t0), m0 = package_uj(), busy_and_total(), time.monotonic()
        time.sleep(seconds)
        e1, (b1, t1), m1 = package_uj(), busy_and_total(), time.monotonic()
        return (e1 - e0) / 1e6 / (m1 - m0), (b1 - b0) / (t1 - t0)

    try:
        # This machine is shared: whatever its load, the power follows it. A busy process adds
        # to it.
        busy = subprocess.Popen(["python3", "-c", "while True: pass"])
        try:
            for _ in range(2):
                time.sleep(0.2)
                watts, fraction = watts_and_busy(1.5)
                assert abs(watts - (5 + 200 * fraction)) < 20, (watts, fraction)
                assert fraction > 0.3
        finally:
            busy.kill()
            busy.wait()
    finally:
        stop(process)


def test_refuses_bad_options(tmp_path):
    for args, message in [(["--counter-bits", 40], "--counter-bits"),
                          (["--watts", "gpu=3"], "KIND=WATTS"),
                          (["--layout", "arm"], "--layout"),
                          (["--dynamic-watts", "core=3"], "only with --follow-cpu")]:
        result = subprocess.run([KWATT, "simulate", "rapl", str(tmp_path / "x"), *map(str, args)],
                                capture_output=True, text=True, timeout=10)
        assert result.returncode == 2, result
        assert message in result.stderr
    (tmp_path / "y" / "class" / "powercap").mkdir(parents=True)
    result = subprocess.run([KWATT, "simulate", "rapl", str(tmp_path / "y")],
                            capture_output=True, text=True, timeout=10)
    assert result.returncode != 0 and "already holds a powercap tree" in result.stderr
