"""kwatt's source archive (make sdist; doc/install.md, "From source"): it carries the dashboard's
uPlot, which a clone does not, so that `pip install kwatt-VERSION.tar.gz` builds with no network;
and it carries none of a developer's build trees."""
import subprocess
import sys
import tarfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_sdist_carries_uplot_and_no_build_tree_and_configures_offline(tmp_path):
    built = subprocess.run([sys.executable, "-m", "build", "--sdist", "--no-isolation", "-o",
                            str(tmp_path), str(ROOT)], capture_output=True, text=True, timeout=600)
    assert built.returncode == 0, built.stdout[-2000:] + built.stderr[-3000:]
    (archive,) = tmp_path.glob("kwatt-*.tar.gz")
    with tarfile.open(archive) as tar:
        names = tar.getnames()
        top = names[0].split("/")[0]
        safe = {"filter": "data"} if hasattr(tarfile, "data_filter") else {}
        tar.extractall(tmp_path / "src", **safe)
    inside = {name.split("/", 1)[1] for name in names if "/" in name}
    for needed in ("third_party/uplot/dist/uPlot.iife.min.js", "third_party/uplot/dist/uPlot.min.css",
                   "third_party/uplot/LICENSE", "CMakeLists.txt", "pyproject.toml",
                   "src/server/dashboard/index.html", "python/kwatt/__init__.py"):
        assert needed in inside, f"{needed} is not in {archive.name}"
    trees = sorted({n.split("/")[0] for n in inside
                    if n.split("/")[0] in ("build", ".venv", "dist") or n.startswith("build-")})
    assert not trees, f"{archive.name} carries build trees: {trees}"
    assert archive.stat().st_size < 5_000_000, f"{archive.name}: {archive.stat().st_size} bytes"
    # CMake finds everything it needs in the archive and the system: uPlot from the archive.
    configured = subprocess.run(
        ["cmake", "-S", str(tmp_path / "src" / top), "-B", str(tmp_path / "tree"), "-G", "Ninja"],
        capture_output=True, text=True, timeout=300)
    assert configured.returncode == 0, configured.stdout[-2000:] + configured.stderr[-3000:]
