"""Real architectures, every form torch writes: each file opens with default options and
gives exactly torch's tensors.

The zoo (benchmarks/zoo_build.py: torchvision, timm, nn.Transformer, LSTM/GRU, static
and dynamic quantization, channels-last, fp16 and bf16 weights; each as a jit file, a
lite file, a mobile module re-saved from the lite loader and a saved-parameters file) is
written by torch into a temporary folder; torch's own answers come from
tests/support/torch_oracle.py, each load in a child process. Opt in with ``--zoo`` (CI
does): it needs torch, torchvision and timm, and takes a few minutes.
"""
from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from typing import Any, Dict, List, Tuple

import pytest

import pyflatmodule as pfm

import zoo as ZOO  # the zoo's listing: benchmarks/zoo.py, no torch (benchmarks/ is on the path)
from support import assert_tensor
from support.paths import BENCHMARKS

pytestmark = [pytest.mark.zoo, pytest.mark.torch]

BUILDER = os.path.join(BENCHMARKS, "zoo_build.py")
#: What torch reads back, per form: the oracle part and where its tensors are.
ORACLE_PART = {"jit": "state_dict", "lite": "state_dict", "mobile": "mobile",
               "params": "parameters_file"}


@pytest.fixture(scope="module")
def zoo(tmp_path_factory: Any) -> Tuple[str, List[Dict[str, Any]]]:
    """(folder, manifest entries) of the zoo torch wrote."""
    missing = [n for n in ("torch", "torchvision", "timm") if importlib.util.find_spec(n) is None]
    if missing:
        pytest.skip(f"the zoo needs {', '.join(missing)}")
    out = str(tmp_path_factory.mktemp("zoo"))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        p for p in (BENCHMARKS, os.environ.get("PYTHONPATH")) if p))
    subprocess.run([sys.executable, BUILDER, out], check=True, timeout=1800, env=env,
                   stdout=subprocess.DEVNULL)
    with open(os.path.join(out, "zoo.json"), encoding="utf-8") as f:
        return out, json.load(f)["files"]



@pytest.mark.parametrize("form", list(ORACLE_PART))
@pytest.mark.parametrize("model", ZOO.MODELS)
def test_zoo_file_matches_torch(zoo: Tuple[str, List[Dict[str, Any]]], model: str,
                                form: str) -> None:
    """Loads with default options; state_dict() holds torch's tensors under torch's keys,
    in torch's order. A mobile module keeps no sources: there torch's named parameters
    (a sorted map in torch) are among the tensors reachable by attribute path."""
    from support.torch_oracle import run_oracle
    folder, files = zoo
    entry = next((e for e in files if e["model"] == model and e["form"] in (form, "script")),
                 None)
    assert entry is not None, f"the builder wrote no record of {model}.{form}"
    if "error" in entry:
        pytest.skip(f"torch cannot write {model}.{form}: {entry['error']}")
    path = os.path.join(folder, entry["file"])
    with pfm.load(path) as m:
        actual = m.state_dict()
    part = ORACLE_PART[form]
    result, arrays = run_oracle(path, parts=(part,))
    expected = result[part]
    if form == "mobile" and "error" not in expected:
        expected = expected.get("parameters", {"error": expected.get("ext_error", "")})
    if "error" in expected and "ext_build_error" in result:
        pytest.skip(f"torch's side of {model}.{form} needs the oracle's C++ helper, which did "
                    f"not build: {result['ext_build_error'][:300]}")
    if "error" in expected:
        pytest.skip(f"pyflatmodule read {model}.{form}; torch cannot, so nothing to compare: "
                    f"{expected['error'][:200]}")
    if form == "mobile":
        assert set(expected["keys"]) <= set(actual)
    else:
        assert expected["keys"] == list(actual)
    for key in expected["keys"]:
        assert_tensor(expected["tensors"][key], arrays, actual[key], f"{model}.{form}:{key}")
