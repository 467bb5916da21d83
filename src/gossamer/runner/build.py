"""The composition root: the crawl's settings (and a mode's own inputs) in, the parts of a
running worker out, for the embedded crawl, a pool's worker and a cluster worker alike.

`embedded_stores` opens what a worker shares with the crawl's other processes: the frontier by
name from the frontier registry ("sqlite" in the crawl directory), the `SqliteRobotsStore` and
an IP gate (`LocalIpGate`, a pool worker's `PoolIpGate`, or `FileIpGate` for a worker run by
hand); a cluster worker's stores come from cluster/stores.py instead. `worker` makes the rest
of one worker: the `Resolver`, the fetcher by name from the fetcher registry (behind the IP
gate's guard in a cluster), the `Recorder` over the registered sinks, and the `Crawler`. Which
backends a mode uses is its `Backends`; runner/worker.py and cluster/worker.py build
nothing themselves."""

from __future__ import annotations

import json
import os
import socket
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from .._version import __version__
from ..config import CrawlSettings
from ..crawldir import CrawlDir
from ..engine.crawler import Crawler
from ..engine.extract import Extraction, load_extractor
from ..engine.ipgate import FileIpGate, LocalIpGate, PoolIpGate
from ..engine.recorder import Recorder
from ..engine.recrawl import Recrawl
from ..engine.seams import IpGate
from ..engine.sink_registry import PageSink, SinkContext
from ..fetch import Fetcher, Fetching, Resolver
from ..fetch._registry import open_fetcher
from ..frontier import Frontier
from ..frontier._registry import FrontierPlace
from ..frontier._registry import open_frontier as open_named_frontier
from ..frontier._share import Share
from ..neardup import NearDups, NearDupStore, SqliteNearDupStore
from ..robots_store import RobotsStore, SqliteRobotsStore

__all__ = [
    "EMBEDDED",
    "Backends",
    "EmbeddedStores",
    "PoolShare",
    "WorkerParts",
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


def open_frontier(
    settings: CrawlSettings, backends: Backends = EMBEDDED, share: Share | None = None
) -> Frontier:
    """The frontier in the crawl directory `settings.output` (the embedded crawl, a pool's
    parent and its workers; `share`: a pool worker's share of the hosts, `PoolShare`)."""
    place = FrontierPlace(directory=settings.output, share=share)
    return open_named_frontier(backends.frontier, settings, place)


class PoolShare:
    """A pool worker's share of the crawl's hosts in play: 1 / the worker count its parent
    publishes in the crawl directory's control record (`DIR/control.json`, written before
    the first worker is forked and again by each `gossamer workers --scale N`), so the pool's
    workers split the hosts about evenly and a worker that joins gets its share (the others
    give hosts back: `ShareCappedFrontier`). None (no cap) for one worker or no record.
    Re-read at most every `every` seconds (monotonic), and only when the file changed."""

    def __init__(self, out: Path, every: float = 0.1) -> None:
        self._path = CrawlDir(out).control
        self._every = every
        self._checked = -float("inf")
        self._stamp: tuple[int, int] | None = None
        self._share: float | None = None

    def __call__(self) -> float | None:
        now = time.monotonic()
        if now - self._checked < self._every:
            return self._share
        self._checked = now
        try:
            st = os.stat(self._path)
        except OSError:
            self._stamp, self._share = None, None
            return None
        stamp = (st.st_mtime_ns, st.st_ino)
        if stamp != self._stamp:
            self._stamp = stamp
            self._share = self._read()
        return self._share

    def _read(self) -> float | None:
        try:
            workers = int(json.loads(self._path.read_text())["workers"])
        except (OSError, ValueError, TypeError, KeyError):
            return None
        return 1 / workers if workers >= 2 else None


@dataclass(frozen=True, slots=True)
class EmbeddedStores:
    """What an embedded crawl's worker shares with the crawl's other processes."""

    frontier: Frontier
    robots_store: RobotsStore
    ip_gate: IpGate
    # the pages' text fingerprints (None: near-duplicate detection off)
    near_dup_store: NearDupStore | None = None


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
    crawl = CrawlDir(settings.output)
    # a pool's worker keeps to its share of the hosts, as a cluster worker does
    share = PoolShare(settings.output) if ip_gate_socket is not None else None
    frontier = open_frontier(settings, backends, share)
    near_dup_store = None
    try:  # every process of the crawl (a pool's workers, a resumed run) reads them
        robots_store = SqliteRobotsStore(crawl.robots)
        if settings.traps.near_dup_links != "off":
            near_dup_store = SqliteNearDupStore(crawl.near_dups)
    except BaseException:
        frontier.close()
        raise
    per_ip = settings.politeness.per_ip
    gate: IpGate
    if ip_gate_socket is not None:
        gate = PoolIpGate(ip_gate_socket, per_ip)
    elif part:
        gate = FileIpGate(crawl.ip_locks, per_ip)
    else:
        gate = LocalIpGate(per_ip)
    return EmbeddedStores(frontier, robots_store, gate, near_dup_store)


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
    extra_sinks: Sequence[PageSink] = (),
    near_dups: NearDups | None = None,
) -> WorkerParts:
    """The `Crawler` of one worker writing into `settings.output`: its resolver, the
    fetcher registered as `fetcher` (wrapped by `guard_fetcher`: a cluster's IP gate), and
    its sinks (`part`: the pool worker's part files; `extra_sinks` after the registered
    ones), and the extractor the settings name (`extract`: engine/extract.py; PluginError
    when it cannot be loaded)."""
    resolver = Resolver.from_settings(
        settings.fetch.resolve,
        settings.fetch.resolve_file,
        allow_private=settings.fetch.allow_private,
    )
    client = open_fetcher(fetcher, settings, resolver)
    extraction = None
    if settings.sinks.extract is not None:  # an extractor: its items, its `follow`
        ctx = SinkContext(settings.output, settings, __version__, part, revalidate)
        extraction = Extraction(load_extractor(settings.sinks.extract), ctx)
        extra_sinks = (extraction, *extra_sinks)
    recorder = Recorder(
        settings.output,
        settings,
        version=__version__,
        part=part,
        recrawl=revalidate,
        extra=extra_sinks,
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
        follow=extraction.follow if extraction is not None else None,
        near_dups=near_dups,
    )
    return WorkerParts(crawler, client, recorder)
