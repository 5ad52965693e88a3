"""``pyflatmodule info``: versions, counts, methods, tensors by dtype, shared storages,
extra files."""
from __future__ import annotations

import argparse
from typing import List, Sequence, Tuple, Type

from ..errors import FormatError
from .common import EXIT_FAIL, EXIT_OK, SAMPLE, Context, Json, report
from .formats import FileFormat, open_file

HELP = ("versions, counts, methods, tensors by dtype, shared storages, extra files "
        "(ExecuTorch: methods, operators, delegates, constants, segments)")

EXAMPLES = """examples:
  pyflatmodule info                     describe the sample model shipped with the package
  pyflatmodule info model.ptl           versions, methods, tensors by dtype, extra files
  pyflatmodule info model.pte           an ExecuTorch program: methods, operators, delegates
  pyflatmodule info --json a.ff b.ff    {"files": [{"file", "format", ...}, ...]}
"""


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The command's arguments."""
    p.add_argument("paths", nargs="*", metavar="PATH",
                   help="model files (default: the sample model shipped with the package)")


def summarize(path: str, data: Sequence[str] = ()) -> Json:
    """The facts ``info`` prints, as plain JSON-able data (``data``: a program's data
    files)."""
    return _summary(path, data)[1]


def _summary(path: str, data: Sequence[str]) -> Tuple[Type[FileFormat], Json]:
    """The file's adapter, and the facts ``info`` prints."""
    with open_file(path, data) as f:
        return type(f), f.summary()


def run(ctx: Context) -> int:
    """Describe each file."""
    paths: List[str] = ctx.args.paths or [SAMPLE]
    docs: List[Json] = []
    status = EXIT_OK
    for k, path in enumerate(paths):
        try:
            adapter, summary = _summary(path, ctx.args.data)
        except (FormatError, OSError) as e:
            report(ctx, path, e)
            status = EXIT_FAIL
            continue
        if ctx.json:
            docs.append(summary)
        else:
            if k:
                ctx.print()
            adapter.print_info(ctx, summary)
    if ctx.json and docs:
        ctx.dump({"files": docs})
    return status
