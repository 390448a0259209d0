#!/usr/bin/env python3
"""Benchmark of the Python front end: kwatt's get_metrics and to_pandas against EnOSlib's.

Usage: python3 bench/python_bench.py [KWATT_BINARY] [--repeats N] [--large-repeats N]
                                     [--enoslib-large-repeats N] [--sizes N,N] [--no-enoslib]
                                     [--mem-limit-gb G] [--timeout S] [--no-wait] [--no-write]
       python3 bench/python_bench.py --render bench/out/python_bench.json  (the section again)

KWATT_BINARY (default build/kwatt) is the server; the kwatt Python package and EnOSlib are the
ones the interpreter of --python (default: the project's .venv) imports. Needs GNU `time`
(/usr/bin/time) and `curl`.

What it does:
  0. waits (up to 20 min) until no other bench/*_bench.py runs and the 1-minute load average is
     below 1.5 (backup_bench.wait_for_quiet; --no-wait: does not wait);
  1. starts `kwatt serve --simulate` with harness.py's jobs file (one Lyon job over the 20
     nova nodes, type monitor=wattmetre_power_watt: 50 rows/s/node, 1000 rows/s) and writes a
     HOME holding `.python-grid5000.yaml` with `uri: URL` for every child;
  2. per size (~1 M and ~10 M rows: windows of 1000 s and 10000 s from the job's start), counts
     the API's rows once with curl (untimed), then runs, interleaved (the tool that goes first
     alternates from round to round), each in a fresh interpreter under GNU time (wall time,
     peak RSS = %M):
       - kwatt: `kwatt.Kwollect(nodes=[FQDN...], api=URL, progress=False)`, `start(t0)`,
         `stop(t1)`, then `get_metrics(metrics=[...])`, or `to_pandas(metrics=[...])`;
       - EnOSlib: `enoslib.Kwollect(nodes=[enoslib.Host(FQDN)...])`, `deploy()`, `start(t0)`,
         `stop(t1)`, then `get_metrics(metrics=[...])`, or `get_metrics_pandas(metrics=[...])`;
     the time is the call (from Kwollect(...) to its return, on the child's clock: interpreter,
     imports (pandas imported by every child beforehand) and freeing at exit left out); every
     result's rows are counted and checked against the API's. Median of N runs (--repeats,
     default 3, at ~1 M rows; --large-repeats, default 3, for kwatt and
     --enoslib-large-repeats, default 1, for EnOSlib at ~10 M rows);
  3. once per size, for information, where kwatt's get_metrics spends its time: the same
     calls as get_metrics makes (`Kwollect._fetch`: the C++ fetch into the columnar table,
     then `table.rows_by_node`), and `kwatt.frames.table_frame` (to_pandas' conversion), each
     timed with time.perf_counter, with the child's peak RSS after each;
  4. at ~1 M rows, once: kwatt's get_metrics result == EnOSlib's get_metrics result regrouped
     by node ({site: [rows]} -> {FQDN: [rows]}, each node's rows in the order EnOSlib has them),
     in one child; and, for information, the peak RSS of a child that only imports each package;
  5. prints a markdown section and writes "## Python: get_metrics and to_pandas" of
     BENCHMARKS.md (the other sections are kept), and bench/out/python_bench.json.

Memory: every child runs under a watchdog that kills it (SIGKILL) when its RSS passes
--mem-limit-gb (default 16; lowered to leave 1.5 GB of the memory available when it starts) or
when it runs past --timeout (default 1200 s), and under an address-space limit 2 GB above that
(RLIMIT_AS, a backstop: MemoryError); such a run is reported as killed, its time and memory as
lower bounds. A child that fails (EnOSlib's get_metrics_pandas on 50 Hz data with pandas >= 2)
is reported with the first line of its error. A kwatt child that cannot import kwatt (the
package being reinstalled) is retried every 30 s for up to 10 min.
Every server started is stopped (SIGTERM, then SIGKILL), even on error; temp files are removed.
MB means 10^6 bytes throughout.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

import harness as h
import backup_bench as bb  # noqa: E402  (waiting, server, measured children; runs nothing)
import fetch_bench as fb  # noqa: E402  (mem_available_bytes, MEM_HEADROOM_BYTES; runs nothing)

ROOT = h.ROOT
SECTION_TITLE = "## Python: get_metrics and to_pandas"

SITE = h.SITE
NODES = h.NODES
FQDNS = [f"{uid}.{SITE}.grid5000.fr" for uid in NODES]
METRIC = h.METRIC
T0 = h.JOB_START_EPOCH

SMALL_ROWS = 1_000_000
LARGE_ROWS = 10_000_000
MEM_LIMIT_GB = 16.0
AS_BACKSTOP_BYTES = int(2e9)  # RLIMIT_AS = the RSS limit + this
TOOL_TIMEOUT_S = 1200.0
IMPORT_RETRY_S = 30
IMPORT_RETRY_MAX_S = 600

BenchError = bb.BenchError

# (key, tool, the call as shown)
OPS = {
    "kwatt_get_metrics": ("kwatt", "`kwatt.Kwollect.get_metrics`"),
    "kwatt_to_pandas": ("kwatt", "`kwatt.Kwollect.to_pandas`"),
    "enoslib_get_metrics": ("enoslib", "EnOSlib `Kwollect.get_metrics`"),
    "enoslib_get_metrics_pandas": ("enoslib", "EnOSlib `Kwollect.get_metrics_pandas`"),
}
# (what is compared, kwatt's operation, EnOSlib's)
PAIRS = [("get_metrics", "kwatt_get_metrics", "enoslib_get_metrics"),
         ("DataFrame", "kwatt_to_pandas", "enoslib_get_metrics_pandas")]


# ---------------------------------------------------------------------------------------------
# The child: one operation in a fresh interpreter; prints one JSON line, then leaves without
# freeing its objects (os._exit).

CHILD = r"""
import json, os, resource, sys, time
op, url, metric = sys.argv[1], sys.argv[2], sys.argv[5]
start, end = int(sys.argv[3]), int(sys.argv[4])
nodes, as_cap = sys.argv[6].split(","), int(sys.argv[7])
if as_cap:
    resource.setrlimit(resource.RLIMIT_AS, (as_cap, as_cap))

def emit(**kw):
    print(json.dumps(kw), flush=True)

def peak_mb():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 / 1e6

t0 = time.perf_counter()
info = {}
try:
    import pandas
    if op.startswith("kwatt") or op == "check":
        import kwatt
        kwatt.Kwollect  # imports kwatt.service (and EnOSlib's Service) on first use
        core = kwatt._core.__file__
        info.update(kwatt_version=kwatt.__version__, core=core,
                    core_mtime=os.stat(core).st_mtime)
    if op.startswith("enoslib") or op == "check":
        import enoslib
except ImportError as e:  # kwatt being reinstalled: the parent retries
    emit(import_error=f"{type(e).__name__}: {e}")
    os._exit(3)
t1 = time.perf_counter()
info["import_s"] = t1 - t0
info["import_peak_mb"] = peak_mb()
OPS = ("kwatt_get_metrics", "kwatt_to_pandas", "enoslib_get_metrics", "enoslib_get_metrics_pandas")
emit(**info)  # first line: what a killed child leaves


def kwatt_service():
    k = kwatt.Kwollect(nodes=nodes, api=url, progress=False)
    k.start(start)
    k.stop(end)
    return k


def enoslib_service():
    k = enoslib.Kwollect(nodes=[enoslib.Host(n) for n in nodes])
    k.deploy()
    k.start(start)
    k.stop(end)
    return k


def deferred_gc():
    # Seconds the next 200,000 allocations take beyond the same allocations again: the garbage
    # collector's passes that the call left to come (objects made while it was paused).
    a = time.perf_counter()
    first = [{} for _ in range(200_000)]
    b = time.perf_counter()
    second = [{} for _ in range(200_000)]
    c = time.perf_counter()
    return max(0.0, (b - a) - (c - b))


error = None
result = None
try:
    if op == "kwatt_get_metrics":
        result = kwatt_service().get_metrics(metrics=[metric])
    elif op == "kwatt_to_pandas":
        result = kwatt_service().to_pandas(metrics=[metric])
    elif op == "enoslib_get_metrics":
        result = enoslib_service().get_metrics(metrics=[metric])
    elif op == "enoslib_get_metrics_pandas":
        result = enoslib_service().get_metrics_pandas(metrics=[metric])
    elif op == "kwatt_breakdown":
        # What get_metrics does (service.py), stage by stage, then to_pandas' conversion.
        from kwatt.frames import table_frame
        k = kwatt_service()
        a = time.perf_counter()
        subset, table = k._fetch([metric], None, None, False, "kwatt get_metrics")
        b = time.perf_counter()
        info.update(fetch_s=b - a, peak_after_fetch_mb=peak_mb(), complete=table.report["complete"])
        rows = table.rows_by_node(subset)
        c = time.perf_counter()
        info.update(rows_by_node_s=c - b, deferred_gc_s=deferred_gc(),
                    peak_after_rows_mb=peak_mb(), rows=sum(len(v) for v in rows.values()))
        d = time.perf_counter()
        frame = table_frame(table)
        e = time.perf_counter()
        info.update(table_frame_s=e - d, frame_rows=len(frame), peak_after_frame_mb=peak_mb())
    elif op == "check":
        mine = kwatt_service().get_metrics(metrics=[metric])
        theirs = enoslib_service().get_metrics(metrics=[metric])
        regrouped = {n: [] for n in nodes}
        for site, rows in theirs.items():
            for row in rows:
                regrouped.setdefault(f"{row['device_id']}.{site}.grid5000.fr", []).append(row)
        equal = mine == regrouped
        info.update(equal=equal, kwatt_rows=sum(len(v) for v in mine.values()),
                    enoslib_rows=sum(len(v) for v in theirs.values()),
                    enoslib_sites=sorted(theirs), kwatt_keys=list(mine) == nodes)
        if not equal:
            for n in sorted(set(mine) | set(regrouped)):
                a, b = mine.get(n), regrouped.get(n)
                if a != b:
                    where = None
                    if a is not None and b is not None:
                        where = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y),
                                     min(len(a), len(b)))
                    info["first_difference"] = {
                        "node": n, "kwatt_rows": None if a is None else len(a),
                        "enoslib_rows": None if b is None else len(b), "index": where,
                        "kwatt": a[where] if a and where is not None and where < len(a) else None,
                        "enoslib": b[where] if b and where is not None and where < len(b) else None}
                    break
except MemoryError:
    error = "MemoryError"
except Exception as e:
    text = str(e).strip().splitlines()
    error = f"{type(e).__name__}: {text[0] if text else ''}"[:300]
t2 = time.perf_counter()
# Out of the except blocks: the failed call's frames (and what they held) are released.
info["call_s"] = t2 - t1
if error is None and op in OPS:  # first thing after the call: no allocation before
    info["deferred_gc_s"] = deferred_gc()
if error is not None:
    emit(error=error, memory_error=error == "MemoryError", child_peak_mb=peak_mb(), **info)
    os._exit(4)
if isinstance(result, dict):
    info.update(rows=sum(len(v) for v in result.values()),
                per_key={k: len(v) for k, v in result.items()})
elif result is not None:
    info.update(rows=len(result), columns=list(map(str, result.columns)),
                dtypes={str(c): str(t) for c, t in result.dtypes.items()})
emit(**info)
os._exit(0)
"""


# ---------------------------------------------------------------------------------------------
# Running the children


class Children:
    def __init__(self, python: str, tmpdir: str, mem_limit: int, timeout_s: float):
        self.python = python
        self.tmpdir = tmpdir
        self.mem_limit = mem_limit
        self.timeout_s = timeout_s
        self.tools = None  # backup_bench.Tools: writes the HOME with `uri: URL`
        self.n = 0
        self.cores: set[tuple[str, float]] = set()  # kwatt's _core seen by the children

    def use_server(self, server: h.Server) -> None:
        self.tools = bb.Tools("", "", self.python, self.tmpdir)
        self.tools.use_server(server)

    def run(self, op: str, start: int, end: int) -> dict:
        """One child under GNU time; its JSON line merged in; status ok, killed or failed."""
        waited = 0.0
        while True:
            self.n += 1
            limit = min(self.mem_limit,
                        max(0, fb.mem_available_bytes() - fb.MEM_HEADROOM_BYTES))
            argv = [self.python, "-c", CHILD, op, self.tools.base_url, str(start), str(end),
                    METRIC, ",".join(FQDNS), str(limit + AS_BACKSTOP_BYTES)]
            run = h.run_measured(argv, h.child_env(self.tools.home), self.tmpdir,
                                 f"{op}-{self.n}", mem_limit=limit, timeout_s=self.timeout_s)
            out = {}
            for line in run["stdout"].strip().splitlines():  # later lines complete earlier ones
                try:
                    out.update(json.loads(line))
                except ValueError:
                    continue
            if "import_error" in out and waited < IMPORT_RETRY_MAX_S:
                h.log(f"{op}: {out['import_error']} (package being reinstalled?): retrying in "
                    f"{IMPORT_RETRY_S} s")
                time.sleep(IMPORT_RETRY_S)
                waited += IMPORT_RETRY_S
                continue
            break
        stderr = run.pop("stderr")
        run.pop("stdout")
        run.update(out)
        run["op"] = op
        run["mem_limit_mb"] = limit / 1e6
        run["loadavg"] = h.loadavg()
        if "core" in out:
            self.cores.add((out["core"], out["core_mtime"]))
        if run["killed"] or out.get("memory_error"):
            run["status"] = "killed"
            run["why"] = run["killed"] or (f"MemoryError at the address-space limit "
                                           f"({(limit + AS_BACKSTOP_BYTES) / 1e9:.1f} GB)")
            if not run["killed"]:  # the call's own clock, up to the MemoryError
                run["seconds"] = out.get("call_s")
            else:  # the process's time less its imports (the last line never came)
                run["seconds"] = run["wall_s"] - (out.get("import_s") or 0)
        elif run["returncode"] != 0 or "error" in out or "import_error" in out:
            run["status"] = "failed"
            tail = (stderr.strip().splitlines() or ["?"])[-1]
            run["error"] = out.get("error") or out.get("import_error") or tail[:300]
            run["seconds"] = out.get("call_s")
        else:
            run["status"] = "ok"
            run["seconds"] = out["call_s"]
        return run


def describe(run: dict) -> str:
    if run["status"] == "ok":
        rows = f", {run['rows']:,} rows" if "rows" in run else ""
        return (f"{run['seconds']:.2f} s (process {run['wall_s']:.2f} s), peak "
                f"{run['peak_mb']:,.0f} MB{rows}")
    if run["status"] == "killed":
        return f"KILLED ({run['why']}), peak {run['peak_mb']:,.0f} MB"
    return f"FAILED after {run['seconds'] or 0:.1f} s: {run['error']}"


def summarize(runs: list[dict]) -> dict:
    """Median time of the runs that succeeded, largest peak; or how the first failure ended."""
    ok = [r for r in runs if r["status"] == "ok"]
    s: dict = {"runs": len(runs), "ok_runs": len(ok),
               "seconds_runs": [r["seconds"] for r in runs],
               "wall_s_runs": [r["wall_s"] for r in runs],
               "peak_mb_runs": [r["peak_mb"] for r in runs],
               "statuses": [r["status"] for r in runs]}
    if ok:
        s.update(status="ok", seconds=statistics.median(r["seconds"] for r in ok),
                 wall_s=statistics.median(r["wall_s"] for r in ok),
                 cpu_s=statistics.median(r["cpu_s"] for r in ok),
                 import_s=statistics.median(r["import_s"] for r in ok),
                 deferred_gc_s=statistics.median(r.get("deferred_gc_s", 0.0) for r in ok),
                 peak_mb=max(r["peak_mb"] for r in ok), rows=ok[-1].get("rows"),
                 dtypes=ok[-1].get("dtypes"))
        return s
    bad = runs[0]
    s.update(status=bad["status"], seconds=bad.get("seconds"), wall_s=bad["wall_s"],
             cpu_s=bad["cpu_s"], peak_mb=bad["peak_mb"], mem_limit_mb=bad["mem_limit_mb"],
             why=bad.get("why"), error=bad.get("error"))
    return s


# ---------------------------------------------------------------------------------------------
# Cases


def size_case(kids: Children, key: str, target_rows: int, kwatt_repeats: int,
              enoslib_repeats: int, problems: list[str]) -> dict:
    window = h.window_for_rows(target_rows)
    start, end = T0, T0 + window
    label = bb.rows_label(target_rows)
    query = f"nodes={','.join(NODES)}&start_time={start}&end_time={end}&metrics={METRIC}"
    h.log(f"{label}: the API's answer (untimed, curl)")
    api = bb.api_reference(kids.tools.base_url, query)
    h.log(f"{label}: {api['rows']:,} rows, {api['bytes'] / 1e6:,.1f} MB of JSON")
    want = h.expected_rows(len(NODES), window)
    if api["rows"] != want:
        problems.append(f"{label}: the API sent {api['rows']:,} rows, {want:,} expected")
    case: dict = {"key": key, "target_rows": target_rows, "window_s": window, "api": api,
                  "loadavg": h.loadavg(), "runs": {op: [] for op in OPS}}
    rounds = max(kwatt_repeats, enoslib_repeats)
    for i in range(rounds):
        order = []
        if i < kwatt_repeats:
            order.append(["kwatt_get_metrics", "kwatt_to_pandas"])
        if i < enoslib_repeats:
            order.append(["enoslib_get_metrics", "enoslib_get_metrics_pandas"])
        if i % 2:
            order.reverse()  # the tool that goes first alternates
        for op in (op for group in order for op in group):
            run = kids.run(op, start, end)
            case["runs"][op].append(run)
            h.log(f"{label}: round {i + 1}/{rounds}: {op}: {describe(run)}")
            if run["status"] == "ok" and run.get("rows") != api["rows"]:
                problems.append(f"{label}: {op} returned {run.get('rows')} rows, the API sent "
                                f"{api['rows']:,}")
            if run["status"] != "ok" and OPS[op][0] == "kwatt":
                problems.append(f"{label}: {op} {run['status']}: "
                                f"{run.get('error') or run.get('why')}")
    case["summary"] = {op: summarize(runs) for op, runs in case["runs"].items() if runs}

    run = kids.run("kwatt_breakdown", start, end)
    h.log(f"{label}: breakdown: {describe(run)}"
        + (f": fetch {run['fetch_s']:.2f} s, rows_by_node {run['rows_by_node_s']:.2f} s, "
           f"table_frame {run['table_frame_s']:.3f} s" if run["status"] == "ok" else ""))
    if run["status"] == "ok" and run.get("rows") != api["rows"]:
        problems.append(f"{label}: breakdown: rows_by_node gave {run.get('rows')} rows")
    case["breakdown"] = run
    return case


def check_case(kids: Children, window: int, problems: list[str]) -> dict:
    run = kids.run("check", T0, T0 + window)
    if run["status"] != "ok":
        problems.append(f"correctness check {run['status']}: "
                        f"{run.get('error') or run.get('why')}")
    elif not run["equal"]:
        problems.append(f"kwatt's get_metrics differs from EnOSlib's regrouped by node: "
                        f"{json.dumps(run.get('first_difference'))[:400]}")
    h.log(f"check: {describe(run)}: equal={run.get('equal')}")
    return run


# ---------------------------------------------------------------------------------------------
# Report


def fmt_s(x: float | None) -> str:
    return "?" if x is None else h.seconds_text(x)


def time_cell(s: dict) -> str:
    if s["status"] == "ok":
        return fmt_s(s["seconds"])
    if s["status"] == "killed":
        return f"> {fmt_s(s['seconds'])} (killed)"
    return f"failed after {fmt_s(s['seconds'])}"


def peak_cell(s: dict) -> str:
    if s["status"] == "killed":
        return f"> {s['mem_limit_mb'] / 1e3:.3g} GB (killed)"
    cell = bb.fmt_mb(s["peak_mb"])
    return cell if s["status"] == "ok" else f"{cell} (at the failure)"


def ratio_cells(kw: dict | None, en: dict | None) -> tuple[str, str]:
    """EnOSlib / kwatt, time and peak RSS; bounds for a killed EnOSlib run."""
    if not kw or not en or kw["status"] != "ok":
        return "–", "–"
    if en["status"] == "ok":
        with_gc = ((en["seconds"] + en["deferred_gc_s"]) / (kw["seconds"] + kw["deferred_gc_s"]))
        return (f"{en['seconds'] / kw['seconds']:.1f}× ({with_gc:.1f}× with the GC passes "
                f"left)", f"{en['peak_mb'] / kw['peak_mb']:.1f}×")
    if en["status"] == "killed":
        with_gc = en["seconds"] / (kw["seconds"] + kw["deferred_gc_s"])
        return (f"≥ {en['seconds'] / kw['seconds']:.1f}× (≥ {with_gc:.1f}× with the GC passes "
                f"left; killed)",
                f"≥ {en['mem_limit_mb'] / kw['peak_mb']:.1f}× (killed)")
    # Failed: what it had spent by then (the call was not over).
    return (f"failed ({en['seconds'] / kw['seconds']:.1f}× by then)",
            f"failed ({en['peak_mb'] / kw['peak_mb']:.1f}× by then)")


def render(results: dict) -> str:
    m = results["machine"]
    wait = results["wait"]
    cases = results["cases"]
    mem_gb = results["mem_limit_gb"]
    wait_text = ("no other benchmark running, 1-minute load average below "
                 f"{bb.WAIT_LOAD}" + (f", after waiting {wait['waited_s']:.0f} s"
                                      if wait["waited_s"] >= 1 else "")
                 if wait.get("quiet") else
                 f"not quiet after {wait['waited_s']:.0f} s of waiting (1-minute load "
                 f"{wait['load1']:.2f}): measured anyway" if "load1" in wait else
                 "no wait (--no-wait)")
    pk = results["packages"]
    reps = results["repeats"]
    lines = [
        SECTION_TITLE,
        "",
        f"- Date: {results['date']}",
        f"- Machine: {m['nproc']} cores ({m['cpu_model']}), {m['mem_gib']:.1f} GiB of memory, "
        f"Linux {m['kernel']}; load average {results['loadavg_start']} at the start "
        f"({wait_text}), {results['loadavg_end']} at the end",
        f"- Software: Python {pk['python']}, the `kwatt` package {pk['kwatt']} (`_core` sha256 "
        f"{pk['kwatt_core_sha256'][:12]}), EnOSlib {pk['enoslib']}, pandas {pk['pandas']}; "
        f"server {results['version']} (binary sha256 {results['binary_sha256'][:12]})",
        f"- Reproduce: `make bench`, or `.venv/bin/python bench/python_bench.py build/kwatt` "
        f"(~{max(1, round(results['elapsed_s'] / 60))} min); this run: "
        f"`{results['command']}`",
        f"- Setup: one `kwatt serve --simulate` (nothing pinned: server and clients share the "
        f"{m['nproc']} cores) with one Lyon job over the 20 nova nodes of type "
        f"`monitor={METRIC}` (50 rows/s/node, 1000 rows/s); `{METRIC}` of the 20 nodes over "
        + " and ".join(f"{c['window_s']} s" for c in cases)
        + " from the job's start. Each operation in a fresh interpreter (the project's .venv), "
        "whose `HOME` holds `.python-grid5000.yaml` with `uri: URL`, under GNU `time`: "
        "kwatt: `k = kwatt.Kwollect(nodes=[FQDN, ...], api=URL, progress=False); "
        "k.start(t0); k.stop(t1)`, then `k.get_metrics(metrics=[...])` or "
        "`k.to_pandas(metrics=[...])`; EnOSlib: `k = enoslib.Kwollect(nodes=[enoslib.Host(FQDN),"
        " ...]); k.deploy(); k.start(t0); k.stop(t1)`, then `k.get_metrics(metrics=[...])` or "
        "`k.get_metrics_pandas(metrics=[...])`. Time = the call, from `Kwollect(...)` to its "
        "return, on the child's clock (interpreter start, imports, pandas and `kwatt.Kwollect` "
        "included, and freeing at exit left out; the process's wall time, beside it, includes "
        "the interpreter, the imports and the GC probe below). *GC passes left*: "
        "right after the call, the next 200,000 allocations (`[{} for _ in range(200_000)]`) "
        "less the same allocations again: the cyclic garbage collector's passes over the "
        "objects the call made, which a program pays on its next allocations (kwatt pauses "
        "the collector while it builds the rows, so its passes come after the call). Peak "
        "RSS = `%M` of "
        f"the child, the largest of its runs. Median of {reps['small']} runs at "
        f"~{bb.rows_label(cases[0]['target_rows'])}, of {reps['large_kwatt']} (kwatt) and "
        f"{reps['large_enoslib']} (EnOSlib) at ~{bb.rows_label(cases[-1]['target_rows'])}; "
        "kwatt and EnOSlib interleaved, the first alternating. Every result's rows (`len` of "
        "each list, or of the DataFrame) are checked against the API's, counted with curl. "
        f"Children run under a watchdog that kills them past {mem_gb:g} GB of RSS or "
        f"{results['timeout_s']:.0f} s, and an address-space limit "
        f"{AS_BACKSTOP_BYTES / 1e9:g} GB above (a backstop); a killed run's time and memory "
        "are lower bounds. MB = 10^6 bytes.",
        "",
        "| rows | operation | time (s, median) | GC passes left (s) | process wall (s) | "
        "peak RSS (MB) | rows/s | runs |",
        "|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for c in cases:
        first = True
        for op, (tool, shown) in OPS.items():
            s = c["summary"].get(op)
            if s is None:
                continue
            head = (f"{c['api']['rows']:,} ({c['window_s']} s), load {c['loadavg']}"
                    if first else "")
            first = False
            rate = (f"{s['rows'] / s['seconds']:,.0f}" if s["status"] == "ok" and s.get("rows")
                    else "–")
            wall = fmt_s(s["wall_s"]) if s["status"] == "ok" else "–"
            gc_left = f"{s['deferred_gc_s']:.2f}" if s["status"] == "ok" else "–"
            lines.append(f"| {head} | {shown} | {time_cell(s)} | {gc_left} | {wall} | "
                         f"{peak_cell(s)} | {rate} | {s['runs']} |")
    lines += [
        "",
        "| rows | EnOSlib / kwatt, `get_metrics`: time | peak RSS | EnOSlib "
        "`get_metrics_pandas` / kwatt `to_pandas`: time | peak RSS |",
        "|---|---:|---:|---:|---:|",
    ]
    for c in cases:
        cells = []
        for _, kw_op, en_op in PAIRS:
            cells += ratio_cells(c["summary"].get(kw_op), c["summary"].get(en_op))
        lines.append(f"| {bb.rows_label(c['target_rows'])} | " + " | ".join(cells) + " |")

    # Failures and kills of EnOSlib, in words; one note per operation and error.
    notes = []
    failures: dict[tuple[str, str], list[str]] = {}
    for c in cases:
        for op in ("enoslib_get_metrics", "enoslib_get_metrics_pandas"):
            s = c["summary"].get(op)
            if not s or s["status"] == "ok":
                continue
            label = bb.rows_label(c["target_rows"])
            if s["status"] == "failed":
                failures.setdefault((op, s["error"]), []).append(
                    f"{label} after {fmt_s(s['seconds'])} s (runs: "
                    f"{', '.join(s['statuses'])})")
            else:
                notes.append(f"{label}: {OPS[op][1]} was killed ({s['why']}; peak RSS "
                             f"{bb.fmt_mb(s['peak_mb'])} MB): it needs more than "
                             f"{s['mem_limit_mb'] / 1e3:.3g} GB")
    for (op, error), where in failures.items():
        notes.append(f"{OPS[op][1]} failed at {'; '.join(where)}, with (first line of the "
                     f"error) `{error}`")
    pandas_failed = any((c["summary"].get("enoslib_get_metrics_pandas") or {}).get("status")
                        == "failed" for c in cases)
    if pandas_failed:
        notes.append("EnOSlib's `get_metrics_pandas` builds the frame, then "
                     "`pandas.to_datetime(df['timestamp'])` without `format=`: pandas ≥ 2 infers "
                     "the format from the first timestamp (`2025-04-18T12:00:00+02:00`, no "
                     "fraction) and rejects the next ones at 50 Hz (`...:00.02+02:00`); real "
                     "Kwollect data has the same mix. Its time is up to the failure (the fetch "
                     "and the frame are done by then); EnOSlib is not patched here.")
    if notes:
        lines += [""] + [f"Note: {n}" for n in notes]

    # Correctness.
    chk = results.get("check")
    if chk:
        if chk["status"] == "ok":
            lines += ["", f"Correctness ({chk.get('kwatt_rows', 0):,} rows, once): kwatt's "
                      f"`get_metrics` result (`{{node FQDN: [rows]}}`, the 20 nodes in the "
                      f"order given) "
                      + ("**equals**" if chk["equal"] else "**differs from**")
                      + f" EnOSlib's (`{{site: [rows]}}`, sites {chk['enoslib_sites']}, "
                      f"{chk['enoslib_rows']:,} rows) regrouped by node "
                      f"(`'{{device_id}}.{{site}}.grid5000.fr'`, each node's rows in EnOSlib's "
                      f"order): Python `==` on the dicts `json.loads` gives, in one child."
                      + ("" if chk["equal"] else
                         f" First difference: `{json.dumps(chk.get('first_difference'))[:300]}`")]
        else:
            lines += ["", f"Correctness check: {chk['status']}: "
                      f"{chk.get('error') or chk.get('why')}"]

    # Where kwatt's time goes.
    lines += [
        "",
        "**Where kwatt's time goes** (information; one child per size, the stages of "
        "`get_metrics` and `to_pandas` timed apart with `time.perf_counter`: `Kwollect._fetch` "
        "(the C++ fetch and parse into the columnar table, GIL released), `table.rows_by_node` "
        "(one Python dict per row), `kwatt.frames.table_frame` (pandas columns over the "
        "table's arrays); peak RSS of the child after each stage).",
        "",
        "| rows | fetch into the table (s) | `rows_by_node` (s) | GC passes left (s) | "
        "`table_frame` (s) | peak after fetch (MB) | after the dicts (MB) | bytes per row of "
        "the dicts |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for c in cases:
        b = c["breakdown"]
        if b["status"] != "ok":
            lines.append(f"| {bb.rows_label(c['target_rows'])} | {b['status']}: "
                         f"{b.get('error') or b.get('why')} | | | | | | |")
            continue
        per_row = (b["peak_after_rows_mb"] - b["peak_after_fetch_mb"]) * 1e6 / b["rows"]
        lines.append(f"| {b['rows']:,} | {b['fetch_s']:.2f} | {b['rows_by_node_s']:.2f} | "
                     f"{b['deferred_gc_s']:.2f} | "
                     f"{b['table_frame_s']:.3f} | {bb.fmt_mb(b['peak_after_fetch_mb'])} | "
                     f"{bb.fmt_mb(b['peak_after_rows_mb'])} | {per_row:,.0f} |")
    imp = results.get("imports") or {}
    if imp:
        lines += ["", "Interpreter with the imports only (`import pandas, kwatt; kwatt.Kwollect`, "
                  "which imports `kwatt.service` and EnOSlib's `Service` / `import pandas, "
                  "enoslib`), included in every peak above: "
                  + ", ".join(f"{tool} {bb.fmt_mb(r['peak_mb'])} MB ({r['import_s']:.2f} s)"
                              for tool, r in imp.items() if r.get("status") == "ok") + "."]
    dt = next((c["summary"]["kwatt_to_pandas"].get("dtypes") for c in cases
               if c["summary"].get("kwatt_to_pandas", {}).get("dtypes")), None)
    if dt:
        lines += ["", "kwatt's DataFrame: " + ", ".join(f"{k} `{v}`" for k, v in dt.items())
                  + "."]
    if results.get("problems"):
        lines += ["", "Problems: " + "; ".join(results["problems"])]
    lines.append("")
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------------


def package_versions(python: str) -> dict | None:
    code = ("import importlib.metadata as m, sys, pandas, kwatt; "
            "import json; print(json.dumps({'python': sys.version.split()[0], "
            "'kwatt': kwatt.__version__, 'kwatt_core': kwatt._core.__file__, "
            "'pandas': pandas.__version__, 'enoslib': (lambda: m.version('enoslib'))()}))")
    waited = 0
    while True:
        try:
            res = subprocess.run([python, "-c", code], capture_output=True, text=True,
                                 timeout=120)
        except (OSError, subprocess.SubprocessError) as e:
            h.log(f"{python}: {e}")
            return None
        if res.returncode == 0:
            out = json.loads(res.stdout.strip().splitlines()[-1])
            out["kwatt_core_sha256"] = h.sha256_of(out["kwatt_core"])
            return out
        if waited >= IMPORT_RETRY_MAX_S:
            h.log(f"{python} cannot import pandas, kwatt and enoslib: "
                f"{(res.stderr.strip().splitlines() or ['?'])[-1]}")
            return None
        h.log(f"cannot import the packages yet ({(res.stderr.strip().splitlines() or ['?'])[-1]}"
            f"): retrying in {IMPORT_RETRY_S} s")
        time.sleep(IMPORT_RETRY_S)
        waited += IMPORT_RETRY_S


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("binary", nargs="?", default=os.path.join(ROOT, "build", "kwatt"),
                    help="the kwatt binary, for the server (default: build/kwatt)")
    ap.add_argument("--repeats", type=int, default=3, help="runs per operation at ~1 M rows")
    ap.add_argument("--large-repeats", type=int, default=3,
                    help="runs per kwatt operation at ~10 M rows")
    ap.add_argument("--enoslib-large-repeats", type=int, default=1,
                    help="runs per EnOSlib operation at ~10 M rows (0: none)")
    ap.add_argument("--sizes", default=f"{SMALL_ROWS},{LARGE_ROWS}",
                    help="rows of the small and the large case (default: 1 M and 10 M)")
    ap.add_argument("--no-enoslib", action="store_true", help="kwatt only")
    ap.add_argument("--mem-limit-gb", type=float, default=MEM_LIMIT_GB,
                    help="RSS past which a child is killed (default 16)")
    ap.add_argument("--timeout", type=float, default=TOOL_TIMEOUT_S,
                    help="seconds past which a child is killed (default 1200)")
    ap.add_argument("--python", default=os.path.join(ROOT, ".venv", "bin", "python"),
                    help="interpreter with kwatt, enoslib and pandas (default: .venv)")
    ap.add_argument("--no-wait", action="store_true",
                    help="do not wait for other benchmarks to end and the load to drop")
    ap.add_argument("--no-write", action="store_true",
                    help="do not touch BENCHMARKS.md nor bench/out/")
    ap.add_argument("--benchmarks-md", default=os.path.join(ROOT, "BENCHMARKS.md"))
    ap.add_argument("--render", metavar="JSON",
                    help="measure nothing: write the section again from a results file "
                         "(bench/out/python_bench.json)")
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
    small_rows, large_rows = (int(x) for x in args.sizes.split(","))
    if h.window_for_rows(large_rows) > h.JOB_SECONDS:
        h.log(f"the job lasts {h.JOB_SECONDS} s: at most {h.JOB_SECONDS * 1000:,} rows")
        return 2
    packages = package_versions(args.python)
    if packages is None:
        return 2
    use_enoslib = not args.no_enoslib

    signal.signal(signal.SIGTERM, h.on_signal)
    signal.signal(signal.SIGHUP, h.on_signal)
    t_start = time.monotonic()
    wait = {"waited_s": 0.0} if args.no_wait else bb.wait_for_quiet()
    if wait["waited_s"] > 0:  # the package may have been reinstalled meanwhile
        packages = package_versions(args.python) or packages
    tmpdir = tempfile.mkdtemp(prefix="kwatt-python-bench-")
    problems: list[str] = []
    try:
        built = binary
        binary = os.path.join(tmpdir, "kwatt")  # a rebuild of build/ changes nothing
        shutil.copy2(built, binary)
        results: dict = {
            "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
            "command": " ".join([os.path.relpath(sys.executable, ROOT)
                                 if sys.executable.startswith(ROOT + os.sep) else sys.executable,
                                 "bench/python_bench.py"] + sys.argv[1:]),
            "machine": h.machine_info(),
            "version": h.kwatt_version(binary),
            "binary": built,
            "binary_sha256": h.sha256_of(binary),
            "packages": packages,
            "repeats": {"small": args.repeats, "large_kwatt": args.large_repeats,
                        "large_enoslib": args.enoslib_large_repeats if use_enoslib else 0},
            "mem_limit_gb": args.mem_limit_gb,
            "timeout_s": args.timeout,
            "wait": wait,
            "loadavg_start": h.loadavg(),
            "platform": platform.platform(),
        }
        h.log(f"load average {results['loadavg_start']}, {results['machine']['nproc']} cores")
        kids = Children(args.python, tmpdir, int(args.mem_limit_gb * 1e9), args.timeout)
        jobs_file = os.path.join(tmpdir, "jobs.json")
        h.write_jobs_file(jobs_file)
        with h.Server(binary, jobs_file, tmpdir, None, "serve") as server:
            kids.use_server(server)
            results["imports"] = {}
            for tool, op in (("kwatt", "kwatt_import"), ("EnOSlib", "enoslib_import")):
                if tool == "EnOSlib" and not use_enoslib:
                    continue
                run = kids.run(op, T0, T0)
                h.log(f"imports only, {tool}: {describe(run)}")
                results["imports"][tool] = run
            cases = []
            for key, rows, kw_rep, en_rep in (
                    ("small", small_rows, args.repeats, args.repeats),
                    ("large", large_rows, args.large_repeats, args.enoslib_large_repeats)):
                case = size_case(kids, key, rows, kw_rep, en_rep if use_enoslib else 0,
                                 problems)
                cases.append(case)
                if key == "small" and use_enoslib:
                    results["check"] = check_case(kids, case["window_s"], problems)
                if not server.alive():
                    raise BenchError(f"the server died: {server.stderr()}")
            results["cases"] = cases
        core_now = h.sha256_of(packages["kwatt_core"])
        if len(kids.cores) > 1 or core_now != packages["kwatt_core_sha256"]:
            problems.append(f"the kwatt package changed during the run (reinstalled?): "
                            f"_core sha256 {packages['kwatt_core_sha256'][:12]} at the start, "
                            f"{core_now[:12]} at the end; (file, mtime) seen by the children: "
                            f"{sorted(kids.cores)}")
        results["kwatt_cores_seen"] = sorted(kids.cores)
        results["problems"] = problems
        for p in problems:
            h.log(f"WARNING: {p}")
        results["loadavg_end"] = h.loadavg()
        results["elapsed_s"] = time.monotonic() - t_start
        section = render(results)
        print(section)
        if not args.no_write:
            h.publish(args.benchmarks_md, section, SECTION_TITLE, results, "python_bench")
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
