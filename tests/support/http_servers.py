"""HTTP servers on 127.0.0.1 for the remote tests: nginx, and a server that misbehaves.

``Nginx`` runs Debian's nginx (found on ``PATH`` or at /usr/sbin/nginx) on a free loopback
port, serving directories under URL prefixes with range support (nginx's own, for static
files) and keep-alive; every request is a JSON line in its access log, written unbuffered
after the response: the request line, the status, ``$bytes_sent`` (headers and body),
``$body_bytes_sent`` and the ``Range`` header. Count what a client cost with::

    with Nginx({"data": DATA}) as server:
        mark = server.mark()
        ...                                     # requests to server.url("data", "x.pte")
        records = server.since(mark, expect=2)  # waits (bounded) for the two log lines

``Misbehaving`` is the tests' own server (``http.server``, one thread per connection),
serving the bytes of files under ``/<mode>/<name>``; the mode says how it lies (see
``MODES``). It counts requests and body bytes per mode (``requests()``, ``count()``,
``bytes_sent()``) and connections (``connections``, ``max_connections``), stops itself
after ``lifetime`` seconds, and every wait in it is bounded.

Both are context managers; ``stop()`` may be called more than once.
"""
from __future__ import annotations

import http.server
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Callable, Dict, List, NamedTuple, Optional, Tuple
from urllib.parse import quote, unquote

#: Where Debian puts nginx when ``/usr/sbin`` is not on ``PATH``.
NGINX_FALLBACK = "/usr/sbin/nginx"


def nginx_binary() -> Optional[str]:
    """The nginx executable, or None when nginx is not installed."""
    found = shutil.which("nginx")
    if found:
        return found
    return NGINX_FALLBACK if os.access(NGINX_FALLBACK, os.X_OK) else None


def free_port() -> int:
    """A loopback TCP port nothing listens on now (the caller binds it soon after)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait_listening(port: int, alive: Callable[[], bool], timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not alive():
            return False
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return True
        except OSError:
            time.sleep(0.02)
    return False


def _build_flags(exe: str) -> Tuple[Tuple[int, ...], str]:
    """nginx's version and its configure arguments (``nginx -V``, on stderr)."""
    out = subprocess.run([exe, "-V"], capture_output=True, text=True, timeout=10)
    text = out.stderr + out.stdout
    m = re.search(r"nginx/(\d+)\.(\d+)\.(\d+)", text)
    return (tuple(int(x) for x in m.groups()) if m else (0, 0, 0)), text


class LogRecord(NamedTuple):
    """One request as nginx logged it."""

    method: str
    #: The path as requested (``$uri``: decoded, without the query).
    path: str
    #: The request line, e.g. ``GET /data/mlp.pte HTTP/1.1``.
    request: str
    status: int
    #: The request's ``Range`` header ("" when it had none).
    range: str
    #: Bytes sent to the client: headers and body.
    bytes_sent: int
    #: Bytes of the response body alone.
    body_bytes_sent: int
    #: nginx's serial number of the connection, and the request's number on it (keep-alive
    #: reuses a connection: its number repeats, the request number grows).
    connection: int
    connection_requests: int
    #: When the request ended (``$msec``, seconds since the epoch) and how long it took
    #: from its first byte read (``$request_time``).
    end: float
    seconds: float
    #: Connections open when the request was logged, idle keep-alive ones included
    #: (``$connections_active``; -1 from a build without the stub_status module). The
    #: largest over a run's records is the most it had open at once, as far as requests
    #: ending sampled it; ``len({r.connection for r in records})`` bounds it from above.
    active: int


#: The access log's line: JSON, with ``_LOG_ACTIVE`` where the build has the stub_status
#: module (Debian's has), then the closing brace.
_LOG_FORMAT = (
    '{"request":"$request","method":"$request_method","path":"$uri","status":"$status",'
    '"range":"$http_range","bytes_sent":"$bytes_sent","body_bytes_sent":"$body_bytes_sent",'
    '"connection":"$connection","connection_requests":"$connection_requests",'
    '"msec":"$msec","request_time":"$request_time"')
_LOG_ACTIVE = ',"active":"$connections_active"'


def _record(line: str) -> LogRecord:
    d = json.loads(line)
    return LogRecord(d["method"], d["path"], d["request"], int(d["status"]), d["range"],
                     int(d["bytes_sent"]), int(d["body_bytes_sent"]), int(d["connection"]),
                     int(d["connection_requests"]), float(d["msec"]),
                     float(d["request_time"]), int(d.get("active", -1)))


class NginxError(RuntimeError):
    """nginx did not start (its error log is in the message)."""


class Nginx:
    """nginx on 127.0.0.1 serving ``root_dirs`` (URL prefix -> directory): the file
    ``root_dirs[p] / name`` is at ``url(p, name)``. Started by the constructor."""

    #: Seconds to wait for nginx to listen, and to exit when stopped.
    START_TIMEOUT = 10.0
    STOP_TIMEOUT = 5.0

    def __init__(self, root_dirs: Dict[str, Path], binary: Optional[str] = None) -> None:
        exe = binary or nginx_binary()
        if exe is None:
            raise NginxError("nginx is not installed (apt-get install nginx-light)")
        for prefix in root_dirs:
            if not re.fullmatch(r"[A-Za-z0-9._-]+", prefix):
                raise ValueError(f"URL prefix {prefix!r}: letters, digits, '.', '_', '-'")
        self.root_dirs = {p: Path(d).resolve() for p, d in root_dirs.items()}
        self._tmp = tempfile.mkdtemp(prefix="pfm-nginx-")
        self.access_log = os.path.join(self._tmp, "access.log")
        self.error_log = os.path.join(self._tmp, "error.log")
        self._proc: Optional[subprocess.Popen[bytes]] = None
        version, flags = _build_flags(exe)
        # Modules a build leaves out (nginx-light) must not be configured.
        self._temps = ["client_body"] + [k for k in ("proxy", "fastcgi", "uwsgi", "scgi")
                                         if f"--without-http_{k}_module" not in flags]
        self._active = _LOG_ACTIVE if "--with-http_stub_status_module" in flags else ""
        # -e (1.19.5 and later): no error log outside the temporary folder, even at start.
        errors = ["-e", self.error_log] if version >= (1, 19, 5) else []
        last = ""
        for _ in range(3):  # the free port may be taken between the probe and the bind
            self.port = free_port()
            conf = os.path.join(self._tmp, "nginx.conf")
            with open(conf, "w", encoding="utf-8") as f:
                f.write(self._config())
            open(self.access_log, "w").close()
            # nginx runs as installed: not with the sanitizers CI preloads into the tests
            env = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD"}
            self._proc = subprocess.Popen(
                [exe, "-p", self._tmp, "-c", conf, *errors],
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                start_new_session=True, env=env)
            proc = self._proc
            if _wait_listening(self.port, lambda: proc.poll() is None, self.START_TIMEOUT):
                return
            last = self._errors()
            self._kill()
        self.stop()
        raise NginxError(f"nginx did not start: {last}")

    def _config(self) -> str:
        tmp = self._tmp
        user = "user root;" if os.geteuid() == 0 else ""  # workers must read root's files
        locations = "\n".join(
            f"        location /{p}/ {{ alias {d}/; autoindex on; }}"
            for p, d in self.root_dirs.items())
        temps = "\n".join(f"    {k}_temp_path {tmp}/{k}_temp;"
                          for k in self._temps)
        return f"""{user}
daemon off;
master_process on;
worker_processes 1;
pid {tmp}/nginx.pid;
error_log {self.error_log} warn;
events {{ worker_connections 512; }}
http {{
    default_type application/octet-stream;
    log_format ranges escape=json '{_LOG_FORMAT}{self._active}}}';
    access_log {self.access_log} ranges;
{temps}
    sendfile on;
    keepalive_timeout 30s;
    keepalive_requests 10000;
    server {{
        listen 127.0.0.1:{self.port};
        server_name localhost;
{locations}
        location / {{ return 404; }}
    }}
}}
"""

    def _errors(self) -> str:
        text = ""
        if self._proc is not None and self._proc.poll() is not None and self._proc.stderr:
            text = self._proc.stderr.read().decode(errors="replace")
        try:
            with open(self.error_log, encoding="utf-8", errors="replace") as f:
                text += f.read()
        except OSError:
            pass
        return text.strip()[-2000:]

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def url(self, prefix: str, name: str) -> str:
        """The URL of file ``name`` (a path relative to ``root_dirs[prefix]``)."""
        if prefix not in self.root_dirs:
            raise KeyError(f"{prefix!r} is not served (served: {sorted(self.root_dirs)})")
        return f"{self.base}/{prefix}/{quote(name)}"

    # -- the access log

    def _lines(self) -> List[str]:
        with open(self.access_log, encoding="utf-8") as f:
            text = f.read()
        # A line is written whole with one write(); an unfinished last line is not yet one.
        return text.split("\n")[:-1]

    def requests(self) -> List[LogRecord]:
        """Every request logged so far."""
        return [_record(line) for line in self._lines()]

    def mark(self, settle: float = 0.05, timeout: float = 1.0) -> int:
        """A place in the access log for ``since``: the number of lines so far, once the
        log has not grown for ``settle`` seconds (nginx logs a request after answering it,
        so the line of a request just answered may come a moment later)."""
        deadline = time.monotonic() + timeout
        count = len(self._lines())
        while time.monotonic() < deadline:
            time.sleep(settle)
            now = len(self._lines())
            if now == count:
                break
            count = now
        return count

    def since(self, mark: int, expect: Optional[int] = None,
              timeout: float = 2.0) -> List[LogRecord]:
        """The requests logged after ``mark``. With ``expect``, first waits up to
        ``timeout`` seconds for at least that many (then returns what there is; the caller
        checks the count), and a further moment for any beyond them."""
        deadline = time.monotonic() + timeout
        lines = self._lines()[mark:]
        while expect is not None and len(lines) < expect and time.monotonic() < deadline:
            time.sleep(0.01)
            lines = self._lines()[mark:]
        if expect is not None and len(lines) >= expect:
            time.sleep(0.05)  # a request beyond the expected ones would be logged by now
            lines = self._lines()[mark:]
        return [_record(line) for line in lines]

    def wait_for(self, count: int, timeout: float = 2.0) -> List[LogRecord]:
        """Every request, once at least ``count`` are logged (or ``timeout`` passed)."""
        return self.since(0, expect=count, timeout=timeout)

    def reset_log(self) -> None:
        """Forget the requests so far (``requests()`` starts empty again)."""
        self.mark()
        os.truncate(self.access_log, 0)  # nginx appends (O_APPEND): it writes from 0 again

    # -- the process

    def _kill(self) -> None:
        proc, self._proc = self._proc, None
        if proc is None:
            return
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)  # fast shutdown: the master ends its workers
            try:
                proc.wait(self.STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                pass
        try:
            os.killpg(proc.pid, signal.SIGKILL)  # nginx's own group: its workers, if left
        except (ProcessLookupError, PermissionError):
            pass
        try:
            proc.wait(self.STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            pass
        if proc.stderr:
            proc.stderr.close()

    def stop(self) -> None:
        self._kill()
        shutil.rmtree(self._tmp, ignore_errors=True)

    def __enter__(self) -> "Nginx":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()


# --- the server that misbehaves

#: Each mode of ``Misbehaving`` (the first segment of the URL path) and what it does.
MODES = {
    "ok": "correct: HEAD 200 with the size; GET with Range 206 and the exact bytes "
          "(Content-Range), an unsatisfiable range 416; GET without Range 200, the file",
    "short": "HEAD as ok; GET announces the correct Content-Length (and Content-Range) "
             "but sends only the first half of that body, then closes the connection",
    "wronglength": "HEAD as ok; GET with Range answers 206 for a different length than "
                   "asked (Content-Range and Content-Length agree with the body sent): "
                   "WRONG_EXTRA bytes more, or one byte fewer when the range reaches the "
                   "end (a one-byte range at the end is answered right); GET without "
                   "Range 200 with WRONG_EXTRA bytes fewer than the file",
    "norange": "ignores Range: HEAD 200 without Accept-Ranges; GET 200 with the whole file",
    "404": "HEAD and GET 404 Not Found",
    "500": "HEAD and GET 500 Internal Server Error, always",
    "flaky500": "the first `flaky_failures` requests (HEAD and GET together) for each path "
                "answer `flaky_status` (500), later ones as ok",
    "drop": "reads the request, closes the connection without answering (HEAD and GET)",
    "hang": "reads the request, never answers until the server stops (or `hang_seconds` "
            "pass), then closes the connection",
    "badparts": "as ok for one range; several ranges in one request are answered 206 "
                "multipart/byteranges with a part for each, each part one byte further on "
                "than asked (its Content-Range says so, its bytes are those it names)",
    "lyingsize": "claims the size `claimed_size(true size)` (default: half): the HEAD answer's "
                 "Content-Length, a GET answer's Content-Range total; a range past the "
                 "claimed size 416, others 206 announced as asked with the file's bytes "
                 "(cut short, the connection closed, past the true end); GET without "
                 "Range announces the claimed length and sends the file's bytes up to it",
}

#: ``wronglength``: how many bytes more than asked (or fewer, without Range) it sends.
WRONG_EXTRA = 7

_RANGE = re.compile(r"bytes=(\d*)-(\d*)$")


def parse_range(header: Optional[str], size: int) -> Optional[Tuple[int, int]]:
    """``(start, end_exclusive)`` of a single ``bytes=`` range against ``size`` (``(0, 0)``
    when unsatisfiable), or None for no Range header or one this server ignores (several
    ranges, another unit)."""
    if not header:
        return None
    m = _RANGE.match(header.strip())
    if not m or (not m[1] and not m[2]):
        return None
    if not m[1]:  # the last N bytes
        n = int(m[2])
        return (max(0, size - n), size) if n > 0 and size > 0 else (0, 0)
    start = int(m[1])
    end = min(size, int(m[2]) + 1) if m[2] else size
    if m[2] and int(m[2]) < start:
        return None  # invalid: ignored, as RFC 9110 says
    return (start, end) if start < size else (0, 0)


class Request(NamedTuple):
    """One request the misbehaving server received, and what it did."""

    method: str
    mode: str
    name: str
    range: str
    status: int  # 0: none sent (drop, hang)
    body_bytes: int  # body bytes actually written


class Misbehaving:
    """The misbehaving server on 127.0.0.1, serving ``files`` (name -> path) as
    ``url(mode, name)``; started by the constructor, stopped by ``stop()`` or after
    ``lifetime`` seconds. Settable attributes: ``flaky_failures``, ``flaky_status``,
    ``claimed_size``, ``hang_seconds``."""

    def __init__(self, files: Dict[str, Path], lifetime: float = 600.0,
                 flaky_failures: int = 2, flaky_status: int = 500,
                 claimed_size: Callable[[int], int] = lambda n: n // 2,
                 hang_seconds: float = 60.0) -> None:
        self.files = {name: Path(p) for name, p in files.items()}
        self.flaky_failures = flaky_failures
        self.flaky_status = flaky_status
        self.claimed_size = claimed_size
        self.hang_seconds = hang_seconds
        self._lock = threading.Lock()
        self._idle = threading.Condition(self._lock)
        self._busy = 0  # requests being answered
        self._log: List[Request] = []
        self._flaky: Dict[str, int] = {}
        self._open = 0  # connections open now
        #: The most connections open at one time since the start (or ``reset()``).
        self.max_connections = 0
        #: Connections accepted since the start (or ``reset()``).
        self.connections = 0
        self._stopping = threading.Event()
        self._httpd = _Server(("127.0.0.1", 0), _Handler)
        self._httpd.owner = self
        self.port = int(self._httpd.server_address[1])
        self._thread = threading.Thread(target=self._httpd.serve_forever,
                                        kwargs={"poll_interval": 0.05}, daemon=True,
                                        name=f"misbehaving-http-{self.port}")
        self._thread.start()
        self._timer = threading.Timer(lifetime, self.stop)
        self._timer.daemon = True
        self._timer.start()

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def url(self, mode: str, name: str) -> str:
        if mode not in MODES:
            raise KeyError(f"no mode {mode!r} (modes: {', '.join(MODES)})")
        return f"{self.base}/{mode}/{quote(name)}"

    # -- what it received

    def requests(self, mode: Optional[str] = None, timeout: float = 2.0) -> List[Request]:
        """The requests received (in ``mode``, or in all), in the order they ended; first
        waits (up to ``timeout`` seconds) for those being answered (a client may have its
        answer before the server has noted it). A hanging request is noted on arrival."""
        with self._idle:
            self._idle.wait_for(lambda: self._busy == 0, timeout)
            return [r for r in self._log if mode is None or r.mode == mode]

    def count(self, mode: Optional[str] = None) -> int:
        """Requests received (in ``mode``, or in all)."""
        return len(self.requests(mode))

    def bytes_sent(self, mode: Optional[str] = None) -> int:
        """Body bytes written (in ``mode``, or in all)."""
        return sum(r.body_bytes for r in self.requests(mode))

    @property
    def open_connections(self) -> int:
        """Connections open now (a client's keep-alive ones included)."""
        with self._lock:
            return self._open

    def reset(self, timeout: float = 2.0) -> None:
        """Forget the requests and the flaky paths' failures so far (first waiting, up to
        ``timeout`` seconds, for those being answered, so that none is noted after)."""
        with self._idle:
            self._idle.wait_for(lambda: self._busy == 0, timeout)
            self._log.clear()
            self._flaky.clear()
            self.max_connections = self._open
            self.connections = 0

    def _begin(self) -> None:
        with self._lock:
            self._busy += 1

    def _note(self, request: Request, busy: bool) -> None:
        with self._idle:
            self._log.append(request)
            if busy:
                self._busy -= 1
                self._idle.notify_all()

    def _flaky_fails(self, path: str) -> bool:
        with self._lock:
            seen = self._flaky.get(path, 0)
            self._flaky[path] = seen + 1
            return seen < self.flaky_failures

    # -- the server

    def stop(self) -> None:
        self._timer.cancel()
        with self._lock:
            if self._stopping.is_set():
                return
            self._stopping.set()  # hanging handlers return
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(5.0)

    def __enter__(self) -> "Misbehaving":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()


class _Server(http.server.ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 128  # a parallel client's burst of connects is not refused
    owner: Misbehaving


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as the clients expect of a real server
    timeout = 10.0  # an idle or stalled connection ends (no thread waits forever)
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:
        pass  # quiet: the owner keeps its own record

    def setup(self) -> None:
        super().setup()
        owner = self.server.owner
        with owner._lock:
            owner._open += 1
            owner.connections += 1
            owner.max_connections = max(owner.max_connections, owner._open)

    def finish(self) -> None:
        owner = self.server.owner
        with owner._lock:
            owner._open -= 1
        super().finish()

    def do_HEAD(self) -> None:
        self._answer(head=True)

    def do_GET(self) -> None:
        self._answer(head=False)

    def _answer(self, head: bool) -> None:
        owner = self.server.owner
        parts = unquote(self.path.split("?", 1)[0]).lstrip("/").split("/", 1)
        mode, name = (parts + [""])[:2]
        rng = self.headers.get("Range") or ""
        method = "HEAD" if head else "GET"
        if mode == "hang" and name in owner.files:
            owner._note(Request(method, mode, name, rng, 0, 0), busy=False)
            owner._stopping.wait(owner.hang_seconds)
            self.close_connection = True
            return
        status, sent = 0, 0
        owner._begin()
        try:
            status, sent = self._mode(owner, mode, name, rng, head)
        finally:
            owner._note(Request(method, mode, name, rng, status, sent), busy=True)

    def _simple(self, status: int, head: bool, text: str) -> Tuple[int, int]:
        body = text.encode()
        self.send_response(status)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if head:
            return status, 0
        self.wfile.write(body)
        return status, len(body)

    def _mode(self, owner: Misbehaving, mode: str, name: str, rng: str,
              head: bool) -> Tuple[int, int]:
        if mode not in MODES or name not in owner.files:
            return self._simple(404, head, "not found\n")
        if mode == "404":
            return self._simple(404, head, "not found\n")
        if mode == "500":
            return self._simple(500, head, "internal error\n")
        if mode == "flaky500" and owner._flaky_fails(f"{mode}/{name}"):
            return self._simple(owner.flaky_status, head, "try again\n")
        if mode == "drop":
            self.close_connection = True
            return 0, 0
        path = owner.files[name]
        size = path.stat().st_size
        claimed = owner.claimed_size(size) if mode == "lyingsize" else size
        if head:  # the whole file's headers, whatever the Range
            self.send_response(200)
            self.send_header("Content-Type", "application/octet-stream")
            self.send_header("Content-Length", str(claimed))
            if mode != "norange":
                self.send_header("Accept-Ranges", "bytes")
            self.end_headers()
            return 200, 0
        if mode == "badparts" and "," in rng:
            return self._shifted_parts(path, rng, size)
        r = None if mode == "norange" else parse_range(rng, claimed)
        if r == (0, 0):
            self.send_response(416)
            self.send_header("Content-Range", f"bytes */{claimed}")
            self.send_header("Content-Length", "0")
            self.end_headers()
            return 416, 0
        if r is None:
            status, start, announced = 200, 0, claimed
            if mode == "wronglength":
                announced = max(0, size - WRONG_EXTRA)
        else:
            status, (start, end) = 206, r
            if mode == "wronglength":
                end = min(end + WRONG_EXTRA, size) if end < size else max(start + 1, end - 1)
            announced = end - start
        # The bytes sent: what was announced, as far as the file has them (lyingsize may
        # claim more than there is; the connection then closes early, as it does in short).
        self.send_response(status)
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Content-Length", str(announced))
        if mode != "norange":
            self.send_header("Accept-Ranges", "bytes")
        if status == 206:
            self.send_header("Content-Range", f"bytes {start}-{start + announced - 1}/{claimed}")
        self.end_headers()
        stop = min(start + announced, size)
        if mode == "short":
            stop = start + announced // 2
        if stop - start != announced:
            self.close_connection = True  # the body ends early: only a close says so
        return status, self._send_file(path, start, stop)

    def _shifted_parts(self, path: Path, rng: str, size: int) -> Tuple[int, int]:
        """``badparts``: a multipart answer naming, for each range asked, the one a byte
        further on."""
        boundary = "pfm-badparts"
        body = b""
        with open(path, "rb") as f:
            for part in rng.split("=", 1)[-1].split(","):
                got = parse_range("bytes=" + part.strip(), size)
                if got is None or got == (0, 0):
                    return self._simple(416, False, "unsatisfiable\n")
                start, end = got[0] + 1, min(got[1] + 1, size)
                f.seek(start)
                body += (f"\r\n--{boundary}\r\nContent-Type: application/octet-stream\r\n"
                         f"Content-Range: bytes {start}-{end - 1}/{size}\r\n\r\n").encode()
                body += f.read(end - start)
        body += f"\r\n--{boundary}--\r\n".encode()
        self.send_response(206)
        self.send_header("Content-Type", f"multipart/byteranges; boundary={boundary}")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
        return 206, len(body)

    def _send_file(self, path: Path, start: int, end: int) -> int:
        """Writes bytes [start, end) of the file; returns how many were written."""
        sent = 0
        try:
            with open(path, "rb") as f:
                f.seek(start)
                while sent < end - start:
                    chunk = f.read(min(1 << 20, end - start - sent))
                    if not chunk:
                        break
                    self.wfile.write(chunk)
                    sent += len(chunk)
            self.wfile.flush()
        except OSError:  # the client went away
            self.close_connection = True
        return sent
