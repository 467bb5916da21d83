"""A worker over its share of the hosts gives the excess back between two pages (a cluster
member joined after it leased them: `ShareCappedFrontier`): against the in-memory frontier
with a share the test sets, the fake fetcher and sinks. The batches with the most URLs left
go back, within a page; their URLs not fetched are queued again and fetched once, later, with
the host's delay kept across the hand-over."""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import Sequence
from typing import Any

from test_crawler_unit import HTML, FakeSinks, StartingFakeFetcher

from gossamer.config import CrawlSettings
from gossamer.engine.crawler import Crawler
from gossamer.fetch import FetchRequest, FetchResult
from gossamer.frontier import HostBatch, MemoryFrontier, Outcome, ShareCappedFrontier


class SharedFrontier(MemoryFrontier):
    """The in-memory frontier with a cluster worker's cap on its hosts, set by the test
    (`cap`, None: any): it leases up to the cap (as RedisFrontier._fair does) and answers
    `hosts_over_share()` as RedisFrontier does, from the hosts it holds. It records its
    leases and completions: (time, "lease" | "complete", host, URLs leased or outcomes,
    renew), and the hosts it holds after each (`held_after`)."""

    def __init__(self, **knobs: Any) -> None:
        super().__init__(**knobs)
        self.cap: int | None = None
        self.events: list[tuple[float, str, str, int, int]] = []
        self.held_after: list[int] = []
        self.completed = asyncio.Event()  # (called on the loop's thread: no I/O thread)
        self._hosts_of: dict[str, str] = {}  # token -> host

    def lease(self, max_hosts: int, per_host: int, now: float | None = None) -> list[HostBatch]:
        if self.cap is not None:
            max_hosts = min(max_hosts, self.cap - len(self._by_token))
            if max_hosts <= 0:
                return []
        out = super().lease(max_hosts, per_host, now)
        for b in out:
            self._hosts_of[b.token] = b.host
            self.events.append((time.time(), "lease", b.host, len(b.urls), 0))
            self.held_after.append(len(self._by_token))
        return out

    def complete(
        self,
        token: str,
        outcomes: Sequence[Outcome],
        next_fetch_at: float | None = None,
        renew: int = 0,
    ) -> HostBatch | None:
        host = self._hosts_of.pop(token)
        batch = super().complete(token, outcomes, next_fetch_at, renew)
        if batch is not None:
            self._hosts_of[batch.token] = batch.host
        self.events.append((time.time(), "complete", host, len(outcomes), renew))
        self.held_after.append(len(self._by_token))
        self.completed.set()
        return batch

    def hosts_over_share(self) -> int:
        return 0 if self.cap is None else max(0, len(self._by_token) - self.cap)

    def held(self) -> int:
        return len(self._by_token)


def _hosts(sizes: dict[str, int]) -> dict[str, Any]:
    """Pages without links: `sizes[host]` of them on each host."""
    return {
        f"http://{host}/p{i}": (200, HTML, b"<html><body>x</body></html>", ())
        for host, n in sizes.items()
        for i in range(n)
    }


def _crawler(
    pages: dict[str, Any], frontier: SharedFrontier, delay: float
) -> tuple[Crawler, StartingFakeFetcher]:
    seeds = sorted(pages)
    settings = CrawlSettings(
        seeds=seeds, scope="all", output="/tmp/unused", delay=delay, per_host=100
    )
    fetcher = StartingFakeFetcher(pages, 0.002)
    crawler = Crawler(
        settings, frontier=frontier, fetcher=fetcher, ip_of=lambda h: None, sinks=FakeSinks()
    )
    crawler.seed(seeds)
    return crawler, fetcher


def test_the_frontier_seam_is_the_share_capped_protocol() -> None:
    assert isinstance(SharedFrontier(), ShareCappedFrontier)
    assert not isinstance(MemoryFrontier(), ShareCappedFrontier)


def test_hosts_over_the_share_go_back_between_two_pages_most_urls_left_first() -> None:
    """4 hosts of 40, 30, 20 and 10 pages, all leased by a worker alone (one batch each, 20 ms
    between requests); after ~5 pages each its cap drops to 2 (a member joined): the batches
    of the two hosts with the most URLs left (a and b) are completed within a page, not
    renewed, with their URLs not fetched queued again; from then on it never holds more than
    2. Every page is fetched once in the end, and the 20 ms between two requests to a host
    hold across the hand-over. (Before: a's batch ran its 40 pages, 0.8 s, with the cap at 2
    from 0.1 s.)"""
    delay = 0.02
    sizes = {"a.example": 40, "b.example": 30, "c.example": 20, "d.example": 10}
    pages = _hosts(sizes)
    frontier = SharedFrontier()
    crawler, fetcher = _crawler(pages, frontier, delay)
    dropped_at = 0.0

    def join() -> None:
        nonlocal dropped_at
        assert frontier.held() == 4  # every host leased, none finished yet
        frontier.cap = 2
        dropped_at = time.time()

    async def main() -> None:
        asyncio.get_running_loop().call_later(0.1, join)
        await asyncio.wait_for(crawler.run(), 30)

    asyncio.run(main())
    assert dropped_at
    after = [
        (j, e) for j, e in enumerate(frontier.events) if e[0] >= dropped_at and e[1] == "complete"
    ]
    first_two = [e for _, e in after[:2]]
    assert sorted(host for _, _, host, _, _ in first_two) == ["a.example", "b.example"], after
    for t, _, host, n_outcomes, renew in first_two:
        # within a page (the delay, a response) and the loop's 50 ms look: 0.2 s is ample
        assert t - dropped_at < 0.2, (host, t - dropped_at)
        assert n_outcomes < sizes[host] and renew == 0, (host, n_outcomes, renew)
    # from then on, never more than its share
    assert max(frontier.held_after[after[1][0] :]) <= 2, frontier.held_after
    # none lost, none fetched twice
    fetched = [u for u, _, _ in fetcher.log if not u.endswith("/robots.txt")]
    assert sorted(fetched) == sorted(pages)
    assert frontier.statistics().done == sum(sizes.values())
    # the host's delay kept, across the batch given back and the next one too
    for host in sizes:
        spans = sorted((s, e) for u, s, e in fetcher.log if f"//{host}/" in u)
        gaps = [s2 - e1 for (_, e1), (s2, _) in itertools.pairwise(spans)]
        assert min(gaps) >= delay - 0.002, (host, min(gaps))


def test_a_batch_waiting_out_its_delay_goes_back_at_once_and_its_host_rests() -> None:
    """A 2 s delay: a worker holding 2 hosts, its cap dropped to 1 just after their first
    pages, gives one back at once (not after the 2 s wait: that request is not sent), and
    the host's next fetch time stays its last request's end + 2 s for whoever leases it
    next."""
    delay = 2.0
    pages = _hosts({"a.example": 5, "b.example": 4})
    frontier = SharedFrontier()
    crawler, fetcher = _crawler(pages, frontier, delay)
    dropped_at = 0.0

    def join() -> None:
        nonlocal dropped_at
        frontier.cap = 1
        dropped_at = time.time()

    first_pages = asyncio.Event()  # a's and b's first pages are in
    respond = fetcher._respond

    def counting(req: FetchRequest, start: float) -> FetchResult:
        result = respond(req, start)
        if len([u for u, _, _ in fetcher.log if not u.endswith("/robots.txt")]) >= 2:
            first_pages.set()
        return result

    fetcher._respond = counting  # type: ignore[method-assign]

    async def main() -> None:
        run = asyncio.ensure_future(crawler.run())
        await asyncio.wait_for(first_pages.wait(), 10)
        join()
        await asyncio.wait_for(frontier.completed.wait(), 10)
        crawler.request_stop()
        await asyncio.wait_for(run, 10)

    asyncio.run(main())
    completes = [e for e in frontier.events if e[1] == "complete"]
    t, _, host, n_outcomes, renew = completes[0]
    assert host == "a.example"  # 4 URLs left against b's 3
    assert t - dropped_at < 0.5 < delay, t - dropped_at  # not after the host's delay
    assert (n_outcomes, renew) == (1, 0)
    last_end = max(e for u, _, e in fetcher.log if "//a.example/p" in u)
    rest = frontier._hosts["a.example"].timing.next_fetch_at
    assert rest >= last_end + delay - 0.01, (rest, last_end)
    assert [u for u, _, _ in fetcher.log].count("http://a.example/p1") == 0
