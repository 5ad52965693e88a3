"""The command line on the real files in tests/data: every command in-process through
``pyflatmodule.cli.main(argv)``, and a few end-to-end runs of ``python -m pyflatmodule``
and the ``pyflatmodule`` console script in a child process (exit statuses, one-line
errors, raw bytes on stdout, a closed pipe, a terminal, what a fresh process imports).

Expected values come from torch (the stored oracles, the generator's inputs, or torch run
live in a child process for ``ops``), never from pyflatmodule itself, except where a
command must agree with the library (``verify``'s error fields, ``export``'s bytes).
"""
from __future__ import annotations

import ast
import base64
import hashlib
import json
import math
import os
import pty
import shlex
import shutil
import subprocess
import sys
from typing import Any, Dict, Iterator, List

import numpy as np
import pytest

import pyflatmodule as pfm
from pyflatmodule.export import CHUNK_BYTES, iter_bytes

from support import (
    HAS_TORCH,
    MODEL_FILES,
    CliRun,
    assert_tensor,
    hex_float,
    load_expectation,
    model_path,
    run_cli,
    same_float,
)
from support.exported import ST_NUMPY, expected_names
from support.paths import ET

ALL_MODELS = MODEL_FILES + ["sample.ptl"]
COMMANDS = ("info", "verify", "tree", "dis", "ops", "export", "extract")


def _json(r: CliRun) -> Any:
    assert 0 == r.returncode, r.stderr
    return json.loads(r.stdout)


def _one(r: CliRun) -> Any:
    """The one file's entry of a command's ``--json`` (``{"files": [FILE]}``)."""
    (doc,) = _json(r)["files"]
    return doc


def _oracle_tensors(name: str):
    """(descriptions, arrays) of the tensors torch read for the file's state_dict."""
    doc, arrays = load_expectation(name, "oracle")
    for part in ("state_dict", "parameters_file"):
        if part in doc and "error" not in doc[part]:
            return doc[part], arrays
    return None, arrays


@pytest.fixture
def bad_files(tmp_path) -> Dict[str, str]:
    """Files that are not valid models, by what is wrong with them."""
    good = open(model_path("mlp_jit.ff"), "rb").read()
    files = {"garbage": b"\xff" * 64, "truncated": good[:100], "empty": b"",
             "zip": b"PK\x03\x04" + b"\0" * 60}
    out = {}
    for name, data in files.items():
        p = tmp_path / f"{name}.ptl"
        p.write_bytes(data)
        out[name] = str(p)
    return out


# ================================================================== info

def test_info_on_the_bundled_sample():
    r = run_cli("info")
    assert 0 == r.returncode, r.stderr
    doc, _ = load_expectation("sample.ptl", "oracle")
    for name in doc["info"]["function_names"]:
        assert name in r.stdout
    assert "model_info.json" in r.stdout
    assert "\x1b[" not in r.stdout           # not a terminal: no colour


def test_info_json_counts_tensors_as_torch_does():
    r = run_cli("info", "--json", model_path("mlp_jit.ff"))
    (out,) = _json(r)["files"]
    doc, _ = load_expectation("mlp_jit.ff", "oracle")
    tensors = doc["state_dict"]["tensors"]
    assert len(tensors) == out["tensors"]["count"]
    expected_bytes = sum(4 * max(1, math.prod(t["shape"])) for t in tensors.values())
    assert expected_bytes == out["tensors"]["bytes"]
    assert doc["info"]["bytecode_version"] == out["bytecode_version"]
    assert model_path("mlp_jit.ff") == out["file"]
    with open(model_path("mlp_jit.ff"), "rb") as f:
        assert b"PTMF" == f.read(8)[4:]     # the identifier names the format key's value
    assert "ptmf" == out["format"]


def test_info_several_files_and_shared_storages():
    r = run_cli("info", "--json", model_path("layouts.ff"), model_path("mlp_jit.ff"))
    out = _json(r)["files"]
    assert [model_path("layouts.ff"), model_path("mlp_jit.ff")] == [d["file"] for d in out]
    inputs, _ = load_expectation("layouts.ff", "inputs")
    groups = inputs["shared_storage_groups"]
    assert sorted(len(g) for g in groups) == \
        sorted(s["tensors"] for s in out[0]["tensors"]["shared_storages"])
    assert [] == out[1]["tensors"]["shared_storages"]
    text = run_cli("info", model_path("layouts.ff")).stdout
    assert "storages shared by several tensors: 1" in text


def test_bad_file_is_one_line_no_traceback(tmp_path):
    p = tmp_path / "bad.ptl"
    p.write_bytes(b"\xff" * 64)
    r = run_cli("info", str(p))
    assert 1 == r.returncode
    assert "Traceback" not in r.stderr
    assert 1 == len(r.stderr.strip().splitlines())
    assert "bad_identifier" in r.stderr


def test_usage_error_exits_2():
    r = run_cli("frobnicate")
    assert 2 == r.returncode
    assert 2 == run_cli().returncode
    assert 2 == run_cli("tree").returncode
    assert 2 == run_cli("info", "--no-such-option").returncode


# ================================================================== every command

def _bad_invocation(command: str, path: str, tmp_path) -> List[str]:
    return {"info": ["info", path], "verify": ["verify", path], "tree": ["tree", path],
            "dis": ["dis", path], "ops": ["ops", path],
            "export": ["export", path, str(tmp_path / "out.safetensors")],
            "extract": ["extract", path, "x"]}[command]


@pytest.mark.parametrize("command", COMMANDS)
def test_every_command_reports_bad_files_in_one_line(command, bad_files, tmp_path):
    for kind, path in bad_files.items():
        r = run_cli(*_bad_invocation(command, path, tmp_path))
        assert 1 == r.returncode, (kind, r.stdout, r.stderr)
        assert "Traceback" not in r.stderr + r.stdout, kind
        lines = (r.stdout if command == "verify" else r.stderr).strip().splitlines()
        assert 1 == len(lines), (kind, lines)
        expected = {"garbage": "bad_identifier", "zip": "zip"}.get(kind)
        if expected:
            assert expected in lines[0].lower(), lines[0]
    assert not (tmp_path / "out.safetensors").exists()
    assert [] == [f for f in os.listdir(tmp_path) if f.startswith(".pyflatmodule-")]


@pytest.mark.parametrize("command", COMMANDS)
def test_every_command_json_error_on_stderr(command, bad_files, tmp_path):
    r = run_cli(*_bad_invocation(command, bad_files["garbage"], tmp_path), "--json")
    assert 1 == r.returncode
    if command == "verify":          # per-file results are the output itself
        err = json.loads(r.stdout)["files"][0]["error"]
    else:
        assert "" == r.stdout
        err = json.loads(r.stderr)["error"]
    assert "bad_identifier" == err["code"]
    assert 4 == err["offset"]
    assert bad_files["garbage"] == err["file"]


@pytest.mark.parametrize("command", COMMANDS)
def test_every_command_missing_file(command, tmp_path):
    path = str(tmp_path / "missing.ptl")
    r = run_cli(*_bad_invocation(command, path, tmp_path))
    assert 1 == r.returncode
    assert "Traceback" not in r.stderr
    assert "No such file" in (r.stdout + r.stderr)


@pytest.mark.parametrize("command", (None,) + COMMANDS)
def test_help_has_examples(command):
    r = run_cli(*([command] if command else []), "--help")
    assert 0 == r.returncode, r.stderr
    assert "examples:" in r.stdout
    assert "pyflatmodule" in r.stdout


def test_colour_when_asked_and_never_off_a_terminal():
    # on a terminal: test_colour_only_on_a_terminal_and_never_with_no_color, end to end
    assert "\x1b[" not in run_cli("verify", model_path("mlp_jit.ff")).stdout
    assert "\x1b[" in run_cli("verify", "--color", "always", model_path("mlp_jit.ff")).stdout
    assert "\x1b[" not in run_cli("tree", "--color", "never", model_path("mlp_jit.ff")).stdout


# ================================================================== verify

def test_verify_every_real_file_one_line_each():
    paths = [model_path(n) for n in ALL_MODELS]
    r = run_cli("verify", *paths)
    assert 0 == r.returncode, r.stdout + r.stderr
    lines = r.stdout.strip().splitlines()
    assert len(paths) == len(lines)
    for path, line in zip(paths, lines):
        assert line.startswith(f"{path}: OK"), line


def test_verify_reports_code_offset_and_path_as_the_library(bad_files):
    paths = [model_path("mlp_jit.ff")] + list(bad_files.values())
    r = run_cli("verify", "--json", *paths)
    assert 1 == r.returncode
    out = json.loads(r.stdout)
    assert 1 == out["valid"] and len(bad_files) == out["invalid"]
    assert paths == [f["file"] for f in out["files"]]
    assert out["files"][0]["valid"] and out["files"][0]["size"] == os.path.getsize(paths[0])
    for entry in out["files"][1:]:
        with pytest.raises(pfm.FormatError) as info:
            pfm.verify(entry["file"])
        e = info.value
        assert {"file": entry["file"], "code": e.code, "message": e.reason,
                "offset": e.offset, "path": e.path} == entry["error"]
    text = run_cli("verify", *paths)
    assert 1 == text.returncode
    lines = text.stdout.strip().splitlines()
    assert len(paths) == len(lines)
    truncated = next(f for f in out["files"] if f["file"] == bad_files["truncated"])["error"]
    line = next(s for s in lines if s.startswith(bad_files["truncated"]))
    assert f"[{truncated['code']}]" in line and f"offset {truncated['offset']}" in line
    assert truncated["path"] in line


def test_verify_directories_stdin_and_quiet(tmp_path, bad_files):
    tree = tmp_path / "models" / "sub"
    tree.mkdir(parents=True)
    for k, name in enumerate(MODEL_FILES):
        os.link(model_path(name), tree / f"{k}_{name}")
    (tree / "notes.txt").write_text("not a model")
    r = run_cli("verify", str(tmp_path / "models"))
    assert 0 == r.returncode, r.stdout
    assert len(MODEL_FILES) == len(r.stdout.strip().splitlines())
    assert "notes.txt" not in r.stdout
    listing = "\n".join([model_path("mlp_jit.ff"), bad_files["garbage"]]) + "\n"
    r = run_cli("verify", "-q", "-", stdin=listing)
    assert 1 == r.returncode
    lines = r.stdout.strip().splitlines()
    assert 1 == len(lines) and lines[0].startswith(bad_files["garbage"])
    r = run_cli("verify", "--stats", "-q", str(tmp_path / "models"))
    assert 0 == r.returncode and "" == r.stdout
    assert "files/s" in r.stderr


def test_verify_usage_errors(tmp_path):
    assert 2 == run_cli("verify").returncode
    empty = tmp_path / "empty"
    empty.mkdir()
    r = run_cli("verify", str(empty))
    assert 2 == r.returncode and "no model files" in r.stderr


def test_verify_many_files(tmp_path):
    """A directory of a few hundred models: every file gets its line, quickly."""
    n = 0
    for k in range(20):
        for name in MODEL_FILES:
            os.link(model_path(name), tmp_path / f"{k}_{name}")
            n += 1
    r = run_cli("verify", "--stats", str(tmp_path))
    assert 0 == r.returncode
    assert n == len(r.stdout.strip().splitlines())
    assert f"{n} files: {n} valid, 0 invalid" in r.stderr


# ================================================================== tree

def _nodes(node: Dict[str, Any]) -> Iterator[Dict[str, Any]]:
    yield node
    for child in node.get("children", []):
        yield from _nodes(child)


@pytest.mark.parametrize("name", ["sample.ptl", "mlp_jit.ff", "layouts.ff", "quantized.ff",
                                  "dtypes.ff", "deep_wide.ff", "ivalues.ff"])
def test_tree_shows_every_state_dict_tensor_as_torch_has_it(name):
    out = _one(run_cli("tree", "--json", model_path(name)))
    doc, _ = load_expectation(name, "oracle")
    by_path = {n["path"]: n for n in _nodes(out["root"])}
    for key, t in doc["state_dict"]["tensors"].items():
        node = by_path[key]
        assert node["kind"] == ("qtensor" if "qscheme" in t else "tensor")
        assert t["dtype"] == node["dtype"], key
        assert t["shape"] == node["shape"], key
        assert isinstance(node["storage"], int)
        if "qscheme" in t:
            assert t["qscheme"] == node["qscheme"]
    # the stored parameter marker, as torch's mobile loader reads it
    for key, t in doc["mobile"]["parameters"]["tensors"].items():
        assert t["requires_grad"] == by_path[key]["requires_grad"], key


def test_tree_storage_indices_follow_shared_storage():
    out = _one(run_cli("tree", "--json", model_path("layouts.ff")))
    inputs, _ = load_expectation("layouts.ff", "inputs")
    nodes = {n["path"]: n for n in _nodes(out["root"]) if n["kind"] == "tensor"}
    shared = set(inputs["shared_storage_groups"][0])
    assert 1 == len({nodes[p]["storage"] for p in shared})
    others = [nodes[p]["storage"] for p in nodes if p not in shared]
    assert len(others) == len(set(others))
    assert nodes["base"]["storage"] not in others


def test_tree_text_depth_and_filter():
    path = model_path("sample.ptl")
    doc, _ = load_expectation("sample.ptl", "inputs")
    text = run_cli("tree", path).stdout
    for qualified in doc["qualified_names"].values():
        assert qualified in text
    oracle, _ = load_expectation("sample.ptl", "oracle")
    w = oracle["state_dict"]["tensors"]["features.0.weight"]
    assert f"tensor {w['dtype']}{w['shape']}" in text
    assert f"{4 * math.prod(w['shape']):,} bytes" in text

    shallow = _one(run_cli("tree", "--json", "--depth", "1", path))["root"]
    assert all("children" not in c for c in shallow["children"])
    assert any("truncated" in c for c in shallow["children"])
    assert "not shown" in run_cli("tree", "--depth", "1", path).stdout

    filtered = _one(run_cli("tree", "--json", "--filter", "running", path))["root"]
    leaves = [n for n in _nodes(filtered) if "children" not in n or not n["children"]]
    assert sorted(n["path"] for n in leaves) == \
        ["features.1.running_mean", "features.1.running_var"]
    assert 2 == run_cli("tree", "--depth", "-1", path).returncode


def test_tree_set_state_and_custom_class_objects():
    out = _one(run_cli("tree", "--json", model_path("setstate.ff")))
    inputs, _ = load_expectation("setstate.ff", "inputs")
    by_path = {n["path"]: n for n in _nodes(out["root"])}
    assert "class_with_setstate" == out["root"]["object_kind"]
    for attr, value in inputs["after_setstate"].items():
        assert value == by_path[attr]["value"]
    out = _one(run_cli("tree", "--json", model_path("dynamic_quant_linear.ff")))
    kinds = {n["object_kind"] for n in _nodes(out["root"]) if n["kind"] == "object"}
    assert "custom_class" in kinds
    assert any(n["kind"] == "qtensor" for n in _nodes(out["root"]))


def test_tree_containers_of_tensors():
    out = _one(run_cli("tree", "--json", model_path("mlp_params.ff")))
    oracle, _ = load_expectation("mlp_params.ff", "oracle")
    tensors = {n["path"]: n for n in _nodes(out["root"]) if n["kind"] == "tensor"}
    expected = oracle["parameters_file"]["tensors"]
    assert sorted(f"data[{k!r}]" for k in expected) == sorted(tensors)
    for k, t in expected.items():
        assert t["dtype"] == tensors[f"data[{k!r}]"]["dtype"]
        assert t["shape"] == tensors[f"data[{k!r}]"]["shape"]


# ================================================================== dis

def test_dis_sample_has_opcodes_operators_constants_registers_schema():
    r = run_cli("dis", model_path("sample.ptl"), "forward")
    assert 0 == r.returncode, r.stderr
    text = r.stdout
    assert text.startswith("def __torch__.SampleNet.forward(self: __torch__.SampleNet, "
                           "x: Tensor) -> Tensor")
    oracle, _ = load_expectation("sample.ptl", "oracle")
    out = _one(run_cli("dis", "--json", model_path("sample.ptl"), "forward"))
    (f,) = out["methods"]
    names = {o["full_name"] for o in f["operators"]}
    assert names <= set(oracle["info"]["opname_to_num_args"])
    for o in f["operators"]:
        assert oracle["info"]["opname_to_num_args"][o["full_name"]] == o["num_args"]
        assert o["full_name"] in text
    assert "aten::flatten.using_ints" in text            # overloads are shown
    for opcode in ("STOREN", "LOADC", "LOAD", "MOVE", "OP", "JF", "LOOP", "RET"):
        assert f" {opcode} " in text or text.rstrip().endswith(opcode)
    assert " r1" in text and "r1..r2" in text
    assert "# 1e-05" in text and "'builtins.ValueError'" in text    # decoded constants
    assert "self.classifier" in text                                 # attribute names
    assert "-> " in text                                              # jump targets


def _plain(value: Any) -> Any:
    """Lists and tuples alike (JSON has only lists)."""
    return [_plain(v) for v in value] if isinstance(value, (list, tuple)) else value


def test_dis_schema_defaults_as_the_generator_set_them():
    out = _one(run_cli("dis", "--json", model_path("methods.ff")))
    inputs, _ = load_expectation("methods.ff", "inputs")
    by_name = {f["name"].split(".")[-1]: f for f in out["methods"]}
    assert set(inputs["methods"]) == set(by_name)
    text = run_cli("dis", model_path("methods.ff")).stdout
    checked = 0
    for method, defaults in inputs["defaults"].items():
        args = {a["name"]: a for a in by_name[method]["schema"]["arguments"]}
        for arg, value in defaults.items():
            got = args[arg]["default"]
            if value is None:                # "default None" is stored as "no default"
                assert got is None
                continue
            if value == "-0.0":
                assert "-0.0" == got
            else:
                decoded = eval(got)
                assert _plain(value) == _plain(decoded), (method, arg)
                assert type(value) is type(decoded) or isinstance(value, list)
            assert f"{arg}: {args[arg]['type']}={got}" in text
            checked += 1
    assert checked >= 10


def test_dis_unknown_method_and_all_functions():
    r = run_cli("dis", model_path("sample.ptl"), "nosuch")
    assert 1 == r.returncode
    assert "__torch__.SampleNet.forward" in r.stderr and "Traceback" not in r.stderr
    out = _one(run_cli("dis", "--json", "--all", model_path("setstate.ff")))
    assert any(f["name"].endswith("__setstate__") for f in out["methods"])


# ================================================================== ops

def _ops_status(doc: Dict[str, Any]) -> int:
    """``ops``' exit status by torch's answers: 1 for a file without functions."""
    return 1 if doc["info"]["function_names"] == [] else 0


@pytest.mark.parametrize("name", ALL_MODELS)
def test_ops_equal_torchs_stored_operator_lists(name):
    r = run_cli("ops", model_path(name))
    doc, _ = load_expectation(name, "oracle")
    assert _ops_status(doc) == r.returncode, r.stderr
    got = r.stdout.split()
    assert sorted(doc["info"]["opname_to_num_args"]) == got
    if "error" not in doc["mobile"]:
        assert sorted(doc["mobile"]["operator_list"]) == got


_TORCH_OPS = r'''
import json, os, sys
import torch, torch.jit.mobile

def jit(path):
    return sorted(torch.jit.export_opnames(torch.jit.jit_module_from_flatbuffer(path)))

def mobile(path):
    return sorted(torch.jit.mobile._export_operator_list(
        torch.jit.mobile._load_for_lite_interpreter(path)))

def child(fn, path):
    """fn(path) in a forked child: torch crashes on some valid files."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        try:
            import signal
            signal.alarm(120)
            data = json.dumps({"ops": fn(path)})
        except BaseException as e:
            data = json.dumps({"error": repr(e)[:200]})
        os.write(w, data.encode())
        os._exit(0)
    os.close(w)
    chunks = []
    while True:
        b = os.read(r, 65536)
        if not b:
            break
        chunks.append(b)
    os.close(r)
    _, status = os.waitpid(pid, 0)
    try:
        return json.loads(b"".join(chunks) or b"{}")
    except ValueError:
        return {"error": f"child died (status {status})"}

out = {}
for path in sys.argv[1:]:
    res = child(jit, path)
    res["how"] = "torch.jit.export_opnames"
    if "ops" not in res:
        res = child(mobile, path)
        res["how"] = "torch.jit.mobile._export_operator_list"
    out[path] = res
print(json.dumps(out))
'''


@pytest.fixture(scope="module")
def torch_ops() -> Dict[str, Any]:
    """What torch says each model needs, torch imported once, each load in a fork."""
    paths = [model_path(n) for n in ALL_MODELS]
    r = subprocess.run([sys.executable, "-c", _TORCH_OPS, *paths], capture_output=True,
                       text=True, timeout=900)
    assert 0 == r.returncode, r.stderr[-2000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


@pytest.mark.torch
@pytest.mark.skipif(not HAS_TORCH, reason="torch is not installed")
@pytest.mark.parametrize("name", ALL_MODELS)
def test_ops_equal_torch_export_opnames_live(name, torch_ops):
    result = torch_ops[model_path(name)]
    if "ops" not in result:
        # only the enum-constant file: both of torch's loaders fail on it
        assert name == "enum_constant.ff", result
        pytest.skip(f"torch cannot load {name}: {result['error']}")
    r = run_cli("ops", model_path(name))
    assert _ops_status(load_expectation(name, "oracle")[0]) == r.returncode, r.stderr
    assert result["ops"] == r.stdout.split(), result["how"]


@pytest.mark.torch
@pytest.mark.skipif(not HAS_TORCH, reason="torch is not installed")
def test_ops_compared_live_on_every_model_torch_loads(torch_ops):
    loaded = [p for p, res in torch_ops.items() if "ops" in res]
    assert len(ALL_MODELS) - 1 == len(loaded)
    assert any(res["how"] == "torch.jit.export_opnames" for res in torch_ops.values())


def test_ops_yaml_and_json_and_union():
    yaml = pytest.importorskip("yaml")
    plain = run_cli("ops", model_path("sample.ptl")).stdout.split()
    r = run_cli("ops", "--yaml", model_path("sample.ptl"))
    assert 0 == r.returncode
    assert plain == yaml.safe_load(r.stdout)
    assert all(line.startswith("- ") for line in r.stdout.strip().splitlines())
    out = _json(run_cli("ops", "--json", model_path("sample.ptl"), model_path("methods.ff")))
    union = set(plain) | set(run_cli("ops", model_path("methods.ff")).stdout.split())
    assert sorted(union) == out["operators"]
    r = run_cli("ops", "--yaml", model_path("mlp_params.ff"))   # no list for a build
    assert (1, "") == (r.returncode, r.stdout) and "holds no methods" in r.stderr


# ================================================================== export

def _expected_state(name: str) -> Dict[str, Any]:
    """state_dict() of the file, each value checked against torch's oracle first."""
    with pfm.load(model_path(name)) as m:
        state = m.state_dict()
    desc, arrays = _oracle_tensors(name)
    if desc is not None:
        assert desc["keys"] == list(state)
        for key in desc["keys"]:
            assert_tensor(desc["tensors"][key], arrays, state[key], key)
    return state


def _dtype_names(name: str, state: Dict[str, Any]) -> Dict[str, str]:
    desc, _ = _oracle_tensors(name)
    if desc is not None:
        return {k: desc["tensors"][k]["dtype"] for k in state}
    return {k: (v.dtype_name if isinstance(v, pfm.QuantizedTensor) else str(v.dtype))
            for k, v in state.items()}


_ST_NAMES = {"float32": "F32", "float64": "F64", "float16": "F16", "bfloat16": "BF16",
             "int64": "I64", "int32": "I32", "int16": "I16", "int8": "I8", "uint8": "U8",
             "uint16": "U16", "uint32": "U32", "uint64": "U64", "bool": "BOOL",
             "complex64": "C64", "float8_e4m3fn": "F8_E4M3", "float8_e5m2": "F8_E5M2",
             "float8_e4m3fnuz": "F8_E4M3FNUZ", "float8_e5m2fnuz": "F8_E5M2FNUZ",
             "float8_e8m0fnu": "F8_E8M0", "float4_e2m1fn_x2": "F4",
             "qint8": "I8", "quint8": "U8", "qint32": "I32", "quint4x2": "U8",
             "complex128": "F64", "complex32": "F16", "bits16": "U16"}


def _expected_st_dtype(dtype: str) -> str:
    if dtype in _ST_NAMES:
        return _ST_NAMES[dtype]
    return "I8" if dtype.startswith("int") else "U8"     # bits*, uint1..7, int1..7


def _stored(value: Any) -> np.ndarray:
    return value.int_repr if isinstance(value, pfm.QuantizedTensor) else value


@pytest.mark.parametrize("name", ALL_MODELS)
def test_export_safetensors_loads_with_safetensors_bit_for_bit(name, tmp_path):
    safetensors = pytest.importorskip("safetensors")
    out = tmp_path / "w.safetensors"
    r = run_cli("export", model_path(name), str(out))
    assert 0 == r.returncode, r.stderr
    assert "" == r.stderr                             # not a terminal: no progress bar
    state = _expected_state(name)
    dtypes = _dtype_names(name, state)
    loaded = dict(safetensors.deserialize(out.read_bytes()))
    assert sorted(expected_names(state)) == sorted(loaded)
    with safetensors.safe_open(str(out), framework="numpy") as f:
        assert sorted(expected_names(state)) == sorted(f.keys())
        metadata = f.metadata() or {}
    for key, value in state.items():
        got = loaded[key]
        assert np.ascontiguousarray(_stored(value)).tobytes() == bytes(got["data"]), key
        assert _expected_st_dtype(dtypes[key]) == got["dtype"], key
        info = json.loads(metadata.get("tensor:" + key, "{}"))
        if got["dtype"] not in ("F4",) and dtypes[key] not in _ST_NAMES or \
                dtypes[key] in ("complex128", "complex32") or "qscheme" in info or \
                isinstance(value, pfm.QuantizedTensor):
            assert dtypes[key] == info["dtype"], key       # container types say what they hold
        if isinstance(value, pfm.QuantizedTensor):
            assert value.qscheme == info["qscheme"]
            if value.scales is not None:                  # checked against torch above
                for role, array in (("scales", value.scales),
                                    ("zero_points", value.zero_points)):
                    assert bytes(loaded[info[role]]["data"]) == array.tobytes(), key
    assert "pt" == metadata.get("format")


def _read_safetensors(data: bytes):
    """(metadata, {name: (dtype, shape, bytes)}) by the format's definition."""
    (n,) = np.frombuffer(data[:8], "<u8").tolist()
    assert 0 == (8 + n) % 8                               # header padded to 8 bytes
    header = json.loads(data[8:8 + n])
    metadata = header.pop("__metadata__", {})
    body = data[8 + n:]
    spans = sorted(tuple(v["data_offsets"]) for v in header.values())
    end = 0
    for start, stop in spans:                             # no gaps, no overlaps
        assert start == end
        end = stop
    assert len(body) == end
    return metadata, {k: (v["dtype"], v["shape"], body[v["data_offsets"][0]:
                                                       v["data_offsets"][1]])
                      for k, v in header.items()}


@pytest.mark.parametrize("name", ["dtypes.ff", "quantized.ff", "layouts.ff"])
def test_export_safetensors_layout_by_the_spec(name, tmp_path):
    """Also runs where the safetensors library is not installed."""
    out = tmp_path / "w.safetensors"
    assert 0 == run_cli("export", model_path(name), str(out)).returncode
    state = _expected_state(name)
    dtypes = _dtype_names(name, state)
    metadata, tensors = _read_safetensors(out.read_bytes())
    assert expected_names(state) == list(tensors)         # header in state_dict order
    assert all(isinstance(v, str) for v in metadata.values())
    for key, value in state.items():
        dtype, shape, raw = tensors[key]
        stored = _stored(value)
        assert np.ascontiguousarray(stored).tobytes() == raw, key
        assert _expected_st_dtype(dtypes[key]) == dtype, key
        if dtype == "F4":
            assert list(stored.shape[:-1]) + [2 * stored.shape[-1]] == shape
        elif dtypes[key] in ("complex128", "complex32"):
            assert list(stored.shape) + [2] == shape
        else:
            assert list(stored.shape) == shape, key


def test_export_safetensors_numpy_and_torch_loaders(tmp_path):
    safetensors_numpy = pytest.importorskip("safetensors.numpy")
    out = tmp_path / "mlp.safetensors"
    assert 0 == run_cli("export", model_path("mlp_jit.ff"), str(out)).returncode
    desc, arrays = _oracle_tensors("mlp_jit.ff")
    loaded = safetensors_numpy.load_file(str(out))
    assert sorted(desc["keys"]) == sorted(loaded)
    for key in desc["keys"]:
        t = desc["tensors"][key]
        assert t["dtype"] == str(loaded[key].dtype) and t["shape"] == list(loaded[key].shape)
        assert arrays[t["data"]].tobytes() == loaded[key].tobytes()
    if HAS_TORCH:
        import torch
        from safetensors import safe_open
        out = tmp_path / "dtypes.safetensors"
        assert 0 == run_cli("export", model_path("dtypes.ff"), str(out)).returncode
        desc, arrays = _oracle_tensors("dtypes.ff")
        with safe_open(str(out), framework="pt") as f:
            for key in ("bf16", "f16", "float8_e4m3fn", "float8_e5m2", "c64", "bool", "u64"):
                t = f.get_tensor(key)
                assert desc["tensors"][key]["dtype"] == str(t.dtype).split(".")[-1]
                raw = t.contiguous().reshape(-1).view(torch.uint8).numpy().tobytes()
                assert arrays[desc["tensors"][key]["data"]].tobytes() == raw


def test_export_quantized_parameters_in_metadata(tmp_path):
    safetensors = pytest.importorskip("safetensors")
    out = tmp_path / "q.safetensors"
    assert 0 == run_cli("export", model_path("quantized.ff"), str(out)).returncode
    desc, arrays = _oracle_tensors("quantized.ff")
    with safetensors.safe_open(str(out), framework="numpy") as f:
        metadata = f.metadata()
    assert all(isinstance(v, str) for v in metadata.values())
    loaded = dict(safetensors.deserialize(out.read_bytes()))
    for key in desc["keys"]:
        t = desc["tensors"][key]
        info = json.loads(metadata["tensor:" + key])
        assert t["dtype"] == info["dtype"] and t["qscheme"] == info["qscheme"]
        assert arrays[t["int_repr"]].tobytes() == bytes(loaded[key]["data"])
        assert t["shape"] == info.get("shape", loaded[key]["shape"])
        if "scale" in t:
            assert same_float(hex_float(t["scale"]), info["scale"])
            assert t["zero_point"] == info["zero_point"]
        else:                                             # arrays beside the tensor
            assert t["axis"] == info["axis"]
            scales, zero_points = (np.frombuffer(bytes(loaded[info[r]]["data"]),
                                                 ST_NUMPY[loaded[info[r]]["dtype"]])
                                   for r in ("scales", "zero_points"))
            assert [hex_float(x) for x in t["scales"]] == scales.tolist()
            assert [hex_float(x) for x in t["zero_points"]] == \
                [float(x) for x in zero_points]


@pytest.mark.parametrize("name", ["dtypes.ff", "quantized.ff", "layouts.ff", "mlp_params.ff",
                                  "sample.ptl"])
def test_export_npz_loads_with_numpy_bit_for_bit(name, tmp_path):
    out = tmp_path / "w.npz"
    r = run_cli("export", "--json", model_path(name), str(out))
    summary = _one(r)
    state = _expected_state(name)
    dtypes = _dtype_names(name, state)
    names = expected_names(state)
    assert len(names) == summary["tensors"] and "npz" == summary["output_format"]
    with np.load(str(out), allow_pickle=False) as z:
        meta = json.loads(str(z["__metadata__"]))
        assert sorted(names) == sorted(k for k in z.files if k != "__metadata__")
        for key, value in state.items():
            stored = _stored(value)
            got = z[key]
            assert stored.shape == got.shape, key
            assert np.ascontiguousarray(stored).tobytes() == got.tobytes(), key
            assert dtypes[key] == meta["tensors"][key]["dtype"], key
            if stored.dtype.isbuiltin == 1 or stored.dtype.names:
                assert stored.dtype == got.dtype, key


def test_export_progress_bar_and_usage_errors(tmp_path):
    out = tmp_path / "w.safetensors"
    r = run_cli("export", "--progress", model_path("sample.ptl"), str(out))
    assert 0 == r.returncode
    assert "100.0%" in r.stderr and "export" in r.stderr
    r = run_cli("export", model_path("sample.ptl"), str(tmp_path / "w.bin"))
    assert 2 == r.returncode and "--format" in r.stderr
    r = run_cli("export", "--format", "npz", model_path("sample.ptl"), str(tmp_path / "w.bin"))
    assert 0 == r.returncode
    with np.load(str(tmp_path / "w.bin")) as z:
        assert "features.0.weight" in z.files
    r = run_cli("export", model_path("sample.ptl"), str(tmp_path))
    assert 2 == r.returncode


def test_export_streams_non_contiguous_tensors_in_bounded_chunks():
    base = np.arange(3 * CHUNK_BYTES // 4, dtype=np.float32).reshape(-1, 1024)
    transposed = base.T                     # non-contiguous, 3 chunks' worth
    pieces = list(iter_bytes(transposed))
    assert all(p.nbytes <= CHUNK_BYTES for p in pieces)
    assert np.ascontiguousarray(transposed).tobytes() == b"".join(bytes(p) for p in pieces)
    contiguous = list(iter_bytes(base))     # zero-copy slices of the array's own memory
    assert all(np.shares_memory(np.frombuffer(p, np.uint8), base) for p in contiguous)
    expanded = np.broadcast_to(np.arange(4, dtype=np.int16), (5, 4))
    assert np.ascontiguousarray(expanded).tobytes() == b"".join(bytes(p) for p in
                                                                 iter_bytes(expanded))
    assert b"\x00\x00\x80\x3f" == b"".join(bytes(p) for p in iter_bytes(np.array(1.0, "<f4")))


# ================================================================== extract

def test_extract_every_extra_file_to_stdout_and_file(tmp_path):
    inputs, _ = load_expectation("extra_files.ff", "inputs")
    for name, b64 in inputs["extra_files"].items():
        expected = base64.b64decode(b64)
        r = run_cli("extract", model_path("extra_files.ff"), name)
        assert 0 == r.returncode, r.stderr
        assert expected == r.stdout_bytes
        target = tmp_path / "out.bin"
        r = run_cli("extract", model_path("extra_files.ff"), name, "-o", str(target))
        assert 0 == r.returncode and "" == r.stdout
        assert expected == target.read_bytes()
        out = _one(run_cli("extract", "--json", model_path("extra_files.ff"), name))
        assert len(expected) == out["size"]
        assert hashlib.sha256(expected).hexdigest() == out["sha256"]
        assert expected == base64.b64decode(out["content_base64"])


def test_extract_missing_name_and_jit_source():
    r = run_cli("extract", model_path("sample.ptl"), "nope.json")
    assert 1 == r.returncode
    assert "model_info.json" in r.stderr and "Traceback" not in r.stderr
    r = run_cli("extract", "--jit-source", model_path("sample.ptl"), "__torch__")
    assert 0 == r.returncode
    assert "class SampleNet" in r.stdout


# ================================================================== files without methods

@pytest.mark.parametrize("command", ["dis", "ops", "memory"])
def test_file_without_methods_is_exit_status_1_and_says_so(command):
    """An empty answer would pass for one (a build pipeline taking an empty operator
    list): a file without methods is an error, the one status of the three commands."""
    doc, _ = load_expectation("mlp_params.ff", "oracle")
    assert [] == doc["info"]["function_names"] == doc["mobile"]["method_names"]
    path = model_path("mlp_params.ff")
    r = run_cli(command, path)
    assert 1 == r.returncode
    assert "" == r.stdout
    assert [f"pyflatmodule: {path}: holds no methods"] == \
        [line.split(";")[0] for line in r.stderr.splitlines()]
    r = run_cli(command, "--json", path)
    assert 1 == r.returncode
    if command == "memory":     # no plans to give: the error as a JSON document
        assert "" == r.stdout and json.loads(r.stderr)["error"]["code"] == "no_methods"
    else:                       # one entry per file, this one empty; stderr stays free
        assert "" == r.stderr and json.loads(r.stdout)["files"][0][
            "operators" if command == "ops" else "methods"] in (None, [])


@pytest.mark.parametrize("command", ["dis", "ops"])
def test_file_with_methods_gets_no_note(command):
    r = run_cli(command, model_path("sample.ptl"))
    assert 0 == r.returncode and "" == r.stderr and r.stdout
    if command == "ops":   # next to a file without methods: that one is the error
        path = model_path("mlp_params.ff")
        r = run_cli("ops", model_path("sample.ptl"), path)
        assert 1 == r.returncode and [f"pyflatmodule: {path}: holds no methods"] == \
            [line.split(";")[0] for line in r.stderr.splitlines()]


# ================================================================== output files

def _copy_of_sample(tmp_path) -> str:
    p = tmp_path / "model.ptl"
    with open(model_path("sample.ptl"), "rb") as f:
        p.write_bytes(f.read())
    return str(p)


@pytest.mark.parametrize("link", ["same path", "symlink", "hard link", "other spelling"])
@pytest.mark.parametrize("command", ["export", "extract"])
def test_output_may_not_be_the_input(command, link, tmp_path):
    model = _copy_of_sample(tmp_path)
    with open(model, "rb") as f:
        before = f.read()
    out = {"same path": model, "other spelling": os.path.join(str(tmp_path), ".", "model.ptl"),
           "symlink": str(tmp_path / "link.ptl"), "hard link": str(tmp_path / "hard.ptl")}[link]
    if link == "symlink":
        os.symlink(model, out)
    elif link == "hard link":
        os.link(model, out)
    argv = (["export", model, out, "--format", "npz"] if command == "export"
            else ["extract", model, "model_info.json", "-o", out])
    r = run_cli(*argv)
    assert 2 == r.returncode
    assert [f"pyflatmodule: {out}: "] == [ln[:len(out) + 16] for ln in r.stderr.splitlines()]
    assert "refusing to overwrite" in r.stderr and "Traceback" not in r.stderr
    with open(model, "rb") as f:
        assert before == f.read()
    assert os.path.samefile(model, out)
    assert sorted(os.listdir(tmp_path)) == sorted(
        {"model.ptl", os.path.basename(out)})               # no temporary file left
    err = json.loads(run_cli(*argv, "--json").stderr)["error"]
    assert (out, "usage") == (err["file"], err["code"])


@pytest.mark.parametrize("command", ["export", "extract"])
def test_unwritable_output_is_blamed_not_the_model(command, tmp_path):
    model = model_path("sample.ptl")
    out = str(tmp_path / "no" / "such" / "dir" / "w.npz")
    argv = (["export", model, out] if command == "export"
            else ["extract", model, "model_info.json", "-o", out])
    r = run_cli(*argv)
    assert 1 == r.returncode
    assert [f"pyflatmodule: {out}: cannot write: No such file or directory"] == \
        r.stderr.splitlines()
    err = json.loads(run_cli(*argv, "--json").stderr)["error"]
    assert (out, "io_error") == (err["file"], err["code"])
    assert not os.path.exists(tmp_path / "no")


# ================================================================== end to end

def _child_env(**extra: str) -> Dict[str, str]:
    """The environment of a shell without NO_COLOR, plus ``extra``."""
    env = {k: v for k, v in os.environ.items() if k != "NO_COLOR"}
    env.update(extra)
    return env


def _process(*args: str, script: bool = False,
             **kwargs: Any) -> "subprocess.CompletedProcess[bytes]":
    """``python -m pyflatmodule ARGS`` (or the ``pyflatmodule`` console script) in a child
    process; stdout and stderr captured as bytes unless ``kwargs`` say otherwise."""
    if script:
        program = [os.path.join(os.path.dirname(sys.executable), "pyflatmodule")]
        if not os.path.exists(program[0]):
            pytest.skip(f"no pyflatmodule console script beside {sys.executable}")
    else:
        program = [sys.executable, "-m", "pyflatmodule"]
    kwargs.setdefault("capture_output", "stdout" not in kwargs)
    return subprocess.run([*program, *args], env=_child_env(), timeout=180, **kwargs)


def test_python_m_describes_the_bundled_sample():
    r = _process("info")
    assert 0 == r.returncode, r.stderr
    doc, _ = load_expectation("sample.ptl", "oracle")
    for name in doc["info"]["function_names"]:
        assert name.encode() in r.stdout
    assert b"\x1b[" not in r.stdout and b"" == r.stderr


def test_console_script_exit_statuses():
    r = _process("--version", script=True)
    assert 0 == r.returncode and f"pyflatmodule {pfm.__version__}".encode() in r.stdout
    r = _process("verify", model_path("mlp_jit.ff"), script=True)
    assert 0 == r.returncode
    assert r.stdout.decode().startswith(f"{model_path('mlp_jit.ff')}: OK")
    r = _process("frobnicate", script=True)
    assert 2 == r.returncode and b"usage:" in r.stderr


def test_python_m_bad_file_is_one_line_no_traceback(bad_files):
    r = _process("info", bad_files["garbage"])
    assert 1 == r.returncode and b"" == r.stdout
    assert [b"bad_identifier" in line for line in r.stderr.splitlines()] == [True]
    r = _process("info", "--json", bad_files["garbage"])
    assert 1 == r.returncode and b"" == r.stdout
    err = json.loads(r.stderr)["error"]
    assert ("bad_identifier", 4, bad_files["garbage"]) == (err["code"], err["offset"],
                                                            err["file"])


def test_python_m_extract_writes_raw_bytes_to_stdout():
    inputs, _ = load_expectation("extra_files.ff", "inputs")
    for name, b64 in inputs["extra_files"].items():
        r = _process("extract", model_path("extra_files.ff"), name)
        assert 0 == r.returncode, r.stderr
        assert base64.b64decode(b64) == r.stdout


def test_closed_stdout_stops_quietly():
    """The reader went away (``| head``): no traceback, no "Exception ignored", exit 0,
    as other Unix tools end in a pipeline."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        r = _process("verify", model_path("mlp_jit.ff"), stdout=write_end,
                     stderr=subprocess.PIPE)
    finally:
        os.close(write_end)
    assert (0, b"") == (r.returncode, r.stderr)


@pytest.mark.parametrize("command", ["dis", "memory", "tree", "info"])
def test_a_pipe_closed_early_ends_quietly_with_status_0(command):
    """``pyflatmodule COMMAND P | head -1`` in a shell, many times: the reader closes the
    pipe at any point of the output, and the command's status is 0 every time."""
    path = model_path(os.path.join("et", "xnn_attention.pte"))
    script = (f"for i in 1 2 3 4 5 6 7 8; do {shlex.quote(sys.executable)} -m pyflatmodule "
              f"{command} {shlex.quote(path)} | head -1 >/dev/null; "
              "echo ${PIPESTATUS[0]}; done")
    r = subprocess.run(["bash", "-c", script], env=_child_env(), capture_output=True,
                       text=True, timeout=300)
    assert r.stdout.split() == ["0"] * 8 and r.stderr == "", (r.stdout, r.stderr)


def _run_in_terminal(*args: str, **env: str) -> str:
    """Run with stdout and stderr on a pseudo-terminal; returns what it printed."""
    main, child = pty.openpty()
    p = subprocess.Popen([sys.executable, "-m", "pyflatmodule", *args], stdout=child,
                         stderr=child, env=_child_env(**env))
    os.close(child)
    chunks = []
    while True:
        try:
            data = os.read(main, 65536)
        except OSError:
            break
        if not data:
            break
        chunks.append(data)
    p.wait(timeout=120)
    os.close(main)
    return b"".join(chunks).decode("utf-8", "replace")


def test_colour_only_on_a_terminal_and_never_with_no_color():
    assert "\x1b[" in _run_in_terminal("verify", model_path("mlp_jit.ff"), TERM="xterm")
    assert "\x1b[" not in _run_in_terminal("verify", model_path("mlp_jit.ff"), TERM="xterm",
                                           NO_COLOR="1")


_IMPORTED_ML_DTYPES = """
import sys
import pyflatmodule.cli
assert 'ml_dtypes' not in sys.modules, 'imported by pyflatmodule.cli'
status = pyflatmodule.cli.main(sys.argv[1:])
print(status, sorted(m for m in sys.modules if m.split('.')[0] == 'ml_dtypes')[:1])
"""


@pytest.mark.parametrize("argv", [["info"], ["export"], ["tree"]])
def test_ml_dtypes_imported_only_for_files_that_need_it(argv, tmp_path):
    def imported(name: str) -> str:
        extra = [str(tmp_path / "w.safetensors")] if argv == ["export"] else []
        r = subprocess.run([sys.executable, "-c", _IMPORTED_ML_DTYPES, *argv,
                            model_path(name), *extra], capture_output=True, text=True,
                           timeout=120)
        assert 0 == r.returncode, r.stderr
        return r.stdout.splitlines()[-1]

    dtypes = {t["dtype"] for t in _oracle_tensors("sample.ptl")[0]["tensors"].values()}
    assert {"float32", "int64"} == dtypes         # torch: numpy's own types only
    assert "0 []" == imported("sample.ptl")
    dtypes = {t["dtype"] for t in _oracle_tensors("dtypes.ff")[0]["tensors"].values()}
    assert "bfloat16" in dtypes                   # torch: a type numpy lacks
    assert "0 ['ml_dtypes']" == imported("dtypes.ff")


def test_numpy_not_imported_with_the_package():
    """numpy is imported when an array is first made (it costs more than the
    interpreter's own start-up), not with the package or its command line."""
    script = ("import sys, pyflatmodule, pyflatmodule.cli, pyflatmodule.__main__\n"
              "print(sorted(m for m in sys.modules if m.split('.')[0] == 'numpy')[:1])\n")
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                       timeout=120)
    assert (0, "[]") == (r.returncode, r.stdout.strip()), r.stderr


def test_the_command_line_loads_only_what_a_program_needs():
    """The command line's start-up and ``info`` of a program load no PTMF, profile,
    ETRecord, diff or naming code, and no backend reader the program does not use."""
    script = ("import sys\n"
              "from pyflatmodule.cli import main\n"
              "main(['info', sys.argv[1]])\n"
              "print(sorted(m for m in sys.modules if m.startswith('pyflatmodule.')))\n")
    r = subprocess.run([sys.executable, "-c", script, os.path.join(ET, "mlp.pte")],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    loaded = set(ast.literal_eval(r.stdout.splitlines()[-1]))
    assert "pyflatmodule.executorch.program" in loaded
    unused = {"pyflatmodule.ptmf", "pyflatmodule.executorch.profile",
              "pyflatmodule.executorch.etrecord", "pyflatmodule.executorch.etdump",
              "pyflatmodule.diff", "pyflatmodule.naming",
              "pyflatmodule.export", "pyflatmodule.core.torch_save",
              "pyflatmodule.executorch.backends.xnnpack",
              "pyflatmodule.executorch.backends.coreml", "pyflatmodule.core.protobuf"}
    assert not loaded & unused


@pytest.mark.parametrize("args", [["info", "mlp.pte"], ["verify", "mlp.pte"],
                                  ["info", "xnn_conv.pte"], ["verify", "--strict", "xnn_conv.pte"],
                                  ["info", "vulkan.pte"], ["verify", "vulkan.pte"],
                                  ["info", "tosa_mlp.pte"], ["verify", "native_mlp.pte"],
                                  ["info", "external.pte", "--data", "external.ptd"],
                                  ["verify", "external.ptd"]])
def test_info_and_verify_answer_without_numpy(args):
    """``info`` and ``verify`` hold no array in their answers, so they never pay numpy's
    import (more than the interpreter's own start-up): the index is read through cffi,
    payloads reach the C core without a numpy view (XNNPACK, Vulkan, TOSA and the native
    backend's readers check theirs without numpy)."""
    script = ("import sys\n"
              "from pyflatmodule.cli import main\n"
              "code = main(sys.argv[1:])\n"
              "print(code, 'numpy' in sys.modules)\n")
    argv = [a if not a.endswith((".pte", ".ptd")) else os.path.join(ET, a) for a in args]
    r = subprocess.run([sys.executable, "-c", script, *argv],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines()[-1] == "0 False", r.stdout


# ================================================================== source tree

def test_uncompiled_source_tree_says_what_to_do(tmp_path):
    """``python -m pyflatmodule`` from a checkout without the compiled core: the
    current directory comes first on sys.path, so its package hides the installed one."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(pfm.__file__)))
    copy = tmp_path / "src"
    shutil.copytree(os.path.join(root, "pyflatmodule"), copy / "pyflatmodule",
                    ignore=shutil.ignore_patterns("_c.*.so", "_c.*.pyd", "__pycache__"))
    assert not [n for n in os.listdir(copy / "pyflatmodule" / "core") if n.startswith("_c.")
                and not n.endswith(".pyi")]
    # An editable install's import hook would find the compiled core elsewhere: drop it,
    # as a regular install has none, then run the package as `python -m` does.
    program = ("import runpy, sys\n"
               "sys.meta_path[:] = [f for f in sys.meta_path if not\n"
               "                    getattr(f, '__module__', '').startswith('__editable_')]\n"
               "sys.argv[1:] = ['info']\n"
               "runpy.run_module('pyflatmodule', run_name='__main__', alter_sys=True)\n")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONSAFEPATH")}
    r = subprocess.run([sys.executable, "-c", program], cwd=copy, capture_output=True,
                       text=True, timeout=120, env=env)
    assert 0 != r.returncode
    last = r.stderr.strip().splitlines()[-1]
    assert last.startswith("ImportError: pyflatmodule's compiled core (pyflatmodule.core._c)")
    assert str(copy / "pyflatmodule") in last
    assert "Run from another directory" in last
    assert "python setup.py build_ext --inplace" in last
