"""What the test modules share: the model files in tests/data with what torch said about
them (``oracles``), the assertions that compare pyflatmodule's answers with torch's
(``asserts``), the command line run in-process (``cli``) and where the suite's files are
(``paths``).

Test modules import from here (``from support import model_path, assert_tensor``);
``tests/`` is on ``sys.path`` through ``pythonpath`` in pyproject.toml's pytest section,
and child processes get it through ``PYTHONPATH`` (tests/conftest.py). Fixtures, hooks
and markers stay in tests/conftest.py.
"""
from __future__ import annotations

from .asserts import (
                      assert_info,
                      assert_state_dict,
                      assert_tensor,
                      assert_value,
                      hex_float,
                      same_float,
)
from .cli import CliRun, run_cli
from .oracles import (
                      HAS_TORCH,
                      MODEL_FILES,
                      SAMPLE,
                      decoded_extra_files,
                      load_expectation,
                      model_path,
)
from .paths import DATA, TESTS

__all__ = ["CliRun", "DATA", "HAS_TORCH", "MODEL_FILES", "SAMPLE", "TESTS", "assert_info",
           "assert_state_dict", "assert_tensor", "assert_value", "decoded_extra_files",
           "hex_float", "load_expectation", "model_path", "run_cli", "same_float"]
