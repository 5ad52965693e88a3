"""Turning a path, buffer or file into bytes the C core can read in place.

The returned ``Source`` holds the Python buffer (an mmap, bytes, bytearray...).
Numpy arrays made from it keep it, and therefore the mapping, alive for as long
as they exist; nothing closes the mapping while any view is alive.
"""
from __future__ import annotations

import io
import mmap
import os
from typing import Any, BinaryIO, Iterable, List, Optional, Tuple, Union

from .errors import FormatError

_MADV_RANDOM = getattr(mmap, "MADV_RANDOM", None)
_MADV_NORMAL = getattr(mmap, "MADV_NORMAL", None)

SourceLike = Union[str, "os.PathLike[str]", bytes, bytearray, memoryview, mmap.mmap, BinaryIO]

__all__ = ["Source", "SourceLike", "advise_storages", "open_source"]


class Source:
    """One buffer holding a whole file, with what is known about where it came from."""

    __slots__ = ("obj", "name", "mapped", "stat")

    def __init__(self, obj: Any, name: str, mapped: bool,
                 stat: Optional[os.stat_result] = None) -> None:
        if isinstance(obj, memoryview) and (obj.ndim != 1 or obj.itemsize != 1):
            obj = obj.cast("B")
        # The object itself, not a memoryview of it, is what every consumer
        # exports from: views then depend on nothing but the object they keep.
        self.obj = obj
        self.name = name
        self.mapped = mapped
        self.stat = stat

    def __len__(self) -> int:
        return len(self.obj) if not isinstance(self.obj, memoryview) else self.obj.nbytes


def _map_fd(fd: int, name: str) -> Source:
    st = os.fstat(fd)
    if st.st_size == 0:
        # mmap refuses empty files; an empty buffer gets the verifier's error.
        return Source(b"", name, False, st)
    mm = mmap.mmap(fd, 0, access=mmap.ACCESS_READ)
    if _MADV_RANDOM is not None:
        # Before anything is read: metadata faults must not read ahead into tensor
        # data (readahead windows reach megabytes). Storage ranges get normal
        # readahead back once the index knows where they are.
        mm.madvise(_MADV_RANDOM)
    return Source(mm, name, True, st)


def advise_storages(source: Source, ranges: Iterable[Tuple[int, int]]) -> None:
    """Give the pages inside tensor payloads normal readahead again."""
    if not source.mapped or _MADV_NORMAL is None:
        return
    page = mmap.PAGESIZE
    merged: List[List[int]] = []
    for pos, size in sorted(ranges):
        if size < page:
            continue
        if merged and pos - merged[-1][1] < page:
            merged[-1][1] = max(merged[-1][1], pos + size)
        else:
            merged.append([pos, pos + size])
    for start, end in merged:
        start = -(-start // page) * page
        end = end // page * page
        if end > start:
            source.obj.madvise(_MADV_NORMAL, start, end - start)


def open_source(source: SourceLike, copy: bool = False) -> Source:
    """Make a Source from any of the inputs ``load`` accepts."""
    if isinstance(source, (str, os.PathLike)):
        name = os.fspath(source)
        with open(name, "rb") as f:
            if copy:
                return Source(f.read(), name, False, os.fstat(f.fileno()))
            return _map_fd(f.fileno(), name)
    if isinstance(source, (bytes, bytearray, memoryview, mmap.mmap)):
        if copy:
            return Source(bytes(source), "<bytes>", False)
        if isinstance(source, memoryview) and not source.c_contiguous:
            raise FormatError("bad_argument", "memoryview source must be contiguous")
        return Source(source, f"<{type(source).__name__}>", False)
    read = getattr(source, "read", None)
    if read is None:
        raise TypeError(f"cannot load a PTMF model from {type(source).__name__}")
    name = str(getattr(source, "name", "<file>"))
    if not copy:
        try:
            fd = source.fileno()
        except (AttributeError, OSError, io.UnsupportedOperation):
            fd = None
        if fd is not None:
            return _map_fd(fd, name)
    data = read()
    if not isinstance(data, (bytes, bytearray)):
        raise TypeError("file object must be opened in binary mode")
    return Source(bytes(data), name, False)
