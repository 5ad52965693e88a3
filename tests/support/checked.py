"""A load that checks everything, as the suites that judge refusals need it, and the proof
that the default load refuses the same files the same way.

By default a program's execution plans are checked the first time anything of them is
read (``Program.methods``, a value, a tensor, ``state_dict``...); ``verify="full"`` checks
them at open. ``load_full`` opens a source both ways and asserts that the two agree: the
same file refused with the same error (code, offset, path, message), at open or at the
first read of the methods, or accepted by both. (A full check is the lazy one's two
steps in a row, so even a file with several faults fails alike.)
"""
from __future__ import annotations

from typing import Any, Optional, Tuple

import pyflatmodule as pfm

from .decode_all import read_plans


def _error(e: Optional[pfm.FormatError]) -> Optional[Tuple[Any, ...]]:
    return None if e is None else (e.code, e.offset, e.path, str(e))


def load_full(source: Any, **options: Any) -> Any:
    """``pfm.load(source, verify="full", **options)``, after asserting that
    ``pfm.load(source, **options)`` followed by a read of its methods fails with the same
    FormatError (or does not fail)."""
    lazy: Optional[pfm.FormatError] = None
    try:
        with pfm.load(source, **options) as f:
            read_plans(f)
    except pfm.FormatError as e:
        lazy = e
    full: Optional[pfm.FormatError] = None
    try:
        out = pfm.load(source, verify="full", **options)
    except pfm.FormatError as e:
        full = e
    assert _error(lazy) == _error(full), (lazy, full)
    if full is not None:
        raise full
    return out
