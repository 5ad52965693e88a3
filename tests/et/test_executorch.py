"""ExecuTorch programs and data files against what ExecuTorch itself said of them.

The files in tests/data/et/ were written by ExecuTorch 1.5.1 with torch 2.13
(tests/data/make_et_data.py). Beside each, ``<name>.oracle.json/.npz`` hold the answers of
ExecuTorch's own readers: its extended-header reader, its flatbuffer reader (values,
operators, chains, delegates, segments), ``deserialize_pte_binary`` (the constant buffers
and named data it cuts out of the segments), its C++ runtime (method names, input and
output metadata), and the exported module's own weights. Nothing here needs ExecuTorch or
torch installed.
"""
from __future__ import annotations

import json
import math
import os
import pickle
from typing import Any, Dict, List, Tuple

import numpy as np
import pytest

import pyflatmodule as pfm
from pyflatmodule.core.dtypes import numpy_dtype
from pyflatmodule.executorch import JumpFalseCall

from support.checked import load_full
from support.paths import DATA, ET, WILD

PROGRAMS = sorted(f[:-4] for f in os.listdir(ET) if f.endswith(".pte"))
DATA_FILES = sorted(f[:-4] for f in os.listdir(ET) if f.endswith(".ptd"))
#: Programs others wrote (tests/data/wild/SOURCES.json), with ExecuTorch's answers beside
#: them (make_wild_data.py): those exir reads (not the one that is no program at all),
#: read by exir like ours, named "wild/<stem>"


def _exir_reads(stem: str) -> bool:
    with open(os.path.join(WILD, stem + ".oracle.json"), encoding="utf-8") as f:
        return "exir_error" not in json.load(f)


WILD_PROGRAMS = sorted("wild/" + f[:-4] for f in os.listdir(WILD)
                       if f.endswith(".pte") and _exir_reads(f[:-4]))
EXIR_READ = PROGRAMS + WILD_PROGRAMS


def _base(stem: str) -> str:
    """The path of a test program without its extension: tests/data/et/<stem>, or
    tests/data/<stem> for one named by its folder ("wild/...")."""
    return os.path.join(DATA, stem) if "/" in stem else os.path.join(ET, stem)


def _oracle(stem: str) -> Tuple[Dict[str, Any], Any]:
    with open(_base(stem) + ".oracle.json", encoding="utf-8") as f:
        doc = json.load(f)
    return doc, np.load(_base(stem) + ".oracle.npz")


def _weight(arrays: Any, w: Dict[str, Any]) -> np.ndarray:
    """An exported module's weight, stored as its row-major bytes."""
    return np.frombuffer(arrays[w["data"]].tobytes(), w["dtype"]).reshape(w["shape"])


def _open(stem: str) -> Any:
    data = [_base(stem) + ".ptd"] if os.path.exists(_base(stem) + ".ptd") else []
    return pfm.load(_base(stem) + ".pte", data=data)


def test_every_kind_of_program_is_here() -> None:
    assert {"mlp", "two_methods", "mutable", "dynamic", "channels_last", "xnnpack",
            "external", "xnnpack_q8", "xnnpack_q8_channel", "xnnpack_fp16", "xnnpack_inline",
            "inline_constants", "cond_stacktrace", "mutable_init"} <= set(PROGRAMS)


@pytest.mark.parametrize("stem", PROGRAMS)
def test_load_gives_a_program_and_the_runtimes_methods(stem: str) -> None:
    doc, _ = _oracle(stem)
    runtime = doc["runtime"]
    if "error" in runtime:
        # ExecuTorch 1.5.1's runtime is built without the deprecated inline constant
        # buffer (ET_ENABLE_DEPRECATED_CONSTANT_BUFFER=0): InvalidProgram (0x23).
        assert stem == "inline_constants" and runtime["error"].endswith("error: 0x:23")
        runtime = {"method_names": [plan["name"] for plan in doc["program"]["execution_plan"]],
                   "methods": {}}
    with _open(stem) as p:
        assert isinstance(p, pfm.Program)
        assert sorted(p.methods) == sorted(runtime["method_names"])
        assert list(p.methods) == [plan["name"] for plan in doc["program"]["execution_plan"]]
        assert p.version == doc["program"]["version"]
        for name, meta in runtime["methods"].items():
            m = p.methods[name]
            for index, want in zip(m.inputs + m.outputs, meta["inputs"] + meta["outputs"]):
                spec = m.values[index]
                assert isinstance(spec, pfm.TensorSpec)
                assert spec.dtype == _dtype_name(want["dtype"])
                assert list(spec.shape) == want["sizes"]
                assert spec.stored == ("planned" if want["memory_planned"] else "none")
            metas = m.input_meta + m.output_meta
            assert len(metas) == len(meta["inputs"] + meta["outputs"])
            for got, want in zip(metas, meta["inputs"] + meta["outputs"]):
                assert got == ("Tensor", _dtype_name(want["dtype"]), tuple(want["sizes"]))


def _dtype_name(scalar_type: int) -> str:
    return {6: "float32", 4: "int64", 3: "int32", 11: "bool", 7: "float64",
            5: "float16"}[scalar_type]


@pytest.mark.parametrize("stem", EXIR_READ)
def test_header_and_segments_are_executorchs(stem: str) -> None:
    doc, _ = _oracle(stem)
    with _open(stem) as p:
        info = p.info()
        header = doc["header"]
        if header is None:
            assert info["flatbuffer_size"] == info["size"]
            assert info["segment_data_size"] == 0
        else:
            assert info["flatbuffer_size"] == header["program_size"]
            assert info["segment_data_size"] == header["segment_data_size"]
        assert info["segments"] == len(doc["program"]["segments"])


@pytest.mark.parametrize("stem", EXIR_READ)
def test_every_value_decodes_as_executorch_reads_it(stem: str) -> None:
    doc, _ = _oracle(stem)
    with _open(stem) as p:
        for plan in doc["program"]["execution_plan"]:
            m = p.methods[plan["name"]]
            assert m.inputs == plan["inputs"] and m.outputs == plan["outputs"]
            assert ([(o.name, o.overload) for o in m.operators]
                    == [tuple(o) for o in plan["operators"]])
            assert m.non_const_buffer_sizes == plan["non_const_buffer_sizes"]
            assert len(m.values) == len(plan["values"])
            for i, want in enumerate(plan["values"]):
                assert m.values.kind(i) == want["kind"]
                got = m.values[i]
                if want["kind"] == "Tensor":
                    _check_tensor(got, want)
                elif want["kind"] == "Double" and isinstance(want["value"], str):
                    assert got == float(want["value"])   # ExecuTorch holds infinities as text
                elif want["kind"] in ("Int", "Bool", "Double", "String"):
                    assert got == want["value"] and type(got) is type(want["value"])
                elif want["kind"] == "Null":
                    assert got is None
                elif want["kind"] == "IntList":   # boxed: items are indices of Int values
                    assert got == [plan["values"][k]["value"] for k in want["items"]]
                    assert all(plan["values"][k]["kind"] == "Int" for k in want["items"])
                else:
                    assert got == want["items"]
            assert [[type(ins).__name__ for ins in c.instructions] for c in m.chains] == \
                [c["instructions"] for c in plan["chains"]]
            for got, c in zip(m.chains, plan["chains"]):
                assert got.inputs == c["inputs"] and got.outputs == c["outputs"]
                if "args" in c:   # (oracles written before these were recorded lack them)
                    assert [_flat(ins) for ins in got.instructions] == c["args"]
                    assert _frames(got.stacktrace) == c["stacktrace"]
            assert [(d.id, d.location, d.compile_specs) for d in m.delegates] == [
                (d["id"], "inline" if d["location"] == 0 else "segment",
                 {k: bytes.fromhex(v) for k, v in d["compile_specs"]}) for d in plan["delegates"]]


def _flat(instruction: Any) -> List[int]:
    """An instruction's fields in the schema's order, its argument list spread."""
    out: List[int] = []
    for v in instruction:
        out += list(v) if isinstance(v, tuple) else [v]
    return out


def _frames(trace: Any) -> Any:
    return None if trace is None else [[list(f) for f in frames] for frames in trace]


def _check_tensor(got: Any, want: Dict[str, Any]) -> None:
    shape = tuple(want["sizes"])
    if isinstance(got, np.ndarray):
        assert got.shape == shape
        assert got.dtype == numpy_dtype(want["scalar_type"])
        assert not got.flags.writeable
        assert want["allocation"] is None
        assert want["data_buffer_idx"] > 0 or want["location"] == 1
        return
    assert isinstance(got, pfm.TensorSpec)
    assert got.shape == shape and got.dim_order == tuple(want["dim_order"])
    assert got.name == want["fqn"]
    if want["allocation"] is not None:
        memory_id, low, high = want["allocation"]
        assert got.stored == "planned" and got.allocation == (memory_id, low | high << 32)
    elif want["location"] == 1:
        assert got.stored == "external"
    else:
        assert got.stored == "none" and want["data_buffer_idx"] == 0


@pytest.mark.parametrize("stem", EXIR_READ)
def test_constants_are_the_bytes_executorch_cuts_out(stem: str) -> None:
    doc, arrays = _oracle(stem)
    buffers = [arrays[key] for key in doc["restored"]["constant_buffer"]]
    with _open(stem) as p:
        for plan in doc["program"]["execution_plan"]:
            m = p.methods[plan["name"]]
            for i, want in enumerate(plan["values"]):
                if want["kind"] != "Tensor" or want["allocation"] is not None:
                    continue
                if want["location"] == 1 or want["data_buffer_idx"] == 0:
                    continue
                got = m.values[i]
                raw = buffers[want["data_buffer_idx"]].tobytes()
                assert _storage_bytes(got) == raw[:got.nbytes]


#: Bytes per element of c10's scalar types the test programs hold, by number (c10's
#: ScalarType: Byte, Char, Short, Int, Long, Half, Float, Double, Bool, BFloat16).
ELEMENT_BYTES = {0: 1, 1: 1, 2: 2, 3: 4, 4: 8, 5: 2, 6: 4, 7: 8, 11: 1, 15: 2}


@pytest.mark.parametrize("stem", EXIR_READ)
def test_info_counts_each_constant_buffer_once(stem: str) -> None:
    """``constant_tensors`` counts the tensor values with constant data in every method;
    ``constant_bytes`` their buffers' bytes, each buffer once however many values (of
    one method or several) share it, from exir's reading of the program."""
    doc, _ = _oracle(stem)
    values, buffers = 0, {}
    for plan in doc["program"]["execution_plan"]:
        for want in plan["values"]:
            if (want["kind"] != "Tensor" or want["allocation"] is not None
                    or want["location"] == 1 or want["data_buffer_idx"] == 0):
                continue
            values += 1
            buffers[want["data_buffer_idx"]] = (math.prod(want["sizes"])
                                                * ELEMENT_BYTES[want["scalar_type"]])
    with _open(stem) as p:
        info = p.info()
    assert (info["constant_tensors"], info["constant_bytes"]) == (values,
                                                                  sum(buffers.values()))


@pytest.mark.parametrize("stem", EXIR_READ)
def test_initial_values_are_the_mutable_data_executorch_cuts_out(stem: str) -> None:
    """A planned tensor with data_buffer_idx > 0: its first values, from the mutable data
    segment (deserialize_pte_binary's mutable_data)."""
    doc, arrays = _oracle(stem)
    buffers = [arrays[key] for key in doc["restored"]["mutable_data"]]
    seen = 0
    with _open(stem) as p:
        for plan in doc["program"]["execution_plan"]:
            m = p.methods[plan["name"]]
            for i, want in enumerate(plan["values"]):
                if want["kind"] != "Tensor" or want["allocation"] is None:
                    continue
                got = m.values[i]
                if want["data_buffer_idx"] == 0:
                    assert got.initial is None
                    continue
                raw = buffers[want["data_buffer_idx"]].tobytes()
                assert got.initial is not None and not got.initial.flags.writeable
                assert _storage_bytes(got.initial) == raw[:got.initial.nbytes]
                seen += 1
    assert (seen > 0) == (stem == "mutable_init")


def _storage_bytes(a: np.ndarray) -> bytes:
    """The bytes under a view, in memory order (what the file stores)."""
    order = np.argsort(a.strides)[::-1]
    return np.ascontiguousarray(a.transpose(order)).tobytes()


@pytest.mark.parametrize("stem", PROGRAMS)
def test_every_weight_of_the_exported_module_is_a_constant(stem: str) -> None:
    doc, arrays = _oracle(stem)
    with _open(stem) as p:
        named = p.state_dict()
        constants = [a for _, _, a in p.constants()] + list(named.values())
        for name, w in doc["weights"].items():
            want = _weight(arrays, w)
            if name in named:
                np.testing.assert_array_equal(named[name], want)
                continue
            if stem == "mutable" and name == "count":
                continue   # a mutable buffer: memory-planned, its zeros are not stored
            if any(d.id in ("XnnpackBackend", "CoreMLBackend", "EthosUBackend",
                            "OpenvinoBackend", "TOSABackend")
                   for m in p.methods.values() for d in m.delegates):
                # inside the delegate's payload in the backend's layout or precision:
                # tests/backends/test_xnnpack.py, tests/backends/test_coreml.py (float16 by
                # default), test_openvino.py (a conv's bias as OpenVINO broadcasts it),
                # test_tosa.py (convolution weights OHWI, int8 in the INT profile);
                # Ethos-U's are Vela's encoding of the int8 weights
                continue
            assert any(c.shape == want.shape and np.array_equal(c, want) for c in constants), name


def test_channels_last_constants_take_their_strides_from_dim_order() -> None:
    doc, arrays = _oracle("channels_last")
    with _open("channels_last") as p:
        m = p.methods["forward"]
        plan = doc["program"]["execution_plan"][0]
        for i, want in enumerate(plan["values"]):
            if want["kind"] != "Tensor" or want["data_buffer_idx"] == 0:
                continue
            a = m.values[i]
            order = want["dim_order"]
            expect = [0] * len(order)
            step = a.itemsize
            for d in reversed(order):
                expect[d] = step
                step *= max(1, want["sizes"][d])
            assert list(a.strides) == expect


@pytest.mark.parametrize("stem", EXIR_READ)
def test_named_data_is_the_bytes_executorch_restores(stem: str) -> None:
    doc, arrays = _oracle(stem)
    with _open(stem) as p:
        named = p.named_data
        assert list(named) == [k for k, _ in doc["program"]["named_data"]]
        assert set(named) == set(doc["restored"]["named_data"])
        for key, ref in doc["restored"]["named_data"].items():
            assert bytes(named[key]) == arrays[ref].tobytes()
            assert named[key].readonly


def test_xnnpack_payload_is_in_a_segment() -> None:
    with _open("xnnpack") as p:
        d = p.methods["forward"].delegates[0]
        assert d.id == "XnnpackBackend" and d.location == "segment"
        assert bytes(d.data[4:8]) == b"XH00"   # the XNNPACK payload's own header


@pytest.mark.parametrize("stem", DATA_FILES)
def test_data_file_is_what_executorch_reads(stem: str) -> None:
    doc, arrays = _oracle(stem)
    want = doc["data_file"]
    with pfm.load(os.path.join(ET, stem + ".ptd")) as d:
        assert isinstance(d, pfm.DataFile)
        info = d.info()
        assert info["flatbuffer_size"] == want["header"]["flatbuffer_offset"] + \
            want["header"]["flatbuffer_size"]
        assert info["segment_data_size"] == want["header"]["segment_data_size"]
        assert d.version == want["version"]
        tensors = d.tensors
        assert list(tensors) == [e["key"] for e in want["named_data"]]
        for e in want["named_data"]:
            t = tensors[e["key"]]
            assert t.dtype == numpy_dtype(e["scalar_type"]) and list(t.shape) == e["sizes"]
            np.testing.assert_array_equal(t, _weight(arrays, doc["weights"][e["key"]]))
        assert list(d.named_data) == list(tensors)


def test_external_tensors_resolve_by_name_and_missing_ones_are_named() -> None:
    doc, arrays = _oracle("external")
    pte = os.path.join(ET, "external.pte")
    with pfm.load(pte, data=[os.path.join(ET, "external.ptd")]) as p:
        sd = p.state_dict()
        assert set(sd) == set(doc["weights"])
        for name, w in doc["weights"].items():
            np.testing.assert_array_equal(sd[name], _weight(arrays, w))
        assert isinstance(p.methods["forward"].values[0], np.ndarray)
    with pfm.load(pte) as p:   # no data file: the program is still readable
        spec = p.methods["forward"].values[0]
        assert isinstance(spec, pfm.TensorSpec) and spec.stored == "external"
        assert spec.name == "l1.weight"
    # A data file that lacks one of the names the program asks for.
    with pytest.raises(pfm.FormatError) as e:
        load_full(pte, data=[_data_file_without("l2.bias")])
    assert e.value.code == "missing_data" and "'l2.bias'" in str(e.value)
    assert e.value.path.startswith("execution_plan[0].values[")


def _data_file_without(key: str) -> bytes:
    """external.ptd with one key's first byte changed, so that no key matches it."""
    raw = bytearray(open(os.path.join(ET, "external.ptd"), "rb").read())
    at = raw.index(key.encode() + b"\0")
    raw[at] ^= 0x20
    return bytes(raw)


@pytest.mark.parametrize("cut", [0, 7, 12, 30, 200, -1])
def test_truncated_programs_are_format_errors(cut: int) -> None:
    raw = open(os.path.join(ET, "mlp.pte"), "rb").read()
    with pytest.raises(pfm.FormatError) as e:
        load_full(raw[:cut])
    assert e.value.code in ("too_small", "bad_header", "out_of_bounds", "bad_identifier")


def _u(raw: bytes, at: int, n: int) -> int:
    return int.from_bytes(raw[at:at + n], "little")


@pytest.mark.parametrize("name", ["mlp.pte", "external.ptd"])
def test_a_truncated_file_says_so_with_the_bytes_its_header_needs(name: str) -> None:
    """Cut inside the header, inside the flatbuffer and by its last byte: the message
    gives the file's size and what the header (read here from the bytes) says it needs:
    its own length (u32 at 12), then the flatbuffer's end (eh00: u64 program size at 16;
    FH01: u64 offset + size at 16 and 24), then the segment data's end (the file)."""
    raw = open(os.path.join(ET, name), "rb").read()
    flatbuffer_end = (_u(raw, 16, 8) if name.endswith(".pte")
                      else _u(raw, 16, 8) + _u(raw, 24, 8))
    for cut, need in [(20, 8 + _u(raw, 12, 4)), (flatbuffer_end - 1, flatbuffer_end),
                      (len(raw) - 1, len(raw))]:
        with pytest.raises(pfm.FormatError) as e:
            pfm.load(raw[:cut])
        assert (e.value.code, e.value.path) == ("bad_header", "header")
        assert e.value.reason == f"truncated: the file is {cut:,} bytes, its header needs " \
            f"{need:,}", cut


def test_a_segment_past_the_end_is_named() -> None:
    raw = bytearray(open(os.path.join(ET, "mlp.pte"), "rb").read())
    # eh00's segment data size (u64 at byte 32) grown past the end of the file
    raw[32:40] = (len(raw)).to_bytes(8, "little")
    with pytest.raises(pfm.FormatError) as e:
        load_full(bytes(raw))
    assert e.value.code == "bad_header" and e.value.path == "header"
    assert e.value.offset == 32   # the field that is wrong


def test_a_boxed_list_pointing_at_a_value_of_another_kind_is_refused() -> None:
    doc, _ = _oracle("sample")
    values = doc["program"]["execution_plan"][0]["values"]
    at_list = next(i for i, v in enumerate(values) if v["kind"] == "IntList")
    tensor = next(i for i, v in enumerate(values) if v["kind"] == "Tensor")
    raw = bytearray(open(os.path.join(ET, "sample.pte"), "rb").read())
    items = values[at_list]["items"]
    needle = np.array([len(items)], "<u4").tobytes() + np.array(items, "<i8").tobytes()
    at = raw.index(needle) + 4
    raw[at:at + 8] = tensor.to_bytes(8, "little")
    with pytest.raises(pfm.FormatError) as e:
        load_full(bytes(raw))
    assert e.value.code == "kind_mismatch" and e.value.offset == at
    assert e.value.path == f"execution_plan[0].values[{at_list}].val<IntList>"


def test_errors_carry_schema_paths() -> None:
    raw, at = _negative_size()   # a tensor's sizes [8, 4]: the first one made negative
    with pytest.raises(pfm.FormatError) as e:
        load_full(raw)
    assert e.value.code == "negative_dimension"
    assert e.value.path.startswith("execution_plan[0].values[")
    assert e.value.path.endswith("].val<Tensor>")
    assert e.value.offset == at


def _negative_size() -> Tuple[bytes, int]:
    """mlp.pte with its first tensor's first size made negative (a fault inside its
    execution plan only), and where."""
    raw = bytearray(open(os.path.join(ET, "mlp.pte"), "rb").read())
    at = raw.index(np.array([2, 8, 4], "<u4").tobytes()) + 4
    raw[at:at + 4] = (-8).to_bytes(4, "little", signed=True)
    return bytes(raw), at


@pytest.mark.parametrize("read", [
    lambda p: p.methods, lambda p: p.state_dict(), lambda p: p.constants(),
    lambda p: p.named_tensors(), lambda p: p.regions(), lambda p: p.info(),
    lambda p: p.missing_data, lambda p: p.named_data, lambda p: p.delegate_constants()],
    ids=["methods", "state_dict", "constants", "named_tensors", "regions", "info",
         "missing_data", "named_data", "delegate_constants"])
@pytest.mark.parametrize("verify", [True, False])
def test_a_plan_is_checked_in_full_when_first_read(read: Any, verify: bool) -> None:
    """The execution plans are checked the first time anything of them is read, all of
    them at once, as at open with verify="full": the same error, at every read (nothing
    of them readable unchecked), and by verify()."""
    bad, at = _negative_size()
    with pytest.raises(pfm.FormatError) as full:
        pfm.load(bad, verify="full")
    p = pfm.load(bad, verify=verify)   # the program around the plans is checked here
    assert p.version == 0 and p.extended_header is not None
    assert repr(p).endswith(f": 1 execution plan, refused: negative_dimension at "
                            f"{full.value.path}>"), repr(p)   # a repr never raises
    for _ in range(2):
        with pytest.raises(pfm.FormatError) as e:
            read(p)
        assert (e.value.code, e.value.offset, e.value.path) == (
            full.value.code, full.value.offset, full.value.path)
        assert e.value.code == "negative_dimension" and e.value.offset == at
        assert e.value.path.startswith("execution_plan[0].values["), e.value.path
    with pytest.raises(pfm.FormatError) as e:
        pfm.verify(bad)
    assert e.value.path == full.value.path


@pytest.mark.parametrize("stem", ["mlp", "two_methods", "xnnpack"])
@pytest.mark.parametrize("budget", ["max_tables", "max_elements"])
def test_a_budget_counts_the_whole_program_in_both_modes(stem: str, budget: str) -> None:
    """The plans' check goes on from the open's visits: every budget too small refuses
    the program with the same error whether the plans are checked at open or at their
    first read, and the smallest that suffices is the same (found by review: each half
    of the program had the whole budget)."""
    path = os.path.join(ET, stem + ".pte")
    enough = None
    for n in range(1, 400):
        try:
            with load_full(path, **{budget: n}):
                enough = n
                break
        except pfm.FormatError as e:
            assert e.code in ("table_budget", "element_budget"), e
    assert enough is not None and enough > 20, enough


def test_verify_full_is_an_option_like_the_others() -> None:
    """verify="full" travels with the program (load_args, pickling) and nothing but True,
    False and "full" is taken."""
    path = os.path.join(ET, "mlp.pte")
    with pfm.load(path, verify="full") as p:
        assert p.load_args["verify"] == "full"
        again = pickle.loads(pickle.dumps(p))
        assert again.load_args["verify"] == "full" and list(again.methods) == ["forward"]
    with pytest.raises(ValueError, match="verify must be"):
        pfm.load(path, verify="lazy")


def _edit(raw: bytes, at: int, value: int) -> bytes:
    out = bytearray(raw)
    out[at] = value
    return bytes(out)


def test_data_files_with_a_file_that_is_no_program() -> None:
    raw = bytearray(open(os.path.join(ET, "mlp.pte"), "rb").read())
    raw[4:8] = b"XX12"   # no identifier this library reads: the loader says so
    with pytest.raises(pfm.FormatError) as e:
        load_full(bytes(raw), data=[os.path.join(ET, "external.ptd")])
    assert e.value.code == "bad_identifier"
    with pytest.raises(ValueError, match="data= is for ExecuTorch programs"):
        pfm.load(os.path.join(DATA, "mlp_jit.ff"), data=[os.path.join(ET, "external.ptd")])
    with pytest.raises(ValueError, match="this is a data file"):
        pfm.load(os.path.join(ET, "external.ptd"), data=[os.path.join(ET, "external.ptd")])


def _xnnpack_with_identifier(ident: bytes) -> bytes:
    """xnnpack.pte with its payload's flatbuffer identifier replaced (where ExecuTorch's
    reader puts the payload, and the XH00 header's flatbuffer offset at byte 10)."""
    doc, _ = _oracle("xnnpack")
    (delegate,) = doc["program"]["execution_plan"][0]["delegates"]
    offset, _ = doc["program"]["segments"][delegate["index"]]
    start = doc["header"]["segment_base_offset"] + offset
    raw = bytearray(open(os.path.join(ET, "xnnpack.pte"), "rb").read())
    assert raw[start + 4:start + 8] == b"XH00"
    fb = start + int.from_bytes(raw[start + 10:start + 14], "little")
    assert raw[fb + 4:fb + 8] == b"XN01"
    raw[fb + 4:fb + 8] = ident
    return bytes(raw)


def test_older_xnnpack_payloads_stay_opaque_and_unknown_ones_are_refused() -> None:
    with pfm.load(_xnnpack_with_identifier(b"XN00")) as p:   # XNNPACK's older format
        (d,) = p.methods["forward"].delegates
        assert d.id == "XnnpackBackend" and d.graph is None and len(d.data) > 0
        assert not any(".delegates[" in k for k in p.state_dict())
    with pytest.raises(pfm.FormatError) as e:
        load_full(_xnnpack_with_identifier(b"XN99"))
    assert e.value.code == "bad_identifier"


@pytest.mark.parametrize("stem, text, read", [
    ("mlp.pte", b"forward", lambda p: list(p.methods)),
    ("external.pte", b"l1.weight", lambda p: [p.methods["forward"].values[0].name]),
    ("external.ptd", b"l1.weight", lambda d: list(d.tensors)),
    ("external.ptd", b"l1.weight", lambda d: list(d.named_data)),
])
def test_a_name_that_is_not_utf8_is_refused_where_the_runtime_logs_it(
        stem: str, text: bytes, read: Any) -> None:
    """Method, operator, backend, external tensor and named data names: the runtime logs
    them when it cannot find what they name, and its Python bindings abort the process
    on a log line that is not UTF-8 (the gate's fidelity campaign). verify=True refuses
    one; verify=False reads it as its bytes (surrogateescape)."""
    raw = open(os.path.join(ET, stem), "rb").read()
    at = raw.index(text + b"\0")
    bad = _edit(raw, at, 0xFF)
    with pytest.raises(pfm.FormatError) as e:
        read(pfm.load(bad))
    assert e.value.code == "bad_utf8" and e.value.offset == at
    assert e.value.path in ("execution_plan[0].name", "named_data[0].key",
                            "execution_plan[0].values[0].val<Tensor>.extra_tensor_info."
                            "fully_qualified_name"), e.value.path
    name = (b"\xff" + text[1:]).decode("utf-8", "surrogateescape")
    with pfm.load(bad, verify=False) as f:
        assert name in read(f)
        assert name.encode("utf-8", "surrogateescape") == b"\xff" + text[1:]


def test_an_operator_name_is_text_up_to_its_first_nul() -> None:
    """The runtime reads (and logs) an operator's name up to its first NUL: bytes after it
    need not be UTF-8, and the program opens; strict mode refuses the string's bytes."""
    raw = open(os.path.join(ET, "mlp.pte"), "rb").read()
    at = raw.index(b"aten::")
    bad = _edit(_edit(raw, at + 4, 0), at + 5, 0xFF)
    with load_full(bad) as p:
        assert any(o.name.startswith("aten\0\udcff") for o in p.methods["forward"].operators)
    with pytest.raises(pfm.FormatError) as e:
        pfm.verify(bad, strict=True)
    assert e.value.code == "bad_utf8" and e.value.offset == at + 5, e.value


def test_a_stack_frame_that_is_not_utf8_opens_and_strict_refuses_it() -> None:
    """A string the runtime neither looks up nor logs (a chain's stack trace) is bytes to
    FlatBuffers' verifier: it opens, and reads back as its bytes; strict mode refuses it."""
    raw = open(os.path.join(ET, "cond_stacktrace.pte"), "rb").read()
    at = raw.index(b"make_et_data.py:Cond\0")
    bad = _edit(raw, at, 0xFF)
    with load_full(bad) as p:
        frames = [f for c in p.methods["forward"].chains for t in c.stacktrace or []
                  for f in t]
        assert "\udcffake_et_data.py:Cond" in [f.filename for f in frames]
    with pytest.raises(pfm.FormatError) as e:
        pfm.verify(bad, strict=True)
    assert e.value.code == "bad_utf8" and e.value.offset == at


@pytest.mark.parametrize("root, code", [(0, "zero_offset"), (1, "misaligned"),
                                        (1 << 20, "out_of_bounds")])
def test_a_bad_root_offset_is_located_at_root(root: int, code: str) -> None:
    """(found by the sweep: these errors came without a path)"""
    raw = bytearray(open(os.path.join(ET, "mlp.pte"), "rb").read())
    raw[0:4] = root.to_bytes(4, "little")
    with pytest.raises(pfm.FormatError) as e:
        load_full(bytes(raw))
    assert e.value.code == code and e.value.path == "root"


def _sparse_copy(src: str, path: str, base: int) -> bytes:
    """``src`` (a program with an eh00 header) rewritten so that its segment data starts
    at ``base``: the flatbuffer at 0, a hole, the segment bytes at ``base``. Skips when
    the filesystem cannot hold the file sparse."""
    raw = open(src, "rb").read()
    assert raw[8:12] == b"eh00"
    old_base = int.from_bytes(raw[24:32], "little")
    head = bytearray(raw[:old_base])
    head[24:32] = base.to_bytes(8, "little")
    try:
        with open(path, "wb") as f:
            f.write(head)
            f.seek(base)
            f.write(raw[old_base:])
    except OSError as e:   # EFBIG, ENOSPC: no sparse file of this size here
        pytest.skip(f"the filesystem refuses a sparse file of {base + len(raw)} bytes: {e}")
    if os.stat(path).st_blocks * 512 > 64 << 20:
        os.unlink(path)
        pytest.skip("the filesystem does not keep the file sparse")
    return raw


@pytest.mark.parametrize("stem", ["mlp", "xnnpack"])
def test_segments_past_4_gib_load(tmp_path, stem: str) -> None:
    """The segment base offset is 64-bit: segment data past 4 GiB (a sparse file) reads
    back the bytes it held at its original offset: constants, named data, payloads."""
    path = str(tmp_path / (stem + ".pte"))
    base = (5 << 30) + 4096
    _sparse_copy(os.path.join(ET, stem + ".pte"), path, base)
    assert os.path.getsize(path) > 1 << 32
    with _open(stem) as small, pfm.load(path) as big:
        assert big.info()["size"] > 1 << 32
        want = small.constants()
        got = big.constants()
        assert [(p, v) for p, v, _ in got] == [(p, v) for p, v, _ in want]
        for (_, _, a), (_, _, b) in zip(got, want):
            np.testing.assert_array_equal(a, b)
        assert {k: bytes(v) for k, v in big.named_data.items()} == \
            {k: bytes(v) for k, v in small.named_data.items()}
        assert [bytes(d.data) for d in big.methods["forward"].delegates] == \
            [bytes(d.data) for d in small.methods["forward"].delegates]
        # the comparison compared something, and not the zeros of the hole
        assert want or small.named_data
        assert all(a.any() for _, _, a in want)


def test_a_jump_to_the_end_of_the_chain_loads_and_past_it_only_strict_refuses() -> None:
    """torch.cond's program jumps to one past its last instruction (the end of the chain,
    where the runtime stops): that loads (found: refused as bad_index). The runtime ends
    the chain at any destination past that too (Method::execute runs while the index is
    below the count): it opens, and strict mode refuses it."""
    path = os.path.join(ET, "cond_stacktrace.pte")
    with pfm.load(path) as p:
        chain = p.methods["forward"].chains[0]
        n = len(chain.instructions)
        jumps = [i for i, ins in enumerate(chain.instructions)
                 if isinstance(ins, JumpFalseCall)]
        assert any(chain.instructions[i].destination_instruction == n for i in jumps)
        # where that destination is stored (the schema's reader, on the verified file)
        last = p._root.tables("execution_plan")[0].tables("chains")[0].tables("instructions")
        table = [last[i].union("instr_args")[1] for i in jumps
                 if chain.instructions[i].destination_instruction == n][0]
        at = table._at(table.fields["destination_instruction"])
    raw = bytearray(open(path, "rb").read())
    assert int.from_bytes(raw[at:at + 4], "little") == n
    raw[at:at + 4] = (n + 1).to_bytes(4, "little")
    with load_full(bytes(raw)) as p:
        jump = [ins for ins in p.methods["forward"].chains[0].instructions
                if isinstance(ins, JumpFalseCall) and ins.destination_instruction == n + 1]
        assert jump
    with pytest.raises(pfm.FormatError) as e:
        pfm.verify(bytes(raw), strict=True)
    assert e.value.code == "bad_index" and e.value.offset == at
    assert e.value.path.endswith("instr_args<JumpFalseCall>")


def test_plans_sharing_a_name() -> None:
    """Two execution plans named alike: methods gives the first (the runtime's pick by
    name) and named_tensors names each plan's constants by its own index (found: an
    IndexError)."""
    raw = bytearray(open(os.path.join(ET, "two_methods.pte"), "rb").read())
    at = raw.index(b"first_layer\0")
    assert int.from_bytes(raw[at - 4:at], "little") == 11
    raw[at - 4:at] = (7).to_bytes(4, "little")
    raw[at:at + 8] = b"forward\0"
    with pfm.load(bytes(raw)) as p:
        assert list(p.methods) == ["forward"] and p.methods["forward"].index == 0
        plans = {plan for plan, _, _ in p.constants()}
        assert plans == {0, 1}
        named = p.named_tensors()
        assert {f"forward.values[{v}]" for _, v, _ in p.constants()} <= set(named)
