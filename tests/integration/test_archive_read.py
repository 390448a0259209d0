"""`kwatt inspect`, `kwatt cat` and `kwatt export` on archives made here by hand from
doc/archive_format.md (JSON Lines, frames by the `zstd` command, XXH64 in Python), and on an archive
written by `kwatt backup`."""
import csv
import io
import json
import os
import struct
import subprocess
from pathlib import Path

import pytest

from conftest import KWATT, start_server
from test_server import JOBS

# ---- XXH64 (seed 0), from the xxHash specification -----------------------------------------

P1, P2, P3, P4, P5 = (0x9E3779B185EBCA87, 0xC2B2AE3D27D4EB4F, 0x165667B19E3779F9,
                      0x85EBCA77C2B2AE63, 0x27D4EB2F165667C5)
M64 = (1 << 64) - 1


def _rotl(x, r):
    return ((x << r) | (x >> (64 - r))) & M64


def _round(acc, lane):
    return (_rotl((acc + lane * P2) & M64, 31) * P1) & M64


def _merge(acc, val):
    return ((acc ^ _round(0, val)) * P1 + P4) & M64


def xxh64(data, seed=0):
    n, i = len(data), 0
    if n >= 32:
        v = [(seed + P1 + P2) & M64, (seed + P2) & M64, seed, (seed - P1) & M64]
        while i + 32 <= n:
            for k in range(4):
                v[k] = _round(v[k], struct.unpack_from("<Q", data, i + 8 * k)[0])
            i += 32
        h = (_rotl(v[0], 1) + _rotl(v[1], 7) + _rotl(v[2], 12) + _rotl(v[3], 18)) & M64
        for k in range(4):
            h = _merge(h, v[k])
    else:
        h = (seed + P5) & M64
    h = (h + n) & M64
    while i + 8 <= n:
        h ^= _round(0, struct.unpack_from("<Q", data, i)[0])
        h = (_rotl(h, 27) * P1 + P4) & M64
        i += 8
    if i + 4 <= n:
        h ^= (struct.unpack_from("<I", data, i)[0] * P1) & M64
        h = (_rotl(h, 23) * P2 + P3) & M64
        i += 4
    while i < n:
        h ^= (data[i] * P5) & M64
        h = (_rotl(h, 11) * P1) & M64
        i += 1
    h ^= h >> 33
    h = (h * P2) & M64
    h ^= h >> 29
    h = (h * P3) & M64
    h ^= h >> 32
    return h


def test_xxh64_reference_values():
    assert xxh64(b"") == 0xEF46DB3751D8E999
    assert xxh64(b"a") == 0xD24EC4F1A98C6E5B
    assert xxh64(b"abc") == 0x44BC2CF5AD770999


# ---- building archives ---------------------------------------------------------------------

NOVA1, NOVA2 = "nova-1.lyon.grid5000.fr", "nova-2.lyon.grid5000.fr"
YETI1 = "yeti-1.grenoble.grid5000.fr"
WATT, BMC = "wattmetre_power_watt", "bmc_node_power_watt"


def row(ts, device, metric, value, labels="{}"):
    return (f'{{"timestamp":"{ts}","device_id":"{device}","metric_id":"{metric}",'
            f'"value":{value},"labels":{labels}}}')


def nova1_rows():
    rows = []
    for second in range(3):
        for k, frac in enumerate(["", ".02", ".04", ".5"]):
            rows.append(row(f"2025-04-18T14:00:0{second}{frac}+02:00", "nova-1", WATT,
                            f"{100 + second}.{k}5", '{"_device_orig":["wattmetre1-port6"]}'))
    rows.append(row("2025-04-18T14:00:02.5+02:00", "nova-1", BMC, 98))
    rows.append(row("2025-04-18T14:00:03+02:00", "nova-1", BMC, '"NaN"'))
    return rows


def frames_of(tmp_path, lines, per_frame):
    """The lines as zstd frames of `per_frame` rows, each made by the zstd command from a file
    (so with its content size, and a checksum: zstd's default)."""
    out = b""
    for i in range(0, len(lines), per_frame):
        text = tmp_path / "frame.jsonl"
        text.write_bytes("".join(line + "\n" for line in lines[i:i + per_frame]).encode())
        out += subprocess.run(["zstd", "-q", "-3", "-c", str(text)], check=True,
                              capture_output=True).stdout
    return out, (len(lines) + per_frame - 1) // per_frame


def make_archive(tmp_path, name="archive", per_frame=5):
    work = tmp_path / f"{name}-work"
    work.mkdir()
    directory = tmp_path / name
    (directory / "data").mkdir(parents=True)
    content = [
        (NOVA1, "lyon", nova1_rows()),
        (NOVA2, "lyon", [row("2025-04-18T14:00:00+02:00", "nova-2", WATT, 150),
                         row("2025-04-18T14:00:01.25+02:00", "nova-2", WATT, "null")]),
        (YETI1, "grenoble", [row("2025-04-18T14:00:00.1+02:00", "yeti-1", BMC, 201,
                                 '{"psu":"1,2","note":"say \\"hi\\""}')]),
        (None, "lyon", [row("2025-04-18T14:00:00+02:00", "pdu-1", "pdu_outlet_power_watt", 12.5)]),
    ]
    files, nodes, sites, all_rows = [], [], [], []
    for node, site, lines in content:
        path = f"data/{node}.jsonl.zst" if node else f"data/_other.{site}.jsonl.zst"
        data, frames = frames_of(work, lines, per_frame)
        (directory / path).write_bytes(data)
        metrics = {}
        for line in lines:
            metric = json.loads(line)["metric_id"]
            metrics[metric] = metrics.get(metric, 0) + 1
        files.append({"path": path, "node": node, "rows": len(lines), "bytes": len(data),
                      "frames": frames, "xxh64": f"{xxh64(data):016x}",
                      "first": json.loads(lines[0])["timestamp"],
                      "last": json.loads(lines[-1])["timestamp"], "metrics": metrics})
        if node:
            uid = node.split(".")[0]
            nodes.append({"node": node, "uid": uid, "site": site, "cluster": uid.split("-")[0],
                          "file": path})
        if site not in sites:
            sites.append(site)
        all_rows += [(site, line) for line in lines]
    manifest = {
        "format": "kwatt-archive", "format_version": 1, "kwatt_version": "0.1.0",
        "state": "complete", "created_at": "2026-11-29T21:00:00Z",
        "completed_at": "2026-11-29T21:00:07Z",
        "query": {"api": "https://api.grid5000.fr/stable", "nodes": [n["node"] for n in nodes],
                  "start": "1744977600.000000", "end": "1744977660.000000", "job": None,
                  "metrics": [], "summary": False},
        "window": {"start": "2025-04-18T12:00:00Z", "end": "2025-04-18T12:01:00Z"},
        "sites": sites, "job_types": [], "nodes": nodes,
        "catalogue": {"lyon/nova": [{"name": WATT, "period": 20}, {"name": BMC, "period": 5000}]},
        "files": files,
        "fetch": {"requests": 3, "retries": 0, "splits": 0, "seconds": 0.4},
    }
    (directory / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")
    return directory, manifest, all_rows


def kwatt(*args, timeout=120):
    return subprocess.run([KWATT, *map(str, args)], capture_output=True, timeout=timeout)


def lines_of(result):
    return [line for line in result.stdout.decode().split("\n") if line]


def expected_csv(site_rows):
    """The CSV of kwatt fetch --format csv for these rows."""
    out = [["timestamp", "site", "node", "device_id", "metric_id", "value", "labels"]]
    for site, line in site_rows:
        r = json.loads(line)
        value = line.split('"value":', 1)[1].rsplit(',"labels":', 1)[0]
        value = {"null": "NaN", '"NaN"': "NaN"}.get(value, value)
        labels = line.rsplit(',"labels":', 1)[1][:-1]
        out.append([r["timestamp"], site, f"{r['device_id']}.{site}.grid5000.fr", r["device_id"],
                    r["metric_id"], value, labels])
    return out


# ---- tests ------------------------------------------------------------------------------------

def test_inspect_summary_json_and_verify(tmp_path):
    directory, manifest, rows = make_archive(tmp_path)
    result = kwatt("inspect", directory)
    assert result.returncode == 0, result.stderr
    text = result.stdout.decode()
    assert "COMPLETE" in text and "INCOMPLETE" not in text
    assert "2025-04-18T14:00:00+02:00 .. 2025-04-18T14:01:00+02:00 Europe/Paris (1 min 0 s)" in text
    assert "2025-04-18T12:00:00Z .. 2025-04-18T12:01:00Z UTC" in text
    assert f"3: {NOVA1}, {NOVA2}, {YETI1}" in text
    assert "sites      lyon, grenoble" in text
    assert f"{len(rows)} in 4 files" in text
    assert f"{WATT} (14 rows)" in text
    assert "other devices of lyon" in text

    result = kwatt("inspect", directory, "--json")
    assert result.returncode == 0, result.stderr
    summary = json.loads(result.stdout)
    assert summary["state"] == "complete" and summary["complete"] is True
    assert summary["rows"] == len(rows)
    assert summary["metrics"] == {WATT: 14, BMC: 3, "pdu_outlet_power_watt": 1}
    assert [f["path"] for f in summary["files"]] == [f["path"] for f in manifest["files"]]
    assert summary["files"][0]["frames"] == 3
    assert summary["window"]["start_paris"] == "2025-04-18T14:00:00+02:00"
    assert "verify" not in summary

    result = kwatt("inspect", directory, "--verify")
    assert result.returncode == 0, result.stderr
    assert f"verify     OK: 4 files, {len(rows)} rows" in result.stdout.decode()
    summary = json.loads(kwatt("inspect", directory, "--verify", "--json").stdout)
    assert summary["verify"]["ok"] is True and summary["verify"]["problems"] == []


def test_cat_prints_every_row_exactly(tmp_path):
    directory, manifest, rows = make_archive(tmp_path)
    result = kwatt("cat", directory)
    assert result.returncode == 0, result.stderr
    assert result.stderr == b""
    assert result.stdout.decode() == "".join(line + "\n" for _, line in rows)


def test_cat_filters(tmp_path):
    directory, manifest, rows = make_archive(tmp_path)

    def cat(*args):
        result = kwatt("cat", directory, *args)
        assert result.returncode == 0, result.stderr
        return lines_of(result)

    nova1 = nova1_rows()
    assert cat("--nodes", "nova-1.lyon") == nova1
    assert cat("--nodes", f"{YETI1}, nova-1.lyon") == nova1 + [rows[-2][1]]  # manifest order
    assert cat("--metrics", BMC) == [line for _, line in rows if f'"{BMC}"' in line]
    # Inclusive bounds, with an offset or as epoch seconds (14:00:01 Paris = 12:00:01Z).
    window = [line for line in nova1
              if "14:00:01" in line or line.startswith('{"timestamp":"2025-04-18T14:00:02+02:00"')]
    assert cat("--nodes", "nova-1.lyon", "--start", "2025-04-18T14:00:01+02:00",
               "--end", "2025-04-18T12:00:02Z") == window
    assert cat("--nodes", "nova-1.lyon", "--start", "1744977601", "--end", "1744977602") == window
    assert cat("--metrics", WATT, "--start", "2025-04-18T14:30:00+02:00") == []


def test_export_csv_is_fetch_csv(tmp_path):
    directory, manifest, rows = make_archive(tmp_path)
    out = tmp_path / "out.csv"
    result = kwatt("export", directory, "--to", "csv", "-o", out)
    assert result.returncode == 0, result.stderr
    assert f"{len(rows)} rows".encode() in result.stderr
    text = out.read_text()
    assert list(csv.reader(io.StringIO(text))) == expected_csv(rows)
    assert '"{""psu"":""1,2"",""note"":""say \\""hi\\""""}"' in text  # RFC 4180 quoting
    assert not list(tmp_path.glob("out.csv.tmp-*"))
    # Filters, and stdout.
    result = kwatt("export", directory, "--to", "csv", "-o", "-", "--nodes", "yeti-1.grenoble")
    assert result.returncode == 0, result.stderr
    assert list(csv.reader(io.StringIO(result.stdout.decode()))) == expected_csv(
        [(s, line) for s, line in rows if '"yeti-1"' in line])
    # No row: the header alone.
    result = kwatt("export", directory, "--to", "csv", "-o", "-", "--start", "2030-01-01T00:00:00Z")
    assert result.returncode == 0
    assert result.stdout == b"timestamp,site,node,device_id,metric_id,value,labels\n"


def test_export_usage_errors(tmp_path):
    directory, _, _ = make_archive(tmp_path)
    result = kwatt("export", directory, "--to", "parquet", "-o", tmp_path / "x.parquet")
    assert result.returncode == 2
    # The CLI starts no Python: it names the command of the Python package that writes it.
    assert b"Parquet is written by the Python package" in result.stderr
    assert f"python -m kwatt export {directory} --to parquet".encode() in result.stderr
    assert not (tmp_path / "x.parquet").exists()
    assert kwatt("export", directory, "--to", "csv").returncode == 2
    # Rejected by CLI11 itself (whose exit status, 105, is the CLI's for every option value
    # outside its choices).
    result = kwatt("export", directory, "--to", "xml", "-o", "-")
    assert result.returncode != 0 and b"xml not in {csv,parquet}" in result.stderr
    result = kwatt("export", directory, "--to", "csv", "-o", "-", "--start", "yesterday-ish")
    assert result.returncode == 2 and b"--start" in result.stderr
    result = kwatt("cat", directory, "--nodes", "nova-1")
    assert result.returncode == 2 and b"has no site" in result.stderr


def test_refusals_name_what_is_wrong(tmp_path):
    directory, manifest, _ = make_archive(tmp_path)
    result = kwatt("cat", directory, "--nodes", "nova-9.lyon")
    assert result.returncode == 1
    assert b"node nova-9.lyon.grid5000.fr is not in the archive" in result.stderr
    result = kwatt("cat", directory, "--metrics", "wattmetre_power_wat")
    assert result.returncode == 1
    assert b"metric wattmetre_power_wat is not in the archive" in result.stderr
    plain = tmp_path / "plain"
    plain.mkdir()
    for command in (["cat"], ["inspect"], ["export", "--to", "csv", "-o", tmp_path / "o.csv"]):
        result = kwatt(*command[:1], tmp_path / "nowhere", *command[1:])
        assert result.returncode == 1 and b"no such directory" in result.stderr
        result = kwatt(*command[:1], plain, *command[1:])  # a directory, not an archive
        assert result.returncode == 1 and b"is not a kwatt archive" in result.stderr
    manifest["format_version"] = 2
    (directory / "manifest.json").write_text(json.dumps(manifest))
    result = kwatt("inspect", directory)
    assert result.returncode == 1 and b"format_version 2" in result.stderr
    (directory / "manifest.json").write_text('{"format": "kwatt-archive", "format_')
    result = kwatt("cat", directory)
    assert result.returncode == 1 and b"manifest.json is not valid JSON" in result.stderr


def test_damage_is_named_and_nothing_is_taken_for_whole(tmp_path):
    directory, manifest, rows = make_archive(tmp_path)
    path = directory / "data" / f"{NOVA2}.jsonl.zst"
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x01
    path.write_bytes(bytes(data))
    name = f"data/{NOVA2}.jsonl.zst".encode()

    result = kwatt("inspect", directory, "--verify")
    assert result.returncode == 1
    assert b"DAMAGED" in result.stdout and name + b": its XXH64 is" in result.stdout
    assert name in result.stderr
    summary = json.loads(kwatt("inspect", directory, "--verify", "--json").stdout)
    assert summary["verify"]["ok"] is False and summary["verify"]["problems"]

    result = kwatt("cat", directory)
    assert result.returncode == 1
    assert b"is damaged" in result.stderr and name in result.stderr
    # The rows before the damaged file are printed (streaming), none of it.
    assert lines_of(result) == [line for _, line in rows[:len(nova1_rows())]]

    out = tmp_path / "out.csv"
    result = kwatt("export", directory, "--to", "csv", "-o", out)
    assert result.returncode == 1 and name in result.stderr
    assert b"nothing was written" in result.stderr
    assert not out.exists() and not list(tmp_path.glob("out.csv.tmp-*"))
    # Not needed, not read.
    assert kwatt("cat", directory, "--nodes", "nova-1.lyon").returncode == 0

    # Truncated.
    path.write_bytes(bytes(data[:-3]))
    result = kwatt("cat", directory, "--nodes", "nova-2.lyon")
    assert result.returncode == 1 and b"truncated" in result.stderr and name in result.stderr


def test_incomplete_archive(tmp_path):
    directory, manifest, rows = make_archive(tmp_path, per_frame=5)
    # An interrupted backup: nova-1 has 3 frames on disk, the journal commits the first.
    nova1 = directory / "data" / f"{NOVA1}.jsonl.zst"
    first_frame = frames_of(tmp_path / "archive-work", nova1_rows()[:5], 5)[0]
    assert nova1.read_bytes().startswith(first_frame)
    journal = [{"file": f"data/{NOVA1}.jsonl.zst", "bytes": len(first_frame), "rows": 5,
                "frames": 1, "next": 1744977601000000000}]
    (directory / "journal.jsonl").write_text(
        "".join(json.dumps(r) + "\n" for r in journal) + '{"file": "data/nova-2')
    for key in ("files", "fetch", "completed_at"):
        del manifest[key]
    manifest["state"] = "incomplete"
    (directory / "manifest.json").write_text(json.dumps(manifest))

    result = kwatt("inspect", directory)
    assert result.returncode == 0
    assert b"INCOMPLETE" in result.stdout
    assert b"Run the same `kwatt backup` command" in result.stdout
    result = kwatt("inspect", directory, "--verify")
    assert result.returncode == 1 and b"INTACT BUT INCOMPLETE" in result.stdout

    for command in (["cat"], ["export", "--to", "csv", "-o", tmp_path / "o.csv"]):
        result = kwatt(*command[:1], directory, *command[1:])
        assert result.returncode == 1
        assert b"is an incomplete archive" in result.stderr
        assert b"Run the same `kwatt backup` command again" in result.stderr
        assert b"--allow-incomplete" in result.stderr
    assert not (tmp_path / "o.csv").exists()

    result = kwatt("cat", directory, "--allow-incomplete")
    assert result.returncode == 0, result.stderr
    assert b"WARNING" in result.stderr and b"INCOMPLETE" in result.stderr
    assert lines_of(result) == nova1_rows()[:5]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    s = start_server(jobs=JOBS, tmp_path=tmp_path_factory.mktemp("jobs"))
    yield s
    s.stop()


def test_backup_then_read_gives_what_fetch_gives(server, tmp_path):
    backup = kwatt("backup", "--api", server.url, "--job", "lyon:1001", "--metrics",
                   f"{WATT},prom_node_load1", "-q", "-o", tmp_path / "a", timeout=300)
    assert backup.returncode == 0, backup.stderr
    fetched = kwatt("fetch", "--api", server.url, "--job", "lyon:1001", "--metrics",
                    f"{WATT},prom_node_load1", "--quiet", timeout=300)
    fetched_csv = kwatt("fetch", "--api", server.url, "--job", "lyon:1001", "--metrics",
                        f"{WATT},prom_node_load1", "--quiet", "--format", "csv", timeout=300)
    assert fetched.returncode == 0 and fetched_csv.returncode == 0

    verify = kwatt("inspect", tmp_path / "a", "--verify")
    assert verify.returncode == 0, verify.stdout + verify.stderr
    cat = kwatt("cat", tmp_path / "a")
    assert cat.returncode == 0, cat.stderr
    # The same rows; the archive holds them node by node, each node's in the API's order.
    def by_node(lines):
        out = {}
        for line in lines:
            out.setdefault(json.loads(line)["device_id"], []).append(line)
        return out
    assert by_node(lines_of(cat)) == by_node(lines_of(fetched))
    assert len(lines_of(cat)) == len(lines_of(fetched))

    out = tmp_path / "a.csv"
    assert kwatt("export", tmp_path / "a", "--to", "csv", "-o", out).returncode == 0
    exported = out.read_text().split("\n")
    expected = fetched_csv.stdout.decode().split("\n")
    assert exported[0] == expected[0]
    assert sorted(exported) == sorted(expected)


# ---- hostile manifests and frames (issue 10: 6, 16, 18) ----------------------------------------

def refused(*args):
    result = kwatt(*args)
    assert result.returncode == 1, (args, result.returncode, result.stderr)
    return result.stderr.decode()


def test_a_huge_number_in_the_manifest_is_corruption_not_an_abort(tmp_path):
    directory, manifest, _ = make_archive(tmp_path)
    text = json.dumps(manifest, indent=2).replace('"requests": 3', '"requests": 1e400')
    (directory / "manifest.json").write_text(text)
    for command in (["inspect"], ["inspect", "--verify"], ["cat"],
                    ["export", "--to", "csv", "-o", tmp_path / "o.csv"]):
        assert "manifest.json is not valid JSON" in refused(command[0], directory, *command[1:])


def test_an_empty_window_bound_is_corruption(tmp_path):
    directory, manifest, _ = make_archive(tmp_path)
    manifest["window"]["start"] = ""
    (directory / "manifest.json").write_text(json.dumps(manifest))
    for command in (["inspect"], ["cat"]):
        assert "window.start is empty" in refused(command[0], directory, *command[1:])


@pytest.mark.parametrize("damage, message", [
    ("no_file_of_a_node", 'has no entry in "files"'),
    ("no_node_of_a_file", 'which "nodes" does not list'),
    ("window_reversed", "is after window.end"),
    ("row_outside_window", "outside the window"),
])
def test_parts_of_a_manifest_that_disagree_are_corruption(tmp_path, damage, message):
    directory, manifest, _ = make_archive(tmp_path)
    if damage == "no_file_of_a_node":
        del manifest["files"][0]
    elif damage == "no_node_of_a_file":
        del manifest["nodes"][1]
    elif damage == "window_reversed":
        manifest["window"]["start"] = "2025-04-18T12:02:00Z"
    else:
        manifest["window"]["end"] = "2025-04-18T12:00:02Z"
    (directory / "manifest.json").write_text(json.dumps(manifest))
    for command in (["inspect"], ["inspect", "--verify"], ["cat"],
                    ["export", "--to", "csv", "-o", tmp_path / "o.csv"]):
        assert message in refused(command[0], directory, *command[1:])
    assert not (tmp_path / "o.csv").exists()


def huge_frame():
    """A zstd frame of 10 bytes of text whose header announces 2**40 bytes: single segment, an
    8-byte content size, a checksum; one RLE block."""
    text = b"a" * 10
    header = struct.pack("<IB", 0xFD2FB528, (3 << 6) | (1 << 5) | (1 << 2)) + struct.pack("<Q", 1 << 40)
    block = struct.pack("<I", 1 | (1 << 1) | (len(text) << 3))[:3] + b"a"
    return header + block + struct.pack("<I", 0)


@pytest.mark.parametrize("rehash", [True, False])
def test_a_frame_announcing_a_huge_content_is_corruption_not_an_abort(tmp_path, rehash):
    directory, manifest, _ = make_archive(tmp_path)
    path = directory / manifest["files"][1]["path"]
    data = huge_frame()
    path.write_bytes(data)
    manifest["files"][1]["bytes"] = len(data)
    manifest["files"][1]["frames"] = 1
    if rehash:  # a header made on purpose; otherwise a stale checksum, which stops the decoding
        manifest["files"][1]["xxh64"] = f"{xxh64(data):016x}"
    (directory / "manifest.json").write_text(json.dumps(manifest))
    name = manifest["files"][1]["path"]
    for command in (["inspect", "--verify"], ["cat"],
                    ["export", "--to", "csv", "-o", tmp_path / "o.csv"]):
        stderr = refused(command[0], directory, *command[1:])
        assert name in stderr
        if rehash:
            assert "the frame header announces 1099511627776 bytes" in stderr
        else:
            assert "XXH64" in stderr


def test_inspect_json_of_a_directory_whose_name_is_not_utf8(tmp_path):
    directory, _, rows = make_archive(tmp_path)
    odd = tmp_path / os.fsdecode(b"archive-\xff")
    directory.rename(odd)
    for args in (["--json"], ["--verify", "--json"]):
        result = kwatt("inspect", odd, *args)
        assert result.returncode == 0, result.stderr
        assert json.loads(result.stdout)["rows"] == len(rows)


def test_a_damaged_catalogue_is_named_by_every_command(tmp_path):
    # Defect 16: energy skipped such a catalogue and `inspect --verify` called it OK; it is now
    # parsed once, where the manifest is read.
    directory, manifest, _ = make_archive(tmp_path)
    manifest["catalogue"]["lyon/nova"][0]["source"] = {"protocol": 7}
    (directory / "manifest.json").write_text(json.dumps(manifest))
    for command in (["inspect"], ["inspect", "--verify"], ["cat"], ["energy"]):
        message = refused(command[0], directory, *command[1:])
        assert 'catalogue lyon/nova: catalogue entry "wattmetre_power_watt": field ' \
               '"source.protocol" is a number, not a string' in message, message
