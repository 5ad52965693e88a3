"""Benchmark fixtures and the ratio report printed at the end of a timed run.

Untimed (``--benchmark-disable``, the default in pyproject): every benchmark body runs
once on small models, so the suites cannot rot. Timed (``--benchmark-enable``): full-size
models, several rounds each; see benchmarks/README.md for the command.
``PFM_BENCH_SIZE=small|full`` overrides the model size either way.

Helpers the suites import live in ``benchutil.py`` (benchmarks/ is on ``sys.path``
through ``pythonpath`` in pyproject.toml's pytest section); this file keeps fixtures
and hooks.
"""
from __future__ import annotations

import os
from typing import Any

import bench_report
import pytest

import benchmodels
from benchutil import Models


def benchmarks_disabled(config: Any) -> bool:
    """As pytest-benchmark decides: --benchmark-enable overrides --benchmark-disable."""
    session = getattr(config, "_benchmarksession", None)
    if session is not None:
        return bool(session.disabled)
    return bool(config.getoption("benchmark_disable")) and not config.getoption(
        "benchmark_enable")


def small_models(config: Any) -> bool:
    """Small models when benchmarks are disabled (the normal test run)."""
    env = os.environ.get("PFM_BENCH_SIZE")
    if env:
        return env == "small"
    return benchmarks_disabled(config)


@pytest.fixture(scope="session")
def small(request: Any) -> bool:
    """Small models when benchmarks are disabled (the normal test run)."""
    return small_models(request.config)


def pytest_generate_tests(metafunc: Any) -> None:
    """``zoo_model``: every model of the zoo in the benchmarks, or the untimed run's one."""
    if "zoo_model" in metafunc.fixturenames:
        names = benchmodels.with_size(benchmodels.ZOO_SPECS, small_models(metafunc.config))
        metafunc.parametrize("zoo_model", [n[len("zoo_"):] for n in names])


@pytest.fixture(scope="session")
def models(small: bool) -> Models:
    return Models(small)


@pytest.fixture
def timed(request: Any) -> bool:
    return not benchmarks_disabled(request.config)


def pytest_terminal_summary(terminalreporter: Any) -> None:
    config = terminalreporter.config
    session = getattr(config, "_benchmarksession", None)
    if session is None or benchmarks_disabled(config):
        return
    rows = [b.as_dict(include_data=False) for b in session.benchmarks]
    if rows:
        terminalreporter.write_sep("=", "pyflatmodule benchmark ratios")
        terminalreporter.write_line(bench_report.render(rows))
