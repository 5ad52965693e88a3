"""Arm Ethos-U delegate payloads (``Delegate.graph`` of an ``EthosUBackend`` delegate, a
``VelaStream``) against what ExecuTorch packed into them.

tests/data/et/ethosu_*.pte are small networks quantized and lowered by ExecuTorch 1.5.1's
Ethos-U flow, which runs Arm's Vela compiler (tests/data/make_et_backends.py): a conv net
for the Ethos-U55, an MLP for the Ethos-U85, and two linears with a rounding left to the
portable kernels between them (two delegates). Their oracles hold, per payload, what
ExecuTorch's ``arm_vela.vela_compile`` packed as it ran: each block's name, size and
external flag as it packed the block's header, and Vela's own arrays (command stream and
weights: size and SHA-256; scratch size; each input's and output's shape, element size,
offset and region), tied to the delegate by the payload's SHA-256. Damaged payloads are
made from the file's bytes at the layout the runtime reads
(backends/arm/runtime/VelaBinStream.h: a 32-byte block header, name[16], u32 size, u8
external flag, 11 reserved bytes; data padded to 16 bytes) and must be refused at the
block at fault. The real architectures of tests/support/backends_zoo.py are compared the
same way when written.
"""
from __future__ import annotations

import hashlib
import json
import os
import struct
from typing import Any, Dict, List, Tuple

import pytest

import pyflatmodule as pfm
from pyflatmodule.executorch import VelaStream

from support import backends_zoo
from support.checked import load_full
from support.cli import run_cli
from support.delegates import graphs, refused
from support.paths import ET

STEMS = ["ethosu_conv", "ethosu_mlp", "ethosu_partial"]


def _oracle(stem: str) -> Dict[str, Any]:
    with open(os.path.join(backends_zoo.folder(stem), stem + ".oracle.json"),
              encoding="utf-8") as f:
        return json.load(f)  # type: ignore[no-any-return]


def _path(stem: str) -> str:
    return os.path.join(backends_zoo.folder(stem), stem + ".pte")


def _streams(p: pfm.Program) -> List[Tuple[bytes, VelaStream]]:
    """(payload bytes, stream) of each delegate, in method order."""
    ds = [d for m in p.methods.values() for d in m.delegates]
    return list(zip((bytes(d.data) for d in ds), graphs(p, "EthosUBackend", VelaStream)))


def _sha(b: Any) -> str:
    return hashlib.sha256(bytes(b)).hexdigest()


@pytest.mark.parametrize("stem", STEMS + backends_zoo.stems("ethosu"))
def test_each_stream_is_what_executorch_packed(stem: str) -> None:
    packed = {r["payload_sha256"]: r for r in _oracle(stem)["ethosu"]["delegates"]}
    with load_full(_path(stem)) as p:
        streams = _streams(p)
        assert len(streams) == (2 if stem == "ethosu_partial" else 1)
        for data, g in streams:
            want = packed[_sha(data)]
            assert [(b.name, b.size, b.external) for b in g.blocks] == \
                [(b["name"], b["size"], bool(b["external"])) for b in want["blocks"]]
            assert g.command_stream is not None and g.weights is not None
            assert g.command_stream.readonly and g.weights.readonly
            assert (len(g.command_stream), _sha(g.command_stream)) == \
                (want["cmd_data_size"], want["cmd_data_sha256"])
            assert (len(g.weights), _sha(g.weights)) == \
                (want["weight_data_size"], want["weight_data_sha256"])
            assert g.scratch_size == want["scratch_size"]
            assert [io.as_json() for io in g.inputs] == want["inputs"]
            assert [io.as_json() for io in g.outputs] == want["outputs"]
            assert g.version == bytes(g.command_stream[0:4]).decode() == "COP1"
            assert g.header["inputs"] == want["inputs"]
            assert g.header["scratch_size"] == want["scratch_size"]
            assert (g.nodes, g.values, g.constants(), g.input_ids, g.missing) == \
                ([], [], {}, [], {})


def test_the_io_shapes_are_the_delegate_calls_tensors() -> None:
    """Vela's 6-D shapes hold the elements of the int8 tensors the program hands the
    delegate (ExecuTorch's runtime: sizes of the call's arguments)."""
    oracle = _oracle("ethosu_conv")
    with load_full(_path("ethosu_conv")) as p:
        (_, g), = _streams(p)
        m = p.methods["forward"]
        call = next(i for c in m.chains for i in c.instructions
                    if type(i).__name__ == "DelegateCall")
        first, last = m.values[call.args[0]], m.values[call.args[-1]]
        for io, t in ((g.inputs[0], first), (g.outputs[0], last)):
            assert t.dtype == "int8" and io.elem_size == 1
            count = 1
            for d in io.shape:
                count *= d
            n = 1
            for d in t.shape:
                n *= d
            assert count == n
    assert oracle["runtime"]["methods"]["forward"]["inputs"][0]["sizes"] == [1, 3, 8, 8]


@pytest.mark.parametrize("command", [("info",), ("tree",), ("dis",), ("ops", "--delegates"),
                                     ("size",)])
def test_the_command_line_reads_it(command: Tuple[str, ...]) -> None:
    run = run_cli(*command, _path("ethosu_partial"))
    assert run.returncode == 0, run.stderr
    if command[0] == "dis":
        assert run.stdout.count("Ethos-U graph: its contents are the backend's own "
                                "format, not read") == 2, run.stdout
    if command[0] == "tree":   # the graph's line is its description
        assert run.stdout.count("Ethos-U graph: command stream ") == 2, run.stdout
        assert "not read" not in run.stdout
    if command[0] in ("tree", "dis"):   # each stream in a line, as ExecuTorch packed it
        for want in _oracle("ethosu_partial")["ethosu"]["delegates"]:
            io = want["inputs"][0]
            assert (f"command stream {want['cmd_data_size']:,} bytes, weights "
                    f"{want['weight_data_size']:,} bytes, scratch {want['scratch_size']:,} "
                    f"bytes; inputs {io['shape']} x {io['elem_size']} B") in run.stdout
    else:
        assert "EthosUBackend" in run.stdout or command[0] == "ops", run.stdout


# ---------------------------------------------------------------- damaged payloads

RAW = open(_path("ethosu_conv"), "rb").read()


def _payload() -> Tuple[int, int]:
    """(file offset, size) of ethosu_conv's payload, found in the file."""
    with pfm.load(_path("ethosu_conv")) as p:
        data = bytes(p.methods["forward"].delegates[0].data)
    return RAW.index(data), len(data)


def _blocks(at: int, size: int) -> List[Tuple[str, int, int]]:
    """(name, header's file offset, size) of each block, read by hand."""
    out, pos = [], at
    while pos < at + size:
        name, n = struct.unpack_from("<16sI", RAW, pos)
        out.append((name.rstrip(b"\0").decode(), pos, n))
        pos += 32 + (n + 15) // 16 * 16
    return out


def _block(name: str) -> Tuple[int, int]:
    """(header's file offset, size) of the block ``name``."""
    at, size = _payload()
    return next((pos, n) for b, pos, n in _blocks(at, size) if b == name)


def _set(at: int, fmt: str, value: Any) -> bytes:
    out = bytearray(RAW)
    struct.pack_into(fmt, out, at, value)
    return bytes(out)


def test_the_blocks_found_by_hand_are_the_packed_ones() -> None:
    at, size = _payload()
    want = _oracle("ethosu_conv")["ethosu"]["delegates"][0]["blocks"]
    assert [(b, n) for b, _, n in _blocks(at, size)] == [(b["name"], b["size"]) for b in want]


def test_a_block_past_the_payload() -> None:
    pos, _ = _block("weight_data")
    refused(_set(pos + 16, "<I", 1 << 20), "bad_block", pos + 16,
             ".processed<EthosU>.blocks[2].size")
    refused(_set(pos + 16, "<I", 0xFFFFFFFF), "bad_block", pos + 16,
             ".processed<EthosU>.blocks[2].size")


def test_a_stream_cut_short() -> None:
    """A block that ends the payload where its end mark should be: the stream has no
    end; one that leaves 16 bytes: a block header cut short."""
    at, size = _payload()
    pos, n = _block("outputs")
    end = at + size
    refused(_set(pos + 16, "<I", end - (pos + 32)), "bad_block", end,
             ".processed<EthosU>.blocks[6]")
    refused(_set(pos + 16, "<I", end - 16 - (pos + 32)), "bad_block", end - 16,
             ".processed<EthosU>.blocks[6]")


def test_an_end_mark_before_the_end() -> None:
    pos, _ = _block("outputs")
    data = bytearray(RAW)
    data[pos:pos + 16] = b"vela_end_stream\0"
    refused(bytes(data), "bad_block", pos, ".processed<EthosU>.blocks[5]")


def test_an_unknown_block_name_and_a_second_stream_mark() -> None:
    pos, _ = _block("scratch_size")
    data = bytearray(RAW)
    data[pos:pos + 16] = b"scratch\0\0\0\0\0\0\0\0\0"
    refused(bytes(data), "bad_block", pos, ".processed<EthosU>.blocks[3].name")
    data[pos:pos + 16] = b"vela_bin_stream\0"
    refused(bytes(data), "bad_block", pos, ".processed<EthosU>.blocks[3].name")


def test_a_command_stream_without_its_magic() -> None:
    pos, _ = _block("cmd_data")
    assert RAW[pos + 32:pos + 36] == b"COP1"
    refused(_set(pos + 32, "<4s", b"COPX"), "bad_contents", pos + 32,
             ".processed<EthosU>.blocks[1]")


def test_an_io_count_past_its_block() -> None:
    pos, n = _block("inputs")
    assert n == 4 + 36 and struct.unpack_from("<i", RAW, pos + 32)[0] == 1
    for count in (2, -1, 1 << 30):
        refused(_set(pos + 32, "<i", count), "bad_contents", pos + 32,
                 ".processed<EthosU>.blocks[4]")


def test_a_scratch_size_cut_short() -> None:
    pos, _ = _block("scratch_size")
    refused(_set(pos + 16, "<I", 3), "bad_contents", pos + 32,
             ".processed<EthosU>.blocks[3]")


def test_an_external_block_with_a_short_key() -> None:
    """An external block holds a 64-character key (the runtime's
    kVelaExternalBlockKeySize); the weights' 848 bytes are none."""
    pos, n = _block("weight_data")
    assert n == 848
    refused(_set(pos + 20, "<B", 1), "bad_contents", pos + 16,
             ".processed<EthosU>.blocks[2].size")



# ------------------------------------------- blocks kept in named data (a .ptd)

EXTERNAL = os.path.join(ET, "ethosu_external")
EXTERNAL_PTE = os.path.join(EXTERNAL, "ethosu_external.pte")
EXTERNAL_PTD = os.path.join(EXTERNAL, "ethosu.ptd")


def test_external_blocks_resolve_from_the_data_file() -> None:
    """ethosu_external.pte: the MLP with its command stream and weights placed in named
    data (``VelaExternalBlockPlacements``), written to ethosu.ptd: the blocks hold the
    keys ExecuTorch made, their bytes come from the data file."""
    with open(os.path.join(EXTERNAL, "ethosu_external.oracle.json"), encoding="utf-8") as f:
        (want,) = json.load(f)["ethosu"]["delegates"]
    by_kind = dict(zip(("cmd_data", "weight_data"), want["external_blocks"]))
    with load_full(EXTERNAL_PTE, data=[EXTERNAL_PTD]) as p:
        ((data, g),) = _streams(p)
        assert _sha(data) == want["payload_sha256"]
        assert [(b.name, b.size, b.external) for b in g.blocks] == \
            [(b["name"], b["size"], bool(b["external"])) for b in want["blocks"]]
        assert [b.key for b in g.blocks if b.external] == \
            [by_kind["cmd_data"]["key"], by_kind["weight_data"]["key"]]
        assert g.command_stream is not None and g.weights is not None
        assert g.command_stream.readonly and g.weights.readonly
        assert (len(g.command_stream), _sha(g.command_stream)) == \
            (want["cmd_data_size"], want["cmd_data_sha256"]) == \
            (by_kind["cmd_data"]["size"], by_kind["cmd_data"]["sha256"])
        assert (len(g.weights), _sha(g.weights)) == \
            (want["weight_data_size"], want["weight_data_sha256"]) == \
            (by_kind["weight_data"]["size"], by_kind["weight_data"]["sha256"])
        assert g.missing == {} and p.missing_data == []
        assert [io.as_json() for io in g.inputs] == want["inputs"]


def test_external_blocks_without_the_data_file_are_missing() -> None:
    with open(os.path.join(EXTERNAL, "ethosu_external.oracle.json"), encoding="utf-8") as f:
        (want,) = json.load(f)["ethosu"]["delegates"]
    keys = [b["key"] for b in want["external_blocks"]]
    with load_full(EXTERNAL_PTE) as p:
        ((_, g),) = _streams(p)
        assert g.missing == {1: keys[0], 2: keys[1]}
        assert g.command_stream is None and g.weights is None
        assert g.scratch_size == want["scratch_size"]
        assert p.missing_data == sorted(keys)
    run = run_cli("info", EXTERNAL_PTE)
    assert run.returncode == 0 and "2 tensors or named data in none of them" in run.stdout
    run = run_cli("dis", EXTERNAL_PTE)
    assert run.returncode == 0 and f"command stream missing (named data {keys[0]})" \
        in run.stdout, run.stdout


def test_an_external_key_no_data_file_holds_is_refused_when_data_is_given() -> None:
    raw = bytearray(open(EXTERNAL_PTE, "rb").read())
    with pfm.load(EXTERNAL_PTE) as p:
        data = bytes(p.methods["forward"].delegates[0].data)
    at = bytes(raw).index(data)
    key_at = at + 32 + 32                     # blocks[1] (cmd_data): its data, the key
    raw[key_at] ^= 0x01
    refused_with = os.path.join(EXTERNAL, "refused.pte")
    try:
        with open(refused_with, "wb") as f:
            f.write(raw)
        with pytest.raises(pfm.FormatError) as e:
            with load_full(refused_with, data=[EXTERNAL_PTD]) as q:
                [d.graph for m in q.methods.values() for d in m.delegates]
        assert (e.value.code, e.value.offset) == ("missing_data", key_at), e.value
        assert e.value.path.endswith(".processed<EthosU>.blocks[1].key"), e.value
    finally:
        os.remove(refused_with)
