#!/usr/bin/env python3
"""Regenerate tests/data/names/: a program whose constants content cannot name, its
ETRecord and the oracle of their names (needs torch==2.13.0 and executorch==1.5.1).

    python tests/data/make_names_data.py [--out DIR]

``norms.pte`` and ``norms.etrecord``: a nested module exported to portable kernels with
``generate_etrecord=True`` whose parameters and buffers are mostly zeros and ones (a
fresh batch norm's weight, bias, running mean and variance, a layer norm's, zero biases,
a zero buffer): many constants of one shape hold the same values, so only where the
program uses each one tells whose it is.

``norms.oracle.json``, from ExecuTorch and torch alone:

- ``names``: each constant of the program by its value (``forward.values[I]``) -> the
  module's name. Found on a probe: the same module with every parameter and buffer
  filled with values no other holds, exported the same way; ExecuTorch's own reader
  (``deserialize_pte_binary``) gives each constant's bytes, and the probe's
  ``state_dict()`` the one tensor with those bytes. The probe's program is checked to be
  the real one's but for the constants' bytes (the same values, operators and
  instructions), so its value indices are the real program's.
- ``state_dict``: the real module's ``state_dict()``: dtype, shape and the SHA-256 of
  each tensor's bytes.
- ``args``: each call node of each method's edge-dialect graph, as ExecuTorch's
  ``parse_etrecord`` rebuilds it from the ETRecord: the name of the value each of its
  positional arguments is (null for a number, a list, None).
"""

import argparse
import copy
import hashlib
import json
import os
import warnings

import torch
from torch import nn

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "names")

warnings.filterwarnings("ignore")

#: Bytes per element of ExecuTorch's scalar types the module holds (Int, Long, Float).
ITEMSIZE = {3: 4, 4: 8, 6: 4}


class Head(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Sequential(nn.Linear(4, 4), nn.ReLU(), nn.Linear(4, 2))
        for layer in (self.fc[0], self.fc[2]):
            nn.init.zeros_(layer.bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(x)


class Norms(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, bias=False)
        self.bn = nn.BatchNorm2d(4)     # weight ones, bias zeros, mean zeros, var ones
        self.ln = nn.LayerNorm(4)       # weight ones, bias zeros
        self.head = Head()
        self.register_buffer("offset", torch.zeros(4))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.bn(self.conv(x)).mean((2, 3)) + self.offset
        return self.head(self.ln(y))


def lower(module: nn.Module):
    from executorch.exir import to_edge_transform_and_lower
    x = (torch.randn(1, 3, 6, 6),)
    edge = to_edge_transform_and_lower(torch.export.export(module.eval(), x),
                                       generate_etrecord=True)
    return edge.to_executorch()


def constants(pte: bytes) -> dict:
    """Each constant tensor value of each method -> its bytes, by ExecuTorch's reader."""
    from executorch.exir._serialize._program import deserialize_pte_binary
    from executorch.exir.schema import Tensor
    program = deserialize_pte_binary(pte).program
    out = {}
    for plan in program.execution_plan:
        for i, v in enumerate(plan.values):
            t = v.val
            if isinstance(t, Tensor) and t.data_buffer_idx > 0:   # storage is padded
                n = ITEMSIZE[int(t.scalar_type)]
                for size in t.sizes:
                    n *= size
                out[f"{plan.name}.values[{i}]"] = bytes(
                    program.constant_buffer[t.data_buffer_idx].storage)[:n]
    return out


def structure(pte: bytes) -> list:
    """The program but for its constants' bytes and where they are kept."""
    from executorch.exir._serialize._program import deserialize_pte_binary
    from executorch.exir.schema import Tensor
    program = deserialize_pte_binary(pte).program
    out = []
    for plan in program.execution_plan:
        values = []
        for v in plan.values:
            t = v.val
            values.append((int(t.scalar_type), list(t.sizes), list(t.dim_order),
                           t.data_buffer_idx > 0) if isinstance(t, Tensor) else repr(t))
        out.append((plan.name, values, repr(plan.chains), repr(plan.operators)))
    return out


def args(path: str) -> dict:
    """Each call node's positional arguments, as parse_etrecord rebuilds the graphs."""
    from executorch.devtools.etrecord import parse_etrecord
    edge = parse_etrecord(path).edge_dialect_program
    programs = edge if isinstance(edge, dict) else {"forward": edge}
    return {method: {n.name: [a.name if isinstance(a, torch.fx.Node) else None
                              for a in n.args]
                     for n in ep.graph_module.graph.nodes if n.op == "call_function"}
            for method, ep in programs.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=OUT, help="the folder to write (default: names/)")
    out = parser.parse_args().out
    os.makedirs(out, exist_ok=True)
    torch.manual_seed(0)
    real = Norms().eval()
    probe = copy.deepcopy(real)
    with torch.no_grad():   # values no other tensor holds, variances positive
        for k, t in enumerate(probe.state_dict().values()):
            if t.is_floating_point():
                t.copy_(torch.arange(t.numel(), dtype=t.dtype).reshape(t.shape) * 0.125
                        + 16 * (k + 1))
    et, probe_et = lower(real), lower(probe)
    assert structure(et.buffer) == structure(probe_et.buffer), "the probe is another program"
    state = {k: v.detach().contiguous() for k, v in probe.state_dict().items()}
    by_bytes = {v.numpy().tobytes(): k for k, v in state.items()}
    assert len(by_bytes) == len(state), "two probe tensors hold the same bytes"
    names = {where: by_bytes[data] for where, data in constants(probe_et.buffer).items()}
    with open(os.path.join(out, "norms.pte"), "wb") as f:
        f.write(et.buffer)
    et.get_etrecord().save(os.path.join(out, "norms.etrecord"))
    oracle = {"names": names, "args": args(os.path.join(out, "norms.etrecord")),
              "state_dict": {k: {"dtype": str(v.dtype).replace("torch.", ""),
                                 "shape": list(v.shape),
                                 "sha256": hashlib.sha256(
                                     v.detach().contiguous().numpy().tobytes()).hexdigest()}
                             for k, v in real.state_dict().items()}}
    with open(os.path.join(out, "norms.oracle.json"), "w") as f:
        json.dump(oracle, f, indent=1, sort_keys=True)
        f.write("\n")


if __name__ == "__main__":
    main()
