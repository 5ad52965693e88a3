"""The real architectures lowered to Arm Ethos-U, Arm TOSA, OpenVINO, ExecuTorch's native
backend and Apple Core AI, outside git.

``tests/data/make_et_backends.py --zoo``, run in ExecuTorch's backends environment (its
docstring says how to make one), writes ``<backend>_<model>.pte`` for each model of
:data:`zoo.ET_BACKEND_MODELS` (TOSA's in both profiles: ``tosa_`` FP, ``tosa_int_`` INT),
with its oracle, into :data:`FOLDER` in the benchmark cache. tests/backends/test_ethosu.py,
test_tosa.py, test_openvino.py, test_native.py and test_coreai.py compare them as they
compare their small programs, and skip the ones not written.
"""
from __future__ import annotations

import os
from typing import List

import pytest

import zoo  # the zoo's listing: benchmarks/zoo.py (benchmarks/ is on the path)
from benchmodels import cache_dir
from support.paths import ET

#: Where make_et_backends.py --zoo writes the programs and their oracles.
FOLDER = os.path.join(cache_dir(), "et_backends")


def stems(backend: str) -> List[str]:
    """The zoo's programs lowered to ``backend`` (``ethosu``, ``tosa``, ``openvino``,
    ``native``, ``coreai``)."""
    prefixes = ["tosa", "tosa_int"] if backend == "tosa" else [backend]
    return [f"{p}_{model}" for p in prefixes for model in zoo.ET_BACKEND_MODELS]


def written(stem: str) -> bool:
    """Whether the zoo program ``stem`` and its oracle are in :data:`FOLDER`."""
    return os.path.exists(os.path.join(FOLDER, stem + ".oracle.json"))


def folder(stem: str) -> str:
    """The folder of program ``stem``: tests/data/et, or the zoo's (the test skipped when
    the zoo's program is not written)."""
    if stem not in stems(stem.split("_", 1)[0]):
        return ET
    if not written(stem):
        pytest.skip(f"{stem} is not written: run tests/data/make_et_backends.py --zoo with "
                    "ExecuTorch's backends environment")
    return FOLDER
