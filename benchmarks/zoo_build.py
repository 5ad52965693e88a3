"""Writes the zoo: real architectures saved by torch in every PTMF form it writes.

``python zoo_build.py OUT_DIR [MODEL...]`` (torch is imported only here; run it in a
subprocess). Each model is built with random weights (nothing is downloaded) and saved as

- ``<model>.jit.ff``: ``torch.jit.save_jit_module_to_flatbuffer`` (has jit sources);
- ``<model>.lite.ptl``: ``_save_for_lite_interpreter(..., _use_flatbuffer=True)``;
- ``<model>.mobile.ff``: the lite file loaded by the lite interpreter and saved again
  with ``torch._C._save_mobile_module`` (no jit sources);
- ``<model>.params.ff``: ``torch._C._save_parameters(state_dict, path, True)``.

A form torch fails to write is recorded, not fatal. ``OUT_DIR/zoo.json`` lists every file
written with its model, form and kind, and every failure.
"""

import json
import os
import sys
import warnings
from typing import Any, Callable, Dict, List

import torch
import torch.jit.mobile  # noqa: F401  (registers torch.jit.mobile)
from torch import Tensor, nn

from zoo import FORMS
from zoo import MODELS as MODEL_NAMES

warnings.filterwarnings("ignore")


def _torchvision() -> Any:
    """torchvision, importable beside a CPU torch whose build lacks its CUDA operators:
    the two operators its import registers fakes for are declared first."""
    if "torchvision" not in sys.modules:
        try:
            lib = torch.library.Library("torchvision", "FRAGMENT")
            lib.define("nms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")
            lib.define("qnms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")
            _torchvision.lib = lib  # type: ignore[attr-defined]  # keep the fragment alive
        except RuntimeError:
            pass  # already defined: the wheel's own operators loaded
    import torchvision
    return torchvision


def _tv(name: str, **kw: Any) -> Callable[[], nn.Module]:
    return lambda: getattr(_torchvision().models, name)(weights=None, **kw)


def _timm(name: str) -> Callable[[], nn.Module]:
    def make() -> nn.Module:
        _torchvision()   # timm imports it
        import timm
        return timm.create_model(name, pretrained=False)
    return make


class Recurrent(nn.Module):
    """An LSTM and a GRU with an embedding in front and a head behind."""

    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(100, 32)
        self.lstm = nn.LSTM(32, 48, num_layers=2, batch_first=True)
        self.gru = nn.GRU(48, 24, batch_first=True, bidirectional=True)
        self.head = nn.Linear(48, 10)

    def forward(self, x: Tensor) -> Tensor:
        y, _ = self.lstm(self.embed(x))
        z, _ = self.gru(y)
        return self.head(z)


class Transformer(nn.Module):
    """nn.Transformer (encoder and decoder) with embeddings."""

    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(100, 32)
        self.transformer = nn.Transformer(d_model=32, nhead=4, num_encoder_layers=2,
                                          num_decoder_layers=2, dim_feedforward=64,
                                          batch_first=True)
        self.head = nn.Linear(32, 100)

    def forward(self, src: Tensor, tgt: Tensor) -> Tensor:
        return self.head(self.transformer(self.embed(src), self.embed(tgt)))


def _dynamic_quant(make: Callable[[], nn.Module]) -> Callable[[], nn.Module]:
    def build() -> nn.Module:
        return torch.ao.quantization.quantize_dynamic(
            make().eval(), {nn.Linear, nn.LSTM, nn.GRU}, dtype=torch.qint8)
    return build


class SmallConv(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.quant = torch.ao.quantization.QuantStub()
        self.conv1 = nn.Conv2d(3, 16, 3, padding=1)
        self.relu = nn.ReLU()
        self.conv2 = nn.Conv2d(16, 8, 1)
        self.fc = nn.Linear(8 * 8 * 8, 10)
        self.dequant = torch.ao.quantization.DeQuantStub()

    def forward(self, x: Tensor) -> Tensor:
        x = self.conv2(self.relu(self.conv1(self.quant(x))))
        return self.dequant(self.fc(x.reshape(x.shape[0], -1)))


def _static_quant() -> nn.Module:
    """Eager-mode post-training static quantization (per-channel conv weights)."""
    torch.backends.quantized.engine = "qnnpack" \
        if "qnnpack" in torch.backends.quantized.supported_engines else "fbgemm"
    m = SmallConv().eval()
    m.qconfig = torch.ao.quantization.get_default_qconfig(torch.backends.quantized.engine)
    torch.ao.quantization.prepare(m, inplace=True)
    m(torch.randn(2, 3, 8, 8))
    torch.ao.quantization.convert(m, inplace=True)
    return m


def _with(make: Callable[[], nn.Module], **to: Any) -> Callable[[], nn.Module]:
    return lambda: make().to(**to)


#: name -> builder: real architectures in their standard configurations.
BUILDERS: Dict[str, Callable[[], nn.Module]] = {
    "resnet18": _tv("resnet18"),
    "resnet18_channels_last": _with(_tv("resnet18"), memory_format=torch.channels_last),
    "mobilenet_v2": _tv("mobilenet_v2"),
    "mobilenet_v3_small": _tv("mobilenet_v3_small"),
    "mobilenet_v3_small_channels_last": _with(_tv("mobilenet_v3_small"),
                                              memory_format=torch.channels_last),
    "efficientnet_b0": _tv("efficientnet_b0"),
    "squeezenet1_1": _tv("squeezenet1_1"),
    "shufflenet_v2_x0_5": _tv("shufflenet_v2_x0_5"),
    "mnasnet0_5": _tv("mnasnet0_5"),
    "regnet_y_400mf": _tv("regnet_y_400mf"),
    "mobilenet_v2_fp16": _with(_tv("mobilenet_v2"), dtype=torch.float16),
    "squeezenet1_1_bf16": _with(_tv("squeezenet1_1"), dtype=torch.bfloat16),
    "efficientvit_m0": _timm("efficientvit_m0"),
    "vit_tiny": _timm("vit_tiny_patch16_224"),
    "convnext_atto": _timm("convnext_atto"),
    "mobilevit_xxs": _timm("mobilevit_xxs"),
    "transformer": Transformer,
    "recurrent": Recurrent,
    "recurrent_dynamic_qint8": _dynamic_quant(Recurrent),
    "conv_static_quant": _static_quant,
}

assert tuple(BUILDERS) == MODEL_NAMES, "zoo.py and zoo_build.py list different models"


def _save(model: nn.Module, scripted: Any, name: str, out: str) -> List[Dict[str, Any]]:
    written: List[Dict[str, Any]] = []

    def record(form: str, path: str, write: Callable[[str], None]) -> None:
        tmp = path + ".tmp"
        try:
            write(tmp)
            os.replace(tmp, path)
            written.append({"model": name, "form": form, "file": os.path.basename(path)})
        except Exception as e:  # recorded: some forms torch cannot write for some models
            written.append({"model": name, "form": form, "error": _first_line(e)})
            if os.path.exists(tmp):
                os.remove(tmp)

    base = os.path.join(out, name)
    lite = base + FORMS["lite"]
    record("jit", base + FORMS["jit"],
           lambda p: torch.jit.save_jit_module_to_flatbuffer(scripted, p))
    record("lite", lite, lambda p: scripted._save_for_lite_interpreter(p, _use_flatbuffer=True))
    if os.path.exists(lite):
        record("mobile", base + FORMS["mobile"],
               lambda p: torch._C._save_mobile_module(
                   torch._C._load_for_lite_interpreter(lite, torch.device("cpu")), p, {}))
    record("params", base + FORMS["params"],
           lambda p: torch._C._save_parameters(
               {k: v for k, v in model.state_dict().items() if isinstance(v, Tensor)}, p, True))
    return written


def _first_line(e: Exception) -> str:
    text = str(e).strip().splitlines()
    return f"{type(e).__name__}: {text[0] if text else ''}"[:300]


def build(out: str, names: List[str]) -> Dict[str, Any]:
    """Writes every form of each named model into ``out``; returns the manifest."""
    os.makedirs(out, exist_ok=True)
    torch.manual_seed(0)
    manifest: Dict[str, Any] = {"torch": torch.__version__, "files": []}
    for name in names:
        try:
            model = BUILDERS[name]().eval()
            scripted = torch.jit.script(model)
        except Exception as e:
            manifest["files"].append({"model": name, "form": "script", "error": _first_line(e)})
            continue
        manifest["files"] += _save(model, scripted, name, out)
    with open(os.path.join(out, "zoo.json"), "w", encoding="utf-8") as f:
        json.dump(manifest, f, indent=1)
    return manifest


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(f"usage: {sys.argv[0]} OUT_DIR [MODEL...]  (models: {', '.join(MODEL_NAMES)})")
    build(sys.argv[1], sys.argv[2:] or list(MODEL_NAMES))
