#!/usr/bin/env python3
"""Regenerate tests/data/et's ETDumps and their oracle (needs torch 2.13, executorch 1.5.1).

    FLATC_EXECUTABLE=.../flatc python tests/data/make_etdump.py

From ExecuTorch's runtime: a small model (linear, relu, times 2) exported with
``to_edge_transform_and_lower`` and ``to_executorch``, loaded with ETDump enabled and a
debug buffer, ``forward`` executed once: ``profile.etdump`` (the ETDump, identifier
``ED00``) and ``profile.debug`` (the debug buffer its debug events' tensors point into);
the same model lowered to XNNPACK, run without a debug buffer: ``xnnpack.etdump`` (the
delegate's own events, labelled by their ``delegate_debug_id_str``). Compiled by
``flatc`` from JSON with ExecuTorch's schema, what the runtime's Python bindings do not
record: ``alloc.etdump``, one run with two allocators and allocation events, and
``values.etdump`` with ``values.debug``, a debug value of every ValueType (a tensor
transposed by its strides, a tensor list with an empty tensor).

``etdump.oracle.json`` holds, per file, what ExecuTorch's own reader
``deserialize_from_etdump_flatcc`` says of it (version; per run its name,
bundled_input_index, allocator names and every event: a profile event's name,
chain_index, instruction_id, delegate ids and metadata, start and end time; an allocation
event's allocator id and size; a debug event's ids, name and value with its tensors'
scalar types, sizes, strides and offsets); for the profile, the values ``Inspector``
reads for each instruction's debug tensor, the input and the runtime's output; for the
values, each as the Inspector inflates it from the debug buffer and the strided tensor
as torch's ``as_strided`` reads it.
"""
import json
import os
import subprocess
import tempfile
from importlib import resources
from typing import Any, Dict, List, Tuple

import executorch.devtools.etdump as etdump_package
import numpy as np
import torch
from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
from executorch.devtools import Inspector
from executorch.devtools.etdump.serialize import deserialize_from_etdump_flatcc
from executorch.devtools.inspector._inspector_utils import inflate_runtime_output
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
    def layout(t: Any) -> Dict[str, Any]:
        return {"scalar_type": int(t.scalar_type), "sizes": list(t.sizes),
                "strides": list(t.strides), "offset": t.offset}
    if v.tensor is not None:
        out["tensor"] = layout(v.tensor)
    if v.tensor_list is not None:
        out["tensor_list"] = [layout(t) for t in v.tensor_list.tensors]
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
                "start_time": p.start_time, "end_time": p.end_time,
                "delegate_debug_metadata": None if p.delegate_debug_metadata is None
                else bytes(p.delegate_debug_metadata).hex()}
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


def _exported(tmp: str, name: str, partitioner: List[Any]) -> Tuple[str, torch.Tensor]:
    """The small model exported to tmp/<name>.pte (lowered by ``partitioner``), and the
    input it was exported with."""
    torch.manual_seed(0)
    model = Small().eval()
    x = torch.randn(2, 4)
    program = to_edge_transform_and_lower(export(model, (x,)),
                                          partitioner=partitioner).to_executorch()
    pte = os.path.join(tmp, name + ".pte")
    with open(pte, "wb") as f:
        f.write(program.buffer)
    return pte, x


def _profile(tmp: str, oracle: Dict[str, Any]) -> None:
    pte, x = _exported(tmp, "small", [])
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


def _xnnpack(tmp: str, oracle: Dict[str, Any]) -> None:
    """The model lowered to XNNPACK: the delegate's events carry its own labels."""
    pte, x = _exported(tmp, "xnnpack", [XnnpackPartitioner()])
    loaded = Runtime.get().load_program(pte, enable_etdump=True)
    loaded.load_method("forward").execute([x])
    path = os.path.join(OUT, "xnnpack.etdump")
    # without a debug buffer there is none to write; the public wrapper insists on a path
    loaded._program.write_etdump_result_to_file(path, None)
    with open(path, "rb") as f:
        oracle["xnnpack"] = _reading(f.read())


def _compiled(tmp: str, name: str, dump: Dict[str, Any]) -> bytes:
    """``dump`` (an ETDump as JSON) compiled size-prefixed by flatc with ExecuTorch's
    schema, written to et/<name>.etdump (ExecuTorch's serializer writes no size prefix,
    its runtime and reader do)."""
    for schema in ("etdump_schema_flatcc.fbs", "scalar_type.fbs"):
        with open(os.path.join(tmp, schema), "wb") as f:
            f.write(resources.files(etdump_package).joinpath(schema).read_bytes())
    with open(os.path.join(tmp, name + ".json"), "w") as f:
        json.dump(dump, f)
    subprocess.run([os.environ["FLATC_EXECUTABLE"], "--size-prefixed", "-b", "-o", tmp,
                    os.path.join(tmp, "etdump_schema_flatcc.fbs"),
                    os.path.join(tmp, name + ".json")], check=True)
    with open(os.path.join(tmp, name + ".etdp"), "rb") as f:
        blob = f.read()
    with open(os.path.join(OUT, name + ".etdump"), "wb") as f:
        f.write(blob)
    return blob


def _alloc(tmp: str, oracle: Dict[str, Any]) -> None:
    def alloc(i: int, n: int) -> Dict[str, Any]:
        return {"allocation_event": {"allocator_id": i, "allocation_size": n}}
    run = {"name": "alloc", "bundled_input_index": 2,
           "allocators": [{"name": "method"}, {"name": "temp"}],
           "events": [alloc(0, 64), alloc(1, 4096), alloc(0, 16)]}
    oracle["alloc"] = _reading(_compiled(tmp, "alloc", {"version": 0, "run_data": [run]}))


def _values(tmp: str, oracle: Dict[str, Any]) -> None:
    """Debug values of every ValueType, and a debug buffer for the tensors among them;
    each value as ExecuTorch's Inspector inflates it (``inflate_runtime_output``)."""
    buffer = (np.array([1.5, -2.0], np.float32).tobytes() + bytes(8)
              + np.array([[1, 2, 3], [4, 5, 6]], np.int64).tobytes())
    with open(os.path.join(OUT, "values.debug"), "wb") as f:
        f.write(buffer)

    def tensor(scalar_type: str, sizes: List[int], strides: List[int],
               offset: int) -> Dict[str, Any]:
        return {"scalar_type": scalar_type, "sizes": sizes, "strides": strides,
                "offset": offset}

    entries = [
        {"val": "Int", "int_value": {"int_val": -7}},
        {"val": "Bool", "bool_value": {"bool_val": True}},
        {"val": "Float", "float_value": {"float_val": 0.25}},
        {"val": "Double", "double_value": {"double_val": -1e300}},
        {"val": "Tensor", "tensor": tensor("LONG", [3, 2], [1, 3], 16)},
        {"val": "TensorList", "tensor_list": {"tensors": [
            tensor("FLOAT", [2], [1], 0), tensor("LONG", [0, 3], [3, 1], -1)]}},
        {"val": "Null"},
    ]
    run = {"name": "values", "events": [
        {"debug_event": {"instruction_id": i, "debug_entry": e}}
        for i, e in enumerate(entries)]}
    blob = _compiled(tmp, "values", {"version": 1, "run_data": [run]})
    oracle["values"] = _reading(blob)
    inflated = []
    for e in deserialize_from_etdump_flatcc(blob).run_data[0].events:
        v = inflate_runtime_output(e.debug_event.debug_entry, buffer)
        if isinstance(v, list):
            inflated.append([{"shape": list(t.shape), "values": t.flatten().tolist()}
                             for t in v])
        elif isinstance(v, torch.Tensor):
            inflated.append({"shape": list(v.shape), "values": v.flatten().tolist()})
        else:
            inflated.append(v)
    oracle["values"]["inflated"] = inflated
    # The Inspector reads a tensor's bytes as contiguous, whatever its strides; torch
    # reads them by the strides stored with it.
    strided: Dict[str, Any] = {}
    for i, e in enumerate(oracle["values"]["run_data"][0]["events"]):
        t = e["value"].get("tensor")
        if t is not None:
            dtype = {4: torch.int64, 6: torch.float32}[t["scalar_type"]]
            count = 1 + sum((n - 1) * s for n, s in zip(t["sizes"], t["strides"]))
            base = torch.frombuffer(bytearray(buffer), dtype=dtype, count=count,
                                    offset=t["offset"])
            strided[str(i)] = base.as_strided(t["sizes"], t["strides"]).tolist()
    oracle["values"]["as_strided"] = strided


def main() -> None:
    os.makedirs(OUT, exist_ok=True)
    oracle: Dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp:
        _profile(tmp, oracle)
        _xnnpack(tmp, oracle)
        _alloc(tmp, oracle)
        _values(tmp, oracle)
    with open(os.path.join(OUT, "etdump.oracle.json"), "w") as f:
        json.dump(oracle, f, indent=1, sort_keys=True)


if __name__ == "__main__":
    main()
