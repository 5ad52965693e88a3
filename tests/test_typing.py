"""The public API is typed: the package passes mypy --strict and ships py.typed."""
from __future__ import annotations

import os

import pytest

import pyflatmodule

PACKAGE = os.path.dirname(os.path.abspath(pyflatmodule.__file__))


def test_py_typed_is_shipped():
    assert os.path.exists(os.path.join(PACKAGE, "py.typed"))


def test_mypy_strict():
    api = pytest.importorskip("mypy.api")
    out, err, status = api.run(["--strict", "--ignore-missing-imports",
                                "--no-incremental", "--cache-dir", os.devnull, PACKAGE])
    assert 0 == status, out + err
