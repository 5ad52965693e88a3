"""A flatbuffer walked by hand, for making bad inputs from real files' bytes without the
reader under test: fields by their schema position, vectors of tables, and a field made
absent by giving its table a private copy of the vtable with the field's slot zeroed."""
from __future__ import annotations

import struct
from typing import Optional, Sequence


def u32(data: bytes, at: int) -> int:
    """The little-endian uint32 at ``at``."""
    return int(struct.unpack_from("<I", data, at)[0])


def root(data: bytes) -> int:
    """Position of the root table (the uoffset at byte 0)."""
    return u32(data, 0)


def slot(data: bytes, table: int, field: int) -> int:
    """Byte position of field ``field``'s vtable slot of the table at ``table``."""
    vtable = table - struct.unpack_from("<i", data, table)[0]
    return vtable + 4 + 2 * field


def field(data: bytes, table: int, field_id: int) -> int:
    """Position of field ``field_id`` of the table at ``table`` (0 when absent: its slot
    zero, or past the end of the vtable)."""
    at = slot(data, table, field_id)
    vtable = at - 4 - 2 * field_id
    if at + 2 > vtable + struct.unpack_from("<H", data, vtable)[0]:
        return 0
    off = struct.unpack_from("<H", data, at)[0]
    return table + off if off else 0


def deref(data: bytes, at: int) -> int:
    """Where the uoffset at ``at`` points."""
    return at + u32(data, at)


def element(data: bytes, table: int, field_id: int, i: int) -> int:
    """Table ``i`` of the vector-of-tables field ``field_id``."""
    vec = deref(data, field(data, table, field_id))
    return deref(data, vec + 4 + 4 * i)


def zero_slot(data: bytes, table: int, field_id: int, spare: Optional[int] = None) -> bytes:
    """``data`` with field ``field_id`` of the table at ``table`` absent: the table gets a
    copy of its vtable (writers share vtables between tables of one shape) with the
    field's slot zeroed, written at ``spare`` (free bytes inside the flatbuffer; appended
    to the file when None)."""
    vtable = table - struct.unpack_from("<i", data, table)[0]
    size = struct.unpack_from("<H", data, vtable)[0]
    out = bytearray(data)
    if spare is None:
        out += bytes(len(out) % 2)
        spare = len(out)
        out += bytes(size)
    out[spare:spare + size] = data[vtable:vtable + size]
    struct.pack_into("<i", out, table, table - spare)
    struct.pack_into("<H", out, spare + 4 + 2 * field_id, 0)
    return bytes(out)


def grow(data: bytes, end: int, sizes: Sequence[int], room: int = 4096) -> bytes:
    """``data`` with ``room`` zero bytes inserted at ``end`` (the end of the flatbuffer, where
    a header says segments follow), and each little-endian uint64 header field at
    ``sizes`` (the flatbuffer's size, where the segments start) moved by ``room``."""
    out = bytearray(data[:end]) + bytes(room) + data[end:]
    for at in sizes:
        struct.pack_into("<Q", out, at, struct.unpack_from("<Q", out, at)[0] + room)
    return bytes(out)
