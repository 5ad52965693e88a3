"""``pyflatmodule profile --etrecord`` against ExecuTorch 1.5.1's Inspector: on programs,
ETRecords and ETDumps its exporter and runtime wrote together (tests/data/et/records by
make_et_profile_record.py), each line's debug handles, operator types, module hierarchy
and stack traces as the Inspector's event blocks give them
(``records.inspector.json``); ETRecords of other programs refused."""
from __future__ import annotations

import json
import os
from itertools import takewhile
from typing import Any, Dict, List

import pytest

from support.cli import file_doc, run_cli
from support.paths import ET

RECORDS = os.path.join(ET, "records")
with open(os.path.join(RECORDS, "records.inspector.json")) as _f:
    INSPECTOR = json.load(_f)
NAMES = ("record_portable", "record_xnnpack")


def _path(name: str, ext: str) -> str:
    return os.path.join(RECORDS, f"{name}.{ext}")


def _profile(name: str, *argv: str) -> Dict[str, Any]:
    doc: Dict[str, Any] = file_doc("profile", _path(name, "etdump"), "--etrecord",
                                   _path(name, "etrecord"), *argv)
    return doc


def _execute(doc: Dict[str, Any]) -> List[Dict[str, Any]]:
    (block,) = [b for b in doc["blocks"] if b["name"] == "Execute"]
    rows: List[Dict[str, Any]] = block["rows"]
    return rows


def _handles(value: Any) -> List[int]:
    return [] if value is None else [value] if isinstance(value, int) else list(value)


def _theirs(name: str) -> List[Dict[str, Any]]:
    (events,) = [b["events"] for b in INSPECTOR[name] if b["name"] == "Execute"]
    return list(events)


def _what(row: Dict[str, Any]) -> Dict[str, Any]:
    """A line's nodes as the Inspector has an event's: its node names end in "_"."""
    nodes = row["nodes"]
    return {"debug_handles": row["debug_handles"], "op_types": row["op_types"],
            "module_hierarchy": {n["name"] + "_": n["module_stack"] for n in nodes
                                 if n["module_stack"] is not None},
            "stack_traces": {n["name"] + "_": n["stack_trace"] for n in nodes}}


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("with_program", [False, True])
def test_instruction_lines_carry_the_inspectors_nodes(name: str, with_program: bool) -> None:
    argv = ["--program", _path(name, "pte")] if with_program else []
    doc = _profile(name, *argv)
    assert doc["etrecord"] == _path(name, "etrecord")
    ours = {r["instructions"][0]: r for r in _execute(doc) if r["kind"] != "runtime"}
    calls = [e for e in _theirs(name) if e["name"] in ("OPERATOR_CALL", "DELEGATE_CALL")]
    assert sorted(ours) == sorted(f"0:{e['instruction_id']}" for e in calls)
    for e in calls:
        want = {"debug_handles": _handles(e["debug_handles"]), "op_types": e["op_types"],
                "module_hierarchy": {k: list(v.values())
                                     for k, v in e["module_hierarchy"].items()},
                "stack_traces": e["stack_traces"]}
        assert _what(ours[f"0:{e['instruction_id']}"]) == want
        for n in ours[f"0:{e['instruction_id']}"]["nodes"]:
            # the innermost module's path, as the Inspector's hierarchy ends
            stack = e["module_hierarchy"][n["name"] + "_"]
            assert n["module_path"] == list(stack.values())[-1][0]


def test_delegate_nodes_carry_what_the_delegate_map_gives() -> None:
    """XNNPACK's delegate map is empty: the Inspector gives its node events no debug
    handles and no operator types, and so does each delegate-node line."""
    doc = _profile("record_xnnpack", "--program", _path("record_xnnpack", "pte"), "--by",
                   "delegate-node")
    nodes = [r for r in _execute(doc) if r["kind"] == "delegate-node"]
    theirs = [e for e in _theirs("record_xnnpack") if e["delegate_debug_identifier"]]
    assert len(nodes) == len(theirs) == 3
    assert all(e["debug_handles"] is None and e["op_types"] == [] for e in theirs)
    assert all(r["debug_handles"] == [] and r["op_types"] == [] for r in nodes)


def test_operator_lines_carry_each_instructions_nodes() -> None:
    """By operator, the two linear layers' addmm calls: both instructions' nodes."""
    doc = _profile("record_portable", "--program", _path("record_portable", "pte"), "--by",
                   "operator")
    (addmm,) = [r for r in _execute(doc) if r["label"] == "aten::addmm.out"]
    by_pc = {e["instruction_id"]: e for e in _theirs("record_portable")
             if e["name"] == "OPERATOR_CALL"}
    want: List[str] = []
    for at in addmm["instructions"]:
        want += by_pc[int(at.split(":")[1])]["op_types"]
    assert addmm["op_types"] == want and len(addmm["instructions"]) == 2


def test_the_text_names_module_and_source_line() -> None:
    name = "record_portable"
    r = run_cli("profile", _path(name, "etdump"), "--etrecord", _path(name, "etrecord"))
    assert r.returncode == 0, r.stderr
    cumsum = next(e for e in _theirs(name) if e["name"] == "OPERATOR_CALL"
                  and e["op_types"] == ["aten.cumsum.default"])
    (trace,) = cumsum["stack_traces"].values()
    code = trace.strip().splitlines()[-1].strip()
    assert "aten.cumsum.default in (top) at make_et_profile_record.py:" in r.stdout
    assert code in r.stdout
    assert "aten.relu.default in block.act at " in r.stdout


@pytest.mark.parametrize("etdump,record", [("record_portable", "record_xnnpack"),
                                           ("record_xnnpack", "record_portable")])
def test_an_etrecord_of_another_program_is_refused(etdump: str, record: str) -> None:
    """The runtime's profile of one program against the other's ETRecord: instruction
    1 calls a kernel (the Inspector's native_call event there) whose operator none of
    the nodes of the debug handles the other ETRecord maps instruction 1 to is."""
    kernel = next(e["name"][len("native_call_"):] for e in _theirs(etdump)
                  if e["instruction_id"] == 1 and e["name"].startswith("native_call_"))
    other = next(e for e in _theirs(record) if e["instruction_id"] == 1
                 and e["name"] in ("OPERATOR_CALL", "DELEGATE_CALL"))
    r = run_cli("profile", "--json", _path(etdump, "etdump"), "--etrecord",
                _path(record, "etrecord"))
    assert r.returncode == 1
    error = json.loads(r.stderr)["error"]
    assert error["code"] == "mismatch" and error["file"] == _path(etdump, "etdump")
    assert f"chain 0 instruction 1 calls {kernel}" in error["message"]
    assert ", ".join(other["op_types"]) in error["message"]


def test_what_is_not_an_etrecord_is_refused() -> None:
    r = run_cli("profile", _path("record_portable", "etdump"), "--etrecord",
                _path("record_portable", "pte"))
    assert r.returncode == 1 and "is not an ETRecord" in r.stderr


def _module(hierarchy: Dict[str, Dict[str, List[str]]]) -> str:
    """The innermost module holding every node of an Inspector event's hierarchy."""
    stacks = [[path for path, _ in stack.values()] for stack in hierarchy.values()]
    common = [level[0] for level in takewhile(lambda lv: len(set(lv)) == 1, zip(*stacks))]
    return common[-1] if common and common[-1] else "(top)"


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("skip", [0, 1])
def test_module_lines_sum_the_inspectors_calls(name: str, skip: int) -> None:
    """By module: each instruction's call in the innermost module holding the nodes the
    Inspector ties to it; counts and totals of its raw times, the first runs left out."""
    doc = _profile(name, "--program", _path(name, "pte"), "--by", "module", "--skip-runs",
                   str(skip))
    want: Dict[str, List[float]] = {}
    where: Dict[str, List[str]] = {}
    for e in _theirs(name):
        if e["name"] in ("OPERATOR_CALL", "DELEGATE_CALL"):
            module = _module(e["module_hierarchy"])
            want.setdefault(module, []).extend(e["raw"][skip:])
            where.setdefault(module, []).append(f"0:{e['instruction_id']}")
    lines = [r for r in _execute(doc) if r["kind"] == "module"]
    assert {r["label"]: r["count"] for r in lines} == {k: len(v) for k, v in want.items()}
    for r in lines:
        assert r["total"] * 1000 == pytest.approx(sum(want[r["label"]]))
        assert r["instructions"] == sorted(where[r["label"]])
    totals = [r["total"] for r in _execute(doc)]
    assert totals == sorted(totals, reverse=True)


def test_by_module_needs_an_etrecord() -> None:
    r = run_cli("profile", _path("record_portable", "etdump"), "--by", "module")
    assert r.returncode == 2 and "--etrecord" in r.stderr
