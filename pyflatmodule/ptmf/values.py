"""Decoded values: the IValue decoder, objects, devices, enum values and tensor keys.

The decoder reads one file through a ``Decoding``: its image, its tensor table, and
the one proxy per Object or Function ivalue (``decoder.Decoder`` implements it, above
this module, since a Function's constants are values and values hold Functions).
"""
from __future__ import annotations

import functools
import itertools
import operator
import struct
import sys
from typing import Any, Dict, Iterator, List, Mapping, NoReturn, Protocol, Sequence, Tuple

from ..core.dtypes import QuantizedTensor
from ..core.lazy import np
from ..core.names import not_picklable, summary
from ..core.native import format_error, lib
from ..core.records import columns, distinct
from .index import (
    BOOL,
    BOOL_LIST,
    COMPLEX,
    DEVICE,
    DICT,
    DOUBLE,
    DOUBLE_LIST,
    ENUM,
    FUNCTION,
    INT,
    INT_LIST,
    LIST,
    NONE,
    OBJECT,
    STRING,
    TENSOR,
    TUPLE,
    UNION_NAMES,
    ObjectType,
    PtmfIndex,
)
from .tensors import TensorTable

__all__ = ["Decoding", "Device", "EnumValue", "Object", "TensorKey", "decode", "decode_all",
           "references"]

#: Where the packed (union type, length) keys of ``_containers`` keep the length.
_LOW_32 = (1 << 32) - 1


class Decoding(Protocol):
    """One file as the decoder reads it: the image, its tensors made once, and the
    one proxy object of each Object and Function ivalue."""

    @property
    def image(self) -> PtmfIndex:
        """The verified, indexed file."""

    @property
    def tensors(self) -> TensorTable:
        """The file's tensor records, each made into one array."""

    def objects(self, indices: Sequence[int]) -> List["Object"]:
        """The one Object proxy of each ivalue of ``indices``."""

    def functions(self, indices: Sequence[int]) -> List[Any]:
        """The one Function proxy of each ivalue of ``indices``."""

    def restored_attributes(self, i: int) -> Dict[str, Any]:
        """The attributes ``__setstate__`` gives set-state object ``i``."""

_INT = struct.Struct("<q").unpack_from
_DOUBLE = struct.Struct("<d").unpack_from
_COMPLEX = struct.Struct("<2d").unpack_from


class Device:
    """A torch device value; ``str(device)`` is torch's device string, e.g. ``"cpu"``."""

    __slots__ = ("_text",)

    def __init__(self, text: str) -> None:
        self._text = text

    @property
    def type(self) -> str:
        """The device type, e.g. ``"cpu"`` or ``"cuda"``."""
        return self._text.split(":", 1)[0]

    @property
    def index(self) -> "int | None":
        """The device index, or None when the string names none."""
        _, sep, idx = self._text.partition(":")
        return int(idx) if sep and idx.isdigit() else None

    def __str__(self) -> str:
        return self._text

    def __repr__(self) -> str:
        return f"Device({self._text!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Device) and other._text == self._text

    def __hash__(self) -> int:
        return hash(("Device", self._text))


class EnumValue:
    """A TorchScript enum constant: its qualified type name and underlying value."""

    __slots__ = ("type_name", "value")

    def __init__(self, type_name: str, value: Any) -> None:
        self.type_name = type_name
        self.value = value

    def __repr__(self) -> str:
        return f"EnumValue({self.type_name!r}, {self.value!r})"

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, EnumValue) and other.type_name == self.type_name
                and other.value == self.value)

    def __hash__(self) -> int:
        return hash((self.type_name, self.value))


class TensorKey:
    """A tensor as a dict key (TorchScript's ``Dict[Tensor, V]``): ``value`` is the
    tensor, an ndarray or a QuantizedTensor. Hashed and compared by the identity of
    ``value``, as torch hashes tensors; a decoded dict's keys are the only ones that
    find its entries (iterate ``items()``)."""

    __slots__ = ("value",)

    def __init__(self, value: "np.ndarray | QuantizedTensor") -> None:
        self.value = value

    def __repr__(self) -> str:
        dtype = (self.value.dtype_name if isinstance(self.value, QuantizedTensor)
                 else str(self.value.dtype))
        return f"TensorKey(shape={tuple(self.value.shape)}, dtype={dtype})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, TensorKey) and other.value is self.value

    def __hash__(self) -> int:
        return id(self.value)


def _key(value: Any) -> Any:
    """A decoded dict key as a Python dict holds it: tensors wrapped in TensorKey."""
    return TensorKey(value) if isinstance(value, (np.ndarray, QuantizedTensor)) else value


def _where(i: int, t: int) -> str:
    return f"ivalues[{i}].val<{UNION_NAMES[t]}>"


def decode(file: Decoding, i: int, memo: Dict[int, Any], depth: int = 0) -> Any:
    """Decode ivalue ``i``. ``memo`` maps ivalue indices already decoded in this call
    to their values, so a value shared a million times is decoded once, as torch
    shares it. Every reference read must point to an earlier ivalue (``image.refs``),
    so this recursion always ends; ``depth`` keeps it within ``max_depth`` even when
    a caller's buffer changed after the C index measured the nesting."""
    if i in memo:
        return memo[i]
    image = file.image
    if depth > image.max_depth or depth > sys.getrecursionlimit() // 4:
        # Python's own stack bounds recursion too: each level costs a few frames.
        raise format_error(lib.FB_E_DEPTH_BUDGET, int(image.index["pos"][i]),
                           f"ivalues[{i}]")
    row = image.rows()[i]
    t, pos, data, n = row.type, row.pos, row.data, row.length
    view = image.view
    if t == NONE:
        out: Any = None
    elif t == INT:
        out = _INT(view, pos)[0]
    elif t == BOOL:
        out = view[pos] != 0
    elif t == DOUBLE:
        out = _DOUBLE(view, pos)[0]
    elif t == COMPLEX:
        out = complex(*_COMPLEX(view, pos))
    elif t == STRING:
        out = image.text(data, n, _where(i, t) + ".data")
    elif t == TENSOR:
        out = file.tensors.tensor(row.target)
    elif t == LIST or t == TUPLE:
        items = [decode(file, j, memo, depth + 1)
                 for j in image.refs(i, data, n, _where(i, t) + ".items")]
        out = items if t == LIST else tuple(items)
    elif t == DICT:
        keys = [_key(decode(file, j, memo, depth + 1))
                for j in image.refs(i, data, n, _where(i, t) + ".keys")]
        values = [decode(file, j, memo, depth + 1)
                  for j in image.refs(i, row.values, n, _where(i, t) + ".values")]
        try:
            out = dict(zip(keys, values))
        except TypeError:
            raise format_error(lib.PTMF_E_UNHASHABLE_KEY, data, _where(i, t) + ".keys") from None
    elif t == INT_LIST:
        out = list(struct.unpack_from(f"<{n}q", view, data))
    elif t == DOUBLE_LIST:
        out = list(struct.unpack_from(f"<{n}d", view, data))
    elif t == BOOL_LIST:
        out = [x != 0 for x in view[data:data + n]]
    elif t == DEVICE:
        out = Device(image.text(data, n, _where(i, t) + ".str"))
    elif t == ENUM:
        out = EnumValue(image.text(data, n, _where(i, t) + ".type_name"),
                        decode(file, row.target, memo, depth + 1))
    elif t == OBJECT:
        out = file.objects([i])[0]
    else:
        assert t == FUNCTION
        out = file.functions([i])[0]
    memo[i] = out
    return out


def _gather(image: PtmfIndex, indices: np.ndarray, width: int, dtype: str) -> List[Any]:
    """The ``width``-byte scalars at the positions of ivalues ``indices``, in one go."""
    whole = np.frombuffer(image.view, np.uint8)
    positions = image.index["pos"][indices].astype(np.int64)
    raw = whole[positions[:, None] + np.arange(width)]
    values: List[Any] = raw.view(dtype).reshape(len(indices), -1).tolist()
    return values


def _strings(image: PtmfIndex, where: np.ndarray, out: List[Any]) -> None:
    """Decode the String ivalues ``where`` into ``out``; the C index proved every
    extent, so only the UTF-8 can fail (then the error names the first bad one)."""
    view = image.view
    rows = image.index[where]
    try:
        for i, a, n in zip(where.tolist(), rows["data"].tolist(), rows["length"].tolist()):
            out[i] = str(view[a:a + n], "utf-8")
    except UnicodeDecodeError:
        for i, a, n in zip(where.tolist(), rows["data"].tolist(), rows["length"].tolist()):
            out[i] = image.text(a, n, _where(i, STRING) + ".data")


def references(image: PtmfIndex, containers: np.ndarray) -> np.ndarray:
    """Every ivalue index that the List, Tuple, Dict and Object ivalues ``containers``
    name, read in one go: each one's items (a Dict's keys, then its values; an
    Object's attributes), in order.
    Read once, then checked to point backwards (a caller's writable buffer may have
    changed since the index was built); a bad reference is reported by ``refs``."""
    cols = columns(image.index, ("type", "data", "values", "length"), containers)
    is_dict = cols["type"] == DICT
    ends = np.cumsum(1 + is_dict)
    segment_pos = np.repeat(cols["data"].astype(np.int64), 1 + is_dict)
    segment_pos[ends[is_dict] - 1] = cols["values"][is_dict]
    counts = np.repeat(cols["length"].astype(np.int64), 1 + is_dict)
    owners = np.repeat(np.repeat(containers, 1 + is_dict), counts)
    first = np.cumsum(counts) - counts
    positions = np.repeat(segment_pos - 4 * first, counts) + 4 * np.arange(len(owners))
    if len(positions) and not (positions % 4).any():
        refs = image.flat(np.dtype("<u4"))[positions // 4]
    else:
        whole = np.frombuffer(image.view, np.uint8)
        refs = whole[positions[:, None] + np.arange(4)].view("<u4").reshape(-1)
    if (refs >= owners).any():
        k = int(np.argmax(refs >= owners))
        bad = int(owners[k])
        row = image.rows()[bad]
        t = row.type
        keys = row.data <= int(positions[k]) < row.data + 4 * row.length
        field = (".attrs" if t == OBJECT else ".items" if t != DICT
                 else ".keys" if keys else ".values")
        start = row.data if keys else row.values
        raise format_error(lib.PTMF_E_FORWARD_REFERENCE, int(positions[k]),
                           f"{_where(bad, t)}{field}[{(int(positions[k]) - start) // 4}]")
    return refs.astype(np.int64)


def decode_all(file: Decoding, stop: int) -> List[Any]:
    """Decode ivalues ``0..stop-1`` in bulk.

    Scalars, strings, tensors and proxies are made kind by kind; then containers
    (and enums) in file order: every reference points to an earlier ivalue, so each
    finds its items already decoded. Values shared by several containers are one
    object, as in torch.
    """
    image = file.image
    types = image.index["type"][:stop]
    out: List[Any] = [None] * stop
    for kind, width, dtype in ((INT, 8, "<i8"), (DOUBLE, 8, "<f8"), (BOOL, 1, "u1"),
                               (COMPLEX, 16, "<f8")):
        where = np.flatnonzero(types == kind)
        if len(where):
            for i, v in zip(where.tolist(), _gather(image, where, width, dtype)):
                out[i] = (v[0] != 0 if kind == BOOL else complex(*v) if kind == COMPLEX
                          else v[0])
    _strings(image, np.flatnonzero(types == STRING), out)
    where = np.flatnonzero(types == TENSOR)
    records = image.index["target"][where].tolist()
    for i, value in zip(where.tolist(), file.tensors.tensors(records)):
        out[i] = value
    for kind, make in ((OBJECT, file.objects), (FUNCTION, file.functions)):
        indices: List[int] = np.flatnonzero(types == kind).tolist()
        for i, value in zip(indices, make(indices)):
            out[i] = value
    for i in np.flatnonzero(~_kind_table(_BULK)[types]).tolist():
        out[i] = decode(file, i, {})
    ordered = np.flatnonzero(_kind_table(_CONTAINERS)[types])
    if len(ordered):
        _containers(image, ordered, out)
    return out


#: The union types decode_all makes in bulk, and the containers among them.
_BULK = (NONE, INT, DOUBLE, BOOL, COMPLEX, STRING, TENSOR, OBJECT, FUNCTION, LIST, TUPLE,
         DICT, ENUM)
_CONTAINERS = (LIST, TUPLE, DICT, ENUM)


@functools.lru_cache(maxsize=None)
def _kind_table(kinds: Tuple[int, ...]) -> np.ndarray:
    """A lookup table over union type numbers: True for ``kinds`` (made at its first
    use: numpy is imported then)."""
    table = np.zeros(256, bool)
    table[list(kinds)] = True
    return table

#: Lists or tuples of one length at one depth it takes to build them column-wise.
_COLUMNS_MIN = 8


def _containers(image: PtmfIndex, ordered: np.ndarray, out: List[Any]) -> None:
    """Build the List, Tuple, Dict and Enum ivalues ``ordered`` into ``out``, whose
    other values are decoded.

    Level by level of nesting depth (the C index's): a value's items are all
    shallower, so each level finds them built. Within a level, lists and tuples of
    one length are built column by column (an ``itemgetter`` per item position, then
    ``zip``); the rest one by one. The depths are checked against the references as
    read now (a caller's writable buffer may have changed since the index was built);
    where they disagree, everything is built one by one in file order, which needs
    only that references point backwards.
    """
    cols = columns(image.index, ("type", "data", "length", "target", "depth"), ordered)
    t, n, depth = cols["type"], cols["length"].astype(np.int64), cols["depth"]
    width = np.where(t == DICT, 2 * n, np.where(t == ENUM, 0, n))
    first = np.cumsum(width) - width
    refs = references(image, ordered[t != ENUM])
    if (image.index["depth"][refs] >= np.repeat(depth, width)).any():
        _one_by_one(image, ordered, cols, first, width, refs, out)
        return
    for level in distinct(depth).tolist():
        at = np.flatnonzero(depth == level)
        sequences = at[(t[at] == LIST) | (t[at] == TUPLE)]
        key = t[sequences].astype(np.int64) << 32 | n[sequences]
        groups, group_of, sizes = np.unique(key, return_inverse=True, return_counts=True)
        group_of = group_of.reshape(-1)
        for g in np.flatnonzero(sizes >= _COLUMNS_MIN).tolist():
            members = sequences[group_of == g]
            kind, size = int(groups[g]) >> 32, int(groups[g]) & _LOW_32
            items = [_pick(out, refs[first[members] + j].tolist()) for j in range(size)]
            built: Iterator[Any] = zip(*items) if size else itertools.repeat(())
            if kind == LIST:
                built = map(list, built)
            for i, value in zip(ordered[members].tolist(), built):
                out[i] = value
        rest = np.setdiff1d(at, sequences[sizes[group_of] >= _COLUMNS_MIN],
                            assume_unique=True)
        _one_by_one(image, ordered[rest], {f: c[rest] for f, c in cols.items()},
                    first[rest], width[rest], refs, out)


def _pick(out: List[Any], indices: List[int]) -> Sequence[Any]:
    """``[out[i] for i in indices]``, at C speed."""
    if len(indices) == 1:
        return [out[indices[0]]]
    return operator.itemgetter(*indices)(out)  # type: ignore[no-any-return]


def _one_by_one(image: PtmfIndex, ordered: np.ndarray, cols: Dict[str, np.ndarray],
                first: np.ndarray, width: np.ndarray, refs: np.ndarray,
                out: List[Any]) -> None:
    """Build each of ``ordered`` in turn (columns ``cols``); an item's references are
    ``refs[first:first + width]``."""
    # Only these values' references, as Python ints.
    start = np.cumsum(width) - width
    own = refs[np.repeat(first - start, width) + np.arange(int(width.sum()))].tolist()
    get = out.__getitem__
    for i, t, data, n, value, k in zip(ordered.tolist(), cols["type"].tolist(),
                                       cols["data"].tolist(), cols["length"].tolist(),
                                       cols["target"].tolist(), start.tolist()):
        if t == TUPLE:
            out[i] = tuple(map(get, own[k:k + n]))
        elif t == LIST:
            out[i] = list(map(get, own[k:k + n]))
        elif t == DICT:
            try:
                out[i] = dict(zip(map(_key, map(get, own[k:k + n])),
                                  map(get, own[k + n:k + 2 * n])))
            except TypeError:
                raise format_error(lib.PTMF_E_UNHASHABLE_KEY, data,
                                   _where(i, t) + ".keys") from None
        else:
            out[i] = EnumValue(image.text(data, n, _where(i, t) + ".type_name"), out[value])


class Object:
    """A TorchScript object (a module or another class instance), decoded lazily.

    Attributes are read by name (``obj.fc1.weight``) or through ``obj.attributes``
    (a mapping, also for names that clash with the properties below). A set-state
    object's attributes are those its ``__setstate__`` sets, recovered by replaying
    its bytecode's data movement (see ``setstate``); ``state`` is what was stored.
    """

    __slots__ = ("_file", "_index", "__weakref__")

    def __init__(self, file: Decoding, index: int) -> None:
        self._file = file
        self._index = index

    @property
    def index(self) -> int:
        """This object's position in the file's ivalue table."""
        return self._index

    def _field(self, name: str) -> int:
        """Field ``name`` of this object's ivalue index record (see ``ptmf_ivalue``)."""
        return int(self._file.image.index[name][self._index])

    def _type(self) -> ObjectType:
        return self._file.image.object_types()[self._field("type_index")]

    @property
    def type_name(self) -> str:
        """Qualified class name, e.g. ``"__torch__.torch.nn.modules.linear.Linear"``."""
        return self._type().name

    @property
    def kind(self) -> str:
        """``"class_with_field"``, ``"custom_class"`` or ``"class_with_setstate"``."""
        return self._type().kind

    @property
    def attributes(self) -> "AttributeMap":
        """The stored attributes by name, decoded on access; for a set-state object,
        those its ``__setstate__`` sets."""
        return AttributeMap(self)

    @property
    def state(self) -> Any:
        """What ``__getstate__`` returned, for set-state and custom-class objects."""
        return decode(self._file, self._field("state"), {})

    @property
    def setstate_function(self) -> Any:
        """The ``__setstate__`` Function of a set-state object, else None."""
        if self.kind != "class_with_setstate":
            return None
        return decode(self._file, self._field("setstate"), {})

    def _attr_names(self) -> Tuple[str, ...]:
        if self.kind == "class_with_setstate":
            return tuple(self._file.restored_attributes(self._index))
        return self._type().attr_names[:self._field("length")]

    def _tensors_and_objects(self) -> List[Tuple[str, Any]]:
        """(name, value) of the attributes holding a tensor or an object, in slot
        order (a set-state object's: in the order its ``__setstate__`` sets them)."""
        file = self._file
        if self.kind == "class_with_setstate":
            return [(k, v) for k, v in file.restored_attributes(self._index).items()
                    if isinstance(v, (np.ndarray, QuantizedTensor, Object))]
        image = file.image
        rows = image.rows()
        row = rows[self._index]
        names = image.object_types()[row.type_index].attr_names[:row.length]
        out = []
        for name, j in zip(names, image.refs(self._index, row.data, row.length,
                                             _where(self._index, OBJECT) + ".attrs")):
            attr = rows[j]
            if attr.type == TENSOR:
                out.append((name, file.tensors.tensor(attr.target)))
            elif attr.type == OBJECT:
                out.append((name, file.objects([j])[0]))
        return out

    def _get(self, name: str) -> Any:
        """The attribute's value; KeyError when the object has no such attribute."""
        file = self._file
        image = file.image
        row = image.rows()[self._index]
        if image.object_types()[row.type_index].kind == "class_with_setstate":
            return file.restored_attributes(self._index)[name]
        slot = image.slots(row.type_index).get(name)
        if slot is None or slot >= row.length:
            raise KeyError(name)
        child = image.refs(self._index, row.data + 4 * slot, 1,
                           f"{_where(self._index, OBJECT)}.attrs[{slot}]")[0]
        return decode(file, child, {})

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        try:
            return self._get(name)
        except KeyError:
            raise AttributeError(f"{self.type_name} object has no attribute {name!r}") from None

    def __dir__(self) -> List[str]:
        return sorted(set(super().__dir__()) | set(self._attr_names()))

    def __repr__(self) -> str:
        return f"<Object {self.type_name} ({self.kind}) at ivalues[{self._index}]>"

    def __reduce__(self) -> NoReturn:
        raise not_picklable("Object", "its attributes, state_dict() arrays")


class AttributeMap(Mapping[str, Any]):
    """Read-only mapping of an object's attributes; values decode on access."""

    __slots__ = ("_object",)

    def __init__(self, obj: Object) -> None:
        self._object = obj

    def __getitem__(self, name: str) -> Any:
        return self._object._get(name)

    def __iter__(self) -> Iterator[str]:
        return iter(self._object._attr_names())

    def __len__(self) -> int:
        return len(self._object._attr_names())

    def __repr__(self) -> str:
        return summary(f"AttributeMap of {self._object.type_name}", len(self), self,
                       "attribute")

    def __reduce__(self) -> NoReturn:
        raise not_picklable("AttributeMap", "dict() of it, when its values are plain")
