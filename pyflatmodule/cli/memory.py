"""``pyflatmodule memory``: an ExecuTorch program's memory plan, per method."""
from __future__ import annotations

import argparse
from typing import List

from ..core.names import plural
from ..files import file_format
from .common import (
    EXIT_FAIL,
    EXIT_OK,
    CliError,
    Context,
    Json,
    human,
    no_methods,
    refuse_input_as_output,
    refuse_special_output,
    write_error,
)
from .formats import open_file

HELP = "where an ExecuTorch program's planned tensors live, and for how long"

EXAMPLES = """examples:
  pyflatmodule memory model.pte               each method's buffers, peak and tensors
  pyflatmodule memory model.pte forward --json
  pyflatmodule memory model.pte --svg plan.svg   also a picture: instructions across,
                                                 offsets down, a rectangle per tensor

each planned tensor: its value, buffer, byte range and lifetime (the instructions,
counted across the chains, that name it). Two tensors whose bytes overlap while both
are alive are a planning bug: they are listed, and the exit status is 1.
"""


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The command's arguments."""
    p.add_argument("path", metavar="PATH", help="an ExecuTorch program (.pte, .bpte)")
    p.add_argument("method", nargs="?", help="one method (default: every one)")
    p.add_argument("--svg", metavar="PLAN.svg",
                   help="write a picture of the plans (SVG, self-contained; a tooltip per "
                        "tensor names its value, size and lifetime; conflicts in red)")


def _print(ctx: Context, doc: Json) -> None:
    st = ctx.style
    buffers = doc["buffer_sizes"][1:]
    ctx.print(f"{st('method', 'magenta')} {st(doc['method'], 'bold')}: "
              f"{len(doc['tensors'])} planned tensors in {plural(len(buffers), 'buffer')} "
              f"({', '.join(human(b) for b in buffers) or 'none'}), peak alive "
              f"{human(doc['peak'])}, {doc['instructions']} instructions")
    for t in sorted(doc["tensors"], key=lambda t: (t["mem_id"], t["offset"], t["value"])):
        life = "unused" if t["first"] is None else f"{t['first']}..{t['last']}"
        ctx.print(f"  %{t['value']:<5d} buffer {t['mem_id']}  "
                  f"[{t['offset']:>8,} .. {t['offset'] + t['nbytes']:>8,})  "
                  f"{human(t['nbytes']):>9s}  live {life}")
    for a, b in doc["conflicts"]:
        ctx.print(st(f"  conflict: %{a} and %{b} share bytes while both are alive", "red"))


def run(ctx: Context) -> int:
    """Print each method's plan."""
    args = ctx.args
    if args.svg is not None:
        refuse_input_as_output(args.path, args.svg)
        refuse_special_output(args.svg)
    with open_file(args.path, args.data) as f:
        plans = f.memory_plans()
        methodless = plans is None and f.operators() is None
    if methodless:
        raise no_methods(args.path, "only ExecuTorch programs plan memory ahead")
    if plans is None:
        raise CliError("has no memory plan: only ExecuTorch programs plan memory ahead",
                       "unsupported", file=args.path)
    names = [d["method"] for d in plans]
    if args.method is not None and args.method not in names:
        raise CliError(f"no method {args.method!r} (methods: {', '.join(names) or 'none'})",
                       "not_found", file=args.path)
    docs: List[Json] = [d for d in plans if args.method in (None, d["method"])]
    if args.svg is not None:
        from .plan_svg import plan_svg  # it imports html: loaded for --svg alone
        try:
            with open(args.svg, "w", encoding="utf-8") as out:
                out.write(plan_svg(docs))
        except OSError as e:
            raise write_error(args.svg, e) from None
    if ctx.json:
        ctx.dump({"files": [{"file": args.path, "format": file_format(args.path),
                             "methods": docs}]})
    else:
        for doc in docs:
            _print(ctx, doc)
    return EXIT_FAIL if any(d["conflicts"] for d in docs) else EXIT_OK
