"""CurlFetcher against a scripted raw server: exact bytes on the wire and odd responses."""

from __future__ import annotations

import asyncio
import contextlib
import gzip
import socket
import zlib

import pytest
from _fetch_helpers import Action, raw_server, response, run

from gossamer.fetch import (
    ERROR_BLOCKED_ADDRESS,
    ERROR_CONNECT,
    ERROR_CONNECTION_LOST,
    ERROR_DECODE,
    ERROR_EMPTY_REPLY,
    ERROR_PARTIAL,
    ERROR_PROTOCOL,
    ERROR_TIMEOUT,
    ERROR_TOO_SLOW,
    CurlFetcher,
    FetchRequest,
    FetchResult,
    Resolver,
)

HOST = "www.example.test"


def fetch_with(
    script: object, urls: list[str | FetchRequest], **kw: object
) -> tuple[list[FetchResult], list[tuple[int, bytes]]]:
    """Serve `script` on 127.0.0.1, map HOST there, fetch `urls` one after the other."""

    async def go() -> tuple[list[FetchResult], list[tuple[int, bytes]]]:
        async with raw_server(script) as srv:  # type: ignore[arg-type]
            resolver = Resolver([f"{HOST}:80:127.0.0.1:{srv.port}"], allow_private=True)
            f = CurlFetcher(resolver=resolver, **kw)  # type: ignore[arg-type]
            try:
                reqs = [u if isinstance(u, FetchRequest) else FetchRequest(u) for u in urls]
                out = [await f.fetch(req) for req in reqs]  # one after the other
                return out, list(srv.requests)
            finally:
                await f.aclose()

    return run(go())


def test_request_and_response_heads_are_exact() -> None:
    body = b"<html>hi</html>"
    reply = response(200, body, [("Content-Type", "text/html"), ("X-Multi", "a"), ("x-multi", "b")])
    results, requests = fetch_with(
        lambda _: [reply],
        [
            f"http://{HOST}/a/b.html?x=1&y=%20z#frag",
            FetchRequest(f"http://{HOST}/c", (("If-None-Match", '"abc"'), ("Accept", "text/*"))),
            f"http://{HOST}",
        ],
        user_agent="ua/1",
    )
    for r, (_, sent) in zip(results, requests, strict=True):
        assert r.request_head == sent
        assert r.response_head == reply[: reply.index(b"\r\n\r\n") + 4]
        assert r.body == body and r.status == 200
    assert requests[0][1] == (
        b"GET /a/b.html?x=1&y=%20z HTTP/1.1\r\nHost: www.example.test\r\nUser-Agent: ua/1\r\n"
        b"Accept: text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8\r\n"
        b"Accept-Encoding: gzip, deflate, br\r\n\r\n"
    )
    assert requests[1][1] == (
        b"GET /c HTTP/1.1\r\nHost: www.example.test\r\nUser-Agent: ua/1\r\n"
        b'Accept-Encoding: gzip, deflate, br\r\nIf-None-Match: "abc"\r\nAccept: text/*\r\n\r\n'
    )
    assert requests[2][1].startswith(b"GET / HTTP/1.1\r\n")
    r = results[0]
    assert r.header_all("X-MULTI") == ["a", "b"] and r.header("x-multi") == "a"
    assert r.headers[:2] == (("Content-Type", "text/html"), ("X-Multi", "a"))
    assert len({conn for conn, _ in requests}) == 1  # kept alive


def test_interim_1xx_and_trailers_are_not_in_the_final_head() -> None:
    early = b"HTTP/1.1 103 Early Hints\r\nLink: </s.css>; rel=preload\r\n\r\n"
    chunked = (
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTrailer: X-Sum\r\n\r\n"
        b"5\r\nhello\r\n6\r\n world\r\n0\r\nX-Sum: 42\r\n\r\n"
    )
    [r], _ = fetch_with(lambda _: [early, chunked], [f"http://{HOST}/"])
    assert r.status == 200 and r.body == b"hello world" and r.error is None
    assert r.response_head == chunked[: chunked.index(b"\r\n\r\n") + 4]
    assert r.header("Link") is None and r.header("Transfer-Encoding") == "chunked"


def test_folded_header_lines_are_joined() -> None:
    raw = b"HTTP/1.1 200 OK\r\nX-Long: one\r\n two\r\nContent-Length: 2\r\n\r\nok"
    [r], _ = fetch_with(lambda _: [raw], [f"http://{HOST}/"])
    assert r.header("X-Long") == "one two" and r.body == b"ok"


def test_brotli_is_decoded() -> None:
    brotli = pytest.importorskip("brotli")
    text = b"<p>brotli</p>" * 500
    reply = response(200, brotli.compress(text), [("Content-Encoding", "br")])
    [r], _ = fetch_with(lambda _: [reply], [f"http://{HOST}/"])
    assert r.error is None and r.body == text and r.raw_body_len < len(text)


@pytest.mark.parametrize("encoding", ["gzip", "deflate"])
def test_truncated_compressed_body_stops_at_the_cap(encoding: str) -> None:
    text = bytes(range(256)) * 4000  # 1 MB, compresses well
    data = gzip.compress(text) if encoding == "gzip" else zlib.compress(text)
    reply = response(200, data, [("Content-Encoding", encoding)])
    [r], _ = fetch_with(lambda _: [reply], [f"http://{HOST}/"], max_body=100_000)
    assert r.error is None and r.truncated and r.body == text[:100_000]


def test_corrupt_deflate_is_a_decode_error() -> None:
    reply = response(200, b"\x78\x9c" + b"\xff" * 200, [("Content-Encoding", "deflate")])
    [r], _ = fetch_with(lambda _: [reply], [f"http://{HOST}/"])
    assert r.error == ERROR_DECODE and r.status == 200


def test_closed_in_the_middle_of_the_body_is_partial() -> None:
    head = b"HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n"
    [r], _ = fetch_with(lambda _: [head + b"x" * 300, "close"], [f"http://{HOST}/"])
    assert r.error == ERROR_PARTIAL and r.status == 200 and r.body == b"x" * 300


def test_closed_without_an_answer_is_an_empty_reply() -> None:
    [r], _ = fetch_with(lambda _: ["close"], [f"http://{HOST}/"])
    assert r.error == ERROR_EMPTY_REPLY and r.status is None


def test_garbage_is_a_protocol_error() -> None:
    [r], _ = fetch_with(lambda _: [b"SSH-2.0-OpenSSH_9.2\r\n\r\n", "close"], [f"http://{HOST}/"])
    assert r.error == ERROR_PROTOCOL


def test_stall_after_the_first_bytes_times_out() -> None:
    head = b"HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n"
    [r], _ = fetch_with(lambda _: [head + b"y" * 100, 5.0], [f"http://{HOST}/"], stall_timeout=0.5)
    assert r.error == ERROR_TIMEOUT and "stalled" in (r.error_detail or "")
    assert r.status == 200 and r.body == b"y" * 100 and 0.5 <= r.elapsed < 2.5


def test_server_closing_an_idle_connection_is_survived() -> None:
    """The server closes a kept-alive connection (without saying so) once it is idle. libcurl
    checks an idle connection before reusing it only after 1 s of idleness, so the next
    fetch, sooner, goes out on the dead connection: it ends as a lost connection (libcurl's
    own resend refused, test_a_request_reset_on_a_kept_alive_connection_is_not_sent_again),
    and sent again it goes over a new connection. The server sees each request once."""

    def script(_: bytes) -> list[Action]:
        return [response(200, b"ok"), "close"]  # no Connection: close header, then closed

    async def go() -> tuple[list[FetchResult], list[tuple[int, bytes]]]:
        async with raw_server(script) as srv:
            resolver = Resolver([f"{HOST}:80:127.0.0.1:{srv.port}"], allow_private=True)
            f = CurlFetcher(resolver=resolver)
            try:
                out = [await f.fetch(FetchRequest(f"http://{HOST}/1"))]
                await srv.wait_closed_connections(1)
                out.append(await f.fetch(FetchRequest(f"http://{HOST}/2")))
                if out[-1].error == ERROR_CONNECTION_LOST:
                    out.append(await f.fetch(FetchRequest(f"http://{HOST}/2")))
                return out, list(srv.requests)
            finally:
                await f.aclose()

    results, requests = run(go())
    assert results[0].status == 200 and results[-1].status == 200
    assert all(r.error == ERROR_CONNECTION_LOST for r in results[1:-1])
    assert results[-1].new_connection
    assert [head.split(b" ")[1] for _, head in requests] == [b"/1", b"/2"]
    assert len({conn for conn, _ in requests}) == 2


def test_connection_refused() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # bound, not listening: connections are refused

        async def go() -> FetchResult:
            f = CurlFetcher(resolver=Resolver([f"{HOST}:80:127.0.0.1:{port}"], allow_private=True))
            try:
                return await f.fetch(FetchRequest(f"http://{HOST}/"))
            finally:
                await f.aclose()

        r = run(go())
    assert r.error == ERROR_CONNECT and (r.ip, r.port) == ("127.0.0.1", port)


def test_url_port_and_real_dns_for_localhost() -> None:
    async def go() -> tuple[FetchResult, FetchResult, list[tuple[int, bytes]]]:
        async with raw_server(lambda _: [response(200, b"local")]) as srv:
            url = f"http://localhost:{srv.port}/x"
            blocked = CurlFetcher()
            allowed = CurlFetcher(allow_private=True)
            try:
                return (
                    await blocked.fetch(FetchRequest(url)),
                    await allowed.fetch(FetchRequest(url)),
                    srv.requests,
                )
            finally:
                await blocked.aclose()
                await allowed.aclose()

    blocked, allowed, requests = run(go())
    assert blocked.error == ERROR_BLOCKED_ADDRESS and not requests[1:]
    assert allowed.error is None and allowed.body == b"local"
    assert allowed.ip in ("127.0.0.1", "::1")
    assert f"\r\nHost: localhost:{allowed.port}\r\n".encode() in requests[0][1]


def test_invalid_extra_header_is_refused() -> None:
    async def go() -> None:
        f = CurlFetcher(resolver=Resolver([f"{HOST}:127.0.0.1"], allow_private=True))
        try:
            for bad in (("Host", "x"), ("X-A", "a\r\nInjected: 1"), ("Bad Name", "v"), ("X", "")):
                with pytest.raises(ValueError):
                    await f.fetch(FetchRequest(f"http://{HOST}/", (bad,)))
        finally:
            await f.aclose()

    run(go())


def test_bad_urls_are_errors_not_exceptions() -> None:
    async def go() -> list[FetchResult]:
        f = CurlFetcher()
        try:
            return [
                await f.fetch(FetchRequest(u))
                for u in (
                    "ftp://x/",
                    "mailto:a@b",
                    "http://user@host/",
                    "http:///x",
                    "http://h:99999/",
                )
            ]
        finally:
            await f.aclose()

    assert {r.error for r in run(go())} == {"fetch/error/bad-url"}


def test_many_fetches_reuse_few_connections() -> None:
    async def go() -> tuple[list[FetchResult], int, int]:
        async with raw_server(lambda _: [response(200, b"x" * 2000)]) as srv:
            f = CurlFetcher(
                resolver=Resolver([f"{HOST}:80:127.0.0.1:{srv.port}"], allow_private=True)
            )
            try:
                sem = asyncio.Semaphore(4)

                async def one(i: int) -> FetchResult:
                    async with sem:
                        return await f.fetch(FetchRequest(f"http://{HOST}/{i}"))

                rs = await asyncio.gather(*(one(i) for i in range(200)))
                return list(rs), srv.connections, f.statistics().connections_opened
            finally:
                await f.aclose()

    results, server_conns, opened = run(go())
    assert all(r.status == 200 and len(r.body) == 2000 for r in results)
    assert server_conns == opened <= 8  # four at a time over kept-alive connections


def test_connect_timeout() -> None:
    """A listener whose accept queue is full drops SYNs: the connect itself hangs."""
    with socket.socket() as srv:
        srv.bind(("127.0.0.1", 0))
        srv.listen(0)
        port = srv.getsockname()[1]
        fillers = []
        try:
            for _ in range(3):
                s = socket.socket()
                s.setblocking(False)
                with contextlib.suppress(BlockingIOError):
                    s.connect(("127.0.0.1", port))
                fillers.append(s)

            async def go() -> FetchResult:
                rules = [f"{HOST}:80:127.0.0.1:{port}"]
                f = CurlFetcher(
                    resolver=Resolver(rules, allow_private=True),
                    connect_timeout=0.3,
                    first_byte_timeout=10,
                )
                try:
                    return await f.fetch(FetchRequest(f"http://{HOST}/"))
                finally:
                    await f.aclose()

            r = run(go())
        finally:
            for s in fillers:
                s.close()
    assert r.error == ERROR_TIMEOUT and "Connection timed out" in (r.error_detail or "")
    assert 0.3 <= r.elapsed < 2.3


def test_a_request_reset_on_a_kept_alive_connection_is_not_sent_again() -> None:
    """A kept-alive connection reset under a request: libcurl would send the request again at
    once on a fresh connection (a second request to the host with no gap, which the crawler
    neither sees nor spaces by the host's delay). The fetcher refuses that retry: the fetch
    is a lost connection, the server saw the request once, and the next fetch goes
    normally (on a new connection)."""
    answers: list[list[Action]] = [[response(200, b"one")], ["reset"], [response(200, b"three")]]

    def script(_: bytes) -> list[Action]:
        return answers.pop(0) if answers else [response(200, b"again")]

    results, requests = fetch_with(
        script, [f"http://{HOST}/1", f"http://{HOST}/2", f"http://{HOST}/3"]
    )
    assert [r.status for r in results] == [200, None, 200]
    assert results[1].error == ERROR_CONNECTION_LOST
    assert "resend refused" in (results[1].error_detail or "")
    assert [head.split(b" ")[1] for _, head in requests] == [b"/1", b"/2", b"/3"]
    assert results[2].body == b"three"


def _trickle(rate: int, seconds: float, size: int = 100_000) -> list[Action]:
    """A 200 whose `size`-byte body comes at about `rate` bytes/s (a piece every 0.1 s)."""
    piece = max(1, rate // 10)
    actions: list[Action] = [f"HTTP/1.1 200 OK\r\nContent-Length: {size}\r\n\r\n".encode()]
    for _ in range(round(seconds * 10)):
        actions += [0.1, b"t" * piece]
    return actions


def test_a_trickle_under_the_low_speed_limit_is_cut_as_too_slow() -> None:
    """10 bytes/s against a limit of 100 bytes/s for 1 s: cut after about a second (libcurl
    samples the rate once a second) as too-slow, not a time-out, with the prefix kept."""
    [r], _ = fetch_with(
        lambda _: _trickle(10, 20.0),
        [f"http://{HOST}/"],
        low_speed_limit=100,
        low_speed_time=1,
        total_timeout=15.0,
    )
    assert r.error == ERROR_TOO_SLOW and r.status == 200, (r.error, r.error_detail)
    assert "too slow" in (r.error_detail or "")
    assert 1.0 <= r.elapsed < 5.0 and r.body == b"t" * len(r.body)


def test_a_slow_but_steady_server_is_not_cut() -> None:
    """1,000 bytes/s for 2.5 s against a limit of 100 bytes/s for 1 s: read whole."""
    body_size = 25 * 100
    [r], _ = fetch_with(
        lambda _: _trickle(1000, 2.5, body_size),
        [f"http://{HOST}/"],
        low_speed_limit=100,
        low_speed_time=1,
    )
    assert r.error is None and r.status == 200 and len(r.body) == body_size


def test_without_the_low_speed_limit_a_trickle_runs_into_the_total_timeout() -> None:
    [r], _ = fetch_with(
        lambda _: _trickle(10, 20.0), [f"http://{HOST}/"], low_speed_limit=0, total_timeout=2.5
    )
    assert r.error == ERROR_TIMEOUT and r.status == 200 and r.elapsed >= 2.5


def test_no_response_within_low_speed_time_is_a_timeout_not_too_slow() -> None:
    """libcurl measures the rate from the request on: a server that sends nothing is cut
    after low_speed_time too, but as the first-byte time-out it is."""
    [r], _ = fetch_with(
        lambda _: [20.0], [f"http://{HOST}/"], low_speed_limit=100, low_speed_time=1
    )
    assert r.error == ERROR_TIMEOUT and r.status is None and r.elapsed < 10.0


def test_low_speed_settings_are_checked() -> None:
    with pytest.raises(ValueError, match="low_speed"):
        CurlFetcher(low_speed_limit=-1)
    with pytest.raises(ValueError, match="low_speed"):
        CurlFetcher(low_speed_time=0)
