"""The front door: load() and its typed twins, verify(), data= and the paths they refuse.

Expected values come from the files' bytes (identifiers at bytes 4..8, an ETDump's at
8..12, after its size prefix) and from
ExecuTorch's own reading of them (tests/data/et/*.oracle.json, written by exir).
"""
from __future__ import annotations

import json
import os
import pathlib
import socket
import threading
from typing import Any, Dict, List

import pytest

import pyflatmodule as pfm

from support import model_path
from support.cli import run_cli
from support.paths import ET

PTE = os.path.join(ET, "external.pte")
PTD = os.path.join(ET, "external.ptd")
#: One real file of each format, by the class load() gives for it.
FILES = {pfm.Module: model_path("layouts.ff"), pfm.Program: os.path.join(ET, "mlp.pte"),
         pfm.DataFile: PTD, pfm.BundledProgram: os.path.join(ET, "bundled.bpte"),
         pfm.ETDump: os.path.join(ET, "profile.etdump")}
LOADERS = {pfm.Module: pfm.load_module, pfm.Program: pfm.load_program,
           pfm.DataFile: pfm.load_data, pfm.BundledProgram: pfm.load_bundled,
           pfm.ETDump: pfm.load_etdump}
#: Where each format's identifier is: bytes 4..8 but for a size-prefixed ETDump.
IDENTIFIER_AT = {pfm.ETDump: 8}


def _oracle(name: str) -> Dict[str, Any]:
    with open(os.path.join(ET, name + ".oracle.json")) as f:
        return json.load(f)


def _external_names() -> List[str]:
    """The names of external.pte's external tensors, as exir reads the program."""
    plan = _oracle("external")["program"]["execution_plan"][0]
    return sorted({v["fqn"] for v in plan["values"] if v.get("fqn")})


@pytest.mark.parametrize("cls", list(FILES), ids=lambda c: c.__name__)
def test_load_and_the_typed_loader_agree_on_each_format(cls: type) -> None:
    path = FILES[cls]
    at = IDENTIFIER_AT.get(cls, 4)
    with open(path, "rb") as f:
        ident = f.read(12)[at:at + 4]
    fmt = pfm.files.BY_NAME[pfm.files.file_format(path)]
    assert (fmt.identifier, fmt.at, fmt.cls) == (ident, at, cls)
    with pfm.load(path) as f:
        assert type(f) is cls
    with LOADERS[cls](path) as f:
        assert type(f) is cls
    for other, loader in LOADERS.items():
        if other is cls:
            continue
        with pytest.raises(pfm.FormatError) as e:
            loader(path)
        assert e.value.code == "bad_identifier" and e.value.offset == 4
        assert fmt.description in e.value.reason


def test_an_unknown_identifier_names_the_ones_read_here() -> None:
    with pytest.raises(pfm.FormatError) as e:
        pfm.load(b"\0\0\0\0ZZZZ" + bytes(64))
    assert e.value.code == "bad_identifier" and e.value.offset == 4
    for ident in (b"PTMF", b"ET12", b"FT01", b"BP08", b"ED00"):
        assert ident.decode() in e.value.reason
    with pytest.raises(pfm.FormatError) as e:
        pfm.load(b"ET1")
    assert e.value.code == "too_small"


def test_data_takes_a_sequence_and_only_for_programs() -> None:
    for one in (PTD, pathlib.Path(PTD), open(PTD, "rb").read()):
        with pytest.raises(TypeError, match=r"data=\["):
            pfm.load(PTE, data=one)  # type: ignore[arg-type]
    for path in (FILES[pfm.Module], FILES[pfm.BundledProgram], FILES[pfm.ETDump]):
        with pytest.raises(ValueError, match="data= is for ExecuTorch programs"):
            pfm.load(path, data=[PTD])


def test_a_program_given_as_data_is_named_by_its_place() -> None:
    mlp = FILES[pfm.Program]
    with pytest.raises(pfm.FormatError) as e:
        pfm.load(PTE, data=[PTD, mlp])
    assert e.value.path == "data[1]" and e.value.code == "bad_identifier"
    assert "not a data file (.ptd)" in e.value.reason and mlp in e.value.reason


def test_a_fault_in_a_data_file_is_located_in_it(tmp_path: Any) -> None:
    raw = bytearray(open(PTD, "rb").read())
    root = int.from_bytes(raw[0:4], "little")
    vtable = root - int.from_bytes(raw[root:root + 4], "little", signed=True)
    raw[vtable:vtable + 2] = (1).to_bytes(2, "little")  # a vtable shorter than its header
    bad = tmp_path / "bad.ptd"
    bad.write_bytes(bytes(raw))
    with pytest.raises(pfm.FormatError) as direct:
        pfm.load(str(bad))
    with pytest.raises(pfm.FormatError) as nested:
        pfm.load(PTE, data=[str(bad)])
    assert nested.value.path.startswith("data[0]")
    assert nested.value.offset == direct.value.offset
    assert nested.value.code == direct.value.code
    r = run_cli("info", PTE, "--data", str(bad))
    assert r.returncode == 1 and str(bad) in r.stderr and direct.value.code in r.stderr


def test_missing_data_names_what_is_not_resolved() -> None:
    names = _external_names()
    assert names, "external.pte has external tensors"
    with pfm.load_program(PTE) as p:
        assert p.missing_data == names
        assert p.info()["missing_data"] == names
    with pfm.load_program(PTE, data=[PTD]) as p:
        assert p.missing_data == [] and p.info()["data_files"] == 1
    with pfm.load_program(FILES[pfm.Program]) as p:
        assert p.missing_data == []


def test_a_program_outlives_its_data_file() -> None:
    named = {d["key"]: d for d in _oracle("external")["data_file"]["named_data"]}
    d = pfm.load_data(PTD)
    p = pfm.load_program(PTE, data=[d])
    d.close()
    weights = p.state_dict()
    assert set(named) <= set(weights)
    assert all(weights[k].nbytes > 0 for k in named)
    p.close()


def test_export_refuses_a_program_with_missing_data(tmp_path: Any) -> None:
    out = tmp_path / "w.npz"
    r = run_cli("export", PTE, str(out))
    assert r.returncode == 1 and not out.exists()
    assert "--data" in r.stderr and all(n in r.stderr for n in _external_names())
    r = run_cli("export", PTE, str(out), "--data", PTD)
    assert r.returncode == 0 and out.exists()


@pytest.mark.parametrize("command", ["info", "tree", "dis", "ops", "verify"])
def test_every_command_takes_data(command: str) -> None:
    r = run_cli(command, PTE, "--data", PTD)
    assert r.returncode == 0, r.stderr


def test_verify_reports_every_format() -> None:
    report = pfm.verify(FILES[pfm.Module])
    assert isinstance(report, pfm.VerifyReport)
    for cls in (pfm.Program, pfm.DataFile, pfm.BundledProgram):
        info = pfm.verify(FILES[cls])
        assert isinstance(info, dict) and info["size"] == os.path.getsize(FILES[cls])
    assert pfm.verify(PTE, data=[PTD])["missing_data"] == []


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs here")
def test_a_fifo_is_refused_without_blocking(tmp_path: Any) -> None:
    fifo = str(tmp_path / "model.pte")
    os.mkfifo(fifo)
    done: List[BaseException] = []

    def attempt() -> None:
        for call in (pfm.load, pfm.files.file_format, lambda p: pfm.load(p, copy=True)):
            try:
                call(fifo)
            except OSError as e:
                done.append(e)
    t = threading.Thread(target=attempt, daemon=True)
    t.start()
    t.join(10)
    assert not t.is_alive(), "opening a FIFO blocked"
    assert len(done) == 3 and all("FIFO" in str(e) for e in done)


def test_a_socket_and_a_device_are_refused(tmp_path: Any) -> None:
    if os.path.exists("/dev/zero"):
        with pytest.raises(OSError, match="character device"):
            pfm.load("/dev/zero")
    path = str(tmp_path / "s")
    s = socket.socket(socket.AF_UNIX)
    try:
        s.bind(path)
        with pytest.raises(OSError):   # a socket cannot be opened as a file at all
            pfm.load(path)
    finally:
        s.close()


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs here")
def test_export_refuses_to_replace_a_fifo_or_a_directory(tmp_path: Any) -> None:
    fifo = tmp_path / "w.npz"
    os.mkfifo(fifo)
    r = run_cli("export", FILES[pfm.Program], str(fifo))
    assert r.returncode == 2 and "a FIFO, not a regular file" in r.stderr
    assert os.path.exists(fifo) and not os.path.isfile(fifo)
    folder = tmp_path / "w.safetensors"
    folder.mkdir()
    r = run_cli("export", FILES[pfm.Program], str(folder))
    assert r.returncode == 2 and "a directory, not a regular file" in r.stderr
