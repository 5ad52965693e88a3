"""RSS growth (fresh process, /proc/self/status) from after the imports to after open and
after ``state_dict()`` without reading any weight. Must not grow with tensor bytes
(256 MiB vs 1.8 GiB) and at most linearly with metadata (1x/10x/100x). The child's wall
time is what is timed (not a target); the RSS numbers are in ``extra_info``."""
from __future__ import annotations

import statistics

import pytest

import childproc
from benchutil import measure, need_torch

MODELS = ["linear_256m", "linear_1g8", "meta_2k", "meta_20k", "meta_200k"]
#: torch for reference on one model of each kind (each child imports torch: seconds).
TORCH_MODELS = ["linear_1g8", "meta_2k"]
CASES = [(n, "pyflatmodule") for n in MODELS] + [
    pytest.param(n, i, marks=pytest.mark.torch) for n in TORCH_MODELS
    for i in ("torch_lite", "torch_jit")]


@pytest.mark.parametrize("name,impl", CASES)
def test_rss_growth(benchmark, models, timed, name, impl):
    model = models(name)
    if impl != "pyflatmodule":
        need_torch(model, impl)
    runs = []
    measure(benchmark, lambda: runs.append(childproc.rss_growth(impl, model.path)),
            group=f"rss growth: {name}", impl=impl, model=model, rounds=3 if timed else None,
            ivalues=models.facts(name)["ivalues"])
    for key in ("open_kib", "state_dict_kib", "file_kib", "anon_kib", "peak_kib"):
        benchmark.extra_info[key] = int(statistics.median(r[key] for r in runs))
    if impl != "torch_lite":
        assert runs[-1]["tensors"] == models.facts(name)["state_dict"]
