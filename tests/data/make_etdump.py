#!/usr/bin/env python3
"""Regenerate tests/data/et/profile.etdump, its debug buffer and its oracle (needs torch
2.13, executorch 1.5.1).

    FLATC_EXECUTABLE=.../flatc python tests/data/make_etdump.py

Exports a small model (linear, relu, times 2) with ``to_edge_transform_and_lower`` and
``to_executorch``, loads it in ExecuTorch's runtime with ETDump enabled and a debug buffer,
executes ``forward`` once and writes ``profile.etdump`` (the ETDump, identifier ``ED00``)
and ``profile.debug`` (the debug buffer its debug events' tensors point into). Writes
``profile.oracle.json``: what ExecuTorch's own reader ``deserialize_from_etdump_flatcc``
says of the ETDump (version; per run its name, bundled_input_index, allocator names and
every event: a profile event's name, chain_index, instruction_id, delegate ids, start and
end time; an allocation event's allocator id and size; a debug event's ids, name and value
with its tensor's scalar type, sizes, strides and offset), the values ``Inspector`` reads
for each instruction's debug tensor from the debug buffer, the input and the runtime's
output. Also writes ``alloc.etdump``, compiled by ``flatc`` from JSON with ExecuTorch's
schema (the runtime's Python bindings record no allocations): one run with two allocators
and allocation events, and its own entry in the oracle.
"""
import json
import os
import subprocess
import tempfile
from importlib import resources
from typing import Any, Dict, List

import executorch.devtools.etdump as etdump_package
import torch
from executorch.devtools import Inspector
from executorch.devtools.etdump.serialize import deserialize_from_etdump_flatcc
from executorch.exir import to_edge_transform_and_lower
from executorch.runtime import Runtime
from torch.export import export

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "et")
DEBUG_BUFFER_SIZE = 1024


class Small(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = torch.nn.Linear(4, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.fc(x)) * 2


def _value(v: Any) -> Dict[str, Any]:
    out: Dict[str, Any] = {"val": v.val}
    if v.tensor is not None:
        t = v.tensor
        out["tensor"] = {"scalar_type": int(t.scalar_type), "sizes": list(t.sizes),
                         "strides": list(t.strides), "offset": t.offset}
    for name in ("int_value", "float_value", "double_value", "bool_value", "output"):
        sub = getattr(v, name)
        if sub is not None:
            out[name] = next(iter(vars(sub).values()))
    return out


def _event(e: Any) -> Dict[str, Any]:
    if e.profile_event is not None:
        p = e.profile_event
        return {"kind": "profile", "name": p.name, "chain_index": p.chain_index,
                "instruction_id": p.instruction_id,
                "delegate_debug_id_int": p.delegate_debug_id_int,
                "delegate_debug_id_str": p.delegate_debug_id_str,
                "start_time": p.start_time, "end_time": p.end_time}
    if e.allocation_event is not None:
        a = e.allocation_event
        return {"kind": "allocation", "allocator_id": a.allocator_id,
                "allocation_size": a.allocation_size}
    d = e.debug_event
    return {"kind": "debug", "name": d.name, "chain_index": d.chain_index,
            "instruction_id": d.instruction_id,
            "delegate_debug_id_int": d.delegate_debug_id_int,
            "delegate_debug_id_str": d.delegate_debug_id_str,
            "value": _value(d.debug_entry)}


def _reading(blob: bytes) -> Dict[str, Any]:
    """ExecuTorch's reading of an ETDump, as plain data."""
    dump = deserialize_from_etdump_flatcc(blob)
    runs: List[Dict[str, Any]] = []
    for r in dump.run_data:
        runs.append({"name": r.name, "bundled_input_index": r.bundled_input_index,
                     "allocators": [a.name for a in r.allocators or []],
                     "events": [_event(e) for e in r.events or []]})
    return {"version": dump.version, "run_data": runs, "size": len(blob)}


def _profile(tmp: str, oracle: Dict[str, Any]) -> None:
    torch.manual_seed(0)
    model = Small().eval()
    x = torch.randn(2, 4)
    program = to_edge_transform_and_lower(export(model, (x,))).to_executorch()
    pte = os.path.join(tmp, "small.pte")
    with open(pte, "wb") as f:
        f.write(program.buffer)
    loaded = Runtime.get().load_program(pte, enable_etdump=True,
                                        debug_buffer_size=DEBUG_BUFFER_SIZE)
    (y,) = loaded.load_method("forward").execute([x])
    etdump, debug = (os.path.join(OUT, "profile." + e) for e in ("etdump", "debug"))
    loaded.write_etdump_result_to_file(etdump, debug)
    with open(etdump, "rb") as f:
        oracle["profile"] = _reading(f.read())
    inspector = Inspector(etdump_path=etdump, debug_buffer_path=debug)
    values: Dict[str, Any] = {}
    for block in inspector.event_blocks:
        for e in block.events:
            # Inspector's Event keeps the instruction id it was matched by privately
            if e.debug_data and e._instruction_id is not None:
                values[str(e._instruction_id)] = [t.tolist() for t in e.debug_data]
    oracle["profile"].update(debug_buffer_size=os.path.getsize(debug),
                             inspector_debug_data=values, input=x.tolist(),
                             output=y.tolist())


def _alloc(tmp: str, oracle: Dict[str, Any]) -> None:
    # ExecuTorch's serializer writes no size prefix, its runtime and reader do: flatc
    # compiles the run size-prefixed from JSON by ExecuTorch's schema.
    def alloc(i: int, n: int) -> Dict[str, Any]:
        return {"allocation_event": {"allocator_id": i, "allocation_size": n}}
    run = {"name": "alloc", "bundled_input_index": 2,
           "allocators": [{"name": "method"}, {"name": "temp"}],
           "events": [alloc(0, 64), alloc(1, 4096), alloc(0, 16)]}
    for name in ("etdump_schema_flatcc.fbs", "scalar_type.fbs"):
        with open(os.path.join(tmp, name), "wb") as f:
            f.write(resources.files(etdump_package).joinpath(name).read_bytes())
    with open(os.path.join(tmp, "alloc.json"), "w") as f:
        json.dump({"version": 0, "run_data": [run]}, f)
    subprocess.run([os.environ["FLATC_EXECUTABLE"], "--size-prefixed", "-b", "-o", tmp,
                    os.path.join(tmp, "etdump_schema_flatcc.fbs"),
                    os.path.join(tmp, "alloc.json")], check=True)
    with open(os.path.join(tmp, "alloc.etdp"), "rb") as f:
        blob = f.read()
    with open(os.path.join(OUT, "alloc.etdump"), "wb") as f:
        f.write(blob)
    oracle["alloc"] = _reading(blob)


def main() -> None:
    os.makedirs(OUT, exist_ok=True)
    oracle: Dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp:
        _profile(tmp, oracle)
        _alloc(tmp, oracle)
    with open(os.path.join(OUT, "etdump.oracle.json"), "w") as f:
        json.dump(oracle, f, indent=1, sort_keys=True)


if __name__ == "__main__":
    main()
