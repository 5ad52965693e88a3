#!/usr/bin/env python3
"""Regenerate tests/data/et/bundled.bpte and its oracle (needs torch 2.13, executorch 1.5.1).

    FLATC_EXECUTABLE=.../flatc python tests/data/make_et_bundled.py

Writes ``bundled.bpte`` (an MLP, one method ``forward`` with two test cases, each a
float tensor and an int input) and ``bundled.oracle.json`` + ``bundled.oracle.npz``: what
ExecuTorch's own reader ``deserialize_from_flatbuffer_to_bundled_program`` says of it
(version, method names, per case each input and expected output: kind, dtype, shape,
values in the npz), plus the embedded program's offset, size and sha256.
"""
import hashlib
import json
import os

import numpy as np
import torch
from executorch.devtools import BundledProgram
from executorch.devtools.bundled_program.config import MethodTestCase, MethodTestSuite
from executorch.devtools.bundled_program.serialize import (
    deserialize_from_flatbuffer_to_bundled_program,
    serialize_from_bundled_program_to_flatbuffer,
)
from executorch.exir import to_edge
from torch.export import export

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "et")


class MLP(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc1 = torch.nn.Linear(4, 8)
        self.fc2 = torch.nn.Linear(8, 3)

    def forward(self, x: torch.Tensor, k: int) -> torch.Tensor:
        return self.fc2(torch.relu(self.fc1(x))) * k


def main() -> None:
    torch.manual_seed(0)
    model = MLP().eval()
    example = (torch.randn(2, 4), 2)
    manager = to_edge({"forward": export(model, example)}).to_executorch()
    cases = []
    for k in (2, 3):
        x = torch.randn(2, 4)
        cases.append(MethodTestCase(inputs=[x, k], expected_outputs=(model(x, k),)))
    bundled = BundledProgram(manager, [MethodTestSuite(method_name="forward", test_cases=cases)])
    blob = serialize_from_bundled_program_to_flatbuffer(bundled)
    os.makedirs(OUT, exist_ok=True)
    with open(os.path.join(OUT, "bundled.bpte"), "wb") as f:
        f.write(blob)
    back = deserialize_from_flatbuffer_to_bundled_program(blob)
    prog = bytes(back.program)
    off = blob.find(prog)
    arrays = {}
    suites = []
    for s in back.method_test_suites:
        tcs = []
        for i, tc in enumerate(s.test_cases):
            sides = {}
            for side, vals in (("inputs", tc.inputs), ("expected_outputs", tc.expected_outputs)):
                out = []
                for j, v in enumerate(vals):
                    val = v.val
                    kind = type(val).__name__
                    item = {"kind": kind}
                    if hasattr(val, "sizes"):
                        key = f"{s.method_name}/{i}/{side}/{j}"
                        item.update(scalar_type=int(val.scalar_type), sizes=list(val.sizes),
                                    dim_order=list(val.dim_order), npz=key)
                        arrays[key] = np.frombuffer(bytes(val.data), dtype=np.uint8)
                    else:
                        item["value"] = val.int_val if hasattr(val, "int_val") else (
                            val.bool_val if hasattr(val, "bool_val") else val.float_val)
                    out.append(item)
                sides[side] = out
            tcs.append(sides)
        suites.append({"method_name": s.method_name, "test_cases": tcs})
    oracle = {"version": back.version, "program_offset": off, "program_size": len(prog),
              "program_sha256": hashlib.sha256(prog).hexdigest(), "test_suites": suites}
    with open(os.path.join(OUT, "bundled.oracle.json"), "w") as f:
        json.dump(oracle, f, indent=1, sort_keys=True)
    np.savez(os.path.join(OUT, "bundled.oracle.npz"), **arrays)


if __name__ == "__main__":
    main()
