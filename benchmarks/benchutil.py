"""Helpers the benchmark suites import: the model cache per run, torch guards and the
timing call that labels each result for the report (benchmarks/bench_report.py)."""
from __future__ import annotations

import os
import statistics
import time
from typing import Any, Callable, Dict, List, Optional, Tuple

import pytest

import benchmodels

#: Seconds of timed rounds per benchmark (each measure() call picks its round count).
BUDGET = float(os.environ.get("PFM_BENCH_SECONDS", "3"))


class Models:
    """Models by name, built on first use and read once into the page cache per test."""

    def __init__(self, small: bool) -> None:
        self.small = small
        self._cache: Dict[str, benchmodels.Model] = {}
        self._facts: Dict[str, Dict[str, int]] = {}

    def __call__(self, name: str, warm: bool = True) -> benchmodels.Model:
        if name not in self._cache:
            # Small models are cheap: build every missing one of the family at once.
            names = (benchmodels.with_size(benchmodels.family(name).specs, True)
                     if self.small else [name])
            self._cache.update(benchmodels.ensure(names, self.small))
        m = self._cache[name]
        if warm:
            for path in (m.path, m.safetensors, m.data_file, m.jit_file):
                if path:
                    benchmodels.read_file(path)
        return m

    def facts(self, name: str) -> Dict[str, int]:
        """Counts read (untimed) with pyflatmodule: ivalues, tensors, state_dict entries."""
        if name not in self._facts:
            import pyflatmodule as pfm
            path = self(name, warm=False).path
            with pfm.load(path) as m:
                self._facts[name] = {"ivalues": len(m.ivalues),
                                     "tensors": int(pfm.verify(path).tensors),
                                     "state_dict": len(m.state_dict())}
        return self._facts[name]


def need_torch(model: benchmodels.Model, loader: str) -> None:
    """Skip (with the reason) a torch comparison torch cannot make here."""
    reason = model.torch_skip_reason(loader)
    if reason:
        pytest.skip(reason)


def need_executorch(model: benchmodels.Model) -> None:
    """Skip (with the reason) a comparison with ExecuTorch it cannot make here."""
    if not benchmodels.HAS_EXECUTORCH:
        pytest.skip("executorch (with torch) is not installed")
    reason = model.meta.get("runtime")
    if reason:
        pytest.skip(f"ExecuTorch's runtime cannot load {model.name}: {reason}")


def measure(benchmark: Any, fn: Callable[..., Any], *, group: str, impl: str,
            model: Optional[benchmodels.Model] = None, units: int = 0, unit: str = "",
            setup: Optional[Callable[[], Any]] = None, rounds: Optional[int] = None,
            **extra: Any) -> Any:
    """Time ``fn`` and label the result for the report. ``setup`` runs untimed before
    each round and its result is ``fn``'s argument. Rounds: ``rounds``, else as many as
    fit in PFM_BENCH_SECONDS (3 to 1000) after one untimed trial. Disabled: one call."""
    benchmark.group = group
    benchmark.extra_info.update(group=group, impl=impl, units=units, unit=unit, **extra)
    if model is not None:
        benchmark.extra_info.update(model=model.name, file_bytes=model.size)
    pre = None if setup is None else (lambda: ((setup(),), {}))
    if getattr(benchmark, "disabled", False):
        return benchmark.pedantic(fn, setup=pre, rounds=1, iterations=1)
    if rounds is None:
        arg = () if setup is None else (setup(),)
        t0 = time.perf_counter()
        fn(*arg)
        once = time.perf_counter() - t0
        del arg
        rounds = int(min(1000, max(3, BUDGET / max(once, 1e-6))))
    return benchmark.pedantic(fn, setup=pre, rounds=rounds, warmup_rounds=1, iterations=1)


def measure_processes(benchmark: Any, start: Callable[[], Tuple[str, float, Optional[int]]],
                      **labels: Any) -> List[str]:
    """Time ``start``, which runs one fresh process (``childproc.run``: its stdout, wall
    seconds and peak RSS in KiB, None where not read), labelled as by ``measure``. The
    median and largest peak RSS go to the report; returns every round's stdout."""
    outputs: List[str] = []
    peaks: List[int] = []

    def child() -> None:
        text, _, peak = start()
        outputs.append(text)
        if peak is not None:
            peaks.append(peak)

    measure(benchmark, child, **labels)
    if peaks:
        benchmark.extra_info.update(peak_rss_kib=int(statistics.median(peaks)),
                                    peak_rss_kib_max=max(peaks))
    return outputs
