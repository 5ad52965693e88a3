"""ExecuTorch ETRecords (``.etrecord``): what ExecuTorch's devtools keep of a program's
making, read without torch and without running a pickle.

An ETRecord (``generate_etrecord``, or ``generate_etrecord=True`` then
``get_etrecord().save(path)``) is a zip archive whose member ``ETRECORD_V0`` (empty)
marks it. Beside it: the exported program and the edge-dialect program of each method
(``exported_program``, ``edge_dialect_exported_program/<method>``; any extra module a
caller recorded as ``<module>/<method>``), each as JSON in torch.export's serialization
schema with three torch.save archives beside it (``<program>_state_dict``,
``_constants``, ``_example_inputs``); the maps ExecuTorch's Inspector joins with an
ETDump, as JSON (``debug_handle_map``, ``delegate_map``,
``instruction_id_to_num_outs_map``, ``export_graph_id``); and, from a bundled program,
``reference_outputs`` and ``representative_inputs`` (torch.save archives).

:class:`ETRecord` lists the members with their kind and size, gives the maps as
ExecuTorch's ``parse_etrecord`` does (``json.loads``: string keys), each program's graph
(:class:`Graph`: its nodes with their debug handles, module stacks and stack traces, its
signature) and the tensors of its torch.save archives, read by the core's restricted
reader (:mod:`pyflatmodule.core.torch_save`) as read-only views of the mapping. Members
are read when first asked for; JSON members are bounded in size (``MAX_JSON``).
"""
from __future__ import annotations

import json
from typing import Any, Dict, Iterator, List, Mapping, NamedTuple, Optional, Tuple

from ..core.lazy import np
from ..core.names import plural
from ..core.native import format_error, lib
from ..core.options import Options
from ..core.source import Holder, Openable, Source, open_source
from ..core.torch_save import TorchSave, is_zip
from ..core.zipview import ZipView
from ..errors import FormatError

__all__ = ["ETRecord", "Graph", "InputSpec", "MARKER", "Member", "Node", "OutputSpec",
           "Signature", "open_etrecord"]

#: The member that marks a zip archive as an ETRecord.
MARKER = "ETRECORD_V0"
#: The most bytes of one JSON member read (a program's graph, a map).
MAX_JSON = 256 << 20
#: The maps, as ExecuTorch names their members.
MAPS = ("debug_handle_map", "delegate_map", "instruction_id_to_num_outs_map")
#: Members holding JSON other than a program.
_JSON = frozenset(MAPS + ("export_graph_id",))
#: Members holding torch.save archives that belong to no program.
_SAVES = frozenset({"reference_outputs", "representative_inputs"})
#: What ExecuTorch appends to a program's name for its torch.save archives.
_SUFFIXES = ("_state_dict", "_constants", "_example_inputs")
#: torch.export's input kinds in its JSON, by the names torch's InputKind gives them.
_INPUT_KINDS = {"user_input": "user_input", "parameter": "parameter", "buffer": "buffer",
                "tensor_constant": "constant_tensor", "custom_obj": "custom_obj",
                "token": "token", "constant_input": "user_input"}
#: The field of each input kind that names its target.
_INPUT_TARGETS = {"parameter": "parameter_name", "buffer": "buffer_name",
                  "tensor_constant": "tensor_constant_name",
                  "custom_obj": "custom_obj_name"}
#: The field of each output kind that names its target.
_OUTPUT_TARGETS = {"buffer_mutation": "buffer_name", "gradient_to_parameter": "parameter_name",
                   "gradient_to_user_input": "user_input_name",
                   "user_input_mutation": "user_input_name",
                   "parameter_mutation": "parameter_name"}
#: The prefixes of operator targets in the JSON, left out of :attr:`Node.target`.
_TARGET_PREFIXES = ("executorch.exir.dialects.edge.ops.", "torch.ops.")


class Member(NamedTuple):
    """One member of the ETRecord's zip archive."""

    name: str
    #: ``"marker"`` (ETRECORD_V0), ``"program"`` (an exported program's JSON), ``"json"``
    #: (a map, the export graph id), ``"torch_save"`` (a torch.save archive), ``"pickle"``
    #: (a bare pickle, as ETRecords before March 2026 held: listed, never read),
    #: ``"empty"`` (no bytes: torch.export's serializer writes nothing for None) or
    #: ``"bytes"`` (anything else)
    kind: str
    size: int       #: bytes, uncompressed
    offset: int     #: where its bytes start in the file
    compressed: bool


class Node(NamedTuple):
    """One node of a graph, as torch.export's deserializer rebuilds it."""

    name: str
    op: str                  #: ``placeholder``, ``call_function`` or ``output``
    #: the operator as torch prints it (``aten.linear.default``; an edge-dialect operator
    #: by its ATen or ExecuTorch name); a placeholder's and the output's are their names
    target: str
    serialized_target: str   #: as the JSON has it (``torch.ops.aten.linear.default``)
    debug_handle: Optional[int]
    #: torch's ``node.meta["nn_module_stack"]``: key -> (module path, module type), outer
    #: first; None when the node has none
    module_stack: Optional[Dict[str, Tuple[str, str]]]
    stack_trace: Optional[str]
    #: a call's arguments in the operator schema's order, as the JSON lists them (those
    #: given: all positional ones, then keywords): the name of the one value each is
    #: (a placeholder's, another node's), None for any other argument (a number, a list)
    args: Tuple[Optional[str], ...] = ()


class InputSpec(NamedTuple):
    """One input of a graph signature."""

    kind: str      #: torch's InputKind, lower case: ``parameter``, ``buffer``, ...
    name: str      #: the placeholder's name
    target: Optional[str]       #: the parameter's, buffer's or constant's qualified name
    persistent: Optional[bool]  #: for buffers


class OutputSpec(NamedTuple):
    """One output of a graph signature."""

    kind: str      #: torch's OutputKind, lower case: ``user_output``, ``buffer_mutation``...
    name: Optional[str]         #: the value's name (None for a constant output)
    target: Optional[str]


class Signature(NamedTuple):
    """An exported program's graph signature."""

    inputs: List[InputSpec]
    outputs: List[OutputSpec]

    def targets(self) -> Dict[str, str]:
        """Placeholder name -> qualified name of what it stands for (parameters,
        buffers, constants)."""
        return {s.name: s.target for s in self.inputs if s.target is not None}


def _fail(status: int, why: str, path: str, offset: Optional[int] = None) -> FormatError:
    return format_error(status, offset, path, why)


class Graph:
    """One exported program of the ETRecord (``name``: its member), read from its JSON."""

    def __init__(self, record: "ETRecord", name: str, program: Any, offset: int) -> None:
        self.name = name
        self._record = record
        where = f"etrecord[{name!r}]"
        try:
            graph_module = program["graph_module"]
            graph, signature = graph_module["graph"], graph_module["signature"]
            inputs = self._specs(signature["input_specs"], where, True)
            outputs = self._specs(signature["output_specs"], where, False)
            self.signature = Signature(inputs, outputs)
            self.nodes = self._nodes(graph, where, offset)
        except (KeyError, TypeError, AttributeError, IndexError) as e:
            raise _fail(lib.ETR_E_BAD_GRAPH, f"exported program lacks a part of "
                                             f"torch.export's schema ({e!r})", where,
                        offset) from None

    def __repr__(self) -> str:
        return f"<Graph {self.name}: {plural(len(self.nodes), 'node')}>"

    @staticmethod
    def _one(union: Any) -> Tuple[str, Any]:
        """A union of torch.export's JSON: its one set field and value."""
        if not isinstance(union, dict) or len(union) != 1:
            raise TypeError(f"{union!r} is not a one-field union")
        return next(iter(union.items()))

    @classmethod
    def _arg_name(cls, arg: Any) -> Optional[str]:
        """The value name of an argument (``{"as_tensor": {"name": ...}}``); None for a
        constant."""
        if isinstance(arg, dict) and "name" in arg and len(arg) <= 2:
            name = arg["name"]
            return name if isinstance(name, str) else None
        _, value = cls._one(arg)
        if isinstance(value, dict) and isinstance(value.get("name"), str):
            return str(value["name"])
        return None

    @classmethod
    def _value_name(cls, arg: Any) -> Optional[str]:
        """The value a call's argument is (``{"as_tensor": {"name": ...}}``), None for
        any other kind of argument."""
        if not isinstance(arg, dict) or len(arg) != 1:
            return None
        kind, value = next(iter(arg.items()))
        return str(value["name"]) if kind == "as_tensor" and isinstance(value, dict) and \
            isinstance(value.get("name"), str) else None

    @classmethod
    def _specs(cls, specs: Any, where: str, inputs: bool) -> List[Any]:
        out: List[Any] = []
        for spec in specs:
            kind, body = cls._one(spec)
            if inputs:
                if kind not in _INPUT_KINDS:
                    raise KeyError(f"input kind {kind}")
                name = body["name"] if kind == "constant_input" else cls._arg_name(body["arg"])
                target = body.get(_INPUT_TARGETS.get(kind, ""))
                persistent = body.get("persistent") if kind == "buffer" else None
                out.append(InputSpec(_INPUT_KINDS[kind], str(name), target, persistent))
            else:
                out.append(OutputSpec(kind, cls._arg_name(body["arg"]),
                                      body.get(_OUTPUT_TARGETS.get(kind, ""))))
        return out

    def _nodes(self, graph: Any, where: str, offset: int) -> List[Node]:
        nodes = []
        specs = self.signature.inputs
        for i, arg in enumerate(graph["inputs"]):
            # a constant input has no value name: the signature's input names it
            name = self._arg_name(arg) or (specs[i].name if i < len(specs) else None)
            if name is None:
                raise TypeError(f"graph input {arg!r} has no name")
            nodes.append(Node(name, "placeholder", name, name, None, None, None))
        for i, n in enumerate(graph["nodes"]):
            meta = n.get("metadata") or {}
            target = str(n["target"])
            short = next((target[len(p):] for p in _TARGET_PREFIXES if target.startswith(p)),
                         target)
            nodes.append(Node(str(n["name"]), "call_function", short, target,
                              self._handle(meta, f"{where}.nodes[{i}]", offset),
                              self._stack(meta, f"{where}.nodes[{i}]", offset),
                              meta.get("stack_trace") or None,
                              tuple(self._value_name(a.get("arg"))
                                    for a in n.get("inputs") or ())))
        nodes.append(Node("output", "output", "output", "output", None, None, None))
        return nodes

    @staticmethod
    def _handle(meta: Dict[str, Any], where: str, offset: int) -> Optional[int]:
        """The debug handle, as ExecuTorch's deserializer reads it (``int(...)``)."""
        text = meta.get("debug_handle")
        if not text:
            return None
        try:
            return int(text)
        except (TypeError, ValueError):
            raise _fail(lib.ETR_E_BAD_GRAPH, f"debug handle {text!r} is not an integer",
                        where + ".debug_handle", offset) from None

    @staticmethod
    def _stack(meta: Dict[str, Any], where: str, offset: int
               ) -> Optional[Dict[str, Tuple[str, str]]]:
        """``nn_module_stack``, as torch's deserializer splits it: ``;`` between entries,
        ``key,path,type`` in each (commas inside brackets kept)."""
        text = meta.get("nn_module_stack")
        if not text:
            return None
        out: Dict[str, Tuple[str, str]] = {}
        for item in str(text).split(";"):
            parts, start, depth = [], 0, 0
            for end, c in enumerate(item):
                if c in "[(":
                    depth += 1
                elif c in ")]":
                    depth -= 1
                elif c == "," and depth == 0:
                    parts.append(item[start:end])
                    start = end + 1
            parts.append(item[start:])
            if len(parts) != 3:
                raise _fail(lib.ETR_E_BAD_GRAPH, f"nn_module_stack entry {item!r} is not "
                                                 f"key,path,type", where + ".nn_module_stack",
                            offset)
            out[parts[0]] = (parts[1], parts[2])
        return out

    def node(self, name: str) -> Node:
        """The node named ``name`` (KeyError if none)."""
        for n in self.nodes:
            if n.name == name:
                return n
        raise KeyError(f"graph {self.name} has no node {name!r}")

    def by_debug_handle(self) -> Dict[int, List[Node]]:
        """The nodes carrying each debug handle, in graph order."""
        out: Dict[int, List[Node]] = {}
        for n in self.nodes:
            if n.debug_handle is not None:
                out.setdefault(n.debug_handle, []).append(n)
        return out

    def state_dict(self) -> Dict[str, np.ndarray]:
        """The tensors of the program's ``_state_dict`` archive, by qualified name."""
        return self._record.state_dict(self.name)

    def constants(self) -> Dict[str, np.ndarray]:
        """The tensors of the program's ``_constants`` archive, by qualified name."""
        return self._record.state_dict(self.name + "_constants")


class ETRecord(Holder):
    """An opened ETRecord; see the module's documentation."""

    def __init__(self, source: Source) -> None:
        self._source = source
        self._view = memoryview(source.obj)
        self._zip = ZipView(self._view, "etrecord")
        if MARKER not in self._zip.members:
            raise _fail(lib.ETR_E_NOT_ETRECORD,
                        f"a zip archive ({plural(len(self._zip), 'member')}), but not an "
                        f"ETRecord: it has no {MARKER} member (TorchScript archives, .pt "
                        f"and zip .ptl, are not read here)", "etrecord", 0)
        self.members: List[Member] = [
            Member(m.name, self._kind(m.name, m.size), m.size, m.offset, m.compressed)
            for m in self._zip]
        self._by_name = {m.name: m for m in self.members}
        self._graphs: Dict[str, Graph] = {}
        self._json: Dict[str, Any] = {}

    def __repr__(self) -> str:
        if self._source is None:
            return "<ETRecord (closed)>"
        return (f"<ETRecord {self._source.name}: {plural(len(self.members), 'member')}, "
                f"{plural(len(self.graph_names), 'graph')}>")

    def _kind(self, name: str, size: int) -> str:
        if name == MARKER:
            return "marker"
        if size == 0:
            return "empty"
        if name in _JSON:
            return "json"
        if name in _SAVES or name.endswith(_SUFFIXES):
            head = self._zip.head(name, 4)
            return ("torch_save" if is_zip(memoryview(head))
                    else "pickle" if head[:1] == b"\x80" else "bytes")
        return "program"

    def _live(self) -> ZipView:
        if self._source is None:
            raise ValueError("the ETRecord is closed")
        return self._zip

    # ------------------------------------------------------------ members
    def member(self, name: str) -> Member:
        """The member named ``name`` (KeyError naming the members there are)."""
        try:
            return self._by_name[name]
        except KeyError:
            raise KeyError(f"the ETRecord has no member {name!r}; its members: "
                           f"{', '.join(self._by_name)}") from None

    def read(self, name: str) -> memoryview:
        """A member's bytes: a view of the mapping (inflated when compressed)."""
        self.member(name)
        return self._live().read(name)

    def json(self, name: str) -> Any:
        """A JSON member, parsed (at most :data:`MAX_JSON` bytes)."""
        if name not in self._json:
            m = self.member(name)
            data = self._live().read(name, limit=MAX_JSON)
            try:
                self._json[name] = json.loads(str(data, "utf-8"))
            except (UnicodeDecodeError, ValueError, RecursionError) as e:
                raise _fail(lib.ETR_E_BAD_JSON, f"member is not JSON ({e})",
                            f"etrecord[{name!r}]", m.offset) from None
        return self._json[name]

    def _map(self, name: str) -> Optional[Dict[str, Any]]:
        if name not in self._by_name:
            return None
        value = self.json(name)
        if not isinstance(value, dict):
            m = self._by_name[name]
            raise _fail(lib.ETR_E_BAD_JSON, f"{name} is a {type(value).__name__}, not an "
                                            f"object", f"etrecord[{name!r}]", m.offset)
        return value

    @property
    def debug_handle_map(self) -> Optional[Dict[str, Any]]:
        """Method -> instruction id (a string, as JSON keys are) -> debug handles (an int
        or a list): ExecuTorch's ``_debug_handle_map``; None when absent."""
        return self._map("debug_handle_map")

    @property
    def delegate_map(self) -> Optional[Dict[str, Any]]:
        """Method -> delegate instruction id -> ``{"name": backend, "delegate_map": ...}``:
        ExecuTorch's ``_delegate_map``; None when absent."""
        return self._map("delegate_map")

    @property
    def instruction_id_to_num_outs_map(self) -> Optional[Dict[str, Any]]:
        """Method -> instruction id -> number of outputs: ExecuTorch's
        ``_instruction_id_to_num_outs_map``; None when absent."""
        return self._map("instruction_id_to_num_outs_map")

    @property
    def export_graph_id(self) -> Optional[int]:
        """``export_graph_id`` as recorded (the id of the exported graph at export time)."""
        if "export_graph_id" not in self._by_name:
            return None
        value = self.json("export_graph_id")
        return value if isinstance(value, int) else None

    # ------------------------------------------------------------ graphs
    @property
    def graph_names(self) -> List[str]:
        """The members holding exported programs, in the archive's order."""
        return [m.name for m in self.members if m.kind == "program"]

    @property
    def graphs(self) -> Mapping[str, Graph]:
        """Every exported program's graph, by member name, each read when first asked
        for."""
        return _Graphs(self)

    def graph(self, name: str) -> Graph:
        """The graph of the exported program in member ``name``."""
        if name not in self._graphs:
            m = self.member(name)
            if m.kind != "program":
                raise KeyError(f"member {name!r} holds no exported program ({m.kind}); "
                               f"the programs: {', '.join(self.graph_names)}")
            program = self.json(name)
            if not isinstance(program, dict):
                raise _fail(lib.ETR_E_BAD_GRAPH, "exported program is not a JSON object",
                            f"etrecord[{name!r}]", m.offset)
            self._graphs[name] = Graph(self, name, program, m.offset)
        return self._graphs[name]

    # ------------------------------------------------------------ torch.save archives
    def torch_save(self, name: str) -> Any:
        """The object torch.save archived in member ``name``, its tensors read-only arrays
        over the mapping, read by the restricted reader (FormatError ``refused`` for
        anything but plain values and tensors). An empty member gives ``{}``, as torch's
        ``deserialize_torch_artifact`` does."""
        m = self.member(name)
        if m.kind == "empty":
            return {}
        if m.kind != "torch_save":
            raise _fail(lib.TS_E_REFUSED, f"member is {m.kind}, not a torch.save archive: "
                                          f"it is not read", f"etrecord[{name!r}]",
                        m.offset)
        return TorchSave(self._live().read(name), f"etrecord[{name!r}]", m.offset).load()

    def state_dict(self, name: str) -> Dict[str, np.ndarray]:
        """The tensors of a program's state dict by qualified name: ``name`` is the
        program (``edge_dialect_exported_program/forward``: its ``_state_dict`` member)
        or the torch.save member itself."""
        member = name + "_state_dict" if self._by_name.get(name, None) is not None \
            and self._by_name[name].kind == "program" else name
        value = self.torch_save(member)
        m = self._by_name[member]
        if not isinstance(value, dict) or not all(
                isinstance(k, str) and isinstance(v, np.ndarray) for k, v in value.items()):
            raise _fail(lib.TS_E_BAD_PICKLE, "archive holds no dict of names to tensors",
                        f"etrecord[{member!r}]", m.offset)
        return dict(value)

    def state_dicts(self) -> Dict[str, Dict[str, np.ndarray]]:
        """Every program's ``_state_dict`` tensors, by program name."""
        return {name: self.state_dict(name) for name in self.graph_names
                if name + "_state_dict" in self._by_name}

    # ------------------------------------------------------------ summary
    def info(self) -> Dict[str, Any]:
        """What the file holds, as plain data: its members, its graphs (nodes, debug
        handles, signature sizes), its maps' methods."""
        graphs = []
        for name in self.graph_names:
            g = self.graph(name)
            graphs.append({"name": name,
                           "nodes": len(g.nodes),
                           "operators": sum(n.op == "call_function" for n in g.nodes),
                           "debug_handles": len(g.by_debug_handle()),
                           "inputs": len(g.signature.inputs),
                           "outputs": len(g.signature.outputs)})
        maps = {}
        for name in MAPS:
            value = self._map(name)
            if value is not None:
                maps[name] = sorted(value)
        return {"format": "etrecord", "size": len(self._view),
                "members": [{"name": m.name, "kind": m.kind, "size": m.size}
                            for m in self.members],
                "graphs": graphs, "maps": maps}

    def check(self) -> None:
        """Read every member there is a reading of (the maps, every graph, every torch.save
        archive through the restricted reader): FormatError at the first that is bad."""
        for m in self.members:
            if m.kind in ("json", "program"):
                self.json(m.name)
            if m.kind == "program":
                self.graph(m.name)
            elif m.kind == "torch_save":
                self.torch_save(m.name)
        for name in MAPS:
            self._map(name)

    def __iter__(self) -> Iterator[Member]:
        return iter(self.members)


class _Graphs(Mapping[str, Graph]):
    """An ETRecord's graphs by member name, read on demand."""

    def __init__(self, record: ETRecord) -> None:
        self._record = record
        self._names = record.graph_names

    def __getitem__(self, name: str) -> Graph:
        if name not in self._names:
            raise KeyError(f"no graph {name!r}; the graphs: {', '.join(self._names)}")
        return self._record.graph(name)

    def __iter__(self) -> Iterator[str]:
        return iter(self._names)

    def __len__(self) -> int:
        return len(self._names)

    def __repr__(self) -> str:
        return f"<graphs: {', '.join(self._names)}>"


def open_etrecord(source: Openable, options: Options) -> ETRecord:
    """Open an ETRecord with ``options`` (see :func:`pyflatmodule.load`): its zip directory
    is read at open, its members when first asked for; with ``verify="full"`` (as
    :func:`pyflatmodule.verify` opens files) every member is read at open (:meth:`check`)."""
    opened = open_source(source, options)
    opened.release_fd()
    record = ETRecord(opened)
    if options.verify == "full":
        record.check()
    return record
