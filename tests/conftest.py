"""Shared fixtures: the model files in tests/data and what torch said about them.

Expected values come from torch: ``<name>.oracle.json/.npz`` hold what torch 2.13 read
back from each file (tests/oracle.py), ``<name>.inputs.json/.npz`` what the generator
fed torch (tests/data/make_data.py). Comparisons here never use pyflatmodule output as
an expected value.
"""
from __future__ import annotations

import base64
import importlib.util
import json
import math
import os
from typing import Any, Dict, List, Tuple

import numpy as np
import pytest

import pyflatmodule as pfm
from pyflatmodule.tensors import DTYPE_NAMES, numpy_dtype

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(HERE, "data")
SAMPLE = os.path.join(os.path.dirname(pfm.__file__), "data", "sample.ptl")

# Child processes must import the pyflatmodule this run imported (installed, or built
# in place), never the uncompiled source tree that the working directory may hold.
PACKAGE_PARENT = os.path.dirname(os.path.dirname(os.path.abspath(pfm.__file__)))
os.environ["PYTHONSAFEPATH"] = "1"
os.environ["PYTHONPATH"] = os.pathsep.join(
    p for p in (PACKAGE_PARENT, HERE, os.environ.get("PYTHONPATH")) if p)

MODEL_FILES = sorted(f for f in os.listdir(DATA) if f.endswith((".ff", ".ptl")))
HAS_TORCH = importlib.util.find_spec("torch") is not None


#: Opt-in suites: marker -> the option that selects it (deselected otherwise).
OPT_IN = {"full_sweep": "--full-sweep", "zoo": "--zoo"}


def pytest_addoption(parser: Any) -> None:
    parser.addoption("--full-sweep", action="store_true",
                     help="also run the exhaustive single-byte sweep (about half a million "
                          "inputs; tests marked full_sweep are deselected otherwise)")
    parser.addoption("--zoo", action="store_true",
                     help="also check the zoo of real architectures against torch (needs "
                          "torch, torchvision and timm; tests marked zoo are deselected "
                          "otherwise)")


def pytest_collection_modifyitems(config: Any, items: List[Any]) -> None:
    skipped = [m for m, option in OPT_IN.items() if not config.getoption(option)]
    deselected = [item for item in items
                  if any(item.get_closest_marker(m) for m in skipped)]
    if deselected:
        config.hook.pytest_deselected(items=deselected)
        gone = set(map(id, deselected))
        items[:] = [item for item in items if id(item) not in gone]


def model_path(name: str) -> str:
    """Path of a model file by file name (``sample.ptl`` is the packaged sample)."""
    return SAMPLE if name == "sample.ptl" else os.path.join(DATA, name)


def _stem(name: str) -> str:
    return "sample" if name == "sample.ptl" else os.path.splitext(name)[0]


def load_expectation(name: str, kind: str) -> Tuple[Dict[str, Any], Dict[str, np.ndarray]]:
    """(json, arrays) of ``<stem>.<kind>.json/.npz``; kind is "oracle" or "inputs"."""
    base = os.path.join(DATA, f"{_stem(name)}.{kind}")
    with open(base + ".json", encoding="utf-8") as f:
        doc = json.load(f)
    arrays: Dict[str, np.ndarray] = {}
    if os.path.exists(base + ".npz"):
        with np.load(base + ".npz") as z:
            arrays = {k: z[k] for k in z.files}
    return doc, arrays


def _hex_float(text: str) -> float:
    return float.fromhex(text) if text not in ("nan", "inf", "-inf") else float(text)


def same_float(expected: float, actual: float) -> bool:
    """Bit-level float equality (nan equals nan, -0.0 differs from 0.0)."""
    if math.isnan(expected):
        return math.isnan(actual)
    return expected == actual and math.copysign(1, expected) == math.copysign(1, actual)


def assert_tensor(desc: Dict[str, Any], arrays: Dict[str, np.ndarray], actual: Any,
                  where: str) -> None:
    """``actual`` (ndarray or QuantizedTensor) holds exactly the tensor torch described."""
    st = DTYPE_NAMES.index(desc["dtype"])
    if "qscheme" in desc:
        assert isinstance(actual, pfm.QuantizedTensor), where
        assert desc["qscheme"] == actual.qscheme, where
        assert desc["dtype"] == actual.dtype_name, where
        assert list(desc["shape"]) == list(actual.shape), where
        expected = arrays[desc["int_repr"]].tobytes()
        assert expected == np.ascontiguousarray(actual.int_repr).tobytes(), where
        if "scale" in desc:
            assert same_float(_hex_float(desc["scale"]) if isinstance(desc["scale"], str)
                              else desc["scale"], actual.scale), where
            assert desc["zero_point"] == actual.zero_point, where
        else:
            assert desc["axis"] == actual.axis, where
            exp_scales = [_hex_float(x) if isinstance(x, str) else x for x in desc["scales"]]
            exp_zps = [_hex_float(x) if isinstance(x, str) else x for x in desc["zero_points"]]
            assert exp_scales == [float(x) for x in actual.scales], where
            assert exp_zps == [float(x) for x in actual.zero_points], where
        return
    assert isinstance(actual, np.ndarray), where
    assert numpy_dtype(st) == actual.dtype, where
    assert list(desc["shape"]) == list(actual.shape), where
    assert [s * actual.itemsize for s in desc["stride"]] == list(actual.strides), where
    assert arrays[desc["data"]].tobytes() == np.ascontiguousarray(actual).tobytes(), where
    assert not actual.flags.writeable, where


def assert_value(expected: Dict[str, Any], arrays: Dict[str, np.ndarray], actual: Any,
                 where: str = "value") -> None:
    """``actual`` equals the tagged VALUE torch reported, with exact Python types."""
    t = expected["t"]
    if t == "none":
        assert actual is None, where
    elif t == "bool":
        assert type(actual) is bool and expected["v"] == actual, where
    elif t == "int":
        assert type(actual) is int and expected["v"] == actual, where
    elif t == "float":
        assert type(actual) is float and same_float(_hex_float(expected["v"]), actual), where
    elif t == "complex":
        assert type(actual) is complex, where
        assert same_float(_hex_float(expected["re"]), actual.real), where
        assert same_float(_hex_float(expected["im"]), actual.imag), where
    elif t == "str":
        assert type(actual) is str and expected["v"] == actual, where
    elif t == "device":
        assert isinstance(actual, pfm.Device) and expected["v"] == str(actual), where
    elif t in ("list", "tuple"):
        assert type(actual) is (list if t == "list" else tuple), where
        assert len(expected["v"]) == len(actual), where
        for k, (e, a) in enumerate(zip(expected["v"], actual)):
            assert_value(e, arrays, a, f"{where}[{k}]")
    elif t == "dict":
        assert type(actual) is dict, where
        assert len(expected["v"]) == len(actual), where
        for (ek, ev), (ak, av) in zip(expected["v"], actual.items()):
            if ek["t"] == "tensor":     # a Dict[Tensor, V]: keyed by the tensor's wrapper
                assert isinstance(ak, pfm.TensorKey), where
                ak = ak.value
            assert_value(ek, arrays, ak, f"{where}.key")
            assert_value(ev, arrays, av, f"{where}[{ak!r}]")
    elif t == "tensor":
        assert_tensor(expected["v"], arrays, actual, where)
    elif t == "object":
        assert isinstance(actual, pfm.Object), where
        assert expected["type"] == actual.type_name, where
        if "attrs" in expected:
            assert list(expected["attrs"]) == list(actual.attributes), where
            for name, e in expected["attrs"].items():
                assert_value(e, arrays, actual.attributes[name], f"{where}.{name}")
    elif t == "other":
        pass  # torch could only repr() it (e.g. packed params): nothing exact to compare
    else:
        raise AssertionError(f"unknown tag {t!r} at {where}")


def assert_state_dict(expected: Dict[str, Any], arrays: Dict[str, np.ndarray],
                      actual: Dict[str, Any]) -> None:
    """Same keys in the same order, each tensor identical."""
    assert expected["keys"] == list(actual), "state_dict keys"
    for key in expected["keys"]:
        assert_tensor(expected["tensors"][key], arrays, actual[key], f"state_dict[{key}]")


def assert_info(expected: Dict[str, Any], actual: Dict[str, Any]) -> None:
    """``Module.info()`` equals torch's get_flatbuffer_module_info (lists as sets)."""
    assert expected["bytecode_version"] == actual["bytecode_version"]
    assert expected["operator_version"] == actual["operator_version"]
    assert set(expected["function_names"]) == actual["function_names"]
    assert set(expected["type_names"]) == actual["type_names"]
    assert expected["opname_to_num_args"] == actual["opname_to_num_args"]


def decoded_extra_files(doc: Dict[str, Any]) -> Dict[str, bytes]:
    """The extra files a json document lists, base64-decoded."""
    return {k: base64.b64decode(v) for k, v in doc.items()}


@pytest.fixture(params=MODEL_FILES + ["sample.ptl"])
def model_name(request: Any) -> str:
    """Every real model file the tests hold."""
    return request.param
