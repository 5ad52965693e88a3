"""Module.tensor_records and tensor_record(t): every tensor as the file stores it, against
what torch said of the same tensors (dtype, shape, strides, storage offset,
requires_grad, quantization) and the file's own bytes (the record's byte offset holds the
tensor's first element as torch read it)."""
from __future__ import annotations

from typing import Any, Dict

import numpy as np
import pytest

import pyflatmodule as pfm

from support import MODEL_FILES, load_expectation, model_path


def _tensors_with_torch_descriptions() -> Any:
    for name in MODEL_FILES:
        doc, _ = load_expectation(name, "oracle")
        if "state_dict" in doc and doc["state_dict"].get("tensors"):
            yield name


FILES = list(_tensors_with_torch_descriptions())


@pytest.mark.parametrize("name", FILES)
def test_records_are_what_torch_reports(name: str) -> None:
    doc, arrays = load_expectation(name, "oracle")
    torch_tensors: Dict[str, Any] = doc["state_dict"]["tensors"]
    with pfm.load(model_path(name)) as m:
        assert isinstance(m, pfm.Module)
        state = m.state_dict()
        raw = open(model_path(name), "rb").read()
        for key, want in torch_tensors.items():
            r = m.tensor_record(state[key])
            assert r is not None, key
            assert r.dtype == want["dtype"], key
            assert list(r.shape) == want["shape"], key
            assert list(r.strides) == want["stride"], key
            assert r.storage_offset == want["storage_offset"], key
            assert (r.qscheme is not None) == ("qscheme" in want), key
            assert r in m.tensor_records
            data = arrays.get(want.get("data", ""))
            if data is not None and data.size and r.qscheme is None and not r.dtype.startswith(
                    ("quint4", "quint2", "float4")):
                # the first element's bytes as torch stored them (row-major data in the npz)
                first = data.tobytes()[:np.dtype(state[key].dtype).itemsize]
                assert raw[r.offset:r.offset + len(first)] == first, key


def _attribute_tensors(node: Dict[str, Any], path: str = "") -> Any:
    """(dotted path, torch's description) of every tensor torch found by attribute."""
    if node.get("t") == "tensor":
        yield path, node["v"]
    for name, child in (node.get("attrs") or {}).items():
        yield from _attribute_tensors(child, f"{path}.{name}" if path else name)


@pytest.mark.parametrize("name", [n for n in MODEL_FILES
                                  if "attributes" in load_expectation(n, "oracle")[0]])
def test_requires_grad_is_the_attributes(name: str) -> None:
    """state_dict() detaches; the tensors reached by attribute keep the stored flag."""
    doc, _ = load_expectation(name, "oracle")
    seen = 0
    with pfm.load(model_path(name)) as m:
        assert isinstance(m, pfm.Module)
        for path, want in _attribute_tensors(doc["attributes"]):
            value: Any = m.root
            for part in path.split("."):
                value = getattr(value, part)
            r = m.tensor_record(value)
            if r is None:   # quantized tensors: their record is the QuantizedTensor's
                continue
            assert r.requires_grad == want["requires_grad"], path
            assert list(r.shape) == want["shape"], path
            seen += 1
    assert seen or not list(_attribute_tensors(doc["attributes"]))
