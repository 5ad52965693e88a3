"""The command line run in-process through ``pyflatmodule.cli.main(argv)``, its standard
streams swapped for in-memory ones (none of them a terminal, as under a pipe)."""
from __future__ import annotations

import io
import sys
from typing import NamedTuple

from pyflatmodule.cli import main


class CliRun(NamedTuple):
    """What one run returned and printed (stdout also as the bytes written)."""
    returncode: int
    stdout: str
    stderr: str
    stdout_bytes: bytes


def run_cli(*argv: str, stdin: str = "") -> CliRun:
    """``pyflatmodule ARGV...`` with ``stdin`` as its standard input."""
    out_bytes, err_bytes = io.BytesIO(), io.BytesIO()
    out = io.TextIOWrapper(out_bytes, encoding="utf-8", newline="")
    err = io.TextIOWrapper(err_bytes, encoding="utf-8", newline="")
    saved = sys.stdin, sys.stdout, sys.stderr
    sys.stdin, sys.stdout, sys.stderr = io.StringIO(stdin), out, err
    try:
        status = main(list(argv))
        out.flush()
        err.flush()
    finally:
        sys.stdin, sys.stdout, sys.stderr = saved
    raw = out_bytes.getvalue()
    return CliRun(status, raw.decode("utf-8", "replace"), err_bytes.getvalue().decode("utf-8"),
                  raw)
