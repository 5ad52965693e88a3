"""What the TorchScript sources stored in a file say about each class.

Files written with ``jit_sources`` hold every class body as TorchScript text:
its ``__parameters__`` and ``__buffers__`` lists (the only exact source of torch's
``state_dict()`` keys) and its attribute declarations in slot order (the names of
the slots ``GET_ATTR``/``SET_ATTR`` instructions number).
"""
from __future__ import annotations

import re
from typing import Dict, Iterator, List, Mapping

__all__ = ["ClassDecl", "parse_classes"]

_CLASS = re.compile(r"class ([^\s(:]+)[^\n]*")
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

    Class headers are found with ``str.find``; only the declaration lines after each
    header (up to its first method) are read in Python: linear in the text, and
    method bodies, most of it, cost no Python work.
    """
    out: Dict[str, ClassDecl] = {}
    for file_name, text in sources.items():
        for header in _headers(text):
            if not header.group(0).rstrip().endswith(":"):
                continue
            decl = out[f"{file_name}.{header.group(1)}"] = ClassDecl()
            pos = header.end() + 1
            while pos < len(text):
                end = text.find("\n", pos)
                end = len(text) if end < 0 else end
                line, pos = text[pos:end], end + 1
                if not line.startswith("  ") or line.startswith("  def "):
                    break   # the declarations come before the first method
                _declaration(decl, line.rstrip("\r"))
    return out


def _headers(text: str) -> Iterator["re.Match[str]"]:
    """Every line that starts with ``class NAME``."""
    start = 0 if text.startswith("class ") else _next_line(text, "class ", 0)
    while start >= 0:
        header = _CLASS.match(text, start)
        if header:
            yield header
        start = _next_line(text, "class ", start)


def _next_line(text: str, prefix: str, pos: int) -> int:
    """Where the first line after ``pos`` that starts with ``prefix`` starts, or -1."""
    found = text.find("\n" + prefix, pos)
    return found + 1 if found >= 0 else -1


def _declaration(decl: ClassDecl, line: str) -> None:
    listed = _LIST.match(line)
    if listed:
        names = _literal_names(listed.group(2))
        (decl.parameters if listed.group(1) == "__parameters__"
         else decl.buffers).extend(names)
        decl.is_module = True
        return
    attr = _ATTR.match(line) or _ANNOTATION.match(line)
    if attr and not attr.group(2).startswith("Final["):
        decl.attributes.append(attr.group(1))
