"""Every real file in tests/data against what torch 2.13 read from it (stored oracle)."""
from __future__ import annotations

import numpy as np
import pytest

import pyflatmodule as pfm
from conftest import (assert_info, assert_state_dict, assert_value, decoded_extra_files,
                      load_expectation, model_path)


def _part(doc, name):
    part = doc.get(name)
    if part is None or "error" in part:
        pytest.skip(f"torch itself could not produce {name!r} for this file")
    return part


def test_loads_and_verifies(model_name):
    report = pfm.verify(model_path(model_name))
    with open(model_path(model_name), "rb") as f:
        data = f.read()
    assert len(data) == report.size
    assert b"PTMF" == data[4:8]


def test_info_matches_torch(model_name):
    doc, _ = load_expectation(model_name, "oracle")
    with pfm.load(model_path(model_name)) as m:
        assert_info(_part(doc, "info"), m.info())


def test_state_dict_matches_torch(model_name):
    doc, arrays = load_expectation(model_name, "oracle")
    with pfm.load(model_path(model_name)) as m:
        assert_state_dict(_part(doc, "state_dict"), arrays, m.state_dict())


@pytest.mark.parametrize("source", ["path", "bytearray"])
def test_state_dict_again_is_a_new_dict_of_the_same_arrays(model_name, source):
    """Later calls give the caller a dict of their own, with the same entries (the
    entries themselves are compared with torch's in test_state_dict_matches_torch)."""
    path = model_path(model_name)
    with open(path, "rb") as f:
        data = bytearray(f.read())
    with pfm.load(path if source == "path" else data) as m:
        first = m.state_dict()
        entries = list(first.items())
        first.clear()                    # the caller's dict is the caller's
        again = m.state_dict()
        assert [k for k, _ in entries] == list(again)
        assert all(again[k] is v for k, v in entries)
        assert m.state_dict() is not again


def test_attributes_match_torch(model_name):
    doc, arrays = load_expectation(model_name, "oracle")
    with pfm.load(model_path(model_name)) as m:
        assert_value(_part(doc, "attributes"), arrays, m.root, "root")


def _address(a: np.ndarray) -> int:
    return int(a.__array_interface__["data"][0])


@pytest.mark.parametrize("spaced_min", [2, 1 << 30], ids=["strided_rows", "slices"])
def test_tensors_made_in_bulk(model_name, spaced_min, monkeypatch):
    """Tensors made in bulk (slices per dtype and rank, or evenly spaced same-shape
    groups as the rows of one strided view: forced down to pairs here, so every file
    takes that path where its layout allows) are the views the one-record path makes,
    and the state_dict made of them is torch's."""
    from pyflatmodule import _image
    monkeypatch.setattr(_image, "_SPACED_MIN", spaced_min)
    path = model_path(model_name)
    with pfm.load(path) as m, pfm.load(path) as ref:
        images = (m._img(), ref._img())
        n = len(images[0].tensor_index)
        bulk = images[0].tensors(range(n))
        starts = [np.frombuffer(image.view, np.uint8).ctypes.data for image in images]
        for t, a in enumerate(bulk):
            b = images[1].tensor(t)
            if not isinstance(a, np.ndarray):
                assert type(a) is type(b)
                continue
            assert (a.dtype, a.shape, a.strides, a.flags.writeable) == (
                b.dtype, b.shape, b.strides, False), f"tensor record {t}"
            assert a.size == 0 or _address(a) - starts[0] == _address(b) - starts[1]
        doc, arrays = load_expectation(model_name, "oracle")
        assert_state_dict(_part(doc, "state_dict"), arrays, m.state_dict())


@pytest.mark.parametrize("parity", [0, 1])
def test_state_dict_with_modules_walked_in_python(model_name, parity, monkeypatch):
    """Every other declared field-object module handed to the Python side of the walk
    (as set-state modules are), whose field submodules go back to the C walk under
    their prefix: the same state_dict, torch's."""
    from pyflatmodule import module as walk
    init = walk._ModuleWalk.__init__

    def every_other_in_python(self, image, decls):
        init(self, image, decls)
        for t, kind in enumerate(self.module):
            if kind == 1 and t % 2 == parity:
                self.module[t] = self._keep["module"][t] = 2

    with pfm.load(model_path(model_name)) as m:
        expected = m.state_dict()
    monkeypatch.setattr(walk._ModuleWalk, "__init__", every_other_in_python)
    with pfm.load(model_path(model_name)) as m:
        sd = m.state_dict()
        assert list(sd) == list(expected)
        assert all((sd[k].dtype, sd[k].shape, sd[k].tobytes())
                   == (expected[k].dtype, expected[k].shape, expected[k].tobytes())
                   for k in sd if isinstance(sd[k], np.ndarray))
        doc, arrays = load_expectation(model_name, "oracle")
        assert_state_dict(_part(doc, "state_dict"), arrays, sd)


def test_extra_files_are_what_was_written(model_name):
    doc, _ = load_expectation(model_name, "inputs")
    with pfm.load(model_path(model_name)) as m:
        assert decoded_extra_files(doc.get("extra_files", {})) == m.extra_files


def test_mobile_view_matches_torch(model_name):
    """Torch's mobile loader: method names, operators, extra files it could read."""
    doc, _ = load_expectation(model_name, "oracle")
    mobile = _part(doc, "mobile")
    with pfm.load(model_path(model_name)) as m:
        if "method_names" in mobile:
            assert set(mobile["method_names"]) <= set(m.info()["function_names"])
        if "operator_list" in mobile:
            assert set(mobile["operator_list"]) == {
                op.full_name for f in m.functions()
                if f.name in m.info()["function_names"] for op in f.operators}
        if "extra_files" in mobile:
            assert decoded_extra_files(mobile["extra_files"]) == m.extra_files


def test_methods_are_the_exported_ones(model_name):
    doc, _ = load_expectation(model_name, "inputs")
    if "methods" not in doc:
        pytest.skip("the generator recorded no method list for this file")
    with pfm.load(model_path(model_name)) as m:
        short = {name.rsplit(".", 1)[1] for name in m.methods}
        assert set(doc["methods"]) <= short


def test_mobile_only_file_state_dict_is_the_generators_weights():
    """No jit_sources: every tensor reachable through field objects, by attribute path."""
    doc, arrays = load_expectation("mlp_mobile.ff", "inputs")
    expected = doc["values"]["state_dict"]
    with pfm.load(model_path("mlp_mobile.ff")) as m:
        sd = m.state_dict()
    assert [k["v"] for k, _ in expected["v"]] == list(sd)
    for key, value in expected["v"]:
        assert_value(value, arrays, sd[key["v"]], key["v"])


def test_saved_parameters_match_torchs_reader():
    doc, arrays = load_expectation("mlp_params.ff", "oracle")
    expected = _part(doc, "parameters_file")
    with pfm.load(model_path("mlp_params.ff")) as m:
        sd = m.state_dict()
    assert sorted(expected["keys"]) == sorted(sd)
    from conftest import assert_tensor
    for key in expected["keys"]:
        assert_tensor(expected["tensors"][key], arrays, sd[key], key)


def test_every_ivalue_and_function_decodes(model_name):
    with pfm.load(model_path(model_name)) as m:
        for i in range(len(m.ivalues)):
            m.ivalues[i]
        for f in m.functions():
            assert len(f.debug_handles) in (0, len(f.instructions))
            assert f.name in f.disassemble()
            assert len(f.constants) == len(f._constant_indices())
            assert f.schema is None or isinstance(f.schema, pfm.Schema)


def test_views_share_one_storage():
    with pfm.load(model_path("layouts.ff")) as m:
        sd = {**m.state_dict()}
        root = m.root
        base, row1, col2 = root.base, root.row1, root.col2
    assert np.shares_memory(base, row1)
    assert np.shares_memory(base, col2)
    assert any(np.shares_memory(s, base) for s in m.storages) if not m.closed else True
    assert sd  # layouts has parameters and buffers


def test_enum_constants_are_the_members_written():
    """Torch cannot load this file; the generator recorded the enum it scripted."""
    doc, _ = load_expectation("enum_constant.ff", "inputs")
    members = set(doc["enum"]["members"].values())
    with pfm.load(model_path("enum_constant.ff")) as m:
        enums = [v for f in m.functions() for v in f.constants
                 if isinstance(v, pfm.EnumValue)]
    assert enums
    for e in enums:
        assert doc["enum"]["qualified_name"] == e.type_name
        assert type(e.value) is int and e.value in members


def test_dequantize_follows_torchs_parameters():
    """(q - zero_point) * scale, per channel along axis, from torch's int_repr and
    quantization parameters."""
    doc, arrays = load_expectation("quantized.ff", "oracle")
    with pfm.load(model_path("quantized.ff")) as m:
        sd = m.state_dict()
    for key, desc in doc["state_dict"]["tensors"].items():
        q = sd[key]
        if desc["dtype"] in ("quint4x2", "quint2x4"):
            # torch's int_repr() is the packed bytes, low bits first (format.md)
            bits = 4 if desc["dtype"] == "quint4x2" else 2
            packed = arrays[desc["int_repr"]]
            unpacked = np.stack([(packed >> (k * bits)) & ((1 << bits) - 1)
                                 for k in range(8 // bits)], axis=1).reshape(-1)
            values = unpacked[:int(np.prod(desc["shape"]))].reshape(desc["shape"])
            assert values.tolist() == q.values().tolist()
        else:
            values = np.frombuffer(arrays[desc["int_repr"]].tobytes(),
                                   np.dtype(desc["int_repr_dtype"])).reshape(desc["shape"])
            assert values.tolist() == q.values().tolist()
        if "scale" in desc:
            scale = np.float32(float.fromhex(desc["scale"]))
            expected = (values.astype(np.float32) - np.float32(desc["zero_point"])) * scale
        else:
            shape = [1] * values.ndim
            shape[desc["axis"]] = -1
            scales = np.array([float.fromhex(x) if isinstance(x, str) else x
                               for x in desc["scales"]], np.float32).reshape(shape)
            zps = np.array([float.fromhex(x) if isinstance(x, str) else x
                            for x in desc["zero_points"]], np.float32).reshape(shape)
            expected = (values.astype(np.float32) - zps) * scales
        np.testing.assert_allclose(q.dequantize(), expected, rtol=1e-6, err_msg=key)
