"""Writes the benchmark models with torch: ``python build_models.py OUT_DIR SPEC_JSON...``.

Run by ``benchmodels.ensure`` in a subprocess (torch is imported only here). Each SPEC_JSON
is ``{"name", "kind", "params", "file", "safetensors"}``; every file is written to a
temporary name and renamed into place, and a ``<file>.json`` beside it records what the
builder knows (parameter count, whether torch's own loaders read the file back).
"""

import copy
import json
import os
import sys
import time
import warnings
from typing import Any, Dict, List, Tuple

import torch
import torch.jit.mobile  # noqa: F401  (registers torch.jit.mobile)
from torch import Tensor, nn

warnings.filterwarnings("ignore", category=DeprecationWarning)


class Chain(nn.Module):
    """Layers applied in turn (the large Linear models)."""

    def __init__(self, layers: List[nn.Module]) -> None:
        super().__init__()
        self.layers = nn.ModuleList(layers)

    def forward(self, x: Tensor) -> Tensor:
        for layer in self.layers:
            x = layer(x)
        return x

    @torch.jit.export
    def first_weight(self) -> Tensor:
        return self.layers[0].weight


class Bank(nn.Module):
    """Many small layers in a ModuleList that no method indexes: compiling
    ``self.layers[0]`` desugars the whole list, quadratic in its length (a 20k-layer
    model then takes minutes to script, 200k hours). ``head`` is what forward uses."""

    def __init__(self, layers: List[nn.Module]) -> None:
        super().__init__()
        self.head = layers[0]
        self.layers = nn.ModuleList(layers[1:])

    def forward(self, x: Tensor) -> Tensor:
        return self.head(x)

    @torch.jit.export
    def first_weight(self) -> Tensor:
        return self.head.weight


class Encoder(nn.Module):
    def __init__(self, d_model: int, nhead: int, dim_ff: int, layers: int) -> None:
        super().__init__()
        layer = nn.TransformerEncoderLayer(d_model, nhead, dim_ff, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)

    def forward(self, x: Tensor) -> Tensor:
        return self.encoder(x)

    @torch.jit.export
    def first_weight(self) -> Tensor:
        return self.encoder.layers[0].self_attn.in_proj_weight


class Tokenizer(nn.Module):
    """A BPE-style vocabulary: one String ivalue per token, one Tuple per merge (the
    merge strings are the token strings, stored once), so about two tables per ivalue."""

    tokens: List[str]
    merges: List[Tuple[str, str]]

    def __init__(self, n: int) -> None:
        super().__init__()
        self.tokens = [f"tok{i:07d}" for i in range(n)]
        self.merges = [(self.tokens[i], self.tokens[(i * 7919 + 1) % n]) for i in range(n)]
        self.register_buffer("ids", torch.arange(16, dtype=torch.int64))

    def forward(self, x: Tensor) -> Tensor:
        return x + len(self.tokens)

    @torch.jit.export
    def first_weight(self) -> Tensor:
        return self.ids


def _linears(count: int, width: int, distinct: bool) -> List[nn.Module]:
    if distinct:
        return [nn.Linear(width, width) for _ in range(count)]
    # Thousands of tiny layers: script one and copy it (scripting each instance costs
    # milliseconds), then give every copy its own values.
    proto = torch.jit.script(nn.Linear(width, width).eval())
    layers = []
    with torch.no_grad():
        for _ in range(count):
            c = copy.deepcopy(proto)
            c.weight.normal_()
            c.bias.normal_()
            layers.append(c)
    return layers


def build(kind: str, params: Dict[str, Any]) -> torch.jit.ScriptModule:
    if kind == "linear":
        module: nn.Module = Chain(_linears(params["layers"], params["width"], True))
    elif kind == "metadata":
        module = Bank(_linears(params["layers"], params["width"], False))
    elif kind == "transformer":
        module = Encoder(params["d_model"], params["nhead"], params["dim_ff"], params["layers"])
    elif kind == "tokenizer":
        module = Tokenizer(params["tokens"])
    else:
        raise ValueError(f"unknown model kind {kind!r}")
    return torch.jit.script(module.eval())


def _probe(path: str) -> Dict[str, Any]:
    """Whether torch's two flatbuffer loaders read the file (both raise on the files
    they reject, e.g. more than 1,000,000 tables)."""
    out: Dict[str, Any] = {}
    for key, load in (("torch_lite", torch.jit.mobile._load_for_lite_interpreter),
                      ("torch_jit", torch.jit.jit_module_from_flatbuffer)):
        m = None
        try:
            m = load(path)
            if key == "torch_lite":
                float(m.run_method("first_weight").flatten()[0])
            else:
                float(next(iter(m.state_dict().values())).flatten()[0])
            out[key] = None
        except Exception as e:  # noqa: BLE001  (recorded as the reason to skip)
            out[key] = f"{type(e).__name__}: {str(e).splitlines()[0][:200]}"
        finally:
            m = None
    return out


def main() -> None:
    out_dir = sys.argv[1]
    torch.manual_seed(0)
    for arg in sys.argv[2:]:
        spec = json.loads(arg)
        t0 = time.time()
        sm = build(spec["kind"], spec["params"])
        path = os.path.join(out_dir, spec["file"])
        tmp = f"{path}.{os.getpid()}.tmp"
        sm._save_for_lite_interpreter(tmp, _use_flatbuffer=True)
        meta: Dict[str, Any] = {"name": spec["name"], "kind": spec["kind"],
                                "params": spec["params"], "torch": torch.__version__}
        state = sm.state_dict()
        meta["tensors"] = len(state)
        meta["tensor_bytes"] = sum(t.numel() * t.element_size() for t in state.values())
        if spec.get("safetensors"):
            from safetensors.torch import save_file
            st_tmp = f"{path}.safetensors.{os.getpid()}.tmp"
            save_file({k: v.detach().contiguous() for k, v in state.items()}, st_tmp)
            os.replace(st_tmp, path[:-4] + ".safetensors")
        del sm, state
        meta.update(_probe(tmp))
        meta["build_seconds"] = round(time.time() - t0, 2)
        os.replace(tmp, path)
        with open(path + ".json.tmp", "w", encoding="utf-8") as f:
            json.dump(meta, f, indent=1)
        os.replace(path + ".json.tmp", path + ".json")
        print(f"built {spec['name']}: {os.path.getsize(path)} bytes in {meta['build_seconds']} s",
              flush=True)


if __name__ == "__main__":
    main()
