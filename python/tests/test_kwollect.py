"""kwatt.Kwollect with real EnOSlib objects against the real `kwatt serve --simulate`."""
import datetime as dt
import json
import os
import threading
import time
import urllib.request
import zoneinfo

import enoslib as en
import numpy as np
import pandas as pd
import pytest
from enoslib.service.service import Service

import kwatt
import kwatt.simulator
from kwatt import documents
from conftest import JOBS, assert_same_energy, run_kwatt, start_server
from typed import assert_is

PARIS = zoneinfo.ZoneInfo("Europe/Paris")
NOVA = ["nova-1.lyon.grid5000.fr", "nova-4.lyon.grid5000.fr", "nova-5.lyon.grid5000.fr"]
# Inside job lyon:1001 (examples/jobs.json): idle 14:00-14:05, busy 14:05-14:10, ...
T0 = dt.datetime(2025, 4, 18, 14, 4, tzinfo=PARIS).timestamp()
T1 = T0 + 120


def api_rows(server, site, nodes, metrics, start, end, summary=False, as_rate=False):
    """The API's answer, as json.loads gives it."""
    query = (f"nodes={','.join(nodes)}&start_time={start:.6f}&end_time={end:.6f}"
             + (f"&metrics={','.join(metrics)}" if metrics else "")
             + ("&summary=true" if summary else "") + ("&as_rate=true" if as_rate else ""))
    with urllib.request.urlopen(f"{server.url}/sites/{site}/metrics?{query}") as answer:
        return json.loads(answer.read())


def make(server, hosts=NOVA, **kwargs):
    k = kwatt.Kwollect(nodes=hosts, api=server.url, progress=False, **kwargs)
    return k


# ---- construction ---------------------------------------------------------------------------

def test_is_an_enoslib_service_built_from_roles(server):
    roles = en.Roles({"compute": [en.Host(NOVA[0]), en.Host(NOVA[1])],
                      "client": [en.Host(NOVA[2])]})
    k = kwatt.Kwollect(roles=roles, api=server.url, progress=False)
    assert isinstance(k, Service)
    assert sorted(k.nodes) == NOVA
    assert {r: sorted(n) for r, n in k.roles.items()} == {"compute": NOVA[:2], "client": [NOVA[2]]}
    # A role's hosts, as in roles["compute"]
    k2 = kwatt.Kwollect(roles=roles["compute"], api=server.url, progress=False)
    assert sorted(k2.nodes) == NOVA[:2] and k2.roles == {}


def test_accepts_hostnames_addresses_and_vlan_names(server):
    class Machine:
        address = "nova-5.lyon.grid5000.fr"
    k = kwatt.Kwollect(nodes=["nova-1.lyon", "nova-4-kavlan-4.lyon.grid5000.fr", Machine(),
                              "nova-1.lyon.grid5000.fr"], api=server.url)
    assert k.nodes == ["nova-1.lyon.grid5000.fr", "nova-4.lyon.grid5000.fr",
                       "nova-5.lyon.grid5000.fr"]


@pytest.mark.parametrize("kwargs, message", [
    ({}, "no node given"),
    ({"nodes": ["nova-1.lyon"], "roles": ["nova-1.lyon"]}, "not both"),
    ({"nodes": [object()]}, "is not a node"),
    ({"nodes": ["nova-1"]}, "site"),
])
def test_bad_construction_is_explained(kwargs, message):
    with pytest.raises(kwatt.InvalidArgumentError, match=message):
        kwatt.Kwollect(**kwargs)


# ---- deploy -----------------------------------------------------------------------------------

def test_deploy_accepts_known_nodes(server):
    k = make(server)
    k.deploy()
    assert k.deployed


def test_deploy_names_every_offending_node(server):
    k = kwatt.Kwollect(nodes=["nova-1.lyon.grid5000.fr", "nova-99.lyon.grid5000.fr",
                              "zorglub-1.lyon.grid5000.fr", "nova-2.atlantis.grid5000.fr"],
                       api=server.url)
    with pytest.raises(kwatt.DeployError) as error:
        k.deploy()
    problems = error.value.problems
    assert set(problems) == {"nova-99.lyon.grid5000.fr", "zorglub-1.lyon.grid5000.fr",
                             "nova-2.atlantis.grid5000.fr"}
    assert "cluster nova has" in problems["nova-99.lyon.grid5000.fr"]
    assert "no cluster" in problems["zorglub-1.lyon.grid5000.fr"]
    assert "unknown site" in problems["nova-2.atlantis.grid5000.fr"]
    assert "3 of 4 nodes" in str(error.value)
    assert not k.deployed


def test_deploy_refuses_non_grid5000_hosts(server):
    with pytest.raises(kwatt.InvalidArgumentError):
        kwatt.Kwollect(nodes=[en.Host("192.168.1.4")], api=server.url)


def test_unreachable_api_is_unavailable(no_config):
    k = kwatt.Kwollect(nodes=NOVA, api="http://127.0.0.1:9/stable", retries=0,
                       connect_timeout=2)
    with pytest.raises(kwatt.UnavailableError):
        k.deploy()


def test_refused_credentials(tmp_path, no_config):
    secured = start_server("--auth", "alice:s3cret", tmp_path=tmp_path)
    try:
        k = kwatt.Kwollect(nodes=NOVA, api=secured.url, username="alice", password="wrong")
        with pytest.raises(kwatt.AuthenticationError):
            k.deploy()
        ok = kwatt.Kwollect(nodes=NOVA, api=secured.url, username="alice", password="s3cret")
        ok.deploy()
        # And from ~/.python-grid5000.yaml, as EnOSlib users have it.
        (no_config / ".python-grid5000.yaml").write_text(
            f"uri: {secured.url}\nusername: alice\npassword: s3cret\n")
        kwatt.Kwollect(nodes=NOVA).deploy()
    finally:
        secured.stop()


# ---- start, stop, window ------------------------------------------------------------------------

def test_start_and_stop_make_no_api_call():
    k = kwatt.Kwollect(nodes=NOVA, api="http://127.0.0.1:9/stable")  # nothing listens
    before = time.time()
    k.start()
    k.stop()
    assert before <= k.start_time <= k.stop_time <= time.time()


@pytest.mark.parametrize("given", [
    T0,
    int(T0),
    dt.datetime.fromtimestamp(T0, tz=dt.timezone.utc),
    dt.datetime.fromtimestamp(T0, tz=PARIS),
    "2025-04-18T14:04:00+02:00",
    "2025-04-18T12:04:00Z",
    pd.Timestamp("2025-04-18T14:04:00+02:00"),
    pd.Timestamp(np.datetime64("2025-04-18T12:04:00", "ns"), tz="UTC"),
])
def test_custom_timestamps_in_every_form(given):
    k = kwatt.Kwollect(nodes=NOVA)
    k.start(given)
    assert k.window[0] == int(T0) * 10**9
    assert k.start_time == pytest.approx(T0)


def test_node_names_in_any_case():
    # DNS names are case-insensitive (they were refused three different ways).
    k = kwatt.Kwollect(nodes=["NOVA-1.LYON.GRID5000.FR", "nova-4.LYON", en.Host("Nova-5.Lyon")])
    assert k.nodes == NOVA


def test_enoslib_keyword_names():
    # Code written for EnOSlib's Kwollect runs unchanged.
    k = kwatt.Kwollect(nodes=NOVA)
    k.start(start_time=T0)
    k.stop(stop_time=T1)
    assert (k.start_time, k.stop_time) == (T0, T1)


def test_naive_datetimes_are_local_time(monkeypatch):
    k = kwatt.Kwollect(nodes=NOVA)
    naive = dt.datetime(2025, 4, 18, 14, 4)
    k.start(naive)
    assert k.window[0] == int(naive.timestamp()) * 10**9


def test_a_datetime64_is_refused_as_ambiguous():
    # numpy's datetime64 has no time zone: numpy reads it as UTC, pandas.Timestamp(it) as local
    # time (kwatt read it one way and the Timestamp the other, two hours apart in Paris).
    k = kwatt.Kwollect(nodes=NOVA)
    with pytest.raises(kwatt.InvalidArgumentError, match="has no time zone.*tz='UTC'"):
        k.start(np.datetime64("2025-04-18T14:04:00.5"))


def test_nonexistent_and_ambiguous_local_times_are_refused_as_in_text(monkeypatch):
    # One rule, the C++ one, for texts without an offset and naive datetimes/Timestamps: both
    # readings named. A naive datetime was read one way (datetime.astimezone: fold=0) and the
    # same text another; the spring-gap time was moved silently.
    monkeypatch.setenv("TZ", "Europe/Paris")
    time.tzset()
    try:
        k = kwatt.Kwollect(nodes=NOVA)
        both = ("2025-10-26T02:30:00 is ambiguous in Europe/Paris (that hour happens twice): "
                "2025-10-26T02:30:00+02:00 or 2025-10-26T02:30:00+01:00; give the offset")
        for given in ("2025-10-26T02:30", dt.datetime(2025, 10, 26, 2, 30),
                      dt.datetime(2025, 10, 26, 2, 30, fold=1), pd.Timestamp("2025-10-26T02:30")):
            with pytest.raises(kwatt.InvalidArgumentError) as error:
                k.start(given)
            assert str(error.value) == "start: " + both, given
        for given in ("2025-03-30T02:30", dt.datetime(2025, 3, 30, 2, 30),
                      pd.Timestamp("2025-03-30T02:30")):
            with pytest.raises(kwatt.InvalidArgumentError, match="does not exist in Europe/Paris"):
                k.start(given)
        # Outside those hours, the naive datetime is the local time, to the microsecond.
        naive = dt.datetime(2025, 10, 26, 3, 30, 0, 123456)
        k.start(naive)
        assert k.window[0] == int(naive.timestamp()) * 10**9 + 123456000
        k.start(pd.Timestamp("2025-04-18T14:04:00.000000001"))
        assert k.window[0] == int(T0) * 10**9 + 1
        for far in ("3000-01-01T00:00:00Z", dt.datetime(3000, 1, 1),
                    dt.datetime(3000, 1, 1, tzinfo=dt.timezone.utc), 20000000000, 1e30):
            with pytest.raises(kwatt.InvalidArgumentError, match="outside the times kwatt handles"):
                k.start(far)
    finally:
        monkeypatch.undo()
        time.tzset()


def test_bad_windows_are_explained(server):
    k = make(server)
    with pytest.raises(kwatt.InvalidArgumentError, match="start"):
        k.get_metrics()
    with pytest.raises(kwatt.InvalidArgumentError, match="before start"):
        k.start(T1)
        k.stop(T0)
    with pytest.raises(kwatt.InvalidArgumentError, match="stop\\(\\) before start"):
        kwatt.Kwollect(nodes=NOVA).stop()
    with pytest.raises(kwatt.InvalidArgumentError, match="not an instant"):
        k.start([1, 2])
    with pytest.raises(kwatt.InvalidArgumentError):
        k.start("yesterday at noon")


def test_context_manager_deploys_starts_and_stops(server):
    with make(server) as k:
        assert k.deployed and k.start_time is not None and k.stop_time is None
    assert k.stop_time >= k.start_time


# ---- get_metrics ---------------------------------------------------------------------------------

def test_rows_are_exactly_what_json_loads_gives(server):
    k = make(server)
    k.start(T0)
    k.stop(T0 + 30)
    # (bmc_fan_speed_rpm: in nova's catalogue, collected on demand only: no rows here.)
    metrics = ["wattmetre_power_watt", "network_ifacein_bytes_total", "bmc_fan_speed_rpm",
               "prom_node_load1"]
    data = k.get_metrics(metrics=metrics)
    assert list(data) == NOVA
    for node in NOVA:
        expected = api_rows(server, "lyon", [node.split(".")[0]], metrics, T0, T0 + 30)
        # The API orders by time only; kwatt keeps its order per node.
        assert data[node] == expected
        kinds = {type(r["value"]) for r in data[node] if r["metric_id"] ==
                 "network_ifacein_bytes_total"}
        assert kinds == {int}
        assert {type(r["value"]) for r in data[node]
                if r["metric_id"] == "wattmetre_power_watt"} <= {float, int}
    # Every row its own objects: changing one changes no other.
    rows = data[NOVA[0]]
    rows[0]["labels"]["_device_orig"].append("x")
    assert "x" not in rows[1]["labels"].get("_device_orig", [])


def test_every_metric_by_default_and_chronological(server):
    k = make(server, hosts=NOVA[:1])
    k.start(T0)
    k.stop(T0 + 20)
    data = k.get_metrics()
    rows = data[NOVA[0]]
    assert rows == api_rows(server, "lyon", ["nova-1"], [], T0, T0 + 20)
    stamps = [dt.datetime.fromisoformat(r["timestamp"]) for r in rows]
    assert stamps == sorted(stamps)
    assert len({r["metric_id"] for r in rows}) > 5


def test_every_node_present_even_without_rows(server):
    k = make(server, hosts=NOVA + ["taurus-7.lyon.grid5000.fr"])
    k.start(T0)
    k.stop(T0 + 10)
    data = k.get_metrics(metrics=["wattmetre_power_watt"], summary=False)
    assert set(data) == set(k.nodes)
    # taurus is not in the monitor job: 1 value per second; a metric of the catalogues collected
    # only on demand (no rows in this job): empty lists. (An unknown metric is an error.)
    assert len(data["taurus-7.lyon.grid5000.fr"]) == 11
    none = k.get_metrics(metrics=["bmc_fan_speed_rpm"])
    assert none == {n: [] for n in k.nodes}


def test_subsets_by_roles_or_nodes(server):
    roles = en.Roles({"a": [en.Host(NOVA[0])], "b": [en.Host(NOVA[1]), en.Host(NOVA[2])]})
    k = kwatt.Kwollect(roles=roles, api=server.url, progress=False)
    k.start(T0)
    k.stop(T0 + 5)
    assert set(k.get_metrics(metrics=["wattmetre_power_watt"], roles=roles["b"])) == set(NOVA[1:])
    assert list(k.get_metrics(metrics=["wattmetre_power_watt"], nodes=["nova-1.lyon"])) == [
        NOVA[0]]
    with pytest.raises(kwatt.InvalidArgumentError, match="not nodes of this Kwollect"):
        k.get_metrics(nodes=["nova-9.lyon.grid5000.fr"])
    with pytest.raises(kwatt.InvalidArgumentError, match="not both"):
        k.get_metrics(roles=roles["a"], nodes=["nova-1.lyon"])


def test_enoslibs_positional_calls_and_hosts_as_roles(server, tmp_path):
    # EnOSlib's order: get_metrics(metrics, nodes, summary), backup(backup_dir, metrics, nodes,
    # summary); energy() and stats() take hosts (roles["b"]) or nodes= as a subset.
    roles = en.Roles({"a": [en.Host(NOVA[0])], "b": [en.Host(NOVA[1]), en.Host(NOVA[2])]})
    k = kwatt.Kwollect(roles=roles, api=server.url, progress=False)
    k.start(T0)
    k.stop(T0 + 5)
    summary = k.get_metrics(["wattmetre_power_watt"], roles["b"], True)
    assert set(summary) == set(NOVA[1:])
    raw = k.get_metrics(["wattmetre_power_watt"], roles["b"])
    assert sum(map(len, raw.values())) > sum(map(len, summary.values()))
    frame = k.get_metrics_pandas(["wattmetre_power_watt"], [en.Host(NOVA[0])])
    assert set(frame["node"]) == {NOVA[0]}
    path = k.backup(tmp_path / "b", ["wattmetre_power_watt"], roles["a"], False)
    assert set(kwatt.load(path)["node"]) == {NOVA[0]}
    for energy in (k.energy(roles=roles["b"]), k.energy(nodes=["nova-4.lyon", "nova-5.lyon"])):
        nodes = energy[energy["scope"] == "node"]["name"]
        assert set(nodes) == set(NOVA[1:])
        assert "role" not in set(energy["scope"])
    stats = k.stats(["wattmetre_power_watt"], roles=roles["a"])
    assert set(stats["node"]) == {NOVA[0]}
    assert set(k.stats(["wattmetre_power_watt"], nodes=[NOVA[0]])["node"]) == {NOVA[0]}
    with pytest.raises(kwatt.InvalidArgumentError, match="not both"):
        k.energy(roles=roles, nodes=[NOVA[0]])


def test_summary_rows(server):
    k = make(server, hosts=NOVA[:1])
    k.start(T0 - 600)
    k.stop(T0 + 600)
    data = k.get_metrics(metrics=["wattmetre_power_watt"], summary=True)
    assert data[NOVA[0]] == api_rows(server, "lyon", ["nova-1"], ["wattmetre_power_watt"],
                                     T0 - 600, T0 + 600, summary=True)
    assert data[NOVA[0]]


def test_rates_are_kwollects_as_rate_over_the_whole_window(server):
    # Fetched in pieces (the client asks 200 rows at a time), computed over all of them: the
    # server's one answer with as_rate=true, each series' first row None.
    k = make(server, hosts=NOVA[:1], rows_per_request=200)
    k.start(T0)
    k.stop(T0 + 120)
    data = k.get_metrics(metrics=["wattmetre_power_watt", "network_ifacein_bytes_total"],
                         as_rate=True)
    expected = api_rows(server, "lyon", ["nova-1"],
                        ["wattmetre_power_watt", "network_ifacein_bytes_total"], T0, T0 + 120,
                        as_rate=True)
    key = lambda r: (r["timestamp"], r["metric_id"])  # noqa: E731
    assert sorted(data[NOVA[0]], key=key) == sorted(expected, key=key)
    assert len(expected) > 1000
    assert sum(r["value"] is None for r in expected) == 2
    frame = k.to_pandas(metrics=["network_ifacein_bytes_total"], as_rate=True)
    assert frame["value"].isna().sum() == 1 and (frame["value"].dropna() > 0).all()


def test_nested_and_overlapping_instances(server):
    outer = make(server)
    outer.start(T0)
    inner = make(server, hosts=NOVA[:1])
    inner.start(T0 + 10)
    other = make(server, hosts=NOVA[1:])
    other.start(T0 + 15)
    inner.stop(T0 + 20)
    outer.stop(T0 + 30)
    other.stop(T0 + 40)
    metrics = ["wattmetre_power_watt"]
    o, i, x = (k.get_metrics(metrics=metrics) for k in (outer, inner, other))
    assert len(i[NOVA[0]]) == 10 * 50 + 1
    assert len(o[NOVA[0]]) == 30 * 50 + 1
    assert len(x[NOVA[1]]) == 25 * 50 + 1
    first_inner = i[NOVA[0]][0]
    assert first_inner in o[NOVA[0]]
    assert o[NOVA[0]].index(first_inner) == 10 * 50


def test_failed_pieces_raise_incomplete_with_the_rows_obtained(tmp_path):
    failing = start_server("--fail-rate", "1", tmp_path=tmp_path)
    try:
        k = kwatt.Kwollect(nodes=NOVA[:2], api=failing.url, progress=False, retries=0)
        k.start(T0)
        k.stop(T0 + 5)
        with pytest.raises(kwatt.IncompleteError) as error:
            k.get_metrics(metrics=["wattmetre_power_watt"])
        assert error.value.failures
        assert set(error.value.partial) == set(NOVA[:2])
        with pytest.warns(RuntimeWarning, match="could not be fetched"):
            partial = k.get_metrics(metrics=["wattmetre_power_watt"], allow_incomplete=True)
        assert set(partial) == set(NOVA[:2])
    finally:
        failing.stop()


def test_a_site_that_is_down_leaves_the_other_sites_results(tmp_path):
    # Nantes' API answers a proxy's 503 page: deploy() warns of its node instead of failing for
    # every site, and the fetches give lyon's rows with nantes' named as not fetched (they
    # failed whole after 15.5 s, with the proxy's HTML in the message).
    down = start_server("--down-site", "nantes", "--jobs", JOBS, tmp_path=tmp_path)
    try:
        k = kwatt.Kwollect(nodes=[NOVA[0], "ecotype-1.nantes"], api=down.url, progress=False,
                           retries=0)
        with pytest.warns(RuntimeWarning, match="ecotype-1.nantes: the API of site nantes "
                                                "could not be read: HTTP 503"):
            k.deploy()
        assert k.available_metrics()["ecotype-1.nantes.grid5000.fr"] == []
        k.start(T0)
        k.stop(T0 + 5)
        with pytest.raises(kwatt.IncompleteError) as error:
            k.get_metrics(metrics=["wattmetre_power_watt"])
        assert len(error.value.partial[NOVA[0]]) > 100
        assert error.value.partial["ecotype-1.nantes.grid5000.fr"] == []
        message = str(error.value)
        assert "503 Service Unavailable No server is available" in message
        assert "<html>" not in message and "<h1>" not in message
        with pytest.warns(RuntimeWarning, match="could not be fetched"):
            energy = k.energy(allow_incomplete=True)
        node = energy[(energy["scope"] == "node") & (energy["phase"] == "window")]
        measured = node.set_index("name")["joules"]
        assert measured[NOVA[0]] > 0
    finally:
        down.stop()


@pytest.fixture
def failing(tmp_path):
    """A server on which half the metrics requests fail."""
    s = start_server("--fail-rate", "0.5", "--seed", "3", "--jobs", JOBS, tmp_path=tmp_path)
    yield s
    s.stop()


def over_20_seconds(server, retries=0, **options):
    """NOVA from T0 to T0 + 20 s on `server`, in requests of 500 rows."""
    k = kwatt.Kwollect(nodes=NOVA, api=server.url, progress=False, retries=retries,
                       rows_per_request=500, **options)
    k.start(T0)
    k.stop(T0 + 20)
    return k


def test_energy_and_stats_raise_incomplete_as_get_metrics_does(failing):
    # Half the requests fail and none is retried: get_metrics raises, and so must energy(),
    # energy_report() and stats() (they returned figures from half the rows; the CLI exits 1).
    k = over_20_seconds(failing)
    with pytest.raises(kwatt.IncompleteError):
        k.get_metrics(metrics=["wattmetre_power_watt"])
    with pytest.raises(kwatt.IncompleteError) as error:
        k.energy()
    assert isinstance(error.value.partial, pd.DataFrame) and error.value.failures
    assert list(error.value.partial.columns) == kwatt.frames.ENERGY_COLUMNS
    with pytest.raises(kwatt.IncompleteError) as error:
        k.energy_report()
    assert error.value.partial["fetch"]["complete"] is False
    with pytest.raises(kwatt.IncompleteError) as error:
        k.stats(metrics=["wattmetre_power_watt"])
    assert list(error.value.partial.columns) == kwatt.frames.STATS_COLUMNS
    with pytest.warns(RuntimeWarning, match="could not be fetched"):
        e = k.energy(allow_incomplete=True)
    assert set(e[e["scope"] == "node"]["name"]) == set(NOVA)
    with pytest.warns(RuntimeWarning, match="could not be fetched"):
        k.stats(metrics=["wattmetre_power_watt"], allow_incomplete=True)


def test_the_fetch_releases_the_gil(tmp_path):
    slow = start_server("--latency-ms", "1500", tmp_path=tmp_path)
    try:
        k = kwatt.Kwollect(nodes=NOVA[:1], api=slow.url, progress=False)
        k.start(T0)
        k.stop(T0 + 1)
        done = []
        worker = threading.Thread(target=lambda: done.append(k.get_metrics()))
        worker.start()
        time.sleep(0.3)
        # This thread ran Python while the fetch waited on the network: the GIL was free.
        assert worker.is_alive() and not done
        worker.join()
        assert done and done[0][NOVA[0]]
    finally:
        slow.stop()


# ---- to_pandas --------------------------------------------------------------------------------

def test_to_pandas_columns_dtypes_and_values(server):
    k = make(server)
    k.start(T0)
    k.stop(T0 + 10)
    metrics = ["wattmetre_power_watt", "network_ifacein_bytes_total"]
    df = k.to_pandas(metrics=metrics)
    assert list(df.columns) == kwatt.frames.COLUMNS
    assert str(df["timestamp"].dtype) == "datetime64[ns, UTC]"
    for column in ("site", "node", "device_id", "metric_id", "labels"):
        assert isinstance(df[column].dtype, pd.CategoricalDtype)
    assert df["value"].dtype == np.float64
    data = k.get_metrics(metrics=metrics)
    assert len(df) == sum(len(rows) for rows in data.values())
    for node, rows in data.items():
        part = df[df["node"] == node]
        assert list(part["value"]) == [float(r["value"]) for r in rows]
        assert list(part["timestamp"]) == [pd.Timestamp(r["timestamp"]).tz_convert("UTC")
                                           for r in rows]
        assert [json.loads(text) for text in part["labels"]] == [r["labels"] for r in rows]
        assert set(part["site"]) == {"lyon"}
        assert list(part["device_id"]) == [r["device_id"] for r in rows]


def test_to_pandas_across_the_dst_change(server):
    # Europe/Paris goes from +01:00 to +02:00 at 2025-03-30 01:00 UTC.
    change = dt.datetime(2025, 3, 30, 1, 0, tzinfo=dt.timezone.utc).timestamp()
    k = make(server, hosts=NOVA[:1])
    k.start(change - 5)
    k.stop(change + 5)
    rows = k.get_metrics(metrics=["wattmetre_power_watt"])[NOVA[0]]
    offsets = {r["timestamp"][-6:] for r in rows}
    assert offsets == {"+01:00", "+02:00"}
    df = k.to_pandas(metrics=["wattmetre_power_watt"])
    assert df["timestamp"].is_monotonic_increasing
    assert df["timestamp"].iloc[0] == pd.Timestamp(change - 5, unit="s", tz="UTC")
    assert df["timestamp"].iloc[-1] == pd.Timestamp(change + 5, unit="s", tz="UTC")
    assert list(df["timestamp"].diff().dropna().unique()) == [pd.Timedelta(seconds=1)]


def test_to_pandas_of_nothing_has_the_same_columns(server):
    k = make(server)
    k.start(T0)
    k.stop(T0 + 5)
    df = k.to_pandas(metrics=["bmc_fan_speed_rpm"])  # on demand only: no rows
    assert len(df) == 0
    assert list(df.columns) == kwatt.frames.COLUMNS
    assert str(df["timestamp"].dtype) == "datetime64[ns, UTC]"


def test_columns_are_numpy_views_of_the_cpp_table(server):
    table = kwatt._core.fetch(kwatt._core.Client({"api_url": server.url}), nodes=NOVA[:1], start=int(T0 * 1e9),
                              end=int((T0 + 5) * 1e9), job=None, metrics=["wattmetre_power_watt"],
                              summary=False, progress=None)
    value = table.value
    assert len(value) == len(table) == 5 * 50 + 1
    assert not value.flags.owndata and value.base is not None
    assert np.shares_memory(value, table.value)
    assert table.time.dtype == np.int64 and table.node_codes.dtype == np.int32


# ---- backup and load -----------------------------------------------------------------------------

def test_backup_then_load_gives_the_same_frame(server, tmp_path):
    k = make(server)
    k.start(T0)
    k.stop(T0 + 20)
    path = k.backup(backup_dir=tmp_path / "exp")
    assert path == str(tmp_path / "exp")
    assert run_kwatt("inspect", path, "--verify").returncode == 0
    loaded = kwatt.load(path)
    fetched = k.to_pandas()
    # The API's order is by time across the nodes; an archive's is node after node.
    for node in NOVA:
        pd.testing.assert_frame_equal(
            loaded[loaded["node"] == node].reset_index(drop=True).astype({"node": str}),
            fetched[fetched["node"] == node].reset_index(drop=True).astype({"node": str}),
            check_categorical=False)
    assert kwatt.Kwollect.load(path).shape == loaded.shape
    manifest = kwatt.manifest(path)
    assert manifest["complete"] and manifest["rows"] == len(loaded)


def test_load_filters(server, tmp_path):
    k = make(server)
    k.start(T0)
    k.stop(T0 + 20)
    path = k.backup(backup_dir=tmp_path / "exp", metrics=["wattmetre_power_watt",
                                                          "bmc_ambient_temp_celsius"])
    df = kwatt.load(path, nodes=[en.Host(NOVA[1])], metrics=["wattmetre_power_watt"],
                    start=T0 + 5, end="2025-04-18T14:04:10+02:00")
    assert set(df["node"]) == {NOVA[1]}
    assert set(df["metric_id"]) == {"wattmetre_power_watt"}
    assert len(df) == 5 * 50 + 1
    # One metric id as a string, as the Kwollect methods take it (it was read as its letters).
    one = kwatt.load(path, metrics="wattmetre_power_watt")
    assert set(one["metric_id"]) == {"wattmetre_power_watt"}
    with pytest.raises(kwatt.NotFoundError, match="taurus-1"):
        kwatt.load(path, nodes=["taurus-1.lyon"])


def test_load_refuses_damaged_and_foreign_directories(server, tmp_path):
    k = make(server, hosts=NOVA[:1])
    k.start(T0)
    k.stop(T0 + 10)
    path = k.backup(backup_dir=tmp_path / "exp")
    data = next((tmp_path / "exp" / "data").glob("nova-1*"))
    raw = bytearray(data.read_bytes())
    raw[len(raw) // 2] ^= 0xFF
    data.write_bytes(bytes(raw))
    with pytest.raises(kwatt.CorruptionError, match=data.name):
        kwatt.load(path)
    with pytest.raises(kwatt.NotFoundError):
        kwatt.load(tmp_path / "nothing-here")
    (tmp_path / "foreign").mkdir()
    (tmp_path / "foreign" / "manifest.json").write_text('{"hello": 1}')
    with pytest.raises(kwatt.CorruptionError, match="manifest"):
        kwatt.load(tmp_path / "foreign")


def test_an_incomplete_backup_raises_and_completes_when_run_again(failing, tmp_path):
    k = over_20_seconds(failing)
    target = tmp_path / "exp"
    with pytest.raises(kwatt.IncompleteError) as error:
        k.backup(backup_dir=target, metrics=["wattmetre_power_watt"])
    assert error.value.partial == str(target)
    assert not kwatt.manifest(target)["complete"]
    with pytest.raises(kwatt.IncompleteError):
        kwatt.load(target)
    partial = kwatt.load(target, allow_incomplete=True)
    assert partial.attrs["kwatt"]["complete"] is False
    k2 = over_20_seconds(failing, retries=20, backoff=0.01)
    k2.backup(backup_dir=target, metrics=["wattmetre_power_watt"])
    assert kwatt.manifest(target)["complete"]
    assert len(kwatt.load(target)) == 3 * (20 * 50 + 1)


def test_parquet_export_has_every_row(server, tmp_path):
    import pyarrow.parquet as pq
    k = make(server)
    k.start(T0)
    k.stop(T0 + 10)
    path = k.backup(backup_dir=tmp_path / "exp")
    frame = kwatt.load(path)
    out = tmp_path / "rows.parquet"
    # The package writes it (pyarrow), in its own process: `python -m kwatt export`.
    import sys
    result = __import__("subprocess").run([sys.executable, "-m", "kwatt", "export", path, "--to",
                                           "parquet", "-o", str(out)], capture_output=True,
                                          text=True)
    assert result.returncode == 0, result.stderr
    table = pq.read_table(out)
    assert table.num_rows == len(frame) == kwatt.manifest(path)["rows"]
    back = table.to_pandas()
    assert list(back.columns) == kwatt.frames.COLUMNS
    assert (back["value"].to_numpy() == frame["value"].to_numpy()).all()
    assert (back["timestamp"] == frame["timestamp"]).all()
    # The `kwatt` command installed beside it runs the same, in its own process (its launcher).
    from pathlib import Path
    cli = Path(sys.executable).parent / "kwatt"
    assert cli.exists(), "pip install . installs the kwatt command beside python"
    other = tmp_path / "x.parquet"
    result = __import__("subprocess").run([str(cli), "export", path, "--to", "parquet", "-o",
                                           str(other)], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert pq.read_table(other).num_rows == len(frame)


# ---- what the nodes can report -----------------------------------------------------------------

def test_available_metrics_from_the_reference_api(server):
    k = kwatt.Kwollect(nodes=["chifflot-1.lille", "chifflot-3.lille", "nova-1.lyon"],
                       api=server.url)
    metrics = k.available_metrics()
    names = {node: {m["name"] for m in ms} for node, ms in metrics.items()}
    # only_for: the eth1 counters exist on chifflot-1, not chifflot-3.
    eth1 = {node: [m for m in ms if m["name"] == "network_ifacein_bytes_total"
                   and m["labels"].get("interface") == "eth1"] for node, ms in metrics.items()}
    assert eth1["chifflot-1.lille.grid5000.fr"] and not eth1["chifflot-3.lille.grid5000.fr"]
    assert "network_ifacein_bytes_total" in names["chifflot-3.lille.grid5000.fr"]
    # Prometheus groups expanded to metric ids, on demand.
    load1 = next(m for m in metrics["nova-1.lyon.grid5000.fr"] if m["name"] == "prom_node_load1")
    assert load1["group"] == "prom_default_metrics" and load1["on_demand"]
    watt = next(m for m in metrics["nova-1.lyon.grid5000.fr"]
                if m["name"] == "wattmetre_power_watt")
    assert watt["period"] == 1000 and watt["optional_period"] == 20 and not watt["on_demand"]
    fast = k.available_metrics(nodes=["nova-1.lyon"], job_types=["monitor=wattmetre"])
    assert next(m for m in fast["nova-1.lyon.grid5000.fr"]
                if m["name"] == "wattmetre_power_watt")["period_in_job"] == 20
    with pytest.raises(kwatt.InvalidArgumentError):
        k.available_metrics(nodes=["nova-2.lyon"])
    # The PDU outlets the nodes' reference "pdu" lists name, which chifflot's catalogue omits:
    # listed, and fetched (they were refused as an unknown metric while energy() used them).
    assert "pdu_outlet_power_watt" in names["chifflot-1.lille.grid5000.fr"]
    assert "pdu_outlet_power_watt" not in names["nova-1.lyon.grid5000.fr"]  # wattmeters only
    k.start(T0)
    k.stop(T0 + 10)
    rows = k.get_metrics(metrics=["pdu_outlet_power_watt"], nodes=["chifflot-1.lille"])
    if server.mode == "simulate":  # the store holds the lyon rows the tests ask for only
        assert len(rows["chifflot-1.lille.grid5000.fr"]) >= 10


def test_catalogues_come_parsed_from_the_core(server):
    # A catalogue is parsed once where it enters and reaches Python as a _core.Catalogue.
    from kwatt import _core
    found = _core.look_up_nodes(_core.Client({"api_url": server.url}), ["nova-1.lyon"])
    catalogue = found["nodes"][0]["catalogue"]
    assert isinstance(catalogue, _core.Catalogue) and len(catalogue) > 5
    assert json.loads(catalogue.json)[0]["name"] == catalogue_names(catalogue)[0]
    again = _core.Catalogue.from_json(catalogue.json)
    assert again.json == catalogue.json
    resolved = _core.resolve(_core.Client({"api_url": server.url}), nodes=["nova-1.lyon"], start=0,
                             end=10**9, job=None)
    assert resolved["catalogues"]["lyon/nova"].json == catalogue.json
    with pytest.raises(kwatt.CorruptionError, match='"m1": field "period" = 1e.30'):
        _core.Catalogue.from_json('[{"name": "m1", "period": 1e30}]')


def test_each_document_of_the_core_is_its_type(server, tmp_path):
    # What _core gives, checked against kwatt.documents all the way down (mypy checks the package
    # against those types).
    from kwatt import _core
    client = _core.Client({"api_url": server.url})
    start = int(dt.datetime(2025, 4, 18, 14, 3, tzinfo=PARIS).timestamp() * 1e9)
    end = start + 60 * 10**9
    found = _core.look_up_nodes(client, [*NOVA[:2], "nowhere-1.lyon"])
    assert_is(found, documents.NodesLookedUp)
    assert len(found["nodes"]) == 2 and found["problems"][0][0] == "nowhere-1.lyon"
    node = found["nodes"][0]
    assert_is(_core.catalogue_metrics(node["catalogue"], node["uid"]),
              list[documents.MetricDescription])
    assert_is(_core.resolve(client, nodes=NOVA[:2], start=start, end=end, job=None),
              documents.FetchReport)
    table = _core.fetch(client, nodes=NOVA[:2], start=start, end=end, job=None,
                        metrics=["wattmetre_power_watt"], summary=False, progress=None)
    rows = table.rows_by_node(NOVA[:2])
    assert all(rows.values())
    assert_is(rows, dict[str, list[documents.ApiRow]])
    selection = _core.Selection(nodes=NOVA[:2], start=start, end=end)
    stats = _core.stats(client, selection, metrics=["wattmetre_power_watt"],
                        phases=[("half", start, start + 30 * 10**9)], roles=[])
    assert_is(stats, documents.StatsReport)
    assert [i["name"] for i in stats["intervals"]] == ["window", "half"]
    outcome = _core.backup(client, str(tmp_path / "b"), nodes=NOVA[:1], start=start, end=end,
                           job=None, metrics=["wattmetre_power_watt"], summary=False,
                           progress=None)
    assert_is(outcome, documents.BackupOutcome)
    assert outcome["complete"] and outcome["rows_written"] > 0
    # A mistyped key, a value of another type, are seen (the check can fail).
    wrong = dict(outcome, rows_written="many")
    with pytest.raises(AssertionError, match="rows_written"):
        assert_is(wrong, documents.BackupOutcome)
    with pytest.raises(AssertionError, match="unknown"):
        assert_is(dict(outcome, row_written=1), documents.BackupOutcome)


def catalogue_names(catalogue):
    return [entry["name"] for entry in json.loads(catalogue.json)]


def test_info_is_a_readable_summary(server):
    k = make(server)
    k.start(T0)
    k.mark("busy", T0 + 60)
    k.stop(T1)
    text = k.info()
    assert "lyon/nova: nova-1, nova-4, nova-5" in text
    assert "2025-04-18T14:04:00+02:00 .. 2025-04-18T14:06:00+02:00 (120.0 s)" in text
    assert "mark busy" in text and "monitor" in text
    assert "wattmetre_power_watt 1000 ms (20 ms with monitor)" in text
    assert repr(k).startswith("<kwatt.Kwollect 3 nodes")


def test_from_job(server):
    k = kwatt.Kwollect.from_job("lyon", 1001, api=server.url, progress=False)
    assert k.nodes == ["nova-1.lyon.grid5000.fr", "nova-4.lyon.grid5000.fr",
                       "nova-5.lyon.grid5000.fr", "nova-6.lyon.grid5000.fr"]
    start = dt.datetime(2025, 4, 18, 14, 0, tzinfo=PARIS).timestamp()
    assert k.start_time == start and k.stop_time == start + 1800
    assert "job: lyon:1001 types ['monitor=wattmetre_power_watt']" in k.info()
    k.start(start)
    k.stop(start + 2)
    assert len(k.get_metrics(metrics=["wattmetre_power_watt"])[k.nodes[0]]) == 101
    with pytest.raises(kwatt.NotFoundError, match="job 999"):
        kwatt.Kwollect.from_job("lyon", 999, api=server.url)


# ---- energy and stats ------------------------------------------------------------------------------

def truth(node, start, end):
    out = run_kwatt("simulate", "energy", "--node", node, "--start", f"{start:.6f}", "--end",
                    f"{end:.6f}", "--jobs", str(__import__("conftest").JOBS), "--json")
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)["joules"]


def test_energy_by_node_role_and_phase_matches_the_truth(server):
    roles = en.Roles({"compute": [en.Host(NOVA[0]), en.Host(NOVA[1])], "client": [en.Host(NOVA[2])]})
    k = kwatt.Kwollect(roles=roles, api=server.url, progress=False)
    start = dt.datetime(2025, 4, 18, 14, 3, tzinfo=PARIS).timestamp()
    k.start(start)
    k.mark("idle", start)
    k.mark("busy", start + 120)  # 14:05, when the job's busy phase starts
    k.stop(start + 240)
    e = k.energy(phases={"last-minute": (start + 180, start + 240)}, baseline="idle")
    assert list(e.columns) == kwatt.frames.ENERGY_COLUMNS
    nodes = e[(e["scope"] == "node") & (e["phase"] == "window")].set_index("name")
    for node in NOVA:
        assert nodes.loc[node, "metric"] == "wattmetre_power_watt"
        assert nodes.loc[node, "joules"] == pytest.approx(truth(node, start, start + 240),
                                                          rel=0.002)
        assert nodes.loc[node, "coverage"] == pytest.approx(1.0)
    busy = e[(e["scope"] == "node") & (e["phase"] == "busy")].set_index("name")
    idle = e[(e["scope"] == "node") & (e["phase"] == "idle")].set_index("name")
    assert (busy["mean_watts"] > idle["mean_watts"] * 1.5).all()
    assert (nodes["baseline_joules"] > 0).all()
    role = e[(e["scope"] == "role") & (e["phase"] == "window")].set_index("name")
    assert role.loc["compute", "joules"] == pytest.approx(nodes.loc[NOVA[:2], "joules"].sum())
    total = e[(e["scope"] == "total") & (e["phase"] == "window")]
    assert total["joules"].iloc[0] == pytest.approx(nodes["joules"].sum())
    assert set(e["phase"]) == {"window", "idle", "busy", "last-minute"}
    assert e["joules"].dtype == np.float64


def test_energy_has_each_figures_interval_and_its_terms(server):
    k = kwatt.Kwollect(NOVA[:2], api=server.url, progress=False)
    start = dt.datetime(2025, 4, 18, 14, 3, tzinfo=PARIS).timestamp()
    k.start(start)
    k.stop(start + 240)
    e = k.energy(clock_offset=0.5, accuracies={"wattmetre_power_watt": "0.5%"})
    nodes = e[(e["scope"] == "node") & (e["phase"] == "window")].set_index("name")
    terms = ["accuracy_joules", "resolution_joules", "sampling_joules", "gaps_and_edges_joules",
             "clock_joules"]
    for node in NOVA[:2]:
        row = nodes.loc[node]
        true = truth(node, start, start + 240)
        assert row["low_joules"] < true < row["high_joules"]
        assert row["half_width_joules"] == pytest.approx(
            sum(row[t] ** 2 for t in terms) ** 0.5)
        # The stated accuracy given: 0.5 %, no watts term, as a rectangular bound at 95 %.
        assert row["accuracy_joules"] == pytest.approx(1.96 * 0.005 * row["joules"] / 3 ** 0.5)
    # The total's accuracy adds the nodes' (one meter model's error goes one way); the rest
    # adds in quadrature.
    total = e[(e["scope"] == "total") & (e["phase"] == "window")].iloc[0]
    assert total["accuracy_joules"] == pytest.approx(nodes["accuracy_joules"].sum())
    assert total["sampling_joules"] == pytest.approx((nodes["sampling_joules"] ** 2).sum() ** 0.5)
    report = k.energy_report(clock_offset=0.5)
    assert report["clock_offset_s"] == 0.5
    assert report["total"]["interval"]["confidence"] == 0.95
    assert_is(report, documents.EnergyReport)
    with pytest.raises(kwatt.InvalidArgumentError, match="clock_offset"):
        k.energy(clock_offset=-1)
    with pytest.raises(kwatt.InvalidArgumentError, match="clock_offset"):
        k.energy(clock_offset="soon")


def test_runs_are_summarized_and_compared(server):
    # nova-1 idles from 14:00, 14:10 and 14:20, and is busy from 14:05, 14:15 and 14:25: three
    # runs of a minute in each, marked alike ("work" 10 s after each start).
    def run(minute):
        k = kwatt.Kwollect([NOVA[0]], api=server.url, progress=False)
        start = dt.datetime(2025, 4, 18, 14, minute, tzinfo=PARIS).timestamp()
        k.start(start)
        k.mark("work", start + 10)
        k.stop(start + 70)
        return k
    idle = [run(m).energy() for m in (1, 11, 21)]
    busy = [run(m) for m in (6, 16, 26)]  # Kwollect instances: their energy() is taken
    summary = kwatt.runs_summary(idle)
    assert list(summary.columns) == kwatt.frames.RUNS_SUMMARY_COLUMNS
    # Columns from the core (no JSON text between), typed as the frame's documentation says.
    assert summary["runs"].dtype == "int64" and summary["sd_joules"].dtype == "float64"
    total = summary[(summary["scope"] == "total") & (summary["phase"] == "window")].iloc[0]
    assert total["runs"] == 3
    windows = [e[(e["scope"] == "total") & (e["phase"] == "window")]["joules"].iloc[0]
               for e in idle]
    assert total["mean_joules"] == pytest.approx(sum(windows) / 3)
    assert total["low_joules"] < total["mean_joules"] < total["high_joules"]
    c = kwatt.compare_runs(idle, busy)
    assert list(c.columns) == kwatt.frames.RUNS_COMPARISON_COLUMNS
    assert c["runs_a"].dtype == "int64" and c["p_value"].dtype == "float64"
    assert c["significant"].dtype == bool
    work = c[(c["scope"] == "total") & (c["phase"] == "work")].iloc[0]
    assert work["significant"] and work["difference_joules"] > 0 and work["p_value"] < 0.05
    assert work["low_joules"] < work["difference_joules"] < work["high_joules"]
    assert "B uses more" in work["why"]
    # The runs against themselves: no difference.
    same = kwatt.compare_runs(idle, idle)
    assert not same["significant"].any()
    with pytest.raises(kwatt.InvalidArgumentError, match="energy frame"):
        kwatt.compare_runs(idle, [42])
    with pytest.raises(kwatt.InvalidArgumentError, match="confidence"):
        kwatt.runs_summary(idle, confidence=95)


def test_report_writes_kwatt_reports_directory(server, tmp_path):
    # The job lyon:1001 (nova-1, 4, 5, 6 alternating 5 idle and 5 busy minutes), its busy phase.
    out = kwatt.report(["lyon:1001"], tmp_path / "paper", api=server.url,
                       phases={"busy": (300, 600)}, carbon_intensity=52,
                       carbon_source="a constant for the test", title="One job")
    assert out == str(tmp_path / "paper")
    data = json.loads((tmp_path / "paper" / "report.json").read_text())
    assert data["title"] == "One job"
    run = data["sets"]["a"][0]
    assert run["run"] == "lyon:1001" and run["energy"]["phases"] == ["busy"]
    assert run["emissions"]["mean_grams_per_kwh"] == 52
    assert (tmp_path / "paper" / "figures" / "energy.pdf").exists()
    assert "--phase busy=+300..+600" in data["provenance"]["reproduce"][-1]
    # The figures are drawn in this process, and inlined in the page.
    assert 'id="figure-power"' in (tmp_path / "paper" / "report.html").read_text()
    with pytest.raises(kwatt.InvalidArgumentError, match="PUE"):
        kwatt.report(["lyon:1001"], tmp_path / "other", api=server.url, carbon_intensity=52,
                     pue=0.5)
    with pytest.raises(kwatt.InvalidArgumentError, match="phases"):
        kwatt.report(["lyon:1001"], tmp_path / "other", api=server.url, phases={"busy": 3})
    assert not (tmp_path / "other").exists()


def test_report_leaves_the_callers_matplotlib_and_credentials_alone(server, tmp_path):
    """kwatt.report() draws in the caller's process: its backend and settings stay as they were.
    Archives alone never read the credentials file (a broken one does not stop them)."""
    import subprocess
    import sys
    k = make(server, hosts=NOVA[:1])
    k.start(T0)
    k.stop(T1)
    archive = k.backup(backup_dir=tmp_path / "run")
    home = tmp_path / "home"
    home.mkdir()
    (home / ".python-grid5000.yaml").write_text("username: [unclosed\n")
    code = f"""
import matplotlib
matplotlib.use("svg")
import kwatt
before = (matplotlib.get_backend(), matplotlib.rcParams["svg.hashsalt"])
kwatt.report([{str(archive)!r}], {str(tmp_path / "paper")!r})
assert (matplotlib.get_backend(), matplotlib.rcParams["svg.hashsalt"]) == before, before
"""
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            timeout=300, env={**os.environ, "HOME": str(home)})
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "paper" / "figures" / "power.pdf").exists()
    # The API asked, the broken file is named.
    result = subprocess.run([sys.executable, "-c", "import kwatt; kwatt.report(['lyon:1001'], "
                             f"{str(tmp_path / 'other')!r}, api={server.url!r})"],
                            capture_output=True, text=True, timeout=300,
                            env={**os.environ, "HOME": str(home)})
    assert result.returncode != 0 and ".python-grid5000.yaml" in result.stderr, result.stderr


def test_the_core_client_is_checked_once_and_reads_its_file_only_when_asked(tmp_path):
    from kwatt import _core
    broken = tmp_path / "broken.yaml"
    broken.write_text("username: [unclosed\n")
    given = {"api_url": "https://me:secret@api.example.org/stable", "config": str(broken)}
    client = _core.Client(given)
    given["retries"] = -1  # a copy was taken: checked once, never changed behind its back
    assert repr(client) == "<kwatt._core.Client https://api.example.org/stable>"  # no file read
    with pytest.raises(kwatt.KwattError, match="broken.yaml"):
        client.retries  # the options asked: the file is read, and named


def test_a_figures_error_is_named_without_its_traceback(server, tmp_path):
    from kwatt import _core
    from kwatt.report import request

    def draw(directory):
        raise ValueError("no figures today")

    asked = request(["lyon:1001"], api=server.url)
    written = _core.write_report(asked, str(tmp_path / "paper"),
                                 client=_core.Client({"api_url": server.url}), draw=draw)
    assert written.figures is False
    assert written.figures_error == "ValueError: no figures today"
    assert "no figures today" in (tmp_path / "paper" / "report.html").read_text()


def test_python_m_kwatt_report_takes_the_clis_arguments(tmp_path, capsys):
    from kwatt.__main__ import main
    # Several values after one --versus or --phase, as the C++ CLI takes them; checked before
    # anything is read (the confidence is wrong), named.
    code = main(["report", "a", "--versus", "b", "c", "--phase", "x=+1..+2", "y=+2..+3",
                 "-o", str(tmp_path / "never"), "--confidence", "2"])
    assert code == 2 and "--confidence" in capsys.readouterr().err
    assert main(["report", "a", "--job", "lyon:1", "-o", str(tmp_path / "never")]) == 2
    assert "give each job as a run" in capsys.readouterr().err
    assert not (tmp_path / "never").exists()


def test_the_installed_kwatt_reports_with_figures(server, tmp_path):
    """The `kwatt` command installed with the package (its launcher) makes the report in Python,
    its figures drawn: the same arguments as the C++ program's `kwatt report`."""
    import subprocess
    import sys
    from pathlib import Path
    cli = Path(sys.executable).parent / "kwatt"
    out = tmp_path / "paper"
    result = subprocess.run([str(cli), "report", "lyon:1001", "--api", server.url, "--phase",
                             "busy=+300..+600", "-o", str(out), "-q"], capture_output=True,
                            text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    assert (out / "figures" / "power.png").read_bytes()[:4] == b"\x89PNG"
    assert 'id="no-figures"' not in (out / "report.html").read_text()
    bad = subprocess.run([str(cli), "report", "lyon:1001", "--api", server.url, "--confidence",
                          "2", "-o", str(tmp_path / "never")], capture_output=True, text=True,
                         timeout=60)
    assert bad.returncode == 2 and "--confidence" in bad.stderr, bad.stderr
    assert not (tmp_path / "never").exists()


def test_energy_from_an_archive_equals_energy_from_the_api(server, tmp_path):
    k = make(server)
    k.start(T0)
    k.stop(T1)
    # The power metrics the nodes have (asking for others is an error: unknown metric).
    known = {m["name"] for ms in k.available_metrics().values() for m in ms}
    power = [m for m in kwatt._core.power_metrics() if m in known]
    path = k.backup(backup_dir=tmp_path / "exp", metrics=power)
    assert_same_energy(k.energy(source=path), k.energy())


def test_source_checks_compare_each_nodes_sources_and_take_the_users_accuracies(server):
    # taurus-1 and taurus-7 have a wattmeter and a BMC: the BMC (5 s, averaged, the simulator's
    # reads ~5 % low) agrees within its stated 10 %, not within a stated 0.1 %.
    k = make(server, hosts=["taurus-1.lyon.grid5000.fr", "taurus-7.lyon.grid5000.fr"])
    start = dt.datetime(2025, 4, 18, 14, 0, tzinfo=PARIS).timestamp()
    k.start(start)
    k.stop(start + 600)
    checks = k.source_checks(phases={"second": (start + 300, start + 600)})
    assert list(checks.columns) == kwatt.frames.SOURCE_CHECK_COLUMNS
    assert set(checks["interval"]) == {"window", "second"}
    assert set(checks["node"]) == set(k.nodes)
    assert set(checks["metric"]) == {"bmc_node_power_watt"}
    assert set(checks["reference"]) == {"wattmetre_power_watt"}
    assert set(checks["verdict"]) == {"agrees"}, checks[["node", "interval", "why"]]
    assert (checks["difference_joules"].abs() <= checks["allowed_joules"]).all()
    assert np.allclose(checks["difference_joules"],
                       checks["joules"] - checks["reference_joules"])
    # The same figures as energy()'s, for the chosen source.
    window = k.energy()
    for _, row in checks[checks["interval"] == "window"].iterrows():
        chosen = window[(window["name"] == row["node"]) & (window["phase"] == "window")]
        assert row["reference_joules"] == pytest.approx(chosen["joules"].iloc[0])
    strict = k.source_checks(accuracies={"bmc_node_power_watt": "0.1%"})
    assert set(strict["verdict"]) == {"disagrees"}
    assert "their stated accuracies and what their data leave uncertain allow only" in \
        strict["why"].iloc[0]
    with pytest.raises(kwatt.InvalidArgumentError, match="neither a percentage nor watts"):
        k.source_checks(accuracies={"bmc_node_power_watt": "5"})
    report = k.energy_report()
    assert report["source_checks"]
    assert_is(report, documents.EnergyReport)


def test_source_checks_read_another_archive_of_the_nodes_with_the_rows(server, tmp_path):
    # The wattmeters in one archive, the BMCs in another (as a kwatt meter recording's domains
    # would be): with_archives reads them together, and the two sources are checked.
    k = make(server, hosts=["taurus-1.lyon.grid5000.fr"])
    start = dt.datetime(2025, 4, 18, 14, 0, tzinfo=PARIS).timestamp()
    k.start(start)
    k.stop(start + 600)
    walls = k.backup(backup_dir=tmp_path / "walls", metrics=["wattmetre_power_watt"])
    bmcs = k.backup(backup_dir=tmp_path / "bmcs", metrics=["bmc_node_power_watt"])
    assert k.source_checks(source=walls).empty  # one source: nothing to check
    checks = k.source_checks(source=walls, with_archives=bmcs)
    assert list(checks["metric"]) == ["bmc_node_power_watt"]
    assert list(checks["verdict"]) == ["agrees"]
    # As the API's rows give it (the API's read 15 s beyond the window: what the data leave
    # uncertain, in the allowance, differs a little).
    live = k.source_checks()
    exact = [c for c in checks.columns if c not in ("allowed_joules", "why")]
    assert checks[exact].equals(live[exact])
    assert checks["allowed_joules"].tolist() == pytest.approx(live["allowed_joules"].tolist(),
                                                              rel=0.05)
    # The node's energy is still its wattmeter's.
    assert k.energy(source=walls, with_archives=[bmcs])["joules"].tolist() == \
        k.energy(source=walls)["joules"].tolist()
    other = make(server, hosts=["taurus-7.lyon.grid5000.fr"])
    other.start(start)
    other.stop(start + 600)
    with pytest.raises(kwatt.InvalidArgumentError, match="holds node taurus-1.lyon.grid5000.fr, "
                       "which is not among the nodes read"):
        other.energy(with_archives=bmcs)
    # kwatt.report() reads it with the run, and names it.
    out = kwatt.report([walls], tmp_path / "paper", with_archives=bmcs)
    data = json.loads((tmp_path / "paper" / "report.json").read_text())
    assert data["provenance"]["runs"][0]["with_archives"] == [str(bmcs)]
    [check] = [c for c in data["sets"]["a"][0]["energy"]["source_checks"]
               if c["interval"] == "window"]
    assert [c["verdict"] for c in check["comparisons"]] == ["agrees"]
    assert out == str(tmp_path / "paper")


def test_energy_explains_a_node_without_power_data(server):
    k = make(server, hosts=["nova-1.lyon.grid5000.fr"])
    k.start(T0)
    k.stop(T0 + 10)
    e = k.energy(metric="pdu_outlet_power_watt")
    row = e[e["scope"] == "node"].iloc[0]
    assert np.isnan(row["joules"]) and row["reason"]


def test_stats_per_node_metric_and_phase(server):
    k = make(server, hosts=NOVA[:2])
    k.start(T0)
    k.mark("idle", T0)
    k.mark("busy", T0 + 60)
    k.stop(T1)
    s = k.stats(metrics=["wattmetre_power_watt", "network_ifacein_bytes_total",
                         "prom_node_cpu_seconds_total"])
    assert list(s.columns) == kwatt.frames.STATS_COLUMNS
    w = s[(s["interval"] == "window") & (s["metric"] == "wattmetre_power_watt")]
    assert list(w["count"]) == [120 * 50 + 1] * 2
    counters = s[s["metric"] == "network_ifacein_bytes_total"]
    assert counters["counter"].all() and (counters["increase"] > 0).all()
    by = s[s["metric"] == "wattmetre_power_watt"].set_index(["interval", "node"])["mean"]
    assert by[("busy", NOVA[0])] > by[("idle", NOVA[0])]
    # CPU usage, from the node exporter every non-deploy job runs: the job's phases.
    cpu = s.groupby(["interval", "node"])[["cpu_busy"]].first()["cpu_busy"]
    assert cpu[("busy", NOVA[0])] > 0.9 and cpu[("idle", NOVA[0])] < 0.1
    assert set(s[s["metric"] == "prom_node_cpu_seconds_total"]["cpu_source"]) == {
        "prom_node_cpu_seconds_total"}


# ---- plots -----------------------------------------------------------------------------------

def test_plots(server, tmp_path):
    import matplotlib
    matplotlib.use("Agg")
    from kwatt.plots import plot_energy
    k = make(server)
    k.start(T0)
    k.mark("idle", T0)
    k.mark("busy", T0 + 60)
    k.stop(T1)
    ax = k.plot_power()
    assert len(ax.get_lines()) == 3 + 2  # a line per node, start and stop
    assert ax.get_ylabel() == "power (W)"
    ax.figure.savefig(tmp_path / "power.png")
    ax2 = plot_energy(k.energy())
    assert len(ax2.patches) == 3 * 3  # nodes x (window, idle, busy)
    ax2.figure.savefig(tmp_path / "energy.png")
    for name in ("power.png", "energy.png"):
        assert (tmp_path / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_plot_power_draws_the_source_energy_chooses():
    # The wattmeter covers 10 s of 100 and the PDU all of it: energy() uses the PDU (the
    # wattmeter covers < 95 %), and so must the plot (it drew the first metric present).
    import matplotlib
    matplotlib.use("Agg")
    from kwatt.plots import plot_power
    node = "nova-1.lyon.grid5000.fr"
    rows = [(T0 + i, "pdu_outlet_power_watt", 100.0) for i in range(101)]
    rows += [(T0 + i, "wattmetre_power_watt", 90.0) for i in range(11)]
    frame = pd.DataFrame({
        "timestamp": pd.to_datetime([int(t * 1e9) for t, _, _ in rows], utc=True),
        "site": "lyon", "node": node, "device_id": "nova-1",
        "metric_id": [m for _, m, _ in rows], "value": [v for _, _, v in rows],
        "labels": "{}"})
    window = (int(T0 * 1e9), int((T0 + 100) * 1e9))
    ax = plot_power(frame, window=window)
    labels = [line.get_label() for line in ax.get_lines() if not line.get_label().startswith("_")]
    assert labels == ["nova-1 (pdu_outlet_power_watt)"]
    assert kwatt._core.power_sources(
        nodes=[node] * len(rows), metrics=[m for _, m, _ in rows], labels=["{}"] * len(rows),
        times=np.array([int(t * 1e9) for t, _, _ in rows]),
        values=np.array([v for _, _, v in rows]), start=window[0], end=window[1]) == {
        node: "pdu_outlet_power_watt"}


# ---- progress and interruption ------------------------------------------------------------------

def test_ctrl_c_stops_a_fetch_without_waiting_for_its_end(tmp_path):
    import os
    import signal
    # 100 s of 50 Hz data paced at 1000 rows/s: the whole answer would take 5 s.
    paced = start_server("--rows-per-second", "1000", "--jobs", JOBS, tmp_path=tmp_path)
    try:
        k = kwatt.Kwollect(nodes=NOVA[:1], api=paced.url, progress=False)
        k.start(T0)
        k.stop(T0 + 100)
        timer = threading.Timer(0.5, lambda: os.kill(os.getpid(), signal.SIGINT))
        timer.start()
        began = time.monotonic()
        with pytest.raises(KeyboardInterrupt):
            k.get_metrics(metrics=["wattmetre_power_watt"])
        assert time.monotonic() - began < 4
    finally:
        paced.stop()


def test_progress_function(server):
    seen = []
    k = kwatt.Kwollect(nodes=NOVA, api=server.url, progress=seen.append, rows_per_request=2000)
    k.start(T0)
    k.stop(T0 + 60)
    k.get_metrics(metrics=["wattmetre_power_watt"])
    assert seen and seen[-1]["requests_done"] == seen[-1]["requests_total"] > 1
    assert seen[-1]["rows"] == 3 * (60 * 50 + 1)

    def broken(progress):
        raise RuntimeError("no")
    k.progress = broken
    with pytest.raises(RuntimeError, match="^no$"):  # the function's own exception, as it was
        k.get_metrics(metrics=["wattmetre_power_watt"])


def test_roles_give_the_same_node_order_in_every_process(tmp_path):
    # EnOSlib's role views are sets: their order changes with the hash seed. The nodes (and so a
    # backup's query) must not.
    import subprocess
    import sys
    code = ("import enoslib as en, kwatt; hosts = [en.Host(f'nova-{i}.lyon.grid5000.fr') "
            "for i in (1, 2, 10, 4)]; roles = en.Roles({'r': hosts}); "
            "print(kwatt.Kwollect(roles=roles['r']).nodes)")
    outputs = {subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                              env={**__import__("os").environ, "PYTHONHASHSEED": str(seed)}
                              ).stdout for seed in (1, 2, 3, 4)}
    assert outputs == {str([f"nova-{i}.lyon.grid5000.fr" for i in (1, 2, 4, 10)]) + "\n"}


def test_a_phase_marked_twice_is_one_phase(server):
    k = make(server, hosts=NOVA[:1])
    start = dt.datetime(2025, 4, 18, 14, 0, tzinfo=PARIS).timestamp()
    k.start(start)
    for i, name in enumerate(["idle", "busy", "idle", "busy"]):
        k.mark(name, start + 300 * i)
    k.stop(start + 1200)
    e = k.energy(baseline="idle")
    node = e[e["scope"] == "node"].set_index("phase")
    assert list(node.index) == ["window", "idle", "busy"]
    assert node.loc["idle", "seconds"] == node.loc["busy", "seconds"] == 600
    assert node.loc["idle", "joules"] + node.loc["busy", "joules"] == pytest.approx(
        node.loc["window", "joules"])
    assert node.loc["busy", "mean_watts"] > 1.5 * node.loc["idle", "mean_watts"]


def test_import_kwatt_does_not_import_enoslib():
    import subprocess
    import sys
    out = subprocess.run([sys.executable, "-c", "import sys, kwatt; kwatt.load; "
                          "print('enoslib' in sys.modules); kwatt.Kwollect; "
                          "print('enoslib' in sys.modules)"], capture_output=True, text=True)
    assert out.stdout.split() == ["False", "True"], out.stderr


def test_rows_are_left_to_reference_counting(server):
    # Millions of row dicts would otherwise be scanned by the cyclic collector again and again.
    import gc
    k = make(server, hosts=NOVA[:1])
    k.start(T0)
    k.stop(T0 + 1)
    row = k.get_metrics(metrics=["wattmetre_power_watt"])[NOVA[0]][0]
    assert not gc.is_tracked(row) and not gc.is_tracked(row["labels"])
    assert not gc.is_tracked(row["labels"]["_device_orig"])
    row["mine"] = {"a": []}  # a container put in a row: CPython tracks the row again
    assert gc.is_tracked(row)


def test_works_without_enoslib(server):
    import subprocess
    import sys
    code = f"""
import sys
sys.modules["enoslib"] = None  # as if EnOSlib were not installed
import kwatt
import kwatt.simulator
k = kwatt.Kwollect(nodes=["nova-1.lyon"], api="{server.url}", progress=False)
k.start({T0}); k.stop({T0 + 1})
print(type(k).__mro__[1].__module__, len(k.get_metrics(metrics=["wattmetre_power_watt"])["nova-1.lyon.grid5000.fr"]))
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["kwatt.service", "51"]


def test_nan_values_end_to_end(tmp_path):
    # A switch port counter and the wattmeter that cannot read for a while (rows with "NaN"): rows
    # exactly as the API's, NaN in the DataFrame and the archive, and energy counting the NaN span
    # as a gap rather than as zero watts.
    jobs = json.loads(__import__("conftest").JOBS.read_text())
    jobs["outages"] = [
        {"site": "lyon", "device": "nova-1", "metric": "network_ifacein_bytes_total",
         "start": T0 + 5, "end": T0 + 35, "report": "NaN"},
        {"site": "lyon", "device": "nova-1", "metric": "wattmetre_power_watt",
         "start": T0 + 40, "end": T0 + 50, "report": "NaN"},
    ]
    path = tmp_path / "jobs.json"
    path.write_text(json.dumps(jobs))
    with kwatt.simulator.SimulatedKwollect(path) as api:
        k = kwatt.Kwollect(nodes=NOVA[:1], api=api.url, progress=False)
        k.start(T0)
        k.stop(T0 + 60)
        metrics = ["network_ifacein_bytes_total", "wattmetre_power_watt"]
        rows = k.get_metrics(metrics=metrics)[NOVA[0]]
        assert rows == api_rows(api, "lyon", ["nova-1"], metrics, T0, T0 + 60)
        nan_rows = [r for r in rows if r["value"] == "NaN"]
        assert {r["metric_id"] for r in nan_rows} == set(metrics)
        assert all(isinstance(r["value"], (int, float)) for r in rows if r not in nan_rows)
        df = k.to_pandas(metrics=metrics)
        assert df["value"].isna().sum() == len(nan_rows)
        archive = k.backup(backup_dir=tmp_path / "exp", metrics=metrics)
        assert run_kwatt("inspect", archive, "--verify").returncode == 0
        assert kwatt.load(archive)["value"].isna().sum() == len(nan_rows)
        e = k.energy(metric="wattmetre_power_watt")
        node = e[(e["scope"] == "node") & (e["phase"] == "window")].iloc[0]
        assert node["gaps"] == 1 and node["coverage"] == pytest.approx(50 / 60, abs=0.01)
        assert node["gap_joules"] > 0


# ---- issue 10: meaningless options, unknown metrics ----------------------------------------------

@pytest.mark.parametrize("option, value", [("concurrency", 0), ("per_site", 0),
                                           ("rows_per_request", 0), ("retries", -1),
                                           ("backoff", -1.0), ("timeout", 0)])
def test_meaningless_options_are_refused_not_hung_on(server, option, value):
    # Refused when the Kwollect is made (the C++ client checks its options once), naming it.
    began = time.monotonic()
    with pytest.raises(kwatt.InvalidArgumentError, match=f"^{option}"):
        make(server, hosts=NOVA[:1], **{option: value})
    with pytest.raises(kwatt.InvalidArgumentError, match="unknown client option \"concurency\""):
        make(server, hosts=NOVA[:1], concurency=4)
    assert time.monotonic() - began < 10


def test_an_unknown_metric_is_named_not_zero_rows(server):
    k = make(server, hosts=NOVA[:1])
    k.start(T0)
    k.stop(T0 + 5)
    for call in (lambda: k.get_metrics(metrics=["wattmeter_power_watt"]),
                 lambda: k.stats(metrics=["wattmeter_power_watt"])):
        with pytest.raises(kwatt.NotFoundError, match="unknown metric wattmeter_power_watt .*"
                                                      "did you mean wattmetre_power_watt"):
            call()
    # energy() tries every power source: those a node lacks are no error.
    assert len(k.energy()) > 0
