"""Native backend payloads: the graph a ``NativeBackend`` delegate runs, zero-copy.

A program lowered to ExecuTorch's native backend (``NativePartitioner``) keeps its graph
in the delegate's payload: a flatbuffer alone (identifier ``NPTG``, read through the
project's copy of ExecuTorch's schema, csrc/schemas/native.fbs), a program of one method
whose graph is a topological list of fx nodes naming their values by SSA name; the
constants' bytes are the program's (or a data file's) named data, by the key each constant
gives. The C core (csrc/backends/native/native.c) checks the payload when it is read:
structure, every name a node, the graph's outputs, its tensor metadata or the method's
output specs gives resolves to a value defined before its use, no value is defined twice,
every tensor's dtype is known and every constant's dims static.

Values are numbered here, as the other backends' graphs number theirs: the graph's
inputs, the method's constants, its mutable buffers, then each node's outputs in node
order. The constants are stored as torch holds them (contiguous, the tensor's dims).
"""
from __future__ import annotations

import re
from typing import Dict, List, NamedTuple, Optional, Tuple

from ...core.dtypes import numpy_dtype, scalar_type_name
from ...core.fbread import Table, decode_text, enum_names, schema_of
from ...core.lazy import np
from ...core.native import lib
from .base import AsStoredConstants, Backend, Deferred, Payload, index_payload, named_bytes

__all__ = ["BACKEND", "NativeGraph", "NativeNode", "NativeValue"]

#: OutputValueKind names by number.
_OUTPUT_KINDS: Dict[int, str] = enum_names(lib.native_output_value_kind)
#: The c10::ScalarType number of each of the payload's ScalarType numbers: its schema
#: pins most to ExecuTorch's, but numbers UINT16, UINT32 and UINT64 16, 17 and 18 (c10's
#: 27, 28 and 29; its 16-18 are packed and quantized types).
_SCALAR_TYPES: Dict[int, int] = {
    v: {n: c for c, n in enum_names(lib.et_scalar_type).items()}[n]
    for v, n in enum_names(lib.native_scalar_type).items()}
#: Where a value comes from (``nat_source``), by number.
_SOURCES = {lib.NAT_SOURCE_INPUT: "input", lib.NAT_SOURCE_CONSTANT: "constant",
            lib.NAT_SOURCE_BUFFER: "buffer", lib.NAT_SOURCE_NODE: "node"}
#: The kinds of constant whose data key is the module's name of a tensor of its
#: ``state_dict()`` (NamedTensorRef.kind: InputKind's PARAMETER and BUFFER; a
#: CONSTANT_TENSOR is one torch.export lifted from the code, named by it).
_MODULE_KINDS = (lib.NATIVE_INPUT_KIND_PARAMETER, lib.NATIVE_INPUT_KIND_BUFFER)
#: The name ExecuTorch's ``to_edge`` gives a tensor constant it makes a buffer of
#: (exir/program/_program.py, ``lift_constant_tensor_pass``: a count, not the module's).
_LIFTED = re.compile(r"_lifted_tensor_constant[0-9]+")


class NativeNode(NamedTuple):
    """One operator call of the graph (a ``call_function`` node), in execution order: the
    operator's name as the payload holds it (``torch.ops.aten.linear.default``), the value
    ids its arguments name (tensors, tensor lists' elements, scalars computed in the graph)
    and those it defines, and its fx node name."""

    kind: str
    inputs: Tuple[int, ...]
    outputs: Tuple[int, ...]
    name: str


class NativeValue(NamedTuple):
    """One value of the graph, at its id: its SSA name; its kind (``tensor``, ``int``,
    ``bool``, ``float``: a node output's kind, a tensor list's elements each a tensor);
    where it comes from (``input``, ``constant``, ``buffer``: a mutable buffer, ``node``);
    a tensor's datatype (torch's name) and dims (each dim's upper bound, -1 when it has
    none), another value's datatype its kind; and whether it is a constant (its bytes
    named data, which may be :attr:`NativeGraph.missing`)."""

    id: int
    name: str
    kind: str
    source: str
    datatype: str
    dims: Tuple[int, ...]
    constant: bool

    @property
    def quantization(self) -> None:
        """None: a quantized constant's scheme is not read (its bytes are, as stored)."""
        return None


def _argument_names(member: str, t: Optional[Table]) -> List[str]:
    """The value names an argument (ArgumentValue ``member``, table ``t``) references (an
    empty name references nothing)."""
    names: List[str] = []
    if t is None:
        return names
    if member == "TensorArg":
        names = [t.string("name") or ""]
    elif member == "TensorListArg":
        names = t.strings("names")
    elif member == "OptionalTensorListArg":
        names = [n for n, p in zip(t.strings("names"), t.vector("has_value")) if p]
    elif member in ("IntArg", "FloatArg", "BoolArg"):
        names = [t.string("ref") or ""]
    elif member == "IntListArg":
        names = t.strings("refs")
    return [n for n in names if n]


class NativeGraph(AsStoredConstants):
    """The native backend graph of one delegate payload (checked by the C core when made):
    the first method's, the one the delegate runs.

    Named data the payload names must be in the program or in the data files given to
    ``load`` when some were given (else FormatError ``missing_data``); without data files,
    constants whose named data the program lacks are listed in :attr:`missing`."""

    def __init__(self, payload: Payload) -> None:
        self._where = payload.where + ".processed<Program>."
        summary, (records, _) = index_payload(
            payload, self._where, "nat_summary", lib.nat_open, lib.nat_index,
            [("nat_value", "n_values"), ("uint32_t", "n_values")])
        self._payload = payload.data
        self._array = records   # owns the records below (its items do not keep it alive)
        self._records = [records[i] for i in range(summary.n_values)]
        schema = schema_of(lib.NATIVE_FILE_IDENTIFIER)
        self._root = Table(schema, payload.data, int(summary.root), "Program")
        self._method = Table(schema, payload.data, int(summary.method), "Method")
        graph = self._method.table("graph")
        assert graph is not None   # required, and verified
        self._graph = graph
        self._names = [decode_text(self._payload, int(r.name), int(r.name_len))
                       for r in self._records]
        self._ids = {name: i for i, name in enumerate(self._names)}
        #: value id -> the named data key of its constant that no file given holds
        self.missing: Dict[int, str] = {}
        self._bytes = self._resolve(payload)

    def _key(self, i: int) -> str:
        r = self._records[i]
        return decode_text(self._payload, int(r.key), int(r.key_len))

    def _meta(self, i: int) -> Optional[Table]:
        """Value ``i``'s TensorMeta, None when the payload gives it none."""
        pos = int(self._records[i].meta)
        return Table(self._root.schema, self._payload, pos, "TensorMeta") if pos else None

    def _resolve(self, payload: Payload) -> Dict[int, Deferred]:
        """The bytes of every constant, by value id: the named data its key names (at
        least the tensor's bytes; a quantized one's, all of it), its extent checked now."""
        out: Dict[int, Deferred] = {}
        for i, r in enumerate(self._records):
            if r.source != lib.NAT_SOURCE_CONSTANT:
                continue
            key = self._key(i)
            nbytes = int(r.nbytes)
            meta = self._meta(i)
            if meta is not None and meta.has("quant"):
                held = payload.resolve(key)
                nbytes = 0 if held is None else len(held)
            raw = named_bytes(payload.resolve, key, nbytes, payload.require_all,
                              payload.offset + int(r.key), f"{self._where}methods[0]."
                              f"constants[{i - len(self.input_ids)}]",
                              f"native backend constant of value {i}")
            if raw is None:
                self.missing[i] = key
                continue
            out[i] = raw
        return out

    @property
    def version(self) -> str:
        """The schema version the writer put in."""
        return self._root.string("version") or ""

    @property
    def method(self) -> str:
        """The name of the method the graph is (``forward``)."""
        return self._method.string("name") or ""

    @property
    def input_ids(self) -> List[int]:
        """Value ids of the graph's inputs, in the delegate call's order."""
        return [self._ids[n] for n in self._graph.strings("inputs")]

    @property
    def output_ids(self) -> List[int]:
        """Value ids of the graph's outputs, in the delegate call's order."""
        return [self._ids[n] for n in self._graph.strings("outputs")]

    @property
    def arguments(self) -> int:
        """0: the runtime checks a call's argument count against the graph itself."""
        return 0

    @property
    def nodes(self) -> List[NativeNode]:
        """The operator calls (placeholders and the output node left out: they are the
        graph's inputs and outputs), in execution order."""
        out = []
        call = lib.NATIVE_OP_KIND_CALL_FUNCTION
        for t in self._graph.tables("nodes"):
            if int(t.scalar("op_kind")) != call:
                continue
            inputs = [self._ids[name] for na in t.tables("inputs")
                      for name in _argument_names(*self._argument(na))]
            outputs = []
            for o in t.tables("outputs"):
                if int(o.scalar("kind")) == lib.NATIVE_OUTPUT_VALUE_KIND_TENSOR_LIST:
                    outputs += [self._ids[n] for n in o.strings("names")]
                else:
                    outputs.append(self._ids[o.string("name") or ""])
            out.append(NativeNode(t.string("target") or "", tuple(inputs), tuple(outputs),
                                  t.string("name") or ""))
        return out

    @staticmethod
    def _argument(na: Table) -> Tuple[str, Optional[Table]]:
        """A NamedArgument's ArgumentValue: its member and table."""
        arg = na.table("arg")
        assert arg is not None   # required, and verified
        return arg.union("value")

    @property
    def values(self) -> List[NativeValue]:
        """Every value, by id."""
        out = []
        for i, r in enumerate(self._records):
            kind = _OUTPUT_KINDS[int(r.kind)].lower()
            meta = self._meta(i)
            if meta is None:
                out.append(NativeValue(i, self._names[i], kind, _SOURCES[int(r.source)], kind,
                                       (), False))
                continue
            dims = tuple(int(d.scalar("max")) for d in meta.tables("sizes"))
            out.append(NativeValue(i, self._names[i], kind, _SOURCES[int(r.source)],
                                   scalar_type_name(_SCALAR_TYPES[int(meta.scalar("dtype"))]),
                                   dims,
                                   r.source == lib.NAT_SOURCE_CONSTANT))
        return out

    def constant(self, i: int) -> Optional[np.ndarray]:
        """Value ``i``'s constant, None when it has none (or it is :attr:`missing`): a
        read-only zero-copy array of its dims and datatype; a quantized one's named data
        as bytes, as stored."""
        raw = self._bytes.get(i)
        if raw is None:
            return None
        meta = self._meta(i)
        assert meta is not None   # a constant has its TensorMeta (required)
        if meta.has("quant"):
            return raw.array()
        dtype = numpy_dtype(_SCALAR_TYPES[int(meta.scalar("dtype"))])
        return raw.array().view(dtype).reshape(
            tuple(int(d.scalar("max")) for d in meta.tables("sizes")))

    def named_data_keys(self) -> Dict[Tuple[int, str], str]:
        """The named data key of each constant, by (value id, ``"constant"``)."""
        return {(i, "constant"): self._key(i) for i, r in enumerate(self._records)
                if r.source == lib.NAT_SOURCE_CONSTANT}

    def constant_names(self) -> Dict[int, str]:
        """The data key of each constant that is the module's parameter or buffer (its
        fully qualified name: ExecuTorch keys them by it), by value id; not a tensor
        constant's (a name torch.export or ExecuTorch's ``to_edge`` made up:
        ``_lifted_tensor_constant1``), nor a quantized one's (its bytes are the
        writer's encoding, not the module's tensor)."""
        refs = self._method.tables("constants")
        first = len(self.input_ids)
        out: Dict[int, str] = {}
        for i, r in enumerate(self._records):
            if r.source != lib.NAT_SOURCE_CONSTANT:
                continue
            meta = self._meta(i)
            key = self._key(i)
            if int(refs[i - first].scalar("kind")) in _MODULE_KINDS and \
                    not _LIFTED.fullmatch(key) and meta is not None and not meta.has("quant"):
                out[i] = key
        return out

    def __repr__(self) -> str:
        return f"<NativeGraph: {len(self.nodes)} nodes, {len(self._records)} values>"


#: The native backend's entry in the backend registry.
BACKEND = Backend("NativeBackend", "ExecuTorch native", "native", NativeGraph)
