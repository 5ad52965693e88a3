"""What every command of the command line shares: exit statuses, styling, the
context a command runs in, one-line and JSON error reports, opening a model, and the
description of one tensor."""
from __future__ import annotations

import argparse
import json
import math
import os
import sys
from typing import Any, Dict, Optional, Sequence, TextIO, Union

import numpy as np

from ..core.dtypes import DTYPE_NAMES, QuantizedTensor, numpy_dtype
from ..errors import FormatError
from ..executorch import DataFile, Program
from ..files import file_format, load
from ..ptmf import Module, TensorRecord

SAMPLE = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "data",
                      "sample.ptl")
MODEL_SUFFIXES = (".ptl", ".ff", ".pte", ".ptd")

EXIT_OK, EXIT_FAIL, EXIT_USAGE = 0, 1, 2

Json = Dict[str, Any]
Tensor = Union[np.ndarray, QuantizedTensor]


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


def open_model(path: str, data: Sequence[str] = ()) -> Union[Module, Program, DataFile]:
    """``load(path)``: a PTMF Module, an ExecuTorch Program or DataFile (with ``data``,
    the data files holding a program's external tensors)."""
    for p in (path, *data):
        if os.path.isdir(p):
            raise IsADirectoryError(21, "is a directory", p)
    if data and file_format(path) != "pte":
        raise CliError("--data is for ExecuTorch programs (.pte)", "usage", EXIT_USAGE,
                       file=path)
    try:
        return load(path, data=data)
    except ValueError as e:   # FormatError is one too: only data= misuse is ours
        if isinstance(e, FormatError):
            raise
        raise CliError(str(e), "usage", EXIT_USAGE, file=path) from None


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


def isatty(stream: TextIO) -> bool:
    """Whether ``stream`` is a terminal (False for streams that cannot tell)."""
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


# torch's name for each numpy dtype a plain tensor can have. ml_dtypes' types (bfloat16,
# float8_*) are left out: their numpy names are torch's, and listing them here would
# import ml_dtypes, a large part of every command's start-up, for files without them.
_NATURAL: Dict[np.dtype, str] = {}
for _i, _name in enumerate(DTYPE_NAMES):
    if not _name.startswith(("q", "bits", "float4", "bfloat16", "float8")) and not (
            _name[-1].isdigit() and _name.rstrip("1234567") in ("int", "uint")):
        _NATURAL.setdefault(numpy_dtype(_i), _name)


def dtype_name(m: Module, value: Tensor) -> str:
    """torch's dtype name for a tensor taken from ``m``: a few torch dtypes share a
    numpy dtype (``uint8``, ``bits8``, ``uint3``...), the record tells them apart."""
    if isinstance(value, QuantizedTensor):
        return value.dtype_name
    record = m.tensor_record(value)
    if record is not None:
        return record.dtype
    return _NATURAL.get(value.dtype, str(value.dtype))


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
               "dtype": record.dtype if record is not None else dtype_name(m, value),
               "shape": [int(n) for n in value.shape], "bytes": int(value.nbytes)}
    if record is not None:
        out["storage"] = record.storage
        out["storage_offset"] = record.storage_offset
        out["strides"] = list(record.strides)
        out["requires_grad"] = record.requires_grad
    else:
        out["storage"] = None
    return out
