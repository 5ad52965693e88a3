"""What the commands show of ExecuTorch ETDump profiles (``.etdump``): the runs and their
events, through the public API of ``ETDump``. An ETDump holds no code, tensors or named
data of a model: ``dis``, ``ops``, ``export`` and ``extract`` say so."""
from __future__ import annotations

from collections import Counter
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

from ... import executorch as et
from ...core.names import plural
from ...executorch import ROWS_BY, BlockProfile, ETDump, InstructionProfile, Row, RunData, Timing
from ...files import load
from ..common import CliError, Context, Json, Style
from .base import Checkable, FileFormat, NoCode, Tensor, below

__all__ = ["ExecuTorchETDump", "PROFILE_BY"]

#: What ``profile --by`` sums a line by (``module``: with an ETRecord).
PROFILE_BY = ROWS_BY + ("module",)



def _event(e: Any) -> Json:
    """One event's fields as JSON."""
    if e.kind == "allocation":
        return {"kind": "allocation", "allocator": e.allocator,
                "allocation_size": e.allocation_size}
    out: Json = {"kind": e.kind, "name": e.name, "instruction_id": e.instruction_id,
                 "delegate_debug_id": e.delegate_debug_id}
    if e.kind == "profile":
        out.update(start_time=e.start_time, end_time=e.end_time, duration=e.duration)
    else:
        out.update(value_type=e.value_type, output=e.output,
                   tensors=[t._asdict() for t in e.tensors])
    return out


def _run(r: RunData) -> Json:
    kinds = Counter(e.kind for e in r.events)
    return {"name": r.name, "bundled_input_index": r.bundled_input_index,
            "allocators": r.allocators, "events": len(r.events),
            "by_kind": dict(sorted(kinds.items()))}


#: Ticks per microsecond: ticks taken as nanoseconds, as ExecuTorch's POSIX platform ticks
#: and as its Inspector takes them unless told otherwise.
TICKS_PER_US = 1000


def _us(ticks: float) -> float:
    return ticks / TICKS_PER_US


def _times(t: Timing) -> Json:
    """A timing's count and times in microseconds."""
    return {"count": t.count, "total": _us(t.total), "mean": _us(t.mean), "min": _us(t.min),
            "max": _us(t.max)}


def _timing(t: Timing) -> Json:
    return {"name": t.name, "delegate_debug_id": t.delegate_debug_id, **_times(t)}


def _row(r: Row, total: int) -> Json:
    return {"label": r.label, "kind": r.kind,
            "instructions": [f"{c}:{pc}" for c, pc in r.instructions], **_times(r.timing),
            "percent": 100.0 * r.timing.total / total if total else None}


def _recorded(b: BlockProfile, r: Row, record: Any, method: Optional[str]) -> Json:
    """What the ETRecord ties to a line: its events' debug handles, the operator types
    of the graph nodes carrying them, and each node's module path and stack trace."""
    handles, nodes = et.record_nodes(record, method, b, r) if method is not None else ([], [])
    return {"debug_handles": handles, "op_types": [n.target for n in nodes],
            "nodes": [{"name": n.name, "op_type": n.target, "debug_handle": n.debug_handle,
                       "module_path": list(n.module_stack.values())[-1][0]
                       if n.module_stack else None,
                       "module_stack": [list(m) for m in n.module_stack.values()]
                       if n.module_stack else None,
                       "stack_trace": n.stack_trace} for n in nodes]}


def _instruction(i: InstructionProfile) -> Json:
    return {"chain": i.chain, "instruction": i.instruction, "kind": i.kind,
            "kernel": i.kernel, "operator": i.operator, "delegate": i.delegate,
            "delegate_index": i.delegate_index,
            "call": _timing(i.call) if i.call is not None else None,
            "events": [_timing(t) for t in i.events]}


def _block(b: BlockProfile, by: str, record: Any) -> Json:
    total = et.run_total(b)
    method = et.record_method(record, b.method) if record is not None else None
    if by != "module":
        found = et.rows(b, by)
    elif method is not None:
        found = et.module_rows(b, record, method)
    else:
        raise ValueError(f"run {b.name!r}: the ETRecord's maps do not say which method ran "
                         "(--program names it)")
    lines = [_row(r, total) for r in found]
    if record is not None:
        for line, r in zip(lines, found):
            line.update(_recorded(b, r, record, method))
    return {"name": b.name, "bundled_input_index": b.bundled_input_index, "runs": b.runs,
            "skipped": b.skipped, "method": b.method, "total": _us(total), "rows": lines,
            "framework": [_timing(t) for t in b.framework],
            "instructions": [_instruction(i) for i in b.instructions]}


class ExecuTorchETDump(NoCode):
    """An ExecuTorch ETDump (a :class:`pyflatmodule.ETDump`)."""

    opens = ETDump
    file: ETDump

    def profile(self, program: Optional[FileFormat], by: str = "instruction",
                skip_runs: int = 0, record: Optional[FileFormat] = None
                ) -> Optional[List[Json]]:
        ran = recorded = None
        if program is not None:
            ran = program.profiled_program()
            if ran is None:
                raise CliError("is not an ExecuTorch program (.pte, .bpte)", "unsupported",
                               file=program.path)
        if record is not None:
            recorded = record.profiled_record()
            if recorded is None:
                raise CliError("is not an ETRecord", "unsupported", file=record.path)
        try:
            blocks = et.timings(self.file, ran, skip_runs)
        except ValueError as e:
            assert program is not None    # only a program's methods refuse a profile
            raise CliError(f"does not match {program.path}: {e}", "mismatch",
                           file=self.path) from None
        try:
            return [_block(b, by, recorded) for b in blocks]
        except ValueError as e:
            assert record is not None     # only an ETRecord's maps refuse a line
            raise CliError(f"does not match {record.path}: {e}", "mismatch",
                           file=self.path) from None

    def summary(self) -> Json:
        return {"file": self.path, **self.file.info(),
                "run_data": [_run(r) for r in self.file.runs]}

    @staticmethod
    def print_info(ctx: Context, s: Json) -> None:
        st = ctx.style
        ctx.print(f"{st(s['file'], 'bold')}: ExecuTorch ETDump, {s['size']:,} bytes, "
                  f"version {s['version']}")
        ctx.print(f"  runs: {s['runs']}, {plural(s['events'], 'event')} "
                  f"({s['profile_events']:,} profile, {s['allocation_events']:,} allocation, "
                  f"{s['debug_events']:,} debug; {plural(s['debug_tensors'], 'debug tensor')})")
        for r in s["run_data"]:
            kinds = ", ".join(f"{n:,} {k}" for k, n in r["by_kind"].items()) or "none"
            ctx.print(f"    {st(str(r['name']), 'bold')}: {plural(r['events'], 'event')} ({kinds})"
                      + (f", allocators {', '.join(map(str, r['allocators']))}"
                         if r["allocators"] else ""))

    @classmethod
    def verify(cls, path: Checkable, strict: bool, data: Sequence[str] = ()) -> Json:
        with load(path, strict=strict) as f:
            info = f.info()
        return {"format": "etdump", "size": info["size"], "runs": info["runs"],
                "events": info["events"]}

    @classmethod
    def verify_line(cls, result: Json) -> str:
        return (f"{result['size']:,} bytes, ExecuTorch ETDump, {plural(result['runs'], 'run')}, "
                f"{plural(result['events'], 'event')}")

    def tree(self, max_depth: Optional[int]) -> Json:
        """The runs, each with its events."""
        runs = []
        for i, r in enumerate(self.file.runs):
            path = f"run_data[{i}]"
            # a node's name is its path segment: the run's and events' own names move
            events = []
            for j, e in enumerate(r.events):
                node = _event(e)
                node["event_name"] = node.pop("name", None)
                events.append({**node, "name": f"events[{j}]", "path": f"{path}.events[{j}]"})
            run = _run(r)
            run["run_name"] = run.pop("name")
            runs.append({**run, "name": path, "path": path, "kind": "run",
                         **below(events, 1, max_depth)})
        return {"name": "", "path": "", "kind": "etdump", "version": self.file.version,
                **below(runs, 0, max_depth)}

    @staticmethod
    def tree_lines(st: Style, node: Json) -> List[str]:
        kind = node["kind"]
        if kind == "etdump":
            line = f"ETDump, version {node['version']}"
        elif kind == "run":
            line = f"{st('run', 'cyan')} {node['run_name']!r}, {plural(node['events'], 'event')}"
        elif kind == "profile":
            line = (f"{st('profile', 'yellow')} {node['event_name']} (instruction "
                    f"{node['instruction_id']}), {node['duration']:,} ticks")
        elif kind == "allocation":
            line = f"{st('allocation', 'yellow')} {node['allocation_size']:,} bytes from " \
                   f"{node['allocator']!r}"
        else:
            shapes = ", ".join(str(t["sizes"]) for t in node["tensors"])
            line = (f"{st('debug', 'yellow')} instruction {node['instruction_id']}: "
                    f"{node['value_type']}{' ' + shapes if shapes else ''}"
                    f"{' (output)' if node['output'] else ''}")
        lines = [line]
        if "truncated" in node:
            lines.append(st(f"... {node['truncated']} not shown (--depth)", "dim"))
        return lines

    def tensors(self) -> Dict[str, Tensor]:
        return {}

    def extract(self, name: str, jit_source: bool) -> Tuple[Union[bytes, memoryview], str]:
        raise CliError(f"no named data {name!r}: an ExecuTorch ETDump holds none",
                       "not_found", file=self.path)
