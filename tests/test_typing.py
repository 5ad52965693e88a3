"""The public API is typed: the package passes mypy --strict and ships py.typed."""
from __future__ import annotations

import os

import pytest

import pyflatmodule

INSTALLED = os.path.dirname(os.path.abspath(pyflatmodule.__file__))
SOURCES = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                       "pyflatmodule")


def test_py_typed_is_shipped():
    assert os.path.exists(os.path.join(INSTALLED, "py.typed"))
    assert os.path.exists(os.path.join(INSTALLED, "core", "_c.pyi"))


def test_mypy_strict():
    api = pytest.importorskip("mypy.api")
    out, err, status = api.run(["--strict", "--ignore-missing-imports", "--no-incremental",
                                "--cache-dir", os.devnull, SOURCES])
    assert 0 == status, out + err
