"""Constants named by where the program uses them: a kernel call's instruction -> its
debug handles (the ETRecord's ``debug_handle_map``) -> the edge-dialect graph's node of
that operator -> the placeholder at the constant's argument -> the graph signature's
parameter or buffer (:func:`pyflatmodule.naming.names_by_debug_handle`).

tests/data/names/norms.* (tests/data/make_names_data.py, ExecuTorch 1.5.1): a module whose
parameters and buffers are mostly zeros and ones (a fresh batch norm, a layer norm, zero
biases, a zero buffer), so that content cannot tell them apart. The oracle's names come
from ExecuTorch and torch alone: the same module exported with values no two tensors
share (the program checked identical but for those bytes), each constant read by
ExecuTorch's own reader and named by the probe's ``state_dict()``; the graphs' arguments
as ExecuTorch's ``parse_etrecord`` rebuilds them; the real module's tensors' SHA-256.
"""
from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import subprocess
import sys
from typing import Any, Dict, Set

import numpy as np
import pytest

import pyflatmodule as pfm
from pyflatmodule.naming import (
    name_by_content,
    named_state_dict,
    names_by_debug_handle,
    reference_tensors,
)

from support.cli import run_cli
from support.exported import read_safetensors
from support.paths import DATA

HERE = os.path.join(DATA, "names")
PTE, RECORD = os.path.join(HERE, "norms.pte"), os.path.join(HERE, "norms.etrecord")


def _oracle(folder: str = HERE) -> Dict[str, Any]:
    with open(os.path.join(folder, "norms.oracle.json"), encoding="utf-8") as f:
        doc: Dict[str, Any] = json.load(f)
    return doc


def _called(pte: str) -> Set[str]:
    """The program's constants some kernel call takes (the others no call names)."""
    out = set()
    with pfm.load(pte) as p:
        for name, m in p.methods.items():
            for chain in m.chains:
                for ins in chain.instructions:
                    if isinstance(ins, pfm.executorch.KernelCall):
                        out.update(f"{name}.values[{v}]" for v in ins.args
                                   if m.values.kind(v) == "Tensor" and isinstance(
                                       m.values.layout(v), pfm.executorch.StoredTensor))
    return out


def _sha(array: Any) -> str:
    return hashlib.sha256(np.ascontiguousarray(array).tobytes()).hexdigest()


def test_the_graphs_arguments_are_what_parse_etrecord_rebuilds() -> None:
    want = _oracle()["args"]
    with pfm.load(RECORD) as r:
        for method, nodes in want.items():
            graph = r.graph(f"edge_dialect_exported_program/{method}")
            ours = {n.name: n for n in graph.nodes if n.op == "call_function"}
            # torch's deserializer adds getitem nodes for multiple outputs; the file has none
            assert {k for k in nodes if not k.startswith("getitem") and "_unused_" not in k} \
                == set(ours)
            for name, node in ours.items():
                assert nodes[name] == list(node.args[:len(nodes[name])]), name


def test_every_called_constant_is_named_as_the_probe_says() -> None:
    want = _oracle()["names"]
    called = _called(PTE)
    assert len(called) >= 12   # all but the batch norm's unused step count
    with pfm.load(PTE) as p:
        got = names_by_debug_handle(p, reference_tensors(RECORD))
    assert {k: want[k] for k in called} == got


def test_content_alone_names_few_of_them() -> None:
    """Why the route is needed: zeros and ones are held by several parameters."""
    with pfm.load(PTE) as p:
        named = name_by_content(p.named_tensors(), reference_tensors(RECORD))
    assert sum(n.name is not None for n in named.values()) <= 3
    for where in ("forward.values[1]", "forward.values[2]", "forward.values[10]",
                  "forward.values[11]"):   # the batch norm's ones and zeros
        assert named[where].note.startswith("fewer than two distinct values"), where


def test_named_state_dict_is_torchs_state_dict_byte_for_byte() -> None:
    oracle = _oracle()
    want = {oracle["names"][k] for k in _called(PTE)}
    with pfm.load(PTE) as p:
        got = named_state_dict(p, RECORD)
    assert want <= set(got)
    for name in want:
        w = oracle["state_dict"][name]
        assert (w["shape"], w["sha256"]) == (list(got[name].shape), _sha(got[name])), name


def test_the_commands_name_them_too(tmp_path: Any) -> None:
    oracle = _oracle()
    text = run_cli("dis", PTE, "--etrecord", RECORD).stdout
    assert "%11: const float32[4] bn.running_var" in text, text
    out = tmp_path / "w.safetensors"
    assert 0 == run_cli("export", PTE, str(out), "--names", RECORD).returncode
    got = read_safetensors(str(out))
    for where in _called(PTE):
        name = oracle["names"][where]
        assert oracle["state_dict"][name]["sha256"] == _sha(got[name][0]), name


def test_another_programs_record_names_nothing_wrongly() -> None:
    """The ETRecord of another program: its calls do not fit this one's, its names are
    not this module's."""
    other = os.path.join(DATA, "etrecord", "portable.etrecord")
    with pfm.load(PTE) as p:
        assert {} == names_by_debug_handle(p, reference_tensors(other))
        named = named_state_dict(p, other)
        assert set(named) == set(p.named_tensors())   # each under the file's name


@pytest.mark.skipif(importlib.util.find_spec("executorch") is None,
                    reason="executorch is not installed")
def test_a_fresh_export_is_named_as_its_probe_says(tmp_path: Any) -> None:
    """ExecuTorch exports the module again, in a child process, beside its ETRecord and
    oracle; the route names the fresh program's constants as the fresh probe does."""
    script = os.path.join(DATA, "make_names_data.py")
    p = subprocess.run([sys.executable, script, "--out", str(tmp_path)], capture_output=True,
                       text=True, timeout=900)
    assert p.returncode == 0, p.stderr[-2000:]
    pte = str(tmp_path / "norms.pte")
    want = _oracle(str(tmp_path))["names"]
    with pfm.load(pte) as program:
        got = names_by_debug_handle(program,
                                    reference_tensors(str(tmp_path / "norms.etrecord")))
    assert {k: want[k] for k in _called(pte)} == got


#: The child that exports torchvision's MobileNetV3 (small, random weights) to portable
#: kernels with its ETRecord into argv[1], and writes torch's answers beside it:
#: the module's state_dict() (shape, sha256) and, from parse_etrecord's edge program,
#: those of its parameters and buffers some node of the graph uses (the program's
#: buffers also hold the constants ExecuTorch lifted, which the module does not own).
_MOBILENET = r"""
import hashlib, json, os, sys, warnings
warnings.filterwarnings("ignore")
import torch
lib = torch.library.Library("torchvision", "FRAGMENT")   # torchvision's C++ ops, unneeded
lib.define("nms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")
lib.define("qnms(Tensor qdets, Tensor qscores, Tensor scale, Tensor zero_point, "
           "float iou_threshold) -> Tensor")
import torchvision
from executorch.devtools.etrecord import parse_etrecord
from executorch.exir import to_edge_transform_and_lower
from torch.export.graph_signature import InputKind
out = sys.argv[1]
torch.manual_seed(0)
m = torchvision.models.mobilenet_v3_small(num_classes=10).eval()
x = (torch.randn(1, 3, 64, 64),)
et = to_edge_transform_and_lower(torch.export.export(m, x),
                                 generate_etrecord=True).to_executorch()
with open(os.path.join(out, "m.pte"), "wb") as f:
    f.write(et.buffer)
et.get_etrecord().save(os.path.join(out, "m.etrecord"))
edge = parse_etrecord(os.path.join(out, "m.etrecord")).edge_dialect_program
ep = edge["forward"] if isinstance(edge, dict) else edge
nodes = {n.name: n for n in ep.graph_module.graph.nodes}
state = {k: {"shape": list(v.shape), "sha256": hashlib.sha256(
    v.detach().contiguous().numpy().tobytes()).hexdigest()} for k, v in m.state_dict().items()}
used = sorted(s.target for s in ep.graph_signature.input_specs
              if s.kind in (InputKind.PARAMETER, InputKind.BUFFER) and nodes[s.arg.name].users
              and s.target in state)
with open(os.path.join(out, "m.json"), "w") as f:
    json.dump({"state_dict": state, "used": used}, f)
"""


@pytest.mark.zoo
@pytest.mark.torch
def test_torchvisions_mobilenet_every_used_tensor_named_as_torch_holds_it(
        tmp_path: Any) -> None:
    """Its batch norms' ones and zeros among them: content alone names a quarter."""
    missing = [n for n in ("torch", "torchvision", "executorch")
               if importlib.util.find_spec(n) is None]
    if missing:
        pytest.skip(f"needs {', '.join(missing)}")
    p = subprocess.run([sys.executable, "-c", _MOBILENET, str(tmp_path)], capture_output=True,
                       text=True, timeout=1200)
    assert p.returncode == 0, p.stderr[-2000:]
    with open(tmp_path / "m.json", encoding="utf-8") as f:
        want = json.load(f)
    with pfm.load(str(tmp_path / "m.pte")) as program:
        got = named_state_dict(program, str(tmp_path / "m.etrecord"))
        content = name_by_content(program.named_tensors(),
                                  reference_tensors(str(tmp_path / "m.etrecord")))
    assert len(want["used"]) > 200
    assert set(want["used"]) <= set(got)
    for name in want["used"]:
        w = want["state_dict"][name]
        assert (w["shape"], w["sha256"]) == (list(got[name].shape), _sha(got[name])), name
    assert sum(n.name is not None for n in content.values()) < len(want["used"]) // 2
