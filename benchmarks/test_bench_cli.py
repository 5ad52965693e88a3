"""The command line start to finish: ``pyflatmodule info`` on the small float32 sample
model in a fresh interpreter, against ``import numpy`` run the same way (its floor: the
CLI needs numpy). The report gives the ratio; ml_dtypes, which alone once cost more than
numpy, must not be imported for a file without its dtypes."""
from __future__ import annotations

import pytest

from pyflatmodule.cli import SAMPLE

import childproc
from benchutil import measure_processes


@pytest.mark.parametrize("impl", ["pyflatmodule", "floor_numpy"])
def test_cli_info_start_to_finish(benchmark, timed, impl):
    outputs = measure_processes(benchmark, lambda: childproc.run(childproc.CLI[impl], SAMPLE),
                                group="cli start to finish: info sample.ptl", impl=impl,
                                rounds=15 if timed else None)
    if impl == "pyflatmodule":
        for text in outputs:
            lines = text.splitlines()
            assert "0 False" == lines[-1]           # exit 0, no ml_dtypes import
            assert "float32" in text and "sample.ptl: PTMF model" in lines[0]
