"""``pyflatmodule export``: every ``state_dict()`` tensor to .safetensors or .npz, streaming."""
from __future__ import annotations

import argparse
import time
from typing import Any, Dict, TextIO, Tuple

from .. import __version__
from ..files import file_format
from .common import (
    EXIT_OK,
    EXIT_USAGE,
    CliError,
    Context,
    Json,
    add_names,
    human,
    isatty,
    read_reference,
    refuse_input_as_output,
    refuse_special_output,
    write_error,
)
from .formats import open_file
from .formats.base import Tensor

HELP = "every state_dict() tensor to .safetensors or .npz, streaming"

EXAMPLES = """examples:
  pyflatmodule export model.ptl weights.safetensors
  pyflatmodule export model.ptl weights.npz
  pyflatmodule export model.ptl out.bin --format safetensors --no-progress
  pyflatmodule export model.pte w.safetensors --names model.etrecord
                                   the module's names for the program's tensors, found by
                                   content in the ETRecord's state dict (or in a
                                   .safetensors / .npz of the module's state_dict())

OUT is written to a temporary file beside it, then renamed; OUT may not be the model
itself (nor a link to it): exit 2
"""


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The command's arguments."""
    p.add_argument("path", metavar="PATH")
    p.add_argument("out", metavar="OUT", help="output file: *.safetensors or *.npz")
    p.add_argument("--format", choices=("safetensors", "npz"),
                   help="output format (default: from OUT's extension)")
    p.add_argument("--progress", dest="progress", action="store_true", default=None,
                   help="always draw a progress bar on stderr")
    p.add_argument("--no-progress", dest="progress", action="store_false",
                   help="never draw one (default: on a terminal, for models over 64 MiB)")
    p.add_argument("--progress-threshold", type=int, default=64 << 20, help=argparse.SUPPRESS)
    add_names(p)


def _named(tensors: Dict[str, Tensor], stored: Dict[str, Json], reference: str, file: Any
           ) -> Tuple[Dict[str, Tensor], Dict[str, Json]]:
    """The tensors under the reference's names where its values are theirs, the rest as
    they are (:func:`pyflatmodule.naming.renamed`); the metadata says which is which."""
    from ..naming import names_by_debug_handle, renamed
    ref = read_reference(reference)
    out, how = renamed(tensors, ref, names_by_debug_handle(file, ref))
    return out, {new: {**stored.get(h["name_in_file"], {}), **h} for new, h in how.items()}


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
            import shutil  # drawn on a terminal alone: not loaded with the command line
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
    """The output format: ``--format``, else OUT's extension."""
    if args.format:
        return str(args.format)
    lower = args.out.lower()
    if lower.endswith(".safetensors"):
        return "safetensors"
    if lower.endswith(".npz"):
        return "npz"
    raise CliError(f"cannot tell the format of {args.out!r}: name it *.safetensors or "
                   "*.npz, or pass --format", "usage", EXIT_USAGE)


def run(ctx: Context) -> int:
    """Write every state_dict() tensor to OUT."""
    from .. import export as exporting  # the writers: only for this command
    args = ctx.args
    fmt = export_format(args)
    refuse_special_output(args.out)
    refuse_input_as_output(args.path, args.out)
    with open_file(args.path, args.data) as f:
        missing = f.missing_data()
        if missing:
            shown = ", ".join(repr(k) for k in missing[:8]) + (", ..." if len(missing) > 8 else "")
            raise CliError(f"{len(missing)} tensors or named data of the program are in none "
                           f"of the files given ({shown}): pass the .ptd that holds them with "
                           f"--data", "missing_data", file=args.path)
        tensors, stored = f.tensors(), f.stored_layouts()
        if args.names:
            tensors, stored = _named(tensors, stored, args.names, f.file)
        entries = exporting.plan(tensors.items(), f.dtype_name, stored)
        total = sum(e.nbytes for _, e in entries)
        show = args.progress if args.progress is not None else (
            total >= args.progress_threshold and isatty(ctx.err))
        bar = Progress(ctx.err, total, bool(show))
        try:
            if fmt == "safetensors":
                size = exporting.write_safetensors(
                    args.out, entries, {"format": "pt", "producer": f"pyflatmodule {__version__}"},
                    bar)
            else:
                size = exporting.write_npz(args.out, entries,
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
                st, shape, _ = exporting.safetensors_layout(e)
                item["stored_dtype"], item["stored_shape"] = st, shape
            listing.append(item)
    if ctx.json:
        ctx.dump({"files": [{"file": args.path, "format": file_format(args.path),
                             "output": args.out, "output_format": fmt, "size": size,
                             "tensors": len(entries), "bytes": total, "entries": listing}]})
    else:
        ctx.print(f"{args.out}: {len(entries)} tensors, {total:,} bytes of data, "
                  f"{fmt}, {size:,} bytes")
    return EXIT_OK
