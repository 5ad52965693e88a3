"""OpenVINO delegate payloads (``Delegate.graph`` of an ``OpenvinoBackend`` delegate, an
``OpenvinoGraph``) against OpenVINO's own reading of them.

tests/data/et/openvino_*.pte are small networks lowered by ExecuTorch 1.5.1's
OpenvinoPartitioner for the CPU device, with OpenVINO 2025.4 (tests/data/make_et_backends.py):
a conv net, an MLP, and two linears with a rounding OpenVINO does not take between them (two
delegates and a portable kernel). Their oracles hold, per payload, ``Core.import_model``'s
inputs and outputs and ``Core.read_model``'s operations of the IR inside (name, type,
opset, the operations its inputs come from, its outputs' element types and shapes, each
constant's bytes). The header's fields are read here from the file's bytes at OpenVINO's
layout (``StreamSerialize::DataHeader``: six u64, the offset and size of the plugin's
data, of the constants and of the model). Damaged payloads are made from the file's bytes
and must be refused at the field at fault. The real architectures of
tests/support/backends_zoo.py are compared the same way when written.
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
from pyflatmodule.executorch import OpenvinoGraph

from support import backends_zoo
from support.checked import load_full
from support.cli import run_cli
from support.delegates import OV_IR_NAMES, graphs, refused
from support.paths import WILD

STEMS = ["openvino_conv", "openvino_mlp", "openvino_partial", "openvino_zero_bias"]


def _oracle(stem: str) -> Tuple[Dict[str, Any], Any]:
    folder = backends_zoo.folder(stem)
    with open(os.path.join(folder, stem + ".oracle.json"), encoding="utf-8") as f:
        doc = json.load(f)
    with np.load(os.path.join(folder, stem + ".oracle.npz")) as z:
        return doc, {k: z[k] for k in z.files}


def _path(stem: str) -> str:
    return os.path.join(backends_zoo.folder(stem), stem + ".pte")


def _graphs(p: pfm.Program) -> List[Tuple[bytes, OpenvinoGraph]]:
    ds = [d for m in p.methods.values() for d in m.delegates]
    return list(zip((bytes(d.data) for d in ds), graphs(p, "OpenvinoBackend", OpenvinoGraph)))


@pytest.mark.parametrize("stem", STEMS + backends_zoo.stems("openvino"))
def test_each_model_is_what_openvino_reads(stem: str) -> None:
    doc, arrays = _oracle(stem)
    delegates = doc["openvino"]["delegates"]
    with load_full(_path(stem)) as p:
        got = _graphs(p)
        assert len(got) == len(delegates) == (2 if stem == "openvino_partial" else 1)
        for (data, g), want in zip(got, delegates):
            assert hashlib.sha256(data).hexdigest() == want["payload_sha256"]
            fields = struct.unpack_from("<6Q", data)
            assert list(g.header.values()) == list(fields) and fields[0] == 48
            # OpenVINO orders its operations topologically, not as the IR lists them
            ops = {o["name"]: o for o in want["operations"]}
            assert len(ops) == len(want["operations"])
            assert sorted((n.name, n.kind, n.opset) for n in g.nodes) == \
                sorted((o["name"], OV_IR_NAMES.get(o["type"], o["type"]), o["opset"])
                       for o in ops.values())
            values = g.values
            for n in g.nodes:
                o = ops[n.name]
                assert [g.nodes[values[v].node].name for v in n.inputs] == o["inputs"]
                # a Result has no output port in the IR: OpenVINO gives it its input's
                ids = n.inputs if n.kind == "Result" else n.outputs
                assert [(values[v].datatype, list(values[v].dims)) for v in ids] == \
                    [(x["element_type"], x["shape"]) for x in o["outputs"]]
            constants = g.constants()
            by_name = {g.nodes[values[v].node].name: c for v, c in constants.items()}
            want_consts = {name: o for name, o in ops.items() if o["type"] == "Constant"}
            assert sorted(by_name) == sorted(want_consts)
            for name, o in want_consts.items():
                c = by_name[name]
                assert not c.flags.writeable
                if o["data"] is None:   # OpenVINO holds no data of an element type dynamic
                    assert o["outputs"][0]["element_type"] == "dynamic" and c.size == 0
                    continue
                assert str(c.dtype) == {"f32": "float32", "i64": "int64",
                                        "i32": "int32"}[o["outputs"][0]["element_type"]]
                assert list(c.shape) == o["outputs"][0]["shape"]
                assert c.tobytes() == arrays[o["data"]].tobytes()
            for ids, ports in ((g.input_ids, want["inputs"]), (g.output_ids, want["outputs"])):
                assert [(values[v].datatype, list(values[v].dims)) for v in ids] == \
                    [(x["element_type"], x["shape"]) for x in ports]
            assert [sorted(values[v].names) for v in g.input_ids] == \
                [x["names"] for x in want["inputs"]]
            assert g.version == "11" and "<cnndata>" in g.custom_data


def test_the_constants_are_the_modules_weights() -> None:
    """The IR keeps torch's layout: the MLP's weights are its Linear weights, in order."""
    doc, arrays = _oracle("openvino_mlp")
    with load_full(_path("openvino_mlp")) as p:
        (_, g), = _graphs(p)
        weights = [c for c in g.constants().values() if c.ndim == 2]
        for c, fqn in zip(weights, ("0.weight", "2.weight")):
            w = doc["weights"][fqn]
            want = np.frombuffer(arrays[w["data"]].tobytes(), w["dtype"]).reshape(w["shape"])
            np.testing.assert_array_equal(c, want)
        assert p.delegate_layouts()["forward.delegates[0].values[1]"]["layout"] == "as stored"


def test_a_dropped_bias_is_an_empty_constant_of_element_type_dynamic() -> None:
    """A zero bias (as torchvision's classifiers start): the CPU plugin drops it for an
    empty Const of element type dynamic, precision UNSPECIFIED in the IR, which OpenVINO
    holds no data of."""
    doc, _ = _oracle("openvino_zero_bias")
    (want,) = doc["openvino"]["delegates"]
    empty = [o for o in want["operations"] if o["type"] == "Constant" and o["data"] is None]
    assert [o["outputs"] for o in empty] == [[{"element_type": "dynamic", "shape": [0]}]]
    with load_full(_path("openvino_zero_bias")) as p:
        (_, g), = _graphs(p)
        (node,) = [n for n in g.nodes if n.name == empty[0]["name"]]
        (v,) = node.outputs
        assert (g.values[v].datatype, g.values[v].dims) == ("dynamic", (0,))
        assert g.constants()[v].size == 0


def test_a_relaxed_layer_is_an_operation_of_its_opset() -> None:
    """The IR writes the reduction of ``torch.any`` with relaxed element types, its
    version ``type_relaxed_opset1``: OpenVINO reads an operation of opset1, the relaxed
    types in its data."""
    doc, _ = _oracle("openvino_softmax_any")
    (want,) = [o for o in doc["openvino"]["delegates"][0]["operations"]
               if o["type"] == "ReduceLogicalOr"]
    with load_full(_path("openvino_softmax_any")) as p:
        (_, g), = _graphs(p)
        (node,) = [n for n in g.nodes if n.kind == "ReduceLogicalOr"]
        assert (node.name, node.opset) == (want["name"], want["opset"]) == \
            (node.name, "opset1")
        assert node.attributes["type_relax"] == "true"


def test_the_wild_program_decodes() -> None:
    """A program others wrote (tests/data/wild: DJL's OpenVINO test model)."""
    path = os.path.join(WILD, "djl_openvino_tiny.pte")
    with load_full(path) as p:
        (data, g), = _graphs(p)
        assert list(g.header.values()) == list(struct.unpack_from("<6Q", data))
        assert [n.kind for n in g.nodes] == ["Parameter", "Const", "Const", "FullyConnected",
                                           "ReLU", "Result"]


@pytest.mark.parametrize("command", [("info",), ("tree",), ("dis",), ("ops", "--delegates"),
                                     ("size",)])
def test_the_command_line_reads_it(command: Tuple[str, ...]) -> None:
    run = run_cli(*command, _path("openvino_partial"))
    assert run.returncode == 0, run.stderr
    if command[0] == "dis":
        assert run.stdout.count("OpenVINO graph: 5 nodes") == 2, run.stdout
        assert "FullyConnected(v0, v1, v2) -> v3" in run.stdout
    if command[0] == "ops":
        assert "FullyConnected" in run.stdout, run.stdout


# ---------------------------------------------------------------- damaged payloads

RAW = open(_path("openvino_conv"), "rb").read()
KEY = bytes([0x30, 0x60, 0x70, 0x02, 0x04, 0x08, 0x3F, 0x6F, 0x72, 0x74, 0x78, 0x7F])


def _payload() -> Tuple[int, bytes]:
    with pfm.load(_path("openvino_conv")) as p:
        data = bytes(p.methods["forward"].delegates[0].data)
    return RAW.index(data), data


def _with_model(xml: bytes) -> bytes:
    """The file with the payload's model replaced by ``xml`` (XORed as the plugin does),
    padded with spaces to the model's size."""
    at, data = _payload()
    _, _, _, _, model_at, model_size = struct.unpack_from("<6Q", data)
    assert len(xml) <= model_size
    xml = xml + b" " * (model_size - len(xml))
    coded = bytes(b ^ KEY[i % len(KEY)] for i, b in enumerate(xml))
    return RAW[:at + model_at] + coded + RAW[at + model_at + model_size:]


def _model() -> bytes:
    """The payload's model, without its first layer's ``rt_info`` (names it fused, which
    nothing reads): room for the edits."""
    _, data = _payload()
    _, _, _, _, model_at, model_size = struct.unpack_from("<6Q", data)
    xml = bytes(b ^ KEY[i % len(KEY)] for i, b in enumerate(data[model_at:model_at + model_size]))
    info = (b'\t\t\t<rt_info>\n\t\t\t\t<attribute name="fused_names" version="0" value="arg_0" />'
            b'\n\t\t\t</rt_info>\n')
    assert info in xml
    return xml.replace(info, b"", 1)


def test_the_model_decodes_to_the_ir() -> None:
    with load_full(_with_model(_model())) as p:
        assert len(p.methods["forward"].delegates[0].graph.nodes) == 12
    assert _model().startswith(b'<?xml version="1.0"?>\n<net name="Model0" version="11">')


@pytest.mark.parametrize("k,name", [(0, "custom_data"), (1, "constants"), (2, "model")])
def test_a_region_past_the_payload(k: int, name: str) -> None:
    at, data = _payload()
    out = bytearray(RAW)
    struct.pack_into("<Q", out, at + 16 * k + 8, len(data))
    refused(bytes(out), "bad_header", at + 16 * k, f".processed<OpenVINO>.header.{name}")
    struct.pack_into("<Q", out, at + 16 * k + 8, 2**64 - 1)
    refused(bytes(out), "bad_header", at + 16 * k, f".processed<OpenVINO>.header.{name}")


def test_a_payload_of_another_layout_stays_bytes() -> None:
    at, _ = _payload()
    out = bytearray(RAW)
    struct.pack_into("<Q", out, at, 40)
    with load_full(bytes(out)) as p:
        assert p.methods["forward"].delegates[0].graph is None


def test_a_model_that_is_not_xml() -> None:
    at, data = _payload()
    model_at = struct.unpack_from("<Q", data, 32)[0]
    xml = _model()
    cut = xml.index(b"<layers>")
    bad = xml[:cut] + b"<layers" + xml[cut + 8:]   # expat stops at the next tag's "<"
    refused(_with_model(bad), "bad_model", at + model_at + bad.index(b"<layer ", cut),
             ".processed<OpenVINO>.model")
    refused(_with_model(b'<?xml version="1.0"?>\n<!DOCTYPE net [<!ENTITY a "b">]>'
                         + xml[len(b'<?xml version="1.0"?>\n'):]),
             "bad_model", at + model_at, ".processed<OpenVINO>.model")
    refused(_with_model(b'<?xml version="1.0" encoding="no-such"?>'
                        + xml[len(b'<?xml version="1.0"?>'):]),
            "bad_model", at + model_at, ".processed<OpenVINO>.model")


def test_an_edge_to_nowhere_and_a_port_fed_by_none() -> None:
    at, data = _payload()
    model_at = struct.unpack_from("<Q", data, 32)[0]
    xml = _model()
    edge = b'<edge from-layer="0" from-port="0" to-layer="2" to-port="0" />'
    assert edge in xml
    refused(_with_model(xml.replace(edge, b'<edge from-layer="0" from-port="9" to-layer="2"'
                                           b' to-port="0" />')),
             "bad_model", at + model_at, ".processed<OpenVINO>.model.edges[0]")
    refused(_with_model(xml.replace(edge, b"")), "bad_model", at + model_at,
             ".processed<OpenVINO>.model.layers[2]")


def test_a_constant_past_the_constants() -> None:
    at, data = _payload()
    model_at, consts_size = struct.unpack_from("<Q", data, 32)[0], \
        struct.unpack_from("<Q", data, 24)[0]
    xml = _model()
    const = b'offset="0" size="864"'
    assert const in xml
    refused(_with_model(xml.replace(const, b'offset="%d" size="864"' % (consts_size - 8))),
             "bad_constant", at + model_at, ".processed<OpenVINO>.model.layers[1].data")
    refused(_with_model(xml.replace(const, b'offset="0" size="860"')),
             "bad_constant", at + model_at, ".processed<OpenVINO>.model.layers[1].data")
