"""``pyflatmodule diff``: what changed between two files of one format (``diff.diff``)."""
from __future__ import annotations

import argparse
import math
from typing import TYPE_CHECKING, Any, Optional, Sequence

from ..errors import FormatError
from ..files import file_format
from .common import (
    EXIT_OK,
    EXIT_USAGE,
    CliError,
    Context,
    Json,
    add_names,
    invalid,
    json_value,
    read_reference,
)
from .formats import FileFormat, open_file

if TYPE_CHECKING:
    from ..diff import Diff, TensorDiff
    from ..naming import ModuleTensors

HELP = "what changed between two files of one format: structure and tensors"

EXAMPLES = """examples:
  pyflatmodule diff old.pte new.pte           structure, then every tensor that differs
  pyflatmodule diff a.ptl b.ptl --json        everything, equal tensors included
  pyflatmodule diff a.pte b.pte --all         list equal tensors too
  pyflatmodule diff a.pte b.pte --data-a a.ptd --data-b b.ptd
                                              each program with its own data files
  pyflatmodule diff a.pte b.pte --names-a a.etrecord --names-b b.etrecord
                                              tensors paired and shown by module name

tensors are matched by name, then in programs by role (the operator call and argument,
or the delegate node and input, that reads them), in other files by position and shape,
and compared chunk by chunk from the mappings. --data gives both sides a data file;
--names (--etrecord) names both sides' tensors from one reference, --names-a and
--names-b each side's from its own (its ETRecord, or a .safetensors / .npz of the
module's state_dict()): tensors the reference holds pair by the module's names.
exit status: 0 the files are equal, 1 they differ, 2 trouble (usage, a file that cannot
be read or is not valid, files of two formats), as diff(1)
"""

#: diff(1)'s statuses: equal, different, trouble.
EXIT_SAME, EXIT_DIFFERENT, EXIT_TROUBLE = 0, 1, 2


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The command's arguments."""
    p.add_argument("a", metavar="A")
    p.add_argument("b", metavar="B")
    p.add_argument("--all", action="store_true", help="list equal tensors too")
    p.add_argument("--data-a", action="append", default=[], metavar="PTD",
                   help="a data file of A only (repeatable)")
    p.add_argument("--data-b", action="append", default=[], metavar="PTD",
                   help="a data file of B only (repeatable)")
    add_names(p)
    for side in "ab":
        p.add_argument(f"--names-{side}", metavar="REF",
                       help=f"as --names, for {side.upper()} only")


def _tensor_doc(t: TensorDiff) -> Json:
    return {"a": t.name_a, "b": t.name_b, "status": t.status, "dtype": t.dtype,
            "shape": list(t.shape), "differing": t.differing, "max_abs": t.max_abs,
            "max_rel": t.max_rel, "note": t.note}


def to_json(a: str, b: str, d: Diff) -> Json:
    """The JSON document ``diff --json`` prints: A and B as ``files``, then what differs."""
    counts = {s: sum(t.status == s for t in d.tensors)
              for s in ("equal", "changed", "only_a", "only_b")}
    return {"files": [{"file": p, "format": file_format(p)} for p in (a, b)],
            "equal": d.equal,
            "structure": [{"what": c.what, "a": json_value(c.a), "b": json_value(c.b)}
                          for c in d.structure],
            "tensors": counts, "tensor_diffs": [_tensor_doc(t) for t in d.tensors]}


def _line(ctx: Context, t: TensorDiff) -> str:
    st = ctx.style
    shape = f"{t.dtype}{list(t.shape)}"
    if t.status == "only_a":
        return f"  {st('only in A', 'red')}  {t.name_a}  {shape}"
    if t.status == "only_b":
        return f"  {st('only in B', 'green')}  {t.name_b}  {shape}"
    name = t.name_a if t.name_a == t.name_b else f"{t.name_a} ~ {t.name_b}"
    if t.status == "equal":
        return f"  {st('equal', 'dim')}      {name}  {shape}"
    numel = math.prod(t.shape)
    text = f"  {st('changed', 'yellow')}    {name}  {shape}"
    if t.differing:
        text += (f": {t.differing:,} of {numel:,} elements differ, max abs {t.max_abs:.6g}, "
                 f"max rel {t.max_rel:.6g}")
    return text + (f" ({t.note})" if t.note else "")


def run(ctx: Context) -> int:
    """Compare A with B; exit 0 when equal, 1 when different."""
    args = ctx.args
    with _open(args.a, args.data + args.data_a) as fa, \
            _open(args.b, args.data + args.data_b) as fb:
        try:
            from ..diff import diff  # with what it compares: only for this command
            d = diff(fa.file, fb.file, names_a=_reference(args.names_a or args.names),
                     names_b=_reference(args.names_b or args.names))
        except ValueError as e:
            if isinstance(e, FormatError):   # found reading a value: the file is bad
                # A and B are of one format: A names it
                raise CliError(invalid(args.a, e), e.code, EXIT_TROUBLE) from None
            raise CliError(str(e), "usage", EXIT_USAGE) from None
        doc = to_json(args.a, args.b, d)
    if ctx.json:
        ctx.dump(doc)
        return EXIT_SAME if d.equal else EXIT_DIFFERENT
    st = ctx.style
    ctx.print(f"{st(args.a, 'bold')} vs {st(args.b, 'bold')}: {d.format}s, "
              f"{'equal' if d.equal else 'different'}")
    if d.structure:
        ctx.print("structure:")
        for c in d.structure:
            ctx.print(f"  {c.what}: {_short(c.a)} -> {_short(c.b)}")
    counts = doc["tensors"]
    ctx.print(f"tensors: {counts['equal']} equal, {counts['changed']} changed, "
              f"{counts['only_a']} only in A, {counts['only_b']} only in B")
    for t in d.tensors:
        if args.all or t.status != "equal":
            ctx.print(_line(ctx, t))
    return EXIT_OK if d.equal else EXIT_DIFFERENT


def _reference(path: Optional[str]) -> Optional[ModuleTensors]:
    """The module's tensors at ``path``, once read; one that cannot be is trouble (exit
    2), as diff(1) has it."""
    if path is None:
        return None
    try:
        return read_reference(path)
    except CliError as e:
        e.status = EXIT_TROUBLE
        raise


def _open(path: str, data: Sequence[str]) -> FileFormat:
    """The opened file; any failure is trouble (exit 2), as diff(1) has it."""
    try:
        return open_file(path, data)
    except FormatError as e:
        raise CliError(invalid(path, e), e.code, EXIT_TROUBLE, file=path) from None
    except OSError as e:
        raise CliError(e.strerror or str(e), "io_error", EXIT_TROUBLE, file=path) from None


def _short(value: Any, limit: int = 70) -> str:
    text = "absent" if value is None else repr(value)
    return text if len(text) <= limit else text[:limit - 3] + "..."
