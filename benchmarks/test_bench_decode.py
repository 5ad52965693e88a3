"""Full metadata decode, every ivalue, from the path, against a pure-Python
``struct.unpack_from`` walker reading the same file the way the FlatBuffers Python runtime
does (``ptmf_walker.py``), at two levels:

- index: every ivalue's type, position, children, string/vector extents and tensor
  metadata (pyflatmodule: ``load``, whose C pass builds exactly that index, verified);
- values: every ivalue as a Python value, tensors as numpy views (pyflatmodule: ``load``
  then ``list(m.ivalues)``, the bulk decode; ``pyflatmodule_each``: ``m.ivalues[i]`` for
  every i, each decoded on its own; the walker makes the same values).
"""
from __future__ import annotations

import mmap

import numpy as np
import ptmf_walker
import pytest

import pyflatmodule as pfm

from benchutil import measure

MODELS = ["meta_2k", "tokens_500k", "transformer"]


def _walk(path: str) -> list:
    with open(path, "rb") as f:
        mm = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    return ptmf_walker.walk(mm)


def _decode_all(path: str) -> list:
    return list(pfm.load(path).ivalues)


def _decode_each(path: str) -> list:
    ivalues = pfm.load(path).ivalues
    return [ivalues[i] for i in range(len(ivalues))]


@pytest.mark.parametrize("impl", ["pyflatmodule", "pyflatmodule_each", "python_walker"])
@pytest.mark.parametrize("name", MODELS)
def test_decode_every_ivalue(benchmark, models, name, impl):
    model = models(name)
    n = models.facts(name)["ivalues"]
    fn = {"pyflatmodule": _decode_all, "pyflatmodule_each": _decode_each,
          "python_walker": _walk}[impl]
    out = measure(benchmark, lambda: fn(model.path), group=f"decode all: {name}", impl=impl,
                  model=model, units=n, unit="ivalue")
    assert len(out) == n


@pytest.mark.parametrize("impl", ["pyflatmodule", "python_walker"])
@pytest.mark.parametrize("name", MODELS)
def test_index_every_ivalue(benchmark, models, name, impl):
    model = models(name)
    n = models.facts(name)["ivalues"]

    def walker_index(path: str) -> list:
        with open(path, "rb") as f:
            mm = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        return ptmf_walker.index(mm)

    if impl == "pyflatmodule":
        def fn():
            return pfm.load(model.path).ivalues
    else:
        def fn():
            return walker_index(model.path)
    out = measure(benchmark, fn, group=f"index all: {name}", impl=impl, model=model,
                  units=n, unit="ivalue")
    assert len(out) == n


@pytest.mark.parametrize("name", MODELS)
def test_walker_matches_pyflatmodule(models, name):
    """The baseline decodes the same values (else the comparison would be unfair)."""
    path = models(name, warm=False).path
    ours = _decode_all(path)
    theirs = _walk(path)
    assert len(ours) == len(theirs)
    each = _decode_each(path)
    assert [type(x) for x in each] == [type(x) for x in ours]
    for i, (a, b) in enumerate(zip(ours, theirs)):
        if isinstance(a, np.ndarray):
            assert isinstance(b, np.ndarray) and (a.shape, a.dtype, a.strides) == \
                (b.shape, b.dtype, b.strides) and np.array_equal(a, b, equal_nan=True), i
        elif isinstance(a, pfm.Object):
            assert b[0] == "Object" and b[1] == a.index, i
        elif isinstance(a, pfm.Function):
            assert b == ("Function", a.name), i
        elif isinstance(a, (list, tuple)) and a and isinstance(a[0], (pfm.Object, np.ndarray)):
            assert type(a) is type(b) and len(a) == len(b), i
        else:
            assert type(a) is type(b) and a == b, i
