"""The graphs a program's delegates of one backend give, for the backends' suites."""
from __future__ import annotations

from typing import Any, List, Type, TypeVar

G = TypeVar("G")


def graphs(p: Any, backend_id: str, cls: Type[G]) -> List[G]:
    """Every delegate's graph in method order, asserting that each delegate is
    ``backend_id``'s and its graph a ``cls``."""
    out: List[G] = []
    for m in p.methods.values():
        for d in m.delegates:
            assert d.id == backend_id
            assert isinstance(d.graph, cls), d.graph
            out.append(d.graph)
    return out
