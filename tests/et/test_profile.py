"""``pyflatmodule profile`` and ``pyflatmodule.executorch.profile`` against ExecuTorch 1.5.1:
on profiles its runtime wrote (tests/data/et/runs by make_et_profile.py, make_etdump.py), each
event's count, mean, min and max as ExecuTorch's devtools Inspector computes them
(``profile.inspector.json``), and as its reader ``deserialize_from_etdump_flatcc`` reads
the events (``etdump.oracle.json``); the operators and delegates named from the program's
bytes."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import defaultdict
from typing import Any, Dict, List, Tuple

import pytest

import pyflatmodule as pfm
from pyflatmodule.executorch import timings
from pyflatmodule.executorch.profile import kernel_event

from support.cli import file_doc, reads_in_both, run_cli
from support.paths import ET
from support.runtime import HAS_RUNTIME

RUNS = os.path.join(ET, "runs")
with open(os.path.join(RUNS, "profile.inspector.json")) as _f:
    INSPECTOR = json.load(_f)
with open(os.path.join(ET, "etdump.oracle.json")) as _f:
    READER = json.load(_f)
#: ETDump ticks (nanoseconds) per microsecond, the unit of --json's times.
US = 1000
NAMES = ("profile_portable", "profile_xnnpack", "profile_methods", "profile_wrap")


def _path(name: str, ext: str) -> str:
    return os.path.join(RUNS, f"{name}.{ext}")


def _json(*argv: str) -> Dict[str, Any]:
    doc: Dict[str, Any] = file_doc("profile", *argv)
    return doc


def _timings(block: Dict[str, Any]) -> List[Dict[str, Any]]:
    """Every timing of a block with the instruction id it belongs to."""
    # the runtime records its own events (Method::execute...) at instruction 0
    out = [dict(t, instruction_id=0) for t in block["framework"]]
    for i in block["instructions"]:
        for t in ([i["call"]] if i["call"] else []) + i["events"]:
            out.append(dict(t, instruction_id=i["instruction"]))
    return out


def _label(t: Dict[str, Any]) -> str:
    # the Inspector names a delegate's event by its debug identifier
    return str(t["delegate_debug_id"]) if t["delegate_debug_id"] is not None else t["name"]


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("with_program", [False, True])
def test_timings_are_the_inspectors(name: str, with_program: bool) -> None:
    if with_program and not os.path.exists(_path(name, "pte")):
        pytest.skip("compiled from JSON: no program ran")
    argv = [_path(name, "etdump")] + (["--program", _path(name, "pte")] if with_program else [])
    doc = _json(*argv)
    assert doc["file"] == argv[0] and doc["format"] == "etdump" and doc["unit"] == "us"
    expected = INSPECTOR[name]
    assert [(b["name"], b["bundled_input_index"]) for b in doc["blocks"]] == \
        [(b["name"], b["bundled_input_index"]) for b in expected]
    for ours, theirs in zip(doc["blocks"], expected):
        # the Inspector's times are the ticks (ns to ns); ours microseconds
        got = sorted((t["instruction_id"], _label(t), t["count"], round(t["min"] * US),
                      round(t["max"] * US)) for t in _timings(ours))
        want = sorted((e["instruction_id"], e["name"], e["count"], e["min"], e["max"])
                      for e in theirs["events"])
        assert got == want
        means = {(t["instruction_id"], _label(t)): t["mean"] * US for t in _timings(ours)}
        for e in theirs["events"]:
            assert means[(e["instruction_id"], e["name"])] == pytest.approx(e["mean"],
                                                                            rel=1e-12)
        # one Method::execute per run (the wrapped clock's file was compiled, not run)
        (execute,) = [e["count"] for e in theirs["events"] if e["name"] == "Method::execute"] \
            or [ours["runs"]]
        assert ours["runs"] == execute


def test_xnnpack_nodes_are_beneath_their_delegate_call() -> None:
    doc = _json(_path("profile_xnnpack", "etdump"), "--program", _path("profile_xnnpack", "pte"))
    execute = next(b for b in doc["blocks"] if b["name"] == "Execute")
    assert execute["method"] == "forward"
    inspector = next(b for b in INSPECTOR["profile_xnnpack"] if b["name"] == "Execute")
    delegated: Dict[int, List[str]] = defaultdict(list)
    for e in inspector["events"]:
        if e["is_delegated_op"]:
            delegated[e["instruction_id"]].append(e["name"])
    assert len(delegated) == 2 and all(len(v) == 2 for v in delegated.values())
    program = pfm.load(_path("profile_xnnpack", "pte"))
    code = program.methods["forward"].chains[0].instructions
    for i in execute["instructions"]:
        ins = code[i["instruction"]]
        if i["instruction"] in delegated:
            assert isinstance(ins, pfm.executorch.DelegateCall)
            assert (i["kind"], i["delegate_index"]) == ("delegate", ins.delegate_index)
            assert i["delegate"] == "XnnpackBackend"
            assert i["call"]["name"] == "DELEGATE_CALL"
            assert [t["delegate_debug_id"] for t in i["events"]] == delegated[i["instruction"]]
        else:
            assert isinstance(ins, pfm.executorch.KernelCall)
            assert i["kind"] == "kernel" and i["call"]["name"] == "OPERATOR_CALL"
            operator = str(program.methods["forward"].operators[ins.op_index])
            assert i["operator"] == operator
            # the runtime names the kernel's event after the operator the program calls
            assert [t["name"] for t in i["events"]] == [kernel_event(operator)]


@pytest.mark.parametrize("name", ["profile", "xnnpack"])
def test_timings_of_the_events_exirs_reader_reads(name: str) -> None:
    """make_etdump.py's profiles: one run each; every event's duration as
    deserialize_from_etdump_flatcc reads its start and end."""
    expected: Dict[Tuple[str, int, int, Any], List[int]] = defaultdict(list)
    for run in READER[name]["run_data"]:
        for e in run["events"]:
            if e["kind"] == "profile":
                debug_id = e["delegate_debug_id_str"] if e["delegate_debug_id_str"] \
                    is not None else (e["delegate_debug_id_int"]
                                      if e["delegate_debug_id_int"] != -1 else None)
                expected[(run["name"], e["chain_index"], e["instruction_id"], e["name"],
                          debug_id)].append(e["end_time"] - e["start_time"])
    got: Dict[Tuple[str, int, int, Any], List[int]] = {}
    with pfm.load(os.path.join(ET, f"{name}.etdump")) as dump:
        for b in timings(dump):
            for t in b.framework:
                key = (b.name, -1, 0, t.name, t.delegate_debug_id)
                got[key] = t.durations
            for i in b.instructions:
                for t in ([i.call] if i.call else []) + i.events:
                    got[(b.name, i.chain, i.instruction, t.name, t.delegate_debug_id)] = \
                        t.durations
    assert got == dict(expected)


def test_each_block_is_the_method_whose_instructions_its_events_fit() -> None:
    """profile_methods: forward executed twice, head three times; both methods' loads
    fit either, so the load block names none."""
    doc = _json(_path("profile_methods", "etdump"), "--program", _path("profile_methods", "pte"))
    got = [(b["name"], b["method"], b["runs"]) for b in doc["blocks"]]
    assert got == [("Default", None, 2), ("Execute", "forward", 2), ("Execute", "head", 3)]
    assert [b["method"] for b in _json(_path("profile_methods", "etdump"))["blocks"]] == \
        [None] * 3


def test_a_wrapped_32_bit_clock_counts_as_the_inspectors() -> None:
    """profile_wrap.etdump's second run ends at 400 after starting at 2**32 - 300: 699
    ticks, as the Inspector counts (raw events from the file's bytes)."""
    with pfm.load(_path("profile_wrap", "etdump")) as dump:
        (block,) = timings(dump)
        raw = [[(e.start_time, e.end_time) for e in r.events] for r in dump.runs]
    assert raw[1][0] == (2**32 - 300, 400)
    assert block.instructions[0].call is not None
    assert block.instructions[0].call.durations == [700, 699]


def test_text_output_names_what_the_json_does() -> None:
    etdump, pte = _path("profile_xnnpack", "etdump"), _path("profile_xnnpack", "pte")
    r = run_cli("profile", etdump, "--program", pte)
    assert r.returncode == 0, r.stderr
    assert "total us" in r.stdout and "method forward" in r.stdout
    for line in ("XnnpackBackend (delegate 0)", "XnnpackBackend (delegate 1)",
                 "aten::cumsum.out", "Method::init"):
        assert line in r.stdout
    r = run_cli("profile", etdump, "--program", pte, "--by", "delegate-node")
    assert r.returncode == 0 and "Sigmoid (NC) #1" in r.stdout
    doc = reads_in_both("profile", etdump)
    assert all(b["method"] is None for b in doc["files"][0]["blocks"])


def test_a_profile_of_another_program_is_refused() -> None:
    r = run_cli("profile", "--json", _path("profile_portable", "etdump"),
                "--program", _path("profile_xnnpack", "pte"))
    assert r.returncode == 1
    error = json.loads(r.stderr)["error"]
    assert error["code"] == "mismatch" and error["file"] == _path("profile_portable", "etdump")
    # a bundled program is named by the program it embeds
    r = run_cli("profile", _path("profile_portable", "etdump"), "--program",
                os.path.join(ET, "bundled.bpte"))
    assert r.returncode == 1 and "fit no method" in r.stderr


@pytest.mark.parametrize("etdump,pte", [("profile_methods", "profile_portable"),
                                        ("profile_portable", "profile_methods"),
                                        ("profile_xnnpack", "profile_portable"),
                                        ("profile_portable", "profile_xnnpack")])
def test_the_refusal_names_the_event_that_does_not_fit(etdump: str, pte: str) -> None:
    """The runtime's ETDump of one program against another whose methods' first
    instruction differs: the error names, per method, the kernel's event the Inspector
    reads at instruction 0 and what the program's instruction there is."""
    first = [e["name"] for b in INSPECTOR[etdump] if b["name"] == "Execute"
             for e in b["events"] if e["instruction_id"] == 0
             and e["name"].startswith("native_call_")]
    program = pfm.load(_path(pte, "pte"))
    r = run_cli("profile", "--json", _path(etdump, "etdump"), "--program", _path(pte, "pte"))
    if etdump == "profile_portable" and pte == "profile_methods":
        # forward is the same model on the same kernels: the profile is of that method
        assert r.returncode == 0, r.stderr
        return
    assert r.returncode == 1
    error = json.loads(r.stderr)["error"]
    assert error["code"] == "mismatch"
    for name, method in program.methods.items():
        ins = method.chains[0].instructions[0]
        assert f"{name}: event " in error["message"]
        if isinstance(ins, pfm.executorch.KernelCall):
            assert f"the instruction calls {method.operators[ins.op_index]}" in error["message"]
        else:
            assert f"a kernel's event at a {type(ins).__name__}" in error["message"]
    assert any(f"event {n!r} at chain 0 instruction 0" in error["message"] for n in first)


def test_what_is_not_an_etdump_is_refused() -> None:
    pte = _path("profile_xnnpack", "pte")
    r = run_cli("profile", pte)
    assert r.returncode == 1 and "not an ETDump" in r.stderr
    r = run_cli("profile", _path("profile_xnnpack", "etdump"), "--program",
                _path("profile_portable", "etdump"))
    assert r.returncode == 1 and "not an ExecuTorch program" in r.stderr
    r = run_cli("profile", _path("profile_xnnpack", "etdump"), "--data",
                os.path.join(ET, "external.ptd"))
    assert r.returncode == 2


@pytest.mark.skipif(not HAS_RUNTIME, reason="ExecuTorch is not installed")
def test_the_stored_numbers_are_the_inspectors_now() -> None:
    """ExecuTorch's Inspector, in a child process, on the committed ETDumps: what
    profile.inspector.json holds (the file and its numbers were written together)."""
    child = ("import json, sys; sys.path.insert(0, sys.argv[1]); import make_et_profile as m; "
             "print(json.dumps({n: m._inspected(m.os.path.join(m.OUT, n + '.etdump')) "
             "for n in sys.argv[2:]}))")
    r = subprocess.run([sys.executable, "-c", child, os.path.dirname(ET), *NAMES],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    assert json.loads(r.stdout.strip().splitlines()[-1]) == {n: INSPECTOR[n] for n in NAMES}


def _inspector_rows(name: str, block: str, by: str, skip: int) -> List[Tuple[str, int, float]]:
    """The Inspector's events of a block summed as ``--by`` sums them: (what, count,
    total ticks) per line, the first ``skip`` runs' times left out. An instruction is
    named by its id, an operator by its kernel's event (native_call_<operator>) or as a
    delegate, a delegate node by its debug identifier and instruction."""
    (events,) = [b["events"] for b in INSPECTOR[name] if b["name"] == block]
    kernels = {e["instruction_id"]: e["name"][len("native_call_"):] for e in events
               if e["name"].startswith("native_call_")}
    lines: Dict[str, List[float]] = defaultdict(list)
    for e in events:
        raw = e["raw"][skip:]
        if by == "delegate-node":
            if e["is_delegated_op"]:
                lines[f"{e['name']}@{e['instruction_id']}"] += raw
        elif e["name"] in ("OPERATOR_CALL", "DELEGATE_CALL"):
            key = str(e["instruction_id"]) if by == "instruction" else \
                kernels.get(e["instruction_id"], "delegate")
            lines[key] += raw
    return sorted((k, len(v), sum(v)) for k, v in lines.items())


def _execute_total(name: str, skip: int) -> float:
    (events,) = [b["events"] for b in INSPECTOR[name] if b["name"] == "Execute"]
    return sum(next(e for e in events if e["name"] == "Method::execute")["raw"][skip:])


def _our_key(row: Dict[str, Any], by: str) -> str:
    if by == "instruction":
        (at,) = row["instructions"]
        return at.split(":")[1]
    if by == "delegate-node":
        (at,) = row["instructions"]
        # the node's name, then the delegate call it ran in
        node = row["label"][:row["label"].rindex(" (XnnpackBackend (delegate")]
        return f"{node}@{at.split(':')[1]}"
    return "delegate" if row["kind"] == "delegate" else row["label"].split("::")[-1]


@pytest.mark.parametrize("name", ["profile_portable", "profile_xnnpack"])
@pytest.mark.parametrize("by", ["instruction", "operator", "delegate-node"])
@pytest.mark.parametrize("skip", [0, 1, 3])
def test_rows_sum_the_inspectors_events(name: str, by: str, skip: int) -> None:
    """Each line's count and total, and its share of Method::execute, as the Inspector's
    per-run times sum them, the first runs left out; lines most time first."""
    doc = _json(_path(name, "etdump"), "--program", _path(name, "pte"), "--by", by,
                "--skip-runs", str(skip))
    assert (doc["by"], doc["skip_runs"], doc["unit"]) == (by, skip, "us")
    block = next(b for b in doc["blocks"] if b["name"] == "Execute")
    assert (block["runs"], block["skipped"]) == (INSPECTOR["runs"] - skip, skip)
    total = _execute_total(name, skip)
    assert block["total"] * US == pytest.approx(total)
    lines = [r for r in block["rows"] if r["kind"] != "runtime"]
    totals = [r["total"] for r in block["rows"]]
    assert totals == sorted(totals, reverse=True)
    got = sorted((_our_key(r, by), r["count"], pytest.approx(r["total"] * US)) for r in lines)
    assert got == _inspector_rows(name, "Execute", by, skip)
    for r in lines:
        assert r["percent"] == pytest.approx(100 * r["total"] * US / total)
        assert r["mean"] == pytest.approx(r["total"] / r["count"])


def test_the_load_block_shows_the_runtimes_events() -> None:
    """A method's load: Method::init as a line, a share of Program::load_method, whose
    ticks are the block's total (the Inspector's raw times); --skip-runs 1 leaves the
    single load out."""
    doc = _json(_path("profile_portable", "etdump"))
    (load,) = [b for b in doc["blocks"] if b["name"] == "Default"]
    (events,) = [b["events"] for b in INSPECTOR["profile_portable"] if b["name"] == "Default"]
    raw = {e["name"]: e["raw"][0] for e in events}
    assert load["total"] * US == raw["Program::load_method"]
    (row,) = load["rows"]
    assert (row["label"], row["kind"], row["instructions"]) == ("Method::init", "runtime", [])
    assert row["percent"] == pytest.approx(100 * raw["Method::init"] / raw["Program::load_method"])
    skipped = _json(_path("profile_portable", "etdump"), "--skip-runs", "1")
    assert [b["name"] for b in skipped["blocks"]] == ["Execute"]


def test_the_text_table_says_its_unit_and_totals() -> None:
    etdump = _path("profile_portable", "etdump")
    doc = _json(etdump)
    r = run_cli("profile", etdump)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    head = [i for i, line in enumerate(lines) if "total us" in line or "total ms" in line]
    assert len(head) == len(doc["blocks"])
    for i, b in zip(head, doc["blocks"]):
        for k, row in enumerate(b["rows"]):
            assert row["label"] in lines[i + 1 + k]
            assert f"{row['percent']:.1f}" == lines[i + 1 + k].split()[-1]
        total = lines[i + 1 + len(b["rows"])].split()
        assert total[0] == "total" and int(total[1]) == b["runs"]
    r = run_cli("profile", etdump, "--skip-runs", "-1")
    assert r.returncode == 2
