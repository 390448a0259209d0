"""The store and pushes under hostile or unlucky use (issue 22): labels nested to crash a parser,
ids the API could never serve, cross-site POSTs, passwords in store URIs, a PostgreSQL that
restarts under `kwatt serve`, two processes creating one store, a store that cannot be opened.
Real processes, a real PostgreSQL cluster (run as nobody), real files."""
import json
import subprocess
import time

import pytest
import requests

from conftest import KWATT, RunningPostgres, run_kwatt, start_server

AUTH = ("alice", "s3cret")
T0 = 1744977600  # 2025-04-18T12:00:00Z


@pytest.fixture(params=["sqlite", "postgresql"])
def store_uri(request, tmp_path):
    if request.param == "sqlite":
        return str(tmp_path / "site.db")
    return request.getfixturevalue("postgres").new_database()


@pytest.fixture
def pushing(tmp_path):
    """A `kwatt serve --simulate --auth` taking pushes; stopped at the end."""
    server = start_server("--auth", "alice:s3cret")
    yield server
    server.stop()


@pytest.fixture
def own_postgres():
    """A PostgreSQL cluster of the test's own, which it may stop, restart or change."""
    running = RunningPostgres()
    yield running
    running.close()


def push(server, rows, **kwargs):
    return requests.post(server.url + "/sites/lyon/metrics", json=rows, auth=AUTH, timeout=60,
                         **kwargs)


def nested(depth):
    """A labels object nested `depth` levels deep (the labels object itself is level 1), as text:
    json.dumps itself recurses, so the body is written by hand."""
    return '{"a":' * (depth - 1) + '{"a":1}' + "}" * (depth - 1)


def body_with_labels(labels_text, t=T0):
    return ('[{"timestamp":%s,"device_id":"nova-1","metric_id":"m","value":1,"labels":%s}]'
            % (t, labels_text))


# ---- item 3: refuse at POST what the API could not serve back -----------------------------------

@pytest.mark.parametrize("depth", [100_000, 20_000, 33])
def test_labels_nested_too_deep_are_refused_and_the_server_stays_up(pushing, depth):
    answer = requests.post(pushing.url + "/sites/lyon/metrics", data=body_with_labels(nested(depth)),
                           auth=AUTH, timeout=60, headers={"Content-Type": "application/json"})
    assert answer.status_code == 400, answer.text[:300]
    message = answer.json()["message"]
    assert message.startswith('row 1 "labels"') and "32 levels" in message, message
    # The server is still up, and nothing was kept.
    assert pushing.process.poll() is None
    rows = requests.get(pushing.url + "/sites/lyon/metrics", auth=AUTH, timeout=60, params={
        "nodes": "nova-1", "metrics": "m", "start_time": T0 - 1, "end_time": T0 + 1})
    assert rows.status_code == 200 and rows.json() == []


def test_labels_at_the_depth_limit_are_stored_and_served_back(store_uri):
    server = start_server("--auth", "alice:s3cret", store=store_uri)
    try:
        labels = nested(32)
        answer = requests.post(server.url + "/sites/lyon/metrics", data=body_with_labels(labels),
                               auth=AUTH, timeout=60,
                               headers={"Content-Type": "application/json"})
        assert answer.status_code == 201, answer.text
        fetched = run_kwatt("fetch", "--api", f"http://alice:s3cret@127.0.0.1:{server.port}/stable",
                            "--nodes", "nova-1.lyon", "--metrics", "m", "--custom-metrics",
                            "--start", T0 - 1, "--end", T0 + 1)
        assert fetched.returncode == 0, fetched.stderr
        assert json.loads(fetched.stdout)["labels"] == json.loads(labels)
    finally:
        server.stop()


def test_labels_too_large_are_refused_naming_the_limit(pushing):
    answer = push(pushing, [{"timestamp": T0, "device_id": "nova-1", "metric_id": "m", "value": 1,
                             "labels": {"big": "x" * 70_000}}])
    assert answer.status_code == 400
    assert answer.json()["message"].startswith('row 1 "labels"')
    assert "65536 bytes" in answer.json()["message"]


@pytest.mark.parametrize("field,value,why", [
    ("device_id", "pdu.lab", "'.'"),
    ("device_id", "nova-1,nova-2", "','"),
    ("device_id", " nova-1", "space"),
    ("metric_id", "m,comma", "','"),
    ("metric_id", "m ", "space"),
    ("metric_id", "m\u0001", "control character"),
])
def test_ids_the_api_could_never_serve_are_refused(pushing, field, value, why):
    good = {"timestamp": T0, "device_id": "nova-1", "metric_id": "m", "value": 1}
    answer = push(pushing, [good, {**good, field: value}])
    assert answer.status_code == 400, answer.text
    message = answer.json()["message"]
    assert message.startswith(f'row 2 "{field}" = '), message
    assert why in message and message.endswith("; nothing was stored"), message


def write_config(directory, description):
    directory.mkdir()
    (directory / "pdu.yaml").write_text(json.dumps([description]))
    return directory


@pytest.mark.parametrize("field,value,why", [("device_id", "pdu.lab", "'.'"),
                                             ("name", "m,comma", "','")])
def test_the_collector_refuses_ids_the_api_could_never_serve(tmp_path, field, value, why):
    description = {"name": "pdu_power", "device_id": "pdu-1",
                   "url": "prometheus://127.0.0.1:9/", field: value}
    config = write_config(tmp_path / "conf", description)
    checked = run_kwatt("collect", "--config", config, "--check")
    assert checked.returncode == 2, checked.stdout
    message = checked.stderr.decode()
    assert f'pdu.yaml, entry 1: {field} "{value}"' in message, message
    assert why in message, message


# ---- item 4: no cross-site POST -----------------------------------------------------------------

def test_a_push_must_be_json_and_from_this_origin(pushing):
    url = pushing.url + "/sites/lyon/metrics"
    row = json.dumps([{"timestamp": T0, "device_id": "nova-1", "metric_id": "m", "value": 1}])
    # What a web page's form or a no-CORS fetch() can send: refused.
    for content_type in ["text/plain", "application/x-www-form-urlencoded", None]:
        headers = {"Content-Type": content_type} if content_type else {}
        answer = requests.post(url, data=row, auth=AUTH, headers=headers, timeout=10)
        assert answer.status_code == 415, (content_type, answer.text)
        assert "Content-Type: application/json" in answer.json()["message"]
    foreign = requests.post(url, data=row, auth=AUTH, timeout=10, headers={
        "Content-Type": "application/json", "Origin": "http://evil.example"})
    assert foreign.status_code == 403, foreign.text
    assert "http://evil.example" in foreign.json()["message"]
    for origin in ["null", f"http://127.0.0.1:{pushing.port + 1}"]:
        assert requests.post(url, data=row, auth=AUTH, timeout=10, headers={
            "Content-Type": "application/json", "Origin": origin}).status_code == 403
    # The server's own origin, or none (curl, scripts), with a charset or not: taken.
    for headers in [{"Content-Type": "application/json; charset=utf-8",
                     "Origin": f"http://127.0.0.1:{pushing.port}"},
                    {"Content-Type": "Application/JSON"}]:
        answer = requests.post(url, data=row, auth=AUTH, headers=headers, timeout=10)
        assert answer.status_code == 201, answer.text


# ---- item 6: no password in messages; libpq's key=value form -------------------------------------

SECRET = "hunter2secret"


@pytest.mark.parametrize("uri", [
    f"postgresql://127.0.0.1:1/lab?password={SECRET}",
    f"postgresql://127.0.0.1:1/lab?sslmode=disable&pass%77ord={SECRET}",
    f"postgres://kwatt:{SECRET}@127.0.0.1:1/lab",
    f"host=127.0.0.1 port=1 dbname=lab password={SECRET}",
    f"host=127.0.0.1 port=1 dbname=lab password = '{SECRET} x'",
])
def test_a_store_password_is_never_printed(tmp_path, uri):
    config = write_config(tmp_path / "conf", {"name": "m", "device_id": "d",
                                              "url": "prometheus://127.0.0.1:9/"})
    work = tmp_path / "work"  # where a store file named after the string would be made
    work.mkdir()

    def kwatt(*args):
        return subprocess.run([KWATT, *map(str, args)], capture_output=True, timeout=60,
                              cwd=work)

    outputs = [kwatt("store", "info", uri), kwatt("store", "check", uri),
               kwatt("serve", "--store", uri), kwatt("import", config, "--store", uri),
               kwatt("collect", "--config", config, "--store", uri, "--duration", "2s", "--id", "")]
    for done in outputs:
        text = done.stdout.decode() + done.stderr.decode()
        assert SECRET not in text, text
    # Said as PostgreSQL: a libpq string never becomes an SQLite file named after it.
    assert "PostgreSQL" in outputs[2].stderr.decode(), outputs[2].stderr
    assert list(work.iterdir()) == []


def test_a_libpq_key_value_string_is_a_postgresql_store(postgres, tmp_path):
    uri = postgres.new_database()  # postgresql:///kwatt_N?host=DIR&user=postgres
    database, query = uri[len("postgresql:///"):].split("?")
    params = dict(item.split("=") for item in query.split("&"))
    key_value = f"host={params['host']} user={params['user']} dbname={database}"
    server = start_server("--auth", "alice:s3cret", store=key_value)
    try:
        answer = push(server, [{"timestamp": T0, "device_id": "nova-1", "metric_id": "m",
                                "value": 1}])
        assert answer.status_code == 201, answer.text
    finally:
        server.stop()
    info = run_kwatt("store", "info", uri, "--json")
    assert info.returncode == 0, info.stderr
    assert json.loads(info.stdout)["rows"] == 1


# ---- item 11: PostgreSQL restarts; serve and collect on a new store ------------------------------

def test_serve_reconnects_after_postgresql_restarts_and_fails_before_any_row(own_postgres):
    uri = own_postgres.new_database()
    server = start_server("--auth", "alice:s3cret", store=uri)
    try:
        rows = [{"timestamp": T0 + i, "device_id": "nova-1", "metric_id": "m", "value": i}
                for i in range(10)]
        assert push(server, rows).status_code == 201
        query = {"nodes": "nova-1", "metrics": "m", "start_time": T0, "end_time": T0 + 9}

        def get():
            return requests.get(server.url + "/sites/lyon/metrics", auth=AUTH, timeout=60,
                                params=query)

        assert len(get().json()) == 10
        own_postgres.stop()
        down = get()
        # A 500 naming the store before any row, not a 200 cut after '['.
        assert down.status_code == 500, (down.status_code, down.text[:200])
        assert "the store" in down.json()["message"]
        own_postgres.start()  # the same data directory and socket
        again = get()
        assert again.status_code == 200, again.text
        assert len(again.json()) == 10
        # Pushes reconnect too.
        assert push(server, [{**rows[0], "timestamp": T0 + 20}]).status_code == 201
    finally:
        server.stop()


# ---- item 12: the doc's own POST example; rows counted from 1 ------------------------------------

def test_the_docs_push_without_a_timestamp_is_stored(store_uri):
    server = start_server("--auth", "alice:s3cret", store=store_uri)
    try:
        before = time.time()
        # doc/server.md's example, as it is.
        answer = subprocess.run(
            ["curl", "-s", "-u", "alice:s3cret", "-H", "Content-Type: application/json", "-d",
             '[{"device_id":"nova-1","metric_id":"app_phase","value":2,"labels":{"step":"load"}}]',
             server.url + "/sites/lyon/metrics"], capture_output=True, timeout=60)
        assert json.loads(answer.stdout) == {"stored": 1}, answer.stdout
        rows = requests.get(server.url + "/sites/lyon/metrics", auth=AUTH, timeout=60, params={
            "nodes": "nova-1", "metrics": "app_phase", "start_time": before - 1,
            "end_time": time.time() + 1}).json()
        assert [r["labels"] for r in rows] == [{"step": "load"}]
    finally:
        server.stop()


def test_a_row_the_store_refuses_is_counted_from_1(store_uri):
    server = start_server("--auth", "alice:s3cret", store=store_uri)
    try:
        good = {"timestamp": T0, "device_id": "nova-1", "metric_id": "m", "value": 1}
        answer = push(server, [good, {**good, "timestamp": "2025-04-18T12:00:00.0000005Z"}])
        assert answer.status_code == 400, answer.text
        assert answer.json()["message"].startswith("row 2 "), answer.text
    finally:
        server.stop()


# ---- item 16: a store that cannot be opened names its cause --------------------------------------

def test_a_store_that_cannot_be_made_names_the_cause(tmp_path):
    (tmp_path / "a-file").write_text("")
    for path, cause in [(tmp_path / "missing" / "site.db", "No such file or directory"),
                        (tmp_path / "a-file" / "site.db", "Not a directory")]:
        done = run_kwatt("serve", "--store", path, timeout=60)
        assert done.returncode != 0
        message = done.stderr.decode()
        assert str(path) in message and cause in message, message


def test_a_store_that_refuses_writes_is_retried_with_the_documented_backoff(tmp_path,
                                                                           own_postgres):
    """A store that opens but refuses every write (a PostgreSQL database made read-only; a full
    disk does the same) was retried every second, against doc/collect.md's 1 s, 2 s, 4 s... up to
    10 s: the store opened fine each time and that reset the backoff."""
    uri = own_postgres.new_database()
    made = start_server(store=uri)  # the store's tables
    requests.get(made.url, timeout=60)  # answering (a SIGTERM at once may be missed)
    made.stop()
    database = uri.split("?")[0].rsplit("/", 1)[1]
    subprocess.run([str(own_postgres.bin / "psql"), "-q", "-d", own_postgres.uri(), "-c",
                    f"ALTER DATABASE {database} SET default_transaction_read_only = on"],
                   check=True, capture_output=True, timeout=60)
    stream = tmp_path / "stream.txt"
    lines = run_kwatt("simulate", "wattmetre", "--nodes", "nova-1", "--fast", "--duration", 3,
                      "--start", "2026-12-01T00:00:00Z")
    assert lines.returncode == 0, lines.stderr
    stream.write_bytes(lines.stdout)
    config = write_config(tmp_path / "conf", {
        "name": "wattmetre_power_watt", "device_id": "wattmetre1",
        "url": f"wattmetre://wattmetre1/{stream}?version=2"})
    collecting = subprocess.run(
        [KWATT, "collect", "--config", config, "--store", uri, "--id", "", "--duration", "12s"],
        capture_output=True, text=True, timeout=120)
    failures = [line for line in collecting.stderr.splitlines()
                if "writing into the store failed" in line]
    assert failures and "read-only transaction" in failures[0], collecting.stderr
    # Attempts at about 0.5, 1.5, 3.5, 7.5 s (and at the end): every second would be 12 or
    # more. A loaded machine makes fewer attempts, never more.
    assert len(failures) <= 6, collecting.stderr
    assert collecting.returncode == 1, collecting.stderr  # rows could not be written
