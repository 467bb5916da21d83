"""Frozen statistics snapshots (`Crawler.snapshot`, `CrawlSnapshot`): the event loop publishes
them while it crawls; another thread (the cluster worker's heartbeat) reads them, never the
counters the loop mutates, so it never meets a dict changing size under it nor torn values."""

from __future__ import annotations

import asyncio
import dataclasses
import threading
from typing import Any

import pytest
from test_crawler_unit import FakeSinks, StartingFakeFetcher, _site

from gossamer.config import CrawlSettings
from gossamer.engine.crawler import SNAPSHOT_INTERVAL_S, Crawler, CrawlSnapshot
from gossamer.frontier import MemoryFrontier


def _crawler(hosts: int, pages: int, latency: float) -> Crawler:
    site: dict[str, Any] = {}
    for h in range(hosts):
        site.update(_site(pages, f"h{h}.example"))
        # a missing page per host: new keys in `statuses` as the crawl goes
        site[f"http://h{h}.example/p{pages - 1}"] = (400 + h, "text/html", b"", ())
    seeds = [f"http://h{h}.example/p0" for h in range(hosts)]
    settings = CrawlSettings(seeds=seeds, scope="all", output="/tmp/unused", delay=0.02)
    crawler = Crawler(
        settings, frontier=MemoryFrontier(), fetcher=StartingFakeFetcher(site, latency),
        ip_of=lambda h: None, sinks=FakeSinks(),
    )  # fmt: skip
    crawler.seed(seeds)
    return crawler


def test_a_thread_reading_snapshots_while_the_loop_crawls_sees_them_whole() -> None:
    crawler = _crawler(hosts=8, pages=25, latency=0.005)  # ~1.5 s of crawling
    seen: list[CrawlSnapshot] = []
    failures: list[BaseException] = []
    done = threading.Event()

    def hammer() -> None:
        try:
            while not done.is_set():
                snap = crawler.snapshot
                # what the heartbeat does with one, and more: iterate every dict
                assert sum(snap.statuses.values()) <= snap.requests
                assert snap.error_count == sum(v for _, v in snap.errors.items())
                assert snap.pages <= sum(snap.statuses.values())
                list(snap.dropped.items())
                if not seen or seen[-1] is not snap:
                    seen.append(snap)
        except BaseException as exc:  # handed to the test's thread
            failures.append(exc)

    reader = threading.Thread(target=hammer, name="hammer")
    reader.start()
    try:
        asyncio.run(asyncio.wait_for(crawler.run(), 30))
    finally:
        done.set()
        reader.join()
    assert not failures, failures
    c = crawler.counters
    assert c.pages == 8 * 25
    pages = [s.pages for s in seen]
    assert pages == sorted(pages), pages  # monotone
    # published while crawling (every SNAPSHOT_INTERVAL_S), not only at the start and end
    assert len({s.taken_at for s in seen}) >= 3, pages
    assert any(0 < p < c.pages for p in pages), pages
    final = crawler.snapshot  # published as run() returns: the counters' last values
    assert (final.pages, final.requests, final.bytes) == (c.pages, c.requests, c.bytes)
    assert dict(final.statuses) == dict(c.statuses) and len(final.statuses) == 9
    assert final.active_hosts == 0 and final.in_flight == 0


def test_a_snapshot_is_frozen_and_does_not_follow_the_counters() -> None:
    crawler = _crawler(hosts=1, pages=3, latency=0.001)
    before = crawler.snapshot
    assert before.pages == 0 and dict(before.statuses) == {}
    crawler.counters.pages = 7
    crawler.counters.statuses[200] += 7
    assert crawler.snapshot is before and before.pages == 0  # until the loop publishes
    with pytest.raises(dataclasses.FrozenInstanceError):
        before.pages = 1  # type: ignore[misc]
    with pytest.raises(TypeError):
        before.statuses[200] = 1  # type: ignore[index]
    after = crawler.publish_snapshot()
    assert crawler.snapshot is after and after.pages == 7 and after.statuses == {200: 7}
    crawler.counters.statuses[200] += 1
    assert after.statuses == {200: 7}  # a copy


def test_the_publishing_interval_is_bounded() -> None:
    # the heartbeat beats every TTL/5 s (2 s by default): snapshots must be fresher
    assert 0.1 <= SNAPSHOT_INTERVAL_S <= 1.0
