#!python
"""The `kwatt` command of kwatt's wheels (packaging/wheels.sh puts it in place of auditwheel's).

It runs the kwatt program that the wheel carries in kwatt.scripts/, beside the package wherever
pip put it (a virtualenv, --user, a --target directory), and names this interpreter in
KWATT_PYTHON, so that `kwatt report` draws its figures and `kwatt export --to parquet` writes with
the Python that has kwatt installed. It imports nothing of kwatt (pandas would cost every command
a third of a second)."""
import importlib.util
import os
import sys

if __name__ == "__main__":
    spec = importlib.util.find_spec("kwatt")
    if spec is None or not spec.submodule_search_locations:
        sys.exit("kwatt: the kwatt package is not importable by " + sys.executable
                 + ": reinstall the wheel (pip install kwatt-*.whl)")
    site = os.path.dirname(list(spec.submodule_search_locations)[0])
    program = os.path.join(site, "kwatt.scripts", "kwatt")
    os.environ.setdefault("KWATT_PYTHON", sys.executable)
    try:
        os.execv(program, [program] + sys.argv[1:])
    except OSError as error:
        sys.exit(f"kwatt: cannot run {program}: {error.strerror}: reinstall the wheel "
                 "(pip install --force-reinstall kwatt-*.whl)")
