"""``pyflatmodule size``: where an ExecuTorch program's (and its data files') bytes go."""
from __future__ import annotations

import argparse
import os
from collections import Counter
from typing import TYPE_CHECKING, Dict, List, Optional, Sequence, Tuple

from ..files import file_format
from .common import (
    EXIT_OK,
    CliError,
    Context,
    Json,
    add_names,
    human,
    names_for,
    refuse_input_as_output,
    refuse_special_output,
    write_error,
)
from .formats import Region, open_file

if TYPE_CHECKING:
    from . import treemap

#: What reads each named data key (FileFormat.named_data_readers).
Readers = Dict[str, List[str]]

HELP = "where the bytes of an ExecuTorch program, data file or bundled program go"

EXAMPLES = """examples:
  pyflatmodule size model.pte                  sections, methods, delegates, dtypes, largest
  pyflatmodule size model.pte --data w.ptd     the program and its data file
  pyflatmodule size model.pte --svg size.svg   a treemap of the regions
  pyflatmodule size model.pte --html size.html the treemap and the totals in one page
  pyflatmodule size model.pte --json           {"files": [{"file", "format", ...}]}
  pyflatmodule size tests.bpte                 the embedded program and each test case
  pyflatmodule size model.pte --names model.etrecord --html size.html
                                               tensors and boxes by the module's names

the regions tile each file: the flatbuffer (its headers included), the segments and the
padding between them; inside, per method its values, chains, operators and delegates,
constants, delegate payloads and named data by key. Objects of the flatbuffer no part
claims (the root table, shared vtables) are "other"; bytes no object covers, "padding".
"""


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The command's arguments."""
    p.add_argument("path", metavar="PATH",
                   help="an ExecuTorch program (.pte), data file (.ptd) or bundled program "
                        "(.bpte)")
    p.add_argument("--top", type=int, default=10, metavar="N",
                   help="how many of the largest tensors to list (default 10)")
    p.add_argument("--svg", metavar="OUT", help="write a treemap of the regions as SVG")
    p.add_argument("--html", metavar="OUT",
                   help="write the treemap and the totals as a self-contained HTML page")
    add_names(p)


def _readers(r: Region, readers: Readers) -> List[str]:
    """What reads a ``named_data`` region (its label: keys joined by commas)."""
    if r.kind != "named_data":
        return []
    return [n for key in r.label.split(",") for n in readers.get(key, [])]


def names(regions: Sequence[Region], readers: Readers,
          constants: Dict[Tuple[str, str], str]) -> treemap.Names:
    """The treemap's name of each region it names, by kind and label: a ``named_data``
    region a delegate reads by what reads it (the keys of backends such as XNNPACK are
    content hashes), a constant by ``constants``' name."""
    out = {(r.kind, r.label): "; ".join(who) for top in regions for r in top.walk()
           for who in [_readers(r, readers)] if who}
    return {**out, **constants}


def _named_readers(readers: Readers, module: Dict[str, str]) -> Readers:
    """What reads each named data key, a delegate's constant by the module's name where
    ``module`` has it (``NAME (node role)``)."""
    def rename(who: str) -> str:
        where, _, rest = who.partition(" ")
        return " ".join(filter(None, (module.get(where, where), rest)))
    return {key: [rename(w) for w in who] for key, who in readers.items()}


def region_doc(r: Region, readers: Readers) -> Json:
    """A region as JSON: kind, label, start, end, size, spans, children (and a named data
    region's ``readers`` when delegates read it)."""
    who = _readers(r, readers)
    return {"kind": r.kind, "label": r.label, "start": r.start, "end": r.end, "size": r.size,
            "spans": [list(s) for s in r.spans], **({"readers": who} if who else {}),
            "children": [region_doc(c, readers) for c in r.children]}


def _leaves(regions: Sequence[Region]) -> Dict[str, int]:
    out: Counter[str] = Counter()
    for top in regions:
        for r in top.walk():
            if not r.children:
                out[r.kind] += r.size
    return dict(sorted(out.items(), key=lambda kv: -kv[1]))


def _methods(regions: Sequence[Region]) -> List[Json]:
    """Per method: its bytes in the flatbuffer, and its delegates' payloads in segments
    (a bundled program's are inside its embedded program)."""
    out: Dict[str, Json] = {}

    def count(name: str, part: str, n: int) -> None:
        m = out.setdefault(name, {"name": name, "flatbuffer": 0, "segments": 0})
        m[part] += n

    def walk(r: Region, in_segment: bool) -> None:
        if r.kind == "method" and not in_segment:
            count(r.label, "flatbuffer", r.size)
        elif r.kind == "payload" and in_segment:
            count(r.label.rsplit(".delegates[", 1)[0], "segments", r.size)
        else:
            for c in r.children:
                walk(c, in_segment or r.kind == "segment")

    for top in regions:
        walk(top, False)
    for m in out.values():
        m["total"] = m["flatbuffer"] + m["segments"]
    return list(out.values())


def _file_doc(path: str, data: Sequence[str], top: int, readers: Optional[Readers],
              reference: Optional[str], constants: Dict[Tuple[str, str], str]
              ) -> Tuple[Json, List[Region], Readers]:
    """``path``'s document and regions, and what reads its named data (``readers``, or
    when None the file's own delegates, named by the module's names of ``reference``);
    ``constants`` gets the module's name of each of its constant regions."""
    with open_file(path, data) as f:
        # the tensors' bytes are read only to name them (a remote file's are fetched)
        module = names_for(f.tensors(), reference, f.file) if reference is not None else {}
        if readers is None:
            readers = _named_readers(f.named_data_readers(), module)
        regions = f.regions()
        if regions is None:
            raise CliError("has no regions to show: size reads ExecuTorch programs (.pte), "
                           "data files (.ptd) and bundled programs (.bpte)", "unsupported",
                           file=path)
        tensors: List[Json] = []
        blobs: Dict[Tuple[int, int], List[str]] = {}
        for name, t in f.tensor_layouts().items():
            n = f.nbytes(t)
            tensors.append({"name": name, "dtype": f.dtype_name(t),
                            "shape": [int(k) for k in t.shape], "bytes": n,
                            **({"module_name": module[name]} if name in module else {})})
            if n:
                blobs.setdefault((f.address(t), n), []).append(name)
        facts = f.size_facts()
        held = f.region_tensors() if module else {}
    constants.update({region: "; ".join(module[n] for n in names if n in module)
                      for region, names in held.items() if any(n in module for n in names)})
    sharing = {name: names for names in blobs.values() if len(names) > 1 for name in names}
    dtypes: Dict[str, Json] = {}
    for doc in tensors:
        d = dtypes.setdefault(doc["dtype"], {"dtype": doc["dtype"], "tensors": 0, "bytes": 0})
        d["tensors"] += 1
        names = sharing.get(doc["name"], [doc["name"]])
        d["bytes"] += doc["bytes"] if names[0] == doc["name"] else 0
        doc["shared_with"] = [n for n in names if n != doc["name"]]
    # a shared blob once, as the first of its tensors
    firsts = [d for d in tensors if sharing.get(d["name"], [d["name"]])[0] == d["name"]]
    shared = [(names, n) for (_, n), names in blobs.items() if len(names) > 1]
    size = max((r.end for r in regions), default=0)
    out: Json = {"file": path, "format": file_format(path), "size": size,
                 "extended_header": facts.get("extended_header"),
                 "top_level": {k: sum(r.size for r in regions if r.kind == k)
                               for k in ("flatbuffer", "padding", "segment")},
                 "sections": _leaves(regions), "methods": _methods(regions),
                 "delegates": facts.get("delegates", []),
                 "dtypes": sorted(dtypes.values(), key=lambda d: -d["bytes"]),
                 "shared": {"blobs": len(shared), "tensors": sum(len(t) for t, _ in shared),
                            "bytes": sum(n for _, n in shared),
                            "repeated": sum(n * (len(t) - 1) for t, n in shared)},
                 "largest_tensors": sorted(firsts, key=lambda d: -int(d["bytes"]))[:max(0, top)],
                 "regions": [region_doc(r, readers) for r in regions]}
    return out, regions, readers


def _pct(n: int, total: int) -> str:
    return f"{100.0 * n / total:5.1f}%" if total else "   - "


def _print(ctx: Context, doc: Json) -> None:
    st = ctx.style
    total = doc["size"]
    ctx.print(f"{st(doc['file'], 'bold')}: {total:,} bytes ({human(total)}), {doc['format']}")
    eh = doc["extended_header"]
    if eh is not None:
        ctx.print(f"  extended header: program {eh['program_size']:,}, segment base "
                  f"{eh['segment_base_offset']:,}, segment data {eh['segment_data_size']:,}")
    ctx.print("  " + "   ".join(f"{k} {v:,}" for k, v in doc["top_level"].items()))
    ctx.print(st("  sections", "cyan"))
    for k, v in doc["sections"].items():
        ctx.print(f"    {k:<16s} {v:>12,}  {_pct(v, total)}")
    if doc["methods"]:
        ctx.print(st("  methods", "cyan") + " (flatbuffer + payloads in segments)")
        for m in doc["methods"]:
            ctx.print(f"    {m['name']:<24s} {m['total']:>12,}  {_pct(m['total'], total)}  "
                      f"({m['flatbuffer']:,} + {m['segments']:,})")
    if doc["delegates"]:
        ctx.print(st("  delegates", "cyan"))
        for d in doc["delegates"]:
            ctx.print(f"    {d['method']}.delegates[{d['index']}] {d['id']:<16s} "
                      f"{d['location']:<8s} {d['size']:>12,}  {_pct(d['size'], total)}")
    if doc["dtypes"]:
        ctx.print(st("  tensors by dtype", "cyan"))
        for d in doc["dtypes"]:
            ctx.print(f"    {d['dtype']:<14s} {d['tensors']:>6d} tensors {d['bytes']:>12,}")
    sh = doc["shared"]
    if sh["blobs"]:
        ctx.print(f"  shared: {sh['tensors']} tensors read {sh['blobs']} "
                  f"{'blob' if sh['blobs'] == 1 else 'blobs'} of {sh['bytes']:,} bytes, "
                  f"counted once ({sh['repeated']:,} bytes more if counted per tensor)")
    if doc["largest_tensors"]:
        ctx.print(st("  largest tensors", "cyan"))
        for t in doc["largest_tensors"]:
            same = f"  (also {', '.join(t['shared_with'])})" if t["shared_with"] else ""
            name = f"{t['module_name']} ({t['name']})" if "module_name" in t else t["name"]
            ctx.print(f"    {t['bytes']:>12,}  {t['dtype']:<10s} {str(t['shape']):<16s} "
                      f"{name}{same}")


def _file_region(path: str, regions: List[Region]) -> Region:
    """A file's regions under one ``file`` region (label: its name), for a picture of
    several files side by side; its byte ranges are the file's own."""
    size = max((r.end for r in regions), default=0)
    return Region("file", os.path.basename(path), 0, size, size, ((0, size),) if size else (),
                  tuple(regions))


def _write(path: str, out: str, text: str) -> None:
    refuse_input_as_output(path, out)
    refuse_special_output(out)
    try:
        with open(out, "w", encoding="utf-8") as f:
            f.write(text)
    except OSError as e:
        raise write_error(out, e) from None


def run(ctx: Context) -> int:
    """Report each file's sizes; write the pictures asked for."""
    args = ctx.args
    docs: List[Json] = []
    files: List[Tuple[str, List[Region]]] = []
    readers: Optional[Readers] = None   # the program's delegates read the data files too
    constants: Dict[Tuple[str, str], str] = {}
    for i, path in enumerate([args.path, *args.data]):
        doc, regions, readers = _file_doc(path, args.data if i == 0 else (), args.top,
                                          readers, args.names if i == 0 else None,
                                          constants)
        docs.append(doc)
        files.append((path, regions))
    title = " + ".join(f"{os.path.basename(d['file'])}: {d['size']:,} bytes" for d in docs)
    shown = files[0][1] if len(files) == 1 else [_file_region(p, r) for p, r in files]
    table: Counter[str] = Counter()
    for doc in docs:
        table.update(doc["sections"])
    labels = names(shown, readers or {}, constants)
    if args.svg is not None or args.html is not None:
        from . import treemap  # it imports html: loaded for a picture alone
    if args.svg is not None:
        _write(args.path, args.svg, treemap.svg(title, shown, labels))
    if args.html is not None:
        _write(args.path, args.html, treemap.page(title, shown, table.most_common(), labels))
    if ctx.json:
        ctx.dump({"files": docs})
    else:
        for doc in docs:
            _print(ctx, doc)
    return EXIT_OK
