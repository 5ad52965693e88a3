"""Native code in ExecuTorch files: executable images found where the runtime may load
them (named data, delegate payloads), said by ``info`` and ``verify``, refused by
``verify --strict``.

tests/data/native/ holds a program and a data file that ExecuTorch's own writers made with
a real ELF shared object inside (tests/data/make_native_data.py: gcc's, in a ``.ptd``'s
named data, and as a delegate's payload and named data, as AOTInductor's backends ship
theirs). Expected values come from the files' bytes, read here by hand (ELF's header:
the magic, ``e_type`` at byte 16); Mach-O and PE images are headers built here by their
formats' layouts.
"""
from __future__ import annotations

import glob
import json
import os
import struct
from typing import List, Tuple

import pytest

import pyflatmodule as pfm
from pyflatmodule.executorch import NativeImage
from pyflatmodule.executorch.native_code import identify

from support.cli import run_cli
from support.paths import DATA, ET, WILD
from support.schemas import validate

NATIVE = os.path.join(DATA, "native")
PTE = os.path.join(NATIVE, "native.pte")
PTD = os.path.join(NATIVE, "native.ptd")


def _read(path: str) -> bytes:
    with open(path, "rb") as f:
        return f.read()


def _elf_images(raw: bytes) -> List[Tuple[int, int]]:
    """(offset, e_type) of every ELF header in ``raw`` (found by its magic)."""
    out, at = [], raw.find(b"\x7fELF")
    while at >= 0:
        out.append((at, struct.unpack_from("<H", raw, at + 16)[0]))
        at = raw.find(b"\x7fELF", at + 1)
    return out


def test_a_program_with_a_shared_object_in_named_data_and_as_its_payload() -> None:
    raw = _read(PTE)
    found = _elf_images(raw)
    assert [t for _, t in found] == [3, 3]          # ET_DYN twice: payload, named data
    with pfm.load(PTE) as p:
        images = p.native_code()
        assert sorted(i.offset for i in images) == [at for at, _ in found]
        assert {i.where for i in images} == {"named_data['forward_so_blob']",
                                             "forward.delegates[0]"}
        assert all((i.format, i.kind) == ("ELF", "shared object") for i in images)
        so = bytes(p.named_data["forward_so_blob"])
        assert all(i.size == len(so) for i in images)
        assert bytes([d for m in p.methods.values() for d in m.delegates][0].data) == so
        assert p.info()["native_code"] == [i._asdict() for i in images]


def test_a_data_file_with_a_shared_object() -> None:
    raw = _read(PTD)
    (at, e_type), = _elf_images(raw)
    with pfm.load(PTD) as d:
        assert d.native_code() == [NativeImage("ELF", "shared object",
                                               "named_data['kernels/libanswer.so']", at,
                                               len(d.named_data["kernels/libanswer.so"]))]
        assert e_type == 3


#: Programs and data files of the suite without ELF's magic anywhere in their bytes
#: (and that are programs or data files: their identifier at bytes 4..8)
PLAIN = [p for p in sorted(glob.glob(os.path.join(ET, "*.pt[ed]"))
                           + glob.glob(os.path.join(WILD, "*.pte")))
         if b"\x7fELF" not in _read(p) and _read(p)[4:8] in (b"ET12", b"FT01")]


@pytest.mark.parametrize("path", PLAIN)
def test_files_without_an_elf_header_hold_none(path: str) -> None:
    with pfm.load(path) as f:
        assert f.native_code() == []


def test_verify_lists_it_and_strict_refuses_it_at_the_first_image() -> None:
    for path in (PTE, PTD):
        assert pfm.verify(path)["native_code"]
        with pytest.raises(pfm.FormatError) as e:
            pfm.verify(path, strict=True)
        assert e.value.code == "native_code"
        first = _elf_images(_read(path))
        assert e.value.offset in [at for at, _ in first]
        assert "ELF shared object" in str(e.value)


def test_the_commands_say_so() -> None:
    run = run_cli("verify", PTE, PTD)
    assert run.returncode == 0, run.stdout + run.stderr
    assert run.stdout.count("holds native code: 1 ELF shared object") == 2
    run = run_cli("verify", "--strict", PTD)
    assert run.returncode == 1 and "INVALID [native_code]" in run.stdout, run.stdout
    run = run_cli("info", PTE)
    assert run.returncode == 0 and "holds native code: " in run.stdout, run.stdout


@pytest.mark.parametrize("command", ["info", "verify"])
def test_the_json_lists_it_as_its_schema_says(command: str) -> None:
    run = run_cli(command, "--json", PTE, PTD)
    assert run.returncode == 0, run.stderr
    doc = json.loads(run.stdout)
    validate(doc, command)
    assert [len(f["native_code"]) for f in doc["files"]] == [2, 1]


def _macho(magic: int, filetype: int, big: bool) -> bytes:
    """A Mach-O header: magic, cputype, cpusubtype, filetype, then zeros (mach-o/loader.h)."""
    return struct.pack(">IiiI" if big else "<IiiI", magic, 7, 3, filetype) + bytes(48)


def _pe(characteristics: int) -> bytes:
    """A DOS stub whose e_lfanew (byte 60) points at ``PE\\0\\0`` and a COFF header:
    machine, sections, timestamp, symbols, count, optional header size, characteristics."""
    stub = bytearray(64)
    stub[:2] = b"MZ"
    struct.pack_into("<I", stub, 60, 64)
    return bytes(stub) + b"PE\0\0" + struct.pack("<HHIIIHH", 0x8664, 0, 0, 0, 0, 0,
                                                  characteristics)


@pytest.mark.parametrize("data,want", [
    (_macho(0xFEEDFACF, 6, False), ("Mach-O", "dynamic library")),
    (_macho(0xFEEDFACE, 2, False), ("Mach-O", "executable")),
    (_macho(0xFEEDFACF, 8, True), ("Mach-O", "bundle")),
    (struct.pack(">II", 0xCAFEBABE, 2) + bytes(56), ("Mach-O", "universal binary")),
    (_pe(0x2022), ("PE", "DLL")),
    (_pe(0x0022), ("PE", "executable")),
    (b"\x7fELF\x02\x01\x01" + bytes(9) + struct.pack("<H", 2) + bytes(46),
     ("ELF", "executable")),
    # a Java class file: 0xCAFEBABE, then its version (52), not a count of architectures
    (struct.pack(">IHH", 0xCAFEBABE, 0, 52) + bytes(56), None),
    (b"MZ" + bytes(62), None),                 # a DOS stub pointing at no PE header
    (b"\x7fEL", None), (b"", None), (bytes(64), None),
])
def test_each_format_is_told_by_its_own_header(data: bytes, want: object) -> None:
    assert identify(memoryview(data)) == want
