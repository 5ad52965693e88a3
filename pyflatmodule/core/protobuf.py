"""A small bounds-checked reader of Protocol Buffers' wire format.

Some payloads inside a model file are protobuf messages (a Core ML delegate's model
spec). This reads the fields a format needs and nothing else: every length and varint is
checked against the message it lies in, nesting is bounded, and a fault raises
:class:`WireError` with the byte offset (the format's reader turns it into its
FormatError). Fields are read by number; unknown fields are skipped, as protobuf's
readers skip them."""
from __future__ import annotations

from typing import Any, Dict, Iterator, List, NamedTuple, Tuple

__all__ = ["Field", "Message", "WireError"]

_VARINT, _I64, _LEN, _I32 = 0, 1, 2, 5


class WireError(ValueError):
    """A message that is not protobuf's wire format: ``offset`` is where, in the buffer."""

    def __init__(self, reason: str, offset: int) -> None:
        super().__init__(f"{reason} (byte {offset})")
        self.reason = reason
        self.offset = offset


class Field(NamedTuple):
    """One field as stored: its number, wire type, and its value (a varint's or fixed
    field's integer) or, for a length-delimited field, where its bytes start and end."""

    number: int
    wire: int
    value: int
    start: int
    end: int


def _varint(buf: memoryview, pos: int, end: int) -> Tuple[int, int]:
    """The varint at ``pos`` (at most 10 bytes, inside ``end``) and the position after it."""
    out = shift = 0
    for i in range(pos, min(pos + 10, end)):
        b = buf[i]
        out |= (b & 0x7F) << shift
        if not b & 0x80:
            return out & 0xFFFFFFFFFFFFFFFF, i + 1
        shift += 7
    raise WireError("varint runs past its message or past 10 bytes", pos)


class Message:
    """The message held by ``buf[start:end]``, read lazily by field number."""

    __slots__ = ("buf", "start", "end", "_fields")

    def __init__(self, buf: Any, start: int = 0, end: int = -1) -> None:
        self.buf = memoryview(buf).cast("B") if not isinstance(buf, memoryview) else buf
        self.start = start
        self.end = len(self.buf) if end < 0 else end
        if not 0 <= self.start <= self.end <= len(self.buf):
            raise WireError("message lies outside its buffer", start)
        self._fields: Dict[int, List[Field]] = {}
        for f in self._scan():
            self._fields.setdefault(f.number, []).append(f)

    def _scan(self) -> Iterator[Field]:
        pos, end, buf = self.start, self.end, self.buf
        while pos < end:
            key, at = _varint(buf, pos, end)
            number, wire = key >> 3, key & 7
            if number == 0 or number >= 1 << 29:
                raise WireError(f"field number {number} is out of range", pos)
            if wire == _VARINT:
                value, nxt = _varint(buf, at, end)
                yield Field(number, wire, value, at, nxt)
            elif wire in (_I64, _I32):
                size = 8 if wire == _I64 else 4
                if at + size > end:
                    raise WireError(f"field {number} runs past its message", pos)
                value = int.from_bytes(buf[at:at + size], "little")
                nxt = at + size
                yield Field(number, wire, value, at, nxt)
            elif wire == _LEN:
                n, at = _varint(buf, at, end)
                if n > end - at:
                    raise WireError(f"field {number}'s length {n} runs past its message", pos)
                nxt = at + n
                yield Field(number, wire, n, at, nxt)
            else:   # groups (3, 4) and 6, 7: no format read here uses them
                raise WireError(f"field {number} has wire type {wire}", pos)
            pos = nxt

    def _all(self, number: int, wire: int) -> List[Field]:
        got = self._fields.get(number, [])
        for f in got:
            if f.wire != wire:
                raise WireError(f"field {number} has wire type {f.wire}, not {wire}", f.start)
        return got

    def has(self, number: int) -> bool:
        """Whether field ``number`` is present."""
        return number in self._fields

    def varint(self, number: int, default: int = 0) -> int:
        """A varint field (the last occurrence, as protobuf's readers take it)."""
        got = self._all(number, _VARINT)
        return got[-1].value if got else default

    def signed(self, number: int, default: int = 0) -> int:
        """A varint field read as a two's complement int64 (protobuf's int32, int64)."""
        v = self.varint(number, default)
        return v - (1 << 64) if v >= 1 << 63 else v

    def varints(self, number: int) -> List[int]:
        """A repeated int64 field, packed or not, as signed values."""
        out: List[int] = []
        for f in self._fields.get(number, []):
            if f.wire == _VARINT:
                out.append(f.value)
            elif f.wire == _LEN:
                pos = f.start
                while pos < f.end:
                    v, pos = _varint(self.buf, pos, f.end)
                    out.append(v)
            else:
                raise WireError(f"field {number} has wire type {f.wire}", f.start)
        return [v - (1 << 64) if v >= 1 << 63 else v for v in out]

    def data(self, number: int) -> memoryview:
        """A length-delimited field's bytes (the last occurrence), empty when absent."""
        got = self._all(number, _LEN)
        return self.buf[got[-1].start:got[-1].end] if got else self.buf[0:0]

    def text(self, number: int) -> str:
        """A string field, decoded as UTF-8 with any other byte kept (surrogateescape)."""
        return str(self.data(number), "utf-8", "surrogateescape")

    def texts(self, number: int) -> List[str]:
        """A repeated string field."""
        return [str(self.buf[f.start:f.end], "utf-8", "surrogateescape")
                for f in self._all(number, _LEN)]

    def message(self, number: int) -> "Message":
        """A message field (the last occurrence; an empty message when absent)."""
        got = self._all(number, _LEN)
        if not got:
            return Message(self.buf, 0, 0)
        return Message(self.buf, got[-1].start, got[-1].end)

    def messages(self, number: int) -> List["Message"]:
        """A repeated message field."""
        return [Message(self.buf, f.start, f.end) for f in self._all(number, _LEN)]

    def entries(self, number: int) -> List[Tuple[str, "Message"]]:
        """A ``map<string, Message>`` field: its (key, value) entries in file order."""
        return [(e.text(1), e.message(2)) for e in self.messages(number)]
