"""numpy, imported when it is first used, not when the package is.

A command whose answer holds no array (``pyflatmodule info`` or ``verify`` on a
program) then never pays for numpy's import, which costs more than the interpreter's
own start-up. Modules write ``from ..core.lazy import np`` and use ``np`` as the module
itself; type checkers see numpy.
"""
from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__all__ = ["np"]


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
