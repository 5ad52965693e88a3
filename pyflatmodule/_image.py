"""The verified, indexed file that every proxy reads from.

``Image`` runs the C passes once (open, storages, ivalues, tensors and, when
verifying, the rest) and keeps their flat index arrays. Decoding a value reads
the index and the buffer; it never walks a vtable again.
"""
from __future__ import annotations

import itertools
import mmap
import re
import struct
import threading
import weakref
from typing import Any, Dict, Iterable, List, NamedTuple, Optional, Sequence, Tuple

import numpy as np

from . import tensors as _tensors
from ._jit_source import ClassDecl, parse_classes
from ._native import check, ffi, format_error, lib, new_error
from ._source import RUN_GAP, Source, apply_advice
from .errors import FormatError

__all__ = ["Image", "ObjectType", "Options"]

KIND_NAMES = {lib.MOBILE_TYPE_TYPE_CLASS_WITH_FIELD: "class_with_field",
              lib.MOBILE_TYPE_TYPE_CUSTOM_CLASS: "custom_class",
              lib.MOBILE_TYPE_TYPE_CLASS_WITH_SETSTATE: "class_with_setstate"}
#: Why a state_dict walk stopped early.
WALK_TOO_LARGE = "object graph is too large to walk (objects shared many times over)"


class ObjectType(NamedTuple):
    """An entry of the file's type table."""

    name: str
    kind: str
    attr_names: Tuple[str, ...]

# IValue union type numbers, from the schema (csrc/schemas/mobile_bytecode.fbs).
NONE: int = lib.MOBILE_I_VALUE_UNION_NONE
INT: int = lib.MOBILE_I_VALUE_UNION_INT
BOOL: int = lib.MOBILE_I_VALUE_UNION_BOOL
DOUBLE: int = lib.MOBILE_I_VALUE_UNION_DOUBLE
COMPLEX: int = lib.MOBILE_I_VALUE_UNION_COMPLEX_DOUBLE
TENSOR: int = lib.MOBILE_I_VALUE_UNION_TENSOR_METADATA
STRING: int = lib.MOBILE_I_VALUE_UNION_STRING
LIST: int = lib.MOBILE_I_VALUE_UNION_LIST
TUPLE: int = lib.MOBILE_I_VALUE_UNION_TUPLE
DICT: int = lib.MOBILE_I_VALUE_UNION_DICT
OBJECT: int = lib.MOBILE_I_VALUE_UNION_OBJECT
INT_LIST: int = lib.MOBILE_I_VALUE_UNION_INT_LIST
DOUBLE_LIST: int = lib.MOBILE_I_VALUE_UNION_DOUBLE_LIST
BOOL_LIST: int = lib.MOBILE_I_VALUE_UNION_BOOL_LIST
DEVICE: int = lib.MOBILE_I_VALUE_UNION_DEVICE
ENUM: int = lib.MOBILE_I_VALUE_UNION_ENUM_VALUE
FUNCTION: int = lib.MOBILE_I_VALUE_UNION_FUNCTION
UNION_NAMES: Tuple[str, ...] = tuple(
    ffi.string(lib.ptmf_ivalue_type_name(t)).decode("ascii")
    for t in range(lib.MOBILE_I_VALUE_UNION_COUNT))

_C_TO_NUMPY = {"uint64_t": "<u8", "int64_t": "<i8", "uint32_t": "<u4", "int32_t": "<i4",
               "uint16_t": "<u2", "uint8_t": "u1", "int8_t": "i1", "double": "<f8",
               "int": "<i4"}


def struct_dtype(cname: str) -> np.dtype:
    """A numpy dtype laid out exactly like the C struct (padding and reserved skipped)."""
    fields = [(name, f) for name, f in ffi.typeof(cname).fields if f.type.kind == "primitive"]
    return np.dtype({
        "names": [name for name, _ in fields],
        "formats": [_C_TO_NUMPY[f.type.cname] for _, f in fields],
        "offsets": [f.offset for _, f in fields],
        "itemsize": ffi.sizeof(cname),
    })


IVALUE_DTYPE = struct_dtype("ptmf_ivalue")
STORAGE_DTYPE = struct_dtype("ptmf_storage")
TENSOR_DTYPE = struct_dtype("ptmf_tensor")
WALK_STEP_DTYPE = struct_dtype("ptmf_walk_step")
_IVALUE_FIELDS = ("type", "pos", "a", "n", "b", "m", "c", "k")
#: Scalar types whose values are packed several to a byte, as a lookup table.
_PACKED_TYPES = np.zeros(256, bool)
_PACKED_TYPES[list(_tensors.PACKED)] = True
#: Same-shape tensors it takes to make them as rows of one strided view.
_SPACED_MIN = 32
_TENSOR_FIELDS = ("scalar_type", "storage", "storage_offset", "ndim", "dims", "qscheme",
                  "numel", "contiguous", "scale", "zero_point", "scales", "zero_points",
                  "axis", "pos", "ivalue")


class Options:
    """Budgets and switches for one load; zero budgets derive from the file size."""

    __slots__ = ("verify", "strict", "max_depth", "max_tables", "max_elements", "advise")

    def __init__(self, verify: bool = True, strict: bool = False, max_depth: int = 200,
                 max_tables: int = 0, max_elements: int = 0,
                 advise: Optional[str] = None) -> None:
        for name, value, top in (("max_depth", max_depth, 2**32 - 1),
                                 ("max_tables", max_tables, 2**64 - 1),
                                 ("max_elements", max_elements, 2**64 - 1)):
            if not 0 <= value <= top:
                raise ValueError(f"{name} must be between 0 and {top}, not {value}")
        self.advise = advise
        self.verify = verify
        self.strict = strict
        self.max_depth = max_depth
        self.max_tables = max_tables
        self.max_elements = max_elements

    def to_c(self) -> Any:
        opt = ffi.new("ptmf_options *")
        lib.ptmf_default_options(opt)
        opt.verify = int(self.verify)
        opt.strict = int(self.strict)
        opt.max_depth = self.max_depth
        opt.max_tables = self.max_tables
        opt.max_elements = self.max_elements
        return opt


def _c_array(cname: str, array: np.ndarray) -> Any:
    return ffi.from_buffer(cname + "[]", array, require_writable=True)


def columns(table: np.ndarray, fields: Sequence[str], rows: np.ndarray) -> Dict[str, np.ndarray]:
    """``fields`` of the records ``rows`` of ``table``, one array per field: a fancy
    index of the padded records themselves would copy them field by field, slower."""
    return {f: table[f][rows] for f in fields}


class Image:
    """One PTMF buffer, verified and indexed."""

    def __init__(self, source: Source, options: Options) -> None:
        self.source = source
        self.max_depth = options.max_depth
        view = memoryview(source.obj)
        # Arrays over a caller's writable buffer go through a read-only view, so
        # nobody can turn their writeable flag back on.
        self.view = source.obj if view.readonly else view.toreadonly()
        #: Whether nobody can change the bytes through the source (a read-only
        #: mapping, bytes): what is derived from them may then be kept.
        self.immutable = view.readonly
        #: Module.state_dict()'s result, kept when ``immutable``.
        self.state_dict: Optional[Dict[str, Any]] = None
        self.size = len(source)
        self.cbuf = ffi.from_buffer("uint8_t[]", source.obj)
        self._rows: Optional[List[Tuple[int, ...]]] = None
        self._tensor_cache: Optional[Tuple[List[Tuple[Any, ...]], List[int], List[int]]] = None
        self._flats: Dict[np.dtype, np.ndarray] = {}
        self._dims: Optional[List[int]] = None
        self._tensors: Dict[int, Any] = {}
        self._storages: Optional[List[np.ndarray]] = None
        # Weak, so proxies (which hold the image) never form a cycle with it. Plain
        # references, not a WeakValueDictionary: a dead one costs a slot until reused.
        self._proxies: Dict[int, "weakref.ref[Any]"] = {}
        self._proxy_lock = threading.Lock()
        self._object_types: Optional[List[ObjectType]] = None
        self._slots: Dict[int, Dict[str, int]] = {}
        self._classes: Optional[Dict[str, ClassDecl]] = None
        self._restored: Dict[int, Dict[str, Any]] = {}
        err = new_error()
        opt = options.to_c()
        s = self.summary = ffi.new("ptmf_summary *")
        check(lib.ptmf_open(self.cbuf, self.size, opt, s, err), err)
        self.storage_index = np.empty(s.n_storages, STORAGE_DTYPE)
        c_storages = _c_array("ptmf_storage", self.storage_index)
        # source.fd: whoever opened the source releases it (module._open_image).
        check(lib.ptmf_index_storages(self.cbuf, self.size, opt, s, c_storages,
                                      source.fd, err), err)
        if source.mapped and options.advise is None:
            apply_advice(source, None, self._payload_runs(c_storages))
        else:
            apply_advice(source, options.advise, [])
        self.index = np.empty(s.n_ivalues, IVALUE_DTYPE)
        c_index = _c_array("ptmf_ivalue", self.index)
        check(lib.ptmf_index_ivalues(self.cbuf, self.size, opt, s, c_index, err), err)
        self.tensor_index = np.empty(s.n_tensors, TENSOR_DTYPE)
        self.dims = np.empty(s.n_dims, np.int64)
        status = lib.ptmf_index_tensors(self.cbuf, self.size, opt, s, c_index, c_storages,
                                        _c_array("ptmf_tensor", self.tensor_index),
                                        _c_array("int64_t", self.dims), err)
        if status == lib.PTMF_E_NEGATIVE_DIMENSION:
            self._explain_negative_size(status, err)
        check(status, err)
        if options.verify:
            check(lib.ptmf_verify_rest(self.cbuf, self.size, opt, s, c_index, err), err)

    def _payload_runs(self, c_storages: Any) -> List[Tuple[int, int]]:
        """Page-aligned ranges of tensor payload, merged across small gaps."""
        n = len(self.storage_index)
        order = np.argsort(self.storage_index["pos"], kind="stable").astype(np.uint32)
        runs = np.empty(2 * n, np.uint64)
        k = lib.ptmf_payload_runs(c_storages, _c_array("uint32_t", order), n, mmap.PAGESIZE,
                                  RUN_GAP, _c_array("uint64_t", runs))
        return list(zip(runs[0:2 * k:2].tolist(), runs[1:2 * k:2].tolist()))

    # ------------------------------------------------------------ raw reads

    def rows(self) -> List[Tuple[int, ...]]:
        """Per ivalue: (type, pos, a, n, b, m, c, k), as Python ints."""
        if self._rows is None:
            self._rows = list(zip(*[self.index[f].tolist() for f in _IVALUE_FIELDS]))
        return self._rows

    def text(self, pos: int, size: int, where: str) -> str:
        """The UTF-8 string of ``size`` bytes at ``pos``."""
        try:
            return str(self.view[pos:pos + size], "utf-8")
        except UnicodeDecodeError as e:
            raise format_error(lib.PTMF_E_BAD_UTF8, pos + e.start, where) from None

    def u32s(self, pos: int, count: int) -> Tuple[int, ...]:
        return struct.unpack_from(f"<{count}I", self.view, pos)

    def refs(self, i: int, pos: int, count: int, where: str) -> Tuple[int, ...]:
        """The ``count`` ivalue indices stored at ``pos``, each checked to name an
        ivalue before ``i``. Checked again at every read: a caller's writable buffer
        may have changed since the index was built."""
        out: Tuple[int, ...] = struct.unpack_from(f"<{count}I", self.view, pos)
        if count and max(out) >= i:
            raise format_error(lib.PTMF_E_FORWARD_REFERENCE, pos, where)
        return out

    def read_strings(self, vec: int, count: int, where: str) -> List[str]:
        """Every element of a vector of strings, located in one C call."""
        err = new_error()
        pos = np.empty(count, np.uint64)
        size = np.empty(count, np.uint32)
        check(lib.ptmf_read_strings(self.cbuf, self.size, vec, count,
                                    _c_array("uint64_t", pos), _c_array("uint32_t", size),
                                    err), err, where)
        view = self.view
        spans = list(zip(pos.tolist(), size.tolist()))
        try:
            return [str(view[p:p + n], "utf-8") for p, n in spans]
        except UnicodeDecodeError:
            return [self.text(p, n, f"{where}[{i}]") for i, (p, n) in enumerate(spans)]

    def array(self, dtype: Any, count: int, offset: int) -> np.ndarray:
        """A read-only array over the buffer (``view`` is always read-only)."""
        return np.frombuffer(self.view, dtype, count=count, offset=offset)

    # ------------------------------------------------------------ tensors

    def storage(self, i: int) -> np.ndarray:
        """Storage ``i`` as a read-only uint8 array over the buffer."""
        if self._storages is None:
            arrays = []
            for pos, size in self.storage_index[["pos", "size"]].tolist():
                arrays.append(self.array(np.uint8, size, pos))
            self._storages = arrays
        return self._storages[i]

    def _flat(self, dtype: np.dtype) -> np.ndarray:
        """The whole buffer as one read-only array of ``dtype``, made once per dtype."""
        flat = self._flats.get(dtype)
        if flat is None:
            flat = self._flats[dtype] = self.array(dtype, self.size // dtype.itemsize, 0)
        return flat

    def storage_count(self) -> int:
        return int(self.summary.n_storages)

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
        todo = np.unique(np.fromiter(ts, np.int64) if not made
                         else np.array([t for t in ts if t not in made], np.int64))
        if len(todo):
            self._make_common(todo)
        try:
            return list(map(made.__getitem__, ts))
        except KeyError:   # some are not of the common kind: made one by one
            return [made[t] if t in made else self.tensor(t) for t in ts]

    def _make_common(self, todo: np.ndarray) -> None:
        rec = columns(self.tensor_index, ("scalar_type", "storage", "storage_offset", "ndim",
                                          "dims", "qscheme", "numel", "contiguous"), todo)
        st = rec["scalar_type"]
        common = ((rec["contiguous"] != 0) & (rec["numel"] > 0) & (rec["qscheme"] < 0)
                  & ~_PACKED_TYPES[st.astype(np.uint8)])
        positions = self.storage_index["pos"].astype(np.int64)
        setdefault = self._tensors.setdefault
        for scalar_type in np.unique(st[common]).tolist():
            dtype = _tensors.numpy_dtype(scalar_type)
            pick = np.flatnonzero(common & (st == scalar_type))
            start = (positions[rec["storage"][pick]]
                     + rec["storage_offset"][pick].astype(np.int64) * dtype.itemsize)
            aligned = start % dtype.itemsize == 0
            pick = pick[aligned]
            first = start[aligned] // dtype.itemsize
            end = first + rec["numel"][pick].astype(np.int64)
            flat = self._flat(dtype)
            ndims = rec["ndim"][pick]
            for ndim in np.unique(ndims).tolist():
                sel = np.flatnonzero(ndims == ndim)
                # One row of sizes per tensor.
                shape_rows = self.dims[rec["dims"][pick[sel]].astype(np.int64)[:, None]
                                       + np.arange(ndim)]
                if ndim and len(sel) >= _SPACED_MIN:
                    left = self._make_spaced(flat, todo[pick[sel]], first[sel], shape_rows)
                    sel, shape_rows = sel[left], shape_rows[left]
                spans = zip(todo[pick[sel]].tolist(), first[sel].tolist(), end[sel].tolist())
                if ndim == 1:
                    for t, a, b in spans:
                        setdefault(t, flat[a:b])
                    continue
                # One tuple per tensor, made by zip: reshape parses a tuple fastest.
                shapes: Iterable[Tuple[int, ...]] = (
                    zip(*shape_rows.T.tolist()) if ndim else itertools.repeat(()))
                for (t, a, b), shape in zip(spans, shapes):
                    setdefault(t, flat[a:b].reshape(shape))

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
            cache = self._tensor_cache = (self.tensor_index[list(_TENSOR_FIELDS)].tolist(),
                                          self._dim_list(),
                                          self.storage_index["pos"].tolist())
        return cache

    def _dim_list(self) -> List[int]:
        """Every tensor's sizes and strides as one Python list, made once."""
        if self._dims is None:
            self._dims = self.dims.tolist()
        return self._dims

    def _make_tensor(self, t: int) -> Any:
        records, dims, storage_pos = self._records()
        st, storage_index, offset, ndim, d, qscheme, numel, contiguous = records[t][:8]
        sizes = dims[d:d + ndim]
        if contiguous and numel and st not in _tensors.PACKED:
            # The common case: a slice of the whole buffer seen as this dtype, then
            # a reshape. The C index proved the extent.
            dtype = _tensors.numpy_dtype(st)
            start = storage_pos[storage_index] + offset * dtype.itemsize
            if start % dtype.itemsize == 0:
                first = start // dtype.itemsize
                array = self._flat(dtype)[first:first + numel]
            else:
                array = self.array(dtype, numel, start)
            if ndim != 1:
                array = array.reshape(sizes)
            if qscheme < 0:
                return array
        strides = dims[d + ndim:d + 2 * ndim]
        storage = self.storage(storage_index)
        if st in _tensors.PACKED and numel > _tensors.PACKED[st] * storage.size:
            # Only an expanded (stride 0) view names more values than its storage
            # holds; repacking it would allocate without bound.
            pos, ivalue = records[t][13:]
            raise format_error(lib.PTMF_E_ELEMENT_BUDGET, pos,
                               f"ivalues[{ivalue}].val<TensorMetadata>",
                               "packed tensor view names more values than its storage holds")
        if not (contiguous and numel and st not in _tensors.PACKED):
            array = _tensors.view(storage, st, offset, sizes, strides)
        if qscheme < 0:
            return array
        if st in _tensors.PACKED and array.size:
            def values() -> np.ndarray:
                return _tensors.unpack(storage, st, offset, sizes, strides)
        else:
            def values() -> np.ndarray:
                return array
        common = (array, tuple(sizes), _tensors.scalar_type_name(st),
                  _tensors.QSCHEME_NAMES[qscheme], values)
        scale, zero_point, scales, zero_points, axis = records[t][8:13]
        if qscheme == 0:
            return _tensors.QuantizedTensor(*common, scale=scale, zero_point=zero_point)
        return _tensors.QuantizedTensor(*common, scales=self.tensor(scales),
                                        zero_points=self.tensor(zero_points), axis=axis)

    # ------------------------------------------------------------ values

    def value(self, i: int) -> Any:
        """Decode ivalue ``i``; values shared inside it are decoded once."""
        from .values import decode
        return decode(self, i, {})

    def proxy(self, i: int, factory: Any) -> Any:
        """The one proxy object for ivalue ``i`` (an Object or Function)."""
        return self.proxies([i], factory)[0]

    def proxies(self, indices: Sequence[int], factory: Any) -> List[Any]:
        """The one proxy object for each ivalue of ``indices``, the missing ones made
        in bulk and published under a lock: threads racing here get the same ones."""
        refs = self._proxies
        out = [None if (ref := refs.get(i)) is None else ref() for i in indices]
        todo = [i for i, p in zip(indices, out) if p is None]
        if todo:
            made = dict(zip(todo, map(factory, itertools.repeat(self), todo)))
            with self._proxy_lock:
                for i, p in made.items():
                    known = None if (ref := refs.get(i)) is None else ref()
                    if known is None:
                        refs[i] = weakref.ref(p)
                    else:
                        made[i] = known
            out = [made[i] if p is None else p for i, p in zip(indices, out)]
        return out

    # ------------------------------------------------------------ tables

    def object_types(self) -> List[ObjectType]:
        """The type table, read once."""
        if self._object_types is None:
            s = self.summary
            out = []
            r = ffi.new("ptmf_record *")
            err = new_error()
            for i in range(s.n_object_types):
                where = f"object_types[{i}]"
                check(lib.ptmf_read_object_type(self.cbuf, self.size, s.object_types,
                                                s.n_object_types, i, r, err), err, where)
                names = tuple(self.read_strings(r.v, r.v_len, where + ".attr_names"))
                kind = KIND_NAMES.get(int(r.num), f"unknown({int(r.num)})")
                out.append(ObjectType(self.text(r.s0, r.s0_len, where + ".type_name"), kind,
                                      names))
            self._object_types = out
        return self._object_types

    def slots(self, type_index: int) -> Dict[str, int]:
        """Attribute name to slot number for one object type."""
        slots = self._slots.get(type_index)
        if slots is None:
            names = self.object_types()[type_index].attr_names
            slots = {}
            for i, n in enumerate(names):
                slots.setdefault(n, i)
            self._slots[type_index] = slots   # published complete: threads may race
        return slots

    def named_blobs(self, data: int, count: int, what: str) -> List[Tuple[str, int, int]]:
        """(name, content position, content size) of each ExtraFile-like entry."""
        r = ffi.new("ptmf_record *")
        err = new_error()
        out = []
        for i in range(count):
            where = f"{what}[{i}]"
            check(lib.ptmf_read_extra_file(self.cbuf, self.size, data, count, i, r, err), err,
                  where)
            out.append((self.text(r.s0, r.s0_len, where + ".name"), int(r.s1), int(r.s1_len)))
        return out

    def jit_sources(self) -> Dict[str, str]:
        """TorchScript source text per qualified file name."""
        s = self.summary
        return {name: self.text(pos, size, f"jit_sources[{name}].content")
                for name, pos, size in self.named_blobs(s.jit_sources, s.n_jit_sources,
                                                        "jit_sources")}

    def classes(self) -> Dict[str, ClassDecl]:
        """Class declarations parsed from the jit sources, once."""
        if self._classes is None:
            self._classes = parse_classes(self.jit_sources())
        return self._classes

    def walk_modules(self, root: int, types: Any, budget: List[int]) -> np.ndarray:
        """The steps of the C module walk from field object ``root`` (see
        ``ptmf_walk_modules``); ``budget[0]`` pays for it."""
        max_steps = max(budget[0], 0) + 1   # a step per attribute paid for, and the root
        steps = np.empty(max_steps, WALK_STEP_DTYPE)
        stack = np.empty(max_steps, WALK_STEP_DTYPE)
        left = ffi.new("uint64_t *", max(budget[0], 0))
        n = ffi.new("uint64_t *")
        err = new_error()
        status = lib.ptmf_walk_modules(self.cbuf, self.size, _c_array("ptmf_ivalue", self.index),
                                       len(self.index), types, root,
                                       _c_array("ptmf_walk_step", steps),
                                       _c_array("ptmf_walk_step", stack), max_steps, left, n,
                                       err)
        budget[0] = int(left[0])
        if status == lib.PTMF_E_ELEMENT_BUDGET:
            raise format_error(status, int(err.offset),
                               ffi.string(err.path).decode("utf-8", "replace"), WALK_TOO_LARGE)
        check(status, err)
        return steps[:int(n[0])]

    def restored_attributes(self, i: int, restore: Any) -> Dict[str, Any]:
        """Attributes of set-state object ``i``, computed once by ``restore(image, i)``."""
        attrs = self._restored.get(i)
        if attrs is None:
            attrs = self._restored[i] = restore(self, i)
        return attrs

    def _explain_negative_size(self, status: int, err: Any) -> None:
        """Name the tensor whose int32 size overflowed: torch writes tensors with more
        than 2^31-1 elements along one dimension without complaint."""
        path = ffi.string(err.path).decode("utf-8", "replace")
        match = re.match(r"ivalues\[(\d+)\]\.val<TensorMetadata>\.sizes\[", path)
        if not match:
            return
        try:
            name = self.attribute_path(int(match.group(1)))
        except FormatError:
            name = None
        if name is None:
            return
        message = (f"tensor {name!r} has a negative size: its int32 sizes overflowed "
                   "(more than 2^31-1 elements along one dimension), so the file cannot "
                   "describe it")
        raise format_error(status, int(err.offset), path, message)

    def attribute_path(self, target: int) -> Optional[str]:
        """Dotted attribute path from the root object to ivalue ``target``, if any
        field object holds it (first holder wins)."""
        parent: Dict[int, Tuple[int, int]] = {}
        for j in np.flatnonzero(self.index["type"] == 10).tolist():
            _, _, a, n, _, _, _, _ = self.rows()[j]
            for slot, child in enumerate(self.refs(j, a, n, f"ivalues[{j}].val<Object>.attrs")):
                parent.setdefault(child, (j, slot))
        names: List[str] = []
        node = target
        root = int(self.summary.state_obj)
        while node != root:
            if node not in parent or len(names) > len(parent):
                return None
            node, slot = parent[node]
            attr_names = self.object_types()[self.rows()[node][5]].attr_names
            names.append(attr_names[slot] if slot < len(attr_names) else f"<slot {slot}>")
        return ".".join(reversed(names))
