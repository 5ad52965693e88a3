"""``load``: one entry point for every format, chosen by the file's identifier; the typed
loaders ``load_module``, ``load_program``, ``load_data``, ``load_bundled``,
``load_etdump`` and ``load_etrecord``, which accept their format only; and ``verify``.
The one place the load options are spelled as keywords: each becomes an
:class:`~pyflatmodule.core.options.Options`, handed down to the format's opener."""
from __future__ import annotations

import collections
import functools
import importlib
import mmap
import os
from typing import (
    TYPE_CHECKING,
    Any,
    Callable,
    Dict,
    FrozenSet,
    NamedTuple,
    Optional,
    Sequence,
    Tuple,
    TypedDict,
    Union,
    cast,
)

from .core.native import format_error, lib
from .core.options import Options
from .core.remote import TOTAL, RemoteFile, is_remote, list_prefix
from .core.source import Openable, OpenedPath, SourceLike, open_file
from .errors import FormatError

if TYPE_CHECKING:   # annotations only (PEP 692): typing has Unpack for **kwargs from 3.12
    from typing_extensions import Unpack

    from .executorch import BundledProgram, DataFile, ETDump, ETRecord, Program
    from .ptmf import Module, VerifyReport

    File = Union[Module, Program, DataFile, BundledProgram, ETDump, ETRecord]

__all__ = ["FORMATS", "TOTAL", "Format", "LoadOptions", "RemoteFile", "file_format", "is_remote",
           "list_prefix", "load", "load_bundled", "load_data", "load_etdump", "load_etrecord",
           "load_module", "load_program", "verify"]

class LoadOptions(TypedDict, total=False):
    """The options every loader takes, as :func:`load` spells and documents them; the
    typed loaders declare them with these types (a misspelt option fails type checking)
    and add their format's own (``data``, ``debug_buffer``)."""

    verify: Union[bool, str]
    copy: bool
    strict: bool
    advise: Optional[str]
    populate: bool
    max_depth: int
    max_tables: int
    max_elements: int
    storage_options: Optional[Dict[str, Any]]


class Extras(NamedTuple):
    """What a load gives beside the source and the options, for the formats that take it."""

    data: Sequence[Any]                  #: a program's data files
    debug_buffer: Optional[SourceLike]   #: an ETDump's debug buffer


class Format(NamedTuple):
    """One format read here: the whole of what :func:`load` knows of it. Its wing's code
    (``module``) is imported when a file of it is first opened."""

    name: str             #: what :func:`file_format` says: ``"pte"``, ...
    identifier: bytes     #: the flatbuffer's file identifier (a zip's signature)
    at: int               #: where it is: bytes 4..8, 8..12 after a size prefix, 0..4
    description: str      #: the format in words, with its identifier and suffixes
    title: str            #: a file of it in two or three words
    module: str           #: the wing's module that defines its class and its opener
    class_name: str       #: what its files open as
    #: ``open(source, options, extras)``: a file of it, opened by the wing's opener
    open: Callable[[Openable, Options, "Extras"], "File"]
    takes: FrozenSet[str] = frozenset()   #: the :class:`Extras` it accepts

    @property
    def cls(self) -> type:
        """What its files open as."""
        return cast(type, _member(self.module, self.class_name))


@functools.lru_cache(maxsize=None)
def _member(module: str, name: str) -> Any:
    """``module.name``, the module imported at the first call (then a dict lookup)."""
    return getattr(importlib.import_module(module), name)


def _opener(module: str, name: str, extra: Optional[str] = None
            ) -> Callable[[Openable, Options, "Extras"], "File"]:
    """A format's ``open``: ``module.name(source, options[, extras.<extra>])``."""
    if extra is None:
        return lambda s, o, x: cast("File", _member(module, name)(s, o))
    return lambda s, o, x: cast("File", _member(module, name)(s, o, getattr(x, extra)))


_ET = "pyflatmodule.executorch."

#: Every format, in the order their identifiers are tried.
FORMATS: Tuple[Format, ...] = (
    Format("ptmf", b"PTMF", 4, "a PyTorch Mobile model (PTMF: .ptl, .ff)", "PTMF model",
           "pyflatmodule.ptmf.module", "Module",
           _opener("pyflatmodule.ptmf.module", "open_module")),
    Format("pte", b"ET12", 4, "an ExecuTorch program (ET12: .pte)", "ExecuTorch program",
           _ET + "loader", "Program", _opener(_ET + "loader", "open_executorch", "data"),
           frozenset({"data"})),
    Format("ptd", b"FT01", 4, "an ExecuTorch data file (FT01: .ptd)", "ExecuTorch data file",
           _ET + "loader", "DataFile", _opener(_ET + "loader", "open_executorch", "data"),
           frozenset({"data"})),
    Format("bpte", b"BP08", 4, "an ExecuTorch bundled program (BP08: .bpte)",
           "ExecuTorch bundled program", _ET + "bundled", "BundledProgram",
           _opener(_ET + "bundled", "open_bundled")),
    Format("etdump", b"ED00", 8, "an ExecuTorch ETDump profile (ED00: .etdump, .etdp)",
           "ExecuTorch ETDump", _ET + "etdump", "ETDump",
           _opener(_ET + "etdump", "open_etdump", "debug_buffer"),
           frozenset({"debug_buffer"})),
    # A zip archive (its local header's signature): an ETRecord when it holds the member
    # ETRECORD_V0, which the opener checks (any other zip is a FormatError saying so).
    Format("etrecord", b"PK\x03\x04", 0,
           "an ExecuTorch ETRecord (a zip holding ETRECORD_V0: .etrecord, .bin)",
           "ExecuTorch ETRecord", _ET + "etrecord", "ETRecord",
           _opener(_ET + "etrecord", "open_etrecord")),
)
#: Each format by its name.
BY_NAME: Dict[str, Format] = {f.name: f for f in FORMATS}
#: Bytes read to tell the formats apart.
HEAD = 12


def _head(path: str) -> bytes:
    """The first HEAD bytes of the regular file at ``path`` (one pread, no file object)."""
    fd, _ = open_file(path)
    try:
        return os.pread(fd, HEAD, 0)
    finally:
        os.close(fd)


def _identify(source: SourceLike, options: Options) -> Tuple[bytes, Openable]:
    """The first HEAD bytes of ``source`` (fewer when it is shorter), and the source to open:
    a path opened once, here (the caller closes the OpenedPath unless an opener took it),
    a URL or an fsspec file object as a RemoteFile (its first bytes fetched), a file object
    that cannot seek read into bytes."""
    if is_remote(source) or isinstance(source, RemoteFile):
        remote = source if isinstance(source, RemoteFile) else RemoteFile(
            source, options.storage_options)
        _remember(remote.url, remote.head)
        return remote.head[:HEAD], remote
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


def _closed_remote(opened: Openable) -> None:
    """Close a remote file's connection (an open that failed, or a check that is done)."""
    if isinstance(opened, RemoteFile):
        opened.close()


#: Each format by where its identifier is and the identifier; the identifiers' offsets in
#: the order FORMATS tries them (every open looks its format up: a dict, not a scan).
_BY_IDENTIFIER = {(f.at, f.identifier): f for f in FORMATS}
_OFFSETS = tuple(dict.fromkeys(f.at for f in FORMATS))


def format_of(head: bytes) -> Optional[Format]:
    """The format a file's first 12 bytes name, None when they name none."""
    for at in _OFFSETS:
        found = _BY_IDENTIFIER.get((at, head[at:at + 4]))
        if found is not None:
            return found
    return None


def _none_of_them(head: bytes) -> FormatError:
    """The error for a file of no format read here."""
    idents = [f.identifier.decode() for f in FORMATS if f.at == 4]
    known = ", ".join(idents[:-1]) + " or " + idents[-1]
    prefixed = " or ".join(f.identifier.decode() for f in FORMATS if f.at == 8)
    if len(head) < 8:
        return format_error(lib.FB_E_TOO_SMALL, 0, "header",
                            f"{len(head)} bytes are too few to hold a file identifier "
                            f"(bytes 4..8: {known}; 8..12: {prefixed})")
    return format_error(lib.FB_E_BAD_IDENTIFIER, 4, "header",
                        f"file identifier {head[4:8]!r} (bytes 4..8) is not {known}, and "
                        f"bytes 8..12 are not {prefixed}")


#: The formats of the URLs read in this process (the latest 4,096): a command that names a
#: remote file's format after opening it sends no request for it.
_URL_FORMATS: "collections.OrderedDict[str, str]" = collections.OrderedDict()


def _remember(url: str, head: bytes) -> str:
    f = format_of(head)
    name = _URL_FORMATS[url] = "unknown" if f is None else f.name
    while len(_URL_FORMATS) > 4096:
        _URL_FORMATS.popitem(last=False)
    return name


def file_format(path: str) -> str:
    """``"ptmf"``, ``"pte"``, ``"ptd"``, ``"bpte"``, ``"etdump"`` or ``"etrecord"`` (any
    zip archive) by the file's identifier, ``"unknown"`` for any other file (reads 12
    bytes; for a URL, one request unless this process read it already; OSError if the
    path cannot be read)."""
    if is_remote(path):
        known = _URL_FORMATS.get(path)
        if known is not None:
            return known
        remote = RemoteFile(path, head=HEAD)
        remote.close()
        return _remember(path, remote.head)
    f = format_of(_head(path))
    return "unknown" if f is None else f.name


def _check_data(data: Any) -> Sequence[Any]:
    if isinstance(data, (str, bytes, bytearray, os.PathLike)):
        raise TypeError(f"data= takes a sequence of data files (.ptd), not a "
                        f"{type(data).__name__}: write data=[{data!r}]")
    return list(data)


#: load()'s options when none is given (most loads), made once, and as keywords.
_DEFAULT = Options()
_DEFAULT_GIVEN = _DEFAULT.keywords()


def load(source: SourceLike, *, data: Sequence[Any] = (),
         debug_buffer: Optional[SourceLike] = None, verify: Union[bool, str] = True,
         copy: bool = False,
         strict: bool = False, advise: Optional[str] = None, populate: bool = False,
         max_depth: int = 200, max_tables: int = 0, max_elements: int = 0,
         storage_options: Optional[Dict[str, Any]] = None) -> File:
    """Open a model file without copying it; what comes back depends on the file.

    A PyTorch Mobile flatbuffer (identifier ``PTMF``, ``.ptl``/``.ff``) gives a
    :class:`Module`, an ExecuTorch program (``ET12``, ``.pte``) a :class:`Program`, an
    ExecuTorch data file (``FT01``, ``.ptd``) a :class:`DataFile`, an ExecuTorch bundled
    program (``BP08``, ``.bpte``) a :class:`BundledProgram`, an ExecuTorch ETDump
    (``ED00`` at bytes 8..12, ``.etdump``) an :class:`ETDump`, an ExecuTorch ETRecord (a
    zip archive holding ``ETRECORD_V0``) an :class:`ETRecord`. The typed loaders
    (:func:`load_program`, ...) take the same arguments and accept one format only.

    Args:
        source: a path (mapped read-only), ``bytes``, ``bytearray``, ``memoryview``,
            ``mmap.mmap`` (used in place and kept alive), a binary file object, or a
            remote file: an ``http(s)://`` URL, any fsspec URL (``s3://``, ``hf://``...)
            or an fsspec file object. A remote ExecuTorch program or data file is read
            from its header and flatbuffer (two requests at most); its payloads, named
            data and tensors are fetched when first read, by byte range, and its arrays
            are copies in memory. Other formats are fetched whole.
        data: for a program, the data files (paths, sources or opened DataFiles) that
            hold its external tensors, searched in order by the tensors' names; a
            sequence, never one path.
        debug_buffer: for an ETDump, the debug buffer its debug events' tensors are
            stored in (any source as ``source``); its tensors then read as arrays.
        verify, copy, strict, advise, populate, max_depth, max_tables, max_elements,
        storage_options: as :class:`~pyflatmodule.core.options.Options` documents
            them. ExecuTorch
            files are always checked, whatever ``verify`` says (it adds alignment, NUL
            and UTF-8 checks): at open, but for a program's execution plans, checked
            when first read unless ``verify="full"``.

    Raises:
        FormatError: the bytes are not a valid file of any of these formats, or a data
            file is not one (its errors' paths start with ``data[i]``).
        OSError: the path cannot be opened; RemoteError (an OSError) when a remote
            file cannot be read (not found, a server's fault, a timeout).
        TypeError: ``data`` is a single path or buffer rather than a sequence.
        ValueError: an option is out of range, ``data`` given for a non-program or
            ``debug_buffer`` for a non-ETDump.
    """
    data = _check_data(data)
    given: Dict[str, Any] = dict(verify=verify, copy=copy, strict=strict, advise=advise,
                                 populate=populate, max_depth=max_depth,
                                 max_tables=max_tables, max_elements=max_elements,
                                 storage_options=storage_options)
    options = _DEFAULT if given == _DEFAULT_GIVEN else Options(**given)
    head, opened = _identify(source, options)
    try:
        return _open(head, opened, options, Extras(data, debug_buffer))
    except BaseException:
        _closed_remote(opened)
        raise
    finally:
        if isinstance(opened, OpenedPath):
            opened.close()


#: What each of :class:`Extras` is for, in the ValueError of a format that does not take it.
_EXTRA_USE = {"data": "data= is for ExecuTorch programs (.pte)",
              "debug_buffer": "debug_buffer= is for ExecuTorch ETDumps (.etdump)"}


def _open(head: bytes, source: Openable, options: Options, extras: Extras) -> File:
    """:func:`load` of a source whose first bytes are ``head``."""
    fmt = format_of(head)
    if fmt is None:
        if hasattr(source, "read") or isinstance(
                source, (OpenedPath, RemoteFile, bytes, bytearray, memoryview, mmap.mmap)):
            raise _none_of_them(head)
        fmt = BY_NAME["ptmf"]   # anything else: the PTMF loader names the fault
    elif extras.data and "data" not in fmt.takes:
        raise ValueError(f"{_EXTRA_USE['data']}; this is {fmt.description}")
    elif extras.debug_buffer is not None and "debug_buffer" not in fmt.takes:
        raise ValueError(f"{_EXTRA_USE['debug_buffer']}; this is {fmt.description}")
    return fmt.open(source, options, extras)


def _load_as(name: str, source: SourceLike, options: Dict[str, Any]) -> File:
    """:func:`load` of a file of the format ``name`` only."""
    f = load(source, **options)
    want = BY_NAME[name]
    if type(f).__name__ != want.class_name or not isinstance(f, want.cls):
        got = next(fmt for fmt in FORMATS if type(f).__name__ == fmt.class_name)
        f.close()
        raise format_error(lib.FB_E_BAD_IDENTIFIER, 4, "header",
                           f"this is {got.description}, not {want.description}")
    return f


def load_module(source: SourceLike, **options: Unpack[LoadOptions]) -> Module:
    """:func:`load` for a PyTorch Mobile model only: FormatError for a file of another
    format."""
    return cast("Module", _load_as("ptmf", source, dict(options)))


def load_program(source: SourceLike, *, data: Sequence[Any] = (),
                 **options: Unpack[LoadOptions]) -> Program:
    """:func:`load` for an ExecuTorch program only, with the data files its external
    tensors and named data are in: FormatError for a file of another format."""
    return cast("Program", _load_as("pte", source, {**options, "data": data}))


def load_data(source: SourceLike, **options: Unpack[LoadOptions]) -> DataFile:
    """:func:`load` for an ExecuTorch data file only: FormatError for a file of another
    format."""
    return cast("DataFile", _load_as("ptd", source, dict(options)))


def load_bundled(source: SourceLike, **options: Unpack[LoadOptions]) -> BundledProgram:
    """:func:`load` for an ExecuTorch bundled program only: FormatError for a file of
    another format."""
    return cast("BundledProgram", _load_as("bpte", source, dict(options)))


def load_etdump(source: SourceLike, *, debug_buffer: Optional[SourceLike] = None,
                **options: Unpack[LoadOptions]) -> ETDump:
    """:func:`load` for an ExecuTorch ETDump only, with the debug buffer its debug
    tensors are in: FormatError for a file of another format."""
    return cast("ETDump", _load_as("etdump", source, {**options, "debug_buffer": debug_buffer}))


def load_etrecord(source: SourceLike, **options: Unpack[LoadOptions]) -> ETRecord:
    """:func:`load` for an ExecuTorch ETRecord only: FormatError for a file of another
    format (a zip archive without ETRECORD_V0 included)."""
    return cast("ETRecord", _load_as("etrecord", source, dict(options)))


def verify(source: SourceLike, *, data: Sequence[Any] = (),
           debug_buffer: Optional[SourceLike] = None, strict: bool = False,
           max_depth: int = 200, max_tables: int = 0, max_elements: int = 0,
           storage_options: Optional[Dict[str, Any]] = None
           ) -> Union[VerifyReport, Dict[str, Any]]:
    """Check a whole file of any format and return a short report; raise FormatError if
    it is bad.

    A PTMF model gives a :class:`VerifyReport`; an ExecuTorch file its ``info()`` (a dict
    whose ``"format"`` names it), after a load that checks everything: with ``data``, the
    data files a program's external tensors are in (each checked too); with
    ``debug_buffer``, the one an ETDump's debug tensors are in (their extents checked
    against it). A remote program is read as :func:`load` reads it: its flatbuffer and the
    delegate payloads the check reads, never its weights."""
    data = _check_data(data)
    options = Options(verify="full", strict=strict, max_depth=max_depth,
                      max_tables=max_tables, max_elements=max_elements,
                      storage_options=storage_options)
    head, opened = _identify(source, options)
    try:
        if format_of(head) is BY_NAME["ptmf"] and not data and debug_buffer is None:
            from .ptmf import verify_module
            return verify_module(opened, options)
        with _open(head, opened, options, Extras(data, debug_buffer)) as f:
            info = f.info()
            if strict:
                from .executorch import refuse_native_code
                refuse_native_code(info)
            return info
    finally:
        _closed_remote(opened)
        if isinstance(opened, OpenedPath):
            opened.close()
