"""Remote files: what a URL answers is what the local file answers, at the cost the format
allows (a program's header and flatbuffer for its metadata, never its weights for a
check), and every misbehaving server is one clear error.

nginx serves tests/data and the benchmark cache on 127.0.0.1; bytes and requests are
counted from its access log. The faults come from tests/support/http_servers.py's own
server; fsspec's memory filesystem stands for the other schemes.
"""
from __future__ import annotations

import http.client
import json
import os
import struct
import threading
import time
from pathlib import Path
from typing import Any, Dict, List, Tuple

import numpy as np
import pytest

import pyflatmodule as pfm
from pyflatmodule.core.remote import BLOCK_BYTES, HEAD_BYTES, TOTAL, RemoteFile

from support.cli import run_cli
from support.http_servers import Misbehaving, Nginx
from support.paths import DATA, ET

#: Every ExecuTorch file of the test data, and three PTMF models (fetched whole).
FILES = sorted(
    [os.path.join("et", n) for n in os.listdir(ET)
     if n.endswith((".pte", ".ptd", ".bpte", ".etdump"))]
    + ["dtypes.ff", "ivalues.ff", "deep_wide.ff"])
PROGRAMS = [f for f in FILES if f.endswith((".pte", ".ptd"))]
#: The commands and forms compared.
COMMANDS = [("info",), ("info", "--json"), ("ops",), ("ops", "--json"), ("dis",),
            ("tree",), ("tree", "--json"), ("memory",), ("size",), ("size", "--json"),
            ("verify",), ("verify", "--json")]
#: Quick failures for the misbehaving server's tests.
FAST = {"timeout": 0.5, "tries": 2}


def _header(path: Path) -> Tuple[int, int]:
    """(flatbuffer end, segment base) of a program, from its eh00 header's bytes."""
    with open(path, "rb") as f:
        head = f.read(32)
    assert head[8:12] == b"eh00"
    program_size, segment_base = struct.unpack_from("<QQ", head, 16)
    return program_size, segment_base


def _range(header: str) -> Tuple[int, int]:
    first, last = header.split("=", 1)[1].split("-")
    return int(first), int(last)


# ------------------------------------------------------------------ the same answers


@pytest.mark.parametrize("name", FILES)
def test_every_command_answers_a_url_as_the_local_file(nginx: Nginx, name: str) -> None:
    local, url = os.path.join(DATA, name), nginx.url("data", name)
    for command in COMMANDS:
        want = run_cli(command[0], local, *command[1:])
        got = run_cli(command[0], url, *command[1:])
        assert (got.returncode, got.stdout.replace(url, local),
                got.stderr.replace(url, local)) == \
            (want.returncode, want.stdout, want.stderr), command


def _same_tensors(a: Dict[str, Any], b: Dict[str, Any]) -> None:
    assert list(a) == list(b)
    for key in a:
        x, y = a[key], b[key]
        if isinstance(x, pfm.QuantizedTensor):
            x, y = x.values(), y.values()
        assert x.dtype == y.dtype and x.shape == y.shape and x.tobytes() == y.tobytes(), key


@pytest.mark.parametrize("name", PROGRAMS)
def test_a_remote_program_reads_as_the_local_one(nginx: Nginx, name: str) -> None:
    data = ["et/external.ptd"] if name == "et/external.pte" else []
    with pfm.load(os.path.join(DATA, name), data=[os.path.join(DATA, d) for d in data]) as q, \
            pfm.load(nginx.url("data", name), data=[nginx.url("data", d) for d in data]) as p:
        assert p.info() == q.info()
        assert p.fetched is not None and q.fetched is None
        _same_tensors(p.state_dict(), q.state_dict())
        assert {k: bytes(v) for k, v in p.named_data.items()} == \
            {k: bytes(v) for k, v in q.named_data.items()}
        if isinstance(p, pfm.Program):
            assert p.extended_header == q.extended_header
            assert [bytes(d.data) for m in p.methods.values() for d in m.delegates] == \
                [bytes(d.data) for m in q.methods.values() for d in m.delegates]
            assert not np.asarray(p.constants()[0][2]).flags.writeable if p.constants() \
                else True


def test_a_remote_array_outlives_its_program(nginx: Nginx) -> None:
    with pfm.load(nginx.url("data", "et/mlp.pte")) as p:
        weights = p.state_dict()
    assert p.closed
    with pfm.load(os.path.join(ET, "mlp.pte")) as q:
        _same_tensors(weights, q.state_dict())


# ------------------------------------------------------------------ what it costs


def test_metadata_of_a_big_program_costs_two_requests(nginx: Nginx, big_program: Path) -> None:
    flatbuffer, _ = _header(big_program)
    url = nginx.url("bench", big_program.name)
    assert big_program.stat().st_size >= 500 << 20
    for command in ("info", "ops", "dis", "tree", "memory", "size"):
        mark = nginx.mark()
        run = run_cli(command, url, "--stats")
        assert run.returncode == 0, run.stderr
        got = nginx.since(mark)
        assert 1 <= len(got) <= 2, (command, got)
        assert sum(r.body_bytes_sent for r in got) <= flatbuffer + HEAD_BYTES, command
        # --stats says what the server counted
        requests = f"{len(got)} request{'s' if len(got) > 1 else ''}"
        assert f"fetched: {requests}, {sum(r.body_bytes_sent for r in got):,} bytes" \
            in run.stderr.splitlines()[-1]


def test_metadata_of_a_delegated_program_costs_two_requests(
        nginx: Nginx, big_xnnpack_program: Path) -> None:
    """The XNNPACK program's weights (512 MiB, in named data) are not read for its
    metadata: what its delegates' constants are comes from their graphs, and the payloads'
    and named entries' first bytes (the native-code check) come in one multi-range
    request after the head. Each answer is the local file's."""
    flatbuffer, _ = _header(big_xnnpack_program)
    url = nginx.url("bench", big_xnnpack_program.name)
    for command in ("info", "ops", "dis", "tree", "memory", "size", "verify"):
        mark = nginx.mark()
        got = run_cli(command, url, "--json")
        records = nginx.since(mark)
        want = run_cli(command, str(big_xnnpack_program), "--json")
        assert got.stdout.replace(url, str(big_xnnpack_program)) == want.stdout, command
        assert 1 <= len(records) <= 2, (command, records)
        assert sum(r.body_bytes_sent for r in records) <= flatbuffer + HEAD_BYTES, command


def test_verify_of_a_program_without_delegates_asks_for_no_segment(
        nginx: Nginx, big_program: Path) -> None:
    """No request is for segment data: the first (64 KiB, before the size of the
    flatbuffer is known) may reach past its end, the second, if any, stops there."""
    flatbuffer, segment_base = _header(big_program)
    mark = nginx.mark()
    run = run_cli("verify", nginx.url("bench", big_program.name))
    assert run.returncode == 0 and ": OK" in run.stdout, run.stdout + run.stderr
    got = nginx.since(mark)
    assert got and all(_range(r.range)[0] < flatbuffer <= segment_base for r in got), got
    assert sum(r.body_bytes_sent for r in got) <= max(flatbuffer, HEAD_BYTES)


def test_verify_of_a_delegated_program_reads_payloads_not_weights(
        nginx: Nginx, big_xnnpack_program: Path) -> None:
    size = big_xnnpack_program.stat().st_size
    flatbuffer, _ = _header(big_xnnpack_program)
    mark = nginx.mark()
    run = run_cli("verify", nginx.url("bench", big_xnnpack_program.name))
    assert run.returncode == 0 and ": OK" in run.stdout, run.stdout + run.stderr
    fetched = sum(r.body_bytes_sent for r in nginx.since(mark))
    # the payloads are the graphs: kilobytes; the weights are half a gigabyte
    assert fetched <= flatbuffer + (2 << 20) < size // 100


def test_a_tensor_read_fetches_its_own_bytes(nginx: Nginx, big_program: Path) -> None:
    with pfm.load_program(nginx.url("bench", big_program.name)) as p:
        method = next(iter(p.methods.values()))
        mark = nginx.mark()
        tensor = next(v for i in range(len(method.values))
                      if isinstance(v := method.values[i], np.ndarray) and v.size > 1)
        got = nginx.since(mark)
        assert sum(r.body_bytes_sent for r in got) <= tensor.nbytes + 2 * BLOCK_BYTES
        assert len(got) == 1
    with pfm.load_program(big_program) as q:
        local = next(iter(q.methods.values())).values
        assert any(isinstance(v := local[i], np.ndarray) and v.tobytes() == tensor.tobytes()
                   for i in range(len(local)))


# --------------------------------------------------------------- servers that misbehave


def test_small_reads_of_many_places_cost_one_request(nginx: Nginx) -> None:
    """Ranges prefetched together are one multi-range request (nginx answers it as
    multipart/byteranges); reading them after costs nothing more."""
    path = os.path.join(ET, "xnn_attention.pte")
    with open(path, "rb") as f:
        data = f.read()
    ranges = [(2000, 64), (9000, 100), (9050, 100), (14000, 4096), (len(data) - 10, 10)]
    f = RemoteFile(nginx.url("data", "et/xnn_attention.pte"), head=1024)
    mark = nginx.mark()
    f.prefetch(ranges)
    got = nginx.since(mark, expect=1)
    assert len(got) == 1 and got[0].status == 206 and got[0].range.count(",") == 3, got
    for start, n in ranges:
        assert f.read(start, n) == data[start:start + n]
    assert nginx.since(mark) == got
    assert (f.stats.requests, f.stats.bytes) == (2, 1024 + got[0].body_bytes_sent)
    f.close()


def test_a_server_without_multirange_is_asked_range_by_range(
        misbehaving: Misbehaving) -> None:
    """A server that answers several ranges with the whole file (HTTP 200; the test
    server's ``ok`` mode, as some object stores) is not read: each range is asked for
    alone, then and for the rest of the file's life."""
    path = os.path.join(ET, "xnn_attention.pte")
    with open(path, "rb") as f:
        data = f.read()
    f = RemoteFile(misbehaving.url("ok", "xnn_attention.pte"), storage_options=FAST,
                   head=1024)
    f.prefetch([(2000, 64), (9000, 64)])
    f.prefetch([(3000, 64), (10000, 64)])
    for start in (2000, 9000, 3000, 10000):
        assert f.read(start, 64) == data[start:start + 64]
    # The server notes each request when it ends: the refused multi-range one (its whole
    # file cut short by the client) may end after the single ranges that followed it.
    asked = [r.range for r in misbehaving.requests("ok")]
    assert asked[0] == "bytes=0-1023", asked
    assert sorted(asked[1:]) == sorted(["bytes=2000-2063,9000-9063", "bytes=2000-2063",
                                        "bytes=9000-9063", "bytes=3000-3063",
                                        "bytes=10000-10063"]), asked
    f.close()


def test_parts_other_than_the_ranges_asked_are_an_error(misbehaving: Misbehaving) -> None:
    url = misbehaving.url("badparts", "xnn_attention.pte")
    f = RemoteFile(url, storage_options=FAST, head=1024)
    with pytest.raises(pfm.RemoteError, match="the server did not send them") as e:
        f.prefetch([(2000, 64), (9000, 64)])
    assert e.value.url == url
    f.close()


def _fails(url: str, *needles: str) -> pfm.RemoteError:
    with pytest.raises(pfm.RemoteError) as e:
        pfm.load(url, storage_options=FAST)
    assert e.value.url == url and str(e.value).startswith(url + ": ")
    for needle in needles:
        assert needle in e.value.reason, e.value.reason
    return e.value


def test_not_found_is_one_request(misbehaving: Misbehaving) -> None:
    _fails(misbehaving.url("404", "mlp.pte"), "not found")
    assert misbehaving.count("404") == 1


def test_server_errors_are_tried_a_bounded_number_of_times(misbehaving: Misbehaving) -> None:
    _fails(misbehaving.url("500", "mlp.pte"), "failed 2 times", "HTTP 500")
    assert misbehaving.count("500") == 2


def test_a_passing_fault_is_tried_again(misbehaving: Misbehaving) -> None:
    misbehaving.flaky_failures = 2
    with pfm.load(misbehaving.url("flaky500", "mlp.pte"), storage_options={"tries": 3}) as p, \
            pfm.load(os.path.join(ET, "mlp.pte")) as q:
        assert p.info() == q.info()
    assert misbehaving.count("flaky500") == 3


def test_a_short_answer_is_an_error(misbehaving: Misbehaving) -> None:
    _fails(misbehaving.url("short", "mlp.pte"), "failed 2 times")


def test_an_answer_of_other_bytes_is_an_error(misbehaving: Misbehaving) -> None:
    _fails(misbehaving.url("wronglength", "mlp.pte"), "the server sent")


def test_a_range_ignored_is_an_error_without_the_download(
        misbehaving: Misbehaving, tmp_path: Path) -> None:
    big = tmp_path / "big.pte"
    big.write_bytes(Path(ET, "mlp.pte").read_bytes() + bytes(4 * HEAD_BYTES))
    with Misbehaving({"big.pte": big}, lifetime=60.0) as server:
        before = TOTAL.bytes
        _fails(server.url("norange", "big.pte"), "ignored the range request")
        assert TOTAL.bytes == before   # the whole file the server sent was not read


def test_a_dropped_connection_is_an_error(misbehaving: Misbehaving) -> None:
    _fails(misbehaving.url("drop", "mlp.pte"), "failed 2 times")


def test_a_server_that_never_answers_times_out(misbehaving: Misbehaving) -> None:
    start = time.monotonic()
    _fails(misbehaving.url("hang", "mlp.pte"), "timed out")
    assert time.monotonic() - start < 10


def test_a_size_that_lies_is_an_error(misbehaving: Misbehaving) -> None:
    with pytest.raises((pfm.RemoteError, pfm.FormatError)):
        pfm.load(misbehaving.url("lyingsize", "mlp.pte"), storage_options=FAST)


def test_a_remote_fault_is_one_cli_line(misbehaving: Misbehaving) -> None:
    url = misbehaving.url("404", "mlp.pte")
    run = run_cli("info", url)
    assert run.returncode == 1 and run.stderr == f"pyflatmodule: {url}: not found (HTTP 404)\n"
    doc = json.loads(run_cli("verify", "--json", url).stdout)
    assert doc["files"][0]["error"]["code"] == "remote_error"


# ------------------------------------------------------------------ a store's audit


def test_an_audit_of_a_thousand_urls_keeps_connections_bounded(
        misbehaving: Misbehaving, monkeypatch: pytest.MonkeyPatch) -> None:
    """verify -j 8 over 1,000 URLs: never more than 8 connections open at once (counted
    where they are opened and closed), each closed when its file is done."""
    lock = threading.Lock()
    count = {"open": 0, "most": 0}
    connect, close = http.client.HTTPConnection.connect, http.client.HTTPConnection.close

    def counted_connect(self: http.client.HTTPConnection) -> None:
        connect(self)
        with lock:
            count["open"] += 1
            count["most"] = max(count["most"], count["open"])
        self.counted = True  # type: ignore[attr-defined]

    def counted_close(self: http.client.HTTPConnection) -> None:
        if getattr(self, "counted", False):
            self.counted = False  # type: ignore[attr-defined]
            with lock:
                count["open"] -= 1
        close(self)

    monkeypatch.setattr(http.client.HTTPConnection, "connect", counted_connect)
    monkeypatch.setattr(http.client.HTTPConnection, "close", counted_close)
    names = ["mlp.pte", "two_methods.pte", "external.ptd", "xnnpack.pte"]
    urls = [misbehaving.url("ok", names[i % len(names)]) for i in range(1000)]
    run = run_cli("verify", "-j", "8", "--json", "-", stdin="\n".join(urls) + "\n")
    assert run.returncode == 0, run.stderr
    doc = json.loads(run.stdout)
    assert [f["file"] for f in doc["files"]] == urls and doc["valid"] == 1000
    assert misbehaving.count("ok") >= 1000 and misbehaving.connections >= 1000
    assert count["open"] == 0 and 1 <= count["most"] <= 8, count


def test_a_prefix_is_listed_and_checked_as_the_directory(nginx: Nginx) -> None:
    pytest.importorskip("fsspec")
    pytest.importorskip("aiohttp")
    prefix = nginx.url("data", "et/")
    local = run_cli("verify", os.path.join(DATA, "et"))
    remote = run_cli("verify", "-j", "4", prefix)
    assert remote.returncode == local.returncode
    base = os.path.join(DATA, "et") + os.sep
    assert remote.stdout.replace(prefix, base) == local.stdout


def test_the_dask_recipe(nginx: Nginx) -> None:
    """docs/remote.md's recipe: one record per URL, spread over Dask's bag."""
    db = pytest.importorskip("dask.bag")

    def check(url: str) -> Dict[str, Any]:
        try:
            return {"file": url, "valid": True, **pfm.verify(url)}
        except (pfm.FormatError, OSError) as e:
            return {"file": url, "valid": False, "error": str(e)}

    urls: List[str] = [nginx.url("data", f) for f in PROGRAMS] + [nginx.url("data", "none.pte")]
    records = db.from_sequence(urls, npartitions=4).map(check).compute(scheduler="threads")
    assert [r["file"] for r in records] == urls
    assert all(r["valid"] for r in records[:-1]) and not records[-1]["valid"]
    assert "not found" in records[-1]["error"]


# ------------------------------------------------------------------ fsspec


def test_fsspec_urls_and_file_objects() -> None:
    fsspec = pytest.importorskip("fsspec")
    fs = fsspec.filesystem("memory")
    raw = Path(ET, "xnnpack.pte").read_bytes()
    fs.pipe("/remote-test/xnnpack.pte", raw)
    try:
        with pfm.load(ET + "/xnnpack.pte") as q:
            with pfm.load("memory://remote-test/xnnpack.pte") as p:
                assert p.info() == q.info()
                _same_tensors(p.state_dict(), q.state_dict())
            with fsspec.open("memory://remote-test/xnnpack.pte", "rb") as f, pfm.load(f) as p:
                assert p.info() == q.info()
        with pytest.raises(pfm.RemoteError, match="not found"):
            pfm.load("memory://remote-test/none.pte")
    finally:
        fs.rm("/remote-test", recursive=True)


def test_a_remote_program_does_not_pickle(nginx: Nginx) -> None:
    import pickle
    with pfm.load(nginx.url("data", "et/mlp.pte")) as p:
        with pytest.raises(TypeError, match="opened from a buffer or a URL"):
            pickle.dumps(p)


def test_threads_read_one_big_remote_program(nginx: Nginx, big_program: Path) -> None:
    """Reads from several threads share one connection and one cache, one at a time."""
    from concurrent.futures import ThreadPoolExecutor
    with pfm.load_program(big_program) as q:
        want = {k: hash(v.tobytes()) for k, v in q.named_tensors().items()}
    with pfm.load_program(nginx.url("bench", big_program.name)) as p:
        layouts = p.named_layouts()

        def digest(key: str) -> Tuple[str, int]:
            stored = layouts[key]
            array = stored.array() if isinstance(stored, pfm.StoredTensor) else stored
            return key, hash(np.asarray(array).tobytes())

        with ThreadPoolExecutor(4) as pool:
            got = dict(pool.map(digest, sorted(layouts)))
    assert got == want
