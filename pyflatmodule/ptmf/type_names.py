"""The names torch's mobile type parser finds in type annotation strings.

``get_flatbuffer_module_info`` reports, as ``type_names``, the base and container
type names (``int``, ``Tensor``, ``List``, ``NamedTuple``...) found in every
function's type annotations; class names are not reported. This follows the
token rules of torch's ``c10::TypeParser`` without building types.
"""
from __future__ import annotations

from typing import Iterable, List, Set

__all__ = ["contained_type_names"]

_SPECIAL = set("+-*/%@()[]:,={}><.?!&^|~")
_BASE = {
    "Tensor", "LongTensor", "DoubleTensor", "FloatTensor", "IntTensor", "ShortTensor",
    "HalfTensor", "CharTensor", "ByteTensor", "BoolTensor", "int", "float", "bool",
    "complex", "str", "Device", "Generator", "Stream", "number", "None", "NoneType", "Any",
    "Capsule", "list", "tuple",
}
_CONTAINERS = {"List", "Optional", "Dict", "Tuple"}
_CUSTOM_CLASS_PREFIX = "__torch__.torch.classes"
MAX_DEPTH = 100


def _tokens(text: str) -> List[str]:
    out = []
    i, n = 0, len(text)
    while i < n:
        ch = text[i]
        if ch == " ":
            i += 1
        elif ch in _SPECIAL:
            out.append(ch)
            i += 1
        else:
            j = i
            while j < n and text[j] not in _SPECIAL and text[j] != " ":
                j += 1
            out.append(text[i:j])
            i = j
    return out


class _Parser:
    def __init__(self, text: str, found: Set[str]) -> None:
        self.tokens = _tokens(text)
        self.pos = 0
        self.found = found
        self.depth = 0

    def cur(self) -> str:
        return self.tokens[self.pos] if self.pos < len(self.tokens) else ""

    def next(self) -> str:
        token = self.cur()
        if not token:
            raise ValueError("unexpected end of type string")
        self.pos += 1
        return token

    def expect(self, token: str) -> None:
        if self.next() != token:
            raise ValueError(f"expected {token!r}")

    def parse(self) -> None:
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise ValueError("type nested too deeply")
        try:
            self._parse()
        finally:
            self.depth -= 1

    def _parse(self) -> None:
        token = self.next()
        if token in _BASE:
            self.found.add(token)
        elif token in _CONTAINERS:
            self.found.add(token)
            self.expect("[")
            while self.cur() != "]":
                self.parse()
                if self.cur() != "]":
                    self.expect(",")
            self.expect("]")
        elif token == "__torch__":
            self.expect(".")
            while self.cur() not in ("", "[", ",", "]"):
                self.next()
            if self.cur() == "[":
                self.next()
                if self.next() != "NamedTuple":
                    raise ValueError("only NamedTuple custom types are supported")
                self.found.add("NamedTuple")
                self._named_tuple_fields()
        elif token != "Union":
            raise ValueError(f"type {token!r} is not supported")

    def _named_tuple_fields(self) -> None:
        self.expect(",")
        self.expect("[")
        while self.cur() != "]":
            self.expect("[")
            self.next()          # field name
            self.expect(",")
            self.parse()
            self.expect("]")
            if self.cur() == ",":
                self.next()
        self.expect("]")
        self.expect("]")


def contained_type_names(annotations: Iterable[str]) -> Set[str]:
    """Type names found in the annotation strings, as torch reports them.

    Strings torch's parser would reject contribute the names read before the error.
    """
    found: Set[str] = set()
    for text in annotations:
        if text.startswith(_CUSTOM_CLASS_PREFIX):
            continue
        try:
            _Parser(text, found).parse()
        except ValueError:
            pass
    return found
