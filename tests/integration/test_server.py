"""`kwatt serve --simulate` through HTTP: every rule of doc/kwollect_api.md the server promises."""
import json
import re
import signal
import statistics
import subprocess
import time
from datetime import datetime, timezone
from zoneinfo import ZoneInfo

import pytest
import requests

from conftest import KWATT, port_is_free, start_server

PARIS = ZoneInfo("Europe/Paris")
T0 = 1744977600  # 2025-04-18T14:00:00+02:00

JOBS = {
    "jobs": [
        {"site": "lyon", "uid": 1001, "user": "alice", "nodes": ["nova-1", "nova-4", "taurus-3"],
         "started_at": T0, "stopped_at": T0 + 1800, "types": ["monitor=wattmetre_power_watt"],
         "phases": [{"name": "idle", "duration": 600, "cpu": 0},
                    {"name": "busy", "duration": 600, "cpu": 1, "network": 0.5},
                    {"name": "idle2", "duration": 600, "cpu": 0}]},
        {"site": "grenoble", "uid": 2001, "nodes": ["yeti-1"], "started_at": T0,
         "stopped_at": T0 + 3600, "types": ["monitor"]},
        {"site": "nantes", "uid": 3001, "nodes": ["ecotype-7"], "started_at": T0,
         "stopped_at": T0 + 3600, "types": ["deploy"]},
        {"site": "lyon", "uid": 1002, "nodes": ["nova-5"], "started_at": T0,
         "stopped_at": T0 + 600, "types": ["monitor=power"]},
        {"site": "lyon", "uid": 1003, "nodes": ["nova-6"], "started_at": 4102444800,
         "types": []},
    ]
}

ROW = re.compile(
    r'^\{"timestamp":"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d{1,6})?[+-]\d\d:\d\d)",'
    r'"device_id":"([^"]+)","metric_id":"([^"]+)","value":([^,]+),"labels":(\{.*\})\}$')


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    s = start_server(jobs=JOBS, tmp_path=tmp_path_factory.mktemp("jobs"))
    yield s
    s.stop()


def get(server, path, **params):
    return requests.get(server.url + path, params=params, timeout=60)


def metrics(server, site, **params):
    response = get(server, f"/sites/{site}/metrics", **params)
    assert response.status_code == 200, response.text
    return response


def row_texts(body):
    """The rows of an answer as the exact texts the server sent."""
    assert body.startswith("[") and body.endswith("]")
    inner = body[1:-1]
    return [] if not inner else inner.split(",\n")


def utc_of(timestamp):
    return datetime.fromisoformat(timestamp).timestamp()


def paris_text(epoch):
    """Kwollect's rendering of an instant, computed independently with zoneinfo."""
    dt = datetime.fromtimestamp(epoch, PARIS)
    text = dt.isoformat(timespec="microseconds")
    head, offset = text[:-6], text[-6:]
    if "." in head:
        head = head.rstrip("0").rstrip(".")
    return head + offset


# --- process life --------------------------------------------------------------------------------

def test_first_line_is_the_url_and_sigterm_frees_the_port(tmp_path):
    s = start_server(tmp_path=tmp_path)
    assert re.fullmatch(r"http://127\.0\.0\.1:\d+/stable", s.url)
    assert requests.get(s.url + "/sites", timeout=10).status_code == 200
    assert s.stop(signal.SIGTERM) == 0
    assert port_is_free(s.port)


def test_sigint_stops_cleanly_even_while_streaming(tmp_path):
    s = start_server(tmp_path=tmp_path)
    response = requests.get(s.url + "/sites/lyon/metrics", stream=True, timeout=30, params={
        "nodes": ",".join(f"nova-{i}" for i in range(4, 20)),
        "start_time": T0 - 86400 * 30, "end_time": T0})
    next(response.iter_content(4096))
    assert s.stop(signal.SIGINT) == 0
    assert port_is_free(s.port)


def test_bad_jobs_file_refuses_to_start_with_a_clear_message(tmp_path):
    path = tmp_path / "jobs.json"
    path.write_text(json.dumps({"jobs": [{"site": "lyon", "uid": 1, "nodes": ["nova-99"],
                                          "started_at": T0}]}))
    result = subprocess.run([KWATT, "serve", "--simulate", "--port", "0", "--jobs", str(path)],
                            capture_output=True, text=True, timeout=30)
    assert result.returncode == 2
    assert 'no node "nova-99" on site lyon' in result.stderr
    result = subprocess.run([KWATT, "serve", "--port", "0"], capture_output=True, text=True,
                            timeout=30)
    assert result.returncode == 2 and "--simulate" in result.stderr


# --- reference API -------------------------------------------------------------------------------

def test_sites_and_clusters_follow_the_reference(server):
    sites = get(server, "/sites").json()
    assert [s["uid"] for s in sites["items"]] == ["lyon", "nancy", "nantes", "rennes", "grenoble",
                                                  "lille"]
    assert sites["total"] == 6
    lyon = get(server, "/sites/lyon").json()
    assert lyon["uid"] == "lyon" and lyon["name"] == "Lyon"
    clusters = get(server, "/sites/lyon/clusters").json()["items"]
    assert sorted(c["uid"] for c in clusters) == ["nova", "taurus"]
    nova = get(server, "/sites/lyon/clusters/nova").json()
    with open(f"{__file__.rsplit('/', 3)[0]}/data/reference/clusters/lyon-nova.json") as f:
        reference = json.load(f)
    assert nova["metrics"] == reference["metrics"]
    nodes = get(server, "/sites/lyon/clusters/nova/nodes").json()["items"]
    assert [n["uid"] for n in nodes] == reference["nodes"]
    node = get(server, "/sites/lyon/clusters/nova/nodes/nova-1").json()
    assert node["network_adapters"][0]["switch"] == "force10"
    assert {"uid": "wattmetre1", "port": "7", "kind": "wattmetre-only"} in node["pdu"]
    assert get(server, "/sites/lyon").headers["Content-Type"].startswith("application/json")
    # /sid (the older prefix) serves the same collection, its links under /sid.
    stable = get(server, "/sites").json()
    sid = requests.get(server.url.replace("/stable", "/sid") + "/sites", timeout=10).json()
    assert sid == json.loads(json.dumps(stable).replace('"/stable', '"/sid'))
    assert [site["uid"] for site in sid["items"]] == [site["uid"] for site in stable["items"]]


@pytest.mark.parametrize("path, fragment", [
    ("/sites/nowhere", "Site 'nowhere' does not exist"),
    ("/sites/lyon/clusters/gemini", "Cluster 'gemini' does not exist on site lyon"),
    ("/sites/lyon/clusters/nova/nodes/nova-2", "Node 'nova-2' does not exist"),
    ("/sites/lyon/jobs/424242", "Job '424242' does not exist on site lyon"),
    ("/sites/nowhere/metrics", "Site 'nowhere' does not exist"),
    ("/no/such/thing", "No such resource"),
])
def test_unknown_things_are_404_with_their_name(server, path, fragment):
    response = get(server, path, nodes="x")
    assert response.status_code == 404
    assert fragment in response.json()["message"]


def test_jobs_api(server):
    job = get(server, "/sites/lyon/jobs/1001").json()
    assert job["uid"] == 1001 and job["state"] == "terminated"
    assert job["types"] == ["monitor=wattmetre_power_watt"]
    assert job["assigned_nodes"] == ["nova-1.lyon.grid5000.fr", "nova-4.lyon.grid5000.fr",
                                     "taurus-3.lyon.grid5000.fr"]
    assert job["started_at"] == T0 and job["stopped_at"] == T0 + 1800
    future = get(server, "/sites/lyon/jobs/1003").json()
    assert future["state"] == "waiting" and "stopped_at" not in future
    listing = get(server, "/sites/lyon/jobs").json()
    assert [j["uid"] for j in listing["items"]] == [1003, 1002, 1001]
    assert [j["uid"] for j in get(server, "/sites/lyon/jobs", state="waiting").json()["items"]] \
        == [1003]
    assert [j["uid"] for j in get(server, "/sites/lyon/jobs", user="alice").json()["items"]] \
        == [1001]
    page = get(server, "/sites/lyon/jobs", offset=1, limit=1).json()
    assert page["total"] == 3 and [j["uid"] for j in page["items"]] == [1002]


def test_running_job_has_no_stopped_at(tmp_path):
    s = start_server("--now", T0 + 60, jobs={"jobs": [
        {"site": "lyon", "uid": 5, "nodes": ["nova-1"], "started_at": T0, "walltime": 3600}]},
        tmp_path=tmp_path)
    try:
        job = requests.get(s.url + "/sites/lyon/jobs/5", timeout=10).json()
        assert job["state"] == "running" and "stopped_at" not in job
        # job_id: the window is [started_at, now].
        rows = requests.get(s.url + "/sites/lyon/metrics", timeout=10, params={
            "job_id": 5, "metrics": "wattmetre_power_watt"}).json()
        assert rows[0]["timestamp"] == paris_text(T0)
        assert utc_of(rows[-1]["timestamp"]) <= time.time() - (time.time() - T0 - 60) + 5
    finally:
        s.stop()


# --- the metrics query ---------------------------------------------------------------------------

def test_canonical_rows_of_kwollect_md(server):
    # The three canonical rows, with the simulator's own timestamps and values put in: the rest of
    # each text must be byte for byte the same.
    canonical = [
        ('{"timestamp":"2025-04-18T18:55:33.754307+02:00","device_id":"ecotype-7","metric_id":'
         '"bmc_node_power_watt","value":98,"labels":{}}', "nantes", "ecotype-7",
         "bmc_node_power_watt", 1744995333),
        ('{"timestamp":"2025-04-18T18:55:34.732712+02:00","device_id":"ecotype-6","metric_id":'
         '"network_ifacein_bytes_total","value":152601965318,"labels":{"interface":"eth1",'
         '"_device_orig":["ecotype-prod2-port-1_6"]}}', "nantes", "ecotype-6",
         "network_ifacein_bytes_total", 1744995334),
        ('{"timestamp":"2025-07-22T13:05:25+02:00","device_id":"taurus-7","metric_id":'
         '"wattmetre_power_watt","value":90.18,"labels":{"_device_orig":["wattmetre1-port6"]}}',
         "lyon", "taurus-7", "wattmetre_power_watt", 1753182325),
    ]
    for text, site, node, metric, epoch in canonical:
        body = metrics(server, site, nodes=node, metrics=metric, start_time=epoch - 7,
                       end_time=epoch + 7).text
        rows = [r for r in row_texts(body) if r.startswith('{"timestamp"')]
        want = ROW.match(text)
        matching = [r for r in rows if ROW.match(r) and ROW.match(r).group(5) == want.group(5)]
        assert matching, (text, body)
        got = ROW.match(matching[0])
        rebuilt = text.replace(want.group(1), got.group(1)).replace(
            f'"value":{want.group(4)}', f'"value":{got.group(4)}')
        assert matching[0] == rebuilt
        assert "." not in got.group(4) or metric == "wattmetre_power_watt"  # integral: no ".0"
        assert got.group(1) == paris_text(utc_of(got.group(1)))


def test_every_row_has_the_key_order_and_rows_are_ordered_by_time(server):
    body = metrics(server, "lyon", nodes="nova-1,nova-4", start_time=T0 + 590,
                   end_time=T0 + 610).text
    rows = row_texts(body)
    assert len(rows) > 2000
    times = []
    for text in rows:
        match = ROW.match(text)
        assert match, text
        assert match.group(1) == paris_text(utc_of(match.group(1)))
        assert not match.group(4).endswith(".0")
        times.append(utc_of(match.group(1)))
    assert times == sorted(times)
    assert {json.loads(r)["device_id"] for r in rows} == {"nova-1", "nova-4"}


def test_bounds_are_inclusive_on_both_ends(server):
    rows = metrics(server, "lyon", nodes="nova-1", metrics="wattmetre_power_watt",
                   start_time=T0 + 100, end_time=T0 + 101).json()
    assert len(rows) == 51  # 20 ms over [100 s, 101 s], both ends included
    assert rows[0]["timestamp"] == paris_text(T0 + 100)
    assert rows[-1]["timestamp"] == paris_text(T0 + 101)
    one = metrics(server, "lyon", nodes="nova-1", metrics="wattmetre_power_watt",
                  start_time=f"{T0 + 100}.02", end_time=f"{T0 + 100}.02").json()
    assert [r["timestamp"] for r in one] == [paris_text(T0 + 100.02)]
    assert one[0]["timestamp"].endswith(".02+02:00")  # trimmed fraction


def test_time_parameter_forms(server):
    expected = metrics(server, "lyon", nodes="nova-1", metrics="wattmetre_power_watt",
                       start_time=T0 - 10, end_time=T0 - 5).text
    for start, end in [("2025-04-18T13:59:50+02:00", "2025-04-18T11:59:55Z"),
                       ("2025-04-18T13:59:50", "2025-04-18 13:59:55"),   # Paris time
                       ("2025-04-18 13:59:50+02", f"{T0 - 5}.000000")]:
        assert metrics(server, "lyon", nodes="nova-1", metrics="wattmetre_power_watt",
                       start_time=start, end_time=end).text == expected, (start, end)
    bad = get(server, "/sites/lyon/metrics", nodes="nova-1", start_time="yesterday")
    assert bad.status_code == 400
    assert bad.json()["code"] == "22007" and '"yesterday"' in bad.json()["message"]
    assert "start_time" in bad.json()["details"]
    # A '+' that was not encoded arrives as a space: rejected, with the hint.
    raw = requests.get(server.url + "/sites/lyon/metrics?nodes=nova-1&end_time="
                       "2025-04-18T13:59:50+02:00", timeout=10)
    assert raw.status_code == 400 and "%2B" in raw.json()["details"]


def test_default_windows(tmp_path):
    now = T0 + 7200
    s = start_server("--now", now, tmp_path=tmp_path)
    try:
        def window(**params):
            rows = requests.get(s.url + "/sites/lyon/metrics", timeout=10, params={
                "nodes": "nova-1", "metrics": "wattmetre_power_watt", **params}).json()
            return utc_of(rows[0]["timestamp"]), utc_of(rows[-1]["timestamp"])
        assert window(start_time=T0) == (T0, T0 + 300)
        assert window(end_time=T0) == (T0 - 300, T0)
        first, last = window()
        assert now - 305 <= first <= now - 295 and now - 5 <= last <= now + 5
        # Nothing after the simulated now.
        rows = requests.get(s.url + "/sites/lyon/metrics", timeout=10, params={
            "nodes": "nova-1", "start_time": now + 10, "end_time": now + 100}).json()
        assert rows == []
    finally:
        s.stop()


def test_job_id_selects_nodes_and_window(server):
    rows = metrics(server, "lyon", job_id=1001, metrics="wattmetre_power_watt").json()
    assert {r["device_id"] for r in rows} == {"nova-1", "nova-4", "taurus-3"}
    assert rows[0]["timestamp"] == paris_text(T0)
    assert rows[-1]["timestamp"] == paris_text(T0 + 1800)
    assert len(rows) == 3 * (1800 * 50 + 1)
    # Explicit nodes and times override the job's.
    narrowed = metrics(server, "lyon", job_id=1001, nodes="nova-4", start_time=T0 + 10,
                       end_time=T0 + 11, metrics="wattmetre_power_watt").json()
    assert {r["device_id"] for r in narrowed} == {"nova-4"} and len(narrowed) == 51
    unknown = get(server, "/sites/lyon/metrics", job_id=999)
    assert unknown.status_code == 404 and "Job 999 not found" in unknown.json()["message"]
    assert get(server, "/sites/lyon/metrics", job_id="abc").status_code == 400


def test_missing_selector_error(server):
    # As Kwollect's get_metrics raises it (plpy.error: an internal error, which PostgREST answers
    # with a 500; tests/integration/test_kwollect_conformance.py).
    response = get(server, "/sites/lyon/metrics", start_time=T0)
    assert response.status_code == 500
    assert response.json() == {"hint": None, "details": None, "code": "XX000",
                               "message": "plpy.Error: Missing 'devices', 'nodes' or 'job_id' "
                                          "argument"}


def test_unknown_device_has_no_rows_as_in_kwollect(server):
    assert metrics(server, "lyon", nodes="nova-99", start_time=T0, end_time=T0 + 5).json() == []


def test_window_across_the_autumn_dst_change(server):
    # 2025-10-26: 03:00 CEST becomes 02:00 CET at 01:00 UTC.
    change = 1761440400
    rows = metrics(server, "lyon", nodes="taurus-7", metrics="wattmetre_power_watt",
                   start_time=change - 3, end_time=change + 2).json()
    assert [r["timestamp"] for r in rows] == [
        "2025-10-26T02:59:57+02:00", "2025-10-26T02:59:58+02:00", "2025-10-26T02:59:59+02:00",
        "2025-10-26T02:00:00+01:00", "2025-10-26T02:00:01+01:00", "2025-10-26T02:00:02+01:00"]
    # And the spring one, with jittered BMC timestamps: every row renders as zoneinfo does.
    spring = 1743296400
    rows = metrics(server, "lyon", nodes="taurus-7", start_time=spring - 60,
                   end_time=spring + 60).json()
    offsets = {r["timestamp"][-6:] for r in rows}
    assert offsets == {"+01:00", "+02:00"}
    for r in rows:
        assert r["timestamp"] == paris_text(utc_of(r["timestamp"]))
    assert [utc_of(r["timestamp"]) for r in rows] == sorted(utc_of(r["timestamp"]) for r in rows)


def test_alias_rows_and_device_rows(server):
    params = dict(metrics="wattmetre_power_watt", start_time=T0 - 30, end_time=T0 - 20)
    node = metrics(server, "lyon", nodes="nova-1", **params).json()
    port = metrics(server, "lyon", devices="wattmetre1-port7", **params).json()
    assert len(node) == len(port) == 11
    for n, p in zip(node, port):
        assert n["labels"] == {"_device_orig": ["wattmetre1-port7"]}
        assert p["device_id"] == "wattmetre1-port7" and p["labels"] == {}
        assert (n["timestamp"], n["value"]) == (p["timestamp"], p["value"])
    both = metrics(server, "lyon", nodes="nova-1", devices="wattmetre1-port7", **params).json()
    assert len(both) == 22
    # Network rows carry their interface.
    net = metrics(server, "lyon", nodes="nova-1", metrics="network_ifacein_bytes_total",
                  start_time=T0, end_time=T0 + 60).json()
    assert net and all(r["labels"] == {"interface": "eth0", "_device_orig": ["force10-port-25"]}
                       for r in net)


def test_two_psu_node_sums_its_ports(server):
    params = dict(metrics="wattmetre_power_watt", start_time=T0 - 5, end_time=T0 - 1)
    node = metrics(server, "grenoble", nodes="yeti-1", **params).json()
    ports = [metrics(server, "grenoble", devices=p, **params).json()
             for p in ("wattmetre1-port0", "wattmetre1-port1")]
    assert len(node) == 5
    for i, row in enumerate(node):
        assert row["labels"] == {"_device_orig": ["wattmetre1-port0", "wattmetre1-port1"]}
        assert row["value"] == ports[0][i]["value"] + ports[1][i]["value"]
        assert 0.4 < ports[0][i]["value"] / row["value"] < 0.6
        assert ports[0][i]["timestamp"] == ports[1][i]["timestamp"] == row["timestamp"]


def test_summary_buckets(server):
    start, end = T0 + 600, T0 + 1200 - 1  # the busy phase of job 1001
    summary = metrics(server, "lyon", nodes="nova-1", summary="true", start_time=start,
                      end_time=end, metrics="wattmetre_power_watt,network_ifacein_bytes_total")
    rows = summary.json()
    assert [r["timestamp"] for r in rows if r["metric_id"] == "wattmetre_power_watt"] == [
        "2025-04-18T14:10:00+02:00", "2025-04-18T14:15:00+02:00"]
    for row in rows:
        bucket = utc_of(row["timestamp"])
        raw = metrics(server, "lyon", nodes="nova-1", metrics=row["metric_id"],
                      start_time=int(bucket), end_time=f"{int(bucket) + 299}.999999").json()
        values = [r["value"] for r in raw]
        expected = max(values) if row["metric_id"].endswith("_total") else statistics.fmean(values)
        assert row["value"] == pytest.approx(expected, rel=1e-12)
        assert row["labels"] == raw[0]["labels"]
    for flag in ("True", "1", "yes", "t"):
        assert metrics(server, "lyon", nodes="nova-1", summary=flag, start_time=start,
                       end_time=end, metrics="wattmetre_power_watt").json() == \
            [r for r in rows if r["metric_id"] == "wattmetre_power_watt"]
    assert get(server, "/sites/lyon/metrics", nodes="nova-1", summary="maybe").status_code == 400


def test_on_demand_metrics_follow_monitor_types(server):
    def count(site, node, metric, start, end):
        return len(metrics(server, site, nodes=node, metrics=metric, start_time=start,
                           end_time=end).json())
    # monitor=wattmetre_power_watt: 50 rows/s during the job, 1/s outside.
    assert count("lyon", "nova-1", "wattmetre_power_watt", T0 + 10, T0 + 11.98) == 100
    assert count("lyon", "nova-1", "wattmetre_power_watt", T0 - 100, T0 - 1) == 100
    assert count("lyon", "nova-4", "bmc_fan_speed_rpm", T0, T0 + 60) == 0  # not enabled
    # monitor (all): period-0 metrics appear at their optional period.
    assert count("grenoble", "yeti-1", "bmc_cpu_temp_celsius", T0, T0 + 60) == 4 * 12
    assert count("grenoble", "yeti-1", "bmc_cpu_temp_celsius", T0 - 120, T0 - 60) == 0
    # monitor=power is anchored at the start: enables nothing.
    assert count("lyon", "nova-5", "wattmetre_power_watt", T0 + 10, T0 + 11.98) == 2
    # Node exporter: on non-deploy jobs only.
    assert count("lyon", "nova-1", "prom_node_load1", T0, T0 + 59.999999) == 4
    assert count("nantes", "ecotype-7", "prom_node_load1", T0, T0 + 59.999999) == 0
    assert count("lyon", "nova-10", "prom_node_load1", T0, T0 + 59.999999) == 0


def test_values_are_reproducible_and_depend_on_the_seed(server, tmp_path):
    params = dict(nodes="nova-1,nova-4", start_time=T0 + 580, end_time=T0 + 620)
    first = metrics(server, "lyon", **params).content
    assert metrics(server, "lyon", **params).content == first
    other = start_server("--seed", 2, jobs=JOBS, tmp_path=tmp_path)
    try:
        again = start_server(jobs=JOBS, tmp_path=tmp_path)
        try:
            assert requests.get(again.url + "/sites/lyon/metrics", params=params,
                                timeout=30).content == first
        finally:
            again.stop()
        assert requests.get(other.url + "/sites/lyon/metrics", params=params,
                            timeout=30).content != first
    finally:
        other.stop()


def test_values_are_physically_plausible(server):
    def values(node, metric, start, end, site="lyon"):
        return [r["value"] for r in metrics(server, site, nodes=node, metrics=metric,
                                            start_time=start, end_time=end).json()]
    idle_watt = statistics.fmean(values("nova-1", "wattmetre_power_watt", T0 + 100, T0 + 500))
    busy_watt = statistics.fmean(values("nova-1", "wattmetre_power_watt", T0 + 700, T0 + 1100))
    assert 55 < idle_watt < 85 and busy_watt > idle_watt + 80
    # The BMC (5 s, whole watts, averaged) agrees with the wattmeter within 10 %.
    for phase in ((T0 + 100, T0 + 500), (T0 + 700, T0 + 1100)):
        watt = statistics.fmean(values("taurus-3", "wattmetre_power_watt", *phase))
        bmc = values("taurus-3", "bmc_node_power_watt", *phase)
        assert len(bmc) == 80 and all(float(v).is_integer() for v in bmc)
        assert abs(statistics.fmean(bmc) / watt - 1) < 0.1
    # Counters never go down, and count faster under network load.
    counter = values("nova-1", "network_ifacein_bytes_total", T0, T0 + 1800)
    assert counter == sorted(counter)
    idle_rate = (counter[50] - counter[10]) / 400
    busy_rate = (counter[110] - counter[70]) / 400
    assert busy_rate > 1000 * idle_rate
    # CPU seconds follow the load: user time grows ~1 s/s per CPU when busy.
    rows = metrics(server, "lyon", nodes="nova-1", metrics="prom_node_cpu_seconds_total",
                   start_time=T0 + 700, end_time=T0 + 1000).json()
    user = [r for r in rows if r["labels"] == {"cpu": "0", "mode": "user"}]
    idle = [r for r in rows if r["labels"] == {"cpu": "0", "mode": "idle"}]
    elapsed = utc_of(user[-1]["timestamp"]) - utc_of(user[0]["timestamp"])
    assert 0.8 < (user[-1]["value"] - user[0]["value"]) / elapsed < 1.0
    assert (idle[-1]["value"] - idle[0]["value"]) / elapsed < 0.1
    series = {}
    for r in rows:
        series.setdefault(json.dumps(r["labels"]), []).append(r["value"])
    assert len(series) == 32 * 8 and all(v == sorted(v) for v in series.values())
    temps = values("nova-1", "bmc_ambient_temp_celsius", T0, T0 + 600)
    assert all(15 < t < 30 for t in temps)


def test_row_limit_answers_kwollects_timeout(server_factory):
    s = server_factory("--max-rows", 1000)
    params = {"nodes": "nova-1", "metrics": "wattmetre_power_watt"}
    ok = requests.get(s.url + "/sites/lyon/metrics", timeout=10,
                      params={**params, "start_time": T0 - 999, "end_time": T0}).json()
    assert len(ok) == 1000
    over = requests.get(s.url + "/sites/lyon/metrics", timeout=10,
                        params={**params, "start_time": T0 - 1000, "end_time": T0})
    assert over.status_code == 500
    assert over.text == ('{"hint":null,"details":null,"code":"P0001",'
                         '"message":"Request timeout, too much data to process."}')


def test_basic_auth(server_factory):
    s = server_factory("--auth", "alice:s3cret")
    denied = requests.get(s.url + "/sites", timeout=10)
    assert denied.status_code == 401
    assert denied.headers["WWW-Authenticate"] == 'Basic realm="Grid\'5000 API"'
    assert requests.get(s.url + "/sites", auth=("alice", "wrong"), timeout=10).status_code == 401
    assert requests.get(s.url + "/sites", auth=("alice", "s3cret"), timeout=10).status_code == 200
    assert requests.get(s.url + "/sites/lyon/metrics", auth=("alice", "s3cret"), timeout=10,
                        params={"nodes": "nova-1", "start_time": T0,
                                "end_time": T0 + 1}).status_code == 200


def test_fault_modes(server_factory):
    s = server_factory("--fail-rate", 0.5, "--seed", 3)
    params = {"nodes": "nova-1,nova-4", "start_time": T0 - 600, "end_time": T0}
    expected = None
    outcomes = {"ok": 0, "503": 0, "cut": 0}
    for _ in range(40):
        try:
            response = requests.get(s.url + "/sites/lyon/metrics", params=params, timeout=30)
        except requests.exceptions.ChunkedEncodingError:
            outcomes["cut"] += 1
            continue
        if response.status_code == 503:
            outcomes["503"] += 1
            continue
        assert response.status_code == 200
        expected = expected or response.content
        assert response.content == expected  # a successful answer is always the whole answer
        outcomes["ok"] += 1
    assert all(n > 0 for n in outcomes.values()), outcomes
    # Cut bodies really stop in the middle: fewer bytes than the whole answer, no closing ']'.
    for _ in range(40):
        response = requests.get(s.url + "/sites/lyon/metrics", params=params, timeout=30,
                                stream=True)
        if response.status_code != 200:
            continue
        received = b""
        try:
            for chunk in response.iter_content(65536):
                received += chunk
        except requests.exceptions.ChunkedEncodingError:
            assert 0 < len(received) < len(expected)
            assert not received.endswith(b"]")
            break
    else:
        pytest.fail("no cut body seen in 40 requests")
    # The reference API is not affected.
    assert all(requests.get(s.url + "/sites/lyon", timeout=10).status_code == 200
               for _ in range(10))


def test_latency(server_factory):
    s = server_factory("--latency-ms", 300)
    began = time.monotonic()
    requests.get(s.url + "/sites", timeout=10)
    assert time.monotonic() - began >= 0.3


def test_outages_silence_devices(server_factory):
    jobs = {"jobs": [], "outages": [
        {"site": "lyon", "device": "nova-1", "metric": "wattmetre_power_watt",
         "start": T0, "end": T0 + 60}]}
    s = server_factory(jobs=jobs)
    rows = requests.get(s.url + "/sites/lyon/metrics", timeout=10, params={
        "nodes": "nova-1", "start_time": T0 - 10, "end_time": T0 + 70,
        "metrics": "wattmetre_power_watt,bmc_ambient_temp_celsius"}).json()
    watt = [utc_of(r["timestamp"]) for r in rows if r["metric_id"] == "wattmetre_power_watt"]
    assert watt == [float(t) for t in range(T0 - 10, T0)] + [float(t) for t in
                                                             range(T0 + 60, T0 + 71)]
    assert any(T0 <= utc_of(r["timestamp"]) < T0 + 60 for r in rows
               if r["metric_id"] == "bmc_ambient_temp_celsius")


def test_rows_per_second_paces_answers(server_factory):
    s = server_factory("--rows-per-second", 2000, jobs=JOBS)
    began = time.monotonic()
    rows = requests.get(s.url + "/sites/lyon/metrics", timeout=30, params={
        "nodes": "nova-1", "metrics": "wattmetre_power_watt", "start_time": T0,
        "end_time": T0 + 59.99}).json()
    assert len(rows) == 3000
    assert time.monotonic() - began >= 1.4


# ---- custom metrics (POST /sites/{site}/metrics) ------------------------------------------------

def test_pushed_metrics_are_served_and_fetched(server_factory):
    s = server_factory("--auth", "alice:s3cret")
    auth = ("alice", "s3cret")
    rows = [{"timestamp": T0 + 0.5, "device_id": "nova-1", "metric_id": "my_power", "value": 42,
             "labels": {"run": "a"}},
            {"timestamp": T0 + 1.25, "device_id": "nova-1", "metric_id": "my_power",
             "value": 43.5, "labels": {"run": "a"}},
            {"device_id": "my-sensor", "metric_id": "room_temp", "value": 21}]
    pushed = requests.post(s.url + "/sites/lyon/metrics", json=rows, auth=auth, timeout=10)
    assert pushed.status_code == 201 and pushed.json() == {"stored": 3}
    answer = requests.get(s.url + "/sites/lyon/metrics", auth=auth, timeout=10, params={
        "nodes": "nova-1", "metrics": "my_power", "start_time": T0, "end_time": T0 + 2})
    assert answer.status_code == 200
    assert answer.text == (
        '[{"timestamp":"2025-04-18T14:00:00.5+02:00","device_id":"nova-1",'
        '"metric_id":"my_power","value":42,"labels":{"run":"a"}},\n'
        '{"timestamp":"2025-04-18T14:00:01.25+02:00","device_id":"nova-1",'
        '"metric_id":"my_power","value":43.5,"labels":{"run":"a"}}]')
    # Merged in time order with the simulated rows of the node.
    every = requests.get(s.url + "/sites/lyon/metrics", auth=auth, timeout=10, params={
        "nodes": "nova-1", "start_time": T0, "end_time": T0 + 2}).json()
    assert [r["value"] for r in every if r["metric_id"] == "my_power"] == [42, 43.5]
    assert len(every) > 2
    times = [datetime.fromisoformat(r["timestamp"]) for r in every]
    assert times == sorted(times)
    # A device of no cluster: its rows are there for whoever asks (timestamp: now).
    sensor = requests.get(s.url + "/sites/lyon/metrics", auth=auth, timeout=10,
                          params={"devices": "my-sensor"}).json()
    assert [(r["metric_id"], r["value"]) for r in sensor] == [("room_temp", 21)]
    # kwatt fetch gets them by name with --custom-metrics; without it, it names the flag.
    api = s.url.replace("http://", "http://alice:s3cret@")
    query = ["--api", api, "--nodes", "nova-1.lyon", "--start", str(T0), "--end", str(T0 + 2),
             "--metrics", "my_power"]
    refused = subprocess.run([KWATT, "fetch", *query], capture_output=True, timeout=60)
    assert refused.returncode == 1
    assert b"unknown metric my_power" in refused.stderr
    assert b"add --custom-metrics" in refused.stderr
    fetched = subprocess.run([KWATT, "fetch", *query, "--custom-metrics"], capture_output=True,
                             timeout=60)
    assert fetched.returncode == 0, fetched.stderr
    assert fetched.stdout.decode().splitlines() == answer.text[1:-1].split(",\n")


def test_a_push_stores_all_its_rows_or_none(server_factory):
    s = server_factory("--auth", "alice:s3cret")
    auth = ("alice", "s3cret")
    url = s.url + "/sites/lyon/metrics"
    good = {"timestamp": T0, "device_id": "nova-1", "metric_id": "m", "value": 1}
    bad = requests.post(url, json=[good, {**good, "device_id": "nova-1.lyon.grid5000.fr"}],
                        auth=auth, timeout=10)
    assert bad.status_code == 400
    assert bad.json()["message"].startswith(
        'row 2 "device_id" = "nova-1.lyon.grid5000.fr": holds \'.\', where metrics queries cut')
    assert bad.json()["message"].endswith("; nothing was stored")
    assert requests.post(url, data="[{", auth=auth, timeout=10,
                         headers={"Content-Type": "application/json"}).status_code == 400
    assert requests.get(url, auth=auth, timeout=10, params={
        "nodes": "nova-1", "metrics": "m", "start_time": T0 - 1, "end_time": T0 + 1}).json() == []
    # Pushing needs credentials: an open server refuses, naming --auth.
    open_server = server_factory()
    refused = requests.post(open_server.url + "/sites/lyon/metrics", json=[good], timeout=10)
    assert refused.status_code == 403 and "--auth USER:PASSWORD" in refused.json()["message"]
    assert requests.post(url, json=[good], auth=("alice", "wrong"), timeout=10).status_code == 401
    assert requests.post(s.url + "/sites/paris/metrics", json=[good], auth=auth,
                         timeout=10).status_code == 404
