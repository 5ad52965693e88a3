"""XNNPACK delegate payloads read through Delegate.graph, checked against ExecuTorch.

The programs in tests/data/et/xnn_*.pte were lowered to XNNPACK by ExecuTorch 1.5.1
(tests/data/make_et_data.py); beside each, its oracle holds ExecuTorch's own reading of
every payload (its header reader, and its flatc's decoding of the flatbuffer with
ExecuTorch's schema.fbs) and the exported module's weights (for the quantized programs,
the converted module's: the int8 weights torch made and their scales). Each delegate
constant is one of those weights in XNNPACK's layout, byte for byte:

- linear weights and every bias as the module has them (``[out, in]``, ``[out]``);
- conv weights ``OIHW`` stored ``OHWI`` (channels last);
- depthwise conv weights ``[C, 1, H, W]`` stored ``[1, H, W, C]`` (first two dimensions
  swapped, then channels last), their per-channel axis moving from 0 to 3;
- fp16 programs keep fp16 linear weights and store conv weights as fp32 (exact);
- 8-bit programs store the int8 weights torch quantized, with torch's scales (per
  tensor: the dequantize node's scale and zero point; per channel: its scale tensor,
  zero points 0); their biases become int32 (qint32 / qcint32) at scale input scale x
  weight scale, within half a step of the module's float bias;
- 4-bit weights in groups (torchao's int4 per-group with int8 dynamic activations) store
  torchao's values, two a byte (value + 8, low nibble first), with its scales rounded
  to bfloat16, shaped (channels, groups); float biases stay float.
"""
from __future__ import annotations

import json
import os
from typing import Any, Callable, Dict, List, Optional, Tuple

import numpy as np
import pytest

import pyflatmodule as pfm
from pyflatmodule import QuantizedTensor
from pyflatmodule.executorch import Program
from pyflatmodule.executorch.backends.xnnpack import XNN_NO_ID, XnnGraph

from support.checked import load_full
from support.delegates import graphs
from support.paths import ET

STEMS = ["xnn_conv", "xnn_fp16", "xnn_q8_per_tensor", "xnn_q8_per_channel", "xnn_attention",
         "xnn_q4_group"]
GRAPH_PATH = "execution_plan[0].delegates[0].processed<XNNGraph>."


def _oracle(stem: str) -> Tuple[Dict[str, Any], Dict[str, np.ndarray]]:
    with open(os.path.join(ET, stem + ".oracle.json"), encoding="utf-8") as f:
        doc = json.load(f)
    with np.load(os.path.join(ET, stem + ".oracle.npz")) as z:
        return doc, {k: z[k] for k in z.files}


def _weights(doc: Dict[str, Any], arrays: Dict[str, np.ndarray]) -> Dict[str, np.ndarray]:
    return {name: arrays[w["data"]].view(w["dtype"]).reshape(w["shape"])
            for name, w in doc["weights"].items()}


def _load(stem: str) -> Program:
    p = pfm.load(os.path.join(ET, stem + ".pte"))
    assert isinstance(p, Program)
    return p


def _graphs(p: Program) -> List[XnnGraph]:
    return graphs(p, "XnnpackBackend", XnnGraph)


# ------------------------------------------------------------ the graph, as ExecuTorch reads it

@pytest.mark.parametrize("stem", STEMS)
def test_graph_reads_as_executorch_reads_it(stem: str) -> None:
    doc, _ = _oracle(stem)
    delegates = doc["xnnpack"]["delegates"]
    p = _load(stem)
    graphs = _graphs(p)
    assert len(graphs) == len(delegates) > 0
    for g, want, d in zip(graphs, delegates,
                          [d for m in p.methods.values() for d in m.delegates]):
        assert len(d.data) == want["payload_size"]
        assert g.header == want["header"]
        graph = want["graph"]
        assert g.version == graph["version"]
        assert g.input_ids == graph["input_ids"] and g.output_ids == graph["output_ids"]
        values = g.values
        assert len(values) == len(graph["xvalues"])
        for xv in graph["xvalues"]:
            union = xv["xvalue_union"]
            tensor = union["tensor_value"] if "tensor_value" in union else union
            v = values[tensor["id_out"]]
            assert v.datatype == tensor["datatype"].replace("xnn_datatype_", "")
            assert list(v.dims) == tensor["dims"] and len(v.dims) == tensor["num_dims"]
            assert (v.flags, v.external_id, v.constant) == \
                (tensor["flags"], tensor["external_id"], tensor["constant_buffer_idx"])
            _check_quantization(g, v.id, union.get("quant_params_type"), union.get("quant_params"),
                                graph)
        assert len(g.nodes) == len(graph["xnodes"])
        for node, xn in zip(g.nodes, graph["xnodes"]):
            assert node.kind == xn["xnode_union_type"]
            fields = xn["xnode_union"]
            ids = {k: v for k, v in fields.items() if k.endswith("_id") and v != XNN_NO_ID}
            assert node.inputs == tuple(v for k, v in ids.items() if not k.startswith("output"))
            assert node.outputs == tuple(v for k, v in ids.items() if k.startswith("output"))
            assert node.fields == {k: v for k, v in fields.items() if not k.endswith("_id")}
            assert node.debug_handle == xn["debug_handle"]
            clamp = xn.get("output_min_max")
            assert node.output_min_max == (None if clamp is None else
                                           (clamp["output_min"], clamp["output_max"]))


def _check_quantization(g: XnnGraph, vid: int, kind: Optional[str], params: Any,
                        graph: Dict[str, Any]) -> None:
    q = g.values[vid].quantization
    if kind is None:
        assert q is None
        return
    assert q is not None
    assert q.kind == {"PerTensorQuant": "per_tensor", "PerChannelQuant": "per_channel",
                      "PerChannelGroupQuant": "per_channel_group",
                      "PerTokenDynamicQuant": "per_token_dynamic"}[kind]
    if kind == "PerTokenDynamicQuant":
        assert q.num_nonbatch_dims == params["num_nonbatch_dims"]
        return
    if kind == "PerTensorQuant":   # flatc prints floats to 6 decimal places
        assert q.scale == pytest.approx(params["scale"], abs=5e-7)
        assert q.zero_point == params["zero_point"]
        return
    assert q.channel_dim == params["channel_dim"] and q.scales is not None
    if kind == "PerChannelGroupQuant":
        assert q.group_size == params["group_size"]
    if params["scale"]:
        assert q.scales.tolist() == params["scale"]
    else:   # in named data, under the key constant_data[scale_buffer_idx] gives
        assert q.scales.size == params["num_scales"]
        entry = graph["constant_data"][params["scale_buffer_idx"]]
        assert entry["size"] == q.scales.itemsize * params["num_scales"]
        named = g._resolve(entry["named_key"])
        assert named is not None
        assert q.scales.tobytes() == bytes(named[:entry["size"]])


# ------------------------------------------------------- constants: the module's weights

#: How XNNPACK stores a module weight, by the weight's shape: (layout name, transform).
def _layout(shape: Tuple[int, ...]) -> Tuple[str, Callable[[np.ndarray], np.ndarray]]:
    if len(shape) == 4 and shape[1] == 1:
        return "1HWO", lambda w: w.transpose(1, 2, 3, 0)
    if len(shape) == 4:
        return "OHWI", lambda w: w.transpose(0, 2, 3, 1)
    return "as is", lambda w: w


def _stored(c: Any) -> np.ndarray:
    """The bytes as stored (4-bit types packed), zero-copy."""
    return c.int_repr if isinstance(c, QuantizedTensor) else c


def _logical(c: Any) -> np.ndarray:
    """One element per value (4-bit types unpacked)."""
    return c.values() if isinstance(c, QuantizedTensor) else c


@pytest.mark.parametrize("stem", STEMS)
def test_every_constant_is_a_weight_of_the_module(stem: str) -> None:
    doc, arrays = _oracle(stem)
    weights = _weights(doc, arrays)
    quantized = "dequantize" in doc
    # the weights XNNPACK stores: for quantized programs the int8 ones torch made
    floats = {k: w for k, w in weights.items() if w.dtype.kind == "f" and "bias" in k}
    stored = {k: w for k, w in weights.items()
              if not quantized or k in doc["dequantize"] or k in floats}
    p = _load(stem)
    found = set()
    for g in _graphs(p):
        for vid, c in g.constants().items():
            value = g.values[vid]
            assert not _stored(c).flags.writeable
            array = _logical(c)
            assert array.shape == tuple(value.dims)
            if value.datatype in ("qint32", "qcint32"):   # a quantized bias
                assert isinstance(c, QuantizedTensor)
                name = _bias_of(c, floats)
                found.add(name)
                continue
            matches = []
            for name, w in stored.items():
                layout, transform = _layout(w.shape)
                want = transform(w)
                if value.datatype == "fp32" and want.dtype == np.float16:
                    want = want.astype(np.float32)   # fp16 conv weights are stored as fp32
                if want.shape == array.shape and want.dtype == array.dtype and \
                        np.array_equal(want, array):
                    matches.append((name, layout))
            assert len(matches) == 1, (vid, matches)
            name, layout = matches[0]
            found.add(name)
            if quantized and name in doc["dequantize"]:
                _check_params(c, doc["dequantize"][name], weights, layout)
            else:
                assert not isinstance(c, QuantizedTensor)
    assert found == set(stored) | (set(floats) if quantized else set())


def _bias_of(c: QuantizedTensor, floats: Dict[str, np.ndarray]) -> str:
    """The float bias a quantized int32 bias stands for: within half a step of it."""
    values = c.dequantize()
    step = np.asarray(c.scale if c.scales is None else c.scales, np.float32)
    names = [k for k, b in floats.items() if b.shape == values.shape and
             np.all(np.abs(values - b.astype(np.float32)) <= step / 2 + 1e-6)]
    assert len(names) == 1, names
    return names[0]


def _check_params(c: Any, want: Dict[str, Any], weights: Dict[str, np.ndarray],
                  layout: str) -> None:
    assert isinstance(c, QuantizedTensor)
    if want["axis"] is None:
        assert c.qscheme == "per_tensor_affine"
        assert c.scale == np.float32(want["scale"]) and c.zero_point == want["zero_point"]
        return
    assert c.scales is not None and c.axis == (3 if layout == "1HWO" else want["axis"])
    if "group_size" in want:   # torchao's scales, rounded to bfloat16
        import ml_dtypes
        assert c.qscheme == "per_channel_group_symmetric"
        assert c.group_size == want["group_size"] and c.scales.dtype == ml_dtypes.bfloat16
        assert np.array_equal(c.scales, weights[want["scale"]].astype(ml_dtypes.bfloat16))
        assert c.zero_points is not None and not c.zero_points.any()
        return
    assert c.qscheme == "per_channel_symmetric"
    assert c.scales.dtype == np.float32
    assert c.scales.tobytes() == weights[want["scale"]].tobytes()
    assert not weights[want["zero_point"]].any()


@pytest.mark.parametrize("stem", STEMS)
def test_state_dict_names_every_delegate_constant(stem: str) -> None:
    """Under "<method>.delegates[<i>].values[<id>]", in torch's layout (the graph's
    torch_constant), zero-copy over the named data."""
    p = _load(stem)
    state = p.state_dict()
    want: Dict[str, Any] = {}
    for m in p.methods.values():
        for i, d in enumerate(m.delegates):
            g = d.graph
            assert g is not None
            for xv_id in g.constants():
                want[f"{m.name}.delegates[{i}].values[{xv_id}]"] = (
                    g, xv_id, g.torch_constant(xv_id))
    assert set(state) == set(want) and want
    named = {k: np.frombuffer(v, np.uint8) for k, v in p.named_data.items()}
    for name, (g, vid, c) in want.items():
        got = _stored(state[name])
        assert type(state[name]) is type(c) and np.array_equal(got, _stored(c))
        key = g._root.tables("constant_data")[g.values[vid].constant].string("named_key")
        assert key is not None and np.shares_memory(got, named[key])


def test_a_quantized_weight_dequantizes_to_the_modules_float_weight() -> None:
    doc, arrays = _oracle("xnn_q8_per_channel")
    weights = _weights(doc, arrays)
    p = _load("xnn_q8_per_channel")
    (g, _) = _graphs(p)
    conv = [c for c in g.constants().values()
            if isinstance(c, QuantizedTensor) and c.dtype_name == "qcint8"][0]
    assert conv.shape == (8, 3, 3, 3)
    want = weights["conv.weight"].transpose(0, 2, 3, 1)
    step = conv.scales.reshape(-1, 1, 1, 1)   # type: ignore[union-attr]
    assert np.all(np.abs(conv.dequantize() - want) <= step / 2 + 1e-7)


# --------------------------------------------------------------- malformed payloads

def _payload(p: Program) -> Tuple[int, XnnGraph]:
    d = p.methods["forward"].delegates[0]
    g = d.graph
    assert g is not None
    return d._span()[0], g


def _field_at(g: XnnGraph, table: Any, name: str) -> int:
    at = table._at(table.fields[name])
    assert at
    return int(at)


def _edit(stem: str, how: Callable[[int, XnnGraph, bytes], Tuple[int, bytes]]) -> bytes:
    raw = open(os.path.join(ET, stem + ".pte"), "rb").read()
    base, g = _payload(_load(stem))
    at, new = how(base, g, raw)
    return raw[:at] + new + raw[at + len(new):]


def test_num_dims_is_not_read_and_strict_holds_it_to_the_dims() -> None:
    """The runtime defines a tensor by its dims vector (XNNCompiler.cpp never reads
    num_dims): a num_dims that disagrees opens, the dims as the vector holds them;
    strict mode refuses it."""
    def how(b: int, g: XnnGraph, r: bytes) -> Tuple[int, bytes]:
        return b + _field_at(g, g._tensor_table(_conv_weight(g)), "num_dims"), _u32(3)
    bad = _edit("xnn_q8_per_channel", how)
    with load_full(bad) as p:
        _, g = _payload(p)
        assert len(g.values[_conv_weight(g)].dims) == 4
    with pytest.raises(pfm.FormatError) as e:
        pfm.verify(bad, strict=True)
    assert e.value.code == "length_mismatch" and "tensor_value" in e.value.path, e.value


def test_a_fully_connected_node_reading_no_value_still_gives_its_weights() -> None:
    """Every value_ref may be XNN_NO_ID (no value): a fully-connected node whose input is
    none reads its weights all the same (found by the gate's campaign: IndexError)."""
    def how(b: int, g: XnnGraph, r: bytes) -> Tuple[int, bytes]:
        fc = [t for kind, _, t in g._node_tables()
              if kind == "XNNFullyConnected" and t.has("input1_id")][0]
        return b + _field_at(g, fc, "input1_id"), _u32(XNN_NO_ID)
    with load_full(_edit("xnnpack_fp16", how)) as p:
        with load_full(os.path.join(ET, "xnnpack_fp16.pte")) as clean:
            assert sorted(p.state_dict()) == sorted(clean.state_dict())


def test_strict_holds_a_constant_entry_to_the_tensors_size() -> None:
    """The runtime reads a constant's bytes from its named data (or at its offset of the
    constant data) and never compares the entry's size with the tensor; strict mode
    refuses an entry smaller than its tensor."""
    bad = _edit("xnn_q8_per_channel", EDITS["dims past the constant"][0])
    with pytest.raises(pfm.FormatError) as e:
        pfm.verify(bad, strict=True)
    assert e.value.code == "outside_storage" and "constant_data[1]" in e.value.path, e.value


def _u32(x: int) -> bytes:
    return x.to_bytes(4, "little")


def _conv_weight(g: XnnGraph) -> int:
    return [v.id for v in g.values if v.datatype == "qcint8" and len(v.dims) == 4][0]


EDITS: Dict[str, Tuple[Callable[[int, XnnGraph, bytes], Tuple[int, bytes]], str, str]] = {
    "header magic": (lambda b, g, r: (b + 4, b"XH01"), "bad_identifier", "header"),
    "flatbuffer past the payload": (lambda b, g, r: (b + 14, _u32(1 << 20)),
                                    "bad_payload_header", "header"),
    "constant data past the payload": (lambda b, g, r: (b + 22, (1 << 40).to_bytes(8, "little")),
                                       "bad_payload_header", "header"),
    "flatbuffer identifier": (lambda b, g, r: (b + g.header["flatbuffer_offset"] + 4, b"XN99"),
                              "bad_identifier", "header"),
    "value id out of range": (lambda b, g, r: (b + _field_at(g, g._tensor_table(3), "id_out"),
                                               _u32(999)), "bad_value_id", "xvalues[3]"),
    "value id twice": (lambda b, g, r: (b + _field_at(g, g._tensor_table(3), "id_out"),
                                        _u32(2)), "bad_value_id", "xvalues["),
    "node input names no value": (
        lambda b, g, r: (b + _field_at(g, g._root.tables("xnodes")[2].union("xnode_union")[1],
                                       "filter_id"), _u32(500)),
        "bad_value_id", "xnodes[2].xnode_union<XNNConv2d>.filter_id"),
    # 9 output channels: the 8 scales no longer cover them (the named data's bytes, 9
    # filters past the entry's size, are not reached)
    "dims past the constant": (
        lambda b, g, r: (b + g._tensor_table(_conv_weight(g)).vector_span("dims")[0],
                         _u32(9)), "bad_quantization", "quant_params"),
    "unknown datatype": (
        lambda b, g, r: (b + _field_at(g, g._tensor_table(_conv_weight(g)), "datatype"),
                         (99).to_bytes(2, "little")), "bad_scalar_type", "tensor_value"),
    "scale count not the channels": (
        lambda b, g, r: (b + _quant_field(g, "num_scales"), _u32(7)),
        "bad_quantization", "quant_params<PerChannelQuant>"),
    "scales in no constant": (
        lambda b, g, r: (b + _quant_field(g, "scale_buffer_idx"), _u32(0)),
        "bad_storage_index", "quant_params<PerChannelQuant>"),
    "constant index past constant_data": (
        lambda b, g, r: (b + _field_at(g, g._tensor_table(_conv_weight(g)), "constant_buffer_idx"),
                         _u32(100)), "bad_storage_index", "tensor_value"),
}


def _quant_field(g: XnnGraph, name: str) -> int:
    from pyflatmodule.core.fbread import Table
    r = g._records[_conv_weight(g)]
    q = Table(g._root.schema, g._payload, int(r.quant), "PerChannelQuant")
    return _field_at(g, q, name)


@pytest.mark.parametrize("case", sorted(EDITS))
def test_malformed_payload_is_refused_where_it_is_wrong(case: str) -> None:
    how, code, where = EDITS[case]
    bad = _edit("xnn_q8_per_channel", how)
    with pytest.raises(pfm.FormatError) as e:
        load_full(bad)
    assert e.value.code == code, e.value
    assert e.value.path.startswith(GRAPH_PATH), e.value.path
    assert where in e.value.path, e.value.path


def test_named_data_no_file_holds() -> None:
    """Like an external tensor: refused when data files are given and none holds it;
    without data files, listed as missing and left out."""
    bad = _edit("xnn_q8_per_channel",
                lambda b, g, r: (b + int(g._records[_conv_weight(g)].constant.key), b"x"))
    with pytest.raises(pfm.FormatError) as e:
        load_full(bad, data=[os.path.join(ET, "external.ptd")])
    assert e.value.code == "missing_data" and e.value.path.startswith(GRAPH_PATH + "xvalues[")
    p = pfm.load(bad)
    assert isinstance(p, Program)
    g = _graphs(p)[0]
    vid = _conv_weight(g)
    assert list(g.missing) == [vid] and g.missing[vid].startswith("x")
    assert g.constant(vid) is None and vid not in g.constants()
    q = g.values[vid].quantization
    assert q is not None and q.kind == "per_channel" and q.scales is not None   # resolved
    assert f"forward.delegates[0].values[{vid}]" not in p.state_dict()
    assert len(g.constants()) == len(_graphs(_load("xnn_q8_per_channel"))[0].constants()) - 1
    # its scales' key instead: the parameters without scales, the constant missing
    bad = _edit("xnn_q8_per_channel",
                lambda b, g, r: (b + int(g._records[_conv_weight(g)].scales.key), b"x"))
    p = pfm.load(bad)
    assert isinstance(p, Program)
    g = _graphs(p)[0]
    assert g.missing[vid].startswith("xcale_") and g.constant(vid) is None
    q = g.values[vid].quantization
    assert q is not None and q.kind == "per_channel" and q.scales is None and q.channel_dim == 0


def test_the_callers_budgets_reach_the_payload_check() -> None:
    """load()'s options check the XNNPACK payloads too, not only the program around
    them: this program's own flatbuffer takes 32 table visits, its payload 41, so a
    budget of 40 is refused in the payload and 41 is enough."""
    path = os.path.join(ET, "xnn_q4_group.pte")
    with pytest.raises(pfm.FormatError) as e:
        load_full(path, max_tables=40)
    assert e.value.code == "table_budget" and e.value.path.startswith(GRAPH_PATH), e.value
    with pytest.raises(pfm.FormatError) as e:   # the payload is checked in full regardless
        _ = pfm.load(path, max_tables=40, verify=False).methods
    assert e.value.code == "table_budget" and e.value.path.startswith(GRAPH_PATH), e.value
    assert isinstance(pfm.load(path, max_tables=41), Program)


# ------------------------------------- a payload built here: inline constants, 4-bit, groups

def _crafted(scale_offset: int = 80, group_size: int = 32, qc4_scales: int = 2) -> bytes:
    """An XH00 payload built with FlatBuffers' Python Builder: a float input (id 0,
    external 0), a qbint4 weight [2, 64] in groups of `group_size` with bfloat16 scales
    in the constant data, a qcint4 weight [2, 3] with inline float scales, a float output
    (external 1); constants inline in the payload's constant data."""
    import flatbuffers

    from pyflatmodule.core.native import lib as L
    b = flatbuffers.Builder(1024)

    def table(fields: List[Tuple[str, int, Any]]) -> int:
        b.StartObject(max(i for _, i, _ in fields) + 1)
        for kind, i, x in fields:
            if kind == "u32":
                b.PrependUint32Slot(i, x, 0xDEADBEEF)   # never the default: always written
            elif kind == "i32":
                b.PrependInt32Slot(i, x, -1)
            elif kind == "u64":
                b.PrependUint64Slot(i, x, 1 << 63)
            elif kind == "u16":
                b.PrependUint16Slot(i, x, 0xFFFF)
            elif kind == "u8":
                b.PrependUint8Slot(i, x, 0xFF)
            else:
                b.PrependUOffsetTRelativeSlot(i, x, 0)
        return int(b.EndObject())

    def vector(items: List[int], kind: str = "u32") -> int:
        b.StartVector(4, len(items), 4)
        for x in reversed(items):
            if kind == "u32":
                b.PrependUint32(x)
            elif kind == "f32":
                b.PrependFloat32(x)
            else:
                b.PrependUOffsetTRelative(x)
        return int(b.EndVector())

    def tensor(vid: int, datatype: int, dims: List[int], constant: int, flags: int = 0,
               external: int = XNN_NO_ID) -> int:
        d = vector(dims)
        return table([("u16", L.XN_XNN_TENSOR_VALUE_DATATYPE, datatype),
                      ("u32", L.XN_XNN_TENSOR_VALUE_NUM_DIMS, len(dims)),
                      ("off", L.XN_XNN_TENSOR_VALUE_DIMS, d),
                      ("u32", L.XN_XNN_TENSOR_VALUE_CONSTANT_BUFFER_IDX, constant),
                      ("u32", L.XN_XNN_TENSOR_VALUE_EXTERNAL_ID, external),
                      ("u32", L.XN_XNN_TENSOR_VALUE_FLAGS, flags),
                      ("u32", L.XN_XNN_TENSOR_VALUE_ID_OUT, vid)])

    def xvalue(kind: int, t: int) -> int:
        return table([("u8", L.XN_X_VALUE_XVALUE_UNION_TYPE, kind),
                      ("off", L.XN_X_VALUE_XVALUE_UNION, t)])

    def quantized(t: int, kind: int, q: int) -> int:
        return xvalue(L.XN_X_VALUE_UNION_XNN_QUANTIZED_TENSOR_VALUE, table([
            ("off", L.XN_XNN_QUANTIZED_TENSOR_VALUE_TENSOR_VALUE, t),
            ("u8", L.XN_XNN_QUANTIZED_TENSOR_VALUE_QUANT_PARAMS_TYPE, kind),
            ("off", L.XN_XNN_QUANTIZED_TENSOR_VALUE_QUANT_PARAMS, q)]))

    dt = "XN_XNN_DATATYPE_XNN_DATATYPE_"
    values = [
        xvalue(L.XN_X_VALUE_UNION_XNN_TENSOR_VALUE,
               tensor(0, getattr(L, dt + "FP32"), [1, 64], 0, 1, external=0)),
        quantized(tensor(1, getattr(L, dt + "QBINT4"), [2, 64], 1),
                  L.XN_XNN_QUANT_PARAMS_PER_CHANNEL_GROUP_QUANT, table([
                      ("i32", L.XN_PER_CHANNEL_GROUP_QUANT_CHANNEL_DIM, 0),
                      ("i32", L.XN_PER_CHANNEL_GROUP_QUANT_GROUP_SIZE, group_size),
                      ("u32", L.XN_PER_CHANNEL_GROUP_QUANT_SCALE_BUFFER_IDX, 3),
                      ("u32", L.XN_PER_CHANNEL_GROUP_QUANT_NUM_SCALES, 4)])),
        quantized(tensor(2, getattr(L, dt + "QCINT4"), [2, 3], 2),
                  L.XN_XNN_QUANT_PARAMS_PER_CHANNEL_QUANT, table([
                      ("off", L.XN_PER_CHANNEL_QUANT_SCALE, vector([0.5, 0.25][:qc4_scales]
                                                                   + [1.0] * (qc4_scales - 2),
                                                                   "f32")),
                      ("i32", L.XN_PER_CHANNEL_QUANT_CHANNEL_DIM, 0)])),
        xvalue(L.XN_X_VALUE_UNION_XNN_TENSOR_VALUE,
               tensor(3, getattr(L, dt + "FP32"), [1, 2], 0, 2, external=1)),
    ]
    node = table([("u32", L.XN_XNN_FULLY_CONNECTED_INPUT1_ID, 0),
                  ("u32", L.XN_XNN_FULLY_CONNECTED_FILTER_ID, 1),
                  ("u32", L.XN_XNN_FULLY_CONNECTED_BIAS_ID, XNN_NO_ID),
                  ("u32", L.XN_XNN_FULLY_CONNECTED_OUTPUT_ID, 3),
                  ("u32", L.XN_XNN_FULLY_CONNECTED_FLAGS, 0)])
    xnode = table([("u8", L.XN_X_NODE_XNODE_UNION_TYPE, L.XN_X_NODE_UNION_XNN_FULLY_CONNECTED),
                   ("off", L.XN_X_NODE_XNODE_UNION, node),
                   ("u32", L.XN_X_NODE_DEBUG_HANDLE, 7)])
    constants = [table([("u64", L.XN_CONSTANT_DATA_OFFSET_OFFSET, offset),
                        ("u64", L.XN_CONSTANT_DATA_OFFSET_SIZE, size)])
                 for offset, size in [(0, 0), (0, 64), (64, 4), (scale_offset, 8)]]
    xvalues, xnodes, constant_data = vector(values, "off"), vector([xnode], "off"), \
        vector(constants, "off")
    inputs, outputs, version = vector([0]), vector([3]), b.CreateString("crafted")
    root = table([("off", L.XN_XNN_GRAPH_VERSION, version),
                  ("off", L.XN_XNN_GRAPH_XNODES, xnodes),
                  ("off", L.XN_XNN_GRAPH_XVALUES, xvalues),
                  ("u32", L.XN_XNN_GRAPH_NUM_EXTERNS, 2),
                  ("off", L.XN_XNN_GRAPH_INPUT_IDS, inputs),
                  ("off", L.XN_XNN_GRAPH_OUTPUT_IDS, outputs),
                  ("off", L.XN_XNN_GRAPH_CONSTANT_DATA, constant_data)])
    b.Finish(root, file_identifier=b"XN01")
    fb = bytes(b.Output())
    data = bytes(_QB4) + bytes([0xF0, 0x0B, 0x78, 0x0D]) + b"\0" * 12 + \
        np.array([1.0, 2.0, 0.5, 4.0], "<f4").view("<u2")[1::2].tobytes()
    padded = -(-len(fb) // 16) * 16
    header = (b"\0\0\0\0XH00" + (30).to_bytes(2, "little") + (32).to_bytes(4, "little")
              + len(fb).to_bytes(4, "little") + (32 + padded).to_bytes(4, "little")
              + len(data).to_bytes(8, "little"))
    return header + b"\0" * 2 + fb + b"\0" * (padded - len(fb)) + data


#: qbint4 weight [2, 64]: value (k % 16) - 8 at column k, stored + 8, two a byte
_QB4 = np.tile(np.arange(16, dtype=np.uint8)[0::2] | (np.arange(16, dtype=np.uint8)[1::2] << 4),
               8)


def _graph(payload: bytes) -> XnnGraph:
    return XnnGraph(memoryview(payload), lambda key: None, "crafted", 0)


def test_a_crafted_payload_gives_its_inline_constants() -> None:
    payload = _crafted()
    g = _graph(payload)
    assert g.header["constant_data_size"] == 88 and g.version == "crafted"
    assert [n.kind for n in g.nodes] == ["XNNFullyConnected"]
    assert g.nodes[0].inputs == (0, 1) and g.nodes[0].outputs == (3,)   # no bias
    assert g.nodes[0].debug_handle == 7 and g.nodes[0].output_min_max is None
    assert [v.datatype for v in g.values] == ["fp32", "qbint4", "qcint4", "fp32"]
    base = g.header["constant_data_offset"]
    qb4 = g.constant(1)
    assert isinstance(qb4, QuantizedTensor) and qb4.shape == (2, 64) and qb4.group_size == 32
    assert qb4.int_repr.shape == (2, 32) and qb4.int_repr.tobytes() == payload[base:base + 64]
    assert np.shares_memory(qb4.int_repr, np.frombuffer(payload, np.uint8))
    want = np.tile(np.arange(64) % 16 - 8, (2, 1))
    assert np.array_equal(qb4.values(), want)
    scales = np.array([[1.0, 2.0], [0.5, 4.0]], np.float32)   # bfloat16 in the payload
    assert np.array_equal(np.asarray(qb4.scales, np.float32), scales)
    assert np.array_equal(qb4.dequantize(), want * np.repeat(scales, 32, axis=1))
    qc4 = g.constant(2)
    assert isinstance(qc4, QuantizedTensor) and qc4.axis == 0
    assert qc4.int_repr.tobytes() == bytes([0xF0, 0x0B, 0x78, 0x0D])
    assert np.array_equal(qc4.values(), [[-8, 7, 3], [0, -1, 5]])
    assert np.array_equal(qc4.dequantize(), np.array([[-4, 3.5, 1.5], [0, -0.25, 1.25]]))
    assert g.constant(0) is None and set(g.constants()) == {1, 2}


@pytest.mark.parametrize("kwargs,code,where", [
    ({"scale_offset": 84}, "bad_segment", "constant_data[3]"),   # past the constant data
    ({"group_size": 16}, "bad_quantization", "<PerChannelGroupQuant>"),   # 8 scales, not 4
    ({"group_size": 0}, "bad_quantization", "<PerChannelGroupQuant>"),
    ({"qc4_scales": 3}, "bad_quantization", "<PerChannelQuant>"),   # 3 channels' scales, 2 rows
])
def test_a_crafted_payload_with_wrong_references_is_refused(kwargs: Dict[str, int], code: str,
                                                            where: str) -> None:
    with pytest.raises(pfm.FormatError) as e:
        _graph(_crafted(**kwargs))
    assert e.value.code == code and where in e.value.path, e.value


def test_an_empty_constant_whose_other_dims_overflow() -> None:
    """A convolution's weight dims made (0, 2^32-1, 2^32-1, 2^32-1): no bytes, but numpy
    cannot hold the other dims' product: refused (found: ValueError from numpy when the
    constant was read)."""
    def how(b: int, g: XnnGraph, r: bytes) -> Tuple[int, bytes]:
        vid = [v.id for v in g.values if v.constant and len(v.dims) == 4][0]
        at = g._tensor_table(vid).vector_span("dims")[0]
        return b + at, _u32(0) + _u32(0xFFFFFFFF) * 3
    with pytest.raises(pfm.FormatError) as e:
        with load_full(_edit("xnn_conv", how)) as p:
            _graphs(p)
    assert e.value.code == "extent_overflow" and "xvalues[" in e.value.path, e.value
