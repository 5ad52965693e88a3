#!/usr/bin/env python3
"""Write the programs lowered to Apple Core AI in tests/data/et/coreai/, with ExecuTorch's
reading of their delegates beside them.

    python tests/data/make_et_coreai.py

It needs ExecuTorch 1.5.1 (the project's environment has it) and Apple's converter,
which the project does not carry: coreai-torch 0.4.2 and coreai-core 1.0.0b2 (0.4.3 no
longer matches ExecuTorch 1.5.1's ``CoreAIBackend``), installed apart with

    pip install --target /tmp/coreai-site coreai-torch==0.4.2 coreai-core==1.0.0b2

and the script run with ``PYTHONPATH=/tmp/coreai-site``. Lowering needs no Mac: the
portable ``.aimodel`` is written on any machine (only ahead-of-time compilation runs
Xcode's ``coreai-build``).

Each program NAME gets ``NAME.pte`` and ``NAME.oracle.json``, whose ``coreai`` holds,
per delegate in program order (read back from the file by ExecuTorch's own
``deserialize_pte_binary``): the payload's SHA-256, the manifest (the payload as
``json.loads`` reads it); the program's named data, each key with its size; and each
``metadata.json`` in it as ``json.loads`` reads it.

- ``coreai_mlp``: two linears and a ReLU, all delegated (one delegate).
- ``coreai_sidecar``: the same lowered with ``uses_sidecar=True``: the asset is written
  to a build directory beside the program (a temporary one, discarded), and the manifest
  names no files, only its path (no named data).
"""
import hashlib
import json
import os
import sys
import tempfile
from typing import Any, Dict, Tuple

import torch
from executorch.backends.apple.coreai.compiler.preprocess import coreai_sidecar_dir
from executorch.backends.apple.coreai.partition.partitioner import CoreAIPartitioner
from executorch.exir import to_edge_transform_and_lower
from executorch.exir._serialize._program import deserialize_pte_binary
from torch import nn

#: A folder of their own: their oracles are the Core AI readings alone, not the whole
#: program's that the suites taking every file of et/ compare with
OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "et", "coreai")


def _mlp() -> Tuple[nn.Module, Tuple[Any, ...]]:
    torch.manual_seed(0)
    mlp = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 8)).eval()
    return mlp, (torch.randn(2, 16),)


def _oracle(data: bytes) -> Dict[str, Any]:
    """What ExecuTorch reads back of the file's Core AI delegates and named data."""
    pte = deserialize_pte_binary(data)
    named = pte.named_data
    blobs = ({} if named is None else
             {k: bytes(named.buffers[e.buffer_index]) for k, e in named.pte_data.items()})
    delegates = []
    for plan in pte.program.execution_plan:
        for d in plan.delegates:
            assert d.id == "CoreAIBackend", d.id
            assert d.processed.location.name == "INLINE"
            raw = pte.program.backend_delegate_data[d.processed.index].data
            delegates.append({"payload_sha256": hashlib.sha256(raw).hexdigest(),
                              "manifest": json.loads(raw.decode("utf-8"))})
    return {"coreai": {"delegates": delegates,
                       "named_data": {k: len(b) for k, b in blobs.items()},
                       "metadata": {k: json.loads(b) for k, b in blobs.items()
                                    if k.endswith("/metadata.json")}}}


def lower(module: nn.Module, args: Tuple[Any, ...], sidecar: bool = False) -> bytes:
    """The program of ``module`` exported with ``args`` and lowered to Core AI (its asset
    inline, or a sidecar written to a temporary directory, discarded)."""
    with tempfile.TemporaryDirectory() as tmp, coreai_sidecar_dir(os.path.join(tmp, "out")):
        program = to_edge_transform_and_lower(
            torch.export.export(module, args),
            partitioner=[CoreAIPartitioner(uses_sidecar=sidecar)]).to_executorch()
    return bytes(program.buffer)


def make(name: str, sidecar: bool) -> None:
    """Lower the MLP whole to Core AI (its asset inline, or a sidecar), write NAME.pte
    and NAME.oracle.json."""
    data = lower(*_mlp(), sidecar=sidecar)
    with open(os.path.join(OUT, name + ".pte"), "wb") as f:
        f.write(data)
    with open(os.path.join(OUT, name + ".oracle.json"), "w", encoding="utf-8") as f:
        json.dump(_oracle(data), f, indent=1, sort_keys=True)
        f.write("\n")


if __name__ == "__main__":
    for stem, uses_sidecar in (("coreai_mlp", False), ("coreai_sidecar", True)):
        if len(sys.argv) < 2 or stem in sys.argv[1:]:
            make(stem, uses_sidecar)
