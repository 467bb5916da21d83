"""One worker of a crawl, run from its parts to its statistics: `run_engine` (the `Crawler`
with its stop signals, progress, heartbeat file, storage errors and statistics) for every mode,
`run_embedded` (an embedded crawl's worker: its stores in the crawl directory) and
`run_worker` (a pool's worker process, its settings from crawl.json).

What a mode adds around the engine comes in as one `WorkerHooks` (a cluster worker's: its
session of heartbeats, fenced requests, Redis's clock and errors); the defaults are an
embedded worker's. This module starts no process: runner/pool.py forks the pool's workers
and calls `run_worker` in each.
"""

from __future__ import annotations

import asyncio
import errno
import logging
import signal
import socket
import sqlite3
import time
from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from ..config import CrawlSettings
from ..crawldir import CrawlDir, CrawlError
from ..engine.crawler import Crawler, seed_frontier
from ..engine.heartbeat import Heartbeat
from ..engine.recrawl import Recrawl, seed_recrawl
from ..engine.seams import IpGate
from ..engine.sink_registry import PageSink
from ..exitcodes import Exit
from ..fetch import Fetcher, Fetching
from ..frontier import Frontier, FrontierStats, FrontierUnreachable
from ..frontier.digests import DigestStore
from ..neardup import NearDups, NearDupStore
from ..report.progress import ProgressDisplay, show_worker_progress
from ..report.summary import worker_summary
from ..robots_store import RobotsStore
from ..sinks import write_stats
from . import build
from .manifest import load_manifest
from .stopping import WorkerStop

__all__ = ["MAIN_WORKER", "WorkerHooks", "loop_factory", "run_embedded", "run_engine", "run_worker"]

#: the heartbeat id of a crawl's one process when it runs without a pool
MAIN_WORKER = "main"
_log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class WorkerHooks:
    """What a mode adds around one worker's engine; the defaults are an embedded worker's.

    `session(crawler)` is entered around the crawl (a cluster worker's heartbeats and IP
    gate refresher); `guard_fetcher` wraps the fetcher (requests fenced by the Redis IP
    gate); `clock` is the crawler's (the frontier's shared clock); `storage_errors` end the
    worker with 74 like OSError and sqlite3.Error, with a message ending in `resume_hint`
    (how to go on once fixed; None: `gossamer crawl --resume DIR`). `sinks` are this
    worker's own, after the registered ones (a Python program's pages: gossamer/api);
    `signals` False leaves SIGINT/SIGTERM alone (a crawl on a thread of a program, which
    stops it through `session`'s crawler instead); `on_stop(n)` is told of each of them (n:
    how many so far). A FrontierUnreachable (a cluster worker stopping gave up on its
    Redis) ends the worker with 75, its outputs closed and its statistics written, the
    message left to the mode."""

    session: Callable[[Crawler], AbstractAsyncContextManager[object]] | None = None
    guard_fetcher: Callable[[Fetcher], Fetching] | None = None
    clock: Callable[[], float] = time.time
    storage_errors: tuple[type[Exception], ...] = ()
    resume_hint: str | None = None
    sinks: tuple[PageSink, ...] = ()
    signals: bool = True
    on_stop: Callable[[int], None] | None = None


#: an embedded worker's: nothing added
EMBEDDED_HOOKS = WorkerHooks()


def loop_factory() -> Any:
    """uvloop when available: pycurl on uvloop costs 20–60 µs less per request."""
    try:
        import uvloop
    except ImportError:
        return None
    return uvloop.new_event_loop


def run_worker(
    out: Path,
    part: str,
    backends: build.Backends = build.EMBEDDED,
    *,
    ip_gate_socket: socket.socket | None = None,
) -> int:
    """One worker process of a pool (`gossamer crawl-worker`): the parent holds the lock,
    seeded or reclaimed the frontier, and merges the statistics. `ip_gate_socket`: the
    worker's end of the pool's IP gate broker (None, a worker run by hand: lock files)."""
    settings = load_manifest(out)
    with asyncio.Runner(loop_factory=loop_factory()) as runner:
        return runner.run(
            run_embedded(
                settings,
                resume=False,
                progress=None,
                part=part,
                backends=backends,
                ip_gate_socket=ip_gate_socket,
            )
        )


async def run_embedded(
    settings: CrawlSettings,
    *,
    resume: bool,
    progress: IO[str] | None,
    part: str = "",
    backends: build.Backends = build.EMBEDDED,
    ip_gate_socket: socket.socket | None = None,
    hooks: WorkerHooks | None = None,
) -> int:
    """One worker of an embedded crawl over the crawl directory's stores: the crawl's only
    worker (`part` ""), which seeds the frontier (or reclaims its leases on `resume`)
    first, or a pool's worker `part`, whose parent did that."""
    revalidate = _load_recrawl(settings)
    stores = build.embedded_stores(
        settings, part=part, backends=backends, ip_gate_socket=ip_gate_socket
    )
    frontier = stores.frontier

    async def prepare() -> None:
        if resume:
            await asyncio.to_thread(frontier.reclaim_expired, float("inf"))
        else:
            await asyncio.to_thread(seed_frontier, frontier, settings)
            await asyncio.to_thread(seed_recrawl, frontier, settings)

    return await run_engine(
        settings,
        frontier,
        stores.ip_gate,
        part=part,
        fetcher=backends.fetcher,
        progress=progress,
        prepare=None if part else prepare,  # a pool worker: the parent seeded or reclaimed
        revalidate=revalidate,
        robots_store=stores.robots_store,
        near_dup_store=stores.near_dup_store,
        digest_store=stores.digest_store,
        heartbeat=part or MAIN_WORKER,
        hooks=EMBEDDED_HOOKS if hooks is None else hooks,
    )


async def run_engine(
    settings: CrawlSettings,
    frontier: Frontier,
    ip_gate: IpGate,
    *,
    part: str = "",
    progress: IO[str] | None = None,
    prepare: Callable[[], Awaitable[object]] | None = None,
    fetcher: str = build.EMBEDDED.fetcher,
    revalidate: Recrawl | None = None,
    robots_store: RobotsStore | None = None,
    near_dup_store: NearDupStore | None = None,
    digest_store: DigestStore | None = None,
    heartbeat: str | None = None,
    hooks: WorkerHooks = EMBEDDED_HOOKS,
) -> int:
    """Run one worker's `Crawler` over `frontier` into `settings.output` until the crawl
    ends, a stop is requested or SIGINT/SIGTERM; write its statistics (`stats.json`, or
    `stats-<part>.json` for a pool worker) and close the frontier. The exit status.

    `prepare()` runs first (seeding, reclaiming); the fetcher is the one registered as
    `fetcher` (fetch/_registry.py); `hooks` are what the mode adds (`WorkerHooks`).
    Storage errors (OSError, sqlite3.Error and the hooks' `storage_errors`) end the worker
    with 74. `robots_store` is the crawl's shared robots.txt store (closed here with the
    frontier; None: this worker's cache only), `near_dup_store` the crawl's text
    fingerprints (closed here too; None: this worker's own, kept in memory), `digest_store`
    its payload digests (closed here too; None: every response stored whole). `heartbeat`:
    this worker's id in the crawl directory's heartbeats (engine/heartbeat.py; None: none,
    as a cluster worker, which beats in Redis)."""
    out = settings.output
    near_dups = None
    if settings.traps.near_dup_links != "off":
        near_dups = NearDups(near_dup_store, settings.traps.near_dup_distance)
    elif near_dup_store is not None:
        near_dup_store.close()
    parts = build.worker(
        settings,
        frontier,
        ip_gate,
        part=part,
        fetcher=fetcher,
        guard_fetcher=hooks.guard_fetcher,
        clock=hooks.clock,
        revalidate=revalidate,
        robots_store=robots_store,
        digest_store=digest_store,
        extra_sinks=hooks.sinks,
        near_dups=near_dups,
    )
    crawler, recorder = parts.crawler, parts.recorder
    display = None
    if progress is not None:
        display = ProgressDisplay(progress, max_pages=settings.max_pages)
    resume_hint = hooks.resume_hint
    # where an abandoned request's URL goes (a cluster worker: `resume_hint` says how to go on)
    kept = "their URLs kept for --resume" if resume_hint is None else (
        "their URLs stay queued in the crawl's frontier")  # fmt: skip
    stop = WorkerStop(crawler, asyncio.get_running_loop(), display, kept, hooks.on_stop)
    stopped = stop.stopped
    if hooks.signals:
        stop.install()
    started = time.time()
    exit_code = 0
    errors: tuple[type[Exception], ...] = (OSError, sqlite3.Error, *hooks.storage_errors)
    reporter = None
    if display is not None:
        reporter = asyncio.create_task(show_worker_progress(crawler, display))
    beats = Heartbeat(crawler, out, heartbeat) if heartbeat is not None else None
    if beats is not None:
        beats.start()
    try:
        if prepare is not None:
            await prepare()
        if hooks.session is None:
            await crawler.run()
        else:
            async with hooks.session(crawler):
                await crawler.run()
        if crawler.disk.tripped is not None:  # it said so, once (Crawler.run)
            exit_code = 74  # EX_IOERR: its outputs could not be written for long
    except* FrontierUnreachable:
        exit_code = Exit.TEMPFAIL  # gave up on the crawl's store while stopping (the mode says so)
    except* errors as group:
        exc = group.exceptions[0]
        full = getattr(exc, "errno", None) in (errno.ENOSPC, errno.EFBIG, errno.EDQUOT)
        what = "disk full" if full else f"cannot write the crawl: {exc}"
        hint = resume_hint or f"resume with `gossamer crawl --resume {out}` once that is fixed"
        _log.error(f"{what} in {out}; nothing is lost: {hint}", extra={"path": str(out)})
        exit_code = 74  # EX_IOERR: the frontier keeps every unfinished URL
    finally:
        # What ended the crawl. The handlers stay installed until the outputs are written and
        # the frontier is closed: a signal from now on (a repeated Ctrl-C, a second SIGTERM)
        # changes nothing, where the default action killed the worker with its WARC `.open`
        # and no statistics written.
        ended_by = stopped[:1]
        try:
            stop.cancel_grace()
            if reporter:
                reporter.cancel()
                await asyncio.gather(reporter, return_exceptions=True)
            if display is not None:
                display.close()
            await parts.fetcher.aclose()
            try:
                try:
                    stats: FrontierStats | None = await crawler.frontier_statistics()
                except FrontierUnreachable:  # the crawl's counts are not known
                    stats, exit_code = None, exit_code or Exit.TEMPFAIL
                summary = worker_summary(
                    crawler, stats, started, ended_by, failed=bool(exit_code)
                )
                recorder.close()
                crawl = CrawlDir(out)
                write_stats(crawl.worker_stats(part) if part else crawl.stats, summary)
            except errors as exc:
                if not exit_code:
                    _log.error(f"cannot write outputs: {exc}", extra={"path": str(out)})
                exit_code = exit_code or 74
            finally:
                try:
                    await crawler.close_frontier()
                except errors:
                    exit_code = exit_code or 74
                finally:
                    if robots_store is not None:
                        robots_store.close()
                    for store in (near_dups, digest_store):
                        if store is not None:
                            try:
                                store.close()
                            except errors:
                                exit_code = exit_code or 74
                    if beats is not None:
                        beats.finish()
        finally:
            if hooks.signals:
                stop.remove()
    if ended_by and exit_code == 0:
        exit_code = 130 if ended_by[0] == signal.SIGINT else 143
    return exit_code


def _load_recrawl(settings: CrawlSettings) -> Recrawl | None:
    """The validators and old out-links of the crawl re-crawled (`--recrawl`), if any."""
    if settings.recrawl is None:
        return None
    try:
        return Recrawl.load(settings.recrawl)
    except (OSError, ValueError) as exc:
        raise CrawlError(f"cannot read the crawl to re-crawl, {settings.recrawl}: {exc}") from exc
