"""The fork pool of `--workers N`: N worker processes forked from the crawl's process share
the crawl directory's frontier (each leases its own hosts), the per-IP slots (the parent's
`IpGateBroker`) and the crawl log; each writes its own WARC and graph part files, and the
parent seeds the frontier, forwards stops, shows progress and merges the workers'
statistics."""

from __future__ import annotations

import contextlib
import ctypes
import gc
import multiprocessing
import multiprocessing.connection
import multiprocessing.process
import os
import signal
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import IO, Any

from ..config import CrawlSettings
from ..frontier import Frontier
from ..sinks import recover, write_stats
from . import build
from .crawler import seed_frontier
from .graphfeed import GraphFeed
from .ipgate import IpGateBroker
from .progress import ProgressDisplay, WorkersProgress
from .recrawl import seed_recrawl
from .stopping import STOP_GRACE_S, STOP_SIGNALS, ask_to_stop
from .summary import merge_stats

__all__ = ["run_pool"]


def run_pool(
    settings: CrawlSettings,
    workers: int,
    *,
    resume: bool,
    progress: IO[str] | None,
    backends: build.Backends,
    feed: GraphFeed | None = None,
) -> int:
    """N worker processes share the SQLite frontier (each leases its own hosts), the per-IP
    slots (served by this process) and the crawl log; each writes its own WARC and graph
    part files. `feed`: the graph consumer the parent applies the workers' page events to
    (engine/graphfeed.py)."""
    # One connection for the parent's whole life: seeding, progress and the final counts
    # (statistics() reads the shared tables, so it sees the workers' progress).
    frontier = build.open_frontier(settings, backends)
    try:
        return _supervise(
            settings, workers, frontier, resume=resume, progress=progress, backends=backends,
            feed=feed,
        )  # fmt: skip
    finally:
        frontier.close()


def _supervise(
    settings: CrawlSettings,
    workers: int,
    frontier: Frontier,
    *,
    resume: bool,
    progress: IO[str] | None,
    backends: build.Backends,
    feed: GraphFeed | None = None,
) -> int:
    out = settings.output
    if resume:
        frontier.reclaim_expired(float("inf"))
    else:
        seed_frontier(frontier, settings)
        seed_recrawl(frontier, settings)  # --recrawl: every page the old crawl fetched
    for old in out.glob("stats-w*.json"):
        old.unlink()
    if settings.sinks.warc and (out / "warc").is_dir():
        recover(out / "warc")  # `.open` files of a killed run: keep their whole records
    started = time.time()
    # Workers are forked, not started as new interpreters: this process has imported
    # everything a worker needs, and a fresh `gossamer crawl-worker` spent ~0.3 s of a
    # core importing it again (a tenth of a 2-worker crawl of 20,000 pages). No thread runs
    # here yet, and a worker never touches this process's frontier connection (it opens its
    # own and leaves with os._exit, as multiprocessing's fork children do).
    ctx = multiprocessing.get_context("fork")
    # the workers' per-IP slots: made before the fork (each worker inherits its socket),
    # served on a thread of this process once every worker is forked
    broker = IpGateBroker(workers, settings.politeness.per_ip)
    gc.freeze()  # what was imported stays out of the workers' collections (and their pages)
    procs = [
        ctx.Process(
            target=_worker_main,
            args=(out, f"w{k}", os.getpid(), backends, broker, k),
            name=f"w{k}",
        )
        for k in range(workers)
    ]
    stopped: list[int] = []
    asked: set[int] = set()  # the workers sent SIGTERM: each is asked once
    hurried: set[int] = set()  # … and a second one: they abandon their requests in flight
    wake_r, wake_w = os.pipe()  # the handler wakes _watch, which says what the stop waits for
    os.set_blocking(wake_w, False)

    def forward(signum: int, _frame: object) -> None:
        # A worker stops when it gets its first SIGTERM and abandons its requests in flight
        # when it gets the same signal again (run_engine): so the parent asks once, and
        # once more when the user repeats the signal (a Ctrl-C reaches the workers too).
        repeated = signum in stopped
        stopped.append(signum)
        ask_to_stop(procs, hurried if repeated else asked, _forked_alive)
        with contextlib.suppress(OSError):
            os.write(wake_w, b"!")

    # SIGINT/SIGTERM are held (run_crawl): a worker is forked with them blocked and takes
    # them once its handlers are installed (run_engine), so a stop forwarded while it starts
    # ends it cleanly; the parent takes them once every worker is forked, and keeps its
    # handler until stats.json is written
    previous = {sig: signal.signal(sig, forward) for sig in STOP_SIGNALS}
    try:
        for proc in procs:
            proc.start()
        broker.start()
        signal.pthread_sigmask(signal.SIG_UNBLOCK, STOP_SIGNALS)  # a held stop: forward it
        display = None
        if progress is not None:
            display = ProgressDisplay(progress, max_pages=settings.max_pages)
        reporter = WorkersProgress(display, stopped, grace_s=STOP_GRACE_S)
        try:
            _watch(procs, frontier, reporter, asked=asked, wakeup=wake_r, feed=feed)
        finally:
            reporter.close()
            os.close(wake_r)
            os.close(wake_w)
        codes = []
        for p in procs:
            p.join()
            code = p.exitcode
            assert code is not None  # set once joined
            codes.append(128 - code if code < 0 else code)  # killed by signal N: 128 + N
        if feed is not None:
            feed.drain()  # what the workers sent last (every one has exited)
        summary = merge_stats(
            out, workers, started, stopped, frontier.statistics(), settings.max_pages, codes
        )
        write_stats(out / "stats.json", summary)
    finally:
        broker.stop()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    if any(c == 74 for c in codes):
        return 74
    if stopped:
        return 130 if stopped[0] == signal.SIGINT else 143
    return next((c for c in codes if c not in (0,)), 0)


def _die_with_parent() -> None:
    """In a worker: SIGKILL when the parent dies (Linux prctl PR_SET_PDEATHSIG), so killing
    the crawler kills its workers and a resume never races an orphan."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG = 1
    except (OSError, AttributeError):
        pass


def _worker_main(
    out: Path, part: str, parent: int, backends: build.Backends, broker: IpGateBroker, k: int
) -> None:
    """A forked pool worker k: die with the parent, then crawl (the exit status is the
    worker's: sys.exit), its per-IP slots from the parent's `broker`. SIGINT/SIGTERM arrive
    blocked (the parent holds them over the fork) and stay pending until `run_engine` has
    installed the worker's handlers: a stop at any moment of the start-up ends the worker
    cleanly, not by the default action."""
    _die_with_parent()
    gate_socket = broker.in_worker(k)
    if os.getppid() != parent:  # the parent died before the line above took effect
        os._exit(1)
    signal.signal(signal.SIGINT, signal.default_int_handler)  # the parent's handlers are
    signal.signal(signal.SIGTERM, signal.SIG_DFL)  # not ours
    from .run import run_worker  # (run imports this module)

    sys.exit(run_worker(out, part, backends, ip_gate_socket=gate_socket))


def _forked_alive(p: multiprocessing.process.BaseProcess) -> bool:
    return p.exitcode is None


def _watch(
    procs: Sequence[multiprocessing.process.BaseProcess],
    frontier: Frontier,
    reporter: WorkersProgress,
    *,
    asked: set[int] | None = None,
    wakeup: int | None = None,
    feed: GraphFeed | None = None,
) -> None:
    """Wait for the workers, showing the frontier's progress with `reporter` every
    `reporter.interval` seconds. Returns as soon as the last worker exits. When a worker
    fails (a non-zero exit), the others are asked to stop (SIGTERM), except those already
    asked (`asked`, the pids shared with the parent's signal handler). A byte on the file
    descriptor `wakeup` (a signal handler's) wakes the wait at once and has the reporter
    say what the stop waits for. The page events the workers send to `feed` are applied as
    they come."""
    if asked is None:
        asked = set()
    stopping = False
    while alive := [p for p in procs if p.exitcode is None]:
        if not stopping and any(p.exitcode not in (None, 0) for p in procs):
            # a worker failed (e.g. 74: outputs cannot be written): stop the others — they
            # complete their batches and exit — instead of letting them wait out its leases
            stopping = True
            ask_to_stop(alive, asked, _forked_alive)
        # wake when any worker exits (signal handlers still run while waiting)
        timeout = reporter.wait_s()
        waited: list[Any] = [p.sentinel for p in alive]
        if wakeup is not None:
            waited.append(wakeup)
        if feed is not None:
            waited.append(feed.fileno())
        ready = multiprocessing.connection.wait(waited, timeout)
        if feed is not None and feed.fileno() in ready:
            feed.drain()
        if wakeup is not None and wakeup in ready:
            with contextlib.suppress(BlockingIOError, OSError):
                os.read(wakeup, 64)
            reporter.say_stops()
        for p in alive:
            p.join(timeout=0)  # reap, so exitcode is set
        if not reporter.due():
            continue
        st = frontier.statistics()
        reporter.show(st, workers=sum(1 for p in procs if p.exitcode is None))
