"""The module's names for a program's tensors, found by content: ``export --names REF``.

The references are the module's own: an ETRecord ExecuTorch 1.5.1 wrote beside the
program (tests/data/etrecord/, its oracle holding torch's SHA-256 of each state dict
tensor), or an .npz of the module's weights as the oracles of tests/data/et/ hold them
(torch's values). The exported tensors under the module's names must be the module's
tensors byte for byte; constants the writer computed (a batch norm folded into a conv)
must get no name.
"""
from __future__ import annotations

import hashlib
import json
import os
from typing import Any, Dict

import numpy as np
import pytest

from support.cli import run_cli
from support.exported import read_safetensors
from support.paths import DATA, ET


def _export(pte: str, reference: str, out: str) -> Dict[str, Any]:
    r = run_cli("export", pte, out, "--names", reference)
    assert r.returncode == 0, r.stderr
    return read_safetensors(out)


def test_an_etrecord_names_every_xnnpack_weight(tmp_path: Any) -> None:
    """ExecuTorch 1.5.1 writes no names for XNNPACK's weights (an empty delegate map);
    the ETRecord's state dict (read without torch) names each by its bytes."""
    with open(os.path.join(DATA, "etrecord", "xnnpack.oracle.json"), encoding="utf-8") as f:
        want = json.load(f)["torch_save"]["exported_program_state_dict"]
    got = _export(os.path.join(DATA, "etrecord", "xnnpack.pte"),
                  os.path.join(DATA, "etrecord", "xnnpack.etrecord"),
                  str(tmp_path / "w.safetensors"))
    assert set(got) == set(want)
    for name, (array, _) in got.items():
        assert list(array.shape) == want[name]["shape"]
        assert hashlib.sha256(np.ascontiguousarray(array).tobytes()).hexdigest() == \
            want[name]["sha256"], name


def _weights(stem: str, what: str = "weights") -> Dict[str, np.ndarray]:
    with open(os.path.join(ET, stem + ".oracle.json"), encoding="utf-8") as f:
        doc = json.load(f)
    with np.load(os.path.join(ET, stem + ".oracle.npz")) as z:
        return {k: np.frombuffer(z[w["data"]].tobytes(), w["dtype"]).reshape(w["shape"])
                for k, w in doc[what].items()}


def test_an_npz_of_the_modules_weights_names_conv_weights_stored_channels_last(
        tmp_path: Any) -> None:
    weights = _weights("xnn_layouts")
    ref = tmp_path / "ref.npz"
    np.savez(ref, **weights)
    got = _export(os.path.join(ET, "xnn_layouts.pte"), str(ref),
                  str(tmp_path / "w.safetensors"))
    named = {n for n in got if n in weights}
    assert named == set(weights)
    for name in named:
        assert got[name][0].tobytes() == np.ascontiguousarray(weights[name]).tobytes()


def test_a_safetensors_file_of_the_modules_weights_names_them(tmp_path: Any) -> None:
    """The reference written by the safetensors package itself."""
    save_file = pytest.importorskip("safetensors.numpy").save_file
    weights = _weights("xnn_layouts_fp16")
    ref = tmp_path / "ref.safetensors"
    save_file({k: np.ascontiguousarray(v) for k, v in weights.items()}, str(ref))
    got = _export(os.path.join(ET, "xnn_layouts_fp16.pte"), str(ref),
                  str(tmp_path / "w.safetensors"))
    named = {n for n in got if n in weights}
    assert named and all(got[n][0].tobytes() == np.ascontiguousarray(weights[n]).tobytes()
                         for n in named)


def test_a_folded_batch_norm_gets_no_name(tmp_path: Any) -> None:
    """xnn_conv_bn's conv and linear hold torch's fuse_conv_bn_weights of the module's
    (the oracle's ``folded``): not the module's tensors, so no module name, and a note."""
    weights, folded = _weights("xnn_conv_bn"), _weights("xnn_conv_bn", "folded")
    ref = tmp_path / "ref.npz"
    np.savez(ref, **weights)
    out = tmp_path / "w.safetensors"
    got = _export(os.path.join(ET, "xnn_conv_bn.pte"), str(ref), str(out))
    assert not set(got) & set(weights)
    with open(out, "rb") as f:
        n = int.from_bytes(f.read(8), "little")
        meta = json.loads(f.read(n))["__metadata__"]
    delegated = [n for n in got if ".delegates[" in n]
    assert len(delegated) == len(folded)
    for name in delegated:   # the folded ones, each with the note that says so
        assert any(got[name][0].tobytes() == np.ascontiguousarray(w).tobytes()
                   for w in folded.values()), name
        assert "folded" in meta[f"tensor:{name}"], meta[f"tensor:{name}"]
    for name in got:         # the program's scalars too: named by nothing, with why
        assert "name_note" in meta[f"tensor:{name}"], meta[f"tensor:{name}"]
