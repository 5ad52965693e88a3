"""Arm TOSA delegate payloads (``Delegate.graph`` of a ``TOSABackend`` delegate) against
TOSA's own reading of them.

tests/data/et/tosa_*.pte are small networks lowered by ExecuTorch 1.5.1's TOSAPartitioner
(FP profile; tosa_int_conv quantized for the INT profile) (tests/data/make_et_backends.py);
their oracles hold, per TOSA delegate, what tosa-tools' flatbuffer classes read in the
payload: the version, each region's blocks with their inputs and outputs, operators
(``Op`` name, attribute type, input and output names), tensors (name, shape, DType, data
bytes in the npz) and shapes (name, rank, data bytes). Bad payloads are made from the
files' bytes and must be refused at the field at fault, located in the file. The real
architectures of tests/support/backends_zoo.py are compared the same way when written.
"""
from __future__ import annotations

import hashlib
import json
import os
import struct
from typing import Any, Dict, List, Tuple

import numpy as np
import pytest

import pyflatmodule as pfm
from pyflatmodule.executorch import TosaGraph

from support import backends_zoo
from support.checked import load_full
from support.cli import run_cli
from support.delegates import TOSA_ELEMENTS, graphs, refused
from support.fbwalk import deref, element, field, root

STEMS = ["tosa_mlp", "tosa_conv", "tosa_partial", "tosa_int_conv"]
#: The real architectures, when written (tests/support/backends_zoo.py).
ZOO = backends_zoo.stems("tosa")


def _path(stem: str) -> str:
    return os.path.join(backends_zoo.folder(stem), stem + ".pte")


def _oracle(stem: str) -> Dict[str, Any]:
    with open(os.path.join(backends_zoo.folder(stem), stem + ".oracle.json"),
              encoding="utf-8") as f:
        return dict(json.load(f))


def _arrays(stem: str) -> Dict[str, np.ndarray]:
    with np.load(os.path.join(backends_zoo.folder(stem), stem + ".oracle.npz")) as z:
        return {k: z[k] for k in z.files}


def _graphs(p: pfm.Program) -> List[TosaGraph]:
    return graphs(p, "TOSABackend", TosaGraph)


def _cases() -> List[Tuple[str, int]]:
    """(program, delegate index); a zoo program not written is one case, skipped."""
    return [(stem, k) for stem in STEMS + ZOO
            for k in (range(len(_oracle(stem)["tosa"]["delegates"]))
                      if stem in STEMS or backends_zoo.written(stem) else [0])]


def test_the_files_hold_tosa_delegates() -> None:
    for stem in STEMS:
        want = _oracle(stem)["tosa"]["delegates"]
        with load_full(_path(stem)) as p:
            got = _graphs(p)
            assert len(got) == len(want) == (2 if stem == "tosa_partial" else 1)
            payloads = [bytes(d.data) for m in p.methods.values() for d in m.delegates]
            assert [hashlib.sha256(b).hexdigest() for b in payloads] == \
                [w["payload_sha256"] for w in want]


@pytest.mark.parametrize("stem,k", _cases())
def test_each_graph_is_what_tosa_reads(stem: str, k: int) -> None:
    """Blocks, values (tensors then shapes, block by block), operators and the graph's
    inputs and outputs, by name, as tosa-tools reads them."""
    want = _oracle(stem)["tosa"]["delegates"][k]
    with load_full(_path(stem)) as p:
        g = _graphs(p)[k]
        v = want["version"]
        assert g.version == f"{v['major']}.{v['minor']}.{v['patch']}" + \
            ("-draft" if v["draft"] else "")
        blocks = [(r["name"], b) for r in want["regions"] for b in r["blocks"]]
        assert [(b.region, b.name) for b in g.blocks] == [(r, b["name"]) for r, b in blocks]
        values = g.values
        listed = []
        for i, (_, b) in enumerate(blocks):
            listed += [(i, t["name"], "tensor", t["type"].lower(), tuple(t["shape"]))
                       for t in b["tensors"]]
            listed += [(i, s["name"], "shape", "shape", (s["rank"],)) for s in b["shapes"]]
        assert [(x.block, x.name, x.kind, x.datatype, x.dims) for x in values] == listed
        assert [x.id for x in values] == list(range(len(values)))
        names = [x.name for x in values]
        for got_block, (_, b) in zip(g.blocks, blocks):
            assert [names[i] for i in got_block.input_ids] == b["inputs"]
            assert [names[i] for i in got_block.output_ids] == b["outputs"]
        assert [(n.block, n.kind, n.attribute, [names[i] for i in n.inputs],
                 [names[i] for i in n.outputs]) for n in g.nodes] == \
            [(i, o["op"], o["attribute"], o["inputs"], o["outputs"])
             for i, (_, b) in enumerate(blocks) for o in b["operators"]]
        assert [names[i] for i in g.input_ids] == blocks[0][1]["inputs"]
        assert [names[i] for i in g.output_ids] == blocks[0][1]["outputs"]


@pytest.mark.parametrize("stem,k", _cases())
def test_each_constant_is_the_data_tosa_reads(stem: str, k: int) -> None:
    """A tensor whose data holds bytes is a constant: the first shape x element size
    bytes of its data, as its shape and DType; a shape's constant its rank int64 values."""
    want = _oracle(stem)["tosa"]["delegates"][k]
    arrays = _arrays(stem)
    with load_full(_path(stem)) as p:
        g = _graphs(p)[k]
        constants = g.constants()
        layouts = g.constant_layouts()
        expected: Dict[int, Tuple[str, Tuple[int, ...], bytes]] = {}
        i = 0
        for r in want["regions"]:
            for b in r["blocks"]:
                for t in b["tensors"]:
                    raw = arrays[t["data"]].tobytes()
                    if raw:
                        size, dtype = TOSA_ELEMENTS[t["type"]]
                        n = size * int(np.prod(t["shape"], dtype=np.int64))
                        assert len(raw) >= n
                        expected[i] = (dtype, tuple(t["shape"]), raw[:n])
                    i += 1
                for s in b["shapes"]:
                    raw = arrays[s["data"]].tobytes()
                    assert len(raw) == 8 * s["rank"]
                    expected[i] = ("<i8", (s["rank"],), raw)
                    i += 1
        assert sorted(constants) == sorted(expected) and expected
        assert [v.id for v in g.values if v.constant] == sorted(expected)
        for vid, (dtype, shape, raw) in expected.items():
            array = constants[vid]
            assert array.dtype == np.dtype(dtype) and array.shape == shape
            assert array.tobytes() == raw and not array.flags.writeable
            assert layouts[vid]["shape"] == list(shape)
        assert g.named_data_keys() == {} and g.missing == {}


def test_a_zero_point_holds_more_bytes_than_its_shape() -> None:
    """ExecuTorch writes an int8 convolution's weight zero point (shape [1]) with one byte
    per output channel: the constant is its shape's byte, the rest is left."""
    (want,) = _oracle("tosa_int_conv")["tosa"]["delegates"]
    arrays = _arrays("tosa_int_conv")
    tensors = want["regions"][0]["blocks"][0]["tensors"]
    longer = [(i, t) for i, t in enumerate(tensors) if t["shape"] == [1]
              and len(arrays[t["data"]]) > 1 and t["type"] == "INT8"]
    assert longer
    with load_full(_path("tosa_int_conv")) as p:
        (g,) = _graphs(p)
        for i, t in longer:
            assert g.constants()[i].tobytes() == arrays[t["data"]].tobytes()[:1]


# ------------------------------------------------------------------ command line

def test_the_command_line_lists_the_graphs() -> None:
    """tree, dis, ops --delegates, size and export of the partial program (two TOSA
    delegates and a portable kernel), against the oracle."""
    stem = "tosa_partial"
    oracle = _oracle(stem)
    delegates = oracle["tosa"]["delegates"]
    arrays = _arrays(stem)
    run = run_cli("tree", "--json", _path(stem))
    assert run.returncode == 0, run.stderr
    (method,) = [m for m in json.loads(run.stdout)["files"][0]["root"]["children"]
                 if m["kind"] == "method"]
    listed = [d for d in method["children"] if d["kind"] == "delegate"]
    assert len(listed) == len(delegates)
    for d, want in zip(listed, delegates):
        summary, *weights = d["children"]
        (block,) = [b for r in want["regions"] for b in r["blocks"]]
        kinds = [o["op"] for o in block["operators"]]
        assert summary["kind"] == "tosa_graph"
        assert summary["node_kinds"] == {k: kinds.count(k) for k in sorted(set(kinds))}
        assert summary["nodes"] == len(kinds)
        assert summary["values"] == len(block["tensors"]) + len(block["shapes"])
        n_const = sum(1 for t in block["tensors"] if len(arrays[t["data"]])) + \
            len(block["shapes"])
        assert summary["constants"] == len(weights) == n_const
    text = run_cli("dis", _path(stem)).stdout
    assert text.count("TOSA graph:") == 2
    for want in delegates:
        for o in want["regions"][0]["blocks"][0]["operators"]:
            assert o["op"] + "(" in text
    kinds = {f"TOSABackend::{o['op']}" for d in delegates for r in d["regions"]
             for b in r["blocks"] for o in b["operators"]}
    run = run_cli("ops", "--delegates", _path(stem))
    assert run.returncode == 0 and set(run.stdout.split()) == kinds | {"aten::round.out"}
    run = run_cli("size", _path(stem))
    assert run.returncode == 0 and run.stdout.count("TOSABackend") == 2


def test_export_writes_the_delegates_constants(tmp_path: Any) -> None:
    stem = "tosa_mlp"
    (want,) = _oracle(stem)["tosa"]["delegates"]
    arrays = _arrays(stem)
    out = tmp_path / "w.npz"
    run = run_cli("export", _path(stem), str(out))
    assert run.returncode == 0, run.stderr
    with np.load(out) as z:
        block = want["regions"][0]["blocks"][0]
        for i, t in enumerate(block["tensors"]):
            raw = arrays[t["data"]].tobytes()
            key = f"forward.delegates[0].values[{i}]"
            assert (key in z.files) == bool(raw)
            if raw:
                assert z[key].tobytes() == raw and list(z[key].shape) == t["shape"]


# ------------------------------------------------------------------ bad payloads

RAW = open(_path("tosa_mlp"), "rb").read()
#: Field ids of ExecuTorch's tosa_1.0.fbs
GRAPH_REGIONS, REGION_BLOCKS = 1, 1
BLOCK_OPERATORS, BLOCK_TENSORS, BLOCK_INPUTS = 1, 2, 3
OPERATOR_INPUTS, TENSOR_NAME, TENSOR_DATA = 3, 0, 3


def _payload() -> Tuple[int, bytes]:
    """(file offset, bytes) of tosa_mlp's payload, found in the file."""
    with pfm.load(_path("tosa_mlp")) as p:
        (data,) = [bytes(d.data) for m in p.methods.values() for d in m.delegates]
    at = RAW.find(data)
    assert at > 0 and RAW.find(data, at + 1) < 0
    return at, data


def _block(buf: bytes) -> int:
    region = element(buf, root(buf), GRAPH_REGIONS, 0)
    return element(buf, region, REGION_BLOCKS, 0)


def _set(at: int, fmt: str, value: Any) -> bytes:
    out = bytearray(RAW)
    struct.pack_into(fmt, out, at, value)
    return bytes(out)


WHERE = "execution_plan[0].delegates[0].processed<TosaGraph>."


def test_a_damaged_identifier() -> None:
    start, buf = _payload()
    assert buf[4:8] == b"TOSA"
    refused(_set(start + 4, "<B", ord("X")), "bad_identifier", start + 4,
            WHERE + "header")


def test_an_operator_naming_no_tensor_of_its_block() -> None:
    start, buf = _payload()
    (want,) = _oracle("tosa_mlp")["tosa"]["delegates"]
    ops = want["regions"][0]["blocks"][0]["operators"]
    i = next(i for i, o in enumerate(ops) if o["inputs"])   # the first taking a name
    op = element(buf, _block(buf), BLOCK_OPERATORS, i)
    name = deref(buf, deref(buf, field(buf, op, OPERATOR_INPUTS)) + 4)
    assert buf[name + 4:name + 4 + len(ops[i]["inputs"][0])] == ops[i]["inputs"][0].encode()
    refused(_set(start + name + 4, "<B", ord("#")), "bad_tensor_name", start + name,
            WHERE + f"regions[0].blocks[0].operators[{i}].inputs[0]")


def test_a_block_input_naming_no_tensor() -> None:
    start, buf = _payload()
    name = deref(buf, deref(buf, field(buf, _block(buf), BLOCK_INPUTS)) + 4)
    refused(_set(start + name + 4, "<B", ord("#")), "bad_tensor_name", start + name,
            WHERE + "regions[0].blocks[0].inputs[0]")


def test_a_name_twice_in_a_block() -> None:
    """Tensor 1's name made tensor 0's: its name string pointed at tensor 0's."""
    start, buf = _payload()
    block = _block(buf)
    first, second = (element(buf, block, BLOCK_TENSORS, i) for i in (0, 1))
    at = field(buf, second, TENSOR_NAME)
    target = deref(buf, field(buf, first, TENSOR_NAME))
    refused(_set(start + at, "<I", target - at), "bad_tensor_name", start + target + 4,
            WHERE + "regions[0].blocks[0].tensors[1].name")


def test_a_constant_shorter_than_its_shape() -> None:
    start, buf = _payload()
    tensor = element(buf, _block(buf), BLOCK_TENSORS, 0)
    data = deref(buf, field(buf, tensor, TENSOR_DATA))
    (n,) = struct.unpack_from("<I", buf, data)
    assert n > 4
    refused(_set(start + data, "<I", n - 4), "bad_constant", start + data,
            WHERE + "regions[0].blocks[0].tensors[0].data")


def test_a_vector_reaching_past_the_payload() -> None:
    """The tensors vector's length past the payload's end: the verifier's
    ``out_of_bounds``, located in the file."""
    start, buf = _payload()
    tensors = deref(buf, field(buf, _block(buf), BLOCK_TENSORS))
    with pytest.raises(pfm.FormatError) as e:
        with load_full(_set(start + tensors, "<I", len(buf))) as p:
            [d.graph for m in p.methods.values() for d in m.delegates]
    assert e.value.code == "out_of_bounds", e.value
    assert start <= e.value.offset < start + len(buf)
    assert e.value.path.startswith(WHERE + "regions[0].blocks[0].tensors"), e.value.path


def test_a_root_offset_past_the_payload() -> None:
    start, buf = _payload()
    with pytest.raises(pfm.FormatError) as e:
        with load_full(_set(start, "<I", len(buf) + 8)) as p:
            [d.graph for m in p.methods.values() for d in m.delegates]
    assert e.value.path.startswith(WHERE), e.value.path
    assert start <= e.value.offset < start + len(buf), e.value


# ------------------------------------------------------------------ other DTypes, undefined extents

TENSOR_SHAPE, TENSOR_TYPE = 1, 2
#: DType numbers of ExecuTorch's tosa_1.0.fbs -> bytes n elements take, as tosa-tools'
#: serializer packs them (convertDataToUint8Vec): INT4 two to a byte, BF16 two, FP8 one
PACKED = {2: lambda n: (n + 1) // 2, 9: lambda n: 2 * n, 11: lambda n: n, 12: lambda n: n}


@pytest.mark.parametrize("dtype", sorted(PACKED))
def test_a_dtype_numpy_lacks_is_its_raw_bytes(dtype: int) -> None:
    """tosa_mlp's first weight (FP32, 32 x 1 x 1 x 16) retyped INT4, BF16 or FP8: its
    constant is the bytes that many elements take, from the data's start, as uint8."""
    start, buf = _payload()
    tensor = element(buf, _block(buf), BLOCK_TENSORS, 0)
    at = field(buf, tensor, TENSOR_TYPE)
    assert at and struct.unpack_from("<I", buf, at)[0] == 7   # FP32
    data = deref(buf, field(buf, tensor, TENSOR_DATA))
    n = PACKED[dtype](32 * 16)
    with load_full(_set(start + at, "<I", dtype)) as p:
        (g,) = _graphs(p)
        c = g.constants()[0]
        assert c.dtype == np.uint8 and c.shape == (n,) and not c.flags.writeable
        assert c.tobytes() == buf[data + 4:data + 4 + n]


def test_an_empty_constant_whose_other_sizes_overflow_is_refused() -> None:
    """Shape [0, 2^31-1, 2^31-1, 2^31-1]: no element, so its data holds enough, but numpy
    cannot make an array of that shape (it counts the other sizes' product in intptr_t):
    extent_overflow at the shape, not a ValueError at the constant's first read."""
    start, buf = _payload()
    tensor = element(buf, _block(buf), BLOCK_TENSORS, 0)
    shape = deref(buf, field(buf, tensor, TENSOR_SHAPE))
    out = bytearray(RAW)
    struct.pack_into("<4i", out, start + shape + 4, 0, 2**31 - 1, 2**31 - 1, 2**31 - 1)
    with pytest.raises(pfm.FormatError) as e:
        load_full(bytes(out))
    assert (e.value.code, e.value.offset) == ("extent_overflow", start + shape + 4)
    assert e.value.path.startswith(WHERE)


def test_a_negative_dimension_leaves_the_constant_raw() -> None:
    """A dimension of -1 leaves the extent undefined: no check, and the constant is all
    the data, as bytes."""
    start, buf = _payload()
    tensor = element(buf, _block(buf), BLOCK_TENSORS, 0)
    shape = deref(buf, field(buf, tensor, TENSOR_SHAPE))
    data = deref(buf, field(buf, tensor, TENSOR_DATA))
    (n,) = struct.unpack_from("<I", buf, data)
    with load_full(_set(start + shape + 8, "<i", -1)) as p:
        (g,) = _graphs(p)
        assert g.values[0].dims == (32, -1, 1, 16)
        c = g.constants()[0]
        assert c.dtype == np.uint8 and c.tobytes() == buf[data + 4:data + 4 + n]


def test_int48_takes_six_bytes_an_element() -> None:
    """The same weight retyped INT48: 512 elements need 3,072 bytes, its data holds 2,048."""
    start, buf = _payload()
    tensor = element(buf, _block(buf), BLOCK_TENSORS, 0)
    at = field(buf, tensor, TENSOR_TYPE)
    data = deref(buf, field(buf, tensor, TENSOR_DATA))
    assert struct.unpack_from("<I", buf, data)[0] == 2048
    refused(_set(start + at, "<I", 6), "bad_constant", start + data,
            WHERE + "regions[0].blocks[0].tensors[0].data")


@pytest.mark.parametrize("stem", ["tosa_mlp", "tosa_conv", "tosa_partial"])
def test_the_float_weights_are_torchs_in_tosas_layout(stem: str) -> None:
    """Each weight of the exported module (torch's state_dict, in the oracle) is a
    constant of the program's state_dict: as torch holds it, or a convolution's OIHW
    weight as OHWI (a linear's is a 1x1 convolution's: the same bytes)."""
    oracle = _oracle(stem)
    arrays = _arrays(stem)
    with load_full(_path(stem)) as p:
        stored = [a.tobytes() for a in p.state_dict().values()]
        assert set(p.state_dict()) == set(p.delegate_constants())
        for name, w in oracle["weights"].items():
            want = np.frombuffer(arrays[w["data"]].tobytes(), "<f4").reshape(w["shape"])
            ohwi = want.transpose(0, 2, 3, 1) if want.ndim == 4 else want
            assert np.ascontiguousarray(ohwi).tobytes() in stored, name
