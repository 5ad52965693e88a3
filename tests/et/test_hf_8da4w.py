"""A program as optimum-executorch exports it with 4-bit weights in groups of 32
(``--qlinear 8da4w --qembedding 8w``): tests/data/hf/hf_8da4w.pte, a one-layer Llama with
random weights, written by tests/data/make_hf_data.py with what ExecuTorch's reader and
runtime said of it and torchao's own view of every 4-bit weight (values, float32 scales,
zero points, and its dequantization over the scales rounded to bfloat16, as the program
stores them) and of the 8-bit embedding weight (``embedding_byte``'s, not delegated).

It reads as ExecuTorch says; each 4-bit weight is one of the program's per-group
constants, bit for bit, and dequantizes to torchao's values exactly; ``export`` stores
them bit-exact with their metadata, from which they dequantize to torchao's values
again; the embedding's int8 values and float32 scales are exported bit for bit and
dequantize to torchao's values too; ``diff`` sees one changed scale. No torch, torchao
or optimum needed.
"""
from __future__ import annotations

import json
import os
from typing import Any, Dict, Tuple

import numpy as np

import pyflatmodule as pfm
from pyflatmodule import QuantizedTensor

from support.cli import reads_in_both
from support.hf import (
    assert_diff_sees_a_scale,
    assert_embeddings_exported,
    assert_exported,
    assert_program,
    match_torchao,
)
from support.paths import HF

PATH = os.path.join(HF, "hf_8da4w.pte")


def _oracle() -> Tuple[Dict[str, Any], Dict[str, np.ndarray]]:
    with open(os.path.join(HF, "hf_8da4w.oracle.json"), encoding="utf-8") as f:
        entry = json.load(f)
    with np.load(os.path.join(HF, "hf_8da4w.torchao.npz")) as z:
        return entry, {k: z[k] for k in z.files}


def test_reads_as_executorch_says() -> None:
    entry, _ = _oracle()
    assert entry["options"] == {"qlinear": "8da4w", "qembedding": "8w", "max_seq_len": 64}
    assert_program(PATH, [], entry)


def test_grouped_weights_are_torchaos() -> None:
    """Every linear layer's weight (8 of them: attention, MLP, lm_head), two groups a row."""
    entry, torchao = _oracle()
    assert len(entry["torchao"]) == 8
    assert all(w["block_size"] == [1, 32] and w["shape"][1] == 64
               for w in entry["torchao"].values())
    with pfm.load(PATH) as p:
        assert isinstance(p, pfm.Program)
        assert len(match_torchao(p, torchao, entry["torchao"])) == 8


def test_export_stores_them_exactly(tmp_path: Any) -> None:
    entry, torchao = _oracle()
    assert_exported(PATH, [], str(tmp_path), torchao, entry["torchao"])


def test_exported_embedding_is_torchaos(tmp_path: Any) -> None:
    """The token embedding (32 rows of 64, one scale a row, no zero points), taken by
    the one ``embedding_byte`` call ExecuTorch's reader found."""
    entry, torchao = _oracle()
    info, calls = entry["torchao_embedding"], entry["reader"]["embeddings"]
    assert list(info) == ["model.embed_tokens"] and info["model.embed_tokens"]["shape"] == [
        32, 64]
    assert [(c["method"], c["zero_points"]) for c in calls] == [("forward", None)]
    assert_embeddings_exported(PATH, [], str(tmp_path), torchao, info, calls)


def test_diff_sees_a_changed_scale(tmp_path: Any) -> None:
    with pfm.load(PATH) as p:
        name, q = next((k, v) for k, v in p.named_tensors().items()
                       if isinstance(v, QuantizedTensor) and v.group_size is not None)
        assert_diff_sees_a_scale(PATH, str(tmp_path), q, name)


def test_every_command_reads_it() -> None:
    for command in ("info", "verify", "tree", "dis", "ops"):
        reads_in_both(command, PATH)
