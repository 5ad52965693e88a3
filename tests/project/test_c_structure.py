"""The schema does the structure: the C format files keep only what their formats mean.

The generic layer (csrc/fb/) reads every field through its descriptor and locates every
error from the descriptors' own names (fields, union members, element indices); a
format's file (csrc/ptmf/*.c, csrc/executorch/*.c) says what its values mean. These
checks read the sources, so that the bookkeeping the descriptors made redundant does not
come back.
"""
from __future__ import annotations

import glob
import os
import re
from typing import Dict, List, Tuple

from support.paths import CSRC

FORMAT_FILES = sorted(glob.glob(os.path.join(CSRC, "ptmf", "*.c"))
                      + glob.glob(os.path.join(CSRC, "executorch", "*.c")))

#: at most this many lines of hand-written path bookkeeping across the format files
#: (227 before the descriptors located errors; 75 before the gate's checks of operator
#: names and external tensor names, each a region of several reads; 77 before the
#: compile specs each delegate carries)
BOOKKEEPING_LIMIT = 78

_BOOKKEEPING = re.compile(r"\b(?:fb_)?(?:push|pop)\w*\s*\(|\b(?:FB_)?TRY_IN\w*\s*\(|\"\.\w")


def _code_lines(path: str) -> List[Tuple[int, str]]:
    """The file's lines with comments blanked (string literals kept)."""
    with open(path, encoding="utf-8") as f:
        text = f.read()
    text = re.sub(r"/\*.*?\*/", lambda m: re.sub(r"[^\n]", " ", m.group()), text, flags=re.S)
    text = re.sub(r"//[^\n]*", "", text)
    return list(enumerate(text.split("\n"), 1))


def bookkeeping_lines() -> Dict[str, List[int]]:
    """Lines of path bookkeeping written by hand in each format file, by line number.

    A line counts when, outside comments, it calls the path stack's push or pop (any
    ``push*(`` or ``pop*(``, ``fb_`` prefixed or not), opens a located region (a
    ``FB_TRY_IN*(`` macro, ``FB_`` prefixed or not: a segment pushed around a call,
    popped when it succeeds, a descriptor's name or not), or spells a path segment as a
    string literal (a literal starting with ``.`` and a name, as ``".sizes"``). A read
    or a failure located by its descriptor (``fb_fld_*_at``, ``fb_at_field``,
    ``fb_at_member``, ``fb_fail_at``) does not count: it names the field it reads or
    checks, which the statement needs anyway.
    """
    out: Dict[str, List[int]] = {}
    for path in FORMAT_FILES:
        hits = [n for n, line in _code_lines(path) if _BOOKKEEPING.search(line)]
        if hits:
            out[os.path.relpath(path, CSRC)] = hits
    return out


def test_path_bookkeeping_stays_within_its_limit() -> None:
    lines = bookkeeping_lines()
    total = sum(len(v) for v in lines.values())
    assert total <= BOOKKEEPING_LIMIT, f"{total} lines of path bookkeeping: {lines}"


def test_the_count_sees_bookkeeping(tmp_path: object) -> None:
    sample = ['push(c, "ivalues", i);', "TRY_IN_FIELD(c, f, i, one(c));", 'x(".sizes");',
              "fb_pop(c);", "TRY(fld_vec_at(c, t, f, &v));", "/* push(c, x) */",
              'return fail_at(c, f, i, FB_E_BAD_INDEX, at);']
    assert [bool(_BOOKKEEPING.search(s)) for s in sample] == [
        True, True, True, True, False, True, False]   # comments are blanked before


#: the only FB_E_MISSING_FIELD failures a format file may raise itself, by function:
#: fields a value's meaning requires, which no schema attribute can say
_CONDITIONAL_REQUIREMENTS = {
    "ptmf/ptmf_tensor.c": {"walk_qparams"},           # per-channel parameters need both tensors
    # an external tensor needs its name; an operator a kernel call names needs its name
    "executorch/et.c": {"extra_tensor_info", "used_operators_named"},
}


def _functions_failing_missing(path: str) -> List[str]:
    """The functions of a C file that name FB_E_MISSING_FIELD (outside comments)."""
    names, current = [], ""
    for _, line in _code_lines(path):
        m = re.match(r"(?:static\s+)?(?:inline\s+)?\w[\w\s\*]*?\b(\w+)\s*\([^;]*$", line)
        if m and not line.startswith((" ", "\t")):
            current = m.group(1)
        if "FB_E_MISSING_FIELD" in line:
            names.append(current)
    return names


def test_no_hand_check_that_a_required_field_is_present() -> None:
    """Missing required fields are refused by the readers from the descriptors (`required`
    in the schema: fb_fld_table, fb_union_open); the format files name FB_E_MISSING_FIELD
    only where the requirement depends on another value, and open no union by hand."""
    for path in FORMAT_FILES:
        rel = os.path.relpath(path, CSRC)
        allowed = _CONDITIONAL_REQUIREMENTS.get(rel, set())
        assert set(_functions_failing_missing(path)) <= allowed, rel
        assert not any("fld_union(" in line for _, line in _code_lines(path)), \
            f"{rel} opens a union by hand: use fb_union_open"
