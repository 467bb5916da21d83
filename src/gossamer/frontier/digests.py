"""The payload digests a crawl has stored whole, shared by every worker: digest → first capture.

A response whose payload's SHA-1 the crawl has already stored is written as a WARC `revisit`
record (identical-payload-digest, engine/payloads.py) that refers to the capture recorded
here: its URI and its WARC-Date. One map per crawl, where every worker (a pool's processes, a
cluster's machines, a resumed run) reads it: `SqliteDigestStore` (digests.sqlite in the crawl
directory, WAL, beside the frontier), `RedisDigestStore` (one key a digest under the crawl's
prefix), `MemoryDigestStore` (tests).

`get` is one lookup; `add` puts a batch and keeps the first capture of a digest that is
already there (two workers that stored the same payload at once both keep theirs in their
WARC; the map names one of them, and later revisits refer to it). Costs a digest: SQLite
~100 bytes on disk (20-byte digest, the URI, a float); Redis ~200 bytes of memory
(docs/crawler/outputs.md, "Identical payloads")."""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from os import PathLike
from pathlib import Path
from typing import Any, Final, Protocol

from .sqlite import sqlite_storage_error

__all__ = [
    "CHECKPOINT_EVERY",
    "Capture",
    "DigestStore",
    "MemoryDigestStore",
    "RedisDigestStore",
    "SqliteDigestStore",
]


@dataclass(frozen=True, slots=True)
class Capture:
    """Where a payload was first stored: the response record's target URI and its fetch time
    (time.time(): the record's WARC-Date)."""

    uri: str
    date: float


class DigestStore(Protocol):
    """A crawl's digest → first capture map (digests: the 20 bytes of a SHA-1)."""

    def get(self, digest: bytes) -> Capture | None:
        """The first capture stored with `digest`, or None."""
        ...

    def add(self, captures: Sequence[tuple[bytes, Capture]]) -> None:
        """Store each capture under its digest, unless the digest has one already."""
        ...

    def maintenance_due(self) -> bool:
        """Whether `maintain` has work (a cheap test, made after each `add`); True once for
        each round of work: the caller then runs `maintain`."""
        ...

    def maintain(self) -> None:
        """Housekeeping that may block (an SQLite checkpoint): the caller runs it off the
        event loop."""
        ...

    def close(self) -> None: ...


class MemoryDigestStore:
    """`DigestStore` in a dict: for one process (tests)."""

    def __init__(self) -> None:
        self.captures: dict[bytes, Capture] = {}

    def get(self, digest: bytes) -> Capture | None:
        return self.captures.get(digest)

    def add(self, captures: Sequence[tuple[bytes, Capture]]) -> None:
        for digest, capture in captures:
            self.captures.setdefault(digest, capture)

    def maintenance_due(self) -> bool:
        return False

    def maintain(self) -> None:
        pass

    def close(self) -> None:
        pass


_SQLITE_SCHEMA: Final = """
CREATE TABLE IF NOT EXISTS digests (
    digest BLOB PRIMARY KEY,
    uri BLOB NOT NULL,
    date REAL NOT NULL
) WITHOUT ROWID
"""


#: commits between two checkpoints of the digest store's WAL (~20 pages of 4 KiB a commit:
#: a WAL of ~8 MB at most), each run by `maintain` off the event loop
CHECKPOINT_EVERY: Final = 100


class SqliteDigestStore:
    """`DigestStore` in an SQLite file (WAL), shared by every process that opens it.

    `add` is one transaction (a batch's digests, before the frontier counts the batch done);
    a crash loses at most the batch being added, whose pages are then fetched again. Its
    commits never checkpoint (SQLite's automatic checkpoint would fsync twice on the
    caller's thread, the event loop's: a crawl of 20,000 pages stalled for seconds on a busy
    disk); `maintain` does, every CHECKPOINT_EVERY commits, on a connection of its own, from
    another thread (a passive checkpoint: readers and writers go on). Errors of the file
    (disk full, I/O) raise `FrontierStorageError`, an OSError."""

    def __init__(self, path: str | PathLike[str], *, busy_timeout: float = 60.0) -> None:
        self.path = Path(path)
        self._lock = threading.Lock()
        self._busy_timeout = busy_timeout
        self._commits = 0
        self._checkpointer: sqlite3.Connection | None = None
        self._checkpoint_lock = threading.Lock()
        try:
            self._db = sqlite3.connect(
                self.path, timeout=busy_timeout, isolation_level=None, check_same_thread=False
            )
        except sqlite3.Error as exc:
            raise sqlite_storage_error(exc, self.path, "digest store") from exc
        try:
            self._set_wal(busy_timeout)
            self._db.execute("PRAGMA synchronous=NORMAL")
            self._db.execute("PRAGMA wal_autocheckpoint=0")  # `maintain` checkpoints
            self._db.execute(_SQLITE_SCHEMA)
        except sqlite3.Error as exc:
            self._db.close()
            raise sqlite_storage_error(exc, self.path, "digest store") from exc

    def _set_wal(self, busy_timeout: float) -> None:
        """Switch to WAL, retried while another process opening the new file at the same
        moment holds it (SQLITE_BUSY comes at once from the switch, without the busy
        handler's wait: robots_store.SqliteRobotsStore)."""
        deadline = time.monotonic() + busy_timeout
        while True:
            try:
                self._db.execute("PRAGMA journal_mode=WAL")
                return
            except sqlite3.OperationalError as exc:
                if "locked" not in str(exc) or time.monotonic() > deadline:
                    raise
                time.sleep(0.005)

    def get(self, digest: bytes) -> Capture | None:
        try:
            with self._lock:
                row = self._db.execute(
                    "SELECT uri, date FROM digests WHERE digest = ?", (digest,)
                ).fetchone()
        except sqlite3.Error as exc:
            raise sqlite_storage_error(exc, self.path, "digest store") from exc
        if row is None:
            return None
        return Capture(bytes(row[0]).decode("utf-8", "surrogateescape"), row[1])

    def add(self, captures: Sequence[tuple[bytes, Capture]]) -> None:
        if not captures:
            return
        rows = [(d, c.uri.encode("utf-8", "surrogateescape"), c.date) for d, c in captures]
        try:
            with self._lock:
                self._db.execute("BEGIN IMMEDIATE")
                try:
                    self._db.executemany(
                        "INSERT OR IGNORE INTO digests (digest, uri, date) VALUES (?, ?, ?)", rows
                    )
                except BaseException:
                    self._db.execute("ROLLBACK")
                    raise
                self._db.execute("COMMIT")
                self._commits += 1
        except sqlite3.Error as exc:
            raise sqlite_storage_error(exc, self.path, "digest store") from exc

    def maintenance_due(self) -> bool:
        if self._commits < CHECKPOINT_EVERY:
            return False
        self._commits = 0
        return True

    def maintain(self) -> None:
        """Checkpoint the WAL (passive), on a connection of its own: `get` and `add` go on
        meanwhile on theirs."""
        try:
            with self._checkpoint_lock:
                self._checkpoint()
        except sqlite3.Error as exc:
            raise sqlite_storage_error(exc, self.path, "digest store") from exc

    def _checkpoint(self) -> None:
        if self._checkpointer is None:
            self._checkpointer = sqlite3.connect(
                self.path, timeout=self._busy_timeout, isolation_level=None,
                check_same_thread=False,
            )  # fmt: skip
        self._checkpointer.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()

    def __len__(self) -> int:
        with self._lock:
            return int(self._db.execute("SELECT count(*) FROM digests").fetchone()[0])

    def close(self) -> None:
        with self._lock, self._checkpoint_lock:
            if self._checkpointer is not None:
                self._checkpointer.close()
            self._db.close()


class RedisDigestStore:
    """`DigestStore` in Redis: one string a digest, `gs:<crawl>:dg:<20 digest bytes>` (no hash
    tag: the keys spread over a Redis Cluster's nodes), holding ``<date>\\n<URI>``. `add` is
    one pipeline of `SET … NX` (on a Redis Cluster, one per node). The keys live as long as
    the crawl's (deleted with them). Redis errors are raised as they are (the cluster worker
    retries them through outages)."""

    def __init__(self, client: Any, crawl: str) -> None:
        self.client = client
        self._prefix = f"gs:{crawl}:dg:".encode()

    def key(self, digest: bytes) -> bytes:
        return self._prefix + digest

    def get(self, digest: bytes) -> Capture | None:
        raw = self.client.get(self.key(digest))
        if raw is None:
            return None
        date, _, uri = bytes(raw).partition(b"\n")
        return Capture(uri.decode("utf-8", "surrogateescape"), float(date))

    def add(self, captures: Sequence[tuple[bytes, Capture]]) -> None:
        if not captures:
            return
        pipe = self.client.pipeline(transaction=False)
        for digest, capture in captures:
            value = repr(capture.date).encode() + b"\n" + capture.uri.encode(
                "utf-8", "surrogateescape"
            )
            pipe.set(self.key(digest), value, nx=True)
        pipe.execute()

    def maintenance_due(self) -> bool:
        return False

    def maintain(self) -> None:
        pass

    def close(self) -> None:
        pass  # the client belongs to the caller
