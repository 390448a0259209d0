"""The store from the command line: `kwatt import` of a real backup into the embedded store and
into PostgreSQL (a real cluster), `kwatt store info|check|cat`; the rows come back as the archive
holds them."""
import json
import shutil

import pytest

from conftest import ROOT, run_kwatt, start_server

JOBS_FILE = ROOT / "examples" / "jobs.json"
START = "2025-04-18T14:00:00+02:00"
END = "2025-04-18T14:01:00+02:00"


@pytest.fixture(scope="module")
def archive(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("store")
    server = start_server("--jobs", JOBS_FILE, tmp_path=tmp)
    try:
        directory = tmp / "archive"
        done = run_kwatt("backup", "--api", server.url, "--job", "lyon:1001", "--end", END, "-o",
                         directory, "--quiet")
        assert done.returncode == 0, done.stderr
    finally:
        server.stop()
    manifest = json.loads((directory / "manifest.json").read_text())
    rows = sum(f["rows"] for f in manifest["files"])
    assert rows > 10_000
    return directory, rows


def lines(result):
    assert result.returncode == 0, result.stderr
    return sorted(result.stdout.decode().splitlines())


@pytest.fixture(params=["sqlite", "postgresql"])
def store_uri(request, tmp_path):
    if request.param == "sqlite":
        return str(tmp_path / "site.db")
    return request.getfixturevalue("postgres").new_database()


def test_an_archive_imported_comes_back_row_for_row(archive, store_uri):
    directory, rows = archive
    imported = run_kwatt("import", directory, "--store", store_uri)
    assert imported.returncode == 0, imported.stderr
    assert f"{rows} rows of".encode() in imported.stderr
    # Exactly the archive's rows (the store gives them device by device, the archive node file
    # by node file: compared as sets of lines).
    assert lines(run_kwatt("store", "cat", store_uri)) == lines(run_kwatt("cat", directory))
    one = run_kwatt("store", "cat", store_uri, "--nodes", "nova-4.lyon.grid5000.fr", "--metrics",
                    "wattmetre_power_watt", "--start", START, "--end", "2025-04-18T14:00:10+02:00")
    expected = run_kwatt("cat", directory, "--nodes", "nova-4.lyon", "--metrics",
                         "wattmetre_power_watt", "--start", START, "--end",
                         "2025-04-18T14:00:10+02:00")
    assert lines(one) == lines(expected) and len(lines(one)) > 400
    info = run_kwatt("store", "info", store_uri, "--json")
    assert info.returncode == 0, info.stderr
    described = json.loads(info.stdout)
    assert described["rows"] == rows and described["jobs"] == 1 and described["catalogues"] == 1
    assert described["first"].startswith("2025-04-18T12:00:0")
    checked = run_kwatt("store", "check", store_uri)
    assert checked.returncode == 0, checked.stderr
    assert b": OK (" in checked.stdout
    # A second import would keep every row twice: refused, nothing added.
    again = run_kwatt("import", directory, "--store", store_uri)
    assert again.returncode == 2
    assert f"already holds {rows} rows".encode() in again.stderr
    assert json.loads(run_kwatt("store", "info", store_uri, "--json").stdout)["rows"] == rows


def test_a_damaged_store_file_is_named_by_check(archive, tmp_path):
    directory, _ = archive
    store = tmp_path / "site.db"
    assert run_kwatt("import", directory, "--store", store).returncode == 0
    damaged = tmp_path / "damaged.db"
    shutil.copy(store, damaged)
    data = bytearray(damaged.read_bytes())
    for offset in range(len(data) // 2, len(data) // 2 + 4096, 97):
        data[offset] ^= 0x5A
    damaged.write_bytes(bytes(data))
    checked = run_kwatt("store", "check", damaged)
    assert checked.returncode == 1, (checked.stdout, checked.stderr)
    assert b"DAMAGED" in checked.stdout, checked.stdout
    assert checked.stderr.startswith(b"kwatt store check: ")
    assert str(damaged).encode() in checked.stderr


def test_what_is_not_a_store_is_named_and_not_made(tmp_path, archive):
    missing = tmp_path / "none.db"
    refused = run_kwatt("store", "info", missing)
    assert refused.returncode == 1 and str(missing).encode() in refused.stderr
    assert not missing.exists()  # looking does not create
    directory, _ = archive
    assert run_kwatt("import", directory, "--store", "").returncode == 2
    absent = run_kwatt("store", "info", "postgresql://alice:s3cret@127.0.0.1:1/db?connect_timeout=2")
    assert absent.returncode == 1
    assert b"s3cret" not in absent.stderr and b"cannot connect" in absent.stderr
