"""torch.save archives read without torch and without Python's unpickler.

An archive is a zip (:mod:`~pyflatmodule.core.zipview`) holding ``<name>/data.pkl``, a
pickle of the saved object, and ``<name>/data/<key>``, one storage per key, stored
uncompressed (beside them ``byteorder``, ``version``, ``.format_version``). The pickle is
interpreted here by a restricted reader: the opcodes that build plain values (None,
bools, ints, floats, strings, bytes, tuples, lists, dicts), and of the globals only those
torch.save writes for tensors:

- ``torch._utils._rebuild_tensor_v2`` (storage, offset, size, stride, requires_grad,
  hooks[, metadata]) and ``_rebuild_tensor_v3`` (the same and a dtype), and
  ``_rebuild_parameter`` (tensor, requires_grad, hooks);
- ``collections.OrderedDict`` (called with no arguments; the state a ``BUILD`` gives it,
  a state dict's ``_metadata``, is dropped);
- the storage types torch names in a storage's persistent id,
  ``('storage', storage_type, key, location, numel)``: ``torch.<Type>Storage`` (the
  legacy typed storages) or ``torch.storage.UntypedStorage`` with a ``torch.<dtype>``.

Anything else (another global, a call of anything but those three, ``NEWOBJ``, ``INST``,
``OBJ``, extensions, text-mode persistent ids) is refused with a FormatError
(``refused``) before it is acted on: nothing in the file is ever imported or called.
Tensors come out as read-only numpy arrays viewing the storage's bytes in place, with
torch's dtype, shape, strides and storage offset, each extent checked against its
storage; tensors sharing a storage share memory.
"""
from __future__ import annotations

import collections
import pickletools
import reprlib
import struct
from typing import Any, Dict, List, NamedTuple, Optional, Tuple

from ..errors import FormatError
from .dtypes import DTYPE_NAMES, PACKED, numpy_dtype
from .lazy import np
from .native import format_error, lib
from .zipview import ZipView

__all__ = ["TorchSave", "is_zip", "read_torch_save"]

#: The most dimensions a tensor may have.
MAX_DIMS = 64
#: The most bytes a data.pkl may hold.
MAX_PICKLE = 1 << 30

#: The legacy typed storages torch names in persistent ids, by their dtype's name.
_LEGACY = {"DoubleStorage": "float64", "FloatStorage": "float32", "HalfStorage": "float16",
           "LongStorage": "int64", "IntStorage": "int32", "ShortStorage": "int16",
           "CharStorage": "int8", "ByteStorage": "uint8", "BoolStorage": "bool",
           "BFloat16Storage": "bfloat16", "ComplexDoubleStorage": "complex128",
           "ComplexFloatStorage": "complex64"}
#: The callables a REDUCE may call.
_CALLS = frozenset({("torch._utils", "_rebuild_tensor_v2"),
                    ("torch._utils", "_rebuild_tensor_v3"),
                    ("torch._utils", "_rebuild_parameter"),
                    ("collections", "OrderedDict")})
_UNTYPED = ("torch.storage", "UntypedStorage")


class _Global(NamedTuple):
    """A global the pickle named, and may name: never imported, only recognised."""

    module: str
    name: str


def _allowed(module: str, name: str) -> bool:
    return ((module, name) in _CALLS or (module, name) == _UNTYPED
            or (module == "torch" and (name in _LEGACY or name in DTYPE_NAMES)))


class _Storage(NamedTuple):
    """One storage: its bytes and what its persistent id said of it."""

    data: memoryview
    dtype: Optional[np.dtype]   #: None for an untyped storage (bytes, typed by the tensor)
    numel: int
    key: str


class _Mark:
    """The stack's MARK."""


_MARK = _Mark()
_OPCODES = {op.code.encode("latin-1"): op.name for op in pickletools.opcodes}


def is_zip(view: memoryview) -> bool:
    """True when ``view`` starts as a zip archive does."""
    return bytes(view[:4]) == b"PK\x03\x04"


class TorchSave:
    """A torch.save archive in ``view`` (``where`` names it in errors; ``base``: its
    offset in the file)."""

    def __init__(self, view: memoryview, where: str, base: int = 0) -> None:
        self.zip = ZipView(view, where, base)
        pickles = [m.name for m in self.zip if m.name.endswith("/data.pkl")
                   and m.name.count("/") == 1]
        if len(pickles) != 1:
            raise self.zip.error(0, "not a torch.save archive: "
                                 + ("no <name>/data.pkl" if not pickles else
                                    f"{len(pickles)} <name>/data.pkl records"),
                                 lib.TS_E_MISSING_RECORD)
        self.record = pickles[0]
        self.prefix = self.record[:-len("data.pkl")]
        self.big_endian = False
        if self.prefix + "byteorder" in self.zip.members:
            order = bytes(self.zip.read(self.prefix + "byteorder", limit=16))
            if order not in (b"little", b"big"):
                raise self.zip.error(self.zip.members[self.prefix + "byteorder"].offset,
                                     f"byteorder {order!r} is neither little nor big",
                                     lib.TS_E_BAD_PICKLE, self.prefix + "byteorder")
            self.big_endian = order == b"big"
        self._storages: Dict[str, _Storage] = {}

    def load(self) -> Any:
        """The saved object, tensors as read-only arrays."""
        m = self.zip.members[self.record]
        return _Unpickler(self, self.zip.read(self.record, limit=MAX_PICKLE), m.offset).run()

    # ------------------------------------------------------------ storages, tensors

    def storage(self, pid: Any, at: int) -> _Storage:
        """The storage a persistent id names."""
        if (not isinstance(pid, tuple) or len(pid) != 5 or pid[0] != "storage"
                or not isinstance(pid[1], _Global) or not isinstance(pid[2], str)
                or not isinstance(pid[3], str) or type(pid[4]) is not int or pid[4] < 0):
            raise self.fault(at, f"persistent id {_short(pid)} is not ('storage', "
                                 f"storage type, key, location, numel)")
        kind, key, numel = pid[1], pid[2], pid[4]
        if (kind.module, kind.name) == _UNTYPED:
            dtype: Optional[np.dtype] = None
            itemsize = 1
        elif kind.module == "torch" and kind.name in _LEGACY:
            dtype = self._dtype(_LEGACY[kind.name], at)
            itemsize = dtype.itemsize
        else:
            raise self.fault(at, f"{kind.module}.{kind.name} is no storage type",
                             lib.TS_E_REFUSED)
        found = self._storages.get(key)
        if found is not None:
            return found
        name = f"{self.prefix}data/{key}"
        if name not in self.zip.members:
            raise self.fault(at, f"storage {key!r} names record {name!r}, which the "
                                 f"archive lacks", lib.TS_E_MISSING_RECORD)
        data = self.zip.read(name)
        if len(data) < numel * itemsize:
            raise self.fault(at, f"storage {key!r} holds {len(data)} bytes, fewer than "
                                 f"its {numel} elements of {itemsize} bytes",
                             lib.FB_E_OUTSIDE_STORAGE)
        self._storages[key] = _Storage(data[:numel * itemsize], dtype, numel, key)
        return self._storages[key]

    def _dtype(self, name: str, at: int) -> np.dtype:
        scalar_type = DTYPE_NAMES.index(name)
        if scalar_type in PACKED or name in ("qint8", "quint8", "qint32"):
            raise self.fault(at, f"tensors of dtype {name} are not read here",
                             lib.TS_E_REFUSED)
        dtype = numpy_dtype(scalar_type)
        if self.big_endian and dtype.itemsize > 1:
            if dtype.kind not in "biufc":
                raise self.fault(at, f"big-endian {name} tensors are not read here",
                                 lib.TS_E_REFUSED)
            dtype = dtype.newbyteorder(">")
        return dtype

    def tensor(self, args: Tuple[Any, ...], dtype_name: Optional[str], at: int) -> np.ndarray:
        """``_rebuild_tensor_v2``'s (or v3's, with ``dtype_name``) tensor."""
        storage, offset, size, stride = args[:4]
        if not isinstance(storage, _Storage):
            raise self.fault(at, f"tensor's storage is {_short(storage)}, not a storage")
        if not (_ints(size) and _ints(stride) and type(offset) is int):
            raise self.fault(at, f"tensor's offset {_short(offset)}, size {_short(size)} "
                                 f"and stride {_short(stride)} are not an int and tuples "
                                 f"of ints")
        if len(size) != len(stride) or len(size) > MAX_DIMS:
            raise self.fault(at, f"tensor has {len(size)} sizes and {len(stride)} strides "
                                 f"(at most {MAX_DIMS})", lib.FB_E_LENGTH_MISMATCH)
        if offset < 0 or any(s < 0 for s in size) or any(s < 0 for s in stride):
            raise self.fault(at, f"tensor's offset {offset}, size {size} or stride "
                                 f"{stride} is negative", lib.FB_E_NEGATIVE_DIMENSION)
        if dtype_name is not None:
            dtype = self._dtype(dtype_name, at)
        elif storage.dtype is not None:
            dtype = storage.dtype
        else:
            raise self.fault(at, "an untyped storage's tensor names no dtype")
        nbytes = len(storage.data)
        if storage.dtype is None and nbytes % dtype.itemsize:
            raise self.fault(at, f"storage {storage.key!r}'s {nbytes} bytes are no whole "
                                 f"number of {dtype.itemsize}-byte elements",
                             lib.FB_E_OUTSIDE_STORAGE)
        numel = nbytes // dtype.itemsize
        if 0 not in size:
            last = offset + sum((n - 1) * s for n, s in zip(size, stride))
            if last >= numel:
                raise self.fault(at, f"tensor (offset {offset}, size {list(size)}, stride "
                                     f"{list(stride)}) reaches element {last} of storage "
                                     f"{storage.key!r}, which holds {numel}",
                                 lib.FB_E_OUTSIDE_STORAGE)
            buffer, start = storage.data, offset * dtype.itemsize
        else:
            buffer, start = storage.data[:0], 0
        array = np.ndarray(tuple(size), dtype, buffer=buffer, offset=start,
                           strides=tuple(s * dtype.itemsize for s in stride))
        array.flags.writeable = False
        return array

    def fault(self, at: int, why: str, status: int = lib.TS_E_BAD_PICKLE) -> FormatError:
        """A FormatError at byte ``at`` of the archive, in its pickle."""
        return format_error(status, self.zip.base + at, f"{self.zip.where}.{self.record}",
                            f"torch.save pickle: {why}")


def _ints(value: Any) -> bool:
    return isinstance(value, tuple) and all(type(v) is int for v in value)


#: Reprs in messages: a few levels and items deep, whatever the pickle nests.
_REPR = reprlib.Repr()
_REPR.maxlevel, _REPR.maxstring, _REPR.maxother = 3, 60, 60


def _short(value: Any) -> str:
    text = _REPR.repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


class _Unpickler:
    """The restricted pickle machine over ``data`` (at ``start`` in the archive)."""

    def __init__(self, archive: TorchSave, data: memoryview, start: int) -> None:
        self.archive = archive
        self.data = data
        self.start = start
        self.pos = 0
        self.op_at = 0
        self.stack: List[Any] = []
        self.marks: List[int] = []
        self.memo: Dict[int, Any] = {}

    def fault(self, why: str, status: int = lib.TS_E_BAD_PICKLE) -> FormatError:
        return self.archive.fault(self.start + self.op_at, why, status)

    def take(self, n: int) -> memoryview:
        if n < 0 or self.pos + n > len(self.data):
            raise self.fault(f"opcode's {n} bytes of argument reach past the pickle's end")
        out = self.data[self.pos:self.pos + n]
        self.pos += n
        return out

    def uint(self, n: int) -> int:
        return int.from_bytes(self.take(n), "little")

    def pop(self) -> Any:
        if not self.stack or (self.marks and len(self.stack) == self.marks[-1]):
            raise self.fault("pops a value the stack does not hold")
        return self.stack.pop()

    def pop_mark(self) -> List[Any]:
        if not self.marks:
            raise self.fault("no MARK to pop to")
        at = self.marks.pop()
        items = self.stack[at:]
        del self.stack[at:]
        return items

    def top(self) -> Any:
        if not self.stack or (self.marks and len(self.stack) == self.marks[-1]):
            raise self.fault("reads a value the stack does not hold")
        return self.stack[-1]

    def text(self, n: int) -> str:
        try:
            return str(self.take(n), "utf-8")
        except UnicodeDecodeError as e:
            raise self.fault(f"string is not UTF-8 ({e.reason})") from None

    def run(self) -> Any:
        while True:
            self.op_at = self.pos
            code = bytes(self.take(1))
            name = _OPCODES.get(code)
            if name is None:
                raise self.fault(f"byte {code!r} is no pickle opcode")
            handler = getattr(self, "op_" + name, None)
            if handler is None:
                raise self.fault(f"opcode {name} is not one torch.save writes for tensors",
                                 lib.TS_E_REFUSED)
            if name == "STOP":
                value = self.pop()
                if self.stack or self.marks:
                    raise self.fault("STOP leaves values on the stack")
                return value
            handler()

    # ------------------------------------------------------------ framing, stack
    def op_PROTO(self) -> None:
        if self.uint(1) > 5:
            raise self.fault("pickle protocol is over 5")

    def op_FRAME(self) -> None:
        self.uint(8)

    def op_STOP(self) -> None:   # handled by run()
        pass

    def op_MARK(self) -> None:
        self.marks.append(len(self.stack))

    def op_POP(self) -> None:
        self.pop()

    def op_POP_MARK(self) -> None:
        self.pop_mark()

    def op_DUP(self) -> None:
        self.stack.append(self.top())

    # ------------------------------------------------------------ memo
    def _put(self, index: int) -> None:
        self.memo[index] = self.top()

    def _get(self, index: int) -> None:
        if index not in self.memo:
            raise self.fault(f"memo entry {index} was never put")
        self.stack.append(self.memo[index])

    def op_BINPUT(self) -> None:
        self._put(self.uint(1))

    def op_LONG_BINPUT(self) -> None:
        self._put(self.uint(4))

    def op_MEMOIZE(self) -> None:
        self._put(len(self.memo))

    def op_BINGET(self) -> None:
        self._get(self.uint(1))

    def op_LONG_BINGET(self) -> None:
        self._get(self.uint(4))

    # ------------------------------------------------------------ scalars
    def op_NONE(self) -> None:
        self.stack.append(None)

    def op_NEWTRUE(self) -> None:
        self.stack.append(True)

    def op_NEWFALSE(self) -> None:
        self.stack.append(False)

    def op_BININT(self) -> None:
        self.stack.append(int.from_bytes(self.take(4), "little", signed=True))

    def op_BININT1(self) -> None:
        self.stack.append(self.uint(1))

    def op_BININT2(self) -> None:
        self.stack.append(self.uint(2))

    def op_LONG1(self) -> None:
        n = self.uint(1)
        if n > 9:
            raise self.fault(f"a {n}-byte integer is over 64 bits")
        self.stack.append(int.from_bytes(self.take(n), "little", signed=True))

    def op_BINFLOAT(self) -> None:
        self.stack.append(struct.unpack(">d", self.take(8))[0])

    def op_BINUNICODE(self) -> None:
        self.stack.append(self.text(self.uint(4)))

    def op_SHORT_BINUNICODE(self) -> None:
        self.stack.append(self.text(self.uint(1)))

    def op_BINUNICODE8(self) -> None:
        self.stack.append(self.text(self.uint(8)))

    def op_BINBYTES(self) -> None:
        self.stack.append(bytes(self.take(self.uint(4))))

    def op_SHORT_BINBYTES(self) -> None:
        self.stack.append(bytes(self.take(self.uint(1))))

    def op_BINBYTES8(self) -> None:
        self.stack.append(bytes(self.take(self.uint(8))))

    # ------------------------------------------------------------ containers
    def op_EMPTY_TUPLE(self) -> None:
        self.stack.append(())

    def op_TUPLE(self) -> None:
        self.stack.append(tuple(self.pop_mark()))

    def _tuple(self, n: int) -> None:
        items = [self.pop() for _ in range(n)][::-1]
        self.stack.append(tuple(items))

    def op_TUPLE1(self) -> None:
        self._tuple(1)

    def op_TUPLE2(self) -> None:
        self._tuple(2)

    def op_TUPLE3(self) -> None:
        self._tuple(3)

    def op_EMPTY_LIST(self) -> None:
        self.stack.append([])

    def op_LIST(self) -> None:
        self.stack.append(self.pop_mark())

    def op_EMPTY_DICT(self) -> None:
        self.stack.append({})

    def op_DICT(self) -> None:
        self.stack.append(self._pairs(self.pop_mark(), {}))

    def _list(self) -> List[Any]:
        target = self.top()
        if not isinstance(target, list):
            raise self.fault(f"appends to {type(target).__name__}, not a list")
        return target

    def op_APPEND(self) -> None:
        value = self.pop()
        self._list().append(value)

    def op_APPENDS(self) -> None:
        items = self.pop_mark()
        self._list().extend(items)

    def _pairs(self, items: List[Any], target: Any) -> Any:
        if not isinstance(target, dict):
            raise self.fault(f"sets items of {type(target).__name__}, not a dict")
        if len(items) % 2:
            raise self.fault("an odd number of values for keys and values")
        for k, v in zip(items[0::2], items[1::2]):
            if not isinstance(k, (str, int, float, bytes, bool, tuple, type(None))):
                raise self.fault(f"dict key {_short(k)} is not a plain value")
            try:
                target[k] = v
            except TypeError as e:
                raise self.fault(f"dict key {_short(k)}: {e}") from None
        return target

    def op_SETITEM(self) -> None:
        value = self.pop()
        key = self.pop()
        self._pairs([key, value], self.top())

    def op_SETITEMS(self) -> None:
        items = self.pop_mark()
        self._pairs(items, self.top())

    # ------------------------------------------------------------ globals, calls
    def _global(self, module: str, name: str) -> None:
        if not _allowed(module, name):
            raise self.fault(f"global {module}.{name} is not one torch.save writes for "
                             f"tensors", lib.TS_E_REFUSED)
        self.stack.append(_Global(module, name))

    def op_GLOBAL(self) -> None:
        parts = []
        for _ in range(2):
            end = bytes(self.data[self.pos:self.pos + 256]).find(b"\n")
            if end < 0:
                raise self.fault("GLOBAL's names are not two lines")
            parts.append(self.text(end))
            self.pos += 1
        self._global(parts[0], parts[1])

    def op_STACK_GLOBAL(self) -> None:
        name = self.pop()
        module = self.pop()
        if not isinstance(module, str) or not isinstance(name, str):
            raise self.fault("STACK_GLOBAL's module and name are not strings")
        self._global(module, name)

    def op_BINPERSID(self) -> None:
        self.stack.append(self.archive.storage(self.pop(), self.start + self.op_at))

    def op_REDUCE(self) -> None:
        args = self.pop()
        func = self.pop()
        if not isinstance(func, _Global) or (func.module, func.name) not in _CALLS:
            raise self.fault(f"calls {_short(func)}, which is not one of "
                             f"{sorted('.'.join(c) for c in _CALLS)}", lib.TS_E_REFUSED)
        if not isinstance(args, tuple):
            raise self.fault(f"{func.name}'s arguments are not a tuple")
        self.stack.append(self._call(func.name, args))

    def _call(self, name: str, args: Tuple[Any, ...]) -> Any:
        at = self.start + self.op_at
        if name == "OrderedDict":
            if args:
                raise self.fault("OrderedDict is called with arguments", lib.TS_E_REFUSED)
            return collections.OrderedDict()
        if name == "_rebuild_parameter":
            if len(args) != 3 or not isinstance(args[0], np.ndarray):
                raise self.fault("_rebuild_parameter takes a tensor, requires_grad and "
                                 "hooks")
            return args[0]
        if name == "_rebuild_tensor_v2":
            if len(args) not in (6, 7):
                raise self.fault(f"_rebuild_tensor_v2 takes 6 or 7 arguments, not "
                                 f"{len(args)}")
            return self.archive.tensor(args, None, at)
        if len(args) not in (7, 8) or not isinstance(args[6], _Global) \
                or args[6].module != "torch" or args[6].name not in DTYPE_NAMES:
            raise self.fault("_rebuild_tensor_v3 takes 7 or 8 arguments, the 7th a "
                             "torch dtype")
        return self.archive.tensor(args, args[6].name, at)

    def op_BUILD(self) -> None:
        state = self.pop()
        target = self.top()
        if not isinstance(target, collections.OrderedDict) \
                or not isinstance(state, (dict, type(None))):
            raise self.fault(f"BUILD sets the state of {type(target).__name__}: only an "
                             f"OrderedDict's attributes (a state dict's _metadata) are "
                             f"taken", lib.TS_E_REFUSED)


def read_torch_save(view: memoryview, where: str, base: int = 0) -> Any:
    """The object the torch.save archive in ``view`` holds (:class:`TorchSave`)."""
    return TorchSave(view, where, base).load()
