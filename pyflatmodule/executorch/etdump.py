"""ExecuTorch ETDump profiles (``.etdump``, ``.etdp``; identifier ``ED00`` at byte 8): what
ExecuTorch's runtime records of its runs, zero-copy and verified.

An ETDump is a size-prefixed flatbuffer written by the runtime's event tracer
(``Runtime.load_program(..., enable_etdump=True)`` then ``write_etdump_result_to_file``):
per run (``RunData``) its allocators and events, each a profile event (a name, the
instruction it timed, start and end times in the tracer's units), an allocation event (an
allocator of the run and a size) or a debug event (a value the program computed). A debug
event's tensors are stored in a separate file, the debug buffer, at the offsets the ETDump
gives; given it, they read as read-only numpy views of its mapping. ``pyflatmodule.load``
returns an :class:`ETDump` for one (without a debug buffer; :func:`open_etdump` and
``load_etdump`` take one). The C core checks the file when it is opened: its structure by
the project's schema (csrc/schemas/executorch_etdump.fbs), then what the schema says of the
values (csrc/executorch/etdump.c): every event of exactly one kind, allocator ids inside
their run's allocators, debug values holding what their type names, debug tensors' extents
inside their elements and, when it is given, the debug buffer.
"""
from __future__ import annotations

from typing import Any, Dict, Iterator, List, NamedTuple, Optional, Sequence, Union, overload

from ..core.dtypes import numpy_dtype
from ..core.fbread import Table, Tables, enum_names, schema_of
from ..core.lazy import np
from ..core.names import plural
from ..core.native import c_buffer, check, ffi, lib, new_error
from ..core.options import Options
from ..core.source import Holder, Openable, Source, SourceLike, open_source

__all__ = ["AllocationEvent", "DebugEvent", "DebugTensor", "DebugValue", "ETDump", "Event",
           "Events", "ProfileEvent", "RunData", "open_etdump"]

#: ValueType names by number, as the schema declares them.
_VALUE_TYPES = enum_names(lib.ed_value_type)


class DebugTensor(NamedTuple):
    """Where and how a debug tensor is stored in the debug buffer."""

    scalar_type: int            # ExecuTorch (c10) ScalarType number
    sizes: List[int]
    strides: List[int]          # in elements
    offset: int                 # of its bytes in the debug buffer (-1 when it has none)


#: A debug event's value: None (Null, or a String, whose text the schema does not store),
#: an int, a bool, a float, a tensor (read-only view) or a list of tensors.
DebugValue = Union[None, int, bool, float, "np.ndarray", List["np.ndarray"]]


def _ids(t: Table) -> Dict[str, Any]:
    return {"delegate_debug_id_int": int(t.scalar("delegate_debug_id_int")),
            "delegate_debug_id_str": t.string("delegate_debug_id_str")}


class _Event:
    """What every kind of event shares: its table and its run."""

    __slots__ = ("_table", "_run")
    kind = ""

    def __init__(self, table: Table, run: "RunData") -> None:
        self._table = table
        self._run = run

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self._describe()}>"

    def _describe(self) -> str:
        return ""


class _Traced(_Event):
    """A profile or debug event: the instruction it belongs to and delegate ids."""

    __slots__ = ()

    @property
    def name(self) -> Optional[str]:
        """The runtime's name for the event (an operator's, ``Method::execute``), None when
        absent."""
        return self._table.string("name")

    @property
    def chain_index(self) -> int:
        """The chain of the instruction (as stored: a profile event's is an int, a debug
        event's an unsigned long)."""
        return int(self._table.scalar("chain_index"))

    @property
    def instruction_id(self) -> int:
        """The runtime instruction the event belongs to (-1 when none)."""
        return int(self._table.scalar("instruction_id"))

    @property
    def delegate_debug_id_int(self) -> int:
        """A delegate's integer debug id, -1 when none."""
        return int(self._table.scalar("delegate_debug_id_int"))

    @property
    def delegate_debug_id_str(self) -> Optional[str]:
        """A delegate's string debug id, None when absent."""
        return self._table.string("delegate_debug_id_str")

    @property
    def delegate_debug_id(self) -> Union[int, str, None]:
        """The delegate debug id the event carries: its string, else its integer, else
        None (both absent or -1)."""
        text = self.delegate_debug_id_str
        if text is not None:
            return text
        n = self.delegate_debug_id_int
        return n if n != -1 else None

    def _describe(self) -> str:
        label = self.name if self.name is not None else self.delegate_debug_id
        return f"{label!r} instruction {self.instruction_id}"


class ProfileEvent(_Traced):
    """A timed event: an operator call, a delegate's node, a method's execution..."""

    __slots__ = ()
    kind = "profile"

    @property
    def start_time(self) -> int:
        """When the event started, in the tracer's units (time or cycles)."""
        return int(self._table.scalar("start_time"))

    @property
    def end_time(self) -> int:
        """When the event ended, in the tracer's units."""
        return int(self._table.scalar("end_time"))

    @property
    def duration(self) -> int:
        """``end_time - start_time`` (the format does not order them: it may be
        negative)."""
        return self.end_time - self.start_time

    @property
    def delegate_debug_metadata(self) -> memoryview:
        """A delegate's metadata bytes (a read-only view; empty when absent)."""
        start, n = self._table.vector_span("delegate_debug_metadata")
        return memoryview(self._table.buf).toreadonly()[start:start + n]


class AllocationEvent(_Event):
    """An allocation from one of the run's allocators."""

    __slots__ = ()
    kind = "allocation"

    @property
    def allocator_id(self) -> int:
        """The allocator's index in :attr:`RunData.allocators` (the core checked it)."""
        return int(self._table.scalar("allocator_id"))

    @property
    def allocator(self) -> Optional[str]:
        """The allocator's name."""
        return self._run.allocators[self.allocator_id]

    @property
    def allocation_size(self) -> int:
        """Bytes allocated."""
        return int(self._table.scalar("allocation_size"))

    def _describe(self) -> str:
        return f"{self.allocation_size} bytes from {self.allocator!r}"


class DebugEvent(_Traced):
    """A value the program computed (an operator's output, a method's output)."""

    __slots__ = ()
    kind = "debug"

    @property
    def _entry(self) -> Optional[Table]:
        return self._table.table("debug_entry")

    @property
    def value_type(self) -> str:
        """The value's ValueType name (``"Tensor"``, ``"Int"``...), ``"Null"`` when the
        event has no value."""
        entry = self._entry
        return _VALUE_TYPES[int(entry.scalar("val"))] if entry is not None else "Null"

    @property
    def output(self) -> bool:
        """Whether the value is an output of the method (its ``output`` flag)."""
        entry = self._entry
        flag = entry.table("output") if entry is not None else None
        return bool(flag.scalar("bool_val")) if flag is not None else False

    @property
    def tensors(self) -> List[DebugTensor]:
        """The value's tensors as stored (one for a Tensor, each of a TensorList; none
        otherwise)."""
        return [DebugTensor(int(t.scalar("scalar_type")), t.values("sizes"),
                            t.values("strides"), int(t.scalar("offset")))
                for t in self._tensor_tables()]

    def _tensor_tables(self) -> List[Table]:
        entry, kind = self._entry, self.value_type
        sub = entry.table({"Tensor": "tensor", "TensorList": "tensor_list"}[kind]) \
            if entry is not None and kind in ("Tensor", "TensorList") else None
        if sub is None:   # the core proved a Tensor or TensorList value holds its table
            return []
        return [sub] if kind == "Tensor" else list(sub.tables("tensors"))

    @property
    def value(self) -> DebugValue:
        """The value: scalars as Python values, tensors as read-only views of the debug
        buffer (ValueError when the ETDump was opened without one)."""
        entry, kind = self._entry, self.value_type
        if entry is None or kind in ("Null", "String"):
            return None
        if kind in ("Tensor", "TensorList"):
            views = [self._run._dump._view(t) for t in self.tensors]
            return views[0] if kind == "Tensor" else views
        sub = entry.table(kind.lower() + "_value")
        assert sub is not None   # the core refuses a value without its type's table
        out = sub.scalar(kind.lower() + "_val")
        if kind == "Int":
            return int(out)
        return bool(out) if kind == "Bool" else float(out)

    def _describe(self) -> str:
        return f"{super()._describe()} {self.value_type}"


#: Any event.
Event = Union[ProfileEvent, AllocationEvent, DebugEvent]
_KINDS = (("profile_event", ProfileEvent), ("allocation_event", AllocationEvent),
          ("debug_event", DebugEvent))


class Events(Sequence[Event]):
    """A run's events in file order, each read when asked for."""

    __slots__ = ("_tables", "_run")

    def __init__(self, tables: Tables, run: "RunData") -> None:
        self._tables = tables
        self._run = run

    def __len__(self) -> int:
        return len(self._tables)

    @overload
    def __getitem__(self, i: int) -> Event: ...
    @overload
    def __getitem__(self, i: slice) -> List[Event]: ...

    def __getitem__(self, i: Any) -> Any:
        if isinstance(i, slice):
            return [self[k] for k in range(*i.indices(len(self)))]
        event = self._tables[i]
        for name, cls in _KINDS:
            table = event.table(name)
            if table is not None:   # the core proved exactly one is
                return cls(table, self._run)
        raise AssertionError("an event without a member passed the core's check")

    def __iter__(self) -> Iterator[Event]:
        for i in range(len(self)):
            yield self[i]


class RunData:
    """One run the tracer recorded: a method's load or execution."""

    __slots__ = ("_table", "_dump")

    def __init__(self, table: Table, dump: "ETDump") -> None:
        self._table = table
        self._dump = dump

    @property
    def name(self) -> Optional[str]:
        """The run's name (``"Default"``, ``"Execute"``...), None when absent."""
        return self._table.string("name")

    @property
    def bundled_input_index(self) -> int:
        """The bundled program's test input the run used, -1 when none."""
        return int(self._table.scalar("bundled_input_index"))

    @property
    def allocators(self) -> List[Optional[str]]:
        """The names of the allocators profiled, by allocator id."""
        return [a.string("name") for a in self._table.tables("allocators")]

    @property
    def events(self) -> Events:
        """The run's events in file order."""
        return Events(self._table.tables("events"), self)

    def __repr__(self) -> str:
        n = len(self._table.tables("events"))
        return f"<RunData {self.name!r}: {plural(n, 'event')}>"


class ETDump(Holder):
    """An ExecuTorch ETDump: its :attr:`runs`, and the debug buffer given with it."""

    def __init__(self, source: Source, summary: Any, debug: Optional[Source]) -> None:
        self._source: Optional[Source] = source
        self._summary = summary
        self._debug = debug
        self._schema = schema_of(lib.ED_FILE_IDENTIFIER)

    @property
    def _root(self) -> Table:
        if self._source is None:
            raise ValueError("operation on a closed pyflatmodule.ETDump")
        return Table(self._schema, self._source.obj, int(self._summary.root), self._schema.root)

    @property
    def version(self) -> int:
        """The ETDump's schema version field."""
        return int(self._root.scalar("version"))

    @property
    def runs(self) -> List[RunData]:
        """The runs recorded (``run_data``), in file order."""
        return [RunData(t, self) for t in self._root.tables("run_data")]

    @property
    def size(self) -> int:
        """Bytes in the file."""
        return len(self._source) if self._source is not None else 0

    @property
    def has_debug_buffer(self) -> bool:
        """Whether a debug buffer was given: debug tensors then read as arrays."""
        return self._debug is not None

    def _view(self, t: DebugTensor) -> np.ndarray:
        if self._source is None:
            raise ValueError("operation on a closed pyflatmodule.ETDump")
        if self._debug is None:
            raise ValueError("this ETDump was opened without its debug buffer: its debug "
                             "tensors' bytes are there (open_etdump(..., debug_buffer=))")
        dtype = numpy_dtype(t.scalar_type)
        if 0 in t.sizes:   # no bytes: the runtime writes offset -1
            out = np.empty(t.sizes, dtype)
        else:
            # a dimension of size 1 is never stepped over: its stride, whatever it is, is 0
            out = np.ndarray(tuple(t.sizes), dtype, buffer=self._debug.obj, offset=t.offset,
                             strides=[s * dtype.itemsize if n > 1 else 0
                                      for n, s in zip(t.sizes, t.strides)])
        out.flags.writeable = False
        return out

    def info(self) -> Dict[str, Any]:
        """Sizes and counts: file bytes, version, runs, events by kind, debug tensors."""
        s = self._summary
        return {"format": "etdump", "size": self.size, "version": self.version,
                "runs": int(s.n_runs), "events": int(s.n_events),
                "profile_events": int(s.n_profile), "allocation_events": int(s.n_allocation),
                "debug_events": int(s.n_debug), "debug_tensors": int(s.n_debug_tensors),
                "debug_buffer_size": len(self._debug) if self._debug is not None else None}

    def close(self) -> None:
        """Drop this object's hold on the mappings; arrays taken earlier stay valid."""
        super().close()
        self._debug = None

    def __repr__(self) -> str:
        if self._source is None:
            return "<ETDump: closed>"
        runs, events = int(self._summary.n_runs), int(self._summary.n_events)
        return (f"<ETDump {self._source.name}: {plural(runs, 'run')}, "
                f"{plural(events, 'event')}>")


def open_etdump(source: Openable, options: Options,
                debug_buffer: Optional[SourceLike] = None) -> ETDump:
    """Open an ETDump with ``options``, and the debug buffer its debug tensors are in when
    given (any source ``load`` takes, mapped the same way); see :func:`pyflatmodule.load`."""
    opened = open_source(source, options)
    debug = open_source(debug_buffer, options) if debug_buffer is not None else None
    summary = ffi.new("ed_summary *")
    err = new_error()
    try:
        check(lib.ed_open(c_buffer(opened.obj), len(opened),
                          len(debug) if debug is not None else -1, options.to_c(), summary,
                          err), err)
    finally:
        opened.release_fd()
        if debug is not None:
            debug.release_fd()
    return ETDump(opened, summary, debug)
