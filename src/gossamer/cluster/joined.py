"""A worker's life in a crawl it joined (`JoinedWorker`): its status record, what each
heartbeat changes (the member list, a stop when the crawl ends or the worker is asked to
leave), the fencing of requests after a freeze, the session around the crawl (heartbeats,
the IP gate's refresher) and leaving (the crawl marked finished when nothing is left, the
worker deregistered).

The heartbeat thread calls `status` and `on_beat`; they read the crawler's last published
snapshot and never touch what the event loop mutates, and they reach the crawler only
through `loop.call_soon_threadsafe`.
"""

from __future__ import annotations

import asyncio
import collections
import heapq
import logging
import os
import time
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from typing import Any

from ..config import CrawlSettings
from ..engine.crawler import Crawler
from ..engine.machine import ResourceSampler
from ..fetch import FetchRequest
from ..frontier import FrontierStats, StaleLeaseError
from ..urls import URLError, host_key
from ._redis import Patience, RedisClient, retrying, wait_replicas
from .crawls import CrawlRecord, mark_finished, refresh_summary
from .heartbeat import Heartbeat
from .ipgate import RedisIpGate
from .looplag import LoopLag
from .members import STATUS_KEYS_MAX, Beat, Membership, PartitionView, WorkerStatus
from .stores import ClusterFrontier

__all__ = ["JoinedWorker", "exhausted"]

_log = logging.getLogger(__name__)


def exhausted(stats: FrontierStats, max_pages: int | None) -> bool:
    """Whether a crawl is over: nothing leased, and nothing queued or the page budget
    spent (the engine's own test for the end)."""
    return not stats.leased and (
        stats.queued == 0 or (max_pages is not None and stats.done >= max_pages)
    )


class _PageRate:
    """Pages per second over the last ~5 s, from samples of a counter."""

    def __init__(self, window: float = 5.0) -> None:
        self.window = window
        self.samples: collections.deque[tuple[float, int]] = collections.deque()

    def add(self, t: float, pages: int) -> float:
        s = self.samples
        s.append((t, pages))
        while len(s) > 2 and t - s[1][0] >= self.window:
            s.popleft()
        t0, p0 = s[0]
        return (pages - p0) / (t - t0) if t > t0 else 0.0


def _most_common(counts: Mapping[Any, int]) -> dict[str, int]:
    """The STATUS_KEYS_MAX largest counts, keys as str (a status record's JSON)."""
    top = heapq.nlargest(STATUS_KEYS_MAX, counts.items(), key=lambda kv: kv[1])
    return {str(k): v for k, v in top}

class JoinedWorker:
    """One worker's life in a crawl: what the heartbeat, the session and the exit share."""

    def __init__(
        self,
        url: str,
        client: RedisClient,
        record: CrawlRecord,
        worker_id: str,
        settings: CrawlSettings,
        *,
        capacity: float,
        machine: str,
    ) -> None:
        self.url = url
        self.client = client
        self.record = record
        self.id = worker_id
        self.settings = settings
        self.capacity = capacity
        self.machine = machine
        self.pid = os.getpid()
        self.started_at = time.time()
        self.membership = Membership(client, record.id, ttl=record.heartbeat_ttl)
        self.view = PartitionView(record.strategy(), worker_id)
        self.crawler: Crawler | None = None
        self.frontier: ClusterFrontier | None = None
        self.gate: RedisIpGate | None = None
        self.loop: asyncio.AbstractEventLoop | None = None
        self.loop_lag = LoopLag()
        self._resources = ResourceSampler(settings.output)
        self.stop_reason: str | None = None
        #: how long its Redis calls wait out an outage: for ever until it stops, then
        #: `stop_patience` seconds; none after a second stop signal (docs/cluster.md, "A stop
        #: while Redis is down")
        self.patience = Patience(settings.cluster.stop_patience)
        self._rate = _PageRate()
        self._state = "starting"
        self.crawl_state = record.state
        self.last_beat: Beat | None = None
        ttl = self.membership.ttl
        # how much sooner than the TTL the worker stops trusting its last beat (the IP
        # gate's margin: the server starts the TTL when the beat arrives, not when sent)
        self.alive_margin = min(max(0.2 * ttl, 0.5), ttl / 2)

    def status(self, state: str | None = None) -> WorkerStatus:
        """This worker's status record now (called from the heartbeat thread too: it reads
        the crawler's last published snapshot, never the counters the loop mutates)."""
        c = self.crawler.snapshot if self.crawler is not None else None
        pages = c.pages if c is not None else 0
        res = self._resources.sample(c.wire_in, c.wire_out) if c is not None else (
            self._resources.sample())  # fmt: skip
        disk_low = self.crawler is not None and self.crawler.disk.tripped is not None
        if state is None:
            state = self._state
            if self.stop_reason is not None or disk_low:
                state = "stopping"
            elif c is not None:
                state = "crawling" if c.active_hosts else "idle"
        return WorkerStatus(
            id=self.id,
            machine=self.machine,
            pid=self.pid,
            state=state,
            capacity=self.capacity,
            hosts=self.frontier.hosts() if self.frontier is not None else (),
            pages=pages,
            requests=c.requests if c is not None else 0,
            errors=c.error_count if c is not None else 0,
            pages_per_s=round(self._rate.add(time.monotonic(), pages), 1),
            out=str(self.settings.output),
            started_at=self.started_at,
            body_bytes=c.bytes if c is not None else 0,
            statuses=_most_common(c.statuses if c is not None else {}),
            outcomes=_most_common(c.outcomes if c is not None else {}),
            cpu_percent=res.cpu_percent,
            rss_bytes=res.rss_bytes,
            disk_free_bytes=res.disk_free_bytes,
            bytes_in_per_s=res.bytes_in_per_s,
            bytes_out_per_s=res.bytes_out_per_s,
            disk_low=disk_low,
        )

    def on_beat(self, beat: Beat) -> None:
        """From the heartbeat thread: new members for the partition; a stop when the crawl
        is no longer running or this worker is asked to leave."""
        if beat.expired and self._state != "starting":
            _log.warning(
                f"worker {self.id}: its heartbeat record had expired (frozen or cut "
                f"off for over {self.membership.ttl:g} s); it is back in the crawl",
                extra={"worker_id": self.id},
            )
        self.view.update(beat.members)
        self.view.dead = beat.dead
        self.last_beat = beat
        self.live(beat)
        self.crawl_state = beat.crawl_state
        reason = None
        if beat.crawl_state != "running":
            reason = f"the crawl is {beat.crawl_state or 'gone'}"
        elif beat.stop_requested:
            reason = "asked to stop"
        if reason is not None and self.stop_reason is None:
            self.stop_reason = reason
            self.patience.stopping()
            crawler, loop = self.crawler, self.loop
            if crawler is not None and loop is not None:
                loop.call_soon_threadsafe(crawler.request_stop)

    def on_stop_signal(self, count: int) -> None:
        """SIGINT/SIGTERM number `count` (on the loop): the first bounds the worker's waits
        for an unreachable Redis to its patience, the second ends them now."""
        if count == 1:
            self.patience.stopping()
        else:
            self.patience.give_up("signal")

    def live(self, beat: Beat) -> None:
        """A beat went through: this worker counts alive until its send time + TTL (minus
        a margin), under the beat's incarnation (a new one when its record had expired).
        Its requests take the fast path again only once no lease of an earlier
        incarnation is left (`confirm_lease` gives those back)."""
        frontier, gate = self.frontier, self.gate
        until = beat.sent + self.membership.ttl - self.alive_margin
        if frontier is not None:
            frontier.set_incarnation(beat.incarnation)  # before the window opens
            frontier.alive_until = until
        if gate is not None and (frontier is None or not frontier.old_hosts()):
            gate.alive_until = until

    async def confirm_lease(self, request: FetchRequest) -> None:
        """Before a request made outside the gate's `alive_until` (the worker was frozen or
        cut off from Redis for most of a TTL): wait for a heartbeat; then a request on a
        lease of an earlier incarnation (the worker was counted dead meanwhile) is not
        sent: StaleLeaseError, and the engine completes the batch with what it fetched (the
        URLs left go back; if the lease was reclaimed, the completion is refused and those
        pages are fetched again by the new holder, as after a lease's expiry). Not asked of
        Redis: a worker whose member list is a beat behind may still reclaim such a lease
        after the answer. Once no such lease is left, requests take the fast path again."""
        gate, frontier = self.gate, self.frontier
        if gate is None or frontier is None:
            return
        # (set by the heartbeat thread: polled, rarely — only after a freeze or an outage)
        while True:
            if frontier.alive():
                break
            await asyncio.sleep(0.02)
        old = frontier.old_hosts()
        if not old:
            gate.alive_until = frontier.alive_until
            return
        try:
            host = host_key(request.url)
        except URLError:
            return
        if host in old:
            raise StaleLeaseError(f"the lease of {host} was taken before this worker was "
                                  "counted dead: given back")  # fmt: skip

    @asynccontextmanager
    async def session(self, crawler: Crawler, gate: RedisIpGate) -> AsyncIterator[None]:
        """Around the crawl: heartbeats and the gate's refresher; on the way out, mark the
        crawl finished if its frontier is exhausted, then leave the member list."""
        self.crawler = crawler
        self.loop = asyncio.get_running_loop()
        self._state = "crawling"
        if self.stop_reason is not None:  # seen by the first beat, before the crawler was
            crawler.request_stop()
        heartbeat = Heartbeat(
            Membership(self.client, self.record.id, ttl=self.record.heartbeat_ttl),
            self.status,
            self.on_beat,
            self.patience,
        )
        heartbeat.start()
        try:
            async with gate, self.loop_lag:
                yield
        finally:
            await asyncio.to_thread(heartbeat.stop)
            # (Redis round trips, waited out through an outage: not on the loop's thread;
            # on the I/O thread, after the frontier calls queued before)
            io = self.frontier.io_executor if self.frontier is not None else None
            await asyncio.get_running_loop().run_in_executor(io, self._leave)

    def _leave(self) -> None:
        """Mark the crawl finished when nothing is left, then deregister (a last status
        record stays for `gossamer status`)."""
        assert self.frontier is not None
        deadline = time.monotonic() + 2 * self.membership.ttl
        stats = self.frontier.fresh_statistics(deadline)
        if exhausted(stats, self.settings.max_pages):
            retrying(
                lambda: mark_finished(self.client, self.record),
                what="crawl record",
                deadline=deadline,
                patience=self.patience,
            )
            cl = self.settings.cluster
            retrying(
                lambda: wait_replicas(
                    self.client, self.record.id, cl.replica_acks, cl.replica_ack_timeout
                ),
                what="crawl record",
                deadline=deadline,
                patience=self.patience,
            )
        final = self.status("stopped")
        state = retrying(
            lambda: self.membership.deregister(final),
            what="members",
            deadline=deadline,
            patience=self.patience,
        )
        if state == "stopped":
            refresh_summary(self.client, self.record.id)
        self.crawl_state = state

