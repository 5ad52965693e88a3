"""Every command's ``--json`` has one shape, ``{"files": [FILE, ...]}`` with one FILE per
file read, in order, each naming its ``file`` and its ``format``, for every format and any
number of files; strict JSON; checked against the JSON Schema the package ships
(pyflatmodule/schemas/COMMAND.schema.json).

The format expected of each file comes from its bytes: the identifier at bytes 4..8
(``PTMF``, ``ET12``, ``FT01``, ``BP08``), or an ETDump's ``ED00`` at bytes 8..12.
"""
from __future__ import annotations

import base64
import glob
import hashlib
import json
import os
from typing import Any, Dict, List

import jsonschema
import pytest

from support import SAMPLE
from support.cli import run_cli
from support.paths import DATA
from support.schemas import validate

FILES = sorted(glob.glob(os.path.join(DATA, "*.ff")) + glob.glob(os.path.join(DATA, "*.ptl"))
               + glob.glob(os.path.join(DATA, "et", "*.pte"))
               + glob.glob(os.path.join(DATA, "et", "*.ptd"))
               + glob.glob(os.path.join(DATA, "et", "*.bpte"))
               + glob.glob(os.path.join(DATA, "et", "*.etdump")))
IDENTIFIERS = {b"PTMF": "ptmf", b"ET12": "pte", b"FT01": "ptd", b"BP08": "bpte"}
#: The commands whose ``--json`` follows the convention, each with its schema.
COMMANDS = ("info", "verify", "tree", "dis", "ops")
#: Those that take several files (``tree`` and ``dis`` read one: a list of one; so do
#: ``export`` and ``extract``, tested below).
SEVERAL = ("info", "verify", "ops")


def _format(path: str) -> str:
    with open(path, "rb") as f:
        head = f.read(12)
    return "etdump" if head[8:12] == b"ED00" else IDENTIFIERS[head[4:8]]


def _methodless(path: str) -> bool:
    """A file without methods: a data file, an ETDump, or a PTMF file whose oracle (torch's
    answers) lists no functions (a parameters file)."""
    if _format(path) in ("ptd", "etdump"):
        return True
    stem = os.path.splitext(path)[0]
    if _format(path) != "ptmf" or not os.path.exists(stem + ".oracle.json"):
        return False
    with open(stem + ".oracle.json", encoding="utf-8") as f:
        return json.load(f)["info"]["function_names"] == []


def _strict(text: str) -> Any:
    return json.loads(text, parse_constant=lambda c: pytest.fail(f"bare {c} in JSON"))


def _files(command: str, paths: List[str]) -> List[Any]:
    r = run_cli(command, "--json", *paths)
    # dis and ops end with status 1 on a file without methods, their entry all the same
    failed = command in ("dis", "ops") and any(_methodless(p) for p in paths)
    assert (r.returncode, r.stderr) == (1 if failed else 0, ""), r.stderr
    doc = _strict(r.stdout)
    validate(doc, command)
    assert [(f["file"], f["format"]) for f in doc["files"]] == [(p, _format(p)) for p in paths]
    return list(doc["files"])


def test_every_format_is_here() -> None:
    assert {_format(p) for p in FILES} == {"ptmf", "pte", "ptd", "bpte", "etdump"}


@pytest.mark.parametrize("command", COMMANDS)
@pytest.mark.parametrize("path", FILES, ids=lambda p: os.path.relpath(p, DATA))
def test_one_file(command: str, path: str) -> None:
    _files(command, [path])


@pytest.mark.parametrize("command", SEVERAL)
def test_every_file_at_once(command: str) -> None:
    one_by_one = [_files(command, [p])[0] for p in FILES]
    assert _files(command, FILES) == one_by_one


def test_verify_invalid_files_keep_the_shape(tmp_path) -> None:
    garbage = tmp_path / "garbage.pte"
    garbage.write_bytes(b"\xff" * 64)
    missing = str(tmp_path / "missing.pte")
    r = run_cli("verify", "--json", FILES[0], str(garbage), missing)
    assert r.returncode == 1
    doc = _strict(r.stdout)
    validate(doc, "verify")
    assert (doc["valid"], doc["invalid"]) == (1, 2)
    assert [(f["format"], f["valid"]) for f in doc["files"]] == \
        [(_format(FILES[0]), True), ("unknown", False), (None, False)]
    assert [f["error"]["code"] for f in doc["files"][1:]] == ["bad_identifier", "io_error"]


@pytest.mark.parametrize("command", COMMANDS)
def test_a_file_without_its_format_is_refused(command: str) -> None:
    doc = _strict(run_cli(command, "--json", FILES[0]).stdout)
    del doc["files"][0]["format"]
    with pytest.raises(jsonschema.ValidationError):
        validate(doc, command)


def _nodes(node: Dict[str, Any]) -> List[Dict[str, Any]]:
    return [node] + [n for c in node.get("children", []) for n in _nodes(c)]


@pytest.mark.parametrize("path, facts", [
    (os.path.join(DATA, "et", "xnnpack_q8_channel.pte"),
     [("program", "missing_data"), ("method", "inputs"), ("values", "kinds"),
      ("Tensor", "stored"), ("chain", "instructions"), ("delegate", "id"),
      ("xnnpack_graph", "node_kinds"), ("tensor", "dtype")]),
    (SAMPLE, [("object", "type"), ("tensor", "shape"), ("list", "length"), ("bool", "repr")]),
])
def test_tree_nodes_of_no_kind_or_without_their_kinds_facts_are_refused(
        path: str, facts: List[Any]) -> None:
    """The tree schema knows every node kind and the facts each must have: a node whose
    kind it does not know, or one missing a fact of its kind, is refused."""
    doc = _strict(run_cli("tree", "--json", path).stdout)
    assert _valid(doc)
    nodes = _nodes(doc["files"][0]["root"])
    for kind, fact in facts:
        node = next(n for n in nodes if n["kind"] == kind)
        value = node.pop(fact)
        assert not _valid(doc), (kind, fact)
        node[fact] = value
    assert _valid(doc)
    nodes[-1]["kind"] = "no such kind"
    assert not _valid(doc)


def _valid(doc: Any) -> bool:
    try:
        validate(doc, "tree")
    except jsonschema.ValidationError:
        return False
    return True


def _data_for(path: str) -> List[str]:
    """``--data`` for the program that keeps its weights in a data file."""
    ptd = path[:-4] + ".ptd"
    return ["--data", ptd] if path.endswith(".pte") and os.path.exists(ptd) else []


@pytest.mark.parametrize("suffix", [".npz", ".safetensors"])
@pytest.mark.parametrize("path", FILES, ids=lambda p: os.path.relpath(p, DATA))
def test_export(path: str, suffix: str, tmp_path) -> None:
    out = str(tmp_path / ("w" + suffix))
    r = run_cli("export", "--json", path, out, *_data_for(path))
    assert r.returncode == 0, r.stderr
    doc = _strict(r.stdout)
    validate(doc, "export")
    (f,) = doc["files"]
    assert (f["file"], f["format"], f["output"], f["output_format"], f["size"]) == \
        (path, _format(path), out, suffix[1:], os.path.getsize(out))


def _extractable() -> Dict[str, List[str]]:
    """Entries to extract, by file, named by their writers: torch's extra files
    (extra_files.inputs.json) and exir's named data keys (xnn_conv.oracle.json)."""
    with open(os.path.join(DATA, "extra_files.inputs.json"), encoding="utf-8") as f:
        extra = list(json.load(f)["extra_files"])
    with open(os.path.join(DATA, "et", "xnn_conv.oracle.json"), encoding="utf-8") as f:
        keys = [k for k, _ in json.load(f)["program"]["named_data"]]
    return {os.path.join(DATA, "extra_files.ff"): extra,
            os.path.join(DATA, "et", "xnn_conv.pte"): keys}


@pytest.mark.parametrize("path", sorted(_extractable()), ids=os.path.basename)
def test_extract(path: str, tmp_path) -> None:
    for name in _extractable()[path]:
        target = tmp_path / "entry"
        for output in (["-o", str(target)], []):
            r = run_cli("extract", "--json", path, name, *output)
            assert r.returncode == 0, r.stderr
            doc = _strict(r.stdout)
            validate(doc, "extract")
            (f,) = doc["files"]
            assert (f["file"], f["format"], f["name"]) == (path, _format(path), name)
            data = target.read_bytes()
            assert (f["size"], f["sha256"]) == (len(data), hashlib.sha256(data).hexdigest())
            assert base64.b64decode(f.get("content_base64", "")) == (b"" if output else data)


MODELS = [p for p in FILES if _format(p) != "etdump"]   # a record of runs: diff refuses it


@pytest.mark.parametrize("path", MODELS, ids=lambda p: os.path.relpath(p, DATA))
def test_diff_of_a_file_with_itself(path: str) -> None:
    data = _data_for(path)
    r = run_cli("diff", "--json", path, path, *data)
    assert r.returncode == 0, r.stderr
    doc = _strict(r.stdout)
    validate(doc, "diff")
    assert [(f["file"], f["format"]) for f in doc["files"]] == [(path, _format(path))] * 2
    assert doc["equal"] is True and doc["structure"] == []


def test_diff_of_two_programs() -> None:
    """exir wrote mlp_changed.pte from mlp.pte's module with l2.bias[1] += 0.5
    (tests/data/make_et_data.py)."""
    a, b = (os.path.join(DATA, "et", n) for n in ("mlp.pte", "mlp_changed.pte"))
    r = run_cli("diff", "--json", a, b)
    assert r.returncode == 1, r.stderr
    doc = _strict(r.stdout)
    validate(doc, "diff")
    assert [f["file"] for f in doc["files"]] == [a, b] and doc["equal"] is False
    (changed,) = [t for t in doc["tensor_diffs"] if t["status"] != "equal"]
    assert (changed["shape"], changed["differing"]) == ([3], 1)
    assert changed["max_abs"] == pytest.approx(0.5, rel=1e-6)   # float32 arithmetic
