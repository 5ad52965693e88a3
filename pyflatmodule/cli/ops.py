"""``pyflatmodule ops``: the operators models need, as ``torch.jit.export_opnames``."""
from __future__ import annotations

import argparse
import json
from typing import Dict, List, NamedTuple, Optional, Sequence, Set

from ..core.names import plural
from ..files import file_format
from .common import (
    EXIT_OK,
    EXIT_USAGE,
    CliError,
    Context,
    Json,
    add_jobs,
    expand_paths,
    in_order,
    no_methods,
    note_no_methods,
)
from .formats import open_file

HELP = "operators the model needs (as torch.jit.export_opnames; for ExecuTorch, as gen_oplist)"

EXAMPLES = """examples:
  pyflatmodule ops model.pte                  an ExecuTorch program's kernel operators,
                                              one a line, e.g. aten::add.out
  pyflatmodule ops --yaml a.pte b.pte > selected_operators.yaml
                                              ExecuTorch's selective build file, as its
                                              gen_oplist writes it (one program) and
                                              gen_all_oplist merges them (several):
                                              operators and et_kernel_metadata
  pyflatmodule ops --list a.pte b.pte         a comma list, for EXECUTORCH_SELECT_OPS_LIST
  pyflatmodule ops --delegates model.pte      and what its delegates run, e.g.
                                              XnnpackBackend::XNNConv2d
  pyflatmodule ops model.ptl                  a PTMF model's, e.g. aten::add.Tensor
  pyflatmodule ops --yaml a.ptl b.ptl > ops.yaml   union, as a YAML list for PyTorch
                                              Mobile's selective build (SELECTED_OP_LIST)
  pyflatmodule ops --json a.ptl b.pte         {"files": [{"file", "format", "operators",
                                              "delegate_operators"}], "operators": union}

a file without methods (a data file, an ETDump, a parameters file) needs no operators:
it is an error (exit 1), so that a build does not take an empty list for it
"""


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The command's arguments."""
    p.add_argument("paths", nargs="+", metavar="PATH",
                   help="model files or URLs, directories and URL prefixes ending in / "
                        "(searched for model files), - (paths on stdin); the union is printed")
    add_jobs(p)
    form = p.add_mutually_exclusive_group()
    form.add_argument("--yaml", action="store_true",
                      help="for a selective build: ExecuTorch's selected_operators.yaml "
                           "for programs, a YAML list for PTMF models")
    form.add_argument("--list", action="store_true",
                      help="a comma-separated list (EXECUTORCH_SELECT_OPS_LIST)")
    p.add_argument("--delegates", action="store_true",
                   help="also what the delegates run (an XNNPACK graph's node kinds)")


class Found(NamedTuple):
    """What one file needs: its operators (None without methods), what its delegates run,
    its kernel keys (None for a format ExecuTorch's selective build does not read), its
    delegates' backends."""

    operators: Optional[List[str]]
    delegated: List[str]
    kernel_keys: Optional[Dict[str, List[str]]]
    backends: List[str]


def operators_of(path: str, data: Sequence[str] = ()) -> Found:
    """The operators a model needs, as ``torch.jit.export_opnames`` names them (an
    ExecuTorch program's kernel operators as ``name.overload``; None for a file without
    methods), what its delegates run (``BACKEND::KIND``) and its kernel keys."""
    with open_file(path, data) as f:
        return Found(f.operators(), f.delegate_operators(), f.kernel_keys(),
                     f.delegate_backends())


def yaml_scalar(text: str) -> str:
    """A YAML scalar: plain when safe, else double-quoted (JSON escapes are YAML's)."""
    if text and (text[0].isalpha() or text[0] == "_") and all(
            c.isalnum() or c in "_:.-" for c in text) and not text.endswith(":") and \
            text.lower() not in ("true", "false", "yes", "no", "on", "off", "null", "y", "n"):
        return text
    return json.dumps(text)


def selected_operators(found: Dict[str, Found]) -> List[str]:
    """ExecuTorch's ``selected_operators.yaml`` for the programs ``found`` (path ->
    what it needs), as lines: what ``gen_oplist --model_file_path`` writes for one, and
    ``gen_all_oplist`` merges for several (an operator is root and used for training,
    not all overloads; its ``debug_info`` the programs that hold it; the kernel keys
    unioned), keys sorted as ``yaml.safe_dump`` sorts them."""
    users: Dict[str, List[str]] = {}
    keys: Dict[str, Set[str]] = {}
    for path, f in found.items():
        for op in f.operators or ():
            users.setdefault(op, []).append(path)
        for op, k in (f.kernel_keys or {}).items():
            keys.setdefault(op, set()).update(k)
    lines = ["build_features: []", "custom_classes: []"]
    lines.append("et_kernel_metadata:" + ("" if keys else " {}"))
    for op in sorted(keys):
        lines += [f"  {yaml_scalar(op)}:", *(f"  - {yaml_scalar(k)}" for k in sorted(keys[op]))]
    lines += ["include_all_non_op_selectives: false", "include_all_operators: false",
              "kernel_metadata: {}", "operators:" + ("" if users else " {}")]
    for op in sorted(users):
        lines += [f"  {yaml_scalar(op)}:", "    debug_info:",
                  *(f"    - {yaml_scalar(p)}" for p in sorted(set(users[op]))),
                  "    include_all_overloads: false", "    is_root_operator: true",
                  "    is_used_for_training: true"]
    return lines


def run(ctx: Context) -> int:
    """Print the union of the files' operators."""
    args = ctx.args
    names: Set[str] = set()
    files: List[Json] = []
    found: Dict[str, Found] = {}
    status = EXIT_OK
    for path, f in in_order(lambda p: (p, operators_of(p, args.data)),
                            expand_paths(args.paths), args.jobs):
        found[path] = f
        files.append({"file": path, "format": file_format(path), "operators": f.operators,
                      "delegate_operators": f.delegated})
        if f.operators is None:
            if args.yaml or args.list:   # nothing is written: a build must not take it
                raise no_methods(path, "it needs no operators")
            status = note_no_methods(ctx, path, "it needs no operators")
        names.update(f.operators or ())
        if args.delegates:
            names.update(f.delegated)
        if f.operators == [] and f.backends and not ctx.json and not (
                args.delegates and f.delegated):
            # a backend whose payload gives no node kinds (Core AI, Ethos-U) runs it all
            ran = (f"run {plural(len(f.delegated), 'kind')} of node (--delegates lists them)"
                   if f.delegated else
                   f"({', '.join(f.backends)}) run it all, their node kinds not read")
            ctx.err.write(ctx.err_style("pyflatmodule: ", "bold") +
                          f"{path}: calls no kernel operator; its delegates {ran}\n")
    ordered = sorted(names)
    executorch = [f.kernel_keys is not None for f in found.values()]
    if ctx.json:
        ctx.dump({"files": files, "operators": ordered})
    elif args.yaml and any(executorch):
        if not all(executorch):
            raise CliError("--yaml writes ExecuTorch's selective build file for programs "
                           "and PyTorch Mobile's list for PTMF models: give one kind",
                           "usage", EXIT_USAGE)
        ctx.print("\n".join(selected_operators(found)))
    elif args.yaml:
        ctx.print("\n".join(f"- {yaml_scalar(n)}" for n in ordered) if ordered else "[]")
    elif args.list:
        ctx.print(",".join(ordered))
    else:
        for name in ordered:
            ctx.print(name)
    return status
