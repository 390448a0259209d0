"""`kwatt meter`'s Prometheus exposition read by a real Prometheus (Debian's /usr/bin/prometheus)
under process churn (issue 37, item 5): a simulated RAPL machine whose power follows this machine's
real CPU use (`kwatt simulate rapl --follow-cpu`), the meter attributing it to every process
(`--all-processes`), a Prometheus scraping it every second, and 5,000 short-lived processes started
over a minute. Read back through Prometheus's HTTP API, as a user's dashboard reads it: the sum of
the rates of the shares (idle, unattributed, other and every target) is the domain's rate within
0.5 %, no counter ever went down (`resets()` 0), and a target's series keeps its labels while its
counter goes on."""
import json
import re
import signal
import subprocess
import threading
import time
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

from conftest import KWATT
from test_meter import SimulatedRapl

PROMETHEUS = Path("/usr/bin/prometheus")
PROCESSES = 5000
CHURN_SECONDS = 60.0
WORKERS = 4  # processes started at once, at most
# A shell loop of N iterations: ~2 us each (dash), so 0.5-11 ms of CPU. Every 100th process runs
# it three times a second apart (`sleep 1`): alive, idle through whole intervals, busy again.
SPIN = "i=0; while [ $i -lt {n} ]; do i=$((i+1)); done"
BAR = 0.005  # issue 37: the sum over the shares within 0.5 % of the domain's


def stop(process, timeout=15):
    """Stops a peer by its pid: SIGTERM, then SIGKILL if it is still there after `timeout`."""
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=timeout)


@pytest.fixture
def peers():
    """Every process a test starts, stopped by its pid at the end, the last started first."""
    started = []
    yield started
    for process in reversed(started):
        stop(process)


def start_meter(peers, rapl, directory):
    """Every process a target, each with series of its own: `--max-targets` well above the ~50
    processes that use CPU in an interval, and the exposition keeping at most ten times that many,
    above the 250 to 1,500 targets a run sees. The churn's shells come and go as series of their
    own, not inside `other`."""
    err = open(directory / "meter.err", "w")
    meter = subprocess.Popen(
        [KWATT, "meter", "--sysfs-root", str(rapl.root), "--all-processes", "--max-targets",
         "1000", "--period", "1s", "--listen", "127.0.0.1:0"],
        stdout=subprocess.PIPE, stderr=err, text=True)
    err.close()
    peers.append(meter)
    url = meter.stdout.readline().strip()  # port 0: the meter prints the URL it got
    assert url.startswith("http://127.0.0.1:") and url.endswith("/metrics"), \
        (directory / "meter.err").read_text()
    return meter, url


def start_prometheus(peers, directory, metrics_url):
    """Prometheus scraping `metrics_url` every second, listening on a port the kernel chose (read
    from its log); returns its base URL once it answers ready."""
    config = directory / "prometheus.yml"
    config.write_text(
        "global:\n"
        "  scrape_interval: 1s\n"
        "  scrape_timeout: 1s\n"
        "scrape_configs:\n"
        "  - job_name: kwatt_meter\n"
        "    static_configs:\n"
        f"      - targets: ['{urllib.parse.urlsplit(metrics_url).netloc}']\n")
    log_path = directory / "prometheus.log"
    log = open(log_path, "w")
    prometheus = subprocess.Popen(
        [str(PROMETHEUS), f"--config.file={config}", f"--storage.tsdb.path={directory / 'tsdb'}",
         "--web.listen-address=127.0.0.1:0"],
        stdout=log, stderr=log)
    log.close()
    peers.append(prometheus)
    deadline = time.monotonic() + 60
    port = None
    while port is None:
        assert prometheus.poll() is None and time.monotonic() < deadline, log_path.read_text()
        found = re.search(r'msg="Listening on" address=127\.0\.0\.1:(\d+)', log_path.read_text())
        if found:
            port = int(found.group(1))
        else:
            time.sleep(0.1)
    base = f"http://127.0.0.1:{port}"
    while True:
        try:
            if urllib.request.urlopen(f"{base}/-/ready", timeout=10).status == 200:
                return base
        except OSError:
            pass
        assert prometheus.poll() is None and time.monotonic() < deadline, log_path.read_text()
        time.sleep(0.2)


def query(base, promql, at):
    """An instant query evaluated at `at` (seconds since the epoch): its result vector."""
    arguments = urllib.parse.urlencode({"query": promql, "time": f"{at:.3f}"})
    body = json.load(urllib.request.urlopen(f"{base}/api/v1/query?{arguments}", timeout=60))
    assert body["status"] == "success", body
    return body["data"]["result"]


def query_range(base, promql, start, end, step):
    arguments = urllib.parse.urlencode(
        {"query": promql, "start": f"{start:.3f}", "end": f"{end:.3f}", "step": step})
    body = json.load(urllib.request.urlopen(f"{base}/api/v1/query_range?{arguments}", timeout=60))
    assert body["status"] == "success", body
    return body["data"]["result"]


def by_domain(result):
    return {series["metric"]["domain"]: float(series["value"][1]) for series in result}


def churn(count, seconds, workers):
    """Starts `count` short-lived shells, spread evenly over `seconds` (as fast as the machine
    allows when it cannot keep up), `workers` at a time; returns (started, failures)."""
    lock = threading.Lock()
    state = {"next": 0, "failures": []}
    begin = time.monotonic()

    def work():
        while True:
            with lock:
                i = state["next"]
                if i >= count:
                    return
                state["next"] += 1
            wait = begin + i * seconds / count - time.monotonic()
            if wait > 0:
                time.sleep(wait)
            spin = SPIN.format(n=250 + (i * 7919) % 5000)  # varied, the same every run
            script = f"{spin}; sleep 1; {spin}; sleep 1; {spin}" if i % 100 == 0 else spin
            done = subprocess.run(["/bin/sh", "-c", script], capture_output=True)
            if done.returncode != 0:
                with lock:
                    state["failures"].append((i, done.returncode, done.stderr))

    threads = [threading.Thread(target=work) for _ in range(workers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return state["next"], state["failures"]


def test_sums_over_targets_keep_the_domains_energy_under_process_churn(tmp_path, peers):
    # A real peer: missing is a failure where `make deps` ran (it installs Debian's prometheus).
    assert PROMETHEUS.exists(), "Debian's prometheus is not installed: run make deps"
    rapl = SimulatedRapl(tmp_path / "sys", "--follow-cpu")
    peers.append(rapl.process)
    meter, metrics_url = start_meter(peers, rapl, tmp_path)
    prometheus = start_prometheus(peers, tmp_path, metrics_url)

    # Some scrapes before the churn, so that the window starts on series that already exist.
    deadline = time.monotonic() + 30
    while not query(prometheus, "count_over_time(kwatt_meter_reports_total[1m]) >= 2", time.time()):
        assert time.monotonic() < deadline and meter.poll() is None, \
            (tmp_path / "meter.err").read_text()
        time.sleep(0.5)

    churn_start = time.time()
    started, failures = churn(PROCESSES, CHURN_SECONDS, WORKERS)
    churn_end = time.time()
    assert not failures, failures[:3]
    # Until Prometheus holds a scrape made after the churn.
    deadline = time.monotonic() + 30
    while not query(prometheus, f"timestamp(kwatt_meter_reports_total) > {churn_end + 1:.3f}",
                    time.time()):
        assert time.monotonic() < deadline and meter.poll() is None, \
            (tmp_path / "meter.err").read_text()
        time.sleep(0.5)
    assert meter.poll() is None, (tmp_path / "meter.err").read_text()

    # The window: the churn's, from its first scrape to its last. Every series of one scrape has
    # the scrape's timestamp, so every series that lives through the window has a sample on each
    # of its ends, and rate() is its increase over the window exactly, the domain's too: no
    # extrapolation (Prometheus's estimate of what happened between a window's end and the
    # sample nearest it, by each series' mean slope, which does not add up over series that come
    # and go). Then the sum over the shares is the domain's whatever the churn, provided a
    # target's series begins at 0 (Prometheus cannot count the value a series first shows: no
    # rate at all for a series of one sample) and keeps its last value after the target ended
    # (one that vanishes in the window is extrapolated by half a scrape interval).
    scrapes = [float(t) for t, _ in query(
        prometheus, f"kwatt_meter_reports_total[{round(time.time() - churn_start) + 10}s]",
        time.time())[0]["values"]]
    first = min(t for t in scrapes if t >= churn_start)
    last = max(t for t in scrapes if t <= churn_end)
    window = f"{round((last - first) * 1000) + 1}ms"  # the first scrape in, however the range ends
    domains = by_domain(query(
        prometheus, f"sum by (domain) (rate(kwatt_meter_domain_energy_joules_total[{window}]))",
        last))
    shares = by_domain(query(
        prometheus, f"sum by (domain) (rate(kwatt_meter_energy_joules_total[{window}]))", last))
    kinds = query(prometheus, "sum by (domain, kind) (rate(kwatt_meter_energy_joules_total"
                  f"{{kind=~\"idle|unattributed|other\"}}[{window}]))", last)
    resets = query(prometheus, f"resets(kwatt_meter_energy_joules_total[{window}])", last)
    domain_resets = query(prometheus, f"resets(kwatt_meter_domain_energy_joules_total[{window}])",
                          last)
    # For information: the doc's own query, every second of the churn, against the domain's
    # over the same 10 s, windows that fall between scrapes (extrapolated).
    ten_seconds = query_range(
        prometheus, "sum by (domain) (rate(kwatt_meter_energy_joules_total[10s])) / "
        "sum by (domain) (rate(kwatt_meter_domain_energy_joules_total[10s]))",
        churn_start + 10, churn_end, "1s")

    # A target's series are known by their labels: a target whose labels changed in the window
    # (a process that exec'd, a kworker that took other work) has series that stop and start
    # again while its counter goes on, each counting part of its energy again.
    names = {}
    for series in resets:
        if "target" in series["metric"]:
            key = (series["metric"]["domain"], series["metric"]["target"])
            names.setdefault(key, set()).add(series["metric"].get("name", ""))
    relabelled = sorted((key, sorted(labels)) for key, labels in names.items() if len(labels) > 1)
    keys = {target for _, target in names}
    shells = {key[1] for key, labels in names.items() if labels == {"sh"}}
    differences = {domain: shares[domain] / domains[domain] - 1 for domain in domains}
    went_down = [s for s in resets + domain_resets if float(s["value"][1]) != 0]
    print(f"\n{started} processes started (/bin/sh; 50 of them also ran sleep twice) in "
          f"{churn_end - churn_start:.1f} s; window {window} between two scrapes")
    print(f"series in the window: {len(resets)} of shares over {len(domains)} domains "
          f"({len(keys)} targets, {len(shells)} of them shells of the churn), "
          f"{len(domain_resets)} of domains; {len(relabelled)} target series relabelled")
    for domain in sorted(domains):
        parts = {s["metric"]["kind"]: float(s["value"][1]) for s in kinds
                 if s["metric"]["domain"] == domain}
        print(f"{domain}: domain {domains[domain]:.4f} W, sum of the shares {shares[domain]:.4f} W "
              f"({differences[domain]:+.4%}); of which "
              + ", ".join(f"{kind} {watts:.4f} W" for kind, watts in sorted(parts.items())))
    for series in ten_seconds:
        ratios = [float(value) for _, value in series["values"]]
        print(f"{series['metric']['domain']}: rate[10s] shares/domain at {len(ratios)} points: "
              f"mean {sum(ratios) / len(ratios) - 1:+.4%}, "
              f"min {min(ratios) - 1:+.4%}, max {max(ratios) - 1:+.4%}")
    print(f"resets(): {len(went_down)} series whose counter went down")

    assert started == PROCESSES
    assert set(domains) == {"package-0", "package-1", "dram-0", "dram-1"}, domains
    assert set(shares) == set(domains), shares
    assert not went_down, went_down[:5]
    for domain, difference in differences.items():
        assert abs(difference) <= BAR, \
            f"{domain}: the shares' rates add up to {shares[domain]:.4f} W, the domain's is " \
            f"{domains[domain]:.4f} W ({difference:+.3%}, the bar is {BAR:.1%})"
    assert not relabelled, ("a target's labels changed while its counter went on", relabelled[:3])
