"""Where the suite's files are, defined once: a test module finds tests/data and the rest
of the checkout from here, never from its own place in tests/.
"""
from __future__ import annotations

import os

#: The tests/ folder.
TESTS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
#: The checkout (or unpacked sdist) that holds tests/.
ROOT = os.path.dirname(TESTS)
#: The C sources.
CSRC = os.path.join(ROOT, "csrc")
#: The benchmarks, whose builders the zoo tests share.
BENCHMARKS = os.path.join(ROOT, "benchmarks")
#: The model files torch wrote, with torch's answers beside each.
DATA = os.path.join(TESTS, "data")
#: The ExecuTorch files exir wrote, with ExecuTorch's answers beside each.
ET = os.path.join(DATA, "et")
#: A file from every ExecuTorch release, with its writer's answers.
RELEASES = os.path.join(DATA, "releases")
#: Files others wrote (tests/data/wild/SOURCES.json says where each comes from).
WILD = os.path.join(DATA, "wild")
#: optimum-executorch's exports.
HF = os.path.join(DATA, "hf")
#: The fuzzing harnesses (sweep.py, gate.py, fuzz_load.py) and their corpus.
FUZZ = os.path.join(TESTS, "fuzz")
#: The suite's helpers, some of them scripts run in a child process.
SUPPORT = os.path.join(TESTS, "support")

__all__ = ["BENCHMARKS", "CSRC", "DATA", "ET", "FUZZ", "HF", "RELEASES", "ROOT", "SUPPORT",
           "TESTS", "WILD"]
