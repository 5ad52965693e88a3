"""The ``pyflatmodule`` command line (also ``python -m pyflatmodule``).

Commands: ``info``, ``verify``, ``tree``, ``dis``, ``ops``, ``export``, ``extract``.
Every command takes ``--json`` (one JSON document on stdout; shapes documented in the
README), prints errors on stderr and exits non-zero: 0 success, 1 a bad or unreadable
model file (or a name that is not in it) or an output that cannot be written, 2 a usage
error (an output that is the input model, also through a link, is one). An error is
reported in one line naming the file at fault, never with a traceback. ``dis`` and
``ops`` on a file without methods (a parameters file) print an empty listing, say so
in a note on stderr (text output only) and exit 0, as ``nm`` does for a file without
symbols. Colour is used only when the output is a terminal and ``NO_COLOR`` is not set
(``--color`` overrides). Nothing here imports torch, nor ml_dtypes unless a file needs it.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import sys
import time
from collections import Counter
from functools import partial
from typing import (Any, Callable, Dict, Iterator, List, Optional, Sequence, Set, TextIO, Tuple,
                    Union)

import numpy as np

from . import export as _export
from ._image import (BOOL_LIST, DICT, DOUBLE_LIST, INT_LIST, LIST, OBJECT, TENSOR, TUPLE,
                     UNION_NAMES, Image)
from ._native import lib
from .errors import FormatError
from .functions import OPCODES, Function, Methods
from .module import Module, load
from .module import verify as verify_source
from .tensors import DTYPE_NAMES, PACKED, QuantizedTensor, numpy_dtype, scalar_type_name
from .values import Object, decode

__all__ = ["main", "summarize"]

SAMPLE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "sample.ptl")
MODEL_SUFFIXES = (".ptl", ".ff")

EXIT_OK, EXIT_FAIL, EXIT_USAGE = 0, 1, 2

Json = Dict[str, Any]
Tensor = Union[np.ndarray, QuantizedTensor]


# ============================================================================ plumbing

class CliError(Exception):
    """A failure to report in one line (``status`` 1) or a usage error (2)."""

    def __init__(self, message: str, code: str = "error", status: int = EXIT_FAIL,
                 file: Optional[str] = None) -> None:
        super().__init__(message)
        self.message = message
        self.code = code
        self.status = status
        self.file = file


class Style:
    """ANSI styling, or plain text when colour is off."""

    _CODES = {"bold": "1", "dim": "2", "red": "31", "green": "32", "yellow": "33",
              "blue": "34", "magenta": "35", "cyan": "36"}

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled

    def __call__(self, text: str, *styles: str) -> str:
        if not self.enabled or not styles:
            return text
        codes = ";".join(self._CODES[s] for s in styles)
        return f"\033[{codes}m{text}\033[0m"


def use_colour(choice: str, stream: TextIO) -> bool:
    """``--color`` choice: ``always``, ``never`` or ``auto`` (a terminal, no NO_COLOR)."""
    if choice == "always":
        return True
    if choice == "never":
        return False
    if os.environ.get("NO_COLOR") or os.environ.get("TERM") == "dumb":
        return False
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


class Context:
    """What every command gets: parsed arguments, output streams and styling."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.json: bool = bool(getattr(args, "json", False))
        self.out: TextIO = sys.stdout
        self.err: TextIO = sys.stderr
        self.style = Style(use_colour(getattr(args, "color", "auto"), self.out))
        self.err_style = Style(use_colour(getattr(args, "color", "auto"), self.err))

    def print(self, text: str = "") -> None:
        self.out.write(text + "\n")

    def dump(self, doc: Any) -> None:
        json.dump(doc, self.out, indent=2, ensure_ascii=False, allow_nan=False)
        self.out.write("\n")


def error_doc(file: Optional[str], exc: BaseException) -> Json:
    """The ``error`` object of the JSON outputs."""
    if isinstance(exc, FormatError):
        return {"file": file, "code": exc.code, "message": exc.reason,
                "offset": exc.offset, "path": exc.path}
    if isinstance(exc, CliError):
        return {"file": exc.file or file, "code": exc.code, "message": exc.message,
                "offset": None, "path": ""}
    if isinstance(exc, OSError):
        return {"file": file, "code": "io_error",
                "message": exc.strerror or str(exc), "offset": None, "path": ""}
    return {"file": file, "code": "internal_error",
            "message": f"{type(exc).__name__}: {exc}", "offset": None, "path": ""}


def error_line(file: Optional[str], exc: BaseException) -> str:
    """One line describing what is wrong with ``file``."""
    prefix = f"{file}: " if file else ""
    if isinstance(exc, FormatError):
        return f"{prefix}invalid model: {exc} [{exc.code}]"
    if isinstance(exc, CliError):
        return f"{exc.file + ': ' if exc.file else prefix}{exc.message}"
    if isinstance(exc, OSError):
        return f"{prefix}{exc.strerror or exc}"
    return (f"{prefix}internal error: {type(exc).__name__}: {exc} "
            "(please report it; PYFLATMODULE_DEBUG=1 shows the traceback)")


def report(ctx: Context, file: Optional[str], exc: BaseException) -> None:
    """An error on stderr: one line, or one JSON document with ``--json``."""
    if ctx.json:
        ctx.err.write(json.dumps({"error": error_doc(file, exc)}, ensure_ascii=False) + "\n")
    else:
        ctx.err.write(ctx.err_style("pyflatmodule: ", "bold") + error_line(file, exc) + "\n")


def open_model(path: str) -> Module:
    """``load(path)``, with the reader's errors labelled by the file."""
    if os.path.isdir(path):
        raise IsADirectoryError(21, "is a directory", path)
    return load(path)


def refuse_input_as_output(source: str, output: str) -> None:
    """A usage error when ``output`` is the file ``source`` (also through a hard or
    symbolic link): writing it would destroy the model being read."""
    try:
        same = os.path.samefile(source, output)
    except OSError:
        return          # no such output yet; an unreadable source is reported on opening
    if same:
        what = "the input file" if os.path.abspath(source) == os.path.abspath(output) \
            else f"the same file as the input {source}"
        raise CliError(f"is {what}; refusing to overwrite it", "usage", EXIT_USAGE,
                       file=output)


def write_error(output: str, exc: OSError) -> CliError:
    """An output that cannot be written, reported under its own name (not the model's)."""
    return CliError(f"cannot write: {exc.strerror or exc}", "io_error", file=output)


def no_methods_note(ctx: Context, path: str, what: str) -> None:
    """Say on stderr (text output only) that a file has no code, e.g. a parameters file
    written by ``torch._C._save_parameters``: an empty listing is not an error."""
    if not ctx.json:
        ctx.err.write(ctx.err_style("pyflatmodule: ", "bold") +
                      f"{path}: holds no methods; {what}\n")


def human(n: float) -> str:
    """Bytes in KiB/MiB/GiB."""
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n} B"


def short(value: Any, limit: int = 60) -> str:
    """A one-line description of a decoded value, at most ``limit`` characters."""
    if isinstance(value, np.ndarray):
        text = f"tensor({value.dtype}, {list(value.shape)})"
    elif isinstance(value, QuantizedTensor):
        text = f"qtensor({value.dtype_name}, {list(value.shape)}, {value.qscheme})"
    elif isinstance(value, Object):
        text = f"<{value.type_name} object>"
    elif isinstance(value, Function):
        text = f"<function {value.name}>"
    elif isinstance(value, (list, tuple)) and any(
            isinstance(v, (np.ndarray, QuantizedTensor, Object, Function)) for v in value):
        inner = ", ".join(short(v, limit) for v in value)
        if isinstance(value, list):
            text = f"[{inner}]"
        else:
            text = f"({inner}{',' if len(value) == 1 else ''})"
    else:
        text = repr(value)
    return text if len(text) <= limit else text[:limit - 3] + "..."


def json_value(value: Any) -> Any:
    """``value`` as JSON when it is plain data (numbers, strings, lists...), else None."""
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, (list, tuple)):
        items = [json_value(v) for v in value]
        return items if all(i is not None or v is None for i, v in zip(items, value)) else None
    return None


# ============================================================================ tensors

# torch's name for each numpy dtype a plain tensor can have. ml_dtypes' types (bfloat16,
# float8_*) are left out: their numpy names are torch's, and listing them here would
# import ml_dtypes, a large part of every command's start-up, for files without them.
_NATURAL: Dict[np.dtype, str] = {}
for _i, _name in enumerate(DTYPE_NAMES):
    if not _name.startswith(("q", "bits", "float4", "bfloat16", "float8")) and not (
            _name[-1].isdigit() and _name.rstrip("1234567") in ("int", "uint")):
        _NATURAL.setdefault(numpy_dtype(_i), _name)


class TensorRecords:
    """The file's tensor records, to find the torch dtype and storage of a tensor.

    ``state_dict()`` and decoded values hand out plain arrays; a few torch dtypes
    share a numpy container (``uint8``, ``bits8``, ``uint3``...), and the storage index
    is not on the array. Records are found by ivalue, or by where an array points.
    """

    def __init__(self, image: Image) -> None:
        rec = image.tensor_index
        self.scalar_type: List[int] = rec["scalar_type"].tolist()
        self.storage: List[int] = rec["storage"].tolist()
        self.offset: List[int] = rec["storage_offset"].tolist()
        self.ndim: List[int] = rec["ndim"].tolist()
        self.dim_at: List[int] = rec["dims"].tolist()
        self.requires_grad: List[int] = rec["requires_grad"].tolist()
        self.ivalue: List[int] = rec["ivalue"].tolist()
        self.dims: List[int] = image.dims.tolist()
        self.storage_pos: List[int] = image.storage_index["pos"].tolist()
        self.by_ivalue = {iv: t for t, iv in enumerate(self.ivalue) if iv != lib.PTMF_NO_IVALUE}
        self._image = image
        self._by_address: Optional[Dict[Tuple[int, Tuple[int, ...]], List[int]]] = None
        self._empty: Optional[Dict[Tuple[int, ...], List[int]]] = None

    def shape(self, t: int) -> List[int]:
        d = self.dim_at[t]
        return self.dims[d:d + self.ndim[t]]

    def strides(self, t: int) -> List[int]:
        d, n = self.dim_at[t], self.ndim[t]
        return self.dims[d + n:d + 2 * n]

    def _index(self) -> Dict[Tuple[int, Tuple[int, ...]], List[int]]:
        if self._by_address is None:
            base = int(np.frombuffer(self._image.view, np.uint8, count=1)
                       .__array_interface__["data"][0]) if self._image.size else 0
            index: Dict[Tuple[int, Tuple[int, ...]], List[int]] = {}
            for t, iv in enumerate(self.ivalue):
                st = self.scalar_type[t]
                if iv == lib.PTMF_NO_IVALUE or st in PACKED:
                    continue
                item = numpy_dtype(st).itemsize
                address = base + self.storage_pos[self.storage[t]] + self.offset[t] * item
                index.setdefault((address, tuple(self.shape(t))), []).append(t)
            self._by_address = index
        return self._by_address

    def find(self, array: np.ndarray) -> Optional[int]:
        """The record an array (from this file) was made from, when it can be told."""
        shape = tuple(int(n) for n in array.shape)
        if array.size == 0:
            if self._empty is None:
                self._empty = {}
                for t, iv in enumerate(self.ivalue):
                    if iv != lib.PTMF_NO_IVALUE and 0 in self.shape(t):
                        self._empty.setdefault(tuple(self.shape(t)), []).append(t)
            candidates = [t for t in self._empty.get(shape, [])
                          if numpy_dtype(self.scalar_type[t]) == array.dtype]
        else:
            address = int(array.__array_interface__["data"][0])
            candidates = [t for t in self._index().get((address, shape), [])
                          if numpy_dtype(self.scalar_type[t]) == array.dtype]
        return candidates[0] if candidates else None

    def dtype_name(self, value: Tensor) -> str:
        """torch's dtype name for a tensor from this file."""
        if isinstance(value, QuantizedTensor):
            return value.dtype_name
        t = self.find(value)
        if t is not None:
            return scalar_type_name(self.scalar_type[t])
        return _NATURAL.get(value.dtype, str(value.dtype))


def tensor_fields(value: Tensor, records: TensorRecords, t: Optional[int]) -> Json:
    """dtype, shape, bytes, storage (and quantization) of one tensor."""
    if t is None and isinstance(value, np.ndarray):
        t = records.find(value)
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
               "dtype": scalar_type_name(records.scalar_type[t]) if t is not None
               else records.dtype_name(value),
               "shape": [int(n) for n in value.shape], "bytes": int(value.nbytes)}
    if t is not None:
        out["storage"] = records.storage[t]
        out["storage_offset"] = records.offset[t]
        out["strides"] = records.strides(t)
        out["requires_grad"] = bool(records.requires_grad[t])
    else:
        out["storage"] = None
    return out


# ============================================================================ info

def summarize(path: str) -> Json:
    """The facts ``info`` prints, as plain JSON-able data."""
    with open_model(path) as m:
        image = m._img()
        records = image.tensor_index
        top = records[records["ivalue"] != lib.PTMF_NO_IVALUE]
        by_dtype: Dict[str, List[int]] = {}
        total = 0
        for st, ndim, d in top[["scalar_type", "ndim", "dims"]].tolist():
            numel = math.prod(image.dims[d:d + ndim].tolist())
            nbytes = numel * numpy_dtype(st).itemsize if st not in PACKED else \
                -(-numel // PACKED[st])
            entry = by_dtype.setdefault(scalar_type_name(st), [0, 0])
            entry[0] += 1
            entry[1] += nbytes
            total += nbytes
        sizes = image.storage_index["size"].tolist()
        users = Counter(top["storage"].tolist())
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
            "tensors": {"count": int(len(top)), "bytes": total,
                        "storages": len(m.storages),
                        "storage_bytes": int(sum(sizes)),
                        "shared_storages": shared,
                        "by_dtype": {k: {"count": v[0], "bytes": v[1]}
                                     for k, v in sorted(by_dtype.items())}},
            "extra_files": {k: len(v) for k, v in m.extra_files.items()},
            "has_jit_sources": bool(image.summary.n_jit_sources),
        }


def _print_info(ctx: Context, s: Json) -> None:
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


def cmd_info(ctx: Context) -> int:
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
            _print_info(ctx, summary)
    if ctx.json and docs:
        ctx.dump(docs[0] if len(paths) == 1 else docs)
    return status


# ============================================================================ verify

def expand_paths(paths: Sequence[str]) -> Iterator[str]:
    """Files to check: ``-`` reads paths from stdin (one a line), directories are
    searched recursively for ``.ptl``/``.ff`` files, anything else is taken as is."""
    for path in paths:
        if path == "-":
            for line in sys.stdin:
                line = line.rstrip("\r\n")
                if line:
                    yield line
        elif os.path.isdir(path):
            for root, dirs, files in os.walk(path):
                dirs.sort()
                for name in sorted(files):
                    if name.lower().endswith(MODEL_SUFFIXES):
                        yield os.path.join(root, name)
        else:
            yield path


def verify_one(path: str, strict: bool) -> Json:
    """``{"file", "valid", ...report fields}`` or ``{"file", "valid": false, "error"}``."""
    try:
        if os.path.isdir(path):
            raise IsADirectoryError(21, "is a directory", path)
        r = verify_source(path, strict=strict)
    except (FormatError, OSError) as e:
        return {"file": path, "valid": False, "error": error_doc(path, e)}
    except Exception as e:          # a reader bug must not stop a run over thousands
        if os.environ.get("PYFLATMODULE_DEBUG"):
            raise
        return {"file": path, "valid": False, "error": error_doc(path, e)}
    return {"file": path, "valid": True, **r._asdict()}


def verify_text(st: Style, result: Json) -> str:
    """The one line ``verify`` prints for a file."""
    if result["valid"]:
        return (f"{result['file']}: {st('OK', 'green', 'bold')} ({result['size']:,} bytes, "
                f"{result['ivalues']:,} ivalues, {result['tensors']:,} tensors, "
                f"{result['storages']:,} storages)")
    e = result["error"]
    where = []
    if e["offset"] is not None:
        where.append(f"offset {e['offset']}")
    if e["path"]:
        where.append(f"at {e['path']}")
    return (f"{result['file']}: {st('INVALID', 'red', 'bold')} [{e['code']}]"
            f"{' ' + ' '.join(where) if where else ''}: {e['message']}")


def cmd_verify(ctx: Context) -> int:
    args = ctx.args
    results: List[Json] = []
    counts = [0, 0]
    start = time.perf_counter()
    seen_any = False
    for path in expand_paths(args.paths):
        seen_any = True
        result = verify_one(path, args.strict)
        counts[0 if result["valid"] else 1] += 1
        if ctx.json:
            results.append(result)
        elif not (args.quiet and result["valid"]):
            ctx.print(verify_text(ctx.style, result))
    elapsed = time.perf_counter() - start
    if not seen_any:
        raise CliError("no model files given (directories are searched for "
                       f"{'/'.join(MODEL_SUFFIXES)} files)", "usage", EXIT_USAGE)
    if ctx.json:
        ctx.dump({"valid": counts[0], "invalid": counts[1], "files": results})
    if args.stats:
        n = counts[0] + counts[1]
        rate = n / elapsed if elapsed > 0 else float("inf")
        ctx.err.write(f"{n} files: {counts[0]} valid, {counts[1]} invalid, "
                      f"{elapsed:.2f} s ({rate:,.0f} files/s)\n")
    return EXIT_OK if counts[1] == 0 else EXIT_FAIL


# ============================================================================ tree

_KINDS = {0: "none", 1: "int", 2: "bool", 3: "float", 4: "complex", 5: "tensor", 6: "str",
          7: "list", 8: "tuple", 9: "dict", 10: "object", 11: "list", 12: "list",
          13: "list", 14: "device", 15: "enum", 16: "function"}
_CONTAINERS = (LIST, TUPLE, DICT)


class TreeBuilder:
    """The object hierarchy from the root, as nested JSON-able nodes.

    Each ivalue is expanded once: an object or container met again (torch shares
    submodules and equal tuples) is a node with ``same_as``, so the output stays
    linear in the file whatever its sharing.
    """

    def __init__(self, m: Module, max_depth: Optional[int]) -> None:
        self.image = m._img()
        self.rows = self.image.rows()
        self.records = TensorRecords(self.image)
        self.max_depth = max_depth
        self.seen: Dict[int, str] = {}
        self._holds: Dict[int, bool] = {}

    def _elements(self, i: int) -> List[Tuple[str, str, int]]:
        """(name, path suffix, ivalue) of a container's or field object's children."""
        t, _, a, n, b, m, _, _ = self.rows[i]
        image = self.image
        where = f"ivalues[{i}]"
        if t in (LIST, TUPLE):
            return [(f"[{k}]", f"[{k}]", j)
                    for k, j in enumerate(image.refs(i, a, n, where + ".items"))]
        if t == DICT:
            out = []
            for k, j in zip(image.refs(i, a, n, where + ".keys"),
                            image.refs(i, b, n, where + ".values")):
                key = short(decode(image, k, {}), 80)
                out.append((f"[{key}]", f"[{key}]", j))
            return out
        names = image.object_types()[m].attr_names[:n]
        return [(name, "." + name, j)
                for name, j in zip(names, image.refs(i, a, n, where + ".attrs"))]

    def _holds_structure(self, i: int) -> bool:
        """Whether a container holds a tensor or an object (then it is expanded)."""
        known = self._holds.get(i)
        if known is None:
            self._holds[i] = False          # indices only point backwards: no cycles
            known = any(self.rows[j][0] in (TENSOR, OBJECT) or
                        (self.rows[j][0] in _CONTAINERS and self._holds_structure(j))
                        for _, _, j in self._elements(i))
            self._holds[i] = known
        return known

    def ivalue(self, i: int, name: str, path: str, depth: int) -> Json:
        row = self.rows[i]
        t = row[0]
        node: Json = {"name": name, "path": path, "kind": _KINDS.get(t, UNION_NAMES[t])}
        if t == TENSOR:
            node.update(tensor_fields(self.image.tensor(row[5]), self.records,
                                      self.records.by_ivalue.get(i)))
        elif t == OBJECT:
            obj = self.image.proxy(i, Object)
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
                items = list(obj._restored().items())
                self._children(node, depth, [
                    partial(self.value, v, k, f"{path}.{k}" if path else k) for k, v in items])
            else:
                state_path = f"{path}.__getstate__()" if path else "__getstate__()"
                self._children(node, depth, [
                    partial(self.ivalue, row[4], "__getstate__()", state_path)])
        elif t in _CONTAINERS:
            node["length"] = row[3]
            if self._holds_structure(i):
                if i in self.seen:
                    node["same_as"] = self.seen[i]
                    return node
                self.seen[i] = path
                children = [(n, path + s, j) for n, s, j in self._elements(i)]
                self._children(node, depth, [partial(self.ivalue, j, n, p)
                                             for n, p, j in children])
            else:
                self._scalar(node, decode(self.image, i, {}))
        else:
            if t in (INT_LIST, DOUBLE_LIST, BOOL_LIST):
                node["length"] = row[3]
            self._scalar(node, decode(self.image, i, {}))
        return node

    def value(self, v: Any, name: str, path: str, depth: int) -> Json:
        """A node for an already decoded value (set-state objects' attributes)."""
        if isinstance(v, Object):
            return self.ivalue(v.index, name, path, depth)
        node: Json = {"name": name, "path": path}
        if isinstance(v, (np.ndarray, QuantizedTensor)):
            node.update(tensor_fields(v, self.records, None))
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
            node["kind"] = {bool: "bool", int: "int", float: "float", complex: "complex",
                            str: "str", type(None): "none"}.get(type(v), type(v).__name__.lower())
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


def prune(node: Json, needle: str) -> Optional[Json]:
    """The subtree of nodes whose path contains ``needle``, with their ancestors."""
    kept = [c for c in (prune(child, needle) for child in node.get("children", []))
            if c is not None]
    if needle in node["path"] and node["path"]:
        return node
    if kept:
        out = dict(node)
        out["children"] = kept
        return out
    return None


def tree_line(st: Style, node: Json) -> str:
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


def print_tree(ctx: Context, node: Json, indent: int = 0) -> None:
    name = node["name"]
    label = ctx.style(name, "bold") + ": " if indent else ""
    ctx.print("  " * indent + label + tree_line(ctx.style, node))
    for child in node.get("children", []):
        print_tree(ctx, child, indent + 1)


def cmd_tree(ctx: Context) -> int:
    args = ctx.args
    if args.depth is not None and args.depth < 0:
        raise CliError("--depth must be 0 or more", "usage", EXIT_USAGE)
    with open_model(args.path) as m:
        builder = TreeBuilder(m, args.depth)
        root = builder.ivalue(int(m._img().summary.state_obj), "", "", 0)
    if args.filter:
        root = prune(root, args.filter) or {**root, "children": []}
    if ctx.json:
        ctx.dump({"file": args.path, "root": root})
    else:
        print_tree(ctx, root)
    return EXIT_OK


# ============================================================================ dis

_TYPE_OPERAND = {"LIST_CONSTRUCT", "DICT_CONSTRUCT", "NAMED_TUPLE_CONSTRUCT", "CREATE_OBJECT",
                 "TO_LIST"}
_REGISTER = {"LOAD", "MOVE", "STORE", "DROPR"}


def _operands(pc: int, name: str, x: int, n: int, f: "FunctionView") -> Tuple[str, str]:
    """(operand text, comment) of one instruction."""
    if name in ("OP", "OPN"):
        ops = f.operators
        text = f"#{x}" + (f", {n} inputs" if name == "OPN" else "")
        if 0 <= x < len(ops):
            o = ops[x]
            return text, o.full_name + (f" ({o.num_args} args)" if o.num_args is not None else "")
        return text, "operator index out of range"
    if name in _REGISTER:
        return f"r{x}", ""
    if name == "STOREN":
        return (f"r{x}" if n == 1 else f"r{x}..r{x + n - 1}"), ""
    if name == "LOADC":
        return f"c{x}", (short(f.constants[x]) if 0 <= x < len(f.constants)
                         else "constant index out of range")
    if name in ("JF", "JMP"):
        return f"{x:+d}", f"-> {pc + x}"
    if name == "LOOP":
        return f"{x:+d}, {n}", f"exit -> {pc + x}"
    if name in _TYPE_OPERAND:
        text = f"t{x}" + (f", {n}" if name != "CREATE_OBJECT" else "")
        return text, f.types[x] if 0 <= x < len(f.types) else "type index out of range"
    if name in ("ISINSTANCE", "TYPECHECK"):
        return f"t{x}, {n}", ", ".join(f.types[x:x + n])
    if name in ("GET_ATTR", "SET_ATTR"):
        return f"slot {x}", f.attribute_name(pc, x) if name == "GET_ATTR" else ""
    if name in ("TUPLE_CONSTRUCT", "LIST_UNPACK", "FORMAT", "WARN"):
        return f"{x}", ""
    if name == "TUPLE_SLICE":
        return f"{x}, {n}", f"[{x}:{x + n}]"
    if name == "INTERFACE_CALL":
        return f"c{x}, {n}", (short(f.constants[x]) if 0 <= x < len(f.constants) else "")
    if x or n:
        return f"{x}, {n}", ""
    return "", ""


class FunctionView:
    """A Function's tables read once for the disassembler."""

    def __init__(self, f: Function, object_types: List[Any]) -> None:
        self.function = f
        self.name = f.name
        self.operators = f.operators
        self.constants = f.constants
        self.types = f.type_annotations
        self.schema = f.schema
        self.instructions: List[Tuple[int, int, int]] = f.instructions.tolist()
        self.self_slots: Tuple[str, ...] = ()
        if self.schema is not None and self.schema.arguments and \
                self.schema.arguments[0].name == "self":
            wanted = self.schema.arguments[0].type
            for t in object_types:
                if t.name == wanted:
                    self.self_slots = t.attr_names
                    break

    def attribute_name(self, pc: int, slot: int) -> str:
        """``self.<name>`` when the object comes straight from register 1 (``self``)."""
        if pc and self.self_slots and 0 <= slot < len(self.self_slots):
            op, _, x = self.instructions[pc - 1]
            if 0 <= op < len(OPCODES) and OPCODES[op] in ("LOAD", "MOVE") and x == 1:
                return f"self.{self.self_slots[slot]}"
        return ""


def _schema_doc(f: FunctionView) -> Optional[Json]:
    if f.schema is None:
        return None

    def arg(a: Any) -> Json:
        return {"name": a.name, "type": a.type,
                "default": None if a.default is None else short(a.default, 200)}
    return {"arguments": [arg(a) for a in f.schema.arguments],
            "returns": [arg(a) for a in f.schema.returns]}


def disassemble(f: FunctionView) -> Json:
    """Everything ``dis`` shows for one function, as JSON-able data."""
    code = []
    for pc, (op, n, x) in enumerate(f.instructions):
        name = OPCODES[op] if 0 <= op < len(OPCODES) else f"OP#{op}"
        operands, comment = _operands(pc, name, x, n, f)
        code.append({"pc": pc, "op": op, "opcode": name, "x": x, "n": n,
                     "operands": operands, "comment": comment})
    return {
        "name": f.name,
        "signature": f"{f.name}{f.schema if f.schema is not None else '(...)'}",
        "schema": _schema_doc(f),
        "register_size": f.function.register_size,
        "operators": [{"index": k, "name": o.name, "overload": o.overload_name,
                       "full_name": o.full_name, "num_args": o.num_args}
                      for k, o in enumerate(f.operators)],
        "constants": [{"index": k, "repr": short(c, 200)} for k, c in enumerate(f.constants)],
        "type_annotations": list(f.types),
        "instructions": code,
    }


def print_dis(ctx: Context, d: Json) -> None:
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


def cmd_dis(ctx: Context) -> int:
    args = ctx.args
    with open_model(args.path) as m:
        if args.all:
            functions = Methods(m.functions())
        else:
            functions = m.methods
        chosen = list(functions.values()) if args.method is None else \
            functions.find(args.method)
        if not chosen and args.method is not None:
            names = ", ".join(functions) or "none"
            raise CliError(f"no method {args.method!r} (methods: {names})", "not_found",
                           file=args.path)
        types = m.object_types
        docs = [disassemble(FunctionView(f, types)) for f in chosen]
        if not functions:
            others = 0 if args.all else len(m.functions())
            no_methods_note(ctx, args.path, f"--all shows its {others} other functions"
                            if others else "nothing to disassemble")
    if ctx.json:
        ctx.dump({"file": args.path, "functions": docs})
    else:
        for k, d in enumerate(docs):
            if k:
                ctx.print()
            print_dis(ctx, d)
    return EXIT_OK


# ============================================================================ ops

def operator_names(path: str) -> Optional[List[str]]:
    """The operators a model needs, as ``torch.jit.export_opnames`` names them; None
    for a file without methods."""
    with open_model(path) as m:
        if not m.methods:
            return None
        return sorted(m.info()["opname_to_num_args"])


def yaml_scalar(text: str) -> str:
    """A YAML scalar: plain when safe, else double-quoted (JSON escapes are YAML's)."""
    if text and (text[0].isalpha() or text[0] == "_") and all(
            c.isalnum() or c in "_:.-" for c in text) and not text.endswith(":") and \
            text.lower() not in ("true", "false", "yes", "no", "on", "off", "null", "y", "n"):
        return text
    return json.dumps(text)


def cmd_ops(ctx: Context) -> int:
    names: Set[str] = set()
    for path in ctx.args.paths:
        found = operator_names(path)
        if found is None:
            no_methods_note(ctx, path, "it needs no operators")
        names.update(found or ())
    ordered = sorted(names)
    if ctx.json:
        ctx.dump({"files": list(ctx.args.paths), "operators": ordered})
    elif ctx.args.yaml:
        ctx.print("\n".join(f"- {yaml_scalar(n)}" for n in ordered) if ordered else "[]")
    else:
        for name in ordered:
            ctx.print(name)
    return EXIT_OK


# ============================================================================ export

class Progress:
    """A progress bar on stderr (only drawn when asked to, i.e. on a terminal)."""

    def __init__(self, stream: TextIO, total: int, enabled: bool) -> None:
        self.stream = stream
        self.total = max(1, total)
        self.enabled = enabled
        self.done = 0
        self.last = 0.0
        self.drawn = False

    def __call__(self, nbytes: int, name: str) -> None:
        self.done += nbytes
        now = time.monotonic()
        if self.enabled and (now - self.last >= 0.1 or self.done >= self.total):
            self.last = now
            width = shutil.get_terminal_size((80, 24)).columns
            frac = min(1.0, self.done / self.total)
            bar_w = 24
            filled = int(bar_w * frac)
            text = (f"\rexport {frac * 100:5.1f}% [{'#' * filled}{'.' * (bar_w - filled)}] "
                    f"{human(self.done)} / {human(self.total)}  {name}")
            self.stream.write(text[:width - 1].ljust(width - 1))
            self.stream.flush()
            self.drawn = True

    def close(self) -> None:
        if self.drawn:
            self.stream.write("\n")
            self.stream.flush()


def export_format(args: argparse.Namespace) -> str:
    if args.format:
        return str(args.format)
    lower = args.out.lower()
    if lower.endswith(".safetensors"):
        return "safetensors"
    if lower.endswith(".npz"):
        return "npz"
    raise CliError(f"cannot tell the format of {args.out!r}: name it *.safetensors or "
                   "*.npz, or pass --format", "usage", EXIT_USAGE)


def cmd_export(ctx: Context) -> int:
    args = ctx.args
    fmt = export_format(args)
    if os.path.isdir(args.out):
        raise CliError(f"{args.out}: is a directory", "usage", EXIT_USAGE)
    refuse_input_as_output(args.path, args.out)
    from . import __version__
    with open_model(args.path) as m:
        state = m.state_dict()
        records = TensorRecords(m._img())
        entries = _export.plan((name, records.dtype_name(v), v) for name, v in state.items())
        total = sum(e.nbytes for _, e in entries)
        show = args.progress if args.progress is not None else (
            total >= args.progress_threshold and _isatty(ctx.err))
        bar = Progress(ctx.err, total, bool(show))
        try:
            if fmt == "safetensors":
                size = _export.write_safetensors(
                    args.out, entries, {"format": "pt", "producer": f"pyflatmodule {__version__}"},
                    bar)
            else:
                size = _export.write_npz(args.out, entries,
                                         {"producer": f"pyflatmodule {__version__}"}, bar)
        except ValueError as exc:
            raise CliError(str(exc), "unsupported", file=args.path) from None
        except OSError as exc:
            raise write_error(args.out, exc) from None
        finally:
            bar.close()
        listing = []
        for name, e in entries:
            item: Json = {"name": name, "dtype": e.dtype, "shape": list(e.shape),
                          "bytes": e.nbytes}
            if fmt == "safetensors":
                st, shape, _ = _export.safetensors_layout(e)
                item["stored_dtype"], item["stored_shape"] = st, shape
            listing.append(item)
    doc = {"file": args.path, "output": args.out, "format": fmt, "size": size,
           "tensors": len(entries), "bytes": total, "entries": listing}
    if ctx.json:
        ctx.dump(doc)
    else:
        ctx.print(f"{args.out}: {len(entries)} tensors, {total:,} bytes of data, "
                  f"{fmt}, {size:,} bytes")
    return EXIT_OK


def _isatty(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


# ============================================================================ extract

def cmd_extract(ctx: Context) -> int:
    args = ctx.args
    if args.output not in (None, "-"):
        refuse_input_as_output(args.path, args.output)
    with open_model(args.path) as m:
        table: Dict[str, Any] = (
            {k: v.encode("utf-8") for k, v in m.jit_sources.items()} if args.jit_source
            else m.extra_files)
    what = "jit source" if args.jit_source else "extra file"
    if args.name not in table:
        names = ", ".join(repr(n) for n in table) or "none"
        raise CliError(f"no {what} named {args.name!r} ({what}s: {names})", "not_found",
                       file=args.path)
    data: bytes = table[args.name]
    to_stdout = args.output in (None, "-")
    if not to_stdout:
        try:
            with open(args.output, "wb") as f:
                f.write(data)
        except OSError as exc:
            raise write_error(args.output, exc) from None
    if ctx.json:
        import base64
        import hashlib
        doc: Json = {"file": args.path, "name": args.name, "kind": what.replace(" ", "_"),
                     "size": len(data), "sha256": hashlib.sha256(data).hexdigest(),
                     "output": None if to_stdout else args.output}
        if to_stdout:
            doc["content_base64"] = base64.b64encode(data).decode("ascii")
        ctx.dump(doc)
    elif to_stdout:
        ctx.out.flush()
        out = getattr(ctx.out, "buffer", None)
        if out is None:
            ctx.out.write(data.decode("utf-8", "backslashreplace"))
        else:
            out.write(data)
            out.flush()
    return EXIT_OK


# ============================================================================ parser

EXAMPLES = {
    None: """examples:
  pyflatmodule info                          describe the sample model shipped with the package
  pyflatmodule verify models/                check every .ptl/.ff file under models/
  pyflatmodule tree model.ptl --depth 2      the object hierarchy, two levels deep
  pyflatmodule dis model.ptl forward         disassemble a method
  pyflatmodule ops model.ptl --yaml          operator list for a selective build
  pyflatmodule export model.ptl w.safetensors   weights for another runtime
  pyflatmodule extract model.ptl meta.json   one extra file to stdout

exit status: 0 success, 1 invalid/unreadable model, missing name or unwritable output,
2 usage error (including an output that is the input model)
""",
    "info": """examples:
  pyflatmodule info                     describe the sample model shipped with the package
  pyflatmodule info model.ptl           versions, methods, tensors by dtype, extra files
  pyflatmodule info --json a.ff b.ff    one JSON object per file (a list for several)
""",
    "verify": """examples:
  pyflatmodule verify model.ptl         one line per file: OK or INVALID [code] offset, path
  pyflatmodule verify -q models/        recurse into models/, print only invalid files
  find /data -name '*.ptl' | pyflatmodule verify --stats -
  pyflatmodule verify --json a.ff b.ff  {"valid": n, "invalid": n, "files": [...]}

exit status: 0 every file is valid, 1 any is not, 2 usage error
""",
    "tree": """examples:
  pyflatmodule tree model.ptl                 every attribute from the root
  pyflatmodule tree model.ptl --depth 1       the root's attributes only
  pyflatmodule tree model.ptl --filter weight nodes whose path contains "weight"
""",
    "dis": """examples:
  pyflatmodule dis model.ptl                  every method
  pyflatmodule dis model.ptl forward          one method (short or qualified name)
  pyflatmodule dis model.ptl --all            also __setstate__ and other functions

a file without methods (e.g. a parameters file) lists nothing: a note on stderr, exit 0
""",
    "ops": """examples:
  pyflatmodule ops model.ptl                  one operator a line, e.g. aten::add.Tensor
  pyflatmodule ops --yaml a.ptl b.ptl > ops.yaml   union, as a YAML list for a
                                              selective build (SELECTED_OP_LIST)

a file without methods (e.g. a parameters file) needs no operators: a note on stderr,
exit 0
""",
    "export": """examples:
  pyflatmodule export model.ptl weights.safetensors
  pyflatmodule export model.ptl weights.npz
  pyflatmodule export model.ptl out.bin --format safetensors --no-progress

OUT is written to a temporary file beside it, then renamed; OUT may not be the model
itself (nor a link to it): exit 2
""",
    "extract": """examples:
  pyflatmodule extract model.ptl model_info.json          to stdout
  pyflatmodule extract model.ptl model_info.json -o info.json
  pyflatmodule extract model.ptl __torch__ --jit-source   TorchScript source text
""",
}


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> Any:
        self.print_usage(sys.stderr)
        sys.stderr.write(f"{self.prog}: error: {message}\n")
        raise SystemExit(EXIT_USAGE)


def build_parser() -> argparse.ArgumentParser:
    from . import __version__
    fmt = argparse.RawDescriptionHelpFormatter
    common = _Parser(add_help=False)
    common.add_argument("--json", action="store_true",
                        help="machine-readable output (one JSON document on stdout)")
    common.add_argument("--color", choices=("auto", "always", "never"), default="auto",
                        help="colour: auto (terminal and no NO_COLOR), always, never")
    parser = _Parser(prog="pyflatmodule",
                     description="Inspect, verify and convert PyTorch mobile flatbuffer "
                                 "models (.ptl/.ff) without torch.",
                     epilog=EXAMPLES[None], formatter_class=fmt)
    parser.add_argument("--version", action="version", version=f"pyflatmodule {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND",
                                parser_class=_Parser)

    def add(name: str, help_text: str) -> argparse.ArgumentParser:
        p: argparse.ArgumentParser = sub.add_parser(
            name, help=help_text, description=help_text, parents=[common],
            epilog=EXAMPLES[name], formatter_class=fmt)
        return p

    p = add("info", "versions, counts, methods, tensors by dtype, shared storages, extra files")
    p.add_argument("paths", nargs="*", metavar="PATH",
                   help="model files (default: the sample model shipped with the package)")
    p.set_defaults(run=cmd_info)

    p = add("verify", "check model files completely; one line per file")
    p.add_argument("paths", nargs="+", metavar="PATH",
                   help="model files, directories (searched for .ptl/.ff) or - (paths on stdin)")
    p.add_argument("--strict", action="store_true",
                   help="FlatBuffers' own rules (rejects torch's >2 GiB wrapped vtables)")
    p.add_argument("-q", "--quiet", action="store_true", help="print only invalid files")
    p.add_argument("--stats", action="store_true",
                   help="print a count and files/second on stderr at the end")
    p.set_defaults(run=cmd_verify)

    p = add("tree", "the object hierarchy from the root, with every tensor")
    p.add_argument("path", metavar="PATH")
    p.add_argument("--depth", type=int, metavar="N", help="show N levels below the root")
    p.add_argument("--filter", metavar="SUBSTRING",
                   help="only nodes whose dotted path contains SUBSTRING (and their parents)")
    p.set_defaults(run=cmd_tree)

    p = add("dis", "bytecode disassembly with operators, constants, registers and schema")
    p.add_argument("path", metavar="PATH")
    p.add_argument("method", nargs="?", metavar="METHOD",
                   help="qualified (__torch__.Net.forward) or short (forward) name")
    p.add_argument("--all", action="store_true",
                   help="every function in the file, not only the module's methods")
    p.set_defaults(run=cmd_dis)

    p = add("ops", "operators the model needs (as torch.jit.export_opnames)")
    p.add_argument("paths", nargs="+", metavar="PATH", help="model files (the union is printed)")
    p.add_argument("--yaml", action="store_true", help="a YAML list, for a selective build")
    p.set_defaults(run=cmd_ops)

    p = add("export", "every state_dict() tensor to .safetensors or .npz, streaming")
    p.add_argument("path", metavar="PATH")
    p.add_argument("out", metavar="OUT", help="output file: *.safetensors or *.npz")
    p.add_argument("--format", choices=("safetensors", "npz"),
                   help="output format (default: from OUT's extension)")
    p.add_argument("--progress", dest="progress", action="store_true", default=None,
                   help="always draw a progress bar on stderr")
    p.add_argument("--no-progress", dest="progress", action="store_false",
                   help="never draw one (default: on a terminal, for models over 64 MiB)")
    p.add_argument("--progress-threshold", type=int, default=64 << 20, help=argparse.SUPPRESS)
    p.set_defaults(run=cmd_export)

    p = add("extract", "one extra file's bytes, to stdout or a file")
    p.add_argument("path", metavar="PATH")
    p.add_argument("name", metavar="NAME", help="extra file name (see `info`)")
    p.add_argument("-o", "--output", metavar="FILE", help="write to FILE (default: stdout)")
    p.add_argument("--jit-source", action="store_true",
                   help="NAME is a TorchScript source file (e.g. __torch__), not an extra file")
    p.set_defaults(run=cmd_extract)
    return parser


def _file_of(args: argparse.Namespace) -> Optional[str]:
    path = getattr(args, "path", None)
    if path is not None:
        return str(path)
    paths = getattr(args, "paths", None)
    return str(paths[0]) if paths and len(paths) == 1 else None


def main(argv: Optional[List[str]] = None) -> int:
    """Run the command line; returns the exit status."""
    for stream in (sys.stdout, sys.stderr):
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None:
            try:
                reconfigure(errors="backslashreplace")
            except (ValueError, OSError):
                pass
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as e:
        return e.code if isinstance(e.code, int) else EXIT_USAGE
    ctx = Context(args)
    try:
        status: int = args.run(ctx)
        ctx.out.flush()
        return status
    except BrokenPipeError:
        # the reader went away (e.g. `| head`): stop quietly, like other Unix tools
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
        except (OSError, ValueError, AttributeError):
            pass
        return EXIT_FAIL
    except KeyboardInterrupt:
        ctx.err.write("pyflatmodule: interrupted\n")
        return 130
    except CliError as e:
        report(ctx, _file_of(args), e)
        return e.status
    except (FormatError, OSError) as e:
        report(ctx, _file_of(args), e)
        return EXIT_FAIL
    except Exception as e:
        if os.environ.get("PYFLATMODULE_DEBUG"):
            raise
        report(ctx, _file_of(args), e)
        return EXIT_FAIL
