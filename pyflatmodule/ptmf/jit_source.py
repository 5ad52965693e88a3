"""What the TorchScript sources stored in a file say about each class.

Files written with ``jit_sources`` hold every class body as TorchScript text: its
``__parameters__`` and ``__buffers__`` lists (the only exact source of torch's
``state_dict()`` keys) and its attribute declarations in slot order (the names of the
slots ``GET_ATTR``/``SET_ATTR`` instructions number). The C core finds the classes and
their lists (``ptmf_scan_classes``); the attribute declarations are parsed here, from
one class's declaration block, when a set-state object asks for them.
"""
from __future__ import annotations

import re
from typing import List, Optional

__all__ = ["ClassDecl"]

_DECLARATION = re.compile(
    r'^  (?:__annotations__\["([^"\n]*)"\] = ([^\n]+)|([A-Za-z_]\w*) : ([^\n]+))$',
    re.MULTILINE)


class ClassDecl:
    """One class body: parameter and buffer names, whether it is a module (it declares
    ``__parameters__``/``__buffers__``), and its attribute names in slot order (parsed
    from its declaration block when first asked for)."""

    __slots__ = ("parameters", "buffers", "is_module", "_block", "_attributes")

    def __init__(self, parameters: List[str], buffers: List[str], is_module: bool,
                 block: str) -> None:
        self.parameters = parameters
        self.buffers = buffers
        self.is_module = is_module
        self._block = block
        self._attributes: Optional[List[str]] = None

    @property
    def attributes(self) -> List[str]:
        """Declared attribute names in slot order (``Final`` constants excluded)."""
        if self._attributes is None:
            names = []
            for found in _DECLARATION.finditer(self._block):
                annotated, annotation, attr, kind = found.groups()
                if annotated is not None:
                    if not annotation.startswith("Final["):
                        names.append(annotated)
                elif attr is not None and not kind.startswith("Final["):
                    names.append(attr)
            self._attributes = names
        return self._attributes
