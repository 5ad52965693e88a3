"""``pyflatmodule profile``: where an ExecuTorch run's time went, from its ETDump: per
block of runs, lines (per instruction, operator or delegate node) most time first, each
with its count, total, mean, min, max and share of the run, and a total line; named from
the program that ran when it is given (``FileFormat.profile``:
:func:`pyflatmodule.executorch.timings`, :func:`pyflatmodule.executorch.profile.rows`)."""
from __future__ import annotations

import argparse
import os
import re
from contextlib import ExitStack
from typing import Iterator, List, Optional

from ..core.names import plural
from .common import EXIT_OK, EXIT_USAGE, CliError, Context, Json
from .formats import open_file

HELP = ("an ExecuTorch profile (ETDump): where a run's time went, per instruction, operator "
        "or delegate node, most first")

EXAMPLES = """examples:
  pyflatmodule profile run.etdump                      names from the profile only
  pyflatmodule profile run.etdump --program model.pte  each instruction's operator or delegate
  pyflatmodule profile run.etdump --program model.pte --by operator --skip-runs 1
  pyflatmodule profile run.etdump --program model.pte --json
  pyflatmodule profile run.etdump --program model.pte --etrecord model.etrecord

per block of runs (the runtime's "Execute" runs of a method, its "Default" load), a line
per instruction (its OPERATOR_CALL or DELEGATE_CALL), per operator (--by operator: the
instructions calling one operator, or one delegate backend, summed) or per delegate node
(--by delegate-node: XNNPACK's events, one per node) or per module (--by module, with
--etrecord: each instruction in the innermost module holding its graph nodes), most time
first, with the runtime's
own events (Method::init) beside them; each with its count, total, mean, min, max and
share of the run (its Method::execute, or the load's Program::load_method), and a total
line. --skip-runs N leaves out the first N runs of each block (warm-up). ETDump ticks are
taken as nanoseconds, as ExecuTorch's POSIX platform ticks and its Inspector takes them;
times are printed in ms or us (the header says which), --json's in us. --etrecord: beneath
each line the nodes of the ETRecord's edge-dialect graph its debug handles name (operator
type, module path, source line), as ExecuTorch's Inspector ties events to them.
"""

#: The unit of --json's times.
UNIT = "us"
#: The text's times in ms when a block's run takes this many us or more.
MS_FROM = 10_000.0


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The command's arguments."""
    p.add_argument("path", metavar="RUN.etdump", help="an ETDump the runtime wrote")
    p.add_argument("--program", metavar="MODEL.pte",
                   help="the program that ran (.pte, .bpte): operators' and delegates' names "
                        "(--data: its data files)")
    p.add_argument("--etrecord", metavar="R.etrecord",
                   help="the program's ETRecord: each line's operator types, module path "
                        "and source line, from its edge-dialect graph's nodes")
    p.add_argument("--by", choices=_Ways(), default="instruction", metavar="HOW",
                   help="a line per instruction (the default), operator, delegate-node or "
                        "module (with --etrecord)")
    p.add_argument("--skip-runs", type=int, default=0, metavar="N",
                   help="leave out the first N runs of each block (warm-up)")


class _Ways:
    """``--by``'s choices, read from the profile's own when they are first needed (a
    profile given, or the help): another command does not import the profile's code."""

    def __contains__(self, way: object) -> bool:
        from .formats.etdump import PROFILE_BY
        return way in PROFILE_BY

    def __iter__(self) -> Iterator[str]:
        from .formats.etdump import PROFILE_BY
        return iter(PROFILE_BY)


#: A frame of a stack trace as Python prints it.
_FRAME = re.compile(r'File "([^"]*)", line (\d+)')


def _source(trace: Optional[str]) -> Optional[str]:
    """A stack trace's innermost frame: ``file.py:N: code``."""
    if not trace:
        return None
    lines = trace.splitlines()
    at = [i for i, line in enumerate(lines) if _FRAME.search(line)]
    if not at:
        return None
    m = _FRAME.search(lines[at[-1]])
    assert m is not None
    code = lines[at[-1] + 1].strip() if at[-1] + 1 < len(lines) else ""
    return f"{os.path.basename(m.group(1))}:{m.group(2)}" + (f": {code}" if code else "")


def _recorded(ctx: Context, row: Json, indent: str) -> None:
    """Beneath a line, what the ETRecord ties to it: each graph node's operator type,
    module path and source line."""
    for n in row.get("nodes", []):
        where = _source(n["stack_trace"])
        ctx.print(ctx.style(f"{indent}{n['op_type']}"
                            + (f" in {n['module_path'] or '(top)'}"
                               if n["module_path"] is not None else "")
                            + (f" at {where}" if where else ""), "dim"))


def _print(ctx: Context, doc: Json) -> None:
    st = ctx.style
    ctx.print(f"{st(doc['file'], 'bold')}: ExecuTorch profile"
              + (f" of {doc['program']}" if doc["program"] else "")
              + (f" with {doc['etrecord']}" if doc["etrecord"] else "")
              + f", by {doc['by']}"
              + (f", first {plural(doc['skip_runs'], 'run')} of each block left out"
                 if doc["skip_runs"] else ""))
    for b in doc["blocks"]:
        method = f", method {st(b['method'], 'bold')}" if b["method"] else ""
        ctx.print(f"{st('run', 'magenta')} {st(str(b['name']), 'bold')}{method}: "
                  f"{plural(b['runs'], 'run')}"
                  + (f" ({b['skipped']} left out)" if b["skipped"] else "")
                  + (f", bundled input {b['bundled_input_index']}"
                     if b["bundled_input_index"] >= 0 else ""))
        unit, scale = ("ms", 1000.0) if b["total"] >= MS_FROM else ("us", 1.0)
        rows: List[Json] = b["rows"]
        width = max([len("total"), len("line")] + [len(r["label"]) for r in rows])
        where = max([len("at")] + [len(",".join(r["instructions"])) for r in rows])
        ctx.print(st(f"  {'at':<{where}s} {'line':<{width}s} {'count':>6s} "
                     f"{'total ' + unit:>11s} {'mean ' + unit:>10s} {'min ' + unit:>10s} "
                     f"{'max ' + unit:>10s} {'%':>6s}", "dim"))
        for r in rows:
            pct = f"{r['percent']:6.1f}" if r["percent"] is not None else f"{'':6s}"
            ctx.print(f"  {','.join(r['instructions']):<{where}s} {r['label']:<{width}s} "
                      f"{r['count']:>6,d} {r['total'] / scale:>11,.3f} "
                      f"{r['mean'] / scale:>10,.3f} {r['min'] / scale:>10,.3f} "
                      f"{r['max'] / scale:>10,.3f} {pct}")
            _recorded(ctx, r, f"  {'':<{where}s}   ")
        ctx.print(st(f"  {'':<{where}s} {'total':<{width}s} {b['runs']:>6,d} "
                     f"{b['total'] / scale:>11,.3f} "
                     f"{b['total'] / scale / max(b['runs'], 1):>10,.3f}", "bold"))


def run(ctx: Context) -> int:
    """Print the profile's lines."""
    args = ctx.args
    if args.data and args.program is None:
        raise CliError("--data is for the program (--program)", "usage", EXIT_USAGE,
                       file=args.path)
    if args.by == "module" and args.etrecord is None:
        raise CliError("--by module needs the program's ETRecord (--etrecord)", "usage",
                       EXIT_USAGE, file=args.path)
    if args.skip_runs < 0:
        raise CliError(f"--skip-runs {args.skip_runs}: a count of runs is not negative",
                       "usage", EXIT_USAGE, file=args.path)
    with ExitStack() as stack:
        f = stack.enter_context(open_file(args.path))
        program = stack.enter_context(open_file(args.program, args.data)) \
            if args.program is not None else None
        record = stack.enter_context(open_file(args.etrecord)) \
            if args.etrecord is not None else None
        blocks = f.profile(program, args.by, args.skip_runs, record)
    if blocks is None:
        raise CliError("is not an ETDump (a profile the ExecuTorch runtime writes)",
                       "unsupported", file=args.path)
    doc = {"file": args.path, "format": "etdump", "program": args.program,
           "etrecord": args.etrecord, "unit": UNIT,
           "by": args.by, "skip_runs": args.skip_runs, "blocks": blocks}
    if ctx.json:
        ctx.dump({"files": [doc]})
    else:
        _print(ctx, doc)
    return EXIT_OK
