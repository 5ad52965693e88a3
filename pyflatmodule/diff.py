"""What changed between two files of one format: structure, and tensors element by element.

:func:`diff` compares two PTMF models, two ExecuTorch programs or two ExecuTorch data
files. Structure is compared as facts (versions, methods, their inputs' and outputs' dtypes
and shapes, operators and instruction counts, delegates, extra files and named data with a
SHA-256 of their bytes; named data whose key is that hash, as XNNPACK's weights, counted
instead: their tensors are compared). Tensors are matched by name, then in programs by
role (where the program reads them: the n-th call of an operator and the argument, or a
delegate's n-th node of a kind and its input), in other files by position and shape (the
first tensor of A with the first of B of the same shape and dtype), and compared chunk by
chunk straight from the mappings, so no model is ever loaded whole into memory.

Names: a PTMF model's tensors are its ``state_dict()``, a program's its ``named_tensors()``
(the names the files hold, else ``<method>.values[<index>]``), a data file's its
tensors by key. Given a reference of the module's tensors (``names_a``, ``names_b``:
an ETRecord, a ``.safetensors`` or ``.npz`` of its ``state_dict()``), a side's tensors
whose values the reference holds take the module's names
(:func:`pyflatmodule.naming.module_names`), and pair by them; they are compared as the
files store them.
"""
from __future__ import annotations

import hashlib
import re
from typing import Any, Dict, Iterator, List, NamedTuple, Optional, Tuple, Union

from .core.dtypes import QuantizedTensor, dtype_name
from .core.lazy import np
from .executorch import BundledProgram, DataFile, ETDump, ETRecord, KernelCall, Program
from .export import blocks, quantization_arrays, quantization_params
from .files import FORMATS, Format, load
from .naming import (
    Reference,
    file_tensors,
    module_names,
    names_by_debug_handle,
    reference_tensors,
)
from .ptmf import Module

__all__ = ["Change", "Diff", "TensorDiff", "diff", "compare_arrays"]

#: Elements compared at a time (per side), bounding the memory a comparison takes.
CHUNK = 1 << 20

Opened = Union[Module, Program, DataFile]
Tensor = Union["np.ndarray", QuantizedTensor]


class Change(NamedTuple):
    """A structural fact that differs: its name, its value in A and in B (None: absent)."""

    what: str
    a: Any
    b: Any


class TensorDiff(NamedTuple):
    """One tensor of A, B or both.

    ``status`` is ``"equal"``, ``"changed"``, ``"only_a"`` or ``"only_b"``. For a changed
    tensor of one shape and dtype, ``differing`` counts the elements that differ (NaN
    equals NaN), ``max_abs`` is the largest ``|a - b|`` and ``max_rel`` the largest
    ``|a - b| / max(|a|, |b|)``; ``note`` says what else changed (shape, dtype,
    quantization parameters)."""

    name_a: Optional[str]
    name_b: Optional[str]
    status: str
    dtype: str
    shape: Tuple[int, ...]
    differing: int = 0
    max_abs: float = 0.0
    max_rel: float = 0.0
    note: str = ""


class Diff(NamedTuple):
    """The differences between two files of one format."""

    format: str
    structure: List[Change]
    tensors: List[TensorDiff]

    @property
    def equal(self) -> bool:
        """True when nothing differs."""
        return not self.structure and all(t.status == "equal" for t in self.tensors)

    def changed_tensors(self) -> List[TensorDiff]:
        """The tensors that are not equal (changed, or on one side only)."""
        return [t for t in self.tensors if t.status != "equal"]


# ------------------------------------------------------------------ structure

def _digest(data: Any) -> str:
    return hashlib.sha256(data).hexdigest()


def _facts(f: Opened) -> Dict[str, Any]:
    """What is compared of a file's structure, by name."""
    out: Dict[str, Any] = {}
    if isinstance(f, Module):
        out["bytecode_version"] = f.bytecode_version
        out["operator_version"] = f.operator_version
        out["methods"] = sorted(f.methods)
        for name, fn in f.methods.items():
            out[f"methods.{name}.instructions"] = len(fn.instructions)
            out[f"methods.{name}.operators"] = [str(op) for op in fn.operators]
        for name, content in f.extra_files.items():
            out[f"extra_files[{name!r}]"] = _digest(content)
        out["object_types"] = sorted(t.name for t in f.object_types)
        return out
    out["version"] = f.version
    if isinstance(f, Program):
        out["methods"] = list(f.methods)
        for name, m in f.methods.items():
            out[f"methods.{name}.values"] = len(m.values)
            out[f"methods.{name}.inputs"] = m.inputs
            out[f"methods.{name}.outputs"] = m.outputs
            for part, metas in (("inputs", m.input_meta), ("outputs", m.output_meta)):
                out[f"methods.{name}.{part}.dtypes_shapes"] = [
                    meta.kind if meta.dtype is None else f"{meta.dtype}{list(meta.shape or ())}"
                    for meta in metas]
            out[f"methods.{name}.instructions"] = sum(len(c.instructions) for c in m.chains)
            out[f"methods.{name}.operators"] = [str(op) for op in m.operators]
            out[f"methods.{name}.non_const_buffer_sizes"] = m.non_const_buffer_sizes
            for i, d in enumerate(m.delegates):
                out[f"methods.{name}.delegates[{i}]"] = (d.id, _digest(d.data))
    by_content = [0, 0]
    for key, blob in f.named_data.items():
        digest = _digest(blob)
        if key.endswith(digest):   # keyed by its own hash: the key says what the digest would
            by_content[0] += 1
            by_content[1] += len(blob)
        else:
            out[f"named_data[{key!r}]"] = digest
    if by_content[0]:
        out["named_data (keyed by content): entries, bytes"] = by_content
    return out


def _structure(a: Opened, b: Opened) -> List[Change]:
    fa, fb = _facts(a), _facts(b)
    keys = list(fa) + [k for k in fb if k not in fa]
    return [Change(k, fa.get(k), fb.get(k)) for k in keys if fa.get(k) != fb.get(k)]


# ------------------------------------------------------------------ tensors

#: The names a program gives tensors by position (a constant without a name, a delegate's
#: constant by its value id): equal in two programs, they need not be the same tensor.
_POSITIONAL = re.compile(r"\.values\[\d+\]$")


def _where(t: Tensor) -> Tuple[int, Tuple[int, ...]]:
    """Where a tensor's bytes are (the same view read twice has the same)."""
    x = t.int_repr if isinstance(t, QuantizedTensor) else t
    return x.__array_interface__["data"][0], tuple(x.shape)


def _roles(p: Program, names: Dict[str, Tensor]) -> Dict[str, str]:
    """Tensor name -> where the program reads it first: ``METHOD: OP[N] arg I`` (the N-th
    call of operator OP in the method, argument I) for a constant of a kernel call,
    ``METHOD.delegates[D]: KIND[N] input I`` for a delegate's constant (its graph's N-th
    node of KIND, input I)."""
    by_place = {_where(t): name for name, t in names.items()}
    out: Dict[str, str] = {}
    for m in p.methods.values():
        calls: Dict[str, int] = {}
        values = m.values
        for chain in m.chains:
            for ins in chain.instructions:
                if not isinstance(ins, KernelCall):
                    continue
                op = str(m.operators[ins.op_index])
                n = calls[op] = calls.get(op, -1) + 1
                for i, v in enumerate(ins.args):
                    if values.kind(v) != "Tensor":
                        continue
                    t = values[v]
                    name = by_place.get(_where(t)) if isinstance(t, np.ndarray) else None
                    if name is not None:
                        out.setdefault(name, f"{m.name}: {op}[{n}] arg {i}")
        for d in m.delegates:
            graph = d.graph
            if graph is None:
                continue
            kinds: Dict[str, int] = {}
            for node in graph.nodes:
                n = kinds[node.kind] = kinds.get(node.kind, -1) + 1
                for i, vid in enumerate(node.inputs):
                    out.setdefault(d.constant_name(vid),
                                   f"{d.name}: {node.kind}[{n}] input {i}")
    return out


def _layout(t: Tensor) -> Tuple[str, Tuple[int, ...]]:
    return dtype_name(t), tuple(t.shape)


def _chunks(a: np.ndarray, b: np.ndarray) -> Iterator[Tuple[np.ndarray, np.ndarray]]:
    """Matching pieces of two arrays of one shape, at most about CHUNK elements each."""
    for index in blocks(a.shape, CHUNK):
        yield a[index], b[index]


def _widen(x: np.ndarray) -> np.ndarray:
    """Values as float64, or complex128 for complex ones (complex32 is a (real, imag)
    record of float16s)."""
    with np.errstate(invalid="ignore"):   # NaN and infinity widen as they are
        if x.dtype.names == ("real", "imag"):
            return x["real"].astype(np.float64) + 1j * x["imag"].astype(np.float64)
        return x.astype(np.complex128 if x.dtype.kind == "c" else np.float64)


def compare_arrays(a: np.ndarray, b: np.ndarray) -> Tuple[int, float, float]:
    """(differing elements, max |a - b|, max |a - b| / max(|a|, |b|)) of two arrays of
    one shape and dtype, computed chunk by chunk (NaN equals NaN)."""
    differing, max_abs, max_rel = 0, 0.0, 0.0
    for ca, cb in _chunks(a, b):
        if ca.dtype.kind == "b":
            bad = np.asarray(ca) != np.asarray(cb)
            differing += int(np.count_nonzero(bad))
            if bad.any():
                max_abs = max_rel = 1.0
            continue
        x, y = _widen(np.asarray(ca)), _widen(np.asarray(cb))
        with np.errstate(invalid="ignore", over="ignore"):
            bad = (x != y) & ~(np.isnan(x) & np.isnan(y))
            n = int(np.count_nonzero(bad))
            if not n:
                continue
            differing += n
            x, y = x[bad], y[bad]
            # NaN against a number, or infinities of two signs: infinitely apart
            d = np.nan_to_num(np.abs(x - y), nan=np.inf, posinf=np.inf)
            scale = np.maximum(np.abs(x), np.abs(y))
            rel = np.divide(d, scale, out=np.full_like(d, np.inf), where=scale > 0)
            rel = np.nan_to_num(rel, nan=np.inf, posinf=np.inf)
            max_abs = max(max_abs, float(d.max()))
            max_rel = max(max_rel, float(rel.max()))
    return differing, max_abs, max_rel


def _compare(name_a: str, ta: Tensor, name_b: str, tb: Tensor) -> TensorDiff:
    (dtype_a, shape_a), (dtype_b, shape_b) = _layout(ta), _layout(tb)
    if (dtype_a, shape_a) != (dtype_b, shape_b):
        return TensorDiff(name_a, name_b, "changed", dtype_a, shape_a,
                          note=f"{dtype_a}{list(shape_a)} -> {dtype_b}{list(shape_b)}")
    note = ""
    if isinstance(ta, QuantizedTensor) and isinstance(tb, QuantizedTensor):
        arrays_a, arrays_b = quantization_arrays(ta), quantization_arrays(tb)
        if quantization_params(ta) != quantization_params(tb) or any(
                a.dtype != b.dtype or a.shape != b.shape or a.tobytes() != b.tobytes()
                for a, b in zip(arrays_a.values(), arrays_b.values())):
            note = "quantization parameters differ"
        xa, xb = ta.int_repr, tb.int_repr
    elif isinstance(ta, np.ndarray) and isinstance(tb, np.ndarray):
        xa, xb = ta, tb
    else:
        return TensorDiff(name_a, name_b, "changed", dtype_a, shape_a,
                          note="quantized on one side only")
    if xa.shape != xb.shape or xa.dtype != xb.dtype:   # packed storage of other sizes
        return TensorDiff(name_a, name_b, "changed", dtype_a, shape_a, note="storage differs")
    differing, max_abs, max_rel = compare_arrays(xa, xb)
    status = "changed" if differing or note else "equal"
    return TensorDiff(name_a, name_b, status, dtype_a, shape_a, differing, max_abs, max_rel,
                      note)


def _match(ta: Dict[str, Tensor], tb: Dict[str, Tensor],
           roles: Optional[Tuple[Dict[str, str], Dict[str, str]]] = None) -> List[TensorDiff]:
    """Pairs by name, then by role (``roles``: each side's, for programs, whose positional
    names, ``METHOD.values[I]``, pair by role first, then by name where neither has a
    role), then by position and shape; the rest are on one side only."""
    out: List[TensorDiff] = []
    named = [n for n in ta if n in tb and (roles is None or not _POSITIONAL.search(n))]
    for name in named:
        out.append(_compare(name, ta[name], name, tb[name]))
    only_a = [n for n in ta if n not in named]
    only_b = [n for n in tb if n not in named]
    if roles is not None:
        role_a, role_b = roles
        by_role = {role_b[n]: n for n in reversed(only_b) if n in role_b}
        for name in list(only_a):
            partner = by_role.pop(role_a.get(name, ""), None)
            if partner is not None:
                only_a.remove(name)
                only_b.remove(partner)
                out.append(_compare(name, ta[name], partner, tb[partner]))
        for name in [n for n in only_a if n in only_b]:   # read by no role in either
            only_a.remove(name)
            only_b.remove(name)
            out.append(_compare(name, ta[name], name, tb[name]))
    for name in list(only_a):   # by position and shape
        layout = _layout(ta[name])
        partner = next((n for n in only_b if _layout(tb[n]) == layout), None)
        if partner is not None:
            only_a.remove(name)
            only_b.remove(partner)
            out.append(_compare(name, ta[name], partner, tb[partner]))
    out += [TensorDiff(n, None, "only_a", *_layout(ta[n])) for n in only_a]
    out += [TensorDiff(None, n, "only_b", *_layout(tb[n])) for n in only_b]
    return out


# ------------------------------------------------------------------ entry point

def _format(f: Opened) -> Format:
    return next(fmt for fmt in FORMATS if isinstance(f, fmt.cls))


#: What diff takes already opened.
_OPENED = (Module, Program, DataFile, BundledProgram, ETDump, ETRecord)


def _compared(f: Union[Module, Program, DataFile, BundledProgram, ETDump, ETRecord]
              ) -> Union[Module, Program, DataFile]:
    """What diff compares of a file: a bundled program's embedded program, else the file;
    an ETDump (a record of runs, not a model) and an ETRecord (a record of a program's
    making) are refused."""
    if isinstance(f, (ETDump, ETRecord)):
        f.close()
        raise ValueError(f"diff compares models; an {type(f).__name__} is a record of "
                         f"{'runs' if isinstance(f, ETDump) else 'a program being made'}, "
                         f"not a model")
    return f.program if isinstance(f, BundledProgram) else f


def _renamed(f: Opened, tensors: Dict[str, Tensor], roles: Optional[Dict[str, str]],
             reference: Optional[Reference]) -> Tuple[Dict[str, Tensor], Dict[str, str]]:
    """The tensors of ``f`` under the module's names where ``reference`` names them (a
    program's constants by where it uses them, then by their values; as the file stores
    them), and their roles under the same names."""
    if reference is None:
        return tensors, roles or {}
    ref = reference_tensors(reference)
    names = module_names(tensors, ref, names_by_debug_handle(f, ref))
    renamed = {names.get(k, k): t for k, t in tensors.items()}
    return renamed, {names.get(k, k): r for k, r in (roles or {}).items()}


def diff(a: Any, b: Any, *, names_a: Optional[Reference] = None,
         names_b: Optional[Reference] = None, **load_options: Any) -> Diff:
    """Compare two files of one format (paths or anything :func:`pyflatmodule.load`
    takes, or files already opened); of bundled programs, their embedded programs.
    ``names_a``, ``names_b``: the module's tensors (a :data:`pyflatmodule.naming.Reference`)
    that name A's and B's tensors where the files do not.

    Raises:
        ValueError: the files are of different formats, or a reference cannot be read.
        FormatError: a file is not valid.
    """
    fa, fb = (_compared(x if isinstance(x, _OPENED) else load(x, **load_options))
              for x in (a, b))
    a_format, b_format = _format(fa), _format(fb)
    if a_format is not b_format:
        raise ValueError(f"A is {a_format.description} and B {b_format.description}: diff "
                         "compares two files of one format")
    ta, tb = file_tensors(fa), file_tensors(fb)
    programs = isinstance(fa, Program) and isinstance(fb, Program)
    ta, role_a = _renamed(fa, ta, _roles(fa, ta) if isinstance(fa, Program) else None, names_a)
    tb, role_b = _renamed(fb, tb, _roles(fb, tb) if isinstance(fb, Program) else None, names_b)
    return Diff(a_format.title, _structure(fa, fb),
                _match(ta, tb, (role_a, role_b) if programs else None))
