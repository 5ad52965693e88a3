"""The command line run in-process through ``pyflatmodule.cli.main(argv)``, its standard
streams swapped for in-memory ones (none of them a terminal, as under a pipe)."""
from __future__ import annotations

import io
import json
import sys
from typing import Any, NamedTuple

from pyflatmodule.cli import main

from .schemas import has_schema, validate


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


def reads_in_both(command: str, path: str) -> Any:
    """``command PATH`` succeeds as text and as ``--json``; the JSON document, parsed
    (strict JSON, and following the command's schema)."""
    text = run_cli(command, path)
    assert text.returncode == 0, text.stderr
    as_json = run_cli(command, "--json", path)
    assert as_json.returncode == 0, as_json.stderr
    doc = json.loads(as_json.stdout, parse_constant=_bare)
    if has_schema(command):
        validate(doc, command)
    return doc


def file_doc(command: str, *argv: str) -> Any:
    """``command --json ARGV...`` succeeds; its one file's document (strict JSON,
    following the command's schema)."""
    r = run_cli(command, "--json", *argv)
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout, parse_constant=_bare)
    validate(doc, command)
    (one,) = doc["files"]
    return one


def _bare(constant: str) -> None:
    raise AssertionError(f"bare {constant} in JSON")
