"""A cluster worker's heartbeat thread: every `TTL / 5` seconds it publishes the worker's
status record (one `Membership.beat`) and hands the answer (the member list, the crawl's
state, stop requests, the dead) to the worker.

It runs in a thread, not on the event loop, so a busy or blocked loop (a long parse, a
frontier call waiting for Redis) never silences the worker. Redis errors are waited out and
never end the thread; only `stop()` does.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

import redis.exceptions

from ._redis import Patience
from .members import Beat, Membership, WorkerStatus

__all__ = ["Heartbeat"]

_log = logging.getLogger(__name__)


class Heartbeat:
    """The worker's heartbeat thread: every `membership.interval` seconds it publishes
    `status()` and hands the `Beat` to `on_beat`; Redis errors are waited out (the record
    may expire meanwhile: the next beat brings the worker back). `stop()` ends the thread
    and waits for it, or only until the worker gives up on Redis (`patience`: a beat may
    be waiting for a paused Redis's reply; the thread is a daemon). It runs in a thread so
    that a busy or blocked event loop (a long parse, a frontier call waiting for Redis)
    never silences it. A beat that goes through counts as Redis reached (`patience`)."""

    def __init__(
        self,
        membership: Membership,
        status: Callable[[], WorkerStatus],
        on_beat: Callable[[Beat], None],
        patience: Patience | None = None,
    ) -> None:
        self.membership = membership
        self.status = status
        self.on_beat = on_beat
        self.patience = patience
        self.beats = 0
        self.failures = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="heartbeat", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        patience = self.patience
        while self._thread.is_alive():
            self._thread.join(0.1 if patience is not None else None)
            if patience is not None and patience.over():
                return

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
            if self.patience is not None:
                self.patience.reached()
            if told:
                _log.info("heartbeats reach Redis again")
            pause, told = 0.05, False
            self.beats += 1
            self.on_beat(beat)
            delay = max(0.0, interval - (time.monotonic() - started))

