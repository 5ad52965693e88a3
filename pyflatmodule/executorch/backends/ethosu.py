"""Arm Ethos-U delegate payloads: the ``vela_bin_stream`` described, the command stream
and weights the Vela compiler wrote kept as bytes.

ExecuTorch's Ethos-U backend (``EthosUBackend``, ExecuTorch 1.5.1,
backends/arm/arm_vela.py ``vela_compile``; read by the runtime's
backends/arm/runtime/VelaBinStream.cpp as it stands since external blocks came in, the
format the 1.5.1 wheel's arm_vela.py writes) packs what Vela compiled as a stream of blocks,
each a 32-byte header (its name, NUL-padded to 16 bytes; its size, u32; an external flag,
u8; 11 reserved bytes) and its data, padded to 16 bytes. The blocks are, in order:
``vela_bin_stream`` (empty, the stream's mark), ``cmd_data`` (the NPU's command stream,
starting ``COP1`` or ``COP2``), ``weight_data``, ``scratch_size`` (u32: the bytes of
scratch memory the runtime provides), ``inputs`` and ``outputs`` (an i32 count, then per
tensor six i32 dims, its element size, its offset in the scratch memory and its region)
and ``vela_end_stream`` (empty, ending the payload). A block whose external flag is 1
holds, instead of its bytes, the 64-character key of named data that does (a program
written with ``VelaExternalBlockPlacements``: the command stream or the weights in a
``.ptd``).

Everything the runtime reads is checked when the payload is read: each block inside the
payload and known to the runtime (by the name's prefix, as it compares them), the stream
mark first and the end mark ending the payload, the command stream's magic, the scratch
size and I/O lists within their blocks, an external block's key; a fault is FormatError
``bad_block`` or ``bad_contents``, located in the payload. A payload that does not start
with the stream's mark (another writer's) stays bytes. The command stream is the NPU's
own format: no operator or weight is listed.
"""
from __future__ import annotations

import struct
from typing import Any, Dict, List, NamedTuple, Optional, Tuple

from ...core.native import format_error, lib
from ...core.source import Bytes
from .base import Backend, DescribedGraph, Payload

__all__ = ["BACKEND", "VelaBlock", "VelaIO", "VelaStream"]

#: The stream's first and last blocks' names.
STREAM_HEADER = "vela_bin_stream"
STREAM_FOOTER = "vela_end_stream"
#: The names the runtime knows, in the order it compares a block's name with them (each
#: as a prefix of the block's name: ``strncmp(name, known, strlen(known))``).
KNOWN = (STREAM_HEADER, "cmd_data", "weight_data", "scratch_size", "inputs", "outputs",
         STREAM_FOOTER)
_BLOCK = struct.Struct("<16sIB11s")
_IO = struct.Struct("<9i")
#: The length of an external block's key (a SHA-256 digest in hex).
KEY_LENGTH = 64


def _pad16(n: int) -> int:
    return (n + 15) & ~15


class VelaBlock(NamedTuple):
    """One block of the stream: its name as stored (up to its first NUL), the name the
    runtime takes it for (:data:`KNOWN`), where its data starts in the payload, its size
    (unpadded; an external block's is its key's) and, for an external block, the named
    data key that holds its bytes."""

    name: str
    kind: str
    offset: int
    size: int
    key: Optional[str]

    @property
    def external(self) -> bool:
        """Whether its bytes are named data (:attr:`key`) rather than in the payload."""
        return self.key is not None


class VelaIO(NamedTuple):
    """One input or output of the command stream, as Vela placed it: its six dims, its
    element size in bytes, its offset in the scratch memory and the region it is in."""

    shape: Tuple[int, ...]
    elem_size: int
    offset: int
    region: int

    def as_json(self) -> Dict[str, Any]:
        """The descriptor as JSON data."""
        return {"shape": list(self.shape), "elem_size": self.elem_size,
                "offset": self.offset, "region": self.region}


class VelaStream(DescribedGraph):
    """The ``vela_bin_stream`` of one Ethos-U payload (checked when made): its blocks,
    the command stream and weights (read-only bytes), the scratch size and the inputs'
    and outputs' descriptors; a graph with no nodes, values or constants
    (:class:`DelegateGraph`), for the command stream is not read.

    An external block's key must be in the program or in the data files given to ``load``
    when some were given (else FormatError ``missing_data``); without data files, a key no
    file holds is listed in :attr:`missing` (by the block's index) and its bytes are None.
    """

    def __init__(self, payload: Payload) -> None:
        self._where = payload.where + ".processed<EthosU>"
        self._offset = payload.offset
        data = payload.data
        #: The blocks in the payload's order
        self.blocks: List[VelaBlock] = []
        #: Block index -> the named data key no file given holds (loaded without data files)
        self.missing: Dict[int, str] = {}
        self._bytes: Dict[int, Optional[Bytes]] = {}
        at = 0
        while True:
            if at == len(data):
                raise self._error(lib.EU_E_BAD_BLOCK, at, f"blocks[{len(self.blocks)}]",
                                  f"the stream ends at byte {at} without its "
                                  f"{STREAM_FOOTER} block")
            block = self._block(payload, at)
            at = block.offset + _pad16(block.size)
            if block.kind == STREAM_FOOTER:
                if at != len(data):
                    raise self._error(lib.EU_E_BAD_BLOCK, block.offset - 32,
                                      f"blocks[{len(self.blocks) - 1}]",
                                      f"{STREAM_FOOTER} ends at byte {at}, the payload "
                                      f"at byte {len(data)}")
                break
        found = {b.kind: i for i, b in enumerate(self.blocks)}   # the last of each, as read
        self._found = found
        scratch = self._contents(found, "scratch_size")
        #: The scratch memory the runtime provides, in bytes (None without the block)
        self.scratch_size: Optional[int] = (
            None if scratch is None else struct.unpack("<I", bytes(scratch[0:4]))[0])
        #: The inputs' descriptors, in the delegate call's order
        self.inputs: List[VelaIO] = self._ios(found, "inputs")
        #: The outputs' descriptors
        self.outputs: List[VelaIO] = self._ios(found, "outputs")

    # --------------------------------------------------------------- reading the blocks

    def _error(self, code: int, at: int, field: str, message: str) -> Exception:
        return format_error(code, self._offset + at, f"{self._where}.{field}", message)

    def _block(self, payload: Payload, at: int) -> VelaBlock:
        """The block whose header starts at byte ``at``, checked and kept."""
        data = payload.data
        index = len(self.blocks)
        field = f"blocks[{index}]"
        if len(data) - at < _BLOCK.size:
            raise self._error(lib.EU_E_BAD_BLOCK, at, field,
                              f"a block header needs {_BLOCK.size} bytes, "
                              f"{len(data) - at} are left")
        raw_name, size, flag, _ = _BLOCK.unpack_from(data, at)
        name = raw_name.split(b"\0", 1)[0].decode("latin-1")
        start = at + _BLOCK.size
        if _pad16(size) > len(data) - start:
            raise self._error(lib.EU_E_BAD_BLOCK, at + 16, field + ".size",
                              f"block {name!r} of {size} bytes from byte {start} reaches "
                              f"past the payload's {len(data)} bytes")
        kind = next((k for k in KNOWN if name.startswith(k)), None)
        if kind is None:
            raise self._error(lib.EU_E_BAD_BLOCK, at, field + ".name",
                              f"block name {name!r} is none the runtime knows")
        if (kind == STREAM_HEADER) != (index == 0):
            raise self._error(lib.EU_E_BAD_BLOCK, at, field + ".name",
                              f"block {name!r} at position {index}: the stream starts "
                              f"with {STREAM_HEADER} and has one")
        key = None
        content: Optional[Bytes] = data[start:start + size]
        if flag == 1:   # kVelaExternalBlockReference: any other value is inline
            if size != KEY_LENGTH:
                raise self._error(lib.EU_E_BAD_CONTENTS, at + 16, field + ".size",
                                  f"external block {name!r} holds a {size}-byte key, "
                                  f"not {KEY_LENGTH}")
            key = bytes(data[start:start + size]).decode("latin-1")
            content = payload.resolve(key)
            if content is None:
                if payload.require_all:
                    raise format_error(lib.ET_E_MISSING_DATA, self._offset + start,
                                       f"{self._where}.{field}.key",
                                       f"Ethos-U block {name!r}: named data {key!r} is "
                                       "in none of the files")
                self.missing[index] = key
        self._bytes[index] = content
        block = VelaBlock(name, kind, start, size, key)
        self.blocks.append(block)
        self._check_contents(block, content, field)
        return block

    def _check_contents(self, block: VelaBlock, content: Optional[Bytes], field: str
                        ) -> None:
        """What the runtime reads of a block's bytes without checking: the command
        stream's magic, the scratch size, the I/O count and descriptors."""
        if content is None:
            return
        n = len(content)
        if block.kind == "cmd_data" and bytes(content[0:4]) not in (b"COP1", b"COP2"):
            raise self._error(lib.EU_E_BAD_CONTENTS, block.offset, field,
                              f"the command stream starts {bytes(content[0:4])!r}, not "
                              "COP1 or COP2")
        if block.kind == "scratch_size" and n < 4:
            raise self._error(lib.EU_E_BAD_CONTENTS, block.offset, field,
                              f"the scratch size needs 4 bytes, the block holds {n}")
        if block.kind in ("inputs", "outputs"):
            count = struct.unpack("<i", bytes(content[0:4]))[0] if n >= 4 else -1
            if count < 0 or count > (n - 4) // _IO.size:
                raise self._error(lib.EU_E_BAD_CONTENTS, block.offset, field,
                                  f"{block.kind}: {n} bytes do not hold a count and "
                                  f"{max(count, 0)} descriptors of {_IO.size} bytes")

    def _contents(self, found: Dict[str, int], kind: str) -> Optional[Bytes]:
        i = found.get(kind)
        return None if i is None else self._bytes[i]

    def _ios(self, found: Dict[str, int], kind: str) -> List[VelaIO]:
        content = self._contents(found, kind)
        if content is None:
            return []
        raw = bytes(content[0:len(content)])
        (count,) = struct.unpack_from("<i", raw, 0)
        out = []
        for k in range(count):
            *shape, elem_size, offset, region = _IO.unpack_from(raw, 4 + k * _IO.size)
            out.append(VelaIO(tuple(shape), elem_size, offset, region))
        return out

    # ------------------------------------------------------------------ the description

    @property
    def command_stream(self) -> Optional[memoryview]:
        """The NPU's command stream (``COP1``/``COP2`` and Vela's commands), read-only;
        None when its named data is missing or there is none. Bytes kept in named data
        are read when asked for."""
        return self._view("cmd_data")

    @property
    def weights(self) -> Optional[memoryview]:
        """The weights the command stream reads (Vela's encoding), read-only; None when
        missing or absent."""
        return self._view("weight_data")

    def _view(self, kind: str) -> Optional[memoryview]:
        content = self._contents(self._found, kind)
        return None if content is None else content[0:len(content)]

    @property
    def header(self) -> Dict[str, Any]:
        """The stream as JSON data: each block's name, size and key (None when inline),
        the command stream's and weights' sizes, the scratch size, the inputs' and
        outputs' descriptors."""
        def size(kind: str) -> Optional[int]:
            b = self._contents(self._found, kind)
            return None if b is None else len(b)
        return {"blocks": [{"name": b.name, "size": b.size, "key": b.key}
                           for b in self.blocks],
                "command_stream_size": size("cmd_data"),
                "weight_size": size("weight_data"), "scratch_size": self.scratch_size,
                "inputs": [io.as_json() for io in self.inputs],
                "outputs": [io.as_json() for io in self.outputs]}

    @property
    def description(self) -> str:
        """The command stream's, weights' and scratch memory's sizes and the inputs' and
        outputs' shapes and element sizes."""
        def size(kind: str) -> str:
            b = self._contents(self._found, kind)
            i = self._found.get(kind)
            return ("absent" if i is None else f"missing (named data {self.blocks[i].key})"
                    if b is None else f"{len(b):,} bytes")

        def ios(items: List[VelaIO]) -> str:
            return ", ".join(f"{list(io.shape)} x {io.elem_size} B" for io in items)
        scratch = "absent" if self.scratch_size is None else f"{self.scratch_size:,} bytes"
        return (f"command stream {size('cmd_data')}, weights {size('weight_data')}, "
                f"scratch {scratch}; inputs {ios(self.inputs)} -> outputs "
                f"{ios(self.outputs)}")

    @property
    def version(self) -> str:
        """The command stream's magic (``COP1``, ``COP2``), empty when it is not here."""
        cs = self._contents(self._found, "cmd_data")
        return "" if cs is None else bytes(cs[0:4]).decode("latin-1")

    def __repr__(self) -> str:
        cs = self._contents(self._found, "cmd_data")
        return (f"<VelaStream: {len(self.blocks)} blocks, command stream "
                f"{'missing' if cs is None else f'{len(cs):,} bytes'}, "
                f"{len(self.inputs)} inputs, {len(self.outputs)} outputs>")


def _read(payload: Payload) -> Optional[VelaStream]:
    """An ``EthosUBackend`` delegate's stream; None (opaque bytes) without its mark."""
    if bytes(payload.data[0:16]) != STREAM_HEADER.encode() + b"\0":
        return None
    return VelaStream(payload)


#: Ethos-U's entry in the backend registry.
BACKEND = Backend("EthosUBackend", "Ethos-U", "ethosu", _read)
