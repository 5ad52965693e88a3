"""Tensor dtypes every format shares: c10::ScalarType numbers to numpy dtypes (ml_dtypes
for those numpy lacks), zero-copy views of a storage, packed values, quantized tensors."""
from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional, Protocol, Sequence, Tuple, Union

from .lazy import np
from .native import lib

__all__ = ["DTYPE_NAMES", "QuantizedTensor", "dtype_name", "itemsize", "numpy_dtype", "same_dtype",
           "scalar_type_name"]

#: torch's name of every scalar type a tensor can hold, by c10::ScalarType number.
DTYPE_NAMES: Tuple[str, ...] = (
    "uint8", "int8", "int16", "int32", "int64", "float16", "float32", "float64",
    "complex32", "complex64", "complex128", "bool", "qint8", "quint8", "qint32",
    "bfloat16", "quint4x2", "quint2x4", "bits1x8", "bits2x4", "bits4x2", "bits8",
    "bits16", "float8_e5m2", "float8_e4m3fn", "float8_e5m2fnuz", "float8_e4m3fnuz",
    "uint16", "uint32", "uint64",
    "uint1", "uint2", "uint3", "uint4", "uint5", "uint6", "uint7",
    "int1", "int2", "int3", "int4", "int5", "int6", "int7",
    "float8_e8m0fnu", "float4_e2m1fn_x2",
)

#: complex32 has no numpy counterpart: a pair of float16, zero-copy.
COMPLEX32_FIELDS = [("real", "<f2"), ("imag", "<f2")]

#: numpy's spelling of each dtype, made into np.dtype when a file first needs it (numpy
#: is imported then, not with the package). The dtypes numpy lacks come from ml_dtypes,
#: imported when a file first needs one (it costs a tenth of a cold start): None here,
#: their ml_dtypes names in _ML_DTYPES.
_SPELLINGS: List[Any] = (
    ["u1", "i1", "<i2", "<i4", "<i8", "<f2", "<f4", "<f8"]
    + [COMPLEX32_FIELDS, "<c8", "<c16", "?"]
    + ["i1", "u1", "<i4"]                                        # qint8 quint8 qint32
    + [None]                                                     # bfloat16
    + ["u1", "u1"]                                               # quint4x2 quint2x4 (unpacked)
    + ["u1"] * 4 + ["<u2"]                                       # bits*
    + [None] * 4                                                 # float8_*
    + ["<u2", "<u4", "<u8"]
    + ["u1"] * 7 + ["i1"] * 7                                    # uint1..7, int1..7: a byte each
    + [None, "u1"]                             # float8_e8m0fnu; float4_e2m1fn_x2: packed pairs
)
#: ml_dtypes names them as torch does.
_ML_DTYPES = {st: DTYPE_NAMES[st] for st, spelling in enumerate(_SPELLINGS) if spelling is None}
assert len(_SPELLINGS) == len(DTYPE_NAMES) == lib.FB_SCALAR_TYPE_COUNT
#: The dtypes made so far, by scalar type.
_DTYPES: Dict[int, np.dtype] = {}

#: Packed quantized types: values per byte.
PACKED = {lib.FB_SCALAR_TYPE_QUINT4X2: 2, lib.FB_SCALAR_TYPE_QUINT2X4: 4}

QSCHEME_NAMES = {lib.FB_QSCHEME_PER_TENSOR_AFFINE: "per_tensor_affine",
                 lib.FB_QSCHEME_PER_CHANNEL_AFFINE: "per_channel_affine",
                 lib.FB_QSCHEME_PER_CHANNEL_AFFINE_FLOAT_QPARAMS:
                 "per_channel_affine_float_qparams"}


def numpy_dtype(scalar_type: int) -> np.dtype:
    """The numpy dtype pyflatmodule uses for a c10::ScalarType number.

    Packed types (quint4x2, quint2x4) map to the dtype of their unpacked values;
    float4_e2m1fn_x2 stays packed, one uint8 per pair of values, as torch counts it.
    """
    dtype = _DTYPES.get(scalar_type)
    if dtype is None:
        spelling = _SPELLINGS[scalar_type]
        if spelling is None:
            import ml_dtypes
            spelling = getattr(ml_dtypes, _ML_DTYPES[scalar_type])
        dtype = _DTYPES[scalar_type] = np.dtype(spelling)
    return dtype


def itemsize(scalar_type: int) -> int:
    """Bytes per element of :func:`numpy_dtype`'s dtype for a scalar type, told without
    importing numpy (or ml_dtypes)."""
    spelling = _SPELLINGS[scalar_type]
    if spelling is None:   # ml_dtypes': bfloat16 is two bytes, its float8s one
        return 2 if _ML_DTYPES[scalar_type] == "bfloat16" else 1
    if isinstance(spelling, list):   # complex32's pair
        return 4
    return 1 if spelling == "?" else int(spelling.lstrip("<uifc"))


def same_dtype(a: int, b: int) -> bool:
    """Whether two scalar types read as one :func:`numpy_dtype` (e.g. quint8 and uint8),
    told without importing numpy."""
    return (_SPELLINGS[a] or _ML_DTYPES[a]) == (_SPELLINGS[b] or _ML_DTYPES[b])


def complex32() -> np.dtype:
    """complex32's dtype: a structured pair of float16 (numpy has no complex32)."""
    return numpy_dtype(DTYPE_NAMES.index("complex32"))


def scalar_type_name(scalar_type: int) -> str:
    """torch's name for a c10::ScalarType number, e.g. ``"bfloat16"``."""
    return DTYPE_NAMES[scalar_type]


def view(storage: np.ndarray, scalar_type: int, offset: int, sizes: Sequence[int],
         strides: Sequence[int]) -> np.ndarray:
    """The tensor as a read-only array over ``storage``.

    Packed types (quint4x2, quint2x4) come back as torch's ``int_repr()`` gives them:
    the packed bytes, zero-copy when the tensor is contiguous.
    """
    dtype = numpy_dtype(scalar_type)
    shape = tuple(sizes)
    per_byte = PACKED.get(scalar_type)
    if per_byte is not None:
        if 0 in shape:
            empty = np.empty(shape, dtype)
            empty.flags.writeable = False
            return empty
        return _packed(storage, per_byte, offset, shape, strides)
    size = dtype.itemsize
    if 0 in shape:
        # Nothing to read (the offset may lie past the storage's end), but the
        # strides are the file's (torch's), as for any view.
        storage, offset = storage[:0], 0
    return np.ndarray(shape, dtype, buffer=storage, offset=offset * size,
                      strides=tuple(s * size for s in strides))


def _contiguous_strides(shape: Tuple[int, ...]) -> List[int]:
    out, step = [], 1
    for n in reversed(shape):
        out.append(step)
        step *= n
    return out[::-1]


def unpack(storage: np.ndarray, scalar_type: int, offset: int, sizes: Sequence[int],
           strides: Sequence[int]) -> np.ndarray:
    """Logical values of a packed tensor (one uint8 per value), as a new array."""
    per_byte = PACKED[scalar_type]
    bits = 8 // per_byte
    shape = tuple(sizes)
    index = np.full(shape, offset, dtype=np.int64)
    for axis, (n, s) in enumerate(zip(shape, strides)):
        step = np.arange(n, dtype=np.int64) * s
        index += step.reshape((n,) + (1,) * (len(shape) - axis - 1))
    shifts = ((index % per_byte) * bits).astype(np.uint8)
    return (storage[index // per_byte] >> shifts) & np.uint8((1 << bits) - 1)


def _packed(storage: np.ndarray, per_byte: int, offset: int, shape: Tuple[int, ...],
            strides: Sequence[int]) -> np.ndarray:
    numel = int(np.prod(shape))
    nbytes = -(-numel // per_byte)
    # Strides of size-1 dimensions never move: the layout is row-major without them.
    if (all(s == c for s, c, n in zip(strides, _contiguous_strides(shape), shape) if n != 1)
            and offset % per_byte == 0):
        start = offset // per_byte
        return storage[start:start + nbytes]
    quint4x2, quint2x4 = lib.FB_SCALAR_TYPE_QUINT4X2, lib.FB_SCALAR_TYPE_QUINT2X4
    st = quint4x2 if per_byte == PACKED[quint4x2] else quint2x4
    values = unpack(storage, st, offset, shape, strides).reshape(-1)
    padded = np.zeros(nbytes * per_byte, np.uint8)
    padded[:numel] = values
    bits = 8 // per_byte
    packed = np.zeros(nbytes, np.uint8)
    for k in range(per_byte):
        packed |= padded[k::per_byte] << np.uint8(k * bits)
    packed.flags.writeable = False
    return packed


class QuantizedTensor:
    """A quantized tensor: its integer representation and quantization parameters.

    ``int_repr`` is what torch's ``int_repr()`` returns, zero-copy over the file:
    the integers in the tensor's shape, or for the packed 4- and 2-bit types the
    packed bytes (low bits first). Per-tensor schemes set ``scale`` and
    ``zero_point``; per-channel schemes set ``scales``, ``zero_points`` and ``axis``;
    per-channel-group schemes (blockwise weights, 2-D) also ``group_size``:
    ``scales[c, g]`` applies to channel ``c`` (along ``axis``), elements
    ``g * group_size .. (g + 1) * group_size - 1`` of the other dimension.
    """

    __slots__ = ("int_repr", "shape", "dtype_name", "qscheme", "scale", "zero_point",
                 "scales", "zero_points", "axis", "group_size", "_values")

    def __init__(self, int_repr: np.ndarray, shape: Tuple[int, ...], dtype_name: str,
                 qscheme: str, values: Callable[[], np.ndarray],
                 scale: Optional[float] = None, zero_point: Optional[int] = None,
                 scales: Optional[np.ndarray] = None, zero_points: Optional[np.ndarray] = None,
                 axis: Optional[int] = None, group_size: Optional[int] = None) -> None:
        self.int_repr = int_repr
        self.shape = shape
        self.dtype_name = dtype_name
        self.qscheme = qscheme
        self.scale = scale
        self.zero_point = zero_point
        self.scales = scales
        self.zero_points = zero_points
        self.axis = axis
        self.group_size = group_size
        self._values = values

    def values(self) -> np.ndarray:
        """The stored integers in the tensor's shape (unpacked for 4- and 2-bit types)."""
        return self._values()

    def dequantize(self) -> np.ndarray:
        """The real values, ``(q - zero_point) * scale``, as a new float32 array."""
        q = self.values().astype(np.float32)
        if self.scales is None:
            return (q - np.float32(self.zero_point)) * np.float32(self.scale)
        if self.group_size is not None:   # 2-D: expand each group's scale over its elements
            assert self.axis is not None and self.zero_points is not None
            n = q.shape[1 - self.axis]
            scales = np.asarray(self.scales, np.float32).reshape(q.shape[self.axis], -1)
            zero_points = np.asarray(self.zero_points, np.float32).reshape(scales.shape)
            scales = np.repeat(scales, self.group_size, axis=1)[:, :n]
            zero_points = np.repeat(zero_points, self.group_size, axis=1)[:, :n]
            if self.axis == 1:
                scales, zero_points = scales.T, zero_points.T
            return (q - zero_points) * scales
        shape = [1] * q.ndim
        shape[self.axis] = -1   # type: ignore[index]
        scales = np.asarray(self.scales, np.float32).reshape(shape)
        zero_points = np.asarray(self.zero_points, np.float32).reshape(shape)
        return (q - zero_points) * scales

    def __repr__(self) -> str:
        params = (f"scale={self.scale}, zero_point={self.zero_point}" if self.scales is None
                  else f"axis={self.axis}")
        return (f"QuantizedTensor({self.dtype_name}, shape={self.shape}, "
                f"{self.qscheme}, {params})")


class Typed(Protocol):
    """Anything with a numpy dtype: an array, or a tensor described but not read."""

    @property
    def dtype(self) -> np.dtype:
        """Its numpy dtype."""


def dtype_name(tensor: Union[np.ndarray, QuantizedTensor, Typed]) -> str:
    """torch's name of a tensor's dtype, as far as the array tells: a quantized tensor
    carries its own; numpy's and ml_dtypes' names are torch's, but for complex32 (a
    ``(real, imag)`` pair of float16). The torch dtypes that share a numpy dtype
    (``uint8``, ``bits8``, ``uint3``...) take the format's record to tell apart."""
    if isinstance(tensor, QuantizedTensor):
        return tensor.dtype_name
    return "complex32" if tensor.dtype == complex32() else str(tensor.dtype)
