"""A pure-Python PTMF reader: the baseline for the metadata decode benchmarks.

It reads the buffer the way the FlatBuffers Python runtime does (every table through its
vtable, every scalar, offset and vector with ``struct.unpack_from``) and decodes every
ivalue, in file order, into the value pyflatmodule returns for it: ints, floats, bools,
strings, lists, tuples, dicts (children shared, as in torch), tensors as read-only numpy
views over the buffer. Objects and Functions, which pyflatmodule returns as lazy proxies,
become small records (type index and attribute indices; qualified name). No checks
beyond what Python's own bounds checks give: this is the speed floor of a pure-Python
reader, not a verifier. ``index`` reads the same metadata without making Python values
(what pyflatmodule's C index holds). Independent of pyflatmodule.
"""
from __future__ import annotations

import struct
from typing import Any, List, Tuple

import numpy as np

_u8 = struct.Struct("<B").unpack_from
_u32 = struct.Struct("<I").unpack_from
_i32 = struct.Struct("<i").unpack_from
_u16 = struct.Struct("<H").unpack_from
_i64 = struct.Struct("<q").unpack_from
_f64 = struct.Struct("<d").unpack_from
_c128 = struct.Struct("<2d").unpack_from

# c10::ScalarType -> numpy dtype, for the types numpy has (others: raw bytes).
_DTYPES = {0: "u1", 1: "i1", 2: "<i2", 3: "<i4", 4: "<i8", 5: "<f2", 6: "<f4", 7: "<f8",
           9: "<c8", 10: "<c16", 11: "?", 12: "i1", 13: "u1", 14: "<i4", 27: "<u2",
           28: "<u4", 29: "<u8"}
DTYPES = {k: np.dtype(v) for k, v in _DTYPES.items()}


def field(buf: Any, table: int, fid: int) -> int:
    """Absolute position of field ``fid`` of the table at ``table``, or 0 if absent."""
    vtable = table - _i32(buf, table)[0]
    vsize = _u16(buf, vtable)[0]
    slot = 4 + 2 * fid
    if slot >= vsize:
        return 0
    off = _u16(buf, vtable + slot)[0]
    return table + off if off else 0


def deref(buf: Any, at: int) -> int:
    return at + _u32(buf, at)[0]


def vector(buf: Any, table: int, fid: int) -> Tuple[int, int]:
    """(position of element 0, count) of a vector field; (0, 0) if absent."""
    p = field(buf, table, fid)
    if not p:
        return 0, 0
    v = deref(buf, p)
    return v + 4, _u32(buf, v)[0]


def string(buf: Any, table: int, fid: int) -> str:
    pos, n = vector(buf, table, fid)
    return str(buf[pos:pos + n], "utf-8")


def u32s(buf: Any, table: int, fid: int) -> Tuple[int, ...]:
    pos, n = vector(buf, table, fid)
    return struct.unpack_from(f"<{n}I", buf, pos)


def i32s(buf: Any, table: int, fid: int) -> Tuple[int, ...]:
    pos, n = vector(buf, table, fid)
    return struct.unpack_from(f"<{n}i", buf, pos)


def scalar(buf: Any, table: int, fid: int, unpack: Any, default: int = 0) -> Any:
    p = field(buf, table, fid)
    return unpack(buf, p)[0] if p else default


def storages(buf: Any, root: int) -> List[Tuple[int, int]]:
    """(position, size) of every storage payload."""
    out = []
    pos, n = vector(buf, root, 6)
    for k in range(n):
        t = deref(buf, pos + 4 * k)
        out.append(vector(buf, t, 0))
    return out


def tensor(buf: Any, t: int, stores: List[Tuple[int, int]]) -> Any:
    index = scalar(buf, t, 0, _u32)
    st = scalar(buf, t, 1, _u8)
    offset = scalar(buf, t, 2, _i32)
    sizes = i32s(buf, t, 3)
    strides = i32s(buf, t, 4)
    dtype = DTYPES.get(st)
    if dtype is None or field(buf, t, 6):
        return ("TensorMetadata", index, st, offset, sizes, strides)
    size = dtype.itemsize
    start = stores[index][0]
    if 0 in sizes:
        return np.empty(sizes, dtype)
    return np.ndarray(sizes, dtype, buffer=buf, offset=start + offset * size,
                      strides=tuple(s * size for s in strides))


def walk(buf: Any) -> List[Any]:
    """Every ivalue of the file, decoded; ``buf`` is any buffer (bytes, mmap...)."""
    root = _u32(buf, 0)[0]
    stores = storages(buf, root)
    pos, n = vector(buf, root, 4)
    values: List[Any] = []
    append = values.append
    for k in range(n):
        iv = deref(buf, pos + 4 * k)
        p = field(buf, iv, 0)
        t = _u8(buf, p)[0] if p else 0
        if t == 0:
            append(None)
            continue
        v = deref(buf, field(buf, iv, 1))
        if t == 1:
            append(_i64(buf, v)[0])
        elif t == 2:
            append(buf[v] != 0)
        elif t == 3:
            append(_f64(buf, v)[0])
        elif t == 4:
            append(complex(*_c128(buf, v)))
        elif t == 5:
            append(tensor(buf, v, stores))
        elif t == 6:
            append(string(buf, v, 0))
        elif t == 7:
            append([values[j] for j in u32s(buf, v, 0)])
        elif t == 8:
            append(tuple([values[j] for j in u32s(buf, v, 0)]))
        elif t == 9:
            keys = u32s(buf, v, 0)
            vals = u32s(buf, v, 1)
            append({values[a]: values[b] for a, b in zip(keys, vals)})
        elif t == 10:
            append(("Object", k, scalar(buf, v, 0, _u32), u32s(buf, v, 2)))
        elif t == 11:
            p2, m = vector(buf, v, 0)
            append(list(struct.unpack_from(f"<{m}q", buf, p2)))
        elif t == 12:
            p2, m = vector(buf, v, 0)
            append(list(struct.unpack_from(f"<{m}d", buf, p2)))
        elif t == 13:
            p2, m = vector(buf, v, 0)
            append([x != 0 for x in buf[p2:p2 + m]])
        elif t == 14:
            append(("Device", string(buf, v, 0)))
        elif t == 15:
            append(("EnumValue", string(buf, v, 0), values[scalar(buf, v, 1, _u32)]))
        elif t == 16:
            append(("Function", string(buf, v, 0)))
        else:
            raise ValueError(f"ivalues[{k}]: unknown union type {t}")
    return values


def index(buf: Any) -> List[Tuple[Any, ...]]:
    """What pyflatmodule's C index holds, read in Python: per ivalue its union type and
    payload position, and per type the (position, count) of its string or vector, the
    children's indices, or a tensor's storage, scalar type, offset, sizes and strides.
    No Python values are made (no strings, no arrays)."""
    root = _u32(buf, 0)[0]
    pos, n = vector(buf, root, 4)
    out: List[Tuple[Any, ...]] = []
    append = out.append
    for k in range(n):
        iv = deref(buf, pos + 4 * k)
        p = field(buf, iv, 0)
        t = _u8(buf, p)[0] if p else 0
        if t == 0:
            append((0, 0))
            continue
        v = deref(buf, field(buf, iv, 1))
        if t <= 4:
            append((t, v))
        elif t == 5:
            append((t, v, scalar(buf, v, 0, _u32), scalar(buf, v, 1, _u8),
                    scalar(buf, v, 2, _i32), i32s(buf, v, 3), i32s(buf, v, 4)))
        elif t in (6, 14, 16):
            append((t, v, vector(buf, v, 0)))
        elif t in (7, 8):
            append((t, v, u32s(buf, v, 0)))
        elif t == 9:
            append((t, v, u32s(buf, v, 0), u32s(buf, v, 1)))
        elif t == 10:
            append((t, v, scalar(buf, v, 0, _u32), u32s(buf, v, 2)))
        elif t in (11, 12, 13):
            append((t, v, vector(buf, v, 0)))
        elif t == 15:
            append((t, v, vector(buf, v, 0), scalar(buf, v, 1, _u32)))
        else:
            raise ValueError(f"ivalues[{k}]: unknown union type {t}")
    return out
