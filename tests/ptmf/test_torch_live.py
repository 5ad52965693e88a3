"""Differential tests against torch itself, run live (skipped without torch).

Torch runs in child processes (tests/support/torch_oracle.py): its loaders crash on some files.
"""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

import pyflatmodule as pfm

from support import (
    HAS_TORCH,
    MODEL_FILES,
    assert_info,
    assert_state_dict,
    assert_value,
    model_path,
)
from support.paths import SUPPORT

pytestmark = [pytest.mark.torch,
              pytest.mark.skipif(not HAS_TORCH, reason="torch is not installed")]

PARTS = ("info", "state_dict", "attributes")


def _compare(path: str):
    from support.torch_oracle import run_oracle
    doc, arrays = run_oracle(path, parts=PARTS)
    compared = 0
    with pfm.load(path) as m:
        if "error" not in doc["info"]:
            assert_info(doc["info"], m.info())
            compared += 1
        if "error" not in doc["state_dict"]:
            assert_state_dict(doc["state_dict"], arrays, m.state_dict())
            compared += 1
        if "error" not in doc["attributes"]:
            assert_value(doc["attributes"], arrays, m.root, "root")
            compared += 1
    return compared


@pytest.mark.parametrize("name", MODEL_FILES + ["sample.ptl"])
def test_stored_files_against_live_torch(name):
    assert _compare(model_path(name)) >= 1


@pytest.mark.parametrize("seed", range(6))
def test_fresh_models_against_torch(seed, tmp_path):
    out = str(tmp_path / f"fresh{seed}.ptl")
    fresh = os.path.join(SUPPORT, "torch_fresh.py")
    subprocess.run([sys.executable, fresh, str(seed), out], check=True, timeout=300,
                   capture_output=True)
    assert 3 == _compare(out)
