"""One adapter per format: each command reaches a file through the
:class:`~pyflatmodule.cli.formats.base.FileFormat` its format implements, chosen here
(and only here) by what the file is."""
from __future__ import annotations

import importlib
import os
import re
from typing import Dict, Sequence, Tuple, Type, Union, cast

from ...errors import FormatError
from ...executorch import Region
from ...files import BY_NAME, FORMATS, RemoteFile, file_format, is_remote, load
from ...files import format_of as identify
from ..common import EXIT_USAGE, CliError
from .base import FileFormat, Listing

__all__ = ["FileFormat", "Listing", "Region", "adapter", "format_of", "open_file"]

#: The adapter of each format of :data:`pyflatmodule.files.FORMATS` (module, class),
#: imported when a file of it is first read.
ADAPTERS: Dict[str, Tuple[str, str]] = {
    "ptmf": ("ptmf", "PtmfModel"), "pte": ("executorch", "ExecuTorchProgram"),
    "ptd": ("executorch", "ExecuTorchDataFile"), "bpte": ("executorch", "ExecuTorchBundled"),
    "etdump": ("etdump", "ExecuTorchETDump"), "etrecord": ("etrecord", "ExecuTorchETRecord")}


def adapter(name: str) -> Type[FileFormat]:
    """The adapter of the format ``name`` (``"pte"``, ...)."""
    module, cls = ADAPTERS[name]
    return cast(Type[FileFormat], getattr(importlib.import_module(f"{__name__}.{module}"), cls))


def format_of(path: Union[str, RemoteFile]) -> Type[FileFormat]:
    """The adapter for the file at ``path`` (or a remote file, opened), by its identifier;
    any file of no known format is read as PTMF, whose loader says what is wrong with it."""
    if isinstance(path, RemoteFile):
        fmt = identify(path.head)
    else:
        fmt = BY_NAME.get(file_format(path))
    return adapter("ptmf" if fmt is None else fmt.name)


def open_file(path: str, data: Sequence[str] = ()) -> FileFormat:
    """``load(path)`` behind its format's adapter (with ``data``, the data files
    holding a program's external tensors)."""
    for p in (path, *data):
        if os.path.isdir(p):
            raise IsADirectoryError(21, "is a directory", p)
    if data and not is_remote(path) and file_format(path) != "pte":
        raise CliError("--data is for ExecuTorch programs (.pte)", "usage", EXIT_USAGE,
                       file=path)
    try:
        f = load(path, data=data)
    except FormatError as e:   # a data file's fault is the data file's
        at = re.match(r"data\[(\d+)\]", e.path)
        if at is None:
            raise
        where = e.path[at.end():].lstrip(".")
        raise CliError(f"invalid data file: {e.reason} (at {where or 'its header'}, byte "
                       f"offset {e.offset}) [{e.code}]", e.code, file=data[int(at.group(1))],
                       offset=e.offset, path=where) from None
    except ValueError as e:   # only data= misuse is ours
        raise CliError(str(e), "usage", EXIT_USAGE, file=path) from None
    opened = next(fmt for fmt in FORMATS if fmt.class_name == type(f).__name__)
    return adapter(opened.name)(path, f)
