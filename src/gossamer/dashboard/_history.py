"""The dashboard's history for its charts (`GET /api/history`): samples of the status the
hub read (every read: a page's stream, /api/status, /metrics), at most one every
HISTORY_EVERY_S kept, the last HISTORY_S seconds at most — 1,800 samples of five numbers,
~100 kB of JSON at the most. Only what was read while someone looked: a dashboard started on
a running crawl has no history before it, and the hub reads only while a page is open."""

from __future__ import annotations

from collections import deque
from typing import Any, Final

__all__ = ["HISTORY_EVERY_S", "HISTORY_S", "History"]

#: the least time between two samples kept
HISTORY_EVERY_S: Final = 2.0
#: how far back the history goes
HISTORY_S: Final = 3_600.0
_KEYS: Final = ("pages", "pages_per_s", "bytes", "bytes_per_s")


class History:
    """Samples (t, pages, pages_per_s, bytes, bytes_per_s) of the statuses read."""

    def __init__(self, every: float = HISTORY_EVERY_S, span: float = HISTORY_S) -> None:
        self.every = every
        self._samples: deque[tuple[float, ...]] = deque(maxlen=int(span / every) + 1)

    def add(self, status: dict[str, Any]) -> None:
        """Keep `status`'s figures unless the last sample is younger than `every`."""
        t = status.get("time")
        totals = status.get("totals") or {}
        if not isinstance(t, int | float):
            return
        if self._samples and t - self._samples[-1][0] < self.every:
            return
        self._samples.append((float(t), *(float(totals.get(k) or 0) for k in _KEYS)))

    def as_json(self) -> dict[str, list[float]]:
        """{"t": [...], "pages": [...], "pages_per_s": [...], "bytes": [...],
        "bytes_per_s": [...]}, oldest first."""
        columns = list(zip(*self._samples, strict=True)) or [() for _ in range(5)]
        return {k: list(col) for k, col in zip(("t", *_KEYS), columns, strict=True)}
