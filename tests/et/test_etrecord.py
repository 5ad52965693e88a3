"""ExecuTorch ETRecords (.etrecord) and torch.save archives, against ExecuTorch 1.5.1's and
torch 2.13's own reading of them.

tests/data/etrecord/{portable,xnnpack}.etrecord (and the programs beside them) and their
NAME.oracle.json come from tests/data/make_etrecord_data.py: two models with nested
modules exported with ``generate_etrecord=True`` (one with two methods and no backend,
one lowered to XNNPACK), and what ExecuTorch's ``parse_etrecord`` and ``torch.load`` read
from them: the members, the maps, every graph's nodes and signature, every torch.save
archive's tensors. Bad inputs are made here from those files' bytes or written by hand
(zips with Python's zipfile, pickles opcode by opcode); none needs torch.
"""
from __future__ import annotations

import hashlib
import io
import json
import os
import struct
import zipfile
from typing import Any, Dict, List, Optional

import numpy as np
import pytest

import pyflatmodule as pfm
from pyflatmodule.core.torch_save import TorchSave, read_torch_save
from pyflatmodule.core.zipview import ZipView

from support import paths
from support.cli import reads_in_both, run_cli

DATA = os.path.join(paths.DATA, "etrecord")
NAMES = ("portable", "xnnpack")


def _path(name: str) -> str:
    return os.path.join(DATA, f"{name}.etrecord")


def _oracle(name: str) -> Dict[str, Any]:
    with open(os.path.join(DATA, f"{name}.oracle.json"), encoding="utf-8") as f:
        return dict(json.load(f))


def _bytes(name: str) -> bytes:
    with open(_path(name), "rb") as f:
        return f.read()


# ------------------------------------------------------------ against ExecuTorch's reading

@pytest.mark.parametrize("name", NAMES)
def test_members(name: str) -> None:
    want = _oracle(name)["members"]
    with pfm.load(_path(name)) as r:
        assert isinstance(r, pfm.ETRecord)
        assert [(m.name, m.size) for m in r.members] == [(m["name"], m["size"]) for m in want]
        kinds = {m.name: m.kind for m in r.members}
    assert kinds["ETRECORD_V0"] == "marker"
    assert kinds["debug_handle_map"] == "json"
    assert kinds["edge_dialect_exported_program/forward"] == "program"
    assert kinds["edge_dialect_exported_program/forward_state_dict"] == "torch_save"


@pytest.mark.parametrize("name", NAMES)
def test_maps(name: str) -> None:
    """The maps as parse_etrecord gives them (JSON's string keys kept)."""
    want = _oracle(name)
    with pfm.load_etrecord(_path(name)) as r:
        assert r.debug_handle_map == want["debug_handle_map"]
        assert r.delegate_map == want["delegate_map"]
        assert r.instruction_id_to_num_outs_map == want["instruction_id_to_num_outs_map"]
        assert all(isinstance(k, str) for m in r.debug_handle_map.values() for k in m)


def _node(n: pfm.executorch.GraphNode) -> Dict[str, Any]:
    return {"name": n.name, "op": n.op, "target": n.target, "debug_handle": n.debug_handle,
            "nn_module_stack": None if n.module_stack is None else
            [[k, list(v)] for k, v in n.module_stack.items()],
            "stack_trace": n.stack_trace}


@pytest.mark.parametrize("name", NAMES)
def test_graphs(name: str) -> None:
    """Every graph parse_etrecord deserializes: its nodes in order (name, op, target,
    debug handle, nn_module_stack, stack trace) and its signature."""
    want = _oracle(name)["graphs"]
    with pfm.load(_path(name)) as r:
        assert sorted(r.graphs) == sorted(want)
        for key, graph in r.graphs.items():
            assert [_node(n) for n in graph.nodes] == want[key]["nodes"], key
            sig = want[key]["signature"]
            assert [list(s) for s in graph.signature.inputs] == [
                [s["kind"], s["name"], s["target"], s["persistent"]] for s in sig["inputs"]]
            assert [list(s) for s in graph.signature.outputs] == [
                [s["kind"], s["name"], s["target"]] for s in sig["outputs"]]


def test_signature_targets() -> None:
    with pfm.load(_path("portable")) as r:
        g = r.graphs["edge_dialect_exported_program/encode"]
        assert g.signature.targets()["b_m_window"] == "m.window"
        assert g.node("aten_mul_tensor").debug_handle in g.by_debug_handle()


def _layout(a: np.ndarray) -> Dict[str, Any]:
    return {"dtype": str(a.dtype), "shape": list(a.shape),
            "strides": [s // a.itemsize for s in a.strides],
            "sha256": hashlib.sha256(np.ascontiguousarray(a).tobytes()).hexdigest()}


@pytest.mark.parametrize("name", NAMES)
def test_torch_save_tensors(name: str) -> None:
    """Every torch.save archive's tensors as torch.load reads them: dtype, shape, strides
    and bytes; read-only views of the file."""
    want = _oracle(name)["torch_save"]
    with pfm.load(_path(name)) as r:
        for member, tensors in want.items():
            got = r.state_dict(member)
            assert sorted(got) == sorted(tensors), member
            for key, t in tensors.items():
                expected = {k: t[k] for k in ("dtype", "shape", "strides", "sha256")}
                assert _layout(got[key]) == expected, (member, key)
                assert not got[key].flags.writeable
        programs = [g for g in r.graph_names if g + "_state_dict" in want]
        assert r.state_dicts().keys() == set(programs)


def test_storage_offset_and_views() -> None:
    """A buffer on a slice of a storage starts at its offset there, in the mapping."""
    want = _oracle("portable")["torch_save"]["exported_program_state_dict"]
    with pfm.load(_path("portable")) as r:
        member = r.member("exported_program_state_dict")
        archive = TorchSave(r.read(member.name), member.name, member.offset)
        sd = archive.load()
        window = sd["window"]
        storages = {k: np.frombuffer(archive.zip.read(k), np.uint8)
                    for k in archive.zip.members if "/data/" in k}
        start = window.__array_interface__["data"][0]
        found = [(k, start - s.__array_interface__["data"][0]) for k, s in storages.items()
                 if np.shares_memory(window, s)]
        assert [off // window.itemsize for _, off in found] == [
            want["window"]["storage_offset"]]
        assert sd["proj"].strides != np.ascontiguousarray(sd["proj"]).strides
        data = _bytes("portable")
        assert window.base is not None and np.shares_memory(
            np.frombuffer(r.read(member.name), np.uint8), window)
        assert len(data) == len(r._view)


def test_sources_and_lifetime() -> None:
    data = _bytes("xnnpack")
    for source in (data, bytearray(data), memoryview(data), io.BytesIO(data)):
        with pfm.load(source) as r:
            w = r.state_dict("edge_dialect_exported_program/forward")["fc.fc.weight"]
            assert not w.flags.writeable
        assert r.closed
        assert w.sum() == w.sum()    # the array outlives the record
    with pytest.raises(ValueError, match="closed"):
        r.read("debug_handle_map")
    assert pfm.files.file_format(_path("xnnpack")) == "etrecord"


def test_info_and_repr() -> None:
    with pfm.load(_path("portable")) as r:
        info = r.info()
        assert "3 graphs" in repr(r)
    assert info["format"] == "etrecord"
    assert {g["name"] for g in info["graphs"]} == set(_oracle("portable")["graphs"])
    assert pfm.verify(_path("portable"))["format"] == "etrecord"


def test_typed_loaders() -> None:
    with pytest.raises(pfm.FormatError, match="not an ExecuTorch program"):
        pfm.load_program(_path("portable"))
    pte = os.path.join(DATA, "portable.pte")
    with pytest.raises(pfm.FormatError, match="not an ExecuTorch ETRecord"):
        pfm.load_etrecord(pte)


# ------------------------------------------------------------ bad ETRecords

def _zip(members: Dict[str, bytes], compress: int = zipfile.ZIP_STORED) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", compress) as z:
        for name, data in members.items():
            z.writestr(name, data)
    return out.getvalue()


def _members(name: str) -> Dict[str, bytes]:
    with zipfile.ZipFile(_path(name)) as z:
        return {n: z.read(n) for n in z.namelist()}


def _error(data: bytes, code: str) -> pfm.FormatError:
    with pytest.raises(pfm.FormatError) as info:
        pfm.verify(data)
    e = info.value
    assert e.code == code, e
    assert e.path.startswith("etrecord"), e
    assert isinstance(e.offset, int) and 0 <= e.offset <= len(data), e
    return e


@pytest.mark.parametrize("cut", [10, 100, 1000, -100, -22, -1])
def test_truncated(cut: int) -> None:
    data = _bytes("portable")
    _error(data[:cut], "bad_zip")


def test_no_marker() -> None:
    members = _members("portable")
    del members["ETRECORD_V0"]
    e = _error(_zip(members), "not_etrecord")
    assert "zip archive" in str(e) and "ETRECORD_V0" in str(e)


@pytest.mark.parametrize("member, text", [
    ("debug_handle_map", b"{not json"), ("delegate_map", b"\xff\xfe"),
    ("instruction_id_to_num_outs_map", b"[1, 2]"),
    ("edge_dialect_exported_program/forward", b'{"graph_module": 3}'),
    ("exported_program", b"{]"),
])
def test_bad_json(member: str, text: bytes) -> None:
    members = _members("portable")
    members[member] = text
    e = _error(_zip(members), "bad_graph" if text.startswith(b'{"') else "bad_json")
    assert repr(member) in e.path


def test_bad_metadata() -> None:
    members = _members("xnnpack")
    program = json.loads(members["edge_dialect_exported_program/forward"])
    program["graph_module"]["graph"]["nodes"][0]["metadata"]["debug_handle"] = "one"
    members["edge_dialect_exported_program/forward"] = json.dumps(program).encode()
    e = _error(_zip(members), "bad_graph")
    assert e.path.endswith("nodes[0].debug_handle")


def test_deflated() -> None:
    """A compressed ETRecord reads the same (torch.save members inflated, not views)."""
    members = _members("portable")
    want = _oracle("portable")
    with pfm.load(_zip(members, zipfile.ZIP_DEFLATED)) as r:
        assert r.debug_handle_map == want["debug_handle_map"]
        assert r.member("exported_program_state_dict").kind == "torch_save"
        assert r.member("exported_program_state_dict").compressed
        assert len(r.graphs["exported_program"].nodes) == len(
            want["graphs"]["exported_program"]["nodes"])
        w = r.state_dict("exported_program")["proj"]
        assert _layout(w)["sha256"] == want["torch_save"]["exported_program_state_dict"][
            "proj"]["sha256"]


def test_bad_crc_of_deflated() -> None:
    data = bytearray(_zip({"ETRECORD_V0": b"", "debug_handle_map": b"{}" * 100},
                          zipfile.ZIP_DEFLATED))
    at = data.find(b"debug_handle_map") + len("debug_handle_map")
    data[at + 2] ^= 0xFF
    _error(bytes(data), "bad_zip")


def test_member_outside() -> None:
    """A directory entry whose member reaches past the archive."""
    data = bytearray(_zip({"ETRECORD_V0": b"", "debug_handle_map": b"{}"}))
    cd = data.rfind(b"PK\x01\x02")             # the last central directory entry
    struct.pack_into("<II", data, cd + 20, 1 << 20, 1 << 20)
    _error(bytes(data), "bad_zip")


# ------------------------------------------------------------ the restricted torch.save reader

class Pickle:
    """A pickle written opcode by opcode (protocol 2), as torch.save writes them."""

    def __init__(self) -> None:
        self.out = bytearray(b"\x80\x02")

    def op(self, raw: bytes) -> "Pickle":
        self.out += raw
        return self

    def text(self, s: str) -> "Pickle":
        b = s.encode()
        return self.op(b"X" + struct.pack("<I", len(b)) + b)

    def int(self, n: int) -> "Pickle":
        return self.op(b"J" + struct.pack("<i", n))

    def glob(self, module: str, name: str) -> "Pickle":
        return self.op(b"c" + module.encode() + b"\n" + name.encode() + b"\n")

    def ints(self, values: List[int]) -> "Pickle":
        self.op(b"(")
        for v in values:
            self.int(v)
        return self.op(b"t")

    def tensor(self, key: str, numel: int, offset: int, size: List[int], stride: List[int],
               storage: str = "FloatStorage") -> "Pickle":
        self.glob("torch._utils", "_rebuild_tensor_v2").op(b"(")
        self.op(b"(").text("storage").glob("torch", storage).text(key).text("cpu")
        self.int(numel).op(b"tQ")
        self.int(offset).ints(size).ints(stride).op(b"\x89")
        self.glob("collections", "OrderedDict").op(b")R")
        return self.op(b"tR")

    def tensor_v3(self, key: str, nbytes: int, dtype: str, size: List[int],
                  stride: List[int]) -> "Pickle":
        """A tensor of a dtype without a legacy storage type: an untyped storage."""
        self.glob("torch._utils", "_rebuild_tensor_v3").op(b"(")
        self.op(b"(").text("storage").glob("torch.storage", "UntypedStorage").text(key)
        self.text("cpu").int(nbytes).op(b"tQ")
        self.int(0).ints(size).ints(stride).op(b"\x89")
        self.glob("collections", "OrderedDict").op(b")R").glob("torch", dtype)
        return self.op(b"tR")

    def done(self) -> bytes:
        return bytes(self.out + b".")


def _archive(pkl: bytes, storages: Optional[Dict[str, bytes]] = None) -> bytes:
    members = {"archive/data.pkl": pkl, "archive/byteorder": b"little"}
    for key, data in (storages or {}).items():
        members[f"archive/data/{key}"] = data
    members["archive/version"] = b"3\n"
    return _zip(members)


def _state_dict(entries: List[Any]) -> bytes:
    p = Pickle().op(b"}(")
    for key, build in entries:
        p.text(key)
        build(p)
    return p.op(b"u").done()


STORAGE = np.arange(12, dtype=np.float32).tobytes()


def _read(archive: bytes) -> Any:
    return read_torch_save(memoryview(archive), "t")


def _refused(archive: bytes, code: str, match: Optional[str] = None) -> pfm.FormatError:
    with pytest.raises(pfm.FormatError, match=match) as info:
        _read(archive)
    assert info.value.code == code, info.value
    assert info.value.path.startswith("t"), info.value
    assert info.value.offset is not None and 0 <= info.value.offset <= len(archive)
    return info.value


def test_hand_written_archive() -> None:
    """Views with offsets and strides; two tensors of one storage share it."""
    pkl = _state_dict([("a", lambda p: p.tensor("0", 12, 2, [2, 3], [1, 2])),
                       ("b", lambda p: p.tensor("0", 12, 0, [12], [1])),
                       ("n", lambda p: p.int(-7))])
    got = _read(_archive(pkl, {"0": STORAGE}))
    whole = np.arange(12, dtype=np.float32)
    np.testing.assert_array_equal(got["a"], np.lib.stride_tricks.as_strided(
        whole[2:], (2, 3), (4, 8)))
    assert np.shares_memory(got["a"], got["b"]) and got["n"] == -7


def test_untyped_storage() -> None:
    """torch.save's form for dtypes without a legacy storage (uint16 here), and a
    parameter: the dtype from the call, the storage counted in bytes."""
    values = np.arange(6, dtype="<u2")
    pkl = _state_dict([("u", lambda p: p.glob("torch._utils", "_rebuild_parameter")
                        .tensor_v3("0", 12, "uint16", [3, 2], [1, 3])
                        .op(b"\x89").glob("collections", "OrderedDict").op(b")R\x87R"))])
    got = _read(_archive(pkl, {"0": values.tobytes()}))["u"]
    np.testing.assert_array_equal(got, values.reshape(2, 3).T)
    assert got.dtype == np.dtype("<u2") and not got.flags.writeable
    odd = _state_dict([("u", lambda p: p.tensor_v3("0", 5, "uint16", [2], [1]))])
    _refused(_archive(odd, {"0": bytes(5)}), "outside_storage")


def test_forbidden_global(tmp_path: Any) -> None:
    """``os.system`` by GLOBAL and by STACK_GLOBAL: refused where it is named, nothing
    run."""
    marker = tmp_path / "ran"
    command = f"touch {marker}"
    by_global = Pickle().glob("os", "system").text(command).op(b"\x85R").done()
    by_stack = Pickle().text("os").text("system").op(b"\x93").text(command) \
        .op(b"\x85R").done()
    for pkl in (by_global, by_stack):
        e = _refused(_archive(pkl), "refused", "os.system")
        assert e.offset is not None
    assert not marker.exists()


def test_forbidden_reduce() -> None:
    """An allowed global that is no callable (a storage type, a dtype) is not called."""
    for module, name in (("torch", "FloatStorage"), ("torch", "float32"),
                         ("torch.storage", "UntypedStorage")):
        pkl = Pickle().glob(module, name).op(b")R").done()
        _refused(_archive(pkl), "refused", "calls")
    # OrderedDict called with arguments, BUILD on a list, NEWOBJ
    _refused(_archive(Pickle().glob("collections", "OrderedDict").int(1).op(b"\x85R").done()),
             "refused")
    _refused(_archive(Pickle().op(b"]}b").done()), "refused", "BUILD")
    _refused(_archive(Pickle().glob("collections", "OrderedDict").op(b")\x81").done()),
             "refused", "NEWOBJ")


def test_missing_storage() -> None:
    pkl = _state_dict([("w", lambda p: p.tensor("7", 12, 0, [12], [1]))])
    e = _refused(_archive(pkl, {"0": STORAGE}), "missing_record", "'7'")
    assert "archive/data/7" in str(e)


@pytest.mark.parametrize("offset, size, stride", [
    (1, [12], [1]), (0, [4, 4], [4, 1]), (0, [2, 2], [1, 12]), (12, [1], [1])])
def test_tensor_past_storage(offset: int, size: List[int], stride: List[int]) -> None:
    pkl = _state_dict([("w", lambda p: p.tensor("0", 12, offset, size, stride))])
    _refused(_archive(pkl, {"0": STORAGE}), "outside_storage", "reaches element")


def test_storage_shorter_than_numel() -> None:
    pkl = _state_dict([("w", lambda p: p.tensor("0", 13, 0, [12], [1]))])
    _refused(_archive(pkl, {"0": STORAGE}), "outside_storage")


def test_negative_extent() -> None:
    pkl = _state_dict([("w", lambda p: p.tensor("0", 12, 0, [-1], [1]))])
    _refused(_archive(pkl, {"0": STORAGE}), "negative_dimension")


@pytest.mark.parametrize("pkl", [
    b"\x80\x02", b"\x80\x02X\xff\xff\xff\x00ab.", b"\x80\x02\xff.", b"\x80\x02t.",
    b"\x80\x02h\x05.", b"\x80\x02N(.", b"\x80\x02NN.", b"\x80\x02]Ns.",
])
def test_bad_pickle(pkl: bytes) -> None:
    _refused(_archive(pkl), "bad_pickle")


def test_not_a_torch_save() -> None:
    _refused(_zip({"a/b": b""}), "missing_record", "data.pkl")
    _refused(b"PK\x03\x04" + bytes(40), "bad_zip")


def test_zip_offsets_are_the_files() -> None:
    """An archive inside an archive reports offsets in the outer file."""
    inner = _archive(_state_dict([("w", lambda p: p.tensor("9", 12, 0, [12], [1]))]))
    outer = _zip({"pad": b"x" * 1000, "inner": inner})
    z = ZipView(memoryview(outer), "outer")
    m = z.members["inner"]
    with pytest.raises(pfm.FormatError) as info:
        TorchSave(z.read("inner"), "inner", m.offset).load()
    assert m.offset < info.value.offset < m.offset + len(inner)


# ------------------------------------------------------------ the command line

@pytest.mark.parametrize("command", ["info", "verify", "tree"])
def test_cli(command: str) -> None:
    """Each command as text and as JSON following its schema."""
    doc = reads_in_both(command, _path("portable"))
    entry = doc["files"][0] if "files" in doc else doc
    assert entry["format"] == "etrecord"
    if command == "info":
        want = _oracle("portable")
        assert [m["name"] for m in entry["members"]] == [m["name"] for m in want["members"]]
        assert {g["name"]: g["nodes"] for g in entry["graphs"]} == {
            k: len(g["nodes"]) for k, g in want["graphs"].items()}


def test_cli_extract_and_export(tmp_path: Any) -> None:
    r = run_cli("extract", _path("xnnpack"), "debug_handle_map", "-o", "-")
    assert r.returncode == 0 and json.loads(r.stdout_bytes) == _oracle("xnnpack")[
        "debug_handle_map"]
    out = str(tmp_path / "w.npz")
    assert run_cli("export", _path("xnnpack"), out).returncode == 0
    with np.load(out) as npz:
        assert "edge_dialect_exported_program/forward/fc.fc.weight" in npz.files
    r = run_cli("extract", _path("xnnpack"), "nothing")
    assert r.returncode == 1 and "no member" in r.stderr


def test_cli_bad_etrecord(tmp_path: Any) -> None:
    p = tmp_path / "cut.etrecord"
    p.write_bytes(_bytes("portable")[:-50])
    r = run_cli("info", str(p))
    assert r.returncode == 1 and "bad_zip" in r.stderr and "Traceback" not in r.stderr


def test_deep_values_are_errors() -> None:
    """Values nested past the interpreter's recursion limit are FormatErrors too: a JSON
    map, and a pickle's persistent id (the reader builds it without recursion, and its
    message shows a few levels)."""
    deep_json = b"[" * 20000 + b"]" * 20000
    _error(_zip({"ETRECORD_V0": b"", "debug_handle_map": deep_json}), "bad_json")
    deep = b"\x80\x02" + b"]" * 20000 + b"a" * 19999 + b"Q."
    e = _refused(_archive(deep), "bad_pickle", "persistent id")
    assert len(str(e)) < 300


def test_bare_pickles_listed_never_read(tmp_path: Any) -> None:
    """A bare pickle (an ETRecord of before March 2026) is listed as one and refused when
    asked for; an empty archive member reads as torch's empty dict; verify passes both."""
    marker = tmp_path / "ran"
    members = _members("portable")
    members["exported_program_state_dict"] = (
        Pickle().glob("os", "system").text(f"touch {marker}").op(b"\x85R").done())
    members["exported_program_constants"] = b""
    data = _zip(members)
    assert pfm.verify(data)["format"] == "etrecord"
    with pfm.load(data) as r:
        assert r.member("exported_program_state_dict").kind == "pickle"
        assert r.member("exported_program_constants").kind == "empty"
        assert r.torch_save("exported_program_constants") == {}
        with pytest.raises(pfm.FormatError) as info:
            r.state_dict("exported_program")
        assert info.value.code == "refused"
        assert "exported_program_state_dict" in info.value.path
    assert not marker.exists()
