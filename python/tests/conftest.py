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


@pytest.fixture(scope="session")
def server(tmp_path_factory):
    """A simulated testbed with examples/jobs.json (lyon:1001 on nova-1,4,5,6 with 50 Hz
    wattmeter data, 2025-04-18 14:00-14:30 +02:00, phases idle/busy of 300 s)."""
    running = start_server("--jobs", JOBS, tmp_path=tmp_path_factory.mktemp("server"))
    yield running
    running.stop()


@pytest.fixture
def no_config(tmp_path, monkeypatch):
    """No ~/.python-grid5000.yaml and no KWATT_* variables: only what a test passes counts."""
    monkeypatch.setenv("HOME", str(tmp_path))
    for name in ("KWATT_API_URL", "KWATT_USERNAME", "KWATT_PASSWORD"):
        monkeypatch.delenv(name, raising=False)
    return tmp_path
