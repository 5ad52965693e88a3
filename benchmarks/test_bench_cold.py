"""Cold process to the first tensor value: a fresh interpreter per run, imports included.
Wall time (timed) and the child's peak RSS (``extra_info``), pyflatmodule vs torch; with
the interpreter alone and ``import numpy, ml_dtypes, cffi`` alone as floors."""
from __future__ import annotations

import pytest

import pyflatmodule as pfm

import childproc
from benchutil import measure_processes, need_torch

MODELS = ["meta_2k", "linear_256m"]
IMPLS = ["pyflatmodule", "torch_lite", "torch_jit"]
FLOORS = ["floor_python", "floor_numpy_ml_dtypes_cffi"]


def _expected(path: str) -> str:
    with pfm.load(path) as m:
        return repr(float(next(iter(m.state_dict().values())).flat[0]))


@pytest.mark.parametrize("impl", [IMPLS[0]] + FLOORS + [
    pytest.param(i, marks=pytest.mark.torch) for i in IMPLS[1:]])
@pytest.mark.parametrize("name", MODELS)
def test_cold_first_value(benchmark, models, timed, name, impl):
    model = models(name)
    if impl.startswith("torch"):
        need_torch(model, impl)
    outputs = measure_processes(
        benchmark, lambda: childproc.run(childproc.FIRST_VALUE[impl], model.path),
        group=f"cold first value: {name}", impl=impl, model=model, rounds=5 if timed else None)
    # Every implementation reads the same first weight.
    if not impl.startswith("floor"):
        assert set(outputs) == {_expected(model.path)}
