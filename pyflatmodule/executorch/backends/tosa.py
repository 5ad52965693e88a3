"""Arm TOSA delegate payloads: the graph a ``TOSABackend`` delegate holds, zero-copy.

A program lowered to TOSA (ExecuTorch's ``TOSAPartitioner``) keeps in the delegate's
payload the TOSA 1.0 flatbuffer that TOSABackend's preprocess has tosa-tools' serializer
write, nothing before or after it (identifier ``TOSA``, read through the project's copy of
ExecuTorch's schema, csrc/schemas/tosa.fbs). A ``TosaGraph`` holds regions of basic blocks;
a block holds its operators, its tensors and its shapes, and its operators, inputs and
outputs name them: a name is a value's identity within its block. The reader numbers the
values (:class:`TosaValue`) of every block, the tensors then the shapes, blocks and
regions in order, and gives each operator (:class:`TosaNode`) the ids of the names it
takes and gives. The C core (csrc/backends/tosa/tosa.c) checks the payload when it is
read: structure, every name a block or an operator gives (a tensor or shape of its
block, no name twice in a block), and each constant's data: at least its shape times its
element size.

Constants are the tensors (and shapes) whose data holds bytes (the serializer leaves the
others' empty): the bytes their shape takes, from the data's start (ExecuTorch writes an
int8 convolution's weight zero point, shape [1], with one byte per output channel), in
TOSA's layout as stored (convolution weights OHWI, as the serializer wrote them): the
payload does not say how a tensor was rearranged from torch's.
"""
from __future__ import annotations

from typing import Any, Dict, List, NamedTuple, Optional, Tuple

from ...core.fbread import Table, enum_names, schema_of
from ...core.lazy import np
from ...core.native import ffi, lib
from .base import Backend, Deferred, Payload, index_payload

__all__ = ["BACKEND", "TosaBlock", "TosaGraph", "TosaNode", "TosaValue"]

#: numpy dtype of each TOSA DType's elements, by the schema's name; the others (INT4 two
#: to a byte, INT48 six bytes, BF16, FP8E4M3, FP8E5M2, and UNKNOWN) have none in numpy
#: and are given as their raw bytes.
_DTYPES = {"BOOL": "?", "INT8": "i1", "INT16": "<i2", "INT32": "<i4", "FP16": "<f2",
           "FP32": "<f4", "SHAPE": "<i8"}
#: DType names by number.
DATATYPES: Dict[int, str] = enum_names(lib.tosa_d_type)
#: Op names by number.
OPS: Dict[int, str] = enum_names(lib.tosa_op)


class TosaNode(NamedTuple):
    """One operator of a basic block, in the block's order: its ``Op`` name
    (``CONV2D``), the value ids of the names it takes and gives, its attribute's type
    (``Conv2dAttribute``) and its block (an index of :attr:`TosaGraph.blocks`)."""

    kind: str
    inputs: Tuple[int, ...]
    outputs: Tuple[int, ...]
    attribute: str
    block: int


class TosaValue(NamedTuple):
    """One tensor or shape of a basic block, at its id: its name (its identity in the
    block), its kind (``tensor`` or ``shape``), its datatype (the DType's name,
    lower-cased: ``fp32``, ``int8``; ``shape`` for a shape) and dims (a shape's: its
    rank), whether its data holds a constant, and its block (an index of
    :attr:`TosaGraph.blocks`)."""

    id: int
    name: str
    kind: str
    datatype: str
    dims: Tuple[int, ...]
    constant: bool
    block: int

    @property
    def quantization(self) -> None:
        """None: TOSA keeps quantization in its operators (RESCALE), not on values."""
        return None


class TosaBlock(NamedTuple):
    """One basic block: its region's name, its name, and the value ids of its inputs
    and outputs."""

    region: str
    name: str
    input_ids: Tuple[int, ...]
    output_ids: Tuple[int, ...]


class TosaGraph:
    """The TOSA graph of one delegate payload (checked by the C core when made)."""

    def __init__(self, payload: Payload) -> None:
        self._where = payload.where + ".processed<TosaGraph>."
        summary, (records, names, _) = index_payload(
            payload, self._where, "tosa_summary", lib.tosa_open, lib.tosa_index,
            [("tosa_value", "n_values"), ("uint32_t", "n_names"), ("uint32_t", "n_slots")])
        self._payload = payload.data
        schema = schema_of(lib.TOSA_FILE_IDENTIFIER)
        self._root = Table(schema, payload.data, int(summary.root), "TosaGraph")
        self._array = records   # owns the records below (its items do not keep it alive)
        self._records = [records[i] for i in range(summary.n_values)]
        self._tables = [Table(schema, payload.data, int(r.table),
                              "TosaShape" if r.is_shape else "TosaTensor")
                        for r in self._records]
        self._blocks, self._nodes = self._walk(list(ffi.unpack(names, summary.n_names)))
        #: value id -> named data key no file given holds: none (TOSA names no data)
        self.missing: Dict[int, str] = {}

    def _walk(self, ids: List[int]) -> Tuple[List[TosaBlock], List[TosaNode]]:
        """The blocks and the operators, their names' value ids taken from ``ids`` (the
        core's, in its order: per block, its inputs, its outputs, then each operator's
        inputs and outputs)."""
        blocks: List[TosaBlock] = []
        nodes: List[TosaNode] = []
        at = 0

        def take(table: Table, field: str) -> Tuple[int, ...]:
            nonlocal at
            n = table.vector_span(field)[1]
            at += n
            return tuple(ids[at - n:at])

        for region in self._root.tables("regions"):
            for block in region.tables("blocks"):
                k = len(blocks)
                inputs = take(block, "inputs")
                blocks.append(TosaBlock(region.string("name") or "", block.string("name") or "",
                                        inputs, take(block, "outputs")))
                for op in block.tables("operators"):
                    kind, _ = op.union("attribute")
                    nodes.append(TosaNode(OPS.get(int(op.scalar("op")), str(op.scalar("op"))),
                                          take(op, "inputs"), take(op, "outputs"), kind, k))
        return blocks, nodes

    @property
    def version(self) -> str:
        """The TOSA version the writer targeted (``1.0.0``; ``-draft`` after a draft's)."""
        v = self._root.table("version")
        assert v is not None   # required by the schema (the verifier)
        draft = "-draft" if v.scalar("_draft") else ""
        return f"{v.scalar('_major')}.{v.scalar('_minor')}.{v.scalar('_patch')}{draft}"

    @property
    def blocks(self) -> List[TosaBlock]:
        """Every basic block, region by region."""
        return list(self._blocks)

    @property
    def input_ids(self) -> List[int]:
        """Value ids of the graph's inputs: its first block's (the ``main`` block of the
        ``main`` region, as ExecuTorch writes it), in the delegate call's order."""
        return list(self._blocks[0].input_ids) if self._blocks else []

    @property
    def output_ids(self) -> List[int]:
        """Value ids of the graph's outputs: its first block's, in the delegate call's
        order."""
        return list(self._blocks[0].output_ids) if self._blocks else []

    @property
    def arguments(self) -> int:
        """0: no ExecuTorch runtime reads TOSA payloads, so none bounds a call's
        arguments."""
        return 0

    @property
    def nodes(self) -> List[TosaNode]:
        """The operators, block by block, each block's in its order."""
        return list(self._nodes)

    @property
    def values(self) -> List[TosaValue]:
        """Every tensor and shape, by id."""
        out = []
        for i, (r, t) in enumerate(zip(self._records, self._tables)):
            if r.is_shape:
                out.append(TosaValue(i, t.string("name") or "", "shape", "shape",
                                     (int(t.scalar("rank")),), bool(r.constant),
                                     int(r.block)))
            else:
                out.append(TosaValue(i, t.string("name") or "", "tensor",
                                     self._datatype(t).lower(),
                                     tuple(int(d) for d in t.vector("shape")),
                                     bool(r.constant), int(r.block)))
        return out

    @staticmethod
    def _datatype(t: Table) -> str:
        """A tensor's DType name (its number for one the schema does not name)."""
        n = int(t.scalar("type"))
        return DATATYPES.get(n, str(n))

    def constant(self, i: int) -> Optional[np.ndarray]:
        """Value ``i``'s constant, None when it has none: a read-only zero-copy array of
        its shape and datatype (a shape's: its ``rank`` int64 values); for a DType numpy
        has no dtype for (INT4, INT48, BF16, FP8E4M3, FP8E5M2), or a tensor whose extent
        is undefined (unranked, a negative dimension, an UNKNOWN DType), its raw bytes
        (uint8, one dimension: all its data for the latter)."""
        r = self._records[i]
        if not r.constant:
            return None
        raw = Deferred(self._payload, int(r.data), int(r.nbytes)).array()
        t = self._tables[i]
        if r.is_shape:
            return raw.view("<i8")
        dtype = _DTYPES.get(self._datatype(t))
        if dtype is None or not r.shaped:
            return raw
        return raw.view(dtype).reshape(tuple(int(d) for d in t.vector("shape")))

    def constants(self) -> Dict[int, np.ndarray]:
        """Every constant by value id (see :meth:`constant`)."""
        out: Dict[int, np.ndarray] = {}
        for i in range(len(self._records)):
            c = self.constant(i)
            if c is not None:
                out[i] = c
        return out

    def torch_constants(self) -> Dict[int, np.ndarray]:
        """:meth:`constants`, as stored: the payload does not say how a tensor was
        rearranged from torch's layout."""
        return self.constants()

    def constant_layouts(self) -> Dict[int, Dict[str, Any]]:
        """How each constant of :meth:`constants` is stored: as the payload holds it, its
        TOSA DType and its shape."""
        return {i: {"layout": "as stored", "type": "SHAPE" if r.is_shape
                    else self._datatype(self._tables[i]), "shape": list(v.dims)}
                for (i, r), v in zip(enumerate(self._records), self.values) if r.constant}

    def named_data_keys(self) -> Dict[Tuple[int, str], str]:
        """Empty: TOSA keeps its constants in the payload."""
        return {}

    def constant_names(self) -> Dict[int, str]:
        """Empty: a TOSA tensor's name is its graph node's (``p_first_bias``,
        ``aten_convolution_default_weight_ohwi``), the placeholder's a module name with
        its dots made underscores, which cannot be told back apart from those in it."""
        return {}

    def __repr__(self) -> str:
        return (f"<TosaGraph {self.version}: {len(self._blocks)} blocks, "
                f"{len(self._nodes)} operators, {len(self._records)} values>")


#: TOSA's entry in the backend registry.
BACKEND = Backend("TOSABackend", "TOSA", "tosa", TosaGraph)
