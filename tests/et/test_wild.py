"""Files others wrote: every one ExecuTorch 1.5.1's runtime loads opens here.

tests/data/wild/ holds programs (one with a data file, one that is no program at all), a
bundled program and an ETDump copied byte for byte from public repositories
(``SOURCES.json``: repository, path, commit, license, SHA-256; LICENSES/), with
ExecuTorch's answers beside each (tests/data/make_wild_data.py): exir's reading, and the
runtime's ``load_program`` and ``load_method`` at both verification levels.
test_executorch.py and test_etdump.py compare every value with exir's reading; here, the
runtime's answers, and the writers' quirks that FlatBuffers' verifier takes (found in the
files' bytes by hand, tests/support/fbwalk.py), which the default opens and ``strict``
names. Nothing here needs ExecuTorch installed.
"""
from __future__ import annotations

import hashlib
import json
import os
import struct
from typing import Any, Dict, List, Tuple

import pytest

import pyflatmodule as pfm

from support import fbwalk
from support.checked import load_full
from support.cli import run_cli
from support.paths import WILD

with open(os.path.join(WILD, "SOURCES.json"), encoding="utf-8") as _f:
    SOURCES: List[Dict[str, str]] = json.load(_f)["files"]
PROGRAMS = [s["file"] for s in SOURCES if s["file"].endswith((".pte", ".bpte"))]
#: Each program's data files (.ptd), by its name
DATA = {s["file"]: [os.path.join(WILD, d) for d in s.get("data", [])] for s in SOURCES}
#: ExecuTorch's ScalarType numbers (its schema's enum) of the dtypes these files use
DTYPES = {0: "uint8", 1: "int8", 2: "int16", 3: "int32", 4: "int64", 5: "float16",
          6: "float32", 7: "float64", 11: "bool", 15: "bfloat16", 27: "uint16"}
#: Program's field ids (executorch_program.fbs) and DataSegment's
PROGRAM_SEGMENTS = 4
SEGMENT_FIELDS = (("offset", 0), ("size", 1))


def _oracle(name: str) -> Dict[str, Any]:
    with open(os.path.join(WILD, os.path.splitext(name)[0] + ".oracle.json"),
              encoding="utf-8") as f:
        doc: Dict[str, Any] = json.load(f)
    return doc


def _program(f: Any) -> pfm.Program:
    return f.program if isinstance(f, pfm.BundledProgram) else f


def _no_program(name: str) -> bool:
    """Neither exir nor the runtime reads it: a file that is no program at all."""
    oracle = _oracle(name)
    return "exir_error" in oracle and not any(
        r.get("load_program") == "ok" for r in oracle["runtime"].values())


#: The programs something of ExecuTorch reads
READ = [n for n in PROGRAMS if not _no_program(n)]


def test_the_files_are_the_bytes_their_sources_name() -> None:
    listed = {s["file"] for s in SOURCES}
    here = {n for n in os.listdir(WILD) if not n.endswith((".oracle.json", ".oracle.npz"))
            and os.path.isfile(os.path.join(WILD, n))}
    assert here - {"SOURCES.json"} == listed
    for s in SOURCES:
        with open(os.path.join(WILD, s["file"]), "rb") as f:
            assert hashlib.sha256(f.read()).hexdigest() == s["sha256"], s["file"]
        assert s["repository"] and s["path"] and len(s["commit"]) == 40 and s["license"]


@pytest.mark.parametrize("name", PROGRAMS)
def test_every_program_the_runtime_loads_opens_with_its_methods(name: str) -> None:
    """Where the runtime's load_program succeeds (at either level), the program opens
    with default options and verifies in full; its methods are the runtime's, and each
    method's inputs and outputs are what the runtime's metadata says."""
    runtime = _oracle(name)["runtime"]
    loaded = [r for r in runtime.values() if r.get("load_program") == "ok"]
    if not loaded:
        # ExecuTorch 1.5.1's runtime is built without the deprecated inline constant
        # buffer: InvalidProgram (0x23). exir reads it (test_executorch.py): it opens.
        # And a file that is no program at all (exir cannot read it either) is refused.
        assert all(r["load_program"].endswith("error: 0x:23") for r in runtime.values())
        if _no_program(name):
            with pytest.raises(pfm.FormatError):
                pfm.load(os.path.join(WILD, name))
            return
    with load_full(os.path.join(WILD, name), data=DATA[name]) as f:
        p = _program(f)
        for r in loaded:
            assert sorted(p.methods) == r["method_names"]
            for method, meta in r["methods"].items():
                m = p.methods[method]
                got = m.input_meta + m.output_meta
                want = meta["inputs"] + meta["outputs"]
                assert len(got) == len(want)
                for g, w in zip(got, want):
                    if w is None:      # the runtime has no tensor metadata for it
                        assert g.kind != "Tensor"
                    else:
                        assert (g.kind, g.dtype, g.shape) == \
                            ("Tensor", DTYPES[w["dtype"]], tuple(w["sizes"]))


def _fields_past_their_table(data: bytes) -> List[Tuple[str, int]]:
    """Each DataSegment field whose bytes end past its table's declared size (the
    vtable's second entry), as (path, its vtable slot's position); walked by hand."""
    out = []
    root = fbwalk.root(data)
    if not fbwalk.field(data, root, PROGRAM_SEGMENTS):
        return out
    segments = fbwalk.deref(data, fbwalk.field(data, root, PROGRAM_SEGMENTS))
    for i in range(fbwalk.u32(data, segments)):
        table = fbwalk.element(data, root, PROGRAM_SEGMENTS, i)
        vtable = table - struct.unpack_from("<i", data, table)[0]
        declared = struct.unpack_from("<H", data, vtable + 2)[0]
        for fname, fid in SEGMENT_FIELDS:
            at = fbwalk.field(data, table, fid)
            if at and at + 8 > table + declared:
                out.append((f"segments[{i}].{fname}", fbwalk.slot(data, table, fid)))
    return out


@pytest.mark.parametrize("name", [n for n in READ if n.endswith(".pte")])
def test_a_field_past_its_tables_declared_size_opens_and_strict_names_it(name: str) -> None:
    """Some of ExecuTorch's writers put a DataSegment's uint64 size at offset 4 of a
    table whose vtable declares 8 bytes: FlatBuffers' C++ verifier (the runtime's) bounds
    a field by the buffer, not the table, and the runtime loads these files."""
    path = os.path.join(WILD, name)
    with open(path, "rb") as f:
        past = _fields_past_their_table(f.read())
    with pfm.load(path) as p:
        assert p.methods
    if not past:
        pfm.verify(path, strict=True)
        return
    assert all(r["load_program"] == "ok" for r in _oracle(name)["runtime"].values())
    with pytest.raises(pfm.FormatError) as e:
        pfm.verify(path, strict=True)
    assert e.value.code == "field_outside_table"
    assert (e.value.path, e.value.offset) in past


def test_some_wild_programs_have_fields_past_their_tables() -> None:
    """The quirk above is in the files, not only in the tests' reading of them."""
    quirky = []
    for name in READ:
        if name.endswith(".pte"):
            with open(os.path.join(WILD, name), "rb") as f:
                if _fields_past_their_table(f.read()):
                    quirky.append(name)
    assert len(quirky) >= 4, quirky


@pytest.mark.parametrize("name", [s["file"] for s in SOURCES])
def test_the_command_line_verifies_each(name: str) -> None:
    run = run_cli("verify", os.path.join(WILD, name))
    if name in PROGRAMS and _no_program(name):
        assert run.returncode == 1 and ": INVALID [" in run.stdout, run.stdout + run.stderr
        return
    assert run.returncode == 0, run.stdout + run.stderr
    assert ": OK (" in run.stdout
