"""A minimal PTMF writer for crafting good and broken files in tests.

Independent of pyflatmodule: built on ``flatbuffers.Builder`` and the schema as torch
writes it (csrc/schemas/mobile_bytecode.fbs; the table layouts below). A module is a
plain dict of Module fields (``ivalues``, ``object_types``, ``storage_data``...); each
ivalue is a dict made by ``iv`` or a shorthand (``Int``,
``Str``, ``List``, ``Tensor``, ``Obj``, ``Func``...). Anything may be wrong on purpose:
union type bytes (``iv("String", type=200, ...)``), index values, and any string or
vector field may be a ``Raw`` (arbitrary element count over arbitrary bytes). Fields
left out (or None) are omitted; given scalars are always written, defaults included.
``patch``, ``field_pos`` and ``ivalue_slot`` edit finished bytes for structural damage;
``list_chain`` lays out a deep List chain directly, fast.
"""
from __future__ import annotations

import struct
from typing import Any, Dict, Optional
from typing import List as _List
from typing import Tuple as _Tuple

import flatbuffers
import numpy as np

UNION = ("NONE", "Int", "Bool", "Double", "ComplexDouble", "TensorMetadata", "String",
         "List", "Tuple", "Dict", "Object", "IntList", "DoubleList", "BoolList", "Device",
         "EnumValue", "Function")
CODE = {name: i for i, name in enumerate(UNION)}
#: Struct members of the union: format and alignment (stored out of line).
STRUCTS = {"Int": ("<q", 8), "Bool": ("<?", 1), "Double": ("<d", 8),
           "ComplexDouble": ("<2d", 8)}
CLASS_WITH_FIELD, CUSTOM_CLASS, CLASS_WITH_SETSTATE = 1, 2, 3

# Tables: fields in id order as name:kind. Kinds: scalars as struct letters (B b ? I i d);
# s string; v<dtype> numeric vector; vs vector of strings; t:T table; vt:T vector of
# tables; instr vector of Instruction structs; bytes the [ubyte] storage payload.
_SPEC = """
Module bytecode_version:I extra_files:vt:ExtraFile methods:v<u4 state_obj:I
  ivalues:vt:IValue storage_data_size:i storage_data:vt:StorageData
  object_types:vt:ObjectType jit_sources:vt:ExtraFile jit_constants:v<u4
  operator_version:I mobile_ivalue_size:I
ExtraFile name:s content:s
StorageData data:bytes
ObjectType type_name:s type:B attr_names:vs
TensorMetadata storage_location_index:I scalar_type:b storage_offset:i sizes:v<i4
  strides:v<i4 requires_grad:? quantized_schema:t:QuantizedSchema
QuantizedSchema qscheme:b scale:d zero_point:i scales:t:TensorMetadata
  zero_points:t:TensorMetadata axis:i
String data:s
Device str:s
List items:v<u4 annotation_str:s
Tuple items:v<u4
Dict keys:v<u4 values:v<u4 annotation_str:s
IntList items:v<i8
DoubleList items:v<f8
BoolList items:v?
Object type_index:I state:I attrs:v<u4 setstate_func:I
EnumValue type_name:s value:I
Operator name:s overload_name:s num_args_serialized:i
Arg name:s type:s default_value:I
Schema arguments:vt:Arg returns:vt:Arg
DebugInfo debug_handle:v<i8
Function qn:s instructions:instr operators:vt:Operator constants:v<u4 type_annotations:vs
  register_size:i schema:t:Schema debug_info:t:DebugInfo class_type:I
"""
#: table name -> field name -> (field id, kind)
SCHEMA: Dict[str, Dict[str, _Tuple[int, str]]] = {}
for _line in _SPEC.replace("\n  ", " ").strip().splitlines():
    _name, *_fields = _line.split()
    SCHEMA[_name] = {f.split(":", 1)[0]: (i, f.split(":", 1)[1]) for i, f in enumerate(_fields)}
_SLOT = {"B": "PrependUint8Slot", "b": "PrependInt8Slot", "?": "PrependBoolSlot",
         "I": "PrependUint32Slot", "i": "PrependInt32Slot", "d": "PrependFloat64Slot"}


class Raw:
    """A vector or string written as a uint32 ``count`` followed by ``data`` verbatim
    (``count`` need not match: no NUL, lengths past the buffer...)."""

    def __init__(self, data: bytes, count: Optional[int] = None, align: int = 4) -> None:
        self.data, self.count, self.align = data, len(data) if count is None else count, align


# ------------------------------------------------------------- ivalue shorthands

def iv(kind: str, type: Optional[int] = None, **fields: Any) -> Dict[str, Any]:
    """An IValue of union member ``kind``; ``type`` overrides the stored type byte.
    Struct kinds take ``value``; table kinds take their schema fields."""
    return {"kind": kind, "type": CODE[kind] if type is None else type, **fields}


def NoneV() -> Dict[str, Any]: return iv("NONE")
def Int(v: int) -> Dict[str, Any]: return iv("Int", value=v)
def Bool(v: bool) -> Dict[str, Any]: return iv("Bool", value=v)
def Double(v: float) -> Dict[str, Any]: return iv("Double", value=v)
def Complex(v: complex) -> Dict[str, Any]: return iv("ComplexDouble", value=v)
def Str(s: Any) -> Dict[str, Any]: return iv("String", data=s)
def Device(s: str) -> Dict[str, Any]: return iv("Device", str=s)
def Tuple(items: Any) -> Dict[str, Any]: return iv("Tuple", items=items)
def IntList(items: Any) -> Dict[str, Any]: return iv("IntList", items=items)
def DoubleList(items: Any) -> Dict[str, Any]: return iv("DoubleList", items=items)
def BoolList(items: Any) -> Dict[str, Any]: return iv("BoolList", items=items)
def Enum(type_name: str, value: int) -> Dict[str, Any]:
    return iv("EnumValue", type_name=type_name, value=value)


def List(items: Any, annotation: str = "List[Any]") -> Dict[str, Any]:
    return iv("List", items=items, annotation_str=annotation)
def Dict_(keys: Any, values: Any, annotation: str = "Dict[str, int]") -> Dict[str, Any]:
    return iv("Dict", keys=keys, values=values, annotation_str=annotation)
def Obj(type_index: int, attrs: Any = None, **fields: Any) -> Dict[str, Any]:
    return iv("Object", type_index=type_index, attrs=attrs, **fields)


def Tensor(sizes: Any, strides: Any = None, scalar_type: int = 6, storage: int = 0,
           **fields: Any) -> Dict[str, Any]:
    """TensorMetadata; ``strides`` default to contiguous ones."""
    if strides is None:
        strides = [int(np.prod(sizes[k + 1:])) for k in range(len(sizes))]
    return iv("TensorMetadata", storage_location_index=storage, scalar_type=scalar_type,
              sizes=sizes, strides=strides, **fields)


def Func(qn: str, **fields: Any) -> Dict[str, Any]:
    """Function; ``instructions`` as (op, n, x) triples, ``operators`` and schema args
    as dicts of Operator/Arg fields."""
    return iv("Function", qn=qn, **fields)


# ------------------------------------------------------------------- writer

class _Writer:
    def __init__(self, storage_align: int) -> None:
        self.b = flatbuffers.Builder(1024)
        self.b.ForceDefaults(True)
        self.storage_align = storage_align

    def raw(self, r: Raw) -> int:
        b = self.b
        b.Prep(max(4, r.align), len(r.data))
        b.head -= len(r.data)
        b.Bytes[b.head:b.head + len(r.data)] = r.data
        b.PrependUint32(r.count & 0xFFFFFFFF)   # the vector length, as given
        return b.Offset()

    def child(self, kind: str, value: Any) -> int:
        """Write what an offset field points to; return its offset."""
        b = self.b
        if isinstance(value, Raw):
            return self.raw(value)
        if kind == "s":
            return b.CreateString(value)
        if kind.startswith("v") and kind[1] in "<?":
            return b.CreateNumpyVector(np.asarray(value, dtype=kind[1:]))
        if kind == "bytes":
            b.StartVector(1, len(value), self.storage_align)
            b.head -= len(value)
            b.Bytes[b.head:b.head + len(value)] = bytes(value)
            return b.EndVector()
        if kind == "instr":
            b.StartVector(8, len(value), 4)
            for op, n, x in reversed(value):
                b.Prep(4, 8)
                b.PrependInt32(x)
                b.PrependUint16(n)
                b.Pad(1)
                b.PrependInt8(op)
            return b.EndVector()
        if kind == "vs":
            return self.offsets([b.CreateString(s) if not isinstance(s, Raw) else self.raw(s)
                                 for s in value])
        if kind.startswith("t:"):
            return self.table(kind[2:], value)
        assert kind.startswith("vt:"), kind
        return self.offsets([self.table(kind[3:], t) for t in value])

    def offsets(self, offs: _List[int]) -> int:
        b = self.b
        b.StartVector(4, len(offs), 4)
        for o in reversed(offs):
            b.PrependUOffsetTRelative(o)
        return b.EndVector()

    def table(self, name: str, fields: Dict[str, Any]) -> int:
        if name == "IValue":
            return self.ivalue(fields)
        layout = SCHEMA[name]
        unknown = set(fields) - set(layout) - {"kind", "type"}
        assert not unknown, f"{name} has no fields {unknown}"
        children = {k: self.child(kind, fields[k]) for k, (_, kind) in layout.items()
                    if kind not in _SLOT and fields.get(k) is not None}
        b = self.b
        b.StartObject(max(fid for fid, _ in layout.values()) + 1)
        for k, (fid, kind) in layout.items():
            if fields.get(k) is None:
                continue
            if kind in _SLOT:
                getattr(b, _SLOT[kind])(fid, fields[k], 0)
            else:
                b.PrependUOffsetTRelativeSlot(fid, children[k], 0)
        return b.EndObject()

    def ivalue(self, v: Dict[str, Any]) -> int:
        kind, b = v["kind"], self.b
        payload = None
        if kind in STRUCTS:
            fmt, align = STRUCTS[kind]
            value = v["value"]
            data = struct.pack(fmt, *((value.real, value.imag) if kind == "ComplexDouble"
                                      else (value,)))
            b.Prep(align, len(data))
            b.head -= len(data)
            b.Bytes[b.head:b.head + len(data)] = data
            payload = b.Offset()
        elif kind != "NONE":
            payload = self.table(kind, {k: x for k, x in v.items() if k not in ("kind", "type")})
        b.StartObject(2)
        if payload is not None:
            b.PrependUOffsetTRelativeSlot(1, payload, 0)
        b.PrependUint8Slot(0, v["type"], 0)
        return b.EndObject()


def build(module: Dict[str, Any], storage_align: int = 16) -> bytes:
    """Serialize a module description to a PTMF buffer (identifier ``PTMF``).

    ``extra_files``/``jit_sources`` may be dicts of name -> content; ``object_types``
    entries dicts of ObjectType fields; ``storage_data`` a list of payload bytes."""
    m = dict(module)
    for key in ("extra_files", "jit_sources"):
        if isinstance(m.get(key), dict):
            m[key] = [{"name": k, "content": c} for k, c in m[key].items()]
    if m.get("storage_data") is not None:
        m["storage_data"] = [s if isinstance(s, dict) else {"data": s}
                             for s in m["storage_data"]]
    w = _Writer(storage_align)
    w.b.Finish(w.table("Module", m), file_identifier=b"PTMF")
    return bytes(w.b.Output())


# ---------------------------------------------------- reading back, for patches

def u32(buf: bytes, at: int) -> int:
    return struct.unpack_from("<I", buf, at)[0]


def field_pos(buf: bytes, table: int, fid: int) -> Optional[int]:
    """Absolute position of field ``fid`` of the table at ``table``, None if absent."""
    vt = table - struct.unpack_from("<i", buf, table)[0]
    vt_size = struct.unpack_from("<H", buf, vt)[0]
    if 4 + 2 * fid + 2 > vt_size:
        return None
    off = struct.unpack_from("<H", buf, vt + 4 + 2 * fid)[0]
    return table + off if off else None


def deref(buf: bytes, at: int) -> int:
    return at + u32(buf, at)


def ivalue_slot(buf: bytes, i: int) -> int:
    """Position of the uoffset to ivalue ``i`` in the Module's ivalues vector."""
    vec = deref(buf, field_pos(buf, u32(buf, 0), 4))
    return vec + 4 + 4 * i


def patch(buf: bytes, at: int, fmt: str, *values: Any) -> bytes:
    out = bytearray(buf)
    struct.pack_into(fmt, out, at, *values)
    return bytes(out)


# ------------------------------------------------------------- a valid module

STORAGE0 = np.arange(6, dtype="<f4") * 0.5


def valid_module() -> Dict[str, Any]:
    """A small valid module: root Object (CLASS_WITH_FIELD) with an int, a string, a
    list, a float32 tensor over one storage and a bool; one Function method."""
    ivalues = [
        NoneV(),                                        # 0
        Int(42),                                        # 1
        Str("hello"),                                   # 2
        Double(2.5),                                    # 3
        List([1, 2, 3], "List[Any]"),                   # 4
        Tensor([2, 3], requires_grad=True),             # 5 weight
        Bool(True),                                     # 6 training
        Func("__torch__.M.forward",                     # 7
             instructions=[(2, 0, 1), (8, 0, 0), (0, 0, 0), (12, 0, 0)],
             operators=[{"name": "aten::add", "overload_name": "int",
                         "num_args_serialized": 2}],
             constants=[1], type_annotations=["List[int]"], register_size=2,
             schema={"arguments": [{"name": "self", "type": "__torch__.M"},
                                   {"name": "x", "type": "int", "default_value": 1}],
                     "returns": [{"name": "", "type": "int"}]},
             debug_info={"debug_handle": [10, 11, 12, 13]}, class_type=0),
        Obj(0, [1, 2, 4, 5, 6]),                        # 8 root
    ]
    return {
        "bytecode_version": 9, "operator_version": 7, "state_obj": 8, "methods": [7],
        "ivalues": ivalues, "storage_data_size": 1, "storage_data": [STORAGE0.tobytes()],
        "object_types": [{"type_name": "__torch__.M", "type": CLASS_WITH_FIELD,
                          "attr_names": ["count", "name", "items", "weight", "training"]}],
        "extra_files": {"meta.txt": b"\x00\xffbytes"},
        "jit_sources": {"__torch__": "class M(Module):\n  __parameters__ = [\"weight\", ]\n"
                                     "  __buffers__ = []\n  weight : Tensor\n"},
        "jit_constants": [1], "mobile_ivalue_size": len(ivalues),
    }


def mutated(**changes: Any) -> Dict[str, Any]:
    """A fresh ``valid_module()`` with top-level fields replaced."""
    m = valid_module()
    m.update(changes)
    return m


def list_chain(n: int) -> bytes:
    """ivalues[0] = None, ivalues[k] = List([k-1]) for k = 1..n: nesting depth n.

    Laid out directly (a Builder takes seconds for 100k tables); the same bytes the
    flatbuffers rules give: header, Module vtable + table, ivalues vector, three shared
    vtables, then one 28-byte record per value: IValue table (soffset, val, val_type),
    List table (soffset, items), items vector (count 1, index k-1)."""
    count = n + 1
    vec = 32                              # ivalues vector: count, then uoffsets
    vts = vec + 4 + 4 * count             # IValue vtable, NONE vtable, List vtable
    iv_vt, none_vt, list_vt = vts, vts + 8, vts + 16
    rec = vts + 24 + 28 * np.arange(count, dtype=np.int64)
    words = np.zeros((vts + 24 + 28 * count) // 4, dtype="<u4")
    head = struct.pack("<I4s7H2xiI", 24, b"PTMF", 14, 8, 0, 0, 0, 0, 4, 24 - 8, 4)
    words[:8] = np.frombuffer(head, "<u4")
    words[vec // 4] = count
    words[vec // 4 + 1 + np.arange(count)] = rec - (vec + 4 + 4 * np.arange(count))
    words[vts // 4:vts // 4 + 6] = np.frombuffer(
        struct.pack("<4H3H2x3H2x", 8, 12, 8, 4, 6, 12, 8, 6, 8, 4), "<u4")
    r = rec // 4
    words[r] = rec - np.where(np.arange(count) == 0, none_vt, iv_vt)
    words[r[1:] + 1] = 8                  # val -> List table
    words[r[1:] + 2] = CODE["List"]       # val_type (low byte; padding zero)
    words[r[1:] + 3] = rec[1:] + 12 - list_vt
    words[r[1:] + 4] = 4                  # items -> vector
    words[r[1:] + 5] = 1
    words[r[1:] + 6] = np.arange(n)
    return words.tobytes()
