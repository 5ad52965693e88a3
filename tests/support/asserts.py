"""Assertions that pyflatmodule's answers equal what torch reported (tests/support/torch_oracle.py's
tagged documents): exact types, bit-level floats, every stride."""
from __future__ import annotations

import math
from typing import Any, Dict, Union

import numpy as np

import pyflatmodule as pfm
from pyflatmodule.core.dtypes import DTYPE_NAMES, numpy_dtype


def hex_float(value: Union[str, float, int]) -> float:
    """A float as the oracle stores it: ``float.hex()`` text ("nan", "inf" and "-inf"
    spelled out), or a plain JSON number."""
    if not isinstance(value, str):
        return float(value)
    return float(value) if value in ("nan", "inf", "-inf") else float.fromhex(value)


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
            assert same_float(hex_float(desc["scale"]), actual.scale), where
            assert desc["zero_point"] == actual.zero_point, where
        else:
            assert desc["axis"] == actual.axis, where
            assert [hex_float(x) for x in desc["scales"]] == \
                [float(x) for x in actual.scales], where
            assert [hex_float(x) for x in desc["zero_points"]] == \
                [float(x) for x in actual.zero_points], where
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
        assert type(actual) is float and same_float(hex_float(expected["v"]), actual), where
    elif t == "complex":
        assert type(actual) is complex, where
        assert same_float(hex_float(expected["re"]), actual.real), where
        assert same_float(hex_float(expected["im"]), actual.imag), where
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
