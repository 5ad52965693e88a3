"""Programs optimum-executorch exported (benchmarks/zoo_hf_build.py) against what
ExecuTorch and torchao say of them.

:func:`assert_program` checks a program against its manifest entry: ExecuTorch's reader
(``reader``) and runtime (``runtime``). The rest checks per-group quantized weights
(torchao's 4-bit linear weights lowered to XNNPACK) against torchao's own reading of
them: the program's constants, ``export``'s output read back (support.exported), and
``diff``.

``torchao`` maps each module weight's name to ``<fqn>.qdata`` (int8 values),
``<fqn>.scale`` (float32, one per output channel and group), ``<fqn>.zero_point`` and
``<fqn>.dequantized`` (torchao's ``dequantize_affine`` over the scales rounded to
bfloat16, as XNNPACK stores them; float32); ``info`` maps it to its ``block_size``.
The 8-bit embedding weights (``--qembedding 8w``, run by ExecuTorch's
``embedding_byte`` kernel, not delegated) are there too, under their own fqns, their
scales and dequantized values as torchao keeps them (float32).
"""
from __future__ import annotations

import json
import os
from typing import Any, Dict, List

import ml_dtypes
import numpy as np

import pyflatmodule as pfm
from pyflatmodule import QuantizedTensor
from pyflatmodule.core.dtypes import scalar_type_name

from .cli import run_cli
from .exported import dequantize_grouped, int4_values, read_npz, read_safetensors, scales_of


def _bits(a: np.ndarray) -> bytes:
    return np.ascontiguousarray(a).tobytes()


def assert_program(path: str, data: List[str], entry: Dict[str, Any]) -> None:
    """The program (with its data files) reads as ExecuTorch's reader and runtime said:
    methods, operators, delegates, inputs, outputs, value counts, named data (the data
    files' keys too), which inputs and outputs are tensors and their dtypes and sizes;
    nothing missing, and every
    XNNPACK graph decodes with every constant resolved."""
    reader, runtime = entry["reader"], entry["runtime"]
    for who in (reader, runtime):
        assert "error" not in who, who
    with pfm.load(path, data=data) as p:
        assert isinstance(p, pfm.Program)
        assert sorted(p.methods) == runtime["method_names"] == sorted(reader["methods"])
        assert p.missing_data == []
        assert sorted(p.named_data) == reader["named_data"]
        for d, file in zip(p.data_files, data):
            assert sorted({*d.named_data, *d.tensors}) == reader["data"][
                os.path.basename(file)]
        for method, want in reader["methods"].items():
            m = p.methods[method]
            assert [str(o) for o in m.operators] == want["operators"]
            assert [d.id for d in m.delegates] == want["delegates"]
            assert (list(m.inputs), list(m.outputs), len(m.values)) == (
                want["inputs"], want["outputs"], want["values"])
            meta = runtime["methods"][method]
            specs = meta["inputs"] + meta["outputs"]
            assert len(specs) == len(m.inputs + m.outputs)
            for index, spec in zip(m.inputs + m.outputs, specs):
                t = m.values[index]
                assert isinstance(t, pfm.TensorSpec) == (spec is not None)
                if spec is None:   # the constant methods' Int, Bool, Double
                    continue
                assert (list(t.shape), t.dtype) == (spec["sizes"],
                                                    scalar_type_name(spec["dtype"]))
            for d in m.delegates:
                assert d.id == "XnnpackBackend" and d.graph is not None
                assert not d.graph.missing
                for c in d.graph.constants().values():
                    np.asarray(c if isinstance(c, np.ndarray) else c.values()).sum()
        assert any(m.delegates for m in p.methods.values())


def match_torchao(program: pfm.Program, torchao: Dict[str, np.ndarray],
                  info: Dict[str, Any]) -> Dict[str, str]:
    """The program's per-group constant for each torchao weight (name -> fqn), checked:
    values, group size, axis, scales (torchao's rounded to bfloat16, bit for bit), zero
    points, and the dequantized values, bit for bit."""
    grouped = {k: v for k, v in program.named_tensors().items()
               if isinstance(v, QuantizedTensor) and v.group_size is not None}
    found: Dict[str, str] = {}
    for fqn, w in info.items():
        qdata = torchao[fqn + ".qdata"]
        names = [k for k, q in grouped.items()
                 if q.shape == qdata.shape and np.array_equal(q.values(), qdata)]
        assert len(names) == 1, f"{fqn}: {names}"
        q = grouped[names[0]]
        assert q.dtype_name == "qbint4" and q.qscheme == "per_channel_group_symmetric"
        assert (q.axis, q.group_size) == (0, w["block_size"][1]) and w["block_size"][0] == 1
        scale = torchao[fqn + ".scale"].astype(ml_dtypes.bfloat16)
        assert q.scales is not None and q.scales.dtype == ml_dtypes.bfloat16
        assert _bits(q.scales) == _bits(scale.reshape(q.scales.shape))
        assert q.zero_points is not None
        assert np.array_equal(q.zero_points, torchao[fqn + ".zero_point"].reshape(
            q.zero_points.shape))
        assert _bits(q.dequantize()) == _bits(torchao[fqn + ".dequantized"])
        found[names[0]] = fqn
    assert sorted(found) == sorted(grouped), "per-group constants torchao did not make"
    return found


def assert_exported(path: str, data: List[str], out_dir: str, torchao: Dict[str, np.ndarray],
                    info: Dict[str, Any]) -> None:
    """``export`` to npz and to safetensors: every per-group weight stored bit-exact with
    its metadata, and dequantized from the file alone to torchao's values exactly."""
    flags = [x for d in data for x in ("--data", d)]
    with pfm.load(path, data=data) as p:
        assert isinstance(p, pfm.Program)
        found = match_torchao(p, torchao, info)
        ints = {k: _bits(v.int_repr) for k, v in p.named_tensors().items()
                if isinstance(v, QuantizedTensor)}
    for ext, read in ((".npz", read_npz), (".safetensors", read_safetensors)):
        out = os.path.join(out_dir, "weights" + ext)
        r = run_cli("export", "--json", path, out, *flags)
        assert r.returncode == 0, r.stderr
        listed = {e["name"]: e["dtype"] for e in json.loads(r.stdout)["files"][0]["entries"]}
        assert all(listed[name] == "qbint4" for name in found), listed
        stored = read(out)
        if ext == ".safetensors":   # and safetensors' own reader reads the same
            from safetensors.numpy import load_file
            assert {k: _bits(v) for k, v in load_file(out).items()} == {
                k: _bits(v) for k, (v, _) in stored.items()}
        for name, fqn in found.items():
            array, meta = stored[name]
            assert meta["dtype"] == "qbint4" and meta["shape"] == list(
                torchao[fqn + ".qdata"].shape)
            assert meta["group_size"] == info[fqn]["block_size"][1] and meta["axis"] == 0
            assert _bits(array) == ints[name]
            assert np.array_equal(int4_values(array, tuple(meta["shape"])),
                                  torchao[fqn + ".qdata"])
            scale = torchao[fqn + ".scale"].astype(ml_dtypes.bfloat16)
            assert _bits(scales_of(meta, stored)) == _bits(scale)
            assert _bits(dequantize_grouped(array, meta, stored)) == _bits(
                torchao[fqn + ".dequantized"])


def assert_embeddings_exported(path: str, data: List[str], out_dir: str,
                               torchao: Dict[str, np.ndarray], info: Dict[str, Any],
                               calls: List[Dict[str, Any]]) -> None:
    """``export`` to npz and to safetensors of torchao's 8-bit embedding weights: each
    ``embedding_byte`` call ExecuTorch's reader found (``calls``: the value indices of its
    weight, scales and zero points) takes one torchao weight (``info``, by fqn), whose
    int8 values and float32 scales the exported file holds bit for bit, with no zero
    points where torchao's are all zero, and which dequantize as the kernel does
    (``(q - zero_point) * scale`` a row) to torchao's ``dequantize_affine`` exactly."""
    flags = [x for d in data for x in ("--data", d)]
    assert calls and all(c["operator"] == "quantized_decomposed::embedding_byte.out"
                         for c in calls), calls
    for ext, read in ((".npz", read_npz), (".safetensors", read_safetensors)):
        out = os.path.join(out_dir, "embeddings" + ext)
        r = run_cli("export", path, out, *flags)
        assert r.returncode == 0, r.stderr
        stored = read(out)
        found: Dict[str, str] = {}
        for call in calls:
            def value(index: int) -> np.ndarray:
                return stored[f"{call['method']}.values[{index}]"][0]
            q = value(call["weight"])
            assert q.dtype == np.int8, q.dtype
            fqns = [f for f in info if np.array_equal(torchao[f + ".qdata"], q)]
            assert len(fqns) == 1, (call, fqns)
            fqn = fqns[0]
            w = info[fqn]
            assert list(q.shape) == w["shape"] and w["block_size"] == [1, w["shape"][1]]
            assert (call["quant_min"], call["quant_max"]) == (w["quant_min"], w["quant_max"])
            assert _bits(q) == _bits(torchao[fqn + ".qdata"])
            scale = value(call["scales"])
            assert scale.dtype == np.float32 and w["scale_dtype"] == "float32"
            assert scale.shape[0] == q.shape[0] and scale.size == q.shape[0]
            assert _bits(scale) == _bits(torchao[fqn + ".scale"])
            zero_point = torchao[fqn + ".zero_point"]
            if call["zero_points"] is None:
                assert not zero_point.any(), "torchao's zero points, lost"
                zp = np.zeros(q.shape[0], np.float32)
            else:
                zp = value(call["zero_points"]).reshape(-1).astype(np.float32)
                assert np.array_equal(zp, zero_point.reshape(-1).astype(np.float32))
            deq = (q.astype(np.float32) - zp[:, None]) * scale.reshape(-1, 1)
            assert deq.dtype == np.float32
            assert _bits(deq) == _bits(torchao[fqn + ".dequantized"]), fqn
            found[fqn] = call["method"]
        assert sorted(found) == sorted(info), "torchao embeddings no call takes"


def assert_diff_sees_a_scale(path: str, out_dir: str, q: QuantizedTensor, name: str) -> None:
    """A copy of the program with one bfloat16 scale of ``q`` changed (in the file's
    bytes): ``diff`` reports that tensor's quantization parameters, and only it."""
    with open(path, "rb") as f:
        data = bytearray(f.read())
    assert q.scales is not None
    scales = _bits(q.scales)
    at = data.find(scales)
    assert at > 0 and data.find(scales, at + 1) < 0
    data[at + 1] ^= 0x01      # the high byte of the first scale: its lowest exponent bit
    changed = os.path.join(out_dir, "changed.pte")
    with open(changed, "wb") as f:
        f.write(bytes(data))
    r = run_cli("diff", "--json", path, changed)
    assert r.returncode == 1, r.stderr
    doc = json.loads(r.stdout)
    tensors = [t for t in doc["tensor_diffs"] if t["status"] != "equal"]
    assert [(t["a"], t["note"]) for t in tensors] == [(name, "quantization parameters differ")]
