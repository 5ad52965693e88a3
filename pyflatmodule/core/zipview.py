"""A zip archive read in place: its central directory by Python's ``zipfile``, its stored
members as read-only ``memoryview``s of the buffer, never copied.

torch.save writes its archives uncompressed, and so does ``zipfile`` unless asked to
compress: the members that matter are slices of the mapping. A compressed member is
inflated, bounded by its declared size. Every offset and size the directory gives is
checked against the buffer; every fault is a FormatError (``bad_zip``) naming the member
and the byte offset, never an exception of ``zipfile``'s.
"""
from __future__ import annotations

import binascii
import io
import struct
import zipfile
import zlib
from typing import Dict, Iterator, List, NamedTuple, Optional

from ..errors import FormatError
from .native import format_error, lib

__all__ = ["MAX_INFLATED", "MAX_MEMBERS", "Member", "ZipView"]

#: Members an archive may list (torch's archives hold one per storage, plus five).
MAX_MEMBERS = 1 << 20
#: The most bytes a compressed member may inflate to, unless its reader says otherwise.
MAX_INFLATED = 1 << 30
#: A local file header: its fixed part, and its signature.
_LOCAL = struct.Struct("<4sHHHHHIIIHH")
_LOCAL_SIGNATURE = b"PK\x03\x04"
#: The end of central directory record, zip64's, and the locator of zip64's.
_END = struct.Struct("<4s4H2LH")
_END_SIGNATURE = b"PK\x05\x06"
_END64 = struct.Struct("<4sQ2H2L4Q")
_LOCATOR = struct.Struct("<4sLQL")


class Member(NamedTuple):
    """One member of a zip archive, as its local header places it."""

    name: str
    offset: int        #: where its data starts, in the archive
    size: int          #: its size uncompressed
    stored_size: int   #: its size in the archive
    compressed: bool   #: deflated (True) or stored
    crc: int


class _Reader(io.RawIOBase):
    """A seekable read-only file over a buffer, for ``zipfile``'s directory reads (which
    copy the directory, bounded by the buffer, and never the members)."""

    def __init__(self, view: memoryview) -> None:
        super().__init__()
        self._view = view
        self._pos = 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._pos

    def seek(self, offset: int, whence: int = 0) -> int:
        base = (0, self._pos, len(self._view))[whence]
        if base + offset < 0:
            raise OSError("seek before the start of the archive")
        self._pos = base + offset
        return self._pos

    def read(self, size: Optional[int] = -1) -> bytes:
        end = len(self._view) if size is None or size < 0 else min(self._pos + size,
                                                                    len(self._view))
        out = bytes(self._view[self._pos:end]) if end > self._pos else b""
        self._pos = max(self._pos, end)
        return out


class ZipView:
    """The members of the zip archive ``view`` holds, by name, in the order the
    directory lists them. ``where`` names the archive in errors (``etrecord``, a member's
    name); ``base`` is its offset in the file, added to every offset reported."""

    def __init__(self, view: memoryview, where: str, base: int = 0) -> None:
        self.view = view
        self.where = where
        self.base = base
        try:
            with zipfile.ZipFile(_Reader(view)) as z:
                infos = z.infolist()
                self._check_end(len(z.comment), z.start_dir)
        except (zipfile.BadZipFile, OSError, ValueError, EOFError, struct.error,
                NotImplementedError, UnicodeDecodeError, OverflowError) as e:
            # at the end record's place, which zipfile looked for first
            raise self.error(max(0, len(view) - 22),
                             f"its central directory cannot be read ({e})") from None
        if len(infos) > MAX_MEMBERS:
            raise self.error(max(0, len(view) - 22),
                             f"{len(infos)} members, over the limit of {MAX_MEMBERS}")
        self.members: Dict[str, Member] = {}
        for info in infos:
            member = self._member(info)
            if member.name in self.members:
                raise self.error(member.offset, f"member {member.name!r} is listed twice")
            self.members[member.name] = member

    def _check_end(self, comment: int, start_dir: int) -> None:
        """The end record ``zipfile`` found must end the buffer and point at the directory
        as it lies: zipfile also takes an end record followed by bytes it calls a comment,
        and a directory at another place than the record says (data before the archive),
        so a truncated archive holding another (a torch.save member) would read as the
        inner one."""
        end = len(self.view) - _END.size - comment
        if end < 0 or _END.unpack_from(self.view, end)[0] != _END_SIGNATURE:
            raise zipfile.BadZipFile("no end record at the archive's end")
        directory = _END.unpack_from(self.view, end)[6]
        if directory == 0xFFFFFFFF and end >= _LOCATOR.size:   # zip64: the record it locates
            at = _LOCATOR.unpack_from(self.view, end - _LOCATOR.size)[2]
            if at + _END64.size > len(self.view):
                raise zipfile.BadZipFile("zip64 end record outside the archive")
            directory = _END64.unpack_from(self.view, at)[9]
        if directory != start_dir:
            raise zipfile.BadZipFile(f"the central directory is not where the end record "
                                     f"says ({directory}, found at {start_dir})")

    def error(self, offset: Optional[int], why: str, status: int = lib.TS_E_BAD_ZIP,
              member: str = "") -> FormatError:
        """A FormatError in this archive (at ``member`` when given)."""
        path = f"{self.where}[{member!r}]" if member else self.where
        return format_error(status, None if offset is None else self.base + offset, path,
                            f"zip archive {self.where}: {why}")

    def _member(self, info: zipfile.ZipInfo) -> Member:
        name, at = info.filename, info.header_offset
        if info.compress_type not in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED):
            raise self.error(at, f"compression method {info.compress_type} is not read "
                                 f"here (only stored and deflated)", member=name)
        if info.flag_bits & 0x1:
            raise self.error(at, "member is encrypted", member=name)
        if at < 0 or at + _LOCAL.size > len(self.view):
            raise self.error(at, "local header lies outside the archive", member=name)
        head = _LOCAL.unpack_from(self.view, at)
        if head[0] != _LOCAL_SIGNATURE:
            raise self.error(at, "no local header signature where the directory points",
                             member=name)
        start = at + _LOCAL.size + head[9] + head[10]
        if start + info.compress_size > len(self.view):
            raise self.error(at, f"member's {info.compress_size} bytes at {start} reach "
                                 f"past the archive's {len(self.view)}", member=name)
        stored = info.compress_type == zipfile.ZIP_STORED
        if stored and info.compress_size != info.file_size:
            raise self.error(at, f"stored member's sizes differ ({info.compress_size} "
                                 f"in the archive, {info.file_size} uncompressed)",
                             member=name)
        return Member(name, start, info.file_size, info.compress_size, not stored,
                      info.CRC)

    def __iter__(self) -> Iterator[Member]:
        return iter(self.members.values())

    def __len__(self) -> int:
        return len(self.members)

    def names(self) -> List[str]:
        """The members' names, in the directory's order."""
        return list(self.members)

    def head(self, name: str, n: int) -> bytes:
        """The first ``n`` bytes of member ``name`` (fewer when it is shorter), inflated
        when compressed, without reading the rest."""
        m = self.members[name]
        raw = self.view[m.offset:m.offset + m.stored_size]
        if not m.compressed:
            return bytes(raw[:n])
        try:
            return zlib.decompressobj(-zlib.MAX_WBITS).decompress(raw, n)[:min(n, m.size)]
        except zlib.error:
            return b""

    def read(self, name: str, limit: Optional[int] = None, check_crc: bool = False
             ) -> memoryview:
        """Member ``name``'s bytes: a view of the archive when stored, inflated (at most
        its declared size) when compressed. ``limit``: the most bytes accepted (over it,
        ``bad_zip``; a compressed member is bounded by MAX_INFLATED when no limit is
        given); ``check_crc``: compare the CRC-32 (always done for inflated members)."""
        m = self.members[name]
        if limit is None and m.compressed:
            limit = MAX_INFLATED
        if limit is not None and m.size > limit:
            raise self.error(m.offset, f"member is {m.size} bytes, over the limit of "
                                       f"{limit}", member=name)
        raw = self.view[m.offset:m.offset + m.stored_size]
        if m.compressed:
            inflate = zlib.decompressobj(-zlib.MAX_WBITS)
            try:
                out = inflate.decompress(raw, m.size) if m.size else b""
            except zlib.error as e:
                raise self.error(m.offset, f"member does not inflate ({e})",
                                 member=name) from None
            if len(out) != m.size or inflate.unconsumed_tail:
                raise self.error(m.offset, f"member inflates to other than its declared "
                                           f"{m.size} bytes", member=name)
            data = memoryview(out)
            check_crc = True
        else:
            data = raw
        if check_crc and binascii.crc32(data) != m.crc:
            raise self.error(m.offset, "member's CRC-32 does not match its bytes",
                             member=name)
        return data
