"""`CurlFetcher`: libcurl's multi interface (pycurl) driven by the asyncio event loop.

Everything runs on the event loop's thread and libcurl never blocks it: it connects to the IP
the `Resolver` gave (CONNECT_TO), so it does no DNS of its own. A host's batch goes over one
kept-alive connection; redirects are never followed. `start()` is `fetch()` without the
coroutine (a request on the wire at once, its future awaited directly) and `poll()` lets the
crawler move a busy host between two loop iterations. How it is driven, and why pycurl:
docs/crawler/fetch.md.

The module stays whole because it is the fetch hot path: libcurl's socket and timer callbacks,
the epoll reader, the pool of easy handles and the time-out sweep act on the same multi handle
and per-transfer slots for every request, and splitting them would add calls and indirection
to each one."""

from __future__ import annotations

import asyncio
import contextlib
import select
import threading
import time
from collections import Counter
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Literal

import pycurl

from ..parse import is_html
from ._types import (
    ERROR_BAD_URL,
    ERROR_CANCELLED,
    ERROR_CONNECT,
    ERROR_CONNECTION_LOST,
    ERROR_DECODE,
    ERROR_DNS,
    ERROR_EMPTY_REPLY,
    ERROR_NETWORK,
    ERROR_OTHER,
    ERROR_PARTIAL,
    ERROR_PROTOCOL,
    ERROR_PROXY,
    ERROR_RESET,
    ERROR_TIMEOUT,
    ERROR_TLS,
    ERROR_TOO_LARGE,
    ERROR_TOO_SLOW,
    LAZY_HEADERS,
    FetchRequest,
    FetchResult,
    FetchStats,
    make_result,
    parse_headers,
    parse_status,
)
from .options import PROXY_FROM_ENV, check_header_pairs, check_proxy, proxy_credentials
from .resolve import Address, ResolveError, Resolver

DEFAULT_USER_AGENT = "gossamer/0.1"
DEFAULT_ACCEPT = "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"
DEFAULT_ACCEPT_ENCODING = "gzip, deflate, br"

_DEFAULT_PORTS = {"http": 80, "https": 443}
_HAVE_EPOLL = hasattr(select, "epoll")
# libcurl's wanted events (1 in, 2 out, 3 both) -> epoll masks
_EPOLL_MASKS = (0, 1, 4, 5)  # EPOLLIN 1, EPOLLOUT 4 (Linux)
_FORBIDDEN_HEADERS = frozenset({"host", "content-length", "transfer-encoding", "connection"})
# looked up once: the per-request paths use these instead of module attributes
_time = time.time
_monotonic = time.monotonic
_get_running_loop = asyncio.get_running_loop
_get_ident = threading.get_ident
_POLL_REMOVE = pycurl.POLL_REMOVE
_URL = pycurl.URL
_SIZE_DOWNLOAD_T = pycurl.SIZE_DOWNLOAD_T
_NUM_CONNECTS = pycurl.NUM_CONNECTS
_CurlError = pycurl.error
_PREREQ_OK: int = pycurl.PREREQFUNC_OK
_PREREQ_ABORT: int = pycurl.PREREQFUNC_ABORT
_E_ABORTED_BY_CALLBACK = pycurl.E_ABORTED_BY_CALLBACK
# CURLOPT_SUPPRESS_CONNECT_HEADERS (libcurl 7.54): pycurl 7.45 has no name for it
_SUPPRESS_CONNECT_HEADERS = getattr(pycurl, "SUPPRESS_CONNECT_HEADERS", 265)
SNIFF_BYTES = 512  # body bytes `is_html` sniffs when a response has no Content-Type

# libcurl result codes → error keys (anything not listed is ERROR_OTHER)
_CURL_ERRORS: dict[int, str] = {
    pycurl.E_UNSUPPORTED_PROTOCOL: ERROR_PROTOCOL,  # URLs are checked first: this is HTTP/0.9
    pycurl.E_URL_MALFORMAT: ERROR_BAD_URL,
    pycurl.E_COULDNT_RESOLVE_HOST: ERROR_DNS,
    pycurl.E_COULDNT_CONNECT: ERROR_CONNECT,
    pycurl.E_OPERATION_TIMEDOUT: ERROR_TIMEOUT,
    pycurl.E_GOT_NOTHING: ERROR_EMPTY_REPLY,
    pycurl.E_PARTIAL_FILE: ERROR_PARTIAL,
    pycurl.E_SEND_ERROR: ERROR_NETWORK,
    pycurl.E_RECV_ERROR: ERROR_NETWORK,
    pycurl.E_BAD_CONTENT_ENCODING: ERROR_DECODE,
    pycurl.E_FILESIZE_EXCEEDED: ERROR_TOO_LARGE,
    8: ERROR_PROTOCOL,  # CURLE_WEIRD_SERVER_REPLY
    pycurl.E_HTTP2: ERROR_PROTOCOL,
    pycurl.E_SSL_CONNECT_ERROR: ERROR_TLS,
    pycurl.E_PEER_FAILED_VERIFICATION: ERROR_TLS,
    pycurl.E_SSL_CACERT_BADFILE: ERROR_TLS,
    pycurl.E_SSL_CERTPROBLEM: ERROR_TLS,
    pycurl.E_SSL_CIPHER: ERROR_TLS,
    100: ERROR_PROTOCOL,  # CURLE_TOO_LARGE (8.6+): a header or header block too large
    pycurl.E_COULDNT_RESOLVE_PROXY: ERROR_PROXY,
}


def _classify(code: int, message: str) -> str:
    key = _CURL_ERRORS.get(code, ERROR_OTHER)
    if key is ERROR_NETWORK and "reset by peer" in message:
        return ERROR_RESET
    if key is ERROR_TIMEOUT and "too slow" in message:  # the low-speed cut, not a time-out
        return ERROR_TOO_SLOW
    return key


def split_url(url: str) -> tuple[str, int, str, str] | None:
    """(host, port, target, Host header) of an absolute http(s) URL, or None.

    `host` is lower-case with IPv6 brackets kept; `target` is path + query as sent (the
    fragment dropped, "/" when empty); the Host header carries the port unless it is the
    scheme's default (which is what libcurl sends).
    """
    if url.startswith("http://"):
        rest, default = url[7:], 80
    elif url.startswith("https://"):
        rest, default = url[8:], 443
    else:
        scheme, sep, rest = url.partition("://")
        default = _DEFAULT_PORTS.get(scheme.lower(), 0)
        if not sep or not default:
            return None
    slash = rest.find("/")
    authority = rest if slash == -1 else rest[:slash]
    if (
        ":" in authority
        or "@" in authority
        or "?" in authority
        or "#" in authority
        or not authority.islower()  # also False for "" and IP literals
    ):
        return _split_url_slow(rest, default)  # ports, IPv6, odd forms: rare in crawls
    target = "/" if slash == -1 else rest[slash:]
    hash_at = target.find("#")
    if hash_at != -1:
        target = target[:hash_at]
    if not target.isascii() or " " in target:
        return None
    return authority, default, target, authority


def _split_url_slow(rest: str, default: int) -> tuple[str, int, str, str] | None:
    end = len(rest)
    for ch in "/?#":
        i = rest.find(ch)
        if i != -1 and i < end:
            end = i
    authority, target = rest[:end], rest[end:]
    hash_at = target.find("#")
    if hash_at != -1:
        target = target[:hash_at]
    if not target or target[0] == "?":
        target = "/" + target
    if "@" in authority:
        return None  # credentials in URLs are not crawled
    if authority.startswith("["):
        close = authority.find("]")
        if close == -1 or (close + 1 < len(authority) and authority[close + 1] != ":"):
            return None
        host, port_text = authority[: close + 1], authority[close + 2 :]
    else:
        host, _, port_text = authority.partition(":")
    if port_text:
        if not port_text.isdigit() or not 0 < int(port_text) < 65536:
            return None
        port = int(port_text)
    else:
        port = default
    if not host or not target.isascii() or " " in target:
        return None
    host = host.lower()
    return host, port, target, host if port == default else f"{host}:{port}"


class _Slot:
    """A pooled easy handle and the state of the transfer it runs (one at a time).

    Header lines go straight into a list (`hlines.append`: a C call per line, no Python
    frame); body chunks through `on_data`, which enforces the size cap on the decoded bytes
    and, for an html_only request, stops a body that is not HTML (`stop_if_not_html`)."""

    __slots__ = (
        "addr",
        "buffer",
        "cap",
        "check_html",
        "chunks",
        "connect_to",
        "curl",
        "future",
        "getinfo",
        "header_list",
        "hlines",
        "last",
        "not_html",
        "request_head",
        "requests",
        "setopt",
        "size",
        "started",
        "started_at",
        "truncated",
        "url",
    )

    def __init__(self, curl: Any, cap: int, buffer: int) -> None:
        self.curl = curl
        self.setopt = curl.setopt  # bound once: pycurl's attribute lookup is slow
        self.getinfo = curl.getinfo
        self.cap = cap
        self.buffer = buffer  # libcurl's read buffer (BUFFERSIZE)
        self.chunks: list[bytes] = []
        self.hlines: list[bytes] = []
        self.size = 0
        self.truncated = False
        self.check_html = False  # an html_only request whose body's type is not decided yet
        self.not_html = False  # … stopped because it is not HTML
        self.last = 0.0  # monotonic time of the last body bytes (0: none yet)
        self.requests = 0  # requests about to be sent by this transfer (see on_prereq)
        self.started = 0.0
        self.started_at = 0.0
        self.url = ""
        self.addr: Address | None = None
        self.request_head = b""
        self.future: asyncio.Future[FetchResult] | None = None
        self.connect_to = ""
        self.header_list: list[str] | None = None
        curl.setopt(pycurl.WRITEFUNCTION, self.on_data)
        curl.setopt(pycurl.HEADERFUNCTION, self.hlines.append)
        curl.setopt(pycurl.PREREQFUNCTION, self.on_prereq)

    def on_prereq(self, _ip: str, _local_ip: str, _port: int, _local_port: int) -> int:
        """libcurl is about to send a request of this transfer: the first goes; a second is
        libcurl's own retry and is refused. libcurl retries at once, on a fresh connection,
        when a kept-alive connection dies under a request before any response byte (a reset,
        or a close racing the request): a second request to the host with no gap at all,
        past the crawler's delay and its count of attempts (26 host-delay violations in a
        6-host crawl with 30 % of pages resetting once). Refused, the transfer fails as a
        lost connection (ERROR_CONNECTION_LOST); the crawler sends it again once, after the
        host's delay.
        (Redirects are not followed and only GET is sent, so nothing else sends two.)"""
        self.requests += 1
        return _PREREQ_OK if self.requests == 1 else _PREREQ_ABORT

    def on_data(self, data: bytes) -> int | None:
        """libcurl hands over decoded body bytes: keep up to `cap`, then stop the transfer."""
        self.last = _monotonic()
        if self.check_html and self.stop_if_not_html(data):
            return 0  # libcurl aborts with CURLE_WRITE_ERROR (the connection is closed)
        size = self.size + len(data)
        if size <= self.cap:
            self.chunks.append(data)
            self.size = size
            return None
        keep = self.cap - self.size
        if keep > 0:
            self.chunks.append(data[:keep])
            self.size = self.cap
        self.truncated = True
        return 0  # fewer bytes than given: libcurl aborts with CURLE_WRITE_ERROR

    def stop_if_not_html(self, data: bytes) -> bool:
        """An html_only transfer's first body bytes `data`: True (and `data`, up to the cap,
        kept as the body) to stop it here, because the final response is not HTML. The
        rule is the parser's (`is_html`: the Content-Type; without one, the first
        SNIFF_BYTES sniffed, gathered over chunks). Never stopped: HTML, a 3xx (a redirect
        is no document), and a body whose Content-Length fits in one read buffer (read to
        its end, the kept-alive connection survives: stopping would save less than a buffer
        and cost a connection). Decided once, at the body's first bytes: libcurl reads at
        most one buffer at a time, so at most the head and one buffer come off the socket.
        An HTML page costs one join and one search of its head here, no regex."""
        head = b"".join(self.hlines)
        if head[9:10] == b"1":  # interim 1xx responses came first: the final one follows
            head = _final_head(head)
        low = head.lower()
        at = low.find(b"\r\ncontent-type:")
        ctype = ""
        if at != -1:
            at += 15
            ctype = head[at : head.find(b"\r\n", at)].decode("latin-1").strip()
        start = data
        if not ctype:
            if self.chunks:
                start = b"".join(self.chunks) + data
            if len(start) < SNIFF_BYTES and not is_html(None, start):
                return False  # too few bytes to tell yet: decided by a later chunk
        self.check_html = False
        if is_html(ctype, start):
            return False
        status = parse_status(head)[0]
        if status is None or 300 <= status < 400:
            return False
        at = low.find(b"\r\ncontent-length:")
        if at != -1 and low.find(b"\r\ntransfer-encoding:") == -1:
            at += 17
            length = low[at : low.find(b"\r\n", at)].strip()
            if length.isdigit() and int(length) <= self.buffer:
                return False
        self.not_html = self.truncated = True
        keep = self.cap - self.size
        if keep > 0:
            self.chunks.append(data if len(data) <= keep else data[:keep])
            self.size += min(keep, len(data))
        return True


def _final_head(raw: bytes) -> bytes:
    """The final response's status line and headers from everything libcurl passed to the
    header callback: interim 1xx responses come before it, chunked trailers after it."""
    start = 0
    while True:
        end = raw.find(b"\r\n\r\n", start)
        if end == -1:
            return raw[start:]  # incomplete (the transfer failed inside the head)
        if raw[start + 9 : start + 10] == b"1" and raw[end + 4 : end + 9] == b"HTTP/":
            start = end + 4  # a 1xx interim response: the real one follows
            continue
        return raw[start : end + 4]


def _parse_head(head: bytes) -> tuple[int | None, str, tuple[tuple[str, str], ...]]:
    """(status, HTTP version, headers) from a raw status line + header lines."""
    status, version = parse_status(head)
    return status, version, parse_headers(head)


def _header_line(name: str, value: str) -> str:
    if (
        not name
        or any(c in name for c in ":\r\n\0 \t")
        or not value
        or any(c in value for c in "\r\n\0")
    ):
        raise ValueError(f"invalid request header {name!r}: {value!r}")
    if name.lower() in _FORBIDDEN_HEADERS:
        raise ValueError(f"request header {name!r} cannot be set")
    return f"{name}: {value}"


class CurlFetcher:
    """The `Fetcher` of gossamer: HTTP/1.1 with keep-alive over pycurl's CurlMulti.

    Time-outs (seconds): `connect_timeout` for TCP (+TLS) connect; `first_byte_timeout` from
    the start of the fetch to the first byte of the response; `stall_timeout` the longest
    silence after that; `total_timeout` the whole transfer (DNS has the resolver's own
    bound). `max_body` caps the decoded body: with `too_large="truncate"` the transfer stops
    there and the result has `truncated=True` and the prefix; with `"error"` it fails with
    `fetch/error/too-large` (early when Content-Length says so). A transfer slower than
    `low_speed_limit` bytes/s for `low_speed_time` s is cut with `fetch/error/too-slow`
    (libcurl's low-speed limit; 0 turns it off). A request `html_only` is stopped at its
    first body bytes when the response is not HTML (`_Slot.stop_if_not_html`: at most the head
    and one `buffer_size` read come off the socket; the result has `not_html`, its
    connection is closed). `max_connections` idle
    connections are kept for reuse. `resolver` maps hosts to addresses (default: a DNS cache
    refusing private addresses unless `allow_private`).

    `headers` are sent with every request, after the defaults (an Accept or Accept-Encoding
    among them replaces the default one); `check_header_pairs` says which are refused.
    `proxy`: None, no proxy (and the http_proxy / https_proxy / no_proxy environment
    variables ignored); "env", the proxy those variables name, as curl takes them; or a
    proxy URL http(s)://[USER:PASSWORD@]HOST[:PORT], every request through it. Through a
    proxy each connection is a CONNECT tunnel to the address the resolver gave (the DNS
    pinning, the private-address guard and per-IP politeness hold as without a proxy), and
    the request sent inside it is the one in `request_head` (docs/crawler/fetch.md, "Proxy").
    """

    def __init__(
        self,
        *,
        resolver: Resolver | None = None,
        user_agent: str = DEFAULT_USER_AGENT,
        accept: str = DEFAULT_ACCEPT,
        accept_encoding: str = DEFAULT_ACCEPT_ENCODING,
        connect_timeout: float = 10.0,
        first_byte_timeout: float = 30.0,
        stall_timeout: float = 30.0,
        total_timeout: float = 120.0,
        max_body: int = 10 * 1024 * 1024,
        too_large: Literal["truncate", "error"] = "truncate",
        max_connections: int = 1024,
        low_speed_limit: int = 100,
        low_speed_time: int = 30,
        allow_private: bool = False,
        verify_tls: bool = True,
        buffer_size: int = 64 * 1024,
        headers: Sequence[tuple[str, str]] = (),
        proxy: str | None = None,
    ) -> None:
        for name, value in (
            ("connect_timeout", connect_timeout),
            ("first_byte_timeout", first_byte_timeout),
            ("stall_timeout", stall_timeout),
            ("total_timeout", total_timeout),
        ):
            if not value > 0:
                raise ValueError(f"{name} must be > 0, got {value}")
        if max_body < 1:
            raise ValueError(f"max_body must be >= 1, got {max_body}")
        if low_speed_limit < 0 or low_speed_time < 1:
            raise ValueError(
                f"low_speed_limit must be >= 0 and low_speed_time >= 1, got {low_speed_limit} "
                f"and {low_speed_time}"
            )
        if too_large not in ("truncate", "error"):
            raise ValueError(f"too_large must be 'truncate' or 'error', got {too_large!r}")
        crawl_headers = check_header_pairs(headers)
        self.proxy = None if proxy is None else check_proxy(proxy)
        if self.proxy == "none":
            self.proxy = None
        self._own_resolver = resolver is None
        self.resolver = resolver or Resolver(allow_private=allow_private)
        self.connect_timeout = connect_timeout
        self.first_byte_timeout = first_byte_timeout
        self.stall_timeout = stall_timeout
        self.total_timeout = total_timeout
        self.max_body = max_body
        self.too_large = too_large
        self.low_speed_limit = low_speed_limit
        self.low_speed_time = low_speed_time
        self.verify_tls = verify_tls
        self.buffer_size = buffer_size
        # Request headers after Host, in this order (libcurl adds none of its own: User-Agent,
        # Accept and Accept-Encoding given here replace its defaults), so that request_head
        # is exactly what is sent.
        base: list[tuple[str, str]] = []
        if user_agent:
            base.append(("User-Agent", user_agent))
        if accept:
            base.append(("Accept", accept))
        if accept_encoding:
            base.append(("Accept-Encoding", accept_encoding))
        for header in crawl_headers:  # an Accept / Accept-Encoding takes its place
            lower = header[0].lower()
            at = next((i for i, (n, _) in enumerate(base) if n.lower() == lower), None)
            if at is None:
                base.append(header)
            else:
                base[at] = header
        accept = next((v for n, v in base if n.lower() == "accept"), "")
        accept_encoding = next((v for n, v in base if n.lower() == "accept-encoding"), "")
        self._base = base
        suppress = [] if accept else ["Accept:"]  # an empty value removes a libcurl header
        if not accept_encoding:
            suppress.append("Accept-Encoding:")
        self._suppress = suppress
        self._base_list = [_header_line(n, v) for n, v in base] + suppress
        self._base_bytes = "".join(f"{n}: {v}\r\n" for n, v in base).encode("latin-1")
        self._sweep_interval = max(0.05, min(1.0, min(first_byte_timeout, stall_timeout) / 20))

        self._multi = pycurl.CurlMulti()
        self._use_epoll = _HAVE_EPOLL
        self._multi.setopt(
            pycurl.M_SOCKETFUNCTION, self._on_socket_epoll if self._use_epoll else self._on_socket
        )
        # libcurl calls its timer function at least twice per request (0 on every add_handle,
        # then its next deadline): a C-level list append, read by `_sync_timer` when the call
        # into libcurl returns, costs no Python frame. Only the latest value counts.
        self._timeouts: list[int] = []
        self._multi.setopt(pycurl.M_TIMERFUNCTION, self._timeouts.append)
        self._multi.setopt(pycurl.M_MAXCONNECTS, max(1, max_connections))
        self._multi.setopt(pycurl.M_PIPELINING, pycurl.PIPE_NOTHING)
        self._add_handle = self._multi.add_handle  # bound once: pycurl's attribute lookup is slow
        self._remove_handle = self._multi.remove_handle
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread = 0  # the thread running `_loop`
        # libcurl's timer: `_due` is when it wants socket_action(SOCKET_TIMEOUT) (loop time;
        # 0.0 "now", None no timer). One loop timer at `_timer_at` <= `_due` and one call_soon
        # serve it: a later deadline leaves the timer alone (it re-arms itself when it fires
        # early), so the per-request timer changes cost no loop handles.
        self._due: float | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._timer_at = 0.0
        self._soon: asyncio.Handle | None = None
        self._sweeper: asyncio.TimerHandle | None = None
        # Sockets. With epoll (Linux) libcurl's sockets are in a private epoll set whose fd
        # is the loop's one reader: `_want` is what libcurl asked for per fd, `_polled` the
        # fds registered in the set. A socket libcurl stops watching (POLL_REMOVE: its
        # connection is idle in the cache) stays registered: the next transfer on it re-arms
        # it with one epoll_ctl, where loop.add_reader + remove_reader per request cost ~6 µs.
        # Without epoll each fd is a loop reader / writer (`_fds`: registered events).
        self._epoll: Any = None  # made by _bind (before any socket)
        self._want: dict[int, int] = {}
        self._polled: set[int] = set()
        self._fds: dict[int, int] = {}  # fd -> registered events (1 read, 2 write)
        self._active: dict[Any, _Slot] = {}  # easy handle -> slot
        # idle handles, most recently used last, and per CONNECT_TO target the latest one: a
        # host's next request takes the handle its previous one used (no CONNECT_TO setopt)
        self._pool: dict[_Slot, None] = {}
        self._pool_by_target: dict[str, _Slot] = {}
        self._all: list[_Slot] = []
        self._closed = False
        # counters (completed: responses + errors)
        self._started = 0
        self._responses = 0
        self._truncated = 0
        self._not_html = 0
        self._errors: Counter[str] = Counter()
        self._statuses: Counter[int] = Counter()
        self._bytes_received = 0
        self._bytes_decoded = 0
        self._connections = 0

    # ------------------------------------------------------------------ public
    async def fetch(self, req: FetchRequest) -> FetchResult:
        """GET `req.url` without following redirects; network and HTTP failures are returned
        as `FetchResult.error` / `status`, never raised. Raises ValueError for an invalid
        extra header."""
        started_at, started = _time(), _monotonic()
        begun = self._begin(req, started_at, started)
        if isinstance(begun, FetchResult):  # failed before any transfer
            return begun
        if isinstance(begun, tuple):
            return await self._fetch_after_dns(req, started_at, started, *begun)
        try:
            return await begun
        except asyncio.CancelledError:
            self._abort(begun)
            raise

    def start(self, req: FetchRequest) -> asyncio.Future[FetchResult]:
        """`fetch(req)` begun at once, as a plain future (no coroutine, no task: what a
        caller that would wrap `fetch()` in a task saves). Its result is fetch()'s; an invalid
        extra header is its exception. Cancelling it ends the transfer at once, as for
        `fetch()` (the caller may hand the host's politeness slot on right after). A host not
        yet in the resolver's cache is looked up first, and then the future is a task. Call it
        in the event loop."""
        started_at, started = _time(), _monotonic()
        try:
            begun = self._begin(req, started_at, started)
        except ValueError as exc:
            future = self._loop_here().create_future()
            future.set_exception(exc)
            return future
        if isinstance(begun, FetchResult):  # failed before any transfer
            future = self._loop_here().create_future()
            future.set_result(begun)
            return future
        if isinstance(begun, tuple):
            return self._loop_here().create_task(
                self._fetch_after_dns(req, started_at, started, *begun)
            )
        begun.add_done_callback(self._abort_if_cancelled)  # ~0.4 µs a request
        return begun

    def _abort_if_cancelled(self, future: asyncio.Future[FetchResult]) -> None:
        if future.cancelled():
            self._abort(future)

    def _loop_here(self) -> asyncio.AbstractEventLoop:
        """The running loop, bound to this fetcher on first use. Ours, when it runs on this
        thread (no other can run here then): get_running_loop() makes a getpid() system call
        every time."""
        loop = self._loop
        if loop is None or _get_ident() != self._thread or not loop.is_running():
            loop = _get_running_loop()
            if loop is not self._loop:
                self._bind(loop)
        return loop

    def _begin(
        self, req: FetchRequest, started_at: float, started: float, addr: Address | None = None
    ) -> asyncio.Future[FetchResult] | FetchResult | tuple[str, int]:
        """Start `req`'s transfer: its future; or its result when it failed before any
        transfer; or (host, port) when the host must be looked up in DNS first (then
        `_fetch_after_dns` calls this again with the `addr` found). Raises ValueError for an
        invalid extra header."""
        url = req.url
        if req.headers:
            header_list, header_bytes = self._merge_headers(req.headers)  # may raise ValueError
        else:
            header_list, header_bytes = self._base_list, self._base_bytes
        if addr is None:
            self._started += 1  # (counted already when called again with the address)
        if self._closed:
            return self._failed(url, ERROR_CANCELLED, "fetcher closed", started_at, started)
        parts = split_url(url)
        if parts is None:
            return self._failed(url, ERROR_BAD_URL, "not an absolute http(s) URL", started_at,
                                started)  # fmt: skip
        host, port, target, host_header = parts
        if addr is None:
            try:
                addr = self.resolver.lookup(host[1:-1] if host[0] == "[" else host, port)
            except ResolveError as exc:
                return self._failed(url, exc.key, exc.detail, started_at, started)
            if addr is None:
                return host, port

        loop = self._loop_here()
        ip = addr.ip
        if ":" in ip:
            connect_to = f"{host}:{port}:[{ip}]:{addr.port}"
        else:
            connect_to = f"{host}:{port}:{ip}:{addr.port}"
        slot = self._pool_by_target.pop(connect_to, None)
        if slot is not None:
            del self._pool[slot]
        elif self._pool:
            slot = self._pool.popitem()[0]
            if self._pool_by_target.get(slot.connect_to) is slot:
                del self._pool_by_target[slot.connect_to]
        else:
            slot = self._new_slot()
        curl = slot.curl
        slot.setopt(_URL, url)
        if connect_to != slot.connect_to:
            slot.setopt(pycurl.CONNECT_TO, [connect_to])
            slot.connect_to = connect_to
        if header_list is not slot.header_list:
            slot.setopt(pycurl.HTTPHEADER, header_list)
            slot.header_list = header_list
        slot.url = url
        slot.addr = addr
        slot.request_head = b"".join(
            (b"GET ", target.encode(), b" HTTP/1.1\r\nHost: ", host_header.encode(), b"\r\n",
             header_bytes, b"\r\n")
        )  # fmt: skip
        slot.started = started
        slot.started_at = started_at
        slot.last = 0.0
        slot.requests = 0
        slot.check_html = req.html_only
        future: asyncio.Future[FetchResult] = loop.create_future()
        slot.future = future
        self._active[curl] = slot
        try:
            self._add_handle(curl)
        except _CurlError as exc:  # not expected: the handle is not in the multi already
            del self._active[curl]
            slot.future = None
            self._release(slot)
            if self._timeouts:
                self._sync_timer()
            return self._failed(url, ERROR_OTHER, f"add_handle: {exc}", started_at, started)
        if self._timeouts:  # add_handle asks for 0 ("act now"): one call_soon serves them all
            self._sync_timer()
        if self._sweeper is None:
            self._sweeper = loop.call_later(self._sweep_interval, self._sweep)
        return future

    async def _fetch_after_dns(
        self, req: FetchRequest, started_at: float, started: float, host: str, port: int
    ) -> FetchResult:
        """`fetch(req)` for a host the resolver must look up first (asynchronously)."""
        try:
            addr = await self.resolver.resolve(host[1:-1] if host[0] == "[" else host, port)
        except ResolveError as exc:
            return self._failed(req.url, exc.key, exc.detail, started_at, started)
        begun = self._begin(req, started_at, started, addr)
        if isinstance(begun, FetchResult):
            return begun
        assert not isinstance(begun, tuple)  # (the address is given)
        try:
            return await begun
        except asyncio.CancelledError:
            self._abort(begun)
            raise

    def _abort(self, future: asyncio.Future[FetchResult]) -> None:
        """End the transfer of a cancelled fetch now (its handle and connection freed)."""
        for slot in self._active.values():
            if slot.future is future:
                self._finish_slot(slot, ERROR_CANCELLED, "fetch cancelled")
                if self._timeouts:
                    self._sync_timer()
                return

    def statistics(self) -> FetchStats:
        """A snapshot of the counters (DNS figures come from the resolver)."""
        rs = self.resolver.statistics()
        return FetchStats(
            started=self._started,
            completed=self._responses + sum(self._errors.values()),
            in_flight=len(self._active),
            responses=self._responses,
            truncated=self._truncated,
            not_html=self._not_html,
            errors=dict(self._errors),
            statuses=dict(self._statuses),
            bytes_received=self._bytes_received,
            bytes_decoded=self._bytes_decoded,
            connections_opened=self._connections,
            dns_lookups=rs.lookups,
            dns_failures=rs.failures,
        )

    async def aclose(self) -> None:
        """Fail the fetches in flight with ERROR_CANCELLED, close every connection and handle.
        Idempotent; a fetch after aclose() returns ERROR_CANCELLED."""
        if self._closed:
            return
        self._closed = True
        for slot in list(self._active.values()):
            self._finish_slot(slot, ERROR_CANCELLED, "fetcher closed")
        for handle in (self._timer, self._soon, self._sweeper):
            if handle is not None:
                handle.cancel()
        self._timer = self._soon = self._sweeper = None
        self._due = None
        self._multi.close()  # closes the cached connections (POLL_REMOVE callbacks first)
        self._timeouts.clear()
        loop = self._loop
        if loop is not None and not loop.is_closed():
            for fd, events in self._fds.items():
                if events & 1:
                    loop.remove_reader(fd)
                if events & 2:
                    loop.remove_writer(fd)
            if self._epoll is not None:
                loop.remove_reader(self._epoll.fileno())
        if self._epoll is not None:
            self._epoll.close()
        self._fds.clear()
        self._want.clear()
        self._polled.clear()
        for slot in self._all:
            slot.curl.close()
        self._pool.clear()
        self._pool_by_target.clear()
        self._all.clear()
        if self._own_resolver:
            await self.resolver.aclose()

    # ------------------------------------------------------------------ requests
    def _merge_headers(self, extra: tuple[tuple[str, str], ...]) -> tuple[list[str], bytes]:
        replaced = {name.lower() for name, _ in extra}
        pairs = [(n, v) for n, v in self._base if n.lower() not in replaced]
        pairs += extra
        lines = [_header_line(n, v) for n, v in pairs]
        lines += [s for s in self._suppress if s[:-1].lower() not in replaced]
        return lines, "".join(f"{n}: {v}\r\n" for n, v in pairs).encode("latin-1")

    def _bind(self, loop: asyncio.AbstractEventLoop) -> None:
        """Serve `loop` from now on (the first fetch's); its sockets are registered there."""
        if self._loop is not None:
            raise RuntimeError("a CurlFetcher serves only the event loop it first fetched on")
        self._loop = loop
        self._thread = _get_ident()
        if self._use_epoll:
            self._epoll = select.epoll()
            loop.add_reader(self._epoll.fileno(), self._on_epoll)

    def _release(self, slot: _Slot) -> None:
        self._pool[slot] = None
        self._pool_by_target[slot.connect_to] = slot

    def _new_slot(self) -> _Slot:
        curl = pycurl.Curl()
        curl.setopt(pycurl.NOSIGNAL, 1)
        curl.setopt(pycurl.HTTP_VERSION, pycurl.CURL_HTTP_VERSION_1_1)
        curl.setopt(pycurl.PROTOCOLS, pycurl.PROTO_HTTP | pycurl.PROTO_HTTPS)
        curl.setopt(pycurl.FOLLOWLOCATION, 0)
        curl.setopt(pycurl.PATH_AS_IS, 1)
        curl.setopt(pycurl.ACCEPT_ENCODING, "")  # decode whatever arrives (gzip, deflate, br)
        curl.setopt(pycurl.CONNECTTIMEOUT_MS, max(1, int(self.connect_timeout * 1000)))
        curl.setopt(pycurl.TIMEOUT_MS, max(1, int(self.total_timeout * 1000)))
        curl.setopt(pycurl.BUFFERSIZE, self.buffer_size)
        # libcurl caches even the IP literals CONNECT_TO gives it, and prunes that cache by
        # walking all of it at the end of every transfer: with many hosts that walk is a
        # per-request cost growing with the crawl's breadth. We resolve; libcurl need not cache.
        curl.setopt(pycurl.DNS_CACHE_TIMEOUT, 0)
        curl.setopt(pycurl.SSL_VERIFYPEER, 1 if self.verify_tls else 0)
        curl.setopt(pycurl.SSL_VERIFYHOST, 2 if self.verify_tls else 0)
        self._set_proxy(curl)
        if self.too_large == "error":
            curl.setopt(pycurl.MAXFILESIZE_LARGE, self.max_body)
        if self.low_speed_limit:
            # libcurl cuts a transfer whose rate stays under the limit for the time: a
            # trickling server otherwise holds the host (and, per_ip = 1, its IP) until the
            # total time-out, 120 s by default (docs/crawler/fetch.md, "Slow servers")
            curl.setopt(pycurl.LOW_SPEED_LIMIT, self.low_speed_limit)
            curl.setopt(pycurl.LOW_SPEED_TIME, self.low_speed_time)
        slot = _Slot(curl, self.max_body, self.buffer_size)
        self._all.append(slot)
        return slot

    def _set_proxy(self, curl: Any) -> None:
        """The proxy options of a new handle (see the class docstring)."""
        proxy = self.proxy
        if proxy is None:
            # "" is libcurl's "no proxy, whatever the environment says": without it libcurl
            # takes http_proxy / https_proxy / ALL_PROXY by itself, and a crawl started from
            # a shell that has them would silently go through that proxy
            curl.setopt(pycurl.PROXY, "")
            return
        # the proxy's answer to CONNECT ("HTTP/1.0 200 Connection established") is not the
        # page's response: kept out of the header callback, as a 1xx would be
        curl.setopt(_SUPPRESS_CONNECT_HEADERS, 1)
        if proxy == PROXY_FROM_ENV:
            return  # libcurl reads the variables itself, per URL (no_proxy included)
        credentials = proxy_credentials(proxy)
        scheme, _, rest = proxy.partition("://")
        curl.setopt(pycurl.PROXY, f"{scheme}://{rest.rpartition('@')[2]}")
        if credentials is not None:  # given apart: libcurl need not decode them from the URL
            curl.setopt(pycurl.PROXYUSERNAME, credentials[0])
            curl.setopt(pycurl.PROXYPASSWORD, credentials[1])
        curl.setopt(pycurl.NOPROXY, "")  # an explicit proxy takes every URL (no_proxy ignored)
        # CONNECT_TO makes libcurl tunnel anyway (it cannot send a pinned address as a
        # proxy's absolute-form request); said here so that it does not depend on that
        curl.setopt(pycurl.HTTPPROXYTUNNEL, 1)

    def _failed(
        self, url: str, key: str, detail: str, started_at: float, started: float
    ) -> FetchResult:
        self._errors[key] += 1
        return FetchResult(
            url=url,
            status=None,
            headers=(),
            body=b"",
            raw_body_len=0,
            truncated=False,
            error=key,
            ip=None,
            port=None,
            started_at=started_at,
            elapsed=_monotonic() - started,
            request_head=b"",
            response_head=b"",
            http_version="",
            error_detail=detail,
        )

    # ------------------------------------------------------------------ completion
    def _finish_slot(self, slot: _Slot, key: str | None, detail: str | None) -> None:
        """End `slot`'s transfer (done, failed or aborted): build its result, resolve its
        future, recycle the handle. The caller then runs `_sync_timer` if libcurl set one."""
        curl = slot.curl
        del self._active[curl]
        self._remove_handle(curl)  # aborts a transfer still running (closes its connection)
        getinfo = slot.getinfo
        raw_len = getinfo(_SIZE_DOWNLOAD_T)
        new_conn = getinfo(_NUM_CONNECTS) > 0
        if new_conn:
            self._connections += 1
        hlines = slot.hlines
        if hlines:
            head = b"".join(hlines)
            hlines.clear()
            # the usual head, inline: one final response (no 1xx before it, no trailers after
            # it) with a status line seen before; else the general functions
            if head[9:10] == b"1" or head.find(b"\r\n\r\n") != len(head) - 4:
                head = _final_head(head)
            status, version = parse_status(head)
            headers = LAZY_HEADERS  # parsed from `head` when read
        else:
            head, status, version, headers = b"", None, "", ()
        truncated = slot.truncated
        chunks = slot.chunks
        body = b"".join(chunks)  # one chunk: that very bytes object
        chunks.clear()
        not_html = slot.not_html and key is None
        if key is None:
            self._responses += 1
            if status is not None:
                self._statuses[status] += 1
            if truncated:
                self._truncated += 1
            if not_html:
                self._not_html += 1
                # libcurl counts a read buffer once all of it is delivered: none of it here
                raw_len = max(raw_len, len(body))
        else:
            self._errors[key] += 1
            if key == ERROR_TOO_LARGE:
                body, truncated = b"", False
        self._bytes_received += raw_len
        self._bytes_decoded += len(body)
        addr = slot.addr
        result = make_result(
            slot.url,
            status,
            headers,
            body,
            raw_len,
            truncated,
            key,
            addr.ip if addr else None,
            addr.port if addr else None,
            slot.started_at,
            _monotonic() - slot.started,
            slot.request_head,
            head,
            version,
            detail,
            new_conn,
            not_html,
        )
        future = slot.future
        if future is not None and not future.done():
            future.set_result(result)
        slot.future = None
        slot.size = 0
        slot.truncated = slot.not_html = slot.check_html = False
        if not self._closed:
            self._release(slot)

    def _on_done(self, curl: Any, code: int, message: str) -> None:
        slot = self._active.get(curl)
        if slot is None:
            return
        if code == 0:
            self._finish_slot(slot, None, None)
        elif code == _E_ABORTED_BY_CALLBACK and slot.requests > 1:
            self._finish_slot(
                slot,
                ERROR_CONNECTION_LOST,
                "the kept-alive connection was reset or closed under the request; libcurl's "
                "immediate resend refused",
            )
        elif code == pycurl.E_WRITE_ERROR and slot.truncated:
            if self.too_large == "truncate" or slot.not_html:
                self._finish_slot(slot, None, None)
            else:
                self._finish_slot(slot, ERROR_TOO_LARGE, f"body over {self.max_body} bytes")
        else:
            key = _classify(code, message)
            if self.proxy is not None and key is ERROR_CONNECT:
                key = self._proxy_failure(slot, message)
            if key is ERROR_TOO_SLOW and not slot.hlines:
                # libcurl's rate counts from the request: no response head at all within
                # low_speed_time is a first-byte time-out (just sooner than first_byte_timeout)
                key = ERROR_TIMEOUT
            self._finish_slot(slot, key, f"curl {code}: {message}")

    def _proxy_failure(self, slot: _Slot, message: str) -> str:
        """The error key of a failed connect through the proxy: the proxy unreachable or
        refusing the tunnel (403, 407 …) is ERROR_PROXY; the proxy answering CONNECT with a
        5xx (it could not reach the site) is the site's ERROR_CONNECT; a connect that did not
        go through a proxy (--proxy env and no_proxy) stays ERROR_CONNECT."""
        connect_code = slot.getinfo(pycurl.HTTP_CONNECTCODE)
        if connect_code >= 500:
            return ERROR_CONNECT
        if connect_code or " over proxy " in message:  # libcurl's words for the proxy's
            return ERROR_PROXY
        return ERROR_CONNECT

    def _collect(self) -> None:
        """Finish the transfers libcurl reports done (successes without `_on_done`)."""
        multi, active = self._multi, self._active
        while True:
            queued, done, failed = multi.info_read()
            for curl in done:
                slot = active.get(curl)
                if slot is not None:
                    self._finish_slot(slot, None, None)
            for curl, code, message in failed:
                self._on_done(curl, code, message)
            if not queued:
                return

    # ------------------------------------------------------------------ event loop glue
    def _socket_action(self, fd: int, events: int) -> None:
        try:
            _, running = self._multi.socket_action(fd, events)
        except _CurlError:  # a multi-level failure: collect whatever it ended
            running = -1
        if running < len(self._active):  # libcurl counts every added, unfinished transfer
            self._collect()
        if self._timeouts:
            self._sync_timer()

    def poll(self) -> None:
        """Do now what the event loop would do on its next iteration, without blocking:
        send the requests started since it last looked (libcurl acts on a new transfer only
        when its timer is served, on the next iteration otherwise), then act on the sockets
        that are ready, so finished transfers resolve their futures. For a caller that keeps
        the loop busy for a while (the engine processing a page) and wants its next request
        on the wire meanwhile, or to know whether a response it waits for has come."""
        if self._closed:
            return
        if self._due == 0.0:
            self._run_due()
        if self._use_epoll and self._epoll is not None:
            self._on_epoll()

    def _on_epoll(self) -> None:
        """The epoll set is readable: act on every ready socket, then collect once."""
        if self._closed:
            return
        action, want = self._multi.socket_action, self._want
        running = len(self._active)
        for fd, ev in self._epoll.poll(0):
            if fd not in want:  # an idle kept-alive connection: closed by the server, or
                self._unpoll(fd)  # it sent something; libcurl checks it before reusing it
                continue
            # EPOLLIN 1 -> CSELECT_IN 1, EPOLLOUT 4 -> CSELECT_OUT 2, EPOLLERR 8 -> CSELECT_ERR
            # 4, EPOLLHUP 16 -> CSELECT_IN (libcurl reads the end of the stream)
            events = (ev & 1) | ((ev >> 1) & 6) | ((ev >> 4) & 1)
            try:
                _, running = action(fd, events)
            except _CurlError:
                running = -1
        if running < len(self._active):
            self._collect()
        if self._timeouts:
            self._sync_timer()

    def _unpoll(self, fd: int) -> None:
        self._polled.discard(fd)
        with contextlib.suppress(OSError):  # already closed: the kernel dropped it
            self._epoll.unregister(fd)

    def _on_readable(self, fd: int) -> None:
        self._socket_action(fd, pycurl.CSELECT_IN)

    def _on_writable(self, fd: int) -> None:
        self._socket_action(fd, pycurl.CSELECT_OUT)

    def _on_socket_epoll(self, what: int, fd: int, multi: Any, data: Any) -> None:
        """M_SOCKETFUNCTION with epoll: watch `fd` in the epoll set for what libcurl wants
        (never call libcurl here)."""
        want = self._want
        if what == _POLL_REMOVE:
            want.pop(fd, None)  # stays in the epoll set until closed or readable
            return
        new = what & 3
        old = want.get(fd)
        if old == new:
            return
        want[fd] = new
        mask = _EPOLL_MASKS[new]
        if old is None:  # (re)starting: the fd may be a new socket with a reused number
            if fd in self._polled:
                try:
                    self._epoll.modify(fd, mask)
                    return
                except OSError:  # closed since: the kernel dropped the old registration
                    pass
            self._epoll.register(fd, mask)
            self._polled.add(fd)
        else:
            self._epoll.modify(fd, mask)

    def _on_socket(self, what: int, fd: int, multi: Any, data: Any) -> None:
        """M_SOCKETFUNCTION without epoll: `fd` is a loop reader / writer as libcurl wants
        (never call libcurl here)."""
        loop = self._loop
        if loop is None or loop.is_closed():
            self._fds.pop(fd, None)
            return
        old_events = self._fds.get(fd, 0)
        new = 0 if what == pycurl.POLL_REMOVE else what & 3
        if new & 1 and not old_events & 1:
            loop.add_reader(fd, self._on_readable, fd)
        elif old_events & 1 and not new & 1:
            loop.remove_reader(fd)
        if new & 2 and not old_events & 2:
            loop.add_writer(fd, self._on_writable, fd)
        elif old_events & 2 and not new & 2:
            loop.remove_writer(fd)
        if new:
            self._fds[fd] = new
        else:
            self._fds.pop(fd, None)

    def _sync_timer(self) -> None:
        """Act on the latest value libcurl gave its timer function (see `_timeouts`)."""
        timeouts = self._timeouts
        timeout_ms = timeouts[-1]
        timeouts.clear()
        self._on_timer(timeout_ms)

    def _on_timer(self, timeout_ms: int) -> None:
        """libcurl wants socket_action(SOCKET_TIMEOUT) in `timeout_ms` (-1: never). Only
        moves `_due`; a loop handle is made only for an earlier deadline."""
        loop = self._loop
        if timeout_ms < 0 or loop is None or self._closed:
            self._due = None  # a pending handle finds nothing due and does nothing
        elif timeout_ms == 0:  # the usual answer to add_handle: act on the next iteration
            self._due = 0.0
            if self._soon is None:
                self._soon = loop.call_soon(self._on_soon)
        else:
            due = self._due = loop.time() + timeout_ms / 1000.0
            if self._timer is None or self._timer_at > due:
                if self._timer is not None:
                    self._timer.cancel()
                self._timer = loop.call_at(due, self._on_timeout)
                self._timer_at = due

    def _on_soon(self) -> None:
        self._soon = None
        self._run_due()

    def _on_timeout(self) -> None:
        self._timer = None
        self._run_due()

    def _run_due(self) -> None:
        due = self._due
        loop = self._loop
        if due is None or loop is None or self._closed:
            return
        if due > loop.time() + 0.001:  # not yet (a timer set for an earlier deadline)
            if self._timer is None or self._timer_at > due:
                if self._timer is not None:
                    self._timer.cancel()
                self._timer = loop.call_at(due, self._on_timeout)
                self._timer_at = due
            return
        # libcurl sets its timer again in a SOCKET_TIMEOUT action whenever a timer remains
        # (even an unchanged one), so None here is replaced if needed
        self._due = None
        self._socket_action(pycurl.SOCKET_TIMEOUT, 0)

    def _sweep(self) -> None:
        """Abort transfers past their first-byte or stall time-out; re-arm while busy."""
        self._sweeper = None
        now = _monotonic()
        first_byte, stall = self.first_byte_timeout, self.stall_timeout
        expired: list[tuple[_Slot, str]] = []
        for slot in self._active.values():
            if slot.last == 0.0:
                if not slot.hlines:
                    if now - slot.started > first_byte:
                        expired.append((slot, f"no response within {first_byte:g} s (first byte)"))
                else:
                    slot.last = now  # the head arrived (within one sweep): the stall clock runs
            elif now - slot.last > stall:
                expired.append((slot, f"no data for {stall:g} s (stalled)"))
        for slot, detail in expired:
            self._finish_slot(slot, ERROR_TIMEOUT, detail)
        if self._timeouts:
            self._sync_timer()
        if self._active and self._loop is not None and not self._closed:
            self._sweeper = self._loop.call_later(self._sweep_interval, self._sweep)


if TYPE_CHECKING:
    from ._types import Fetcher, StartingFetcher

    _conforms: Fetcher = CurlFetcher()  # mypy checks that CurlFetcher is a Fetcher
    _fast: StartingFetcher = CurlFetcher()  # … with the fast path
