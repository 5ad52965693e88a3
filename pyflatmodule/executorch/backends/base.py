"""What a backend's reader is and gives: the door every delegate payload goes through.

A program never names a backend. It looks a delegate's id up in
:data:`pyflatmodule.executorch.backends.BACKENDS` and, when a reader is registered, hands
it the payload (:class:`Payload`); the reader checks it and returns the graph the payload
holds (:class:`DelegateGraph`), or None for a payload it leaves opaque (an older version
of its format)."""
from __future__ import annotations

import abc
import contextlib
import contextvars
from typing import (
    Any,
    Callable,
    Dict,
    Iterator,
    List,
    Mapping,
    NamedTuple,
    Optional,
    Protocol,
    Sequence,
    Tuple,
    Union,
)

from ...core.dtypes import QuantizedTensor
from ...core.lazy import np
from ...core.native import c_buffer, check, ffi, format_error, lib, new_error
from ...core.options import Options
from ...core.source import Bytes, Span

__all__ = ["AsStoredConstants", "Backend", "Deferred", "DelegateGraph", "DescribedGraph",
           "Payload", "Resolver", "described", "described_as", "header_fields", "index_payload",
           "named_bytes", "payload_bytes"]

#: Bytes a named data key resolves to (a memoryview, or a span read when sliced), or
#: None when no file given holds it.
Resolver = Callable[[str], Optional[Bytes]]
Tensor = Union["np.ndarray", QuantizedTensor]


class Payload(NamedTuple):
    """One delegate's processed payload, as a backend's reader receives it."""

    data: memoryview          #: the payload's bytes (read-only, zero-copy)
    resolve: Resolver         #: named data by key: the program's, then the data files'
    where: str                #: the delegate's field path, for errors
    offset: int               #: where the payload starts in the file, for errors
    require_all: bool         #: named data must resolve (data files were given)
    options: Options          #: the program's options (budgets, ``strict``)


class DelegateGraph(Protocol):
    """What every backend's graph gives the program and the commands."""

    @property
    def version(self) -> str:
        """The version the payload's writer put in."""

    @property
    def input_ids(self) -> Sequence[int]:
        """Value ids of the graph's inputs."""

    @property
    def output_ids(self) -> Sequence[int]:
        """Value ids of the graph's outputs."""

    @property
    def nodes(self) -> Sequence[Any]:
        """The nodes in execution order, each with ``kind``, ``inputs`` and ``outputs``."""

    @property
    def values(self) -> Sequence[Any]:
        """The values by id, each with ``id``, ``datatype``, ``dims``, ``constant`` and
        ``quantization``."""

    @property
    def arguments(self) -> int:
        """Arguments a delegate call of the graph must pass at least (0: no bound)."""

    @property
    def missing(self) -> Mapping[int, str]:
        """Value id -> the named data key no file given holds (loaded without data files)."""

    def constants(self) -> Mapping[int, Tensor]:
        """Every constant by value id, as the backend stores it."""

    def torch_constants(self) -> Mapping[int, Tensor]:
        """Every constant by value id, in torch's layout where the backend's differs."""

    def constant_layouts(self) -> Mapping[int, Dict[str, Any]]:
        """How the backend stores each constant of :meth:`constants`, as JSON data."""

    def named_data_keys(self) -> Dict[Tuple[int, str], str]:
        """The named data key of each constant (and scales) kept in named data."""

    def constant_names(self) -> Mapping[int, str]:
        """The module's name the payload gives a constant (its fully qualified name in
        the exported module's ``state_dict()``: ``layers.0.weight``), by value id, for
        the constants it gives one and whose values are that tensor's as torch holds
        them; a content hash, a generated id or a name of the backend's own is none.
        :meth:`Program.delegate_constants <pyflatmodule.executorch.Program.
        delegate_constants>` names the constants by it."""


class DescribedGraph(abc.ABC):
    """What a payload whose contents are the backend's own format (a vendor's compiled
    binary) gives as a :class:`DelegateGraph`: its reader describes the payload's header
    (the subclass's own attributes) and lists no nodes, values or constants."""

    #: Value id -> named data key no file given holds (none, unless the subclass says)
    missing: Dict[int, str]

    @property
    @abc.abstractmethod
    def description(self) -> str:
        """The payload in a line, from its header: what the commands show in place of a
        graph (each subclass writes its own)."""

    @property
    def input_ids(self) -> List[int]:
        """Empty: the compiled binary is not read."""
        return []

    @property
    def output_ids(self) -> List[int]:
        """Empty: the compiled binary is not read."""
        return []

    @property
    def arguments(self) -> int:
        """0: no bound on the delegate call's arguments."""
        return 0

    @property
    def nodes(self) -> List[Any]:
        """Empty: the compiled binary is not read."""
        return []

    @property
    def values(self) -> List[Any]:
        """Empty: the compiled binary is not read."""
        return []

    def constants(self) -> Dict[int, np.ndarray]:
        """Empty: the weights are inside the compiled binary, in its encoding."""
        return {}

    def torch_constants(self) -> Dict[int, np.ndarray]:
        """Empty (:meth:`constants`)."""
        return {}

    def constant_layouts(self) -> Dict[int, Dict[str, Any]]:
        """Empty (:meth:`constants`)."""
        return {}

    def named_data_keys(self) -> Dict[Tuple[int, str], str]:
        """Empty: no constant is read from named data."""
        return {}

    def constant_names(self) -> Dict[int, str]:
        """Empty: no constant is read (:meth:`constants`)."""
        return {}


class AsStoredConstants(abc.ABC):
    """What a graph whose backend stores its constants as torch holds them (contiguous,
    the tensor's dims) gives of them, from its :meth:`constant`: the bytes of each, by
    value id, in ``_bytes`` (the subclass's reader fills it)."""

    _bytes: Dict[int, Deferred]

    @abc.abstractmethod
    def constant(self, i: int) -> Optional[np.ndarray]:
        """Value ``i``'s constant, None when it has none (or its bytes are missing): a
        read-only zero-copy array of its dims and datatype."""

    def constants(self) -> Dict[int, np.ndarray]:
        """Every constant by value id (see :meth:`constant`), the missing ones left out."""
        out: Dict[int, np.ndarray] = {}
        for i in self._bytes:
            c = self.constant(i)
            if c is not None:
                out[i] = c
        return out

    def torch_constants(self) -> Dict[int, np.ndarray]:
        """:meth:`constants`: they are stored in torch's layout."""
        return self.constants()

    def constant_layouts(self) -> Dict[int, Dict[str, Any]]:
        """How each constant of :meth:`constants` is stored: as torch holds it."""
        return {i: {"layout": "as stored", "shape": list(c.shape)}
                for i, c in self.constants().items()}


def described_as(graph: DelegateGraph) -> str:
    """A graph whose payload is described rather than read, in a line (its
    :attr:`DescribedGraph.description`); empty for a decoded graph."""
    return graph.description if isinstance(graph, DescribedGraph) else ""


class Backend(NamedTuple):
    """A backend whose payloads are read: its id in a program, its name in words, its key
    (JSON kinds, ``<key>_graph``) and its reader."""

    id: str
    name: str
    key: str
    read: Callable[[Payload], Optional[DelegateGraph]]


#: While :func:`described` runs: each stand-in's address -> the address of the bytes it
#: stands for.
_STAND_INS: "contextvars.ContextVar[Optional[Dict[int, int]]]" = contextvars.ContextVar(
    "stand_ins", default=None)


@contextlib.contextmanager
def described() -> Iterator[Dict[int, int]]:
    """Within it, a :class:`Deferred` gives a stand-in of zeros (calloc's: no page is
    touched, nothing is read) for its bytes, and the dict yielded maps each stand-in's
    address to the address of the bytes it stands for: a graph's constants made within
    have their real dtypes, shapes and sizes, and their values read nothing. Nothing
    made within may be kept: what it says of the constants is all it is for."""
    addresses: Dict[int, int] = {}
    token = _STAND_INS.set(addresses)
    try:
        yield addresses
    finally:
        _STAND_INS.reset(token)


class Deferred:
    """Bytes of a payload or of named data, as a read-only array of bytes made when first
    asked for: a graph checks every constant's extent when it is read, and reads the
    bytes of those asked for (a remote program's weights stay where they are)."""

    __slots__ = ("_data", "_offset", "_nbytes", "_array")

    def __init__(self, data: Bytes, offset: int, nbytes: int) -> None:
        self._data = data
        self._offset = offset
        self._nbytes = nbytes
        self._array: Optional[np.ndarray] = None

    def address(self) -> int:
        """Where its bytes are (:meth:`Source.address <pyflatmodule.core.source.Source.
        address>` for a span of the file, the buffer's address for bytes held)."""
        if isinstance(self._data, Span):
            return self._data.source.address(self._data.start + self._offset)
        assert isinstance(self._data, memoryview)   # a payload's bytes, held
        return int(np.frombuffer(self._data, np.uint8).ctypes.data) + self._offset

    def array(self) -> np.ndarray:
        """The bytes (zero-copy over a mapping; fetched once from a remote file); within
        :func:`described`, a stand-in."""
        stand_ins = _STAND_INS.get()
        if stand_ins is not None:
            stand_in = np.zeros(self._nbytes, np.uint8)
            stand_in.flags.writeable = False
            stand_ins[int(stand_in.ctypes.data)] = self.address()
            return stand_in
        if self._array is None:
            self._array = payload_bytes(self._data[self._offset:self._offset + self._nbytes],
                                        0, self._nbytes)
        return self._array


def named_bytes(resolve: Resolver, key: str, nbytes: int, require_all: bool, at: int,
                where: str, what: str) -> Optional[Deferred]:
    """The first ``nbytes`` bytes of named data ``key``, for ``what`` (errors name it:
    ``"XNNPACK constant of value 3"``; ``at`` and ``where`` locate the key); their extent
    checked now, their bytes read when asked for. None when no file given holds the key
    and no data files were given (the graph lists it missing); FormatError
    ``missing_data`` when data files were given and none holds it, ``outside_storage``
    when it holds fewer bytes."""
    data = resolve(key)
    if data is None:
        if not require_all:
            return None
        raise format_error(lib.ET_E_MISSING_DATA, at, where,
                           f"{what}: named data {key!r} is in none of the files")
    if len(data) < nbytes:
        raise format_error(lib.FB_E_OUTSIDE_STORAGE, at, where,
                           f"{what} needs {nbytes} bytes, named data {key!r} holds "
                           f"{len(data)}")
    return Deferred(data, 0, nbytes)


def index_payload(payload: Payload, where: str, summary_type: str, open_c: Any, index_c: Any,
                  arrays: Sequence[Tuple[str, str]]) -> Tuple[Any, List[Any]]:
    """A backend's C checks of a payload: ``open_c`` (buffer, size, options, a new
    ``summary_type``, error) and, when it passes, ``index_c`` (buffer, size, the summary,
    one new array per (item type, count) of ``arrays``, as many items as the summary's
    field ``count`` says, error); the summary and the arrays, or FormatError located in
    the file at ``where``."""
    buf = c_buffer(payload.data)
    err = new_error()
    summary = ffi.new(summary_type + " *")
    status = open_c(buf, len(payload.data), payload.options.to_c(), summary, err)
    made: List[Any] = []
    if status == lib.FB_OK:
        made = [ffi.new(t + "[]", max(1, getattr(summary, n))) for t, n in arrays]
        status = index_c(buf, len(payload.data), summary, *made, err)
    if status != lib.FB_OK:
        err.offset += payload.offset
        check(status, err, where)
    return summary, made


def payload_bytes(data: Any, offset: int, nbytes: int) -> np.ndarray:
    """``nbytes`` bytes of ``data`` from ``offset`` as a read-only zero-copy array."""
    raw = np.frombuffer(data, np.uint8, nbytes, offset)
    raw.flags.writeable = False
    return raw


def header_fields(h: Any) -> Dict[str, int]:
    """A payload header XNNPACK's and Vulkan's payloads share (the C core's
    ``payload_header``) as their graphs' ``header`` gives it: the flatbuffer's and the
    constant data's offset and size in the payload."""
    return {"flatbuffer_offset": int(h.flatbuffer_offset),
            "flatbuffer_size": int(h.flatbuffer_size),
            "constant_data_offset": int(h.constant_offset),
            "constant_data_size": int(h.constant_size)}
