#!/usr/bin/env python3
"""Programs that share one foundation data file, as LoRA-style deployments ship them:

    python tests/data/make_shared_data.py      # needs executorch 1.5.1, torch 2.13

Four task modules share a seeded ``backbone`` (two linear layers) and each has a head of
its own. ExecuTorch 1.5.1 writes each with the backbone's weights outside the program,
tagged ``foundation`` (``ExecutorchBackendConfig(external_constants=...)`` for portable
kernels; ``delegate_external_constants_pass_unlifted`` for XNNPACK, whose weights go to
the named data store by content hash):

- ``task_a.pte``, ``task_b.pte``: portable, the whole backbone in ``foundation.ptd``
  (written with task_a; task_b's is the same bytes);
- ``task_c.pte``: portable, the first backbone layer only (its second layer is unused);
- ``task_d.pte``: portable, its head tagged into ``head_d.ptd``, which is not kept (the
  program misses those keys);
- ``xnn_a.pte``, ``xnn_b.pte``: lowered to XNNPACK, the backbone in
  ``foundation_xnn.ptd`` (by hash keys).

``shared.oracle.json``: from ExecuTorch's own readers, each program's external tensors
(``_flatbuffer_to_program``: a tensor whose ``extra_tensor_info`` says EXTERNAL) and the
named data keys its XNNPACK graphs read (ExecuTorch's flatc decoding of each payload) that
the program does not hold; each data file's keys with their scalar type, sizes and bytes
(``_deserialize_to_flat_tensor``); and ExecuTorch's runtime loading each program against
each data file and running it (the outputs equal to the eager module's, or the error).
"""
import json
import os
import sys
import tempfile
from typing import Any, Dict, List

import torch
from torch import nn

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "shared")
sys.path.insert(0, HERE)


class Task(nn.Module):
    def __init__(self, head: int, layers: int = 2) -> None:
        super().__init__()
        torch.manual_seed(7)   # one backbone for every task
        self.backbone = nn.Sequential(*[nn.Linear(8 if i == 0 else 16, 16)
                                        for i in range(layers)])
        torch.manual_seed(100 + head)
        self.head = nn.Linear(16, head)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(torch.relu(self.backbone(x)))


def _tag(node: Any) -> Any:
    return "foundation" if "backbone" in node.name else None


def _tag_d(node: Any) -> Any:
    return "foundation" if "backbone" in node.name else "head_d" if "head" in node.name \
        else None


def _portable(name: str, model: nn.Module, tag: Any) -> Dict[str, bytes]:
    from executorch.exir import ExecutorchBackendConfig, to_edge
    inputs = (torch.randn(2, 8),)
    ep = torch.export.export(model, inputs)
    et = to_edge(ep).to_executorch(ExecutorchBackendConfig(external_constants=tag))
    return _save(name, et)


def _xnnpack(name: str, model: nn.Module) -> Dict[str, bytes]:
    from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
    from executorch.exir import to_edge_transform_and_lower
    from executorch.exir.passes.external_constants_pass import (
        delegate_external_constants_pass_unlifted,
    )
    inputs = (torch.randn(2, 8),)
    module = torch.export.export(model, inputs).module()
    delegate_external_constants_pass_unlifted(module, _tag)
    ep = torch.export.export(module, inputs)
    et = to_edge_transform_and_lower(ep, partitioner=[XnnpackPartitioner()]).to_executorch()
    return _save(name, et)


def _save(name: str, et: Any) -> Dict[str, bytes]:
    """Writes NAME.pte; returns its data files' bytes by file name (not kept)."""
    with open(os.path.join(OUT, name + ".pte"), "wb") as f:
        et.write_to_file(f)
    with tempfile.TemporaryDirectory() as tmp:
        et.write_tensor_data_to_file(tmp)
        out = {}
        for file in sorted(os.listdir(tmp)):
            with open(os.path.join(tmp, file), "rb") as f:
                out[file] = f.read()
    return out


def _program_keys(path: str) -> Dict[str, List[str]]:
    from executorch.exir._serialize import _program as P
    from executorch.exir.schema import TensorDataLocation
    from make_et_data import _oracle_xnnpack
    with open(path, "rb") as f:
        data = f.read()
    eh = P._get_extended_header(data)
    raw = P._flatbuffer_to_program(data[:eh.program_size] if eh else data)
    external = sorted({v.val.extra_tensor_info.fully_qualified_name
                       for plan in raw.execution_plan for v in plan.values
                       if type(v.val).__name__ == "Tensor" and v.val.extra_tensor_info
                       and v.val.extra_tensor_info.location == TensorDataLocation.EXTERNAL})
    held = {n.key for n in (raw.named_data or [])}
    named = sorted({c["named_key"] for d in _oracle_xnnpack(path)["delegates"]
                    for c in d["graph"].get("constant_data", []) if c.get("named_key")}
                   - held)
    return {"external": external, "named_data": named}


def _data_keys(path: str) -> Dict[str, Any]:
    from executorch.extension.flat_tensor.serialize import serialize as S
    with open(path, "rb") as f:
        ft = S._deserialize_to_flat_tensor(f.read())
    out = {}
    for n in ft.named_data:
        layout = n.tensor_layout
        out[n.key] = {"nbytes": ft.segments[n.segment_index].size,
                      "scalar_type": None if layout is None else int(layout.scalar_type),
                      "sizes": None if layout is None else list(layout.sizes)}
    return out


def _runs(pte: str, ptd: Any, model: nn.Module) -> Any:
    """True if ExecuTorch's runtime loads ``pte`` with ``ptd`` and gives the eager output;
    else the error it raises."""
    from executorch.runtime import Runtime
    x = torch.randn(2, 8)
    try:
        program = Runtime.get().load_program(pte, data_path=ptd)
        (got,) = program.load_method("forward").execute((x,))
    except Exception as e:   # the runtime's refusal is the answer
        return f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
    with torch.no_grad():
        return bool(torch.allclose(got, model(x), atol=1e-5))


def main() -> None:
    os.makedirs(OUT, exist_ok=True)
    models = {"task_a": Task(3), "task_b": Task(5), "task_c": Task(4, layers=1),
              "task_d": Task(6), "xnn_a": Task(3), "xnn_b": Task(5)}
    files = {}
    for name in ("task_a", "task_b", "task_c"):
        files[name] = _portable(name, models[name], _tag)
    files["task_d"] = _portable("task_d", models["task_d"], _tag_d)
    for name in ("xnn_a", "xnn_b"):
        files[name] = _xnnpack(name, models[name])
    assert files["task_a"]["foundation.ptd"] == files["task_b"]["foundation.ptd"]
    assert files["xnn_a"]["foundation.ptd"] == files["xnn_b"]["foundation.ptd"]
    with open(os.path.join(OUT, "foundation.ptd"), "wb") as f:
        f.write(files["task_a"]["foundation.ptd"])
    with open(os.path.join(OUT, "foundation_xnn.ptd"), "wb") as f:
        f.write(files["xnn_a"]["foundation.ptd"])
    data = ["foundation.ptd", "foundation_xnn.ptd"]
    oracle = {"programs": {}, "data_files": {d: _data_keys(os.path.join(OUT, d))
                                             for d in data}}
    for name, model in models.items():
        pte = os.path.join(OUT, name + ".pte")
        oracle["programs"][name + ".pte"] = {
            **_program_keys(pte),
            "runs_with": {d: _runs(pte, os.path.join(OUT, d), model) for d in data}}
    with open(os.path.join(OUT, "shared.oracle.json"), "w", encoding="utf-8") as f:
        json.dump(oracle, f, indent=1, sort_keys=True)
        f.write("\n")
    print(json.dumps(oracle["programs"], indent=1))


if __name__ == "__main__":
    main()
