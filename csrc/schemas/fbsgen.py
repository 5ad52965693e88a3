"""Reads a FlatBuffers schema (.fbs) and writes the C header the core reads it through.

``python fbsgen.py SCHEMA.fbs [OUT.h]`` (default: ``../gen/<stem>.h``; the descriptors go
to the ``.c`` file beside it). The parser is
strict and takes the subset the project's schemas use: ``namespace``, ``struct``,
``table``, ``enum``, ``union`` (members may be aliases, ``Name: Type``, several of one
type), ``root_type``, ``file_identifier``, ``file_extension``, ``attribute`` declarations,
field attributes ``id``, ``deprecated``, ``required`` and ``force_align``, the
project's own field attribute ``value_ref`` (declared in the schema with ``attribute
"value_ref";``, so that flatc accepts the schema too), scalar defaults, and ``//`` and
``/* */`` comments. Anything else, or anything inconsistent
(unknown types, repeated names or ids, defaults out of range, a struct holding a
table), raises :class:`SchemaError` with the file and line.

The header, for a schema ``<stem>.fbs`` with prefix ``P`` (:data:`PREFIXES` names it for
schemas that share a first word; otherwise the stem up to its first underscore,
uppercased), holds:

- between ``cdef`` markers (so that cffi exposes them to Python): one enum per schema
  enum and union (``P_<ENUM>_<VALUE>``, unions with ``P_<UNION>_COUNT``), the vtable id
  of every table field (``P_<TABLE>_<FIELD>``, with ``P_<TABLE>_FIELD_COUNT``; a union
  field ``f`` takes the ids of ``f_type`` and ``f``), each struct's size, alignment
  and field offsets (``P_<STRUCT>_SIZE``, ``_ALIGN``, ``P_<STRUCT>_<FIELD>_OFFSET``),
  and each enum's members by name (``fb_enum_member p_<enum>[]``, in schema order);
- after them, the ``extern`` declarations of one ``fb_field`` descriptor array per
  table, indexed by field id (``p_<table>[P_<TABLE>_<FIELD>]``; none for a table
  without fields), one ``fb_member`` array per union, indexed by type number, whose
  entries ``fb.h`` reads to check every access, and the schema (``p_schema_file``).
  A descriptor's flags carry ``required`` (``FB_REQUIRED``: the readers refuse the
  field absent) and ``value_ref`` (``FB_VALUE_REF``: an integer, or integers, naming an
  entry of the format's value table, which the format checks and readers list as
  references).

The source (``<stem>.c``) defines them, once for the whole core.
"""
from __future__ import annotations

import os
import re
import sys
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple

#: scalar type -> (C fb_type name, size in bytes, minimum, maximum)
SCALARS: Dict[str, Tuple[str, int, float, float]] = {
    "bool": ("FB_BOOL", 1, 0, 1),
    "byte": ("FB_I8", 1, -2 ** 7, 2 ** 7 - 1),
    "ubyte": ("FB_U8", 1, 0, 2 ** 8 - 1),
    "short": ("FB_I16", 2, -2 ** 15, 2 ** 15 - 1),
    "ushort": ("FB_U16", 2, 0, 2 ** 16 - 1),
    "int": ("FB_I32", 4, -2 ** 31, 2 ** 31 - 1),
    "uint": ("FB_U32", 4, 0, 2 ** 32 - 1),
    "long": ("FB_I64", 8, -2 ** 63, 2 ** 63 - 1),
    "ulong": ("FB_U64", 8, 0, 2 ** 64 - 1),
    "float": ("FB_F32", 4, float("-inf"), float("inf")),
    "double": ("FB_F64", 8, float("-inf"), float("inf")),
}
ALIASES = {"int8": "byte", "uint8": "ubyte", "int16": "short", "uint16": "ushort",
           "int32": "int", "uint32": "uint", "int64": "long", "uint64": "ulong",
           "float32": "float", "float64": "double"}
#: C prefixes of schemas whose stems share a first word: headers included together must
#: not declare the same names (both ExecuTorch schemas declare DataSegment and NamedData).
PREFIXES = {"executorch_program": "ET", "executorch_flat_tensor": "FT",
            "executorch_flat_tensor_0_6": "FT06", "executorch_bundled": "BP",
            "executorch_etdump": "ED", "xnnpack": "XN", "vulkan": "VK"}
FIELD_ATTRIBUTES = {"id", "deprecated", "required", "force_align"}
#: field attributes of the project's own, each to be declared with ``attribute "..."``
#: -> the descriptor flag it sets
OWN_ATTRIBUTES = {"value_ref": "FB_VALUE_REF"}

TOKEN = re.compile(r"""
    (?P<space>\s+|//[^\n]*|/\*.*?\*/)
  | (?P<string>"[^"\n]*")
  | (?P<number>[-+]?(?:0[xX][0-9a-fA-F]+|\d+(?:\.\d*)?(?:[eE][-+]?\d+)?))
  | (?P<name>[A-Za-z_][A-Za-z0-9_.]*)
  | (?P<punct>[{}()\[\]:;,=])
""", re.VERBOSE | re.DOTALL)


class SchemaError(ValueError):
    """A schema the generator does not accept; the message starts with ``file:line:``."""


@dataclass
class Field:
    """One field of a table or struct, as declared."""
    name: str
    type: str                      # scalar, "string", or a declared name
    vector: bool
    line: int
    default: Optional[str] = None
    attrs: Dict[str, Optional[str]] = field(default_factory=dict)


@dataclass
class Decl:
    """A table, struct, enum or union."""
    kind: str                      # "table", "struct", "enum", "union"
    name: str
    line: int
    fields: List[Field] = field(default_factory=list)
    base: str = ""                 # enum underlying type
    values: List[Tuple[str, int]] = field(default_factory=list)   # enum and union members
    #: a union member's table or struct, by member name (itself unless aliased)
    member_types: Dict[str, str] = field(default_factory=dict)
    attrs: Dict[str, Optional[str]] = field(default_factory=dict)


@dataclass
class Schema:
    """A parsed schema: declarations in file order plus the file-level statements."""
    path: str
    namespace: str = ""
    decls: Dict[str, Decl] = field(default_factory=dict)
    root_type: str = ""
    file_identifier: str = ""
    file_extension: str = ""
    attributes: List[str] = field(default_factory=list)


class _Parser:
    def __init__(self, text: str, path: str) -> None:
        self.path = path
        self.toks: List[Tuple[str, str, int]] = []
        pos, line = 0, 1
        while pos < len(text):
            m = TOKEN.match(text, pos)
            if not m:
                raise SchemaError(f"{path}:{line}: unexpected character {text[pos]!r}")
            kind = m.lastgroup or ""
            if kind != "space":
                self.toks.append((kind, m.group(), line))
            line += m.group().count("\n")
            pos = m.end()
        self.i = 0

    def error(self, message: str, line: Optional[int] = None) -> SchemaError:
        if line is None:
            line = self.toks[min(self.i, len(self.toks) - 1)][2] if self.toks else 1
        return SchemaError(f"{self.path}:{line}: {message}")

    def peek(self) -> str:
        return self.toks[self.i][1] if self.i < len(self.toks) else ""

    def take(self, kind: Optional[str] = None, value: Optional[str] = None) -> str:
        if self.i >= len(self.toks):
            raise self.error(f"unexpected end of file, expected {value or kind}")
        k, v, _ = self.toks[self.i]
        if (kind and k != kind) or (value and v != value):
            raise self.error(f"expected {value or kind}, found {v!r}")
        self.i += 1
        return v

    def line(self) -> int:
        return self.toks[self.i][2] if self.i < len(self.toks) else 0

    def attrs(self) -> Dict[str, Optional[str]]:
        out: Dict[str, Optional[str]] = {}
        if self.peek() != "(":
            return out
        self.take(value="(")
        while True:
            name = self.take("name")
            if name in out:
                raise self.error(f"attribute {name!r} given twice")
            out[name] = None
            if self.peek() == ":":
                self.take(value=":")
                k, v, _ = self.toks[self.i] if self.i < len(self.toks) else ("", "", 0)
                if k not in ("number", "string", "name"):
                    raise self.error(f"attribute {name!r} has no value")
                self.i += 1
                out[name] = v
            if self.peek() == ")":
                self.take(value=")")
                return out
            self.take(value=",")

    def parse(self) -> Schema:
        s = Schema(self.path)
        while self.i < len(self.toks):
            line = self.line()
            word = self.take("name")
            if word == "namespace":
                s.namespace = self.take("name")
            elif word in ("root_type", "file_identifier", "file_extension", "attribute"):
                value = self.take("name") if word == "root_type" else self.take("string")[1:-1]
                if word == "attribute":
                    s.attributes.append(value)
                elif getattr(s, word):
                    raise self.error(f"{word} given twice")
                else:
                    setattr(s, word, value)
            elif word in ("table", "struct", "enum", "union"):
                d = self.decl(word, line)
                if d.name in s.decls or d.name in SCALARS or d.name in ALIASES:
                    raise self.error(f"{d.name!r} declared twice", line)
                s.decls[d.name] = d
                continue
            else:
                raise self.error(f"unsupported statement {word!r}", line)
            self.take(value=";")
        return s

    def decl(self, kind: str, line: int) -> Decl:
        d = Decl(kind, self.take("name"), line)
        if kind == "enum":
            self.take(value=":")
            d.base = ALIASES.get(self.peek(), self.peek())
            self.take("name")
        d.attrs = self.attrs()
        self.take(value="{")
        if kind in ("enum", "union"):
            self.members(d)
        else:
            while self.peek() != "}":
                d.fields.append(self.field())
        self.take(value="}")
        return d

    def members(self, d: Decl) -> None:
        nxt = 1 if d.kind == "union" else 0
        while self.peek() != "}":
            name = self.take("name")
            if d.kind == "union":
                d.member_types[name] = name
                if self.peek() == ":":   # an alias: `Name: Type`
                    self.take(value=":")
                    d.member_types[name] = self.take("name")
            value = nxt
            if self.peek() == "=":
                self.take(value="=")
                value = _integer(self.take("number"), self)
            d.values.append((name, value))
            nxt = value + 1
            if self.peek() != "}":
                self.take(value=",")

    def field(self) -> Field:
        line = self.line()
        name = self.take("name")
        self.take(value=":")
        vector = self.peek() == "["
        if vector:
            self.take(value="[")
        typ = self.take("name")
        if vector:
            self.take(value="]")
        f = Field(name, ALIASES.get(typ, typ), vector, line)
        if self.peek() == "=":
            self.take(value="=")
            k, v, _ = self.toks[self.i] if self.i < len(self.toks) else ("", "", 0)
            if k not in ("number", "name"):
                raise self.error(f"field {name!r} has no default value")
            self.i += 1
            f.default = v
        f.attrs = self.attrs()
        self.take(value=";")
        return f


def _integer(text: str, p: _Parser) -> int:
    try:
        return int(text, 0)
    except ValueError:
        raise p.error(f"{text!r} is not an integer") from None


def parse(text: str, path: str = "<schema>") -> Schema:
    """Parses and checks schema text; raises :class:`SchemaError` on anything wrong."""
    s = _Parser(text, path).parse()
    _check(s)
    return s


def _err(s: Schema, line: int, message: str) -> SchemaError:
    return SchemaError(f"{s.path}:{line}: {message}")


def _check(s: Schema) -> None:
    for d in s.decls.values():
        unknown = set(d.attrs) - {"force_align"}
        if unknown:
            raise _err(s, d.line, f"unsupported attribute {sorted(unknown)[0]!r} on {d.name}")
        if d.kind == "enum":
            _check_enum(s, d)
        elif d.kind == "union":
            _check_union(s, d)
        else:
            _check_fields(s, d)
    if not s.root_type:
        raise _err(s, 1, "no root_type")
    root = s.decls.get(s.root_type)
    if root is None or root.kind != "table":
        raise _err(s, 1, f"root_type {s.root_type!r} is not a table")
    if s.file_identifier and len(s.file_identifier.encode()) != 4:
        raise _err(s, 1, "file_identifier must be 4 bytes")
    _check_struct_cycles(s)


def _check_enum(s: Schema, d: Decl) -> None:
    if d.base not in SCALARS or d.base in ("bool", "float", "double"):
        raise _err(s, d.line, f"enum {d.name} needs an integer type, not {d.base!r}")
    _, _, lo, hi = SCALARS[d.base]
    seen: Dict[str, int] = {}
    last = None
    for name, value in d.values:
        if name in seen:
            raise _err(s, d.line, f"enum {d.name} names {name} twice")
        if not lo <= value <= hi:
            raise _err(s, d.line, f"enum {d.name}.{name} = {value} does not fit {d.base}")
        if last is not None and value <= last:
            raise _err(s, d.line, f"enum {d.name} values must increase ({name} = {value})")
        if value >= 2 ** 63:
            raise _err(s, d.line, f"enum {d.name}.{name}: values above 2^63-1 are not supported")
        seen[name] = last = value
    if not d.values:
        raise _err(s, d.line, f"enum {d.name} is empty")


def _check_union(s: Schema, d: Decl) -> None:
    seen = set()
    last = 0
    for name, value in d.values:
        member = s.decls.get(d.member_types[name])
        if member is None or member.kind not in ("table", "struct"):
            raise _err(s, d.line, f"union {d.name} member {name!r} is not a table or struct")
        if name in seen or name == "NONE":
            raise _err(s, d.line, f"union {d.name} names {name} twice")
        if value <= last or value > 255:
            raise _err(s, d.line, f"union {d.name} type {name} = {value} out of order or range")
        seen.add(name)
        last = value


def _check_fields(s: Schema, d: Decl) -> None:
    names = set()
    ids = []
    for f in d.fields:
        if f.name in names:
            raise _err(s, f.line, f"{d.name} declares {f.name} twice")
        names.add(f.name)
        unknown = set(f.attrs) - FIELD_ATTRIBUTES - set(OWN_ATTRIBUTES)
        if unknown:
            raise _err(s, f.line, f"unsupported attribute {sorted(unknown)[0]!r} on "
                                  f"{d.name}.{f.name}")
        for a in sorted(set(f.attrs) & set(OWN_ATTRIBUTES)):
            if a not in s.attributes:
                raise _err(s, f.line, f"attribute {a!r} on {d.name}.{f.name} is not declared")
        ref = s.decls.get(f.type)
        if f.type not in SCALARS and f.type != "string" and ref is None:
            raise _err(s, f.line, f"{d.name}.{f.name}: unknown type {f.type!r}")
        if f.vector and ref is not None and ref.kind == "union":
            raise _err(s, f.line, f"{d.name}.{f.name}: vectors of unions are not supported")
        if d.kind == "struct" and (f.vector or f.type == "string"
                                   or (ref is not None and ref.kind not in ("struct", "enum"))):
            raise _err(s, f.line, f"struct {d.name}.{f.name} must be a scalar, enum or struct")
        if d.kind == "struct" and (f.default is not None or set(f.attrs) - {"force_align"}):
            raise _err(s, f.line, f"struct {d.name}.{f.name} takes no default or id")
        if f.default is not None:
            _check_default(s, d, f, ref)
        if "id" in f.attrs:
            ids.append((_field_id(s, f), f))
        if "force_align" in f.attrs and not f.vector:
            raise _err(s, f.line, f"force_align on {d.name}.{f.name} needs a vector")
        if "value_ref" in f.attrs and f.type not in ("int", "uint", "long", "ulong"):
            raise _err(s, f.line, f"value_ref on {d.name}.{f.name} needs an integer or integers")
        if "required" in f.attrs and (scalar_of(s, f.type) is not None and not f.vector):
            raise _err(s, f.line, f"required on {d.name}.{f.name}: a scalar cannot be")
    if ids and len(ids) != len(d.fields):
        raise _err(s, d.line, f"{d.name}: either every field has an id or none")
    if ids:
        slots = []
        for i, f in sorted(ids, key=lambda x: x[0]):
            slots.extend([i - 1, i] if _is_union(s, f) else [i])
        if slots != list(range(len(slots))):
            raise _err(s, d.line, f"{d.name}: field ids must be 0..n-1, each once "
                                  "(a union takes its id and the one before)")


def _field_id(s: Schema, f: Field) -> int:
    value = f.attrs["id"]
    if value is None or not re.fullmatch(r"\d+", value):
        raise _err(s, f.line, f"id of {f.name} must be a non-negative integer")
    return int(value)


def _is_union(s: Schema, f: Field) -> bool:
    ref = s.decls.get(f.type)
    return ref is not None and ref.kind == "union"


def _check_default(s: Schema, d: Decl, f: Field, ref: Optional[Decl]) -> None:
    assert f.default is not None
    where = f"{d.name}.{f.name}"
    if f.vector or (f.type not in SCALARS and (ref is None or ref.kind != "enum")):
        raise _err(s, f.line, f"{where}: only scalars and enums take a default")
    if ref is not None:
        if f.default not in dict(ref.values) and not re.fullmatch(r"[-+]?\d+", f.default):
            raise _err(s, f.line, f"{where}: {f.default!r} is not a {ref.name} value")
        return
    _, _, lo, hi = SCALARS[f.type]
    try:
        value: float = float(f.default) if f.type in ("float", "double") else (
            1 if f.default == "true" else 0 if f.default == "false" else int(f.default, 0))
    except ValueError:
        raise _err(s, f.line, f"{where}: default {f.default!r} is not a {f.type}") from None
    if not lo <= value <= hi:
        raise _err(s, f.line, f"{where}: default {f.default} does not fit {f.type}")
    if value >= 2 ** 63:
        raise _err(s, f.line, f"{where}: defaults above 2^63-1 are not supported")


# ---------------------------------------------------------------- layout

def scalar_of(s: Schema, typ: str) -> Optional[str]:
    """The scalar type a field type stores inline (enums: their base), else None."""
    if typ in SCALARS:
        return typ
    d = s.decls.get(typ)
    return d.base if d is not None and d.kind == "enum" else None


def struct_layout(s: Schema, d: Decl) -> Tuple[int, int, List[int]]:
    """(size, alignment, field offsets) of a struct, by FlatBuffers' rules."""
    offset, align, offsets = 0, 1, []
    for f in d.fields:
        size, a = inline_size(s, f.type)
        offset = (offset + a - 1) // a * a
        offsets.append(offset)
        offset += size
        align = max(align, a)
    forced = d.attrs.get("force_align")
    if forced is not None:
        align = max(align, int(forced, 0))
    return (offset + align - 1) // align * align, align, offsets


def _check_struct_cycles(s: Schema) -> None:
    """Checks that no struct contains itself."""
    def visit(d: Decl, stack: Tuple[str, ...]) -> None:
        for f in d.fields:
            ref = s.decls.get(f.type)
            if ref is not None and ref.kind == "struct":
                if ref.name in stack:
                    raise _err(s, f.line, f"struct {ref.name} contains itself")
                visit(ref, stack + (ref.name,))
    for d in s.decls.values():
        if d.kind == "struct":
            visit(d, (d.name,))


def inline_size(s: Schema, typ: str) -> Tuple[int, int]:
    """(size, alignment) of a value of `typ` stored inline (offsets: 4, 4)."""
    scalar = scalar_of(s, typ)
    if scalar is not None:
        size = SCALARS[scalar][1]
        return size, size
    d = s.decls.get(typ)
    if d is not None and d.kind == "struct":
        size, align, _ = struct_layout(s, d)
        return size, align
    return 4, 4


# -------------------------------------------------------------- generator

def snake(name: str) -> str:
    """CamelCase -> camel_case (IValueUnion -> i_value_union)."""
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", "_", name).lower()


def field_kind(s: Schema, f: Field) -> str:
    """The fb_kind of a table field."""
    ref = s.decls.get(f.type)
    if f.vector:
        if f.type == "string":
            return "FB_VEC_STRING"
        if ref is not None and ref.kind == "table":
            return "FB_VEC_TABLE"
        if ref is not None and ref.kind == "struct":
            return "FB_VEC_STRUCT"
        return "FB_VEC_SCALAR"
    if f.type == "string":
        return "FB_STRING"
    if ref is not None and ref.kind in ("table", "struct", "union"):
        return {"table": "FB_TABLE", "struct": "FB_STRUCT", "union": "FB_UNION"}[ref.kind]
    return "FB_SCALAR"


def _default_literals(s: Schema, f: Field) -> Tuple[str, str]:
    if f.default is None:
        return "0", "0.0"
    ref = s.decls.get(f.type)
    if ref is not None:
        values = dict(ref.values)
        value = values[f.default] if f.default in values else int(f.default, 0)
        return str(value), "0.0"
    if f.type in ("float", "double"):
        return "0", repr(float(f.default))
    value = 1 if f.default == "true" else 0 if f.default == "false" else int(f.default, 0)
    return _int64_literal(value), "0.0"


def _int64_literal(value: int) -> str:
    if -2 ** 31 <= value < 2 ** 31:
        return str(value)
    if value >= 0:
        return f"INT64_C({value})"
    return f"(-INT64_C({-value - 1}) - 1)"


def _ordered_fields(s: Schema, d: Decl) -> List[Tuple[str, Field, bool]]:
    """(name, field, is the union type slot) in vtable id order."""
    fields = d.fields
    if fields and "id" in fields[0].attrs:
        fields = sorted(fields, key=lambda f: _field_id(s, f))
    out: List[Tuple[str, Field, bool]] = []
    for f in fields:
        if _is_union(s, f):
            out.append((f.name + "_type", f, True))
        out.append((f.name, f, False))
    return out


def prefix(stem: str) -> str:
    """The C prefix of the names generated from ``<stem>.fbs``."""
    return PREFIXES.get(stem, stem.split("_")[0].upper())


def generate(s: Schema, stem: str) -> str:
    """The C header for schema `s` read from ``<stem>.fbs``."""
    P = prefix(stem)
    p = P.lower()
    guard = f"{stem.upper()}_GENERATED_H"
    refs = {name: i for i, name in enumerate(s.decls)}
    out: List[str] = [
        f"/* {stem}.h: generated by csrc/schemas/fbsgen.py from csrc/schemas/{stem}.fbs;",
        " * do not edit (tests/core/test_schema.py checks that it is what the schema gives). */",
        f"#ifndef {guard}", f"#define {guard}", "", '#include "fb/fb_schema.h"', "",
        "/* --- cdef begin --- */", ""]
    if s.file_identifier:
        ident = int.from_bytes(s.file_identifier.encode(), "little")
        out.append(f"/* file_identifier \"{s.file_identifier}\" as a little-endian uint32 */")
        out.append(f"#define {P}_FILE_IDENTIFIER {ident:#010x}")
        out.append("")
    for d in s.decls.values():
        E = f"{P}_{snake(d.name).upper()}"
        if d.kind == "enum":
            out.append(f"enum {p}_{snake(d.name)} {{  /* {d.base} */")
            out += [f"    {E}_{n.upper()} = {v}," for n, v in d.values]
            out[-1] = out[-1].rstrip(",")
            out += ["};", f"extern const fb_enum_member {p}_{snake(d.name)}[{len(d.values)}];", ""]
        elif d.kind == "union":
            out.append(f"enum {p}_{snake(d.name)} {{")
            out += [f"    {E}_NONE = 0,"]
            out += [f"    {E}_{snake(n).upper()} = {v}," for n, v in d.values]
            out += [f"    {E}_COUNT = {d.values[-1][1] + 1 if d.values else 1}", "};", ""]
        elif d.kind == "struct":
            size, align, offsets = struct_layout(s, d)
            out.append(f"enum {p}_{snake(d.name)}_layout {{")
            out += [f"    {E}_SIZE = {size},", f"    {E}_ALIGN = {align},"]
            out += [f"    {E}_{f.name.upper()}_OFFSET = {o}," for f, o in zip(d.fields, offsets)]
            out[-1] = out[-1].rstrip(",")
            out += ["};", ""]
        else:
            fields = _ordered_fields(s, d)
            out.append(f"enum {p}_{snake(d.name)}_field {{")
            out += [f"    {E}_{n.upper()} = {i}," for i, (n, _, _) in enumerate(fields)]
            out += [f"    {E}_FIELD_COUNT = {len(fields)}", "};", ""]
    _check_unique(s, out)
    out += ["/* --- cdef end --- */", ""]
    out.append("/* Declarations in schema order: the `ref` of a descriptor. */")
    out.append(f"enum {p}_decl {{")
    out += [f"    {P}_DECL_{snake(n).upper()} = {i}," for n, i in refs.items()]
    out += [f"    {P}_DECL_COUNT = {len(refs)}", "};", ""]
    out.append("/* The descriptors, defined in the schema's source (<stem>.c). */")
    out += [f"extern {line[:-4]};" for line in _definitions(s, P)
            if line.endswith(" = {") and not line.startswith("const fb_enum_member")]
    out += ["", f"#endif /* {guard} */", ""]
    return "\n".join(out)


def generate_source(s: Schema, stem: str) -> str:
    """The C source defining the descriptors the header for schema `s` declares."""
    return "\n".join([
        f"/* {stem}.c: generated by csrc/schemas/fbsgen.py from csrc/schemas/{stem}.fbs;",
        " * do not edit (tests/core/test_schema.py checks that it is what the schema gives). */",
        f'#include "gen/{stem}.h"', ""] + _definitions(s, P=prefix(stem)))


def _definitions(s: Schema, P: str) -> List[str]:
    """The definitions of the enum member, union member, field and declaration arrays
    and of the schema; each opens with a line ending in " = {"."""
    p = P.lower()
    out: List[str] = []
    for d in s.decls.values():
        E = f"{P}_{snake(d.name).upper()}"
        if d.kind == "enum":
            out.append(f"const fb_enum_member {p}_{snake(d.name)}[{len(d.values)}] = {{")
            out += [f'    {{"{n}", {_int64_literal(v)}}},' for n, v in d.values]
            out += ["};", ""]
        elif d.kind == "union":
            out.append(f"const fb_member {p}_{snake(d.name)}[{E}_COUNT] = {{")
            members = dict((v, n) for n, v in d.values)
            for t in range((d.values[-1][1] + 1) if d.values else 1):
                name = members.get(t)
                if name is None:
                    out.append(f'    {{"{"NONE" if t == 0 else ""}", FB_NONE, 0, 0, FB_NO_REF}},')
                    continue
                m = s.decls[d.member_types[name]]
                size, align = inline_size(s, m.name) if m.kind == "struct" else (4, 4)
                kind = "FB_STRUCT" if m.kind == "struct" else "FB_TABLE"
                out.append(f'    {{"{name}", {kind}, {size}, {align}, '
                           f"{P}_DECL_{snake(m.name).upper()}}},")
            out += ["};", ""]
        elif d.kind == "table" and d.fields:   # C99 has no empty arrays
            fields = _ordered_fields(s, d)
            out.append(f"const fb_field {p}_{snake(d.name)}[{E}_FIELD_COUNT] = {{")
            for i, (name, f, is_type) in enumerate(fields):
                out.append("    " + _descriptor(s, P, i, name, f, is_type) + ",")
            out += ["};", ""]
    return out + _decl_table(s, P)


def _decl_table(s: Schema, P: str) -> List[str]:
    """The schema's declarations as an fb_decl array and the fb_schema over it."""
    p = P.lower()
    out = [f"const fb_decl {p}_decl_table[{P}_DECL_COUNT] = {{"]
    for d in s.decls.values():
        E = f"{P}_{snake(d.name).upper()}"
        array = f"{p}_{snake(d.name)}"
        if d.kind == "table":
            fields = _ordered_fields(s, d)
            out.append(f'    {{"{d.name}", FB_DECL_TABLE, 4, 4, {len(fields)}, '
                       f'{array if fields else "NULL"}, NULL}},')
        elif d.kind == "union":
            out.append(f'    {{"{d.name}", FB_DECL_UNION, 1, 1, {E}_COUNT, NULL, {array}}},')
        elif d.kind == "struct":
            size, align, _ = struct_layout(s, d)
            out.append(f'    {{"{d.name}", FB_DECL_STRUCT, {size}, {align}, 0, NULL, NULL}},')
        else:
            size, align = inline_size(s, d.name)
            out.append(f'    {{"{d.name}", FB_DECL_ENUM, {size}, {align}, 0, NULL, NULL}},')
    ident = int.from_bytes(s.file_identifier.encode(), "little") if s.file_identifier else 0
    stem = os.path.splitext(os.path.basename(s.path))[0]
    out += ["};", "",
            f"const fb_schema {p}_schema_file = {{",
            f'    "{stem}", {ident:#010x}, {P}_DECL_{snake(s.root_type).upper()}, '
            f"{P}_DECL_COUNT, {p}_decl_table",
            "};", ""]
    return out


def _check_unique(s: Schema, lines: List[str]) -> None:
    seen = set()
    for line in lines:
        m = re.match(r"\s+(\w+) = ", line)
        if m:
            if m.group(1) in seen:
                raise _err(s, 1, f"two declarations generate the C name {m.group(1)}")
            seen.add(m.group(1))


def _descriptor(s: Schema, P: str, i: int, name: str, f: Field, is_type: bool) -> str:
    ref = s.decls.get(f.type)
    ref_c = f"{P}_DECL_{snake(ref.name).upper()}" if ref is not None else "FB_NO_REF"
    if is_type:
        return (f'{{"{name}", ".{name}", {i}, FB_UNION_TYPE, FB_U8, 1, 1, 0, 0, 0, 0, 0, 0.0, '
                f"{ref_c}}}")
    kind = field_kind(s, f)
    scalar = scalar_of(s, f.type)
    ftype = SCALARS[scalar][0] if scalar else "FB_OFFSET"
    size, align = (4, 4) if f.vector else inline_size(s, f.type)
    esize = ealign = 0
    if f.vector:
        esize, ealign = inline_size(s, f.type)
    if f.vector or kind in ("FB_STRING", "FB_TABLE", "FB_UNION"):
        size, align = 4, 4
    if kind == "FB_STRING":
        esize = ealign = 1
    forced = f.attrs.get("force_align")
    forced_c = int(forced, 0) if forced else 0
    flags = ["FB_REQUIRED"] if "required" in f.attrs else []
    flags += [OWN_ATTRIBUTES[a] for a in sorted(OWN_ATTRIBUTES) if a in f.attrs]
    dint, dreal = _default_literals(s, f)
    return (f'{{"{name}", ".{name}", {i}, {kind}, {ftype}, {size}, {align}, {esize}, {ealign}, '
            f"{forced_c}, {' | '.join(flags) or 0}, {dint}, {dreal}, {ref_c}}}")


def main(argv: List[str]) -> int:
    """Command line: ``fbsgen.py SCHEMA.fbs [OUT.h]`` (and OUT.c beside it)."""
    if len(argv) not in (2, 3):
        print(__doc__.splitlines()[2].strip(), file=sys.stderr)
        return 2
    path = argv[1]
    stem = os.path.splitext(os.path.basename(path))[0]
    target = argv[2] if len(argv) == 3 else os.path.join(
        os.path.dirname(os.path.dirname(os.path.abspath(path))), "gen", stem + ".h")
    with open(path, encoding="utf-8") as f:
        schema = parse(f.read(), path)
    for out, text in ((target, generate(schema, stem)),
                      (os.path.splitext(target)[0] + ".c", generate_source(schema, stem))):
        with open(out, "w", encoding="utf-8") as f:
            f.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
