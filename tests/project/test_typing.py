"""The public API is typed: the package ships py.typed and the compiled core's stub.

mypy --strict itself is not run here: CI runs it once, as its own stage of .ci/run, and
pre-commit runs it before a commit (both read ``[tool.mypy]`` in pyproject.toml). The
last test checks that both still do, where the checkout's own files are present.
"""
from __future__ import annotations

import inspect
import os
import re

import pytest

import pyflatmodule
from pyflatmodule.files import LoadOptions

from support.paths import ROOT

INSTALLED = os.path.dirname(os.path.abspath(pyflatmodule.__file__))


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


def test_the_typed_loaders_declare_loads_options():
    """Each typed loader takes load()'s options by name and type (LoadOptions), and its
    format's own, not ``**options: Any``."""
    load = inspect.signature(pyflatmodule.load).parameters
    common = set(load) - {"source", "data", "debug_buffer"}
    assert set(LoadOptions.__annotations__) == common
    own = {"load_module": set(), "load_program": {"data"}, "load_data": set(),
           "load_bundled": set(), "load_etdump": {"debug_buffer"}}
    for name, extras in own.items():
        params = inspect.signature(getattr(pyflatmodule, name)).parameters
        assert {p for p in params if p not in ("source", "options")} == extras, name
        assert params["options"].annotation == "Unpack[LoadOptions]", name


def test_a_misspelt_option_fails_type_checking(tmp_path):
    api = pytest.importorskip("mypy.api")
    snippet = tmp_path / "snippet.py"
    snippet.write_text("import pyflatmodule as pfm\n"
                       "pfm.load_program('m.pte', data=['w.ptd'], strict=True)\n"
                       "pfm.load_program('m.pte', max_dept=3)\n"
                       "pfm.load_module('m.ptl', data=['w.ptd'])\n"
                       "pfm.load_etdump('p.etdump', max_depth='deep')\n")
    out, _, status = api.run([str(snippet), "--strict", "--no-incremental",
                              "--cache-dir", os.devnull])
    errors = sorted(int(line.split(":")[1]) for line in out.splitlines() if ": error:" in line)
    assert status == 1 and errors == [3, 4, 5], out
