"""``pyflatmodule profile``: an ETDump's timings per instruction (count, mean, min, max),
named from the program that ran when it is given (``FileFormat.profile``:
:func:`pyflatmodule.executorch.timings`)."""
from __future__ import annotations

import argparse
from contextlib import ExitStack
from typing import List, Optional, Tuple

from ..core.names import plural
from .common import EXIT_OK, EXIT_USAGE, CliError, Context, Json
from .formats import open_file

HELP = "an ExecuTorch profile (ETDump): each instruction's count, mean, min and max time"

EXAMPLES = """examples:
  pyflatmodule profile run.etdump                      names from the profile only
  pyflatmodule profile run.etdump --program model.pte  each instruction's operator or delegate
  pyflatmodule profile run.etdump --program model.pte --json

per block of runs (the runtime's "Execute" runs of a method, its "Default" load), each
instruction's time (OPERATOR_CALL, DELEGATE_CALL) and, beneath it, the kernel's and the
delegate's own events (XNNPACK: one per node), with the runtime's events (Method::execute)
first. Times are ETDump ticks: the file does not say their unit (ExecuTorch's POSIX
platform ticks in nanoseconds; XNNPACK's node times are its microseconds in ticks).
"""

#: What the file says of its times' unit: nothing, they are the tracer's ticks.
UNIT = "ticks"


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The command's arguments."""
    p.add_argument("path", metavar="RUN.etdump", help="an ETDump the runtime wrote")
    p.add_argument("--program", metavar="MODEL.pte",
                   help="the program that ran (.pte, .bpte): operators' and delegates' names "
                        "(--data: its data files)")


def _what(i: Json) -> str:
    """An instruction's label: its operator or delegate, else what its events say."""
    if i["operator"] is not None:
        return str(i["operator"])
    if i["delegate"] is not None:
        return f"{i['delegate']} (delegate {i['delegate_index']})"
    if i["kernel"] is not None:
        return f"{i['kernel']} (kernel)"
    return i["kind"] or "instruction"


def _rows(b: Json) -> List[Tuple[str, str, Optional[Json]]]:
    """A block's table: (chain:instruction, label, timing) per line."""
    rows: List[Tuple[str, str, Optional[Json]]] = [("", t["name"] or "", t)
                                                   for t in b["framework"]]
    for i in b["instructions"]:
        rows.append((f"{i['chain']}:{i['instruction']}", _what(i), i["call"]))
        rows += [("", "  " + (t["name"] or "") if t["delegate_debug_id"] is None
                  else f"  {t['delegate_debug_id']}", t) for t in i["events"]]
    return rows


def _print(ctx: Context, doc: Json) -> None:
    st = ctx.style
    ctx.print(f"{st(doc['file'], 'bold')}: ExecuTorch profile"
              + (f" of {doc['program']}" if doc["program"] else "")
              + "; times in ETDump ticks (their unit is not in the file)")
    for b in doc["blocks"]:
        method = f", method {st(b['method'], 'bold')}" if b["method"] else ""
        ctx.print(f"{st('run', 'magenta')} {st(str(b['name']), 'bold')}{method}: "
                  f"{plural(b['runs'], 'run')}"
                  + (f", bundled input {b['bundled_input_index']}"
                     if b["bundled_input_index"] >= 0 else ""))
        rows = _rows(b)
        width = max([len("event")] + [len(label) for _, label, _ in rows])
        ctx.print(st(f"  {'chain:pc':<8s} {'event':<{width}s} {'count':>6s} {'mean':>13s} "
                     f"{'min':>11s} {'max':>11s}", "dim"))
        for where, label, t in rows:
            text = f"  {where:<8s} {label:<{width}s}"
            ctx.print(text if t is None else
                      f"{text} {t['count']:>6,d} {t['mean']:>13,.1f} {t['min']:>11,d} "
                      f"{t['max']:>11,d}")


def run(ctx: Context) -> int:
    """Print the profile's timings."""
    args = ctx.args
    if args.data and args.program is None:
        raise CliError("--data is for the program (--program)", "usage", EXIT_USAGE,
                       file=args.path)
    with ExitStack() as stack:
        f = stack.enter_context(open_file(args.path))
        program = stack.enter_context(open_file(args.program, args.data)) \
            if args.program is not None else None
        blocks = f.profile(program)
    if blocks is None:
        raise CliError("is not an ETDump (a profile the ExecuTorch runtime writes)",
                       "unsupported", file=args.path)
    doc = {"file": args.path, "format": "etdump", "program": args.program, "unit": UNIT,
           "blocks": blocks}
    if ctx.json:
        ctx.dump({"files": [doc]})
    else:
        _print(ctx, doc)
    return EXIT_OK
