"""Threads, the GIL, buffer lifetime and buffers changed after loading.

- One Module decoded from 8 threads at once, and 8 threads loading the same bytes at
  once, give exactly the single-threaded results; lazy caches (tensor rows, slot
  maps, parsed jit_sources) are raced on their first use, round after round.
- The C verifier releases the GIL: another thread keeps running during a long load.
- ``close()`` on a Module over a caller's bytearray (or mmap) never breaks it: once
  the last array and proxy is gone the caller can resize or close it again.
- Arrays and proxies outlive the Module, in every order of dropping and collecting.
- A writable bytearray changed in place after load (thousands of single-byte and
  uint32 edits, in worker processes) never causes a crash or any exception but a
  well-formed FormatError: the C accessors re-check bounds (defence in depth).
"""
from __future__ import annotations

import gc
import itertools
import mmap
import os
import struct
import subprocess
import sys
import threading
import time
from typing import Any, Callable, Dict, List, Tuple

import numpy as np
import pytest

import pyflatmodule as pfm

from support import model_path
from support.decode_all import error_shape, full_decode, wide_module
from support.paths import FUZZ, TESTS

sys.path.insert(0, FUZZ)
import sweep  # noqa: E402

THREADS = 8
FILES = ["sample.ptl", "ivalues.ff", "quantized.ff", "setstate.ff", "dtypes.ff",
         "methods.ff", "layouts.ff", "deep_wide.ff", "enum_constant.ff"]


def _read(name: str) -> bytes:
    with open(model_path(name), "rb") as f:
        return f.read()


# ------------------------------------------------------------ a full, comparable decode

def canon(v: Any, depth: int = 0) -> Any:
    """A plain, comparable rendering of a decoded value (arrays by dtype, shape,
    strides and bytes; objects by type, index and attributes)."""
    assert depth < 100
    if isinstance(v, np.ndarray):
        return ("nd", v.dtype.str, v.shape, tuple(s // max(1, v.itemsize) for s in v.strides),
                np.ascontiguousarray(v).tobytes())
    if isinstance(v, pfm.QuantizedTensor):
        return ("q", v.qscheme, v.dtype_name, v.shape, canon(v.int_repr, depth + 1),
                repr(v.scale), v.zero_point, canon(v.scales, depth + 1),
                canon(v.zero_points, depth + 1), v.axis)
    if isinstance(v, pfm.Object):
        return ("obj", v.type_name, v.kind, v.index,
                [(k, canon(x, depth + 1)) for k, x in v.attributes.items()])
    if isinstance(v, pfm.Function):
        return ("fn", v.name)
    if isinstance(v, (list, tuple)):
        return (type(v).__name__, [canon(x, depth + 1) for x in v])
    if isinstance(v, dict):
        return ("dict", [(canon(k, depth + 1), canon(x, depth + 1)) for k, x in v.items()])
    if isinstance(v, pfm.TensorKey):
        return ("tensor_key", canon(v.value, depth + 1))
    if isinstance(v, (set, frozenset)):
        return ("set", sorted(map(repr, v)))
    if isinstance(v, pfm.EnumValue):
        return ("enum", v.type_name, canon(v.value, depth + 1))
    if isinstance(v, float):
        return ("float", v.hex())
    if isinstance(v, complex):
        return ("complex", v.real.hex(), v.imag.hex())
    return (type(v).__name__, repr(v))


def digest(m: pfm.Module) -> List[Any]:
    """Everything the module hands out, rendered comparably."""
    out: List[Any] = [canon(m.ivalues[i]) for i in range(len(m.ivalues))]
    out.append(canon(m.state_dict()))
    out.append(canon(m.info()))
    out.append(canon(m.root))
    out.append((m.extra_files, m.jit_sources, m.object_types, m.bytecode_version))
    out.append([canon(s) for s in m.storages])
    for f in m.functions():
        out.append((f.name, f.disassemble(), canon(f.instructions), canon(f.constants),
                    str(f.schema), f.type_annotations, canon(f.debug_handles)))
    return out


def run_threads(fn: Callable[[int], Any], n: int = THREADS) -> List[Any]:
    """Run fn(0..n-1) in n threads released together; re-raise the first error."""
    results: List[Any] = [None] * n
    errors: List[BaseException] = []
    barrier = threading.Barrier(n)

    def body(k: int) -> None:
        try:
            barrier.wait()
            results[k] = fn(k)
        except BaseException as e:  # noqa: BLE001
            errors.append(e)

    threads = [threading.Thread(target=body, args=(k,)) for k in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
    return results


@pytest.fixture
def fast_switching():
    """Switch threads every microsecond: races in lazy caches show up."""
    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    yield
    sys.setswitchinterval(old)


@pytest.mark.parametrize("name", FILES)
def test_one_module_decoded_from_8_threads(name: str, fast_switching: None) -> None:
    data = _read(name)
    expected = digest(pfm.load(data))
    for _ in range(3):
        m = pfm.load(data)              # fresh: every lazy cache is filled concurrently
        results = run_threads(lambda k: digest(m))
        for k, r in enumerate(results):
            assert r == expected, f"thread {k} decoded {name} differently"


@pytest.mark.parametrize("name", ["deep_wide.ff", "sample.ptl"])
def test_threads_decoding_at_once_share_one_proxy_per_object(name: str,
                                                             fast_switching: None) -> None:
    """8 threads decoding every value of a fresh module at once all hold the same
    Object and Function proxies (found: 20 rounds in 100 differed)."""
    data = _read(name)
    for _ in range(50):
        m = pfm.load(data)
        first, *others = run_threads(lambda k: list(m.ivalues))
        proxies = [k for k, v in enumerate(first) if isinstance(v, (pfm.Object, pfm.Function))]
        assert proxies
        for values in others:
            assert all(values[k] is first[k] for k in proxies)


@pytest.mark.parametrize("name", FILES)
def test_8_threads_loading_the_same_bytes(name: str, fast_switching: None) -> None:
    data = _read(name)
    expected = digest(pfm.load(data))
    source: Dict[str, Any] = {"bytes": data, "path": model_path(name),
                              "memoryview": memoryview(data)}
    for kind, src in source.items():
        results = run_threads(lambda k: digest(pfm.load(src, verify=k % 2 == 0)))
        assert all(r == expected for r in results), kind


def race(data: bytes, first_use: Callable[[pfm.Module], Any], seconds: float = 6,
         min_rounds: int = 100) -> int:
    """Fresh modules, 8 threads making the same first use of each at once, for
    ``seconds``: every thread gets the single-threaded answer. Returns the rounds."""
    expected = canon(first_use(pfm.load(data)))
    deadline = time.monotonic() + seconds
    rounds = 0
    while time.monotonic() < deadline or rounds < min_rounds:
        m = pfm.load(data)
        results = run_threads(lambda k: canon(first_use(m)))
        assert all(r == expected for r in results)
        rounds += 1
    return rounds


def test_threads_racing_on_first_tensor_access(fast_switching: None) -> None:
    """The tensor index rows are built lazily on first use: a thread must never see
    them half built (found: AssertionError or IndexError in Image.tensor in about 1%
    of rounds)."""
    data = _read("dtypes.ff")
    ref = pfm.load(data)
    t = next(i for i in range(len(ref.ivalues))
             if ref.ivalues.type_name(i) == "TensorMetadata")
    print(race(data, lambda m: m.ivalues[t]), "rounds")


def test_threads_racing_on_first_attribute_access(fast_switching: None) -> None:
    """An object type's name-to-slot map is built lazily on first use (found: it was
    published empty and filled afterwards: KeyError for an existing attribute)."""
    data = _read("mlp_jit.ff")
    name = list(pfm.load(data).root.attributes)[-1]
    print(race(data, lambda m: m.root.attributes[name]), "rounds")


def test_threads_racing_on_first_state_dict(fast_switching: None) -> None:
    """state_dict() parses jit_sources lazily; parsing from several threads at once
    must work (found, now and then: SystemError "AST constructor recursion depth
    mismatch" from ast.literal_eval run concurrently, and KeyError from the slot map)."""
    data = _read("deep_wide.ff")
    print(race(data, lambda m: m.state_dict()), "rounds")


def test_threads_racing_on_first_value_access(fast_switching: None) -> None:
    data = _read("ivalues.ff")
    ref = pfm.load(data)
    n = len(ref.ivalues)
    expected = [canon(ref.ivalues[i]) for i in range(n)]
    for _ in range(40):
        m = pfm.load(data)
        results = run_threads(lambda k: [canon(m.ivalues[(i + k) % n]) for i in range(n)])
        for k, r in enumerate(results):
            assert r == [expected[(i + k) % n] for i in range(n)]


def _program_reads(p: pfm.Program) -> List[Any]:
    """What a first read of a program gives: its methods, values, delegates, graphs."""
    return [(name, len(m.values), [len(c.instructions) for c in m.chains],
             [(d.id, d.graph.arguments if d.graph else None) for d in m.delegates])
            for name, m in p.methods.items()]


def _first_read_or_error(p: pfm.Program) -> Any:
    try:
        return _program_reads(p)
    except pfm.FormatError as e:
        return e.code, e.offset, e.path


@pytest.mark.parametrize("name", ["et/xnn_conv.pte",
                                  "gate/execute-crash-DelegateCall_args-vector_length.pte"])
def test_threads_racing_on_a_programs_first_read(name: str, fast_switching: None) -> None:
    """A program's execution plans are checked at their first read: 8 threads reading
    a fresh program at once all get the single-threaded answer. The second program's
    plans pass the C checks and fail the XNNPACK call check after them: every thread
    gets that error, none a plan read while another thread was still checking it."""
    data = _read(name)
    expected = _first_read_or_error(pfm.load(data))
    assert isinstance(expected, list) == name.startswith("et/"), expected
    for _ in range(100):
        p = pfm.load(data)
        results = run_threads(lambda k: _first_read_or_error(p))
        assert all(r == expected for r in results), (expected, results)


# ------------------------------------------------------------ the GIL

def test_verifier_releases_the_gil() -> None:
    """While one thread verifies a 1M-ivalue file (32 MB), another keeps running:
    its longest pause stays far below the time the C passes take."""
    data = wide_module(1_000_000)
    start = time.perf_counter()
    pfm.load(data)
    alone = time.perf_counter() - start
    old = sys.getswitchinterval()
    sys.setswitchinterval(0.001)
    try:
        done = threading.Event()
        ticks: List[float] = []

        def counter() -> None:
            while not done.is_set():
                ticks.append(time.perf_counter())

        t = threading.Thread(target=counter)
        t.start()
        time.sleep(0.05)
        begin = time.perf_counter()
        pfm.load(data)
        end = time.perf_counter()
        done.set()
        t.join()
    finally:
        sys.setswitchinterval(old)
    during = [x for x in ticks if begin <= x <= end]
    gaps = np.diff([begin] + during + [end])
    print(f"load alone {alone:.3f} s, with a counter {end - begin:.3f} s, "
          f"{len(during)} ticks during it, longest pause {gaps.max() * 1000:.1f} ms")
    assert len(during) > 1000
    # Holding the GIL through the C passes would stall the counter for most of them.
    assert gaps.max() < max(0.25 * alone, 0.03), gaps.max()


# ------------------------------------------------------------ the caller's buffer

def _views(m: pfm.Module) -> List[Any]:
    sd = m.state_dict()
    return [m.root, next(iter(sd.values())), m.storages[0], m.functions()[0],
            m.functions()[0].instructions]


@pytest.mark.parametrize("verify", [True, False])
def test_close_never_breaks_the_callers_bytearray(verify: bool) -> None:
    buf = bytearray(_read("mlp_jit.ff"))
    original = bytes(buf)
    m = pfm.load(buf, verify=verify)
    views = _views(m)
    m.close()
    # views still read the caller's buffer; the buffer is pinned, not broken
    assert np.shares_memory(views[1], np.frombuffer(buf, np.uint8))
    with pytest.raises(BufferError):
        buf.append(0)
    assert bytes(buf) == original
    buf[-1] = buf[-1]                          # item assignment works throughout
    del views
    gc.collect()
    buf.extend(b"\0" * 100)                    # resizable again
    del buf[len(original):]
    assert bytes(buf) == original
    buf.clear()
    assert len(buf) == 0


def test_dropping_the_module_without_close_releases_the_bytearray() -> None:
    buf = bytearray(_read("mlp_jit.ff"))
    m = pfm.load(buf)
    full_decode(m)
    del m
    gc.collect()
    buf += b"more"
    assert buf.endswith(b"more")


def test_close_never_breaks_the_callers_mmap(tmp_path) -> None:
    path = tmp_path / "m.ff"
    path.write_bytes(_read("mlp_jit.ff"))
    with open(path, "rb") as f:
        mm = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    m = pfm.load(mm)
    views = _views(m)
    m.close()
    assert not mm.closed and mm[:4] == path.read_bytes()[:4]
    with pytest.raises(BufferError):
        mm.close()                             # exported buffers: refused, not broken
    del views
    gc.collect()
    mm.close()
    assert mm.closed


def test_memoryview_over_callers_bytearray() -> None:
    buf = bytearray(_read("quantized.ff"))
    mv = memoryview(buf)
    m = pfm.load(mv)
    q = [v for v in m.state_dict().values()]
    m.close()
    mv.release()                               # the caller's own view can go
    del m
    gc.collect()
    for v in q:
        (v.int_repr if isinstance(v, pfm.QuantizedTensor) else v).sum()
    del q, v
    gc.collect()
    buf.append(1)


# ------------------------------------------------------------ drop and collect orders

def _handles(source: Any) -> Dict[str, Any]:
    m = pfm.load(source)
    sd = m.state_dict()
    qs = [v for v in sd.values() if isinstance(v, pfm.QuantizedTensor)]
    f = m.functions()[0]
    return {"module": m, "root": m.root, "array": qs[-1].int_repr,
            "quantized": qs[0], "function": f, "instructions": f.instructions,
            "storage": m.storages[0]}


def _use(name: str, h: Any, expected: Dict[str, Any]) -> None:
    if name == "module":
        assert canon((h.state_dict(), h.info())) == expected["module"]
    elif name == "root":
        assert canon(h) == expected["root"]
    elif name in ("array", "instructions", "storage"):
        assert canon(h) == expected[name]
    elif name == "quantized":
        assert canon(h) == expected["quantized"]
        h.dequantize()
    else:
        assert (h.name, h.disassemble()) == expected["function"]


def drop_orders(kind: str) -> int:
    """Drop the handles one by one in every order of 4 of them (module, root proxy,
    tensor, quantized tensor; then function, instructions and storage too, in a few
    orders), collecting after each; everything left stays valid. Returns the number
    of orders run."""
    # Everything imported so far is never garbage: keep it out of every collection
    # (a full collection over numpy's objects takes ~50 ms; this makes it ~0).
    gc.freeze()
    path = model_path("quantized.ff")
    data = _read("quantized.ff")
    source = {"path": path, "bytes": data, "bytearray": bytearray(data)}[kind]
    ref = _handles(data)
    expected = {"module": canon((ref["module"].state_dict(), ref["module"].info())),
                "root": canon(ref["root"]),
                "array": canon(ref["array"]), "quantized": canon(ref["quantized"]),
                "function": (ref["function"].name, ref["function"].disassemble()),
                "instructions": canon(ref["instructions"]),
                "storage": canon(ref["storage"])}
    names = ["module", "root", "array", "quantized"]
    orders = list(itertools.permutations(names))
    everything = list(expected)
    orders += [tuple(everything), tuple(reversed(everything)),
               tuple(everything[1:] + everything[:1])]
    for order in orders:
        handles = _handles(source)
        if order[0] != "module":
            handles["module"].close()
        for k, name in enumerate(order):
            del handles[name]
            gc.collect()
            for other in order[k + 1:]:
                if other == "module" and handles[other].closed:
                    continue
                _use(other, handles[other], expected)
        handles.clear()
        gc.collect()
    if kind == "bytearray":
        source.append(0)      # nothing pins the caller's buffer any more
    return len(orders)


@pytest.mark.parametrize("kind", ["path", "bytes", "bytearray"])
def test_every_drop_and_collect_order(kind: str) -> None:
    """drop_orders() in a fresh interpreter (gc.freeze() there keeps each of the ~150
    gc.collect() calls fast; a crash fails the test instead of pytest)."""
    here = os.path.dirname(os.path.abspath(__file__))
    package_parent = os.path.dirname(os.path.dirname(os.path.abspath(pfm.__file__)))
    script = (f"import sys; sys.path[:0] = {[here, TESTS, package_parent]!r}\n"
              f"import test_concurrency as t; print('orders', t.drop_orders({kind!r}))")
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0 and "orders 27" in out.stdout, out.stderr[-3000:]


# ------------------------------------------------ the buffer changed after load

#: Files for the in-place sweep (small, varied); edits per file
INPLACE_FILES = ["mlp_jit.ff", "quantized.ff", "setstate.ff", "methods.ff", "ivalues.ff",
                 "layouts.ff", "enum_constant.ff", "dynamic_quant_linear.ff",
                 "setstate_inside.ff"]
U32_VALUES = [0, 1, 4, 0x7FFFFFFF, 0x80000000, 0xFFFFFFFF, 0xFFFFFFFC]


def _inplace_target(data: bytes, m: Tuple[str, int, int], verify: bool) -> Tuple[str, str]:
    """Load a bytearray, (for half the edits) decode part of it, change it in place,
    then decode everything. Judged like decode_all.outcome."""
    import traceback
    buf = bytearray(data)
    try:
        mod = pfm.load(buf, verify=verify)
    except pfm.FormatError as e:
        return "exception", f"the unmodified file was rejected: {e}"
    try:
        if m[1] % 2:
            _ = mod.root, mod.functions(), mod.ivalues[len(mod.ivalues) - 1]
        kind, at, value = m
        if kind == "u32":
            struct.pack_into("<I", buf, at, value)
        else:
            buf[at] = value
        full_decode(mod)
    except pfm.FormatError as e:
        why = error_shape(e, len(buf))
        return ("format_error", e.code) if why is None else ("bad_error", why)
    except Exception:  # noqa: BLE001
        return "exception", traceback.format_exc(limit=12)
    return "ok", ""


def inplace_mutations(data: bytes, budget: int) -> List[Tuple[str, int, int]]:
    """Single bytes at a stride (rotating values) and uint32 boundary values at
    aligned positions at a stride: about ``budget`` edits."""
    sets = [m for m in sweep.all_mutations(data) if m[0] == "set"]
    stride = max(1, len(sets) // (budget // 2))
    words = [("u32", p, v) for p in range(8, len(data) - 3, 4) for v in U32_VALUES]
    wstride = max(1, len(words) // (budget // 2))
    return sets[::stride] + words[wstride // 2::wstride]


def test_buffer_changed_in_place_after_load(tmp_path) -> None:
    jobs = []
    for name in INPLACE_FILES:
        data = _read(name)
        jobs.append((name, data, inplace_mutations(data, 375)))
    result = sweep.run(jobs, str(tmp_path), workers=2, timeout=30,
                       target=_inplace_target, raw=True)
    print(f"in-place edits after load: {result.summary()}")
    assert result.inputs == sum(len(m) for _, _, m in jobs) >= 3000
    assert not result.findings, "\n".join(str(f) for f in result.findings[:20])


# Minimal reproducers of what the in-place sweep finds: an index re-read from the
# changed buffer at decode time is not checked again.

def _edited_after_load(ivalue: int, field: int, element: int, value: int
                       ) -> Tuple[pfm.Module, bytearray]:
    """ptmf_craft.valid_module() loaded from a bytearray (verified), then element
    ``element`` of vector field ``field`` of ivalues[ivalue]'s payload set to ``value``."""
    import support.ptmf_craft as c
    data = c.build(c.valid_module())
    table = c.deref(data, c.ivalue_slot(data, ivalue))
    payload = c.deref(data, c.field_pos(data, table, 1))
    vec = c.deref(data, c.field_pos(data, payload, field))
    buf = bytearray(data)
    m = pfm.load(buf)
    struct.pack_into("<I", buf, vec + 4 + 4 * element, value)
    return m, buf


def _graceful(fn: Callable[[], Any], size: int) -> None:
    try:
        fn()
    except pfm.FormatError as e:
        assert error_shape(e, size) is None, error_shape(e, size)


@pytest.mark.parametrize("value", [99, 2**32 - 1], ids=["99", "2p32_minus_1"])
def test_inplace_list_item_out_of_range(value: int) -> None:
    """ivalues[4] = List([1, 2, 3]); items[0] := 99 after load (found: IndexError)."""
    m, buf = _edited_after_load(4, 0, 0, value)
    _graceful(lambda: m.ivalues[4], len(buf))


def test_inplace_list_item_self_reference() -> None:
    """items[0] := 4, the list itself: a cycle the verifier ruled out before the
    change (found: RecursionError)."""
    m, buf = _edited_after_load(4, 0, 0, 4)
    _graceful(lambda: m.ivalues[4], len(buf))


def test_inplace_object_attr_out_of_range() -> None:
    """The root Object (ivalues[8]) attrs[0] := 99 (found: IndexError)."""
    m, buf = _edited_after_load(8, 2, 0, 99)
    _graceful(lambda: m.root.count, len(buf))


def test_inplace_object_attr_self_reference_in_state_dict() -> None:
    """The root's attrs[0] := 8, the root itself: state_dict() walks the object
    cycle (found: RecursionError)."""
    m, buf = _edited_after_load(8, 2, 0, 8)
    _graceful(m.state_dict, len(buf))


def test_inplace_module_attr_turned_forward_in_the_declared_walk() -> None:
    """A real file from a bytearray; after load, the root module's attrs[0] is pointed
    at the root itself: state_dict() (the walk torch's declarations drive, done in C)
    refuses it, naming the attribute and where it is stored."""
    import support.ptmf_craft as c
    data = _read("mlp_jit.ff")
    buf = bytearray(data)
    m = pfm.load(buf)
    root = m.root.index
    table = c.deref(data, c.ivalue_slot(data, root))
    payload = c.deref(data, c.field_pos(data, table, 1))
    attrs = c.deref(data, c.field_pos(data, payload, 2))   # Object.attrs
    struct.pack_into("<I", buf, attrs + 4, root)
    with pytest.raises(pfm.FormatError) as e:
        m.state_dict()
    assert (e.value.code, e.value.offset, e.value.path) == (
        "forward_reference", attrs + 4, f"ivalues[{root}].val<Object>.attrs[0]")


@pytest.mark.parametrize("kind", ["List", "Dict"])
def test_reference_turned_forward_after_load_is_a_format_error(kind: str) -> None:
    """A container's item rewritten in place to name a later ivalue: the bulk decode
    (``list(m.ivalues)``) and the one-value decode both refuse it, naming the item."""
    import support.ptmf_craft as c
    module = c.valid_module()
    base = len(module["ivalues"])
    module["ivalues"] += [c.Int(100 + k) for k in range(6)]
    ints = list(range(base, base + 6))
    if kind == "List":
        module["ivalues"].append(c.List(ints[:4]))
        vector, expected = ints[:4], [100, 101, 102, 103]
    else:
        module["ivalues"].append(c.Dict_(ints[:3], ints[3:]))
        vector, expected = ints[3:], {100: 103, 101: 104, 102: 105}
    n = len(module["ivalues"])
    buf = bytearray(c.build(module))
    # The (values) vector as stored: a uint32 count, then the uint32 indices.
    stored = struct.pack(f"<{len(vector) + 1}I", len(vector), *vector)
    assert buf.count(stored) == 1
    at = buf.index(stored) + 8                                  # its second item
    m = pfm.load(buf)
    assert m.ivalues[n - 1] == expected
    buf[at:at + 4] = struct.pack("<I", n + 5)
    for decode in (lambda: list(m.ivalues), lambda: m.ivalues[n - 1]):
        with pytest.raises(pfm.FormatError) as e:
            decode()
        assert e.value.code == "forward_reference"
        assert e.value.path.startswith(f"ivalues[{n - 1}].val<{kind}>")
    field = ".items[1]" if kind == "List" else ".values[1]"
    with pytest.raises(pfm.FormatError) as e:
        list(m.ivalues)
    assert (e.value.path, e.value.offset) == (f"ivalues[{n - 1}].val<{kind}>{field}", at)


def test_reference_to_a_deeper_value_written_after_load() -> None:
    """A tuple's item rewritten in place to name an earlier but more deeply nested
    tuple: the nesting depths the index measured no longer hold, so the bulk decode
    (which builds containers level by level of depth) builds in file order instead,
    and both decodes give what the bytes now say."""
    import support.ptmf_craft as c
    module = c.valid_module()
    base = len(module["ivalues"])
    module["ivalues"] += [c.Int(7), c.Tuple([base]), c.Tuple([base + 1]),
                          c.Tuple([base, base])]
    buf = bytearray(c.build(module))
    stored = struct.pack("<3I", 2, base, base)    # the last tuple's count and items
    assert buf.count(stored) == 1
    m = pfm.load(buf)
    assert list(m.ivalues)[base:] == [7, (7,), ((7,),), (7, 7)]
    at = buf.index(stored) + 4                     # its first item
    buf[at:at + 4] = struct.pack("<I", base + 2)
    assert list(m.ivalues)[base + 3] == (((7,),), 7)
    assert m.ivalues[base + 3] == (((7,),), 7)
