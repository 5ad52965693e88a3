"""Fixtures, hooks and markers of the suite; shared helpers live in tests/support/.

Expected values come from torch (tests/support/oracles.py says where they are stored);
comparisons here never use pyflatmodule output as an expected value.

The test modules are grouped by what they test (core/, ptmf/, et/, backends/, cli/,
remote/, fuzz/, project/; docs/development.md lists them). These folders are not packages:
pytest imports each module by its file name, so a name may be used once in tests/ and
benchmarks/ (checked below), and a folder is never named like a module the tests import
(ExecuTorch's are in et/: a folder named executorch on sys.path would pass for the
package where it is not installed).
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Dict, Iterator, List

import pytest

import pyflatmodule as pfm

from support import TESTS
from support.http_servers import Misbehaving, Nginx, nginx_binary
from support.paths import BENCHMARKS, DATA, ET

#: Opt-in suites: marker -> the option that selects it (deselected otherwise).
OPT_IN = {"full_sweep": "--full-sweep", "zoo": "--zoo", "zoo_hf": "--zoo-hf"}


def pytest_addoption(parser: Any) -> None:
    parser.addoption("--full-sweep", action="store_true",
                     help="also run the exhaustive single-byte sweep (about half a million "
                          "inputs; tests marked full_sweep are deselected otherwise)")
    parser.addoption("--sweep-shard", default="0/1", metavar="K/N",
                     help="with --full-sweep, only the K-th of N interleaved shards of "
                          "the sweep's inputs (chunks of 64; the N shards together are the "
                          "whole sweep)")
    parser.addoption("--zoo", action="store_true",
                     help="also check the zoo of real architectures against torch (needs "
                          "torch, torchvision and timm; tests marked zoo are deselected "
                          "otherwise)")
    parser.addoption("--zoo-hf", action="store_true",
                     help="also check optimum-executorch's exports of tiny Hugging Face models "
                          "against ExecuTorch (needs optimum-executorch; tests marked zoo_hf "
                          "are deselected otherwise)")


def pytest_configure(config: Any) -> None:
    _check_module_names()
    # Child processes must import the pyflatmodule this run imported (installed, or built
    # in place), never the uncompiled source tree that the working directory may hold,
    # and find the suite's helpers (support, ...) as the tests do.
    package_parent = os.path.dirname(os.path.dirname(os.path.abspath(pfm.__file__)))
    os.environ["PYTHONSAFEPATH"] = "1"
    os.environ["PYTHONPATH"] = os.pathsep.join(
        p for p in (package_parent, TESTS, os.environ.get("PYTHONPATH")) if p)


def _check_module_names() -> None:
    """Two test modules of one file name would be one module to pytest: refuse them."""
    seen: Dict[str, str] = {}
    for folder in (TESTS, BENCHMARKS):
        for top, dirs, names in os.walk(folder):
            dirs[:] = sorted(d for d in dirs if d not in ("data", "corpus", "__pycache__"))
            for name in sorted(names):
                if not (name.startswith("test_") and name.endswith(".py")):
                    continue
                path = os.path.relpath(os.path.join(top, name), os.path.dirname(TESTS))
                if name in seen:
                    raise pytest.UsageError(f"{seen[name]} and {path}: pytest imports test "
                                            "modules by file name, so each name is used once")
                seen[name] = path


def pytest_collection_modifyitems(config: Any, items: List[Any]) -> None:
    skipped = [m for m, option in OPT_IN.items() if not config.getoption(option)]
    deselected = [item for item in items
                  if any(item.get_closest_marker(m) for m in skipped)]
    if deselected:
        config.hook.pytest_deselected(items=deselected)
        gone = set(map(id, deselected))
        items[:] = [item for item in items if id(item) not in gone]


# --- HTTP servers on 127.0.0.1 (tests/support/http_servers.py)

@pytest.fixture(scope="session")
def nginx_bin() -> str:
    """The nginx executable; the tests that need it skip, saying why, without it."""
    exe = nginx_binary()
    if exe is None:
        pytest.skip("nginx is not installed (Debian: apt-get install nginx-light; .ci/run "
                    "installs it): the tests against a real HTTP server need it")
    return exe


@pytest.fixture(scope="session")
def nginx(nginx_bin: str) -> Iterator[Nginx]:
    """nginx serving tests/data at ``/data/`` (``nginx.url("data", "et/mlp.pte")``) and the
    benchmark cache at ``/bench/`` (``nginx.url("bench", big_program.name)``), one for the
    session: take ``nginx.mark()`` before the requests a test counts."""
    import benchmodels
    roots = {"data": Path(DATA), "bench": Path(benchmodels.cache_dir())}
    with Nginx(roots, binary=nginx_bin) as server:
        yield server


def _big_program(xnnpack: bool) -> Path:
    import benchmodels
    try:
        return benchmodels.big_program(xnnpack=xnnpack)
    except benchmodels.NotBuildable as e:
        pytest.skip(str(e))


@pytest.fixture(scope="session")
def big_program() -> Path:
    """The 512 MiB program without a delegate (``benchmodels.big_program()``, in the
    benchmark cache; built on first use, about 7 s); skips, saying why, when it is not
    there and ExecuTorch is not installed to build it."""
    return _big_program(xnnpack=False)


@pytest.fixture(scope="session")
def big_xnnpack_program() -> Path:
    """The same chain lowered to XNNPACK (``benchmodels.big_program(xnnpack=True)``; about
    11 s to build)."""
    return _big_program(xnnpack=True)


@pytest.fixture
def misbehaving() -> Iterator[Misbehaving]:
    """The misbehaving server, serving tests/data/et's programs by file name
    (``misbehaving.url("short", "mlp.pte")``), one per test."""
    files = {n: Path(ET, n) for n in sorted(os.listdir(ET)) if n.endswith((".pte", ".ptd"))}
    with Misbehaving(files, lifetime=300.0) as server:
        yield server
