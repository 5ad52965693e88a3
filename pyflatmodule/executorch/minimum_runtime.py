"""The oldest ExecuTorch release whose runtime reads every feature a file uses.

A file uses a table field when the field is present in its table (for a scalar, with a
value other than the schema's default), a union member or an enum value when one of its
tables holds it; a program uses the extended header when it has one, a data file its
header. Each feature's first release comes from :mod:`.releases` (generated from
ExecuTorch's schema history); the minimum is the latest of them. FlatBuffers lets an
older runtime skip a field it does not know, but then it does not do what the field
asks (load named data, place a tensor on a device), so a field counts as needed.
XNNPACK's payloads count too: the kinds of their nodes, values' datatypes and
quantizations (other backends' payloads are not counted).
"""
from __future__ import annotations

from typing import Any, Dict, List, Mapping, NamedTuple, Tuple

from ..core.fbread import Table
from ..core.native import lib
from . import releases
from .backends import DelegateGraph


class MinimumRuntime(NamedTuple):
    """The oldest release that reads the file, and why: (feature, its first release) for
    every feature newer than the first release, latest first."""

    release: str
    reasons: Tuple[Tuple[str, str], ...]

    def __str__(self) -> str:
        why = ", ".join(f"{feature} ({since})" for feature, since in self.reasons[:3])
        more = len(self.reasons) - 3
        if more > 0:
            why += f", and {more} more"
        return f"ExecuTorch {self.release}" + (f": {why}" if why else "")

    def as_json(self) -> Dict[str, Any]:
        """``info()``'s form: the release and the reasons as objects."""
        return {"release": self.release,
                "reasons": [{"feature": f, "release": r} for f, r in self.reasons]}


def release_key(release: str) -> Tuple[int, ...]:
    """A release's version as a tuple of ints, for ordering."""
    return tuple(int(x) for x in release.split("."))


#: What a feature in no release's schema needs: a release after the last one read.
UNRELEASED = "after " + releases.RELEASES[-1]


def _order(release: str) -> Tuple[int, ...]:
    return (10 ** 6,) if release == UNRELEASED else release_key(release)


def schema_features(root: Table, root_name: str, fields: Mapping[Tuple[str, str], str],
                    members: Mapping[Tuple[str, str], str],
                    enum_values: Mapping[Tuple[str, str], str],
                    enum_names: Mapping[Tuple[str, int], str]) -> Dict[str, str]:
    """Every schema feature the tables under ``root`` use -> its first release."""
    out: Dict[str, str] = {}
    schema = root.schema
    stack: List[Tuple[Table, str]] = [(root, root_name)]
    seen = set()
    while stack:
        t, name = stack.pop()
        if t.pos in seen:
            continue
        seen.add(t.pos)
        for fname, f in t.fields.items():
            if not t.has(fname) or fname.endswith("_type") and fname[:-5] in t.fields:
                continue
            if f.kind == lib.FB_SCALAR:
                value = t.scalar(fname)
                if value == f.default:
                    continue
                if f.ref:
                    vname = enum_names.get((f.ref, int(value)), str(value))
                    out[f"{f.ref}.{vname}"] = enum_values.get((f.ref, vname), UNRELEASED)
            out[f"{name}.{fname}"] = fields.get((name, fname), UNRELEASED)
            if f.kind == lib.FB_UNION:
                member, sub = t.union(fname)
                out[f"{f.ref}.{member}"] = members.get((f.ref, member), UNRELEASED)
                kind = int(t.scalar(fname + "_type"))
                ref = schema.union_types[f.ref][kind] if kind < len(
                    schema.union_types[f.ref]) else ""
                if sub is not None and ref in schema.tables:
                    stack.append((sub, ref))
            elif f.kind == lib.FB_TABLE:
                sub = t.table(fname)
                if sub is not None:
                    stack.append((sub, f.ref))
            elif f.kind == lib.FB_VEC_TABLE:
                stack.extend((sub, f.ref) for sub in t.tables(fname))
    return out


def minimum(features: Mapping[str, str]) -> MinimumRuntime:
    """The latest release of ``features`` with the features newer than the first
    release, latest first."""
    first = releases.RELEASES[0]
    newer = sorted(((f, r) for f, r in features.items() if r != first),
                   key=lambda fr: (tuple(-x for x in _order(fr[1])), fr[0]))
    return MinimumRuntime(newer[0][1] if newer else first, tuple(newer))


def program_features(root: Table, has_extended_header: bool) -> Dict[str, str]:
    """What a program (its root table) uses."""
    out = schema_features(root, "Program", releases.PROGRAM_FIELDS,
                          releases.PROGRAM_UNION_MEMBERS, releases.PROGRAM_ENUM_VALUES,
                          releases.PROGRAM_ENUM_NAMES)
    if has_extended_header:
        out["extended header"] = releases.EXTENDED_HEADER
    if "Program.named_data" in out:
        out["named data"] = releases.NAMED_DATA
    return out


def data_file_features(root: Table, layout: int) -> Dict[str, str]:
    """What a data file (its root table, in layout ``layout``: an ``et_layout`` of the C
    core) uses: the format and its FH01 header too. ExecuTorch 0.6.0's layout, which only
    the first release that reads data files reads, counts as that release whole; its
    fields are not in :data:`.releases.FLAT_TENSOR_FIELDS`, the later layout's."""
    if layout == lib.ET_LAYOUT_FLAT_TENSOR_0_6:
        out = {"data file in 0.6.0's layout": releases.FLAT_TENSOR_FIRST}
    else:
        out = schema_features(root, "FlatTensor", releases.FLAT_TENSOR_FIELDS, {},
                              releases.PROGRAM_ENUM_VALUES, releases.PROGRAM_ENUM_NAMES)
    out["data file"] = releases.FLAT_TENSOR_FIRST
    out["data file header"] = releases.FLAT_TENSOR_HEADER
    return out


def delegate_features(graph: DelegateGraph) -> Dict[str, str]:
    """What a delegate's payload uses, for the payloads whose schema history is known
    (XNNPACK's); nothing for the others."""
    from .backends.xnnpack import XnnGraph  # imported with the first graph read
    out: Dict[str, str] = {}
    if not isinstance(graph, XnnGraph):
        return out
    members = releases.XNNPACK_UNION_MEMBERS
    for node in graph.nodes:
        out[f"XNNPACK {node.kind}"] = members.get(("XNodeUnion", node.kind), UNRELEASED)
    for datatype, quant in set(graph.value_kinds()):
        name = "xnn_datatype_" + datatype
        out[f"XNNPACK {name}"] = releases.XNNPACK_ENUM_VALUES.get(("XNNDatatype", name),
                                                                  UNRELEASED)
        if quant:
            out[f"XNNPACK {quant}"] = members.get(("XNNQuantParams", quant), UNRELEASED)
    return out
