"""The fork pool of `--workers N`: worker processes forked from the crawl's process share the
crawl directory's frontier (each leases its own hosts), the per-IP slots (the parent's
`IpGateBroker`) and the crawl log; each writes its own WARC and graph part files. The parent
seeds the frontier, forwards stops, shows progress and merges the workers' statistics.

The pool scales while it runs (`request_scale`: `gossamer workers --scale N DIR`, the
dashboard's /api/scale): the request goes to `DIR/control.json` and SIGUSR1 wakes the parent,
which forks new workers (`w{k}`, k never reused) or asks the highest-numbered ones to stop as a
stop does (their batches completed, their hosts back in the frontier at once). Nothing is read
per page; a retired worker's exit is not the crawl's end (docs/crawler.md, "Using every core")."""

from __future__ import annotations

import contextlib
import ctypes
import gc
import json
import logging
import multiprocessing
import multiprocessing.connection
import multiprocessing.process
import os
import signal
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO, Any, Final

from ..config import MAX_WORKERS, CrawlSettings
from ..crawldir import MANIFEST, CrawlDir
from ..engine.crawler import seed_frontier
from ..engine.heartbeat import BeatPages, forget_beat
from ..engine.ipgate import IpGateBroker
from ..engine.recrawl import seed_recrawl
from ..frontier import Frontier
from ..report.progress import ProgressDisplay, WorkersProgress
from ..report.summary import merge_stats
from ..sinks import recover, write_stats
from . import build
from .graphfeed import GraphFeed
from .stopping import STOP_GRACE_S, STOP_SIGNALS, ask_to_stop
from .worker import run_worker

_log = logging.getLogger(__name__)

__all__ = [
    "MAX_POOL_WORKERS",
    "ScaleError",
    "clear_control",
    "read_control",
    "request_scale",
    "run_pool",
]

#: the most workers a pool is scaled to: `config.MAX_WORKERS`, the cap of `--workers` too
MAX_POOL_WORKERS: Final = MAX_WORKERS
#: the signal that tells a pool's parent to read its control record
SCALE_SIGNAL = signal.SIGUSR1


class ScaleError(Exception):
    """A pool cannot be scaled as asked; the message says why."""


def clear_control(out: Path) -> None:
    with contextlib.suppress(FileNotFoundError):
        CrawlDir(out).control.unlink()


def read_control(out: Path) -> dict[str, Any] | None:
    """The pool's control record: the parent's pid and the worker count asked for (None:
    none, or unreadable)."""
    try:
        data = json.loads(CrawlDir(out).control.read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _write_control(out: Path, record: dict[str, Any]) -> None:
    path = CrawlDir(out).control
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(record) + "\n")
    os.replace(tmp, path)


def gossamer_alive(pid: int) -> bool:
    """Whether `pid` runs and (where /proc tells) is a gossamer process: a crawl killed
    leaves a pid another program may have been given since."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return True  # no /proc: trust the pid
    return b"gossamer" in cmdline


def running_pool(out: Path) -> tuple[int, dict[str, Any]]:
    """The pid of the pool's parent running in `out` and its control record (ScaleError:
    no crawl runs there, or it runs in one process, which cannot be scaled)."""
    crawl = CrawlDir(out)
    if not crawl.manifest.is_file():
        raise ScaleError(f"{out} is not a crawl directory (no {MANIFEST})")
    pid = crawl.lock_pid()
    if pid is None or not gossamer_alive(pid):
        raise ScaleError(f"no crawl is running in {out}")
    control = read_control(out)
    if control is None or control.get("pid") != pid:
        raise ScaleError(
            f"the crawl in {out} runs in one process (--workers 1): only a pool "
            "(--workers 2 or more) can be scaled; stop it and resume it with --workers N"
        )
    return pid, control


def request_scale(out: Path, target: int) -> str:
    """Ask the pool running in `out` for `target` workers (ScaleError: it cannot be asked):
    the code path of `gossamer workers --scale N DIR` and of the dashboard. What was done."""
    if not 1 <= target <= MAX_POOL_WORKERS:
        raise ScaleError(
            f"--scale must be between 1 and {MAX_POOL_WORKERS} for an embedded pool, not {target}"
        )
    pid, control = running_pool(out)
    before = control.get("workers")
    _write_control(out, {**control, "workers": target, "requested": time.time()})
    try:
        os.kill(pid, SCALE_SIGNAL)
    except ProcessLookupError:
        raise ScaleError(f"no crawl is running in {out}") from None
    return f"asked the pool in {out} (pid {pid}) for {target} workers (it had {before})"


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
    (runner/graphfeed.py)."""
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
    crawl = CrawlDir(out)
    if resume:
        frontier.reclaim_expired(float("inf"))
    else:
        seed_frontier(frontier, settings)
        seed_recrawl(frontier, settings)  # --recrawl: every page the old crawl fetched
    done_before = frontier.statistics().done  # a resume's earlier runs, shown beside this one's
    for old in crawl.worker_stats_files():
        old.unlink()
    if settings.sinks.warc and crawl.warc_dir.is_dir():
        recover(crawl.warc_dir)  # `.open` files of a killed run: keep their whole records
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
    procs: list[multiprocessing.process.BaseProcess] = []
    stopped: list[int] = []
    asked: set[int] = set()  # the workers sent SIGTERM: each is asked once
    hurried: set[int] = set()  # … and a second one: they abandon their requests in flight
    retired: set[int] = set()  # the workers asked to stop by a scale-down (pids)
    wake_r, wake_w = os.pipe()  # the handler wakes _watch, which says what the stop waits for
    os.set_blocking(wake_w, False)

    def fork(k: int) -> None:
        serving = k >= workers  # the broker serves already: one more socket pair for w{k}
        if serving:
            assert broker.add_worker() == k
        proc = ctx.Process(
            target=_worker_main,
            args=(out, f"w{k}", os.getpid(), backends, broker, k),
            name=f"w{k}",
        )
        # forked with SIGINT/SIGTERM blocked (as at the start: hold_stop_signals), so a stop
        # forwarded while it starts waits for its handlers
        old = signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
        try:
            proc.start()
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, old)
            if serving:
                broker.forked(k)
        procs.append(proc)
        if stopped:  # a stop came while it was forked (after the handler asked the others)
            ask_to_stop([proc], asked, _forked_alive)

    def rescale() -> None:
        """Apply the control record's worker count (a SIGUSR1 woke _watch): fork workers
        numbered past every one so far, or ask the highest-numbered to stop."""
        if stopped:
            return  # the crawl is stopping: it keeps the workers it has
        control = read_control(out)
        if control is None or control.get("pid") != os.getpid():
            return  # a stray SIGUSR1 (no request of ours to read)
        try:
            target = min(max(int(control["workers"]), 1), MAX_POOL_WORKERS)
        except (KeyError, TypeError, ValueError):
            return
        active = [p for p in procs if p.exitcode is None and p.pid not in asked]
        if target > len(active):
            for _ in range(target - len(active)):
                fork(len(procs))
        elif target < len(active):
            for p in sorted(active, key=lambda p: int(p.name[1:]), reverse=True)[
                : len(active) - target
            ]:
                assert p.pid is not None
                retired.add(p.pid)
                ask_to_stop([p], asked, _forked_alive)
        _log.info(f"the pool of {out}: {len(active)} -> {target} workers")

    def on_control(_signum: int, _frame: object) -> None:
        with contextlib.suppress(OSError):
            os.write(wake_w, b"s")

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
    previous[SCALE_SIGNAL] = signal.signal(SCALE_SIGNAL, on_control)
    try:
        # before the first fork: a worker's share of the hosts is 1 / this count
        # (runner/build.PoolShare), so the first to start does not lease them all
        _write_control(out, {"pid": os.getpid(), "workers": workers,
                             "max_workers": MAX_POOL_WORKERS})  # fmt: skip
        for k in range(workers):
            fork(k)
        broker.start()
        signal.pthread_sigmask(signal.SIG_UNBLOCK, STOP_SIGNALS)  # a held stop: forward it
        display = None
        if progress is not None:
            display = ProgressDisplay(progress, max_pages=settings.max_pages)
        reporter = WorkersProgress(
            display, stopped, grace_s=STOP_GRACE_S, done_before=done_before
        )
        try:
            _watch(
                procs, frontier, reporter, asked=asked, wakeup=wake_r, feed=feed,
                retired=retired, on_control=rescale,
                on_exit=lambda p: forget_beat(out, p.name) if p.pid in retired else None,
                pages=BeatPages(out),
            )  # fmt: skip
        finally:
            signal.signal(SCALE_SIGNAL, previous.pop(SCALE_SIGNAL))
            clear_control(out)
            reporter.close()
            os.close(wake_r)
            os.close(wake_w)
        codes = []
        for p in procs:
            p.join()
            code = p.exitcode
            assert code is not None  # set once joined
            code = 128 - code if code < 0 else code  # killed by signal N: 128 + N
            if p.pid in retired and code in (130, 143):
                code = 0  # it left because the pool shrank, as it was asked
            codes.append(code)
        if feed is not None:
            feed.drain()  # what the workers sent last (every one has exited)
        summary = merge_stats(
            out, len(procs), started, stopped, frontier.statistics(), settings.max_pages, codes,
            retired=[p.name for p in procs if p.pid in retired],
        )  # fmt: skip
        write_stats(crawl.stats, summary)
    finally:
        clear_control(out)  # (written before the forks: a failed fork leaves none either)
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
    signal.signal(SCALE_SIGNAL, signal.SIG_IGN)
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
    retired: set[int] | None = None,
    on_control: Callable[[], None] | None = None,
    on_exit: Callable[[multiprocessing.process.BaseProcess], object] | None = None,
    pages: Callable[[], int] | None = None,
) -> None:
    """Wait for the workers, showing the frontier's progress with `reporter` every
    `reporter.interval` seconds. Returns as soon as the last worker exits. When a worker
    fails (a non-zero exit), the others are asked to stop (SIGTERM), except those already
    asked (`asked`, the pids shared with the parent's signal handler). A byte on the file
    descriptor `wakeup` (a signal handler's) wakes the wait at once and has the reporter
    say what the stop waits for. The page events the workers send to `feed` are applied as
    they come. A byte `s` on `wakeup` (SIGUSR1's handler) calls `on_control` (the pool
    grows or shrinks: `procs` may grow); the workers in `retired` (pids) were asked to stop
    by it, and their exit by SIGTERM is no failure. `on_exit(p)` is called once as each
    worker is seen to have exited. `pages()`: the pages the workers fetched in this run
    (their heartbeats: counted as fetched), shown with the frontier's counts."""
    if asked is None:
        asked = set()
    if retired is None:
        retired = set()
    stopping = False
    seen_exit: set[int] = set()

    def failed(p: multiprocessing.process.BaseProcess) -> bool:
        if p.exitcode in (None, 0):
            return False
        return not (p.pid in retired and p.exitcode in (130, 143, -signal.SIGTERM))

    def notice_exits() -> None:
        if on_exit is not None:  # (reading `exitcode` reaps too: every exited one, once)
            for p in procs:
                if p.exitcode is not None and id(p) not in seen_exit:
                    seen_exit.add(id(p))
                    on_exit(p)

    while True:
        alive = [p for p in procs if p.exitcode is None]
        # every worker not waited on below is noticed now: one reaped anywhere in the last
        # round (the progress line's count reads `exitcode`, which reaps) would otherwise
        # wait for the next wake-up, which may be the crawl's end
        notice_exits()
        if not alive:
            break
        if not stopping and any(failed(p) for p in procs):
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
            woke = b""
            with contextlib.suppress(BlockingIOError, OSError):
                woke = os.read(wakeup, 64)
            if b"!" in woke:
                reporter.say_stops()
            if b"s" in woke and on_control is not None and not stopping:
                on_control()
        for p in alive:
            p.join(timeout=0)  # reap, so exitcode is set (noticed at the top)
        if not reporter.due():
            continue
        st = frontier.statistics()
        fetched = None if pages is None else pages()
        reporter.show(st, workers=sum(1 for p in procs if p.exitcode is None), pages=fetched)
