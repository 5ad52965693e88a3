"""The graphs a program's delegates of one backend give, for the backends' suites."""
from __future__ import annotations

from typing import Any, Dict, List, Type, TypeVar

import pytest

import pyflatmodule as pfm

from .checked import load_full

G = TypeVar("G")

#: Bytes per element of each TOSA DType in the TOSA programs, and numpy's dtype for it
#: (TOSA's serializer, convertDataToUint8Vec: little-endian, FP32 as IEEE single).
TOSA_ELEMENTS = {"FP32": (4, "<f4"), "INT8": (1, "i1"), "INT32": (4, "<i4")}
#: The IR's names of the OpenVINO operations its serializer writes otherwise
#: (``translate_type_name``: ``Constant`` is ``Const``, and so on; OpenVINO's IR reader
#: maps them back), seen in what ``openvino.serialize`` writes.
OV_IR_NAMES = {"Constant": "Const", "PRelu": "PReLU", "Relu": "ReLU", "Softmax": "SoftMax"}

#: ScalarType numbers as ExecuTorch's native_graph.fbs declares them -> torch's names
NATIVE_DTYPES = {0: "uint8", 1: "int8", 2: "int16", 3: "int32", 4: "int64", 5: "float16",
                 6: "float32", 7: "float64", 11: "bool", 15: "bfloat16"}


def native_value_names(method: Dict[str, Any]) -> List[str]:
    """The values' names of a native payload's method in id order, from ExecuTorch's
    reading (its ``deserialize_program``'s dataclasses as JSON): the graph's inputs, the
    method's constants, its mutable buffers, each non-placeholder node's outputs."""
    g = method["graph"]
    names = list(g["inputs"] or [])
    names += [c["name"] for c in method["constants"] or []]
    names += [b["name"] for b in method["mutable_buffers"] or []]
    for node in g["nodes"]:
        if node["op_kind"] == 1:   # PLACEHOLDER: restates an input or a binding
            continue
        for o in node["outputs"] or []:
            names += o["names"] if o["kind"] == 1 else [o["name"]]
    return names


def graphs(p: Any, backend_id: str, cls: Type[G]) -> List[G]:
    """Every delegate's graph in method order, asserting that each delegate is
    ``backend_id``'s and its graph a ``cls``."""
    out: List[G] = []
    for m in p.methods.values():
        for d in m.delegates:
            assert d.id == backend_id
            assert isinstance(d.graph, cls), d.graph
            out.append(d.graph)
    return out


def refused(data: bytes, code: str, offset: int, path: str) -> None:
    """Asserts that reading every delegate's graph of the program ``data`` (both ways,
    ``load_full``) fails with FormatError ``code`` at file offset ``offset``, at a field
    path ending in ``path``."""
    with pytest.raises(pfm.FormatError) as e:
        with load_full(data) as p:
            [d.graph for m in p.methods.values() for d in m.delegates]
    assert (e.value.code, e.value.offset) == (code, offset), e.value
    assert e.value.path.endswith(path), e.value
