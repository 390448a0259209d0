#!/usr/bin/env python3
"""Checks that kwatt's parts depend on each other as doc/design.md draws them.

The table of doc/design.md's "Parts and layers" section is the rule: each row a CMake target, its
part (a folder src/PART with public headers include/kwatt/PART), the kwatt targets it may link,
and the libraries it must never link, even through another target. From it and from the
CMakeLists.txt files, this script checks:

- every target's kwatt links are allowed by the table (and the table names every library target);
- no target links, directly or not, a library its row forbids, and the CLI and the Python module
  never link the testing library;
- every #include "kwatt/PART/..." in a target's sources is backed by its links (its part, or a
  part of a target it links, directly or not), and in a part's headers by its table row;
- a part's private headers (src/PART/...) are included by that part and by tests only, never by
  another part, the CLI (apps/kwatt) or the bindings (python/bindings);
- the testing library (src/testing) is included by tests, fuzzers, benchmarks and peers only;
- public headers hold no third-party header (no libcurl, Boost, YAML, JSON library... types);
- core declares no type in a source's words (Fetch..., Kwollect..., Oar...): the row contract is
  every source's, so its names belong to none.

- a part's rooms may be rows of their own (meter/sources: src/meter/sources/ and
  include/kwatt/meter/sources/): a room's headers, public or private, are then included only where
  its row's links reach, so an include of a room above fails as an include of a part above does;
- doc/design.md's Mermaid graph of the parts is the one its table draws.

doc/design.md's first table, the parts with their doors (the "door (include/kwatt/PART/)" column:
the public headers through which a part is entered), is checked against the tree too:

- every door it names is a header, include/kwatt/PART/DOOR.h, and every header under
  include/kwatt/PART/ is one of the part's doors (the table is the whole map, never "...");
- every #include "kwatt/PART/NAME.h" outside PART (another part, the CLI, the bindings, the
  tests) names one of PART's doors.

Usage: check_layers.py [--mermaid] [ROOT]   (ROOT: the checkout, default: two folders above this
file; --mermaid prints the table as a Mermaid graph, for doc/design.md)
Exit status 0 when the tree keeps the rules; 1 with one line per broken rule, naming the file,
the line and what to do.
"""

import os
import re
import sys

# Third-party headers a public header must not include (their types would leak through the door).
THIRD_PARTY_HEADERS = re.compile(
    r"^(curl/|yaml\.h|yaml-cpp/|nlohmann/|sqlite3\.h|libpq-fe\.h|zstd\.h|xxhash\.h|"
    r"net-snmp/|pybind11/|CLI/|gtest/|simdjson|fmt/|boost/)")
# Libraries as CMake names them, for the table's "never" column.
LIBRARY_NAMES = {
    "curl": "CURL::libcurl",
    "beast": "kwatt_http_server",
}
# The headers of those libraries, which a target that must never link them must not include.
LIBRARY_HEADERS = {
    "curl": "curl/",
    "beast": "boost/beast",
}
# Folders whose files are tests of some kind: any public header, private headers, the testing
# library.
TEST_FOLDERS = ("tests/", "fuzz/", "bench/")
# Types core must not declare: a source's vocabulary (the Kwollect client's fetch, OAR's jobs).
SOURCE_WORDS = re.compile(r"^\s*(?:struct|class|enum(?:\s+class)?|using)\s+((?:Fetch|Kwollect|Oar)\w*)", re.M)
INCLUDE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]')


def read(path):
    with open(path, encoding="utf-8", errors="replace") as f:
        return f.read()


def parse_design_table(root):
    """The rows of doc/design.md's table under '## Parts and layers'."""
    text = read(os.path.join(root, "doc/design.md"))
    match = re.search(r"^## Parts and layers\n(.*?)(?=^## )", text, re.S | re.M)
    if not match:
        sys.exit("check_layers: doc/design.md has no '## Parts and layers' section")
    rows = {}
    for line in match.group(1).splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) < 4 or not cells[1].startswith("`"):
            continue
        part = cells[0].strip("`* ")
        target = cells[1].strip("` ")
        uses = re.findall(r"`([A-Za-z0-9_]+)`", cells[2])
        if "every part" in cells[2]:
            uses = ["*"]
        never = re.findall(r"`([A-Za-z0-9_-]+)`", cells[3])
        rows[target] = {"part": part, "uses": set(uses), "never": set(never)}
    if not rows:
        sys.exit("check_layers: doc/design.md's 'Parts and layers' table has no rows")
    # The doors allowed to show a third-party header, each named with its reason.
    exceptions = {m.group(1): m.group(2) for m in
                  re.finditer(r"^- `(include/kwatt/[^`]+)` shows `([^`]+)`", match.group(1), re.M)}
    return rows, exceptions


DOOR_TABLE_HEADER = re.compile(r"^\|\s*part\s*\|.*\|\s*door\b", re.I)


def parse_door_table(root):
    """{part: {"doors": [names], "line": line in doc/design.md}} from doc/design.md's table of
    parts, the one whose last column is the door (a part's public headers, by name without
    include/kwatt/PART/ and .h)."""
    lines = read(os.path.join(root, "doc/design.md")).splitlines()
    start = next((i for i, line in enumerate(lines) if DOOR_TABLE_HEADER.match(line)), None)
    if start is None:
        sys.exit("check_layers: doc/design.md has no table of parts with a 'door' column")
    parts = {}
    for number in range(start + 2, len(lines)):  # after the header and its |---| line
        line = lines[number]
        if not line.startswith("|"):
            break
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        part = cells[0].strip("`* ")
        parts[part] = {"doors": re.findall(r"`([A-Za-z0-9_/]+)`", cells[-1]),
                       "elided": "..." in cells[-1] or "…" in cells[-1],
                       "line": number + 1}
    if not parts:
        sys.exit("check_layers: doc/design.md's table of parts has no rows")
    return parts


def public_headers(root):
    """{part: [names]}: the headers under include/kwatt/PART/, named as the door table names
    them (the path below the part's folder, without .h)."""
    headers = {}
    base = os.path.join(root, "include", "kwatt")
    for dirpath, _, files in os.walk(base):
        for file in sorted(files):
            if not file.endswith(".h"):
                continue
            relative = os.path.relpath(os.path.join(dirpath, file), base)
            part, _, name = relative.partition(os.sep)
            if name:
                headers.setdefault(part, []).append(name[:-2].replace(os.sep, "/"))
    return headers


def check_door_table(root, parts):
    """The table of parts names every public header as a door, and only headers that exist."""
    problems = []
    headers = public_headers(root)
    for part, row in parts.items():
        where = f"doc/design.md:{row['line']}"
        if row["elided"]:
            problems.append(f"{where}: the {part} part's doors end with '...': name every public "
                            f"header of include/kwatt/{part}/ (the checker reads them all)")
        for door in row["doors"]:
            if door not in headers.get(part, []):
                problems.append(f"{where}: the {part} part's door `{door}` is no header "
                                f"(include/kwatt/{part}/{door}.h does not exist): take it out of "
                                f"the table of parts, or give the part that header")
    for part, names in sorted(headers.items()):
        doors = parts.get(part, {}).get("doors")
        for name in names:
            path = f"include/kwatt/{part}/{name}.h"
            if doors is None:
                problems.append(f"{path}: the {part} part has no row in doc/design.md's table of "
                                f"parts: add it, with its doors")
            elif name not in doors:
                problems.append(f"{path}: a public header that doc/design.md's table of parts "
                                f"does not name among the {part} part's doors "
                                f"({', '.join(doors) or 'none'}): add it there, or move it into "
                                f"src/{part}/ if only its own part uses it")
    return problems


def strip_cmake_comments(text):
    return "\n".join(line.split("#", 1)[0] if not line.lstrip().startswith("#") else ""
                     for line in text.splitlines())


def parse_cmake(root):
    """{target: {"dir": folder, "sources": [paths], "links": [names], "line": (file, line)}}."""
    targets = {}
    for folder, _, files in os.walk(root):
        rel_folder = os.path.relpath(folder, root)
        if rel_folder.startswith((".", "build", "third_party", "dist")) and rel_folder != ".":
            continue
        if "CMakeLists.txt" not in files:
            continue
        path = os.path.join(folder, "CMakeLists.txt")
        text = strip_cmake_comments(read(path))
        rel_path = os.path.relpath(path, root)
        for m in re.finditer(r"\b(add_library|add_executable|pybind11_add_module)\(\s*([A-Za-z0-9_${}]+)"
                             r"([^)]*)\)", text):
            name = m.group(2)
            if "$" in name:
                continue
            words = m.group(3).split()
            sources = []
            for w in words:
                if w in ("STATIC", "SHARED", "MODULE", "OBJECT", "INTERFACE", "IMPORTED"):
                    continue
                w = w.replace("${PROJECT_SOURCE_DIR}/", "").replace("${CMAKE_CURRENT_SOURCE_DIR}/", "")
                if "$" in w:
                    continue
                full = os.path.normpath(os.path.join(rel_folder if not w.startswith(("src/", "apps/", "python/", "tests/", "bench/", "fuzz/")) else ".", w))
                sources.append(full)
            line = text[:m.start()].count("\n") + 1
            targets.setdefault(name, {"dir": rel_folder, "sources": [], "links": [],
                                      "line": (rel_path, line)})
            targets[name]["sources"] += sources
        for m in re.finditer(r"\btarget_link_libraries\(\s*([A-Za-z0-9_]+)([^)]*)\)", text):
            name = m.group(1)
            links = [w for w in m.group(2).split()
                     if w not in ("PUBLIC", "PRIVATE", "INTERFACE") and "$" not in w]
            targets.setdefault(name, {"dir": rel_folder, "sources": [], "links": [],
                                      "line": (rel_path, text[:m.start()].count("\n") + 1)})
            targets[name]["links"] += links
    return targets


def closure(targets, name, seen=None):
    """Every library `name` links, directly or through other targets."""
    seen = set() if seen is None else seen
    for link in targets.get(name, {}).get("links", []):
        if link not in seen:
            seen.add(link)
            closure(targets, link, seen)
    return seen


def includes(path):
    for number, line in enumerate(read(path).splitlines(), 1):
        m = INCLUDE.match(line)
        if m:
            yield number, m.group(1), m.group(2)


def part_of_path(path, rooms=()):
    """'store' for src/store/... or include/kwatt/store/...; 'meter/sources' for a room of a part
    that the table names as a part of its own (src/meter/sources/..., include/kwatt/meter/sources/
    ..., given in `rooms`); None elsewhere."""
    m = re.match(r"^(?:src|include/kwatt)/([^/]+)/(?:([^/]+)/)?", path)
    if not m:
        return None
    room = f"{m.group(1)}/{m.group(2)}"
    return room if m.group(2) and room in rooms else m.group(1)


def top(part):
    """The part a room belongs to ('meter' for 'meter/sources'): what its private headers are
    private to, and whose doors the door table lists."""
    return part.split("/")[0] if part else part


def is_test_file(path):
    return path.startswith(TEST_FOLDERS) or path.endswith("_test.cc") or path.startswith("src/testing/")


def check(root):
    problems = []
    rows, exceptions = parse_design_table(root)
    doors = parse_door_table(root)
    targets = parse_cmake(root)
    part_targets = {}
    for target, row in rows.items():
        part_targets.setdefault(row["part"], set()).add(target)
    # kwatt's own libraries: those built from sources under src/ (not a third-party library that
    # the build wraps in a target of its own, such as kwatt_xxhash).
    kwatt_libraries = {t for t, info in targets.items()
                       if any(s.startswith("src/") for s in info["sources"])}

    # Links.
    for target, info in sorted(targets.items()):
        if target not in rows:
            continue
        allowed = rows[target]["uses"]
        for link in info["links"]:
            if link in kwatt_libraries and link != target and link not in allowed and "*" not in allowed:
                problems.append(f"{info['line'][0]}:{info['line'][1]}: {target} links {link}, which "
                                f"doc/design.md's table does not let it use ({', '.join(sorted(allowed)) or 'nothing'}): "
                                f"move the code that needs {link} up a layer, or change the design first")
        reach = closure(targets, target)
        for lib in rows[target]["never"]:
            cmake_name = LIBRARY_NAMES.get(lib, lib)
            if cmake_name in reach:
                problems.append(f"{info['line'][0]}:{info['line'][1]}: {target} links {lib} "
                                f"(through {', '.join(sorted(l for l in info['links'] if cmake_name in closure(targets, l) | {l}))}), "
                                f"which doc/design.md's table forbids it")
    for library in sorted(kwatt_libraries):
        # (The unit tests are built from src/*_test.cc, but are no library.)
        if library not in rows and library != "kwatt_unit_tests":
            info = targets[library]
            problems.append(f"{info['line'][0]}:{info['line'][1]}: {library} is not in doc/design.md's "
                            f"'Parts and layers' table: add its row (its part and what it may use)")

    # Sources of each target, and which part each belongs to; no product target is built from
    # the testing library's sources.
    owner = {}
    for target, info in targets.items():
        for source in info["sources"]:
            owner.setdefault(source, target)
            if target in rows and rows[target]["part"] != "testing" and \
                    (source.startswith("src/testing/") or os.path.basename(source).startswith(("test_", "fake_"))):
                problems.append(f"{info['line'][0]}:{info['line'][1]}: {target} is built from {source}, "
                                f"test code: it belongs to the testing library (src/testing), which only "
                                f"tests link")

    # Includes.
    for folder in ("src", "include/kwatt", "apps", "python/bindings", "tests", "fuzz", "bench"):
        for dirpath, _, files in os.walk(os.path.join(root, folder)):
            for file in sorted(files):
                if not file.endswith((".h", ".cc")):
                    continue
                path = os.path.relpath(os.path.join(dirpath, file), root)
                problems += check_file(path, os.path.join(root, path), rows, targets, owner,
                                       part_targets, exceptions, doors)
    return (problems + check_door_table(root, doors) + check_core_words(root) +
            check_drawing(root, rows))


def check_file(path, full, rows, targets, owner, part_targets, exceptions, doors):
    problems = []
    part = part_of_path(path, part_targets)
    test = is_test_file(path)
    product_front = path.startswith(("apps/", "python/bindings/"))
    public_header = path.startswith("include/kwatt/")
    # What kwatt parts this file may include the public headers of.
    target = owner.get(path)
    if test:
        allowed_parts = None  # any
    elif target and (target in rows or target in ("kwatt", "_core")):
        allowed_parts = {rows[target]["part"]} if target in rows else set()
        for lib in closure(targets, target):
            if lib in rows:
                allowed_parts.add(rows[lib]["part"])
    elif part and part in part_targets:
        allowed_parts = {part}
        for t in part_targets[part]:
            for lib in rows[t]["uses"]:
                if lib in rows:
                    allowed_parts.add(rows[lib]["part"])
                    for deeper in closure(targets, lib):
                        if deeper in rows:
                            allowed_parts.add(rows[deeper]["part"])
    else:
        allowed_parts = None
    for number, kind, name in includes(full):
        where = f"{path}:{number}"
        if kind == "<":
            for lib in (rows[target]["never"] if target in rows else ()):
                if lib in LIBRARY_HEADERS and name.startswith(LIBRARY_HEADERS[lib]):
                    problems.append(f"{where}: includes <{name}>, but {target} must never use {lib} "
                                    f"(doc/design.md, 'Parts and layers'): that code belongs to a "
                                    f"target above it")
            if public_header and THIRD_PARTY_HEADERS.match(name) and exceptions.get(path) != name:
                problems.append(f"{where}: public header includes <{name}>: a part's door shows no "
                                f"third-party type; keep it behind a pimpl or in src/{part}/")
            continue
        if name.startswith("src/testing/"):
            if not test:
                problems.append(f"{where}: product code includes the testing library ({name}): "
                                f"fakes and test peers are linked into tests only")
            continue
        m = re.match(r"^src/([^/]+)/", name)
        if m:
            other = m.group(1)
            if product_front:
                problems.append(f"{where}: {name} is private to the {other} part: the CLI and the "
                                f"bindings use public headers (include/kwatt/{other}/) only")
            elif test:
                continue
            elif other != top(part):
                problems.append(f"{where}: {name} is private to the {other} part: give it a public "
                                f"header in include/kwatt/{other}/ if the {part} part may use it")
            elif allowed_parts is not None and \
                    part_of_path(name, part_targets) not in allowed_parts | {other}:
                problems.append(f"{where}: includes {name}, but {target or 'the ' + part + ' room'} "
                                f"may use only {', '.join(sorted(allowed_parts))} (doc/design.md, "
                                f"'Parts and layers'): a room uses the rooms below it")
            continue
        if name.startswith("kwatt/") and allowed_parts is not None and \
                part_of_path("include/" + name, part_targets) not in allowed_parts:
            problems.append(f"{where}: includes {name}, but {target or 'the ' + str(part) + ' part'} "
                            f"may use only {', '.join(sorted(allowed_parts))} (doc/design.md, "
                            f"'Parts and layers')")
        # Another part is entered by its doors only (its own part may include any of its headers).
        m = re.match(r"^kwatt/([^/]+)/(.+)\.h$", name)
        if m and m.group(1) != top(part) and m.group(1) in doors and \
                m.group(2) not in doors[m.group(1)]["doors"]:
            other = m.group(1)
            problems.append(f"{where}: includes {name}, which is not one of the {other} part's "
                            f"doors ({', '.join(doors[other]['doors']) or 'none'}; doc/design.md's "
                            f"table of parts): include a door, or make {m.group(2)}.h one in the "
                            f"table first")
    return problems


def mermaid(rows):
    """The table as a Mermaid graph: one node per target, an arrow to each kwatt target it uses
    (core's arrows left out: every part uses it)."""
    lines = ["```mermaid", "flowchart TB"]
    for target, row in rows.items():
        lines.append(f"  {target}[\"{row['part']}: {target}\"]")
    for target, row in rows.items():
        for used in sorted(row["uses"]):
            if used in rows and used != "kwatt_core":
                lines.append(f"  {target} --> {used}")
    lines.append("```")
    return "\n".join(lines) + "\n"


def check_core_words(root):
    """Core's types are named in no source's words."""
    problems = []
    for folder in ("include/kwatt/core", "src/core"):
        for dirpath, _, names in os.walk(os.path.join(root, folder)):
            for name in sorted(names):
                path = os.path.relpath(os.path.join(dirpath, name), root)
                if not name.endswith((".h", ".cc")) or is_test_file(path):
                    continue
                text = read(os.path.join(root, path))
                for m in SOURCE_WORDS.finditer(text):
                    line = text.count("\n", 0, m.start()) + 1
                    problems.append(f"{path}:{line}: core declares {m.group(1)}, a source's word: "
                                    "name the row contract's types for what they hold, and keep a "
                                    "source's own types in its part")
    return problems


def check_drawing(root, rows):
    """doc/design.md's graph is the one its table draws."""
    text = read(os.path.join(root, "doc/design.md"))
    if mermaid(rows) not in text:
        return ["doc/design.md: its Mermaid graph of the parts is not the one its table draws: "
                "replace it with the output of tests/layering/check_layers.py --mermaid"]
    return []


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    root = args[0] if args else os.path.join(os.path.dirname(__file__), "..", "..")
    if "--mermaid" in sys.argv:
        print(mermaid(parse_design_table(os.path.abspath(root))[0]), end="")
        return 0
    problems = check(os.path.abspath(root))
    for p in problems:
        print(p)
    if problems:
        print(f"check_layers: {len(problems)} broken rule(s)", file=sys.stderr)
        return 1
    print("check_layers: every include and link keeps doc/design.md's layers")
    return 0


if __name__ == "__main__":
    sys.exit(main())
