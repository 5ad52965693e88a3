"""What the commands show of ExecuTorch ETRecords (``.etrecord``): the members and the
graphs, through the public API of ``ETRecord``. An ETRecord holds graphs but no code to
disassemble: ``dis`` and ``ops`` say so; ``export`` writes its programs' state dicts and
``extract`` a member's bytes."""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

from ...core.names import plural
from ...executorch import ETRecord
from ...files import load_etrecord
from ..common import CliError, Context, Json, Style
from .base import Checkable, NoCode, Tensor, below

__all__ = ["ExecuTorchETRecord"]


class ExecuTorchETRecord(NoCode):
    """An ExecuTorch ETRecord (a :class:`pyflatmodule.ETRecord`)."""

    opens = ETRecord
    file: ETRecord

    def profiled_record(self) -> Optional[Any]:
        return self.file

    def summary(self) -> Json:
        return {"file": self.path, **self.file.info()}

    @staticmethod
    def print_info(ctx: Context, s: Json) -> None:
        st = ctx.style
        ctx.print(f"{st(s['file'], 'bold')}: ExecuTorch ETRecord, {s['size']:,} bytes, "
                  f"{plural(len(s['members']), 'member')}")
        for m in s["members"]:
            ctx.print(f"  {m['name']}: {m['kind']}, {m['size']:,} bytes")
        for g in s["graphs"]:
            ctx.print(f"  graph {st(g['name'], 'bold')}: {plural(g['nodes'], 'node')} "
                      f"({g['operators']:,} operators, "
                      f"{plural(g['debug_handles'], 'debug handle')}), "
                      f"{plural(g['inputs'], 'input')}, {plural(g['outputs'], 'output')}")
        for name, methods in s["maps"].items():
            ctx.print(f"  {name}: {', '.join(methods) or 'empty'}")

    @classmethod
    def verify(cls, path: Checkable, strict: bool, data: Sequence[str] = ()) -> Json:
        # verify="full": every graph and torch.save archive read at open
        with load_etrecord(path, strict=strict, verify="full") as f:
            info = f.info()
        return {"format": "etrecord", "size": info["size"], "members": len(info["members"]),
                "graphs": len(info["graphs"])}

    @classmethod
    def verify_line(cls, result: Json) -> str:
        return (f"{result['size']:,} bytes, ExecuTorch ETRecord, "
                f"{plural(result['members'], 'member')}, {plural(result['graphs'], 'graph')}")

    def tree(self, max_depth: Optional[int]) -> Json:
        """The members, each graph with its nodes."""
        members = []
        for m in self.file.members:
            node: Json = {"name": m.name, "path": m.name, "kind": "member",
                          "member_kind": m.kind, "size": m.size}
            if m.kind == "program":
                nodes = [{"name": n.name, "path": f"{m.name}.{n.name}", "kind": "graph_node",
                          "op": n.op, "target": n.target, "debug_handle": n.debug_handle}
                         for n in self.file.graph(m.name).nodes]
                node.update(below(nodes, 1, max_depth))
            members.append(node)
        return {"name": "", "path": "", "kind": "etrecord", **below(members, 0, max_depth)}

    @staticmethod
    def tree_lines(st: Style, node: Json) -> List[str]:
        kind = node["kind"]
        if kind == "etrecord":
            line = "ETRecord"
        elif kind == "graph_node":
            handle = node["debug_handle"]
            line = (f"{st(node['op'], 'cyan')} {node['target']}"
                    + (f" (debug handle {handle})" if handle is not None else ""))
        else:
            line = f"{st(node['member_kind'], 'yellow')}, {node['size']:,} bytes"
        lines = [line]
        if "truncated" in node:
            lines.append(st(f"... {node['truncated']} not shown (--depth)", "dim"))
        return lines

    def tensors(self) -> Dict[str, Tensor]:
        """Every program's state dict, each tensor named ``<program>/<qualified name>``."""
        return {f"{program}/{key}": t for program, tensors in self.file.state_dicts().items()
                for key, t in tensors.items()}

    def extract(self, name: str, jit_source: bool) -> Tuple[Union[bytes, memoryview], str]:
        try:
            return self.file.read(name), "member"
        except KeyError:
            raise CliError(f"no member {name!r} in the ETRecord", "not_found",
                           file=self.path) from None
