"""What the TorchScript sources stored in a file say about each class.

Files written with ``jit_sources`` hold every class body as TorchScript text:
its ``__parameters__`` and ``__buffers__`` lists (the only exact source of torch's
``state_dict()`` keys) and its attribute declarations in slot order (the names of
the slots ``GET_ATTR``/``SET_ATTR`` instructions number).
"""
from __future__ import annotations

import ast
import re
from typing import Dict, List, Mapping, NamedTuple

__all__ = ["ClassDecl", "parse_classes"]

_CLASS = re.compile(r"^class ([^\s(:]+)\s*(?:\([^)]*\))?\s*:", re.M)
_LIST = re.compile(r"^  (__parameters__|__buffers__)\s*=\s*(\[.*?\])\s*$")
_ATTR = re.compile(r"^  ([A-Za-z_]\w*) : (.+)$")
_ANNOTATION = re.compile(r'^  __annotations__\["([^"]*)"\] = (.+)$')


class ClassDecl(NamedTuple):
    """One class body: parameter and buffer names, and attribute names in slot order."""

    parameters: List[str]
    buffers: List[str]
    attributes: List[str]
    is_module: bool


def _literal_names(text: str) -> List[str]:
    try:
        value = ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return []
    return [str(v) for v in value] if isinstance(value, (list, tuple)) else []


def parse_classes(sources: Mapping[str, str]) -> Dict[str, ClassDecl]:
    """Qualified class name to its declaration, for every class in the sources."""
    out: Dict[str, ClassDecl] = {}
    for file_name, text in sources.items():
        classes = list(_CLASS.finditer(text))
        for k, match in enumerate(classes):
            end = classes[k + 1].start() if k + 1 < len(classes) else len(text)
            decl = ClassDecl([], [], [], False)
            for line in text[match.end():end].splitlines():
                if line.startswith("  def "):
                    break
                listed = _LIST.match(line)
                if listed:
                    names = _literal_names(listed.group(2))
                    target = decl.parameters if listed.group(1) == "__parameters__" \
                        else decl.buffers
                    target.extend(names)
                    decl = decl._replace(is_module=True)
                    continue
                attr = _ATTR.match(line) or _ANNOTATION.match(line)
                if attr and not attr.group(2).startswith("Final["):
                    decl.attributes.append(attr.group(1))
            out[f"{file_name}.{match.group(1)}"] = decl
    return out
