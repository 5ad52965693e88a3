"""Single-byte edits and truncations of every real model file, PTMF and ExecuTorch
(fast, strided subset).

The full exhaustive sweep (every position, 4 values each, every truncation, about
900,000 inputs) is ``pytest tests/fuzz/test_sweep.py --full-sweep`` (CI runs it) or
``python tests/fuzz/sweep.py`` (see there).
Here a deterministic strided subset of the same mutations runs on every file, in
worker processes: a crash or a hang fails the test naming the saved input. Every
input is loaded with verify=True and verify=False and decoded in full (but for the
unverified load of an input the verified one decoded in full: it must index it alike);
only a well-formed FormatError (code, offset inside the data, field path) may escape.
"""
from __future__ import annotations

import faulthandler
import os
import signal
import sys
import time
from typing import Tuple

import pytest

from pyflatmodule.executorch.backends import MODULES

from support.paths import FUZZ

sys.path.insert(0, FUZZ)

import fuzz_load  # noqa: E402
import sweep  # noqa: E402

FILES = sweep.model_files()
PER_FILE = 200


def _report(result: sweep.Result) -> str:
    return "\n".join(str(f) for f in result.findings[:20])


def test_strided_sweep_of_every_model_file(tmp_path) -> None:
    jobs = []
    for name, path in FILES:
        with open(path, "rb") as f:
            data = f.read()
        jobs.append((name, data, sweep.strided_mutations(data, PER_FILE)))
    result = sweep.run(jobs, str(tmp_path), workers=2, timeout=30)
    print(f"strided sweep over {len(FILES)} files: {result.summary()}")
    assert result.inputs == sum(len(m) for _, _, m in jobs)
    assert result.decodes == 2 * result.inputs
    assert not result.findings, _report(result)
    # both outcomes occur: the subset is not trivially all-rejected or all-accepted
    kinds = {k for (_, k, _) in result.counts}
    assert {"ok", "format_error"} <= kinds


@pytest.mark.full_sweep
def test_full_sweep_of_every_model_file(tmp_path, pytestconfig) -> None:
    """Every single-byte edit and every truncation of every model file (deselected
    unless ``--full-sweep`` is given: about 50 minutes on 2 cores), or with
    ``--sweep-shard K/N`` the K-th of N interleaved shards of those inputs."""
    k, n = (int(x) for x in pytestconfig.getoption("--sweep-shard").split("/"))
    assert 0 <= k < n, "--sweep-shard K/N needs 0 <= K < N"
    result = sweep.sweep_files(FILES, sweep.VALUES, True, True, (k, n), str(tmp_path),
                               workers=min(2, os.cpu_count() or 1), timeout=30)
    print(f"full sweep, shard {k}/{n}, over {len(FILES)} files: {result.summary()}")
    expected = 0
    for _, path in FILES:
        with open(path, "rb") as f:
            data = f.read()
        every = sum(len(sweep.new_values(x)) for x in data) + len(data)
        chunks = -(-every // 64)
        expected += sum(min(64, every - 64 * c) for c in range(k, chunks, n))
    assert result.inputs == expected
    assert result.decodes == 2 * result.inputs
    assert not result.findings, _report(result)


def test_an_unverified_load_must_index_a_verified_file_alike(monkeypatch) -> None:
    """The verify=False half of a verified input: ok for every model file as written;
    a difference in any indexed array is a finding."""
    for name, path in FILES:
        with open(path, "rb") as f:
            assert sweep.unverified_like_verified(f.read()) == ("ok", ""), name
    index_arrays = sweep._index_arrays
    calls = []

    def second_differs(f):
        calls.append(f)
        arrays = index_arrays(f)
        if len(calls) % 2 == 0:   # the unverified load's first array a record short
            i = next(k for k, (_, a) in enumerate(arrays) if len(a))
            name, a = arrays[i]
            arrays[i] = (name, a[:-1])
        return arrays

    monkeypatch.setattr(sweep, "_index_arrays", second_differs)
    for name, path in FILES[:3] + FILES[-3:]:
        with open(path, "rb") as f:
            kind, detail = sweep.unverified_like_verified(f.read())
        assert kind == "unverified_differs" and "differs" in detail, name


def test_mutation_sets() -> None:
    data = bytes([0x00, 0x01, 0x80, 0xFF, 0x7E])
    muts = sweep.all_mutations(data)
    sets = [m for m in muts if m[0] == "set"]
    assert sweep.new_values(0x00) == [0x01, 0x80, 0xFF]
    assert sweep.new_values(0xFF) == [0xFE, 0x7F, 0x00]
    assert sweep.new_values(0x7E) == [0x7F, 0xFE, 0x00, 0xFF]
    assert len(sets) == sum(len(sweep.new_values(x)) for x in data)
    assert all(sweep.apply(data, m) != data for m in sets)
    assert [m[1] for m in muts if m[0] == "cut"] == list(range(len(data)))
    name, path = FILES[0]
    with open(path, "rb") as f:
        real = f.read()
    subset = sweep.strided_mutations(real, PER_FILE)
    assert subset == sweep.strided_mutations(real, PER_FILE)      # deterministic
    assert set(subset) <= set(sweep.all_mutations(real))
    assert {m[1] for m in subset if m[0] == "set"} >= set(range(8))  # the whole header


# ------------------------------------------------------------ the fuzz corpus

CORPUS = os.path.join(FUZZ, "corpus")


def test_fuzz_corpus_replays(tmp_path) -> None:
    """Every input kept from coverage-guided fuzzing (tests/fuzz/corpus) still loads
    and decodes, or fails with a well-formed FormatError, in both verify modes."""
    names = sorted(os.listdir(CORPUS))
    assert names, "tests/fuzz/corpus is empty"
    jobs = []
    for name in names:
        with open(os.path.join(CORPUS, name), "rb") as f:
            jobs.append((name, f.read(), [("none", 0, 0)]))
    result = sweep.run(jobs, str(tmp_path), workers=2, timeout=30)
    print(f"fuzz corpus: {result.summary()}")
    assert result.inputs == len(names)
    assert not result.findings, _report(result)


def test_fuzz_corpus_stays_small() -> None:
    sizes = [os.path.getsize(os.path.join(CORPUS, n)) for n in os.listdir(CORPUS)]
    assert sum(sizes) < 2 << 20 and max(sizes) <= 32 << 10


def test_fuzz_seeds_hold_every_payload_kind() -> None:
    """The coverage-guided harness' seeds hold a program with a delegate of every backend
    whose payloads are read (so that fuzzing reaches each reader and its C checks), but
    QNN's, whose only program (tests/data/wild) is past libFuzzer's default 1 MiB."""
    held = set()
    for path in fuzz_load.seed_paths():
        with open(path, "rb") as f:
            data = f.read()
        held |= {i for i in MODULES if i.encode() in data}
    missing = [i for i in MODULES if i not in held]
    assert missing == ["QnnBackend"]


# ------------------------------------------------- the harness catches what it must

def _crash_on_ff(buf: bytes, verify: bool) -> Tuple[str, str]:
    if buf[:1] == b"\xff":
        faulthandler.disable()      # an intended crash: no traceback on stderr
        os.kill(os.getpid(), signal.SIGSEGV)
    return "ok", ""


def _hang_on_ff(buf: bytes, verify: bool) -> Tuple[str, str]:
    if buf[:1] == b"\xff":
        time.sleep(3600)
    return "ok", ""


def _raise_on_ff(buf: bytes, verify: bool) -> Tuple[str, str]:
    return ("exception", "KeyError: boom") if buf[:1] == b"\xff" else ("ok", "")


@pytest.mark.parametrize("target, kind", [(_crash_on_ff, "crash"), (_hang_on_ff, "hang"),
                                          (_raise_on_ff, "exception")])
def test_harness_reports_crash_hang_and_exception_with_the_input(tmp_path, target,
                                                                   kind) -> None:
    data = bytes(range(8, 16))
    muts = [("set", 3, 0), ("set", 0, 0xFF), ("set", 5, 0), ("cut", 4, 0)]
    result = sweep.run([("toy", data, muts)], str(tmp_path), workers=1, timeout=2,
                       chunk=8, target=target)
    assert result.inputs == 4
    # a crash or hang ends the input (no verify mode recorded); an exception is
    # reported per verify mode
    assert len(result.findings) == (2 if kind == "exception" else 1)
    for f in result.findings:
        assert f.kind == kind and f.mutation == ("set", 0, 0xFF)
        with open(f.file, "rb") as fh:
            assert fh.read() == b"\xff" + data[1:]
        assert f.file in str(f)
    # every other input ran, in a new worker after a crash or hang
    assert result.decodes == 2 * (3 if kind != "exception" else 4)


class _EndsChunkOnRead:
    """A worker's start-time slot whose worker ends its chunk (zeroes the slot) right
    after the first read."""

    def __init__(self, start: float) -> None:
        self.values = [start]

    def __getitem__(self, slot: int) -> float:
        return self.values.pop() if self.values else 0.0


def test_a_chunk_ending_while_the_parent_looks_is_not_a_hang() -> None:
    # A full sweep in CI once reported a 33,170 s hang this way: the start time, then
    # monotonic() - 0.0.
    assert 0.9 < sweep.running_for(_EndsChunkOnRead(time.monotonic() - 1.0), 0) < 30
    assert sweep.running_for(_EndsChunkOnRead(0.0), 0) == 0.0


# ------------------------------------------------------------ verify's promise

#: Edits per file for the promise below: other positions than the strided sweep's.
PROMISE_PER_FILE = 300


def _verified_only(buf: bytes, verify: bool) -> Tuple[str, str]:
    return sweep.judge(buf, True) if verify else ("skipped", "")


def test_files_that_pass_verify_decode_in_full(tmp_path) -> None:
    """verify's promise over the sweep's own inputs: of a deterministic sample (every
    N-th single-byte edit and truncation of every model file), each input that passes
    ``load(verify=True)`` decodes in full (tests/support/decode_all.py) without FormatError,
    budgets aside (``sweep.LATE_BUDGET_CODES``)."""
    jobs = []
    for name, path in FILES:
        with open(path, "rb") as f:
            data = f.read()
        jobs.append((name, data, sweep.strided_mutations(data, PROMISE_PER_FILE, seed=1)))
    result = sweep.run(jobs, str(tmp_path), workers=2, timeout=30, target=_verified_only)
    print(f"verify promise over {len(FILES)} files: {result.summary()}")
    assert not result.findings, _report(result)
    loaded = sum(n for (verify, kind, _), n in result.counts.items() if verify and kind == "ok")
    rejected = sum(n for (verify, kind, _), n in result.counts.items()
                   if verify and kind == "format_error")
    # the sample holds both: edits verify passes (then decoded in full) and rejects
    assert loaded > len(FILES) and rejected > len(FILES), (loaded, rejected)
