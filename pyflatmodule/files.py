"""``load``: one entry point for every format, chosen by the file's identifier, and
``verify``. The one place the load options are spelled as keywords: each becomes an
:class:`~pyflatmodule.core.options.Options`, handed down to the format's opener."""
from __future__ import annotations

import mmap
import os
from typing import Any, Optional, Sequence, Tuple, Union

from .core.options import Options
from .core.source import SourceLike
from .executorch import BundledProgram, DataFile, Program, open_bundled, open_executorch
from .ptmf import Module, VerifyReport, open_module, verify_module

__all__ = ["file_format", "load", "verify"]

#: File identifiers (bytes 4..8) of the formats ExecuTorch writes.
EXECUTORCH = (b"ET12", b"FT01")
#: What each identifier names.
FORMATS = {b"PTMF": "ptmf", b"ET12": "pte", b"FT01": "ptd", b"BP08": "bpte"}


def _identify(source: SourceLike) -> Tuple[bytes, SourceLike]:
    """The file identifier of ``source``, and the source to open (a file object that
    cannot seek is read into bytes here)."""
    if isinstance(source, (str, os.PathLike)):
        with open(source, "rb") as f:
            return f.read(8)[4:8], source
    if isinstance(source, (bytes, bytearray, memoryview, mmap.mmap)):
        return bytes(memoryview(source).cast("B")[4:8]) if len(source) >= 8 else b"", source
    if not hasattr(source, "read"):
        return b"", source   # the PTMF loader names what it cannot read
    seekable = getattr(source, "seekable", None)
    if seekable is not None and seekable():
        start = source.tell()
        head = source.read(8)
        source.seek(start)
        return bytes(head[4:8]), source
    data = source.read()
    if not isinstance(data, (bytes, bytearray)):
        raise TypeError("file object must be opened in binary mode")
    return bytes(data[4:8]), bytes(data)


def file_format(path: str) -> str:
    """``"ptmf"``, ``"pte"``, ``"ptd"`` or ``"bpte"`` by the file's identifier,
    ``"unknown"`` for any other file (reads 8 bytes; OSError if the path cannot be
    read)."""
    with open(path, "rb") as f:
        return FORMATS.get(f.read(8)[4:8], "unknown")


def load(source: SourceLike, *, data: Sequence[Any] = (), verify: bool = True,
         copy: bool = False, strict: bool = False, advise: Optional[str] = None,
         populate: bool = False, max_depth: int = 200, max_tables: int = 0,
         max_elements: int = 0) -> Union[Module, Program, DataFile, BundledProgram]:
    """Open a model file without copying it; what comes back depends on the file.

    A PyTorch Mobile flatbuffer (identifier ``PTMF``, ``.ptl``/``.ff``) gives a
    :class:`Module`, an ExecuTorch program (``ET12``, ``.pte``) a :class:`Program`, an
    ExecuTorch data file (``FT01``, ``.ptd``) a :class:`DataFile`, an ExecuTorch bundled
    program (``BP08``, ``.bpte``) a :class:`BundledProgram`.

    Args:
        source: a path (mapped read-only), ``bytes``, ``bytearray``, ``memoryview``,
            ``mmap.mmap`` (used in place and kept alive) or a binary file object.
        data: for a program, the data files (paths, sources or opened DataFiles) that
            hold its external tensors, searched in order by the tensors' names.
        verify, copy, strict, advise, populate, max_depth, max_tables, max_elements:
            as :class:`~pyflatmodule.core.options.Options` documents them. ExecuTorch
            files are always checked in full when opened; ``verify`` adds alignment,
            NUL and UTF-8 checks.

    Raises:
        FormatError: the bytes are not a valid file of any of these formats.
        OSError: the path cannot be opened.
        ValueError: an option is out of range, or ``data`` given for a non-program.
    """
    ident, source = _identify(source)
    if data and ident in (b"PTMF", b"BP08"):   # any other identifier: the loader's error
        raise ValueError("data= is for ExecuTorch programs (.pte)")
    options = Options(verify=verify, copy=copy, strict=strict, advise=advise,
                      populate=populate, max_depth=max_depth, max_tables=max_tables,
                      max_elements=max_elements)
    if ident in EXECUTORCH:
        return open_executorch(source, options, data)
    if ident == b"BP08":
        return open_bundled(source, options)
    return open_module(source, options)


def verify(source: SourceLike, *, strict: bool = False, max_depth: int = 200,
           max_tables: int = 0, max_elements: int = 0) -> VerifyReport:
    """Check a whole file and return a short report; raise FormatError if it is bad."""
    return verify_module(source, Options(strict=strict, max_depth=max_depth,
                                         max_tables=max_tables, max_elements=max_elements))
