"""Vulkan delegate payloads: the graph a ``VulkanBackend`` delegate runs, zero-copy.

A program lowered to Vulkan (ExecuTorch's ``VulkanPartitioner``) keeps its graph in the
delegate's payload: a header (``VH00``), a flatbuffer (identifier ``VK00``, read through
the project's copy of ExecuTorch's schema, csrc/schemas/vulkan.fbs) and the constant
bytes; weights the partitioner shares sit in the program's named data, by key. The C
core (csrc/backends/vulkan/vk.c) checks the payload when it is read: header, structure,
every value id an operator call, a value list or the graph's inputs and outputs name,
every tensor's datatype, constant id and the extent of its bytes.

The weights are stored as torch holds them (contiguous, the tensor's dims): the runtime
packs them for the GPU when it loads the method, so :meth:`VulkanGraph.constants` is also
torch's layout.
"""
from __future__ import annotations

from typing import Dict, List, NamedTuple, Optional, Tuple

from ...core.fbread import Table, decode_text, enum_names, schema_of
from ...core.lazy import np
from ...core.native import lib
from .base import (
    AsStoredConstants,
    Backend,
    Deferred,
    Payload,
    header_fields,
    index_payload,
    named_bytes,
)

__all__ = ["BACKEND", "VkNode", "VkValue", "VulkanGraph"]

#: numpy dtype of each VkDataType's elements, by the schema's name.
_DTYPES = {"BOOL": "?", "UINT8": "u1", "INT8": "i1", "INT32": "<i4", "FLOAT16": "<f2",
           "FLOAT32": "<f4", "FLOAT64": "<f8", "INT64": "<i8"}
#: VkDataType names by number.
DATATYPES: Dict[int, str] = enum_names(lib.vk_vk_data_type)


class VkNode(NamedTuple):
    """One operator call of the graph, in execution order: the operator's name as the
    payload holds it (``aten.convolution.default``), the value ids it takes (its results
    among them: the payload does not tell them apart) and its node id."""

    kind: str
    args: Tuple[int, ...]
    node_id: int

    @property
    def inputs(self) -> Tuple[int, ...]:
        """The value ids of its arguments (:attr:`args`, results included)."""
        return self.args

    @property
    def outputs(self) -> Tuple[int, ...]:
        """Empty: the payload keeps every operand in :attr:`args`."""
        return ()


class VkValue(NamedTuple):
    """One value of the graph, at its id: its kind (``VkTensor``, ``Int``, ``IntList``,
    ...); a tensor's datatype (the schema's name, lower-cased) and dims, and whether it
    has constant bytes; another value's datatype is its kind."""

    id: int
    kind: str
    datatype: str
    dims: Tuple[int, ...]
    constant: bool

    @property
    def quantization(self) -> None:
        """None: the payload keeps no quantization parameters on a value."""
        return None


class VulkanGraph(AsStoredConstants):
    """The Vulkan graph of one delegate payload (checked by the C core when made).

    Named data the payload names must be in the program or in the data files given to
    ``load`` when some were given (else FormatError ``missing_data``); without data files,
    constants whose named data the program lacks are listed in :attr:`missing`."""

    def __init__(self, payload: Payload) -> None:
        self._where = payload.where + ".processed<VkGraph>."
        summary, (records,) = index_payload(payload, self._where, "vk_summary", lib.vk_open,
                                            lib.vk_index, [("vk_constant", "n_values")])
        self._payload = payload.data
        self._summary = summary
        self._array = records   # owns the records below (its items do not keep it alive)
        self._records = [records[i] for i in range(summary.n_values)]
        self._root = Table(schema_of(lib.VK_FILE_IDENTIFIER), payload.data,
                           int(summary.root), "VkGraph")
        #: value id -> the named data key of its constant that no file given holds
        self.missing: Dict[int, str] = {}
        self._bytes = self._resolve(payload)

    def _resolve(self, payload: Payload) -> Dict[int, Deferred]:
        """The bytes of every constant, by value id: inline in the payload, or the named
        data each key names (at least the tensor's bytes), their extents checked now."""
        out: Dict[int, Deferred] = {}
        for i, r in enumerate(self._records):
            if r.index < 0:
                continue
            if r.key:
                key = decode_text(self._payload, int(r.key), int(r.key_len))
                raw = named_bytes(payload.resolve, key, int(r.nbytes), payload.require_all,
                                  payload.offset + int(r.key), f"{self._where}values[{i}]",
                                  f"Vulkan constant of value {i}")
                if raw is None:
                    self.missing[i] = key
                    continue
            else:
                raw = Deferred(self._payload, int(r.data), int(r.nbytes))
            out[i] = raw
        return out

    @property
    def header(self) -> Dict[str, int]:
        """The payload's VH00 header: the flatbuffer's and the constant bytes' offset and
        size in the payload."""
        return header_fields(self._summary.header)

    @property
    def version(self) -> str:
        """The version string the writer put in."""
        return self._root.string("version") or ""

    @property
    def input_ids(self) -> List[int]:
        """Value ids of the graph's inputs, in the delegate call's order."""
        return [int(i) for i in self._root.vector("input_ids")]

    @property
    def output_ids(self) -> List[int]:
        """Value ids of the graph's outputs, in the delegate call's order."""
        return [int(i) for i in self._root.vector("output_ids")]

    @property
    def arguments(self) -> int:
        """0: the runtime checks a call's argument count against the graph itself."""
        return 0

    @property
    def nodes(self) -> List[VkNode]:
        """The operator calls, in execution order."""
        return [VkNode(call.string("name") or "", tuple(int(a) for a in call.vector("args")),
                       int(call.scalar("node_id")))
                for call in self._root.tables("chain")]

    @property
    def values(self) -> List[VkValue]:
        """Every value, by id."""
        out = []
        for i, t in enumerate(self._root.tables("values")):
            kind, v = t.union("value")
            if kind == "VkTensor" and v is not None:
                out.append(VkValue(i, kind, DATATYPES[int(v.scalar("datatype"))].lower(),
                                   tuple(int(d) for d in v.vector("dims")),
                                   self._records[i].index >= 0))
            else:
                out.append(VkValue(i, kind, kind, (), False))
        return out

    def constant(self, i: int) -> Optional[np.ndarray]:
        """Value ``i``'s constant, None when it has none (or it is :attr:`missing`): a
        read-only zero-copy array of its dims and datatype."""
        raw = self._bytes.get(i)
        if raw is None:
            return None
        t = self._root.tables("values")[i].union("value")[1]
        assert t is not None   # a value with constant bytes is a tensor (the core's index)
        dtype = _DTYPES[DATATYPES[int(t.scalar("datatype"))]]
        return raw.array().view(dtype).reshape(tuple(int(d) for d in t.vector("dims")))

    def named_data_keys(self) -> Dict[Tuple[int, str], str]:
        """The named data key of each constant kept in named data, by (value id,
        ``"constant"``)."""
        return {(i, "constant"): decode_text(self._payload, int(r.key), int(r.key_len))
                for i, r in enumerate(self._records) if r.index >= 0 and r.key}

    def constant_names(self) -> Dict[int, str]:
        """Empty: Vulkan keys a constant's named data by the SHA-256 of its bytes and
        gives no other name."""
        return {}

    def __repr__(self) -> str:
        return (f"<VulkanGraph: {len(self._root.tables('chain'))} nodes, "
                f"{len(self._records)} values>")


#: Vulkan's entry in the backend registry.
BACKEND = Backend("VulkanBackend", "Vulkan", "vulkan", VulkanGraph)
