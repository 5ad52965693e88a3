"""What ExecuTorch's and coremltools' own code read in a program's Vulkan and Core ML
delegate payloads: the answers of the ExecuTorch zoo's delegated forms
(benchmarks/zoo_et_build.py), as JSON. Needs executorch (and coremltools for Core ML).

- :func:`program`: what ExecuTorch's program reader (``deserialize_pte_binary``) says of
  each method: its delegates' backend ids and the kernel operators left beside them (a
  partial partition keeps some).
- :func:`vulkan`: per ``VulkanBackend`` delegate, ExecuTorch's header reader
  (``VulkanDelegateHeader``) and its reading of the graph (``flatbuffer_to_vk_graph``'s:
  flatc with the wheel's schema.fbs, into its schema dataclasses): the operator calls'
  names in order, the values (kinds; a tensor's datatype and dims), the inputs and
  outputs, and each constant tensor's datatype, dims and the SHA-256 of its bytes
  (inline, or the named data the program holds for its key, as ``deserialize_pte_binary``
  restores it).
- :func:`coreml`: per ``CoreMLBackend`` delegate, the files ExecuTorch's inmemoryfs
  unflattens the payload into (``executorchcoreml.unflatten_directory_contents``; their
  SHA-256) and coremltools' reading of the package
  (``MLModel(path, skip_model_load=True).get_spec()``): the spec's version, the inputs and
  outputs, the main block's operations in order (the values each names and defines, with
  their types), and each const operation's datatype, shape and the SHA-256 of its value
  (by coremltools' ``BlobReader`` for weight blobs, the spec's protobuf for immediates).

Each payload's entry also says where it is (``method``, ``index`` among the method's
delegates) and its size and SHA-256.
"""
from __future__ import annotations

import hashlib
import json
import math
import os
import re
import struct
import tempfile
from pathlib import Path
from typing import Any, Dict, List, Tuple

#: Bytes per element of each VkDataType, by its number (the wheel's vulkan_graph_schema).
_VK_ITEMSIZE = {0: 1, 1: 1, 2: 1, 3: 4, 4: 2, 5: 4, 6: 8, 7: 8}
#: The offset ExecuTorch's Vulkan serializer writes for bytes kept in named data.
_NAMED = 2**64 - 1


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _pte(path: str) -> Any:
    from executorch.exir._serialize import _program as P
    with open(path, "rb") as f:
        return P.deserialize_pte_binary(f.read())


def _payloads(pte: Any, backend: str) -> List[Tuple[str, int, bytes]]:
    """(method, delegate index in the method, payload) of each ``backend`` delegate."""
    data = pte.program.backend_delegate_data
    return [(plan.name, i, bytes(data[d.processed.index].data))
            for plan in pte.program.execution_plan for i, d in enumerate(plan.delegates)
            if d.id == backend]


def program(path: str) -> Dict[str, Any]:
    """Each method's delegates (backend ids) and kernel operators, by method name."""
    return {plan.name: {"delegates": [d.id for d in plan.delegates],
                        "operators": [o.name + ("." + o.overload if o.overload else "")
                                      for o in plan.operators]}
            for plan in _pte(path).program.execution_plan}


def _vk_graph(flatbuffer: bytes) -> Any:
    """``flatbuffer_to_vk_graph``'s reading: flatc with the wheel's schema.fbs, the JSON
    into the schema's dataclasses; but flatc writes an infinite Double (a mask's fill) as
    a bare ``-inf``, which ``flatbuffer_to_vk_graph``'s JSON parser refuses, so it is
    made JSON's ``-Infinity`` first."""
    from executorch.backends.vulkan.serialization import vulkan_graph_schema as S
    from executorch.backends.vulkan.serialization import vulkan_graph_serialize as V
    from executorch.exir._serialize._dataclass import _json_to_dataclass
    from executorch.exir._serialize._flatbuffer import _flatc_decompile
    schema = os.path.join(os.path.dirname(V.__file__), "schema.fbs")
    with tempfile.TemporaryDirectory() as d:
        with open(os.path.join(d, "graph.bin"), "wb") as f:
            f.write(flatbuffer)
        _flatc_decompile(d, schema, os.path.join(d, "graph.bin"), ["--raw-binary"])
        with open(os.path.join(d, "graph.json"), encoding="utf-8") as f:
            text = re.sub(r'(?<![\w"])(-?)inf(?![\w"])', r"\1Infinity", f.read())
    return _json_to_dataclass(json.loads(text), S.VkGraph)


def _vk_value(v: Any) -> List[Any]:
    """A value's kind; a tensor's also its datatype, dims and whether it is a constant."""
    kind = type(v).__name__
    return [kind, int(v.datatype), list(v.dims), v.constant_id >= 0] if kind == "VkTensor" \
        else [kind]


def vulkan(path: str) -> List[Dict[str, Any]]:
    """ExecuTorch's reading of every Vulkan payload of the program (module docstring)."""
    from executorch.backends.vulkan.serialization import vulkan_graph_serialize as V
    pte = _pte(path)
    store = pte.named_data
    out = []
    for method, index, data in _payloads(pte, "VulkanBackend"):
        h = V.VulkanDelegateHeader.from_bytes(data[:V.VulkanDelegateHeader.EXPECTED_LENGTH])
        assert h.is_valid()
        graph = _vk_graph(V.extract_vk_flatbuffer(data))
        constants = {}
        for vid, value in enumerate(graph.values):
            t = value.value
            if type(t).__name__ != "VkTensor" or t.constant_id < 0:
                continue
            entry = graph.constants[t.constant_id]
            if entry.offset == _NAMED:
                stored = store.buffers[store.pte_data[entry.named_key].buffer_index]
            else:
                start = h.bytes_offset + entry.offset
                stored = data[start:start + entry.length]
            nbytes = math.prod(t.dims) * _VK_ITEMSIZE[int(t.datatype)]
            constants[str(vid)] = {
                "datatype": int(t.datatype), "dims": list(t.dims),
                "named_key": entry.named_key if entry.offset == _NAMED else None,
                "length": entry.length, "sha256": _sha(bytes(stored[:nbytes]))}
        out.append({"method": method, "index": index, "payload_size": len(data),
                    "payload_sha256": _sha(data),
                    "header": {"flatbuffer_offset": h.flatbuffer_offset,
                               "flatbuffer_size": h.flatbuffer_size,
                               "constant_data_offset": h.bytes_offset,
                               "constant_data_size": h.bytes_size},
                    "version": graph.version,
                    "nodes": [[c.name, list(c.args), c.node_id] for c in graph.chain],
                    "values": [_vk_value(v.value) for v in graph.values],
                    "input_ids": list(graph.input_ids), "output_ids": list(graph.output_ids),
                    "constants": constants})
    return out


def coreml(path: str) -> List[Dict[str, Any]]:
    """ExecuTorch's and coremltools' reading of every Core ML payload of the program
    (module docstring)."""
    out = []
    for method, index, data in _payloads(_pte(path), "CoreMLBackend"):
        with tempfile.TemporaryDirectory() as tmp:
            entry = _coreml_package(data, tmp)
        out.append({"method": method, "index": index, "payload_size": len(data),
                    "payload_sha256": _sha(data), **entry})
    return out


def _mil_type(t: Any) -> Tuple[str, str, List[int]]:
    """A MIL ValueType: its kind, and a tensor's datatype and dims (-1: unknown)."""
    from coremltools.proto import MIL_pb2
    kind = t.WhichOneof("type")
    if kind != "tensorType":
        return kind, "", []
    tensor = t.tensorType
    return kind, MIL_pb2.DataType.Name(tensor.dataType).lower(), [
        d.constant.size if d.WhichOneof("dimension") == "constant" else -1
        for d in tensor.dimensions]


def _coreml_package(data: bytes, tmp: str) -> Dict[str, Any]:
    import coremltools as ct
    from coremltools.libmilstoragepython import _BlobStorageReader
    from coremltools.proto import FeatureTypes_pb2, MIL_pb2
    from executorch.backends.apple.coreml import executorchcoreml
    assert executorchcoreml.unflatten_directory_contents(data, tmp)
    (root,) = os.listdir(tmp)
    root = os.path.join(tmp, root)
    files = {f.relative_to(root).as_posix(): _sha(f.read_bytes())
             for f in sorted(Path(root).rglob("*")) if f.is_file()}
    package = os.path.join(root, "model.mlpackage")
    spec = ct.models.MLModel(package, skip_model_load=True).get_spec()
    weights = os.path.join(package, "Data", "com.apple.CoreML", "weights", "weight.bin")
    blobs = _BlobStorageReader(weights) if os.path.exists(weights) else None
    main = spec.mlProgram.functions["main"]
    block = main.block_specializations[main.opset]
    ops, constants = [], {}
    for op in block.operations:
        ops.append([op.type, sorted(b.name for arg in op.inputs.values()
                                    for b in arg.arguments if b.name),
                    [[o.name, *_mil_type(o.type)] for o in op.outputs]])
        if op.type != "const" or "val" not in op.attributes:
            continue
        val = op.attributes["val"]
        tensor = val.type.tensorType
        dtype = MIL_pb2.DataType.Name(tensor.dataType).lower()
        if val.HasField("blobFileValue"):
            read = {"float16": "read_fp16_data", "float32": "read_float_data",
                    "int8": "read_int8_data", "uint8": "read_uint8_data",
                    "int16": "read_int16_data", "uint16": "read_uint16_data",
                    "int32": "read_int32_data", "uint32": "read_uint32_data"}[dtype]
            assert blobs is not None
            raw = bytes(memoryview(getattr(blobs, read)(val.blobFileValue.offset)).cast("B"))
        elif dtype in ("float16", "bfloat16"):
            raw = val.immediateValue.tensor.bytes.values
        elif dtype in ("float32", "float64"):
            immediate = val.immediateValue.tensor
            values = immediate.floats.values if dtype == "float32" else immediate.doubles.values
            raw = struct.pack(f"<{len(values)}{'f' if dtype == 'float32' else 'd'}", *values)
        else:
            continue   # an integer, bool or string: a parameter (strides, pads), no weight
        constants[op.outputs[0].name] = {
            "dtype": dtype, "blob": val.HasField("blobFileValue"),
            "shape": [d.constant.size for d in tensor.dimensions], "sha256": _sha(raw)}
    array_types = FeatureTypes_pb2.ArrayFeatureType.ArrayDataType

    def feature(f: Any) -> Dict[str, Any]:
        t = f.type
        return {"name": f.name, "kind": t.WhichOneof("Type"),
                "shape": list(t.multiArrayType.shape),
                "dataType": array_types.Name(t.multiArrayType.dataType).lower()}
    return {"root": os.path.basename(root), "files": files,
            "specification_version": spec.specificationVersion,
            "inputs": [feature(f) for f in spec.description.input],
            "outputs": [feature(f) for f in spec.description.output],
            "function_inputs": [[i.name, *_mil_type(i.type)] for i in main.inputs],
            "block_outputs": list(block.outputs), "operations": ops,
            "constants": constants}
