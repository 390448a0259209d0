"""kwatt's Kwollect API against the real Kwollect's own SQL (issue 36; doc/server.md, "Against
Kwollect itself").

Kwollect 1.3.1 (PyPI `kwollect`) answers `GET /metrics` with its PL/Python function
`api.get_metrics` over TimescaleDB, which PostgREST calls. Here that very SQL runs in
PostgreSQL 17 with TimescaleDB and PL/Python from a Debian 13 root (mmdebstrap, kept in
~/.cache/kwatt/roots like the wheels' roots; chroot, so root only: skipped otherwise), created by
Kwollect's own `kwollect_setup_db.py` (its SQL recorded as it sends it, run by psql). Debian's
TimescaleDB is the Apache build, without compression or continuous aggregates: the statements that
need them are left out and the 5-minute summary becomes a plain view with the same SELECT.

The same rows go into Kwollect's `metrics` table and, through `POST /sites/lyon/metrics`, into a
kwatt store served by `kwatt serve --store`; each query shape of the API (KWOLLECT.md's parameters
and their edge cases) is asked of both, and the answers are compared row for row (as sets: rows of
one instant come in any order from Kwollect) or error for error.
"""
import contextlib
import fcntl
import shutil
import json
import math
import os
import subprocess
import sys
import textwrap
import time
import urllib.parse
import zipfile
from datetime import datetime, timezone
from pathlib import Path

import pytest
import requests

from conftest import run_kwatt, start_server

CACHE = Path(os.environ.get("KWATT_ROOT_CACHE", Path.home() / ".cache" / "kwatt" / "roots"))
PACKAGES = "postgresql-17,postgresql-plpython3-17,postgresql-17-timescaledb"
KWOLLECT = "1.3.1"
PG_BIN = "/usr/lib/postgresql/17/bin"
AUTH = ("alice", "s3cret")

# The rows: three nodes of Lyon over ten minutes from T0, a wattmeter at 1 s with a NaN and a
# null, a counter with a wrap and a repeated instant, Prometheus rows with a scrape time label, two
# PDU outlets aliased to one node (pushed together, as the collector writes a poll's readings), and
# a few rows a minute old (the defaults' window ends now).
T0 = 1744977600  # 2025-04-18T12:00:00Z


def make_rows(now):
    rows = []

    def add(t, device, metric, value, labels=None):
        rows.append({"timestamp": t, "device_id": device, "metric_id": metric, "value": value,
                     "labels": labels or {}})

    for node, base in (("nova-1", 120.0), ("nova-2", 95.5), ("taurus-3", 210.25)):
        for s in range(0, 600, 1):
            add(T0 + s, node, "wattmetre_power_watt", base + (s % 37) * 0.5)
        counter = 10_000.0
        for s in range(0, 600, 5):
            counter += 1234.5 + s
            if node == "taurus-3" and s == 300:
                counter = 17.0  # a wrap (or a reboot)
            add(T0 + s, node, "network_ifacein_bytes_total", counter, {"interface": "eth0"})
            if node == "taurus-3" and s == 305:  # a repeated instant (the same reading twice)
                add(T0 + s, node, "network_ifacein_bytes_total", counter, {"interface": "eth0"})
        for s in range(0, 600, 15):
            scrape = T0 + s + 0.25
            add(T0 + s, node, "prom_node_load1", 0.5 + (s % 60) / 100,
                {"_metric_scrape_time": f"{scrape:.6f}"})
        add(now - 60, node, "wattmetre_power_watt", base)
        add(now - 30, node, "wattmetre_power_watt", base + 1)
    # Label numbers written with an exponent (jsonb writes them in plain decimal), and one with
    # more digits than a double keeps, on a node of its own (a difference doc/server.md lists).
    add(T0 + 50, "nova-1", "prom_node_load1", 0.75, {"gain": 1e22, "tiny": 1.5e-7})
    add(T0 + 50, "sagittaire-1", "prom_node_load1", 0.75, {"serial": 12345678901234567890123})
    # A NaN and a null.
    add(T0 + 100.5, "nova-1", "wattmetre_power_watt", float("nan"))
    add(T0 + 200.5, "nova-1", "wattmetre_power_watt", None)
    # Two PDU outlets feeding nova-2 (Kwollect sums them under the node, _device_orig naming them).
    for s in range(0, 600, 1):
        for pdu, watts in (("pdu-a", 48.0), ("pdu-b", 47.5)):
            add(T0 + s, pdu, "pdu_outlet_power_watt", watts + (s % 11),
                {"_device_alias": "nova-2", "outlet": "7"})
    # One outlet without a value: left out of its node's sum, as SQL's sum() leaves nulls out.
    for pdu, watts in (("pdu-a", None), ("pdu-b", 50.0)):
        add(T0 + 600.5, pdu, "pdu_outlet_power_watt", watts,
            {"_device_alias": "nova-2", "outlet": "7"})
    return rows


def paris(t):
    """Epoch seconds as Kwollect's own ISO text in Paris time (April: +02:00)."""
    return datetime.fromtimestamp(t + 7200, timezone.utc).strftime("%Y-%m-%dT%H:%M:%S") + "+02:00"


def utc_z(t):
    return datetime.fromtimestamp(t, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def naive_paris(t):
    return datetime.fromtimestamp(t + 7200, timezone.utc).strftime("%Y-%m-%dT%H:%M:%S")


# The query shapes: each a dict of the API's parameters (values as a client sends them).
SHAPES = [
    ("one node, short name", {"nodes": "nova-1", "start_time": T0, "end_time": T0 + 120}),
    ("one node, FQDN", {"nodes": "nova-1.lyon.grid5000.fr", "start_time": T0,
                        "end_time": T0 + 60}),
    ("two nodes", {"nodes": "nova-1,taurus-3", "start_time": T0 + 10, "end_time": T0 + 70}),
    ("a space after the comma", {"nodes": "nova-1, taurus-3", "start_time": T0,
                                 "end_time": T0 + 30}),
    ("devices", {"devices": "taurus-3", "start_time": T0, "end_time": T0 + 30}),
    ("nodes and devices merged", {"nodes": "nova-1", "devices": "nova-2",
                                  "start_time": T0, "end_time": T0 + 20}),
    ("an unknown node", {"nodes": "nova-99", "start_time": T0, "end_time": T0 + 60}),
    ("one metric", {"nodes": "nova-1,nova-2", "metrics": "wattmetre_power_watt",
                    "start_time": T0, "end_time": T0 + 300}),
    ("two metrics", {"nodes": "nova-2", "metrics": "network_ifacein_bytes_total,prom_node_load1",
                     "start_time": T0, "end_time": T0 + 600}),
    ("an unknown metric", {"nodes": "nova-2", "metrics": "no_such_metric", "start_time": T0,
                           "end_time": T0 + 600}),
    ("fractional epoch bounds", {"nodes": "nova-1", "start_time": f"{T0 + 99.75:.6f}",
                                 "end_time": f"{T0 + 201.25:.6f}"}),
    ("bounds inclusive", {"nodes": "taurus-3", "metrics": "wattmetre_power_watt",
                          "start_time": T0 + 5, "end_time": T0 + 5}),
    ("ISO bounds with an offset", {"nodes": "nova-2", "start_time": paris(T0 + 60),
                                   "end_time": paris(T0 + 90)}),
    ("ISO bounds in UTC (Z)", {"nodes": "nova-2", "start_time": utc_z(T0 + 60),
                               "end_time": utc_z(T0 + 90)}),
    ("ISO bounds without an offset (Paris)", {"nodes": "nova-2", "start_time": naive_paris(T0),
                                              "end_time": naive_paris(T0 + 30)}),
    ("start only (5 minutes)", {"nodes": "nova-1", "start_time": T0 + 100}),
    ("end only (5 minutes)", {"nodes": "taurus-3", "end_time": T0 + 400}),
    ("neither (the last 5 minutes)", {"nodes": "nova-1,nova-2,taurus-3"}),
    ("NaN and null values", {"nodes": "nova-1", "metrics": "wattmetre_power_watt",
                             "start_time": T0 + 99, "end_time": T0 + 202}),
    ("aliased devices summed", {"nodes": "nova-2", "metrics": "pdu_outlet_power_watt",
                                "start_time": T0 + 30, "end_time": T0 + 40}),
    ("an outlet without a value left out of its node's sum",
     {"nodes": "nova-2", "metrics": "pdu_outlet_power_watt", "start_time": T0 + 600,
      "end_time": T0 + 601}),
    ("an aliased device by its own name", {"devices": "pdu-a", "start_time": T0,
                                           "end_time": T0 + 5}),
    ("summary", {"nodes": "nova-1,nova-2", "start_time": T0, "end_time": T0 + 600,
                 "summary": "true"}),
    ("summary of scraped rows", {"nodes": "taurus-3", "metrics": "prom_node_load1",
                                 "start_time": T0, "end_time": T0 + 600, "summary": "true"}),
    ("summary of aliased devices", {"nodes": "nova-2", "metrics": "pdu_outlet_power_watt",
                                    "start_time": T0, "end_time": T0 + 600, "summary": "true"}),
    ("as_rate", {"nodes": "nova-1,nova-2", "metrics": "network_ifacein_bytes_total",
                 "start_time": T0, "end_time": T0 + 600, "as_rate": "true"}),
    ("as_rate at a wrap and a repeated instant", {"nodes": "nova-2,taurus-3",
                                                  "metrics": "network_ifacein_bytes_total",
                                                  "start_time": T0 + 250, "end_time": T0 + 350,
                                                  "as_rate": "true"}),
    ("as_rate of a gauge", {"nodes": "nova-1", "metrics": "wattmetre_power_watt",
                            "start_time": T0 + 95, "end_time": T0 + 105, "as_rate": "true"}),
    ("as_rate of a summary", {"nodes": "nova-2", "metrics": "network_ifacein_bytes_total",
                              "start_time": T0, "end_time": T0 + 600, "summary": "true",
                              "as_rate": "true"}),
    ("no nodes, devices or job", {"start_time": T0, "end_time": T0 + 60}),
    ("a job", {"job_id": 7}),
    ("a job, one metric", {"job_id": 7, "metrics": "wattmetre_power_watt"}),
    ("a job, other nodes", {"job_id": 7, "nodes": "nova-2"}),
    ("a job, a later start", {"job_id": 7, "start_time": T0 + 100}),
    ("a job, summary", {"job_id": 7, "summary": "true"}),
]
# Job 7: nova-1 and taurus-3 from T0 + 60 to T0 + 420 (OAR's table in Kwollect's SQL, whose
# nodetime_by_job view kwollect_setup_db_oar.py makes over it; kwatt jobs add in the store).
JOB = {"id": 7, "nodes": ["nova-1", "taurus-3"], "start": T0 + 60, "stop": T0 + 420}


# ---- Kwollect's side --------------------------------------------------------------------------

@contextlib.contextmanager
def cache_lock():
    """The cache to one test process at a time (pytest-xdist's workers make it once)."""
    CACHE.mkdir(parents=True, exist_ok=True)
    with open(CACHE / ".kwollect.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def root_tarball():
    """The Debian 13 root with PostgreSQL 17, PL/Python and TimescaleDB, made once (about two
    minutes)."""
    tarball = CACHE / "trixie-kwollect.tar"
    with cache_lock():
        if not tarball.exists():
            if shutil.which("mmdebstrap") is None:
                pytest.fail("mmdebstrap is missing: run make test-deps")
            partial = tarball.with_suffix(".partial.tar")
            made = subprocess.run(["mmdebstrap", "--variant=apt", f"--include={PACKAGES}",
                                   "trixie", str(partial)], capture_output=True, text=True,
                                  timeout=1200)
            assert made.returncode == 0, f"mmdebstrap failed:\n{made.stderr[-3000:]}"
            partial.rename(tarball)  # a run cut short never leaves a root that looks whole
    return tarball


def kwollect_setup_script():
    """kwollect_setup_db.py from Kwollect's wheel on PyPI, fetched once."""
    wheel_dir = CACHE / f"kwollect-{KWOLLECT}"
    with cache_lock():
        wheels = list(wheel_dir.glob("kwollect-*.whl")) if wheel_dir.exists() else []
        if not wheels:
            got = subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps",
                                  "--only-binary=:all:", f"kwollect=={KWOLLECT}", "-d",
                                  str(wheel_dir)], capture_output=True, text=True, timeout=300)
            assert got.returncode == 0, got.stderr
            wheels = list(wheel_dir.glob("kwollect-*.whl"))
    with zipfile.ZipFile(wheels[0]) as wheel:
        return wheel.read("kwollect/db/kwollect_setup_db.py").decode()


# Stand-ins for the three modules the setup script imports, so that it runs here and its SQL is
# recorded as it would send it: psycopg2 (each connection's statements, in order), pyonf (its
# defaults, the password given), jwt (a token is printed, not used).
RECORDER = {
    "psycopg2/__init__.py": '''
        import atexit, json, os
        STATEMENTS = []
        class ProgrammingError(Exception):
            pass
        class _Cursor:
            def __init__(self, db):
                self.db = db
            def execute(self, sql):
                STATEMENTS.append([self.db, sql])
            def fetchall(self):
                return []
        class _Connection:
            autocommit = False
            def __init__(self, db):
                self.db = db
            def cursor(self):
                return _Cursor(self.db)
        def connect(dbname="postgres", **kwargs):
            return _Connection(dbname)
        atexit.register(lambda: open(os.environ["KWATT_SQL_OUT"], "w").write(
            json.dumps(STATEMENTS)))
    ''',
    "pyonf.py": '''
        def pyonf(config, mandatory_opts=()):
            values = {}
            for line in config.strip().splitlines():
                key, _, value = line.partition(":")
                value = value.strip().strip("'")
                values[key.strip()] = int(value) if value.isdigit() else value
            values["kwollect_password"] = "kwpass"
            return values
    ''',
    "jwt.py": '''
        def encode(payload, secret, algorithm=None):
            return "token"
    ''',
}


def kwollect_statements(tmp):
    """Kwollect's setup SQL, as (database, statement) pairs, adapted to the Apache build."""
    stubs = tmp / "stubs"
    for name, text in RECORDER.items():
        path = stubs / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    script = tmp / "kwollect_setup_db.py"
    script.write_text(kwollect_setup_script())
    out = tmp / "statements.json"
    ran = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                         timeout=60, env={**os.environ, "PYTHONPATH": str(stubs),
                                          "KWATT_SQL_OUT": str(out)})
    assert ran.returncode == 0, ran.stderr
    statements = []
    for db, sql in json.loads(out.read_text()):
        if db == "kwdb" and not any(d == "kwdb" for d, _ in statements):
            # PostgreSQL 15 took CREATE on the schema public from every user; Kwollect's script
            # predates it, so an administrator grants it to Kwollect's user first.
            statements.append((db, "GRANT ALL ON SCHEMA public TO kwuser;"))
        # Not in Debian's (Apache) TimescaleDB: the toolkit, compression policies, continuous
        # aggregates and their policies. The summary is the same SELECT as a plain view.
        sql = sql.replace("CREATE EXTENSION IF NOT EXISTS timescaledb_toolkit;", "")
        kept = []
        for line in sql.split("\n"):
            if line.startswith("SELECT add_compression_policy") or \
                    line.startswith("SELECT add_continuous_aggregate_policy") or \
                    line.strip().startswith(("start_offset", "end_offset", "schedule_interval",
                                             "if_not_exists => true);")):
                continue
            kept.append(line)
        sql = "\n".join(kept)
        sql = sql.replace("CREATE MATERIALIZED VIEW IF NOT EXISTS metrics_summary\n  WITH "
                          "(timescaledb.continuous) AS", "CREATE OR REPLACE VIEW metrics_summary AS")
        sql = sql.replace("  WITH NO DATA;", ";")
        statements.append((db, sql))
    assert any("CREATE OR REPLACE VIEW metrics_summary AS" in sql for _, sql in statements)
    assert any("api.get_metrics" in sql for _, sql in statements)
    return statements


class Kwollect:
    """PostgreSQL 17 of the Debian 13 root in a chroot, Kwollect's schema and API in it."""

    def __init__(self, tmp):
        self.root = tmp / "root"
        self.root.mkdir()
        self.server = None
        subprocess.run(["tar", "-xf", str(root_tarball()), "-C", str(self.root)], check=True)
        self.chroot(["mkdir", "-p", "/kwdata", "/run/postgresql"])
        self.chroot(["chown", "postgres:postgres", "/kwdata", "/run/postgresql"])
        self.chroot([f"{PG_BIN}/initdb", "-D", "/kwdata", "-A", "trust", "-U", "postgres"],
                    as_postgres=True)
        log = open(tmp / "postgres.log", "w")
        # A Unix socket in the root's /run/postgresql only: no port to choose.
        self.server = subprocess.Popen(
            ["chroot", str(self.root), "setpriv", "--reuid=postgres", "--regid=postgres",
             "--clear-groups", f"{PG_BIN}/postgres", "-D", "/kwdata", "-c", "listen_addresses=",
             "-c", "shared_preload_libraries=timescaledb", "-c", "timescaledb.telemetry_level=off",
             "-c", "dynamic_shared_memory_type=mmap", "-c", "TimeZone=Europe/Paris"],
            stdout=log, stderr=subprocess.STDOUT,
            env={"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "LC_ALL": "C.UTF-8"})
        try:
            self._set_up(tmp)
        except BaseException:
            self.close()  # no PostgreSQL left running behind a failed set-up
            raise

    def _set_up(self, tmp):
        # Ready when it accepts connections (the socket exists a little before), on a loaded
        # machine too.
        for _ in range(600):
            ready = self.chroot([f"{PG_BIN}/pg_isready", "-q", "-h", "/run/postgresql"],
                                check=False)
            if ready.returncode == 0:
                break
            if self.server.poll() is not None:
                break
            time.sleep(0.1)
        else:
            raise RuntimeError((tmp / "postgres.log").read_text())
        if self.server.poll() is not None:
            raise RuntimeError((tmp / "postgres.log").read_text())
        for db, sql in kwollect_statements(tmp):
            done = self.psql(sql, db=db, check=False)
            assert done.returncode == 0, f"{sql[:300]}...\n{done.stderr}"

    def chroot(self, command, as_postgres=False, **kwargs):
        prefix = ["chroot", str(self.root)]
        if as_postgres:
            prefix += ["setpriv", "--reuid=postgres", "--regid=postgres", "--clear-groups"]
        kwargs.setdefault("check", True)
        # The root has the C.UTF-8 locale only: not the host's LANG.
        env = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "LC_ALL": "C.UTF-8"}
        return subprocess.run(prefix + command, capture_output=True, text=True, timeout=120,
                              env=env, **kwargs)

    def psql(self, sql, db="kwdb", check=True):
        """`sql` on psql's standard input, in one transaction as psycopg2 sends a string of
        statements (but CREATE DATABASE, which cannot run in one)."""
        one = [] if "CREATE DATABASE" in sql else ["-1"]
        return self.chroot([f"{PG_BIN}/psql", "-X", "-q", "-At", "-v", "ON_ERROR_STOP=1", *one,
                            "-U", "postgres", "-h", "/run/postgresql", "-d", db, "-f", "-"],
                           check=check, input=sql)

    def load(self, rows):
        values = []
        for r in rows:
            value = "NULL" if r["value"] is None else (
                "'NaN'" if math.isnan(r["value"]) else repr(r["value"]))
            labels = json.dumps(r["labels"]).replace("'", "''")
            values.append(f"(to_timestamp({r['timestamp']:.6f}), '{r['device_id']}', "
                          f"'{r['metric_id']}', {value}, '{labels}'::jsonb)")
        for i in range(0, len(values), 2000):
            self.psql("INSERT INTO metrics (timestamp, device_id, metric_id, value, labels) "
                      "VALUES " + ",".join(values[i:i + 2000]))

    def add_job(self, job):
        rows = ",".join(f"({job['id']}, to_timestamp({job['start']}), to_timestamp({job['stop']}), "
                        f"'{node}')" for node in job["nodes"])
        self.psql("CREATE TABLE oar_jobs (job_id integer, start_time timestamptz, stop_time "
                  f"timestamptz, node text); INSERT INTO oar_jobs VALUES {rows}; "
                  "CREATE OR REPLACE VIEW nodetime_by_job AS SELECT job_id, start_time, "
                  "stop_time, node FROM oar_jobs; GRANT SELECT ON oar_jobs TO kwuser;")

    def get_metrics(self, params):
        """api.get_metrics as PostgREST calls it: each parameter as text, cast to its type."""
        args = []
        for key, value in params.items():
            text = str(value).replace("'", "''")
            args.append(f"{key} => '{text}'")
        sql = ("\\set VERBOSITY verbose\nSET TIME ZONE 'Europe/Paris'; SELECT "
               f"coalesce(json_agg(t), '[]') FROM api.get_metrics({', '.join(args)}) t")
        done = self.psql(sql, check=False)
        if done.returncode != 0:
            # "psql:<stdin>:2: ERROR:  XX000: plpy.Error: Missing ...": (SQLSTATE, message)
            line = next(x for x in done.stderr.splitlines() if "ERROR:" in x)
            code, _, message = line.split("ERROR:", 1)[1].strip().partition(": ")
            return None, (code, message)
        return json.loads(done.stdout), None

    def close(self):
        if self.server is not None and self.server.poll() is None:
            self.server.terminate()
            self.server.wait(timeout=30)


# ---- the comparison ---------------------------------------------------------------------------

def normalized(rows):
    """Rows as comparable tuples: the instant in microseconds, device, metric, value (NaN and
    null told apart; rates to 9 significant digits), labels."""
    out = []
    for r in rows:
        t = datetime.fromisoformat(r["timestamp"].replace("Z", "+00:00"))
        value = r["value"]
        if isinstance(value, str):
            value = float(value)
        if isinstance(value, float):
            value = "NaN" if math.isnan(value) else float(f"{value:.9g}")
        out.append((round(t.timestamp() * 1e6), r["device_id"], r["metric_id"], value,
                    json.dumps(r["labels"], sort_keys=True)))
    return sorted(out, key=repr)


@pytest.fixture(scope="module")
def both(tmp_path_factory):
    if os.geteuid() != 0:
        pytest.skip("Kwollect's PostgreSQL runs in a chroot of a Debian 13 root: root only")
    tmp = tmp_path_factory.mktemp("kwollect")
    kwollect = None
    server = None
    try:
        kwollect = Kwollect(tmp)  # may make the root first (a minute or two)
        # Rows a minute old for the shapes without bounds (the last 5 minutes): taken once the
        # peers are up, so that they are still in that window when asked.
        rows = make_rows(int(time.time()))
        kwollect.load(rows)
        kwollect.add_job(JOB)
        added = run_kwatt("jobs", "add", "--store", tmp / "site.db", "--site", "lyon", "--id",
                          JOB["id"], "--nodes", ",".join(JOB["nodes"]), "--start",
                          paris(JOB["start"]), "--stop", paris(JOB["stop"]))
        assert added.returncode == 0, added.stderr
        server = start_server("--auth", ":".join(AUTH), store=tmp / "site.db", tmp_path=tmp)
        for i in range(0, len(rows), 5000):
            chunk = [{**r, "value": None if r["value"] is None else r["value"]}
                     for r in rows[i:i + 5000]]
            body = json.dumps(chunk).replace("NaN", '"NaN"')
            pushed = requests.post(server.url + "/sites/lyon/metrics", data=body, auth=AUTH,
                                   headers={"Content-Type": "application/json"}, timeout=60)
            assert pushed.status_code in (200, 201, 204), pushed.text
        yield kwollect, server
    finally:
        if server is not None:
            server.stop()
        if kwollect is not None:
            kwollect.close()


# The HTTP status PostgREST answers an error of these SQLSTATE classes with.
POSTGREST_STATUS = {"XX": 500, "P0": 400, "22": 400}


def kwatt_answer(server, params):
    query = urllib.parse.urlencode(params)
    answer = requests.get(f"{server.url}/sites/lyon/metrics?{query}", auth=AUTH, timeout=60)
    if answer.status_code != 200:
        return None, answer
    return answer.json(), None


@pytest.mark.parametrize("name,params", SHAPES, ids=[name for name, _ in SHAPES])
def test_kwatt_answers_as_kwollects_own_sql(both, name, params):
    kwollect, server = both
    expected, expected_error = kwollect.get_metrics(params)
    got, error = kwatt_answer(server, params)
    if expected_error is not None:
        assert error is not None, f"Kwollect: {expected_error}; kwatt answered {len(got)} rows"
        code, message = expected_error
        assert (error.json()["code"], error.json()["message"]) == (code, message)
        assert error.status_code == POSTGREST_STATUS.get(code[:2], error.status_code)
        return
    assert error is None, (f"kwatt: {error.status_code} {error.text[:300]}; Kwollect answered "
                           f"{len(expected)} rows")
    want, have = normalized(expected), normalized(got)
    missing = [r for r in want if r not in set(have)]
    extra = [r for r in have if r not in set(want)]
    assert not missing and not extra, (
        f"{name}: {len(want)} rows from Kwollect, {len(have)} from kwatt; "
        f"missing {missing[:5]}, extra {extra[:5]}")


def test_the_shapes_compared():
    """How many query shapes the comparison covers (doc/server.md quotes it)."""
    assert len(SHAPES) == 35


def test_the_differences_doc_server_md_lists(both):
    """Where kwatt answers otherwise, on purpose (doc/server.md, "Against Kwollect itself")."""
    kwollect, server = both
    # An unknown job: Kwollect's function fails on the empty list of its nodes (a Python error,
    # SQLSTATE 38000, which PostgREST answers with a 500); kwatt says which job it does not know
    # (404).
    _, error = kwollect.get_metrics({"job_id": 999})
    assert error == ("38000", "IndexError: list index out of range"), error
    _, answer = kwatt_answer(server, {"job_id": 999})
    assert answer.status_code == 404
    assert answer.json()["message"] == "Job 999 not found on site lyon"
    # A label number with more digits than a double keeps: jsonb keeps them all, kwatt's stores
    # (SQLite and PostgreSQL alike) the double's.
    params = {"nodes": "sagittaire-1", "start_time": T0, "end_time": T0 + 60}
    expected, _ = kwollect.get_metrics(params)
    got, _ = kwatt_answer(server, params)
    assert [r["labels"] for r in expected] == [{"serial": 12345678901234567890123}]
    assert [r["labels"] for r in got] == [{"serial": 12345678901234568000000}]


def test_kwatt_fetch_as_rate_over_pieces_is_kwollects_one_answer(both, tmp_path):
    """`kwatt fetch --as-rate` asks in pieces (here of 10 rows) and computes the rates over all of
    them: what Kwollect's one answer of the whole window holds, wraps and nulls included."""
    kwollect, server = both
    config = tmp_path / "grid5000.yaml"
    config.write_text(f"uri: {server.url}\nusername: {AUTH[0]}\npassword: {AUTH[1]}\n")
    config.chmod(0o600)
    params = {"nodes": "nova-1,taurus-3", "metrics": "network_ifacein_bytes_total",
              "start_time": T0, "end_time": T0 + 600, "as_rate": "true"}
    expected, _ = kwollect.get_metrics(params)
    fetched = run_kwatt("fetch", "--config", config, "--nodes", "nova-1.lyon,taurus-3.lyon",
                        "--metrics", "network_ifacein_bytes_total", "--start", T0, "--end",
                        T0 + 600, "--as-rate", "--rows-per-request", 10, "--custom-metrics",
                        "--quiet")
    assert fetched.returncode == 0, fetched.stderr
    rows = [json.loads(line) for line in fetched.stdout.decode().splitlines()]
    assert len(rows) == len(expected) == 241  # taurus-3's repeated instant
    assert sum(r["value"] is None for r in rows) == 3  # the first rows, the repeated instant
    assert normalized(rows) == normalized(expected)
