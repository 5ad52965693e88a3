"""Method.memory_plan() against exir's reading of the programs it wrote: every planned
tensor's buffer, offset and size (tests/data/et/*.oracle.json, ``allocation`` =
[memory_id, offset_low, offset_high]), lifetimes from exir's instruction arguments, no
overlap in exir's own plans, and an overlap made in the bytes found."""
from __future__ import annotations

import glob
import json
import os
import struct
from typing import Any, Dict, List, Tuple

import numpy as np
import pytest

import pyflatmodule as pfm

from support.cli import run_cli
from support.fbwalk import deref, element, field, root
from support.paths import ET
from support.schemas import validate

PROGRAMS = sorted(os.path.basename(p)[:-4] for p in glob.glob(os.path.join(ET, "*.pte")))
#: Bytes per element of ExecuTorch's scalar types in these files.
ITEMSIZE = {6: 4, 4: 8, 3: 4, 11: 1, 7: 8, 5: 2, 15: 2, 1: 1, 0: 1}


def _oracle(stem: str) -> Dict[str, Any]:
    with open(os.path.join(ET, stem + ".oracle.json")) as f:
        return json.load(f)


def _expected(plan: Dict[str, Any]) -> List[Tuple[int, int, int, int]]:
    out = []
    for i, v in enumerate(plan["values"]):
        if v["kind"] == "Tensor" and v.get("allocation"):   # initial values or not
            mem, low, high = v["allocation"]
            nbytes = ITEMSIZE[v["scalar_type"]] * int(np.prod(v["sizes"], dtype=np.int64))
            out.append((i, mem, low + (high << 32), nbytes))
    return out


@pytest.mark.parametrize("stem", PROGRAMS)
def test_the_plan_is_exirs(stem: str) -> None:
    doc = _oracle(stem)
    with pfm.load_program(os.path.join(ET, stem + ".pte")) as p:
        for plan in doc["program"]["execution_plan"]:
            mp = p.methods[plan["name"]].memory_plan()
            assert mp.buffer_sizes == plan["non_const_buffer_sizes"]
            got = [(t.value, t.mem_id, t.offset, t.nbytes) for t in mp.tensors]
            assert got == _expected(plan)
            for t in mp.tensors:
                assert t.end <= mp.buffer_sizes[t.mem_id]
            assert mp.conflicts == [], "exir's planner lets no live tensors overlap"
            assert 0 < mp.peak <= sum(mp.buffer_sizes) or not mp.tensors
            assert mp.instructions == sum(len(c["instructions"]) for c in plan["chains"])


def test_lifetimes_are_the_instructions_naming_each_tensor() -> None:
    """cond_stacktrace.pte's chain as exir reads it: per instruction its kind and
    arguments (KernelCall: op index, then the values; JumpFalseCall: the condition, then
    the destination; MoveCall: from, to; FreeCall: the value)."""
    plan = _oracle("cond_stacktrace")["program"]["execution_plan"][0]
    (chain,) = plan["chains"]
    uses: List[List[int]] = []
    for kind, args in zip(chain["instructions"], chain["args"]):
        uses.append({"KernelCall": args[1:], "DelegateCall": args[1:], "JumpFalseCall": args[:1],
                     "MoveCall": args, "FreeCall": args}[kind])
    end = len(uses) - 1
    with pfm.load_program(os.path.join(ET, "cond_stacktrace.pte")) as p:
        mp = p.methods["forward"].memory_plan()
    for t in mp.tensors:
        at = [pc for pc, used in enumerate(uses) if t.value in used]
        first = 0 if t.value in plan["inputs"] else (at[0] if at else None)
        last = end if t.value in plan["outputs"] else (at[-1] if at else None)
        assert (t.first, t.last) == (first, last), t


def _overlapped() -> Tuple[bytes, Tuple[int, int]]:
    """mlp.pte's bytes with one planned tensor moved onto another alive with it, and the
    two values."""
    path = os.path.join(ET, "mlp.pte")
    with pfm.load_program(path) as p:
        mp = p.methods["forward"].memory_plan()
    # b's offset is stored (a default 0 is not), so it can be changed in place
    a, b = next((a, b) for a in mp.tensors for b in mp.tensors
                if a.value != b.value and a.alive_with(b) and 0 != b.offset != a.offset)
    target = a.offset + 4 if a.offset + 4 + b.nbytes <= mp.buffer_sizes[b.mem_id] else a.offset - 4
    data = bytearray(open(path, "rb").read())
    plan = element(bytes(data), root(bytes(data)), 1, 0)
    ev = element(bytes(data), plan, 2, b.value)               # values[b]: EValue
    tensor = deref(bytes(data), field(bytes(data), ev, 1))     # its Tensor
    details = deref(bytes(data), field(bytes(data), tensor, 6))  # allocation_info
    low = field(bytes(data), details, 1)                        # memory_offset_low
    assert low and struct.unpack_from("<I", data, low)[0] == b.offset
    struct.pack_into("<I", data, low, target)
    return bytes(data), (a.value, b.value)


def test_an_overlap_made_in_the_bytes_is_found() -> None:
    """mlp.pte with one planned tensor moved onto another that is alive with it: the
    plan reports the pair."""
    data, (a, b) = _overlapped()
    with pfm.load_program(data) as p:
        mp = p.methods["forward"].memory_plan()
    assert (min(a, b), max(a, b)) in mp.conflicts


def test_the_memory_command(tmp_path: Any) -> None:
    plan = _oracle("sample")["program"]["execution_plan"][0]
    path = os.path.join(ET, "sample.pte")
    r = run_cli("memory", path, "--json")
    assert r.returncode == 0, r.stderr
    full = json.loads(r.stdout)
    validate(full, "memory")
    (file_doc,) = full["files"]
    assert (file_doc["file"], file_doc["format"]) == (path, "pte")
    (doc,) = file_doc["methods"]
    assert doc["buffer_sizes"] == plan["non_const_buffer_sizes"]
    assert [(t["value"], t["mem_id"], t["offset"], t["nbytes"]) for t in doc["tensors"]] == \
        _expected(plan)
    text = run_cli("memory", path).stdout
    for value, _, offset, nbytes in _expected(plan):
        assert f"%{value:<5d}" in text and f"{offset + nbytes:>8,})" in text
    r = run_cli("memory", os.path.join(ET, "external.ptd"))
    assert r.returncode == 1 and "holds no methods" in r.stderr
    r = run_cli("memory", path, "nope")
    assert r.returncode == 1 and "forward" in r.stderr


SVG = "{http://www.w3.org/2000/svg}"


def _pictured(svg: str) -> Dict[str, List[Dict[str, Any]]]:
    """Per method, each tensor rectangle's facts (its data-* attributes as integers)."""
    import xml.etree.ElementTree as ElementTree
    root_element = ElementTree.parse(svg).getroot()
    assert root_element.tag == SVG + "svg"
    out: Dict[str, List[Dict[str, Any]]] = {}
    for panel in root_element.iter(SVG + "g"):
        if panel.get("class") != "plan":
            continue
        rects = []
        for r in panel.iter(SVG + "rect"):
            if "tensor" in (r.get("class") or "").split():
                facts = {k[5:]: int(v) for k, v in r.attrib.items()
                         if k.startswith("data-") and k != "data-conflicts"}
                facts["conflicts"] = [int(v) for v in r.get("data-conflicts", "").split()]
                facts["class"] = r.get("class")
                title = r.find(SVG + "title")
                facts["title"] = title.text if title is not None else None
                rects.append(facts)
        out[panel.get("data-method") or ""] = rects
    return out


def _rect_of(t: "pfm.executorch.PlannedTensor", conflicts: List[Tuple[int, int]]) -> Dict[str, Any]:
    facts: Dict[str, Any] = {"value": t.value, "mem-id": t.mem_id, "offset": t.offset,
                             "nbytes": t.nbytes}
    if t.first is not None:
        facts.update(first=t.first, last=t.last)
    others = sorted({b for a, b in conflicts if a == t.value} |
                    {a for a, b in conflicts if b == t.value})
    facts["conflicts"] = others
    return facts


@pytest.mark.parametrize("stem", ["two_methods", "cond_stacktrace", "xnnpack_q8", "mutable"])
def test_the_svg_has_a_rectangle_per_planned_tensor(stem: str, tmp_path: Any) -> None:
    path, svg = os.path.join(ET, stem + ".pte"), str(tmp_path / "plan.svg")
    r = run_cli("memory", path, "--svg", svg)
    assert r.returncode == 0, r.stderr
    text = open(svg, encoding="utf-8").read()
    assert "href" not in text and "<script" not in text     # nothing outside the file
    pictured = _pictured(svg)
    with pfm.load_program(path) as p:
        assert list(pictured) == list(p.methods)
        for name, m in p.methods.items():
            mp = m.memory_plan()
            got = sorted(({k: v for k, v in f.items() if k not in ("class", "title")}
                          for f in pictured[name]), key=lambda f: f["value"])
            assert got == sorted((_rect_of(t, mp.conflicts) for t in mp.tensors),
                                 key=lambda f: f["value"])
            for f in pictured[name]:
                assert f["title"].startswith(f"%{f['value']}: {f['nbytes']:,} bytes")


def test_the_svg_marks_a_conflict(tmp_path: Any) -> None:
    """mlp.pte with one planned tensor moved onto another alive with it: both are drawn
    as conflicts, the tooltip names the other."""
    data, (a, b) = _overlapped()
    path, svg = str(tmp_path / "overlap.pte"), str(tmp_path / "plan.svg")
    with open(path, "wb") as f:
        f.write(data)
    r = run_cli("memory", path, "--svg", svg)
    assert r.returncode == 1        # a conflict, and the picture written all the same
    rects = {f["value"]: f for f in _pictured(svg)["forward"]}
    for mine, other in ((a, b), (b, a)):
        assert "conflict" in rects[mine]["class"].split()
        assert other in rects[mine]["conflicts"]
        assert f"%{other}" in rects[mine]["title"]
    assert all("conflict" not in f["class"] for v, f in rects.items() if v not in (a, b)
               and not f["conflicts"])


def test_the_svg_is_not_written_over_the_program(tmp_path: Any) -> None:
    path = str(tmp_path / "sample.pte")
    with open(os.path.join(ET, "sample.pte"), "rb") as f:
        original = f.read()
    with open(path, "wb") as f:
        f.write(original)
    r = run_cli("memory", path, "--svg", path)
    assert r.returncode == 2
    assert open(path, "rb").read() == original
    r = run_cli("memory", path, "--svg", str(tmp_path / "missing" / "plan.svg"))
    assert r.returncode == 1 and "plan.svg" in r.stderr


def test_the_memory_json_of_a_bundled_program() -> None:
    path = os.path.join(ET, "bundled.bpte")
    r = run_cli("memory", path, "--json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    validate(doc, "memory")
    (file_doc,) = doc["files"]
    assert (file_doc["file"], file_doc["format"]) == (path, "bpte")
    with pfm.load(path) as b:
        assert [m["method"] for m in file_doc["methods"]] == list(b.program.methods)


def test_the_svg_of_plans_with_nothing_planned() -> None:
    """A method without instructions or buffers, and an empty buffer holding an empty
    tensor: still a picture, the empty tensor's rectangle there."""
    import xml.etree.ElementTree as ElementTree

    from pyflatmodule.cli.plan_svg import plan_svg
    empty = {"method": "empty", "buffer_sizes": [0], "peak": 0, "instructions": 0,
             "tensors": [], "conflicts": []}
    hollow = {"method": "hollow", "buffer_sizes": [0, 0], "peak": 0, "instructions": 1,
              "tensors": [{"value": 3, "mem_id": 1, "offset": 0, "nbytes": 0, "first": None,
                           "last": None}], "conflicts": []}
    root_element = ElementTree.fromstring(plan_svg([empty, hollow]).encode())
    rects = [r for r in root_element.iter(SVG + "rect") if "tensor" in r.get("class", "")]
    assert [(r.get("data-value"), r.get("class"), r.get("data-first")) for r in rects] == \
        [("3", "tensor unused", None)]


def test_each_label_is_in_the_rectangle_of_its_value(tmp_path: Any) -> None:
    """A value's name written in the picture lies inside that value's rectangle, and
    the large rectangles carry one."""
    import xml.etree.ElementTree as ElementTree
    svg = str(tmp_path / "plan.svg")
    assert run_cli("memory", os.path.join(ET, "xnn_attention.pte"), "--svg", svg).returncode == 0
    root_element = ElementTree.parse(svg).getroot()
    rects = {int(r.get("data-value") or -1): [float(r.get(k) or 0) for k in
                                              ("x", "y", "width", "height")]
             for r in root_element.iter(SVG + "rect") if r.get("data-value") is not None}
    labels = [t for t in root_element.iter(SVG + "text") if t.get("class") == "label"]
    assert labels
    for t in labels:
        x, y, w, h = rects[int((t.text or "").lstrip("%"))]
        assert x <= float(t.get("x") or 0) <= x + w and y <= float(t.get("y") or 0) <= y + h
    named = {int((t.text or "").lstrip("%")) for t in labels}
    assert all(v in named for v, (_, _, w, h) in rects.items() if w >= 40 and h >= 20)
