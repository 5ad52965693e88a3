"""XNNPACK delegate payloads: the graph an ``XnnpackBackend`` delegate runs, zero-copy.

A program lowered to XNNPACK keeps its work in the delegate's payload: a header
(``XH00``), XNNPACK's flatbuffer (identifier ``XN01``, read through the project's schema
csrc/schemas/xnnpack.fbs) and inline constant data; the weights themselves are in the
program's named data, keyed by the SHA-256 of their bytes (or, for per-channel scales,
``"scale_"`` and that hash). :attr:`pyflatmodule.executorch.Delegate.graph` gives an
:class:`XnnGraph`; the C core (csrc/backends/xnnpack/xnn.c) checks the payload when it is
read: header, structure, value ids (in range, each once), the ids every node names, every
constant reference and extent, and the quantization parameters.

:meth:`XnnGraph.constants` gives constants in XNNPACK's layout, not the module's: conv
weights ``OHWI`` (the module's ``OIHW`` in channels-last order), depthwise and transposed
conv weights with their first two dimensions swapped before that (depthwise ``[1, H, W,
C]``), linear weights as the module has them (``[out, in]``), quantized weights as the
integers the quantizer made with their scales. :meth:`XnnGraph.torch_constant` gives
them in torch's layout (conv ``OIHW``, depthwise ``[C, 1, H, W]``, transposed conv
``[in, out/groups, H, W]``) as strided views of the same bytes, and
:meth:`XnnGraph.torch_layouts` what was permuted and where the values may not be the
module's (:class:`TorchLayout`).
"""
from __future__ import annotations

import re
from typing import Any, Dict, List, NamedTuple, Optional, Tuple, Union

from ...core.dtypes import QuantizedTensor, numpy_dtype
from ...core.fbread import Table, decode_text, enum_names, schema_of
from ...core.lazy import np
from ...core.native import c_buffer, check, ffi, lib, new_error
from ...core.options import Options
from .base import Backend, Deferred, Payload, Resolver, header_fields, named_bytes

__all__ = ["BACKEND", "DATATYPES", "Quantization", "TorchLayout", "XnnGraph", "XnnNode",
           "XnnValue", "XNN_NO_ID", "is_legacy"]

#: An id field's value for "no value" (an absent bias, an unused input).
XNN_NO_ID = 0xFFFFFFFF

#: numpy dtype of each XNNPACK datatype's stored elements ("u1" bytes for 4-bit types,
#: two values a byte), by the name the schema gives without its ``xnn_datatype_`` prefix.
_DTYPES: Dict[str, str] = {
    "fp32": "<f4", "fp16": "<f2", "qint8": "i1", "quint8": "u1", "qint32": "<i4",
    "qcint8": "i1", "qcint32": "<i4", "qcint4": "u1", "qdint8": "i1", "qbint4": "u1",
    "qpint8": "i1", "int32": "<i4", "pfp32": "<f4", "bf16": "bfloat16",
}
_PACKED = ("qcint4", "qbint4")
_DATATYPE_PREFIX = "xnn_datatype_"
#: datatype names by number: the schema's XNNDatatype names without their prefix
DATATYPES: Dict[int, str] = {v: n[len(_DATATYPE_PREFIX):]
                             for v, n in enum_names(lib.xn_xnn_datatype).items()}


def _quant_kind(member: str) -> str:
    """:attr:`Quantization.kind` of an XNNQuantParams member: its name in snake case
    without the ``Quant`` suffix (``PerChannelGroupQuant`` -> ``per_channel_group``)."""
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", member[:-len("Quant")]).lower()


def is_legacy(payload: memoryview) -> bool:
    """Whether an XNNPACK payload is in the older ``XN00`` format (its constants inside
    the flatbuffer), which this reader leaves opaque: its flatbuffer, bare or behind the
    ``XH00`` header the C core reads, has identifier ``XN00``."""
    header = ffi.new("payload_header *")
    status = lib.xnn_read_header(c_buffer(payload), len(payload), header, new_error())
    return bool(status == lib.FB_OK and header.identifier == lib.XNN_LEGACY_IDENTIFIER)


class Quantization(NamedTuple):
    """A value's quantization parameters.

    ``kind`` is ``"per_tensor"`` (``scale``, ``zero_point``), ``"per_channel"``
    (``scales`` along ``channel_dim``; zero points 0), ``"per_channel_group"``
    (``scales`` per channel and group of ``group_size`` along the other dimension,
    shaped ``(channels, groups)`` as stored: bfloat16 when in constant data) or
    ``"per_token_dynamic"`` (computed at run time; ``num_nonbatch_dims``)."""

    kind: str
    scale: Optional[float] = None
    zero_point: Optional[int] = None
    scales: Optional[np.ndarray] = None
    channel_dim: Optional[int] = None
    group_size: Optional[int] = None
    num_nonbatch_dims: Optional[int] = None


class XnnValue(NamedTuple):
    """One value of the graph, by id: its datatype (the schema's name without
    ``xnn_datatype_``, e.g. ``"fp32"``, ``"qcint8"``), dims as XNNPACK stores them,
    flags and external id (graph inputs and outputs), the constant data index (0: no
    constant) and its quantization parameters."""

    id: int
    datatype: str
    dims: Tuple[int, ...]
    flags: int
    external_id: int
    constant: int
    quantization: Optional[Quantization]


class XnnNode(NamedTuple):
    """One node: its kind (the schema's union member, e.g. ``"XNNConv2d"``), the value
    ids it reads and writes (its fields the schema marks ``value_ref``, in schema order:
    ``output*`` ones are outputs; ids meaning none left out), its other fields by name, its
    debug handle and output clamp (min, max) when the file gives one."""

    kind: str
    inputs: Tuple[int, ...]
    outputs: Tuple[int, ...]
    fields: Dict[str, Any]
    debug_handle: int
    output_min_max: Optional[Tuple[float, float]]


#: XNN_FLAG_TRANSPOSE_WEIGHTS: a fully-connected node's filter is [in, out]
_TRANSPOSE_WEIGHTS = 0x1
#: Filter layouts by node kind: (XNNPACK's, torch's, the axes that take one to the
#: other: torch's tensor is XNNPACK's ``.transpose(axes)``), as ExecuTorch's serializer
#: (backends/xnnpack/operators/node_visitor.py) writes them: conv weights channels last;
#: depthwise and transposed conv weights their first two dimensions swapped first.
_FILTERS: Dict[str, Tuple[str, str, Tuple[int, ...]]] = {
    "XNNConv2d": ("OHWI", "OIHW", (0, 3, 1, 2)),
    "XNNDepthwiseConv2d": ("1HWO", "O1HW", (3, 0, 1, 2)),
    "XNNConvTranspose2d": ("OHWI", "IOHW", (3, 0, 1, 2)),
    "XNNFullyConnected": ("OI", "OI", (0, 1)),
}
_FOLDED = ("a batch norm right after this layer in the module is folded into its weight "
           "and bias by ExecuTorch's partitioner (the file does not record whether one was): "
           "then these are not the module's values")
#: the datatypes of a float filter: ExecuTorch folds a batch norm into a linear layer's
#: float weight only (quantization leaves a dequantize node between them, which its
#: FuseBatchNormPass does not fold through; torch's PT2E quantizer folds convs alone)
_FLOAT = ("fp32", "fp16", "bf16", "pfp32")
#: torch's names of the half-precision types XNNPACK may widen a filter from
_HALF = {"fp16": "float16", "bf16": "bfloat16"}
_WIDENED = ("stored as float32 in a {0} graph: the module's tensor is the same values in "
            "{0} (exact)")
_CONV1D = ("a kernel one wide over an input one wide, as ExecuTorch lowers a 1-d conv (its "
           "Conv1dUnsqueezePass adds a last dimension of 1 to the input and the weight): "
           "if the module's layer is a Conv1d, its weight is this tensor without its last "
           "dimension")
_TRANSPOSED_FC = ("XNN_FLAG_TRANSPOSE_WEIGHTS: the [in, out] matrix torch's mm multiplies "
                  "by; an nn.Linear's weight is its transpose")
_GROUPED = ("a transposed conv of {} groups: torch's layout is no strided view of "
            "XNNPACK's, so this tensor is a copy (XNNPACK's reshaped to [groups, O/groups, "
            "H, W, I/groups], transposed by the permutation, reshaped to [I, O/groups, H, W])")


class TorchLayout(NamedTuple):
    """How a constant XNNPACK stores relates to the tensor torch's module has.

    ``node`` and ``role`` (``"filter"``, ``"bias"``): the node kind that reads it and as
    what; ``xnnpack`` and ``torch``: the layouts, by dimension letters (``"OHWI"``,
    ``"OIHW"``; ``O``/``I`` output and input channels, per group); ``permutation``: the
    axes that give torch's tensor from XNNPACK's (``stored.transpose(permutation)``); a
    transposed conv of ``groups`` > 1 has its axes split by group first and is then
    ``copied``; ``notes``: where the bytes may differ from the module's (a folded batch
    norm, a float32 filter of a float16 graph, ...)."""

    node: str
    role: str
    xnnpack: str
    torch: str
    permutation: Tuple[int, ...]
    groups: int
    copied: bool
    notes: Tuple[str, ...]

    def _arrange(self, array: np.ndarray) -> np.ndarray:
        if not self.copied:
            return array.transpose(self.permutation)
        o, h, w, ig = array.shape
        og = o // self.groups
        out = array.reshape(self.groups, og, h, w, ig).transpose(self.permutation)
        out = out.reshape(self.groups * ig, og, h, w)   # a copy: no view has these strides
        out.flags.writeable = False
        return out

    def apply(self, c: Union[np.ndarray, QuantizedTensor]) -> Union[np.ndarray, QuantizedTensor]:
        """``c`` (a constant in XNNPACK's layout) in torch's: a strided view, zero-copy
        (a copy when :attr:`copied`); a quantized one with its channel axis moved."""
        if self.permutation == tuple(range(len(self.permutation))):
            return c
        if not isinstance(c, QuantizedTensor):
            return self._arrange(c)
        axis = None if c.axis is None else self.permutation.index(c.axis)
        ints = self._arrange(c.int_repr)
        return QuantizedTensor(ints, tuple(ints.shape), c.dtype_name, c.qscheme,
                               lambda: ints, scale=c.scale, zero_point=c.zero_point,
                               scales=c.scales, zero_points=c.zero_points, axis=axis,
                               group_size=c.group_size)

    def describe(self, shape: Tuple[int, ...]) -> Dict[str, Any]:
        """As JSON data (``export``'s metadata): these fields, and the shape XNNPACK
        stores."""
        out: Dict[str, Any] = {"node": self.node, "role": self.role, "layout": self.xnnpack,
                               "shape": list(shape), "torch_layout": self.torch,
                               "permutation": list(self.permutation)}
        if self.groups > 1:
            out["groups"] = self.groups
        if self.copied:
            out["copied"] = True
        out["notes"] = list(self.notes)
        return out


class XnnGraph:
    """The XNNPACK graph of one delegate payload (checked by the C core when made).

    Named data the payload names must be in the program or in the data files given to
    ``load`` when some were given (else FormatError ``missing_data``, as for external
    tensors); without data files, constants whose named data the program lacks (weights
    written to a ``.ptd``) are listed in :attr:`missing` and read as None.

    The payload is checked with ``options``' budgets and ``strict`` (a program's graphs
    with the program's own, a payload read alone with the defaults), always verifying:
    what is read here (named data keys as UTF-8, ...) relies on the full check."""

    def __init__(self, payload: memoryview, resolve: Resolver, where: str,
                 offset: int, require_all: bool = True,
                 options: Optional[Options] = None) -> None:
        err = new_error()
        summary = ffi.new("xnn_summary *")
        buf = c_buffer(payload)
        prefix = where + ".processed<XNNGraph>."
        checks = (options or Options()).replace(verify=True)
        status = lib.xnn_open(buf, len(payload), checks.to_c(), summary, err)
        if status == lib.FB_OK:
            records = ffi.new("xnn_value[]", max(1, summary.n_values))
            status = lib.xnn_index(buf, len(payload), summary, records, err)
        if status != lib.FB_OK:
            err.offset += offset
            check(status, err, prefix)
        self._payload = payload
        self._resolve = resolve
        self._where = prefix
        self._offset = offset
        self._summary = summary
        self._array = records   # owns the records below
        self._records = [records[i] for i in range(summary.n_values)]
        self._root = Table(schema_of(lib.XN_FILE_IDENTIFIER), payload, int(summary.root),
                           "XNNGraph")
        #: value id -> the named data key of its constant or scales that no file given
        #: holds (only when loaded without data files)
        self.missing: Dict[int, str] = {}
        self._layouts: Optional[Dict[int, TorchLayout]] = None
        self._refs = self._resolve_refs(require_all)

    @property
    def header(self) -> Dict[str, int]:
        """The payload's XH00 header: flatbuffer and constant data (offset and size in
        the payload; a payload without the header is all flatbuffer)."""
        return header_fields(self._summary.header)

    @property
    def arguments(self) -> int:
        """Arguments a delegate call of this graph passes at least: one past the largest
        external id of the graph's inputs and outputs (the runtime hands the graph
        argument ``external_id`` of each)."""
        return int(self._summary.n_args)

    @property
    def version(self) -> str:
        """The schema version string the writer put in."""
        return self._root.string("version") or ""

    @property
    def input_ids(self) -> List[int]:
        """Value ids of the graph's inputs."""
        return self._root.values("input_ids")

    @property
    def output_ids(self) -> List[int]:
        """Value ids of the graph's outputs."""
        return self._root.values("output_ids")

    def _node_tables(self) -> List[Tuple[str, Table, Table]]:
        """(kind, XNode table, its union member's table) of each node, in order."""
        out = []
        for t in self._root.tables("xnodes"):
            kind, node = t.union("xnode_union")
            assert node is not None   # the core refuses nodes without one
            out.append((kind, t, node))
        return out

    @property
    def nodes(self) -> List[XnnNode]:
        """The nodes in execution order."""
        out = []
        for kind, t, node in self._node_tables():
            inputs: List[int] = []
            outputs: List[int] = []
            fields: Dict[str, Any] = {}
            for name, info in node.fields.items():
                value = node.plain(name)
                if info.value_ref:
                    if value != XNN_NO_ID:
                        (outputs if name.startswith("output") else inputs).append(value)
                else:
                    fields[name] = value
            clamp = t.table("output_min_max")
            out.append(XnnNode(kind, tuple(inputs), tuple(outputs), fields,
                               int(t.scalar("debug_handle")),
                               None if clamp is None else (float(clamp.scalar("output_min")),
                                                           float(clamp.scalar("output_max")))))
        return out

    def torch_layouts(self) -> Dict[int, "TorchLayout"]:
        """How each constant a conv or fully-connected node reads (its filter, its bias)
        relates to the tensor torch has, by value id (see :class:`TorchLayout`); a
        constant read by several such nodes is described by the first."""
        if self._layouts is not None:
            return self._layouts
        out: Dict[int, TorchLayout] = {}
        for kind, _, node in self._node_tables():
            if kind not in _FILTERS:
                continue
            ids = {name: int(node.plain(name)) for name in ("input1_id", "filter_id", "bias_id")}
            # an input of no value (XNN_NO_ID, which every value_ref may be) says nothing
            half = (None if ids["input1_id"] == XNN_NO_ID
                    else _HALF.get(self._datatype(ids["input1_id"])))
            flags = int(node.plain("flags"))
            groups = int(node.plain("groups")) if "groups" in node.fields else 1
            folds = self._may_fold(kind, flags, ids)
            for role in ("filter", "bias"):
                vid = ids[role + "_id"]
                if vid == XNN_NO_ID or vid in out or not self._records[vid].constant.index:
                    continue
                notes = [_FOLDED] if folds else []
                if half is not None and self._datatype(vid) == "fp32":
                    notes.append(_WIDENED.format(half))
                if role == "bias":
                    out[vid] = TorchLayout(kind, role, "O", "O", (0,), 1, False, tuple(notes))
                    continue
                xnn, torch, perm = _FILTERS[kind]
                if kind == "XNNFullyConnected" and flags & _TRANSPOSE_WEIGHTS:
                    xnn = torch = "IO"
                    notes.append(_TRANSPOSED_FC)
                if kind != "XNNFullyConnected" and int(node.plain("kernel_width")) == 1 \
                        and self._one_wide(ids["input1_id"]):
                    notes.append(_CONV1D)
                copied = kind == "XNNConvTranspose2d" and groups > 1
                if copied:
                    perm = (0, 4, 1, 2, 3)
                    notes.append(_GROUPED.format(groups))
                if self._datatype(vid) in _PACKED:
                    xnn = torch = xnn + " (packed)"
                    perm = tuple(range(len(perm)))
                out[vid] = TorchLayout(kind, role, xnn, torch, perm, groups, copied,
                                       tuple(notes))
        self._layouts = out
        return out

    def torch_constants(self) -> Dict[int, Union[np.ndarray, QuantizedTensor]]:
        """Every constant by value id in torch's layout (:meth:`torch_constant`)."""
        layouts = self.torch_layouts()
        return {vid: array if layouts.get(vid) is None else layouts[vid].apply(array)
                for vid, array in self.constants().items()}

    def constant_layouts(self) -> Dict[int, Dict[str, Any]]:
        """How XNNPACK stores each constant of :meth:`constants`, by value id, as JSON
        data: ``layout`` and ``shape`` as stored, and for the filters and biases of conv
        and fully-connected nodes what :meth:`TorchLayout.describe` gives; other
        constants ``"layout": "as stored"``."""
        layouts = self.torch_layouts()
        values = self.values
        out: Dict[int, Dict[str, Any]] = {}
        for vid in self.constants():
            dims = values[vid].dims
            layout = layouts.get(vid)
            out[vid] = ({"layout": "as stored", "shape": list(dims)} if layout is None
                        else layout.describe(dims))
        return out

    def torch_constant(self, i: int) -> Union[np.ndarray, QuantizedTensor, None]:
        """Value ``i``'s constant in torch's layout (:meth:`torch_layouts`): a read-only
        strided view of :meth:`constant` (a grouped transposed conv's filter, which no
        view can give, a copy); constants of other nodes as :meth:`constant` gives them."""
        c = self.constant(i)
        layout = self.torch_layouts().get(i)
        if c is None or layout is None:
            return c
        return layout.apply(c)

    @property
    def values(self) -> List[XnnValue]:
        """Every value, by id."""
        return [self._value(i) for i in range(len(self._records))]

    def value_kinds(self) -> List[Tuple[str, str]]:
        """Each value's datatype and quantization as the schema names it (its
        XNNQuantParams member, "" when none), by id: from the index, nothing decoded."""
        members = self._root.schema.unions["XNNQuantParams"]
        out = []
        for i in range(len(self._records)):
            r = self._records[i]
            out.append((self._datatype(i), members[int(r.quant_kind)] if r.quant else ""))
        return out

    def _tensor_table(self, i: int) -> Table:
        return Table(self._root.schema, self._payload, int(self._records[i].tensor),
                     "XNNTensorValue")

    def _may_fold(self, kind: str, flags: int, ids: Dict[str, int]) -> bool:
        """Whether a batch norm may have been folded into this node's filter and bias:
        every conv (ExecuTorch folds conv and linear nodes alone, torch's PT2E quantizer
        convs before quantizing); a fully-connected node only as ``aten.linear`` (not
        transposed: an ``mm``), of a float filter, on a 2-d input (a batch norm after a
        linear of a 3-d input normalizes its dimension 1, not the layer's features)."""
        if kind != "XNNFullyConnected":
            return True
        inp, filt = ids["input1_id"], ids["filter_id"]
        return (not flags & _TRANSPOSE_WEIGHTS and filt != XNN_NO_ID
                and self._datatype(filt) in _FLOAT and inp != XNN_NO_ID
                and len(self._tensor_table(inp).vector("dims")) == 2)

    def _one_wide(self, i: int) -> bool:
        """Whether value ``i`` is an NHWC tensor of width 1."""
        dims = self._tensor_table(i).vector("dims")
        return len(dims) == 4 and int(dims[2]) == 1

    def _datatype(self, i: int) -> str:
        return DATATYPES[int(self._records[i].datatype)]

    def _value(self, i: int) -> XnnValue:
        t = self._tensor_table(i)
        return XnnValue(i, self._datatype(i), tuple(t.values("dims")),
                        int(t.scalar("flags")), int(t.scalar("external_id")),
                        int(t.scalar("constant_buffer_idx")), self._quantization(i))

    def _quantization(self, i: int) -> Optional[Quantization]:
        r = self._records[i]
        if not r.quant:
            return None
        member = self._root.schema.unions["XNNQuantParams"][int(r.quant_kind)]
        table = self._root.schema.union_types["XNNQuantParams"][int(r.quant_kind)]
        q = Table(self._root.schema, self._payload, int(r.quant), table)
        kind = _quant_kind(member)
        if kind == "per_tensor":
            return Quantization(kind, scale=float(q.scalar("scale")),
                                zero_point=int(q.scalar("zero_point")))
        if kind == "per_token_dynamic":
            return Quantization(kind, num_nonbatch_dims=int(q.scalar("num_nonbatch_dims")))
        scales = q.vector("scale")
        if not len(scales) and (i, "scales") not in self._refs:   # in a file not given
            return Quantization(kind, channel_dim=int(q.scalar("channel_dim")),
                                group_size=(int(q.scalar("group_size"))
                                            if kind == "per_channel_group" else None))
        if not len(scales):
            scales = self._refs[i, "scales"].array().view(
                "<f4" if kind == "per_channel" else numpy_dtype(lib.FB_SCALAR_TYPE_BFLOAT16))
        channel_dim = int(q.scalar("channel_dim"))
        if kind == "per_channel":
            return Quantization(kind, scales=scales, channel_dim=channel_dim)
        dims = tuple(self._tensor_table(i).values("dims"))
        return Quantization(kind, scales=scales.reshape(dims[channel_dim], -1),
                            channel_dim=channel_dim, group_size=int(q.scalar("group_size")))

    def _resolve_refs(self, require_all: bool) -> Dict[Tuple[int, str], Deferred]:
        """The bytes of every constant and scale reference, by (value id, what): inline
        in the payload, or the named data each key names (at least the extent the core
        found), their extents checked now so that a graph that was made reads in full."""
        out: Dict[Tuple[int, str], Deferred] = {}
        for i, r in enumerate(self._records):
            for what, ref in (("constant", r.constant), ("scales", r.scales)):
                if not ref.index:
                    continue
                if ref.key:
                    key = self._key(ref)
                    raw = named_bytes(self._resolve, key, int(ref.nbytes), require_all,
                                      self._offset + int(ref.key),
                                      f"{self._where}xvalues[{int(r.xvalue)}]",
                                      f"XNNPACK {what} of value {i}")
                    if raw is None:
                        self.missing[i] = key
                        continue
                else:
                    raw = Deferred(self._payload, int(ref.data), int(ref.nbytes))
                out[i, what] = raw
        return out

    def _key(self, ref: Any) -> str:
        """The named data key a constant or scale reference names (decode_text)."""
        return decode_text(self._payload, int(ref.key), int(ref.key_len))

    def named_data_keys(self) -> Dict[Tuple[int, str], str]:
        """The named data key of each constant and of each constant's scales kept in
        named data (the program's or a data file's), by (value id, ``"constant"`` or
        ``"scales"``); those inline in the payload are left out."""
        return {(i, what): self._key(ref) for i, r in enumerate(self._records)
                for what, ref in (("constant", r.constant), ("scales", r.scales))
                if ref.index and ref.key}

    def constant_names(self) -> Dict[int, str]:
        """Empty: XNNPACK keys a constant's named data by the SHA-256 of its bytes (its
        scales' by ``scale_`` and theirs) and gives no other name."""
        return {}

    def constant(self, i: int) -> Union[np.ndarray, QuantizedTensor, None]:
        """Value ``i``'s constant data, None when it has none (or it is :attr:`missing`):
        a read-only zero-copy
        array of its dims and datatype; quantized (``q*`` datatypes with parameters)
        a QuantizedTensor over it. 4-bit types are the packed bytes, two values a byte
        along the last dimension (low nibble first, each value stored plus 8): shape
        dims[:-1] + (ceil(dims[-1] / 2),); ``values()`` unpacks them."""
        r = self._records[i]
        if not r.constant.index or i in self.missing:
            return None
        datatype = self._datatype(i)
        dims = tuple(self._tensor_table(i).values("dims"))
        raw = self._refs[i, "constant"].array()
        shape = dims[:-1] + (-(-dims[-1] // 2),) if datatype in _PACKED and dims else dims
        array = raw.view(numpy_dtype(lib.FB_SCALAR_TYPE_BFLOAT16) if datatype == "bf16"
                         else _DTYPES[datatype])
        array = array.reshape(shape)
        q = self._quantization(i)
        if q is None or q.kind == "per_token_dynamic":
            return array
        return _quantized(array, dims, datatype, q)

    def constants(self) -> Dict[int, Union[np.ndarray, QuantizedTensor]]:
        """Every constant by value id (see :meth:`constant`), the missing ones left out."""
        out: Dict[int, Union[np.ndarray, QuantizedTensor]] = {}
        for i in range(len(self._records)):
            c = self.constant(i)
            if c is not None:
                out[i] = c
        return out

    def __repr__(self) -> str:
        return (f"<XnnGraph: {len(self._root.tables('xnodes'))} nodes, "
                f"{len(self._records)} values>")


def _quantized(array: np.ndarray, dims: Tuple[int, ...], datatype: str,
               q: Quantization) -> QuantizedTensor:
    if datatype in _PACKED:
        def values() -> np.ndarray:
            low = (array & np.uint8(0x0F)).astype(np.int8) - np.int8(8)
            high = (array >> np.uint8(4)).astype(np.int8) - np.int8(8)
            both = np.stack([low, high], axis=-1).reshape(array.shape[:-1] + (-1,))
            return both[..., :dims[-1]].reshape(dims)
    else:
        def values() -> np.ndarray:
            return array
    if q.kind == "per_tensor":
        return QuantizedTensor(array, dims, datatype, "per_tensor_affine", values,
                               scale=q.scale, zero_point=q.zero_point)
    assert q.scales is not None
    zero_points = np.zeros(q.scales.shape, np.int64)
    if q.kind == "per_channel":
        return QuantizedTensor(array, dims, datatype, "per_channel_symmetric", values,
                               scales=q.scales, zero_points=zero_points, axis=q.channel_dim)
    return QuantizedTensor(array, dims, datatype, "per_channel_group_symmetric", values,
                           scales=q.scales, zero_points=zero_points, axis=q.channel_dim,
                           group_size=q.group_size)


def _read(payload: Payload) -> Optional[XnnGraph]:
    """An ``XnnpackBackend`` delegate's graph; None for the older ``XN00`` payloads, read
    as opaque bytes."""
    if is_legacy(payload.data):
        return None
    return XnnGraph(payload.data, payload.resolve, payload.where, payload.offset,
                    payload.require_all, payload.options)


#: XNNPACK's entry in the backend registry.
BACKEND = Backend("XnnpackBackend", "XNNPACK", "xnnpack", _read)
