"""What the commands show of PyTorch Mobile flatbuffer models (``.ptl``/``.ff``): the
``Module`` through its public API, and ``pyflatmodule.verify``."""
from __future__ import annotations

from collections import Counter
from functools import partial
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple, Union

from ...core.dtypes import QuantizedTensor, dtype_name
from ...core.lazy import np
from ...files import verify
from ...ptmf import Argument, Function, Methods, Module, Object, TensorRecord, VerifyReport, short
from ..common import CliError, Context, Json, Style, json_value
from .base import Checkable, Described, FileFormat, Listing, Tensor

__all__ = ["PtmfModel"]


def tensor_fields(m: Module, value: Tensor, record: Optional[TensorRecord]) -> Json:
    """dtype, shape, bytes, storage (and quantization) of one tensor of ``m``; an array
    without ``record`` is looked up."""
    if record is None and isinstance(value, np.ndarray):
        record = m.tensor_record(value)
    if isinstance(value, QuantizedTensor):
        out: Json = {"kind": "qtensor", "dtype": value.dtype_name,
                     "shape": [int(n) for n in value.shape],
                     "bytes": int(value.int_repr.nbytes), "qscheme": value.qscheme}
        if value.scales is None:
            out["scale"] = json_value(float(value.scale))    # type: ignore[arg-type]
            out["zero_point"] = value.zero_point
        else:
            out["axis"] = value.axis
    else:
        out = {"kind": "tensor",
               "dtype": record.dtype if record is not None else dtype_name(value),
               "shape": [int(n) for n in value.shape], "bytes": int(value.nbytes)}
    if record is not None:
        out["storage"] = record.storage
        out["storage_offset"] = record.storage_offset
        out["strides"] = list(record.strides)
        out["requires_grad"] = record.requires_grad
    else:
        out["storage"] = None
    return out


# ------------------------------------------------------------------ tree

#: The node kind of each ivalue union type.
_KINDS = {"NONE": "none", "Int": "int", "Bool": "bool", "Double": "float",
          "ComplexDouble": "complex", "TensorMetadata": "tensor", "String": "str",
          "List": "list", "Tuple": "tuple", "Dict": "dict", "Object": "object",
          "IntList": "list", "DoubleList": "list", "BoolList": "list", "Device": "device",
          "EnumValue": "enum", "Function": "function"}
#: The node kind of each type a decoded value (a set-state object's attribute) can have:
#: the same kinds as the ivalues of that type.
#: (By type name: pyflatmodule.Device, EnumValue and Function, and Python's scalars.)
_VALUE_KINDS = {"bool": "bool", "int": "int", "float": "float", "complex": "complex",
                "str": "str", "NoneType": "none", "Device": "device", "EnumValue": "enum",
                "Function": "function"}
_CONTAINERS = ("List", "Tuple", "Dict")
_SCALAR_LISTS = ("IntList", "DoubleList", "BoolList")


class TreeBuilder:
    """The object hierarchy from the root, as nested JSON-able nodes.

    Each ivalue is expanded once: an object or container met again (torch shares
    submodules and equal tuples) is a node with ``same_as``, so the output stays
    linear in the file whatever its sharing.
    """

    def __init__(self, m: Module, max_depth: Optional[int]) -> None:
        self.m = m
        self.ivalues = m.ivalues
        self.max_depth = max_depth
        self.seen: Dict[int, str] = {}
        self._holds: Dict[int, bool] = {}

    def _elements(self, i: int) -> List[Tuple[str, str, int]]:
        """(name, path suffix, ivalue) of a container's or field object's children."""
        ivalues = self.ivalues
        kind = ivalues.type_name(i)
        refs = ivalues.references(i)
        if kind in ("List", "Tuple"):
            return [(f"[{k}]", f"[{k}]", j) for k, j in enumerate(refs)]
        if kind == "Dict":
            half = len(refs) // 2
            out = []
            for k, j in zip(refs[:half], refs[half:]):
                key = short(ivalues[k], 80)
                out.append((f"[{key}]", f"[{key}]", j))
            return out
        names = list(ivalues[i].attributes)
        return [(name, "." + name, j) for name, j in zip(names, refs)]

    def _holds_structure(self, i: int) -> bool:
        """Whether a container holds a tensor or an object (then it is expanded)."""
        known = self._holds.get(i)
        if known is None:
            self._holds[i] = False          # indices only point backwards: no cycles
            type_name = self.ivalues.type_name
            known = any(type_name(j) in ("TensorMetadata", "Object") or
                        (type_name(j) in _CONTAINERS and self._holds_structure(j))
                        for _, _, j in self._elements(i))
            self._holds[i] = known
        return known

    def ivalue(self, i: int, name: str, path: str, depth: int) -> Json:
        """The node of ivalue ``i`` (and, within the depth, its children)."""
        t = self.ivalues.type_name(i)
        node: Json = {"name": name, "path": path, "kind": _KINDS.get(t, t)}
        if t == "TensorMetadata":
            value = self.ivalues[i]
            node.update(tensor_fields(self.m, value, self.m.tensor_record(value)))
        elif t == "Object":
            obj = self.ivalues[i]
            node["type"] = obj.type_name
            node["object_kind"] = obj.kind
            if i in self.seen:
                node["same_as"] = self.seen[i]
                return node
            self.seen[i] = path
            if obj.kind == "class_with_field":
                children = [(n, path + s if path else n, j) for n, s, j in self._elements(i)]
                self._children(node, depth, [partial(self.ivalue, j, n, p)
                                             for n, p, j in children])
            elif obj.kind == "class_with_setstate":
                items = list(obj.attributes.items())
                self._children(node, depth, [
                    partial(self.value, v, k, f"{path}.{k}" if path else k) for k, v in items])
            else:
                state_path = f"{path}.__getstate__()" if path else "__getstate__()"
                state = self.ivalues.references(i)[0]
                self._children(node, depth, [
                    partial(self.ivalue, state, "__getstate__()", state_path)])
        elif t in _CONTAINERS:
            refs = self.ivalues.references(i)
            node["length"] = len(refs) // 2 if t == "Dict" else len(refs)
            if self._holds_structure(i):
                if i in self.seen:
                    node["same_as"] = self.seen[i]
                    return node
                self.seen[i] = path
                children = [(n, path + s, j) for n, s, j in self._elements(i)]
                self._children(node, depth, [partial(self.ivalue, j, n, p)
                                             for n, p, j in children])
            else:
                self._scalar(node, self.ivalues[i])
        else:
            value = self.ivalues[i]
            if t in _SCALAR_LISTS:
                node["length"] = len(value)
            self._scalar(node, value)
        return node

    def value(self, v: Any, name: str, path: str, depth: int) -> Json:
        """A node for an already decoded value (set-state objects' attributes)."""
        if isinstance(v, Object):
            return self.ivalue(v.index, name, path, depth)
        node: Json = {"name": name, "path": path}
        if isinstance(v, (np.ndarray, QuantizedTensor)):
            node.update(tensor_fields(self.m, v, self.m.tensor_record(v)
                                      if isinstance(v, np.ndarray) else None))
        elif isinstance(v, (list, tuple, dict)):
            node["kind"] = type(v).__name__
            node["length"] = len(v)
            items = list(v.items()) if isinstance(v, dict) else list(enumerate(v))
            if any(isinstance(x, (np.ndarray, QuantizedTensor, Object, list, tuple, dict))
                   for _, x in items):
                labels = [f"[{short(k, 80)}]" if isinstance(v, dict) else f"[{k}]"
                          for k, _ in items]
                self._children(node, depth, [partial(self.value, x, lab, path + lab)
                                             for lab, (_, x) in zip(labels, items)])
            else:
                self._scalar(node, v)
        else:
            name = type(v).__name__
            node["kind"] = _VALUE_KINDS.get(name, name.lower())
            self._scalar(node, v)
        return node

    def _children(self, node: Json, depth: int, makers: List[Callable[[int], Json]]) -> None:
        if not makers:
            node["children"] = []
        elif self.max_depth is not None and depth >= self.max_depth:
            node["truncated"] = len(makers)
        else:
            node["children"] = [make(depth + 1) for make in makers]

    @staticmethod
    def _scalar(node: Json, value: Any) -> None:
        node["repr"] = short(value, 100)
        plain = json_value(value)
        if plain is not None or value is None:
            node["value"] = plain


def tree_line(st: Style, node: Json) -> str:
    """The text of one node (without its name)."""
    kind = node["kind"]
    if kind == "object":
        text = st(node["type"], "cyan")
        if node["object_kind"] != "class_with_field":
            text += st(f" [{node['object_kind']}]", "dim")
        if "same_as" in node:
            text += st(f" (same object as {node['same_as'] or '<root>'})", "dim")
    elif kind in ("tensor", "qtensor"):
        text = st(f"{kind} {node['dtype']}{node['shape']}", "green")
        if kind == "qtensor":
            text += f" {node['qscheme']}"
            text += (f" scale={node['scale']} zero_point={node['zero_point']}"
                     if "scale" in node else f" axis={node['axis']}")
        storage = node.get("storage")
        text += st(f", {node['bytes']:,} bytes, storage "
                   f"{'-' if storage is None else storage}", "dim")
        if node.get("requires_grad"):
            text += st(", requires_grad", "dim")
    elif "children" in node or "truncated" in node or "same_as" in node:
        text = f"{kind}[{node['length']}]" if "length" in node else kind
        if "same_as" in node:
            text += st(f" (same as {node['same_as']})", "dim")
    else:
        text = kind + (f"[{node['length']}]" if "length" in node else "")
        if kind != "none":
            text += f" = {node['repr']}"
    if "truncated" in node:
        text += st(f"  ... {node['truncated']} not shown (--depth)", "dim")
    return text


# ------------------------------------------------------------------ dis

def _schema_doc(f: Function) -> Optional[Json]:
    schema = f.schema
    if schema is None:
        return None

    def arg(a: Argument) -> Json:
        return {"name": a.name, "type": a.type,
                "default": None if a.default is None else short(a.default, 200)}
    return {"arguments": [arg(a) for a in schema.arguments],
            "returns": [arg(a) for a in schema.returns]}


def disassemble(f: Function) -> Json:
    """Everything ``dis`` shows for one function, as JSON-able data."""
    schema = f.schema
    operators = f.operators
    constants = f.constants
    code = [{"pc": ins.pc, "op": ins.op, "opcode": ins.opcode, "x": ins.x, "n": ins.n,
             "operands": ins.operands, "comment": ins.comment} for ins in f.disassembly()]
    return {
        "name": f.name,
        "signature": f"{f.name}{schema if schema is not None else '(...)'}",
        "schema": _schema_doc(f),
        "register_size": f.register_size,
        "operators": [{"index": k, "name": o.name, "overload": o.overload_name,
                       "full_name": o.full_name, "num_args": o.num_args}
                      for k, o in enumerate(operators)],
        "constants": [{"index": k, "repr": short(c, 200)} for k, c in enumerate(constants)],
        "type_annotations": list(f.type_annotations),
        "instructions": code,
    }


def print_dis(ctx: Context, d: Json) -> None:
    """The listing of one function."""
    st = ctx.style
    ctx.print(f"{st('def', 'magenta')} {st(d['signature'], 'bold')}")
    ctx.print(st(f"  # {len(d['instructions'])} instructions, {d['register_size']} registers, "
                 f"{len(d['operators'])} operators, {len(d['constants'])} constants", "dim"))
    if d["operators"]:
        ctx.print("  operators:")
        for o in d["operators"]:
            args = "" if o["num_args"] is None else f"  ({o['num_args']} args)"
            ctx.print(f"    #{o['index']:<4d} {st(o['full_name'], 'cyan')}{args}")
    if d["constants"]:
        ctx.print("  constants:")
        for c in d["constants"]:
            ctx.print(f"    c{c['index']:<4d} {c['repr']}")
    ctx.print("  code:")
    width = max([len(i["opcode"]) for i in d["instructions"]] + [8])
    for ins in d["instructions"]:
        opcode = st(ins["opcode"].ljust(width), "yellow")
        text = f"    {ins['pc']:5d}  {opcode} {ins['operands']:<14s}"
        if ins["comment"]:
            text += st(f"  # {ins['comment']}", "dim")
        ctx.print(text.rstrip())


# ------------------------------------------------------------------ the adapter

class PtmfModel(FileFormat):
    """A PTMF model (a :class:`pyflatmodule.Module`)."""

    opens = Module
    file: Module

    def summary(self) -> Json:
        m = self.file
        records = [r for r in m.tensor_records if r.ivalue is not None]
        by_dtype: Dict[str, List[int]] = {}
        total = 0
        for r in records:
            entry = by_dtype.setdefault(r.dtype, [0, 0])
            entry[0] += 1
            entry[1] += r.nbytes
            total += r.nbytes
        sizes = [int(s.nbytes) for s in m.storages]
        users = Counter(r.storage for r in records)
        shared = [{"storage": s, "tensors": n, "bytes": sizes[s]}
                  for s, n in sorted(users.items()) if n > 1]
        methods = []
        for name, f in m.methods.items():
            schema = f.schema
            methods.append({"name": name, "schema": str(schema) if schema else None,
                            "instructions": len(f.instructions),
                            "operators": len(f.operators)})
        kinds = Counter(m.ivalues.type_name(i) for i in range(len(m.ivalues)))
        return {
            "file": self.path, "format": "ptmf", "size": m.size,
            "bytecode_version": m.bytecode_version, "operator_version": m.operator_version,
            "ivalues": len(m.ivalues), "ivalue_kinds": dict(sorted(kinds.items())),
            "object_types": len(m.object_types), "root_type": m.root.type_name,
            "methods": methods,
            "tensors": {"count": len(records), "bytes": total,
                        "storages": len(sizes),
                        "storage_bytes": int(sum(sizes)),
                        "shared_storages": shared,
                        "by_dtype": {k: {"count": v[0], "bytes": v[1]}
                                     for k, v in sorted(by_dtype.items())}},
            "extra_files": {k: len(v) for k, v in m.extra_files.items()},
            "has_jit_sources": bool(m.jit_sources),
        }

    @staticmethod
    def print_info(ctx: Context, s: Json) -> None:
        st = ctx.style
        ctx.print(f"{st(s['file'], 'bold')}: PTMF model, {s['size']:,} bytes, bytecode version "
                  f"{s['bytecode_version']}, operator version {s['operator_version']}")
        ctx.print(f"  root: {st(s['root_type'], 'cyan')}")
        ctx.print(f"  ivalues: {s['ivalues']:,}   object types: {s['object_types']}   "
                  f"jit sources: {'yes' if s['has_jit_sources'] else 'no'}")
        ctx.print(f"  methods: {len(s['methods'])}")
        for meth in s["methods"]:
            ctx.print(f"    {st(meth['name'], 'bold')}{meth['schema'] or ''}")
            ctx.print(f"      {meth['instructions']} instructions, {meth['operators']} operators")
        t = s["tensors"]
        ctx.print(f"  tensors: {t['count']:,} ({t['bytes']:,} bytes) in {t['storages']:,} "
                  f"storages ({t['storage_bytes']:,} bytes)")
        for name, d in t["by_dtype"].items():
            ctx.print(f"    {st(f'{name:<16s}', 'green')} {d['count']:6,d} tensors "
                      f"{d['bytes']:14,d} bytes")
        shared = t["shared_storages"]
        if shared:
            ctx.print(f"  storages shared by several tensors: {len(shared)}")
            for entry in shared[:10]:
                ctx.print(f"    storage {entry['storage']}: {entry['tensors']} tensors, "
                          f"{entry['bytes']:,} bytes")
            if len(shared) > 10:
                ctx.print(f"    ... {len(shared) - 10} more (--json lists all)")
        ctx.print(f"  extra files: {len(s['extra_files'])}")
        for name, size in s["extra_files"].items():
            ctx.print(f"    {name}  ({size:,} bytes)")

    @classmethod
    def verify(cls, path: Checkable, strict: bool, data: Sequence[str] = ()) -> Json:
        report = verify(path, strict=strict)
        assert isinstance(report, VerifyReport)   # what verify gives for a PTMF file
        return {"format": "ptmf", **report._asdict()}

    @classmethod
    def verify_line(cls, result: Json) -> str:
        return (f"{result['size']:,} bytes, {result['ivalues']:,} ivalues, "
                f"{result['tensors']:,} tensors, {result['storages']:,} storages")

    def tree(self, max_depth: Optional[int]) -> Json:
        m = self.file
        return TreeBuilder(m, max_depth).ivalue(m.root.index, "", "", 0)

    @staticmethod
    def tree_lines(st: Style, node: Json) -> List[str]:
        return [tree_line(st, node)]

    def listing(self, method: Optional[str], every_function: bool) -> Listing:
        m = self.file
        functions = Methods(m.functions()) if every_function else m.methods
        chosen = list(functions.values()) if method is None else functions.find(method)
        if not chosen and method is not None:
            names = ", ".join(functions) or "none"
            raise CliError(f"no method {method!r} (methods: {names})", "not_found",
                           file=self.path)
        note = None
        if not functions:
            others = 0 if every_function else len(m.functions())
            note = f"--all shows its {others} other functions" if others else \
                "nothing to disassemble"
        return Listing([disassemble(f) for f in chosen], note)

    @staticmethod
    def print_entry(ctx: Context, entry: Json) -> None:
        print_dis(ctx, entry)

    def operators(self) -> Optional[List[str]]:
        m = self.file
        if not m.methods:
            return None
        return sorted(m.info()["opname_to_num_args"])

    def tensors(self) -> Dict[str, Tensor]:
        return self.file.state_dict()

    def dtype_name(self, tensor: Described) -> str:
        """torch's dtype name: a few torch dtypes share a numpy dtype (``uint8``,
        ``bits8``, ``uint3``...), the tensor's record tells them apart."""
        if not isinstance(tensor, np.ndarray):
            return super().dtype_name(tensor)
        record = self.file.tensor_record(tensor)
        return record.dtype if record is not None else dtype_name(tensor)

    def extract(self, name: str, jit_source: bool) -> Tuple[Union[bytes, memoryview], str]:
        m = self.file
        table: Dict[str, Any] = (
            {k: v.encode("utf-8") for k, v in m.jit_sources.items()} if jit_source
            else m.extra_files)
        what = "jit source" if jit_source else "extra file"
        if name not in table:
            names = ", ".join(repr(n) for n in table) or "none"
            raise CliError(f"no {what} named {name!r} ({what}s: {names})", "not_found",
                           file=self.path)
        return table[name], what.replace(" ", "_")
