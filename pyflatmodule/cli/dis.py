"""``pyflatmodule dis``: bytecode disassembly with operators, constants, registers and schema
(``Function.disassembly``, formatted)."""
from __future__ import annotations

import argparse

from ..files import file_format
from .common import EXIT_OK, Context, add_module_names, add_names, names_for, note_no_methods
from .formats import open_file

HELP = "bytecode disassembly with operators, constants, registers and schema"

EXAMPLES = """examples:
  pyflatmodule dis model.ptl                  every method
  pyflatmodule dis model.ptl forward          one method (short or qualified name)
  pyflatmodule dis model.ptl --all            also __setstate__ and other functions
  pyflatmodule dis model.pte forward          an ExecuTorch method's instruction chains
  pyflatmodule dis model.pte --names model.etrecord
                                              constants by the module's names

a file without methods (e.g. a parameters file) lists nothing: a note on stderr, exit 0
"""


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The command's arguments."""
    p.add_argument("path", metavar="PATH")
    p.add_argument("method", nargs="?", metavar="METHOD",
                   help="qualified (__torch__.Net.forward) or short (forward) name")
    p.add_argument("--all", action="store_true",
                   help="every function in the file, not only the module's methods")
    add_names(p)


def run(ctx: Context) -> int:
    """Disassemble the chosen methods."""
    args = ctx.args
    with open_file(args.path, args.data) as f:
        listing = f.listing(args.method, args.all)
        if args.names is not None:
            add_module_names(listing.entries, names_for(f.tensors(), args.names, f.file), "tensor")
    status = EXIT_OK
    if listing.note is not None:
        status = note_no_methods(ctx, args.path, listing.note)
    if ctx.json:
        ctx.dump({"files": [{"file": args.path, "format": file_format(args.path),
                             "methods": listing.entries}]})
    else:
        for k, entry in enumerate(listing.entries):
            if k:
                ctx.print()
            f.print_entry(ctx, entry)
    return status
