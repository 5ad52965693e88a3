"""The C core's structure comes from the schema files in csrc/schemas.

The checked-in headers are exactly what csrc/schemas/fbsgen.py makes of the schemas; the
field ids and union numbers compiled into the core read torch's own files right (read
here with FlatBuffers' Python Table API, compared with what torch reported about each
file); the generator refuses malformed schemas; and constants and error codes the Python
side uses come from the core.
"""
from __future__ import annotations

import base64
import glob
import hashlib
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
from typing import Any, Dict, List, Optional, Tuple

import flatbuffers
import pytest
from flatbuffers import number_types as N
from flatbuffers.table import Table

import pyflatmodule
from pyflatmodule.core.dtypes import DTYPE_NAMES, itemsize, numpy_dtype, same_dtype
from pyflatmodule.core.fbread import schema_of
from pyflatmodule.core.native import ffi, lib, status_codes
from pyflatmodule.ptmf.index import UNION_NAMES

from support.paths import CSRC, DATA

SCHEMAS = sorted(glob.glob(os.path.join(CSRC, "schemas", "*.fbs")))
TORCH_FILES = sorted(f for f in os.listdir(DATA) if f.endswith(".ff")
                     and os.path.exists(os.path.join(DATA, f[:-3] + ".oracle.json")))

_spec = importlib.util.spec_from_file_location(
    "fbsgen", os.path.join(CSRC, "schemas", "fbsgen.py"))
assert _spec is not None and _spec.loader is not None
fbsgen: Any = importlib.util.module_from_spec(_spec)
sys.modules["fbsgen"] = fbsgen   # dataclasses look their module up there
_spec.loader.exec_module(fbsgen)


def _schema(stem: str = "mobile_bytecode") -> Any:
    path = os.path.join(CSRC, "schemas", stem + ".fbs")
    with open(path, encoding="utf-8") as f:
        return fbsgen.parse(f.read(), path)


def test_the_schemas_are_there() -> None:
    assert {"mobile_bytecode.fbs", "executorch_program.fbs", "executorch_flat_tensor.fbs",
            "xnnpack.fbs"} \
        <= {os.path.basename(p) for p in SCHEMAS}


@pytest.mark.parametrize("path", SCHEMAS, ids=os.path.basename)
def test_checked_in_header_is_what_the_schema_gives(path: str) -> None:
    """Both generated files: the header and the source defining its descriptors."""
    stem = os.path.splitext(os.path.basename(path))[0]
    with open(path, encoding="utf-8") as f:
        schema = fbsgen.parse(f.read(), path)
    for ext, expected in ((".h", fbsgen.generate(schema, stem)),
                          (".c", fbsgen.generate_source(schema, stem))):
        with open(os.path.join(CSRC, "gen", stem + ext), encoding="utf-8") as f:
            assert f.read() == expected, f"regenerate: python csrc/schemas/fbsgen.py {path}"


def test_gen_holds_only_what_the_schemas_give() -> None:
    stems = {os.path.splitext(os.path.basename(p))[0] for p in SCHEMAS}
    assert sorted(os.listdir(os.path.join(CSRC, "gen"))) == \
        sorted(stem + ext for stem in stems for ext in (".c", ".h"))


@pytest.mark.parametrize("path", SCHEMAS, ids=os.path.basename)
def test_compiled_ids_are_the_schemas(path: str) -> None:
    """What the core was built with (exposed through the cdef) is the schema's."""
    stem = os.path.splitext(os.path.basename(path))[0]
    s = _schema(stem)
    P = fbsgen.prefix(stem)
    for name, d in s.decls.items():
        prefix = P + "_" + fbsgen.snake(name).upper()
        if d.kind == "table":
            fields = [n for n, _, _ in fbsgen._ordered_fields(s, d)]
            assert getattr(lib, prefix + "_FIELD_COUNT") == len(fields)
            for i, field in enumerate(fields):
                assert getattr(lib, f"{prefix}_{field.upper()}") == i
        elif d.kind == "union":
            assert getattr(lib, prefix + "_COUNT") == len(d.values) + 1
            for member, value in d.values:
                assert getattr(lib, f"{prefix}_{fbsgen.snake(member).upper()}") == value
        elif d.kind == "struct":
            size, align, _ = fbsgen.struct_layout(s, d)
            assert (getattr(lib, prefix + "_SIZE"), getattr(lib, prefix + "_ALIGN")) == \
                (size, align)
    assert getattr(lib, P + "_FILE_IDENTIFIER") == \
        int.from_bytes(s.file_identifier.encode(), "little")


def test_generated_headers_declare_no_name_twice() -> None:
    """Headers included together (the core includes them all) share no C name."""
    owner: Dict[str, str] = {}
    for path in SCHEMAS:
        stem = os.path.splitext(os.path.basename(path))[0]
        with open(os.path.join(CSRC, "gen", stem + ".h"), encoding="utf-8") as f:
            text = f.read()
        names = set(re.findall(r"^\s+([A-Z][A-Z0-9_]*) = ", text, re.M))
        names |= set(re.findall(r"^(?:extern const \w+|enum) (\w+)", text, re.M))
        names |= set(re.findall(r"^#define (\w+)", text, re.M))
        for n in names:
            assert owner.setdefault(n, stem) == stem, f"{n} in {owner[n]} and {stem}"


@pytest.mark.skipif(shutil.which("cc") is None, reason="no C compiler")
def test_generated_headers_compile_together(tmp_path: Any) -> None:
    src = tmp_path / "all.c"
    src.write_text("".join(f'#include "gen/{os.path.basename(p)[:-4]}{ext}"\n'
                           for ext in (".h", ".c") for p in SCHEMAS)
                   + "int main(void) { return 0; }\n")
    p = subprocess.run(["cc", "-fsyntax-only", "-std=c99", "-Wall", "-Wextra", "-Wconversion",
                        "-pedantic", "-Werror", "-I", CSRC, str(src)],
                       capture_output=True, text=True)
    assert p.returncode == 0, p.stderr


#: The generic layer's files: they stand on one another alone.
GENERIC = tuple(f"fb/{name}" for name in ("fb_common.h", "fb_schema.h", "fb_tensor.h", "fb.h",
                                           "fb.c", "fb_verify.c"))


def test_the_generic_layer_includes_no_format() -> None:
    """fb.h and its files name no format: no format's header (ptmf.h, et.h, xnn.h, a
    generated schema) is included, so every format stands on the same layer."""
    for name in GENERIC:
        with open(os.path.join(CSRC, name), encoding="utf-8") as f:
            local = set(re.findall(r'^#include "([^"]+)"', f.read(), re.M))
        assert local <= set(GENERIC), f"{name} includes {sorted(local - set(GENERIC))}"


@pytest.mark.skipif(shutil.which("cc") is None, reason="no C compiler")
def test_the_generic_layer_compiles_alone(tmp_path: Any) -> None:
    src = tmp_path / "fb_alone.c"
    src.write_text('#include "fb/fb.h"\nint main(void) { return FB_OK; }\n')
    p = subprocess.run(["cc", "-fsyntax-only", "-std=c99", "-Wall", "-Wextra", "-Wconversion",
                        "-Wno-sign-conversion", "-Wno-unused-function", "-Werror", "-I", CSRC,
                        str(src)], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr


# ----------------------------------------------- torch's files, read by the schema

_FLAGS = {"bool": N.BoolFlags, "byte": N.Int8Flags, "ubyte": N.Uint8Flags,
          "short": N.Int16Flags, "ushort": N.Uint16Flags, "int": N.Int32Flags,
          "uint": N.Uint32Flags, "long": N.Int64Flags, "ulong": N.Uint64Flags,
          "float": N.Float32Flags, "double": N.Float64Flags}


class _Reader:
    """Fields of one table of a file, found by the compiled field ids (prefix `P` of the
    schema's header) and read with FlatBuffers' own Python Table API, typed by the schema."""

    def __init__(self, schema: Any, buf: bytearray, table: str, pos: int,
                 P: str = "MOBILE") -> None:
        self.schema, self.buf, self.table, self.P = schema, buf, table, P
        self.tab = Table(buf, pos)
        self.decl = schema.decls[table]
        self.fields = {n: f for n, f, is_type in fbsgen._ordered_fields(schema, self.decl)
                       if not is_type}

    def _offset(self, name: str) -> int:
        vt_id = getattr(lib, f"{self.P}_{fbsgen.snake(self.table).upper()}_{name.upper()}")
        return int(self.tab.Offset(4 + 2 * vt_id))

    def scalar(self, name: str) -> Any:
        f = self.fields[name]
        kind = fbsgen.scalar_of(self.schema, f.type)
        assert not f.vector and kind in _FLAGS
        o = self._offset(name)
        if not o:   # absent: the schema's default
            ref = self.schema.decls.get(f.type)
            return dict(ref.values)[f.default] if ref and f.default in dict(ref.values) \
                else int(f.default or "0", 0)
        return self.tab.Get(_FLAGS[kind], o + self.tab.Pos)

    def scalars(self, name: str) -> List[Any]:
        f = self.fields[name]
        kind = fbsgen.scalar_of(self.schema, f.type)
        assert f.vector and kind in _FLAGS
        o = self._offset(name)
        if not o:
            return []
        start, flags = self.tab.Vector(o), _FLAGS[kind]
        return [self.tab.Get(flags, start + i * flags.bytewidth)
                for i in range(self.tab.VectorLen(o))]

    def table_(self, name: str) -> Optional["_Reader"]:
        f = self.fields[name]
        assert not f.vector and self.schema.decls[f.type].kind == "table"
        o = self._offset(name)
        return _Reader(self.schema, self.buf, f.type, self.tab.Indirect(o + self.tab.Pos),
                       self.P) if o else None

    def string(self, name: str) -> Optional[bytes]:
        assert self.fields[name].type == "string" and not self.fields[name].vector
        o = self._offset(name)
        return bytes(self.tab.String(o + self.tab.Pos)) if o else None

    def tables(self, name: str) -> List["_Reader"]:
        f = self.fields[name]
        assert f.vector and self.schema.decls[f.type].kind == "table"
        o = self._offset(name)
        if not o:
            return []
        start = self.tab.Vector(o)
        return [_Reader(self.schema, self.buf, f.type, self.tab.Indirect(start + 4 * i),
                        self.P) for i in range(self.tab.VectorLen(o))]

    def union(self, name: str) -> Tuple[int, Optional["_Reader"]]:
        f = self.fields[name]
        union = self.schema.decls[f.type]
        o_type = self._offset(name + "_type")
        kind = self.tab.Get(N.Uint8Flags, o_type + self.tab.Pos) if o_type else 0
        members = {v: union.member_types[n] for n, v in union.values}   # tables of aliases
        o = self._offset(name)
        if kind not in members or not o or self.schema.decls[members[kind]].kind != "table":
            return kind, None
        t = Table(self.buf, 0)
        self.tab.Union(t, o)
        return kind, _Reader(self.schema, self.buf, members[kind], t.Pos, self.P)

    def member(self, name: str) -> str:
        """The member name of union field `name` ("NONE" when absent)."""
        kind, _ = self.union(name)
        members: Dict[int, str] = {v: n for n, v in
                                   self.schema.decls[self.fields[name].type].values}
        return members.get(kind, "NONE")


def _root(path: str, stem: str = "mobile_bytecode", size: Optional[int] = None) -> _Reader:
    """The root table of the file at `path` (its first `size` bytes), read by schema `stem`."""
    with open(path, "rb") as f:
        buf = bytearray(f.read())
    if size is not None:
        buf = buf[:size]
    s = _schema(stem)
    assert bytes(buf[4:8]) == s.file_identifier.encode()
    root = flatbuffers.encode.Get(N.UOffsetTFlags.packer_type, buf, 0)
    return _Reader(s, buf, s.root_type, root, fbsgen.prefix(stem))


@pytest.mark.parametrize("name", TORCH_FILES)
def test_generated_ids_read_what_torch_reports(name: str) -> None:
    with open(os.path.join(DATA, name[:-3] + ".oracle.json"), encoding="utf-8") as f:
        oracle = json.load(f)
    m = _root(os.path.join(DATA, name))
    info = oracle["info"]
    assert m.scalar("bytecode_version") == info["bytecode_version"]
    assert m.scalar("operator_version") == info["operator_version"]
    ivalues = m.tables("ivalues")
    mobile = m.scalar("mobile_ivalue_size")
    if mobile == 0 or mobile > len(ivalues):
        mobile = len(ivalues)
    names, ops = [], {}
    for iv in ivalues[:mobile]:
        kind, fn = iv.union("val")
        if kind != lib.MOBILE_I_VALUE_UNION_FUNCTION:
            continue
        assert fn is not None and fn.table == "Function"
        qn = fn.string("qn")
        assert qn is not None
        names.append(qn.decode())
        for op in fn.tables("operators"):
            overload = op.string("overload_name") or b""
            full = (op.string("name") or b"").decode() + ("." + overload.decode()
                                                          if overload else "")
            ops[full] = op.scalar("num_args_serialized")
    assert sorted(names) == sorted(info["function_names"])
    assert ops == info["opname_to_num_args"]
    extra = {(e.string("name") or b"").decode(): base64.b64encode(e.string("content") or b"")
             .decode("ascii") for e in m.tables("extra_files")}
    if "extra_files" in oracle["mobile"]:   # absent where torch's loader failed
        assert extra == oracle["mobile"]["extra_files"]   # base64, as torch_oracle.py stores it
    state = m.scalar("state_obj")
    assert ivalues[state].union("val")[0] == lib.MOBILE_I_VALUE_UNION_OBJECT


# ------------------------------------- ExecuTorch's files, read by the project's schemas

ET_DATA = os.path.join(DATA, "et")
ET_FILES = sorted(f[:-4] for f in os.listdir(ET_DATA) if f.endswith(".pte")) \
    if os.path.isdir(ET_DATA) else []


def _et_oracle(stem: str) -> Tuple[Dict[str, Any], Dict[str, Any]]:
    import numpy as np
    with open(os.path.join(ET_DATA, stem + ".oracle.json"), encoding="utf-8") as f:
        oracle = json.load(f)
    with np.load(os.path.join(ET_DATA, stem + ".oracle.npz")) as z:
        return oracle, {k: z[k].tobytes() for k in z.files}


def _le(buf: bytes, at: int, width: int) -> int:
    return int.from_bytes(buf[at:at + width], "little")


def _tensor_of(t: _Reader) -> Dict[str, Any]:
    alloc, info = t.table_("allocation_info"), t.table_("extra_tensor_info")
    return {"scalar_type": t.scalar("scalar_type"), "sizes": t.scalars("sizes"),
            "dim_order": t.scalars("dim_order"), "data_buffer_idx": t.scalar("data_buffer_idx"),
            "storage_offset": t.scalar("storage_offset"),
            "shape_dynamism": t.scalar("shape_dynamism"),
            "allocation": None if alloc is None else [
                alloc.scalar(n) for n in ("memory_id", "memory_offset_low",
                                          "memory_offset_high")],
            "fqn": None if info is None else (info.string("fully_qualified_name") or b"")
            .decode(),
            "location": None if info is None else info.scalar("location")}


def _plan_of(plan: _Reader) -> Dict[str, Any]:
    values = []
    for v in plan.tables("values"):
        kind, val = v.union("val")
        entry: Dict[str, Any] = {"kind": v.member("val")}
        assert val is not None and val.table == entry["kind"]
        if kind == lib.ET_KERNEL_TYPES_TENSOR:
            entry.update(_tensor_of(val))
        elif entry["kind"] in ("Int", "Bool", "Double"):
            entry["value"] = val.scalar(entry["kind"].lower() + "_val")
        elif entry["kind"] in ("IntList", "TensorList", "BoolList", "OptionalTensorList"):
            entry["items"] = val.scalars("items")
        values.append(entry)
    delegates = []
    for d in plan.tables("delegates"):
        ref = d.table_("processed")
        assert ref is not None
        delegates.append({"id": (d.string("id") or b"").decode(),
                          "location": ref.scalar("location"), "index": ref.scalar("index"),
                          "compile_specs": [[(c.string("key") or b"").decode(),
                                             bytes(c.scalars("value") or b"").hex()]
                                            for c in d.tables("compile_specs")]})
    return {
        "name": (plan.string("name") or b"").decode(),
        "inputs": plan.scalars("inputs"), "outputs": plan.scalars("outputs"),
        "values": values,
        "operators": [[(op.string(n) or b"").decode() for n in ("name", "overload")]
                      for op in plan.tables("operators")],
        "chains": [{"inputs": c.scalars("inputs"), "outputs": c.scalars("outputs"),
                    "instructions": [i.member("instr_args") for i in c.tables("instructions")]}
                   for c in plan.tables("chains")],
        "delegates": delegates,
        "non_const_buffer_sizes": plan.scalars("non_const_buffer_sizes")}


@pytest.mark.parametrize("stem", ET_FILES)
def test_executorch_program_reads_as_executorch_reports(stem: str) -> None:
    """Every field the schema names reads, by its id, what ExecuTorch's own reader found;
    the `eh00` header places the segments, and the bytes they hold are ExecuTorch's."""
    oracle, arrays = _et_oracle(stem)
    path = os.path.join(ET_DATA, stem + ".pte")
    with open(path, "rb") as f:
        data = f.read()
    # eh00 at byte 8: magic, u32 length, u64 program size, u64 segment base, u64 data size;
    # a program with no segments has none
    header: Optional[Dict[str, int]] = None
    if data[8:12] == b"eh00":
        header = {"length": _le(data, 12, 4), "program_size": _le(data, 16, 8),
                  "segment_base_offset": _le(data, 24, 8),
                  "segment_data_size": _le(data, 32, 8)}
    assert header == oracle["header"]
    program_size, base, size = len(data), len(data), 0
    if header is not None:
        program_size = header["program_size"]
        base, size = header["segment_base_offset"], header["segment_data_size"]
    assert program_size <= base and base + size == len(data)
    p = _root(path, "executorch_program", program_size)
    want = oracle["program"]
    got = {
        "version": p.scalar("version"),
        "execution_plan": [_plan_of(e) for e in p.tables("execution_plan")],
        "constant_buffer_count": len(p.tables("constant_buffer")),
        "backend_delegate_data_count": len(p.tables("backend_delegate_data")),
        "segments": [[s.scalar("offset"), s.scalar("size")] for s in p.tables("segments")],
        "constant_segment": None,
        "mutable_data_segments": [{"segment_index": m.scalar("segment_index"),
                                   "offsets": m.scalars("offsets")}
                                  for m in p.tables("mutable_data_segments")],
        "named_data": [[(n.string("key") or b"").decode(), n.scalar("segment_index")]
                       for n in p.tables("named_data")]}
    cs = p.table_("constant_segment")
    if cs is not None:
        got["constant_segment"] = {"segment_index": cs.scalar("segment_index"),
                                   "offsets": cs.scalars("offsets")}
    # ExecuTorch's Double holds infinities as text; each instruction's fields and the
    # stack traces are tests/et/test_executorch.py's
    for plan in want["execution_plan"]:
        for v in plan["values"]:
            if v["kind"] == "Double" and isinstance(v["value"], str):
                v["value"] = float(v["value"])
        for chain in plan["chains"]:
            chain.pop("args", None)
            chain.pop("stacktrace", None)
    assert got == want
    segments = [data[base + o:base + o + n] for o, n in got["segments"]]
    assert all(o + n <= size for o, n in got["segments"])
    # the constant segment cuts into buffers at its offsets: ExecuTorch's buffers (it
    # reads segments only when the extended header says where they are)
    restored = oracle["restored"]
    if header is not None and cs is not None and got["constant_segment"]["offsets"]:
        seg = segments[got["constant_segment"]["segment_index"]]
        offsets = got["constant_segment"]["offsets"] + [len(seg)]
        assert [seg[a:b] for a, b in zip(offsets, offsets[1:])] == \
            [arrays[k] for k in restored["constant_buffer"]]
    ids = {d["id"] for e in got["execution_plan"] for d in e["delegates"]}
    hashed = bool(ids & {"XnnpackBackend", "VulkanBackend"})
    for key, segment_index in got["named_data"]:
        assert segments[segment_index] == arrays[restored["named_data"][key]]
        if hashed:   # XNNPACK and Vulkan key the data they store by its SHA-256
            # (XNNPACK puts "scale_" before it for per-channel scales)
            assert hashlib.sha256(segments[segment_index]).hexdigest() == \
                (key[len("scale_"):] if key.startswith("scale_") else key)
        elif "NativeBackend" in ids:   # the native backend by the weight's name, or the
            # lifted constant's (a number of the code)
            assert key in oracle["weights"] or key.startswith("_lifted_tensor_constant")
    # no other file here has named data (native_external's is in its data file)
    assert bool(got["named_data"]) == (hashed or ("NativeBackend" in ids
                                                  and "data_file" not in oracle))
    # every constant tensor's bytes are one of the module's own weights, of its shape, or
    # a number of the graph's code (0-d: the 1.0 of `y - 1.0`); a memory-planned tensor's
    # data_buffer_idx picks its initial values among the mutable data instead
    weights = {(tuple(w["shape"]), arrays[w["data"]]) for w in oracle["weights"].values()}
    buffers = [arrays[k] for k in restored["constant_buffer"]]
    mutable = [arrays[k] for k in restored["mutable_data"]]
    for plan in got["execution_plan"]:
        for v in plan["values"]:
            if v["kind"] == "Tensor" and v["data_buffer_idx"] and \
                    v["location"] != lib.ET_TENSOR_DATA_LOCATION_EXTERNAL:
                nbytes = _WIDTH[v["scalar_type"]] * _count(v["sizes"])
                planned = v["allocation"] is not None
                data = (mutable if planned else buffers)[v["data_buffer_idx"]][:nbytes]
                assert (tuple(v["sizes"]), data) in weights or \
                    (not planned and v["sizes"] == [] and len(data) == 4)
    runtime = oracle["runtime"]
    if stem == "inline_constants":   # a runtime built without the inline constant buffer
        assert runtime["error"].endswith("error: 0x:23")
        return
    assert "error" not in runtime, runtime
    plans = {e["name"]: e for e in got["execution_plan"]}
    assert runtime["method_names"] == sorted(plans)
    for name, meta in runtime["methods"].items():
        for which in ("inputs", "outputs"):
            tensors = [plans[name]["values"][i] for i in plans[name][which]]
            assert [[t["scalar_type"], t["sizes"]] for t in tensors] == \
                [[m["dtype"], m["sizes"]] for m in meta[which]]


#: bytes an element of the constants these files hold: float32 weights, int64 buffers (a
#: batch norm's num_batches_tracked)
_WIDTH = {lib.ET_SCALAR_TYPE_FLOAT: 4, lib.ET_SCALAR_TYPE_LONG: 8}


def _count(sizes: List[int]) -> int:
    n = 1
    for d in sizes:
        n *= d
    return n


@pytest.mark.parametrize("stem", [s for s in ET_FILES
                                  if os.path.exists(os.path.join(ET_DATA, s + ".ptd"))])
def test_executorch_data_file_reads_as_executorch_reports(stem: str) -> None:
    oracle, arrays = _et_oracle(stem)
    want = oracle["data_file"]
    path = os.path.join(ET_DATA, stem + ".ptd")
    with open(path, "rb") as f:
        data = f.read()
    # FH01 at byte 8: magic, u32 length, u64 flatbuffer offset and size, segment base, size
    assert data[8:12] == b"FH01"
    header = {"length": _le(data, 12, 4), "flatbuffer_offset": _le(data, 16, 8),
              "flatbuffer_size": _le(data, 24, 8), "segment_base_offset": _le(data, 32, 8),
              "segment_data_size": _le(data, 40, 8)}
    assert header == want["header"]
    # the flatbuffer spans [0, offset + size): its tables start after the padded header
    base, end = header["segment_base_offset"], header["flatbuffer_offset"] + \
        header["flatbuffer_size"]
    assert 48 <= header["flatbuffer_offset"] and end <= base
    assert base + header["segment_data_size"] == len(data)
    ft = _root(path, "executorch_flat_tensor", end)
    assert ft.scalar("version") == want["version"]
    segments = [[s.scalar("offset"), s.scalar("size")] for s in ft.tables("segments")]
    assert segments == want["segments"]
    named: List[Dict[str, Any]] = []
    for entry in ft.tables("named_data"):
        layout = entry.table_("tensor_layout")
        assert layout is not None
        named.append({"key": (entry.string("key") or b"").decode(),
                      "segment_index": entry.scalar("segment_index"),
                      "scalar_type": layout.scalar("scalar_type"),
                      "sizes": layout.scalars("sizes"), "dim_order": layout.scalars("dim_order")})
    assert named == want["named_data"]
    # keyed by the weights' names, holding the module's own bytes
    assert {n["key"] for n in named} == set(oracle["weights"])
    for n in named:
        w = oracle["weights"][n["key"]]
        o, size = segments[n["segment_index"]]
        assert n["sizes"] == w["shape"] and n["scalar_type"] == lib.FT_SCALAR_TYPE_FLOAT
        assert data[base + o:base + o + size][:4 * _count(w["shape"])] == arrays[w["data"]]
    # the program names these tensors EXTERNAL by the same keys, with the same layouts;
    # a native backend delegate's payload names them instead (tests/backends/test_native.py)
    delegated = any(d["id"] == "NativeBackend" for plan in oracle["program"]["execution_plan"]
                    for d in plan["delegates"])
    program = _root(os.path.join(ET_DATA, stem + ".pte"), "executorch_program")
    external = {t["fqn"]: [t["scalar_type"], t["sizes"], t["dim_order"]]
                for plan in program.tables("execution_plan") for t in
                (v for v in _plan_of(plan)["values"] if v["kind"] == "Tensor")
                if t["location"] == lib.ET_TENSOR_DATA_LOCATION_EXTERNAL}
    assert external == ({} if delegated else {
        n["key"]: [n["scalar_type"], n["sizes"], n["dim_order"]] for n in named})


def test_both_executorch_schemas_number_scalar_types_alike() -> None:
    """Each schema declares ScalarType itself (the parser takes no `include`)."""
    a, b = (_schema(stem).decls["ScalarType"]
            for stem in ("executorch_program", "executorch_flat_tensor"))
    assert (a.kind, a.base, a.values) == (b.kind, b.base, b.values)


def _executorch_dir() -> Optional[str]:
    spec = importlib.util.find_spec("executorch")   # finds the package without importing it
    if spec is None or not spec.submodule_search_locations:
        return None
    return list(spec.submodule_search_locations)[0]


def _wire(s: Any) -> Dict[str, Any]:
    """What decides the bytes: per table its fields in order (name, stored type, vector,
    default, alignment), per enum and union its members and numbers; plus root and id."""
    out: Dict[str, Any] = {"": (s.root_type, s.file_identifier)}
    for name, d in s.decls.items():
        if d.kind in ("table", "struct"):
            out[name] = (d.kind, [(f.name, fbsgen.scalar_of(s, f.type) or f.type, f.vector,
                                   f.default, f.attrs.get("force_align")) for f in d.fields])
        else:
            out[name] = (d.kind, d.base, d.values, d.member_types)
    return out


@pytest.mark.parametrize("stem,theirs", [
    ("executorch_program", "exir/_serialize/program.fbs"),
    ("executorch_flat_tensor", "extension/flat_tensor/serialize/flat_tensor.fbs"),
    ("xnnpack", "backends/xnnpack/serialization/schema.fbs"),
    ("executorch_etdump", "devtools/etdump/etdump_schema_flatcc.fbs")])
def test_executorch_schemas_are_wire_identical_to_executorchs(stem: str, theirs: str) -> None:
    """Where ExecuTorch is installed, its own schema files (their `include` of
    scalar_type.fbs spliced in) declare the same wire format as the project's."""
    root = _executorch_dir()
    if root is None:
        pytest.skip("executorch is not installed")
    with open(os.path.join(root, "exir", "_serialize", "scalar_type.fbs"), encoding="utf-8") as f:
        scalar_type = re.sub(r"namespace [\w.]+;", "", f.read())
    with open(os.path.join(root, theirs), encoding="utf-8") as f:
        text = f.read().replace('include "scalar_type.fbs";', scalar_type)
    text = text.replace("executorch_flatbuffer.ScalarType", "ScalarType")
    assert _wire(_schema(stem)) == _wire(fbsgen.parse(text, theirs))


def _json_of(r: _Reader) -> Dict[str, Any]:
    """A table as flatc writes it in JSON with defaults (enums and union types by name,
    deprecated fields left out, absent offsets left out), read through the compiled ids."""
    out: Dict[str, Any] = {}
    for name, f, is_type in fbsgen._ordered_fields(r.schema, r.decl):
        ref = r.schema.decls.get(f.type)
        if is_type or "deprecated" in f.attrs:
            continue
        if ref is not None and ref.kind == "union":
            member = r.member(name)
            _, sub = r.union(name)
            if sub is not None:
                out[name + "_type"], out[name] = member, _json_of(sub)
        elif fbsgen.scalar_of(r.schema, f.type) is None or f.vector:
            if not r._offset(name):
                continue
            if f.type == "string":
                out[name] = (r.string(name) or b"").decode()
            elif f.vector:
                out[name] = ([_json_of(t) for t in r.tables(name)] if ref is not None
                             and ref.kind == "table" else r.scalars(name))
            else:
                sub_table = r.table_(name)
                assert sub_table is not None
                out[name] = _json_of(sub_table)
        else:
            value = r.scalar(name)
            out[name] = {v: n for n, v in ref.values}[value] if ref is not None else value
    return out


def _close(a: Any, b: Any) -> bool:
    """Equal, floats to the 6 decimal places flatc prints."""
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_close(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_close(x, y) for x, y in zip(a, b))
    if isinstance(a, float) or isinstance(b, float):
        return bool(a == b or abs(a - b) <= 5e-7)
    return bool(a == b)


@pytest.mark.parametrize("stem", [s for s in ET_FILES if s.startswith("xnn_")])
def test_xnnpack_payloads_read_as_executorch_reports(stem: str) -> None:
    """Every XNNPACK payload's flatbuffer, read field by field through the ids compiled
    from csrc/schemas/xnnpack.fbs with FlatBuffers' Python Table API, is what ExecuTorch's
    flatc decodes with ExecuTorch's own schema.fbs; the XH00 header is what its header
    reader says."""
    oracle, _ = _et_oracle(stem)
    path = os.path.join(ET_DATA, stem + ".pte")
    with open(path, "rb") as f:
        data = f.read()
    base = _le(data, 24, 8)   # eh00: the segment base
    p = _root(path, "executorch_program", _le(data, 16, 8))
    segments = [(s.scalar("offset"), s.scalar("size")) for s in p.tables("segments")]
    wants = oracle["xnnpack"]["delegates"]
    delegates = [d for e in p.tables("execution_plan") for d in e.tables("delegates")]
    assert len(delegates) == len(wants) > 0
    for d, want in zip(delegates, wants):
        ref = d.table_("processed")
        assert ref is not None and ref.scalar("location") == lib.ET_DATA_LOCATION_SEGMENT
        offset, size = segments[ref.scalar("index")]
        payload = bytearray(data[base + offset:base + offset + size])
        # XH00 at byte 4: u16 length, u32 flatbuffer offset and size, u32 constant data
        # offset, u64 constant data size
        assert payload[4:8] == b"XH00" and _le(payload, 8, 2) == 30
        header = {"flatbuffer_offset": _le(payload, 10, 4), "flatbuffer_size": _le(payload, 14, 4),
                  "constant_data_offset": _le(payload, 18, 4),
                  "constant_data_size": _le(payload, 22, 8)}
        assert header == want["header"] and size == want["payload_size"]
        fb = payload[header["flatbuffer_offset"]:][:header["flatbuffer_size"]]
        s = _schema("xnnpack")
        assert bytes(fb[4:8]) == s.file_identifier.encode()
        root = _Reader(s, fb, s.root_type, flatbuffers.encode.Get(N.UOffsetTFlags.packer_type,
                                                                   fb, 0), "XN")
        got = _json_of(root)
        assert _close(got, want["graph"]), (got, want["graph"])


def test_union_names_are_the_schemas() -> None:
    union = _schema().decls["IValueUnion"]
    assert UNION_NAMES == ("NONE",) + tuple(n for n, _ in union.values)


def test_scalar_type_count_is_the_cores() -> None:
    assert len(DTYPE_NAMES) == lib.FB_SCALAR_TYPE_COUNT


def test_dtypes_told_without_numpy_are_numpys() -> None:
    """``itemsize`` and ``same_dtype`` answer without importing numpy what the dtypes
    numpy (and ml_dtypes) make say: each one's bytes, and which scalar types share one."""
    for a in range(len(DTYPE_NAMES)):
        assert itemsize(a) == numpy_dtype(a).itemsize, DTYPE_NAMES[a]
        for b in range(len(DTYPE_NAMES)):
            assert same_dtype(a, b) == (numpy_dtype(a) == numpy_dtype(b)), (a, b)


def test_every_error_code_is_in_the_status_table() -> None:
    """The Python side raises FormatError through the status blocks: any code typed
    out by hand must still be one of their names."""
    names = {ffi.string(lib.fb_status_name(i)).decode().split("_E_")[-1].lower()
             for i in status_codes()}
    package = os.path.dirname(os.path.abspath(pyflatmodule.__file__))
    typed = set()
    for path in glob.glob(os.path.join(package, "**", "*.py"), recursive=True):
        with open(path, encoding="utf-8") as f:
            typed |= set(re.findall(r'FormatError\(\s*"(\w+)"', f.read()))
    assert typed <= names


# ------------------------------------------------------------ the parser is strict

GOOD = """
namespace a.b;
table T { x:int; }
root_type T;
"""

BAD: Dict[str, Tuple[str, str]] = {
    "unknown type": ("table T { x:Nope; } root_type T;", "unknown type 'Nope'"),
    "field twice": ("table T { x:int; x:uint; } root_type T;", "declares x twice"),
    "declared twice": ("table T { x:int; } table T { y:int; } root_type T;",
                       "'T' declared twice"),
    "no root_type": ("table T { x:int; }", "no root_type"),
    "root is a struct": ("struct S { x:int; } root_type S;", "is not a table"),
    "vector default": ("table T { x:[int] = 1; } root_type T;", "only scalars and enums"),
    "default out of range": ("table T { x:ubyte = 300; } root_type T;", "does not fit ubyte"),
    "struct holds a string": ("struct S { s:string; } table T { s:S; } root_type T;",
                              "must be a scalar, enum or struct"),
    "enum not increasing": ("enum E:byte { A = 2, B = 1 } table T { e:E; } root_type T;",
                            "values must increase"),
    "enum too large": ("enum E:ubyte { A = 256 } table T { e:E; } root_type T;",
                       "does not fit ubyte"),
    "union of a scalar": ("union U { int } table T { u:U; } root_type T;",
                          "is not a table or struct"),
    "alias of a scalar": ("union U { A: int } table T { u:U; } root_type T;",
                          "member 'A' is not a table or struct"),
    "alias of nothing": ("union U { A: Nope } table T { u:U; } root_type T;",
                         "member 'A' is not a table or struct"),
    "alias named twice": ("table B { x:int; } union U { A: B, A: B } table T { u:U; } "
                          "root_type T;", "names A twice"),
    "partial ids": ("table T { x:int (id: 0); y:int; } root_type T;",
                    "either every field has an id or none"),
    "ids with a gap": ("table T { x:int (id: 0); y:int (id: 2); } root_type T;",
                       "field ids must be 0..n-1"),
    "unknown attribute": ("table T { x:int (nested_flatbuffer: \"T\"); } root_type T;",
                          "unsupported attribute 'nested_flatbuffer'"),
    "unsupported statement": ("include \"x.fbs\"; table T { x:int; } root_type T;",
                              "unsupported statement 'include'"),
    "missing semicolon": ("table T { x:int } root_type T;", "expected ;"),
    "unterminated": ("table T { x:int;", "unexpected end of file"),
    "stray character": ("table T { x:int; } $ root_type T;", "unexpected character '$'"),
    "identifier length": ("table T { x:int; } root_type T; file_identifier \"AB\";",
                          "file_identifier must be 4 bytes"),
    "self-containing struct": ("struct S { s:S; } table T { s:S; } root_type T;",
                               "contains itself"),
    "ulong default too large": ("table T { x:ulong = 18446744073709551615; } root_type T;",
                                "above 2^63-1"),
    "union id without its type slot": ("union U { A } table A { x:int; } "
                                       "table T { u:U (id: 0); } root_type T;",
                                       "field ids must be 0..n-1"),
    "generated names clash": ("table A { b_c:int; } table A_B { c:int; } root_type A;",
                              "generate the C name"),
    "value_ref undeclared": ("table T { x:uint (value_ref); } root_type T;",
                             "attribute 'value_ref' on T.x is not declared"),
    "value_ref on a string": ("attribute \"value_ref\"; table T { x:string (value_ref); } "
                              "root_type T;", "needs an integer or integers"),
    "required scalar": ("table T { x:int (required); } root_type T;",
                        "a scalar cannot be"),
}


def test_required_and_value_ref_reach_the_descriptor() -> None:
    """`required` and the declared `value_ref` become the descriptor's flags."""
    s = fbsgen.parse("attribute \"value_ref\"; table S { y:int; } "
                     "table T { s:S (required); ids:[uint] (value_ref); i:uint (value_ref); "
                     "n:uint; } root_type T;", "flags.fbs")
    source = fbsgen.generate_source(s, "flags")   # the descriptors' one definition
    assert '{"s", ".s", 0, FB_TABLE, FB_OFFSET, 4, 4, 0, 0, 0, FB_REQUIRED, 0, 0.0,' in source
    assert '{"ids", ".ids", 1, FB_VEC_SCALAR, FB_U32, 4, 4, 4, 4, 0, FB_VALUE_REF, 0,' in source
    assert '{"i", ".i", 2, FB_SCALAR, FB_U32, 4, 4, 0, 0, 0, FB_VALUE_REF, 0,' in source
    assert '{"n", ".n", 3, FB_SCALAR, FB_U32, 4, 4, 0, 0, 0, 0, 0,' in source


_REPO = os.environ.get("EXECUTORCH_REPO")


@pytest.mark.skipif(not _REPO, reason="needs a clone of ExecuTorch (EXECUTORCH_REPO)")
def test_the_0_6_data_file_schema_is_wire_identical_to_0_6_0s() -> None:
    """executorch_flat_tensor_0_6.fbs declares the wire format of ExecuTorch 0.6.0's own
    flat_tensor.fbs (and its scalar_type.fbs), as tagged in ExecuTorch's history."""
    def show(path: str) -> str:
        return subprocess.run(["git", "-C", str(_REPO), "show", f"v0.6.0:{path}"],
                              check=True, capture_output=True, text=True).stdout
    folder = "extension/flat_tensor/serialize/"
    scalar_type = re.sub(r"namespace [\w.]+;", "", show(folder + "scalar_type.fbs"))
    text = show(folder + "flat_tensor.fbs").replace('include "scalar_type.fbs";', scalar_type)
    text = text.replace("executorch_flatbuffer.ScalarType", "ScalarType")
    assert _wire(_schema("executorch_flat_tensor_0_6")) == \
        _wire(fbsgen.parse(text, "flat_tensor.fbs"))


def test_an_identifier_two_layouts_share_finds_the_current_one() -> None:
    """FT01 is both data file layouts' identifier: the lookup by identifier gives the
    current one; the C reader says when a file is in the other (et_schema)."""
    assert schema_of(lib.FT_FILE_IDENTIFIER).name == "executorch_flat_tensor"
    assert lib.FT06_FILE_IDENTIFIER == lib.FT_FILE_IDENTIFIER


def test_good_schema_parses() -> None:
    s = fbsgen.parse(GOOD, "good.fbs")
    assert s.namespace == "a.b" and s.root_type == "T"
    assert "MOBILE_T_X = 0" not in fbsgen.generate(s, "good")   # prefix from the stem
    assert "GOOD_T_X = 0" in fbsgen.generate(s, "good")


def test_prefixes_keep_the_executorch_schemas_apart() -> None:
    assert [fbsgen.prefix(stem) for stem in ("mobile_bytecode", "executorch_program",
                                             "executorch_flat_tensor",
                                             "executorch_flat_tensor_0_6", "executorch_etdump",
                                             "xnnpack", "a_b")] == \
        ["MOBILE", "ET", "FT", "FT06", "ED", "XN", "A"]


def test_a_table_without_fields_gets_ids_but_no_descriptor_array() -> None:
    s = fbsgen.parse("table E {} union U { E } table T { u:U; } root_type T;", "empty.fbs")
    header, source = fbsgen.generate(s, "empty"), fbsgen.generate_source(s, "empty")
    assert "EMPTY_E_FIELD_COUNT = 0" in header and "EMPTY_U_E = 1," in header
    assert "empty_e[" not in header + source
    assert "extern const fb_field empty_t[" in header and "\nconst fb_field empty_t[" in source


def test_union_aliases_name_members_of_one_table() -> None:
    s = fbsgen.parse("table A { x:int; } table B { y:int; } union U { P: A, B, Q: A } "
                     "table T { u:U; } root_type T;", "alias.fbs")
    assert s.decls["U"].values == [("P", 1), ("B", 2), ("Q", 3)]
    assert s.decls["U"].member_types == {"P": "A", "B": "B", "Q": "A"}
    header, source = fbsgen.generate(s, "alias"), fbsgen.generate_source(s, "alias")
    assert "ALIAS_U_P = 1," in header and "ALIAS_U_Q = 3," in header
    assert '{"P", FB_TABLE, 4, 4, ALIAS_DECL_A},' in source
    assert '{"Q", FB_TABLE, 4, 4, ALIAS_DECL_A},' in source


def test_short_enums_and_underscore_names() -> None:
    s = fbsgen.parse("enum E : short { a_b = 0, c = 300 } table _T2x1 { e:E = c; } "
                     "root_type _T2x1;", "us.fbs")
    header, source = fbsgen.generate(s, "us"), fbsgen.generate_source(s, "us")
    assert "US_E_A_B = 0," in header and "US_E_C = 300" in header
    assert '{"e", ".e", 0, FB_SCALAR, FB_I16, 2, 2, 0, 0, 0, 0, 300, 0.0, US_DECL_E}' in source
    assert "extern const fb_field us__t2x1[" in header and "\nconst fb_field us__t2x1[" in source
    assert '{"a_b", 0},' in source and '{"c", 300},' in source


def test_explicit_ids_order_fields_and_a_union_takes_two() -> None:
    s = fbsgen.parse("union U { A } table A { x:int; } "
                     "table T { y:int (id: 2); u:U (id: 1); } root_type T;", "ids.fbs")
    header = fbsgen.generate(s, "ids")
    assert "IDS_T_U_TYPE = 0," in header and "IDS_T_U = 1," in header
    assert "IDS_T_Y = 2," in header and "IDS_U_A = 1," in header


@pytest.mark.parametrize("case", sorted(BAD))
def test_malformed_schema_is_refused_with_a_clear_error(case: str) -> None:
    text, message = BAD[case]
    with pytest.raises(fbsgen.SchemaError, match=r"^bad\.fbs:\d+: .*" + re.escape(message)):
        s = fbsgen.parse(text, "bad.fbs")
        fbsgen.generate(s, "bad")


def test_error_names_the_line() -> None:
    text = "table T {\n  x:int;\n  y:Nope;\n}\nroot_type T;\n"
    with pytest.raises(fbsgen.SchemaError, match=r"^bad\.fbs:3: "):
        fbsgen.parse(text, "bad.fbs")
