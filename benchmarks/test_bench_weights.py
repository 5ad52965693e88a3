"""All weights as arrays, from the path: pyflatmodule ``load().state_dict()`` vs torch's
``jit_module_from_flatbuffer().state_dict()`` vs safetensors ``safe_open`` (numpy and pt)
on the same weights saved as .safetensors. Then ``state_dict()`` alone, per tensor, on an
already open module (torch's state_dict() walks its loaded module)."""
from __future__ import annotations

import importlib.util

import numpy as np
import pytest

import pyflatmodule as pfm

from benchutil import measure, need_torch

MODELS = ["meta_2k", "linear_256m", "transformer"]


def _safe_open_all(path: str, framework: str) -> dict:
    from safetensors import safe_open
    with safe_open(path, framework=framework) as f:
        return {k: f.get_tensor(k) for k in f.keys()}


@pytest.mark.parametrize("impl", ["pyflatmodule", "torch_jit", "safetensors_np",
                                  "safetensors_pt"])
@pytest.mark.parametrize("name", MODELS)
def test_all_weights(benchmark, models, name, impl):
    model = models(name)
    n = models.facts(name)["state_dict"]
    if impl == "pyflatmodule":
        def fn():
            return pfm.load(model.path).state_dict()
    elif impl == "torch_jit":
        need_torch(model, impl)
        import torch

        def fn():
            return torch.jit.jit_module_from_flatbuffer(model.path).state_dict()
    else:
        if importlib.util.find_spec("safetensors") is None:
            pytest.skip("safetensors is not installed")
        assert model.safetensors, "the builder writes .safetensors for these models"
        if impl == "safetensors_pt":
            need_torch(model, "torch_jit")
        framework = impl.split("_")[1]

        def fn():
            return _safe_open_all(model.safetensors, framework)
    out = measure(benchmark, fn, group=f"all weights: {name}", impl=impl, model=model,
                  units=n, unit="tensor")
    assert len(out) == n


@pytest.mark.parametrize("name", MODELS)
def test_state_dict_pyflatmodule(benchmark, models, name):
    """First state_dict() of a freshly opened module (the open itself is not timed)."""
    model = models(name)
    n = models.facts(name)["state_dict"]
    out = measure(benchmark, lambda m: m.state_dict(), setup=lambda: pfm.load(model.path),
                  group=f"state_dict: {name}", impl="pyflatmodule", model=model, units=n,
                  unit="tensor")
    assert len(out) == n and all(isinstance(v, np.ndarray) for v in out.values())


@pytest.mark.parametrize("name", MODELS)
def test_state_dict_pyflatmodule_again(benchmark, models, name):
    """Later state_dict() calls on the same module (the walk's result is kept when the
    bytes cannot change: each call copies a dict)."""
    model = models(name)
    n = models.facts(name)["state_dict"]
    m = pfm.load(model.path)
    m.state_dict()
    out = measure(benchmark, m.state_dict, group=f"state_dict: {name}",
                  impl="pyflatmodule_again", model=model, units=n, unit="tensor")
    assert len(out) == n


@pytest.mark.torch
@pytest.mark.parametrize("name", MODELS)
def test_state_dict_torch(benchmark, models, name):
    model = models(name)
    need_torch(model, "torch_jit")
    import torch
    n = models.facts(name)["state_dict"]
    m = torch.jit.jit_module_from_flatbuffer(model.path)
    out = measure(benchmark, m.state_dict, group=f"state_dict: {name}", impl="torch_jit",
                  model=model, units=n, unit="tensor")
    assert len(out) == n
