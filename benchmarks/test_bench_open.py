"""Open (load + verify + index), in process, page cache warm: pyflatmodule vs torch's
``_load_for_lite_interpreter`` and ``jit_module_from_flatbuffer``.

The same groups feed the scaling rows of the report: 256 MiB vs 1.8 GiB of tensor bytes
(same 28 layers, same ivalues), and 1x/10x/100x metadata-heavy files. The package's
samples (a handful of tensors each, one per format) give the fixed cost of an open.
"""
from __future__ import annotations

import os

import pytest

import pyflatmodule as pfm

from benchutil import measure, need_torch

MODELS = ["meta_2k", "linear_256m", "linear_1g8", "transformer", "tokens_500k",
          "meta_20k", "meta_200k"]
#: The samples the package ships: an ExecuTorch program and a PTMF model.
SAMPLES = ["sample.pte", "sample.ptl"]


@pytest.mark.parametrize("name", MODELS)
def test_open_pyflatmodule(benchmark, models, name):
    model = models(name)
    n = models.facts(name)["ivalues"]
    m = measure(benchmark, lambda: pfm.load(model.path), group=f"open: {name}",
                impl="pyflatmodule", model=model, units=n, unit="ivalue")
    assert len(m.ivalues) == n


@pytest.mark.parametrize("name", SAMPLES)
def test_open_sample(benchmark, name):
    path = os.path.join(os.path.dirname(pfm.__file__), "data", name)
    f = measure(benchmark, lambda: pfm.load(path), group=f"open: {name}", impl="pyflatmodule")
    assert f.size == os.path.getsize(path)


@pytest.mark.torch
@pytest.mark.parametrize("loader", ["torch_lite", "torch_jit"])
@pytest.mark.parametrize("name", MODELS)
def test_open_torch(benchmark, models, name, loader):
    model = models(name)
    need_torch(model, loader)
    import torch
    import torch.jit.mobile
    load = (torch.jit.mobile._load_for_lite_interpreter if loader == "torch_lite"
            else torch.jit.jit_module_from_flatbuffer)
    m = measure(benchmark, lambda: load(model.path), group=f"open: {name}", impl=loader,
                model=model, units=models.facts(name)["ivalues"], unit="ivalue")
    assert m is not None


@pytest.mark.parametrize("name", ["linear_256m", "linear_1g8", "transformer"])
def test_open_numpy_npy(benchmark, models, name, tmp_path_factory):
    """The floor of opening one file and mapping it: ``np.load(mmap_mode="r")`` of a
    ``.npy`` of as many bytes as the model's tensors (a sparse file: the header is read,
    the data never)."""
    import numpy as np
    model = models(name)
    with pfm.load(model.path) as m:
        nbytes = sum(t.nbytes for t in m.state_dict().values())
    path = str(tmp_path_factory.mktemp("npy") / f"{name}.npy")
    np.lib.format.open_memmap(path, mode="w+", dtype=np.uint8, shape=(nbytes,)).flush()
    n = models.facts(name)["ivalues"]
    a = measure(benchmark, lambda: np.load(path, mmap_mode="r"), group=f"open: {name}",
                impl="numpy_npy", model=model, units=n, unit="ivalue")
    assert a.nbytes == nbytes


@pytest.mark.parametrize("name", ["linear_256m", "transformer"])
def test_close_pyflatmodule(benchmark, models, name):
    """``close()`` of an open model (its mapping goes with the last reference)."""
    model = models(name)
    measure(benchmark, lambda m: m.close(), setup=lambda: pfm.load(model.path),
            group=f"close: {name}", impl="pyflatmodule", model=model)
