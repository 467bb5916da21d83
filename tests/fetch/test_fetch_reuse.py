"""CurlFetcher's per-request shortcuts: pooled easy handles, the kept socket registrations,
the lazy libcurl timer and lazily parsed headers must not change what a fetch does."""

from __future__ import annotations

import asyncio
import dataclasses
import pickle

import pytest
from _fetch_helpers import Action, raw_server, response, run

from gossamer.fetch import (
    ERROR_BAD_URL,
    ERROR_CANCELLED,
    ERROR_TIMEOUT,
    CurlFetcher,
    FetchRequest,
    FetchResult,
    Resolver,
)
from gossamer.fetch import curl as curl_module
from gossamer.fetch._types import LAZY_HEADERS, make_result, parse_headers, parse_status
from gossamer.fetch.curl import _parse_head

HOST = "www.example.test"
LOOPS = ["uvloop", "asyncio"]


def fetch_seq(
    script: object, reqs: list[str | FetchRequest], loop: str = "uvloop", **kw: object
) -> tuple[list[FetchResult], list[tuple[int, bytes]], int]:
    """Fetch `reqs` one after the other from a scripted server: (results, requests the server
    received with their connection numbers, easy handles the fetcher made)."""

    async def go() -> tuple[list[FetchResult], list[tuple[int, bytes]], int]:
        async with raw_server(script) as srv:  # type: ignore[arg-type]
            resolver = Resolver([f"{HOST}:80:127.0.0.1:{srv.port}"], allow_private=True)
            f = CurlFetcher(resolver=resolver, **kw)  # type: ignore[arg-type]
            try:
                todo = [r if isinstance(r, FetchRequest) else FetchRequest(r) for r in reqs]
                out = [await f.fetch(req) for req in todo]  # one after the other
                return out, list(srv.requests), len(f._all)
            finally:
                await f.aclose()

    return run(go(), loop)


@pytest.mark.parametrize("loop", LOOPS)
def test_a_reused_handle_does_not_keep_the_previous_request_headers(loop: str) -> None:
    url = f"http://{HOST}/p"
    reqs: list[str | FetchRequest] = [
        FetchRequest(url, (("X-Custom", "1"), ("Accept", "text/*"))),
        url,
        FetchRequest(url, (("If-None-Match", '"abc"'),)),
        FetchRequest(url, (("If-None-Match", '"abc"'),)),
        url,
    ]
    results, requests, handles = fetch_seq(lambda _: [response(200, b"ok")], reqs, loop)
    assert handles == 1  # one after the other: the same easy handle every time
    assert [r.status for r in results] == [200] * 5
    plain = requests[1][1]
    assert b"X-Custom" not in plain and b"If-None-Match" not in plain
    assert b"Accept: text/html" in plain
    assert requests[4][1] == plain
    assert b"X-Custom: 1\r\n" in requests[0][1] and b"Accept: text/*\r\n" in requests[0][1]
    assert b'If-None-Match: "abc"\r\n' in requests[2][1] and requests[3][1] == requests[2][1]
    for r, (_, sent) in zip(results, requests, strict=True):
        assert r.request_head == sent
    assert len({conn for conn, _ in requests}) == 1  # and one kept-alive connection


@pytest.mark.parametrize("loop", LOOPS)
def test_a_handle_works_normally_after_a_timeout_or_a_truncation(loop: str) -> None:
    big = bytes(range(256)) * 400  # 100 KB

    def script(head: bytes) -> list[Action]:
        target = head.split(b" ", 2)[1]
        if target == b"/silent":  # no first byte
            return [5.0]
        if target == b"/stall":  # a head and some body, then nothing
            return [b"HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n" + b"s" * 10, 5.0]
        if target == b"/big":
            return [response(200, big)]
        return [response(200, b"fine " + target, [("X-Target", target.decode())])]

    reqs: list[str | FetchRequest] = [
        f"http://{HOST}/{name}"
        for name in ("a", "silent", "b", "stall", "c", "big", "d", "big", "e")
    ]
    results, requests, handles = fetch_seq(
        script, reqs, loop, first_byte_timeout=0.4, stall_timeout=0.4, max_body=50_000
    )
    assert handles == 1
    by_name = dict(zip(["a", "silent", "b", "stall", "c", "big", "d", "big2", "e"], results,
                       strict=True))  # fmt: skip
    assert by_name["silent"].error == ERROR_TIMEOUT and by_name["silent"].status is None
    assert by_name["stall"].error == ERROR_TIMEOUT and by_name["stall"].body == b"s" * 10
    for key in ("big", "big2"):
        r = by_name[key]
        assert r.error is None and r.truncated and r.body == big[:50_000]
    for name in "abcde":
        r = by_name[name]
        assert r.error is None and r.status == 200 and not r.truncated
        assert r.body == f"fine /{name}".encode() and r.header("x-target") == f"/{name}"
        assert r.elapsed < 0.4
        assert r.response_head.startswith(b"HTTP/1.1 200 OK\r\n")
    assert len(requests) == 9


@pytest.mark.parametrize("loop", LOOPS)
def test_new_sockets_on_reused_fd_numbers_are_watched(loop: str) -> None:
    """Every response closes its connection: each fetch opens a socket that usually gets the
    fd number of the one just closed (kept in the epoll set while idle)."""

    def script(_: bytes) -> list[Action]:
        return [response(200, b"x" * 100, [("Connection", "close")]), "close"]

    reqs: list[str | FetchRequest] = [f"http://{HOST}/{i}" for i in range(30)]
    results, requests, _ = fetch_seq(script, reqs, loop)
    assert all(r.error is None and r.body == b"x" * 100 for r in results)
    assert all(r.new_connection for r in results)
    assert len({conn for conn, _ in requests}) == 30


@pytest.mark.parametrize("loop", LOOPS)
def test_without_epoll_sockets_are_loop_readers(loop: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(curl_module, "_HAVE_EPOLL", False)
    seen: list[int] = []

    def script(head: bytes) -> list[Action]:
        seen.append(1)
        if head.startswith(b"GET /close"):
            # said, not only done: a server that closes silently races the next request on
            # that connection, and the fetcher no longer lets libcurl resend a request by
            # itself (test_fetch_wire: ..._reset_on_a_kept_alive_connection_is_not_sent_again)
            return [response(200, b"bye", [("Connection", "close")]), "close"]
        return [response(200, b"y" * 3000)]

    async def go() -> tuple[list[FetchResult], CurlFetcher]:
        async with raw_server(script) as srv:
            resolver = Resolver([f"{HOST}:80:127.0.0.1:{srv.port}"], allow_private=True)
            f = CurlFetcher(resolver=resolver)
            try:
                first = [await f.fetch(FetchRequest(f"http://{HOST}/close/{i}")) for i in range(3)]
                sem = asyncio.Semaphore(4)

                async def one(i: int) -> FetchResult:
                    async with sem:
                        return await f.fetch(FetchRequest(f"http://{HOST}/{i}"))

                rest = await asyncio.gather(*(one(i) for i in range(40)))
                assert f._epoll is None
                return first + list(rest), f
            finally:
                await f.aclose()

    results, f = run(go(), loop)
    assert [r.body for r in results[:3]] == [b"bye"] * 3
    assert all(r.error is None and r.body == b"y" * 3000 for r in results[3:])
    assert f._fds == {}


@pytest.mark.parametrize("loop", LOOPS)
def test_libcurl_timeouts_fire_while_other_transfers_move_the_timer(loop: str) -> None:
    """The total time-out is libcurl's timer: a trickling transfer must end on time while
    quick transfers keep asking for later deadlines (which leave the loop timer alone)."""

    async def go() -> tuple[FetchResult, list[FetchResult]]:
        def script(head: bytes) -> list[Action]:
            if head.startswith(b"GET /slow"):
                chunks: list[Action] = [b"HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\n"]
                for _ in range(40):
                    chunks += [b"z" * 10, 0.1]
                return chunks
            return [0.05, response(200, b"quick")]

        async with raw_server(script) as srv:
            resolver = Resolver([f"{HOST}:80:127.0.0.1:{srv.port}"], allow_private=True)
            f = CurlFetcher(resolver=resolver, total_timeout=1.0, stall_timeout=5)
            try:
                slow = asyncio.ensure_future(f.fetch(FetchRequest(f"http://{HOST}/slow")))
                quick = []
                for i in range(12):
                    quick += await asyncio.gather(
                        *(f.fetch(FetchRequest(f"http://{HOST}/q{i}/{j}")) for j in range(3))
                    )
                return await slow, quick
            finally:
                await f.aclose()

    slow, quick = run(go(), loop)
    assert slow.error == ERROR_TIMEOUT and "timed out" in (slow.error_detail or "")
    assert 1.0 <= slow.elapsed < 1.8 and slow.body.startswith(b"z" * 10)
    assert all(r.error is None and r.body == b"quick" for r in quick)


@pytest.mark.parametrize("loop", LOOPS)
def test_start_is_fetch_begun_at_once(loop: str) -> None:
    """start() returns a plain future (a task only for a host still to be looked up in DNS)
    with fetch()'s result; failures before a transfer are done futures; a cancelled future's
    transfer ends on the next loop iteration — the engine cancels a host's look-ahead request
    and then hands the host's IP slot on — and the fetcher goes on."""

    def script(head: bytes) -> list[Action]:
        target = head.split(b" ", 2)[1]
        if target == b"/hang":
            return [5.0]
        return [response(200, b"ok " + target, [("X-Target", target.decode())])]

    async def dns(host: str) -> list[str]:
        return ["127.0.0.1"]

    async def go() -> None:
        async with raw_server(script) as srv:
            resolver = Resolver([f"{HOST}:80:127.0.0.1:{srv.port}"], allow_private=True,
                                getaddrinfo=dns)  # fmt: skip
            f = CurlFetcher(resolver=resolver, first_byte_timeout=2.0, stall_timeout=2.0)
            try:
                fut = f.start(FetchRequest(f"http://{HOST}/a"))
                assert type(fut) is asyncio.Future and not fut.done()
                started, fetched = await fut, await f.fetch(FetchRequest(f"http://{HOST}/a"))
                assert started.error is None and started.body == b"ok /a" == fetched.body
                assert started.header("x-target") == "/a" and started.headers == fetched.headers
                assert started.request_head == fetched.request_head == srv.requests[0][1]

                bad = f.start(FetchRequest("ftp://x/"))
                assert bad.done() and bad.result().error == ERROR_BAD_URL
                invalid = f.start(FetchRequest(f"http://{HOST}/", (("Host", "x"),)))
                assert invalid.done() and isinstance(invalid.exception(), ValueError)

                looked_up = f.start(FetchRequest(f"http://dns.example.test:{srv.port}/b"))
                assert isinstance(looked_up, asyncio.Task)
                assert (await looked_up).body == b"ok /b"

                hang = f.start(FetchRequest(f"http://{HOST}/hang"))
                await asyncio.sleep(0.1)
                assert f.statistics().in_flight == 1
                hang.cancel()
                await asyncio.sleep(0)  # the future's done-callback runs: not the next sweep
                stats = f.statistics()
                assert stats.in_flight == 0 and stats.errors[ERROR_CANCELLED] == 1
                assert (await f.start(FetchRequest(f"http://{HOST}/c"))).body == b"ok /c"
            finally:
                await f.aclose()
            closed = f.start(FetchRequest(f"http://{HOST}/a"))
            assert closed.done() and closed.result().error == ERROR_CANCELLED

    run(go(), loop)


# ---------------------------------------------------------------------------- lazy headers
HEAD = (
    b"HTTP/1.1 301 Moved\r\nLocation: /x\r\ncontent-type: text/html\r\nSet-Cookie: a=1\r\n"
    b"Set-Cookie: b=2\r\nRetry-After: 3\r\n\r\n"
)


def _result(headers: tuple[tuple[str, str], ...], head: bytes = HEAD) -> FetchResult:
    return make_result("http://a/", 301, headers, b"", 0, False, None, "1.2.3.4", 80, 1.0, 0.1,
                       b"GET / HTTP/1.1\r\n\r\n", head, "1.1", None, True)  # fmt: skip


def test_lazy_headers_read_like_parsed_ones() -> None:
    lazy, eager = _result(LAZY_HEADERS), _result(_parse_head(HEAD)[2])
    assert lazy.header("LOCATION") == "/x" and lazy.header("Content-Type") == "text/html"
    assert lazy.header("set-cookie") == "a=1" and lazy.header("missing") is None
    assert lazy.header_all("set-cookie") == ["a=1", "b=2"]
    assert lazy.headers == eager.headers == (
        ("Location", "/x"), ("content-type", "text/html"), ("Set-Cookie", "a=1"),
        ("Set-Cookie", "b=2"), ("Retry-After", "3"),
    )  # fmt: skip
    assert lazy == eager and hash(lazy) == hash(eager) and repr(lazy) == repr(eager)
    assert isinstance(lazy, FetchResult) and type(lazy) is FetchResult
    assert pickle.loads(pickle.dumps(_result(LAZY_HEADERS))) == eager
    assert dataclasses.replace(_result(LAZY_HEADERS), url="http://b/").headers == eager.headers
    assert dataclasses.asdict(_result(LAZY_HEADERS))["headers"] == eager.headers
    with pytest.raises(dataclasses.FrozenInstanceError):
        lazy.headers = ()  # type: ignore[misc]
    assert _result(LAZY_HEADERS, b"").headers == ()


@pytest.mark.parametrize(
    "head",
    [
        HEAD,
        HEAD.replace(b"Set-Cookie: b=2", b"Set-Cookie: b=2;\r\n\tpath=/"),  # obsolete folding
        b"HTTP/1.1 200 OK\r\nNoColon\r\nA : b \r\na: c\r\n\r\n",
        b"HTTP/1.1 200 OK\r\n X-Lead: 1\r\nA: b\r\n\r\n",  # a first line that folds
        b"HTTP/1.1 200 OK",
        b"",
    ],
)
def test_lookups_before_the_headers_are_read_agree_with_them(head: bytes) -> None:
    """header() / header_all() on LAZY_HEADERS answer from a name map kept in the headers
    slot: the same answers as the parsed headers, which can still be read (and compared,
    pickled, replaced) afterwards."""
    names = ["location", "Content-Type", "set-cookie", "x-lead", "a", "retry-after", "missing",
             "", "nocolon"]  # fmt: skip
    eager = _result(_parse_head(head)[2], head)
    for first in names:  # the first lookup builds the map: by header() or by header_all()
        for by_all in (False, True):
            lazy = _result(LAZY_HEADERS, head)
            assert (lazy.header_all(first) if by_all else lazy.header(first)) == (
                eager.header_all(first) if by_all else eager.header(first)
            )
            for name in names:
                assert lazy.header(name) == eager.header(name)
                assert lazy.header_all(name) == eager.header_all(name)
            assert lazy == eager and pickle.loads(pickle.dumps(lazy)) == eager
    lazy = _result(LAZY_HEADERS, head)
    lazy.header("location")
    assert dataclasses.replace(lazy, url="http://b/").headers == eager.headers
    lazy = _result(LAZY_HEADERS, head)
    lazy.header("location")
    assert lazy.headers == eager.headers and lazy.header("a") == eager.header("a")


def test_header_lookup_on_given_headers_is_unchanged() -> None:
    r = _result((("ETag", '"1"'), ("Vary", "a"), ("vary", "b")))
    assert r.header("etag") == '"1"' and r.header("VARY") == "a" and r.header("x") is None
    assert type(r.headers) is tuple


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        (b"HTTP/1.1 200 OK\r\n", (200, "1.1")),
        (b"HTTP/1.1 200\r\n", (200, "1.1")),
        (b"HTTP/1.0 404 Not Found\r\n", (404, "1.0")),
        (b"HTTP/1.1 2000 OK\r\n", (2000, "1.1")),
        (b"HTTP/1.1  200 OK\r\n", (200, "1.1")),
        (b"HTTP/1.1 20x OK\r\n", (None, "1.1")),
        (b"HTTP/1.1 abc\r\n", (None, "1.1")),
        (b"HTTP/2 204\r\n", (204, "2")),
        (b"HTTP/1.1\r\n", (None, "1.1")),
        (b"HTTP/1.1 200 OK", (200, "1.1")),
        (b"\r\n", (None, "")),
    ],
)
def test_parse_status(line: bytes, expected: tuple[int | None, str]) -> None:
    assert parse_status(line + b"A: b\r\n\r\n") == expected


def test_parse_headers_with_and_without_folding() -> None:
    assert parse_headers(b"HTTP/1.1 200 OK\r\nA:1\r\n B\r\nC : 2 \r\n\r\n") == (
        ("A", "1 B"), ("C", "2"),
    )  # fmt: skip
    assert parse_headers(b"HTTP/1.1 200 OK\r\nA:1\r\nnocolon\r\nC : 2 \r\n\r\n") == (
        ("A", "1"), ("C", "2"),
    )  # fmt: skip
