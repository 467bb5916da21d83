"""`gossamer worker`: one cluster worker joining a crawl stored in Redis, from any machine.

The composition (the embedded engine's `run_engine` does the crawling):

    RedisFrontier(partition = PartitionView.partition)   the shared frontier
      └─ ClusterFrontier                                 waits out Redis outages, sizes
                                                         leases by capacity, knows the
                                                         hosts in hand (for the status)
    RedisIpGate + its fetcher guard                      per-IP politeness, all machines
    Recorder → DIR/<worker id>/                          this worker's WARC, log, graph
    Heartbeat (a thread: heartbeat.py)                   status record every TTL/5 s, the
                                                         member list, stop requests, the
                                                         dead (their leases reclaimed)
    RedisRobotsStore → ClusterRobotsStore                robots.txt answers shared by the
                                                         crawl's workers, retried likewise

The worker's life in the crawl (its status record, its beats' effects, the session around
the crawl, leaving) is a `JoinedWorker` (joined.py); its start-up, stoppable at any moment,
is starting.py; the loop's lag in its stats.json, looplag.py.

The worker exits 0 when the crawl finishes (its frontier is exhausted: it marks the crawl
`finished`) or when it is asked to stop (`gossamer stop`, `workers --scale` down), and at
once for a crawl that is finished; 2 at once for a crawl that is stopped or stopping (the
line says how to resume it: `gossamer crawl --resume --redis URL --crawl ID`); 130/143
on SIGINT/SIGTERM (after completing its batches, as embedded workers do; at once while it
starts, even with Redis paused: cluster/starting.py); 74 when its own
outputs cannot be written; 2 when there is no such crawl; 69 when Redis cannot be reached
at start (after waiting CONNECT_PATIENCE seconds for it, saying so); 77 at once when Redis
refuses the URL's credentials or asks for a password. Once joined, Redis outages are waited
out: nothing is fatal about the network while it crawls; once it stops, Redis is waited
for `--stop-patience` seconds (none after a second SIGINT/SIGTERM), then it exits 75 with one
line (its leases expire and their URLs are fetched again: joined.py, `Patience`).
(gossamer.exitcodes has the table.)
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import signal
import socket
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import IO

import redis.exceptions

from .. import logs
from ..config import CrawlSettings
from ..crawldir import ClusterDir, CrawlDir
from ..engine.crawler import Crawler
from ..engine.extract import load_extractor
from ..engine.sink_registry import load_sink_plugins, register_sink, unregister_sink
from ..exitcodes import Exit
from ..outdir import new_directory_problem
from ..plugins import PluginError
from ..runner.manifest import write_manifest
from ..runner.run import write_items_feed
from ..runner.worker import WorkerHooks, loop_factory, run_engine
from ._redis import (
    RedisClient,
    RedisConnectError,
    is_auth_error,
    redact,
    refusal,
    retrying,
)
from .connect import connect_redis
from .crawls import CrawlRecord, CrawlRecordError, load_crawl, open_frontier, resume_command
from .fetchstream import FetchTailSink
from .joined import JoinedWorker
from .logstream import redis_diagnostics
from .looplag import add_loop_lag
from .members import Membership
from .starting import StoppedStarting, start_stores, stoppable_start
from .stores import CLUSTER, RedisIo
from .stream import StreamSink

_log = logging.getLogger(__name__)

__all__ = ["run_worker", "worker_main"]

STREAM_SINK = "events-stream"  # the registered name of the sink sending page events
FETCH_TAIL_SINK = "fetch-tail"  # … and of the one sending a sample of its fetches


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
        with stoppable_start():
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
        record = retrying(lambda: load_crawl(client, crawl_id), what="crawl record")
    except CrawlRecordError as exc:
        _log.error(f"{exc}")
        return Exit.USAGE
    if record.state == "finished":
        _log.info(f"crawl {record.id} is finished: nothing to do", extra={"crawl_id": record.id})
        return Exit.OK
    if record.state != "running":  # stopping or stopped: nothing is crawled until a resume
        _log.error(_not_running(url, client, record), extra={"crawl_id": record.id})
        return Exit.USAGE
    extract = record.settings.get("extract")
    try:  # the plugins it runs (the crawl's extractor, by name): a broken one is one line
        load_sink_plugins()
        if isinstance(extract, str):
            load_extractor(extract)
    except PluginError as exc:
        _log.error(f"{exc}", extra={"crawl_id": record.id})
        return Exit.USAGE
    membership = Membership(client, record.id, ttl=record.heartbeat_ttl)
    worker_id = retrying(membership.new_id, what="crawl record")
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
        write_manifest(settings, wcrawl.manifest)
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
    except (OSError, CrawlRecordError) as exc:
        _log.error(
            f"cannot prepare {wdir}: {exc}", extra={"crawl_id": record.id, "path": str(wdir)}
        )
        return Exit.IOERR if isinstance(exc, OSError) else Exit.USAGE
    # its diagnostics also to wdir/gossamer.log.jsonl and the crawl's log stream (the
    # dashboard's log tail: cluster/logstream.py)
    with logs.diagnostics_file(wdir, worker_id), redis_diagnostics(client, record.id, worker_id):
        return _run_joined(url, client, record, worker_id, settings, wdir, capacity, machine,
                           progress)  # fmt: skip


def _not_running(url: str, client: RedisClient, record: CrawlRecord) -> str:
    """Why a worker does not join a stopped (or stopping) crawl, and how to resume it."""
    queued = ""
    try:
        frontier = open_frontier(client, record.id, record.worker_settings(Path(".")))
        try:
            queued = f" with {frontier.statistics().queued:,} URLs queued"
        finally:
            frontier.close()
    except Exception:  # (what is queued is worth saying, not worth failing for)
        pass
    once = " once its workers have left" if record.state == "stopping" else ""
    return (
        f"crawl {record.id} is {record.state}{queued}: no worker joins it until it is "
        f"resumed; resume it{once} with `{resume_command(url, record.id)}`"
    )


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
    worker = JoinedWorker(
        url, client, record, worker_id, settings, capacity=capacity, machine=machine
    )
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
    try:
        with asyncio.Runner(loop_factory=loop_factory()) as runner:
            code = runner.run(_work(worker, progress))
    finally:
        worker.patience.close()
    if code == Exit.TEMPFAIL and worker.patience.why is not None:
        _log.error(_gave_up(worker), extra={"worker_id": worker_id, "crawl_id": record.id})
    if code == Exit.IOERR and (refused := _refused(url, client)) is not None:
        # the engine saw a storage error: Redis refusing the password (changed while the
        # worker ran) is one, but waiting or resuming as it is will not help
        _log.error(f"{refused}", extra={"worker_id": worker_id, "crawl_id": record.id})
        code = Exit.NOPERM
    add_loop_lag(CrawlDir(wdir).stats, worker.loop_lag)
    code = write_items_feed(wdir, code)  # its extractor's items, each page's once
    pages = worker.crawler.counters.pages if worker.crawler is not None else 0
    why = worker.stop_reason or f"the crawl is {worker.crawl_state}"
    _log.info(
        f"worker {worker_id}: {pages} pages; {why}",
        extra={"worker_id": worker_id, "crawl_id": record.id, "pages": pages},
    )
    if worker.gate is not None:
        g = worker.gate.statistics()
        _log.debug(  # internals: --log-level debug
            f"worker {worker_id}: IP gate: {g.holds} IP slots taken, {g.waits} waits for a "
            f"busy IP ({g.polls} polls), {g.lost} slots found expired, {g.confirmed} checked "
            f"again before a request, {g.redis_errors} Redis errors waited out",
            extra={"worker_id": worker_id, "crawl_id": record.id},
        )
    return code


def _gave_up(worker: JoinedWorker) -> str:
    """The line of a worker that gave up on an unreachable Redis while stopping: why, what
    it leaves unrecorded, and how that is fetched again."""
    patience = worker.patience
    if patience.why == "signal":
        why = "Redis unreachable, stopped again: not waiting for it"
    else:
        why = f"Redis unreachable for {patience.seconds:g} s while stopping"
    leases, urls, expire = (
        worker.frontier.held_leases() if worker.frontier is not None else (0, 0, 0.0)
    )
    if not leases:
        return (
            f"worker {worker.id}: {why}; exiting without leaving the crawl (it held no "
            "lease: nothing is lost; its heartbeat record expires)"
        )
    ttl = worker.membership.ttl
    return (
        f"worker {worker.id}: {why}; exiting without recording the outcomes of its {leases} "
        f"lease{'s' if leases != 1 else ''} ({urls} URLs): once Redis is back they are "
        f"reclaimed ({ttl:g} s after, this worker counted dead, or as they expire, in "
        f"{expire:.0f} s at most) and their URLs fetched again by another worker or a resume"
    )


def _refused(url: str, client: RedisClient) -> RedisConnectError | None:
    """Whether Redis refuses `client`'s credentials now (a PING, on a new connection when
    the old ones were closed): the refusal to report, or None."""
    try:
        client.ping()
    except Exception as exc:
        return refusal(url, exc) if is_auth_error(exc) else None
    return None


async def _work(worker: JoinedWorker, progress: IO[str] | None) -> int:
    record, settings = worker.record, worker.settings
    # the start-up's Redis calls on the I/O thread, a stop meanwhile taken (`start_stores`);
    # from its return on a stop is held (blocked) until run_engine's handlers take it
    io = RedisIo()
    # given up on Redis while stopping: the calls waiting on the I/O thread fail at once
    worker.patience.on_give_up(io.abandon)
    stores = await start_stores(io, worker)
    frontier = worker.frontier = stores.frontier
    gate = worker.gate = stores.ip_gate
    gate.lease_check = worker.confirm_lease
    if worker.last_beat is not None:  # (the first beat came before the stores)
        worker.live(worker.last_beat)

    def session(crawler: Crawler) -> AbstractAsyncContextManager[None]:
        return worker.session(crawler, gate)

    # the page events go to the crawl's stream (cluster/stream.py), sent on the I/O thread
    # before the frontier's calls of the same batch; a sink like any other, for this run
    register_sink(
        STREAM_SINK,
        StreamSink.factory(worker.client, record.keys, worker.id, io, worker.patience),
    )
    # a sample of its fetches to the crawl's fetch stream (the dashboard's log tail)
    register_sink(FETCH_TAIL_SINK, FetchTailSink.factory(worker.client, record.id, worker.id))
    try:
        return await run_engine(
            settings,
            frontier,
            gate,
            progress=progress,
            fetcher=CLUSTER.fetcher,
            robots_store=stores.robots_store,
            near_dup_store=stores.near_dup_store,
            digest_store=stores.digest_store,
            hooks=WorkerHooks(
                session=session,
                guard_fetcher=gate.guard,
                clock=frontier.clock,
                storage_errors=(redis.exceptions.RedisError,),
                on_stop=worker.on_stop_signal,
                resume_hint=f"the crawl's frontier in Redis keeps every unfinished URL; "
                f"start `gossamer worker --crawl {record.id}` again once that is fixed",
            ),
        )
    finally:
        unregister_sink(FETCH_TAIL_SINK)
        unregister_sink(STREAM_SINK)
