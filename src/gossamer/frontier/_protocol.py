"""The frontier contract: the records and the eight calls the engine makes (`Frontier`), the
one read a display makes of the hosts (`HostsView`), and the failed URLs a resume may give a
second chance (`Failures`).

Every backend (SQLite embedded, Redis in a cluster) implements `Frontier` and passes the same
contract tests (tests/frontier/). It promises: dedupe forever (a URL is queued at most once per
crawl); one holder per host (`lease` hands out ready hosts, each with a fresh token and an
expiry); fencing (`complete`/`extend` with a stale token raise `StaleLeaseError` and change
nothing); at least once (URLs of unfinished or reclaimed leases go back); final DONE and FAILED
verdicts; depth as the shortest path when `max_depth` is set; and published (done + leased)
never above `max_pages`. `top_hosts` gives a display `HostView`s: counts, timing and the delay
the frontier applies. Each rule in full: docs/crawler/frontier.md, "Semantics".

Errors (one tree)::

    FrontierError
     ├── StaleLeaseError        a refused token (fencing); nothing changed
     └── FrontierStorageError   the store failed (also an OSError: errno ENOSPC on a full disk)"""

from __future__ import annotations

import enum
from collections.abc import Collection, Iterable, Sequence
from concurrent.futures import Executor
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

__all__ = [
    "DEAD_HOST",
    "Discovered",
    "Failures",
    "Frontier",
    "FrontierError",
    "FrontierStats",
    "FrontierStorageError",
    "HostBatch",
    "HostView",
    "HostsView",
    "LeasedURL",
    "OffLoopFrontier",
    "Outcome",
    "Outlinks",
    "ShareCappedFrontier",
    "StaleLeaseError",
    "Verdict",
]


class FrontierError(Exception):
    """Base of every error a frontier raises."""


class StaleLeaseError(FrontierError):
    """The lease token is unknown, completed or reclaimed: the call changed nothing."""


class FrontierStorageError(FrontierError, OSError):
    """The backing store failed (disk full, I/O error, locked too long, not a frontier).

    An `OSError` so callers that handle storage errors (errno.ENOSPC) handle this one too.
    The failed call changed nothing.
    """


class FrontierUnreachable(FrontierStorageError):
    """The shared store (a cluster's Redis) stayed unreachable while the worker was stopping,
    and the worker gave up waiting for it (docs/cluster.md, "A stop while Redis is down").
    The failed call changed nothing: the leases the worker holds expire in the store, and
    their URLs are leased and fetched again."""


# The three per-URL records are plain slotted dataclasses, not frozen ones: treat them as
# immutable. A frozen dataclass costs ~2 µs to build (object.__setattr__ per field) against
# ~0.4 µs, and the engine builds one Discovered per link (30 per page).


@dataclass(slots=True)
class Discovered:
    """A URL found by the engine, already canonical (treat as immutable).

    `host` is `urls.host_key(url)`; `fp` the URL's 64-bit fingerprint in [0, 2**64), the dedupe
    key; `priority` orders a host's queue (lower first; the engine uses the depth).
    `parent_fp` is the fingerprint of the page the link was found on and `delta` the depth
    the edge adds (1 for a link, 0 for a redirect or canonical): with a `max_depth`, the
    frontier records the edge and keeps `depth` <= the parent's current depth + `delta`.
    """

    url: str
    host: str
    depth: int
    fp: int
    priority: int = 0
    parent: str | None = None
    parent_fp: int | None = None
    delta: int = 1


@dataclass(slots=True)
class Outlinks:
    """Links of one fetched page offered as edges only (with a `max_depth`; treat as immutable).

    The page (`url`, fingerprint `fp`) was fetched at `depth`; child k (`fps[k]`, on host
    `hosts[k]`) is `deltas[k]` deeper. The engine sends a child as a `Discovered` only when
    it is new to the worker or shallower than it sent before; the others come here: the
    frontier has them at a depth no greater already, so only the edge is recorded (the page
    may be lowered later) — and when the page's depth in the frontier is already below
    `depth` (lowered while it was fetched), the children are relaxed at once. Edges are
    recorded only for a page the frontier accepted; a child it does not know is skipped.
    """

    url: str
    fp: int
    depth: int
    fps: list[int]
    hosts: list[str]
    deltas: list[int]


@dataclass(slots=True)
class LeasedURL:
    """One URL of a `HostBatch`; `attempts` = RETRY outcomes it already had."""

    url: str
    fp: int
    depth: int
    parent: str | None
    attempts: int


@dataclass(frozen=True, slots=True)
class HostBatch:
    """A leased host: fetch `urls` over one connection, then `complete(token, …)`."""

    host: str
    token: str
    expires_at: float
    urls: tuple[LeasedURL, ...]
    backlog: int = 0  # URLs of the host still queued after this lease (a scheduling hint)


class Verdict(enum.Enum):
    """What became of one leased URL."""

    DONE = "done"  # final: fetched (whatever the HTTP status) or deliberately skipped
    RETRY = "retry"  # transient failure: requeue, FAILED after max_attempts
    FAILED = "failed"  # final: given up


@dataclass(slots=True)
class Outcome:
    """The result of one leased URL, reported by `complete`.

    `status` is the HTTP status, None when no response came (network error, or the URL was not
    fetched, e.g. robots-disallowed). `retry_after` is the Retry-After header in seconds,
    `error` a structured key (`fetch/error/timeout`), `elapsed` the fetch time in seconds (feeds
    the adaptive delay). An outcome with no status whose error key starts with `fetch/` is a
    network error: it counts towards the host's consecutive errors and back-off.
    """

    url: str
    fp: int
    verdict: Verdict
    status: int | None = None
    retry_after: float | None = None
    error: str | None = None
    elapsed: float | None = None

    @property
    def network_error(self) -> bool:
        """No response because the host could not be reached or did not answer."""
        return (
            self.status is None
            and self.verdict is not Verdict.DONE
            and self.error is not None
            and self.error.startswith("fetch/")
        )


@dataclass(frozen=True, slots=True)
class FrontierStats:
    """A snapshot of a frontier (counts over the whole crawl, all workers).

    Every accepted URL is in exactly one of queued, leased, done, failed. `retries` counts
    RETRY requeues; `dropped_by_budget` discovered URLs refused by the per-host budget (each
    time one is offered); `duplicates_seen` offered URLs already known. `ready_hosts` can be
    leased now; `next_ready_at` is the earliest `next_fetch_at` of an unleased host with queued
    URLs (None when there is none); `dead_hosts` were given up after too many consecutive
    network errors. `parked` counts URLs seen only beyond `max_depth` (not accepted: in none
    of queued, leased, done, failed); `depth_lowered` how many times an accepted URL's depth
    was lowered (found again by a shorter path: one a step of the relaxation, a page's
    children taken once each, smallest delta first; docs/crawler/frontier.md, "Depth is the
    shortest path"). Both stay 0 without a `max_depth`.
    """

    queued: int
    leased: int
    done: int
    failed: int
    retries: int
    hosts: int
    ready_hosts: int
    leased_hosts: int
    dead_hosts: int
    dropped_by_budget: int
    duplicates_seen: int
    next_ready_at: float | None
    #: A Bloom seen-set's expected false positives so far: new URLs taken as seen (never
    #: fetched). 0 for an exact seen-set (every backend but RedisFrontier(seen="bloom")).
    seen_false_positives: float = 0.0
    parked: int = 0
    depth_lowered: int = 0

    @property
    def discovered(self) -> int:
        """URLs accepted so far (queued + leased + done + failed)."""
        return self.queued + self.leased + self.done + self.failed

    @property
    def published(self) -> int:
        """SPAWC's published pages: done + in flight (what `max_pages` limits)."""
        return self.done + self.leased


@runtime_checkable
class Frontier(Protocol):
    """Queues, dedupe, leases and host politeness of one crawl. Thread-safe."""

    def put_discovered(self, items: Sequence[Discovered | Outlinks]) -> int:
        """Queue the URLs not seen before (and within their host's budget); return how many.
        With a `max_depth`, also park, unpark and relax depths (see the module docstring);
        `Outlinks` records go only to a frontier with a `max_depth` (the engine sends
        them only then), and are applied after the call's `Discovered` items."""
        ...

    def lease(self, max_hosts: int, per_host: int, now: float | None = None) -> list[HostBatch]:
        """Lease up to `max_hosts` ready hosts with up to `per_host` URLs each.

        Expired leases are reclaimed first (unless `max_hosts` or `per_host` is 0: then
        nothing happens). `now` defaults to the frontier's clock.
        """
        ...

    def complete(
        self,
        token: str,
        outcomes: Sequence[Outcome],
        next_fetch_at: float | None = None,
        renew: int = 0,
    ) -> HostBatch | None:
        """Settle a batch and release its host; `next_fetch_at` is a lower bound for the host.

        With `renew` > 0, the same transaction leases the host again — up to `renew` URLs, a
        new token — when it would be ready for `lease` at once (URLs queued, not dead, its
        rest after this batch already over) and `max_pages` leaves room, and returns that
        batch; otherwise (and always with `renew` 0) it returns None. A busy host with no
        delay then keeps its connection without a lease round trip; a host with a delay
        rests as after any batch.

        Raises `StaleLeaseError` (fencing) and `ValueError` for an outcome whose fp is not in
        the batch or appears twice, or a negative `renew`; either way nothing changes.
        """
        ...

    def extend(self, token: str, until: float) -> float:
        """Keep a lease until `until` (never shortens it); returns the lease's expiry now,
        which a backend may hold below `until` (Redis: a partition's phase end) — fetch
        nothing after it. `StaleLeaseError` when refused."""
        ...

    def reclaim_expired(self, now: float | None = None) -> int:
        """Return the URLs of leases expired at `now` to their queues; return how many URLs."""
        ...

    def set_host_delay(self, host: str, crawl_delay: float | None) -> None:
        """Record a host's robots.txt Crawl-delay (None clears it); capped by the config."""
        ...

    def statistics(self) -> FrontierStats:
        """A consistent snapshot of the counters."""
        ...

    def close(self) -> None:
        """Flush and release resources; idempotent. Leases stay valid in the store."""
        ...


@runtime_checkable
class OffLoopFrontier(Protocol):
    """A frontier whose calls are network round trips (the cluster worker's, on Redis): the
    engine runs them, and the robots store's, in `io_executor` (one dedicated thread: calls
    keep their order) and awaits them, so that a slow or paused server never blocks the
    event loop. A frontier without it (SQLite, memory: sub-millisecond calls) is called
    inline on the loop's thread. Measurements: docs/cluster.md, "Redis off the event loop"."""

    io_executor: Executor


@runtime_checkable
class ShareCappedFrontier(Protocol):
    """A frontier that caps the hosts this worker holds at its share of the crawl's (the
    cluster's Redis frontier under `dynamic`, with other workers): `hosts_over_share()` is
    how many of the hosts it holds are over that share now — a member joined after it
    leased them. The engine gives that many back between two pages (their batches end
    early, the URLs not fetched go back). A cheap read, no round trip, safe to call on the
    loop's thread while the frontier's own calls run on its I/O thread."""

    def hosts_over_share(self) -> int: ...


@dataclass(frozen=True, slots=True)
class HostView:
    """One host as the frontier holds it (`HostsView.top_hosts`).

    `queued`: its URLs waiting in its queue; `leased`: its URLs out in its lease (0: not
    leased); `fetched`: its URLs settled, done or failed (None where the backend does not
    count a host's URLs: Redis without a host budget); `errors`: consecutive network errors;
    `crawl_delay`: its robots.txt Crawl-delay as given (None: none); `delay`: its rest
    between two batches as the frontier applies it (`_politeness.delay_of`: that Crawl-delay
    capped by `max_crawl_delay`); `backoff`: its back-off now (0: none).
    """

    host: str
    queued: int
    leased: int
    fetched: int | None
    errors: int
    dead: bool
    next_fetch_at: float
    crawl_delay: float | None
    delay: float
    backoff: float

    @property
    def rest(self) -> float:
        """Its rest after a batch as things stand: its delay, or its back-off when longer."""
        return max(self.delay, self.backoff)

    def state(self, now: float) -> str:
        """`dead`; `leased` (a worker holds it); `done` (nothing queued); `waiting` (resting
        until `next_fetch_at`); or `ready`."""
        if self.dead:
            return "dead"
        if self.leased:
            return "leased"
        if self.queued <= 0:
            return "done"
        return "waiting" if self.next_fetch_at > now else "ready"


@runtime_checkable
class HostsView(Protocol):
    """The frontier's hosts as a display reads them (the dashboard's top hosts).

    Apart from `Frontier`: the engine never reads it, and `Frontier` stays the calls a
    worker makes. SQLite, Redis and the in-memory reference implement both (the contract
    tests hold them to it). A display that holds no frontier (the dashboard watches a crawl
    that another process runs) reads through its backend's module function instead
    (`sqlite.read_top_hosts`, `redis.read_hosts`), never its tables or keys.
    """

    def top_hosts(self, limit: int, among: Iterable[str] | None = None) -> list[HostView]:
        """At most `limit` hosts: most URLs not settled (queued + leased) first, then most
        fetched (None as 0), then by name. `among`: only these (unknown ones left out);
        without it every host is looked at (Redis: a SCAN of the crawl's keys)."""
        ...


#: The error key of a URL failed without being tried: accepted for a host already given up
#: (dead). `Failures.requeue_failed` brings it back with its host.
DEAD_HOST = "frontier/dead-host"


@runtime_checkable
class Failures(Protocol):
    """The crawl's FAILED URLs by why they failed, and their second chance: what `gossamer
    crawl --resume` reads and does when a run-time setting given with it (--allow-private, a
    proxy, time-outs) may fix what failed (docs/crawler.md, "Resuming a crawl").

    Apart from `Frontier`: the engine never calls it. The embedded backends implement it
    (SQLite, and the in-memory reference; the contract tests hold them to it); the Redis
    frontier keeps nothing of a failed URL but its seen-set entry (a cluster crawl is not
    resumed with new settings)."""

    def failures(self) -> dict[str, int]:
        """The FAILED URLs by the error key of the outcome that failed them
        (`fetch/error/connect`, `robots/unreachable/blocked-address`, …; `DEAD_HOST`; a
        host given up fails the URLs it still had under the network error that killed it;
        "" where none was recorded: a frontier file older than the keys). Zero counts are
        left out."""
        ...

    def requeue_failed(self, errors: Collection[str]) -> int:
        """Queue again, as never tried (no attempt, their depth and priority), the FAILED
        URLs whose error key is in `errors`; return how many. Every host one of them belongs
        to starts afresh: not dead (its `DEAD_HOST` URLs come back too), no consecutive
        errors, no back-off, ready at once unless leased. Dedupe is unchanged (they stay
        known), and so are leases."""
        ...
