"""Frontier calls off the event loop (`OffLoopFrontier`, the cluster worker's Redis frontier):
the engine awaits them on the frontier's I/O thread, so a slow call (a Redis round trip, an
outage waited out) holds only the batch that made it, never the loop; a frontier without
an I/O thread (SQLite, memory) is still called inline, on the loop's thread."""

from __future__ import annotations

import asyncio
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from test_crawler_unit import FakeFetcher, FakeSinks, RobotsChainFetcher, _crawl, _site

from gossamer.cluster.looplag import LoopLag
from gossamer.config import CrawlSettings
from gossamer.engine.crawler import Crawler
from gossamer.frontier import MemoryFrontier, OffLoopFrontier


class _ThreadNoting(MemoryFrontier):
    """A MemoryFrontier noting the thread of each engine call; `slow` seconds a completion.
    With `lag` set, a completion notes how many times `lag` sampled the loop while it lasted
    (`ticks`), and lasts on until that is 3 or `wait_ticks` seconds more have passed."""

    def __init__(self, slow: float = 0.0, wait_ticks: float = 0.0, **kw: Any) -> None:
        super().__init__(**kw)
        self.slow = slow
        self.wait_ticks = wait_ticks
        self.lag: LoopLag | None = None
        self.ticks: list[int] = []
        self.threads: Counter[tuple[str, str]] = Counter()

    def _note(self, call: str) -> None:
        self.threads[call, threading.current_thread().name.split("_")[0]] += 1

    def lease(self, max_hosts: int, per_host: int, now: float | None = None) -> Any:
        self._note("lease")
        return super().lease(max_hosts, per_host, now)

    def put_discovered(self, items: Any) -> int:
        self._note("put_discovered")
        return super().put_discovered(items)

    def complete(self, token: str, outcomes: Any, next_fetch_at: Any = None, renew: int = 0) -> Any:
        self._note("complete")
        samples = self.lag.lags if self.lag is not None else []
        began = len(samples)
        time.sleep(self.slow)  # a round trip to a far or paused Redis
        if self.lag is not None:
            bound = time.monotonic() + self.wait_ticks
            while len(samples) < began + 3 and time.monotonic() < bound:
                time.sleep(0.005)
            self.ticks.append(len(samples) - began)
        return super().complete(token, outcomes, next_fetch_at, renew)

    def extend(self, token: str, until: float) -> float:
        self._note("extend")
        return super().extend(token, until)

    def statistics(self) -> Any:
        self._note("statistics")
        return super().statistics()

    def set_host_delay(self, host: str, crawl_delay: float | None) -> None:
        self._note("set_host_delay")
        super().set_host_delay(host, crawl_delay)


class _OffLoop(_ThreadNoting):
    def __init__(self, slow: float = 0.0, wait_ticks: float = 0.0, **kw: Any) -> None:
        super().__init__(slow, wait_ticks, **kw)
        self.io_executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="frontier-io")

    def close(self) -> None:
        self.io_executor.shutdown()
        super().close()


def test_an_off_loop_frontier_is_called_on_its_io_thread_only() -> None:
    frontier = _OffLoop(lease_ttl=2.0, default_delay=0.25)
    assert isinstance(frontier, OffLoopFrontier)
    # 8 pages 0.25 s apart on a 2 s lease: the batch extends its lease too
    _crawl(
        _site(8), ["http://a.example/p0"], latency=0.0, stop_after=6.0, frontier=frontier,
        delay=0.25, lease_ttl=2.0, per_host=20,
    )  # fmt: skip
    frontier.close()
    # the seeds go in before the crawl, from the caller's thread (`Crawler.seed`)
    assert frontier.threads.pop(("put_discovered", "MainThread")) == 1
    # the statistics too (the idle wait's: the crawl's end), in order with the rest
    calls = {call for call, _ in frontier.threads if call != "statistics"}
    assert calls == {"lease", "put_discovered", "complete", "extend"}, frontier.threads
    assert {thread for _, thread in frontier.threads} == {"frontier-io"}, frontier.threads


def _crawl_with_a_crawl_delay(frontier: MemoryFrontier) -> None:
    """Crawl 3 pages of a host whose robots.txt (at the end of a redirect) asks for a
    Crawl-delay: the crawler stores it with `set_host_delay`; the idle wait's statistics
    end the crawl."""
    pages = _site(3)
    hop = (("Location", "http://a.example/robots-moved/1.txt"),)
    pages["http://a.example/robots-moved/0.txt"] = (301, "text/plain", b"", hop)
    robots = b"User-agent: *\nCrawl-delay: 0.01\n"
    pages["http://a.example/robots-moved/1.txt"] = (200, "text/plain", robots, ())
    seeds = ["http://a.example/p0"]
    settings = CrawlSettings(seeds=seeds, scope="all", output="/tmp/unused", delay=0)
    crawler = Crawler(
        settings, frontier=frontier, fetcher=RobotsChainFetcher(pages, 0.001),
        ip_of=lambda h: None, sinks=FakeSinks(),
    )  # fmt: skip
    crawler.seed(seeds)
    asyncio.run(asyncio.wait_for(crawler.run(), 30))
    assert crawler.counters.pages == 3


def test_the_idle_waits_statistics_and_a_crawl_delay_go_to_the_io_thread() -> None:
    # both were in the default executor, out of order with the I/O thread's calls
    frontier = _OffLoop()
    _crawl_with_a_crawl_delay(frontier)
    frontier.close()
    assert frontier.threads["set_host_delay", "frontier-io"] == 1, frontier.threads
    assert frontier.threads["statistics", "frontier-io"] >= 1, frontier.threads
    del frontier.threads["put_discovered", "MainThread"]  # the seeds (`Crawler.seed`)
    assert {thread for _, thread in frontier.threads} == {"frontier-io"}, frontier.threads


def test_without_an_io_thread_they_stay_where_they_were() -> None:
    # SQLite, memory: the statistics and set_host_delay in the default executor, as before
    frontier = _ThreadNoting()
    _crawl_with_a_crawl_delay(frontier)
    assert frontier.threads["set_host_delay", "asyncio"] == 1, frontier.threads
    assert frontier.threads["statistics", "asyncio"] >= 1, frontier.threads
    assert {thread for (call, thread) in frontier.threads if call == "lease"} == {"MainThread"}


def test_a_frontier_without_io_thread_is_called_inline() -> None:
    frontier = _ThreadNoting()
    assert not isinstance(frontier, OffLoopFrontier)
    _crawl(_site(10), ["http://a.example/p0"], frontier=frontier)
    inline = {thread for call, thread in frontier.threads if call != "statistics"}
    assert inline == {"MainThread"}, frontier.threads
    assert frontier.statistics().done == 10


def _lag_of_crawl(frontier: _ThreadNoting) -> LoopLag:
    """Crawl 3 hosts of 5 pages with `frontier`, measuring the loop's lag meanwhile (6 slow
    completions, 2 a host: 6 hosts only made 12); the frontier counts the samples taken
    during each completion."""
    pages: dict[str, Any] = {}
    for h in range(3):
        pages.update(_site(5, f"h{h}.example"))
    lag = frontier.lag = LoopLag(interval=0.005)
    seeds = [f"http://h{h}.example/p0" for h in range(3)]
    settings = CrawlSettings(seeds=seeds, scope="all", output="/tmp/unused", delay=0)
    crawler = Crawler(
        settings, frontier=frontier, fetcher=FakeFetcher(pages, 0.001), ip_of=lambda h: None,
        sinks=FakeSinks(),
    )  # fmt: skip
    crawler.seed(seeds)

    async def main() -> None:
        async with lag:
            await asyncio.wait_for(crawler.run(), 30)

    asyncio.run(main())
    assert frontier.statistics().done == 15
    return lag


def test_a_slow_frontier_call_off_the_loop_does_not_block_it() -> None:
    # each completion takes 0.3 s (Redis far away, or paused): inline it blocks the loop for
    # 0.3 s a batch; on the I/O thread the loop goes on meanwhile (its lag stays at a few ms
    # on a quiet machine: a figure, not asserted, since a loaded machine's scheduler adds its
    # own). So each completion on the I/O thread lasts until the loop has been sampled three
    # times (10 s at most): it sees them; inline it can see none.
    off = _OffLoop(slow=0.3, wait_ticks=10.0)
    lag = _lag_of_crawl(off)
    off.close()
    assert len(off.ticks) == 6 and min(off.ticks) >= 3, (off.ticks, lag.statistics())
    inline = _ThreadNoting(slow=0.3)
    lag = _lag_of_crawl(inline)  # what the test would see on the old engine
    assert inline.ticks == [0] * 6, inline.ticks
    assert lag.max_ms >= 290, lag.statistics()


def test_loop_lag_measures_a_blocked_loop() -> None:
    lag = LoopLag(interval=0.005)

    async def main() -> None:
        async with lag:
            await asyncio.sleep(0.05)
            time.sleep(0.2)  # noqa: ASYNC251 (the loop blocked, on purpose)
            await asyncio.sleep(0.05)

    asyncio.run(main())
    assert lag.max_ms >= 190, lag.statistics()
    assert lag.p99_ms <= lag.max_ms
    stats = lag.statistics()
    assert set(stats) == {"loop_lag_max_ms", "loop_lag_p99_ms", "loop_lag_samples"}
    assert stats["loop_lag_samples"] == len(lag.lags) > 5
    assert LoopLag().statistics() == {
        "loop_lag_max_ms": 0.0, "loop_lag_p99_ms": 0.0, "loop_lag_samples": 0,
    }  # fmt: skip
