#!/usr/bin/env python3
"""Benchmark of `kwatt serve --simulate`: metrics throughput on one core, and peak memory.

Usage: python3 bench/server_bench.py [KWATT_BINARY] [--repeats N] [--no-write]

What it does (standard library only, plus `curl` and `taskset`):
  1. writes a jobs file: one Lyon job over the 20 nova nodes, of type
     monitor=wattmetre_power_watt (each node's wattmeter then reports 50 rows/s), 6 h long,
     one busy phase;
  2. starts the server pinned to core 0 (`taskset -c 0`) with that file;
  3. throughput: `curl -s URL -o /dev/null`, pinned to core 1, for ~1 M and ~10 M rows of
     wattmetre_power_watt over the 20 nodes (20 nodes x 50 rows/s = 1000 rows/s, so windows of
     1000 s and 10000 s); the rows are counted exactly in a separate, untimed run; the timed runs
     take curl's own transfer time (time_total); median of N runs (default 3);
  4. memory: the server's peak RSS (VmHWM), a fresh server per case, for a 10-row answer and for a
     10 M-row answer;
  5. prints a markdown table and writes the section "## Server (`kwatt serve --simulate`)" of
     BENCHMARKS.md (the other sections are kept), and bench/out/server_bench.json.

Every server started is stopped (SIGTERM, then SIGKILL), even on error; temp files are removed.
MB means 10^6 bytes throughout.
"""

from __future__ import annotations

import argparse
import datetime
import hashlib
import json
import os
import platform
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SECTION_TITLE = "## Server (`kwatt serve --simulate`)"
BENCHMARKS_HEADER = """# Benchmarks

Measured figures of kwatt, one section per benchmark. `make bench` (or `bash bench/run_all.sh
build/kwatt`) runs every benchmark of `bench/` and rewrites its section here.
"""

SITE = "lyon"
NODES = ["nova-1"] + [f"nova-{i}" for i in range(4, 20)] + [f"nova-{i}" for i in range(21, 24)]
METRIC = "wattmetre_power_watt"
ROWS_PER_SECOND_PER_NODE = 50  # monitor=wattmetre: one row per 20 ms
JOB_START = "2025-04-18T12:00:00+02:00"
JOB_START_EPOCH = int(datetime.datetime.fromisoformat(JOB_START).timestamp())
JOB_SECONDS = 6 * 3600

# The bars of the issue.
BAR_ROWS_PER_S = 1_000_000
BAR_MEMORY_MB = 50.0

SERVER_CORE = 0
CLIENT_CORE = 1
CURL_MAX_TIME = 600  # seconds: no transfer may hang the benchmark
SERVER_START_TIMEOUT = 60


class BenchError(Exception):
    pass


def log(msg: str) -> None:
    print(f"[server_bench] {msg}", file=sys.stderr, flush=True)


# ---------------------------------------------------------------------------------------------
# Queries


def metrics_url(base: str, nodes: list[str], start: int, end: int) -> str:
    return (f"{base}/sites/{SITE}/metrics?nodes={','.join(nodes)}"
            f"&start_time={start}&end_time={end}&metrics={METRIC}")


def window_for_rows(rows: int) -> int:
    """Seconds of window that give about `rows` rows over the 20 nodes."""
    return max(1, round(rows / (len(NODES) * ROWS_PER_SECOND_PER_NODE)))


def expected_rows(nodes: int, window_s: int) -> int:
    # start_time and end_time are both inclusive: 50 rows/s plus the row at end_time.
    return nodes * (ROWS_PER_SECOND_PER_NODE * window_s + 1)


# ---------------------------------------------------------------------------------------------
# Processes


def pinned(core: int | None, argv: list[str]) -> list[str]:
    return argv if core is None else ["taskset", "-c", str(core)] + argv


class Server:
    """One `kwatt serve --simulate` process, pinned to `core` (None: not pinned), with more
    options in `extra_args` (--rows-per-second...); always stopped by stop() / the with block."""

    def __init__(self, binary: str, jobs_file: str, tmpdir: str, core: int | None, name: str,
                 extra_args: list[str] | None = None, store: str | None = None):
        self.binary = binary
        self.jobs_file = jobs_file
        self.store = store  # serve this store (`--store`) instead of the simulated testbed
        self.core = core
        self.extra_args = list(extra_args or [])
        self.out_path = os.path.join(tmpdir, f"{name}.stdout")
        self.err_path = os.path.join(tmpdir, f"{name}.stderr")
        self.proc: subprocess.Popen | None = None
        self.base_url = ""

    def __enter__(self) -> "Server":
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def start(self) -> None:
        source = (["--store", self.store] if self.store else
                  ["--simulate", "--jobs", self.jobs_file, "--seed", "1"])
        argv = pinned(self.core, [self.binary, "serve", *source, "--port", "0"] + self.extra_args)
        with open(self.out_path, "wb") as out, open(self.err_path, "wb") as err:
            # taskset execs the server: the pid is the server's.
            self.proc = subprocess.Popen(argv, stdout=out, stderr=err, stdin=subprocess.DEVNULL)
        _RUNNING.add(self)
        deadline = time.monotonic() + SERVER_START_TIMEOUT
        while time.monotonic() < deadline:
            with open(self.out_path, "rb") as f:
                first = f.readline()
            if first.endswith(b"\n"):
                self.base_url = first.decode().strip()
                break
            if self.proc.poll() is not None:
                raise BenchError(f"server exited with {self.proc.returncode}: {self.stderr()}")
            time.sleep(0.05)
        else:
            raise BenchError(f"server printed no URL in {SERVER_START_TIMEOUT} s: {self.stderr()}")
        if not self.base_url.startswith("http"):
            raise BenchError(f"unexpected first line of the server: {self.base_url!r}")
        # Ready: the sites list answers.
        with urllib.request.urlopen(f"{self.base_url}/sites", timeout=30) as r:
            r.read()

    def stderr(self) -> str:
        try:
            with open(self.err_path, errors="replace") as f:
                return f.read()[-2000:]
        except OSError:
            return ""

    def status_kb(self, field: str) -> int:
        with open(f"/proc/{self.proc.pid}/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
        raise BenchError(f"no {field} in /proc/{self.proc.pid}/status")

    def peak_rss_mb(self) -> float:
        return self.status_kb("VmHWM") * 1024 / 1e6

    def rss_mb(self) -> float:
        return self.status_kb("VmRSS") * 1024 / 1e6

    def cpu_seconds(self) -> float:
        return cpu_seconds(self.proc.pid)

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self) -> None:
        if self.proc is None:
            return
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                log(f"server {self.proc.pid} ignored SIGTERM for 10 s: SIGKILL")
                self.proc.kill()
                self.proc.wait()
        _RUNNING.discard(self)


_RUNNING: set[Server] = set()


def stop_all_servers() -> None:
    for server in list(_RUNNING):
        server.stop()


def on_signal(signum, _frame):
    raise SystemExit(128 + signum)


# ---------------------------------------------------------------------------------------------
# Measurements


def curl_timed(url: str, client_core: int | None) -> dict:
    """One `curl -s URL -o /dev/null`, pinned; curl's own transfer time and byte count."""
    argv = pinned(client_core, ["curl", "-s", "--max-time", str(CURL_MAX_TIME), url,
                                "-o", "/dev/null",
                                "-w", "%{http_code} %{size_download} %{time_total}"])
    t0 = time.perf_counter()
    res = subprocess.run(argv, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if res.returncode != 0:
        raise BenchError(f"curl exited with {res.returncode} on {url}: {res.stderr}")
    code, size, total = res.stdout.split()
    if code != "200":
        raise BenchError(f"HTTP {code} on {url}")
    return {"bytes": int(size), "seconds": float(total), "wall_seconds": wall}


def curl_count_rows(url: str, client_core: int | None) -> tuple[int, int]:
    """Streams the answer through curl and counts its rows exactly (untimed)."""
    needle = b'{"timestamp"'
    keep = len(needle) - 1
    rows = 0
    size = 0
    tail = b""
    first = b""
    last = b""
    argv = pinned(client_core, ["curl", "-s", "--fail", "--max-time", str(CURL_MAX_TIME), url])
    with subprocess.Popen(argv, stdout=subprocess.PIPE) as proc:
        while True:
            chunk = proc.stdout.read(1 << 20)
            if not chunk:
                break
            if not first:
                first = chunk[:1]
            size += len(chunk)
            buf = tail + chunk
            rows += buf.count(needle)
            # Keep the last bytes that cannot hold a whole needle: a match that straddles two
            # chunks is counted once, with the next chunk.
            tail = buf[-keep:]
            last = chunk.rstrip()[-1:] or last
    if proc.returncode != 0:
        raise BenchError(f"curl exited with {proc.returncode} on {url}")
    if first != b"[" or last != b"]":
        raise BenchError(f"answer of {url} is not a JSON array (starts {first!r}, ends {last!r})")
    return rows, size


def throughput_case(server: Server, label: str, target_rows: int, repeats: int,
                    client_core: int | None) -> dict:
    window = window_for_rows(target_rows)
    url = metrics_url(server.base_url, NODES, JOB_START_EPOCH, JOB_START_EPOCH + window)
    log(f"{label}: counting rows ({window} s window, 20 nodes)")
    rows, size = curl_count_rows(url, client_core)
    want = expected_rows(len(NODES), window)
    if rows != want:
        log(f"WARNING: {label}: {rows} rows, expected {want} from 50 rows/s/node")
    runs = []
    for i in range(repeats):
        cpu0 = server.cpu_seconds()
        run = curl_timed(url, client_core)
        run["server_cpu_seconds"] = server.cpu_seconds() - cpu0
        if run["bytes"] != size:
            raise BenchError(f"{label}: run {i + 1} got {run['bytes']} bytes, the counting run "
                             f"{size}: the answer is not deterministic")
        runs.append(run)
        log(f"{label}: run {i + 1}/{repeats}: {run['seconds']:.3f} s, "
            f"{rows / run['seconds'] / 1e6:.2f} M rows/s, {size / run['seconds'] / 1e6:.0f} MB/s, "
            f"server CPU {run['server_cpu_seconds']:.2f} s")
    seconds = statistics.median(r["seconds"] for r in runs)
    return {
        "label": label, "window_s": window, "rows": rows, "bytes": size,
        "runs_seconds": [r["seconds"] for r in runs],
        "median_seconds": seconds,
        "rows_per_s": rows / seconds,
        "mb_per_s": size / seconds / 1e6,
        "server_cpu_seconds_median": statistics.median(r["server_cpu_seconds"] for r in runs),
        "bytes_per_row": size / rows if rows else 0,
    }


def memory_case(binary: str, jobs_file: str, tmpdir: str, label: str, nodes: list[str],
                window: int, server_core: int | None, client_core: int | None) -> dict:
    """A fresh server, one query: its peak RSS before and after."""
    with Server(binary, jobs_file, tmpdir, server_core, f"mem-{label}") as server:
        idle = server.peak_rss_mb()
        url = metrics_url(server.base_url, nodes, JOB_START_EPOCH, JOB_START_EPOCH + window)
        log(f"memory, {label}: fresh server, peak RSS at start {idle:.1f} MB")
        rows, size = curl_count_rows(url, client_core)  # untimed: only the memory matters
        if not server.alive():
            raise BenchError(f"server died during the {label} query: {server.stderr()}")
        peak = server.peak_rss_mb()
        rss = server.rss_mb()
        log(f"memory, {label}: {size} bytes; peak RSS {peak:.1f} MB, RSS after {rss:.1f} MB")
    return {"label": label, "rows": rows, "bytes": size,
            "peak_rss_at_start_mb": idle, "peak_rss_mb": peak, "rss_after_mb": rss}


# ---------------------------------------------------------------------------------------------
# Report


def machine_info() -> dict:
    model = "unknown"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    mem_gib = None
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemTotal:"):
                    mem_gib = int(line.split()[1]) / (1024 * 1024)
    except OSError:
        pass
    return {"nproc": os.cpu_count(), "cpu_model": model, "mem_gib": mem_gib,
            "kernel": platform.release()}


def loadavg() -> str:
    try:
        with open("/proc/loadavg") as f:
            return " ".join(f.read().split()[:3])
    except OSError:
        return "unknown"


def kwatt_version(binary: str) -> str:
    try:
        return subprocess.run([binary, "--version"], capture_output=True, text=True,
                              timeout=10).stdout.strip() or "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def render(results: dict) -> str:
    m = results["machine"]
    tp = results["throughput"]
    mem = results["memory"]
    small, big = mem["small"], mem["large"]
    diff = big["peak_rss_mb"] - small["peak_rss_mb"]
    best_tp = min(c["rows_per_s"] for c in tp)
    lines = [
        SECTION_TITLE,
        "",
        f"- Date: {results['date']}",
        f"- Machine: {m['nproc']} cores ({m['cpu_model']}), "
        f"{m['mem_gib']:.1f} GiB of memory, Linux {m['kernel']}; {results['version']}; "
        f"load average {results['loadavg_start']} at the start",
        f"- Reproduce: `make bench`, or `python3 bench/server_bench.py build/kwatt`",
        f"- Setup: server pinned to core {results['server_core']} (`taskset -c "
        f"{results['server_core']}`), `curl -s URL -o /dev/null` pinned to core "
        f"{results['client_core']}; one Lyon job over the 20 nova nodes of type "
        f"`monitor={METRIC}` (50 rows/s/node); `metrics={METRIC}`, all 20 nodes; "
        f"time = curl's transfer time, median of {results['repeats']} runs; rows counted "
        f"exactly in a separate run. Memory: peak RSS (`VmHWM`) of a fresh server per case. "
        f"MB = 10^6 bytes.",
        "",
        "| case | rows | answer (MB) | time (s, median) | rows/s | MB/s | server CPU (s) |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for c in tp:
        lines.append(
            f"| {c['label']} ({c['window_s']} s window) | {c['rows']:,} | {c['bytes'] / 1e6:,.1f} "
            f"| {c['median_seconds']:.3f} | {c['rows_per_s']:,.0f} | {c['mb_per_s']:,.0f} "
            f"| {c['server_cpu_seconds_median']:.2f} |")
    lines += [
        "",
        "| memory case | rows | answer (MB) | peak RSS at start (MB) | peak RSS (MB) |",
        "|---|---:|---:|---:|---:|",
    ]
    for c in (small, big):
        lines.append(f"| {c['label']} | {c['rows']:,} | {c['bytes'] / 1e6:,.1f} "
                     f"| {c['peak_rss_at_start_mb']:.1f} | {c['peak_rss_mb']:.1f} |")
    busy = [c for c in tp if c["server_cpu_seconds_median"] < 0.9 * c["median_seconds"]]
    if busy:
        lines += ["", "Note: the server got less than 90 % of its core during "
                  + ", ".join(c["label"] for c in busy)
                  + " (server CPU time < 0.9 × wall time: another process shared core "
                  f"{results['server_core']}; load average {results['loadavg_start']} at the "
                  f"start, {results['loadavg_end']} at the end): its rates are lower bounds."]
    tp_ratio = best_tp / BAR_ROWS_PER_S
    mem_ratio = diff / BAR_MEMORY_MB
    lines += [
        "",
        "| bar | target | measured | ratio | met |",
        "|---|---:|---:|---:|---|",
        f"| throughput on one core (lower of the two sizes) | ≥ {BAR_ROWS_PER_S:,} rows/s "
        f"| {best_tp:,.0f} rows/s | {tp_ratio:.2f}× the bar | {'yes' if tp_ratio >= 1 else 'no'} |",
        f"| peak memory, 10 M rows minus 10 rows | ≤ {BAR_MEMORY_MB:.0f} MB | {diff:+.1f} MB "
        f"| {mem_ratio:.2f} of the allowance | {'yes' if diff <= BAR_MEMORY_MB else 'no'} |",
        "",
    ]
    return "\n".join(lines)


# Helpers of the other benchmarks (fetch_bench, backup_bench), which import this module.

def rss_bytes(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def child_of(pid: int) -> int | None:
    """The (only) child of `pid`: the tool run by /usr/bin/time."""
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            kids = f.read().split()
        return int(kids[0]) if kids else None
    except (OSError, ValueError):
        return None


def child_env(home: str) -> dict:
    """The environment of every tool: HOME is the temp dir holding `uri: URL` only."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("KWATT_")}
    env["HOME"] = home
    return env


def sha256_of(path: str) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def write_section(path: str, section: str, title: str = SECTION_TITLE) -> None:
    """Replaces (or appends) the section `title` of BENCHMARKS.md at `path` with `section`."""
    text = ""
    if os.path.exists(path):
        with open(path) as f:
            text = f.read()
    if not text.strip():
        text = BENCHMARKS_HEADER
    # The section runs from its title to the next level-2 title (or the end).
    pattern = re.compile(r"^" + re.escape(title) + r"[ \t]*\n.*?(?=^## |\Z)",
                         re.MULTILINE | re.DOTALL)
    body = section.rstrip("\n") + "\n"
    if pattern.search(text):
        text = pattern.sub(lambda _: body + "\n", text, count=1)
        text = text.rstrip("\n") + "\n"
    else:
        text = text.rstrip("\n") + "\n\n" + body
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, path)


def cpu_seconds(pid: int) -> float:
    """utime + stime of a process (all its threads), from /proc/PID/stat."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


TIME = "/usr/bin/time"  # GNU time


def run_measured(argv: list[str], env: dict, tmpdir: str, name: str,
                 mem_limit: int | None = None, timeout_s: float | None = None) -> dict:
    """Runs argv to its end under GNU time: wall time, CPU time and peak RSS of the tool.

    The peak is GNU time's %M (ru_maxrss of its child). Not os.wait4 on a child of this
    process: ru_maxrss would include the pages of this Python process, which the child shares
    until it calls exec. A watchdog kills the tool (SIGKILL) when its RSS passes mem_limit bytes
    or it runs past timeout_s; the result then says so ("killed") with what it reached."""
    out_path = os.path.join(tmpdir, f"{name}.stdout")
    err_path = os.path.join(tmpdir, f"{name}.stderr")
    time_path = os.path.join(tmpdir, f"{name}.time")
    os.sync()  # no dirty page of an earlier run is written back during this one
    killed: list[str] = []
    watch_peak = [0]
    with open(out_path, "wb") as out, open(err_path, "wb") as err:
        t0 = time.perf_counter()
        proc = subprocess.Popen([TIME, "-f", "%e %M %U %S", "-o", time_path, "--"] + argv,
                                stdout=out, stderr=err, stdin=subprocess.DEVNULL, env=env)
    done = threading.Event()

    def watchdog():
        tool = None
        while not done.wait(0.05):
            tool = tool or child_of(proc.pid)
            if tool is None:
                continue
            rss = rss_bytes(tool)
            watch_peak[0] = max(watch_peak[0], rss)
            elapsed = time.perf_counter() - t0
            reason = None
            if mem_limit is not None and rss > mem_limit:
                reason = f"RSS {rss / 1e9:.1f} GB > limit {mem_limit / 1e9:.1f} GB"
            elif timeout_s is not None and elapsed > timeout_s:
                reason = f"still running after {timeout_s:.0f} s"
            if reason:
                killed.append(f"{reason}, after {elapsed:.0f} s")
                try:
                    os.kill(tool, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                return

    watcher = threading.Thread(target=watchdog, daemon=True)
    if mem_limit is not None or timeout_s is not None:
        watcher.start()
    try:
        proc.wait()
    except BaseException:
        tool = child_of(proc.pid)
        if tool:
            os.kill(tool, signal.SIGKILL)
        proc.kill()
        proc.wait()
        raise
    wall = time.perf_counter() - t0
    done.set()
    if watcher.is_alive():
        watcher.join()
    with open(out_path, "rb") as f:
        stdout = f.read(1 << 20).decode(errors="replace")
    with open(err_path, "rb") as f:
        stderr = f.read()[-4000:].decode(errors="replace")
    with open(time_path) as f:
        timing = f.read().strip().splitlines()
    for path in (out_path, err_path, time_path):
        os.unlink(path)
    try:
        _, peak_kb, user_s, sys_s = timing[-1].split()
    except (IndexError, ValueError):
        raise BenchError(f"unreadable output of {TIME}: {timing!r}")
    return {
        "wall_s": wall,
        "cpu_s": float(user_s) + float(sys_s),
        "peak_mb": max(int(peak_kb) * 1024, watch_peak[0]) / 1e6,
        "returncode": proc.returncode,
        "killed": killed[0] if killed else None,
        "stdout": stdout,
        "stderr": stderr,
    }


def publish(benchmarks_md: str, section: str, title: str, results: dict, name: str) -> None:
    """Writes `section` as the section `title` of BENCHMARKS.md and the raw `results` as
    bench/out/NAME.json."""
    write_section(benchmarks_md, section, title)
    out_dir = os.path.join(ROOT, "bench", "out")
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, f"{name}.json"), "w") as f:
        json.dump(results, f, indent=1)
    log(f"wrote the section of {benchmarks_md} and bench/out/{name}.json")


# ---------------------------------------------------------------------------------------------


def write_jobs_file(path: str) -> None:
    jobs = {"jobs": [{
        "site": SITE,
        "uid": 4242,
        "user": "bench",
        "name": "server-bench",
        "nodes": NODES,
        "started_at": JOB_START,
        "stopped_at": JOB_START_EPOCH + JOB_SECONDS,
        "types": [f"monitor={METRIC}"],
        "phases": [{"name": "busy", "duration": JOB_SECONDS, "cpu": 1.0, "network": 0.2}],
    }]}
    with open(path, "w") as f:
        json.dump(jobs, f, indent=1)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("binary", nargs="?", default=os.path.join(ROOT, "build", "kwatt"),
                    help="the kwatt binary (default: build/kwatt)")
    ap.add_argument("--repeats", type=int, default=3, help="timed runs per size (median kept)")
    ap.add_argument("--sizes", default="1000000,10000000",
                    help="rows of the throughput queries, comma-separated")
    ap.add_argument("--no-write", action="store_true",
                    help="do not touch BENCHMARKS.md nor bench/out/")
    ap.add_argument("--benchmarks-md", default=os.path.join(ROOT, "BENCHMARKS.md"))
    args = ap.parse_args()

    binary = os.path.abspath(args.binary)
    if not os.access(binary, os.X_OK):
        log(f"no executable kwatt at {binary} (build it with `make build`)")
        return 2
    for tool in ("curl", "taskset"):
        if shutil.which(tool) is None:
            log(f"`{tool}` is missing (apt-get install curl util-linux)")
            return 2
    ncpu = os.cpu_count() or 1
    server_core, client_core = SERVER_CORE, CLIENT_CORE
    if ncpu < 2:
        log("only one core: server and curl share core 0")
        client_core = SERVER_CORE
    sizes = [int(s) for s in args.sizes.split(",") if s]
    if window_for_rows(max(sizes)) > JOB_SECONDS:
        log(f"the job lasts {JOB_SECONDS} s: at most {JOB_SECONDS * 1000:,} rows")
        return 2

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGHUP, on_signal)
    t_start = time.monotonic()
    tmpdir = tempfile.mkdtemp(prefix="kwatt-server-bench-")
    try:
        jobs_file = os.path.join(tmpdir, "jobs.json")
        write_jobs_file(jobs_file)

        results: dict = {
            "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
            "machine": machine_info(),
            "version": kwatt_version(binary),
            "binary": binary,
            "repeats": args.repeats,
            "server_core": server_core,
            "client_core": client_core,
            "loadavg_start": loadavg(),
        }

        # Throughput, on one server.
        with Server(binary, jobs_file, tmpdir, server_core, "throughput") as server:
            results["throughput"] = [
                throughput_case(server, f"{n / 1e6:g} M rows", n, args.repeats, client_core)
                for n in sizes]
            results["throughput_server_peak_rss_mb"] = server.peak_rss_mb()

        # Memory, a fresh server per case: 10 rows (10 nodes, one instant), then 10 M rows.
        big_window = window_for_rows(10_000_000)
        results["memory"] = {
            "small": memory_case(binary, jobs_file, tmpdir, "10 rows", NODES[:10], 0,
                                 server_core, client_core),
            "large": memory_case(binary, jobs_file, tmpdir, "10 M rows", NODES, big_window,
                                 server_core, client_core),
        }
        large = results["memory"]["large"]
        for c in results["throughput"]:
            if c["window_s"] == big_window and c["bytes"] != large["bytes"]:
                raise BenchError("the 10 M-row answer differs between two servers")

        results["loadavg_end"] = loadavg()
        results["elapsed_s"] = time.monotonic() - t_start
        section = render(results)
        print(section)
        if not args.no_write:
            publish(args.benchmarks_md, section, SECTION_TITLE, results, "server_bench")
        log(f"done in {results['elapsed_s']:.0f} s")
        return 0
    except BenchError as e:
        log(f"FAILED: {e}")
        return 1
    finally:
        stop_all_servers()
        shutil.rmtree(tmpdir, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
