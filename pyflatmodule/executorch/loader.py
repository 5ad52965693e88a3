"""Opening an ExecuTorch file: the C checks of the whole file, then a Program or a
DataFile by its identifier."""
from __future__ import annotations

import mmap
import os
from typing import Any, Sequence, Union

from ..core.native import check, ffi, format_error, lib, new_error
from ..core.options import Options
from ..core.source import Source, SourceLike, apply_advice, open_source
from ..errors import FormatError
from .data_file import DataFile
from .program import Program


def open_executorch(source: SourceLike, options: Options,
                    data: Sequence[Any] = ()) -> Union[Program, DataFile]:
    """Open an ExecuTorch program or data file with ``options`` (the data files a
    program names, and its XNNPACK payloads, with the same); see
    :func:`pyflatmodule.load`."""
    return open_opened(open_source(source, options), options, data)


def open_opened(opened: Source, options: Options,
                data: Sequence[Any] = ()) -> Union[Program, DataFile]:
    """:func:`open_executorch` of a source already open (its descriptor is released)."""
    try:
        summary = ffi.new("et_summary *")
        err = new_error()
        buf = opened.obj
        check(lib.et_open(ffi.from_buffer(buf), len(opened), options.to_c(), summary, err), err)
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
