"""Command line: ``pyflatmodule info [PATH]`` (also ``python -m pyflatmodule``)."""
from __future__ import annotations

import argparse
import json
import math
import os
import sys
from collections import Counter
from typing import Any, Dict, List, Optional


from . import FormatError, load
from .tensors import numpy_dtype, scalar_type_name

SAMPLE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "sample.ptl")

EXAMPLES = """examples:
  pyflatmodule info                 describe the sample model shipped with the package
  pyflatmodule info model.ptl       describe a model
  pyflatmodule info --json model.ff machine-readable summary
"""


def summarize(path: str) -> Dict[str, Any]:
    """The facts ``info`` prints, as plain JSON-able data."""
    with load(path) as m:
        image = m._img()
        records = image.tensor_index
        top = records[records["ivalue"] != 0xFFFFFFFF]
        by_dtype: Dict[str, List[int]] = {}
        total = 0
        for st, ndim, d in top[["scalar_type", "ndim", "dims"]].tolist():
            numel = math.prod(image.dims[d:d + ndim].tolist())
            nbytes = numel * numpy_dtype(st).itemsize if st not in (16, 17) else \
                -(-numel // (2 if st == 16 else 4))
            entry = by_dtype.setdefault(scalar_type_name(st), [0, 0])
            entry[0] += 1
            entry[1] += nbytes
            total += nbytes
        methods = []
        for name, f in m.methods.items():
            schema = f.schema
            methods.append({"name": name, "schema": str(schema) if schema else None,
                            "instructions": len(f.instructions),
                            "operators": len(f.operators)})
        kinds = Counter(m.ivalues.type_name(i) for i in range(len(m.ivalues)))
        return {
            "path": path, "size": m.size,
            "bytecode_version": m.bytecode_version, "operator_version": m.operator_version,
            "ivalues": len(m.ivalues), "ivalue_kinds": dict(sorted(kinds.items())),
            "object_types": len(m.object_types), "root_type": m.root.type_name,
            "methods": methods,
            "tensors": {"count": int(len(top)), "bytes": total,
                        "storages": len(m.storages),
                        "storage_bytes": int(image.storage_index["size"].sum()),
                        "by_dtype": {k: {"count": v[0], "bytes": v[1]}
                                     for k, v in sorted(by_dtype.items())}},
            "extra_files": {k: len(v) for k, v in m.extra_files.items()},
            "has_jit_sources": bool(image.summary.n_jit_sources),
        }


def _print_info(s: Dict[str, Any]) -> None:
    print(f"{s['path']}: PTMF model, {s['size']:,} bytes, bytecode version "
          f"{s['bytecode_version']}, operator version {s['operator_version']}")
    print(f"  root: {s['root_type']}")
    print(f"  ivalues: {s['ivalues']:,}   object types: {s['object_types']}   "
          f"jit sources: {'yes' if s['has_jit_sources'] else 'no'}")
    print(f"  methods: {len(s['methods'])}")
    for meth in s["methods"]:
        print(f"    {meth['name']}{meth['schema'] or ''}")
        print(f"      {meth['instructions']} instructions, {meth['operators']} operators")
    t = s["tensors"]
    print(f"  tensors: {t['count']:,} ({t['bytes']:,} bytes) in {t['storages']:,} storages "
          f"({t['storage_bytes']:,} bytes)")
    for name, d in t["by_dtype"].items():
        print(f"    {name:<16s} {d['count']:6,d} tensors {d['bytes']:14,d} bytes")
    print(f"  extra files: {len(s['extra_files'])}")
    for name, size in s["extra_files"].items():
        print(f"    {name}  ({size:,} bytes)")


def main(argv: Optional[List[str]] = None) -> int:
    """Run the command line; returns the exit status."""
    parser = argparse.ArgumentParser(
        prog="pyflatmodule", description="Inspect PyTorch mobile flatbuffer models.",
        epilog=EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    info = sub.add_parser("info", help="versions, counts, methods, tensors, extra files",
                          epilog=EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)
    info.add_argument("path", nargs="?", default=SAMPLE,
                      help="model file (default: the sample model shipped with the package)")
    info.add_argument("--json", action="store_true", help="print JSON instead of text")
    args = parser.parse_args(argv)
    try:
        summary = summarize(args.path)
    except FormatError as e:
        print(f"pyflatmodule: {args.path}: invalid model: {e} [{e.code}]", file=sys.stderr)
        return 1
    except OSError as e:
        print(f"pyflatmodule: {e}", file=sys.stderr)
        return 1
    if args.json:
        json.dump(summary, sys.stdout, indent=2)
        print()
    else:
        _print_info(summary)
    return 0


if __name__ == "__main__":
    sys.exit(main())
