"""``pyflatmodule tree``: the object hierarchy from the root, with every tensor."""
from __future__ import annotations

import argparse
from functools import partial
from typing import Any, Callable, Dict, List, Optional, Tuple

import numpy as np

from ..core.dtypes import QuantizedTensor
from ..ptmf import Module, Object, short
from . import executorch
from .common import (
    EXIT_OK,
    EXIT_USAGE,
    CliError,
    Context,
    Json,
    Style,
    json_value,
    open_model,
    tensor_fields,
)

HELP = "the object hierarchy from the root, with every tensor"

EXAMPLES = """examples:
  pyflatmodule tree model.ptl                 every attribute from the root
  pyflatmodule tree model.ptl --depth 1       the root's attributes only
  pyflatmodule tree model.ptl --filter weight nodes whose path contains "weight"
  pyflatmodule tree model.pte --depth 2       an ExecuTorch program's methods and values
"""


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The command's arguments."""
    p.add_argument("path", metavar="PATH")
    p.add_argument("--depth", type=int, metavar="N", help="show N levels below the root")
    p.add_argument("--filter", metavar="SUBSTRING",
                   help="only nodes whose dotted path contains SUBSTRING (and their parents)")


#: The node kind of each ivalue union type.
_KINDS = {"NONE": "none", "Int": "int", "Bool": "bool", "Double": "float",
          "ComplexDouble": "complex", "TensorMetadata": "tensor", "String": "str",
          "List": "list", "Tuple": "tuple", "Dict": "dict", "Object": "object",
          "IntList": "list", "DoubleList": "list", "BoolList": "list", "Device": "device",
          "EnumValue": "enum", "Function": "function"}
_CONTAINERS = ("List", "Tuple", "Dict")
_SCALAR_LISTS = ("IntList", "DoubleList", "BoolList")


class TreeBuilder:
    """The object hierarchy from the root, as nested JSON-able nodes.

    Each ivalue is expanded once: an object or container met again (torch shares
    submodules and equal tuples) is a node with ``same_as``, so the output stays
    linear in the file whatever its sharing.
    """

    def __init__(self, m: Module, max_depth: Optional[int]) -> None:
        self.m = m
        self.ivalues = m.ivalues
        self.max_depth = max_depth
        self.seen: Dict[int, str] = {}
        self._holds: Dict[int, bool] = {}

    def _elements(self, i: int) -> List[Tuple[str, str, int]]:
        """(name, path suffix, ivalue) of a container's or field object's children."""
        ivalues = self.ivalues
        kind = ivalues.type_name(i)
        refs = ivalues.references(i)
        if kind in ("List", "Tuple"):
            return [(f"[{k}]", f"[{k}]", j) for k, j in enumerate(refs)]
        if kind == "Dict":
            half = len(refs) // 2
            out = []
            for k, j in zip(refs[:half], refs[half:]):
                key = short(ivalues[k], 80)
                out.append((f"[{key}]", f"[{key}]", j))
            return out
        names = list(ivalues[i].attributes)
        return [(name, "." + name, j) for name, j in zip(names, refs)]

    def _holds_structure(self, i: int) -> bool:
        """Whether a container holds a tensor or an object (then it is expanded)."""
        known = self._holds.get(i)
        if known is None:
            self._holds[i] = False          # indices only point backwards: no cycles
            type_name = self.ivalues.type_name
            known = any(type_name(j) in ("TensorMetadata", "Object") or
                        (type_name(j) in _CONTAINERS and self._holds_structure(j))
                        for _, _, j in self._elements(i))
            self._holds[i] = known
        return known

    def ivalue(self, i: int, name: str, path: str, depth: int) -> Json:
        """The node of ivalue ``i`` (and, within the depth, its children)."""
        t = self.ivalues.type_name(i)
        node: Json = {"name": name, "path": path, "kind": _KINDS.get(t, t)}
        if t == "TensorMetadata":
            value = self.ivalues[i]
            node.update(tensor_fields(self.m, value, self.m.tensor_record(value)))
        elif t == "Object":
            obj = self.ivalues[i]
            node["type"] = obj.type_name
            node["object_kind"] = obj.kind
            if i in self.seen:
                node["same_as"] = self.seen[i]
                return node
            self.seen[i] = path
            if obj.kind == "class_with_field":
                children = [(n, path + s if path else n, j) for n, s, j in self._elements(i)]
                self._children(node, depth, [partial(self.ivalue, j, n, p)
                                             for n, p, j in children])
            elif obj.kind == "class_with_setstate":
                items = list(obj.attributes.items())
                self._children(node, depth, [
                    partial(self.value, v, k, f"{path}.{k}" if path else k) for k, v in items])
            else:
                state_path = f"{path}.__getstate__()" if path else "__getstate__()"
                state = self.ivalues.references(i)[0]
                self._children(node, depth, [
                    partial(self.ivalue, state, "__getstate__()", state_path)])
        elif t in _CONTAINERS:
            refs = self.ivalues.references(i)
            node["length"] = len(refs) // 2 if t == "Dict" else len(refs)
            if self._holds_structure(i):
                if i in self.seen:
                    node["same_as"] = self.seen[i]
                    return node
                self.seen[i] = path
                children = [(n, path + s, j) for n, s, j in self._elements(i)]
                self._children(node, depth, [partial(self.ivalue, j, n, p)
                                             for n, p, j in children])
            else:
                self._scalar(node, self.ivalues[i])
        else:
            value = self.ivalues[i]
            if t in _SCALAR_LISTS:
                node["length"] = len(value)
            self._scalar(node, value)
        return node

    def value(self, v: Any, name: str, path: str, depth: int) -> Json:
        """A node for an already decoded value (set-state objects' attributes)."""
        if isinstance(v, Object):
            return self.ivalue(v.index, name, path, depth)
        node: Json = {"name": name, "path": path}
        if isinstance(v, (np.ndarray, QuantizedTensor)):
            node.update(tensor_fields(self.m, v, self.m.tensor_record(v)
                                      if isinstance(v, np.ndarray) else None))
        elif isinstance(v, (list, tuple, dict)):
            node["kind"] = type(v).__name__
            node["length"] = len(v)
            items = list(v.items()) if isinstance(v, dict) else list(enumerate(v))
            if any(isinstance(x, (np.ndarray, QuantizedTensor, Object, list, tuple, dict))
                   for _, x in items):
                labels = [f"[{short(k, 80)}]" if isinstance(v, dict) else f"[{k}]"
                          for k, _ in items]
                self._children(node, depth, [partial(self.value, x, lab, path + lab)
                                             for lab, (_, x) in zip(labels, items)])
            else:
                self._scalar(node, v)
        else:
            node["kind"] = {bool: "bool", int: "int", float: "float", complex: "complex",
                            str: "str", type(None): "none"}.get(type(v), type(v).__name__.lower())
            self._scalar(node, v)
        return node

    def _children(self, node: Json, depth: int, makers: List[Callable[[int], Json]]) -> None:
        if not makers:
            node["children"] = []
        elif self.max_depth is not None and depth >= self.max_depth:
            node["truncated"] = len(makers)
        else:
            node["children"] = [make(depth + 1) for make in makers]

    @staticmethod
    def _scalar(node: Json, value: Any) -> None:
        node["repr"] = short(value, 100)
        plain = json_value(value)
        if plain is not None or value is None:
            node["value"] = plain


def prune(node: Json, needle: str) -> Optional[Json]:
    """The subtree of nodes whose path contains ``needle``, with their ancestors."""
    kept = [c for c in (prune(child, needle) for child in node.get("children", []))
            if c is not None]
    if needle in node["path"] and node["path"]:
        return node
    if kept:
        out = dict(node)
        out["children"] = kept
        return out
    return None


def tree_line(st: Style, node: Json) -> str:
    """The text of one node (without its name)."""
    kind = node["kind"]
    if kind == "object":
        text = st(node["type"], "cyan")
        if node["object_kind"] != "class_with_field":
            text += st(f" [{node['object_kind']}]", "dim")
        if "same_as" in node:
            text += st(f" (same object as {node['same_as'] or '<root>'})", "dim")
    elif kind in ("tensor", "qtensor"):
        text = st(f"{kind} {node['dtype']}{node['shape']}", "green")
        if kind == "qtensor":
            text += f" {node['qscheme']}"
            text += (f" scale={node['scale']} zero_point={node['zero_point']}"
                     if "scale" in node else f" axis={node['axis']}")
        storage = node.get("storage")
        text += st(f", {node['bytes']:,} bytes, storage "
                   f"{'-' if storage is None else storage}", "dim")
        if node.get("requires_grad"):
            text += st(", requires_grad", "dim")
    elif "children" in node or "truncated" in node or "same_as" in node:
        text = f"{kind}[{node['length']}]" if "length" in node else kind
        if "same_as" in node:
            text += st(f" (same as {node['same_as']})", "dim")
    else:
        text = kind + (f"[{node['length']}]" if "length" in node else "")
        if kind != "none":
            text += f" = {node['repr']}"
    if "truncated" in node:
        text += st(f"  ... {node['truncated']} not shown (--depth)", "dim")
    return text


def print_tree(ctx: Context, node: Json, indent: int = 0) -> None:
    """The tree, one node a line, indented by depth."""
    name = node["name"]
    label = ctx.style(name, "bold") + ": " if indent else ""
    ctx.print("  " * indent + label + tree_line(ctx.style, node))
    for child in node.get("children", []):
        print_tree(ctx, child, indent + 1)


def run(ctx: Context) -> int:
    """Print the object hierarchy."""
    args = ctx.args
    if args.depth is not None and args.depth < 0:
        raise CliError("--depth must be 0 or more", "usage", EXIT_USAGE)
    with open_model(args.path) as m:
        if isinstance(m, Module):
            root = TreeBuilder(m, args.depth).ivalue(m.root.index, "", "", 0)
            show = print_tree
        else:
            root = executorch.tree(m, args.depth)
            show = executorch.print_tree
    if args.filter:
        root = prune(root, args.filter) or {**root, "children": []}
    if ctx.json:
        ctx.dump({"file": args.path, "root": root})
    else:
        show(ctx, root)
    return EXIT_OK
