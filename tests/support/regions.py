"""What every file's regions must be, whatever the format: a tiling of its bytes."""
from __future__ import annotations

from typing import Any, List, Sequence


def walk(regions: Sequence[Any]) -> List[Any]:
    """Every region of ``regions`` and below, depth first."""
    return [r for top in regions for r in top.walk()]


def assert_tiles(regions: Sequence[Any], size: int, top_kinds: Sequence[str]) -> None:
    """``regions`` cover bytes [0, size) once: at the top one span each, in order, of a
    kind in ``top_kinds``; below, each region's children cover its bytes exactly once."""
    at = 0
    for r in regions:
        assert r.kind in top_kinds, r.kind
        assert r.spans == ((r.start, r.end),) and r.start == at and r.end > r.start
        at = r.end
    assert at == size and sum(r.size for r in regions) == size
    for r in walk(regions):
        assert r.size == sum(e - s for s, e in r.spans) > 0
        assert r.start == r.spans[0][0] and r.end == r.spans[-1][1]
        assert all(a[1] < b[0] for a, b in zip(r.spans, r.spans[1:]))   # sorted, merged
        if r.children:
            ranges = sorted(s for c in r.children for s in c.spans)
            assert all(a[1] <= b[0] for a, b in zip(ranges, ranges[1:])), r
            assert sum(c.size for c in r.children) == r.size
            merged: List[List[int]] = []
            for s, e in ranges:
                if merged and merged[-1][1] == s:
                    merged[-1][1] = e
                else:
                    merged.append([s, e])
            assert [tuple(m) for m in merged] == list(r.spans)
