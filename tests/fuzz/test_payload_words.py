"""Delegate payloads with one 4-byte word damaged: every backend's reader, on every
test program that holds its payloads, reads the program in full or refuses it with a
well-formed FormatError, never anything else.

The single-byte sweep edits each byte of each file once; offsets and counts inside a
payload are 4-byte words, whose worst values (past the end, the largest positive, one,
zero) one byte seldom reaches. Each payload's first 32 words (headers, root offsets,
vtables) and 32 more spread over the rest are set to each value, and the whole program is
loaded and decoded (``decode_all.outcome``, the sweep's judge)."""
from __future__ import annotations

import os
import struct
from typing import List, Tuple

import pytest

import pyflatmodule as pfm
from pyflatmodule.executorch.backends import MODULES

from support.decode_all import outcome
from support.paths import ET

#: The values each word is set to: past any end, the largest positive, one, zero.
VALUES = (0xFFFFFFF0, 0x7FFFFFFF, 1, 0)
#: Words of each payload damaged: its first ones, and as many more spread over the rest.
HEAD_WORDS = 32
SPREAD_WORDS = 32


def _payloads(path: str) -> List[Tuple[str, int, int]]:
    """(delegate, file offset, size) of each payload a registered backend reads."""
    out = []
    with pfm.load(path) as p:
        for m in p.methods.values():
            for d in m.delegates:
                if d.id in MODULES:
                    at, n = d._span()
                    out.append((d.name, at, n))
    return out


#: The folders of test programs: et/, and those of programs kept apart from its suites.
FOLDERS = (ET, os.path.join(ET, "coreai"), os.path.join(ET, "ethosu_external"))


def _programs() -> List[Tuple[str, str, int, int]]:
    """(path relative to et/, delegate, file offset, size) of every payload read."""
    out = []
    for folder in FOLDERS:
        for name in sorted(os.listdir(folder)):
            if name.endswith(".pte"):
                path = os.path.join(folder, name)
                for where, at, n in _payloads(path):
                    out.append((os.path.relpath(path, ET), where, at, n))
    return out


def _words(n: int) -> List[int]:
    """The offsets in a payload of ``n`` bytes of the words damaged."""
    count = n // 4
    head = list(range(min(count, HEAD_WORDS)))
    rest = count - len(head)
    step = max(1, rest // SPREAD_WORDS)
    return [4 * w for w in head + list(range(len(head), count, step))[:SPREAD_WORDS]]


PAYLOADS = _programs()


@pytest.mark.parametrize("name, where, at, size", PAYLOADS,
                         ids=[f"{p[0]}:{p[1]}" for p in PAYLOADS])
def test_a_damaged_word_of_a_payload_is_read_or_refused(name: str, where: str, at: int,
                                                        size: int) -> None:
    with open(os.path.join(ET, name), "rb") as f:
        raw = f.read()
    findings = []
    for offset in _words(size):
        for value in VALUES:
            data = bytearray(raw)
            struct.pack_into("<I", data, at + offset, value)
            kind, detail = outcome(bytes(data), True)
            if kind not in ("ok", "format_error"):
                findings.append(f"word {offset} = {value:#x}: {kind}: {detail[-600:]}")
    assert not findings, "\n".join(findings[:3])


def test_every_backend_read_is_damaged_here() -> None:
    """The programs above hold payloads of every backend whose reader decodes or
    describes them but QNN's (its one program is in wild/, a megabyte)."""
    seen = set()
    for name, where, _, _ in PAYLOADS:
        method, index = where.split(".delegates[")
        with pfm.load(os.path.join(ET, name)) as p:
            seen.add(p.methods[method].delegates[int(index.rstrip("]"))].id)
    assert seen == set(MODULES) - {"QnnBackend"}, sorted(set(MODULES) ^ seen)
