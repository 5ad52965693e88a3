"""``pyflatmodule extract``: one extra file's (or jit source's) bytes, to stdout or a file."""
from __future__ import annotations

import argparse
from typing import Union

from ..files import file_format
from .common import EXIT_OK, Context, Json, refuse_input_as_output, write_error
from .formats import open_file

HELP = "one extra file's bytes, to stdout or a file"

EXAMPLES = """examples:
  pyflatmodule extract model.ptl model_info.json          to stdout
  pyflatmodule extract model.ptl model_info.json -o info.json
  pyflatmodule extract model.ptl __torch__ --jit-source   TorchScript source text
  pyflatmodule extract tests.bpte program -o model.pte    a bundled program's program
"""


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The command's arguments."""
    p.add_argument("path", metavar="PATH")
    p.add_argument("name", metavar="NAME",
                   help="extra file name (see `info`); for ExecuTorch files a named data key "
                        "or METHOD.delegates[I] (see `tree`), for a bundled program also "
                        "`program`, the embedded .pte")
    p.add_argument("-o", "--output", metavar="FILE", help="write to FILE (default: stdout)")
    p.add_argument("--jit-source", action="store_true",
                   help="NAME is a TorchScript source file (e.g. __torch__), not an extra file")


def run(ctx: Context) -> int:
    """Write one extra file (or jit source; for ExecuTorch files one named data entry or
    delegate payload) to stdout or a file."""
    args = ctx.args
    if args.output not in (None, "-"):
        refuse_input_as_output(args.path, args.output)
    with open_file(args.path, args.data) as f:
        data, kind = f.extract(args.name, args.jit_source)
        return _write(ctx, data, kind)


def _write(ctx: Context, data: Union[bytes, memoryview], kind: str) -> int:
    """Write ``data`` (bytes, or a zero-copy view of the mapped file) where asked."""
    args = ctx.args
    to_stdout = args.output in (None, "-")
    if not to_stdout:
        try:
            with open(args.output, "wb") as f:
                f.write(data)
        except OSError as exc:
            raise write_error(args.output, exc) from None
    if ctx.json:
        import base64
        import hashlib
        doc: Json = {"file": args.path, "format": file_format(args.path),
                     "name": args.name, "kind": kind,
                     "size": len(data), "sha256": hashlib.sha256(data).hexdigest(),
                     "output": None if to_stdout else args.output}
        if to_stdout:
            doc["content_base64"] = base64.b64encode(data).decode("ascii")
        ctx.dump({"files": [doc]})
    elif to_stdout:
        ctx.out.flush()
        out = getattr(ctx.out, "buffer", None)
        if out is None:
            ctx.out.write(bytes(data).decode("utf-8", "backslashreplace"))
        else:
            out.write(data)
            out.flush()
    return EXIT_OK
