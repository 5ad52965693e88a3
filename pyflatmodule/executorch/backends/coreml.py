"""Core ML delegate payloads: the package a ``CoreMLBackend`` delegate runs, zero-copy.

A program lowered to Core ML (ExecuTorch's ``CoreMLPartitioner``) keeps in the delegate's
payload a directory flattened by ExecuTorch's ``inmemoryfs``: each file's bytes, then the
file table, JSON written backwards at the payload's end (``{"nodes": [...]}``, each node a
file with its ``dataRegion`` in the payload or a directory with its ``children`` by
index, the root last). The directory holds ``metadata.json`` (the identifier and the
input and output names) and ``model.mlpackage``: its ``Manifest.json`` names the model
spec, Core ML's ``Model`` protobuf, whose ML program (MIL) lists the operations, and
whose constants sit in weight blobs (``weights/weight.bin``).

Everything is checked when the graph is read, bounded by the payload: the file table
(each node, name and region; children before their parent, each once), the spec
(protobuf's wire format, :mod:`pyflatmodule.core.protobuf`), every value an operation
names, and every weight blob against its tensor. Nothing is copied: :attr:`CoreMLGraph.files`
are views of the payload, :meth:`CoreMLGraph.constants` arrays over the blobs.
:meth:`CoreMLGraph.extract` writes the directory back, a package coremltools opens.
"""
from __future__ import annotations

import json
import math
import os
import struct
from typing import Any, Dict, List, NamedTuple, Optional, Tuple

from ...core.lazy import np
from ...core.native import format_error, lib
from ...core.protobuf import Message, WireError
from .base import Backend, Payload, payload_bytes

__all__ = ["BACKEND", "CoreMLGraph", "CmlFeature", "CmlNode", "CmlValue"]

#: The package inside the payload and its spec's place by default.
PACKAGE = "model.mlpackage"
#: MIL's DataType names by number (MIL.proto).
_MIL_DTYPES: Dict[int, str] = {
    1: "bool", 2: "string", 10: "float16", 11: "float32", 12: "float64", 13: "bfloat16",
    21: "int8", 22: "int16", 23: "int32", 24: "int64", 25: "int4", 31: "uint8", 32: "uint16",
    33: "uint32", 34: "uint64", 35: "uint4", 36: "uint2", 37: "uint1", 38: "uint6",
    39: "uint3", 40: "float8_e4m3fn", 41: "float8_e5m2"}
#: numpy's dtype of each MIL datatype a weight blob holds whole (ml_dtypes' for the ones
#: numpy lacks), and the bits per element of the sub-byte ones (given as packed bytes).
_NUMPY = {"bool": "?", "float16": "<f2", "float32": "<f4", "float64": "<f8", "int8": "i1",
          "int16": "<i2", "int32": "<i4", "int64": "<i8", "uint8": "u1", "uint16": "<u2",
          "uint32": "<u4", "uint64": "<u8"}
_ML_DTYPES = ("bfloat16", "float8_e4m3fn", "float8_e5m2")
#: The floating-point datatypes whose immediate constants (a const operation's value
#: held in the spec, not in a blob) are weights, and where a ``TensorValue`` holds them:
#: (its field, the field inside that). Integer, bool and string immediates are an
#: operation's parameters (strides, pads, a dtype's name), not weights.
_IMMEDIATE = {"float32": (1, 1), "float64": (6, 1), "float16": (7, 1), "bfloat16": (7, 1)}
_SUB_BYTE = {"int4": 4, "uint4": 4, "uint2": 2, "uint1": 1, "uint6": 6, "uint3": 3}
#: ArrayFeatureType.ArrayDataType numbers (FeatureTypes.proto) -> name.
_ARRAY_DTYPES = {65568: "float32", 65600: "float64", 131104: "int32", 131080: "int8",
                 65552: "float16"}
#: FeatureType's fields (FeatureTypes.proto) -> the kind of feature.
_FEATURE_KINDS = {1: "int64", 2: "double", 3: "string", 4: "image", 5: "multi_array",
                  6: "dictionary", 7: "sequence", 8: "state"}
#: A weight blob's metadata: sentinel, its MIL blob dtype, size in bytes, offset of its
#: data in the weight file (MILBlob's storage format, version 2).
_BLOB = struct.Struct("<IIQQ")
_BLOB_SENTINEL = 0xDEADBEEF
_BLOB_HEADER = 64
_MODEL_PATH = "@model_path/"


class CmlFeature(NamedTuple):
    """An input or output of the model as its spec describes it: name, kind
    (``multi_array``, ``image``, ``int64``, ...), and for a multi-array its datatype and
    shape."""

    name: str
    kind: str
    datatype: str
    shape: Tuple[int, ...]


class CmlNode(NamedTuple):
    """One operation of the ML program's main block, in order: its type (``linear``,
    ``conv``, ``const``, ...), the value ids its arguments name and those it defines."""

    kind: str
    inputs: Tuple[int, ...]
    outputs: Tuple[int, ...]


class CmlValue(NamedTuple):
    """One named value of the main function (its inputs, then each operation's outputs):
    its name, kind (``tensor``, ``list``, ...), a tensor's datatype and dims (-1 for one
    of unknown size), and whether it is a constant held in a weight blob."""

    id: int
    name: str
    kind: str
    datatype: str
    dims: Tuple[int, ...]
    constant: bool

    @property
    def quantization(self) -> None:
        """None: quantized weights are operations of the program (``constexpr_*``)."""
        return None


def _dtype(datatype: str) -> Optional[np.dtype]:
    """numpy's dtype of a MIL datatype held whole, None for the others."""
    if datatype in _ML_DTYPES:
        import ml_dtypes
        found: np.dtype = np.dtype(getattr(ml_dtypes, datatype))
        return found
    return np.dtype(_NUMPY[datatype]) if datatype in _NUMPY else None


def _fs_error(payload: Payload, where: str, message: str, at: Optional[int] = None) -> Any:
    return format_error(lib.CML_E_BAD_FILESYSTEM,
                        payload.offset + (len(payload.data) if at is None else at),
                        f"{payload.where}.processed<inmemoryfs>{where}", message)


def _metadata_start(data: memoryview) -> int:
    """Where the file table's JSON, written backwards, starts (its first byte, the
    object's closing ``}``): read from the payload's end as ExecuTorch's reader reads it,
    one JSON object, strings and escapes respected. -1 if there is none."""
    depth, in_string, i = 0, False, len(data) - 1
    while i >= 0:
        c = data[i]
        if in_string:
            if c == 0x5C:        # a backslash: the next byte is escaped
                i -= 1
            elif c == 0x22:
                in_string = False
        elif c == 0x22:
            in_string = True
        elif c == 0x7B:          # {
            depth += 1
        elif c == 0x7D:          # }
            depth -= 1
            if depth == 0:
                return i
        elif depth == 0:
            return -1
        i -= 1
    return -1


def _node_name(name: Any) -> bool:
    return (isinstance(name, str) and name not in ("", ".", "..")
            and not any(c in name for c in "/\\\0"))


def _filesystem(payload: Payload) -> Tuple[Dict[str, Tuple[int, int]], List[str]]:
    """The payload's files (path -> (offset, size) in the payload) and directories, by
    their paths under the root, as ExecuTorch's ``make_from_buffer`` rebuilds them; every
    fault a located FormatError."""
    data = payload.data
    start = _metadata_start(data)
    if start < 0:
        raise _fs_error(payload, "", "no file table (a JSON object written backwards) ends "
                        "the payload")
    text = bytes(data[start:])[::-1]
    try:
        table = json.loads(text)
    except (ValueError, RecursionError) as e:
        raise _fs_error(payload, "", f"the file table is not JSON: {e}", start) from None
    nodes = table.get("nodes") if isinstance(table, dict) else None
    if not isinstance(nodes, list) or not nodes:
        raise _fs_error(payload, "", "the file table has no nodes", start)
    taken = [False] * len(nodes)
    for i, n in enumerate(nodes):
        where = f".nodes[{i}]"
        if not isinstance(n, dict) or n.get("kind") not in (0, 1) \
                or not _node_name(n.get("name")):
            raise _fs_error(payload, where, "a node is a file (kind 0) or a directory "
                            "(kind 1) with a name that is a path component", start)
        if n["kind"] == 0:
            region = n.get("dataRegion")
            off = region.get("offset") if isinstance(region, dict) else None
            size = region.get("size") if isinstance(region, dict) else None
            if not (isinstance(off, int) and isinstance(size, int)
                    and 0 <= off <= start and 0 <= size <= start - off):
                raise _fs_error(payload, where, f"file {n['name']!r}: its bytes "
                                f"({off!r}, {size!r}) are not inside the payload's files "
                                f"({start} bytes)", start)
        else:
            children = n.get("children")
            if not isinstance(children, dict):
                raise _fs_error(payload, where, "a directory's children map names to "
                                "node indices", start)
            for name, k in children.items():
                # the runtime builds each directory from the nodes before it, by index
                if not _node_name(name) or not isinstance(k, int) or not 0 <= k < i \
                        or taken[k]:
                    raise _fs_error(payload, f"{where}.children[{name!r}]", "a child is an "
                                    "earlier node, taken by no other directory, by a name "
                                    "that is a path component", start)
                taken[k] = True
    if nodes[-1]["kind"] != 1:
        raise _fs_error(payload, f".nodes[{len(nodes) - 1}]", "the root (the last node) "
                        "is not a directory", start)
    files: Dict[str, Tuple[int, int]] = {}
    dirs: List[str] = []
    stack: List[Tuple[int, str]] = [(len(nodes) - 1, "")]
    while stack:
        k, path = stack.pop()
        n = nodes[k]
        if n["kind"] == 0:
            files[path] = (n["dataRegion"]["offset"], n["dataRegion"]["size"])
            continue
        if path:
            dirs.append(path)
        for name, child in n["children"].items():
            stack.append((child, f"{path}/{name}" if path else name))
    return dict(sorted(files.items())), sorted(dirs)


class CoreMLGraph:
    """The Core ML package of one delegate payload (checked when made)."""

    def __init__(self, payload: Payload) -> None:
        self._payload = payload.data
        self._where = payload.where + ".processed<CoreML>."
        self._offset = payload.offset
        spans, self._dirs = _filesystem(payload)
        #: Every file of the payload's directory by its path, as a read-only view
        self.files: Dict[str, memoryview] = {p: payload.data[o:o + n]
                                             for p, (o, n) in spans.items()}
        self._spans = spans
        #: ``metadata.json``: the identifier and the input and output names the writer
        #: gave (empty if the payload has none)
        self.metadata: Dict[str, Any] = self._json("metadata.json")
        #: Value id -> named data key no file holds: Core ML payloads name none
        self.missing: Dict[int, str] = {}
        self._spec_path = self._spec()
        self.spec_version = 0
        self.inputs: List[CmlFeature] = []
        self.outputs: List[CmlFeature] = []
        self._values: List[CmlValue] = []
        self._nodes: List[CmlNode] = []
        self._input_ids: List[int] = []
        self._output_ids: List[int] = []
        self._blobs: Dict[int, Tuple[str, int]] = {}
        self._immediates: Dict[int, Message] = {}
        if self._spec_path is not None:
            try:
                self._read_spec(Message(self.files[self._spec_path]))
            except WireError as e:
                raise self._error(lib.CML_E_BAD_SPEC, self._spec_path, e.offset,
                                  e.reason) from None
        self._constants = {vid: self._blob(vid, *ref) for vid, ref in self._blobs.items()}
        try:
            self._constants.update((vid, self._immediate(vid, t))
                                   for vid, t in self._immediates.items())
        except WireError as e:
            raise self._error(lib.CML_E_BAD_SPEC, self._spec_path or "", e.offset,
                              e.reason) from None
        self._constants = dict(sorted(self._constants.items()))

    # ------------------------------------------------------------------ reading

    def _error(self, code: int, path: str, at: int, message: str) -> Any:
        """FormatError ``code`` at byte ``at`` of file ``path`` of the payload."""
        return format_error(code, self._offset + self._spans[path][0] + at,
                            f"{self._where}files[{path!r}]", message)

    def _json(self, path: str) -> Dict[str, Any]:
        if path not in self.files:
            return {}
        try:
            doc = json.loads(bytes(self.files[path]))
        except (ValueError, RecursionError) as e:
            raise self._error(lib.CML_E_BAD_FILESYSTEM, path, 0, f"not JSON: {e}") from None
        if not isinstance(doc, dict):
            raise self._error(lib.CML_E_BAD_FILESYSTEM, path, 0, "not a JSON object")
        return doc

    def _spec(self) -> Optional[str]:
        """The model spec's path: the one the package's manifest names as its root model
        (None for a payload without a package, e.g. a compiled model)."""
        manifest = f"{PACKAGE}/Manifest.json"
        if manifest not in self.files:
            return None
        doc = self._json(manifest)
        entries = doc.get("itemInfoEntries")
        root = doc.get("rootModelIdentifier")
        entry = entries.get(root) if isinstance(entries, dict) and isinstance(root, str) \
            else None
        path = entry.get("path") if isinstance(entry, dict) else None
        spec = f"{PACKAGE}/Data/{path}" if isinstance(path, str) else None
        if spec not in self.files:
            raise self._error(lib.CML_E_BAD_FILESYSTEM, manifest, 0,
                              f"the root model the manifest names ({path!r}) is not a file "
                              "of the package")
        return spec

    def _read_spec(self, model: Message) -> None:
        """Core ML's ``Model`` (Model.proto): version, description, ML program."""
        self.spec_version = model.signed(1)
        description = model.message(2)
        self.inputs = [self._feature(f) for f in description.messages(1)]
        self.outputs = [self._feature(f) for f in description.messages(10)]
        if model.has(502):
            self._read_program(model.message(502), description.text(21) or "main")

    @staticmethod
    def _feature(f: Message) -> CmlFeature:
        """A ``FeatureDescription``: name and type (a multi-array's datatype and shape)."""
        t = f.message(3)
        kind = next((k for n, k in _FEATURE_KINDS.items() if t.has(n)), "unknown")
        datatype, shape = kind, ()   # type: Tuple[str, Tuple[int, ...]]
        if kind == "multi_array":
            a = t.message(5)
            dtype = a.varint(2)
            datatype = _ARRAY_DTYPES.get(dtype, f"array_type_{dtype}")
            shape = tuple(a.varints(1))
        return CmlFeature(f.text(1), kind, datatype, shape)

    def _read_program(self, program: Message, function: str) -> None:
        """The ML program's main function (MIL.proto ``Program``): its inputs, its block's
        operations and outputs, every value they name checked against those defined."""
        functions = dict(program.entries(2))
        if function not in functions:
            raise WireError(f"the ML program has no function {function!r}", program.start)
        main = functions[function]
        blocks = dict(main.entries(3))
        opset = main.text(2)
        if opset not in blocks:
            raise WireError(f"function {function!r} has no block for its opset {opset!r}",
                            main.start)
        block = blocks[opset]
        ids: Dict[str, int] = {}

        def define(named: Message, at: int) -> int:
            value = self._value(named, len(self._values))
            if value.name in ids:
                raise WireError(f"value {value.name!r} is defined twice", at)
            ids[value.name] = value.id
            self._values.append(value)
            return value.id

        self._input_ids = [define(v, v.start) for v in main.messages(1)]
        for op in block.messages(3):
            uses = []
            for _, argument in op.entries(2):
                for binding in argument.messages(1):
                    if binding.has(1):
                        name = binding.text(1)
                        if name not in ids:
                            raise WireError(f"operation {op.text(1)!r} names value {name!r}, "
                                            "which nothing before it defines", binding.start)
                        uses.append(ids[name])
            defined = tuple(define(v, v.start) for v in op.messages(3))
            self._nodes.append(CmlNode(op.text(1), tuple(uses), defined))
            if op.text(1) == "const" and len(defined) == 1:
                val = dict(op.entries(5)).get("val")
                if val is not None and val.has(5):
                    blob = val.message(5)
                    self._blobs[defined[0]] = (blob.text(1), blob.varint(2))
                elif val is not None and val.has(3) \
                        and self._values[defined[0]].datatype in _IMMEDIATE:
                    self._immediates[defined[0]] = val.message(3).message(1)
        for name in block.texts(2):
            if name not in ids:
                raise WireError(f"the block's output {name!r} is not defined", block.start)
            self._output_ids.append(ids[name])

    @staticmethod
    def _value(named: Message, vid: int) -> CmlValue:
        """A ``NamedValueType``: its name and type (a tensor's datatype and dims)."""
        t = named.message(2)
        kinds = {1: "tensor", 2: "list", 3: "tuple", 4: "dictionary", 5: "state"}
        kind = next((k for n, k in kinds.items() if t.has(n)), "unknown")
        datatype, dims = kind, ()   # type: Tuple[str, Tuple[int, ...]]
        if kind == "tensor":
            tensor = t.message(1)
            dtype = tensor.varint(1)
            datatype = _MIL_DTYPES.get(dtype, f"type_{dtype}")
            dims = tuple(d.message(1).varint(1) if d.has(1) else -1
                         for d in tensor.messages(3))
        return CmlValue(vid, named.text(1), kind, datatype, dims, False)

    def _blob(self, vid: int, file: str, offset: int) -> np.ndarray:
        """The weight blob of constant ``vid``: ``file`` (``@model_path/...``) at
        ``offset``, its metadata checked against the tensor, as a read-only array."""
        value = self._values[vid]
        self._values[vid] = value._replace(constant=True)
        path = f"{PACKAGE}/Data/com.apple.CoreML/{file[len(_MODEL_PATH):]}" \
            if file.startswith(_MODEL_PATH) else None
        if path not in self.files:
            raise self._error(lib.CML_E_BAD_BLOB, self._spec_path or "", 0,
                              f"constant {value.name!r}: weight file {file!r} is not in "
                              "the package")
        data = self.files[path]
        if offset > len(data) - _BLOB.size or offset < _BLOB_HEADER:
            raise self._error(lib.CML_E_BAD_BLOB, path, 0, f"constant {value.name!r}: its "
                              f"blob's metadata at {offset} is not inside the file")
        sentinel, _, size, at = _BLOB.unpack_from(data, offset)
        if sentinel != _BLOB_SENTINEL or at > len(data) or size > len(data) - at:
            raise self._error(lib.CML_E_BAD_BLOB, path, offset, f"constant {value.name!r}: "
                              "its blob's metadata is malformed or its bytes lie outside "
                              "the file")
        dtype = _dtype(value.datatype)
        count = math.prod(value.dims) if all(d >= 0 for d in value.dims) else -1
        bits = dtype.itemsize * 8 if dtype is not None else _SUB_BYTE.get(value.datatype, 0)
        if count < 0 or not bits or size != -(-count * bits // 8):
            raise self._error(lib.CML_E_BAD_BLOB, path, offset, f"constant {value.name!r}: "
                              f"its blob holds {size} bytes, its tensor ({value.datatype}, "
                              f"{list(value.dims)}) needs {-(-max(count, 0) * bits // 8)}")
        raw = payload_bytes(data, at, size)
        if dtype is None:        # sub-byte values: their packed bytes
            return raw
        return raw.view(dtype).reshape(value.dims)

    def _immediate(self, vid: int, tensor: Message) -> np.ndarray:
        """Constant ``vid`` held in the spec (a ``TensorValue``: float32 and float64 as
        packed values, float16 and bfloat16 as bytes), as a read-only array over it."""
        value = self._values[vid]
        self._values[vid] = value._replace(constant=True)
        dtype = _dtype(value.datatype)
        assert dtype is not None   # _IMMEDIATE's datatypes
        field, inner = _IMMEDIATE[value.datatype]
        raw = tensor.message(field).data(1) if tensor.has(field) else memoryview(b"")
        count = math.prod(value.dims) if all(d >= 0 for d in value.dims) else -1
        if count < 0 or len(raw) != count * dtype.itemsize:
            raise WireError(f"constant {value.name!r} holds {len(raw)} bytes in field "
                            f"{field}.{inner}, its tensor ({value.datatype}, "
                            f"{list(value.dims)}) needs {max(count, 0) * dtype.itemsize}",
                            tensor.start)
        return payload_bytes(raw, 0, len(raw)).view(dtype).reshape(value.dims)

    # ------------------------------------------------------------------ the graph

    @property
    def version(self) -> str:
        """The Core ML specification version of the model spec."""
        return str(self.spec_version)

    @property
    def spec(self) -> Optional[memoryview]:
        """The model spec (Core ML's ``Model`` protobuf) as its bytes; None for a payload
        without a package."""
        return self.files[self._spec_path] if self._spec_path is not None else None

    @property
    def input_ids(self) -> List[int]:
        """Value ids of the main function's inputs."""
        return list(self._input_ids)

    @property
    def output_ids(self) -> List[int]:
        """Value ids of the main block's outputs."""
        return list(self._output_ids)

    @property
    def arguments(self) -> int:
        """0: the delegate call's arguments are not bound by the payload."""
        return 0

    @property
    def nodes(self) -> List[CmlNode]:
        """The main block's operations, in order."""
        return list(self._nodes)

    @property
    def values(self) -> List[CmlValue]:
        """The main function's named values, by id."""
        return list(self._values)

    def constants(self) -> Dict[int, np.ndarray]:
        """Every constant held in a weight blob, by value id: read-only arrays over the
        payload, with the tensor's datatype and dims (sub-byte types: packed bytes)."""
        return dict(self._constants)

    def torch_constants(self) -> Dict[int, np.ndarray]:
        """:meth:`constants`: Core ML's MIL keeps torch's layouts (conv weights ``OIHW``,
        linear ``[out, in]``), in the datatype the converter chose (float16 by default)."""
        return self.constants()

    def constant_layouts(self) -> Dict[int, Dict[str, Any]]:
        """Each constant ``"as stored"``, with its shape."""
        return {vid: {"layout": "as stored", "shape": list(a.shape)}
                for vid, a in self._constants.items()}

    def named_data_keys(self) -> Dict[Tuple[int, str], str]:
        """Empty: a Core ML payload keeps its weights inside itself."""
        return {}

    def constant_names(self) -> Dict[int, str]:
        """Empty: a Core ML constant's name is its MIL operation's
        (``p_conv_weight_to_fp16``: the placeholder's, cast by the writer)."""
        return {}

    def extract(self, directory: str) -> str:
        """Write the payload's directory under ``directory`` (created if need be; files
        there are replaced) and return the package's path, which coremltools opens
        (``coremltools.models.MLModel(path, skip_model_load=True)``)."""
        for d in self._dirs:
            os.makedirs(os.path.join(directory, *d.split("/")), exist_ok=True)
        os.makedirs(directory, exist_ok=True)
        for path, view in self.files.items():
            with open(os.path.join(directory, *path.split("/")), "wb") as f:
                f.write(view)
        return os.path.join(directory, PACKAGE)

    def __repr__(self) -> str:
        return (f"<CoreMLGraph spec {self.spec_version}: {len(self.files)} files, "
                f"{len(self._nodes)} operations, {len(self._constants)} constants>")


def _read(payload: Payload) -> CoreMLGraph:
    """A ``CoreMLBackend`` delegate's package."""
    return CoreMLGraph(payload)


#: Core ML's entry in the backend registry.
BACKEND = Backend("CoreMLBackend", "Core ML", "coreml", _read)
