"""The command line on the real architectures lowered to Arm Ethos-U, Arm TOSA, OpenVINO,
ExecuTorch's native backend and Apple Core AI (tests/support/backends_zoo.py; skipped
when not written): every command reads each program, ``ops --delegates`` lists the
operator kinds the backend's own reader found in its payloads (TOSA, OpenVINO, native;
none for Core AI, whose MLIR is not read), and ``tree --json`` sums each graph up as that
reader counts it: operators, values, constants and their bytes (TOSA: a tensor's shape x
its DType's size, a shape's rank x 8; OpenVINO: each Constant's data; native: each
constant's TensorMeta, its dims x its dtype's size), or the command stream's, weights'
and scratch sizes Vela wrote (Ethos-U), or the Core AI asset's files and producer.
"""
from __future__ import annotations

import json
import math
import os
from typing import Any, Dict, List, Set, Tuple

import numpy as np
import pytest

import pyflatmodule as pfm

from support import backends_zoo
from support.cli import run_cli
from support.delegates import NATIVE_DTYPES, OV_IR_NAMES, TOSA_ELEMENTS, native_value_names

STEMS = [s for backend in ("ethosu", "tosa", "openvino", "native", "coreai")
         for s in backends_zoo.stems(backend)]
COMMANDS = [("info",), ("verify",), ("tree",), ("dis",), ("ops",), ("ops", "--delegates"),
            ("size",)]


def _oracle(stem: str) -> Dict[str, Any]:
    with open(os.path.join(backends_zoo.folder(stem), stem + ".oracle.json"),
              encoding="utf-8") as f:
        return dict(json.load(f))


def _kinds(stem: str) -> Set[str]:
    """``Backend::kind`` of each operator the backend's reader found, from the oracle."""
    doc = _oracle(stem)
    if stem.startswith(("coreai", "ethosu")):   # a payload whose operators are not read
        return set()
    if stem.startswith("native"):
        return {f"NativeBackend::{n['target']}" for d in doc["native"]["delegates"]
                for n in _method(d)["graph"]["nodes"] if n["op_kind"] == 0}
    if stem.startswith("tosa"):
        return {f"TOSABackend::{o['op']}" for d in doc["tosa"]["delegates"]
                for r in d["regions"] for b in r["blocks"] for o in b["operators"]}
    return {f"OpenvinoBackend::{OV_IR_NAMES.get(o['type'], o['type'])}"
            for d in doc["openvino"]["delegates"] for o in d["operations"]}


@pytest.mark.parametrize("stem", STEMS)
@pytest.mark.parametrize("command", COMMANDS)
def test_the_command_line_reads_it(stem: str, command: Tuple[str, ...]) -> None:
    path = os.path.join(backends_zoo.folder(stem), stem + ".pte")
    run = run_cli(*command, path)
    assert run.returncode == 0, run.stderr
    assert "Traceback" not in run.stdout + run.stderr
    if command[0] != "ops":
        assert run.stdout, run.stderr
        return
    # the kernels ExecuTorch's program reader lists, and with --delegates the kinds the
    # backend's reader found; a program calling no kernel says so: how many kinds its
    # delegates run, or, where their payloads' operators are not read, their backends
    doc = _oracle(stem)
    kernels = {f"{name}.{overload}" if overload else name
               for plan in doc["program"]["execution_plan"]
               for name, overload in plan["operators"]}
    kinds = _kinds(stem) if "--delegates" in command else set()
    assert set(run.stdout.split()) == kernels | kinds
    if not kernels and not kinds:
        assert "calls no kernel operator" in run.stderr, run.stderr
        backends = sorted({d["id"] for plan in doc["program"]["execution_plan"]
                           for d in plan["delegates"]})
        n = len(_kinds(stem))
        assert (f"run {n} kind" if n else f"({', '.join(backends)}) run it all") \
            in run.stderr, run.stderr


@pytest.mark.parametrize("stem", STEMS)
def test_the_methods_are_what_the_runtime_loads(stem: str) -> None:
    """Each method's inputs and outputs (kind, dtype, sizes) as ExecuTorch's C++ runtime
    gives them for the program (its ScalarType numbers are native_graph.fbs's)."""
    runtime = _oracle(stem)["runtime"]
    assert "error" not in runtime, runtime
    with pfm.load(os.path.join(backends_zoo.folder(stem), stem + ".pte")) as p:
        assert isinstance(p, pfm.Program)
        assert sorted(p.methods) == sorted(runtime["method_names"])
        for name, meta in runtime["methods"].items():
            m = p.methods[name]
            assert m.input_meta + m.output_meta == [
                ("Tensor", NATIVE_DTYPES[w["dtype"]], tuple(w["sizes"]))
                for w in meta["inputs"] + meta["outputs"]]


def _method(delegate: Dict[str, Any]) -> Dict[str, Any]:
    """The one method of a native delegate's payload, as ExecuTorch reads it."""
    (method,) = delegate["program"]["methods"]
    return dict(method)


def _native(delegate: Dict[str, Any]) -> Dict[str, Any]:
    """What ``tree --json`` sums a native delegate's graph up as, from the oracle."""
    method = _method(delegate)
    names = native_value_names(method)
    constants = method["constants"] or []
    return {"nodes": sum(n["op_kind"] == 0 for n in method["graph"]["nodes"]),
            "values": len(names),
            "inputs": [names.index(n) for n in method["graph"]["inputs"]],
            "outputs": [names.index(n) for n in method["graph"]["outputs"]],
            "constants": len(constants),
            "constant_bytes": sum(np.dtype(NATIVE_DTYPES[c["meta"]["dtype"]]).itemsize
                                  * math.prod(s["max"] for s in c["meta"]["sizes"])
                                  for c in constants)}


def _coreai(doc: Dict[str, Any], delegate: Dict[str, Any]) -> Dict[str, Any]:
    """The description ``tree --json`` gives a Core AI delegate (up to its producer), from
    the oracle: each inline file's name and size."""
    m = delegate["manifest"]
    sizes = doc["named_data"]
    files = ", ".join(f"{n} {sizes['coreai/' + m['hash'] + '/' + n]:,} B" for n in m["files"])
    return {"description": f"inline: {files}"}


def _summaries(stem: str) -> List[Dict[str, Any]]:
    """What the oracle says ``tree --json`` sums each delegate's graph up as."""
    doc = _oracle(stem)
    folder = backends_zoo.folder(stem)
    with np.load(os.path.join(folder, stem + ".oracle.npz")) as z:
        sizes = {k: z[k].nbytes for k in z.files}
    if stem.startswith("native"):
        return [_native(d) for d in doc["native"]["delegates"]]
    if stem.startswith("coreai"):
        return [_coreai(doc["coreai"], d) for d in doc["coreai"]["delegates"]]
    if stem.startswith("ethosu"):
        return [{"description": f"command stream {d['cmd_data_size']:,} bytes, weights "
                 f"{d['weight_data_size']:,} bytes, scratch {d['scratch_size']:,} bytes"}
                for d in doc["ethosu"]["delegates"]]
    if stem.startswith("openvino"):
        return [{"nodes": len(d["operations"]),
                 "constants": sum(o["type"] == "Constant" for o in d["operations"]),
                 "constant_bytes": sum(sizes[o["data"]] for o in d["operations"]
                                       if o["type"] == "Constant" and o["data"])}
                for d in doc["openvino"]["delegates"]]
    out = []
    for d in doc["tosa"]["delegates"]:
        blocks = [b for r in d["regions"] for b in r["blocks"]]
        held = [t for b in blocks for t in b["tensors"] if sizes[t["data"]]]
        shapes = [x for b in blocks for x in b["shapes"]]
        out.append({"nodes": sum(len(b["operators"]) for b in blocks),
                    "values": sum(len(b["tensors"]) + len(b["shapes"]) for b in blocks),
                    "constants": len(held) + len(shapes),
                    "constant_bytes": sum(TOSA_ELEMENTS[t["type"]][0] * math.prod(t["shape"])
                                          for t in held) + sum(8 * x["rank"] for x in shapes)})
    return out


@pytest.mark.parametrize("stem", STEMS)
def test_the_tree_sums_each_graph_up(stem: str) -> None:
    want = _summaries(stem)
    run = run_cli("tree", "--json", os.path.join(backends_zoo.folder(stem), stem + ".pte"))
    assert run.returncode == 0, run.stderr
    got = []
    for method in json.loads(run.stdout)["files"][0]["root"]["children"]:
        for d in method.get("children", []):
            if d["kind"] == "delegate":
                summary = d["children"][0]
                got.append({k: (summary[k] if k != "description"
                                else summary[k].split("; ")[0]) for k in want[0]})
    assert got == want
