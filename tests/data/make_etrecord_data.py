#!/usr/bin/env python3
"""Regenerate the ETRecords in tests/data/etrecord/ and their oracles (needs torch==2.13.0
and executorch==1.5.1).

    python tests/data/make_etrecord_data.py [--out DIR]

Two models with nested modules, exported with ``generate_etrecord=True``:

- ``portable``: two methods (``forward``, ``encode``), lowered to no backend. Its
  parameters include a transposed one (strides not contiguous) and a buffer that is a
  slice of another tensor's storage (a storage offset), an int64 buffer and a float16 one.
- ``xnnpack``: one method, lowered to XNNPACK.

For each, ``NAME.etrecord`` (ExecuTorch's ``ETRecord.save``), ``NAME.pte`` and
``NAME.oracle.json``: what ExecuTorch's ``parse_etrecord`` and torch read from the
ETRecord (the members and their sizes, the three maps, every graph's nodes with their
names, targets, debug handles, nn_module_stack and stack_trace, the graph signatures,
and for every torch.save member its tensors' names, dtypes, shapes, strides, storage
offsets and the sha256 of their bytes in row-major order).
"""

import hashlib
import json
import os
import sys
import warnings
import zipfile

import torch
from torch import nn

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "etrecord")

warnings.filterwarnings("ignore")


class Block(nn.Module):
    def __init__(self, n: int) -> None:
        super().__init__()
        self.fc = nn.Linear(n, n)
        self.act = nn.ReLU()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.act(self.fc(x))


class Portable(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.block = Block(4)
        self.head = nn.Sequential(Block(4), nn.Linear(4, 3))
        # a transposed parameter: strides (1, 3)
        self.proj = nn.Parameter(torch.arange(12, dtype=torch.float32).reshape(3, 4).t())
        base = torch.linspace(-1.0, 1.0, 10)
        # a buffer on a slice of another storage: storage offset 2
        self.register_buffer("window", base[2:6])
        self.register_buffer("steps", torch.tensor([3, 1, 4, 1, 5], dtype=torch.int64))
        self.register_buffer("scale16", torch.tensor([0.5, -2.0, 8.0], dtype=torch.float16))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.head(self.block(x) + self.window)
        return y + (x @ self.proj).sum() * self.scale16.float().sum()

    def encode(self, x: torch.Tensor) -> torch.Tensor:
        return self.block(x) * self.steps.sum().float()


class Encode(nn.Module):
    def __init__(self, m: Portable) -> None:
        super().__init__()
        self.m = m

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.m.encode(x)


class Xnn(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Sequential(nn.Conv2d(2, 4, 3), nn.ReLU())
        self.fc = Block(64)
        self.out = nn.Linear(64, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.conv(x).flatten(1)
        return self.out(self.fc(y))


def make(name: str, programs, partitioner) -> None:
    from executorch.exir import to_edge_transform_and_lower
    edge = to_edge_transform_and_lower(programs, partitioner=partitioner,
                                       generate_etrecord=True)
    et = edge.to_executorch()
    with open(os.path.join(OUT, f"{name}.pte"), "wb") as f:
        f.write(et.buffer)
    path = os.path.join(OUT, f"{name}.etrecord")
    et.get_etrecord().save(path)
    with open(os.path.join(OUT, f"{name}.oracle.json"), "w") as f:
        json.dump(oracle(path), f, indent=1, sort_keys=True)
        f.write("\n")


def tensor_answer(t: torch.Tensor) -> dict:
    return {"dtype": str(t.dtype).replace("torch.", ""), "shape": list(t.shape),
            "strides": list(t.stride()), "storage_offset": t.storage_offset(),
            "sha256": hashlib.sha256(t.detach().contiguous().numpy().tobytes()).hexdigest()}


def nodes_answer(ep) -> list:
    from executorch.exir.dialects.edge._ops import EdgeOpOverload
    out = []
    for n in ep.graph_module.graph.nodes:
        stack = n.meta.get("nn_module_stack")
        out.append({
            "name": n.name, "op": n.op,
            # an edge-dialect operator by the ATen (or ExecuTorch) operator it wraps
            "target": n.target if isinstance(n.target, str)
            else str(n.target._op if isinstance(n.target, EdgeOpOverload) else n.target),
            "debug_handle": n.meta.get("debug_handle"),
            "nn_module_stack": None if stack is None else
            [[k, [v[0], v[1] if isinstance(v[1], str) else
                  f"{v[1].__module__}.{v[1].__qualname__}"]] for k, v in stack.items()],
            "stack_trace": n.meta.get("stack_trace"),
        })
    return out


def signature_answer(ep) -> dict:
    sig = ep.graph_signature
    return {
        "inputs": [{"kind": s.kind.name.lower(), "name": s.arg.name, "target": s.target,
                    "persistent": s.persistent} for s in sig.input_specs],
        "outputs": [{"kind": s.kind.name.lower(), "name": getattr(s.arg, "name", None),
                     "target": s.target} for s in sig.output_specs],
    }


def oracle(path: str) -> dict:
    from executorch.devtools.etrecord import parse_etrecord
    rec = parse_etrecord(path)
    graphs = {}
    edge = rec.edge_dialect_program
    if isinstance(edge, dict):
        for method, ep in edge.items():
            graphs[f"edge_dialect_exported_program/{method}"] = ep
    elif edge is not None:
        graphs["edge_dialect_exported_program/forward"] = edge
    if rec.exported_program is not None:
        graphs["exported_program"] = rec.exported_program
    for key, ep in (rec.graph_map or {}).items():
        graphs[key] = ep
    with zipfile.ZipFile(path) as z:
        members = [{"name": i.filename, "size": i.file_size} for i in z.infolist()]
        saves = {}
        for i in z.infolist():
            if i.filename.endswith(("_state_dict", "_constants")) and i.file_size:
                import io
                loaded = torch.load(io.BytesIO(z.read(i.filename)), weights_only=True)
                saves[i.filename] = {k: tensor_answer(v) for k, v in loaded.items()
                                     if isinstance(v, torch.Tensor)}
    return {
        "members": members,
        "debug_handle_map": rec._debug_handle_map,
        "delegate_map": rec._delegate_map,
        "instruction_id_to_num_outs_map": rec._instruction_id_to_num_outs_map,
        "graphs": {k: {"nodes": nodes_answer(ep), "signature": signature_answer(ep)}
                   for k, ep in graphs.items()},
        "torch_save": saves,
    }


def main() -> None:
    global OUT
    if sys.argv[1:2] == ["--out"]:
        OUT = sys.argv[2]
    os.makedirs(OUT, exist_ok=True)
    torch.manual_seed(0)
    m = Portable().eval()
    x = (torch.randn(2, 4),)
    make("portable", {"forward": torch.export.export(m, x),
                      "encode": torch.export.export(Encode(m).eval(), x)}, None)
    from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
    torch.manual_seed(1)
    make("xnnpack", torch.export.export(Xnn().eval(), (torch.randn(1, 2, 6, 6),)),
         [XnnpackPartitioner()])


if __name__ == "__main__":
    main()
