"""The generic layer names no format, and every format owns its block of status codes.

csrc/fb/ and pyflatmodule/core/ stand under every format: no identifier, comment or
message there names one (PTMF, ExecuTorch, XNNPACK, their prefixes, magics and file
extensions). Status codes come in blocks, one per owner, numbered from a base the owner's
header declares and listed by csrc/build.py: every code has a name and a message, names
are unique, and no two blocks share a number.
"""
from __future__ import annotations

import glob
import importlib.util
import os
import re
import sys
from typing import Any, Dict, List, Tuple

import pytest

from pyflatmodule.core.native import ffi, lib, status_codes

from support.paths import CSRC, ROOT

GENERIC = sorted(glob.glob(os.path.join(CSRC, "fb", "*"))
                 + glob.glob(os.path.join(ROOT, "pyflatmodule", "core", "*.py"))
                 + glob.glob(os.path.join(ROOT, "pyflatmodule", "core", "*.pyi")))

#: A word naming a format: its name or its C prefixes (PTMF, ptmf_, MOBILE_, ExecuTorch,
#: ET_, et_, FT_, XN_, XNNPACK, xnn_), the magics before or in its flatbuffers, its file
#: extensions, and PTMF's values (ivalues).
FORMAT_WORD = re.compile(r"""
    \b(?:ptmf|xnn|mobile|executorch)\w*
  | \b(?:et|ft|xn)_\w*
  | \b(?:et12|ft01|xn0\d|eh00|fh01|xh00)\b
  | \.pt[eld]\b
  | \bivalues?\b
""", re.I | re.X)


def format_words(text: str) -> List[str]:
    """The words of `text` that name a format."""
    return [m.group() for m in FORMAT_WORD.finditer(text)]


@pytest.mark.parametrize("line, named", [
    ("typedef fb_options ptmf_options;", ["ptmf_options"]),
    ("/* ExecuTorch's extended header */", ["ExecuTorch"]),
    ("    if (rc == ET_E_BAD_HEADER) return rc;", ["ET_E_BAD_HEADER"]),
    ("# blockwise weights (XNNPACK's)", ["XNNPACK"]),
    ("st = lib.MOBILE_I_VALUE_UNION_NONE", ["MOBILE_I_VALUE_UNION_NONE"]),
    ("uint64_t n = et_element_size(t);", ["et_element_size"]),
    ('raise TypeError("cannot load a PTMF model")', ["PTMF"]),
    ("/* the eh00 header of a .pte */", ["eh00", ".pte"]),
    ("fb_options opt;  /* the format's header, its values and offsets */", []),
    ("set_value(x); reset_budget(c); offset += 4;", []),
])
def test_the_check_finds_a_format_named(line: str, named: List[str]) -> None:
    assert format_words(line) == named


@pytest.mark.parametrize("path", GENERIC, ids=lambda p: os.path.relpath(p, ROOT))
def test_the_generic_layer_names_no_format(path: str) -> None:
    with open(path, encoding="utf-8") as f:
        found = [(n, w) for n, line in enumerate(f, 1) for w in format_words(line)]
    assert not found, f"{os.path.relpath(path, ROOT)} names a format: {found}"


def test_the_generic_files_are_there() -> None:
    names = {os.path.relpath(p, ROOT) for p in GENERIC}
    assert {"csrc/fb/fb_common.h", "csrc/fb/fb.h", "csrc/fb/fb_verify.c",
            "pyflatmodule/core/native.py", "pyflatmodule/core/dtypes.py"} <= names


# ------------------------------------------------------------------ status blocks

def _blocks() -> List[Any]:
    out, i = [], 0
    while lib.fb_status_block_at(i) != ffi.NULL:
        out.append(lib.fb_status_block_at(i))
        i += 1
    return out


def _name(code: int) -> str:
    return str(ffi.string(lib.fb_status_name(code)).decode("ascii"))


def test_every_status_code_has_a_name_and_a_message() -> None:
    names: Dict[str, int] = {}
    for code in status_codes():
        name = _name(code)
        message = ffi.string(lib.fb_strerror(code)).decode("utf-8")
        assert re.fullmatch(r"[A-Z][A-Z0-9]*_(?:OK|E_[A-Z0-9_]+)", name), (code, name)
        assert message and message != "unknown status", (code, name)
        assert names.setdefault(name, code) == code, f"{name} names {names[name]} and {code}"
        assert getattr(lib, name) == code   # the cdef declares it with the compiler's value
    assert names["FB_OK"] == lib.FB_OK == 0


def test_a_number_outside_every_block_is_unknown() -> None:
    past = max(status_codes()) + 1
    for code in (-1, past):
        assert _name(code) == "FB_E_UNKNOWN"
        assert ffi.string(lib.fb_strerror(code)) == b"unknown status"


def test_the_blocks_do_not_overlap_and_each_has_one_owner() -> None:
    blocks = sorted(_blocks(), key=lambda b: b.base)
    spans: List[Tuple[int, int]] = [(b.base, b.base + b.count) for b in blocks]
    assert all(count > 0 for count in (b.count for b in blocks))
    assert all(a_end <= b_start for (_, a_end), (b_start, _) in zip(spans, spans[1:]))
    prefixes = []
    for b in blocks:
        owners = {_name(c).split("_", 1)[0] for c in range(b.base, b.base + b.count)}
        assert len(owners) == 1, owners
        prefixes += owners
    assert len(prefixes) == len(set(prefixes))
    assert {"FB", "PTMF", "ET"} <= set(prefixes)


def _builder() -> Any:
    spec = importlib.util.spec_from_file_location("csrc_build", os.path.join(CSRC, "build.py"))
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("csrc_build", module)
    spec.loader.exec_module(module)
    return module


def test_every_block_a_header_declares_is_compiled_in() -> None:
    """What csrc/build.py finds in the headers (it lists nothing by hand) is what the
    core holds; the generic folder declares the generic block alone, and only it."""
    build = _builder()
    declared = build.status_blocks(build.TEXTS)
    compiled = {b.base: [_name(c) for c in range(b.base, b.base + b.count)] for b in _blocks()}
    assert {b.base: b.names for b in declared} == compiled
    for path, text in build.TEXTS.items():
        for prefix in re.findall(r"^#define (\w+)_STATUS_TABLE\(X\)", text, re.M):
            generic = os.path.relpath(path, CSRC).split(os.sep)[0] == "fb"
            assert generic == (prefix == "FB"), f"{prefix}'s block is declared in {path}"


def test_the_builder_refuses_overlapping_blocks() -> None:
    build = _builder()
    texts = {"a.h": "#define A_STATUS_BASE 100\n#define A_STATUS_TABLE(X) \\\n"
                    "    X(A_E_X, \"x\") \\\n    X(A_E_Y, \"y\")\n",
             "b.h": "#define B_STATUS_BASE 101\n#define B_STATUS_TABLE(X) X(B_E_Z, \"z\")\n"}
    assert [b.names for b in build.status_blocks({"a.h": texts["a.h"]})] == [["A_E_X", "A_E_Y"]]
    with pytest.raises(ValueError, match="overlap"):
        build.status_blocks(texts)
