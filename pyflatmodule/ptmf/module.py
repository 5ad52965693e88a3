"""Opening and verifying a PTMF file, and the ``Module`` it opens as."""
from __future__ import annotations

import os
from typing import (
    Any,
    Dict,
    Iterator,
    List,
    NamedTuple,
    NoReturn,
    Optional,
    Sequence,
    Set,
    Tuple,
    Union,
    overload,
)

from ..core.dtypes import QuantizedTensor
from ..core.lazy import np
from ..core.names import NamedDict, NamedList, not_picklable
from ..core.native import format_error, lib
from ..core.options import Options
from ..core.source import Holder, Openable, check_same_file, file_identity, open_source
from .decoder import Decoder
from .functions import Function, Methods
from .index import (
    DICT,
    ENUM,
    FUNCTION,
    LIST,
    OBJECT,
    TENSOR,
    TUPLE,
    UNION_NAMES,
    ObjectType,
    PtmfIndex,
)
from .state_dict import walk_state_dict
from .tensors import TensorRecord
from .type_names import contained_type_names
from .values import Object, decode, decode_all

__all__ = ["IValues", "Module", "TensorRecords", "VerifyReport", "open_module",
           "verify_module"]

Tensor = Union["np.ndarray", QuantizedTensor]


class VerifyReport(NamedTuple):
    """What ``verify`` found in a valid file."""

    size: int
    bytecode_version: int
    ivalues: int
    tensors: int
    storages: int
    storage_bytes: int
    functions: int
    object_types: int
    tables_visited: int
    wrapped_vtables: int


def open_module(source: Openable, options: Options) -> "Module":
    """Open a PTMF model with ``options``; see :func:`pyflatmodule.load`."""
    return Module(_open_image(source, options), options)


def _open_image(source: Openable, options: Options) -> PtmfIndex:
    opened = open_source(source, options)
    try:
        return PtmfIndex(opened, options)
    finally:
        opened.release_fd()   # the descriptor kept for the index, whatever happened


def verify_module(source: Openable, options: Options) -> VerifyReport:
    """Check a whole PTMF file with ``options`` and return a short report; raise
    FormatError if it is bad. See :func:`pyflatmodule.verify`."""
    image = _open_image(source, options)
    s = image.summary
    types = image.index["type"]
    return VerifyReport(image.size, int(s.bytecode_version), int(s.n_ivalues),
                        int(np.count_nonzero(types == TENSOR)), int(s.n_storages),
                        int(image.storage_index["size"].sum()),
                        int(np.count_nonzero(types == FUNCTION)), int(s.n_object_types),
                        int(s.visited.tables), int(s.visited.wrapped_vtables))


class IValues(Sequence[Any]):
    """The file's ivalue table; ``ivalues[i]`` decodes one value on demand."""

    __slots__ = ("_file", "_image")

    def __init__(self, file: Decoder) -> None:
        self._file = file
        self._image = file.image

    def __len__(self) -> int:
        return int(self._image.summary.n_ivalues)

    @overload
    def __getitem__(self, i: int) -> Any: ...
    @overload
    def __getitem__(self, i: slice) -> List[Any]: ...

    def __getitem__(self, i: Union[int, slice]) -> Any:
        if isinstance(i, slice):
            wanted = range(*i.indices(len(self)))
            if not wanted:
                return []
            values = decode_all(self._file, max(wanted) + 1)
            return [values[j] for j in wanted]
        n = len(self)
        if i < 0:
            i += n
        if not 0 <= i < n:
            raise IndexError("ivalue index out of range")
        return self._file.value(i)

    def __iter__(self) -> Iterator[Any]:
        return iter(decode_all(self._file, len(self)))

    def type_name(self, i: int) -> str:
        """The union type stored at ``i`` (``"Int"``, ``"TensorMetadata"``, ...)."""
        return UNION_NAMES[int(self._image.index["type"][i])]

    def references(self, i: int) -> List[int]:
        """The ivalue indices value ``i`` refers to, without decoding anything: a List's
        or Tuple's items; a Dict's keys, then its values; an Object's attributes (in
        slot order) when it is a field object, else its stored state (what
        ``__getstate__`` returned); an enum's value. Other values refer to none."""
        image = self._image
        if not 0 <= i < len(self):
            raise IndexError("ivalue index out of range")
        row = image.rows()[i]
        t = row.type
        where = f"ivalues[{i}].val<{UNION_NAMES[t]}>"
        if t in (LIST, TUPLE):
            return list(image.refs(i, row.data, row.length, where + ".items"))
        if t == DICT:
            return [*image.refs(i, row.data, row.length, where + ".keys"),
                    *image.refs(i, row.values, row.length, where + ".values")]
        if t == OBJECT:
            if image.object_types()[row.type_index].kind == "class_with_field":
                return list(image.refs(i, row.data, row.length, where + ".attrs"))
            return [row.state]
        if t == ENUM:
            return [row.target]
        return []

    def __repr__(self) -> str:
        kinds, counts = np.unique(self._image.index["type"][:len(self)], return_counts=True)
        by_count = sorted(zip(counts.tolist(), kinds.tolist()), key=lambda c: -c[0])
        kinds_text = ", ".join(f"{n:,} {UNION_NAMES[k]}" for n, k in by_count)
        return f"<IValues: {len(self):,} values" + (f": {kinds_text}>" if by_count else ">")

    def __reduce__(self) -> NoReturn:
        raise not_picklable("IValues", "values read from it")


class ExtraFiles(NamedDict[bytes]):
    """Extra files by name (a ``dict`` of ``bytes``); the repr gives their sizes."""

    what = "ExtraFiles"
    unit = "file"

    def describe(self, name: str) -> str:
        """The file's name and size."""
        return f"{name} ({len(self[name]):,} bytes)"


class JitSources(NamedDict[str]):
    """TorchScript sources by qualified file name (a ``dict`` of ``str``)."""

    what = "JitSources"
    unit = "file"


class ObjectTypes(NamedList[ObjectType]):
    """The file's object types (a ``list``); the repr names a few."""

    what = "ObjectTypes"
    unit = "type"

    def name_of(self, item: ObjectType) -> str:
        """The type's qualified name."""
        return item.name


class Storages(NamedList["np.ndarray"]):
    """The file's storages as uint8 arrays (a ``list``); the repr gives their sizes."""

    what = "Storages"
    unit = "storage"

    def name_of(self, item: np.ndarray) -> str:
        """The storage's size."""
        return f"{item.nbytes:,} bytes"


class TensorRecords(NamedList[TensorRecord]):
    """The file's tensor records (a ``list``); the repr gives a few dtypes and shapes."""

    what = "TensorRecords"
    unit = "tensor"

    def name_of(self, item: TensorRecord) -> str:
        """The record's dtype and shape."""
        return f"{item.dtype}{list(item.shape)}"


class Module(Holder):
    """An open PTMF file. Every array and proxy it hands out keeps the file's memory
    alive by itself; ``close()`` only drops the module's own hold."""

    def __init__(self, image: PtmfIndex, options: Options) -> None:
        self._file: Optional[Decoder] = Decoder(image)
        #: The options it was opened with: what re-opening the file in another process takes.
        self._options = options
        #: state_dict()'s result, kept when the bytes cannot change.
        self._state_dict: Optional[Dict[str, Tensor]] = None

    # -------------------------------------------------------------- lifetime

    def _decoder(self) -> Decoder:
        file = self._file
        if file is None:
            raise ValueError("operation on a closed pyflatmodule.Module")
        return file

    def _img(self) -> PtmfIndex:
        return self._decoder().image

    def close(self) -> None:
        """Drop this module's hold on the file; arrays and proxies taken earlier stay valid."""
        self._file = None
        self._state_dict = None

    def check(self) -> Optional[str]:
        """None while the file on disk is the one that was opened; otherwise what
        changed (replaced, truncated, modified). Cheap: one ``stat``. Sources not
        opened from a path always give None. Load with ``copy=True`` when files may
        change under a reader."""
        return self._img().source.changed()

    @property
    def closed(self) -> bool:
        """True once ``close()`` was called."""
        return self._file is None

    @property
    def _load_args(self) -> Dict[str, Any]:
        """The options it was opened with, as ``load()``'s keyword arguments."""
        return self._options.keywords()

    def __repr__(self) -> str:
        if self._file is None:
            return "<pyflatmodule.Module (closed)>"
        return (f"<pyflatmodule.Module {self._file.image.source.name!r}, "
                f"{len(self.ivalues)} ivalues>")

    def __reduce__(self) -> Tuple[Any, Tuple[str, Dict[str, Any], Tuple[int, int, int]]]:
        """A Module opened from a path pickles as that path, ``load()``'s arguments
        and the file's identity (size, mtime, inode): unpickling checks that the path
        still holds the same file and opens it again with the same arguments, so
        with the same verification. The mapping itself cannot be sent to another
        process."""
        source = self._img().source
        if source.path is None or source.stat is None:
            raise TypeError(
                f"cannot pickle a pyflatmodule.Module opened from {source.name}: only a "
                "Module opened from a path can be pickled (as the path, to be re-opened "
                "where it is unpickled); pass the path to load(), or send the bytes and "
                "load() them in the other process")
        return _reopen, (source.path, self._load_args, file_identity(source.stat))

    # -------------------------------------------------------------- header

    @property
    def bytecode_version(self) -> int:
        """The file's bytecode version (9 for files torch writes today)."""
        return int(self._img().summary.bytecode_version)

    @property
    def operator_version(self) -> int:
        """The operator version the file was written with."""
        return int(self._img().summary.operator_version)

    @property
    def size(self) -> int:
        """Size of the buffer in bytes."""
        return self._img().size

    @property
    def extra_files(self) -> ExtraFiles:
        """Extra files stored with the model, name to raw content."""
        image = self._img()
        s = image.summary
        return ExtraFiles((name, bytes(image.view[pos:pos + size]))
                          for name, pos, size in image.named_blobs(s.extra_files,
                                                                   s.n_extra_files,
                                                                   "extra_files"))

    @property
    def jit_sources(self) -> JitSources:
        """TorchScript source text per qualified file name (empty for mobile-only files)."""
        return JitSources(self._img().jit_sources())

    @property
    def methods(self) -> Methods:
        """The module's exported methods, keyed by qualified name; a short name
        (``methods["forward"]``) finds the one method it ends when unambiguous."""
        file = self._decoder()
        image = file.image
        s = image.summary
        out = []
        for k, j in enumerate(image.u32s(s.methods, s.n_methods)):
            f = decode(file, j, {}) if j < s.n_ivalues else None
            if not isinstance(f, Function):
                raise format_error(lib.FB_E_KIND_MISMATCH, int(s.methods) + 4 * k,
                                   f"methods[{k}]", "method is not a Function")
            out.append(f)
        return Methods(out)

    @property
    def root(self) -> Object:
        """The root module object."""
        file = self._decoder()
        image = file.image
        i = int(image.summary.state_obj)
        if image.index["type"][i] != OBJECT:
            raise format_error(lib.FB_E_KIND_MISMATCH, int(image.summary.root), "state_obj",
                               "state_obj is not an Object")
        return file.objects([i])[0]

    @property
    def ivalues(self) -> IValues:
        """Every value in the file, decoded on demand."""
        return IValues(self._decoder())

    @property
    def object_types(self) -> ObjectTypes:
        """The type table: (name, kind, attr_names) per entry."""
        return ObjectTypes(self._img().object_types())

    @property
    def storages(self) -> Storages:
        """Each storage as a read-only uint8 array over the file, zero-copy."""
        image = self._img()
        return Storages(image.storage(i) for i in range(image.storage_count()))

    def functions(self) -> List[Function]:
        """Every Function in the file (methods, ``__setstate__``, helpers), in file order."""
        file = self._decoder()
        return file.functions(np.flatnonzero(file.image.index["type"] == FUNCTION).tolist())

    # -------------------------------------------------------------- tensors

    @property
    def tensor_records(self) -> TensorRecords:
        """Every tensor record of the file, as it describes each tensor: torch's dtype,
        shape, strides, storage and where it lies in the file (see ``TensorRecord``).
        ``record.ivalue`` decodes, through ``ivalues``, to the tensor itself."""
        return TensorRecords(self._decoder().tensors.records())

    def tensor_record(self, tensor: Tensor) -> Optional[TensorRecord]:
        """The record a tensor taken from this module (``state_dict()``, an attribute,
        ``ivalues``) was made from; None for any other array. Tells apart what the
        array cannot: torch dtypes that share a numpy dtype (``uint8``, ``bits8``,
        ``uint3``...), the storage, the strides in elements."""
        tensors = self._decoder().tensors
        t = tensors.record_of(tensor)
        return None if t is None else tensors.records()[t]

    def state_dict(self) -> Dict[str, Tensor]:
        """Parameters and buffers by dotted name, as torch's ``state_dict()`` gives them.

        With ``jit_sources`` the classes' ``__parameters__``/``__buffers__`` decide,
        exactly as torch does; without them every tensor attribute reachable through
        field objects is listed by its attribute path. A file written by
        ``torch._C._save_parameters`` gives the dictionary it saved.

        The walk runs once per module when the bytes cannot change (a path, ``bytes``):
        later calls return a new dict of the same arrays.
        """
        file = self._decoder()
        kept = self._state_dict
        if kept is not None:
            return dict(kept)
        out = walk_state_dict(file, self.root)
        if file.image.immutable:
            # The walk's result depends only on bytes nobody can change: kept, and
            # each call gets its own dict.
            self._state_dict = out
            return dict(out)
        return out

    # -------------------------------------------------------------- info

    def info(self) -> Dict[str, Any]:
        """What torch's ``get_flatbuffer_module_info`` reports, with sets for names."""
        file = self._decoder()
        s = file.image.summary
        limit = int(s.mobile_ivalue_size)
        if limit == 0 or limit > s.n_ivalues:
            limit = int(s.n_ivalues)
        names: Set[str] = set()
        ops: Dict[str, int] = {}
        annotations: List[str] = []
        for f in file.functions(np.flatnonzero(file.image.index["type"][:limit]
                                               == FUNCTION).tolist()):
            names.add(f.name)
            for op in f.operators:
                ops[op.full_name] = -1 if op.num_args is None else op.num_args
            annotations.extend(f.type_annotations)
        return {"bytecode_version": int(s.bytecode_version),
                "operator_version": int(s.operator_version),
                "function_names": names,
                "type_names": contained_type_names(annotations),
                "opname_to_num_args": ops}


def _reopen(path: str, load_args: Dict[str, Any], identity: Tuple[int, int, int]) -> Module:
    """Unpickle a Module: check that ``path`` is still the file that was pickled, then
    open it again with the same options (checked again once open: the stat of what
    was actually opened)."""
    check_same_file(path, identity, os.stat(path), "Module")
    module = open_module(path, Options(**load_args))
    st = module._img().source.stat
    assert st is not None   # a path always has one
    try:
        check_same_file(path, identity, st, "Module")
    except OSError:
        module.close()
        raise
    return module
