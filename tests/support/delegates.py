"""The graphs a program's delegates of one backend give, for the backends' suites."""
from __future__ import annotations

from typing import Any, List, Type, TypeVar

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
