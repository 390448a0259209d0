"""The dashboard of `kwatt serve` in a real browser: Debian's chromium driven by chromium-driver
through Selenium (doc/dashboard.md). Screenshots of each page are saved in the test's directory,
and in $KWATT_SCREENSHOTS when it is set."""
import json
import os
import shutil
import time
import urllib.request
from pathlib import Path

import pytest

from conftest import run_kwatt, start_server, store_of_simulation

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
NOW = int(time.time())
# A finished job (10 minutes, 50 Hz wattmeters) and one running since 2 minutes.
DONE, RUNNING = 7001, 7002
JOBS = {"jobs": [
    {"site": "lyon", "uid": DONE, "user": "alice", "nodes": ["nova-1", "nova-4"],
     "started_at": NOW - 1800, "stopped_at": NOW - 1200, "types": ["monitor"],
     "phases": [{"name": "idle", "duration": 200, "cpu": 0.0},
                {"name": "busy", "duration": 400, "cpu": 1.0, "network": 0.3}]},
    {"site": "lyon", "uid": RUNNING, "user": "bob", "nodes": ["nova-5", "nova-6"],
     "started_at": NOW - 120, "walltime": 7200, "types": ["monitor=wattmetre_power_watt"]},
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


def open_page(browser, server, fragment, timeout=30):
    browser.get("about:blank")
    browser.get_log("browser")  # drop what came before
    browser.get(base_of(server) + "/dashboard/" + fragment)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if browser.execute_script("return !!(window.kwattDashboard && window.kwattDashboard.ready)"):
            return browser.execute_script("return window.kwattDashboard")
        time.sleep(0.1)
    pytest.fail(f"{fragment} did not finish loading in {timeout} s")


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
    """The plot's record once it asked again (or as it is after `timeout` seconds)."""
    deadline = time.monotonic() + timeout
    while True:
        after = plot_record(browser, name)
        if after["queries"] > before["queries"] or time.monotonic() > deadline:
            return after
        time.sleep(0.1)


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
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        cells = [c.text for c in browser.find_elements("css selector", "#jobs td.energy")]
        if cells and all("Wh" in c for c in cells):
            break
        time.sleep(0.2)
    assert len(cells) == 2 and all("Wh" in c for c in cells), cells
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
    while time.monotonic() - began < 10:
        now = plot_record(browser, "wattmetre_power_watt")
        if now["rows"] > first["rows"] and now["end"] > first["end"]:
            break
        time.sleep(0.1)
    assert now["rows"] > first["rows"] and now["end"] > first["end"]
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
