"""ExecuTorch native backend payloads (``Delegate.graph`` of a ``NativeBackend`` delegate)
against ExecuTorch's own reading of them.

tests/data/et/native_*.pte are networks lowered by ExecuTorch 1.5.1's NativePartitioner
(tests/data/make_et_data.py); each oracle holds, per native delegate, ExecuTorch's reading
of the payload (``deserialize_program``: flatc with ExecuTorch's native_graph.fbs, into
its schema's dataclasses) and the named data ``deserialize_pte_binary`` cuts out of the
file. The values are numbered as the reader documents it (the graph's inputs, the method's
constants, its mutable buffers, each non-placeholder node's outputs), here from
ExecuTorch's reading. Bad payloads are made from the files' bytes and must be refused at
the field at fault.
"""
from __future__ import annotations

import functools
import json
import os
import struct
from typing import Any, Dict, List, Tuple

import numpy as np
import pytest

import pyflatmodule as pfm
from pyflatmodule.executorch import NativeGraph

from support import backends_zoo
from support.checked import load_full
from support.delegates import NATIVE_DTYPES, graphs, native_value_names, refused
from support.fbwalk import deref, element, field, root
from support.paths import ET

NAMES = ["native_mlp", "native_conv", "native_attention", "native_fp16", "native_partial",
         "native_cache", "native_external"]
#: The real architectures, when written (tests/support/backends_zoo.py).
ZOO = backends_zoo.stems("native")
#: ... and numpy's
NUMPY = {5: "<f2", 6: "<f4", 4: "<i8"}
#: OutputValueKind numbers -> the reader's value kinds
KINDS = {0: "tensor", 2: "int", 3: "bool", 4: "float"}


@functools.lru_cache(maxsize=None)
def _json(name: str) -> Dict[str, Any]:
    with open(os.path.join(backends_zoo.folder(name), name + ".oracle.json"),
              encoding="utf-8") as f:
        return dict(json.load(f))


class _Oracles:
    """Each program's oracle (its JSON and npz), read when first asked for: the zoo's
    arrays are large, and only the most recent are kept."""

    @staticmethod
    @functools.lru_cache(maxsize=1)
    def __getitem__(name: str) -> Tuple[Dict[str, Any], Dict[str, np.ndarray]]:
        with np.load(os.path.join(backends_zoo.folder(name), name + ".oracle.npz")) as z:
            return _json(name), {k: z[k] for k in z.files}


ORACLES = _Oracles()
#: (program, delegate index); a zoo program not written is one case, skipped
CASES = [(name, k) for name in NAMES + ZOO
         for k in (range(len(_json(name)["native"]["delegates"]))
                   if name in NAMES or backends_zoo.written(name) else [0])]


def _path(name: str) -> str:
    return os.path.join(backends_zoo.folder(name), name + ".pte")


def _data(name: str) -> List[str]:
    """The data files program ``name`` is loaded with: its ``.ptd``, where it has one."""
    ptd = os.path.join(backends_zoo.folder(name), name + ".ptd")
    return [ptd] if os.path.exists(ptd) else []


def _graphs(p: pfm.Program) -> List[NativeGraph]:
    return graphs(p, "NativeBackend", NativeGraph)


def _method(name: str, k: int) -> Dict[str, Any]:
    program = _json(name)["native"]["delegates"][k]["program"]
    assert len(program["methods"]) == 1   # a delegate's payload is one method
    return dict(program["methods"][0])


def _references(arg: Dict[str, Any]) -> List[str]:
    """The value names a NamedArgument's ArgumentValue references (validate_graph's
    check_ref: an empty name references nothing)."""
    kind, v = arg["value_type"], arg["value"]
    names: List[str] = []
    if kind == "TensorArg":
        names = [v["name"]]
    elif kind == "TensorListArg":
        names = list(v["names"])
    elif kind == "OptionalTensorListArg":
        names = [n for n, p in zip(v["names"], v["has_value"]) if p]
    elif kind in ("IntArg", "FloatArg", "BoolArg"):
        names = [v.get("ref") or ""]
    elif kind == "IntListArg":
        names = list(v.get("refs") or [])
    return [n for n in names if n]


def test_the_files_hold_native_delegates() -> None:
    for name in NAMES:
        with load_full(_path(name)) as p:
            assert len(_graphs(p)) == len(_json(name)["native"]["delegates"]) >= 1


def test_the_partial_program_keeps_a_kernel_between_its_delegates() -> None:
    oracle = _json("native_partial")
    plan = oracle["program"]["execution_plan"][0]
    assert [d["id"] for d in plan["delegates"]] == ["NativeBackend"] * 2
    assert ["aten::bucketize", "Tensor_out"] in plan["operators"]
    with load_full(_path("native_partial")) as p:
        got = _graphs(p)
        assert [n.kind for g in got for n in g.nodes] == [
            n["target"] for k in range(2) for n in _method("native_partial", k)["graph"]["nodes"]
            if n["op_kind"] == 0]


@pytest.mark.parametrize("name,k", CASES)
def test_each_graph_is_what_executorch_reads(name: str, k: int) -> None:
    want = _json(name)["native"]["delegates"][k]
    method = _method(name, k)
    g = method["graph"]
    names = native_value_names(method)
    ids = {n: i for i, n in enumerate(names)}
    assert len(ids) == len(names)
    with load_full(_path(name)) as p:
        got = _graphs(p)[k]
        d = [d for m in p.methods.values() for d in m.delegates][k]
        assert len(d.data) == want["payload_size"] and bytes(d.data[4:8]) == b"NPTG"
        assert got.version == want["program"]["version"] and got.method == method["name"]
        assert got.input_ids == [ids[n] for n in g["inputs"]]
        assert got.output_ids == [ids[n] for n in g["outputs"]]
        calls = [n for n in g["nodes"] if n["op_kind"] == 0]
        assert [(n.kind, n.name) for n in got.nodes] == [(n["target"], n["name"]) for n in calls]
        for n, w in zip(got.nodes, calls):
            assert list(n.inputs) == [ids[r] for a in w["inputs"] or []
                                      for r in _references(a["arg"])]
            assert list(n.outputs) == [ids[r] for o in w["outputs"] or []
                                       for r in (o["names"] if o["kind"] == 1 else [o["name"]])]
        metas = {t["name"]: t["meta"] for t in g["tensor_values"] or []}
        metas.update({c["name"]: c["meta"] for c in method["constants"] or []})
        constants = {c["name"] for c in method["constants"] or []}
        values = got.values
        assert [v.name for v in values] == names
        assert [v.id for v in values] == list(range(len(names)))
        for v in values:
            meta = metas.get(v.name)
            assert v.constant == (v.name in constants)
            if meta is None:
                assert (v.datatype, v.dims) == (v.kind, ())
                continue
            assert v.datatype == NATIVE_DTYPES[meta["dtype"]]
            assert list(v.dims) == [s["max"] for s in meta["sizes"]]
        kinds = {o["name"]: KINDS[o["kind"]] for n in calls for o in n["outputs"] or []
                 if o["kind"] != 1}
        assert all(v.kind == kinds.get(v.name, "tensor") for v in values)
        sources = dict.fromkeys(g["inputs"], "input")
        sources.update(dict.fromkeys(constants, "constant"))
        sources.update({b["name"]: "buffer" for b in method["mutable_buffers"] or []})
        assert [v.source for v in values] == [sources.get(n, "node") for n in names]


@pytest.mark.parametrize("name,k", CASES)
def test_each_constant_is_the_bytes_executorch_names(name: str, k: int) -> None:
    """A constant: the named data its data_key names (the bytes deserialize_pte_binary cut
    out for that key; native_external's are in its data file), as its TensorMeta's dims
    and dtype, and the module's weight of that name."""
    oracle, arrays = ORACLES[name]
    method = _method(name, k)
    ids = {n: i for i, n in enumerate(native_value_names(method))}
    named = oracle["restored"]["named_data"]
    refs = method["constants"] or []   # none in a delegate of operators alone
    with load_full(_path(name), data=_data(name)) as p:
        got = _graphs(p)[k]
        constants = got.constants()
        assert sorted(constants) == sorted(ids[c["name"]] for c in refs)
        assert got.missing == {}
        for c in refs:
            i = ids[c["name"]]
            array = constants[i]
            assert got.named_data_keys()[(i, "constant")] == c["data_key"]
            assert array.dtype == np.dtype(NUMPY[c["meta"]["dtype"]])
            assert array.shape == tuple(s["max"] for s in c["meta"]["sizes"])
            assert not array.flags.writeable
            if "data_file" in oracle:   # the data file's, by ExecuTorch's flat tensor reader
                assert c["data_key"] in [e["key"] for e in oracle["data_file"]["named_data"]]
            else:
                assert array.tobytes() == arrays[named[c["data_key"]]].tobytes()
            if c["data_key"] not in oracle["weights"]:   # a number of the code, lifted
                assert c["data_key"].startswith("_lifted_tensor_constant")   # (the 1.0 of
                continue                                                   # native_cache)
            weight = oracle["weights"][c["data_key"]]
            assert array.tobytes() == arrays[weight["data"]].tobytes()


def test_constants_in_a_data_file_not_given_are_missing() -> None:
    """native_external's constants are in its data file (NativePartitioner's default
    tag): loaded without it, each is listed missing by its key; with it, none is."""
    method = _method("native_external", 0)
    ids = {n: i for i, n in enumerate(native_value_names(method))}
    want = {ids[c["name"]]: c["data_key"] for c in method["constants"]}
    assert _json("native_external")["program"]["named_data"] == []
    with load_full(_path("native_external")) as p:
        (g,) = _graphs(p)
        assert g.missing == want and g.constants() == {}
        assert {v.id for v in g.values if v.constant} == set(want)
    with load_full(_path("native_external"), data=_data("native_external")) as p:
        (g,) = _graphs(p)
        assert g.missing == {} and sorted(g.constants()) == sorted(want)


def test_a_mutable_buffer_is_a_value_without_bytes() -> None:
    """native_cache's buffer (not saved: a MutableBufferSpec, zero at load) is a value of
    the graph, written by the add whose result the method's output specs name as its
    BUFFER_MUTATION, with no constant bytes."""
    method = _method("native_cache", 0)
    (buffer,) = method["mutable_buffers"]
    (mutation,) = [o for o in method["output_specs"] if o["kind"] == 1]
    assert mutation["target"] == buffer["fqn"] == "cache"
    with load_full(_path("native_cache")) as p:
        (g,) = _graphs(p)
        values = {v.name: v for v in g.values}
        v = values[buffer["name"]]
        assert (v.source, v.constant) == ("buffer", False) and v.id not in g.constants()
        writer = next(n for n in g.nodes if values[mutation["name"]].id in n.outputs)
        assert v.id in writer.inputs
        assert values[mutation["name"]].id in g.output_ids


def _torch_names(name: str) -> Dict[str, Dict[str, Any]]:
    """The name each of program ``name``'s delegate constants should go by, with the
    module's tensor where torch names it: the data key of a constant that is a tensor of
    the module's ``state_dict()`` (the oracle's ``weights``, as torch gave them), else its
    place, ``forward.delegates[K].values[ID]`` (the id from ExecuTorch's reading)."""
    oracle, arrays = ORACLES[name]
    out: Dict[str, Dict[str, Any]] = {}
    for k in range(len(oracle["native"]["delegates"])):
        method = _method(name, k)
        ids = {n: i for i, n in enumerate(native_value_names(method))}
        for c in method["constants"] or []:
            weight = oracle["weights"].get(c["data_key"])
            key = c["data_key"] if weight is not None else \
                f"forward.delegates[{k}].values[{ids[c['name']]}]"
            out[key] = {"torch": None if weight is None else arrays[weight["data"]],
                        "shape": [s["max"] for s in c["meta"]["sizes"]]}
    return out


@pytest.mark.parametrize("name", NAMES + ZOO)
def test_the_program_names_the_delegates_constants_as_torch(name: str) -> None:
    """Each delegate constant that is a parameter or buffer of the module goes by the name
    torch's ``state_dict()`` gives it (the payload's data key), in ``delegate_constants``,
    ``delegate_layouts``, ``state_dict`` and ``named_layouts``, with the module's values;
    the others (native_cache's lifted 1.0) by their place. native_external's, read from
    its data file, are the data file's tensors of those names: listed once."""
    want = _torch_names(name)
    with load_full(_path(name), data=_data(name)) as p:
        constants = p.delegate_constants()
        assert sorted(constants) == sorted(want)
        layouts = p.delegate_layouts()
        state = p.state_dict()
        described = p.named_layouts()
        for key, w in want.items():
            assert layouts[key] == {"layout": "as stored", "shape": w["shape"]}
            assert described[key].shape == tuple(w["shape"])
            if w["torch"] is not None:
                assert constants[key].tobytes() == w["torch"].tobytes()
                assert state[key].tobytes() == w["torch"].tobytes()
        assert sorted(state) == sorted(want)   # the program names no other tensor


def test_a_name_another_tensor_goes_by_leaves_the_constant_its_place() -> None:
    """native_mlp loaded with native_external's data file, whose tensors the same module's
    state_dict names alike (``l1.weight``...) but are other bytes: the data file's keep the
    names, the delegate's constants keep their places; none is dropped."""
    oracle, _ = ORACLES["native_external"]
    held = sorted(e["key"] for e in oracle["data_file"]["named_data"])
    method = _method("native_mlp", 0)
    ids = {n: i for i, n in enumerate(native_value_names(method))}
    places = {ids[c["name"]]: f"forward.delegates[0].values[{ids[c['name']]}]"
              for c in method["constants"]}
    assert sorted(c["data_key"] for c in method["constants"]) == held
    with load_full(_path("native_mlp"), data=_data("native_external")) as p:
        state = p.state_dict()
        assert sorted(state) == sorted(held + list(places.values()))
        assert sorted(p.delegate_constants()) == sorted(places.values())
        (d,) = p.methods["forward"].delegates
        assert {i: d.constant_name(i) for i in places} == places


def test_two_methods_reading_one_weight_list_it_once() -> None:
    """native_names/native_two_methods: both methods' delegates key ``l1.weight`` and
    ``l1.bias`` alike (ExecuTorch's reading of each payload), one named data entry each:
    every constant goes by the name torch's ``state_dict()`` gives it, the two methods'
    are the same tensor, listed once, with the module's values."""
    folder = os.path.join(ET, "native_names")
    with open(os.path.join(folder, "native_two_methods.oracle.json"), encoding="utf-8") as f:
        oracle = json.load(f)
    with np.load(os.path.join(folder, "native_two_methods.oracle.npz")) as z:
        arrays = {k: z[k] for k in z.files}
    weights = oracle["weights"]
    assert oracle["named_data"] == sorted(weights)
    shared = {c["data_key"] for c in oracle["constants"]["hidden"]}
    assert shared == {"l1.weight", "l1.bias"} <= {c["data_key"]
                                                  for c in oracle["constants"]["forward"]}
    with load_full(os.path.join(folder, "native_two_methods.pte")) as p:
        state = p.state_dict()
        assert sorted(state) == sorted(weights) == sorted(p.delegate_constants())
        for key, w in weights.items():
            assert (str(state[key].dtype), list(state[key].shape)) == (w["dtype"], w["shape"])
            assert state[key].tobytes() == arrays[w["data"]].tobytes()
        for method, constants in oracle["constants"].items():
            (d,) = p.methods[method].delegates
            graph = d.graph
            assert graph is not None
            ids = {v.name: v.id for v in graph.values}
            assert [d.constant_name(ids[c["name"]]) for c in constants] == \
                [c["data_key"] for c in constants]
            for c in constants:   # the very bytes state_dict() lists
                assert np.shares_memory(graph.constants()[ids[c["name"]]], state[c["data_key"]])


# ------------------------------------------------------------------ bad payloads

PATH = _path("native_mlp")
with open(PATH, "rb") as _f:
    DATA = _f.read()
WHERE = "processed<Program>."


def _payload(path: str, data: bytes) -> Tuple[int, bytes]:
    """(file offset, bytes) of the first payload of the program at ``path`` (its bytes
    ``data``), found by its bytes."""
    with pfm.load(path) as p:
        payload = bytes([d for m in p.methods.values() for d in m.delegates][0].data)
    at = data.find(payload)
    assert at > 0 and data.find(payload, at + 1) < 0
    return at, payload


START, PAYLOAD = _payload(PATH, DATA)
METHOD = element(PAYLOAD, root(PAYLOAD), 1, 0)                 # Program.methods[0]
GRAPH = deref(PAYLOAD, field(PAYLOAD, METHOD, 1))              # Method.graph
MLP = _method("native_mlp", 0)


def _set(at: int, fmt: str, value: Any) -> bytes:
    """The file with the payload's bytes at ``at`` set."""
    out = bytearray(DATA)
    struct.pack_into(fmt, out, START + at, value)
    return bytes(out)


def _node(i: int) -> int:
    return element(PAYLOAD, GRAPH, 0, i)                       # Graph.nodes[i]


def _first_call() -> int:
    return next(i for i, n in enumerate(MLP["graph"]["nodes"]) if n["op_kind"] == 0)


def _string(payload: bytes, at: int) -> int:
    """Where the string whose offset is at ``at`` starts (its length)."""
    return deref(payload, at)


def test_a_damaged_identifier() -> None:
    refused(_set(4, "<B", ord("X")), "bad_identifier", START + 4, WHERE + "header")


def test_a_root_offset_past_the_payload() -> None:
    with pytest.raises(pfm.FormatError) as e:
        with load_full(_set(0, "<I", len(PAYLOAD) + 64)) as p:
            [d.graph for m in p.methods.values() for d in m.delegates]
    assert WHERE in e.value.path and START <= e.value.offset < START + len(PAYLOAD)


def test_a_vector_offset_past_the_payload() -> None:
    """Graph.nodes pointing past the payload's end: refused by the verifier, there."""
    at = field(PAYLOAD, GRAPH, 0)
    with pytest.raises(pfm.FormatError) as e:
        with load_full(_set(at, "<I", len(PAYLOAD))) as p:
            [d.graph for m in p.methods.values() for d in m.delegates]
    assert e.value.path.endswith("methods[0].graph.nodes"), e.value.path


def test_an_argument_naming_no_value() -> None:
    i = _first_call()
    node = _node(i)
    arg = deref(PAYLOAD, field(PAYLOAD, element(PAYLOAD, node, 3, 0), 1))   # .inputs[0].arg
    tensor_arg = deref(PAYLOAD, field(PAYLOAD, arg, 1))                       # .value
    name = _string(PAYLOAD, field(PAYLOAD, tensor_arg, 0))                   # TensorArg.name
    assert PAYLOAD[name + 4:name + 5] == MLP["graph"]["nodes"][i]["inputs"][0]["arg"][
        "value"]["name"][:1].encode()
    refused(_set(name + 4, "<B", ord("#")), "bad_reference", START + name,
            f"methods[0].graph.nodes[{i}].inputs[0].arg.value<TensorArg>.name")


def test_an_argument_naming_a_later_value() -> None:
    """A node's input renamed as a value a later node defines (of a name as long, in the
    attention block's graph): the graph is out of order."""
    path = _path("native_attention")
    with open(path, "rb") as f:
        data = f.read()
    start, payload = _payload(path, data)
    graph = deref(payload, field(payload, element(payload, root(payload), 1, 0), 1))
    nodes = _method("native_attention", 0)["graph"]["nodes"]
    defined = {o["name"]: j for j, n in enumerate(nodes) if n["op_kind"] == 0
               for o in n["outputs"]}
    for i, n in enumerate(nodes):
        for a, na in enumerate(n["inputs"] or []):
            if na["arg"]["value_type"] != "TensorArg":
                continue
            name = na["arg"]["value"]["name"]
            later = next((m for m, j in defined.items() if j > i and len(m) == len(name)), None)
            if later is None:
                continue
            arg = deref(payload, field(payload, element(payload, element(payload, graph, 0, i),
                                                        3, a), 1))
            at = _string(payload, field(payload, deref(payload, field(payload, arg, 1)), 0))
            out = bytearray(data)
            out[start + at + 4:start + at + 4 + len(name)] = later.encode()
            refused(bytes(out), "bad_reference", start + at,
                    f"methods[0].graph.nodes[{i}].inputs[{a}].arg.value<TensorArg>.name")
            return
    raise AssertionError("no later value named as long as an argument")


def test_a_value_defined_twice() -> None:
    """The relu's output named as the first call's: one name, two definitions."""
    i = _first_call()
    first = _string(PAYLOAD, field(PAYLOAD, element(PAYLOAD, _node(i), 4, 0), 0))
    at = field(PAYLOAD, element(PAYLOAD, _node(i + 1), 4, 0), 0)
    refused(_set(at, "<I", first - at), "duplicate_value", START + first, "methods[0]")


def test_an_unknown_dtype() -> None:
    tv = element(PAYLOAD, GRAPH, 3, 0)                                # tensor_values[0]
    meta = deref(PAYLOAD, field(PAYLOAD, tv, 1))
    at = field(PAYLOAD, meta, 0)                                      # TensorMeta.dtype
    assert PAYLOAD[at] == 6                                           # FLOAT
    refused(_set(at, "<B", 9), "bad_scalar_type", START + meta,
            "methods[0].graph.tensor_values[0].meta.dtype")


@pytest.mark.parametrize("dtype, name", [(16, "uint16"), (17, "uint32"), (18, "uint64")])
def test_a_constant_of_an_unsigned_dtype(dtype: int, name: str) -> None:
    """The payload's ScalarType numbers UINT16, UINT32 and UINT64 16, 17 and 18 (ExecuTorch's
    native_graph.fbs; c10's 27-29, where 16-18 are packed and quantized types): a float32
    constant retyped so is read as that dtype over its named data's first bytes, or
    refused when it needs more than the named data holds (found: read as c10's 16-18,
    ``cannot reshape``)."""
    ref = element(PAYLOAD, METHOD, 2, 0)                              # constants[0]
    meta = deref(PAYLOAD, field(PAYLOAD, ref, 2))
    at = field(PAYLOAD, meta, 0)                                      # TensorMeta.dtype
    assert PAYLOAD[at] == 6                                           # FLOAT
    constant = MLP["constants"][0]
    dims = tuple(d["max"] for d in constant["meta"]["sizes"])
    oracle, arrays = ORACLES["native_mlp"]
    stored = arrays[oracle["restored"]["named_data"][constant["data_key"]]].tobytes()
    if np.dtype(name).itemsize * int(np.prod(dims)) > len(stored):
        with pytest.raises(pfm.FormatError) as e:
            with load_full(_set(at, "<B", dtype)) as p:
                _graphs(p)
        assert e.value.code == "outside_storage"
        return
    with load_full(_set(at, "<B", dtype)) as p:
        (g,) = _graphs(p)
        vid = native_value_names(MLP).index(constant["name"])
        assert g.values[vid].datatype == name
        got = g.constants()[vid]
        assert got.dtype == np.dtype(name) and got.shape == dims
        assert got.tobytes() == stored[:got.nbytes]


def test_a_constant_with_dims_not_static() -> None:
    ref = element(PAYLOAD, METHOD, 2, 0)                              # constants[0]
    meta = deref(PAYLOAD, field(PAYLOAD, ref, 2))
    dim = element(PAYLOAD, meta, 1, 0)                                # sizes[0]
    at = field(PAYLOAD, dim, 1)                                       # Dim.max
    assert struct.unpack_from("<q", PAYLOAD, at)[0] == MLP["constants"][0]["meta"]["sizes"][
        0]["max"]
    refused(_set(at, "<q", -1), "bad_tensor", START + dim, "methods[0].constants[0].meta.sizes[0]")


def test_an_empty_constant_whose_other_dims_overflow() -> None:
    """A constant's dims made (0, 2^62): no bytes, but numpy cannot hold the other dims'
    product (2^62 float32s): refused (found: ValueError from numpy when it was read)."""
    ref = element(PAYLOAD, METHOD, 2, 0)                              # constants[0]
    meta = deref(PAYLOAD, field(PAYLOAD, ref, 2))
    assert len(MLP["constants"][0]["meta"]["sizes"]) == 2
    assert MLP["constants"][0]["meta"]["dtype"] == 6                  # FLOAT
    data = bytearray(DATA)
    for k, value in enumerate((0, 2**62)):
        dim = element(PAYLOAD, meta, 1, k)                            # sizes[k]
        for f in (0, 1):                                              # Dim.min, Dim.max
            struct.pack_into("<q", data, START + field(PAYLOAD, dim, f), value)
    refused(bytes(data), "bad_tensor", START + element(PAYLOAD, meta, 1, 1),
            "methods[0].constants[0].meta.sizes[1]")


def test_a_constant_whose_named_data_no_file_holds() -> None:
    """A data key the program's named data lacks: without data files, the constant is
    listed missing and left out of constants()."""
    ref = element(PAYLOAD, METHOD, 2, 0)
    key = _string(PAYLOAD, field(PAYLOAD, ref, 1))                             # data_key
    data = _set(key + 4, "<B", ord("#"))
    want = "#" + MLP["constants"][0]["data_key"][1:]
    with load_full(data) as p:
        (g,) = _graphs(p)
        assert g.missing == {1: want} and 1 not in g.constants()


@pytest.mark.parametrize("value", [0xFFFFFFF0, 0x7FFFFFFF, 1])
def test_every_word_of_the_payload_damaged_is_read_or_refused(value: int) -> None:
    """Each 4-byte word of the payload set to a bad offset or count: the graph, its nodes,
    values and constants read, or a FormatError inside the payload; nothing else."""
    for at in range(0, len(PAYLOAD) - 3, 4):
        data = _set(at, "<I", value)
        try:
            with pfm.load(data, verify="full") as p:
                for m in p.methods.values():
                    for d in m.delegates:
                        g = d.graph
                        if g is not None:
                            g.nodes, g.values, g.constants(), g.input_ids, g.output_ids
        except pfm.FormatError as e:
            assert 0 <= e.offset < len(data), (at, e)
