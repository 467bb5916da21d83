"""The composition root of an embedded crawl: build every component from the settings,
run the worker loop, handle signals, write the final statistics.

Crawl directory layout (docs/crawler/outputs.md):
    crawl.json          the settings (also the `testweb audit --crawl` contract)
    frontier.sqlite     queues, dedupe, leases, host state (WAL)
    robots.sqlite       robots.txt answers, shared by the workers (WAL)
    warc/               WARC 1.1 files, per-record gzip, rotated by size
    warc/index.cdxj     their CDXJ index (pywb), written as each run ends (warc/cdx/: per file)
    crawl.log.jsonl     one line per fetch
    graph/              nodes.tsv + edges.tsv (a pool: nodes-w0.tsv + edges-w0.tsv, …)
    stats.json          final statistics (of the last run)
    runs.jsonl          a line as each run starts and ends (`gossamer report` sums the runs)
    lock                held while a crawler runs in the directory
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import errno
import fcntl
import gc
import json
import multiprocessing
import multiprocessing.connection
import multiprocessing.process
import os
import signal
import sqlite3
import sys
import time
from collections.abc import Awaitable, Callable, Iterable, Iterator, Sequence
from contextlib import AbstractAsyncContextManager, contextmanager
from pathlib import Path
from typing import IO, Any, Protocol, TypeVar

from .. import __version__
from ..config import CrawlSettings, SettingsError
from ..exitcodes import Exit
from ..fetch import CurlFetcher, Fetching, Resolver
from ..fetch.options import dead_proxy
from ..frontier import Frontier, SqliteFrontier
from ..outdir import new_directory_problem
from ..robots_store import RobotsStore, SqliteRobotsStore
from ..sinks import recover, write_stats
from ..sinks.cdx import write_crawl_index
from .crawler import Crawler, seed_frontier
from .ipgate import FileIpGate, LocalIpGate
from .progress import ProgressDisplay, ProgressSample, print_summary, stop_note, stop_state
from .recorder import Recorder
from .recrawl import Recrawl, seed_recrawl
from .report import end_reason, end_run, iso_date, start_run
from .seams import IpGate

MANIFEST = "crawl.json"
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)
# A stop waits this long for the requests in flight, then abandons them (their URLs stay
# queued): a dead host (accepts, never answers) held a Ctrl-C for first_byte_timeout, 30 s,
# while a live one answers in well under a second. The same signal again abandons them now.
STOP_GRACE_S = 3.0


class _Process(Protocol):
    @property
    def pid(self) -> int | None: ...


_P = TypeVar("_P", bound=_Process)


class CrawlError(RuntimeError):
    """A crawl could not start or continue; the message says why. Nothing is lost."""


@contextmanager
def hold_stop_signals() -> Iterator[None]:
    """Keep SIGINT/SIGTERM pending (blocked in this thread) until the crawl's handlers take
    them — `run_engine` unblocks them once its own are installed, a pool's parent once its
    workers are forked — and restore the previous mask on the way out. A stop arriving while
    a crawl starts (directory, frontier, seeding, a worker's start-up) then ends it cleanly
    instead of killing it half-way; a forked worker inherits the blocked mask, so the
    parent's SIGTERM waits for the worker's handlers instead of killing it."""
    old = signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


@contextmanager
def _dir_lock(out: Path) -> Iterator[None]:
    path = out / "lock"
    fh = path.open("a+")
    try:
        fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        fh.close()
        raise CrawlError(f"another crawler is running in {out} (lock held)") from None
    try:
        fh.seek(0)
        fh.truncate()
        fh.write(f"{os.getpid()}\n")
        fh.flush()
        yield
    finally:
        fcntl.flock(fh, fcntl.LOCK_UN)
        fh.close()


def load_manifest(out: Path) -> CrawlSettings:
    """The settings stored in a crawl directory (CrawlError / SettingsError when unusable)."""
    manifest = out / MANIFEST
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
    manifest = out / MANIFEST
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
    manifest = settings.output / MANIFEST
    tmp = manifest.with_name(MANIFEST + ".tmp")
    tmp.write_text(json.dumps(settings.manifest(), indent=2) + "\n")
    tmp.replace(manifest)


def run_crawl(
    settings: CrawlSettings, *, resume: bool = False, progress: IO[str] | None = None
) -> int:
    """Run (or resume) an embedded crawl to the end or until SIGINT/SIGTERM. Exit status.

    A SIGINT/SIGTERM at any moment from here on stops the crawl cleanly (exit 130/143,
    `stats.json`, no lease left, WARC files closed): one that arrives while the crawl starts
    is held until its handlers are in place."""
    changed: dict[str, Any] = {}
    with hold_stop_signals():
        if resume:
            from .resume import plan_resume  # here: engine.resume imports this module

            plan = plan_resume(settings)  # reads only: a refusal changes nothing
            if plan.nothing_to_do is not None:
                print(f"gossamer: {plan.nothing_to_do}", file=sys.stderr)
                return int(Exit.OK)
            settings, changed = plan.settings, plan.changed
        # the proxy this run uses (a resume's may be a new one): a dead one stops the crawl
        # before anything is written
        problem = dead_proxy(settings.fetch.proxy, settings.fetch.connect_timeout)
        if problem is not None:
            print(f"gossamer: error: {problem}", file=sys.stderr)
            return int(Exit.UNAVAILABLE)
        if not resume:
            settings = prepare_directory(settings, resume=False)
        out = settings.output
        workers = settings.effective_workers()
        with _dir_lock(out):
            # runs.jsonl: one line as each run starts and ends, so `gossamer report` can sum
            # the runs of a resumed crawl (stats.json holds the last run's alone)
            try:
                if changed:  # the settings a resume took: for this run and the next ones
                    write_manifest(settings)
                run, started = start_run(out, resume=resume, workers=workers, changed=changed)
            except OSError as exc:
                raise CrawlError(f"cannot write to {out}: {exc.strerror or exc}") from exc
            began = time.time()
            if workers > 1:
                code = _run_pool(settings, workers, resume=resume, progress=progress)
            else:
                with asyncio.Runner(loop_factory=loop_factory()) as runner:
                    code = runner.run(_run(settings, resume=resume, progress=progress))
            code = write_cdx_index(out, code) if settings.sinks.warc else code
            code = _end_summary(settings, code, progress, began)
            with contextlib.suppress(OSError):  # the crawl's own exit status says more
                end_run(out, run, started, code)
            return code


def write_cdx_index(out: Path, code: int) -> int:
    """Write `out/warc/index.cdxj` once every writer of the run is closed (also after a stop:
    it covers every WARC of the crawl, all runs and workers, the recovered ones too). The
    exit status: `code`, or IOERR when the index cannot be written (the WARCs are whole; a
    resume or `gossamer report --cdx` writes it)."""
    try:
        write_crawl_index(out / "warc")
    except OSError as exc:
        print(
            f"gossamer: error: cannot write the CDX index in {out / 'warc'}: "
            f"{exc.strerror or exc}; the WARC files are whole: run "
            f"`gossamer report {out} --cdx` once that is fixed",
            file=sys.stderr,
        )
        return code or Exit.IOERR
    return code


def _end_summary(
    settings: CrawlSettings, code: int, stream: IO[str] | None, began: float
) -> int:
    """Print the end summary (unless quiet), and the main failure when no page was fetched:
    then the exit status is Exit.NOTHING_FETCHED rather than OK."""
    path = settings.output / "stats.json"
    try:
        if path.stat().st_mtime < began - 1.0:  # (a coarse file-system clock)
            return code  # an earlier run's: this one could not write its own, and said so
        stats = json.loads(path.read_text())
    except (OSError, ValueError):
        return code  # not written: the crawl said why already
    failed = print_summary(stream, stats, settings.output, max_pages=settings.max_pages)
    return Exit.NOTHING_FETCHED if failed and code == Exit.OK else code


def run_worker(out: Path, part: str) -> int:
    """One worker process of a pool (`gossamer crawl-worker`): the parent holds the lock,
    seeded or reclaimed the frontier, and merges the statistics."""
    settings = load_manifest(out)
    with asyncio.Runner(loop_factory=loop_factory()) as runner:
        return runner.run(_run(settings, resume=False, progress=None, part=part))


def _open_frontier(settings: CrawlSettings) -> SqliteFrontier:
    return SqliteFrontier(settings.output / "frontier.sqlite", **settings.frontier_knobs())


def _run_pool(
    settings: CrawlSettings, workers: int, *, resume: bool, progress: IO[str] | None
) -> int:
    """N worker processes share the SQLite frontier (each leases its own hosts), the per-IP
    lock files and the crawl log; each writes its own WARC and graph part files."""
    # One connection for the parent's whole life: seeding, progress and the final counts
    # (statistics() reads the shared tables, so it sees the workers' progress).
    frontier = _open_frontier(settings)
    try:
        return _supervise(settings, workers, frontier, resume=resume, progress=progress)
    finally:
        frontier.close()


def _supervise(
    settings: CrawlSettings,
    workers: int,
    frontier: SqliteFrontier,
    *,
    resume: bool,
    progress: IO[str] | None,
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
    gc.freeze()  # what was imported stays out of the workers' collections (and their pages)
    procs = [
        ctx.Process(target=_worker_main, args=(out, f"w{k}", os.getpid()), name=f"w{k}")
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
        signal.pthread_sigmask(signal.SIG_UNBLOCK, STOP_SIGNALS)  # a held stop: forward it
        display = None
        if progress is not None:
            display = ProgressDisplay(progress, max_pages=settings.max_pages)
        said = 0  # the stops said so far

        def say_stops() -> None:
            nonlocal said
            if display is None:
                return
            while said < len(stopped) and said < 2:
                second = said > 0 and stopped[said] in stopped[:said]
                if said and not second:
                    said += 1  # another signal than the first: nothing new to say
                    continue
                name = signal.Signals(stopped[said]).name
                display.note(
                    "stopping",
                    stop_note(name, in_flight=None, grace_s=STOP_GRACE_S, second=second,
                              pool=True),
                    state=stop_state(grace_s=STOP_GRACE_S, second=second),
                    signal=name,
                )  # fmt: skip
                said += 1

        try:
            _watch(procs, frontier, display, asked=asked, wakeup=wake_r, on_wake=say_stops)
        finally:
            if display is not None:
                display.close()
            os.close(wake_r)
            os.close(wake_w)
        codes = []
        for p in procs:
            p.join()
            code = p.exitcode
            assert code is not None  # set once joined
            codes.append(128 - code if code < 0 else code)  # killed by signal N: 128 + N
        summary = _merge_stats(
            out, workers, started, stopped, frontier.statistics(), settings.max_pages, codes
        )
        write_stats(out / "stats.json", summary)
    finally:
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


def _worker_main(out: Path, part: str, parent: int) -> None:
    """A forked pool worker: die with the parent, then crawl (the exit status is the
    worker's: sys.exit). SIGINT/SIGTERM arrive blocked (the parent holds them over the
    fork) and stay pending until `run_engine` has installed the worker's handlers: a stop at
    any moment of the start-up ends the worker cleanly, not by the default action."""
    _die_with_parent()
    if os.getppid() != parent:  # the parent died before the line above took effect
        os._exit(1)
    signal.signal(signal.SIGINT, signal.default_int_handler)  # the parent's handlers are
    signal.signal(signal.SIGTERM, signal.SIG_DFL)  # not ours
    sys.exit(run_worker(out, part))


def ask_to_stop(procs: Iterable[_P], asked: set[int], alive: Callable[[_P], bool]) -> None:
    """SIGTERM every worker process that is `alive` and not asked yet (`asked`: their pids)
    — a pool's forked workers, a cluster command's attached ones. Once is enough: a worker
    handles SIGTERM until its outputs are written (`run_engine`), one still starting holds
    it until then (`hold_stop_signals`), and a second one (a repeated Ctrl-C, a sibling's
    failure) only ever raced its exit."""
    for p in procs:
        pid = p.pid
        if pid is not None and pid not in asked and alive(p):
            asked.add(pid)
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)


def _forked_alive(p: multiprocessing.process.BaseProcess) -> bool:
    return p.exitcode is None


def _watch(
    procs: Sequence[multiprocessing.process.BaseProcess],
    frontier: SqliteFrontier,
    display: ProgressDisplay | None,
    interval: float | None = None,
    *,
    asked: set[int] | None = None,
    wakeup: int | None = None,
    on_wake: Callable[[], None] | None = None,
) -> None:
    """Wait for the workers, showing the frontier's progress on `display` every `interval`
    seconds (by default the display's: 0.5 on a terminal, 10 otherwise). Returns as soon as
    the last worker exits. When a worker fails (a non-zero exit), the others are asked to
    stop (SIGTERM), except those already asked (`asked`, the pids shared with the parent's
    signal handler). A byte on the file descriptor `wakeup` (a signal handler's) wakes the
    wait at once and calls `on_wake()` (a handler may not write to the display itself: it
    could interrupt a write to the same stream)."""
    if asked is None:
        asked = set()
    if interval is None:
        interval = display.interval if display is not None else 10.0
    last_t = time.monotonic()
    stopping = False
    while alive := [p for p in procs if p.exitcode is None]:
        if not stopping and any(p.exitcode not in (None, 0) for p in procs):
            # a worker failed (e.g. 74: outputs cannot be written): stop the others — they
            # complete their batches and exit — instead of letting them wait out its leases
            stopping = True
            ask_to_stop(alive, asked, _forked_alive)
        # wake when any worker exits (signal handlers still run while waiting)
        timeout = None if display is None else max(0.0, last_t + interval - time.monotonic())
        waited: list[Any] = [p.sentinel for p in alive]
        if wakeup is not None:
            waited.append(wakeup)
        ready = multiprocessing.connection.wait(waited, timeout)
        if wakeup is not None and wakeup in ready:
            with contextlib.suppress(BlockingIOError, OSError):
                os.read(wakeup, 64)
            if on_wake is not None:
                on_wake()
        for p in alive:
            p.join(timeout=0)  # reap, so exitcode is set
        if display is None or time.monotonic() - last_t < interval:
            continue
        st = frontier.statistics()
        last_t = time.monotonic()
        display.update(
            ProgressSample.of_frontier(st, workers=sum(1 for p in procs if p.exitcode is None))
        )


def _merge_stats(
    out: Path,
    workers: int,
    started: float,
    stopped: list[int],
    frontier: Any,
    max_pages: int | None,
    codes: Sequence[int],
) -> dict[str, Any]:
    """A pool's stats.json: its workers' parts (`stats-wK.json`) added up, with why the crawl
    ended from the parent's view: a signal it received, else a worker that failed (a non-zero
    exit: 74, killed, …; its part may be missing), else the shared frontier's counts."""
    parts = []
    for path in sorted(out.glob("stats-w*.json")):
        try:
            parts.append(json.loads(path.read_text()))
        except (OSError, ValueError):
            continue
    now = time.time()
    elapsed = max(now - started, 1e-9)
    signal_name = signal.Signals(stopped[0]).name if stopped else None
    failed = any(code not in (0, 130, 143) for code in codes) or len(parts) != workers
    if signal_name is None and not failed:  # a worker stopped by a signal sent to it alone
        signal_name = next(
            (p["ended"] for p in parts if p.get("ended") in ("SIGINT", "SIGTERM")), None
        )
    ended = end_reason(
        signal_name=signal_name,
        failed=failed,
        queued=frontier.queued,
        leased=frontier.leased,
        done=frontier.done,
        max_pages=max_pages,
        otherwise="error",  # no signal, no failure, work left below the limit: a lost worker
    )
    merged: dict[str, Any] = {
        "ended": ended,
        "ended_at": iso_date(now),
        "finished": ended == "complete",
        "stopped_by": signal_name or ("error" if ended == "error" else None),
        "elapsed_s": round(elapsed, 3),
        "workers": workers,
        "pages_per_worker": [p.get("pages", 0) for p in parts],
    }
    for key in ("pages", "requests", "bytes"):
        merged[key] = sum(int(p.get(key, 0)) for p in parts)
    merged["pages_per_s"] = round(merged["pages"] / elapsed, 1)
    for key in ("statuses", "errors", "dropped"):
        total: dict[str, int] = {}
        for p in parts:
            for k, v in p.get(key, {}).items():
                total[k] = total.get(k, 0) + int(v)
        merged[key] = dict(sorted(total.items()))
    merged["frontier"] = _as_dict(frontier)
    return merged


def loop_factory() -> Any:
    """uvloop when available: pycurl on uvloop costs 20–60 µs less per request."""
    try:
        import uvloop
    except ImportError:
        return None
    return uvloop.new_event_loop


async def _run(
    settings: CrawlSettings, *, resume: bool, progress: IO[str] | None, part: str = ""
) -> int:
    out = settings.output
    revalidate = _load_recrawl(settings)
    frontier = _open_frontier(settings)
    try:  # every process of the crawl (a pool's workers, a resumed run) reads it
        robots_store = SqliteRobotsStore(out / "robots.sqlite")
    except BaseException:
        frontier.close()
        raise
    per_ip = settings.politeness.per_ip
    gate = FileIpGate(out / "locks", per_ip) if part else LocalIpGate(per_ip)

    async def prepare() -> None:
        if resume:
            await asyncio.to_thread(frontier.reclaim_expired, float("inf"))
        else:
            await asyncio.to_thread(seed_frontier, frontier, settings)
            await asyncio.to_thread(seed_recrawl, frontier, settings)

    return await run_engine(
        settings,
        frontier,
        gate,
        part=part,
        progress=progress,
        prepare=None if part else prepare,  # a pool worker: the parent seeded or reclaimed
        revalidate=revalidate,
        robots_store=robots_store,
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
    guard_fetcher: Callable[[CurlFetcher], Fetching] | None = None,
    clock: Callable[[], float] = time.time,
    revalidate: Recrawl | None = None,
    storage_errors: tuple[type[Exception], ...] = (),
    resume_hint: str | None = None,
    robots_store: RobotsStore | None = None,
) -> int:
    """Run one worker's `Crawler` over `frontier` into `settings.output` until the crawl
    ends, a stop is requested or SIGINT/SIGTERM; write its statistics (`stats.json`, or
    `stats-<part>.json` for a pool worker) and close the frontier. The exit status.

    `prepare()` runs first (seeding, reclaiming); `session(crawler)` is entered around the
    crawl (cluster mode: heartbeats, the IP gate's refresher); `guard_fetcher` wraps the
    fetcher (cluster mode: requests fenced by the IP gate); `clock` is the crawler's.
    Storage errors (OSError, sqlite3.Error and `storage_errors`) end the worker with 74
    and a message ending in `resume_hint` (how to go on once fixed). `robots_store` is the
    crawl's shared robots.txt store (closed here with the frontier; None: this worker's
    cache only)."""
    out = settings.output
    resolver = Resolver.from_settings(
        settings.fetch.resolve,
        settings.fetch.resolve_file,
        allow_private=settings.fetch.allow_private,
    )
    fetcher = CurlFetcher(
        resolver=resolver,
        user_agent=settings.fetch.user_agent,
        connect_timeout=settings.fetch.connect_timeout,
        first_byte_timeout=settings.fetch.first_byte_timeout,
        total_timeout=settings.fetch.total_timeout,
        max_body=settings.fetch.max_body,
        max_connections=max(1024, settings.fetch.concurrency * 4),
        low_speed_limit=settings.fetch.low_speed_limit,
        low_speed_time=settings.fetch.low_speed_time,
        **settings.fetch_options(),  # -H headers, --proxy
    )
    recorder = Recorder(out, settings, version=__version__, part=part, recrawl=revalidate)
    crawler = Crawler(
        settings,
        frontier=frontier,
        fetcher=fetcher if guard_fetcher is None else guard_fetcher(fetcher),
        ip_of=resolver.ip_of,
        resolve=resolver.resolve,
        sinks=recorder,
        ip_gate=ip_gate,
        clock=clock,
        revalidate=revalidate,
        robots_store=robots_store,
    )
    loop = asyncio.get_running_loop()
    stopped: list[int] = []
    display = None
    if progress is not None:
        display = ProgressDisplay(progress, max_pages=settings.max_pages)
    grace: list[asyncio.TimerHandle] = []
    # where an abandoned request's URL goes (a cluster worker: `resume_hint` says how to go on)
    kept = "their URLs kept for --resume" if resume_hint is None else (
        "their URLs stay queued in the crawl's frontier")  # fmt: skip

    def on_signal(signum: int) -> None:
        # The first stop sends no new request and waits up to STOP_GRACE_S for the requests
        # in flight; the same signal again (a second Ctrl-C; a pool's parent forwarding it)
        # abandons them at once. Either way the batches complete and the outputs are written.
        repeated = signum in stopped
        stopped.append(signum)
        name = signal.Signals(signum).name
        if len(stopped) == 1:
            in_flight = crawler.in_flight()
            crawler.request_stop()
            grace.append(loop.call_later(STOP_GRACE_S, crawler.abandon_in_flight))
            if display is not None:
                note = stop_note(
                    name, in_flight=in_flight, grace_s=STOP_GRACE_S, second=False, kept=kept
                )
                state = stop_state(grace_s=STOP_GRACE_S, second=False)
                display.note("stopping", note, state=state, signal=name, in_flight=in_flight)
        elif repeated and not crawler.abandoned:
            cancelled = crawler.abandon_in_flight()
            if display is not None:
                note = stop_note(
                    name, in_flight=cancelled, grace_s=STOP_GRACE_S, second=True, kept=kept
                )
                state = stop_state(grace_s=STOP_GRACE_S, second=True)
                display.note("stopping", note, state=state, signal=name, abandoned=cancelled)

    for sig in STOP_SIGNALS:
        loop.add_signal_handler(sig, on_signal, sig)
    # a caller may hold SIGINT/SIGTERM blocked until now (hold_stop_signals: a crawl or a
    # forked pool worker starting): one that arrived meanwhile is taken now and stops the
    # crawl before its first lease
    signal.pthread_sigmask(signal.SIG_UNBLOCK, STOP_SIGNALS)
    started = time.time()
    exit_code = 0
    errors: tuple[type[Exception], ...] = (OSError, sqlite3.Error, *storage_errors)
    reporter = None
    if display is not None:
        reporter = asyncio.create_task(_show_progress(crawler, frontier, display))
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
        print(f"gossamer: error: {what} in {out}; nothing is lost: {hint}", file=sys.stderr)
        exit_code = 74  # EX_IOERR: the frontier keeps every unfinished URL
    finally:
        # What ended the crawl. The handlers stay installed until the outputs are written and
        # the frontier is closed: a signal from now on (a repeated Ctrl-C, a second SIGTERM)
        # changes nothing, where the default action killed the worker with its WARC `.open`
        # and no statistics written.
        ended_by = stopped[:1]
        try:
            for timer in grace:
                timer.cancel()
            if reporter:
                reporter.cancel()
                await asyncio.gather(reporter, return_exceptions=True)
            if display is not None:
                display.close()
            await fetcher.aclose()
            try:
                stats = await asyncio.to_thread(frontier.statistics)
                summary = _summary(crawler, stats, started, ended_by, failed=bool(exit_code))
                recorder.close()
                write_stats(out / (f"stats-{part}.json" if part else "stats.json"), summary)
            except errors as exc:
                if not exit_code:
                    print(f"gossamer: error: cannot write outputs: {exc}", file=sys.stderr)
                exit_code = exit_code or 74
            finally:
                try:
                    frontier.close()
                except errors:
                    exit_code = exit_code or 74
                finally:
                    if robots_store is not None:
                        robots_store.close()
        finally:
            for sig in STOP_SIGNALS:
                loop.remove_signal_handler(sig)
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


def _summary(
    crawler: Crawler, stats: Any, started: float, stopped: list[int], *, failed: bool = False
) -> dict[str, Any]:
    """A worker's statistics (stats.json). `ended` says why it ended (report.ENDED);
    `finished` is true when the crawl is complete (its frontier has nothing left), not after
    a --max-pages stop; `stopped_by` is the signal or "error" that stopped it, else None."""
    c = crawler.counters
    now = time.time()
    elapsed = max(now - started, 1e-9)
    ended = end_reason(
        signal_name=signal.Signals(stopped[0]).name if stopped else None,
        failed=failed,
        queued=stats.queued,
        leased=stats.leased,
        done=stats.done,
        max_pages=crawler.settings.max_pages,
    )
    return {
        "ended": ended,
        "ended_at": iso_date(now),
        "finished": ended == "complete",
        "stopped_by": signal.Signals(stopped[0]).name if stopped else ("error" if failed else None),
        "elapsed_s": round(elapsed, 3),
        "pages": c.pages,
        "requests": c.requests,
        "bytes": c.bytes,
        "pages_per_s": round(c.pages / elapsed, 1),
        "statuses": {str(k): v for k, v in sorted(c.statuses.items())},
        "errors": dict(sorted(c.errors.items())),
        "dropped": dict(sorted(c.dropped.items())),
        "frontier": _as_dict(stats),
    }


def _as_dict(obj: Any) -> dict[str, Any]:
    fields = getattr(obj, "__dataclass_fields__", None)
    if fields:
        return {k: getattr(obj, k) for k in fields}
    return dict(obj) if isinstance(obj, dict) else {"value": str(obj)}


async def _show_progress(crawler: Crawler, frontier: Frontier, display: ProgressDisplay) -> None:
    """Show one worker's progress on `display` every `display.interval` seconds."""
    base: int | None = None  # pages done by earlier runs (a resume)
    while True:
        await asyncio.sleep(display.interval)
        c = crawler.counters
        stats = await asyncio.to_thread(frontier.statistics)
        # the frontier counts a page done when its batch completes, up to per_host pages
        # after it was fetched: the bar follows this worker's own count (a max_pages crawl
        # of one worker showed 484 pages fetched and 261 done)
        if base is None:
            base = max(stats.done - c.pages, 0)
        display.update(
            ProgressSample(
                pages=c.pages,
                queued=stats.queued,
                active_hosts=c.active_hosts,
                errors=sum(c.errors.values()),
                failed=stats.failed,
                done=max(stats.done, base + c.pages),
            )
        )
