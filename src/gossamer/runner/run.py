"""An embedded crawl run from its settings to its statistics: the crawl directory (created,
locked, its crawl.json), one worker (`run_engine`, from the parts runner/build.py makes) or
the fork pool of --workers N (runner/pool.py), the end summary and the CDX index. Stops:
runner/stopping.py; statistics: report/summary.py; progress: report/progress.py. The crawl
directory's layout: crawldir.py (docs/crawler/outputs.md).
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import json
import logging
import signal
import socket
import sqlite3
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import IO, Any

from .. import logs
from ..config import CrawlSettings, SettingsError
from ..crawldir import MANIFEST, CrawlDir, CrawlError
from ..crawldir import dir_lock as _dir_lock
from ..engine.crawler import Crawler, seed_frontier
from ..engine.heartbeat import Heartbeat, clear_beats
from ..engine.recrawl import Recrawl, seed_recrawl
from ..engine.seams import IpGate
from ..exitcodes import Exit
from ..fetch import Fetcher, Fetching
from ..fetch.options import dead_proxy
from ..frontier import Frontier
from ..outdir import new_directory_problem
from ..report.crawl import end_run, start_run
from ..report.progress import ProgressDisplay, print_summary, show_worker_progress
from ..report.summary import worker_summary
from ..robots_store import RobotsStore
from ..sinks import write_stats
from ..sinks.cdx import write_crawl_index
from . import build, livegraph
from .graphfeed import GraphFeed
from .pool import clear_control, run_pool
from .stopping import WorkerStop, hold_stop_signals

#: the heartbeat id of a crawl's one process when it runs without a pool
MAIN_WORKER = "main"
_log = logging.getLogger(__name__)


def load_manifest(out: Path) -> CrawlSettings:
    """The settings stored in a crawl directory (CrawlError / SettingsError when unusable)."""
    manifest = CrawlDir(out).manifest
    if not manifest.is_file():
        raise CrawlError(f"{out} is not a crawl directory (no {MANIFEST}) — cannot resume")
    try:
        stored = json.loads(manifest.read_text())
    except (OSError, ValueError) as exc:
        raise CrawlError(f"cannot read {manifest}: {exc}") from exc
    if not isinstance(stored, dict):
        raise CrawlError(f"cannot read {manifest}: not a JSON object")
    stored["output"] = str(out)
    try:
        return CrawlSettings(**stored)
    except Exception as exc:
        raise SettingsError(f"{manifest}: {exc}") from exc


def prepare_directory(settings: CrawlSettings, *, resume: bool) -> CrawlSettings:
    """Create the crawl directory of a new crawl (it must not exist or be empty) and write its
    crawl.json; on resume, the stored settings (see `engine.resume` for those a resume takes
    from its command line)."""
    out = settings.output
    manifest = CrawlDir(out).manifest
    if resume:
        return load_manifest(out)
    if not settings.seeds:
        raise SettingsError("invalid settings:\n  seeds: give at least one seed URL")
    if manifest.exists():
        raise CrawlError(
            f"{out} already holds a crawl: use `gossamer crawl --resume {out}` or a new -o DIR"
        )
    problem = new_directory_problem(out, holds=", not a gossamer crawl")
    if problem is not None:
        raise CrawlError(problem)
    try:
        out.mkdir(parents=True, exist_ok=True)
        write_manifest(settings)
    except OSError as exc:
        raise CrawlError(f"cannot write to {out}: {exc.strerror or exc}") from exc
    return settings


def write_manifest(settings: CrawlSettings) -> None:
    """Write `settings` as the crawl's crawl.json, atomically (a reader sees the old file or
    the new one)."""
    manifest = CrawlDir(settings.output).manifest
    tmp = manifest.with_name(manifest.name + ".tmp")
    tmp.write_text(json.dumps(settings.manifest(), indent=2) + "\n")
    tmp.replace(manifest)


def run_crawl(
    settings: CrawlSettings,
    *,
    resume: bool = False,
    progress: IO[str] | None = None,
    backends: build.Backends = build.EMBEDDED,
    feed: GraphFeed | None = None,
) -> int:
    """Run (or resume) an embedded crawl to the end or until SIGINT/SIGTERM. Exit status.
    `feed`: the graph consumer the crawl's page events go to (runner/graphfeed.py; entered).

    A SIGINT/SIGTERM at any moment from here on stops the crawl cleanly (exit 130/143,
    `stats.json`, no lease left, WARC files closed): one that arrives while the crawl starts
    is held until its handlers are in place. `backends`: the registered frontier backend
    and fetcher it is built with (runner/build.py)."""
    changed: dict[str, Any] = {}
    with hold_stop_signals():
        if resume:
            from .resume import plan_resume  # here: engine.resume imports this module

            plan = plan_resume(settings)  # reads only: a refusal changes nothing
            if plan.nothing_to_do is not None:
                _log.info(plan.nothing_to_do, extra={"path": str(settings.output)})
                return int(Exit.OK)
            settings, changed = plan.settings, plan.changed
        # the proxy this run uses (a resume's may be a new one): a dead one stops the crawl
        # before anything is written
        problem = dead_proxy(settings.fetch.proxy, settings.fetch.connect_timeout)
        if problem is not None:
            _log.error(problem)
            return int(Exit.UNAVAILABLE)
        if not resume:
            settings = prepare_directory(settings, resume=False)
        out = settings.output
        workers = settings.effective_workers()
        # diagnostics also to DIR/gossamer.log.jsonl (the dashboard's log tail), once the
        # directory is this process's
        with _dir_lock(out), logs.diagnostics_file(out):
            # runs.jsonl: one line as each run starts and ends, so `gossamer report` can sum
            # the runs of a resumed crawl (stats.json holds the last run's alone)
            try:
                if changed:  # the settings a resume took: for this run and the next ones
                    write_manifest(settings)
                run, started = start_run(out, resume=resume, workers=workers, changed=changed)
                clear_beats(out)  # an earlier run's workers: this run's write their own
                clear_control(out)
            except OSError as exc:
                raise CrawlError(f"cannot write to {out}: {exc.strerror or exc}") from exc
            began = time.time()
            with contextlib.ExitStack() as stack:
                if feed is None and settings.sinks.live_graph:
                    stack.enter_context(_live_graph(out))
                if workers > 1:
                    code = run_pool(
                        settings, workers, resume=resume, progress=progress,
                        backends=backends, feed=feed,
                    )  # fmt: skip
                else:
                    with asyncio.Runner(loop_factory=loop_factory()) as runner:
                        code = runner.run(
                            _run(settings, resume=resume, progress=progress, backends=backends)
                        )
            code = write_cdx_index(out, code) if settings.sinks.warc else code
            code = _end_summary(settings, code, progress, began)
            with contextlib.suppress(OSError):  # the crawl's own exit status says more
                end_run(out, run, started, code)
            return code


@contextlib.contextmanager
def _live_graph(out: Path) -> Iterator[None]:
    """The crawl's live graph: its statistics in `out/graph/stats.json`, computed by a child
    process from the crawl's files (runner/livegraph.py, graph/_follow.py: a resumed crawl's
    earlier runs included), so this process does nothing per page for it and imports no
    numpy (a pool's workers fork from it). On leaving, the crawl's files closed, it asks for
    the final statistics, which a fork of the child computes while the crawl ends (the
    child itself exits at once: the crawl's exit is not held for them; `gossamer report`
    waits for them)."""
    # (its refresh interval: GOSSAMER_LIVE_GRAPH_INTERVAL, read by the child itself)
    argv = [sys.executable, "-m", "gossamer.runner.livegraph", str(out)]
    child = subprocess.Popen(argv, stdin=subprocess.PIPE, start_new_session=True)
    assert child.stdin is not None
    try:
        yield
    finally:
        try:
            child.stdin.write(livegraph.END)
            child.stdin.close()
        except OSError:
            pass  # (it died: its exit status says so below)
        code = child.wait()
        if code != 0:  # (its reason is on its stderr; the crawl's own exit status stands)
            _log.warning(f"the live graph of {out} failed (exit {code}): no final statistics")


def write_cdx_index(out: Path, code: int) -> int:
    """Write `out/warc/index.cdxj` once every writer of the run is closed (also after a stop:
    it covers every WARC of the crawl, all runs and workers, the recovered ones too). The
    exit status: `code`, or IOERR when the index cannot be written (the WARCs are whole; a
    resume or `gossamer report --cdx` writes it)."""
    warc_dir = CrawlDir(out).warc_dir
    try:
        write_crawl_index(warc_dir)
    except OSError as exc:
        _log.error(
            f"cannot write the CDX index in {warc_dir}: "
            f"{exc.strerror or exc}; the WARC files are whole: run "
            f"`gossamer report {out} --cdx` once that is fixed",
            extra={"path": str(out)},
        )
        return code or Exit.IOERR
    return code


def _end_summary(
    settings: CrawlSettings, code: int, stream: IO[str] | None, began: float
) -> int:
    """Print the end summary (unless quiet), and the main failure when no page was fetched:
    then the exit status is Exit.NOTHING_FETCHED rather than OK."""
    path = CrawlDir(settings.output).stats
    try:
        if path.stat().st_mtime < began - 1.0:  # (a coarse file-system clock)
            return code  # an earlier run's: this one could not write its own, and said so
        stats = json.loads(path.read_text())
    except (OSError, ValueError):
        return code  # not written: the crawl said why already
    failed = print_summary(stream, stats, settings.output, max_pages=settings.max_pages)
    return Exit.NOTHING_FETCHED if failed and code == Exit.OK else code


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
            _run(
                settings,
                resume=False,
                progress=None,
                part=part,
                backends=backends,
                ip_gate_socket=ip_gate_socket,
            )
        )


def loop_factory() -> Any:
    """uvloop when available: pycurl on uvloop costs 20–60 µs less per request."""
    try:
        import uvloop
    except ImportError:
        return None
    return uvloop.new_event_loop


async def _run(
    settings: CrawlSettings,
    *,
    resume: bool,
    progress: IO[str] | None,
    part: str = "",
    backends: build.Backends = build.EMBEDDED,
    ip_gate_socket: socket.socket | None = None,
) -> int:
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
        heartbeat=part or MAIN_WORKER,
    )


async def run_engine(
    settings: CrawlSettings,
    frontier: Frontier,
    ip_gate: IpGate,
    *,
    part: str = "",
    progress: IO[str] | None = None,
    prepare: Callable[[], Awaitable[object]] | None = None,
    session: Callable[[Crawler], AbstractAsyncContextManager[object]] | None = None,
    fetcher: str = build.EMBEDDED.fetcher,
    guard_fetcher: Callable[[Fetcher], Fetching] | None = None,
    clock: Callable[[], float] = time.time,
    revalidate: Recrawl | None = None,
    storage_errors: tuple[type[Exception], ...] = (),
    resume_hint: str | None = None,
    robots_store: RobotsStore | None = None,
    heartbeat: str | None = None,
) -> int:
    """Run one worker's `Crawler` over `frontier` into `settings.output` until the crawl
    ends, a stop is requested or SIGINT/SIGTERM; write its statistics (`stats.json`, or
    `stats-<part>.json` for a pool worker) and close the frontier. The exit status.

    `prepare()` runs first (seeding, reclaiming); `session(crawler)` is entered around the
    crawl (cluster mode: heartbeats, the IP gate's refresher); `guard_fetcher` wraps the
    fetcher (cluster mode: requests fenced by the IP gate), the one registered as `fetcher`
    (fetch/_registry.py); `clock` is the crawler's.
    Storage errors (OSError, sqlite3.Error and `storage_errors`) end the worker with 74
    and a message ending in `resume_hint` (how to go on once fixed). `robots_store` is the
    crawl's shared robots.txt store (closed here with the frontier; None: this worker's
    cache only). `heartbeat`: this worker's id in the crawl directory's heartbeats
    (engine/heartbeat.py; None: none, as a cluster worker, which beats in Redis)."""
    out = settings.output
    parts = build.worker(
        settings,
        frontier,
        ip_gate,
        part=part,
        fetcher=fetcher,
        guard_fetcher=guard_fetcher,
        clock=clock,
        revalidate=revalidate,
        robots_store=robots_store,
    )
    crawler, recorder = parts.crawler, parts.recorder
    display = None
    if progress is not None:
        display = ProgressDisplay(progress, max_pages=settings.max_pages)
    # where an abandoned request's URL goes (a cluster worker: `resume_hint` says how to go on)
    kept = "their URLs kept for --resume" if resume_hint is None else (
        "their URLs stay queued in the crawl's frontier")  # fmt: skip
    stop = WorkerStop(crawler, asyncio.get_running_loop(), display, kept)
    stopped = stop.stopped
    stop.install()
    started = time.time()
    exit_code = 0
    errors: tuple[type[Exception], ...] = (OSError, sqlite3.Error, *storage_errors)
    reporter = None
    if display is not None:
        reporter = asyncio.create_task(show_worker_progress(crawler, display))
    beats = Heartbeat(crawler, out, heartbeat) if heartbeat is not None else None
    if beats is not None:
        beats.start()
    try:
        if prepare is not None:
            await prepare()
        if session is None:
            await crawler.run()
        else:
            async with session(crawler):
                await crawler.run()
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
                stats = await crawler.frontier_statistics()
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
                    if beats is not None:
                        beats.finish()
        finally:
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
