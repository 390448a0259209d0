"""The examples run: the notebook (nbclient), the EnOSlib script in its simulated mode, the demo.

Each test starts from nothing but the `server` fixture of conftest.py (a `kwatt serve --simulate`
with examples/jobs.json, port 0) or a server the example starts itself; the kwatt binary is
$KWATT_BIN, else build/kwatt.
"""
import json
import os
import re
import struct
import subprocess
import sys

import pytest

from conftest import KWATT, ROOT, run_kwatt

EXAMPLES = ROOT / "examples"
NOTEBOOK = EXAMPLES / "energy_notebook.ipynb"
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
# kwatt's energy from 50 Hz wattmeter data vs the simulator's continuous truth: doc/energy.md
# promises 0.05 % at 20 ms (measured: about 1e-5).
TRUTH_TOLERANCE = 5e-4


def example_env(tmp_path, api=None):
    """The environment of an example: this repository's kwatt binary, no ~/.python-grid5000.yaml,
    and KWATT_API_URL only when given."""
    env = dict(os.environ, KWATT_BIN=KWATT, HOME=str(tmp_path))
    env.pop("KWATT_API_URL", None)
    if api is not None:
        env["KWATT_API_URL"] = api
    return env


def run_example(script, *args, env, cwd, timeout=180):
    return subprocess.run([sys.executable, str(EXAMPLES / script), *map(str, args)],
                          capture_output=True, text=True, env=env, cwd=cwd, timeout=timeout)


def float_after(text, label):
    match = re.search(re.escape(label) + r"\s*([-+0-9.eE]+)", text)
    assert match, f"no {label!r} in:\n{text}"
    return float(match.group(1))


# ---- the notebook ---------------------------------------------------------------------------

def test_notebook_is_committed_without_outputs():
    nbformat = pytest.importorskip("nbformat")
    nb = nbformat.read(NOTEBOOK, as_version=4)
    nbformat.validate(nb)
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert code
    assert all(not c.outputs and c.execution_count is None for c in code), (
        "clear the notebook's outputs before committing it")
    assert nb.metadata["kernelspec"]["name"] == "python3"


def test_notebook_runs_against_the_api(server, tmp_path, monkeypatch):
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    # The kernel inherits this environment: the notebook uses the test's server (it must not
    # start its own), this repository's kwatt for the truth, and no user configuration.
    for name, value in example_env(tmp_path, api=server.url).items():
        monkeypatch.setenv(name, value)
    nb = nbformat.read(NOTEBOOK, as_version=4)
    client = nbclient.NotebookClient(nb, kernel_name="python3", timeout=120,
                                     resources={"metadata": {"path": str(EXAMPLES)}})
    client.execute()  # raises CellExecutionError naming the cell on any error

    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs]
    assert not [o for o in outputs if o.output_type == "error"]
    text = "".join(o.get("text", "") for o in outputs if o.output_type == "stream")
    assert f"Kwollect API:  {server.url} (from KWATT_API_URL)" in text
    assert "240,004 rows fetched" in text  # 4 nodes x 1200 s x 50 Hz, both bounds included
    assert "the archive holds exactly the rows of to_pandas()" in text
    assert float_after(text, "largest difference") == 0.0  # energy: archive == API
    assert float_after(text, "largest relative error:") < TRUTH_TOLERANCE
    assert "kwatt serve stopped" not in text  # it did not start one
    images = [o for o in outputs if "image/png" in o.get("data", {})]
    assert len(images) == 2  # plot_power and plot_energy
    assert server.process.poll() is None


# ---- examples/enoslib_monitor.py --simulate -------------------------------------------------

def energy_rows(stdout):
    """The printed energy table: {(scope, name, phase): {column: value}}."""
    lines = stdout.splitlines()
    header = next(i for i, line in enumerate(lines) if line.split()[:3] == ["scope", "name",
                                                                            "phase"])
    columns = lines[header].split()
    rows = {}
    for line in lines[header + 1:]:
        cells = line.split()
        if len(cells) != len(columns):
            break
        row = dict(zip(columns, cells))
        rows[(row["scope"], row["name"], row["phase"])] = {
            c: float(row[c]) for c in columns[3:]}
    return rows


@pytest.mark.parametrize("mode", ["own server", "KWATT_API_URL"])
def test_enoslib_monitor_simulated(mode, server, tmp_path):
    backup = tmp_path / "backup"
    env = example_env(tmp_path, api=server.url if mode == "KWATT_API_URL" else None)
    result = run_example("enoslib_monitor.py", "--simulate", "--backup", backup,
                         "--kwatt", KWATT, env=env, cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    out = result.stdout
    assert "job types ['monitor=wattmetre_power_watt', 'origin=enoslib_g5k']" in out
    assert ("roles: compute = nova-1.lyon.grid5000.fr, nova-4.lyon.grid5000.fr (job lyon:1001)"
            in out)
    if mode == "KWATT_API_URL":
        assert f"simulated Kwollect API: {server.url} (KWATT_API_URL)" in out

    rows = energy_rows(out)
    nodes = ["nova-1.lyon", "nova-4.lyon"]
    assert set(rows) == {(scope, name, phase)
                         for scope, name in [("node", n) for n in nodes] + [("role", "compute"),
                                                                           ("total", "total")]
                         for phase in ["window", "baseline", "stress", "cooldown"]}
    seconds = {"window": 420, "baseline": 60, "stress": 300, "cooldown": 60}
    for node in nodes:
        idle = rows[("node", node, "baseline")]["mean_watts"]
        busy = rows[("node", node, "stress")]["mean_watts"]
        assert 60 < idle < 75 and 175 < busy < 200, (node, idle, busy)  # nova: 68 W + 118 W
        for phase, length in seconds.items():
            row = rows[("node", node, phase)]
            assert row["coverage"] == 1.0
            # mean_watts is printed to 0.01 W
            assert row["joules"] == pytest.approx(row["mean_watts"] * length,
                                                  abs=0.005 * length + 0.01)
            assert row["wh"] == pytest.approx(row["joules"] / 3600, abs=0.01)
    for phase in seconds:
        assert rows[("role", "compute", phase)]["joules"] == pytest.approx(
            sum(rows[("node", n, phase)]["joules"] for n in nodes), abs=0.02)
        assert rows[("total", "total", phase)] == rows[("role", "compute", phase)]
    assert rows[("total", "total", "baseline")]["above_baseline_j"] == 0
    assert rows[("total", "total", "stress")]["above_baseline_j"] > 60e3  # ~2 x 118 W x 300 s

    # The archive it wrote is whole, and gives the same energy to the CLI.
    verify = run_kwatt("inspect", backup, "--verify")
    assert verify.returncode == 0, verify.stdout.decode() + verify.stderr.decode()
    assert b"state      COMPLETE" in verify.stdout and b"verify     OK" in verify.stdout
    cli = run_kwatt("energy", backup, "--json",
                    "--phase", "stress=2025-04-18T14:05:00+02:00..2025-04-18T14:10:00+02:00")
    assert cli.returncode == 0, cli.stderr.decode()
    report = json.loads(cli.stdout)
    assert (report["start"], report["end"]) == ("2025-04-18T14:04:00+02:00",
                                                "2025-04-18T14:11:00+02:00")
    for node in report["nodes"]:
        name = node["node"].replace(".grid5000.fr", "")
        assert node["metric"] == "wattmetre_power_watt" and node["period_s"] == 0.02
        assert rows[("node", name, "stress")]["joules"] == pytest.approx(
            node["phases"]["stress"]["joules"], abs=0.006)
        assert rows[("node", name, "window")]["joules"] == pytest.approx(
            node["window"]["joules"], abs=0.006)


# ---- examples/demo.py -----------------------------------------------------------------------

def png_size(path):
    """(width, height) of a PNG file, checking its signature and its IHDR chunk."""
    data = path.read_bytes()
    assert data[:8] == PNG_MAGIC, f"{path} is not a PNG file"
    assert data[12:16] == b"IHDR"
    assert data.endswith(b"IEND\xaeB`\x82"), f"{path} is cut"
    return struct.unpack(">II", data[16:24])


def test_demo_writes_its_plots(tmp_path):
    out = tmp_path / "demo output"
    result = run_example("demo.py", out, "--kwatt", KWATT, env=example_env(tmp_path),
                         cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    text = result.stdout
    for png in ("power.png", "energy.png"):
        path = out / png
        assert str(path) in text  # its path is printed
        width, height = png_size(path)
        assert width >= 600 and height >= 300 and path.stat().st_size > 10_000
    assert "get_metrics(wattmetre_power_watt): 240,004 rows for 4 nodes" in text
    assert "kwatt.load: 344,004 rows" in text and "(the same count as to_pandas())" in text
    assert float_after(text, "largest difference with the API's figures") == 0.0
    assert float_after(text, "largest relative error:") < TRUTH_TOLERANCE
    verify = run_kwatt("inspect", out / "archive", "--verify")
    assert verify.returncode == 0, verify.stdout.decode() + verify.stderr.decode()
