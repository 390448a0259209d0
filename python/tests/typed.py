"""A value checked against its type in kwatt.documents, all the way down: mypy checks the package
against those types; this checks the types against what the C++ core gives at run time (every
key present, none unknown, each value of its type)."""
import typing
from typing import Any, Literal, Union

import numpy as np

from kwatt import _core, documents


def _hints(typed):
    return typing.get_type_hints(typed, globalns=vars(documents),
                                 localns={"Catalogue": _core.Catalogue})


def assert_is(value, expected, where="document"):
    """Raises AssertionError naming the path of the first value that is not of `expected`."""
    if expected is Any:
        return
    if isinstance(expected, type) and issubclass(expected, dict) and hasattr(expected,
                                                                             "__required_keys__"):
        assert isinstance(value, dict), f"{where}: {type(value).__name__}, not a dict"
        hints = _hints(expected)
        missing = set(expected.__required_keys__) - set(value)
        unknown = set(value) - set(hints)
        assert not missing and not unknown, f"{where}: missing {missing}, unknown {unknown}"
        for key, item in value.items():
            assert_is(item, hints[key], f"{where}[{key!r}]")
        return
    origin, args = typing.get_origin(expected), typing.get_args(expected)
    if origin is Union:
        errors = []
        for option in args:
            try:
                assert_is(value, option, where)
                return
            except AssertionError as e:
                errors.append(str(e))
        raise AssertionError(f"{where}: {value!r} is none of {args}: {errors}")
    if origin is Literal:
        assert value in args, f"{where}: {value!r} not one of {args}"
        return
    if origin is list:
        assert isinstance(value, list), f"{where}: {type(value).__name__}, not a list"
        for i, item in enumerate(value):
            assert_is(item, args[0], f"{where}[{i}]")
        return
    if origin is dict:
        assert isinstance(value, dict), f"{where}: {type(value).__name__}, not a dict"
        for key, item in value.items():
            assert_is(key, args[0], f"{where} key")
            assert_is(item, args[1], f"{where}[{key!r}]")
        return
    if origin is tuple:
        assert isinstance(value, tuple) and len(value) == len(args), f"{where}: {value!r}"
        for i, (item, arg) in enumerate(zip(value, args)):
            assert_is(item, arg, f"{where}[{i}]")
        return
    if expected is type(None):
        assert value is None, f"{where}: {value!r}, not None"
        return
    if expected is float:  # an int is a float too (PEP 484); a bool is neither
        assert isinstance(value, (int, float)) and not isinstance(value, bool), \
            f"{where}: {value!r}, not a number"
        return
    if expected is int:
        assert isinstance(value, (int, np.integer)) and not isinstance(value, bool), \
            f"{where}: {value!r}, not an int"
        return
    assert isinstance(value, expected), f"{where}: {type(value).__name__}, not {expected}"
