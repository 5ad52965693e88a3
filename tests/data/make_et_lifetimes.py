#!/usr/bin/env python3
"""Regenerate tests/data/et/runs' programs with exir's lifetimes of their planned tensors
(needs torch 2.13, executorch 1.5.1).

    python tests/data/make_et_lifetimes.py [OUT]    (OUT: another folder to write to)

Each model is exported with ``to_edge_transform_and_lower`` (lowered to XNNPACK for
``life_xnnpack``) and ``to_executorch``; ``NAME.pte`` is the program,
``NAME.lifetimes.json`` what exir's memory planner left on the graph it emitted
(``exported_program(method).graph_module``), per method:

- ``nodes``: every node in graph order (exir's lifetimes count these): its ``op``,
  ``target`` and ``instruction``, the index of the instruction the emitter wrote for it
  (None for the nodes that write none: placeholders, ``memory.alloc``, ``getitem``,
  ``memory.view`` of a static shape, ``output``), matched to the program's instructions
  in order and checked by kind and operator name;
- ``tensors``: every planned ``TensorSpec`` (``mem_id`` and ``mem_offset`` set) of a node
  but the output (whose own spec is none of the program's values), once: ``mem_id``,
  ``mem_offset``, ``nbytes`` (its elements' bytes), ``allocated_memory`` (what the
  planner reserved, aligned), ``lifetime`` ([first, last] node index) and ``view_of``:
  for a ``memory.view``'s spec, the index here of its base's (exir gives a view and its
  base one lifetime, the union of theirs).
"""
import json
import operator
import os
import sys
from typing import Any, Dict, List, Optional

import torch
from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
from executorch.exir import to_edge_transform_and_lower
from executorch.exir.memory import alloc, view
from executorch.exir.tensor import TensorSpec
from torch.export import export
from torch.utils._pytree import tree_flatten

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "et", "runs")
#: Nodes the emitter writes no instruction for (a ``memory.view`` of a static shape is a
#: value sharing its base's memory; of a dynamic one an ``et_view`` kernel call).
SILENT = (alloc, operator.getitem)


class Mixed(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = torch.nn.Linear(8, 16)
        self.fc2 = torch.nn.Linear(16, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.cumsum(torch.relu(self.fc(x)) * 2, dim=1)
        return torch.sigmoid(self.fc2(y))


class Views(torch.nn.Module):
    """Views and concatenation: reshape, transpose, a tensor list (cat), two outputs."""

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> Any:
        a = (x + 1).reshape(4, 6)
        b = torch.cat([a, y.transpose(0, 1) * 3], dim=0)
        return b.sum(dim=0), torch.tanh(a)


class Mutable(torch.nn.Module):
    """A buffer updated in place each call."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("total", torch.zeros(5))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.total.add_(x)
        return self.total * 2


def _specs(node: Any) -> List[TensorSpec]:
    return [s for s in tree_flatten(node.meta.get("spec"))[0] if isinstance(s, TensorSpec)]


def _name(target: Any) -> str:
    """``aten.add.out`` of an op overload or an operator's ``aten::add`` and ``out`` (the
    program writes a default overload's name empty)."""
    text = str(target).replace("::", ".")
    return text[:-len(".default")] if text.endswith(".default") else text.rstrip(".")


def _target(target: Any) -> str:
    """A node's target by name: an operator's (``aten.add.out``), a Python function's
    module and name (``executorch.exir.memory.alloc``), a placeholder's or attribute's."""
    if isinstance(target, str):
        return target
    if type(target).__name__ in ("OpOverload", "EdgeOpOverload"):
        return _name(target)
    return f"{target.__module__}.{getattr(target, '__qualname__', target.__name__)}"


def _method(pm: Any, name: str) -> Dict[str, Any]:
    plan = next(p for p in pm.executorch_program.execution_plan if p.name == name)
    (chain,) = plan.chains
    code = chain.instructions
    graph = pm.exported_program(name).graph_module.graph
    nodes: List[Dict[str, Any]] = []
    k = 0
    for n in graph.nodes:
        at: Optional[int] = None
        args = code[k].instr_args if k < len(code) else None
        if n.target is view and not (type(args).__name__ == "KernelCall" and "et_view" in
                                     plan.operators[args.op_index].name):
            pass
        elif n.op == "call_function" and n.target not in SILENT:
            if "executorch_call_delegate" in str(n.target):
                assert type(args).__name__ == "DelegateCall", (n, args)
            else:
                op = plan.operators[args.op_index]
                assert type(args).__name__ == "KernelCall", (n, args)
                assert _name(n.target) == _name(f"{op.name}.{op.overload}"), (n.target, op)
            at, k = k, k + 1
        nodes.append({"op": n.op, "target": _target(n.target), "instruction": at})
    assert k == len(code), "every instruction is some node's"
    seen: Dict[int, Dict[str, Any]] = {}
    for n in graph.nodes:
        if n.op == "output":      # its spec is none of the values; its arguments' are
            continue
        for s in _specs(n):
            if s.mem_id is None or s.mem_offset is None or id(s) in seen:
                continue
            seen[id(s)] = {"mem_id": s.mem_id, "mem_offset": s.mem_offset,
                           "nbytes": s.nbytes(), "allocated_memory": s.allocated_memory,
                           "lifetime": list(s.lifetime), "view_of": None}
        if n.target is view:
            (base,), (mine,) = _specs(n.args[0]), _specs(n)
            seen[id(mine)]["view_of"] = list(seen).index(id(base))
    return {"nodes": nodes, "tensors": list(seen.values())}


def _write(out: str, name: str, model: torch.nn.Module, inputs: Any,
           partitioner: List[Any]) -> None:
    pm = to_edge_transform_and_lower(export(model.eval(), inputs),
                                     partitioner=partitioner).to_executorch()
    with open(os.path.join(out, name + ".pte"), "wb") as f:
        f.write(pm.buffer)
    doc = {p.name: _method(pm, p.name) for p in pm.executorch_program.execution_plan}
    with open(os.path.join(out, name + ".lifetimes.json"), "w") as f:
        json.dump(doc, f, indent=1, sort_keys=True)


def main() -> None:
    out = sys.argv[1] if len(sys.argv) > 1 else OUT
    os.makedirs(out, exist_ok=True)
    torch.manual_seed(0)
    x = torch.randn(3, 8)
    _write(out, "life_portable", Mixed(), (x,), [])
    _write(out, "life_xnnpack", Mixed(), (x,), [XnnpackPartitioner()])
    _write(out, "life_views", Views(), (torch.randn(2, 12), torch.randn(6, 3)), [])
    _write(out, "life_mutable", Mutable(), (torch.randn(5),), [])


if __name__ == "__main__":
    main()
