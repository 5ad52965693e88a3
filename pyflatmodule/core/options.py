"""The options of one load, defined once: the face builds an ``Options`` from
``pyflatmodule.load``'s keywords, and every format's opener, every file a file names
and every nested check (a payload one file holds inside it) take that one."""
from __future__ import annotations

from typing import Any, Dict, Mapping, NamedTuple, Optional, Tuple, Union

from .native import ffi, lib

__all__ = ["ADVICE", "Options"]

#: The ``advise`` choices, and the madvise flag each one names.
ADVICE = {"normal": "MADV_NORMAL", "sequential": "MADV_SEQUENTIAL", "random": "MADV_RANDOM",
          "willneed": "MADV_WILLNEED"}

#: The largest value of each budget (the width of its field in the C options).
_BUDGET_LIMITS = (("max_depth", 2**32 - 1), ("max_tables", 2**64 - 1),
                  ("max_elements", 2**64 - 1))


class _Values(NamedTuple):
    """The options' values and defaults (:class:`Options` documents and checks them)."""

    verify: Union[bool, str] = True
    copy: bool = False
    strict: bool = False
    advise: Optional[str] = None
    populate: bool = False
    max_depth: int = 200
    max_tables: int = 0
    max_elements: int = 0
    storage_options: Optional[Mapping[str, Any]] = None


class Options(_Values):
    """Switches and budgets for one load, checked when made (ValueError); frozen (a new
    one from :meth:`replace`), equal and hashed by value.

    Attributes:
        verify: run the full verifier (alignment, string terminators, every function,
            type and cross-reference). Without it the index is still built with every
            read bounds-checked, and problems surface as FormatError on access.
            ``"full"``: as True, and what a format checks when it is first read (see
            :func:`pyflatmodule.load`) is checked at open, as
            :func:`pyflatmodule.verify` does.
        copy: read the file into memory instead of mapping it (network filesystems,
            files that may change while open).
        strict: apply FlatBuffers' own rules, rejecting the wrapped vtable offsets
            torch writes in files over 2 GiB (read correctly by default, up to 4 GiB).
        advise: access pattern for a mapped file, through madvise: ``"normal"``,
            ``"sequential"``, ``"random"`` or ``"willneed"`` for the whole mapping.
            The default (None) reads metadata without readahead and tensor data with it.
        populate: prefault the whole mapping at open (MAP_POPULATE), for servers
            that must never wait on a page fault later.
        max_depth: deepest nesting of values (lists in lists, objects in objects).
        max_tables: table visits allowed (0: derived from the file size); each pass over
            a flatbuffer (a file's own, each payload's nested inside it) has this budget.
        max_elements: vector elements visited (0: derived from the file size), per pass
            as ``max_tables``.
        storage_options: for a URL: for ``http(s)://``, ``headers`` (a dict sent with
            every request), ``timeout`` (seconds for each network operation, default 30)
            and ``tries`` (of each read, default 3); for any other scheme, fsspec's
            options for its filesystem (credentials, endpoints...).
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:   # the tuple holds them now
        if self.verify not in (True, False, "full"):
            raise ValueError(f"verify must be True, False or 'full', not {self.verify!r}")
        if self.advise is not None and self.advise not in ADVICE:
            raise ValueError(f"advise must be one of {sorted(ADVICE)} or None, "
                             f"not {self.advise!r}")
        for name, top in _BUDGET_LIMITS:
            value = getattr(self, name)
            if not 0 <= value <= top:
                raise ValueError(f"{name} must be between 0 and {top}, not {value}")

    def __hash__(self) -> int:   # storage_options (a dict) is left out
        return hash(self[:-1])

    def __reduce__(self) -> Tuple[Any, ...]:   # the values, not the C options made
        return Options, tuple(self)

    def replace(self, **changes: Any) -> "Options":
        """These options with ``changes`` (keyword: value), checked as new ones are."""
        return Options(**{**self._asdict(), **changes})

    @property
    def full(self) -> bool:
        """Whether everything is checked at open (``verify="full"``), nothing left to the
        first read."""
        return self.verify == "full"

    def keywords(self) -> Dict[str, Any]:
        """The options as ``pyflatmodule.load``'s keyword arguments."""
        return self._asdict()

    def to_c(self) -> Any:
        """The C core's ``fb_options`` (one cffi struct per Options, made on first use:
        every C entry takes it as ``const``)."""
        opt = self.__dict__.get("_c")
        if opt is not None:
            return opt
        opt = ffi.new("fb_options *")
        lib.fb_default_options(opt)
        opt.verify = int(bool(self.verify))
        opt.strict = int(self.strict)
        opt.max_depth = self.max_depth
        opt.max_tables = self.max_tables
        opt.max_elements = self.max_elements
        self.__dict__["_c"] = opt   # not a value: equality and hashing ignore it
        return opt
