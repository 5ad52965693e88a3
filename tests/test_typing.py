"""The public API is typed: the package ships py.typed and the compiled core's stub.

mypy --strict itself is not run here: CI runs it once, as its own stage of .ci/run, and
pre-commit runs it before a commit (both read ``[tool.mypy]`` in pyproject.toml). The
last test checks that both still do, where the checkout's own files are present.
"""
from __future__ import annotations

import os
import re

import pytest

import pyflatmodule

INSTALLED = os.path.dirname(os.path.abspath(pyflatmodule.__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_py_typed_is_shipped():
    assert os.path.exists(os.path.join(INSTALLED, "py.typed"))
    assert os.path.exists(os.path.join(INSTALLED, "core", "_c.pyi"))


def _read(name: str) -> str:
    path = os.path.join(ROOT, name)
    if not os.path.exists(path):
        pytest.skip(f"{name} is not in this copy of the tests (not a checkout)")
    with open(path, encoding="utf-8") as f:
        return f.read()


def test_mypy_strict_runs_in_ci_and_pre_commit():
    config = _read("pyproject.toml")
    mypy = re.search(r"^\[tool\.mypy\]\n(.*?)(?=^\[|\Z)", config, re.M | re.S)
    assert mypy, "pyproject.toml has no [tool.mypy]"
    assert re.search(r'^strict = true$', mypy.group(1), re.M)
    assert re.search(r'^files = \["pyflatmodule"\]$', mypy.group(1), re.M)
    stage = re.search(r"^# --- stage: mypy .*?^# --- end of stage$", _read(".ci/run"),
                      re.M | re.S)
    assert stage and re.search(r"^mypy$", stage.group(0), re.M), ".ci/run has no mypy stage"
    hooks = _read(".pre-commit-config.yaml")
    assert re.search(r"^      - id: mypy\n(?:        .*\n)*?        entry: mypy\n", hooks, re.M)
