"""The remote tests' HTTP servers (tests/support/http_servers.py), checked with the standard
library's clients alone: nginx answers ranges with the exact bytes and its access log counts
them; each mode of the misbehaving server misbehaves as it says.
"""
from __future__ import annotations

import http.client
import socket
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Dict, Optional, Tuple
from urllib.parse import urlsplit

import pytest

from support.http_servers import (
                                  MODES,
                                  WRONG_EXTRA,
                                  Misbehaving,
                                  Nginx,
                                  parse_range,
)
from support.paths import DATA, ET

PROGRAM = "mlp.pte"
BYTES = Path(ET, PROGRAM).read_bytes()
SIZE = len(BYTES)


def _request(url: str, method: str = "GET", rng: Optional[str] = None,
             conn: Optional[http.client.HTTPConnection] = None,
             timeout: float = 5.0) -> Tuple[int, Dict[str, str], bytes]:
    """One request; the status, the headers (lower-case names) and the whole body."""
    parts = urlsplit(url)
    own = conn is None
    c = conn or http.client.HTTPConnection(parts.hostname, parts.port, timeout=timeout)
    try:
        c.request(method, parts.path, headers={"Range": rng} if rng else {})
        r = c.getresponse()
        body = r.read()
        return r.status, {k.lower(): v for k, v in r.getheaders()}, body
    finally:
        if own:
            c.close()


# --- nginx

def test_nginx_answers_a_range_with_its_exact_bytes_and_logs_them(nginx: Nginx) -> None:
    url = nginx.url("data", f"et/{PROGRAM}")
    mark = nginx.mark()
    status, headers, body = _request(url, rng="bytes=100-299")
    assert (status, body) == (206, BYTES[100:300])
    assert headers["content-range"] == f"bytes 100-299/{SIZE}"
    (rec,) = nginx.since(mark, expect=1)
    assert (rec.method, rec.path, rec.status, rec.range) == (
        "GET", f"/data/et/{PROGRAM}", 206, "bytes=100-299")
    assert rec.request == f"GET /data/et/{PROGRAM} HTTP/1.1"
    assert rec.body_bytes_sent == 200
    # $bytes_sent is the headers and the body: the headers are what this client received
    # before the body (status line, fields, blank line).
    head = "HTTP/1.1 206 Partial Content\r\n" + "".join(
        f"{k}: {v}\r\n" for k, v in headers.items()) + "\r\n"
    assert rec.bytes_sent == 200 + len(head)


def test_nginx_suffix_and_open_ranges_head_and_missing_files(nginx: Nginx) -> None:
    url = nginx.url("data", f"et/{PROGRAM}")
    mark = nginx.mark()
    assert _request(url, rng="bytes=-16")[::2] == (206, BYTES[-16:])
    assert _request(url, rng=f"bytes={SIZE - 5}-")[::2] == (206, BYTES[-5:])
    status, headers, body = _request(url, method="HEAD")
    assert (status, body, int(headers["content-length"])) == (200, b"", SIZE)
    assert headers["accept-ranges"] == "bytes"
    assert _request(url, rng=f"bytes={SIZE}-")[0] == 416
    assert _request(nginx.url("data", "et/no-such-file.pte"))[0] == 404
    records = nginx.since(mark, expect=5)
    assert [(r.method, r.status) for r in records] == [
        ("GET", 206), ("GET", 206), ("HEAD", 200), ("GET", 416), ("GET", 404)]
    assert [r.body_bytes_sent for r in records[:3]] == [16, 5, 0]


def test_nginx_keeps_the_connection_alive(nginx: Nginx) -> None:
    url = nginx.url("data", f"et/{PROGRAM}")
    mark = nginx.mark()
    conn = http.client.HTTPConnection("127.0.0.1", nginx.port, timeout=5)
    try:
        for start in (0, 64, 128):
            assert _request(url, rng=f"bytes={start}-{start + 63}", conn=conn)[0] == 206
    finally:
        conn.close()
    records = nginx.since(mark, expect=3)
    assert len({r.connection for r in records}) == 1
    assert [r.connection_requests for r in records] == [1, 2, 3]
    assert sum(r.body_bytes_sent for r in records) == 192
    assert records[0].end <= records[1].end <= records[2].end


def _interleaved(port: int, url: str, connections: int) -> None:
    """Two requests on each of several connections open together: the first of each,
    then the second of each."""
    conns = [http.client.HTTPConnection("127.0.0.1", port, timeout=5)
             for _ in range(connections)]
    try:
        for _ in range(2):
            for c in conns:
                assert _request(url, rng="bytes=0-9", conn=c)[0] == 206
    finally:
        for c in conns:
            c.close()


def test_nginx_log_shows_connections_open_together(nginx: Nginx) -> None:
    mark = nginx.mark()
    _interleaved(nginx.port, nginx.url("data", f"et/{PROGRAM}"), 3)
    records = nginx.since(mark, expect=6)
    assert len({r.connection for r in records}) == 3
    if records[0].active == -1:
        pytest.skip("this nginx has no stub_status module ($connections_active)")
    # each first request opens a connection beside those before it
    assert [r.active - records[0].active for r in records[:3]] == [0, 1, 2]
    assert max(r.active for r in records) >= 3


def test_nginx_serves_several_folders_and_its_log_restarts(nginx_bin: str,
                                                          tmp_path: Path) -> None:
    (tmp_path / "a b.bin").write_bytes(b"0123456789")
    with Nginx({"data": Path(DATA), "tmp": tmp_path}, binary=nginx_bin) as server:
        assert _request(server.url("tmp", "a b.bin"), rng="bytes=2-4")[::2] == (206, b"234")
        assert _request(server.url("data", f"et/{PROGRAM}"))[::2] == (200, BYTES)
        assert [r.path for r in server.wait_for(2)] == ["/tmp/a b.bin", f"/data/et/{PROGRAM}"]
        server.reset_log()
        assert server.requests() == []
        _request(server.url("tmp", "a b.bin"))
        assert [r.body_bytes_sent for r in server.wait_for(1)] == [10]
        with pytest.raises(KeyError):
            server.url("elsewhere", "a b.bin")
        port = server.port
    with pytest.raises(OSError):  # stopped: nothing listens there any more
        socket.create_connection(("127.0.0.1", port), timeout=1).close()


# --- the misbehaving server

def test_ok_mode_answers_as_a_server_should(misbehaving: Misbehaving) -> None:
    url = misbehaving.url("ok", PROGRAM)
    status, headers, body = _request(url, method="HEAD")
    assert (status, body, int(headers["content-length"])) == (200, b"", SIZE)
    assert headers["accept-ranges"] == "bytes"
    status, headers, body = _request(url, rng="bytes=10-41")
    assert (status, body) == (206, BYTES[10:42])
    assert headers["content-range"] == f"bytes 10-41/{SIZE}"
    assert _request(url, rng="bytes=-8")[::2] == (206, BYTES[-8:])
    assert _request(url)[::2] == (200, BYTES)
    assert _request(url, rng=f"bytes={SIZE}-")[0] == 416
    assert misbehaving.count("ok") == 5
    assert misbehaving.bytes_sent("ok") == 32 + 8 + SIZE
    assert [r.method for r in misbehaving.requests("ok")] == ["HEAD"] + ["GET"] * 4


def test_ok_mode_keeps_the_connection_alive(misbehaving: Misbehaving) -> None:
    conn = http.client.HTTPConnection("127.0.0.1", misbehaving.port, timeout=5)
    try:
        url = misbehaving.url("ok", PROGRAM)
        assert _request(url, rng="bytes=0-3", conn=conn)[2] == BYTES[:4]
        sock = conn.sock
        assert _request(url, rng="bytes=4-7", conn=conn)[2] == BYTES[4:8]
        assert conn.sock is sock
    finally:
        conn.close()
    assert (misbehaving.count(), misbehaving.connections) == (2, 1)


def _wait_closed(server: Misbehaving) -> None:
    """Until the server has noted the client's closes (a moment after them)."""
    deadline = time.monotonic() + 2
    while server.open_connections and time.monotonic() < deadline:
        time.sleep(0.01)
    assert server.open_connections == 0


def test_misbehaving_counts_connections_open_together(misbehaving: Misbehaving) -> None:
    _interleaved(misbehaving.port, misbehaving.url("ok", PROGRAM), 3)
    assert (misbehaving.count(), misbehaving.connections) == (6, 3)
    assert misbehaving.max_connections == 3
    _wait_closed(misbehaving)
    misbehaving.reset()
    for _ in range(2):  # a connection each, one after the other
        _request(misbehaving.url("ok", PROGRAM))
        _wait_closed(misbehaving)
    assert (misbehaving.connections, misbehaving.max_connections) == (2, 1)


def test_misbehaving_takes_a_burst_of_parallel_connections(misbehaving: Misbehaving) -> None:
    url = misbehaving.url("ok", PROGRAM)
    with ThreadPoolExecutor(32) as pool:
        got = list(pool.map(lambda i: _request(url, rng=f"bytes={i}-{i + 9}")[::2], range(64)))
    assert got == [(206, BYTES[i:i + 10]) for i in range(64)]
    assert misbehaving.connections == 64
    assert misbehaving.max_connections <= 32


def test_short_mode_sends_less_than_it_announces(misbehaving: Misbehaving) -> None:
    url = misbehaving.url("short", PROGRAM)
    assert int(_request(url, method="HEAD")[1]["content-length"]) == SIZE
    for rng, announced in (("bytes=0-999", 1000), (None, SIZE)):
        with pytest.raises(http.client.IncompleteRead) as e:
            _request(url, rng=rng)
        assert len(e.value.partial) == announced // 2
        assert e.value.partial == BYTES[:announced // 2]
    assert misbehaving.bytes_sent("short") == 500 + SIZE // 2


def test_wronglength_mode_answers_another_length(misbehaving: Misbehaving) -> None:
    url = misbehaving.url("wronglength", PROGRAM)
    assert int(_request(url, method="HEAD")[1]["content-length"]) == SIZE
    status, headers, body = _request(url, rng="bytes=100-199")
    assert status == 206 and body == BYTES[100:200 + WRONG_EXTRA]
    assert headers["content-range"] == f"bytes 100-{199 + WRONG_EXTRA}/{SIZE}"
    status, headers, body = _request(url, rng=f"bytes={SIZE - 10}-")
    assert status == 206 and body == BYTES[SIZE - 10:SIZE - 1]
    status, headers, body = _request(url)
    assert (status, body) == (200, BYTES[:SIZE - WRONG_EXTRA])
    assert int(headers["content-length"]) == SIZE - WRONG_EXTRA


def test_badparts_mode_answers_several_ranges_with_others(misbehaving: Misbehaving) -> None:
    url = misbehaving.url("badparts", PROGRAM)
    assert _request(url, rng="bytes=100-199")[2] == BYTES[100:200]
    status, headers, body = _request(url, rng="bytes=100-199,300-309")
    boundary = headers["content-type"].split("boundary=")[1].encode()
    assert status == 206 and headers["content-type"].startswith("multipart/byteranges")
    assert body == (b"\r\n--" + boundary + b"\r\nContent-Type: application/octet-stream"
                    + f"\r\nContent-Range: bytes 101-200/{SIZE}\r\n\r\n".encode()
                    + BYTES[101:201] + b"\r\n--" + boundary
                    + b"\r\nContent-Type: application/octet-stream"
                    + f"\r\nContent-Range: bytes 301-310/{SIZE}\r\n\r\n".encode()
                    + BYTES[301:311] + b"\r\n--" + boundary + b"--\r\n")


def test_nginx_answers_several_ranges_as_multipart(nginx: Nginx) -> None:
    """The shape :mod:`pyflatmodule.core.remote` reads: a part per range, in order."""
    status, headers, body = _request(nginx.url("data", "et/" + PROGRAM),
                                     rng="bytes=100-199,300-309")
    assert status == 206 and headers["content-type"].startswith("multipart/byteranges")
    boundary = headers["content-type"].split("boundary=")[1].encode()
    assert body.count(b"--" + boundary) == 3 and body.endswith(b"--" + boundary + b"--\r\n")
    assert f"Content-Range: bytes 100-199/{SIZE}\r\n\r\n".encode() + BYTES[100:200] in body
    assert f"Content-Range: bytes 300-309/{SIZE}\r\n\r\n".encode() + BYTES[300:310] in body


def test_norange_mode_answers_every_range_with_the_whole_file(
        misbehaving: Misbehaving) -> None:
    url = misbehaving.url("norange", PROGRAM)
    status, headers, _ = _request(url, method="HEAD")
    assert status == 200 and "accept-ranges" not in headers
    status, headers, body = _request(url, rng="bytes=100-199")
    assert (status, body) == (200, BYTES)
    assert "content-range" not in headers
    assert misbehaving.bytes_sent("norange") == SIZE


@pytest.mark.parametrize("mode,status", [("404", 404), ("500", 500)])
def test_error_modes_answer_every_request_so(misbehaving: Misbehaving, mode: str,
                                             status: int) -> None:
    url = misbehaving.url(mode, PROGRAM)
    for _ in range(3):
        assert _request(url, method="HEAD")[0] == status
        assert _request(url, rng="bytes=0-9")[0] == status
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(url, timeout=5)
    assert e.value.code == status
    assert misbehaving.count(mode) == 7


def test_unknown_modes_and_files_are_not_found(misbehaving: Misbehaving) -> None:
    assert _request(misbehaving.url("ok", "no-such.pte"))[0] == 404
    assert _request(f"{misbehaving.base}/nomode/{PROGRAM}")[0] == 404
    with pytest.raises(KeyError):
        misbehaving.url("nomode", PROGRAM)


def test_flaky_mode_fails_the_first_requests_of_each_path(misbehaving: Misbehaving) -> None:
    assert misbehaving.flaky_failures == 2
    url = misbehaving.url("flaky500", PROGRAM)
    assert _request(url, method="HEAD")[0] == 500
    assert _request(url, rng="bytes=0-9")[0] == 500
    assert _request(url, rng="bytes=0-9")[::2] == (206, BYTES[:10])
    assert _request(url, method="HEAD")[0] == 200
    other = misbehaving.url("flaky500", "two_methods.pte")
    assert _request(other)[0] == 500  # counted per path
    misbehaving.reset()
    assert misbehaving.count() == 0
    assert _request(url)[0] == 500  # and reset() starts them over
    misbehaving.flaky_failures, misbehaving.flaky_status = 1, 503
    misbehaving.reset()
    assert [_request(url)[0] for _ in range(2)] == [503, 200]


@pytest.mark.parametrize("method", ["HEAD", "GET"])
def test_drop_mode_closes_without_answering(misbehaving: Misbehaving, method: str) -> None:
    with pytest.raises(http.client.RemoteDisconnected):
        _request(misbehaving.url("drop", PROGRAM), method=method, rng="bytes=0-9")
    assert [(r.method, r.status, r.body_bytes) for r in misbehaving.requests("drop")] == [
        (method, 0, 0)]


def test_hang_mode_never_answers_until_stopped(misbehaving: Misbehaving) -> None:
    url = misbehaving.url("hang", PROGRAM)
    t0 = time.monotonic()
    for method in ("HEAD", "GET"):
        with pytest.raises(socket.timeout):
            _request(url, method=method, rng="bytes=0-9", timeout=0.3)
    assert time.monotonic() - t0 < 3
    # A client still waiting when the server stops sees the connection close.
    parts = urlsplit(url)
    conn = http.client.HTTPConnection("127.0.0.1", misbehaving.port, timeout=5)
    conn.request("GET", parts.path)
    t0 = time.monotonic()
    misbehaving.stop()
    with pytest.raises((http.client.RemoteDisconnected, ConnectionError)):
        conn.getresponse()
    conn.close()
    assert time.monotonic() - t0 < 5


def test_lyingsize_mode_claims_another_size(misbehaving: Misbehaving) -> None:
    claimed = SIZE // 2
    url = misbehaving.url("lyingsize", PROGRAM)
    status, headers, _ = _request(url, method="HEAD")
    assert (status, int(headers["content-length"])) == (200, claimed)
    status, headers, body = _request(url, rng="bytes=0-15")
    assert (status, body) == (206, BYTES[:16])
    assert headers["content-range"] == f"bytes 0-15/{claimed}"
    assert _request(url, rng=f"bytes={claimed}-{claimed + 9}")[0] == 416
    status, headers, body = _request(url)
    assert (status, int(headers["content-length"]), body) == (200, claimed, BYTES[:claimed])
    # A claim larger than the file: the whole-file answer ends early.
    misbehaving.claimed_size = lambda n: n + 100
    status, headers, _ = _request(url, method="HEAD")
    assert int(headers["content-length"]) == SIZE + 100
    with pytest.raises(http.client.IncompleteRead) as e:
        _request(url)
    assert e.value.partial == BYTES


def test_the_server_stops_itself_after_its_lifetime() -> None:
    server = Misbehaving({PROGRAM: Path(ET, PROGRAM)}, lifetime=0.3)
    try:
        assert _request(server.url("ok", PROGRAM))[0] == 200
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", server.port), timeout=0.5).close()
            except OSError:
                break
            time.sleep(0.05)
        else:
            pytest.fail("the server still listens 5 s after its lifetime")
    finally:
        server.stop()


def test_every_mode_is_documented_and_served(misbehaving: Misbehaving) -> None:
    assert set(MODES) == {"ok", "short", "wronglength", "norange", "404", "500", "flaky500",
                          "drop", "hang", "lyingsize", "badparts"}
    for mode in MODES:
        assert misbehaving.url(mode, PROGRAM).endswith(f"/{mode}/{PROGRAM}")


@pytest.mark.parametrize("header,expected", [
    (None, None), ("bytes=0-9", (0, 10)), ("bytes=5-", (5, 100)), ("bytes=-10", (90, 100)),
    ("bytes=90-200", (90, 100)), ("bytes=100-", (0, 0)), ("bytes=-0", (0, 0)),
    ("bytes=9-3", None), ("bytes=0-1,5-6", None), ("items=0-9", None)])
def test_parse_range(header: Optional[str], expected: Optional[Tuple[int, int]]) -> None:
    assert parse_range(header, 100) == expected



# --- what fsspec's HTTP filesystem sends meets the faults: the size from HEAD (then from a
# GET without Range, when HEAD fails), the bytes from GETs with Range

def _fsspec_http() -> Any:
    fsspec = pytest.importorskip("fsspec")
    pytest.importorskip("aiohttp")
    return fsspec.filesystem("http", skip_instance_cache=True)


def _read(fs: Any, url: str, offset: int, n: int) -> bytes:
    with fs.open(url, "rb", block_size=256) as f:
        f.seek(offset)
        return bytes(f.read(n))


def test_fsspec_reads_ranges_from_the_ok_mode_and_believes_a_lying_size(
        misbehaving: Misbehaving) -> None:
    fs = _fsspec_http()
    url = misbehaving.url("ok", PROGRAM)
    assert fs.info(url)["size"] == SIZE
    assert _read(fs, url, 300, 100) == BYTES[300:400]
    got = [(r.method, r.status) for r in misbehaving.requests("ok")]
    assert got[0] == ("HEAD", 200) and got[-1] == ("GET", 206)
    assert all(r.range for r in misbehaving.requests("ok") if r.method == "GET")
    assert fs.info(misbehaving.url("lyingsize", PROGRAM))["size"] == SIZE // 2


def test_fsspec_meets_each_fault(misbehaving: Misbehaving) -> None:
    import aiohttp
    fs = _fsspec_http()
    with pytest.raises(ValueError, match="support range requests"):
        _read(fs, misbehaving.url("norange", PROGRAM), 300, 100)
    assert misbehaving.requests("norange")[-1].status == 200
    with pytest.raises(aiohttp.ClientPayloadError):
        _read(fs, misbehaving.url("short", PROGRAM), 300, 100)
    for mode in ("404", "500", "drop"):
        with pytest.raises(FileNotFoundError):
            fs.info(misbehaving.url(mode, PROGRAM))
        methods = [(r.method, r.range) for r in misbehaving.requests(mode)]
        assert ("HEAD", "") in methods and ("GET", "") in methods, (mode, methods)
    # flaky500: the size query's HEAD and its GET fail; the next query succeeds.
    url = misbehaving.url("flaky500", PROGRAM)
    with pytest.raises(FileNotFoundError):
        fs.info(url)
    assert fs.info(url)["size"] == SIZE
    # wronglength: fsspec keeps the bytes it asked for and drops the rest unchecked, so
    # only a reader that checks Content-Range against its request notices.
    assert _read(fs, misbehaving.url("wronglength", PROGRAM), 300, 100) == BYTES[300:400]


def test_nginx_serves_the_big_program_by_ranges(nginx: Nginx, big_program: Path) -> None:
    size = big_program.stat().st_size
    assert size >= 500_000_000
    with open(big_program, "rb") as f:
        head = f.read(64)
        f.seek(size - 64)
        tail = f.read(64)
    url = nginx.url("bench", big_program.name)
    mark = nginx.mark()
    status, headers, _ = _request(url, method="HEAD")
    assert (status, int(headers["content-length"])) == (200, size)
    assert _request(url, rng="bytes=0-63")[::2] == (206, head)
    assert _request(url, rng="bytes=-64")[::2] == (206, tail)
    records = nginx.since(mark, expect=3)
    assert sum(r.body_bytes_sent for r in records) == 128


def test_lyingsize_mode_claiming_more_sends_what_the_file_has(
        misbehaving: Misbehaving) -> None:
    misbehaving.claimed_size = lambda n: n + 100
    url = misbehaving.url("lyingsize", PROGRAM)
    with pytest.raises(http.client.IncompleteRead) as e:
        _request(url, rng=f"bytes={SIZE - 10}-{SIZE + 49}")
    assert e.value.partial == BYTES[-10:]
    with pytest.raises(http.client.IncompleteRead) as e:
        _request(url, rng=f"bytes={SIZE + 10}-{SIZE + 19}")
    assert e.value.partial == b""
    assert _request(url, rng=f"bytes={SIZE + 100}-")[0] == 416
