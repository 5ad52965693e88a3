#!/usr/bin/env python3
"""Regenerate tests/data/et/records: programs with their ETRecords and ETDumps, and what
ExecuTorch's Inspector makes of each pair (needs torch 2.13, executorch 1.5.1).

    python tests/data/make_et_profile_record.py [--out DIR]

run from a copy of the script outside the checkout (``--out tests/data/et/records``) so
that the stack traces the ETRecords keep name no workspace.

A small model with nested modules (``Net``: a block of a linear layer and a ReLU, a
cumsum, a head of a linear layer and a sigmoid) exported with ``generate_etrecord=True``
and ``to_edge_transform_and_lower``, on the portable kernels (``record_portable``) and
lowered to XNNPACK (``record_xnnpack``): ``NAME.pte``, ``NAME.etrecord``
(``get_etrecord().save``) and ``NAME.etdump``, the ETDump of ``RUNS`` executions of
``forward`` by ExecuTorch's runtime.

``records.inspector.json`` holds, per program, what ``executorch.devtools.Inspector``
(``etdump_path``, ``etrecord``; time scale ns to ns) says of each event of each event
block: its name, instruction id, delegate debug identifier, debug handles, op types,
module hierarchy (by node: the nn_module_stack, key -> [path, type]) and stack traces
(by node), and its count and raw times (ticks).
"""
import argparse
import json
import os
import warnings
from typing import Any, Dict, List

import torch
from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
from executorch.devtools import Inspector
from executorch.devtools.inspector._inspector_utils import TimeScale
from executorch.exir import to_edge_transform_and_lower
from executorch.runtime import Runtime
from torch import nn
from torch.export import export

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "et", "records")
RUNS = 3

warnings.filterwarnings("ignore")


class Block(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(6, 6)
        self.act = nn.ReLU()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.act(self.fc(x))


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.block = Block()
        self.head = nn.Sequential(nn.Linear(6, 2), nn.Sigmoid())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(torch.cumsum(self.block(x), dim=1))


def _plain(value: Any) -> Any:
    """JSON of what the Inspector gives: tuples as lists, keys as strings."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def _inspected(name: str) -> List[Dict[str, Any]]:
    inspector = Inspector(etdump_path=os.path.join(OUT, name + ".etdump"),
                          etrecord=os.path.join(OUT, name + ".etrecord"),
                          source_time_scale=TimeScale.NS, target_time_scale=TimeScale.NS)
    return [{"name": b.name, "events": [_event(e) for e in b.events if e.perf_data is not None]}
            for b in inspector.event_blocks]


def _event(e: Any) -> Dict[str, Any]:
    """What the Inspector ties to an event with timings."""
    handles = e.debug_handles
    return {"name": e.name, "instruction_id": e._instruction_id,
            "delegate_debug_identifier": e.delegate_debug_identifier,
            "debug_handles": _plain(handles) if handles is not None else None,
            "op_types": list(e.op_types), "module_hierarchy": _plain(e.module_hierarchy),
            "stack_traces": _plain(e.stack_traces), "count": len(e.perf_data.raw),
            "raw": [float(t) for t in e.perf_data.raw]}


def _make(name: str, partitioner: List[Any]) -> List[Dict[str, Any]]:
    torch.manual_seed(0)
    model, x = Net().eval(), torch.randn(2, 6)
    edge = to_edge_transform_and_lower(export(model, (x,)), partitioner=partitioner,
                                       generate_etrecord=True)
    program = edge.to_executorch()
    pte = os.path.join(OUT, name + ".pte")
    with open(pte, "wb") as f:
        f.write(program.buffer)
    program.get_etrecord().save(os.path.join(OUT, name + ".etrecord"))
    loaded = Runtime.get().load_program(pte, enable_etdump=True)
    method = loaded.load_method("forward")
    for _ in range(RUNS):
        method.execute([x])
    loaded._program.write_etdump_result_to_file(os.path.join(OUT, name + ".etdump"), None)
    return _inspected(name)


def main() -> None:
    global OUT
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", default=OUT)
    OUT = parser.parse_args().out
    os.makedirs(OUT, exist_ok=True)
    oracle = {"runs": RUNS, "record_portable": _make("record_portable", []),
              "record_xnnpack": _make("record_xnnpack", [XnnpackPartitioner()])}
    with open(os.path.join(OUT, "records.inspector.json"), "w") as f:
        json.dump(oracle, f, indent=1, sort_keys=True)
        f.write("\n")


if __name__ == "__main__":
    main()
