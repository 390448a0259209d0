#!/usr/bin/env python3
"""Benchmark of `kwatt fetch` against EnOSlib's Kwollect service, python-grid5000 and curl.

Usage: python3 bench/fetch_bench.py [KWATT_BINARY] [--repeats N] [--sizes N,N,...]
                                    [--cases single,four] [--no-python] [--no-write]
       python3 bench/fetch_bench.py --render bench/out/fetch_bench.json  (the section again)

What it does (the standard library, `curl`, GNU `time` (/usr/bin/time), and the project's
.venv for EnOSlib and python-grid5000):
  1. one site: a `kwatt serve --simulate` with harness.py's jobs file (one Lyon job over the
     20 nova nodes, type monitor=wattmetre_power_watt: 50 rows/s/node, 1000 rows/s in all);
     for ~100 k, ~1 M and ~10 M rows (windows of 100, 1000 and 10000 s), metric
     wattmetre_power_watt, it times, on the same data:
       - `kwatt fetch --nodes ... --start --end -o FILE` (JSON Lines to a file), and for
         information `kwatt fetch --job lyon:4242 --start --end` (the same rows);
       - `curl -s URL -o FILE`: the same rows in one request (one per site, as EnOSlib);
       - EnOSlib's Kwollect service (`get_metrics`) and python-grid5000's `metrics.list`, each in
         a fresh interpreter whose HOME holds `.python-grid5000.yaml` with `uri: URL`;
     each tool runs as a child process under /usr/bin/time: wall time, CPU time, peak RSS;
     for the Python tools the time is the call itself, from the child's clock (the interpreter,
     the imports and the freeing at exit left out). Rows are counted for every tool and compared
     with curl's count. Median of N runs (default 3); the Python tools run once above 1 M rows;
  2. four sites: a server paced at 150,000 rows/s per answer (`--rows-per-second`, a database's
     speed), one monitor=wattmetre job per site (lyon 20 nova, nancy 20 gros, grenoble 4 yeti
     (2-PSU), rennes 10 paradoxe at 100 Hz), one window in which each site has ~1 M rows;
     `kwatt fetch` of each site alone and of the 4 sites in one call; EnOSlib once, for context;
  3. prints a markdown section and writes "## Fetch (`kwatt fetch`)" of BENCHMARKS.md (the other
     sections are kept), and bench/out/fetch_bench.json.

A Python tool that would grow past --mem-limit-gb (default 18, lowered to leave 1.5 GB of the
memory available when it starts) or run past --tool-timeout (900 s) is killed (SIGKILL) and
recorded as such, with the time and memory reached: lower bounds.
Every server started is stopped (SIGTERM, then SIGKILL), even on error; temp files are removed.
MB means 10^6 bytes throughout.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

import harness as h

ROOT = h.ROOT
SECTION_TITLE = "## Fetch (`kwatt fetch`)"

SITE = h.SITE
NODES = h.NODES
METRIC = h.METRIC
T0 = h.JOB_START_EPOCH
MAIN_JOB_UID = 4242  # the job of harness.write_jobs_file

# The four-site case: site, cluster, node uids, rows/s/node under monitor=wattmetre, job uid.
FOUR_SITES = [
    ("lyon", "nova", NODES, 50, 5001),
    ("nancy", "gros", [f"gros-{i}" for i in range(41, 61)], 50, 5002),
    ("grenoble", "yeti", [f"yeti-{i}" for i in range(1, 5)], 50, 5003),
    ("rennes", "paradoxe", [f"paradoxe-{i}" for i in range(1, 11)], 100, 5004),
]
FOUR_SITES_ROWS = 1_000_000      # per site, about
PACED_ROWS_PER_SECOND = 150_000  # per answer
FOUR_SITES_SERVER_THREADS = 32

# The bars of the issue.
BAR_SPEEDUP_VS_ENOSLIB = 20.0
BAR_VS_CURL = 2.0
BAR_MEMORY_FRACTION = 1 / 20
BAR_FOUR_SITES = 1.3

# kwatt fetch's defaults (--rows-per-request, --concurrency, --per-site), for the notes.
KWATT_BUDGET = 50_000
KWATT_CONCURRENCY = 12
KWATT_PER_SITE = 3

PY_REPEAT_MAX_ROWS = 1_000_000  # Python tools are repeated up to this size, run once above
MEM_HEADROOM_BYTES = int(1.5e9)


BenchError = h.BenchError  # what h.Server raises too


# ---------------------------------------------------------------------------------------------
# Servers



# ---------------------------------------------------------------------------------------------
# Running one tool as a measured child process


def mem_available_bytes() -> int:
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    return 0


def write_probe(tmpdir: str, megabytes: int = 1600) -> list[float]:
    """Seconds to write `megabytes` of zeros to a new file (dd), twice, the file deleted in
    between: on a VM whose memory the host backs lazily, the first write can cost several times
    the second (fresh pages faulted in by the host); every tool's output file pays that cost."""
    times = []
    path = os.path.join(tmpdir, "probe.bin")
    for _ in range(2):
        os.sync()
        t0 = time.perf_counter()
        subprocess.run(["dd", "if=/dev/zero", f"of={path}", "bs=1M", f"count={megabytes}",
                        "status=none"], check=True)
        times.append(time.perf_counter() - t0)
        remove(path)
    return times


def count_lines(path: str) -> tuple[int, int]:
    lines = size = 0
    with open(path, "rb") as f:
        while chunk := f.read(8 << 20):
            lines += chunk.count(b"\n")
            size += len(chunk)
    return lines, size


def count_rows_in_array(path: str) -> tuple[int, int]:
    """Rows of a Kwollect answer saved by curl: occurrences of '{"timestamp"'."""
    needle = b'{"timestamp"'
    keep = len(needle) - 1
    rows = size = 0
    tail = first = last = b""
    with open(path, "rb") as f:
        while chunk := f.read(8 << 20):
            first = first or chunk[:1]
            size += len(chunk)
            buf = tail + chunk
            rows += buf.count(needle)
            tail = buf[-keep:]
            last = chunk.rstrip()[-1:] or last
    if first != b"[" or last != b"]":
        raise BenchError(f"{path} is not a JSON array (starts {first!r}, ends {last!r})")
    return rows, size


def remove(path: str) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


# ---------------------------------------------------------------------------------------------
# The tools


class Tools:
    def __init__(self, binary: str, python: str, tmpdir: str, mem_limit: int, timeout_s: float):
        self.binary = binary
        self.python = python
        self.tmpdir = tmpdir
        self.mem_limit = mem_limit
        self.timeout_s = timeout_s
        self.home = ""
        self.base_url = ""
        self.server: h.Server | None = None
        self.server_name = ""
        self.n = 0
        self.restarts: list[str] = []

    def use_server(self, server: h.Server, name: str) -> None:
        """A HOME whose .python-grid5000.yaml points at `server` (uri only, no credentials)."""
        self.server, self.server_name = server, name
        self.base_url = server.base_url
        self.home = os.path.join(self.tmpdir, f"home-{name}")
        os.makedirs(self.home, exist_ok=True)
        config = os.path.join(self.home, ".python-grid5000.yaml")
        with open(config, "w") as f:
            f.write(f"uri: {server.base_url}\n")
        os.chmod(config, 0o600)

    def attempt(self, what: str, fn):
        """fn(), run again (twice at most) when it fails, or when the server died meanwhile:
        something outside the benchmark (a `pkill kwatt` of a colleague) can stop a server or
        a tool; the server is then started again, on a new port."""
        for tries in range(3):
            error = None
            try:
                run = fn()
            except BenchError as e:
                error = str(e)
            dead = self.server is not None and not self.server.alive()
            if error is None and not dead:
                return run
            if tries == 2:
                raise BenchError(f"{what}: {error or 'the server died during the run'}")
            note = f"{what}: {(error or 'ran while the server died')[:300]}"
            if dead:
                note += f" (server exited with {self.server.proc.returncode}: restarted)"
                self.server.stop()
                self.server.start()
                self.use_server(self.server, self.server_name)
            h.log(f"WARNING: {note}; running it again")
            self.restarts.append(note)
        raise AssertionError("unreachable")

    def _name(self, tool: str) -> str:
        self.n += 1
        return f"{tool}-{self.n}"

    def kwatt(self, args: list[str]) -> dict:
        """`kwatt fetch ARGS -o FILE` (no --quiet: its summary line gives the request count)."""
        name = self._name("kwatt")
        out = os.path.join(self.tmpdir, f"{name}.jsonl")
        argv = [self.binary, "fetch", "--api", self.base_url] + args + [
            "--metrics", METRIC, "-o", out]
        try:
            run = h.run_measured(argv, h.child_env(self.home), self.tmpdir, name,
                               timeout_s=self.timeout_s)
            if run["returncode"] != 0:
                last = (run["stderr"].strip().splitlines() or ["?"])[-1]
                raise BenchError(f"kwatt fetch exited {run['returncode']}: {last[:200]}")
            run["rows"], run["bytes"] = count_lines(out)
        finally:
            remove(out)
        m = re.search(r"\((\d+) requests, (\d+) retries, (\d+) splits\)", run["stderr"])
        run["requests"] = int(m.group(1)) if m else None
        run["splits"] = int(m.group(3)) if m else None
        return run

    def curl(self, url: str) -> dict:
        name = self._name("curl")
        out = os.path.join(self.tmpdir, f"{name}.json")
        try:
            run = h.run_measured(["curl", "-s", url, "-o", out, "-w", "%{http_code}"],
                               h.child_env(self.home), self.tmpdir, name, timeout_s=self.timeout_s)
            if run["returncode"] != 0 or run["stdout"].strip() != "200":
                raise BenchError(f"curl exited {run['returncode']}, HTTP {run['stdout']!r}")
            run["rows"], run["bytes"] = count_rows_in_array(out)
        finally:
            remove(out)
        run["requests"] = 1
        return run

    def _python(self, tool: str, code: str, args: list[str]) -> dict:
        name = self._name(tool)
        limit = min(self.mem_limit, max(0, mem_available_bytes() - MEM_HEADROOM_BYTES))
        run = h.run_measured([self.python, "-c", code] + args, h.child_env(self.home), self.tmpdir,
                           name, mem_limit=limit, timeout_s=self.timeout_s)
        run["mem_limit_mb"] = limit / 1e6
        if run["killed"]:
            h.log(f"{tool}: killed: {run['killed']} (peak RSS {run['peak_mb']:,.0f} MB)")
            run.update(rows=None, call_s=None)
            return run
        if run["returncode"] != 0:
            tail = run["stderr"].strip().splitlines()[-1:] or ["?"]
            if self.server is not None and not self.server.alive():
                raise BenchError(f"{tool} exited {run['returncode']}: {tail[0]}")
            h.log(f"{tool}: exited {run['returncode']}: {tail[0]}")
            run.update(rows=None, call_s=None, failed=tail[0][:200])
            return run
        out = json.loads(run["stdout"].strip().splitlines()[-1])
        run.update(rows=out["rows"], call_s=out["call_s"], import_s=out["import_s"],
                   per_site=out.get("per_site"))
        return run

    def enoslib(self, hosts: list[str], start: int, end: int) -> dict:
        return self._python("enoslib", ENOSLIB_CHILD, [",".join(hosts), str(start), str(end),
                                                       METRIC])

    def pg5k(self, site_nodes: dict[str, list[str]], start: int, end: int) -> dict:
        return self._python("pg5k", PG5K_CHILD, [self.base_url, json.dumps(site_nodes),
                                                 str(start), str(end), METRIC])


# The children print one JSON line, then leave without freeing their objects (os._exit): the
# measured time is the call's, as a user waiting for it sees it.
ENOSLIB_CHILD = r"""
import json, os, sys, time
t0 = time.perf_counter()
from enoslib.objects import Host
from enoslib.service.kwollect.kwollect import Kwollect
hosts = [Host(h) for h in sys.argv[1].split(",")]
start, end, metric = int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
t1 = time.perf_counter()
k = Kwollect(nodes=hosts)
k.deploy()
k.start(start_time=start)
k.stop(stop_time=end)
data = k.get_metrics(metrics=[metric])
t2 = time.perf_counter()
print(json.dumps({"rows": sum(len(v) for v in data.values()),
                  "per_site": {s: len(v) for s, v in data.items()},
                  "import_s": t1 - t0, "call_s": t2 - t1}), flush=True)
os._exit(0)
"""

PG5K_CHILD = r"""
import json, os, sys, time
t0 = time.perf_counter()
from grid5000 import Grid5000
uri, site_nodes = sys.argv[1], json.loads(sys.argv[2])
start, end, metric = int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
t1 = time.perf_counter()
gk = Grid5000(uri=uri)
kept = {}
for site, nodes in site_nodes.items():
    kept[site] = gk.sites[site].metrics.list(nodes=",".join(nodes), start_time=start,
                                             end_time=end, metrics=metric)
t2 = time.perf_counter()
print(json.dumps({"rows": sum(len(v) for v in kept.values()),
                  "per_site": {s: len(v) for s, v in kept.items()},
                  "import_s": t1 - t0, "call_s": t2 - t1}), flush=True)
os._exit(0)
"""


def tool_seconds(run: dict) -> float | None:
    """The time that counts: the call for the Python tools, the process for the others."""
    return run.get("call_s") if "call_s" in run else run["wall_s"]


def summarize(runs: list[dict]) -> dict:
    """Median time, peak RSS (the largest of the runs), rows (all runs must agree)."""
    ok = [r for r in runs if not r.get("killed") and r.get("rows") is not None]
    out = {
        "runs": len(runs),
        "runs_s": [tool_seconds(r) for r in runs],
        "wall_s": [r["wall_s"] for r in runs],
        "cpu_s": [r["cpu_s"] for r in runs],
        "peak_mb": max(r["peak_mb"] for r in runs),
        "killed": next((r["killed"] for r in runs if r.get("killed")), None),
        "failed": next((r["failed"] for r in runs if r.get("failed")), None),
        "requests": runs[0].get("requests"),
        "mem_limit_mb": runs[0].get("mem_limit_mb"),
    }
    if ok:
        rows = {r["rows"] for r in ok}
        out["rows"] = rows.pop() if len(rows) == 1 else sorted(rows)
        out["seconds"] = statistics.median(tool_seconds(r) for r in ok)
        out["cpu_s_median"] = statistics.median(r["cpu_s"] for r in ok)
        out["bytes"] = ok[0].get("bytes")
    else:
        out["rows"] = None
        # Killed: the time it had run is a lower bound.
        out["seconds"] = max(r["wall_s"] for r in runs)
        out["cpu_s_median"] = max(r["cpu_s"] for r in runs)
    out["lower_bound"] = not ok
    return out


# ---------------------------------------------------------------------------------------------
# Cases


def fqdn_list(site: str, uids: list[str], short: bool) -> list[str]:
    return [f"{u}.{site}" if short else f"{u}.{site}.grid5000.fr" for u in uids]


def single_site_case(tools: Tools, target_rows: int, repeats: int, python_tools: bool) -> dict:
    window = h.window_for_rows(target_rows)
    start, end = T0, T0 + window
    label = (f"{target_rows / 1e6:g} M rows" if target_rows >= 1e6
             else f"{target_rows / 1e3:g} k rows")
    case = {"label": label, "target_rows": target_rows, "window_s": window,
            "expected_rows": h.expected_rows(len(NODES), window),
            "loadavg": " ".join(f"{x:.2f}" for x in os.getloadavg()),
            "mem_available_mb": mem_available_bytes() / 1e6}
    h.log(f"{label} ({window} s window): load average {case['loadavg']}, "
        f"{case['mem_available_mb']:,.0f} MB available")
    nodes_args = ["--nodes", ",".join(fqdn_list(SITE, NODES, True)),
                  "--start", str(start), "--end", str(end)]
    job_args = ["--job", f"{SITE}:{MAIN_JOB_UID}", "--start", str(start), "--end", str(end)]
    hosts = fqdn_list(SITE, NODES, False)
    py_repeats = repeats if target_rows <= PY_REPEAT_MAX_ROWS else 1
    runs: dict[str, list[dict]] = {k: [] for k in ("curl", "kwatt", "kwatt_job", "enoslib",
                                                   "pg5k")}
    for i in range(repeats):
        # Interleaved, so that a slow spell of the machine does not fall on one tool only.
        steps = [("curl",
                  lambda: tools.curl(h.metrics_url(tools.base_url, NODES, start, end))),
                 ("kwatt", lambda: tools.kwatt(nodes_args)),
                 ("kwatt_job", lambda: tools.kwatt(job_args))]
        if python_tools and i < py_repeats:
            steps += [("enoslib", lambda: tools.enoslib(hosts, start, end)),
                      ("pg5k", lambda: tools.pg5k({SITE: NODES}, start, end))]
        for key, fn in steps:
            run = tools.attempt(f"{label}, run {i + 1}, {key}", fn)
            runs[key].append(run)
            secs = tool_seconds(run)
            h.log(f"{label}: run {i + 1}: {key}: "
                + (f"{secs:.3f} s" if secs is not None else "no time")
                + f" (process {run['wall_s']:.2f} s, CPU {run['cpu_s']:.2f} s), "
                f"peak {run['peak_mb']:,.1f} MB, rows {run.get('rows')}"
                + (f", {run['requests']} requests" if run.get("requests") else "")
                + (f", KILLED: {run['killed']}" if run.get("killed") else ""))
    case["tools"] = {k: summarize(v) for k, v in runs.items() if v}
    check_rows(case, reference=case["tools"]["curl"]["rows"])
    t = case["tools"]
    if t["curl"].get("bytes") and t["kwatt"].get("bytes") and isinstance(t["curl"]["rows"], int):
        # JSON Lines = the array's rows, "\n" instead of ",\n", without the brackets.
        if t["kwatt"]["bytes"] != t["curl"]["bytes"] - t["curl"]["rows"]:
            h.log(f"WARNING: {label}: kwatt wrote {t['kwatt']['bytes']} bytes, curl's answer "
                f"minus separators is {t['curl']['bytes'] - t['curl']['rows']}")
    return case


def check_rows(case: dict, reference) -> None:
    case["reference_rows"] = reference
    mismatches = []
    for key, s in case["tools"].items():
        s["rows_ok"] = s["rows"] == reference if s["rows"] is not None else None
        if s["rows_ok"] is False:
            mismatches.append(f"{key}: {s['rows']}")
    if mismatches:
        h.log(f"WARNING: {case['label']}: rows differ from {reference}: " + ", ".join(mismatches))
    if "expected_rows" in case and reference != case["expected_rows"]:
        h.log(f"WARNING: {case['label']}: {reference} rows, {case['expected_rows']} expected")


def write_four_sites_jobs(path: str) -> tuple[int, dict]:
    """One monitor job per site, all from T0; each lasts so that its site has ~1 M rows at the
    monitor rate; the common window is the longest job (outside its job a node reports 1 row/s)."""
    jobs, durations = [], {}
    for site, _, uids, rate, uid in FOUR_SITES:
        seconds = round(FOUR_SITES_ROWS / (len(uids) * rate))
        durations[site] = seconds
        jobs.append({"site": site, "uid": uid, "user": "bench", "name": f"fetch-bench-{site}",
                     "nodes": uids, "started_at": T0, "stopped_at": T0 + seconds,
                     "types": [f"monitor={METRIC}"],
                     "phases": [{"name": "busy", "duration": seconds, "cpu": 1.0}]})
    with open(path, "w") as f:
        json.dump({"jobs": jobs}, f, indent=1)
    return max(durations.values()), durations


def four_sites_case(tools: Tools, window: int, durations: dict, repeats: int,
                    python_tools: bool) -> dict:
    start, end = T0, T0 + window
    case = {"label": "4 sites", "window_s": window, "job_seconds": durations,
            "loadavg": " ".join(f"{x:.2f}" for x in os.getloadavg()),
            "mem_available_mb": mem_available_bytes() / 1e6}
    h.log(f"4 sites ({window} s window): load average {case['loadavg']}")
    sites = {}
    for site, cluster, uids, rate, uid in FOUR_SITES:
        def url(site=site, uids=uids):
            return (f"{tools.base_url}/sites/{site}/metrics?nodes={','.join(uids)}"
                    f"&start_time={start}&end_time={end}&metrics={METRIC}")
        # The reference rows; one run, paced as the others.
        ref = tools.attempt(f"4 sites, {site}, curl", lambda: tools.curl(url()))
        h.log(f"4 sites: {site}: curl {ref['wall_s']:.2f} s, {ref['rows']:,} rows")
        sites[site] = {"cluster": cluster, "nodes": len(uids), "rows_per_s_per_node": rate,
                       "job_uid": uid, "curl": summarize([ref]), "reference_rows": ref["rows"],
                       "nodes_args": ["--nodes", ",".join(fqdn_list(site, uids, True)),
                                      "--start", str(start), "--end", str(end)],
                       "job_args": ["--job", f"{site}:{uid}", "--start", str(start),
                                    "--end", str(end)],
                       "runs": {"kwatt": [], "kwatt_job": []}}
    all_nodes = [n for s in sites.values() for n in s["nodes_args"][1].split(",")]
    all_args = ["--nodes", ",".join(all_nodes), "--start", str(start), "--end", str(end)]
    all_runs = []
    for i in range(repeats):
        for site, s in sites.items():
            for key, args in (("kwatt", s["nodes_args"]), ("kwatt_job", s["job_args"])):
                run = tools.attempt(f"4 sites, run {i + 1}, {site}, {key}",
                                    lambda: tools.kwatt(args))
                s["runs"][key].append(run)
                h.log(f"4 sites: run {i + 1}: {site} alone ({key}): {run['wall_s']:.3f} s, "
                    f"peak {run['peak_mb']:,.1f} MB, {run['rows']:,} rows, "
                    f"{run['requests']} requests")
        run = tools.attempt(f"4 sites, run {i + 1}, all", lambda: tools.kwatt(all_args))
        all_runs.append(run)
        h.log(f"4 sites: run {i + 1}: all 4 in one call: {run['wall_s']:.3f} s, "
            f"peak {run['peak_mb']:,.1f} MB, {run['rows']:,} rows, {run['requests']} requests")
    total_ref = sum(s["reference_rows"] for s in sites.values())
    for site, s in sites.items():
        s["kwatt"] = summarize(s["runs"]["kwatt"])
        s["kwatt_job"] = summarize(s["runs"]["kwatt_job"])
        for key in ("kwatt", "kwatt_job"):
            if s[key]["rows"] != s["reference_rows"]:
                h.log(f"WARNING: 4 sites: {site} ({key}): {s[key]['rows']} rows, curl "
                    f"{s['reference_rows']}")
        del s["runs"], s["nodes_args"], s["job_args"]
    case["sites"] = sites
    case["all"] = summarize(all_runs)
    case["reference_rows"] = total_ref
    if case["all"]["rows"] != total_ref:
        h.log(f"WARNING: 4 sites in one call: {case['all']['rows']} rows, curl {total_ref}")
    if python_tools:
        hosts = [h for site, _, uids, _, _ in FOUR_SITES for h in fqdn_list(site, uids, False)]
        run = tools.attempt("4 sites, EnOSlib", lambda: tools.enoslib(hosts, start, end))
        h.log(f"4 sites: EnOSlib: {tool_seconds(run) or 0:.2f} s (process {run['wall_s']:.2f} s), "
            f"peak {run['peak_mb']:,.0f} MB, rows {run.get('rows')}")
        case["enoslib"] = summarize([run])
        case["enoslib"]["per_site"] = run.get("per_site")
        if case["enoslib"]["rows"] not in (None, total_ref):
            h.log(f"WARNING: 4 sites: EnOSlib {case['enoslib']['rows']} rows, curl {total_ref}")
    slowest = max(sites, key=lambda s: sites[s]["kwatt"]["seconds"])
    case["slowest_site"] = slowest
    case["ratio"] = case["all"]["seconds"] / sites[slowest]["kwatt"]["seconds"]
    slowest_job = max(sites, key=lambda s: sites[s]["kwatt_job"]["seconds"])
    case["slowest_site_job"] = slowest_job
    case["ratio_vs_job"] = case["all"]["seconds"] / sites[slowest_job]["kwatt_job"]["seconds"]
    case["loadavg_end"] = " ".join(f"{x:.2f}" for x in os.getloadavg())
    return case


# ---------------------------------------------------------------------------------------------
# Report

TOOL_NAMES = {
    "kwatt": "`kwatt fetch --nodes`",
    "kwatt_job": "`kwatt fetch --job` (information)",
    "curl": "`curl -s URL -o FILE`",
    "enoslib": "EnOSlib `Kwollect.get_metrics`",
    "pg5k": "python-grid5000 `metrics.list`",
}


def fmt_s(s: dict) -> str:
    if s["lower_bound"]:
        return f"> {s['seconds']:.0f} (killed)" if s.get("killed") else "failed"
    return f"{s['seconds']:.3f}" if s["seconds"] < 10 else f"{s['seconds']:.2f}"


def fmt_mb(s: dict) -> str:
    if s["lower_bound"] and s.get("killed"):
        return f"> {s['peak_mb']:,.0f} (killed)"
    return f"{s['peak_mb']:,.1f}" if s["peak_mb"] < 1000 else f"{s['peak_mb']:,.0f}"


def fmt_rows(s: dict, reference) -> str:
    if s["rows"] is None:
        return "–"
    rows = s["rows"]
    text = f"{rows:,}" if isinstance(rows, int) else " / ".join(f"{r:,}" for r in rows)
    return text if rows == reference else text + " (≠)"


def ratio(num: dict, den: dict):
    """num / den, with a bound when one of them is a lower bound (a killed run)."""
    value = num["seconds"] / den["seconds"]
    if num["lower_bound"]:
        return value, "≥"
    if den["lower_bound"]:
        return value, "≤"
    return value, ""


def peak_ratio(kw: dict, other: dict):
    value = kw["peak_mb"] / other["peak_mb"]
    return value, ("≤" if other["lower_bound"] and other.get("killed") else "")


def fmt_ratio(value_bound, digits=2, suffix="×") -> str:
    value, bound = value_bound
    return f"{bound + ' ' if bound else ''}{value:.{digits}f}{suffix}"


def verdict(value_bound, target: float, higher_is_better: bool) -> str:
    value, bound = value_bound
    ok = value >= target if higher_is_better else value <= target
    if not bound:
        return "yes" if ok else "no"
    # A bound decides only in one direction.
    if higher_is_better:
        return ("yes" if ok else "not determined") if bound == "≥" else ("no" if not ok else
                                                                         "not determined")
    return ("yes" if ok else "not determined") if bound == "≤" else ("no" if not ok else
                                                                     "not determined")


def extrapolate(single: list[dict], key: str, case: dict) -> dict | None:
    """For a tool killed at `case`: its time and peak, linear in rows through the two largest
    smaller cases it completed (an estimate, shown as such)."""
    done = [c for c in single if c["target_rows"] < case["target_rows"]
            and key in c["tools"] and not c["tools"][key]["lower_bound"]]
    if len(done) < 2:
        return None
    a, b = sorted(done, key=lambda c: c["target_rows"])[-2:]
    ra, rb = a["tools"][key]["rows"], b["tools"][key]["rows"]
    rows = case["reference_rows"]
    if not all(isinstance(r, int) for r in (ra, rb, rows)) or ra == rb:
        return None
    out = {"from": [a["label"], b["label"]]}
    for field in ("seconds", "peak_mb"):
        ya, yb = a["tools"][key][field], b["tools"][key][field]
        out[field] = yb + (yb - ya) / (rb - ra) * (rows - rb)
    return out


def render(results: dict) -> str:
    m = results["machine"]
    lines = [
        SECTION_TITLE,
        "",
        f"- Date: {results['date']}",
        f"- Machine: {m['nproc']} cores ({m['cpu_model']}), {m['mem_gib']:.1f} GiB of memory, "
        f"Linux {m['kernel']}; {results['version']} (binary sha256 "
        f"{results['binary_sha256'][:12]}); EnOSlib {results['enoslib_version']}, "
        f"python-grid5000 {results['pg5k_version']}, {results['curl_version']}; load average "
        f"{results['loadavg_start']} at the start",
        "- Reproduce: `make bench`, or `python3 bench/fetch_bench.py build/kwatt` "
        f"(~{results['elapsed_s'] / 60:.0f} min)",
        f"- Setup: one `kwatt serve --simulate` (nothing pinned; server and clients share the "
        f"{m['nproc']} cores) with one Lyon job over the 20 nova nodes of type "
        f"`monitor={METRIC}` (50 rows/s/node, 1000 rows/s); `metrics={METRIC}`, all 20 nodes, "
        f"windows of 100, 1000 and 10000 s from the job's start. Each tool is a child process "
        f"writing or holding every row: `kwatt fetch --nodes nova-1.lyon,... --start --end -o "
        f"FILE` (JSON Lines), `curl -s URL -o FILE` (one request, as EnOSlib sends per site), "
        f"EnOSlib's `Kwollect` service (`deploy`, `start`, `stop`, `get_metrics`) and "
        f"python-grid5000's `sites['lyon'].metrics.list(...)`, both in a fresh interpreter "
        f"whose `HOME` holds `.python-grid5000.yaml` with `uri:`. `kwatt fetch --job lyon:4242` "
        f"(same window, same rows) is shown for information. Time: wall time of the process for "
        f"kwatt and curl; for the Python tools the call alone, from the child's clock (interpreter "
        f"start, imports ~0.4 s, and freeing at exit left out). Peak RSS: `ru_maxrss` of the child "
        f"(GNU `time`'s `%M`). Median of {results['repeats']} runs, interleaved; the Python "
        f"tools once at "
        f"10 M rows, under a watchdog that kills them past {results['mem_limit_gb']:.0f} GB of "
        f"RSS or {results['tool_timeout_s']:.0f} s. Every tool's rows are counted (lines for "
        f"kwatt, `len()` for the Python tools, `{{\"timestamp\"` for curl) and checked against "
        f"curl's. MB = 10^6 bytes."
        + (" Writing 1,600 MB of zeros to a new file (`dd`) took {:.2f} s, then {:.2f} s once "
           "the first file was deleted: on this VM, memory not touched lately costs far more "
           "(the host faults it in); the output files of kwatt and curl, and kwatt's buffers, "
           "pay that cost or not depending on what ran before.".format(*results["write_probe_s"])
           if results.get("write_probe_s") else ""),
        "",
    ]
    single = results.get("single", [])
    if single:
        lines += [
            "| case | tool | rows | time (s) | CPU (s) | peak RSS (MB) | requests | runs |",
            "|---|---|---:|---:|---:|---:|---:|---:|",
        ]
        for case in single:
            first = True
            for key in ("kwatt", "kwatt_job", "curl", "enoslib", "pg5k"):
                if key not in case["tools"]:
                    continue
                s = case["tools"][key]
                head = (f"{case['label']} ({case['window_s']} s), load {case['loadavg']}"
                        if first else "")
                first = False
                lines.append(
                    f"| {head} | {TOOL_NAMES[key]} | {fmt_rows(s, case['reference_rows'])} "
                    f"| {fmt_s(s)} | {s['cpu_s_median']:.2f} | {fmt_mb(s)} "
                    f"| {s['requests'] if s['requests'] is not None else ''} | {s['runs']} |")
        lines += [
            "",
            "| case | EnOSlib time / kwatt time | kwatt time / curl time | kwatt peak / EnOSlib "
            "peak | python-grid5000 time / kwatt time | same as, with `--job`: EnOSlib / kwatt, "
            "kwatt / curl, peak ratio |",
            "|---|---:|---:|---:|---:|---|",
        ]
        for case in single:
            t = case["tools"]
            cells = []
            if "enoslib" in t:
                cells.append(fmt_ratio(ratio(t["enoslib"], t["kwatt"]), 1))
            else:
                cells.append("–")
            cells.append(fmt_ratio(ratio(t["kwatt"], t["curl"])))
            cells.append(fmt_ratio(peak_ratio(t["kwatt"], t["enoslib"]), 3, "")
                         if "enoslib" in t else "–")
            cells.append(fmt_ratio(ratio(t["pg5k"], t["kwatt"]), 1) if "pg5k" in t else "–")
            j = t["kwatt_job"]
            job = [fmt_ratio(ratio(t["enoslib"], j), 1) if "enoslib" in t else "–",
                   fmt_ratio(ratio(j, t["curl"])),
                   fmt_ratio(peak_ratio(j, t["enoslib"]), 3, "") if "enoslib" in t else "–"]
            lines.append(f"| {case['label']} | " + " | ".join(cells) + " | "
                         + ", ".join(job) + " |")
        notes = []
        big = max(single, key=lambda c: c["target_rows"])
        kw, kj = big["tools"]["kwatt"], big["tools"]["kwatt_job"]
        if isinstance(kw["rows"], int) and kw["requests"]:
            per_request = kw["rows"] / kw["requests"]
            bound = ("CPU-bound" if kw["cpu_s_median"] > 0.85 * kw["seconds"]
                     else "partly waiting")
            text = (f"{big['label']}: `kwatt fetch --nodes` used {kw['cpu_s_median']:.1f} s of "
                    f"CPU in {kw['seconds']:.1f} s (one thread: {bound}), `--job` "
                    f"{kj['cpu_s_median']:.1f} s in {kj['seconds']:.1f} s.")
            text += (f" Both plan for the densest data a node can report, every on-demand "
                     f"metric on ({h.ROWS_PER_SECOND_PER_NODE} rows/s/node for {METRIC}, its rate "
                     f"under a monitor job, which `--nodes` does not know of), in "
                     f"requests of at most {KWATT_BUDGET:,} rows, {KWATT_CONCURRENCY} in flight "
                     f"in all and {KWATT_PER_SITE} per site, and merge or cut the requests not "
                     f"yet sent from each answer's density: `--nodes` sent {kw['requests']} "
                     f"requests ({per_request:,.0f} rows each on average), `--job` "
                     f"{kj['requests']}.")
            if per_request > 2 * KWATT_BUDGET:
                text += (f" That is over twice the budget: the answers were denser than the "
                         f"densest rate of the catalogue, and each request's rows are held until "
                         f"it is delivered.")
            notes.append(text)
        for case in single:
            for key in ("enoslib", "pg5k"):
                s = case["tools"].get(key)
                if s and s.get("killed"):
                    est = extrapolate(single, key, case)
                    notes.append(
                        f"{case['label']}: {TOOL_NAMES[key]} was killed ({s['killed']}; "
                        f"limit {s['mem_limit_mb']:,.0f} MB): the time it had run and the memory "
                        f"it held when killed are lower bounds of what it needed, and so are the "
                        f"ratios marked ≥ / ≤."
                        + (f" Linear in rows from the {est['from'][0]} and {est['from'][1]} runs, "
                           f"it would take ~{est['seconds']:.0f} s and ~{est['peak_mb'] / 1e3:.1f} "
                           f"GB (an estimate)." if est else ""))
                elif s and s.get("failed"):
                    notes.append(f"{case['label']}: {TOOL_NAMES[key]} failed: {s['failed']}")
        if notes:
            lines += [""] + [f"Note: {n}" for n in notes]
        lines.append("")

    four = results.get("four")
    if four:
        lines += [
            "**Four sites.** A second server, started with "
            f"`{' '.join(four.get('server_args', ['--rows-per-second', '150000']))}`: each answer is paced at {PACED_ROWS_PER_SECOND:,} rows/s, "
            "like a Kwollect database answering one query, so that sites (separate servers on "
            "Grid'5000) answer in parallel as real ones do. Without it the comparison would be "
            f"CPU-bound on this {m['nproc']}-core machine, where the server generating every "
            "site's rows and the client share the cores. One job of type "
            f"`monitor={METRIC}` per site, all from the same instant, each long enough for "
            f"~1 M rows (" + ", ".join(
                f"{site} {four['job_seconds'][site]} s" for site in four["sites"])
            + f"); one window of {four['window_s']} s for all (after its job, a node reports "
            "1 row/s). `kwatt fetch --nodes` of each site alone, then of the 4 sites in one "
            "call (`--nodes` listing all 54 nodes); `--job SITE:ID` of each site alone for "
            f"information; median of {four['all']['runs']} runs; load average "
            f"{four['loadavg']} at the start.",
            "",
            "| site | nodes | rows | curl, 1 request (s) | `kwatt fetch --nodes` (s) | requests "
            "| peak RSS (MB) | `kwatt fetch --job` (s) | requests |",
            "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
        ]
        for site, s in four["sites"].items():
            lines.append(
                f"| {site} ({s['cluster']}, {s['rows_per_s_per_node']} rows/s/node) "
                f"| {s['nodes']} | {fmt_rows(s['kwatt'], s['reference_rows'])} "
                f"| {fmt_s(s['curl'])} | {fmt_s(s['kwatt'])} | {s['kwatt']['requests']} "
                f"| {fmt_mb(s['kwatt'])} | {fmt_s(s['kwatt_job'])} "
                f"| {s['kwatt_job']['requests']} |")
        a = four["all"]
        lines.append(f"| **4 sites, one call** | {sum(s['nodes'] for s in four['sites'].values())} "
                     f"| {fmt_rows(a, four['reference_rows'])} | | **{fmt_s(a)}** "
                     f"| {a['requests']} | {fmt_mb(a)} | | |")
        if "enoslib" in four:
            e = four["enoslib"]
            lines.append(f"| EnOSlib, 4 sites (site after site) | | "
                         f"{fmt_rows(e, four['reference_rows'])} | | {fmt_s(e)} | 4 "
                         f"| {fmt_mb(e)} | | |")
        lines.append("")
        a = four["all"]
        per_site_req = [s["kwatt"]["requests"] for s in four["sites"].values()]
        planned = {site: s["nodes"] * s["rows_per_s_per_node"] * four["window_s"]
                   for site, s in four["sites"].items()}
        most = max(planned, key=lambda site: planned[site] / four["sites"][site]["reference_rows"])
        alone_cpu = [s["kwatt"]["cpu_s_median"] for s in four["sites"].values()]
        if a.get("cpu_s_median") is not None and all(r is not None for r in per_site_req):
            bound = ("CPU-bound" if a["cpu_s_median"] > 0.85 * a["seconds"]
                     else "partly waiting")
            lo, hi = f"{min(alone_cpu):.1f}", f"{max(alone_cpu):.1f}"
            cpu_range = lo if lo == hi else f"{lo} to {hi}"
            lines += [
                f"Note: kwatt plans each site for the densest data its nodes can report (every "
                f"on-demand metric on: the monitor jobs' rates above) over the whole "
                f"{four['window_s']} s window, up to "
                f"{planned[most] / four['sites'][most]['reference_rows']:.1f} times the rows "
                f"there are ({most}: {planned[most]:,} rows planned for, "
                f"{four['sites'][most]['reference_rows']:,} there); once the answers come from "
                f"after a job's end (1 row/s/node), the requests not yet sent are merged: "
                f"{min(per_site_req)} to {max(per_site_req)} requests per site, "
                f"{a['requests']} for the 4 sites in one call. A site alone has "
                f"{KWATT_PER_SITE} paced requests in flight (up to "
                f"{KWATT_PER_SITE * PACED_ROWS_PER_SECOND:,} rows/s, curl's single request "
                f"{PACED_ROWS_PER_SECOND:,}); the 4 sites in one call {KWATT_CONCURRENCY} (up to "
                f"{KWATT_CONCURRENCY * PACED_ROWS_PER_SECOND:,} rows/s), where kwatt used "
                f"{a['cpu_s_median']:.1f} s of CPU in {a['seconds']:.1f} s (one thread: "
                f"{bound}), against {cpu_range} s of CPU for a site alone "
                f"({sum(alone_cpu):.1f} s for the 4 sites one after the other).", ""]

    if results.get("restarts"):
        lines += [f"Note: {len(results['restarts'])} run(s) failed and were run again: "
                  + "; ".join(results["restarts"]), ""]

    # Bars.
    lines += ["| bar | target | measured | met | with `--job` (information) |",
              "|---|---:|---:|---|---:|"]
    big = next((c for c in single if c["target_rows"] == 10_000_000), None)
    if big and "enoslib" in big["tools"]:
        t = big["tools"]
        sp = ratio(t["enoslib"], t["kwatt"])
        spj = ratio(t["enoslib"], t["kwatt_job"])
        lines.append(f"| 10 M rows: EnOSlib time / kwatt time | ≥ {BAR_SPEEDUP_VS_ENOSLIB:.0f}× "
                     f"| {fmt_ratio(sp, 1)} | {verdict(sp, BAR_SPEEDUP_VS_ENOSLIB, True)} "
                     f"| {fmt_ratio(spj, 1)} |")
    if big:
        t = big["tools"]
        vc = ratio(t["kwatt"], t["curl"])
        vcj = ratio(t["kwatt_job"], t["curl"])
        lines.append(f"| 10 M rows: kwatt time / curl time | ≤ {BAR_VS_CURL:.0f}× "
                     f"| {fmt_ratio(vc)} | {verdict(vc, BAR_VS_CURL, False)} | {fmt_ratio(vcj)} |")
    if big and "enoslib" in big["tools"]:
        t = big["tools"]
        pr = peak_ratio(t["kwatt"], t["enoslib"])
        prj = peak_ratio(t["kwatt_job"], t["enoslib"])
        met = verdict(pr, BAR_MEMORY_FRACTION, False)
        est = extrapolate(single, "enoslib", big) if t["enoslib"]["lower_bound"] else None
        if met == "not determined" and est:
            value = t["kwatt"]["peak_mb"] / est["peak_mb"]
            met += (f"; {value:.3f} with EnOSlib's estimated {est['peak_mb'] / 1e3:.1f} GB: "
                    + ("yes" if value <= BAR_MEMORY_FRACTION else "no"))
        lines.append(f"| 10 M rows: kwatt peak RSS / EnOSlib peak RSS | ≤ 1/20 (0.050) "
                     f"| {fmt_ratio(pr, 3, '')} ({t['kwatt']['peak_mb']:,.0f} MB) "
                     f"| {met} "
                     f"| {fmt_ratio(prj, 4, '')} ({t['kwatt_job']['peak_mb']:,.0f} MB) |")
    if four:
        lines.append(f"| 4 sites in one call / slowest single site ({four['slowest_site']}) "
                     f"| ≤ {BAR_FOUR_SITES}× | {four['ratio']:.2f}× "
                     f"| {'yes' if four['ratio'] <= BAR_FOUR_SITES else 'no'} "
                     f"| {four['ratio_vs_job']:.2f}× (vs {four['slowest_site_job']} with "
                     f"`--job`) |")
    if lines[-1] == "|---|---:|---:|---|---:|":  # no bar measured (no 10 M rows, no 4 sites)
        del lines[-2:]
    lines.append("")
    return "\n".join(lines)


def python_versions(python: str) -> tuple[str, str] | None:
    code = ("import importlib.metadata as m, enoslib, grid5000; "
            "print(m.version('enoslib'), m.version('python-grid5000'))")
    try:
        res = subprocess.run([python, "-c", code], capture_output=True, text=True, timeout=120)
    except (OSError, subprocess.SubprocessError):
        return None
    if res.returncode != 0:
        return None
    enos, pg = res.stdout.split()
    return enos, pg


def curl_version() -> str:
    try:
        first = subprocess.run(["curl", "--version"], capture_output=True, text=True,
                               timeout=10).stdout.split("\n", 1)[0].split()
        return f"curl {first[1]}"
    except (OSError, subprocess.SubprocessError, IndexError):
        return "curl"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("binary", nargs="?", default=os.path.join(ROOT, "build", "kwatt"),
                    help="the kwatt binary (default: build/kwatt)")
    ap.add_argument("--repeats", type=int, default=3, help="timed runs per tool (median kept)")
    ap.add_argument("--sizes", default="100000,1000000,10000000",
                    help="rows of the one-site cases, comma-separated")
    ap.add_argument("--cases", default="single,four", help="single, four, or both")
    ap.add_argument("--no-python", action="store_true",
                    help="skip EnOSlib and python-grid5000")
    ap.add_argument("--python", default=os.path.join(ROOT, ".venv", "bin", "python"),
                    help="interpreter with enoslib and python-grid5000 (default: .venv)")
    ap.add_argument("--mem-limit-gb", type=float, default=18.0,
                    help="kill a Python tool whose RSS passes this (GB)")
    ap.add_argument("--tool-timeout", type=float, default=900.0,
                    help="kill a tool running longer than this (s)")
    ap.add_argument("--no-write", action="store_true",
                    help="do not touch BENCHMARKS.md nor bench/out/")
    ap.add_argument("--benchmarks-md", default=os.path.join(ROOT, "BENCHMARKS.md"))
    ap.add_argument("--render", metavar="JSON",
                    help="measure nothing: write the section again from a results file "
                         "(bench/out/fetch_bench.json)")
    args = ap.parse_args()

    if args.render:
        with open(args.render) as f:
            section = render(json.load(f))
        print(section)
        if not args.no_write:
            h.write_section(args.benchmarks_md, section, SECTION_TITLE)
        return 0

    binary = os.path.abspath(args.binary)
    if not os.access(binary, os.X_OK):
        h.log(f"no executable kwatt at {binary} (build it with `make build`)")
        return 2
    if shutil.which("curl") is None or not os.access(h.TIME, os.X_OK):
        h.log(f"`curl` or {h.TIME} is missing (apt-get install curl time)")
        return 2
    cases = set(args.cases.split(","))
    sizes = [int(s) for s in args.sizes.split(",") if s]
    if sizes and h.window_for_rows(max(sizes)) > h.JOB_SECONDS:
        h.log(f"the job lasts {h.JOB_SECONDS} s: at most {h.JOB_SECONDS * 1000:,} rows")
        return 2
    python_tools = not args.no_python
    versions = python_versions(args.python) if python_tools else None
    if python_tools and versions is None:
        h.log(f"{args.python} cannot import enoslib and grid5000 (make deps): Python tools skipped")
        python_tools = False

    signal.signal(signal.SIGTERM, h.on_signal)
    signal.signal(signal.SIGHUP, h.on_signal)
    t_start = time.monotonic()
    tmpdir = tempfile.mkdtemp(prefix="kwatt-fetch-bench-")
    try:
        # A copy of the binary: a rebuild of build/kwatt during the run changes nothing.
        built = binary
        binary = os.path.join(tmpdir, "kwatt")
        shutil.copy2(built, binary)
        results: dict = {
            "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
            "machine": h.machine_info(),
            "version": h.kwatt_version(binary),
            "enoslib_version": versions[0] if versions else "not run",
            "pg5k_version": versions[1] if versions else "not run",
            "curl_version": curl_version(),
            "binary": built,
            "binary_sha256": h.sha256_of(binary),
            "repeats": args.repeats,
            "mem_limit_gb": args.mem_limit_gb,
            "tool_timeout_s": args.tool_timeout,
            "loadavg_start": h.loadavg(),
            "mem_available_mb_start": mem_available_bytes() / 1e6,
        }
        h.log(f"{results['mem_available_mb_start']:,.0f} MB available; load average "
            f"{results['loadavg_start']}")
        if shutil.which("dd"):
            results["write_probe_s"] = write_probe(tmpdir)
            h.log("writing 1,600 MB to a new file: {:.2f} s, then {:.2f} s".format(
                *results["write_probe_s"]))
        tools = Tools(binary, args.python, tmpdir, int(args.mem_limit_gb * 1e9),
                      args.tool_timeout)

        if "single" in cases and sizes:
            jobs_file = os.path.join(tmpdir, "jobs.json")
            h.write_jobs_file(jobs_file)
            with h.Server(binary, jobs_file, tmpdir, None, "single") as server:
                tools.use_server(server, "single")
                results["single"] = [single_site_case(tools, n, args.repeats, python_tools)
                                     for n in sizes]
                if not server.alive():
                    raise BenchError(f"the server died: {server.stderr()}")
                results["single_server_peak_rss_mb"] = server.peak_rss_mb()

        if "four" in cases:
            jobs_file = os.path.join(tmpdir, "jobs-four-sites.json")
            window, durations = write_four_sites_jobs(jobs_file)
            # As many server threads as requests can be in flight (4 sites are 4 servers on
            # Grid'5000): the server's default (8) would cap a client sending more at once.
            server_args = ["--rows-per-second", str(PACED_ROWS_PER_SECOND),
                           "--threads", str(FOUR_SITES_SERVER_THREADS)]
            with h.Server(binary, jobs_file, tmpdir, None, "four", server_args) as server:
                tools.use_server(server, "four")
                results["four"] = four_sites_case(tools, window, durations, args.repeats,
                                                  python_tools)
                results["four"]["server_args"] = server_args
                if not server.alive():
                    raise BenchError(f"the server died: {server.stderr()}")

        results["restarts"] = tools.restarts
        results["loadavg_end"] = h.loadavg()
        results["elapsed_s"] = time.monotonic() - t_start
        section = render(results)
        print(section)
        if not args.no_write:
            h.publish(args.benchmarks_md, section, SECTION_TITLE, results, "fetch_bench")
        h.log(f"done in {results['elapsed_s']:.0f} s")
        return 0
    except BenchError as e:
        h.log(f"FAILED: {e}")
        return 1
    finally:
        h.stop_all_servers()
        shutil.rmtree(tmpdir, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
