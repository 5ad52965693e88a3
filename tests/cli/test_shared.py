"""``pyflatmodule shared``: programs against the data files they share, against ExecuTorch.

tests/data/shared/ (tests/data/make_shared_data.py): task programs sharing a backbone
whose weights ExecuTorch 1.5.1 wrote to ``foundation.ptd`` (portable kernels, tensors by
fully qualified name) and ``foundation_xnn.ptd`` (XNNPACK, named data by content hash).
The oracle holds ExecuTorch's own reading of each program (its external tensors, the
named data its XNNPACK graphs read), of each data file (its keys' scalar types, sizes and
bytes), and its runtime loading each program against each data file and running it.
"""
from __future__ import annotations

import json
import os
from typing import Any, Dict, List, Set

import pytest

from support.cli import run_cli
from support.paths import DATA, ET
from support.schemas import validate

HERE = os.path.join(DATA, "shared")
with open(os.path.join(HERE, "shared.oracle.json"), encoding="utf-8") as _f:
    ORACLE: Dict[str, Any] = json.load(_f)
PROGRAMS = sorted(ORACLE["programs"])
DATA_FILES = sorted(ORACLE["data_files"])
#: ExecuTorch's ScalarType numbers of the dtypes these files hold
DTYPES = {6: "float32"}


def _reads(program: str) -> Set[str]:
    doc = ORACLE["programs"][program]
    return set(doc["external"]) | set(doc["named_data"])


def _shared(programs: List[str], data: List[str]) -> Any:
    argv = [os.path.join(HERE, p) for p in programs]
    for d in data:
        argv += ["--data", os.path.join(HERE, d)]
    r = run_cli("shared", "--json", *argv)
    doc = json.loads(r.stdout)
    validate(doc, "shared")
    return r.returncode, doc


def test_every_key_with_the_programs_that_read_it() -> None:
    status, doc = _shared(PROGRAMS, DATA_FILES)
    paths = {os.path.join(HERE, p): p for p in PROGRAMS}
    for f in doc["data_files"]:
        want = ORACLE["data_files"][os.path.basename(f["file"])]
        assert set(f["keys"]) == set(want)
        for key, entry in f["keys"].items():
            w = want[key]
            assert entry["nbytes"] == w["nbytes"]
            assert entry["dtype"] == (None if w["scalar_type"] is None
                                      else DTYPES[w["scalar_type"]])
            assert entry["shape"] == w["sizes"]
            assert [paths[p] for p in entry["used_by"]] == \
                [p for p in PROGRAMS if key in _reads(p)]
        assert f["unused"] == sorted(k for k in want
                                     if not any(k in _reads(p) for p in PROGRAMS))
    held = {k for d in DATA_FILES for k in ORACLE["data_files"][d]}
    assert [(paths[p["file"]], p["reads"], p["missing"]) for p in doc["programs"]] == \
        [(p, len(_reads(p)), sorted(_reads(p) - held)) for p in PROGRAMS]
    assert status == (1 if any(_reads(p) - held for p in PROGRAMS) else 0) == 1


def test_a_key_no_program_reads_is_unused() -> None:
    """The one-layer task reads half the backbone: the other half is unused."""
    _, doc = _shared(["task_c.pte"], ["foundation.ptd"])
    (f,) = doc["data_files"]
    want = sorted(set(ORACLE["data_files"]["foundation.ptd"]) - _reads("task_c.pte"))
    assert f["unused"] == want and want


def test_the_programs_the_runtime_runs_against_a_file_miss_nothing_in_it() -> None:
    """ExecuTorch's runtime runs a program against a data file exactly when every key the
    program reads is in that file, which is when ``shared`` reports nothing missing."""
    for program in PROGRAMS:
        for data in DATA_FILES:
            status, doc = _shared([program], [data])
            (p,) = doc["programs"]
            runs = ORACLE["programs"][program]["runs_with"][data] is True
            assert runs == (not p["missing"]) == (status == 0), (program, data)


def test_shared_bytes_are_the_keys_two_programs_read() -> None:
    _, doc = _shared(["task_a.pte", "task_b.pte", "task_c.pte"], ["foundation.ptd"])
    want = ORACLE["data_files"]["foundation.ptd"]
    readers = {k: [p for p in ("task_a.pte", "task_b.pte", "task_c.pte") if k in _reads(p)]
               for k in want}
    assert doc["shared_bytes"] == sum(w["nbytes"] for k, w in want.items()
                                      if len(readers[k]) > 1) > 0


def test_hash_keys_are_named_by_the_constants_that_hold_them() -> None:
    _, doc = _shared(["xnn_a.pte"], ["foundation_xnn.ptd"])
    (f,) = doc["data_files"]
    for key in ORACLE["programs"]["xnn_a.pte"]["named_data"]:
        (name,) = f["keys"][key]["read_as"]
        assert name.startswith(os.path.join(HERE, "xnn_a.pte") + ": forward.delegates[0]")


def test_a_native_graphs_keys_are_read_as_the_modules_names() -> None:
    """tests/data/et/native_external.pte's native graph keys its weights in its data file
    by their fully qualified names: each key is read as the constant of that name, as
    torch's ``state_dict()`` of the module names it (the oracle's ``weights``)."""
    with open(os.path.join(ET, "native_external.oracle.json"), encoding="utf-8") as f:
        oracle = json.load(f)
    program = os.path.join(ET, "native_external.pte")
    r = run_cli("shared", "--json", program, "--data",
                os.path.join(ET, "native_external.ptd"))
    assert r.returncode == 0
    (f,) = json.loads(r.stdout)["data_files"]
    assert sorted(f["keys"]) == sorted(oracle["weights"])
    for key, entry in f["keys"].items():
        assert entry["read_as"] == [f"{program}: {key}"]


@pytest.mark.parametrize("argv", [[], ["--data", os.path.join(HERE, "foundation.ptd")]])
def test_usage(argv: List[str]) -> None:
    if argv:   # a data file given as a program
        r = run_cli("shared", os.path.join(HERE, "foundation.ptd"), *argv)
        assert r.returncode == 1 and "not an ExecuTorch program" in r.stderr
    else:      # no data file
        r = run_cli("shared", os.path.join(HERE, "task_a.pte"))
        assert r.returncode == 2 and "--data" in r.stderr
