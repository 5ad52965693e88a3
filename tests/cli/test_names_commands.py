"""The module's names in every command that shows tensors (``dis``, ``tree``, ``size``,
``diff``: ``--names REF`` or ``--etrecord REF``) and in Python
(:func:`pyflatmodule.naming.named_state_dict`, ``diff(names_a=..., names_b=...)``).

The answers are ExecuTorch's and torch's: the ETRecords of tests/data/etrecord/ were
written by ExecuTorch 1.5.1 beside their programs, and their oracles hold, for each of
the record's state dicts (the module's ``state_dict()`` as each method's program holds
it), torch's names, shapes and the SHA-256 of each tensor's bytes. A constant the
commands name must be that tensor byte for byte, and each method's constants must take
its own program's names (``encode`` was exported from a wrapper module: its names are
``m.block.fc.weight``, where ``forward``'s are ``block.fc.weight``, for the same bytes).
"""
from __future__ import annotations

import hashlib
import json
import os
import re
from typing import Any, Dict, Iterator, List

import numpy as np
import pytest

import pyflatmodule as pfm
from pyflatmodule.diff import diff
from pyflatmodule.naming import named_state_dict

from support.cli import run_cli
from support.paths import DATA

RECORDS = os.path.join(DATA, "etrecord")


def _paths(stem: str) -> List[str]:
    return [os.path.join(RECORDS, f"{stem}.pte"), os.path.join(RECORDS, f"{stem}.etrecord")]


def _oracle(stem: str, program: str) -> Dict[str, Any]:
    """torch's answer for one state dict of the record (``forward``, ``encode``: a
    method's edge program; ``exported_program``)."""
    with open(os.path.join(RECORDS, f"{stem}.oracle.json"), encoding="utf-8") as f:
        saves = json.load(f)["torch_save"]
    key = program if program == "exported_program" else \
        f"edge_dialect_exported_program/{program}"
    return dict(saves[f"{key}_state_dict"])


def _sha(array: Any) -> str:
    return hashlib.sha256(np.ascontiguousarray(array).tobytes()).hexdigest()


def _json(*argv: str) -> Dict[str, Any]:
    r = run_cli(*argv, "--json")
    assert r.returncode in (0, 1), r.stderr
    doc: Dict[str, Any] = json.loads(r.stdout)
    return doc


def _walk(doc: Any) -> Iterator[Dict[str, Any]]:
    if isinstance(doc, list):
        for item in doc:
            yield from _walk(item)
    elif isinstance(doc, dict):
        yield doc
        for value in doc.values():
            yield from _walk(value)


def test_python_named_state_dict_is_each_methods_state_dict_byte_for_byte() -> None:
    pte, record = _paths("portable")
    want = {**_oracle("portable", "forward"), **_oracle("portable", "encode")}
    with pfm.load(pte) as p:
        got = named_state_dict(p, record)
        assert set(want) == set(got)   # every constant of both methods, by its own name
        for name, w in want.items():
            assert w["sha256"] == _sha(got[name]), name
            assert w["shape"] == list(got[name].shape), name


def test_python_named_state_dict_of_xnnpack_weights_in_the_modules_layout() -> None:
    """The conv weight XNNPACK stores channels last comes back in torch's order."""
    pte, record = _paths("xnnpack")
    want = _oracle("xnnpack", "exported_program")
    with pfm.load(pte) as p, pfm.load(record) as r:   # an opened record serves too
        got = named_state_dict(p, r)
    assert set(want) == set(got)
    for name, w in want.items():
        assert (w["shape"], w["sha256"]) == (list(got[name].shape), _sha(got[name])), name


@pytest.mark.parametrize("flag", ["--names", "--etrecord"])
def test_dis_shows_each_constant_operand_by_its_module_name(flag: str) -> None:
    pte, record = _paths("portable")
    doc = _json("dis", pte, flag, record)
    with pfm.load(pte) as p:
        for method in doc["files"][0]["methods"]:
            want = _oracle("portable", method["name"])
            named = [v for v in _walk(method["chains"]) if "module_name" in v]
            assert named
            values = p.methods[method["name"]].values
            for v in named:
                w = want[v["module_name"]]
                assert (w["shape"], w["sha256"]) == \
                    (list(values[v["index"]].shape), _sha(values[v["index"]])), v
    text = run_cli("dis", pte, "encode", flag, record).stdout
    assert re.search(r"%0: const float32\[4, 4\] m\.block\.fc\.weight$", text, re.M), text


def test_dis_names_a_delegates_weights() -> None:
    pte, record = _paths("xnnpack")
    want = _oracle("xnnpack", "exported_program")
    doc = _json("dis", pte, "--names", record)
    graph_values = [v for v in _walk(doc) if "datatype" in v and v["constant"]]
    assert {v["module_name"] for v in graph_values} == set(want)
    for v in graph_values:   # a conv filter's dims are its OHWI: the same sizes
        assert sorted(v["dims"]) == sorted(want[v["module_name"]]["shape"])
        assert v["tensor"].startswith("forward.delegates[0].values[")
    assert "fc.fc.weight" in run_cli("dis", pte, "--names", record).stdout


def test_tree_names_every_constant_and_filters_by_module_name() -> None:
    pte, record = _paths("portable")
    root = _json("tree", pte, "--names", record)["files"][0]["root"]
    for method in root["children"]:
        if method.get("kind") != "method":
            continue
        want = _oracle("portable", method["name"])
        named = {n["module_name"]: n for n in _walk(method) if "module_name" in n}
        assert set(want) == set(named)
        with pfm.load(pte) as p:
            values = p.methods[method["name"]].values
            for name, node in named.items():
                assert want[name]["sha256"] == _sha(values[node["index"]]), name
    text = run_cli("tree", pte, "--names", record, "--filter", "head.1").stdout
    assert re.search(r"\[\d+\] head\.1\.weight: tensor float32\[3, 4\]", text), text
    assert "head.0" not in text


def test_size_names_the_largest_tensors_and_the_treemaps_boxes(tmp_path: Any) -> None:
    pte, record = _paths("xnnpack")
    want = _oracle("xnnpack", "exported_program")
    svg = tmp_path / "s.svg"
    doc = _json("size", pte, "--names", record, "--svg", str(svg))["files"][0]
    largest = doc["largest_tensors"]
    assert {t["module_name"] for t in largest} == set(want)
    for t in largest:
        w = want[t["module_name"]]
        assert sorted(w["shape"]) == sorted(t["shape"])
        assert int(np.prod(w["shape"])) * 4 == t["bytes"]
    readers = [who for r in _walk(doc["regions"]) for who in r.get("readers", [])]
    assert readers and all(who.split(" ")[0] in want for who in readers), readers
    tips = re.findall(r"<title>named_data ([^:]+):", svg.read_text(encoding="utf-8"))
    assert {t.split(" ")[0] for t in tips} == set(want)   # each box by what reads it

    pte, record = _paths("portable")
    svg = tmp_path / "p.svg"
    run_cli("size", pte, "--etrecord", record, "--svg", str(svg))
    boxes = re.findall(r"<title>constant ([^:]+):", svg.read_text(encoding="utf-8"))
    everything = {**_oracle("portable", "forward"), **_oracle("portable", "encode")}
    shown = {n for box in boxes for n in box.split("; ")}
    assert shown == set(everything)   # the buffers both methods read carry both names


def test_diff_pairs_and_reports_tensors_by_module_name() -> None:
    pte, record = _paths("portable")
    names = {**_oracle("portable", "forward"), **_oracle("portable", "encode")}
    doc = _json("diff", pte, pte, "--names", record)
    assert doc["equal"]
    assert {t["a"] for t in doc["tensor_diffs"]} == set(names)
    assert all(t["a"] == t["b"] for t in doc["tensor_diffs"])
    d = diff(pte, pte, names_a=record, names_b=record)
    assert {t.name_a for t in d.tensors} == set(names)


def test_diff_with_one_named_side_pairs_the_rest_by_role() -> None:
    pte, record = _paths("xnnpack")
    want = _oracle("xnnpack", "exported_program")
    doc = _json("diff", pte, pte, "--names-a", record)
    assert doc["equal"]
    assert {t["a"] for t in doc["tensor_diffs"]} == set(want)
    assert all(t["b"].startswith("forward.delegates[0].values[") for t in doc["tensor_diffs"])


@pytest.mark.parametrize("command", ["dis", "tree", "size", "export", "diff"])
def test_a_reference_that_is_not_one_is_a_one_line_error(command: str, tmp_path: Any) -> None:
    pte, _ = _paths("portable")
    bad = tmp_path / "bad.safetensors"
    bad.write_bytes(b"\xff" * 16)
    args = {"export": [str(tmp_path / "w.npz")], "diff": [pte]}.get(command, [])
    r = run_cli(command, pte, *args, "--names", str(bad))
    assert (2 if command == "diff" else 1) == r.returncode
    assert 1 == len(r.stderr.splitlines()), r.stderr
    assert "not a reference of the module's tensors" in r.stderr


@pytest.mark.parametrize("path", [os.path.join(RECORDS, "portable.pte"),
                                  os.path.join(DATA, "et", "bundled.bpte")])
def test_each_constant_buffer_holds_the_bytes_of_the_tensors_said_to_be_in_it(
        path: str) -> None:
    """What labels a treemap's constant boxes: checked against the file's own bytes (a
    bundled program's regions are the file's, its program's offsets the program's)."""
    from pyflatmodule.cli.formats import open_file
    with open(path, "rb") as f:
        raw = f.read()
    with open_file(path) as f:
        held = f.region_tensors()
        regions = {(r.kind, r.label): r for top in f.regions() or () for r in top.walk()}
        tensors = f.tensors()
    assert held and set(held) == {k for k in regions if k[0] == "constant"}
    for key, names in held.items():
        r = regions[key]
        for name in names:
            data = np.ascontiguousarray(tensors[name]).tobytes()
            assert data == raw[r.start:r.start + len(data)], (key, name)
