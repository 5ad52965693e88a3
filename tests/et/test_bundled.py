"""ExecuTorch bundled programs (.bpte) against ExecuTorch 1.5.1's own reading of them.

tests/data/et/bundled.bpte and its oracle come from tests/data/make_et_bundled.py:
``bundled.oracle.json`` (the version, the embedded program's offset, size and SHA-256,
each test value's kind, scalar type, sizes, dim_order or value) and
``bundled.oracle.npz`` (each test tensor's data bytes as exir's deserializer gives them).
Bad inputs are made from the real file's bytes, by walking its flatbuffer here (not with the reader
under test): a required field's vtable slot zeroed, a vector's length cut, a name changed.
"""
from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import struct
import subprocess
import sys
from typing import Any, Dict, List, Tuple

import numpy as np
import pytest

import pyflatmodule as pfm

from support.cli import reads_in_both, run_cli
from support.fbwalk import deref, element, field, root, slot, u32, zero_slot
from support.paths import ET
from support.regions import assert_tiles, walk
from support.schemas import validate

PATH = os.path.join(ET, "bundled.bpte")
with open(PATH, "rb") as _f:
    BYTES = _f.read()
with open(os.path.join(ET, "bundled.oracle.json"), encoding="utf-8") as _f:
    ORACLE: Dict[str, Any] = json.load(_f)
#: ExecuTorch's ScalarType numbers of the dtypes the test file holds
DTYPES = {6: np.float32, 4: np.int64}
#: The Python type of each scalar kind of test value
SCALARS = {"Int": int, "Bool": bool, "Double": float}


ROOT = root(BYTES)
# BundledProgram: version 0, method_test_suites 1, program 2; suite: method_name 0,
# test_cases 1; case: inputs 0, expected_outputs 1; Value: val_type 0, val 1;
# Tensor: scalar_type 0, sizes 1, data 2, dim_order 3.
SUITE = element(BYTES, ROOT, 1, 0)
CASE = element(BYTES, SUITE, 1, 0)
VALUE = element(BYTES, CASE, 0, 0)
TENSOR = deref(BYTES, field(BYTES, VALUE, 1))


def _zero_slot(table: int, field_id: int) -> bytes:
    return zero_slot(BYTES, table, field_id)


def test_suite_and_case_tables_share_a_vtable() -> None:
    """Why _zero_slot copies the vtable: zeroing a slot in place would change both."""
    assert slot(BYTES, SUITE, 0) == slot(BYTES, CASE, 0)


# ------------------------------------------------------------ ExecuTorch's reading

def _expected_value(desc: Dict[str, Any], arrays: Any) -> Any:
    return arrays[desc["npz"]] if desc["kind"] == "Tensor" else desc["value"]


def test_matches_exirs_reading() -> None:
    arrays = np.load(os.path.join(ET, "bundled.oracle.npz"))
    with pfm.load(PATH) as b:
        assert isinstance(b, pfm.BundledProgram)
        assert b.version == ORACLE["version"]
        start, end = b.program_span
        assert (start, end - start) == (ORACLE["program_offset"], ORACLE["program_size"])
        assert hashlib.sha256(BYTES[start:end]).hexdigest() == ORACLE["program_sha256"]
        suites = b.test_suites
        assert list(suites) == [s["method_name"] for s in ORACLE["test_suites"]]
        for suite in ORACLE["test_suites"]:
            cases = suites[suite["method_name"]]
            assert len(cases) == len(suite["test_cases"])
            for case, want in zip(cases, suite["test_cases"]):
                for got_values, key in ((case.inputs, "inputs"),
                                        (case.expected_outputs, "expected_outputs")):
                    assert len(got_values) == len(want[key])
                    for got, desc in zip(got_values, want[key]):
                        _check_value(got, desc, arrays)


def _check_value(got: Any, desc: Dict[str, Any], arrays: Any) -> None:
    if desc["kind"] != "Tensor":
        assert type(got) is SCALARS[desc["kind"]] and got == desc["value"]
        return
    want = arrays[desc["npz"]]   # the data bytes exir read
    assert isinstance(got, np.ndarray) and not got.flags.writeable
    assert got.dtype == DTYPES[desc["scalar_type"]]
    assert list(got.shape) == desc["sizes"]
    assert desc["dim_order"] == list(range(len(desc["sizes"])))   # contiguous here
    assert got.tobytes() == want.tobytes()


def test_embedded_program_is_the_program_bundled() -> None:
    """The embedded program reads as the same bytes loaded on their own do."""
    start, size = ORACLE["program_offset"], ORACLE["program_size"]
    with pfm.load(PATH) as b, pfm.load(BYTES[start:start + size]) as alone:
        assert isinstance(alone, pfm.Program)
        assert b.program.info() == alone.info()
        assert list(b.program.methods) == list(alone.methods)
        for key, array in alone.state_dict().items():
            assert np.array_equal(b.program.state_dict()[key], array)


def test_test_tensors_are_views_of_the_buffer() -> None:
    buf = bytearray(BYTES)
    b = pfm.load(buf)
    assert isinstance(b, pfm.BundledProgram)
    lo = np.frombuffer(buf, np.uint8).ctypes.data
    tensors = [v for cases in b.test_suites.values() for c in cases
               for v in (*c.inputs, *c.expected_outputs) if isinstance(v, np.ndarray)]
    assert len(tensors) == b.info()["test_tensors"] == sum(
        v["kind"] == "Tensor" for suite in ORACLE["test_suites"] for case in suite["test_cases"]
        for v in (*case["inputs"], *case["expected_outputs"]))
    for t in tensors:
        assert lo <= t.ctypes.data and t.ctypes.data + t.nbytes <= lo + len(buf)
    b.close()
    assert b.closed and tensors[0].sum() == tensors[0].sum()   # still readable
    with pytest.raises(ValueError, match="closed"):
        b.test_suites


def test_data_files_are_refused() -> None:
    with pytest.raises(ValueError, match="data= is for"):
        pfm.load(PATH, data=[os.path.join(ET, "external.ptd")])


#: Run in a child (ExecuTorch's runtime may crash): the program at argv[1] on the cases
#: of argv[2] (JSON: per case its method and inputs, each a scalar or the npz key of a
#: tensor in argv[3]), each output saved to argv[4] as "<case>/<i>".
_RUN_CASES = """
import json, sys, numpy as np, torch
from executorch.runtime import Runtime
program = Runtime.get().load_program(sys.argv[1])
tensors = np.load(sys.argv[3])
outs = {}
for c, (method, inputs) in enumerate(json.load(open(sys.argv[2]))):
    args = [torch.from_numpy(tensors[v["npz"]].copy()) if "npz" in v else v["value"]
            for v in inputs]
    for i, o in enumerate(program.load_method(method).execute(args)):
        outs[f"{c}/{i}"] = o.numpy()
np.savez(sys.argv[4], **outs)
"""


@pytest.mark.skipif(importlib.util.find_spec("executorch") is None,
                    reason="needs executorch's runtime")
def test_runtime_gives_the_expected_outputs_on_the_inputs_read(tmp_path: Any) -> None:
    """ExecuTorch's runtime, running the embedded program as read here on the test inputs
    as read here, gives the expected outputs as read here (what its bundled-program check,
    verify_result_with_bundled_expected_output, compares; same tolerances)."""
    with pfm.load(PATH) as b:
        assert isinstance(b, pfm.BundledProgram)
        start, end = b.program_span
        program = tmp_path / "embedded.pte"
        program.write_bytes(BYTES[start:end])
        tensors: Dict[str, np.ndarray] = {}
        cases = [(name, case) for name, cs in b.test_suites.items() for case in cs]
        described = []
        for c, (name, case) in enumerate(cases):
            inputs = []
            for i, v in enumerate(case.inputs):
                if isinstance(v, np.ndarray):
                    tensors[f"{c}/{i}"] = v
                    inputs.append({"npz": f"{c}/{i}"})
                else:
                    inputs.append({"value": v})
            described.append((name, inputs))
        (tmp_path / "cases.json").write_text(json.dumps(described))
        np.savez(tmp_path / "inputs.npz", **tensors)
        out = tmp_path / "outputs.npz"
        child = subprocess.run([sys.executable, "-c", _RUN_CASES, str(program),
                                str(tmp_path / "cases.json"), str(tmp_path / "inputs.npz"),
                                str(out)], capture_output=True, text=True, timeout=300)
        assert child.returncode == 0, child.stderr[-2000:]
        got = np.load(out)
        assert len(cases) == sum(len(s["test_cases"]) for s in ORACLE["test_suites"]) == 3
        for c, (_, case) in enumerate(cases):
            assert len(case.expected_outputs) == len([k for k in got.files
                                                      if k.startswith(f"{c}/")])
            for i, want in enumerate(case.expected_outputs):
                np.testing.assert_allclose(got[f"{c}/{i}"], want, rtol=1e-5, atol=1e-8)


# ----------------------------------------------------------------- bad input

def _error(data: bytes) -> pfm.FormatError:
    with pytest.raises(pfm.FormatError) as info:
        pfm.load(data)
    return info.value


REQUIRED: List[Tuple[str, int, int, str]] = [
    ("method_test_suites", ROOT, 1, ""),
    ("program", ROOT, 2, ""),
    ("method_name", SUITE, 0, "method_test_suites[0]"),
    ("test_cases", SUITE, 1, "method_test_suites[0]"),
    ("inputs", CASE, 0, "method_test_suites[0].test_cases[0]"),
    ("expected_outputs", CASE, 1, "method_test_suites[0].test_cases[0]"),
    ("val", VALUE, 1, "method_test_suites[0].test_cases[0].inputs[0]"),
    ("sizes", TENSOR, 1, "method_test_suites[0].test_cases[0].inputs[0].val<Tensor>"),
    ("data", TENSOR, 2, "method_test_suites[0].test_cases[0].inputs[0].val<Tensor>"),
    ("dim_order", TENSOR, 3, "method_test_suites[0].test_cases[0].inputs[0].val<Tensor>"),
]


@pytest.mark.parametrize("name,table,field_id,where", REQUIRED, ids=[r[0] for r in REQUIRED])
def test_a_field_the_runtime_dereferences_is_required(name: str, table: int, field_id: int,
                                                       where: str) -> None:
    """ExecuTorch's bundled_program.cpp reads each of these without checking that it is
    there; a file without one is refused, located at the table that lacks it."""
    e = _error(_zero_slot(table, field_id))
    assert e.code == "missing_field", e
    assert e.path == (f"{where}.{name}" if where else name), e
    assert e.offset == table, e


def test_tensor_data_shorter_than_its_sizes() -> None:
    data_vec = deref(BYTES, field(BYTES, TENSOR, 2))
    out = bytearray(BYTES)
    struct.pack_into("<I", out, data_vec, u32(BYTES, data_vec) - 1)
    e = _error(bytes(out))
    assert e.code == "bad_tensor"
    assert e.path == "method_test_suites[0].test_cases[0].inputs[0].val<Tensor>.data"
    assert e.offset == data_vec + 4


def test_tensor_with_a_negative_size() -> None:
    sizes = deref(BYTES, field(BYTES, TENSOR, 1))
    out = bytearray(BYTES)
    struct.pack_into("<i", out, sizes + 4, -2)
    e = _error(bytes(out))
    assert e.code == "negative_dimension"
    assert e.offset == sizes + 4


def test_dim_order_that_is_no_permutation() -> None:
    order = deref(BYTES, field(BYTES, TENSOR, 3))
    out = bytearray(BYTES)
    out[order + 4:order + 6] = b"\x00\x00"
    e = _error(bytes(out))
    assert e.code == "bad_dim_order"
    assert e.offset == order + 5


def test_suite_naming_no_method_of_the_program() -> None:
    name = deref(BYTES, field(BYTES, SUITE, 0))
    assert BYTES[name + 4:name + 11] == b"forward"
    out = bytearray(BYTES)
    out[name + 4:name + 11] = b"fastest"
    e = _error(bytes(out))
    assert e.code == "unknown_method"
    assert e.path == "method_test_suites[0].method_name" and e.offset == name + 4
    assert "'fastest'" in str(e) and "'forward'" in str(e)


def test_a_fault_in_the_embedded_program_is_located_in_the_bundled_file() -> None:
    start = ORACLE["program_offset"]
    root = start + u32(BYTES, start)
    out = bytearray(BYTES)
    struct.pack_into("<I", out, start, len(BYTES))   # the program's root offset, past its end
    e = _error(bytes(out))
    assert e.path.startswith("program"), e
    assert start <= e.offset <= start + ORACLE["program_size"], e
    assert root != start + len(BYTES)


def test_wrong_identifier() -> None:
    e = _error(BYTES[:4] + b"BP07" + BYTES[8:])
    assert e.code in ("bad_identifier", "too_small"), e


# ------------------------------------------------------------------------ CLI

@pytest.mark.parametrize("command", ["info", "verify", "tree", "dis", "ops"])
def test_cli_reads_it(command: str) -> None:
    reads_in_both(command, PATH)


def test_cli_info_names_the_test_cases() -> None:
    (doc,) = json.loads(run_cli("info", "--json", PATH).stdout)["files"]
    assert doc["format"] == "bpte" and doc["size"] == len(BYTES)
    assert doc["version"] == ORACLE["version"]
    assert list(doc["methods_tested"]) == [s["method_name"] for s in ORACLE["test_suites"]]
    cases = doc["methods_tested"]["forward"]
    want = ORACLE["test_suites"][0]["test_cases"]
    assert [len(c["inputs"]) for c in cases] == [len(c["inputs"]) for c in want]
    assert doc["program"]["format"] == "pte"
    assert doc["program"]["size"] == ORACLE["program_size"]


def _oracle_tensors() -> Dict[str, np.ndarray]:
    """Each test tensor exir's deserializer gives, by ``test_suites.METHOD[CASE].PART[I]``."""
    out = {}
    with np.load(os.path.join(ET, "bundled.oracle.npz")) as z:
        for suite in ORACLE["test_suites"]:
            for k, case in enumerate(suite["test_cases"]):
                for part in ("inputs", "expected_outputs"):
                    for i, v in enumerate(case[part]):
                        if v["kind"] == "Tensor":
                            out[f"test_suites.{suite['method_name']}[{k}].{part}[{i}]"] = \
                                z[v["npz"]].view(DTYPES[v["scalar_type"]]).reshape(v["sizes"])
    return out


def test_cli_export_writes_the_programs_weights_and_the_test_tensors(tmp_path: Any) -> None:
    out = str(tmp_path / "w.npz")
    assert run_cli("export", PATH, out).returncode == 0
    start, size = ORACLE["program_offset"], ORACLE["program_size"]
    alone = tmp_path / "alone.pte"
    alone.write_bytes(BYTES[start:start + size])
    out_alone = str(tmp_path / "alone.npz")
    assert run_cli("export", str(alone), out_alone).returncode == 0
    a, b = np.load(out), np.load(out_alone)
    tests = _oracle_tensors()
    assert sorted(a.keys()) == sorted([*b.keys(), *tests]) and len(b.keys()) > 1
    for k in b.keys():   # the metadata lists the test tensors too
        assert k == "__metadata__" or np.array_equal(a[k], b[k])
    for k, want in tests.items():
        assert a[k].dtype == want.dtype and a[k].tobytes() == want.tobytes(), k


def test_tree_shows_each_test_cases_dtypes_and_shapes() -> None:
    lines = run_cli("tree", PATH).stdout.splitlines()
    for suite in ORACLE["test_suites"]:
        at = next(i for i, line in enumerate(lines)
                  if line.strip().startswith(f"test_suites.{suite['method_name']}:"))
        for k, case in enumerate(suite["test_cases"]):
            parts = [", ".join(
                f"{np.dtype(DTYPES[v['scalar_type']])}{v['sizes']}" if v["kind"] == "Tensor"
                else f"{SCALARS[v['kind']].__name__} {v['value']}" for v in case[part])
                for part in ("inputs", "expected_outputs")]
            assert lines[at + 1 + k].strip() == f"test_cases[{k}]: {parts[0]} -> {parts[1]}"


def test_reprs_of_test_cases_and_suites_are_one_line() -> None:
    with pfm.load_bundled(PATH) as b:
        suites = b.test_suites
        texts = [repr(suites), *map(repr, suites.values()),
                 *(repr(c) for cases in suites.values() for c in cases)]
        assert all("\n" not in t and len(t) < 200 for t in texts), texts
        want = ORACLE["test_suites"][0]["test_cases"][0]["inputs"][0]
        assert f"float32{want['sizes']}" in repr(suites["forward"][0])


def test_extract_writes_the_embedded_program(tmp_path: Any) -> None:
    """``extract x.bpte program`` writes the .pte exir bundled, byte for byte (its SHA-256
    as exir gives it), and ``program_bytes`` is the same bytes, a view of the mapping."""
    out = tmp_path / "model.pte"
    assert run_cli("extract", PATH, "program", "-o", str(out)).returncode == 0
    assert hashlib.sha256(out.read_bytes()).hexdigest() == ORACLE["program_sha256"]
    with pfm.load(PATH) as b:
        view = b.program_bytes
        assert view.readonly and bytes(view) == out.read_bytes()
    as_json = json.loads(run_cli("extract", "--json", PATH, "program").stdout)
    validate(as_json, "extract")
    (doc,) = as_json["files"]
    assert (doc["kind"], doc["size"]) == ("program", ORACLE["program_size"])
    missing = run_cli("extract", PATH, "nothing")
    assert missing.returncode == 1 and "'program'" in missing.stderr


# ------------------------------------------------------------ size

def _regions() -> List[Any]:
    with pfm.load(PATH) as b:
        return b.regions()


def test_regions_tile_the_file() -> None:
    """One flatbuffer, the whole file; below it, every byte once; padding is zeros,
    fewer than 32 bytes at a time (the program vector is aligned to 32)."""
    regions = _regions()
    assert_tiles(regions, len(BYTES), ("flatbuffer",))
    for r in walk(regions):
        if r.kind == "padding":
            assert all(not any(BYTES[s:e]) for s, e in r.spans), r
    assert all(e - s < 32 for c in regions[0].children if c.kind == "padding"
               for s, e in c.spans)


def test_program_region_is_where_exir_put_the_program() -> None:
    """The ``program`` region is the bytes exir bundled, and below it are the regions of
    those bytes opened on their own, at their place in this file."""
    [flatbuffer] = _regions()
    [program] = [c for c in flatbuffer.children if c.kind == "program"]
    start, size = ORACLE["program_offset"], ORACLE["program_size"]
    assert program.spans == ((start, start + size),)
    assert hashlib.sha256(BYTES[program.start:program.end]).hexdigest() == \
        ORACLE["program_sha256"]
    with pfm.load(BYTES[start:start + size]) as alone:
        assert isinstance(alone, pfm.Program)
        want = alone.regions()
    assert [(r.kind, r.label, r.size) for r in walk(program.children)] == \
        [(r.kind, r.label, r.size) for r in walk(want)]
    assert [r.spans for r in walk(program.children)] == \
        [tuple((s + start, e + start) for s, e in r.spans) for r in walk(want)]


def test_each_test_tensor_is_in_its_cases_region() -> None:
    """Every test tensor's data, found by walking the file's flatbuffer here, lies in the
    ``inputs`` or ``expected_outputs`` region of its suite's case."""
    [flatbuffer] = _regions()
    suites = {r.label: r for r in flatbuffer.children if r.kind == "test_suite"}
    assert list(suites) == sorted(suites, key=lambda n: suites[n].start)
    assert sorted(suites) == sorted(s["method_name"] for s in ORACLE["test_suites"])
    seen = 0
    for i, suite in enumerate(ORACLE["test_suites"]):
        cases = {c.label: c for c in suites[suite["method_name"]].children
                 if c.kind == "test_case"}
        assert sorted(cases, key=int) == [str(j) for j in range(len(suite["test_cases"]))]
        for j, case in enumerate(suite["test_cases"]):
            parts = {r.kind: r for r in cases[str(j)].children}
            for side, field_id in (("inputs", 0), ("expected_outputs", 1)):
                for k, desc in enumerate(case[side]):
                    if desc["kind"] != "Tensor":
                        continue
                    table = element(BYTES, element(BYTES, element(BYTES, ROOT, 1, i), 1, j),
                                    field_id, k)
                    data = deref(BYTES, field(BYTES, deref(BYTES, field(BYTES, table, 1)), 2))
                    lo, hi = data + 4, data + 4 + u32(BYTES, data)
                    assert any(s <= lo and hi <= e for s, e in parts[side].spans), (i, j, k)
                    seen += 1
    assert seen == sum(d["kind"] == "Tensor" for s in ORACLE["test_suites"]
                       for c in s["test_cases"] for side in ("inputs", "expected_outputs")
                       for d in c[side]) > 0


def test_cli_size() -> None:
    doc = reads_in_both("size", PATH)
    validate(doc, "size")
    [f] = doc["files"]
    assert (f["file"], f["format"], f["size"]) == (PATH, "bpte", len(BYTES))
    assert sum(f["sections"].values()) == len(BYTES)
    start, size = ORACLE["program_offset"], ORACLE["program_size"]
    with pfm.load(BYTES[start:start + size]) as alone:
        methods = {r.label: r.size for r in walk(alone.regions()) if r.kind == "method"}
    assert {m["name"]: m["flatbuffer"] for m in f["methods"]} == methods
    text = run_cli("size", PATH)
    assert text.returncode == 0, text.stderr
    for word in ("bpte", "inputs", "expected_outputs", "forward", "scale"):
        assert word in text.stdout
