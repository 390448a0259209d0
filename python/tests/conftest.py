"""Fixtures of the Python package's tests: the real `kwatt serve --simulate` on loopback (port 0),
and a HOME whose python-grid5000 file points EnOSlib at it."""
import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
JOBS = ROOT / "examples" / "jobs.json"

# The server helpers of the integration tests, loaded under a name of their own.
_spec = importlib.util.spec_from_file_location("kwatt_integration_conftest",
                                               ROOT / "tests" / "integration" / "conftest.py")
servers = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(servers)
KWATT = servers.KWATT
start_server = servers.start_server
run_kwatt = servers.run_kwatt


# What the tests of the `server` fixture ask of it, from the simulated testbed into a store: the
# job lyon:1001, lyon's other nodes around it, the DST change of 2025-03-30 01:00 UTC.
STORE_PIECES = [
    ["--job", "lyon:1001"],
    ["--nodes", "taurus-7.lyon,taurus-1.lyon", "--start", "2025-04-18T13:55:00+02:00", "--end",
     "2025-04-18T14:35:00+02:00"],
    ["--nodes", "nova-1.lyon", "--start", "2025-03-30T00:59:00Z", "--end", "2025-03-30T01:01:00Z"],
]


@pytest.fixture(scope="session", params=["simulate", "store"])
def server(request, tmp_path_factory):
    """The API the tests use, served two ways: the simulated testbed with examples/jobs.json
    (lyon:1001 on nova-1,4,5,6 with 50 Hz wattmeter data, 2025-04-18 14:00-14:30 +02:00, phases
    idle/busy of 300 s), and `kwatt serve --store` over an embedded store holding what the tests
    ask of that testbed (STORE_PIECES, backed up and imported as a user would)."""
    directory = tmp_path_factory.mktemp(f"server-{request.param}")
    if request.param == "simulate":
        running = start_server("--jobs", JOBS, tmp_path=directory)
    else:
        running = start_server(store=servers.store_of_simulation(directory, STORE_PIECES, JOBS))
    running.mode = request.param
    yield running
    running.stop()


@pytest.fixture
def no_config(tmp_path, monkeypatch):
    """No ~/.python-grid5000.yaml and no KWATT_* variables: only what a test passes counts."""
    monkeypatch.setenv("HOME", str(tmp_path))
    for name in ("KWATT_API_URL", "KWATT_USERNAME", "KWATT_PASSWORD"):
        monkeypatch.delenv(name, raising=False)
    return tmp_path


# The columns of an energy frame that are its figures' intervals (the rest are the figures).
INTERVAL_COLUMNS = ["half_width_joules", "low_joules", "high_joules", "accuracy_joules",
                    "resolution_joules", "sampling_joules", "gaps_and_edges_joules", "clock_joules"]


def assert_same_energy(archived, live):
    """The same figures from an archive as from a live query; their intervals within 5 %: a live
    query reads rows 15 s beyond the window (doc/energy.md, "Edges"), an archive holds its window's
    only."""
    import pandas as pd
    pd.testing.assert_frame_equal(archived.drop(columns=INTERVAL_COLUMNS),
                                  live.drop(columns=INTERVAL_COLUMNS))
    pd.testing.assert_frame_equal(archived[INTERVAL_COLUMNS], live[INTERVAL_COLUMNS],
                                  check_exact=False, rtol=0.05)
