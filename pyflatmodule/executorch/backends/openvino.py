"""OpenVINO delegate payloads: the model OpenVINO's CPU plugin exported, decoded.

ExecuTorch's OpenVINO backend (``OpenvinoBackend``, ExecuTorch 1.5.1,
backends/openvino/preprocess.py) compiles the partition with OpenVINO and keeps
``compiled.export_model()``: for the CPU device, the plugin's export (OpenVINO 2025,
``ov::pass::StreamSerialize``): a header of six u64 (``DataHeader``: the offset and size
of the plugin's own data, of the constants and of the model), the plugin's data (XML,
``<cnndata>``), the constants' bytes, and the model as OpenVINO's IR (XML, version 11),
XORed byte by byte with the plugin's key (src/plugins/intel_cpu/src/utils/codec_xor.cpp).

The IR's layers are the graph's nodes, in the order the IR lists them: each ``kind`` is
the layer's type as the IR names it (``Convolution``, ``Const``, ``Parameter``...). Each
output port of a layer is a value (ids given in that order), with the port's element
type and dims; a node's inputs are the values its ports' edges come from. The inputs are
the ``Parameter`` layers' values, the outputs those the ``Result`` layers take.
:meth:`OpenvinoGraph.constants` gives each ``Const`` layer's value as a read-only array
over the payload's constants, in the layer's shape and element type (the IR keeps
torch's layouts: a convolution's weights are ``OIHW``).

Everything is checked when the graph is read: the header's regions inside the payload,
the XML (no document type: the IR has none), every layer's and edge's ids, every input
port fed by one edge from an output port that exists, every constant's extent; a fault is
FormatError ``bad_header``, ``bad_model`` or ``bad_constant``, located in the payload. A
payload whose header does not start with its own length (48) is another writer's and
stays bytes.
"""
from __future__ import annotations

import struct
import xml.etree.ElementTree as ET
from typing import Any, Dict, List, NamedTuple, Optional, Tuple

from ...core.lazy import np
from ...core.native import format_error, lib
from .base import Backend, Deferred, Payload

__all__ = ["BACKEND", "OpenvinoGraph", "OvNode", "OvValue"]

_HEADER = struct.Struct("<6Q")
#: The CPU plugin's key: the model's XML is XORed with it (``codec_xor``).
KEY = bytes([0x30, 0x60, 0x70, 0x02, 0x04, 0x08, 0x3F, 0x6F, 0x72, 0x74, 0x78, 0x7F])
#: numpy dtype of the IR's element types that numpy holds.
_DTYPES = {"f64": "<f8", "f32": "<f4", "f16": "<f2", "i64": "<i8", "i32": "<i4",
           "i16": "<i2", "i8": "i1", "u64": "<u8", "u32": "<u4", "u16": "<u2", "u8": "u1",
           "boolean": "?"}
#: The IR's port precisions by element type name (``FP32`` -> ``f32``; ``UNSPECIFIED``
#: is OpenVINO's ``dynamic``); others lower-cased.
_PRECISIONS = {"FP64": "f64", "FP32": "f32", "FP16": "f16", "BF16": "bf16", "I64": "i64",
               "I32": "i32", "I16": "i16", "I8": "i8", "U64": "u64", "U32": "u32",
               "U16": "u16", "U8": "u8", "BOOL": "boolean", "U1": "u1", "I4": "i4",
               "U4": "u4", "UNSPECIFIED": "dynamic"}


#: What the IR writes before the opset of a layer whose element types are relaxed (its
#: ``<data>`` says which, ``type_relax``); OpenVINO reads it as an operation of the opset.
_RELAXED = "type_relaxed_"


def _opset(layer: Any) -> str:
    """The opset of a layer, as OpenVINO reads its ``version``."""
    version = str(layer.get("version", ""))
    return version[len(_RELAXED):] if version.startswith(_RELAXED) else version


class OvNode(NamedTuple):
    """One layer of the model, in the IR's order: its type (``kind``), name, opset, the
    attributes of its ``<data>``, and the value ids of its inputs (by input port) and of
    its outputs (by output port)."""

    kind: str
    name: str
    opset: str
    attributes: Dict[str, str]
    inputs: Tuple[int, ...]
    outputs: Tuple[int, ...]


class OvValue(NamedTuple):
    """One output port of a layer: its value id, element type (the IR's name: ``f32``),
    dims (-1 for a dynamic one), whether a ``Const`` layer makes it, the layer's index
    among the nodes and the port's tensor names."""

    id: int
    datatype: str
    dims: Tuple[int, ...]
    constant: bool
    node: int
    names: Tuple[str, ...]

    @property
    def quantization(self) -> None:
        """None: quantization is made of the model's own layers (``FakeQuantize``)."""
        return None


class _Const(NamedTuple):
    element_type: str
    shape: Tuple[int, ...]
    offset: int
    size: int


class OpenvinoGraph:
    """The model of one OpenVINO payload (checked when made)."""

    def __init__(self, payload: Payload) -> None:
        self._where = payload.where + ".processed<OpenVINO>"
        self._at = payload.offset
        data = payload.data
        self._payload = data
        fields = _HEADER.unpack_from(data, 0)
        regions = []
        for k, name in enumerate(("custom_data", "constants", "model")):
            offset, size = fields[2 * k], fields[2 * k + 1]
            if offset < _HEADER.size or offset > len(data) or size > len(data) - offset:
                raise format_error(lib.OV_E_BAD_HEADER, self._at + 16 * k,
                                   f"{self._where}.header.{name}",
                                   f"{name} ({size} bytes from byte {offset}) lies outside "
                                   f"the payload's {len(data)} bytes after its header")
            regions.append((offset, size))
        (self._custom_at, custom_size), (self._consts_at, self._consts_size), \
            (self._model_at, model_size) = regions
        #: The header: the plugin's data, the constants' and the model's offset and size
        self.header: Dict[str, int] = dict(zip(
            ("custom_data_offset", "custom_data_size", "constants_offset", "constants_size",
             "model_offset", "model_size"), fields))
        #: The plugin's own data (the CPU plugin's ``<cnndata>`` XML), as text
        self.custom_data: str = bytes(data[self._custom_at:self._custom_at + custom_size]
                                      ).decode("utf-8", "replace")
        raw = np.frombuffer(data, np.uint8, model_size, self._model_at)
        plain = raw.tobytes()
        if not plain.startswith(b"<?xml"):
            plain = (raw ^ np.resize(np.frombuffer(KEY, np.uint8), model_size)).tobytes()
        #: The model's IR, the XML OpenVINO reads
        self.xml: str = plain.decode("utf-8", "replace")
        self._read_model(plain)
        #: Value id -> named data key no file holds: OpenVINO payloads name none
        self.missing: Dict[int, str] = {}

    # ------------------------------------------------------------------- the model

    def _error(self, code: int, field: str, message: str, at: int = 0) -> Exception:
        return format_error(code, self._at + self._model_at + at,
                            f"{self._where}.model{field}", message)

    def _parse(self, plain: bytes) -> Any:
        if b"<!DOCTYPE" in plain:
            raise self._error(lib.OV_E_BAD_MODEL, "", "the model's XML declares a document "
                              "type (entities), which the IR never does")
        try:
            return ET.fromstring(plain)
        except ET.ParseError as e:
            line, column = e.position
            starts = [0] + [i + 1 for i, b in enumerate(plain) if b == 0x0A]
            at = starts[min(line, len(starts)) - 1] + column
            raise self._error(lib.OV_E_BAD_MODEL, "", f"the model is not XML: {e}",
                              at) from None
        except (ValueError, LookupError) as e:   # an encoding Python cannot decode
            raise self._error(lib.OV_E_BAD_MODEL, "", f"the model is not XML: {e}") from None

    def _read_model(self, plain: bytes) -> None:
        root = self._parse(plain)
        if root.tag != "net":
            raise self._error(lib.OV_E_BAD_MODEL, "", f"the model's root is <{root.tag}>, "
                              "not <net>")
        #: The IR's version (``net``'s ``version``)
        self.ir_version: str = root.get("version", "")
        #: The model's name
        self.name: str = root.get("name", "")
        self._nodes: List[OvNode] = []
        self._values: List[OvValue] = []
        self._consts: Dict[int, _Const] = {}
        ports: Dict[Tuple[str, str], int] = {}      # (layer id, output port id) -> value id
        inputs: List[List[Tuple[str, str]]] = []    # per layer: (layer id, input port id)
        layers = root.findall("./layers/layer")
        index: Dict[str, int] = {}
        for k, layer in enumerate(layers):
            field = f".layers[{k}]"
            lid = self._attr(layer, "id", field)
            if lid in index:
                raise self._error(lib.OV_E_BAD_MODEL, field + ".id",
                                  f"layer id {lid} is taken by layer {index[lid]}")
            index[lid] = k
            kind = self._attr(layer, "type", field)
            outs = []
            for p, port in enumerate(layer.findall("./output/port")):
                pid = self._attr(port, "id", f"{field}.output[{p}]")
                vid = len(self._values)
                ports[(lid, pid)] = vid
                outs.append(vid)
                self._values.append(OvValue(
                    vid, _PRECISIONS.get(port.get("precision", ""),
                                         port.get("precision", "").lower()),
                    tuple(_dim(d.text) for d in port.findall("dim")), kind == "Const", k,
                    tuple(n for n in port.get("names", "").split(",") if n)))
            inputs.append([(lid, self._attr(port, "id", f"{field}.input[{p}]"))
                           for p, port in enumerate(layer.findall("./input/port"))])
            data = layer.find("data")
            attributes = dict(data.attrib) if data is not None else {}
            if kind == "Const":
                self._consts[outs[0] if outs else -1] = self._const(attributes, field)
            self._nodes.append(OvNode(kind, layer.get("name", ""), _opset(layer),
                                      attributes, (), tuple(outs)))
        feeds: Dict[Tuple[str, str], int] = {}
        for e, edge in enumerate(root.findall("./edges/edge")):
            field = f".edges[{e}]"
            source = (self._attr(edge, "from-layer", field),
                      self._attr(edge, "from-port", field))
            target = (self._attr(edge, "to-layer", field), self._attr(edge, "to-port", field))
            if source not in ports:
                raise self._error(lib.OV_E_BAD_MODEL, field, f"edge from layer {source[0]} "
                                  f"port {source[1]}: no such output port")
            if target in feeds:
                raise self._error(lib.OV_E_BAD_MODEL, field, f"edge to layer {target[0]} "
                                  f"port {target[1]}: the port is fed twice")
            feeds[target] = ports[source]
        for k, wanted in enumerate(inputs):
            missing = [p for p in wanted if p not in feeds]
            if missing:
                raise self._error(lib.OV_E_BAD_MODEL, f".layers[{k}]",
                                  f"input port {missing[0][1]} of layer {missing[0][0]} "
                                  "is fed by no edge")
            self._nodes[k] = self._nodes[k]._replace(inputs=tuple(feeds[p] for p in wanted))
        if -1 in self._consts:
            raise self._error(lib.OV_E_BAD_MODEL, ".layers", "a Const layer has no output")

    def _attr(self, element: Any, name: str, field: str) -> str:
        value = element.get(name)
        if value is None:
            raise self._error(lib.OV_E_BAD_MODEL, field,
                              f"<{element.tag}> has no {name!r} attribute")
        return str(value)

    def _const(self, attributes: Dict[str, str], field: str) -> _Const:
        """A Const layer's bytes, their extent in the constants checked."""
        try:
            element_type = attributes["element_type"]
            shape = tuple(int(d) for d in attributes.get("shape", "").split(",") if d.strip())
            offset, size = int(attributes["offset"]), int(attributes["size"])
        except (KeyError, ValueError) as e:
            raise self._error(lib.OV_E_BAD_CONSTANT, field + ".data",
                              f"a Const layer's data is malformed ({e})") from None
        need = size
        if element_type in _DTYPES:
            need = int(np.prod(shape, dtype=object)) * np.dtype(_DTYPES[element_type]).itemsize
        if (min(shape, default=0) < 0 or offset < 0 or size < need
                or offset > self._consts_size or size > self._consts_size - offset):
            raise self._error(lib.OV_E_BAD_CONSTANT, field + ".data",
                              f"a Const of {element_type}{list(shape)} needs {need} bytes: "
                              f"it gives {size} from byte {offset} of the "
                              f"{self._consts_size} bytes of constants")
        return _Const(element_type, shape, offset, size)

    # ------------------------------------------------------------------ the graph

    @property
    def version(self) -> str:
        """The IR's version (``11``)."""
        return self.ir_version

    @property
    def nodes(self) -> List[OvNode]:
        """The layers, in the IR's order."""
        return list(self._nodes)

    @property
    def values(self) -> List[OvValue]:
        """Every output port, by value id."""
        return list(self._values)

    @property
    def input_ids(self) -> List[int]:
        """The values of the ``Parameter`` layers, in the IR's order."""
        return [v for n in self._nodes if n.kind == "Parameter" for v in n.outputs]

    @property
    def output_ids(self) -> List[int]:
        """The values the ``Result`` layers take, in the IR's order."""
        return [v for n in self._nodes if n.kind == "Result" for v in n.inputs]

    @property
    def arguments(self) -> int:
        """0: no bound on the delegate call's arguments."""
        return 0

    def constants(self) -> Dict[int, np.ndarray]:
        """Every ``Const`` layer's value, by value id: a read-only zero-copy array of its
        shape and element type (raw bytes for an element type numpy does not hold; none
        for ``dynamic``, the CPU plugin's empty placeholder, whose one byte in the
        constants OpenVINO does not read)."""
        out = {}
        for vid, c in self._consts.items():
            raw = Deferred(self._payload, self._consts_at + c.offset, c.size).array()
            if c.element_type == "dynamic":
                out[vid] = raw[:0]
            elif c.element_type in _DTYPES:
                dtype = np.dtype(_DTYPES[c.element_type])
                count = int(np.prod(c.shape, dtype=object))
                out[vid] = raw[:count * dtype.itemsize].view(dtype).reshape(c.shape)
            else:
                out[vid] = raw
        return out

    def torch_constants(self) -> Dict[int, np.ndarray]:
        """:meth:`constants`: the IR keeps torch's layouts."""
        return self.constants()

    def constant_layouts(self) -> Dict[int, Dict[str, Any]]:
        """How each constant is stored: its element type and shape, as the IR gives them
        (``"layout": "as stored"``)."""
        return {vid: {"layout": "as stored", "element_type": c.element_type,
                      "shape": list(c.shape)} for vid, c in self._consts.items()}

    def named_data_keys(self) -> Dict[Tuple[int, str], str]:
        """Empty: the payload names no named data."""
        return {}

    def constant_names(self) -> Dict[int, str]:
        """Empty: a constant's tensor names are the converter's (``_0_weight:0``: the
        placeholder's, its dots made underscores, with a port; a number), when it has
        any, not the module's."""
        return {}

    def __repr__(self) -> str:
        return (f"<OpenvinoGraph {self.name!r}: {len(self._nodes)} layers, "
                f"{len(self._values)} values>")


def _dim(text: Optional[str]) -> int:
    """A port's dim; -1 for a dynamic one (``-1``, ``?``, a range)."""
    try:
        return int(text or "")
    except ValueError:
        return -1


def _read(payload: Payload) -> Optional[OpenvinoGraph]:
    """An ``OpenvinoBackend`` delegate's model; None (opaque bytes) for a payload whose
    header does not start with its own length."""
    data = payload.data
    if len(data) < _HEADER.size or struct.unpack_from("<Q", data, 0)[0] != _HEADER.size:
        return None
    return OpenvinoGraph(payload)


#: OpenVINO's entry in the backend registry.
BACKEND = Backend("OpenvinoBackend", "OpenVINO", "openvino", _read)
