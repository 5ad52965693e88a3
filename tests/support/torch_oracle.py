#!/usr/bin/env python3
"""Torch-side oracle: what torch 2.13 reads from a PTMF (flatbuffer) model file.

Usage as a script::

    python tests/support/torch_oracle.py MODEL_PATH OUT_PREFIX [--parts info,state_dict,...]

writes ``OUT_PREFIX.json`` and ``OUT_PREFIX.npz``.  Usage as a module::

    from support.torch_oracle import run_oracle
    result, arrays = run_oracle("model.ptl")   # dict (JSON-able), dict of uint8 arrays

Every torch load happens in its own child process (torch segfaults on some valid files):
a crash, exception or timeout of one part is recorded as ``{"error": "..."}`` and the
other parts still run.

Parts
-----
info             torch.jit.get_flatbuffer_module_info(path)
state_dict       torch.jit.jit_module_from_flatbuffer(path).state_dict()
mobile           torch.jit.mobile._load_for_lite_interpreter(path) + what the C++ mobile
                 module exposes (method names, named_parameters, extra files), through a
                 tiny C++ extension compiled once with torch.utils.cpp_extension.load_inline
attributes       every attribute of the jit-loaded root module and its submodules,
                 enumerated with torch._C._jit_debug_module_iterators(m._c)["named_attributes"]
parameters_file  torch::jit::_load_parameters(path) (C++; reader for files written by
                 torch._C._save_parameters), through the same C++ extension

Encodings: TENSOR and VALUE as documented in tests/data/README.md.  Raw tensor bytes go
to the npz as uint8 arrays; the JSON names them by key.

Dependencies: torch, numpy, stdlib only.
"""
from __future__ import annotations

import base64
import io
import json
import os
import signal
import subprocess
import sys
import tempfile

ALL_PARTS = ("info", "state_dict", "mobile", "attributes", "parameters_file")
DEFAULT_TIMEOUT = 120.0
_HERE = os.path.abspath(__file__)

# --------------------------------------------------------------------------------------
# C++ helper extension (mobile module internals that have no Python binding)
# --------------------------------------------------------------------------------------

_EXT_SRC = r"""
#include <torch/extension.h>
#include <torch/csrc/jit/mobile/import.h>
#include <torch/csrc/jit/mobile/import_data.h>
#include <torch/csrc/jit/mobile/module.h>

// Loaded modules are kept alive on purpose: tensors read from a file alias its
// mapping and dangle once the module is destroyed.
static std::vector<std::shared_ptr<torch::jit::mobile::Module>> g_keep;

std::vector<std::pair<std::string, at::Tensor>> load_parameters(const std::string& f) {
  auto m = torch::jit::_load_parameters(f);
  return {m.begin(), m.end()};
}

std::vector<std::pair<std::string, at::Tensor>> mobile_named_parameters(const std::string& f) {
  auto m = std::make_shared<torch::jit::mobile::Module>(torch::jit::_load_for_mobile(f));
  g_keep.push_back(m);
  auto p = m->named_parameters();
  return {p.begin(), p.end()};
}

std::vector<std::string> mobile_method_names(const std::string& f) {
  auto m = torch::jit::_load_for_mobile(f);
  std::vector<std::string> r;
  for (auto& meth : m.get_methods()) r.push_back(meth.function().qualname().qualifiedName());
  return r;
}

std::vector<std::pair<std::string, py::bytes>> mobile_extra_files(const std::string& f) {
  torch::jit::ExtraFilesMap extra;
  auto m = torch::jit::_load_for_mobile(f, std::nullopt, extra);
  std::vector<std::pair<std::string, py::bytes>> r;
  for (auto& kv : extra) r.emplace_back(kv.first, py::bytes(kv.second));
  return r;
}
"""
_EXT_FUNCS = ["load_parameters", "mobile_named_parameters", "mobile_method_names",
              "mobile_extra_files"]


def _ext_dir():
    import torch
    d = os.environ.get("PYFLATMODULE_ORACLE_EXT_DIR")
    if not d:
        d = os.path.join(tempfile.gettempdir(),
                         "pyflatmodule_oracle_ext_" + torch.__version__.replace("+", "_"))
    os.makedirs(d, exist_ok=True)
    return d


_EXT_NAME = "pyflatmodule_oracle_ext"
#: The parent's build of the helper, once per process: None (built) or the error.
_EXT_BUILT = []


def _build_ext_here():
    """Compiles the helper (the ``--build-ext-child`` child). torch's builder waits for as long
    as its lock file exists: one older than any build is a killed build's, and goes."""
    import time

    from torch.utils.cpp_extension import load_inline
    lock = os.path.join(_ext_dir(), "lock")
    if os.path.exists(lock) and time.time() - os.path.getmtime(lock) > 600:
        os.remove(lock)
    load_inline(_EXT_NAME, cpp_sources=_EXT_SRC, functions=_EXT_FUNCS,
                build_directory=_ext_dir(), extra_cflags=["-O1"], verbose=True)


def _get_ext():
    """The helper the parent built; a part child never compiles (nor waits on a build)."""
    import importlib.util

    import torch  # noqa: F401  (the helper links against torch's libraries)
    so = os.path.join(_ext_dir(), _EXT_NAME + ".so")
    if not os.path.exists(so):
        raise RuntimeError(f"the helper extension is not built ({so})")
    spec = importlib.util.spec_from_file_location(_EXT_NAME, so)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def build_ext(timeout=600.0):
    """Builds (or finds) the helper extension in a child process, once per process;
    returns an error or None. A build that times out is killed with its compiler and its
    lock removed, so that no later build waits on it."""
    if not _EXT_BUILT:
        err = _run_child(["--build-ext-child"], timeout)
        if err is not None and err.startswith("timeout"):
            import contextlib
            with contextlib.suppress(FileNotFoundError):
                os.remove(os.path.join(_ext_dir(), "lock"))
        _EXT_BUILT.append(err)
    return _EXT_BUILT[0]


# --------------------------------------------------------------------------------------
# Encoders
# --------------------------------------------------------------------------------------

class _Arrays:
    def __init__(self, prefix):
        self.prefix = prefix
        self.arrays = {}

    def add(self, name, arr):
        key = f"{self.prefix}/{name}"
        i = 1
        while key in self.arrays:
            key = f"{self.prefix}/{name}#{i}"
            i += 1
        self.arrays[key] = arr
        return key


def _dtype_name(dt):
    return str(dt).replace("torch.", "")


def _raw_bytes(t):
    """Raw bytes of t.contiguous() (as a uint8 numpy array), bit-exact for every dtype."""
    import numpy as np
    import torch
    c = t.detach().contiguous()
    st = c.untyped_storage()
    u8 = torch.empty(0, dtype=torch.uint8).set_(st)
    isz = c.element_size()
    start = c.storage_offset() * isz
    n = c.numel() * isz
    if c.dtype == torch.quint4x2:
        n = (c.numel() + 1) // 2
    elif c.dtype == torch.quint2x4:
        n = (c.numel() + 3) // 4
    return np.ascontiguousarray(u8[start:start + n].numpy()).copy()


def _fhex(x):
    return float(x).hex()


def encode_tensor(t, arrays: _Arrays, name: str):
    import torch
    d = {
        "dtype": _dtype_name(t.dtype),
        "shape": list(t.shape),
        "stride": list(t.stride()),
        "storage_offset": int(t.storage_offset()),
        "requires_grad": bool(t.requires_grad),
    }
    if t.layout != torch.strided:
        d["layout"] = str(t.layout)
        return d
    try:
        d["data"] = arrays.add(name, _raw_bytes(t))
    except Exception as e:  # pragma: no cover - recorded, not fatal
        d["data_error"] = f"{type(e).__name__}: {e}"
    if t.is_quantized:
        qs = str(t.qscheme()).replace("torch.", "")
        d["qscheme"] = qs
        ir = t.int_repr().contiguous()
        d["int_repr_dtype"] = _dtype_name(ir.dtype)
        d["int_repr"] = arrays.add(name + ".int_repr", _raw_bytes(ir))
        if qs == "per_tensor_affine" or qs == "per_tensor_symmetric":
            d["scale"] = _fhex(t.q_scale())
            d["zero_point"] = int(t.q_zero_point())
        else:
            sc = t.q_per_channel_scales()
            zp = t.q_per_channel_zero_points()
            d["scales"] = [_fhex(x) for x in sc.double().tolist()]
            d["scales_dtype"] = _dtype_name(sc.dtype)
            if zp.is_floating_point():
                d["zero_points"] = [_fhex(x) for x in zp.double().tolist()]
            else:
                d["zero_points"] = [int(x) for x in zp.tolist()]
            d["zero_points_dtype"] = _dtype_name(zp.dtype)
            d["axis"] = int(t.q_per_channel_axis())
    return d


def _script_type_name(obj):
    try:
        return obj._type().qualified_name()
    except Exception:
        return type(obj).__qualname__


def encode_value(x, arrays: _Arrays, name: str, depth=0):
    import enum

    import torch
    if depth > 200:
        return {"t": "other", "repr": "<too deep>"}
    if x is None:
        return {"t": "none"}
    if isinstance(x, bool):
        return {"t": "bool", "v": x}
    if isinstance(x, int):
        return {"t": "int", "v": x}
    if isinstance(x, float):
        return {"t": "float", "v": x.hex()}
    if isinstance(x, complex):
        return {"t": "complex", "re": x.real.hex(), "im": x.imag.hex()}
    if isinstance(x, str):
        return {"t": "str", "v": x}
    if isinstance(x, torch.Tensor):
        return {"t": "tensor", "v": encode_tensor(x, arrays, name)}
    if isinstance(x, torch.device):
        return {"t": "device", "v": str(x)}
    if isinstance(x, enum.Enum):
        return {"t": "enum", "type": type(x).__qualname__, "name": x.name,
                "v": encode_value(x.value, arrays, name + ".value", depth + 1)}
    if isinstance(x, tuple):
        d = {"t": "tuple", "v": [encode_value(v, arrays, f"{name}[{i}]", depth + 1)
                                 for i, v in enumerate(x)]}
        if hasattr(x, "_fields"):
            d["fields"] = list(x._fields)
            d["type"] = type(x).__qualname__
        return d
    if isinstance(x, list):
        return {"t": "list", "v": [encode_value(v, arrays, f"{name}[{i}]", depth + 1)
                                   for i, v in enumerate(x)]}
    if isinstance(x, dict):
        return {"t": "dict", "v": [[encode_value(k, arrays, f"{name}.key{i}", depth + 1),
                                    encode_value(v, arrays, f"{name}[{i}]", depth + 1)]
                                   for i, (k, v) in enumerate(x.items())]}
    if isinstance(x, torch.jit.ScriptModule):
        x = x._c
    if isinstance(x, torch._C.ScriptModule):
        attrs = {}
        for k, v in torch._C._jit_debug_module_iterators(x)["named_attributes"]:
            attrs[k] = encode_value(v, arrays, f"{name}.{k}" if name else k, depth + 1)
        return {"t": "object", "type": _script_type_name(x), "attrs": attrs}
    if isinstance(x, torch._C.ScriptObject):
        d = {"t": "object", "type": _script_type_name(x)}
        try:
            st = x.__getstate__()
            d["state"] = encode_value(st, arrays, name + ".__getstate__", depth + 1)
        except Exception as e:
            d["repr"] = repr(x)
            d["state_error"] = f"{type(e).__name__}: {e}"
        return d
    return {"t": "other", "repr": repr(x), "pytype": type(x).__qualname__}


# --------------------------------------------------------------------------------------
# Parts (each runs inside its own child process)
# --------------------------------------------------------------------------------------

def _tensor_map(pairs, arrays, prefix):
    keys, tensors = [], {}
    for k, t in pairs:
        keys.append(k)
        tensors[k] = encode_tensor(t, arrays, f"{prefix}{k}")
    return {"keys": keys, "tensors": tensors}


def part_info(path, arrays):
    import torch
    info = torch.jit._serialization.get_flatbuffer_module_info(path)
    return {
        "bytecode_version": int(info["bytecode_version"]),
        "operator_version": int(info["operator_version"]),
        "function_names": sorted(info["function_names"]),
        "type_names": sorted(info["type_names"]),
        "opname_to_num_args": {k: int(v) for k, v in sorted(info["opname_to_num_args"].items())},
    }


def part_state_dict(path, arrays):
    import torch
    m = torch.jit.jit_module_from_flatbuffer(path)
    sd = m.state_dict()
    out = _tensor_map(sd.items(), arrays, "")
    del sd, m  # tensors alias the module's mapping: encode before dropping it
    return out


def part_attributes(path, arrays):
    import torch
    m = torch.jit.jit_module_from_flatbuffer(path)
    out = encode_value(m._c, arrays, "")
    del m
    return out


def part_mobile(path, arrays):
    import torch.jit.mobile as mobile
    out = {}
    lm = mobile._load_for_lite_interpreter(path)
    out["loaded"] = True
    try:
        out["operator_list"] = sorted(mobile._export_operator_list(lm))
    except Exception as e:
        out["operator_list"] = {"error": f"{type(e).__name__}: {e}"}
    try:
        ext = _get_ext()
    except Exception as e:
        out["ext_error"] = f"{type(e).__name__}: {e}"
        return out
    try:
        names = list(ext.mobile_method_names(path))
        out["method_names"] = names
        out["find_method"] = {n.rsplit(".", 1)[-1]: bool(lm.find_method(n.rsplit(".", 1)[-1]))
                              for n in names}
    except Exception as e:
        out["method_names"] = {"error": f"{type(e).__name__}: {e}"}
    try:
        out["extra_files"] = {k: base64.b64encode(v).decode("ascii")
                              for k, v in ext.mobile_extra_files(path)}
    except Exception as e:
        out["extra_files"] = {"error": f"{type(e).__name__}: {e}"}
    try:
        out["parameters"] = _tensor_map(ext.mobile_named_parameters(path), arrays, "")
    except Exception as e:
        out["parameters"] = {"error": f"{type(e).__name__}: {e}"}
    return out


def part_parameters_file(path, arrays):
    ext = _get_ext()
    return _tensor_map(ext.load_parameters(path), arrays, "")


_PARTS = {
    "info": part_info,
    "state_dict": part_state_dict,
    "mobile": part_mobile,
    "attributes": part_attributes,
    "parameters_file": part_parameters_file,
}


def _child_main(part, path, out_prefix):
    import numpy as np
    arrays = _Arrays(part)
    try:
        res = _PARTS[part](path, arrays)
    except BaseException as e:  # recorded, the parent reads it
        res = {"error": " ".join(f"{type(e).__name__}: {e}".split())}
        arrays.arrays.clear()
    with open(out_prefix + ".json", "w", encoding="utf-8") as f:
        json.dump(res, f, ensure_ascii=False)
    np.savez(out_prefix + ".npz", **arrays.arrays)
    sys.stdout.flush()
    os._exit(0)  # skip interpreter teardown (mapped tensors, kept-alive modules)


# --------------------------------------------------------------------------------------
# Parent side
# --------------------------------------------------------------------------------------

def _run_child(args, timeout):
    """Runs this script with ``args`` in its own process group; returns an error or None.
    A timeout kills the whole group (a compiler the child started included)."""
    cmd = [sys.executable, _HERE] + args
    p = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, start_new_session=True)
    try:
        output, _ = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        output, _ = p.communicate()
        return f"timeout after {timeout:g} s: " + _tail(output, 10)
    if p.returncode < 0:
        return f"killed by signal {-p.returncode} ({signal.Signals(-p.returncode).name})"
    if p.returncode != 0:
        return f"exit status {p.returncode}: " + _tail(output, 10)
    return None


def _tail(output, lines):
    return " | ".join(output.decode("utf-8", "replace").strip().splitlines()[-lines:])


def run_part(model_path, part, timeout=DEFAULT_TIMEOUT):
    """Run one part in a child process; returns (json_value, {npz_key: array})."""
    import numpy as np
    with tempfile.TemporaryDirectory(prefix="ptmf_oracle_") as td:
        pre = os.path.join(td, "out")
        err = _run_child(["--part", part, os.path.abspath(model_path), pre], timeout)
        if err is not None:
            return {"error": err}, {}
        with open(pre + ".json", encoding="utf-8") as f:
            res = json.load(f)
        with np.load(pre + ".npz") as z:
            arrays = {k: z[k] for k in z.files}
    return res, arrays


def run_oracle(model_path, parts=ALL_PARTS, timeout=DEFAULT_TIMEOUT):
    """Return (result, arrays): result maps part name -> JSON value; arrays npz key -> uint8."""
    import torch
    result = {"torch_version": torch.__version__, "file": os.path.basename(model_path)}
    arrays = {}
    if any(p in ("mobile", "parameters_file") for p in parts):
        err = build_ext()
        if err:
            result["ext_build_error"] = err
    for part in parts:
        if part == "parameters_file" and "ext_build_error" in result:
            result[part] = {"error": "the C++ helper did not build"}
            continue
        res, arr = run_part(model_path, part, timeout)
        result[part] = res
        arrays.update(arr)
    return result, arrays


def write_oracle(model_path, out_prefix, parts=ALL_PARTS, timeout=DEFAULT_TIMEOUT):
    import numpy as np
    result, arrays = run_oracle(model_path, parts, timeout)
    with open(out_prefix + ".json", "w", encoding="utf-8") as f:
        json.dump(result, f, ensure_ascii=False, indent=1, sort_keys=False)
        f.write("\n")
    buf = io.BytesIO()
    np.savez_compressed(buf, **arrays)
    with open(out_prefix + ".npz", "wb") as f:
        f.write(buf.getvalue())
    return result, arrays


def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] == "--build-ext-child":
        _build_ext_here()
        return 0
    if argv and argv[0] == "--build-ext":
        err = build_ext()
        print(f"the C++ helper in {_ext_dir()}: " + (err or "built"))
        return 1 if err else 0
    if argv and argv[0] == "--part":
        _, part, path, out_prefix = argv[:4]
        _child_main(part, path, out_prefix)
        return 0
    import argparse
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("model")
    ap.add_argument("out_prefix")
    ap.add_argument("--parts", default=",".join(ALL_PARTS))
    ap.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT)
    a = ap.parse_args(argv)
    parts = [p for p in a.parts.split(",") if p]
    for p in parts:
        if p not in _PARTS:
            ap.error(f"unknown part {p!r}")
    result, _ = write_oracle(a.model, a.out_prefix, parts, a.timeout)
    for p in parts:
        r = result[p]
        print(f"{p}: " + (f"ERROR {r['error']}" if isinstance(r, dict) and "error" in r else "ok"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
