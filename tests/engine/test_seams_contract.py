"""Contract tests of the engine's seams (gossamer.engine.seams), each run on every
implementation: the fetcher with its fast path (CurlFetcher against a loopback server, the
same behind the cluster's IP-gate guard on a real Redis, the same built by the fetcher
registry, the unit tests' fake), `fetch` on every registered fetcher, the sinks
(Recorder into a temporary directory, the unit tests' recording fake) and the IP gate
(LocalIpGate, FileIpGate, PoolIpGate, RedisIpGate on a real Redis)."""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import _streams_fetcher
import pytest
from test_crawler_unit import HTML, FakeSinks, StartingFakeFetcher

from gossamer.cluster.ipgate import GatedStartingFetcher, RedisIpGate
from gossamer.config import CrawlSettings
from gossamer.engine.ipgate import FileIpGate, IpGateBroker, LocalIpGate, PoolIpGate
from gossamer.engine.recorder import Recorder
from gossamer.engine.seams import IpGate, Sinks
from gossamer.fetch import (
    CurlFetcher,
    Fetcher,
    FetchRequest,
    FetchResult,
    Resolver,
    StartingFetcher,
)
from gossamer.fetch._registry import fetcher_names, open_fetcher, unregister_fetcher
from gossamer.frontier.redis import connect
from gossamer.sinks import read_crawl_log, read_graph

HOST = "contract.example"
PAGE = f"http://{HOST}/page"
BODY = b"<html><title>contract</title></html>"
BOUND = 10.0  # seconds any wait for a state may take before the test fails


# ------------------------------------------------------------------------- the fetcher
class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:
        self.send_response(200 if self.path == "/page" else 404)
        self.send_header("Content-Type", HTML)
        self.send_header("Content-Length", str(len(BODY)))
        self.end_headers()
        self.wfile.write(BODY)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture(scope="module")
def http_port() -> Iterator[int]:
    """A loopback HTTP/1.1 server in a thread of its own: it answers while the test's event
    loop is busy (what `poll()` is about)."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server.server_address[1]
    server.shutdown()
    server.server_close()
    thread.join(BOUND)


FetcherMaker = Callable[[pytest.FixtureRequest, int], contextlib.AbstractAsyncContextManager[Any]]


@contextlib.asynccontextmanager
async def _curl(_: pytest.FixtureRequest, port: int) -> AsyncIterator[CurlFetcher]:
    f = CurlFetcher(resolver=Resolver([f"{HOST}:80:127.0.0.1:{port}"], allow_private=True))
    try:
        yield f
    finally:
        await f.aclose()


@contextlib.asynccontextmanager
async def _gated_curl(request: pytest.FixtureRequest, port: int) -> AsyncIterator[Any]:
    client = connect(request.getfixturevalue("redis_url"))
    gate = RedisIpGate(client, "contract", 1, owner="w1")
    try:
        async with _curl(request, port) as inner, gate, gate.hold("127.0.0.1"):
            guarded = gate.guard(inner)
            assert isinstance(guarded, GatedStartingFetcher)
            yield guarded
    finally:
        client.close()


@contextlib.asynccontextmanager
async def _fake(_: pytest.FixtureRequest, port: int) -> AsyncIterator[StartingFakeFetcher]:
    yield StartingFakeFetcher({PAGE: (200, HTML, BODY, ())}, latency=0.01)


@contextlib.asynccontextmanager
async def _registered_curl(_: pytest.FixtureRequest, port: int) -> AsyncIterator[Fetcher]:
    """The fetcher a crawl is built with: "curl" from the fetcher registry (runner/build.py)."""
    settings = CrawlSettings(
        seeds=[PAGE], resolve=[f"{HOST}:80:127.0.0.1:{port}"], allow_private=True
    )
    resolver = Resolver.from_settings(settings.fetch.resolve, allow_private=True)
    f = open_fetcher("curl", settings, resolver)
    try:
        yield f
    finally:
        await f.aclose()


FETCHERS: dict[str, FetcherMaker] = {
    "curl": _curl,
    "curl-gated": _gated_curl,
    "curl-registered": _registered_curl,
    "fake": _fake,
}


@pytest.fixture(params=sorted(FETCHERS))
def fetcher_maker(request: pytest.FixtureRequest, http_port: int) -> Callable[[], Any]:
    return lambda: FETCHERS[request.param](request, http_port)


def _run(coro: Any) -> Any:
    async def bounded() -> Any:
        async with asyncio.timeout(BOUND * 2):
            return await coro

    return asyncio.run(bounded())


def _check_page(result: FetchResult) -> None:
    assert result.error is None and result.status == 200
    assert result.url == PAGE and result.body == BODY


@pytest.mark.parametrize("name", [*fetcher_names(), _streams_fetcher.NAME])
def test_every_registered_fetcher_fetches_a_page(name: str, http_port: int) -> None:
    """`Fetching.fetch` on every fetcher the registry builds (the built-in ones and the
    test's "streams", which has no fast path), made as a crawl makes it."""
    added = name not in fetcher_names()
    if added:
        _streams_fetcher.register()
    settings = CrawlSettings(
        seeds=[PAGE], resolve=[f"{HOST}:80:127.0.0.1:{http_port}"], allow_private=True
    )

    async def main() -> FetchResult:
        resolver = Resolver.from_settings(settings.fetch.resolve, allow_private=True)
        f = open_fetcher(name, settings, resolver)
        try:
            return await f.fetch(FetchRequest(PAGE))
        finally:
            await f.aclose()

    try:
        _check_page(_run(main()))
    finally:
        if added:
            unregister_fetcher(name)


def test_fetcher_has_the_fast_path(fetcher_maker: Callable[[], Any]) -> None:
    async def main() -> bool:
        async with fetcher_maker() as f:
            return isinstance(f, StartingFetcher)

    assert _run(main())


def test_fetch_and_start_give_the_same_page(fetcher_maker: Callable[[], Any]) -> None:
    async def main() -> tuple[FetchResult, FetchResult]:
        async with fetcher_maker() as f:
            fetched = await f.fetch(FetchRequest(PAGE))
            started = await f.start(FetchRequest(PAGE))
            return fetched, started

    for result in _run(main()):
        _check_page(result)


def test_poll_settles_a_response_without_a_loop_iteration(
    fetcher_maker: Callable[[], Any],
) -> None:
    """A started request's response is taken in by `poll()` alone: the test never yields to
    the event loop between `start` and the future being done."""

    async def main() -> tuple[bool, FetchResult]:
        async with fetcher_maker() as f:
            fut = f.start(FetchRequest(PAGE))
            deadline = time.monotonic() + BOUND
            while not fut.done() and time.monotonic() < deadline:
                f.poll()
                time.sleep(0.001)  # noqa: ASYNC251 (blocks the loop on purpose: only poll())
            return fut.done(), await fut

    done, result = _run(main())
    assert done
    _check_page(result)


def test_poll_with_nothing_in_flight_and_a_cancelled_start(
    fetcher_maker: Callable[[], Any],
) -> None:
    async def main() -> FetchResult:
        async with fetcher_maker() as f:
            f.poll()
            fut = f.start(FetchRequest(PAGE))
            fut.cancel()
            f.poll()
            with pytest.raises(asyncio.CancelledError):
                await fut
            return await f.fetch(FetchRequest(PAGE))  # the fetcher goes on

    _check_page(_run(main()))


# ------------------------------------------------------------------------- the sinks
def _result(url: str, status: int = 200) -> FetchResult:
    head = f"HTTP/1.1 {status} X\r\nContent-Type: {HTML}\r\n\r\n".encode()
    return FetchResult(
        url=url, status=status, headers=(("Content-Type", HTML),), body=BODY,
        raw_body_len=len(BODY), truncated=False, error=None, ip="127.0.0.1", port=80,
        started_at=time.time(), elapsed=0.01, request_head=b"GET /page HTTP/1.1\r\n\r\n",
        response_head=head, http_version="1.1",
    )  # fmt: skip


Observed = tuple[list[tuple[str, str]], set[tuple[str, str, str]]]  # log lines, edges


def _recorder(tmp_path: Path) -> tuple[Sinks, Callable[[], Observed], Callable[[], None]]:
    settings = CrawlSettings(seeds=[PAGE], output=str(tmp_path))
    rec = Recorder(tmp_path, settings, version="test")

    def observe() -> Observed:
        log = [(r["url"], r["outcome"]) for r in read_crawl_log(tmp_path / "crawl.log.jsonl")]
        return log, read_graph(tmp_path).url_edges()

    return rec, observe, rec.close


def _fake_sinks(_: Path) -> tuple[Sinks, Callable[[], Observed], Callable[[], None]]:
    sinks = FakeSinks()

    def observe() -> Observed:
        edges = {(s, d, k) for s, ds in sinks.edges_by_src.items() for d, k in ds}
        return list(sinks.logged), edges

    return sinks, observe, lambda: None


SINKS = {"recorder": _recorder, "fake": _fake_sinks}


@pytest.mark.parametrize("make", sorted(SINKS))
def test_sinks_hold_what_was_recorded_once_flushed(make: str, tmp_path: Path) -> None:
    sinks, observe, close = SINKS[make](tmp_path)
    other = f"http://{HOST}/other"
    sinks.exchange(_result(PAGE))
    sinks.log(_result(PAGE), depth=0, parent=None, outcome="done")
    sinks.log(_result(other, 404), depth=1, parent=PAGE, outcome="http/404")
    sinks.edges(PAGE, [(other, "link"), (f"http://{HOST}/r", "redirect")])
    sinks.flush()
    log, edges = observe()
    assert log == [(PAGE, "done"), (other, "http/404")]
    assert edges == {(PAGE, other, "link"), (PAGE, f"http://{HOST}/r", "redirect")}
    sinks.flush()  # idempotent
    assert observe() == (log, edges)
    close()


def test_recorder_flush_puts_lines_on_disk_before_close(tmp_path: Path) -> None:
    """What the crawler relies on: after `flush()` the frontier may count a batch done, so
    the lines are in the files before any close."""
    sinks, observe, close = _recorder(tmp_path)
    sinks.log(_result(PAGE), depth=0, parent=None, outcome="done")
    assert observe()[0] == []  # buffered
    sinks.flush()
    assert observe()[0] == [(PAGE, "done")]
    close()


# ------------------------------------------------------------------------- the IP gate
IP = "127.1.0.7"


@contextlib.asynccontextmanager
async def _local(_: pytest.FixtureRequest, limit: int, tmp: Path) -> AsyncIterator[IpGate]:
    yield LocalIpGate(limit)


@contextlib.asynccontextmanager
async def _files(_: pytest.FixtureRequest, limit: int, tmp: Path) -> AsyncIterator[IpGate]:
    yield FileIpGate(tmp / "ipgate", limit)


@contextlib.asynccontextmanager
async def _pool(_: pytest.FixtureRequest, limit: int, tmp: Path) -> AsyncIterator[IpGate]:
    broker = IpGateBroker(1, limit)  # a pool of one worker, served on the broker's thread
    gate = PoolIpGate(broker.worker_socket(0), limit)
    broker.start()
    try:
        yield gate
    finally:
        gate.close()
        broker.stop()


@contextlib.asynccontextmanager
async def _redis(request: pytest.FixtureRequest, limit: int, tmp: Path) -> AsyncIterator[IpGate]:
    client = connect(request.getfixturevalue("redis_url"))
    try:
        async with RedisIpGate(client, "contract", limit, owner="w1") as gate:
            yield gate
    finally:
        client.close()


GATES = {"local": _local, "files": _files, "pool": _pool, "redis": _redis}


@pytest.fixture(params=sorted(GATES))
def gate_maker(request: pytest.FixtureRequest, tmp_path: Path) -> Callable[[int], Any]:
    return lambda limit: GATES[request.param](request, limit, tmp_path)


async def _until(check: Callable[[], bool]) -> bool:
    deadline = time.monotonic() + BOUND
    while not check():
        if time.monotonic() > deadline:
            return False
        await asyncio.sleep(0.002)
    return True


@pytest.mark.parametrize("limit", [1, 2])
def test_gate_lets_at_most_limit_holders_of_an_ip_in(
    gate_maker: Callable[[int], Any], limit: int
) -> None:
    async def main() -> tuple[int, int]:
        inside = most = 0

        async def one(gate: IpGate) -> None:
            nonlocal inside, most
            for _ in range(3):
                async with gate.hold(IP):
                    inside += 1
                    most = max(most, inside)
                    await asyncio.sleep(0.003)
                    inside -= 1

        async with gate_maker(limit) as gate, asyncio.TaskGroup() as tg:
            for _ in range(limit + 2):
                tg.create_task(one(gate))
        return most, inside

    assert _run(main()) == (limit, 0)


def test_gate_says_when_a_host_waits_and_other_ips_pass(gate_maker: Callable[[int], Any]) -> None:
    async def main() -> list[bool]:
        seen = []
        async with gate_maker(1) as gate:
            seen.append(gate.waiting(IP))  # nobody: False
            release = asyncio.Event()

            async def holder() -> None:
                async with gate.hold(IP):
                    await release.wait()

            first = asyncio.create_task(holder())
            second = asyncio.create_task(holder())
            seen.append(await _until(lambda: gate.waiting(IP)))  # the second waits
            async with asyncio.timeout(BOUND), gate.hold("127.1.0.8"):
                seen.append(True)  # another IP is not held up
            release.set()
            await asyncio.gather(first, second)
            seen.append(await _until(lambda: not gate.waiting(IP)))
        return seen

    assert _run(main()) == [False, True, True, True]


def test_gate_frees_the_slot_when_the_body_raises(gate_maker: Callable[[int], Any]) -> None:
    async def main() -> bool:
        async with gate_maker(1) as gate:
            with pytest.raises(RuntimeError):
                async with gate.hold(IP):
                    raise RuntimeError("boom")
            async with asyncio.timeout(BOUND), gate.hold(IP):
                return True

    assert _run(main())
