"""``pyflatmodule verify``: check model files completely, one line per file: local files,
directories, URLs and URL prefixes (a store's audit), ``--jobs`` of them at once."""
from __future__ import annotations

import argparse
import os
import stat
import time
from typing import List, Optional, Sequence, Tuple, Type, Union

from ..errors import FormatError
from ..files import RemoteFile, file_format, is_remote
from .common import (
    EXIT_FAIL,
    EXIT_OK,
    EXIT_USAGE,
    MODEL_SUFFIXES,
    CliError,
    Context,
    Json,
    Style,
    add_jobs,
    error_doc,
    expand_paths,
    in_order,
)
from .formats import FileFormat, format_of

HELP = "check model files completely; one line per file"

EXAMPLES = """examples:
  pyflatmodule verify model.ptl         one line per file: OK or INVALID [code] offset, path
  pyflatmodule verify -q models/        recurse into models/, print only invalid files
  find /data -name '*.ptl' | pyflatmodule verify --stats -
  pyflatmodule verify https://host/m.pte  a program on a server: its flatbuffer and the
                                        delegate payloads it checks are read, not its weights
  pyflatmodule verify -j 16 -q s3://bucket/models/   audit a store: every model file under
                                        the prefix, 16 at a time (fsspec lists it)
  pyflatmodule verify -j 16 - < urls.txt  a file of URLs (and paths), one a line
  pyflatmodule verify --json a.ff b.ff  {"files": [{"file", "format", "valid", ...}],
                                         "valid": n, "invalid": n}

exit status: 0 every file is valid, 1 any is not, 2 usage error
"""


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The command's arguments."""
    p.add_argument("paths", nargs="+", metavar="PATH",
                   help="model files, directories (searched for .ptl/.ff/.pte/.ptd), URLs, "
                        "URL prefixes ending in / (listed through fsspec) or - (paths and "
                        "URLs on stdin)")
    p.add_argument("--strict", action="store_true",
                   help="FlatBuffers' own rules (rejects torch's >2 GiB wrapped vtables)")
    p.add_argument("-q", "--quiet", action="store_true", help="print only invalid files")
    add_jobs(p)


def _format_name(path: str) -> Optional[str]:
    """The format :func:`pyflatmodule.files.file_format` names, None for a path that
    is not a regular file or a block device (never read: a FIFO would block) or cannot
    be read."""
    try:
        mode = os.stat(path).st_mode
        return file_format(path) if stat.S_ISREG(mode) or stat.S_ISBLK(mode) else None
    except OSError:
        return None


def verify_one(path: str, strict: bool,
               data: Sequence[str] = ()) -> Tuple[Json, Optional[Type[FileFormat]]]:
    """``{"file", "format", "valid": true, ...report fields}`` and the file's adapter, or
    ``{"file", "format", "valid": false, "error"}`` and None (``format``: ``"unknown"``
    for a file of no known format, None for one that cannot be read)."""
    try:
        if os.path.isdir(path):
            raise IsADirectoryError(21, "is a directory", path)
        # A URL's first bytes are read once: for its format, then for its open.
        source: Union[str, RemoteFile] = RemoteFile(path) if is_remote(path) else path
        adapter = format_of(source)
        fields = adapter.verify(source, strict, data)
    except (FormatError, OSError) as e:
        return _invalid(path, e), None
    except Exception as e:          # a reader bug must not stop a run over thousands
        if os.environ.get("PYFLATMODULE_DEBUG"):
            raise
        return _invalid(path, e), None
    return {"file": path, "format": fields.pop("format"), "valid": True, **fields}, adapter


def _invalid(path: str, exc: BaseException) -> Json:
    return {"file": path, "format": None if is_remote(path) else _format_name(path),
            "valid": False, "error": error_doc(path, exc)}


def verify_text(st: Style, result: Json, adapter: Optional[Type[FileFormat]]) -> str:
    """The one line ``verify`` prints for a file (``adapter``: its format's, when valid)."""
    if adapter is not None:
        return f"{result['file']}: {st('OK', 'green', 'bold')} ({adapter.verify_line(result)})"
    e = result["error"]
    where = []
    if e["offset"] is not None:
        where.append(f"offset {e['offset']}")
    if e["path"]:
        where.append(f"at {e['path']}")
    return (f"{result['file']}: {st('INVALID', 'red', 'bold')} [{e['code']}]"
            f"{' ' + ' '.join(where) if where else ''}: {e['message']}")


def run(ctx: Context) -> int:
    """Check each file; exit 1 if any is invalid."""
    args = ctx.args
    results: List[Json] = []
    counts = [0, 0]
    start = time.perf_counter()
    seen_any = False
    for result, adapter in in_order(
            lambda path: verify_one(path, args.strict, args.data), expand_paths(args.paths),
            args.jobs):
        seen_any = True
        counts[0 if result["valid"] else 1] += 1
        if ctx.json:
            results.append(result)
        elif not (args.quiet and result["valid"]):
            ctx.print(verify_text(ctx.style, result, adapter))
    elapsed = time.perf_counter() - start
    if not seen_any:
        raise CliError("no model files given (directories are searched for "
                       f"{'/'.join(MODEL_SUFFIXES)} files)", "usage", EXIT_USAGE)
    if ctx.json:
        ctx.dump({"files": results, "valid": counts[0], "invalid": counts[1]})
    if args.stats:
        n = counts[0] + counts[1]
        rate = n / elapsed if elapsed > 0 else float("inf")
        ctx.err.write(f"{n} files: {counts[0]} valid, {counts[1]} invalid, "
                      f"{elapsed:.2f} s ({rate:,.0f} files/s)\n")
    return EXIT_OK if counts[1] == 0 else EXIT_FAIL
