"""kwatt's wheels where its users are (doc/install.md, "Wheels"): minimal Debian roots (python3,
python3-venv, ca-certificates, as `mmdebstrap --variant=apt` makes them: no compiler, no -dev
package), each wheel installed there by an unprivileged user into a virtualenv, then the CLI, the
store, the meter, the collector, a report with its figures, a parquet export and the Python
service run against a simulator it starts (in_root.sh).

The systems, each with the wheel of its Python:
  bullseye      Debian 11, its python3 3.9 (Grid'5000's frontends and nodes)
  bookworm      Debian 12, its python3 3.11
  trixie        Debian 13, its python3 3.13
  bookworm-3.10, bookworm-3.12
                Debian 12 with pyenv's CPython of that version copied into the root (a user's
                conda or pyenv Python)
KWATT_WHEEL_SYSTEMS chooses them (default: bullseye and trixie, the oldest and newest Python: make
test; make test-wheels runs every one). Each root is made once and kept as a tarball in
~/.cache/kwatt/roots (KWATT_ROOT_CACHE), unpacked afresh for each run; the Python packages come
from a wheelhouse kept beside it, so that the install in the root needs no index. make builds the
wheels (packaging/wheels.sh) first."""
import os
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CACHE = Path(os.environ.get("KWATT_ROOT_CACHE", Path.home() / ".cache" / "kwatt" / "roots"))
PYENV = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv"))
UNPRIVILEGED = 65534  # nobody:nogroup

# system -> (Debian suite, CPython version, interpreter: the root's python3 or pyenv's)
SYSTEMS = {
    "bullseye": ("bullseye", "3.9", None),
    "bookworm": ("bookworm", "3.11", None),
    "trixie": ("trixie", "3.13", None),
    "bookworm-3.10": ("bookworm", "3.10", "pyenv"),
    "bookworm-3.12": ("bookworm", "3.12", "pyenv"),
}
CHOSEN = os.environ.get("KWATT_WHEEL_SYSTEMS", "bullseye trixie").split()


def wheel(version):
    tag = "cp" + version.replace(".", "")
    found = sorted((ROOT / "dist").glob(f"kwatt-*-{tag}-{tag}-manylinux_*.whl"))
    if not found:
        pytest.fail(f"no dist/kwatt-*-{tag}-{tag}-manylinux_*.whl: run make wheels "
                    f"(or packaging/wheels.sh {version})")
    return found[-1]


def root_tarball(suite):
    """The minimal root of a Debian suite, made by mmdebstrap on first use."""
    tarball = CACHE / f"{suite}-python3.tar"
    if not tarball.exists():
        CACHE.mkdir(parents=True, exist_ok=True)
        partial = tarball.with_suffix(".partial.tar")
        made = subprocess.run(
            ["mmdebstrap", "--variant=apt", "--include=python3,python3-venv,ca-certificates",
             suite, str(partial)], capture_output=True, text=True, timeout=900)
        assert made.returncode == 0, f"mmdebstrap failed:\n{made.stderr[-3000:]}"
        partial.rename(tarball)  # a run cut short never leaves a root that looks whole
    return tarball


def wheelhouse(version):
    """numpy, pandas, matplotlib, pyarrow and their dependencies as wheels for that CPython,
    fetched once from PyPI."""
    house = CACHE / f"wheelhouse-cp{version.replace('.', '')}"
    stamp = house / ".complete"
    if not stamp.exists():
        house.mkdir(parents=True, exist_ok=True)
        got = subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--only-binary=:all:",
                              "--python-version", version, "--platform", "manylinux_2_28_x86_64",
                              "--platform", "manylinux_2_17_x86_64", "--platform",
                              "manylinux2014_x86_64", "-d", str(house), "numpy>=1.24",
                              "pandas>=2.0", "matplotlib>=3.6", "pyarrow>=12",
                              # pip evaluates markers with its own Python, not --python-version's:
                              # matplotlib's backport for 3.9 is named here.
                              *(["importlib-resources>=3.2.0", "zipp>=3.1.0"]
                                if version == "3.9" else [])],
                             capture_output=True, text=True, timeout=900)
        assert got.returncode == 0, f"pip download failed:\n{got.stderr[-3000:]}"
        stamp.touch()
    return house


def pyenv_python(version):
    found = sorted(PYENV.glob(f"versions/{version}.*/bin/python{version}"))
    if not found:
        pytest.fail(f"no pyenv CPython {version} in {PYENV}: pyenv install {version}")
    return found[-1]


@pytest.mark.parametrize("system", CHOSEN)
def test_a_plain_user_without_a_compiler_installs_the_wheel_and_uses_it(system, tmp_path):
    if system not in SYSTEMS:
        pytest.fail(f"KWATT_WHEEL_SYSTEMS: unknown system {system!r}; known: {', '.join(SYSTEMS)}")
    if os.geteuid() != 0:
        pytest.skip("the minimal root is entered with chroot: run as root (make test does in CI)")
    if shutil.which("mmdebstrap") is None:
        pytest.fail("mmdebstrap is missing: run make test-deps")
    suite, version, interpreter = SYSTEMS[system]
    the_wheel = wheel(version)
    root = tmp_path / "root"
    root.mkdir()
    # GNU tar keeps the owners, modes and device files of the root as mmdebstrap made them.
    subprocess.run(["tar", "-xf", str(root_tarball(suite)), "-C", str(root)], check=True,
                   timeout=300)
    python = "python3"
    if interpreter == "pyenv":
        # pyenv's CPython at the same path inside the root, readable by the user.
        source = pyenv_python(version).parents[1]
        inside = root / source.relative_to("/")
        shutil.copytree(source, inside, symlinks=True)
        for parent in [root / p.relative_to("/") for p in source.parents if p != Path("/")]:
            parent.chmod(0o755)
        python = str(source / "bin" / f"python{version}")
    home = root / "home" / "user"
    home.mkdir(parents=True)
    shutil.copy(the_wheel, home)
    # Another CPython's wheel, which pip must refuse here, naming why.
    (home / "other").mkdir()
    shutil.copy(wheel("3.13" if version == "3.9" else "3.9"), home / "other")
    shutil.copytree(wheelhouse(version), home / "wheels", ignore=shutil.ignore_patterns(".complete"))
    shutil.copy(ROOT / "examples" / "jobs.json", home)
    shutil.copy(ROOT / "tests" / "wheel" / "in_root.sh", home)
    for path in [home, *home.rglob("*")]:
        os.chown(path, UNPRIVILEGED, UNPRIVILEGED)
    # A mount namespace of its own: /proc, /dev and /tmp in the root vanish with it.
    inside = (f"mount -t proc proc {root}/proc && mount --rbind /dev {root}/dev && "
              f"mount -t tmpfs tmpfs {root}/tmp && "
              f"exec chroot --userspec={UNPRIVILEGED}:{UNPRIVILEGED} {root} "
              f"env -i HOME=/home/user PATH=/usr/bin:/bin LANG=C.UTF-8 PYTHON={python} "
              "bash /home/user/in_root.sh")
    for propagation in ("private", "unchanged"):
        done = subprocess.run(["unshare", "--mount", "--propagation", propagation, "--fork", "sh",
                               "-c", inside], capture_output=True, text=True, timeout=900)
        # Where / is no mount point of its own (this test run inside a chroot, whose mounts are
        # private already), its propagation cannot be changed.
        if "cannot change root filesystem propagation" not in done.stderr:
            break
    print(done.stdout)
    assert done.returncode == 0, (f"{system}, {the_wheel.name}:\n{done.stdout}\n"
                                  f"{done.stderr[-4000:]}")
    steps = [line for line in done.stdout.splitlines() if line.startswith("ok: ")]
    assert len(steps) == 13, steps


def test_each_wheel_is_manylinux_2_31_or_older_and_its_kwatt_needs_no_newer_glibc():
    """auditwheel's own verdict on each wheel in dist/, and the glibc symbols of the kwatt program
    and the module it carries (Debian 11 has glibc 2.31)."""
    wheels = sorted((ROOT / "dist").glob("kwatt-*-manylinux_*.whl"))
    if not wheels:
        pytest.fail("no wheel in dist/: run make wheels")
    auditwheel = ROOT / "build-wheels" / "tools" / "bin" / "auditwheel"
    if not auditwheel.exists():
        pytest.fail("no build-wheels/tools: run make wheels")
    for path in wheels:
        assert path.name.endswith(("-manylinux_2_28_x86_64.whl", "-manylinux_2_31_x86_64.whl")), \
            path.name
        shown = subprocess.run([str(auditwheel), "show", str(path)], capture_output=True,
                               text=True, timeout=300)
        assert shown.returncode == 0, shown.stderr
        verdict = " ".join(shown.stdout.split())
        assert re.search(r'consistent with the following platform tag: "manylinux_2_(28|31)_x86_64"',
                         verdict), verdict
        with zipfile.ZipFile(path) as archive:
            for name in archive.namelist():
                if not (name == "kwatt.scripts/kwatt" or (name.startswith("kwatt/_core.") and name.endswith(".so"))):
                    continue
                elf = Path(tempfile.mkdtemp()) / "elf"
                elf.write_bytes(archive.read(name))
                symbols = subprocess.run(["objdump", "-T", str(elf)], capture_output=True,
                                         text=True, check=True).stdout
                versions = {tuple(int(p) for p in v.split("."))
                            for v in re.findall(r"GLIBC_(\d+\.\d+(?:\.\d+)?)", symbols)}
                assert versions and max(versions) <= (2, 31), (path.name, name, max(versions))
                assert "GLIBCXX_" not in symbols and "CXXABI_" not in symbols, (path.name, name)
