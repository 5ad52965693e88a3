"""``pyflatmodule info``: versions, counts, methods, tensors by dtype, shared storages,
extra files."""
from __future__ import annotations

import argparse
from typing import List, Optional, Sequence, Tuple, Type

from ..errors import FormatError
from .common import (
    EXIT_FAIL,
    EXIT_OK,
    SAMPLE,
    Context,
    Json,
    add_jobs,
    expand_paths,
    in_order,
    report,
)
from .formats import FileFormat, open_file

HELP = ("versions, counts, methods, tensors by dtype, shared storages, extra files "
        "(ExecuTorch: methods, operators, delegates, constants, segments)")

EXAMPLES = """examples:
  pyflatmodule info                     describe the sample model shipped with the package
  pyflatmodule info model.ptl           versions, methods, tensors by dtype, extra files
  pyflatmodule info model.pte           an ExecuTorch program: methods, operators, delegates
  pyflatmodule info --json a.ff b.ff    {"files": [{"file", "format", ...}, ...]}
  pyflatmodule info --json -j 16 s3://bucket/models/   every model file under a prefix,
                                        16 at a time (fsspec lists it; - reads URLs)
"""


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The command's arguments."""
    p.add_argument("paths", nargs="*", metavar="PATH",
                   help="model files or URLs, directories and URL prefixes ending in / "
                        "(searched for model files), - (paths on stdin); default: the "
                        "sample model shipped with the package")
    add_jobs(p)


def summarize(path: str, data: Sequence[str] = ()) -> Json:
    """The facts ``info`` prints, as plain JSON-able data (``data``: a program's data
    files)."""
    return _summary(path, data)[1]


def _summary(path: str, data: Sequence[str]) -> Tuple[Type[FileFormat], Json]:
    """The file's adapter, and the facts ``info`` prints."""
    with open_file(path, data) as f:
        return type(f), f.summary()


def _tried(path: str, data: Sequence[str]
           ) -> Tuple[Optional[Tuple[Type[FileFormat], Json]], Optional[Exception]]:
    """:func:`_summary`, or the error that stopped it (reported in the files' order)."""
    try:
        return _summary(path, data), None
    except (FormatError, OSError) as e:
        return None, e


def run(ctx: Context) -> int:
    """Describe each file."""
    paths = expand_paths(ctx.args.paths) if ctx.args.paths else iter([SAMPLE])
    docs: List[Json] = []
    status = EXIT_OK
    for k, (path, (found, error)) in enumerate(
            in_order(lambda p: (p, _tried(p, ctx.args.data)), paths, ctx.args.jobs)):
        if found is None:
            assert error is not None   # _tried gives one or the other
            report(ctx, path, error)
            status = EXIT_FAIL
            continue
        adapter, summary = found
        if ctx.json:
            docs.append(summary)
        else:
            if k:
                ctx.print()
            adapter.print_info(ctx, summary)
    if ctx.json and docs:
        ctx.dump({"files": docs})
    return status
