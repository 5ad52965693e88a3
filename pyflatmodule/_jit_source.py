"""What the TorchScript sources stored in a file say about each class.

Files written with ``jit_sources`` hold every class body as TorchScript text:
its ``__parameters__`` and ``__buffers__`` lists (the only exact source of torch's
``state_dict()`` keys) and its attribute declarations in slot order (the names of
the slots ``GET_ATTR``/``SET_ATTR`` instructions number).
"""
from __future__ import annotations

import re
from typing import Dict, Iterator, List, Mapping, Optional

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
    """One class body: parameter and buffer names, whether it is a module (it declares
    ``__parameters__``/``__buffers__``), and its attribute names in slot order (parsed
    when first asked for: a state_dict() needs only the lists)."""

    __slots__ = ("parameters", "buffers", "is_module", "_text", "_start", "_end",
                 "_attributes")

    def __init__(self, text: str, start: int, end: int) -> None:
        self.parameters: List[str] = []
        self.buffers: List[str] = []
        self.is_module = False
        self._text, self._start, self._end = text, start, end
        self._attributes: Optional[List[str]] = None
        # The lists are lines starting "  __parameters__"/"  __buffers__": found with
        # str.find, each line then matched.
        for listed in ("__parameters__", "__buffers__"):
            at = text.find("\n  " + listed, start - 1, end)
            while at >= 0:
                found = _DECLARATION.match(text, at + 1, end)
                if found and found.group(1):
                    (self.parameters if listed == "__parameters__"
                     else self.buffers).extend(_literal_names(found.group(2)))
                    self.is_module = True
                at = text.find("\n  " + listed, at + 1, end)

    @property
    def attributes(self) -> List[str]:
        """Declared attribute names in slot order (``Final`` constants excluded)."""
        if self._attributes is None:
            names = []
            for found in _DECLARATION.finditer(self._text, self._start, self._end):
                _, _, annotated, annotation, attr, kind = found.groups()
                if annotated is not None:
                    if not annotation.startswith("Final["):
                        names.append(annotated)
                elif attr is not None and not kind.startswith("Final["):
                    names.append(attr)
            self._attributes = names
        return self._attributes


def _literal_names(text: str) -> List[str]:
    # TorchScript prints these lists as ["a", "b", ]: names never hold quotes.
    return _QUOTED.findall(text)


def parse_classes(sources: Mapping[str, str]) -> Dict[str, ClassDecl]:
    """Qualified class name to its declaration, for every class in the sources.

    Class headers are found with ``str.find``, each class's declaration block (the
    lines up to its first method) with one regex search, and the declarations in it
    with ``str.find`` (the lists) or one regex scan (the attributes, on demand):
    linear in the text, and no Python work per line.
    """
    out: Dict[str, ClassDecl] = {}
    for file_name, text in sources.items():
        for header in _headers(text):
            if not header.group(0).rstrip().endswith(":"):
                continue
            end = _BLOCK_END.search(text, header.end())
            out[f"{file_name}.{header.group(1)}"] = ClassDecl(
                text, header.end(), len(text) if end is None else end.start())
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
