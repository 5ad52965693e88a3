"""Summing every weight from the path: through pyflatmodule's arrays vs through
``np.memmap`` of the raw file at the same offsets (the page-cache floor). Both map the
file afresh each round and run the same reduction over the same bytes."""
from __future__ import annotations

import mmap
from typing import List, Tuple

import numpy as np
import pytest

import pyflatmodule as pfm

from benchutil import measure

MODELS = ["linear_256m", "transformer"]


def _total(arrays) -> float:
    total = 0.0
    for a in arrays:
        total += float(a.sum())
    return total


def _layout(path: str) -> List[Tuple[int, np.dtype, tuple, tuple]]:
    """(file offset, dtype, shape, strides) of every state_dict tensor (untimed)."""
    with open(path, "rb") as f:
        mm = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    base = np.frombuffer(mm, np.uint8).ctypes.data
    out = [(a.ctypes.data - base, a.dtype, a.shape, a.strides)
           for a in pfm.load(mm).state_dict().values()]
    return out


@pytest.mark.parametrize("impl", ["pyflatmodule", "np_memmap"])
@pytest.mark.parametrize("name", MODELS)
def test_sum_weights(benchmark, models, name, impl):
    model = models(name)
    if impl == "pyflatmodule":
        def fn():
            return _total(pfm.load(model.path).state_dict().values())
    else:
        layout = _layout(model.path)

        def fn():
            raw = np.memmap(model.path, np.uint8, "r")
            return _total(np.ndarray(shape, dtype, buffer=raw, offset=off, strides=strides)
                          for off, dtype, shape, strides in layout)
    total = measure(benchmark, fn, group=f"sum weights: {name}", impl=impl, model=model,
                    units=model.meta["tensor_bytes"], unit="byte")
    with pfm.load(model.path) as m:
        assert total == _total(m.state_dict().values())
