"""The crawl log: one JSON object per line (JSONL) per fetch, appended.

Each line is handed to the OS in a single `write` on an `O_APPEND` descriptor as soon as it is
logged, so a killed process loses no logged line, a resumed crawl appends to the same file, and
several processes may share one log (Linux appends each write whole at the end of the file).
A line torn by a kill in the middle of a write is completed with a newline when the log is
reopened, and `read_crawl_log` skips lines that do not parse.

Fields, in this order (absent optional ones are left out):

| key | meaning |
|---|---|
| `time` | when the fetch started, ISO 8601 UTC with microseconds (`2026-11-22T10:15:02.123456Z`) |
| `url` | the URL requested |
| `status` | HTTP status, or null when no response arrived |
| `bytes` | body bytes received |
| `type` | Content-Type of the response, or null |
| `duration` | seconds the fetch took |
| `depth` | crawl depth (seeds 0), or null (robots.txt, sitemaps) |
| `parent` | the URL the page was discovered on, or null |
| `outcome` | structured key: `ok`, `ok/truncated`, `fetch/status/404`, `fetch/error/timeout`, ... |
| `error` | optional: what went wrong, in words |
| `location` | optional: the redirect target (Location header) |
| anything else | optional extra fields given by the caller |
"""

from __future__ import annotations

import datetime as dt
import json
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["CrawlLog", "CrawlLogStats", "iso_time", "read_crawl_log"]


def iso_time(ts: float) -> str:
    """`ts` (seconds since the epoch) as ISO 8601 UTC with microseconds and a `Z`."""
    return dt.datetime.fromtimestamp(ts, dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


@dataclass(frozen=True, slots=True)
class CrawlLogStats:
    """A snapshot: lines written by this instance, their bytes."""

    lines: int
    bytes: int


class CrawlLog:
    """Appends fetch records to the JSONL file at `path` (parent directories created)."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._fd: int | None = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        self._lines = self._bytes = 0
        self._repair_torn_tail()

    def _repair_torn_tail(self) -> None:
        assert self._fd is not None
        size = os.fstat(self._fd).st_size
        if size == 0:
            return
        with open(self.path, "rb") as f:
            f.seek(size - 1)
            last = f.read(1)
        if last != b"\n":
            os.write(self._fd, b"\n")

    def write(
        self,
        *,
        url: str,
        status: int | None,
        outcome: str,
        nbytes: int = 0,
        content_type: str | None = None,
        duration: float = 0.0,
        depth: int | None = None,
        parent: str | None = None,
        error: str | None = None,
        location: str | None = None,
        started_at: float | None = None,
        **extra: Any,
    ) -> None:
        """Log one fetch (`nbytes`: body bytes, the `bytes` field; `started_at`: time.time()
        when it began, now when omitted; `extra`: more fields, JSON-serialisable)."""
        record: dict[str, Any] = {
            "time": iso_time(time.time() if started_at is None else started_at),
            "url": url,
            "status": status,
            "bytes": nbytes,
            "type": content_type,
            "duration": round(duration, 6),
            "depth": depth,
            "parent": parent,
            "outcome": outcome,
        }
        if error is not None:
            record["error"] = error
        if location is not None:
            record["location"] = location
        if extra:
            record.update(extra)
        self.write_record(record)

    def write_record(self, record: dict[str, Any]) -> None:
        """Append an already built record as one line."""
        if self._fd is None:
            raise ValueError("write to a closed CrawlLog")
        line = (json.dumps(record, ensure_ascii=False, separators=(",", ":")) + "\n").encode(
            "utf-8", "surrogateescape"
        )
        view = memoryview(line)
        while view:
            view = view[os.write(self._fd, view) :]
        self._lines += 1
        self._bytes += len(line)

    def flush(self) -> None:
        """Lines are written through at once; this fsyncs them (power-loss safety)."""
        if self._fd is not None:
            os.fsync(self._fd)

    def close(self) -> None:
        """Close the file. Idempotent."""
        if self._fd is not None:
            fd, self._fd = self._fd, None
            os.close(fd)

    def statistics(self) -> CrawlLogStats:
        return CrawlLogStats(lines=self._lines, bytes=self._bytes)

    def __enter__(self) -> CrawlLog:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def read_crawl_log(path: str | os.PathLike[str]) -> Iterator[dict[str, Any]]:
    """The records of a crawl log, in file order; lines that are not a JSON object (a line
    torn by a kill) are skipped."""
    with open(path, "rb") as f:
        for raw in f:
            try:
                record = json.loads(raw)
            except ValueError:
                continue
            if isinstance(record, dict):
                yield record
