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
# One declaration line: a parameter or buffer list, an annotation or an attribute.
_SPACE = r"[^\S\n]*"
_DECLARATION = re.compile(
    rf"^  (?:(__parameters__|__buffers__){_SPACE}={_SPACE}(\[[^\n]*?\]){_SPACE}"
    r'|__annotations__\["([^"\n]*)"\] = ([^\n]+)'
    r"|([A-Za-z_]\w*) : ([^\n]+))$", re.MULTILINE)
_BLOCK_END = re.compile(r"\n(?!  )|\n  def ")


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

    Class headers are found with ``str.find``, each class's declaration block (the
    lines up to its first method) with one regex search, and the declarations in it
    with one regex scan: linear in the text, and no Python work per line.
    """
    out: Dict[str, ClassDecl] = {}
    for file_name, text in sources.items():
        for header in _headers(text):
            if not header.group(0).rstrip().endswith(":"):
                continue
            decl = out[f"{file_name}.{header.group(1)}"] = ClassDecl()
            end = _BLOCK_END.search(text, header.end())
            for found in _DECLARATION.finditer(text, header.end(),
                                               len(text) if end is None else end.start()):
                listed, names, annotated, annotation, attr, kind = found.groups()
                if listed:
                    (decl.parameters if listed == "__parameters__"
                     else decl.buffers).extend(_literal_names(names))
                    decl.is_module = True
                elif annotated is not None:
                    if not annotation.startswith("Final["):
                        decl.attributes.append(annotated)
                elif not kind.startswith("Final["):
                    decl.attributes.append(attr)
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
