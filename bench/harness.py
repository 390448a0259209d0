"""What every benchmark of bench/ shares (bench/*_bench.py import it as `h`).

- Logging: log() writes "[NAME] message" on stderr, NAME being the benchmark's script.
- The machine and the run: machine_info(), loadavg(), kwatt_version(), sha256_of().
- Processes: pinned() (taskset), cpu_seconds(), rss_bytes(), child_env(), and run_measured(),
  which runs a tool to its end under GNU time (wall time, CPU time, peak RSS) with a watchdog.
- Repetition: median_of() and runs_of() over the runs of a case; seconds_text() for tables.
- kwatt's servers: Server (`kwatt serve --simulate`, or `--store`), stopped even on error
  (stop_all_servers(), on_signal()); the simulated job most benchmarks query (one Lyon job over
  20 nova nodes, monitor=wattmetre_power_watt: write_jobs_file(), metrics_url(),
  window_for_rows(), expected_rows()); curl_timed() and curl_count_rows() against them.
- Publishing: publish() writes a benchmark's section of BENCHMARKS.md (write_section()) and its
  raw results as bench/out/NAME.json.

Standard library only. Importing it runs nothing.
"""

from __future__ import annotations

import datetime
import hashlib
import json
import os
import platform
import re
import signal
import statistics
import subprocess
import sys
import threading
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BENCHMARKS_HEADER = """# Benchmarks

Measured figures of kwatt, one section per benchmark. `make bench` (or `bash bench/run_all.sh
build/kwatt`) runs every benchmark of `bench/` and rewrites its section here.

Method: every benchmark is a script of `bench/` built on `bench/harness.py`, the one place for
timing (a tool run to its end under GNU time: wall time, CPU time, peak RSS), repetition (the
median of N runs), ratios, logging, starting kwatt's servers and writing these sections. Each
section says what it ran, on what machine, under what load, and how to reproduce it.
"""
# The benchmark running: its script's name, without .py.
NAME = os.path.splitext(os.path.basename(sys.argv[0] or "bench"))[0]

# The simulated job: one Lyon job over 20 nova nodes, whose wattmeters report 50 rows/s each.
SITE = "lyon"
NODES = ["nova-1"] + [f"nova-{i}" for i in range(4, 20)] + [f"nova-{i}" for i in range(21, 24)]
METRIC = "wattmetre_power_watt"
ROWS_PER_SECOND_PER_NODE = 50  # monitor=wattmetre: one row per 20 ms
JOB_START = "2025-04-18T12:00:00+02:00"
JOB_START_EPOCH = int(datetime.datetime.fromisoformat(JOB_START).timestamp())
JOB_SECONDS = 6 * 3600

CURL_MAX_TIME = 600  # seconds: no transfer may hang the benchmark
SERVER_START_TIMEOUT = 60


class BenchError(Exception):
    pass


def log(msg: str) -> None:
    print(f"[{NAME}] {msg}", file=sys.stderr, flush=True)


# ---------------------------------------------------------------------------------------------
# Repetition


def runs_of(runs: list[dict], key: str) -> list:
    """The values of `key` over the runs, in run order."""
    return [r[key] for r in runs]


def median_of(runs: list[dict], key: str) -> float:
    """The median of `key` over the runs."""
    return statistics.median(r[key] for r in runs)


def seconds_text(x: float) -> str:
    """Seconds for a table: 3 decimals under 10 s, 2 above."""
    return f"{x:.3f}" if x < 10 else f"{x:.2f}"


# ---------------------------------------------------------------------------------------------
# The simulated job and its queries


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


def write_section(path: str, section: str, title: str) -> None:
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
# Queries through curl


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


# ---------------------------------------------------------------------------------------------
# The machine and the report


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
