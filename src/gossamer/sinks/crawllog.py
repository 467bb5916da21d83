"""The crawl log: one JSON object per line (JSONL) per fetch, appended.

Lines are buffered and handed to the OS on `flush()`, on `close()` and every 64 KiB, in one
`write` of whole lines on an `O_APPEND` descriptor under an advisory lock: several processes
may share the log and lines never interleave; a killed process loses only the lines since its
last flush (the engine flushes before the frontier counts a batch done). A torn last line is
completed when the log is reopened, and `read_crawl_log` skips lines that do not parse. The
fields, in order: docs/crawler/outputs.md, "Crawl log"."""

from __future__ import annotations

import fcntl
import json
import math
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass
from json.encoder import encode_basestring
from pathlib import Path
from typing import Any, Final

from ._isotime import iso_time

__all__ = ["CrawlLog", "CrawlLogStats", "iso_time", "read_crawl_log"]

_FLUSH_BYTES: Final = 64 * 1024
_ENCODER: Final = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))


def _text(value: str | None) -> str | None:
    """JSON of an optional str, None for anything else (a str subclass)."""
    if value is None:
        return "null"
    return encode_basestring(value) if type(value) is str else None


def _int(value: int | None) -> str | None:
    """JSON of an optional int, None for anything else (a bool, an int subclass)."""
    if value is None:
        return "null"
    return str(value) if type(value) is int else None


@dataclass(frozen=True, slots=True)
class CrawlLogStats:
    """A snapshot: lines logged by this instance (buffered ones included), their bytes."""

    lines: int
    bytes: int


class CrawlLog:
    """Appends fetch records to the JSONL file at `path` (parent directories created);
    buffered: call `flush()` to hand the lines logged so far to the OS."""

    def __init__(self, path: str | os.PathLike[str], *, worker: str | None = None) -> None:
        self.path = Path(path)
        #: the pool worker writing (its part name, w0, w1 …), its lines' `worker` field;
        #: None (one process) leaves the field out
        self.worker = worker
        self._worker_field = f',"worker":{_text(worker)}' if worker is not None else ""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._fd: int | None = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        self._lines = self._bytes = 0
        self._buffer: list[bytes] = []
        self._buffered = 0
        self._torn = False  # a failed write left part of a line at the end of the file
        self._repair_torn_tail()

    def _repair_torn_tail(self) -> None:
        """End a line a killed writer left unfinished. Under the file's lock, which every
        write holds too: a file can grow a page at a time during another process's write,
        and its tail seen mid-write would look torn (an empty line would follow)."""
        assert self._fd is not None
        fcntl.flock(self._fd, fcntl.LOCK_EX)
        try:
            size = os.fstat(self._fd).st_size
            if size == 0:
                return
            with open(self.path, "rb") as f:
                f.seek(size - 1)
                last = f.read(1)
            if last != b"\n":
                os.write(self._fd, b"\n")
        finally:
            fcntl.flock(self._fd, fcntl.LOCK_UN)

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
        etag: str | None = None,
        last_modified: str | None = None,
        **extra: Any,
    ) -> None:
        """Log one fetch (`nbytes`: body bytes, the `bytes` field; `started_at`: time.time()
        when it began, now when omitted; `etag`, `last_modified`: the response's validators,
        left out when None; `extra`: more fields, JSON-serialisable)."""
        stamp = iso_time(time.time() if started_at is None else started_at)
        duration = round(duration, 6)
        parts = (
            _text(url),
            _int(status),
            _int(nbytes),
            _text(content_type),
            _int(depth),
            _text(parent),
            _text(outcome),
            _text(error),
            _text(location),
            _text(etag),
            _text(last_modified),
        )
        if extra or None in parts or type(duration) is not float or not math.isfinite(duration):
            # the general path: json.dumps's output, for any value
            record: dict[str, Any] = {
                "time": stamp,
                "url": url,
                "status": status,
                "bytes": nbytes,
                "type": content_type,
                "duration": duration,
                "depth": depth,
                "parent": parent,
                "outcome": outcome,
            }
            if error is not None:
                record["error"] = error
            if location is not None:
                record["location"] = location
            if etag is not None:
                record["etag"] = etag
            if last_modified is not None:
                record["last_modified"] = last_modified
            if self.worker is not None:
                record["worker"] = self.worker
            if extra:
                record.update(extra)
            self.write_record(record)
            return
        # the common case, built directly at a quarter of json.dumps's cost: the same text
        ur, st, nb, ct, dp, pa, oc, er, lo, et, lm = parts
        line = (
            f'{{"time":"{stamp}","url":{ur},"status":{st},"bytes":{nb},"type":{ct},'
            f'"duration":{duration!r},"depth":{dp},"parent":{pa},"outcome":{oc}'
        )
        if error is not None:
            line += f',"error":{er}'
        if location is not None:
            line += f',"location":{lo}'
        if etag is not None:
            line += f',"etag":{et}'
        if last_modified is not None:
            line += f',"last_modified":{lm}'
        self._append((line + self._worker_field + "}\n").encode("utf-8", "surrogateescape"))

    def write_record(self, record: dict[str, Any]) -> None:
        """Append an already built record as one line."""
        line = _ENCODER.encode(record) + "\n"
        self._append(line.encode("utf-8", "surrogateescape"))

    def _append(self, line: bytes) -> None:
        if self._fd is None:
            raise ValueError("write to a closed CrawlLog")
        self._buffer.append(line)
        self._buffered += len(line)
        self._lines += 1
        self._bytes += len(line)
        if self._buffered >= _FLUSH_BYTES:
            self.flush()

    def flush(self) -> None:
        """Hand the buffered lines to the OS in one write (a killed process then loses none
        of them). No fsync: see `sync()`. A failed write (disk full) raises; the lines not
        written stay buffered, and a line it tore is ended before the next write."""
        if self._fd is None or not self._buffer:
            return
        data = b"".join(self._buffer)
        if self._torn:
            data = b"\n" + data
        self._buffer.clear()
        self._buffered = 0
        view = memoryview(data)
        fcntl.flock(self._fd, fcntl.LOCK_EX)  # see _repair_torn_tail
        try:
            while view:
                view = view[os.write(self._fd, view) :]
        except OSError:
            written = len(data) - len(view)
            rest = bytes(view)
            self._torn = written > 0 and data[written - 1] != ord("\n")
            if self._torn:  # the rest of a line written in part is dropped with it
                rest = rest[rest.find(b"\n") + 1 :]
            if rest:
                self._buffer.append(rest)
                self._buffered = len(rest)
            raise
        finally:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
        self._torn = False

    def sync(self) -> None:
        """`flush()`, then fsync (against power loss)."""
        self.flush()
        if self._fd is not None:
            os.fsync(self._fd)

    def close(self) -> None:
        """Write the buffered lines and close the file (closed even when that write fails,
        which then raises). Idempotent."""
        if self._fd is not None:
            try:
                self.flush()
            finally:
                fd, self._fd = self._fd, None
                self._buffer.clear()
                os.close(fd)

    def statistics(self) -> CrawlLogStats:
        return CrawlLogStats(lines=self._lines, bytes=self._bytes)

    def __enter__(self) -> CrawlLog:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def read_crawl_log(
    path: str | os.PathLike[str], *, strict: bool = False
) -> Iterator[dict[str, Any]]:
    """The records of a crawl log, in file order; lines that are not a JSON object (a line
    torn by a kill) are skipped, or with `strict` raise ValueError (a log whose writers all
    exited cleanly has none)."""
    with open(path, "rb") as f:
        for number, raw in enumerate(f, 1):
            try:
                record = json.loads(raw)
            except ValueError:
                record = None
            if isinstance(record, dict):
                yield record
            elif strict:
                raise ValueError(f"{os.fspath(path)}:{number}: not a JSON object: {raw[:100]!r}")
