"""The command line start to finish: ``pyflatmodule info`` on the small float32 sample
model in a fresh interpreter, against ``import numpy`` run the same way (its floor: the
CLI needs numpy for a PTMF model's index) and the interpreter alone; ``info`` and
``verify`` on the sample ExecuTorch program against the interpreter alone. The report
gives the ratios; ml_dtypes, which alone once cost more than numpy, must not be imported
for a file without its dtypes."""
from __future__ import annotations

import os

import pytest

from pyflatmodule.cli import SAMPLE

import childproc
from benchutil import measure_processes

#: The ExecuTorch sample program beside the PTMF sample model.
SAMPLE_PTE = os.path.join(os.path.dirname(SAMPLE), "sample.pte")


@pytest.mark.parametrize("impl", ["pyflatmodule", "floor_numpy", "floor_python"])
def test_cli_info_start_to_finish(benchmark, timed, impl):
    outputs = measure_processes(benchmark, lambda: childproc.run(childproc.CLI[impl], SAMPLE),
                                group="cli start to finish: info sample.ptl", impl=impl,
                                rounds=15 if timed else None)
    if impl == "pyflatmodule":
        for text in outputs:
            lines = text.splitlines()
            assert "0 False" == lines[-1]           # exit 0, no ml_dtypes import
            assert "float32" in text and "sample.ptl: PTMF model" in lines[0]


@pytest.mark.parametrize("impl", list(childproc.CLI_PTE))
def test_cli_pte_start_to_finish(benchmark, timed, impl):
    outputs = measure_processes(
        benchmark, lambda: childproc.run(childproc.CLI_PTE[impl], SAMPLE_PTE),
        group="cli start to finish: sample.pte", impl=impl, rounds=15 if timed else None)
    if impl != "floor_python":
        for text in outputs:
            status, _ = text.splitlines()[-1].split()
            assert "0" == status
