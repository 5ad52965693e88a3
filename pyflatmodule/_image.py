"""The index layer: the verified, indexed file that the decoding layer reads.

``Image`` runs the C passes once (open, storages, ivalues, tensors and, when
verifying, the rest), applies the readahead advice, keeps the flat index arrays and
answers raw reads (strings, reference vectors, arrays over the buffer, the tables
of object types and named blobs, the C module walk). It knows nothing of decoded
values: ``tensors``, ``values`` and ``functions`` build them, and own their caches.
"""
from __future__ import annotations

import mmap
import re
import struct
from typing import Any, Dict, List, NamedTuple, Optional, Sequence, Tuple

import numpy as np

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
        opt = ffi.new("fb_options *")
        lib.fb_default_options(opt)
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
        self.size = len(source)
        self.cbuf = ffi.from_buffer("uint8_t[]", source.obj)
        self._rows: Optional[List[Tuple[int, ...]]] = None
        self._flats: Dict[np.dtype, np.ndarray] = {}
        self._storages: Optional[List[np.ndarray]] = None
        self._object_types: Optional[List[ObjectType]] = None
        self._slots: Dict[int, Dict[str, int]] = {}
        self._classes: Optional[Dict[str, ClassDecl]] = None
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

    # ------------------------------------------------------------ storages

    def storage(self, i: int) -> np.ndarray:
        """Storage ``i`` as a read-only uint8 array over the buffer."""
        if self._storages is None:
            arrays = []
            for pos, size in self.storage_index[["pos", "size"]].tolist():
                arrays.append(self.array(np.uint8, size, pos))
            self._storages = arrays
        return self._storages[i]

    def flat(self, dtype: np.dtype) -> np.ndarray:
        """The whole buffer as one read-only array of ``dtype``, made once per dtype."""
        flat = self._flats.get(dtype)
        if flat is None:
            flat = self._flats[dtype] = self.array(dtype, self.size // dtype.itemsize, 0)
        return flat

    def storage_count(self) -> int:
        """How many storages the file holds."""
        return int(self.summary.n_storages)

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
        for j in np.flatnonzero(self.index["type"] == OBJECT).tolist():
            _, _, a, n, _, _, _, _ = self.rows()[j]   # an Object: attrs at a, n of them
            for slot, child in enumerate(self.refs(j, a, n, f"ivalues[{j}].val<Object>.attrs")):
                parent.setdefault(child, (j, slot))
        names: List[str] = []
        node = target
        root = int(self.summary.state_obj)
        while node != root:
            if node not in parent or len(names) > len(parent):
                return None
            node, slot = parent[node]
            attr_names = self.object_types()[int(self.index["m"][node])].attr_names
            names.append(attr_names[slot] if slot < len(attr_names) else f"<slot {slot}>")
        return ".".join(reversed(names))
