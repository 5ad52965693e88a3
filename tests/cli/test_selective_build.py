"""``pyflatmodule ops --yaml`` on ExecuTorch programs against ExecuTorch's own selective
build tools.

tests/data/oplist.oracle.json (tests/data/make_oplist_oracle.py) holds what ExecuTorch
1.5.1's ``gen_oplist --model_file_path`` wrote for every program in tests/data (this
project's and other projects' ``wild`` ones), parsed, and what ``gen_all_oplist`` merged
for several; with ExecuTorch installed, it runs again here on every program. The YAML
written here must parse to the same document: the operators with their flags and the
programs that hold them, and each operator's kernel keys (each tensor argument's scalar
type and dim order).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any, Dict, List

import pytest

from support import run_cli
from support.paths import DATA

with open(os.path.join(DATA, "oplist.oracle.json"), encoding="utf-8") as _f:
    ORACLE: Dict[str, Any] = json.load(_f)
READ = sorted(p for p, doc in ORACLE["files"].items() if "error" not in doc)
yaml = pytest.importorskip("yaml")


def _ops(*argv: str) -> Any:
    """``ops ARGV`` run in tests/data, as the oracle's tools ran: the paths are the same."""
    cwd = os.getcwd()
    os.chdir(DATA)
    try:
        return run_cli("ops", *argv)
    finally:
        os.chdir(cwd)


def _yaml(*paths: str) -> Dict[str, Any]:
    r = _ops("--yaml", *paths)
    assert r.returncode == 0, r.stderr
    doc: Dict[str, Any] = yaml.safe_load(r.stdout)
    return doc


@pytest.mark.parametrize("path", READ)
def test_one_program_is_what_gen_oplist_writes(path: str) -> None:
    assert _yaml(path) == ORACLE["files"][path]


def test_several_programs_are_what_gen_all_oplist_merges() -> None:
    merged = ORACLE["merged"]
    assert _yaml(*merged["programs"]) == merged["yaml"]


def test_the_comma_list_is_the_union() -> None:
    programs: List[str] = ORACLE["merged"]["programs"]
    r = _ops("--list", *programs)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip().split(",") == sorted(ORACLE["merged"]["yaml"]["operators"])


@pytest.mark.parametrize("path", [os.path.join("et", "external.ptd"),
                                  os.path.join("et", "profile.etdump")])
@pytest.mark.parametrize("form", ["--yaml", "--list"])
def test_a_file_without_operators_is_an_error_not_an_empty_list(path: str, form: str) -> None:
    r = _ops(form, os.path.join("et", "mlp.pte"), path)
    assert (r.returncode, r.stdout) == (1, "") and "holds no methods" in r.stderr


def test_programs_and_ptmf_models_are_not_mixed() -> None:
    r = _ops("--yaml", os.path.join("et", "mlp.pte"), "mlp_lite.ptl")
    assert r.returncode == 2 and r.stdout == "" and "one kind" in r.stderr


def test_a_program_gen_oplist_crashes_on_is_refused_here() -> None:
    """ExecuTorch's tool reads with unchecked accessors; the file it dies on is a
    FormatError here, and nothing is written."""
    crashed = [p for p, doc in ORACLE["files"].items() if "error" in doc]
    assert crashed
    for path in crashed:
        r = _ops("--yaml", path)
        assert (r.returncode, r.stdout) == (1, "") and ": invalid " in r.stderr, r.stderr


_LIVE = """
import sys
from executorch.codegen.tools.gen_oplist import gen_oplist
gen_oplist(output_path=sys.argv[2], model_file_path=sys.argv[1])
"""


@pytest.mark.parametrize("path", READ[:: max(1, len(READ) // 8)])
def test_gen_oplist_live(path: str, tmp_path: Any) -> None:
    """ExecuTorch's tool, run now (in a child: it may crash), on a spread of programs."""
    pytest.importorskip("executorch.codegen.tools.gen_oplist")
    out = tmp_path / "selected_operators.yaml"
    subprocess.run([sys.executable, "-c", _LIVE, path, str(out)], cwd=DATA, check=True,
                   capture_output=True, timeout=600)
    assert _yaml(path) == yaml.safe_load(out.read_text())
