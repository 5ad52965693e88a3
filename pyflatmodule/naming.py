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
"""
from __future__ import annotations

import itertools
import json
import mmap
import os
from typing import Dict, List, Mapping, NamedTuple, Optional, Set, Tuple, Union

import numpy as np

from .core.dtypes import DTYPE_NAMES, QuantizedTensor, numpy_dtype
from .executorch import ETRecord
from .export import SAFETENSORS_DTYPES
from .files import load

__all__ = ["Naming", "name_by_content", "renamed", "reference_tensors"]

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


def name_by_content(tensors: Mapping[str, Tensor],
                    reference: Mapping[str, np.ndarray]) -> Dict[str, Naming]:
    """Each tensor's :class:`Naming`: the one reference tensor of its dtype whose values
    are its values exactly, in its axis order or another (each reference tensor names at
    most one tensor, the first that matches). Content names nothing where it cannot tell:
    a tensor of fewer than two distinct values (a scalar, a bias of zeros) or one whose
    values several reference tensors hold."""
    by_kind: Dict[Tuple[str, Tuple[int, ...]], List[str]] = {}
    for name, ref in reference.items():
        by_kind.setdefault((ref.dtype.str, tuple(sorted(ref.shape))), []).append(name)
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
        matches = []
        for candidate in by_kind.get((t.dtype.str, tuple(sorted(t.shape))), []):
            ref = reference[candidate]
            hit = next((p for p in _orders(tuple(t.shape), tuple(ref.shape))
                        if np.array_equal(t.transpose(p), ref)), None)
            if hit is not None:
                matches.append((candidate, hit))
        if len(matches) > 1:
            out[name] = Naming(None, (), "several reference tensors hold these values: "
                                         + ", ".join(c for c, _ in matches[:4]))
            continue
        found = matches[0] if matches and matches[0][0] not in taken else None
        if found is None:
            out[name] = Naming(None, (), "no reference tensor holds these values: computed "
                                         "by the writer (a batch norm folded in, a "
                                         "constant folded) or not the module's")
            continue
        taken.add(found[0])
        same = found[1] == tuple(range(t.ndim))
        out[name] = Naming(found[0], found[1], "" if same else
                           f"stored in another axis order: the module's tensor is this one "
                           f".transpose({list(found[1])})")
    return out


def renamed(tensors: Mapping[str, Tensor], reference: Mapping[str, np.ndarray]
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


def reference_tensors(path: str) -> Dict[str, np.ndarray]:
    """The module's tensors by name from ``path``: an ETRecord (its exported program's
    state dict, read without torch), a ``.safetensors`` or an ``.npz`` file."""
    with open(path, "rb") as f:
        head = f.read(4)
    if head == b"PK\x03\x04" and not path.lower().endswith(".npz"):
        with load(path) as record:
            if not isinstance(record, ETRecord):
                raise ValueError(f"{path}: a zip archive that is not an ETRecord")
            out: Dict[str, np.ndarray] = {}
            for state in record.state_dicts().values():
                for name, array in state.items():
                    out.setdefault(name, np.array(array))   # a copy: the record closes
            return out
    if path.lower().endswith(".npz"):
        with np.load(path, allow_pickle=False) as z:
            return {k: z[k] for k in z.files if not k.startswith("__")}
    return _safetensors(path)
