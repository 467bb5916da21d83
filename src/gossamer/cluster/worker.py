"""`gossamer worker`: one cluster worker joining a crawl stored in Redis, from any machine.

The composition (the embedded engine's `run_engine` does the crawling):

    RedisFrontier(partition = PartitionView.partition)   the shared frontier
      └─ ClusterFrontier                                 waits out Redis outages, sizes
                                                         leases by capacity, knows the
                                                         hosts in hand (for the status)
    RedisIpGate + its fetcher guard                      per-IP politeness, all machines
    Recorder → DIR/<worker id>/                          this worker's WARC, log, graph
    Heartbeat (a thread)                                 status record every TTL/5 s, the
                                                         member list, stop requests
    RedisRobotsStore → ClusterRobotsStore                robots.txt answers shared by the
                                                         crawl's workers, retried likewise

The worker exits 0 when the crawl finishes (its frontier is exhausted: it marks the crawl
`finished`) or when it is asked to stop (`gossamer stop`, `workers --scale` down); 130/143
on SIGINT/SIGTERM (after completing its batches, as embedded workers do); 74 when its own
outputs cannot be written; 2 when there is no such crawl; 69 when Redis cannot be reached
at start (after waiting CONNECT_PATIENCE seconds for it, saying so); 77 at once when Redis
refuses the URL's credentials or asks for a password. Once joined, Redis outages are waited
out: nothing is fatal about the network. (gossamer.exitcodes has the table.)
"""

from __future__ import annotations

import asyncio
import collections
import json
import os
import socket
import sys
import threading
import time
from collections.abc import AsyncIterator, Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from pathlib import Path
from typing import IO, Any

import redis.exceptions

from ..config import CrawlSettings
from ..engine.crawler import Crawler
from ..engine.run import loop_factory, run_engine
from ..exitcodes import Exit
from ..frontier import Discovered, Frontier, FrontierStats, HostBatch, Outcome, Outlinks
from ..outdir import new_directory_problem
from ..robots_store import RedisRobotsStore, RobotsRecord, RobotsStore
from ..sinks.stats import write_stats
from ._redis import (
    RedisBadURL,
    RedisClient,
    RedisConnectError,
    RedisUnavailable,
    error_text,
    is_auth_error,
    is_transient,
    redact,
    refusal,
    retrying,
)
from .ipgate import RedisIpGate
from .members import Beat, Membership, PartitionView, WorkerStatus
from .registry import (
    CrawlRecord,
    RegistryError,
    load_crawl,
    mark_finished,
    open_frontier,
    refresh_summary,
)

__all__ = [
    "ClusterFrontier",
    "Heartbeat",
    "LoopLag",
    "connect_redis",
    "run_worker",
    "worker_main",
]

CONNECT_PATIENCE = 30.0  # seconds a starting worker waits for Redis before giving up
#: seconds to open a TCP connection to Redis (redis-py waits forever by default: a host that
#: drops packets would hang a command; a loopback or LAN connect takes under a millisecond)
CONNECT_TIMEOUT = 5.0
STATS_MAX_AGE = 0.1  # seconds ClusterFrontier.statistics() answers from its last snapshot


def connect_redis(
    url: str, *, patience: float = CONNECT_PATIENCE, sleep: Callable[[float], object] = time.sleep
) -> RedisClient:
    """A client for `url` (a Redis Cluster client when the server is a cluster node).

    An unreachable Redis is waited for up to `patience` seconds (0: one attempt), saying so
    on stderr, then RedisUnavailable; credentials Redis refuses raise RedisRefused at once
    (waiting cannot help); a malformed URL RedisBadURL; another Redis error (a bug, or a
    server gossamer cannot use) RedisConnectError. No message holds the password."""
    from ..frontier.redis import connect

    safe = redact(url)
    deadline = time.monotonic() + patience
    pause = 0.05
    told = False
    while True:
        try:
            client = connect(url, socket_connect_timeout=CONNECT_TIMEOUT)
        except Exception as exc:
            why = error_text(exc, url)
            if is_auth_error(exc):
                raise refusal(url, exc) from None
            if isinstance(exc, ValueError):  # from redis-py's URL parser
                raise RedisBadURL(
                    f"--redis {safe}: not a Redis URL ({why}); it reads "
                    "redis://[[USER]:PASSWORD@]HOST[:PORT][/DB] (rediss:// for TLS), with a "
                    "/ # ? @ : or % in the password written %2F %23 %3F %40 %3A %25"
                ) from None
            if not is_transient(exc):
                raise RedisConnectError(f"cannot use Redis at {safe}: {why}") from None
            if time.monotonic() >= deadline:
                waited = f" (waited {patience:g} s)" if patience > 0 else ""
                raise RedisUnavailable(
                    f"cannot reach Redis at {safe}{waited}: {why}; is it running, and are "
                    "the host and port right?"
                ) from None
            if not told:
                print(
                    f"gossamer: Redis at {safe} does not answer ({why}); waiting up to "
                    f"{patience:g} s for it",
                    file=sys.stderr,
                    flush=True,
                )
                told = True
            sleep(min(pause, max(0.0, deadline - time.monotonic())))
            pause = min(pause * 2, 2.0)
            continue
        if told:
            print(f"gossamer: Redis at {safe} answers", file=sys.stderr, flush=True)
        return client


class ClusterFrontier:
    """The worker's `Frontier`: the crawl's RedisFrontier, with every call retried through
    Redis outages (with back-off, however long: the worker's leases and outcomes are worth
    waiting for), lease sizes from the partition view, and the hosts in hand recorded.

    An `OffLoopFrontier`: the engine makes its calls (and the robots store's) on
    `io_executor`, one dedicated thread, which the worker's IP gate shares; each is a
    network round trip, and through an outage a wait of seconds, that the event loop does
    not sit through (docs/cluster.md, "Redis off the event loop")."""

    def __init__(self, inner: Frontier, view: PartitionView) -> None:
        self.inner = inner
        self.view = view
        # one thread: calls keep the order the engine makes them in (links before the
        # batch's completion), as they did on the loop's thread
        self.io_executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="redis-io")
        self._hosts: dict[str, str] = {}  # lease token -> host, while held
        self._stats: tuple[float, FrontierStats] | None = None
        self.clock: Callable[[], float] = getattr(inner, "clock", time.time)

    def hosts(self) -> tuple[str, ...]:
        """The hosts this worker holds leases on (safe to call from another thread)."""
        return tuple(sorted(set(self._hosts.copy().values())))

    def _held(self, batches: Sequence[HostBatch]) -> None:
        for b in batches:
            self._hosts[b.token] = b.host

    def put_discovered(self, items: Sequence[Discovered | Outlinks]) -> int:
        return retrying(lambda: self.inner.put_discovered(items), what="frontier")

    def lease(self, max_hosts: int, per_host: int, now: float | None = None) -> list[HostBatch]:
        size = self.view.lease_size(per_host) if per_host else 0
        batches = retrying(lambda: self.inner.lease(max_hosts, size, now), what="frontier")
        self._held(batches)
        return batches

    def complete(
        self,
        token: str,
        outcomes: Sequence[Outcome],
        next_fetch_at: float | None = None,
        renew: int = 0,
    ) -> HostBatch | None:
        size = self.view.lease_size(renew) if renew else 0
        try:
            batch = retrying(
                lambda: self.inner.complete(token, outcomes, next_fetch_at, size), what="frontier"
            )
        finally:
            self._hosts.pop(token, None)
        if batch is not None:
            self._held((batch,))
        return batch

    def extend(self, token: str, until: float) -> float:
        return retrying(lambda: self.inner.extend(token, until), what="frontier")

    def reclaim_expired(self, now: float | None = None) -> int:
        return retrying(lambda: self.inner.reclaim_expired(now), what="frontier")

    def set_host_delay(self, host: str, crawl_delay: float | None) -> None:
        retrying(lambda: self.inner.set_host_delay(host, crawl_delay), what="frontier")

    def statistics(self) -> FrontierStats:
        """The frontier's statistics, at most STATS_MAX_AGE seconds old: a worker that has
        nothing to lease asks every few milliseconds (the engine's idle wait) while, under a
        static partition, other workers' shards keep a host ready, and a RedisFrontier
        sums every shard of the crawl to answer. Stale counts only delay the end."""
        now = time.monotonic()
        cached = self._stats
        if cached is not None and now - cached[0] < STATS_MAX_AGE:
            return cached[1]
        return self.fresh_statistics()

    def fresh_statistics(self, deadline: float = float("inf")) -> FrontierStats:
        """The frontier's statistics read now (also the snapshot `statistics()` answers
        from): what a worker leaving judges the crawl by, and what its stats.json says — a
        snapshot taken before another worker's last page would call a complete crawl
        "stopped"."""
        stats = retrying(self.inner.statistics, what="frontier", deadline=deadline)
        self._stats = (time.monotonic(), stats)
        return stats

    def close(self) -> None:
        self.io_executor.shutdown(wait=True)
        self.inner.close()


class ClusterRobotsStore:
    """The worker's `RobotsStore`: the crawl's RedisRobotsStore, each call retried through
    Redis outages like the frontier's (a robots.txt answer read or kept is worth waiting
    for: without it the host's robots.txt would be fetched again by its next worker)."""

    def __init__(self, inner: RobotsStore) -> None:
        self.inner = inner

    def get(self, host: str) -> RobotsRecord | None:
        return retrying(lambda: self.inner.get(host), what="robots store")

    def put(self, host: str, record: RobotsRecord) -> None:
        retrying(lambda: self.inner.put(host, record), what="robots store")

    def close(self) -> None:
        self.inner.close()


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
                    print(f"gossamer: heartbeat failed ({exc}); retrying", file=sys.stderr)
                    told = True
                delay, pause = pause, min(pause * 2, interval)
                continue
            if told:
                print("gossamer: heartbeats reach Redis again", file=sys.stderr)
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

    def status(self, state: str | None = None) -> WorkerStatus:
        """This worker's status record now (called from the heartbeat thread too)."""
        c = self.crawler.counters if self.crawler is not None else None
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
            errors=sum(c.errors.values()) if c is not None else 0,
            pages_per_s=round(self._rate.add(time.monotonic(), pages), 1),
            out=str(self.settings.output),
            started_at=self.started_at,
        )

    def on_beat(self, beat: Beat) -> None:
        """From the heartbeat thread: new members for the partition; a stop when the crawl
        is no longer running or this worker is asked to leave."""
        if beat.expired and self._state != "starting":
            print(
                f"gossamer: worker {self.id}: its heartbeat record had expired (frozen or cut "
                f"off for over {self.membership.ttl:g} s); it is back in the crawl",
                file=sys.stderr,
            )
        self.view.update(beat.members)
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
            # (Redis round trips, waited out through an outage: not on the loop's thread)
            await asyncio.to_thread(self._leave)

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
        client = connect_redis(url)
    except RedisConnectError as exc:
        print(f"gossamer: error: {exc}", file=sys.stderr)
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
        print(f"gossamer: error: {refusal(url, exc)}", file=sys.stderr)
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
        print(f"gossamer: error: --capacity must be > 0, not {capacity}", file=sys.stderr)
        return Exit.USAGE
    try:
        record = retrying(lambda: load_crawl(client, crawl_id), what="registry")
    except RegistryError as exc:
        print(f"gossamer: error: {exc}", file=sys.stderr)
        return Exit.USAGE
    if record.state != "running":
        print(f"gossamer: crawl {record.id} is {record.state}: nothing to do", file=sys.stderr)
        return Exit.OK
    membership = Membership(client, record.id, ttl=record.heartbeat_ttl)
    worker_id = retrying(membership.new_id, what="registry")
    wdir = out.absolute() / worker_id
    # worker ids start at w1 in every crawl: DIR/w1/ may hold another crawl's worker's
    # outputs, which this worker would overwrite (crawl.json, stats.json) or mix with
    problem = new_directory_problem(
        wdir,
        what=f"-o {out}: this worker's directory {wdir}",
        holds=", another crawl's worker's outputs perhaps",
        fix="give another -o DIR",
    )
    if problem is not None:
        print(f"gossamer: error: {problem}", file=sys.stderr)
        return int(Exit.USAGE)
    try:
        wdir.mkdir(parents=True, exist_ok=True)
        resolve_file = None
        if record.resolve_text:
            resolve_file = wdir / "resolve.txt"
            resolve_file.write_text(record.resolve_text, encoding="utf-8")
        settings = record.worker_settings(wdir, resolve_file=resolve_file, concurrency=concurrency)
        (wdir / "crawl.json").write_text(json.dumps(settings.manifest(), indent=2) + "\n")
        machine = socket.gethostname()
        (wdir / "worker.json").write_text(
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
        print(f"gossamer: error: cannot prepare {wdir}: {exc}", file=sys.stderr)
        return Exit.IOERR if isinstance(exc, OSError) else Exit.USAGE
    worker = _Worker(url, client, record, worker_id, settings, capacity=capacity, machine=machine)
    print(
        f"gossamer: worker {worker_id} ({machine}, pid {os.getpid()}) joins crawl {record.id}; "
        f"outputs in {wdir}",
        file=sys.stderr,
    )
    with asyncio.Runner(loop_factory=loop_factory()) as runner:
        code = runner.run(_work(worker, progress))
    if code == Exit.IOERR and (refused := _refused(url, client)) is not None:
        # the engine saw a storage error: Redis refusing the password (changed while the
        # worker ran) is one, but waiting or resuming as it is will not help
        print(f"gossamer: error: {refused}", file=sys.stderr)
        code = Exit.NOPERM
    _add_loop_lag(wdir / "stats.json", worker.loop_lag)
    pages = worker.crawler.counters.pages if worker.crawler is not None else 0
    why = worker.stop_reason or f"the crawl is {worker.crawl_state}"
    print(f"gossamer: worker {worker_id}: {pages} pages; {why}", file=sys.stderr)
    if worker.gate is not None:
        g = worker.gate.statistics()
        print(
            f"gossamer: worker {worker_id}: IP gate: {g.holds} holds, {g.waits} waited "
            f"({g.polls} polls), "
            f"{g.lost} slots lost (expired), {g.confirmed} confirmed before a request, "
            f"{g.redis_errors} Redis errors waited out",
            file=sys.stderr,
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
        print(f"gossamer: cannot add the loop lag to {path}: {exc}", file=sys.stderr)


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
    beat = retrying(lambda: worker.membership.beat(worker.status()), what="members")
    worker.on_beat(beat)  # registered; the first member list
    inner = open_frontier(worker.client, record.id, settings, partition=worker.view.partition)
    frontier = worker.frontier = ClusterFrontier(inner, worker.view)
    gate = worker.gate = RedisIpGate(
        worker.client,
        record.id,
        settings.politeness.per_ip,
        owner=worker.id,
        ttl=record.heartbeat_ttl,
        io=frontier.io_executor,
    )
    # robots.txt answers in the crawl's keys: a host's robots.txt is fetched by one worker
    robots = RedisRobotsStore(worker.client, record.id, max_age=settings.politeness.robots_ttl)

    def session(crawler: Crawler) -> Any:
        return worker.session(crawler, gate)

    return await run_engine(
        settings,
        frontier,
        gate,
        progress=progress,
        session=session,
        guard_fetcher=gate.guard,
        clock=frontier.clock,
        storage_errors=(redis.exceptions.RedisError,),
        robots_store=ClusterRobotsStore(robots),
        resume_hint=f"the crawl's frontier in Redis keeps every unfinished URL; start "
        f"`gossamer worker --crawl {record.id}` again once that is fixed",
    )
