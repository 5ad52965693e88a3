"""Write pyflatmodule/executorch/releases.py: when each part of ExecuTorch's file formats
first appeared in a release, from ExecuTorch's own git history.

    python csrc/schemas/release_history.py REPO [--latest VERSION:DIR] [-o OUT]

REPO is a clone of github.com/pytorch/executorch with its release tags (``vX.Y.Z``).
The script walks the stable tags in version order and reads, at each, the program schema
(schema/program.fbs with schema/scalar_type.fbs), the data file schema
(extension/flat_tensor/serialize/flat_tensor.fbs; extension/flat_tensor/flat_tensor.fbs
in 0.5.0, which wrote no data files), the extended header (schema/extended_header.h:
its fields) and the runtime's loader (runtime/executor/program.cpp: whether it reads
named data, whether it checks the schema version) and XNNPACK's payload schema
(backends/xnnpack/serialization/runtime_schema.fbs; schema.fbs in 0.1.0: its node and
value kinds, its datatypes). ``--latest`` adds a release not yet tagged in REPO from the
schema files of its installed package (DIR holds schema/program.fbs,
schema/scalar_type.fbs, extension/flat_tensor/serialize/flat_tensor.fbs and
backends/xnnpack/serialization/runtime_schema.fbs), e.g. the executorch wheel's
site-packages/executorch folder; its header and loader are taken as the last tag's.

A table field counts from the first release of the run of releases, up to the last one,
that declares it with the same id and type (a field renumbered or retyped starts
again: an older runtime would read other bytes); a union member and an enum value from
the first release of the run that gives it the same number. Needs git and nothing else.
"""
from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
from typing import Dict, List, Optional, Tuple

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "..", "..", "pyflatmodule", "executorch", "releases.py")

PROGRAM = "schema/program.fbs"
SCALAR_TYPE = "schema/scalar_type.fbs"
FLAT_TENSOR = ("extension/flat_tensor/serialize/flat_tensor.fbs",
               "extension/flat_tensor/flat_tensor.fbs")
EXTENDED_HEADER = "schema/extended_header.h"
LOADER = "runtime/executor/program.cpp"
DATA_MAP = "extension/flat_tensor/flat_tensor_data_map.cpp"
FLAT_TENSOR_HEADER = "extension/flat_tensor/serialize/flat_tensor_header.h"
XNNPACK = ("backends/xnnpack/serialization/runtime_schema.fbs",
           "backends/xnnpack/serialization/schema.fbs")

#: (kind, table or enum or union, name) -> (number, type)
Decls = Dict[Tuple[str, str, str], Tuple[int, str]]


def git_show(repo: str, tag: str, path: str) -> Optional[str]:
    r = subprocess.run(["git", "-C", repo, "show", f"{tag}:{path}"], capture_output=True)
    return r.stdout.decode() if r.returncode == 0 else None


def parse_fbs(text: str) -> Tuple[Decls, Optional[str]]:
    """A schema's table fields (with their ids and types), union members and enum values
    (with their numbers), and its file identifier."""
    text = re.sub(r"//[^\n]*", "", text)
    out: Decls = {}
    for kind, name, body in re.findall(r"\b(table|struct|union|enum)\s+(\w+)[^{]*\{([^}]*)\}",
                                       text):
        if kind in ("table", "struct"):
            fid = 0
            for fname, ftype in re.findall(r"(\w+)\s*:\s*([^;=(]+)", body):
                out[("field", name, fname)] = (fid, ftype.strip().replace(" ", ""))
                # a union field takes two ids: its type and its value
                fid += 1
            continue
        value = 1 if kind == "union" else 0   # a union's 0 is NONE
        for item in body.split(","):
            item = item.strip()
            if not item:
                continue
            m = re.match(r"(\w+)\s*(?:=\s*(-?\w+))?", item)
            if m is None:
                continue
            if m.group(2) is not None:
                value = int(m.group(2), 0)
            out[("member" if kind == "union" else "value", name, m.group(1))] = (value, "")
            value += 1
    ident = re.search(r'file_identifier\s+"(\w+)"', text)
    return out, ident.group(1) if ident else None


def union_ids(decls: Decls) -> Decls:
    """The decls with each table's field ids counted as FlatBuffers does: a union field
    takes two (its type, then its value)."""
    unions = {k[1] for k in decls if k[0] == "member"}
    out: Decls = {}
    shift: Dict[str, int] = {}
    for key, (fid, ftype) in decls.items():
        if key[0] != "field":
            out[key] = (fid, ftype)
            continue
        extra = shift.get(key[1], 0)
        if ftype in unions:
            extra += 1
            shift[key[1]] = extra
            out[key] = (fid + extra, ftype)
        else:
            out[key] = (fid + extra, ftype)
    return out


def tags(repo: str) -> List[str]:
    r = subprocess.run(["git", "-C", repo, "tag"], capture_output=True, check=True)
    names = [t for t in r.stdout.decode().split() if re.fullmatch(r"v\d+\.\d+\.\d+", t)]
    return sorted(names, key=lambda t: tuple(int(x) for x in t[1:].split(".")))


class Release:
    """What one release's sources say."""

    def __init__(self, version: str, program: str, scalar_type: str,
                 flat_tensor: Optional[str], header: Optional[str],
                 loader: Optional[str], data_map: bool = False,
                 flat_header: Optional[str] = None, xnnpack: Optional[str] = None) -> None:
        self.version = version
        self.xnnpack: Decls = parse_fbs(xnnpack)[0] if xnnpack else {}
        self.data_map = data_map
        self.flat_header_fields = re.findall(r"uint64_t\s+(\w+);", flat_header or "")
        decls, self.program_id = parse_fbs(program)
        st, _ = parse_fbs(scalar_type)
        decls.update(st)
        self.program = union_ids(decls)
        self.flat_tensor: Decls = {}
        self.flat_tensor_id: Optional[str] = None
        if flat_tensor is not None:
            ft, self.flat_tensor_id = parse_fbs(flat_tensor)
            self.flat_tensor = union_ids(ft)
        self.header_fields = re.findall(r"uint64_t\s+(\w+);", header or "")
        self.loader_named_data = loader is not None and "named_data()" in loader
        self.loader_version_check = loader is not None and bool(
            re.search(r"->version\(\)", loader))


def first_seen(releases: List[Release], attr: str) -> Dict[Tuple[str, str, str], str]:
    """Each decl of the last release's schema -> the first release of the run, up to the
    last release, that has it with the same number and type."""
    last: Decls = getattr(releases[-1], attr)
    out = {}
    for key, sig in last.items():
        since = releases[-1].version
        for r in reversed(releases):
            if getattr(r, attr).get(key) != sig:
                break
            since = r.version
        out[key] = since
    return out


def render(releases: List[Release]) -> str:
    program = first_seen(releases, "program")
    flat = first_seen(releases, "flat_tensor")
    header: Dict[str, str] = {}
    for r in releases:
        for f in r.header_fields:
            header.setdefault(f, r.version)
    with_header = next(r.version for r in releases if r.header_fields)
    ft_first = next(r.version for r in releases if r.data_map)
    ft_header = next(r.version for r in releases if r.flat_header_fields)
    named = next(r.version for r in releases if r.loader_named_data)
    checks = [r.version for r in releases if r.loader_version_check]
    xnn = first_seen(releases, "xnnpack")
    lines = [
        '"""When each part of ExecuTorch\'s file formats first appeared in a release.',
        "",
        "Generated by csrc/schemas/release_history.py from ExecuTorch's git history (its",
        "stable release tags) and the latest release's installed schema files; do not edit.",
        "Regenerate with:",
        "",
        "    python csrc/schemas/release_history.py EXECUTORCH_CLONE \\",
        "        --latest 1.5.1:SITE_PACKAGES/executorch",
        "",
        "A table field counts from the first release of the run of releases, up to the last",
        "one, that declares it with the same id and type; a union member and an enum value",
        "from the first of the run that gives it the same number. The data file's",
        "schema takes its ScalarType from the program's (schema/scalar_type.fbs).",
        '"""',
        "from typing import Dict, Tuple",
        "",
        "#: The releases read, oldest first.",
        "RELEASES: Tuple[str, ...] = (",
        *(f"    {r.version!r}," for r in releases),
        ")",
        "",
    ]

    def table(name: str, doc: str, items: Dict[Tuple[str, str], str]) -> None:
        lines.append(f"#: {doc}")
        lines.append(f"{name}: Dict[Tuple[str, str], str] = {{")
        for key in sorted(items):
            lines.append(f"    {key!r}: {items[key]!r},")
        lines.append("}")
        lines.append("")

    for prefix, attr, decls, what in (
            ("PROGRAM", "program", program, "program (.pte) schema"),
            ("FLAT_TENSOR", "flat_tensor", flat, "data file (.ptd) schema")):
        for kind, label in (("field", "FIELDS"), ("member", "UNION_MEMBERS"),
                            ("value", "ENUM_VALUES")):
            items = {(k[1], k[2]): v for k, v in decls.items() if k[0] == kind}
            if items or kind == "field":
                noun = {"field": "(table, field)", "member": "(union, member)",
                        "value": "(enum, value name)"}[kind]
                table(f"{prefix}_{label}", f"The {what}: {noun} -> first release.", items)
            if kind == "value" and items:
                lines.append(f"#: The {what}: (enum, number) -> value name.")
                lines.append(f"{prefix}_ENUM_NAMES: Dict[Tuple[str, int], str] = {{")
                for key in sorted(k for k in decls if k[0] == kind):
                    number = releases[-1].__dict__[attr][key][0]
                    lines.append(f"    {(key[1], number)!r}: {key[2]!r},")
                lines.append("}")
                lines.append("")
    for kind, label, noun in (("member", "UNION_MEMBERS", "(union, member)"),
                              ("value", "ENUM_VALUES", "(enum, value name)")):
        table(f"XNNPACK_{label}", f"XNNPACK's payload schema: {noun} -> first release.",
              {(k[1], k[2]): v for k, v in xnn.items() if k[0] == kind})
    lines += [
        "#: The extended header (``eh00`` at byte 8): the first release with it. Every",
        "#: release's runtime takes a header longer than the fields it knows (it checks a",
        "#: minimum length), so a newer field does not keep an older runtime from the file.",
        f"EXTENDED_HEADER: str = {with_header!r}",
        "#: Its fields after the magic and length -> the first release that writes them.",
        "EXTENDED_HEADER_FIELDS: Dict[str, str] = {",
        *(f"    {k!r}: {v!r}," for k, v in header.items()),
        "}",
        "#: The first release whose runtime reads a program's named data (Program.named_data).",
        f"NAMED_DATA: str = {named!r}",
        "#: The first release whose runtime reads data files (.ptd, ``FT01``: its",
        "#: FlatTensorDataMap). It read an earlier layout (tensors with their metadata,",
        "#: FlatTensor.tensor_alignment) under the same identifier; the layout read since",
        "#: (named data, with a TensorLayout) is the release of FLAT_TENSOR_FIELDS' fields.",
        f"FLAT_TENSOR_FIRST: str = {ft_first!r}",
        "#: The first release with the data file's ``FH01`` header (at byte 8).",
        f"FLAT_TENSOR_HEADER: str = {ft_header!r}",
        "#: The program and data file identifiers of every release.",
        f"PROGRAM_IDENTIFIERS: Tuple[str, ...] = "
        f"{tuple(sorted({r.program_id for r in releases if r.program_id}))!r}",
        f"FLAT_TENSOR_IDENTIFIERS: Tuple[str, ...] = "
        f"{tuple(sorted({r.flat_tensor_id for r in releases if r.flat_tensor_id}))!r}",
        "#: Releases whose runtime checks a program's schema version field (none checks",
        "#: anything but the identifier where this is empty).",
        f"VERSION_CHECKS: Tuple[str, ...] = {tuple(checks)!r}",
        "",
    ]
    return "\n".join(lines)


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("repo", help="a clone of pytorch/executorch with its release tags")
    ap.add_argument("--latest", help="VERSION:DIR, an untagged release's installed schemas")
    ap.add_argument("-o", "--output", default=OUT)
    args = ap.parse_args(argv)
    releases = []
    for tag in tags(args.repo):
        flat = None
        for path in FLAT_TENSOR:
            flat = git_show(args.repo, tag, path)
            if flat is not None:
                break
        xnnpack = None
        for path in XNNPACK:
            xnnpack = git_show(args.repo, tag, path)
            if xnnpack is not None:
                break
        program = git_show(args.repo, tag, PROGRAM)
        scalar = git_show(args.repo, tag, SCALAR_TYPE)
        if program is None or scalar is None:
            continue
        releases.append(Release(tag[1:], program, scalar, flat,
                                git_show(args.repo, tag, EXTENDED_HEADER),
                                git_show(args.repo, tag, LOADER),
                                git_show(args.repo, tag, DATA_MAP) is not None,
                                git_show(args.repo, tag, FLAT_TENSOR_HEADER), xnnpack))
    if args.latest:
        version, folder = args.latest.split(":", 1)

        def read(path: str) -> str:
            with open(os.path.join(folder, path)) as f:
                return f.read()
        prev = releases[-1]
        r = Release(version, read(PROGRAM), read(SCALAR_TYPE), read(FLAT_TENSOR[0]), None,
                    None, xnnpack=read(XNNPACK[0]))
        # the package holds no C sources: the header and loader are the last tag's
        r.header_fields = prev.header_fields
        r.loader_named_data = prev.loader_named_data
        r.loader_version_check = prev.loader_version_check
        r.data_map = prev.data_map
        r.flat_header_fields = prev.flat_header_fields
        releases.append(r)
    with open(args.output, "w") as f:
        f.write(render(releases))
    print(f"wrote {args.output}: {len(releases)} releases", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
