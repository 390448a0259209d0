"""Benchmark: kwatt meter smartwatts against PowerAPI's SmartWatts on the same hwpc-sensor trace.

Both read the same `kwatt simulate hwpc` CSV directory post-mortem (SmartWatts through PowerAPI's
CSV input, `--input csv --files rapl.csv,msr.csv,core.csv`, and its CSV output) with the same
options (their defaults: error threshold 2 W, 10 samples to learn, windows of 60, base frequency
2100 MHz, layer step 100 MHz). Measured: wall and CPU time, HWPC reports per second, and each
one's per-target power against the trace's truth (mean absolute error in watts, and relative to
the mean true power), each against its own definition of a target's power: SmartWatts gives a
target its dynamic power plus a share of the idle power (the intercept), kwatt its dynamic power
alone (the idle part is reported apart). The first minute (learning) is left out for both, and
only the (tick, socket, target) that both reported are compared.

PowerAPI 2.10.0 and SmartWatts 2.4.1 run from bench/.venv-powerapi (`make bench-deps`, pinned in
bench/powerapi-requirements.txt). Writes the section "Meter: SmartWatts formula" of BENCHMARKS.md
and bench/out/meter_smartwatts_bench.json.

    python bench/meter_smartwatts_bench.py [KWATT] [--duration SECONDS] [--no-write]
"""
from __future__ import annotations

import argparse
import csv
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import harness as h

ROOT = h.ROOT
SECTION_TITLE = "## Meter: SmartWatts formula"
POWERAPI_VENV = os.path.join(ROOT, os.environ.get("POWERAPI_VENV", "bench/.venv-powerapi"))
CGROUPS = ("/kwatt/web", "/kwatt/batch", "/kwatt/db")
WARMUP_MS = 60_000


def read_truth(path):
    truth = {}
    with open(path) as f:
        for r in csv.DictReader(f):
            truth[(int(r["timestamp"]), int(r["socket"]), r["target"])] = (
                float(r["watts"]), float(r["dynamic_watts"]))
    return truth


def read_power_reports(directory):
    """PowerAPI CSV power reports under `directory`: {(timestamp, socket, target): watts}."""
    rows = {}
    for path in Path(directory).rglob("PowerReport.csv"):
        with open(path) as f:
            for r in csv.DictReader(f):
                if r["target"] in CGROUPS:
                    rows[(int(r["timestamp"]), int(r["socket"]), r["target"])] = float(r["power"])
    return rows


def errors(rows, truth, which, keys):
    diffs, trues = [], []
    for key in keys:
        true = truth[key][which]
        diffs.append(abs(rows[key] - true))
        trues.append(true)
    if not diffs:
        raise h.BenchError("no value to compare: give a --duration of more than 3 minutes")
    mae = sum(diffs) / len(diffs)
    return {"mae_w": mae, "relative": mae / (sum(trues) / len(trues)), "n": len(diffs)}


def run_case(kwatt, tmp, key, label, duration, sim_args, options):
    trace = os.path.join(tmp, key)
    result = subprocess.run([kwatt, "simulate", "hwpc", "--csv", os.path.join(trace, "csv"),
                             "--truth", os.path.join(trace, "truth.csv"), "--duration",
                             str(duration), *sim_args], capture_output=True, text=True)
    if result.returncode != 0:
        raise h.BenchError(f"simulate hwpc: {result.stderr}")
    truth = read_truth(os.path.join(trace, "truth.csv"))
    files = ",".join(os.path.join(trace, "csv", g + ".csv") for g in ("rapl", "msr", "core"))
    # "kwatt simulate hwpc: N ticks of ...": a report for "all" and each cgroup per tick.
    ticks = int(result.stderr.split(": ", 1)[1].split()[0])
    reports = ticks * (len(CGROUPS) + 1)
    env = dict(os.environ)
    case = {"label": label, "duration_s": duration, "hwpc_reports": reports, "sim_args": sim_args}

    kw_out = os.path.join(trace, "kwatt-out")
    h.log(f"{label}: kwatt meter smartwatts on {reports} reports")
    kw = h.run_measured([kwatt, "meter", "smartwatts", "--input", f"csv:{trace}/csv",
                          "-o", f"powerapi-csv:{kw_out}", *options], env, tmp, "kwatt")
    if kw["returncode"] != 0:
        raise h.BenchError(f"kwatt meter smartwatts: {kw['stderr']}")
    case["kwatt"] = {k: kw[k] for k in ("wall_s", "cpu_s", "peak_mb")}
    kw_rows = read_power_reports(kw_out)

    python = os.path.join(POWERAPI_VENV, "bin", "python")
    if not os.access(python, os.X_OK):
        case["smartwatts"] = {"failed": f"not run: no {POWERAPI_VENV} (make bench-deps)"}
        return case
    # PowerAPI's own parsers read what kwatt wrote (an untimed run writing both forms).
    check_dir = os.path.join(trace, "check")
    subprocess.run([kwatt, "meter", "smartwatts", "--input", f"csv:{trace}/csv", "-q", *options,
                    "-o", f"powerapi-csv:{check_dir}", "-o", f"powerapi-json:{check_dir}.jsonl"],
                   check=True)
    check = subprocess.run([python, os.path.join(ROOT, "bench", "powerapi_read_check.py"),
                            check_dir, check_dir + ".jsonl"], capture_output=True, text=True)
    case["powerapi_reads_kwatt"] = (check.stdout.strip() if check.returncode == 0
                                    else f"FAILED: {check.stderr[-300:]}")
    sw_out = os.path.join(trace, "smartwatts-out")
    h.log(f"{label}: SmartWatts on the same trace")
    sw = h.run_measured([python, "-m", "smartwatts", "--input", "csv", "--model", "HWPCReport",
                          "--files", files, "--output", "csv", "--model", "PowerReport",
                          "--directory", sw_out, "--disable-dram-formula",
                          "--sensor-reports-frequency", "1000", *options],
                         env, tmp, "smartwatts", timeout_s=3600)
    if sw["returncode"] != 0:
        case["smartwatts"] = {"failed": f"exit {sw['returncode']}: {sw['stderr'][-500:]}"}
        return case
    case["smartwatts"] = {k: sw[k] for k in ("wall_s", "cpu_s", "peak_mb")}
    sw_rows = read_power_reports(sw_out)
    keys = sorted(k for k in kw_rows.keys() & sw_rows.keys()
                  if k[0] - 1700000000000 >= WARMUP_MS and k in truth)
    case["compared"] = len(keys)
    case["kwatt"]["reported"] = len(kw_rows)
    case["smartwatts"]["reported"] = len(sw_rows)
    case["kwatt"]["error"] = errors(kw_rows, truth, 1, keys)          # dynamic power
    case["smartwatts"]["error"] = errors(sw_rows, truth, 0, keys)     # with idle share
    case["smartwatts"]["error_vs_dynamic"] = errors(sw_rows, truth, 1, keys)
    return case


def render(results):
    lines = [SECTION_TITLE, "",
             "`kwatt meter smartwatts` against PowerAPI's SmartWatts "
             f"({results['peer']}) on the same `kwatt simulate hwpc` CSV trace, post-mortem, one "
             "run each, same options (PowerAPI's defaults: error threshold 2 W, 10 samples to "
             "learn, windows of 60 ticks, base 2100 MHz, layers of 100 MHz). "
             f"Machine: {results['machine']['nproc']} CPUs ({results['machine']['cpu_model']}), "
             f"load average {results['loadavg']} at the start. "
             f"`python bench/meter_smartwatts_bench.py` ({results['version']}).", "",
             "Errors are per target against the trace's truth, after the first minute, on the "
             "(tick, socket, target) both reported; each tool against its own definition of a "
             "target's power (SmartWatts: dynamic power plus a share of idle; kwatt: dynamic power, "
             "idle reported apart). Relative: to the mean true power.", "",
             "| trace | HWPC reports | kwatt reports/s | SmartWatts reports/s | ratio | kwatt CPU s "
             "| SmartWatts CPU s | CPU ratio | kwatt MAE (rel.) | SmartWatts MAE (rel.) |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for c in results["cases"]:
        kw, sw = c["kwatt"], c["smartwatts"]
        kw_rate = c["hwpc_reports"] / kw["wall_s"]
        if "failed" in sw:
            lines.append(f"| {c['label']} | {c['hwpc_reports']} | {kw_rate:,.0f} | "
                         f"{sw['failed']} | | {kw['cpu_s']:.2f} | | | | |")
            continue
        sw_rate = c["hwpc_reports"] / sw["wall_s"]
        lines.append(
            f"| {c['label']} | {c['hwpc_reports']:,} | {kw_rate:,.0f} | {sw_rate:,.0f} | "
            f"**{kw_rate / sw_rate:,.0f}x** | {kw['cpu_s']:.2f} | {sw['cpu_s']:.2f} | "
            f"{sw['cpu_s'] / max(kw['cpu_s'], 0.01):,.0f}x | "
            f"{kw['error']['mae_w']:.3f} W ({kw['error']['relative']:.1%}) | "
            f"{sw['error']['mae_w']:.3f} W ({sw['error']['relative']:.1%}) |")
    lines.append("")
    for c in results["cases"]:
        sw = c["smartwatts"]
        if "failed" in sw:
            continue
        lines.append(
            f"- {c['label']}: {c['compared']:,} target values compared; SmartWatts reported "
            f"{sw['reported']:,} of kwatt's {c['kwatt']['reported']:,} (it keeps its last 5 ticks "
            f"unprocessed at the end of the input); its MAE against the dynamic power alone: "
            f"{sw['error_vs_dynamic']['mae_w']:.3f} W. Peak memory: kwatt "
            f"{c['kwatt']['peak_mb']:.0f} MB, SmartWatts {sw['peak_mb']:.0f} MB. PowerAPI's "
            f"parsers on kwatt's reports (bench/powerapi_read_check.py): "
            f"{c.get('powerapi_reads_kwatt', 'not run')}.")
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("kwatt", nargs="?", default=os.path.join(ROOT, "build", "kwatt"))
    parser.add_argument("--duration", type=int, default=3600, help="seconds of trace")
    parser.add_argument("--no-write", action="store_true", help="print only")
    parser.add_argument("--benchmarks-md", default=os.path.join(ROOT, "BENCHMARKS.md"))
    args = parser.parse_args()
    kwatt = os.path.abspath(args.kwatt)
    peer = "not installed"
    python = os.path.join(POWERAPI_VENV, "bin", "python")
    if os.access(python, os.X_OK):
        peer = subprocess.run(
            [python, "-c", "from importlib.metadata import version as v; "
             "print(f\"powerapi {v('powerapi')}, smartwatts {v('smartwatts')}\")"],
            capture_output=True, text=True).stdout.strip()
    results = {"machine": h.machine_info(), "version": h.kwatt_version(kwatt), "peer": peer,
               "loadavg": h.loadavg(), "cases": []}
    with tempfile.TemporaryDirectory(prefix="kwatt-sw-bench-") as tmp:
        results["cases"].append(run_case(kwatt, tmp, "default", "default scenario, 1 s ticks", args.duration,
                                         [], []))
        results["cases"].append(run_case(kwatt, tmp, "multiplexed", "counters multiplexed (run 60-100 %)",
                                         args.duration // 3, ["--multiplexing", "0.4"], []))
    section = render(results)
    print(section)
    if not args.no_write:
        h.publish(args.benchmarks_md, section, SECTION_TITLE, results, "meter_smartwatts_bench")
    return 0


if __name__ == "__main__":
    sys.exit(main())
