"""What every command of the command line shares: exit statuses, styling, the
context a command runs in, one-line and JSON error reports, outputs that must not be
the input, plain JSON values."""
from __future__ import annotations

import argparse
import collections
import json
import math
import os
import stat
import sys
from typing import (
    TYPE_CHECKING,
    Any,
    Callable,
    Deque,
    Dict,
    Iterable,
    Iterator,
    Mapping,
    Optional,
    Sequence,
    TextIO,
    TypeVar,
)

from ..errors import FormatError, RemoteError
from ..files import file_format, is_remote, list_prefix

if TYPE_CHECKING:
    from ..naming import ModuleTensors

SAMPLE = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "data",
                      "sample.ptl")
MODEL_SUFFIXES = (".ptl", ".ff", ".pte", ".ptd", ".bpte", ".etdump", ".etdp")

EXIT_OK, EXIT_FAIL, EXIT_USAGE = 0, 1, 2

Json = Dict[str, Any]


class CliError(Exception):
    """A failure to report in one line (``status`` 1) or a usage error (2)."""

    def __init__(self, message: str, code: str = "error", status: int = EXIT_FAIL,
                 file: Optional[str] = None, offset: Optional[int] = None,
                 path: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.code = code
        self.status = status
        self.file = file
        #: where in ``file`` the fault is, when it is one of a file's bytes
        self.offset = offset
        self.path = path


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
        """Write ``doc`` as strict JSON (non-finite floats as the strings "inf", "-inf",
        "nan")."""
        json.dump(strict_json(doc), self.out, indent=2, ensure_ascii=False, allow_nan=False)
        self.out.write("\n")


def error_doc(file: Optional[str], exc: BaseException) -> Json:
    """The ``error`` object of the JSON outputs."""
    if isinstance(exc, FormatError):
        return {"file": file, "code": exc.code, "message": exc.reason,
                "offset": exc.offset, "path": exc.path}
    if isinstance(exc, CliError):
        return {"file": exc.file or file, "code": exc.code, "message": exc.message,
                "offset": exc.offset, "path": exc.path}
    if isinstance(exc, RemoteError):
        return {"file": exc.url, "code": "remote_error", "message": exc.reason,
                "offset": None, "path": ""}
    if isinstance(exc, OSError):
        return {"file": file or exc.filename, "code": "io_error",
                "message": exc.strerror or str(exc), "offset": None, "path": ""}
    return {"file": file, "code": "internal_error",
            "message": f"{type(exc).__name__}: {exc}", "offset": None, "path": ""}


#: What a file of a format is called in an error, by its format: a model but for these.
_CALLED = {"ptd": "data file", "etdump": "ETDump", "unknown": "file"}


def invalid(file: Optional[str], exc: FormatError) -> str:
    """``invalid model: MESSAGE [CODE]``, the file called as its format has it (a data
    file, an ETDump; a file of no format read here is a file)."""
    try:
        called = _CALLED.get(file_format(file), "model") if file else "file"
    except OSError:
        called = "file"
    return f"invalid {called}: {exc} [{exc.code}]"


def error_line(file: Optional[str], exc: BaseException) -> str:
    """One line describing what is wrong with ``file``."""
    prefix = f"{file}: " if file else ""
    if isinstance(exc, FormatError):
        return prefix + invalid(file, exc)
    if isinstance(exc, CliError):
        return f"{exc.file + ': ' if exc.file else prefix}{exc.message}"
    if isinstance(exc, RemoteError):
        return f"{exc.url}: {exc.reason}"
    if isinstance(exc, OSError):
        named = f"{exc.filename}: " if not file and exc.filename else prefix
        return f"{named}{exc.strerror or exc}"
    return (f"{prefix}internal error: {type(exc).__name__}: {exc} "
            "(please report it; PYFLATMODULE_DEBUG=1 shows the traceback)")


def report(ctx: Context, file: Optional[str], exc: BaseException) -> None:
    """An error on stderr: one line, or one JSON document with ``--json``."""
    if ctx.json:
        ctx.err.write(json.dumps({"error": error_doc(file, exc)}, ensure_ascii=False) + "\n")
    else:
        ctx.err.write(ctx.err_style("pyflatmodule: ", "bold") + error_line(file, exc) + "\n")


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


def refuse_special_output(output: str) -> None:
    """A usage error when ``output`` exists and is not a regular file (a directory, FIFO,
    device or socket): the writer would replace it with a regular file."""
    try:
        mode = os.stat(output).st_mode
    except OSError:
        return          # no such output yet
    if not stat.S_ISREG(mode):
        kind = next((k for test, k in ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"),
                                       (stat.S_ISCHR, "a character device"),
                                       (stat.S_ISBLK, "a block device"),
                                       (stat.S_ISSOCK, "a socket")) if test(mode)), "special")
        raise CliError(f"is {kind}, not a regular file; refusing to replace it", "usage",
                       EXIT_USAGE, file=output)


def write_error(output: str, exc: OSError) -> CliError:
    """An output that cannot be written, reported under its own name (not the model's)."""
    return CliError(f"cannot write: {exc.strerror or exc}", "io_error", file=output)


def no_methods(path: str, what: str) -> CliError:
    """What the commands that read code (``ops``, ``dis``, ``memory``) say of a file
    without methods (a data file, an ETDump, a parameters file written by
    ``torch._C._save_parameters``): an empty answer would pass for one, so each ends
    with exit status 1, as for a method that is not there."""
    return CliError(f"holds no methods; {what}", "no_methods", file=path)


def note_no_methods(ctx: Context, path: str, what: str) -> int:
    """For ``ops`` and ``dis``, whose ``--json`` keeps one entry per file: say on stderr
    (text output; JSON says it with an empty entry) that ``path`` holds no methods, and
    return the exit status the command ends with (1)."""
    if not ctx.json:
        ctx.err.write(ctx.err_style("pyflatmodule: ", "bold") +
                      error_line(None, no_methods(path, what)) + "\n")
    return EXIT_FAIL


def human(n: float) -> str:
    """Bytes in KiB/MiB/GiB."""
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n} B"


def strict_json(doc: Any) -> Any:
    """``doc`` with every non-finite float replaced by its name ("inf", "-inf", "nan"):
    JSON has no such numbers."""
    if isinstance(doc, float):
        return doc if math.isfinite(doc) else str(doc)
    if isinstance(doc, dict):
        return {k: strict_json(v) for k, v in doc.items()}
    if isinstance(doc, (list, tuple)):
        return [strict_json(v) for v in doc]
    return doc


def json_value(value: Any) -> Any:
    """``value`` as JSON when it is plain data (numbers, strings, lists...), else None."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
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


T = TypeVar("T")
R = TypeVar("R")


def in_order(work: Callable[[T], R], items: Iterable[T], jobs: int) -> Iterator[R]:
    """``work`` of each item, ``jobs`` at a time on threads, yielded in the items' order;
    at most ``4 * jobs`` items are taken ahead of the one yielded (a list of a million
    URLs on stdin is read as it is checked)."""
    if jobs <= 1:
        yield from map(work, items)
        return
    import concurrent.futures  # only for -j
    with concurrent.futures.ThreadPoolExecutor(jobs) as pool:
        pending: Deque["concurrent.futures.Future[R]"] = collections.deque()
        for item in items:
            pending.append(pool.submit(work, item))
            if len(pending) >= 4 * jobs:
                yield pending.popleft().result()
        while pending:
            yield pending.popleft().result()


def expand_paths(paths: Sequence[str]) -> Iterator[str]:
    """Files to check: ``-`` reads paths from stdin (one a line), directories are
    searched recursively for model files, and URL prefixes (ending in ``/``) listed;
    anything else is taken as is."""
    for path in paths:
        if path == "-":
            for line in sys.stdin:
                line = line.rstrip("\r\n")
                if line:
                    yield line
        elif is_remote(path) and path.endswith("/"):
            yield from list_prefix(path, MODEL_SUFFIXES)
        elif os.path.isdir(path):
            for root, dirs, files in os.walk(path):
                dirs.sort()
                for name in sorted(files):
                    if name.lower().endswith(MODEL_SUFFIXES):
                        yield os.path.join(root, name)
        else:
            yield path


def add_jobs(p: argparse.ArgumentParser) -> None:
    """``-j/--jobs``: files read at once."""
    p.add_argument("-j", "--jobs", type=_jobs, default=1, metavar="N",
                   help="files read at once (threads; for URLs, also the most connections "
                        "open at once); results keep the order given")


def _jobs(text: str) -> int:
    n = int(text)
    if not 1 <= n <= 256:
        raise argparse.ArgumentTypeError(f"--jobs must be between 1 and 256, not {n}")
    return n


def add_names(p: argparse.ArgumentParser) -> None:
    """``--names REF`` (also ``--etrecord REF``): the module's names for the file's
    tensors."""
    p.add_argument("--names", "--etrecord", dest="names", metavar="REF",
                   help="name the file's tensors as the module does where the file does not: "
                        "REF is the program's ETRecord, or a .safetensors or .npz of the "
                        "module's state_dict(); a tensor takes the name of the one tensor "
                        "of REF holding exactly its values (in any axis order)")


def read_reference(path: str) -> ModuleTensors:
    """The module's tensors ``--names`` gives (:func:`pyflatmodule.naming.reference_tensors`);
    CliError ``bad_reference`` when they cannot be read."""
    from ..naming import reference_tensors  # naming: only with --names
    try:
        return reference_tensors(path)
    except (ValueError, KeyError) as exc:
        why = str(exc)
        why = why[len(path) + 2:] if why.startswith(f"{path}: ") else why
        raise CliError(f"not a reference of the module's tensors (an ETRecord, .safetensors "
                       f"or .npz): {why}", "bad_reference", file=path) from None


def names_for(tensors: Mapping[str, Any], reference: str, file: Any) -> Dict[str, str]:
    """The module's name of each of ``tensors`` (those of ``file``, the opened file)
    the reference at ``reference`` names, by its name in the file: a program's
    constants by where it uses them first, with an ETRecord
    (:func:`pyflatmodule.naming.names_by_debug_handle`), then by their values
    (:func:`pyflatmodule.naming.module_names`). Reading the tensors reads their bytes
    (a remote file's are fetched): call it only when ``--names`` is given."""
    from ..naming import module_names, names_by_debug_handle
    ref = read_reference(reference)
    return module_names(tensors, ref, names_by_debug_handle(file, ref))


def add_module_names(doc: Any, names: Mapping[str, str], key: str) -> None:
    """Give every object in ``doc`` (JSON, walked in place) whose ``key`` is a tensor's
    name in the file that ``names`` maps its ``module_name``."""
    if isinstance(doc, list):
        for item in doc:
            add_module_names(item, names, key)
    elif isinstance(doc, dict):
        name = doc.get(key)
        if isinstance(name, str) and name in names:
            doc["module_name"] = names[name]
        for value in doc.values():
            if isinstance(value, (list, dict)):
                add_module_names(value, names, key)
