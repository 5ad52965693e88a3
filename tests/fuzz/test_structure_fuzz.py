"""Structure-aware mutation (hypothesis): files built with tests/support/ptmf_craft.py, and the
real ExecuTorch files (programs, data files, bundled programs, ETDumps, and the flatbuffer
delegate payloads inside programs) walked by their schemas (at the end), broken where a
parser is most likely to trust them.

Each example is the small valid module of ``ptmf_craft.valid_module()`` plus random
valid ivalues, then (except in the "valid" test) damaged by one or more of:
boundary values (0, 1, len-4, 2^31-1, 2^31, 2^32-1 ...) in offsets, indices, lengths and
vtable entries; vtables pointing into other tables; tables overlapping other tables;
union types 17..255 and type/payload mismatches; self and cyclic references; huge
declared vector lengths; strings without NUL; tensors whose extent overflows int64;
negative sizes, strides and offsets; scalar_type and qscheme out of range.
Every example is loaded and fully decoded with verify=True and verify=False: only a
well-formed FormatError (code, offset inside the data, field path) may escape; the
undamaged modules must decode fully in both modes. No torch here.
"""
from __future__ import annotations

import hashlib
import json
import os
import struct
import subprocess
import sys
import tempfile
import textwrap
from typing import Any, Dict

import numpy as np
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

import pyflatmodule as pfm

import support.ptmf_craft as c
from support.decode_all import outcome, wide_module
from support.paths import ET, FUZZ, TESTS
from support.ptmf_craft import (
    Bool,
    BoolList,
    Complex,
    Device,
    Dict_,
    Double,
    DoubleList,
    Enum,
    Func,
    Int,
    IntList,
    List,  # the list ivalue (so typing's List is not imported: annotations use `list`)
    NoneV,
    Obj,
    Raw,
    Str,
    Tensor,
    Tuple,
    build,
    valid_module,
)

N0 = len(valid_module()["ivalues"])
FN = 7
U32_BOUNDS = [0, 1, 2, 3, 4, 7, 8, 0x7FFF, 0xFFFF, 0x10000, 2**31 - 1, 2**31, 2**31 + 1,
              2**32 - 4, 2**32 - 1]
I32_BOUNDS = [-2**31, -2**31 + 1, -2**30, -2, -1, 0, 1, 2, 3, 2**16, 2**29, 2**30,
              2**30 + 1, 2**31 - 2, 2**31 - 1]
I8_ALL = st.integers(-128, 127)
# Bytes per element of the non-quantized scalar types (packed and quantized excluded).
ITEMSIZE = {0: 1, 1: 1, 2: 2, 3: 4, 4: 8, 5: 2, 6: 4, 7: 8, 8: 4, 9: 8, 10: 16, 11: 1,
            15: 2, 18: 1, 19: 1, 20: 1, 21: 1, 22: 2, 23: 1, 24: 1, 25: 1, 26: 1, 27: 2,
            28: 4, 29: 8, **{k: 1 for k in range(30, 46)}}
STORAGE_BYTES = len(c.STORAGE0.tobytes())     # 24
SETTINGS = dict(deadline=None, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

_FAILURES = os.path.join(tempfile.gettempdir(), "pyflatmodule_structure_fuzz")


def check(data: bytes, expect_ok: bool = False) -> None:
    """Both verify modes: ok or a well-formed FormatError (only ok if expect_ok)."""
    for verify in (True, False):
        kind, detail = outcome(data, verify)
        event(f"verify={verify}: {kind} {detail if kind == 'format_error' else ''}")
        allowed = ("ok",) if expect_ok else ("ok", "format_error")
        if kind not in allowed:
            os.makedirs(_FAILURES, exist_ok=True)
            path = os.path.join(_FAILURES, f"{kind}-{abs(hash(data)):x}.ff")
            with open(path, "wb") as f:
                f.write(data)
            raise AssertionError(f"verify={verify}: {kind} {detail}\n(input saved as {path})")


# ----------------------------------------------------------- valid ivalues

def _contiguous(sizes: list[int]) -> list[int]:
    return [int(np.prod(sizes[k + 1:])) for k in range(len(sizes))]


@st.composite
def valid_tensor(draw: Any) -> Dict[str, Any]:
    stype = draw(st.sampled_from(sorted(ITEMSIZE)))
    size = ITEMSIZE[stype]
    ndim = draw(st.integers(0, 3))
    sizes = [draw(st.integers(0, 3)) for _ in range(ndim)]
    style = draw(st.sampled_from(["contiguous", "reversed", "zero"]))
    strides = _contiguous(sizes)
    if style == "reversed":
        strides = list(reversed(_contiguous(list(reversed(sizes)))))
    elif style == "zero":
        strides = [0] * ndim
    offset = draw(st.integers(0, 3))
    last = offset + sum((n - 1) * s for n, s in zip(sizes, strides))
    if 0 in sizes:
        pass
    elif (last + 1) * size > STORAGE_BYTES:
        sizes, strides, offset = [1] * ndim, [1] * ndim, 0
        if size > STORAGE_BYTES:
            stype = 0
    return Tensor(sizes, strides, scalar_type=stype, storage_offset=offset,
                  requires_grad=draw(st.booleans()))


@st.composite
def valid_value(draw: Any, n: int) -> Dict[str, Any]:
    """A valid ivalue that may reference ivalues[0:n] (n >= N0)."""
    ref = st.integers(0, n - 1)
    kind = draw(st.sampled_from(["Int", "Bool", "Double", "Complex", "Str", "Device",
                                 "IntList", "DoubleList", "BoolList", "List", "Tuple",
                                 "Dict", "Enum", "Tensor", "QTensor", "Obj"]))
    if kind == "Int":
        return Int(draw(st.integers(-2**63, 2**63 - 1)))
    if kind == "Bool":
        return Bool(draw(st.booleans()))
    if kind == "Double":
        return Double(draw(st.floats(allow_nan=True)))
    if kind == "Complex":
        return Complex(complex(draw(st.floats()), draw(st.floats())))
    if kind == "Str":
        return Str(draw(st.text(max_size=20)))
    if kind == "Device":
        return Device(draw(st.sampled_from(["cpu", "cuda:0", "cuda", "meta", "x:y:z", ""])))
    if kind == "IntList":
        return IntList(draw(st.lists(st.integers(-2**63, 2**63 - 1), max_size=6)))
    if kind == "DoubleList":
        return DoubleList(draw(st.lists(st.floats(), max_size=6)))
    if kind == "BoolList":
        return BoolList(draw(st.lists(st.booleans(), max_size=6)))
    if kind == "List":
        return List(draw(st.lists(ref, max_size=6)), draw(st.sampled_from(
            ["List[Any]", "List[int]", "List[List[int]]", "List[Tensor]"])))
    if kind == "Tuple":
        return Tuple(draw(st.lists(ref, max_size=6)))
    if kind == "Dict":
        # keys of every kind verify accepts: None, int, str, float, Tensor, bool
        keys = draw(st.lists(st.sampled_from([0, 1, 2, 3, 5, 6]), max_size=4))
        return Dict_(keys, draw(st.lists(ref, min_size=len(keys), max_size=len(keys))))
    if kind == "Enum":
        return Enum("__torch__.Color", draw(ref))
    if kind == "Tensor":
        return draw(valid_tensor())
    if kind == "QTensor":
        stype = draw(st.sampled_from([12, 13, 14]))
        count = STORAGE_BYTES // (4 if stype == 14 else 1)
        return Tensor([draw(st.integers(0, count))], scalar_type=stype,
                      quantized_schema={"qscheme": 0, "scale": draw(st.floats(0.01, 10)),
                                        "zero_point": draw(st.integers(-128, 127))})
    return Obj(0, draw(st.lists(ref, max_size=5)))


@st.composite
def valid_desc(draw: Any) -> Dict[str, Any]:
    m = valid_module()
    for _ in range(draw(st.integers(0, 8))):
        m["ivalues"].append(draw(valid_value(len(m["ivalues"]))))
    m["mobile_ivalue_size"] = len(m["ivalues"])
    return m


@settings(max_examples=150, **SETTINGS)
@given(valid_desc())
def test_valid_modules_decode_fully(desc: Dict[str, Any]) -> None:
    check(build(desc), expect_ok=True)


# ------------------------------------------------- description-level damage

def _boundary_index(draw: Any, n: int) -> int:
    return draw(st.sampled_from([n - 1, n, n + 1] + U32_BOUNDS))


@st.composite
def damaged_desc(draw: Any) -> Dict[str, Any]:
    """A valid description with 1-3 kinds of damage applied to it."""
    m = draw(valid_desc())
    ivs = m["ivalues"]
    for _ in range(draw(st.integers(1, 3))):
        n = len(ivs)
        what = draw(st.sampled_from(
            ["ref", "self", "cycle", "union_type", "mismatch", "vector_length", "no_nul",
             "tensor", "quantized", "object", "module", "function", "object_type"]))
        if what == "ref":
            # an index field of a container set to a boundary value
            kind = draw(st.sampled_from(["List", "Tuple", "Dict_k", "Dict_v", "Obj",
                                         "Enum", "Obj_state"]))
            b = _boundary_index(draw, n)
            ivs.append({"List": List([1, b]), "Tuple": Tuple([b]),
                        "Dict_k": Dict_([b], [1]), "Dict_v": Dict_([2], [b]),
                        "Obj": Obj(0, [1, b]), "Enum": Enum("__torch__.E", b),
                        "Obj_state": Obj(0, [], state=b)}[kind])
        elif what == "self":
            ivs.append(draw(st.sampled_from([List([n]), Tuple([1, n]), Dict_([n], [1]),
                                             Dict_([2], [n]), Obj(0, [n]),
                                             Enum("__torch__.E", n)])))
        elif what == "cycle":
            ivs += [List([n + 1]), Tuple([n])]
        elif what == "union_type":
            k = draw(st.integers(0, n - 1))
            ivs[k] = dict(ivs[k], type=draw(st.integers(17, 255)))
        elif what == "mismatch":
            k = draw(st.integers(0, n - 1))
            ivs[k] = dict(ivs[k], type=draw(st.integers(0, 16)))
        elif what == "vector_length":
            count = draw(st.sampled_from([1, 2, 3, 7, 64, 2**16, 2**28, 2**29, 2**30,
                                          2**31 - 1, 2**31, 2**32 - 1]))
            payload = Raw(b"\x01\0\0\0" * draw(st.integers(0, 3)), count,
                          align=draw(st.sampled_from([4, 8])))
            ivs.append(draw(st.sampled_from([
                List(payload), Tuple(payload), IntList(payload), DoubleList(payload),
                BoolList(payload), Str(payload), Device(payload), Obj(0, payload),
                Dict_(payload, payload), Dict_([1], payload),
                Tensor(payload, payload), Tensor([2], payload),
                Enum(payload, 1)])))
        elif what == "no_nul":
            text = draw(st.binary(min_size=1, max_size=8))
            ivs.append(Str(Raw(text, len(text) - draw(st.integers(0, 1)))))
        elif what == "tensor":
            ndim = draw(st.integers(0, 9))
            sizes = [draw(st.sampled_from(I32_BOUNDS)) for _ in range(ndim)]
            strides = [draw(st.sampled_from(I32_BOUNDS)) for _ in range(
                ndim if draw(st.booleans()) else draw(st.integers(0, 9)))]
            ivs.append(Tensor(sizes, strides, scalar_type=draw(st.one_of(
                I8_ALL, st.sampled_from(sorted(ITEMSIZE)))),
                storage=draw(st.sampled_from([0, 0, 1, 2**31, 2**32 - 1])),
                storage_offset=draw(st.sampled_from(I32_BOUNDS))))
        elif what == "quantized":
            n_scales = draw(st.integers(0, 4))
            schema = {"qscheme": draw(st.one_of(I8_ALL, st.sampled_from([0, 1, 4]))),
                      "scale": draw(st.floats()), "zero_point": draw(st.sampled_from(
                          I32_BOUNDS)), "axis": draw(st.sampled_from([-1, 0, 1, 2, 2**31 - 1]))}
            if draw(st.booleans()):
                schema["scales"] = Tensor([n_scales], scalar_type=draw(st.sampled_from(
                    [7, 6, 13, 16])))
            if draw(st.booleans()):
                schema["zero_points"] = Tensor([draw(st.integers(0, 4))], scalar_type=draw(
                    st.sampled_from([4, 7, 12])))
            ivs.append(Tensor(draw(st.lists(st.integers(0, 3), min_size=1, max_size=2)),
                              scalar_type=draw(st.sampled_from([12, 13, 14, 16, 17, 6])),
                              quantized_schema=schema))
        elif what == "object":
            ivs.append(Obj(draw(st.sampled_from([0, 1, 2**31, 2**32 - 1])),
                           draw(st.lists(st.integers(0, n - 1), max_size=8)),
                           state=draw(st.sampled_from([None, 0, 2, n - 1, n])),
                           setstate_func=draw(st.sampled_from([None, 0, FN, 1, n]))))
        elif what == "module":
            field = draw(st.sampled_from(["state_obj", "methods", "jit_constants",
                                          "mobile_ivalue_size", "storage_data_size",
                                          "bytecode_version", "storage_data"]))
            b = _boundary_index(draw, n)
            m[field] = {"methods": [FN, b], "jit_constants": [b],
                        "storage_data": [Raw(b"", draw(st.sampled_from(U32_BOUNDS)))],
                        "storage_data_size": draw(st.sampled_from(I32_BOUNDS))}.get(field, b)
        elif what == "function":
            f = ivs[FN]
            field = draw(st.sampled_from(["class_type", "constants", "default", "instructions",
                                          "operators", "register_size", "debug", "schema",
                                          "type_annotations"]))
            b = _boundary_index(draw, n)
            if field == "class_type":
                f["class_type"] = b
            elif field == "constants":
                f["constants"] = [1, b]
            elif field == "default":
                # (an earlier "schema" step may have left one argument)
                f["schema"]["arguments"][-1]["default_value"] = b
            elif field == "instructions":
                f["instructions"] = draw(st.lists(st.tuples(
                    I8_ALL, st.integers(0, 2**16 - 1), st.sampled_from(I32_BOUNDS)),
                    max_size=8))
            elif field == "operators":
                f["operators"] = [{"name": draw(st.text(max_size=5)),
                                   "overload_name": draw(st.text(max_size=5)),
                                   "num_args_serialized": draw(st.sampled_from(I32_BOUNDS))}]
            elif field == "register_size":
                f["register_size"] = draw(st.sampled_from(I32_BOUNDS))
            elif field == "debug":
                f["debug_info"] = {"debug_handle": draw(st.lists(
                    st.integers(-2**63, 2**63 - 1), max_size=6))}
            elif field == "schema":
                f["schema"] = {"arguments": [{"name": "a", "type": draw(st.text(max_size=8)),
                                              "default_value": b}], "returns": []}
            else:
                f["type_annotations"] = draw(st.lists(st.sampled_from(
                    ["", "[", "List[", "Dict[int]", "Tuple[" * 300, "__torch__.X[NamedTuple",
                     "Optional[List[Tensor]]", "]" * 5]), max_size=3))
        else:  # object_type
            m["object_types"] = [{"type_name": draw(st.text(max_size=10)),
                                  "type": draw(st.integers(0, 255)),
                                  "attr_names": draw(st.lists(st.sampled_from(
                                      ["count", "name", "", "weight", "x"]), max_size=7))}]
    return m


@settings(max_examples=500, **SETTINGS)
@given(damaged_desc())
def test_damaged_descriptions(desc: Dict[str, Any]) -> None:
    check(build(desc))


# ------------------------------------------------------ byte-level damage

class Layout:
    """Where the tables, uoffsets and vector lengths of a valid buffer are, found by
    walking it with ptmf_craft's schema (root, IValues, union payloads, nested tables,
    vectors of tables)."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.tables: list[int] = []
        self.slots: list[int] = [0]          # uoffset positions; the root offset first
        self.counts: list[int] = []          # vector length positions
        self._table(c.u32(data, 0), "Module", 0)

    def _target(self, at: int) -> int:
        self.slots.append(at)
        return c.deref(self.data, at)

    def _vector(self, at: int) -> int:
        vec = self._target(at)
        self.counts.append(vec)
        return c.u32(self.data, vec)

    def _table(self, pos: int, name: str, depth: int) -> None:
        if depth > 6 or pos in self.tables:
            return
        self.tables.append(pos)
        data = self.data
        if name == "IValue":
            typ = c.field_pos(data, pos, 0)
            at = c.field_pos(data, pos, 1)
            if at is None or typ is None:
                return
            kind = c.UNION[data[typ]] if data[typ] < len(c.UNION) else None
            if kind in c.STRUCTS:
                self.slots.append(at)
            elif kind is not None and kind != "NONE":
                self._table(self._target(at), kind, depth + 1)
            return
        for field, (fid, kind) in c.SCHEMA[name].items():
            at = c.field_pos(data, pos, fid)
            if at is None or kind in c._SLOT:
                continue
            if kind.startswith("t:"):
                self._table(self._target(at), kind[2:], depth + 1)
            elif kind.startswith("vt:") or kind == "vs":
                vec = c.deref(data, at)
                count = self._vector(at)
                for i in range(count):
                    elem = self._target(vec + 4 + 4 * i)
                    if kind == "vs":
                        self.counts.append(elem)
                    else:
                        self._table(elem, kind[3:], depth + 1)
            else:       # strings, scalar vectors, instructions, storage bytes
                self._vector(at)


def _vtable(data: bytes, table: int) -> int:
    return table - struct.unpack_from("<i", data, table)[0]


@st.composite
def damaged_bytes(draw: Any) -> bytes:
    data = bytearray(build(draw(valid_desc())))
    size = len(data)
    layout = Layout(bytes(data))
    tables, slots, counts = layout.tables, layout.slots, layout.counts
    for _ in range(draw(st.integers(1, 3))):
        what = draw(st.sampled_from(["uoffset", "uoffset_target", "soffset_other",
                                     "soffset_bound", "vtable_entry", "vtable_size",
                                     "overlap", "vector_count", "u32_anywhere"]))
        if what == "uoffset":
            at = draw(st.sampled_from(slots))
            value = draw(st.sampled_from(U32_BOUNDS + [size - 4, size - 1, size]))
        elif what == "uoffset_target":
            # the target (absolute) at a boundary: 0, 1, len-4, len-1, len, past it
            at = draw(st.sampled_from(slots))
            target = draw(st.sampled_from([0, 1, 4, size - 4, size - 1, size, size + 4]))
            value = (target - at) & 0xFFFFFFFF
        elif what in ("soffset_other", "soffset_bound"):
            at = draw(st.sampled_from(tables))
            if what == "soffset_other":     # vtable = another table, or inside one
                target = draw(st.sampled_from(tables)) + draw(st.sampled_from([0, 2, 4]))
            else:
                target = draw(st.sampled_from([0, 2, size - 4, size - 2, size, at,
                                               at + 2, -4, -2**31]))
            value = (at - target) & 0xFFFFFFFF
        elif what == "vtable_entry":
            table = draw(st.sampled_from(tables))
            vt = _vtable(bytes(data), table)
            vt_size = struct.unpack_from("<H", data, vt)[0] if 0 <= vt <= size - 2 else 4
            at = vt + 2 * draw(st.integers(1, max(1, vt_size // 2 - 1)))
            if not 0 <= at <= size - 2:
                continue
            struct.pack_into("<H", data, at, draw(st.sampled_from(
                [0, 1, 2, 3, 4, 5, 0x7FFF, 0xFFFE, 0xFFFF])))
            continue
        elif what == "vtable_size":
            vt = _vtable(bytes(data), draw(st.sampled_from(tables)))
            if not 0 <= vt <= size - 2:
                continue
            struct.pack_into("<H", data, vt, draw(st.sampled_from(
                [0, 1, 2, 3, 4, 6, 0xFFFE, 0xFFFF])))
            continue
        elif what == "overlap":   # a uoffset to another table, or into its middle
            at = draw(st.sampled_from(slots))
            target = draw(st.sampled_from(tables)) + draw(st.sampled_from([0, 4, 8, 2]))
            value = (target - at) & 0xFFFFFFFF
        elif what == "vector_count":
            at = draw(st.sampled_from(counts))
            value = draw(st.sampled_from(U32_BOUNDS + [c.u32(bytes(data), at) + 1,
                                                       (size - at) // 4, size - at,
                                                       (size - at) // 8 + 1]))
        else:
            at = draw(st.integers(0, max(0, size - 4)))
            value = draw(st.sampled_from(U32_BOUNDS + [size - at, size - 4 - at]))
        if 0 <= at <= size - 4:
            struct.pack_into("<I", data, at, value & 0xFFFFFFFF)
    return bytes(data)


def test_layout_walk_finds_every_part() -> None:
    data = build(valid_module())
    layout = Layout(data)
    # root, 9 IValues, their 5 table payloads, Function schema (+2 Args... ) etc.
    assert len(layout.tables) >= 1 + 9 + 5
    assert all(0 < t < len(data) for t in layout.tables)
    assert len(set(layout.slots)) == len(layout.slots)
    assert all(c.u32(data, v) < len(data) for v in layout.counts)


@settings(max_examples=700, **SETTINGS)
@given(damaged_bytes())
def test_damaged_structure(data: bytes) -> None:
    check(data)


# ------------------------------------------ both kinds of damage, then truncation

@settings(max_examples=150, **SETTINGS)
@given(damaged_desc(), st.data())
def test_damaged_and_truncated(desc: Dict[str, Any], data: Any) -> None:
    buf = build(desc)
    cut = len(buf) - data.draw(st.one_of(st.integers(1, 64), st.integers(1, len(buf))))
    check(buf[:cut])


# ================================================================ resource budgets
#
# Value graphs that are wide (one value referenced a million times), deep, or both,
# and a valid file with 500k ivalues (over torch's own 1M-table limit). Each runs in
# a child process under a 4 GiB address-space limit: the decode must end within time
# and memory proportional to the file, or with a well-formed FormatError naming a
# budget; never a RecursionError, a MemoryError or a hang.

BUDGET_CODES = {"depth_budget", "table_budget", "element_budget"}

_CHILD = textwrap.dedent("""
    import json, sys, time
    sys.path[:0] = {paths!r}
    import pyflatmodule as pfm
    from sweep import limit_address_space
    limit_address_space(4 << 30)
    from support.decode_all import outcome, peak_rss_kib
    data = open({file!r}, "rb").read()
    runs = []
    for verify in (True, False):
        start = time.perf_counter()
        if {light!r}:
            kind, detail = "ok", ""
            try:
                m = pfm.load(data, verify=verify, **{kw!r})
                n = len(m.ivalues)
                steps = [lambda: m.root, m.state_dict, m.info, lambda: m.ivalues[n - 1]]
                steps += [lambda i=i: m.ivalues[i] for i in range(0, n, max(1, n // 1000))]
                for step in steps:
                    try:
                        step()
                    except pfm.FormatError as e:
                        kind, detail = "format_error", e.code
            except pfm.FormatError as e:
                kind, detail = "format_error", e.code
            except Exception as e:
                kind, detail = "exception", repr(e)
        else:
            kind, detail = outcome(data, verify, **{kw!r})
        runs.append([kind, detail[-3000:], time.perf_counter() - start])
    print("RESULT" + json.dumps({{"runs": runs, "maxrss_mib": peak_rss_kib() // 1024}}))
""")


def decode_in_child(data: bytes, tmp_path: Any, timeout: float, light: bool = False,
                    **kw: Any) -> Dict[str, Any]:
    """Load + full decode (or, ``light``, load + root + state_dict + info + the last
    ivalue + a sample of 1000 ivalues, each step allowed its own FormatError) in a
    child, both verify modes: outcomes, seconds, peak RSS (MiB)."""
    path = tmp_path / "crafted.ff"
    path.write_bytes(data)
    paths = [TESTS, FUZZ,
             os.path.dirname(os.path.dirname(os.path.abspath(pfm.__file__)))]
    script = _CHILD.format(paths=paths, file=str(path),
                           light=light, kw=kw)
    try:
        out = subprocess.run([sys.executable, "-c", script], capture_output=True,
                             text=True, timeout=timeout * SLACK)
    except subprocess.TimeoutExpired:
        raise AssertionError(f"decode ran over {timeout} s (input: {path})") from None
    assert out.returncode == 0 and "RESULT" in out.stdout, \
        f"child died ({out.returncode}): {out.stderr[-3000:]} (input: {path})"
    result = json.loads(out.stdout.split("RESULT", 1)[1])
    print(f"{len(data)} bytes: " + ", ".join(f"verify={v}: {k} {d[:60]!r} {s:.2f} s"
                                             for v, (k, d, s) in zip((True, False),
                                                                     result["runs"]))
          + f", peak RSS {result['maxrss_mib']} MiB")
    return result


#: Under AddressSanitizer (CI's sanitizer run preloads it) memory and time grow.
# Hang and blow-up guards, not performance claims: generous, and more so under
# AddressSanitizer or a busy machine.
SLACK = 8 if "asan" in os.environ.get("LD_PRELOAD", "") else 3


def assert_bounded(result: Dict[str, Any], seconds: float, rss_mib: int) -> None:
    seconds, rss_mib = seconds * SLACK, rss_mib * SLACK
    for verify, (kind, detail, took) in zip((True, False), result["runs"]):
        assert kind == "ok" or (kind == "format_error" and detail in BUDGET_CODES), \
            f"verify={verify}: {kind} {detail}"
        assert took < seconds, f"verify={verify}: {took:.1f} s"
    assert result["maxrss_mib"] < rss_mib, result["maxrss_mib"]


def _module(ivalues: list[Dict[str, Any]], attr_names: list[str], **more: Any) -> bytes:
    """ivalues with a root Object (type ``__torch__.M``, attrs = ivalues named) last."""
    return build({"ivalues": ivalues, "state_obj": len(ivalues) - 1,
                  "object_types": [{"type_name": "__torch__.M", "type": 1,
                                    "attr_names": attr_names}], **more})


def test_one_list_referenced_a_million_times(tmp_path) -> None:
    """A 1000-element list shared by a million-element list (10^9 logical items, 4 MB
    file): decoded once and shared."""
    data = _module([NoneV(), Int(7), List(np.full(1000, 1, "<u4")),
                    List(np.full(1_000_000, 2, "<u4")), Obj(0, [3])], ["big"])
    assert_bounded(decode_in_child(data, tmp_path, timeout=120), seconds=40, rss_mib=600)


def test_nested_sharing_of_a_billion_logical_elements(tmp_path) -> None:
    """Three levels of 1000-fold sharing (12 kB file, 10^9 logical leaves), and a
    190-deep tuple DAG where each level holds the one below twice (2^190 leaves)."""
    ivs = [NoneV(), Int(7)]
    for _ in range(3):
        ivs.append(List(np.full(1000, len(ivs) - 1, "<u4")))
    for _ in range(190):
        ivs.append(Tuple([len(ivs) - 1, len(ivs) - 1]))
    ivs.append(Obj(0, [4, len(ivs) - 1]))
    data = _module(ivs, ["wide", "deep"])
    assert_bounded(decode_in_child(data, tmp_path, timeout=60), seconds=10, rss_mib=400)


def _declared(classes: Dict[str, Any]) -> Dict[str, Dict[str, str]]:
    """jit_sources declaring each ``__torch__.NAME`` a module with these (parameters,
    attribute names) (as torch prints a class body): state_dict() then takes the walk
    torch's declarations drive."""
    def body(name: str, params: Any, attrs: Any) -> str:
        listed = "".join(f'"{p}", ' for p in params)
        return (f"class {name}(Module):\n  __parameters__ = [{listed}]\n"
                f"  __buffers__ = []\n" + "".join(f"  {a} : Tensor\n" for a in attrs))
    return {"jit_sources": {"__torch__": "".join(body(n, p, a)
                                                 for n, (p, a) in classes.items())}}


def _object_dag(levels: int, fan: int = 8, declared: bool = False) -> bytes:
    """Objects each holding the one below ``fan`` times, a tensor at the bottom:
    ``fan**levels`` attribute paths over ``levels + 1`` objects (about 1 kB)."""
    ivs = [NoneV(), Tensor([2, 3]), Obj(0, [1])]
    for _ in range(levels):
        ivs.append(Obj(1, [len(ivs) - 1] * fan))
    names = [f"a{i}" for i in range(fan)]
    sources = _declared({"Leaf": (["w"], ["w"]), "Node": ([], names)}) if declared else {}
    return build({"ivalues": ivs, "state_obj": len(ivs) - 1,
                  "storage_data": [c.STORAGE0.tobytes()], "storage_data_size": 1,
                  "object_types": [
                      {"type_name": "__torch__.Leaf", "type": 1, "attr_names": ["w"]},
                      {"type_name": "__torch__.Node", "type": 1, "attr_names": names}],
                  **sources})


@pytest.mark.parametrize("declared", [False, True], ids=["fields", "declared"])
def test_object_graph_shared_many_times_in_state_dict(tmp_path, declared: bool) -> None:
    """A 1 kB file whose objects share each other 8-fold over 10 levels (8^10 paths):
    state_dict() must end in time proportional to the file, or stop early with a
    FormatError that names the budget and carries an offset and a path (found: ~20-60 s
    of walking, then an error without offset or path). Both walks: every attribute's
    (no sources), and the one the classes' declarations drive."""
    data = _object_dag(10, declared=declared)
    result = decode_in_child(data, tmp_path, timeout=120)
    assert_bounded(result, seconds=10, rss_mib=600)
    assert [tuple(r[:2]) for r in result["runs"]] == [("format_error", "element_budget")] * 2


def test_object_graph_shared_within_the_budget_lists_every_path() -> None:
    """The same DAG, 3 levels: 8^3 paths to one tensor, each listed, in slot order."""
    expected = [f"a{x}.a{y}.a{z}.w" for x in range(8) for y in range(8) for z in range(8)]
    for declared in (False, True):
        sd = pfm.load(_object_dag(3, declared=declared)).state_dict()
        assert list(sd) == expected
        assert len({id(v) for v in sd.values()}) == 1


def test_deep_chain_with_a_raised_depth_budget(tmp_path) -> None:
    """max_depth raised above Python's recursion limit: a 5000-deep list chain must
    decode or raise FormatError, not RecursionError (found: RecursionError)."""
    ivs = [NoneV()] + [List([k]) for k in range(5000)]
    data = _module(ivs + [Obj(0, [5000])], ["chain"])
    result = decode_in_child(data, tmp_path, timeout=120, light=True, max_depth=10_000)
    for verify, (kind, detail, took) in zip((True, False), result["runs"]):
        assert "RecursionError" not in detail, f"verify={verify}: {detail}"


def _object_chain(levels: int, declared: bool = False) -> bytes:
    """``levels`` objects each holding a tensor ``w`` and the next as ``child``."""
    ivs = [NoneV(), Tensor([2, 3])]
    for _ in range(levels):
        ivs.append(Obj(0, [1, len(ivs) - 1]))
    ivs[2] = Obj(0, [1])
    sources = _declared({"M": (["w"], ["w", "child"])}) if declared else {}
    return _module(ivs, ["w", "child"], storage_data=[c.STORAGE0.tobytes()],
                   storage_data_size=1, **sources)


@pytest.mark.parametrize("declared", [False, True], ids=["fields", "declared"])
def test_deep_object_chain_with_a_raised_depth_budget(declared: bool) -> None:
    """max_depth raised above Python's recursion limit: state_dict() of a 1500-deep
    object chain (each level holding a tensor and the next) lists every level
    (found: RecursionError)."""
    levels = 1500
    data = _object_chain(levels, declared)
    for verify in (True, False):
        sd = pfm.load(data, verify=verify, max_depth=levels + 10).state_dict()
        assert list(sd) == ["child." * k + "w" for k in range(levels)]


def test_deep_object_chain_within_the_depth_budget(tmp_path) -> None:
    """190 objects each holding the next (and a tensor): state_dict() walks it whole;
    310 levels hit the depth budget."""
    for levels, expect in ((190, "ok"), (310, "depth_budget")):
        result = decode_in_child(_object_chain(levels), tmp_path, timeout=60)
        assert [r[0] if r[0] == "ok" else r[1] for r in result["runs"]] == [expect] * 2
        assert_bounded(result, seconds=10, rss_mib=400)


def test_500k_ivalue_file_loads(tmp_path) -> None:
    """A valid 16 MB file of 500k ivalues and 1M tables (torch's verifier refuses
    over 1M tables): loads, verifies and decodes in time and memory proportional
    to its size."""
    data = wide_module(500_000)
    report = pfm.verify(data)
    assert report.ivalues == 500_002 and report.tables_visited > 1_000_000
    result = decode_in_child(data, tmp_path, timeout=240, light=True)
    assert_bounded(result, seconds=60, rss_mib=1500)


def _dag_constant_module(levels: int) -> bytes:
    """valid_module() whose Function has, as its constant and as the default of its
    argument ``x``, a tuple DAG: each level holds the one below twice (2^levels
    leaves over ``levels`` stored tuples)."""
    m = valid_module()
    ivs = m["ivalues"]
    ivs.append(Tuple([1, 1]))
    for _ in range(levels - 1):
        ivs.append(Tuple([len(ivs) - 1, len(ivs) - 1]))
    f = ivs[FN]
    f["constants"] = [len(ivs) - 1]
    f["schema"]["arguments"][1]["default_value"] = len(ivs) - 1
    f["instructions"] = [(8, 0, 0), (12, 0, 0)]          # LOADC 0, RET
    f["debug_info"] = {"debug_handle": [1, 2]}
    return build(m)


def test_disassembly_of_a_shared_constant_stays_linear(tmp_path) -> None:
    """A 1.7 kB file: disassemble() and str(schema) print the constant / default
    (a 40-level shared tuple DAG) in full: 2^40 leaves (found: exponential time;
    20 levels already take seconds)."""
    data = _dag_constant_module(40)
    assert_bounded(decode_in_child(data, tmp_path, timeout=20), seconds=10, rss_mib=600)


def _setstate_module(instructions: List[Any], state: Dict[str, Any],
                     operators: Any = (), constants: Any = ()) -> bytes:
    """A set-state object (class ``__torch__.S`` with one attribute ``x`` declared in
    jit_sources) whose __setstate__ runs ``instructions`` on ``state``."""
    m = valid_module()
    n = len(m["ivalues"])
    m["object_types"].append({"type_name": "__torch__.S", "type": 3})
    m["jit_sources"]["__torch__"] += "class S:\n  x : Any\n"
    m["ivalues"] += [state, Func("__torch__.S.__setstate__", class_type=1, register_size=3,
                                 instructions=list(instructions), operators=list(operators),
                                 constants=list(constants)),
                     Obj(1, None, state=n, setstate_func=n + 1)]
    return build(m)


def test_setstate_list_unpack_of_an_expanded_tensor(tmp_path) -> None:
    """__setstate__ does LIST_UNPACK (2^31-1 items) on its state, a stride-0 tensor
    of 2^31-1 elements over 4 bytes: unpacking must be bounded (found: MemoryError
    under a 4 GiB limit; tens of GB without one)."""
    n = 2**31 - 1
    data = _setstate_module([(4, 2, 1), (2, 0, 2), (23, 0, n), (12, 0, 0)],
                            Tensor([n], [0]))
    assert_bounded(decode_in_child(data, tmp_path, timeout=60), seconds=10, rss_mib=600)


SETSTATE_OPS = [(0, "OP"), (1, "OPN"), (2, "LOAD"), (3, "MOVE"), (4, "STOREN"), (5, "STORE"),
                (6, "DROP"), (7, "DROPR"), (8, "LOADC"), (9, "JF"), (10, "JMP"), (12, "RET"),
                (21, "GET_ATTR"), (22, "SET_ATTR"), (23, "LIST_UNPACK"),
                (24, "TUPLE_CONSTRUCT"), (26, "LIST_CONSTRUCT"), (31, "TUPLE_INDEX"),
                (34, "UNCHECKED_CAST"), (35, "__IS__"), (37, "__ISNOT__"), (42, "__NOT__")]
SCALAR_OPERATORS = [("aten::add", "int"), ("aten::mul", "int"), ("aten::add", "str"),
                    ("aten::len", "t"), ("aten::__getitem__", "t"), ("aten::neg", "int"),
                    ("aten::eq", "float"), ("aten::sub", "float"), ("aten::mul", "float")]


@st.composite
def setstate_program(draw: Any) -> bytes:
    small = st.integers(-3, 8)
    instructions = draw(st.lists(st.tuples(
        st.one_of(st.sampled_from([op for op, _ in SETSTATE_OPS]), I8_ALL),
        st.one_of(st.integers(0, 4), st.just(65535)),
        st.one_of(small, st.sampled_from([2**31 - 1, -2**31, 2**16]))),
        max_size=24))
    state = draw(st.one_of(
        st.just(Tuple([1, 2, 3, 4])), st.just(List([1, 1, 2])), st.just(Int(3)),
        st.just(Str("ab")), st.just(Tensor([2, 3])), st.just(Tensor([2**20], [0])),
        st.just(Tensor([2**31 - 1], [0])), st.just(IntList([1, 2**62, -1])),
        st.just(Tuple([5, 4, 1]))))
    operators = [{"name": name, "overload_name": ov,
                  "num_args_serialized": draw(st.sampled_from([-1, 0, 1, 2, 3, 2**31 - 1]))}
                 for name, ov in draw(st.lists(st.sampled_from(SCALAR_OPERATORS), max_size=4))]
    constants = draw(st.lists(st.sampled_from([1, 2, 3, 4, 5, 6]), max_size=4))
    return _setstate_module(instructions, state, operators, constants)


@settings(max_examples=150, **SETTINGS)
@given(setstate_program())
def test_setstate_replay_of_random_bytecode(data: bytes) -> None:
    """Random __setstate__ bytecode over various states: the replay (a small
    interpreter over the file's instructions) ends in a value or a FormatError."""
    check(data)


# ================================================================ ExecuTorch files
#
# The real programs, data files, bundled programs and ETDump profiles of tests/data/et/
# (each written by ExecuTorch), walked by the project's own schema
# descriptors (pyflatmodule.core.fbread): every table, offset, vector length, scalar field
# and vector element is found with its type, then damaged with values at the boundaries
# of what it means (indices just past their vector, 64-bit segment offsets and sizes
# past the file or wrapping, union types past their union, dim_order entries out of
# range, scalar types unknown), together with the byte-level damage above and the
# headers' (eh00, FH01) fields. Inside the programs, the delegate payloads that are
# flatbuffers (XNNPACK's and Vulkan's behind their XH00 / VH00 header, TOSA's, the native
# backend's) are walked the same way by their backends' schemas and damaged on their own.

from pyflatmodule.core.fbread import Table, schema_of  # noqa: E402
from pyflatmodule.core.native import lib  # noqa: E402

ET_FILES = sorted(f for f in os.listdir(ET)
                  if f.endswith((".pte", ".ptd", ".bpte", ".etdump")))
U64_BOUNDS = [0, 1, 8, 2**31, 2**32 - 1, 2**32, 2**32 + 8, 2**40, 2**63 - 1, 2**63,
              2**64 - 8, 2**64 - 1]
_FORMATS = {1: "<B", 2: "<H", 4: "<I", 8: "<Q"}


class FbParts:
    """Where everything of one valid flatbuffer inside a file is, by its schema: tables,
    uoffset slots, vector lengths, (position, byte width) of every scalar field and
    (position of element 0, byte width, count) of every scalar vector, all as positions
    in the file; ``span`` [start, end) is the flatbuffer's extent in it and ``header``
    (position, width) the fields of the header before it."""

    def __init__(self, data: bytes, span: tuple[int, int], header: list[tuple[int, int]]) -> None:
        self.data = data
        self.span = span
        self.header = header
        self.tables: list[int] = []
        self.slots: list[int] = []
        self.counts: list[int] = []
        self.scalars: list[Any] = []      # (position, width)
        self.elements: list[Any] = []     # (position of element 0, width, count)
        self.strings: list[tuple[int, int]] = []   # (position of byte 0, length)
        self._seen: set[int] = set()

    def walk(self, t: Table, depth: int = 0) -> None:
        """Collects table ``t`` and everything under it."""
        if depth > 12 or t.pos in self._seen:
            return
        self._seen.add(t.pos)
        self.tables.append(t.pos)
        for name, f in t.fields.items():
            at = t._at(f)
            if not at:
                continue
            width = struct.calcsize(f.fmt)
            if f.kind in (lib.FB_SCALAR, lib.FB_UNION_TYPE):
                self.scalars.append((at, width))
                continue
            self.slots.append(at)
            target = at + struct.unpack_from("<I", self.data, at)[0]
            if f.kind == lib.FB_TABLE:
                sub = t.table(name)
                if sub is not None:
                    self.walk(sub, depth + 1)
            elif f.kind == lib.FB_UNION:
                _, sub = t.union(name)
                if sub is not None:
                    self.walk(sub, depth + 1)
            elif f.kind == lib.FB_STRING:
                self.counts.append(target)
                self.strings.append((target + 4, struct.unpack_from("<I", self.data, target)[0]))
            elif f.kind == lib.FB_VEC_SCALAR:
                self.counts.append(target)
                n = struct.unpack_from("<I", self.data, target)[0]
                if n:
                    self.elements.append((target + 4, width, n))
            elif f.kind == lib.FB_VEC_TABLE:
                self.counts.append(target)
                for k, sub in enumerate(t.tables(name)):
                    self.slots.append(target + 4 + 4 * k)
                    self.walk(sub, depth + 1)
            elif f.kind == lib.FB_VEC_STRING:
                self.counts.append(target)
                for k in range(struct.unpack_from("<I", self.data, target)[0]):
                    at = target + 4 + 4 * k
                    self.slots.append(at)
                    s = at + struct.unpack_from("<I", self.data, at)[0]
                    self.strings.append((s + 4, struct.unpack_from("<I", self.data, s)[0]))


#: The delegate payloads that are flatbuffers: the file identifier of each backend's
#: schema, by the backend's id. XNNPACK's and Vulkan's payloads may start with a
#: header (magic ``XH00`` / ``VH00`` at 4: u16 length, u32 flatbuffer offset and size,
#: u32 constant data offset, u64 its size), TOSA's and the native backend's are all
#: flatbuffer.
PAYLOAD_SCHEMAS = {"XnnpackBackend": lib.XN_FILE_IDENTIFIER,
                   "VulkanBackend": lib.VK_FILE_IDENTIFIER,
                   "TOSABackend": lib.TOSA_FILE_IDENTIFIER,
                   "NativeBackend": lib.NATIVE_FILE_IDENTIFIER}
PAYLOAD_HEADERS = (b"XH00", b"VH00")
_PAYLOAD_HEADER = [(8, 2), (10, 4), (14, 4), (18, 4), (22, 8)]


class PayloadParts(FbParts):
    """A delegate payload's flatbuffer walked by its backend's schema (``backend``: the
    delegate's id; ``start``: where the payload starts in the file)."""

    def __init__(self, data: bytes, backend: str, start: int, size: int) -> None:
        fb, header, size_all = start, [], size
        if data[start + 4:start + 8] in PAYLOAD_HEADERS:
            fb = start + struct.unpack_from("<I", data, start + 10)[0]
            size = struct.unpack_from("<I", data, start + 14)[0]
            header = [(start + at, width) for at, width in _PAYLOAD_HEADER]
        super().__init__(data, (fb, fb + size), header)
        self.backend = backend
        self.start = start
        self.end = start + size_all
        self.identifier = struct.unpack_from("<I", data, fb + 4)[0]
        if self.identifier == PAYLOAD_SCHEMAS[backend]:
            schema = schema_of(self.identifier)
            self.slots.append(fb)
            self.walk(Table(schema, data, fb + struct.unpack_from("<I", data, fb)[0],
                            schema.root))


class EtLayout(FbParts):
    """An ExecuTorch file walked by its schema (:class:`FbParts`), with the fields of
    its eh00 / FH01 header and, for a program, its flatbuffer delegate payloads each
    walked by its backend's schema (``payloads``)."""

    def __init__(self, data: bytes) -> None:
        # header fields: eh00 / FH01 (u32 length at 12, then u64s)
        header = [(12, 4)] + [(16 + 8 * k, 8) for k in range(4)] \
            if data[8:12] in (b"eh00", b"FH01") else []
        super().__init__(data, (0, len(data)), header)
        self.slots.append(0)
        # An ETDump is size-prefixed: its flatbuffer (root offset, identifier) starts at 4.
        base = 4 if data[8:12] == b"ED00" else 0
        ident = struct.unpack_from("<I", data, base + 4)[0]
        schema = schema_of(ident)
        root = Table(schema, data, base + struct.unpack_from("<I", data, base)[0], schema.root)
        self.walk(root)
        self.payloads: list[PayloadParts] = []
        if ident == lib.ET_FILE_IDENTIFIER:
            self.payloads = [PayloadParts(data, backend, start, size)
                             for backend, start, size in self._delegates(root)
                             if backend in PAYLOAD_SCHEMAS]

    def _delegates(self, program: Table) -> list[tuple[str, int, int]]:
        """(backend id, start in the file, size) of every delegate's payload: inline in
        ``backend_delegate_data`` or in a segment (after the eh00 header's segment base
        offset, at 24)."""
        base = struct.unpack_from("<Q", self.data, 24)[0] if self.data[8:12] == b"eh00" else 0
        inline = program.tables("backend_delegate_data")
        segments = program.tables("segments")
        out = []
        for plan in program.tables("execution_plan"):
            for d in plan.tables("delegates"):
                ref = d.table("processed")
                assert ref is not None
                index = ref.scalar("index")
                if ref.scalar("location") == 0:
                    start, size = inline[index].vector_span("data")
                else:
                    seg = segments[index]
                    start, size = base + seg.scalar("offset"), seg.scalar("size")
                out.append((d.string("id") or "", start, size))
        return out


_ET_LAYOUTS: Dict[str, EtLayout] = {}


def _et_layout(name: str) -> EtLayout:
    if name not in _ET_LAYOUTS:
        with open(os.path.join(ET, name), "rb") as f:
            _ET_LAYOUTS[name] = EtLayout(f.read())
    return _ET_LAYOUTS[name]


def _boundaries(width: int, old: int, size: int) -> List[int]:
    """Values at the edges of a field of ``width`` bytes whose value is ``old``."""
    near = [old - 1, old + 1, old + 2, size, size - old, size // 2]
    base = {1: list(range(0, 256, 17)) + [1, 2, 3, 4, 127, 128, 255],
            2: [0, 1, 2, 3, 4, 0x7FFF, 0x8000, 0xFFFF],
            4: U32_BOUNDS, 8: U64_BOUNDS}[width]
    return [v % (1 << (8 * width)) for v in base + near]


def _damage(draw: Any, data: bytearray, parts: FbParts) -> None:
    """Damages 1-3 of the parts of ``data`` that ``parts`` found, in place: boundary
    values (by the flatbuffer's extent in the file) in scalars, vector elements, header
    fields, vector counts and 8-byte words anywhere in it; uoffsets pointing at its
    edges or into its tables; soffsets and vtable entries broken; a string's byte set to
    one UTF-8 or a reader may stumble on, or its bytes made another's of its length (two
    values, operators or delegates of one name, a name that is another's)."""
    size = len(data)
    lo, hi = parts.span
    for _ in range(draw(st.integers(1, 3))):
        what = draw(st.sampled_from(["scalar", "element", "header", "uoffset", "overlap",
                                     "soffset", "vtable_entry", "vector_count",
                                     "string", "u64_anywhere"]))
        if what in ("scalar", "header") and (parts.scalars if what == "scalar"
                                             else parts.header):
            at, width = draw(st.sampled_from(parts.scalars if what == "scalar"
                                             else parts.header))
        elif what == "element" and parts.elements:
            start, width, n = draw(st.sampled_from(parts.elements))
            at = start + width * draw(st.integers(0, n - 1))
        elif what in ("uoffset", "overlap"):
            at, width = draw(st.sampled_from(parts.slots)), 4
            target = (draw(st.sampled_from(parts.tables)) + draw(st.sampled_from([0, 2, 4]))
                      if what == "overlap" else
                      draw(st.sampled_from(sorted({0, 1, 4, size - 4, size - 1, size, size + 4,
                                                   lo, lo + 1, hi - 4, hi - 1, hi, hi + 4}))))
            struct.pack_into("<I", data, at, (target - at) & 0xFFFFFFFF)
            continue
        elif what == "soffset":
            at = draw(st.sampled_from(parts.tables))
            target = draw(st.sampled_from(parts.tables + sorted({0, lo, hi - 2, size - 2, size,
                                                                 at + 2})))
            struct.pack_into("<I", data, at, (at - target) & 0xFFFFFFFF)
            continue
        elif what == "vtable_entry":
            table = draw(st.sampled_from(parts.tables))
            vt = _vtable(bytes(data), table)
            if not 0 <= vt <= size - 4:
                continue
            vt_size = struct.unpack_from("<H", data, vt)[0]
            at = vt + 2 * draw(st.integers(0, max(1, vt_size // 2 - 1)))
            if at <= size - 2:
                struct.pack_into("<H", data, at, draw(st.sampled_from(
                    [0, 1, 2, 3, 4, 5, 8, 0x7FFF, 0xFFFE, 0xFFFF])))
            continue
        elif what == "vector_count" and parts.counts:
            at, width = draw(st.sampled_from(parts.counts)), 4
        elif what == "string" and parts.strings:
            at, n = draw(st.sampled_from(parts.strings))
            twins = [t for t, m in parts.strings if m == n and t != at]
            if twins and draw(st.booleans()):
                src = draw(st.sampled_from(twins))
                data[at:at + n] = data[src:src + n]
            elif n:
                data[at + draw(st.integers(0, n - 1))] = draw(st.sampled_from(
                    [0x00, 0x2E, 0x5B, 0x80, 0xC0, 0xED, 0xFF]))
            continue
        else:
            at, width = draw(st.sampled_from(range(lo, max(lo + 1, hi - 7)))), 8
        if at + width > size:
            continue
        fmt = _FORMATS[width]
        old = struct.unpack_from(fmt, data, at)[0]
        struct.pack_into(fmt, data, at, draw(st.sampled_from(_boundaries(width, old, hi - lo))))


@st.composite
def damaged_et(draw: Any) -> bytes:
    name = draw(st.sampled_from(ET_FILES))
    layout = _et_layout(name)
    data = bytearray(layout.data)
    _damage(draw, data, layout)
    size = len(data)
    if draw(st.integers(0, 9)) == 0:
        data = data[:size - draw(st.sampled_from(range(1, size + 1)))]
    return bytes(data)


#: The programs of tests/data/et/ that hold flatbuffer delegate payloads.
PAYLOAD_FILES = [name for name in ET_FILES if name.endswith(".pte")
                 and any(k.encode() in open(os.path.join(ET, name), "rb").read()
                         for k in PAYLOAD_SCHEMAS)]


@st.composite
def damaged_payload(draw: Any) -> bytes:
    """A program with one of its flatbuffer delegate payloads damaged inside (the
    payload's tables, offsets, scalars, vector counts and header by its backend's
    schema), sometimes cut short within the payload."""
    layout = _et_layout(draw(st.sampled_from(PAYLOAD_FILES)))
    parts = draw(st.sampled_from(layout.payloads))
    data = bytearray(layout.data)
    _damage(draw, data, parts)
    if draw(st.integers(0, 9)) == 0:
        data = data[:draw(st.integers(parts.start, parts.span[1] - 1))]
    return bytes(data)


def test_et_layout_walk_finds_every_part() -> None:
    for name in ET_FILES:
        layout = _et_layout(name)
        assert len(layout.tables) > 5 and layout.scalars and layout.counts, name
        assert len(set(layout.slots)) == len(layout.slots), name
        assert all(0 < t < len(layout.data) for t in layout.tables), name
    assert _et_layout("mlp.pte").header and _et_layout("external.ptd").header


def _delegate_payloads(paths: list[str]) -> list[list[list[str]]]:
    """For each program: [backend id, sha256 of its payload] of every delegate, in order,
    as ExecuTorch's own reader of programs (exir's ``deserialize_pte_binary``) gives them."""
    script = textwrap.dedent("""
        import hashlib, json, sys
        from executorch.exir._serialize._program import deserialize_pte_binary
        out = []
        for path in sys.argv[1:]:
            program = deserialize_pte_binary(open(path, "rb").read()).program
            inline = program.backend_delegate_data
            out.append([[d.id, hashlib.sha256(inline[d.processed.index].data).hexdigest()]
                        for p in program.execution_plan for d in p.delegates])
        print(json.dumps(out))
    """)
    out = subprocess.run([sys.executable, "-c", script, *paths], capture_output=True,
                         text=True, check=True).stdout
    return list(json.loads(out.splitlines()[-1]))


def test_payload_walk_finds_every_payload_part() -> None:
    """Every flatbuffer payload of every program is found where its backend's header (or
    its start) puts its flatbuffer, and walked whole: its identifier is the backend's,
    its tables, offset slots, scalars, vector counts and strings lie inside it, no slot is
    the program's; its header fields (when it has one) lie in front of it."""
    kinds = set()
    for name in PAYLOAD_FILES:
        layout = _et_layout(name)
        assert layout.payloads, name
        for parts in layout.payloads:
            lo, hi = parts.span
            assert parts.identifier == PAYLOAD_SCHEMAS[parts.backend], (name, parts.backend)
            assert parts.start <= lo < hi <= len(layout.data), name
            assert len(parts.tables) > 3 and parts.scalars and parts.counts and parts.strings, \
                name
            assert len(set(parts.slots)) == len(parts.slots), name
            assert not set(parts.slots) & set(layout.slots), name
            for at in parts.tables + parts.slots + parts.counts + [a for a, _ in parts.scalars]:
                assert lo <= at < hi, (name, parts.backend, at)
            assert all(lo < at <= at + n < hi for at, n in parts.strings), name
            assert all(parts.start + 8 <= at < lo for at, _ in parts.header), name
            kinds.add((parts.backend, bool(parts.header)))
    # every backend's payloads, XNNPACK's and Vulkan's behind their header
    assert kinds >= {("XnnpackBackend", True), ("VulkanBackend", True),
                     ("TOSABackend", False), ("NativeBackend", False)}


def test_payload_walk_finds_each_delegate() -> None:
    """The walk finds each payload of a flatbuffer backend where it is (inline or in a
    segment), in the order of the delegates, with the bytes ExecuTorch's own reader of
    the program gives for it."""
    pytest.importorskip("executorch")
    names = ["vulkan.pte", "xnn_attention.pte", "xnnpack_inline.pte", "tosa_partial.pte",
             "native_partial.pte"]
    expected = _delegate_payloads([os.path.join(ET, name) for name in names])
    for name, delegates in zip(names, expected):
        layout = _et_layout(name)
        expect = [d for d in delegates if d[0] in PAYLOAD_SCHEMAS]
        found = [[p.backend, hashlib.sha256(layout.data[p.start:p.end]).hexdigest()]
                 for p in layout.payloads]
        assert expect and found == expect, name


@pytest.mark.parametrize("name", ET_FILES)
def test_et_files_decode_fully(name: str) -> None:
    for verify in (True, False):
        assert outcome(_et_layout(name).data, verify) == ("ok", "")


@settings(max_examples=1000, **SETTINGS)
@given(damaged_et())
def test_damaged_et_files(data: bytes) -> None:
    check(data)


@settings(max_examples=5000, **SETTINGS)
@given(damaged_payload())
def test_damaged_delegate_payloads(data: bytes) -> None:
    """XNNPACK, Vulkan, TOSA and native payloads damaged inside, by their schemas."""
    check(data)
