"""The index layer: the verified, indexed file that the decoding layer reads.

``PtmfIndex`` runs the C passes once (open, storages, ivalues, tensors and, when
verifying, the rest), applies the readahead advice, keeps the flat index arrays and
answers raw reads (strings, reference vectors, arrays over the buffer, the tables
of object types and named blobs, the C module walk). It knows nothing of decoded
values: ``tensors``, ``values`` and ``functions`` build them, and own their caches.
"""
from __future__ import annotations

import mmap
import re
import struct
from typing import Any, Callable, Dict, List, NamedTuple, Optional, Tuple

from ..core.fbread import enum_names
from ..core.lazy import np
from ..core.native import c_buffer, check, ffi, format_error, lib, new_error
from ..core.options import Options
from ..core.records import c_array, struct_dtype
from ..core.source import RUN_GAP, Source, apply_advice
from ..errors import FormatError
from .jit_source import ClassDecl

__all__ = ["Image", "IvalueRow", "ObjectType", "PtmfIndex"]

#: An object type's kind by number: the schema's TypeType names, lower-cased, of the kinds
#: a class may have (CLASS_WITH_FIELD .. CLASS_WITH_SETSTATE, what the verifier accepts);
#: any other reads as "unknown(<n>)".
KIND_NAMES = {v: n.lower() for v, n in enum_names(lib.mobile_type_type).items()
              if lib.MOBILE_TYPE_TYPE_CLASS_WITH_FIELD <= v
              <= lib.MOBILE_TYPE_TYPE_CLASS_WITH_SETSTATE}
#: The most bytes a state_dict's keys may take: far above any model's (a shared
#: module's paths are each a key), far below what would exhaust the memory.
_MAX_KEY_BYTES = 1 << 30
#: Why a state_dict walk stopped early.
WALK_TOO_LARGE = "object graph is too large to walk (objects shared many times over)"


class TypeTable(NamedTuple):
    """The type table as the C core reads it in bulk."""

    types: np.ndarray   #: struct_dtype("ptmf_object_type") per entry
    attrs: np.ndarray   #: struct_dtype("ptmf_span") per attribute name, type after type


def attr_where(types: np.ndarray, a: int) -> str:
    """The path of attribute name ``a`` of a TypeTable."""
    t = int(np.searchsorted(types["first_attr"], a, side="right")) - 1
    return f"object_types[{t}].attr_names[{a - int(types['first_attr'][t])}]"


class ClassTable(NamedTuple):
    """The classes of the jit sources as the C core scans them."""

    classes: np.ndarray   #: struct_dtype("ptmf_class") per class, in source order
    listed: np.ndarray    #: struct_dtype("ptmf_span") per name of their __parameters__/__buffers__


class ModuleTypes(NamedTuple):
    """What the state_dict walk knows of each object type (``ptmf_module_types``)."""

    class_of_type: np.ndarray   #: uint32 per type: its class, _NO_CLASS if none
    module: np.ndarray          #: uint8 per type: 0 no module, 1 a field object, 2 other
    role: np.ndarray            #: uint8 per attribute name (TypeTable.attrs): PTMF_WALK_*


_NO_CLASS = 2**32 - 1


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



class IvalueRow(NamedTuple):
    """One ivalue's index record as Python ints: the columns of ``ptmf_ivalue`` (its
    comment in csrc/ptmf/ptmf.h says which types use which)."""

    type: int             #: IValue union type
    pos: int              #: the union value: its table, or a scalar's struct
    data: int             #: element 0 of the vector or string the value holds
    length: int           #: elements (bytes, for a string) at ``data``
    values: int           #: Dict: element 0 of its values (``length`` of them)
    annotation: int       #: List, Dict: annotation_str's first byte
    annotation_len: int   #: bytes at ``annotation``
    type_index: int       #: Object: its object type; Function: its class_type
    target: int           #: EnumValue: its value's ivalue; TensorMetadata: its tensor record
    state: int            #: Object: the ivalue of its state
    setstate: int         #: Object: the ivalue of its setstate_func


class PtmfIndex:
    """One PTMF buffer, verified and indexed: the C passes' summary and records."""

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
        self.cbuf = c_buffer(source.obj, "uint8_t[]")
        self._rows: Optional[List[IvalueRow]] = None
        self._flats: Dict[np.dtype, np.ndarray] = {}
        self._storages: Optional[List[np.ndarray]] = None
        self._object_types: Optional[List[ObjectType]] = None
        self._slots: Dict[int, Dict[str, int]] = {}
        self._type_table: Optional[TypeTable] = None
        self._class_table: Optional[ClassTable] = None
        self._module_types: Optional[ModuleTypes] = None
        self._class_decls: Dict[int, ClassDecl] = {}
        err = new_error()
        opt = options.to_c()
        s = self.summary = ffi.new("ptmf_summary *")
        check(lib.ptmf_open(self.cbuf, self.size, opt, s, err), err)
        self.storage_index = np.empty(s.n_storages, struct_dtype("ptmf_storage"))
        c_storages = c_array("ptmf_storage", self.storage_index)
        # source.fd: whoever opened the source releases it (module._open_image).
        check(lib.ptmf_index_storages(self.cbuf, self.size, opt, s, c_storages,
                                      source.fd, err), err)
        if source.mapped and options.advise is None:
            apply_advice(source, None, self._payload_runs(c_storages))
        else:
            apply_advice(source, options.advise, [])
        self.index = np.empty(s.n_ivalues, struct_dtype("ptmf_ivalue"))
        c_index = c_array("ptmf_ivalue", self.index)
        check(lib.ptmf_index_ivalues(self.cbuf, self.size, opt, s, c_index, err), err)
        self.tensor_index = np.empty(s.n_tensors, struct_dtype("ptmf_tensor"))
        self.dims = np.empty(s.n_dims, np.int64)
        status = lib.ptmf_index_tensors(self.cbuf, self.size, opt, s, c_index, c_storages,
                                        c_array("ptmf_tensor", self.tensor_index),
                                        c_array("int64_t", self.dims), err)
        if status == lib.FB_E_NEGATIVE_DIMENSION:
            self._explain_negative_size(status, err)
        check(status, err)
        if options.verify:
            check(lib.ptmf_verify_rest(self.cbuf, self.size, opt, s, c_index, err), err)

    def _payload_runs(self, c_storages: Any) -> List[Tuple[int, int]]:
        """Page-aligned ranges of tensor payload, merged across small gaps."""
        n = len(self.storage_index)
        runs = ffi.new("uint64_t[]", 2 * n)
        k = lib.ptmf_payload_runs(c_storages, n, mmap.PAGESIZE, RUN_GAP,
                                  ffi.new("uint32_t[]", n), runs)
        flat = ffi.unpack(runs, 2 * k)
        return list(zip(flat[0::2], flat[1::2]))

    # ------------------------------------------------------------ raw reads

    def rows(self) -> List[IvalueRow]:
        """Per ivalue: its index record as Python ints."""
        if self._rows is None:
            self._rows = list(map(IvalueRow._make,
                                  zip(*[self.index[f].tolist() for f in IvalueRow._fields])))
        return self._rows

    def text(self, pos: int, size: int, where: str) -> str:
        """The UTF-8 string of ``size`` bytes at ``pos``."""
        try:
            return str(self.view[pos:pos + size], "utf-8")
        except UnicodeDecodeError as e:
            raise format_error(lib.FB_E_BAD_UTF8, pos + e.start, where) from None

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
                                    c_array("uint64_t", pos), c_array("uint32_t", size),
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

    def type_table(self) -> "TypeTable":
        """The type table's records and attribute name spans, read in one C call."""
        if self._type_table is None:
            s = self.summary
            err = new_error()
            types = np.empty(s.n_object_types, struct_dtype("ptmf_object_type"))
            c_types = c_array("ptmf_object_type", types)
            total = ffi.new("uint64_t *")
            attrs = np.empty(0, struct_dtype("ptmf_span"))
            while True:   # count the names, then read them
                check(lib.ptmf_read_object_types(self.cbuf, self.size, s.object_types,
                                                 s.n_object_types, c_types,
                                                 c_array("ptmf_span", attrs), len(attrs),
                                                 total, err), err)
                if len(attrs) == total[0]:
                    break
                attrs = np.empty(total[0], struct_dtype("ptmf_span"))
            self._type_table = TypeTable(types, attrs)
        return self._type_table

    def object_types(self) -> List[ObjectType]:
        """The type table, read once."""
        if self._object_types is None:
            table = self.type_table()
            names = self.texts(table.attrs, lambda a: attr_where(table.types, a))
            self._object_types = [
                ObjectType(self.text(pos, size, f"object_types[{t}].type_name"),
                           KIND_NAMES.get(kind, f"unknown({kind})"),
                           tuple(names[first:first + n]))
                for t, (pos, size, first, n, kind) in enumerate(zip(*(
                    table.types[f].tolist() for f in
                    ("name_pos", "name_len", "first_attr", "n_attrs", "kind"))))]
        return self._object_types

    def type_name(self, t: int) -> str:
        """The name of object type ``t``, read alone."""
        record = self.type_table().types[t]
        return self.text(int(record["name_pos"]), int(record["name_len"]),
                         f"object_types[{t}].type_name")

    def texts(self, spans: np.ndarray, where: Callable[[int], str]) -> List[str]:
        """The UTF-8 strings at ``spans`` (struct_dtype("ptmf_span") records); a bad one raises
        FormatError at ``where(its index)``."""
        view = self.view
        pairs = list(zip(spans["pos"].tolist(), spans["len"].tolist()))
        try:
            return [str(view[p:p + n], "utf-8") for p, n in pairs]
        except UnicodeDecodeError:
            return [self.text(p, n, where(i)) for i, (p, n) in enumerate(pairs)]

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

    def class_table(self) -> "ClassTable":
        """Every class of the jit sources and the names its lists hold (C scan, once)."""
        if self._class_table is None:
            n_classes = ffi.new("uint32_t *")
            n_listed = ffi.new("uint64_t *")
            err = new_error()
            # Room for the classes of most files (one scan); the counts size a second.
            guess = 2 * int(self.summary.n_object_types) + 64
            classes = np.empty(guess, struct_dtype("ptmf_class"))
            listed = np.empty(8 * guess, struct_dtype("ptmf_span"))
            while True:
                check(lib.ptmf_scan_classes(self.cbuf, self.size, self.summary,
                                            c_array("ptmf_class", classes), len(classes),
                                            n_classes, c_array("ptmf_span", listed),
                                            len(listed), n_listed, err), err)
                if len(classes) >= n_classes[0] and len(listed) >= n_listed[0]:
                    break
                classes = np.empty(n_classes[0], struct_dtype("ptmf_class"))
                listed = np.empty(n_listed[0], struct_dtype("ptmf_span"))
            self._class_table = ClassTable(classes[:n_classes[0]], listed[:n_listed[0]])
        return self._class_table

    def module_types(self) -> "ModuleTypes":
        """Per object type its class and module kind, per attribute its role (C, once)."""
        if self._module_types is None:
            table, classes = self.type_table(), self.class_table()
            n_types, n_attrs = len(table.types), len(table.attrs)
            class_of_type = np.empty(n_types, np.uint32)
            module = np.empty(n_types, np.uint8)
            role = np.empty(n_attrs, np.uint8)
            err = new_error()
            check(lib.ptmf_module_types(
                self.cbuf, self.size, c_array("ptmf_class", classes.classes),
                len(classes.classes), c_array("ptmf_span", classes.listed),
                len(classes.listed), c_array("ptmf_object_type", table.types), n_types,
                c_array("ptmf_span", table.attrs), n_attrs,
                c_array("uint64_t", np.empty(2 * (len(classes.classes) + len(classes.listed)),
                                              np.uint64)),
                c_array("uint32_t", class_of_type), c_array("uint8_t", module),
                c_array("uint8_t", role), err), err)
            self._module_types = ModuleTypes(class_of_type, module, role)
        return self._module_types

    def class_decl(self, type_index: int) -> Optional[ClassDecl]:
        """The class declaration of object type ``type_index``, if the sources have one."""
        c = int(self.module_types().class_of_type[type_index])
        if c == _NO_CLASS:
            return None
        decl = self._class_decls.get(c)
        if decl is None:
            classes = self.class_table()
            record = classes.classes[c]
            first, n_params, n_buffers = (int(record[f]) for f in
                                          ("first_listed", "n_parameters", "n_buffers"))
            where = f"jit_sources[{int(record['source'])}].content"
            names = self.texts(classes.listed[first:first + n_params + n_buffers],
                               lambda _: where)
            decl = self._class_decls.setdefault(c, ClassDecl(
                names[:n_params], names[n_params:], bool(record["is_module"]),
                self.text(int(record["block_pos"]), int(record["block_len"]), where)))
        return decl

    def walk_modules(self, root: int, types: Any, budget: List[int]) -> np.ndarray:
        """The steps of the C module walk from field object ``root`` (see
        ``ptmf_walk_modules``); ``budget[0]`` pays for it."""
        max_steps = max(budget[0], 0) + 1   # a step per attribute paid for, and the root
        # Room for a tree's walk first (each ivalue a step or two); a walk of shared
        # modules that needs more steps runs again with room for all the budget pays.
        room = min(max_steps, 2 * len(self.index) + 64)
        while True:
            steps = np.empty(room, struct_dtype("ptmf_walk_step"))
            stack = np.empty(room, struct_dtype("ptmf_walk_step"))
            left = ffi.new("uint64_t *", max(budget[0], 0))
            n = ffi.new("uint64_t *")
            err = new_error()
            status = lib.ptmf_walk_modules(
                self.cbuf, self.size, c_array("ptmf_ivalue", self.index), len(self.index),
                types, root, c_array("ptmf_walk_step", steps),
                c_array("ptmf_walk_step", stack), room, left, n, err)
            if status != lib.FB_E_ELEMENT_BUDGET or room == max_steps:
                break
            room = max_steps
        budget[0] = int(left[0])
        if status == lib.FB_E_ELEMENT_BUDGET:
            raise format_error(status, int(err.offset),
                               ffi.string(err.path).decode("utf-8", "replace"), WALK_TOO_LARGE)
        check(status, err)
        return steps[:int(n[0])]

    def walk_keys(self, steps: np.ndarray, wanted: np.ndarray) -> List[str]:
        """The dotted keys of the ``wanted`` steps of a module walk (``ptmf_walk_keys``),
        made in C and decoded at once."""
        attrs = self.type_table().attrs
        n = len(steps)
        ends = np.empty(n, np.uint64)
        total = ffi.new("uint64_t *")
        err = new_error()
        keys = np.empty(32 * n, np.uint8)   # room for most files' keys: one call
        while True:
            check(lib.ptmf_walk_keys(self.cbuf, self.size, c_array("ptmf_walk_step", steps),
                                     n, c_array("ptmf_span", attrs), len(attrs),
                                     c_array("uint8_t", keys), len(keys),
                                     c_array("uint64_t", ends), total, err), err)
            if total[0] <= len(keys):
                break
            if total[0] > _MAX_KEY_BYTES:
                raise format_error(lib.FB_E_ELEMENT_BUDGET, None, "", WALK_TOO_LARGE)
            keys = np.empty(total[0], np.uint8)
        raw = keys[:total[0]].tobytes()
        starts = np.concatenate((np.zeros(1, np.uint64), ends[:-1]))[wanted].tolist()
        stops = ends[wanted].tolist()
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            # Keys join names with dots: one of the names is not UTF-8.
            names = steps["name"][1:]
            self.texts(attrs[names], lambda j: attr_where(self.type_table().types,
                                                          int(names[j])))
            raise
        if len(text) == len(raw):   # ASCII: byte offsets are character offsets
            return [text[a:b] for a, b in zip(starts, stops)]
        return [raw[a:b].decode("utf-8") for a, b in zip(starts, stops)]

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
            row = self.rows()[j]   # an Object: its attributes' ivalues
            for slot, child in enumerate(self.refs(j, row.data, row.length,
                                                   f"ivalues[{j}].val<Object>.attrs")):
                parent.setdefault(child, (j, slot))
        names: List[str] = []
        node = target
        root = int(self.summary.state_obj)
        while node != root:
            if node not in parent or len(names) > len(parent):
                return None
            node, slot = parent[node]
            attr_names = self.object_types()[int(self.index["type_index"][node])].attr_names
            names.append(attr_names[slot] if slot < len(attr_names) else f"<slot {slot}>")
        return ".".join(reversed(names))


#: The name this class had before it said what it is: kept for code that imports it.
Image = PtmfIndex
