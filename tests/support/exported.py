"""``pyflatmodule export``'s output read back as its documentation (docs/cli.md, "export") says,
with numpy and the file's bytes only: no pyflatmodule, so that a test compares what the
file holds with what torch or torchao said, not with what pyflatmodule wrote."""
from __future__ import annotations

import json
import struct
from typing import Any, Dict, List, Tuple

import numpy as np

#: safetensors dtype -> numpy dtype (bfloat16 read as its 16 bits)
ST_NUMPY = {"BOOL": "?", "U8": "u1", "I8": "i1", "U16": "<u2", "I16": "<i2", "U32": "<u4",
             "I32": "<i4", "U64": "<u8", "I64": "<i8", "F16": "<f2", "BF16": "<u2",
             "F32": "<f4", "F64": "<f8"}

#: the 4-bit types XNNPACK packs two a byte (low nibble first, each value plus 8)
PACKED_INT4 = ("qbint4", "qcint4")

Exported = Dict[str, Tuple[np.ndarray, Dict[str, Any]]]

#: What a per-channel quantized tensor's parameter tensors are, each named
#: ``<name>:<role>`` and following it.
PARAMETER_ROLES = ("scales", "zero_points")


def expected_names(state: Dict[str, Any]) -> List[str]:
    """The names an export of ``state`` holds, in order: each tensor's, followed by its
    scales' and zero points' when it has arrays of them (a per-channel tensor)."""
    return [n for key, v in state.items() for n in [key] + (
        [f"{key}:{role}" for role in PARAMETER_ROLES]
        if getattr(v, "scales", None) is not None else [])]


def parameter(exported: Exported, info: Dict[str, Any], role: str) -> np.ndarray:
    """The scales or zero points ``info`` names, in their own dtype (bfloat16, stored as
    its 16 bits, through ml_dtypes)."""
    array, meta = exported[info[role]]
    assert meta[f"{role}_of"] in exported and exported[meta[f"{role}_of"]][1] is info
    if meta["dtype"] == "bfloat16":
        import ml_dtypes
        return array.view(ml_dtypes.bfloat16)
    return array.view(meta["dtype"])


def read_npz(path: str) -> Exported:
    """name -> (stored array, its ``__metadata__`` entry)."""
    with np.load(path) as z:
        meta = json.loads(str(z["__metadata__"]))
        assert meta["format"] == "pyflatmodule-npz" and meta["version"] == 1
        return {name: (z[name], info) for name, info in meta["tensors"].items()}


def read_safetensors(path: str) -> Exported:
    """name -> (stored array, its description: ``dtype`` and the ``tensor:<name>``
    metadata when the file has some, else the safetensors dtype)."""
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack_from("<Q", data)
    header = json.loads(data[8:8 + n])
    meta = header.pop("__metadata__", {})
    out: Exported = {}
    for name, h in header.items():
        start, end = h["data_offsets"]
        array = np.frombuffer(data, ST_NUMPY[h["dtype"]], (end - start) //
                              np.dtype(ST_NUMPY[h["dtype"]]).itemsize, 8 + n + start)
        info = json.loads(meta["tensor:" + name]) if "tensor:" + name in meta else {
            "dtype": h["dtype"]}
        out[name] = (array.reshape(h["shape"]), info)
    return out


def int4_values(stored: np.ndarray, shape: Tuple[int, ...]) -> np.ndarray:
    """The signed 4-bit values of packed bytes, in the tensor's shape."""
    low = (stored & 0x0F).astype(np.int8) - 8
    high = (stored >> 4).astype(np.int8) - 8
    both = np.stack([low, high], axis=-1).reshape(stored.shape[:-1] + (-1,))
    return both[..., :shape[-1]].reshape(shape)


def scales_of(info: Dict[str, Any], exported: Exported) -> np.ndarray:
    """A per-channel-group tensor's scales: (channels, groups), in their own dtype."""
    shape = info["shape"]
    groups = -(-shape[1 - info["axis"]] // info["group_size"])
    scales = parameter(exported, info, "scales")
    assert scales.shape == (shape[info["axis"]], groups), scales.shape
    return scales


def dequantize_grouped(stored: np.ndarray, info: Dict[str, Any],
                       exported: Exported) -> np.ndarray:
    """``(q - zero_point) * scale`` in float32 of a 2-D per-channel-group tensor, each
    channel's ``group_size`` consecutive elements sharing one scale and zero point."""
    assert info["qscheme"] == "per_channel_group_symmetric", info
    shape = tuple(info["shape"])
    q = int4_values(stored, shape) if info["dtype"] in PACKED_INT4 else stored.reshape(shape)
    scales = scales_of(info, exported).astype(np.float32)
    zero_points = parameter(exported, info, "zero_points").astype(np.int64).reshape(
        scales.shape)
    n, g = shape[1 - info["axis"]], info["group_size"]
    scales = np.repeat(scales, g, axis=1)[:, :n]
    zero_points = np.repeat(zero_points, g, axis=1)[:, :n]
    if info["axis"] == 1:
        scales, zero_points = scales.T, zero_points.T
    return (q.astype(np.int32) - zero_points).astype(np.float32) * scales
