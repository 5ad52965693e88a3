"""Short reprs for the module's public collections, the method-name rule, and why
proxies do not pickle.

A model's collections can hold megabytes (sources, extra files, storages): their
reprs give a count and the first few names, never the contents, and never decode
a tensor.
"""
from __future__ import annotations

import itertools
from typing import Dict, Iterable, List, TypeVar

__all__ = ["NamedDict", "NamedList", "listing", "matching_names", "not_picklable", "plural",
           "summary"]

V = TypeVar("V")

#: Names a repr or an error message lists before "... and N more".
SHOWN = 5


def plural(count: int, noun: str) -> str:
    """``1 segment``, ``3 segments``, ``1,024 values``."""
    return f"{count:,} {noun}{'' if count == 1 else 's'}"


def listing(names: Iterable[str], count: int) -> str:
    """The first SHOWN of ``count`` names, comma-separated, then how many more."""
    shown = list(itertools.islice(names, SHOWN))
    more = f", ... and {count - len(shown):,} more" if count > len(shown) else ""
    return ", ".join(shown) + more


def summary(what: str, count: int, names: Iterable[str], unit: str) -> str:
    """``<what: count units: name, name, ... and N more>``; ``unit`` is singular."""
    text = f"<{what}: {plural(count, unit)}"
    return text + (f": {listing(names, count)}>" if count else ">")


def matching_names(names: Iterable[str], wanted: str) -> List[str]:
    """The qualified names ``wanted`` stands for: itself when it is one of ``names``,
    else every name whose last dotted parts are ``wanted`` (``forward`` and
    ``SampleNet.forward`` both stand for ``__torch__.SampleNet.forward``)."""
    names = list(names)
    if wanted in names:
        return [wanted]
    return [name for name in names if name.endswith("." + wanted)]


class NamedDict(Dict[str, V]):
    """A ``dict`` whose repr counts its entries and names a few, never their values.

    Subclasses set ``what`` (the collection's name) and ``unit``, and may override
    ``describe``, the text shown for one entry. A missing key raises KeyError naming the
    first few keys there are.
    """

    what = "dict"
    unit = "entry"

    def describe(self, name: str) -> str:
        """The text shown for the entry ``name``: the name itself."""
        return name

    def __missing__(self, name: str) -> V:
        raise KeyError(f"no {self.unit} {name!r}; there are "
                       f"{listing(self, len(self)) or 'none'}")

    def __repr__(self) -> str:
        return summary(self.what, len(self), map(self.describe, self), self.unit)


class NamedList(List[V]):
    """A ``list`` whose repr counts its items and names a few (``name_of`` each)."""

    what = "list"
    unit = "item"

    def name_of(self, item: V) -> str:
        """The text shown for one item."""
        return repr(item)

    def __repr__(self) -> str:
        return summary(self.what, len(self), map(self.name_of, self), self.unit)


def not_picklable(kind: str, instead: str) -> TypeError:
    """The error pickling a proxy raises: it is a view of one process's mapping."""
    return TypeError(f"cannot pickle a pyflatmodule {kind}: it is a view of its module's "
                     "memory. Pickle the Module (opened from a path) and read it in the "
                     f"other process, or send plain values taken from it ({instead})")
