"""Which ExecuTorch runtime can run a file: ``minimum_runtime``.

The table it reads (pyflatmodule/executorch/releases.py) is generated from ExecuTorch's
schema history; with a clone of ExecuTorch (EXECUTORCH_REPO) and the executorch package
installed, the generator is run again and must write the committed table byte for byte.
The files' expectations come from their bytes and ExecuTorch's schemas as released:
the files in tests/data/et were written by ExecuTorch 1.5.1, so none needs a later
release; a byte edited to a value a later release added needs that release.
"""
from __future__ import annotations

import importlib.util
import json
import os
import pathlib
import struct
import subprocess
import sys
from typing import Dict, List, Optional, Tuple

import pytest

import pyflatmodule as pfm
from pyflatmodule.core.fbread import schema_of
from pyflatmodule.executorch import releases

from support.cli import run_cli
from support.fbwalk import deref, element, field, root, u32
from support.paths import CSRC, ET, ROOT, WILD


def _key(release: str) -> Tuple[int, ...]:
    return tuple(int(x) for x in release.split("."))


def _files(folder: str) -> List[str]:
    return sorted(n for n in os.listdir(folder) if n.endswith((".pte", ".ptd")))


def _read(name: str) -> bytes:
    with open(os.path.join(ET, name), "rb") as f:
        return f.read()


@pytest.mark.parametrize("name", _files(ET))
def test_written_by_1_5_1_needs_no_later_runtime(name: str) -> None:
    with pfm.load(os.path.join(ET, name)) as f:
        m = f.minimum_runtime
        assert _key(m.release) <= (1, 5, 1), m
        (doc,) = json.loads(run_cli("info", "--json", os.path.join(ET, name)).stdout)["files"]
        assert doc["minimum_runtime"] == m.as_json()
        # every reason names a release, the latest of them the minimum
        assert all(_key(r) <= _key(m.release) for _, r in m.reasons)
        assert not m.reasons or m.reasons[0][1] == m.release


@pytest.mark.parametrize("name", [n for n in _files(WILD) if n != "djl_corrupt.pte"])
def test_wild_files_need_a_released_runtime(name: str) -> None:
    with pfm.load(os.path.join(WILD, name)) as f:
        m = f.minimum_runtime
        assert _key(m.release) <= (1, 5, 1), m


def test_named_data_needs_0_6_0() -> None:
    # Program.named_data (field 7) is in v0.6.0's schema/program.fbs, not v0.5.0's
    data = _read("xnnpack.pte")
    assert field(data, root(data), 7)
    m = pfm.load(data).minimum_runtime
    assert m.release == "0.6.0"
    assert ("Program.named_data", "0.6.0") in m.reasons


def test_data_file_needs_0_7_0() -> None:
    # FlatTensor.segments and named_data (fields 1, 2) are numbered so from v0.7.0's
    # flat_tensor.fbs on; v0.6.0's had tensor_alignment and tensors there
    data = _read("external.ptd")
    assert field(data, root(data), 1) and field(data, root(data), 2)
    m = pfm.load(data).minimum_runtime
    assert m.release == "0.7.0"
    assert ("FlatTensor.segments", "0.7.0") in m.reasons
    assert ("data file", "0.6.0") in m.reasons


def test_program_counts_its_data_files() -> None:
    # external tensors are read from a data file, the first runtime with one is 0.6.0;
    # the data file given needs 0.7.0 (above)
    alone = pfm.load(os.path.join(ET, "external.pte")).minimum_runtime
    assert alone.release == "0.6.0"
    assert ("external tensors", "0.6.0") in alone.reasons
    with pfm.load(os.path.join(ET, "external.pte"),
                  data=[os.path.join(ET, "external.ptd")]) as p:
        m = p.minimum_runtime
    assert m.release == "0.7.0"
    assert ("data file external.ptd", "0.7.0") in m.reasons


def _first_float_tensor(data: bytes) -> int:
    """Position of the scalar_type byte of the first FLOAT (6) tensor value of plan 0
    (Program field 1, ExecutionPlan.values field 2, EValue val_type/val 0/1, KernelTypes
    Tensor 5, Tensor.scalar_type field 0)."""
    plan = element(data, root(data), 1, 0)
    values = deref(data, field(data, plan, 2))
    for i in range(u32(data, values)):
        ev = deref(data, values + 4 + 4 * i)
        if field(data, ev, 0) and data[field(data, ev, 0)] == 5:
            tensor = deref(data, field(data, ev, 1))
            at = field(data, tensor, 0)
            if at and data[at] == 6:
                return at
    raise AssertionError("no FLOAT tensor")


def test_a_later_scalar_type_needs_its_release() -> None:
    # UINT32 = 28 is in v0.5.0's schema/scalar_type.fbs, not in v0.4.0's; mlp.pte uses
    # Tensor.data_buffer_idx (0.4.0) and nothing later
    data = _read("mlp.pte")
    before = pfm.load(data).minimum_runtime
    assert before.release == "0.4.0"
    out = bytearray(data)
    struct.pack_into("<b", out, _first_float_tensor(data), 28)   # 4 bytes, as FLOAT
    m = pfm.load(bytes(out)).minimum_runtime
    assert m.release == "0.5.0"
    assert m.reasons[0] == ("ScalarType.UINT32", "0.5.0")


def test_xnnpack_payloads_count() -> None:
    # XNNCopy is a member of XNodeUnion in v1.1.0's
    # backends/xnnpack/serialization/runtime_schema.fbs, not in v1.0.1's; the attention
    # graph ExecuTorch 1.5.1 lowered copies a value
    with pfm.load(os.path.join(ET, "xnn_attention.pte")) as p:
        kinds = {n.kind for d in p.methods["forward"].delegates
                 for n in d.graph.nodes}   # type: ignore[union-attr]
        m = p.minimum_runtime
    assert "XNNCopy" in kinds
    assert m.release == "1.1.0"
    assert m.reasons[0] == ("XNNPACK XNNCopy", "1.1.0")


@pytest.mark.parametrize("identifier, fields, members", [
    (b"ET12", releases.PROGRAM_FIELDS, releases.PROGRAM_UNION_MEMBERS),
    (b"FT01", releases.FLAT_TENSOR_FIELDS, {}),
    (b"XN01", None, releases.XNNPACK_UNION_MEMBERS)])
def test_every_feature_the_reader_knows_has_a_release(
        identifier: bytes, fields: Optional[Dict[Tuple[str, str], str]],
        members: Dict[Tuple[str, str], str]) -> None:
    # the project's schemas are ExecuTorch 1.5.1's: a field or member the table lacks
    # would be reported as needing a release after 1.5.1
    schema = schema_of(struct.unpack("<I", identifier)[0])
    for table, declared in schema.tables.items():
        for name in declared:
            if name.endswith("_type") and name[:-5] in declared:
                continue   # a union's type field: counted as its member
            assert fields is None or (table, name) in fields, (table, name)
    for union, names in schema.unions.items():
        for name in names[1:]:
            assert not name or (union, name) in members, (union, name)


def test_info_prints_it() -> None:
    """In-process: the package under test is the one imported (an installed one in CI,
    where the checkout's own tree is not built)."""
    r = run_cli("info", os.path.join(ET, "xnnpack.pte"))
    assert r.returncode == 0, r.stderr
    assert "minimum runtime: ExecuTorch 0.6.0" in r.stdout


_REPO = os.environ.get("EXECUTORCH_REPO")
_PACKAGE = importlib.util.find_spec("executorch")


@pytest.mark.skipif(not _REPO or _PACKAGE is None or not _PACKAGE.submodule_search_locations,
                    reason="needs a clone of ExecuTorch (EXECUTORCH_REPO) and executorch")
def test_table_is_what_the_history_says(tmp_path: pathlib.Path) -> None:
    assert _PACKAGE is not None and _PACKAGE.submodule_search_locations
    folder = list(_PACKAGE.submodule_search_locations)[0]
    out = tmp_path / "releases.py"
    subprocess.run([sys.executable, os.path.join(CSRC, "schemas", "release_history.py"),
                    str(_REPO), "--latest", f"1.5.1:{folder}", "-o", str(out)],
                   check=True, capture_output=True)
    with open(os.path.join(ROOT, "pyflatmodule", "executorch", "releases.py")) as f:
        assert out.read_text() == f.read()
