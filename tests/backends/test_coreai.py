"""Apple Core AI delegate payloads (``Delegate.graph`` of a ``CoreAIBackend`` delegate, a
``CoreAIManifest``) against what ExecuTorch wrote.

tests/data/et/coreai_*.pte are an MLP lowered whole by ExecuTorch 1.5.1's
``CoreAIPartitioner`` with coreai-torch 0.4.2 (tests/data/make_et_coreai.py): its asset
inline (``coreai_mlp``: the files in the program's named data) and as a sidecar
(``coreai_sidecar``: the files written beside the program, none in it). Their oracles
hold what ExecuTorch's ``deserialize_pte_binary`` reads back: each payload as
``json.loads`` reads it, the named data's keys and sizes and ``metadata.json`` as
``json.loads`` reads it. Damaged payloads are the file's own with the manifest's text
changed in place (same length, padded with JSON's spaces), and must be refused at the
payload, at the field at fault.
"""
from __future__ import annotations

import calendar
import hashlib
import json
import os
import time
from typing import Any, Dict, List, Tuple

import pytest

import pyflatmodule as pfm
from pyflatmodule.executorch import CoreAIManifest

from support import backends_zoo
from support.checked import load_full
from support.cli import run_cli
from support.delegates import graphs, refused
from support.paths import ET

#: The Core AI programs, in a folder of their own: their oracles hold ExecuTorch's reading
#: of their delegates and named data (make_et_coreai.py), not the readings of a whole
#: program the suites that take every file of et/ compare with
CORE_AI = os.path.join(ET, "coreai")

STEMS = ["coreai_mlp", "coreai_sidecar"]
#: The real architectures, when written (tests/support/backends_zoo.py).
ZOO = backends_zoo.stems("coreai")
WHERE = ".processed<CoreAI manifest>"


def _folder(stem: str) -> str:
    """Where program ``stem`` is (a zoo program not written: the test skipped)."""
    return CORE_AI if stem in STEMS else backends_zoo.folder(stem)


def _oracle(stem: str) -> Dict[str, Any]:
    with open(os.path.join(_folder(stem), stem + ".oracle.json"), encoding="utf-8") as f:
        return json.load(f)["coreai"]  # type: ignore[no-any-return]


def _path(stem: str) -> str:
    return os.path.join(_folder(stem), stem + ".pte")


def _manifests(p: pfm.Program) -> List[Tuple[bytes, CoreAIManifest]]:
    ds = [d for m in p.methods.values() for d in m.delegates]
    return list(zip((bytes(d.data) for d in ds), graphs(p, "CoreAIBackend", CoreAIManifest)))


@pytest.mark.parametrize("stem", STEMS + ZOO)
def test_each_manifest_is_what_executorch_wrote(stem: str) -> None:
    want = _oracle(stem)
    with load_full(_path(stem)) as p:
        found = _manifests(p)
        assert len(found) == len(want["delegates"]) >= 1
        assert len(found) == 1 or stem in ZOO
        for (data, g), w in zip(found, want["delegates"]):
            assert hashlib.sha256(data).hexdigest() == w["payload_sha256"]
            m = w["manifest"]
            assert g.manifest == m
            assert (g.packaging, g.hash, g.path, g.min_deployment_version) == \
                (m["packaging"], m["hash"], m["path"], m["min_deployment_version"])
            assert (g.platform, g.archs) == (None, {})
            names = m.get("files", [])
            assert [f.name for f in g.files] == names
            assert {f.key: f.size for f in g.files} == {
                k: n for k, n in want["named_data"].items()
                if k.startswith(f"coreai/{m['hash']}/")}
            assert g.missing == {}
            metadata = want["metadata"].get(f"coreai/{m['path']}/metadata.json", {})
            assert g.metadata == metadata
            assert g.version == metadata.get("assetVersion", "")
            assert (g.nodes, g.values, g.constants()) == ([], [], {})


def test_the_inline_files_are_the_named_data() -> None:
    want = _oracle("coreai_mlp")
    with load_full(_path("coreai_mlp")) as p:
        ((_, g),) = _manifests(p)
        assert sorted(p.named_data) == sorted(want["named_data"])
        mlirb = g.file_bytes([f.name for f in g.files].index("model.aimodel/main.mlirb"))
        assert mlirb is not None and mlirb.readonly and bytes(mlirb[0:4]) == b"ML\xefR"
        digest = g.file_bytes([f.name for f in g.files].index("model.aimodel/main.hash"))
        assert digest is not None and bytes(digest).hex() == g.hash


@pytest.mark.parametrize("stem", ZOO)
def test_each_asset_is_what_core_ai_reads(stem: str) -> None:
    """A real architecture's assets: each file's bytes the named data ExecuTorch cut out
    for its key; the program's digest (``main.hash``, and the manifest's hash) the SHA-256
    of its MLIR bytecode, as coreai-core's ``save_asset`` writes it; an asset that
    coreai-core's ``AIModelAsset`` reads as valid, made when its metadata says."""
    want = _oracle(stem)
    with load_full(_path(stem)) as p:
        for (_, g), w in zip(_manifests(p), want["delegates"]):
            assert w["asset"]["valid"] and w["asset"]["functions"] == ["main"]
            files = {f.name: g.file_bytes(i) for i, f in enumerate(g.files)}
            for i, f in enumerate(g.files):
                got = g.file_bytes(i)
                assert got is not None and len(got) == f.size
                assert hashlib.sha256(got).hexdigest() == want["named_data_sha256"][f.key]
            mlirb, digest = files["model.aimodel/main.mlirb"], files["model.aimodel/main.hash"]
            assert mlirb is not None and digest is not None
            assert hashlib.sha256(mlirb).hexdigest() == bytes(digest).hex() == g.hash
            made = time.strptime(g.metadata["creationDate"], "%Y%m%dT%H%M%SZ")
            assert calendar.timegm(made) == w["asset"]["creation_date"]


@pytest.mark.parametrize("command", [("info",), ("verify",), ("tree",), ("tree", "--json"),
                                     ("dis",), ("ops", "--delegates"), ("size",)])
@pytest.mark.parametrize("stem", STEMS)
def test_the_command_line_reads_it(stem: str, command: Tuple[str, ...]) -> None:
    run = run_cli(*command, _path(stem))
    assert run.returncode == 0, run.stderr
    (w,) = _oracle(stem)["delegates"]
    if command[0] == "ops":   # the MLP lowered whole: no kernel, no node kind read
        assert run.stdout == ""
        assert run.stderr.endswith("calls no kernel operator; its delegates (CoreAIBackend) "
                                   "run it all, their node kinds not read\n"), run.stderr
    if command == ("tree",):   # the graph's line is its description
        m = w["manifest"]
        if stem == "coreai_mlp":
            sizes = _oracle(stem)["named_data"]
            line = ", ".join(f"{n} {sizes['coreai/' + m['hash'] + '/' + n]:,} B"
                             for n in m["files"])
            producer = list(_oracle(stem)["metadata"].values())[0]["producer"]
            assert f"Core AI graph: inline: {line}; producer {producer}" in run.stdout, \
                run.stdout
        else:
            assert f"Core AI graph: sidecar: beside the program at {m['path']}" \
                in run.stdout, run.stdout
    if command == ("tree", "--json"):
        kinds = [n for n in _walk(json.loads(run.stdout)) if n.get("kind") == "coreai_graph"]
        assert len(kinds) == 1 and kinds[0]["description"], kinds


def _walk(node: Any) -> List[Dict[str, Any]]:
    """Every JSON object in ``node``."""
    if isinstance(node, dict):
        return [node] + [o for v in node.values() for o in _walk(v)]
    if isinstance(node, list):
        return [o for v in node for o in _walk(v)]
    return []


# ---------------------------------------------------------------- damaged payloads

RAW = open(_path("coreai_mlp"), "rb").read()
MANIFEST = _oracle("coreai_mlp")["delegates"][0]["manifest"]
HASH = MANIFEST["hash"]


def _payload() -> Tuple[int, bytes]:
    """(file offset, bytes) of coreai_mlp's payload, found in the file."""
    with pfm.load(_path("coreai_mlp")) as p:
        data = bytes(p.methods["forward"].delegates[0].data)
    return RAW.index(data), data


def _with(text: bytes) -> bytes:
    """The file with its payload replaced by ``text``, padded with spaces to its size."""
    at, data = _payload()
    assert len(text) <= len(data)
    return RAW[:at] + text.ljust(len(data)) + RAW[at + len(data):]


def _changed(old: bytes, new: bytes) -> bytes:
    """The file with the payload's one ``old`` replaced by ``new`` (same length)."""
    _, data = _payload()
    assert len(old) == len(new) and data.count(old) == 1
    return _with(data.replace(old, new))


@pytest.mark.parametrize("text,field", [
    (None, ""),                     # the JSON cut short: its closing brace dropped
    (b"[1, 2]", ""),                # not an object
    (b"\xff{}", ""),                # not UTF-8
    (b"{}", ".packaging"),          # an object without the manifest's fields
])
def test_a_payload_that_is_no_manifest(text: Any, field: str) -> None:
    at, data = _payload()
    raw = _with(data[:data.rindex(b"}")] if text is None else text)
    refused(raw, "bad_manifest", at, WHERE + field)


@pytest.mark.parametrize("old,new,field", [
    (b'"inline"', b'"inlime"', ".packaging"),
    (b'"hash": "' + HASH[:8].encode(), b'"hash": "' + b"g" * 8, ".hash"),
    (b'"path": "' + HASH[:8].encode(), b'"path": "' + b"0" * 8, ".path"),
    (b"model.aimodel/main.hash", b"model.aimodel/../m.hash", ".files"),
    (b'"model.aimodel/main.hash"', b'"/model.aimodel/main.has"', ".files"),
])
def test_a_field_at_fault(old: bytes, new: bytes, field: str) -> None:
    at, _ = _payload()
    refused(_changed(old, new), "bad_manifest", at, WHERE + field)


def test_a_file_in_no_named_data_is_missing() -> None:
    raw = _changed(b"model.aimodel/main.hash", b"model.aimodel/mein.hash")
    key = f"coreai/{HASH}/model.aimodel/mein.hash"
    with load_full(raw) as p:
        ((_, g),) = _manifests(p)
        assert g.missing == {0: key}
        assert g.files[0].size is None and g.file_bytes(0) is None
        assert f"model.aimodel/mein.hash missing (named data {key})" in g.description
        assert [f.size for f in g.files[1:]] == \
            [_oracle("coreai_mlp")["named_data"][f.key] for f in g.files[1:]]


def test_a_file_in_no_named_data_is_refused_when_data_is_given(tmp_path: Any) -> None:
    at, _ = _payload()
    path = tmp_path / "refused.pte"
    path.write_bytes(_changed(b"model.aimodel/main.hash", b"model.aimodel/mein.hash"))
    with pytest.raises(pfm.FormatError) as e:
        with load_full(str(path), data=[os.path.join(ET, "external.ptd")]) as p:
            [d.graph for m in p.methods.values() for d in m.delegates]
    assert (e.value.code, e.value.offset) == ("missing_data", at), e.value
    assert e.value.path.endswith(WHERE + ".files[0]"), e.value


def test_a_compiled_manifest_names_its_bundles_by_architecture() -> None:
    """The fields ExecuTorch's writer gives compiled bundles (``aot_compiled_inline``:
    ``platform``, ``archs``; no ``path``), written here in the payload's place, for no
    such program can be made off a Mac."""
    bundle = f"{HASH}/model.arm64.aimodelc"
    text = json.dumps({"files": ["model.aimodel/main.hash"], "hash": HASH,
                       "packaging": "aot_compiled_inline", "platform": "macOS",
                       "min_deployment_version": "27.0", "archs": {"arm64": bundle}})
    with load_full(_with(text.encode())) as p:
        ((_, g),) = _manifests(p)
        assert (g.packaging, g.path, g.platform, g.min_deployment_version, g.archs) == \
            ("aot_compiled_inline", None, "macOS", "27.0", {"arm64": bundle})
        key = f"coreai/{HASH}/model.aimodel/main.hash"
        assert [(f.name, f.key, f.size) for f in g.files] == \
            [("model.aimodel/main.hash", key, _oracle("coreai_mlp")["named_data"][key])]
        assert g.metadata == {} and g.version == ""
    outside = text.replace(bundle, "0" * 64 + "/model.arm64.aimodelc")
    refused(_with(outside.encode()), "bad_manifest", _payload()[0], WHERE + ".archs")
