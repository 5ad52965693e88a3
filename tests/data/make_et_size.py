#!/usr/bin/env python3
"""Regenerate tests/data/et/size.oracle.json: where ExecuTorch 1.5.1 says the bytes of
each program (.pte) and data file (.ptd) in tests/data/et/ are (needs executorch 1.5.1).

    python tests/data/make_et_size.py

ExecuTorch's own readers run in a child process (they may crash). Per file, by name:

- ``size``: bytes in the file;
- a program's ``header``: ``exir._serialize._program._get_extended_header`` (``null``
  when the file has none); ``segments``: [offset, size] of each, as its flatbuffer
  reader (``_flatbuffer_to_program``) gives them; ``delegates``: per method and
  delegate index, the backend id, where the payload is (``inline``/``segment``), its
  index and its size in bytes (``len(backend_delegate_data[index].data)`` or the
  segment's size); ``constant_slots``: the length of each constant buffer
  ``deserialize_pte_binary`` cuts out of the constant segment (the tensor's bytes and the
  alignment padding up to the next one), or of the inline ``constant_buffer``'s storage
  for a program without a constant segment; ``constant_nbytes``: per buffer index, the
  largest tensor's bytes (exir's ``num_bytes_from_shape_and_dtype`` of its sizes and
  scalar type); ``mutable_slots`` and ``mutable_nbytes``: the same of the mutable data
  segment (the first values of planned buffers); ``named_data``: the bytes of each named
  data entry as ``deserialize_pte_binary`` restores it;
- a data file's ``header``: ``extension.flat_tensor.serialize._get_extended_header``;
  ``segments``; ``named_data``: each key's segment size.
"""
import glob
import json
import os
import subprocess
import sys
from typing import Any, Dict

HERE = os.path.dirname(os.path.abspath(__file__))
ET = os.path.join(HERE, "et")
OUT = os.path.join(ET, "size.oracle.json")


def _pte(path: str) -> Dict[str, Any]:
    import torch
    from executorch.exir._serialize import _program as P
    from executorch.exir.scalar_type import ScalarType
    from executorch.exir.tensor import get_scalar_type, num_bytes_from_shape_and_dtype
    with open(path, "rb") as f:
        data = f.read()
    eh = P._get_extended_header(data)
    raw = P._flatbuffer_to_program(data[:eh.program_size] if eh else data)
    segments = [[s.offset, s.size] for s in (raw.segments or [])]
    delegates = []
    for plan in raw.execution_plan:
        for j, d in enumerate(plan.delegates):
            loc = int(d.processed.location)
            idx = d.processed.index
            size = (len(raw.backend_delegate_data[idx].data) if loc == 0
                    else raw.segments[idx].size)
            delegates.append({"method": plan.name, "index": j, "id": d.id,
                              "location": "inline" if loc == 0 else "segment",
                              "data_index": idx, "size": size})
    nbytes: Dict[str, Dict[str, int]] = {"constant": {}, "mutable": {}}
    for plan in raw.execution_plan:
        for v in plan.values:
            t = v.val
            if type(t).__name__ != "Tensor" or not t.data_buffer_idx:
                continue
            n = num_bytes_from_shape_and_dtype(
                torch.Size(t.sizes), get_scalar_type(ScalarType(t.scalar_type)))
            # a planned tensor's buffer index is into the mutable data's
            into = nbytes["constant" if t.allocation_info is None else "mutable"]
            k = str(t.data_buffer_idx)
            into[k] = max(into.get(k, 0), n)
    pte = P.deserialize_pte_binary(data)
    named: Dict[str, int] = {}
    if pte.named_data is not None:
        for key, entry in pte.named_data.pte_data.items():
            named[key] = len(pte.named_data.buffers[entry.buffer_index])
    return {"size": len(data),
            "header": None if eh is None else {
                "length": eh.length, "program_size": eh.program_size,
                "segment_base_offset": eh.segment_base_offset,
                "segment_data_size": eh.segment_data_size},
            "segments": segments, "delegates": delegates,
            "constant_slots": [len(b.storage) for b in pte.program.constant_buffer],
            "constant_nbytes": nbytes["constant"],
            "mutable_slots": [len(b.storage) for b in (pte.mutable_data or [])],
            "mutable_nbytes": nbytes["mutable"], "named_data": named}


def _ptd(path: str) -> Dict[str, Any]:
    from executorch.extension.flat_tensor.serialize import serialize as S
    with open(path, "rb") as f:
        data = f.read()
    h = S._get_extended_header(data)
    ft = S._deserialize_to_flat_tensor(data)
    segments = [[s.offset, s.size] for s in ft.segments]
    return {"size": len(data),
            "header": {"length": h.length, "flatbuffer_offset": h.flatbuffer_offset,
                       "flatbuffer_size": h.flatbuffer_size,
                       "segment_base_offset": h.segment_base_offset,
                       "segment_data_size": h.segment_data_size},
            "segments": segments,
            "named_data": {n.key: segments[n.segment_index][1] for n in ft.named_data}}


def main(argv: list) -> int:
    """Write the oracle (or, with ``--child PATH``, print one file's facts)."""
    if argv[1:2] == ["--child"]:
        path = argv[2]
        print(json.dumps(_pte(path) if path.endswith(".pte") else _ptd(path)))
        return 0
    out = {}
    for path in sorted(glob.glob(os.path.join(ET, "*.pt[ed]"))):
        p = subprocess.run([sys.executable, os.path.abspath(__file__), "--child", path],
                           capture_output=True, text=True, timeout=600)
        if p.returncode != 0:
            raise SystemExit(f"{path}: {p.stderr.strip().splitlines()[-1:]}")
        out[os.path.basename(path)] = json.loads(p.stdout.strip().splitlines()[-1])
        print(os.path.basename(path))
    with open(OUT, "w", encoding="utf-8") as f:
        json.dump(out, f, indent=1, sort_keys=True)
        f.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
