"""numpy, imported when it is first used, not when the package is; and packages whose
public names are imported when first read (:func:`lazy_exports`).

A command whose answer holds no array (``pyflatmodule info`` or ``verify`` on a
program) then never pays for numpy's import, which costs more than the interpreter's
own start-up. Modules write ``from ..core.lazy import np`` and use ``np`` as the module
itself; type checkers see numpy.
"""
from __future__ import annotations

import importlib
import sys
from typing import TYPE_CHECKING, Any, Callable, List, Mapping, Tuple

__all__ = ["lazy_exports", "np"]


class _Deferred:
    """A module imported at the first read of one of its attributes; each attribute
    read is kept on the instance, so that later reads are a plain lookup."""

    def __init__(self, name: str) -> None:
        self._deferred_name = name

    def __getattr__(self, attr: str) -> Any:
        value = getattr(importlib.import_module(self._deferred_name), attr)
        setattr(self, attr, value)
        return value


if TYPE_CHECKING:
    import numpy as np
else:
    np = _Deferred("numpy")


def lazy_exports(package: str, where: Mapping[str, Tuple[str, ...]]
                 ) -> Tuple[Callable[[str], Any], Callable[[], List[str]]]:
    """A package's ``__getattr__`` and ``__dir__`` (PEP 562) for public names defined in
    its modules: ``where`` maps each module (relative to the package) to the names it
    defines (``"Node as GraphNode"`` for one exported under another name), and a module
    is imported at the first read of one of its names, so that
    importing the package costs nothing of what is not used. The package imports the
    same names under ``TYPE_CHECKING`` for type checkers (a test holds the two equal)."""
    module = sys.modules[package]
    source = {}
    for path, names in where.items():
        for name in names:
            inner, _, outer = name.partition(" as ")
            source[outer or inner] = (path, inner)

    def __getattr__(name: str) -> Any:
        found = source.get(name)
        if found is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(found[0], package), found[1])
        setattr(module, name, value)
        return value

    def __dir__() -> List[str]:
        return sorted(set(vars(module)) | set(source))

    return __getattr__, __dir__
