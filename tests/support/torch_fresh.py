"""Writes a model torch has never shown the tests before:
``python tests/support/torch_fresh.py SEED OUT``.

The architecture, dtypes, attribute values and writer all follow from SEED, so the
differential tests can check pyflatmodule on files that are not in tests/data.
"""
from __future__ import annotations

import random
import sys
from typing import List, Tuple

import torch
from torch import nn

DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int8,
          torch.int16, torch.int32, torch.int64, torch.uint8, torch.bool, torch.complex64,
          torch.float8_e4m3fn, torch.float8_e5m2]


class Block(nn.Module):
    def __init__(self, rng: random.Random, width: int, depth: int) -> None:
        super().__init__()
        kinds = ["linear", "conv", "norm", "embed", "gru"]
        self.kind = rng.choice(kinds)
        if self.kind == "linear":
            self.body = nn.Linear(width, width, bias=rng.random() < 0.7)
        elif self.kind == "conv":
            self.body = nn.Conv1d(width, width, 3, padding=1)
        elif self.kind == "norm":
            self.body = nn.BatchNorm1d(width)
        elif self.kind == "embed":
            self.body = nn.Embedding(11, width)
        else:
            self.body = nn.GRU(width, width, batch_first=True)
        dtype = rng.choice(DTYPES)
        shape = [rng.randint(0, 4) for _ in range(rng.randint(0, 3))]
        data = torch.randn(shape) * 10
        self.register_buffer("extra", data.to(dtype))
        base = torch.randn(rng.randint(2, 5), rng.randint(2, 5))
        self.register_buffer("view_t", base.t())
        self.register_buffer("view_row", base[1:])
        self.scale = rng.random()
        self.count = rng.randint(-1000, 1000)
        self.tags: List[str] = [f"t{rng.randint(0, 99)}" for _ in range(rng.randint(0, 3))]
        self.child = Block(rng, width, depth - 1) if depth > 0 else None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = x * self.scale + self.count
        if self.child is not None:
            y = self.child(y)
        return y


class Stateful(nn.Module):
    """A set-state module: its attributes exist only once __setstate__ has run."""

    def __init__(self, rng: random.Random) -> None:
        super().__init__()
        self.register_buffer("table", torch.randn(rng.randint(1, 4), 3))
        self.offset = rng.randint(-5, 5)
        self.label = f"s{rng.randint(0, 9)}"

    @torch.jit.export
    def __getstate__(self) -> Tuple[torch.Tensor, int, str, bool]:
        return (self.table, self.offset, self.label, self.training)

    @torch.jit.export
    def __setstate__(self, state: Tuple[torch.Tensor, int, str, bool]) -> None:
        self.table = state[0]
        self.offset = state[1] * 2
        self.label = state[2]
        self.training = state[3]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.offset


class Root(nn.Module):
    def __init__(self, rng: random.Random) -> None:
        super().__init__()
        width = rng.randint(2, 6)
        self.blocks = nn.ModuleList([Block(rng, width, rng.randint(0, 3))
                                     for _ in range(rng.randint(1, 4))])
        self.head = nn.Linear(width, rng.randint(1, 3))
        self.stateful = Stateful(rng) if rng.random() < 0.7 else None
        self.lookup = {f"k{i}": rng.randint(0, 9) for i in range(rng.randint(0, 3))}

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for b in self.blocks:
            x = b(x)
        if self.stateful is not None:
            x = self.stateful(x)
        return self.head(x)

    @torch.jit.export
    def describe(self, n: int = 2, tag: str = "x") -> List[str]:
        return [tag for _ in range(n)]


def main() -> None:
    seed, out = int(sys.argv[1]), sys.argv[2]
    rng = random.Random(seed)
    torch.manual_seed(seed)
    m = torch.jit.script(Root(rng).eval())
    if rng.random() < 0.5:
        torch.jit.save_jit_module_to_flatbuffer(m, out)
    else:
        m._save_for_lite_interpreter(out, _use_flatbuffer=True)


if __name__ == "__main__":
    main()
