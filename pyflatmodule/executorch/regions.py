"""Where an ExecuTorch file's bytes go: its regions, a tree of byte ranges.

At the top level the regions tile the file, each byte in exactly one: ``flatbuffer``
(its header and extended header included), ``segment`` (label: its index) and
``padding`` (the alignment gaps between them and after the last). Below, each region's
children cover its bytes exactly once as well. A flatbuffer interleaves its objects (a
method's tables share vtables with others, the builder pads for alignment), so the
children of a flatbuffer region are sets of byte ranges (:attr:`Region.spans`): every
table, vtable, vector and string the schema reaches from a method's values, chains,
operators or delegates is that part's, the first claim winning a shared object; the
objects none of them claims (the root table, its vectors, vtables) are ``other``, and the
bytes no object covers (the builder's alignment) ``padding``.
"""
from __future__ import annotations

from collections import Counter
from typing import Any, Dict, List, Mapping, NamedTuple, Sequence, Tuple

from ..core.fbread import Table, decode_text
from ..core.lazy import np
from ..core.native import lib

__all__ = ["ExtendedHeader", "Region"]

Span = Tuple[int, int]
#: A leaf's place in the tree: (kind, label) from the top region down.
Path = Tuple[Tuple[str, str], ...]


class ExtendedHeader(NamedTuple):
    """A program's ``eh00`` extended header (bytes 8 on, in the flatbuffer's padding)."""

    program_size: int          #: the flatbuffer is bytes [0, program_size)
    segment_base_offset: int   #: where segment offsets count from
    segment_data_size: int     #: bytes of segment data from the base on


class Region(NamedTuple):
    """Bytes of a file: ``kind`` and ``label``, its extent and its children, which cover its
    bytes exactly once. The kinds: at the top ``flatbuffer``, ``segment`` (label: its index;
    segments at one extent share a region, ``"1,2"``; an empty one has none) and
    ``padding``; in a flatbuffer ``header`` (bytes 0..8 and the ``eh00``/``FH01`` header),
    ``method`` (label: its name, with ``[<plan index>]`` when plans share it; children
    ``values``, ``chains``, ``operators``, ``delegate`` (label ``delegates[<i>]:<id>``: its
    table and compile specs, and an inline one's ``payload``) and ``other``: the plan's own
    table, name, inputs, outputs, buffer sizes), ``constant`` (an inline constant buffer's
    bytes; label: its index), ``data_index`` (the tables of segments, subsegment offsets and
    named data), ``other`` (the root table and what else no part claims) and ``padding``
    (bytes no object covers: alignment); in a segment ``constant`` and ``mutable_data``
    (label: the buffer index) each followed by its alignment ``padding``, ``payload`` (label
    ``<method>.delegates[<i>]:<id>``), ``named_data`` (label: its key), ``tensor`` (a data
    file in 0.6.0's layout: label its key), and ``other`` for
    bytes of a segment none of these covers. A bundled program's one ``flatbuffer`` holds
    ``header``, ``program`` (the embedded program's regions below it), ``test_suite``
    (label: its method) of ``test_case`` (label: its index; children ``inputs``,
    ``expected_outputs``, ``other``), ``other`` and ``padding``. ``spans`` are its byte
    ranges, sorted; ``start`` and ``end`` bound them, and ``size`` counts them (``end -
    start`` for a region of one span, every top-level one included)."""

    kind: str
    label: str
    start: int
    end: int
    size: int
    spans: Tuple[Span, ...]
    children: Tuple["Region", ...] = ()

    def walk(self) -> List["Region"]:
        """This region and every one below it, depth first."""
        out = [self]
        for c in self.children:
            out += c.walk()
        return out


def _merge(spans: Sequence[Span]) -> Tuple[Span, ...]:
    out: List[List[int]] = []
    for s, e in sorted(spans):
        if e <= s:
            continue
        if out and s <= out[-1][1]:
            out[-1][1] = max(out[-1][1], e)
        else:
            out.append([s, e])
    return tuple((s, e) for s, e in out)


def _region(kind: str, label: str, spans: Sequence[Span],
            children: Sequence[Region] = ()) -> Region:
    merged = _merge(spans)
    return Region(kind, label, merged[0][0] if merged else 0, merged[-1][1] if merged else 0,
                  sum(e - s for s, e in merged), merged,
                  tuple(sorted(children, key=lambda c: c.start)))


def _tree(kind: str, label: str, leaves: Dict[Path, List[Span]]) -> Region:
    """The region of ``leaves`` (spans by path below it): a node per path prefix; a node's
    own spans beside children become its child ``other``."""
    own: List[Span] = []
    below: Dict[Tuple[str, str], Dict[Path, List[Span]]] = {}
    for path, spans in leaves.items():
        if not path:
            own += spans
        else:
            below.setdefault(path[0], {})[path[1:]] = spans
    if not below:
        return _region(kind, label, own)
    children = [_tree(k, lab, sub) for (k, lab), sub in below.items()]
    if own:
        children.append(_region("other", "", own))
    return _region(kind, label, [s for c in children for s in c.spans], children)


class _Claims:
    """Bytes [0, n) of a flatbuffer, each owned by the first path to claim it."""

    def __init__(self, n: int) -> None:
        self.owner = np.full(n, -1, np.int32)
        self.paths: List[Path] = []

    def claim(self, path: Path, spans: Sequence[Span]) -> None:
        idx = len(self.paths)
        self.paths.append(path)
        n = len(self.owner)
        for s, e in spans:
            seg = self.owner[max(0, s):min(e, n)]
            seg[seg < 0] = idx

    def region(self) -> Region:
        """The ``flatbuffer`` region: each claimed path's bytes, the rest ``padding``
        (bytes no object of the buffer covers: its builder's alignment)."""
        owner = self.owner
        cut = np.flatnonzero(np.diff(owner)) + 1
        starts = np.concatenate(([0], cut)).tolist()
        ends = np.concatenate((cut, [len(owner)])).tolist()
        leaves: Dict[Path, List[Span]] = {}
        for s, e in zip(starts, ends):
            k = int(owner[s])
            path = self.paths[k] if k >= 0 else (("padding", ""),)
            leaves.setdefault(path, []).append((s, e))
        return _tree("flatbuffer", "", leaves)


def _slots(start: int, offsets: Sequence[int], end: int) -> List[Span]:
    """The [start, end) of each buffer of a subsegment (to the next buffer, or the end),
    cut to the segment: an offset no buffer the program uses names may point anywhere
    (the runtime never follows it), and its slot then covers nothing."""
    out = []
    for k, off in enumerate(offsets):
        nxt = offsets[k + 1] if k + 1 < len(offsets) else end - start
        lo, hi = min(start + off, end), min(start + max(off, nxt), end)
        out.append((lo, max(lo, hi)))
    return out


def _fill(start: int, end: int, parts: List[Region], kind: str) -> List[Region]:
    """``parts`` (disjoint, inside [start, end)) with each gap between them a ``kind``."""
    out: List[Region] = []
    at = start
    for p in sorted(parts, key=lambda r: r.start):
        if p.start > at:
            out.append(_region(kind, "", [(at, p.start)]))
        out.append(p)
        at = max(at, p.end)
    if end > at:
        out.append(_region(kind, "", [(at, end)]))
    return out


def _buffers(slots: List[Span], used: Dict[int, int], kind: str) -> List[Region]:
    """A subsegment's buffers, each as many bytes as the largest tensor at its start
    uses (the whole slot when none does), the rest of the slot ``padding``."""
    out = []
    for k, (s, e) in enumerate(slots):
        n = min(used.get(s, e - s), e - s)
        if n > 0:
            out.append(_region(kind, str(k), [(s, s + n)]))
        if e > s + n:
            out.append(_region("padding", "", [(s + n, e)]))
    return out


def segment_span(root: Table, summary: Any, index: int) -> Tuple[int, int]:
    """(file offset, size) of a program's segment ``index``: its offset counts from the
    segment base of the extended header (the C index proved the extents it reads)."""
    t = root.tables("segments")[index]
    return int(summary.segment_base) + int(t.scalar("offset")), int(t.scalar("size"))


def _segments(root: Table, summary: Any, size: int) -> List[Tuple[int, int]]:
    """(file offset, size) of each segment, cut at the file's end: a segment nothing uses,
    or a mutable data segment, may run past it (strict mode refuses either)."""
    out = []
    for i in range(len(root.tables("segments"))):
        start, n = segment_span(root, summary, i)
        start = min(start, size)
        out.append((start, min(n, size - start)))
    return out


def _top(size: int, flatbuffer: Region, segments: List[Tuple[str, Span, List[Region]]]
         ) -> List[Region]:
    """The top level: the flatbuffer, each non-empty segment (segments at one extent
    share a region, labels joined by commas) and the padding between and after."""
    by_extent: Dict[Span, Tuple[List[str], List[Region]]] = {}
    for label, span, children in segments:
        if span[1] > span[0]:
            labels, kids = by_extent.setdefault(span, ([], children))
            labels.append(label)
    parts = [flatbuffer]
    at = flatbuffer.end
    for (s, e), (labels, kids) in sorted(by_extent.items()):
        s = max(s, at)   # a segment overlapping the one before keeps the bytes after it
        if e <= s:
            continue
        inner = [k for k in kids if k.start >= s]
        parts.append(_region("segment", ",".join(labels), [(s, e)], _fill(s, e, inner, "other")
                             if inner else ()))
        at = e
    return _fill(0, size, parts, "padding")


def program_regions(root: Table, summary: Any, records: Sequence[Any], blobs: Sequence[Any],
                    size: int, constant: int, planned: int) -> List[Region]:
    """The regions of a verified program: ``root`` its Program table, ``records`` and
    ``blobs`` its C index, ``constant`` and ``planned`` the index's codes of where a
    tensor is."""
    buf = root.buf
    claims = _Claims(int(summary.flatbuffer_end))
    claims.claim((("header", "eh00" if summary.header_length else ""),),
                 [(0, 8 + int(summary.header_length))])
    plans = list(root.tables("execution_plan"))
    inline = root.tables("backend_delegate_data")
    names = _distinct([p.string("name") or "" for p in plans])
    for i, (plan, name) in enumerate(zip(plans, names)):   # payloads first: exact bytes
        for j, d in enumerate(plan.tables("delegates")):
            ref = d.table("processed")
            if ref is not None and int(ref.scalar("location")) == lib.ET_DATA_LOCATION_INLINE:
                pos, n = inline[int(ref.scalar("index"))].vector_span("data")
                claims.claim((("method", name), ("delegate", _delegate_label(j, d)),
                              ("payload", "")), [(pos, pos + n)])
    for k, b in enumerate(root.tables("constant_buffer")):
        pos, n = b.vector_span("storage")
        claims.claim((("constant", str(k)),), [(pos, pos + n)])
    for plan, name in zip(plans, names):
        me = ("method", name)
        for part in ("values", "chains", "operators"):
            t = plan.tables(part)
            if len(t):
                claims.claim((me, (part, "")), _vector_spans(plan, part))
        for j, d in enumerate(plan.tables("delegates")):
            ref = d.table("processed")   # an inline payload's table is its delegate's too
            table = inline[int(ref.scalar("index"))].spans() if ref is not None and int(
                ref.scalar("location")) == lib.ET_DATA_LOCATION_INLINE else []
            path = (me, ("delegate", _delegate_label(j, d)))
            claims.claim(path + (("other", ""),) if table else path, d.spans() + table)
        claims.claim((me, ("other", "")), plan.spans(("values", "chains", "operators",
                                                       "delegates")))
    claims.claim((("data_index", ""),), [s for f in ("segments", "constant_segment",
                                                     "mutable_data_segments", "named_data")
                                         for s in _field_spans(root, f)])
    claims.claim((("other", ""),), root.spans())
    segs = _segments(root, summary, size)
    inside: Dict[int, List[Region]] = {k: [] for k in range(len(segs))}
    used: Dict[int, int] = {}
    for r in records:
        if r.stored == constant or (r.stored == planned and r.initial):
            used[r.data] = max(used.get(r.data, 0), r.nbytes)
    subsegments = [("constant", root.table("constant_segment"))] + [
        ("mutable_data", m) for m in root.tables("mutable_data_segments")]
    for kind, sub in subsegments:
        if sub is not None and int(sub.scalar("segment_index")) < len(segs):
            k = int(sub.scalar("segment_index"))
            start, n = segs[k]
            inside[k] += _buffers(_slots(start, sub.values("offsets"), start + n),
                                  used, kind)
    for i, (plan, name) in enumerate(zip(plans, names)):
        for j, d in enumerate(plan.tables("delegates")):
            ref = d.table("processed")
            if ref is not None and int(ref.scalar("location")) == lib.ET_DATA_LOCATION_SEGMENT:
                k = int(ref.scalar("index"))
                start, n = segs[k]
                inside[k].append(_region("payload", f"{name}.{_delegate_label(j, d)}",
                                         [(start, start + n)]))
    _named(buf, blobs, inside)
    return _top(size, claims.region(), [(str(k), (s, s + n), _disjoint(inside[k]))
                                        for k, (s, n) in enumerate(segs)])


def data_file_regions(root: Table, summary: Any, blobs: Sequence[Any], size: int,
                      tensors: Mapping[str, Span]) -> List[Region]:
    """The regions of a verified data file (``.ptd``): the flatbuffer (its ``FH01``
    header, the index of segments, tensors and named data, the rest), each segment with
    the named data in it by key, and in 0.6.0's layout, whose tensors are not named data,
    the tensors (``tensors``: file offset and size by key)."""
    claims = _Claims(int(summary.flatbuffer_end))
    claims.claim((("header", "FH01"),), [(0, 8 + int(summary.header_length))])
    claims.claim((("data_index", ""),), [s for f in ("tensors", "segments", "named_data")
                                         if f in root.fields
                                         for s in _field_spans(root, f)])
    claims.claim((("other", ""),), root.spans())
    segs = _segments(root, summary, size)
    inside: Dict[int, List[Region]] = {k: [] for k in range(len(segs))}
    _named(root.buf, blobs, inside)
    for key, (start, n) in tensors.items():
        k = next(k for k, (s, m) in enumerate(segs) if s <= start and start + n <= s + m)
        if n:
            inside[k].append(_region("tensor", key, [(start, start + n)]))
    return _top(size, claims.region(), [(str(k), (s, s + n), _disjoint(inside[k]))
                                        for k, (s, n) in enumerate(segs)])


def bundled_regions(root: Table, program: Span, inner: List[Region], size: int
                    ) -> List[Region]:
    """The regions of a verified bundled program (``.bpte``), one flatbuffer that is the
    whole file: its ``header`` (bytes 0..8), the embedded ``program`` (``inner``, its own
    regions, moved to this file's offsets), a ``test_suite`` per method (label: its name,
    with ``[<suite index>]`` when suites share it) of ``test_case`` regions (label: the
    case's index; children ``inputs``, ``expected_outputs``, each with its tensors' data,
    and ``other``: the case's table), ``other`` (the root table, the program vector's
    length) and ``padding``."""
    claims = _Claims(size)
    claims.claim((("header", ""),), [(0, 8)])
    claims.claim((("program", ""),), [program])
    suites = list(root.tables("method_test_suites"))
    names = _distinct([s.string("method_name") or "" for s in suites])
    for suite, name in zip(suites, names):
        me = ("test_suite", name)
        for i, case in enumerate(suite.tables("test_cases")):
            path = (me, ("test_case", str(i)))
            for part in ("inputs", "expected_outputs"):
                claims.claim(path + ((part, ""),), _vector_spans(case, part))
            claims.claim(path + (("other", ""),), case.spans())
        claims.claim((me, ("other", "")), suite.spans())
    claims.claim((("other", ""),), root.spans())
    flatbuffer = claims.region()
    embedded = _region("program", "", [program], [_moved(r, program[0]) for r in inner])
    return [flatbuffer._replace(children=tuple(embedded if c.kind == "program" else c
                                               for c in flatbuffer.children))]


def _distinct(names: List[str]) -> List[str]:
    """``names`` with each one that several share told apart by its index (``n[i]``)."""
    counts = Counter(names)
    return [n if counts[n] == 1 else f"{n}[{i}]" for i, n in enumerate(names)]


def _moved(r: Region, by: int) -> Region:
    """``r`` and the regions below it ``by`` bytes further into the file."""
    return r._replace(start=r.start + by, end=r.end + by,
                      spans=tuple((s + by, e + by) for s, e in r.spans),
                      children=tuple(_moved(c, by) for c in r.children))


def _delegate_label(j: int, d: Table) -> str:
    return f"delegates[{j}]:{d.string('id') or ''}"


def _named(buf: Any, blobs: Sequence[Any], inside: Dict[int, List[Region]]) -> None:
    """Each named data entry into its segment's list (entries of one extent share one
    region, their keys joined by commas)."""
    at: Dict[Tuple[int, int, int], List[str]] = {}
    for b in blobs:
        key = decode_text(buf, b.key, b.key_len)
        at.setdefault((b.segment, b.data, b.size), []).append(key)
    for (k, s, n), keys in at.items():
        if k in inside and n:
            inside[k].append(_region("named_data", ",".join(keys), [(s, s + n)]))


def _disjoint(parts: List[Region]) -> List[Region]:
    """``parts`` sorted, each one overlapping those before it dropped (two things the
    file puts at the same bytes: the first keeps them)."""
    out: List[Region] = []
    for p in sorted(parts, key=lambda r: (r.start, -r.end)):
        if not out or p.start >= out[-1].end:
            out.append(p)
    return out


def _field_spans(t: Table, name: str) -> List[Span]:
    """The spans of table or vector-of-tables field ``name`` of ``t`` and everything
    under it (none when absent)."""
    if t.fields[name].kind == lib.FB_VEC_TABLE:
        return _vector_spans(t, name)
    sub = t.table(name)
    return sub.spans() if sub is not None else []


def _vector_spans(t: Table, name: str) -> List[Span]:
    """A vector of tables field: its vector and every table under it."""
    pos, n = t.vector_span(name)
    out: List[Span] = [(pos - 4, pos + 4 * n)] if pos else []
    for sub in t.tables(name):
        out += sub.spans()
    return out

