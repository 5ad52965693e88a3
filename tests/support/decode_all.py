"""Decode everything a Module, Program or DataFile hands out, and judge how a decode ended.

Shared by the bad-input, sweep, structure-fuzz, concurrency and fuzzing suites: one
definition of "a full decode" and of "a well-formed FormatError", so every suite asks
the library the same thing. No torch, no pytest here (the fuzz harness and the sweep
workers import it too).
"""
from __future__ import annotations

import traceback
from typing import Any, Optional, Tuple

import numpy as np

import pyflatmodule as pfm

__all__ = ["touch", "read_plans", "full_decode", "decode_program", "decode_data_file",
           "check_error", "outcome", "ErrorShape", "regions_tile"]

# Codes a reader may report without a field path: they concern the buffer as a whole
# (its header or its size), before any field is read.
WHOLE_BUFFER_CODES = {"too_small", "zip_archive", "bad_identifier", "too_large",
                      "bad_argument"}


class ErrorShape(AssertionError):
    """A FormatError without a code, an offset inside the data or a path."""


def _touch_array(a: np.ndarray) -> None:
    """Read the first and the last element: proves the view's memory is readable
    without copying a (possibly huge, expanded) tensor."""
    if a.size:
        _ = a.flat[0], a.flat[a.size - 1]


def touch(value: Any) -> None:
    """Decode everything a value hands out lazily (objects, quantized parameters)."""
    if isinstance(value, pfm.Object):
        _ = value.type_name, value.kind, value.state, value.setstate_function, value.index
        for _name, _v in value.attributes.items():
            pass
        dir(value)
        repr(value)
    elif isinstance(value, pfm.QuantizedTensor):
        _touch_array(value.int_repr)
        _touch_array(value.values())
        _ = value.scales, value.zero_points, value.axis, value.scale, value.zero_point
        repr(value)
    elif isinstance(value, np.ndarray):
        _touch_array(value)
    elif isinstance(value, pfm.Device):
        _ = str(value), value.type, value.index, hash(value)
    elif isinstance(value, pfm.EnumValue):
        _ = value.type_name, repr(value)
        touch(value.value)
    elif isinstance(value, (list, tuple)):
        for v in value:
            if isinstance(v, (np.ndarray, pfm.QuantizedTensor)):
                touch(v)
    elif isinstance(value, dict):
        for k, v in value.items():
            if isinstance(k, pfm.TensorKey):
                _ = hash(k), repr(k)
                touch(k.value)
            if isinstance(v, (np.ndarray, pfm.QuantizedTensor)):
                touch(v)


def peak_rss_kib() -> int:
    """This process's peak RSS since it started its program (VmHWM; ``ru_maxrss``
    also counts the parent's peak when the child was vforked from it)."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    raise RuntimeError("no VmHWM in /proc/self/status")


def read_plans(f: Any) -> None:
    """The first read of the execution plans of what ``load`` gave (a program, or a
    bundled program's): the default load checks them then."""
    program = f.program if isinstance(f, pfm.BundledProgram) else f
    if isinstance(program, pfm.Program):
        _ = program.methods


def full_decode(m: Any) -> None:
    """Read every part of a Module, Program, DataFile, BundledProgram or ETDump through
    the public API."""
    if isinstance(m, pfm.Program):
        decode_program(m)
        return
    if isinstance(m, pfm.DataFile):
        decode_data_file(m)
        return
    if isinstance(m, pfm.BundledProgram):
        decode_bundled(m)
        return
    if isinstance(m, pfm.ETDump):
        decode_etdump(m)
        return
    assert len(list(m.ivalues)) == len(m.ivalues)   # the bulk decoder
    for i in range(len(m.ivalues)):
        touch(m.ivalues[i])
        m.ivalues.type_name(i)
    _ = m.bytecode_version, m.operator_version, m.extra_files, m.jit_sources, m.size
    _ = m.object_types, m.methods
    for s in m.storages:
        _touch_array(s)
    touch(m.root)
    for v in m.state_dict().values():
        touch(v)
    m.info()
    repr(m)
    for f in m.functions():
        _ = (f.name, f.instructions, f.operators, f.constants, f.schema, f.type_annotations,
             f.debug_handles, f.class_type, f.register_size)
        if f.schema is not None:
            str(f.schema)
        repr(f)
        f.disassemble()


def _touch_bytes(b: memoryview) -> None:
    """Read the first and last byte of zero-copy bytes."""
    if len(b):
        _ = b[0], b[len(b) - 1]


def _decode_shared(f: Any) -> None:
    """What a Program and a DataFile share: version, size, named data, info."""
    _ = f.version, f.size, getattr(f, "extended_header", None)
    for b in f.named_data.values():
        _touch_bytes(b)
    for v in f.state_dict().values():
        touch(v)
    f.info()
    repr(f)
    regions_tile(f)


def regions_tile(f: Any) -> None:
    """``f.regions()`` covers the file's bytes exactly once, and each region's children
    its own (AssertionError otherwise)."""
    at = 0
    for r in f.regions():
        assert r.start == at and r.end > r.start and r.spans == ((r.start, r.end),), r
        at = r.end
        for node in r.walk():
            kids = sorted(s for c in node.children for s in c.spans)
            assert not node.children or (
                sum(c.size for c in node.children) == node.size
                and all(a[1] <= b[0] for a, b in zip(kids, kids[1:]))
                and kids[0][0] == node.start and kids[-1][1] == node.end), node
    assert at == f.size, (at, f.size)


def decode_program(p: pfm.Program) -> None:
    """Read every part of an ExecuTorch program through the public API."""
    _decode_shared(p)
    for _plan, _value, a in p.constants():
        _touch_array(a)
    for t in p.named_tensors().values():
        touch(t)
    for m in p.methods.values():
        _ = m.name, m.index, m.inputs, m.outputs, m.operators, m.non_const_buffer_sizes
        _ = m.container_metadata
        repr(m)
        values = m.values
        for i in range(len(values)):
            values.kind(i)
            v = values[i]
            if isinstance(v, np.ndarray):
                _touch_array(v)
        repr(values)
        for c in m.chains:
            _ = c.inputs, c.outputs, c.instructions, c.stacktrace
            repr(c)
        for d in m.delegates:
            _ = d.id, d.compile_specs, d.location
            _touch_bytes(d.data)
            repr(d)
            graph = d.graph
            if graph is not None:
                _ = graph.version, graph.input_ids, graph.output_ids
                _ = graph.nodes, graph.values, graph.missing, graph.constant_layouts()
                _ = graph.arguments, graph.named_data_keys()
                # what one backend's graph gives beside the common protocol
                for extra in ("header", "files", "inputs", "outputs", "metadata", "spec"):
                    _ = getattr(graph, extra, None)
                for t in graph.constants().values():
                    touch(t)
                for t in graph.torch_constants().values():
                    touch(t)
                repr(graph)


def decode_data_file(d: pfm.DataFile) -> None:
    """Read every part of an ExecuTorch data file through the public API."""
    _decode_shared(d)
    for a in d.tensors.values():
        _touch_array(a)


def decode_bundled(b: pfm.BundledProgram) -> None:
    """Read every part of an ExecuTorch bundled program through the public API."""
    _ = b.version, b.size, b.program_span
    for cases in b.test_suites.values():
        for case in cases:
            for v in (*case.inputs, *case.expected_outputs):
                touch(v)
    b.info()
    repr(b)
    decode_program(b.program)


def decode_etdump(d: pfm.ETDump) -> None:
    """Read every part of an ExecuTorch ETDump through the public API (debug values
    when it was opened with its debug buffer)."""
    _ = d.version, d.size, d.has_debug_buffer
    for run in d.runs:
        _ = run.name, run.bundled_input_index, run.allocators
        repr(run)
        for e in run.events:
            repr(e)
            if e.kind == "allocation":
                _ = e.allocator_id, e.allocator, e.allocation_size
                continue
            _ = e.name, e.chain_index, e.instruction_id, e.delegate_debug_id
            if isinstance(e, pfm.executorch.ProfileEvent):
                _ = e.start_time, e.end_time, e.duration, bytes(e.delegate_debug_metadata)
            elif isinstance(e, pfm.executorch.DebugEvent):
                _ = e.value_type, e.output, e.tensors
                if d.has_debug_buffer:
                    touch(e.value)
    d.info()
    repr(d)


def check_error(e: pfm.FormatError, data: Any, path: str = "",
                code: Optional[str] = None) -> None:
    """A usable error: a code, an offset inside the data (the data's length itself is
    allowed: it is what a reader reports for "buffer too large"), the expected path."""
    assert isinstance(e.code, str) and e.code, e
    assert isinstance(e.offset, int) and 0 <= e.offset <= len(data), (e.offset, len(data), e)
    assert e.path.startswith(path), (e.path, path)
    if code is not None:
        assert e.code == code, (e.code, code, str(e))


def error_shape(e: pfm.FormatError, size: int) -> Optional[str]:
    """Why a FormatError is not well formed (None when it is): every error needs a
    code, an int offset in [0, size] and, past the header, a field path."""
    if not isinstance(e.code, str) or not e.code:
        return f"no code: {e!r}"
    if not isinstance(e.offset, int) or isinstance(e.offset, bool) or \
            not 0 <= e.offset <= size:
        return f"offset {e.offset!r} outside [0, {size}] ({e.code}: {e})"
    if not isinstance(e.path, str):
        return f"path is {type(e.path).__name__} ({e.code}: {e})"
    if not e.path and e.code not in WHOLE_BUFFER_CODES:
        return f"no path ({e.code}: {e})"
    return None


def outcome(data: Any, verify: bool, **load_kw: Any) -> Tuple[str, str]:
    """Load ``data`` and decode everything; classify how it ended.

    Returns ("ok", ""), ("format_error", code), ("bad_error", why) for a FormatError
    lacking a code, offset or path, or ("exception", traceback) for anything else."""
    try:
        full_decode(pfm.load(data, verify=verify, **load_kw))
    except pfm.FormatError as e:
        why = error_shape(e, len(data))
        return ("format_error", e.code) if why is None else ("bad_error", why)
    except Exception:  # noqa: BLE001 - any other exception is a finding
        return "exception", traceback.format_exc(limit=12)
    return "ok", ""


# ------------------------------------------------------------ big crafted files

def wide_module(n_lists: int, item: int = 0) -> bytes:
    """A valid PTMF file of ``n_lists + 2`` ivalues, laid out directly with numpy (a
    flatbuffers Builder needs minutes for this): ivalues[0] = None, ivalues[1..n_lists]
    = List([item]) each, and a root Object (type ``__torch__.M``, one attribute ``a`` =
    ivalues[1]) last. 28 bytes and 2 tables per list."""
    import struct as _s
    count = n_lists + 2
    iv_vt, none_vt, list_vt, obj_vt = 112, 120, 124, 132
    vec = 144
    first = vec + 4 + 4 * count                      # records start
    head = bytearray(first)
    _s.pack_into("<I4s", head, 0, 28, b"PTMF")
    _s.pack_into("<10H", head, 8, 20, 16, 0, 0, 0, 4, 8, 0, 0, 12)      # Module vtable
    root_rec = first + 4 + 28 * n_lists
    _s.pack_into("<iIII", head, 28, 28 - 8, count - 1, vec - 36, 44 - 40)
    _s.pack_into("<II", head, 44, 1, 64 - 48)                          # object_types
    _s.pack_into("<5H", head, 52, 10, 16, 4, 12, 8)                    # ObjectType vtable
    _s.pack_into("<iIIB", head, 64, 64 - 52, 80 - 68, 96 - 72, 1)      # ObjectType
    _s.pack_into("<I12s", head, 80, 11, b"__torch__.M\0")
    _s.pack_into("<II", head, 96, 1, 104 - 100)
    _s.pack_into("<I2s", head, 104, 1, b"a\0")
    _s.pack_into("<4H", head, iv_vt, 8, 12, 8, 4)                      # IValue: type@8, val@4
    _s.pack_into("<2H", head, none_vt, 4, 4)
    _s.pack_into("<3H", head, list_vt, 6, 8, 4)
    _s.pack_into("<5H", head, obj_vt, 10, 12, 4, 0, 8)
    rec = np.empty(count, np.int64)
    rec[0] = first
    rec[1:count - 1] = first + 4 + 28 * np.arange(n_lists, dtype=np.int64)
    rec[count - 1] = root_rec
    slots = vec + 4 + 4 * np.arange(count, dtype=np.int64)
    words = np.zeros((root_rec + 32) // 4, "<u4")
    words[:first // 4] = np.frombuffer(bytes(head), "<u4")
    words[vec // 4] = count
    words[slots // 4] = (rec - slots).astype("<u4")
    words[first // 4] = first - none_vt
    r = rec[1:count - 1] // 4
    words[r] = (rec[1:count - 1] - iv_vt).astype("<u4")
    words[r + 1] = 8                  # val -> List table (at +12)
    words[r + 2] = 7                  # val_type List
    words[r + 3] = (rec[1:count - 1] + 12 - list_vt).astype("<u4")
    words[r + 4] = 4                  # items -> vector (at +20)
    words[r + 5] = 1
    words[r + 6] = item
    r = root_rec // 4
    words[r:r + 8] = [root_rec - iv_vt, 8, 10, root_rec + 12 - obj_vt, 0, 4, 1, 1]
    return words.tobytes()
