"""The frontier backends by name: the composition root (runner/build.py) opens a crawl's
frontier with `open_frontier(name, settings, place)`. "sqlite" (the embedded crawl and its
pool: one file in the crawl directory, shared by processes, kept for --resume) and "redis" (a
cluster crawl's, shared by its workers on any machine) register at the end of this module; a
new backend is one module plus one `register_frontier(name, factory)` call
(docs/architecture.md, "How to add …"). A factory refuses a place it cannot use with
FrontierError. `MemoryFrontier` is not registered: it keeps nothing on disk and lives in one
process, and a crawl needs both resume and a frontier its pool's processes share."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from .._named import Named
from ..crawldir import CrawlDir
from ..plugins import FRONTIERS as FRONTIER_PLUGINS
from ._protocol import Frontier, FrontierError

if TYPE_CHECKING:
    from ..config import CrawlSettings
    from ._share import Share
    from .redis import DeadOwners, Partition, RedisClient

__all__ = [
    "FRONTIERS",
    "FrontierFactory",
    "FrontierPlace",
    "frontier_names",
    "open_frontier",
    "register_frontier",
    "unregister_frontier",
]


@dataclass(frozen=True, slots=True)
class FrontierPlace:
    """Where a crawl's frontier lives: its crawl directory (embedded crawl, pool), or a
    Redis client and the crawl's id (cluster), with the worker's `partition` (the shards it
    may lease from; None: all, as the cluster's coordinator and `gossamer status` read)."""

    directory: Path | None = None
    redis: RedisClient | None = None
    crawl_id: str | None = None
    partition: Partition | None = None
    #: a cluster worker's id, the dead workers (whose leases it reclaims) and its share of
    #: the hosts in play (frontier.redis.RedisFrontier's `owner`, `dead_owners`, `share`)
    owner: str = ""
    dead_owners: DeadOwners | None = None
    share: Share | None = None
    #: True once a stopping worker gave up waiting for an unreachable Redis (RedisFrontier's
    #: `give_up`)
    give_up: Callable[[], bool] | None = None


FrontierFactory = Callable[["CrawlSettings", FrontierPlace], Frontier]


#: the registered backends: `register_frontier(name, factory, summary=…)` makes
#: `open_frontier(name, …)` open a frontier with `factory` (a name is registered once:
#: FrontierError otherwise); `unregister_frontier(name)`, `frontier_names()`
FRONTIERS: Named[FrontierFactory] = Named("frontier backend", FrontierError, FRONTIER_PLUGINS)
register_frontier = FRONTIERS.register
unregister_frontier = FRONTIERS.unregister
frontier_names = FRONTIERS.names


def open_frontier(name: str, settings: CrawlSettings, place: FrontierPlace) -> Frontier:
    """The crawl's frontier, opened by the backend `name` (FrontierError when no backend
    of that name is registered, or it cannot use `place`)."""
    return FRONTIERS.factory(name)(settings, place)


def _sqlite(settings: CrawlSettings, place: FrontierPlace) -> Frontier:
    from .sqlite import SharedSqliteFrontier, SqliteFrontier

    if place.directory is None:
        raise FrontierError("the sqlite frontier lives in a crawl directory: none given")
    path = CrawlDir(place.directory).frontier
    if place.share is not None:  # a pool's worker: capped at its share of the hosts
        return SharedSqliteFrontier(path, share=place.share, **settings.frontier_knobs())
    return SqliteFrontier(path, **settings.frontier_knobs())


def _redis(settings: CrawlSettings, place: FrontierPlace) -> Frontier:
    from .redis import RedisFrontier

    if place.redis is None or place.crawl_id is None:
        raise FrontierError("the redis frontier needs a Redis client and a crawl id")
    return RedisFrontier(
        place.redis,
        place.crawl_id,
        **settings.frontier_knobs(),
        partition=place.partition,
        seen=settings.cluster.seen_set,
        replica_acks=settings.cluster.replica_acks,
        replica_ack_timeout=settings.cluster.replica_ack_timeout,
        # a worker's last responses may be processed (and its batch completed) a little
        # after its lease's end, which under `phase` is the phase's end: the next phase's
        # worker takes the host only then, so those pages are not fetched twice
        reclaim_grace=reclaim_grace(settings.frontier.lease_ttl),
        owner=place.owner,
        dead_owners=place.dead_owners,
        share=place.share,
        give_up=place.give_up,
    )


def reclaim_grace(lease_ttl: float) -> float:
    """How long an expired lease waits before it is reclaimed in a cluster crawl: half the
    TTL, at most 5 s (a dead worker's host waits that much longer)."""
    return min(5.0, lease_ttl / 2)


def _builtin() -> None:
    register_frontier(
        "sqlite", _sqlite, summary="one SQLite file in the crawl directory (embedded, pool)"
    )
    register_frontier("redis", _redis, summary="a cluster crawl's keys in Redis (cluster)")


_builtin()
