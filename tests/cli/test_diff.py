"""pyflatmodule.diff: structure and tensors of two files of one format.

Expected differences come from the writers' own answers: ExecuTorch's exports of one model
before and after one weight changed (tests/data/make_et_data.py: mlp, mlp_changed; the
oracles hold each exported module's weights), and torch-written PTMF files edited in one
float whose position is found from torch's own values of that tensor.
"""
from __future__ import annotations

import json
import os
from typing import Any, Dict

import numpy as np
import pytest

from pyflatmodule.diff import compare_arrays, diff

from support import run_cli
from support.paths import DATA, ET

EVERY_FILE = sorted([os.path.join(DATA, f) for f in os.listdir(DATA) if f.endswith(".ff")]
                    + [os.path.join(ET, f) for f in os.listdir(ET) if f.endswith((".pte", ".ptd"))])


def _weights(stem: str) -> Dict[str, np.ndarray]:
    with open(os.path.join(ET, stem + ".oracle.json"), encoding="utf-8") as f:
        doc = json.load(f)
    z = np.load(os.path.join(ET, stem + ".oracle.npz"))
    return {k: np.frombuffer(z[w["data"]].tobytes(), w["dtype"]).reshape(w["shape"])
            for k, w in doc["weights"].items()}


@pytest.mark.parametrize("path", EVERY_FILE, ids=os.path.basename)
def test_a_file_equals_itself(path: str) -> None:
    d = diff(path, path)
    assert d.equal and d.structure == [] and d.changed_tensors() == []
    assert all(t.status == "equal" for t in d.tensors)


def test_two_exports_with_one_weight_changed() -> None:
    before, after = _weights("mlp"), _weights("mlp_changed")
    changed = [k for k in before if not np.array_equal(before[k], after[k])]
    assert changed == ["l2.bias"]   # what the generator did, seen in torch's own weights
    d = diff(os.path.join(ET, "mlp.pte"), os.path.join(ET, "mlp_changed.pte"))
    assert d.format == "ExecuTorch program" and not d.equal
    assert d.structure == []
    (t,) = d.changed_tensors()
    assert t.status == "changed" and t.name_a == t.name_b
    assert t.shape == before["l2.bias"].shape and t.dtype == "float32"
    delta = np.abs(before["l2.bias"].astype(np.float64) - after["l2.bias"].astype(np.float64))
    assert t.differing == int(np.count_nonzero(delta))
    assert t.max_abs == float(delta.max())
    # every other constant is reported equal, each exactly once
    assert sum(x.status == "equal" for x in d.tensors) == len(before) - 1


def test_two_xnnpack_exports_with_one_weight_changed() -> None:
    """The delegate's constants are matched by their names (value ids), not by the
    SHA-256 keys of the named data, which change with the bytes."""
    before, after = _weights("xnnpack"), _weights("xnnpack_changed")
    changed = [k for k in before if not np.array_equal(before[k], after[k])]
    assert changed == ["l2.bias"]
    d = diff(os.path.join(ET, "xnnpack.pte"), os.path.join(ET, "xnnpack_changed.pte"))
    (t,) = d.changed_tensors()
    assert t.name_a == t.name_b and ".delegates[0].values[" in str(t.name_a)
    delta = np.abs(before["l2.bias"].astype(np.float64) - after["l2.bias"].astype(np.float64))
    assert (t.shape, t.differing, t.max_abs) == (before["l2.bias"].shape,
                                                 int(np.count_nonzero(delta)), float(delta.max()))
    # the payload names the new key (structure says the payload changed); the named data
    # keyed by the bytes' own hashes is not listed key by key: the tensor says it
    assert any(c.what == "methods.forward.delegates[0]" for c in d.structure)
    assert not any(c.what.startswith("named_data[") for c in d.structure)


def _graph_roles(stem: str) -> Dict[Any, int]:
    """From ExecuTorch's decoding of each XNNPACK graph: (delegate, node kind, its n-th
    node of that kind, field) -> the constant's value id, for filters and biases."""
    with open(os.path.join(ET, stem + ".oracle.json"), encoding="utf-8") as f:
        doc = json.load(f)
    out: Dict[Any, int] = {}
    for i, d in enumerate(doc["xnnpack"]["delegates"]):
        seen: Dict[str, int] = {}
        for node in d["graph"]["xnodes"]:
            kind = node["xnode_union_type"]
            n = seen[kind] = seen.get(kind, -1) + 1
            for field in ("filter_id", "bias_id"):
                if node["xnode_union"].get(field) is not None:
                    out[(i, kind, n, field)] = node["xnode_union"][field]
    return out


def test_an_int8_and_a_float_export_pair_each_weight_by_its_role() -> None:
    """The same module lowered to XNNPACK in float and in int8: each filter pairs with the
    filter of the same node, each bias with the bias (by ExecuTorch's decoding of both
    graphs), though their value ids differ; value ids alone paired a filter with a bias."""
    a, b = _graph_roles("xnn_q8_per_channel"), _graph_roles("xnn_conv")
    assert set(a) == set(b) and any(a[k] != b[k] for k in a)
    want = {(f"forward.delegates[{k[0]}].values[{a[k]}]",
             f"forward.delegates[{k[0]}].values[{b[k]}]") for k in a}
    d = diff(os.path.join(ET, "xnn_q8_per_channel.pte"), os.path.join(ET, "xnn_conv.pte"))
    got = {(t.name_a, t.name_b) for t in d.tensors}
    assert want <= got
    assert not [t for t in d.tensors if t.status in ("only_a", "only_b")]
    for t in d.tensors:   # int8 against float: the shapes agree, the dtypes do not
        assert t.status == "changed" and t.note.split(" -> ")[0].endswith(
            str(list(t.shape))), t


def test_a_change_of_a_methods_input_dtypes_is_reported() -> None:
    """xnn_fp16 takes float16 where xnn_conv takes float32 (ExecuTorch's runtime says so:
    ScalarType 5 and 6): diff reports the inputs' and outputs' dtypes and shapes."""
    names = {5: "float16", 6: "float32"}
    metas = []
    for stem in ("xnn_conv", "xnn_fp16"):
        with open(os.path.join(ET, stem + ".oracle.json"), encoding="utf-8") as f:
            m = json.load(f)["runtime"]["methods"]["forward"]
        metas.append([[f"{names[t['dtype']]}{t['sizes']}" for t in m[part]]
                      for part in ("inputs", "outputs")])
    assert metas[0] != metas[1]
    d = diff(os.path.join(ET, "xnn_conv.pte"), os.path.join(ET, "xnn_fp16.pte"))
    what = {c.what: (c.a, c.b) for c in d.structure}
    for k, part in enumerate(("inputs", "outputs")):
        if metas[0][k] != metas[1][k]:
            assert what[f"methods.forward.{part}.dtypes_shapes"] == (metas[0][k], metas[1][k])


def test_each_side_takes_its_own_data_files(tmp_path: Any) -> None:
    pte, ptd = os.path.join(ET, "external.pte"), os.path.join(ET, "external.ptd")
    r = run_cli("diff", pte, pte, "--data-a", ptd, "--data-b", ptd)
    assert r.returncode == 0, r.stderr
    r = run_cli("diff", "--json", pte, pte, "--data-a", ptd)   # B has none: only A has them
    with open(os.path.join(ET, "external.oracle.json"), encoding="utf-8") as f:
        keys = [n["key"] for n in json.load(f)["data_file"]["named_data"]]
    assert r.returncode == 1
    assert sorted(t["a"] for t in json.loads(r.stdout)["tensor_diffs"]
                  if t["status"] == "only_a") == sorted(keys)
    other = os.path.join(DATA, "shared", "foundation.ptd")
    r = run_cli("diff", pte, pte, "--data-a", ptd, "--data-b", other)
    assert r.returncode == 2 and "missing_data" in r.stderr


def test_ptmf_files_with_one_float_changed() -> None:
    path = os.path.join(DATA, "mlp_jit.ff")
    with open(os.path.join(DATA, "mlp_jit.oracle.json"), encoding="utf-8") as f:
        spec = json.load(f)["state_dict"]["tensors"]["2.weight"]
    z = np.load(os.path.join(DATA, "mlp_jit.oracle.npz"))
    torch_bytes = z[spec["data"]].tobytes()   # torch's values of 2.weight, as stored
    raw = bytearray(open(path, "rb").read())
    at = raw.index(torch_bytes)
    k = 5
    old = float(np.frombuffer(raw, "<f4", 1, at + 4 * k)[0])
    raw[at + 4 * k:at + 4 * k + 4] = np.float32(old + 0.25).tobytes()
    d = diff(path, bytes(raw))
    assert d.format == "PTMF model" and d.structure == []
    (t,) = d.changed_tensors()
    assert (t.name_a, t.name_b, t.differing) == ("2.weight", "2.weight", 1)
    assert t.max_abs == pytest.approx(abs(float(np.float32(old + 0.25)) - old))


def test_structure_changes_are_named() -> None:
    d = diff(os.path.join(ET, "mlp.pte"), os.path.join(ET, "two_methods.pte"))
    what = {c.what: (c.a, c.b) for c in d.structure}
    assert what["methods"] == (["forward"], ["first_layer", "forward"])
    assert what["methods.first_layer.values"][0] is None
    assert {t.status for t in d.tensors} >= {"only_b"}


def test_tensors_left_over_pair_by_position_and_shape() -> None:
    # two_methods' forward constants have other value indices than mlp's: matched by
    # name where the names agree, else by position and shape
    d = diff(os.path.join(ET, "mlp.pte"), os.path.join(ET, "two_methods.pte"))
    paired = [t for t in d.tensors if t.name_a and t.name_b]
    assert paired and all(t.status == "equal" for t in paired)


def test_different_formats_are_refused() -> None:
    with pytest.raises(ValueError, match="PTMF model.*one format|one format"):
        diff(os.path.join(DATA, "mlp_jit.ff"), os.path.join(ET, "mlp.pte"))
    with pytest.raises(ValueError, match="data file"):
        diff(os.path.join(ET, "external.ptd"), os.path.join(ET, "mlp.pte"))


def test_compare_arrays_counts_nan_as_equal_and_chunks_big_arrays(monkeypatch: Any) -> None:
    import pyflatmodule.diff as mod
    monkeypatch.setattr(mod, "CHUNK", 7)   # force many chunks, rows split too
    a = np.arange(60, dtype=np.float32).reshape(3, 20)
    b = a.copy()
    a[0, 0] = b[0, 0] = np.nan
    b[2, 19] += 3
    b[1, 3] = np.nan
    n, max_abs, max_rel = compare_arrays(a, b)
    assert n == 2 and max_abs == np.inf and max_rel == np.inf
    b[1, 3] = a[1, 3]
    n, max_abs, max_rel = compare_arrays(a, b)
    assert (n, max_abs) == (1, 3.0) and max_rel == pytest.approx(3 / 62)
    assert compare_arrays(np.array([True, False]), np.array([True, True]))[0] == 1


def test_the_command_exits_as_diff_does(tmp_path: Any) -> None:
    a, b = os.path.join(ET, "mlp.pte"), os.path.join(ET, "mlp_changed.pte")
    same = run_cli("diff", a, a)
    assert same.returncode == 0 and "equal" in same.stdout.splitlines()[0]
    changed = run_cli("diff", a, b)
    assert changed.returncode == 1
    (line,) = [x for x in changed.stdout.splitlines() if "changed " in x]
    assert "1 of 3 elements differ" in line and "max abs 0.5" in line
    doc = json.loads(run_cli("diff", a, b, "--json").stdout)
    assert doc["equal"] is False and doc["tensors"]["changed"] == 1
    assert [t["status"] for t in doc["tensor_diffs"]].count("equal") == 3
    mixed = run_cli("diff", a, os.path.join(DATA, "mlp_jit.ff"))
    assert mixed.returncode == 2 and "one format" in mixed.stderr
    missing = run_cli("diff", a, str(tmp_path / "nope.pte"))
    assert missing.returncode == 2 and "nope.pte" in missing.stderr
    bad = tmp_path / "bad.pte"
    bad.write_bytes(open(a, "rb").read()[:100])
    broken = run_cli("diff", str(bad), a)
    assert broken.returncode == 2
    assert "bad.pte" in broken.stderr and "invalid model" in broken.stderr
