"""The bounded protobuf reader (pyflatmodule.core.protobuf) on wire bytes written by
protobuf's own rules: the encoding guide's examples, byte for byte, and, where the
``protobuf`` package is installed, messages its encoder writes. Damaged messages raise
WireError at the byte at fault, never another exception."""
from __future__ import annotations

import struct

import pytest

from pyflatmodule.core.protobuf import Message, WireError

# protobuf's encoding guide (protobuf.dev/programming-guides/encoding): a message whose
# field 1 is the varint 150, one whose field 2 is the string "testing", and a packed
# repeated field 4 holding 3, 270, 86942.
VARINT_150 = bytes.fromhex("089601")
STRING_TESTING = bytes.fromhex("120774657374696e67")
PACKED = bytes.fromhex("2206038e029ea705")


def test_the_encoding_guides_examples() -> None:
    assert Message(VARINT_150).varint(1) == 150
    assert Message(STRING_TESTING).text(2) == "testing"
    assert Message(PACKED).varints(4) == [3, 270, 86942]
    # the same values unpacked, as proto2 writes them
    unpacked = bytes.fromhex("2003208e02209ea705")
    assert Message(unpacked).varints(4) == [3, 270, 86942]


def test_a_nested_message_a_map_and_defaults() -> None:
    inner = VARINT_150 + STRING_TESTING
    outer = b"\x1a" + bytes([len(inner)]) + inner
    entry = b"\x0a\x01k" + b"\x12" + bytes([len(inner)]) + inner     # map<string, M>
    m = Message(outer + b"\x2a" + bytes([len(entry)]) + entry)
    assert m.message(3).varint(1) == 150 and m.message(3).text(2) == "testing"
    assert [(k, v.varint(1)) for k, v in m.entries(5)] == [("k", 150)]
    assert not m.has(9) and m.varint(9, 7) == 7 and m.text(9) == "" and m.messages(9) == []
    assert m.message(9).varint(1) == 0


def test_the_last_occurrence_wins_and_int64_is_signed() -> None:
    minus_two = b"\x08" + b"\xfe" + b"\xff" * 8 + b"\x01"   # -2 as int64: 10 bytes
    assert Message(VARINT_150 + minus_two).signed(1) == -2
    assert Message(minus_two + VARINT_150).varint(1) == 150


def test_fixed_width_fields_are_skipped_in_bounds() -> None:
    m = Message(b"\x0d" + struct.pack("<f", 1.5) + b"\x11" + struct.pack("<d", 2.0)
                + VARINT_150.replace(b"\x08", b"\x18"))
    assert m.varint(3) == 150


@pytest.mark.parametrize("data,offset", [
    (b"\x08", 1),                              # a varint cut off
    (b"\x08" + b"\xff" * 10 + b"\x01", 1),     # a varint past 10 bytes
    (b"\x12\x05abc", 0),                       # a string longer than its message
    (b"\x0d\x00\x00", 0),                      # a fixed32 cut off
    (b"\x0b", 0),                              # a group: wire type 3
    (b"\x0f", 0),                              # wire type 7
    (b"\x00\x00", 0),                          # field number 0
])
def test_a_damaged_message_is_a_wire_error_at_the_fault(data: bytes, offset: int) -> None:
    with pytest.raises(WireError) as e:
        Message(data)
    assert e.value.offset == offset


def test_a_field_of_another_wire_type_is_a_wire_error() -> None:
    with pytest.raises(WireError):
        Message(VARINT_150).text(1)
    with pytest.raises(WireError):
        Message(STRING_TESTING).varint(2)


def test_every_truncation_and_byte_of_a_message_is_read_or_refused() -> None:
    """Every cut and every single-byte value at every position of a message with nested
    and repeated fields: read through, or WireError; nothing else."""
    inner = VARINT_150 + STRING_TESTING + PACKED
    data = b"\x1a" + bytes([len(inner)]) + inner + PACKED

    def read(b: bytes) -> None:
        m = Message(b)
        m.varints(4)
        for sub in m.messages(3):
            sub.varint(1), sub.text(2), sub.varints(4)

    for n in range(len(data)):
        try:
            read(data[:n])
        except WireError:
            pass
    for i in range(len(data)):
        for v in range(256):
            try:
                read(data[:i] + bytes([v]) + data[i + 1:])
            except WireError:
                pass


def test_messages_protobufs_encoder_writes() -> None:
    """A well-known message written by the protobuf package (when installed):
    ``google.protobuf.Struct``, a map of Values, read back by field number."""
    pb = pytest.importorskip("google.protobuf.struct_pb2")
    value = pb.Struct()
    value.update({"name": "x", "flag": True, "names": ["a", "bc"]})
    m = Message(value.SerializeToString())
    fields = dict(m.entries(1))                  # Struct.fields: map<string, Value>
    assert sorted(fields) == ["flag", "name", "names"]
    assert fields["name"].text(3) == "x"         # Value.string_value
    assert fields["flag"].varint(4) == 1         # Value.bool_value
    items = fields["names"].message(6).messages(1)   # Value.list_value, ListValue.values
    assert [i.text(3) for i in items] == ["a", "bc"]
