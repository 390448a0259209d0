"""The store from the command line: `kwatt import` of a real backup into the embedded store and
into PostgreSQL (a real cluster), `kwatt store info|check|cat`, and `kwatt serve --store`; the rows
come back as the archive holds them."""
import json
import resource
import shutil
import signal
import subprocess

import pytest
import requests

from conftest import KWATT, ROOT, run_kwatt, start_server, store_of_simulation

JOBS_FILE = ROOT / "examples" / "jobs.json"
START = "2025-04-18T14:00:00+02:00"
END = "2025-04-18T14:01:00+02:00"


@pytest.fixture(scope="module")
def archive(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("store")
    server = start_server("--jobs", JOBS_FILE, tmp_path=tmp)
    try:
        directory = tmp / "archive"
        done = run_kwatt("backup", "--api", server.url, "--job", "lyon:1001", "--end", END, "-o",
                         directory, "--quiet")
        assert done.returncode == 0, done.stderr
    finally:
        server.stop()
    manifest = json.loads((directory / "manifest.json").read_text())
    rows = sum(f["rows"] for f in manifest["files"])
    assert rows > 10_000
    return directory, rows


def lines(result):
    assert result.returncode == 0, result.stderr
    return sorted(result.stdout.decode().splitlines())


@pytest.fixture(params=["sqlite", "postgresql"])
def store_uri(request, tmp_path):
    if request.param == "sqlite":
        return str(tmp_path / "site.db")
    return request.getfixturevalue("postgres").new_database()


def test_an_archive_imported_comes_back_row_for_row(archive, store_uri):
    directory, rows = archive
    imported = run_kwatt("import", directory, "--store", store_uri)
    assert imported.returncode == 0, imported.stderr
    assert f"{rows} rows of".encode() in imported.stderr
    # Exactly the archive's rows (the store gives them device by device, the archive node file
    # by node file: compared as sets of lines).
    assert lines(run_kwatt("store", "cat", store_uri)) == lines(run_kwatt("cat", directory))
    one = run_kwatt("store", "cat", store_uri, "--nodes", "nova-4.lyon.grid5000.fr", "--metrics",
                    "wattmetre_power_watt", "--start", START, "--end", "2025-04-18T14:00:10+02:00")
    expected = run_kwatt("cat", directory, "--nodes", "nova-4.lyon", "--metrics",
                         "wattmetre_power_watt", "--start", START, "--end",
                         "2025-04-18T14:00:10+02:00")
    assert lines(one) == lines(expected) and len(lines(one)) > 400
    info = run_kwatt("store", "info", store_uri, "--json")
    assert info.returncode == 0, info.stderr
    described = json.loads(info.stdout)
    assert described["rows"] == rows and described["jobs"] == 1 and described["catalogues"] == 1
    assert described["first"].startswith("2025-04-18T12:00:0")
    checked = run_kwatt("store", "check", store_uri)
    assert checked.returncode == 0, checked.stderr
    assert b": OK (" in checked.stdout
    # A second import would keep every row twice: refused, nothing added.
    again = run_kwatt("import", directory, "--store", store_uri)
    assert again.returncode == 2
    assert f"holds this archive already: an import of it put its {rows} rows there".encode() \
        in again.stderr, again.stderr
    assert json.loads(run_kwatt("store", "info", store_uri, "--json").stdout)["rows"] == rows


@pytest.mark.parametrize("cut", ["killed", "disk full"])
def test_an_import_cut_short_is_completed_by_the_same_command(archive, tmp_path, cut):
    """Issue 36, item 5: an import killed (here by the file size limit's SIGXFSZ, as by kill -9)
    or stopped by a full disk (the same limit, its signal ignored: writes fail with EFBIG) at any
    point is completed by running the same command again: every row once."""
    directory, rows = archive
    whole = tmp_path / "whole.db"
    assert run_kwatt("import", directory, "--store", whole, "--quiet").returncode == 0
    size = max(p.stat().st_size for p in tmp_path.glob("whole.db*"))

    def limited(limit):
        def apply():
            if cut == "disk full":
                signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
            resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
        return apply

    resumed = 0
    for n, fraction in enumerate((0.25, 0.5, 0.75)):
        store = tmp_path / f"site{n}.db"
        first = subprocess.run([KWATT, "import", directory, "--store", store, "--commit-rows",
                                "1000"], capture_output=True, timeout=300,
                               preexec_fn=limited(int(size * fraction)))
        if first.returncode == 0:
            continue  # the limit was not reached
        if cut == "killed":
            assert first.returncode == -signal.SIGXFSZ, first.stderr
        else:
            assert first.returncode != 0 and b"INTERRUPTED after" in first.stderr, first.stderr
            assert b"the same command completes it" in first.stderr, first.stderr
        again = run_kwatt("import", directory, "--store", store)
        assert again.returncode == 0, again.stderr
        if b"an earlier import of this archive did not finish" in again.stderr:
            resumed += 1
            assert f"of its {rows} rows: importing the rest".encode() in again.stderr
            assert b"complete now" in again.stderr, again.stderr
        # Every row once, whatever the point of the cut.
        assert lines(run_kwatt("store", "cat", store)) == lines(run_kwatt("cat", directory))
        assert run_kwatt("store", "check", store).returncode == 0
        refused = run_kwatt("import", directory, "--store", store)
        assert refused.returncode == 2 and b"holds this archive already" in refused.stderr
    assert resumed > 0, "no cut left a part of the import committed: the test proved nothing"


def test_a_store_holding_part_of_an_archive_says_an_import_did_not_finish(archive, tmp_path):
    # The store holds the archive's first 10 s (another archive's rows, as a backup of a part of
    # the job makes): importing the archive is refused, saying so, not as if it had been
    # imported whole, nor as an import of its own to complete.
    directory, rows = archive
    server = start_server("--jobs", JOBS_FILE, tmp_path=tmp_path)
    try:
        part = tmp_path / "part"
        done = run_kwatt("backup", "--api", server.url, "--job", "lyon:1001", "--end",
                         "2025-04-18T14:00:10+02:00", "-o", part, "--quiet")
        assert done.returncode == 0, done.stderr
    finally:
        server.stop()
    store = tmp_path / "site.db"
    assert run_kwatt("import", part, "--store", store).returncode == 0
    again = run_kwatt("import", directory, "--store", store)
    assert again.returncode == 2
    assert b"(not put there by an import of this archive, which has " in again.stderr, \
        again.stderr


def test_check_info_and_cat_never_make_a_store_of_an_empty_file(tmp_path):
    # A `touch`, a copy cut short: named, and left as it is (doc/store.md: they never create).
    empty = tmp_path / "empty.db"
    empty.touch()
    for command in (["store", "check"], ["store", "info"], ["store", "cat"]):
        done = run_kwatt(*command, empty)
        assert done.returncode != 0, command
        assert b"is an empty file, not a store" in done.stderr, done.stderr
    assert empty.stat().st_size == 0 and not (tmp_path / "empty.db-wal").exists()


def test_jobs_with_a_control_character_are_refused_and_listed_one_a_line(tmp_path):
    store = tmp_path / "jobs.db"
    refused = run_kwatt("jobs", "add", "--store", store, "--site", "lyon", "--nodes", "nova-1",
                        "--types", "monitor\nx", "--start", "2025-04-18T14:00:00Z")
    assert refused.returncode == 2
    assert b'its type "monitor\\nx" holds a control character' in refused.stderr
    added = run_kwatt("jobs", "add", "--store", store, "--site", "lyon", "--nodes", "nova-1",
                      "--user", "bob", "--start", "2025-04-18T14:00:00Z")
    assert added.returncode == 0, added.stderr
    listed = run_kwatt("jobs", "list", "--store", store, "--site", "lyon")
    assert listed.stdout.decode().count("\n") == 1


def test_a_damaged_store_file_is_named_by_check(archive, tmp_path):
    directory, _ = archive
    store = tmp_path / "site.db"
    assert run_kwatt("import", directory, "--store", store).returncode == 0
    damaged = tmp_path / "damaged.db"
    shutil.copy(store, damaged)
    data = bytearray(damaged.read_bytes())
    for offset in range(len(data) // 2, len(data) // 2 + 4096, 97):
        data[offset] ^= 0x5A
    damaged.write_bytes(bytes(data))
    checked = run_kwatt("store", "check", damaged)
    assert checked.returncode == 1, (checked.stdout, checked.stderr)
    assert b"DAMAGED" in checked.stdout, checked.stdout
    assert checked.stderr.startswith(b"kwatt store check: ")
    assert str(damaged).encode() in checked.stderr


def test_what_is_not_a_store_is_named_and_not_made(tmp_path, archive):
    missing = tmp_path / "none.db"
    refused = run_kwatt("store", "info", missing)
    assert refused.returncode == 1 and str(missing).encode() in refused.stderr
    assert not missing.exists()  # looking does not create
    directory, _ = archive
    assert run_kwatt("import", directory, "--store", "").returncode == 2
    absent = run_kwatt("store", "info", "postgresql://alice:s3cret@127.0.0.1:1/db?connect_timeout=2")
    assert absent.returncode == 1
    assert b"s3cret" not in absent.stderr and b"cannot connect" in absent.stderr


# ---- kwatt serve --store: the Kwollect API over a store ------------------------------------------

def served(store_uri, *args):
    return start_server(*args, store=store_uri)


def test_a_store_serves_its_rows_as_the_simulated_server_served_them(archive, store_uri, tmp_path):
    directory, rows = archive
    assert run_kwatt("import", directory, "--store", store_uri).returncode == 0
    server = served(store_uri)
    try:
        again = tmp_path / "again"
        done = run_kwatt("backup", "--api", server.url, "--job", "lyon:1001", "--end", END, "-o",
                         again, "--quiet")
        assert done.returncode == 0, done.stderr
        assert run_kwatt("inspect", again, "--verify").returncode == 0
        # Every row's text as the archive has it; rows of one instant may come in another order
        # (Kwollect orders by timestamp only), each series' rows in the same order.
        original, back = run_kwatt("cat", directory), run_kwatt("cat", again)
        assert lines(back) == lines(original) and len(lines(back)) == rows

        def by_series(result):
            series = {}
            for line in result.stdout.decode().splitlines():
                row = json.loads(line)
                key = (row["device_id"], row["metric_id"], json.dumps(row["labels"]))
                series.setdefault(key, []).append(line)
            return series
        assert by_series(back) == by_series(original)
        # The same energy as from the archive, figures and notes.
        from_archive = run_kwatt("energy", directory, "--json")
        from_store = run_kwatt("energy", "--api", server.url, "--job", "lyon:1001", "--end", END,
                               "--json")
        assert from_store.returncode == 0, from_store.stderr
        assert json.loads(from_store.stdout)["nodes"] == json.loads(from_archive.stdout)["nodes"]
        # The job and the catalogue are the store's.
        job = requests.get(server.url + "/sites/lyon/jobs/1001", timeout=10).json()
        assert job["state"] == "terminated" and job["user"] == "alice"
        assert job["assigned_nodes"] == [f"nova-{n}.lyon.grid5000.fr" for n in (1, 4, 5, 6)]
        assert job["types"] == ["monitor=wattmetre_power_watt"]
        listed = requests.get(server.url + "/sites/lyon/jobs", timeout=10).json()
        assert [j["uid"] for j in listed["items"]] == [1001]
        assert requests.get(server.url + "/sites/lyon/jobs/1002", timeout=10).status_code == 404
        missing = requests.get(server.url + "/sites/lyon/metrics", timeout=10,
                               params={"job_id": 1002})
        assert missing.status_code == 404 and "Job 1002 not found" in missing.text
        manifest = json.loads((directory / "manifest.json").read_text())
        nova = requests.get(server.url + "/sites/lyon/clusters/nova", timeout=10).json()
        stored = manifest["catalogue"]["lyon/nova"]
        assert nova["metrics"] == stored
    finally:
        server.stop()


def test_a_store_answers_summaries_and_the_row_limit_as_kwollect(tmp_path):
    # Three whole 5-minute buckets of two nodes, in a store and in the simulated testbed (a
    # summary row covers its whole bucket: the store holds every row of the buckets asked).
    start, end = 1744977600, 1744977600 + 900 - 1  # 14:00:00 .. 14:14:59 +02:00
    store = store_of_simulation(tmp_path, [["--nodes", "nova-1.lyon,nova-4.lyon", "--start",
                                            start, "--end", start + 900]], jobs=JOBS_FILE)
    simulated = start_server("--jobs", JOBS_FILE, tmp_path=tmp_path)
    stored = served(store, "--max-rows", 5000)
    try:
        query = {"nodes": "nova-1,nova-4", "start_time": start, "end_time": end,
                 "summary": "true"}

        def answer(server, **params):
            got = requests.get(server.url + "/sites/lyon/metrics", timeout=30,
                               params={**query, **params})
            assert got.status_code == 200, got.text
            return got.json()
        summary = answer(stored)
        assert len(summary) > 100
        key = lambda r: (r["timestamp"], r["device_id"], r["metric_id"], json.dumps(r["labels"]))
        assert sorted(summary, key=key) == sorted(answer(simulated), key=key)
        assert [r["timestamp"] for r in summary] == sorted(r["timestamp"] for r in summary)
        # Above the row limit: Kwollect's timeout error, which the client splits on.
        too_many = requests.get(stored.url + "/sites/lyon/metrics", timeout=30, params={
            "nodes": "nova-1,nova-4", "start_time": start, "end_time": end})
        assert too_many.status_code == 500
        assert too_many.json()["message"] == "Request timeout, too much data to process."
        fetched = run_kwatt("fetch", "--api", stored.url, "--nodes", "nova-1.lyon,nova-4.lyon",
                            "--start", start, "--end", end)
        expected = run_kwatt("fetch", "--api", simulated.url, "--nodes",
                             "nova-1.lyon,nova-4.lyon", "--start", start, "--end", end)
        assert lines(fetched) == lines(expected) and len(lines(fetched)) > 5000
    finally:
        simulated.stop()
        stored.stop()


def test_pushed_metrics_go_into_the_store_all_or_none(store_uri, tmp_path):
    auth = ("alice", "s3cret")
    server = served(store_uri, "--auth", "alice:s3cret")
    url = server.url + "/sites/lyon/metrics"
    t0 = 1744977600
    rows = [{"timestamp": t0 + 0.5, "device_id": "nova-1", "metric_id": "my_power", "value": 42,
             "labels": {"run": "a"}},
            {"timestamp": t0 + 1.25, "device_id": "nova-1", "metric_id": "my_power",
             "value": 43.5, "labels": {"run": "a"}}]
    try:
        pushed = requests.post(url, json=rows, auth=auth, timeout=10)
        assert pushed.status_code == 201 and pushed.json() == {"stored": 2}
        bad = requests.post(url, json=[rows[0], {**rows[0], "value": "high"}], auth=auth,
                            timeout=10)
        assert bad.status_code == 400 and bad.json()["message"].startswith("row 2 ")
        assert bad.json()["message"].endswith("; nothing was stored")
        assert requests.post(url, json=rows, timeout=10).status_code == 401
    finally:
        server.stop()
    # Durable: a new server over the store serves them, and only them.
    server = served(store_uri, "--auth", "alice:s3cret")
    try:
        answer = requests.get(server.url + "/sites/lyon/metrics", auth=auth, timeout=10,
                              params={"nodes": "nova-1", "start_time": t0, "end_time": t0 + 2})
        assert answer.status_code == 200
        assert answer.text == (
            '[{"timestamp":"2025-04-18T14:00:00.5+02:00","device_id":"nova-1",'
            '"metric_id":"my_power","value":42,"labels":{"run":"a"}},\n'
            '{"timestamp":"2025-04-18T14:00:01.25+02:00","device_id":"nova-1",'
            '"metric_id":"my_power","value":43.5,"labels":{"run":"a"}}]')
    finally:
        server.stop()
    assert json.loads(run_kwatt("store", "info", store_uri, "--json").stdout)["rows"] == 2


def test_serve_says_what_to_serve(tmp_path):
    both = run_kwatt("serve", "--simulate", "--store", tmp_path / "s.kwatt", "--port", "0")
    assert both.returncode == 2 and b"not both" in both.stderr
    neither = run_kwatt("serve", "--port", "0")
    assert neither.returncode == 2 and b"not neither" in neither.stderr
    seed = run_kwatt("serve", "--store", tmp_path / "s.kwatt", "--seed", "3", "--port", "0")
    assert seed.returncode == 2 and b"--seed sets the simulated values" in seed.stderr
    jobs = run_kwatt("serve", "--store", tmp_path / "s.kwatt", "--jobs", JOBS_FILE, "--port", "0")
    assert jobs.returncode == 2 and b"the jobs are the store's" in jobs.stderr
    nowhere = run_kwatt("serve", "--store", tmp_path / "no" / "such" / "s.kwatt", "--port", "0")
    assert nowhere.returncode != 0 and str(tmp_path / "no").encode() in nowhere.stderr


LAB = """\
sites:
  - uid: mylab
    name: My lab
    clusters:
      - uid: rack
        model: Dell PowerEdge R640
        nodes: [rack-1, rack-2]
        metrics:
          - name: wattmetre_power_watt
            description: Power of the node from its wattmeter, in watt
            period: 1000
            source: {protocol: wattmetre}
"""


def test_a_lab_describes_its_testbed_and_kwatt_works_on_it(tmp_path):
    description = tmp_path / "lab.yaml"
    description.write_text(LAB)
    store = tmp_path / "lab.kwatt"
    server = served(store, "--testbed", description, "--auth", "alice:s3cret")
    auth = ("alice", "s3cret")
    t0 = 1764590400  # 2025-12-01T12:00:00Z
    try:
        sites = requests.get(server.url + "/sites", auth=auth, timeout=10).json()
        assert [s["uid"] for s in sites["items"]] == ["mylab"]
        rack = requests.get(server.url + "/sites/mylab/clusters/rack", auth=auth, timeout=10).json()
        assert rack["model"] == "Dell PowerEdge R640"
        assert [m["name"] for m in rack["metrics"]] == ["wattmetre_power_watt"]
        nodes = requests.get(server.url + "/sites/mylab/clusters/rack/nodes", auth=auth,
                             timeout=10).json()
        assert [n["uid"] for n in nodes["items"]] == ["rack-1", "rack-2"]
        # A wattmeter's rows, as a collector would push them: 100 W for a minute, then 200 W.
        rows = [{"timestamp": t0 + i, "device_id": "rack-1", "metric_id": "wattmetre_power_watt",
                 "value": 100 if i <= 60 else 200} for i in range(121)]
        pushed = requests.post(server.url + "/sites/mylab/metrics", json=rows, auth=auth,
                               timeout=10)
        assert pushed.status_code == 201, pushed.text
        api = server.url.replace("http://", "http://alice:s3cret@")
        fetched = run_kwatt("fetch", "--api", api, "--nodes", "rack-1.mylab", "--start", t0,
                            "--end", t0 + 120)
        assert len(lines(fetched)) == 121
        energy = run_kwatt("energy", "--api", api, "--nodes", "rack-1.mylab", "--start", t0,
                           "--end", t0 + 120, "--json")
        assert energy.returncode == 0, energy.stderr
        node = json.loads(energy.stdout)["nodes"][0]
        assert node["node"] == "rack-1.mylab.grid5000.fr"
        assert node["metric"] == "wattmetre_power_watt"
        assert node["window"]["joules"] == pytest.approx(100 * 60 + 150 * 1 + 200 * 59)
    finally:
        server.stop()


def test_a_wrong_description_is_named_and_nothing_is_served(tmp_path):
    description = tmp_path / "lab.yaml"
    description.write_text(LAB.replace("[rack-1, rack-2]", "[rack-1, node-2]"))
    refused = run_kwatt("serve", "--store", tmp_path / "lab.kwatt", "--testbed", description,
                        "--port", "0")
    assert refused.returncode == 2
    assert refused.stderr.decode().strip() == (
        f"kwatt serve: {description}: sites[0].clusters[0].nodes[1] should be the cluster's uid, "
        "'-' and a number (\"rack-1\"), not \"node-2\"")
    both = run_kwatt("serve", "--store", tmp_path / "lab.kwatt", "--testbed", description,
                     "--reference", ROOT / "data" / "reference", "--port", "0")
    assert both.returncode == 2 and b"excludes" in both.stderr
    simulated = run_kwatt("serve", "--simulate", "--testbed", description, "--port", "0")
    assert simulated.returncode == 2 and b"give it with --store URI" in simulated.stderr
