#!python
"""The `kwatt` command of kwatt's wheels and of `pip install .` (CMakeLists.txt installs it, and
packaging/wheels.sh puts it in place of auditwheel's).

What the Python package does, it does in this process: `kwatt report` (the report with its
figures, drawn by matplotlib) and `kwatt export --to parquet` (pyarrow) run `python -m kwatt`'s
commands here, with the same arguments. Every other command replaces this process with the kwatt
program that the wheel carries in kwatt.scripts/, beside the package wherever pip put it (a
virtualenv, --user, a --target directory). Neither starts the other: no process is started
between the CLI and Python. Only those two import kwatt (pandas would cost every command a third
of a second)."""
import importlib.util
import os
import sys


def _in_python(argv):
    """Whether `kwatt ARGV` is one of the Python package's commands."""
    if not argv:
        return False
    if argv[0] == "report":
        return True
    if argv[0] == "export":
        rest = argv[1:]
        return "--to=parquet" in rest or any(
            a == "--to" and b == "parquet" for a, b in zip(rest, rest[1:]))
    return False


if __name__ == "__main__":
    spec = importlib.util.find_spec("kwatt")
    if spec is None or not spec.submodule_search_locations:
        sys.exit("kwatt: the kwatt package is not importable by " + sys.executable
                 + ": reinstall the wheel (pip install kwatt-*.whl)")
    if _in_python(sys.argv[1:]):
        from kwatt.__main__ import main
        sys.exit(main(sys.argv[1:], prog="kwatt"))
    site = os.path.dirname(list(spec.submodule_search_locations)[0])
    program = os.path.join(site, "kwatt.scripts", "kwatt")
    try:
        os.execv(program, [program] + sys.argv[1:])
    except OSError as error:
        sys.exit(f"kwatt: cannot run {program}: {error.strerror}: reinstall the wheel "
                 "(pip install --force-reinstall kwatt-*.whl)")
