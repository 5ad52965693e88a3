"""QNN delegate payloads: their header described (``QnnContext``), the context binary kept
as bytes, on the Llama that ExecuTorch's repository ships lowered to QNN
(tests/data/wild/stories260k_hybrid_llama_qnn.pte). Expected values come from the file's
bytes, read here by hand at ExecuTorch's layout (QnnCustomProtocol.cpp: u32 magic, i64
signature, u64 binary size, the binary at byte 256)."""
from __future__ import annotations

import os
import struct
from typing import List, Tuple

import pytest

import pyflatmodule as pfm
from pyflatmodule.executorch import QnnContext

from support.checked import load_full
from support.cli import run_cli
from support.paths import WILD

PATH = os.path.join(WILD, "stories260k_hybrid_llama_qnn.pte")
with open(PATH, "rb") as _f:
    RAW = _f.read()


def _payloads() -> List[Tuple[int, int]]:
    """(file offset, size) of each QNN delegate's payload, found in the file."""
    out = []
    with pfm.load(PATH) as p:
        for m in p.methods.values():
            for d in m.delegates:
                if d.id == "QnnBackend":
                    data = bytes(d.data)
                    out.append((RAW.index(data), len(data)))
    return out


def _qnn(p: pfm.Program) -> List[QnnContext]:
    """The graphs of the program's QNN delegates (its other methods run kernels)."""
    out = []
    for m in p.methods.values():
        for d in m.delegates:
            if d.id == "QnnBackend":
                assert isinstance(d.graph, QnnContext), d.graph
                out.append(d.graph)
    return out


def test_each_header_is_the_files_bytes() -> None:
    with load_full(PATH) as p:
        contexts = _qnn(p)
        spans = _payloads()
        assert len(contexts) == len(spans) == 2
        for g, (at, size) in zip(contexts, spans):
            magic, signature, n = struct.unpack_from("<IqQ", RAW, at)
            assert magic == 0x5678ABCD
            assert g.header == {"magic": magic, "signature": signature, "binary_offset": 256,
                                "binary_size": n}
            assert n == size - 256
            assert bytes(g.binary) == RAW[at + 256:at + 256 + n] and g.binary.readonly
            assert (g.nodes, g.values, g.constants(), g.input_ids) == ([], [], {}, [])


def test_the_command_line_describes_it() -> None:
    """tree and dis say what the payload is, not a graph of nothing: dis that it is not
    read, then its header in a line; tree the header in the graph's line."""
    for command, not_read in (("tree", 0), ("dis", 2)):
        run = run_cli(command, PATH)
        assert run.returncode == 0, run.stderr
        assert run.stdout.count("QNN graph: its contents are the backend's own format, "
                                "not read") == not_read, run.stdout
        assert "0 nodes" not in run.stdout
        for at, size in _payloads():
            magic, signature, n = struct.unpack_from("<IqQ", RAW, at)
            assert (f"a {n:,}-byte Qualcomm context binary, signature {signature}"
                    in run.stdout)


def test_a_binary_past_the_payload_is_refused_at_the_header() -> None:
    at, size = _payloads()[0]
    data = bytearray(RAW)
    struct.pack_into("<Q", data, at + 12, size - 255)
    with pytest.raises(pfm.FormatError) as e:
        with load_full(bytes(data)) as p:
            _qnn(p)
    assert e.value.code == "bad_header" and e.value.offset == at + 12, e.value
    assert e.value.path.endswith(".processed<QNN>.header"), e.value


def test_a_payload_without_the_magic_stays_bytes() -> None:
    """An older writer's payload (no QnnContextCustomProtocol header) opens as bytes."""
    data = bytearray(RAW)
    for at in {at for at, _ in _payloads()}:   # both methods' delegates share a segment
        data[at] ^= 0xFF
    with load_full(bytes(data)) as p:
        delegates = [d for m in p.methods.values() for d in m.delegates
                     if d.id == "QnnBackend"]
        assert delegates and all(d.graph is None for d in delegates)
