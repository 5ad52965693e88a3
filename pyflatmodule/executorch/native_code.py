"""Native code inside an ExecuTorch file: shared libraries and executables the runtime may
load and run.

Some backends ship compiled code rather than a graph: AOTInductor's (CUDA, Metal) put a
shared library in a program's named data or in its ``.ptd``, and the runtime's backend
loads and runs it. A tool that inspects or admits model files should know: every
delegate payload and named data entry is looked at for an executable image at its start,
by the formats' own magic numbers and the header fields that tell an image's kind:

- ELF (``\\x7fELF``; ``e_type`` at byte 16: relocatable, executable, shared object, core);
- Mach-O (``0xFEEDFACE``/``0xFEEDFACF`` either way round; ``filetype`` at byte 12:
  object, executable, dylib, bundle, ...), and universal binaries (``0xCAFEBABE`` with a
  count of architectures under 20, as Java class files have a version there instead);
- PE (``MZ``, and ``PE\\0\\0`` where ``e_lfanew`` at byte 60 points: a DLL by its
  characteristics' 0x2000 bit, else an executable).

Nothing is loaded or run here; an image is reported where it is, with its size.
"""
from __future__ import annotations

import struct
from typing import Any, Dict, Iterable, List, NamedTuple, Optional, Tuple

from ..core.native import format_error, lib
from ..core.source import Bytes

__all__ = ["IMAGE_HEAD", "NativeImage", "describe_native_code", "find_native_code", "identify",
           "refuse_native_code"]

#: Bytes of a blob's start that tell an image (a PE's header may be further on).
IMAGE_HEAD = 64

_ELF_TYPES = {1: "relocatable object", 2: "executable", 3: "shared object", 4: "core dump"}
_MACHO_TYPES = {1: "object", 2: "executable", 6: "dynamic library", 8: "bundle",
                7: "dynamic linker", 11: "kernel extension"}
_MACHO_MAGIC = {0xFEEDFACE: "<", 0xFEEDFACF: "<", 0xCEFAEDFE: ">", 0xCFFAEDFE: ">"}


class NativeImage(NamedTuple):
    """An executable image found in a file: its format (``ELF``, ``Mach-O``, ``PE``), its
    kind (``shared object``, ``executable``, ...), where it is (``named_data['key']``,
    ``<method>.delegates[<i>]``), the file offset it starts at and the bytes of what
    holds it."""

    format: str
    kind: str
    where: str
    offset: int
    size: int


def identify(data: Bytes) -> Optional[Tuple[str, str]]:
    """(format, kind) of the executable image ``data`` starts with, None if none."""
    head = bytes(data[:IMAGE_HEAD])
    if head[:4] == b"\x7fELF" and len(head) >= 18:
        endian = "<" if head[5] != 2 else ">"
        e_type = struct.unpack_from(endian + "H", head, 16)[0]
        return "ELF", _ELF_TYPES.get(e_type, f"type {e_type}")
    if len(head) >= 16:
        magic = struct.unpack_from("<I", head)[0]
        if magic in _MACHO_MAGIC:
            filetype = struct.unpack_from(_MACHO_MAGIC[magic] + "I", head, 12)[0]
            return "Mach-O", _MACHO_TYPES.get(filetype, f"file type {filetype}")
        if struct.unpack_from(">I", head)[0] == 0xCAFEBABE \
                and 0 < struct.unpack_from(">I", head, 4)[0] < 20:
            return "Mach-O", "universal binary"
    if head[:2] == b"MZ" and len(data) >= IMAGE_HEAD:
        pe = struct.unpack_from("<I", head, 60)[0]
        if pe <= len(data) - 24 and bytes(data[pe:pe + 4]) == b"PE\0\0":
            characteristics = struct.unpack_from("<H", bytes(data[pe + 22:pe + 24]))[0]
            return "PE", "DLL" if characteristics & 0x2000 else "executable"
    return None


def find_native_code(blobs: Iterable[Tuple[str, int, Bytes]]) -> List[NativeImage]:
    """Every image among ``(where, file offset, bytes)``, in the order given."""
    out = []
    for where, offset, data in blobs:
        found = identify(data)
        if found is not None:
            out.append(NativeImage(found[0], found[1], where, offset, len(data)))
    return out


def describe_native_code(images: Iterable[NativeImage]) -> str:
    """In words: ``1 ELF shared object, 13.6 kB, in named_data['kernels/lib.so']``."""
    parts = []
    for i in images:
        parts.append(f"1 {i.format} {i.kind}, {_bytes(i.size)}, in {i.where}")
    return "; ".join(parts)


def refuse_native_code(info: Dict[str, Any]) -> None:
    """Raise FormatError ``native_code`` at the first image an ExecuTorch file's
    ``info()`` lists (``verify`` in strict mode)."""
    images = [NativeImage(**i) for i in info.get("native_code", [])]
    if images:
        raise format_error(lib.ET_E_NATIVE_CODE, images[0].offset, images[0].where,
                           f"the file holds native code: {describe_native_code(images)}")


def _bytes(n: int) -> str:
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} bytes"
