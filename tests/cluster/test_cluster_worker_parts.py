"""The cluster worker's parts: the frontier wrapper waits out Redis outages and sizes leases;
the heartbeat thread beats while the event loop is blocked and survives a Redis restart."""

from __future__ import annotations

import asyncio
import math
import signal
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
import redis.exceptions

from gossamer.cluster._redis import Keys, boot_clock
from gossamer.cluster.crawls import create_crawl, load_crawl
from gossamer.cluster.heartbeat import Heartbeat
from gossamer.cluster.ipgate import RedisIpGate
from gossamer.cluster.joined import JoinedWorker, exhausted
from gossamer.cluster.members import Beat, Membership, PartitionView, WorkerStatus
from gossamer.cluster.stores import ClusterFrontier, RedisIo
from gossamer.config import CrawlSettings
from gossamer.engine.crawler import Crawler
from gossamer.fetch import FetchRequest
from gossamer.frontier import (
    Discovered,
    FrontierStats,
    FrontierStorageError,
    HostBatch,
    MemoryFrontier,
    Outcome,
    StaleLeaseError,
    Verdict,
)
from gossamer.frontier.redis import RedisFrontier, connect, token_owner
from gossamer.partition import Dynamic, Member
from gossamer.testweb.redisd import RedisServer
from gossamer.urls import fingerprint


class Flaky(MemoryFrontier):
    """Fails the first `failures` calls of lease and complete like an unreachable Redis."""

    def __init__(self, failures: int) -> None:
        super().__init__()
        self.failures = failures
        self.calls = 0

    def _maybe_fail(self) -> None:
        self.calls += 1
        if self.failures:
            self.failures -= 1
            if self.failures % 2:
                raise redis.exceptions.ConnectionError("refused")
            cause = redis.exceptions.TimeoutError("timed out")
            raise FrontierStorageError(0, "Redis unreachable for 60 s") from cause

    def lease(self, max_hosts: int, per_host: int, now: float | None = None) -> list[HostBatch]:
        self._maybe_fail()
        return super().lease(max_hosts, per_host, now)

    def complete(
        self,
        token: str,
        outcomes: Sequence[Outcome],
        next_fetch_at: float | None = None,
        renew: int = 0,
    ) -> HostBatch | None:
        self._maybe_fail()
        return super().complete(token, outcomes, next_fetch_at, renew)


def test_cluster_frontier_waits_out_outages_sizes_leases_and_knows_its_hosts() -> None:
    inner = Flaky(failures=3)
    urls = [f"http://h{i}.example/{k}" for i in range(2) for k in range(10)]
    inner.put_discovered([Discovered(u, u.split("/")[2], 0, fingerprint(u)) for u in urls])
    view = PartitionView(Dynamic(), "w1")
    view.update([Member("w1", 3.0), Member("w2", 1.0)])  # lease size 4 x 3 / 2 = 6
    f = ClusterFrontier(inner, view)
    batches = f.lease(2, 4)
    assert inner.failures == 0 and inner.calls == 4
    assert sorted(b.host for b in batches) == ["h0.example", "h1.example"]
    assert all(len(b.urls) == 6 for b in batches)
    assert f.hosts() == ("h0.example", "h1.example")
    b = batches[0]
    done = [Outcome(u.url, u.fp, Verdict.DONE, status=200) for u in b.urls]
    renewed = f.complete(b.token, done, None, renew=4)
    assert renewed is not None and len(renewed.urls) == 4  # the other 4 of 10
    assert f.hosts() == ("h0.example", "h1.example")
    f.complete(renewed.token, [], None)
    f.complete(batches[1].token, [], None)
    assert f.hosts() == ()


def test_exhausted() -> None:
    def stats(queued: int, leased: int, done: int) -> FrontierStats:
        return FrontierStats(queued, leased, done, 0, 0, 1, 0, 0, 0, 0, 0, None)

    assert exhausted(stats(0, 0, 5), None)
    assert not exhausted(stats(0, 1, 5), None)
    assert not exhausted(stats(3, 0, 5), None)
    assert exhausted(stats(3, 0, 5), 5) and not exhausted(stats(3, 0, 4), 5)


def test_heartbeats_go_on_while_the_caller_is_blocked_and_through_a_restart(
    redis_server: RedisServer, redis_url: str
) -> None:
    client = connect(redis_url)
    beats: list[Beat] = []
    membership = Membership(client, "c1", ttl=0.5)  # a beat every 0.1 s
    hb = Heartbeat(membership, lambda: WorkerStatus("w1", "m", 1, "crawling"), beats.append)
    try:
        hb.start()
        time.sleep(0.55)  # a blocked caller: the thread beats anyway
        assert len(beats) >= 4 and beats[0].members == (Member("w1"),)
        redis_server.stop()
        time.sleep(0.8)  # longer than the TTL
        redis_server.restart()  # on the main thread (a server dies with its thread)
        n = len(beats)
        deadline = time.monotonic() + 5
        while len(beats) < n + 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert len(beats) >= n + 2 and hb.failures > 0
        assert beats[-1].members == (Member("w1"),)
    finally:
        hb.stop()
        client.close()


def test_the_heartbeats_status_reads_the_crawlers_snapshot_not_its_counters(
    redis_url: str, tmp_path: Path
) -> None:
    """`JoinedWorker.status` (the heartbeat thread's) reads `Crawler.snapshot`, which the event
    loop publishes; the live counters, mutated by the loop, are not read across threads."""
    client = connect(redis_url)
    try:
        settings = CrawlSettings(seeds=["http://a.example/"], output=tmp_path, delay=0)
        crawl_id = create_crawl(client, settings.seeds, settings)
        record = load_crawl(client, crawl_id)
        worker = JoinedWorker(
            redis_url, client, record, "w1", settings, capacity=1.0, machine="m"
        )
        # (no crawl runs: the fetcher and sinks are never called)
        unused: Any = object()
        crawler = Crawler(
            settings, frontier=MemoryFrontier(), fetcher=unused, ip_of=lambda h: None,
            sinks=unused,
        )  # fmt: skip
        worker.crawler = crawler
        crawler.counters.pages, crawler.counters.requests = 5, 6
        crawler.counters.errors["fetch/error/x"] += 1
        crawler.counters.active_hosts = 1
        status = worker.status()
        assert (status.pages, status.requests, status.errors, status.state) == (0, 0, 0, "idle")
        crawler.publish_snapshot()  # (the loop does it every SNAPSHOT_INTERVAL_S)
        status = worker.status()
        assert (status.pages, status.requests, status.errors, status.state) == (
            5, 6, 1, "crawling",
        )  # fmt: skip
        # and what the heartbeat thread publishes
        beats: list[Beat] = []
        hb = Heartbeat(worker.membership, worker.status, beats.append)
        hb.start()
        try:
            deadline = time.monotonic() + 10
            while not beats and time.monotonic() < deadline:
                time.sleep(0.02)
        finally:
            hb.stop()
        assert beats and hb.failures == 0
        (mine,) = [s for s in worker.membership.statuses() if s.id == "w1"]
        assert (mine.pages, mine.requests, mine.errors) == (5, 6, 1)
    finally:
        client.close()


class Recorded:
    """A fetcher with the fast path that records the URLs it was asked for."""

    def __init__(self) -> None:
        self.urls: list[str] = []

    def start(self, request: FetchRequest) -> asyncio.Future[Any]:
        self.urls.append(request.url)
        fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        fut.set_result(request.url)
        return fut

    async def fetch(self, request: FetchRequest) -> Any:
        self.urls.append(request.url)
        return request.url

    def poll(self) -> None:
        pass

    async def aclose(self) -> None:
        pass


def test_a_worker_back_from_the_dead_gives_its_old_leases_back_before_any_request(
    redis_url: str, tmp_path: Path
) -> None:
    """A worker whose heartbeat record expired (frozen past the TTL) leases nothing until a
    beat goes through; that beat gives it a new incarnation, and a request on a lease of the
    old one is not sent (StaleLeaseError: the engine gives the batch back) while requests on
    other hosts go on; once no old lease is left, the fast path opens again."""
    client = connect(redis_url)
    settings = CrawlSettings(seeds=["http://a.example/"], output=tmp_path, delay=0)
    crawl_id = create_crawl(client, settings.seeds, settings)
    record = load_crawl(client, crawl_id)
    worker = JoinedWorker(redis_url, client, record, "w1", settings, capacity=1.0, machine="m")
    frontier = ClusterFrontier(RedisFrontier(client, crawl_id, owner="w1"), worker.view)
    gate = RedisIpGate(client, crawl_id, 1, owner="w1", ttl=record.heartbeat_ttl)
    worker.frontier, worker.gate = frontier, gate
    gate.lease_check = worker.confirm_lease
    try:
        worker.on_beat(worker.membership.beat(worker.status()))
        first = frontier.incarnation
        assert gate.alive_until == frontier.alive_until > boot_clock()
        (batch,) = frontier.lease(4, 5)
        assert token_owner(batch.token) == ("w1", first)
        # frozen past the TTL: its last beat is too old, its record gone
        frontier.alive_until = gate.alive_until = -math.inf
        client.delete(Keys(crawl_id).heartbeat("w1"))
        frontier.put_discovered([Discovered("http://b.example/", "b.example", 0,
                                            fingerprint("http://b.example/"))])  # fmt: skip
        assert frontier.lease(4, 5) == []  # not before a beat goes through
        back = worker.membership.beat(worker.status())
        assert back.expired and back.incarnation == first + 1
        worker.on_beat(back)
        assert frontier.old_hosts() == {batch.host}
        assert gate.alive_until == -math.inf  # requests take the slow path
        (other,) = frontier.lease(4, 5)  # a new lease, of the new incarnation
        assert token_owner(other.token) == ("w1", first + 1)
        fetcher = Recorded()
        guarded = gate.guard(fetcher)

        async def requests() -> None:
            async with gate, gate.hold("127.0.0.1"):
                with pytest.raises(StaleLeaseError):
                    await guarded.start(FetchRequest(batch.urls[0].url))
                assert await guarded.start(FetchRequest(other.urls[0].url))
                frontier.complete(batch.token, [])  # the engine gives the batch back
                assert frontier.old_hosts() == set()
                await guarded.start(FetchRequest(other.urls[0].url))
                assert gate.alive_until == frontier.alive_until  # the fast path again

        asyncio.run(requests())
        assert fetcher.urls == [other.urls[0].url] * 2  # nothing on the old lease
    finally:
        frontier.close()
        client.close()


def test_redis_io_runs_calls_in_order_on_one_daemon_thread_with_the_stop_signals_blocked() -> None:
    io = RedisIo()
    seen: list[tuple[int, str, bool]] = []

    def call(i: int) -> int:
        blocked = signal.pthread_sigmask(signal.SIG_BLOCK, [])
        thread = threading.current_thread()
        seen.append((i, thread.name, thread.daemon and {signal.SIGINT, signal.SIGTERM} <= blocked))
        time.sleep(0.001 * (i % 3))  # (a slower call does not let a later one pass it)
        return i * 2

    futures = [io.submit(call, i) for i in range(20)]
    failing = io.submit(lambda: 1 // 0)
    assert [f.result(timeout=10) for f in futures] == [i * 2 for i in range(20)]
    assert seen == [(i, "redis-io", True) for i in range(20)]
    with pytest.raises(ZeroDivisionError):
        failing.result(timeout=10)
    # shutdown waits for the calls submitted before it, and takes no more
    slow = io.submit(time.sleep, 0.2)
    io.shutdown(wait=True)
    assert slow.done()
    with pytest.raises(RuntimeError):
        io.submit(call, 0)
    io.shutdown()  # (again: nothing)
    # the main thread's mask is as it was
    assert signal.SIGTERM not in signal.pthread_sigmask(signal.SIG_BLOCK, [])
