"""``pyflatmodule ops``: the operators models need, as ``torch.jit.export_opnames``."""
from __future__ import annotations

import argparse
import json
from typing import List, Optional, Sequence, Set, Tuple

from ..core.names import plural
from ..files import file_format
from .common import EXIT_OK, Context, Json, note_no_methods
from .formats import open_file

HELP = "operators the model needs (as torch.jit.export_opnames)"

EXAMPLES = """examples:
  pyflatmodule ops model.ptl                  one operator a line, e.g. aten::add.Tensor
  pyflatmodule ops --yaml a.ptl b.ptl > ops.yaml   union, as a YAML list for a
                                              selective build (SELECTED_OP_LIST)
  pyflatmodule ops model.pte                  an ExecuTorch program's kernel operators,
                                              e.g. aten::add.out
  pyflatmodule ops --delegates model.pte      and what its delegates run, e.g.
                                              XnnpackBackend::XNNConv2d
  pyflatmodule ops --json a.ptl b.pte         {"files": [{"file", "format", "operators",
                                              "delegate_operators"}], "operators": union}

a file without methods (e.g. a parameters file) needs no operators: a note on stderr,
exit 0
"""


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The command's arguments."""
    p.add_argument("paths", nargs="+", metavar="PATH", help="model files (the union is printed)")
    p.add_argument("--yaml", action="store_true", help="a YAML list, for a selective build")
    p.add_argument("--delegates", action="store_true",
                   help="also what the delegates run (an XNNPACK graph's node kinds)")


def operator_names(path: str, data: Sequence[str] = ()) -> Tuple[Optional[List[str]], List[str]]:
    """The operators a model needs, as ``torch.jit.export_opnames`` names them (an
    ExecuTorch program's kernel operators as ``name.overload``; None for a file without
    methods), and what its delegates run (``BACKEND::KIND``)."""
    with open_file(path, data) as f:
        return f.operators(), f.delegate_operators()


def yaml_scalar(text: str) -> str:
    """A YAML scalar: plain when safe, else double-quoted (JSON escapes are YAML's)."""
    if text and (text[0].isalpha() or text[0] == "_") and all(
            c.isalnum() or c in "_:.-" for c in text) and not text.endswith(":") and \
            text.lower() not in ("true", "false", "yes", "no", "on", "off", "null", "y", "n"):
        return text
    return json.dumps(text)


def run(ctx: Context) -> int:
    """Print the union of the files' operators."""
    names: Set[str] = set()
    files: List[Json] = []
    status = EXIT_OK
    for path in ctx.args.paths:
        found, delegated = operator_names(path, ctx.args.data)
        files.append({"file": path, "format": file_format(path), "operators": found,
                      "delegate_operators": delegated})
        if found is None:
            status = note_no_methods(ctx, path, "it needs no operators")
        names.update(found or ())
        if ctx.args.delegates:
            names.update(delegated)
        elif found == [] and delegated and not ctx.json:
            ctx.err.write(ctx.err_style("pyflatmodule: ", "bold") +
                          f"{path}: calls no kernel operator; its delegates run "
                          f"{plural(len(delegated), 'kind')} of node "
                          f"(--delegates lists them)\n")
    ordered = sorted(names)
    if ctx.json:
        ctx.dump({"files": files, "operators": ordered})
    elif ctx.args.yaml:
        ctx.print("\n".join(f"- {yaml_scalar(n)}" for n in ordered) if ordered else "[]")
    else:
        for name in ordered:
            ctx.print(name)
    return status
