"""What the fetcher takes and gives: requests, results, statistics, error keys, the protocol.

Errors are values, never exceptions: every failed fetch returns a `FetchResult` whose `error`
is one of the structured keys below (`fetch/error/timeout`, ...) and whose `error_detail` says
what happened in words. HTTP statuses (404, 503, ...) are not errors.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

# -- error keys (`FetchResult.error`); see docs/crawler/fetch.md for when each is given
ERROR_TIMEOUT = "fetch/error/timeout"  # connect, first byte, stall or total time-out
ERROR_TOO_SLOW = "fetch/error/too-slow"  # below low_speed_limit bytes/s for low_speed_time s
ERROR_CONNECT = "fetch/error/connect"  # connection refused / unreachable
ERROR_RESET = "fetch/error/reset"  # connection reset by the peer
# a kept-alive connection reset or closed under the request before any response byte: the
# request may have reached the server, so it is not resent at once (callers may resend it
# after the host's delay)
ERROR_CONNECTION_LOST = "fetch/error/connection-lost"
ERROR_EMPTY_REPLY = "fetch/error/empty-reply"  # connection closed before any response
ERROR_PARTIAL = "fetch/error/partial"  # connection closed in the middle of the body
ERROR_NETWORK = "fetch/error/network"  # any other send / receive failure
ERROR_DNS = "fetch/error/dns"  # the name does not resolve (or the lookup timed out)
ERROR_BLOCKED_ADDRESS = "fetch/error/blocked-address"  # private / loopback, not allowed
ERROR_TOO_LARGE = "fetch/error/too-large"  # body over max_body with too_large="error"
ERROR_DECODE = "fetch/error/decode"  # broken gzip / deflate / br stream
ERROR_PROTOCOL = "fetch/error/protocol"  # not HTTP/1.x, malformed response
ERROR_TLS = "fetch/error/tls"  # TLS handshake or certificate failure
ERROR_BAD_URL = "fetch/error/bad-url"  # not an absolute http(s) URL
ERROR_CANCELLED = "fetch/error/cancelled"  # the fetcher was closed while fetching
ERROR_PROXY = "fetch/error/proxy"  # the proxy cannot be reached or refused the tunnel
ERROR_OTHER = "fetch/error/other"  # anything else (error_detail names the curl code)

ERROR_KEYS = (
    ERROR_TIMEOUT,
    ERROR_TOO_SLOW,
    ERROR_CONNECT,
    ERROR_RESET,
    ERROR_CONNECTION_LOST,
    ERROR_EMPTY_REPLY,
    ERROR_PARTIAL,
    ERROR_NETWORK,
    ERROR_DNS,
    ERROR_BLOCKED_ADDRESS,
    ERROR_TOO_LARGE,
    ERROR_DECODE,
    ERROR_PROTOCOL,
    ERROR_TLS,
    ERROR_BAD_URL,
    ERROR_CANCELLED,
    ERROR_PROXY,
    ERROR_OTHER,
)


@dataclass(frozen=True, slots=True)
class FetchRequest:
    """One GET. `url` is a canonical absolute http(s) URL (its fragment, if any, is not sent);
    `headers` are extra request headers, e.g. If-None-Match / If-Modified-Since for a
    conditional GET. An extra header named like a default one (User-Agent, Accept,
    Accept-Encoding) replaces it; Host cannot be set.

    `html_only`: the caller wants the body only if the response is HTML. A final response
    (not a 3xx) whose Content-Type is not HTML (`parse.is_html`; without one, its first bytes
    sniffed) is stopped at its first body bytes, unless its Content-Length says the whole
    body fits in one read buffer: the result has `not_html` and `truncated`, the head and
    what arrived (docs/crawler/fetch.md, "Non-HTML bodies"). For page fetches under
    `--html-only`; never for robots.txt or sitemaps. A fetcher that ignores it reads every
    body whole: correct, only wasteful."""

    url: str
    headers: tuple[tuple[str, str], ...] = ()
    html_only: bool = False


@dataclass(frozen=True, slots=True)
class FetchResult:
    """The outcome of one fetch; never raised, always returned.

    - `error` is None for a complete response (whatever its status), else an error key
      (`ERROR_*`). `status` is the status received, even with an error (a broken gzip body
      still has its 200), and None when no status line arrived.
    - `body` is the decoded content (gzip / deflate / br removed), at most max_body bytes; on
      an error it holds what was decoded before the failure (possibly nothing).
    - `truncated`: the transfer was stopped before the body's end on purpose (not an error):
      the body reached max_body, or it is not HTML (`not_html`).
    - `not_html`: the request was `html_only` and the response's Content-Type said it is not
      HTML: the transfer was stopped at the body's first bytes (the connection closed); `body`
      holds those bytes (at most one read buffer), `truncated` is True.
    - `raw_body_len`: body bytes received on the wire (compressed, before decoding); for a
      `not_html` stop, the bytes handed over before it (decoded size).
    - `headers`, `response_head`: the final response's headers, in order, and its exact status
      line + header lines as received (ending with the empty line). `response_head` describes
      the wire format: it may say `Content-Encoding: gzip` / `Transfer-Encoding: chunked`
      while `body` is decoded.
    - `request_head`: the exact request line and headers sent.
    - `ip`, `port`: the address connected to (None when resolving failed).
    - `started_at`: wall-clock time.time() when the fetch began; `elapsed`: seconds it took.
    """

    url: str
    status: int | None
    headers: tuple[tuple[str, str], ...]
    body: bytes
    raw_body_len: int
    truncated: bool
    error: str | None
    ip: str | None
    port: int | None
    started_at: float
    elapsed: float
    request_head: bytes
    response_head: bytes
    http_version: str
    error_detail: str | None = None
    new_connection: bool = False
    not_html: bool = False

    def header(self, name: str) -> str | None:
        """The first header called `name` (case-insensitive), or None."""
        # The slot read directly (a C call; `self.headers` runs _LazyHeaders.__get__, a Python
        # frame): the crawler reads several headers of every response. LAZY_HEADERS are
        # replaced there by their {lower-case name: first value} map (see _lookup_map).
        headers: Any = _get_headers_slot(self)
        if type(headers) is _NameMap:
            return headers.get(name.lower())
        if headers is LAZY_HEADERS:
            return _lookup_map(self).get(name.lower())
        if type(headers) is _Headers:  # parsed from response_head: a name -> value map
            first = headers.first
            if first is None:
                first = headers.first = _first_values(headers)
            return first.get(name.lower())
        lname = name.lower()
        for key, value in headers:
            if key.lower() == lname:
                return value  # type: ignore[no-any-return]
        return None

    def header_all(self, name: str) -> list[str]:
        """Every value of the header `name` (case-insensitive), in order."""
        headers: Any = _get_headers_slot(self)
        lname = name.lower()
        if type(headers) is _NameMap or headers is LAZY_HEADERS:
            first = headers if type(headers) is _NameMap else _lookup_map(self)
            if lname not in first:
                return []  # the usual answer (X-Robots-Tag is read from every page)
            headers = self.headers  # parsed now
        return [value for key, value in headers if key.lower() == lname]

    @property
    def ok(self) -> bool:
        """True when a complete response arrived (any status, truncated or not)."""
        return self.error is None


@dataclass(frozen=True, slots=True)
class FetchStats:
    """A snapshot of a fetcher's counters (`Fetcher.statistics()`)."""

    started: int = 0
    completed: int = 0
    in_flight: int = 0
    responses: int = 0  # completed without error
    truncated: int = 0  # responses stopped on purpose: max_body, and not_html ones
    not_html: int = 0  # responses stopped at their first body bytes: html_only, not HTML
    errors: Mapping[str, int] = field(default_factory=dict)  # error key -> count
    statuses: Mapping[int, int] = field(default_factory=dict)  # status -> count (no error)
    bytes_received: int = 0  # body bytes on the wire
    bytes_decoded: int = 0  # body bytes after decoding
    connections_opened: int = 0
    dns_lookups: int = 0
    dns_failures: int = 0


class Fetching(Protocol):
    """What the crawler asks of a fetcher: GET one URL (a test's fake provides no more)."""

    async def fetch(self, req: FetchRequest) -> FetchResult:
        """GET `req.url` (no redirect following); never raises for network or HTTP errors."""
        ...


@runtime_checkable
class StartingFetcher(Fetching, Protocol):
    """A fetcher with the fast path: `start` puts a request on the wire at once (a task
    around `fetch()` would start it one loop iteration later), `poll` settles transfers
    whose responses are in without waiting for a loop iteration. The crawler checks for it
    once, when it is built (`isinstance`)."""

    def start(self, req: FetchRequest) -> asyncio.Future[FetchResult]:
        """Begin fetching `req` now; the future is `fetch(req)`'s result (cancel it to abort)."""
        ...

    def poll(self) -> None:
        """Settle the transfers whose responses have arrived (their futures done)."""
        ...


class Fetcher(Fetching, Protocol):
    """An HTTP client the engine drives from asyncio: many fetches at once, one event loop."""

    def statistics(self) -> FetchStats:
        """A snapshot of the counters."""
        ...

    async def aclose(self) -> None:
        """Stop: pending fetches end with ERROR_CANCELLED, connections are closed. Idempotent."""
        ...


# -- response heads
class _Headers(tuple[tuple[str, str], ...]):
    """Headers parsed from a response head: a tuple of (name, value) pairs, equal to any other
    such tuple, that also keeps the {lower-case name: first value} map `header()` builds."""

    first: dict[str, str] | None = None  # set on the instance (tuple subclasses have a dict)


def _first_values(headers: tuple[tuple[str, str], ...]) -> dict[str, str]:
    first: dict[str, str] = {}
    for name, value in reversed(headers):  # the first occurrence is written last: it wins
        first[name.lower()] = value
    return first


def parse_headers(head: bytes) -> tuple[tuple[str, str], ...]:
    """The header lines of a raw response head (status line + headers), in order: names and
    values stripped, lines without a colon skipped, obsolete line folding joined with a space."""
    text = head.decode("latin-1")
    lines = text.split("\r\n")
    del lines[0]
    headers: list[tuple[str, str]] = []
    if "\r\n " in text or "\r\n\t" in text:
        for line in lines:
            name, sep, value = line.partition(":")
            if sep:
                if name[:1] in (" ", "\t") and headers:  # obsolete folding continues a value
                    headers[-1] = (headers[-1][0], f"{headers[-1][1]} {line.strip()}")
                else:
                    headers.append((name.strip(), value.strip()))
            elif line[:1] in (" ", "\t") and headers:
                headers[-1] = (headers[-1][0], f"{headers[-1][1]} {line.strip()}")
    else:  # no folding (nearly always): one partition per line
        for line in lines:
            name, sep, value = line.partition(":")
            if sep:
                headers.append((name.strip(), value.strip()))
    return _Headers(headers)


_VERSIONS = {b"HTTP/1.1 ": "1.1", b"HTTP/1.0 ": "1.0"}
# parse_status's answers for the usual lines, by their first 13 bytes ("HTTP/1.1 200 "), the
# only bytes they depend on (at most 2 x 1000 x 2 entries)
_STATUS_LINES: dict[bytes, tuple[int | None, str]] = {}


def parse_status(head: bytes) -> tuple[int | None, str]:
    """(status, HTTP version) from a raw response head's status line; status None when the
    line has no numeric status."""
    known = _STATUS_LINES.get(head[:13])
    if known is not None:
        return known
    version = _VERSIONS.get(head[:9])
    if version is not None and head[12:13] in (b" ", b"\r") and head[9:12].isdigit():
        answer = _STATUS_LINES[head[:13]] = int(head[9:12]), version  # the usual line
        return answer
    end = head.find(b"\r\n")
    parts = (head if end == -1 else head[:end]).decode("latin-1").split(None, 2)
    if not parts:
        return None, ""
    try:
        return int(parts[1]), parts[0][5:]
    except (IndexError, ValueError):
        return None, parts[0][5:]


class _NameMap(dict[str, str]):
    """What `_lookup_map` keeps in the headers slot of a result whose LAZY_HEADERS were looked
    up by name and not read yet (a type of its own: no given `headers` value is taken for it)."""


class _LazyHeaders:
    """The `FetchResult.headers` slot, parsed from `response_head` on first read when the
    fetcher stored `LAZY_HEADERS` there, or the `_NameMap` that header() made of them (most
    results are read through `header()` or not at all). Reads and writes otherwise go to the
    slot as they would without it."""

    __slots__ = ("slot",)

    def __init__(self, slot: Any) -> None:
        self.slot = slot

    def __get__(self, obj: Any, owner: Any = None) -> Any:
        if obj is None:
            return self.slot
        value = self.slot.__get__(obj, owner)
        if value is LAZY_HEADERS or type(value) is _NameMap:
            value = parse_headers(obj.response_head)
            self.slot.__set__(obj, value)
        return value

    def __set__(self, obj: Any, value: Any) -> None:
        self.slot.__set__(obj, value)

    def __delete__(self, obj: Any) -> None:
        self.slot.__delete__(obj)


LAZY_HEADERS: tuple[tuple[str, str], ...] = _Headers()  # "parse response_head when read"
_headers_slot = FetchResult.__dict__["headers"]
_get_headers_slot = _headers_slot.__get__
_set_headers_slot = _headers_slot.__set__
setattr(FetchResult, "headers", _LazyHeaders(_headers_slot))  # noqa: B010


def _lookup_map(result: FetchResult) -> dict[str, str]:
    """The {lower-case name: first value} map of `result`'s LAZY_HEADERS, which is all that
    header() and header_all() (for an absent name) need: as a _NameMap it takes their place in
    the slot until `headers` itself is read (then parsed in full), and costs less than that
    parse. With obsolete line folding: the full parse, and its map."""
    head = result.response_head
    text = head.decode("latin-1")
    if "\r\n " in text or "\r\n\t" in text:  # obsolete line folding: the full parse
        headers = parse_headers(head)
        first = _first_values(headers)
        headers.first = first  # type: ignore[attr-defined]
        _set_headers_slot(result, headers)
        return first
    lines = text.split("\r\n")
    del lines[0]
    first = _NameMap()
    for line in lines:
        name, sep, value = line.partition(":")
        if sep:
            first.setdefault(name.strip().lower(), value.strip())
    _set_headers_slot(result, first)
    return first


# -- building results
class _ResultSlots:
    """FetchResult's slot layout without its frozen __setattr__: `make_result` fills one with
    plain attribute stores, then makes it a FetchResult (same layout, so __class__ may be set).
    The frozen dataclass's own __init__ costs ~8 µs here for 16 fields (object.__setattr__ per
    field), setting the slot descriptors one by one ~2.3 µs, this ~1 µs."""

    __slots__ = tuple(FetchResult.__dataclass_fields__)
    url: str
    status: int | None
    headers: tuple[tuple[str, str], ...]
    body: bytes
    raw_body_len: int
    truncated: bool
    error: str | None
    ip: str | None
    port: int | None
    started_at: float
    elapsed: float
    request_head: bytes
    response_head: bytes
    http_version: str
    error_detail: str | None
    new_connection: bool
    not_html: bool


assert _ResultSlots.__slots__ == FetchResult.__slots__
_new = object.__new__


def make_result(
    url: str,
    status: int | None,
    headers: tuple[tuple[str, str], ...],
    body: bytes,
    raw_body_len: int,
    truncated: bool,
    error: str | None,
    ip: str | None,
    port: int | None,
    started_at: float,
    elapsed: float,
    request_head: bytes,
    response_head: bytes,
    http_version: str,
    error_detail: str | None,
    new_connection: bool,
    not_html: bool = False,
) -> FetchResult:
    """`FetchResult(...)` with every field given positionally, about 8x faster. `headers` may
    be LAZY_HEADERS: parsed from `response_head` when first read."""
    r = _new(_ResultSlots)
    r.url = url
    r.status = status
    r.headers = headers
    r.body = body
    r.raw_body_len = raw_body_len
    r.truncated = truncated
    r.error = error
    r.ip = ip
    r.port = port
    r.started_at = started_at
    r.elapsed = elapsed
    r.request_head = request_head
    r.response_head = response_head
    r.http_version = http_version
    r.error_detail = error_detail
    r.new_connection = new_connection
    r.not_html = not_html
    r.__class__ = FetchResult  # type: ignore[assignment]
    return r  # type: ignore[return-value]
