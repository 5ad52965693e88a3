"""An ETDump's profile events summed up per instruction: how often each ran and how long
it took (count, mean, min, max), named from the program that ran when it is given.

The runtime's event tracer records, per run (``RunData``: ``"Default"`` for loading a
method, ``"Execute"`` for each execution), one profile event per instruction
(``OPERATOR_CALL`` around a kernel call, ``DELEGATE_CALL`` around a delegate call), the
kernel's own event inside it (``native_call_<operator>.<overload>``), a delegate's own
events (XNNPACK: one per node, labelled by ``delegate_debug_id_str``, XNNPACK's
microsecond timings converted to ticks and laid end to end from the call's start) and
events of the runtime itself, not tied to an instruction (chain index -1:
``Method::execute``, ``Method::init``...). Times are the tracer's ticks: the file does not
say what a tick is (ExecuTorch's POSIX platform ticks in nanoseconds); an event that ends
before it starts is counted as the Inspector does, a 32-bit clock that wrapped
(:func:`elapsed`).

Runs are grouped as ExecuTorch's Inspector groups them into event blocks: the same name,
bundled input index and events. Within a group every occurrence of an event counts (the
Inspector keeps only the last of an event repeated within one run, e.g. by a loop).
ETDumps do not name the method a run executed: given the program, a run is the method's
whose instructions its events fit (an ``OPERATOR_CALL`` at a kernel call of the operator
its ``native_call`` names, a ``DELEGATE_CALL`` at a delegate call); when several fit
(a method's loading, with no instruction's events), none is named.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, List, NamedTuple, Optional, Sequence, Tuple, Union

from ..core.names import plural
from .etdump import ETDump, ProfileEvent, RunData
from .etrecord import ETRecord, Graph
from .etrecord import Node as GraphNode
from .program import DelegateCall, KernelCall, Method, Program

__all__ = ["BlockProfile", "InstructionProfile", "ROWS_BY", "Row", "Timing", "module_rows",
           "record_method", "record_nodes", "rows", "run_total", "timings"]

#: The runtime's event around each instruction, by the instruction's kind.
CALL_EVENTS = {"OPERATOR_CALL": "kernel", "DELEGATE_CALL": "delegate"}
#: The prefix of the event a kernel records of itself.
KERNEL_PREFIX = "native_call_"
#: The last tick of a 32-bit clock.
MAX_U32 = 2**32 - 1

DebugId = Union[int, str, None]
_Key = Tuple[int, int, Optional[str], DebugId]     # chain, instruction, name, delegate id


@dataclass(frozen=True)
class Timing:
    """One event's durations (ticks) over the runs of a block, in file order."""

    name: Optional[str]
    delegate_debug_id: DebugId
    durations: List[int]

    @property
    def count(self) -> int:
        """How many times the event was recorded."""
        return len(self.durations)

    @property
    def total(self) -> int:
        """Ticks of all its occurrences."""
        return sum(self.durations)

    @property
    def mean(self) -> float:
        """Mean ticks per occurrence."""
        return self.total / len(self.durations)

    @property
    def min(self) -> int:
        """Fewest ticks of one occurrence."""
        return min(self.durations)

    @property
    def max(self) -> int:
        """Most ticks of one occurrence."""
        return max(self.durations)

    @property
    def label(self) -> str:
        """What names the event: a delegate's debug id, else its name."""
        return str(self.delegate_debug_id) if self.delegate_debug_id is not None \
            else self.name or ""


class InstructionProfile(NamedTuple):
    """One instruction's events: ``call`` (the runtime's ``OPERATOR_CALL`` or
    ``DELEGATE_CALL``, None when not recorded) and the kernel's or delegate's own
    ``events`` inside it; ``kernel``, what the kernel's event names (``addmm.out`` of
    ``native_call_addmm.out``). ``kind`` (``"kernel"``, ``"delegate"``), ``operator``
    (e.g. ``aten::addmm.out``), ``delegate`` (the backend id) and ``delegate_index`` come
    from the program when it is given; without it ``kind`` comes from the call event."""

    chain: int
    instruction: int
    kind: Optional[str]
    kernel: Optional[str]
    operator: Optional[str]
    delegate: Optional[str]
    delegate_index: Optional[int]
    call: Optional[Timing]
    events: List[Timing]


class BlockProfile(NamedTuple):
    """Runs of one kind (``name``, ``bundled_input_index``; ``runs`` of them counted,
    the first ``skipped`` left out), the method they ran when the program tells (else
    None), the runtime's own events (``framework``) and each instruction's, by chain and
    index."""

    name: Optional[str]
    bundled_input_index: int
    runs: int
    method: Optional[str]
    framework: List[Timing]
    instructions: List[InstructionProfile]
    skipped: int = 0


def elapsed(start: int, end: int) -> int:
    """Ticks from ``start`` to ``end`` as ExecuTorch's Inspector counts them: ``end -
    start``, or for an end before its start, both within 32 bits, a 32-bit clock taken to
    have wrapped once: ``(MAX_U32 - start) + end`` (the Inspector's count, one tick short
    of the modular difference). An end before a start beyond 32 bits, which the Inspector
    refuses, counts as the negative difference."""
    if start > end and start <= MAX_U32 and end <= MAX_U32:
        return (MAX_U32 - start) + end
    return end - start


def _key(e: ProfileEvent) -> _Key:
    return (e.chain_index, e.instruction_id, e.name or None, e.delegate_debug_id)


def _signature(run: RunData) -> Tuple[Optional[str], int, Tuple[_Key, ...]]:
    keys: Dict[_Key, None] = {}
    for e in run.events:
        if isinstance(e, ProfileEvent):
            keys.setdefault(_key(e))
    return run.name, run.bundled_input_index, tuple(keys)


def kernel_event(operator: str) -> str:
    """The event name a kernel of ``operator`` (``aten::addmm.out``) records
    (``native_call_addmm.out``)."""
    return KERNEL_PREFIX + operator.split("::")[-1]


def _event_name(key: _Key) -> str:
    chain, pc, name, debug_id = key
    what = repr(name or "")
    if debug_id is not None:
        what += f" (delegate debug id {debug_id!r})"
    return f"event {what} at chain {chain} instruction {pc}"


def _misfit(m: Method, keys: Sequence[_Key]) -> Optional[str]:
    """Why the events of a run are not of ``m``'s instructions (the first event that
    does not fit), None when they all fit: each instruction exists, a kernel's events
    (``OPERATOR_CALL``, its ``native_call``) are at a kernel call of that operator, a
    delegate's (``DELEGATE_CALL``, an event with a delegate debug id) at a delegate call;
    other events (a kernel's own scopes) only need their instruction."""
    code = [c.instructions for c in m.chains]
    ops = [str(o) for o in m.operators]
    for key in keys:
        chain, pc, name, debug_id = key
        if chain < 0:
            continue
        if chain >= len(code):
            return f"{_event_name(key)}: the method has {plural(len(code), 'chain')}"
        if not 0 <= pc < len(code[chain]):
            return (f"{_event_name(key)}: chain {chain} has "
                    f"{plural(len(code[chain]), 'instruction')}")
        ins = code[chain][pc]
        if debug_id is not None or name == "DELEGATE_CALL":
            if not isinstance(ins, DelegateCall):
                return f"{_event_name(key)}: a delegate's event at a {type(ins).__name__}"
        elif name == "OPERATOR_CALL" or (name or "").startswith(KERNEL_PREFIX):
            if not isinstance(ins, KernelCall):
                return f"{_event_name(key)}: a kernel's event at a {type(ins).__name__}"
            if name != "OPERATOR_CALL" and 0 <= ins.op_index < len(ops) \
                    and name != kernel_event(ops[ins.op_index]):
                return f"{_event_name(key)}: the instruction calls {ops[ins.op_index]}"
    return None


def _method(program: Program, name: Optional[str], keys: Sequence[_Key]) -> Optional[Method]:
    """The method a block's runs executed: the one whose instructions its events fit;
    None when several do, ValueError naming each method's first event that does not fit
    when none does."""
    why = {m.name: _misfit(m, keys) for m in program.methods.values()}
    fit = [program.methods[n] for n, w in why.items() if w is None]
    if not fit:
        raise ValueError(f"run {name!r}: its events fit no method of the program "
                         f"({', '.join(program.methods) or 'none'}): a profile of another "
                         "program; " + "; ".join(f"{n}: {w}" for n, w in why.items()))
    return fit[0] if len(fit) == 1 else None


def _instruction(chain: int, pc: int, method: Optional[Method],
                 events: Sequence[Timing]) -> InstructionProfile:
    call = next((t for t in events if t.delegate_debug_id is None
                 and (t.name or "") in CALL_EVENTS), None)
    own = [t for t in events if t is not call]
    kind = CALL_EVENTS[call.name or ""] if call is not None else None
    kernels = [t.name[len(KERNEL_PREFIX):] for t in own if t.delegate_debug_id is None
               and t.name is not None and t.name.startswith(KERNEL_PREFIX)]
    kernel = kernels[0] if len(kernels) == 1 else None
    operator = delegate = index = None
    if method is not None:
        ins = method.chains[chain].instructions[pc]
        if isinstance(ins, KernelCall):
            kind, operator = "kernel", str(method.operators[ins.op_index])
        elif isinstance(ins, DelegateCall):
            kind, index = "delegate", ins.delegate_index
            delegate = method.delegates[index].id
    return InstructionProfile(chain, pc, kind, kernel, operator, delegate, index, call,
                              own)


def timings(dump: ETDump, program: Optional[Program] = None,
            skip_runs: int = 0) -> List[BlockProfile]:
    """Each block of ``dump``'s runs (in the order of their first run) with its events'
    timings; names from ``program`` when given. ``skip_runs`` leaves out the first runs
    of each block (warm-up); a block with no run left is left out. ValueError when a
    run's events fit none of the program's methods (the profile is of another
    program)."""
    if skip_runs < 0:
        raise ValueError(f"runs to skip: {skip_runs} is negative")
    groups: Dict[Tuple[Optional[str], int, Tuple[_Key, ...]], List[RunData]] = {}
    for run in dump.runs:
        groups.setdefault(_signature(run), []).append(run)
    blocks = []
    for (name, bundled, keys), every in groups.items():
        method = _method(program, name, keys) if program is not None else None
        runs = every[skip_runs:]
        if not runs:
            continue
        durations: Dict[_Key, List[int]] = {k: [] for k in keys}
        for run in runs:
            for e in run.events:
                if isinstance(e, ProfileEvent):
                    durations[_key(e)].append(elapsed(e.start_time, e.end_time))
        by_key = {k: Timing(k[2], k[3], d) for k, d in durations.items()}
        framework = [t for k, t in by_key.items() if k[0] < 0]
        by_pc: Dict[Tuple[int, int], List[Timing]] = {}
        for k, t in by_key.items():
            if k[0] >= 0:
                by_pc.setdefault((k[0], k[1]), []).append(t)
        instructions = [_instruction(c, pc, method, by_pc[(c, pc)]) for c, pc in sorted(by_pc)]
        blocks.append(BlockProfile(name, bundled, len(runs),
                                   method.name if method is not None else None,
                                   framework, instructions, len(every) - len(runs)))
    return blocks


#: What :func:`rows` can sum by.
ROWS_BY = ("instruction", "operator", "delegate-node")


class Row(NamedTuple):
    """One line of a block's profile: what it sums (``label``; ``kind``: ``"kernel"``,
    ``"delegate"``, ``"delegate-node"`` or ``"runtime"``, the runtime's own event), the
    instructions it sums over (``(chain, instruction)``, empty for the runtime's events)
    and the durations of its events (``timing``, ticks)."""

    label: str
    kind: str
    instructions: List[Tuple[int, int]]
    timing: Timing


def _outermost(block: BlockProfile) -> Optional[Timing]:
    """The runtime's event that holds the others (``Method::execute``, the load's
    ``Program::load_method``): the one of most ticks."""
    return max(block.framework, key=lambda t: t.total, default=None)


def run_total(block: BlockProfile) -> int:
    """Ticks of the block's runs: its outermost runtime event's (``Method::execute``),
    else the sum of its instructions' calls."""
    outer = _outermost(block)
    if outer is not None:
        return outer.total
    return sum(i.call.total for i in block.instructions if i.call is not None)


def _label(i: InstructionProfile, call: bool = True) -> str:
    """What names an instruction: its operator, its delegate (with the delegate's index
    when ``call``, naming the one call), else what its events say."""
    if i.operator is not None:
        return i.operator
    if i.delegate is not None:
        return f"{i.delegate} (delegate {i.delegate_index})" if call \
            else f"{i.delegate} (delegate)"
    if i.kernel is not None:
        return f"{i.kernel} (kernel)"
    return i.kind or "instruction"


def _merge(label: str, kind: str, parts: Sequence[Tuple[Tuple[int, int], Timing]]) -> Row:
    where: Dict[Tuple[int, int], None] = {}
    durations: List[int] = []
    for pc, t in parts:
        where.setdefault(pc)
        durations += t.durations
    return Row(label, kind, list(where), Timing(label, parts[0][1].delegate_debug_id, durations))


def rows(block: BlockProfile, by: str = "instruction") -> List[Row]:
    """The block's lines, most ticks first: per instruction (its ``OPERATOR_CALL`` or
    ``DELEGATE_CALL``), per ``operator`` (the instructions calling one operator, or one
    delegate backend, summed) or per ``delegate-node`` (each delegate's own events, at
    each delegate call); and the runtime's events but the outermost, whose ticks are the
    run's (:func:`run_total`)."""
    if by not in ROWS_BY:
        raise ValueError(f"rows by {by!r}: not one of {', '.join(ROWS_BY)}")
    groups: Dict[Tuple[str, str, str], List[Tuple[Tuple[int, int], Timing]]] = {}
    for i in block.instructions:
        pc = (i.chain, i.instruction)
        if by == "delegate-node":
            if i.kind == "delegate":
                for t in i.events:
                    label = f"{t.label} ({_label(i)} at {i.chain}:{i.instruction})"
                    groups.setdefault((label, label, "delegate-node"), []).append((pc, t))
        elif i.call is not None:
            key = f"{i.chain}:{i.instruction}" if by == "instruction" else _label(i, call=False)
            label = _label(i) if by == "instruction" else key
            groups.setdefault((key, label, i.kind or "instruction"), []).append((pc, i.call))
    out = [_merge(label, kind, parts) for (_, label, kind), parts in groups.items()]
    outer = _outermost(block)
    out += [Row(t.label, "runtime", [], t) for t in block.framework if t is not outer]
    return sorted(out, key=lambda r: -r.timing.total)


#: The ETRecord's edge-dialect program, whose nodes' debug handles the maps name.
EDGE_GRAPH = "edge_dialect_exported_program"


def _handles(value: Any) -> List[int]:
    return [value] if isinstance(value, int) else [int(h) for h in value or []]


def _edge_graph(record: ETRecord, method: str) -> Graph:
    names = record.graph_names
    for name in (f"{EDGE_GRAPH}/{method}", EDGE_GRAPH):
        if name in names:
            return record.graph(name)
    raise ValueError(f"the ETRecord has no edge-dialect program of method {method!r}")


def record_method(record: ETRecord, method: Optional[str]) -> Optional[str]:
    """The method of ``record``'s maps a block's runs are of: ``method`` when the
    program named it, else the maps' only method; None when there is none to tell."""
    handle_map = record.debug_handle_map or {}
    if method is not None:
        if method not in handle_map:
            raise ValueError(f"the ETRecord's debug handle map has no method {method!r} "
                             f"(it has {', '.join(handle_map) or 'none'})")
        return method
    if len(handle_map) == 1:
        return next(iter(handle_map))
    # the Inspector's own choice, the only method it reads
    return "forward" if "forward" in handle_map else None


def _op_name(operator: str) -> str:
    """An operator's name without namespace and overload: ``addmm`` of ``aten::addmm.out``,
    ``addmm.out`` and ``aten.addmm.default``."""
    parts = operator.split("::")[-1].split(".")
    return parts[1] if len(parts) >= 3 else parts[0]


def record_nodes(record: ETRecord, method: str, block: BlockProfile,
                 row: Row) -> Tuple[List[int], List[GraphNode]]:
    """The debug handles of a row's events and the edge-dialect graph's nodes that carry
    them (handle by handle, nodes in graph order), as ExecuTorch's Inspector finds them:
    an instruction's handles from the ETRecord's ``debug_handle_map`` by its id, a
    delegate node's from the ``delegate_map`` of its delegate call by its debug id
    (none when that map is empty, as XNNPACK's is). ValueError when the ETRecord has no
    handles for an instruction, a delegate's map no debug id of a node, or a handle no
    node, or a kernel call's handles only nodes of other operators: the profile is not of
    the program the ETRecord records."""
    if row.kind == "runtime":
        return [], []
    handle_map = (record.debug_handle_map or {}).get(method, {})
    delegates = (record.delegate_map or {}).get(method, {})
    by_handle = _edge_graph(record, method).by_debug_handle()
    handles: List[int] = []
    for chain, pc in row.instructions:
        where = f"chain {chain} instruction {pc}"
        if row.kind == "delegate-node":
            nodes_map = (delegates.get(str(pc)) or {}).get("delegate_map") or {}
            debug_id = row.timing.delegate_debug_id
            if not nodes_map:
                continue
            if str(debug_id) not in nodes_map:
                raise ValueError(f"delegate debug id {debug_id!r} at {where}: the "
                                 "ETRecord's delegate map of that call has no such id")
            handles += _handles(nodes_map[str(debug_id)])
        elif str(pc) not in handle_map:
            raise ValueError(f"{where}: the ETRecord's debug handle map of method "
                             f"{method!r} has no such instruction")
        else:
            own = _handles(handle_map[str(pc)])
            handles += own
            _check_kernel(block, (chain, pc), own, by_handle)
    handles = list(dict.fromkeys(handles))    # instructions of one node, summed
    nodes: List[GraphNode] = []
    for h in handles:
        nodes += by_handle[h]
    return handles, nodes


def _check_kernel(block: BlockProfile, pc: Tuple[int, int], handles: Sequence[int],
                  by_handle: Dict[int, List[GraphNode]]) -> None:
    """ValueError unless each handle is a node's and, at a kernel call, one of them a
    node of the kernel's operator."""
    where = f"chain {pc[0]} instruction {pc[1]}"
    for h in handles:
        if h not in by_handle:
            raise ValueError(f"debug handle {h} of {where}: no node of the ETRecord's "
                             "edge-dialect program has it")
    ins = next(i for i in block.instructions if (i.chain, i.instruction) == pc)
    kernel = ins.operator or ins.kernel
    if kernel is None:
        return
    targets = [n.target for h in handles for n in by_handle[h]]
    if _op_name(kernel) not in {_op_name(t) for t in targets}:
        raise ValueError(f"{where} calls {kernel}; its debug handles "
                         f"({', '.join(map(str, handles))}) name nodes of "
                         f"{', '.join(targets)}")


def _module(nodes: Sequence[GraphNode]) -> str:
    """The innermost module holding all of ``nodes`` (their module stacks' common
    outer part): its path, ``""`` for the model itself."""
    stacks = [[path for path, _ in n.module_stack.values()] for n in nodes if n.module_stack]
    common: List[str] = []
    for level in zip(*stacks):
        if any(path != level[0] for path in level):
            break
        common.append(level[0])
    return common[-1] if common else ""


def module_rows(block: BlockProfile, record: ETRecord, method: str) -> List[Row]:
    """The block's lines per module, most ticks first: each instruction's calls summed
    into the innermost module holding all the graph nodes its debug handles name
    (``record``'s, :func:`record_nodes`; the label ``(top)`` for the model itself), and
    the runtime's events but the outermost, as :func:`rows` gives them."""
    groups: Dict[str, List[Tuple[Tuple[int, int], Timing]]] = {}
    out: List[Row] = []
    for r in rows(block):
        if r.kind == "runtime":
            out.append(r)
            continue
        _, nodes = record_nodes(record, method, block, r)
        groups.setdefault(_module(nodes) or "(top)", []).extend(
            (pc, r.timing) for pc in r.instructions)
    out += [_merge(label, "module", sorted(parts, key=lambda p: p[0]))
            for label, parts in groups.items()]
    return sorted(out, key=lambda r: -r.timing.total)
