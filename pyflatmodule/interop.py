"""Handing pyflatmodule's tensors to torch (imported lazily: only when called).

``to_torch(array)`` is the way to give weights to torch without a copy: the tensor
shares the array's memory, which for a model loaded from a path is the file's
read-only mapping. **Such a tensor must never be written to** (no in-place ops, no
``optimizer.step()`` on it, no ``load_state_dict`` into it as the destination): the
pages are read-only and a write kills the process with SIGSEGV, exactly as for
tensors torch itself loads from a flatbuffer path. Clone it (``t.clone()``) when you
need a writable tensor. torch cannot mark a tensor read-only, and ``torch.from_numpy``
warns once about that for read-only arrays; this module suppresses that one warning
deliberately, since the read-only contract is documented here instead.

The tensor keeps the array (and so the mapping) alive for as long as it exists.

Quantized tensors become torch quantized tensors with equal ``int_repr()``, scales
and zero points; they are copies (torch's quantized tensors own their memory).
"""
from __future__ import annotations

import warnings
from typing import TYPE_CHECKING, Any, Dict, Mapping, Optional, Union, cast

from .core.dtypes import QuantizedTensor, complex32
from .core.lazy import np

if TYPE_CHECKING:  # pragma: no cover
    import torch

__all__ = ["state_dict_to_torch", "to_torch"]

_READONLY_WARNING = r"The given NumPy array is not writable"

# ml_dtypes / structured dtypes: (numpy container, torch dtype name)
_VIEWS = {
    "bfloat16": ("<i2", "bfloat16"),
    "float8_e5m2": ("u1", "float8_e5m2"),
    "float8_e4m3fn": ("u1", "float8_e4m3fn"),
    "float8_e5m2fnuz": ("u1", "float8_e5m2fnuz"),
    "float8_e4m3fnuz": ("u1", "float8_e4m3fnuz"),
    "float8_e8m0fnu": ("u1", "float8_e8m0fnu"),
}


def _torch_dtype(th: Any, dtype: Union[str, "torch.dtype"]) -> "torch.dtype":
    if isinstance(dtype, str):
        found = getattr(th, dtype, None)
        if not isinstance(found, th.dtype):
            raise ValueError(f"torch has no dtype named {dtype!r}")
        return cast("torch.dtype", found)
    return dtype


def _from_numpy(th: Any, array: np.ndarray) -> "torch.Tensor":
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=_READONLY_WARNING, category=UserWarning)
        return cast("torch.Tensor", th.from_numpy(array))


def _plain(th: Any, array: np.ndarray) -> "torch.Tensor":
    """A tensor over the array's memory, with torch's counterpart of its dtype."""
    name = array.dtype.name
    if name in _VIEWS:
        container, torch_name = _VIEWS[name]
        return _from_numpy(th, array.view(container)).view(getattr(th, torch_name))
    if array.dtype == complex32():
        return _from_numpy(th, array.view("<i4")).view(th.complex32)
    if not array.dtype.isnative:
        raise TypeError(f"byte-swapped arrays cannot share memory with torch: {array.dtype}")
    return _from_numpy(th, array)


def _quantized(th: Any, q: QuantizedTensor) -> "torch.Tensor":
    qdtype = getattr(th, q.dtype_name)
    int_repr = _plain(th, np.ascontiguousarray(q.int_repr))
    if q.scales is None:
        assert q.scale is not None and q.zero_point is not None
        scale, zero_point = float(q.scale), int(q.zero_point)
    else:
        assert q.zero_points is not None and q.axis is not None
        scales = _plain(th, np.ascontiguousarray(q.scales))
        zero_points = _plain(th, np.ascontiguousarray(q.zero_points))
    if q.dtype_name in ("quint4x2", "quint2x4"):
        # int_repr holds the packed bytes: make an empty tensor of the packed type
        # and fill its storage (no factory takes packed integers directly).
        if q.scales is None:
            out = th._empty_affine_quantized(list(q.shape), scale=scale,
                                             zero_point=zero_point, dtype=qdtype)
        else:
            out = th._empty_per_channel_affine_quantized(
                list(q.shape), scales=scales, zero_points=zero_points, axis=q.axis,
                dtype=qdtype)
        storage = out.untyped_storage()
        raw = th.empty(0, dtype=th.uint8).set_(storage, 0, (storage.nbytes(),))
        raw[:int_repr.numel()].copy_(int_repr.reshape(-1))
        return cast("torch.Tensor", out)
    if q.scales is None:
        return cast("torch.Tensor",
                    th._make_per_tensor_quantized_tensor(int_repr, scale, zero_point))
    # float zero points give per_channel_affine_float_qparams, integer ones per_channel_affine
    return cast("torch.Tensor", th._make_per_channel_quantized_tensor(
        int_repr, scales, zero_points, q.axis))


def to_torch(x: Union[np.ndarray, QuantizedTensor],
             dtype: Optional[Union[str, "torch.dtype"]] = None) -> "torch.Tensor":
    """A torch tensor for a pyflatmodule array or quantized tensor.

    Args:
        x: an ``np.ndarray`` (any array pyflatmodule returns: numpy dtypes, ml_dtypes'
            bfloat16/float8, the structured complex32) or a ``QuantizedTensor``.
        dtype: for arrays only, the torch dtype (or its name, e.g. ``"bits8"``,
            ``"uint3"``, ``"float4_e2m1fn_x2"``) to reinterpret the elements as; needed
            for the torch types numpy stores in a container of the same size.

    Returns:
        For an array, a tensor sharing its memory (same shape, strides and bytes);
        it is read-only in practice: never write to it (see the module docstring).
        For a ``QuantizedTensor``, a new torch quantized tensor of the same dtype and
        qscheme with equal ``int_repr()``, scales and zero points (torch itself warns
        that quantized dtypes are deprecated).

    Raises:
        ImportError: torch is not installed.
        TypeError: ``x`` is neither an array nor a QuantizedTensor.
        ValueError: ``dtype`` is unknown or has a different element size.
    """
    import torch

    if isinstance(x, QuantizedTensor):
        if dtype is not None:
            raise ValueError("dtype cannot be given for a quantized tensor")
        return _quantized(torch, x)
    if not isinstance(x, np.ndarray):
        raise TypeError(f"expected a numpy array or QuantizedTensor, got {type(x).__name__}")
    tensor = _plain(torch, x)
    if dtype is not None:
        target = _torch_dtype(torch, dtype)
        if target.itemsize != tensor.element_size():
            raise ValueError(f"{target} has {target.itemsize}-byte elements, "
                             f"the array {tensor.element_size()}-byte ones")
        tensor = tensor.view(target)
    return tensor


def state_dict_to_torch(state: Mapping[str, Union[np.ndarray, QuantizedTensor]]
                        ) -> Dict[str, "torch.Tensor"]:
    """``{name: to_torch(value)}`` for a ``Module.state_dict()``; plain tensors share the
    file's memory and must not be written to (``module.load_state_dict`` copies from
    them into the module's own parameters, which is fine)."""
    return {name: to_torch(value) for name, value in state.items()}
