"""Opening an ExecuTorch file: the C checks of the whole file, then a Program or a
DataFile by its identifier."""
from __future__ import annotations

import copyreg
import mmap
import os
from typing import Any, Dict, List, Sequence, Tuple, Union

from ..core.native import c_buffer, check, ffi, format_error, lib, new_error
from ..core.options import Options
from ..core.source import Openable, Source, apply_advice, check_same_file, open_source
from ..errors import FormatError
from .data_file import DataFile
from .program import Program


def open_executorch(source: Openable, options: Options,
                    data: Sequence[Any] = ()) -> Union[Program, DataFile]:
    """Open an ExecuTorch program or data file with ``options`` (the data files a
    program names, and its XNNPACK payloads, with the same); see
    :func:`pyflatmodule.load`."""
    return open_opened(open_source(source, options, _flatbuffer_bytes), options, data)


def _flatbuffer_bytes(head: bytes, size: int) -> int:
    """The bytes of a remote file its opener needs: its header and flatbuffer (the first
    ``len(head)`` when the header is bad: the open reports it from those; the whole file
    when the header is longer than the head)."""
    summary = ffi.new("et_summary *")
    rc = lib.et_extent(c_buffer(head), len(head), size, summary, new_error())
    if rc == lib.FB_OK:
        return max(int(summary.flatbuffer_end), len(head))
    return size if rc == lib.FB_E_BAD_ARGUMENT else len(head)


def open_opened(opened: Source, options: Options,
                data: Sequence[Any] = ()) -> Union[Program, DataFile]:
    """:func:`open_executorch` of a source already open (its descriptor is released)."""
    try:
        summary = ffi.new("et_summary *")
        err = new_error()
        buf = opened.obj
        check(lib.et_open(c_buffer(buf), opened.held, opened.size, options.to_c(),
                          options.full, summary, err), err)
        # Segment data (constants, payloads) gets readahead; the flatbuffer stays random.
        start = int(summary.segment_base) // mmap.PAGESIZE * mmap.PAGESIZE
        end = int(summary.segment_base + summary.segment_size)
        apply_advice(opened, options.advise, [(start, end)] if end > start else [])
    finally:
        opened.release_fd()
    if summary.identifier == lib.FT_FILE_IDENTIFIER:
        if data:
            raise ValueError("data= is for programs (.pte); this is a data file (.ptd)")
        return DataFile(opened, summary, options)
    return Program(opened, summary, options, [_data_file(d, i, options)
                                              for i, d in enumerate(data)])


def _reduce(f: Union[Program, DataFile]) -> Tuple[Any, Tuple[Any, ...]]:
    """A program or data file opened from a path pickles as its path, ``load()``'s
    arguments and the file's identity (size, mtime, inode), and a program its data files
    the same way: unpickling checks that each path still holds the same file and opens
    them again, verified as before. The mapping itself cannot be sent."""
    kind = type(f).__name__
    if f.closed:
        raise ValueError(f"cannot pickle a closed pyflatmodule.{kind}")
    data = f.data_files if isinstance(f, Program) else []
    for g in (f, *data):
        if g.origin is None:
            raise TypeError(
                f"cannot pickle a pyflatmodule.{kind} opened from "
                f"{'a buffer or a URL' if g is f else 'a data file given as a buffer or a URL'}"
                ": only files "
                "opened from paths pickle (as their paths, to be opened again where they are "
                "unpickled)")
    return _reopen, (kind, f.load_args, f.origin, [g.origin for g in data])


def _reopen(kind: str, load_args: Dict[str, Any], origin: Tuple[str, Tuple[int, int, int]],
            data: List[Tuple[str, Tuple[int, int, int]]]) -> Union[Program, DataFile]:
    """Unpickle a program or data file: each path must still hold the file it held (checked
    before opening, and on what was opened)."""
    for path, identity in (origin, *data):
        check_same_file(path, identity, os.stat(path), kind)
    options = Options(**load_args)
    files = [open_executorch(path, options) for path, _ in data]
    f = open_executorch(origin[0], options, files)
    try:
        for g, (path, identity) in zip((f, *files), (origin, *data)):
            assert g._source is not None and g._source.stat is not None   # from a path
            check_same_file(path, identity, g._source.stat, kind)
    except OSError:
        f.close()
        raise
    return f


copyreg.pickle(Program, _reduce)
copyreg.pickle(DataFile, _reduce)


def _data_file(d: Any, i: int, options: Options) -> DataFile:
    """Data file ``data[i]``, opened unless it is; its faults located under ``data[i]``."""
    if isinstance(d, DataFile):
        return d
    where = f"data[{i}]"
    name = os.fspath(d) if isinstance(d, (str, os.PathLike)) else f"a {type(d).__name__}"
    try:
        f = open_executorch(d, options)
    except FormatError as e:
        raise e.within(where) from None
    if not isinstance(f, DataFile):
        f.close()
        raise format_error(lib.FB_E_BAD_IDENTIFIER, 4, where,
                           f"{where} ({name}) is an ExecuTorch program (.pte), not a data "
                           f"file (.ptd)")
    return f
