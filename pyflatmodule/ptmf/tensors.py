"""PTMF's tensors: ``TensorRecord`` (a tensor as the file describes it) and
``TensorTable``, which makes each of a file's tensor records into one array, once."""
from __future__ import annotations

from typing import Any, Dict, List, NamedTuple, Optional, Sequence, Tuple

from ..core.dtypes import (
    PACKED,
    QSCHEME_NAMES,
    QuantizedTensor,
    numpy_dtype,
    scalar_type_name,
    unpack,
    view,
)
from ..core.lazy import np
from ..core.native import format_error, lib
from ..core.records import c_array, columns, distinct
from .index import PtmfIndex

__all__ = ["TensorRecord", "TensorTable"]


class TensorRecord(NamedTuple):
    """One tensor as the file describes it (``Module.tensor_records``).

    Attributes:
        number: the record's number among the file's tensors.
        ivalue: the ivalue that holds the tensor; None for the scales and zero points
            of a per-channel quantized tensor, stored inside its record.
        dtype: torch's name of the scalar type, e.g. ``"float32"``, ``"quint4x2"``.
        shape: sizes, as torch's ``Tensor.shape``.
        strides: strides in elements, as torch's ``Tensor.stride()``.
        storage: index of the storage it views (``Module.storages``).
        storage_offset: where it starts in its storage, in elements.
        offset: byte offset in the file of the storage byte holding its first element.
        storage_size: size of its storage in bytes.
        nbytes: bytes its elements take (packed types: their packed bytes).
        requires_grad: the tensor's ``requires_grad`` flag.
        qscheme: the quantization scheme (``"per_tensor_affine"``...), else None.
    """

    number: int
    ivalue: Optional[int]
    dtype: str
    shape: Tuple[int, ...]
    strides: Tuple[int, ...]
    storage: int
    storage_offset: int
    offset: int
    storage_size: int
    nbytes: int
    requires_grad: bool
    qscheme: Optional[str]


#: Same-shape tensors it takes to make them as rows of one strided view.
_SPACED_MIN = 32


def _many_alike(sizes: np.ndarray) -> bool:
    """Whether at least ``_SPACED_MIN`` of the tensors have one element count: only
    then can ``_make_spaced`` find a group (same-shape tensors have equal counts)."""
    if len(sizes) < _SPACED_MIN:
        return False
    s = np.sort(sizes)
    return bool((s[_SPACED_MIN - 1:] == s[:len(s) - _SPACED_MIN + 1]).any())


class _Record(NamedTuple):
    """The fields of a C ``ptmf_tensor`` record that making a tensor reads."""

    scalar_type: int
    storage: int
    storage_offset: int
    ndim: int
    dims: int
    qscheme: int
    numel: int
    contiguous: int
    scale: float
    zero_point: int
    scales: int
    zero_points: int
    axis: int
    pos: int
    ivalue: int


class TensorTable:
    """A file's tensor records made into read-only arrays (or QuantizedTensor) over its
    buffer, each at most once: every decoded value that holds record ``t`` holds the
    same object."""

    __slots__ = ("image", "_tensors", "_tensor_cache", "_dim_cache", "_by_id", "_described")

    def __init__(self, image: PtmfIndex) -> None:
        self.image = image
        self._tensors: Dict[int, Any] = {}
        self._tensor_cache: Optional[Tuple[List[Tuple[Any, ...]], List[int], List[int]]] = None
        self._dim_cache: Optional[List[int]] = None
        self._by_id: Dict[int, int] = {}
        self._described: Optional[List[TensorRecord]] = None

    def tensor(self, t: int) -> Any:
        """Tensor record ``t`` as an ndarray or a QuantizedTensor, made once."""
        value = self._tensors.get(t)
        if value is None:
            value = self._tensors.setdefault(t, self._make_tensor(t))
        return value

    def tensors(self, ts: Sequence[int]) -> List[Any]:
        """Tensor records ``ts`` as ``tensor`` gives them, the common ones made in bulk:
        contiguous, unquantized, unpacked, aligned views are slices of the buffer seen
        as their dtype, located and shaped for all records at once."""
        made = self._tensors
        todo = distinct(np.fromiter(ts, np.int64) if not made
                         else np.array([t for t in ts if t not in made], np.int64))
        if len(todo):
            self._make_common(todo)
        try:
            return list(map(made.__getitem__, ts))
        except KeyError:   # some are not of the common kind: made one by one
            return [made[t] if t in made else self.tensor(t) for t in ts]

    def _make_common(self, todo: np.ndarray) -> None:
        image = self.image
        records = todo.astype(np.uint32)
        starts = np.empty(len(records), np.int64)
        lib.ptmf_view_starts(c_array("ptmf_tensor", image.tensor_index),
                             len(image.tensor_index),
                             c_array("ptmf_storage", image.storage_index),
                             len(image.storage_index), c_array("uint32_t", records),
                             len(records), c_array("int64_t", starts))
        plain = starts >= 0
        rec = columns(image.tensor_index, ("scalar_type", "ndim", "dims", "numel"),
                      records[plain])
        ts, firsts = todo[plain], starts[plain]
        if len(ts) >= _SPACED_MIN:   # a model's repeated layers: rows of one view
            left = self._make_spaced_groups(ts, firsts, rec)
            ts, firsts, rec = ts[left], firsts[left], {f: a[left] for f, a in rec.items()}
        dims = self._dim_list()
        flats: Dict[int, np.ndarray] = {}
        setdefault = self._tensors.setdefault
        for t, a, st, ndim, d, n in zip(ts.tolist(), firsts.tolist(),
                                        *(rec[f].tolist() for f in
                                          ("scalar_type", "ndim", "dims", "numel"))):
            flat = flats.get(st)
            if flat is None:
                flat = flats[st] = image.flat(numpy_dtype(st))
            if ndim == 1:
                setdefault(t, flat[a:a + n])
            elif ndim == 0:   # a 0-d view: indexed with (index, ...), not sliced
                setdefault(t, flat[a, ...])
            else:
                setdefault(t, flat[a:a + n].reshape(dims[d:d + ndim]))

    def _make_spaced_groups(self, ts: np.ndarray, firsts: np.ndarray,
                            rec: Dict[str, np.ndarray]) -> np.ndarray:
        """``_make_spaced`` on each (dtype, ndim) group of multi-dimensional tensors
        where enough have one element count; returns the mask of those left."""
        left = np.ones(len(ts), bool)
        multi = rec["ndim"] > 1
        if not _many_alike(rec["numel"][multi]):
            return left
        for st, ndim in {(int(a), int(b)) for a, b in zip(rec["scalar_type"][multi],
                                                          rec["ndim"][multi])}:
            sel = np.flatnonzero((rec["scalar_type"] == st) & (rec["ndim"] == ndim))
            if not _many_alike(rec["numel"][sel]):
                continue
            shapes = self.image.dims[rec["dims"][sel].astype(np.int64)[:, None]
                                     + np.arange(ndim)]
            left[sel] = self._make_spaced(self.image.flat(numpy_dtype(st)), ts[sel],
                                          firsts[sel], shapes)
        return left

    def _make_spaced(self, flat: np.ndarray, ts: np.ndarray, firsts: np.ndarray,
                     shapes: np.ndarray) -> np.ndarray:
        """Make, as rows of one strided view, each group of at least ``_SPACED_MIN``
        tensors of one shape whose starts are evenly spaced (a model's repeated
        layers); returns the mask of those left to make one by one. Every row lies
        in the span from the group's first start to its last tensor's end, which the
        C index proved inside the buffer."""
        left = np.ones(len(ts), bool)
        # Sorted by shape, then start: each run of one shape is a candidate group.
        order = np.lexsort([firsts, *shapes.T[::-1]])
        shapes, firsts = shapes[order], firsts[order]
        bounds = np.flatnonzero((shapes[1:] != shapes[:-1]).any(axis=1)) + 1
        setdefault = self._tensors.setdefault
        for a, b in zip([0, *bounds.tolist()], [*bounds.tolist(), len(order)]):
            if b - a < _SPACED_MIN:
                continue
            members, starts = order[a:b], firsts[a:b]
            step = int(starts[1] - starts[0])
            if step <= 0 or (np.diff(starts) != step).any():
                continue
            shape = tuple(shapes[a].tolist())
            strides = [flat.itemsize]
            for size in shape[:0:-1]:
                strides.insert(0, strides[0] * size)
            first, last_end = int(starts[0]), int(starts[-1]) + int(np.prod(shape))
            rows = np.lib.stride_tricks.as_strided(
                flat[first:last_end], (len(members),) + shape,
                (step * flat.itemsize, *strides), writeable=False)
            for t, row in zip(ts[members].tolist(), rows):
                setdefault(t, row)
            left[members] = False
        return left

    def _records(self) -> Tuple[List[Tuple[Any, ...]], List[int], List[int]]:
        """Tensor records, dims and storage positions as Python lists, made once."""
        cache = self._tensor_cache
        if cache is None:
            # Built whole, then published in one assignment: threads may race here.
            cache = self._tensor_cache = (self.image.tensor_index[list(_Record._fields)].tolist(),
                                          self._dim_list(),
                                          self.image.storage_index["pos"].tolist())
        return cache

    def _dim_list(self) -> List[int]:
        """Every tensor's sizes and strides as one Python list, made once."""
        if self._dim_cache is None:
            self._dim_cache = self.image.dims.tolist()
        return self._dim_cache

    def _make_tensor(self, t: int) -> Any:
        records, dims, storage_pos = self._records()
        r = _Record(*records[t])
        st, storage_index, offset, ndim, d = (r.scalar_type, r.storage, r.storage_offset,
                                              r.ndim, r.dims)
        qscheme, numel, contiguous = r.qscheme, r.numel, r.contiguous
        sizes = dims[d:d + ndim]
        if contiguous and numel and st not in PACKED:
            # The common case: a slice of the whole buffer seen as this dtype, then
            # a reshape. The C index proved the extent.
            dtype = numpy_dtype(st)
            start = storage_pos[storage_index] + offset * dtype.itemsize
            if start % dtype.itemsize == 0:
                first = start // dtype.itemsize
                array = self.image.flat(dtype)[first:first + numel]
            else:
                array = self.image.array(dtype, numel, start)
            if ndim != 1:
                array = array.reshape(sizes)
            if qscheme < 0:
                return array
        strides = dims[d + ndim:d + 2 * ndim]
        storage = self.image.storage(storage_index)
        if st in PACKED and numel > PACKED[st] * storage.size:
            # Only an expanded (stride 0) view names more values than its storage
            # holds; repacking it would allocate without bound.
            raise format_error(lib.FB_E_ELEMENT_BUDGET, r.pos,
                               f"ivalues[{r.ivalue}].val<TensorMetadata>",
                               "packed tensor view names more values than its storage holds")
        if not (contiguous and numel and st not in PACKED):
            array = view(storage, st, offset, sizes, strides)
        if qscheme < 0:
            return array
        if st in PACKED and array.size:
            def values() -> np.ndarray:
                return unpack(storage, st, offset, sizes, strides)
        else:
            def values() -> np.ndarray:
                return array
        common = (array, tuple(sizes), scalar_type_name(st),
                  QSCHEME_NAMES[qscheme], values)
        if qscheme == lib.FB_QSCHEME_PER_TENSOR_AFFINE:
            return QuantizedTensor(*common, scale=r.scale, zero_point=r.zero_point)
        return QuantizedTensor(*common, scales=self.tensor(r.scales),
                               zero_points=self.tensor(r.zero_points), axis=r.axis)

    def record_of(self, value: Any) -> Optional[int]:
        """The record number ``value`` was made from, when it is a tensor this table
        made (by identity: each record is made into one object)."""
        made = self._tensors
        by_id = self._by_id
        if len(by_id) != len(made):
            by_id = self._by_id = {id(v): t for t, v in list(made.items())}
        t = by_id.get(id(value))
        return t if t is not None and made.get(t) is value else None

    def records(self) -> List[TensorRecord]:
        """Every tensor record, as the file describes it (read once)."""
        if self._described is None:
            self._described = self._describe()
        return self._described

    def _describe(self) -> List[TensorRecord]:
        image = self.image
        rec = image.tensor_index
        dims = self._dim_list()
        positions = image.storage_index["pos"].tolist()
        sizes = image.storage_index["size"].tolist()
        out = []
        for t, (st, storage, offset, ndim, d, qscheme, numel, grad, ivalue) in enumerate(
                rec[["scalar_type", "storage", "storage_offset", "ndim", "dims", "qscheme",
                     "numel", "requires_grad", "ivalue"]].tolist()):
            per_byte = PACKED.get(st)
            if per_byte is None:
                itemsize = numpy_dtype(st).itemsize
                nbytes, start = numel * itemsize, offset * itemsize
            else:
                nbytes, start = -(-numel // per_byte), offset // per_byte
            out.append(TensorRecord(
                t, None if ivalue == lib.PTMF_NO_IVALUE else ivalue, scalar_type_name(st),
                tuple(dims[d:d + ndim]), tuple(dims[d + ndim:d + 2 * ndim]), storage, offset,
                positions[storage] + start, sizes[storage], nbytes, bool(grad),
                QSCHEME_NAMES.get(qscheme)))
        return out
