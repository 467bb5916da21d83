"""The simulated web's HTTP server: one port, every intended IP, the Host header picks the site.

One `WebServer` owns listening sockets (one per distinct IP of the web plus the control
address, on one port), the connections, the audit log and its flusher. Each connection is an
asyncio `Protocol` fed by `httptools`, answering its requests strictly in order (pipelining);
an immediate answer is written from `data_received`, anything that waits runs in one task per
connection, owned by the server and cancelled at stop. What a response is comes from
`_content.respond()`; this module adds only transport: latency, trickling, streaming with flow
control, resets, hangs, 429 rate limiting, attempt counters and the content epoch, kept per
process.

The module stays whole because a connection's parsing and flow control and the server's
transport behaviours drive one state machine per connection (paused reading and writing,
queued requests, a trickle or stream in progress, the audit line at its end), and it is the
hot path that serves thousands of pages a second to benchmarks."""

from __future__ import annotations

import asyncio
import contextlib
import errno
import html
import http
import json
import math
import os
import random
import socket
import struct
import time
from collections import deque
from collections.abc import Callable, MutableSequence, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import httptools

from ._auditlog import FLUSH_INTERVAL_S, AuditLogWriter
from ._content import Response, respond
from ._model import ATTEMPT_DEPENDENT, HostFlag, Kind, WebModel, model_for
from ._spec import WebSpec

SERVER_NAME = "gossamer-testweb"
MAX_HEAD_BYTES = 64 * 1024
MAX_QUEUED_REQUESTS = 64  # per connection; reading pauses above this (pipelining floods)
STREAM_BLOCK = 256 * 1024
CONTROL_HOSTS = frozenset({"localhost", "127.0.0.1"})
_RATE_WINDOW_S = 1.0
_BIND_RETRIES = 8

_REASONS = {s.value: s.phrase for s in http.HTTPStatus}
_STATUS_LINES: dict[int, bytes] = {}


def _status_line(status: int, version: bytes) -> bytes:
    key = status * 2 + (version == b"1.0")
    line = _STATUS_LINES.get(key)
    if line is None:
        reason = _REASONS.get(status, "Unknown")
        line = f"HTTP/{version.decode()} {status} {reason}\r\n".encode()
        _STATUS_LINES[key] = line
    return line


def new_event_loop() -> asyncio.AbstractEventLoop:
    """uvloop's event loop when installed, else asyncio's."""
    try:
        import uvloop
    except ImportError:  # pragma: no cover - uvloop is a dependency on Linux
        return asyncio.new_event_loop()
    loop: asyncio.AbstractEventLoop = uvloop.new_event_loop()
    return loop


class EpochSource:
    """The content epoch: fixed, or advancing every `period` seconds from `start`.

    `cells` is [fixed epoch, period, start wall-clock time]; a shared-memory array lets several
    server processes see the same epoch."""

    __slots__ = ("cells",)

    def __init__(self, cells: MutableSequence[float]) -> None:
        self.cells = cells

    @classmethod
    def local(cls, epoch: int = 0, period: float = 0.0, start: float | None = None) -> EpochSource:
        return cls([float(epoch), float(period), time.time() if start is None else start])

    def current(self) -> int:
        c = self.cells
        period = c[1]
        if period > 0:
            return int((time.time() - c[2]) // period)
        return int(c[0])

    def set(self, epoch: int) -> None:
        """Fix the epoch (stops any periodic change)."""
        self.cells[1] = 0.0
        self.cells[0] = float(epoch)


@dataclass(slots=True)
class ServerStats:
    """A snapshot of one server process's counters."""

    requests: int
    control_requests: int
    connections_total: int
    connections_open: int
    body_bytes: int
    outcomes: dict[str, int]


class _Request:
    """One parsed request and what has been sent for it (for the audit line)."""

    __slots__ = (
        "ae",
        "error",
        "host",
        "ims",
        "inm",
        "keep_alive",
        "logged",
        "method",
        "nbytes",
        "outcome",
        "path",
        "start_us",
        "status",
        "target",
        "ua",
        "version",
    )

    def __init__(self) -> None:
        self.start_us = 0
        self.method = ""
        self.target = ""
        self.path = ""  # origin-form target (absolute-form reduced to its path and query)
        self.host: str | None = None
        self.ua = ""
        self.ims = ""
        self.inm = ""
        self.ae = ""
        self.version = b"1.1"
        self.keep_alive = True
        self.error = 0  # 400 / 431 detected while parsing
        self.status = 0
        self.nbytes = 0
        self.outcome = "aborted"  # what to log if the connection closes before we finish
        self.logged = False


_HEADER_FIELDS = {
    b"host": "host",
    b"user-agent": "ua",
    b"if-modified-since": "ims",
    b"if-none-match": "inm",
    b"accept-encoding": "ae",
}


def _dec(value: bytes) -> str:
    return value.decode("utf-8", "backslashreplace")


def normalise_host(value: str) -> str:
    """Host header value → lower-case name without port and trailing dot."""
    v = value.strip().lower()
    if v.startswith("["):
        end = v.find("]")
        return v[: end + 1] if end > 0 else v
    name, sep, port = v.rpartition(":")
    if sep and port.isdigit():
        v = name
    return v.rstrip(".")


def _split_absolute(target: str) -> tuple[str | None, str]:
    """(authority host, origin-form target) of an absolute-form target, else (None, target)."""
    if target[:1] == "/" or "://" not in target[:10]:
        return None, target
    scheme, _, rest = target.partition("://")
    if scheme.lower() not in ("http", "https"):
        return None, target
    slash = rest.find("/")
    qmark = rest.find("?")
    cut = min(p for p in (slash, qmark, len(rest)) if p >= 0)
    authority, path = rest[:cut], rest[cut:]
    if path.startswith("?") or not path:
        path = "/" + path
    return normalise_host(authority.rpartition("@")[2]), path


class _Job:
    """The asynchronous remainder of answering one request."""

    __slots__ = ("delay", "head", "kind", "resp")

    def __init__(self, kind: str, resp: Response | None, head: bool, delay: float) -> None:
        self.kind = kind  # "send", "reset", "hang"
        self.resp = resp
        self.head = head
        self.delay = delay


class _Connection(asyncio.Protocol):
    """One client connection: parse, queue, answer in order."""

    __slots__ = (
        "_drain",
        "_head_pending",
        "_head_size",
        "_in_head",
        "_req",
        "_url",
        "broken",
        "closed",
        "conn_id",
        "eof",
        "finished",
        "hung",
        "ip",
        "parser",
        "queue",
        "read_paused",
        "server",
        "task",
        "transport",
        "write_paused",
    )

    def __init__(self, server: WebServer, ip: str) -> None:
        self.server = server
        self.ip = ip
        self.conn_id = ""
        self.transport: asyncio.Transport | None = None
        self.parser = httptools.HttpRequestParser(self)
        self.queue: deque[_Request] = deque()
        self.task: asyncio.Task[None] | None = None
        self.write_paused = False
        self.read_paused = False
        self._drain: asyncio.Future[None] | None = None
        self.closed = False
        self.eof = False
        self.finished = False  # we closed the connection after a response (or reset it)
        self.broken = False  # a parse error: no more requests are read
        self.hung = False  # a request will never be answered: neither will later ones
        self._req = _Request()
        self._url: list[bytes] = []
        self._in_head = False
        self._head_pending = 0
        self._head_size = 0

    # ------------------------------------------------------------ transport callbacks
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's is not a subclass
        self.conn_id = self.server._new_connection(self)

    def connection_lost(self, exc: Exception | None) -> None:
        self._end()

    def _end(self) -> None:
        """The connection is over: log what was never finished, stop the task."""
        if self.closed:
            return
        self.closed = True
        self._finish_unanswered()
        if self._drain is not None and not self._drain.done():
            self._drain.set_result(None)
        if self.task is not None:
            self.task.cancel()
        self.server._connection_closed(self)

    def pause_writing(self) -> None:
        self.write_paused = True

    def resume_writing(self) -> None:
        self.write_paused = False
        d = self._drain
        if d is not None and not d.done():
            d.set_result(None)

    def eof_received(self) -> bool:
        # The client is gone (or half-closed, which HTTP clients practically never do):
        # what was written is flushed, what is pending is logged as aborted / hang, and
        # nothing more is written.
        self.eof = True
        self._end()
        return False

    def data_received(self, data: bytes) -> None:
        if self.broken or self.closed:
            return
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserUpgrade:
            # no protocol switch here: answer what came before, then close
            self.broken = True
            self._stop_reading()
            if self.queue:
                self.queue[-1].keep_alive = False
            elif self.transport is not None:
                self.transport.close()
        except httptools.HttpParserError:
            self._reject(400)
        else:
            if self._in_head:
                self._head_pending += len(data)
                if self._head_pending > MAX_HEAD_BYTES:
                    self._reject(431)
        if self.queue and self.task is None:
            self._pump()

    # ------------------------------------------------------------ parser callbacks
    def on_message_begin(self) -> None:
        self._req = _Request()
        self._url = []
        self._in_head = True
        self._head_pending = 0
        self._head_size = 0

    def on_url(self, url: bytes) -> None:
        self._url.append(url)
        self._head_size += len(url)

    def on_header(self, name: bytes, value: bytes) -> None:
        self._head_size += len(name) + len(value) + 4
        attr = _HEADER_FIELDS.get(name.lower())
        if attr is not None:
            setattr(self._req, attr, _dec(value))

    def on_headers_complete(self) -> None:
        req = self._req
        req.start_us = time.time_ns() // 1000
        self._in_head = False
        p = self.parser
        req.method = p.get_method().decode("ascii", "replace")
        req.version = b"1.0" if p.get_http_version() == "1.0" else b"1.1"
        req.keep_alive = p.should_keep_alive()
        req.target = _dec(b"".join(self._url))
        if self._head_size > MAX_HEAD_BYTES:
            req.error = 431
        if req.target[:1] == "/":
            req.path = req.target
            if req.host is not None:
                req.host = normalise_host(req.host)
        else:
            authority, req.path = _split_absolute(req.target)
            if authority is not None:
                req.host = authority  # RFC 9112 3.2.2: absolute-form wins over Host
            elif req.host is not None:
                req.host = normalise_host(req.host)

    def on_message_complete(self) -> None:
        self.queue.append(self._req)
        if len(self.queue) > MAX_QUEUED_REQUESTS:
            self._stop_reading()

    # ------------------------------------------------------------ answering
    def _reject(self, status: int) -> None:
        """A request that cannot be parsed: queue an error answer, stop reading, close."""
        req = self._req if self._in_head else _Request()
        if not req.start_us:
            req.start_us = time.time_ns() // 1000
        if not req.target and self._url:
            req.target = _dec(b"".join(self._url))[:1024]
        req.error = status
        req.keep_alive = False
        self.queue.append(req)
        self._in_head = False
        self.broken = True
        self._stop_reading()

    def _stop_reading(self) -> None:
        if not self.read_paused and self.transport is not None:
            self.read_paused = True
            self.transport.pause_reading()

    def _resume_reading(self) -> None:
        if self.read_paused and not self.broken and self.transport is not None:
            self.read_paused = False
            self.transport.resume_reading()

    def _pump(self) -> None:
        """Answer queued requests synchronously until one needs to wait (then hand the rest to
        a task). Called only when no task is running."""
        server = self.server
        while self.queue and not self.closed and not self.hung and not self.finished:
            if self.write_paused:
                self._start_task(None)
                return
            job = server._answer(self, self.queue[0])
            if job is not None:
                self._start_task(job)
                return
            if self.hung:  # the hanging request stays queued: logged when the connection ends
                return
            self._done_with_head()

    def _done_with_head(self) -> None:
        req = self.queue.popleft()
        if not req.keep_alive and self.transport is not None:
            self.close_after()
        if self.read_paused and len(self.queue) < MAX_QUEUED_REQUESTS // 4:
            self._resume_reading()

    def close_after(self) -> None:
        """The last response ended the connection: close it, log whatever was still queued."""
        self.broken = self.finished = True
        assert self.transport is not None
        self.transport.close()
        self._finish_unanswered()

    def _start_task(self, job: _Job | None) -> None:
        self.task = self.server._spawn(self._run(job))

    async def _run(self, job: _Job | None) -> None:
        server = self.server
        try:
            while self.queue and not self.closed and not self.hung and not self.finished:
                if job is None:
                    if self.write_paused:
                        await self.wait_drained()
                        continue
                    job = server._answer(self, self.queue[0])
                if job is not None:
                    await server._perform(self, self.queue[0], job)
                    job = None
                if self.hung or self.closed or self.finished:
                    break
                self._done_with_head()
        finally:
            self.task = None

    async def wait_drained(self) -> None:
        if not self.write_paused or self.closed:
            return
        loop = asyncio.get_running_loop()
        self._drain = loop.create_future()
        await self._drain
        self._drain = None

    async def wait_buffer_empty(self) -> None:
        """Until the transport has handed every byte to the kernel."""
        t = self.transport
        while t is not None and not self.closed and t.get_write_buffer_size() > 0:
            if self.write_paused:
                await self.wait_drained()
            else:
                await asyncio.sleep(0.001)

    def _finish_unanswered(self) -> None:
        """Log every request we will never finish: `hang` for a hanging one, else `aborted`."""
        now = time.time_ns() // 1000
        server = self.server
        while self.queue:
            req = self.queue.popleft()
            if not req.logged:
                server._log(self, req, now, req.outcome)

    def shutdown(self) -> None:
        """Server stop: log what is pending and drop the connection."""
        if self.closed:
            return
        self._finish_unanswered()
        if self.transport is not None:
            self.transport.abort()


class WebServer:
    """Serves a `WebSpec`'s web on loopback. Use from one event loop: `await start()`, then
    `await stop()` (always). Not thread-safe; see `_api.serve_in_thread` for a thread wrapper."""

    def __init__(
        self,
        spec: WebSpec,
        *,
        port: int = 0,
        bind_ip: str = "127.0.0.1",
        log_path: str | Path | None = None,
        epoch: int = 0,
        change_period: float = 0.0,
        epoch_source: EpochSource | None = None,
        reuse_port: bool = False,
        ips: Sequence[str] | None = None,
    ) -> None:
        self.spec = spec
        self.model: WebModel = model_for(spec)
        self.realism = self.model.realism
        self.requested_port = port
        self.bind_ip = bind_ip
        self.reuse_port = reuse_port
        self.epoch = epoch_source or EpochSource.local(epoch, change_period)
        self.log_path = Path(log_path) if log_path is not None else None
        self.ips: list[str] = list(ips) if ips is not None else self.model.ips()
        if bind_ip not in self.ips:
            self.ips.append(bind_ip)
        self.control_hosts = CONTROL_HOSTS | {bind_ip}
        self.port = 0
        self._log_writer: AuditLogWriter | None = None
        self._servers: list[asyncio.AbstractServer] = []
        self._connections: set[_Connection] = set()
        self._tasks: set[asyncio.Task[None]] = set()
        self._flusher: asyncio.Task[None] | None = None
        self._attempts: dict[tuple[int, str], int] = {}
        self._rate: dict[int, deque[float]] = {}
        self._rng = random.Random()
        self._pid = os.getpid()
        self._conn_seq = 0
        self._date_sec = -1
        self._date_line = b""
        self._started_at = time.time()
        self._running = False
        self.errors: list[str] = []  # unexpected exceptions in connection tasks (bugs)
        self.requests = 0
        self.control_requests = 0
        self.body_bytes = 0
        self.outcomes: dict[str, int] = {"ok": 0, "reset": 0, "hang": 0, "aborted": 0}

    # ------------------------------------------------------------ lifecycle
    async def start(self) -> None:
        """Bind every IP on one port and start serving. Raises OSError when binding fails."""
        loop = asyncio.get_running_loop()
        socks = bind_sockets(self.ips, self.requested_port, reuse_port=self.reuse_port, listen=True)
        self.port = socks[0].getsockname()[1]
        try:
            for sock in socks:
                ip = sock.getsockname()[0]
                srv: asyncio.AbstractServer = await loop.create_server(
                    _protocol_factory(self, ip), sock=sock, backlog=1024
                )
                self._servers.append(srv)
        except BaseException:
            for srv in self._servers:
                srv.close()
            for sock in socks:
                sock.close()
            raise
        if self.log_path is not None:
            self._log_writer = AuditLogWriter(self.log_path, self.spec.to_json())
            self._flusher = loop.create_task(self._flush_forever())
        self._started_at = time.time()
        self._running = True

    async def stop(self) -> None:
        """Stop accepting, drop every connection (pending requests logged as hang/aborted),
        wait for the connection tasks, flush and close the log. Idempotent."""
        if not self._running:
            return
        self._running = False
        for srv in self._servers:
            srv.close()
        for conn in list(self._connections):
            conn.shutdown()
        for task in list(self._tasks):
            task.cancel()
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)
        for srv in self._servers:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(srv.wait_closed(), 5.0)
        await asyncio.sleep(0)  # let connection_lost callbacks run
        if self._flusher is not None:
            self._flusher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._flusher
        if self._log_writer is not None:
            self._log_writer.close()

    async def _flush_forever(self) -> None:
        assert self._log_writer is not None
        while True:
            await asyncio.sleep(FLUSH_INTERVAL_S)
            self._log_writer.flush()

    def flush_log(self) -> int:
        """Write buffered audit lines to disk; returns lines written so far."""
        if self._log_writer is None:
            return 0
        self._log_writer.flush()
        return self._log_writer.lines_written

    def set_epoch(self, epoch: int) -> None:
        self.epoch.set(epoch)

    def stats(self) -> ServerStats:
        return ServerStats(
            self.requests,
            self.control_requests,
            self._conn_seq,
            len(self._connections),
            self.body_bytes,
            dict(self.outcomes),
        )

    def status(self) -> dict[str, Any]:
        """What `/_testweb/status` answers (JSON-ready)."""
        s = self.stats()
        return {
            "pid": self._pid,
            "port": self.port,
            "epoch": self.epoch.current(),
            "change_period": self.epoch.cells[1],
            "requests": s.requests,
            "control_requests": s.control_requests,
            "connections_total": s.connections_total,
            "connections_open": s.connections_open,
            "body_bytes": s.body_bytes,
            "outcomes": s.outcomes,
            "errors": list(self.errors),
            "hosts": len(self.model.hosts),
            "pages": self.model.total_pages,
            "ips": len(self.ips),
            "log": str(self.log_path) if self.log_path else None,
            "uptime_s": round(time.time() - self._started_at, 3),
            "spec": self.spec.to_dict(),
        }

    # ------------------------------------------------------------ bookkeeping
    def _new_connection(self, conn: _Connection) -> str:
        self._conn_seq += 1
        self._connections.add(conn)
        return f"{self._pid}-{self._conn_seq}"

    def _connection_closed(self, conn: _Connection) -> None:
        self._connections.discard(conn)

    def _spawn(self, coro: Any) -> asyncio.Task[None]:
        task: asyncio.Task[None] = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._task_done)
        return task

    def _task_done(self, task: asyncio.Task[None]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            self.errors.append(repr(task.exception()))
            loop = task.get_loop()
            loop.call_exception_handler(
                {"message": "testweb connection task failed", "exception": task.exception()}
            )

    def _log(self, conn: _Connection, req: _Request, end_us: int, outcome: str) -> None:
        req.logged = True
        if req.host is not None and req.host in self.control_hosts and req.error == 0:
            return  # control requests are not audited
        self.outcomes[outcome] += 1
        w = self._log_writer
        if w is not None:
            w.write(
                req.start_us,
                end_us,
                conn.conn_id,
                conn.ip,
                req.host or "",
                req.method,
                req.target,
                req.status,
                req.nbytes,
                outcome,
                req.ua,
                req.ims,
                req.inm,
                req.ae,
            )

    def _date(self) -> bytes:
        now = int(time.time())
        if now != self._date_sec:
            self._date_sec = now
            stamp = time.strftime("%a, %d %b %Y %H:%M:%S GMT", time.gmtime(now))
            self._date_line = f"Date: {stamp}\r\nServer: {SERVER_NAME}\r\n".encode()
        return self._date_line

    # ------------------------------------------------------------ answering
    def _answer(self, conn: _Connection, req: _Request) -> _Job | None:
        """Decide the answer to `req`; write it now when it needs no waiting (returns None),
        else return the job for the connection's task."""
        if req.error:
            self._write_simple(conn, req, req.error, b"", close=True)
            return None
        name = req.host
        target = req.path
        if name is None:
            if req.version == b"1.1":
                self._write_simple(conn, req, 400, b"missing Host header\n", close=True)
                return None
            self.requests += 1
            self._write_simple(conn, req, 404, b"no such host\n")
            return None
        if name in self.control_hosts:
            self.control_requests += 1
            self._answer_control(conn, req, target)
            return None
        self.requests += 1
        host = self.model.host_by_name(name)
        if host is None:
            self._write_simple(conn, req, 404, b"<html><body>No such host</body></html>\n")
            return None
        r = self.realism
        delay = 0.0
        if host.latency_ms > 0:
            jitter = r.latency_jitter
            delay = host.latency_ms / 1000.0
            if jitter > 0:
                delay *= 1.0 + jitter * (2.0 * self._rng.random() - 1.0)
        if host.flags & HostFlag.DEAD:
            return self._hang(conn, req, delay)
        method = req.method
        head = method == "HEAD"
        if method != "GET" and not head:
            resp = Response(405, [("Allow", "GET, HEAD"), ("Content-Type", "text/plain")])
            resp.body = b"method not allowed\n"
        elif target[:1] != "/":
            resp = Response(404, [("Content-Type", "text/plain")], b"not found\n")
        elif host.flags & HostFlag.RATE_LIMIT and self._rate_limited(host.id):
            resp = Response(
                429,
                [("Retry-After", "2"), ("Content-Type", "text/html")],
                b"<html><body>Too Many Requests</body></html>\n",
            )
        else:
            res = self.model.resolve(host.id, target)
            attempt = 0
            if res.kind is Kind.PAGE and self.model.plan(host.id, res.a).flags & ATTEMPT_DEPENDENT:
                key = (host.id, target)
                attempt = self._attempts.get(key, 0)
                self._attempts[key] = attempt + 1
            resp = respond(
                self.model,
                res,
                attempt=attempt,
                epoch=self.epoch.current(),
                accept_encoding=req.ae,
                if_none_match=req.inm,
                if_modified_since=req.ims,
            )
        action = resp.action
        if action == "hang":
            return self._hang(conn, req, delay)
        if action == "reset":
            return _Job("reset", resp, head, delay)
        delay += resp.first_byte_delay
        if delay > 0 or resp.trickle_s > 0 or resp.stream_size > 0:
            return _Job("send", resp, head, delay)
        self._write_response(conn, req, resp, head)
        return None

    def _hang(self, conn: _Connection, req: _Request, delay: float) -> _Job | None:
        if delay > 0:
            return _Job("hang", None, False, delay)
        req.outcome = "hang"
        conn.hung = True
        return None

    def _rate_limited(self, hid: int) -> bool:
        now = time.monotonic()
        window = self._rate.get(hid)
        if window is None:
            window = self._rate[hid] = deque()
        edge = now - _RATE_WINDOW_S
        while window and window[0] <= edge:
            window.popleft()
        window.append(now)
        return len(window) > self.realism.rate_limit_per_s

    def _headers(
        self,
        req: _Request,
        status: int,
        headers: list[tuple[str, str]],
        length: int,
        chunked: bool,
        close: bool,
    ) -> bytes:
        parts = [f"{k}: {v}\r\n" for k, v in headers]
        if chunked and req.version == b"1.1":
            parts.append("Transfer-Encoding: chunked\r\n")
        elif chunked:
            close = True  # HTTP/1.0: no chunked encoding, the body ends with the connection
        elif status != 304 and status >= 200 and status != 204:
            parts.append(f"Content-Length: {length}\r\n")
        if close or not req.keep_alive:
            req.keep_alive = False
            parts.append("Connection: close\r\n\r\n")
        else:
            parts.append("Connection: keep-alive\r\n\r\n")
        return b"".join(
            (_status_line(status, req.version), self._date(), "".join(parts).encode("latin-1"))
        )

    def _write_simple(
        self, conn: _Connection, req: _Request, status: int, body: bytes, close: bool = False
    ) -> None:
        resp = Response(status, [("Content-Type", "text/plain; charset=utf-8")], body)
        self._write_response(conn, req, resp, req.method == "HEAD", close)

    def _write_response(
        self, conn: _Connection, req: _Request, resp: Response, head: bool, close: bool = False
    ) -> None:
        body = resp.body
        status = resp.status
        length = resp.stream_size or len(body)  # stream_size: only for HEAD of a stream
        data = self._headers(req, status, resp.headers, length, resp.chunked, close)
        req.status = status
        transport = conn.transport
        assert transport is not None
        end_us = _end_stamp()
        if head or status == 304 or not body:
            transport.write(data)
        elif resp.chunked and req.version == b"1.1":
            transport.write(data + b"%x\r\n" % len(body) + body + b"\r\n0\r\n\r\n")
            req.nbytes = len(body)
        else:
            transport.write(data + body)
            req.nbytes = len(body)
        self.body_bytes += req.nbytes
        self._log(conn, req, end_us, "ok")

    async def _perform(self, conn: _Connection, req: _Request, job: _Job) -> None:
        """The waiting part of an answer: latency, then reset / hang / send."""
        if job.delay > 0:
            await asyncio.sleep(job.delay)
            if conn.closed:
                return
        if job.kind == "hang":
            req.outcome = "hang"
            conn.hung = True
            return
        if job.kind == "reset":
            await conn.wait_buffer_empty()  # earlier responses reach the client first
            if conn.closed:
                return
            end_us = _end_stamp()
            _reset(conn)
            req.outcome = "reset"
            self._log(conn, req, end_us, "reset")
            conn.close_after()
            return
        resp = job.resp
        assert resp is not None
        if job.head or resp.status == 304:
            self._write_response(conn, req, resp, job.head)
        elif resp.stream_size > 0:
            await self._stream(conn, req, resp)
        elif resp.trickle_s > 0 and resp.body:
            await self._trickle(conn, req, resp)
        else:
            self._write_response(conn, req, resp, False)

    async def _trickle(self, conn: _Connection, req: _Request, resp: Response) -> None:
        body = resp.body
        chunked = resp.chunked and req.version == b"1.1"
        transport = conn.transport
        assert transport is not None
        transport.write(
            self._headers(req, resp.status, resp.headers, len(body), resp.chunked, False)
        )
        req.status = resp.status
        n = max(1, min(len(body), math.ceil(resp.trickle_s * 10)))
        pause = resp.trickle_s / n
        end_us = 0
        for k in range(n):
            await asyncio.sleep(pause)
            if conn.closed:
                return
            piece = body[len(body) * k // n : len(body) * (k + 1) // n]
            end_us = _end_stamp()
            transport.write(b"%x\r\n%s\r\n" % (len(piece), piece) if chunked else piece)
            req.nbytes += len(piece)
            self.body_bytes += len(piece)
        if chunked:
            end_us = _end_stamp()
            transport.write(b"0\r\n\r\n")
        self._log(conn, req, end_us, "ok")

    async def _stream(self, conn: _Connection, req: _Request, resp: Response) -> None:
        """head, then filler repeated, then tail: exactly stream_size body bytes, written in
        STREAM_BLOCK pieces that wait for the transport to drain (flat memory)."""
        chunked = resp.chunked and req.version == b"1.1"
        total = resp.stream_size
        head, tail = resp.body, resp.tail
        if total < len(head) + len(tail):  # too small for its frame: just the prefix
            head, tail = (head + tail)[:total], b""
        middle = total - len(head) - len(tail)
        transport = conn.transport
        assert transport is not None
        transport.write(self._headers(req, resp.status, resp.headers, total, resp.chunked, False))
        req.status = resp.status
        filler = resp.filler or b" "
        block = filler * max(1, STREAM_BLOCK // len(filler))
        framed = b"%x\r\n%s\r\n" % (len(block), block) if chunked else block

        def send(piece: bytes, pre_framed: bytes | None = None) -> None:
            if chunked:
                transport.write(pre_framed or b"%x\r\n%s\r\n" % (len(piece), piece))
            else:
                transport.write(piece)
            req.nbytes += len(piece)
            self.body_bytes += len(piece)

        if head:
            send(head)
        sent = 0
        while sent < middle:
            if conn.write_paused:
                await conn.wait_drained()
            if conn.closed:
                return
            if transport.is_closing():
                # The peer is gone (a client that stops reading at its size limit closes the
                # connection): the transport now drops writes and never pauses, so without
                # this the loop "sent" the rest in a few ms without yielding, before
                # connection_lost could run, and logged the response "ok".
                self._log(conn, req, time.time_ns() // 1000, "aborted")
                return
            if middle - sent >= len(block):
                send(block, framed)
                sent += len(block)
            else:
                piece = block[: middle - sent]
                send(piece)
                sent += len(piece)
        if tail:
            send(tail)
        if chunked:
            transport.write(b"0\r\n\r\n")
        if conn.write_paused:
            await conn.wait_drained()
        if conn.closed:
            return
        self._log(conn, req, time.time_ns() // 1000, "aborted" if transport.is_closing() else "ok")

    # ------------------------------------------------------------ control endpoints
    def _answer_control(self, conn: _Connection, req: _Request, target: str) -> None:
        path, _, query = target.partition("?")
        ctype = "application/json"
        status = 200
        body: bytes
        if req.method not in ("GET", "HEAD"):
            status, body, ctype = 405, b"method not allowed\n", "text/plain"
        elif path == "/":
            body, ctype = self._index_html(), "text/html; charset=utf-8"
        elif path == "/_testweb/status":
            body = json.dumps(self.status(), indent=1).encode()
        elif path == "/_testweb/epoch":
            params = dict(p.partition("=")[::2] for p in query.split("&") if p)
            if "set" in params:
                try:
                    self.set_epoch(int(params["set"]))
                except ValueError:
                    status = 400
            body = json.dumps({"epoch": self.epoch.current()}).encode()
        elif path == "/_testweb/flush":
            body = json.dumps({"lines": self.flush_log()}).encode()
        else:
            status, body, ctype = 404, b"not found\n", "text/plain"
        resp = Response(status, [("Content-Type", ctype), ("Cache-Control", "no-store")], body)
        self._write_response(conn, req, resp, req.method == "HEAD")

    def _index_html(self, count: int = 20) -> bytes:
        m = self.model
        items = "".join(
            f'<li><a href="{html.escape(m.page_url(h.id, 0))}">{h.name}</a> '
            f"({h.pages} pages, {h.ip})</li>\n"
            for h in m.hosts[:count]
        )
        first = m.hosts[0]
        curl = f"curl --connect-to {first.name}:80:{first.ip}:{self.port} http://{first.name}/"
        return (
            "<!DOCTYPE html>\n<html><head><title>gossamer testweb</title></head><body>\n"
            f"<h1>gossamer testweb</h1><p>{len(m.hosts)} hosts, {m.total_pages} pages, "
            f"{len(self.ips)} IPs, port {self.port}, "
            f"profile {html.escape(self.spec.profile)}.</p>\n"
            f"<p>Page URLs carry no port: map host:80 to IP:{self.port}, e.g.</p>"
            f"<pre>{html.escape(curl)}</pre>\n<ul>\n{items}</ul>\n"
            '<p><a href="/_testweb/status">status</a></p></body></html>\n'
        ).encode()


def _protocol_factory(server: WebServer, ip: str) -> Callable[[], _Connection]:
    def make() -> _Connection:
        return _Connection(server, ip)

    return make


_LINGER_RST = struct.pack("ii", 1, 0)


def _end_stamp() -> int:
    """A response's end time (µs since the epoch), taken just BEFORE its last bytes are
    written. Taken after, it could be late by however long this thread then waited for the
    GIL or a core (tens of ms with the test's other threads and a crawl's processes on two
    cores): the next request of a polite crawler would then look early, a politeness
    violation that never happened. Before, the stamp is at most the write's own time early
    (the crawler reads the bytes after the write): a polite crawler never looks early, and an
    impolite one only hides behind a preemption as long as its shortfall."""
    return time.time_ns() // 1000


def _reset(conn: _Connection) -> None:
    """Close with SO_LINGER 0: the client sees ECONNRESET, not an orderly FIN."""
    transport = conn.transport
    assert transport is not None
    sock = transport.get_extra_info("socket")
    if sock is not None:
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, _LINGER_RST)
        except (OSError, AttributeError):
            with socket.socket(fileno=os.dup(sock.fileno())) as dup:
                dup.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, _LINGER_RST)
    transport.abort()


def bind_sockets(
    ips: Sequence[str], port: int, *, reuse_port: bool = False, listen: bool = True
) -> list[socket.socket]:
    """One TCP socket per IP, all on the same port. With port 0 the first socket picks the
    port and the others reuse it (retried when another process holds it on some IP)."""
    if not ips:
        raise ValueError("no IPs to bind")
    _raise_fd_limit(len(ips) + 256)
    attempts = _BIND_RETRIES if port == 0 else 1
    for attempt in range(attempts):
        socks: list[socket.socket] = []
        chosen = port
        try:
            for ip in ips:
                s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
                socks.append(s)
                s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                if reuse_port:
                    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
                s.bind((ip, chosen))
                if chosen == 0:
                    chosen = s.getsockname()[1]
                if listen:
                    s.listen(1024)
                s.setblocking(False)
            return socks
        except OSError as exc:
            for s in socks:
                s.close()
            if exc.errno != errno.EADDRINUSE or attempt == attempts - 1:
                raise
    raise AssertionError("unreachable")


def _raise_fd_limit(need: int) -> None:
    try:
        import resource
    except ImportError:  # pragma: no cover - not on Linux
        return
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = need * 2 + 1024
    if soft != resource.RLIM_INFINITY and soft < want:
        target = want if hard == resource.RLIM_INFINITY else min(want, hard)
        if target > soft:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
