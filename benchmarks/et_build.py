"""Writes the ExecuTorch benchmark programs: ``python et_build.py OUT_DIR SPEC_JSON...``.

Run by ``benchmodels.ensure`` in a subprocess (torch and ExecuTorch are imported only
here). Each SPEC_JSON is ``{"name", "kind", "params", "file"}``; the program is exported
with ``torch.export.export`` and lowered with ``to_edge(...).to_executorch()`` (portable
operators), written to a temporary name and renamed into place, with a ``<file>.json``
beside it recording the writer, the counts and whether the runtime loads it. Kinds:

- ``graph``: a chain of ``layers`` small Linear layers (about 9 values each);
- ``constants``: a chain of ``layers`` Linear(``width``, ``width``) layers, weights
  filled in place (``torch.empty`` + ``uniform_``: no second copy while building);
- ``external``: the same as ``constants`` with ``external_constants=True``: the weights
  go to a data file written beside the program as ``<file>.ptd``;
- ``xnnpack``: the same chain lowered to XNNPACK (``to_edge_transform_and_lower`` with
  ``XnnpackPartitioner``): one delegate, its weights in the program's named data;
- ``plans``: the ``graph`` program's method ``plans`` times (``forward``, ``forward_1``,
  ...), written by ExecuTorch's own serializer (``deserialize_pte_binary`` of the
  exported program, its execution plan repeated, ``serialize_pte_binary``): the values of
  ten times the layers where exporting a chain that long takes hours (``to_edge``'s
  passes grow faster than the graph).
"""

import dataclasses
import importlib.metadata
import json
import os
import sys
import tempfile
import time
import warnings
from typing import Any, Dict, List, Tuple

import torch
from torch import nn

# Beside build_models.py, whose Chain the large Linear models share (the test suite runs
# its children with PYTHONSAFEPATH=1: the script's folder is not on the path).
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from build_models import Chain  # noqa: E402

warnings.filterwarnings("ignore")


def _linear(width: int, seed: int) -> nn.Linear:
    """A Linear layer whose parameters are filled in place, with no initialisation pass
    and no temporary of the weight's size."""
    layer = nn.Linear(width, width, device="meta")
    g = torch.Generator().manual_seed(seed)
    bound = width ** -0.5
    with torch.no_grad():
        layer.weight = nn.Parameter(torch.empty(width, width).uniform_(-bound, bound,
                                                                        generator=g))
        layer.bias = nn.Parameter(torch.empty(width).uniform_(-bound, bound, generator=g))
    return layer


def build(params: Dict[str, Any]) -> Chain:
    width = params["width"]
    return Chain([_linear(width, i) for i in range(params["layers"])]).eval()


def write(spec: Dict[str, Any], path: str) -> Dict[str, Any]:
    """Exports, lowers and writes one program (and its data file); returns its facts."""
    from executorch.exir import ExecutorchBackendConfig, to_edge
    kind, params = spec["kind"], spec["params"]
    module = build(params)
    example = (torch.zeros(1, params["width"]),)
    exported = torch.export.export(module, example)
    if kind == "xnnpack":
        from executorch.backends.xnnpack.partition.xnnpack_partitioner import (
            XnnpackPartitioner,
        )
        from executorch.exir import to_edge_transform_and_lower
        edge = to_edge_transform_and_lower(exported, partitioner=[XnnpackPartitioner()])
        prog = edge.to_executorch()
        writer = ("to_edge_transform_and_lower(..., partitioner=[XnnpackPartitioner()])"
                  ".to_executorch()")
    elif kind == "external":
        edge = to_edge(exported)
        prog = edge.to_executorch(ExecutorchBackendConfig(external_constants=True))
        writer = ("to_edge(...).to_executorch(ExecutorchBackendConfig(external_constants="
                  "True)) + write_tensor_data_to_file")
    else:
        edge = to_edge(exported)
        prog = edge.to_executorch()
        writer = "to_edge(...).to_executorch()"
    del edge, exported
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "wb") as f:
        if kind == "plans":
            repeated, buffer = _repeat_plans(prog.buffer, params["plans"])
            f.write(buffer)
            writer += (f", its execution plan written {params['plans']} times by "
                       "exir's serialize_pte_binary")
        else:
            prog.write_to_file(f)
    if kind == "external":
        with tempfile.TemporaryDirectory(dir=os.path.dirname(path)) as d:
            prog.write_tensor_data_to_file(d)
            written = os.listdir(d)
            assert len(written) == 1, written
            os.replace(os.path.join(d, written[0]), path[:-4] + ".ptd")
    written = (repeated if kind == "plans" else prog.executorch_program).execution_plan
    state = module.state_dict()
    facts = {"writer": writer, "values": sum(len(p.values) for p in written),
             "layers": params["layers"],
             "instructions": sum(len(c.instructions) for p in written for c in p.chains),
             "tensors": len(state),
             "tensor_bytes": sum(t.numel() * t.element_size() for t in state.values())}
    del prog, module, state
    os.replace(tmp, path)
    return facts


def _repeat_plans(exported: bytes, times: int) -> Tuple[Any, bytes]:
    """The exported program with its execution plan ``times`` times (the copies named
    ``<name>_<k>``, sharing the constants): exir's Program and the file ExecuTorch's own
    serializer writes of it."""
    from executorch.exir._serialize._program import (
        deserialize_pte_binary,
        serialize_pte_binary,
    )
    pte = deserialize_pte_binary(exported)
    plan = pte.program.execution_plan[0]
    copies = [plan] + [dataclasses.replace(plan, name=f"{plan.name}_{k}")
                       for k in range(1, times)]
    program = dataclasses.replace(pte.program, execution_plan=copies)
    return program, bytes(serialize_pte_binary(dataclasses.replace(pte, program=program)))


def _runtime(path: str) -> Dict[str, Any]:
    """What ExecuTorch's runtime makes of the program: its methods, or the error."""
    try:
        from executorch.runtime import Runtime
        data = path[:-4] + ".ptd"
        program = Runtime.get().load_program(
            path, data_path=data if os.path.exists(data) else None)
        names = sorted(program.method_names)
        for name in names:
            program.load_method(name)
        return {"runtime": None, "methods": names}
    except Exception as e:  # noqa: BLE001  (recorded as the reason to skip)
        return {"runtime": f"{type(e).__name__}: {str(e).splitlines()[0][:200]}"}


def main(out_dir: str, specs: List[str]) -> None:
    for spec in map(json.loads, specs):
        t0 = time.time()
        path = os.path.join(out_dir, spec["file"])
        meta: Dict[str, Any] = {"name": spec["name"], "kind": spec["kind"],
                                "params": spec["params"], "torch": torch.__version__,
                                "executorch": importlib.metadata.version("executorch")}
        meta.update(write(spec, path))
        meta.update(_runtime(path))
        meta["build_seconds"] = round(time.time() - t0, 2)
        with open(path + ".json.tmp", "w", encoding="utf-8") as f:
            json.dump(meta, f, indent=1)
        os.replace(path + ".json.tmp", path + ".json")
        print(f"built {spec['name']}: {os.path.getsize(path)} bytes, {meta['values']} values "
              f"in {meta['build_seconds']} s", flush=True)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2:])
