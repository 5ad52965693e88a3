"""ExecuTorch ETDump profiles (.etdump) against ExecuTorch 1.5.1's own reading of them.

tests/data/et/profile.etdump (with its debug buffer profile.debug), alloc.etdump,
values.etdump (with values.debug) and etdump.oracle.json come from
tests/data/make_etdump.py: the runtime's ETDump of one method loaded and executed; a run
of allocation events and one of debug values of every type, compiled by flatc from
ExecuTorch's schema; what ExecuTorch's deserializer says of each (every event's fields),
the values its Inspector reads from the debug buffers, torch's reading of a strided
tensor, and the runtime's output. Bad inputs are made from the real files' bytes, by
walking their flatbuffers here (not with the reader under test).
"""
from __future__ import annotations

import io
import json
import os
import pathlib
import struct
import subprocess
import sys
from typing import Any, Dict, List

import numpy as np
import pytest

import pyflatmodule as pfm
import pyflatmodule.diff
from pyflatmodule.core.options import Options

from support.cli import reads_in_both, run_cli
from support.paths import ET, WILD

PROFILE = os.path.join(ET, "profile.etdump")
DEBUG = os.path.join(ET, "profile.debug")
ALLOC = os.path.join(ET, "alloc.etdump")
XNNPACK = os.path.join(ET, "xnnpack.etdump")
VALUES = os.path.join(ET, "values.etdump")
VALUES_DEBUG = os.path.join(ET, "values.debug")
with open(os.path.join(ET, "etdump.oracle.json"), encoding="utf-8") as _f:
    ORACLE: Dict[str, Any] = json.load(_f)
with open(PROFILE, "rb") as _f:
    BYTES = _f.read()
with open(ALLOC, "rb") as _f:
    ALLOC_BYTES = _f.read()
with open(DEBUG, "rb") as _f:
    DEBUG_BYTES = _f.read()


# ------------------------------------------------------ the file's bytes, walked here

def _u32(data: bytes, at: int) -> int:
    return int(struct.unpack_from("<I", data, at)[0])


def _field(data: bytes, table: int, field: int) -> int:
    """Position of field ``field`` of the table at ``table`` (0 when absent)."""
    vtable = table - struct.unpack_from("<i", data, table)[0]
    if 4 + 2 * field >= struct.unpack_from("<H", data, vtable)[0]:
        return 0
    off = struct.unpack_from("<H", data, vtable + 4 + 2 * field)[0]
    return table + off if off else 0


def _deref(data: bytes, at: int) -> int:
    return at + _u32(data, at)


def _element(data: bytes, table: int, field: int, i: int) -> int:
    """Table i of vector-of-tables field ``field``."""
    vec = _deref(data, _field(data, table, field))
    return _deref(data, vec + 4 + 4 * i)


def _root(data: bytes) -> int:
    """The ETDump table: the size prefix first, the root offset at 4, relative to 4."""
    return 4 + _u32(data, 4)


# ETDump: version 0, run_data 1; RunData: name 0, bundled_input_index 1, allocators 2,
# events 3; Event: profile_event 0, allocation_event 1, debug_event 2; DebugEvent:
# debug_entry 2; AllocationEvent: allocator_id 0; Value: val 0, tensor 1; Tensor:
# scalar_type 0, sizes 1, strides 2, offset 3.
EXECUTE = _element(BYTES, _root(BYTES), 1, 1)
EVENT = _element(BYTES, EXECUTE, 3, 0)           # a debug event: instruction 0's tensor
DEBUG_EVENT = _deref(BYTES, _field(BYTES, EVENT, 2))
VALUE = _deref(BYTES, _field(BYTES, DEBUG_EVENT, 2))
TENSOR = _deref(BYTES, _field(BYTES, VALUE, 1))
TENSOR_PATH = "run_data[1].events[0].debug_event.debug_entry.tensor"


def _with_vtable_slot_zeroed(data: bytes, table: int, field: int) -> bytes:
    """The file with field ``field`` of the table at ``table`` absent: the table gets a
    copy of its vtable with the slot zeroed, appended to the file, whose size prefix
    grows to hold it (writers share vtables between tables of one shape)."""
    vtable = table - struct.unpack_from("<i", data, table)[0]
    size = struct.unpack_from("<H", data, vtable)[0]
    out = bytearray(data) + bytes(len(data) % 2)
    copy = len(out)
    out += data[vtable:vtable + size]
    out += bytes(-len(out) % 8)
    struct.pack_into("<i", out, table, table - copy)
    struct.pack_into("<H", out, copy + 4 + 2 * field, 0)
    struct.pack_into("<I", out, 0, len(out) - 4)
    return bytes(out)


def _patched(data: bytes, at: int, fmt: str, value: Any) -> bytes:
    out = bytearray(data)
    struct.pack_into(fmt, out, at, value)
    return bytes(out)


# ------------------------------------------------------------ against the oracle

def _event_fields(e: Any) -> Dict[str, Any]:
    """An event as make_etdump.py writes ExecuTorch's reading of it."""
    if e.kind == "allocation":
        return {"kind": "allocation", "allocator_id": e.allocator_id,
                "allocation_size": e.allocation_size}
    out = {"kind": e.kind, "name": e.name, "chain_index": e.chain_index,
           "instruction_id": e.instruction_id,
           "delegate_debug_id_int": e.delegate_debug_id_int,
           "delegate_debug_id_str": e.delegate_debug_id_str}
    if e.kind == "profile":
        out.update(start_time=e.start_time, end_time=e.end_time)
    return out


def _layout(t: Dict[str, Any]) -> Any:
    return (t["scalar_type"], t["sizes"], t["strides"], t["offset"])


with open(os.path.join(WILD, "tutorial.oracle.json"), encoding="utf-8") as _f:
    #: ExecuTorch's reading of an ETDump others wrote (tests/data/make_wild_data.py)
    ORACLE["wild/tutorial"] = json.load(_f)["etdump"]


@pytest.mark.parametrize("name,path", [("profile", PROFILE), ("xnnpack", XNNPACK),
                                       ("alloc", ALLOC), ("values", VALUES),
                                       ("wild/tutorial", os.path.join(WILD, "tutorial.etdp"))])
def test_matches_exirs_reading(name: str, path: str) -> None:
    want = ORACLE[name]
    with pfm.load(path) as d:
        assert isinstance(d, pfm.ETDump)
        assert d.version == want["version"] and d.size == want["size"]
        assert len(d.runs) == len(want["run_data"])
        for run, wr in zip(d.runs, want["run_data"]):
            assert run.name == wr["name"]
            assert run.bundled_input_index == wr["bundled_input_index"]
            assert run.allocators == wr["allocators"]
            assert len(run.events) == len(wr["events"])
            for e, we in zip(run.events, wr["events"]):
                got = _event_fields(e)
                assert got == {k: we[k] for k in got}, (got, we)
                if e.kind == "profile":
                    assert e.duration == we["end_time"] - we["start_time"]
                    assert e.delegate_debug_id == (we["delegate_debug_id_str"] or None)
                    assert bytes(e.delegate_debug_metadata).hex() == \
                        (we["delegate_debug_metadata"] or "")
                if e.kind == "allocation":
                    assert e.allocator == wr["allocators"][we["allocator_id"]]
                if e.kind == "debug":
                    value = we["value"]
                    assert e.value_type == value["val"]
                    assert e.output == value.get("output", False)
                    tensors = [value["tensor"]] if "tensor" in value else \
                        value.get("tensor_list", [])
                    assert e.tensors == [_layout(t) for t in tensors]


def test_info_counts_what_exir_reads() -> None:
    events = [e for r in ORACLE["profile"]["run_data"] for e in r["events"]]
    with pfm.load_etdump(PROFILE, debug_buffer=DEBUG) as d:
        info = d.info()
    assert info["format"] == "etdump" and info["runs"] == 2
    assert info["events"] == len(events)
    for kind in ("profile", "allocation", "debug"):
        assert info[f"{kind}_events"] == sum(e["kind"] == kind for e in events)
    assert info["debug_tensors"] == sum("tensor" in e.get("value", {}) for e in events)
    assert info["debug_buffer_size"] == ORACLE["profile"]["debug_buffer_size"]
    assert pfm.verify(ALLOC)["allocation_events"] == 3


def test_debug_tensors_are_inspectors_values_and_views_of_the_buffer() -> None:
    want = ORACLE["profile"]["inspector_debug_data"]
    with pfm.load_etdump(PROFILE, debug_buffer=DEBUG) as d:
        debug = [e for e in d.runs[1].events if isinstance(e, pfm.executorch.DebugEvent)]
        inner = [e for e in debug if not e.output]
        assert sorted(str(e.instruction_id) for e in inner) == sorted(want)
        for e in inner:
            value = e.value
            assert isinstance(value, np.ndarray) and not value.flags.writeable
            np.testing.assert_array_equal(value, np.array(want[str(e.instruction_id)][0],
                                                          np.float32))
            # the view reads the debug buffer's bytes at the tensor's offset
            (t,) = e.tensors
            assert value.tobytes() == DEBUG_BYTES[t.offset:t.offset + value.nbytes]
        (out,) = [e for e in debug if e.output]
        np.testing.assert_array_equal(out.value, np.array(ORACLE["profile"]["output"],
                                                          np.float32))


def _plain(v: Any) -> Any:
    """A value as make_etdump.py writes the Inspector's inflation of it."""
    if isinstance(v, list):
        return [_plain(t) for t in v]
    if isinstance(v, np.ndarray):
        return {"shape": list(v.shape), "values": v.flatten().tolist()}
    return v


def test_debug_values_of_every_type() -> None:
    """Each as ExecuTorch's Inspector inflates it, but for the tensor whose strides
    transpose it: the Inspector reads its bytes as contiguous, torch (``as_strided``) and
    this reader by its strides."""
    want = ORACLE["values"]
    with pfm.load_etdump(VALUES, debug_buffer=VALUES_DEBUG) as d:
        events = list(d.runs[0].events)
        assert [e.value_type for e in events] == [  # type: ignore[union-attr]
            "Int", "Bool", "Float", "Double", "Tensor", "TensorList", "Null"]
        for i, (e, inflated) in enumerate(zip(events, want["inflated"])):
            value = e.value   # type: ignore[union-attr]
            if str(i) in want["as_strided"]:
                assert value.tolist() == want["as_strided"][str(i)]
                assert _plain(value) != inflated   # the Inspector ignores the strides
            else:
                assert _plain(value) == inflated, (i, value, inflated)
                if not isinstance(inflated, (dict, list)):
                    assert type(value) is type(inflated), (i, value, inflated)
        assert d.info()["debug_tensors"] == 3


def test_without_the_debug_buffer_layouts_read_but_not_values() -> None:
    with pfm.load(PROFILE) as d:
        e = d.runs[1].events[0]
        assert isinstance(e, pfm.executorch.DebugEvent)
        want = ORACLE["profile"]["run_data"][1]["events"][0]["value"]["tensor"]
        assert e.tensors == [_layout(want)]
        with pytest.raises(ValueError, match="debug buffer"):
            e.value


def test_close_repr_and_the_front_door() -> None:
    assert pfm.files.file_format(PROFILE) == "etdump"
    d = pfm.load_etdump(PROFILE)
    assert PROFILE in repr(d) and "2 runs, 19 events" in repr(d)
    d.close()
    assert d.closed and repr(d) == "<ETDump: closed>"
    with pytest.raises(ValueError, match="closed"):
        d.runs
    with pytest.raises(pfm.FormatError) as e:
        pfm.load_program(PROFILE)
    assert e.value.code == "bad_identifier" and "ETDump" in e.value.reason
    with pytest.raises(pfm.FormatError) as e:
        pfm.load_etdump(os.path.join(ET, "mlp.pte"))
    assert e.value.code == "bad_identifier" and "ETDump" in e.value.reason
    with pytest.raises(ValueError, match="data= is for ExecuTorch programs"):
        pfm.load(PROFILE, data=[PROFILE])
    with pytest.raises(ValueError, match="debug_buffer= is for"):
        pfm.load(os.path.join(ET, "mlp.pte"), debug_buffer=DEBUG)
    with pytest.raises(ValueError, match="not a model"):
        pfm.diff.diff(PROFILE, PROFILE)


def test_every_kind_of_source_opens_alike() -> None:
    sources: List[Any] = [pathlib.Path(PROFILE), BYTES, bytearray(BYTES), memoryview(BYTES),
                          io.BytesIO(BYTES), open(PROFILE, "rb")]
    for source in sources:
        with pfm.load(source, debug_buffer=io.BytesIO(DEBUG_BYTES)) as d:
            assert d.info()["events"] == 19 and d.runs[1].events[0].value.shape == (4, 3)
    with pfm.load(PROFILE, copy=True, debug_buffer=DEBUG) as d:
        assert d.info()["debug_buffer_size"] == len(DEBUG_BYTES)
    sources[-1].close()
    assert pfm.verify(PROFILE, debug_buffer=DEBUG)["debug_tensors"] == 6
    with pytest.raises(pfm.FormatError) as e:
        pfm.verify(PROFILE, debug_buffer=DEBUG_BYTES[:64])
    assert e.value.code == "outside_storage"


# ----------------------------------------------------------------- bad input

def _error(data: bytes, debug: Any = None) -> pfm.FormatError:
    with pytest.raises(pfm.FormatError) as info:
        pfm.load(data, debug_buffer=debug)
    return info.value


def test_a_truncated_file_is_refused_at_its_size_prefix() -> None:
    for n in (12, 100, len(BYTES) // 2, len(BYTES) - 1):
        e = _error(BYTES[:n])
        assert (e.code, e.offset, e.path) == ("bad_size", 0, "size"), (n, e)
        need = 4 + int.from_bytes(BYTES[:4], "little")   # the size prefix, and itself
        assert e.reason == f"truncated: the file is {n:,} bytes, its size prefix needs " \
            f"{need:,}", n


def test_an_error_in_an_etdump_or_a_data_file_is_not_an_invalid_model(tmp_path) -> None:
    for name, raw, called in [
            ("cut.etdump", BYTES[:100], "ETDump"),
            ("cut.ptd", open(os.path.join(ET, "external.ptd"), "rb").read()[:100],
             "data file"),
            ("cut.pte", open(os.path.join(ET, "mlp.pte"), "rb").read()[:100], "model"),
            ("text.txt", b"not a file of any format here", "file")]:
        path = tmp_path / name
        path.write_bytes(raw)
        r = run_cli("info", str(path))
        assert r.returncode == 1 and f"{path}: invalid {called}: " in r.stderr, r.stderr


def test_a_wrong_identifier_names_the_formats() -> None:
    e = _error(BYTES[:8] + b"ED01" + BYTES[12:])
    assert e.code == "bad_identifier" and "ED00" in e.reason


def test_the_opener_names_the_identifier_at_byte_8() -> None:
    with pytest.raises(pfm.FormatError) as e:
        pfm.executorch.open_etdump(BYTES[:8] + b"ED01" + BYTES[12:], Options())
    assert (e.value.code, e.value.offset) == ("bad_identifier", 8)


def test_nothing_is_required() -> None:
    """ExecuTorch's readers take every field absent: an ETDump without runs, a run
    without events or a name read as empty."""
    with pfm.load(_with_vtable_slot_zeroed(BYTES, _root(BYTES), 1)) as d:
        assert d.runs == [] and d.info()["events"] == 0
    with pfm.load(_with_vtable_slot_zeroed(BYTES, EXECUTE, 3)) as d:
        assert len(d.runs[1].events) == 0 and d.info()["events"] == 2
    with pfm.load(_with_vtable_slot_zeroed(BYTES, EXECUTE, 0)) as d:
        assert d.runs[1].name is None


def test_an_event_without_a_member() -> None:
    """The schema: exactly one of an Event's fields must be non-null."""
    e = _error(_with_vtable_slot_zeroed(BYTES, EVENT, 2))
    assert (e.code, e.path, e.offset) == ("bad_event", "run_data[1].events[0]", EVENT)


def test_an_allocator_id_outside_the_runs_allocators() -> None:
    event = _element(ALLOC_BYTES, _element(ALLOC_BYTES, _root(ALLOC_BYTES), 1, 0), 3, 1)
    alloc = _deref(ALLOC_BYTES, _field(ALLOC_BYTES, event, 1))
    at = _field(ALLOC_BYTES, alloc, 0)
    assert _u32(ALLOC_BYTES, at) == 1   # the second allocator, of two
    e = _error(_patched(ALLOC_BYTES, at, "<i", 2))
    assert e.code == "bad_index"
    assert e.path == "run_data[0].events[1].allocation_event.allocator_id"


def test_a_debug_tensor_past_the_debug_buffer() -> None:
    offset = ORACLE["profile"]["run_data"][1]["events"][0]["value"]["tensor"]["offset"]
    e = _error(BYTES, DEBUG_BYTES[:offset + 47])   # one byte short of its [4, 3] floats
    assert (e.code, e.path, e.offset) == ("outside_storage", TENSOR_PATH + ".offset", TENSOR)


def test_a_debug_value_whose_type_names_a_field_it_lacks() -> None:
    at = _field(BYTES, VALUE, 0)
    assert BYTES[at] == 5   # ValueType Tensor
    for bad in (1, 9):       # Int, which it does not hold; no ValueType
        e = _error(_patched(BYTES, at, "<B", bad))
        assert e.code == "bad_value"
        assert e.path == "run_data[1].events[0].debug_event.debug_entry.val"


def test_debug_tensor_layouts_that_describe_no_bytes() -> None:
    sizes = _deref(BYTES, _field(BYTES, TENSOR, 1))
    strides = _deref(BYTES, _field(BYTES, TENSOR, 2))
    e = _error(_patched(BYTES, sizes + 4, "<q", -4))
    assert (e.code, e.path) == ("negative_dimension", TENSOR_PATH + ".sizes[0]")
    e = _error(_patched(BYTES, strides, "<I", 1))   # one stride for two sizes
    assert (e.code, e.path) == ("length_mismatch", TENSOR_PATH + ".strides")
    e = _error(_patched(BYTES, strides + 4, "<q", 4))   # [4, 1]: past its 12 elements
    assert (e.code, e.path) == ("outside_storage", TENSOR_PATH + ".strides")
    e = _error(_patched(BYTES, _field(BYTES, TENSOR, 0), "<b", 99))
    assert (e.code, e.path) == ("bad_scalar_type", TENSOR_PATH + ".scalar_type")


def test_a_fault_in_a_tensor_list_is_located_at_its_element() -> None:
    with open(VALUES, "rb") as f:
        data = f.read()
    event = _element(data, _element(data, _root(data), 1, 0), 3, 5)
    value = _deref(data, _field(data, _deref(data, _field(data, event, 2)), 2))
    assert data[_field(data, value, 0)] == 6   # ValueType TensorList
    first = _element(data, _deref(data, _field(data, value, 2)), 0, 0)
    e = _error(_patched(data, _field(data, first, 0), "<b", 99))
    assert e.code == "bad_scalar_type"
    assert e.path == ("run_data[0].events[5].debug_event.debug_entry.tensor_list.tensors[0]"
                      ".scalar_type")


def test_the_root_offset_zeroed() -> None:
    """FlatBuffers' verifier refuses an offset to itself."""
    e = _error(_patched(BYTES, 4, "<I", 0))
    assert e.code == "zero_offset" and e.offset == 4


SWEEP = """
import random, sys
import pyflatmodule as pfm
data = open(sys.argv[1], "rb").read()
debug = open(sys.argv[2], "rb").read()
rng = random.Random(0)
refused = 0
for _ in range(int(sys.argv[3])):
    b = bytearray(data)
    for _ in range(rng.randint(1, 4)):
        b[rng.randrange(len(b))] = rng.randrange(256)
    try:
        with pfm.load(bytes(b), debug_buffer=debug) as d:
            for run in d.runs:
                run.name, run.allocators
                for e in run.events:
                    repr(e)
                    if e.kind == "debug":
                        e.value
    except pfm.FormatError:
        refused += 1
print(refused)
"""


@pytest.mark.parametrize("path,debug", [(PROFILE, DEBUG), (VALUES, VALUES_DEBUG),
                                        (ALLOC, DEBUG)], ids=["profile", "values", "alloc"])
def test_mutated_files_are_refused_or_read_never_a_crash(path: str, debug: str) -> None:
    """Random byte changes of the real files: each opens and reads in full, or raises
    FormatError (a UTF-8 fault in a name, left to the read, raises it too)."""
    r = subprocess.run([sys.executable, "-c", SWEEP, path, debug, "2000"],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    assert int(r.stdout) > 0


def _names(run: Any) -> List[str]:
    return [e.name for e in run.events if e.kind == "profile"]


def test_xnnpacks_events_carry_its_labels() -> None:
    """The delegate's own events have no name: the delegate's label is their id."""
    want = [e for e in ORACLE["xnnpack"]["run_data"][1]["events"]
            if e["delegate_debug_id_str"] is not None]
    assert want, "the XNNPACK run records the delegate's events"
    with pfm.load(XNNPACK) as d:
        got = [e for e in d.runs[1].events
               if e.kind == "profile" and e.delegate_debug_id is not None]
        assert [(e.name, e.delegate_debug_id, e.instruction_id) for e in got] == \
            [(None, w["delegate_debug_id_str"], w["instruction_id"]) for w in want]
        assert all(repr(e).startswith(f"<ProfileEvent {e.delegate_debug_id!r}") for e in got)


def test_the_runs_are_the_methods_load_and_execution() -> None:
    with pfm.load(PROFILE) as d:
        assert [r.name for r in d.runs] == ["Default", "Execute"]
        assert _names(d.runs[0]) == ["Method::init", "Program::load_method"]
        assert _names(d.runs[1])[-1] == "Method::execute"


# ------------------------------------------------------------------ the command line

@pytest.mark.parametrize("command", ["info", "verify", "tree"])
def test_cli_reads_it(command: str) -> None:
    reads_in_both(command, PROFILE)


def test_cli_info_and_tree_show_exirs_runs() -> None:
    want = ORACLE["alloc"]["run_data"]
    (doc,) = json.loads(run_cli("info", "--json", ALLOC).stdout)["files"]
    assert doc["format"] == "etdump" and doc["size"] == len(ALLOC_BYTES)
    assert [(r["name"], r["allocators"], r["events"]) for r in doc["run_data"]] == \
        [(r["name"], r["allocators"], len(r["events"])) for r in want]
    tree = json.loads(run_cli("tree", "--json", ALLOC).stdout)
    (run,) = tree["files"][0]["root"]["children"]
    assert run["run_name"] == want[0]["name"]
    assert [(e["allocator"], e["allocation_size"]) for e in run["children"]] == \
        [(want[0]["allocators"][e["allocator_id"]], e["allocation_size"])
         for e in want[0]["events"]]


@pytest.mark.parametrize("command", ["dis", "ops", "memory"])
def test_cli_commands_for_code_say_it_holds_none(command: str) -> None:
    for path in (os.path.join(ET, "external.ptd"), PROFILE):
        r = run_cli(command, path)
        assert r.returncode == 1 and "holds no methods" in r.stderr, (path, r)


def test_cli_names_a_bad_files_fault() -> None:
    bad = _with_vtable_slot_zeroed(BYTES, EVENT, 2)
    path = os.path.join(os.environ.get("TMPDIR", "/tmp"), f"bad-{os.getpid()}.etdump")
    with open(path, "wb") as f:
        f.write(bad)
    try:
        r = run_cli("verify", path)
    finally:
        os.remove(path)
    assert r.returncode == 1 and "INVALID [bad_event]" in r.stdout
    assert "at run_data[1].events[0]" in r.stdout
