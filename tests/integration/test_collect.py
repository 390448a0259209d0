"""`kwatt collect` against real peers (Debian's prometheus-node-exporter, a real PostgreSQL), then
`kwatt serve --store`, `kwatt fetch` and the store's rows: what a lab running kwatt's collector
gets (doc/collect.md)."""
import json
import select
import signal
import subprocess
import time
from pathlib import Path

import pytest
import requests

from conftest import KWATT, PEERS, RunningPostgres, run_kwatt, start_server, wait_until
from throwaway_peer import ThrowawayPeer


class NodeExporter(ThrowawayPeer):
    """Debian's prometheus-node-exporter on 127.0.0.1 (kwatt_test_peers node_exporter), with a
    textfile directory the test writes series into."""

    def __init__(self, directory):
        self.textfiles = Path(directory) / "textfiles"
        self.textfiles.mkdir()
        super().__init__(PEERS, "node_exporter", self.textfiles)
        self.port = self.where["port"]

    def write(self, text):
        partial = self.textfiles / "test.prom.partial"
        partial.write_text(text)
        partial.rename(self.textfiles / "test.prom")  # the exporter reads *.prom files whole

    def stop(self):
        self.close()


@pytest.fixture
def exporter(tmp_path):
    running = NodeExporter(tmp_path)
    yield running
    running.stop()


def write_config(directory, descriptions):
    directory = Path(directory)
    directory.mkdir(exist_ok=True)
    (directory / "metrics.yaml").write_text(json.dumps(descriptions))
    return directory


class Collecting:
    """`kwatt collect` running in the background, its own /metrics on a port the kernel chose: the
    tests wait for what it says it counted (polls started, rows written, errors), never for an
    amount of time. A collector a test left running (a wait that failed) is stopped after it
    (`collectors_stopped`)."""

    running = []

    def __init__(self, config, store, *args):
        self.process = subprocess.Popen(
            [KWATT, "collect", "--config", str(config), "--store", str(store),
             "--listen", "127.0.0.1:0", *map(str, args)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        Collecting.running.append(self)
        # Its first line is its /metrics URL, once it listens.
        said, _, _ = select.select([self.process.stdout], [], [], 60)
        self.metrics_url = self.process.stdout.readline().strip() if said else ""
        if not self.metrics_url.startswith("http://127.0.0.1:"):
            self.process.kill()
            raise RuntimeError(f"kwatt collect did not start: {self.process.stderr.read()}")

    def own(self, name, device=None):
        """The collector's series `name` on its /metrics: its total (`device` None), or the sum over
        the devices whose (redacted) URL contains `device`."""
        answer = requests.get(self.metrics_url, timeout=5)
        answer.raise_for_status()
        series = []
        for line in answer.text.splitlines():
            labelled, _, value = line.rpartition(" ")
            family, _, labels = labelled.partition("{")
            if family == name:
                series.append((labels.partition('device="')[2].partition('"')[0], float(value)))
        if device is not None:
            series = [(label, value) for label, value in series if label and device in label]
        assert series, f"{name} of {device or 'the collector'} is not on its /metrics"
        totals = [value for label, value in series if not label]
        return totals[0] if totals else sum(value for _, value in series)

    def until(self, name, at_least, device=None, timeout=30):
        """Waits until the collector's `name` (as own() gives it) reaches `at_least`."""
        return wait_until(lambda: self.own(name, device) >= at_least,
                          f"{name} of {device or 'the collector'} >= {at_least}", timeout=timeout)

    def stop(self, sig=signal.SIGTERM):
        self.process.send_signal(sig)
        out, err = self.process.communicate(timeout=30)
        Collecting.running.remove(self)
        return self.process.returncode, err


@pytest.fixture(autouse=True)
def collectors_stopped():
    """After each test, stops the collectors it left running (SIGTERM, so that a collector stops
    its own children: a wattmeter's stream), then kills what does not stop."""
    yield
    while Collecting.running:
        collecting = Collecting.running.pop()
        if collecting.process.poll() is None:
            collecting.process.terminate()
            try:
                collecting.process.communicate(timeout=30)
            except subprocess.TimeoutExpired:
                collecting.process.kill()
                collecting.process.communicate()


def store_rows(store, *args):
    done = run_kwatt("store", "cat", store, *args)
    assert done.returncode == 0, done.stderr
    return [json.loads(line) for line in done.stdout.splitlines()]


def epoch(row):
    from datetime import datetime
    return datetime.fromisoformat(row["timestamp"]).timestamp()


def test_a_configuration_is_checked_whole_before_anything_starts(tmp_path, exporter):
    good = write_config(tmp_path / "good", [
        {"name": "node", "device_id": "nova-1", "url": f"prometheus://127.0.0.1:{exporter.port}/"},
        {"name": "bmc_node_power_watt", "device_id": "nova-1",
         "url": "ipmisensor://admin:hunter2@nova-1-bmc/Power", "optional": True}])
    checked = run_kwatt("collect", "--config", good, "--check")
    assert checked.returncode == 0, checked.stderr
    assert b"2 metrics from 1 files, 2 devices" in checked.stdout
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "pdu.yaml").write_text(
        "- name: pdu_outlet_power_watt\n  device_id: pdu-1\n"
        "  url: ipmisensor://admin:hunter2@bmc:70000/Power\n")
    refused = run_kwatt("collect", "--config", bad, "--store", tmp_path / "s.store")
    assert refused.returncode == 2
    message = refused.stderr.decode()
    assert "pdu.yaml, entry 1: url: has the port '70000'" in message
    assert "hunter2" not in message
    assert not (tmp_path / "s.store").exists()  # nothing started, no store made
    # Optional metrics follow a site's jobs: without --site, say so.
    needs_site = run_kwatt("collect", "--config", good, "--store", tmp_path / "s.store")
    assert needs_site.returncode == 2 and b"give --site" in needs_site.stderr


def test_node_exporter_rows_reach_the_api_within_a_second(tmp_path, exporter):
    exporter.write('kwatt_test_power{psu="1"} 123\n'
                   'kwollect_custom{_metric_id="experiment_phase",_timestamp="1764633600.5",'
                   'phase="warmup"} 2\n')
    config = write_config(tmp_path / "conf", [
        {"name": "node", "device_id": "nova-1", "update_every": 200,
         "url": f"prometheus://127.0.0.1:{exporter.port}/node_load1-kwatt_test_power-kwollect_custom"}])
    store = tmp_path / "s.store"
    collecting = Collecting(config, store, "--id", "collector-1")
    server = None
    try:
        server = start_server(store=store)

        def served(value, since):
            rows = requests.get(server.url + "/sites/lyon/metrics", timeout=5, params={
                "nodes": "nova-1", "metrics": "prom_kwatt_test_power",
                "start_time": int(since) - 5}).json()
            return any(r["value"] == value for r in rows) and time.time()

        wait_until(lambda: served(123, time.time()), "the first value through the API")
        # A change on the device is seen through the API within a second of being read.
        exporter.write('kwatt_test_power{psu="1"} 456\n')
        changed = time.time()
        seen = wait_until(lambda: served(456, changed), "the changed value through the API",
                          timeout=5, every=0.02)
        # Read at the next poll (200 ms), written within the flush interval (500 ms): 0.7 s at
        # most on a quiet machine; the bound leaves room for a loaded one.
        assert seen - changed < 2.0, seen - changed
        assert collecting.own("kwatt_collect_polls_total", "prometheus://127.0.0.1:") >= 2
        fetched = run_kwatt("fetch", "--api", server.url, "--nodes", "nova-1.lyon", "--metrics",
                            "prom_kwatt_test_power,experiment_phase", "--custom-metrics",
                            "--start", int(changed) - 60, "--end", int(time.time()) + 1)
        assert fetched.returncode == 0, fetched.stderr
        rows = [json.loads(line) for line in fetched.stdout.splitlines()]
        power = [r for r in rows if r["metric_id"] == "prom_kwatt_test_power"]
        assert power and {r["value"] for r in power} <= {123, 456}
        assert all(r["labels"] == {"psu": "1"} for r in power)
    finally:
        code, err = collecting.stop()
        if server:
            server.stop()
    assert code == 0, err
    rows = store_rows(store)
    custom = [r for r in rows if r["metric_id"] == "experiment_phase"]
    assert custom and custom[0]["timestamp"] == "2025-12-02T01:00:00.5+01:00"
    assert custom[0]["labels"]["_metric_origin"] == "prom_kwollect_custom"
    load = [epoch(r) for r in rows if r["metric_id"] == "prom_node_load1"]
    gaps = [b - a for a, b in zip(load, load[1:])]
    assert gaps and max(gaps) < 0.45 and min(gaps) > 0.05, gaps
    # SIGTERM wrote every row read, its own metrics included: the end line counts them all.
    written = int(err.strip().splitlines()[-1].split("kwatt collect: ")[1].split()[0])
    assert written == len(rows)
    assert any(r["device_id"] == "collector-1" and r["metric_id"] == "kwatt_collect_polls_total"
               for r in rows)


def test_a_monitor_job_switches_optional_metrics_on_for_its_nodes(tmp_path, exporter):
    exporter.write("kwatt_test_power 7\n")
    config = write_config(tmp_path / "conf", [
        {"name": "node", "device_id": "pdu-3", "update_every": 100,
         "url": f"prometheus://127.0.0.1:{exporter.port}/node_load1"},
        {"name": "node_hf", "device_id": "pdu-3", "update_every": 100, "optional": True,
         "labels": {"_device_alias": "nova-4"},
         "url": f"prometheus://127.0.0.1:{exporter.port}/kwatt_test_power"}])
    store = tmp_path / "s.store"
    collecting = Collecting(config, store, "--site", "lyon", "--id", "")
    try:
        collecting.until("kwatt_collect_polls_total", 1, device="/node_load1")
        added = run_kwatt("jobs", "add", "--store", store, "--site", "lyon", "--nodes", "nova-4",
                          "--types", "monitor=node_h")  # a description's name, from its start
        assert added.returncode == 0, added.stderr
        job = added.stdout.decode().strip()
        started = time.time()
        wait_until(lambda: sum(r["metric_id"] == "prom_kwatt_test_power"
                               for r in store_rows(store)) >= 5, "the promoted metric's rows",
                   every=0.25)
        ended = run_kwatt("jobs", "end", job, "--store", store, "--site", "lyon")
        assert ended.returncode == 0, ended.stderr
        stopped = time.time()
        # The jobs are read again every second: 15 more polls of the device (1.5 s of them) see
        # the job's end read and the promoted metric no longer asked for.
        polled = collecting.own("kwatt_collect_polls_total", "/node_load1")
        collecting.until("kwatt_collect_polls_total", polled + 15, device="/node_load1")
        listed = run_kwatt("jobs", "list", "--store", store, "--site", "lyon", "--json")
        assert json.loads(listed.stdout)["stop"] is not None
    finally:
        code, err = collecting.stop()
    assert code == 0, err
    promoted = [epoch(r) for r in store_rows(store) if r["metric_id"] == "prom_kwatt_test_power"]
    assert len(promoted) >= 5
    # Read only while the job ran (jobs are read again every second).
    assert min(promoted) >= started - 0.1 and max(promoted) <= stopped + 1.2, (started, promoted)


def test_kill_9_loses_at_most_the_last_second_and_a_restart_goes_on(tmp_path, exporter):
    config = write_config(tmp_path / "conf", [
        {"name": "node", "device_id": "nova-1", "update_every": 100,
         "url": f"prometheus://127.0.0.1:{exporter.port}/node_load1"}])
    store = tmp_path / "s.store"
    collecting = Collecting(config, store, "--id", "")
    collecting.until("kwatt_collect_rows_written_total", 10)
    killed = time.time()
    collecting.process.kill()
    collecting.process.wait()
    rows = store_rows(store)
    assert rows and killed - epoch(rows[-1]) < 1.0, killed - epoch(rows[-1])
    again = Collecting(config, store, "--id", "")
    again.until("kwatt_collect_rows_written_total", 10)
    code, err = again.stop()
    assert code == 0, err
    after = [epoch(r) for r in store_rows(store)]
    assert len(after) > len(rows) + 5 and max(after) > killed + 0.5
    check = run_kwatt("store", "check", store)
    assert check.returncode == 0, check.stderr


def test_rows_wait_while_postgresql_is_down_and_none_is_lost(tmp_path, exporter):
    postgres = RunningPostgres()
    try:
        uri = postgres.new_database()
        config = write_config(tmp_path / "conf", [
            {"name": "node", "device_id": "nova-1", "update_every": 100,
             "url": f"prometheus://127.0.0.1:{exporter.port}/node_load1"}])
        collecting = Collecting(config, uri, "--id", "", "--memory-rows", "5",
                                "--spool", tmp_path / "spool")
        collecting.until("kwatt_collect_rows_written_total", 5)
        postgres.stop()
        down = time.time()
        # The store fails; the polls go on for 2 s (20 of them) into memory, then the spool.
        collecting.until("kwatt_collect_store_errors_total", 1)
        collecting.until("kwatt_collect_polls_total", collecting.own("kwatt_collect_polls_total")
                         + 20)
        assert collecting.own("kwatt_collect_rows_spooled") > 0
        postgres.start()
        up = time.time()
        # Retries back off to 2 s, then 4 s: wait until one after `up` wrote what waited.
        wait_until(lambda: collecting.own("kwatt_collect_last_write_timestamp_seconds") > up
                   and collecting.own("kwatt_collect_rows_spooled") == 0, "the spool written")
        code, err = collecting.stop()
        assert code == 0, err
        assert "the store" in err  # the outage was told
        last = err.strip().splitlines()[-1]
        assert " 0 rows spooled, 0 dropped" in last, last
        rows = store_rows(uri)
        times = [epoch(r) for r in rows]
        assert len(times) == int(last.split("kwatt collect: ")[1].split()[0])
        # Polls went on during the outage: no hole in the series.
        assert any(down < t < up for t in times)
        gaps = [b - a for a, b in zip(times, times[1:])]
        assert max(gaps) < 1.0, max(gaps)
    finally:
        postgres.close()


class Peer(ThrowawayPeer):
    """A real SNMP agent or BMC (kwatt_test_peers snmpd or ipmi_sim: Debian's snmpd, OpenIPMI's
    ipmi_sim, configured as the C++ tests configure them)."""

    def __init__(self, kind):
        super().__init__(PEERS, kind)

    def set(self, *words):
        answer = self.command("set " + " ".join(map(str, words)))
        assert answer == "ok", answer

    def stop(self):
        self.close()


LAB = {"sites": [{"uid": "lab", "clusters": [{
    "uid": "rack", "nodes": ["rack-1", "rack-2"],
    "metrics": [
        {"name": "wattmetre_power_watt", "period": 1000, "optional_period": 20,
         "source": {"protocol": "wattmetre"}},
        {"name": "pdu_outlet_power_watt", "period": 200, "source": {"protocol": "snmp"}},
        {"name": "bmc_node_power_watt", "period": 1000, "source": {"protocol": "ipmisensor"}},
        {"name": "network_ifacein_bytes_total", "period": 500, "source": {"protocol": "snmp"}},
        {"name": "prom_node_load1", "period": 500, "source": {"protocol": "prometheus"}}]}]}]}


def test_a_lab_collected_from_real_devices_is_served_fetched_and_its_energy_computed(
        tmp_path, exporter):
    snmp = Peer("snmpd")
    bmc = Peer("ipmi_sim")
    servers = []
    try:
        pass_oid = snmp.where["pass_oid"]
        snmp.set(1, "gauge", 1200)  # rack-1's PSUs on outlets 1 and 2 (tenths of a watt)
        snmp.set(2, "gauge", 800)
        bmc.set(bmc.where["power_sensor"], 180)
        config = write_config(tmp_path / "conf", [
            *[{"name": "pdu_outlet_power_watt", "device_id": f"lab-pdu-port-{outlet}",
               "url": f"{snmp.where['url']}/{pass_oid}.{outlet}", "update_every": 200,
               "scale_factor": 0.1, "labels": {"_device_alias": "rack-1"}} for outlet in (1, 2)],
            {"name": "network_ifacein_bytes_total", "device_id": "lab-switch-port-7",
             "url": snmp.where["url"] + "/1.3.6.1.2.1.31.1.1.1.6.{{ 1.3.6.1.2.1.31.1.1.1.1 == lo }}",
             "update_every": 500, "labels": {"interface": "lo", "_device_alias": "rack-2"}},
            {"name": "bmc_node_power_watt", "device_id": "rack-2", "url": bmc.where["power_url"],
             "update_every": 1000},
            {"name": "prom", "device_id": "rack-2", "update_every": 500,
             "url": f"prometheus://127.0.0.1:{exporter.port}/node_load1"}])
        testbed = tmp_path / "lab.json"
        testbed.write_text(json.dumps(LAB))
        store = tmp_path / "lab.store"
        collecting = Collecting(config, store, "--id", "")

        def stored(at_least):
            """Whether the store holds `at_least[metric]` rows of each metric (or of a metric at
            a value: `at_least[metric, value]`)."""
            rows = store_rows(store)
            return all(sum(r["metric_id"] == key[0] and r["value"] == key[1] if type(key) is tuple
                           else r["metric_id"] == key for r in rows) >= count
                       for key, count in at_least.items())

        # Every device read a few times (the BMC every second), the second outlet at 80 W.
        wait_until(lambda: stored({"bmc_node_power_watt": 2, "network_ifacein_bytes_total": 2,
                                   "prom_node_load1": 2, ("pdu_outlet_power_watt", 80): 5}),
                   "every device's rows in the store", every=0.25)
        snmp.set(2, "gauge", 1000)  # the second PSU draws 20 W more
        wait_until(lambda: stored({("pdu_outlet_power_watt", 100): 5}),
                   "the second PSU's 100 W in the store", every=0.25)
        code, err = collecting.stop()
        assert code == 0, err
        assert "failed), 0 rows spooled, 0 dropped" in err and " 0 failed)" in err, err
        server = start_server("--testbed", testbed, store=store)
        servers.append(server)
        rows = [json.loads(line) for line in run_kwatt(
            "fetch", "--api", server.url, "--nodes", "rack-1.lab,rack-2.lab",
            "--start", int(time.time()) - 60, "--end", int(time.time()) + 1).stdout.splitlines()]
        pdu = [r for r in rows if r["metric_id"] == "pdu_outlet_power_watt"]
        assert pdu and all(r["device_id"] == "rack-1" for r in pdu)
        # Both outlets read in one request, summed into the node's row as Kwollect's API does.
        assert all(r["labels"] == {"_device_orig": ["lab-pdu-port-1", "lab-pdu-port-2"]}
                   for r in pdu)
        assert {r["value"] for r in pdu} == {200, 220}
        bmc_rows = [r for r in rows if r["metric_id"] == "bmc_node_power_watt"]
        assert bmc_rows and {r["value"] for r in bmc_rows} == {180}
        network = [r for r in rows if r["metric_id"] == "network_ifacein_bytes_total"]
        assert network and network[0]["labels"] == {"interface": "lo",
                                                    "_device_orig": ["lab-switch-port-7"]}
        assert [r["value"] for r in network] == sorted(r["value"] for r in network)
        assert any(r["metric_id"] == "prom_node_load1" for r in rows)
        # kwatt energy over the PDU rows: 200 W, then 220 W.
        first, last = min(epoch(r) for r in pdu), max(epoch(r) for r in pdu)
        energy = run_kwatt("energy", "--api", server.url, "--nodes", "rack-1.lab",
                           "--start", f"{first:.6f}", "--end", f"{last:.6f}", "--json")
        assert energy.returncode == 0, energy.stderr
        report = json.loads(energy.stdout)
        node = report["nodes"][0]
        assert node["metric"] == "pdu_outlet_power_watt"
        assert 200 * (last - first) < node["window"]["joules"] < 220 * (last - first)
        # The Python package, as a notebook uses it, on the lab's store.
        import kwatt
        k = kwatt.Kwollect(nodes=["rack-1.lab", "rack-2.lab"], api=server.url, progress=False)
        k.start(first)
        k.stop(last)
        frame = k.to_pandas()
        assert set(frame["metric_id"]) >= {"pdu_outlet_power_watt", "bmc_node_power_watt"}
        e = k.energy()
        window = e[(e["scope"] == "node") & (e["phase"] == "window")].set_index("name")
        assert window.loc["rack-1.lab.grid5000.fr", "joules"] == pytest.approx(node["window"]["joules"])
        assert window.loc["rack-2.lab.grid5000.fr", "metric"] == "bmc_node_power_watt"
        assert window.loc["rack-2.lab.grid5000.fr", "joules"] == pytest.approx(180 * (last - first), rel=0.1)
    finally:
        for server in servers:
            server.stop()
        snmp.stop()
        bmc.stop()


def test_a_simulated_wattmeter_collected_gives_the_true_energy(tmp_path):
    """`kwatt simulate wattmetre` as the collector's command: nova-1 (2 PSUs) under a monitor job
    at 50 Hz, nova-4 averaged per second; `kwatt energy` through `kwatt serve --store` within
    0.1 % of the simulator's truth (`kwatt simulate energy`)."""
    mapping = tmp_path / "wattmetre1.yaml"
    stream = [KWATT, "simulate", "wattmetre", "--id", "wattmetre1", "--nodes",
              "nova-1,nova-1,nova-4"]
    made = run_kwatt(*stream[1:], "--fast", "--duration", "0.02", "--mapping-out", mapping)
    assert made.returncode == 0, made.stderr
    config = write_config(tmp_path / "conf", [{
        "name": "wattmetre_power_watt", "device_id": "wattmetre1", "url": "wattmetre://wattmetre1/",
        "command": stream, "mapping": str(mapping)}])
    store = tmp_path / "s.store"
    added = run_kwatt("jobs", "add", "--store", store, "--site", "lyon", "--nodes", "nova-1",
                      "--types", "monitor=wattmetre_power_watt")
    assert added.returncode == 0, added.stderr
    collecting = Collecting(config, store, "--site", "lyon", "--id", "")
    # 8 s of the stream (6 whole seconds of nova-4's means), read at 50 lines a second from its
    # first second on.
    lines = "kwatt_collect_stream_lines_total"
    collecting.until(lines, 50, device="wattmetre1")
    first, began = collecting.own(lines, "wattmetre1"), time.monotonic()
    collecting.until(lines, 8 * 50, device="wattmetre1")
    last, ended = collecting.own(lines, "wattmetre1"), time.monotonic()
    assert 40 < (last - first) / (ended - began) < 60, (first, last, ended - began)
    # The stream's own counters: no gap, nothing malformed.
    assert collecting.own("kwatt_collect_stream_gaps_total", "wattmetre1") == 0
    assert collecting.own("kwatt_collect_stream_malformed_lines_total", "wattmetre1") == 0
    code, err = collecting.stop()
    assert code == 0, err
    server = start_server(store=store)
    try:
        def energy(node, start, end):
            done = run_kwatt("energy", "--api", server.url, "--nodes", node, "--start",
                             f"{start:.3f}", "--end", f"{end:.3f}", "--json")
            assert done.returncode == 0, done.stderr
            return json.loads(done.stdout)["nodes"][0]

        def truth(node, start, end):
            done = run_kwatt("simulate", "energy", "--node", node, "--start", f"{start:.3f}",
                             "--end", f"{end:.3f}", "--json")
            assert done.returncode == 0, done.stderr
            return json.loads(done.stdout)["joules"]

        rows = store_rows(store, "--nodes", "nova-1,nova-4")
        fast = [epoch(r) for r in rows if r["device_id"] == "nova-1"]
        slow = [epoch(r) for r in rows if r["device_id"] == "nova-4"]
        assert len(fast) > 40 * 6 and len(slow) <= 10
        assert all(r["labels"]["_device_orig"] == ["wattmetre1-port0", "wattmetre1-port1"]
                   for r in rows if r["device_id"] == "nova-1")
        # Whole seconds inside what was collected (the first and last seconds are partial).
        start, end = int(min(slow)) + 1, int(max(slow))
        assert end - start >= 5
        # nova-1's rows are its 50 Hz values. nova-4's are the means of whole seconds stamped at
        # their start, as Grid'5000's are: the mean of [t, t+1) is the power at t + 0.5, so
        # trapezoids over [start, end] integrate [start + 0.5, end + 0.5] (against the unshifted
        # truth, this simulated node's errors reached 0.13 % over 7 s; against the shifted, 0.015 %).
        for node, shift in (("nova-1.lyon", 0), ("nova-4.lyon", 0.5)):
            measured = energy(node, start, end)
            assert measured["metric"] == "wattmetre_power_watt"
            assert measured["window"]["joules"] == pytest.approx(
                truth(node, start + shift, end + shift), rel=1e-3), node
    finally:
        server.stop()


def test_no_password_or_community_reaches_the_logs_the_store_or_the_metrics(tmp_path, exporter):
    bmc = Peer("ipmi_sim")
    snmp = Peer("snmpd")
    try:
        wrong_bmc = bmc.where["power_url"].replace("kwatt:pw", "kwatt:hunter2x", 1)
        host_port = snmp.where["url"].split("@", 1)[1]
        config = write_config(tmp_path / "conf", [
            {"name": "bmc_node_power_watt", "device_id": "rack-1", "url": wrong_bmc,
             "update_every": 500},
            {"name": "pdu", "device_id": "pdu-1", "update_every": 300,
             "url": f"snmp://s3cretcommunity@{host_port}/1.3.6.1.2.1.1.3.0"},
            {"name": "node", "device_id": "rack-1", "update_every": 300,
             "url": f"prometheus://user:promsecret@127.0.0.1:{exporter.port}/node_load1"}])
        store = tmp_path / "s.store"
        collecting = Collecting(config, store)
        for device in ("snmp://", "ipmisensor://"):
            collecting.until("kwatt_collect_errors_total", 1, device=device)
        collecting.until("kwatt_collect_readings_total", 2, device="prometheus://")
        own = requests.get(collecting.metrics_url, timeout=5).text
        code, err = collecting.stop()
        assert code == 0, err
        # Both failing devices were told about, by their redacted URLs.
        assert "snmp://***@" in err and "ipmisensor://kwatt:***@" in err, err
        assert 'kwatt_collect_errors_total{device="snmp://***@' in own
        stored = run_kwatt("store", "cat", store).stdout.decode()
        assert "kwatt_collect_errors_total" in stored and "prom_node_load1" in stored
        for secret in ("hunter2x", "s3cretcommunity", "promsecret", "pw#9"):
            for text, where in ((err, "stderr"), (own, "/metrics"), (stored, "the store")):
                assert secret not in text, (secret, where)
    finally:
        bmc.stop()
        snmp.stop()
