"""`gossamer worker`: one cluster worker joining a crawl stored in Redis, from any machine.

The composition (the embedded engine's `run_engine` does the crawling):

    RedisFrontier(partition = PartitionView.partition)   the shared frontier
      └─ ClusterFrontier                                 waits out Redis outages, sizes
                                                         leases by capacity, knows the
                                                         hosts in hand (for the status)
    RedisIpGate + its fetcher guard                      per-IP politeness, all machines
    Recorder → DIR/<worker id>/                          this worker's WARC, log, graph
    Heartbeat (a thread)                                 status record every TTL/5 s, the
                                                         member list, stop requests, the
                                                         dead (their leases reclaimed)
    RedisRobotsStore → ClusterRobotsStore                robots.txt answers shared by the
                                                         crawl's workers, retried likewise

The worker exits 0 when the crawl finishes (its frontier is exhausted: it marks the crawl
`finished`) or when it is asked to stop (`gossamer stop`, `workers --scale` down); 130/143
on SIGINT/SIGTERM (after completing its batches, as embedded workers do; at once while it
starts, even with Redis paused: `_stoppable_start`); 74 when its own
outputs cannot be written; 2 when there is no such crawl; 69 when Redis cannot be reached
at start (after waiting CONNECT_PATIENCE seconds for it, saying so); 77 at once when Redis
refuses the URL's credentials or asks for a password. Once joined, Redis outages are waited
out: nothing is fatal about the network. (gossamer.exitcodes has the table.)
"""

from __future__ import annotations

import asyncio
import collections
import heapq
import json
import logging
import os
import signal
import socket
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import IO, Any, ParamSpec, TypeVar

import redis.exceptions

from .. import logs
from ..config import CrawlSettings
from ..crawldir import ClusterDir, CrawlDir
from ..engine.crawler import Crawler
from ..engine.sink_registry import register_sink, unregister_sink
from ..exitcodes import Exit
from ..fetch import FetchRequest
from ..frontier import (
    FrontierStats,
    StaleLeaseError,
)
from ..outdir import new_directory_problem
from ..runner.run import loop_factory, run_engine
from ..runner.stopping import STOP_SIGNALS
from ..sinks.stats import write_stats
from ..urls import URLError, host_key
from ._redis import (
    RedisClient,
    RedisConnectError,
    is_auth_error,
    redact,
    refusal,
    retrying,
)
from .connect import connect_redis
from .fetchstream import FetchTailSink
from .ipgate import RedisIpGate
from .logstream import redis_diagnostics
from .members import STATUS_KEYS_MAX, Beat, Membership, PartitionView, WorkerStatus
from .registry import (
    CrawlRecord,
    RegistryError,
    load_crawl,
    mark_finished,
    refresh_summary,
)
from .stores import (
    CLUSTER,
    ClusterFrontier,
    ClusterStores,
    RedisIo,
    cluster_stores,
)
from .stream import StreamSink

_log = logging.getLogger(__name__)

__all__ = [
    "ClusterFrontier",
    "Heartbeat",
    "LoopLag",
    "RedisIo",
    "connect_redis",
    "run_worker",
    "worker_main",
]

STREAM_SINK = "events-stream"  # the registered name of the sink sending page events
FETCH_TAIL_SINK = "fetch-tail"  # … and of the one sending a sample of its fetches

_P = ParamSpec("_P")
_T = TypeVar("_T")


def exhausted(stats: FrontierStats, max_pages: int | None) -> bool:
    """Whether a crawl is over: nothing leased, and nothing queued or the page budget
    spent (the engine's own test for the end)."""
    return not stats.leased and (
        stats.queued == 0 or (max_pages is not None and stats.done >= max_pages)
    )


class Heartbeat:
    """The worker's heartbeat thread: every `membership.interval` seconds it publishes
    `status()` and hands the `Beat` to `on_beat`; Redis errors are waited out (the record
    may expire meanwhile: the next beat brings the worker back). `stop()` ends the thread
    and waits for it. It runs in a thread so that a busy or blocked event loop (a long
    parse, a frontier call waiting for Redis) never silences it."""

    def __init__(
        self,
        membership: Membership,
        status: Callable[[], WorkerStatus],
        on_beat: Callable[[Beat], None],
    ) -> None:
        self.membership = membership
        self.status = status
        self.on_beat = on_beat
        self.beats = 0
        self.failures = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="heartbeat", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()

    def _loop(self) -> None:
        interval = self.membership.interval
        delay, pause = 0.0, 0.05
        told = False
        while not self._stop.wait(delay):
            started = time.monotonic()
            try:
                beat = self.membership.beat(self.status())
            except redis.exceptions.RedisError as exc:
                self.failures += 1
                if not told:
                    _log.warning(f"heartbeat failed ({exc}); retrying")
                    told = True
                delay, pause = pause, min(pause * 2, interval)
                continue
            if told:
                _log.info("heartbeats reach Redis again")
            pause, told = 0.05, False
            self.beats += 1
            self.on_beat(beat)
            delay = max(0.0, interval - (time.monotonic() - started))


class LoopLag:
    """How late the event loop runs a timer (its lag): a task sleeps `interval` seconds
    again and again and measures how much later than asked it wakes. A loop blocked by a
    call (a Redis round trip waited out on its thread) shows here as lag; a busy one (pages
    parsed one after another) too, by a few milliseconds. `max_ms` and `p99_ms` go to the
    worker's stats.json (`loop_lag_max_ms`, `loop_lag_p99_ms`)."""

    def __init__(self, interval: float = 0.01) -> None:
        self.interval = interval
        self.lags: list[float] = []  # seconds, one a sample
        self._task: asyncio.Task[None] | None = None

    async def __aenter__(self) -> LoopLag:
        self._task = asyncio.create_task(self._sample(), name="loop-lag")
        return self

    async def __aexit__(self, *exc: object) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)

    async def _sample(self) -> None:
        while True:
            asked = time.perf_counter()
            await asyncio.sleep(self.interval)
            self.lags.append(max(0.0, time.perf_counter() - asked - self.interval))

    @property
    def max_ms(self) -> float:
        return round(max(self.lags, default=0.0) * 1000, 1)

    @property
    def p99_ms(self) -> float:
        if not self.lags:
            return 0.0
        ordered = sorted(self.lags)
        return round(ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))] * 1000, 1)

    def statistics(self) -> dict[str, float | int]:
        return {
            "loop_lag_max_ms": self.max_ms,
            "loop_lag_p99_ms": self.p99_ms,
            "loop_lag_samples": len(self.lags),
        }


class _Rate:
    """Pages per second over the last ~5 s, from samples of a counter."""

    def __init__(self, window: float = 5.0) -> None:
        self.window = window
        self.samples: collections.deque[tuple[float, int]] = collections.deque()

    def add(self, t: float, pages: int) -> float:
        s = self.samples
        s.append((t, pages))
        while len(s) > 2 and t - s[1][0] >= self.window:
            s.popleft()
        t0, p0 = s[0]
        return (pages - p0) / (t - t0) if t > t0 else 0.0


def _most_common(counts: Mapping[Any, int]) -> dict[str, int]:
    """The STATUS_KEYS_MAX largest counts, keys as str (a status record's JSON)."""
    top = heapq.nlargest(STATUS_KEYS_MAX, counts.items(), key=lambda kv: kv[1])
    return {str(k): v for k, v in top}


class _Worker:
    """One worker's life in a crawl: what the heartbeat, the session and the exit share."""

    def __init__(
        self,
        url: str,
        client: RedisClient,
        record: CrawlRecord,
        worker_id: str,
        settings: CrawlSettings,
        *,
        capacity: float,
        machine: str,
    ) -> None:
        self.url = url
        self.client = client
        self.record = record
        self.id = worker_id
        self.settings = settings
        self.capacity = capacity
        self.machine = machine
        self.pid = os.getpid()
        self.started_at = time.time()
        self.membership = Membership(client, record.id, ttl=record.heartbeat_ttl)
        self.view = PartitionView(record.strategy(), worker_id)
        self.crawler: Crawler | None = None
        self.frontier: ClusterFrontier | None = None
        self.gate: RedisIpGate | None = None
        self.loop: asyncio.AbstractEventLoop | None = None
        self.loop_lag = LoopLag()
        self.stop_reason: str | None = None
        self._rate = _Rate()
        self._state = "starting"
        self.crawl_state = record.state
        self.last_beat: Beat | None = None
        ttl = self.membership.ttl
        # how much sooner than the TTL the worker stops trusting its last beat (the IP
        # gate's margin: the server starts the TTL when the beat arrives, not when sent)
        self.alive_margin = min(max(0.2 * ttl, 0.5), ttl / 2)

    def status(self, state: str | None = None) -> WorkerStatus:
        """This worker's status record now (called from the heartbeat thread too: it reads
        the crawler's last published snapshot, never the counters the loop mutates)."""
        c = self.crawler.snapshot if self.crawler is not None else None
        pages = c.pages if c is not None else 0
        if state is None:
            state = self._state
            if self.stop_reason is not None:
                state = "stopping"
            elif c is not None:
                state = "crawling" if c.active_hosts else "idle"
        return WorkerStatus(
            id=self.id,
            machine=self.machine,
            pid=self.pid,
            state=state,
            capacity=self.capacity,
            hosts=self.frontier.hosts() if self.frontier is not None else (),
            pages=pages,
            requests=c.requests if c is not None else 0,
            errors=c.error_count if c is not None else 0,
            pages_per_s=round(self._rate.add(time.monotonic(), pages), 1),
            out=str(self.settings.output),
            started_at=self.started_at,
            body_bytes=c.bytes if c is not None else 0,
            statuses=_most_common(c.statuses if c is not None else {}),
            outcomes=_most_common(c.outcomes if c is not None else {}),
        )

    def on_beat(self, beat: Beat) -> None:
        """From the heartbeat thread: new members for the partition; a stop when the crawl
        is no longer running or this worker is asked to leave."""
        if beat.expired and self._state != "starting":
            _log.warning(
                f"worker {self.id}: its heartbeat record had expired (frozen or cut "
                f"off for over {self.membership.ttl:g} s); it is back in the crawl",
                extra={"worker_id": self.id},
            )
        self.view.update(beat.members)
        self.view.dead = beat.dead
        self.last_beat = beat
        self.live(beat)
        self.crawl_state = beat.crawl_state
        reason = None
        if beat.crawl_state != "running":
            reason = f"the crawl is {beat.crawl_state or 'gone'}"
        elif beat.stop_requested:
            reason = "asked to stop"
        if reason is not None and self.stop_reason is None:
            self.stop_reason = reason
            crawler, loop = self.crawler, self.loop
            if crawler is not None and loop is not None:
                loop.call_soon_threadsafe(crawler.request_stop)

    def live(self, beat: Beat) -> None:
        """A beat went through: this worker counts alive until its send time + TTL (minus
        a margin), under the beat's incarnation (a new one when its record had expired).
        Its requests take the fast path again only once no lease of an earlier
        incarnation is left (`confirm_lease` gives those back)."""
        frontier, gate = self.frontier, self.gate
        until = beat.sent + self.membership.ttl - self.alive_margin
        if frontier is not None:
            frontier.set_incarnation(beat.incarnation)  # before the window opens
            frontier.alive_until = until
        if gate is not None and (frontier is None or not frontier.old_hosts()):
            gate.alive_until = until

    async def confirm_lease(self, request: FetchRequest) -> None:
        """Before a request made outside the gate's `alive_until` (the worker was frozen or
        cut off from Redis for most of a TTL): wait for a heartbeat; then a request on a
        lease of an earlier incarnation (the worker was counted dead meanwhile) is not
        sent: StaleLeaseError, and the engine completes the batch with what it fetched (the
        URLs left go back; if the lease was reclaimed, the completion is refused and those
        pages are fetched again by the new holder, as after a lease's expiry). Not asked of
        Redis: a worker whose member list is a beat behind may still reclaim such a lease
        after the answer. Once no such lease is left, requests take the fast path again."""
        gate, frontier = self.gate, self.frontier
        if gate is None or frontier is None:
            return
        # (set by the heartbeat thread: polled, rarely — only after a freeze or an outage)
        while True:
            if frontier.alive():
                break
            await asyncio.sleep(0.02)
        old = frontier.old_hosts()
        if not old:
            gate.alive_until = frontier.alive_until
            return
        try:
            host = host_key(request.url)
        except URLError:
            return
        if host in old:
            raise StaleLeaseError(f"the lease of {host} was taken before this worker was "
                                  "counted dead: given back")  # fmt: skip

    @asynccontextmanager
    async def session(self, crawler: Crawler, gate: RedisIpGate) -> AsyncIterator[None]:
        """Around the crawl: heartbeats and the gate's refresher; on the way out, mark the
        crawl finished if its frontier is exhausted, then leave the member list."""
        self.crawler = crawler
        self.loop = asyncio.get_running_loop()
        self._state = "crawling"
        if self.stop_reason is not None:  # seen by the first beat, before the crawler was
            crawler.request_stop()
        heartbeat = Heartbeat(
            Membership(self.client, self.record.id, ttl=self.record.heartbeat_ttl),
            self.status,
            self.on_beat,
        )
        heartbeat.start()
        try:
            async with gate, self.loop_lag:
                yield
        finally:
            await asyncio.to_thread(heartbeat.stop)
            # (Redis round trips, waited out through an outage: not on the loop's thread;
            # on the I/O thread, after the frontier calls queued before)
            io = self.frontier.io_executor if self.frontier is not None else None
            await asyncio.get_running_loop().run_in_executor(io, self._leave)

    def _leave(self) -> None:
        """Mark the crawl finished when nothing is left, then deregister (a last status
        record stays for `gossamer status`)."""
        assert self.frontier is not None
        deadline = time.monotonic() + 2 * self.membership.ttl
        stats = self.frontier.fresh_statistics(deadline)
        if exhausted(stats, self.settings.max_pages):
            retrying(
                lambda: mark_finished(self.client, self.record), what="registry", deadline=deadline
            )
        final = self.status("stopped")
        state = retrying(
            lambda: self.membership.deregister(final), what="members", deadline=deadline
        )
        if state == "stopped":
            refresh_summary(self.client, self.record.id)
        self.crawl_state = state


def worker_main(
    url: str,
    crawl_id: str | None = None,
    *,
    capacity: float = 1.0,
    out: Path = Path("gossamer-worker"),
    concurrency: int | None = None,
    progress: IO[str] | None = None,
) -> int:
    """`gossamer worker`: join the crawl and run until it finishes or stops; exit status."""
    try:
        with _stoppable_start():
            return _worker_main(url, crawl_id, capacity, out, concurrency, progress)
    except StoppedStarting as stop:
        name = signal.Signals(stop.signum).name
        _log.warning(
            f"worker stopped by {name} while starting (joining the crawl at "
            f"{redact(url)}); nothing was crawled",
            extra={"signal": name, "redis": redact(url)},
        )
        return Exit.INTERRUPTED if stop.signum == signal.SIGINT else Exit.TERMINATED


def _worker_main(
    url: str,
    crawl_id: str | None,
    capacity: float,
    out: Path,
    concurrency: int | None,
    progress: IO[str] | None,
) -> int:
    try:
        client = connect_redis(url)
    except RedisConnectError as exc:
        _log.error(f"{exc}")
        return exc.exit
    try:
        return run_worker(
            url,
            client,
            crawl_id,
            capacity=capacity,
            out=out,
            concurrency=concurrency,
            progress=progress,
        )
    except Exception as exc:
        if not is_auth_error(exc):  # e.g. an ACL user refused a command (NOPERM) on joining
            raise
        _log.error(refusal(url, exc))
        return Exit.NOPERM
    finally:
        client.close()


def run_worker(
    url: str,
    client: RedisClient,
    crawl_id: str | None,
    *,
    capacity: float = 1.0,
    out: Path = Path("gossamer-worker"),
    concurrency: int | None = None,
    progress: IO[str] | None = None,
) -> int:
    """Join the crawl (`crawl_id`, or the only running one) as a new worker."""
    if not capacity > 0:
        _log.error(f"--capacity must be > 0, not {capacity}")
        return Exit.USAGE
    try:
        record = retrying(lambda: load_crawl(client, crawl_id), what="registry")
    except RegistryError as exc:
        _log.error(f"{exc}")
        return Exit.USAGE
    if record.state != "running":
        _log.info(
            f"crawl {record.id} is {record.state}: nothing to do", extra={"crawl_id": record.id}
        )
        return Exit.OK
    membership = Membership(client, record.id, ttl=record.heartbeat_ttl)
    worker_id = retrying(membership.new_id, what="registry")
    wcrawl = ClusterDir(out.absolute()).worker(worker_id)
    wdir = wcrawl.path
    # worker ids start at w1 in every crawl: DIR/w1/ may hold another crawl's worker's
    # outputs, which this worker would overwrite (crawl.json, stats.json) or mix with
    problem = new_directory_problem(
        wdir,
        what=f"-o {out}: this worker's directory {wdir}",
        holds=", another crawl's worker's outputs perhaps",
        fix="give another -o DIR",
    )
    if problem is not None:
        _log.error(problem, extra={"crawl_id": record.id, "path": str(wdir)})
        return int(Exit.USAGE)
    try:
        wdir.mkdir(parents=True, exist_ok=True)
        resolve_file = None
        if record.resolve_text:
            resolve_file = wcrawl.resolve_file
            resolve_file.write_text(record.resolve_text, encoding="utf-8")
        settings = record.worker_settings(wdir, resolve_file=resolve_file, concurrency=concurrency)
        wcrawl.manifest.write_text(json.dumps(settings.manifest(), indent=2) + "\n")
        machine = socket.gethostname()
        wcrawl.worker_record.write_text(
            json.dumps(
                {
                    "crawl": record.id,
                    "worker": worker_id,
                    "redis": redact(url),
                    "machine": machine,
                    "pid": os.getpid(),
                    "capacity": capacity,
                },
                indent=2,
            )
            + "\n"
        )
    except (OSError, RegistryError) as exc:
        _log.error(
            f"cannot prepare {wdir}: {exc}", extra={"crawl_id": record.id, "path": str(wdir)}
        )
        return Exit.IOERR if isinstance(exc, OSError) else Exit.USAGE
    # its diagnostics also to wdir/gossamer.log.jsonl and the crawl's log stream (the
    # dashboard's log tail: cluster/logstream.py)
    with logs.diagnostics_file(wdir, worker_id), redis_diagnostics(client, record.id, worker_id):
        return _run_joined(url, client, record, worker_id, settings, wdir, capacity, machine,
                           progress)  # fmt: skip


def _run_joined(
    url: str,
    client: RedisClient,
    record: CrawlRecord,
    worker_id: str,
    settings: CrawlSettings,
    wdir: Path,
    capacity: float,
    machine: str,
    progress: IO[str] | None,
) -> int:
    """The worker's crawl, once it has its id and directory."""
    worker = _Worker(url, client, record, worker_id, settings, capacity=capacity, machine=machine)
    _log.info(
        f"worker {worker_id} ({machine}, pid {os.getpid()}) joins crawl {record.id}; "
        f"outputs in {wdir}",
        extra={
            "worker_id": worker_id,
            "crawl_id": record.id,
            "machine": machine,
            "pid": os.getpid(),
            "path": str(wdir),
        },
    )
    with asyncio.Runner(loop_factory=loop_factory()) as runner:
        code = runner.run(_work(worker, progress))
    if code == Exit.IOERR and (refused := _refused(url, client)) is not None:
        # the engine saw a storage error: Redis refusing the password (changed while the
        # worker ran) is one, but waiting or resuming as it is will not help
        _log.error(f"{refused}", extra={"worker_id": worker_id, "crawl_id": record.id})
        code = Exit.NOPERM
    _add_loop_lag(CrawlDir(wdir).stats, worker.loop_lag)
    pages = worker.crawler.counters.pages if worker.crawler is not None else 0
    why = worker.stop_reason or f"the crawl is {worker.crawl_state}"
    _log.info(
        f"worker {worker_id}: {pages} pages; {why}",
        extra={"worker_id": worker_id, "crawl_id": record.id, "pages": pages},
    )
    if worker.gate is not None:
        g = worker.gate.statistics()
        _log.info(
            f"worker {worker_id}: IP gate: {g.holds} holds, {g.waits} waited "
            f"({g.polls} polls), "
            f"{g.lost} slots lost (expired), {g.confirmed} confirmed before a request, "
            f"{g.redis_errors} Redis errors waited out",
            extra={"worker_id": worker_id, "crawl_id": record.id},
        )
    return code


def _add_loop_lag(path: Path, lag: LoopLag) -> None:
    """Add the run's event-loop lag to the worker's stats.json (written by the engine as
    the crawl ends, when it could be)."""
    if not path.exists():
        return
    try:
        stats = json.loads(path.read_text(encoding="utf-8"))
        write_stats(path, {**stats, **lag.statistics()})
    except (OSError, ValueError) as exc:
        _log.warning(f"cannot add the loop lag to {path}: {exc}", extra={"path": str(path)})


def _refused(url: str, client: RedisClient) -> RedisConnectError | None:
    """Whether Redis refuses `client`'s credentials now (a PING, on a new connection when
    the old ones were closed): the refusal to report, or None."""
    try:
        client.ping()
    except Exception as exc:
        return refusal(url, exc) if is_auth_error(exc) else None
    return None


async def _work(worker: _Worker, progress: IO[str] | None) -> int:
    record, settings = worker.record, worker.settings
    # the start-up's Redis calls on the I/O thread, a stop meanwhile taken (`_start_on`);
    # from its return on a stop is held (blocked) until run_engine's handlers take it
    io = RedisIo()
    stores = await _start_on(io, worker)
    frontier = worker.frontier = stores.frontier
    gate = worker.gate = stores.ip_gate
    gate.lease_check = worker.confirm_lease
    if worker.last_beat is not None:  # (the first beat came before the stores)
        worker.live(worker.last_beat)

    def session(crawler: Crawler) -> Any:
        return worker.session(crawler, gate)

    # the page events go to the crawl's stream (cluster/stream.py), sent on the I/O thread
    # before the frontier's calls of the same batch; a sink like any other, for this run
    register_sink(STREAM_SINK, StreamSink.factory(worker.client, record.keys, worker.id, io))
    # a sample of its fetches to the crawl's fetch stream (the dashboard's log tail)
    register_sink(FETCH_TAIL_SINK, FetchTailSink.factory(worker.client, record.id, worker.id))
    try:
        return await run_engine(
            settings,
            frontier,
            gate,
            progress=progress,
            session=session,
            guard_fetcher=gate.guard,
            clock=frontier.clock,
            fetcher=CLUSTER.fetcher,
            storage_errors=(redis.exceptions.RedisError,),
            robots_store=stores.robots_store,
            resume_hint=f"the crawl's frontier in Redis keeps every unfinished URL; start "
            f"`gossamer worker --crawl {record.id}` again once that is fixed",
        )
    finally:
        unregister_sink(FETCH_TAIL_SINK)
        unregister_sink(STREAM_SINK)


async def _start_on(io: RedisIo, worker: _Worker) -> ClusterStores:
    """The worker's start-up calls to Redis, made on `io` (its I/O thread) in order: the
    first beat (registered; the first member list), then opening the crawl's frontier (its
    scripts loaded, its layout checked). With Redis paused they wait there while the loop
    stays free: SIGINT/SIGTERM meanwhile (taken by the loop's handlers: uvloop logs and
    drops an exception raised by a Python-level handler) end the start-up at once with
    StoppedStarting. On the way out the signals are blocked again, held for the crawl's
    handlers (`run_engine` unblocks them)."""
    loop = asyncio.get_running_loop()
    record = worker.record
    task = asyncio.current_task()
    stops: list[int] = []

    def on_signal(signum: int) -> None:
        stops.append(signum)
        if task is not None:
            task.cancel()

    for sig in STOP_SIGNALS:
        loop.add_signal_handler(sig, on_signal, sig)
    try:
        beat = await loop.run_in_executor(
            io, lambda: retrying(lambda: worker.membership.beat(worker.status()), what="members")
        )
        worker.on_beat(beat)
        stores = await loop.run_in_executor(
            io,
            lambda: cluster_stores(
                worker.client, record, worker.settings, view=worker.view, worker_id=worker.id,
                io=io,
            ),
        )
    except BaseException as exc:
        io.shutdown(wait=False)  # (a call stuck on a paused Redis stays with the daemon thread)
        if stops and isinstance(exc, asyncio.CancelledError):
            raise StoppedStarting(stops[0]) from None
        raise
    finally:
        signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
        for sig in STOP_SIGNALS:
            loop.remove_signal_handler(sig)
    return stores


class StoppedStarting(BaseException):
    """SIGINT or SIGTERM came while the worker was starting (`_stoppable_start`). A
    BaseException, like KeyboardInterrupt: no `except Exception` on the way (the retry
    wrapper's, redis-py's) takes it for a Redis error."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


@contextmanager
def _stoppable_start() -> Iterator[None]:
    """SIGINT/SIGTERM while the worker starts raise StoppedStarting: the worker stops at
    once, with its exit status, even while a Redis call of its start-up waits for a paused
    server. Before its event loop (connecting, loading the crawl, on the main thread) this
    handler raises it, interrupting the wait; in the loop `_start_on`'s handlers take over
    (the first beat, opening the frontier, on the I/O thread, which keeps the signals
    blocked), and from its end the signals are held until `run_engine`'s handlers take
    them. A mask held by a parent (`crawl --redis --workers N` spawns its workers with the
    signals blocked) is lifted for that. The previous handlers and mask are restored on the
    way out."""

    def stop(signum: int, _frame: object) -> None:
        raise StoppedStarting(signum)

    previous = {sig: signal.signal(sig, stop) for sig in STOP_SIGNALS}
    mask = signal.pthread_sigmask(signal.SIG_UNBLOCK, STOP_SIGNALS)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)
