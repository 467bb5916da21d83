"""The worker loop against fakes: a scripted fetcher, the in-memory frontier, recording sinks.

What the end-to-end tests cannot pin down precisely: one request in flight per host with one
page of look-ahead, the host's delay between requests, a back-off status ending the batch
with nothing left in flight, link routing memoised without changing results (edges for every
page, each URL sent to the frontier once, depth limits).
"""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
import time
from collections import Counter
from typing import Any

import pytest

from gossamer.config import CrawlSettings
from gossamer.engine.crawler import Crawler
from gossamer.engine.ipgate import LocalIpGate
from gossamer.fetch import ERROR_CONNECTION_LOST, ERROR_TOO_SLOW, FetchRequest, FetchResult
from gossamer.frontier import Discovered, MemoryFrontier, Outlinks
from gossamer.urls import fingerprint

HTML = "text/html; charset=utf-8"


def _page(links: list[str]) -> bytes:
    return (
        "<html><body>" + "".join(f'<a href="{u}">x</a>' for u in links) + "</body></html>"
    ).encode()


class FakeFetcher:
    """Serves `pages` (url → (status, content type, body, extra headers)) after `latency`."""

    def __init__(
        self,
        pages: dict[str, tuple[int, str, bytes, tuple[tuple[str, str], ...]]],
        latency: float = 0.002,
    ) -> None:
        self.pages = pages
        self.latency = latency
        self.log: list[tuple[str, float, float]] = []  # url, start, end
        self.in_flight: Counter[str] = Counter()
        self.max_in_flight: Counter[str] = Counter()

    async def fetch(self, req: FetchRequest) -> FetchResult:
        host = req.url.split("/")[2]
        self.in_flight[host] += 1
        self.max_in_flight[host] = max(self.max_in_flight[host], self.in_flight[host])
        self.max_total = max(getattr(self, "max_total", 0), sum(self.in_flight.values()))
        start = time.time()
        try:
            await asyncio.sleep(self.latency)
        finally:
            self.in_flight[host] -= 1
        return self._respond(req, start)

    def _respond(self, req: FetchRequest, start: float) -> FetchResult:
        self.log.append((req.url, start, time.time()))
        if req.url.endswith("/robots.txt"):
            status, ctype, body, extra = 404, "text/plain", b"", ()
        else:
            status, ctype, body, extra = self.pages.get(req.url, (404, "text/plain", b"", ()))
        headers = (("Content-Type", ctype), *extra)
        head = (
            f"HTTP/1.1 {status} X\r\n".encode()
            + b"".join(f"{k}: {v}\r\n".encode() for k, v in headers)
            + b"\r\n"
        )
        return FetchResult(
            url=req.url, status=status, headers=headers, body=body, raw_body_len=len(body),
            truncated=False, error=None, ip="127.0.0.1", port=80, started_at=start,
            elapsed=time.time() - start, request_head=b"GET / HTTP/1.1\r\n\r\n",
            response_head=head, http_version="1.1",
        )  # fmt: skip


class StartingFakeFetcher(FakeFetcher):
    """`FakeFetcher` with the fast path, as CurlFetcher has it (`StartingFetcher`): `start`
    puts the request "on the wire" at once and a response is "in" `latency` after; the loop
    settles it then, or `poll()` earlier if it is called once the response is in."""

    def __init__(
        self,
        pages: dict[str, tuple[int, str, bytes, tuple[tuple[str, str], ...]]],
        latency: float = 0.002,
    ) -> None:
        super().__init__(pages, latency)
        self.started = 0
        self.polls = 0
        self.settled_by_poll = 0
        # future -> (request, start time, loop time its response is in, the loop's timer)
        self._pending: dict[
            asyncio.Future[FetchResult],
            tuple[FetchRequest, float, float, asyncio.TimerHandle],
        ] = {}

    def start(self, req: FetchRequest) -> asyncio.Future[FetchResult]:
        loop = asyncio.get_running_loop()
        host = req.url.split("/")[2]
        self.in_flight[host] += 1
        self.max_in_flight[host] = max(self.max_in_flight[host], self.in_flight[host])
        self.max_total = max(getattr(self, "max_total", 0), sum(self.in_flight.values()))
        self.started += 1
        fut: asyncio.Future[FetchResult] = loop.create_future()
        due = loop.time() + self.latency
        timer = loop.call_at(due, self._settle, fut)
        self._pending[fut] = (req, time.time(), due, timer)
        fut.add_done_callback(self._forget)  # (a cancelled request leaves the wire too)
        return fut

    def poll(self) -> None:
        self.polls += 1
        now = asyncio.get_running_loop().time()
        for fut, (_, _, due, timer) in list(self._pending.items()):
            if due <= now:
                timer.cancel()
                self.settled_by_poll += 1
                self._settle(fut)

    def _settle(self, fut: asyncio.Future[FetchResult]) -> None:
        pending = self._pending.get(fut)
        if pending is None or fut.done():
            return
        req, start, _, _ = pending
        fut.set_result(self._respond(req, start))

    def _forget(self, fut: asyncio.Future[FetchResult]) -> None:
        req, _, _, timer = self._pending.pop(fut)
        timer.cancel()
        self.in_flight[req.url.split("/")[2]] -= 1


class FakeSinks:
    def __init__(self) -> None:
        self.edges_by_src: dict[str, list[tuple[str, str]]] = {}
        self.exchanges: list[str] = []
        self.logged: list[tuple[str, str]] = []

    def exchange(self, result: FetchResult) -> None:
        self.exchanges.append(result.url)

    def log(
        self,
        result: FetchResult,
        *,
        depth: int,
        parent: str | None,
        outcome: str,
        dup: tuple[str, str] | None = None,
    ) -> None:
        self.logged.append((result.url, outcome))

    def edges(self, src: str, dsts: list[tuple[str, str]]) -> None:
        self.edges_by_src.setdefault(src, []).extend(dsts)

    def page(self, result: FetchResult, depth: int, edges: list[tuple[str, str]]) -> bool:
        return True

    def flush(self) -> None:
        pass


def _crawl(
    pages: dict[str, Any],
    seeds: list[str],
    *,
    latency: float = 0.002,
    stop_after: float | None = None,
    frontier: MemoryFrontier | None = None,
    **over: Any,
) -> tuple[Crawler, FakeFetcher, FakeSinks, MemoryFrontier]:
    """Crawl `pages` from `seeds` with the fake fetcher and sinks (on `frontier`, a new
    MemoryFrontier by default); `over` overrides the settings (delay 0 unless given)."""
    settings = CrawlSettings(seeds=seeds, scope="all", output="/tmp/unused", **{"delay": 0, **over})
    frontier = MemoryFrontier() if frontier is None else frontier
    fetcher = StartingFakeFetcher(pages, latency)  # the production fast path
    sinks = FakeSinks()
    crawler = Crawler(
        settings, frontier=frontier, fetcher=fetcher, ip_of=lambda h: None, sinks=sinks
    )
    crawler.seed(seeds)

    async def main() -> None:
        if stop_after is not None:
            asyncio.get_running_loop().call_later(stop_after, crawler.request_stop)
        await asyncio.wait_for(crawler.run(), 30)

    asyncio.run(main())
    return crawler, fetcher, sinks, frontier


def _site(n: int, host: str = "a.example") -> dict[str, Any]:
    """n pages, each linking to every page of the site (lots of repeats to memoise)."""
    urls = [f"http://{host}/p{i}" for i in range(n)]
    return {u: (200, HTML, _page(urls), ()) for u in urls}


def test_every_page_fetched_once_and_every_edge_recorded() -> None:
    pages = _site(30)
    crawler, fetcher, sinks, frontier = _crawl(pages, ["http://a.example/p0"])
    fetched = [u for u, _, _ in fetcher.log if not u.endswith("robots.txt")]
    assert sorted(fetched) == sorted(pages)
    # edges of every page, self-links left out, even though each URL was sent once
    for url in pages:
        assert sorted(d for d, _ in sinks.edges_by_src[url]) == sorted(set(pages) - {url})
    assert crawler.counters.discovered == 29
    assert len(crawler._sent) == 30 - 0  # every page URL (p0 arrives back as a link)
    assert frontier.statistics().done == 30


def test_one_request_in_flight_per_host_with_lookahead() -> None:
    pages = {**_site(25, "a.example"), **_site(25, "b.example")}
    pages["http://a.example/p0"] = (
        200, HTML, _page([f"http://a.example/p{i}" for i in range(25)]
                         + ["http://b.example/p0"]), (),
    )  # fmt: skip
    _, fetcher, _, _ = _crawl(pages, ["http://a.example/p0"])
    assert max(fetcher.max_in_flight.values()) == 1
    for host in ("a.example", "b.example"):
        spans = sorted((s, e) for u, s, e in fetcher.log if f"//{host}/" in u)
        assert all(s2 >= e1 for (_, e1), (s2, _) in itertools.pairwise(spans))


def test_host_delay_is_kept_between_requests() -> None:
    pages = _site(6)
    settings_delay = 0.05
    frontier = MemoryFrontier()
    f2 = FakeFetcher(pages, 0.0)
    settings = CrawlSettings(
        seeds=["http://a.example/p0"], scope="all", delay=settings_delay, output="/tmp/unused"
    )
    c = Crawler(settings, frontier=frontier, fetcher=f2, ip_of=lambda h: None, sinks=FakeSinks())
    c.seed(settings.seeds)
    asyncio.run(asyncio.wait_for(c.run(), 30))
    spans = sorted((s, e) for _, s, e in f2.log)
    assert len(spans) == 7  # robots.txt + 6 pages
    gaps = [s2 - e1 for (_, e1), (s2, _) in itertools.pairwise(spans)]
    assert min(gaps) >= settings_delay - 0.002, gaps


def test_a_slow_batch_flushes_its_outputs_as_its_pages_come(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A batch at a host's delay lasts its URLs times the delay (20 s at the default 1 s):
    its pages reach the crawl log between two pages (OUTPUTS_FLUSH_S apart at most), not
    all at once as it ends, so the log and the live display move together."""
    import gossamer.engine.crawler as crawler_module

    monkeypatch.setattr(crawler_module, "OUTPUTS_FLUSH_S", 0.04, raising=False)

    class CountingSinks(FakeSinks):
        def __init__(self) -> None:
            super().__init__()
            self.flushed_at: list[int] = []  # pages logged at each flush

        def flush(self) -> None:
            self.flushed_at.append(sum(not u.endswith("robots.txt") for u, _ in self.logged))

    pages = _site(6)
    settings = CrawlSettings(
        seeds=["http://a.example/p0"], scope="all", delay=0.05, output="/tmp/unused"
    )
    sinks = CountingSinks()
    c = Crawler(
        settings, frontier=MemoryFrontier(), fetcher=FakeFetcher(pages, 0.0),
        ip_of=lambda h: None, sinks=sinks,
    )  # fmt: skip
    c.seed(settings.seeds)
    asyncio.run(asyncio.wait_for(c.run(), 30))
    # the seed's batch, then p1–p5 in one batch: flushed page by page, not only at its end
    assert {2, 3, 4, 5} <= set(sinks.flushed_at), sinks.flushed_at


def test_back_off_status_ends_the_batch_with_nothing_in_flight() -> None:
    pages = _site(10)
    pages["http://a.example/p3"] = (503, "text/plain", b"", (("Retry-After", "3600"),))
    _, fetcher, _, frontier = _crawl(pages, ["http://a.example/p0"], per_host=20, stop_after=1.0)
    urls = [u for u, _, _ in fetcher.log]
    # p0, then p1..p9 in one batch: the 503 of p3 stops it, p4.. are not requested
    assert "http://a.example/p3" in urls
    after = urls[urls.index("http://a.example/p3") + 1 :]
    assert after == []
    stats = frontier.statistics()
    assert stats.leased == 0 and stats.queued == 7  # p3 (retry) + p4..p9 wait for the host


def test_max_depth_limits_what_is_sent_not_the_edges() -> None:
    # p0 → p1 → p2 → p3; p0 also links p3 directly: p3 first met at depth 1 (kept) — and a URL
    # dropped for depth once (p2 from p1 with max_depth 1) is kept when met shallower.
    pages = {
        "http://a.example/p0": (
            200, HTML, _page(["http://a.example/p1", "http://a.example/p3"]), ()
        ),
        "http://a.example/p1": (200, HTML, _page(["http://a.example/p2"]), ()),
        "http://a.example/p3": (200, HTML, _page(["http://a.example/p2"]), ()),
        "http://a.example/p2": (200, HTML, _page([]), ()),
    }  # fmt: skip
    crawler, fetcher, sinks, _ = _crawl(pages, ["http://a.example/p0"], max_depth=1)
    fetched = {u for u, _, _ in fetcher.log if not u.endswith("robots.txt")}
    assert fetched == {"http://a.example/p0", "http://a.example/p1", "http://a.example/p3"}
    assert crawler.counters.dropped["scope/depth"] == 2
    # the links that went too deep are still edges of the graph
    assert sinks.edges_by_src["http://a.example/p1"] == [("http://a.example/p2", "link")]


def test_redirects_are_routed_at_the_same_depth() -> None:
    pages = {
        "http://a.example/": (301, "text/html", b"", (("Location", "/home"),)),
        "http://a.example/home": (200, HTML, _page([]), ()),
    }
    _, fetcher, sinks, _ = _crawl(pages, ["http://a.example/"], max_depth=0)
    assert [u for u, _, _ in fetcher.log][-1] == "http://a.example/home"
    assert sinks.edges_by_src["http://a.example/"] == [("http://a.example/home", "redirect")]


def test_with_shortest_path_depths_repeats_go_as_edges_only() -> None:
    """With a frontier that relaxes depths, a link goes as a Discovered when this worker has
    not put it yet (a put that returned) or only deeper; otherwise as the page's Outlinks."""
    settings = CrawlSettings(
        seeds=["http://a.example/"], scope="all", delay=0, output="/tmp/unused", max_depth=5
    )
    crawler = Crawler(
        settings,
        frontier=MemoryFrontier(max_depth=5),
        fetcher=FakeFetcher({}),
        ip_of=lambda h: None,
        sinks=FakeSinks(),
    )
    x, y, z = "http://a.example/x", "http://b.example/y", "http://a.example/z"
    links = [(x, "link"), (y, "link")]
    first: list[Discovered | Outlinks] = []
    crawler._route("http://a.example/p", links, 2, first)
    assert [(type(i), i.depth) for i in first] == [(Discovered, 3), (Discovered, 3)]
    again: list[Discovered | Outlinks] = []  # not put yet: offered again
    crawler._route("http://a.example/q", links, 2, again)
    assert [type(i) for i in again] == [Discovered, Discovered]
    crawler._note_sent(first)
    out: list[Discovered | Outlinks] = []
    crawler._route("http://a.example/q", [*links, (z, "link")], 3, out)
    assert [type(i) for i in out] == [Discovered, Outlinks]
    assert (out[0].fp, out[0].depth) == (fingerprint(z), 4)
    page = out[1]
    assert isinstance(page, Outlinks)
    assert (page.url, page.fp, page.depth) == ("http://a.example/q", fingerprint(page.url), 3)
    assert (page.fps, page.hosts, page.deltas) == (
        [fingerprint(x), fingerprint(y)], ["a.example", "b.example"], [1, 1]
    )
    shallower: list[Discovered | Outlinks] = []
    crawler._route("http://a.example/r", [*links, ("http://a.example/", "redirect")], 1, shallower)
    assert [(type(i), i.depth) for i in shallower] == [
        (Discovered, 2), (Discovered, 2), (Discovered, 1)
    ]
    crawler._note_sent(shallower)  # x at 2, the home page at 1
    last: list[Discovered | Outlinks] = []
    crawler._route("http://a.example/s", [(x, "link"), ("http://a.example/", "link")], 1, last)
    # no depth of s (>= 0) puts the home page below 1: that edge is not even recorded
    assert len(last) == 1 and isinstance(last[0], Outlinks) and last[0].fps == [fingerprint(x)]


def test_response_times_feed_the_adaptive_delay() -> None:
    pages = _site(5)
    settings = CrawlSettings(
        seeds=["http://a.example/p0"], scope="all", delay=0, output="/tmp/unused"
    )
    frontier = MemoryFrontier(adaptive_factor=2.0)
    crawler = Crawler(
        settings,
        frontier=frontier,
        fetcher=FakeFetcher(pages, latency=0.02),
        ip_of=lambda h: None,
        sinks=FakeSinks(),
    )
    crawler.seed(settings.seeds)
    asyncio.run(asyncio.wait_for(crawler.run(), 30))
    adaptive = frontier._hosts["a.example"].timing.adaptive_delay
    assert 0.035 <= adaptive <= 0.5  # 2 x the ~20 ms responses


def test_names_of_one_server_share_the_per_ip_gate() -> None:
    """Without resolve overrides, hosts are resolved before the per-IP gate: two names of
    one address are never fetched at once (per_ip 1)."""
    pages = {**_site(15, "a.example"), **_site(15, "b.example")}
    pages["http://a.example/p0"] = (
        200, HTML, _page(["http://a.example/p1", "http://b.example/p0"]), (),
    )  # fmt: skip
    dns: dict[str, str] = {}
    lookups: list[str] = []

    async def resolve(name: str, port: int) -> None:
        lookups.append(name)
        await asyncio.sleep(0.001)
        dns[name] = "10.0.0.1"

    settings = CrawlSettings(
        seeds=["http://a.example/p0"], scope="all", delay=0, output="/tmp/unused"
    )
    fetcher = FakeFetcher(pages, latency=0.003)
    crawler = Crawler(
        settings,
        frontier=MemoryFrontier(),
        fetcher=fetcher,
        ip_of=dns.get,
        resolve=resolve,
        sinks=FakeSinks(),
    )
    crawler.seed(settings.seeds)
    asyncio.run(asyncio.wait_for(crawler.run(), 30))
    assert len([u for u, _, _ in fetcher.log if "/p" in u]) == 30
    assert fetcher.max_total == 1
    assert sorted(set(lookups)) == ["a.example", "b.example"]


class _CountingFrontier(MemoryFrontier):
    """The reference frontier, counting leases and extensions; `refuse_extend` makes every
    extension fail as if the lease had been reclaimed by another worker."""

    def __init__(self, refuse_extend: bool = False, **kw: Any) -> None:
        super().__init__(**kw)
        self.leases: list[float] = []  # time.time() of each lease handed out
        self.extends: list[float] = []
        self.refusals: list[float] = []
        self.refuse_extend = refuse_extend

    def lease(self, max_hosts: int, per_host: int, now: float | None = None) -> Any:
        got = super().lease(max_hosts, per_host, now)
        self.leases += [time.time()] * len(got)
        return got

    def complete(self, token: str, outcomes: Any, next_fetch_at: Any = None, renew: int = 0) -> Any:
        got = super().complete(token, outcomes, next_fetch_at, renew)
        if got is not None:
            self.leases.append(time.time())
        return got

    def extend(self, token: str, until: float) -> float:
        self.extends.append(until)
        if self.refuse_extend:
            self.reclaim_expired(float("inf"))  # another worker reclaimed it
            self.refusals.append(time.time())
        return super().extend(token, until)


def _long_batch(refuse: bool) -> tuple[Crawler, FakeFetcher, _CountingFrontier]:
    frontier = _CountingFrontier(refuse_extend=refuse, lease_ttl=2.0, default_delay=0.25)
    # refused, the host's batches are cut and leased again until the stop: 4 refusals before
    # a stop after 3.5 s (6 s only repeated them); kept, the crawl of the 8 pages ends by
    # itself, before its stop after 6 s
    c, fetcher, _, _ = _crawl(
        _site(8), ["http://a.example/p0"], latency=0.0, stop_after=3.5 if refuse else 6.0,
        frontier=frontier, delay=0.25, lease_ttl=2.0, per_host=20,
    )  # fmt: skip
    return c, fetcher, frontier


def test_a_long_batch_extends_its_lease_and_keeps_its_host() -> None:
    # 7 pages 0.25 s apart after the seed take ~1.75 s: longer than the 2 s lease minus
    # its 0.5 s safety margin, so the batch extends it and fetches every page it leased
    c, fetcher, frontier = _long_batch(refuse=False)
    fetched = [u for u, _, _ in fetcher.log if not u.endswith("robots.txt")]
    assert sorted(fetched) == sorted(_site(8))
    assert frontier.extends, "the lease was never extended"
    assert len(frontier.leases) == 2  # the seed's batch, then one for the other 7 pages
    assert c.counters.errors["frontier/stale-lease"] == 0
    assert frontier.statistics().done == 8


def test_a_refused_extension_stops_the_batch_at_once() -> None:
    # the lease was reclaimed (another worker may hold the host): nothing more is fetched
    c, fetcher, frontier = _long_batch(refuse=True)
    assert frontier.refusals
    # the refused extension, then the refused completion of the same batch
    assert c.counters.errors["frontier/stale-lease"] == 2 * len(frontier.refusals)
    starts = [start for _, start, _ in fetcher.log]
    for refused in frontier.refusals:  # no request between a refusal and the next lease
        next_lease = min((t for t in frontier.leases if t > refused), default=float("inf"))
        assert not [t for t in starts if refused < t < next_lease]


class _LateFrontier(MemoryFrontier):
    """Hands out leases that have already ended (as if the worker waited past them)."""

    def lease(self, max_hosts: int, per_host: int, now: float | None = None) -> Any:
        got = super().lease(max_hosts, per_host, now)
        return [dataclasses.replace(b, expires_at=time.time() - 1.0) for b in got]


def test_a_lease_ended_while_waiting_for_the_ip_fetches_nothing_not_even_robots() -> None:
    _, fetcher, _, frontier = _crawl(
        _site(3), ["http://a.example/p0"], latency=0.0, stop_after=0.5, frontier=_LateFrontier()
    )
    assert fetcher.log == []  # another worker may hold the host: not even robots.txt
    s = frontier.statistics()
    assert (s.queued, s.leased, s.done) == (1, 0, 0)  # the URL went back unfetched


def test_a_stop_gives_back_the_batches_still_waiting_for_their_ip() -> None:
    """A stop does not wait for an IP's slot: batches still waiting for it (here behind
    another worker's host holding the IP for 5 s) give their URLs back at once, without
    even robots.txt, and the crawl returns."""
    pages = {**_site(3, "a.example"), **_site(3, "b.example")}
    settings = CrawlSettings(
        seeds=["http://a.example/p0", "http://b.example/p0"],
        scope="all",
        delay=0,
        output="/tmp/unused",
    )
    gate = LocalIpGate(1)
    fetcher = FakeFetcher(pages, latency=0.0)
    frontier = MemoryFrontier()
    crawler = Crawler(
        settings,
        frontier=frontier,
        fetcher=fetcher,
        ip_of=lambda h: "10.0.0.1",
        sinks=FakeSinks(),
        ip_gate=gate,
    )
    crawler.seed(settings.seeds)

    async def other_worker(held: asyncio.Event) -> None:
        async with gate.hold("10.0.0.1"):
            held.set()
            await asyncio.sleep(5.0)

    async def main() -> float:
        held = asyncio.Event()
        other = asyncio.create_task(other_worker(held))
        await held.wait()
        loop = asyncio.get_running_loop()
        loop.call_later(0.3, crawler.request_stop)
        started = loop.time()
        await asyncio.wait_for(crawler.run(), 30)
        took = loop.time() - started
        other.cancel()
        return took

    took = asyncio.run(main())
    assert took < 2.0  # not the 5 s the other host holds the IP
    assert fetcher.log == []
    s = frontier.statistics()
    assert (s.queued, s.leased, s.done) == (2, 0, 0)  # both seeds went back unfetched


class ErrorOnceFetcher(FakeFetcher):
    """FakeFetcher whose first fetch of each URL in `errors` fails with that error key."""

    def __init__(self, pages: dict[str, Any], errors: dict[str, str], latency: float) -> None:
        super().__init__(pages, latency)
        self.errors = dict(errors)

    async def fetch(self, req: FetchRequest) -> FetchResult:
        result = await super().fetch(req)
        key = self.errors.pop(req.url, None)
        if key is None:
            return result
        return dataclasses.replace(
            result, status=None, headers=(), body=b"", response_head=b"", error=key
        )


def _crawl_with_errors(
    errors: dict[str, str], delay: float, **over: Any
) -> tuple[Crawler, ErrorOnceFetcher, FakeSinks, MemoryFrontier]:
    pages = _site(6)
    settings = CrawlSettings(
        seeds=["http://a.example/p0"], scope="all", delay=delay, output="/tmp/unused", **over
    )
    frontier = MemoryFrontier()
    fetcher = ErrorOnceFetcher(pages, errors, 0.001)
    sinks = FakeSinks()
    c = Crawler(settings, frontier=frontier, fetcher=fetcher, ip_of=lambda h: None, sinks=sinks)
    c.seed(settings.seeds)
    asyncio.run(asyncio.wait_for(c.run(), 30))
    return c, fetcher, sinks, frontier


def test_a_lost_connection_is_resent_once_after_the_delay_not_counted_an_attempt() -> None:
    lost = {f"http://a.example/p{i}": ERROR_CONNECTION_LOST for i in (2, 4)}
    c, fetcher, sinks, frontier = _crawl_with_errors(lost, 0.05, max_attempts=1)
    urls = [u for u, _, _ in fetcher.log]
    for url in lost:
        i = urls.index(url)
        assert urls[i + 1] == url  # sent again at once in the batch: next on the connection
        (_, _, end), (_, start, _) = fetcher.log[i], fetcher.log[i + 1]
        assert start - end >= 0.05 - 0.002  # ... after the host's delay
    spans = sorted((s, e) for _, s, e in fetcher.log)
    gaps = [s2 - e1 for (_, e1), (s2, _) in itertools.pairwise(spans)]
    assert min(gaps) >= 0.05 - 0.002, gaps
    # with max_attempts 1 an ordinary failure is final: the resend was not an attempt
    assert frontier.statistics().done == 6 and c.counters.pages == 6
    assert c.counters.errors[ERROR_CONNECTION_LOST] == 2
    assert sorted(u for u, o in sinks.logged if o == ERROR_CONNECTION_LOST) == sorted(lost)


def test_a_too_slow_page_is_not_retried() -> None:
    slow = {"http://a.example/p3": ERROR_TOO_SLOW}
    c, fetcher, sinks, frontier = _crawl_with_errors(slow, 0.0, max_attempts=3)
    urls = [u for u, _, _ in fetcher.log]
    assert urls.count("http://a.example/p3") == 1
    assert frontier.statistics().queued == 0 and c.counters.pages == 5
    assert ("http://a.example/p3", ERROR_TOO_SLOW) in sinks.logged


class SlowPageFetcher(FakeFetcher):
    """FakeFetcher whose page `slow_url` takes `slow_s` seconds."""

    def __init__(self, pages: dict[str, Any], slow_url: str, slow_s: float) -> None:
        super().__init__(pages, 0.001)
        self.slow_url, self.slow_s = slow_url, slow_s

    async def fetch(self, req: FetchRequest) -> FetchResult:
        if req.url == self.slow_url:
            await asyncio.sleep(self.slow_s)
        return await super().fetch(req)


def test_a_request_longer_than_the_lease_keeps_the_lease() -> None:
    """A response that takes longer than the lease (a slow server, up to total_timeout): the
    lease is extended while the request is in flight, so the batch completes. Before, the
    lease ran out under the request, its completion was refused and the page was leased and
    fetched again, without end (a trickling page timed out 120 s at a time, again and again,
    with the default lease_ttl 120 s and total_timeout 120 s)."""
    pages = _site(3)
    slow = "http://a.example/p1"
    frontier = _CountingFrontier(lease_ttl=2.0)
    settings = CrawlSettings(
        seeds=["http://a.example/p0"], scope="all", delay=0, lease_ttl=2.0, output="/tmp/unused"
    )
    fetcher = SlowPageFetcher(pages, slow, 3.0)
    c = Crawler(settings, frontier=frontier, fetcher=fetcher, ip_of=lambda h: None,
                sinks=FakeSinks())  # fmt: skip
    c.seed(settings.seeds)

    async def main() -> None:
        asyncio.get_running_loop().call_later(12.0, c.request_stop)  # bounds the old livelock
        await asyncio.wait_for(c.run(), 30)

    asyncio.run(main())
    urls = [u for u, _, _ in fetcher.log]
    assert urls.count(slow) == 1, urls
    assert c.counters.errors["frontier/stale-lease"] == 0
    assert frontier.extends and frontier.statistics().done == 3



@pytest.mark.parametrize(
    ("authority", "name"), [("127.0.0.1:8081", "127.0.0.1"), ("[::1]:8080", "[::1]")]
)
def test_default_host_scope_crawls_a_site_on_a_non_default_port(authority: str, name: str) -> None:
    """With the default `--scope host`, a seed on a port keeps its own links (the seed and the
    links are keyed alike, port included) and not other ports; the per-IP gate splits an IPv6
    host key (`[::1]:8080`) into its name and port for the lookup."""
    urls = [f"http://{authority}/p{i}" for i in range(5)]
    body = _page([*urls, f"http://{name}:9/", "http://other.example:8081/"])
    pages = {u: (200, HTML, body, ()) for u in urls}
    lookups: list[tuple[str, int]] = []

    async def resolve(host: str, port: int) -> None:
        lookups.append((host, port))

    settings = CrawlSettings(seeds=[urls[0]], delay=0, output="/tmp/unused")
    assert settings.scope == "host"
    fetcher = FakeFetcher(pages)
    crawler = Crawler(
        settings,
        frontier=MemoryFrontier(),
        fetcher=fetcher,
        ip_of=lambda h: None,
        resolve=resolve,
        sinks=FakeSinks(),
    )
    crawler.seed(settings.seeds)
    asyncio.run(asyncio.wait_for(crawler.run(), 30))
    fetched = [u for u, _, _ in fetcher.log if not u.endswith("/robots.txt")]
    assert sorted(fetched) == urls
    assert crawler.counters.dropped["scope/out-of-scope"] == 2 * len(urls)
    assert set(lookups) == {(name, int(authority.rpartition(":")[2]))}


class RobotsChainFetcher(FakeFetcher):
    """FakeFetcher whose robots.txt redirects to `pages`' /robots-moved/… chain."""

    async def fetch(self, req: FetchRequest) -> FetchResult:
        result = await super().fetch(req)
        if not req.url.endswith("/robots.txt"):
            return result
        moved = req.url.replace("/robots.txt", "/robots-moved/0.txt")
        headers = (("Content-Type", "text/plain"), ("Location", moved))
        return dataclasses.replace(result, status=301, headers=headers)


def test_robots_redirect_hops_are_spaced_by_the_crawls_delay() -> None:
    """Each hop of a robots.txt redirect chain is a request to the host like any other: the
    crawl's delay before it (they went out back to back); the Crawl-delay read at the end of
    the chain then spaces the pages."""
    pages = _site(3)
    hop = (("Location", "http://a.example/robots-moved/1.txt"),)
    pages["http://a.example/robots-moved/0.txt"] = (301, "text/plain", b"", hop)
    robots = b"User-agent: *\nCrawl-delay: 0.3\n"
    pages["http://a.example/robots-moved/1.txt"] = (200, "text/plain", robots, ())
    settings = CrawlSettings(
        seeds=["http://a.example/p0"], scope="all", output="/tmp/unused", delay=0.1
    )
    frontier = MemoryFrontier()
    fetcher = RobotsChainFetcher(pages, 0.002)
    c = Crawler(
        settings, frontier=frontier, fetcher=fetcher, ip_of=lambda h: None, sinks=FakeSinks()
    )
    c.seed(settings.seeds)
    asyncio.run(asyncio.wait_for(c.run(), 30))
    urls = [u for u, _, _ in fetcher.log]
    assert urls[:3] == [
        "http://a.example/robots.txt",
        "http://a.example/robots-moved/0.txt",
        "http://a.example/robots-moved/1.txt",
    ]
    spans = [(s, e) for _, s, e in fetcher.log]
    gaps = [s2 - e1 for (_, e1), (s2, _) in itertools.pairwise(spans)]
    assert min(gaps[:2]) >= 0.1 - 0.002, gaps  # the hops: the crawl's delay
    assert min(gaps[2:]) >= 0.3 - 0.002, gaps  # then the Crawl-delay
    assert sorted(urls[3:]) == sorted(pages)[:3]


def test_a_stop_during_the_hosts_delay_sends_no_more_requests() -> None:
    # the next request of a batch waited out the host's delay and was then sent, stop or
    # not: a stop took up to max_crawl_delay (30 s) and made one more request per host
    pages = _site(5)

    async def main() -> float:
        crawler, fetcher, _, frontier = _setup(pages, ["http://a.example/p0"], delay=20.0)
        loop = asyncio.get_running_loop()
        run = asyncio.create_task(crawler.run())
        await _until(lambda: bool(fetcher.log) and crawler.in_flight() > 0)  # p0 waits 20 s
        started = loop.time()
        crawler.request_stop()
        await asyncio.wait_for(run, 30)
        took = loop.time() - started
        assert [u for u, _, _ in fetcher.log] == ["http://a.example/robots.txt"]
        s = frontier.statistics()
        assert (s.leased, s.done, s.queued) == (0, 0, 1)  # the seed went back unfetched
        return took

    assert asyncio.run(main()) < 2.0


async def _until(state: Any, polls: int = 2000) -> None:
    """Wait until `state()` holds (polled: it is a state of the crawler, not an event)."""
    for _ in range(polls):  # 20 s
        if state():
            return
        await asyncio.sleep(0.01)
    raise AssertionError("the state was not reached")


class HangingFetcher(FakeFetcher):
    """FakeFetcher whose requests for `hang` never answer (a dead host: accepts, never
    replies), until cancelled."""

    def __init__(self, pages: dict[str, Any], hang: set[str]) -> None:
        super().__init__(pages)
        self.hang = hang
        self.cancelled: list[str] = []

    async def fetch(self, req: FetchRequest) -> FetchResult:
        if req.url in self.hang:
            try:
                await asyncio.sleep(3600)
            except asyncio.CancelledError:
                self.cancelled.append(req.url)
                raise
        return await super().fetch(req)


def _setup(
    pages: dict[str, Any], seeds: list[str], fetcher: FakeFetcher | None = None, **over: Any
) -> tuple[Crawler, FakeFetcher, FakeSinks, MemoryFrontier]:
    settings = CrawlSettings(seeds=seeds, scope="all", output="/tmp/unused", **{"delay": 0, **over})
    frontier = MemoryFrontier()
    fetcher = FakeFetcher(pages) if fetcher is None else fetcher
    sinks = FakeSinks()
    crawler = Crawler(
        settings, frontier=frontier, fetcher=fetcher, ip_of=lambda h: None, sinks=sinks
    )
    crawler.seed(seeds)
    return crawler, fetcher, sinks, frontier


@pytest.mark.parametrize("hang_robots", [False, True])
def test_abandon_in_flight_cancels_requests_and_keeps_their_urls(hang_robots: bool) -> None:
    # a request to a dead host held a stop for first_byte_timeout (30 s): abandoning it
    # cancels it, records nothing of it and leaves its URL queued for a resume, while the
    # other hosts' batches complete with what they fetched
    pages = {**_site(3, "a.example"), **_site(3, "dead.example")}
    dead = "http://dead.example/robots.txt" if hang_robots else "http://dead.example/p0"
    fetcher = HangingFetcher(pages, {dead})
    crawler, _, sinks, frontier = _setup(
        pages, ["http://a.example/p0", "http://dead.example/p0"], fetcher
    )

    async def main() -> None:
        run = asyncio.create_task(crawler.run())
        # a.example crawled; the dead host's request hangs
        await _until(lambda: crawler.in_flight() > 0 and frontier.statistics().done == 3)
        crawler.request_stop()
        await asyncio.sleep(0.05)
        assert not run.done()  # a first stop waits for the request in flight
        assert crawler.abandon_in_flight() == 1
        await asyncio.wait_for(run, 5)

    asyncio.run(main())
    assert fetcher.cancelled == [dead]
    assert dead not in [u for u, _ in sinks.logged] and dead not in sinks.exchanges
    s = frontier.statistics()
    assert (s.leased, s.done, s.queued) == (0, 3, 1)  # dead.example/p0 stays queued
    assert not crawler.counters.errors


def test_the_fast_path_starts_every_page_request_and_polls_for_big_hosts() -> None:
    """With a `StartingFetcher`, page requests sent with no delay left go out through
    `start` (none through `fetch`), and a host with a backlog of KEEP_TURN_BACKLOG or more
    gets its next response polled in."""
    pages = _site(150)
    crawler, fetcher, _, _ = _crawl(pages, ["http://a.example/p0"])
    assert isinstance(fetcher, StartingFakeFetcher)
    assert crawler.counters.pages == 150
    assert fetcher.started == 150 == len(fetcher.log) - 1  # every page (robots.txt: fetch())
    assert fetcher.polls > 0
    assert sum(fetcher.in_flight.values()) == 0
