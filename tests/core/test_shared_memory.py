"""Many processes reading one mapped model share one copy of it in memory.

Each worker reads every weight, then reports the proportional set size (PSS) of
its mapping of the model file from /proc/self/smaps: a page shared by k processes
counts 1/k in each. Summed over the workers it stays about one file's worth,
where loading with ``copy=True`` (what code that reads the file into memory does)
costs a copy per worker.
"""
from __future__ import annotations

import multiprocessing as mp
import os
import sys

import numpy as np
import pytest

import pyflatmodule as pfm

import support.ptmf_craft as c

if not sys.platform.startswith("linux"):
    pytest.skip("PSS comes from Linux's /proc/PID/smaps", allow_module_level=True)

WORKERS = 4
MIB = 1 << 20
WEIGHT_BYTES = 48 * MIB


def _model(path: str) -> None:
    m = c.valid_module()
    rows = WEIGHT_BYTES // 4 // 1024
    m["ivalues"][5] = c.Tensor([rows, 1024])
    m["storage_data"] = [np.random.default_rng(0).random(rows * 1024, np.float32).tobytes()]
    with open(path, "wb") as f:
        f.write(c.build(m, storage_align=32))


def file_pss(path: str, pid: str = "self") -> int:
    """PSS in bytes of every mapping of ``path`` in process ``pid``."""
    total, inside = 0, False
    with open(f"/proc/{pid}/smaps") as f:
        for line in f:
            fields = line.split()
            if "-" in fields[0] and len(fields) >= 5 and ":" in fields[3]:
                inside = len(fields) >= 6 and fields[5] == path
            elif inside and fields[0] == "Pss:":
                total += int(fields[1]) * 1024
    return total


def private_bytes() -> int:
    """Memory only this process holds (Private_Clean + Private_Dirty)."""
    total = 0
    with open("/proc/self/smaps_rollup") as f:
        for line in f:
            if line.startswith(("Private_Clean:", "Private_Dirty:")):
                total += int(line.split()[1]) * 1024
    return total


def _read_all(m: pfm.Module) -> float:
    return float(sum(float(np.asarray(w, np.float64).sum()) for w in m.state_dict().values()))


def _worker(path: str, module, copy: bool, barrier, results) -> None:
    m = module if module is not None else pfm.load(path, copy=copy)
    checksum = _read_all(m)
    barrier.wait()                     # everybody has read everything
    results.put((checksum, file_pss(path), private_bytes()))
    barrier.wait()                     # nobody exits before all have measured


def _run(method: str, path: str, copy: bool = False):
    ctx = mp.get_context(method)
    module = pfm.load(path) if method == "fork" else None
    barrier, results = ctx.Barrier(WORKERS), ctx.Queue()
    procs = [ctx.Process(target=_worker, args=(path, module, copy, barrier, results))
             for _ in range(WORKERS)]
    for p in procs:
        p.start()
    out = [results.get(timeout=120) for _ in procs]
    for p in procs:
        p.join(timeout=60)
        assert 0 == p.exitcode
    return out


@pytest.fixture(scope="module")
def model_file(tmp_path_factory):
    path = os.path.realpath(str(tmp_path_factory.mktemp("shared") / "model.ff"))
    _model(path)
    return path


@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_workers_share_one_copy(model_file, method):
    with pfm.load(model_file) as m:
        expected = _read_all(m)
    out = _run(method, model_file)
    assert all(expected == checksum for checksum, _, _ in out)
    total = sum(pss for _, pss, _ in out)
    size = os.path.getsize(model_file)
    assert total <= 1.10 * size + 4 * MIB, f"{total / MIB:.1f} MiB for a {size / MIB:.1f} MiB file"
    assert total >= 0.9 * WEIGHT_BYTES      # the pages really were read


def test_copying_costs_a_copy_per_worker(model_file):
    """The control: copy=True reads the file into each worker's own memory, so the
    same measurement sees WORKERS copies."""
    size = os.path.getsize(model_file)
    mapped = _run("spawn", model_file)
    copied = _run("spawn", model_file, copy=True)
    assert all(0 == pss for _, pss, _ in copied)          # nothing mapped
    extra = [c[2] - m[2] for c, m in zip(sorted(copied, key=lambda r: r[2]),
                                         sorted(mapped, key=lambda r: r[2]))]
    assert all(n >= 0.95 * size for n in extra), [n / MIB for n in extra]
