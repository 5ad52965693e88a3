"""Reading a verified flatbuffer by its schema: the Python side of the generic layer.

The descriptors come from the C core (``fb_schema_find``: what csrc/schemas/fbsgen.py
generated from the project's .fbs files), so field ids, kinds, element types and
defaults are the schema's and are typed nowhere else. A :class:`Table` reads fields by
their schema names. Reads are bounds-checked by Python itself, but the layouts they
assume (an offset field points at a table, a vector fits the buffer) are what the C
verifier proved for the file before any Table is made over it. Each Table knows its
path from the root (the C core's form: ``execution_plan[0].values[3].val<Tensor>``), so
that the formats built on it locate their errors like the C core's.
"""
from __future__ import annotations

import struct
from typing import Any, Dict, Iterator, List, NamedTuple, Optional, Sequence, Tuple, Union

from .lazy import np
from .native import ffi, lib

__all__ = ["FieldInfo", "Schema", "Table", "Tables", "Where", "decode_text", "enum_names",
           "path_of", "schema_of"]

#: struct format and numpy dtype of each fb_type (FB_OFFSET reads as a uint32).
_SCALARS: Dict[int, Tuple[str, str]] = {
    lib.FB_OFFSET: ("<I", "<u4"), lib.FB_BOOL: ("<?", "?"), lib.FB_I8: ("<b", "i1"),
    lib.FB_U8: ("<B", "u1"), lib.FB_I16: ("<h", "<i2"), lib.FB_U16: ("<H", "<u2"),
    lib.FB_I32: ("<i", "<i4"), lib.FB_U32: ("<I", "<u4"), lib.FB_I64: ("<q", "<i8"),
    lib.FB_U64: ("<Q", "<u8"), lib.FB_F32: ("<f", "<f4"), lib.FB_F64: ("<d", "<f8"),
}
_U32 = struct.Struct("<I")
_I32 = struct.Struct("<i")
_U16 = struct.Struct("<H")
#: Field kinds whose bytes are all inside their table.
_INLINE = (lib.FB_NONE, lib.FB_SCALAR, lib.FB_STRUCT, lib.FB_UNION_TYPE)


class FieldInfo(NamedTuple):
    """One table field as the schema declares it."""

    name: str
    id: int
    kind: int            # fb_kind
    fmt: str             # struct format of a scalar (of an element, for a vector)
    dtype: str           # numpy dtype of a scalar or vector element
    default: Union[int, float, bool]
    ref: str             # the table, union or enum it refers to, "" if none
    flags: int = 0       # fb_flag: what the schema's attributes say of it
    elem_size: int = 0   # bytes of a vector element (4 for offsets), of a string byte
    size: int = 0        # bytes inline in the table (4 for offsets)

    @property
    def value_ref(self) -> bool:
        """Whether the schema marks the field ``value_ref``: it names values."""
        return bool(self.flags & lib.FB_VALUE_REF)


class Schema:
    """The tables and unions of one compiled schema, by name."""

    def __init__(self, s: Any) -> None:
        """Reads compiled schema ``s`` (a ``const fb_schema *`` of the C core)."""
        self.name: str = ffi.string(s.name).decode()
        decls = [s.decls[i] for i in range(s.count)]
        names = [ffi.string(d.name).decode() for d in decls]
        #: table name -> field name -> FieldInfo
        self.tables: Dict[str, Dict[str, FieldInfo]] = {}
        #: union name -> member names by type number ("" where the union skips one)
        self.unions: Dict[str, List[str]] = {}
        #: union name -> the table or struct of each member, by type number (members
        #: may be aliases: several kinds of node of one table layout)
        self.union_types: Dict[str, List[str]] = {}
        for name, d in zip(names, decls):
            if d.kind == lib.FB_DECL_TABLE:
                fields = {}
                for i in range(d.count):
                    f = d.fields[i]
                    fmt, dtype = _SCALARS[f.type]
                    real = f.type in (lib.FB_F32, lib.FB_F64)
                    default = f.real_default if real else (
                        bool(f.int_default) if f.type == lib.FB_BOOL else f.int_default)
                    fname = ffi.string(f.name).decode()
                    fields[fname] = FieldInfo(fname, f.id, f.kind, fmt, dtype, default,
                                              names[f.ref] if f.ref != 0xFFFF else "",
                                              f.flags, f.elem_size, f.size)
                self.tables[name] = fields
            elif d.kind == lib.FB_DECL_UNION:
                members = [d.members[i] for i in range(d.count)]
                self.unions[name] = [ffi.string(m.name).decode() for m in members]
                self.union_types[name] = [names[m.ref] if m.ref != 0xFFFF else ""
                                          for m in members]
        self.root: str = names[s.root]


_SCHEMAS: Dict[str, Schema] = {}


def enum_names(members: Any) -> Dict[int, str]:
    """A schema enum's member names (as declared) by value, from the member table the
    generator writes for it (``lib.<prefix>_<enum>``)."""
    return {int(m.value): ffi.string(m.name).decode() for m in members}


def schema_of(identifier: int) -> Schema:
    """The compiled schema of a file identifier (a little-endian uint32), cached: of an
    identifier several layouts share, the current one (see :func:`schema_at`)."""
    s = lib.fb_schema_find(identifier)
    if s == ffi.NULL:
        raise LookupError(f"no compiled schema has identifier {identifier:#x}")
    return schema_at(s)


def schema_at(s: Any) -> Schema:
    """Compiled schema ``s`` (a ``const fb_schema *``, such as the one a format's C reader
    says a file is read by), cached by name."""
    name = ffi.string(s.name).decode()
    schema = _SCHEMAS.get(name)
    if schema is None:
        schema = _SCHEMAS[name] = Schema(s)
    return schema


#: A path from the root: field names, union members ("<Tensor>") and vector indices.
Where = Tuple[Union[str, int], ...]


def path_of(where: Where) -> str:
    """The path text of ``where``: ``execution_plan[0].values[3].val<Tensor>``."""
    out = []
    for seg in where:
        if isinstance(seg, int):
            out.append(f"[{seg}]")
        elif seg.startswith("<") or not out:
            out.append(seg)
        else:
            out.append("." + seg)
    return "".join(out)


def decode_text(buf: Any, pos: int, n: int) -> str:
    """The ``n`` bytes at ``pos`` as text: UTF-8, with any byte that is not decoded as a
    lone surrogate (``surrogateescape``), so that the text encodes back to the file's
    bytes. FlatBuffers' verifier takes a string's bytes as they are; a format checks
    the strings its readers decode, and ``verify --strict`` every one."""
    return str(memoryview(buf)[pos:pos + n], "utf-8", "surrogateescape")


class Table:
    """A table of a verified buffer, read field by field through its schema."""

    __slots__ = ("schema", "buf", "pos", "fields", "where", "_vt", "_vt_size", "_size")

    def __init__(self, schema: Schema, buf: Any, pos: int, table: str,
                 where: Where = ()) -> None:
        self.schema = schema
        #: the object the buffer came from (an mmap, bytes...): vectors are views of it
        self.buf = buf
        self.pos = pos
        self.fields = schema.tables[table]
        #: the table's path from the root, for errors
        self.where = where
        vt = pos - _I32.unpack_from(buf, pos)[0]
        self._vt = vt
        self._vt_size = _U16.unpack_from(buf, vt)[0]
        # a vtable shorter than its two entries has no fields (fb_tbl_open)
        self._size = _U16.unpack_from(buf, vt + 2)[0] if self._vt_size >= 4 else 0

    def _at(self, f: FieldInfo) -> int:
        slot = 4 + 2 * f.id
        if slot + 2 > self._vt_size:
            return 0
        off: int = _U16.unpack_from(self.buf, self._vt + slot)[0]
        return self.pos + off if off else 0

    def _ref(self, name: str) -> Tuple[FieldInfo, int]:
        f = self.fields[name]
        at = self._at(f)
        return f, (at + _U32.unpack_from(self.buf, at)[0]) if at else 0

    def _end(self) -> int:
        """Where the table's inline bytes end: its declared size, or past it the furthest
        field (a writer may put one there; FlatBuffers' verifier takes it)."""
        end = self.pos + self._size
        for f in self.fields.values():
            at = self._at(f)
            if at:
                end = max(end, at + f.size)
        return end

    def has(self, name: str) -> bool:
        """Whether the field is present in the file."""
        return self._at(self.fields[name]) != 0

    def scalar(self, name: str) -> Any:
        """A scalar or enum field; its schema default when absent."""
        f = self.fields[name]
        at = self._at(f)
        return struct.unpack_from(f.fmt, self.buf, at)[0] if at else f.default

    def plain(self, name: str) -> Any:
        """A scalar, string or vector of scalars or strings field as a plain Python value
        (a list for vectors); tables and unions are not plain (TypeError)."""
        kind = self.fields[name].kind
        if kind == lib.FB_SCALAR:
            return self.scalar(name)
        if kind == lib.FB_STRING:
            return self.string(name)
        if kind == lib.FB_VEC_SCALAR:
            return self.values(name)
        if kind == lib.FB_VEC_STRING:
            return self.strings(name)
        raise TypeError(f"field {name!r} is a table, union or vector of tables or structs")

    def string(self, name: str) -> Optional[str]:
        """A string field as text (decode_text), None when absent."""
        _, target = self._ref(name)
        if not target:
            return None
        n = _U32.unpack_from(self.buf, target)[0]
        return decode_text(self.buf, target + 4, n)

    def vector(self, name: str) -> np.ndarray:
        """A vector of scalars as a read-only zero-copy array (empty when absent)."""
        f, target = self._ref(name)
        if not target:
            return np.empty(0, f.dtype)
        n = _U32.unpack_from(self.buf, target)[0]
        out = np.frombuffer(self.buf, f.dtype, n, target + 4)
        out.flags.writeable = False
        return out

    def values(self, name: str) -> List[Any]:
        """A vector of scalars as a list (empty when absent): ``vector(name).tolist()``
        without numpy, for an answer that holds no array."""
        f, target = self._ref(name)
        if not target:
            return []
        n = _U32.unpack_from(self.buf, target)[0]
        size = struct.calcsize(f.fmt)
        if target + 4 + n * size > len(self.buf):   # as vector() fails on it
            return list(self.vector(name).tolist())
        return list(struct.unpack_from(f"<{n}{f.fmt[1:]}", self.buf, target + 4))

    def vector_span(self, name: str) -> Tuple[int, int]:
        """(position of element 0, element count) of a vector; (0, 0) when absent."""
        _, target = self._ref(name)
        if not target:
            return 0, 0
        return target + 4, _U32.unpack_from(self.buf, target)[0]

    def table(self, name: str) -> Optional["Table"]:
        """A table field, None when absent."""
        f, target = self._ref(name)
        return Table(self.schema, self.buf, target, f.ref, self.where + (name,)) \
            if target else None

    def tables(self, name: str) -> "Tables":
        """A vector of tables, each read on demand."""
        f, target = self._ref(name)
        return Tables(self.schema, self.buf, target, f.ref, self.where + (name,))

    def strings(self, name: str) -> List[str]:
        """A vector of strings as text (decode_text)."""
        _, target = self._ref(name)
        out = []
        if target:
            for i in range(_U32.unpack_from(self.buf, target)[0]):
                at = target + 4 + 4 * i
                s = at + _U32.unpack_from(self.buf, at)[0]
                n = _U32.unpack_from(self.buf, s)[0]
                out.append(decode_text(self.buf, s + 4, n))
        return out

    def union(self, name: str) -> Tuple[str, Optional["Table"]]:
        """A union field: its member's name ("NONE" when unset) and its table."""
        f = self.fields[name]
        members = self.schema.unions[f.ref]
        kind = int(self.scalar(name + "_type"))
        member = members[kind] if kind < len(members) else ""
        if kind == 0 or not member:
            # no member: the verifier proved nothing of the offset, so it is not followed
            return member or "NONE", None
        _, target = self._ref(name)
        if not target:
            return member, None
        return member, Table(self.schema, self.buf, target, self.schema.union_types[f.ref][kind],
                             self.where + (name, f"<{member}>"))

    def spans(self, skip: Sequence[str] = ()) -> List[Tuple[int, int]]:
        """The byte ranges [start, end) of this table and of everything it reaches: its
        inline fields and vtable, its strings (with their NUL), its vectors (with their
        length), the tables under it, but the fields named in ``skip`` (of this table
        only). Unsorted; objects the buffer shares (vtables) appear once per user."""
        out: List[Tuple[int, int]] = []
        stack: List[Tuple[Table, Sequence[str]]] = [(self, skip)]
        buf = self.buf
        while stack:
            t, skipped = stack.pop()
            out.append((t.pos, t._end()))
            out.append((t._vt, t._vt + t._vt_size))
            for name, f in t.fields.items():
                if f.kind in _INLINE or name in skipped:
                    continue
                if f.kind == lib.FB_UNION:
                    kind = int(t.scalar(name + "_type"))
                    types = t.schema.union_types[f.ref]
                    sub = t.union(name)[1] if kind < len(types) and \
                        types[kind] in t.schema.tables else None   # not a struct member
                    if sub is not None:
                        stack.append((sub, ()))
                    continue
                target = t._ref(name)[1]
                if not target:
                    continue
                if f.kind == lib.FB_TABLE:
                    stack.append((Table(t.schema, buf, target, f.ref, t.where + (name,)), ()))
                    continue
                n = _U32.unpack_from(buf, target)[0]
                if f.kind == lib.FB_STRING:
                    out.append((target, target + 4 + n + 1))
                    continue
                out.append((target, target + 4 + n * f.elem_size))
                if f.kind == lib.FB_VEC_STRING:
                    for i in range(n):
                        at = target + 4 + 4 * i
                        s = at + _U32.unpack_from(buf, at)[0]
                        out.append((s, s + 4 + _U32.unpack_from(buf, s)[0] + 1))
                elif f.kind == lib.FB_VEC_TABLE:
                    stack.extend((sub, ()) for sub in t.tables(name))
        return out


class Tables(Sequence[Table]):
    """A vector of tables of one type; element i is read when asked for."""

    __slots__ = ("schema", "buf", "pos", "table", "length", "where")

    def __init__(self, schema: Schema, buf: Any, pos: int, table: str,
                 where: Where = ()) -> None:
        self.schema = schema
        self.buf = buf
        self.pos = pos
        self.table = table
        self.where = where
        self.length: int = _U32.unpack_from(buf, pos)[0] if pos else 0

    def __len__(self) -> int:
        return self.length

    def __getitem__(self, i: Any) -> Any:
        if isinstance(i, slice):
            return [self[k] for k in range(*i.indices(self.length))]
        if i < 0:
            i += self.length
        if not 0 <= i < self.length:
            raise IndexError(f"index {i} out of range for {self.length} {self.table} tables")
        at = self.pos + 4 + 4 * i
        return Table(self.schema, self.buf, at + _U32.unpack_from(self.buf, at)[0], self.table,
                     self.where + (i,))

    def __iter__(self) -> Iterator[Table]:
        for i in range(self.length):
            yield self[i]
