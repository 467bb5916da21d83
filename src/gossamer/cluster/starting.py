"""A cluster worker's start-up, stoppable at any moment: SIGINT/SIGTERM while it connects,
loads the crawl, registers and opens the crawl's stores end it at once with
`StoppedStarting` (exit 130/143), even while a Redis call waits for a paused server.

`stoppable_start` covers the start-up before the event loop (on the main thread) and
`start_stores` the calls made on the worker's I/O thread from the loop; from the end of the
latter the signals are blocked, held for the crawl's handlers (`run_engine` unblocks them).
"""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Iterator
from contextlib import contextmanager

from ..runner.stopping import STOP_SIGNALS
from ._redis import retrying
from .joined import JoinedWorker
from .stores import ClusterStores, RedisIo, cluster_stores

__all__ = ["StoppedStarting", "start_stores", "stoppable_start"]


async def start_stores(io: RedisIo, worker: JoinedWorker) -> ClusterStores:
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
                io=io, patience=worker.patience,
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
    """SIGINT or SIGTERM came while the worker was starting (`stoppable_start`). A
    BaseException, like KeyboardInterrupt: no `except Exception` on the way (the retry
    wrapper's, redis-py's) takes it for a Redis error."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


@contextmanager
def stoppable_start() -> Iterator[None]:
    """SIGINT/SIGTERM while the worker starts raise StoppedStarting: the worker stops at
    once, with its exit status, even while a Redis call of its start-up waits for a paused
    server. Before its event loop (connecting, loading the crawl, on the main thread) this
    handler raises it, interrupting the wait; in the loop `start_stores`'s handlers take over
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
