#!/usr/bin/env python3
"""Exhaustive single-byte edits and truncations of the real model files.

Every mutated file goes through ``load()`` plus a full decode (``decode_all``), with
verify=True and with verify=False (for an input the verified run decoded in full, the
unverified load must index it exactly alike, and its decode, which would read the same
index over the same bytes, is not repeated), in worker processes: a crash (signal) or
a hang (an input running over ``--timeout`` seconds) kills only the worker, and the exact
input is written to ``--out`` and named in the report. Workers run under a 3 GiB
address-space limit, so an unbounded allocation surfaces as a MemoryError finding.

Full sweep, one command (prints counts per file and the total, exits 1 on a finding):

    python tests/fuzz/sweep.py                      # all files, 4 values per position
    python tests/fuzz/sweep.py --files mlp_jit.ff --workers 1
    python tests/fuzz/sweep.py --files $(cd tests/data/et && ls *.pte *.ptd)   # ExecuTorch

Mutations per file: for every byte position p with value x, the distinct values among
x^0x01, x^0x80, 0x00, 0xff that differ from x; and every truncation length 0..len-1.

Findings: a crash, a hang, any exception other than FormatError, a FormatError
without code, offset or path, and ("late_error") an input that loads with
verify="full" and then raises FormatError during the full decode: verify promises
that a file it passes decodes in full (budgets aside: LATE_BUDGET_CODES); ("plans_differ")
an input refused by one of verify="full" and the default load with a program's plans
read (which checks them) and not by the other; and ("unverified_differs") a verified
input that loads otherwise without verify.
tests/fuzz/test_sweep.py runs a deterministic strided subset of the same mutations.
"""
from __future__ import annotations

import argparse
import faulthandler
import multiprocessing as mp
import multiprocessing.connection as mpc
import os
import resource
import shutil
import signal
import struct
import sys
import tempfile
import time
from collections import Counter
from typing import Any, Iterable, List, Optional, Sequence, Tuple

HERE = os.path.dirname(os.path.abspath(__file__))
TESTS = os.path.dirname(HERE)
ROOT = os.path.dirname(TESTS)
if TESTS not in sys.path:
    sys.path.insert(0, TESTS)
try:                   # the installed (or in-place built) package, never the bare sources
    import pyflatmodule  # noqa: F401
except ImportError:
    sys.path.insert(1, ROOT)

DATA = os.path.join(TESTS, "data")
SAMPLE = os.path.join(ROOT, "pyflatmodule", "data", "sample.ptl")

#: A mutation: ("set", position, new byte), ("u32", position, new little-endian
#: uint32), ("cut", new length, 0) or ("none", 0, 0) (the data as it is).
Mutation = Tuple[str, int, int]

VALUES = ("xor01", "xor80", "zero", "ff")
MEMORY_LIMIT = 3 << 30
#: Errors a verified file may still raise while decoding: resource budgets, which
#: the verifier measures per value and the decoder per call.
LATE_BUDGET_CODES = frozenset({"depth_budget", "element_budget", "table_budget"})
#: Outcome kinds that are findings.
FINDING_KINDS = ("bad_error", "exception", "late_error", "plans_differ", "unverified_differs")


ET_DATA = os.path.join(DATA, "et")


#: The data file in ExecuTorch 0.6.0's layout, which has a schema and a walk of its own.
OLD_DATA_FILE = os.path.join("releases", "0.6.0", "mlp_external.ptd")


def model_files() -> List[Tuple[str, str]]:
    """(name, path) of every real model file: tests/data/*.ff, *.ptl, the sample, the
    ExecuTorch programs, data files, bundled programs and ETDumps tests/data/et/*.pte,
    *.ptd, *.bpte, *.etdump, and the data file 0.6.0 wrote (:data:`OLD_DATA_FILE`)."""
    names = sorted(f for f in os.listdir(DATA) if f.endswith((".ff", ".ptl")))
    et = sorted(f for f in os.listdir(ET_DATA)
                if f.endswith((".pte", ".ptd", ".bpte", ".etdump")))
    return ([(n, os.path.join(DATA, n)) for n in names] + [("sample.ptl", SAMPLE)]
            + [(n, os.path.join(ET_DATA, n)) for n in et]
            + [(OLD_DATA_FILE, os.path.join(DATA, OLD_DATA_FILE))])


def new_values(x: int, values: Sequence[str] = VALUES) -> List[int]:
    out: List[int] = []
    for v in values:
        y = {"xor01": x ^ 0x01, "xor80": x ^ 0x80, "zero": 0x00, "ff": 0xFF}[v]
        if y != x and y not in out:
            out.append(y)
    return out


def all_mutations(data: bytes, values: Sequence[str] = VALUES) -> List[Mutation]:
    """Every single-byte edit (the given values) and every truncation."""
    out: List[Mutation] = [("set", p, y) for p in range(len(data))
                           for y in new_values(data[p], values)]
    out += [("cut", n, 0) for n in range(len(data))]
    return out


def strided_mutations(data: bytes, budget: int, seed: int = 0) -> List[Mutation]:
    """About ``budget`` mutations spread evenly over the file: byte edits at a
    stride (the value rotating through VALUES), plus the 8-byte header edited fully,
    plus truncations at a stride and the last 8 lengths. Deterministic."""
    n = len(data)
    edits = all_mutations(data)
    sets = [m for m in edits if m[0] == "set"]
    head = [m for m in sets if m[1] < 8]
    body = [m for m in sets if m[1] >= 8]
    cuts_budget = max(8, budget // 8)
    stride = max(1, len(body) // max(1, budget - len(head) - cuts_budget))
    picked = head + body[seed % stride::stride]
    cut_stride = max(1, n // cuts_budget)
    cuts = sorted(set(range(seed % cut_stride, n, cut_stride)) | set(range(max(0, n - 8), n)))
    return picked + [("cut", k, 0) for k in cuts]


def apply(data: bytes, m: Mutation) -> bytes:
    kind, a, b = m
    if kind == "none":
        return data
    if kind == "cut":
        return data[:a]
    out = bytearray(data)
    if kind == "u32":
        struct.pack_into("<I", out, a, b)
    else:
        out[a] = b
    return bytes(out)


def describe(m: Mutation, data: bytes) -> str:
    kind, a, b = m
    if kind == "none":
        return "unchanged"
    if kind == "cut":
        return f"truncated to {a} bytes"
    if kind == "u32":
        return f"uint32 at {a} 0x{struct.unpack_from('<I', data, a)[0]:08x} -> 0x{b:08x}"
    return f"byte {a} 0x{data[a]:02x} -> 0x{b:02x}"


# ------------------------------------------------------------------ workers

def _refused(buf: bytes, verify: Any) -> bool:
    """Whether ``load(buf, verify=verify)`` raises FormatError, a program's (or a
    bundled program's) plans read too: the default checks them then."""
    import pyflatmodule as pfm

    from support.decode_all import read_plans
    try:
        with pfm.load(buf, verify=verify) as f:
            read_plans(f)
    except pfm.FormatError:
        return True
    return False


def judge(buf: bytes, verify: bool) -> Tuple[str, str]:
    """``decode_all.outcome``, plus verify's promises: with verify=True, a FormatError
    raised after ``load(verify="full")`` succeeded is ("late_error", code), budgets
    aside; the default refuses (at open or at the plans' first read) what "full" does."""
    from support.decode_all import outcome
    kind, detail = outcome(buf, verify)
    if not verify or kind != "format_error" or detail in LATE_BUDGET_CODES:
        return kind, detail
    full, lazy = _refused(buf, "full"), _refused(buf, True)
    if full != lazy:
        return "plans_differ", (f"verify='full' {'refused' if full else 'passed'}, the "
                                f"default with the plans read {'refused' if lazy else 'passed'}")
    if full:
        return kind, detail
    return "late_error", f"load(verify='full') passed, the full decode raised {detail}"


def _index_arrays(f: Any) -> List[Tuple[str, Any]]:
    """What the C passes indexed of a loaded file, by name: the arrays the decoding
    layer reads (with the bytes) to decode every value."""
    import pyflatmodule as pfm
    if isinstance(f, pfm.Module):
        image = f._img()
        return [(name, getattr(image, name)) for name in
                ("index", "tensor_index", "storage_index", "dims")]
    if isinstance(f, pfm.BundledProgram):   # what it adds to its program's: the span
        import numpy as np
        return [("program_span", np.array(f.program_span)), *_index_arrays(f.program)]
    if isinstance(f, pfm.ETDump):   # no index: what the C pass counted and found
        import numpy as np
        s = f._summary
        return [("summary", np.array([s.root, s.size, s.n_runs, s.n_events, s.n_profile,
                                      s.n_allocation, s.n_debug, s.n_debug_tensors]))]
    records, blobs = f._index()
    return [("records", records), ("blobs", blobs)]


def _field_bytes(a: Any) -> bytes:
    """The bytes of an array's values, a record's fields packed (their padding holds
    whatever the C passes left there), to compare bit for bit (a NaN equals itself); of
    a list of cffi structs (the ExecuTorch index), their scalar fields' values."""
    if isinstance(a, list):
        from pyflatmodule.core.native import ffi
        return repr([[getattr(r, name) for name, f in ffi.typeof(r).fields
                      if f.type.kind == "primitive"] for r in a]).encode()
    from numpy.lib import recfunctions
    return (recfunctions.repack_fields(a) if a.dtype.names else a).tobytes()


def unverified_like_verified(buf: bytes) -> Tuple[str, str]:
    """verify=False on an input that loaded with verify=True and decoded in full. The
    unverified C passes run, and must index it exactly as the verified ones did; its
    full decode is then not repeated: the decoding layer reads that index and the
    bytes, whose every check verify=True passed, so it would read the same values.
    ("unverified_differs", what) when the index differs or the load raises."""
    import traceback

    import pyflatmodule as pfm
    try:
        with pfm.load(buf, verify=True) as verified, pfm.load(buf, verify=False) as unverified:
            for (name, a), (_, b) in zip(_index_arrays(verified), _index_arrays(unverified)):
                if _field_bytes(a) != _field_bytes(b):
                    return "unverified_differs", f"the unverified load's {name} differs"
    except pfm.FormatError as e:
        return "unverified_differs", f"load(verify=False) raised {e.code}"
    except Exception:  # noqa: BLE001 - any other exception is a finding
        return "exception", traceback.format_exc(limit=12)
    return "ok", ""


def limit_address_space(extra: int) -> None:
    """Allow ``extra`` bytes of address space beyond what the process maps now (under
    AddressSanitizer the shadow memory alone maps terabytes, so an absolute limit
    would fail every allocation)."""
    try:
        with open("/proc/self/statm") as f:
            current = int(f.read().split()[0]) * resource.getpagesize()
    except OSError:
        current = 0
    try:
        resource.setrlimit(resource.RLIMIT_AS, (current + extra, current + extra))
    except (ValueError, OSError):
        pass


def _worker(conn: Any, progress: Any, started: Any, slot: int, target: Any,
            raw: bool, stacks: str) -> None:
    """Run chunks sent over ``conn``: (data, mutations); reply with a summary.
    SIGUSR1 writes the worker's Python stack to ``stacks``/<pid> (for hang reports)."""
    stack_file = open(os.path.join(stacks, str(os.getpid())), "w")
    faulthandler.register(signal.SIGUSR1, file=stack_file)
    limit_address_space(MEMORY_LIMIT)
    if target is None:
        target = judge
    while True:
        job = conn.recv()
        if job is None:
            return
        data, muts = job
        counts: Counter = Counter()
        findings: List[Tuple[int, bool, str, str]] = []
        for k, m in enumerate(muts):
            progress[slot] = k
            started[slot] = time.monotonic()
            buf = None if raw else apply(data, m)
            for verify in (True, False):
                if raw:
                    kind, detail = target(data, m, verify)
                elif not verify and target is judge and kind == "ok":
                    kind, detail = unverified_like_verified(buf)
                else:
                    kind, detail = target(buf, verify)
                counts[(verify, kind, detail if kind == "format_error" else "")] += 1
                if kind in FINDING_KINDS:
                    findings.append((k, verify, kind, detail))
        started[slot] = 0.0
        conn.send((counts, findings))


def running_for(started: Any, slot: int) -> float:
    """Seconds the worker in ``slot`` has spent on its current input; 0.0 between
    chunks. ``started[slot]`` is read once: the worker zeroes it when it ends a chunk,
    so a second read could see 0.0 after a start time (a false hang of hours)."""
    since = started[slot]
    return time.monotonic() - since if since else 0.0


class Finding:
    """One input that broke the promise."""

    def __init__(self, label: str, mutation: Mutation, kind: str, detail: str,
                 verify: Optional[bool], file: str) -> None:
        self.label, self.mutation, self.kind = label, mutation, kind
        self.detail, self.verify, self.file = detail, verify, file

    def __str__(self) -> str:
        mode = "" if self.verify is None else f" verify={self.verify}"
        return (f"{self.kind}: {self.label} {self.mutation}{mode} -> input saved as "
                f"{self.file}\n{self.detail.rstrip()}")


class Result:
    def __init__(self) -> None:
        self.inputs = 0
        self.decodes = 0
        self.counts: Counter = Counter()
        self.findings: List[Finding] = []
        self.seconds = 0.0

    def summary(self) -> str:
        ok = sum(n for (_, k, _), n in self.counts.items() if k == "ok")
        fe = sum(n for (_, k, _), n in self.counts.items() if k == "format_error")
        return (f"{self.inputs} inputs, {self.decodes} runs (a load and a full decode, or "
                "an unverified load indexed as the verified one): "
                f"{ok} ok, {fe} FormatError, {len(self.findings)} findings, "
                f"{self.seconds:.1f} s")


def _stack_of(proc: Any, stacks: str) -> str:
    """Kill a hung worker, first asking it for its Python stack."""
    path = os.path.join(stacks, str(proc.pid))
    try:
        os.kill(proc.pid, signal.SIGUSR1)
        time.sleep(0.5)
    except OSError:
        pass
    proc.kill()
    proc.join(5)
    try:
        with open(path) as f:
            return f.read().strip() or "(none written)"
    except OSError:
        return "(none written)"


def run(jobs: Iterable[Tuple[str, bytes, List[Mutation]]], out_dir: str, workers: int = 2,
        timeout: float = 20.0, chunk: int = 64, target: Any = None,
        raw: bool = False) -> Result:
    """Run every (label, data, mutations) job in ``workers`` processes.

    A worker that dies (a signal: crash) or spends over ``timeout`` seconds on one
    input (a hang) is replaced; the input is saved and recorded, and the rest of its
    chunk goes on in the new worker. ``target(buf, verify) -> (kind, detail)`` judges
    one input (default: ``judge``); with ``raw``, ``target(data, mutation,
    verify)`` gets the original data and applies the mutation itself."""
    ctx = mp.get_context("fork" if sys.platform.startswith("linux") else "spawn")
    progress = ctx.Array("q", workers, lock=False)
    started = ctx.Array("d", workers, lock=False)
    result = Result()
    t0 = time.monotonic()
    queue: List[Tuple[str, bytes, List[Mutation]]] = []
    for label, data, muts in jobs:
        for i in range(0, len(muts), chunk):
            queue.append((label, data, muts[i:i + chunk]))
    queue.reverse()
    procs: List[Any] = [None] * workers
    conns: List[Any] = [None] * workers
    busy: List[Any] = [None] * workers
    stacks = tempfile.mkdtemp(prefix="sweep-stacks-")

    def start(slot: int) -> None:
        parent, child = ctx.Pipe()
        p = ctx.Process(target=_worker,
                        args=(child, progress, started, slot, target, raw, stacks),
                        daemon=True)
        p.start()
        child.close()
        procs[slot], conns[slot] = p, parent

    def save(label: str, data: bytes, m: Mutation, kind: str) -> str:
        os.makedirs(out_dir, exist_ok=True)
        name = f"{kind}-{label.replace('/', '_')}-{m[0]}-{m[1]}-{m[2]:02x}.bin"
        path = os.path.join(out_dir, name)
        with open(path, "wb") as f:
            f.write(apply(data, m))
        return path

    def lost(slot: int, kind: str, detail: str) -> None:
        """The worker in ``slot`` crashed or hung on its current input."""
        label, data, muts = busy[slot]
        k = int(progress[slot])
        m = muts[k]
        result.findings.append(Finding(label, m, kind, detail + f" ({describe(m, data)})",
                                       None, save(label, data, m, kind)))
        result.inputs += 1
        # The chunk's counts died with the worker: run the inputs before the lost
        # one again (deterministic) and those after it, in fresh workers.
        for rest in (muts[:k], muts[k + 1:]):
            if rest:
                queue.append((label, data, rest))
        busy[slot] = None
        start(slot)

    for slot in range(workers):
        start(slot)
    try:
        while queue or any(b is not None for b in busy):
            for slot in range(workers):
                if busy[slot] is None and queue:
                    busy[slot] = queue.pop()
                    progress[slot] = 0
                    started[slot] = time.monotonic()
                    label, data, muts = busy[slot]
                    conns[slot].send((data, muts))
            waitables = [c for c, b in zip(conns, busy) if b is not None]
            waitables += [p.sentinel for p, b in zip(procs, busy) if b is not None]
            ready = mpc.wait(waitables, timeout=0.5)
            for slot in range(workers):
                if busy[slot] is None:
                    continue
                conn, proc = conns[slot], procs[slot]
                if conn in ready or conn.poll():
                    try:
                        counts, findings = conn.recv()
                    except (EOFError, OSError):
                        proc.join(1)
                        lost(slot, "crash", f"worker died, exit code {proc.exitcode}")
                        continue
                    label, data, muts = busy[slot]
                    result.inputs += len(muts)
                    result.counts.update(counts)
                    for k, verify, kind, detail in findings:
                        m = muts[k]
                        result.findings.append(Finding(
                            label, m, kind, f"{describe(m, data)}\n{detail}", verify,
                            save(label, data, m, kind)))
                    busy[slot] = None
                elif not proc.is_alive():
                    proc.join(1)
                    lost(slot, "crash", f"worker died, exit code {proc.exitcode}")
                else:
                    took = running_for(started, slot)
                    if took > timeout:
                        lost(slot, "hang", f"one input ran {took:.1f} s (limit {timeout} "
                                           f"s); worker stack:\n{_stack_of(proc, stacks)}")
    finally:
        for slot in range(workers):
            try:
                conns[slot].send(None)
            except (OSError, ValueError, AttributeError):
                pass
        for p in procs:
            if p is not None:
                p.join(2)
                if p.is_alive():
                    p.kill()
                    p.join()
        shutil.rmtree(stacks, ignore_errors=True)
    result.decodes = sum(result.counts.values())
    result.seconds = time.monotonic() - t0
    return result


def mutations(data: bytes, values: Sequence[str], sets: bool = True, cuts: bool = True,
              shard: Tuple[int, int] = (0, 1)) -> List[Mutation]:
    """The sweep's edits of ``data``: value changes, then truncations; with a shard
    (K, N), only every N-th chunk of 64 from chunk K."""
    muts = [m for m in all_mutations(data, values) if m[0] == "set"] if sets else []
    if cuts:
        muts += [("cut", c, 0) for c in range(len(data))]
    k, n = shard
    return [m for i, m in enumerate(muts) if (i // 64) % n == k]


def sweep_files(files: Sequence[Tuple[str, str]], values: Sequence[str], sets: bool,
                cuts: bool, shard: Tuple[int, int], out: str, workers: int,
                timeout: float) -> Result:
    """Sweep each (name, path) in turn, printing a line per file; the summed result."""
    total = Result()
    t0 = time.monotonic()
    for name, path in files:
        with open(path, "rb") as f:
            data = f.read()
        r = run([(name, data, mutations(data, values, sets, cuts, shard))], out, workers,
                timeout)
        print(f"{name:28s} {len(data):6d} bytes: {r.summary()}", flush=True)
        for fnd in r.findings:
            print("  " + str(fnd).replace("\n", "\n    "), flush=True)
        total.inputs += r.inputs
        total.decodes += r.decodes
        total.counts.update(r.counts)
        total.findings += r.findings
    total.seconds = time.monotonic() - t0
    return total


def main(argv: Optional[Sequence[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--files", nargs="*", help="file names (default: every model file)")
    ap.add_argument("--values", default=",".join(VALUES),
                    help=f"comma-separated subset of {','.join(VALUES)}")
    ap.add_argument("--no-cuts", action="store_true", help="skip the truncations")
    ap.add_argument("--cuts-only", action="store_true", help="only the truncations")
    ap.add_argument("--workers", type=int, default=min(2, os.cpu_count() or 1))
    ap.add_argument("--timeout", type=float, default=20.0, help="seconds per input")
    ap.add_argument("--shard", default="0/1", help="K/N: only every N-th chunk from K")
    ap.add_argument("--out", default=os.path.join(HERE, "findings"),
                    help="where inputs that broke the promise are written")
    args = ap.parse_args(argv)
    values = [v for v in args.values.split(",") if v]
    wanted = set(args.files or [])
    files = [(n, p) for n, p in model_files() if not wanted or n in wanted]
    if wanted - {n for n, _ in files}:
        ap.error(f"unknown files: {sorted(wanted - {n for n, _ in files})}")
    k, n = (int(x) for x in args.shard.split("/"))
    total = sweep_files(files, values, not args.cuts_only, not args.no_cuts, (k, n),
                        args.out, args.workers, args.timeout)
    codes = Counter()
    for (_, kind, code), c in total.counts.items():
        if kind == "format_error":
            codes[code] += c
    print(f"TOTAL {len(files)} files: {total.summary()}")
    print("FormatError codes: " + ", ".join(f"{c}={n}" for c, n in codes.most_common()))
    return 1 if total.findings else 0


if __name__ == "__main__":
    sys.exit(main())
