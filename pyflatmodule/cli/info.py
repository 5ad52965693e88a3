"""``pyflatmodule info``: versions, counts, methods, tensors by dtype, shared storages,
extra files."""
from __future__ import annotations

import argparse
from collections import Counter
from typing import Dict, List

from ..errors import FormatError
from ..ptmf import Module
from . import executorch
from .common import EXIT_FAIL, EXIT_OK, SAMPLE, Context, Json, open_model, report

HELP = ("versions, counts, methods, tensors by dtype, shared storages, extra files "
        "(ExecuTorch: methods, operators, delegates, constants, segments)")

EXAMPLES = """examples:
  pyflatmodule info                     describe the sample model shipped with the package
  pyflatmodule info model.ptl           versions, methods, tensors by dtype, extra files
  pyflatmodule info model.pte           an ExecuTorch program: methods, operators, delegates
  pyflatmodule info --json a.ff b.ff    one JSON object per file (a list for several)
"""


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The command's arguments."""
    p.add_argument("paths", nargs="*", metavar="PATH",
                   help="model files (default: the sample model shipped with the package)")


def summarize(path: str) -> Json:
    """The facts ``info`` prints, as plain JSON-able data."""
    with open_model(path) as m:
        if not isinstance(m, Module):
            return executorch.summarize(path, m)
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
            "file": path, "size": m.size,
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


def print_info(ctx: Context, s: Json) -> None:
    """The text ``info`` prints for one file."""
    if s.get("format") in ("pte", "ptd"):
        executorch.print_info(ctx, s)
        return
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


def run(ctx: Context) -> int:
    """Describe each file."""
    paths: List[str] = ctx.args.paths or [SAMPLE]
    docs: List[Json] = []
    status = EXIT_OK
    for k, path in enumerate(paths):
        try:
            summary = summarize(path)
        except (FormatError, OSError) as e:
            report(ctx, path, e)
            status = EXIT_FAIL
            continue
        if ctx.json:
            docs.append(summary)
        else:
            if k:
                ctx.print()
            print_info(ctx, summary)
    if ctx.json and docs:
        ctx.dump(docs[0] if len(paths) == 1 else docs)
    return status
