"""The single-byte sweep's mutated inputs of the ExecuTorch test programs through
ExecuTorch's runtime or pyflatmodule: how many crash, hang, are rejected, load.

    python benchmarks/et_mutants.py runtime|pyflatmodule [--strided N] [--workers N]

Inputs: every ``tests/data/et/*.pte``, mutated as ``tests/fuzz/sweep.py`` does (every
single-byte edit and every truncation; ``--strided N``: its deterministic subset of
about N per file); ``external.pte`` gets its unmutated data file. Each input is run
twice, strict and lenient: the runtime's ``load_program`` with
``Verification.InternalConsistency`` and with ``Verification.Minimal`` (its default
for C++ users), then ``load_method`` of every method; pyflatmodule's ``load`` with
``verify=True`` and ``verify=False``, then a full decode (``tests/support/decode_all.py``).

The sweep's harness runs them in forked worker processes with a timeout per input; an
input that kills its worker (a signal) or runs over the timeout is then run alone in
a fresh forked child per mode, so each crash is counted once, against the input and
the mode that caused it. Prints one JSON object: inputs, crashes, hangs, per-mode
counts, and the crashing inputs (file, mutation, signal).
"""
from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import signal
import sys
import tempfile
import time
import traceback
from collections import Counter
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

HERE = os.path.dirname(os.path.abspath(__file__))
TESTS = os.path.join(os.path.dirname(HERE), "tests")
ET = os.path.join(TESTS, "data", "et")
sys.path[:0] = [TESTS, os.path.join(TESTS, "fuzz")]

import sweep  # noqa: E402

import pyflatmodule as pfm  # noqa: E402

from support import decode_all  # noqa: E402

#: Input data -> its data file (the program keeps its weights outside).
DATA_FILES: Dict[bytes, str] = {}


def programs() -> List[Tuple[str, bytes]]:
    """(name, bytes) of every ExecuTorch test program; records their data files."""
    out = []
    for name in sorted(f for f in os.listdir(ET) if f.endswith(".pte")):
        with open(os.path.join(ET, name), "rb") as f:
            data = f.read()
        ptd = os.path.join(ET, name[:-4] + ".ptd")
        if os.path.exists(ptd):
            DATA_FILES[data] = ptd
        out.append((name, data))
    return out


def inputs(strided: int) -> List[Tuple[str, bytes, List[sweep.Mutation]]]:
    """The sweep's jobs: (name, data, mutations) per program."""
    return [(name, data, sweep.strided_mutations(data, strided) if strided
             else sweep.all_mutations(data)) for name, data in programs()]


def judge_runtime(data: bytes, m: sweep.Mutation, strict: bool) -> Tuple[str, str]:
    """ExecuTorch's runtime on one mutated input: ("ok", "") when every method loads,
    ("format_error", exception type) when it raises."""
    from executorch.runtime import Runtime, Verification
    level = Verification.InternalConsistency if strict else Verification.Minimal
    try:
        program = Runtime.get().load_program(sweep.apply(data, m), verification=level,
                                              data_path=DATA_FILES.get(data))
        for name in program.method_names:
            program.load_method(name)
    except Exception as e:  # noqa: BLE001  (the runtime rejected the input)
        return "format_error", type(e).__name__
    return "ok", ""


def judge_pyflatmodule(data: bytes, m: sweep.Mutation, strict: bool) -> Tuple[str, str]:
    """pyflatmodule on one mutated input: load (verify=strict), then a full decode. The
    data file goes with what still says it is a program (``data=`` for another file is
    a ValueError: a wrong argument, not a wrong file)."""
    buf = sweep.apply(data, m)
    ptd = DATA_FILES.get(data) if buf[4:8] == b"ET12" else None
    try:
        decode_all.full_decode(pfm.load(buf, verify=strict, data=[ptd] if ptd else []))
    except pfm.FormatError as e:
        return "format_error", e.code
    except Exception:  # noqa: BLE001  (a finding: reported with its traceback)
        return "exception", traceback.format_exc(limit=8)
    return "ok", ""


JUDGES: Dict[str, Callable[[bytes, sweep.Mutation, bool], Tuple[str, str]]] = {
    "runtime": judge_runtime, "pyflatmodule": judge_pyflatmodule}


def alone(judge: Callable[..., Tuple[str, str]], data: bytes, m: sweep.Mutation,
          strict: bool, timeout: float) -> Optional[str]:
    """Run one input in a fresh forked child: None when it returns, else "signal N",
    "exit N" or "hang"."""
    pid = os.fork()
    if pid == 0:  # the child: judge, then leave without running the parent's handlers
        code = 0
        try:
            judge(data, m, strict)
        except BaseException:  # noqa: BLE001
            code = 3
        os._exit(code)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            if os.WIFSIGNALED(status):
                return f"signal {signal.Signals(os.WTERMSIG(status)).name}"
            return None if os.WEXITSTATUS(status) == 0 else f"exit {os.WEXITSTATUS(status)}"
        time.sleep(0.005)
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    return "hang"


def count(impl: str, jobs: Sequence[Tuple[str, bytes, List[sweep.Mutation]]],
          workers: int, timeout: float) -> Dict[str, Any]:
    """Runs every input both ways; the counts, each crash confirmed alone."""
    judge = JUDGES[impl]
    with tempfile.TemporaryDirectory() as out:
        result = sweep.run(jobs, out, workers=workers, timeout=timeout, target=judge,
                           raw=True)
    lost = [f for f in result.findings if f.verify is None]     # worker killed or hung
    data_of = {name: data for name, data, _ in jobs}
    crashes: List[Dict[str, Any]] = []
    per_mode: Counter = Counter()
    causes_seen: Counter = Counter()
    unconfirmed = 0
    for f in lost:
        data = data_of[f.label]
        causes = {}
        for strict in (True, False):
            why = alone(judge, data, f.mutation, strict, timeout)
            if why is not None:
                causes["strict" if strict else "lenient"] = why
                per_mode[("strict" if strict else "lenient", why == "hang")] += 1
                causes_seen[f"{'strict' if strict else 'lenient'} {why}"] += 1
        if causes:
            crashes.append({"file": f.label, "mutation": list(f.mutation),
                            "input": sweep.describe(f.mutation, data), **causes})
        else:
            unconfirmed += 1
    outcomes: Counter = Counter()
    for (strict, kind, _), n in result.counts.items():
        outcomes[f"{'strict' if strict else 'lenient'} {kind}"] += n
    exceptions = [f"{f.label} {f.mutation} strict={f.verify}: {f.detail}"
                  for f in result.findings if f.verify is not None]
    hangs = [c for c in crashes if "hang" in (c.get("strict"), c.get("lenient"))]
    return {
        "impl": impl, "files": [name for name, _, _ in jobs], "inputs": result.inputs,
        "crashes": len(crashes) - len(hangs), "hangs": len(hangs),
        "crashes_strict": per_mode[("strict", False)],
        "crashes_lenient": per_mode[("lenient", False)],
        "hangs_strict": per_mode[("strict", True)], "hangs_lenient": per_mode[("lenient", True)],
        "unconfirmed": unconfirmed, "outcomes": dict(outcomes), "causes": dict(causes_seen),
        "other_exceptions": len(exceptions), "exception_examples": exceptions[:5],
        "crash_examples": crashes[:10], "seconds": round(result.seconds, 2)}


def main(argv: Optional[Sequence[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("impl", choices=sorted(JUDGES))
    ap.add_argument("--strided", type=int, default=0,
                    help="about N mutations per file (default: every one)")
    ap.add_argument("--workers", type=int, default=min(2, os.cpu_count() or 1))
    ap.add_argument("--timeout", type=float, default=20.0, help="seconds per input")
    args = ap.parse_args(argv)
    if args.impl == "runtime":
        # Imported once here, so the forked workers start with it loaded.
        import executorch.runtime  # noqa: F401
    mp.set_start_method("fork", force=True)
    print(json.dumps(count(args.impl, inputs(args.strided), args.workers, args.timeout)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
