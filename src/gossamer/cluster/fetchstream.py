"""A sample of a cluster crawl's fetches on a capped Redis stream, for the dashboard's log tail.

A worker's crawl log is on its own machine, and it fetches far more than anyone watching reads,
so each worker also sends a sample. On the event loop only a hand-over: `FetchTailSink.log`
appends a small tuple to a bounded deque (a full deque counts the fetch as dropped). A thread
of its own drains it every TICK_S, keeps at most `rate × TICK_S` fetches (warnings first) and
sends them as one capped stream entry: at most 1 / TICK_S Redis commands a second a worker.
Everything not sent is counted in the next entry, so a worker's entries plus their `unsent`
add up to its crawl log's lines; a Redis down or paused holds only the sender thread, never the
crawl (docs/cluster.md, "The fetch sample stream")."""

from __future__ import annotations

import contextlib
import json
import logging
import os
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Final

from ..engine.sink_registry import PageSink, SinkContext
from ..fetch import FetchResult
from ..runner.stopping import hold_stop_signals
from ._redis import Keys, RedisClient
from .logstream import read_stream

__all__ = [
    "DEFAULT_RATE",
    "FETCH_STREAM_MAXLEN",
    "QUEUE_MAX",
    "RATE_ENV",
    "TICK_S",
    "Fetch",
    "FetchTail",
    "FetchTailSink",
    "FetchTailStats",
    "is_warning",
    "rate_from_env",
    "read_fetch_stream",
    "sample",
]

_log = logging.getLogger(__name__)

#: seconds between two entries of a worker
TICK_S: Final = 0.5
#: fetches a second a worker sends, by default (a tail is for watching: the full record is
#: the worker's crawl log)
DEFAULT_RATE: Final = 30
RATE_ENV: Final = "GOSSAMER_FETCH_TAIL_RATE"
#: fetches waiting for the sender at most: ~2 s of a worker at 2,000 pages/s (a tick takes
#: ~1,000), a few hundred KB; more are dropped, counted
QUEUE_MAX: Final = 4_096
#: entries the stream keeps (MAXLEN ~): each a worker's tick, ≤ rate × TICK_S fetches
#: (~2.5 KB at 15): ~2.5 MB of Redis at most; 500 s of one worker, 5 s of 100
FETCH_STREAM_MAXLEN: Final = 1_000
_FIELD: Final = b"b"

#: a fetch as the event loop hands it over: (time started, URL, status or None, depth (-1:
#: robots.txt, sitemaps), outcome key, error or None)
Fetch = tuple[float, str, int | None, int, str, str | None]


def is_warning(f: Fetch) -> bool:
    """Whether the log tail shows the fetch as a warning (dashboard/_logtail.py
    `fetch_level`): no response, or a page whose outcome is not ok (robots.txt's and
    sitemaps' 404s are the normal answer)."""
    return f[2] is None or (f[3] >= 0 and not f[4].startswith("ok"))


def _spread(indices: list[int], k: int) -> list[int]:
    """`k` of `indices` spread evenly over them (all when there are no more)."""
    n = len(indices)
    if n <= k:
        return indices
    return [indices[(j * n) // k] for j in range(k)]


def sample(fetches: Sequence[Fetch], budget: int) -> tuple[list[Fetch], int]:
    """(picked, warnings left out): at most `budget` of `fetches`, warnings first, each
    kind spread evenly over the sequence, in their order."""
    if len(fetches) <= budget:
        return list(fetches), 0
    warnings: list[int] = []
    others: list[int] = []
    for i, f in enumerate(fetches):
        (warnings if is_warning(f) else others).append(i)
    if len(warnings) >= budget:
        return [fetches[i] for i in _spread(warnings, budget)], len(warnings) - budget
    picked = sorted(warnings + _spread(others, budget - len(warnings)))
    return [fetches[i] for i in picked], 0


def _record(f: Fetch) -> dict[str, Any]:
    rec: dict[str, Any] = {
        "time": f[0],
        "url": f[1],
        "status": f[2],
        "depth": f[3] if f[3] >= 0 else None,
        "outcome": f[4],
    }
    if f[5] is not None:
        rec["error"] = f[5]
    return rec


@dataclass(frozen=True, slots=True)
class FetchTailStats:
    """A snapshot: fetches handed over, sent in an entry, left out by the sample, dropped by
    a full queue, lost with an entry whose XADD failed; entries sent, sends failed."""

    handed: int
    sent: int
    sampled_out: int
    dropped: int
    failed: int
    entries: int
    send_errors: int


class FetchTail:
    """The sender of one worker's fetch sample (see the module docstring): `put` on the event
    loop, the rest on its thread. `clock`: the entries' time."""

    def __init__(
        self,
        client: RedisClient,
        crawl: str,
        worker: str,
        *,
        rate: int = DEFAULT_RATE,
        tick: float = TICK_S,
        queue_max: int = QUEUE_MAX,
        clock: Callable[[], float] = time.time,
        start: bool = True,
    ) -> None:
        self.client = client
        self.key = Keys(crawl).fetches
        self.worker = worker
        self.rate = rate
        self.tick = tick
        self.budget = max(1, round(rate * tick))
        self.clock = clock
        self._queue: deque[Fetch] = deque()
        self._max = queue_max
        # written by the loop's thread only (`put`)
        self.handed = 0
        self.dropped = 0
        # written by the sender's thread only
        self._dropped_seen = 0
        self._unsent = self._unsent_warnings = 0  # to say in the next entry
        self._sent = self._sampled_out = self._failed = 0
        self._entries = self._send_errors = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="fetch-tail", daemon=True)
        if start:
            # the thread keeps SIGINT/SIGTERM blocked (as the worker's Redis I/O thread): a
            # stop is the main thread's
            with hold_stop_signals():
                self._thread.start()

    def put(self, fetch: Fetch) -> None:
        """Hand a fetch over (the event loop's thread): a length check and an append."""
        self.handed += 1
        if len(self._queue) < self._max:
            self._queue.append(fetch)
        else:
            self.dropped += 1

    def _run(self) -> None:
        while not self._stop.wait(self.tick):
            self.send_tick()
        self.send_tick()  # what came before the close

    def send_tick(self) -> bool:
        """Drain the queue, send its sample as one entry (the sender's thread; tests call it
        directly with `start=False`): whether an entry was sent."""
        q = self._queue
        fetches = [q.popleft() for _ in range(len(q))]
        dropped = self.dropped  # (an int read once: the loop may be adding to it)
        new_dropped, self._dropped_seen = dropped - self._dropped_seen, dropped
        picked, warnings_out = sample(fetches, self.budget)
        self._sampled_out += len(fetches) - len(picked)
        unsent = self._unsent + new_dropped + len(fetches) - len(picked)
        unsent_warnings = self._unsent_warnings + warnings_out
        if not picked and not unsent:
            return False
        entry = {
            "worker": self.worker,
            "time": self.clock(),
            "rate": self.rate,
            "fetches": [_record(f) for f in picked],
            "unsent": unsent,
            "unsent_warnings": unsent_warnings,
        }
        try:
            self.client.xadd(self.key, {_FIELD: json.dumps(entry, separators=(",", ":"))},
                             maxlen=FETCH_STREAM_MAXLEN, approximate=True)  # fmt: skip
        except Exception:  # down, out of memory: said as unsent in the next entry
            self._send_errors += 1
            self._failed += len(picked)
            self._unsent = unsent + len(picked)
            self._unsent_warnings = unsent_warnings + sum(map(is_warning, picked))
            return False
        self._entries += 1
        self._sent += len(picked)
        self._unsent = self._unsent_warnings = 0
        return True

    def statistics(self) -> FetchTailStats:
        return FetchTailStats(
            handed=self.handed,
            sent=self._sent,
            sampled_out=self._sampled_out,
            dropped=self.dropped,
            failed=self._failed,
            entries=self._entries,
            send_errors=self._send_errors,
        )

    def close(self, timeout: float = 0.5) -> None:
        """Send what came since the last tick, for at most `timeout` s (Redis may be paused
        or gone: the worker must still exit at once), then stop; a send still waiting then
        is abandoned (the thread is a daemon)."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout)


class FetchTailSink(PageSink):
    """A cluster worker's sink handing every fetch (every crawl log line) to its `FetchTail`."""

    def __init__(self, tail: FetchTail) -> None:
        self.tail = tail
        self._put = tail.put

    @classmethod
    def factory(
        cls, client: RedisClient, crawl: str, worker: str
    ) -> Callable[[SinkContext], FetchTailSink | None]:
        """The sink factory to register for a worker's run (`register_sink`); it builds no
        sink when `GOSSAMER_FETCH_TAIL_RATE` is 0."""

        def build(_ctx: SinkContext) -> FetchTailSink | None:
            rate = rate_from_env()
            return cls(FetchTail(client, crawl, worker, rate=rate)) if rate > 0 else None

        return build

    def log(
        self,
        result: FetchResult,
        *,
        depth: int,
        parent: str | None,
        outcome: str,
        dup: tuple[str, str] | None = None,
    ) -> None:
        self._put((result.started_at, result.url, result.status, depth, outcome, result.error))

    def close(self) -> None:
        self.tail.close()


def rate_from_env() -> int:
    """`GOSSAMER_FETCH_TAIL_RATE`: fetches a second a worker sends (0: none), else
    DEFAULT_RATE (said on the log when not a whole number ≥ 0)."""
    raw = os.environ.get(RATE_ENV)
    if raw is None or not raw.strip():
        return DEFAULT_RATE
    with contextlib.suppress(ValueError):
        if (rate := int(raw)) >= 0:
            return rate
    _log.warning(f"{RATE_ENV}={raw!r} is not a whole number ≥ 0: {DEFAULT_RATE} is used")
    return DEFAULT_RATE


def read_fetch_stream(
    client: RedisClient, crawl: str, after: str, count: int
) -> tuple[list[dict[str, Any]], str]:
    """The entries (their JSON objects) added to the crawl's fetch stream after the entry id
    `after` ("0": from the start), the newest `count` of them when more (`read_stream`), oldest
    first; and the id to read after next time."""
    values, last = read_stream(client, Keys(crawl).fetches, _FIELD, after, count, newest=True)
    entries = []
    for value in values:
        try:
            entry = json.loads(value)
        except ValueError:
            continue
        if isinstance(entry, dict):
            entries.append(entry)
    return entries, last
