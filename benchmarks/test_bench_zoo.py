"""The zoo of real architectures (random weights; ``benchmodels.ZOO``, written by torch
with torchvision and timm): pyflatmodule against torch's own loaders, in one run.

- **zoo load + state_dict**, in process, page cache warm, from the path each round:
  ``pfm.load(lite).state_dict()``, and ``pfm.load(lite)`` alone, vs torch's lite loader
  on the lite file (``_load_for_lite_interpreter``: it makes every tensor as it loads)
  vs torch's jit loader on the jit file followed by ``state_dict()``.
- **zoo state_dict**, per tensor: pyflatmodule's first ``state_dict()`` of a module
  loaded untimed before each round vs torch's ``state_dict()`` on its loaded jit module.
- **zoo fresh process**: a fresh ``python -c`` per round, imports included, that loads
  the lite file and takes its ``state_dict()``, vs one that loads it with torch's lite
  loader: wall time and the child's peak RSS.
- **zoo cli info**: the console command ``pyflatmodule info`` on the lite file, a fresh
  process per round, vs ``python -c "import numpy, cffi"``.

Timed: every model of the zoo. Untimed (inside ``pytest``): one small model,
``benchmodels.ZOO_SMALL``; where torch or torchvision is missing it skips with that reason.
"""
from __future__ import annotations

import os

import numpy as np
import pytest

import pyflatmodule as pfm

import benchmodels
import childproc
from benchutil import measure, measure_processes, need_torch


@pytest.fixture
def zoo(models, small, zoo_model):
    """The zoo model (lite file, jit file beside it), built on first use. The untimed run
    skips where its writers are missing; a timed run fails (it must measure the zoo)."""
    try:
        return models(f"zoo_{zoo_model}")
    except benchmodels.NotBuildable as e:
        if small:
            pytest.skip(str(e))
        raise


def _torch_load(model: benchmodels.Model, loader: str):
    """torch's lite loader ("torch_lite") or the jit loader that reads the jit file
    ("torch_jit"): a function of the path; skips with the reason torch cannot."""
    need_torch(model, loader)
    import torch
    import torch.jit.mobile
    if loader == "torch_lite":
        return torch.jit.mobile._load_for_lite_interpreter
    return getattr(torch.jit, model.meta["jit_loader"])


@pytest.mark.parametrize("impl", ["pyflatmodule", "pyflatmodule_load"] + [
    pytest.param(i, marks=pytest.mark.torch) for i in ("torch_lite", "torch_jit")])
def test_zoo_load_state_dict(benchmark, zoo, zoo_model, impl):
    n = zoo.meta["tensors"]
    if impl == "pyflatmodule":
        def fn():
            return pfm.load(zoo.path).state_dict()
    elif impl == "pyflatmodule_load":
        def fn():
            return pfm.load(zoo.path)
    elif impl == "torch_lite":
        load = _torch_load(zoo, impl)

        def fn():
            return load(zoo.path)
    else:
        load = _torch_load(zoo, impl)

        def fn():
            return load(zoo.jit_file).state_dict()
    out = measure(benchmark, fn, group=f"zoo load + state_dict: {zoo_model}", impl=impl,
                  model=zoo, units=n, unit="tensor")
    if impl in ("pyflatmodule", "torch_jit"):
        assert len(out) == n    # torch's count, recorded when the file was written
    else:
        assert out is not None


def test_zoo_state_dict_pyflatmodule(benchmark, zoo, zoo_model):
    """The first state_dict() of a freshly loaded module (the load itself is not timed)."""
    n = zoo.meta["tensors"]
    out = measure(benchmark, lambda m: m.state_dict(), setup=lambda: pfm.load(zoo.path),
                  group=f"zoo state_dict: {zoo_model}", impl="pyflatmodule", model=zoo,
                  units=n, unit="tensor")
    assert len(out) == n and all(isinstance(v, np.ndarray) for v in out.values())


@pytest.mark.torch
def test_zoo_state_dict_torch(benchmark, zoo, zoo_model):
    """torch's state_dict() on its loaded jit module (which made every tensor)."""
    n = zoo.meta["tensors"]
    m = _torch_load(zoo, "torch_jit")(zoo.jit_file)
    out = measure(benchmark, m.state_dict, group=f"zoo state_dict: {zoo_model}",
                  impl="torch_jit", model=zoo, units=n, unit="tensor")
    assert len(out) == n


@pytest.mark.parametrize("impl", ["pyflatmodule",
                                  pytest.param("torch_lite", marks=pytest.mark.torch)])
def test_zoo_fresh_process(benchmark, timed, zoo, zoo_model, impl):
    if impl == "torch_lite":
        need_torch(zoo, impl)
    outputs = measure_processes(
        benchmark, lambda: childproc.run(childproc.LOAD_WEIGHTS[impl], zoo.path),
        group=f"zoo fresh process: {zoo_model}", impl=impl, model=zoo,
        rounds=5 if timed else None)
    if impl == "pyflatmodule":
        assert {text.strip() for text in outputs} == {str(zoo.meta["tensors"])}


@pytest.mark.parametrize("impl", ["pyflatmodule", "floor_numpy_cffi"])
def test_zoo_cli_info(benchmark, timed, zoo, zoo_model, impl):
    if impl == "pyflatmodule":
        if not os.access(childproc.CONSOLE, os.X_OK):
            pytest.skip(f"the console command is not installed: {childproc.CONSOLE}")
        argv = [childproc.CONSOLE, "info", zoo.path]
    else:
        argv = childproc.FLOOR_NUMPY_CFFI
    outputs = measure_processes(benchmark, lambda: (*childproc.spawn(argv), None),
                                group=f"zoo cli info: {zoo_model}", impl=impl, model=zoo,
                                rounds=15 if timed else None)
    if impl == "pyflatmodule":
        for text in outputs:
            assert text.startswith(f"{zoo.path}: PTMF model, "), text[:200]
            assert "jit sources: yes" in text
