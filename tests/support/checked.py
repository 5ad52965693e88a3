"""A load that checks everything, as the suites that judge refusals need it, and the proof
that the default load refuses the same files the same way.

By default a program's execution plans are checked the first time anything of them is
read (``Program.methods``, a value, a tensor, ``state_dict``...); ``verify="full"`` checks
them at open. ``load_full`` opens a source both ways and asserts that the two agree: the
file refused by both (the default at open or at the first read of the methods) or by
neither. The errors are the same but where one byte breaks a plan and the program around
it too (a vtable they share): each way reports the first fault it meets.
"""
from __future__ import annotations

from typing import Any, Optional

import pyflatmodule as pfm


def _first_read(f: Any) -> None:
    """The first read of the plans of what ``load`` gave (a program, or a bundled
    program's)."""
    program = f.program if isinstance(f, pfm.BundledProgram) else f
    if isinstance(program, pfm.Program):
        _ = program.methods


def load_full(source: Any, **options: Any) -> Any:
    """``pfm.load(source, verify="full", **options)``, after asserting that
    ``pfm.load(source, **options)`` followed by a read of its methods fails too (or does
    not fail either)."""
    lazy: Optional[pfm.FormatError] = None
    try:
        with pfm.load(source, **options) as f:
            _first_read(f)
    except pfm.FormatError as e:
        lazy = e
    full: Optional[pfm.FormatError] = None
    try:
        out = pfm.load(source, verify="full", **options)
    except pfm.FormatError as e:
        full = e
    assert (lazy is None) == (full is None), (lazy, full)
    if full is not None:
        raise full
    return out
