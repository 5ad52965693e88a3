"""``pyflatmodule shared``: which programs read which keys of their data files."""
from __future__ import annotations

import argparse
from typing import Dict, List, Tuple

from ..core.names import plural
from ..files import load_data, load_program
from .common import EXIT_FAIL, EXIT_OK, CliError, Context, Json, human

HELP = "programs sharing data files (.ptd): which program reads which key, what is missing"

EXAMPLES = """examples:
  pyflatmodule shared task_a.pte task_b.pte --data foundation.ptd
                                   each key of foundation.ptd, the programs that read it,
                                   the keys no program reads, what each program misses
  pyflatmodule shared *.pte --data base.ptd --data adapters.ptd --json

a program reads a key of a data file for each external tensor it names and each named
data entry its delegates read that it does not hold itself (the keys of
Program.missing_data when it is opened alone). The exit status is 1 when a program
reads a key no data file given holds: the runtime would refuse to load it.
"""


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The command's arguments (the data files come with --data)."""
    p.add_argument("paths", nargs="+", metavar="PTE", help="ExecuTorch programs")


def _reads(path: str) -> Tuple[List[str], Dict[str, List[str]]]:
    """The keys a program reads from data files (what it misses when opened alone), and
    for the keys its delegates read (XNNPACK's are hashes of the bytes) the constants
    they hold, by :meth:`~pyflatmodule.executorch.Delegate.constant_name` (the module's
    name the payload gives, else ``METHOD.delegates[I].values[ID]``)."""
    with load_program(path) as p:
        read_as: Dict[str, List[str]] = {}
        for m in p.methods.values():
            for d in m.delegates:
                graph = d.graph
                for vid, key in (graph.missing.items() if graph is not None else ()):
                    read_as.setdefault(key, []).append(d.constant_name(vid))
        return p.missing_data, read_as


def _keys(path: str) -> Dict[str, Json]:
    """A data file's keys: each tensor's dtype, shape and bytes; other named data, bytes."""
    with load_data(path) as d:
        tensors = d.tensors
        return {key: {"dtype": str(tensors[key].dtype) if key in tensors else None,
                      "shape": list(tensors[key].shape) if key in tensors else None,
                      "nbytes": int(tensors[key].nbytes) if key in tensors else len(blob)}
                for key, blob in d.named_data.items()}


def shared(programs: List[str], data: List[str]) -> Json:
    """The command's JSON document: per data file each key with the programs that read
    it (``read_as``: for a key delegates read, the constants it holds) and the keys no
    program reads; per program the keys no data file holds; the bytes
    of the keys more than one program reads (a key held by several files counts once, in
    the first that holds it, where the runtime's lookup finds it)."""
    found = {path: _reads(path) for path in programs}
    reads = {path: keys for path, (keys, _) in found.items()}
    files: List[Json] = []
    holder: Dict[str, Json] = {}
    for path in data:
        keys = _keys(path)
        for key, entry in keys.items():
            entry["used_by"] = [p for p in programs if key in reads[p]] \
                if key not in holder else []
            read_as = [f"{p}: {name}" for p in entry["used_by"]
                       for name in found[p][1].get(key, ())]
            if read_as:
                entry["read_as"] = read_as
            holder.setdefault(key, entry)
        files.append({"file": path, "keys": keys,
                      "unused": sorted(k for k, e in keys.items() if not e["used_by"])})
    return {"data_files": files,
            "programs": [{"file": p, "reads": len(reads[p]),
                          "missing": [k for k in reads[p] if k not in holder]}
                         for p in programs],
            "shared_bytes": sum(e["nbytes"] for e in holder.values() if len(e["used_by"]) > 1)}


def run(ctx: Context) -> int:
    """Print each data file's keys and who reads them, then each program's missing keys."""
    args = ctx.args
    if not args.data:
        raise CliError("no data file given: name them with --data FILE.ptd", "usage", 2)
    doc = shared(args.paths, args.data)
    status = EXIT_FAIL if any(p["missing"] for p in doc["programs"]) else EXIT_OK
    if ctx.json:
        ctx.dump(doc)
        return status
    st = ctx.style
    for f in doc["data_files"]:
        total = sum(e["nbytes"] for e in f["keys"].values())
        ctx.print(f"{st(f['file'], 'bold')}: {plural(len(f['keys']), 'key')}, {human(total)}")
        for key, e in f["keys"].items():
            what = f"{e['dtype']}{e['shape']}" if e["dtype"] else "bytes"
            users = ", ".join(e["used_by"]) or st("unused", "yellow")
            ctx.print(f"  {key}  {what}  {human(e['nbytes'])}  {users}")
            if "read_as" in e:
                ctx.print(st(f"    as {', '.join(e['read_as'])}", "dim"))
    for p in doc["programs"]:
        missing = p["missing"]
        ctx.print(f"{st(p['file'], 'bold')}: reads {plural(p['reads'], 'key')}" +
                  (st(f", {len(missing)} held by no data file: {', '.join(missing)}", "red")
                   if missing else ", every one held"))
    ctx.print(f"shared: {human(doc['shared_bytes'])} read by more than one program")
    return status
