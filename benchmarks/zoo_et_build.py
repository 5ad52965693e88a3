#!/usr/bin/env python3
"""Write the ExecuTorch zoo: real architectures exported by ExecuTorch 1.5.1 with torch 2.13.

    python benchmarks/zoo_et_build.py OUT [NAME ...]

For each model of :data:`zoo.ET_MODELS` (random weights, never downloaded; the builders
are the PTMF zoo's) it writes, in the forms listed there, ``<model>.portable.pte``
(``to_edge(...).to_executorch()``) and ``<model>.<form>.pte``
(``to_edge_transform_and_lower`` with the XNNPACK, Vulkan or Core ML partitioner;
``coreml_partial``: Core ML's, the residual adds left out), the
exported module's own tensors in ``<model>.weights.npz`` (parameters and buffers by name,
as row-major bytes), and ``zoo_et.json``: per file, how it was written and what
ExecuTorch's runtime says of it (method names; each method's input and output dtypes and
sizes), read in a child process; for a Vulkan or Core ML program also what ExecuTorch's
program reader says of each method (its delegates, the kernels left beside them) and
what ExecuTorch's and coremltools' own code read in its payloads
(benchmarks/zoo_et_delegates.py). The runtime here has neither backend: it reads their
programs' method metadata, and runs none. An export that fails is recorded with its
error. Needs torch, torchvision, timm and executorch (and coremltools, which it installs).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import warnings
from typing import Any, Dict, List

import numpy as np
import torch
import zoo_et_delegates
from zoo_build import BUILDERS

from zoo import ET_BACKENDS, ET_FORMS, ET_INPUTS, ET_MODELS

warnings.filterwarnings("ignore")

_RUNTIME = r"""
import json, sys
from executorch.runtime import Runtime
program = Runtime.get().load_program(sys.argv[1])
out = {"method_names": sorted(program.method_names), "methods": {}}
for name in program.method_names:
    meta = program.metadata(name)
    def specs(n, get):
        return [{"dtype": int(get(i).dtype()), "sizes": list(get(i).sizes())} for i in range(n)]
    out["methods"][name] = {"inputs": specs(meta.num_inputs(), meta.input_tensor_meta),
                            "outputs": specs(meta.num_outputs(), meta.output_tensor_meta)}
print(json.dumps(out))
"""


def _runtime(path: str) -> Dict[str, Any]:
    r = subprocess.run([sys.executable, "-c", _RUNTIME, path], capture_output=True, text=True,
                       timeout=600)
    if r.returncode != 0:
        lines = r.stderr.strip().splitlines()
        return {"error": f"exit {r.returncode}: {lines[-1] if lines else ''}"}
    doc: Dict[str, Any] = json.loads(r.stdout.strip().splitlines()[-1])
    return doc


def _partitioner(form: str) -> Any:
    if form == "xnnpack":
        from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
        return XnnpackPartitioner()
    if form == "vulkan":
        from executorch.backends.vulkan.partitioner.vulkan_partitioner import VulkanPartitioner
        return VulkanPartitioner()
    from executorch.backends.apple.coreml.partition import CoreMLPartitioner
    # (the partitioner matches an operator by its lower-cased name)
    skip = ["aten.add.tensor"] if form == "coreml_partial" else None
    return CoreMLPartitioner(skip_ops_for_coreml_delegation=skip)


def _write(name: str, form: str, exported: Any, path: str) -> None:
    from executorch.exir import to_edge, to_edge_transform_and_lower
    if form != "portable":
        edge = to_edge_transform_and_lower(exported, partitioner=[_partitioner(form)])
    else:
        edge = to_edge(exported)
    with open(path, "wb") as f:
        edge.to_executorch().write_to_file(f)


def build(out: str, names: List[str]) -> Dict[str, Any]:
    """Writes the named models' files into `out`; returns the manifest."""
    files = []
    for name in names:
        torch.manual_seed(0)
        model = BUILDERS[name]().eval()
        example = (tuple(torch.randint(0, 100, shape) for shape in ET_INPUTS[name])
                   if name in ET_INPUTS else (torch.randn(1, 3, 224, 224),))
        state = {k: v.detach().contiguous() for k, v in model.state_dict().items()}
        np.savez(os.path.join(out, name + ".weights.npz"),
                 **{k: np.frombuffer(v.numpy().tobytes(), np.uint8) for k, v in state.items()})
        weights = {k: {"dtype": str(v.dtype).replace("torch.", ""), "shape": list(v.shape)}
                   for k, v in state.items()}
        try:
            with torch.no_grad():
                exported = torch.export.export(model, example)
        except Exception as e:   # recorded, the test says which exports may fail
            for form in ET_MODELS[name]:
                files.append({"model": name, "form": form, "error": _first_line(e)})
            continue
        for form in ET_MODELS[name]:
            path = os.path.join(out, name + ET_FORMS[form])
            start = time.perf_counter()
            try:
                _write(name, form, exported, path)
            except Exception as e:
                files.append({"model": name, "form": form, "error": _first_line(e)})
                continue
            entry = {"model": name, "form": form, "file": os.path.basename(path),
                     "seconds": round(time.perf_counter() - start, 1),
                     "weights": weights, "runtime": _runtime(path)}
            if form != "xnnpack" and form in ET_BACKENDS:
                entry.update(_delegates(form, path))
            files.append(entry)
    manifest = {"torch": torch.__version__, "files": files}
    with open(os.path.join(out, "zoo_et.json"), "w", encoding="utf-8") as f:
        json.dump(manifest, f, indent=1)
    return manifest


def _delegates(form: str, path: str) -> Dict[str, Any]:
    """What ExecuTorch's program reader says of the methods, and ExecuTorch's (and
    coremltools') reading of the payloads, under ``program`` and ``payloads``; an error
    recorded in their place."""
    start = time.perf_counter()
    try:
        read = zoo_et_delegates.vulkan if form == "vulkan" else zoo_et_delegates.coreml
        return {"program": zoo_et_delegates.program(path), "payloads": read(path),
                "oracle_seconds": round(time.perf_counter() - start, 1)}
    except Exception as e:   # recorded: the test names it
        return {"program": {}, "payloads": {"error": _first_line(e)}}


def _first_line(e: Exception) -> str:
    text = f"{type(e).__name__}: {e}"
    return text.splitlines()[0][:300]


def main(argv: List[str]) -> int:
    """Command line (see the module docstring)."""
    if len(argv) < 2:
        print(__doc__.splitlines()[2].strip(), file=sys.stderr)
        return 2
    os.makedirs(argv[1], exist_ok=True)
    build(argv[1], argv[2:] or list(ET_MODELS))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
