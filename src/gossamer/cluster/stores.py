"""A cluster worker's stores on the crawl's Redis: its frontier, robots store and IP gate,
each call on the worker's one Redis I/O thread and retried through Redis outages. The cluster
registers the frontier backend "redis"; the runner never imports this package.
"""

from __future__ import annotations

import contextlib
import logging
import math
import queue
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Executor, Future, InvalidStateError
from dataclasses import dataclass
from typing import Any, ClassVar, Final, Generic, ParamSpec, Protocol, TypeVar

from ..config import CrawlSettings
from ..frontier import (
    Discovered,
    Frontier,
    FrontierStats,
    FrontierUnreachable,
    HostBatch,
    Outcome,
    Outlinks,
    ShareCappedFrontier,
)
from ..frontier._registry import FrontierPlace
from ..frontier._registry import open_frontier as open_named_frontier
from ..frontier.digests import Capture, DigestStore, RedisDigestStore
from ..frontier.redis import token_owner
from ..neardup import NearDupStore, RedisNearDupStore
from ..robots_store import RedisRobotsStore, RobotsRecord, RobotsStore
from ..runner.build import Backends, dedups_payloads
from ..runner.stopping import hold_stop_signals
from ._redis import (
    Patience,
    RedisClient,
    boot_clock,
    retrying,
)
from .crawls import (
    CrawlRecord,
)
from .ipgate import RedisIpGate
from .members import PartitionView

_log = logging.getLogger(__name__)

__all__ = [
    "CLUSTER",
    "ClusterDigestStore",
    "ClusterFrontier",
    "ClusterNearDupStore",
    "ClusterRobotsStore",
    "ClusterStores",
    "RedisIo",
    "cluster_stores",
]

#: a cluster worker: the crawl's frontier in Redis
CLUSTER: Final = Backends(frontier="redis")
STATS_MAX_AGE = 0.1  # seconds ClusterFrontier.statistics() answers from its last snapshot

_P = ParamSpec("_P")
_T = TypeVar("_T")


class _Closing(Protocol):
    def close(self) -> None: ...


#: a store a worker reaches through Redis besides its frontier
_S = TypeVar("_S", bound=_Closing)


class RedisIo(Executor):
    """The worker's Redis I/O thread: one thread running the calls submitted to it in order
    (the frontier's, the robots store's, the IP gate's, and the start-up's: the first beat,
    opening the frontier). A daemon thread that keeps SIGINT/SIGTERM blocked: a stop while a
    call waits for a paused Redis (SIGSTOP: redis-py waits for the reply, however long) is
    taken by the main thread, and the worker can exit without joining a thread that may never
    return (a ThreadPoolExecutor's threads are joined at exit: the worker would hang until
    Redis answered). `shutdown(wait=True)` waits for every call submitted before it.

    `abandon()` (a stopping worker gave up on Redis: `Patience`) fails every call not
    finished with FrontierUnreachable at once, and every call submitted later: what waits
    for them goes on, while the thread may still sit in a call (a paused Redis's reply),
    which is never waited for again, not even by `shutdown(wait=True)`."""

    def __init__(self, name: str = "redis-io") -> None:
        self._calls: queue.SimpleQueue[Callable[[], None] | None] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._closed = False
        self._abandoned = False
        self._unfinished: set[Future[Any]] = set()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        # started with the signals blocked (a thread inherits the mask): none lands on it
        with hold_stop_signals():
            self._thread.start()

    def submit(
        self, fn: Callable[_P, _T], /, *args: _P.args, **kwargs: _P.kwargs
    ) -> Future[_T]:
        future: Future[_T] = Future()

        def call() -> None:
            with self._lock:  # (not failed by abandon() before it ran, nor cancelled)
                if future.done() or not future.set_running_or_notify_cancel():
                    return
            try:
                result = fn(*args, **kwargs)
            except BaseException as exc:  # handed to the waiter, as a ThreadPoolExecutor does
                with contextlib.suppress(InvalidStateError):  # (abandoned meanwhile)
                    future.set_exception(exc)
            else:
                with contextlib.suppress(InvalidStateError):
                    future.set_result(result)
            finally:
                with self._lock:
                    self._unfinished.discard(future)

        with self._lock:
            if self._abandoned:
                future.set_exception(_abandoned())
                return future
            if self._closed:
                raise RuntimeError("cannot schedule new calls after shutdown")
            self._unfinished.add(future)
            self._calls.put(call)
        return future

    def abandon(self) -> None:
        """Fail every unfinished call, and every later one, with FrontierUnreachable."""
        with self._lock:
            self._abandoned = True
            unfinished, self._unfinished = self._unfinished, set()
            for future in unfinished:
                with contextlib.suppress(InvalidStateError):
                    future.set_exception(_abandoned())

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        with self._lock:
            if not self._closed:
                self._closed = True
                self._calls.put(None)
        if wait and not self._abandoned and threading.current_thread() is not self._thread:
            self._thread.join()

    def _run(self) -> None:
        while (call := self._calls.get()) is not None:
            call()


def _abandoned() -> FrontierUnreachable:
    return FrontierUnreachable(0, "Redis unreachable: the stopping worker gave up on it")


class ClusterFrontier:
    """The worker's `Frontier`: the crawl's RedisFrontier, with every call retried through
    Redis outages (with back-off, however long while the worker crawls: its leases and
    outcomes are worth waiting for; once it stops, for its `patience` only), lease sizes
    from the partition view, and the hosts in hand recorded.

    An `OffLoopFrontier`: the engine makes its calls (and the robots store's) on
    `io_executor`, one dedicated thread, which the worker's IP gate shares; each is a
    network round trip, and through an outage a wait of seconds, that the event loop does
    not sit through (docs/cluster.md, "Redis off the event loop")."""

    def __init__(
        self,
        inner: Frontier,
        view: PartitionView,
        io_executor: Executor | None = None,
        patience: Patience | None = None,
    ) -> None:
        self.inner = inner
        self.view = view
        self.patience = patience
        # (the inner frontier's own count: RedisFrontier's under a share, none otherwise)
        self._over_share: Callable[[], int] | None = (
            inner.hosts_over_share if isinstance(inner, ShareCappedFrontier) else None
        )
        # one thread: calls keep the order the engine makes them in (links before the
        # batch's completion), as they did on the loop's thread (the worker's start-up made
        # its first calls on it already: it passes it here)
        self.io_executor = io_executor if io_executor is not None else RedisIo()
        self._hosts: dict[str, str] = {}  # lease token -> host, while held
        # lease token -> (its URLs, when it expires on the frontier's clock), while held
        self._leases: dict[str, tuple[int, float]] = {}
        self._stats: tuple[float, FrontierStats] | None = None
        self._closed = False
        self.clock: Callable[[], float] = getattr(inner, "clock", time.time)
        #: until when (boot clock) this worker surely counts alive, so that its leases are
        #: its own: its last heartbeat's send time + TTL - a margin (the worker sets it).
        #: After it (frozen, cut off) it leases nothing and renews nothing: other workers
        #: may be reclaiming its hosts (cluster.members), and it may be a zombie.
        self.alive_until = math.inf
        #: its incarnation (cluster.members), which its lease tokens carry
        self.incarnation = 0

    def held_leases(self) -> tuple[int, int, float]:
        """The leases this worker holds (not completed), their URLs, and the seconds until
        the last of them expires (0: none): what a worker giving up on Redis leaves to
        expire. Safe from another thread; no round trip."""
        leases = list(self._leases.copy().values())
        if not leases:
            return 0, 0, 0.0
        last = max(expires for _, expires in leases)
        return len(leases), sum(n for n, _ in leases), max(0.0, last - self.clock())

    def set_incarnation(self, incarnation: int) -> None:
        """This worker's incarnation from now on (its new leases' tokens carry it)."""
        self.incarnation = incarnation
        if hasattr(self.inner, "incarnation"):
            self.inner.incarnation = incarnation

    def alive(self) -> bool:
        return boot_clock() < self.alive_until

    def old_hosts(self) -> set[str]:
        """The hosts this worker holds under a lease of an earlier incarnation (taken before
        it was counted dead: other workers may have reclaimed them, or may still do so
        while their member lists are a beat behind). Safe from another thread."""
        current = self.incarnation
        return {
            h for t, h in self._hosts.copy().items()
            if (owner := token_owner(t)) is not None and owner[1] != current
        }  # fmt: skip

    def hosts(self) -> tuple[str, ...]:
        """The hosts this worker holds leases on (safe to call from another thread)."""
        return tuple(sorted(set(self._hosts.copy().values())))

    def _held(self, batches: Sequence[HostBatch]) -> None:
        for b in batches:
            self._hosts[b.token] = b.host
            self._leases[b.token] = (len(b.urls), b.expires_at)

    def _released(self, token: str) -> None:
        self._hosts.pop(token, None)
        self._leases.pop(token, None)

    def _retrying(self, fn: Callable[[], _T], deadline: float = math.inf) -> _T:
        return retrying(fn, what="frontier", deadline=deadline, patience=self.patience)

    def hosts_over_share(self) -> int:
        """The hosts held over this worker's share (`RedisFrontier.hosts_over_share`: a
        member joined since they were leased); the engine gives them back. No round trip."""
        return self._over_share() if self._over_share is not None else 0

    def put_discovered(self, items: Sequence[Discovered | Outlinks]) -> int:
        return self._retrying(lambda: self.inner.put_discovered(items))

    def lease(self, max_hosts: int, per_host: int, now: float | None = None) -> list[HostBatch]:
        if not self.alive():  # until the next heartbeat (see alive_until)
            return []
        size = self.view.lease_size(per_host) if per_host else 0
        batches = self._retrying(lambda: self.inner.lease(max_hosts, size, now))
        self._held(batches)
        return batches

    def complete(
        self,
        token: str,
        outcomes: Sequence[Outcome],
        next_fetch_at: float | None = None,
        renew: int = 0,
    ) -> HostBatch | None:
        size = self.view.lease_size(renew) if renew and self.alive() else 0
        try:
            batch = self._retrying(
                lambda: self.inner.complete(token, outcomes, next_fetch_at, size)
            )
        except FrontierUnreachable:
            raise  # (given up on Redis: the lease stays held there, until it expires)
        except BaseException:
            self._released(token)
            raise
        self._released(token)
        if batch is not None:
            self._held((batch,))
        return batch

    def extend(self, token: str, until: float) -> float:
        expires = self._retrying(lambda: self.inner.extend(token, until))
        if token in self._leases:
            self._leases[token] = (self._leases[token][0], expires)
        return expires

    def reclaim_expired(self, now: float | None = None) -> int:
        return self._retrying(lambda: self.inner.reclaim_expired(now))

    def set_host_delay(self, host: str, crawl_delay: float | None) -> None:
        self._retrying(lambda: self.inner.set_host_delay(host, crawl_delay))

    def statistics(self) -> FrontierStats:
        """The frontier's statistics, at most STATS_MAX_AGE seconds old: a worker that has
        nothing to lease asks every few milliseconds (the engine's idle wait) while, under a
        static partition, other workers' shards keep a host ready, and a RedisFrontier
        sums every shard of the crawl to answer. Stale counts only delay the end."""
        now = time.monotonic()
        cached = self._stats
        if cached is not None and now - cached[0] < STATS_MAX_AGE:
            return cached[1]
        return self.fresh_statistics()

    def fresh_statistics(self, deadline: float = float("inf")) -> FrontierStats:
        """The frontier's statistics read now (also the snapshot `statistics()` answers
        from): what a worker leaving judges the crawl by, and what its stats.json says — a
        snapshot taken before another worker's last page would call a complete crawl
        "stopped"."""
        stats = self._retrying(self.inner.statistics, deadline)
        self._stats = (time.monotonic(), stats)
        return stats

    def close(self) -> None:
        """Close the inner frontier (it sends what it still holds: a round trip) on the I/O
        thread, after the calls queued before, then stop the thread. Not on the loop's
        thread: the engine awaits it in a thread (`Crawler.close_frontier`), so a Redis
        paused as the crawl ends holds the close, not the loop and its signal handlers.
        Once the worker gave up on Redis (`patience`), it neither sends nor waits for the
        thread: what it held is lost with the leases, which expire."""
        if self._closed:
            return
        self._closed = True
        try:
            self.io_executor.submit(self.inner.close).result()
        except FrontierUnreachable:
            pass
        finally:
            self.io_executor.shutdown(wait=True)


class _Retried(Generic[_S]):
    """A store of the crawl's Redis keys whose every call is retried through Redis outages
    like the frontier's (within the worker's `patience` once it stops: None, for ever);
    `what` names the store in the outage's message."""

    what: ClassVar[str]

    def __init__(self, inner: _S, patience: Patience | None = None) -> None:
        self.inner: _S = inner
        self.patience = patience

    def _call(self, fn: Callable[[], _T]) -> _T:
        return retrying(fn, what=self.what, patience=self.patience)

    def close(self) -> None:
        self.inner.close()


class ClusterNearDupStore(_Retried[NearDupStore]):
    """The worker's `NearDupStore`: the crawl's RedisNearDupStore, each exchange retried
    through Redis outages like the frontier's calls."""

    what = "near-duplicate store"

    def exchange(
        self, mine: Sequence[tuple[int, str]], after: int
    ) -> tuple[list[tuple[int, str]], int]:
        # (an exchange retried after its push went through sends `mine` twice: a page
        # indexed twice, which finds nothing more)
        return self._call(lambda: self.inner.exchange(mine, after))


class ClusterRobotsStore(_Retried[RobotsStore]):
    """The worker's `RobotsStore`: the crawl's RedisRobotsStore, each call retried through
    Redis outages like the frontier's (a robots.txt answer read or kept is worth waiting
    for: without it the host's robots.txt would be fetched again by its next worker)."""

    what = "robots store"

    def get(self, host: str) -> RobotsRecord | None:
        return self._call(lambda: self.inner.get(host))

    def put(self, host: str, record: RobotsRecord) -> None:
        self._call(lambda: self.inner.put(host, record))


class ClusterDigestStore(_Retried[DigestStore]):
    """The worker's `DigestStore`: the crawl's RedisDigestStore, each call retried through
    Redis outages like the frontier's (a lookup decides whether a payload is stored whole;
    a batch's claims go in before the batch completes)."""

    what = "digest store"

    def get(self, digest: bytes) -> Capture | None:
        return self._call(lambda: self.inner.get(digest))

    def add(self, captures: Sequence[tuple[bytes, Capture]]) -> None:
        self._call(lambda: self.inner.add(captures))

    def maintenance_due(self) -> bool:
        return self.inner.maintenance_due()

    def maintain(self) -> None:
        self.inner.maintain()


@dataclass(frozen=True, slots=True)
class ClusterStores:
    """A cluster worker's frontier, robots store, IP gate and digest store (None: every
    response stored whole), each on the crawl's Redis keys, their calls on the frontier's
    one I/O thread."""

    frontier: ClusterFrontier
    robots_store: ClusterRobotsStore
    ip_gate: RedisIpGate
    near_dup_store: ClusterNearDupStore | None = None
    digest_store: ClusterDigestStore | None = None


def cluster_stores(
    client: RedisClient,
    record: CrawlRecord,
    settings: CrawlSettings,
    *,
    view: PartitionView,
    worker_id: str,
    backends: Backends = CLUSTER,
    io: Executor | None = None,
    patience: Patience | None = None,
) -> ClusterStores:
    """The stores of the cluster worker `worker_id` of the crawl `record`: its frontier
    leases from the shards `view` gives it; `io` is the worker's Redis I/O thread (None: a
    new one), on which the frontier, the IP gate and the robots store call Redis; each
    store waits out Redis outages within `patience` (None: for ever)."""
    place = FrontierPlace(
        redis=client,
        crawl_id=record.id,
        partition=view.partition,
        owner=worker_id,
        dead_owners=lambda: view.dead,
        share=view.share,
        give_up=patience.over if patience is not None else None,
    )
    inner = open_named_frontier(backends.frontier, settings, place)
    frontier = ClusterFrontier(inner, view, io, patience)
    gate = RedisIpGate(
        client,
        record.id,
        settings.politeness.per_ip,
        owner=worker_id,
        ttl=record.heartbeat_ttl,
        io=frontier.io_executor,
    )
    # robots.txt answers in the crawl's keys: a host's robots.txt is fetched by one worker
    robots = RedisRobotsStore(client, record.id, max_age=settings.politeness.robots_ttl)
    near = None
    if settings.traps.near_dup_links != "off":  # the pages' text fingerprints, shared
        near = ClusterNearDupStore(RedisNearDupStore(client, record.id), patience)
    digests = None
    if dedups_payloads(settings):  # identical payloads: the crawl's digests, in its keys
        digests = ClusterDigestStore(RedisDigestStore(client, record.id), patience)
    return ClusterStores(frontier, ClusterRobotsStore(robots, patience), gate, near, digests)


