"""The self-contained wheel where kwatt's users are: a minimal Debian root (python3, python3-venv,
ca-certificates, as `mmdebstrap --variant=apt` makes it: no compiler, no -dev package), the wheel
installed there by an unprivileged user into a virtualenv, then the CLI, the store, the meter, the
collector and the Python service run against a simulator it starts (in_root.sh).

The root is made once and kept as a tarball in ~/.cache/kwatt/roots (KWATT_ROOT_CACHE), and
unpacked afresh for each run; numpy and pandas come from a wheelhouse kept beside it, so that the
install in the root needs no index. `make test-wheel` builds the wheel (make wheel) first."""
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CACHE = Path(os.environ.get("KWATT_ROOT_CACHE", Path.home() / ".cache" / "kwatt" / "roots"))
SUITE = os.environ.get("KWATT_ROOT_SUITE", "bookworm")
UNPRIVILEGED = 65534  # nobody:nogroup


# The CPython of each suite's python3, whose wheel the root takes.
PYTHON_OF_SUITE = {"bookworm": "cp311", "trixie": "cp313"}


def wheel():
    tag = PYTHON_OF_SUITE[SUITE]
    found = sorted((ROOT / "dist").glob(f"kwatt-*-{tag}-{tag}-manylinux_*.whl"))
    if not found:
        pytest.fail(f"no dist/kwatt-*-{tag}-{tag}-manylinux_*.whl for {SUITE}'s python3: run make "
                    "wheel" + ("" if tag == "cp311" else f" PYTHON_FOR_WHEEL=python3.{tag[3:]}"))
    return found[-1]


def root_tarball():
    """The minimal root of SUITE, made by mmdebstrap on first use."""
    tarball = CACHE / f"{SUITE}-python3.tar"
    if not tarball.exists():
        CACHE.mkdir(parents=True, exist_ok=True)
        partial = tarball.with_suffix(".partial.tar")
        made = subprocess.run(
            ["mmdebstrap", "--variant=apt", "--include=python3,python3-venv,ca-certificates",
             SUITE, str(partial)], capture_output=True, text=True, timeout=900)
        assert made.returncode == 0, f"mmdebstrap failed:\n{made.stderr[-3000:]}"
        partial.rename(tarball)  # a run cut short never leaves a root that looks whole
    return tarball


def wheelhouse():
    """numpy, pandas and their dependencies as wheels for the root's CPython, fetched once from
    PyPI."""
    tag = PYTHON_OF_SUITE[SUITE]
    house = CACHE / f"wheelhouse-{tag}"
    stamp = house / ".complete"
    if not stamp.exists():
        house.mkdir(parents=True, exist_ok=True)
        got = subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--only-binary=:all:",
                              "--python-version", tag[2:], "--platform", "manylinux_2_28_x86_64",
                              "-d", str(house), "numpy>=1.24", "pandas>=2.0"],
                             capture_output=True, text=True, timeout=600)
        assert got.returncode == 0, f"pip download failed:\n{got.stderr[-3000:]}"
        stamp.touch()
    return house


@pytest.fixture
def minimal_root(tmp_path):
    if os.geteuid() != 0:
        pytest.skip("the minimal root is entered with chroot: run as root (make test does in CI)")
    if shutil.which("mmdebstrap") is None:
        pytest.fail("mmdebstrap is missing: run make test-deps")
    directory = tmp_path / "root"
    directory.mkdir()
    # GNU tar keeps the owners, modes and device files of the root as mmdebstrap made them.
    subprocess.run(["tar", "-xf", str(root_tarball()), "-C", str(directory)], check=True,
                   timeout=300)
    yield directory
    # Whatever the user left running in the root went with its mount namespace.


def test_a_plain_user_without_a_compiler_installs_the_wheel_and_uses_it(minimal_root):
    home = minimal_root / "home" / "user"
    home.mkdir(parents=True)
    shutil.copy(wheel(), home)
    shutil.copytree(wheelhouse(), home / "wheels", ignore=shutil.ignore_patterns(".complete"))
    shutil.copy(ROOT / "examples" / "jobs.json", home)
    shutil.copy(ROOT / "tests" / "wheel" / "in_root.sh", home)
    for path in [home, *home.rglob("*")]:
        os.chown(path, UNPRIVILEGED, UNPRIVILEGED)
    # A mount namespace of its own: /proc, /dev and /tmp in the root vanish with it.
    inside = (f"mount -t proc proc {minimal_root}/proc && mount --rbind /dev {minimal_root}/dev && "
              f"mount -t tmpfs tmpfs {minimal_root}/tmp && "
              f"exec chroot --userspec={UNPRIVILEGED}:{UNPRIVILEGED} {minimal_root} "
              "env -i HOME=/home/user PATH=/usr/bin:/bin LANG=C.UTF-8 "
              "bash /home/user/in_root.sh")
    for propagation in ("private", "unchanged"):
        done = subprocess.run(["unshare", "--mount", "--propagation", propagation, "--fork", "sh",
                               "-c", inside], capture_output=True, text=True, timeout=600)
        # Where / is no mount point of its own (this test run inside a chroot, whose mounts are
        # private already), its propagation cannot be changed.
        if "cannot change root filesystem propagation" not in done.stderr:
            break
    print(done.stdout)
    assert done.returncode == 0, f"in the minimal root:\n{done.stdout}\n{done.stderr[-4000:]}"
    steps = [line for line in done.stdout.splitlines() if line.startswith("ok: ")]
    assert len(steps) == 10, steps
