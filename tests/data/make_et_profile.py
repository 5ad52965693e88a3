#!/usr/bin/env python3
"""Regenerate tests/data/et/runs' profiles with their programs, and what ExecuTorch's
Inspector says of them (needs torch 2.13, executorch 1.5.1).

    FLATC_EXECUTABLE=.../flatc python tests/data/make_et_profile.py

Programs exported with ``to_edge_transform_and_lower`` and ``to_executorch``, each loaded
by ExecuTorch's runtime with ETDump enabled and its methods executed (``forward``
``RUNS`` times unless said), the ETDump written with ``write_etdump_result_to_file``:

- ``profile_portable.pte``/``.etdump``: linear, relu, times 2, cumsum, linear, sigmoid on
  the portable kernels (per kernel call a ``native_call_*`` event inside the
  instruction's ``OPERATOR_CALL``);
- ``profile_xnnpack.pte``/``.etdump``: the same model lowered to XNNPACK: two delegate
  calls around the portable cumsum, XNNPACK's per-node events (labelled by
  ``delegate_debug_id_str``) inside each ``DELEGATE_CALL``;
- ``profile_methods.pte``/``.etdump``: that model's ``forward`` and a ``head`` (times 3,
  sigmoid), executed 2 and 3 times: two blocks of "Execute" runs, one per method.

and ``profile_wrap.etdump``, compiled by flatc (``FLATC_EXECUTABLE``): an event whose
32-bit clock wrapped.

``profile.inspector.json`` holds, per ETDump, what ``executorch.devtools.Inspector``
(without an ETRecord, time scale ns to ns: its times are the ETDump's ticks) says of it:
per event block its name, bundled input index and every event's name, instruction id,
delegate debug identifier, whether delegated, and its perf data's count, mean, min, max
and raw times.
"""
import json
import os
import subprocess
import tempfile
from importlib import resources
from typing import Any, Dict, List, Tuple

import executorch.devtools.etdump as etdump_package
import torch
from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
from executorch.devtools import Inspector
from executorch.devtools.inspector._inspector_utils import TimeScale
from executorch.exir import to_edge_transform_and_lower
from executorch.runtime import Runtime
from torch.export import export

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "et", "runs")
RUNS = 5


class Mixed(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = torch.nn.Linear(8, 16)
        self.fc2 = torch.nn.Linear(16, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.cumsum(torch.relu(self.fc(x)) * 2, dim=1)
        return torch.sigmoid(self.fc2(y))


class Head(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.sigmoid(x * 3)


def _inspected(path: str) -> List[Dict[str, Any]]:
    inspector = Inspector(etdump_path=path, source_time_scale=TimeScale.NS,
                          target_time_scale=TimeScale.NS)
    blocks = []
    for b in inspector.event_blocks:
        events = []
        for e in b.events:
            if e.perf_data is None:
                continue
            raw = [float(t) for t in e.perf_data.raw]
            events.append({"name": e.name, "instruction_id": e._instruction_id,
                           "delegate_debug_identifier": e.delegate_debug_identifier,
                           "is_delegated_op": e.is_delegated_op, "count": len(raw),
                           "mean": float(e.perf_data.avg), "min": float(e.perf_data.min),
                           "max": float(e.perf_data.max), "raw": raw})
        blocks.append({"name": b.name, "bundled_input_index": b.bundled_input_index,
                       "events": events})
    return blocks


def _run(name: str, methods: Dict[str, Tuple[torch.nn.Module, Tuple[Any, ...], int]],
         partitioner: List[Any]) -> List[Dict[str, Any]]:
    """Program ``name`` of ``methods`` (each a model, its inputs and how many times to
    execute it), lowered by ``partitioner``, run with ETDump enabled; the Inspector's
    reading of the ETDump."""
    exported = {m: export(model.eval(), inputs) for m, (model, inputs, _) in methods.items()}
    program = to_edge_transform_and_lower(exported, partitioner=partitioner).to_executorch()
    pte = os.path.join(OUT, name + ".pte")
    with open(pte, "wb") as f:
        f.write(program.buffer)
    loaded = Runtime.get().load_program(pte, enable_etdump=True)
    for m, (_, inputs, runs) in methods.items():
        method = loaded.load_method(m)
        for _ in range(runs):
            method.execute(list(inputs))
    path = os.path.join(OUT, name + ".etdump")
    # without a debug buffer there is none to write; the public wrapper insists on a path
    loaded._program.write_etdump_result_to_file(path, None)
    return _inspected(path)


def _wrapped() -> List[Dict[str, Any]]:
    """``profile_wrap.etdump``, compiled by flatc from JSON with ExecuTorch's schema: two
    runs of one instruction whose second event's clock wrapped past 2**32 (its end before
    its start, as a 32-bit tick counter gives), and a method's event. flatc is
    ``FLATC_EXECUTABLE`` or ``flatc`` on the path."""
    def event(pc: int, name: str, start: int, end: int) -> Dict[str, Any]:
        return {"profile_event": {"name": name, "chain_index": 0 if pc >= 0 else -1,
                                  "instruction_id": max(pc, 0), "start_time": start,
                                  "end_time": end, "delegate_debug_id_int": -1}}

    runs = [{"name": "Execute", "bundled_input_index": -1, "events": [
        event(0, "OPERATOR_CALL", start, end), event(-1, "Method::execute", start - 5, end + 5)]}
        for start, end in ((1000, 1700), (2**32 - 300, 400))]
    with tempfile.TemporaryDirectory() as tmp:
        for schema in ("etdump_schema_flatcc.fbs", "scalar_type.fbs"):
            with open(os.path.join(tmp, schema), "wb") as f:
                f.write(resources.files(etdump_package).joinpath(schema).read_bytes())
        with open(os.path.join(tmp, "profile_wrap.json"), "w") as f:
            json.dump({"version": 0, "run_data": runs}, f)
        subprocess.run([os.environ.get("FLATC_EXECUTABLE", "flatc"), "--size-prefixed", "-b",
                        "-o", tmp, os.path.join(tmp, "etdump_schema_flatcc.fbs"),
                        os.path.join(tmp, "profile_wrap.json")], check=True)
        with open(os.path.join(tmp, "profile_wrap.etdp"), "rb") as f:
            blob = f.read()
    path = os.path.join(OUT, "profile_wrap.etdump")
    with open(path, "wb") as f:
        f.write(blob)
    return _inspected(path)


def main() -> None:
    torch.manual_seed(0)
    model = Mixed()
    x = torch.randn(3, 8)
    oracle = {"runs": RUNS,
              "profile_portable": _run("profile_portable", {"forward": (model, (x,), RUNS)},
                                       []),
              "profile_xnnpack": _run("profile_xnnpack", {"forward": (model, (x,), RUNS)},
                                      [XnnpackPartitioner()]),
              "profile_methods": _run("profile_methods", {
                  "forward": (model, (x,), 2), "head": (Head(), (torch.randn(4),), 3)}, []),
              "profile_wrap": _wrapped()}
    with open(os.path.join(OUT, "profile.inspector.json"), "w") as f:
        json.dump(oracle, f, indent=1, sort_keys=True)


if __name__ == "__main__":
    main()
