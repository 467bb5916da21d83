"""How late a cluster worker's event loop runs its timers (`LoopLag`), added to the worker's
stats.json as it ends (`add_loop_lag`): a loop blocked by a call shows here.

The sampling task is owned by `LoopLag` as an async context manager: it starts on entering
and is cancelled and awaited on leaving.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from pathlib import Path

from ..sinks.stats import write_stats

__all__ = ["LoopLag", "add_loop_lag"]

_log = logging.getLogger(__name__)


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


def add_loop_lag(path: Path, lag: LoopLag) -> None:
    """Add the run's event-loop lag to the worker's stats.json (written by the engine as
    the crawl ends, when it could be)."""
    if not path.exists():
        return
    try:
        stats = json.loads(path.read_text(encoding="utf-8"))
        write_stats(path, {**stats, **lag.statistics()})
    except (OSError, ValueError) as exc:
        _log.warning(f"cannot add the loop lag to {path}: {exc}", extra={"path": str(path)})

