"""Module names for tensors the file does not name, found by content in a reference.

A program's constants often carry no names (``forward.values[3]``) and a delegate's weights
are named by their place in its graph (``forward.delegates[0].values[7]``), or by a hash of
their bytes. The module's own names are in its ``state_dict()``: an ETRecord holds it (a
torch.save archive, read here without torch), or a ``.safetensors`` / ``.npz`` file written
from it. :func:`name_by_content` gives each tensor the name of the reference tensor whose
values are its values exactly (same dtype, the same bytes in some order of its axes, as a
backend may store a conv weight channels last), and says why where none is: a constant the
writer computed (a batch norm folded into a conv), re-laid or quantized is not the module's
tensor, and gets no name rather than a wrong one.

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
from typing import Dict, List, Mapping, NamedTuple, Optional, Set, Tuple, Union

import numpy as np

from .core.dtypes import DTYPE_NAMES, QuantizedTensor, numpy_dtype
from .executorch import BundledProgram, DataFile, ETRecord, Program
from .export import SAFETENSORS_DTYPES
from .files import load
from .ptmf import Module

__all__ = ["ModuleTensors", "Naming", "Reference", "file_tensors", "module_names",
           "name_by_content", "named_state_dict", "reference_tensors", "renamed"]

Tensor = Union[np.ndarray, QuantizedTensor]

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


class ModuleTensors(NamedTuple):
    """The module's tensors a reference holds: ``tensors`` by name, and, from an
    ETRecord, ``methods``: each method's own (its edge-dialect program's state dict),
    whose names a tensor of that method takes first (two methods exported from two
    modules may hold the same values under other names)."""

    tensors: Dict[str, np.ndarray]
    methods: Dict[str, Dict[str, np.ndarray]]


#: Where the module's names come from: a path (an ETRecord, a ``.safetensors`` or an
#: ``.npz`` file), an opened ETRecord, the module's tensors by name (a ``state_dict()``
#: as numpy arrays), or those :func:`reference_tensors` read.
Reference = Union[str, "os.PathLike[str]", ETRecord, ModuleTensors, Mapping[str, np.ndarray]]

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


def name_by_content(tensors: Mapping[str, Tensor],
                    reference: Union[ModuleTensors, Mapping[str, np.ndarray]]
                    ) -> Dict[str, Naming]:
    """Each tensor's :class:`Naming`: the one reference tensor of its dtype whose values
    are its values exactly, in its axis order or another (each reference tensor names at
    most one tensor, the first that matches); a tensor of one method of a program is
    looked for among that method's own tensors first (:class:`ModuleTensors`). Content
    names nothing where it cannot tell: a tensor of fewer than two distinct values (a
    scalar, a bias of zeros) or one whose values several reference tensors hold."""
    ref = reference if isinstance(reference, ModuleTensors) else \
        ModuleTensors(dict(reference), {})
    kinds = _kinds(ref.tensors)
    method_kinds = {m: _kinds(r) for m, r in ref.methods.items()}
    taken: Set[str] = set()
    out: Dict[str, Naming] = {}
    for name, t in tensors.items():
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
            reference: Union[ModuleTensors, Mapping[str, np.ndarray]]
            ) -> Tuple[Dict[str, Tensor], Dict[str, Dict[str, str]]]:
    """The tensors under the reference's names where :func:`name_by_content` finds them
    (in the reference's axis order: a strided view), the others under their own; and for
    each, by its new name, ``name_in_file`` and, where there is one, ``name_note``."""
    names = name_by_content(tensors, reference)
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
                 reference: Union[ModuleTensors, Mapping[str, np.ndarray]]) -> Dict[str, str]:
    """The module's name of each tensor :func:`name_by_content` names, by its name in the
    file (tensors it does not name are left out, and so is a name another of the
    tensors already has in the file)."""
    return {k: n.name for k, n in name_by_content(tensors, reference).items()
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


def named_state_dict(f: Union[Module, Program, BundledProgram, DataFile],
                     reference: Reference) -> Dict[str, Tensor]:
    """The file's tensors (:func:`file_tensors`) under the module's names where the
    reference holds their values (:func:`renamed`: in the module's axis order, a strided
    view of the file), the others under the file's own names.

    Raises:
        ValueError: the reference cannot be read.
    """
    return renamed(file_tensors(f), reference_tensors(reference))[0]


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


def _record_tensors(record: ETRecord) -> ModuleTensors:
    """An ETRecord's state dicts' tensors by name, and each method's own (copies: the
    record may close)."""
    out: Dict[str, np.ndarray] = {}
    methods: Dict[str, Dict[str, np.ndarray]] = {}
    for program, state in record.state_dicts().items():
        arrays = {name: np.array(array) for name, array in state.items()}
        for name, array in arrays.items():
            out.setdefault(name, array)
        if program.startswith(_EDGE):
            methods[program[len(_EDGE):]] = arrays
    return ModuleTensors(out, methods)


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
        return ModuleTensors({k: np.asarray(v) for k, v in reference.items()}, {})
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
            return ModuleTensors({k: z[k] for k in z.files if not k.startswith("__")}, {})
    return ModuleTensors(_safetensors(path), {})
