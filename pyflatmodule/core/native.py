"""The compiled core: status codes turned into FormatError."""
from __future__ import annotations

from typing import Any, List, NoReturn, Optional

from ..errors import FormatError

try:
    from ._c import ffi, lib
except ModuleNotFoundError as _exc:
    if _exc.name != __name__.rpartition(".")[0] + "._c":
        raise
    # Typically `python -m pyflatmodule` (or `import pyflatmodule`) started in a source
    # checkout: the current directory comes first on sys.path, so the uncompiled
    # package there hides the installed one.
    import os as _os
    raise ImportError(
        "pyflatmodule's compiled core (pyflatmodule.core._c) is not built in "
        f"{_os.path.dirname(_os.path.dirname(_os.path.abspath(__file__)))}: that is an "
        "uncompiled source tree, found before the installed package because Python looks "
        "in the current directory first. Run from another directory, or build in place there with "
        "`python setup.py build_ext --inplace` (or `pip install -e .`).") from None

__all__ = ["ffi", "lib", "c_buffer", "check", "format_error", "raise_error", "new_error",
           "status_codes"]


def c_buffer(obj: Any, ctype: str = "char[]") -> Any:
    """``ffi.from_buffer(ctype, obj)``, safe in a garbage cycle: a memoryview is exported
    from the object under it (a mapping, bytes), and the cdata returned points into that
    export, which it keeps alive. CPython's collector clears a memoryview in a cycle even
    while a cdata still holds its buffer, and the process crashes when the cdata lets go:
    a cycle that an exception kept with its frames makes (``except FormatError as e`` with
    ``e`` kept), whose frame held the cdata and its memoryview."""
    if not isinstance(obj, memoryview):
        return ffi.from_buffer(ctype, obj)
    whole = ffi.from_buffer(obj.obj)
    with ffi.from_buffer(obj) as view:   # released at once: only its address is taken
        offset = int(ffi.cast("uintptr_t", view)) - int(ffi.cast("uintptr_t", whole))
    return ffi.gc(ffi.cast(ctype[:-2] + " *", ffi.cast("char *", whole) + offset),
                  lambda _p, _keep=whole: None)


def status_codes() -> List[int]:
    """Every status code of every block compiled into the core, block by block."""
    out: List[int] = []
    i = 0
    while True:
        block = lib.fb_status_block_at(i)
        if block == ffi.NULL:
            return out
        out += range(block.base, block.base + block.count)
        i += 1


def _code_name(status: int) -> str:
    name: str = ffi.string(lib.fb_status_name(status)).decode("ascii")
    # FB_E_OUT_OF_BOUNDS -> "out_of_bounds": the code is the name without its block's prefix.
    return name.split("_E_", 1)[1].lower() if "_E_" in name else name.split("_", 1)[1].lower()


def format_error(status: int, offset: Optional[int] = None, path: str = "",
                 message: Optional[str] = None) -> FormatError:
    """The FormatError for ``status`` (a code of any status block: ``FB_E_*`` or a
    format's): its code is the status's name, its message the block's unless ``message``
    says more. C and Python-side checks raise through it alike; ``offset`` is None when
    none is known."""
    if message is None:
        message = ffi.string(lib.fb_strerror(status)).decode("utf-8")
    return FormatError(_code_name(status), message, offset, path)


def new_error() -> Any:
    """A fresh ``fb_error`` for one call."""
    return ffi.new("fb_error *")


def raise_error(status: int, err: Any, path_prefix: str = "") -> NoReturn:
    """Raise the FormatError that a failed C call described in ``err``; for a file
    shorter than its header or size prefix says, the message says it is truncated."""
    path = ffi.string(err.path).decode("utf-8", "replace")
    if path_prefix:
        path = path_prefix + path
    message = None
    if err.need:
        what = "size prefix" if path.endswith("size") else "header"
        message = (f"truncated: the file is {int(err.size):,} bytes, its {what} needs "
                   f"{int(err.need):,}")
    raise format_error(status, int(err.offset), path, message)


def check(status: int, err: Any, path_prefix: str = "") -> None:
    """Raise FormatError unless ``status`` is FB_OK."""
    if status != lib.FB_OK:
        raise_error(status, err, path_prefix)
