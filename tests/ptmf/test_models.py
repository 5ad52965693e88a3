"""Every real file in tests/data against what torch 2.13 read from it (stored oracle)."""
from __future__ import annotations

import json
import math
import struct

import numpy as np
import pytest

import pyflatmodule as pfm
from pyflatmodule.ptmf.index import DOUBLE_LIST, INT_LIST

from support import (
    HAS_TORCH,
    MODEL_FILES,
    assert_info,
    assert_state_dict,
    assert_tensor,
    assert_value,
    decoded_extra_files,
    load_expectation,
    model_path,
)
from support.decode_all import full_decode


@pytest.fixture(params=MODEL_FILES + ["sample.ptl"])
def model_name(request):
    """Every real model file the tests hold."""
    return str(request.param)

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
    from pyflatmodule.ptmf import tensors
    monkeypatch.setattr(tensors, "_SPACED_MIN", spaced_min)
    path = model_path(model_name)
    with pfm.load(path) as m, pfm.load(path) as ref:
        images = (m._img(), ref._img())
        n = len(images[0].tensor_index)
        bulk = m._decoder().tensors.tensors(range(n))
        starts = [np.frombuffer(image.view, np.uint8).ctypes.data for image in images]
        for t, a in enumerate(bulk):
            b = ref._decoder().tensors.tensor(t)
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
    from pyflatmodule.ptmf import state_dict as walk
    init = walk._ModuleWalk.__init__

    def every_other_in_python(self, file):
        init(self, file)
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


# ------------------------------------------------------- alignment: FlatBuffers' rule

#: Files in which torch wrote empty int64/double vectors at 4 mod 8: empty
#: List[float]/List[int] attributes, a re-saved mobile module's empty debug handles,
#: the empty DoubleList of a dynamically quantized 2-layer LSTM.
UNALIGNED_EMPTY = ["empty_vectors.ff", "empty_vectors_mobile.ff", "lstm_dynamic_quant.ff"]


def _empty_vectors_at_4_mod_8(m: pfm.Module, data: bytes) -> int:
    """How many empty IntList/DoubleList items or debug-handle vectors start at 4 mod 8
    (each one's stored length, just before it, read from the bytes: 0)."""
    index = m._img().index
    empty_lists = np.isin(index["type"], [INT_LIST, DOUBLE_LIST]) & (index["length"] == 0)
    starts = index["data"][empty_lists].tolist()
    starts += [f._f.debug_handles for f in m.functions()
               if f._f.n_debug_handles == 0 and f._f.debug_handles]
    return sum(1 for a in starts
               if a % 8 == 4 and struct.unpack_from("<I", data, a - 4)[0] == 0)


@pytest.mark.parametrize("strict", [False, True], ids=["default", "strict"])
@pytest.mark.parametrize("name", UNALIGNED_EMPTY)
def test_empty_vectors_torch_left_unaligned_load(name, strict):
    """FlatBuffers' verifier (torch's) checks a vector's length field alone, and its
    builder pads before non-empty vectors only: these files are valid in every mode."""
    path = model_path(name)
    with open(path, "rb") as f:
        data = f.read()
    with pfm.load(path, strict=strict) as m:
        assert _empty_vectors_at_4_mod_8(m, data) >= 1
        full_decode(m)
    pfm.verify(path, strict=strict)


@pytest.mark.parametrize("name", UNALIGNED_EMPTY)
def test_every_cli_command_reads_files_with_unaligned_empty_vectors(name, tmp_path, capsys):
    from pyflatmodule import cli
    path = model_path(name)
    commands = [["info", path], ["verify", path], ["verify", "--strict", path],
                ["tree", path], ["dis", path, "--all"], ["ops", path],
                ["export", path, str(tmp_path / "out.npz")]]
    for argv in commands:
        assert 0 == cli.main(argv), (argv, capsys.readouterr().err)


def test_empty_list_attributes_are_torchs():
    doc, _ = load_expectation("empty_vectors.ff", "oracle")
    attrs = _part(doc, "attributes")["attrs"]
    with pfm.load(model_path("empty_vectors.ff")) as m:
        for name in ("floats", "ints"):
            assert {"t": "list", "v": []} == attrs[name]
            assert [] == getattr(m.root, name)


def _unaligned_lists(pad: int) -> bytes:
    """A crafted file whose IntList, DoubleList and debug handles hold 3 items each,
    written 4-aligned only; ``pad`` (a string's length) shifts where they land."""
    import support.ptmf_craft as c
    m = c.mutated()
    m["ivalues"] = m["ivalues"] + [
        c.IntList(c.Raw(struct.pack("<3q", -2**63, 7, 2**63 - 1), 3, align=4)),
        c.DoubleList(c.Raw(struct.pack("<3d", 1.5, -0.0, float("inf")), 3, align=4)),
        c.Str("x" * pad)]
    return c.build(m)


def test_non_empty_unaligned_vectors_read_exactly():
    """Never written by torch, but valid by FlatBuffers' verifier: the values come from
    the bytes at whatever alignment (strict mode holds them to the builder's)."""
    for pad in range(8):
        data = _unaligned_lists(pad)
        with pfm.load(data) as m:
            n = len(m.ivalues)
            a = int(m._img().index["data"][n - 3])
            if a % 8 == 4 and int(m._img().index["data"][n - 2]) % 8 == 4:
                break
    else:
        pytest.fail("no padding put both lists at 4 mod 8")
    with pfm.load(data) as m:
        assert [-2**63, 7, 2**63 - 1] == m.ivalues[n - 3]
        values = m.ivalues[n - 2]
        assert [1.5, -0.0, float("inf")] == values and math.copysign(1, values[1]) == -1
    with pytest.raises(pfm.FormatError) as info:
        pfm.load(data, strict=True)
    assert "misaligned" == info.value.code
    assert info.value.path.startswith(f"ivalues[{n - 3}].val<IntList>.items")


# ------------------------------------------------------------- strides: the file's

def _tensor_descs(value, actual, where):
    """(where, torch's TENSOR description, pyflatmodule's value) for every tensor in a
    VALUE tree of the oracle, paired with the decoded value."""
    t = value["t"]
    if t == "tensor":
        yield where, value["v"], actual
    elif t == "object" and "attrs" in value:
        for name, v in value["attrs"].items():
            yield from _tensor_descs(v, actual.attributes[name], f"{where}.{name}")
    elif t in ("list", "tuple"):
        for k, (v, a) in enumerate(zip(value["v"], actual)):
            yield from _tensor_descs(v, a, f"{where}[{k}]")
    elif t == "dict":
        for (_, v), a in zip(value["v"], actual.values()):
            yield from _tensor_descs(v, a, f"{where}[]")


def _assert_torch_strides(desc, actual, where):
    array = actual.int_repr if isinstance(actual, pfm.QuantizedTensor) else actual
    if desc["dtype"] in ("quint4x2", "quint2x4"):
        return          # int_repr is the packed bytes (torch's int_repr() too)
    assert desc["stride"] == [s // array.itemsize for s in array.strides], where
    assert all(s % array.itemsize == 0 for s in array.strides), where
    assert list(desc["shape"]) == list(array.shape), where


@pytest.mark.parametrize("spaced_min", [2, 1 << 30], ids=["strided_rows", "slices"])
@pytest.mark.parametrize("bulk", [True, False], ids=["bulk", "one_by_one"])
def test_strides_are_torchs(model_name, bulk, spaced_min, monkeypatch):
    """Every tensor carries exactly the strides torch reports (size-1 and size-0
    dimensions included), in bytes, made in bulk or one record at a time."""
    from pyflatmodule.ptmf import tensors
    monkeypatch.setattr(tensors, "_SPACED_MIN", spaced_min)
    doc, _ = load_expectation(model_name, "oracle")
    with pfm.load(model_path(model_name)) as m:
        table = m._decoder().tensors
        n = len(m._img().tensor_index)
        if bulk:
            table.tensors(range(n))
        else:
            for t in range(n):
                table.tensor(t)
        checked = 0
        if "error" not in doc.get("state_dict", {"error": ""}):
            sd = m.state_dict()
            for key, desc in doc["state_dict"]["tensors"].items():
                _assert_torch_strides(desc, sd[key], f"state_dict[{key}]")
                checked += 1
        if "error" not in doc.get("attributes", {"error": ""}):
            for where, desc, actual in _tensor_descs(doc["attributes"], m.root, "root"):
                _assert_torch_strides(desc, actual, where)
                checked += 1
    if n and not checked:
        pytest.skip("torch could read no tensor of this file")


def test_strides_file_covers_the_layouts_numpy_would_not_derive():
    doc, _ = load_expectation("strides.ff", "oracle")
    tensors = _part(doc, "state_dict")["tensors"]
    assert [8, 1, 8, 8] == tensors["pointwise.weight"]["stride"]     # channels-last 1x1
    assert [4, 7, 1] == tensors["odd_size1"]["stride"]
    assert 0 in tensors["empty_3d"]["shape"] and 0 in tensors["empty_param"]["shape"]
    with pfm.load(model_path("strides.ff")) as m:
        weight = m.state_dict()["pointwise.weight"]
        assert (8 * 4, 4, 8 * 4, 8 * 4) == weight.strides
        assert not weight.flags.writeable


def test_tree_json_strides_are_torchs(capsys):
    from pyflatmodule import cli
    doc, _ = load_expectation("strides.ff", "oracle")
    tensors = _part(doc, "state_dict")["tensors"]
    assert 0 == cli.main(["tree", "--json", model_path("strides.ff")])
    found = []

    def walk(node):
        if isinstance(node, dict):
            if "strides" in node and "shape" in node:
                found.append((tuple(node["shape"]), tuple(node["strides"])))
            for v in node.values():
                walk(v)
        elif isinstance(node, list):
            for v in node:
                walk(v)

    walk(json.loads(capsys.readouterr().out))
    assert sorted((tuple(d["shape"]), tuple(d["stride"])) for d in tensors.values()) == \
        sorted(found)


@pytest.mark.torch
@pytest.mark.skipif(not HAS_TORCH, reason="torch is not installed")
def test_to_torch_gives_torchs_strides():
    from pyflatmodule.interop import to_torch
    doc, _ = load_expectation("strides.ff", "oracle")
    tensors = _part(doc, "state_dict")["tensors"]
    with pfm.load(model_path("strides.ff")) as m:
        sd = m.state_dict()
        for key, desc in tensors.items():
            t = to_torch(sd[key])
            assert (desc["shape"], desc["stride"]) == (list(t.shape), list(t.stride())), key


def test_export_writes_torchs_bytes_for_every_layout(tmp_path, capsys):
    """Channels-last, empty and odd-strided tensors export as torch's contiguous bytes."""
    from pyflatmodule import cli
    doc, arrays = load_expectation("strides.ff", "oracle")
    tensors = _part(doc, "state_dict")["tensors"]
    out = str(tmp_path / "strides.npz")
    assert 0 == cli.main(["export", model_path("strides.ff"), out]), capsys.readouterr().err
    with np.load(out) as z:
        for key, desc in tensors.items():
            assert (desc["shape"], arrays[desc["data"]].tobytes()) == (
                list(z[key].shape), z[key].tobytes()), key


def test_empty_tensors_of_every_dtype_carry_the_files_strides():
    """Crafted: an empty (2, 0, 3) view with strides (7, 5, 1) of every unquantized
    scalar type, the numpy-less ones (bfloat16, float8, complex32) included."""
    from pyflatmodule.core.dtypes import DTYPE_NAMES, numpy_dtype

    import support.ptmf_craft as c
    types = [st for st in range(len(DTYPE_NAMES)) if st not in (12, 13, 14, 16, 17)]
    m = c.mutated()
    n = len(m["ivalues"])
    m["ivalues"] = m["ivalues"] + [c.Tensor([2, 0, 3], [7, 5, 1], scalar_type=st,
                                            storage_offset=99) for st in types]
    with pfm.load(c.build(m)) as module:
        for k, st in enumerate(types):
            a = module.ivalues[n + k]
            size = numpy_dtype(st).itemsize
            assert ((2, 0, 3), (7 * size, 5 * size, size), False) == (
                a.shape, a.strides, a.flags.writeable), DTYPE_NAMES[st]


# ------------------------------------------------------------- tensor dict keys

def test_tensor_dict_keys_load_as_torch_wrote_them():
    """torch writes a Dict[Tensor, int] attribute (valid TorchScript) and both its
    loaders load the file: so does load with default options, each key a TensorKey
    holding the tensor torch read (bytes, shape, dtype), one by one and in bulk."""
    doc, arrays = load_expectation("tensor_keys.ff", "oracle")
    assert doc["mobile"]["loaded"] is True            # torch's lite loader
    expected = _part(doc, "attributes")["attrs"]["d"]  # torch's jit loader
    assert [k["t"] for k, _ in expected["v"]] == ["tensor", "tensor"]
    with pfm.load(model_path("tensor_keys.ff")) as m:
        bulk = [v for v in m.ivalues if isinstance(v, dict) and v]
        for d in [m.root.d] + bulk:
            assert len(expected["v"]) == len(d)
            for (key, value), (actual_key, actual_value) in zip(expected["v"], d.items()):
                assert isinstance(actual_key, pfm.TensorKey)
                tensor = actual_key.value
                assert key["v"]["dtype"] == tensor.dtype.name
                assert key["v"]["shape"] == list(tensor.shape)
                assert arrays[key["v"]["data"]].tobytes() == tensor.tobytes()
                assert value["v"] == actual_value
                assert d[actual_key] == actual_value
        assert len(bulk) == 1
        assert_value(expected, arrays, m.root.d)
