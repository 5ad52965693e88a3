"""Small stand-ins for the benchmark models, written without torch.

Used only when torch is not installed and no torch-written file is cached, so the
untimed run still exercises every pyflatmodule side of the suites (the torch sides skip
with their reason). Written with tests/support/ptmf_craft.py (FlatBuffers' own Python builder):
the same module trees torch writes (root, ModuleList, Linear-like leaves, their
``jit_sources`` declarations), not byte-identical files.
"""
from __future__ import annotations

import os
import sys
from typing import Any, Dict, List, Optional, Tuple

import numpy as np

# pytest has tests/ on sys.path (pyproject.toml's pythonpath); `python
# benchmarks/benchmodels.py`, which may write these stand-ins, does not.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(
    __file__))), "tests"))
import support.ptmf_craft as c  # noqa: E402

_CONTAINER = "__torch__.torch.nn.modules.container"
_LEAF = "__torch__.torch.nn.modules.linear"


def _source(name: str, params: List[str], buffers: List[str], attrs: List[str]) -> str:
    def names(xs: List[str]) -> str:
        return "[" + "".join(f'"{x}", ' for x in xs) + "]"
    body = "".join(f"  {a} : Tensor\n" if a in params + buffers else f"  {a} : bool\n"
                   for a in attrs)
    return (f"class {name}(Module):\n  __parameters__ = {names(params)}\n"
            f"  __buffers__ = {names(buffers)}\n{body}")


def module_tree(leaves: List[List[Tuple[str, Tuple[int, ...]]]], seed: int = 0,
                extra: Optional[Dict[str, Any]] = None) -> bytes:
    """Root -> ``layers`` (a ModuleList) -> one Linear-like leaf per entry of ``leaves``,
    each with the float32 parameters listed. ``extra`` adds root attributes: an int64
    array becomes a buffer; a list of ivalues is stored from index 2 on, in order, and
    its last entry is the attribute (earlier ones are what it refers to)."""
    rng = np.random.default_rng(seed)
    ivalues: List[Dict[str, Any]] = [c.NoneV(), c.Bool(False)]
    storages: List[bytes] = []
    root_attrs, root_names, buffers = [1], ["training"], []
    for name, value in (extra or {}).items():
        if isinstance(value, np.ndarray):
            storages.append(value.tobytes())
            ivalues.append(c.Tensor(list(value.shape), scalar_type=4,
                                    storage=len(storages) - 1))
            buffers.append(name)
        else:
            ivalues.extend(value)
        root_attrs.append(len(ivalues) - 1)
        root_names.append(name)
    leaf_types: Dict[Tuple[str, ...], int] = {}
    object_types: List[Dict[str, Any]] = [
        {"type_name": "__torch__.Root", "type": c.CLASS_WITH_FIELD,
         "attr_names": root_names + ["layers"]},
        {"type_name": f"{_CONTAINER}.ModuleList", "type": c.CLASS_WITH_FIELD,
         "attr_names": ["training"] + [str(i) for i in range(len(leaves))]},
    ]
    sources = {"__torch__": _source("Root", [], buffers, ["training"] + buffers),
               _CONTAINER: _source("ModuleList", [], [], ["training"]), _LEAF: ""}
    objects = []
    for leaf in leaves:
        names = tuple(n for n, _ in leaf)
        if names not in leaf_types:
            leaf_types[names] = len(object_types)
            cls = f"Leaf{len(leaf_types)}"
            object_types.append({"type_name": f"{_LEAF}.{cls}", "type": c.CLASS_WITH_FIELD,
                                 "attr_names": list(names) + ["training"]})
            sources[_LEAF] += _source(cls, list(names), [], list(names) + ["training"])
        attrs = []
        for _, shape in leaf:
            storages.append(rng.standard_normal(int(np.prod(shape)), np.float32).tobytes())
            ivalues.append(c.Tensor(list(shape), storage=len(storages) - 1,
                                    requires_grad=True))
            attrs.append(len(ivalues) - 1)
        ivalues.append(c.Obj(leaf_types[names], attrs + [1]))
        objects.append(len(ivalues) - 1)
    ivalues.append(c.Obj(1, [1] + objects))
    ivalues.append(c.Obj(0, root_attrs + [len(ivalues) - 1]))
    module = {"bytecode_version": 9, "operator_version": 7, "state_obj": len(ivalues) - 1,
              "methods": [], "ivalues": ivalues, "storage_data_size": len(storages),
              "storage_data": storages, "object_types": object_types,
              "jit_sources": sources, "jit_constants": [],
              "mobile_ivalue_size": len(ivalues)}
    return c.build(module, storage_align=32)


def build(kind: str, params: Dict[str, Any]) -> Tuple[bytes, int]:
    """(file bytes, tensor bytes) of a stand-in for ``kind`` at ``params``."""
    if kind in ("linear", "metadata"):
        w = params["width"]
        leaves = [[("weight", (w, w)), ("bias", (w,))]] * params["layers"]
        return module_tree(leaves), 4 * params["layers"] * (w * w + w)
    if kind == "transformer":
        d, f = params["d_model"], params["dim_ff"]
        block = [("in_proj_weight", (3 * d, d)), ("in_proj_bias", (3 * d,)),
                 ("out_proj_weight", (d, d)), ("out_proj_bias", (d,)),
                 ("linear1_weight", (f, d)), ("linear1_bias", (f,)),
                 ("linear2_weight", (d, f)), ("linear2_bias", (d,)),
                 ("norm1_weight", (d,)), ("norm1_bias", (d,)),
                 ("norm2_weight", (d,)), ("norm2_bias", (d,))]
        size = sum(int(np.prod(s)) for _, s in block) * 4 * params["layers"]
        return module_tree([block] * params["layers"]), size
    if kind == "tokenizer":
        n = params["tokens"]
        base = 2   # extras start after ivalues 0 (None) and 1 (training)
        strings = [c.Str(f"tok{i:07d}") for i in range(n)]
        tokens = c.List(list(range(base, base + n)), "List[str]")
        first_merge = base + n + 1
        merges = [c.Tuple([base + i, base + (i * 7919 + 1) % n]) for i in range(n)]
        merge_list = c.List(list(range(first_merge, first_merge + n)),
                            "List[Tuple[str, str]]")
        ids = np.arange(16, dtype=np.int64)
        data = module_tree([], extra={"tokens": strings + [tokens],
                                      "merges": merges + [merge_list], "ids": ids})
        return data, ids.nbytes
    raise ValueError(f"unknown model kind {kind!r}")
