"""`kwatt report` against the real server: a directory a paper can use, its HTML page looked at in
a real Chromium, its LaTeX tables compiled by a real LaTeX, its figures, provenance and emissions
checked against what kwatt energy and the simulator say. The report with figures is the Python
package's (`python -m kwatt report`, matplotlib in its own process); the C++ CLI's is the same
report without them; neither starts a process (strace)."""
import csv
import json
import os
import shutil
import subprocess
import sys

import pytest

from conftest import KWATT, start_server
from test_dashboard import _webdriver, console_errors, screenshot

T0 = 1744977600  # 2025-04-18T14:00:00+02:00
# Two sets of three 10-minute runs of nova-1 and taurus-3 (2 idle, 6 of work, 2 idle): B works
# harder. taurus-3 has a wattmeter and a BMC: its sources are checked against each other.
LEVELS = {"a": [0.50, 0.51, 0.52], "b": [0.60, 0.61, 0.62]}


def jobs():
    out = []
    for s, (name, levels) in enumerate(LEVELS.items()):
        for i, level in enumerate(levels):
            start = T0 + (3 * s + i) * 1200
            out.append({"site": "lyon", "uid": 100 + 3 * s + i, "nodes": ["nova-1", "taurus-3"],
                        "started_at": start, "stopped_at": start + 600,
                        "phases": [{"name": "idle", "duration": 120, "cpu": 0},
                                   {"name": "work", "duration": 360, "cpu": level},
                                   {"name": "idle", "duration": 120, "cpu": 0}]})
    return {"jobs": out}


# RTE's eCO2mix export as it downloads (tab-separated, Latin-1, French local time): 40 g/kWh
# until 15:00, 60 after; a quarter-hour without a value; the closing notice.
ECO2MIX = "\r\n".join(
    ["P\u00e9rim\u00e8tre\tNature\tDate\tHeures\tConsommation\tTaux de Co2"] +
    [f"France\tDonn\u00e9es temps r\u00e9el\t2025-04-18\t{h:02d}:{m:02d}\t50000\t"
     f"{'' if (h, m) == (14, 45) else (40 if h < 15 else 60)}"
     for h in range(13, 18) for m in (0, 15, 30, 45)] +
    ["RTE ne pourra \u00eatre tenu responsable de l'usage des donn\u00e9es", ""])


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    directory = tmp_path_factory.mktemp("report")
    jobs_file = directory / "jobs.json"
    jobs_file.write_text(json.dumps(jobs()))
    server = start_server("--jobs", jobs_file, tmp_path=directory)
    eco2mix = directory / "eCO2mix_RTE_En-cours-TR.xls"
    eco2mix.write_bytes(ECO2MIX.encode("latin-1"))
    out = directory / "paper"
    arguments = ["--api", server.url, "lyon:100", "lyon:101", "lyon:102",
                 "--versus", "lyon:103", "--versus", "lyon:104", "--versus", "lyon:105",
                 "--phase", "work=+120..+480", "--title", "Harder work",
                 "--carbon-intensity", str(eco2mix), "--carbon-source", "RTE eCO2mix, France",
                 "--pue", "1.4", "--pue-source", "assumed for the test", "-q"]
    # The figures are drawn by the Python package of this interpreter, in its process.
    result = subprocess.run([sys.executable, "-m", "kwatt", "report", *arguments, "-o",
                             f"{out}/"], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    yield {"dir": out, "server": server, "jobs_file": jobs_file, "eco2mix": eco2mix,
           "arguments": arguments}
    server.stop()


def test_the_directory_holds_the_page_figures_tables_and_provenance(report):
    out = report["dir"]
    for name in ("report.html", "report.json", "provenance.json", "tables/energy.csv",
                 "tables/energy.json", "tables/energy.tex", "tables/comparison.csv",
                 "tables/comparison.json", "tables/comparison.tex", "tables/runs_a.csv",
                 "tables/runs_a.json", "tables/runs_b.csv", "tables/runs_b.json"):
        assert (out / name).stat().st_size > 0, name
    for figure in ("power", "energy", "runs"):
        for ext in ("png", "pdf", "svg"):
            assert (out / "figures" / f"{figure}.{ext}").stat().st_size > 1000, (figure, ext)
        assert (out / "figures" / f"{figure}.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert (out / "figures" / f"{figure}.pdf").read_bytes()[:5] == b"%PDF-"
    # Nothing is left of the work directory.
    assert not list(out.parent.glob("paper.kwatt-report-*"))


def test_its_figures_are_kwatt_energys(report):
    server = report["server"]
    runs = [a for i in range(3) for a in ("--run", f"lyon:{100 + i}")] + \
        [a for i in range(3) for a in ("--versus", f"lyon:{103 + i}")]
    energy = subprocess.run([KWATT, "energy", "--api", server.url, *runs, "--phase",
                             "work=+120..+480", "--json", "-q"],
                            capture_output=True, text=True, timeout=300, check=True)
    expected = json.loads(energy.stdout)
    data = json.loads((report["dir"] / "report.json").read_text())
    assert data["comparison"] == expected["comparison"]
    work = next(c for c in data["comparison"] if c["scope"] == "total" and c["phase"] == "work")
    assert work["significant"]
    rows = list(csv.DictReader((report["dir"] / "tables/energy.csv").open()))
    assert [(r["set"], r["run"], r["phase"]) for r in rows][:2] == [("a", "lyon:100", "window"),
                                                                   ("a", "lyon:100", "work")]
    for row, run in zip(rows[::2], expected["runs"]["a"] + expected["runs"]["b"]):
        assert float(row["joules"]) == pytest.approx(run["total_joules"])
        assert float(row["half_width_joules"]) == pytest.approx(run["total_half_width_joules"])
    # taurus-3's wattmeter and BMC were checked against each other.
    checks = data["sets"]["a"][0]["energy"]["source_checks"]
    assert any(c["node"] == "taurus-3.lyon.grid5000.fr" for c in checks)


def test_emissions_name_their_factors_and_follow_the_series(report):
    data = json.loads((report["dir"] / "report.json").read_text())
    factors = data["emissions_factors"]
    assert factors == {"pue": 1.4, "pue_source": "assumed for the test", "intensity": "series",
                       "intensity_source": "RTE eCO2mix, France"}
    for set_name, runs in data["sets"].items():
        for run in runs:
            e = run["emissions"]
            kwh = run["energy"]["total"]["joules"] / 3.6e6
            assert e["kwh_at_wall"] == pytest.approx(kwh)
            # Runs before 15:00 (Paris) at 40 g/kWh, after at 60; lyon:102 spans 14:40..14:50.
            start_hour = int(run["energy"]["start"][11:13])
            intensity = 40 if start_hour < 15 else 60
            assert e["mean_grams_per_kwh"] == pytest.approx(intensity)
            assert e["co2e_grams"] == pytest.approx(kwh * 1.4 * intensity)
            # The phase's emissions too (the doc says so; they were on window rows only).
            work = e["phases"]["work"]
            phase_kwh = run["energy"]["phase_totals"]["work"]["joules"] / 3.6e6
            assert work["co2e_grams"] == pytest.approx(phase_kwh * 1.4 * intensity)
    with open(report["dir"] / "tables" / "energy.csv") as f:
        rows = list(csv.DictReader(f))
    assert rows and all(row["co2e_grams"] for row in rows), rows[:3]
    html = (report["dir"] / "report.html").read_text()
    assert "RTE eCO2mix, France" in html and "assumed for the test" in html
    assert "-0.00" not in html


def test_provenance_says_how_to_make_it_again(report):
    p = json.loads((report["dir"] / "provenance.json").read_text())
    assert p["kwatt_version"]
    assert p["api"] == report["server"].url
    nodes = p["runs"][0]["nodes"]
    assert [n["node"] for n in nodes] == ["nova-1.lyon.grid5000.fr", "taurus-3.lyon.grid5000.fr"]
    assert nodes[0]["cluster"] == "nova" and nodes[0]["power_metric"] == "wattmetre_power_watt"
    assert nodes[0]["model"] == "Dell PowerEdge R430"  # the reference's cluster object
    assert nodes[0]["catalogue_periods"]["wattmetre_power_watt"]["period_ms"] == 1000
    assert p["runs"][0]["phases"] == [{"name": "work", "start": "2025-04-18T14:02:00+02:00",
                                       "end": "2025-04-18T14:08:00+02:00"}]
    assert p["stated_accuracies"]["wattmetre_power_watt"]["basis"]
    assert p["reproduce"][0].startswith("kwatt backup --api ")
    command = p["reproduce"][-1]
    assert command.startswith("kwatt report lyon:100 lyon:101 lyon:102 --versus lyon:103")
    assert "--pue 1.4" in command and "--phase work=+120..+480" in command


def test_a_report_from_archives_names_the_hardware_as_one_from_the_api(report, tmp_path):
    """The backup keeps each cluster's hardware in its manifest (doc/archive_format.md,
    "hardware"); the report from the archives names it as the report from the jobs does."""
    server = report["server"]
    archives = []
    for job in ("lyon:100", "lyon:103"):
        archive = tmp_path / job.replace(":", "-")
        subprocess.run([KWATT, "backup", "--api", server.url, "--job", job, "-o", archive,
                        "--quiet"], capture_output=True, text=True, timeout=300, check=True)
        archives.append(archive)
    manifest = json.loads((archives[0] / "manifest.json").read_text())
    assert manifest["hardware"] == {"lyon/nova": {"model": "Dell PowerEdge R430"},
                                    "lyon/taurus": {"model": "Dell PowerEdge R720"}}
    out = tmp_path / "from-archives"
    # Archives alone never read the credentials file: a broken one does not stop them.
    home = tmp_path / "home"
    home.mkdir()
    (home / ".python-grid5000.yaml").write_text("username: [unclosed\n")
    result = subprocess.run([KWATT, "report", archives[0], "--versus", archives[1], "--phase",
                             "work=+120..+480", "-o", out, "-q"], capture_output=True, text=True,
                            timeout=300, env={**os.environ, "HOME": str(home)})
    assert result.returncode == 0, result.stderr
    from_archive = json.loads((out / "provenance.json").read_text())["runs"][0]["nodes"]
    from_api = json.loads((report["dir"] / "provenance.json").read_text())["runs"][0]["nodes"]
    assert [(n["node"], n["model"]) for n in from_archive] == \
        [(n["node"], n["model"]) for n in from_api] == \
        [("nova-1.lyon.grid5000.fr", "Dell PowerEdge R430"),
         ("taurus-3.lyon.grid5000.fr", "Dell PowerEdge R720")]


def test_the_clis_report_is_the_same_without_figures_and_says_where_they_come_from(report,
                                                                                   tmp_path):
    out = tmp_path / "cli"
    result = subprocess.run([KWATT, "report", *report["arguments"], "-o", out],
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    for table in ("energy.csv", "energy.tex", "comparison.csv", "runs_a.json"):
        assert (out / "tables" / table).read_text() == \
            (report["dir"] / "tables" / table).read_text(), table
    assert list((out / "figures").iterdir()) == []
    html = (out / "report.html").read_text()
    assert 'id="no-figures"' in html and "python -m kwatt report" in html
    # Without -q, it says so too.
    again = subprocess.run([KWATT, "report", *report["arguments"][:-1], "-o", tmp_path / "again"],
                           capture_output=True, text=True, timeout=300)
    assert again.returncode == 0 and "python -m kwatt report" in again.stderr


def _execs(command, tmp_path, name):
    """The programs `command` and its children execute after it changes its directory to
    `tmp_path` (as strace -f sees them): what a process does once set up."""
    strace = shutil.which("strace")
    if strace is None:
        pytest.fail("strace is missing: run make test-deps")
    trace = tmp_path / f"{name}.strace"
    result = subprocess.run([strace, "-f", "-qq", "-e", "trace=execve,execveat,chdir", "-o", trace,
                             *command], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    lines = trace.read_text().splitlines()
    marks = [i for i, line in enumerate(lines) if f'chdir("{tmp_path}")' in line]
    assert marks, lines
    return [line for line in lines[marks[0]:] if "execve" in line]


def test_no_process_is_started_between_the_cli_and_python_either_way(report, tmp_path):
    """`kwatt report` starts no Python, kwatt.report() starts no kwatt: neither executes anything
    once started (strace -f), and kwatt.report() still draws its figures."""
    arguments = report["arguments"]
    cli = _execs(["sh", "-c", f'cd "{tmp_path}" && exec "$@"', "sh", KWATT, "report",
                  *arguments, "-o", tmp_path / "cli"], tmp_path, "cli")
    assert len(cli) == 1 and f'execve("{KWATT}"' in cli[0], cli  # the sh's exec of kwatt only
    script = ("import os, sys, kwatt; os.chdir(sys.argv[2]); kwatt.report(['lyon:100'], "
              f"sys.argv[1], versus=['lyon:103'], api={report['server'].url!r}, "
              "phases={'work': (120, 480)})")
    python = _execs([sys.executable, "-c", script, tmp_path / "py", tmp_path], tmp_path, "py")
    assert python == [], python
    assert (tmp_path / "py" / "figures" / "power.pdf").read_bytes()[:5] == b"%PDF-"
    assert 'id="figure-power"' in (tmp_path / "py" / "report.html").read_text()
    # Nor does `kwatt export --to parquet`: it names the Python command that writes Parquet.
    archive = tmp_path / "archive"
    subprocess.run([KWATT, "backup", "--api", report["server"].url, "--job", "lyon:100", "-o",
                    archive, "--quiet"], capture_output=True, timeout=300, check=True)
    result = subprocess.run([KWATT, "export", archive, "--to", "parquet", "-o",
                             tmp_path / "rows.parquet"], capture_output=True, text=True,
                            timeout=60)
    assert result.returncode == 2 and "python -m kwatt export" in result.stderr
    assert not (tmp_path / "rows.parquet").exists()


def test_the_latex_tables_compile(report, tmp_path):
    pdflatex = shutil.which("pdflatex")
    if pdflatex is None:
        pytest.fail("pdflatex is missing (texlive-latex-base, -recommended, -science): run "
                    "make test-deps")
    document = tmp_path / "paper.tex"
    tables = report["dir"] / "tables"
    document.write_text("\\documentclass{article}\n\\usepackage{booktabs}\n\\usepackage{siunitx}\n"
                        "\\begin{document}\n"
                        f"\\input{{{tables / 'energy.tex'}}}\n\n"
                        f"\\input{{{tables / 'comparison.tex'}}}\n"
                        "\\end{document}\n")
    result = subprocess.run([pdflatex, "-interaction=nonstopmode", "-halt-on-error",
                             document.name], cwd=tmp_path, capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0, result.stdout[-3000:]
    log = (tmp_path / "paper.log").read_text(errors="replace")
    # Every number read by siunitx as a number, every command known.
    assert "Package siunitx Warning" not in log and "Undefined control sequence" not in log
    assert (tmp_path / "paper.pdf").read_bytes()[:5] == b"%PDF-"


def test_the_page_in_chromium(report, tmp_path):
    browser = _webdriver()
    try:
        browser.get((report["dir"] / "report.html").as_uri())
        assert browser.find_element("id", "title").text == "Harder work"
        energy = browser.find_elements("css selector", "#energy tr")
        assert len(energy) == 1 + 12  # a header, then six runs' window and work
        assert "different" in browser.find_element("id", "comparison").text
        assert "B uses more energy than A" in browser.find_element("id", "verdict").text
        for figure in ("power", "energy", "runs"):
            svg = browser.find_element("css selector", f"#figure-{figure} svg")
            assert svg.size["width"] > 300 and svg.size["height"] > 100
        assert "kwatt report lyon:100" in browser.find_element("id", "reproduce").text
        assert browser.find_elements("css selector", "#checks td")  # taurus-3's checks
        # Self-contained: no request leaves the file (no script, stylesheet or image to fetch).
        resources = browser.execute_script(
            "return performance.getEntriesByType('resource').map(r => r.name)")
        assert resources == []
        assert console_errors(browser) == []
        screenshot(browser, tmp_path, "report")
    finally:
        browser.quit()


def test_bad_arguments_are_named_and_nothing_is_left(report, tmp_path):
    server = report["server"]
    out = tmp_path / "never"
    for args, expected in (
            (["lyon:100", "--pue", "0.5", "--carbon-intensity", "50"], "PUE"),
            (["lyon:100", "--carbon-intensity", str(tmp_path / "none.csv")],
             "neither grams per kWh nor a readable file"),
            (["lyon:100", "--pue", "1.3"], "--carbon-intensity"),
            (["nowhere"], "neither an archive directory nor a job"),
            (["lyon:100", "--confidence", "2"], "--confidence")):
        result = subprocess.run([KWATT, "report", "--api", server.url, *args, "-o", str(out)],
                                capture_output=True, text=True, timeout=60)
        assert result.returncode == 2 and expected in result.stderr, (args, result.stderr)
        assert not out.exists()
    # An existing report is not overwritten.
    result = subprocess.run([KWATT, "report", "--api", server.url, "lyon:100", "-o",
                             str(report["dir"])], capture_output=True, text=True, timeout=60)
    assert result.returncode == 2 and "exists" in result.stderr
