"""Opening a model reads its metadata only: no page of tensor data is touched.

Measured with mincore(2) on the mapping after the file was dropped from the page
cache: a page is resident only if something read it (or the kernel read ahead).
"""
from __future__ import annotations

import ctypes
import mmap
import os

import numpy as np
import pytest

import pyflatmodule as pfm

import support.ptmf_craft as c

if not hasattr(os, "posix_fadvise"):
    pytest.skip("needs posix_fadvise and mincore", allow_module_level=True)

STORAGE_BYTES = 64 << 20
_libc = ctypes.CDLL(None, use_errno=True)


def resident_pages(array: np.ndarray) -> int:
    """How many of the pages lying wholly inside ``array`` are in memory."""
    page = mmap.PAGESIZE
    start = -(-array.ctypes.data // page) * page
    end = (array.ctypes.data + array.nbytes) // page * page
    n = (end - start) // page
    vec = (ctypes.c_ubyte * n)()
    if _libc.mincore(ctypes.c_void_p(start), ctypes.c_size_t(end - start), vec) != 0:
        raise OSError(ctypes.get_errno(), "mincore")
    return sum(v & 1 for v in vec)


def _big_model(path) -> None:
    m = c.valid_module()
    rows = STORAGE_BYTES // 4 // 1024
    m["ivalues"][5] = c.Tensor([rows, 1024])
    m["storage_data"] = [np.arange(rows * 1024, dtype=np.float32).tobytes()]
    with open(path, "wb") as f:
        f.write(c.build(m, storage_align=32))
        f.flush()
        os.fsync(f.fileno())


def _drop_from_cache(path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def test_open_and_metadata_touch_no_tensor_page(tmp_path):
    path = str(tmp_path / "big.ff")
    _big_model(path)
    _drop_from_cache(path)
    m = pfm.load(path)
    storage = m.storages[0]
    assert STORAGE_BYTES == storage.nbytes
    before = resident_pages(storage)
    if before:
        pytest.skip(f"the page cache kept {before} pages here; cannot measure")
    # Everything but tensor data: values, functions, the state_dict's views.
    for i in range(len(m.ivalues)):
        m.ivalues[i]
    for f in m.functions():
        f.disassemble()
    weight = m.state_dict()["weight"]
    m.info()
    # The mapping is advised MADV_RANDOM until the index knows where tensor data
    # lies, so metadata faults read no ahead into it.
    assert 0 == resident_pages(storage)
    # Reading the weights is what brings them in.
    rows = weight.shape[0]
    assert float(weight[rows // 2, 0]) == float(rows // 2 * 1024)
    assert resident_pages(storage) > 0


def mapped_kib(path: str) -> int:
    """Resident KiB of this process's mappings of ``path`` (/proc/self/smaps)."""
    total, inside = 0, False
    with open("/proc/self/smaps") as f:
        for line in f:
            head = line.split()
            if "-" in head[0] and len(head) >= 5 and ":" in head[3]:
                inside = len(head) >= 6 and head[5] == path
            elif inside and head[0] == "Rss:":
                total += int(head[1])
    return total


@pytest.mark.skipif(not os.path.exists("/proc/self/smaps"), reason="needs /proc/self/smaps")
def test_open_maps_no_tensor_payload_into_rss(tmp_path):
    """Reading the storage header faults in the page-cache folio around it, and a
    kernel with large folios (a file just written has them) maps all of it: up to
    2 MiB of payload in RSS before any weight is read. Open drops those mappings."""
    path = str(tmp_path / "storages.ff")
    m = c.valid_module()
    m["ivalues"][5] = c.Tensor([1024, 1024], storage=7)
    payloads = [np.full(1 << 20, k, dtype=np.float32).tobytes() for k in range(8)]
    m["storage_data"] = payloads         # headers of storages 1..7 lie amid payloads
    m["storage_data_size"] = len(payloads)
    with open(path, "wb") as f:          # written just now: in the page cache
        f.write(c.build(m, storage_align=32))
    m = pfm.load(path)
    weight = m.state_dict()["weight"]
    m.info()
    assert mapped_kib(path) <= 256
    assert float(weight[512, 0]) == 7.0
    assert mapped_kib(path) > 0


def _runs_by_the_rule(layout, page, gap):
    """Readahead runs as the rule states them: payloads of a page or more, by
    position; a payload starting ``gap`` or more past the end of the run so far
    starts a new run; each run trimmed to whole pages (and dropped if none)."""
    runs = []
    for pos, size in sorted((p, s) for p, s in layout if s >= page):
        if runs and pos - runs[-1][1] < gap:
            runs[-1][1] = max(runs[-1][1], pos + size)
        else:
            runs.append([pos, pos + size])
    trimmed = [(-(-a // page) * page, b // page * page) for a, b in runs]
    return [(a, b) for a, b in trimmed if b > a]


def test_readahead_runs_follow_the_rule():
    """The C core's payload runs (ptmf_payload_runs, through PtmfIndex) equal the rule
    above on 3,000 random storage layouts (overlaps, gaps on both sides of 64 KiB,
    sizes around a page)."""
    from pyflatmodule.core.records import c_array, struct_dtype
    from pyflatmodule.core.source import RUN_GAP
    from pyflatmodule.ptmf.index import PtmfIndex
    rng = np.random.default_rng(7)
    page = mmap.PAGESIZE
    for _ in range(3000):
        n = int(rng.integers(0, 40))
        storages = np.empty(n, struct_dtype("ptmf_storage"))
        storages["pos"] = rng.integers(0, 1 << 22, n)
        storages["size"] = rng.choice([0, 100, page - 1, page, page + 904, RUN_GAP - 1,
                                       RUN_GAP, 300_000], n)
        image = PtmfIndex.__new__(PtmfIndex)   # only the storage index is needed
        image.storage_index = storages
        expected = _runs_by_the_rule(storages[["pos", "size"]].tolist(), page, RUN_GAP)
        assert image._payload_runs(c_array("ptmf_storage", storages)) == expected
