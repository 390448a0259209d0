#!/usr/bin/env python3
"""Benchmark of kwatt's HTTP server under idle and slow clients, beside prometheus-node-exporter
(Go's net/http), in one run.

Usage: python3 bench/http_hostile_bench.py [KWATT_BINARY] [--requests N] [--no-write]

What it does (standard library only, plus Debian's prometheus-node-exporter):
  1. starts `kwatt serve --simulate` (its default 8 workers) and `prometheus-node-exporter` on
     127.0.0.1, each on its own free port, both unpinned (the clients are this process);
  2. for each server and each load, opens the load's connections, then times N (default 200)
     normal requests one after the other, each on a new connection (`Connection: close`), from
     the connect to the last byte: kwatt's `/stable/sites` (3.4 kB), node_exporter's `/` (its
     small landing page, 150 bytes), so that the figure is the server's wait, not its work;
  3. loads: none; 64 idle connections; 2,000 idle connections and 100 slow readers. An idle
     connection sent "GET /" and nothing more (a request line begun: each server holds it to
     its header deadline, kwatt 10 s, node_exporter none); a slow reader asked for a large answer
     (kwatt: a day of 2 nodes' wattmeter, tens of MB; node_exporter: /metrics) with a 4 kB
     receive buffer and never reads;
  4. records each server's RSS before the load, with the load held, and 3 s after every
     connection closed, and its open file descriptors before and after;
  5. prints a markdown table and writes the section "## HTTP server under idle and slow clients"
     of BENCHMARKS.md, and bench/out/http_hostile_bench.json.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time

import harness as h

SECTION_TITLE = "## HTTP server under idle and slow clients"
LOADS = [("none", 0, 0), ("64 idle", 64, 0), ("2,000 idle + 100 slow readers", 2000, 100)]
# The bounds for kwatt with the heaviest load.
BAR_MEDIAN_S = 0.100
BAR_P99_S = 1.0
BAR_RSS_MB = 40.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class NodeExporter:
    def __init__(self, tmpdir: str):
        self.port = free_port()
        self.err = open(os.path.join(tmpdir, "node_exporter.stderr"), "wb")
        self.proc = subprocess.Popen(
            ["prometheus-node-exporter", f"--web.listen-address=127.0.0.1:{self.port}"],
            stdout=subprocess.DEVNULL, stderr=self.err, stdin=subprocess.DEVNULL)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return
            except OSError:
                time.sleep(0.1)
        raise h.BenchError("prometheus-node-exporter did not listen in 30 s")

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.err.close()


def open_files(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def get(port: int, path: str) -> float:
    began = time.perf_counter()
    with socket.create_connection(("127.0.0.1", port), timeout=60) as s:
        s.sendall(f"GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".encode())
        answer = b""
        while chunk := s.recv(65536):
            answer += chunk
    took = time.perf_counter() - began
    if not answer.startswith(b"HTTP/1.1 200"):
        raise h.BenchError(f"GET {path} on port {port}: {answer[:200]!r}")
    return took


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def run_case(name: str, pid: int, port: int, path: str, big_path: str, idle: int, slow: int,
             requests: int) -> dict:
    rss0, files0 = h.rss_bytes(pid), open_files(pid)
    held = []
    try:
        for _ in range(idle):
            s = socket.create_connection(("127.0.0.1", port), timeout=60)
            s.sendall(b"GET /")
            held.append(s)
        for _ in range(slow):
            s = socket.socket()
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            s.connect(("127.0.0.1", port))
            s.sendall(f"GET {big_path} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
            held.append(s)
        time.sleep(0.5)
        times = [get(port, path) for _ in range(requests)]
        rss_held = h.rss_bytes(pid)
    finally:
        for s in held:
            s.close()
    time.sleep(3)
    result = {
        "server": name, "idle": idle, "slow_readers": slow, "requests": requests,
        "median_s": statistics.median(times), "p99_s": percentile(times, 0.99),
        "max_s": max(times),
        "rss_before_mb": rss0 / 1e6, "rss_held_mb": rss_held / 1e6,
        "rss_after_mb": h.rss_bytes(pid) / 1e6,
        "files_before": files0, "files_after": open_files(pid),
    }
    h.log(f"{name}, {idle} idle + {slow} slow: median {result['median_s'] * 1e3:.2f} ms, "
          f"p99 {result['p99_s'] * 1e3:.2f} ms, RSS {result['rss_before_mb']:.1f} -> "
          f"{result['rss_held_mb']:.1f} -> {result['rss_after_mb']:.1f} MB, files "
          f"{files0} -> {result['files_after']}")
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("binary", nargs="?", default=os.path.join(h.ROOT, "build", "kwatt"))
    parser.add_argument("--requests", type=int, default=200)
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args()
    if not shutil.which("prometheus-node-exporter"):
        raise h.BenchError("prometheus-node-exporter is not installed (make test-deps)")
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    machine, load = h.machine_info(), h.loadavg()
    started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    results = []
    with tempfile.TemporaryDirectory() as tmpdir:
        jobs = os.path.join(tmpdir, "jobs.json")
        h.write_jobs_file(jobs)
        big = h.metrics_url("", ["nova-1", "nova-4"], h.JOB_START_EPOCH,
                            h.JOB_START_EPOCH + 86400)
        exporter = NodeExporter(tmpdir)
        try:
            with h.Server(args.binary, jobs, tmpdir, None, "kwatt") as server:
                port = int(server.base_url.split(":")[2].split("/")[0])
                for label, idle, slow in LOADS:
                    # The two servers side by side for each load, one after the other.
                    results.append(run_case("kwatt serve", server.proc.pid, port,
                                            "/stable/sites", "/stable" + big, idle, slow,
                                            args.requests))
                    results.append(run_case("node_exporter", exporter.proc.pid, exporter.port,
                                            "/", "/metrics", idle, slow, args.requests))
        finally:
            exporter.stop()
    version = h.kwatt_version(args.binary)
    rows = ["| server | load | median (ms) | p99 (ms) | max (ms) | RSS before / held / after "
            "(MB) | open files before / after |", "|---|---|---:|---:|---:|---|---|"]
    for r in results:
        label = next(l for l, i, s in LOADS if i == r["idle"] and s == r["slow_readers"])
        rows.append(f"| {r['server']} | {label} | {r['median_s'] * 1e3:.2f} | "
                    f"{r['p99_s'] * 1e3:.2f} | {r['max_s'] * 1e3:.2f} | "
                    f"{r['rss_before_mb']:.1f} / {r['rss_held_mb']:.1f} / "
                    f"{r['rss_after_mb']:.1f} | {r['files_before']} / {r['files_after']} |")
    heavy = {r["server"]: r for r in results if r["idle"] == 2000}
    kw, go = heavy["kwatt serve"], heavy["node_exporter"]
    grown = kw["rss_held_mb"] - kw["rss_before_mb"]
    bars = [
        "| bar (2,000 idle + 100 slow readers) | target | kwatt | node_exporter | kwatt / "
        "node_exporter | met |", "|---|---:|---:|---:|---:|---|",
        f"| median | ≤ {BAR_MEDIAN_S * 1e3:.0f} ms | {kw['median_s'] * 1e3:.2f} ms | "
        f"{go['median_s'] * 1e3:.2f} ms | {kw['median_s'] / go['median_s']:.2f} | "
        f"{'yes' if kw['median_s'] <= BAR_MEDIAN_S else 'NO'} |",
        f"| 99th percentile | ≤ {BAR_P99_S * 1e3:.0f} ms | {kw['p99_s'] * 1e3:.2f} ms | "
        f"{go['p99_s'] * 1e3:.2f} ms | {kw['p99_s'] / go['p99_s']:.2f} | "
        f"{'yes' if kw['p99_s'] <= BAR_P99_S else 'NO'} |",
        f"| RSS growth with the load held | ≤ {BAR_RSS_MB:.0f} MB | {grown:.1f} MB | "
        f"{go['rss_held_mb'] - go['rss_before_mb']:.1f} MB | | "
        f"{'yes' if grown <= BAR_RSS_MB else 'NO'} |",
        f"| file descriptors left after the clients closed | 0 | "
        f"{kw['files_after'] - kw['files_before']} | {go['files_after'] - go['files_before']} | | "
        f"{'yes' if kw['files_after'] <= kw['files_before'] else 'NO'} |",
    ]
    section = "\n".join([
        SECTION_TITLE, "",
        f"- Date: {started}",
        f"- Machine: {machine['nproc']} cores ({machine['cpu_model']}), "
        f"{machine['mem_gib']:.1f} GiB of memory, Linux {machine['kernel']}; kwatt {version}; "
        f"load average {load} at the start",
        "- Reproduce: `python3 bench/http_hostile_bench.py build/kwatt`",
        "- Setup: `kwatt serve --simulate` (8 workers) and Debian's prometheus-node-exporter "
        "(Go net/http) on 127.0.0.1, unpinned. For each load, its connections are opened, then "
        f"{args.requests} normal requests are timed one after the other, each on a new "
        "connection, from the connect to the last byte: kwatt's `/stable/sites` (3.4 kB), "
        "node_exporter's `/` (its landing page). An idle connection sent `GET /` and nothing "
        "more (kwatt holds it to its 10 s header deadline); a slow reader asked for a large "
        "answer (kwatt: a day of 2 nodes' wattmeter, tens of MB; node_exporter: `/metrics`) "
        "with a 4 kB receive buffer and never reads. RSS before the load, with it held, and 3 s "
        "after the clients closed. Before (cpp-httplib, a thread per connection): 64 idle "
        "connections made a GET take 15.5 s, 2,000 left it unanswered after 200 s.",
        "", *rows, "", *bars, ""])
    print(section)
    if not args.no_write:
        h.publish(os.path.join(h.ROOT, "BENCHMARKS.md"), section, SECTION_TITLE,
                  {"results": results, "machine": machine}, h.NAME)
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except h.BenchError as e:
        h.log(f"error: {e}")
        sys.exit(1)
    finally:
        h.stop_all_servers()
