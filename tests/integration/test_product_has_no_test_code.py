"""No test code is linked into what users run: the kwatt command and the Python module.

Fakes, manual clocks and the starters of throwaway peers live in the testing library
(src/testing, target kwatt_testing), which only the unit tests, fuzzers, benchmarks and test
peers link (doc/design.md, "Parts and layers"). This reads the programs themselves: the mangled
names of their code and type information (which a stripped module keeps for its classes), and
the symbols where the program has them (the release kwatt is not stripped). Before the testing
library, kwatt held 116 such marks and the installed module 48.
"""

import re
import shutil
import subprocess

import pytest

from conftest import KWATT

# Test code's names: its namespaces (kwatt::testing, kwatt::PART::testing) and its classes.
TEST_CLASSES = (b"FakeProcfs", b"ManualClock", b"TestPostgres", b"TestInfluxd", b"TestSnmpd",
                b"TestIpmiSim", b"TestNodeExporter")
TEST_SYMBOL = re.compile(r"kwatt::(?:\w+::)*testing::|\b(?:" +
                         "|".join(c.decode() for c in TEST_CLASSES) + r")\b")


def marks_of_test_code(data):
    """Mangled kwatt names with a `testing` namespace, and the test classes' names."""
    marks = []
    for match in re.finditer(rb"7testing", data):
        # N5kwatt7testing..., N5kwatt5meter7testing...: kwatt's namespace shortly before.
        if b"5kwatt" in data[max(0, match.start() - 40):match.start()]:
            marks.append(data[max(0, match.start() - 40):match.end() + 20])
    for name in TEST_CLASSES:
        marks += [name] * data.count(name)
    return marks


def core_module():
    import kwatt._core
    return kwatt._core.__file__


@pytest.mark.parametrize("program", ["kwatt", "kwatt._core"])
def test_no_test_code_is_linked_into_what_users_run(program):
    path = KWATT if program == "kwatt" else core_module()
    with open(path, "rb") as f:
        data = f.read()
    # The scan sees kwatt's own code: its mangled names are there.
    assert data.count(b"5kwatt") > 100, f"{path} holds no kwatt name: not the program expected?"
    marks = marks_of_test_code(data)
    assert marks == [], f"{len(marks)} marks of test code in {path}, e.g. {marks[:3]}"
    if shutil.which("nm") is not None:
        listing = subprocess.run(["nm", "-C", "--defined-only", path], capture_output=True,
                                 text=True).stdout.splitlines()
        found = [line for line in listing if TEST_SYMBOL.search(line)]
        assert found == [], f"{len(found)} test symbols in {path}, e.g. {found[:3]}"
