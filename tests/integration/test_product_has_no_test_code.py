"""No test code is linked into what users run: the kwatt command and the Python module.

Fakes, manual clocks and the starters of throwaway peers live in the testing library
(src/testing, target kwatt_testing), which only the unit tests, fuzzers, benchmarks and test
peers link (doc/design.md, "Parts and layers"). This reads the symbols of the built programs:
the release kwatt has them (it is not stripped), so their absence is a fact, not an assumption.
"""

import re
import shutil
import subprocess

import pytest

from conftest import KWATT

# What marks test code: the testing namespaces, and the fakes and clocks by name.
TEST_CODE = re.compile(r"kwatt::(?:\w+::)*testing::|kwatt::\w+::test_files::|\bFakeProcfs\b|"
                       r"\bManualClock\b|\bTestPostgres\b|\bTestInfluxd\b|\bTestSnmpd\b|"
                       r"\bTestIpmiSim\b")


def symbols(path):
    if shutil.which("nm") is None:
        pytest.skip("nm (binutils) is not installed")
    listing = subprocess.run(["nm", "-C", "--defined-only", path], capture_output=True,
                             text=True, check=True).stdout
    return listing.splitlines()


def core_module():
    import kwatt._core
    return kwatt._core.__file__


@pytest.mark.parametrize("program", ["kwatt", "kwatt._core"])
def test_no_test_code_is_linked_into_what_users_run(program):
    path = KWATT if program == "kwatt" else core_module()
    lines = symbols(path)
    # The listing is real: the program's own code is in it.
    assert any("kwatt::" in line for line in lines), f"{path} has no kwatt symbol: stripped?"
    found = [line for line in lines if TEST_CODE.search(line)]
    assert found == [], f"{len(found)} test symbols in {path}, e.g. {found[:3]}"
