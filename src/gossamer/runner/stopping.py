"""How a crawl stops on SIGINT/SIGTERM: the signals held (blocked) while a crawl or a worker
starts (`hold_stop_signals`), a worker's handler (`WorkerStop`: the first stop waits
`STOP_GRACE_S` for the requests in flight, the same signal again abandons them) and a
parent asking its worker processes to stop (`ask_to_stop`: a pool's forked workers, a
cluster command's attached ones)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import Protocol, TypeVar

from ..engine.crawler import Crawler
from ..report.progress import ProgressDisplay, stop_note, stop_state

__all__ = ["STOP_GRACE_S", "STOP_SIGNALS", "WorkerStop", "ask_to_stop", "hold_stop_signals"]

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)
# A stop waits this long for the requests in flight, then abandons them (their URLs stay
# queued): a dead host (accepts, never answers) held a Ctrl-C for first_byte_timeout, 30 s,
# while a live one answers in well under a second. The same signal again abandons them now.
STOP_GRACE_S = 3.0


class _Process(Protocol):
    @property
    def pid(self) -> int | None: ...


_P = TypeVar("_P", bound=_Process)


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


def ask_to_stop(procs: Iterable[_P], asked: set[int], alive: Callable[[_P], bool]) -> None:
    """SIGTERM every worker process that is `alive` and not asked yet (`asked`: their pids)
    — a pool's forked workers, a cluster command's attached ones. Once is enough: a worker
    handles SIGTERM until its outputs are written (`run_engine`), one still starting holds
    it until then (`hold_stop_signals`), and a second one (a repeated Ctrl-C, a sibling's
    failure) only ever raced its exit. A process with an `ask_to_stop()` (a worker over
    SSH, runner/machines.py) is asked by it instead of a signal."""
    for p in procs:
        pid = p.pid
        if pid is not None and pid not in asked and alive(p):
            asked.add(pid)
            remote = getattr(p, "ask_to_stop", None)  # a worker over SSH: its stop line
            if callable(remote):
                remote()
                continue
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)


class WorkerStop:
    """A crawling worker's SIGINT/SIGTERM handler on the event loop `loop`: `install()`
    takes the signals (and any held until then), `remove()` gives them back; `stopped`
    lists the signals received. What a stop waits for is said on `display`; `kept` says
    where an abandoned request's URL goes; `on_stop(n)` is told of each, n the number
    received so far (a cluster worker bounds its waits for Redis: cluster/joined.py)."""

    def __init__(
        self,
        crawler: Crawler,
        loop: asyncio.AbstractEventLoop,
        display: ProgressDisplay | None,
        kept: str,
        on_stop: Callable[[int], None] | None = None,
    ) -> None:
        self.crawler = crawler
        self.loop = loop
        self.display = display
        self.kept = kept
        self.on_stop = on_stop
        self.stopped: list[int] = []
        self.grace: list[asyncio.TimerHandle] = []

    def on_signal(self, signum: int) -> None:
        # The first stop sends no new request and waits up to STOP_GRACE_S for the requests
        # in flight; the same signal again (a second Ctrl-C; a pool's parent forwarding it)
        # abandons them at once. Either way the batches complete and the outputs are written.
        crawler, display, kept, stopped = self.crawler, self.display, self.kept, self.stopped
        repeated = signum in stopped
        stopped.append(signum)
        name = signal.Signals(signum).name
        if self.on_stop is not None:
            self.on_stop(len(stopped))
        if len(stopped) == 1:
            in_flight = crawler.in_flight()
            crawler.request_stop()
            self.grace.append(self.loop.call_later(STOP_GRACE_S, crawler.abandon_in_flight))
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

    def install(self) -> None:
        for sig in STOP_SIGNALS:
            self.loop.add_signal_handler(sig, self.on_signal, sig)
        # a caller may hold SIGINT/SIGTERM blocked until now (hold_stop_signals: a crawl or a
        # forked pool worker starting): one that arrived meanwhile is taken now and stops the
        # crawl before its first lease
        signal.pthread_sigmask(signal.SIG_UNBLOCK, STOP_SIGNALS)

    def cancel_grace(self) -> None:
        """The grace period's timer is not needed any more (the crawl has ended)."""
        for timer in self.grace:
            timer.cancel()

    def remove(self) -> None:
        for sig in STOP_SIGNALS:
            self.loop.remove_signal_handler(sig)
