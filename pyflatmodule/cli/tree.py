"""``pyflatmodule tree``: the object hierarchy from the root, with every tensor."""
from __future__ import annotations

import argparse
from typing import Optional

from ..files import file_format
from .common import (
    EXIT_OK,
    EXIT_USAGE,
    CliError,
    Context,
    Json,
    add_module_names,
    add_names,
    names_for,
)
from .formats import FileFormat, open_file

HELP = "the object hierarchy from the root, with every tensor"

EXAMPLES = """examples:
  pyflatmodule tree model.ptl                 every attribute from the root
  pyflatmodule tree model.ptl --depth 1       the root's attributes only
  pyflatmodule tree model.ptl --filter weight nodes whose path contains "weight"
  pyflatmodule tree model.pte --depth 2       an ExecuTorch program's methods and values
  pyflatmodule tree model.pte --names model.etrecord --filter features.0
                                              constants by the module's names
"""


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The command's arguments."""
    p.add_argument("path", metavar="PATH")
    p.add_argument("--depth", type=int, metavar="N", help="show N levels below the root")
    p.add_argument("--filter", metavar="SUBSTRING",
                   help="only nodes whose dotted path (or module name, with --names) "
                        "contains SUBSTRING (and their parents)")
    add_names(p)


def prune(node: Json, needle: str) -> Optional[Json]:
    """The subtree of nodes whose path or module name contains ``needle``, with their
    ancestors."""
    kept = [c for c in (prune(child, needle) for child in node.get("children", []))
            if c is not None]
    if node["path"] and (needle in node["path"] or needle in node.get("module_name", "")):
        return node
    if kept:
        out = dict(node)
        out["children"] = kept
        return out
    return None


def print_tree(ctx: Context, adapter: FileFormat, node: Json, indent: int = 0) -> None:
    """The tree, one node a line, indented by depth."""
    name = node["name"] + (f" {node['module_name']}" if "module_name" in node else "")
    label = ctx.style(name, "bold") + ": " if indent else ""
    first, *below = adapter.tree_lines(ctx.style, node)
    ctx.print("  " * indent + label + first)
    for line in below:
        ctx.print("  " * (indent + 1) + line)
    for child in node.get("children", []):
        print_tree(ctx, adapter, child, indent + 1)


def run(ctx: Context) -> int:
    """Print the object hierarchy."""
    args = ctx.args
    if args.depth is not None and args.depth < 0:
        raise CliError("--depth must be 0 or more", "usage", EXIT_USAGE)
    with open_file(args.path, args.data) as f:
        root = f.tree(args.depth)
        if args.names is not None:
            add_module_names(root, names_for(f.tensors(), args.names, f.file), "path")
    if args.filter:
        root = prune(root, args.filter) or {**root, "children": []}
    if ctx.json:
        ctx.dump({"files": [{"file": args.path, "format": file_format(args.path),
                             "root": root}]})
    else:
        print_tree(ctx, f, root)
    return EXIT_OK
