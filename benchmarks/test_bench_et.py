"""ExecuTorch programs (``.pte``): pyflatmodule vs ExecuTorch's own readers, in one run.

- **open**, in process, page cache warm: ``pfm.load(path)`` (verified, its execution
  plans left to their first read), the same then ``methods`` read (every plan checked),
  and ``verify="full"`` (everything at open) vs ExecuTorch's Python reader
  ``deserialize_pte_binary`` (reading the file included) and its C++ runtime's
  ``Runtime.load_program(path)`` with ``Verification.Minimal`` and
  ``InternalConsistency``, and with ``Minimal`` then ``load_method`` of every method (a
  data file, when the program has one, given to both).
- **cold first constant**: a fresh interpreter per round, imports included, to the first
  value of the first constant: pyflatmodule vs one that imports ``executorch.exir``.
- **rss growth**: a fresh interpreter's RSS after open and after reading (summing) every
  constant of a 1 GiB program; the runtime's after ``load_program`` + ``load_method``.
- **mutated programs**: the single-byte sweep's inputs of tests/data/et/*.pte through the
  runtime and through pyflatmodule (``et_mutants.py``, in a subprocess): crashes counted.

The programs are written by ExecuTorch (``et_build.py``, in a subprocess; see
``benchmodels.ET_SPECS``). Without ExecuTorch the ExecuTorch sides skip with that reason
and, in the untimed run, the test suite's programs stand in for the pyflatmodule sides.
"""
from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
from typing import Any, Dict

import pytest

import pyflatmodule as pfm

import benchmodels
import childproc
from benchutil import measure, measure_processes, need_executorch

HERE = os.path.dirname(os.path.abspath(__file__))
OPEN_MODELS = ["et_graph_22k", "et_const_1g", "et_external_1g"]
COLD_MODELS = ["et_graph_22k", "et_const_1g"]
RSS_MODELS = ["et_const_1g", "et_external_1g"]
#: The runtime for reference on one of them (each child imports ExecuTorch: seconds).
RUNTIME_RSS_MODELS = ["et_const_1g"]
#: The runtime's verification levels; "+methods": then load_method of every method too
#: (the runtime parses a method's values there, as pyflatmodule does at their first read).
RUNTIME_LEVELS = ["Minimal", "InternalConsistency", "Minimal+methods",
                  "InternalConsistency+methods"]
#: The full check's cost as programs grow: 2,251, 22,501 and 225,010 values (the last
#: the second's method ten times: benchmodels.ET_SPECS).
GROWTH_MODELS = ["et_graph_2k", "et_graph_22k", "et_graph_225k"]


@pytest.fixture
def programs(models):
    """The ExecuTorch programs by name; a timed run without ExecuTorch (and without the
    programs cached) skips with that reason."""
    def get(name: str) -> benchmodels.Model:
        try:
            return models(name)
        except benchmodels.NotBuildable as e:
            pytest.skip(str(e))
    return get


def _open(model: benchmodels.Model, verify: Any = True) -> Any:
    return pfm.load(model.path, data=[model.data_file] if model.data_file else [],
                    verify=verify)


#: pyflatmodule's opens: the default, the default with every plan read (what the
#: runtime's load_program + load_method checks), everything checked at open.
OPENS = {"pyflatmodule": lambda m: _open(m),
         "pyflatmodule_methods": lambda m: _with_methods(_open(m)),
         "pyflatmodule_full": lambda m: _open(m, "full")}


def _with_methods(p: Any) -> Any:
    _ = p.methods
    return p


def _values(model: benchmodels.Model) -> int:
    with _open(model) as p:
        return sum(len(m.values) for m in p.methods.values())


@pytest.mark.parametrize("impl", list(OPENS))
@pytest.mark.parametrize("name", OPEN_MODELS)
def test_et_open_pyflatmodule(benchmark, programs, name, impl):
    model = programs(name)
    n = _values(model)
    p = measure(benchmark, lambda: OPENS[impl](model), group=f"et open: {name}", impl=impl,
                model=model, units=n, unit="value")
    assert isinstance(p, pfm.Program)


@pytest.mark.parametrize("name", GROWTH_MODELS)
def test_et_full_check_growth(benchmark, programs, name):
    """``verify="full"`` per value and per byte of flatbuffer (the report compares the
    largest program's cost per value with the smallest's)."""
    model = programs(name)
    n = _values(model)
    with _open(model) as p:
        flatbuffer = int(p.info()["flatbuffer_size"])
    p = measure(benchmark, lambda: _open(model, "full"), group="et full check growth",
                impl=name, model=model, units=n, unit="value", flatbuffer_bytes=flatbuffer)
    assert isinstance(p, pfm.Program)


@pytest.mark.torch
def test_et_open_exir(benchmark, programs):
    model = programs("et_graph_22k")
    need_executorch(model)
    from executorch.exir._serialize._program import deserialize_pte_binary

    def read() -> Any:
        with open(model.path, "rb") as f:
            return deserialize_pte_binary(f.read())

    n = _values(model)
    pte = measure(benchmark, read, group="et open: et_graph_22k", impl="exir_deserialize",
                  model=model, units=n, unit="value")
    assert sum(len(p.values) for p in pte.program.execution_plan) == n


@pytest.mark.torch
@pytest.mark.parametrize("level", RUNTIME_LEVELS)
@pytest.mark.parametrize("name", OPEN_MODELS)
def test_et_open_runtime(benchmark, programs, name, level):
    model = programs(name)
    need_executorch(model)
    from executorch.runtime import Runtime, Verification
    runtime = Runtime.get()
    verification = getattr(Verification, level.split("+")[0])
    methods = level.endswith("+methods")

    def load() -> Any:
        p = runtime.load_program(model.path, verification=verification,
                                 data_path=model.data_file)
        return p, [p.load_method(n) for n in p.method_names] if methods else []

    p, _ = measure(benchmark, load, group=f"et open: {name}",
                   impl="runtime_" + level.lower().replace("+", "_"), model=model,
                   units=_values(model), unit="value")
    with _open(model) as ours:
        assert sorted(p.method_names) == sorted(ours.methods)


def _first_constant(model: benchmodels.Model) -> str:
    with pfm.load(model.path) as p:
        return repr(float(p.constants()[0][2].flat[0]))


@pytest.mark.parametrize("impl", ["pyflatmodule", pytest.param("exir", marks=pytest.mark.torch),
                                  pytest.param("et_runtime", marks=pytest.mark.torch)])
@pytest.mark.parametrize("name", COLD_MODELS)
def test_et_cold_first_constant(benchmark, programs, timed, name, impl):
    model = programs(name)
    if impl != "pyflatmodule":
        need_executorch(model)
    outputs = measure_processes(
        benchmark, lambda: childproc.run(childproc.ET_FIRST_CONSTANT[impl], model.path),
        group=f"et cold first constant: {name}", impl=impl, model=model,
        rounds=5 if timed else None)
    if impl == "et_runtime":   # its methods loaded: no constant reaches Python
        assert all("Method" in text.splitlines()[-1] for text in outputs)
    else:
        assert {text.splitlines()[-1] for text in outputs} == {_first_constant(model)}


@pytest.mark.parametrize("name,impl", [(n, "pyflatmodule") for n in RSS_MODELS] + [
    pytest.param(n, "et_runtime", marks=pytest.mark.torch) for n in RUNTIME_RSS_MODELS])
def test_et_rss_growth(benchmark, programs, timed, name, impl):
    model = programs(name)
    if impl != "pyflatmodule":
        need_executorch(model)
    more = [model.data_file] if model.data_file else []
    runs = []
    measure(benchmark, lambda: runs.append(childproc.rss_growth(
        impl, model.path, *more, programs=childproc.ET_RSS)), group=f"et rss growth: {name}",
        impl=impl, model=model, rounds=3 if timed else None,
        step="load_method" if impl == "et_runtime" else "reading every constant")
    for key in ("open_kib", "state_dict_kib", "file_kib", "anon_kib", "peak_kib"):
        benchmark.extra_info[key] = int(statistics.median(r[key] for r in runs))
    if impl == "pyflatmodule":   # every weight of the exported module was read
        assert runs[-1]["tensors"] == model.meta["tensors"]


def mutants(impl: str, per_file: int) -> Dict[str, Any]:
    """``et_mutants.py`` in a subprocess (ExecuTorch's log lines go to its stderr)."""
    args = [sys.executable, os.path.join(HERE, "et_mutants.py"), impl]
    if per_file:
        args += ["--strided", str(per_file)]
    p = subprocess.run(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, check=False)
    if p.returncode != 0:
        raise RuntimeError(f"et_mutants.py failed ({p.returncode}): "
                           f"{p.stderr.decode(errors='replace')[-2000:]}")
    return dict(json.loads(p.stdout.decode().strip().splitlines()[-1]))


@pytest.mark.parametrize("impl", ["pyflatmodule",
                                  pytest.param("runtime", marks=pytest.mark.torch)])
def test_et_mutated_programs(benchmark, timed, impl):
    """Crashes and hangs on the sweep's mutated inputs (counted, not timed: the one round's
    wall time is recorded). Timed: the strided subset tests/fuzz/test_sweep.py runs (200 per
    file); ``PFM_BENCH_ET_MUTANTS=all``: every input of the exhaustive sweep."""
    if impl == "runtime" and not benchmodels.HAS_EXECUTORCH:
        pytest.skip("executorch (with torch) is not installed")
    per_file = 0 if os.environ.get("PFM_BENCH_ET_MUTANTS") == "all" else (200 if timed else 8)
    out = []
    measure(benchmark, lambda: out.append(mutants(impl, per_file)),
            group="et mutated programs", impl=impl, rounds=1)
    r = out[-1]
    benchmark.extra_info.update({k: r[k] for k in (
        "inputs", "crashes", "hangs", "crashes_strict", "crashes_lenient", "hangs_strict",
        "hangs_lenient", "unconfirmed", "other_exceptions", "outcomes", "causes")})
    benchmark.extra_info["per_file"] = per_file
    benchmark.extra_info["crash_examples"] = r["crash_examples"]
    # Every input ran in both modes, but for those that killed a worker.
    lost = r["crashes"] + r["hangs"] + r["unconfirmed"]
    assert r["inputs"] > 0 and sum(r["outcomes"].values()) == 2 * (r["inputs"] - lost)
    if impl == "pyflatmodule":   # the project's promise, as in tests/fuzz/test_sweep.py
        assert r["crashes"] == 0 and r["hangs"] == 0, r["crash_examples"]
