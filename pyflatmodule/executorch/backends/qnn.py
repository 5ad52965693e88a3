"""QNN delegate payloads (Qualcomm AI Engine Direct): described, their context binary kept
as bytes.

ExecuTorch's QNN backend (``QnnBackend``) frames the context binary Qualcomm's SDK writes
with its own header, ``QnnContextCustomProtocol`` (ExecuTorch 1.5.1,
backends/qualcomm/runtime/backends/QnnCustomProtocol.cpp): the magic ``0x5678ABCD``
(u32), a signature (i64, the writer's clock in nanoseconds), the binary's size (u64),
zeros to byte 256, then the binary. The runtime hands the binary to the SDK by that
size, unchecked: a size past the payload is refused here. A payload without the magic
(an older writer's) is left as bytes, as the runtime's own reader would refuse it only
when the method loads. The binary is Qualcomm's format, read by nothing here: its graph,
tensors and weights are not listed.
"""
from __future__ import annotations

import struct
from typing import Dict, Optional

from ...core.native import format_error, lib
from .base import Backend, DescribedGraph, Payload

__all__ = ["BACKEND", "QnnContext"]

MAGIC = 0x5678ABCD
#: Where the context binary starts (QNN_CTX_BIN_ALIGNMENT).
BINARY_OFFSET = 256
_HEADER = struct.Struct("<IqQ")


class QnnContext(DescribedGraph):
    """The header of one QNN payload and the context binary it frames (a read-only view);
    a graph with no nodes, values or constants (:class:`DelegateGraph`), for the binary
    is not read."""

    def __init__(self, payload: Payload) -> None:
        data = payload.data
        _, signature, size = _HEADER.unpack_from(data, 0)
        if len(data) < BINARY_OFFSET or size > len(data) - BINARY_OFFSET:
            raise format_error(lib.QNN_E_BAD_HEADER, payload.offset + 12,
                               payload.where + ".processed<QNN>.header",
                               f"the context binary ({size} bytes from byte "
                               f"{BINARY_OFFSET}) reaches past the payload's "
                               f"{len(data)} bytes")
        #: The writer's signature (its clock when it wrote the payload, in nanoseconds)
        self.signature: int = signature
        #: The context binary, Qualcomm's format, as the runtime hands it to the SDK
        self.binary: memoryview = data[BINARY_OFFSET:BINARY_OFFSET + size]
        #: Value id -> named data key no file holds: QNN payloads name none
        self.missing: Dict[int, str] = {}

    @property
    def header(self) -> Dict[str, int]:
        """The payload's header: magic, signature, the binary's offset and size."""
        return {"magic": MAGIC, "signature": self.signature,
                "binary_offset": BINARY_OFFSET, "binary_size": len(self.binary)}

    @property
    def description(self) -> str:
        """The context binary's size and signature."""
        return (f"a {len(self.binary):,}-byte Qualcomm context binary, signature "
                f"{self.signature}")

    @property
    def version(self) -> str:
        """Empty: the header carries no version."""
        return ""

    def __repr__(self) -> str:
        return f"<QnnContext: a {len(self.binary):,}-byte context binary>"


def _read(payload: Payload) -> Optional[QnnContext]:
    """A ``QnnBackend`` delegate's header; None (opaque bytes) without the magic."""
    data = payload.data
    if len(data) < _HEADER.size or struct.unpack_from("<I", data, 0)[0] != MAGIC:
        return None
    return QnnContext(payload)


#: QNN's entry in the backend registry.
BACKEND = Backend("QnnBackend", "QNN", "qnn", _read)
