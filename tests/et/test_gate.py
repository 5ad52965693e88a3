"""A program pyflatmodule verifies is one ExecuTorch's runtime can take: the fields the
runtime requires are required here too.

Each case makes one field absent in a real ExecuTorch-written file (tests/data/et: the
table gets a private copy of its vtable with the field's slot zeroed, walked by hand in
support.fbwalk), and checks that pyflatmodule refuses the file with ``missing_field``
located at the table. With executorch installed, ExecuTorch 1.5.1's runtime is asked too,
in a child, at both verification levels: it must not load the file either (it refuses
it, crashes, the reason for the rule, or reports the field missing). The runtime's
reading decides what is required, so a case the runtime loaded would be a file refused
here that is valid there.
"""
from __future__ import annotations

import json
import os
import struct
from typing import Dict, List, Optional, Tuple

import pytest

import pyflatmodule as pfm

from support.checked import load_full
from support.fbwalk import deref, element, field, grow, root, slot, u32, zero_slot
from support.paths import DATA, ET, WILD
from support.runtime import HAS_RUNTIME, runtime_verdicts


def _read(name: str) -> bytes:
    with open(os.path.join(ET, name), "rb") as f:
        return f.read()


MLP, CONV, PTE, PTD, SPECS = (_read(n) for n in (
    "mlp.pte", "xnn_conv.pte", "external.pte", "external.ptd", "xnnpack_specs.pte"))
#: the second compile spec of SPECS' delegate (Program field 1, ExecutionPlan field 7,
#: BackendDelegate field 2)
SPEC = element(SPECS, element(SPECS, element(SPECS, root(SPECS), 1, 0), 7, 0), 2, 1)


def _value(data: bytes, plan: int, kind: int) -> Tuple[int, int]:
    """(index, table position of the payload) of the first value of union member
    ``kind`` in the plan's values (KernelTypes: Tensor 5, IntList 7)."""
    values = deref(data, field(data, plan, 2))
    for i in range(u32(data, values)):
        ev = deref(data, values + 4 + 4 * i)
        if field(data, ev, 0) and data[field(data, ev, 0)] == kind:
            return i, deref(data, field(data, ev, 1))
    raise AssertionError(f"no value of kind {kind}")


def _cases() -> List[Tuple[str, bytes, Optional[bytes], str, int, int]]:
    """(id, file, its data file or None, path, table, field id) per required field.
    Field ids are positions in ExecuTorch's program.fbs / flat_tensor.fbs."""
    out = []
    plan = element(MLP, root(MLP), 1, 0)       # Program.execution_plan[0]
    at = "execution_plan[0]"
    for name, fid in (("name", 0), ("values", 2), ("inputs", 3), ("outputs", 4),
                      ("non_const_buffer_sizes", 8)):
        out.append((f"plan.{name}", MLP, None, f"{at}.{name}", plan, fid))
    values = deref(MLP, field(MLP, plan, 2))
    ev = deref(MLP, values + 4)
    out.append(("evalue.val", MLP, None, f"{at}.values[0].val", ev, 1))
    i, tensor = _value(MLP, plan, 5)
    for name, fid in (("sizes", 2), ("dim_order", 3)):
        out.append((f"tensor.{name}", MLP, None, f"{at}.values[{i}].val<Tensor>.{name}",
                    tensor, fid))
    i, ints = _value(MLP, plan, 7)
    out.append(("intlist.items", MLP, None, f"{at}.values[{i}].val<IntList>.items", ints, 0))
    out.append(("operator.name", MLP, None, f"{at}.operators[0].name",
                element(MLP, plan, 6, 0), 0))
    conv = element(CONV, root(CONV), 1, 0)
    out.append(("delegate.id", CONV, None, "execution_plan[0].delegates[0].id",
                element(CONV, conv, 7, 0), 0))
    for name, fid in (("key", 0), ("value", 1)):
        out.append((f"compile_spec.{name}", SPECS, None,
                    f"{at}.delegates[0].compile_specs[1].{name}", SPEC, fid))
    flat = root(PTD)
    for name, fid in (("segments", 1), ("named_data", 2)):
        out.append((f"ptd.{name}", PTE, PTD, f"data[0].{name}", flat, fid))
    named = element(PTD, flat, 2, 0)
    out.append(("ptd.key", PTE, PTD, "data[0].named_data[0].key", named, 0))
    layout = deref(PTD, field(PTD, named, 2))
    for name, fid in (("sizes", 1), ("dim_order", 2)):
        out.append((f"ptd.layout.{name}", PTE, PTD,
                    f"data[0].named_data[0].tensor_layout.{name}", layout, fid))
    return out


CASES = _cases()


def _absent(data: bytes, table: int, fid: int) -> bytes:
    """The file with the field absent, its vtable copy in room made at the end of the
    flatbuffer (the readers take vtables inside the flatbuffer only). The headers, from
    the bytes: .pte's eh00 at 8 holds the program size (u64 at 16) and where segments
    start (24); .ptd's FH01 at 8 the flatbuffer's offset (16) and size (24) and where
    segments start (32)."""
    if data[8:12] == b"eh00":
        end, sizes = struct.unpack_from("<Q", data, 16)[0], (16, 24)
    else:
        assert data[8:12] == b"FH01"
        end, sizes = sum(struct.unpack_from("<QQ", data, 16)), (24, 32)
    return zero_slot(grow(data, end, sizes), table, fid, spare=end)


def _mutant(case: Tuple[str, bytes, Optional[bytes], str, int, int]
            ) -> Tuple[bytes, Optional[bytes]]:
    _, program, data, _, table, fid = case
    if data is None:
        return _absent(program, table, fid), None
    return program, _absent(data, table, fid)


def _load(program: bytes, data: Optional[bytes]) -> None:
    with load_full(program, data=[data] if data is not None else []):
        pass


def test_the_files_themselves_load_here_and_in_the_runtime() -> None:
    files = [(MLP, None), (CONV, None), (PTE, PTD), (SPECS, None)]
    for program, data in files:
        _load(program, data)
    if HAS_RUNTIME:
        got = runtime_verdicts(files)
        assert [v["verdict"] for v in got] == ["ok"] * len(got), got


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_a_field_the_runtime_requires_is_required(
        case: Tuple[str, bytes, Optional[bytes], str, int, int]) -> None:
    program, data = _mutant(case)
    with pytest.raises(pfm.FormatError) as e:
        _load(program, data)
    assert e.value.code == "missing_field", e.value
    assert e.value.path == case[3], e.value
    assert e.value.offset == case[4], e.value


@pytest.mark.skipif(not HAS_RUNTIME, reason="needs executorch's runtime")
def test_the_runtime_does_not_load_them_either() -> None:
    got = runtime_verdicts([_mutant(c) for c in CASES])
    loaded: Dict[str, List[str]] = {}
    for i, v in enumerate(got):
        # an operator without its name loads, but the runtime logs it missing (and its
        # kernel is never found: the method cannot run)
        if v["verdict"] == "ok" and "Missing" not in v["detail"]:
            loaded.setdefault(CASES[i // 2][0], []).append(v["detail"])
    # A compile spec without its key: Method::init hands the backend key()->c_str() of a
    # null string, the pointer 4, without reading it; XNNPACK 1.5.1 never reads its
    # specs, so this program loads, and any backend that reads its keys reads address 4.
    loaded.pop("compile_spec.key", None)
    assert not loaded, loaded


def test_a_data_file_dim_order_shorter_than_its_sizes() -> None:
    """The runtime's data map reads as many dim_order entries as there are sizes
    (flat_tensor_data_map.cpp, create_tensor_layout): a shorter one is refused."""
    named = element(PTD, root(PTD), 2, 0)
    layout = deref(PTD, field(PTD, named, 2))
    order = deref(PTD, field(PTD, layout, 2))
    assert u32(PTD, order) > 0
    out = bytearray(PTD)
    struct.pack_into("<I", out, order, 0)
    with pytest.raises(pfm.FormatError) as e:
        _load(PTE, bytes(out))
    assert e.value.code == "bad_dim_order"
    assert e.value.path == "data[0].named_data[0].tensor_layout"


def _graphs(data: bytes) -> List[int]:
    """The XNNGraph table of each of xnn_conv.pte's XNNPACK payloads, found from the
    bytes: ExecuTorch's reading (the oracle) gives each delegate's segment; the payload's
    XH00 header (u32 flatbuffer offset at 10) the graph."""
    with open(os.path.join(ET, "xnn_conv.oracle.json")) as f:
        doc = json.load(f)
    base = doc["header"]["segment_base_offset"]
    out = []
    for delegate in doc["program"]["execution_plan"][0]["delegates"]:
        offset, _ = doc["program"]["segments"][delegate["index"]]
        payload = base + offset
        assert data[payload + 4:payload + 8] == b"XH00"
        fb = payload + u32(data, payload + 10)
        out.append(fb + u32(data, fb))
    return out


def _nodes(data: bytes, member: int) -> List[Tuple[int, int]]:
    """(XNode table, node table) of each node of union member ``member`` (XNNConv2d 7,
    XNNFullyConnected 2, XNNStaticTranspose 5) in xnn_conv.pte's XNNPACK payloads
    (XNNGraph.xnodes is field 1, XNode's union type and value fields 0 and 1)."""
    out = []
    for graph in _graphs(data):
        nodes = deref(data, field(data, graph, 1))
        for i in range(u32(data, nodes)):
            xnode = deref(data, nodes + 4 + 4 * i)
            if data[field(data, xnode, 0)] == member:
                out.append((xnode, deref(data, field(data, xnode, 1))))
    return out


def _set_u32(data: bytes, at: int, value: int) -> bytes:
    out = bytearray(data)
    struct.pack_into("<I", out, at, value)
    return bytes(out)


#: _XNNNodeConv's parameters a filter's size depends on (field ids in the schema).
CONV_PARAMETERS = {"kernel_height": 4, "kernel_width": 5, "group_input_channels": 10,
                   "group_output_channels": 11, "groups": 12}


@pytest.mark.parametrize("name", list(CONV_PARAMETERS))
def test_a_convolution_whose_parameters_disagree_with_its_filter(name: str) -> None:
    """XNNPACK packs a convolution's weights by the node's parameters, not by the filter's
    shape: a kernel one wider than its filter reads past the filter's bytes."""
    nodes = _nodes(CONV, 7)
    assert nodes, "xnn_conv.pte has convolutions"
    _, node = nodes[0]
    at = field(CONV, node, CONV_PARAMETERS[name])
    assert at, f"the writer stores {name}"
    out = bytearray(CONV)
    struct.pack_into("<I", out, at, u32(CONV, at) + 1)
    with pytest.raises(pfm.FormatError) as e:
        _load(bytes(out), None)
    assert e.value.code == "bad_node", e.value
    assert e.value.offset == node, e.value
    assert e.value.path.endswith("xnode_union<XNNConv2d>"), e.value


def _refused_at_node(data: bytes, node: int, path_end: str) -> None:
    with pytest.raises(pfm.FormatError) as e:
        _load(data, None)
    assert e.value.code == "bad_node", e.value
    assert e.value.path.endswith(path_end), e.value


def test_a_node_that_writes_a_graph_input_or_a_constant() -> None:
    """XNNStaticTranspose (input_id 2, output_id 3) made to write value 0, the graph's
    input (XNNTensorValue flags: external input), or the convolution's filter."""
    (xnode, node), *_ = _nodes(CONV, 5)
    _, conv = _nodes(CONV, 7)[0]
    at = field(CONV, node, 3)
    assert at and u32(CONV, at) != 0
    _refused_at_node(_set_u32(CONV, at, 0), node, "xnode_union<XNNStaticTranspose>.output_id")
    filter_id = u32(CONV, field(CONV, conv, 16))
    _refused_at_node(_set_u32(CONV, at, filter_id), node,
                     "xnode_union<XNNStaticTranspose>.output_id")


def _clamped(high: float) -> bytes:
    """CONV with its convolution's output_min_max (XNode field 3: output_min absent, so
    0, output_max inf) given another max."""
    xnode, _ = _nodes(CONV, 7)[0]
    clamp = deref(CONV, field(CONV, xnode, 3))
    at = field(CONV, clamp, 1)
    assert at and not field(CONV, clamp, 0)
    out = bytearray(CONV)
    struct.pack_into("<f", out, at, high)
    return bytes(out)


def test_a_clamp_whose_min_is_above_its_max() -> None:
    """XNNPACK refuses a clamp whose min is above its max, or NaN; one of min == max (the
    gate's fidelity campaign: the runtime loads and runs it) opens."""
    xnode, _ = _nodes(CONV, 7)[0]
    _load(_clamped(0.0), None)
    _refused_at_node(_clamped(-1.0), xnode, "output_min_max")
    _refused_at_node(_clamped(float("nan")), xnode, "output_min_max")


@pytest.mark.skipif(not HAS_RUNTIME, reason="needs executorch's runtime")
def test_the_runtime_takes_a_clamp_of_min_equal_to_max_only() -> None:
    got = runtime_verdicts([(_clamped(high), None) for high in (0.0, -1.0, float("nan"))])
    assert [v["verdict"] for v in got] == ["ok"] * 2 + ["refused"] * 4, got


def test_a_fully_connected_bias_of_the_wrong_length() -> None:
    """XNNFullyConnected (input1_id 0, filter_id 1, bias_id 2) given its input as bias:
    8 elements for 4 output channels."""
    _, fc = _nodes(CONV, 2)[0]
    at = field(CONV, fc, 2)
    input_id = u32(CONV, field(CONV, fc, 0)) if field(CONV, fc, 0) else 0
    assert at and u32(CONV, at) != input_id
    _refused_at_node(_set_u32(CONV, at, input_id), fc, "xnode_union<XNNFullyConnected>")


def test_a_node_that_writes_a_value_written_before() -> None:
    """The depthwise convolution (node 2, output_id field 18) made to write the
    convolution's output (node 1), which it reads: two writers of one value, refused at
    the second."""
    _, conv = _nodes(CONV, 7)[0]
    conv_out = u32(CONV, field(CONV, conv, 18))
    (_, depthwise), *_ = _nodes(CONV, 13)
    _refused_at_node(_set_u32(CONV, field(CONV, depthwise, 18), conv_out), depthwise,
                     "xnodes[2].xnode_union<XNNDepthwiseConv2d>.output_id")


def test_a_node_that_reads_a_value_not_yet_written() -> None:
    """The convolution (node 1, input1_id field 15) made to read the depthwise
    convolution's output (node 2): XNNPACK runs nodes in order, so it would read memory no
    node has written yet; and reading its own output, a cycle."""
    _, conv = _nodes(CONV, 7)[0]
    conv_out = u32(CONV, field(CONV, conv, 18))
    later = [n for _, n in _nodes(CONV, 13)][0]   # XNNDepthwiseConv2d
    depthwise_out = u32(CONV, field(CONV, later, 18))
    for target in (depthwise_out, conv_out):
        _refused_at_node(_set_u32(CONV, field(CONV, conv, 15), target), conv,
                         "xnodes[1].xnode_union<XNNConv2d>.input1_id")


# ----------------------------------------- the campaign's findings (tests/data/gate)

GATE = os.path.join(DATA, "gate")
FINDINGS = sorted(f[:-5] for f in os.listdir(GATE) if f.endswith(".json"))


def _finding(stem: str) -> Tuple[Dict[str, object], bytes, Optional[bytes]]:
    """A campaign input, ExecuTorch's verdict on it (the .json beside it), and the
    program and data file it is handed to the runtime as."""
    with open(os.path.join(GATE, stem + ".json")) as f:
        doc = json.load(f)
    (name,) = [n for n in os.listdir(GATE) if n.startswith(stem + ".") and
               not n.endswith(".json")]
    with open(os.path.join(GATE, name), "rb") as f:
        raw = f.read()
    if name.endswith(".ptd"):
        return doc, PTE, raw
    return doc, raw, PTD if "external" in str(doc["seed_file"]) else None


def _stages(doc: Dict[str, object]) -> List[str]:
    runtime = doc["runtime"]
    assert isinstance(runtime, dict)
    return [v["stage"] for v in runtime.values() if v["verdict"] != "ok"]


LOADING = [s for s in FINDINGS if any(st in ("load_program", "load_method")
                                      for st in _stages(_finding(s)[0]))
           and "non_const_buffer_sizes" not in s]


@pytest.mark.parametrize("stem", LOADING)
def test_an_input_the_runtime_crashes_on_while_loading_is_refused(stem: str) -> None:
    """Each input the campaign found (accepted here then, while the runtime crashed on it
    in load_program or load_method): refused now, or, for a program whose XNNPACK named
    data is gone, reported incomplete (``missing_data``: docs/verified.md)."""
    doc, program, data = _finding(stem)
    try:
        with pfm.load(program, data=[data] if data is not None else []) as p:
            assert isinstance(p, pfm.Program) and p.missing_data, (stem, doc["runtime"])
    except pfm.FormatError:
        pass


@pytest.mark.parametrize("stem", [s for s in FINDINGS if "non_const_buffer_sizes" in s])
def test_a_buffer_the_runtime_cannot_allocate_is_shown(stem: str) -> None:
    """The runtime ran out of memory (4 GiB allowed) allocating a planned buffer, or took
    past the campaign's timeout: not refused (docs/verified.md: the machine's memory is
    not the file's), but the plan shows the buffer it asked for."""
    doc, program, data = _finding(stem)
    verdicts = [v["verdict"] for v in doc["runtime"].values()]  # type: ignore[union-attr]
    assert "oom" in verdicts or "hang" in verdicts
    with pfm.load(program, data=[data] if data is not None else []) as p:
        sizes = [b for m in p.methods.values() for b in m.memory_plan().buffer_sizes]
    assert max(sizes) >= 4 << 30


def test_a_vector_element_offset_of_zero_is_a_table_at_the_element() -> None:
    """FlatBuffers' verifier refuses an offset of 0 in a field, but follows one in a
    vector's element: the table starts at the element, its soffset 0 puts its vtable
    there too, and that vtable's size, 0, gives it no fields. xnn_conv.pte's first XNNPACK
    graph with constant_data[0] (XNNGraph field 8; entry 0 is the placeholder no tensor
    names) so made: it opens, and strict mode names the offset."""
    graph = _graphs(CONV)[0]
    entries = deref(CONV, field(CONV, graph, 8))
    assert u32(CONV, entries) > 1
    program = _set_u32(CONV, entries + 4, 0)
    _load(program, None)
    with pytest.raises(pfm.FormatError) as e:
        pfm.verify(program, strict=True)
    assert e.value.code == "zero_offset" and e.value.offset == entries + 4, e.value


@pytest.mark.skipif(not HAS_RUNTIME, reason="needs executorch's runtime")
def test_the_runtime_runs_a_vector_element_offset_of_zero() -> None:
    graph = _graphs(CONV)[0]
    entries = deref(CONV, field(CONV, graph, 8))
    got = runtime_verdicts([(_set_u32(CONV, entries + 4, 0), None)])
    assert [v["verdict"] for v in got] == ["ok", "ok"], got


def _nul_cases() -> List[Tuple[str, bytes, Optional[bytes], int, str]]:
    """(id, program, data file or None, string position, path) of each kind of name the
    runtime reads as a C string, in real files: a delegate id (BackendDelegate field 0),
    a compile spec's key (BackendDelegate field 2, CompileSpec field 0),
    an operator's name and overload (Operator fields 0 and 1), an external tensor's name
    (Tensor field 9, ExtraTensorInfo field 1) and an XNNPACK constant's named key
    (XNNGraph.constant_data field 8, ConstantDataOffset.named_key field 2)."""
    conv = element(CONV, root(CONV), 1, 0)
    mlp = element(MLP, root(MLP), 1, 0)
    out = [("delegate.id", CONV, None, deref(CONV, field(CONV, element(CONV, conv, 7, 0), 0)),
            "execution_plan[0].delegates[0].id")]
    out.append(("compile_spec.key", SPECS, None, deref(SPECS, field(SPECS, SPEC, 0)),
                "execution_plan[0].delegates[0].compile_specs[1].key"))
    for name, fid in (("name", 0), ("overload", 1)):
        out.append((f"operator.{name}", MLP, None,
                    deref(MLP, field(MLP, element(MLP, mlp, 6, 0), fid)),
                    f"execution_plan[0].operators[0].{name}"))
    i, tensor = _value(PTE, element(PTE, root(PTE), 1, 0), 5)
    extra = deref(PTE, field(PTE, tensor, 9))
    out.append(("external.name", PTE, PTD, deref(PTE, field(PTE, extra, 1)),
                f"execution_plan[0].values[{i}].val<Tensor>.extra_tensor_info"
                ".fully_qualified_name"))
    entries = deref(CONV, field(CONV, _graphs(CONV)[0], 8))
    tables = [deref(CONV, entries + 4 + 4 * k) for k in range(u32(CONV, entries))]
    named = [deref(CONV, field(CONV, t, 2)) for t in tables if field(CONV, t, 2)]
    out.append(("xnnpack.named_key", CONV, None, [k for k in named if u32(CONV, k)][0],
                "named_key"))
    return out


NUL_CASES = _nul_cases()


def _with_a_nul(case: Tuple[str, bytes, Optional[bytes], int, str]) -> Tuple[bytes, bool]:
    """The case's program with a NUL inside its string, and whether the string was made
    one byte longer, over the NUL that ends it (when the writer's padding ends it at the
    next byte too), or else had its first byte made NUL."""
    _, program, _, at, _ = case
    n = u32(program, at)
    assert n > 0 and program[at + 4 + n] == 0, case[0]
    if program[at + 5 + n] == 0:
        return _set_u32(program, at, n + 1), True
    out = bytearray(program)
    out[at + 4] = 0
    return bytes(out), False


#: Names refused with a NUL inside by default: a delegate id (one with bytes after a NUL
#: crashed the runtime's load_method in the campaign), and the names pyflatmodule itself
#: resolves whole (an external tensor's, an XNNPACK constant's named key), where the
#: runtime would find the data of the name up to the NUL. The others the runtime reads
#: up to their NUL, and loads (test_the_runtime_reads_those_names_up_to_their_nul): they
#: open, and strict mode refuses them.
REFUSED_NAMES = ("delegate.id", "external.name", "xnnpack.named_key")


@pytest.mark.parametrize("case", NUL_CASES, ids=[c[0] for c in NUL_CASES])
def test_a_name_the_runtime_reads_as_a_c_string_with_a_nul_inside(
        case: Tuple[str, bytes, Optional[bytes], int, str]) -> None:
    """The runtime reads these names as C strings (strcmp, snprintf "%s", or a
    string_view of their strlen): a NUL inside makes it look up the name up to the NUL.
    Refused at the string where that would harm (REFUSED_NAMES), else in strict mode."""
    program, _ = _with_a_nul(case)
    data = [case[2]] if case[2] is not None else []
    if case[0] not in REFUSED_NAMES:
        _load(program, case[2])
    with pytest.raises(pfm.FormatError) as e:
        if case[0] in REFUSED_NAMES:
            _load(program, case[2])
        else:
            pfm.verify(program, data=data, strict=True)
    assert e.value.code == "nul_in_name", e.value
    assert e.value.path.endswith(case[4]), e.value
    assert e.value.offset == case[3] + 4, e.value


@pytest.mark.skipif(not HAS_RUNTIME, reason="needs executorch's runtime")
def test_the_runtime_reads_those_names_up_to_their_nul() -> None:
    """A name made longer over its NUL: the runtime finds the backend, kernel or data of
    the name without that byte, and loads; one whose first byte is NUL (the overload:
    "aten::permute_copy." is looked up) it refuses."""
    mutants = [_with_a_nul(c) for c in NUL_CASES]
    got = runtime_verdicts([(m, c[2]) for (m, _), c in zip(mutants, NUL_CASES)])
    want = [v for _, longer in mutants for v in ["ok" if longer else "refused"] * 2]
    assert [v["verdict"] for v in got] == want, got


# ------------------------------------------------- XNNPACK external values and their calls

def _external_cases() -> List[Tuple[str, bytes, int, str]]:
    """(id, mutant of xnn_conv.pte, offset, path end) per rule on the first graph's
    external values: its output (xvalues[8], external id 1 of num_externs 2; XNNTensorValue
    external_id field 4, flags field 5) given an id past num_externs, none (~0), the
    input's (0), or a flag XNNPACK does not define (4); num_externs (XNNGraph field 3)
    past the 4096 XNNCompiler.cpp takes."""
    graph = _graphs(CONV)[0]
    values = deref(CONV, field(CONV, graph, 2))
    output = deref(CONV, field(CONV, deref(CONV, values + 4 + 4 * 8), 1))
    ext, flags, count = field(CONV, output, 4), field(CONV, output, 5), field(CONV, graph, 3)
    assert (u32(CONV, ext), u32(CONV, flags), u32(CONV, count)) == (1, 2, 2)
    at = "xvalues[8].xvalue_union<XNNTensorValue>."
    return [("id_past_num_externs", _set_u32(CONV, ext, 2), ext, at + "external_id"),
            ("id_none", _set_u32(CONV, ext, 0xFFFFFFFF), ext, at + "external_id"),
            ("id_repeated", _set_u32(CONV, ext, 0), ext, at + "external_id"),
            ("other_flags", _set_u32(CONV, flags, 6), flags, at + "flags"),
            ("num_externs_past_4096", _set_u32(CONV, count, 4097), count,
             "processed<XNNGraph>.num_externs")]


EXTERNAL_CASES = _external_cases()


@pytest.mark.parametrize("case", EXTERNAL_CASES, ids=[c[0] for c in EXTERNAL_CASES])
def test_an_external_value_the_runtime_cannot_place(case: Tuple[str, bytes, int, str]) -> None:
    """XNNPACK refuses an external id past num_externs, XNNCompiler.cpp other flags and
    more than 4096 externals; an external value without an id makes XNNExecutor read
    delegate argument 2^32-1 when run (tests/data/gate/execute-crash-XNNTensorValue_
    external_id-scalar); one whose id another value has redefines that value's slot."""
    _, data, offset, path_end = case
    with pytest.raises(pfm.FormatError) as e:
        _load(data, None)
    assert e.value.code == "bad_external", e.value
    assert e.value.path.endswith(path_end), e.value
    assert e.value.offset == offset, e.value


@pytest.mark.skipif(not HAS_RUNTIME, reason="needs executorch's runtime")
def test_the_runtime_refuses_the_externals_it_checks() -> None:
    """The runtime's own checks, at load_method: an id past num_externs, another flag and
    too many externals are refused there too (the rules agree with it)."""
    checked = [c for c in EXTERNAL_CASES if c[0] in ("id_past_num_externs", "other_flags",
                                                     "num_externs_past_4096")]
    got = runtime_verdicts([(c[1], None) for c in checked])
    assert [v["verdict"] for v in got] == ["refused"] * len(got), got


def test_a_delegate_call_with_fewer_arguments_than_its_graph_reads() -> None:
    """xnn_conv.pte's first instruction calls the first XNNPACK graph (external ids 0 and
    1) with two arguments (ExecutionPlan.chains field 5, Chain.instructions 2,
    Instruction.instr_args 1, DelegateCall.args 1); with one, XNNExecutor would read
    argument 1 past the call's (tests/data/gate/execute-crash-DelegateCall_args-
    vector_length). Refused at the arguments."""
    plan = element(CONV, root(CONV), 1, 0)
    instruction = element(CONV, element(CONV, plan, 5, 0), 2, 0)
    args = deref(CONV, field(CONV, deref(CONV, field(CONV, instruction, 1)), 1))
    assert u32(CONV, args) == 2
    with pytest.raises(pfm.FormatError) as e:
        _load(_set_u32(CONV, args, 1), None)
    assert e.value.code == "bad_external", e.value
    assert e.value.path == ("execution_plan[0].chains[0].instructions[0]"
                            ".instr_args<DelegateCall>.args")
    assert e.value.offset == args, e.value


@pytest.mark.parametrize("stem", [s for s in FINDINGS if s.startswith("execute-") and
                                  ("external_id" in s or "DelegateCall_args" in s)])
def test_an_input_the_runtime_crashes_on_when_run_is_refused_when_the_format_says(
        stem: str) -> None:
    """The campaign's inputs that crash the runtime when run because a graph's external
    value has no id, or a delegate call passes fewer arguments than its graph reads:
    refused now (``bad_external``)."""
    doc, program, data = _finding(stem)
    assert "crash" in [v["verdict"] for v in doc["runtime"].values()]  # type: ignore[union-attr]
    with pytest.raises(pfm.FormatError) as e:
        _load(program, data)
    assert e.value.code == "bad_external", e.value


MUTABLE = _read("mutable_init.pte")
#: segments[1] (Program field 4, DataSegment field 1: size), the mutable data segment
MUTABLE_SIZE = field(MUTABLE, element(MUTABLE, root(MUTABLE), 4, 1), 1)


def _segment_size(size: int) -> bytes:
    out = bytearray(MUTABLE)
    struct.pack_into("<Q", out, MUTABLE_SIZE, size)
    return bytes(out)


def _initial_bytes(program: pfm.Program) -> List[bytes]:
    return [v.initial.tobytes() for m in program.methods.values() for v in m.values
            if isinstance(v, pfm.TensorSpec) and v.initial is not None]


@pytest.mark.parametrize("size", [0x28, (1 << 64) - 0x18])
def test_a_mutable_data_segment_sized_past_the_file(size: int) -> None:
    """The runtime reads a mutable tensor's first values alone, bounded by its segment's
    size and the file (``Program::load_mutable_subsegment_into``), never the segment
    whole: a segment sized past the file opens, with the same first values; strict mode
    names the size."""
    assert struct.unpack_from("<Q", MUTABLE, MUTABLE_SIZE)[0] == 0x18
    with load_full(_segment_size(size)) as p, load_full(MUTABLE) as q:
        assert _initial_bytes(p) == _initial_bytes(q) != []
        assert p.regions()[-1].end == p.size
    with pytest.raises(pfm.FormatError) as e:
        pfm.load(_segment_size(size), strict=True)
    assert (e.value.code, e.value.path) == ("bad_segment", "segments[1]")


@pytest.mark.skipif(not HAS_RUNTIME, reason="needs executorch's runtime")
def test_the_runtime_takes_a_mutable_data_segment_sized_past_the_file() -> None:
    got = runtime_verdicts([(_segment_size(s), None) for s in (0x28, (1 << 64) - 0x18)])
    assert [v["verdict"] for v in got] == ["ok"] * 4, got


def _unused_segment_at(offset: int) -> bytes:
    """CONV with segments[0], which no one uses (its constant segment holds no constants,
    only buffer 0's placeholder: the runtime never loads it), given a table of its own in
    room made at the end of the flatbuffer: offset ``offset``, size 16."""
    end = struct.unpack_from("<Q", CONV, 16)[0]
    assert CONV[8:12] == b"eh00" and end % 8 == 0
    out = bytearray(grow(CONV, end, (16, 24)))
    # the vtable (8 bytes: fields offset at +8, size at +16), then the 24-byte table
    struct.pack_into("<HHHH", out, end, 8, 24, 8, 16)
    table = end + 8
    struct.pack_into("<iIQQ", out, table, table - end, 0, offset, 16)
    constant = deref(CONV, field(CONV, root(CONV), 5))
    offsets = deref(CONV, field(CONV, constant, 1))
    assert u32(CONV, offsets) == 1      # the placeholder alone
    vector = deref(CONV, field(CONV, root(CONV), 4))
    struct.pack_into("<I", out, vector + 4, table - (vector + 4))
    return bytes(out)


def test_a_segment_no_one_uses_may_lie_past_the_file() -> None:
    """The runtime loads a segment when a constant, a delegate or named data needs it:
    one nobody uses may say anything (strict mode names it)."""
    inside = _unused_segment_at(0)
    load_full(inside).close()
    for offset in (len(CONV), 1 << 40):
        with load_full(_unused_segment_at(offset)) as p:
            assert p.regions()[-1].end == p.size
        with pytest.raises(pfm.FormatError) as e:
            pfm.load(_unused_segment_at(offset), strict=True)
        assert (e.value.code, e.value.path) == ("bad_segment", "segments[0]")


@pytest.mark.skipif(not HAS_RUNTIME, reason="needs executorch's runtime")
def test_the_runtime_takes_a_segment_no_one_uses_past_the_file() -> None:
    got = runtime_verdicts([(_unused_segment_at(o), None) for o in (0, len(CONV), 1 << 40)])
    assert [v["verdict"] for v in got] == ["ok"] * 6, got


WILD_ID = os.path.join(WILD, "berry_id.pte")


def _nameless_unused_operator() -> bytes:
    """The fidelity campaign's finding (seed 20261205, mutant 19927): berry_id.pte (an
    identity: its plan has no instructions) with the plan's vtable slot of ``operators``
    (field 6) made the slot of ``inputs`` (field 3). ``inputs`` is [0]: read as a vector
    of tables, its element is an offset of 0, a table at the element whose vtable is
    itself, of size 0: an operator without a name, which no kernel call names."""
    with open(WILD_ID, "rb") as f:
        data = bytearray(f.read())
    plan = element(bytes(data), root(bytes(data)), 1, 0)
    assert field(bytes(data), plan, 3) - plan == 16
    struct.pack_into("<H", data, slot(bytes(data), plan, 6), 16)
    return bytes(data)


def test_an_operator_no_kernel_call_names_needs_no_name() -> None:
    """The runtime reads an operator's name when a KernelCall names it (to find its
    kernel; without one it logs the operator missing): one no call names opens, as the
    runtime runs it; an operator a call names still needs its name (operator.name in
    test_a_field_the_runtime_requires_is_required)."""
    with load_full(_nameless_unused_operator()) as p:
        (m,) = p.methods.values()
        assert [str(o) for o in m.operators] == [""]
        assert not any(c.instructions for c in m.chains)
    # strict mode names the element's offset of 0, which a builder never writes, and not
    # the name, which the schema does not require
    with pytest.raises(pfm.FormatError) as e:
        pfm.verify(_nameless_unused_operator(), strict=True)
    assert e.value.code == "zero_offset", e.value


@pytest.mark.skipif(not HAS_RUNTIME, reason="needs executorch's runtime")
def test_the_runtime_runs_a_plan_with_a_nameless_unused_operator() -> None:
    got = runtime_verdicts([(_nameless_unused_operator(), None)])
    assert [v["verdict"] for v in got] == ["ok", "ok"], got
