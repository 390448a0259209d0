"""python-grid5000 and EnOSlib, unchanged, against `kwatt serve --simulate` and against
`kwatt serve --store`."""
import json
import os
import subprocess
import sys
import textwrap

import pytest
import requests

from conftest import start_server, store_of_simulation
from test_server import JOBS, T0

pytest.importorskip("grid5000")


# What the tests ask of the API, from the simulated testbed into a store.
STORE_PIECES = [
    ["--job", "lyon:1001", "--start", T0, "--end", T0 + 120],
    ["--job", "grenoble:2001", "--start", T0, "--end", T0 + 120],
    ["--nodes", "nova-1.lyon,yeti-1.grenoble", "--start", T0 - 30, "--end", T0 - 1],
]


@pytest.fixture(params=["simulate", "store"])
def secured(request, server_factory, tmp_path):
    """The API behind a password: the simulated testbed, or `kwatt serve --store` over a store
    made from it as a user would (backup, import)."""
    if request.param == "simulate":
        server = server_factory("--auth", "alice:s3cret", jobs=JOBS)
    else:
        store = store_of_simulation(tmp_path, STORE_PIECES, jobs=JOBS)
        server = start_server("--auth", "alice:s3cret", store=store)
        request.addfinalizer(server.stop)
    home = tmp_path / "home"
    home.mkdir()
    config = home / ".python-grid5000.yaml"
    config.write_text(f"uri: {server.url}\nusername: alice\npassword: s3cret\n")
    config.chmod(0o600)
    return server, home


def run_python(home, code):
    """Runs `code` in a fresh interpreter whose HOME holds the credentials file."""
    env = dict(os.environ, HOME=str(home))
    result = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=env,
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_python_grid5000(secured):
    server, home = secured
    out = run_python(home, f"""
        import json, os
        from grid5000 import Grid5000
        gk = Grid5000.from_yaml(os.path.expanduser("~/.python-grid5000.yaml"))
        sites = [s.uid for s in gk.sites.list()]
        nova = gk.sites["lyon"].clusters["nova"]
        nodes = [n.uid for n in gk.sites["lyon"].clusters["nova"].nodes.list()]
        job = gk.sites["lyon"].jobs["1001"]
        rows = [m.to_dict() for m in gk.sites["lyon"].metrics.list(
            nodes="nova-1", metrics="wattmetre_power_watt",
            start_time={T0 + 10}.0, end_time={T0 + 11}.0)]
        print(json.dumps({{"sites": sites, "metrics": len(nova.metrics), "nodes": nodes,
                          "job": job.state, "rows": rows}}))
    """)
    assert out["sites"][0] == "lyon" and "grenoble" in out["sites"]
    assert out["metrics"] > 10 and out["nodes"][0] == "nova-1"
    assert out["job"] == "terminated"
    direct = requests.get(server.url + "/sites/lyon/metrics", auth=("alice", "s3cret"), params={
        "nodes": "nova-1", "metrics": "wattmetre_power_watt", "start_time": f"{T0 + 10}.0",
        "end_time": f"{T0 + 11}.0"}, timeout=30).json()
    assert out["rows"] == direct and len(direct) == 51


def test_enoslib_kwollect_service(secured):
    pytest.importorskip("enoslib")
    server, home = secured
    out = run_python(home, f"""
        import json
        from enoslib.objects import Host
        from enoslib.service.kwollect.kwollect import Kwollect
        hosts = [Host("nova-1.lyon.grid5000.fr"), Host("yeti-1.grenoble.grid5000.fr")]
        k = Kwollect(nodes=hosts)
        k.deploy()
        k.start(start_time={T0 + 100})
        k.stop(stop_time={T0 + 110})
        data = k.get_metrics(metrics=["wattmetre_power_watt"])
        # EnOSlib's pandas conversion (pd.to_datetime without format=) cannot read a column that
        # mixes "...:40+02:00" and "...:40.02+02:00", which 50 Hz data does (real Kwollect too),
        # so it is exercised on a 1 Hz window before the job.
        idle = Kwollect(nodes=hosts)
        idle.deploy()
        idle.start(start_time={T0 - 20})
        idle.stop(stop_time={T0 - 11})
        frame = idle.get_metrics_pandas(metrics=["wattmetre_power_watt"])
        print(json.dumps({{"sites": sorted(data), "lyon": len(data["lyon"]),
                          "grenoble": len(data["grenoble"]), "first": data["lyon"][0],
                          "frame": len(frame)}}))
    """)
    assert out["sites"] == ["grenoble", "lyon"]
    assert out["lyon"] == 10 * 50 + 1      # monitor=wattmetre job: 50 rows/s
    assert out["grenoble"] == 10 * 50 + 1  # monitor job
    assert out["first"]["device_id"] == "nova-1"
    assert out["first"]["labels"] == {"_device_orig": ["wattmetre1-port7"]}
    assert out["frame"] == 2 * 10
