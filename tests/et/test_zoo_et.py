"""Real architectures exported by ExecuTorch: each program opens with default options, says
what ExecuTorch's runtime says of its methods, decodes in full, and holds every weight of
the exported module byte for byte (portable programs; XNNPACK programs keep theirs inside
the delegate's named data). Each Vulkan and Core ML payload's graph is what ExecuTorch's
and coremltools' own code read in it, partial partitions (kernels left between the
delegates) included, and the commands and ``state_dict()`` take its constants in.

The files are written by benchmarks/zoo_et_build.py (torchvision, timm, nn.Transformer,
LSTM/GRU; random weights) into a temporary folder, with the exported module's own tensors,
the runtime's answers and ExecuTorch's and coremltools' reading of the Vulkan and Core ML
payloads (benchmarks/zoo_et_delegates.py). Opt in with ``--zoo`` (CI does): it needs torch,
torchvision, timm and executorch (with the coremltools it installs), and takes a few
minutes.
"""
from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, Dict, List, Tuple

import numpy as np
import pytest

import pyflatmodule as pfm
from pyflatmodule.core.dtypes import scalar_type_name
from pyflatmodule.core.remote import HEAD_BYTES
from pyflatmodule.executorch import CoreMLGraph, VulkanGraph

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
                assert d.id == ZOO.ET_BACKENDS.get(form)
                assert form != "xnnpack" or bytes(d.data[4:8]) == b"XH00"
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
        if form == "xnnpack":
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


# ------------------------------------------------------------- Vulkan and Core ML

#: (model, form) of each Vulkan and Core ML program of the zoo
DELEGATED = [(model, form) for model, form in FILES if form.startswith(("vulkan", "coreml"))]
#: The reader's name of each VkDataType, by its number (ExecuTorch's vulkan_graph_schema)
VK_DATATYPES = ["bool", "uint8", "int8", "int32", "float16", "float32", "float64", "int64"]


def _sha(data: Any) -> str:
    return hashlib.sha256(data).hexdigest()


def _delegated(zoo: Any, model: str, form: str) -> Tuple[str, Dict[str, Any],
                                                        List[Dict[str, Any]]]:
    """(path, what ExecuTorch's program reader says of each method, the payloads' answers)
    of a Vulkan or Core ML program of the zoo."""
    folder, entries = zoo
    entry = entries[model, form]
    assert "error" not in entry, f"ExecuTorch could not export {model} ({form}): {entry}"
    answers = entry["payloads"]
    assert "error" not in answers, f"ExecuTorch could not read {model} ({form}): {answers}"
    assert answers
    return os.path.join(folder, entry["file"]), entry["program"], answers


@pytest.mark.parametrize("model,form", DELEGATED)
def test_zoo_partitions(zoo: Any, model: str, form: str) -> None:
    """Each method's delegates and the kernels left beside them are what ExecuTorch's
    program reader lists (the transformer's Vulkan program and ResNet-18's coreml_partial
    are partial partitions)."""
    path, methods, _ = _delegated(zoo, model, form)
    with pfm.load(path) as p:
        assert {name: {"delegates": [d.id for d in m.delegates],
                       "operators": [str(o) for o in m.operators]}
                for name, m in p.methods.items()} == methods
    if (model, form) in (("transformer", "vulkan"), ("resnet18", "coreml_partial")):
        assert len(methods["forward"]["delegates"]) > 1 and methods["forward"]["operators"]


def _graph(p: pfm.Program, want: Dict[str, Any]) -> Any:
    """The graph of the delegate whose payload ``want`` describes, its bytes checked."""
    d = p.methods[want["method"]].delegates[want["index"]]
    assert (len(d.data), _sha(d.data)) == (want["payload_size"], want["payload_sha256"])
    return d.graph


@pytest.mark.parametrize("model", [m for m, f in DELEGATED if f == "vulkan"])
def test_zoo_vulkan_graphs(zoo: Any, model: str) -> None:
    """Every Vulkan graph is ExecuTorch's reading of it: header, version, operator calls
    in order, value kinds, inputs and outputs, and each constant's datatype, dims and
    bytes (SHA-256 of the named data or inline bytes its VkBytes entry names)."""
    path, _, answers = _delegated(zoo, model, "vulkan")
    with pfm.load(path, verify="full") as p:
        for want in answers:
            g = _graph(p, want)
            assert isinstance(g, VulkanGraph)
            assert g.header == want["header"] and g.version == want["version"]
            assert [[n.kind, list(n.args), n.node_id] for n in g.nodes] == want["nodes"]
            assert [[v.kind, *([VK_DATATYPES.index(v.datatype), list(v.dims), v.constant]
                               if v.kind == "VkTensor" else [])] for v in g.values] == \
                want["values"]
            assert (g.input_ids, g.output_ids) == (want["input_ids"], want["output_ids"])
            constants = g.constants()
            assert sorted(constants) == sorted(int(i) for i in want["constants"])
            assert not g.missing
            keys = g.named_data_keys()
            for vid, w in want["constants"].items():
                array, value = constants[int(vid)], g.values[int(vid)]
                assert (value.datatype, list(value.dims), value.constant) == \
                    (VK_DATATYPES[w["datatype"]], w["dims"], True)
                assert list(array.shape) == w["dims"] and not array.flags.writeable
                assert _sha(array.tobytes()) == w["sha256"], (model, want["index"], vid)
                assert keys.get((int(vid), "constant")) == (w["named_key"] or None)


@pytest.mark.parametrize("model,form", [(m, f) for m, f in DELEGATED if f != "vulkan"])
def test_zoo_coreml_graphs(zoo: Any, model: str, form: str, tmp_path: Any) -> None:
    """Every Core ML package is what ExecuTorch's inmemoryfs unflattens and coremltools
    reads: its files, the spec's version, inputs and outputs, the main block's operations
    in order, and each weight (blob or immediate: datatype, shape, SHA-256 of its bytes);
    ``extract`` writes the same files."""
    path, _, answers = _delegated(zoo, model, form)
    with pfm.load(path, verify="full") as p:
        for k, want in enumerate(answers):
            g = _graph(p, want)
            assert isinstance(g, CoreMLGraph)
            assert {f: _sha(v) for f, v in g.files.items()} == want["files"]
            assert g.spec_version == want["specification_version"]
            for got, features in ((g.inputs, want["inputs"]), (g.outputs, want["outputs"])):
                assert [(f.name, f.datatype, list(f.shape)) for f in got] == \
                    [(f["name"], f["dataType"], f["shape"]) for f in features]
            values = g.values

            def typed(i: int) -> List[Any]:
                v = values[i]
                return [v.name, v.kind + "Type", *((v.datatype, list(v.dims))
                                                   if v.kind == "tensor" else ("", []))]
            assert [[n.kind, sorted(values[i].name for i in n.inputs),
                     [typed(i) for i in n.outputs]] for n in g.nodes] == want["operations"]
            assert [typed(i) for i in g.input_ids] == want["function_inputs"]
            assert [values[i].name for i in g.output_ids] == want["block_outputs"]
            by_name = {values[vid].name: a for vid, a in g.constants().items()}
            assert sorted(by_name) == sorted(want["constants"])
            for name, w in want["constants"].items():
                a = by_name[name]
                assert (str(a.dtype), list(a.shape)) == (w["dtype"], w["shape"]), name
                assert _sha(a.tobytes()) == w["sha256"], (model, k, name)
            out = tmp_path / str(k)
            assert g.extract(str(out)) == str(out / "model.mlpackage")
            assert {f.relative_to(out).as_posix(): _sha(f.read_bytes())
                    for f in out.rglob("*") if f.is_file()} == want["files"]


@pytest.mark.parametrize("model,form", DELEGATED)
def test_zoo_delegated_commands(zoo: Any, model: str, form: str) -> None:
    """info, tree, dis and size read the program (dis shows every graph's operators);
    state_dict() holds every constant of every payload, bytes as ExecuTorch and
    coremltools read them."""
    path, _, answers = _delegated(zoo, model, form)
    for command in (("info",), ("tree",), ("tree", "--json"), ("dis",), ("size",),
                    ("size", "--json")):
        r = run_cli(command[0], path, *command[1:])
        assert r.returncode == 0 and r.stdout, (command, r.stderr)
        if command == ("dis",):
            kinds = {n[0] for w in answers for n in w["nodes" if form == "vulkan"
                                                        else "operations"]}
            assert kinds and all(k in r.stdout for k in kinds), kinds - set(r.stdout.split())
    with pfm.load(path) as p:
        want: Dict[str, str] = {}
        for w in answers:
            g = _graph(p, w)
            ids = {} if form == "vulkan" else {g.values[v].name: v for v in g.constants()}
            for name, c in w["constants"].items():
                vid = ids[name] if ids else int(name)
                want[f"{w['method']}.delegates[{w['index']}].values[{vid}]"] = c["sha256"]
        got = {k: _sha(np.ascontiguousarray(a).tobytes())
               for k, a in p.state_dict().items() if ".delegates[" in k}
        assert got == want
