#!/usr/bin/env python3
"""Regenerate the PTMF test files in tests/data/ (needs torch==2.13.0).

    python tests/data/make_data.py [--no-oracle] [--only NAME,NAME]

For every file NAME it writes NAME (the model), NAME.inputs.json (+ NAME.inputs.npz when
tensors were fed: what the generator gave torch) and NAME.oracle.json/.npz (what torch
reads back, see tests/support/torch_oracle.py).  Also writes pyflatmodule/data/sample.ptl,
whose oracle is tests/data/sample.oracle.json/.npz.

Must be run as a script (classes then get qualified names ``__torch__.<Class>``).
"""

import base64
import enum
import json
import os
import sys
import tempfile
import warnings
from concurrent.futures import ThreadPoolExecutor
from typing import Dict, List, NamedTuple, Optional, Tuple

import numpy as np
import torch
import torch.jit.mobile
from torch import Tensor, nn

HERE = os.path.dirname(os.path.abspath(__file__))
TESTS = os.path.dirname(HERE)
REPO = os.path.dirname(TESTS)
SAMPLE_PATH = os.path.join(REPO, "pyflatmodule", "data", "sample.ptl")
# The oracle alone, not the support package: that imports pyflatmodule, and what torch
# writes and reads back here must not depend on the reader under test.
sys.path.insert(0, os.path.join(TESTS, "support"))
import torch_oracle as oracle  # noqa: E402

warnings.filterwarnings("ignore")

ALL = tuple(oracle.ALL_PARTS)
NO_PARAMS_FILE = tuple(p for p in ALL if p != "parameters_file")


def b64(b: bytes) -> str:
    return base64.b64encode(b).decode("ascii")


# ======================================================================================
# Modules
# ======================================================================================

class Point(NamedTuple):
    x: int
    y: float
    name: str


class Sub(nn.Module):
    def __init__(self):
        super().__init__()
        self.k = 7
        self.register_buffer("buf", torch.arange(3, dtype=torch.float32))

    def forward(self, x: int) -> int:
        return x + self.k


class IValues(nn.Module):
    opt_none: Optional[int]
    opt_some: Optional[int]
    lf_empty: List[float]
    d_empty: Dict[str, int]
    nt: Point
    lli: List[List[int]]
    lt: List[Tensor]
    d_st: Dict[str, Tensor]
    tup: Tuple[int, str, float, bool]

    def __init__(self):
        super().__init__()
        self.i = 3
        self.i_zero = 0
        self.i_max = 2**63 - 1
        self.i_min = -(2**63)
        self.b_true = True
        self.b_false = False
        self.f = 1.5
        self.f_third = 1.0 / 3.0
        self.f_nan = float("nan")
        self.f_inf = float("inf")
        self.f_ninf = float("-inf")
        self.f_negzero = -0.0
        self.f_subnormal = 5e-324
        self.c = complex(1.5, -2.25)
        self.c_special = complex(float("-0.0"), float("inf"))
        self.s = "h\u00e9llo w\u00f6rld \u2713 \u65e5\u672c \U0001F680"
        self.s_empty = ""
        self.opt_none = None
        self.opt_some = 4
        self.li = [1, 2, -3, 2**40]
        self.lf = [0.5, float("nan"), -0.0, float("inf")]
        self.lf_empty = []
        self.lb = [True, False, True]
        self.ls = ["a", "\u00df", ""]
        self.lt = [torch.ones(2), torch.arange(3, dtype=torch.int64)]
        self.lli = [[1, 2], [], [3]]
        self.tup = (1, "two", 3.0, True)
        self.nt = Point(1, 2.5, "p")
        self.d_si = {"a": 1, "b": 2, "\u00e9": 3}
        self.d_is = {2: "two", 1: "one"}
        self.d_st = {"w": torch.full((2,), 0.5), "v": torch.zeros(1, dtype=torch.int32)}
        self.d_empty = {}
        self.dev = torch.device("cpu")
        self.t_plain = torch.tensor([1.0, 2.0])
        self.sub = Sub()

    def forward(self, x: Tensor) -> Tensor:
        # method constants: int, float, str, None, bool, device, tuple
        y = x * 2.5 + 3
        if self.s == "const \u2713 str":
            y = y - 1
        if self.opt_none is None and self.b_true:
            y = y + self.sub(4)
        z = x.to(torch.device("cpu"))
        return y + z + float(len((1, "tup")))

    @torch.jit.export
    def get_nt(self) -> Point:
        return self.nt

    @torch.jit.export
    def get_tup(self) -> Tuple[int, str, float, bool]:
        return self.tup

    @torch.jit.export
    def get_complex(self) -> complex:
        return self.c * 2

    @torch.jit.export
    def sum_lists(self) -> float:
        s = 0.0
        for v in self.li:
            s += v
        for v in self.lli:
            s += len(v)
        for k, v in self.d_si.items():
            s += v
        return s + self.d_st["w"].sum().item() - 1e-300


class Color(enum.Enum):
    RED = 1
    GREEN = 2


class EnumConst(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("w", torch.ones(2))

    def forward(self, x: int) -> int:
        c = Color.RED if x > 0 else Color.GREEN
        if c == Color.RED:
            return 1
        return c.value


class Buffers(nn.Module):
    def __init__(self, tensors: Dict[str, Tensor]):
        super().__init__()
        for k, v in tensors.items():
            self.register_buffer(k, v)

    def forward(self, x: Tensor) -> Tensor:
        return x


class Layouts(nn.Module):
    def __init__(self):
        super().__init__()
        self.w_t = nn.Parameter(torch.randn(3, 5).t())          # transposed parameter
        base = torch.arange(24, dtype=torch.float32).reshape(4, 6)
        self.register_buffer("base", base)                     # views on one storage
        self.register_buffer("row1", base[1])                  # offset 6
        self.register_buffer("col2", base[:, 2])               # offset 2, stride 6
        self.register_buffer("sliced", base.view(-1)[5:11])    # offset 5
        self.register_buffer("expanded", torch.tensor([1.0, 2.0, 3.0]).expand(4, 3))
        self.register_buffer("scalar", torch.tensor(3.25))
        self.register_buffer("scalar_int", torch.tensor(-7, dtype=torch.int64))
        self.register_buffer("empty", torch.empty(0, 3))
        self.register_buffer("stepped", torch.arange(20, dtype=torch.int32)[1:17:3])
        self.register_buffer("nc3d", torch.arange(60, dtype=torch.int16).reshape(3, 4, 5)
                             .permute(2, 0, 1)[1:, :, ::2])

    def forward(self, x: Tensor) -> Tensor:
        return x @ self.w_t


class Quantized(Buffers):
    """Quantized tensors as buffers (its own class name in the file)."""


class SetState(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = 1
        self.name = "set-state"
        self.register_buffer("w", torch.tensor([1.0, 2.0, 3.0]))

    @torch.jit.export
    def __getstate__(self) -> Tuple[int, Tensor, str, bool]:
        return (self.a, self.w, self.name, self.training)

    @torch.jit.export
    def __setstate__(self, state: Tuple[int, Tensor, str, bool]) -> None:
        self.a = state[0] + 1
        self.w = state[1]
        self.name = state[2]
        self.training = state[3]

    def forward(self, x: Tensor) -> Tensor:
        return x * self.w + self.a


class SetStateInside(nn.Module):
    """A set-state module between field modules: state_dict() lists the buffer, then
    each submodule's entries, the set-state one's in its place."""

    def __init__(self):
        super().__init__()
        self.register_buffer("scale", torch.tensor([2.0]))
        self.first = nn.Linear(3, 3)
        self.inner = SetState()
        self.last = nn.Linear(3, 1)

    def forward(self, x: Tensor) -> Tensor:
        return self.last(self.inner(self.first(x))) * self.scale


class Methods(nn.Module):
    def __init__(self):
        super().__init__()
        self.scale = 2.0

    def forward(self, x: Tensor, n: int = 2) -> Tensor:
        for i in range(n):
            x = x + i
        if bool(x.sum() > 0):
            x = x * self.scale
        else:
            x = -x
        return x

    @torch.jit.export
    def f_int(self, a: int = 3, b: int = -1) -> int:
        while a > 0:
            a -= 1
            b += a
        return b

    @torch.jit.export
    def f_float(self, x: float = 0.5, y: float = -0.0) -> float:
        return x * self.scale + y

    @torch.jit.export
    def f_str(self, s: str = "dflt \u2713", sep: str = "") -> str:
        return s + sep + "!"

    @torch.jit.export
    def f_bool(self, b: bool = True, c: bool = False) -> bool:
        return (not b) or c

    @torch.jit.export
    def f_none(self, o: Optional[int] = None, t: Optional[Tensor] = None) -> int:
        if o is None:
            return -1
        if t is not None:
            return o + int(t.numel())
        return o

    @torch.jit.export
    def f_tuple(self, t: Tuple[int, float] = (1, 2.0)) -> float:
        return t[0] + t[1]

    @torch.jit.export
    def f_list(self, l: Optional[List[int]] = None,
               nested: Tuple[Tuple[int, int], str] = ((1, 2), "x")) -> int:
        if l is None:
            l = [1, 2, 3]
        s = 0
        for v in l:
            if v % 2 == 0:
                continue
            s += v
        return s + nested[0][1] + len(nested[1])

    @torch.jit.export
    def f_required(self, x: int, y: str) -> str:
        return y + str(x)


class Small(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(2, 2)

    def forward(self, x: Tensor) -> Tensor:
        return self.lin(x)


class Leaf(nn.Module):
    def __init__(self, i: int):
        super().__init__()
        self.idx = i
        self.register_buffer("v", torch.full((1,), float(i)))

    def forward(self, x: Tensor) -> Tensor:
        return x + self.v


class Deep(nn.Module):
    def __init__(self, depth: int):
        super().__init__()
        self.depth = depth
        self.child = Deep(depth - 1) if depth > 1 else Leaf(depth)

    def forward(self, x: Tensor) -> Tensor:
        return self.child(x) * 2


class DeepWide(nn.Module):
    def __init__(self):
        super().__init__()
        self.deep = Deep(12)
        self.wide = nn.ModuleList([Leaf(i) for i in range(30)])

    def forward(self, x: Tensor) -> Tensor:
        x = self.deep(x)
        for m in self.wide:
            x = m(x)
        return x


class EmptyLists(nn.Module):
    """Empty List[float] / List[int] attributes: torch writes their empty [double] and
    [long] vectors with no padding, at 4 mod 8 in this layout (the class name
    and attributes set it)."""
    floats: List[float]
    ints: List[int]
    tag: str

    def __init__(self):
        super().__init__()
        self.floats = []
        self.ints = []
        self.tag = ""
        self.lin = nn.Linear(2, 2)

    def forward(self, x: Tensor) -> Tensor:
        return self.lin(x) + len(self.floats) + len(self.ints) + len(self.tag)


class QuantLSTM(nn.Module):
    """Two-layer LSTM, for quantize_dynamic: the second layer's empty DoubleList sits at
    4 mod 8."""

    def __init__(self):
        super().__init__()
        self.lstm = nn.LSTM(3, 2, num_layers=2)

    def forward(self, x: Tensor) -> Tensor:
        return self.lstm(x)[0]


class TensorKeys(nn.Module):
    """A Dict[Tensor, int] attribute: valid TorchScript (torch hashes tensors by
    identity), written and loaded by torch."""
    d: Dict[Tensor, int]

    def __init__(self):
        super().__init__()
        self.d = {torch.ones(2): 1, torch.arange(3, dtype=torch.int64): 2}

    def forward(self, x: Tensor) -> Tensor:
        return x + len(self.d)


class Strides(nn.Module):
    """Layouts whose strides numpy would not derive from the shape: channels-last conv
    weights (3x3 and 1x1), empty tensors, size-1 dimensions with odd strides."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(4, 8, 3).to(memory_format=torch.channels_last)
        self.pointwise = nn.Conv2d(8, 16, 1, bias=False).to(memory_format=torch.channels_last)
        self.empty_param = nn.Parameter(torch.empty(0, 5))
        self.register_buffer("empty_3d", torch.empty(3, 0, 4))
        self.register_buffer("empty_t", torch.empty(4, 0, 2).permute(2, 1, 0))
        base = torch.arange(40, dtype=torch.float32)
        self.register_buffer("odd_size1", base.as_strided((2, 1, 4), (4, 7, 1)))
        self.register_buffer("size1_all", base.as_strided((1, 1, 1), (5, 3, 9), 2))
        self.register_buffer("col1", base.reshape(8, 5)[:, 2:3])
        self.register_buffer("row_last", torch.randn(1, 6, 1, 1)
                             .to(memory_format=torch.channels_last))
        self.register_buffer("int_cl", torch.arange(24, dtype=torch.int16).reshape(1, 2, 3, 4)
                             .to(memory_format=torch.channels_last))

    def forward(self, x: Tensor) -> Tensor:
        return self.pointwise(self.conv(x))


def make_mlp():
    return nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))


class SampleNet(nn.Module):
    """Tiny conv net for the CLI demo (MNIST-shaped input)."""

    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(1, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(8, 16, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1))
        self.classifier = nn.Linear(16, 10)
        self.labels = [str(i) for i in range(10)]

    def forward(self, x: Tensor) -> Tensor:
        return self.classifier(torch.flatten(self.features(x), 1))

    @torch.jit.export
    def predict(self, x: Tensor) -> List[str]:
        idx = self.forward(x).argmax(1)
        out: List[str] = []
        for i in range(idx.size(0)):
            out.append(self.labels[int(idx[i].item())])
        return out


# ======================================================================================
# Helpers
# ======================================================================================

def save_jit(m, path, extra=None):
    torch.jit.save_jit_module_to_flatbuffer(m, path, _extra_files=extra or {})
    return "torch.jit.save_jit_module_to_flatbuffer"


def py_attrs(mod: nn.Module, names):
    return {n: getattr(mod, n) for n in names}


class Result:
    def __init__(self, name, writer, parts=NO_PARAMS_FILE, **info):
        self.name = name
        self.writer = writer
        self.parts = parts
        self.info = info
        self.values = {}  # python values fed to torch, encoded with oracle.encode_value


def _qualified(script_module):
    out = {}
    for name, sm in script_module.named_modules():
        out[name] = sm._c._type().qualified_name()
    return out


# ======================================================================================
# Builders (each writes one file, returns a Result)
# ======================================================================================

def build_ivalues(path):
    mod = IValues()
    sm = torch.jit.script(mod)
    w = save_jit(sm, path)
    r = Result("ivalues.ff", w, methods=["forward", "get_nt", "get_tup", "get_complex",
                                         "sum_lists"],
               qualified_names=_qualified(sm),
               covers="every IValue kind as attributes and method constants")
    names = [n for n in vars(mod) if not n.startswith("_") and n != "training"]
    names += ["t_plain"] if "t_plain" not in names else []
    r.values["attributes"] = {n: getattr(mod, n) for n in names if n != "sub"}
    r.values["sub"] = {"k": mod.sub.k, "buf": mod.sub.buf}
    r.info["attribute_names"] = names + ["sub"]
    r.info["method_constants_used"] = ["2.5", "3", "'const \u2713 str'", "None", "True",
                                       "device('cpu')", "(1, 'tup')", "4"]
    return r


def build_enum(path):
    sm = torch.jit.script(EnumConst())
    w = save_jit(sm, path)
    return Result("enum_constant.ff", w, methods=["forward"], qualified_names=_qualified(sm),
                  enum={"qualified_name": "__torch__.Color", "members": {"RED": 1, "GREEN": 2}},
                  covers="an EnumValue method constant (torch's loaders fail on it)")


def _dtype_tensors():
    t = {}
    unsaveable = {}
    u8all = torch.arange(256, dtype=torch.int32).to(torch.uint8)
    t["u8"] = u8all.clone()
    t["i8"] = torch.tensor([-128, -1, 0, 1, 127], dtype=torch.int8)
    t["i16"] = torch.tensor([-32768, -1, 0, 1, 32767], dtype=torch.int16)
    t["i32"] = torch.tensor([-(2**31), -1, 0, 1, 2**31 - 1], dtype=torch.int32)
    t["i64"] = torch.tensor([-(2**63), -1, 0, 1, 2**63 - 1], dtype=torch.int64)
    t["u16"] = torch.tensor([0, 1, -1, 0x7FFF, -0x8000], dtype=torch.int16).view(torch.uint16)
    t["u32"] = torch.tensor([0, 1, -1, 2**31 - 1, -(2**31)], dtype=torch.int32).view(torch.uint32)
    t["u64"] = torch.tensor([0, 1, -1, 2**63 - 1, -(2**63)], dtype=torch.int64).view(torch.uint64)
    fvals = [0.0, -0.0, 1.0, -1.5, float("nan"), float("inf"), float("-inf"), 1.0 / 3.0]
    for name, dt in [("f16", torch.float16), ("f32", torch.float32), ("f64", torch.float64),
                     ("bf16", torch.bfloat16)]:
        fi = torch.finfo(dt)
        extra = [fi.max, fi.min, fi.tiny, fi.smallest_normal / 2, fi.eps]
        v = torch.tensor(fvals + extra, dtype=torch.float64).to(dt)
        if dt in (torch.float16, torch.bfloat16):  # smallest subnormal and a nan payload
            bits = torch.tensor([0x0001, -0x7FFF, 0x7C01 if dt == torch.float16 else 0x7F81],
                                dtype=torch.int16).view(dt)
        elif dt == torch.float32:
            bits = torch.tensor([0x00000001, -0x7FFFFFFF, 0x7FC00001],
                                dtype=torch.int32).view(dt)
        else:
            bits = torch.tensor([1, -0x7FFFFFFFFFFFFFFF, 0x7FF8000000000001],
                                dtype=torch.int64).view(dt)
        t[name] = torch.cat([v, bits])
    t["f32_2d"] = torch.randn(2, 3)
    t["c64"] = torch.tensor([complex(1, -2), complex(-0.0, float("inf")),
                             complex(float("nan"), 0.5)], dtype=torch.complex64)
    t["c128"] = torch.tensor([complex(1, -2), complex(-0.0, float("inf")),
                              complex(float("nan"), 1e-310)], dtype=torch.complex128)
    try:
        t["c32"] = torch.tensor([1.0, -2.0, -0.0, float("inf"), float("nan"), 0.5],
                                dtype=torch.float16).view(torch.complex32)
    except Exception as e:
        unsaveable["complex32"] = f"create: {e}"
    t["bool"] = torch.tensor([True, False, False, True])
    # every bit pattern of the one-byte float types
    for name in ["float8_e5m2", "float8_e4m3fn", "float8_e5m2fnuz", "float8_e4m3fnuz",
                 "float8_e8m0fnu", "float4_e2m1fn_x2"]:
        t[name] = u8all.clone().view(getattr(torch, name))
    for name in [f"uint{i}" for i in range(1, 8)] + [f"int{i}" for i in range(1, 8)] + \
            ["bits1x8", "bits2x4", "bits4x2", "bits8"]:
        dt = getattr(torch, name, None)
        if dt is None:
            unsaveable[name] = "no such dtype in this torch"
            continue
        try:
            t[name] = torch.tensor([0, 1, 2, 3, 127, 128, 255], dtype=torch.int32) \
                .to(torch.uint8).view(dt)
        except Exception as e:
            unsaveable[name] = f"create: {e}"
    try:
        t["bits16"] = torch.tensor([0, 1, -1, 0x1234], dtype=torch.int16).view(torch.bits16)
    except Exception as e:
        unsaveable["bits16"] = f"create: {e}"
    return t, unsaveable


def build_dtypes(path):
    tensors, unsaveable = _dtype_tensors()
    ok = {}
    for k, v in tensors.items():  # probe one by one: skip a dtype only if torch refuses it
        try:
            probe = torch.jit.script(Buffers({k: v}))
            torch.jit.save_jit_module_to_flatbuffer(probe, path)
            ok[k] = v
        except Exception as e:
            unsaveable[str(v.dtype).replace("torch.", "")] = f"{type(e).__name__}: {e}"
    sm = torch.jit.script(Buffers(ok))
    w = save_jit(sm, path)
    r = Result("dtypes.ff", w, methods=["forward"], unsaveable=unsaveable,
               buffer_dtypes={k: str(v.dtype).replace("torch.", "") for k, v in ok.items()},
               covers="one buffer per dtype, edge values / all bit patterns")
    r.values["buffers"] = ok
    return r


def build_layouts(path):
    mod = Layouts()
    sm = torch.jit.script(mod)
    w = save_jit(sm, path)
    r = Result("layouts.ff", w, methods=["forward"],
               covers="transposed parameter, offsets, stride 0, 0-d, empty, shared storage, "
                      "stepped slices")
    r.values["parameters"] = dict(mod.named_parameters())
    r.values["buffers"] = dict(mod.named_buffers())
    r.info["shared_storage_groups"] = [["base", "row1", "col2", "sliced"]]
    return r


def build_quantized(path):
    q = {}
    x = torch.randn(2, 3)
    q["q_int8"] = torch.quantize_per_tensor(x, 0.1, 3, torch.qint8)
    q["q_uint8"] = torch.quantize_per_tensor(x, 0.05, 128, torch.quint8)
    q["q_int32"] = torch.quantize_per_tensor(x, 1e-3, -5, torch.qint32)
    w = torch.randn(3, 4)
    q["pc_axis0"] = torch.quantize_per_channel(
        w, torch.tensor([0.1, 0.2, 0.3], dtype=torch.float64),
        torch.tensor([0, 1, -1]), 0, torch.qint8)
    q["pc_axis1"] = torch.quantize_per_channel(
        w, torch.tensor([0.1, 0.05, 0.2, 0.3], dtype=torch.float64),
        torch.tensor([128, 120, 130, 0]), 1, torch.quint8)
    emb = torch.randn(4, 6)
    mn, mx = emb.min(1).values, emb.max(1).values
    scales = ((mx - mn) / 255).float()
    zps = mn.float()  # float zero points (embedding-bag style, float qparams)
    q["fq_uint8"] = torch.quantize_per_channel(emb, scales, zps, 0, torch.quint8)
    errors = {}
    try:
        q["fq_4x2"] = torch.quantize_per_channel(emb, ((mx - mn) / 15).float(), zps, 0,
                                                 torch.quint4x2)
    except Exception as e:
        errors["quint4x2_per_channel_float_qparams"] = f"{type(e).__name__}: {e}"
    try:
        q["q_4x2"] = torch.quantize_per_tensor(torch.rand(6), 0.1, 2, torch.quint4x2)
    except Exception as e:
        errors["quint4x2_per_tensor"] = f"{type(e).__name__}: {e}"
    ok = {}
    for k, v in q.items():
        try:
            torch.jit.save_jit_module_to_flatbuffer(torch.jit.script(Quantized({k: v})), path)
            ok[k] = v
        except Exception as e:
            errors[k] = f"unsaveable: {type(e).__name__}: {e}"
    sm = torch.jit.script(Quantized(ok))
    wr = save_jit(sm, path)
    r = Result("quantized.ff", wr, methods=["forward"], errors=errors,
               qschemes={k: str(v.qscheme()).replace("torch.", "") for k, v in ok.items()},
               covers="quantized buffers: per-tensor qint8/quint8/qint32, per-channel "
                      "axis 0/1, per-channel float qparams quint8/quint4x2")
    r.values["buffers"] = ok
    return r


def build_setstate(path):
    mod = SetState()
    sm = torch.jit.script(mod)
    w = save_jit(sm, path)
    r = Result("setstate.ff", w, methods=["forward", "__getstate__", "__setstate__"],
               qualified_names=_qualified(sm),
               covers="CLASS_WITH_SETSTATE root (jit loader segfaults on it)")
    r.values["getstate"] = (mod.a, mod.w, mod.name, mod.training)
    r.info["after_setstate"] = {"a": 2, "name": "set-state"}
    return r


def build_setstate_inside(path):
    mod = SetStateInside()
    sm = torch.jit.script(mod)
    w = save_jit(sm, path)
    r = Result("setstate_inside.ff", w, methods=["forward"], qualified_names=_qualified(sm),
               covers="CLASS_WITH_SETSTATE module between field modules")
    r.values["state_dict"] = {k: v.detach() for k, v in mod.state_dict().items()}
    return r


def build_dynamic_quant(path):
    torch.backends.quantized.engine = "fbgemm" if "fbgemm" in \
        torch.backends.quantized.supported_engines else torch.backends.quantized.engine
    fm = nn.Sequential(nn.Linear(4, 3))
    qm = torch.ao.quantization.quantize_dynamic(fm, {nn.Linear}, dtype=torch.qint8)
    sm = torch.jit.script(qm)
    w = save_jit(sm, path)
    r = Result("dynamic_quant_linear.ff", w, methods=["forward"],
               qualified_names=_qualified(sm),
               quantized_engine=torch.backends.quantized.engine,
               custom_class="__torch__.torch.classes.quantized.LinearPackedParamsBase",
               covers="quantize_dynamic(nn.Linear) -> LinearPackedParamsBase custom class")
    r.values["float_weight"] = fm[0].weight.detach()
    r.values["float_bias"] = fm[0].bias.detach()
    wq, bq = qm[0]._packed_params._packed_params.unpack() if hasattr(
        qm[0]._packed_params._packed_params, "unpack") else (None, None)
    r.values["packed_weight"] = wq
    r.values["packed_bias"] = bq
    return r


def build_methods(path):
    sm = torch.jit.script(Methods())
    w = save_jit(sm, path)
    return Result("methods.ff", w, qualified_names=_qualified(sm),
                  methods=["forward", "f_int", "f_float", "f_str", "f_bool", "f_none",
                           "f_tuple", "f_list", "f_required"],
                  defaults={"forward": {"n": 2}, "f_int": {"a": 3, "b": -1},
                            "f_float": {"x": 0.5, "y": "-0.0"},
                            "f_str": {"s": "dflt \u2713", "sep": ""},
                            "f_bool": {"b": True, "c": False},
                            "f_none": {"o": None, "t": None}, "f_tuple": {"t": [1, 2.0]},
                            "f_list": {"l": None, "nested": [[1, 2], "x"]}, "f_required": {}},
                  covers="exported methods with defaults of every kind + control flow")


EXTRA = {
    "bytes.bin": bytes(range(256)),
    "empty.txt": b"",
    "text.txt": "h\u00e9llo \u2713 \u65e5\u672c\nsecond line\n".encode("utf-8"),
}


def build_extra(path):
    sm = torch.jit.script(Small())
    w = save_jit(sm, path, EXTRA)
    return Result("extra_files.ff", w, methods=["forward"],
                  extra_files={k: b64(v) for k, v in EXTRA.items()},
                  covers="binary / empty / UTF-8 extra files")


def build_deep_wide(path):
    sm = torch.jit.script(DeepWide())
    w = save_jit(sm, path)
    return Result("deep_wide.ff", w, methods=["forward"], qualified_names=_qualified(sm),
                  covers="12-level module chain + 30-child ModuleList (mangled class names)")


MLP_EXTRA = {"meta.json": b'{"writer": "test"}', "bin": bytes([0, 255, 0, 1])}
_MLP = {}


def _mlp():
    if "m" not in _MLP:
        torch.manual_seed(1)
        m = make_mlp()
        _MLP["m"] = m
        _MLP["sm"] = torch.jit.script(m)
    return _MLP["m"], _MLP["sm"]


def _mlp_result(name, writer, **kw):
    m, sm = _mlp()
    r = Result(name, writer, methods=["forward"], qualified_names=_qualified(sm), **kw)
    r.values["state_dict"] = {k: v.detach() for k, v in m.state_dict().items()}
    r.info["parameter_names"] = [k for k, _ in m.named_parameters()]
    return r


def build_mlp_jit(path):
    _, sm = _mlp()
    w = save_jit(sm, path, MLP_EXTRA)
    return _mlp_result("mlp_jit.ff", w, extra_files={k: b64(v) for k, v in MLP_EXTRA.items()},
                       covers="MLP, writer save_jit_module_to_flatbuffer")


def build_mlp_lite(path):
    _, sm = _mlp()
    sm._save_for_lite_interpreter(path, _extra_files=MLP_EXTRA, _use_flatbuffer=True)
    return _mlp_result("mlp_lite.ptl", "ScriptModule._save_for_lite_interpreter("
                       "_use_flatbuffer=True)",
                       extra_files={k: b64(v) for k, v in MLP_EXTRA.items()},
                       covers="MLP, writer _save_for_lite_interpreter(_use_flatbuffer=True)")


def build_mlp_mobile(path):
    lite = os.path.join(HERE, "mlp_lite.ptl")
    if not os.path.exists(lite):
        build_mlp_lite(lite)
    lm = torch.jit.mobile._load_for_lite_interpreter(lite)
    extra = {"mobile_note.txt": "written by _save_mobile_module \u2713"}
    torch._C._save_mobile_module(lm._c, path, extra)
    return _mlp_result("mlp_mobile.ff", "torch._C._save_mobile_module (from mlp_lite.ptl)",
                       extra_files={k: b64(v.encode("utf-8")) for k, v in extra.items()},
                       covers="MLP, writer _save_mobile_module: no jit_sources")


def build_mlp_params(path):
    m, _ = _mlp()
    d = {k: v.detach().clone() for k, v in m.state_dict().items()}
    d["extra.requires_grad"] = torch.ones(2, requires_grad=True)
    d["extra.int"] = torch.arange(3, dtype=torch.int64)
    torch._C._save_parameters(d, path, True)
    r = Result("mlp_params.ff", "torch._C._save_parameters(dict, path, True)", parts=ALL,
               methods=[], root_type="__torch__.SavedParameters",
               covers="parameter dict, writer _save_parameters")
    r.values["parameters"] = d
    return r


def build_sample(path):
    mod = SampleNet().eval()
    with torch.no_grad():
        bn = mod.features[1]
        bn.running_mean.copy_(torch.randn(8) * 0.1)
        bn.running_var.copy_(torch.rand(8) + 0.5)
    sm = torch.jit.script(mod)
    extra = {"model_info.json": json.dumps({
        "name": "tiny-convnet", "input_shape": [1, 1, 28, 28], "labels": mod.labels,
        "note": "pyflatmodule demo model, random weights"}, indent=1).encode()}
    w = save_jit(sm, path, extra)
    r = Result("sample.ptl", w, methods=["forward", "predict"], qualified_names=_qualified(sm),
               path="pyflatmodule/data/sample.ptl",
               extra_files={k: b64(v) for k, v in extra.items()},
               covers="CLI demo: tiny conv net (conv, batchnorm, pool, linear)")
    r.values["state_dict"] = {k: v.detach() for k, v in mod.state_dict().items()}
    return r


def build_empty_vectors(path):
    sm = torch.jit.script(EmptyLists())
    w = save_jit(sm, path)
    r = Result("empty_vectors.ff", w, methods=["forward"], qualified_names=_qualified(sm),
               covers="empty List[float]/List[int] attributes at 4 mod 8")
    r.values["attributes"] = {"floats": [], "ints": [], "tag": ""}
    return r


def build_empty_vectors_mobile(path):
    sm = torch.jit.script(EmptyLists())
    with tempfile.TemporaryDirectory() as tmp:
        lite = os.path.join(tmp, "lite.ptl")
        sm._save_for_lite_interpreter(lite, _use_flatbuffer=True)
        lm = torch.jit.mobile._load_for_lite_interpreter(lite)
        torch._C._save_mobile_module(lm._c, path, {})
    return Result("empty_vectors_mobile.ff",
                  "torch._C._save_mobile_module (lite module of EmptyLists)",
                  methods=["forward"],
                  covers="re-saved mobile module: empty debug handles at 4 mod 8")


def build_lstm_dynamic_quant(path):
    torch.backends.quantized.engine = "fbgemm" if "fbgemm" in \
        torch.backends.quantized.supported_engines else torch.backends.quantized.engine
    qm = torch.ao.quantization.quantize_dynamic(QuantLSTM(), {nn.LSTM}, dtype=torch.qint8)
    sm = torch.jit.script(qm)
    w = save_jit(sm, path)
    return Result("lstm_dynamic_quant.ff", w, methods=["forward"],
                  qualified_names=_qualified(sm),
                  quantized_engine=torch.backends.quantized.engine,
                  covers="quantize_dynamic(2-layer nn.LSTM): an empty DoubleList at 4 mod 8")


def build_strides(path):
    mod = Strides()
    sm = torch.jit.script(mod)
    w = save_jit(sm, path)
    r = Result("strides.ff", w, methods=["forward"], qualified_names=_qualified(sm),
               covers="channels-last weights (3x3, 1x1), empty tensors, odd size-1 strides")
    r.values["parameters"] = dict(mod.named_parameters())
    r.values["buffers"] = dict(mod.named_buffers())
    return r


def build_tensor_keys(path):
    mod = TensorKeys()
    sm = torch.jit.script(mod)
    w = save_jit(sm, path)
    r = Result("tensor_keys.ff", w, methods=["forward"], qualified_names=_qualified(sm),
               covers="a Dict[Tensor, int] attribute (tensor dict keys)")
    r.values["attributes"] = {"d": mod.d}
    return r


BUILDERS = [
    ("ivalues.ff", build_ivalues),
    ("enum_constant.ff", build_enum),
    ("dtypes.ff", build_dtypes),
    ("layouts.ff", build_layouts),
    ("quantized.ff", build_quantized),
    ("setstate.ff", build_setstate),
    ("setstate_inside.ff", build_setstate_inside),
    ("dynamic_quant_linear.ff", build_dynamic_quant),
    ("methods.ff", build_methods),
    ("extra_files.ff", build_extra),
    ("deep_wide.ff", build_deep_wide),
    ("mlp_jit.ff", build_mlp_jit),
    ("mlp_lite.ptl", build_mlp_lite),
    ("mlp_mobile.ff", build_mlp_mobile),
    ("mlp_params.ff", build_mlp_params),
    ("sample.ptl", build_sample),
    ("empty_vectors.ff", build_empty_vectors),
    ("empty_vectors_mobile.ff", build_empty_vectors_mobile),
    ("lstm_dynamic_quant.ff", build_lstm_dynamic_quant),
    ("strides.ff", build_strides),
    ("tensor_keys.ff", build_tensor_keys),
]


def model_path(name):
    return SAMPLE_PATH if name == "sample.ptl" else os.path.join(HERE, name)


def stem(name):
    return name.rsplit(".", 1)[0]


def write_inputs(r: Result):
    arrays = oracle._Arrays("inputs")
    doc = {"file": r.name, "writer": r.writer, "torch_version": torch.__version__,
           "oracle_parts": list(r.parts)}
    doc.update(r.info)
    if r.values:
        doc["values"] = {k: oracle.encode_value(v, arrays, k) for k, v in r.values.items()}
    pre = os.path.join(HERE, stem(r.name))
    with open(pre + ".inputs.json", "w", encoding="utf-8") as f:
        json.dump(doc, f, ensure_ascii=False, indent=1)
        f.write("\n")
    npz = pre + ".inputs.npz"
    if arrays.arrays:
        np.savez_compressed(npz, **arrays.arrays)
    elif os.path.exists(npz):
        os.remove(npz)


def main(argv=None):
    import argparse
    ap = argparse.ArgumentParser()
    ap.add_argument("--no-oracle", action="store_true")
    ap.add_argument("--only", default="")
    ap.add_argument("--jobs", type=int, default=2)
    a = ap.parse_args(argv)
    only = set(filter(None, a.only.split(",")))
    results = []
    for name, fn in BUILDERS:
        if only and name not in only:
            continue
        torch.manual_seed(0)
        path = model_path(name)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        r = fn(path)
        with open(path, "rb") as f:
            head = f.read(8)
        assert head[4:8] == b"PTMF", (name, head)
        write_inputs(r)
        results.append(r)
        print(f"wrote {path} ({os.path.getsize(path)} bytes)")
    if a.no_oracle:
        return 0
    err = oracle.build_ext()
    if err:
        print("warning: oracle helper extension failed to build:", err)

    def run(r):
        pre = os.path.join(HERE, stem(r.name) + ".oracle")
        res, _ = oracle.write_oracle(model_path(r.name), pre, r.parts)
        errs = {p: res[p]["error"] for p in r.parts
                if isinstance(res[p], dict) and "error" in res[p]}
        return r.name, errs

    with ThreadPoolExecutor(a.jobs) as ex:
        for name, errs in ex.map(run, results):
            print(f"oracle {name}: " + ("ok" if not errs else
                  "; ".join(f"{p}: {e.splitlines()[0] if e.strip() else e}"
                            for p, e in errs.items())))
    return 0


if __name__ == "__main__":
    sys.exit(main())
