"""The composition root: the crawl's settings (and a mode's own inputs) in, the parts of a
running crawl out, for the embedded crawl, a pool's worker and a cluster worker alike.

    stores(mode)   frontier      by name from the frontier registry (frontier/_registry.py):
                                 "sqlite" in the crawl directory, "redis" in a cluster
                   robots store  SqliteRobotsStore (crawl directory) | RedisRobotsStore
                   IP gate       LocalIpGate (one process) | PoolIpGate (a pool's worker)
                                 | FileIpGate (a worker run by hand)
                                 | RedisIpGate (a cluster worker)
    worker(...)    resolver      Resolver (overrides, DNS cache, private-address guard)
                   fetcher       by name from the fetcher registry (fetch/_registry.py),
                                 behind the IP gate's guard in a cluster
                   sinks         Recorder, which builds the registered sinks
                   Crawler       the worker loop, given all of the above

`engine.run` (the embedded crawl and its pool) and `cluster.worker` call these and build
nothing themselves; which frontier backend and fetcher a mode uses is its `Backends`."""

from __future__ import annotations

import socket
from collections.abc import Callable
from concurrent.futures import Executor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from .. import __version__
from ..config import CrawlSettings
from ..fetch import Fetcher, Fetching, Resolver
from ..fetch._registry import open_fetcher
from ..frontier import Frontier
from ..frontier._registry import FrontierPlace
from ..frontier._registry import open_frontier as open_named_frontier
from ..robots_store import RobotsStore, SqliteRobotsStore
from .crawler import Crawler
from .ipgate import FileIpGate, LocalIpGate, PoolIpGate
from .recorder import Recorder
from .recrawl import Recrawl
from .seams import IpGate

if TYPE_CHECKING:
    from ..cluster._redis import RedisClient
    from ..cluster.ipgate import RedisIpGate
    from ..cluster.members import PartitionView
    from ..cluster.registry import CrawlRecord
    from ..cluster.worker import ClusterFrontier, ClusterRobotsStore

__all__ = [
    "CLUSTER",
    "EMBEDDED",
    "Backends",
    "ClusterStores",
    "EmbeddedStores",
    "WorkerParts",
    "cluster_stores",
    "embedded_stores",
    "open_frontier",
    "worker",
]


@dataclass(frozen=True, slots=True)
class Backends:
    """Which registered frontier backend and fetcher a crawl is built with, by name."""

    frontier: str = "sqlite"
    fetcher: str = "curl"


#: the embedded crawl and its pool: the frontier in the crawl directory (kept for --resume,
#: shared by the pool's processes)
EMBEDDED: Final = Backends()
#: a cluster worker: the crawl's frontier in Redis
CLUSTER: Final = Backends(frontier="redis")


def open_frontier(settings: CrawlSettings, backends: Backends = EMBEDDED) -> Frontier:
    """The frontier in the crawl directory `settings.output` (the embedded crawl, a pool's
    parent and its workers)."""
    place = FrontierPlace(directory=settings.output)
    return open_named_frontier(backends.frontier, settings, place)


@dataclass(frozen=True, slots=True)
class EmbeddedStores:
    """What an embedded crawl's worker shares with the crawl's other processes."""

    frontier: Frontier
    robots_store: RobotsStore
    ip_gate: IpGate


def embedded_stores(
    settings: CrawlSettings,
    *,
    part: str = "",
    backends: Backends = EMBEDDED,
    ip_gate_socket: socket.socket | None = None,
) -> EmbeddedStores:
    """The frontier, robots store and IP gate of the embedded crawl (`part` "") or of the
    pool's worker `part` (its IP gate: the pool's broker on `ip_gate_socket`; without one, a
    worker run by hand, lock files in the crawl directory)."""
    out = settings.output
    frontier = open_frontier(settings, backends)
    try:  # every process of the crawl (a pool's workers, a resumed run) reads it
        robots_store = SqliteRobotsStore(out / "robots.sqlite")
    except BaseException:
        frontier.close()
        raise
    per_ip = settings.politeness.per_ip
    gate: IpGate
    if ip_gate_socket is not None:
        gate = PoolIpGate(ip_gate_socket, per_ip)
    elif part:
        gate = FileIpGate(out / "locks", per_ip)
    else:
        gate = LocalIpGate(per_ip)
    return EmbeddedStores(frontier, robots_store, gate)


@dataclass(frozen=True, slots=True)
class ClusterStores:
    """A cluster worker's frontier, robots store and IP gate, each on the crawl's Redis
    keys, their calls on the frontier's one I/O thread."""

    frontier: ClusterFrontier
    robots_store: ClusterRobotsStore
    ip_gate: RedisIpGate


def cluster_stores(
    client: RedisClient,
    record: CrawlRecord,
    settings: CrawlSettings,
    *,
    view: PartitionView,
    worker_id: str,
    backends: Backends = CLUSTER,
    io: Executor | None = None,
) -> ClusterStores:
    """The stores of the cluster worker `worker_id` of the crawl `record`: its frontier
    leases from the shards `view` gives it; `io` is the worker's Redis I/O thread (None: a
    new one), on which the frontier, the IP gate and the robots store call Redis."""
    # (here: cluster.worker imports the engine)
    from ..cluster.ipgate import RedisIpGate
    from ..cluster.worker import ClusterFrontier, ClusterRobotsStore
    from ..robots_store import RedisRobotsStore

    place = FrontierPlace(
        redis=client,
        crawl_id=record.id,
        partition=view.partition,
        owner=worker_id,
        dead_owners=lambda: view.dead,
        share=view.share,
    )
    inner = open_named_frontier(backends.frontier, settings, place)
    frontier = ClusterFrontier(inner, view, io)
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
    return ClusterStores(frontier, ClusterRobotsStore(robots), gate)


@dataclass(frozen=True, slots=True)
class WorkerParts:
    """One worker's crawler and what its owner closes when the crawl ends: the fetcher
    (`aclose()`) and the sinks (`close()`)."""

    crawler: Crawler
    fetcher: Fetcher
    recorder: Recorder


def worker(
    settings: CrawlSettings,
    frontier: Frontier,
    ip_gate: IpGate,
    *,
    part: str = "",
    fetcher: str = EMBEDDED.fetcher,
    guard_fetcher: Callable[[Fetcher], Fetching] | None = None,
    clock: Callable[[], float],
    revalidate: Recrawl | None = None,
    robots_store: RobotsStore | None = None,
) -> WorkerParts:
    """The `Crawler` of one worker writing into `settings.output`: its resolver, the
    fetcher registered as `fetcher` (wrapped by `guard_fetcher`: a cluster's IP gate), and
    its sinks (`part`: the pool worker's part files)."""
    resolver = Resolver.from_settings(
        settings.fetch.resolve,
        settings.fetch.resolve_file,
        allow_private=settings.fetch.allow_private,
    )
    client = open_fetcher(fetcher, settings, resolver)
    recorder = Recorder(
        settings.output, settings, version=__version__, part=part, recrawl=revalidate
    )
    crawler = Crawler(
        settings,
        frontier=frontier,
        fetcher=client if guard_fetcher is None else guard_fetcher(client),
        ip_of=resolver.ip_of,
        resolve=resolver.resolve,
        sinks=recorder,
        ip_gate=ip_gate,
        clock=clock,
        revalidate=revalidate,
        robots_store=robots_store,
    )
    return WorkerParts(crawler, client, recorder)
