"""A live graph fed page events: the pages applied to an `OnlineGraph` as they are recorded,
and the graph's statistics written to a file every few seconds and at the end. `gossamer graph
follow` keeps a cluster crawl's this way (cluster/stream.py), and a caller may feed one from an
embedded crawl (`run_crawl(feed=GraphFeed(live))`).

`update` takes a lock held only for the update and for copying the graph's arrays, never while
statistics are computed; a daemon thread computes them from that copy and writes them
atomically, waiting `interval` seconds between writes and at least BACKOFF times the last
computation's time. Only pages whose status makes them nodes are applied, so the final figures
equal `gossamer graph stats DIR`'s (docs/graph.md, "From Python: `LiveGraph` fed by a
`GraphFeed`")."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import numpy as np

# INTERVAL_S, BACKOFF: the seconds between two writes, at least, and at least this many
# times the last computation's time: an embedded crawl's live graph's (runner/livegraph.py)
from ..sinks.graph import REFRESH_BACKOFF as BACKOFF
from ..sinks.graph import REFRESH_INTERVAL_S as INTERVAL_S
from ..sinks.graph import node_id
from ..sinks.stats import write_stats
from ._load import crawled_page_urls, edge_parts
from ._online import OnlineGraph
from ._rank import UrlLookup

__all__ = ["LiveGraph"]

_log = logging.getLogger(__name__)



class LiveGraph:
    """An `OnlineGraph` fed by a crawl, its statistics kept in `path` (see the module
    docstring). A context manager: entering starts the writer thread; leaving stops it and
    writes the final statistics."""

    def __init__(
        self,
        path: Path,
        *,
        interval: float = INTERVAL_S,
        on_write: Callable[[dict[str, Any]], None] | None = None,
    ) -> None:
        self.path = path
        self.interval = interval
        # called with each statistics object written (on the writer thread; a cluster's
        # consumer publishes it to Redis, where `gossamer status` reads it)
        self.on_write = on_write
        self.graph = OnlineGraph()
        self._urls: dict[int, str] = {}  # page id -> URL (the top pages are named)
        self.writes = 0  # statistics written
        self.last_compute_s = 0.0
        self._lock = threading.Lock()
        self._version = 0  # updates applied: the writer skips a write when nothing changed
        self._written = -1
        self._warned = False  # a failed write was said
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._started = time.time()

    # -- the feed's side -------------------------------------------------------------------

    def update(self, page: str, links: Iterable[str]) -> None:
        """A crawled page and the URLs it links to (GraphLike)."""
        with self._lock:
            self.graph.update(page, links)
            self._urls.setdefault(node_id(page), page)
            self._version += 1

    def seed_from(self, crawl_dir: Path) -> int:
        """Apply the pages an earlier run of the crawl in `crawl_dir` recorded (a resume):
        the crawl logs' pages that are nodes, with their edges from the graph files. The
        number of pages applied."""
        pages = crawled_page_urls(crawl_dir)
        if not pages:
            return 0
        src, dst = edge_parts(crawl_dir)
        order = np.argsort(src, kind="stable")
        src, dst = src[order], dst[order]
        with self._lock:
            for page_id in pages:
                lo, hi = np.searchsorted(src, [page_id, page_id + 1])
                self.graph.update_ids(page_id, dst[lo:hi].tolist())
            for page_id, url in pages.items():
                self._urls.setdefault(page_id, url)
            self._version += len(pages)
        return len(pages)

    # -- the writer --------------------------------------------------------------------------

    def __enter__(self) -> LiveGraph:
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name="live-graph", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        self.write(final=True)

    def _run(self) -> None:
        wait = self.interval
        while not self._stop.wait(wait):
            if self._version != self._written:
                self.write(final=False)
            wait = max(self.interval, BACKOFF * self.last_compute_s)

    def write(self, *, final: bool) -> dict[str, Any] | None:
        """Compute the statistics now and write them; None when they could not be written
        (said once in the log; the crawl goes on)."""
        from . import statistics_of  # (the package imports this module)

        with self._lock:
            version = self._version
            adj = self.graph.csr()
            pending = self.graph.pending
            memory = self.graph.memory_bytes()
            ids = self.graph.node_ids()
        began = time.perf_counter()
        # (the URL map only grows, and the lookups are of ids already in it)
        stats = statistics_of(adj, pending=pending, ids=ids, urls=UrlLookup(ids, self._urls))
        self.last_compute_s = time.perf_counter() - began
        stats = {
            "updated_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            "final": final,
            "compute_s": round(self.last_compute_s, 3),
            "memory_bytes": memory,
            **stats,
        }
        try:
            write_stats(self.path, stats)
        except (OSError, TypeError) as exc:
            if not self._warned:
                _log.warning(f"cannot write the live graph's statistics to {self.path}: {exc}")
                self._warned = True  # said once
            return None
        self._written = version
        self.writes += 1
        if self.on_write is not None:
            try:
                self.on_write(stats)
            except Exception as exc:  # (Redis away: the next write tries again)
                _log.warning(f"cannot publish the live graph's statistics: {exc}")
        return stats
