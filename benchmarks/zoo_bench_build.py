"""Writes zoo models into the benchmark cache: ``python zoo_bench_build.py OUT_DIR SPEC_JSON...``.

Run by ``benchmodels.ensure`` in a subprocess (torch is imported only here). Each SPEC_JSON
is ``{"name", "kind": "zoo", "params": {"model"}, "file"}``. ``zoo_build.py`` writes every
form of the models into a temporary folder; the lite file is renamed into place as
``<file>``, the jit file beside it with ``.jit.ff`` for ``.ptl``, and ``<file>.json``
records what the builder knows: torch's tensor count, and whether torch's lite loader
reads the lite file and which of its jit loaders reads the jit file.
"""

import importlib.metadata
import json
import os
import shutil
import sys
import tempfile
import time
from typing import Any, Dict, List

# Beside zoo_build.py (the test suite runs its children with PYTHONSAFEPATH=1: the
# script's folder is not on the path).
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch  # noqa: E402
import torch.jit.mobile  # noqa: E402,F401  (registers torch.jit.mobile)
import zoo_build  # noqa: E402

from zoo import FORMS  # noqa: E402


def _reason(e: Exception) -> str:
    return f"{type(e).__name__}: {str(e).strip().splitlines()[0][:200] if str(e) else ''}"


def _probe(lite: str, jit: str) -> Dict[str, Any]:
    """What torch's loaders make of the two files: the lite loader (``torch_lite``: None
    or why not), the first jit loader that reads the jit file and takes its
    ``state_dict()`` (``jit_loader``: the name in ``torch.jit``), and torch's count."""
    out: Dict[str, Any] = {}
    try:
        torch.jit.mobile._load_for_lite_interpreter(lite)
        out["torch_lite"] = None
    except Exception as e:  # noqa: BLE001  (recorded as the reason to skip)
        out["torch_lite"] = _reason(e)
    reasons = []
    for loader in ("jit_module_from_flatbuffer", "load"):
        try:
            state = getattr(torch.jit, loader)(jit).state_dict()
        except Exception as e:  # noqa: BLE001
            reasons.append(f"torch.jit.{loader}: {_reason(e)}")
            continue
        out.update(torch_jit=None, jit_loader=loader, tensors=len(state),
                   tensor_bytes=sum(t.numel() * t.element_size() for t in state.values()))
        return out
    out["torch_jit"] = "; ".join(reasons)
    return out


def _version(package: str) -> Any:
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return None


def main(out_dir: str, specs: List[str]) -> None:
    t0 = time.time()
    todo = [json.loads(s) for s in specs]
    tmp = tempfile.mkdtemp(prefix="zoo-", dir=out_dir)
    try:
        manifest = zoo_build.build(tmp, [s["params"]["model"] for s in todo])
        for spec in todo:
            model = spec["params"]["model"]
            forms = [e for e in manifest["files"] if e["model"] == model]
            errors = {e["form"]: e["error"] for e in forms if "error" in e}
            if "lite" in errors or "jit" in errors or "script" in errors:
                raise RuntimeError(f"torch did not write {model}: {errors}")
            path = os.path.join(out_dir, spec["file"])
            lite = os.path.join(tmp, model + FORMS["lite"])
            jit = os.path.join(tmp, model + FORMS["jit"])
            meta: Dict[str, Any] = {
                "name": spec["name"], "kind": spec["kind"], "params": spec["params"],
                "torch": torch.__version__, "torchvision": _version("torchvision"),
                "timm": _version("timm"), **_probe(lite, jit)}
            os.replace(jit, path[:-4] + FORMS["jit"])
            os.replace(lite, path)
            with open(path + ".json.tmp", "w", encoding="utf-8") as f:
                json.dump(meta, f, indent=1)
            os.replace(path + ".json.tmp", path + ".json")
            print(f"built {spec['name']}: {os.path.getsize(path)} bytes", flush=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"built the zoo's {len(todo)} models in {time.time() - t0:.1f} s", flush=True)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2:])
