"""An ExecuTorch program (``.pte``, identifier ``ET12``): its methods, their values,
chains, instructions, operators and delegates, and the tensors it holds or names."""
from __future__ import annotations

import functools
import os
import threading
from typing import (
    Any,
    Callable,
    Dict,
    List,
    NamedTuple,
    Optional,
    Sequence,
    Set,
    Tuple,
    Union,
)

from ..core.dtypes import QuantizedTensor, dtype_name, same_dtype, scalar_type_name
from ..core.fbread import Table, Tables, enum_names
from ..core.lazy import np
from ..core.names import NamedDict, plural
from ..core.native import c_buffer, check, format_error, lib, new_error
from ..core.options import Options
from ..core.source import Bytes, Source, Span
from ..errors import FormatError
from . import releases
from .backends import Backend, DelegateGraph, Payload, backend_of, described
from .data_file import DataFile
from .file import StoredTensor, _File
from .memory import MemoryPlan, make_plan
from .minimum_runtime import MinimumRuntime, delegate_features, minimum, program_features
from .regions import ExtendedHeader, Region, program_regions, segment_span

__all__ = ["Chain", "Delegate", "DelegateCall", "Frame", "FreeCall", "Instruction",
           "JumpFalseCall", "KernelCall", "Method", "MoveCall", "Operator", "Program",
           "TensorSpec"]

#: Where a delegate's payload is, by DataLocation: the schema's names, lower-cased (the
#: core refuses any other number).
DATA_LOCATIONS = {v: n.lower() for v, n in enum_names(lib.et_data_location).items()}
#: Where a tensor's bytes are, by et_record.stored.
STORED = {lib.ET_STORED_NONE: "none", lib.ET_STORED_CONSTANT: "constant",
          lib.ET_STORED_EXTERNAL: "external", lib.ET_STORED_PLANNED: "planned"}




# ------------------------------------------------------------------ value types

class DelegateConstant(NamedTuple):
    """A delegate's constant described without reading its bytes, as
    :meth:`Program.delegate_constants` gives it: torch's dtype name, its shape in torch's
    layout, the bytes the file holds for it and where they are (as
    :attr:`StoredTensor.address`); ``array()`` reads it."""

    dtype_name: str
    shape: Tuple[int, ...]
    nbytes: int
    address: int
    read: Callable[[], Union[np.ndarray, QuantizedTensor]]

    def array(self) -> Union[np.ndarray, QuantizedTensor]:
        """The constant (a QuantizedTensor when quantized), read."""
        return self.read()


class TensorSpec(NamedTuple):
    """A tensor value without data in the files: its layout and where the runtime puts it.

    ``stored`` is ``"none"`` (an input or output the runtime fills), ``"planned"``
    (memory-planned: ``allocation`` is (memory_id, byte offset)) or ``"external"``
    (data in a ``.ptd`` not given to ``load``, found by ``name``). A mutable buffer the
    program stores first values for has them in ``initial`` (a read-only view)."""

    dtype: str
    shape: Tuple[int, ...]
    dim_order: Tuple[int, ...]
    stored: str
    allocation: Optional[Tuple[int, int]]
    name: Optional[str]
    initial: Optional[np.ndarray] = None


class ValueMeta(NamedTuple):
    """What a method takes or gives at one input or output, as the runtime's method
    metadata says it: the value's kind (``"Tensor"``, ``"Int"``, ...) and, for a tensor,
    its dtype name and shape."""

    kind: str
    dtype: Optional[str] = None
    shape: Optional[Tuple[int, ...]] = None

    def __str__(self) -> str:
        return f"{self.dtype}{list(self.shape)}" if self.dtype is not None and \
            self.shape is not None else self.kind


class Operator(NamedTuple):
    """A kernel operator an execution plan calls, e.g. ``aten::add`` overload ``out``."""

    name: str
    overload: str

    def __str__(self) -> str:
        return f"{self.name}.{self.overload}" if self.overload else self.name


class KernelCall(NamedTuple):
    """Call operator ``op_index`` on the values ``args``."""
    op_index: int
    args: Tuple[int, ...]


class DelegateCall(NamedTuple):
    """Run delegate ``delegate_index`` on the values ``args``."""
    delegate_index: int
    args: Tuple[int, ...]


class MoveCall(NamedTuple):
    """Copy value ``move_from`` into value ``move_to``."""
    move_from: int
    move_to: int


class JumpFalseCall(NamedTuple):
    """Jump to ``destination_instruction`` when value ``cond_value_index`` is false."""
    cond_value_index: int
    destination_instruction: int


class FreeCall(NamedTuple):
    """Free the memory of value ``value_index``."""
    value_index: int


Instruction = Union[KernelCall, DelegateCall, MoveCall, JumpFalseCall, FreeCall]


def _identity(t: Union[np.ndarray, QuantizedTensor], addresses: Dict[int, int]
              ) -> Tuple[Any, ...]:
    """What tells a tensor made within :func:`~pyflatmodule.executorch.backends.described`
    (``addresses``: its stand-ins' real addresses) apart, as a :class:`StoredTensor`
    is told: where its bytes are, its dtype's name, shape and byte strides."""
    ints = t.int_repr if isinstance(t, QuantizedTensor) else t
    at = int(ints.__array_interface__["data"][0])
    return (addresses.get(at, at), t.dtype_name if isinstance(t, QuantizedTensor)
            else dtype_name(t), tuple(int(d) for d in t.shape), tuple(ints.strides))


def operands(ins: Instruction) -> List[int]:
    """The value indices an instruction names, in order: a kernel's or a delegate's
    arguments, a move's source and destination, the value a free releases, a jump's
    condition (its destination is an instruction)."""
    if isinstance(ins, JumpFalseCall):
        return [ins.cond_value_index]
    if isinstance(ins, (MoveCall, FreeCall)):
        return list(ins)
    return list(ins.args)


class Frame(NamedTuple):
    """One frame of an instruction's stack trace."""
    filename: Optional[str]
    lineno: int
    name: Optional[str]
    context: Optional[str]


def _instruction(member: str, t: Table) -> Instruction:
    if member == "KernelCall":
        return KernelCall(t.scalar("op_index"), tuple(t.values("args")))
    if member == "DelegateCall":
        return DelegateCall(t.scalar("delegate_index"), tuple(t.values("args")))
    if member == "MoveCall":
        return MoveCall(t.scalar("move_from"), t.scalar("move_to"))
    if member == "JumpFalseCall":
        return JumpFalseCall(t.scalar("cond_value_index"), t.scalar("destination_instruction"))
    return FreeCall(t.scalar("value_index"))


def _tensor_key(values: Tables, i: int) -> Optional[str]:
    """A kernel argument's part of a kernel key, ``SCALAR_TYPE;DIM,ORDER``: of value ``i``,
    a tensor's own, a tensor list's first tensor's (ExecuTorch's lists hold tensors of one
    dtype and order); None for any other value (the verifier proved the indices)."""
    member, v = values[i].union("val")
    items = ([i] if member == "Tensor" else
             [k for k in v.values("items") if k != -1]
             if member in ("TensorList", "OptionalTensorList") and v is not None else [])
    t = next((t for member, t in (values[k].union("val") for k in items)
              if member == "Tensor" and t is not None), None)
    if t is None:
        return None
    order = ",".join(str(d) for d in t.values("dim_order"))
    return f"{int(t.scalar('scalar_type'))};{order}"


class _Ports:
    """A table with ``inputs`` and ``outputs`` vectors of value indices."""

    __slots__ = ()
    _table: Table

    @property
    def inputs(self) -> List[int]:
        """Value indices of the inputs."""
        return self._table.values("inputs")

    @property
    def outputs(self) -> List[int]:
        """Value indices of the outputs."""
        return self._table.values("outputs")


class Chain(_Ports):
    """A sequence of instructions of an execution plan."""

    __slots__ = ("_table",)

    def __init__(self, table: Table) -> None:
        self._table = table

    @property
    def instructions(self) -> List[Instruction]:
        """The instructions, decoded (KernelCall, DelegateCall, MoveCall, ...)."""
        out = []
        for t in self._table.tables("instructions"):
            member, args = t.union("instr_args")
            assert args is not None   # the verifier refuses instructions without arguments
            out.append(_instruction(member, args))
        return out

    @property
    def stacktrace(self) -> Optional[List[List[Frame]]]:
        """One list of frames per instruction, or None when the file has none."""
        if not self._table.has("stacktrace"):
            return None
        out = []
        for frames in self._table.tables("stacktrace"):
            items = frames.tables("items")
            out.append([Frame(f.string("filename"), f.scalar("lineno"), f.string("name"),
                              f.string("context")) for f in items])
        return out

    def __repr__(self) -> str:
        return f"<Chain of {len(self._table.tables('instructions'))} instructions>"


class Delegate:
    """A backend delegate: its id, compile specs and processed payload (zero-copy); for a
    backend whose payloads are read (:mod:`pyflatmodule.executorch.backends`) also the
    graph the payload holds (:attr:`graph`)."""

    __slots__ = ("_table", "_program", "_where", "name")

    def __init__(self, table: Table, program: "Program", where: str, name: str) -> None:
        self._table = table
        self._program = program
        self._where = where
        #: ``"<method>.delegates[<index>]"``: what names it, and its constants
        #: (:meth:`Program.delegate_constants`), in this package's answers
        self.name = name

    @property
    def id(self) -> str:
        """The backend's id, as its partitioner named it."""
        return self._table.string("id") or ""

    @property
    def compile_specs(self) -> Dict[str, bytes]:
        """Compile specs by key."""
        return {spec.string("key") or "": bytes(spec.vector("value"))
                for spec in self._table.tables("compile_specs")}

    @property
    def location(self) -> str:
        """``"inline"`` (in the program's flatbuffer) or ``"segment"``."""
        ref = self._table.table("processed")
        assert ref is not None   # verified
        return DATA_LOCATIONS[int(ref.scalar("location"))]

    @property
    def data(self) -> memoryview:
        """The processed payload the backend runs: read-only bytes of the mapping."""
        start, n = self._span()
        return self._program._bytes(start, n)

    def _span(self) -> Tuple[int, int]:
        return self._program._delegate_span(self._table)

    def constant_name(self, value_id: int) -> str:
        """The name the constant of value ``value_id`` of its graph goes by in
        :meth:`Program.delegate_constants` (and ``state_dict()``): the module's name its
        payload gives it, else ``"<method>.delegates[<i>].values[<id>]"``."""
        return self._program._constant_name(self.name, value_id)

    @property
    def graph(self) -> Optional[DelegateGraph]:
        """The graph the payload holds, read by its backend's reader
        (:data:`pyflatmodule.executorch.backends.BACKENDS`; an XNNPACK delegate gives an
        :class:`~pyflatmodule.executorch.XnnGraph`); None for a backend without a reader
        and for a payload its reader leaves opaque: nodes, values with datatypes, dims
        and quantization, and constants as zero-copy arrays over the program's named data
        or the payload. The payload is checked in full by its reader when the program's
        methods are checked: a malformed one raises FormatError."""
        backend = backend_of(self.id)
        if backend is None:
            return None
        return self._program._graph(self._where, self._span(), backend)

    def __repr__(self) -> str:
        return f"<Delegate {self.id} ({self.location}, {len(self.data)} bytes)>"


class Values(Sequence[Any]):
    """An execution plan's values; ``values[i]`` decodes value i when asked for."""

    __slots__ = ("_tables", "_method")

    def __init__(self, tables: Sequence[Table], method: "Method") -> None:
        self._tables = tables
        self._method = method

    def __len__(self) -> int:
        return len(self._tables)

    def __getitem__(self, i: Any) -> Any:
        if isinstance(i, slice):
            return [self[k] for k in range(*i.indices(len(self)))]
        if i < 0:
            i += len(self)
        if not 0 <= i < len(self):
            raise IndexError(f"value index {i} out of range ({len(self)} values)")
        return self._method._decode(self._tables[i], i)

    def kind(self, i: int) -> str:
        """The value's kind as the schema names it (``"Tensor"``, ``"Int"``...)."""
        return self._tables[i].union("val")[0]

    def layout(self, i: int) -> Union[StoredTensor, TensorSpec]:
        """Tensor value ``i`` without reading its bytes: where ``self[i]`` is an array,
        the :class:`StoredTensor` it is made from (dtype, shape, strides, bytes;
        ``array()`` reads it); otherwise the same TensorSpec. TypeError for a value that
        is not a tensor."""
        if self.kind(i) != "Tensor":
            raise TypeError(f"value {i} is a {self.kind(i)}, not a Tensor")
        return self._method._program._tensor_layout(self._method.index, i)

    def __repr__(self) -> str:
        return f"<Values of {len(self)}>"


class Method(_Ports):
    """One execution plan of a program."""

    __slots__ = ("_table", "_program", "index")

    def __init__(self, table: Table, program: "Program", index: int) -> None:
        self._table = table
        self._program = program
        #: its position among the program's execution plans
        self.index = index

    @property
    def name(self) -> str:
        """The method's name, e.g. ``"forward"``."""
        return self._table.string("name") or ""

    @property
    def values(self) -> Values:
        """The values, each decoded on demand."""
        return Values(self._table.tables("values"), self)

    @property
    def operators(self) -> List[Operator]:
        """The kernel operators the instructions call, by op_index."""
        return [Operator(t.string("name") or "", t.string("overload") or "")
                for t in self._table.tables("operators")]

    @property
    def chains(self) -> List[Chain]:
        """The instruction chains."""
        return [Chain(t) for t in self._table.tables("chains")]

    @property
    def delegates(self) -> List[Delegate]:
        """The backend delegates, by delegate_index."""
        return [Delegate(t, self._program, f"execution_plan[{self.index}].delegates[{i}]",
                         f"{self.name}.delegates[{i}]")
                for i, t in enumerate(self._table.tables("delegates"))]

    def _meta(self, i: int) -> ValueMeta:
        kind = self.values.kind(i)
        if kind != "Tensor":
            return ValueMeta(kind)
        v = self.values[i]
        dtype = v.dtype if isinstance(v, TensorSpec) else str(v.dtype)
        return ValueMeta(kind, dtype, tuple(v.shape))

    @property
    def input_meta(self) -> List[ValueMeta]:
        """Each input's kind, and a tensor's dtype and shape (the runtime's
        ``MethodMeta.input_tensor_meta``)."""
        return [self._meta(i) for i in self.inputs]

    @property
    def output_meta(self) -> List[ValueMeta]:
        """Each output's kind, and a tensor's dtype and shape."""
        return [self._meta(i) for i in self.outputs]

    def _uses(self) -> List[List[int]]:
        """Per instruction (across the chains, in order), the values it names: its
        arguments, and the tensors of the tensor lists among them."""
        values = self.values
        out = []
        for c in self.chains:
            for ins in c.instructions:
                named = operands(ins)
                used = list(named)
                for v in named:
                    if 0 <= v < len(values) and values.kind(v) in ("TensorList",
                                                                   "OptionalTensorList"):
                        used += [x for x in values[v] if x is not None]
                out.append(used)
        return out

    def kernel_keys(self) -> Dict[str, List[str]]:
        """Each operator a kernel call calls (``name.overload``) with its kernel keys,
        sorted, as ExecuTorch's selective build keys them (``gen_oplist``'s
        ``et_kernel_metadata``): per call ``v1/`` and each tensor argument's
        ``SCALAR_TYPE;DIM,ORDER``, joined by ``|``; a tensor list counts as its first
        tensor, an empty one (or one of no tensor) not at all."""
        tables = self._table.tables("values")
        operators = [str(o) for o in self.operators]
        keys: Dict[str, Set[str]] = {}
        for chain in self._table.tables("chains"):
            for t in chain.tables("instructions"):
                member, call = t.union("instr_args")
                if member != "KernelCall" or call is None:
                    continue
                parts = [p for p in (_tensor_key(tables, v)
                                     for v in call.values("args")) if p is not None]
                keys.setdefault(operators[int(call.scalar("op_index"))], set()).add(
                    "v1/" + "|".join(parts))
        return {op: sorted(k) for op, k in keys.items()}

    def memory_plan(self) -> MemoryPlan:
        """Where the runtime puts each memory-planned tensor, for how long, the peak,
        and any two tensors the plan lets overlap while both are alive."""
        return make_plan(self.non_const_buffer_sizes, self._program._planned(self.index),
                         self._uses(), self.inputs, self.outputs)

    @property
    def non_const_buffer_sizes(self) -> List[int]:
        """Bytes of each memory-planned buffer (entry 0 is reserved)."""
        return self._table.values("non_const_buffer_sizes")

    @property
    def container_metadata(self) -> Optional[Tuple[str, str]]:
        """(encoded_inp_str, encoded_out_str): the pytree specs of inputs and outputs."""
        meta = self._table.table("container_meta_type")
        if meta is None:
            return None
        return meta.string("encoded_inp_str") or "", meta.string("encoded_out_str") or ""

    def _decode(self, t: Table, i: int) -> Any:
        member, v = t.union("val")
        if v is None or member == "Null":
            return None
        if member in ("Int", "Bool", "Double"):
            return v.scalar(member.lower() + "_val")
        if member == "String":
            return v.string("string_val")
        if member == "IntList":   # boxed: the indices of Int values (the verifier checked)
            values = self._table.tables("values")
            return [values[k].union("val")[1].scalar("int_val")
                    for k in v.values("items")]
        if member in ("DoubleList", "BoolList", "TensorList"):
            return v.values("items")
        if member == "OptionalTensorList":
            return [None if x == -1 else x for x in v.values("items")]
        return self._program._tensor(self.index, i)

    def __repr__(self) -> str:
        return f"<Method {self.name}: {len(self._table.tables('values'))} values>"


class Methods(NamedDict[Method]):
    """A program's methods by name (a ``dict``)."""

    what = "Methods"
    unit = "method"


class Program(_File):
    """An ExecuTorch program (``.pte``)."""

    _minimum: Optional[MinimumRuntime] = None

    def __init__(self, source: Source, summary: Any, options: Options,
                 data: Sequence[DataFile] = ()) -> None:
        super().__init__(source, summary, options)
        #: the data files given to ``load``, searched in order for external tensors
        self.data_files = list(data)
        self._external: Dict[str, StoredTensor] = {}
        self._graphs: Dict[str, Optional[DelegateGraph]] = {}
        self._given: Optional[Dict[Tuple[str, int], str]] = None
        self._named: Optional[Dict[str, Span]] = None
        # Where the data files' tensors and named data are, taken now: they hold the
        # sources, so the program keeps working when a data file given to it is closed.
        self._data_named: Dict[str, Span] = {}
        for f in self.data_files:
            for key, stored in f._stored_tensors().items():
                self._external.setdefault(key, stored)
            for key, span in f._named_spans().items():
                self._data_named.setdefault(key, span)
        self._plans_ok = False
        self._plans_lock = threading.Lock()
        if summary.plans_checked:
            self._check_plans()
        if self.data_files:
            self._resolve_external()

    def _check_plans(self) -> None:
        """Check every execution plan in full, once, before the first read of any method,
        value, instruction, delegate or tensor (as the runtime's ``load_method`` checks
        a method after ``load_program``): ``verify="full"`` did it at open. The C index's
        checks first, then each payload a backend's reader reads and the calls of it.
        The check reads the plans' tables, the payloads and the named data through paths
        that do not check (:meth:`_read_index`), never through the public accessors."""
        if self._plans_ok:
            return
        with self._plans_lock:   # one thread checks; the others wait for its verdict
            if self._plans_ok:
                return
            s = self._summary
            if not s.plans_checked:
                err = new_error()
                buf = self._buf
                check(lib.et_check_plans(c_buffer(buf), len(buf), self._options.to_c(), s,
                                         err), err)
            if s.n_delegates:   # payloads are checked when their graphs are read
                for i, plan in enumerate(self._root.tables("execution_plan")):
                    self._check_delegate_calls(i, plan)
            self._plans_ok = True

    def _index(self) -> Tuple[List[Any], List[Any]]:
        self._check_plans()
        return self._read_index()

    def _check_delegate_calls(self, index: int, plan: Table) -> None:
        """Each call of a delegate of plan ``index`` passes as many arguments as its graph
        reads (:attr:`DelegateGraph.arguments`: XNNPACK's executor reads argument
        ``external_id`` of each graph input and output, unchecked)."""
        graphs: List[Optional[DelegateGraph]] = []
        for k, delegate in enumerate(plan.tables("delegates")):
            backend = backend_of(delegate.string("id") or "")
            graphs.append(None if backend is None else self._graph(
                f"execution_plan[{index}].delegates[{k}]", self._delegate_span(delegate),
                backend))
        if not any(g is not None for g in graphs):
            return
        for c, chain in enumerate(plan.tables("chains")):
            for i, t in enumerate(chain.tables("instructions")):
                member, call = t.union("instr_args")
                if member != "DelegateCall" or call is None:
                    continue
                k = int(call.scalar("delegate_index"))
                graph = graphs[k]
                at, n = call.vector_span("args")
                if graph is not None and n < graph.arguments:
                    backend = backend_of(plan.tables("delegates")[k].string("id") or "")
                    assert backend is not None   # it read the graph
                    raise format_error(
                        lib.ET_E_BAD_EXTERNAL, at - 4 if at else call.pos,
                        f"execution_plan[{index}].chains[{c}].instructions[{i}]"
                        ".instr_args<DelegateCall>.args",
                        f"the call passes {n} arguments; its {backend.name} graph reads "
                        f"{graph.arguments} (one per external id)")

    def _resolve_external(self) -> None:
        for r in self._stored_as(lib.ET_STORED_EXTERNAL):
            name = self._name(r)
            array = self._external.get(name)
            where = f"execution_plan[{r.plan}].values[{r.value}]"
            if array is None:
                raise format_error(lib.ET_E_MISSING_DATA, r.table, where,
                                   f"external tensor {name!r} is in none of the data files "
                                   f"given ({len(self.data_files)})")
            dtype, shape, _ = self._layout(r)
            if not same_dtype(array.scalar_type, r.scalar_type) or array.nbytes != r.nbytes:
                held = scalar_type_name(array.scalar_type)
                raise format_error(lib.ET_E_DATA_MISMATCH, r.table, where,
                                   f"external tensor {name!r}: the program wants {dtype} "
                                   f"{list(shape)}, the data file holds {held} "
                                   f"{list(array.sizes)}")

    def kernel_keys(self) -> Dict[str, List[str]]:
        """Every method's :meth:`Method.kernel_keys`, merged: each operator's keys, sorted."""
        keys: Dict[str, Set[str]] = {}
        for m in self._plans():
            for op, k in m.kernel_keys().items():
                keys.setdefault(op, set()).update(k)
        return {op: sorted(k) for op, k in keys.items()}

    @property
    def methods(self) -> "Methods":
        """Execution plans by name, in file order (of plans sharing a name, the first: the
        one the runtime loads by that name); a name that is none of them raises KeyError
        listing those there are."""
        out = Methods()
        for m in self._plans():
            out.setdefault(m.name, m)
        return out

    def _plans(self) -> List[Method]:
        """Every execution plan, by index (checked first)."""
        self._check_plans()
        return [Method(t, self, i) for i, t in enumerate(self._root.tables("execution_plan"))]

    def _planned(self, plan: int) -> List[Tuple[int, int, int, int]]:
        """(value, mem_id, offset, nbytes) of each memory-planned tensor of a plan."""
        return [(r.value, r.memory_id, r.memory_offset, r.nbytes)
                for r in self._stored_as(lib.ET_STORED_PLANNED) if r.plan == plan]

    def _tensor(self, plan: int, value: int) -> Union[np.ndarray, TensorSpec]:
        found = self._tensor_layout(plan, value)
        return found.array() if isinstance(found, StoredTensor) else found

    def _tensor_layout(self, plan: int, value: int) -> Union[StoredTensor, TensorSpec]:
        """A tensor value's data in the files (a constant, an external tensor a data file
        given holds), nothing read, or the TensorSpec of one without."""
        records, _ = self._index()
        if self._by_value is None:
            self._by_value = {(r.plan, r.value): i for i, r in enumerate(records)}
        r = records[self._by_value[plan, value]]
        stored = r.stored
        name = self._name(r) if r.name else None
        if stored == lib.ET_STORED_CONSTANT:
            return self._stored(r)
        dtype, shape, order = self._layout(r)
        if stored == lib.ET_STORED_EXTERNAL and name in self._external:
            found = self._external[name]
            return found._replace(sizes=shape, order=order) if not found.sizes else found
        allocation = ((r.memory_id, r.memory_offset)
                      if stored == lib.ET_STORED_PLANNED else None)
        initial = self._array(r) if r.initial else None
        return TensorSpec(dtype, shape, order, STORED[stored], allocation, name, initial)

    def _delegate_span(self, delegate: Table) -> Tuple[int, int]:
        """(file offset, size) of a delegate's payload (its BackendDelegate table)."""
        ref = delegate.table("processed")
        assert ref is not None   # verified
        index = int(ref.scalar("index"))
        if int(ref.scalar("location")) == lib.ET_DATA_LOCATION_INLINE:
            data: Table = self._root.tables("backend_delegate_data")[index]
            return data.vector_span("data")
        return segment_span(self._root, self._summary, index)

    def _graph(self, where: str, span: Tuple[int, int], backend: Backend
               ) -> Optional[DelegateGraph]:
        """The graph of the delegate at ``where`` by its backend's reader, read once."""
        if where not in self._graphs:
            self._graphs[where] = backend.read(Payload(
                self._bytes(*span), self._named_bytes, where, span[0],
                bool(self.data_files), self._options))
        return self._graphs[where]

    def _named_bytes(self, key: str) -> Optional[Span]:
        """Named data `key` from the program, else from the data files given."""
        if self._named is None:
            self._named = {**self._data_named, **self._named_spans()}
        return self._named.get(key)

    def _delegate_graphs(self) -> List[Tuple[str, DelegateGraph]]:
        """(``"<method>.delegates[<i>]"``, graph) of every delegate whose graph is read."""
        out = []
        for m in self.methods.values():
            for d in m.delegates:
                graph = d.graph
                if graph is not None:
                    out.append((d.name, graph))
        return out

    def _given_names(self) -> Dict[Tuple[str, int], str]:
        """(delegate's name, value id) -> the module's name its payload gives the
        constant (each graph's ``constant_names``), where the constant goes by it: the
        first to give a name takes it, unless a tensor of the program (or of its data
        files) goes by it already; one given a name a tensor goes by already takes it
        only when it is that tensor (its bytes at the same place, of the same dtype,
        shape and strides), else keeps its place's name. A name holding brackets is
        not taken (the places' names have them). Worked out once, nothing read."""
        if self._given is None:
            out: Dict[Tuple[str, int], str] = {}
            graphs = [(where, graph, graph.constant_names())
                      for where, graph in self._delegate_graphs()]
            if any(names for _, _, names in graphs):
                taken: Dict[str, Optional[Tuple[Any, ...]]] = {
                    name: (t.address, scalar_type_name(t.scalar_type), t.shape, t.strides)
                    for name, t in self._stored_by_name().items()}
                with described() as addresses:
                    for where, graph, names in graphs:
                        held = graph.torch_constants() if names else {}
                        for vid, name in names.items():
                            t = held.get(vid)
                            it = None if t is None else _identity(t, addresses)
                            if not name or "[" in name or "]" in name or (
                                    name in taken and (it is None or taken[name] != it)):
                                continue
                            taken.setdefault(name, it)
                            out[(where, vid)] = name
            self._given = out
        return self._given

    def _constant_name(self, where: str, vid: int) -> str:
        """The name of constant ``vid`` of delegate ``where`` (:meth:`_given_names`)."""
        return self._given_names().get((where, vid)) or f"{where}.values[{vid}]"

    def delegate_constants(self) -> Dict[str, Union[np.ndarray, QuantizedTensor]]:
        """Every constant of every delegate's graph (:attr:`Delegate.graph`), by the
        module's name its payload gives it (:meth:`Delegate.constant_name`; a native
        backend's parameters and buffers: ``layers.0.weight``), else by
        ``"<method>.delegates[<i>].values[<id>]"``: the method's name, the delegate's
        index in it and the constant's value id in the graph (XNNPACK and Vulkan key
        their constants by a hash of their bytes, TOSA, Core ML and OpenVINO name them
        by their graphs' nodes; these stay the same across exports of one model). A name
        another tensor goes by already names this one only when it is that tensor (its
        bytes, at the same place); else the constant keeps its place's name, so none is
        dropped. Read-only, in torch's layout (each graph's ``torch_constants``;
        XNNPACK's: conv weights ``OIHW``, depthwise ``[C, 1, H, W]``), strided views of
        the file; quantized ones QuantizedTensor. :meth:`delegate_layouts` says what was
        permuted."""
        return {self._constant_name(where, vid): array
                for where, graph in self._delegate_graphs()
                for vid, array in graph.torch_constants().items()}

    def delegate_layouts(self) -> Dict[str, Dict[str, Any]]:
        """For each constant of :meth:`delegate_constants`, by the same name, how its
        backend stores it, as JSON data (each graph's ``constant_layouts``; XNNPACK's:
        ``layout`` and ``shape`` as stored, and for the filters and biases of conv and
        fully-connected nodes ``node``, ``role``, ``torch_layout``, ``permutation``
        (torch's tensor is the stored one ``.transpose(permutation)``) and ``notes``
        where the values may not be the module's, see :class:`TorchLayout`; other
        constants ``"layout": "as stored"``)."""
        with described():   # what is said of the constants needs none of their bytes
            return {self._constant_name(where, vid): layout
                    for where, graph in self._delegate_graphs()
                    for vid, layout in graph.constant_layouts().items()}

    def constants(self) -> List[Tuple[int, int, np.ndarray]]:
        """Every constant tensor as (plan index, value index, array), in file order."""
        return [(r.plan, r.value, self._array(r))
                for r in self._stored_as(lib.ET_STORED_CONSTANT)]

    def state_dict(self) -> Dict[str, Union[np.ndarray, QuantizedTensor]]:
        """Every tensor whose name the files hold, by that name: the data files' tensors
        by key; constants, mutable buffers' initial values and resolved external tensors
        by fully qualified name; then the delegates' constants by the module's names their
        payloads give, else by ``"<method>.delegates[<i>].values[<id>]"`` (see
        :meth:`delegate_constants`)."""
        out: Dict[str, Union[np.ndarray, QuantizedTensor]] = {
            k: v.array() for k, v in self._stored_by_name().items()}
        for key, value in self.delegate_constants().items():
            out.setdefault(key, value)
        return out

    def named_tensors(self) -> Dict[str, Union[np.ndarray, QuantizedTensor]]:
        """Every tensor with data, by a stable name: :meth:`state_dict`'s names, then each
        remaining constant as ``<method>.values[<index>]`` (constants carry no names)."""
        out = self.state_dict()
        for key, stored in self._unnamed_constants().items():
            out.setdefault(key, stored.array())
        return out

    def named_layouts(self) -> Dict[str, Union[StoredTensor, DelegateConstant]]:
        """:meth:`named_tensors` without reading a byte of them: each a
        :class:`StoredTensor` or a :class:`DelegateConstant` (dtype, shape, bytes and
        where; ``array()`` reads it)."""
        out = self.state_layouts()
        for key, stored in self._unnamed_constants().items():
            out.setdefault(key, stored)
        return out

    def state_layouts(self) -> Dict[str, Union[StoredTensor, DelegateConstant]]:
        """:meth:`state_dict` without reading a byte of it (see :meth:`named_layouts`)."""
        out: Dict[str, Union[StoredTensor, DelegateConstant]] = dict(self._stored_by_name())
        for key, value in self._delegate_descriptions().items():
            out.setdefault(key, value)
        return out

    def _stored_by_name(self) -> Dict[str, StoredTensor]:
        """The tensors the files hold by name (constants, mutable buffers' initial values,
        external tensors resolved, then the data files' others), nothing read."""
        out: Dict[str, StoredTensor] = {}
        records, _ = self._index()
        for r in records:
            if not r.name:
                continue
            name = self._name(r)
            if r.stored == lib.ET_STORED_CONSTANT or r.initial:
                out.setdefault(name, self._stored(r))
            elif name in self._external:
                out.setdefault(name, self._external[name])
        for key, stored in self._external.items():
            out.setdefault(key, stored)
        return out

    def _unnamed_constants(self) -> Dict[str, StoredTensor]:
        """Every constant as ``<method>.values[<index>]``, nothing read."""
        names = [m.name for m in self._plans()]
        return {f"{names[r.plan]}.values[{r.value}]": self._stored(r)
                for r in self._stored_as(lib.ET_STORED_CONSTANT)}

    def _delegate_descriptions(self) -> Dict[str, DelegateConstant]:
        """:meth:`delegate_constants`, described from stand-ins (nothing read: see
        :func:`~pyflatmodule.executorch.backends.described`)."""
        out: Dict[str, DelegateConstant] = {}
        with described() as addresses:
            for key, t in self.delegate_constants().items():
                ints = t.int_repr if isinstance(t, QuantizedTensor) else t
                at = int(ints.__array_interface__["data"][0])
                out[key] = DelegateConstant(
                    t.dtype_name if isinstance(t, QuantizedTensor) else dtype_name(t),
                    tuple(int(d) for d in t.shape), int(ints.nbytes),
                    addresses.get(at, at), functools.partial(self._delegate_constant, key))
        return out

    def _delegate_constant(self, key: str) -> Union[np.ndarray, QuantizedTensor]:
        return self.delegate_constants()[key]

    @property
    def missing_data(self) -> List[str]:
        """What the program names but neither it nor a data file given to ``load`` holds,
        sorted: the fully qualified names of external tensors and the keys of named data
        its delegates read (weights written to a ``.ptd``). Empty when everything
        resolved; pass the data files that hold the rest with ``load(..., data=[...])``."""
        keys = {self._name(r) for r in self._stored_as(lib.ET_STORED_EXTERNAL)}
        keys -= set(self._external)
        for m in self.methods.values():
            for d in m.delegates:
                graph = d.graph
                if graph is not None:
                    keys.update(graph.missing.values())
        return sorted(keys)

    @property
    def extended_header(self) -> Optional[ExtendedHeader]:
        """The ``eh00`` extended header (program size, segment base offset, segment data
        size), None when the file has none (a program without segments)."""
        s = self._summary
        if not s.header_length:
            return None
        return ExtendedHeader(int(s.flatbuffer_end), int(s.segment_base),
                              int(s.segment_size))

    @property
    def minimum_runtime(self) -> MinimumRuntime:
        """The oldest ExecuTorch release whose runtime reads every feature the program
        uses (schema fields, union members and enum values it holds, the extended
        header, named data, external tensors, XNNPACK payloads' node kinds, datatypes
        and quantizations) and the data files given to ``load`` use,
        with the features that need a release after the first, latest first; see
        :mod:`pyflatmodule.executorch.minimum_runtime`."""
        if self._minimum is not None:
            return self._minimum
        features = program_features(self._root, self.extended_header is not None)
        if self._stored_as(lib.ET_STORED_EXTERNAL):
            features["external tensors"] = releases.FLAT_TENSOR_FIRST
        for m in self.methods.values():
            for d in m.delegates:
                graph = d.graph
                if graph is not None:
                    features.update(delegate_features(graph))
        for i, f in enumerate(self.data_files):
            if f._source is None and f._minimum is None:
                continue   # closed before it was asked
            name = os.path.basename(f.origin[0]) if f.origin else str(i)
            features[f"data file {name}"] = f.minimum_runtime.release
        self._minimum = minimum(features)
        return self._minimum

    def regions(self) -> List[Region]:
        """Where the file's bytes go: ``flatbuffer``, ``segment`` and ``padding`` regions
        covering every byte once, in file order, each with its children (per method its
        values, chains, operators and delegates, inline constants and payloads; in the
        segments, constant buffers and their alignment padding, delegate payloads by
        method and delegate, named data by key); see :class:`Region`."""
        records, blobs = self._index()
        return program_regions(self._root, self._summary, records, blobs, self.size,
                               lib.ET_STORED_CONSTANT, lib.ET_STORED_PLANNED)

    def info(self) -> Dict[str, Any]:
        """Sizes, methods, operators, delegates and segments; the external tensors and
        what of the program's data is missing (:attr:`missing_data`)."""
        s = self._summary
        methods = []
        for m in self.methods.values():
            methods.append({"name": m.name, "values": len(m.values), "inputs": m.inputs,
                            "outputs": m.outputs,
                            "input_meta": [v._asdict() for v in m.input_meta],
                            "output_meta": [v._asdict() for v in m.output_meta],
                            "instructions": sum(len(c.instructions) for c in m.chains),
                            "operators": [str(o) for o in m.operators],
                            "delegates": [d.id for d in m.delegates],
                            "non_const_buffer_sizes": m.non_const_buffer_sizes})
        constants = self._stored_as(lib.ET_STORED_CONSTANT)
        buffers: Dict[int, int] = {}   # each constant buffer once, however many share it
        for r in constants:
            buffers[r.data] = max(buffers.get(r.data, 0), r.nbytes)
        return {"format": "pte", "size": self.size, "version": self.version,
                "flatbuffer_size": int(s.flatbuffer_end),
                "segment_data_size": int(s.segment_size),
                "segments": len(self._root.tables("segments")),
                "named_data": int(s.n_blobs), "constant_tensors": len(constants),
                "constant_bytes": sum(buffers.values()),
                "external_tensors": len(self._stored_as(lib.ET_STORED_EXTERNAL)),
                "data_files": len(self.data_files), "missing_data": self.missing_data,
                "native_code": [i._asdict() for i in self.native_code()],
                "methods": methods}

    def _native_blobs(self) -> List[Tuple[str, int, Bytes]]:
        """Named data, then every delegate payload, by where it is."""
        return super()._native_blobs() + [
            (d.name, d._span()[0], self._span(*d._span()))
            for m in self.methods.values() for d in m.delegates]

    def _describe(self) -> str:
        try:
            return f"methods {list(self.methods)}"
        except FormatError as e:   # a repr never raises: it says why there are none
            n = len(self._root.tables("execution_plan"))   # the vector: checked at open
            return f"{plural(n, 'execution plan')}, refused: {e.code} at {e.path}"
