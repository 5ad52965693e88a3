"""What an ExecuTorch program and data file share: the mapping, the C index of tensor
records and named data, the tensors' layouts, the file's lifetime."""
from __future__ import annotations

import abc
import math
import struct
from typing import Any, Dict, Iterator, List, Mapping, NamedTuple, Optional, Sequence, Tuple

from ..core.dtypes import itemsize, numpy_dtype, scalar_type_name
from ..core.fbread import Schema, Table, decode_text, schema_at
from ..core.lazy import np
from ..core.native import c_buffer, check, ffi, lib, new_error
from ..core.options import Options
from ..core.remote import RemoteStats
from ..core.source import Bytes, Holder, Source, Span, file_identity
from .native_code import IMAGE_HEAD, NativeImage, find_native_code


def dim_order_strides(itemsize: int, sizes: Sequence[int], order: Sequence[int]
                      ) -> Tuple[int, ...]:
    """Byte strides of a dense tensor of ``sizes`` whose dim_order is ``order``: the last
    dimension of the order is innermost, each one before it steps over the next."""
    strides = [0] * len(sizes)
    step = itemsize
    for d in reversed(order):
        strides[d] = step
        step *= max(1, sizes[d])
    return tuple(strides)


def dim_order_view(buf: Any, scalar_type: int, sizes: Sequence[int], order: Sequence[int],
                   offset: int) -> np.ndarray:
    """The read-only view of the tensor at ``buf[offset:]`` with ExecuTorch scalar type
    ``scalar_type``, its strides from its dim_order (the caller proved the extent)."""
    dtype = numpy_dtype(scalar_type)
    out = np.ndarray(tuple(sizes), dtype, buffer=buf, offset=offset,
                     strides=dim_order_strides(dtype.itemsize, sizes, order))
    out.flags.writeable = False
    return out


class StoredTensor(NamedTuple):
    """A tensor stored in a file: where its bytes start and its layout, nothing read. Its
    array is made when asked for (a view of the mapping; for a remote file, of its bytes
    fetched then), and stays readable after the file that gave it is closed."""

    source: Source
    scalar_type: int
    sizes: Tuple[int, ...]
    order: Tuple[int, ...]
    start: int

    @property
    def dtype(self) -> np.dtype:
        """Its numpy dtype."""
        return numpy_dtype(self.scalar_type)

    @property
    def shape(self) -> Tuple[int, ...]:
        """Its sizes, as the array's shape."""
        return self.sizes

    @property
    def strides(self) -> Tuple[int, ...]:
        """The array's byte strides (from the dim order)."""
        return dim_order_strides(self.dtype.itemsize, self.sizes, self.order)

    @property
    def nbytes(self) -> int:
        """Its bytes."""
        return math.prod(self.sizes) * itemsize(self.scalar_type)

    @property
    def address(self) -> int:
        """Where its bytes are in memory for a local file (the mapping's address plus its
        offset: two tensors at one address of one size read the same bytes); for a
        remote file, a number as unique."""
        return self.source.address(self.start)

    def array(self) -> np.ndarray:
        """The read-only array."""
        if self.source.remote is not None:
            return dim_order_view(self.source.read(self.start, self.nbytes), self.scalar_type,
                                  self.sizes, self.order, 0)
        return dim_order_view(self.source.obj, self.scalar_type, self.sizes, self.order,
                              self.start)


class NamedData(Mapping[str, memoryview]):
    """A file's named data by key, each entry's bytes read when it is looked up (a view of
    the mapping; a remote file's fetched then)."""

    __slots__ = ("_spans",)

    def __init__(self, spans: Dict[str, Span]) -> None:
        self._spans = spans

    def __getitem__(self, key: str) -> memoryview:
        return self._spans[key][:]

    def __iter__(self) -> Iterator[str]:
        return iter(self._spans)

    def __len__(self) -> int:
        return len(self._spans)

    def size(self, key: str) -> int:
        """The bytes of entry ``key``, without reading them."""
        return len(self._spans[key])

    def __repr__(self) -> str:
        return f"<NamedData of {len(self)}>"


class _File(Holder, abc.ABC):
    """What a program and a data file share: the mapping, the index, named data."""

    def __init__(self, source: Source, summary: Any, options: Options) -> None:
        self._source: Optional[Source] = source
        self._summary = summary
        self._options = options
        self._schema: Schema = schema_at(lib.et_schema(summary))
        self._records: Optional[List[Any]] = None   # et_record of each tensor
        self._blobs: Optional[List[Any]] = None     # et_blob of each named data entry
        self._c_index: Tuple[Any, ...] = ()         # owns them (items do not keep it alive)
        self._by_value: Optional[Dict[Tuple[int, int], int]] = None
        #: the path and identity of the file opened from a path, None otherwise (kept
        #: after close: a program pickles its data files by them)
        self.origin: Optional[Tuple[str, Tuple[int, int, int]]] = (
            (source.path, file_identity(source.stat))
            if source.path is not None and source.stat is not None else None)

    @property
    def _buf(self) -> Any:
        if self._source is None:
            raise ValueError(f"operation on a closed pyflatmodule.{type(self).__name__}")
        return self._source.obj

    @property
    def _root(self) -> Table:
        return Table(self._schema, self._buf, int(self._summary.root), self._schema.root)

    def _index(self) -> Tuple[List[Any], List[Any]]:
        """The C index (tensor records, named data records: cffi structs, whose fields read
        as ints without numpy), read once; a program checks its plans first
        (:meth:`Program._index`)."""
        return self._read_index()

    def _read_index(self) -> Tuple[List[Any], List[Any]]:
        """The C index, without the plan check a program's :meth:`_index` adds: the path
        of that check itself (its plans' C checks passed first)."""
        if self._records is None or self._blobs is None:
            s = self._summary
            tensors = ffi.new("et_record[]", max(1, s.n_tensors))
            blobs = ffi.new("et_blob[]", max(1, s.n_blobs))
            err = new_error()
            buf = self._buf
            check(lib.et_index(c_buffer(buf), self._source.held if self._source else 0, s,
                               tensors, blobs, err), err)
            self._c_index = (tensors, blobs)
            self._records = ffi.unpack(tensors, s.n_tensors)
            self._blobs = ffi.unpack(blobs, s.n_blobs)
        return self._records, self._blobs

    def _stored_as(self, stored: int) -> List[Any]:
        """The tensor records whose bytes are where ``stored`` (an ``ET_STORED_*``) says,
        in file order."""
        return [r for r in self._index()[0] if r.stored == stored]

    def _bytes(self, start: int, size: int) -> memoryview:
        """Read-only bytes of the file: a view of the mapping (a copy for a remote file)."""
        if self._source is None:
            raise ValueError(f"operation on a closed pyflatmodule.{type(self).__name__}")
        return self._source.read(start, size)

    def _name(self, r: Any) -> str:
        """A tensor record's name (fully qualified name, or data file key)."""
        return decode_text(self._buf, r.name, r.name_len)

    def _layout(self, r: Any) -> Tuple[str, Tuple[int, ...], Tuple[int, ...]]:
        """A record's dtype name, sizes and dim_order (the default order when absent)."""
        buf = self._buf
        n = r.ndim
        sizes = struct.unpack_from(f"<{n}i", buf, r.sizes) if n else ()
        order = (tuple(bytes(memoryview(buf)[r.dim_order:r.dim_order + n]))
                 if r.dim_order else tuple(range(n)))
        return scalar_type_name(r.scalar_type), sizes, order

    def _stored(self, r: Any) -> "StoredTensor":
        """Where a record's bytes are, with its layout (nothing read)."""
        if self._source is None:
            raise ValueError(f"operation on a closed pyflatmodule.{type(self).__name__}")
        _, sizes, order = self._layout(r)
        return StoredTensor(self._source, r.scalar_type, sizes, order, r.data)

    def _array(self, r: Any) -> np.ndarray:
        """The read-only view of a record's bytes (of a copy, for a remote file)."""
        return self._stored(r).array()

    @property
    def named_data(self) -> "NamedData":
        """Named data by key: read-only bytes of the mapping (of a remote file: fetched
        when an entry is looked up); ``named_data.size(key)`` reads nothing."""
        self._index()
        return NamedData(self._named_spans())

    def _named_spans(self) -> Dict[str, Span]:
        """Named data by key, as spans of the file (read when sliced)."""
        _, blobs = self._read_index()
        return {decode_text(self._buf, b.key, b.key_len): self._span(b.data, b.size)
                for b in blobs}

    def native_code(self) -> List[NativeImage]:
        """Every executable image (ELF, Mach-O, PE) that starts a named data entry or, in a
        program, a delegate payload: code the runtime may load and run
        (:mod:`pyflatmodule.executorch.native_code`). ``verify(strict=True)`` refuses a
        file that holds any."""
        blobs = self._native_blobs()
        if self._source is not None:   # their first bytes, fetched together if remote
            self._source.prefetch((start, min(len(data), IMAGE_HEAD))
                                  for _, start, data in blobs)
        return find_native_code(blobs)

    def _native_blobs(self) -> List[Tuple[str, int, Bytes]]:
        """(where, file offset, bytes) of everything that may hold native code."""
        _, blobs = self._index()
        return [(f"named_data[{decode_text(self._buf, b.key, b.key_len)!r}]", b.data,
                 self._span(b.data, b.size)) for b in blobs]

    def _span(self, start: int, size: int) -> Span:
        """Bytes of the file read only as far as they are sliced."""
        if self._source is None:
            raise ValueError(f"operation on a closed pyflatmodule.{type(self).__name__}")
        return Span(self._source, start, size)

    @property
    def version(self) -> int:
        """The file's schema version field."""
        return int(self._root.scalar("version"))

    @property
    def fetched(self) -> Optional[RemoteStats]:
        """For a remote file, the requests made and bytes fetched so far; None for a local
        file or a buffer."""
        if self._source is None:
            raise ValueError(f"operation on a closed pyflatmodule.{type(self).__name__}")
        return self._source.remote.stats if self._source.remote is not None else None

    @property
    def size(self) -> int:
        """Bytes in the file."""
        return len(self._source) if self._source is not None else 0

    def check(self) -> Optional[str]:
        """None while the file on disk is the one that was opened; otherwise what
        changed (replaced, truncated, modified). Cheap: one ``stat``. Sources not opened
        from a path always give None."""
        if self._source is None:
            raise ValueError(f"operation on a closed pyflatmodule.{type(self).__name__}")
        return self._source.changed()

    @property
    def load_args(self) -> Dict[str, Any]:
        """The options it was opened with, as ``load()``'s keyword arguments."""
        return self._options.keywords()

    @abc.abstractmethod
    def _describe(self) -> str:
        """What the repr says of the open file after its name."""

    def __repr__(self) -> str:
        kind = type(self).__name__
        if self._source is None:
            return f"<{kind} (closed)>"
        return f"<{kind} {self._source.name}: {self._describe()}>"

