"""The benchmark models: specifications, the on-disk cache, building on demand.

Models are written by torch (``build_models.py``, in a subprocess) into
``$PFM_BENCH_CACHE`` (default ``~/.cache/pyflatmodule-bench``), outside git; ExecuTorch
programs (``ET_SPECS``) likewise by ExecuTorch (``et_build.py``), and the zoo's real
architectures (``ZOO_SPECS``) by torch with torchvision and timm (``zoo_bench_build.py``,
which runs ``zoo_build.py``). A file's name carries a hash of its specification and of
its builder, so changing either rebuilds it. Each model has a full size (timed runs) and
a small size (the untimed run inside ``pytest``, which must stay quick); of the zoo, one
model is in the untimed run (the others have no small size).
"""
from __future__ import annotations

import fcntl
import hashlib
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, Dict, Iterable, List, NamedTuple, Optional, Tuple

import numpy as np

import zoo

HERE = os.path.dirname(os.path.abspath(__file__))
BUILDER = os.path.join(HERE, "build_models.py")
#: PFM_BENCH_NO_TORCH=1 runs the suites as if torch were not installed.
HAS_TORCH = (importlib.util.find_spec("torch") is not None
             and not os.environ.get("PFM_BENCH_NO_TORCH"))
#: The ExecuTorch programs need executorch (with torch) to be written and compared.
HAS_EXECUTORCH = HAS_TORCH and importlib.util.find_spec("executorch") is not None

MiB = 1 << 20

#: name -> (kind, full-size params, small params, write .safetensors too)
SPECS: Dict[str, Any] = {
    # 28 layers each, so the two differ in tensor bytes only (same ivalues, same tables).
    "linear_256m": ("linear", {"layers": 28, "width": 1548}, {"layers": 28, "width": 48}, True),
    "linear_1g8": ("linear", {"layers": 28, "width": 4160}, {"layers": 28, "width": 96}, False),
    # 2000 small Linear layers: about 6000 ivalues; then 10x and 100x of them.
    "meta_2k": ("metadata", {"layers": 2000, "width": 8}, {"layers": 50, "width": 8}, True),
    "meta_20k": ("metadata", {"layers": 20000, "width": 8}, {"layers": 500, "width": 8}, False),
    "meta_200k": ("metadata", {"layers": 200000, "width": 8}, {"layers": 5000, "width": 8},
                  False),
    "transformer": ("transformer", {"d_model": 512, "nhead": 8, "dim_ff": 2048, "layers": 6},
                    {"d_model": 32, "nhead": 4, "dim_ff": 64, "layers": 2}, True),
    # About 500k ivalues and over 1,000,000 tables: torch refuses to load it.
    "tokens_500k": ("tokenizer", {"tokens": 250000}, {"tokens": 2500}, False),
}

#: ExecuTorch programs: name -> (kind, full-size params, small params, False).
ET_SPECS: Dict[str, Any] = {
    # 2500 Linear(8, 8) layers: 22,501 values, about 2 MB of flatbuffer.
    "et_graph_22k": ("graph", {"layers": 2500, "width": 8}, {"layers": 50, "width": 8}, False),
    # A tenth and ten times of it: the full check's cost per value as programs grow. Ten
    # times is its method ten times over (225,010 values), by ExecuTorch's serializer:
    # exporting a chain of 25,000 layers takes hours (et_build.py, kind "plans").
    "et_graph_2k": ("graph", {"layers": 250, "width": 8}, {"layers": 5, "width": 8}, False),
    "et_graph_225k": ("plans", {"layers": 2500, "width": 8, "plans": 10},
                      {"layers": 50, "width": 8, "plans": 10}, False),
    # 4 Linear(8192, 8192) layers: 1 GiB of constants in the constant segment.
    "et_const_1g": ("constants", {"layers": 4, "width": 8192}, {"layers": 4, "width": 64},
                    False),
    # The same weights in a data file beside the program (``<file>.ptd``).
    "et_external_1g": ("external", {"layers": 4, "width": 8192},
                       {"layers": 4, "width": 64}, False),
    # 8 Linear(4096, 4096) layers: 512 MiB of constants, no delegate; the program served
    # over HTTP by the remote tests and benchmarks (``big_program()``).
    "et_const_512m": ("constants", {"layers": 8, "width": 4096}, {"layers": 8, "width": 64},
                      False),
    # The same chain lowered to XNNPACK: one delegate, 512 MiB of weights in named data.
    "et_xnnpack_512m": ("xnnpack", {"layers": 8, "width": 4096}, {"layers": 8, "width": 64},
                        False),
}

#: The programs of several hundred MB that the remote tests and benchmarks serve over
#: HTTP: without a delegate, and with XNNPACK's (``big_program(xnnpack=True)``).
BIG_PROGRAMS = {False: "et_const_512m", True: "et_xnnpack_512m"}


#: Real architectures of the zoo (benchmarks/zoo.py) in the benchmarks -> the package
#: that defines each (torch itself, or torchvision or timm beside it). ``vit_tiny`` is left
#: out: torch 2.13 loads none of its files (an enum of timm's it cannot resolve).
ZOO: Dict[str, str] = {
    "resnet18": "torchvision", "squeezenet1_1": "torchvision", "mobilenet_v2": "torchvision",
    "mobilenet_v3_small": "torchvision", "efficientnet_b0": "torchvision",
    "efficientvit_m0": "timm", "transformer": "torch", "recurrent": "torch",
    "recurrent_dynamic_qint8": "torch", "conv_static_quant": "torch",
}
assert set(ZOO) <= set(zoo.MODELS), "benchmodels.ZOO names models zoo.py does not list"
#: The zoo model the untimed run builds and measures (once; the whole zoo when timed).
ZOO_SMALL = "mobilenet_v3_small"

#: The zoo in the cache: ``zoo_<model>`` -> (kind, params, small params or None, False).
#: Each is the lite file (``.ptl``) with its jit file beside it (``.jit.ff``).
ZOO_SPECS: Dict[str, Any] = {
    f"zoo_{m}": ("zoo", {"model": m}, {"model": m} if m == ZOO_SMALL else None, False)
    for m in ZOO}


class NotBuildable(RuntimeError):
    """A model is neither in the cache nor can be built here (its writer is missing)."""


class Family(NamedTuple):
    """Models written by one builder: their specifications, file name suffix, and the
    files the builder runs beside itself (their bytes are in the hash too)."""

    specs: Dict[str, Any]
    builder: str
    suffix: str
    uses: Tuple[str, ...] = ()


FAMILIES = (Family(SPECS, BUILDER, ".ptl"),
            Family(ET_SPECS, os.path.join(HERE, "et_build.py"), ".pte"),
            Family(ZOO_SPECS, os.path.join(HERE, "zoo_bench_build.py"), ".ptl",
                   (os.path.join(HERE, "zoo_build.py"),)))


def family(name: str) -> Family:
    """The family that specifies model ``name``."""
    return next(f for f in FAMILIES if name in f.specs)


class Model(NamedTuple):
    """A built model file and what the builder recorded about it."""

    name: str
    path: str
    meta: Dict[str, Any]

    @property
    def safetensors(self) -> Optional[str]:
        p = self.path[:-4] + ".safetensors"
        return p if os.path.exists(p) else None

    @property
    def data_file(self) -> Optional[str]:
        """The ExecuTorch data file (``.ptd``) written beside a program, if any."""
        p = self.path[:-4] + ".ptd"
        return p if os.path.exists(p) else None

    @property
    def jit_file(self) -> Optional[str]:
        """The jit file (``.jit.ff``) written beside a zoo model's lite file."""
        p = self.path[:-4] + ".jit.ff"
        return p if os.path.exists(p) else None

    @property
    def size(self) -> int:
        return os.path.getsize(self.path)

    def torch_skip_reason(self, loader: str) -> Optional[str]:
        """Why torch's ``loader`` ("torch_lite"/"torch_jit") cannot be compared here."""
        if not HAS_TORCH:
            return "torch is not installed"
        if self.meta.get("torch") is None:
            return "a stand-in written without torch (torch was not installed then)"
        reason = self.meta.get(loader)
        return f"torch cannot load {self.name}: {reason}" if reason else None


def cache_dir() -> str:
    path = os.environ.get("PFM_BENCH_CACHE") or os.path.join(
        os.path.expanduser("~"), ".cache", "pyflatmodule-bench")
    os.makedirs(path, exist_ok=True)
    return path


def _builder_hash(fam: Family) -> str:
    h = hashlib.sha256()
    for path in (fam.builder, *fam.uses):
        with open(path, "rb") as f:
            h.update(f.read())
    return h.hexdigest()[:8]


def with_size(specs: Dict[str, Any], small: bool) -> List[str]:
    """The models of ``specs`` that have a size ``small`` (every zoo model has a full one,
    one has a small one)."""
    return [n for n, s in specs.items() if not small or s[2] is not None]


def spec(name: str, small: bool) -> Dict[str, Any]:
    fam = family(name)
    kind, full, little, st = fam.specs[name]
    params = little if small else full
    key = json.dumps([kind, params, _builder_hash(fam)], sort_keys=True).encode()
    digest = hashlib.sha256(key).hexdigest()[:10]
    size = "small" if small else "full"
    return {"name": name, "kind": kind, "params": params, "safetensors": st,
            "file": f"{name}-{size}-{digest}{fam.suffix}"}


def _load(name: str, small: bool) -> Optional[Model]:
    s = spec(name, small)
    path = os.path.join(cache_dir(), s["file"])
    if not (os.path.exists(path) and os.path.exists(path + ".json")):
        return None
    with open(path + ".json", encoding="utf-8") as f:
        return Model(name, path, json.load(f))


def _remove_stale(names: Iterable[str], small: bool) -> None:
    """Drop files of earlier specifications or builders of these models."""
    size = "small" if small else "full"
    for name in names:
        prefix = f"{name}-{size}-"
        for f in os.listdir(cache_dir()):
            if f.startswith(prefix):
                os.remove(os.path.join(cache_dir(), f))


def ensure(names: Iterable[str], small: bool) -> Dict[str, Model]:
    """The models, built first (all missing ones, one subprocess per builder) if needed."""
    names = list(dict.fromkeys(names))
    out = {n: m for n in names if (m := _load(n, small)) is not None}
    missing = [n for n in names if n not in out]
    absent = sorted({p for n in missing if n in ZOO_SPECS
                     for p in ("torch", ZOO[n[4:]]) if not _importable(p)})
    if absent:
        raise NotBuildable(f"the zoo is written by torch, torchvision and timm; not "
                           f"installed: {', '.join(absent)} (missing in {cache_dir()}: "
                           f"{[n for n in missing if n in ZOO_SPECS]})")
    et = [n for n in missing if n in ET_SPECS]
    if et and not HAS_EXECUTORCH:
        if not small:
            raise NotBuildable("the ExecuTorch benchmark programs are written by executorch"
                               f"==1.5.1, which is not installed; missing: {et} in "
                               f"{cache_dir()}")
        # The untimed run without ExecuTorch: the test suite's programs stand in.
        out.update((n, _et_stand_in(n)) for n in et)
        missing = [n for n in missing if n not in out]
    if missing and not HAS_TORCH:
        if not small:
            raise RuntimeError("the benchmark models are written by torch==2.13.0, which is "
                               f"not installed; missing: {missing} in {cache_dir()}")
        # The untimed run without torch: small stand-ins written without it.
        out.update((n, _crafted(n)) for n in missing)
        missing = []
    if missing:
        with open(os.path.join(cache_dir(), ".lock"), "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # another run may be building the same files
            missing = [n for n in missing if _load(n, small) is None]
            _remove_stale(missing, small)
            for fam in FAMILIES:
                args = [json.dumps(spec(n, small)) for n in missing if n in fam.specs]
                if args:
                    subprocess.run([sys.executable, fam.builder, cache_dir(), *args],
                                   check=True)
        for n in names:
            if n not in out:
                m = _load(n, small)
                assert m is not None, n
                out[n] = m
    return out


def big_program(xnnpack: bool = False, small: bool = False) -> Path:
    """The program of 512 MiB of weights (8 Linear(4096, 4096), 537 MB; ``small``: the same
    chain of Linear(64, 64), 140 kB) without a delegate, or lowered to XNNPACK; built on
    first use (about 10 s without a delegate, 15 s with XNNPACK, 1.5 GiB of RAM). Raises
    ``NotBuildable`` without executorch (and torch) when it is not in the cache."""
    name = BIG_PROGRAMS[xnnpack]
    return Path(ensure([name], small)[name].path)


def _importable(package: str) -> bool:
    if package == "torch":
        return HAS_TORCH
    return importlib.util.find_spec(package) is not None


def _crafted(name: str) -> Model:
    """A torch-free stand-in for small model ``name`` (see craft_models.py), cached."""
    s = spec(name, True)
    path = os.path.join(cache_dir(), s["file"].replace("-small-", "-crafted-"))
    if not (os.path.exists(path) and os.path.exists(path + ".json")):
        import craft_models
        data, tensor_bytes = craft_models.build(s["kind"], s["params"])
        reason = "torch is not installed (a stand-in written without torch)"
        meta = {"name": name, "kind": s["kind"], "params": s["params"], "torch": None,
                "tensor_bytes": tensor_bytes, "torch_lite": reason, "torch_jit": reason}
        tmp = f"{path}.{os.getpid()}.tmp"
        with open(tmp, "wb") as f:
            f.write(data)
        if s["safetensors"] and importlib.util.find_spec("safetensors") is not None:
            from safetensors.numpy import save_file

            import pyflatmodule as pfm
            weights = {k: np.ascontiguousarray(v) for k, v in pfm.load(tmp).state_dict().items()}
            save_file(weights, path[:-4] + ".safetensors")
        os.replace(tmp, path)
        with open(path + ".json", "w", encoding="utf-8") as f:
            json.dump(meta, f, indent=1)
    with open(path + ".json", encoding="utf-8") as f:
        return Model(name, path, json.load(f))


#: The test suite's ExecuTorch programs that stand in for the small ones without ExecuTorch.
ET_STAND_INS = {"et_graph_22k": "two_methods", "et_const_1g": "mlp",
                "et_external_1g": "external", "et_const_512m": "mlp",
                "et_xnnpack_512m": "xnnpack"}


def _et_stand_in(name: str) -> Model:
    """tests/data/et/<stem>.pte for ExecuTorch program ``name``, with what its oracle
    (ExecuTorch's own answers, stored beside it) says of it."""
    stem = os.path.join(os.path.dirname(HERE), "tests", "data", "et", ET_STAND_INS[name])
    with open(stem + ".oracle.json", encoding="utf-8") as f:
        oracle = json.load(f)
    reason = "executorch is not installed (a test program stands in)"
    meta = {"name": name, "kind": ET_SPECS[name][0], "stand_in": stem + ".pte",
            "tensors": len(oracle["weights"]), "runtime": reason}
    return Model(name, stem + ".pte", meta)


def read_file(path: str) -> None:
    """Read a file once so its pages are in the page cache before timing."""
    with open(path, "rb", buffering=0) as f:
        while f.readinto(_BUF):
            pass


_BUF = bytearray(4 * MiB)


def main(argv: List[str]) -> None:
    """``python benchmodels.py [--small] [NAME...]``: build (or find) models, print paths
    (all of torch's models without NAMEs; ``--et``: all ExecuTorch programs; ``--zoo``:
    the zoo's models)."""
    small = "--small" in argv
    specs = ET_SPECS if "--et" in argv else ZOO_SPECS if "--zoo" in argv else SPECS
    wanted = [a for a in argv if not a.startswith("--")] or with_size(specs, small)
    for name, m in ensure(wanted, small).items():
        print(f"{name:28s} {m.size / MiB:10.1f} MiB  {m.path}")


if __name__ == "__main__":
    main(sys.argv[1:])
