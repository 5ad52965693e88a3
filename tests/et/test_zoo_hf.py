"""Programs as Hugging Face users make them: optimum-executorch's xnnpack recipe on tiny
random-weight models (Llama, Qwen3, Gemma3, Phi-3 and Mistral, each fp32 and 8da4w with
8-bit embeddings; a Llama 8da4w with its XNNPACK weights in a .ptd; Qwen2, Gemma2, Phi,
SmolLM3, OLMo, Granite, ViT, Whisper, BERT, DistilBERT), and a T5 that optimum-executorch
1.1.0 fails to export (in torch.export of its decoder): expected to fail, with the error
the builder recorded, and checked in full should it export.

Each program opens with its data file, says what ExecuTorch's reader
(``deserialize_pte_binary``, the flat tensor reader for the .ptd) and runtime say of it
(methods, operators, delegates, inputs, outputs, values, named data, input and output
dtypes and sizes), decodes every XNNPACK graph in full, and passes every command
(``info``, ``verify``, ``tree``, ``dis``, ``ops``, ``export``, ``diff``, each also with
``--json``); the 8da4w programs hold every 4-bit weight torchao made, bit for bit, and
export them so that they dequantize from the file alone to torchao's values exactly; the
8-bit embedding weights too (the int8 values and float32 scales of each
``embedding_byte`` call ExecuTorch's reader finds, dequantized as that kernel does).

The files are written by benchmarks/zoo_hf_build.py into a temporary folder, or into
``$PFM_ZOO_HF`` when set (and reused from there while its manifest lists every export).
Opt in with ``--zoo-hf``: it needs optimum-executorch, a separate install of several GB
(torch, transformers, torchao, executorch), so CI leaves it out; run it in an
environment that has it::

    pip install optimum-executorch && pytest tests/et/test_zoo_hf.py --zoo-hf
"""
from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from typing import Any, Dict, List, Tuple

import numpy as np
import pytest

import zoo as ZOO  # the zoo's listing: benchmarks/zoo.py, no torch (benchmarks/ is on the path)
from support.cli import run_cli
from support.hf import assert_embeddings_exported, assert_exported, assert_program
from support.paths import BENCHMARKS
from support.schemas import validate

pytestmark = [pytest.mark.zoo_hf, pytest.mark.torch]

BUILDER = os.path.join(BENCHMARKS, "zoo_hf_build.py")
COMMANDS = ("info", "verify", "tree", "dis", "ops")
#: every export the builder tries: those optimum-executorch is known to fail on are
#: expected to fail (xfail, with the error it recorded) and checked in full if they export
NAMES = ZOO.HF_MODELS + ZOO.HF_FAILING
QUANTIZED = [n for n in NAMES if "8da4w" in n]

Zoo = Tuple[str, Dict[str, Dict[str, Any]]]


def _has_optimum() -> bool:
    try:
        return importlib.util.find_spec("optimum.exporters.executorch") is not None
    except ModuleNotFoundError:
        return False


def _manifest(folder: str) -> Dict[str, Dict[str, Any]]:
    """The manifest's entries by name; none when there is none, or an older builder
    wrote it."""
    try:
        with open(os.path.join(folder, "zoo_hf.json"), encoding="utf-8") as f:
            manifest = json.load(f)
    except FileNotFoundError:
        return {}
    if manifest.get("format") != ZOO.HF_FORMAT:
        return {}
    return {e["name"]: e for e in manifest["files"]}


@pytest.fixture(scope="module")
def zoo(tmp_path_factory: Any) -> Zoo:
    """(folder, manifest entry by export name) of the zoo optimum-executorch wrote."""
    if not _has_optimum():
        pytest.skip("the Hugging Face zoo needs optimum-executorch (pip install "
                    "optimum-executorch: torch, transformers, torchao, executorch)")
    out = os.environ.get("PFM_ZOO_HF") or str(tmp_path_factory.mktemp("zoo_hf"))
    entries = _manifest(out)
    if not set(NAMES) <= set(entries):
        os.makedirs(out, exist_ok=True)
        env = dict(os.environ, HF_HUB_OFFLINE="1", PYTHONPATH=os.pathsep.join(
            p for p in (BENCHMARKS, os.environ.get("PYTHONPATH")) if p))
        subprocess.run([sys.executable, BUILDER, out], check=True, timeout=3600, env=env,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        entries = _manifest(out)
    return out, entries


def _entry(zoo: Zoo, name: str) -> Tuple[str, List[str], Dict[str, Any]]:
    folder, entries = zoo
    entry = entries[name]
    if name in ZOO.HF_FAILING and "error" in entry:
        pytest.xfail(f"optimum-executorch cannot export {name}: {entry['error']}")
    assert "error" not in entry, f"optimum-executorch could not export {name}: {entry}"
    return (os.path.join(folder, entry["file"]),
            [os.path.join(folder, d) for d in entry.get("data", [])], entry)


@pytest.mark.parametrize("name", NAMES)
def test_hf_program(zoo: Zoo, name: str) -> None:
    assert_program(*_entry(zoo, name))


@pytest.mark.parametrize("name", NAMES)
def test_hf_commands(zoo: Zoo, name: str, tmp_path: Any) -> None:
    path, data, _ = _entry(zoo, name)
    flags = [x for d in data for x in ("--data", d)]
    for command in COMMANDS:
        for form in ([], ["--json"]):
            r = run_cli(command, *form, path, *flags)
            assert r.returncode == 0, (command, form, r.stderr)
            if form:
                validate(json.loads(r.stdout), command)
    for out in ("w.npz", "w.safetensors"):
        for form in ([], ["--json"]):
            r = run_cli("export", *form, path, str(tmp_path / out), *flags)
            assert r.returncode == 0, (out, form, r.stderr)
            if form:
                doc = json.loads(r.stdout)
                validate(doc, "export")
                assert doc["files"][0]["tensors"] > 0
    for form in ([], ["--json"]):
        r = run_cli("diff", *form, path, path, *flags)
        assert r.returncode == 0, (form, r.stderr)
        if form:
            doc = json.loads(r.stdout)
            validate(doc, "diff")
            assert doc["equal"] is True


def _torchao(zoo: Zoo, name: str) -> Dict[str, np.ndarray]:
    with np.load(os.path.join(zoo[0], name + ".torchao.npz")) as z:
        return {k: z[k] for k in z.files}


@pytest.mark.parametrize("name", QUANTIZED)
def test_hf_grouped_weights_are_torchaos(zoo: Zoo, name: str, tmp_path: Any) -> None:
    path, data, entry = _entry(zoo, name)
    assert entry["torchao"], "torchao made no 4-bit weights"
    assert_exported(path, data, str(tmp_path), _torchao(zoo, name), entry["torchao"])


@pytest.mark.parametrize("name", QUANTIZED)
def test_hf_embedding_weights_are_torchaos(zoo: Zoo, name: str, tmp_path: Any) -> None:
    path, data, entry = _entry(zoo, name)
    assert entry["torchao_embedding"], "torchao made no 8-bit embedding weights"
    assert_embeddings_exported(path, data, str(tmp_path), _torchao(zoo, name),
                               entry["torchao_embedding"], entry["reader"]["embeddings"])
