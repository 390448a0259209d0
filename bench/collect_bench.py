#!/usr/bin/env python3
"""`kwatt collect` side by side with Kwollect's own collector (`kwollector`, PyPI kwollect 1.2.0):
polls on time, rows written, CPU and memory, each collector pinned to one core; then kwatt alone
on a mix of Prometheus exporters and SNMP agents (Debian's snmpd), and on a wattmeter's 50 Hz
stream (`kwatt simulate wattmetre`). Rewrites the section "## Collector (`kwatt collect`)" of
BENCHMARKS.md, which states the method, and bench/out/collect_bench.json.

Usage: python3 bench/collect_bench.py [KWATT_BINARY] [--seconds 60] [--warmup 5] [--no-write]
                                      [--cases prometheus,mix,wattmetre]
Needs kwatt_collect_peer and kwatt_test_peers beside the kwatt binary (built with it),
/usr/sbin/snmpd (`make deps`) and, for Kwollect's side, bench/.venv-kwollect (`make bench-deps`;
without it that side is reported as not run).
"""
from __future__ import annotations

import argparse
import collections
import datetime
import json
import math
import os
import re
import resource
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

import harness as h
import serve_store_bench as ssb  # noqa: E402  (its throwaway PostgreSQL cluster)

ROOT = h.ROOT
SECTION_TITLE = "## Collector (`kwatt collect`)"
# Where `make bench-deps` installs Kwollect (the Makefile's KWOLLECT_VENV, relative to the root).
KWOLLECT_VENV = os.path.join(ROOT, os.environ.get("KWOLLECT_VENV", "bench/.venv-kwollect"))
KWOLLECT_PACKAGES = ["kwollect", "aiohttp", "asyncpg", "aiosnmp", "pyonf", "PyYAML", "orjson",
                     "psycopg2-binary"]

COLLECTOR_CORE = 0
PEER_CORE = 1  # the simulated devices and PostgreSQL
ON_TIME_S = 0.1  # a poll within 100 ms of its tick is on time
TAIL_S = 3.0  # after the measured interval, before the collector is stopped: writes in flight
BAR_ON_TIME = 0.99  # "≥ 99 % of polls on time at 1,000 devices on one core"

# The selection of the Prometheus case: the exporter's names kept (3 samples of the 20).
PROM_PATH = "node_load1-power_watt"
PROM_ROWS_PER_POLL = 3  # node_load1, power_watt{psu="1"}, power_watt{psu="2"}

# The SNMP PDUs of the mix: APC rPDU2OutletMeteredStatusPower of outlets 1 and 2 (W), served as
# snmpd `override` values; the node's row is their sum.
SNMP_OUTLETS = [("1.3.6.1.4.1.318.1.1.26.9.4.3.1.7.1", 181),
                ("1.3.6.1.4.1.318.1.1.26.9.4.3.1.7.2", 175)]
SNMP_NODE_WATTS = sum(w for _, w in SNMP_OUTLETS)

# The wattmeter: 50 nodes of lyon (nova-24 and beyond get nova's hardware), 2 PSUs each.
WATTMETRE_NODES = [f"nova-{i}" for i in range(1, 51)]
WATTMETRE_RATE = 50  # lines a second (the simulator's default, an Omegawatt's)
WATTMETRE_SHOWN = ["nova-1", "nova-4", "nova-25", "nova-50"]  # the energy check's table
BAR_WATTMETRE_CPU = 10.0  # "100 wattmeter ports at 50 Hz into the store on one core, ≤ 10 %"


# ---------------------------------------------------------------------------------------------
# Processes


def peak_rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024 / 1e6
    return 0.0


def core_busy_seconds(core: int) -> float:
    """Time core `core` was busy (user, nice, system, irq, softirq, steal), from /proc/stat."""
    with open("/proc/stat") as f:
        for line in f:
            if line.startswith(f"cpu{core} "):
                ticks = [int(x) for x in line.split()[1:9]]
                return (sum(ticks) - ticks[3] - ticks[4]) / os.sysconf("SC_CLK_TCK")
    raise h.BenchError(f"no cpu{core} in /proc/stat")


def runqueue_wait_seconds(pid: int) -> float:
    """Time the threads of `pid` spent runnable but waiting for a CPU (/proc/PID/task/*/schedstat),
    added up."""
    total = 0
    for task in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{task}/schedstat") as f:
                total += int(f.read().split()[1])
        except (OSError, IndexError, ValueError):
            pass
    return total / 1e9


def process_tree(pid: int) -> list[int]:
    pids, todo = [], [pid]
    while todo:
        p = todo.pop()
        pids.append(p)
        try:
            for task in os.listdir(f"/proc/{p}/task"):
                with open(f"/proc/{p}/task/{task}/children") as f:
                    todo += [int(c) for c in f.read().split()]
        except OSError:
            pass
    return pids


def tree_cpu(pid: int) -> dict[int, float]:
    out = {}
    for p in process_tree(pid):
        try:
            out[p] = h.cpu_seconds(p)
        except OSError:
            pass
    return out


class Process:
    """A background process with its output in files; stop() ends it by its pid (SIGTERM, then
    SIGKILL after `grace` seconds)."""

    running: set["Process"] = set()

    def __init__(self, argv: list[str], directory: str, name: str, env: dict | None = None):
        self.name = name
        self.out_path = os.path.join(directory, f"{name}.stdout")
        self.err_path = os.path.join(directory, f"{name}.stderr")
        with open(self.out_path, "wb") as out, open(self.err_path, "wb") as err:
            # taskset execs its command: the pid is the command's.
            self.proc = subprocess.Popen(argv, stdout=out, stderr=err, stdin=subprocess.DEVNULL,
                                         env=env)
        Process.running.add(self)

    @property
    def pid(self) -> int:
        return self.proc.pid

    def alive(self) -> bool:
        return self.proc.poll() is None

    def stdout(self) -> str:
        with open(self.out_path, errors="replace") as f:
            return f.read()

    def stderr(self) -> str:
        with open(self.err_path, errors="replace") as f:
            return f.read()

    def stop(self, grace: float = 60) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=grace)
            except subprocess.TimeoutExpired:
                h.log(f"{self.name} (pid {self.pid}) ignored SIGTERM for {grace:.0f} s: SIGKILL")
                self.proc.kill()
                self.proc.wait()
        Process.running.discard(self)
        return self.proc.returncode


def stop_all() -> None:
    for process in list(Process.running):
        process.stop(grace=10)
    for agents in list(SnmpAgents.running):
        agents.stop()


class Peer:
    """kwatt_collect_peer: `count` simulated Prometheus exporters on 127.0.0.1, pinned."""

    def __init__(self, binary: str, count: int, directory: str, core: int | None):
        self.process = Process(h.pinned(core, [binary, "--ports", str(count)]), directory, "peer")
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            line = self.process.stdout()
            if line.endswith("\n"):
                self.ports = [int(p) for p in line.split()]
                break
            if not self.process.alive():
                raise h.BenchError(f"kwatt_collect_peer exited: {self.process.stderr()}")
            time.sleep(0.05)
        else:
            raise h.BenchError("kwatt_collect_peer printed no ports in 30 s")
        if len(self.ports) != count:
            raise h.BenchError(f"kwatt_collect_peer bound {len(self.ports)} ports, not {count}")

    def stop(self) -> str:
        self.process.stop()
        return self.process.stderr().strip()


class SnmpAgents:
    """kwatt_test_peers snmpd --ports N: Debian's snmpd on `count` UDP ports of 127.0.0.1
    (several snmpd processes, 125 ports each: snmpd binds no more than that of one
    `agentAddress` list), serving the fixed values `overrides` (OID, type, value); pinned to
    `core` (its snmpd processes inherit it). Stopped by closing its standard input (it then
    stops its agents by their pids), each agent killed by its pid if it is still there."""

    running: set["SnmpAgents"] = set()

    def __init__(self, binary: str, count: int, directory: str, core: int | None,
                 overrides: list[tuple[str, str, str]]):
        argv = [binary, "snmpd", "--ports", str(count)]
        for oid, kind, value in overrides:
            argv += ["--override", oid, kind, value]
        self.err_path = os.path.join(directory, "snmpd-peers.stderr")
        with open(self.err_path, "wb") as err:
            self.proc = subprocess.Popen(h.pinned(core, argv), stdin=subprocess.PIPE,
                                         stdout=subprocess.PIPE, stderr=err, text=True)
        SnmpAgents.running.add(self)
        line = self.proc.stdout.readline()  # snmpd writes its PID file once it listens
        if not line:
            self.stop()
            with open(self.err_path, errors="replace") as f:
                raise h.BenchError(f"kwatt_test_peers snmpd did not start: {f.read()}")
        where = json.loads(line)
        self.ports, self.pids = where["ports"], where["pids"]
        if len(self.ports) != count:
            self.stop()
            raise h.BenchError(f"kwatt_test_peers snmpd listens on {len(self.ports)} ports, "
                                f"not {count}")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.stdin.close()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        for pid in getattr(self, "pids", []):
            # Only an agent that outlived its parent: its command line names the parent's
            # temporary directory (TestSnmpd's kwatt_snmpd_PID_N).
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as f:
                    if f"kwatt_snmpd_{self.proc.pid}_".encode() in f.read():
                        os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        SnmpAgents.running.discard(self)


class Postgres:
    """serve_store_bench's throwaway PostgreSQL cluster (Unix socket, as `nobody` when root),
    its processes pinned to `core` (the backends forked later inherit the postmaster's)."""

    def __init__(self, kwatt: str, core: int | None):
        self.peer = ssb.postgres_cluster(kwatt)
        self.socket_dir = self.peer.dir
        self.bin_dir = self.peer.bin
        self.postmaster = self.peer.pid
        if core is not None:
            for pid in process_tree(self.postmaster):
                os.sched_setaffinity(pid, {core})
        self.version = self.sql("postgres", "SHOW server_version").strip()

    def uri(self, db: str) -> str:
        return f"postgresql:///{db}?host={self.socket_dir}&user=postgres"

    def sql(self, db: str, command: str) -> str:
        done = subprocess.run([f"{self.bin_dir}/psql", "-X", "-q", "-At", "-F", "\t", "-v",
                               "ON_ERROR_STOP=1", "-h", self.socket_dir, "-U", "postgres", "-d",
                               db, "-c", command], capture_output=True, text=True, timeout=300)
        if done.returncode != 0:
            raise h.BenchError(f"psql on {db}: {done.stderr.strip()}")
        return done.stdout

    def create_database(self, db: str) -> None:
        self.sql("postgres", f"CREATE DATABASE {db}")

    def cpu(self) -> dict[int, float]:
        return tree_cpu(self.postmaster)

    def stop(self) -> None:
        self.peer.close()


# ---------------------------------------------------------------------------------------------
# Collectors and their stored rows


def kwollect_versions() -> dict[str, str] | None:
    python = os.path.join(KWOLLECT_VENV, "bin", "python")
    if not os.access(os.path.join(KWOLLECT_VENV, "bin", "kwollector"), os.X_OK):
        return None
    script = ("import importlib.metadata as m, json, platform; print(json.dumps(dict("
              f"[(p, m.version(p)) for p in {KWOLLECT_PACKAGES!r}], "
              "Python=platform.python_version())))")
    done = subprocess.run([python, "-c", script], capture_output=True, text=True, timeout=60)
    return json.loads(done.stdout) if done.returncode == 0 else None


def snmpd_version() -> str:
    done = subprocess.run(["/usr/sbin/snmpd", "-v"], capture_output=True, text=True, timeout=30)
    found = re.search(r"NET-SNMP version:\s*(\S+)", done.stdout + done.stderr)
    return f"Net-SNMP {found.group(1)}" if found else "Net-SNMP"


def write_descriptions(directory: str, descriptions: list[dict]) -> str:
    """One file of Kwollect metric descriptions (YAML: JSON is YAML), read by both collectors."""
    os.makedirs(directory, exist_ok=True)
    with open(os.path.join(directory, "bench.yaml"), "w") as f:
        f.write("[\n" + ",\n".join(json.dumps(d) for d in descriptions) + "\n]\n")
    return directory


def polls_from_postgres(pg: Postgres, db: str, prefix: str) -> dict[str, dict[float, int]]:
    """device -> {poll timestamp (epoch s) -> rows} of a Kwollect `metrics` table."""
    text = pg.sql(db, "SELECT device_id, extract(epoch FROM timestamp), count(*) FROM metrics "
                      f"WHERE device_id LIKE '{prefix}%' GROUP BY 1, 2")
    polls: dict[str, dict[float, int]] = {}
    for line in text.splitlines():
        device, epoch, rows = line.split("\t")
        polls.setdefault(device, {})[float(epoch)] = int(rows)
    return polls


def store_rows(kwatt: str, path: str):
    """The rows of an embedded store, through `kwatt store cat`: (row, its time in epoch s)."""
    done = subprocess.run([kwatt, "store", "cat", path], capture_output=True, text=True,
                          timeout=300)
    if done.returncode != 0:
        raise h.BenchError(f"kwatt store cat: {done.stderr.strip()}")
    for line in done.stdout.splitlines():
        row = json.loads(line)
        yield row, datetime.datetime.fromisoformat(row["timestamp"]).timestamp()


def polls_from_store(kwatt: str, path: str, prefix: str) -> dict[str, dict[float, int]]:
    """The same from an embedded store."""
    polls: dict[str, dict[float, int]] = {}
    for row, epoch in store_rows(kwatt, path):
        if not row["device_id"].startswith(prefix):
            continue
        device = polls.setdefault(row["device_id"], {})
        device[epoch] = device.get(epoch, 0) + 1
    return polls


def figures(polls: dict[str, dict[float, int]], devices: list[str], period: float,
            t0: float, t1: float) -> dict:
    """The figures of one run from its stored rows (the definitions: BENCHMARKS.md)."""
    ticks = on_time = made = rows = 0
    intervals = []
    for device in devices:
        stamps = sorted(polls.get(device, {}))
        if not stamps:
            ticks += int((t1 - t0) / period)
            continue
        first = stamps[0]
        k_min = math.ceil((t0 - first) / period)
        k_max = math.ceil((t1 - first) / period) - 1
        ticks += max(0, k_max - k_min + 1)
        hit = set()
        inside = [t for t in stamps if t0 <= t < t1]
        for t in inside:
            k = round((t - first) / period)
            if k_min <= k <= k_max and abs(t - first - k * period) <= ON_TIME_S:
                hit.add(k)
        on_time += len(hit)
        made += len(inside)
        rows += sum(polls[device][t] for t in inside)
        if len(inside) > 1:
            intervals.append((inside[-1] - inside[0]) / (len(inside) - 1))
    return {
        "ticks": ticks,
        "on_time": on_time,
        "polls": made,
        "rows": rows,
        "on_time_ratio": on_time / ticks if ticks else 0.0,
        "polls_ratio": made / ticks if ticks else 0.0,
        "rows_per_s": rows / (t1 - t0),
        "median_interval_ms": statistics.median(intervals) * 1000 if intervals else None,
        "devices_seen": sum(1 for d in devices if polls.get(d)),
    }


KWATT_LOG_LINE = re.compile(r"^\S+ kwatt collect: (.*)$")  # its timestamped events


def event_lines(text: str) -> list[str]:
    """The warning and error lines of a collector's log: Kwollect's `time:LEVEL:name:message`
    of level WARNING or above, kwatt's timestamped `TIME kwatt collect: MESSAGE` (a device
    failing or answering again, a stream ending...; not its start and end lines), as
    `LEVEL: message` and `message`."""
    out = []
    for line in text.splitlines():
        parts = line.split(":", 5)
        if len(parts) == 6 and parts[3] in ("WARNING", "ERROR", "CRITICAL"):
            out.append(parts[3] + ": " + parts[5])
            continue
        found = KWATT_LOG_LINE.match(line)
        if found:
            out.append(found.group(1))
    return out


def log_kinds(text: str, top: int = 5) -> list[tuple[str, int]]:
    """The most frequent kinds of event lines (numbers and addresses folded)."""
    kinds = collections.Counter(re.sub(r"\d+(\.\d+)*", "N", line)[:160]
                                for line in event_lines(text))
    return kinds.most_common(top)


class Bench:
    """What every case needs: binaries, the PostgreSQL cluster, the peer's core, timings."""

    def __init__(self, args, kwatt: str, peer_binary: str, tmp: str, pg: Postgres,
                 kwollect: dict | None):
        self.args = args
        self.kwatt = kwatt
        self.peer_binary = peer_binary
        self.peers_binary = os.path.join(os.path.dirname(kwatt), "kwatt_test_peers")
        self.snmpd_version = snmpd_version()
        self.wattmetre_command: list[str] = []  # set by wattmetre_case
        self.tmp = tmp
        self.pg = pg
        self.kwollect = kwollect
        self.databases = 0
        self.runs = 0

    def new_database(self, name: str) -> str:
        self.databases += 1
        db = f"{name}_{self.databases}"
        self.pg.create_database(db)
        return db

    def measure(self, label: str, argv: list[str], analyse, peers: dict, env: dict | None = None,
                warmup: float | None = None) -> dict:
        """Runs one collector (argv, pinned already): warm-up, the measured interval (CPU, peak
        RSS, PostgreSQL's and the peers' CPU), TAIL_S more, SIGTERM; then analyse(t0, t1), the
        figures of its stored rows, is added. `peers`: name -> function of the collector's pid
        giving the pids whose CPU is measured (the simulated devices; a child of the collector)."""
        self.runs += 1
        name = f"run{self.runs}-" + "".join(c if c.isalnum() else "-" for c in label.lower())
        warmup = self.args.warmup if warmup is None else warmup
        h.log(f"{label}: starting, warm-up {warmup:g} s")
        collector = Process(argv, self.tmp, name, env)
        time.sleep(warmup)
        if not collector.alive():
            return {"label": label, "failed": f"exited with {collector.proc.returncode} during "
                    f"the warm-up: {collector.stderr()[-1500:]}"}
        load = h.loadavg()
        peer_pids = {k: find(collector.pid) for k, find in peers.items()}

        def peer_cpu() -> dict[str, dict[int, float]]:
            out = {}
            for k, pids in peer_pids.items():
                out[k] = {}
                for pid in pids:
                    try:
                        out[k][pid] = h.cpu_seconds(pid)
                    except OSError:
                        pass
            return out

        t0 = time.time()
        cpu0, pg0, peer0 = h.cpu_seconds(collector.pid), self.pg.cpu(), peer_cpu()
        core0, wait0 = core_busy_seconds(COLLECTOR_CORE), runqueue_wait_seconds(collector.pid)
        time.sleep(self.args.seconds)
        t1 = time.time()
        alive = collector.alive()
        cpu1 = h.cpu_seconds(collector.pid) if alive else None
        core1 = core_busy_seconds(COLLECTOR_CORE)
        wait1 = runqueue_wait_seconds(collector.pid) if alive else None
        pg1, peer1 = self.pg.cpu(), peer_cpu()
        rss = peak_rss_mb(collector.pid) if alive else None
        files = len(os.listdir(f"/proc/{collector.pid}/fd")) if alive else None
        time.sleep(TAIL_S)
        code = collector.stop()
        stderr = collector.stderr()
        if not alive:
            return {"label": label, "failed": f"exited with {code} during the measured "
                    f"interval: {stderr[-1500:]}"}
        h.log(f"{label}: stopped ({code}); reading its rows")
        seconds = t1 - t0
        result = analyse(t0, t1)
        peers_cpu = {k: 100 * sum(c - peer0[k][p] for p, c in peer1[k].items() if p in peer0[k])
                     / seconds for k in peer1}
        result.update({
            "label": label,
            "exit_code": code,
            "seconds": seconds,
            "t0": t0,
            "t1": t1,
            "loadavg": load,
            "cpu_percent": 100 * (cpu1 - cpu0) / seconds,
            # What else ran on the collector's core, and how long its threads waited for it.
            "others_on_core_percent": 100 * max(0.0, core1 - core0 - (cpu1 - cpu0)) / seconds,
            "runqueue_wait_percent": 100 * (wait1 - wait0) / seconds,
            "peak_rss_mb": rss,
            "open_files": files,
            "postgres_cpu_percent": 100 * sum(c - pg0.get(p, 0.0) for p, c in pg1.items())
            / seconds,
            "peer_cpu_percent": sum(peers_cpu.values()),
            "peers_cpu_percent": peers_cpu,
            "peer_processes": {k: len(v) for k, v in peer_pids.items()},
            "stderr_tail": stderr[-3000:],
            "warnings": len(event_lines(stderr)),
            "log_kinds": log_kinds(stderr),
        })
        if "polls" in result:
            result["cpu_ms_per_poll"] = 1000 * (cpu1 - cpu0) / max(1, result["polls"])
        for line in stderr.splitlines():
            if line.startswith("kwatt collect: ") and "polls (" in line:
                result["kwatt_summary"] = line[len("kwatt collect: "):]
        said = (f"on time {100 * result['on_time_ratio']:.2f} %, polls "
                f"{100 * result['polls_ratio']:.2f} %, " if "on_time_ratio" in result else "")
        h.log(f"{label}: {said}{result['rows_per_s']:,.0f} rows/s, CPU "
            f"{result['cpu_percent']:.1f} %, peak RSS {rss:.1f} MB, PostgreSQL CPU "
            f"{result['postgres_cpu_percent']:.1f} %, peers' CPU "
            + ", ".join(f"{k} {v:.1f} %" for k, v in peers_cpu.items()))
        return result

    def poll_run(self, label: str, argv: list[str], read_polls, devices: list[str],
                 period: float, peers: dict) -> dict:
        """measure() with the figures of polls (figures()) from read_polls()."""
        return self.measure(label, argv,
                            lambda t0, t1: figures(read_polls(), devices, period, t0, t1), peers)

    def kwatt_runs(self, config: str, devices: list[str], period: float, peers: dict,
                   prefix: str, postgres: bool = True) -> list[dict]:
        """kwatt collect into an embedded store (a file), then into PostgreSQL."""
        runs = []
        store = os.path.join(self.tmp, f"collect-{self.runs + 1}.kwatt")
        argv = h.pinned(COLLECTOR_CORE, [self.kwatt, "collect", "--config", config, "--store",
                                          store])
        runs.append(self.poll_run("kwatt, embedded store", argv,
                                  lambda: polls_from_store(self.kwatt, store, prefix), devices,
                                  period, peers))
        if not postgres:
            return runs
        db = self.new_database("kwatt")
        argv = h.pinned(COLLECTOR_CORE, [self.kwatt, "collect", "--config", config, "--store",
                                          self.pg.uri(db)])
        runs.append(self.poll_run("kwatt, PostgreSQL", argv,
                                  lambda: polls_from_postgres(self.pg, db, prefix), devices,
                                  period, peers))
        return runs

    def kwollect_run(self, config: str, devices: list[str], period: float, peers: dict,
                     prefix: str) -> dict:
        """kwollector into PostgreSQL: the plain tables its collector reads and writes."""
        label = "Kwollect, PostgreSQL"
        if self.kwollect is None:
            return {"label": label, "failed": f"not run: no {KWOLLECT_VENV} (make bench-deps)"}
        db = self.new_database("kwdb")
        self.pg.sql(db, KWOLLECT_TABLES)
        argv = h.pinned(COLLECTOR_CORE, [
            os.path.join(KWOLLECT_VENV, "bin", "kwollector"), "--metrics_dir", config,
            "--db_host", self.pg.socket_dir, "--db_name", db, "--db_user", "postgres",
            "--db_password", "unused", "--log_level", "warning"])
        return self.poll_run(label, argv, lambda: polls_from_postgres(self.pg, db, prefix),
                             devices, period, peers)


# Kwollect's tables as its setup script (kwollect-setup-db) makes them, without TimescaleDB
# (a plain table instead of a hypertable, no compression policy).
KWOLLECT_TABLES = """
CREATE TABLE metrics (
  timestamp timestamptz DEFAULT now(), device_id text NOT NULL, metric_id text NOT NULL,
  value double precision DEFAULT 'NaN', labels jsonb DEFAULT '{}'::jsonb);
CREATE INDEX metrics_device_idx ON metrics (device_id, timestamp DESC);
CREATE INDEX metrics_alias_idx ON metrics ((labels->>'_device_alias'), timestamp DESC)
  WHERE labels ? '_device_alias';
CREATE TABLE promoted_metrics (device_id text NOT NULL, metric_id text DEFAULT NULL);
"""


# ---------------------------------------------------------------------------------------------
# Cases: each a function of the Bench returning its results, rendered by render_case().


def prometheus_case(bench: Bench) -> dict:
    """1,000 (--devices) Prometheus exporters at a 1 s period, each on its own port."""
    count, period = bench.args.devices, 1.0
    prefix = "bench-prom-"
    peer = Peer(bench.peer_binary, count, bench.tmp, PEER_CORE)
    peers = {"kwatt_collect_peer": lambda _: [peer.process.pid]}
    try:
        devices = [f"{prefix}{i + 1:04d}" for i in range(count)]
        config = write_descriptions(os.path.join(bench.tmp, "prometheus.d"), [
            {"name": "node", "device_id": device, "update_every": int(period * 1000),
             "url": f"prometheus://127.0.0.1:{port}/{PROM_PATH}"}
            for device, port in zip(devices, peer.ports)])
        runs = bench.kwatt_runs(config, devices, period, peers, prefix)
        runs.append(bench.kwollect_run(config, devices, period, peers, prefix))
    finally:
        peer_stats = peer.stop()
    return {
        "key": "prometheus",
        "title": f"{count:,} Prometheus devices at a {period:g} s period",
        "setup": f"{count:,} exporters of `kwatt_collect_peer`, one port each, 20 samples each "
                 f"(node-exporter names); each description `prometheus://127.0.0.1:PORT/"
                 f"{PROM_PATH}`, `update_every: {int(period * 1000)}`: {PROM_ROWS_PER_POLL} rows "
                 f"a poll (`prom_node_load1`, `prom_power_watt` × 2 PSUs)",
        "devices": count,
        "period_s": period,
        "expected_rows_per_s": count * PROM_ROWS_PER_POLL / period,
        "runs": runs,
        "peer": peer_stats,
        "bar": True,  # the bar of the issue is about this case
    }


def mix_figures(kwatt: str, store: str, prefix: str, prom_devices: list[str], pdus: list[str],
                period: float, t0: float, t1: float) -> dict:
    """figures() of the mix, over all its devices and per kind (a PDU's poll: its two outlets'
    rows and its node's), and the check of the node rows: one a poll, the sum of the outlets."""
    polls: dict[str, dict[float, int]] = {}
    node_rows = collections.Counter()  # (node, time) -> rows, in the interval
    wrong = 0
    for row, epoch in store_rows(kwatt, store):
        device_id = row["device_id"]
        if not device_id.startswith(prefix):
            continue
        if device_id.startswith(prefix + "pdu-"):
            key = device_id.rsplit("-port-", 1)[0]
        elif device_id.startswith(prefix + "node-"):
            key = prefix + "pdu-" + device_id[len(prefix + "node-"):]
            if t0 <= epoch < t1:
                node_rows[(device_id, epoch)] += 1
                origin = sorted(row.get("labels", {}).get("_device_orig", []))
                if (row["value"] != SNMP_NODE_WATTS
                        or origin != [f"{key}-port-{n}" for n in range(1, len(SNMP_OUTLETS) + 1)]):
                    wrong += 1
        else:
            key = device_id
        device = polls.setdefault(key, {})
        device[epoch] = device.get(epoch, 0) + 1
    result = figures(polls, prom_devices + pdus, period, t0, t1)
    result["kinds"] = {"Prometheus": figures(polls, prom_devices, period, t0, t1),
                       "SNMP": figures(polls, pdus, period, t0, t1)}
    result["node_rows"] = sum(node_rows.values())
    result["node_polls"] = len(node_rows)
    result["node_rows_wrong"] = wrong
    return result


def mix_case(bench: Bench) -> dict:
    """1,000 (--devices) devices at a 1 s period, half Prometheus exporters, half SNMP PDUs
    (snmpd), kwatt into its embedded store only (Kwollect 1.2.0 reads SNMP on port 161 only)."""
    count, period = bench.args.devices, 1.0
    prom_count, snmp_count = count // 2, count - count // 2
    prefix = "bench-mix-"
    peer = Peer(bench.peer_binary, prom_count, bench.tmp, PEER_CORE)
    agents = None
    try:
        agents = SnmpAgents(bench.peers_binary, snmp_count, bench.tmp, PEER_CORE,
                            [(oid, "integer", str(watts)) for oid, watts in SNMP_OUTLETS])
        prom_devices = [f"{prefix}prom-{i + 1:04d}" for i in range(prom_count)]
        pdus = [f"{prefix}pdu-{i + 1:04d}" for i in range(snmp_count)]
        descriptions = [
            {"name": "node", "device_id": device, "update_every": int(period * 1000),
             "url": f"prometheus://127.0.0.1:{port}/{PROM_PATH}"}
            for device, port in zip(prom_devices, peer.ports)]
        for i, (pdu, port) in enumerate(zip(pdus, agents.ports)):
            for outlet, (oid, _) in enumerate(SNMP_OUTLETS, 1):
                descriptions.append({
                    "name": "pdu_outlet_power_watt", "device_id": f"{pdu}-port-{outlet}",
                    "url": f"snmp://public@127.0.0.1:{port}/{oid}",
                    "update_every": int(period * 1000),
                    "labels": {"_device_alias": f"{prefix}node-{i + 1:04d}"}})
        config = write_descriptions(os.path.join(bench.tmp, "mix.d"), descriptions)
        store = os.path.join(bench.tmp, f"collect-{bench.runs + 1}.kwatt")
        argv = h.pinned(COLLECTOR_CORE, [bench.kwatt, "collect", "--config", config, "--store",
                                          store])
        peers = {"kwatt_collect_peer": lambda _: [peer.process.pid],
                 "snmpd": lambda _: list(agents.pids)}
        runs = [bench.measure(
            "kwatt, embedded store", argv,
            lambda t0, t1: mix_figures(bench.kwatt, store, prefix, prom_devices, pdus, period,
                                       t0, t1), peers)]
        snmpd_processes = len(agents.pids)
    finally:
        peer_stats = peer.stop()
        if agents:
            agents.stop()
    return {
        "key": "mix",
        "title": f"{count:,} devices, Prometheus and SNMP, at a {period:g} s period",
        "setup": f"{prom_count:,} exporters of `kwatt_collect_peer` as in the case above, and "
                 f"{snmp_count:,} SNMP v2c agents: Debian's snmpd "
                 f"({bench.snmpd_version}), {snmpd_processes} processes of up to 125 UDP ports "
                 "of 127.0.0.1 each (`kwatt_test_peers snmpd --ports N`, "
                 "tests/peers/test_peers.cc: TestSnmpd's configuration and a second "
                 "`agentAddress` line; one snmpd binds no more ports than fit in 2,560 "
                 "characters of `agentAddress`, 128 `udp:127.0.0.1:PORT`, and ignores the rest "
                 "without a word), pinned to core "
                 f"{PEER_CORE} with the exporters; each port is a PDU: two descriptions "
                 "`snmp://public@127.0.0.1:PORT/1.3.6.1.4.1.318.1.1.26.9.4.3.1.7.OUTLET` (APC "
                 "rPDU2OutletMeteredStatusPower, outlets 1 and 2, served as snmpd `override` "
                 f"values {' and '.join(str(w) for _, w in SNMP_OUTLETS)} W), "
                 f"`update_every: {int(period * 1000)}`, device ids `PDU-port-1` and `PDU-port-2`"
                 ", `labels: {_device_alias: NODE}`: one GET of 2 OIDs a poll and 3 rows "
                 "(the 2 outlets and the node's row, their sum); a PDU's poll is the time of its "
                 "3 rows",
        "devices": count,
        "period_s": period,
        "expected_rows_per_s": (prom_count * PROM_ROWS_PER_POLL
                                + snmp_count * (len(SNMP_OUTLETS) + 1)) / period,
        "runs": runs,
        "peer": peer_stats,
        "bar": True,
        "bar_name": "Prometheus and SNMP",
    }


def wattmetre_figures(bench: Bench, store: str, truth_path: str, nodes: list[str], ports: int,
                      promoted: bool, t0: float, t1: float) -> dict:
    """The rows of a wattmeter run: rows/s, rows per port (or node) and whole second of the
    interval against what is expected (1 or RATE), the energy of the nodes' rows over the whole
    seconds of the interval against the simulator's truth over them."""
    rate = WATTMETRE_RATE
    first_s, end_s = math.ceil(t0), math.floor(t1)  # the whole seconds [first_s, end_s)
    per = collections.Counter()  # (device, second) -> rows
    energy = collections.defaultdict(float)  # node -> joules over the whole seconds
    rows_in = port_rows_all = 0
    node_set = set(nodes)
    for row, epoch in store_rows(bench.kwatt, store):
        if row["metric_id"] != "wattmetre_power_watt":
            continue
        device = row["device_id"]
        if device not in node_set:
            port_rows_all += 1
        if t0 <= epoch < t1:
            rows_in += 1
        sample = round(epoch * rate)  # rows are at multiples of the period (or of 1 s)
        second = sample // rate
        if first_s <= second < end_s:
            per[(device, second)] += 1
            if device in node_set:
                energy[device] += row["value"] * (1 / rate if promoted else 1.0)
    expected = rate if promoted else 1
    devices = [f"wattmetre1-port{i}" for i in range(ports)] + nodes
    cells = [(d, s) for d in devices for s in range(first_s, end_s)]
    as_expected = sum(1 for c in cells if per.get(c, 0) == expected)
    missing = sum(1 for c in cells if per.get(c, 0) == 0)
    with open(truth_path) as f:
        truth = json.load(f)
    # The truth over the whole seconds: the simulator again, from their start (same model).
    window_truth = os.path.join(bench.tmp, f"truth-window-{bench.runs}.json")
    done = subprocess.run(
        bench.wattmetre_command + ["--fast", "--start", str(first_s), "--duration",
                                   str(end_s - first_s), "--truth", window_truth],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, timeout=120)
    if done.returncode != 0:
        raise h.BenchError(f"kwatt simulate wattmetre --truth: {done.stderr.strip()}")
    with open(window_truth) as f:
        window = json.load(f)
    errors = {n: (energy[n] - window["nodes"][n]["joules"]) / window["nodes"][n]["joules"]
              for n in nodes}
    shown = [n for n in WATTMETRE_SHOWN if n in node_set]
    return {
        "rows": rows_in,
        "rows_per_s": rows_in / (t1 - t0),
        "whole_seconds": end_s - first_s,
        "cells": len(cells),
        "cells_as_expected": as_expected,
        "cells_missing": missing,
        "expected_per_cell": expected,
        "lines_printed": truth["samples"],
        "run_seconds": truth["seconds"],
        # Every line gives one row per port when every port is promoted: the lines read.
        "lines_read": port_rows_all // ports if promoted else None,
        "energy": {n: {"rows_j": energy[n], "truth_j": window["nodes"][n]["joules"],
                       "error": errors[n]} for n in shown},
        "energy_max_abs_error": max(abs(e) for e in errors.values()),
        "energy_nodes": len(errors),
        "energy_window": [first_s, end_s],
    }


def wattmetre_case(bench: Bench) -> dict:
    """One wattmeter of 100 ports (50 nodes × 2 PSUs) at 50 Hz from `kwatt simulate wattmetre`
    in real time, the collector's child, into the embedded store: averaged per second, then with
    every node promoted by a monitor job."""
    nodes = WATTMETRE_NODES
    ports = 2 * len(nodes)
    bench.wattmetre_command = [bench.kwatt, "simulate", "wattmetre", "--id", "wattmetre1",
                               "--nodes", ",".join(n for n in nodes for _ in range(2))]
    mapping = os.path.join(bench.tmp, "wattmetre1.yaml")
    done = subprocess.run(bench.wattmetre_command + ["--fast", "--duration", "0.02",
                                                     "--mapping-out", mapping],
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                          timeout=60)
    if done.returncode != 0:
        raise h.BenchError(f"kwatt simulate wattmetre --mapping-out: {done.stderr.strip()}")
    runs = []
    for promoted in (False, True):
        label = ("kwatt, embedded store, every node promoted (monitor job)" if promoted
                 else "kwatt, embedded store, averaged per second")
        n = bench.runs + 1
        truth = os.path.join(bench.tmp, f"truth-{n}.json")
        store = os.path.join(bench.tmp, f"collect-{n}.kwatt")
        command = h.pinned(PEER_CORE, bench.wattmetre_command + ["--truth", truth])
        config = write_descriptions(os.path.join(bench.tmp, f"wattmetre-{n}.d"), [{
            "name": "wattmetre_power_watt", "device_id": "wattmetre1",
            "url": "wattmetre://wattmetre1/", "command": command, "mapping": mapping}])
        argv = [bench.kwatt, "collect", "--config", config, "--store", store]
        if promoted:
            # The simulated ports' nodes (nova-1..50: more than the reference's), as a lab
            # describes its own (doc/store.md), so that jobs add accepts them.
            testbed = os.path.join(bench.tmp, f"testbed-{n}.json")
            with open(testbed, "w") as out:
                json.dump({"sites": [{"uid": "lyon", "clusters": [
                    {"uid": "nova", "nodes": nodes, "metrics": []}]}]}, out)
            added = subprocess.run([bench.kwatt, "jobs", "add", "--store", store, "--site",
                                    "lyon", "--testbed", testbed, "--nodes", ",".join(nodes),
                                    "--types", "monitor=wattmetre_power_watt"],
                                   capture_output=True, text=True, timeout=60)
            if added.returncode != 0:
                raise h.BenchError(f"kwatt jobs add: {added.stderr.strip()}")
            argv += ["--site", "lyon"]
        # The simulator: the collector's child (taskset execs it).
        peers = {"simulator": lambda pid: process_tree(pid)[1:]}
        runs.append(bench.measure(
            label, h.pinned(COLLECTOR_CORE, argv),
            lambda t0, t1, s=store, t=truth, p=promoted: wattmetre_figures(
                bench, s, t, nodes, ports, p, t0, t1), peers))
        runs[-1]["promoted"] = promoted
        runs[-1]["expected_rows_per_s"] = (
            (ports + len(nodes)) * (WATTMETRE_RATE if promoted else 1))
    return {
        "key": "wattmetre",
        "kind": "stream",
        "title": f"{ports} wattmeter ports at {WATTMETRE_RATE} Hz",
        "setup": f"one description `wattmetre://wattmetre1/` whose `command` is `taskset -c "
                 f"{PEER_CORE} kwatt simulate wattmetre --id wattmetre1 --nodes nova-1,nova-1,"
                 f"...,nova-{len(nodes)},nova-{len(nodes)} --truth FILE` ({len(nodes)} nodes "
                 f"of lyon, 2 PSUs each: {ports} ports; version 2 lines, {WATTMETRE_RATE} a "
                 "second, in real time) with its `mapping` (written beforehand by `--fast "
                 "--duration 0.02 --mapping-out`); the collector on core "
                 f"{COLLECTOR_CORE}, the simulator (its child) on core {PEER_CORE}. Averaged: "
                 f"one row per port and second and the node rows ({ports} + {len(nodes)} a "
                 "second); promoted: `kwatt jobs add --store S --site lyon --nodes (all) "
                 "--types monitor=wattmetre_power_watt` before the start, `--site lyon`: every "
                 f"value ({ports * WATTMETRE_RATE:,} + {len(nodes) * WATTMETRE_RATE:,} rows a "
                 "second)",
        "ports": ports,
        "nodes": len(nodes),
        "runs": runs,
        "bar_cpu_percent": BAR_WATTMETRE_CPU,
    }


CASES = [prometheus_case, mix_case, wattmetre_case]
CASE_KEYS = ["prometheus", "mix", "wattmetre"]


# ---------------------------------------------------------------------------------------------
# Report


def cell(value, fmt: str, suffix: str = "") -> str:
    return "–" if value is None else format(value, fmt) + suffix


def ratio(a: float | None, b: float | None, fmt: str) -> str:
    return "–" if a is None or not b else format(a / b, fmt) + "×"


def render_case(case: dict) -> list[str]:
    if case.get("kind") == "stream":
        return render_stream_case(case)
    lines = [f"### {case['title']}", "", f"Setup: {case['setup']}. Expected: "
             f"{case['expected_rows_per_s']:,.0f} rows/s.", "",
             "| collector, store | polls on time | polls made | rows/s | median interval (ms) "
             "| collector CPU (% of a core) | CPU a poll (ms) | peak RSS (MB) | open files "
             f"| PostgreSQL CPU (%) | peers' CPU (%) | others on core {COLLECTOR_CORE} (%) "
             "| collector waited for the CPU (%) |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    notes = []
    for r in case["runs"]:
        if "failed" in r:
            lines.append(f"| {r['label']} | " + " | ".join(["–"] * 12) + " |")
            notes.append(f"{r['label']}: {r['failed'].splitlines()[0] if r['failed'] else ''}")
            continue
        store = "PostgreSQL" in r["label"]
        lines.append(
            f"| {r['label']} | {100 * r['on_time_ratio']:.2f} % ({r['on_time']:,} of "
            f"{r['ticks']:,}) | {100 * r['polls_ratio']:.2f} % | {r['rows_per_s']:,.0f} "
            f"| {cell(r['median_interval_ms'], '.1f')} | {r['cpu_percent']:.1f} "
            f"| {r['cpu_ms_per_poll']:.3f} | {cell(r['peak_rss_mb'], '.1f')} "
            f"| {cell(r.get('open_files'), ',')} "
            f"| {r['postgres_cpu_percent']:.1f}{'' if store else ' (idle)'} "
            f"| {r['peer_cpu_percent']:.1f} | {r['others_on_core_percent']:.1f} "
            f"| {r['runqueue_wait_percent']:.1f} |")
        if r.get("kwatt_summary"):
            notes.append(f"{r['label']}, its own end line (whole run, warm-up included): "
                         f"`{r['kwatt_summary']}`")
        if r.get("warnings"):
            kinds = "; ".join(f"{n:,} × `{k}`" for k, n in r.get("log_kinds", [])[:3])
            notes.append(f"{r['label']}: {r['warnings']:,} warning and error lines in its log "
                         f"(whole run), most of them: {kinds}")
        drift = (r["median_interval_ms"] or 0) - 1000 * case["period_s"]
        if drift >= 0.5:
            notes.append(
                f"{r['label']}: its polls drift, {drift:.1f} ms a period (median interval less "
                "the period): a device's polls leave the "
                f"{ON_TIME_S * 1000:.0f} ms band around its schedule after about "
                f"{ON_TIME_S * 1000 / drift:.0f} periods, so its share on time falls with the "
                "length of the run")
        if len(r.get("peers_cpu_percent", {})) > 1:
            notes.append(f"{r['label']}: the peers' CPU is " + " and ".join(
                f"{name}'s {cpu:.1f} %" + (f" ({r['peer_processes'][name]} processes)"
                                           if r["peer_processes"].get(name, 1) > 1 else "")
                for name, cpu in r["peers_cpu_percent"].items()))
        if "node_rows" in r:
            notes.append(
                f"{r['label']}: the nodes' rows of the interval: {r['node_rows']:,} for "
                f"{r['node_polls']:,} (node, time) pairs (one row a PDU poll), "
                f"{r['node_rows_wrong']:,} of them not the sum {SNMP_NODE_WATTS} W of the two "
                "outlets with `_device_orig` naming both")
        notes.append(f"{r['label']}: load average {r['loadavg']} at the start of its interval")
    kinds = [(r["label"], kind, f) for r in case["runs"] if "failed" not in r
             for kind, f in r.get("kinds", {}).items()]
    if kinds:
        lines += ["", "| collector, store, devices | polls on time | polls made | rows/s "
                  "| median interval (ms) |", "|---|---:|---:|---:|---:|"]
        for label, kind, f in kinds:
            lines.append(f"| {label}, {kind} | {100 * f['on_time_ratio']:.2f} % "
                         f"({f['on_time']:,} of {f['ticks']:,}) | {100 * f['polls_ratio']:.2f} %"
                         f" | {f['rows_per_s']:,.0f} | {cell(f['median_interval_ms'], '.1f')} |")
    by = {r["label"]: r for r in case["runs"] if "failed" not in r}
    kw, kwl, emb = (by.get("kwatt, PostgreSQL"), by.get("Kwollect, PostgreSQL"),
                    by.get("kwatt, embedded store"))
    pairs = [("Kwollect ÷ kwatt, both into PostgreSQL", kwl, kw),
             ("kwatt into PostgreSQL ÷ kwatt into its embedded store", kw, emb)]
    if any(a and b for _, a, b in pairs):
        lines += ["", "| ratio | polls on time | rows/s | collector CPU | CPU a poll | peak RSS |",
                  "|---|---:|---:|---:|---:|---:|"]
        for name, a, b in pairs:
            if a and b:
                lines.append(
                    f"| {name} | {ratio(a['on_time_ratio'], b['on_time_ratio'], '.2f')} "
                    f"| {ratio(a['rows_per_s'], b['rows_per_s'], '.2f')} "
                    f"| {ratio(a['cpu_percent'], b['cpu_percent'], '.1f')} "
                    f"| {ratio(a['cpu_ms_per_poll'], b['cpu_ms_per_poll'], '.1f')} "
                    f"| {ratio(a['peak_rss_mb'], b['peak_rss_mb'], '.1f')} |")
    if case.get("peer"):
        notes.append(f"The Prometheus peer, at the end of the case: `{case['peer']}`")
    lines += [""] + [f"Note: {n}" for n in notes]
    return lines


def render_stream_case(case: dict) -> list[str]:
    lines = [f"### {case['title']}", "", f"Setup: {case['setup']}.", "",
             "| collector, store | rows/s (expected) | port and node seconds as expected "
             "| lines printed (whole run) | lines read (whole run) | collector CPU (% of a core) "
             f"| peak RSS (MB) | simulator CPU (%) | others on core {COLLECTOR_CORE} (%) "
             "| collector waited for the CPU (%) |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    notes, energy = [], []
    for r in case["runs"]:
        if "failed" in r:
            lines.append(f"| {r['label']} | " + " | ".join(["–"] * 9) + " |")
            notes.append(f"{r['label']}: {r['failed'].splitlines()[0] if r['failed'] else ''}")
            continue
        lines.append(
            f"| {r['label']} | {r['rows_per_s']:,.0f} ({r['expected_rows_per_s']:,}) "
            f"| {r['cells_as_expected']:,} of {r['cells']:,} ({r['expected_per_cell']} row"
            f"{'s' if r['expected_per_cell'] > 1 else ''} each; {r['cells_missing']:,} without "
            f"any) | {r['lines_printed']:,} in {r['run_seconds']:.1f} s "
            f"| {cell(r['lines_read'], ',')} | {r['cpu_percent']:.1f} "
            f"| {cell(r['peak_rss_mb'], '.1f')} | {r['peer_cpu_percent']:.1f} "
            f"| {r['others_on_core_percent']:.1f} | {r['runqueue_wait_percent']:.1f} |")
        if r.get("kwatt_summary"):
            notes.append(f"{r['label']}, its own end line (whole run, warm-up included): "
                         f"`{r['kwatt_summary']}`")
        if r.get("warnings"):
            kinds = "; ".join(f"{n:,} × `{k}`" for k, n in r.get("log_kinds", [])[:3])
            notes.append(f"{r['label']}: {r['warnings']:,} warning and error lines in its log "
                         f"(whole run), most of them: {kinds}")
        notes.append(f"{r['label']}: load average {r['loadavg']} at the start of its interval")
        first, end = r["energy_window"]
        for node, e in r["energy"].items():
            energy.append(f"| {r['label']} | {node} | {end - first} | {e['rows_j']:,.3f} "
                          f"| {e['truth_j']:,.3f} | {100 * e['error']:+.5f} % |")
        energy.append(f"| {r['label']} | largest of the {r['energy_nodes']} nodes | "
                      f"{end - first} | | | ±{100 * r['energy_max_abs_error']:.5f} % |")
    lines += ["", "Energy of the nodes' stored rows over the whole seconds of the measured "
              "interval against the simulator's `--truth` over the same seconds:", "",
              "| collector, store | node | seconds | rows (J) | truth (J) | error |",
              "|---|---|---:|---:|---:|---:|"] + energy
    lines += [""] + [f"Note: {n}" for n in notes]
    return lines


def bars(results: dict) -> list[tuple[str, str, str, bool]]:
    """(bar, target, measured, met) of every case."""
    out = []
    for case in results["cases"]:
        if case.get("kind") == "stream":
            for r in case["runs"]:
                cpu = r.get("cpu_percent")
                measured = "failed" if cpu is None else f"{cpu:.1f} %"
                if r.get("promoted"):
                    out.append((f"{case['title']} into the embedded store on one core, every "
                                "node promoted: collector CPU (no target: the figure)", "–",
                                measured, None))
                    continue
                out.append((f"{case['title']} into the embedded store on one core, averaged: "
                            "collector CPU", f"≤ {case['bar_cpu_percent']:.0f} % of a core",
                            measured, cpu is not None and cpu <= case["bar_cpu_percent"]))
                error = r.get("energy_max_abs_error")
                out.append((f"{case['title']}, energy of the rows against the truth (largest "
                            "error of a node)", "within 0.1 %",
                            "failed" if error is None else f"{100 * error:.5f} %",
                            error is not None and error <= 1e-3))
            continue
        if not case.get("bar"):
            continue
        what = f", {case['bar_name']}" if case.get("bar_name") else ""
        for r in case["runs"]:
            if not r["label"].startswith("kwatt"):
                continue
            value = r.get("on_time_ratio")
            measured = "failed" if value is None else f"{100 * value:.2f} %"
            out.append((f"polls on time at {case['devices']:,} devices on one core{what}, "
                        f"{r['label']}", f"≥ {100 * BAR_ON_TIME:.0f} %", measured,
                        value is not None and value >= BAR_ON_TIME))
    return out


def render(results: dict) -> str:
    m = results["machine"]
    kwl = results["kwollect"]
    keys = {case.get("key") for case in results["cases"]}
    versions = (", ".join(f"{p} {v}" for p, v in kwl.items() if p not in ("kwollect", "Python"))
                if kwl else "")
    lines = [
        SECTION_TITLE,
        "",
        f"- Date: {results['date']}",
        f"- Machine: {m['nproc']} cores ({m['cpu_model']}), {m['mem_gib']:.1f} GiB of memory, "
        f"Linux {m['kernel']}; {results['version']}; PostgreSQL {results['postgres']}; load "
        f"average {results['loadavg_start']} at the start, {results['loadavg_end']} at the end "
        "(the machine is shared: other processes ran on both cores)",
        "- Reproduce: `make bench` (`make bench-deps` installs Kwollect), or `python3 "
        f"bench/collect_bench.py build/kwatt` (~{math.ceil(results.get('elapsed_s', 300) / 60):.0f}"
        " min; `--cases prometheus,mix,wattmetre` chooses)",
        (f"- Kwollect: PyPI `kwollect` {kwl['kwollect']} (`kwollector`, unchanged) on Python "
         f"{kwl['Python']} with {versions}, in `bench/.venv-kwollect` "
         "(bench/kwollect-requirements.txt, installed with `--no-deps`: kwollect pins "
         "psycopg2-binary 2.9.3, which has no wheel for Python 3.11, so a later one is there, "
         "for kwollector-wattmetre; kwollector does not import it). Its database setup (`kwollect-setup-db`) needs TimescaleDB, which Debian "
         "lacks: the benchmark makes the tables that script makes, as plain tables: "
         "`metrics(timestamp timestamptz, device_id text, metric_id text, value double "
         "precision, labels jsonb)` with its two indexes, and an empty `promoted_metrics"
         "(device_id, metric_id)`." if kwl else
         "- Kwollect: not installed (`make bench-deps`): its side was not run."),
        f"- Setup: the simulated devices are `kwatt_collect_peer` (bench/collect_peer.cc, C++, "
        f"one thread with epoll, HTTP/1.1 keep-alive) and, for SNMP, Debian's snmpd, pinned to "
        f"core {PEER_CORE}, with the "
        f"PostgreSQL 15 cluster of the benchmark (initdb'd afresh, Unix socket, default "
        f"settings; one database a run). Each collector runs alone, pinned to core "
        f"{COLLECTOR_CORE} (`taskset -c {COLLECTOR_CORE}`), with the same directory of metric "
        "description files (`kwatt collect --config DIR --store FILE|postgresql://...` with its "
        "defaults; `kwollector --metrics_dir DIR --db_host SOCKET_DIR --db_name DB --db_user "
        "postgres --db_password ... --log_level warning`, its 8 SQL workers by default). A run: "
        f"{results['warmup_s']:g} s of warm-up, {results['seconds']:g} s measured, "
        f"{TAIL_S:g} s more (writes in flight), then SIGTERM. Both get the limit of open files "
        f"raised to {results.get('open_files_limit', 0):,} (`ulimit -n`; kwollector keeps the "
        "limit it is given, `kwatt collect` raises its soft limit to the hard one itself).",
        "- Figures, the same for every collector, from the rows it stored: a poll is a distinct "
        "timestamp of a device's rows (every row of one request has the request's time); a "
        f"poll is on time when it is within {ON_TIME_S * 1000:.0f} ms of first + k × period, "
        "first being that device's first poll; *polls on time* are the ticks of the measured "
        "interval that have an on-time poll, over all ticks of the interval (a tick missed or "
        "polled late counts against); *polls made*: the polls timestamped in the interval over "
        "its ticks; *rows/s*: rows timestamped in the interval over its length; *median "
        "interval*: the median over devices of their mean time between polls. Collector CPU: "
        "utime + stime of its process (all threads, its children not included) from "
        "/proc/PID/stat over the interval, as "
        "% of one core, and over its polls (*CPU a poll*); PostgreSQL's (every process of the "
        "cluster) and the peers' (every process of them) the same way; peak RSS: the "
        "collector's `VmHWM` at the end of "
        "the interval, *open files* its descriptors then. *Others on core "
        f"{COLLECTOR_CORE}*: the time core {COLLECTOR_CORE} was "
        "busy (/proc/stat) less the collector's CPU; *waited for the CPU*: the time the "
        "collector's threads were runnable but not running (/proc/PID/task/*/schedstat), "
        "added up, over the interval. MB = 10^6 bytes. One run each: the noise of the shared "
        "machine is in the figures (the last two columns say how much); compare the ratios.",
    ]
    if "wattmetre" in keys:
        lines.append(
            "- The wattmeter's figures, from the stored rows of `wattmetre_power_watt`: *rows/s* "
            "as above; *port and node seconds as expected*: of every (port or node, whole "
            "second of the interval), how many hold the expected rows (1 averaged, 50 "
            "promoted), and how many none (a gap); *lines printed*: the simulator's `--truth` "
            "(`samples`, the lines it wrote in the whole run, until the collector stopped it); "
            "*lines read*: promoted, a port's rows over the whole run (one a line; the "
            "collector's own `kwatt_collect_stream_lines_total` came after this benchmark was "
            "written); the simulator's CPU as the peers' above. The "
            "energy check: a node's rows over the whole seconds of the interval, integrated "
            "(averaged: the second's mean × 1 s; promoted: each value × 20 ms, the interval its "
            "line covers), against `kwatt simulate wattmetre --fast --start FIRST --duration "
            "SECONDS --truth` for those seconds (the same deterministic model: its exact "
            "energy).")
    if "prometheus" in keys:
        lines.append(
            "- Not compared: SNMP (kwollect 1.2.0 sends to port 161 whatever the URL says, so a "
            "simulated agent on a free port cannot be its device).")
    lines.append("")
    for case in results["cases"]:
        lines += render_case(case) + [""]
    lines += ["| bar | target | measured | met |", "|---|---|---:|---|"]
    for bar, target, measured, met in bars(results):
        lines.append(f"| {bar} | {target} | {measured} | "
                     f"{'–' if met is None else 'yes' if met else 'no'} |")
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------------------------------


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("kwatt", nargs="?", default=os.path.join(ROOT, "build", "kwatt"))
    parser.add_argument("--seconds", type=float, default=60, help="measured interval of a run")
    parser.add_argument("--warmup", type=float, default=5, help="seconds before it")
    parser.add_argument("--devices", type=int, default=1000)
    parser.add_argument("--cases", default=",".join(CASE_KEYS),
                        help="the cases run, of " + ",".join(CASE_KEYS))
    parser.add_argument("--no-write", action="store_true",
                        help="do not touch BENCHMARKS.md nor bench/out/")
    parser.add_argument("--benchmarks-md", default=os.path.join(ROOT, "BENCHMARKS.md"))
    parser.add_argument("--render", metavar="JSON",
                        help="measure nothing: render the section again from the results of an "
                             "earlier run (bench/out/collect_bench.json)")
    args = parser.parse_args()
    if args.render:
        with open(args.render) as f:
            results = json.load(f)
        section = render(results)
        print(section)
        if not args.no_write:
            h.write_section(args.benchmarks_md, section, SECTION_TITLE)
        return 0
    kwatt = os.path.abspath(args.kwatt)
    peer_binary = os.path.join(os.path.dirname(kwatt), "kwatt_collect_peer")
    cases = [CASES[CASE_KEYS.index(k)] for k in args.cases.split(",") if k in CASE_KEYS]
    for path in (kwatt, peer_binary, os.path.join(os.path.dirname(kwatt), "kwatt_test_peers"),
                 "/usr/sbin/snmpd"):
        if not os.access(path, os.X_OK):
            h.log(f"no executable {path} (make build; snmpd: make deps)")
            return 2
    if shutil.which("taskset") is None or (os.cpu_count() or 1) < 2:
        h.log("needs taskset and 2 cores (the collector on core 0, the devices on core 1)")
        return 2
    # Every collector holds one connection a device: raise the soft limit of open files.
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY and (hard == resource.RLIM_INFINITY or soft < hard):
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    signal.signal(signal.SIGTERM, h.on_signal)
    signal.signal(signal.SIGHUP, h.on_signal)
    started = time.monotonic()
    tmp = tempfile.mkdtemp(prefix="kwatt_collect_bench_")
    pg = None
    try:
        kwollect = kwollect_versions()
        if kwollect is None:
            h.log(f"Kwollect is not installed in {KWOLLECT_VENV} (make bench-deps): kwatt only")
        pg = Postgres(kwatt, PEER_CORE)
        bench = Bench(args, kwatt, peer_binary, tmp, pg, kwollect)
        results = {
            "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
            "machine": h.machine_info(),
            "version": h.kwatt_version(kwatt),
            "postgres": pg.version,
            "kwollect": kwollect,
            "seconds": args.seconds,
            "warmup_s": args.warmup,
            "open_files_limit": resource.getrlimit(resource.RLIMIT_NOFILE)[0],
            "loadavg_start": h.loadavg(),
            "cases": [case(bench) for case in cases],
            "loadavg_end": h.loadavg(),
            "elapsed_s": time.monotonic() - started,
        }
    except h.BenchError as error:
        h.log(f"FAILED: {error}")
        return 1
    finally:
        stop_all()
        if pg:
            pg.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    section = render(results)
    print(section)
    if not args.no_write:
        h.publish(args.benchmarks_md, section, SECTION_TITLE, results, "collect_bench")
    h.log(f"done in {results['elapsed_s']:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
