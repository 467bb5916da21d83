"""The dashboard's live log tail: the crawl's diagnostics and its fetches, bounded.

Records come from the crawl log's fetch lines (read once, by the same tail that counts them
for the status) and from the crawl's diagnostics (`DIR/gossamer.log.jsonl`, or the cluster's
capped Redis streams). They go to a `LogRing`: the last RING_SIZE records, plus the last
RING_SIZE warnings in a ring of their own, so a fast crawl's warnings stay longer. Nothing
else is kept. A stream sends at most BATCH_MAX records every PUSH_INTERVAL_S, the newest,
after one `skipped` record saying how many it left out (docs/dashboard.md, "Log tail")."""

from __future__ import annotations

import asyncio
import logging
import threading
from collections import deque
from collections.abc import Callable
from datetime import datetime
from typing import Any, Final

from ._hub import PollingHub

__all__ = [
    "BATCH_MAX",
    "LAST_MAX",
    "LEVELS",
    "RING_SIZE",
    "Cursor",
    "LogHub",
    "LogRing",
    "RingEntry",
    "diagnostic_record",
    "fetch_entry",
    "fetch_level",
    "fetch_record",
    "level_rank",
    "record_entry",
    "skipped_record",
    "unsent_record",
]

_log = logging.getLogger(__name__)

LEVELS: Final = ("debug", "info", "warning", "error")
_RANK: Final = {name: k for k, name in enumerate(LEVELS)} | {"critical": 3}
#: records kept (each of the two rings)
RING_SIZE: Final = 2_000
#: records an event of /events/log carries at most
BATCH_MAX: Final = 200
#: records GET /api/log answers at most (n=)
LAST_MAX: Final = 1_000


def level_rank(level: str) -> int:
    """debug 0 … error 3 (critical counts as error; an unknown level as info)."""
    return _RANK.get(level, 1)


def _unix(stamp: Any) -> float | None:
    if isinstance(stamp, int | float) and not isinstance(stamp, bool):
        return float(stamp)
    try:
        return datetime.fromisoformat(str(stamp)).timestamp()
    except ValueError:
        return None


def fetch_level(rec: dict[str, Any]) -> str:
    """A crawl log record's level: `warning` for a fetch error (no status: its outcome key
    says which) and for a page whose outcome is not ok (a 4xx or 5xx, a status retried, a
    body that failed to decode); `info` for the rest: ok pages, redirects, 304s, and the
    robots.txt and sitemap fetches (depth -1 or none), whose 404 is the normal answer."""
    status = rec.get("status")
    if status is None:
        return "warning"
    outcome = str(rec.get("outcome") or "")
    depth = rec.get("depth")
    is_page = isinstance(depth, int) and depth >= 0
    if is_page and not outcome.startswith("ok"):  # ok, ok/truncated, ok/not-modified
        return "warning"
    return "info"


def fetch_record(rec: dict[str, Any]) -> dict[str, Any]:
    """A crawl log record as a log tail record (docs/dashboard.md): its message `STATUS URL
    (OUTCOME): ERROR` (`error` for no status; the outcome left out when ok, the error when
    it is the outcome). `worker`: the record's own `worker` field (the pool worker that
    fetched), null when it has none (one process)."""
    status = rec.get("status")
    outcome = str(rec.get("outcome"))
    url = str(rec.get("url"))
    words = f"{status if status is not None else 'error'} {url}"
    if outcome != "ok":
        words += f" ({outcome})"
    error = rec.get("error")
    if error and error != outcome:
        words += f": {error}"
    worker = rec.get("worker")
    return {
        "time": _unix(rec.get("time")),
        "level": fetch_level(rec),
        "worker": str(worker) if worker is not None else None,
        "kind": "fetch",
        "message": words,
        "url": url,
        "status": status if isinstance(status, int) else None,
        "outcome": outcome,
    }


def diagnostic_record(rec: dict[str, Any]) -> dict[str, Any]:
    """A diagnostics line (logs.DiagnosticsFormatter's JSON) as a log tail record."""
    level = str(rec.get("level") or "info").lower()
    worker = rec.get("worker") or rec.get("worker_id")
    return {
        "time": _unix(rec.get("time", rec.get("ts"))),
        "level": "error" if level == "critical" else level,
        "worker": str(worker) if worker is not None else None,
        "kind": "diagnostic",
        "message": str(rec.get("message") or ""),
    }


#: a ring entry: (its number, level rank, worker, payload, how to make the record of the
#: payload or None when it is the record). A crawl log line is kept as json.loads gave it and
#: made a log record only when read (a stream's batch, GET /api/log: a few hundred at most),
#: not for each of the thousands a second that pass through the ring unread
_Make = Callable[[dict[str, Any]], dict[str, Any]]
_Entry = tuple[int, int, str | None, dict[str, Any], _Make | None]
#: what `LogRing.extend` takes: (level rank, worker, payload, make)
RingEntry = tuple[int, str | None, dict[str, Any], _Make | None]


def fetch_entry(rec: dict[str, Any]) -> RingEntry:
    """A crawl log record (with its `worker`, if any) as a ring entry: made a log record
    (`fetch_record`) only when read."""
    rank = 2 if fetch_level(rec) == "warning" else 1
    return rank, rec.get("worker"), rec, fetch_record


def record_entry(rec: dict[str, Any]) -> RingEntry:
    """A log record as a ring entry."""
    return level_rank(rec["level"]), rec.get("worker"), rec, None


def _record(e: _Entry) -> dict[str, Any]:
    make = e[4]
    return make(e[3]) if make is not None else e[3]


#: where a stream is: (records added, warnings added) when it last sent
Cursor = tuple[int, int]


class LogRing:
    """The last RING_SIZE records and, apart, the last RING_SIZE of warning and above; each
    with its number in its ring (1, 2, …), which tells a stream what it has not sent yet and
    how many left the ring before it could. Thread-safe: records are added on the source's
    read thread, read on the event loop's."""

    def __init__(self, size: int = RING_SIZE) -> None:
        self.size = size
        self.added = 0  # records ever added
        self.warnings = 0  # … of them warning and above
        self._all: deque[_Entry] = deque(maxlen=size)
        self._warnings: deque[_Entry] = deque(maxlen=size)
        self._lock = threading.Lock()

    @property
    def cursor(self) -> Cursor:
        """Now: a stream that starts here sends only what is added from now on."""
        with self._lock:
            return self.added, self.warnings

    def add(self, rec: dict[str, Any]) -> None:
        """Add a log record."""
        self.extend([record_entry(rec)])

    def extend(
        self,
        entries: list[RingEntry],
    ) -> None:
        """Add (level rank, worker, payload, make) entries: the record is `make(payload)`, or
        the payload itself when `make` is None (made when read)."""
        with self._lock:
            for rank, worker, payload, make in entries:
                self.added += 1
                self._all.append((self.added, rank, worker, payload, make))
                if rank >= 2:
                    self.warnings += 1
                    self._warnings.append((self.warnings, rank, worker, payload, make))

    def last(self, n: int, level: str = "debug", worker: str | None = None) -> list[dict[str, Any]]:
        """The last `n` records at `level` or above (of `worker`), oldest first."""
        least = level_rank(level)
        picked: list[_Entry] = []
        with self._lock:
            for e in reversed(self._warnings if least >= 2 else self._all):
                if len(picked) >= n:
                    break
                if e[1] >= least and (worker is None or e[2] == worker):
                    picked.append(e)
        picked.reverse()
        return [_record(e) for e in picked]

    def since(
        self, cursor: Cursor, level: str = "debug", worker: str | None = None,
        limit: int = BATCH_MAX,
    ) -> tuple[list[dict[str, Any]], int, Cursor]:
        """(records, skipped, cursor): the matching records added after `cursor`, the newest
        `limit` of them, oldest first; how many were left out (matching ones beyond `limit`,
        plus those of the ring read that left it before this call: they may or may not
        have matched); the cursor to pass next time."""
        least = level_rank(level)
        picked: list[_Entry] = []
        skipped = 0
        with self._lock:
            ring, seen = (self._warnings, cursor[1]) if least >= 2 else (self._all, cursor[0])
            for e in reversed(ring):
                if e[0] <= seen:
                    break
                if e[1] >= least and (worker is None or e[2] == worker):
                    if len(picked) < limit:
                        picked.append(e)
                    else:
                        skipped += 1
            if ring:
                skipped += max(0, ring[0][0] - seen - 1)  # gone before this read
            now = (self.added, self.warnings)
        picked.reverse()
        return [_record(e) for e in picked], skipped, now


def skipped_record(n: int, now: float) -> dict[str, Any]:
    """The record a batch starts with when `n` records were left out of it."""
    return {
        "time": now,
        "level": "warning",
        "worker": None,
        "kind": "skipped",
        "message": f"{n} records skipped",
    }


def unsent_record(worker: str, n: int, warnings: int, rate: Any, now: float) -> dict[str, Any]:
    """The record that follows a cluster worker's sample of fetches (cluster/fetchstream.py)
    when `n` of its fetches were not sent (`warnings` of them warnings: then it is a warning
    too, else info)."""
    of = f", {warnings} of them warnings" if warnings else ""
    return {
        "time": now,
        "level": "warning" if warnings else "info",
        "worker": worker,
        "kind": "skipped",
        "message": f"{n} fetches not sent{of} (a sample of {rate} a second is; the "
        f"worker's crawl log has every fetch)",
    }


class LogHub(PollingHub):
    """Keeps a source's log ring up to date while log streams are open (every `interval`
    s, off the event loop) and wakes them when records came."""

    what = "log"

    def __init__(self, source: Any, interval: float) -> None:
        super().__init__(interval)
        self.source = source
        self.ring: LogRing = source.log_ring

    async def refresh(self) -> None:
        before = self.ring.cursor
        await asyncio.to_thread(self.source.read_log)
        if self.ring.cursor != before:
            async with self._changed:
                self._changed.notify_all()

    async def poll(self) -> None:
        await self.refresh()

    async def wait_new(self, cursor: Cursor, within: float) -> bool:
        """Wait until records came after `cursor` (True) or `within` s passed (False)."""
        return await self.wait_until(lambda: self.ring.cursor != cursor, within)
