"""A method's memory plan, as the program holds it: each memory-planned tensor's buffer,
offset and size, and its lifetime from the instruction chains.

ExecuTorch's memory planner (exir, at export) gives every planned tensor an
``allocation_info`` (memory_id, offset) into one of the method's
``non_const_buffer_sizes`` buffers (entry 0 reserved); two tensors may share bytes only
while one of them is dead. The lifetime of a tensor here is the span of instructions,
counted across the chains in order, that name it (as an argument, or through a tensor
list an argument names); the method's inputs are live from the first instruction and its
outputs to the last.

exir's planner (``TensorSpec.lifetime``) counts the nodes of the graph it emits instead,
among them nodes that write no instruction (placeholders, ``memory.alloc``, ``getitem``,
static ``memory.view``, the output); its span [a, b] is here [the instruction of the first
node at or after a that writes one, that of the last at or before b]
(tests/et/test_plan_lifetimes.py). It gives a view and its base one lifetime, the union of
theirs; here each is a value with its own span, so the bytes they share are unnamed
between the base's last use and the view's first, and ``peak`` does not count them there.
"""
from __future__ import annotations

from typing import Dict, List, NamedTuple, Optional, Sequence, Tuple


class PlannedTensor(NamedTuple):
    """One memory-planned tensor: its value index, buffer (``mem_id``), byte ``offset``
    and ``nbytes`` in it, and the first and last instruction that use it (None when no
    instruction does)."""

    value: int
    mem_id: int
    offset: int
    nbytes: int
    first: Optional[int]
    last: Optional[int]

    @property
    def end(self) -> int:
        """The byte after the tensor's last."""
        return self.offset + self.nbytes

    def alive_with(self, other: "PlannedTensor") -> bool:
        """True when some instruction sees both alive."""
        if self.first is None or self.last is None or other.first is None or \
                other.last is None:
            return False
        return self.first <= other.last and other.first <= self.last


class MemoryPlan(NamedTuple):
    """A method's planned memory: ``buffer_sizes`` (the program's
    ``non_const_buffer_sizes``, entry 0 reserved), every planned tensor, ``peak`` (the
    most bytes alive at one instruction), ``instructions`` (how many the chains hold),
    and ``conflicts``: pairs of value indices whose bytes overlap while both are alive
    (a planning bug; two views of the same bytes, same offset and size, are not one)."""

    buffer_sizes: List[int]
    tensors: List[PlannedTensor]
    peak: int
    instructions: int
    conflicts: List[Tuple[int, int]]


def lifetimes(uses: Sequence[Sequence[int]], inputs: Sequence[int],
              outputs: Sequence[int]) -> Dict[int, Tuple[int, int]]:
    """(first, last) instruction of every value that ``uses`` (per instruction, the
    values it names) or the method's ports name."""
    out: Dict[int, Tuple[int, int]] = {}
    for pc, used in enumerate(uses):
        for v in used:
            first, _ = out.get(v, (pc, pc))
            out[v] = (first, pc)
    end = max(len(uses) - 1, 0)
    for v in inputs:
        out[v] = (0, out.get(v, (0, 0))[1])
    for v in outputs:
        out[v] = (out.get(v, (end, end))[0], end)
    return out


def make_plan(buffer_sizes: List[int], planned: Sequence[Tuple[int, int, int, int]],
         uses: Sequence[Sequence[int]], inputs: Sequence[int],
         outputs: Sequence[int]) -> MemoryPlan:
    """The plan of ``planned`` tensors, each (value, mem_id, offset, nbytes), used by the
    instructions as ``uses`` lists."""
    spans = lifetimes(uses, inputs, outputs)
    tensors = [PlannedTensor(v, mem, off, n, *spans.get(v, (None, None)))
               for v, mem, off, n in planned]
    return MemoryPlan(buffer_sizes, tensors, _peak(tensors), len(uses), _conflicts(tensors))


def _peak(tensors: Sequence[PlannedTensor]) -> int:
    """The most bytes alive at one instruction, each (buffer, offset, size) counted once
    however many views of it are alive."""
    events: List[Tuple[int, int, Tuple[int, int, int]]] = []
    for t in tensors:
        if t.first is not None and t.last is not None and t.nbytes:
            key = (t.mem_id, t.offset, t.nbytes)
            events += [(t.first, 1, key), (t.last + 1, -1, key)]
    events.sort(key=lambda e: (e[0], e[1]))        # frees before allocations at one pc
    holders: Dict[Tuple[int, int, int], int] = {}
    alive = peak = 0
    for _, step, key in events:
        before = holders.get(key, 0)
        holders[key] = before + step
        if before == 0 and step == 1:
            alive += key[2]
        elif before == 1 and step == -1:
            alive -= key[2]
        peak = max(peak, alive)
    return peak


def _conflicts(tensors: Sequence[PlannedTensor]) -> List[Tuple[int, int]]:
    """Value pairs whose bytes overlap while both are alive (same bytes exactly: views)."""
    conflicts = []
    by_buffer: Dict[int, List[PlannedTensor]] = {}
    for t in tensors:
        if t.nbytes:
            by_buffer.setdefault(t.mem_id, []).append(t)
    for group in by_buffer.values():
        group.sort(key=lambda t: (t.offset, t.end))
        for i, a in enumerate(group):
            for b in group[i + 1:]:
                if b.offset >= a.end:
                    break
                same_bytes = (a.offset, a.nbytes) == (b.offset, b.nbytes)
                if not same_bytes and a.alive_with(b):
                    conflicts.append((min(a.value, b.value), max(a.value, b.value)))
    return sorted(conflicts)
