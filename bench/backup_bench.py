#!/usr/bin/env python3
"""Benchmark of `kwatt backup` (archive size, time, memory) and of LoadArchive (loading speed).

Usage: python3 bench/backup_bench.py [KWATT_BINARY] [--repeats N] [--no-enoslib] [--no-write]
                                     [--no-wait]
       python3 bench/backup_bench.py --render bench/out/backup_bench.json  (the section again)

Needs `kwatt_load_bench` (bench/load_archive_bench.cc, built by `make build`) beside the kwatt
binary, `curl`, GNU `time` (/usr/bin/time) and, for EnOSlib, the project's .venv.

What it does:
  0. waits (up to 20 min, polling every 30 s) until no other bench/*_bench.py runs and the
     1-minute load average is below 1.5 (--no-wait: does not wait); what it found is reported;
  1. starts `kwatt serve --simulate` with harness.py's jobs file (one Lyon job, uid 4242,
     over the 20 nova nodes, type monitor=wattmetre_power_watt: 50 rows/s/node, 1000 rows/s);
  2. the API's answers, counted untimed with curl (rows and bytes): wattmetre_power_watt of the
     20 nodes over 1000 s (~1 M rows) and 20000 s (~20 M rows), and every metric of the 20
     nodes over the first 1000 s of the job;
  3. `kwatt backup --api URL --nodes ... --start --end --metrics wattmetre_power_watt -o DIR`
     for ~1 M and ~20 M rows, and, interleaved with the 1 M-row runs, EnOSlib's
     `Kwollect.backup(backup_dir=..., metrics=[...])` (deploy, start, stop, backup) in a fresh
     interpreter whose HOME holds `.python-grid5000.yaml` with `uri: URL`; each as a child
     process under GNU time (wall time, CPU time, peak RSS = %M); median time of N runs
     (default 3), largest peak. For information, `kwatt backup --job lyon:4242 --start --end`
     (every metric, the first 1000 s) once. Every archive's rows are checked against the API's,
     its decompressed text against the API's bytes (JSON Lines = the array's rows with "\\n"
     for ",\\n", without brackets), and the kept ones with `kwatt inspect --verify`;
  4. stops the server, then times `kwatt_load_bench DIR` on the ~20 M-row archive: LoadArchive
     (every row) into a fresh batch per run, and into a reused one (Clear(), then load again),
     with keep_raw true and false; N runs each (best and median);
  5. prints a markdown section and writes "## Backup and archive loading ..." of BENCHMARKS.md
     (the other sections are kept), and bench/out/backup_bench.json.

Every server started is stopped (SIGTERM, then SIGKILL), even on error; temp files are removed.
MB means 10^6 bytes throughout.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

import harness as h

ROOT = h.ROOT
SECTION_TITLE = "## Backup and archive loading (`kwatt backup`, `LoadArchive`)"

SITE = h.SITE
NODES = h.NODES
METRIC = h.METRIC
T0 = h.JOB_START_EPOCH
JOB_UID = 4242  # the job of harness.write_jobs_file

SMALL_ROWS = 1_000_000
LARGE_ROWS = 20_000_000

# The bars of the issue.
BAR_SIZE_FRACTION = 1 / 8
BAR_MEMORY_MB = 50.0
BAR_LOAD_ROWS_PER_S = 5_000_000

WAIT_MAX_S = 20 * 60
WAIT_POLL_S = 30
WAIT_LOAD = 1.5
PY_MEM_LIMIT = int(18e9)
TOOL_TIMEOUT_S = 900.0


BenchError = h.BenchError  # what h.Server raises too


# ---------------------------------------------------------------------------------------------
# Waiting for a quiet machine


def ancestors() -> set[int]:
    """This process and its ancestors (whose command lines may name this script)."""
    pids, pid = set(), os.getpid()
    while pid > 1 and pid not in pids:
        pids.add(pid)
        try:
            with open(f"/proc/{pid}/stat") as f:
                pid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            break
    return pids


def other_benchmarks() -> list[str]:
    """Command lines of other bench/*_bench.py processes (not this one)."""
    res = subprocess.run(["pgrep", "-af", r"_bench\.py"], capture_output=True, text=True)
    mine = ancestors()
    found = []
    for line in res.stdout.splitlines():
        pid, _, cmd = line.partition(" ")
        if pid.isdigit() and int(pid) not in mine and "pgrep" not in cmd:
            found.append(cmd)
    return found


def wait_for_quiet() -> dict:
    t0 = time.monotonic()
    while True:
        others = other_benchmarks()
        load1 = os.getloadavg()[0]
        waited = time.monotonic() - t0
        if not others and load1 < WAIT_LOAD:
            return {"waited_s": waited, "quiet": True, "load1": load1}
        if waited >= WAIT_MAX_S:
            h.log(f"WARNING: still not quiet after {waited:.0f} s (load {load1:.2f}, "
                f"{len(others)} other benchmark(s)): measuring anyway")
            return {"waited_s": waited, "quiet": False, "load1": load1, "others": others}
        h.log(f"waiting: load {load1:.2f}" + (f", running: {others[0][:100]}" if others else ""))
        time.sleep(WAIT_POLL_S)


# ---------------------------------------------------------------------------------------------
# Processes


def dir_files(path: str, suffix: str) -> list[str]:
    return sorted(os.path.join(path, n) for n in os.listdir(path) if n.endswith(suffix))


def count_lines(paths: list[str]) -> tuple[int, int]:
    lines = size = 0
    for path in paths:
        with open(path, "rb") as f:
            while chunk := f.read(8 << 20):
                lines += chunk.count(b"\n")
                size += len(chunk)
    return lines, size


# ---------------------------------------------------------------------------------------------
# The tools


class Tools:
    def __init__(self, binary: str, load_bench: str, python: str, tmpdir: str):
        self.binary = binary
        self.load_bench = load_bench
        self.python = python
        self.tmpdir = tmpdir
        self.home = ""
        self.base_url = ""
        self.n = 0

    def use_server(self, server: h.Server) -> None:
        self.base_url = server.base_url
        self.home = os.path.join(self.tmpdir, "home")
        os.makedirs(self.home, exist_ok=True)
        config = os.path.join(self.home, ".python-grid5000.yaml")
        with open(config, "w") as f:
            f.write(f"uri: {server.base_url}\n")
        os.chmod(config, 0o600)

    def _name(self, tool: str) -> str:
        self.n += 1
        return f"{tool}-{self.n}"

    def load(self, archive: str, runs: int = 1, extra: list[str] | None = None) -> dict:
        """kwatt_load_bench ARCHIVE --runs N [extra], under GNU time."""
        run = h.run_measured([self.load_bench, archive, "--runs", str(runs)] + (extra or []),
                           h.child_env(self.home or self.tmpdir), self.tmpdir,
                           self._name("load"), timeout_s=TOOL_TIMEOUT_S)
        if run["returncode"] != 0:
            raise BenchError(f"kwatt_load_bench {' '.join(extra or [])} exited "
                             f"{run['returncode']}: {run['stderr'].strip()[-300:]}")
        run["runs"] = [json.loads(line) for line in run["stdout"].splitlines() if line.strip()]
        if len(run["runs"]) != runs:
            raise BenchError(f"kwatt_load_bench printed {len(run['runs'])} runs, not {runs}")
        return run

    def kwatt_backup(self, args: list[str], keep: bool = False) -> dict:
        name = self._name("backup")
        out = os.path.join(self.tmpdir, name)
        argv = [self.binary, "backup", "--api", self.base_url] + args + ["-o", out]
        try:
            run = h.run_measured(argv, h.child_env(self.home), self.tmpdir, name,
                               timeout_s=TOOL_TIMEOUT_S)
            if run["returncode"] != 0:
                last = (run["stderr"].strip().splitlines() or ["?"])[-1]
                raise BenchError(f"kwatt backup exited {run['returncode']}: {last[:300]}")
            with open(os.path.join(out, "manifest.json")) as f:
                manifest = json.load(f)
            if manifest.get("state") != "complete":
                raise BenchError(f"{out}: state {manifest.get('state')!r}")
            data = dir_files(os.path.join(out, "data"), ".jsonl.zst")
            run["files"] = len(data)
            run["data_bytes"] = sum(os.path.getsize(p) for p in data)
            run["manifest_bytes"] = os.path.getsize(os.path.join(out, "manifest.json"))
            run["rows"] = sum(f["rows"] for f in manifest["files"])
            if run["data_bytes"] != sum(f["bytes"] for f in manifest["files"]):
                raise BenchError(f"{out}: data/ holds {run['data_bytes']} bytes, the manifest "
                                 f"records {sum(f['bytes'] for f in manifest['files'])}")
            run["summary"] = (run["stderr"].strip().splitlines() or [""])[-1]
        except BaseException:
            shutil.rmtree(out, ignore_errors=True)
            raise
        if keep:
            run["dir"] = out
        else:
            shutil.rmtree(out, ignore_errors=True)
        return run

    def enoslib_backup(self, hosts: list[str], start: int, end: int) -> dict:
        name = self._name("enoslib")
        out = os.path.join(self.tmpdir, name)
        try:
            run = h.run_measured([self.python, "-c", ENOSLIB_CHILD, ",".join(hosts), str(start),
                                str(end), METRIC, out], h.child_env(self.home), self.tmpdir,
                               name, mem_limit=PY_MEM_LIMIT, timeout_s=TOOL_TIMEOUT_S)
            if run["killed"]:
                raise BenchError(f"EnOSlib backup killed: {run['killed']}")
            if run["returncode"] != 0:
                tail = (run["stderr"].strip().splitlines() or ["?"])[-1]
                raise BenchError(f"EnOSlib backup exited {run['returncode']}: {tail[:300]}")
            info = json.loads(run["stdout"].strip().splitlines()[-1])
            run.update(call_s=info["call_s"], import_s=info["import_s"])
            files = dir_files(out, ".jsonl")
            run["files"] = len(files)
            run["rows"], run["data_bytes"] = count_lines(files)
        finally:
            shutil.rmtree(out, ignore_errors=True)
        return run


# The child prints one JSON line, then leaves without freeing its objects (os._exit); the files
# backup() wrote are closed by then (it writes them in `with` blocks).
ENOSLIB_CHILD = r"""
import json, os, sys, time
t0 = time.perf_counter()
from enoslib.objects import Host
from enoslib.service.kwollect.kwollect import Kwollect
hosts = [Host(h) for h in sys.argv[1].split(",")]
start, end, metric, out = int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5]
t1 = time.perf_counter()
k = Kwollect(nodes=hosts)
k.deploy()
k.start(start_time=start)
k.stop(stop_time=end)
k.backup(backup_dir=out, metrics=[metric])
t2 = time.perf_counter()
print(json.dumps({"import_s": t1 - t0, "call_s": t2 - t1}), flush=True)
os._exit(0)
"""


# ---------------------------------------------------------------------------------------------
# Cases


def api_reference(base: str, query: str) -> dict:
    """Rows and bytes of one API answer (`curl -s URL | wc -c`), untimed."""
    url = f"{base}/sites/{SITE}/metrics?{query}"
    rows, size = h.curl_count_rows(url, None)
    return {"query": query, "rows": rows, "bytes": size}


def check_archive(tools: Tools, run: dict, ref: dict, label: str, problems: list[str]) -> None:
    """Rows against the API's; decompressed text against the API's bytes; --verify."""
    if run["rows"] != ref["rows"]:
        problems.append(f"{label}: the archive holds {run['rows']:,} rows, the API sent "
                        f"{ref['rows']:,}")
    if "dir" in run:
        load = tools.load(run["dir"], 1, ["--no-raw"])["runs"][0]
        run["text_bytes"] = load["text_bytes"]
        if load["text_bytes"] != ref["bytes"] - ref["rows"]:
            problems.append(f"{label}: the archive's text is {load['text_bytes']:,} bytes, the "
                            f"API's rows {ref['bytes'] - ref['rows']:,}")
        res = subprocess.run([tools.binary, "inspect", run["dir"], "--verify"],
                             capture_output=True, text=True, timeout=TOOL_TIMEOUT_S)
        run["verified"] = res.returncode == 0
        if res.returncode != 0:
            problems.append(f"{label}: kwatt inspect --verify exited {res.returncode}: "
                            f"{res.stderr.strip()[-200:]}")


def summarize(runs: list[dict], seconds_key: str = "wall_s") -> dict:
    return {
        "runs": len(runs),
        "seconds_runs": h.runs_of(runs, seconds_key),
        "seconds": h.median_of(runs, seconds_key),
        "wall_s": h.median_of(runs, "wall_s"),
        "cpu_s": h.median_of(runs, "cpu_s"),
        "peak_mb": max(h.runs_of(runs, "peak_mb")),
        "peak_mb_runs": h.runs_of(runs, "peak_mb"),
        "rows": runs[-1]["rows"],
        "data_bytes": runs[-1]["data_bytes"],
        "manifest_bytes": runs[-1].get("manifest_bytes"),
        "files": runs[-1]["files"],
        "import_s": h.median_of(runs, "import_s") if "import_s" in runs[0]
        else None,
    }


def measure(tools: Tools, repeats: int, enoslib: bool, problems: list[str],
            small_rows: int, large_rows: int) -> dict:
    base = tools.base_url
    nodes_short = ",".join(f"{u}.{SITE}" for u in NODES)
    hosts = [f"{u}.{SITE}.grid5000.fr" for u in NODES]
    small_w = h.window_for_rows(small_rows)
    large_w = h.window_for_rows(large_rows)
    res: dict = {"small_window_s": small_w, "large_window_s": large_w,
                 "small_rows": small_rows, "large_rows": large_rows}

    def nodes_query(window: int, metric: bool = True) -> str:
        q = f"nodes={','.join(NODES)}&start_time={T0}&end_time={T0 + window}"
        return q + (f"&metrics={METRIC}" if metric else "")

    h.log("the API's answers (untimed, for rows and bytes)")
    refs = {"small": api_reference(base, nodes_query(small_w)),
            "large": api_reference(base, nodes_query(large_w)),
            "job": api_reference(base, nodes_query(small_w, metric=False))}
    for key, ref in refs.items():
        h.log(f"API {key}: {ref['rows']:,} rows, {ref['bytes'] / 1e6:,.1f} MB")
    for key, window in (("small", small_w), ("large", large_w)):
        want = h.expected_rows(len(NODES), window)
        if refs[key]["rows"] != want:
            problems.append(f"API {key}: {refs[key]['rows']:,} rows, {want:,} expected")
    res["api"] = refs

    def backup_args(window: int) -> list[str]:
        return ["--nodes", nodes_short, "--start", str(T0), "--end", str(T0 + window),
                "--metrics", METRIC]

    sl, ll = rows_label(small_rows), rows_label(large_rows)
    # 1 M rows: kwatt and EnOSlib interleaved.
    runs: dict[str, list[dict]] = {"kwatt": [], "enoslib": []}
    res["loadavg_small"] = h.loadavg()
    for i in range(repeats):
        run = tools.kwatt_backup(backup_args(small_w), keep=(i == repeats - 1))
        runs["kwatt"].append(run)
        h.log(f"{sl}: run {i + 1}: kwatt backup {run['wall_s']:.3f} s (CPU {run['cpu_s']:.2f} "
            f"s), peak {run['peak_mb']:,.1f} MB, {run['rows']:,} rows, "
            f"{run['data_bytes'] / 1e6:.2f} MB")
        if enoslib:
            run = tools.enoslib_backup(hosts, T0, T0 + small_w)
            runs["enoslib"].append(run)
            h.log(f"{sl}: run {i + 1}: EnOSlib backup {run['call_s']:.2f} s (process "
                f"{run['wall_s']:.2f} s, CPU {run['cpu_s']:.2f} s), peak {run['peak_mb']:,.0f} "
                f"MB, {run['rows']:,} rows, {run['data_bytes'] / 1e6:.1f} MB")
            if run["rows"] != refs["small"]["rows"]:
                problems.append(f"EnOSlib {sl}: {run['rows']:,} rows, the API sent "
                                f"{refs['small']['rows']:,}")
    check_archive(tools, runs["kwatt"][-1], refs["small"], f"kwatt backup {sl}", problems)
    shutil.rmtree(runs["kwatt"][-1].pop("dir"), ignore_errors=True)
    res["small"] = summarize(runs["kwatt"])
    res["small"]["text_bytes"] = runs["kwatt"][-1].get("text_bytes")
    res["small"]["summary"] = runs["kwatt"][-1]["summary"]
    if runs["enoslib"]:
        res["enoslib"] = summarize(runs["enoslib"], "call_s")

    # Every metric of the job, the first 1000 s (information).
    run = tools.kwatt_backup(["--job", f"{SITE}:{JOB_UID}", "--start", str(T0),
                              "--end", str(T0 + small_w)], keep=True)
    h.log(f"job, all metrics: kwatt backup {run['wall_s']:.3f} s, peak {run['peak_mb']:,.1f} MB, "
        f"{run['rows']:,} rows, {run['data_bytes'] / 1e6:.2f} MB")
    check_archive(tools, run, refs["job"], "kwatt backup --job", problems)
    shutil.rmtree(run.pop("dir"), ignore_errors=True)
    res["job"] = summarize([run])
    res["job"]["text_bytes"] = run.get("text_bytes")

    # 20 M rows; the last archive is kept for the loading benchmark.
    res["loadavg_large"] = h.loadavg()
    big_runs = []
    for i in range(repeats):
        run = tools.kwatt_backup(backup_args(large_w), keep=(i == repeats - 1))
        big_runs.append(run)
        h.log(f"{ll}: run {i + 1}: kwatt backup {run['wall_s']:.3f} s (CPU "
            f"{run['cpu_s']:.2f} s), peak {run['peak_mb']:,.1f} MB, {run['rows']:,} rows, "
            f"{run['data_bytes'] / 1e6:.2f} MB")
    check_archive(tools, big_runs[-1], refs["large"], f"kwatt backup {ll}", problems)
    res["large"] = summarize(big_runs)
    res["large"]["text_bytes"] = big_runs[-1].get("text_bytes")
    res["large"]["summary"] = big_runs[-1]["summary"]
    res["large_archive_dir"] = big_runs[-1]["dir"]

    # For information: the same wattmeter rows with --job (whose plan knows the job's
    # monitor types, hence its 50 rows/s/node), once per size.
    res["job_watt"] = {}
    for key, window, label in (("small", small_w, sl), ("large", large_w, ll)):
        run = tools.kwatt_backup(["--job", f"{SITE}:{JOB_UID}", "--start", str(T0),
                                  "--end", str(T0 + window), "--metrics", METRIC])
        h.log(f"{label}, --job: kwatt backup {run['wall_s']:.3f} s (CPU {run['cpu_s']:.2f} s), "
            f"peak {run['peak_mb']:,.1f} MB, {run['rows']:,} rows, "
            f"{run['data_bytes'] / 1e6:.2f} MB")
        if run["rows"] != refs[key]["rows"]:
            problems.append(f"kwatt backup --job, {label}: {run['rows']:,} rows, the API sent "
                            f"{refs[key]['rows']:,}")
        res["job_watt"][key] = summarize([run])
    return res


def load_case(tools: Tools, archive: str, repeats: int, problems: list[str]) -> dict:
    modes = [("fresh", True, []), ("reused", True, ["--reuse"]),
             ("fresh", False, ["--no-raw"]), ("reused", False, ["--reuse", "--no-raw"])]
    out = []
    for batch, keep_raw, extra in modes:
        run = tools.load(archive, repeats, extra)
        runs = run["runs"]
        rates = [r["rows_per_s"] for r in runs]
        secs = [r["seconds"] for r in runs]
        case = {"batch": batch, "keep_raw": keep_raw, "rows": runs[0]["rows"],
                "seconds_runs": secs, "best_s": min(secs), "median_s": statistics.median(secs),
                "best_rows_per_s": max(rates), "median_rows_per_s": statistics.median(rates),
                "compressed_bytes": runs[0]["compressed_bytes"],
                "text_bytes": runs[0]["text_bytes"], "raw_bytes": runs[0]["raw_bytes"],
                "process_peak_mb": run["peak_mb"], "process_wall_s": run["wall_s"],
                "process_cpu_s": run["cpu_s"], "loadavg": h.loadavg()}
        h.log(f"LoadArchive, {batch} batch, keep_raw {keep_raw}: "
            + ", ".join(f"{s:.3f} s" for s in secs)
            + f" ({case['median_rows_per_s'] / 1e6:.2f} M rows/s median), process peak "
            f"{run['peak_mb']:,.0f} MB")
        if len({r["rows"] for r in runs}) != 1:
            problems.append(f"LoadArchive {batch}/{keep_raw}: rows differ between runs")
        out.append(case)
    return {"modes": out}


# ---------------------------------------------------------------------------------------------
# Report


def rows_label(n: int) -> str:
    return f"{n / 1e6:g} M rows" if n >= 1e6 else f"{n / 1e3:g} k rows"


def fmt_mb(x: float) -> str:
    return f"{x:,.1f}" if x < 1000 else f"{x:,.0f}"


def render(results: dict) -> str:
    m = results["machine"]
    api = results["api"]
    small, large, job = results["small"], results["large"], results["job"]
    en = results.get("enoslib")
    load = results["load"]["modes"]
    wait = results["wait"]
    sl, ll = rows_label(results["small_rows"]), rows_label(results["large_rows"])
    wait_text = (f"started after waiting {wait['waited_s']:.0f} s for no other benchmark to run "
                 f"and a 1-minute load average below {WAIT_LOAD}"
                 if wait.get("quiet") else
                 f"the machine was not quiet after {wait['waited_s']:.0f} s of waiting "
                 f"(1-minute load {wait['load1']:.2f}): measured anyway"
                 if "load1" in wait else "no wait (--no-wait)")
    lines = [
        SECTION_TITLE,
        "",
        f"- Date: {results['date']}",
        f"- Machine: {m['nproc']} cores ({m['cpu_model']}), {m['mem_gib']:.1f} GiB of memory, "
        f"Linux {m['kernel']}; {results['version']} (binary sha256 "
        f"{results['binary_sha256'][:12]}); EnOSlib {results['enoslib_version']}; load average "
        f"{results['loadavg_start']} at the start ({wait_text})",
        "- Reproduce: `make bench`, or `python3 bench/backup_bench.py build/kwatt` (it runs "
        "`build/kwatt_load_bench`, built beside `build/kwatt` by `make build`; ~"
        f"{max(1, round(results['elapsed_s'] / 60))} min)",
        f"- Setup: one `kwatt serve --simulate` (nothing pinned; server and clients share the "
        f"{m['nproc']} cores) with one Lyon job over the 20 nova nodes of type "
        f"`monitor={METRIC}` (50 rows/s/node, 1000 rows/s); windows of "
        f"{results['small_window_s']} s (~{sl}) and {results['large_window_s']} s (~{ll}) "
        f"from the job's start. `kwatt backup --api URL --nodes nova-1.lyon,... --start "
        f"--end --metrics {METRIC} -o DIR`; EnOSlib's `Kwollect` service (`deploy()`, "
        f"`start(start_time=...)`, `stop(stop_time=...)`, `backup(backup_dir=..., "
        f"metrics=['{METRIC}'])`) in a fresh interpreter whose `HOME` holds "
        f"`.python-grid5000.yaml` with `uri: URL`. Each is a child process under GNU `time`: "
        f"time = wall time of the process for kwatt, of the `backup()` call alone for EnOSlib "
        f"(interpreter and imports left out, ~{(en or {}).get('import_s') or 0:.1f} s); peak "
        f"RSS = `%M`, the largest of the runs; median of {results['repeats']} runs, kwatt and "
        f"EnOSlib interleaved. The API's answer: `curl -s URL/sites/lyon/metrics?nodes=...&"
        f"start_time=...&end_time=...&metrics={METRIC}` (its bytes, `wc -c`), counted untimed. "
        f"Every archive's rows are checked against the API's, its decompressed text against "
        f"the API's rows byte for byte in size, and `kwatt inspect --verify` passes. MB = "
        f"10^6 bytes.",
        "",
        "**Size.** Archive = the bytes of `data/*.jsonl.zst` (the manifest, "
        f"{small['manifest_bytes'] / 1e3:.0f} kB for 20 nodes, left out)." if "manifest_bytes"
        in small else "**Size.** Archive = the bytes of `data/*.jsonl.zst` (the manifest left "
        "out).",
        "",
        "| case | rows | API's JSON (MB) | archive (MB) | archive / JSON | JSON / archive | "
        "files |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]

    def size_row(label: str, s: dict, ref: dict) -> str:
        r = s["data_bytes"] / ref["bytes"]
        return (f"| {label} | {s['rows']:,} | {ref['bytes'] / 1e6:,.1f} | "
                f"{s['data_bytes'] / 1e6:,.2f} | {r:.4f} (1/{1 / r:.1f}) | {1 / r:.1f}× | "
                f"{s['files']} |")

    lines.append(size_row(f"`{METRIC}`, {sl} ({results['small_window_s']} s)", small,
                          api["small"]))
    lines.append(size_row(f"`{METRIC}`, {ll} ({results['large_window_s']} s)", large,
                          api["large"]))
    lines.append(size_row(f"every metric of the job (`--job lyon:{JOB_UID}`, first "
                          f"{results['small_window_s']} s; information)", job, api["job"]))
    if en:
        lines.append(f"| EnOSlib `backup()`, `{METRIC}`, {sl} (uncompressed JSON Lines) | "
                     f"{en['rows']:,} | {api['small']['bytes'] / 1e6:,.1f} | "
                     f"{en['data_bytes'] / 1e6:,.1f} | "
                     f"{en['data_bytes'] / api['small']['bytes']:.3f} | "
                     f"{api['small']['bytes'] / en['data_bytes']:.2f}× | {en['files']} |")

    lines += [
        "",
        "**Backup.**",
        "",
        "| case | tool | rows | time (s, median) | rows/s | CPU (s) | peak RSS (MB) | output (MB) "
        "| runs |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|",
    ]

    def backup_row(case: str, tool: str, s: dict) -> str:
        return (f"| {case} | {tool} | {s['rows']:,} | {h.seconds_text(s['seconds'])} | "
                f"{s['rows'] / s['seconds']:,.0f} | {s['cpu_s']:.2f} | {fmt_mb(s['peak_mb'])} | "
                f"{s['data_bytes'] / 1e6:,.2f} | {s['runs']} |")

    lines.append(backup_row(f"{sl} ({results['small_window_s']} s), load "
                            f"{results['loadavg_small']}", "`kwatt backup --nodes`", small))
    if en:
        lines.append(backup_row("", "EnOSlib `Kwollect.backup`", en))
    lines.append(backup_row(f"{ll} ({results['large_window_s']} s), load "
                            f"{results['loadavg_large']}", "`kwatt backup --nodes`", large))
    if en:
        lines.append("|  | EnOSlib `Kwollect.backup` | – | not run | | | | | 0 |")
    jw = results.get("job_watt") or {}
    for key, label, window in (("small", sl, results["small_window_s"]),
                               ("large", ll, results["large_window_s"])):
        if key in jw:
            lines.append(backup_row(f"{label} ({window} s), information",
                                    f"`kwatt backup --job lyon:{JOB_UID} --metrics {METRIC}`",
                                    jw[key]))
    lines.append(backup_row(f"every metric of the job, {results['small_window_s']} s "
                            f"(information)", f"`kwatt backup --job lyon:{JOB_UID}`", job))
    if "small" in jw and "large" in jw:
        lines += ["", f"Note: peak RSS, {ll} minus {sl}: "
                  f"{large['peak_mb'] - small['peak_mb']:+.1f} MB with `--nodes`, "
                  f"{jw['large']['peak_mb'] - jw['small']['peak_mb']:+.1f} MB with `--job` "
                  f"(same rows). "
                  f"Peaks per run with `--nodes`: "
                  + ", ".join(f"{x:.0f}" for x in small["peak_mb_runs"]) + f" MB ({sl}); "
                  + ", ".join(f"{x:.0f}" for x in large["peak_mb_runs"]) + f" MB ({ll}); "
                  f"the bar compares the largest of each."]
    if en:
        est_gb = en['peak_mb'] * results['large_rows'] / results['small_rows'] / 1e3
        lines += [
            "",
            f"EnOSlib beside kwatt, {sl}: EnOSlib takes {en['seconds'] / small['seconds']:.1f}× "
            f"kwatt's time ({h.seconds_text(en['seconds'])} s for the call alone, "
            f"{h.seconds_text(en['wall_s'])} s for its process, against {h.seconds_text(small['seconds'])} s), "
            f"{en['peak_mb'] / small['peak_mb']:.1f}× its peak memory "
            f"({fmt_mb(en['peak_mb'])} MB against {fmt_mb(small['peak_mb'])} MB), and writes "
            f"{en['data_bytes'] / small['data_bytes']:.0f}× its bytes "
            f"({en['data_bytes'] / 1e6:,.1f} MB of uncompressed JSON Lines, "
            + ("the API's rows byte for byte in size, "
               if en['data_bytes'] == small.get('text_bytes') else
               f"{en['data_bytes'] - (small.get('text_bytes') or 0):+,} bytes from the API's "
               f"rows as kwatt keeps them, since it writes them again with `json.dumps`; ")
            + f"against {small['data_bytes'] / 1e6:.2f} MB). Unlike kwatt it does not sync "
            f"its files, keeps no manifest or checksum, and cannot resume. It was not run at "
            f"{ll}: it holds every row as Python objects before writing any "
            f"(`get_metrics`); linear in rows from its peak here, it would need "
            f"~{est_gb:.0f} GB"
            + (f", more than this machine's {m['mem_gib']:.0f} GiB" if est_gb * 1e9 >
               m['mem_gib'] * 2**30 else "")
            + f" (the fetch benchmark saw "
            f"EnOSlib's `get_metrics` killed at 18 GB of RSS for 10 M rows, ~21 GB estimated).",
        ]

    # Loading: 36 bytes of columns per row (time 8, offset 4, device 4, metric 4, value 8,
    # labels 4, raw_end 4), plus the rows' text.
    table_mb = load[0]["raw_bytes"] / 1e6 + 36 * load[0]["rows"] / 1e6
    lines += [
        "",
        f"**Loading.** `kwatt_load_bench DIR` (bench/load_archive_bench.cc) on the {ll[:-5]}-row "
        f"archive ({load[0]['compressed_bytes'] / 1e6:,.1f} MB compressed, "
        f"{load[0]['text_bytes'] / 1e6:,.0f} MB of row text, {large['files']} files), its files "
        f"in the page cache (just written): `LoadArchive(dir, opts, &interner, &batch, "
        f"&report)` with default options (every row, threads = the {m['nproc']} cores), time "
        f"= `steady_clock` around the call only; {results['repeats']} runs per mode, each "
        f"mode in its own process. *Fresh*: each run into a new `StringInterner` and "
        f"`RowBatch`, whose memory (~{table_mb:,.0f} MB with keep_raw) is touched for the "
        f"first time, as in a program's first load; *reused*: one untimed load, "
        f"then `Clear()` and load again into the capacity it has.",
        "",
        "| batch | keep_raw | rows | runs (s) | best (s) | median (s) | best rows/s | "
        "median rows/s | process peak RSS (MB) |",
        "|---|---|---:|---|---:|---:|---:|---:|---:|",
    ]
    for c in load:
        lines.append(f"| {c['batch']} | {str(c['keep_raw']).lower()} | {c['rows']:,} | "
                     + ", ".join(f"{x:.2f}" for x in c["seconds_runs"]) + " | "
                     f"{c['best_s']:.3f} | {c['median_s']:.3f} | {c['best_rows_per_s']:,.0f} | "
                     f"{c['median_rows_per_s']:,.0f} | {fmt_mb(c['process_peak_mb'])} |")
    fresh = next(c for c in load if c["batch"] == "fresh" and c["keep_raw"])
    reused = next(c for c in load if c["batch"] == "reused" and c["keep_raw"])
    fresh_nr = next(c for c in load if c["batch"] == "fresh" and not c["keep_raw"])
    reused_nr = next(c for c in load if c["batch"] == "reused" and not c["keep_raw"])
    lines += [
        "",
        ("Note: first-touch memory is slow on this VM (the host backs its memory lazily): "
         if fresh["median_s"] > 1.2 * reused["median_s"] else "Note: ")
        + f"loading into a fresh batch, whose pages are touched for the first time, took "
        f"{fresh['median_s'] / reused['median_s']:.2f}× the time of loading into a reused one "
        f"(median {fresh['median_s']:.3f} s against {reused['median_s']:.3f} s with keep_raw; "
        f"{fresh_nr['median_s'] / reused_nr['median_s']:.2f}× without the rows' text). "
        f"The bar is taken on the columnar table (time, offset, device, metric, value, labels: "
        f"what `kwatt.load`, energy and stats read) loaded into a fresh batch, what a program's "
        f"first load pays; keeping every row's text as well (keep_raw, 165 bytes a row, for "
        f"byte-exact re-export) and the reused batch are shown beside it.",
    ]
    # A first fresh run much slower than the next ones: memory that no process had touched
    # for a while (the first allocation of that size since the backups ran).
    first, rest = fresh["seconds_runs"][0], fresh["seconds_runs"][1:]
    if rest and first > 1.5 * statistics.median(rest):
        lines += ["", f"Note: the first fresh run took {first:.2f} s, "
                  f"{first / statistics.median(rest):.1f}× the next ones: it was the first time "
                  f"since the backups that ~{table_mb / 1e3:.1f} GB were allocated, pages the "
                  f"VM's host had apparently not backed yet (the next runs, fresh to the process "
                  f"too, reuse pages the kernel just freed). The median leaves it out."]
    if results.get("problems"):
        lines += ["", "Problems: " + "; ".join(results["problems"])]

    # Bars.
    size_r = small["data_bytes"] / api["small"]["bytes"]
    mem_d = large["peak_mb"] - small["peak_mb"]
    lines += [
        "",
        "| bar | target | measured | ratio | met |",
        "|---|---:|---:|---:|---|",
        f"| archive / API's JSON, `{METRIC}`, {sl} | ≤ 1/8 (0.125) | {size_r:.4f} "
        f"(1/{1 / size_r:.1f}: {small['data_bytes'] / 1e6:.2f} MB for "
        f"{api['small']['bytes'] / 1e6:.1f} MB) | {size_r / BAR_SIZE_FRACTION:.2f} of the "
        f"allowance | {'yes' if size_r <= BAR_SIZE_FRACTION else 'no'} |",
        f"| peak RSS of `kwatt backup`, {ll} minus {sl} | ≤ {BAR_MEMORY_MB:.0f} MB | "
        f"{mem_d:+.1f} MB ({fmt_mb(large['peak_mb'])} − {fmt_mb(small['peak_mb'])} MB) | "
        f"{mem_d / BAR_MEMORY_MB:.2f} of the allowance | "
        f"{'yes' if mem_d <= BAR_MEMORY_MB else 'no'} |",
        f"| LoadArchive into the columnar table, {ll}, fresh batch (keep_raw false, as "
        f"`kwatt.load`; median of {results['repeats']}) | ≥ {BAR_LOAD_ROWS_PER_S:,} rows/s | "
        f"{fresh_nr['median_rows_per_s']:,.0f} rows/s (best {fresh_nr['best_rows_per_s']:,.0f})"
        f" | {fresh_nr['median_rows_per_s'] / BAR_LOAD_ROWS_PER_S:.2f}× the bar | "
        f"{'yes' if fresh_nr['median_rows_per_s'] >= BAR_LOAD_ROWS_PER_S else 'no'} |",
    ]
    for label, c in (("with every row's text too (keep_raw), fresh batch", fresh),
                     ("with every row's text too (keep_raw), reused batch (`Clear()`, load "
                      "again)", reused)):
        r = c["median_rows_per_s"]
        lines.append(f"| same, {label} | ≥ {BAR_LOAD_ROWS_PER_S:,} rows/s | {r:,.0f} rows/s "
                     f"(best {c['best_rows_per_s']:,.0f}) | {r / BAR_LOAD_ROWS_PER_S:.2f}× the "
                     f"bar | {'yes' if r >= BAR_LOAD_ROWS_PER_S else 'no'} (information) |")
    lines.append("")
    return "\n".join(lines)


def enoslib_version(python: str) -> str | None:
    code = "import importlib.metadata as m, enoslib; print(m.version('enoslib'))"
    try:
        res = subprocess.run([python, "-c", code], capture_output=True, text=True, timeout=120)
    except (OSError, subprocess.SubprocessError):
        return None
    return res.stdout.strip() if res.returncode == 0 else None


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("binary", nargs="?", default=os.path.join(ROOT, "build", "kwatt"),
                    help="the kwatt binary (default: build/kwatt); kwatt_load_bench beside it")
    ap.add_argument("--repeats", type=int, default=3, help="timed runs per case (median kept)")
    ap.add_argument("--sizes", default=f"{SMALL_ROWS},{LARGE_ROWS}",
                    help="rows of the small and the large backups (default: 1 M and 20 M)")
    ap.add_argument("--no-enoslib", action="store_true", help="skip EnOSlib")
    ap.add_argument("--python", default=os.path.join(ROOT, ".venv", "bin", "python"),
                    help="interpreter with enoslib (default: .venv)")
    ap.add_argument("--no-wait", action="store_true",
                    help="do not wait for other benchmarks to end and the load to drop")
    ap.add_argument("--no-write", action="store_true",
                    help="do not touch BENCHMARKS.md nor bench/out/")
    ap.add_argument("--benchmarks-md", default=os.path.join(ROOT, "BENCHMARKS.md"))
    ap.add_argument("--render", metavar="JSON",
                    help="measure nothing: write the section again from a results file "
                         "(bench/out/backup_bench.json)")
    args = ap.parse_args()

    if args.render:
        with open(args.render) as f:
            section = render(json.load(f))
        print(section)
        if not args.no_write:
            h.write_section(args.benchmarks_md, section, SECTION_TITLE)
        return 0

    binary = os.path.abspath(args.binary)
    load_bench = os.path.join(os.path.dirname(binary), "kwatt_load_bench")
    for path, what in ((binary, "kwatt"), (load_bench, "kwatt_load_bench")):
        if not os.access(path, os.X_OK):
            h.log(f"no executable {what} at {path} (build it with `make build`)")
            return 2
    if shutil.which("curl") is None or not os.access(h.TIME, os.X_OK):
        h.log(f"`curl` or {h.TIME} is missing (apt-get install curl time)")
        return 2
    small_rows, large_rows = (int(x) for x in args.sizes.split(","))
    if h.window_for_rows(large_rows) > h.JOB_SECONDS:
        h.log(f"the job lasts {h.JOB_SECONDS} s: at most {h.JOB_SECONDS * 1000:,} rows")
        return 2
    use_enoslib = not args.no_enoslib
    enos_version = enoslib_version(args.python) if use_enoslib else None
    if use_enoslib and enos_version is None:
        h.log(f"{args.python} cannot import enoslib (make deps): EnOSlib skipped")
        use_enoslib = False

    signal.signal(signal.SIGTERM, h.on_signal)
    signal.signal(signal.SIGHUP, h.on_signal)
    t_start = time.monotonic()
    wait = {"waited_s": 0.0} if args.no_wait else wait_for_quiet()
    tmpdir = tempfile.mkdtemp(prefix="kwatt-backup-bench-")
    problems: list[str] = []
    try:
        # Copies of the binaries: a rebuild of build/ during the run changes nothing.
        built = binary
        binary = os.path.join(tmpdir, "kwatt")
        shutil.copy2(built, binary)
        load_copy = os.path.join(tmpdir, "kwatt_load_bench")
        shutil.copy2(load_bench, load_copy)
        results: dict = {
            "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
            "machine": h.machine_info(),
            "version": h.kwatt_version(binary),
            "binary": built,
            "binary_sha256": h.sha256_of(binary),
            "enoslib_version": enos_version or "not run",
            "repeats": args.repeats,
            "wait": wait,
            "loadavg_start": h.loadavg(),
        }
        h.log(f"load average {results['loadavg_start']}")
        tools = Tools(binary, load_copy, args.python, tmpdir)
        jobs_file = os.path.join(tmpdir, "jobs.json")
        h.write_jobs_file(jobs_file)
        with h.Server(binary, jobs_file, tmpdir, None, "serve") as server:
            tools.use_server(server)
            results.update(measure(tools, args.repeats, use_enoslib, problems, small_rows,
                                   large_rows))
            if not server.alive():
                raise BenchError(f"the server died: {server.stderr()}")
        # The server is stopped: loading has the machine to itself.
        archive = results.pop("large_archive_dir")
        results["load"] = load_case(tools, archive, args.repeats, problems)
        shutil.rmtree(archive, ignore_errors=True)

        results["problems"] = problems
        for p in problems:
            h.log(f"WARNING: {p}")
        results["loadavg_end"] = h.loadavg()
        results["elapsed_s"] = time.monotonic() - t_start
        section = render(results)
        print(section)
        if not args.no_write:
            h.publish(args.benchmarks_md, section, SECTION_TITLE, results, "backup_bench")
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
