"""Turning a path, buffer or file into bytes the C core can read in place.

The returned ``Source`` holds the Python buffer (an mmap, bytes, bytearray...).
Numpy arrays made from it keep it, and therefore the mapping, alive for as long
as they exist; nothing closes the mapping while any view is alive.
"""
from __future__ import annotations

import errno
import io
import mmap
import os
import stat
import weakref
from typing import (
    Any,
    BinaryIO,
    Callable,
    Iterable,
    Optional,
    Protocol,
    Sequence,
    Tuple,
    TypeVar,
    Union,
)

from .native import format_error, lib
from .options import ADVICE, Options
from .remote import RemoteFile, is_remote

SourceLike = Union[str, "os.PathLike[str]", bytes, bytearray, memoryview, mmap.mmap, BinaryIO,
                   RemoteFile]

#: What an opener takes: a SourceLike, or a path the front door already opened.
Openable = Union[SourceLike, "OpenedPath"]

#: What an opener needs of a remote file: how many of its first bytes, given its head and
#: its size (None: all of them).
Need = Callable[[bytes, int], int]

__all__ = ["Bytes", "Holder", "Need", "Openable", "OpenedPath", "Source", "SourceLike", "Span",
           "apply_advice", "open_source"]


class Source:
    """One buffer holding a file (a local file whole; a remote one's first bytes), with
    what is known about where it came from.

    ``len(source)`` is the file's size; :attr:`held` the bytes the buffer holds (the
    same, but for a remote file). Bytes past the buffer are read with :meth:`read`."""

    __slots__ = ("obj", "name", "mapped", "stat", "path", "fd", "held", "size", "remote",
                 "_reads")

    def __init__(self, obj: Any, name: str, mapped: bool,
                 stat: Optional[os.stat_result] = None, path: Optional[str] = None,
                 fd: int = -1, remote: Optional[RemoteFile] = None) -> None:
        if isinstance(obj, memoryview) and (obj.ndim != 1 or obj.itemsize != 1):
            obj = obj.cast("B")
        # The object itself, not a memoryview of it, is what every consumer
        # exports from: views then depend on nothing but the object they keep.
        self.obj = obj
        self.name = name
        self.mapped = mapped
        self.stat = stat
        self.path = path
        #: A descriptor of the mapped file while the index is built (then -1).
        self.fd = fd
        #: Bytes in the buffer.
        self.held: int = obj.nbytes if isinstance(obj, memoryview) else len(obj)
        #: The remote file the buffer's bytes came from (it reads the rest), or None.
        self.remote = remote
        #: Bytes in the file.
        self.size: int = remote.size if remote is not None else self.held
        #: A remote file's ranges read and still in use, by (start, size): one range read
        #: twice is one buffer, as a mapping's bytes are (a blob two tensors share is
        #: one), and is fetched again only once nothing holds it.
        self._reads: "Optional[weakref.WeakValueDictionary[Tuple[int, int], Any]]" = (
            weakref.WeakValueDictionary() if remote is not None else None)

    def read(self, start: int, n: int) -> memoryview:
        """Read-only bytes [start, start + n) of the file (the caller proved the extent):
        a view of the mapping, or for a remote file, bytes fetched (a copy)."""
        if self.remote is not None and self._reads is not None and start + n > self.held:
            got = self._reads.get((start, n))
            if got is None:
                import numpy as np  # a remote file's reads only
                got = self._reads.setdefault((start, n),
                                             np.frombuffer(self.remote.read(start, n), np.uint8))
            return memoryview(got)
        return memoryview(self.obj)[start:start + n].toreadonly()

    def prefetch(self, ranges: Iterable[Tuple[int, int]]) -> None:
        """Say that the small ``(start, n)`` ranges will be read next: a remote file
        fetches those past its buffer together (one request over HTTP); a buffer or a
        mapping holds them already."""
        if self.remote is not None:
            self.remote.prefetch((a, n) for a, n in ranges if a + n > self.held)

    def address(self, pos: int) -> int:
        """A number for byte ``pos`` of the file: its address in memory for a buffer that
        holds it (two views at one address read the same bytes); for a remote file's
        bytes past its buffer, one as unique."""
        if not self.held:
            return id(self) + pos
        from .lazy import np
        return int(np.frombuffer(self.obj, np.uint8).ctypes.data) + pos

    def disconnect(self) -> None:
        """Close a remote file's connection and drop its cache (nothing for others)."""
        if self.remote is not None:
            self.remote.close()

    def release_fd(self) -> None:
        """Close the descriptor kept for building the index."""
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def changed(self) -> Optional[str]:
        """What happened to the file since it was opened, or None if nothing did.

        Only sources opened from a path can be compared; others give None.
        """
        if self.path is None or self.stat is None:
            return None
        old = self.stat
        try:
            new = os.stat(self.path)
        except FileNotFoundError:
            return "the file was removed"
        if (new.st_dev, new.st_ino) != (old.st_dev, old.st_ino):
            return "the file was replaced by another file"
        if new.st_size < old.st_size:
            return (f"the file was truncated from {old.st_size} to {new.st_size} bytes"
                    + (" (reading the lost part raises SIGBUS)" if self.mapped else ""))
        if new.st_size != old.st_size or new.st_mtime_ns != old.st_mtime_ns:
            return "the file was modified in place"
        return None

    def __len__(self) -> int:
        return self.size


class Bytes(Protocol):
    """Bytes that may be read in part: a memoryview, or a :class:`Span` that reads only
    the slices taken."""

    def __len__(self) -> int:
        """Their length."""

    def __getitem__(self, part: slice) -> memoryview:
        """Some of them."""


class Span:
    """Bytes [start, start + size) of a file, read only as far as they are sliced: what a
    look at the start of a payload takes, without reading the whole of a remote one."""

    __slots__ = ("source", "start", "size")

    def __init__(self, source: Source, start: int, size: int) -> None:
        self.source = source
        self.start = start
        self.size = size

    def __len__(self) -> int:
        return self.size

    def __getitem__(self, part: slice) -> memoryview:
        begin, end, step = part.indices(self.size)
        if step != 1:
            raise ValueError("a Span is sliced with step 1")
        return self.source.read(self.start + begin, max(0, end - begin))


#: Payloads less than this apart share one readahead run: the gap holds storage
#: headers and small payloads, so one madvise covers them.
RUN_GAP = 64 << 10


def _madvise(mm: mmap.mmap, name: str, start: int = 0, length: int = 0) -> None:
    flag = getattr(mmap, name, None)
    if flag is not None and hasattr(mm, "madvise"):
        mm.madvise(flag, start, length or len(mm) - start)


#: What each kind of file that is not a regular one is called when it is refused.
_SPECIAL = ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
            (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"))


def open_file(name: str) -> Tuple[int, os.stat_result]:
    """A read-only descriptor of the regular file at ``name``, and its ``fstat``. Anything
    else is refused before a byte is read: IsADirectoryError for a directory, OSError
    (EINVAL) naming the kind for a FIFO, a device or a socket (it opens without blocking,
    so a FIFO with no writer does not hang the caller)."""
    fd = os.open(name, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    try:
        st = os.fstat(fd)
        mode = st.st_mode
        if stat.S_ISDIR(mode):
            raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), name)
        for test, kind in _SPECIAL:
            if test(mode):
                raise OSError(errno.EINVAL, f"not a regular file ({kind})", name)
    except BaseException:
        os.close(fd)
        raise
    return fd, st


class Holder:
    """What every opened file is: it holds its mapping (``_source``) until :meth:`close`,
    and is a context manager that closes it."""

    _source: Optional[Source]

    def close(self) -> None:
        """Drop this object's hold on the mapping; arrays taken earlier stay valid. A
        remote file's connection is closed."""
        source, self._source = self._source, None
        if source is not None:
            source.disconnect()

    @property
    def closed(self) -> bool:
        """True once ``close()`` was called."""
        return self._source is None

    def __enter__(self: H) -> H:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


H = TypeVar("H", bound=Holder)


class OpenedPath:
    """A path already open (``open_file``) because its first bytes were read to tell its
    format: ``open_source`` maps this descriptor rather than opening the path again. Whoever
    made it closes it (``close``) once the opener took it or failed."""

    __slots__ = ("name", "fd", "stat")

    def __init__(self, name: str) -> None:
        self.name = name
        self.fd, self.stat = open_file(name)

    def take(self) -> int:
        """The descriptor, now the caller's to close."""
        fd, self.fd = self.fd, -1
        return fd

    def close(self) -> None:
        """Close the descriptor unless an opener took it."""
        if self.fd >= 0:
            os.close(self.take())


def _map_fd(fd: int, name: str, populate: bool, owned: bool = False,
            st: Optional[os.stat_result] = None) -> Source:
    """Map the file open as ``fd`` (``st``: its ``fstat`` when the caller took it). An
    ``owned`` descriptor is closed here or handed to the Source; a caller's is left open
    (the Source gets a duplicate)."""
    try:
        if st is None:
            st = os.fstat(fd)
        if stat.S_ISDIR(st.st_mode):   # os.open opens directories too
            raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), name)
        if st.st_size == 0:
            # mmap refuses empty files; an empty buffer gets the verifier's error.
            return Source(b"", name, False, st)
        if populate and hasattr(mmap, "MAP_POPULATE"):
            mm = mmap.mmap(fd, 0, flags=mmap.MAP_SHARED | mmap.MAP_POPULATE,
                           prot=mmap.PROT_READ)
            return Source(mm, name, True, st)
        mm = mmap.mmap(fd, 0, access=mmap.ACCESS_READ)
        # Before anything is read: metadata faults must not read ahead into tensor
        # data (readahead windows reach megabytes). Storage ranges get normal
        # readahead back once the index knows where they are.
        _madvise(mm, "MADV_RANDOM")
        # A format's index may read storage headers with pread; without a descriptor
        # to spare it reads them through the mapping.
        if owned:
            spare, fd = fd, -1
        else:
            try:
                spare = os.dup(fd)
            except OSError:
                spare = -1
        return Source(mm, name, True, st, fd=spare)
    finally:
        if owned and fd >= 0:
            os.close(fd)


def file_identity(st: os.stat_result) -> Tuple[int, int, int]:
    """What tells one file from another at one path: size, mtime and inode."""
    return st.st_size, st.st_mtime_ns, st.st_ino


def check_same_file(path: str, identity: Tuple[int, int, int], st: os.stat_result,
                    what: str) -> None:
    """OSError unless ``st`` is the file ``identity`` was taken from (a pickled ``what``
    is opened again only from the file it was opened from)."""
    now = file_identity(st)
    if now != identity:
        changed = ", ".join(f"{k} {old} -> {new}" for k, old, new in
                            zip(("size", "mtime_ns", "inode"), identity, now) if old != new)
        raise OSError(f"{path} is not the file the pickled pyflatmodule.{what} was "
                      f"opened from ({changed})")


def apply_advice(source: Source, advise: Optional[str],
                 payload_runs: Sequence[Tuple[int, int]]) -> None:
    """Set the mapping's access pattern once the index is built.

    ``advise=None`` keeps metadata pages on MADV_RANDOM and gives ``payload_runs``
    (page-aligned ranges of tensor payload) normal readahead; otherwise the whole
    mapping gets the advice.
    """
    if not source.mapped:
        return
    if advise is not None:
        _madvise(source.obj, ADVICE[advise])
        return
    for start, end in payload_runs:
        _madvise(source.obj, "MADV_NORMAL", start, end - start)


def open_source(source: Openable, options: Options, need: Optional[Need] = None) -> Source:
    """Make a Source from any of the inputs ``load`` accepts, as ``options.copy`` and
    ``options.populate`` ask. A URL or an fsspec file object (a RemoteFile when the front
    door opened it) gives the first ``need(head, size)`` bytes of the file (all of it
    without ``need``); the rest is read when asked for (:meth:`Source.read`)."""
    if is_remote(source):
        source = RemoteFile(source, options.storage_options)
    if isinstance(source, RemoteFile):
        n = source.size if need is None else need(source.head, source.size)
        return Source(source.prefix(n), source.url, False, remote=source)
    copy, populate = options.copy, options.populate
    if isinstance(source, (str, os.PathLike, OpenedPath)):
        if isinstance(source, OpenedPath):
            name, st, fd = source.name, source.stat, source.take()
        else:
            name = os.fspath(source)
            fd, st = open_file(name)
        path = os.path.abspath(name)
        if copy:
            with os.fdopen(fd, "rb") as f:
                out = Source(f.read(), name, False, st)
        else:
            out = _map_fd(fd, name, populate, owned=True, st=st)
        out.path = path
        return out
    if isinstance(source, (bytes, bytearray, memoryview, mmap.mmap)):
        if copy:
            return Source(bytes(source), "<bytes>", False)
        if isinstance(source, memoryview) and not source.c_contiguous:
            raise format_error(lib.FB_E_BAD_ARGUMENT,
                               message="memoryview source must be contiguous")
        return Source(source, f"<{type(source).__name__}>", False)
    read = getattr(source, "read", None)
    if read is None:
        raise TypeError(f"cannot load a model from {type(source).__name__}")
    name = str(getattr(source, "name", "<file>"))
    if not copy:
        try:
            given: Optional[int] = source.fileno()
        except (AttributeError, OSError, io.UnsupportedOperation):
            given = None
        if given is not None:
            return _map_fd(given, name, populate)
    data = read()
    if not isinstance(data, (bytes, bytearray)):
        raise TypeError("file object must be opened in binary mode")
    return Source(bytes(data), name, False)
