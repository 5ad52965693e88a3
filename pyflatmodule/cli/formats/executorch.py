"""What the commands show of ExecuTorch programs (``.pte``) and data files (``.ptd``),
through the public API of ``Program`` and ``DataFile``."""
from __future__ import annotations

import abc
from collections import Counter
from typing import Any, ClassVar, Dict, List, Mapping, Optional, Sequence, Set, Tuple, Union

from ...core.lazy import np
from ...core.names import plural
from ...executorch import (
    Backend,
    BundledProgram,
    DataFile,
    Delegate,
    DelegateCall,
    DelegateGraph,
    Frame,
    JumpFalseCall,
    KernelCall,
    MemoryPlan,
    Method,
    NativeImage,
    Program,
    Region,
    StoredTensor,
    TensorSpec,
    TestCase,
    ValueMeta,
    backend_of,
    describe_native_code,
    described_as,
    operands,
    refuse_native_code,
)
from ...files import load
from ..common import CliError, Context, Json, Style, human
from .base import Checkable, Described, FileFormat, Listing, Tensor, below

__all__ = ["ExecuTorchBundled", "ExecuTorchDataFile", "ExecuTorchProgram"]



# ------------------------------------------------------------------ values

def _tensor_text(v: Union[StoredTensor, TensorSpec]) -> str:
    if isinstance(v, StoredTensor):
        return f"const {v.dtype}{list(v.shape)}"
    where = {"planned": "planned", "none": "input", "external": f"external {v.name!r}"}
    return f"{where.get(v.stored, v.stored)} {v.dtype}{list(v.shape)}"


def value_text(m: Method, i: int, limit: int = 40) -> str:
    """Value ``i`` of a method in a few words: its kind, and its value when short."""
    kind = m.values.kind(i)
    if kind == "Tensor":
        return _tensor_text(m.values.layout(i))
    v = m.values[i]
    if kind in ("Null", "NONE"):
        return "None"
    text = repr(v)
    return f"{kind} {text if len(text) <= limit else text[:limit - 3] + '...'}"


def _value_node(m: Method, i: int) -> Json:
    kind = m.values.kind(i)
    v = m.values.layout(i) if kind == "Tensor" else m.values[i]
    node: Json = {"index": i, "kind": kind}
    if isinstance(v, StoredTensor):
        node.update(stored="constant", dtype=str(v.dtype), shape=list(v.shape),
                    strides=list(v.strides), bytes=int(v.nbytes))
    elif isinstance(v, TensorSpec):
        node.update(stored=v.stored, dtype=v.dtype, shape=list(v.shape),
                    dim_order=list(v.dim_order), allocation=v.allocation, fqn=v.name)
    else:
        node["value"] = v
    return node


# ------------------------------------------------------------------ dis

def _graph_value_text(v: Any) -> str:
    """A delegate graph's value in a few words: datatype, dims, constant, quantization."""
    words = [f"{v.datatype}{list(v.dims)}"]
    if v.constant:
        words.append("const")
    if v.quantization is not None:
        words.append(v.quantization.kind)
    return " ".join(words)


def _graph_doc(g: DelegateGraph, backend: Backend, d: Delegate, tensors: Mapping[str, Any]
               ) -> Json:
    """A delegate's graph: its backend, its nodes in execution order, each value once (a
    constant with its name among ``tensors``, :meth:`~pyflatmodule.executorch.Delegate.
    constant_name`, as ``tensor``)."""
    values = g.values
    nodes = [{"kind": n.kind, "inputs": list(n.inputs), "outputs": list(n.outputs)}
             for n in g.nodes]
    used = dict.fromkeys(i for n in g.nodes for i in (*n.inputs, *n.outputs))
    return {"backend": backend.name, "version": g.version, "inputs": list(g.input_ids),
            "outputs": list(g.output_ids), "nodes": nodes,
            "values": [_graph_value(values[i], d.constant_name(i), tensors) for i in used],
            "description": described_as(g)}


def _graph_value(v: Any, name: str, tensors: Mapping[str, Any]) -> Json:
    q = v.quantization
    return {"id": v.id, "datatype": v.datatype, "dims": list(v.dims),
            "constant": bool(v.constant), "quantization": None if q is None else q.kind,
            "text": _graph_value_text(v), **({"tensor": name} if name in tensors else {})}


def _tensor_names(m: Method, tensors: Mapping[str, Any]) -> Dict[int, str]:
    """The name among ``tensors`` (a program's :meth:`~pyflatmodule.Program.named_layouts`)
    of each of a method's constants: ``<method>.values[<index>]``, or the name the file
    gives the tensor at its bytes."""
    at = {t.start: name for name, t in tensors.items() if isinstance(t, StoredTensor)}
    out = {}
    for i in range(len(m.values)):
        if m.values.kind(i) != "Tensor":
            continue
        t = m.values.layout(i)
        if isinstance(t, StoredTensor):
            own = f"{m.name}.values[{i}]"
            name = own if own in tensors else at.get(t.start)
            if name is not None:
                out[i] = name
    return out


def _graphs(m: Method) -> List[Tuple[int, DelegateGraph, Backend]]:
    """(index, graph, backend) of each of a method's delegates whose graph is read."""
    out = []
    for i, d in enumerate(m.delegates):
        graph = d.graph
        if graph is not None:
            backend = backend_of(d.id)
            assert backend is not None   # its reader gave the graph
            out.append((i, graph, backend))
    return out


def _meta_text(metas: Sequence[Json]) -> str:
    """Inputs or outputs as ``float32[1, 3, 8, 8], Int``."""
    return ", ".join(str(ValueMeta(**m)) for m in metas)


def _plan_doc(name: str, mp: MemoryPlan) -> Json:
    """One method's memory plan as JSON."""
    return {"method": name, "buffer_sizes": mp.buffer_sizes, "peak": mp.peak,
            "instructions": mp.instructions, "tensors": [t._asdict() for t in mp.tensors],
            "conflicts": [list(c) for c in mp.conflicts]}


def _frame(f: Frame) -> Json:
    return {"filename": f.filename, "lineno": f.lineno, "name": f.name, "context": f.context}


def disassemble(m: Method, tensors: Mapping[str, Any]) -> Json:
    """A method's instruction chains with operator names and value kinds, jump targets,
    stack traces when the file has them, and each delegate's graph (where its backend's
    payloads are read); a constant with its name among ``tensors`` (the program's
    :meth:`~pyflatmodule.Program.named_layouts`) as ``tensor``."""
    operators = [str(o) for o in m.operators]
    delegates = m.delegates
    graphs = {i: _graph_doc(g, backend, delegates[i], tensors)
              for i, g, backend in _graphs(m)}
    names = _tensor_names(m, tensors)
    chains = []
    for k, c in enumerate(m.chains):
        code = []
        stacks = c.stacktrace
        for pc, ins in enumerate(c.instructions):
            kind = type(ins).__name__
            entry: Json = {"pc": pc, "op": kind, **ins._asdict()}
            if isinstance(ins, KernelCall):
                entry["target"] = operators[ins.op_index]
            elif isinstance(ins, DelegateCall):
                entry["target"] = delegates[ins.delegate_index].id
                if ins.delegate_index in graphs:
                    entry["graph"] = graphs[ins.delegate_index]
            if isinstance(ins, JumpFalseCall):
                entry["jump_to"] = ins.destination_instruction
            used = operands(ins)
            entry["operands"] = used
            entry["values"] = [{"index": i, "text": value_text(m, i),
                                **({"tensor": names[i]} if i in names else {})}
                               for i in dict.fromkeys(used)]   # each value once
            if stacks is not None and pc < len(stacks):
                entry["stack"] = [_frame(f) for f in stacks[pc]]
            code.append(entry)
        chains.append({"index": k, "inputs": c.inputs, "outputs": c.outputs,
                       "instructions": code})
    return {"name": m.name, "inputs": m.inputs, "outputs": m.outputs,
            "operators": operators, "delegates": [d.id for d in delegates], "chains": chains}


def _registers(ids: Sequence[int], mark: str = "%") -> str:
    return ", ".join(f"{mark}{i}" for i in ids)


#: What a graph whose payload is not read (no nodes, no values) says of itself.
_NOT_READ = "its contents are the backend's own format, not read"


def _print_graph(ctx: Context, g: Json) -> None:
    st = ctx.style
    if not g["nodes"] and not g["values"]:
        ctx.print(st(f"             {g['backend']} graph: {_NOT_READ}", "dim"))
        if g["description"]:
            ctx.print(st(f"               {g['description']}", "dim"))
        return
    ctx.print(st(f"             {g['backend']} graph: {plural(len(g['nodes']), 'node')}, inputs "
                 f"({_registers(g['inputs'], 'v')}) -> ({_registers(g['outputs'], 'v')})",
                 "dim"))
    for n in g["nodes"]:
        outputs = f" -> {_registers(n['outputs'], 'v')}" if n["outputs"] else ""
        ctx.print(f"               {st(n['kind'], 'cyan')}({_registers(n['inputs'], 'v')})"
                  + outputs)
    for v in g["values"]:
        ctx.print(st(f"               v{v['id']}: {v['text']}", "dim")
                  + _module_name(ctx, v))


def _module_name(ctx: Context, value: Json) -> str:
    """`` NAME``: a value's module name, where ``--names`` found one."""
    return " " + ctx.style(value["module_name"], "green") if "module_name" in value else ""


def print_dis(ctx: Context, d: Json) -> None:
    """The listing of one method."""
    st = ctx.style
    n = sum(len(c["instructions"]) for c in d["chains"])
    ctx.print(f"{st('method', 'magenta')} {st(d['name'], 'bold')}"
              f"({_registers(d['inputs'])}) -> ({_registers(d['outputs'])})")
    ctx.print(st(f"  # {plural(len(d['chains']), 'chain')}, {plural(n, 'instruction')}, "
                 f"{plural(len(d['operators']), 'operator')}, "
                 f"{plural(len(d['delegates']), 'delegate')}", "dim"))
    for c in d["chains"]:
        ctx.print(f"  chain {c['index']}:")
        for ins in c["instructions"]:
            target = st(ins.get("target", ""), "cyan")
            jump = f" -> pc {ins['jump_to']}" if "jump_to" in ins else ""
            ctx.print(f"    {ins['pc']:5d}  {st(ins['op'], 'yellow'):<13s} {target}"
                      f"({_registers(ins['operands'])}){jump}")
            stack = ins.get("stack")
            if stack:
                top = stack[-1]
                ctx.print(st(f"             # {top['filename']}:{top['lineno']} in "
                             f"{top['name']}", "dim"))
            for v in ins["values"]:
                ctx.print(st(f"             %{v['index']}: {v['text']}", "dim")
                          + _module_name(ctx, v))
            if "graph" in ins:
                _print_graph(ctx, ins["graph"])


# ------------------------------------------------------------------ the adapters

def _minimum_runtime(m: Json) -> str:
    """``info``'s minimum runtime line: the release and the features that need it."""
    needs = [r["feature"] for r in m["reasons"] if r["release"] == m["release"]]
    shown = ", ".join(needs[:3]) + (f" and {len(needs) - 3} more" if len(needs) > 3 else "")
    return f"ExecuTorch {m['release']}" + (f" (for {shown})" if shown else "")


def _info(f: Union[Program, DataFile]) -> Json:
    """``info()`` and the oldest runtime that reads the file: a walk of every table, for
    the ``info`` command only (``verify`` reads ``info()`` and stays a check's cost)."""
    return {**f.info(), "minimum_runtime": f.minimum_runtime.as_json()}


class _ExecuTorchFile(FileFormat):
    """What a program and a data file show alike."""

    file: Union[Program, DataFile]
    #: the ``kind`` of the tree's root
    root_kind = ""

    def summary(self) -> Json:
        return {"file": self.path, **_info(self.file)}

    @classmethod
    def print_info(cls, ctx: Context, s: Json) -> None:
        ctx.print(f"{ctx.style(s['file'], 'bold')}: {cls.file_format().title}, "
                  f"{s['size']:,} bytes, version {s['version']}")
        ctx.print(f"  flatbuffer: {s['flatbuffer_size']:,} bytes   segment data: "
                  f"{s['segment_data_size']:,} bytes in {plural(s['segments'], 'segment')}")
        ctx.print(f"  minimum runtime: {_minimum_runtime(s['minimum_runtime'])}")
        cls._print_contents(ctx, s)
        if s["native_code"]:
            images = (NativeImage(**i) for i in s["native_code"])
            ctx.print(ctx.style(f"  holds native code: {describe_native_code(images)}",
                                "yellow"))

    @staticmethod
    @abc.abstractmethod
    def _print_contents(ctx: Context, s: Json) -> None:
        """What ``info`` prints after the sizes: what the file holds."""

    @classmethod
    def verify(cls, path: Checkable, strict: bool, data: Sequence[str] = ()) -> Json:
        with load(path, strict=strict, data=data if cls.opens is Program else ()) as f:
            return cls._checked(f.info(), strict, cls._verify_fields(f.info()))

    @staticmethod
    def _checked(info: Json, strict: bool, fields: Json) -> Json:
        """``verify``'s fields with the native code the file holds (``info``'s), which
        strict mode refuses."""
        if strict:
            refuse_native_code(info)
        return {**fields, "native_code": info["native_code"]}

    @staticmethod
    def _native_note(result: Json) -> str:
        """What ``verify`` adds to its line of a file that holds native code."""
        images = [NativeImage(**i) for i in result.get("native_code", [])]
        return f", holds native code: {describe_native_code(images)}" if images else ""

    @staticmethod
    @abc.abstractmethod
    def _verify_fields(info: Json) -> Json:
        """What ``verify`` reports, from the file's ``info()``."""

    def tree(self, max_depth: Optional[int]) -> Json:
        """The file's structure as nested nodes: methods with their values, operators,
        chains and delegates; the tensors; the named data that are not tensors."""
        root: Json = {"name": "", "path": "", "kind": self.root_kind, **self._root_facts()}
        children: List[Json] = []
        tensors = self._tree_tensors()
        weights: Set[str] = set()   # the paths and named data keys of delegates' weights
        for name, m in self._plans():
            values = [_value_node(m, i) for i in range(len(m.values))]
            chains = [{"name": f"chains[{k}]", "path": f"{name}.chains[{k}]", "kind": "chain",
                       "instructions": len(c.instructions)} for k, c in enumerate(m.chains)]
            delegates = []
            graphs = {k: (g, backend) for k, g, backend in _graphs(m)}
            for k, d in enumerate(m.delegates):
                path = d.name
                node: Json = {"name": f"delegates[{k}]", "path": path, "kind": "delegate",
                              "id": d.id, "location": d.location, "bytes": len(d.data)}
                if k in graphs:
                    parts = self._graph_nodes(d, *graphs[k], tensors)
                    weights.update(w["path"] for w in parts[1:])
                    weights.update(w[k] for w in parts[1:]
                                   for k in ("named_data", "scales_named_data") if w[k])
                    node.update(below(parts, 2, max_depth))
                delegates.append(node)
            counts = Counter(v["kind"] for v in values)
            parts = [{"name": "values", "path": f"{name}.values", "kind": "values",
                      "length": len(values), "kinds": dict(sorted(counts.items())),
                      **below([{"name": f"[{v['index']}]",
                                "path": f"{name}.values[{v['index']}]", **v} for v in values],
                              2, max_depth)},
                     {"name": "operators", "path": f"{name}.operators", "kind": "operators",
                      "operators": [str(o) for o in m.operators]},
                     *chains, *delegates]
            children.append({"name": name, "path": name, "kind": "method", "inputs": m.inputs,
                             "outputs": m.outputs, **below(parts, 1, max_depth)})
        for key, t in tensors.items():
            if key not in weights:   # else listed under its delegate
                children.append({"name": key, "path": key, **self._tensor_facts(t)})
        named = self.file.named_data
        for key in named:
            if key not in tensors and key not in weights:
                children.append({"name": key, "path": key, "kind": "named_data",
                                 "bytes": named.size(key)})
        root.update(below(children, 0, max_depth))
        return root

    def _tensor_facts(self, t: Described) -> Json:
        return {"kind": "tensor", "dtype": self.dtype_name(t), "shape": list(t.shape),
                "bytes": self.nbytes(t)}

    def _graph_nodes(self, d: Delegate, graph: DelegateGraph, backend: Backend,
                     tensors: Dict[str, Described]) -> List[Json]:
        """A delegate's graph in brief (kind ``<backend key>_graph``), then its weights
        (as ``state_dict()`` has them, in torch's layout, by the names it gives them),
        each with the named data keys that hold it and its scales."""
        path = d.name
        nodes = graph.nodes
        keys = graph.named_data_keys()
        weights = []
        for vid in sorted(v.id for v in graph.values if v.constant):
            name = d.constant_name(vid)
            t = tensors.get(name)
            if t is None:   # its bytes are in none of the files given
                continue
            weights.append({"name": f"values[{vid}]", "path": name, **self._tensor_facts(t),
                            "named_data": keys.get((vid, "constant")),
                            "scales_named_data": keys.get((vid, "scales"))})
        summary = {"name": "graph", "path": f"{path}.graph", "kind": f"{backend.key}_graph",
                   "backend": backend.name, "nodes": len(nodes),
                   "node_kinds": dict(sorted(Counter(n.kind for n in nodes).items())),
                   "values": len(graph.values), "inputs": graph.input_ids,
                   "outputs": graph.output_ids, "constants": len(weights),
                   "constant_bytes": sum(w["bytes"] for w in weights)}
        description = described_as(graph)
        if description:
            summary["description"] = description
        return [summary, *weights]

    def _plans(self) -> List[Tuple[str, Method]]:
        """The methods, by name (none in a data file)."""
        return []

    def _root_facts(self) -> Json:
        """What the tree's root says of the file besides its kind."""
        return {}

    @abc.abstractmethod
    def _tree_tensors(self) -> Dict[str, Described]:
        """The tensors the tree lists (described: no byte of them is read)."""

    @staticmethod
    def tree_lines(st: Style, node: Json) -> List[str]:
        lines = [_tree_line(st, node)]
        if node["kind"] == "test_suite":
            lines += [f"test_cases[{i}]: {_test_values(c['inputs'])} -> "
                      f"{_test_values(c['expected_outputs'])}"
                      for i, c in enumerate(node["test_cases"])]
        if "truncated" in node:
            lines.append(st(f"... {node['truncated']} not shown (--depth)", "dim"))
        return lines

    @staticmethod
    def print_entry(ctx: Context, entry: Json) -> None:
        print_dis(ctx, entry)

    def _delegate(self, name: str) -> Optional[memoryview]:
        """The payload ``METHOD.delegates[I]`` names, None when there is none."""
        return None

    def _delegate_names(self) -> List[str]:
        """``METHOD.delegates[I]`` of every delegate."""
        return []

    def extract(self, name: str, jit_source: bool) -> Tuple[Union[bytes, memoryview], str]:
        named = self.file.named_data
        if name in named:
            return named[name], "named_data"
        blob = self._delegate(name)
        if blob is None:
            names = ", ".join(repr(n) for n in [*named, *self._delegate_names()]) or "none"
            raise CliError(f"no named data or delegate {name!r} (there are: {names})",
                           "not_found", file=self.path)
        return blob, "delegate"


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
        return (f"{st('delegate', 'cyan')} {node['id']} ({node['location']}, "
                f"{node['bytes']:,} bytes)")
    if kind == "named_data":
        return st(f"named data, {node['bytes']:,} bytes", "dim")
    if kind.endswith("_graph") and not node["nodes"] and not node["values"]:
        said = str(node.get("description", _NOT_READ))
        return f"{st(node['backend'] + ' graph', 'cyan')}: {said}"
    if kind.endswith("_graph"):
        kinds = ", ".join(f"{n} {k}" for k, n in node["node_kinds"].items())
        return (f"{st(node['backend'] + ' graph', 'cyan')}: {plural(node['nodes'], 'node')} "
                f"({kinds}), "
                f"{plural(node['values'], 'value')}, inputs {node['inputs']} -> outputs "
                f"{node['outputs']}" + (f", {plural(node['constants'], 'weight')} "
                                        f"({node['constant_bytes']:,} bytes)"
                                        if node["constants"] else ""))
    if kind == "test_suite":
        return f"{st('test suite', 'cyan')}, {plural(len(node['test_cases']), 'test case')}"
    if kind == "Tensor" or kind == "tensor":
        where = node.get("stored", "constant")
        text = st(f"tensor {node['dtype']}{node['shape']}", "green")
        key = node.get("named_data")
        return text + st(f", {where}" + (f", {node['bytes']:,} bytes" if "bytes" in node
                                          else "")
                         + (f", named data {key[:16]}..." if key else "")
                         + (", scales in named data" if node.get("scales_named_data")
                            else ""), "dim")
    if "value" in node:
        return f"{kind} = {node['value']!r}"
    if node.get("external_tensors") or node.get("missing_data"):
        missing = len(node["missing_data"])
        return (f"{kind}, {node['external_tensors']} external tensors, "
                + (st(f"{missing} in no data file given (pass --data)", "yellow") if missing
                   else "all resolved"))
    return str(kind)


class ExecuTorchProgram(_ExecuTorchFile):
    """An ExecuTorch program (a :class:`pyflatmodule.Program`)."""

    opens: ClassVar[type] = Program
    file: Program
    root_kind = "program"

    @staticmethod
    def _print_contents(ctx: Context, s: Json) -> None:
        st = ctx.style
        ctx.print(f"  constant tensors: {s['constant_tensors']} ({s['constant_bytes']:,} bytes)"
                  f"   named data: {s['named_data']}")
        if s["external_tensors"] or s["missing_data"]:
            missing = s["missing_data"]
            ctx.print(f"  external tensors: {s['external_tensors']}, data files given: "
                      f"{s['data_files']}; " + (st(f"{len(missing)} tensors or named data in "
                                                   f"none of them (pass --data)", "yellow")
                                                if missing else "all resolved"))
        ctx.print(f"  methods: {len(s['methods'])}")
        for m in s["methods"]:
            ctx.print(f"    {st(m['name'], 'bold')}: {plural(m['values'], 'value')}, "
                      f"{plural(m['instructions'], 'instruction')}")
            ctx.print(f"      inputs: {_meta_text(m['input_meta']) or 'none'}   "
                      f"outputs: {_meta_text(m['output_meta']) or 'none'}")
            planned = sum(m["non_const_buffer_sizes"])
            ctx.print(f"      {plural(len(m['operators']), 'operator')}, "
                      f"{plural(len(m['delegates']), 'delegate')}"
                      f"{' (' + ', '.join(m['delegates']) + ')' if m['delegates'] else ''}, "
                      f"{human(planned)} memory-planned")

    @staticmethod
    def _verify_fields(info: Json) -> Json:
        return {"format": "pte", "size": info["size"], "methods": len(info["methods"]),
                "values": sum(m["values"] for m in info["methods"]),
                "tensors": info["constant_tensors"], "named_data": info["named_data"]}

    @classmethod
    def verify_line(cls, result: Json) -> str:
        return (f"{result['size']:,} bytes, {cls.file_format().title}, "
                f"{plural(result['methods'], 'method')}, {result['values']:,} values, "
                f"{result['tensors']:,} constant tensors" + cls._native_note(result))

    def _plans(self) -> List[Tuple[str, Method]]:
        return list(self.file.methods.items())

    def _root_facts(self) -> Json:
        info = self.file.info()
        return {"external_tensors": info["external_tensors"],
                "missing_data": info["missing_data"]}

    def _tree_tensors(self) -> Dict[str, Described]:
        return dict(self.file.state_layouts())

    def listing(self, method: Optional[str], every_function: bool) -> Listing:
        methods = self.file.methods
        if method is not None and method not in methods:
            names = ", ".join(methods) or "none"
            raise CliError(f"no method {method!r} (methods: {names})", "not_found",
                           file=self.path)
        tensors = self.file.named_layouts()
        return Listing([disassemble(m, tensors) for name, m in methods.items()
                                   if method in (None, name)], None)

    def operators(self) -> Optional[List[str]]:
        """The kernel operators the program calls, ``name.overload``, sorted."""
        return sorted({str(o) for m in self.file.methods.values() for o in m.operators})

    def delegate_operators(self) -> List[str]:
        found: Set[str] = set()
        for m in self.file.methods.values():
            for _, graph, backend in _graphs(m):
                found.update(f"{backend.id}::{n.kind}" for n in graph.nodes)
        return sorted(found)

    def delegate_backends(self) -> List[str]:
        return sorted({d.id for m in self.file.methods.values() for d in m.delegates})

    def kernel_keys(self) -> Optional[Dict[str, List[str]]]:
        return self.file.kernel_keys()

    def tensors(self) -> Dict[str, Tensor]:
        """Its named tensors, delegates' constants included."""
        return self.file.named_tensors()

    def tensor_layouts(self) -> Dict[str, Described]:
        return dict(self.file.named_layouts())

    def stored_layouts(self) -> Dict[str, Json]:
        """The backend's layout of each delegate constant (Program.delegate_layouts)."""
        return dict(self.file.delegate_layouts())

    def missing_data(self) -> List[str]:
        return self.file.missing_data

    def memory_plans(self) -> Optional[List[Json]]:
        return [_plan_doc(name, m.memory_plan()) for name, m in self.file.methods.items()]

    def regions(self) -> Optional[List[Region]]:
        return self.file.regions()

    def region_tensors(self) -> Dict[Tuple[str, str], List[str]]:
        """Each constant buffer's tensors: the stored tensors that start where it does
        (the program's offsets, where the regions are the file's: :meth:`_program_start`)."""
        starts: Dict[int, List[str]] = {}
        for name, t in self.tensor_layouts().items():
            if isinstance(t, StoredTensor):
                starts.setdefault(self._program_start() + t.start, []).append(name)
        return {("constant", r.label): starts[r.start] for top in self.regions() or ()
                for r in top.walk() if r.kind == "constant" and r.start in starts}

    def _program_start(self) -> int:
        """Where the program starts in the file its regions tile."""
        return 0

    def size_facts(self) -> Json:
        eh = self.file.extended_header
        return {"extended_header": None if eh is None else eh._asdict(),
                "delegates": [{"method": name, "index": k, "id": d.id, "location": d.location,
                               "size": len(d.data)}
                              for name, m in self.file.methods.items()
                              for k, d in enumerate(m.delegates)]}

    def named_data_readers(self) -> Dict[str, List[str]]:
        layouts = self.file.delegate_layouts()
        out: Dict[str, List[str]] = {}
        for name, m in self.file.methods.items():
            for i, graph, _ in _graphs(m):
                for (vid, what), key in graph.named_data_keys().items():
                    where = m.delegates[i].constant_name(vid)
                    lay = layouts.get(where, {})
                    role = f" ({lay['node']} {lay['role']})" if "node" in lay else ""
                    out.setdefault(key, []).append(
                        where + role + (" scales" if what == "scales" else ""))
        return out

    def profiled_program(self) -> Optional[Any]:
        return self.file

    def _delegates(self) -> Dict[str, Delegate]:
        """Every delegate by its name (``<method>.delegates[<i>]``)."""
        return {d.name: d for m in self.file.methods.values() for d in m.delegates}

    def _delegate(self, name: str) -> Optional[memoryview]:
        d = self._delegates().get(name)
        return None if d is None else d.data

    def _delegate_names(self) -> List[str]:
        return list(self._delegates())


class ExecuTorchDataFile(_ExecuTorchFile):
    """An ExecuTorch data file (a :class:`pyflatmodule.DataFile`)."""

    opens = DataFile
    file: DataFile
    root_kind = "data_file"

    @staticmethod
    def _print_contents(ctx: Context, s: Json) -> None:
        ctx.print(f"  tensors: {s['tensors']}   named data: {s['named_data']}"
                  + ("   layout: ExecuTorch 0.6.0's" if s["layout"] == "0.6.0" else ""))

    def regions(self) -> Optional[List[Region]]:
        return self.file.regions()

    @staticmethod
    def _verify_fields(info: Json) -> Json:
        return {"format": "ptd", "size": info["size"], "tensors": info["tensors"],
                "named_data": info["named_data"]}

    @classmethod
    def verify_line(cls, result: Json) -> str:
        return (f"{result['size']:,} bytes, {cls.file_format().title}, {result['tensors']:,} "
                f"tensors, {result['named_data']:,} named data" + cls._native_note(result))

    def _tree_tensors(self) -> Dict[str, Described]:
        return dict(self.file.tensor_layouts())

    def listing(self, method: Optional[str], every_function: bool) -> Listing:
        return Listing([], "an ExecuTorch data file: nothing to disassemble")

    def operators(self) -> Optional[List[str]]:
        return None

    def tensors(self) -> Dict[str, Tensor]:
        return dict(self.file.tensors)


def _test_value(v: Any) -> Json:
    """A test input or expected output as JSON: a tensor's dtype and shape, else its value."""
    if isinstance(v, np.ndarray):
        return {"kind": "tensor", "dtype": str(v.dtype), "shape": list(v.shape)}
    return {"kind": type(v).__name__, "value": v}


def _test_values(values: List[Json]) -> str:
    """Test values of :func:`_test_value` in a line: ``float32[2, 4], Int 2``."""
    return ", ".join(f"{v['dtype']}{v['shape']}" if v["kind"] == "tensor"
                     else f"{v['kind']} {v['value']}" for v in values) or "none"


def _test_case(case: TestCase) -> Json:
    return {"inputs": [_test_value(v) for v in case.inputs],
            "expected_outputs": [_test_value(v) for v in case.expected_outputs]}


class ExecuTorchBundled(ExecuTorchProgram):
    """An ExecuTorch bundled program (a :class:`pyflatmodule.BundledProgram`): its embedded
    program as :class:`ExecuTorchProgram` shows it, and its test suites."""

    opens = BundledProgram
    root_kind = "bundled_program"

    def __init__(self, path: str, file: BundledProgram) -> None:
        super().__init__(path, file.program)
        self.bundled = file

    def __exit__(self, *exc: Any) -> None:
        self.bundled.close()

    def regions(self) -> Optional[List[Region]]:
        return self.bundled.regions()

    def _program_start(self) -> int:
        return self.bundled.program_span[0]

    def extract(self, name: str, jit_source: bool) -> Tuple[Union[bytes, memoryview], str]:
        """``program`` is the embedded ``.pte``; other names are the program's."""
        if name == "program":
            return self.bundled.program_bytes, "program"
        return super().extract(name, jit_source)

    def _delegate_names(self) -> List[str]:
        return ["program", *super()._delegate_names()]

    def tensors(self) -> Dict[str, Tensor]:
        """The program's tensors, then each test case's tensors by
        ``test_suites.METHOD[CASE].inputs[I]`` (and ``.expected_outputs[I]``)."""
        out = super().tensors()
        for name, cases in self.bundled.test_suites.items():
            for k, case in enumerate(cases):
                for part in ("inputs", "expected_outputs"):
                    for i, v in enumerate(getattr(case, part)):
                        if isinstance(v, np.ndarray):
                            out[f"test_suites.{name}[{k}].{part}[{i}]"] = v
        return out

    def _suites(self) -> Json:
        return {name: [_test_case(c) for c in cases]
                for name, cases in self.bundled.test_suites.items()}

    def summary(self) -> Json:
        return {"file": self.path, **self.bundled.info(), "methods_tested": self._suites(),
                "program": _info(self.file)}

    @classmethod
    def print_info(cls, ctx: Context, s: Json) -> None:
        ctx.print(f"{ctx.style(s['file'], 'bold')}: {cls.file_format().title}, "
                  f"{s['size']:,} bytes, version {s['version']}")
        ctx.print(f"  test suites: {s['test_suites']} ({plural(s['test_cases'], 'test case')})")
        for name, cases in s["methods_tested"].items():
            ctx.print(f"    {ctx.style(name, 'bold')}: {plural(len(cases), 'test case')}")
        start = s["program_offset"]
        ExecuTorchProgram.print_info(ctx, {**s["program"], "file": f"  embedded program "
                                           f"(bytes {start:,}..{start + s['program_size']:,})"})

    @classmethod
    def verify(cls, path: Checkable, strict: bool, data: Sequence[str] = ()) -> Json:
        with load(path, strict=strict) as f:
            assert isinstance(f, BundledProgram)
            info = f.info()
            return cls._checked(info, strict, {
                **cls._verify_fields(f.program.info()), "format": "bpte",
                "size": info["size"], "test_cases": info["test_cases"]})

    @classmethod
    def verify_line(cls, result: Json) -> str:
        return super().verify_line(result) + f", {plural(result['test_cases'], 'test case')}"

    def tree(self, max_depth: Optional[int]) -> Json:
        """The embedded program's structure, then one node per test suite."""
        root = super().tree(max_depth)
        suites = [{"name": f"test_suites.{name}", "path": f"test_suites.{name}",
                   "kind": "test_suite", "test_cases": cases}
                  for name, cases in self._suites().items()]
        if "children" in root:
            root["children"].extend(suites)
        elif suites:
            root["truncated"] = root.get("truncated", 0) + len(suites)
        return root
