"""The ``pyflatmodule`` command line (also ``python -m pyflatmodule``).

Commands: ``info``, ``verify``, ``tree``, ``dis``, ``ops``, ``memory``, ``size``,
``profile``, ``shared``, ``export``, ``extract``, ``diff``; each reads PTMF models
(``.ptl``/``.ff``), ExecuTorch programs (``.pte``) and data files (``.ptd``); ``profile``
reads ETDumps (``.etdump``). ``diff`` exits as diff(1) does: 0 equal, 1 different, 2
trouble. Every command takes ``--json`` (one JSON document on stdout; shapes documented
in docs/json.md), prints errors on stderr and exits non-zero: 0 success, 1 a bad or
unreadable model file (or a name that is not in it) or an output that cannot be written,
2 a usage error (an output that is the input model, also through a link, is one). An
error is reported in one line naming the file at fault, never with a traceback. ``ops``,
``dis`` and ``memory`` on a file without methods (a data file, an ETDump, a parameters
file) say so and exit 1: an empty answer would pass for one. Colour is used only when the
output is a terminal and ``NO_COLOR`` is not set (``--color`` overrides). Nothing here
imports torch, nor ml_dtypes unless a file needs it.
"""
from __future__ import annotations

import argparse
import os
import sys
from typing import Any, List, Optional

from ..core.names import plural
from ..errors import FormatError
from ..files import TOTAL
from . import diff, dis, export, extract, info, memory, ops, profile, shared, size, tree, verify
from .common import EXIT_FAIL, EXIT_OK, EXIT_USAGE, SAMPLE, CliError, Context, report
from .info import summarize

__all__ = ["SAMPLE", "build_parser", "main", "summarize"]

#: The commands, in the order ``--help`` lists them.
COMMANDS = {"info": info, "verify": verify, "tree": tree, "dis": dis, "ops": ops,
            "memory": memory, "size": size, "profile": profile, "shared": shared,
            "export": export, "extract": extract, "diff": diff}

EXAMPLES = """examples:
  pyflatmodule info                          describe the sample model shipped with the package
  pyflatmodule verify models/                check every .ptl/.ff/.pte/.ptd file under models/
  pyflatmodule tree model.ptl --depth 2      the object hierarchy, two levels deep
  pyflatmodule dis model.ptl forward         disassemble a method
  pyflatmodule ops model.ptl --yaml          operator list for a selective build
  pyflatmodule profile run.etdump --program model.pte   where an ExecuTorch run's time went
  pyflatmodule export model.ptl w.safetensors   weights for another runtime
  pyflatmodule extract model.ptl meta.json   one extra file to stdout
  pyflatmodule diff old.pte new.pte          what changed between two builds
  pyflatmodule shared a.pte b.pte --data base.ptd   which program reads which key
  pyflatmodule size model.pte --html s.html  where a program's bytes go, as a treemap
  pyflatmodule info https://host/m.pte --stats  a program on a server: its header and
                                             flatbuffer are fetched, not its weights

exit status: 0 success, 1 invalid/unreadable model, missing name or unwritable output,
2 usage error (including an output that is the input model)
"""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> Any:
        self.print_usage(sys.stderr)
        sys.stderr.write(f"{self.prog}: error: {message}\n")
        raise SystemExit(EXIT_USAGE)


def build_parser() -> argparse.ArgumentParser:
    """The parser of every command."""
    from .. import __version__
    fmt = argparse.RawDescriptionHelpFormatter
    common = _Parser(add_help=False)
    common.add_argument("--json", action="store_true",
                        help="machine-readable output (one JSON document on stdout)")
    common.add_argument("--color", choices=("auto", "always", "never"), default="auto",
                        help="colour: auto (terminal and no NO_COLOR), always, never")
    common.add_argument("--data", action="append", default=[], metavar="PTD",
                        help="an ExecuTorch data file holding a program's external tensors "
                             "(repeatable; for .pte files; a path or a URL)")
    common.add_argument("--stats", action="store_true",
                        help="what the answer cost, on stderr at the end: requests made and "
                             "bytes fetched for URLs; for verify, also files and files/second")
    parser = _Parser(prog="pyflatmodule",
                     description="Inspect, verify, compare and convert PyTorch Mobile "
                                 "flatbuffer models (.ptl/.ff) and ExecuTorch programs and "
                                 "data files (.pte/.ptd) without torch.",
                     epilog=EXAMPLES, formatter_class=fmt)
    parser.add_argument("--version", action="version", version=f"pyflatmodule {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND",
                                parser_class=_Parser)
    for name, command in COMMANDS.items():
        p: argparse.ArgumentParser = sub.add_parser(
            name, help=command.HELP, description=command.HELP, parents=[common],
            epilog=command.EXAMPLES, formatter_class=fmt)
        command.add_arguments(p)
        p.set_defaults(run=command.run)
    return parser


def _file_of(args: argparse.Namespace) -> Optional[str]:
    path = getattr(args, "path", None)
    if path is not None:
        return str(path)
    paths = getattr(args, "paths", None)
    return str(paths[0]) if paths and len(paths) == 1 else None


def main(argv: Optional[List[str]] = None) -> int:
    """Run the command line; returns the exit status."""
    for stream in (sys.stdout, sys.stderr):
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None:
            try:
                reconfigure(errors="backslashreplace")
            except (ValueError, OSError):
                pass
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as e:
        return e.code if isinstance(e.code, int) else EXIT_USAGE
    ctx = Context(args)
    before = (TOTAL.requests, TOTAL.bytes)
    try:
        status: int = args.run(ctx)
        ctx.out.flush()
        return status
    except BrokenPipeError:
        # the reader went away (e.g. `| head`): stop quietly, like other Unix tools
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
        except (OSError, ValueError, AttributeError):
            pass
        return EXIT_OK
    except KeyboardInterrupt:
        ctx.err.write("pyflatmodule: interrupted\n")
        return 130
    except CliError as e:
        report(ctx, _file_of(args), e)
        return e.status
    except (FormatError, OSError) as e:
        report(ctx, _file_of(args), e)
        return EXIT_FAIL
    except Exception as e:
        if os.environ.get("PYFLATMODULE_DEBUG"):
            raise
        report(ctx, _file_of(args), e)
        return EXIT_FAIL
    finally:
        requests, nbytes = TOTAL.requests - before[0], TOTAL.bytes - before[1]
        if args.stats and requests:
            ctx.err.write(f"fetched: {plural(requests, 'request')}, {nbytes:,} bytes\n")
