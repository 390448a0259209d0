"""kwatt._core's stubs (_core.pyi) describe the module as it is, and its long calls take their
arguments by keyword."""
import ast
import inspect
from pathlib import Path

import pytest

import kwatt
from kwatt import _core


def stubbed():
    tree = ast.parse((Path(kwatt.__file__).parent / "_core.pyi").read_text())
    functions = {node.name: node for node in tree.body if isinstance(node, ast.FunctionDef)}
    classes = {node.name for node in tree.body if isinstance(node, ast.ClassDef)}
    constants = {node.target.id for node in tree.body
                 if isinstance(node, ast.AnnAssign) and not node.target.id.startswith("_")}
    return functions, classes | constants


def test_every_name_of_the_module_has_a_stub_and_no_stub_is_stale():
    functions, classes = stubbed()
    public = {name for name in dir(_core) if not name.startswith("_")}
    assert public == set(functions) | classes


def test_stubbed_arguments_are_those_of_the_module():
    functions, _ = stubbed()
    for name, node in functions.items():
        # pybind11 puts the signature on the docstring's first line: "name(a: T, *, b: T) -> R".
        signature = getattr(_core, name).__doc__.split("\n", 1)[0]
        given = [a.arg for a in node.args.args] + [a.arg for a in node.args.kwonlyargs]
        for argument in given:
            assert f"{argument}:" in signature, (name, argument, signature)
        if node.args.kwonlyargs:
            assert "*," in signature, (name, signature)


def test_long_calls_refuse_positional_arguments(server):
    with pytest.raises(TypeError):
        _core.fetch(_core.Client({"api_url": server.url}), ["nova-1.lyon"], 0, 1, None, [], False,
                    None)
