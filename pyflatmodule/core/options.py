"""The options of one load, defined once: every format's loader and every nested check
(a payload that one file holds inside it) take the same ``Options``."""
from __future__ import annotations

from typing import Any, Optional

from .native import ffi, lib

__all__ = ["Options"]


class Options:
    """Budgets and switches for one load; zero budgets derive from the file size."""

    __slots__ = ("verify", "strict", "max_depth", "max_tables", "max_elements", "advise")

    def __init__(self, verify: bool = True, strict: bool = False, max_depth: int = 200,
                 max_tables: int = 0, max_elements: int = 0,
                 advise: Optional[str] = None) -> None:
        for name, value, top in (("max_depth", max_depth, 2**32 - 1),
                                 ("max_tables", max_tables, 2**64 - 1),
                                 ("max_elements", max_elements, 2**64 - 1)):
            if not 0 <= value <= top:
                raise ValueError(f"{name} must be between 0 and {top}, not {value}")
        self.advise = advise
        self.verify = verify
        self.strict = strict
        self.max_depth = max_depth
        self.max_tables = max_tables
        self.max_elements = max_elements

    def to_c(self) -> Any:
        opt = ffi.new("fb_options *")
        lib.fb_default_options(opt)
        opt.verify = int(self.verify)
        opt.strict = int(self.strict)
        opt.max_depth = self.max_depth
        opt.max_tables = self.max_tables
        opt.max_elements = self.max_elements
        return opt
