#!/usr/bin/env python3
"""Write a program whose two methods' native backend delegates read the same weights, in
tests/data/et/native_names/, with torch's names and values of them beside it.

    python tests/data/make_et_native_names.py      # needs executorch 1.5.1, torch 2.13

- ``native_two_methods.pte``: make_et_data.py's MLP (``l1``: 4 -> 8, ReLU, ``l2``: 8 ->
  3, seeded) exported as two methods, ``forward`` (the whole MLP) and ``hidden`` (a
  module holding the same ``l1``: the first layer and its ReLU), both lowered to
  ExecuTorch's native backend (``NativePartitioner(external_constants_tag=None)``: the
  constants in the program's named data). Each delegate keys a constant's bytes by its
  fully qualified name, so both methods' delegates read ``l1.weight`` and ``l1.bias``,
  one named data entry each.
- ``native_two_methods.oracle.json`` (+ ``.oracle.npz``): ``weights``, the MLP's
  ``state_dict()`` as torch gives it (each tensor's dtype, shape and npz key of its
  bytes); ``named_data``, the program's named data keys as ExecuTorch's
  ``deserialize_pte_binary`` reads them; ``constants``, per method, its delegate's
  constants as ExecuTorch's ``deserialize_program`` reads the payload (placeholder
  name, data key, kind).
"""
import json
import os
import sys
from typing import Any, Dict, List

import numpy as np
import torch
from executorch.backends.native import get_default_compile_config, get_default_passes
from executorch.backends.native.partitioner import NativePartitioner
from executorch.backends.native.serialization import deserialize_program
from executorch.exir import to_edge_transform_and_lower
from executorch.exir._serialize._program import deserialize_pte_binary
from torch import nn

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import make_et_data as base  # noqa: E402  (tests/data is no package)

OUT = os.path.join(HERE, "et", "native_names")
NAME = "native_two_methods"


class Hidden(nn.Module):
    """The MLP's first layer and ReLU: its ``l1`` is the MLP's (the same tensors)."""

    def __init__(self, mlp: nn.Module) -> None:
        super().__init__()
        self.l1 = mlp.l1

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.l1(x))


def _constants(pte: Any) -> Dict[str, List[Dict[str, Any]]]:
    """Per method, its native delegates' constants as ExecuTorch reads each payload."""
    out: Dict[str, List[Dict[str, Any]]] = {}
    for plan in pte.program.execution_plan:
        for d in plan.delegates:
            data = bytes(pte.program.backend_delegate_data[d.processed.index].data)
            (method,) = deserialize_program(data).methods
            out.setdefault(plan.name, []).extend(
                {"name": c.name, "data_key": c.data_key, "kind": int(c.kind)}
                for c in method.constants or [])
    return out


def main() -> int:
    mlp, exported = base._models()["mlp"]()
    x = tuple(exported.example_inputs[0])
    programs = {"forward": exported, "hidden": torch.export.export(Hidden(mlp).eval(), x)}
    edge = to_edge_transform_and_lower(
        programs, transform_passes=get_default_passes(),
        partitioner=[NativePartitioner(external_constants_tag=None)],
        compile_config=get_default_compile_config())
    data = bytes(edge.to_executorch().buffer)
    os.makedirs(OUT, exist_ok=True)
    with open(os.path.join(OUT, NAME + ".pte"), "wb") as f:
        f.write(data)
    pte = deserialize_pte_binary(data)
    arrays = {f"weights/{k}": np.frombuffer(v.contiguous().numpy().tobytes(), np.uint8)
              for k, v in mlp.state_dict().items()}
    oracle = {
        "writer": "to_edge_transform_and_lower({'forward': MLP, 'hidden': Hidden(MLP's "
                  "l1)}, transform_passes=get_default_passes(), partitioner=["
                  "NativePartitioner(external_constants_tag=None)], compile_config="
                  "get_default_compile_config()).to_executorch()",
        "weights": {k: {"dtype": str(v.dtype).replace("torch.", ""), "shape": list(v.shape),
                        "data": f"weights/{k}"} for k, v in mlp.state_dict().items()},
        "named_data": sorted(pte.named_data.pte_data),
        "constants": _constants(pte),
    }
    with open(os.path.join(OUT, NAME + ".oracle.json"), "w", encoding="utf-8") as f:
        json.dump(oracle, f, indent=1, sort_keys=True)
        f.write("\n")
    np.savez(os.path.join(OUT, NAME + ".oracle.npz"), **arrays)
    print(NAME, len(data), "bytes;", oracle["named_data"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
