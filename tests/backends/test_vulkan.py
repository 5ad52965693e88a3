"""Vulkan delegate payloads (``Delegate.graph`` of a ``VulkanBackend`` delegate) against
ExecuTorch's own reading of them.

tests/data/et/vulkan.pte is the sample network lowered by ExecuTorch 1.5.1's
VulkanPartitioner (tests/data/make_et_data.py); its oracle holds, per Vulkan delegate,
ExecuTorch's header reader (``VulkanDelegateHeader.from_bytes``), its reading of the graph
(``flatbuffer_to_vk_graph``: flatc with ExecuTorch's schema.fbs) and the named data
``deserialize_pte_binary`` cuts out of the file. Bad payloads are made from the file's
bytes and must be refused at the field at fault.
"""
from __future__ import annotations

import json
import os
import struct
from typing import Any, Dict, List, Tuple

import numpy as np
import pytest

import pyflatmodule as pfm
from pyflatmodule.executorch import VulkanGraph

from support.checked import load_full
from support.delegates import graphs
from support.fbwalk import deref, element, field, root
from support.paths import ET

PATH = os.path.join(ET, "vulkan.pte")
with open(os.path.join(ET, "vulkan.oracle.json"), encoding="utf-8") as _f:
    ORACLE: Dict[str, Any] = json.load(_f)
with np.load(os.path.join(ET, "vulkan.oracle.npz")) as _z:
    ARRAYS = {k: _z[k] for k in _z.files}
DELEGATES: List[Dict[str, Any]] = ORACLE["vulkan"]["delegates"]
#: VkDataType numbers as ExecuTorch's schema declares them -> the reader's names
DATATYPES = {0: "bool", 1: "uint8", 2: "int8", 3: "int32", 4: "float16", 5: "float32",
             6: "float64", 7: "int64"}


def _graphs(p: pfm.Program) -> List[VulkanGraph]:
    return graphs(p, "VulkanBackend", VulkanGraph)


def test_the_file_holds_vulkan_delegates() -> None:
    with load_full(PATH) as p:
        assert len(_graphs(p)) == len(DELEGATES) >= 1


@pytest.mark.parametrize("k", range(len(DELEGATES)))
def test_each_graph_is_what_executorch_reads(k: int) -> None:
    want = DELEGATES[k]
    g = want["graph"]
    with load_full(PATH) as p:
        got = _graphs(p)[k]
        d = [d for m in p.methods.values() for d in m.delegates][k]
        assert len(d.data) == want["payload_size"]
        h = want["header"]
        assert got.header == {"flatbuffer_offset": h["flatbuffer_offset"],
                              "flatbuffer_size": h["flatbuffer_size"],
                              "constant_data_offset": h["bytes_offset"],
                              "constant_data_size": h["bytes_size"]}
        assert got.version == g["version"]
        assert got.input_ids == g["input_ids"] and got.output_ids == g["output_ids"]
        assert [(n.kind, list(n.args), n.node_id) for n in got.nodes] == \
            [(c["name"], c["args"], c["node_id"]) for c in g["chain"]]
        values = got.values
        assert len(values) == len(g["values"])
        for v, w in zip(values, g["values"]):
            assert v.kind == w["value_type"]
            if w["value_type"] == "VkTensor":
                t = w["value"]
                assert (v.datatype, list(v.dims), v.constant) == \
                    (DATATYPES[t["datatype"]], t["dims"], t["constant_id"] >= 0)


@pytest.mark.parametrize("k", range(len(DELEGATES)))
def test_each_constant_is_the_bytes_executorch_names(k: int) -> None:
    """A tensor's constant: its VkBytes entry's named data (the bytes
    deserialize_pte_binary cut out for that key) or inline bytes, as the tensor's dims
    and datatype."""
    g = DELEGATES[k]["graph"]
    named = ORACLE["restored"]["named_data"]
    with load_full(PATH) as p:
        constants = _graphs(p)[k].constants()
        want_ids = [i for i, w in enumerate(g["values"]) if w["value_type"] == "VkTensor"
                    and w["value"]["constant_id"] >= 0]
        assert sorted(constants) == want_ids and want_ids
        for i in want_ids:
            t = g["values"][i]["value"]
            entry = g["constants"][t["constant_id"]]
            assert entry["offset"] == 2**64 - 1   # named data, as ExecuTorch 1.5.1 writes
            raw = ARRAYS[named[entry["named_key"]]].tobytes()
            array = constants[i]
            assert array.shape == tuple(t["dims"]) and not array.flags.writeable
            assert array.tobytes() == raw[:array.nbytes] and entry["length"] >= array.nbytes


def test_the_program_names_the_delegates_constants() -> None:
    with load_full(PATH) as p:
        names = p.delegate_constants()
        layouts = p.delegate_layouts()
        for k, g in enumerate(_graphs(p)):
            where = [d.name for m in p.methods.values() for d in m.delegates][k]
            for vid, array in g.constants().items():
                assert names[f"{where}.values[{vid}]"] is array or np.array_equal(
                    names[f"{where}.values[{vid}]"], array)
                assert layouts[f"{where}.values[{vid}]"] == {"layout": "as stored",
                                                             "shape": list(array.shape)}


# ------------------------------------------------------------------ bad payloads

with open(PATH, "rb") as _f:
    DATA = _f.read()


def _payload(k: int) -> Tuple[int, int]:
    """(file offset, size) of delegate k's payload, found by its bytes."""
    with pfm.load(PATH) as p:
        data = bytes([d for m in p.methods.values() for d in m.delegates][k].data)
    at = DATA.find(data)
    assert at > 0 and DATA.find(data, at + 1) < 0
    return at, len(data)


def _refused(data: bytes, code: str, path_end: str) -> None:
    with pytest.raises(pfm.FormatError) as e:
        with pfm.load(data, verify="full") as p:
            for m in p.methods.values():
                for d in m.delegates:
                    assert d.graph is not None
    assert e.value.code == code, e.value
    assert e.value.path.endswith(path_end), e.value.path
    assert 0 <= e.value.offset < len(data)


def _set(at: int, fmt: str, value: Any) -> bytes:
    out = bytearray(DATA)
    struct.pack_into(fmt, out, at, value)
    return bytes(out)


def test_a_damaged_header_magic() -> None:
    start, _ = _payload(0)
    assert DATA[start + 4:start + 8] == b"VH00"
    _refused(_set(start + 4, "<B", ord("X")), "bad_payload_header", "processed<VkGraph>.header")


def test_an_operator_argument_past_the_values() -> None:
    start, _ = _payload(0)
    fb = start + struct.unpack_from("<I", DATA, start + 10)[0]
    buf = DATA[fb:]
    call = element(buf, root(buf), 1, 0)            # VkGraph.chain[0]
    args = deref(buf, field(buf, call, 2))          # OperatorCall.args
    n_values = struct.unpack_from("<I", buf, deref(buf, field(buf, root(buf), 2)))[0]
    _refused(_set(fb + args + 4, "<i", n_values), "bad_value_id", "chain[0].args[0]")
    _refused(_set(fb + args + 4, "<i", -1), "bad_value_id", "chain[0].args[0]")


def test_a_constant_id_past_the_constants() -> None:
    start, _ = _payload(0)
    fb = start + struct.unpack_from("<I", DATA, start + 10)[0]
    buf = DATA[fb:]
    g = DELEGATES[0]["graph"]
    # a constant id other than 0, the default (which the writer leaves out)
    vid = next(i for i, w in enumerate(g["values"]) if w["value_type"] == "VkTensor"
               and w["value"]["constant_id"] > 0)
    value = element(buf, root(buf), 2, vid)         # VkGraph.values[vid]
    tensor = deref(buf, field(buf, value, 1))       # VkValue.value (a VkTensor)
    at = field(buf, tensor, 2)                      # VkTensor.constant_id
    assert at and struct.unpack_from("<i", buf, at)[0] > 0
    _refused(_set(fb + at, "<i", len(g["constants"])), "bad_constant",
             f"values[{vid}].value<VkTensor>.constant_id")


def test_an_empty_constant_whose_other_dims_overflow() -> None:
    """A constant's dims (8, 3, 3, 3) made (0, 2^32-1, 2^32-1, 2^32-1): no bytes, but
    numpy (like the runtime's size arithmetic) cannot hold the other dims' product: refused
    (found: ValueError from numpy when the constant was read)."""
    start, _ = _payload(0)
    fb = start + struct.unpack_from("<I", DATA, start + 10)[0]
    buf = DATA[fb:]
    vid = 0
    assert DELEGATES[0]["graph"]["values"][vid]["value"]["dims"] == [8, 3, 3, 3]
    tensor = deref(buf, field(buf, element(buf, root(buf), 2, vid), 1))   # values[0].value
    dims = deref(buf, field(buf, tensor, 1))                              # VkTensor.dims
    data = bytearray(DATA)
    struct.pack_into("<4I", data, fb + dims + 4, 0, 0xFFFFFFFF, 0xFFFFFFFF, 0xFFFFFFFF)
    _refused(bytes(data), "extent_overflow", "values[0].value<VkTensor>")
