#!/usr/bin/env python3
"""Differential campaign: is a file pyflatmodule verifies safe to hand to ExecuTorch?

Mutants of the ExecuTorch-written files ``tests/data/et/*.pte`` and ``*.ptd`` (the
``.ptd`` pairs with ``external.pte``) go first to pyflatmodule: ``load(verify=True)``
and a full decode (``decode_all.outcome``). Only a mutant pyflatmodule accepts is then
handed to the ExecuTorch runtime (``executorch.runtime``), in a forked child per
verification level (``Minimal``, ``InternalConsistency``): ``load_program``, then
``load_method`` of every method, then ``execute`` of every method on zero inputs of
the shapes and dtypes the method declares. A mutated ``.ptd`` is the data file of
``external.pte``, at both ends (``load(pte, data=[ptd])``, ``data_path=``).

With ``--fidelity`` every mutant pyflatmodule refuses goes to the runtime too, the other
way round: a mutant the runtime loads and runs cleanly at both levels (``ok``: every
method loads and runs on zero inputs) while pyflatmodule refuses it is a refusal
stricter than the runtime, counted by the rule (the FormatError's code) and the field
mutated, and written to ``--out``. Seeds whose unmutated file the runtime does not run
cleanly (a kernel or backend this build lacks) cannot show one: they are left out, said
at the start. ``--wild`` takes the programs others wrote (``tests/data/wild``, held out:
nobody here designed them) as seeds.

Each child ends ``ok`` (every stage passed), ``refused`` (the runtime raised a Python
exception: it rejected the file), ``oom`` (a MemoryError: an allocation, sized by the
file, past the child's 4 GiB address-space limit), ``crash`` (a signal) or ``hang``
(over ``--timeout`` seconds; killed). An oom, crash or hang of an accepted mutant is
a leak: the input is written to ``--out`` with a line of ``findings.jsonl`` (mutant
index, seed file, the mutations with the schema table and field they hit, level,
stage, signal, the runtime's stderr tail).

Mutations (seeded, reproducible: mutant ``i`` of ``--seed S`` is the same whatever
``--jobs``): zeroed vtable slots of the tables the schemas walk to (the
program's, the data file's and each XNNPACK payload's), schema scalars set to edge
values, vector lengths changed, uoffsets redirected, byte flips, 1/2/4-byte
overwrites with edge values, truncation; one to three per mutant.

Needs executorch (and torch); opt-in, not collected by pytest (not named test_*):

    python tests/fuzz/gate.py --count 200
    python tests/fuzz/gate.py --count 100000 --time-limit 1500 --jobs 2 --seed 1
    python tests/fuzz/gate.py --replay 17 --seed 1      # one mutant, its verdicts printed
    python tests/fuzz/gate.py --fidelity --wild --count 20000 --jobs 2 --seed 3

Prints the counts: mutants, refused by pyflatmodule, accepted, and of the accepted,
per level, runtime ok / refused / oom / crash / hang (and the stage each reached);
then each class of leak (seed file, table.field mutated, level, stage, verdict) with
its count and an example; with ``--fidelity``, each rule that refused mutants the runtime
ran cleanly, with the fields mutated. Exit status 1 when a leak was found.
"""
from __future__ import annotations

import argparse
import collections
import json
import multiprocessing as mp
import multiprocessing.connection as mpc
import os
import random
import select
import signal
import struct
import sys
import tempfile
import time
import traceback
from typing import Any, Counter, Dict, List, Optional, Sequence, Set, Tuple

HERE = os.path.dirname(os.path.abspath(__file__))
TESTS = os.path.dirname(HERE)
ROOT = os.path.dirname(TESTS)
for _d in (TESTS, HERE):
    if _d not in sys.path:
        sys.path.insert(0, _d)
try:                   # the installed (or in-place built) package, never the bare sources
    import pyflatmodule  # noqa: F401
except ImportError:
    sys.path.insert(1, ROOT)

ET_DATA = os.path.join(TESTS, "data", "et")
WILD_DATA = os.path.join(TESTS, "data", "wild")
EXTERNAL_PTE = os.path.join(ET_DATA, "external.pte")
EXTERNAL_PTD = os.path.join(ET_DATA, "external.ptd")
LEVELS = ("Minimal", "InternalConsistency")
STAGES = ("load_program", "load_method", "execute")
VERDICTS = ("ok", "refused", "oom", "crash", "hang")
#: The verdicts that are leaks: the runtime did not refuse the file cleanly.
LEAKS = ("oom", "crash", "hang")
#: Address space a runtime child may map beyond what it has when forked: an
#: unbounded allocation fails (or crashes) instead of taking the machine's memory.
CHILD_MEMORY = 4 << 30
#: Inputs larger than this many bytes are not made to execute a method.
MAX_INPUT_BYTES = 64 << 20
#: A mutation: (kind, position, width, old value, new value, what it hit).
Mutation = Tuple[str, int, int, int, int, str]

_U16 = struct.Struct("<H")
_U32 = struct.Struct("<I")
_I32 = struct.Struct("<i")
_FMT = {1: "<B", 2: "<H", 4: "<I", 8: "<Q"}


# ------------------------------------------------------------------ layout

class Layout:
    """Where a valid ExecuTorch file's parts are, named by the schema: tables (with their
    vtable slots), scalar fields, vector and string lengths, uoffset slots; for a program
    also those of each XNNPACK payload's flatbuffer (identifier XN01)."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        #: (table position, table name, [(vtable slot position, field name)])
        self.tables: List[Tuple[int, str, List[Tuple[int, str]]]] = []
        self.scalars: List[Tuple[int, int, str]] = []     # (position, width, table.field)
        self.counts: List[Tuple[int, str]] = []           # (length position, table.field)
        self.slots: List[Tuple[int, str]] = [(0, "root")]  # uoffset positions
        #: vtable slot position -> every Table.field it serves (a writer shares one
        #: vtable among tables of one layout, so zeroing a slot hits all of them)
        self.sharers: Dict[int, List[str]] = {}
        self._seen: Set[int] = set()
        self._walk(0, len(data))
        at = data.find(b"XH00")
        while at >= 4:
            start = at - 4
            # the XNNPACK header: magic at 4, u16 length at 8, the flatbuffer's u32
            # offset at 10 and u32 size at 14
            fb, size = _U32.unpack_from(data, start + 10)[0], _U32.unpack_from(data, start + 14)[0]
            if start + fb + 8 <= len(data) and data[start + fb + 4:start + fb + 8] == b"XN01":
                self._walk(start + fb, min(size, len(data) - start - fb))
            at = data.find(b"XH00", at + 4)

    def _walk(self, base: int, size: int) -> None:
        from pyflatmodule.core.fbread import Table, schema_of
        buf = memoryview(self.data)[base:base + size]
        schema = schema_of(_U32.unpack_from(buf, 4)[0])
        root = Table(schema, buf, _U32.unpack_from(buf, 0)[0], schema.root)
        self._table(root, schema.root, base, 0)

    def _table(self, t: Any, name: str, base: int, depth: int) -> None:
        from pyflatmodule.core.fbread import path_of
        from pyflatmodule.core.native import lib
        if depth > 16 or base + t.pos in self._seen:
            return
        self._seen.add(base + t.pos)
        vslots: List[Tuple[int, str]] = []
        self.tables.append((base + t.pos, name, vslots))
        for fname, f in t.fields.items():
            at = t._at(f)
            if not at:
                continue
            # "Table.field|path from the root" (describe() splits them)
            label = f"{name}.{fname}|{path_of(t.where + (fname,))}"
            vslots.append((base + t._vt + 4 + 2 * f.id, label))
            sharers = self.sharers.setdefault(base + t._vt + 4 + 2 * f.id, [])
            if label.split("|")[0] not in sharers:
                sharers.append(label.split("|")[0])
            if f.kind in (lib.FB_SCALAR, lib.FB_UNION_TYPE):
                self.scalars.append((base + at, struct.calcsize(f.fmt), label))
                continue
            self.slots.append((base + at, label))
            target = at + _U32.unpack_from(t.buf, at)[0]
            if f.kind == lib.FB_TABLE:
                sub = t.table(fname)
                if sub is not None:
                    self._table(sub, f.ref, base, depth + 1)
            elif f.kind == lib.FB_UNION:
                member, sub = t.union(fname)
                if sub is not None:
                    self._table(sub, t.schema.union_types[f.ref][t.scalar(fname + "_type")],
                                base, depth + 1)
            elif f.kind in (lib.FB_STRING, lib.FB_VEC_SCALAR, lib.FB_VEC_STRING):
                self.counts.append((base + target, label))
            elif f.kind == lib.FB_VEC_TABLE:
                self.counts.append((base + target, label))
                for k, sub in enumerate(t.tables(fname)):
                    self.slots.append((base + target + 4 + 4 * k, f"{label}[{k}]"))
                    self._table(sub, f.ref, base, depth + 1)
            else:                       # vectors of structs
                self.counts.append((base + target, label))


# ------------------------------------------------------------------ mutation

def _edge(rng: random.Random, width: int, old: int) -> int:
    """An edge value for a field of ``width`` bytes whose value is ``old``."""
    bits = 8 * width
    near = [old - 1, old + 1, old * 2, old + 0x10, -old]
    base = [0, 1, 2, 3, 4, 7, 8, 16, 0x7F, 0x80, 0xFF, -1, -2, 1 << (bits - 1),
            (1 << (bits - 1)) - 1, 0x7FFF, 0x10000, 0x7FFFFFFF, 1 << 31]
    return rng.choice(base + near) % (1 << bits)


def _write(buf: bytearray, at: int, width: int, value: int) -> int:
    old: int = struct.unpack_from(_FMT[width], buf, at)[0]
    struct.pack_into(_FMT[width], buf, at, value % (1 << (8 * width)))
    return old


#: Mutation kinds and their weights: structure first.
KINDS = (("vtable_zero", 30), ("scalar", 18), ("vector_length", 12), ("overwrite", 12),
         ("flip", 10), ("uoffset", 8), ("vtable_entry", 5), ("truncate", 5))


def mutate(layout: Layout, rng: random.Random) -> Tuple[bytes, List[Mutation]]:
    """One to three mutations of ``layout.data`` drawn with ``rng``."""
    buf = bytearray(layout.data)
    done: List[Mutation] = []
    kinds = [k for k, _ in KINDS]
    weights = [w for _, w in KINDS]
    for _ in range(rng.choice((1, 1, 1, 1, 2, 2, 3))):
        kind = rng.choices(kinds, weights)[0]
        if kind in ("vtable_zero", "vtable_entry"):
            _, tname, vslots = rng.choice(layout.tables)
            if not vslots:
                continue
            at, label = rng.choice(vslots)
            new = 0 if kind == "vtable_zero" else _edge(rng, 2, _U16.unpack_from(buf, at)[0])
            field, _, path = label.partition("|")
            also = [x for x in layout.sharers[at] if x != field]
            if also:                # "Table.field (+ Other.field)|path"
                label = f"{field} (+ {', '.join(also)})|{path}"
            done.append((kind, at, 2, _write(buf, at, 2, new), new, label))
        elif kind == "scalar" and layout.scalars:
            at, width, label = rng.choice(layout.scalars)
            new = _edge(rng, width, struct.unpack_from(_FMT[width], buf, at)[0])
            done.append((kind, at, width, _write(buf, at, width, new), new, label))
        elif kind == "vector_length" and layout.counts:
            at, label = rng.choice(layout.counts)
            new = _edge(rng, 4, _U32.unpack_from(buf, at)[0])
            done.append((kind, at, 4, _write(buf, at, 4, new), new, label))
        elif kind == "uoffset":
            at, label = rng.choice(layout.slots)
            target = rng.choice([t for t, _, _ in layout.tables] + [0, len(buf) - 4, len(buf)])
            new = (target + rng.choice((0, 0, 2, 4, -4)) - at) % (1 << 32)
            done.append((kind, at, 4, _write(buf, at, 4, new), new, label))
        elif kind == "flip" and buf:
            at = rng.randrange(len(buf))
            new = buf[at] ^ (1 << rng.randrange(8))
            done.append((kind, at, 1, _write(buf, at, 1, new), new, "byte"))
        elif kind == "overwrite" and len(buf) >= 4:
            width = rng.choice((1, 2, 4))
            at = rng.randrange(len(buf) - width + 1)
            new = _edge(rng, width, struct.unpack_from(_FMT[width], buf, at)[0])
            done.append((kind, at, width, _write(buf, at, width, new), new, "bytes"))
        elif kind == "truncate" and buf:
            n = rng.randrange(len(buf))
            done.append((kind, n, 0, len(buf), n, "length"))
            del buf[n:]
            break                   # the positions the other kinds use may be past the end
    return bytes(buf), done


def describe(m: Mutation) -> str:
    """``kind Table.field @position [path] (width) old -> new``."""
    kind, at, width, old, new, label = m
    if kind == "truncate":
        return f"truncate {old} -> {new} bytes"
    field, _, path = label.partition("|")
    where = f" [{path}]" if path else ""
    return f"{kind} {field} @{at}{where} (u{8 * width}) {old:#x} -> {new:#x}"


# ------------------------------------------------------------------ seeds

class Seed:
    """One seed file (a name in tests/data/et, or a path), its layout and what it is
    loaded with."""

    def __init__(self, name: str) -> None:
        self.name = name
        with open(name if os.sep in name else os.path.join(ET_DATA, name), "rb") as f:
            self.data = f.read()
        self.layout = Layout(self.data)
        self.is_data = name.endswith(".ptd")


def seed_files(wild: bool = False) -> List[str]:
    """The ExecuTorch files of tests/data/et, or (``wild``) the programs of
    tests/data/wild, by path."""
    if wild:
        return sorted(os.path.join(WILD_DATA, f) for f in os.listdir(WILD_DATA)
                      if f.endswith(".pte"))
    return sorted(f for f in os.listdir(ET_DATA) if f.endswith((".pte", ".ptd")))


def _pfm_load(buf: bytes, data: Sequence[Any] = ()) -> Tuple[str, str]:
    """``load(verify=True)`` and a full decode: ("accepted", ""), ("refused", code)
    or ("finding", detail) for anything but a well-formed FormatError. A program whose
    ``missing_data`` is not empty is refused: pyflatmodule says it is incomplete."""
    import pyflatmodule as pfm

    from support.decode_all import error_shape, full_decode
    try:
        f = pfm.load(buf, verify=True, data=data)
        full_decode(f)
        if isinstance(f, pfm.Program) and f.missing_data:
            # incomplete: pyflatmodule names what no file holds (docs/verified.md)
            return "refused", "missing_data"
    except pfm.FormatError as e:
        why = error_shape(e, len(buf))
        return ("refused", e.code) if why is None else ("finding", f"bad_error: {why}")
    except Exception:  # noqa: BLE001 - any other exception is a pyflatmodule finding
        return "finding", traceback.format_exc(limit=8)
    return "accepted", ""


def pfm_verdict(seed: Seed, buf: bytes) -> Tuple[str, str]:
    """pyflatmodule's verdict on a mutant of ``seed``; a data file is checked alone and
    as the data of external.pte, external.pte with its own data file."""
    if seed.is_data:
        verdict = _pfm_load(buf)
        if verdict[0] != "accepted":
            return verdict
        with open(EXTERNAL_PTE, "rb") as f:
            return _pfm_load(f.read(), [buf])
    return _pfm_load(buf, [EXTERNAL_PTD] if seed.name == "external.pte" else ())


# ------------------------------------------------------------------ runtime child

_DTYPES = {0: "uint8", 1: "int8", 2: "int16", 3: "int32", 4: "int64", 5: "float16",
           6: "float32", 7: "float64", 11: "bool", 15: "bfloat16"}


def _inputs(meta: Any) -> Optional[List[Any]]:
    """Zero tensors of the method's declared input shapes; None when one is not a
    tensor of a known dtype or too large."""
    import torch
    out = []
    for i in range(meta.num_inputs()):
        info = meta.input_tensor_meta(i)
        dtype = _DTYPES.get(int(info.dtype()))
        if dtype is None or info.nbytes() > MAX_INPUT_BYTES:
            return None
        out.append(torch.zeros(tuple(info.sizes()), dtype=getattr(torch, dtype)))
    return out


def _child(pte: Any, ptd: Optional[str], level: str, stage_fd: int) -> None:
    """The runtime's part, in a forked child: each stage's name is written to
    ``stage_fd`` as it starts; a Python exception ends the child with status 1."""
    from executorch.runtime import Runtime, Verification

    def stage(name: str) -> None:
        os.write(stage_fd, name.encode() + b"\n")

    stage("load_program")
    program = Runtime.get().load_program(pte, verification=getattr(Verification, level),
                                         data_path=ptd)
    methods = {}
    refused = []
    for k, name in enumerate(sorted(program.method_names)):
        stage("load_method")
        try:
            methods[name] = program.load_method(name)
        except Exception:  # noqa: BLE001 - noted; the other methods are loaded still
            traceback.print_exc(limit=1)
            refused.append(k)
            stage(f"refused:{k}")
    for name, method in methods.items():
        stage("execute")
        inputs = _inputs(method.metadata)
        if inputs is not None:
            method.execute(inputs)
    if refused:
        stage("load_method")
        raise RuntimeError(f"load_method refused methods {refused} (by sorted name)")
    stage("done")


def run_runtime(pte: Any, ptd: Optional[str], level: str, timeout: float,
                scratch: str) -> Dict[str, Any]:
    """Hand a program to the runtime in a forked child (``CHILD_MEMORY`` more address
    space at most): {"verdict", "stage", "signal", "exit", "stderr"} (the last 12
    lines of the child's output), "refused_methods" (the methods whose ``load_method``
    failed, by their place in sorted order: the child loads and runs the others)."""
    from sweep import limit_address_space
    log = os.path.join(scratch, f"stderr-{os.getpid()}")
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:                                    # the child
        code = 0
        try:
            os.close(r)
            fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            os.dup2(fd, 1)
            os.dup2(fd, 2)
            limit_address_space(CHILD_MEMORY)
            _child(pte, ptd, level, w)
        except MemoryError:     # an allocation past CHILD_MEMORY: sized by the file
            traceback.print_exc(limit=3)
            code = 2
        except BaseException:  # noqa: BLE001 - any other exception is the runtime refusing
            traceback.print_exc(limit=3)
            code = 1
        finally:
            sys.stderr.flush()
            os._exit(code)
    os.close(w)
    deadline = time.monotonic() + timeout
    status: Optional[int] = None
    chunks = b""
    while True:
        left = deadline - time.monotonic()
        ready, _, _ = select.select([r], [], [], max(0.0, min(left, 0.5)))
        if ready:
            got = os.read(r, 4096)
            chunks += got
            if got:
                continue
            _, status = os.waitpid(pid, 0)          # EOF: the child exited
            break
        if time.monotonic() >= deadline:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            break
    os.close(r)
    stages = chunks.decode(errors="replace").split()
    try:
        with open(log, errors="replace") as f:
            tail = [ln for ln in f.read().splitlines() if "cpuinfo" not in ln][-12:]
        os.unlink(log)
    except OSError:
        tail = []
    refused = [int(st.split(":")[1]) for st in stages if st.startswith("refused:")]
    stages = [st for st in stages if not st.startswith("refused:")]
    last = stages[-1] if stages else "fork"
    out: Dict[str, Any] = {"stage": last, "signal": None, "exit": None, "stderr": tail,
                           "refused_methods": refused}
    if status is None:
        out["verdict"] = "hang"
    elif os.WIFSIGNALED(status):
        out["verdict"], out["signal"] = "crash", signal.Signals(os.WTERMSIG(status)).name
    else:
        out["exit"] = os.WEXITSTATUS(status)
        out["verdict"] = ("ok" if out["exit"] == 0 and last == "done" else
                          "oom" if out["exit"] == 2 else "refused")
    return out


# ------------------------------------------------------------------ one mutant

def mutant(seeds: List[Seed], seed: int, index: int) -> Tuple[Seed, bytes, List[Mutation]]:
    """Mutant ``index`` of campaign ``seed``: its seed file, bytes and mutations."""
    rng = random.Random(f"{seed}/{index}")
    s = rng.choice(seeds)
    buf, muts = mutate(s.layout, rng)
    return s, buf, muts


def judge(seeds: List[Seed], seed: int, index: int, timeout: float,
          scratch: str, fidelity: bool = False) -> Dict[str, Any]:
    """Mutant ``index``: pyflatmodule's verdict, and when it accepts (or, ``fidelity``,
    refuses), the runtime's at each level."""
    s, buf, muts = mutant(seeds, seed, index)
    res: Dict[str, Any] = {"index": index, "file": os.path.basename(s.name),
                           "mutations": [describe(m) for m in muts]}
    if buf == s.data:              # no mutation, or each one wrote the value it found
        res["pfm"], res["pfm_detail"] = "unchanged", ""
        return res
    res["pfm"], res["pfm_detail"] = pfm_verdict(s, buf)
    if res["pfm"] != "accepted" and not (fidelity and res["pfm"] == "refused"):
        return res
    res["runtime"] = runtime_verdicts(s, buf, timeout, scratch)
    return res


def runtime_verdicts(s: Seed, buf: bytes, timeout: float, scratch: str) -> Dict[str, Any]:
    """The runtime's verdict on ``buf`` (a mutant of ``s``, or its bytes) at each level."""
    ptd: Optional[str]
    if s.is_data:
        ptd = os.path.join(scratch, f"mutant-{os.getpid()}.ptd")
        with open(ptd, "wb") as f:
            f.write(buf)
        pte: Any = EXTERNAL_PTE
    else:
        pte, ptd = buf, (EXTERNAL_PTD if s.name == "external.pte" else None)
    return {level: run_runtime(pte, ptd, level, timeout, scratch) for level in LEVELS}


def _worker(conn: Any, seeds: List[Seed], seed: int, indices: range, timeout: float,
            scratch: str, until: float, fidelity: bool) -> None:
    for i in indices:
        if time.time() > until:
            break
        conn.send(judge(seeds, seed, i, timeout, scratch, fidelity))
    conn.send(None)


# ------------------------------------------------------------------ campaign

class Campaign:
    """The counts and the leaks of a run."""

    def __init__(self, seeds: List[Seed], seed: int, out: str) -> None:
        self.seeds, self.seed, self.out = seeds, seed, out
        self.counts: Counter[str] = collections.Counter()
        #: (rule, "ok" / "refused" / "leak": the runtime's verdict) -> refused mutants
        self.refusals: Counter[Tuple[str, str]] = collections.Counter()
        #: rule -> the refused mutants the runtime ran cleanly at both levels
        self.stricter: Dict[str, List[Dict[str, Any]]] = {}
        #: (level, verdict, stage) -> count
        self.runtime: Counter[Tuple[str, str, str]] = collections.Counter()
        self.classes: Dict[Tuple[str, ...], List[Dict[str, Any]]] = {}
        self.pfm_findings: List[Dict[str, Any]] = []

    def add(self, res: Dict[str, Any]) -> None:
        self.counts["mutants"] += 1
        self.counts[res["pfm"]] += 1
        if res["pfm"] == "finding":
            self.pfm_findings.append(res)
            self.save(res, "pfm")
        if res["pfm"] == "refused" and "runtime" in res:
            self._refused(res)
            return
        for level, r in res.get("runtime", {}).items():
            self.runtime[(level, r["verdict"], r["stage"] if r["verdict"] != "ok" else "")] += 1
        leaks = {lv: r for lv, r in res.get("runtime", {}).items()
                 if r["verdict"] in LEAKS}
        if leaks:
            self.save(res, "leak")
            for lv, r in leaks.items():
                key = (res["file"], ", ".join(m.split(" @")[0] for m in res["mutations"]),
                       lv, r["stage"], r["verdict"])
                self.classes.setdefault(key, []).append(res)

    def _refused(self, res: Dict[str, Any]) -> None:
        """A mutant pyflatmodule refused and the runtime was asked about (--fidelity)."""
        rule = res["pfm_detail"]
        verdicts = [r["verdict"] for r in res["runtime"].values()]
        if any(v in LEAKS for v in verdicts):
            outcome = "leak"
        elif all(v == "ok" for v in verdicts):
            outcome = "ok"
            self.stricter.setdefault(rule, []).append(res)
            self.save(res, "stricter")
        else:
            outcome = "refused"
        self.refusals[(rule, outcome)] += 1

    def fidelity_report(self) -> List[str]:
        """The refusals by rule: how many, what the runtime did with them, and those it
        ran cleanly with the fields mutated."""
        rules = sorted({r for r, _ in self.refusals}, key=lambda r: -sum(
            n for (rr, _), n in self.refusals.items() if rr == r))
        stricter = sum(len(v) for v in self.stricter.values())
        lines = [f"refused by pyflatmodule and asked of the runtime: "
                 f"{sum(self.refusals.values())}; the runtime ran {stricter} of them "
                 f"cleanly at both levels",
                 "  rule | refused | the runtime: refused it / leaked on it / ran it "
                 "cleanly (fields mutated)"]
        for rule in rules:
            by = {v: n for (r, v), n in self.refusals.items() if r == rule}
            fields = collections.Counter(
                ", ".join(m.split(" @")[0] for m in res["mutations"])
                for res in self.stricter.get(rule, []))
            lines.append(f"  {rule} | {sum(by.values())} | {by.get('refused', 0)} / "
                         f"{by.get('leak', 0)} / {by.get('ok', 0)}" +
                         (f" ({'; '.join(f'{k} x{n}' for k, n in fields.most_common(6))})"
                          if fields else ""))
        return lines

    def save(self, res: Dict[str, Any], what: str) -> None:
        os.makedirs(self.out, exist_ok=True)
        s, buf, _ = mutant(self.seeds, self.seed, res["index"])
        stem, ext = os.path.splitext(os.path.basename(s.name))
        name = f"{what}-{self.seed}-{res['index']}-{stem}{ext}"
        with open(os.path.join(self.out, name), "wb") as f:
            f.write(buf)
        with open(os.path.join(self.out, "findings.jsonl"), "a") as f:
            f.write(json.dumps({"seed": self.seed, "saved": name, **res}) + "\n")

    def report(self, seconds: float) -> str:
        c = self.counts
        lines = [f"{c['mutants']} mutants in {seconds:.0f} s (seed {self.seed}): "
                 f"{c['refused']} refused by pyflatmodule, {c['accepted']} accepted, "
                 f"{c['unchanged']} unchanged (the mutations wrote the bytes they found), "
                 f"{c['finding']} pyflatmodule findings (not a FormatError)"]
        for level in LEVELS:
            parts = []
            for v in VERDICTS:
                n = sum(k for (lv, vd, _), k in self.runtime.items() if lv == level and vd == v)
                stages = [f"{st}={k}" for (lv, vd, st), k in sorted(self.runtime.items())
                          if lv == level and vd == v and st]
                parts.append(f"{v} {n}" + (f" ({', '.join(stages)})" if stages else ""))
            lines.append(f"  accepted, runtime {level}: " + ", ".join(parts))
        lines.append(f"leak classes (seed file | mutated | level | stage | verdict): "
                     f"{len(self.classes)}")
        for key, items in sorted(self.classes.items(), key=lambda kv: -len(kv[1])):
            ex = items[0]
            r = ex["runtime"][key[2]]
            lines.append(f"  {len(items):5d}  {' | '.join(key)}  e.g. #{ex['index']} "
                         f"{'; '.join(ex['mutations'])} {r['signal'] or ''}")
            if r["stderr"]:
                lines.append("         stderr: " + " / ".join(r["stderr"][-3:])[:400])
        for res in self.pfm_findings[:10]:
            lines.append(f"  pyflatmodule finding #{res['index']} {res['file']} "
                         f"{res['mutations']}: {res['pfm_detail'][:300]}")
        if self.refusals:
            lines += self.fidelity_report()
        return "\n".join(lines)


def runnable(seeds: List[Seed], timeout: float) -> List[Seed]:
    """The seeds the runtime loads and runs cleanly at both levels, unmutated (the others
    are said, with the runtime's verdict)."""
    scratch = tempfile.mkdtemp(prefix="pfm-gate-")
    out = []
    for s in seeds:
        verdicts = runtime_verdicts(s, s.data, timeout, scratch)
        r = verdicts["InternalConsistency"]
        if all(v["verdict"] == "ok" for v in verdicts.values()):
            out.append(s)
        else:
            print(f"left out: {os.path.basename(s.name)} (unmutated, the runtime says "
                  f"{r['verdict']} at {r['stage']}: {(r['stderr'] or [''])[-1][:200]})")
    return out


def campaign(count: int, seed: int, jobs: int, out: str, timeout: float,
             time_limit: float, files: Sequence[str], fidelity: bool = False) -> Campaign:
    """Judge mutants 0..count-1 in ``jobs`` worker processes (worker j takes every
    jobs-th index from j), within ``time_limit`` seconds. A worker that dies (a crash
    in pyflatmodule itself) has its current mutant recorded and is restarted after it."""
    import executorch.runtime  # noqa: F401 - imported once, before the forks
    import torch  # noqa: F401
    seeds = [Seed(n) for n in files]
    if fidelity:
        seeds = runnable(seeds, timeout)
        if not seeds:
            raise SystemExit("no seed runs cleanly on this runtime")
    camp = Campaign(seeds, seed, out)
    scratch = tempfile.mkdtemp(prefix="pfm-gate-")
    until = time.time() + time_limit
    ctx = mp.get_context("fork")
    procs: Dict[int, Tuple[Any, Any, int]] = {}     # slot -> (process, conn, next index)

    def start(slot: int, first: int) -> None:
        parent, child = ctx.Pipe(duplex=False)
        p = ctx.Process(target=_worker, daemon=True,
                        args=(child, seeds, seed, range(first, count, jobs), timeout,
                              scratch, until, fidelity))
        p.start()
        child.close()
        procs[slot] = (p, parent, first)

    for j in range(min(jobs, count)):
        start(j, j)
    t0 = time.time()
    last = t0
    while procs:
        waitables = [conn for _, conn, _ in procs.values()]
        mpc.wait(waitables, timeout=1.0)
        for slot, (p, conn, nxt) in list(procs.items()):
            try:
                while conn.poll():
                    res = conn.recv()
                    if res is None:
                        p.join()
                        del procs[slot]
                        break
                    camp.add(res)
                    procs[slot] = (p, conn, res["index"] + jobs)
            except (EOFError, OSError):
                p.join()
                idx = procs[slot][2]
                s, _, muts = mutant(seeds, seed, idx)
                res = {"index": idx, "file": s.name, "mutations": [describe(m) for m in muts],
                       "pfm": "finding", "pfm_detail": f"worker died ({p.exitcode})"}
                camp.add(res)
                del procs[slot]
                if idx + jobs < count:
                    start(slot, idx + jobs)
        if time.time() - last > 60:
            last = time.time()
            print(f"... {camp.counts['mutants']} mutants, {camp.counts['accepted']} accepted, "
                  f"{sum(len(v) for v in camp.classes.values())} leaks", flush=True)
    return camp


def main(argv: Optional[Sequence[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--count", type=int, default=1000, help="mutants to make")
    ap.add_argument("--seed", type=int, default=0, help="the campaign's random seed")
    ap.add_argument("--jobs", type=int, default=1, help="worker processes")
    ap.add_argument("--out", default=os.path.join(tempfile.gettempdir(), "pfm-gate"),
                    help="where leaks (and pyflatmodule findings) are written")
    ap.add_argument("--timeout", type=float, default=10.0,
                    help="seconds the runtime may take on one mutant at one level")
    ap.add_argument("--time-limit", type=float, default=float("inf"),
                    help="stop making mutants after this many seconds")
    ap.add_argument("--files", nargs="*", help="seed files (default: every .pte and .ptd)")
    ap.add_argument("--wild", action="store_true",
                    help="seeds: the programs of tests/data/wild (others wrote them)")
    ap.add_argument("--fidelity", action="store_true",
                    help="also hand the mutants pyflatmodule refuses to the runtime, and "
                         "count those it runs cleanly, by rule")
    ap.add_argument("--replay", type=int, help="judge this one mutant and print it")
    args = ap.parse_args(argv)
    files = args.files or seed_files(args.wild)
    if args.replay is not None:
        import executorch.runtime  # noqa: F401
        seeds = [Seed(n) for n in files]
        if args.fidelity:
            seeds = runnable(seeds, args.timeout)
        print(json.dumps(judge(seeds, args.seed, args.replay, args.timeout,
                               tempfile.mkdtemp(prefix="pfm-gate-"), args.fidelity), indent=1))
        return 0
    t0 = time.time()
    camp = campaign(args.count, args.seed, max(1, args.jobs), args.out, args.timeout,
                    args.time_limit, files, args.fidelity)
    print(camp.report(time.time() - t0))
    if camp.classes or camp.pfm_findings:
        print(f"inputs and findings.jsonl in {args.out}")
    return 1 if camp.classes else 0


if __name__ == "__main__":
    sys.exit(main())
