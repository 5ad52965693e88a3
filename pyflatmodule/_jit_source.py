"""What the TorchScript sources stored in a file say about each class.

Files written with ``jit_sources`` hold every class body as TorchScript text:
its ``__parameters__`` and ``__buffers__`` lists (the only exact source of torch's
``state_dict()`` keys) and its attribute declarations in slot order (the names of
the slots ``GET_ATTR``/``SET_ATTR`` instructions number).
"""
from __future__ import annotations

import re
from typing import Dict, List, Mapping

__all__ = ["ClassDecl", "parse_classes"]

_CLASS = re.compile(r"class ([^\s(:]+)")
_QUOTED = re.compile(r'"([^"\\]*)"')
_LIST = re.compile(r"^  (__parameters__|__buffers__)\s*=\s*(\[.*?\])\s*$")
_ATTR = re.compile(r"^  ([A-Za-z_]\w*) : (.+)$")
_ANNOTATION = re.compile(r'^  __annotations__\["([^"]*)"\] = (.+)$')


class ClassDecl:
    """One class body: parameter and buffer names, attribute names in slot order, and
    whether it is a module (it declares ``__parameters__``/``__buffers__``)."""

    __slots__ = ("parameters", "buffers", "attributes", "is_module")

    def __init__(self) -> None:
        self.parameters: List[str] = []
        self.buffers: List[str] = []
        self.attributes: List[str] = []
        self.is_module = False


def _literal_names(text: str) -> List[str]:
    # TorchScript prints these lists as ["a", "b", ]: names never hold quotes.
    return _QUOTED.findall(text)


def parse_classes(sources: Mapping[str, str]) -> Dict[str, ClassDecl]:
    """Qualified class name to its declaration, for every class in the sources.

    One pass over the lines, each matched by anchored patterns: linear in the text.
    """
    out: Dict[str, ClassDecl] = {}
    for file_name, text in sources.items():
        decl = None
        for line in text.splitlines():
            if line.startswith("class "):
                match = _CLASS.match(line)
                decl = None
                if match and line.rstrip().endswith(":"):
                    decl = ClassDecl()
                    out[f"{file_name}.{match.group(1)}"] = decl
            elif decl is not None:
                if not line.startswith("  ") or line.startswith("  def "):
                    decl = None   # the declarations come before the first method
                    continue
                listed = _LIST.match(line)
                if listed:
                    names = _literal_names(listed.group(2))
                    (decl.parameters if listed.group(1) == "__parameters__"
                     else decl.buffers).extend(names)
                    decl.is_module = True
                    continue
                attr = _ATTR.match(line) or _ANNOTATION.match(line)
                if attr and not attr.group(2).startswith("Final["):
                    decl.attributes.append(attr.group(1))
    return out
