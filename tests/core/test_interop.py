"""Handing tensors to torch: ``pyflatmodule.interop`` (torch in-process, on arrays only).

Torch never opens a model file here (its loaders crash on some): expected values are
the stored oracles, what torch 2.13 read from each file.
"""
from __future__ import annotations

import gc
import subprocess
import sys
import warnings

import numpy as np
import pytest

import pyflatmodule as pfm

from support import HAS_TORCH, hex_float, load_expectation, model_path, same_float

pytestmark = [pytest.mark.torch,
              pytest.mark.skipif(not HAS_TORCH, reason="torch is not installed")]

if HAS_TORCH:
    import torch

    from pyflatmodule.interop import state_dict_to_torch, to_torch


def _raw(t: "torch.Tensor") -> bytes:
    """A plain tensor's bytes in row-major order."""
    return t.contiguous().reshape(-1).view(torch.uint8).numpy().tobytes()


def _address(a: np.ndarray) -> int:
    return a.__array_interface__["data"][0]


def _quiet_deprecations():
    # torch 2.13 warns that its quantized dtypes are deprecated
    return warnings.catch_warnings()


@pytest.mark.parametrize("name", ["dtypes.ff", "layouts.ff", "mlp_jit.ff", "sample.ptl"])
def test_plain_tensors_share_memory_with_exact_dtype_shape_strides(name):
    doc, arrays = load_expectation(name, "oracle")
    with pfm.load(model_path(name)) as m:
        state = m.state_dict()
    assert doc["state_dict"]["keys"] == list(state)
    for key, desc in doc["state_dict"]["tensors"].items():
        array = state[key]
        expected_dtype = getattr(torch, desc["dtype"])
        natural = to_torch(array)
        t = natural if natural.dtype == expected_dtype else to_torch(array, desc["dtype"])
        assert expected_dtype == t.dtype, key
        assert desc["shape"] == list(t.shape), key
        assert arrays[desc["data"]].tobytes() == _raw(t), key
        if array.size:
            assert _address(array) == t.data_ptr(), key            # zero-copy
            assert [s // array.itemsize for s in array.strides] == list(t.stride()), key


def test_torch_from_numpy_shares_the_files_memory():
    with pfm.load(model_path("layouts.ff")) as m:
        state = m.state_dict()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)      # "not writable", documented
        base = torch.from_numpy(state["base"])
        col = torch.from_numpy(state["col2"])
    assert base.data_ptr() == _address(state["base"])
    # views of one storage stay views of one memory block in torch
    assert base.data_ptr() <= col.data_ptr() < base.data_ptr() + base.numel() * 4
    assert torch.equal(base[:, 2], col)


def test_no_warning_for_read_only_arrays():
    """In a fresh process (torch warns once per process): nothing is printed or raised."""
    code = (
        "import warnings, numpy as np\n"
        "warnings.simplefilter('error')\n"
        "import pyflatmodule as pfm\n"
        "from pyflatmodule.interop import to_torch\n"
        f"m = pfm.load({model_path('mlp_jit.ff')!r})\n"
        "t = to_torch(m.state_dict()['0.weight'])\n"
        "print(float(t.sum()))\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       timeout=300)
    assert 0 == r.returncode, r.stderr
    assert "" == r.stderr


def test_tensor_keeps_the_mapping_alive():
    m = pfm.load(model_path("mlp_jit.ff"))
    t = to_torch(m.state_dict()["0.weight"])
    expected = t.clone()
    m.close()
    del m
    gc.collect()
    assert torch.equal(expected, t)


@pytest.mark.parametrize("name", ["quantized.ff"])
def test_quantized_tensors_convert_with_equal_int_repr_scales_zero_points(name):
    doc, arrays = load_expectation(name, "oracle")
    with pfm.load(model_path(name)) as m:
        state = m.state_dict()
    with _quiet_deprecations():
        warnings.simplefilter("ignore", UserWarning)
        converted = {k: to_torch(v) for k, v in state.items()}
    for key, desc in doc["state_dict"]["tensors"].items():
        t = converted[key]
        assert t.is_quantized, key
        assert getattr(torch, desc["dtype"]) == t.dtype, key
        assert desc["qscheme"] == str(t.qscheme()).split(".")[-1], key
        assert desc["shape"] == list(t.shape), key
        assert arrays[desc["int_repr"]].tobytes() == t.int_repr().contiguous().numpy().tobytes()
        if "scale" in desc:
            assert same_float(hex_float(desc["scale"]), t.q_scale()), key
            assert desc["zero_point"] == t.q_zero_point(), key
        else:
            assert desc["axis"] == t.q_per_channel_axis(), key
            assert [hex_float(x) for x in desc["scales"]] == t.q_per_channel_scales().tolist()
            assert [hex_float(x) for x in desc["zero_points"]] == \
                [float(x) for x in t.q_per_channel_zero_points().tolist()]


def test_quantized_weight_inside_packed_params():
    doc, arrays = load_expectation("dynamic_quant_linear.ff", "oracle")
    with pfm.load(model_path("dynamic_quant_linear.ff")) as m:
        packed = m.root.attributes["0"]._packed_params._packed_params
        weight, bias = packed.state
    with _quiet_deprecations():
        warnings.simplefilter("ignore", UserWarning)
        t = to_torch(weight)
    # torch's __getstate__ of the live object: ((weight, bias), ...)
    state = doc["attributes"]["attrs"]["0"]["attrs"]["_packed_params"]["attrs"][
        "_packed_params"]["state"]["v"][0]["v"]
    w, b = state[0]["v"], state[1]["v"]
    assert torch.qint8 == t.dtype and w["shape"] == list(t.shape)
    assert arrays[w["int_repr"]].tobytes() == t.int_repr().numpy().tobytes()
    assert same_float(hex_float(w["scale"]), t.q_scale())
    assert w["zero_point"] == t.q_zero_point()
    assert arrays[b["data"]].tobytes() == _raw(to_torch(bias))


def test_state_dict_loads_into_a_torch_module():
    doc, arrays = load_expectation("mlp_jit.ff", "oracle")
    shapes = {k: t["shape"] for k, t in doc["state_dict"]["tensors"].items()}
    net = torch.nn.Sequential(torch.nn.Linear(shapes["0.weight"][1], shapes["0.weight"][0]),
                              torch.nn.ReLU(),
                              torch.nn.Linear(shapes["2.weight"][1], shapes["2.weight"][0]))
    with pfm.load(model_path("mlp_jit.ff")) as m:
        net.load_state_dict(state_dict_to_torch(m.state_dict()))
    for key, t in net.state_dict().items():
        assert arrays[doc["state_dict"]["tensors"][key]["data"]].tobytes() == _raw(t)
    net(torch.zeros(1, shapes["0.weight"][1])).sum().backward()    # writable copies


def test_bad_arguments():
    with pfm.load(model_path("dtypes.ff")) as m:
        state = m.state_dict()
    with pytest.raises(ValueError):
        to_torch(state["f32"], "float16")                  # element size differs
    with pytest.raises(ValueError):
        to_torch(state["u8"], "no_such_dtype")
    with pytest.raises(TypeError):
        to_torch([1, 2, 3])                                # type: ignore[arg-type]
    assert torch.bits8 == to_torch(state["bits8"], torch.bits8).dtype
