"""Reading a file where it lives: byte ranges over HTTP(S), or any fsspec filesystem.

A program puts everything but its weights at the front, so a remote file is opened from
its first bytes: :class:`RemoteFile` fetches the first :data:`HEAD_BYTES` (which also give
its size), then the rest of what the opener needs (a program's flatbuffer) in one more
request; everything after is fetched when first read, by byte range, through a bounded
block cache. Every read is checked: the server must answer each range with exactly its
bytes, the file must keep the size it had. A fault is a :class:`~pyflatmodule.errors.RemoteError`
naming the URL, after a bounded number of tries, each with a timeout.

``http://`` and ``https://`` URLs are read with the standard library (one keep-alive
connection a file; the first answer's ``Content-Range`` gives the size, so no HEAD is
sent); every other ``scheme://`` URL (``s3://``, ``gs://``, ``hf://``, ``memory://``,
``file://``...) and every fsspec file object through fsspec, which is imported only for
them (``pip install 'pyflatmodule[remote]'``).
"""
from __future__ import annotations

import collections
import re
import sys
import threading
import time
import urllib.parse
from typing import TYPE_CHECKING, Any, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

from ..errors import RemoteError

if TYPE_CHECKING:   # http.client (and ssl with it) is imported when a URL is first read
    import http.client

__all__ = ["HEAD_BYTES", "TOTAL", "RemoteFile", "RemoteStats", "is_remote", "list_prefix"]

#: Bytes the first request asks for: a program's header and, mostly, its flatbuffer.
HEAD_BYTES = 64 << 10
#: The cache's unit: reads are rounded out to whole blocks, and cached by block.
BLOCK_BYTES = 64 << 10
#: Blocks the cache keeps (least recently used first out): 32 MiB.
CACHE_BLOCKS = 512
#: Reads this small are fetched as they are unless cached (a look at a blob's first
#: bytes, as the native-code check takes, should not cost a block).
SMALL_READ = 4 << 10
#: Bytes of small ranges fetched together (:meth:`RemoteFile.prefetch`) kept for the
#: reads that follow (least recently fetched first out).
PREFETCH_BYTES = 1 << 20
#: Ranges asked for in one multi-range request: its ``Range`` header stays a few kB.
RANGES_PER_REQUEST = 100
#: Seconds each network operation may take before it is given up and tried again.
TIMEOUT = 30.0
#: Tries of one read (a dropped connection, a timeout, a short answer, a 5xx).
TRIES = 3
#: Redirects followed for one request.
MAX_REDIRECTS = 5

_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]+)://")


def is_remote(source: Any) -> bool:
    """Whether ``source`` is a URL (``scheme://...``) or an fsspec file object, which
    :func:`open_remote` reads, rather than a path or a buffer."""
    if isinstance(source, str):
        return "://" in source and _SCHEME.match(source) is not None
    fsspec = sys.modules.get("fsspec")
    return fsspec is not None and isinstance(source, fsspec.spec.AbstractBufferedFile)


class RemoteStats:
    """Requests made and bytes received (the body bytes of each answer) for one remote
    file as it was read, or for all of them (:data:`TOTAL`)."""

    __slots__ = ("requests", "bytes", "_lock")

    def __init__(self) -> None:
        self.requests = 0
        self.bytes = 0
        self._lock = threading.Lock()

    def add(self, nbytes: int) -> None:
        """Count one request that received ``nbytes``."""
        with self._lock:
            self.requests += 1
            self.bytes += nbytes

    def __repr__(self) -> str:
        return f"<RemoteStats {self.requests} requests, {self.bytes} bytes>"


#: Every remote file's requests and bytes, in this process (the CLI's ``--stats``).
TOTAL = RemoteStats()


class _Transient(Exception):
    """A fault worth another try (dropped connection, timeout, 5xx, short answer)."""


class _NoMultiRange(Exception):
    """The server does not answer several ranges in one request: ask for each alone."""


# ------------------------------------------------------------------------ transports


class _Http:
    """Ranges of one HTTP(S) URL over one keep-alive connection (redirects followed)."""

    def __init__(self, url: str, options: Mapping[str, Any]) -> None:
        unknown = set(options) - {"headers", "timeout", "tries"}
        if unknown:
            raise ValueError(f"storage_options for an HTTP(S) URL take headers, timeout "
                             f"and tries, not {', '.join(sorted(unknown))}")
        self.url = url
        self.timeout = float(options.get("timeout", TIMEOUT))
        self.tries = int(options.get("tries", TRIES))
        self.headers: Dict[str, str] = dict(options.get("headers", {}))
        self._target = url
        self._conn: Optional["http.client.HTTPConnection"] = None
        self._conn_for = ""

    def _connection(self) -> Tuple["http.client.HTTPConnection", str]:
        import http.client
        parts = urllib.parse.urlsplit(self._target)
        netloc = f"{parts.scheme}://{parts.netloc}"
        if self._conn is None or self._conn_for != netloc:
            self.close()
            cls = (http.client.HTTPSConnection if parts.scheme == "https"
                   else http.client.HTTPConnection)
            self._conn = cls(parts.netloc, timeout=self.timeout)
            self._conn_for = netloc
        path = parts.path or "/"
        return self._conn, path + (f"?{parts.query}" if parts.query else "")

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def _send(self, ranges: str) -> "http.client.HTTPResponse":
        """The answer to a GET of ``Range: bytes=<ranges>``, redirects followed."""
        import http.client
        for _ in range(MAX_REDIRECTS + 1):
            conn, path = self._connection()
            try:
                conn.request("GET", path, headers={
                    **self.headers, "Range": f"bytes={ranges}", "Accept-Encoding": "identity"})
                r = conn.getresponse()
            except (OSError, http.client.HTTPException) as e:
                self.close()
                raise _Transient(_describe(e)) from None
            if r.status in (301, 302, 303, 307, 308) and r.getheader("Location"):
                r.read()
                self._target = urllib.parse.urljoin(self._target, r.getheader("Location", ""))
                continue
            return r
        raise RemoteError(self.url, f"more than {MAX_REDIRECTS} redirects")

    def get(self, start: int, end: int, known: Optional[int]) -> Tuple[bytes, int]:
        """Bytes [start, end) and the file's size (from Content-Range)."""
        return self._answer(self._send(f"{start}-{end - 1}"), start, end, known)

    def get_many(self, ranges: Sequence[Tuple[int, int]], known: int) -> Tuple[List[bytes], int]:
        """Bytes of each [start, end) of ``ranges`` (sorted, apart, within the file) in one
        multi-range request (``multipart/byteranges``), and the body bytes received.
        A server that answers with one part (ranges merged) is taken when that part is
        no larger than the ranges and their gaps allow; one that ignores the ranges
        (HTTP 200) raises :class:`_NoMultiRange` before its body is read."""
        r = self._send(",".join(f"{a}-{b - 1}" for a, b in ranges))
        if r.status == 200:
            self.close()
            raise _NoMultiRange()
        kind = r.getheader("Content-Type", "")
        m = re.search(r'boundary="?([^";]+)"?', kind)
        if r.status != 206 or not kind.lower().startswith("multipart/byteranges") or m is None:
            span = (ranges[0][0], ranges[-1][1])
            if r.status == 206 and span[1] - span[0] > sum(b - a for a, b in ranges) + BLOCK_BYTES:
                self.close()   # one part much larger than asked: not read
                raise _NoMultiRange()
            body, _ = self._answer(r, span[0], span[1], known)
            return [body[a - span[0]:b - span[0]] for a, b in ranges], len(body)
        # Each part: headers, its bytes, CRLF; bounded by the ranges and their headers.
        bound = sum(b - a for a, b in ranges) + 256 * (len(ranges) + 1) + 2 * len(m.group(1))
        length = r.getheader("Content-Length")
        if length is not None and (not length.isdigit() or int(length) > bound):
            self.close()
            raise RemoteError(self.url, f"answered {len(ranges)} ranges with Content-Length "
                                        f"{length}, more than they hold")
        body = self._body(r, int(length)) if length is not None else self._bounded(r, bound)
        parts = _multipart(body, m.group(1).encode("latin-1"), known)
        if isinstance(parts, str):
            self.close()
            raise RemoteError(self.url, f"answered {len(ranges)} ranges with {parts}")
        out = []
        for a, b in ranges:
            hit = next((data[a - first:b - first] for first, data in parts
                        if first <= a and b <= first + len(data)), None)
            if hit is None:
                self.close()
                raise RemoteError(self.url, f"asked for bytes {a}..{b} among {len(ranges)} "
                                            f"ranges, the server did not send them")
            out.append(hit)
        return out, len(body)

    def _bounded(self, r: "http.client.HTTPResponse", bound: int) -> bytes:
        """A body without a length (chunked), read to its end but no further than
        ``bound`` bytes."""
        import http.client
        try:
            body = r.read(bound + 1)
        except (OSError, http.client.HTTPException) as e:
            self.close()
            raise _Transient(_describe(e)) from None
        if len(body) > bound:
            self.close()
            raise RemoteError(self.url, f"answered with more than the {bound} bytes asked for")
        return body

    def _answer(self, r: "http.client.HTTPResponse", start: int, end: int,
                known: Optional[int]) -> Tuple[bytes, int]:
        status = r.status
        if status >= 500 or status == 429:
            self.close()
            raise _Transient(f"HTTP {status} {r.reason}")
        if status == 416:   # a range past the end: the file is shorter than asked
            total = _total(r.getheader("Content-Range", ""))
            self.close()
            if total is not None and start == 0:
                return b"", total
            raise RemoteError(self.url, f"bytes {start}..{end} are past the end of the file"
                                        + (f" ({total} bytes)" if total is not None else ""))
        if status == 200:
            length = r.getheader("Content-Length")
            if start == 0 and length is not None and length.isdigit() and int(length) <= end:
                body = self._body(r, int(length))   # the whole file fits the range
                return body, int(length)
            self.close()   # do not read a whole file that was not asked for
            raise RemoteError(self.url, f"the server ignored the range request for bytes "
                                        f"{start}..{end} and answered with the whole file "
                                        f"(HTTP 200, Content-Length {length})")
        if status != 206:
            self.close()
            if status == 404:
                raise RemoteError(self.url, "not found (HTTP 404)")
            raise RemoteError(self.url, f"HTTP {status} {r.reason}")
        content_range = r.getheader("Content-Range", "")
        m = re.fullmatch(r"bytes (\d+)-(\d+)/(\d+)", content_range.strip())
        if m is None:
            self.close()
            raise RemoteError(self.url, f"answered bytes {start}..{end} with Content-Range "
                                        f"{content_range!r}")
        first, last, total = (int(g) for g in m.groups())
        want_last = min(end, total) - 1
        if first != start or last != want_last:
            self.close()
            raise RemoteError(self.url, f"asked for bytes {start}..{end}, the server sent "
                                        f"{first}..{last + 1} of {total}")
        if known is not None and total != known:
            self.close()
            raise RemoteError(self.url, f"the file's size changed from {known} to {total} "
                                        f"bytes while it was read")
        return self._body(r, last + 1 - first), total

    def _body(self, r: "http.client.HTTPResponse", n: int) -> bytes:
        import http.client
        try:
            body = r.read(n)
            extra = r.read(1) if r.length else b""
        except (OSError, http.client.HTTPException) as e:
            self.close()
            raise _Transient(_describe(e)) from None
        if len(body) != n or extra:
            self.close()
            raise _Transient(f"the answer held {len(body) + len(extra)}"
                             f"{'+' if extra else ''} bytes, not {n}")
        return body


class _Fsspec:
    """Ranges of a file on an fsspec filesystem, or of an fsspec file object."""

    def __init__(self, source: Any, options: Mapping[str, Any]) -> None:
        self.tries = TRIES
        if isinstance(source, str):
            fsspec = _fsspec(source)
            self.url = source
            try:
                self.fs, self.path = fsspec.core.url_to_fs(source, **options)
                self.size = int(self.fs.size(self.path))
            except FileNotFoundError:
                raise RemoteError(source, "not found") from None
            except (OSError, ValueError, ImportError) as e:
                raise RemoteError(source, _describe(e)) from None
            self.file: Any = None
        else:
            self.file = source
            self.fs, self.path = source.fs, source.path
            self.url = str(source.path)
            self.size = int(source.size)

    def close(self) -> None:
        """Nothing to close: fsspec keeps its own sessions."""

    def get(self, start: int, end: int, known: Optional[int]) -> Tuple[bytes, int]:
        end = min(end, self.size)
        try:
            if self.file is not None:
                self.file.seek(start)
                body = self.file.read(end - start)
            else:
                body = self.fs.cat_file(self.path, start, end)
        except FileNotFoundError:
            raise RemoteError(self.url, "not found") from None
        except (OSError, TimeoutError) as e:
            raise _Transient(_describe(e)) from None
        if len(body) != end - start:
            raise _Transient(f"asked for bytes {start}..{end}, received {len(body)} bytes")
        return bytes(body), self.size

    def get_many(self, ranges: Sequence[Tuple[int, int]], known: int) -> Tuple[List[bytes], int]:
        """fsspec has no multi-range request to make: each range is asked for alone."""
        raise _NoMultiRange()


def _describe(e: BaseException) -> str:
    import socket
    if isinstance(e, (socket.timeout, TimeoutError)):
        return "timed out"
    text = str(e) or type(e).__name__
    return text if type(e).__name__ in text else f"{type(e).__name__}: {text}"


def _multipart(body: bytes, boundary: bytes, known: int) -> Any:
    """The parts of a ``multipart/byteranges`` body as (first byte, bytes), each checked
    against its ``Content-Range`` and the file's size; or what is wrong, in words."""
    parts: List[Tuple[int, bytes]] = []
    delimiter = b"--" + boundary
    pos = body.find(delimiter)
    while pos >= 0:
        pos += len(delimiter)
        if body[pos:pos + 2] == b"--":
            return parts if parts else "a multipart answer of no part"
        end_headers = body.find(b"\r\n\r\n", pos)
        if end_headers < 0:
            return "a multipart answer cut in a part's headers"
        headers = body[pos:end_headers].decode("latin-1").lower()
        m = re.search(r"content-range:\s*bytes (\d+)-(\d+)/(\d+)", headers)
        if m is None:
            return "a part without a byte range"
        first, last, total = (int(g) for g in m.groups())
        if total != known:
            return f"a part of a file of {total} bytes, not {known}"
        start = end_headers + 4
        stop = start + last + 1 - first
        if last < first or body[stop:stop + 2] != b"\r\n":
            return f"a part for bytes {first}..{last + 1} of another length"
        parts.append((first, body[start:stop]))
        pos = body.find(delimiter, stop)
    return "a multipart answer without its closing boundary"


def _total(content_range: str) -> Optional[int]:
    m = re.fullmatch(r"bytes \*/(\d+)", content_range.strip())
    return int(m.group(1)) if m else None


# ------------------------------------------------------------------------- the file


class RemoteFile:
    """One remote file: its size, its first bytes, and reads of any range through a
    bounded block cache (thread-safe); :attr:`stats` counts what was fetched."""

    def __init__(self, source: Any, storage_options: Optional[Mapping[str, Any]] = None,
                 head: int = HEAD_BYTES) -> None:
        options = dict(storage_options or {})
        self._transport: Any = (
            _Http(source, options) if isinstance(source, str)
            and source.lower().startswith(("http://", "https://"))
            else _Fsspec(source, options))
        self.url: str = self._transport.url
        self.stats = RemoteStats()
        self._lock = threading.Lock()   # the cache (taken before _io when both are)
        self._io = threading.Lock()     # the transport: one request at a time
        self._blocks: "collections.OrderedDict[int, bytes]" = collections.OrderedDict()
        #: Small ranges fetched together, by first byte (:meth:`prefetch`).
        self._fetched: "collections.OrderedDict[int, bytes]" = collections.OrderedDict()
        self._fetched_bytes = 0
        #: Whether the server may still be asked for several ranges at once.
        self._multirange = True
        known = getattr(self._transport, "size", None)
        self.head, self.size = self._fetch(0, head if known is None else min(head, known),
                                           known)
        if len(self.head) > self.size:
            raise RemoteError(self.url, "answered more bytes than the file holds")

    def _fetch(self, start: int, end: int, known: Optional[int]) -> Tuple[bytes, int]:
        with self._io:
            got: Tuple[bytes, int] = self._attempts(
                lambda: self._transport.get(start, end, known), f"bytes {start}..{end}")
            return got

    def _attempts(self, get: Any, what: str) -> Any:
        """``get()``'s answer (the body first, or the bodies and their byte count), tried
        again on a transient fault, at most ``tries`` times; counted in the stats."""
        last = ""
        for attempt in range(max(1, self._transport.tries)):
            if attempt:
                time.sleep(min(0.05 * 2 ** attempt, 1.0))
            try:
                got = get()
            except _Transient as e:
                last = str(e)
                continue
            nbytes = got[1] if isinstance(got[0], list) else len(got[0])
            self.stats.add(nbytes)
            TOTAL.add(nbytes)
            return got
        raise RemoteError(self.url, f"reading {what} failed {self._transport.tries} "
                                    f"times: {last}")

    def prefetch(self, ranges: Iterable[Tuple[int, int]]) -> None:
        """Fetch the ``(start, n)`` ranges of at most :data:`SMALL_READ` bytes each that
        are not cached, together (over HTTP, one multi-range request per
        :data:`RANGES_PER_REQUEST`; each alone where the server or the filesystem
        cannot), and keep them for the reads that follow: what a look at many blobs'
        first bytes costs."""
        want = sorted({(a, a + n) for a, n in ranges
                       if 0 < n <= SMALL_READ and 0 <= a and a + n <= self.size})
        with self._lock:
            want = [(a, b) for a, b in want if len(self._fetched.get(a, b"")) < b - a]
        merged: List[Tuple[int, int]] = []
        for a, b in want:
            if merged and a <= merged[-1][1]:
                merged[-1] = (merged[-1][0], max(b, merged[-1][1]))
            else:
                merged.append((a, b))
        for i in range(0, len(merged), RANGES_PER_REQUEST):
            group = merged[i:i + RANGES_PER_REQUEST]
            bodies = self._many(group) if len(group) > 1 else [self.fetch(*group[0])]
            with self._lock:
                for (a, b), body in zip(group, bodies):
                    for start, end in want:
                        if a <= start and end <= b:
                            self._keep(start, body[start - a:end - a])

    def _many(self, ranges: List[Tuple[int, int]]) -> List[bytes]:
        if self._multirange:
            try:
                with self._io:
                    got: List[bytes] = self._attempts(
                        lambda: self._transport.get_many(ranges, self.size),
                        f"{len(ranges)} ranges")[0]
                return got
            except _NoMultiRange:
                self._multirange = False
        return [self.fetch(a, b) for a, b in ranges]

    def _keep(self, start: int, data: bytes) -> None:
        """Keep a prefetched range (the cache's lock held)."""
        old = self._fetched.pop(start, b"")
        self._fetched[start] = data
        self._fetched_bytes += len(data) - len(old)
        while self._fetched_bytes > PREFETCH_BYTES:
            self._fetched_bytes -= len(self._fetched.popitem(last=False)[1])

    def fetch(self, start: int, end: int) -> bytes:
        """Bytes [start, end) of the file in one request, uncached (``end`` within the
        size)."""
        if not 0 <= start <= end <= self.size:
            raise ValueError(f"bytes {start}..{end} are outside the file ({self.size} bytes)")
        if start == end:
            return b""
        return self._fetch(start, end, self.size)[0]

    def prefix(self, n: int) -> bytes:
        """The first ``n`` bytes (at most the size): the head, and the rest in one request."""
        n = min(n, self.size)
        if n <= len(self.head):
            return self.head[:n]
        return self.head + self.fetch(len(self.head), n)

    def read(self, start: int, n: int) -> bytes:
        """Bytes [start, start + n): whole blocks, fetched once and cached (missing runs in
        one request each); a read larger than half the cache bypasses it, and one of at
        most :data:`SMALL_READ` bytes not cached is fetched as it is."""
        end = start + n
        if not 0 <= start <= end <= self.size:
            raise ValueError(f"bytes {start}..{end} are outside the file ({self.size} bytes)")
        if n == 0:
            return b""
        first, last = start // BLOCK_BYTES, (end - 1) // BLOCK_BYTES
        if n <= SMALL_READ:
            with self._lock:
                kept = self._fetched.get(start, b"")
            if len(kept) >= n:
                return kept[:n]
            if not all(b in self._blocks for b in range(first, last + 1)):
                return self.fetch(start, end)
        lo = first * BLOCK_BYTES
        hi = min((last + 1) * BLOCK_BYTES, self.size)
        if last - first + 1 > CACHE_BLOCKS // 2:
            return self.fetch(lo, hi)[start - lo:end - lo]
        with self._lock:
            parts = []
            b = first
            while b <= last:
                got = self._blocks.get(b)
                if got is not None:
                    self._blocks.move_to_end(b)
                    parts.append(got)
                    b += 1
                    continue
                run = b
                while run + 1 <= last and run + 1 not in self._blocks:
                    run += 1
                data = self.fetch(b * BLOCK_BYTES, min((run + 1) * BLOCK_BYTES, self.size))
                for k in range(b, run + 1):
                    block = data[(k - b) * BLOCK_BYTES:(k - b + 1) * BLOCK_BYTES]
                    self._blocks[k] = block
                    parts.append(block)
                b = run + 1
            while len(self._blocks) > CACHE_BLOCKS:
                self._blocks.popitem(last=False)
        return b"".join(parts)[start - lo:end - lo]

    def close(self) -> None:
        """Close the connection (a later read opens another) and drop the cache."""
        with self._lock:
            self._blocks.clear()
            self._fetched.clear()
            self._fetched_bytes = 0
        with self._io:
            self._transport.close()


def list_prefix(prefix: str, suffixes: Tuple[str, ...],
                storage_options: Optional[Mapping[str, Any]] = None) -> List[str]:
    """The URLs of the files under ``prefix`` (recursively; for HTTP, the links of its
    directory listings) whose names end in one of ``suffixes`` (any case), in the order a
    walk of a local directory gives (each folder's files by name, then its folders): an
    object store's keys, listed through fsspec."""
    fsspec = _fsspec(prefix)
    try:
        fs, root = fsspec.core.url_to_fs(prefix, **dict(storage_options or {}))
        found = fs.find(root)
    except FileNotFoundError:
        raise RemoteError(prefix, "not found") from None
    except (OSError, ValueError) as e:
        raise RemoteError(prefix, _describe(e)) from None
    urls = [fs.unstrip_protocol(p) if "://" not in p else p
            for p in found if p.lower().endswith(suffixes)]
    return sorted(urls, key=_walk_order)


def _walk_order(url: str) -> Tuple[Tuple[int, str], ...]:
    """A URL's place in a walk: folders' names, each after the files beside it."""
    *folders, name = url.split("://", 1)[-1].split("/")
    return tuple((1, f) for f in folders) + ((0, name),)


def _fsspec(url: str) -> Any:
    """fsspec, or RemoteError saying how to install it."""
    try:
        import fsspec
    except ImportError:
        raise RemoteError(url, "reading this URL needs fsspec: pip install "
                               "'pyflatmodule[remote]'") from None
    return fsspec
