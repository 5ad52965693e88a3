#!/usr/bin/env python3
"""Regenerate tests/data/releases/: a file from every ExecuTorch release, with its answers.

    python tests/data/make_releases.py [--only 0.6.0,1.0.1] [--venvs /work/venvs] [--make-env]

Each release writes its own files from its own virtual environment,
``VENVS/et-<release>``, which this script runs itself in (``--write <release> <folder>``),
and makes with ``--make-env`` (:func:`make_env`, from :data:`ENVS`): ``python3.11 -m
venv``; the release's ExecuTorch wheel and the torch its wheel metadata asks for, both
``pip install --no-deps``; torchao where the release's XNNPACK partitioner imports it
(0.7.0 on); and the small pure-Python packages they import (filelock, sympy, mpmath,
networkx, jinja2, fsspec, typing-extensions, numpy, flatbuffers, pyyaml, ruamel.yaml,
packaging, tabulate). PyPI's torch for Linux is a CUDA build that loads the CUDA
libraries when it is imported, even to run on the CPU; rather than each environment's
own copy, they are installed once per CUDA line into ``VENVS/nvidia-<line>`` (``pip
install --target``, the pins of :data:`CUDA`, from the torch wheels' ``Requires-Dist``)
and each environment names its folder in a ``.pth`` file (torch looks for them on
``sys.path``). torch 2.13 has a CPU build (``TORCH_CPU``), which 1.4.1's environment
takes instead. Older releases' exporters run ``flatc``: ``FLATC_EXECUTABLE`` is set to
the environment's own.

For every release it writes, in ``tests/data/releases/<release>/``:

- ``mlp.pte``: a two-layer perceptron (linear, relu, linear, mul, add) exported with
  ``to_edge(...).to_executorch()``;
- ``mlp_xnnpack.pte``: the same lowered to XNNPACK (``to_backend(XnnpackPartitioner())``);
- from 0.6.0, ``mlp_external.pte`` and its data file ``mlp_external.ptd``: the same with
  ``ExecutorchBackendConfig(external_constants=True)``, the data file written by the
  release's ``write_tensor_data_to_file``;
- ``answers.json`` + ``answers.npz``: what the release says of them. ``writer``: the
  executorch and torch versions; per file ``emitted``: the program as the release
  emitted it, before serializing (method names; forward's inputs' and outputs' scalar
  types and sizes); ``runtime``: the release's own runtime
  (``executorch.extension.pybindings.portable_lib._load_for_executorch``, the data file
  given where the release's bindings take one) on the file: method names, each input's
  and output's scalar type (ExecuTorch's number) and sizes from ``method_meta``, and
  ``forward`` run on :func:`_input` (the outputs in the npz as ``<file>/out<i>``), or
  ``{"error": ...}`` where the runtime refuses or crashes (each file is asked in a
  process of its own; 0.6.0's bindings take no data file and crash on a program whose
  constants are in one); ``weights``: the exported module's own
  tensors by name (the npz's ``<file>/weight/<name>``); for a data file ``data``: the
  writer's view of it, each external tensor by key (its scalar type, sizes, bytes, from
  the program the release emitted, the bytes in the npz as ``<file>/data/<key>``).
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from typing import Any, Dict, List

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "releases")
#: A CPU build of torch 2.13 (PyPI's Linux wheels are CUDA builds).
TORCH_CPU = "/opt/wheels/torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl"
#: Every release written, oldest first -> the torch its wheel asks for, numpy, torchao
#: (None: the release does not use it) and the CUDA libraries its torch loads (None: a
#: CPU build).
ENVS = {
    "0.4.0": ("torch==2.5.0", "numpy<2", None, "cu126"),
    "0.5.0": ("torch==2.6.0", "numpy==2.0.0", None, "cu126"),
    "0.6.0": ("torch==2.7.0", "numpy>=2,<2.3", None, "cu126"),
    "0.7.0": ("torch==2.8.0", "numpy>=2,<2.3", "torchao==0.12.0", "cu128"),
    "1.0.1": ("torch==2.9.1", "numpy>=2,<2.3", "torchao==0.14.0", "cu128"),
    "1.1.0": ("torch==2.10.0", "numpy>=2,<2.4", "torchao==0.15.0", "cu128"),
    "1.2.0": ("torch==2.11.0", "numpy>=2,<2.4", "torchao==0.17.0", "cu130"),
    "1.3.1": ("torch==2.12.0", "numpy>=2,<2.4", "torchao==0.17.0", "cu130"),
    "1.4.1": (TORCH_CPU, "numpy>=2,<2.4", "torchao==0.18.0", None),
}
#: The CUDA libraries of each line, as the torch wheels pin them (torch 2.7.0's for
#: torch 2.5 to 2.7, 2.9.1's for 2.8 to 2.10, 2.12.0's for 2.11 and 2.12): CUDA keeps
#: its libraries' sonames within a major version, so one line loads for several torches.
CUDA = {
    "cu126": ["nvidia-cuda-nvrtc-cu12==12.6.77", "nvidia-cuda-runtime-cu12==12.6.77",
              "nvidia-cuda-cupti-cu12==12.6.80", "nvidia-cudnn-cu12==9.5.1.17",
              "nvidia-cublas-cu12==12.6.4.1", "nvidia-cufft-cu12==11.3.0.4",
              "nvidia-curand-cu12==10.3.7.77", "nvidia-cusolver-cu12==11.7.1.2",
              "nvidia-cusparse-cu12==12.5.4.2", "nvidia-cusparselt-cu12==0.6.3",
              "nvidia-nccl-cu12==2.26.2", "nvidia-nvtx-cu12==12.6.77",
              "nvidia-nvjitlink-cu12==12.6.85", "nvidia-cufile-cu12==1.11.1.6"],
    "cu128": ["nvidia-cuda-nvrtc-cu12==12.8.93", "nvidia-cuda-runtime-cu12==12.8.90",
              "nvidia-cuda-cupti-cu12==12.8.90", "nvidia-cudnn-cu12==9.10.2.21",
              "nvidia-cublas-cu12==12.8.4.1", "nvidia-cufft-cu12==11.3.3.83",
              "nvidia-curand-cu12==10.3.9.90", "nvidia-cusolver-cu12==11.7.3.90",
              "nvidia-cusparse-cu12==12.5.8.93", "nvidia-cusparselt-cu12==0.7.1",
              "nvidia-nccl-cu12==2.27.5", "nvidia-nvshmem-cu12==3.3.20",
              "nvidia-nvtx-cu12==12.8.90", "nvidia-nvjitlink-cu12==12.8.93",
              "nvidia-cufile-cu12==1.13.1.3"],
    "cu130": ["cuda-toolkit[cudart,cufft,cufile,cupti,curand,cusolver,cusparse,nvjitlink,"
              "nvrtc,nvtx]==13.0.2", "nvidia-cublas>=13.1.0.3,<=13.1.1.3",
              "nvidia-cudnn-cu13==9.20.0.48", "nvidia-cusparselt-cu13==0.8.1",
              "nvidia-nccl-cu13==2.29.7", "nvidia-nvshmem-cu13==3.4.5"],
}
#: What every environment imports besides torch and executorch.
SMALL = ["filelock", "sympy", "mpmath==1.3.0", "networkx", "jinja2", "fsspec",
         "typing-extensions", "flatbuffers", "pyyaml", "ruamel.yaml", "packaging",
         "tabulate"]
#: The first release whose writer puts constants in a data file.
EXTERNAL_FIRST = (0, 6, 0)
TIMEOUT = 1200.0


def _key(release: str) -> tuple:
    return tuple(int(x) for x in release.split("."))


# ---------------------------------------------------------------- the environments

def make_env(release: str, venvs: str) -> None:
    """Makes ``venvs/et-<release>`` as the module's docstring says (and the CUDA line it
    names, once)."""
    torch, numpy, torchao, cuda = ENVS[release]
    base = os.path.join(venvs, f"et-{release}")
    pip = [os.path.join(base, "bin", "python"), "-m", "pip", "install", "-q"]
    subprocess.run(["python3.11", "-m", "venv", "--clear", base], check=True)
    subprocess.run(pip + ["--no-deps", torch, f"executorch=={release}"]
                   + ([torchao] if torchao else []), check=True)
    subprocess.run(pip + SMALL + [numpy], check=True)
    if cuda:
        libs = os.path.join(venvs, f"nvidia-{cuda}")
        if not os.path.isdir(libs):   # cu130's toolkit names its libraries as extras
            subprocess.run(pip + ["--target", libs] + (["--no-deps"] if cuda != "cu130"
                                                       else []) + CUDA[cuda], check=True)
        site = subprocess.run([os.path.join(base, "bin", "python"), "-c",
                               "import sysconfig; print(sysconfig.get_path('purelib'))"],
                              check=True, capture_output=True, text=True).stdout.strip()
        with open(os.path.join(site, f"nvidia-{cuda}.pth"), "w", encoding="utf-8") as f:
            f.write(libs + "\n")


# ---------------------------------------------------------------- the writer (child)

def _input() -> Any:
    import torch
    return torch.linspace(-1.0, 1.0, 8, dtype=torch.float32).reshape(2, 4)


def _model() -> Any:
    import torch

    class MLP(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.fc1 = torch.nn.Linear(4, 8)
            self.fc2 = torch.nn.Linear(8, 3)

        def forward(self, x: Any) -> Any:
            return self.fc2(torch.relu(self.fc1(x))) * 0.5 + 1.0

    torch.manual_seed(0)
    return MLP().eval()


def _runtime(pte: str, ptd: str, npz: Dict[str, Any], name: str) -> Dict[str, Any]:
    """The release's runtime on a file, in a child process (a runtime may crash on what
    it is given): :func:`ask`'s answer, its outputs moved into ``npz`` (``<name>/out<i>``)."""
    import numpy as np
    with tempfile.TemporaryDirectory() as tmp:
        at = os.path.join(tmp, "answer")
        proc = subprocess.run([sys.executable, os.path.abspath(__file__), "--ask", pte,
                               ptd, at], timeout=TIMEOUT)
        if proc.returncode:
            return {"error": f"the runtime's process ended with status {proc.returncode}"}
        with open(at + ".json", encoding="utf-8") as f:
            out = dict(json.load(f))
        with np.load(at + ".npz") as outputs:
            npz.update({f"{name}/{k}": outputs[k] for k in outputs.files})
    return out


def ask(pte: str, ptd: str, at: str) -> None:
    """The release's runtime on a file: its methods, their metadata, forward's outputs
    on :func:`_input` (run only with the data the program needs), into ``at`` + .json and
    .npz."""
    import numpy as np
    from executorch.extension.pybindings import portable_lib as pl
    out: Dict[str, Any] = {}
    npz: Dict[str, Any] = {}
    try:
        out.update(_ask(pl, pte, ptd, npz))
    except Exception as e:  # noqa: BLE001 - the runtime's refusal is the answer
        out = {"error": f"{type(e).__name__}: {e}"}
    with open(at + ".json", "w", encoding="utf-8") as f:
        json.dump(out, f)
    np.savez(at + ".npz", **npz)


def _ask(pl: Any, pte: str, ptd: str, npz: Dict[str, Any]) -> Dict[str, Any]:
    """:func:`ask`'s answer; the runtime's exceptions go up."""
    out: Dict[str, Any] = {}
    try:
        m = pl._load_for_executorch(pte, data_path=ptd) if ptd else \
            pl._load_for_executorch(pte)
    except TypeError:   # bindings that take no data file: the program alone
        out["data_file"] = "not taken by this release's _load_for_executorch"
        m = pl._load_for_executorch(pte)
    out["methods"] = sorted(m.method_names())
    meta = m.method_meta("forward")

    def tensor(t: Any) -> Dict[str, Any]:
        return {"scalar_type": int(t.dtype()), "sizes": list(t.sizes()),
                "nbytes": int(t.nbytes())}
    out["inputs"] = [tensor(meta.input_tensor_meta(i)) for i in range(meta.num_inputs())]
    out["outputs"] = [tensor(meta.output_tensor_meta(i)) for i in range(meta.num_outputs())]
    if "data_file" in out:
        return out
    try:
        res = m.forward((_input(),))
    except Exception as e:  # noqa: BLE001
        out["run"] = {"error": f"{type(e).__name__}: {e}"}
        return out
    out["run"] = {"outputs": len(res)}
    for i, t in enumerate(res):
        npz[f"out{i}"] = t.detach().numpy().copy()
    return out


def _external(manager: Any, ep: Any, npz: Dict[str, Any], name: str) -> Dict[str, Any]:
    """The writer's view of the data file: each external tensor of the program it
    emitted, with the exported module's bytes for it."""
    from executorch.exir.schema import Tensor, TensorDataLocation
    state = {k: v for k, v in ep.state_dict.items()}
    state.update(getattr(ep, "constants", {}) or {})
    out: Dict[str, Any] = {}
    for plan in manager.executorch_program.execution_plan:
        for v in plan.values:
            t = v.val
            info = getattr(t, "extra_tensor_info", None) if isinstance(t, Tensor) else None
            if info is None or info.location != TensorDataLocation.EXTERNAL:
                continue
            key = info.fully_qualified_name
            data = state[key].detach().contiguous().numpy()
            out[key] = {"scalar_type": int(t.scalar_type), "sizes": list(t.sizes),
                        "dim_order": list(t.dim_order), "nbytes": int(data.nbytes)}
            npz[f"{name}/data/{key}"] = data.copy()
    return out


def _emitted(manager: Any) -> Dict[str, Any]:
    """The writer's own program (before serializing): method names, and forward's
    inputs' and outputs' scalar types and sizes."""
    from executorch.exir.schema import Tensor
    plans = manager.executorch_program.execution_plan
    out: Dict[str, Any] = {"methods": sorted(p.name for p in plans)}
    plan = next(p for p in plans if p.name == "forward")
    for role in ("inputs", "outputs"):
        values = [plan.values[i].val for i in getattr(plan, role)]
        out[role] = [{"scalar_type": int(t.scalar_type), "sizes": list(t.sizes)}
                     for t in values if isinstance(t, Tensor)]
    return out


def write(release: str, folder: str) -> None:
    """Writes the release's files and answers into ``folder`` (run in its environment)."""
    import executorch
    import numpy as np
    import torch
    from executorch.exir import ExecutorchBackendConfig, to_edge

    os.makedirs(folder, exist_ok=True)
    version = getattr(executorch, "__version__", None)
    if version is None:
        from importlib.metadata import version as dist_version
        version = dist_version("executorch")
    answers: Dict[str, Any] = {"writer": {"executorch": version, "torch": torch.__version__},
                               "input": "torch.linspace(-1, 1, 8).reshape(2, 4), float32",
                               "files": {}}
    npz: Dict[str, Any] = {}
    x = _input()
    npz["input"] = x.numpy().copy()
    model = _model()
    weights = {k: v.detach().numpy().copy() for k, v in model.state_dict().items()}
    ep = torch.export.export(model, (x,))
    builds = {"mlp.pte": lambda: to_edge(ep).to_executorch()}

    def xnnpack() -> Any:
        from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
        return to_edge(ep).to_backend(XnnpackPartitioner()).to_executorch()
    builds["mlp_xnnpack.pte"] = xnnpack
    if _key(release) >= EXTERNAL_FIRST:
        builds["mlp_external.pte"] = lambda: to_edge(ep).to_executorch(
            ExecutorchBackendConfig(external_constants=True))
    for name, build in builds.items():
        entry: Dict[str, Any] = {}
        try:
            manager = build()
        except Exception as e:  # noqa: BLE001 - a release that cannot write it
            answers["files"][name] = {"error": f"{type(e).__name__}: {e}"}
            continue
        pte = os.path.join(folder, name)
        with open(pte, "wb") as f:
            f.write(manager.buffer)
        ptd = ""
        if name == "mlp_external.pte":
            with tempfile.TemporaryDirectory() as tmp:
                manager.write_tensor_data_to_file(tmp)
                written = sorted(os.listdir(tmp))
                assert len(written) == 1, written
                ptd = os.path.join(folder, "mlp_external.ptd")
                shutil.copyfile(os.path.join(tmp, written[0]), ptd)
            answers["files"]["mlp_external.ptd"] = {
                "written_as": written[0],
                "data": _external(manager, manager.exported_program(), npz,
                                  "mlp_external.ptd")}
        entry["emitted"] = _emitted(manager)
        entry["weights"] = sorted(weights)
        for k, w in weights.items():
            npz[f"{name}/weight/{k}"] = w
        entry["runtime"] = _runtime(pte, ptd, npz, name)
        answers["files"][name] = entry
    with open(os.path.join(folder, "answers.json"), "w", encoding="utf-8") as f:
        json.dump(answers, f, indent=1, sort_keys=True)
        f.write("\n")
    np.savez(os.path.join(folder, "answers.npz"), **npz)


# ------------------------------------------------------------------ the driver (parent)

def main(argv: List[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", default="", help="releases to write, comma separated")
    ap.add_argument("--venvs", default="/work/venvs", help="where et-<release> venvs are")
    ap.add_argument("--make-env", action="store_true",
                    help="make each release's environment first (VENVS/et-<release>)")
    ap.add_argument("--write", nargs=2, metavar=("RELEASE", "FOLDER"), help=argparse.SUPPRESS)
    ap.add_argument("--ask", nargs=3, metavar=("PTE", "PTD", "AT"), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.ask:
        ask(*args.ask)
        return 0
    if args.write:
        write(*args.write)
        return 0
    releases = [r for r in ENVS if not args.only or r in args.only.split(",")]
    failed = []
    for release in releases:
        if args.make_env:
            make_env(release, args.venvs)
        python = os.path.join(args.venvs, f"et-{release}", "bin", "python")
        if not os.path.exists(python):
            print(f"{release}: no environment at {python}", file=sys.stderr)
            failed.append(release)
            continue
        folder = os.path.join(OUT, release)
        shutil.rmtree(folder, ignore_errors=True)
        env = dict(os.environ, FLATC_EXECUTABLE=os.path.join(os.path.dirname(python), "flatc"))
        rc = subprocess.run([python, os.path.abspath(__file__), "--write", release, folder],
                            env=env, timeout=TIMEOUT, cwd=tempfile.gettempdir()).returncode
        print(f"{release}: {'written' if rc == 0 else f'failed ({rc})'}")
        if rc:
            failed.append(release)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
