"""Functions: bytecode, operators, constants, schemas, the disassembler, and ``short``,
the one-line description of a decoded value that listings use."""
from __future__ import annotations

import functools
import reprlib
from typing import (
    Any,
    Callable,
    Dict,
    Iterable,
    List,
    NamedTuple,
    NoReturn,
    Optional,
    Tuple,
    TypeVar,
    Union,
    overload,
)

from ..core.dtypes import QuantizedTensor
from ..core.lazy import np
from ..core.names import NamedDict, listing, matching_names, not_picklable
from ..core.native import check, ffi, format_error, lib, new_error
from .values import Decoding, Object, decode

__all__ = ["Argument", "Function", "Instruction", "Methods", "OPCODES",
           "Operator", "Schema", "instruction_dtype", "short"]

T = TypeVar("T")


@functools.lru_cache(maxsize=None)
def instruction_dtype() -> np.dtype:
    """One bytecode instruction as stored: opcode, pad byte, n (uint16), x (int32). Made
    at its first use (numpy is imported then)."""
    return np.dtype({"names": ["op", "n", "x"], "formats": ["i1", "<u2", "<i4"],
                     "offsets": [lib.MOBILE_INSTRUCTION_OP_OFFSET,
                                 lib.MOBILE_INSTRUCTION_N_OFFSET,
                                 lib.MOBILE_INSTRUCTION_X_OFFSET],
                     "itemsize": lib.MOBILE_INSTRUCTION_SIZE})


#: Opcode names by number (torch/csrc/jit/runtime/instruction.h).
OPCODES: Tuple[str, ...] = (
    "OP", "OPN", "LOAD", "MOVE", "STOREN", "STORE", "DROP", "DROPR", "LOADC", "JF", "JMP",
    "LOOP", "RET", "WAIT", "CALL", "GUARD", "TYPECHECK", "FAIL_GUARD", "PROFILE_OP",
    "TAIL_CALL", "INTERFACE_CALL", "GET_ATTR", "SET_ATTR", "LIST_UNPACK", "TUPLE_CONSTRUCT",
    "NAMED_TUPLE_CONSTRUCT", "LIST_CONSTRUCT", "DICT_CONSTRUCT", "CREATE_OBJECT",
    "ISINSTANCE", "TUPLE_SLICE", "TUPLE_INDEX", "RAISE_EXCEPTION", "DICT_INDEX",
    "UNCHECKED_CAST", "__IS__", "UN_INITIALIZED", "__ISNOT__", "FORMAT", "DEVICE", "DTYPE",
    "DIM", "__NOT__", "TO_LIST", "NUM_TO_TENSOR", "IS_CUDA", "FORK", "WARN", "ENTER", "EXIT",
    "AWAITABLE",
)
#: Instructions whose x indexes the type annotations (one type).
_TYPE_OPERAND = {"LIST_CONSTRUCT", "DICT_CONSTRUCT", "NAMED_TUPLE_CONSTRUCT", "CREATE_OBJECT",
                 "TO_LIST"}
#: Instructions whose x and n name a run of type annotations.
_TYPES_OPERAND = {"ISINSTANCE", "TYPECHECK"}
#: Instructions whose x is a register.
_REGISTER = {"LOAD", "MOVE", "STORE", "DROPR"}
#: Instructions whose x is an attribute slot.
_SLOT = {"GET_ATTR", "SET_ATTR"}

_REPR = reprlib.Repr()
_REPR.maxlevel = 3            # constants may nest deeply or share one list many times
_REPR.maxstring = 40
_REPR.maxother = 40


class Operator(NamedTuple):
    """An operator a function calls; ``num_args`` is None when not serialized."""

    name: str
    overload_name: str
    num_args: Optional[int]

    @property
    def full_name(self) -> str:
        """``name.overload`` as torch prints operator names (just ``name`` without one)."""
        return f"{self.name}.{self.overload_name}" if self.overload_name else self.name


class Argument(NamedTuple):
    """One argument or return of a schema. ``default`` is None both for "no default"
    and for "default None": the file cannot tell them apart."""

    name: str
    type: str
    default: Any


class Schema(NamedTuple):
    """A method's arguments (``self`` first) and returns."""

    arguments: List[Argument]
    returns: List[Argument]

    def __str__(self) -> str:
        def arg(a: Argument) -> str:
            text = f"{a.name}: {a.type}" if a.name else a.type
            return text if a.default is None else f"{text}={_REPR.repr(a.default)}"
        rets = ", ".join(arg(r) for r in self.returns)
        return f"({', '.join(arg(a) for a in self.arguments)}) -> " + (
            rets if len(self.returns) == 1 else f"({rets})")


class Function:
    """A TorchScript method's mobile bytecode, read on demand."""

    __slots__ = ("_file", "_image", "_index", "_f", "__weakref__")

    def __init__(self, file: Decoding, index: int) -> None:
        self._file = file
        self._image = image = file.image
        self._index = index
        f = ffi.new("ptmf_function *")
        err = new_error()
        pos = int(image.index["pos"][index])
        check(lib.ptmf_read_function(image.cbuf, image.size, pos, f, err), err,
              self._where())
        self._f = f

    def _where(self) -> str:
        return f"ivalues[{self._index}].val<Function>"

    @property
    def name(self) -> str:
        """The qualified name, e.g. ``"__torch__.MyModule.forward"``."""
        return self._image.text(self._f.qn, self._f.qn_len, self._where() + ".qn")

    @property
    def instructions(self) -> np.ndarray:
        """Read-only structured array (fields ``op``, ``n``, ``x``) over the file."""
        f = self._f
        return self._image.array(instruction_dtype(), f.n_instructions, f.instructions)

    @property
    def operators(self) -> List[Operator]:
        """The operator table that OP/OPN instructions index."""
        f, image = self._f, self._image
        r = ffi.new("ptmf_record *")
        err = new_error()
        out = []
        for i in range(f.n_operators):
            where = f"{self._where()}.operators[{i}]"
            check(lib.ptmf_read_operator(image.cbuf, image.size, f.operators, f.n_operators,
                                         i, r, err), err, where)
            num = int(r.num)
            out.append(Operator(image.text(r.s0, r.s0_len, where + ".name"),
                                image.text(r.s1, r.s1_len, where + ".overload_name"),
                                None if num < 0 else num))
        return out

    @property
    def constants(self) -> List[Any]:
        """The decoded constant table that LOADC instructions index."""
        memo: Dict[int, Any] = {}
        return [decode(self._file, j, memo) for j in self._constant_indices()]

    def _constant_indices(self) -> Tuple[int, ...]:
        f = self._f
        indices = self._image.u32s(f.constants, f.n_constants)
        n = int(self._image.summary.n_ivalues)
        for j in indices:
            if j >= n:
                raise format_error(lib.PTMF_E_BAD_INDEX, f.constants, self._where() + ".constants")
        return indices

    @property
    def type_annotations(self) -> List[str]:
        """Type strings that type-taking instructions index."""
        f = self._f
        return self._image.read_strings(f.type_annotations, f.n_type_annotations,
                                        self._where() + ".type_annotations")

    @property
    def register_size(self) -> int:
        """Number of registers the bytecode uses (registers are numbered from 1)."""
        return int(self._f.register_size)

    @property
    def class_type(self) -> str:
        """Name of the class this method belongs to."""
        types = self._image.object_types()
        ct = int(self._f.class_type)
        return types[ct].name if ct < len(types) else ""

    @property
    def schema(self) -> Optional[Schema]:
        """Arguments and returns with their defaults, or None when not stored."""
        f = self._f
        if not f.has_schema:
            return None
        return Schema(self._args(f.arguments, f.n_arguments, "arguments"),
                      self._args(f.returns, f.n_returns, "returns"))

    def _args(self, vec: int, count: int, what: str) -> List[Argument]:
        image = self._image
        r = ffi.new("ptmf_record *")
        err = new_error()
        out = []
        for i in range(count):
            where = f"{self._where()}.schema.{what}[{i}]"
            check(lib.ptmf_read_arg(image.cbuf, image.size, vec, count, i, r, err), err, where)
            default = int(r.num)
            if default >= image.summary.n_ivalues:
                raise format_error(lib.PTMF_E_BAD_INDEX, vec, where + ".default_value")
            out.append(Argument(image.text(r.s0, r.s0_len, where + ".name"),
                                image.text(r.s1, r.s1_len, where + ".type"),
                                decode(self._file, default, {}) if default else None))
        return out

    @property
    def debug_handles(self) -> np.ndarray:
        """One int64 debug handle per instruction (empty when not stored), zero-copy."""
        f = self._f
        return self._image.array("<i8", f.n_debug_handles, f.debug_handles)

    def disassembly(self) -> List[Instruction]:
        """Every instruction decoded: its opcode's name, its operands as text (``r3``,
        ``c0``, ``t1, 2``, ``+4``...) and a comment naming what they index (operator,
        constant, types, jump target, ``self``'s attribute)."""
        ops = self.operators
        constants = self.constants
        types = self.type_annotations
        code: List[Tuple[int, int, int]] = self.instructions.tolist()
        self_slots = self._self_slots()
        shorts: Dict[int, str] = {}

        def constant(x: int) -> str:
            """The constant's short(), made once however many instructions load it."""
            text = shorts.get(x)
            if text is None:
                text = shorts[x] = (short(constants[x]) if 0 <= x < len(constants)
                                    else "constant index out of range")
            return text

        out = []
        for pc, (op, n, x) in enumerate(code):
            name = OPCODES[op] if 0 <= op < len(OPCODES) else f"OP#{op}"
            operands, comment = _operands(pc, name, x, n, ops, constant, types)
            if name == "GET_ATTR" and pc and 0 <= x < len(self_slots):
                prev, _, reg = code[pc - 1]
                if 0 <= prev < len(OPCODES) and OPCODES[prev] in ("LOAD", "MOVE") and reg == 1:
                    comment = f"self.{self_slots[x]}"     # the object is register 1: self
            out.append(Instruction(pc, op, name, x, n, operands, comment))
        return out

    def _self_slots(self) -> Tuple[str, ...]:
        """Attribute names of ``self``'s class, when the schema's first argument is self."""
        schema = self.schema
        if schema is None or not schema.arguments or schema.arguments[0].name != "self":
            return ()
        wanted = schema.arguments[0].type
        for t in self._image.object_types():
            if t.name == wanted:
                return t.attr_names
        return ()

    def disassemble(self) -> str:
        """A compact listing: schema, registers, then one line per instruction (pc,
        opcode, x, n), noting the operator, constant, types or jump target it names,
        or its register (``disassembly()`` gives every field)."""
        schema = self.schema
        lines = [f"def {self.name}{schema if schema is not None else '(...)'}",
                 f"  registers: {self.register_size}"]
        for ins in self.disassembly():
            note = (ins.operands if ins.opcode in _REGISTER
                    else "" if ins.opcode in _SLOT else ins.comment)
            text = f"  {ins.pc:4d}  {ins.opcode:<22s} {ins.x:5d} {ins.n:3d}"
            lines.append(f"{text}   # {note}" if note else text)
        return "\n".join(lines)

    def __repr__(self) -> str:
        return f"<Function {self.name}>"

    def __reduce__(self) -> NoReturn:
        raise not_picklable("Function", "its instructions, constants, ...")



class Methods(NamedDict[Function]):
    """Functions by qualified name (a ``dict``).

    A name that is not a key stands for the one function whose qualified name ends
    with it after a dot: ``methods["forward"]`` is ``methods["__torch__.Net.forward"]``
    when no other method is called ``forward``. A name that matches none or several
    raises KeyError naming the functions there are; ``find`` gives every match.
    """

    what = "Methods"
    unit = "function"

    def __init__(self, functions: Iterable[Function] = ()) -> None:
        super().__init__((f.name, f) for f in functions)

    def find(self, name: str) -> List[Function]:
        """Every function ``name`` stands for: the one so named, else each one whose
        qualified name ends with ``"." + name`` (empty when none does)."""
        return [dict.__getitem__(self, n) for n in matching_names(self, name)]

    def __missing__(self, name: str) -> Function:
        found = matching_names(self, name)
        if len(found) == 1:
            return dict.__getitem__(self, found[0])
        if found:
            raise KeyError(f"{name!r} is ambiguous: it may be {listing(found, len(found))}")
        return super().__missing__(name)

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and (dict.__contains__(self, name)
                                          or len(matching_names(self, name)) == 1)

    @overload
    def get(self, name: str, default: None = None) -> Optional[Function]: ...
    @overload
    def get(self, name: str, default: Union[Function, T]) -> Union[Function, T]: ...

    def get(self, name: str, default: Any = None) -> Any:
        """``self[name]`` (short names included), or ``default`` when it raises KeyError."""
        try:
            return self[name]
        except KeyError:
            return default


class Instruction(NamedTuple):
    """One decoded bytecode instruction (``Function.disassembly``)."""

    pc: int
    op: int
    opcode: str
    x: int
    n: int
    operands: str
    comment: str


def _operands(pc: int, name: str, x: int, n: int, ops: List[Operator],
              constant: Callable[[int], str], types: List[str]) -> Tuple[str, str]:
    """(operand text, comment) of one instruction; ``constant(x)`` describes constant x."""
    if name in ("OP", "OPN"):
        text = f"#{x}" + (f", {n} inputs" if name == "OPN" else "")
        if 0 <= x < len(ops):
            o = ops[x]
            return text, o.full_name + (f" ({o.num_args} args)" if o.num_args is not None else "")
        return text, "operator index out of range"
    if name in _REGISTER:
        return f"r{x}", ""
    if name == "STOREN":
        return (f"r{x}" if n == 1 else f"r{x}..r{x + n - 1}"), ""
    if name == "LOADC":
        return f"c{x}", constant(x)
    if name in ("JF", "JMP"):
        return f"{x:+d}", f"-> {pc + x}"
    if name == "LOOP":
        return f"{x:+d}, {n}", f"exit -> {pc + x}"
    if name in _TYPE_OPERAND:
        text = f"t{x}" + (f", {n}" if name != "CREATE_OBJECT" else "")
        return text, types[x] if 0 <= x < len(types) else "type index out of range"
    if name in _TYPES_OPERAND:
        return f"t{x}, {n}", ", ".join(types[x:x + n])
    if name in _SLOT:
        return f"slot {x}", ""
    if name in ("TUPLE_CONSTRUCT", "LIST_UNPACK", "FORMAT", "WARN"):
        return f"{x}", ""
    if name == "TUPLE_SLICE":
        return f"{x}, {n}", f"[{x}:{x + n}]"
    if name == "INTERFACE_CALL":
        return f"c{x}, {n}", constant(x)
    if x or n:
        return f"{x}, {n}", ""
    return "", ""


class _Full(Exception):
    """The description reached its limit."""


def short(value: Any, limit: int = 60) -> str:
    """A one-line description of a decoded value, at most ``limit`` characters: a
    tensor as ``tensor(float32, [2, 3])``, an object or function by its type or name
    (also inside a list or tuple holding one directly), anything else by its repr.
    Only the first ``limit`` characters are ever built, so values that share one list
    many times over cost no more than short ones."""
    parts: List[str] = []
    size = 0

    def emit(text: str) -> None:
        nonlocal size
        parts.append(text)
        size += len(text)
        if size > limit:
            raise _Full

    def describe(v: Any) -> None:
        if isinstance(v, np.ndarray):
            emit(f"tensor({v.dtype}, {list(v.shape)})")
        elif isinstance(v, QuantizedTensor):
            emit(f"qtensor({v.dtype_name}, {list(v.shape)}, {v.qscheme})")
        elif isinstance(v, Object):
            emit(f"<{v.type_name} object>")
        elif isinstance(v, Function):
            emit(f"<function {v.name}>")
        elif isinstance(v, (list, tuple)) and any(
                isinstance(x, (np.ndarray, QuantizedTensor, Object, Function)) for x in v):
            sequence(v, describe)
        else:
            plain(v)

    def sequence(v: Any, item: Any) -> None:
        emit("[" if isinstance(v, list) else "(")
        for k, x in enumerate(v):
            if k:
                emit(", ")
            item(x)
        emit("]" if isinstance(v, list) else ",)" if len(v) == 1 else ")")

    def plain(v: Any) -> None:
        """``repr(v)``, built piece by piece."""
        if type(v) in (list, tuple):
            sequence(v, plain)
        elif type(v) is dict:
            emit("{")
            for k, (key, x) in enumerate(v.items()):
                if k:
                    emit(", ")
                plain(key)
                emit(": ")
                plain(x)
            emit("}")
        else:
            emit(repr(v))

    try:
        describe(value)
    except _Full:
        pass
    text = "".join(parts)
    return text if len(text) <= limit else text[:limit - 3] + "..."
