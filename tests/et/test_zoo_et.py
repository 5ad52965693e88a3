"""Real architectures exported by ExecuTorch: each program opens with default options, says
what ExecuTorch's runtime says of its methods, decodes in full, and holds every weight of
the exported module byte for byte (portable programs; XNNPACK programs keep theirs inside
the delegate's named data).

The files are written by benchmarks/zoo_et_build.py (torchvision, timm, nn.Transformer,
LSTM/GRU; random weights) into a temporary folder, with the exported module's own tensors
and the runtime's answers. Opt in with ``--zoo`` (CI does): it needs torch, torchvision,
timm and executorch, and takes a few minutes.
"""
from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, Dict, Tuple

import numpy as np
import pytest

import pyflatmodule as pfm
from pyflatmodule.core.dtypes import scalar_type_name
from pyflatmodule.core.remote import HEAD_BYTES

import zoo as ZOO  # the zoo's listing: benchmarks/zoo.py, no torch (benchmarks/ is on the path)
from support.cli import run_cli
from support.http_servers import Nginx
from support.paths import BENCHMARKS

pytestmark = [pytest.mark.zoo, pytest.mark.torch]

BUILDER = os.path.join(BENCHMARKS, "zoo_et_build.py")


FILES = [(model, form) for model, forms in ZOO.ET_MODELS.items() for form in forms]


@pytest.fixture(scope="module")
def zoo(tmp_path_factory: Any) -> Tuple[str, Dict[Tuple[str, str], Dict[str, Any]]]:
    """(folder, manifest entry by (model, form)) of the zoo ExecuTorch wrote."""
    missing = [n for n in ("torch", "torchvision", "timm", "executorch")
               if importlib.util.find_spec(n) is None]
    if missing:
        pytest.skip(f"the ExecuTorch zoo needs {', '.join(missing)}")
    out = str(tmp_path_factory.mktemp("zoo_et"))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        p for p in (BENCHMARKS, os.environ.get("PYTHONPATH")) if p))
    subprocess.run([sys.executable, BUILDER, out], check=True, timeout=2400, env=env,
                   stdout=subprocess.DEVNULL)
    with open(os.path.join(out, "zoo_et.json"), encoding="utf-8") as f:
        files = json.load(f)["files"]
    return out, {(e["model"], e["form"]): e for e in files}


def _weights(folder: str, entry: Dict[str, Any]) -> Dict[str, np.ndarray]:
    with np.load(os.path.join(folder, entry["model"] + ".weights.npz")) as z:
        return {k: np.frombuffer(z[k].tobytes(), w["dtype"]).reshape(w["shape"])
                for k, w in entry["weights"].items()}


@pytest.mark.parametrize("model,form", FILES)
def test_zoo_program(zoo: Any, model: str, form: str) -> None:
    folder, entries = zoo
    entry = entries[model, form]
    assert "error" not in entry, f"ExecuTorch could not export {model} ({form}): {entry}"
    runtime = entry["runtime"]
    assert "error" not in runtime, runtime
    with pfm.load(os.path.join(folder, entry["file"])) as p:
        assert isinstance(p, pfm.Program)
        assert sorted(p.methods) == runtime["method_names"]
        for name, meta in runtime["methods"].items():
            m = p.methods[name]
            for index, want in zip(m.inputs + m.outputs, meta["inputs"] + meta["outputs"]):
                spec = m.values[index]
                assert isinstance(spec, pfm.TensorSpec)
                assert list(spec.shape) == want["sizes"]
                assert spec.dtype == scalar_type_name(want["dtype"])
            # every value, chain and delegate decodes
            for v in m.values:
                assert v is None or isinstance(v, (int, float, bool, str, list, np.ndarray,
                                                   pfm.TensorSpec))
            for c in m.chains:
                assert len(c.instructions) > 0
            for d in m.delegates:
                assert d.id == "XnnpackBackend" and bytes(d.data[4:8]) == b"XH00"
        constants = [a for _, _, a in p.constants()]
        weights = _weights(folder, entry)
        if form == "portable":
            missing = [k for k, w in weights.items() if w.size and not any(
                c.shape == w.shape and c.dtype == w.dtype and np.array_equal(c, w)
                for c in constants)]
            assert missing == [], f"{len(missing)} weights are no constant: {missing[:5]}"
            assert all(not m.delegates for m in p.methods.values())
        else:
            assert any(m.delegates for m in p.methods.values())
            assert p.named_data
            _check_torch_layouts(p, model, weights)


def _check_torch_layouts(p: pfm.Program, model: str, weights: Dict[str, np.ndarray]) -> None:
    """XNNPACK's filters come in torch's shape: each is the shape of a weight of the module
    (its values too where no batch norm is folded in: the transformer has none); no zoo
    model has a Conv1d, so none is noted as one, 1x1 convs included."""
    state = p.state_dict()
    shapes = {w.shape for w in weights.values()}
    filters = {k: v for k, v in p.delegate_layouts().items() if v["role"] == "filter"}
    assert filters
    for name, layout in filters.items():
        assert state[name].shape in shapes, (name, layout)
        assert not any("Conv1d" in n for n in layout["notes"]), (name, layout)
        if model == "transformer":
            assert any(w.shape == state[name].shape and np.array_equal(w, state[name])
                       for w in weights.values()), name


def test_zoo_over_http(zoo: Any, nginx_bin: str) -> None:
    """Every program of the zoo, served by nginx: each command's answer for its URL is the
    local file's, and a portable program's info costs its header and flatbuffer (in at
    most two requests, counted from nginx's log) however large its weights."""
    folder, entries = zoo
    with Nginx({"zoo": Path(folder)}, binary=nginx_bin) as server:
        for (model, form), entry in sorted(entries.items()):
            if "error" in entry:
                continue
            local = os.path.join(folder, entry["file"])
            url = server.url("zoo", entry["file"])
            for command in (("info", "--json"), ("ops", "--json"), ("verify", "--json"),
                            ("size", "--json"), ("memory",), ("dis",)):
                want = run_cli(command[0], local, *command[1:])
                mark = server.mark()
                got = run_cli(command[0], url, *command[1:])
                assert (got.returncode, got.stdout.replace(url, local)) == \
                    (want.returncode, want.stdout), (model, form, command)
                if command[0] != "info":
                    continue
                with open(local, "rb") as f:
                    head = f.read(32)
                flatbuffer = int.from_bytes(head[16:24], "little") \
                    if head[8:12] == b"eh00" else os.path.getsize(local)
                log = server.since(mark)
                fetched = sum(r.body_bytes_sent for r in log)
                # (a delegated program's info also reads its payloads, for the minimum
                # runtime, and each named entry's first bytes, for native code:
                # tests/remote's 537 MB XNNPACK program bounds that)
                if form == "portable":
                    assert len(log) <= 2 and fetched <= flatbuffer + HEAD_BYTES, (model, log)
