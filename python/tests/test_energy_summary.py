"""Kwollect.energy(source=) of an archive of 5-minute summaries: bucket means, not samples (issue
21 #8; doc/energy.md, "Summary rows")."""
import datetime as dt
import json
import zoneinfo

import pytest

import kwatt
from conftest import JOBS, run_kwatt

PARIS = zoneinfo.ZoneInfo("Europe/Paris")
NODE = "nova-1.lyon.grid5000.fr"
START = dt.datetime(2025, 4, 18, 14, 0, tzinfo=PARIS).timestamp()  # lyon:1001: idle, then busy


def truth(node, start, end):
    out = run_kwatt("simulate", "energy", "--node", node, "--start", f"{start:.6f}", "--end",
                    f"{end:.6f}", "--jobs", str(JOBS), "--json")
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)["joules"]


def test_energy_of_a_summary_archive_reads_its_rows_as_bucket_means(server, tmp_path):
    k = kwatt.Kwollect(nodes=[NODE], api=server.url, progress=False)
    k.start(START)
    k.stop(START + 1800)
    path = k.backup(backup_dir=tmp_path / "summary", metrics=["wattmetre_power_watt"],
                    summary=True)
    phases = {"idle": (START, START + 300), "busy": (START + 300, START + 600)}
    e = k.energy(source=path, phases=phases)
    node = e[e["scope"] == "node"].set_index("phase")
    assert "5-minute summary rows" in node.loc["window", "reason"]
    # Were +87 % (idle) and -32 % (busy): the rows were read as samples at their buckets' starts.
    for phase, (a, b) in phases.items():
        assert node.loc[phase, "joules"] == pytest.approx(truth(NODE, a, b), rel=0.02), phase
        assert node.loc[phase, "coverage"] == pytest.approx(1)
