#!/usr/bin/env python3
"""Regenerate tests/data/et/bundled.bpte and its oracle (needs torch 2.13, executorch 1.5.1).

    FLATC_EXECUTABLE=.../flatc python tests/data/make_et_bundled.py

Writes ``bundled.bpte``: a program of two methods, ``forward`` (an MLP, two test cases of a
float tensor and an int) and ``scale`` (one test case of a float tensor and a float), and
``bundled.oracle.json`` + ``bundled.oracle.npz``: what ExecuTorch's own reader
``deserialize_from_flatbuffer_to_bundled_program`` says of it (version, method names, per
case each input and expected output: kind, dtype, shape, data bytes in the npz), the
embedded program's offset, size and sha256, and the runtime's verdict on every case
(``verify_result_with_bundled_expected_output``: the runtime loads the case's inputs, runs
the method and compares). Scalar inputs are specialized at export: the runtime refuses an
int or float input other than the one the program was exported with, so every case
passes the exported one.
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
from executorch.extension.pybindings import portable_lib
from torch.export import export

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "et")


class MLP(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc1 = torch.nn.Linear(4, 8)
        self.fc2 = torch.nn.Linear(8, 3)

    def forward(self, x: torch.Tensor, k: int) -> torch.Tensor:
        return self.fc2(torch.relu(self.fc1(x))) * k


class Scale(torch.nn.Module):
    def forward(self, x: torch.Tensor, alpha: float) -> torch.Tensor:
        return x * alpha + 1


def main() -> None:
    torch.manual_seed(0)
    mlp, scale = MLP().eval(), Scale()
    manager = to_edge({"forward": export(mlp, (torch.randn(2, 4), 2)),
                       "scale": export(scale, (torch.randn(3), 0.5))}).to_executorch()
    forward_cases = []
    for _ in range(2):
        x = torch.randn(2, 4)
        forward_cases.append(MethodTestCase(inputs=[x, 2], expected_outputs=(mlp(x, 2),)))
    x = torch.randn(3)
    scale_cases = [MethodTestCase(inputs=[x, 0.5], expected_outputs=(scale(x, 0.5),))]
    bundled = BundledProgram(manager, [
        MethodTestSuite(method_name="forward", test_cases=forward_cases),
        MethodTestSuite(method_name="scale", test_cases=scale_cases)])
    blob = serialize_from_bundled_program_to_flatbuffer(bundled)
    runtime = portable_lib._load_bundled_program_from_buffer(blob)
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
                            val.bool_val if hasattr(val, "bool_val") else val.double_val)
                    out.append(item)
                sides[side] = out
            runtime.verify_result_with_bundled_expected_output(s.method_name, i)   # raises
            sides["runtime"] = "verified"
            tcs.append(sides)
        suites.append({"method_name": s.method_name, "test_cases": tcs})
    oracle = {"version": back.version, "program_offset": off, "program_size": len(prog),
              "program_sha256": hashlib.sha256(prog).hexdigest(), "test_suites": suites}
    with open(os.path.join(OUT, "bundled.oracle.json"), "w") as f:
        json.dump(oracle, f, indent=1, sort_keys=True)
    np.savez(os.path.join(OUT, "bundled.oracle.npz"), **arrays)


if __name__ == "__main__":
    main()
