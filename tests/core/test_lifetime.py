"""Arrays and proxies keep the file alive; close() never invalidates them."""
from __future__ import annotations

import gc
import mmap
import os
import subprocess
import sys
import weakref

import numpy as np
import pytest

import pyflatmodule as pfm

from support import load_expectation, model_path

MLP = model_path("mlp_jit.ff")


def _expected_bytes(path, key):
    doc, arrays = load_expectation(path, "oracle")
    return arrays[doc["state_dict"]["tensors"][key]["data"]].tobytes()


def test_arrays_outlive_close_and_module():
    m = pfm.load(MLP)
    w = m.state_dict()["0.weight"]
    root = m.root
    m.close()
    del m
    gc.collect()
    assert _expected_bytes("mlp_jit.ff", "0.weight") == np.ascontiguousarray(w).tobytes()
    assert isinstance(root.attributes["0"], pfm.Object)


def test_closed_module_raises_clear_error():
    m = pfm.load(MLP)
    m.close()
    assert m.closed
    for use in (lambda: m.state_dict(), lambda: m.root, lambda: m.ivalues, lambda: m.info()):
        with pytest.raises(ValueError, match="closed"):
            use()
    m.close()  # closing twice is fine


def test_context_manager_closes():
    with pfm.load(MLP) as m:
        w = m.state_dict()["0.bias"]
    assert m.closed
    assert w.sum() == np.frombuffer(w.tobytes(), w.dtype).sum()


def test_mapping_released_when_last_view_goes():
    m = pfm.load(MLP)
    mm = m._img().source.obj
    assert isinstance(mm, mmap.mmap)
    ref = weakref.ref(m._img())
    w = m.state_dict()["0.weight"]
    m.close()
    del m
    gc.collect()
    assert ref() is None            # the index is gone, the array holds only the mapping
    assert not mm.closed            # ... which the array keeps alive
    base = w
    while isinstance(base, np.ndarray) and base.base is not None:
        base = base.base
    assert mm is (base.obj if isinstance(base, memoryview) else base)
    del w, base
    gc.collect()


def test_arrays_are_read_only_and_zero_copy():
    with open(MLP, "rb") as f:
        data = f.read()
    m = pfm.load(data)
    w = m.state_dict()["0.weight"]
    assert not w.flags.writeable
    with pytest.raises(ValueError):
        w[0, 0] = 1.0
    assert np.shares_memory(w, np.frombuffer(data, np.uint8))


def test_writable_source_still_gives_read_only_views():
    with open(MLP, "rb") as f:
        data = bytearray(f.read())
    m = pfm.load(data)
    w = m.state_dict()["0.weight"]
    assert not w.flags.writeable
    assert np.shares_memory(w, np.frombuffer(data, np.uint8))
    assert all(not s.flags.writeable for s in m.storages)
    with pytest.raises(ValueError):
        w.flags.writeable = True


def test_copies_drop_the_file():
    m = pfm.load(MLP)
    w = np.array(m.state_dict()["0.weight"])
    assert w.flags.writeable and w.base is None


def test_proxies_are_shared_and_keep_the_file():
    m = pfm.load(model_path("deep_wide.ff"))
    root = m.root
    assert root is m.root
    m.close()
    assert root.type_name.startswith("__torch__")


def _open_descriptors() -> int:
    import os
    return len(os.listdir("/proc/self/fd"))


@pytest.mark.skipif(not __import__("os").path.isdir("/proc/self/fd"), reason="needs /proc")
def test_no_descriptor_is_left_open_by_a_load(tmp_path):
    """Loads that succeed, fail on the file's bytes, are refused an out-of-range
    option, or are given a directory all leave the process's descriptors as they
    were (found: an option overflowing its C type left one open)."""
    bad = tmp_path / "bad.ptl"
    bad.write_bytes(b"\0" * 64)
    path = model_path("mlp_jit.ff")
    attempts = [lambda: pfm.load(path), lambda: pfm.verify(path),
                lambda: pfm.load(bad), lambda: pfm.load(path, max_depth=-1),
                lambda: pfm.load(path, max_elements=2**70), lambda: pfm.load(tmp_path)]
    before = _open_descriptors()
    for attempt in attempts * 3:
        try:
            attempt()
        except (pfm.FormatError, ValueError, IsADirectoryError):
            pass
    gc.collect()
    assert _open_descriptors() == before


#: A child that keeps each FormatError of a damaged file in a reference cycle (the
#: exception's traceback holds the frame that holds the exception), then collects them.
_KEEP_ERRORS_IN_CYCLES = r"""
import gc, sys
import pyflatmodule as pfm

def hold(source, read):
    try:
        read(pfm.load(source))
    except pfm.FormatError as e:
        caught = e   # e's traceback holds this frame, which holds e
        return caught.code
    return None

codes = []
for path, reads in ((sys.argv[1], lambda m: m.state_dict()),
                    (sys.argv[2], lambda p: p.methods)):
    with open(path, "rb") as f:
        data = f.read()
    for i in range(0, len(data), int(sys.argv[3])):
        b = bytearray(data)
        b[i] ^= 0xFF
        codes.append(hold(memoryview(bytes(b)), reads))
gc.collect()
print(sum(c is not None for c in codes))
"""


def test_errors_kept_in_reference_cycles_are_collected_without_a_crash():
    """A FormatError kept with its frames, from a file given as a memoryview: the frames
    held the C core's view of the buffer and the memoryview, and CPython's collector
    clears such a memoryview while the view still holds it (found when a test kept two
    errors to compare them: the process died in the collector). In a child: it would
    crash."""
    xnnpack = model_path(os.path.join("et", "xnn_q8_per_channel.pte"))
    r = subprocess.run([sys.executable, "-c", _KEEP_ERRORS_IN_CYCLES, MLP, xnnpack, "5"],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    assert int(r.stdout) > 100, r.stdout   # the damaged files were refused, errors kept
