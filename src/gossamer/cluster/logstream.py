"""A cluster crawl's diagnostics on a capped Redis stream, for the dashboard's log tail.

Each worker also sends its diagnostics (what its --log-level lets through) to the crawl's
stream, one entry a record, each XADD capped (`LOG_STREAM_MAXLEN`), so nobody has to trim it.
The sends happen on a thread of the handler's own from a bounded queue: a log call on the event
loop never waits for Redis, and a Redis that is down or slow drops records (counted, and said
in the next record that gets through) rather than holding the crawl."""

from __future__ import annotations

import contextlib
import logging
import queue
import threading
from collections.abc import Iterator
from typing import Any, Final, cast

from .. import logs
from ._redis import Keys, RedisClient, text

__all__ = [
    "LOG_STREAM_MAXLEN",
    "RedisLogHandler",
    "read_log_stream",
    "read_stream",
    "redis_diagnostics",
]

#: entries the stream keeps (MAXLEN ~: Redis trims whole nodes, so a few more)
LOG_STREAM_MAXLEN: Final = 5_000
#: records waiting to be sent at most; more are dropped (counted)
_QUEUE_MAX: Final = 1_000
_FIELD: Final = b"r"


class RedisLogHandler(logging.Handler):
    """Sends each record to the crawl's log stream (see the module docstring)."""

    def __init__(self, client: RedisClient, crawl: str, worker: str) -> None:
        super().__init__()
        self.setFormatter(logs.DiagnosticsFormatter(worker))
        self.key = Keys(crawl).log
        self.client = client
        self.dropped = 0
        self._queue: queue.Queue[str | None] = queue.Queue(_QUEUE_MAX)
        self._thread = threading.Thread(target=self._send, name="log-stream", daemon=True)
        self._thread.start()

    def emit(self, record: logging.LogRecord) -> None:
        try:
            self._queue.put_nowait(self.format(record))
        except queue.Full:
            self.dropped += 1
        except Exception:
            self.handleError(record)

    def _send(self) -> None:
        while (line := self._queue.get()) is not None:
            try:
                self.client.xadd(
                    self.key, {_FIELD: line}, maxlen=LOG_STREAM_MAXLEN, approximate=True
                )
            except Exception:
                self.dropped += 1  # (logging it would come back here)

    def close(self, timeout: float = 0.5) -> None:
        """Send what is queued, for at most `timeout` s (Redis may be paused or gone: a worker
        stopped while starting must still exit at once), then stop; what is left unsent is
        lost (the worker's own gossamer.log.jsonl has it)."""
        with contextlib.suppress(queue.Full):
            self._queue.put(None, timeout=timeout)
        self._thread.join(timeout)
        super().close()


@contextlib.contextmanager
def redis_diagnostics(client: RedisClient, crawl: str, worker: str) -> Iterator[None]:
    """While inside: the `gossamer` loggers' records also go to the crawl's log stream."""
    handler = RedisLogHandler(client, crawl, worker)
    logger = logging.getLogger(logs.ROOT)
    logger.addHandler(handler)
    try:
        yield
    finally:
        logger.removeHandler(handler)
        handler.close()


def read_stream(
    client: RedisClient, key: str, field: bytes, after: str, count: int, *, newest: bool = False
) -> tuple[list[bytes | str], str]:
    """The values of `field` in the entries of stream `key` added after the entry id `after`
    ("0": from the start; "$"-like starts are the caller's: pass the last id it saw), oldest
    first, and the id to read after next time. At most `count` entries: from the start, or
    with `newest`, the newest `count` (XREVRANGE, then put in order); else the oldest
    `count` after `after` (XRANGE: a reader catching up misses nothing)."""
    if after == "0" or newest:
        low = "-" if after == "0" else f"({after}"
        raw = cast(list[Any], client.xrevrange(key, "+", low, count=count))
        raw.reverse()
    else:
        raw = cast(list[Any], client.xrange(key, f"({after}", "+", count=count))
    values: list[bytes | str] = []
    last = after
    name = field.decode()  # a client that decodes responses has str field names
    for entry_id, fields in raw:
        last = text(entry_id)
        value = (fields.get(field) or fields.get(name)) if isinstance(fields, dict) else None
        if value is not None:
            values.append(value)
    return values, last


def read_log_stream(
    client: RedisClient, crawl: str, after: str, count: int
) -> tuple[list[str], str]:
    """The record lines added to the crawl's log stream after the entry id `after`
    (`read_stream`: the oldest `count` after it, so none is missed)."""
    values, last = read_stream(client, Keys(crawl).log, _FIELD, after, count)
    return [text(v) for v in values], last
