"""The dashboard of `kwatt serve` in a real browser: Debian's chromium driven by chromium-driver
through Selenium (doc/dashboard.md). Screenshots of each page are saved in the test's directory,
and in $KWATT_SCREENSHOTS when it is set."""
import json
import os
import shutil
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from conftest import run_kwatt, start_server, store_of_simulation, wait_until

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
NOW = int(time.time())
# A finished job (10 minutes, 50 Hz wattmeters) and one running since 2 minutes.
DONE, RUNNING, PHASED = 7001, 7002, 7003
JOBS = {"jobs": [
    {"site": "lyon", "uid": DONE, "user": "alice", "nodes": ["nova-1", "nova-4"],
     "started_at": NOW - 1800, "stopped_at": NOW - 1200, "types": ["monitor"],
     "phases": [{"name": "idle", "duration": 200, "cpu": 0.0},
                {"name": "busy", "duration": 400, "cpu": 1.0, "network": 0.3}]},
    {"site": "lyon", "uid": RUNNING, "user": "bob", "nodes": ["nova-5", "nova-6"],
     "started_at": NOW - 120, "walltime": 7200, "types": ["monitor=wattmetre_power_watt"]},
    # Phases whose names are wider than they last on a plot.
    {"site": "lyon", "uid": PHASED, "user": "erin", "nodes": ["nova-7"],
     "started_at": NOW - 3000, "stopped_at": NOW - 2400,
     "phases": [{"name": "idle-before-the-benchmark", "duration": 20, "cpu": 0.0},
                {"name": "stress-ng-cpu", "duration": 300, "cpu": 1.0},
                {"name": "cooldown-and-checkpoint", "duration": 10, "cpu": 0.1},
                {"name": "network-transfer", "duration": 270, "cpu": 0.2, "network": 1.0}]},
]}


def _webdriver():
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError:
        pytest.fail("Selenium is missing: run make deps")
    for path in (CHROMIUM, CHROMEDRIVER):
        if not os.path.exists(path):
            pytest.fail(f"{path} is missing (Debian chromium, chromium-driver): run make deps")
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--window-size=1400,1100",
                "--disable-dev-shm-usage"):
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    return webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("dashboard")
    s = start_server(jobs=JOBS, tmp_path=tmp)
    yield s
    s.stop()


@pytest.fixture(scope="module")
def browser():
    driver = _webdriver()
    yield driver
    driver.quit()


@pytest.fixture(scope="module")
def shots(tmp_path_factory):
    return tmp_path_factory.mktemp("screenshots")


def base_of(server):
    return server.url.replace("/stable", "")


def loaded(browser, what, timeout=30):
    """Waits until the page in `browser` says it is ready, and returns its window.kwattDashboard."""
    wait_until(lambda: browser.execute_script(
        "return !!(window.kwattDashboard && window.kwattDashboard.ready)"),
        f"{what} to finish loading", timeout=timeout, every=0.1)
    return browser.execute_script("return window.kwattDashboard")


def open_page(browser, server, fragment, timeout=30):
    browser.get("about:blank")
    browser.get_log("browser")  # drop what came before
    browser.get(base_of(server) + "/dashboard/" + fragment)
    return loaded(browser, fragment, timeout)


def console_errors(browser):
    return [e for e in browser.get_log("browser") if e["level"] == "SEVERE"]


def screenshot(browser, shots, name):
    path = Path(shots) / f"{name}.png"
    browser.save_screenshot(str(path))
    assert path.stat().st_size > 10000
    if os.environ.get("KWATT_SCREENSHOTS"):
        target = Path(os.environ["KWATT_SCREENSHOTS"])
        target.mkdir(parents=True, exist_ok=True)
        shutil.copy(path, target / path.name)


def plot_record(browser, name):
    return browser.execute_script(
        "const p = window.kwattDashboard.plots[arguments[0]];"
        "if (!p) return null; const {uplot, ...rest} = p; return rest;", name)


def next_query(browser, name, before, timeout=20):
    """The plot's record once it asked again."""
    def asked():
        after = plot_record(browser, name)
        return after if after["queries"] > before["queries"] else None

    return wait_until(asked, f"{name}'s plot to ask again", timeout=timeout, every=0.1)


def get_json(url):
    with urllib.request.urlopen(url, timeout=60) as answer:
        return json.load(answer)


def test_assets_are_embedded(server):
    for name, kind in (("", "text/html"), ("app.js", "javascript"), ("app.css", "text/css"),
                       ("uPlot.iife.min.js", "javascript"), ("uPlot.min.css", "text/css")):
        with urllib.request.urlopen(base_of(server) + "/dashboard/" + name) as answer:
            assert kind in answer.headers["Content-Type"]
            assert len(answer.read()) > 500


def test_json_answers_are_gzipped_for_clients_that_accept_it(server):
    import gzip
    url = (base_of(server) + f"/dashboard/api/sites/lyon/series?job_id={DONE}"
           "&metrics=wattmetre_power_watt&width=500")
    plain = urllib.request.urlopen(url).read()
    asked = urllib.request.Request(url, headers={"Accept-Encoding": "gzip, deflate, br, zstd"})
    with urllib.request.urlopen(asked) as answer:
        assert answer.headers["Content-Encoding"] == "gzip"
        body = answer.read()
    assert len(body) * 3 < len(plain)
    assert gzip.decompress(body) == plain
    assert json.loads(plain)["rows"] == 2 * (600 * 50 + 1)


def test_sites_and_site_page(browser, server, shots):
    open_page(browser, server, "#/")
    assert "lyon" in browser.find_element("css selector", "main").text
    assert console_errors(browser) == []
    screenshot(browser, shots, "sites")
    open_page(browser, server, "#/site/lyon")
    rows = browser.find_elements("css selector", "table[data-cluster=nova] tr[data-node]")
    assert len(rows) == 20
    first = browser.find_element("css selector", "tr[data-node=nova-5]")
    watts = float(first.find_element("css selector", ".power").text.replace(",", ""))
    assert 60 < watts < 300
    assert str(RUNNING) in first.text
    assert console_errors(browser) == []
    screenshot(browser, shots, "site")


def test_jobs_page_shows_energy(browser, server, shots):
    open_page(browser, server, "#/jobs/lyon")
    def energies():
        cells = [c.text for c in browser.find_elements("css selector", "#jobs td.energy")]
        return cells if cells and all("Wh" in c for c in cells) else None

    cells = wait_until(energies, "every job's energy", every=0.2)
    assert len(cells) == 3 and all("Wh" in c for c in cells), cells
    assert all(" ± " in c for c in cells), cells
    done = browser.find_element("css selector", f"tr[data-job='{DONE}']").text
    assert "alice" in done and "terminated" in done and "monitor" in done and "10m 0s" in done
    assert console_errors(browser) == []
    screenshot(browser, shots, "jobs")


def test_job_page_plots_and_energy(browser, server, shots):
    state = open_page(browser, server, f"#/job/lyon/{DONE}")
    power = plot_record(browser, "wattmetre_power_watt")
    assert power is not None
    assert [s.split(" ")[0] for s in power["series"]] == ["nova-1", "nova-4"]
    # 600 s at 50 Hz, both ends included, per node; every bucket holds samples.
    assert power["rows"] == 2 * (600 * 50 + 1)
    assert power["points"] == 2 * power["buckets"]
    assert 300 <= power["buckets"] <= 1400
    # One plot per power source the nodes have.
    job = get_json(base_of(server) + f"/dashboard/api/sites/lyon/jobs/{DONE}")
    offered = {m for n in job["node_details"] for m in n["metrics"]}
    for metric in ("wattmetre_power_watt", "pdu_outlet_power_watt", "bmc_node_power_watt"):
        assert (plot_record(browser, metric) is not None) == (metric in offered), metric
    network = plot_record(browser, "network")
    assert network["rows"] > 0 and len(network["series"]) >= 2
    # The energy shown is kwatt energy's for the same job.
    done = run_kwatt("energy", "--api", server.url, "--job", f"lyon:{DONE}", "--json", "--quiet")
    assert done.returncode == 0, done.stderr
    expected = json.loads(done.stdout)
    assert state["energy"]["total"] == expected["total"]
    assert state["energy"]["nodes"] == expected["nodes"]
    shown = browser.find_element("css selector", "#energy tr.total td.joules").text
    assert float(shown.replace(",", "")) == pytest.approx(expected["total"]["joules"], abs=0.06)
    # With its 95 % interval, the terms on demand.
    interval = browser.find_element("css selector", "#energy tr.total td.interval")
    assert float(interval.text.replace(",", "")) == pytest.approx(
        expected["total"]["interval"]["half_width_joules"], abs=0.06)
    assert "accuracy: " in interval.get_attribute("title")
    assert "clock: " in interval.get_attribute("title")
    links = {a.get_attribute("id"): a.get_attribute("href")
             for a in browser.find_elements("css selector", ".toolbar a")}
    jsonl = urllib.request.urlopen(links["download-jsonl"]).read().decode().splitlines()
    assert json.loads(jsonl[0])["device_id"] in ("nova-1", "nova-4")
    csv = urllib.request.urlopen(links["download-csv"]).read().decode().splitlines()
    assert csv[0] == "timestamp,site,node,device_id,metric_id,value,labels"
    assert len(csv) == len(jsonl) + 1
    command = browser.find_element("css selector", "#backup-command").text
    assert command.startswith("kwatt backup --api ") and f"--job lyon:{DONE}" in command
    assert console_errors(browser) == []
    screenshot(browser, shots, "job")


def test_zoom_changes_the_query(browser, server):
    from selenium.webdriver.common.action_chains import ActionChains
    open_page(browser, server, f"#/job/lyon/{DONE}")
    before = plot_record(browser, "wattmetre_power_watt")
    over = browser.find_element("css selector", "[data-plot=wattmetre_power_watt] .u-over")
    ActionChains(browser).move_to_element_with_offset(over, -200, 0).click_and_hold() \
        .move_by_offset(100, 0).release().perform()
    after = next_query(browser, "wattmetre_power_watt", before)
    assert after["queries"] == before["queries"] + 1
    assert after["query"] != before["query"]
    assert after["start"] > before["start"] and after["end"] < before["end"]
    assert after["step"] < before["step"] / 5  # finer: the view needs more resolution
    assert console_errors(browser) == []


def test_pan_moves_the_view_and_re_queries(browser, server):
    open_page(browser, server, f"#/job/lyon/{DONE}")
    before = plot_record(browser, "wattmetre_power_watt")
    browser.find_element("css selector", "[data-plot=wattmetre_power_watt] [data-pan=earlier]").click()
    after = next_query(browser, "wattmetre_power_watt", before)
    assert after["queries"] == before["queries"] + 1
    width = before["end"] - before["start"]
    # Half the view earlier, at the same resolution (the same width in pixels).
    assert after["start"] == pytest.approx(before["start"] - width / 2, abs=before["step"] * 2)
    assert after["end"] - after["start"] == pytest.approx(width, rel=0.01)
    assert console_errors(browser) == []


def test_running_job_plot_grows(browser, server, shots):
    open_page(browser, server, f"#/job/lyon/{RUNNING}")
    first = plot_record(browser, "wattmetre_power_watt")
    assert first["rows"] > 2 * 100 * 50
    began = time.monotonic()

    def grown():
        now = plot_record(browser, "wattmetre_power_watt")
        return now if now["rows"] > first["rows"] and now["end"] > first["end"] else None

    now = wait_until(grown, "the plot to grow", timeout=10, every=0.1)
    assert time.monotonic() - began < 2.5, "new data should be on screen within 2 s"
    assert now.get("tails", 0) >= 1
    assert console_errors(browser) == []
    screenshot(browser, shots, "job-running")


def test_node_page(browser, server, shots):
    open_page(browser, server, "#/node/lyon/nova-1?window=3600")
    power = plot_record(browser, "wattmetre_power_watt")
    assert power["series"][0].startswith("nova-1") and power["rows"] > 3000
    assert plot_record(browser, "network_ifacein_bytes_total")["rows"] > 0
    assert console_errors(browser) == []
    screenshot(browser, shots, "node")


def test_energy_endpoint_over_a_store_equals_kwatt_energy(tmp_path):
    store = store_of_simulation(tmp_path, [["--job", f"lyon:{DONE}"]], jobs=JOBS)
    served = start_server(store=store, tmp_path=tmp_path)
    try:
        report = get_json(base_of(served) + f"/dashboard/api/sites/lyon/jobs/{DONE}/energy")
        done = run_kwatt("energy", "--api", served.url, "--job", f"lyon:{DONE}", "--json",
                         "--quiet")
        assert done.returncode == 0, done.stderr
        assert report["total"] == json.loads(done.stdout)["total"]
        series = get_json(base_of(served) + "/dashboard/api/sites/lyon/series?job_id="
                          f"{DONE}&metrics=wattmetre_power_watt&width=100")
        assert series["rows"] == 2 * (600 * 50 + 1) and len(series["series"]) == 2
        with urllib.request.urlopen(base_of(served) + "/dashboard/") as answer:
            assert b"uPlot.iife.min.js" in answer.read()
    finally:
        served.stop()


def test_what_cannot_be_drawn_or_computed_is_said_where_it_is(tmp_path, browser, shots):
    """Issue 36, item 10: a job too large for one dashboard answer (here a bound of 20,000 rows; a
    job of 100 nodes over a week meets the default 30 million) says so in each part of its page,
    with the command that computes its energy; a plot with no rows in its window says so; the
    header never shows a request's URL."""
    store = store_of_simulation(tmp_path, [["--job", f"lyon:{DONE}"]], jobs=JOBS)
    served = start_server("--dashboard-max-rows", 20000, store=store, tmp_path=tmp_path)
    try:
        open_page(browser, served, f"#/job/lyon/{DONE}")
        watts = plot_record(browser, "wattmetre_power_watt")
        assert "more than 20000 rows" in watts["error"], watts
        info = browser.execute_script(
            "return document.querySelector('[data-plot=wattmetre_power_watt] .info').textContent")
        assert info.startswith("Not drawn (") and "more than 20000 rows" in info, info
        network = plot_record(browser, "network")  # fewer rows: drawn
        assert network["error"] is None and network["rows"] > 0, network
        error = browser.execute_script(
            "return document.getElementById('energy-error').textContent")
        assert error.startswith("Not computed: this answer reads more than 20000 rows"), error
        command = browser.execute_script(
            "return document.querySelector('#energy-error + p code').textContent")
        assert command.startswith("kwatt energy --api ") and f"--job lyon:{DONE}" in command, command
        status = browser.execute_script("return document.getElementById('status').textContent")
        assert "http" not in status and "/api/" not in status, status
        # The browser logs each answer of 400 itself; the page's own code throws nothing.
        assert [e for e in console_errors(browser) if e["source"] != "network"] == []
        screenshot(browser, shots, "36-10-too-large")

        open_page(browser, served, "#/jobs/lyon")
        def energy_cell():
            cell = browser.execute_script(
                f"const c = document.querySelector('[data-job=\"{DONE}\"] .energy');"
                "return [c.textContent, c.title];")
            return cell if cell[0] != "…" else None

        cell = wait_until(energy_cell, "the job's energy cell", timeout=20, every=0.1)
        assert cell[0] == "not computed" and "more than 20000 rows" in cell[1], cell

        # The store holds the job's 10 minutes only: the last 5 minutes have no rows.
        open_page(browser, served, "#/node/lyon/nova-1?window=300")
        empty = plot_record(browser, "wattmetre_power_watt")
        assert empty["empty"] is True and empty["rows"] == 0, empty
        info = browser.execute_script(
            "return document.querySelector('[data-plot=wattmetre_power_watt] .info').textContent")
        assert info.startswith("No rows of wattmetre_power_watt for nova-1 from "), info
        assert console_errors(browser) == []
    finally:
        served.stop()


# ------------------------------------------------------------------ issue 22, item 15
# A lab's store (`serve --store --testbed`) holding past jobs only: the rows were pushed through a
# first server (POST needs --auth), then served again without --auth for the browser.

SHOTS_15 = "15-"  # the screenshots of issue 22's item 15 are named after the sub-item
T0 = 1793613600  # 2026-11-02T10:00:00Z: job 1, 600 s, 12 nodes at 1 Hz, rack-1 out 200..260 s
DST = 1792886400  # 2026-10-25T00:00:00Z = 02:00 CEST; at 01:00Z Paris goes back to 02:00 CET
BIG_CLUSTER = "hundredsofnodesinonerack"
BIG_NODES = [f"{BIG_CLUSTER}-{i}" for i in range(1, 1001)]
LAB_RATE = 3e8  # B/s into rack-1 during job 1


def lab_description():
    metrics = """\
        metrics:
          - name: wattmetre_power_watt
            description: Power of the node from its wattmeter, in watt
            period: 1000
            source: {protocol: wattmetre}
"""
    network = """\
          - name: network_ifacein_bytes_total
            description: bytes received
            period: 1000
            source: {protocol: network_equipment}
          - name: network_ifaceout_bytes_total
            description: bytes sent
            period: 1000
            source: {protocol: network_equipment}
"""
    racks = ", ".join(f"rack-{i}" for i in range(1, 13))
    return f"""\
sites:
  - uid: mylab
    name: My lab
    clusters:
      - uid: rack
        model: Dell PowerEdge R640
        nodes: [{racks}]
{metrics}{network}  - uid: big
    name: A big lab
    clusters:
      - uid: {BIG_CLUSTER}
        model: Dell PowerEdge C6420
        nodes: [{", ".join(BIG_NODES)}]
{metrics}"""


def lab_rows():
    rows = []
    for k in range(1, 13):
        for i in range(601):
            if k == 1 and 200 < i < 260:
                continue  # a 60 s outage of rack-1's wattmeter
            value = (100 if i <= 200 else 200) if k == 1 else 210 + 5 * k
            rows.append({"timestamp": T0 + i, "device_id": f"rack-{k}",
                         "metric_id": "wattmetre_power_watt", "value": value})
    for i in range(601):
        rows.append({"timestamp": T0 + i, "device_id": "rack-1",
                     "metric_id": "network_ifacein_bytes_total", "value": LAB_RATE * i})
        rows.append({"timestamp": T0 + i, "device_id": "rack-1",
                     "metric_id": "network_ifaceout_bytes_total", "value": LAB_RATE / 2 * i})
    for i in range(0, 7201, 2):  # two hours across the night Paris goes back from CEST to CET
        rows.append({"timestamp": DST + i, "device_id": "rack-1",
                     "metric_id": "wattmetre_power_watt", "value": 150 + 50 * (i >= 3600)})
    for node in (BIG_NODES[0], BIG_NODES[-1]):
        for i in range(0, 601, 5):
            rows.append({"timestamp": T0 + i, "device_id": node,
                         "metric_id": "wattmetre_power_watt", "value": 120})
    return rows


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    import requests
    tmp = tmp_path_factory.mktemp("lab")
    description = tmp / "lab.yaml"
    description.write_text(lab_description())
    store = tmp / "lab.kwatt"
    now = int(time.time())
    for args in (
            ["--site", "mylab", "--id", "1", "--user", "alice",
             "--nodes", ",".join(f"rack-{i}" for i in range(1, 13)), "--types", "monitor",
             "--start", T0, "--stop", T0 + 600],
            ["--site", "mylab", "--id", "2", "--user", "bob", "--nodes", "rack-1",
             "--start", DST, "--stop", DST + 7200],
            ["--site", "mylab", "--id", "3", "--user", "carol", "--nodes", "rack-2",
             "--start", now + 30 * 86400, "--stop", now + 31 * 86400],
            ["--site", "big", "--id", "4", "--user", "dave", "--nodes", ",".join(BIG_NODES),
             "--start", T0, "--stop", T0 + 600]):
        done = run_kwatt("jobs", "add", "--store", store, "--testbed", description, *args)
        assert done.returncode == 0, done.stderr
    pushing = start_server("--testbed", description, "--auth", "alice:s3cret", store=store)
    try:
        rows = lab_rows()
        by_site = {"mylab": [r for r in rows if r["device_id"].startswith("rack-")],
                   "big": [r for r in rows if not r["device_id"].startswith("rack-")]}
        for site, site_rows in by_site.items():
            for i in range(0, len(site_rows), 5000):
                pushed = requests.post(pushing.url + f"/sites/{site}/metrics",
                                       json=site_rows[i:i + 5000], auth=("alice", "s3cret"),
                                       timeout=60)
                assert pushed.status_code == 201, pushed.text
    finally:
        pushing.stop()
    served = start_server("--testbed", description, store=store)
    served.store, served.description = store, description
    yield served
    served.stop()


@pytest.fixture(scope="module")
def drawing_browser():
    """A browser that records every text drawn on a canvas (window.__drawn: text, box, align,
    the plot it belongs to), so that tests can check what the plots show."""
    driver = _webdriver()
    driver.execute_cdp_cmd("Page.addScriptToEvaluateOnNewDocument", {"source": """
      window.__drawn = [];
      const fillText = CanvasRenderingContext2D.prototype.fillText;
      CanvasRenderingContext2D.prototype.fillText = function (text, x, y, maxWidth) {
        const w = this.measureText(String(text)).width;
        const a = this.textAlign;
        const left = a === 'center' ? x - w / 2 : (a === 'right' || a === 'end') ? x - w : x;
        window.__drawn.push({text: String(text), x: x, y: y, left: left, right: left + w,
                             align: a, canvas: this.canvas});
        return fillText.apply(this, arguments);
      };"""})
    yield driver
    driver.quit()


def drawn(browser, plot):
    """The texts last drawn on `plot`'s canvas, after a redraw."""
    browser.execute_script(
        "window.__drawn = []; window.kwattDashboard.plots[arguments[0]].uplot.redraw(false, true);",
        plot)
    time.sleep(0.3)
    return browser.execute_script(
        "return window.__drawn.filter(d => { const p = d.canvas.closest('[data-plot]');"
        " return p && p.dataset.plot === arguments[0]; }).map(d => { const {canvas, ...r} = d;"
        " return r; })", plot)


def plot_geometry(browser, plot, times=()):
    """The plot area in canvas pixels, and the canvas x of each of `times`."""
    return browser.execute_script(
        "const u = window.kwattDashboard.plots[arguments[0]].uplot;"
        "return {left: u.bbox.left, top: u.bbox.top, width: u.bbox.width, height: u.bbox.height,"
        " xs: arguments[1].map(t => u.valToPos(t, 'x', true))};", plot, list(times))


def saturated_pixels(browser, plot, x, top, height):
    """How many pixels of the canvas column x (canvas pixels) between top and top + height have
    a colour (a series' line or band), not grey (the grid, phase marks) or white."""
    return browser.execute_script(
        "const c = document.querySelector('[data-plot=' + arguments[0] + '] canvas');"
        "const d = c.getContext('2d').getImageData(Math.round(arguments[1]), Math.round(arguments[2]),"
        " 1, Math.round(arguments[3])).data; let n = 0;"
        "for (let i = 0; i < d.length; i += 4) {"
        " const hi = Math.max(d[i], d[i+1], d[i+2]), lo = Math.min(d[i], d[i+1], d[i+2]);"
        " if (d[i+3] > 0 && hi - lo > 40) n++; } return n;", plot, x, top, height)


def shot(browser, name):
    """A screenshot of the page as it is, named after the sub-item, in $KWATT_SCREENSHOTS (by
    default kwatt-screenshots in the system's temporary directory: never in the checkout)."""
    target = Path(os.environ.get("KWATT_SCREENSHOTS") or
                  Path(tempfile.gettempdir()) / "kwatt-screenshots")
    target.mkdir(parents=True, exist_ok=True)
    browser.save_screenshot(str(target / f"{SHOTS_15}{name}.png"))


def test_a_data_gap_breaks_the_line(drawing_browser, lab):
    b = drawing_browser
    open_page(b, lab, "#/job/mylab/1")
    plot = "wattmetre_power_watt"
    g = plot_geometry(b, plot, [T0 + 230, T0 + 100.5, T0 + 400.5])
    assert g["left"] <= g["xs"][0] <= g["left"] + g["width"]
    # Inside the 60 s outage of rack-1 (100 W before, 200 W after), no series is drawn at all
    # between 100 and 200 W: the line breaks there instead of ramping.
    band = b.execute_script(
        "const u = window.kwattDashboard.plots[arguments[0]].uplot;"
        "return [u.valToPos(195, 'y', true), u.valToPos(105, 'y', true)];", plot)
    ramp = saturated_pixels(b, plot, g["xs"][0], band[0], band[1] - band[0])
    # Between two samples a second apart (several buckets apart), the line is drawn.
    joined = saturated_pixels(b, plot, g["xs"][1], g["top"], g["height"])
    shot(b, "data-gap")
    assert joined > 0
    assert ramp == 0, "the outage is drawn as a ramp"


def test_phase_names_stay_inside_their_phase(drawing_browser, server):
    b = drawing_browser
    open_page(b, server, f"#/job/lyon/{PHASED}")
    plot = "wattmetre_power_watt"
    job = get_json(base_of(server) + f"/dashboard/api/sites/lyon/jobs/{PHASED}")
    phases = job["phases"]
    texts = drawn(b, plot)
    g = plot_geometry(b, plot, [p["start"] for p in phases] + [phases[-1]["end"]])
    names = {p["name"] for p in phases}
    labels = [t for t in texts if t["text"].rstrip("…") and
              any(n.startswith(t["text"].rstrip("…")) for n in names) and t["y"] < g["top"] + 40]
    assert labels, texts
    xs = g["xs"]
    for t in labels:
        # The phase whose start is the nearest on the left of the label's anchor.
        i = max(i for i in range(len(phases)) if xs[i] <= t["x"] + 0.5)
        assert phases[i]["name"].startswith(t["text"].rstrip("…")), (t, phases[i])
        assert xs[i] - 0.5 <= t["left"] and t["right"] <= xs[i + 1] + 0.5, (t, xs[i], xs[i + 1])
    shot(b, "phase-names")


def x_axis_labels(browser, plot):
    g = plot_geometry(browser, plot)
    return [t for t in drawn(browser, plot) if t["y"] > g["top"] + g["height"]], g


def assert_no_overlap(labels):
    rows = {}
    for t in labels:
        rows.setdefault(round(t["y"]), []).append(t)
    for row in rows.values():
        row.sort(key=lambda t: t["left"])
        for a, c in zip(row, row[1:]):
            assert a["right"] + 2 <= c["left"], f"{a['text']!r} overlaps {c['text']!r}"


def test_the_repeated_dst_hour_shows_its_offset(drawing_browser, lab):
    b = drawing_browser
    open_page(b, lab, "#/job/mylab/2")
    heading = b.find_element("css selector", "main").text
    # The job starts at 02:00 CEST: the first of the two 02:00 of that night.
    assert "2026-10-25 02:00:00 +02:00" in heading, heading
    labels, _ = x_axis_labels(b, "wattmetre_power_watt")
    texts = [t["text"] for t in labels]
    assert any("+02:00" in t for t in texts) and any("+01:00" in t for t in texts), texts
    # Every tick's label is its own (the time, and below it the date or the offset when needed).
    ticks = {}
    for t in labels:
        ticks.setdefault(round(t["x"]), []).append(t["text"])
    shown = ["\n".join(v) for _, v in sorted(ticks.items())]
    assert len(set(shown)) == len(shown), shown
    shot(b, "dst-offset")


def test_a_future_job_says_it_has_not_started(drawing_browser, lab):
    b = drawing_browser
    open_page(b, lab, "#/job/mylab/3")
    text = b.find_element("css selector", "main").text
    assert "has not started" in text, text
    assert b.find_elements("css selector", "[data-plot]") == []
    assert "…" not in text
    shot(b, "future-job")


def test_opened_with_credentials_in_the_url(browser, lab, tmp_path):
    served = start_server("--testbed", lab.description, "--auth", "alice:s3cret", store=lab.store)
    try:
        url = base_of(served).replace("http://", "http://alice:s3cret@") + "/dashboard/#/site/mylab"
        browser.get("about:blank")
        browser.get(url)
        loaded(browser, "the site page, credentials in its URL")
        rows = browser.find_elements("css selector", "table[data-cluster=rack] tr[data-node]")
        shot(browser, "credentials-in-url")
        assert len(rows) == 12, browser.find_element("css selector", "main").text
    finally:
        served.stop()


def test_site_without_data_says_so(browser, lab):
    open_page(browser, lab, "#/site/mylab")
    total = browser.find_element("css selector", "#site-total").text
    shot(browser, "no-latest-power")
    assert "0 W" not in total and "no node" in total, total


def test_node_page_offers_the_spans_of_its_jobs(browser, lab):
    state = open_page(browser, lab, "#/node/mylab/rack-1")
    options = [o.text for o in browser.find_elements("css selector", "#window option")]
    assert any("job 1" in o for o in options) and any("job 2" in o for o in options), options
    # The store holds past jobs only: the page opens on the newest of them, not on an empty hour.
    power = plot_record(browser, "wattmetre_power_watt")
    shot(browser, "node-spans")
    assert power["rows"] > 500, power


def test_many_series_have_a_legend_and_a_tooltip(browser, lab):
    from selenium.webdriver.common.action_chains import ActionChains
    open_page(browser, lab, "#/job/mylab/1")
    box = "[data-plot=wattmetre_power_watt]"
    shown = [e.text for e in browser.find_elements("css selector", f"{box} .u-legend .u-series")
             if e.is_displayed()]
    assert sorted(shown) == sorted(f"rack-{i}" for i in range(1, 13)), shown
    over = browser.find_element("css selector", f"{box} .u-over")
    ActionChains(browser).move_to_element_with_offset(over, 100, 0).perform()
    time.sleep(0.5)
    tips = [e for e in browser.find_elements("css selector", f"{box} .tooltip") if e.is_displayed()]
    shot(browser, "legend-tooltip")
    assert tips and "rack-" in tips[0].text and " W" in tips[0].text, [t.text for t in tips]


def test_large_values_have_si_prefixes(drawing_browser, lab):
    b = drawing_browser
    open_page(b, lab, "#/job/mylab/1")
    g = plot_geometry(b, "network")
    texts = [t["text"] for t in drawn(b, "network") if t["right"] <= g["left"] + 1]
    numbers = [t for t in texts if any(ch.isdigit() for ch in t)]
    assert numbers, texts
    assert not any("," in t for t in numbers), numbers
    assert any(t.endswith("MB/s") for t in numbers), numbers
    b.execute_script("document.querySelector('[data-plot=network]').scrollIntoView()")
    shot(b, "si-units")


@pytest.mark.parametrize("width", [1400, 420])
def test_time_axis_has_iso_dates_and_no_overlap(drawing_browser, lab, width):
    import re
    b = drawing_browser
    b.set_window_size(width, 1100)
    try:
        for job in (1, 2):
            open_page(b, lab, f"#/job/mylab/{job}")
            labels, _ = x_axis_labels(b, "wattmetre_power_watt")
            texts = [t["text"] for t in labels]
            assert any(re.fullmatch(r"\d{4}-\d{2}-\d{2}( [+-]\d{2}:\d{2})?", t) for t in texts), texts
            assert not any(re.search(r"/|am|pm", t, re.I) for t in texts), texts
            assert_no_overlap(labels)
        shot(b, f"iso-dates-{width}px")
    finally:
        b.set_window_size(1400, 1100)


def test_tables_are_not_cut_on_a_narrow_window(browser, lab):
    browser.set_window_size(400, 900)
    try:
        for page in ("#/jobs/mylab", "#/job/mylab/1"):
            open_page(browser, lab, page)
            time.sleep(1)
            for table in browser.find_elements("css selector", "main table"):
                cut = browser.execute_script(
                    "const t = arguments[0]; const r = t.getBoundingClientRect();"
                    "if (r.right <= document.documentElement.clientWidth + 1) return false;"
                    "for (let e = t.parentElement; e && e !== document.body; e = e.parentElement) {"
                    " const o = getComputedStyle(e).overflowX;"
                    " if ((o === 'auto' || o === 'scroll') && e.scrollWidth > e.clientWidth &&"
                    "     e.getBoundingClientRect().right <= document.documentElement.clientWidth + 1)"
                    "  return false; }"
                    "return true;", table)
                assert not cut, f"{page}: table {table.get_attribute('id')} is cut"
            shot(browser, "narrow-" + page.strip("#/").replace("/", "-"))
    finally:
        browser.set_window_size(1400, 1100)


def test_bad_numbers_are_refused_and_named(browser, lab):
    answer = urllib.request.Request(
        base_of(lab) + "/dashboard/api/sites/mylab/series?nodes=rack-1&width=10abc")
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(answer)
    assert refused.value.code == 400 and "10abc" in refused.value.read().decode()
    for bad in ("step=1x", "width=", "step=nan"):
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(base_of(lab) + "/dashboard/api/sites/mylab/series?nodes=rack-1&"
                                   + bad)
        assert refused.value.code == 400, bad
    open_page(browser, lab, "#/node/mylab/rack-1?window=10abc")
    text = browser.find_element("css selector", "main").text
    shot(browser, "strict-numbers")
    assert "10abc" in text and "window" in text, text


def test_route_parts_are_encoded_in_api_urls(browser, lab):
    state = open_page(browser, lab, "#/node/mylab/rack-1%23x")
    text = browser.find_element("css selector", "main").text
    shot(browser, "encoded-route")
    assert "rack-1#x" in text and "does not exist" in text, text
    assert all("#" not in q for q in state["queries"]), state["queries"]


def test_a_thousand_nodes_are_asked_in_pieces(browser, lab):
    state = open_page(browser, lab, "#/job/big/4", timeout=60)
    power = plot_record(browser, "wattmetre_power_watt")
    assert power is not None and console_errors(browser) == []
    assert sorted(s.split(" ")[0] for s in power["series"]) == sorted(
        [BIG_NODES[0], BIG_NODES[-1]])
    assert all(len(q) < 8000 for q in state["queries"]), max(map(len, state["queries"]))
    assert power["pieces"] > 1
    browser.execute_script(
        "document.querySelector('[data-plot=wattmetre_power_watt]').scrollIntoView()")
    shot(browser, "thousand-nodes")


def test_a_too_long_url_is_answered_with_a_reason(lab):
    url = (base_of(lab) + "/dashboard/api/sites/big/series?nodes=" + ",".join(BIG_NODES))
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(url)
    assert refused.value.code == 414
    body = refused.value.read().decode()
    assert "16384" in body and "URL" in body, body


def test_serve_prints_the_dashboard_url(browser, tmp_path):
    import subprocess
    from conftest import KWATT
    process = subprocess.Popen([KWATT, "serve", "--simulate", "--port", "0"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    import queue
    import threading
    lines = queue.Queue()
    threading.Thread(target=lambda: [lines.put(line) for line in process.stdout],
                     daemon=True).start()

    def line():
        try:
            return lines.get(timeout=30).strip()
        except queue.Empty:
            return None
    try:
        api = line()
        assert api.startswith("http://127.0.0.1:") and api.endswith("/stable")
        dashboard = line()
        assert dashboard == api.replace("/stable", "/dashboard/"), dashboard
        browser.get(dashboard)
        loaded(browser, dashboard)
        assert "lyon" in browser.find_element("css selector", "main").text
    finally:
        process.terminate()
        process.wait(timeout=10)
