"""CurlFetcher against the simulated web: real server, real sockets, loopback only.

One web serves most tests (module fixture); each test picks the pages whose realism flags it
needs and checks what the fetcher returns against `respond()` and the server's request log.
"""

from __future__ import annotations

import asyncio
import gzip
import time
import tracemalloc
from collections.abc import Iterator
from pathlib import Path

import pytest
from _fetch_helpers import find_host, find_page, run

from gossamer.fetch import (
    ERROR_BLOCKED_ADDRESS,
    ERROR_CANCELLED,
    ERROR_DECODE,
    ERROR_RESET,
    ERROR_TIMEOUT,
    ERROR_TOO_LARGE,
    CurlFetcher,
    FetchRequest,
    FetchResult,
    Resolver,
)
from gossamer.testweb import HostFlag, Kind, PageFlag, RunningWeb, WebSpec, serve_in_thread
from gossamer.testweb._content import respond

HUGE = 30 * 1024 * 1024
TRANSPORT = (
    PageFlag.HANG
    | PageFlag.RESET_ALWAYS
    | PageFlag.RESET_ONCE
    | PageFlag.SLOW_FIRST_BYTE
    | PageFlag.TRICKLE
    | PageFlag.BROKEN_GZIP
    | PageFlag.ERROR_500
    | PageFlag.TRANSIENT_503
)
SPEC = WebSpec(
    seed=9,
    hosts=40,
    pages_mean=20,
    profile="clean",
    overrides=(
        ("gzip_host", 0.5),
        ("conditional_host", 0.5),
        ("dead_host", 0.1),
        ("broken_gzip", 0.05),
        ("reset_always", 0.05),
        ("hang_page", 0.05),
        ("slow_first_byte", 0.05),
        ("trickle", 0.05),
        ("error_500", 0.05),
        ("transient_503", 0.1),
        ("huge_pages", 2),
        ("huge_page_bytes", HUGE),
        ("slow_first_byte_s", 1.5),
        ("trickle_s", 2.0),
    ),
)


@pytest.fixture(scope="module")
def web(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningWeb]:
    log = tmp_path_factory.mktemp("web") / "web.log"
    with serve_in_thread(SPEC, log_path=log) as w:
        yield w


def fetcher(web: RunningWeb, **kw: object) -> CurlFetcher:
    resolver = Resolver(web.connect_to_lines(), allow_private=True)
    return CurlFetcher(resolver=resolver, **kw)  # type: ignore[arg-type]


def fetch_all(
    web: RunningWeb, urls: list[str], loop: str = "uvloop", **kw: object
) -> list[FetchResult]:
    async def go() -> list[FetchResult]:
        f = fetcher(web, **kw)
        try:
            return list(await asyncio.gather(*(f.fetch(FetchRequest(u)) for u in urls)))
        finally:
            await f.aclose()

    return run(go(), loop)


def fetch_one(web: RunningWeb, url: str, **kw: object) -> FetchResult:
    return fetch_all(web, [url], **kw)[0]


def expected(web: RunningWeb, h: int, target: str, **kw: str) -> bytes:
    """The body the server sends for `target` (uncompressed unless accept_encoding given)."""
    return respond(web.model, web.model.resolve(h, target), **kw).body  # type: ignore[arg-type]


def log_for(web: RunningWeb, host: str, target: str | None = None) -> list[list[str]]:
    """Server log lines (fields: start end conn ip host method target status bytes outcome ua
    ims inm ae) of `host` (and `target`)."""
    web.flush_log()
    assert web.log_path is not None
    lines = Path(web.log_path).read_text().splitlines()[1:]
    rows = [line.split("\t") for line in lines]
    return [r for r in rows if r[4] == host and (target is None or r[6] == target)]


def plain_page(web: RunningWeb, *, gzip_host: bool = False, conditional: bool = False) -> int:
    m = web.model
    absent = HostFlag.DEAD | (0 if gzip_host else HostFlag.GZIP)
    absent |= 0 if conditional else HostFlag.CONDITIONAL
    flags = (HostFlag.GZIP if gzip_host else 0) | (HostFlag.CONDITIONAL if conditional else 0)
    return find_host(m, flags, absent=absent, min_pages=6)


def clean_targets(web: RunningWeb, h: int, n: int) -> list[str]:
    m = web.model
    out = []
    for i in range(m.hosts[h].pages):
        if not m.plan(h, i).flags & TRANSPORT:
            out.append(m.page_target(h, i))
        if len(out) == n:
            return out
    raise LookupError("not enough clean pages")


# ---------------------------------------------------------------------------- plain answers
@pytest.mark.parametrize("loop", ["uvloop", "asyncio"])
def test_page_bytes_equal_respond(web: RunningWeb, loop: str) -> None:
    h = plain_page(web)
    name = web.model.hosts[h].name
    target = clean_targets(web, h, 2)[1]
    r = fetch_all(web, [f"http://{name}{target}"], loop)[0]
    assert r.error is None and r.status == 200 and not r.truncated
    assert r.body == expected(web, h, target)
    assert r.raw_body_len == len(r.body)
    assert r.header("content-type") == r.header("Content-Type") is not None
    assert int(r.header("Content-Length") or -1) == len(r.body)
    assert r.http_version == "1.1"
    assert (r.ip, r.port) == web.address_of(name)
    assert r.response_head.startswith(b"HTTP/1.1 200 OK\r\n")
    assert r.response_head.endswith(b"\r\n\r\n")
    assert r.request_head.startswith(f"GET {target} HTTP/1.1\r\nHost: {name}\r\n".encode())
    assert r.elapsed >= 0 and abs(r.started_at - time.time()) < 60
    [row] = log_for(web, name, target)[-1:]
    assert row[5] == "GET" and row[7] == "200" and row[9] == "ok"
    assert row[10] == "gossamer/0.1" and row[13] == "gzip, deflate, br"


def test_user_agent_setting_reaches_the_server(web: RunningWeb) -> None:
    h = plain_page(web)
    name = web.model.hosts[h].name
    target = clean_targets(web, h, 3)[2]
    r = fetch_one(web, f"http://{name}{target}", user_agent="gossamer-test/9 (+x)")
    assert r.status == 200
    assert b"\r\nUser-Agent: gossamer-test/9 (+x)\r\n" in r.request_head
    assert log_for(web, name, target)[-1][10] == "gossamer-test/9 (+x)"


def test_gzip_decoded(web: RunningWeb) -> None:
    h = plain_page(web, gzip_host=True)
    name = web.model.hosts[h].name
    target = clean_targets(web, h, 1)[0]
    r = fetch_one(web, f"http://{name}{target}")
    assert r.error is None and r.header("Content-Encoding") == "gzip"
    assert r.body == expected(web, h, target)
    wire = expected(web, h, target, accept_encoding="gzip")
    assert r.raw_body_len == len(wire) < len(r.body)
    assert gzip.decompress(wire) == r.body


def test_deflate_decoded(web: RunningWeb) -> None:
    h = plain_page(web, gzip_host=True)
    name = web.model.hosts[h].name
    target = clean_targets(web, h, 2)[1]
    r = fetch_one(web, f"http://{name}{target}", accept_encoding="deflate")
    assert r.error is None and r.header("Content-Encoding") == "deflate"
    assert r.body == expected(web, h, target)
    assert b"\r\nAccept-Encoding: deflate\r\n" in r.request_head


def test_no_accept_encoding_gets_identity(web: RunningWeb) -> None:
    h = plain_page(web, gzip_host=True)
    name = web.model.hosts[h].name
    target = clean_targets(web, h, 3)[2]
    r = fetch_one(web, f"http://{name}{target}", accept_encoding="")
    assert r.error is None and r.header("Content-Encoding") is None
    assert r.body == expected(web, h, target)
    assert b"Accept-Encoding" not in r.request_head
    assert log_for(web, name, target)[-1][13] == "-"


def test_broken_gzip_is_a_decode_error(web: RunningWeb) -> None:
    h, i = find_page(web.model, PageFlag.BROKEN_GZIP, absent=TRANSPORT & ~PageFlag.BROKEN_GZIP)
    r = fetch_one(web, web.url(h, i))
    assert r.error == ERROR_DECODE
    assert r.status == 200 and r.header("Content-Encoding") == "gzip"
    assert r.body == b""  # nothing decodes before the corruption in this stream


def test_reset_is_a_reset_error(web: RunningWeb) -> None:
    h, i = find_page(web.model, PageFlag.RESET_ALWAYS)
    r = fetch_one(web, web.url(h, i))
    assert r.error == ERROR_RESET and r.status is None and r.body == b""
    assert "reset" in (r.error_detail or "")


# ---------------------------------------------------------------------------- time-outs
def test_hang_times_out_within_the_bound(web: RunningWeb) -> None:
    h, i = find_page(web.model, PageFlag.HANG)
    r = fetch_one(web, web.url(h, i), first_byte_timeout=0.5)
    assert r.error == ERROR_TIMEOUT and r.status is None
    assert "first byte" in (r.error_detail or "")
    assert 0.5 <= r.elapsed < 0.5 + 2.0
    name = web.model.hosts[h].name
    target = web.model.page_target(h, i)
    assert [row[9] for row in log_for(web, name, target)][-1:] == ["hang"]


def test_dead_host_times_out(web: RunningWeb) -> None:
    h = find_host(web.model, HostFlag.DEAD)
    r = fetch_one(web, web.url(h, 0), first_byte_timeout=0.4)
    assert r.error == ERROR_TIMEOUT and 0.4 <= r.elapsed < 0.4 + 2.0


def test_slow_first_byte(web: RunningWeb) -> None:
    h, i = find_page(
        web.model, PageFlag.SLOW_FIRST_BYTE, absent=TRANSPORT ^ PageFlag.SLOW_FIRST_BYTE
    )
    url = web.url(h, i)
    slow = fetch_one(web, url, first_byte_timeout=0.5)
    assert slow.error == ERROR_TIMEOUT and slow.elapsed < 1.5  # the page waits 1.5 s
    patient = fetch_one(web, url, first_byte_timeout=5.0)
    assert patient.error is None and patient.status == 200 and patient.elapsed >= 1.4
    assert patient.body == expected(web, h, web.model.page_target(h, i))


def test_trickle_hits_the_total_timeout_not_the_stall_one(web: RunningWeb) -> None:
    h, i = find_page(web.model, PageFlag.TRICKLE, absent=TRANSPORT ^ PageFlag.TRICKLE)
    url = web.url(h, i)
    r = fetch_one(web, url, total_timeout=1.0, stall_timeout=0.8)
    assert r.error == ERROR_TIMEOUT and r.status == 200
    assert "stalled" not in (r.error_detail or "") and 1.0 <= r.elapsed < 3.0
    full = expected(web, h, web.model.page_target(h, i))
    assert 0 < len(r.body) < len(full) and full.startswith(r.body)  # the prefix received
    whole = fetch_one(web, url, total_timeout=10.0)
    assert whole.error is None and whole.body == full and whole.elapsed >= 1.5


# ---------------------------------------------------------------------------- size cap
def _huge_urls(web: RunningWeb) -> list[tuple[int, str]]:
    m = web.model
    return [(h, f"/big/huge-{k}.html") for h, ks in sorted(m.huge_host.items()) for k in ks]


def test_huge_page_truncated_with_bounded_memory(web: RunningWeb) -> None:
    cap = 1024 * 1024
    pages = _huge_urls(web)
    assert len(pages) == 2  # one sent with Content-Length, one chunked
    for h, target in pages:
        name = web.model.hosts[h].name
        tracemalloc.start()
        try:
            r = fetch_one(web, f"http://{name}{target}", max_body=cap)
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        assert r.error is None and r.status == 200 and r.truncated
        assert len(r.body) == cap
        resp = respond(web.model, web.model.resolve(h, target))
        assert r.body == (resp.body + resp.filler * (cap // len(resp.filler) + 1))[:cap]
        assert peak < 4 * cap, f"peak Python allocation {peak} for a {cap} cap"
        assert r.raw_body_len < 8 * cap  # stopped early, not after 30 MB
        rows = log_for(web, name, target)
        assert rows[-1][9] == "aborted", " / ".join(" ".join(r[6:10]) for r in rows)


def test_too_large_as_an_error(web: RunningWeb) -> None:
    for h, target in _huge_urls(web):
        name = web.model.hosts[h].name
        r = fetch_one(web, f"http://{name}{target}", max_body=100_000, too_large="error")
        assert r.error == ERROR_TOO_LARGE and r.body == b"" and not r.truncated


# ---------------------------------------------------------------------------- statuses
def test_error_statuses_with_headers(web: RunningWeb) -> None:
    m = web.model
    h500, i500 = find_page(m, PageFlag.ERROR_500, absent=TRANSPORT ^ PageFlag.ERROR_500)
    h503, i503 = find_page(
        m, PageFlag.TRANSIENT_503 | PageFlag.RETRY_AFTER, absent=TRANSPORT ^ PageFlag.TRANSIENT_503
    )
    h404 = plain_page(web)
    urls = [web.url(h500, i500), web.url(h503, i503), f"http://{m.hosts[h404].name}/missing/3.html"]
    r500, r503, r404 = fetch_all(web, urls)
    assert (r500.status, r500.error) == (500, None) and b"Internal Server Error" in r500.body
    assert (r503.status, r503.error) == (503, None) and r503.header("retry-after") == "1"
    assert (r404.status, r404.error) == (404, None) and r404.body.startswith(b"<html>")
    again = fetch_one(web, web.url(h503, i503))  # transient: fine the second time
    assert again.status == 200


def test_redirect_is_not_followed(web: RunningWeb) -> None:
    m = web.model
    h = plain_page(web)
    name = m.hosts[h].name
    target = f"/go/{(h + 1) % len(m.hosts)}/0/2"
    assert m.resolve(h, target).kind is Kind.REDIRECT
    r = fetch_one(web, f"http://{name}{target}")
    assert r.error is None and r.status in (301, 302, 307, 308)
    assert r.header("Location")
    assert r.header("Location") == respond(m, m.resolve(h, target)).headers[0][1]
    assert len(log_for(web, name, target)) == 1  # exactly one request: not followed
    assert [
        row for row in log_for(web, name) if row[6].startswith("/go/") and row[6] != target
    ] == []


def test_conditional_get_gets_304(web: RunningWeb) -> None:
    h = plain_page(web, conditional=True)
    name = web.model.hosts[h].name
    target = clean_targets(web, h, 1)[0]
    url = f"http://{name}{target}"
    first = fetch_one(web, url)
    etag, lm = first.header("ETag"), first.header("Last-Modified")
    assert first.status == 200 and etag and lm

    async def conditional() -> list[FetchResult]:
        f = fetcher(web)
        try:
            return [
                await f.fetch(FetchRequest(url, (("If-None-Match", etag),))),
                await f.fetch(FetchRequest(url, (("If-Modified-Since", lm),))),
                await f.fetch(FetchRequest(url, (("If-None-Match", '"other"'),))),
            ]
        finally:
            await f.aclose()

    by_etag, by_date, changed = run(conditional())
    assert (by_etag.status, by_etag.body, by_etag.error) == (304, b"", None)
    assert f"\r\nIf-None-Match: {etag}\r\n".encode() in by_etag.request_head
    assert (by_date.status, by_date.body) == (304, b"")
    assert changed.status == 200 and changed.body == first.body
    rows = log_for(web, name, target)[-3:]
    assert [(r[7], r[11], r[12]) for r in rows] == [("304", "-", etag), ("304", lm, "-"),
                                                     ("200", "-", '"other"')]  # fmt: skip


# ---------------------------------------------------------------------------- addresses
def test_private_address_blocked_unless_allowed(web: RunningWeb) -> None:
    h = plain_page(web)
    name = web.model.hosts[h].name
    before = len(log_for(web, name))

    async def go() -> FetchResult:
        f = CurlFetcher(resolver=Resolver(web.connect_to_lines()))  # allow_private=False
        try:
            return await f.fetch(FetchRequest(f"http://{name}/news/page-999.html"))
        finally:
            await f.aclose()

    r = run(go())
    assert r.error == ERROR_BLOCKED_ADDRESS and r.status is None and r.ip is None
    assert len(log_for(web, name)) == before  # never connected


# ---------------------------------------------------------------------------- connections
@pytest.mark.parametrize("loop", ["uvloop", "asyncio"])
def test_keep_alive_reuses_one_connection_per_host(web: RunningWeb, loop: str) -> None:
    h = plain_page(web)
    name = web.model.hosts[h].name
    targets = clean_targets(web, h, 6)

    async def go() -> tuple[list[FetchResult], int]:
        f = fetcher(web)
        try:
            out = [await f.fetch(FetchRequest(f"http://{name}{t}")) for t in targets]
            return out, f.statistics().connections_opened
        finally:
            await f.aclose()

    results, opened = run(go(), loop)
    assert [r.status for r in results] == [200] * len(targets)
    assert [r.new_connection for r in results] == [True] + [False] * (len(targets) - 1)
    assert opened == 1
    rows = log_for(web, name)[-len(targets) :]
    assert [r[6] for r in rows] == targets
    assert len({r[2] for r in rows}) == 1, "one connection id for the whole batch"


@pytest.mark.parametrize("loop", ["uvloop", "asyncio"])
def test_200_concurrent_fetches_across_hosts(web: RunningWeb, loop: str) -> None:
    m = web.model
    pages: list[tuple[int, str]] = []
    for host in m.hosts:
        if not host.flags & (HostFlag.DEAD | HostFlag.GZIP):
            targets = [m.page_target(host.id, i) for i in range(host.pages)]
            pages += [(host.id, t) for i, t in enumerate(targets)
                      if not m.plan(host.id, i).flags & TRANSPORT]  # fmt: skip
    pages = pages[:200]
    assert len(pages) == 200

    async def go() -> tuple[list[FetchResult], int]:
        f = fetcher(web)
        try:
            tasks = [f.fetch(FetchRequest(f"http://{m.hosts[h].name}{t}")) for h, t in pages]
            gathered = asyncio.gather(*tasks)
            # one loop iteration: every task has added its transfer, none was polled yet (a
            # sample after 10 ms found most of them done once the fetcher got faster)
            await asyncio.sleep(0)
            peak = f.statistics().in_flight
            return list(await gathered), peak
        finally:
            await f.aclose()

    results, peak = run(go(), loop)
    assert peak == 200  # all at once, not one after another
    for (h, t), r in zip(pages, results, strict=True):
        assert r.error is None and r.status == 200, (t, r.error, r.error_detail)
        assert r.body == expected(web, h, t)
        assert r.url == f"http://{m.hosts[h].name}{t}"


def test_cancelled_fetch_frees_its_handle(web: RunningWeb) -> None:
    h, i = find_page(web.model, PageFlag.HANG)
    h2 = plain_page(web)
    ok_url = web.url(h2, 0)

    async def go() -> tuple[int, FetchResult]:
        f = fetcher(web)
        try:
            task = asyncio.create_task(f.fetch(FetchRequest(web.url(h, i))))
            await asyncio.sleep(0.2)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            in_flight = f.statistics().in_flight
            return in_flight, await f.fetch(FetchRequest(ok_url))
        finally:
            await f.aclose()

    in_flight, after = run(go())
    assert in_flight == 0 and after.status == 200


def test_aclose_ends_fetches_in_flight(web: RunningWeb) -> None:
    h, i = find_page(web.model, PageFlag.HANG)

    async def go() -> tuple[FetchResult, FetchResult]:
        f = fetcher(web)
        task = asyncio.create_task(f.fetch(FetchRequest(web.url(h, i))))
        await asyncio.sleep(0.2)
        await f.aclose()
        await f.aclose()  # idempotent
        return await task, await f.fetch(FetchRequest(web.url(h, 0)))

    during, after = run(go())
    assert during.error == ERROR_CANCELLED and after.error == ERROR_CANCELLED


def test_statistics_count_outcomes(web: RunningWeb) -> None:
    m = web.model
    h = plain_page(web)
    hr, ir = find_page(m, PageFlag.RESET_ALWAYS)

    async def go() -> tuple[list[FetchResult], object]:
        f = fetcher(web)
        try:
            rs = [
                await f.fetch(FetchRequest(web.url(h, 0))),
                await f.fetch(FetchRequest(f"http://{m.hosts[h].name}/missing/1.html")),
                await f.fetch(FetchRequest(web.url(hr, ir))),
            ]
            return rs, f.statistics()
        finally:
            await f.aclose()

    rs, st = run(go())
    assert st.started == st.completed == 3 and st.in_flight == 0  # type: ignore[attr-defined]
    assert st.responses == 2 and st.statuses == {200: 1, 404: 1}  # type: ignore[attr-defined]
    assert st.errors == {ERROR_RESET: 1}  # type: ignore[attr-defined]
    assert st.bytes_decoded == sum(len(r.body) for r in rs)  # type: ignore[attr-defined]
