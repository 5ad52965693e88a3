"""XNNPACK delegate constants in torch's layout: ``Program.state_dict()`` and ``export``.

The programs tests/data/et/xnn_layouts.pte (and its float16 twin) and xnn_conv_bn.pte
were lowered by ExecuTorch 1.5.1's XnnpackPartitioner (tests/data/make_et_data.py) from
modules with seeded random weights; their oracles hold the module's state_dict, ExecuTorch's
flatc decoding of each delegate's graph (the dims XNNPACK stores each constant with, the
node that reads it) and the bytes ``deserialize_pte_binary`` gives for each named data key.
Each module weight must come out of ``state_dict()`` bit for bit in torch's shape, as a
read-only view of the file; ``export``'s metadata must give the stored shape, the
permutation back to those bytes and, for a batch norm the partitioner folded, a note.
"""
from __future__ import annotations

import json
import os
from typing import Any, Dict, List, Tuple

import numpy as np
import pytest

import pyflatmodule as pfm
from pyflatmodule import QuantizedTensor
from pyflatmodule.executorch import Program

from support import run_cli
from support.exported import Exported, read_npz, read_safetensors
from support.paths import ET

LAYOUTS = ["xnn_layouts", "xnn_layouts_fp16"]
#: the node kind ExecuTorch's op_conv2d / op_linear serialize each layer of the
#: Layouts module as, and the layout torch has the layer's weight in
NODES = {"conv": ("XNNConv2d", "OIHW"), "single": ("XNNDepthwiseConv2d", "O1HW"),
         "dw": ("XNNDepthwiseConv2d", "O1HW"), "up": ("XNNConvTranspose2d", "IOHW"),
         "upg": ("XNNConvTranspose2d", "IOHW"), "fc": ("XNNFullyConnected", "OI")}
#: the node kinds whose filter and bias have a torch layout (conv and fully connected)
NODE_KINDS = {kind for kind, _ in NODES.values()}


class Oracle:
    """ExecuTorch's and torch's account of one program (its .oracle.json and .npz)."""

    def __init__(self, stem: str) -> None:
        with open(os.path.join(ET, stem + ".oracle.json"), encoding="utf-8") as f:
            self.doc = json.load(f)
        with np.load(os.path.join(ET, stem + ".oracle.npz")) as z:
            self.arrays = {k: z[k] for k in z.files}

    def tensors(self, what: str) -> Dict[str, np.ndarray]:
        """The module's ``weights`` (or the ``folded`` conv/linear ones) by FQN."""
        return {n: self.arrays[w["data"]].view(w["dtype"]).reshape(w["shape"])
                for n, w in self.doc.get(what, {}).items()}

    def constants(self) -> Dict[str, Tuple[str, str, List[int], bytes]]:
        """By state_dict name: (node kind reading it, role, dims stored, bytes stored),
        from ExecuTorch's own decoding of each graph."""
        out: Dict[str, Tuple[str, str, List[int], bytes]] = {}
        named = self.doc["restored"]["named_data"]
        index: Dict[str, int] = {}
        for d in self.doc["xnnpack"]["delegates"]:
            i = index[d["plan"]] = index.get(d["plan"], -1) + 1
            g = d["graph"]
            for node in g["xnodes"]:
                n = node["xnode_union"]
                for role in ("filter", "bias"):
                    vid = n.get(role + "_id")
                    if vid is None or vid == 0xFFFFFFFF:
                        continue
                    v = g["xvalues"][vid]["xvalue_union"]
                    key = g["constant_data"][v["constant_buffer_idx"]]["named_key"]
                    raw = self.arrays[named[key]].tobytes()
                    out[f"{d['plan']}.delegates[{i}].values[{vid}]"] = (
                        node["xnode_union_type"], role, v["dims"], raw)
        return out


def _load(stem: str) -> Program:
    return pfm.load_program(os.path.join(ET, stem + ".pte"))


def _match(state: Dict[str, Any], want: np.ndarray) -> str:
    """The one state_dict entry that is ``want`` (same shape, same bits)."""
    names = [k for k, v in state.items() if v.shape == want.shape and v.dtype == want.dtype
             and v.tobytes() == want.tobytes()]
    assert len(names) == 1, (want.shape, names)
    return names[0]


def _module_weight(stem: str, w: np.ndarray, node: str) -> np.ndarray:
    """The module's weight as the fp16 program keeps it: XNNPACK's conv filters and
    biases in float32 (the same values), linear ones in float16."""
    if stem.endswith("fp16") and node != "XNNFullyConnected":
        return w.astype(np.float32)
    return w


@pytest.mark.parametrize("stem", LAYOUTS)
def test_state_dict_gives_the_modules_weights_bit_exact(stem: str) -> None:
    oracle = Oracle(stem)
    weights = oracle.tensors("weights")
    stored = oracle.constants()
    with _load(stem) as p:
        state = p.state_dict()
        assert set(state) == set(stored)
        found = set()
        for fqn, w in weights.items():
            node, torch_layout = NODES[fqn.split(".")[0]]
            name = _match(state, _module_weight(stem, w, node))
            found.add(name)
            assert stored[name][:2] == (node, fqn.split(".")[1].replace("weight", "filter"))
            layout = p.delegate_layouts()[name]
            assert layout["node"] == node and layout["shape"] == stored[name][2]
            assert layout["torch_layout"] == (torch_layout if fqn.endswith("weight") else "O")
        assert found == set(state)


@pytest.mark.parametrize("stem", LAYOUTS + ["xnn_conv_bn", "xnn_conv1d"])
def test_state_dict_views_the_files_bytes(stem: str) -> None:
    """Each tensor is the stored one, transposed by its permutation, over the file's
    bytes (zero-copy) and read-only; only a grouped transposed conv's filter, which no
    strided view can give, is a copy, and says so."""
    stored = Oracle(stem).constants()
    with _load(stem) as p:
        named = [np.frombuffer(v, np.uint8) for v in p.named_data.values()]
        layouts = p.delegate_layouts()
        for name, array in p.state_dict().items():
            node, _, dims, raw = stored[name]
            assert isinstance(array, np.ndarray) and not array.flags.writeable
            layout = layouts[name]
            if layout.get("copied"):
                assert node == "XNNConvTranspose2d" and layout["groups"] > 1
                assert not any(np.shares_memory(array, b) for b in named)
                continue
            assert any(np.shares_memory(array, b) for b in named), name
            back = array.transpose(np.argsort(layout["permutation"]))
            assert list(back.shape) == dims and back.tobytes() == raw


def test_xnngraph_constants_keep_xnnpacks_layout() -> None:
    stored = Oracle("xnn_layouts").constants()
    with _load("xnn_layouts") as p:
        for m in p.methods.values():
            for i, d in enumerate(m.delegates):
                assert d.graph is not None
                for vid, c in d.graph.constants().items():
                    _, _, dims, raw = stored[f"{m.name}.delegates[{i}].values[{vid}]"]
                    assert list(c.shape) == dims and c.tobytes() == raw


def test_a_folded_batch_norm_is_noted() -> None:
    """The partitioner folds each batch norm into the conv or linear layer before it: the
    file holds torch's fuse_conv_bn_weights / fuse_linear_bn_weights of them, in torch's
    layout, not the module's weights, and the metadata says it may be so."""
    oracle = Oracle("xnn_conv_bn")
    weights, folded = oracle.tensors("weights"), oracle.tensors("folded")
    with _load("xnn_conv_bn") as p:
        state, layouts = p.state_dict(), p.delegate_layouts()
        assert {_match(state, w) for w in folded.values()} == set(state)
        for fqn in ("conv.weight", "fc.weight"):
            assert not any(v.tobytes() == weights[fqn].tobytes() for v in state.values())
        for name in state:
            assert any("batch norm" in n and "folded" in n for n in layouts[name]["notes"])


def _foldable(graph: Dict[str, Any], node: Dict[str, Any]) -> bool:
    """From ExecuTorch's decoding of a graph: whether a batch norm can have been folded into
    the node: any conv (FuseBatchNormPass folds convs, PT2E's quantizer does before it
    quantizes), or a linear (not an mm: no XNN_FLAG_TRANSPOSE_WEIGHTS, bit 0) of a float
    filter (not behind a dequantize) on a 2-d input (BatchNorm1d's features)."""
    n = node["xnode_union"]
    if node["xnode_union_type"] != "XNNFullyConnected":
        return True
    values = graph["xvalues"]
    return (not n["flags"] & 1
            and values[n["filter_id"]]["xvalue_union_type"] == "XNNTensorValue"
            and len(values[n["input1_id"]]["xvalue_union"]["dims"]) == 2)


@pytest.mark.parametrize("stem", ["xnn_attention", "xnn_conv_bn", "xnn_q8_per_channel",
                                  "xnn_q4_group", "xnn_layouts_fp16"])
def test_the_folded_batch_norm_note_only_where_one_can_be(stem: str) -> None:
    oracle = Oracle(stem)
    want: Dict[str, bool] = {}
    index: Dict[str, int] = {}
    for d in oracle.doc["xnnpack"]["delegates"]:
        i = index[d["plan"]] = index.get(d["plan"], -1) + 1
        for node in d["graph"]["xnodes"]:
            if node["xnode_union_type"] not in NODE_KINDS:
                continue
            for role in ("filter", "bias"):
                vid = node["xnode_union"].get(role + "_id")
                if vid is not None and vid != 0xFFFFFFFF:
                    want.setdefault(f"{d['plan']}.delegates[{i}].values[{vid}]",
                                    _foldable(d["graph"], node))
    with _load(stem) as p:
        got = {name: any("batch norm" in n for n in how["notes"])
               for name, how in p.delegate_layouts().items() if "node" in how}
    assert got == want
    if stem in ("xnn_attention", "xnn_q8_per_channel", "xnn_q4_group"):
        assert not all(want.values())   # linears on 3-d inputs, quantized linears


@pytest.mark.parametrize("suffix, read", [(".npz", read_npz), (".safetensors", read_safetensors)])
def test_export_writes_torchs_layout_and_how_it_was_stored(tmp_path: Any, suffix: str,
                                                           read: Any) -> None:
    stem = "xnn_layouts_fp16"
    oracle = Oracle(stem)
    stored = oracle.constants()
    out = tmp_path / ("w" + suffix)
    r = run_cli("export", os.path.join(ET, stem + ".pte"), str(out))
    assert r.returncode == 0, r.stderr
    exported: Exported = read(str(out))
    assert set(exported) == set(stored)
    for fqn, w in oracle.tensors("weights").items():
        node, torch_layout = NODES[fqn.split(".")[0]]
        w = _module_weight(stem, w, node)
        [name] = [k for k, (a, _) in exported.items() if a.shape == w.shape
                  and a.tobytes() == w.tobytes()]
        how = exported[name][1]["stored"]
        assert how["node"] == node and how["shape"] == stored[name][2]
        if fqn.endswith("weight"):
            assert how["torch_layout"] == torch_layout
        if w.dtype == np.float32:   # conv filters and biases of a float16 program
            assert any("float32" in n and "float16" in n for n in how["notes"])
        if not how.get("copied"):
            back = np.ascontiguousarray(exported[name][0]).transpose(
                np.argsort(how["permutation"]))
            assert list(back.shape) == stored[name][2] and back.tobytes() == stored[name][3]


def test_quantized_weights_come_as_torch_quantized_them() -> None:
    """Per-channel int8 conv, depthwise and linear weights: torch's int8 tensors in torch's
    shape, over the file's bytes, with the channel axis the dequantize node names (a
    depthwise filter's moves back from XNNPACK's 3 to 0) and torch's scales."""
    oracle = Oracle("xnn_q8_per_channel")
    weights = oracle.tensors("weights")
    with _load("xnn_q8_per_channel") as p:
        named = [np.frombuffer(v, np.uint8) for v in p.named_data.values()]
        state = {k: v for k, v in p.state_dict().items()
                 if isinstance(v, QuantizedTensor) and v.dtype_name == "qcint8"}
        found = set()
        for fqn, want in oracle.doc["dequantize"].items():
            ints = weights[fqn]
            [name] = [k for k, q in state.items() if q.int_repr.shape == ints.shape
                      and q.int_repr.tobytes() == ints.tobytes()]
            found.add(name)
            q = state[name]
            assert q.axis == want["axis"] and q.scales is not None
            assert q.scales.tobytes() == weights[want["scale"]].tobytes()
            assert any(np.shares_memory(q.int_repr, b) for b in named)
            assert np.array_equal(q.dequantize(), ints * weights[want["scale"]].reshape(
                (-1,) + (1,) * (ints.ndim - 1)))
        assert found == set(state)


def _conv1d_noted(layout: Dict[str, Any]) -> bool:
    return any("Conv1d" in n for n in layout["notes"])


def test_a_conv1d_weight_is_noted_as_one_kernel_wide() -> None:
    """ExecuTorch lowers nn.Conv1d as a 2-d conv with the weight unsqueezed at the end:
    the module's [O, I, K] weight is the tensor without its last dimension (of 1), which
    the metadata says; no filter of a wider kernel carries that note."""
    weights = Oracle("xnn_conv1d").tensors("weights")
    with _load("xnn_conv1d") as p:
        state, layouts = p.state_dict(), p.delegate_layouts()
        for fqn in ("conv.weight", "dw.weight"):
            name = _match({k: v[..., 0] for k, v in state.items() if v.ndim == 4},
                          weights[fqn])
            assert state[name].shape[-1] == 1 and _conv1d_noted(layouts[name])
    with _load("xnn_layouts") as p:
        assert not any(_conv1d_noted(v) for v in p.delegate_layouts().values())
