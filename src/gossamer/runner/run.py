"""An embedded crawl run from its settings to its statistics: the crawl directory (created,
locked, its crawl.json), one worker (runner/worker.py) or the fork pool of --workers N
(runner/pool.py), the --live-graph child, the end summary and the CDX index. Stops:
runner/stopping.py; statistics: report/summary.py; progress: report/progress.py. The crawl
directory's layout: crawldir.py (docs/crawler/outputs.md)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import shutil
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any

from .. import logs
from ..config import CrawlSettings, SettingsError
from ..crawldir import CrawlDir, CrawlError
from ..crawldir import dir_lock as _dir_lock
from ..engine.extract import load_extractor
from ..engine.heartbeat import clear_beats
from ..engine.sink_registry import load_sink_plugins
from ..exitcodes import Exit
from ..fetch.options import dead_proxy
from ..outdir import new_directory_problem
from ..plugins import PluginError
from ..report.crawl import end_run, fetched_nothing, start_run
from ..report.progress import print_summary
from ..sinks.cdx import write_crawl_index
from ..sinks.items import merge_items
from . import build, livegraph, spawn
from .graphfeed import GraphFeed
from .manifest import load_manifest, write_manifest
from .pool import clear_control, run_pool
from .stopping import hold_stop_signals
from .worker import WorkerHooks, loop_factory, run_embedded

_log = logging.getLogger(__name__)


def prepare_directory(settings: CrawlSettings, *, resume: bool) -> CrawlSettings:
    """Create the crawl directory of a new crawl (it must not exist, be empty, or hold a
    crawl that fetched nothing: `start_afresh`) and write its crawl.json; on resume, the
    stored settings (see `runner.resume` for those a resume takes from its command line)."""
    out = settings.output
    manifest = CrawlDir(out).manifest
    if resume:
        return load_manifest(out)
    if not settings.seeds:
        raise SettingsError("invalid settings:\n  seeds: give at least one seed URL")
    if manifest.exists():
        start_afresh(out)
    else:
        problem = new_directory_problem(out, holds=", not a gossamer crawl")
        if problem is not None:
            raise CrawlError(problem)
    try:
        out.mkdir(parents=True, exist_ok=True)
        write_manifest(settings)
    except OSError as exc:
        raise CrawlError(f"cannot write to {out}: {exc.strerror or exc}") from exc
    return settings


def start_afresh(out: Path) -> None:
    """Empty the crawl directory `out` for a new crawl when its crawl fetched no page
    (`report.crawl.fetched_nothing`: every seed refused, unreachable or held back by its
    robots.txt, every run ended): every file of its layout is removed (the lock file is kept,
    held meanwhile), so that nothing of the failed crawl — settings, frontier, robots.txt
    answers, logs, run history — mixes with the new one, and `gossamer report` tells of the
    new crawl alone. The same command with its mistake fixed (`--allow-private`, the right
    port) then runs where it first failed. CrawlError, nothing removed, when the crawl
    fetched a page (use --resume), a crawler runs in it, or it holds files of no crawl."""
    crawl = CrawlDir(out)
    if not fetched_nothing(out):
        raise CrawlError(
            f"{out} already holds a crawl: use `gossamer crawl --resume {out}` or a new -o DIR"
        )
    try:
        _only_crawl_files(out)  # (the lock file untouched when it does not)
        with _dir_lock(out):
            for entry in _only_crawl_files(out):
                if entry == crawl.lock:
                    continue
                if entry.is_dir() and not entry.is_symlink():
                    shutil.rmtree(entry)
                else:
                    entry.unlink()
    except OSError as exc:
        raise CrawlError(f"cannot empty {out}: {exc.strerror or exc}") from exc
    _log.info(
        f"{out}: its crawl fetched no page: a new crawl starts afresh there",
        extra={"path": str(out)},
    )


def _only_crawl_files(out: Path) -> list[Path]:
    """The entries of the crawl directory `out`; CrawlError when it holds others."""
    ours, others = CrawlDir(out).entries()
    if others:
        shown = ", ".join(p.name for p in others[:3]) + (" …" if len(others) > 3 else "")
        raise CrawlError(
            f"{out} holds a crawl that fetched nothing, and other files ({shown}); "
            "nothing was removed: move them away, or give a new -o DIR"
        )
    return ours


def run_crawl(
    settings: CrawlSettings,
    *,
    resume: bool = False,
    progress: IO[str] | None = None,
    backends: build.Backends = build.EMBEDDED,
    feed: GraphFeed | None = None,
    hooks: WorkerHooks | None = None,
) -> int:
    """Run (or resume) an embedded crawl to the end or until SIGINT/SIGTERM. Exit status.
    `feed`: the graph consumer the crawl's page events go to (runner/graphfeed.py; entered).

    A SIGINT/SIGTERM at any moment from here on stops the crawl cleanly (exit 130/143,
    `stats.json`, no lease left, WARC files closed): one that arrives while the crawl starts
    is held until its handlers are in place. `backends`: the registered frontier backend
    and fetcher it is built with (runner/build.py). `hooks`: what a Python program adds to
    a crawl of one worker (its sinks; SIGINT/SIGTERM left to it: `WorkerHooks`); refused
    with a pool (ValueError)."""
    changed: dict[str, Any] = {}
    retry: tuple[str, ...] = ()
    with hold_stop_signals():
        if resume:
            from .resume import plan_resume

            plan = plan_resume(settings)  # reads only: a refusal changes nothing
            if plan.nothing_to_do is not None:
                _log.info(plan.nothing_to_do, extra={"path": str(settings.output)})
                return int(Exit.OK)
            settings, changed, retry = plan.settings, plan.changed, plan.retry
        # the proxy this run uses (a resume's may be a new one): a dead one stops the crawl
        # before anything is written
        problem = dead_proxy(settings.fetch.proxy, settings.fetch.connect_timeout)
        if problem is not None:
            _log.error(problem)
            return int(Exit.UNAVAILABLE)
        # the plugins the crawl runs, loaded before anything is written: a broken one is
        # one line (exit 2), not a crashed crawl
        try:
            load_sink_plugins()
        except PluginError as exc:
            raise SettingsError(str(exc)) from None
        if settings.sinks.extract is not None:
            try:
                load_extractor(settings.sinks.extract)
            except PluginError as exc:
                raise SettingsError(f"--extract: {exc}") from None
        if not resume:
            settings = prepare_directory(settings, resume=False)
        out = settings.output
        workers = settings.effective_workers()
        if hooks is not None and workers > 1:
            raise ValueError("a crawl with hooks runs one worker, not a pool")
        # diagnostics also to DIR/gossamer.log.jsonl (the dashboard's log tail), once the
        # directory is this process's
        with _dir_lock(out), logs.diagnostics_file(out):
            # runs.jsonl: one line as each run starts and ends, so `gossamer report` can sum
            # the runs of a resumed crawl (stats.json holds the last run's alone)
            try:
                if changed:  # the settings a resume took: for this run and the next ones
                    write_manifest(settings)
                if retry:  # failed URLs a setting it took may fix
                    _requeue(settings, changed, retry, backends)
                run, started = start_run(out, resume=resume, workers=workers, changed=changed)
                clear_beats(out)  # an earlier run's workers: this run's write their own
                clear_control(out)
            except OSError as exc:
                raise CrawlError(f"cannot write to {out}: {exc.strerror or exc}") from exc
            began = time.time()
            with contextlib.ExitStack() as graph:
                end_graph = None
                if feed is None and settings.sinks.live_graph:
                    end_graph = graph.enter_context(_live_graph(out))
                return _run_and_end(
                    settings, workers, resume, progress, backends, feed, hooks, began, run,
                    started, end_graph,
                )  # fmt: skip


def _run_and_end(
    settings: CrawlSettings,
    workers: int,
    resume: bool,
    progress: IO[str] | None,
    backends: build.Backends,
    feed: GraphFeed | None,
    hooks: WorkerHooks | None,
    began: float,
    run: int,
    started: float,
    end_graph: Callable[[], None] | None,
) -> int:
    """The crawl's run (a pool or one worker), then its end: `end_graph` (the live graph's
    final statistics asked for, the crawl's files closed), the CDX index, the items feed,
    the summary and runs.jsonl's end line. The exit status."""
    out = settings.output
    if workers > 1:
        code = run_pool(
            settings, workers, resume=resume, progress=progress, backends=backends, feed=feed
        )
    else:
        with asyncio.Runner(loop_factory=loop_factory()) as runner:
            code = runner.run(
                run_embedded(
                    settings, resume=resume, progress=progress, backends=backends, hooks=hooks
                )
            )
    if end_graph is not None:
        end_graph()
    code = write_cdx_index(out, code) if settings.sinks.warc else code
    code = write_items_feed(out, code)
    code = _end_summary(settings, code, progress, began)
    with contextlib.suppress(OSError):  # the crawl's own exit status says more
        end_run(out, run, started, code)
    return code


def _requeue(
    settings: CrawlSettings,
    changed: dict[str, Any],
    retry: tuple[str, ...],
    backends: build.Backends,
) -> None:
    """Queue again the failed URLs that the settings a resume `changed` may fix (`retry`:
    runner/resume.py), and say so."""
    from .resume import RETRY_ON, count_keys, flag_of, requeue_failures

    again = requeue_failures(settings, retry, backends)
    if again:
        fixes = ", ".join(flag_of(name) for name in changed if name in RETRY_ON)
        n = sum(again.values())
        _log.info(
            f"{settings.output}: {n:,} failed URL{'' if n == 1 else 's'} queued again "
            f"({count_keys(again)}): {fixes} changed",
            extra={"path": str(settings.output)},
        )


@contextlib.contextmanager
def _live_graph(out: Path) -> Iterator[Callable[[], None]]:
    """The crawl's live graph: its statistics in `out/graph/stats.json`, computed by a child
    process from the crawl's files (runner/livegraph.py, graph/_follow.py: a resumed crawl's
    earlier runs included), so this process does nothing per page for it and imports no
    numpy (a pool's workers fork from it). It yields `end`, to call once the crawl's files
    are closed: it asks for the final statistics, which a fork of the child computes once
    this context is left (its control pipe closed: the crawl's CDX index and summary are
    written by then), so they neither hold the crawl's exit nor slow its end; the child
    itself exits at once (`gossamer report` waits for the fork)."""
    # (its refresh interval: GOSSAMER_LIVE_GRAPH_INTERVAL, read by the child itself)
    child = spawn.start(
        spawn.module_command("gossamer.runner.livegraph", str(out)),
        stdin=subprocess.PIPE,
        new_session=True,
    )
    control = child.stdin
    assert control is not None
    asked: list[bool] = []

    def end() -> None:
        if asked:
            return
        asked.append(True)
        try:
            control.write(livegraph.END)
            control.flush()
        except OSError:
            pass  # (it died: its exit status says so below)

    try:
        yield end
    finally:
        end()
        with contextlib.suppress(OSError):
            control.close()  # (its fork's cue: the final statistics now)
        _reap_live_graphs()
        try:  # it exits on `end`, as a rule long before this: the crawl waits little for it
            code: int | None = child.wait(timeout=_LIVE_GRAPH_EXIT_WAIT_S)
        except subprocess.TimeoutExpired:  # busy in a refresh, at niceness 10 on a loaded
            code = None  # machine: it exits by itself; reaped later (or by init)
            _UNREAPED.append(child)
        if code not in (None, 0):  # (its reason is on its stderr; the crawl's status stands)
            _log.warning(f"the live graph of {out} failed (exit {code}): no final statistics")


#: how long an ending crawl waits for its live graph's child to exit (it has `end` already)
_LIVE_GRAPH_EXIT_WAIT_S = 0.1
#: live graph children that had not exited when their crawl ended (kept, so that none is
#: garbage-collected while it runs), reaped at the next crawl's end
_UNREAPED: list[subprocess.Popen[bytes]] = []


def _reap_live_graphs() -> None:
    _UNREAPED[:] = [c for c in _UNREAPED if c.poll() is None]


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


def write_items_feed(out: Path, code: int) -> int:
    """Merge the workers' item parts (every run's) into `out/items.jsonl`, each crawled
    page's items once (sinks/items.py), when the crawl has any. The exit status: `code`, or
    IOERR when the feed cannot be written (the parts are whole: the next run writes it)."""
    crawl = CrawlDir(out)
    try:
        parts = crawl.items_parts()
        if not parts:
            return code
        items, pages = merge_items(parts, crawl.items)
    except OSError as exc:
        _log.error(
            f"cannot write {crawl.items}: {exc.strerror or exc}; the items are whole in "
            f"{crawl.items_dir}: resume the crawl once that is fixed",
            extra={"path": str(out)},
        )
        return code or Exit.IOERR
    _log.info(
        f"{crawl.items}: {items:,} items of {pages:,} pages", extra={"path": str(out)}
    )
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
