"""The layering check (check_layers.py) passes on the tree, and fails on each kind of break.

Each break is made in a copy of the tree's sources, CMake files and design notes, so that the
check is shown to catch it: a test of the check that could not fail would prove nothing.
"""

import os
import pathlib
import shutil
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
CHECK = ROOT / "tests" / "layering" / "check_layers.py"


def run_check(root):
    return subprocess.run([sys.executable, str(CHECK), str(root)], capture_output=True, text=True)


def test_the_tree_keeps_doc_designs_layers():
    result = run_check(ROOT)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "keeps doc/design.md's layers" in result.stdout


@pytest.fixture
def tree(tmp_path):
    """A copy of what the check reads: sources, headers, CMake files, doc/design.md."""
    copy = tmp_path / "kwatt"
    for folder in ("src", "include", "apps", "python/bindings", "cmake"):
        shutil.copytree(ROOT / folder, copy / folder,
                        ignore=shutil.ignore_patterns("dashboard", "testdata", "__pycache__"))
    (copy / "doc").mkdir()
    shutil.copy(ROOT / "doc" / "design.md", copy / "doc" / "design.md")
    shutil.copy(ROOT / "CMakeLists.txt", copy / "CMakeLists.txt")
    assert run_check(copy).returncode == 0
    return copy


def add_line_after_includes(path, line):
    text = path.read_text()
    first = text.index("#include")
    path.write_text(text[:first] + line + "\n" + text[first:])


def first_source(tree, folder):
    return sorted((tree / folder).glob("*.cc"), key=lambda p: p.name)[0]


def test_a_lower_part_including_a_higher_one_fails(tree):
    # The archive format must not depend on the Kwollect client.
    source = next(p for p in sorted((tree / "src" / "archive").glob("*.cc"))
                  if not p.name.endswith("_test.cc"))
    add_line_after_includes(source, '#include "kwatt/kwollect/fetch.h"')
    result = run_check(tree)
    assert result.returncode == 1
    assert f"src/archive/{source.name}:" in result.stdout
    assert "kwatt/kwollect/fetch.h" in result.stdout
    assert "may use only" in result.stdout


def test_the_cli_including_a_private_header_fails(tree):
    source = tree / "apps" / "kwatt" / "main.cc"
    private = next(p for p in sorted((tree / "src" / "store").glob("*.h"))
                   if not p.name.startswith("test_"))
    add_line_after_includes(source, f'#include "src/store/{private.name}"')
    result = run_check(tree)
    assert result.returncode == 1
    assert "apps/kwatt/main.cc:" in result.stdout
    assert "the CLI and the bindings use public headers" in result.stdout


def test_a_part_including_another_parts_private_header_fails(tree):
    source = next(p for p in sorted((tree / "src" / "server").glob("*.cc"))
                  if not p.name.endswith("_test.cc"))
    private = next(p for p in sorted((tree / "src" / "store").glob("*.h"))
                   if not p.name.startswith("test_"))
    add_line_after_includes(source, f'#include "src/store/{private.name}"')
    result = run_check(tree)
    assert result.returncode == 1
    assert f"src/server/{source.name}:" in result.stdout
    assert "is private to the store part" in result.stdout


def test_product_code_including_the_testing_library_fails(tree):
    source = next(p for p in sorted((tree / "src" / "energy").glob("*.cc"))
                  if not p.name.endswith("_test.cc"))
    add_line_after_includes(source, '#include "src/testing/temp_dir.h"')
    result = run_check(tree)
    assert result.returncode == 1
    assert "product code includes the testing library" in result.stdout


def test_the_cli_linking_the_testing_library_fails(tree):
    cmake = tree / "CMakeLists.txt"
    text = cmake.read_text()
    assert "target_link_libraries(kwatt PRIVATE" in text
    cmake.write_text(text.replace("target_link_libraries(kwatt PRIVATE",
                                  "target_link_libraries(kwatt PRIVATE kwatt_testing", 1))
    result = run_check(tree)
    assert result.returncode == 1
    assert "kwatt links kwatt_testing" in result.stdout


def test_a_public_header_showing_a_third_party_type_fails(tree):
    header = tree / "include" / "kwatt" / "core" / "status.h"
    add_line_after_includes(header, "#include <curl/curl.h>")
    result = run_check(tree)
    assert result.returncode == 1
    assert "include/kwatt/core/status.h:" in result.stdout
    assert "third-party" in result.stdout


def test_core_declaring_a_type_in_a_sources_words_fails(tree):
    # The row contract's report once was the Kwollect client's FetchReport.
    header = tree / "include" / "kwatt" / "core" / "row_sink.h"
    text = header.read_text().replace("struct RowsReport {", "struct FetchReport {")
    header.write_text(text)
    result = run_check(tree)
    assert result.returncode == 1
    assert "include/kwatt/core/row_sink.h:" in result.stdout
    assert "core declares FetchReport" in result.stdout


def test_a_library_linking_a_layer_above_it_fails(tree):
    cmake = tree / "src" / "energy" / "CMakeLists.txt"
    text = cmake.read_text()
    assert "target_link_libraries(kwatt_energy PUBLIC kwatt_core" in text
    cmake.write_text(text.replace("target_link_libraries(kwatt_energy PUBLIC kwatt_core",
                                  "target_link_libraries(kwatt_energy PUBLIC kwatt_core kwatt_store", 1))
    result = run_check(tree)
    assert result.returncode == 1
    assert "kwatt_energy links kwatt_store" in result.stdout


def test_a_meter_room_below_the_outputs_linking_curl_fails(tree):
    cmake = tree / "src" / "meter" / "CMakeLists.txt"
    text = cmake.read_text()
    assert "add_library(kwatt_meter_formulas" in text
    cmake.write_text(text + "\ntarget_link_libraries(kwatt_meter_formulas PRIVATE CURL::libcurl)\n")
    result = run_check(tree)
    assert result.returncode == 1
    assert "kwatt_meter_formulas links curl" in result.stdout


def test_a_meter_room_including_a_room_above_it_fails(tree):
    # The formulas come before the pipeline that runs them: neither the pipeline's public header
    # nor its private ones are theirs to include.
    formula = tree / "src" / "meter" / "formulas" / "formula.cc"
    add_line_after_includes(formula, '#include "kwatt/meter/pipeline/meter.h"')
    result = run_check(tree)
    assert result.returncode == 1
    assert "src/meter/formulas/formula.cc:" in result.stdout
    assert "includes kwatt/meter/pipeline/meter.h, but kwatt_meter_formulas may use only" \
        in result.stdout
    formula.write_text(formula.read_text().replace('#include "kwatt/meter/pipeline/meter.h"\n', ""))
    assert run_check(tree).returncode == 0
    add_line_after_includes(formula, '#include "src/meter/pipeline/totals.h"')
    result = run_check(tree)
    assert result.returncode == 1
    assert "includes src/meter/pipeline/totals.h, but kwatt_meter_formulas may use only" \
        in result.stdout
    formula.write_text(formula.read_text().replace('#include "src/meter/pipeline/totals.h"\n', ""))
    assert run_check(tree).returncode == 0
    # A room's public header is held to its room's row too: sources are below activity.
    header = tree / "include" / "kwatt" / "meter" / "sources" / "source.h"
    add_line_after_includes(header, '#include "kwatt/meter/activity/activity.h"')
    result = run_check(tree)
    assert result.returncode == 1
    assert "include/kwatt/meter/sources/source.h:" in result.stdout
    assert "includes kwatt/meter/activity/activity.h, but the meter/sources part may use only" \
        in result.stdout


def test_a_meter_room_linking_a_room_above_it_fails(tree):
    cmake = tree / "src" / "meter" / "CMakeLists.txt"
    cmake.write_text(cmake.read_text() +
                     "\ntarget_link_libraries(kwatt_meter_sources PRIVATE kwatt_meter_pipeline)\n")
    result = run_check(tree)
    assert result.returncode == 1
    assert "kwatt_meter_sources links kwatt_meter_pipeline" in result.stdout


def test_a_library_missing_from_the_design_fails(tree):
    (tree / "src" / "extra").mkdir()
    (tree / "src" / "extra" / "extra.cc").write_text('#include "kwatt/core/status.h"\n')
    (tree / "src" / "extra" / "CMakeLists.txt").write_text(
        "add_library(kwatt_extra extra.cc)\ntarget_link_libraries(kwatt_extra PUBLIC kwatt_core)\n")
    result = run_check(tree)
    assert result.returncode == 1
    assert "kwatt_extra is not in doc/design.md's 'Parts and layers' table" in result.stdout


def test_a_drawing_that_no_longer_matches_the_table_fails(tree):
    design = tree / "doc" / "design.md"
    text = design.read_text()
    row = "| energy | `kwatt_energy` | `kwatt_core` |"
    assert row in text
    design.write_text(text.replace(row, "| energy | `kwatt_energy` | `kwatt_core` `kwatt_jobs` |"))
    result = run_check(tree)
    assert result.returncode == 1
    assert "Mermaid graph of the parts is not the one its table draws" in result.stdout


def replace_in_door_table(tree, part, old, new):
    """Replaces `old` by `new` in `part`'s row of doc/design.md's table of parts (the doors)."""
    design = tree / "doc" / "design.md"
    lines = design.read_text().split("\n")
    row = next(i for i, line in enumerate(lines) if line.startswith(f"| {part} |"))
    assert old in lines[row]
    lines[row] = lines[row].replace(old, new, 1)
    design.write_text("\n".join(lines))


def test_another_part_entered_by_a_header_that_is_no_door_fails(tree):
    # The archive's lock, used by the CLI, dropped from the archive's doors.
    replace_in_door_table(tree, "archive", " `lock`", "")
    user = next(p for p in sorted((tree / "apps" / "kwatt").glob("*.cc"))
                if '#include "kwatt/archive/lock.h"' in p.read_text())
    result = run_check(tree)
    assert result.returncode == 1
    assert f"apps/kwatt/{user.name}:" in result.stdout
    assert ("includes kwatt/archive/lock.h, which is not one of the archive part's doors "
            "(writer, reader, manifest, format, source;") in result.stdout
    assert ("include/kwatt/archive/lock.h: a public header that doc/design.md's table of parts "
            "does not name") in result.stdout


def test_a_door_that_is_no_header_fails(tree):
    # kwollect/node_name.h went when NodeName became core's; the table kept naming it.
    replace_in_door_table(tree, "kwollect", "`fetch`", "`fetch` `node_name`")
    result = run_check(tree)
    assert result.returncode == 1
    assert "the kwollect part's door `node_name` is no header" in result.stdout


def test_a_door_list_cut_short_fails(tree):
    # The core row's last door replaced by "...", as the table once had it.
    row = next(line for line in (tree / "doc" / "design.md").read_text().split("\n")
               if line.startswith("| core |"))
    last = row.rstrip(" |").rsplit("`", 2)[1]
    replace_in_door_table(tree, "core", f" `{last}` |", " ... |")
    result = run_check(tree)
    assert result.returncode == 1
    assert "the core part's doors end with '...'" in result.stdout
    assert f"include/kwatt/core/{last}.h: a public header" in result.stdout
