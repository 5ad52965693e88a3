"""``load``: one entry point for every format, chosen by the file's identifier; the typed
loaders ``load_module``, ``load_program``, ``load_data``, ``load_bundled`` and
``load_etdump``, which accept their format only; and ``verify``. The one place the load
options are spelled as keywords: each becomes an
:class:`~pyflatmodule.core.options.Options`, handed down to the format's opener."""
from __future__ import annotations

import dataclasses
import mmap
import os
from typing import Any, Dict, Optional, Sequence, Tuple, Type, TypeVar, Union

from .core.native import format_error, lib
from .core.options import Options
from .core.source import Openable, OpenedPath, SourceLike, open_file
from .errors import FormatError
from .executorch import (
                          BundledProgram,
                          DataFile,
                          ETDump,
                          Program,
                          open_bundled,
                          open_etdump,
                          open_executorch,
)
from .ptmf import Module, VerifyReport, open_module, verify_module

__all__ = ["file_format", "load", "load_bundled", "load_data", "load_etdump", "load_module",
           "load_program", "verify"]

#: What each identifier names: at bytes 4..8, or at 8..12 for the size-prefixed formats.
FORMATS = {b"PTMF": "ptmf", b"ET12": "pte", b"FT01": "ptd", b"BP08": "bpte", b"ED00": "etdump"}
#: Identifiers of size-prefixed flatbuffers (a u32 size first, so the identifier at 8..12).
SIZE_PREFIXED = (b"ED00",)
#: Each format in words, by the name FORMATS gives it.
DESCRIPTIONS = {"ptmf": "a PyTorch Mobile model (PTMF: .ptl, .ff)",
                "pte": "an ExecuTorch program (ET12: .pte)",
                "ptd": "an ExecuTorch data file (FT01: .ptd)",
                "bpte": "an ExecuTorch bundled program (BP08: .bpte)",
                "etdump": "an ExecuTorch ETDump profile (ED00: .etdump, .etdp)"}
#: The class each format's files open as.
CLASSES: Dict[str, type] = {"ptmf": Module, "pte": Program, "ptd": DataFile,
                            "bpte": BundledProgram, "etdump": ETDump}
#: A zip archive's first bytes (TorchScript's older .ptl), which the PTMF loader names.
_ZIP = b"PK\x03\x04"

File = Union[Module, Program, DataFile, BundledProgram, ETDump]
F = TypeVar("F", Module, Program, DataFile, BundledProgram, ETDump)
#: Bytes read to tell the formats apart.
HEAD = 12


def _head(path: str) -> bytes:
    """The first HEAD bytes of the regular file at ``path`` (one pread, no file object)."""
    fd, _ = open_file(path)
    try:
        return os.pread(fd, HEAD, 0)
    finally:
        os.close(fd)


def _identify(source: SourceLike) -> Tuple[bytes, Openable]:
    """The first HEAD bytes of ``source`` (fewer when it is shorter), and the source to open:
    a path opened once, here (the caller closes the OpenedPath unless an opener took it),
    a file object that cannot seek read into bytes."""
    if isinstance(source, (str, os.PathLike)):
        opened = OpenedPath(os.fspath(source))
        try:
            return os.pread(opened.fd, HEAD, 0), opened
        except BaseException:
            opened.close()
            raise
    if isinstance(source, (bytes, bytearray, memoryview, mmap.mmap)):
        return bytes(memoryview(source).cast("B")[:HEAD]), source
    if not hasattr(source, "read"):
        return b"", source   # the PTMF loader names what it cannot read
    seekable = getattr(source, "seekable", None)
    if seekable is not None and seekable():
        start = source.tell()
        head = source.read(HEAD)
        source.seek(start)
        return bytes(head), source
    data = source.read()
    if not isinstance(data, (bytes, bytearray)):
        raise TypeError("file object must be opened in binary mode")
    return bytes(data[:HEAD]), bytes(data)


def _format_of(head: bytes) -> Optional[str]:
    """The format the first bytes name, None when they name none."""
    if len(head) >= 8 and head[4:8] in FORMATS and head[4:8] not in SIZE_PREFIXED:
        return FORMATS[head[4:8]]
    return FORMATS[head[8:12]] if len(head) >= 12 and head[8:12] in SIZE_PREFIXED else None


def _none_of_them(head: bytes) -> FormatError:
    """The error for a file of no format read here."""
    idents = [i.decode() for i in FORMATS if i not in SIZE_PREFIXED]
    known = ", ".join(idents[:-1]) + " or " + idents[-1]
    prefixed = " or ".join(i.decode() for i in SIZE_PREFIXED)
    if len(head) < 8:
        return format_error(lib.FB_E_TOO_SMALL, 0, "header",
                            f"{len(head)} bytes are too few to hold a file identifier "
                            f"(bytes 4..8: {known}; 8..12: {prefixed})")
    return format_error(lib.FB_E_BAD_IDENTIFIER, 4, "header",
                        f"file identifier {head[4:8]!r} (bytes 4..8) is not {known}, and "
                        f"bytes 8..12 are not {prefixed}")


def file_format(path: str) -> str:
    """``"ptmf"``, ``"pte"``, ``"ptd"``, ``"bpte"`` or ``"etdump"`` by the file's
    identifier, ``"unknown"`` for any other file (reads 12 bytes; OSError if the path
    cannot be read)."""
    return _format_of(_head(path)) or "unknown"


def _check_data(data: Any) -> Sequence[Any]:
    if isinstance(data, (str, bytes, bytearray, os.PathLike)):
        raise TypeError(f"data= takes a sequence of data files (.ptd), not a "
                        f"{type(data).__name__}: write data=[{data!r}]")
    return list(data)


#: load()'s options when none is given (most loads), made once; and those options in
#: the order of Options' fields.
_DEFAULT = Options()
_DEFAULT_GIVEN = tuple(getattr(_DEFAULT, f.name) for f in dataclasses.fields(Options))


def load(source: SourceLike, *, data: Sequence[Any] = (),
         debug_buffer: Optional[SourceLike] = None, verify: Union[bool, str] = True,
         copy: bool = False,
         strict: bool = False, advise: Optional[str] = None, populate: bool = False,
         max_depth: int = 200, max_tables: int = 0, max_elements: int = 0) -> File:
    """Open a model file without copying it; what comes back depends on the file.

    A PyTorch Mobile flatbuffer (identifier ``PTMF``, ``.ptl``/``.ff``) gives a
    :class:`Module`, an ExecuTorch program (``ET12``, ``.pte``) a :class:`Program`, an
    ExecuTorch data file (``FT01``, ``.ptd``) a :class:`DataFile`, an ExecuTorch bundled
    program (``BP08``, ``.bpte``) a :class:`BundledProgram`, an ExecuTorch ETDump
    (``ED00`` at bytes 8..12, ``.etdump``) an :class:`ETDump`. The typed loaders
    (:func:`load_program`, ...) take the same arguments and accept one format only.

    Args:
        source: a path (mapped read-only), ``bytes``, ``bytearray``, ``memoryview``,
            ``mmap.mmap`` (used in place and kept alive) or a binary file object.
        data: for a program, the data files (paths, sources or opened DataFiles) that
            hold its external tensors, searched in order by the tensors' names; a
            sequence, never one path.
        debug_buffer: for an ETDump, the debug buffer its debug events' tensors are
            stored in (any source as ``source``); its tensors then read as arrays.
        verify, copy, strict, advise, populate, max_depth, max_tables, max_elements:
            as :class:`~pyflatmodule.core.options.Options` documents them. ExecuTorch
            files are always checked, whatever ``verify`` says (it adds alignment, NUL
            and UTF-8 checks): at open, but for a program's execution plans, checked
            when first read unless ``verify="full"``.

    Raises:
        FormatError: the bytes are not a valid file of any of these formats, or a data
            file is not one (its errors' paths start with ``data[i]``).
        OSError: the path cannot be opened.
        TypeError: ``data`` is a single path or buffer rather than a sequence.
        ValueError: an option is out of range, ``data`` given for a non-program or
            ``debug_buffer`` for a non-ETDump.
    """
    data = _check_data(data)
    given = (verify, copy, strict, advise, populate, max_depth, max_tables, max_elements)
    options = _DEFAULT if given == _DEFAULT_GIVEN else Options(*given)
    head, opened = _identify(source)
    try:
        return _open(head, opened, options, data, debug_buffer)
    finally:
        if isinstance(opened, OpenedPath):
            opened.close()


def _open(head: bytes, source: Openable, options: Options, data: Sequence[Any],
          debug_buffer: Optional[SourceLike]) -> File:
    """:func:`load` of a source whose first bytes are ``head``."""
    kind = _format_of(head)
    if data and kind in ("ptmf", "bpte", "etdump"):
        raise ValueError(f"data= is for ExecuTorch programs (.pte); this is "
                         f"{DESCRIPTIONS[kind]}")
    if debug_buffer is not None and kind not in (None, "etdump"):
        raise ValueError(f"debug_buffer= is for ExecuTorch ETDumps (.etdump); this is "
                         f"{DESCRIPTIONS[kind]}")
    if kind in ("pte", "ptd"):
        return open_executorch(source, options, data)
    if kind == "bpte":
        return open_bundled(source, options)
    if kind == "etdump":
        return open_etdump(source, options, debug_buffer)
    if kind is None and (hasattr(source, "read") or isinstance(
            source, (OpenedPath, bytes, bytearray, memoryview, mmap.mmap))) \
            and not head.startswith(_ZIP):
        raise _none_of_them(head)
    return open_module(source, options)   # PTMF, or what the PTMF loader names


def _load_as(cls: Type[F], source: SourceLike, options: Dict[str, Any]) -> F:
    f = load(source, **options)
    if not isinstance(f, cls):
        kind = next(k for k, c in CLASSES.items() if isinstance(f, c))
        want = next(k for k, c in CLASSES.items() if c is cls)
        f.close()
        raise format_error(lib.FB_E_BAD_IDENTIFIER, 4, "header",
                           f"this is {DESCRIPTIONS[kind]}, not {DESCRIPTIONS[want]}")
    return f


def load_module(source: SourceLike, **options: Any) -> Module:
    """:func:`load` (same arguments) for a PyTorch Mobile model only: FormatError for a
    file of another format."""
    return _load_as(Module, source, options)


def load_program(source: SourceLike, **options: Any) -> Program:
    """:func:`load` (same arguments, ``data=`` included) for an ExecuTorch program only:
    FormatError for a file of another format."""
    return _load_as(Program, source, options)


def load_data(source: SourceLike, **options: Any) -> DataFile:
    """:func:`load` (same arguments) for an ExecuTorch data file only: FormatError for a
    file of another format."""
    return _load_as(DataFile, source, options)


def load_bundled(source: SourceLike, **options: Any) -> BundledProgram:
    """:func:`load` (same arguments) for an ExecuTorch bundled program only: FormatError
    for a file of another format."""
    return _load_as(BundledProgram, source, options)


def load_etdump(source: SourceLike, **options: Any) -> ETDump:
    """:func:`load` (same arguments, ``debug_buffer=`` included) for an ExecuTorch ETDump
    only: FormatError for a file of another format."""
    return _load_as(ETDump, source, options)


def verify(source: SourceLike, *, data: Sequence[Any] = (),
           debug_buffer: Optional[SourceLike] = None, strict: bool = False,
           max_depth: int = 200, max_tables: int = 0,
           max_elements: int = 0) -> Union[VerifyReport, Dict[str, Any]]:
    """Check a whole file of any format and return a short report; raise FormatError if
    it is bad.

    A PTMF model gives a :class:`VerifyReport`; an ExecuTorch file its ``info()`` (a dict
    whose ``"format"`` names it), after a load that checks everything: with ``data``, the
    data files a program's external tensors are in (each checked too); with
    ``debug_buffer``, the one an ETDump's debug tensors are in (their extents checked
    against it)."""
    data = _check_data(data)
    options = Options(verify="full", strict=strict, max_depth=max_depth,
                      max_tables=max_tables, max_elements=max_elements)
    head, opened = _identify(source)
    try:
        if _format_of(head) == "ptmf" and not data and debug_buffer is None:
            return verify_module(opened, options)
        with _open(head, opened, options, data, debug_buffer) as f:
            return f.info()
    finally:
        if isinstance(opened, OpenedPath):
            opened.close()
