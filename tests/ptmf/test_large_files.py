"""Files over 2 GiB, as torch writes them, built sparse in the test itself.

Torch writes PTMF files over 2 GiB and then refuses to load them: every storage's
StorageData table shares one vtable near the end of the file, and the signed 32-bit
vtable offset of each table more than 2^31 bytes below it wraps around (format.md,
"Files over 2 GiB"). ``write_sparse_model`` lays a file out the same way (metadata
vectors first, storage tables each right before its payload, shared vtables and the
ivalue tables at the end), with the payloads left as holes, so the test needs
neither gigabytes of disk nor of memory.
"""
from __future__ import annotations

import os
import struct
from typing import List, Tuple

import numpy as np
import pytest

import pyflatmodule as pfm

STORAGE = 256 << 20          # 9 of them: 2.25 GiB
COUNT = 9
ROWS = STORAGE // 4 // 1024


class _Layout:
    """Bytes at absolute positions, written into a sparse file."""

    def __init__(self, f) -> None:
        self.f = f

    def put(self, pos: int, data: bytes) -> None:
        self.f.seek(pos)
        self.f.write(data)


def _align(pos: int, n: int) -> int:
    return -(-pos // n) * n


def write_sparse_model(path: str, count: int = COUNT, storage: int = STORAGE,
                       sizes_override: Tuple[int, int] = None) -> List[int]:
    """Write the model; returns each payload's position.

    ivalues: [None, tensor w0 .. tensor w{count-1}, root Object]; tensor k is a
    float32 (storage/4096, 1024) view of storage k whose first element is k + 0.5
    and last element -(k + 1).
    """
    rows = storage // 4 // 1024
    n_iv = count + 2
    with open(path, "wb") as f:
        out = _Layout(f)
        # Header and Module table (fields 0, 3, 4, 5, 6, 7), its vtable first.
        vt_m, m = 8, 28
        v_iv = m + 28
        v_st = v_iv + 4 + 4 * n_iv
        v_ot = v_st + 4 + 4 * count
        pos = v_ot + 8
        tables, payloads = [], []
        for k in range(count):
            payload = _align(pos + 12, 32)
            tables.append(payload - 12)
            payloads.append(payload)
            pos = payload + storage
        tail = _align(pos, 8)
        vt_s, vt_i, vt_n, vt_t, vt_o, vt_y = (tail + 8 * i for i in range(6))
        vt_t, vt_o, vt_y = tail + 40, tail + 56, tail + 72
        cursor = tail + 96
        out.put(0, struct.pack("<I4s", m, b"PTMF"))
        out.put(vt_m, struct.pack("<10H", 20, 28, 4, 0, 0, 8, 12, 16, 20, 24))
        out.put(vt_s, struct.pack("<3H", 6, 8, 4))                 # StorageData: data
        out.put(vt_i, struct.pack("<4H", 8, 12, 8, 4))             # IValue: type, val
        out.put(vt_n, struct.pack("<2H", 4, 4))                    # IValue NONE
        out.put(vt_t, struct.pack("<7H", 14, 20, 4, 16, 0, 8, 12))  # TensorMetadata
        out.put(vt_o, struct.pack("<5H", 10, 12, 4, 0, 8))         # Object
        out.put(vt_y, struct.pack("<5H", 10, 16, 4, 12, 8))        # ObjectType
        # Storage tables, each right before its payload, sharing vt_s: the signed
        # offset wraps for every table more than 2^31 below it, as torch writes it.
        for k, (t, p) in enumerate(zip(tables, payloads)):
            out.put(t, struct.pack("<III", (t - vt_s) & 0xFFFFFFFF, 4, storage))
            out.put(p, struct.pack("<f", k + 0.5))
            out.put(p + storage - 4, struct.pack("<f", -(k + 1.0)))

        def take(size: int, align: int = 4) -> int:
            nonlocal cursor
            cursor = _align(cursor, align)
            at = cursor
            cursor += size
            return at

        iv_tables = []
        for i in range(n_iv):
            if i == 0:
                t = take(4)
                out.put(t, struct.pack("<i", t - vt_n))
                iv_tables.append(t)
                continue
            t = take(12)
            iv_tables.append(t)
            kind = 5 if i <= count else 10
            val = take(20 if kind == 5 else 12)
            out.put(t, struct.pack("<iIB3x", t - vt_i, val - (t + 4), kind))
            if kind == 5:
                k = i - 1
                shape = sizes_override if sizes_override and k == 0 else (rows, 1024)
                sizes, strides = take(12), take(12)
                out.put(val, struct.pack("<iIIIb3x", val - vt_t, k, sizes - (val + 8),
                                         strides - (val + 12), 6))
                out.put(sizes, struct.pack("<Iii", 2, *shape))
                out.put(strides, struct.pack("<Iii", 2, 1024, 1))
            else:
                attrs = take(4 + 4 * count)
                out.put(val, struct.pack("<iII", val - vt_o, 0, attrs - (val + 8)))
                out.put(attrs, struct.pack(f"<I{count}I", count, *range(1, count + 1)))
        # The object type and its strings.
        ot = take(16)
        name = take(4 + 32)
        names = take(4 + 4 * count)
        out.put(ot, struct.pack("<iIIB3x", ot - vt_y, name - (ot + 4), names - (ot + 8), 1))
        out.put(name, struct.pack("<I", 13) + b"__torch__.Big\0")
        offsets = []
        for k in range(count):
            text = f"w{k}".encode()
            s = take(4 + len(text) + 1)
            out.put(s, struct.pack("<I", len(text)) + text + b"\0")
            offsets.append(s)
        out.put(names, struct.pack("<I", count) + b"".join(
            struct.pack("<I", s - (names + 4 + 4 * j)) for j, s in enumerate(offsets)))
        # Module table and its vectors.
        out.put(m, struct.pack("<iIIIiII", m - vt_m, 9, n_iv - 1, v_iv - (m + 12), count,
                               v_st - (m + 20), v_ot - (m + 24)))
        out.put(v_iv, struct.pack("<I", n_iv) + b"".join(
            struct.pack("<I", t - (v_iv + 4 + 4 * i)) for i, t in enumerate(iv_tables)))
        out.put(v_st, struct.pack("<I", count) + b"".join(
            struct.pack("<I", t - (v_st + 4 + 4 * k)) for k, t in enumerate(tables)))
        out.put(v_ot, struct.pack("<II", 1, ot - (v_ot + 4)))
        f.truncate(_align(cursor, 8))
    return payloads


@pytest.fixture(scope="module")
def big_file(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("large") / "big.ff")
    write_sparse_model(path)
    yield path
    os.unlink(path)


def test_layout_is_what_torch_writes(big_file):
    """The premise: some storage tables' vtable offsets really wrap."""
    assert os.path.getsize(big_file) > 2**31
    with open(big_file, "rb") as f:
        data = f.read(64)
    assert b"PTMF" == data[4:8]


def test_reads_files_over_2_gib(big_file):
    report = pfm.verify(big_file)
    assert report.wrapped_vtables > 0
    with pfm.load(big_file) as m:
        sd = m.state_dict()
        assert [f"w{k}" for k in range(COUNT)] == list(sd)
        for k, w in enumerate(sd.values()):
            assert (ROWS, 1024) == w.shape
            assert np.float32(k + 0.5) == w[0, 0]
            assert np.float32(-(k + 1)) == w[-1, -1]
            assert np.float32(0) == w[ROWS // 2, 7]     # a hole reads as zero


def test_strict_mode_names_the_first_wrapped_table(big_file):
    with pytest.raises(pfm.FormatError) as e:
        pfm.load(big_file, strict=True)
    assert "vtable_wrapped" == e.value.code
    assert e.value.path.startswith("storage_data[")
    assert "2 GiB" in str(e.value)


def test_over_4_gib_is_refused_with_the_reason(tmp_path):
    """32-bit offsets cannot address past 4 GiB: torch's files that large have
    wrapped unsigned offsets too. Any buffer over 4 GiB is refused, saying why."""
    path = str(tmp_path / "huge.ff")
    write_sparse_model(path, count=2, storage=1 << 20)
    os.truncate(path, 2**32 + 4096)
    with pytest.raises(pfm.FormatError) as e:
        pfm.load(path)
    assert "too_large" == e.value.code
    assert "4 GiB" in str(e.value)


def test_overflowed_int32_size_names_the_tensor(tmp_path):
    path = str(tmp_path / "neg.ff")
    write_sparse_model(path, count=2, storage=1 << 20, sizes_override=(-(2**31) + 5, 1024))
    with pytest.raises(pfm.FormatError) as e:
        pfm.load(path)
    assert "negative_dimension" == e.value.code
    assert "ivalues[1].val<TensorMetadata>.sizes[0]" == e.value.path
    assert "w0" in str(e.value)
