"""The dashboard's history for its charts (`GET /api/history`): samples of the status the
hub read (every read: a page's stream, /api/status, /metrics), at most one every
HISTORY_EVERY_S kept, the last HISTORY_S seconds at most — 1,800 samples of five numbers,
~100 kB of JSON at the most. Only what was read while someone looked: a dashboard started on
a running crawl has no history before it, and the hub reads only while a page is open.

A crawl that does not run has its whole history in its crawl log: `RateBins` counts the log's
pages and bytes by the second of their time as the dashboard's tail reads it (bins that widen
as the crawl grows, 2,048 at most), and `crawl_history` draws them over the crawl's runs, in
the same shape, at most HISTORY_POINTS points, a gap between two runs."""

from __future__ import annotations

import calendar
import math
import time
from collections import deque
from collections.abc import Sequence
from typing import Any, Final

__all__ = ["HISTORY_EVERY_S", "HISTORY_POINTS", "HISTORY_S", "History", "RateBins",
           "crawl_history"]  # fmt: skip

#: the least time between two samples kept
HISTORY_EVERY_S: Final = 2.0
#: how far back the history goes
HISTORY_S: Final = 3_600.0
_KEYS: Final = ("pages", "pages_per_s", "bytes", "bytes_per_s")
#: the most points a history has (the page's chart keeps as many)
HISTORY_POINTS: Final = int(HISTORY_S / HISTORY_EVERY_S)
#: the most bins RateBins keeps before it doubles their width
BINS_MAX: Final = 2_048


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


class RateBins:
    """Pages and bytes of a crawl log by the time of its lines: bins of `width` seconds
    (1 at first, doubled whenever there would be more than BINS_MAX), so memory stays
    bounded however long the crawl. Fed line by line by the dashboard's log tail: a line's
    cost is a slice and two dict look-ups."""

    def __init__(self) -> None:
        self.width = 1
        self.bins: dict[int, list[int]] = {}  # bin start (Unix s) -> [pages, bytes]
        self._minute = ("", 0)  # the last minute read, "2026-11-22T10:15", and its Unix time

    def add(self, stamp: Any, page: bool, nbytes: int) -> None:
        """Count a line written at `stamp` (the crawl log's ISO 8601 UTC time,
        `2026-11-22T10:15:02.123456Z`); lines without one are not counted."""
        if not isinstance(stamp, str):
            return
        prefix = stamp[:16]
        minute = self._minute[1] if prefix == self._minute[0] else None
        try:
            if minute is None:
                minute = calendar.timegm(time.strptime(prefix, "%Y-%m-%dT%H:%M"))
                self._minute = (prefix, minute)
            t = minute + int(stamp[17:19])
        except ValueError:
            return
        key = t - t % self.width
        counts = self.bins.get(key)
        if counts is None:
            if len(self.bins) >= BINS_MAX:
                self._widen()
                key = t - t % self.width
                counts = self.bins.get(key)
            if counts is None:
                counts = self.bins[key] = [0, 0]
        counts[0] += page
        counts[1] += nbytes

    def _widen(self) -> None:
        self.width *= 2
        merged: dict[int, list[int]] = {}
        for key, (pages, nbytes) in self.bins.items():
            counts = merged.setdefault(key - key % self.width, [0, 0])
            counts[0] += pages
            counts[1] += nbytes
        self.bins = merged

    def last_before(self, until: float) -> float | None:
        """The end of the last bin that starts before `until` (a run's last activity)."""
        keys = [k for k in self.bins if k < until]
        return float(max(keys) + self.width) if keys else None


def crawl_history(
    bins: RateBins, runs: Sequence[tuple[float, float]], points: int = HISTORY_POINTS
) -> dict[str, list[float | None]]:
    """The history of a crawl from its log's bins, in `History.as_json`'s shape: a point per
    bin of each run (`runs`: its (start, end) times; none: the span of the bins), 0 where a
    run fetched nothing, and a gap (None) between two runs; bins merged so that there are at
    most `points`. Rates are the bin's pages (bytes) over its width; `pages` and `bytes` the
    crawl's total so far."""
    out: dict[str, list[float | None]] = {k: [] for k in ("t", *_KEYS)}
    if not bins.bins:
        return out
    if not runs:
        keys = sorted(bins.bins)
        runs = [(keys[0], keys[-1] + bins.width)]
    spans = [(start, max(start, end)) for start, end in runs]
    total = sum(end - start for start, end in spans) + bins.width * len(spans)
    width = bins.width * max(1, 2 ** math.ceil(math.log2(max(1.0, total / bins.width / points))))
    merged: dict[int, list[int]] = {}
    for key, (pages, nbytes) in bins.bins.items():
        counts = merged.setdefault(key - key % width, [0, 0])
        counts[0] += pages
        counts[1] += nbytes
    pages_so_far = bytes_so_far = 0
    # lines written before the first run's start (a crawl older than its run history)
    first = int(spans[0][0]) - int(spans[0][0]) % width
    for key in sorted(k for k in merged if k < first):
        pages_so_far += merged[key][0]
        bytes_so_far += merged[key][1]
    last: int | None = None  # the last bin drawn
    for start, end in spans:
        key = int(start) - int(start) % width
        if last is not None and key > last + width:  # a gap: no run between these two
            for k, v in (("t", last + width), ("pages", pages_so_far), ("bytes", bytes_so_far)):
                out[k].append(float(v))
            out["pages_per_s"].append(None)
            out["bytes_per_s"].append(None)
        if last is not None:
            key = max(key, last + width)
        while key <= end:
            pages, nbytes = merged.get(key, (0, 0))
            pages_so_far += pages
            bytes_so_far += nbytes
            out["t"].append(float(key))
            out["pages"].append(float(pages_so_far))
            out["pages_per_s"].append(round(pages / width, 1))
            out["bytes"].append(float(bytes_so_far))
            out["bytes_per_s"].append(round(nbytes / width, 1))
            last = key
            key += width
    return out
