"""Module names for tensors the file does not name, found by content in a reference.

A program's constants often carry no names (``forward.values[3]``) and a delegate's weights
are named by their place in its graph (``forward.delegates[0].values[7]``), or by a hash of
their bytes (but a native backend's, whose payload gives the module's names). The module's
own names are in its ``state_dict()``: an ETRecord holds it (a torch.save archive, read
here without torch), or a ``.safetensors`` / ``.npz`` file written from it.
:func:`name_by_content` gives each tensor the name of the reference tensor whose values are
its values exactly (same dtype, the same bytes in some order of its axes, as a backend may
store a conv weight channels last), and says why where none is: a constant the writer
computed (a batch norm folded into a conv), re-laid or quantized is not the module's
tensor, and gets no name rather than a wrong one. With an ETRecord,
:func:`names_by_debug_handle` first names a program's constants by where the program uses
them, which tells apart constants of the same values (zeros, ones).

:func:`named_state_dict` is the Python side of ``export --names``: a file's tensors under
the module's names. It lives here, above the formats' readers, rather than as an argument
of ``Program.state_dict()``: a program is read from its own bytes alone, and a reference
is a second source (of names, never of structure) that only a client joins to it.
"""
from __future__ import annotations

import itertools
import json
import mmap
import os
import re
from types import MappingProxyType
from typing import Dict, List, Mapping, NamedTuple, Optional, Set, Tuple, Union

from .core.dtypes import DTYPE_NAMES, QuantizedTensor, numpy_dtype
from .core.lazy import np
from .executorch import (
    BundledProgram,
    DataFile,
    ETRecord,
    KernelCall,
    Method,
    Program,
    StoredTensor,
)
from .export import SAFETENSORS_DTYPES
from .files import load
from .ptmf import Module

__all__ = ["Calls", "ModuleTensors", "Naming", "Reference", "file_tensors", "module_names",
           "name_by_content", "named_state_dict", "names_by_debug_handle",
           "reference_tensors", "renamed"]

Tensor = Union["np.ndarray", QuantizedTensor]

#: Axes up to which every order is tried (4! = 24 orders; a conv weight has 4).
MAX_PERMUTED_AXES = 5


class Naming(NamedTuple):
    """A tensor's name in the reference, or why it has none.

    ``name`` is the reference tensor that holds the same values (None when none does);
    ``permutation`` gives it from the tensor (``reference == tensor.transpose(permutation)``);
    ``note`` says why there is no name (or, with one, that the axes are in another order)."""

    name: Optional[str]
    permutation: Tuple[int, ...]
    note: str


def _orders(shape: Tuple[int, ...], want: Tuple[int, ...]) -> List[Tuple[int, ...]]:
    """The axis orders that give ``shape`` the shape ``want``, the identity first."""
    if len(shape) != len(want) or sorted(shape) != sorted(want):
        return []
    if len(shape) > MAX_PERMUTED_AXES:
        return [tuple(range(len(shape)))] if shape == want else []
    return [p for p in itertools.permutations(range(len(shape)))
            if tuple(shape[i] for i in p) == want]


#: What an ETRecord says a method's instructions call, by instruction id (every id its
#: debug handle map has): each graph node the instruction's debug handles name, as the
#: operator (``aten::addmm``) and its arguments in order: the module's name of a
#: parameter or buffer, ``""`` for another value, None for what is not a value (a
#: number, a list).
Calls = Dict[int, List[Tuple[str, Tuple[Optional[str], ...]]]]


class ModuleTensors(NamedTuple):
    """The module's tensors a reference holds: ``tensors`` by name, and, from an
    ETRecord, ``methods``: each method's own (its edge-dialect program's state dict),
    whose names a tensor of that method takes first (two methods exported from two
    modules may hold the same values under other names), and ``calls``: each method's
    :data:`Calls`, which name a program's constants by where they are used
    (:func:`names_by_debug_handle`)."""

    tensors: Dict[str, np.ndarray]
    methods: Dict[str, Dict[str, np.ndarray]]
    calls: Dict[str, Calls]


#: Where the module's names come from: a path (an ETRecord, a ``.safetensors`` or an
#: ``.npz`` file), an opened ETRecord, the module's tensors by name (a ``state_dict()``
#: as numpy arrays), or those :func:`reference_tensors` read.
Reference = Union[str, "os.PathLike[str]", ETRecord, ModuleTensors, Mapping[str, "np.ndarray"]]

#: A name the program gives a tensor of one method: ``<method>.values[3]``,
#: ``<method>.delegates[0].values[7]``.
_OF_METHOD = re.compile(r"([^.\[\]]+)\.(?:values|delegates)\[")

_Kinds = Dict[Tuple[str, Tuple[int, ...]], List[str]]


def _kinds(reference: Mapping[str, np.ndarray]) -> _Kinds:
    """The reference's names by dtype and sorted shape: what a tensor may match."""
    out: _Kinds = {}
    for name, ref in reference.items():
        out.setdefault((ref.dtype.str, tuple(sorted(ref.shape))), []).append(name)
    return out


def _matches(t: np.ndarray, reference: Mapping[str, np.ndarray], kinds: _Kinds
             ) -> List[Tuple[str, Tuple[int, ...]]]:
    """Each reference tensor that holds ``t``'s values, with the axis order that gives it."""
    out = []
    for candidate in kinds.get((t.dtype.str, tuple(sorted(t.shape))), []):
        ref = reference[candidate]
        hit = next((p for p in _orders(tuple(t.shape), tuple(ref.shape))
                    if np.array_equal(t.transpose(p), ref)), None)
        if hit is not None:
            out.append((candidate, hit))
    return out


def _known(name: str, t: Tensor, module_name: str, ref: ModuleTensors) -> bool:
    """Whether the reference tensor ``module_name`` (the tensor's method's own, else
    any) holds ``t``'s values, in its axis order."""
    method = _OF_METHOD.match(name)
    own = ref.methods.get(method.group(1), {}) if method else {}
    r = own.get(module_name, ref.tensors.get(module_name))
    return isinstance(t, np.ndarray) and r is not None and r.dtype == t.dtype and \
        r.shape == t.shape and bool(np.array_equal(r, t))


def name_by_content(tensors: Mapping[str, Tensor],
                    reference: Union[ModuleTensors, Mapping[str, np.ndarray]],
                    known: Mapping[str, str] = MappingProxyType({})) -> Dict[str, Naming]:
    """Each tensor's :class:`Naming`: the one reference tensor of its dtype whose values
    are its values exactly, in its axis order or another (each reference tensor names at
    most one tensor, the first that matches); a tensor of one method of a program is
    looked for among that method's own tensors first (:class:`ModuleTensors`). Content
    names nothing where it cannot tell: a tensor of fewer than two distinct values (a
    scalar, a bias of zeros) or one whose values several reference tensors hold.
    ``known``: names found otherwise (:func:`names_by_debug_handle`), by tensor; each
    is taken first, where the reference tensor of that name holds the tensor's values."""
    ref = reference if isinstance(reference, ModuleTensors) else \
        ModuleTensors(dict(reference), {}, {})
    kinds = _kinds(ref.tensors)
    method_kinds = {m: _kinds(r) for m, r in ref.methods.items()}
    taken: Set[str] = set()
    out: Dict[str, Naming] = {}
    for name, t in tensors.items():
        module_name = known.get(name)
        if module_name is not None and module_name not in taken and \
                _known(name, t, module_name, ref):
            taken.add(module_name)
            out[name] = Naming(module_name, tuple(range(len(t.shape))), "")
    for name, t in tensors.items():
        if name in out:
            continue
        if isinstance(t, QuantizedTensor):
            out[name] = Naming(None, (), "quantized by the writer: the module's tensor is "
                                         "the float one these values approximate")
            continue
        if t.size < 2 or not np.any(t.reshape(-1) != t.reshape(-1)[0]):
            out[name] = Naming(None, (), "fewer than two distinct values: content cannot "
                                         "tell whose they are")
            continue
        method = _OF_METHOD.match(name)
        scope = method.group(1) if method else ""
        matches = _matches(t, ref.methods[scope], method_kinds[scope]) \
            if scope in ref.methods else []
        if len(matches) != 1:   # none of the method's own, or no one of them
            matches = _matches(t, ref.tensors, kinds)
        if len(matches) > 1:
            out[name] = Naming(None, (), "several reference tensors hold these values: "
                                         + ", ".join(c for c, _ in matches[:4]))
            continue
        if not matches:
            out[name] = Naming(None, (), "no reference tensor holds these values: computed "
                                         "by the writer (a batch norm folded in, a "
                                         "constant folded) or not the module's")
            continue
        found = matches[0]
        if found[0] in taken:
            out[name] = Naming(None, (), f"the values of {found[0]}, which names another "
                                         f"tensor of the file")
            continue
        taken.add(found[0])
        same = found[1] == tuple(range(t.ndim))
        out[name] = Naming(found[0], found[1], "" if same else
                           f"stored in another axis order: the module's tensor is this one "
                           f".transpose({list(found[1])})")
    return out


def renamed(tensors: Mapping[str, Tensor],
            reference: Union[ModuleTensors, Mapping[str, np.ndarray]],
            known: Mapping[str, str] = MappingProxyType({})
            ) -> Tuple[Dict[str, Tensor], Dict[str, Dict[str, str]]]:
    """The tensors under the reference's names where :func:`name_by_content` finds them
    (in the reference's axis order: a strided view), the others under their own; and for
    each, by its new name, ``name_in_file`` and, where there is one, ``name_note``."""
    names = name_by_content(tensors, reference, known)
    out: Dict[str, Tensor] = {}
    how: Dict[str, Dict[str, str]] = {}
    for old, t in tensors.items():
        n = names[old]
        new = n.name if n.name is not None and n.name not in out else old
        out[new] = t if new == old or isinstance(t, QuantizedTensor) else \
            t.transpose(n.permutation)
        how[new] = {"name_in_file": old, **({"name_note": n.note} if n.note else {})}
    return out, how


def module_names(tensors: Mapping[str, Tensor],
                 reference: Union[ModuleTensors, Mapping[str, np.ndarray]],
                 known: Mapping[str, str] = MappingProxyType({})) -> Dict[str, str]:
    """The module's name of each tensor :func:`name_by_content` names, by its name in the
    file (tensors it does not name are left out, and so is a name another of the
    tensors already has in the file)."""
    return {k: n.name for k, n in name_by_content(tensors, reference, known).items()
            if n.name is not None and (n.name == k or n.name not in tensors)}


def file_tensors(f: Union[Module, Program, BundledProgram, DataFile]) -> Dict[str, Tensor]:
    """Every tensor of an opened file by the name the file gives it: a PTMF model's
    ``state_dict()``, a program's ``named_tensors()`` (a bundled program's embedded
    one's), a data file's tensors by key."""
    if isinstance(f, Module):
        return f.state_dict()
    if isinstance(f, BundledProgram):
        f = f.program
    return dict(f.named_tensors() if isinstance(f, Program) else f.tensors)


def _fits(m: Method, calls: Calls) -> bool:
    """Whether ``calls`` are a record of this method (of one chain): an id for each
    instruction and no other, and at each kernel call a node of its operator (else the
    ETRecord is another program's, whose arguments would name the wrong constants)."""
    instructions = m.chains[0].instructions
    return set(calls) == set(range(len(instructions))) and all(
        m.operators[ins.op_index].name in {op for op, _ in calls[pc]}
        for pc, ins in enumerate(instructions) if isinstance(ins, KernelCall))


def names_by_debug_handle(f: Union[Module, Program, BundledProgram, DataFile],
                          reference: ModuleTensors) -> Dict[str, str]:
    """The module's names of a program's constants by where the program uses them, as
    an ETRecord records it (``reference.calls``): a kernel call's instruction -> its debug
    handles -> the edge-dialect graph's node of that operator -> the placeholder at the
    constant's argument -> the graph signature's parameter or buffer. It names constants
    whose values do not tell (zeros, ones, values several parameters hold). A method is
    read only where the record fits it (an id for each instruction and no other, each
    kernel call's operator among its nodes'), a call only where its node does: one node
    of the call's operator, its arguments the call's first ones, a parameter or buffer
    where the call has a constant and no other value there; a constant two calls would
    name apart gets no name. Empty for a file that is not a program, or a reference
    without calls."""
    program = f.program if isinstance(f, BundledProgram) else f
    if not isinstance(program, Program):
        return {}
    found: Dict[str, Set[str]] = {}
    for method, m in program.methods.items():
        calls = reference.calls.get(method)
        if not calls or len(m.chains) != 1 or not _fits(m, calls):
            continue
        values = m.values
        for pc, ins in enumerate(m.chains[0].instructions):
            if not isinstance(ins, KernelCall):
                continue
            op = m.operators[ins.op_index].name
            fits = [args for name, args in calls.get(pc, []) if name == op]
            if len(fits) != 1 or len(fits[0]) > len(ins.args):
                continue
            pairs = list(zip(fits[0], ins.args))
            if any(a is not None and values.kind(v) != "Tensor" for a, v in pairs) or any(
                    a == "" and isinstance(values.layout(v), StoredTensor) for a, v in pairs):
                continue   # the node's arguments are not the call's
            for a, v in pairs:
                if a and isinstance(values.layout(v), StoredTensor):
                    found.setdefault(f"{method}.values[{v}]", set()).add(a)
    return {k: next(iter(names)) for k, names in found.items() if len(names) == 1}


def named_state_dict(f: Union[Module, Program, BundledProgram, DataFile],
                     reference: Reference) -> Dict[str, Tensor]:
    """The file's tensors (:func:`file_tensors`) under the module's names where the
    reference holds their values (:func:`renamed`: in the module's axis order, a strided
    view of the file; with an ETRecord, a program's constants by where it uses them
    first, :func:`names_by_debug_handle`), the others under the file's own names.

    Raises:
        ValueError: the reference cannot be read.
    """
    ref = reference_tensors(reference)
    return renamed(file_tensors(f), ref, names_by_debug_handle(f, ref))[0]


def _safetensors(path: str) -> Dict[str, np.ndarray]:
    """A .safetensors file's tensors, as read-only views of the file: of each dtype this
    package writes (``export``'s table read back; ml_dtypes is imported here, when a
    reference is read) but F4, whose shape counts two values a byte."""
    readable = {st: numpy_dtype(DTYPE_NAMES.index(name)) for name, st in
                SAFETENSORS_DTYPES.items() if name in DTYPE_NAMES and st != "F4"}
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        view = memoryview(mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)) if size else b""
    n = int.from_bytes(bytes(view[:8]), "little") if len(view) >= 8 else -1
    if n < 0 or 8 + n > len(view):
        raise ValueError(f"{path}: not a .safetensors file (its header length is past its end)")
    header = json.loads(bytes(view[8:8 + n]))
    out = {}
    for name, spec in header.items():
        if name == "__metadata__" or spec.get("dtype") not in readable:
            continue
        dtype = readable[spec["dtype"]]
        start, end = spec["data_offsets"]
        if not 0 <= start <= end <= len(view) - 8 - n:
            raise ValueError(f"{path}: tensor {name!r} reaches past the end of the file")
        out[name] = np.frombuffer(view, dtype, (end - start) // dtype.itemsize,
                                  8 + n + start).reshape(spec["shape"])
    return out


#: The ETRecord member of each method's edge-dialect program: ``<prefix><method>``.
_EDGE = "edge_dialect_exported_program/"


def _operator(target: str) -> str:
    """A graph node's operator as a program names it: ``aten::addmm`` of
    ``aten.addmm.default``."""
    return target.rsplit(".", 1)[0].replace(".", "::", 1)


def _calls(record: ETRecord, method: str) -> Calls:
    """What each instruction of ``method`` calls, by the record's debug handle map and
    the method's edge-dialect graph (:data:`Calls`)."""
    graph = record.graph(_EDGE + method)
    state = {s.name: s.target for s in graph.signature.inputs
             if s.kind in ("parameter", "buffer") and s.target is not None}
    by_handle = graph.by_debug_handle()
    out: Calls = {}
    for pc, handles in ((record.debug_handle_map or {}).get(method) or {}).items():
        out.setdefault(int(pc), [])
        for h in [handles] if isinstance(handles, int) else handles or []:
            for node in by_handle.get(int(h), []):
                if node.op == "call_function":
                    out.setdefault(int(pc), []).append((_operator(node.target), tuple(
                        None if a is None else state.get(a, "") for a in node.args)))
    return out


def _record_tensors(record: ETRecord) -> ModuleTensors:
    """An ETRecord's state dicts' tensors by name, each method's own, and what each
    method's instructions call (copies: the record may close)."""
    out: Dict[str, np.ndarray] = {}
    methods: Dict[str, Dict[str, np.ndarray]] = {}
    for program, state in record.state_dicts().items():
        arrays = {name: np.array(array) for name, array in state.items()}
        for name, array in arrays.items():
            out.setdefault(name, array)
        if program.startswith(_EDGE):
            methods[program[len(_EDGE):]] = arrays
    calls = {program[len(_EDGE):]: _calls(record, program[len(_EDGE):])
             for program in record.graph_names if program.startswith(_EDGE)}
    return ModuleTensors(out, methods, calls)


def reference_tensors(reference: Reference) -> ModuleTensors:
    """The module's tensors by name from a :data:`Reference`: an ETRecord (its programs'
    state dicts, read without torch; each method's own too), a ``.safetensors`` or an
    ``.npz`` file, or the tensors themselves.

    Raises:
        ValueError: the file is none of those, or not valid.
        OSError: it cannot be read.
    """
    if isinstance(reference, ModuleTensors):
        return reference
    if isinstance(reference, ETRecord):
        return _record_tensors(reference)
    if isinstance(reference, Mapping):
        return ModuleTensors({k: np.asarray(v) for k, v in reference.items()}, {}, {})
    path = os.fspath(reference)
    with open(path, "rb") as f:
        head = f.read(4)
    if head == b"PK\x03\x04" and not path.lower().endswith(".npz"):
        with load(path) as record:
            if not isinstance(record, ETRecord):
                raise ValueError(f"{path}: a zip archive that is not an ETRecord")
            return _record_tensors(record)
    if path.lower().endswith(".npz"):
        with np.load(path, allow_pickle=False) as z:
            return ModuleTensors({k: z[k] for k in z.files if not k.startswith("__")}, {},
                                 {})
    return ModuleTensors(_safetensors(path), {}, {})
