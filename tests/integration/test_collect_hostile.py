"""`kwatt collect` and `kwatt jobs` under what a careless or hostile site does to them: concurrent
job adds, ids at the edge, node names in every form, a store deleted or shared under a running
collector, a collector killed while its store is down, malformed custom metrics and devices that
lack what the configuration names (issue 22, items 7, 8 and 13). Real processes, real stores (the
embedded one and a real PostgreSQL), real peers (node exporter, snmpd, ipmi_sim)."""
import json
import subprocess

import pytest

from conftest import KWATT, run_kwatt


def jobs_add(store, *args):
    return subprocess.run([KWATT, "jobs", "add", "--store", str(store), *map(str, args)],
                          capture_output=True, text=True, timeout=120)


def jobs_listed(store, site="lyon"):
    done = run_kwatt("jobs", "list", "--store", store, "--site", site, "--json")
    assert done.returncode == 0, done.stderr
    return [json.loads(line) for line in done.stdout.splitlines()]


# --- kwatt jobs add (item 8) -------------------------------------------------------------------


@pytest.fixture(params=["sqlite", "postgresql"])
def store_uri(request, tmp_path):
    if request.param == "sqlite":
        return str(tmp_path / "s.store")
    return request.getfixturevalue("postgres").new_database()


def test_concurrent_adds_get_distinct_ids_and_every_job_is_kept(store_uri):
    # Create the store first: 8 processes creating one file at once is another matter.
    assert jobs_add(store_uri, "--site", "lyon", "--nodes", "nova-1").returncode == 0
    processes = [subprocess.Popen([KWATT, "jobs", "add", "--store", store_uri, "--site", "lyon",
                                   "--nodes", f"nova-{i + 4}"],
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                 for i in range(8)]
    ids = []
    for process in processes:
        out, err = process.communicate(timeout=120)
        assert process.returncode == 0, err
        ids.append(int(out))
    assert sorted(ids) == list(range(2, 10))
    jobs = jobs_listed(store_uri)
    assert sorted(job["id"] for job in jobs) == list(range(1, 10))
    by_id = {job["id"]: job["nodes"] for job in jobs}
    for process_index, job_id in enumerate(ids):
        assert by_id[job_id] == [f"nova-{process_index + 4}"]


def test_ids_never_wrap_and_an_existing_job_is_never_replaced_silently(store_uri):
    top = 9223372036854775807
    added = jobs_add(store_uri, "--site", "lyon", "--nodes", "nova-1", "--id", top)
    assert added.returncode == 0, added.stderr
    assert added.stdout.strip() == str(top)
    # The next id would be 2^63: refused, naming what to do, and nothing written.
    after = jobs_add(store_uri, "--site", "lyon", "--nodes", "nova-4")
    assert after.returncode == 2
    assert str(top) in after.stderr and "--id" in after.stderr
    again = jobs_add(store_uri, "--site", "lyon", "--nodes", "nova-5", "--id", top)
    assert again.returncode == 2 and "already" in again.stderr
    assert [(job["id"], job["nodes"]) for job in jobs_listed(store_uri)] == [(top, ["nova-1"])]
    # Replacing is said explicitly.
    replaced = jobs_add(store_uri, "--site", "lyon", "--nodes", "nova-5", "--id", top, "--replace")
    assert replaced.returncode == 0, replaced.stderr
    assert [(job["id"], job["nodes"]) for job in jobs_listed(store_uri)] == [(top, ["nova-5"])]


def test_a_jobs_file_does_not_replace_a_job_silently(tmp_path):
    store = tmp_path / "jobs.store"
    assert jobs_add(store, "--site", "lyon", "--nodes", "nova-1", "--id", 7).returncode == 0
    jobs_file = tmp_path / "jobs.json"
    jobs_file.write_text(json.dumps({"jobs": [{"site": "lyon", "uid": 7, "nodes": ["nova-4"],
                                               "started_at": 1764633600}]}))
    refused = jobs_add(store, "--from", jobs_file)
    assert refused.returncode == 2 and "already" in refused.stderr and "--replace" in refused.stderr
    assert [job["nodes"] for job in jobs_listed(store)] == [["nova-1"]]
    replaced = jobs_add(store, "--from", jobs_file, "--replace")
    assert replaced.returncode == 0, replaced.stderr
    assert [job["nodes"] for job in jobs_listed(store)] == [["nova-4"]]


@pytest.mark.parametrize("bad_id", ["0", "-3"])
def test_an_id_that_is_not_positive_is_refused(tmp_path, bad_id):
    store = tmp_path / "jobs.store"
    refused = jobs_add(store, "--site", "lyon", "--nodes", "nova-1", f"--id={bad_id}")
    assert refused.returncode == 2
    assert "positive" in refused.stderr and bad_id in refused.stderr
    assert not store.exists() or jobs_listed(store) == []


def test_node_names_are_normalised_and_checked(tmp_path):
    store = tmp_path / "jobs.store"
    added = jobs_add(store, "--site", "lyon", "--nodes",
                     "nova-1.lyon.grid5000.fr,nova-4.lyon,nova-5")
    assert added.returncode == 0, added.stderr
    assert [job["nodes"] for job in jobs_listed(store)] == [["nova-1", "nova-4", "nova-5"]]
    # The API shows them with the site's domain once.
    twice = jobs_add(store, "--site", "lyon", "--nodes", "nova-1,nova-1.lyon.grid5000.fr")
    assert twice.returncode == 2 and "nova-1 again" in twice.stderr
    foreign = jobs_add(store, "--site", "lyon", "--nodes", "nova-1,grisou-1.nancy.grid5000.fr")
    assert foreign.returncode == 2
    assert "grisou-1.nancy.grid5000.fr" in foreign.stderr and "site nancy" in foreign.stderr
    typo = jobs_add(store, "--site", "lyon", "--nodes", "nova-1,novaa-14")
    assert typo.returncode == 2
    assert "novaa-14" in typo.stderr and "did you mean nova-14?" in typo.stderr
    retired = jobs_add(store, "--site", "lyon", "--nodes", "nova-2")  # not in the reference
    assert retired.returncode == 2 and '"nova-2"' in retired.stderr
    nonsense = jobs_add(store, "--site", "lyon", "--nodes", "x;y")
    assert nonsense.returncode == 2 and "x;y" in nonsense.stderr
    no_site = jobs_add(store, "--site", "atlantis", "--nodes", "rack-1")
    assert no_site.returncode == 2 and "atlantis" in no_site.stderr and "--testbed" in no_site.stderr
    assert len(jobs_listed(store)) == 1


def test_a_lab_names_its_nodes_with_its_testbed_description(tmp_path):
    testbed = tmp_path / "lab.yaml"
    testbed.write_text("sites:\n  - uid: lab\n    clusters:\n      - uid: rack\n"
                       "        nodes: [rack-1, rack-2]\n        metrics: []\n")
    store = tmp_path / "jobs.store"
    added = jobs_add(store, "--site", "lab", "--nodes", "rack-2.lab.grid5000.fr",
                     "--testbed", testbed)
    assert added.returncode == 0, added.stderr
    assert [job["nodes"] for job in jobs_listed(store, "lab")] == [["rack-2"]]
    typo = jobs_add(store, "--site", "lab", "--nodes", "rack-3", "--testbed", testbed)
    assert typo.returncode == 2 and "rack-3" in typo.stderr and "lab" in typo.stderr


# --- kwatt collect (items 7 and 13) ------------------------------------------------------------

import time  # noqa: E402
from datetime import datetime  # noqa: E402

from conftest import wait_until  # noqa: E402
from test_collect import (Collecting, Peer, collectors_stopped, exporter,  # noqa: E402,F401
                          store_rows, write_config)


def check(config):
    return subprocess.run([KWATT, "collect", "--config", str(config), "--check"],
                          capture_output=True, text=True, timeout=120)


def test_identical_descriptions_are_refused_naming_both(tmp_path):
    pdu = {"name": "pdu_outlet_power_watt", "device_id": "pdu-1-port-3",
           "url": "snmp://public@127.0.0.1:1161/1.3.6.1.4.1.318.1.1.26.9.4.3.1.7.3",
           "labels": {"_device_alias": "nova-1"}}
    config = write_config(tmp_path / "conf", [pdu, dict(pdu)])
    refused = check(config)
    assert refused.returncode == 2
    assert "entry 2" in refused.stderr and "entry 1" in refused.stderr, refused.stderr


def test_a_device_alias_that_is_not_one_name_is_refused(tmp_path):
    config = write_config(tmp_path / "conf", [
        {"name": "pdu_outlet_power_watt", "device_id": "pdu-1-port-3",
         "url": "snmp://public@127.0.0.1:1161/1.3.6.1.4.1.318.1.1.26.9.4.3.1.7.3",
         "labels": {"_device_alias": ["nova-1", "nova-2"]}}])
    refused = check(config)
    assert refused.returncode == 2
    assert "entry 1" in refused.stderr and "_device_alias" in refused.stderr, refused.stderr


def test_a_wattmeter_url_query_is_read_as_the_query(tmp_path):
    lines = tmp_path / "lines.txt"
    now = int(time.time()) - 10
    lines.write_text("".join(f"x,x,{now + k // 10}.{k % 10}00,OK,{100 + k % 3},50\n"
                             for k in range(30)))
    config = write_config(tmp_path / "conf", [
        {"name": "wattmetre_power_watt", "device_id": "wattmetre1",
         "url": "wattmetre://wattmetre1?version=2", "command": ["cat", str(lines)]}])
    store = tmp_path / "s.store"
    done = subprocess.run([KWATT, "collect", "--config", config, "--store", store, "--id", "",
                           "--duration", "2", "--quiet"], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    devices = {row["device_id"] for row in store_rows(store)}
    assert devices == {"wattmetre1-port0", "wattmetre1-port1"}, devices


def test_custom_metrics_timestamps_empty_or_unreadable_and_one_series_per_metric(tmp_path,
                                                                                   exporter):
    exporter.write('kwollect_custom{_metric_id="phase_now",_timestamp=""} 1\n'
                   'kwollect_custom{_metric_id="phase_bad",_timestamp="soon"} 2\n'
                   'kwollect_custom{_metric_id="phase_at",_timestamp="1764633600.5"} 3\n')
    config = write_config(tmp_path / "conf", [
        {"name": "custom", "device_id": "nova-1", "update_every": 200,
         "url": f"prometheus://127.0.0.1:{exporter.port}/kwollect_custom"}])
    store = tmp_path / "s.store"
    started = time.time()
    collecting = Collecting(config, store, "--id", "")
    # The unreadable timestamp counted, and the same samples scraped again and again.
    collecting.until("kwatt_collect_bad_timestamps_total", 1)
    collecting.until("kwatt_collect_polls_total", 6)
    collecting.until("kwatt_collect_rows_written_total", 2)
    code, err = collecting.stop()
    assert code == 0, err
    rows = store_rows(store)
    now_rows = [r for r in rows if r["metric_id"] == "phase_now"]
    # An empty _timestamp is the scrape's time (as when there is none), not a lost sample.
    assert now_rows and all(
        started - 5 < datetime.fromisoformat(r["timestamp"]).timestamp() < time.time() + 5
        for r in now_rows)
    assert not [r for r in rows if r["metric_id"] == "phase_bad"]
    # The unreadable one is counted (waited for above) and said.
    assert 'phase_bad' in err and "soon" in err, err
    # A sample with its own timestamp, scraped again and again, is one row: the scrape time is
    # no label (a new series per scrape), and the same instant is not written twice.
    at = [r for r in rows if r["metric_id"] == "phase_at"]
    assert len(at) == 1, at
    assert "_metric_scrape_time" not in at[0]["labels"]


def test_kill_9_while_the_store_is_down_keeps_what_was_read_in_the_spool(tmp_path, exporter):
    exporter.write("kwatt_test_power 42\n")
    config = write_config(tmp_path / "conf", [
        {"name": "node", "device_id": "nova-1", "update_every": 100,
         "url": f"prometheus://127.0.0.1:{exporter.port}/kwatt_test_power"}])
    spool = tmp_path / "spool"
    down = f"postgresql:///kwatt?host={tmp_path}/no-server-here&user=postgres"
    collecting = Collecting(config, down, "--spool", spool, "--id", "")
    collecting.until("kwatt_collect_rows_spooled", 12)
    killed_at = time.time()
    collecting.process.kill()
    collecting.process.communicate(timeout=30)
    spooled = []
    for path in sorted(spool.glob("kwatt-collect-*.jsonl")) if spool.exists() else []:
        spooled += [json.loads(line) for line in path.read_text().splitlines()]
    powers = [r for r in spooled if r["metric_id"] == "prom_kwatt_test_power"]
    assert len(powers) >= 10, f"{len(powers)} rows spooled"
    # The last half second or so may be lost, not more (generous: a loaded 2-core machine).
    newest = max(datetime.fromisoformat(r["timestamp"]).timestamp() for r in powers)
    assert killed_at - newest < 2.5, killed_at - newest
    # The next collector writes them.
    store = tmp_path / "s.store"
    after = subprocess.run([KWATT, "collect", "--config", config, "--store", store, "--spool",
                            spool, "--id", "", "--duration", "1", "--quiet"],
                           capture_output=True, text=True, timeout=120)
    assert after.returncode == 0, after.stderr
    assert len([r for r in store_rows(store)
                if r["metric_id"] == "prom_kwatt_test_power"]) >= len(powers)


def test_a_store_file_deleted_under_the_collector_is_made_again(tmp_path, exporter):
    exporter.write("kwatt_test_power 42\n")
    config = write_config(tmp_path / "conf", [
        {"name": "node", "device_id": "nova-1", "update_every": 100,
         "url": f"prometheus://127.0.0.1:{exporter.port}/kwatt_test_power"}])
    store = tmp_path / "s.store"
    collecting = Collecting(config, store, "--id", "")
    collecting.until("kwatt_collect_rows_written_total", 5)
    assert store.exists()
    store.unlink()
    deleted_at = time.time()

    def written_again():
        """The rows read after the deletion, once a store is there again to read them from."""
        done = run_kwatt("store", "cat", store) if store.exists() else None
        if done is None or done.returncode != 0:
            return None
        rows = [json.loads(line) for line in done.stdout.splitlines()]
        return [r for r in rows if r["metric_id"] == "prom_kwatt_test_power"
                and datetime.fromisoformat(r["timestamp"]).timestamp() > deleted_at]

    wait_until(lambda: len(written_again() or []) >= 5, "rows in the store made again",
               every=0.25)
    code, err = collecting.stop()
    assert "s.store was deleted while the collector wrote into it" in err, err
    assert store.exists(), err
    after = [r for r in store_rows(store) if r["metric_id"] == "prom_kwatt_test_power"
             and datetime.fromisoformat(r["timestamp"]).timestamp() > deleted_at]
    assert len(after) >= 5, err


def test_a_second_collector_on_a_store_is_refused_naming_the_first(tmp_path, exporter,
                                                                    store_uri):
    exporter.write("kwatt_test_power 42\n")
    config = write_config(tmp_path / "conf", [
        {"name": "node", "device_id": "nova-1", "update_every": 500,
         "url": f"prometheus://127.0.0.1:{exporter.port}/kwatt_test_power"}])
    store = store_uri  # a file, or a PostgreSQL database (a collector on another machine)
    first = Collecting(config, store, "--id", "")
    try:
        first.until("kwatt_collect_rows_written_total", 1)  # the store is the first's
        second = subprocess.run([KWATT, "collect", "--config", config, "--store", store,
                                 "--duration", "2"], capture_output=True, text=True, timeout=120)
        assert second.returncode != 0
        assert str(first.process.pid) in second.stderr, second.stderr
    finally:
        code, err = first.stop()
    assert code == 0, err
    # Once the first has stopped, another may start.
    third = subprocess.run([KWATT, "collect", "--config", config, "--store", store,
                            "--duration", "1", "--quiet"], capture_output=True, text=True,
                           timeout=120)
    assert third.returncode == 0, third.stderr


def test_a_missing_sensor_or_oid_is_counted_said_and_fails_the_check(tmp_path):
    bmc = Peer("ipmi_sim")
    snmp = Peer("snmpd")
    try:
        prefix, sensor_and_options = bmc.where["power_url"].rsplit("/", 1)
        missing_sensor = prefix + "/NoSuchSensor?" + sensor_and_options.split("?", 1)[1]
        missing_oid = snmp.where["url"] + "/1.3.6.1.4.1.99999.42.0"
        config = write_config(tmp_path / "conf", [
            {"name": "bmc_node_power_watt", "device_id": "rack-1", "url": bmc.where["power_url"],
             "update_every": 500},
            {"name": "bmc_missing", "device_id": "rack-1", "url": missing_sensor,
             "update_every": 500},
            {"name": "pdu_missing", "device_id": "pdu-1", "url": missing_oid,
             "update_every": 300}])
        checked = check(config)
        assert checked.returncode == 2, checked.stdout + checked.stderr
        assert "NoSuchSensor" in checked.stderr and "1.3.6.1.4.1.99999.42.0" in checked.stderr
        store = tmp_path / "s.store"
        collecting = Collecting(config, store, "--id", "")
        for device in ("ipmisensor://", "snmp://"):
            collecting.until("kwatt_collect_missing_values_total", 1, device=device)
        collecting.until("kwatt_collect_rows_written_total", 1)  # the sensor that is there
        code, err = collecting.stop()
        assert code == 0, err
        # Each missing one counted (waited for above) and said.
        assert "NoSuchSensor" in err and "1.3.6.1.4.1.99999.42.0" in err, err
        assert any(r["metric_id"] == "bmc_node_power_watt" for r in store_rows(store))
    finally:
        bmc.stop()
        snmp.stop()


def test_a_monitor_type_whose_regex_does_not_compile_is_refused(tmp_path):
    store = tmp_path / "jobs.store"
    refused = jobs_add(store, "--site", "lyon", "--nodes", "nova-1", "--types", "monitor=(")
    assert refused.returncode == 2 and "monitor=(" in refused.stderr, refused.stderr
    assert not store.exists() or jobs_listed(store) == []
