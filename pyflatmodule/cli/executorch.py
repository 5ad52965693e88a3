"""What the commands show of ExecuTorch programs (``.pte``) and data files (``.ptd``).

Each command opens its file with ``open_model``; a ``Program`` or ``DataFile`` is handed
to the functions here, which use only the public API.
"""
from __future__ import annotations

from collections import Counter
from typing import Any, Dict, List, Optional, Union

import numpy as np

from ..core.dtypes import QuantizedTensor
from ..executorch import DataFile, Method, Program, TensorSpec
from .common import Context, Json, Style, human

__all__ = ["ExecuTorchFile", "summarize", "print_info", "verify_fields", "verify_line",
           "tree", "print_tree", "disassemble", "print_dis", "operator_names", "tensors",
           "blob", "blob_names", "dtype_name"]

ExecuTorchFile = Union[Program, DataFile]
Tensor = Union[np.ndarray, QuantizedTensor]


# ------------------------------------------------------------------ info, verify

def _n(count: int, noun: str) -> str:
    """``1 segment``, ``3 segments``."""
    return f"{count:,} {noun}{'' if count == 1 else 's'}"


def summarize(path: str, f: ExecuTorchFile) -> Json:
    """The facts ``info`` prints."""
    return {"file": path, **f.info()}


def print_info(ctx: Context, s: Json) -> None:
    """The text ``info`` prints for one ExecuTorch file."""
    st = ctx.style
    what = "ExecuTorch program" if s["format"] == "pte" else "ExecuTorch data file"
    ctx.print(f"{st(s['file'], 'bold')}: {what}, {s['size']:,} bytes, version {s['version']}")
    ctx.print(f"  flatbuffer: {s['flatbuffer_size']:,} bytes   segment data: "
              f"{s['segment_data_size']:,} bytes in {_n(s['segments'], 'segment')}")
    if s["format"] == "ptd":
        ctx.print(f"  tensors: {s['tensors']}   named data: {s['named_data']}")
        return
    ctx.print(f"  constant tensors: {s['constant_tensors']} ({s['constant_bytes']:,} bytes)   "
              f"named data: {s['named_data']}")
    ctx.print(f"  methods: {len(s['methods'])}")
    for m in s["methods"]:
        ctx.print(f"    {st(m['name'], 'bold')}: {_n(m['values'], 'value')}, "
                  f"{_n(m['instructions'], 'instruction')}, inputs {m['inputs']}, "
                  f"outputs {m['outputs']}")
        planned = sum(m["non_const_buffer_sizes"])
        ctx.print(f"      {_n(len(m['operators']), 'operator')}, "
                  f"{_n(len(m['delegates']), 'delegate')}"
                  f"{' (' + ', '.join(m['delegates']) + ')' if m['delegates'] else ''}, "
                  f"{human(planned)} memory-planned")


def verify_fields(f: ExecuTorchFile) -> Json:
    """What ``verify`` reports of a valid ExecuTorch file."""
    info = f.info()
    if isinstance(f, DataFile):
        return {"format": "ptd", "size": info["size"], "tensors": info["tensors"],
                "named_data": info["named_data"]}
    return {"format": "pte", "size": info["size"], "methods": len(info["methods"]),
            "values": sum(m["values"] for m in info["methods"]),
            "tensors": info["constant_tensors"], "named_data": info["named_data"]}


def verify_line(result: Json) -> str:
    """The parenthesis of ``verify``'s OK line for an ExecuTorch file."""
    if result["format"] == "ptd":
        return (f"{result['size']:,} bytes, ExecuTorch data file, {result['tensors']:,} "
                f"tensors, {result['named_data']:,} named data")
    return (f"{result['size']:,} bytes, ExecuTorch program, {_n(result['methods'], 'method')}, "
            f"{result['values']:,} values, {result['tensors']:,} constant tensors")


# ------------------------------------------------------------------ values

def _tensor_text(v: Union[np.ndarray, TensorSpec]) -> str:
    if isinstance(v, np.ndarray):
        return f"const {v.dtype}{list(v.shape)}"
    where = {"planned": "planned", "none": "input", "external": f"external {v.name!r}"}
    return f"{where.get(v.stored, v.stored)} {v.dtype}{list(v.shape)}"


def value_text(m: Method, i: int, limit: int = 40) -> str:
    """Value ``i`` of a method in a few words: its kind, and its value when short."""
    kind = m.values.kind(i)
    v = m.values[i]
    if kind == "Tensor":
        return _tensor_text(v)
    if kind in ("Null", "NONE"):
        return "None"
    text = repr(v)
    return f"{kind} {text if len(text) <= limit else text[:limit - 3] + '...'}"


def _value_node(m: Method, i: int) -> Json:
    v = m.values[i]
    node: Json = {"index": i, "kind": m.values.kind(i)}
    if isinstance(v, np.ndarray):
        node.update(stored="constant", dtype=str(v.dtype), shape=list(v.shape),
                    strides=list(v.strides), bytes=int(v.nbytes))
    elif isinstance(v, TensorSpec):
        node.update(stored=v.stored, dtype=v.dtype, shape=list(v.shape),
                    dim_order=list(v.dim_order), allocation=v.allocation, fqn=v.name)
    else:
        node["value"] = v
    return node


# ------------------------------------------------------------------ tree

def tree(f: ExecuTorchFile, max_depth: Optional[int]) -> Json:
    """The file's structure as nested nodes: methods with their values, operators, chains
    and delegates; named data; a data file's tensors."""
    def cut(children: List[Json], depth: int) -> Dict[str, Any]:
        if max_depth is not None and depth >= max_depth:
            return {"truncated": len(children)} if children else {}
        return {"children": children}

    root: Json = {"name": "", "path": "",
                  "kind": "program" if isinstance(f, Program) else "data_file"}
    children: List[Json] = []
    if isinstance(f, Program):
        for name, m in f.methods.items():
            values = [_value_node(m, i) for i in range(len(m.values))]
            chains = [{"name": f"chains[{k}]", "path": f"{name}.chains[{k}]", "kind": "chain",
                       "instructions": len(c.instructions)} for k, c in enumerate(m.chains)]
            delegates = [{"name": f"delegates[{k}]", "path": f"{name}.delegates[{k}]",
                          "kind": "delegate", "id": d.id, "location": d.location,
                          "bytes": len(d.data)} for k, d in enumerate(m.delegates)]
            counts = Counter(v["kind"] for v in values)
            parts = [{"name": "values", "path": f"{name}.values", "kind": "values",
                      "length": len(values), "kinds": dict(sorted(counts.items())),
                      **cut([{"name": f"[{v['index']}]",
                              "path": f"{name}.values[{v['index']}]", **v} for v in values],
                            2)},
                     {"name": "operators", "path": f"{name}.operators", "kind": "operators",
                      "operators": [str(o) for o in m.operators]},
                     *chains, *delegates]
            children.append({"name": name, "path": name, "kind": "method", "inputs": m.inputs,
                             "outputs": m.outputs, **cut(parts, 1)})
        tensors: Dict[str, Tensor] = f.state_dict()
    else:
        tensors = dict(f.tensors)
    for key, t in tensors.items():
        children.append({"name": key, "path": key, "kind": "tensor", "dtype": dtype_name(t),
                         "shape": list(t.shape), "bytes": int(_storage(t).nbytes)})
    for key, data in f.named_data.items():
        if key not in tensors:
            children.append({"name": key, "path": key, "kind": "named_data",
                             "bytes": len(data)})
    root.update(cut(children, 0))
    return root


def _tree_line(st: Style, node: Json) -> str:
    kind = node["kind"]
    if kind == "method":
        return f"{st('method', 'cyan')}, inputs {node['inputs']} -> outputs {node['outputs']}"
    if kind == "values":
        kinds = ", ".join(f"{n} {k}" for k, n in node["kinds"].items())
        return f"{node['length']} ({kinds})"
    if kind == "operators":
        return ", ".join(node["operators"]) or "none"
    if kind == "chain":
        return f"{node['instructions']} instructions"
    if kind == "delegate":
        return (f"{st('delegate', 'cyan')} {node['id']} "
                f"({node['location']}, {node['bytes']:,} bytes)")
    if kind == "named_data":
        return st(f"named data, {node['bytes']:,} bytes", "dim")
    if kind == "Tensor" or kind == "tensor":
        where = node.get("stored", "constant")
        text = st(f"tensor {node['dtype']}{node['shape']}", "green")
        return text + st(f", {where}" + (f", {node['bytes']:,} bytes" if "bytes" in node
                                          else ""), "dim")
    if "value" in node:
        return f"{kind} = {node['value']!r}"
    return str(kind)


def print_tree(ctx: Context, node: Json, indent: int = 0) -> None:
    """The tree, one node a line, indented by depth."""
    label = ctx.style(node["name"], "bold") + ": " if indent else ""
    ctx.print("  " * indent + label + _tree_line(ctx.style, node))
    for child in node.get("children", []):
        print_tree(ctx, child, indent + 1)
    if "truncated" in node:
        ctx.print("  " * (indent + 1) + ctx.style(f"... {node['truncated']} not shown (--depth)",
                                                   "dim"))


# ------------------------------------------------------------------ dis, ops

def disassemble(m: Method) -> Json:
    """A method's instruction chains with operator names and value kinds."""
    operators = [str(o) for o in m.operators]
    delegates = m.delegates
    chains = []
    for k, c in enumerate(m.chains):
        code = []
        for pc, ins in enumerate(c.instructions):
            kind = type(ins).__name__
            entry: Json = {"pc": pc, "op": kind, **ins._asdict()}
            if kind == "KernelCall":
                entry["target"] = operators[ins.op_index]   # type: ignore[union-attr]
            elif kind == "DelegateCall":
                entry["target"] = delegates[ins.delegate_index].id   # type: ignore[union-attr]
            used = [v for v in ins if isinstance(v, int)] if kind in ("MoveCall", "FreeCall") \
                else list(getattr(ins, "args", ()))
            if kind == "JumpFalseCall":
                used = [ins.cond_value_index]   # type: ignore[union-attr]
            entry["operands"] = used
            entry["values"] = [{"index": i, "text": value_text(m, i)}
                               for i in dict.fromkeys(used)]   # each value once
            code.append(entry)
        chains.append({"index": k, "inputs": c.inputs, "outputs": c.outputs,
                       "instructions": code})
    return {"name": m.name, "inputs": m.inputs, "outputs": m.outputs,
            "operators": operators, "delegates": [d.id for d in delegates], "chains": chains}


def print_dis(ctx: Context, d: Json) -> None:
    """The listing of one method."""
    st = ctx.style
    n = sum(len(c["instructions"]) for c in d["chains"])
    ctx.print(f"{st('method', 'magenta')} {st(d['name'], 'bold')}"
              f"(%{', %'.join(map(str, d['inputs']))}) -> %{', %'.join(map(str, d['outputs']))}")
    ctx.print(st(f"  # {_n(len(d['chains']), 'chain')}, {_n(n, 'instruction')}, "
                 f"{_n(len(d['operators']), 'operator')}, "
                 f"{_n(len(d['delegates']), 'delegate')}", "dim"))
    for c in d["chains"]:
        ctx.print(f"  chain {c['index']}:")
        for ins in c["instructions"]:
            target = st(ins.get("target", ""), "cyan")
            args = ", ".join(f"%{i}" for i in ins["operands"])
            ctx.print(f"    {ins['pc']:5d}  {st(ins['op'], 'yellow'):<13s} {target}({args})")
            for v in ins["values"]:
                ctx.print(st(f"             %{v['index']}: {v['text']}", "dim"))


def operator_names(p: Program) -> List[str]:
    """The kernel operators a program calls, ``name.overload``, sorted."""
    return sorted({str(o) for m in p.methods.values() for o in m.operators})


# ------------------------------------------------------------------ export, extract

def tensors(f: ExecuTorchFile) -> Dict[str, Tensor]:
    """The tensors ``export`` writes: a program's named tensors (XNNPACK delegates'
    constants included), a data file's tensors."""
    return f.named_tensors() if isinstance(f, Program) else dict(f.tensors)


def dtype_name(t: Tensor) -> str:
    """torch's name of a tensor's dtype (numpy's names are torch's for these, ml_dtypes'
    included; a quantized tensor carries its own)."""
    return t.dtype_name if isinstance(t, QuantizedTensor) else str(t.dtype)


def _storage(t: Tensor) -> np.ndarray:
    return t.int_repr if isinstance(t, QuantizedTensor) else t


def blob_names(f: ExecuTorchFile) -> List[str]:
    """What ``extract`` can write: named data keys, and ``METHOD.delegates[I]``."""
    names = list(f.named_data)
    if isinstance(f, Program):
        names += [f"{name}.delegates[{k}]" for name, m in f.methods.items()
                  for k in range(len(m.delegates))]
    return names


def blob(f: ExecuTorchFile, name: str) -> Optional[memoryview]:
    """The bytes ``extract`` writes for ``name``, or None when there is no such entry."""
    named = f.named_data
    if name in named:
        return named[name]
    if isinstance(f, Program) and name.endswith("]") and ".delegates[" in name:
        method, _, index = name[:-1].rpartition(".delegates[")
        m = f.methods.get(method)
        if m is not None and index.isdigit() and int(index) < len(m.delegates):
            return m.delegates[int(index)].data
    return None
