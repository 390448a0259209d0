#!/usr/bin/env python3
"""Benchmark of the dashboard (doc/dashboard.md): the job page of a job of 20 nodes at 50 Hz for
1 h (3.6 M wattmeter rows), in a real browser, beside the same data as raw rows through the API.

  1. `kwatt serve --simulate` (bench/harness.py's Server) with one Lyon job over the 20 nova
     nodes of type monitor=wattmetre_power_watt, started 1 h before the server's now (`--now`)
     and still running (walltime 2 h);
  2. the series endpoint alone (the power plot's query: 3.6 M rows into ~1300 buckets) and the raw
     rows of the same metric, nodes and window from the metrics API (curl): time, bytes, the
     server's CPU;
  3. headless chromium (Selenium) opens the job page: time from the navigation's start to the
     plots drawn (first paint) and to the energy shown, bytes sent to the browser (the resource
     timing entries' transfer sizes, the page's own included);
  4. the page left open for 30 s while the job runs: the server's CPU and the bytes sent per
     second of live updates, beside a client that polls the last second's raw rows every second.

Writes the section "Dashboard" of BENCHMARKS.md and bench/out/dashboard.json.

Usage: python3 bench/dashboard_bench.py [build/kwatt] [--benchmarks-md BENCHMARKS.md]
Needs chromium, chromium-driver and Selenium (make deps).
"""
import argparse
import json
import os
import statistics
import sys
import tempfile
import time
import urllib.request

import harness as h

TITLE = "## Dashboard"
SITE = "lyon"
JOB = 4343
NODES = h.NODES  # the 20 nova nodes
METRIC = "wattmetre_power_watt"
JOB_START = 1765000000  # epoch seconds
NOW = JOB_START + 3600  # the server's now when it starts: 1 h of the job
LIVE_SECONDS = 30
REPEATS = 3


def write_jobs(path):
    with open(path, "w") as f:
        json.dump({"jobs": [{
            "site": SITE, "uid": JOB, "user": "bench", "name": "dashboard-bench", "nodes": NODES,
            "started_at": JOB_START, "walltime": 7200, "types": [f"monitor={METRIC}"],
            "phases": [{"name": "idle", "duration": 600, "cpu": 0.0},
                       {"name": "busy", "duration": 600, "cpu": 1.0, "network": 0.2}],
            "repeat_phases": True}]}, f)


def timed_get(url):
    began = time.monotonic()
    with urllib.request.urlopen(url, timeout=600) as answer:
        size = 0
        while chunk := answer.read(1 << 20):
            size += len(chunk)
    return time.monotonic() - began, size


def endpoint_cases(server):
    base = server.base_url.replace("/stable", "")
    end = NOW  # the first hour; the clock moves on, the window does not
    series = (f"{base}/dashboard/api/sites/{SITE}/series?job_id={JOB}&metrics={METRIC}"
              f"&start={JOB_START}&end={end}&width=1300")
    raw = (f"{server.base_url}/sites/{SITE}/metrics?job_id={JOB}&metrics={METRIC}"
           f"&start_time={JOB_START}&end_time={end}")
    out = {}
    for name, url in (("series", series), ("raw", raw)):
        times, cpus, size = [], [], 0
        for _ in range(REPEATS):
            cpu = server.cpu_seconds()
            t, size = timed_get(url)
            cpus.append(server.cpu_seconds() - cpu)
            times.append(t)
        out[name] = {"url": url, "seconds": statistics.median(times), "bytes": size,
                     "server_cpu_s": statistics.median(cpus)}
        h.log(f"{name}: {out[name]['seconds']:.3f} s, {size / 1e6:.3f} MB")
    with urllib.request.urlopen(series) as answer:
        out["series"]["rows"] = json.load(answer)["rows"]
    return out


def browser():
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    options = webdriver.ChromeOptions()
    options.binary_location = "/usr/bin/chromium"
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--window-size=1400,1100",
                "--disable-dev-shm-usage"):
        options.add_argument(arg)
    return webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=options)


TRANSFERRED = """
const nav = performance.getEntriesByType('navigation')[0];
const res = performance.getEntriesByType('resource');
return {nav: nav.transferSize, resources: res.map(r => [r.name, r.transferSize, r.encodedBodySize])};
"""


def page_case(server, driver):
    base = server.base_url.replace("/stable", "")
    runs = []
    for _ in range(REPEATS):
        driver.get("about:blank")
        driver.execute_script("performance.clearResourceTimings()")
        began = time.monotonic()
        driver.get(f"{base}/dashboard/#/job/{SITE}/{JOB}")
        while not driver.execute_script("return !!(window.kwattDashboard && "
                                        "window.kwattDashboard.energyShownMs)"):
            if time.monotonic() - began > 120:
                raise h.BenchError("the job page did not load in 120 s")
            time.sleep(0.02)
        state = driver.execute_script(
            "const s = window.kwattDashboard; return {paint: s.plotsDrawnMs, "
            "energy: s.energyShownMs, power: s.plots['wattmetre_power_watt'].rows,"
            "buckets: s.plots['wattmetre_power_watt'].buckets}")
        sent = driver.execute_script(TRANSFERRED)
        total = sent["nav"] + sum(r[1] for r in sent["resources"])
        runs.append({"first_paint_ms": state["paint"], "energy_ms": state["energy"],
                     "bytes": total, "power_rows": state["power"], "buckets": state["buckets"],
                     "resources": sent["resources"]})
        h.log(f"page: first paint {state['paint']:.0f} ms, energy {state['energy']:.0f} ms, "
            f"{total / 1e6:.3f} MB, {state['power']} rows")
    best = sorted(runs, key=lambda r: r["first_paint_ms"])[len(runs) // 2]
    return {"median": best, "runs": runs}


def live_case(server, driver):
    # The page of page_case is open on the running job: its live updates every second.
    driver.execute_script("performance.clearResourceTimings()")
    cpu = server.cpu_seconds()
    began = time.monotonic()
    time.sleep(LIVE_SECONDS)
    elapsed = time.monotonic() - began
    used = server.cpu_seconds() - cpu
    sent = driver.execute_script(TRANSFERRED)
    live_bytes = sum(r[1] for r in sent["resources"])
    tails = driver.execute_script("return window.kwattDashboard.plots['wattmetre_power_watt'].tails")
    driver.get("about:blank")
    # Beside it: a client polling the raw rows of the last second, every second.
    now = json.load(urllib.request.urlopen(
        server.base_url.replace("/stable", "") + "/dashboard/api/sites"))["now"]
    cpu = server.cpu_seconds()
    raw_bytes = 0
    began = time.monotonic()
    for i in range(LIVE_SECONDS):
        url = (f"{server.base_url}/sites/{SITE}/metrics?job_id={JOB}&metrics={METRIC}"
               f"&start_time={now + i - 1:.6f}&end_time={now + i:.6f}")
        raw_bytes += timed_get(url)[1]
        time.sleep(max(0.0, began + i + 1 - time.monotonic()))
    raw_elapsed = time.monotonic() - began
    raw_used = server.cpu_seconds() - cpu
    return {"seconds": elapsed, "server_cpu_per_s": used / elapsed,
            "bytes_per_s": live_bytes / elapsed, "tails": tails,
            "raw_server_cpu_per_s": raw_used / raw_elapsed, "raw_bytes_per_s": raw_bytes / raw_elapsed}


def short(url):
    path = url.split("/dashboard/", 1)[-1].split("?", 1)[0]
    if "series" in path:
        return "series of " + ("wattmetre" if "wattmetre" in url else "network")
    return path


def render(r):
    e, p, live = r["endpoints"], r["page"]["median"], r["live"]
    mb = lambda b: f"{b / 1e6:,.3f}"
    lines = [
        TITLE, "",
        f"Measured {r['date']} with `python3 bench/dashboard_bench.py` on {r['machine']}"
        f" (load average {r['load']} at the start; nothing pinned: the server, chromium and the"
        " benchmark share the cores). `kwatt serve --simulate --now` one hour into a running Lyon"
        f" job over the 20 nova nodes of type `monitor={METRIC}` (50 rows/s/node: 3,600,020 rows"
        " of wattmeter power in the hour), headless chromium 1400×1100 through Selenium. Median"
        f" of {REPEATS} runs; MB = 10^6 bytes.", "",
        "| what | dashboard | raw rows through the API | ratio |", "|---|---|---|---|",
        f"| the power plot's data, 1 h × 20 nodes (3.6 M rows) | {e['series']['seconds']:.3f} s,"
        f" {mb(e['series']['bytes'])} MB ({e['series']['rows']:,} rows into 1300 buckets), server CPU"
        f" {e['series']['server_cpu_s']:.2f} s | {e['raw']['seconds']:.3f} s, {mb(e['raw']['bytes'])}"
        f" MB, server CPU {e['raw']['server_cpu_s']:.2f} s | {e['raw']['bytes'] / e['series']['bytes']:,.0f}×"
        " fewer bytes |",
        f"| the job page: first paint (plots drawn, from the navigation's start) | "
        f"{p['first_paint_ms'] / 1000:.3f} s (energy table shown at {p['energy_ms'] / 1000:.3f} s) "
        f"| (the raw rows alone take {e['raw']['seconds']:.3f} s to send) | |",
        f"| bytes sent to the browser for the job page (page, uPlot, every query) | "
        f"{mb(p['bytes'])} MB | {mb(e['raw']['bytes'])} MB for the power rows alone | |",
        f"| live, per second (the page open on the running job, {live['seconds']:.0f} s) | server CPU "
        f"{100 * live['server_cpu_per_s']:.2f} % of a core, {live['bytes_per_s'] / 1e3:.1f} kB/s "
        f"({live['tails']} tail queries of the power plot) | polling the last second's raw rows: "
        f"{100 * live['raw_server_cpu_per_s']:.2f} % of a core, {live['raw_bytes_per_s'] / 1e3:.1f} kB/s | |",
        "",
        f"| goal (issue 13) | measured | met |", "|---|---|---|",
        f"| first paint of the job page ≤ 2 s | {p['first_paint_ms'] / 1000:.3f} s | "
        f"{'yes' if p['first_paint_ms'] <= 2000 else 'no'} |",
        f"| ≤ 5 MB sent to the browser | {mb(p['bytes'])} MB | {'yes' if p['bytes'] <= 5e6 else 'no'} |",
        "",
        "The job page's queries: the power plot (wattmetre, 3.6 M rows), the network plot (in and"
        " out counters of the 20 nodes' switch ports as rates: 40 series, mostly empty buckets at"
        " a 10 s period), the energy (`kwatt energy`'s computation over the same 3.6 M rows,"
        " asked once the plots are drawn). Bytes of the median run: "
        + ", ".join(f"{short(r[0])} {r[1] / 1e3:,.1f} kB" for r in p["resources"]) +
        " (transfer sizes as the browser counts them: the dashboard gzips its JSON answers at"
        " zlib's fastest level, and the static files, uPlot's 51 kB among them). The"
        " first column's bytes are uncompressed (no Accept-Encoding), as the raw rows'."
        " Live: every second each plot asks for the buckets after its last one (about 1,000 new"
        " rows a second); the energy table is computed again every 30 s (over the whole job),"
        " which the live window may or may not include.", "",
    ]
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("binary", nargs="?", default=os.path.join(h.ROOT, "build", "kwatt"))
    ap.add_argument("--benchmarks-md", default=os.path.join(h.ROOT, "BENCHMARKS.md"))
    args = ap.parse_args()
    results = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
               "load": h.loadavg(), "machine": machine_text()}
    with tempfile.TemporaryDirectory() as tmp:
        jobs = os.path.join(tmp, "jobs.json")
        write_jobs(jobs)
        with h.Server(args.binary, jobs, tmp, None, "dashboard",
                      extra_args=["--now", str(NOW)]) as server:
            results["endpoints"] = endpoint_cases(server)
            driver = browser()
            try:
                results["page"] = page_case(server, driver)
                results["live"] = live_case(server, driver)
            finally:
                driver.quit()
    section = render(results)
    h.write_section(args.benchmarks_md, section, TITLE)
    out = os.path.join(h.ROOT, "bench", "out")
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "dashboard.json"), "w") as f:
        json.dump(results, f, indent=1)
    print(section)
    return 0


def machine_text():
    info = h.machine_info()
    return f"{info['cpu_model']}, {info['nproc']} cores"


if __name__ == "__main__":
    sys.exit(main())
