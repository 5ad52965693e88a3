"""Writing a model's tensors to ``.safetensors`` or ``.npz``, streaming, without torch.

Both writers take ``(name, TensorEntry)`` pairs and stream each tensor's bytes from
wherever it lives (for a loaded model: the file's read-only mapping) to the output.
Contiguous tensors are written straight from their memory; a non-contiguous one is
copied a bounded chunk at a time, so at most ``CHUNK_BYTES`` of any tensor is ever
copied. Output goes to a temporary file beside the target, renamed into place at
the end: an error never leaves a half-written file behind.

safetensors: the standard layout (8-byte little-endian header length, JSON header with
``dtype``, ``shape`` and ``data_offsets`` per tensor, padded with spaces to a multiple
of 8, then the raw little-endian bytes). torch dtypes safetensors has a name for keep
it (``float32`` -> ``F32``, ``bfloat16`` -> ``BF16``, ``float8_e4m3fn`` -> ``F8_E4M3``,
``float4_e2m1fn_x2`` -> ``F4`` with the last dimension doubled, as safetensors' own
torch writer does). The others are stored bit-exact in a container and described in
``__metadata__`` under ``"tensor:<name>"`` (a JSON string): quantized tensors as their
integer representation plus ``qscheme`` and ``scale``/``zero_point``, or ``axis`` (and
``group_size``) with the names of the tensors holding their ``scales`` and
``zero_points``, written beside them as ``<name>:scales`` and ``<name>:zero_points`` in
their own dtypes (described by ``scales_of``/``zero_points_of``: the tensor they belong
to); a tensor the file stores in another layout (an XNNPACK
delegate's constant) has ``"stored"``: that layout, the permutation applied and notes
where the values may not be the module's; ``complex128``/``complex32`` as
``F64``/``F16`` with a trailing dimension of 2 (real, imaginary); ``bits*``,
``uint1..7`` and ``int1..7`` as ``U8``/``U16``/``I8``.

npz: one ``.npy`` member per tensor (numpy's own format, version 1.0 headers when they
fit), plus ``__metadata__``: a 0-d unicode array holding a JSON document with every
tensor's torch ``dtype`` (and, where it applies, its logical shape, quantization
parameters and ``"stored"`` as for safetensors). Types numpy lacks (bfloat16, float8)
are stored as same-size unsigned integers; ``complex32`` keeps its structured
``(real, imag)`` float16 layout.
"""
from __future__ import annotations

import io
import json
import math
import os
import struct
import tempfile
import zipfile
from typing import (
    IO,
    Any,
    Callable,
    Dict,
    Iterable,
    Iterator,
    List,
    NamedTuple,
    Optional,
    Sequence,
    Tuple,
    Union,
)

from .core.dtypes import QuantizedTensor, dtype_name
from .core.lazy import np

__all__ = ["CHUNK_BYTES", "SAFETENSORS_DTYPES", "TensorEntry", "blocks", "plan",
           "quantization_arrays", "quantization_params", "write_npz", "write_safetensors"]

#: Largest piece of a non-contiguous tensor copied at once (and the progress step).
CHUNK_BYTES = 16 << 20

#: safetensors dtype per torch dtype name, for the types safetensors can name exactly.
SAFETENSORS_DTYPES: Dict[str, str] = {
    "bool": "BOOL", "uint8": "U8", "int8": "I8", "int16": "I16", "int32": "I32",
    "int64": "I64", "uint16": "U16", "uint32": "U32", "uint64": "U64",
    "float16": "F16", "bfloat16": "BF16", "float32": "F32", "float64": "F64",
    "complex64": "C64", "float8_e5m2": "F8_E5M2", "float8_e4m3fn": "F8_E4M3",
    "float8_e5m2fnuz": "F8_E5M2FNUZ", "float8_e4m3fnuz": "F8_E4M3FNUZ",
    "float8_e8m0fnu": "F8_E8M0", "float4_e2m1fn_x2": "F4",
}

# Bit-exact containers for the rest, by numpy dtype of the stored array.
_CONTAINERS = {"u1": "U8", "i1": "I8", "<u2": "U16", "<i4": "I32"}

ProgressFn = Callable[[int, str], None]


class TensorEntry(NamedTuple):
    """One tensor to write: the array whose bytes are stored and how to describe it."""

    array: np.ndarray          # the stored array (int_repr for quantized tensors)
    dtype: str                 # torch dtype name, e.g. "float32", "qint8", "bits8"
    shape: Tuple[int, ...]     # torch's shape (differs from array.shape for packed types)
    qparams: Dict[str, Any]    # quantization parameters, empty for plain tensors
    #: how the file stored it, where torch's tensor is a rearrangement of that (an
    #: XNNPACK constant: :meth:`pyflatmodule.executorch.Program.delegate_layouts`)
    stored: Optional[Dict[str, Any]] = None
    #: for a quantized tensor's scales or zero points: (``"scales"`` or
    #: ``"zero_points"``, the quantized tensor's name)
    parameter_of: Optional[Tuple[str, str]] = None

    @property
    def nbytes(self) -> int:
        """Bytes this tensor takes in the output."""
        return int(self.array.size) * self.array.itemsize


def _json_float(x: float) -> Any:
    return x if math.isfinite(x) else repr(x)      # "nan", "inf", "-inf"


def quantization_params(q: QuantizedTensor) -> Dict[str, Any]:
    """A quantized tensor's scalar parameters as JSON data, as the writers describe them:
    ``qscheme``, then ``scale`` and ``zero_point`` (per tensor, a non-finite scale as a
    string) or ``axis`` and, per channel group, ``group_size``. Per-channel scales and
    zero points are arrays: :func:`quantization_arrays`."""
    out: Dict[str, Any] = {"qscheme": q.qscheme}
    if q.scales is None:
        out["scale"] = _json_float(float(q.scale))   # type: ignore[arg-type]
        out["zero_point"] = int(q.zero_point)        # type: ignore[arg-type]
    else:
        out["axis"] = int(q.axis)                    # type: ignore[arg-type]
        if q.group_size is not None:
            out["group_size"] = int(q.group_size)
    return out


def quantization_arrays(q: QuantizedTensor) -> Dict[str, np.ndarray]:
    """A per-channel (or per-channel-group) tensor's ``scales`` and ``zero_points`` as
    the file holds them (dtype and shape: by channel, then group); {} per tensor."""
    if q.scales is None:
        return {}
    return {"scales": np.asarray(q.scales), "zero_points": np.asarray(q.zero_points)}


def plan(tensors: Iterable[Tuple[str, Union[np.ndarray, QuantizedTensor]]],
         dtype_of: Callable[[Union[np.ndarray, QuantizedTensor]], str] = dtype_name,
         stored: Optional[Dict[str, Dict[str, Any]]] = None,
         ) -> List[Tuple[str, TensorEntry]]:
    """(name, ndarray | QuantizedTensor) -> entries for the writers, each described by
    ``dtype_of`` (torch's dtype name; a format whose records tell apart torch dtypes
    that share a numpy dtype passes its own) and by ``stored[name]`` when given (how the
    file stores it, written to the metadata as ``"stored"``).

    A per-channel quantized tensor is followed by its scales and zero points, named
    ``<name>:scales`` and ``<name>:zero_points``, which its parameters name. Nothing is
    copied: entries hold the arrays as given.
    """
    out = []
    how = stored or {}
    for name, value in tensors:
        if isinstance(value, QuantizedTensor):
            params = quantization_params(value)
            arrays = quantization_arrays(value)
            params.update({role: f"{name}:{role}" for role in arrays})
            out.append((name, TensorEntry(value.int_repr, dtype_of(value),
                                          tuple(value.shape), params, how.get(name))))
            out += [(f"{name}:{role}", TensorEntry(a, dtype_name(a), tuple(a.shape), {},
                                                   parameter_of=(role, name)))
                    for role, a in arrays.items()]
        else:
            array = np.asarray(value)
            out.append((name, TensorEntry(array, dtype_of(value), tuple(array.shape), {},
                                          how.get(name))))
    names = [name for name, _ in out]
    if len(set(names)) != len(names):
        twice = sorted({n for n in names if names.count(n) > 1})
        raise ValueError(f"more than one tensor would be named {', '.join(map(repr, twice))}")
    return out


def blocks(shape: Tuple[int, ...], limit: int) -> Iterator[Tuple[Any, ...]]:
    """Indices that cut an array of ``shape`` into pieces of at most about ``limit``
    elements, in C order: the whole array when it fits, else runs of rows along the
    first axis, each row cut the same way when one row alone does not fit."""
    if not shape or math.prod(shape) <= limit:
        yield (Ellipsis,)
        return
    per_row = math.prod(shape[1:])
    if per_row > limit:
        for i in range(shape[0]):
            for rest in blocks(shape[1:], limit):
                yield (i,) + rest
        return
    rows = max(1, limit // per_row)
    for i in range(0, shape[0], rows):
        yield (slice(i, i + rows),)


# --------------------------------------------------------------------------- bytes

def iter_bytes(array: np.ndarray, chunk_bytes: int = CHUNK_BYTES) -> Iterator[memoryview]:
    """The array's bytes in C order, as pieces of at most about ``chunk_bytes``.

    A C-contiguous array yields slices of its own memory (zero-copy); any other
    array is copied one :func:`blocks` piece at a time.
    """
    if array.size == 0:
        return
    if array.flags.c_contiguous:
        flat = array.reshape(-1).view(np.uint8)
        for start in range(0, flat.size, chunk_bytes):
            yield flat[start:start + chunk_bytes].data
        return
    for index in blocks(array.shape, max(1, chunk_bytes // array.itemsize)):
        yield np.ascontiguousarray(array[index]).reshape(-1).view(np.uint8).data


def _stream(out: IO[bytes], name: str, array: np.ndarray,
            progress: Optional[ProgressFn]) -> int:
    written = 0
    for piece in iter_bytes(array):
        out.write(piece)
        written += piece.nbytes
        if progress is not None:
            progress(piece.nbytes, name)
    return written


class _AtomicFile:
    """A temporary file next to ``path``, moved into place on success only."""

    def __init__(self, path: str) -> None:
        self.path = path
        directory = os.path.dirname(os.path.abspath(path))
        fd, self.tmp = tempfile.mkstemp(prefix=".pyflatmodule-", suffix=".part", dir=directory)
        self.file: IO[bytes] = os.fdopen(fd, "wb")

    def __enter__(self) -> IO[bytes]:
        return self.file

    def __exit__(self, exc_type: Any, *rest: Any) -> None:
        try:
            self.file.close()
        finally:
            if exc_type is None:
                os.chmod(self.tmp, 0o666 & ~_umask())
                os.replace(self.tmp, self.path)
            else:
                try:
                    os.unlink(self.tmp)
                except OSError:
                    pass


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


# --------------------------------------------------------------------------- safetensors

def safetensors_layout(entry: TensorEntry) -> Tuple[str, List[int], Dict[str, Any]]:
    """(safetensors dtype, stored shape, metadata dict or {}) for one tensor."""
    meta: Dict[str, Any] = {}
    shape = list(entry.array.shape)
    st = SAFETENSORS_DTYPES.get(entry.dtype) if not entry.qparams else None
    if st == "F4":
        # safetensors counts fp4 values, torch's float4_e2m1fn_x2 counts byte pairs
        shape = shape[:-1] + [2 * shape[-1]] if shape else [2]
        if not entry.shape:
            meta = {"dtype": entry.dtype, "shape": []}
    elif st is None:
        meta = {"dtype": entry.dtype}
        if entry.dtype in ("complex128", "complex32"):
            st = "F64" if entry.dtype == "complex128" else "F16"
            shape = shape + [2]
        else:
            st = _CONTAINERS[entry.array.dtype.str if entry.array.dtype.itemsize > 1
                             else entry.array.dtype.str[-2:]]
        if tuple(shape) != tuple(entry.shape):
            meta["shape"] = list(entry.shape)
        meta.update(entry.qparams)
    if entry.stored is not None:
        meta["stored"] = entry.stored
    if entry.parameter_of is not None:
        role, of = entry.parameter_of
        meta = {"dtype": entry.dtype, **meta, f"{role}_of": of}
    return st, shape, meta


def write_safetensors(path: str, entries: Sequence[Tuple[str, TensorEntry]],
                      metadata: Optional[Dict[str, str]] = None,
                      progress: Optional[ProgressFn] = None) -> int:
    """Write ``entries`` as a safetensors file; returns the file size.

    Data is laid out by decreasing alignment (then in the given order), as safetensors'
    own serializer does, so every tensor starts at a multiple of its element size.
    """
    header: Dict[str, Any] = {}
    meta: Dict[str, str] = dict(metadata or {})
    layouts = []
    for name, entry in entries:
        if name == "__metadata__":
            raise ValueError("a tensor named '__metadata__' cannot be stored in safetensors")
        st, shape, info = safetensors_layout(entry)
        layouts.append((name, entry, st, shape))
        if info:
            meta["tensor:" + name] = json.dumps(info, separators=(",", ":"))
    order = sorted(range(len(layouts)), key=lambda k: -layouts[k][1].array.itemsize)
    offset = 0
    offsets: Dict[str, List[int]] = {}
    for k in order:
        name, entry = layouts[k][:2]
        offsets[name] = [offset, offset + entry.nbytes]
        offset += entry.nbytes
    if meta:
        header["__metadata__"] = meta
    for name, _, st, shape in layouts:
        header[name] = {"dtype": st, "shape": shape, "data_offsets": offsets[name]}
    blob = json.dumps(header, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    blob += b" " * (-(8 + len(blob)) % 8)
    with _AtomicFile(path) as out:
        out.write(struct.pack("<Q", len(blob)))
        out.write(blob)
        for k in order:
            name, entry = layouts[k][:2]
            written = _stream(out, name, entry.array, progress)
            assert written == entry.nbytes, name
    return 8 + len(blob) + offset


# --------------------------------------------------------------------------- npz

def _npz_array(entry: TensorEntry) -> np.ndarray:
    """The array as stored in npz: user-defined dtypes (ml_dtypes' bfloat16, float8)
    become unsigned integers of the same size, which every numpy can read."""
    array = entry.array
    if array.dtype.isbuiltin == 2:
        return array.view(np.dtype(f"<u{array.itemsize}") if array.itemsize > 1 else np.uint8)
    return array


def _npy_header(array: np.ndarray) -> bytes:
    fmt = np.lib.format
    d = {"descr": fmt.dtype_to_descr(array.dtype), "fortran_order": False,
         "shape": tuple(array.shape)}
    buf = io.BytesIO()
    try:
        fmt.write_array_header_1_0(buf, d)
    except ValueError:
        buf = io.BytesIO()
        fmt.write_array_header_2_0(buf, d)
    return buf.getvalue()


def write_npz(path: str, entries: Sequence[Tuple[str, TensorEntry]],
              metadata: Optional[Dict[str, Any]] = None,
              progress: Optional[ProgressFn] = None) -> int:
    """Write ``entries`` as an uncompressed ``.npz``; returns the file size.

    ``np.load(path)[name]`` gives each tensor; ``__metadata__`` (a 0-d str array)
    holds the JSON description documented in this module.
    """
    tensors: Dict[str, Any] = {}
    for name, entry in entries:
        if name == "__metadata__":
            raise ValueError("a tensor named '__metadata__' cannot be stored in npz")
        info: Dict[str, Any] = {"dtype": entry.dtype}
        stored = _npz_array(entry)
        if tuple(stored.shape) != tuple(entry.shape):
            info["shape"] = list(entry.shape)
        if stored.dtype != entry.array.dtype:
            info["stored_as"] = str(stored.dtype)
        info.update(entry.qparams)
        if entry.parameter_of is not None:
            info[f"{entry.parameter_of[0]}_of"] = entry.parameter_of[1]
        if entry.stored is not None:
            info["stored"] = entry.stored
        tensors[name] = info
    doc = {"format": "pyflatmodule-npz", "version": 1, **(metadata or {}), "tensors": tensors}
    with _AtomicFile(path) as raw:
        with zipfile.ZipFile(raw, "w", compression=zipfile.ZIP_STORED,
                             allowZip64=True) as zf:
            for name, entry in entries:
                stored = _npz_array(entry)
                with zf.open(name + ".npy", "w", force_zip64=True) as member:
                    member.write(_npy_header(stored))
                    _stream(member, name, stored, progress)
            meta = np.array(json.dumps(doc, ensure_ascii=False, separators=(",", ":")))
            with zf.open("__metadata__.npy", "w", force_zip64=True) as member:
                np.lib.format.write_array(member, meta, allow_pickle=False)
        size = raw.tell()
    return size
