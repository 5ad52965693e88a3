"""Core ML delegate payloads (``Delegate.graph`` of a ``CoreMLBackend`` delegate) against
ExecuTorch's and coremltools' own reading of them.

tests/data/et/coreml.pte (the sample network) and coreml_mlp.pte are lowered by
ExecuTorch 1.5.1's CoreMLPartitioner (tests/data/make_et_data.py); their oracles hold,
per Core ML delegate, the files ExecuTorch's inmemoryfs unflattens the payload into (by
SHA-256), and coremltools' reading of the package: the spec's version, inputs, outputs,
the main block's operations, and each const operation's value (by coremltools'
BlobReader, or the spec's protobuf). Bad payloads are made from the file's bytes, the
file table found by hand, and must be refused at the part at fault.
"""
from __future__ import annotations

import hashlib
import json
import os
from typing import Any, Dict, List, Tuple

import numpy as np
import pytest

import pyflatmodule as pfm
from pyflatmodule.executorch import CoreMLGraph

from support.checked import load_full
from support.delegates import graphs
from support.paths import ET

STEMS = ["coreml", "coreml_mlp"]


def _oracle(stem: str) -> Tuple[Dict[str, Any], Dict[str, np.ndarray]]:
    with open(os.path.join(ET, stem + ".oracle.json"), encoding="utf-8") as f:
        doc: Dict[str, Any] = json.load(f)
    with np.load(os.path.join(ET, stem + ".oracle.npz")) as z:
        return doc, {k: z[k] for k in z.files}


def _graphs(p: pfm.Program) -> List[CoreMLGraph]:
    return graphs(p, "CoreMLBackend", CoreMLGraph)


CASES = [(stem, k) for stem in STEMS for k in range(len(_oracle(stem)[0]["coreml"]["delegates"]))]


@pytest.mark.parametrize("stem,k", CASES)
def test_the_files_are_what_executorchs_inmemoryfs_unflattens(stem: str, k: int) -> None:
    want = _oracle(stem)[0]["coreml"]["delegates"][k]
    with load_full(os.path.join(ET, stem + ".pte")) as p:
        g = _graphs(p)[k]
        assert {path: hashlib.sha256(v).hexdigest() for path, v in g.files.items()} \
            == want["files"]
        assert all(v.readonly for v in g.files.values())


@pytest.mark.parametrize("stem,k", CASES)
def test_the_spec_reads_as_coremltools_reads_it(stem: str, k: int) -> None:
    want = _oracle(stem)[0]["coreml"]["delegates"][k]
    with load_full(os.path.join(ET, stem + ".pte")) as p:
        g = _graphs(p)[k]
        assert g.spec_version == want["specification_version"]
        assert g.version == str(want["specification_version"])
        for got, features in ((g.inputs, want["inputs"]), (g.outputs, want["outputs"])):
            assert [(f.name, f.datatype, list(f.shape)) for f in got] == \
                [(f["name"], f["dataType"], f["shape"]) for f in features]
            assert all(f.kind == "multi_array" for f in got)
        assert [n.kind for n in g.nodes] == [o["type"] for o in want["operations"]]
        values = g.values
        assert [[values[i].name for i in n.outputs] for n in g.nodes] == \
            [o["outputs"] for o in want["operations"]]
        assert [values[i].name for i in g.input_ids] == want["function_inputs"]
        assert [values[i].name for i in g.output_ids] == want["block_outputs"]
        assert g.metadata["inputNames"] == [f["name"] for f in want["inputs"]]


@pytest.mark.parametrize("stem,k", CASES)
def test_the_constants_are_coremltools_values_zero_copy(stem: str, k: int) -> None:
    doc, arrays = _oracle(stem)
    want = doc["coreml"]["delegates"][k]["constants"]
    with load_full(os.path.join(ET, stem + ".pte")) as p:
        g = _graphs(p)[k]
        by_name = {g.values[vid].name: a for vid, a in g.constants().items()}
        assert sorted(by_name) == sorted(want) and want
        for name, w in want.items():
            got = by_name[name]
            assert str(got.dtype) == w["dtype"]
            assert got.tobytes() == arrays[w["array"]].tobytes(), name
            assert not got.flags.writeable and not got.flags.owndata
        assert all(g.values[vid].constant for vid in g.constants())


@pytest.mark.parametrize("stem", STEMS)
def test_the_weights_are_the_modules_in_float16(stem: str) -> None:
    """The converter stores the exported module's float32 weights as float16 (its
    default precision): each is torch's weight rounded to float16, bit for bit."""
    doc, arrays = _oracle(stem)
    with load_full(os.path.join(ET, stem + ".pte")) as p:
        got = {k: a for k, a in p.state_dict().items() if ".delegates[" in k}
        names = {}
        for g in _graphs(p):
            for vid, a in g.constants().items():
                names[g.values[vid].name] = a
    assert len(got) == len(names)
    for fqn, w in doc["weights"].items():
        module = np.frombuffer(arrays[w["data"]].tobytes(), w["dtype"]).reshape(w["shape"])
        name = "p_" + fqn.replace(".", "_") + "_to_fp16"
        assert names[name].tobytes() == module.astype(np.float16).tobytes(), fqn


@pytest.mark.parametrize("stem,k", CASES)
def test_extract_writes_the_package(stem: str, k: int, tmp_path: Any) -> None:
    want = _oracle(stem)[0]["coreml"]["delegates"][k]["files"]
    with pfm.load(os.path.join(ET, stem + ".pte")) as p:
        package = _graphs(p)[k].extract(str(tmp_path))
    assert package == os.path.join(str(tmp_path), "model.mlpackage")
    written = {}
    for d, _, names in os.walk(tmp_path):
        for n in names:
            with open(os.path.join(d, n), "rb") as f:
                rel = os.path.relpath(os.path.join(d, n), tmp_path).replace(os.sep, "/")
                written[rel] = hashlib.sha256(f.read()).hexdigest()
    assert written == want


# ------------------------------------------------------------------ bad payloads

PATH = os.path.join(ET, "coreml.pte")
with open(PATH, "rb") as _f:
    RAW = _f.read()


def _payload() -> Tuple[int, int]:
    """(file offset, size) of the program's only Core ML payload: the bytes ExecuTorch's
    reader cut out of the file (the oracle's size), found in the file."""
    size = _oracle("coreml")[0]["coreml"]["delegates"][0]["payload_size"]
    with pfm.load(PATH) as p:
        data = bytes([d for m in p.methods.values() for d in m.delegates][0].data)
    assert len(data) == size
    return RAW.index(data), size


def _table() -> Tuple[int, str]:
    """Where the file table starts in the file, and its JSON (read backwards by hand)."""
    start, size = _payload()
    end = start + size
    at = RAW.rindex(b"}", start, end)   # the JSON's last brace, which comes first reversed
    while True:
        try:
            text = RAW[at:end][::-1].decode("utf-8")
            json.loads(text)
            return at, text
        except ValueError:
            at = RAW.rindex(b"}", start, at)


def _with_table(old: str, new: str) -> bytes:
    """The program with its file table's text ``old`` made ``new`` (as long)."""
    assert len(old) == len(new)
    at, text = _table()
    assert text.count(old) >= 1, old
    changed = text.replace(old, new, 1)[::-1].encode("utf-8")
    return RAW[:at] + changed + RAW[at + len(changed):]


def _file(name: str) -> Tuple[int, int]:
    """(file offset, size) of the payload's file ``name`` (the last path component)."""
    _, text = _table()
    start, _ = _payload()
    node = [n for n in json.loads(text)["nodes"] if n["name"] == name][0]
    return start + node["dataRegion"]["offset"], node["dataRegion"]["size"]


def _refused(data: bytes, code: str, where: str) -> pfm.FormatError:
    with pytest.raises(pfm.FormatError) as e:
        with load_full(data) as p:
            _graphs(p)
    assert e.value.code == code, e.value
    assert where in e.value.path, e.value
    return e.value


def test_the_file_table_of_the_sample_is_found_by_hand() -> None:
    _, text = _table()
    assert json.loads(text)["nodes"][-1]["name"] == "lowered_module"


@pytest.mark.parametrize("old,new,where", [
    ('"kind":0', '"kind":7', "nodes[0]"),                   # neither a file nor a directory
    ('"name":"weight.bin"', '"name":"../ght.bin"', "nodes["),   # a name that climbs out
    ('"name":"weight.bin"', '"name":"we/ght.bin"', "nodes["),   # a name with a separator
    ('"weight.bin":2', '"weight.bin":9', "children"),       # a child after its parent
])
def test_a_damaged_file_table_is_refused_at_its_node(old: str, new: str, where: str) -> None:
    e = _refused(_with_table(old, new), "bad_filesystem", where)
    assert "processed<inmemoryfs>" in e.path


def test_a_file_past_the_payloads_files_is_refused() -> None:
    """The last file's size made all nines (as many digits): it then runs into the file
    table, past the files' bytes."""
    _, text = _table()
    files = [n for n in json.loads(text)["nodes"] if n["kind"] == 0]
    last = max(files, key=lambda n: n["dataRegion"]["offset"])["dataRegion"]
    old = f'"dataRegion":{{"offset":{last["offset"]},"size":{last["size"]}}}'
    new = old.replace(f'"size":{last["size"]}', '"size":' + "9" * len(str(last["size"])))
    assert int("9" * len(str(last["size"]))) + last["offset"] > _payload()[1] - len(text)
    _refused(_with_table(old, new), "bad_filesystem", "nodes[")


def test_a_payload_without_its_file_table_is_refused() -> None:
    at, _ = _table()
    start, size = _payload()
    data = bytearray(RAW)
    data[start + size - 1] = ord(" ")    # the table's opening brace, read first
    _refused(bytes(data), "bad_filesystem", "processed<inmemoryfs>")


def test_a_damaged_weight_blob_is_refused_in_its_file() -> None:
    at, _ = _file("weight.bin")
    data = bytearray(RAW)
    data[at + 64] ^= 0xFF        # the first blob's sentinel (0xDEADBEEF)
    _refused(bytes(data), "bad_blob", "weights/weight.bin")


def test_a_damaged_spec_is_refused_in_its_file() -> None:
    at, _ = _file("model.mlmodel")
    data = bytearray(RAW)
    data[at] = 0x0F              # the first field's key: wire type 7, which protobuf lacks
    _refused(bytes(data), "bad_spec", "model.mlmodel")


def test_a_spec_naming_an_undefined_value_is_refused() -> None:
    """The first cast's argument names the function's input (coremltools' name, the
    oracle's); renamed in place, it names a value nothing defines. Its bytes: an
    Argument (field 1: a Binding, whose field 1 is the name), found by hand."""
    name = _oracle("coreml")[0]["coreml"]["delegates"][0]["function_inputs"][0].encode()
    binding = b"\x0a" + bytes([len(name) + 2]) + b"\x0a" + bytes([len(name)]) + name
    at, n = _file("model.mlmodel")
    spec = RAW[at:at + n]
    k = spec.find(binding, spec.find(b"cast"))
    assert k > 0
    data = bytearray(RAW)
    data[at + k + len(binding) - 1] ^= 0x20        # "x" -> "X"
    e = _refused(bytes(data), "bad_spec", "model.mlmodel")
    assert "nothing before it defines" in str(e)
