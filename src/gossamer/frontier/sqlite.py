"""The embedded frontier: one SQLite file (WAL), safe for threads and for processes sharing it.

Every call is one transaction (`BEGIN IMMEDIATE` for writes), so a crash or SIGKILL loses
nothing a call returned from, and processes sharing the file queue on the write lock. The
layout touches as few pages as it can per call: URL rows appended once, a lease written only to
its host's row, dedupe in an in-memory fingerprint set brought up to date inside every write
transaction (exact across processes, no disk access for a duplicate). A file of an older
schema opens as it is. The schema, the layout's reasons and the figures:
docs/crawler/frontier.md, "`SqliteFrontier`". A display watching a crawl run by another
process reads the file through a read-only connection (`read_counts`, `read_top_hosts`,
`read_failures`).

The module stays whole because the schema, the statements that use it and the seen-set are one
storage design: each call's transaction relies on the layout's invariants (the lease blob, the
append-only URL rows, the parked and links tables of depth relaxation), and splitting it would
spread those invariants over modules that must change together."""

from __future__ import annotations

import errno
import fcntl
import math
import os
import secrets
import sqlite3
import struct
import sys
import threading
import time
from array import array
from collections import deque
from collections.abc import Callable, Collection, Iterable, Iterator, Sequence, Sized
from contextlib import contextmanager
from dataclasses import dataclass, field
from os import PathLike
from pathlib import Path
from types import TracebackType
from typing import Any, TypeVar, Unpack, cast

from ._edges import relax_order
from ._hosts import host_view, top
from ._options import FrontierKnobs, FrontierOptions
from ._politeness import HostTiming, PolitenessPolicy, after_batch, after_reclaim
from ._protocol import (
    DEAD_HOST,
    Discovered,
    FrontierError,
    FrontierStats,
    FrontierStorageError,
    HostBatch,
    HostView,
    LeasedURL,
    Outcome,
    Outlinks,
    StaleLeaseError,
)
from ._settle import death_cause, failure_errors, settle
from ._share import Share, count_limit, hosts_over_share, lease_room

__all__ = [
    "SharedSqliteFrontier",
    "SqliteFrontier",
    "read_counts",
    "read_failures",
    "read_top_hosts",
]

SCHEMA_VERSION = 2
_SIGN = 1 << 63
_WRAP = 1 << 64
_CHUNK = 500  # host names per IN (...) query
_LEASE_FIELDS = 4  # per leased URL in hosts.lease: id, priority, attempts, fp
_LEASE_BYTES = 8 * _LEASE_FIELDS
#: a recorded child whose edge adds other than 1 (a redirect or canonical: 0), in links.other
_OTHER_EDGE = struct.Struct("<QB")
_SWAP = sys.byteorder != "little"  # links.fps is little-endian 64-bit fingerprints

_SCHEMA = """
CREATE TABLE urls (
    id INTEGER PRIMARY KEY,
    fp INTEGER NOT NULL,
    host_id INTEGER NOT NULL,
    depth INTEGER NOT NULL,
    url TEXT NOT NULL,
    parent TEXT
);
CREATE TABLE queue (
    host_id INTEGER NOT NULL,
    priority INTEGER NOT NULL,
    id INTEGER NOT NULL,
    attempts INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (host_id, priority, id)
) WITHOUT ROWID;
CREATE TABLE failed (id INTEGER PRIMARY KEY, error TEXT, priority INTEGER);
CREATE TABLE hosts (
    id INTEGER PRIMARY KEY,
    name TEXT NOT NULL UNIQUE,
    next_fetch_at REAL NOT NULL,
    lease_order REAL NOT NULL,
    pending INTEGER NOT NULL DEFAULT 0,
    total INTEGER NOT NULL DEFAULT 0,
    lease_token TEXT,
    lease_expires REAL,
    lease BLOB,
    crawl_delay REAL,
    adaptive_delay REAL NOT NULL DEFAULT 0,
    backoff REAL NOT NULL DEFAULT 0,
    errors INTEGER NOT NULL DEFAULT 0,
    dead INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX hosts_ready ON hosts(next_fetch_at, name) WHERE lease_token IS NULL AND pending > 0;
CREATE INDEX hosts_order ON hosts(lease_order, name) WHERE lease_token IS NULL AND pending > 0;
CREATE INDEX hosts_expiry ON hosts(lease_expires) WHERE lease_token IS NOT NULL;
CREATE TABLE counters (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    queued INTEGER NOT NULL, leased INTEGER NOT NULL, done INTEGER NOT NULL,
    failed INTEGER NOT NULL, retries INTEGER NOT NULL, dropped INTEGER NOT NULL,
    duplicates INTEGER NOT NULL, hosts INTEGER NOT NULL, dead_hosts INTEGER NOT NULL
);
INSERT INTO counters VALUES (1, 0, 0, 0, 0, 0, 0, 0, 0, 0);
"""

# The depth tables (see "Depth" in the module docstring), made when missing at open.
_DEPTH_SCHEMA = """
CREATE TABLE IF NOT EXISTS parked (
    fp INTEGER PRIMARY KEY,
    depth INTEGER NOT NULL,
    priority INTEGER NOT NULL,
    host TEXT NOT NULL,
    url TEXT NOT NULL,
    parent TEXT
);
CREATE TABLE IF NOT EXISTS links (
    id INTEGER PRIMARY KEY,
    fps BLOB NOT NULL,
    other BLOB
);
CREATE TABLE IF NOT EXISTS depth_counters (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    parked INTEGER NOT NULL, lowered INTEGER NOT NULL
);
INSERT OR IGNORE INTO depth_counters VALUES (1, 0, 0);
"""

_TIMING = "next_fetch_at, crawl_delay, adaptive_delay, backoff, errors, dead"
_READY = (
    "SELECT id, name, pending FROM hosts INDEXED BY hosts_order"
    " WHERE lease_token IS NULL AND pending > 0 AND next_fetch_at <= ?"
    " ORDER BY lease_order, name LIMIT ?"
)
_QUEUE = (
    "SELECT q.id, q.priority, q.attempts, u.fp, u.depth, u.url, u.parent"
    " FROM queue AS q JOIN urls AS u ON u.id = q.id"
    " WHERE q.host_id = ? ORDER BY q.priority, q.id LIMIT ?"
)
_ANY_WORK = (
    "SELECT EXISTS (SELECT 1 FROM hosts INDEXED BY hosts_ready"
    " WHERE lease_token IS NULL AND pending > 0 AND next_fetch_at <= ?)"
    " OR EXISTS (SELECT 1 FROM hosts INDEXED BY hosts_expiry"
    " WHERE lease_token IS NOT NULL AND lease_expires <= ?)"
)
_BY_TOKEN = f"SELECT lease, pending, {_TIMING} FROM hosts WHERE id = ? AND lease_token = ?"
_EXPIRED = (
    f"SELECT id, length(lease), {_TIMING} FROM hosts INDEXED BY hosts_expiry"
    " WHERE lease_token IS NOT NULL AND lease_expires <= ?"
)
#: (leases out, unleased hosts ready now, unleased hosts with URLs queued), each counted up
#: to a limit: bounded walks of the partial indexes, never all the hosts
_IN_PLAY = (
    "SELECT (SELECT count(*) FROM (SELECT 1 FROM hosts INDEXED BY hosts_expiry"
    " WHERE lease_token IS NOT NULL LIMIT :n)),"
    " (SELECT count(*) FROM (SELECT 1 FROM hosts INDEXED BY hosts_ready"
    " WHERE lease_token IS NULL AND pending > 0 AND next_fetch_at <= :now LIMIT :n)),"
    " (SELECT count(*) FROM (SELECT 1 FROM hosts INDEXED BY hosts_ready"
    " WHERE lease_token IS NULL AND pending > 0 LIMIT :n))"
)
_HOST_VIEW = f"name, pending, total, length(lease), {_TIMING}"
#: every host, in `_hosts.top`'s order (`pending` counts the leased URLs too): a scan, as no
#: index orders hosts by queue length (the hot path would pay for one)
_TOP_HOSTS = (
    f"SELECT {_HOST_VIEW} FROM hosts ORDER BY pending DESC, total - pending DESC, name LIMIT ?"
)
#: a failed URL's error key and queue priority (`Failures`): in every file made since they
#: were kept, added at open to an older one (whose failed rows have neither: error "")
_FAILED_COLUMNS = (("error", "TEXT"), ("priority", "INTEGER"))
_FAILURES = "SELECT coalesce(error, ''), count(*) FROM failed GROUP BY 1 ORDER BY 2 DESC, 1"
_COUNTS = ("queued", "leased", "done", "failed", "retries", "hosts", "dead_hosts")
_COUNTS_ROW = f"SELECT {', '.join(_COUNTS)} FROM counters"
_T = TypeVar("_T")
_V = TypeVar("_V")


def _at_depth(it: Discovered, depth: int) -> Discovered:
    """`it` at `depth` (its priority moved by as much as its depth)."""
    if depth == it.depth:
        return it
    return Discovered(
        it.url, it.host, depth, it.fp, it.priority - (it.depth - depth), it.parent,
        it.parent_fp, it.delta,
    )


def _chunks(values: list[_V]) -> Iterator[list[_V]]:
    """`values` in lists of at most _CHUNK (the parameters of one IN (...) query)."""
    for lo in range(0, len(values), _CHUNK):
        yield values[lo : lo + _CHUNK]


def _marks(values: Sized) -> str:
    """The `?, ?, …` of an IN (...) over `values`."""
    return ",".join("?" * len(values))


def _to_db(fp: int) -> int:
    return fp - _WRAP if fp >= _SIGN else fp


def _timing(row: tuple[Any, ...]) -> HostTiming:
    next_at, crawl_delay, adaptive, backoff, errors, dead = row
    return HostTiming(
        next_fetch_at=float(next_at),
        crawl_delay=None if crawl_delay is None else float(crawl_delay),
        adaptive_delay=float(adaptive),
        backoff=float(backoff),
        errors=int(errors),
        dead=bool(dead),
    )


def _host_view(row: tuple[Any, ...], policy: PolitenessPolicy) -> HostView:
    name, pending, total, lease_bytes = row[:4]
    leased = int(lease_bytes or 0) // _LEASE_BYTES
    fetched = max(0, int(total) - int(pending))
    return host_view(name, int(pending) - leased, leased, fetched, _timing(row[4:]), policy)


def _top_hosts(
    db: sqlite3.Connection, limit: int, among: Iterable[str] | None, policy: PolitenessPolicy
) -> list[HostView]:
    """`HostsView.top_hosts` read on `db`."""
    if among is None:
        rows = db.execute(_TOP_HOSTS, (max(0, limit),)).fetchall()
        return [_host_view(row, policy) for row in rows]
    names = list(dict.fromkeys(among))
    rows = []
    for lo in range(0, len(names), _CHUNK):
        chunk = names[lo : lo + _CHUNK]
        marks = ",".join("?" * len(chunk))
        query = f"SELECT {_HOST_VIEW} FROM hosts WHERE name IN ({marks})"
        rows += db.execute(query, chunk).fetchall()
    return top((_host_view(row, policy) for row in rows), limit)


def _read_file(
    path: str | PathLike[str],
    read: Callable[[sqlite3.Connection], _T],
    *,
    untouched: bool = False,
) -> _T | None:
    """`read(db)` on a read-only connection to the frontier file `path`, opened without the
    frontier (a display watching a crawl that another process runs). None when there is no
    file yet; sqlite3.Error when it cannot be read. `untouched`: no file made beside it (a
    reader of WAL makes the shared-memory file): read as immutable — for a frontier no
    process has open —, and None when a write-ahead log holds some of it (a killed run's)."""
    path = Path(path)
    if not path.is_file():
        return None
    mode = "ro"
    if untouched:
        if Path(f"{path}-wal").exists():
            return None
        mode = "ro&immutable=1"
    db = sqlite3.connect(f"file:{path}?mode={mode}", uri=True, timeout=1.0)
    try:
        return read(db)
    finally:
        db.close()


def read_counts(path: str | PathLike[str]) -> dict[str, int] | None:
    """The counters of the frontier file `path` (`_read_file`), named as `FrontierStats`
    names them (queued, leased, done, failed, retries, hosts, dead_hosts): one row, no scan;
    None without a file or a row."""
    row = _read_file(path, lambda db: db.execute(_COUNTS_ROW).fetchone())
    if row is None:
        return None
    return dict(zip(_COUNTS, (int(v or 0) for v in row), strict=True))


def read_failures(
    path: str | PathLike[str], *, untouched: bool = False
) -> dict[str, int] | None:
    """`SqliteFrontier.failures()` of the frontier file `path` (`_read_file`, `untouched`
    too): a scan of the failed table (what a resume reads before it decides to run); None
    without a file."""

    def read(db: sqlite3.Connection) -> dict[str, int]:
        columns = {row[1] for row in db.execute("PRAGMA table_info(failed)")}
        if "error" not in columns:  # a file older than the error keys
            n = int(db.execute("SELECT count(*) FROM failed").fetchone()[0])
            return {"": n} if n else {}
        return {str(k): int(n) for k, n in db.execute(_FAILURES)}

    return _read_file(path, read, untouched=untouched)


def read_top_hosts(
    path: str | PathLike[str], limit: int, options: FrontierOptions
) -> list[HostView] | None:
    """`SqliteFrontier.top_hosts(limit)` of the frontier file `path` (`_read_file`) under
    `options` (the crawl's: the file does not hold them): a scan of the hosts table (its
    cost: bench/bench_dashboard.py)."""
    return _read_file(path, lambda db: _top_hosts(db, limit, None, options.politeness))


def sqlite_storage_error(
    exc: sqlite3.Error, path: Path, what: str = "frontier"
) -> FrontierStorageError:
    """`exc`, an error of the SQLite file `path` (the `what` of the crawl), as the storage
    error every store raises: errno ENOSPC for a full disk, EBUSY when locked, else EIO."""
    code = getattr(exc, "sqlite_errorcode", 0) & 0xFF
    name = getattr(exc, "sqlite_errorname", "SQLITE_ERROR")
    number = {13: errno.ENOSPC, 5: errno.EBUSY, 6: errno.EBUSY}.get(code, errno.EIO)
    return FrontierStorageError(number, f"{what} {path}: {exc} ({name})")


@dataclass(slots=True)
class _Inserted:
    """What one insert did: new fps (in id order), counts, refusals, hosts now full."""

    accepted: list[int] = field(default_factory=list)
    queued: int = 0
    failed: int = 0  # accepted as failed at once (dead host)
    new_hosts: int = 0
    duplicates: int = 0
    dropped: int = 0
    full_hosts: set[str] = field(default_factory=set)

    def count(self, db: sqlite3.Connection, duplicates: int, dropped: int) -> None:
        """Add this insert to the counters, with `duplicates` and `dropped` offers besides."""
        db.execute(
            "UPDATE counters SET queued = queued + ?, failed = failed + ?,"
            " hosts = hosts + ?, duplicates = duplicates + ?, dropped = dropped + ?",
            (
                self.queued,
                self.failed,
                self.new_hosts,
                duplicates + self.duplicates,
                dropped + self.dropped,
            ),
        )


@dataclass(slots=True)
class _Pending:
    """Counters bumped without a transaction (all-duplicate batches), flushed with the next."""

    duplicates: int = 0
    dropped: int = 0


class SqliteFrontier:
    """`Frontier` in one SQLite file; see the module docstring for the storage layout.

    `clock` gives the current time (seconds) whenever a call takes no `now`. Politeness
    knobs are those of `PolitenessPolicy`. Open the same path again (any process) to resume:
    the seen-set is rebuilt from the file; leases of dead workers come back when they expire
    (or at once with `reclaim_expired(float("inf"))`).
    """

    def __init__(
        self,
        path: str | PathLike[str],
        *,
        clock: Callable[[], float] = time.time,
        busy_timeout: float = 60.0,
        cache_mib: int = 64,
        **knobs: Unpack[FrontierKnobs],
    ) -> None:
        self.options = FrontierOptions.of(**knobs)
        self.path = Path(path)
        self._clock = clock
        self._lock = threading.RLock()  # re-entered by `settle` (a put, then a complete)
        self._in_write = False  # inside `_write`: a nested `_write` joins its transaction
        # what a nested call changes in memory once the outer transaction commits (nothing
        # if it rolls back): `_after_commit`
        self._after: list[Callable[[], None]] | None = None
        self._seen: set[int] = set()
        self._max_id = 0
        self._full_hosts: set[str] = set()
        self._pending = _Pending()
        # max_depth: fp -> a depth the URL had (its depth only falls, so an offer at least
        # this deep changes nothing and needs no lookup)
        self._depth_seen: dict[int, int] = {}
        self._edge_rows = False
        self._closed = False
        self._writer_lock: int | None = None
        try:
            self._db = sqlite3.connect(
                self.path, timeout=busy_timeout, isolation_level=None, check_same_thread=False
            )
        except sqlite3.Error as exc:
            raise sqlite_storage_error(exc, self.path) from exc
        try:
            self._writer_lock = self._open_writer_lock()
            self._open(cache_mib)
        except BaseException:
            self._release_files()
            raise

    # ------------------------------------------------------------------ plumbing
    def _open(self, cache_mib: int) -> None:
        db = self._db
        try:
            mode = db.execute("PRAGMA journal_mode=WAL").fetchone()[0]
            if str(mode).lower() != "wal":
                raise FrontierStorageError(
                    errno.EIO, f"frontier {self.path}: cannot use WAL (journal mode {mode})"
                )
            db.execute("PRAGMA synchronous=NORMAL")
            db.execute(f"PRAGMA cache_size=-{int(cache_mib) * 1024}")
            db.execute("PRAGMA temp_store=MEMORY")
        except sqlite3.Error as exc:
            raise sqlite_storage_error(exc, self.path) from exc
        with self._write():
            version = db.execute("PRAGMA user_version").fetchone()[0]
            if version == 0:
                tables = db.execute("SELECT count(*) FROM sqlite_master").fetchone()[0]
                if tables:
                    raise FrontierStorageError(
                        errno.EINVAL, f"{self.path} is an SQLite file but not a frontier"
                    )
                for statement in _SCHEMA.split(";"):
                    if statement.strip():
                        db.execute(statement)
                db.execute(f"PRAGMA user_version={SCHEMA_VERSION}")
            elif version != SCHEMA_VERSION:
                raise FrontierStorageError(
                    errno.EINVAL,
                    f"frontier {self.path} has schema version {version}, "
                    f"this gossamer reads {SCHEMA_VERSION}",
                )
            for statement in _DEPTH_SCHEMA.split(";"):
                if statement.strip():
                    db.execute(statement)
            columns = {row[1] for row in db.execute("PRAGMA table_info(failed)")}
            for name, kind in _FAILED_COLUMNS:
                if name not in columns:
                    db.execute(f"ALTER TABLE failed ADD COLUMN {name} {kind}")
            if self.options.max_depth is not None:
                db.execute("CREATE INDEX IF NOT EXISTS urls_fp ON urls(fp)")
            # a file of the first max_depth layout: one `edges` row per link, still read
            self._edge_rows = bool(
                db.execute("SELECT 1 FROM sqlite_master WHERE name = 'edges'").fetchone()
            )
        with self._read():  # the bulk of the seen-set, without holding the write lock
            self._sync_seen(db)

    def _open_writer_lock(self) -> int | None:
        """The file lock that queues writers of several processes (see `_write`), or None
        where flock is not available (then SQLite's busy handler alone queues them)."""
        try:
            fd = os.open(f"{self.path}-writer.lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        except OSError:
            return None
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
            fcntl.flock(fd, fcntl.LOCK_UN)
        except OSError:
            os.close(fd)
            return None
        return fd

    @contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        """One write transaction; sqlite errors become FrontierStorageError, nothing applied.

        Processes sharing the file take an exclusive `flock` first: the kernel hands the lock
        to the next waiter the moment it is released, where SQLite's busy handler sleeps in
        steps of up to 100 ms before trying again (a host's complete-then-lease cycle in a
        worker pool waited tens of milliseconds that way)."""
        if self._in_write:  # `settle`: the put and the complete share one transaction
            yield self._db
            return
        lock = self._writer_lock
        if lock is not None:
            fcntl.flock(lock, fcntl.LOCK_EX)
        self._in_write = True
        after = self._after = []
        try:
            with self._transaction() as db:
                yield db
        finally:
            self._in_write = False
            self._after = None
            if lock is not None:
                fcntl.flock(lock, fcntl.LOCK_UN)
        for change in after:  # (committed: an exception above skips them)
            change()

    def _after_commit(self, change: Callable[[], None]) -> None:
        """Apply `change` to the in-memory state now, or, inside an enclosing `_write`
        (`settle`), when its transaction commits: a rolled-back put leaves no URL counted
        seen that the file does not hold."""
        if self._after is not None:
            self._after.append(change)
        else:
            change()

    @contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        db = self._db
        try:
            db.execute("BEGIN IMMEDIATE")
            try:
                yield db
                db.execute("COMMIT")
            except BaseException:
                if db.in_transaction:
                    try:
                        db.execute("ROLLBACK")
                    except sqlite3.Error:
                        pass
                raise
        except (sqlite3.IntegrityError, sqlite3.ProgrammingError, sqlite3.InterfaceError):
            raise  # a bug, not the disk
        except sqlite3.DatabaseError as exc:
            raise sqlite_storage_error(exc, self.path) from exc

    @contextmanager
    def _read(self) -> Iterator[sqlite3.Connection]:
        """One read transaction: a consistent snapshot."""
        db = self._db
        try:
            db.execute("BEGIN")
            try:
                yield db
            finally:
                if db.in_transaction:
                    db.execute("COMMIT")
        except (sqlite3.IntegrityError, sqlite3.ProgrammingError, sqlite3.InterfaceError):
            raise
        except sqlite3.DatabaseError as exc:
            raise sqlite_storage_error(exc, self.path) from exc

    def _check_open(self) -> None:
        if self._closed:
            raise FrontierError(f"frontier {self.path} is closed")

    def _sync_seen(self, db: sqlite3.Connection) -> None:
        """Add the fingerprints other connections inserted since we last looked (all, at open)."""
        seen = self._seen
        cur = db.execute("SELECT id, fp FROM urls WHERE id > ? ORDER BY id", (self._max_id,))
        while rows := cur.fetchmany(65536):
            seen.update([v + _WRAP if v < 0 else v for _, v in rows])
            self._max_id = rows[-1][0]

    # ------------------------------------------------------------------ the protocol
    def settle(
        self,
        token: str,
        discovered: Sequence[Discovered | Outlinks],
        outcomes: Sequence[Outcome],
        next_fetch_at: float | None = None,
        renew: int = 0,
    ) -> tuple[int, HostBatch | None, bool]:
        """`put_discovered(discovered)` then `complete(token, ...)` in one write transaction:
        one commit a batch instead of two, and the pages both dirty (the host's row, the
        counters) written once. Returns (URLs queued, the renewed batch or None, whether the
        lease was stale). A stale lease (the `StaleLeaseError` that `complete` raises before
        it writes anything) still commits the links, as the two calls one after the other
        would."""
        with self._lock:
            self._check_open()
            stale = False
            with self._write():
                queued = self.put_discovered(discovered) if discovered else 0
                try:
                    batch = self.complete(token, outcomes, next_fetch_at, renew)
                except StaleLeaseError:
                    stale, batch = True, None
            return queued, batch, stale

    def put_discovered(self, items: Sequence[Discovered | Outlinks]) -> int:
        """See `Frontier.put_discovered`. Duplicates are filtered in memory, new URLs batched."""
        with self._lock:
            self._check_open()
            if self.options.max_depth is not None:
                return self._put_relaxing(items, self.options.max_depth)
            seen = self._seen
            full = self._full_hosts
            fresh: dict[int, Discovered] = {}
            again: dict[int, int] = {}  # fp -> repeats within this call
            duplicates = dropped = 0
            for it in cast(Sequence[Discovered], items):  # the hot loop (~60 ns a link): most
                fp = it.fp  # links are duplicates (no Outlinks without a max_depth)
                if fp in seen:
                    duplicates += 1
                elif fp in fresh:
                    again[fp] = again.get(fp, 0) + 1
                elif it.host in full:
                    dropped += 1
                else:
                    fresh[fp] = it
            pending = self._pending
            pending.duplicates += duplicates
            pending.dropped += dropped
            if not fresh:
                return 0
            with self._write() as db:
                ins = self._insert(db, fresh, again, self._clock())
                ins.count(db, pending.duplicates, pending.dropped)

            def accepted() -> None:
                self._pending = _Pending()
                seen.update(ins.accepted)
                self._max_id += len(ins.accepted)
                full.update(ins.full_hosts)

            self._after_commit(accepted)
            return ins.queued

    def _put_relaxing(self, items: Sequence[Discovered | Outlinks], max_depth: int) -> int:
        """put_discovered with a max_depth: one transaction that parks, relaxes and inserts
        (no in-memory shortcut but `_depth_seen`: every offer may lower a depth)."""
        if not items:
            return 0
        with self._write() as db:
            self._sync_seen(db)
            fresh, dups, parked, lowered = self._relax(db, items, max_depth)
            ins = self._insert(db, fresh, {}, self._clock()) if fresh else _Inserted()
            p = self._pending
            ins.count(db, p.duplicates + dups, p.dropped)
            if parked or lowered:
                db.execute(
                    "UPDATE depth_counters SET parked = parked + ?, lowered = lowered + ?",
                    (parked, lowered),
                )

        def accepted() -> None:
            self._pending = _Pending()
            self._seen.update(ins.accepted)
            self._max_id += len(ins.accepted)
            for fp in ins.accepted:
                self._depth_seen[fp] = fresh[fp].depth

        self._after_commit(accepted)
        return ins.queued

    def _relax(
        self, db: sqlite3.Connection, items: Sequence[Discovered | Outlinks], max_depth: int
    ) -> tuple[dict[int, Discovered], int, int, int]:
        """The shortest-path relaxation of one put (inside its transaction), over a worklist
        of (fp, depth, offered item or None for a recorded child). Returns the URLs to
        insert (new, within max_depth), the duplicates offered, the change in parked URLs
        and how many depths were lowered.

        A page's children are recorded as one `links` row (keyed by the page's `urls.id`:
        packed fingerprints, appended to when the page sends more), read only when the page
        is lowered; one row a page instead of one a link (with its key) took the frontier
        file from 710 to ~300 bytes a URL and a put's edge writes from ~21 rows to one."""
        seen = self._seen
        known = self._depth_seen
        pages: dict[int, tuple[int, int] | None] = {}  # fp -> (urls.id, depth now) if accepted

        def page_of(fp: int) -> tuple[int, int] | None:
            if fp in pages:
                return pages[fp]
            row: tuple[int, int] | None = None
            if fp in seen:
                cur = db.execute("SELECT id, depth FROM urls WHERE fp = ?", (_to_db(fp),))
                row = cur.fetchone()
            pages[fp] = row
            return row

        ones: dict[int, list[int]] = {}  # urls.id -> children one deeper, to record
        others: dict[int, list[bytes]] = {}  # urls.id -> other children (_OTHER_EDGE)
        work: deque[tuple[int, int, Discovered | None]] = deque()
        later: list[tuple[int, int, Discovered | None]] = []  # after the offers (Outlinks)
        for offered in items:
            if isinstance(offered, Outlinks):
                page = page_of(offered.fp) if offered.fps else None
                if page is None:
                    continue
                page_id, now_at = page
                fps, deltas = offered.fps, offered.deltas
                if all(x == 1 for x in deltas):
                    ones.setdefault(page_id, []).extend(fps)
                else:
                    for child, delta in zip(fps, deltas, strict=True):
                        if delta == 1:
                            ones.setdefault(page_id, []).append(child)
                        else:
                            others.setdefault(page_id, []).append(_OTHER_EDGE.pack(child, delta))
                if now_at < offered.depth:  # lowered while it was fetched: relax them all
                    later.extend(
                        (child, now_at + delta, None)
                        for child, delta in zip(fps, deltas, strict=True)
                    )
                continue
            d = offered.depth
            pfp = offered.parent_fp
            if pfp is not None and (page := page_of(pfp)) is not None:
                delta = offered.delta
                if delta == 1:
                    ones.setdefault(page[0], []).append(offered.fp)
                else:
                    others.setdefault(page[0], []).append(_OTHER_EDGE.pack(offered.fp, delta))
                d = min(d, page[1] + delta)
            work.append((offered.fp, d, offered))
        work.extend(later)
        if ones or others:
            rows = []
            for page_id in ones.keys() | others.keys():
                packed = array("Q", ones.get(page_id, ()))
                if _SWAP:
                    packed.byteswap()
                other = others.get(page_id)
                rows.append((page_id, packed.tobytes(), b"".join(other) if other else None))
            db.executemany(
                # (|| makes text of blobs, byte for byte in a UTF-8 file: cast back)
                "INSERT INTO links(id, fps, other) VALUES (?, ?, ?) ON CONFLICT (id) DO UPDATE"
                " SET fps = CAST(fps || excluded.fps AS BLOB),"
                " other = CASE WHEN excluded.other IS NULL THEN other"
                " ELSE CAST(coalesce(other, x'') || excluded.other AS BLOB) END",
                rows,
            )
        fresh: dict[int, Discovered] = {}
        dups = parked = lowered = 0
        while work:
            fp, d, it = work.popleft()
            if fp in seen:
                dups += it is not None
                if d >= known.get(fp, math.inf):
                    continue
                row = db.execute(
                    "SELECT id, depth, host_id FROM urls WHERE fp = ?", (_to_db(fp),)
                ).fetchone()
                known[fp] = min(d, row[1])
                if d >= row[1]:
                    continue
                lowered += 1
                db.execute("UPDATE urls SET depth = ? WHERE id = ?", (d, row[0]))
                self._lower_priority(db, row[2], row[0], row[1] - d)
                work.extend(self._children(db, row[0], fp, d))
                continue
            if fp in fresh:  # offered twice in this call
                dups += it is not None
                if d < fresh[fp].depth:  # (counted as lowered, as if inserted already)
                    fresh[fp] = _at_depth(fresh[fp], d)
                    lowered += 1
                continue
            row = db.execute(
                "SELECT depth, priority, host, url, parent FROM parked WHERE fp = ?", (_to_db(fp),)
            ).fetchone()
            src = it
            if row is not None:
                src = Discovered(row[3], row[2], row[0], fp, row[1], row[4])
            if d > max_depth:
                if src is None:
                    continue
                if row is None:
                    parked += 1
                elif d >= row[0]:
                    continue
                p = _at_depth(src, d)
                db.execute(
                    "INSERT OR REPLACE INTO parked(fp, depth, priority, host, url, parent)"
                    " VALUES (?, ?, ?, ?, ?, ?)",
                    (_to_db(fp), p.depth, p.priority, p.host, p.url, p.parent),
                )
                continue
            if src is None:  # a recorded child the frontier never accepted (host budget)
                continue
            if row is not None:
                db.execute("DELETE FROM parked WHERE fp = ?", (_to_db(fp),))
                parked -= 1
            fresh[fp] = _at_depth(src, d)
        return fresh, dups, parked, lowered

    def _children(
        self, db: sqlite3.Connection, page_id: int, fp: int, depth: int
    ) -> list[tuple[int, int, Discovered | None]]:
        """The recorded children of a page now at `depth`, as worklist entries: one a child
        (the row keeps every edge offered: a child linked twice, or linked and redirected
        to, is there twice), in `relax_order` (smallest delta first)."""
        edges: list[tuple[int, int]] = []
        if self._edge_rows:  # a file of the first layout: recorded before any links row
            for child, delta in db.execute(
                "SELECT child, delta FROM edges WHERE parent = ?", (_to_db(fp),)
            ).fetchall():
                edges.append((child + _WRAP if child < 0 else child, delta))
        row = db.execute("SELECT fps, other FROM links WHERE id = ?", (page_id,)).fetchone()
        if row is not None:
            fps = array("Q")
            fps.frombytes(row[0])
            if _SWAP:
                fps.byteswap()
            if not row[1] and not edges:  # every edge adds 1: first recorded first
                one = depth + 1
                return [(child, one, None) for child in dict.fromkeys(fps)]
            edges.extend((child, 1) for child in fps)
            if row[1]:
                edges.extend(_OTHER_EDGE.iter_unpack(row[1]))
        return [(child, depth + delta, None) for child, delta in relax_order(edges)]

    def _lower_priority(self, db: sqlite3.Connection, host_id: int, url_id: int, by: int) -> None:
        """Move a queued or leased URL `by` up its host's queue (its priority falls with its
        depth). A leased URL's queue key is also in its host's lease record: both change,
        so the batch's completion finds the entry (`WHERE host_id = ? AND id = ?` scans the
        host's queue: a cost only relaxations pay)."""
        if not db.execute(
            "UPDATE queue SET priority = priority - ? WHERE host_id = ? AND id = ?",
            (by, host_id, url_id),
        ).rowcount:
            return  # done or failed
        blob = db.execute("SELECT lease FROM hosts WHERE id = ?", (host_id,)).fetchone()[0]
        if blob is None:
            return
        record = array("q")
        record.frombytes(blob)
        for i in range(0, len(record), _LEASE_FIELDS):
            if record[i] == url_id:
                record[i + 1] -= by
                db.execute(
                    "UPDATE hosts SET lease = ? WHERE id = ?", (record.tobytes(), host_id)
                )
                return

    def _insert(
        self,
        db: sqlite3.Connection,
        fresh: dict[int, Discovered],
        again: dict[int, int],
        now: float,
    ) -> _Inserted:
        """Insert the URLs of `fresh` that are new and within budget (inside a transaction).

        `again` counts repeats of a fresh fp within the call: duplicates if the URL is
        accepted, drops if the budget refuses it.
        """
        out = _Inserted()
        known_before = len(self._seen)
        self._sync_seen(db)  # other processes may have inserted some of these
        if len(self._seen) != known_before:
            for fp in [fp for fp in fresh if fp in self._seen]:
                del fresh[fp]
                out.duplicates += 1 + again.get(fp, 0)
        if not fresh:
            return out
        names = list({it.host for it in fresh.values()})
        hosts = self._host_rows(db, names)
        missing = [n for n in names if n not in hosts]
        if missing:
            db.executemany(
                "INSERT INTO hosts(name, next_fetch_at, lease_order) VALUES (?, ?, ?)",
                [(n, now, now) for n in missing],
            )
            hosts.update(self._host_rows(db, missing))
        budget = self.options.host_budget
        rows = []
        queue = []
        failed = []
        counts: dict[str, list[int]] = {}  # name -> [queued, accepted]
        next_id = self._max_id
        for fp, it in fresh.items():
            name = it.host
            host_id, total, dead = hosts[name]
            c = counts.get(name)
            if c is None:
                c = counts[name] = [0, 0]
            if budget is not None and total + c[1] >= budget:
                out.dropped += 1 + again.get(fp, 0)
                out.full_hosts.add(name)
                continue
            out.duplicates += again.get(fp, 0)
            c[1] += 1
            next_id += 1
            rows.append((next_id, _to_db(fp), host_id, it.depth, it.url, it.parent))
            if dead:
                failed.append((next_id, DEAD_HOST, it.priority))
            else:
                queue.append((host_id, it.priority, next_id))
                c[0] += 1
            out.accepted.append(fp)
            if budget is not None and total + c[1] >= budget:
                out.full_hosts.add(name)
        out.queued = len(queue)
        if rows:
            db.executemany(
                "INSERT INTO urls(id, fp, host_id, depth, url, parent) VALUES (?, ?, ?, ?, ?, ?)",
                rows,
            )
            db.executemany("INSERT INTO queue(host_id, priority, id) VALUES (?, ?, ?)", queue)
            if failed:
                db.executemany(
                    "INSERT INTO failed(id, error, priority) VALUES (?, ?, ?)", failed
                )
            db.executemany(
                "UPDATE hosts SET pending = pending + ?, total = total + ? WHERE id = ?",
                [(q, t, hosts[n][0]) for n, (q, t) in counts.items() if t],
            )
        out.failed = len(failed)
        out.new_hosts = len(missing)
        return out

    def _host_rows(
        self, db: sqlite3.Connection, names: list[str]
    ) -> dict[str, tuple[int, int, int]]:
        out: dict[str, tuple[int, int, int]] = {}
        for i in range(0, len(names), _CHUNK):
            chunk = names[i : i + _CHUNK]
            marks = ",".join("?" * len(chunk))
            for host_id, name, total, dead in db.execute(
                f"SELECT id, name, total, dead FROM hosts WHERE name IN ({marks})", chunk
            ):
                out[name] = (host_id, total, dead)
        return out

    def lease(self, max_hosts: int, per_host: int, now: float | None = None) -> list[HostBatch]:
        """See `Frontier.lease`."""
        if max_hosts < 0 or per_host < 0:
            raise ValueError("max_hosts and per_host must be >= 0")
        with self._lock:
            self._check_open()
            now = self._clock() if now is None else now
            expires = now + self.options.lease_ttl
            batches: list[HostBatch] = []
            if max_hosts == 0 or per_host == 0:
                return batches
            with self._read() as db:  # idle polling takes no write lock
                if not db.execute(_ANY_WORK, (now, now)).fetchone()[0]:
                    return batches
            with self._write() as db:
                self._reclaim(db, now)
                slots = self._slots(db)
                if slots <= 0:
                    return batches
                total = 0
                for host_id, name, pending in db.execute(_READY, (now, max_hosts)).fetchall():
                    if slots <= 0:
                        break
                    take = per_host if per_host <= slots else int(slots)
                    batch = self._lease_host(db, host_id, name, pending, take, expires)
                    batches.append(batch)
                    slots -= len(batch.urls)
                    total += len(batch.urls)
                if total:
                    db.execute(
                        "UPDATE counters SET queued = queued - ?, leased = leased + ?",
                        (total, total),
                    )
            return batches

    def _slots(self, db: sqlite3.Connection) -> float:
        """Pages that may still be leased under max_pages (inf without a limit)."""
        if self.options.max_pages is None:
            return math.inf
        done, leased = db.execute("SELECT done, leased FROM counters").fetchone()
        return float(self.options.max_pages - done - leased)

    def _lease_host(
        self,
        db: sqlite3.Connection,
        host_id: int,
        name: str,
        pending: int,
        take: int,
        expires: float,
    ) -> HostBatch:
        """Lease up to `take` queued URLs of one host (the caller updates the counters)."""
        rows = db.execute(_QUEUE, (host_id, take)).fetchall()
        if not rows:
            raise RuntimeError(f"frontier {self.path}: host {name} pending count is off")
        record = array("q")
        urls = []
        for url_id, priority, attempts, fp, depth, url, parent in rows:
            record.extend((url_id, priority, attempts, fp))
            urls.append(LeasedURL(url, fp + _WRAP if fp < 0 else fp, depth, parent, attempts))
        token = f"{host_id}-{secrets.token_hex(12)}"
        db.execute(
            "UPDATE hosts SET lease_token = ?, lease_expires = ?, lease = ? WHERE id = ?",
            (token, expires, record.tobytes(), host_id),
        )
        return HostBatch(name, token, expires, tuple(urls), pending - len(rows))

    @staticmethod
    def _host_of(token: str) -> int:
        head, sep, _ = token.partition("-")
        if not (sep and head.isdigit()):
            raise StaleLeaseError(f"lease {token!r} is not held (malformed token)")
        return int(head)

    def complete(
        self,
        token: str,
        outcomes: Sequence[Outcome],
        next_fetch_at: float | None = None,
        renew: int = 0,
    ) -> HostBatch | None:
        """See `Frontier.complete`."""
        if renew < 0:
            raise ValueError("renew must be >= 0")
        host_id = self._host_of(token)
        with self._lock:
            self._check_open()
            now = self._clock()
            with self._write() as db:
                row = db.execute(_BY_TOKEN, (host_id, token)).fetchone()
                if row is None:
                    raise StaleLeaseError(f"lease {token!r} is not held (completed or reclaimed)")
                record = array("q")
                record.frombytes(row[0])
                pending = row[1]
                old = _timing(row[2:])
                keys: dict[int, tuple[int, int]] = {}  # fp -> (priority, id)
                leased: dict[int, int] = {}  # fp -> attempts
                quads = iter(record)
                for url_id, priority, attempts, fp in zip(quads, quads, quads, quads, strict=True):
                    fp = fp + _WRAP if fp < 0 else fp
                    keys[fp] = (priority, url_id)
                    leased[fp] = attempts
                s = settle(leased, outcomes, self.options.max_attempts)
                timing = after_batch(old, outcomes, now, self.options.politeness, next_fetch_at)
                gone = [(host_id, *keys[fp]) for fp in (*s.done, *s.failed)]
                if gone:
                    db.executemany(
                        "DELETE FROM queue WHERE host_id = ? AND priority = ? AND id = ?", gone
                    )
                if s.failed:
                    why = failure_errors(outcomes)
                    db.executemany(
                        "INSERT INTO failed(id, error, priority) VALUES (?, ?, ?)",
                        [(keys[fp][1], why[fp], keys[fp][0]) for fp in s.failed],
                    )
                if s.requeued:
                    db.executemany(
                        "UPDATE queue SET attempts = ?"
                        " WHERE host_id = ? AND priority = ? AND id = ?",
                        [(a, host_id, *keys[fp]) for fp, a in s.requeued],
                    )
                failed = len(s.failed)
                left = pending - len(gone)
                if timing.dead and left:  # give up the host: fail everything it still has
                    db.execute(
                        "INSERT INTO failed(id, error, priority)"
                        " SELECT id, ?, priority FROM queue WHERE host_id = ?",
                        (death_cause(outcomes), host_id),
                    )
                    db.execute("DELETE FROM queue WHERE host_id = ?", (host_id,))
                    failed += left
                    left = 0
                db.execute(
                    "UPDATE hosts SET lease_token = NULL, lease_expires = NULL, lease = NULL,"
                    " pending = ?, next_fetch_at = ?, lease_order = ?, adaptive_delay = ?,"
                    " backoff = ?, errors = ?, dead = ? WHERE id = ?",
                    (
                        left,
                        timing.next_fetch_at,
                        self.options.lease_order(timing.next_fetch_at, left),
                        timing.adaptive_delay,
                        timing.backoff,
                        timing.errors,
                        int(timing.dead),
                        host_id,
                    ),
                )
                n = len(leased)
                db.execute(
                    "UPDATE counters SET queued = queued + ?, leased = leased - ?,"
                    " done = done + ?, failed = failed + ?, retries = retries + ?,"
                    " dead_hosts = dead_hosts + ?",
                    (
                        left - (pending - n),
                        n,
                        len(s.done),
                        failed,
                        s.retried,
                        int(timing.dead and not old.dead),
                    ),
                )
                if not (renew and left and not timing.dead and timing.next_fetch_at <= now):
                    return None
                slots = self._slots(db)
                if slots <= 0:
                    return None
                take = renew if renew <= slots else int(slots)
                name = db.execute("SELECT name FROM hosts WHERE id = ?", (host_id,)).fetchone()[0]
                batch = self._lease_host(
                    db, host_id, name, left, take, now + self.options.lease_ttl
                )
                n = len(batch.urls)
                db.execute("UPDATE counters SET queued = queued - ?, leased = leased + ?", (n, n))
                return batch

    def extend(self, token: str, until: float) -> float:
        """See `Frontier.extend`."""
        host_id = self._host_of(token)
        with self._lock:
            self._check_open()
            with self._write() as db:
                row = db.execute(
                    "UPDATE hosts SET lease_expires = max(lease_expires, ?)"
                    " WHERE id = ? AND lease_token = ? RETURNING lease_expires",
                    (until, host_id, token),
                ).fetchone()
                if row is None:
                    raise StaleLeaseError(f"lease {token!r} is not held (completed or reclaimed)")
                return float(row[0])

    def reclaim_expired(self, now: float | None = None) -> int:
        """See `Frontier.reclaim_expired`."""
        with self._lock:
            self._check_open()
            now = self._clock() if now is None else now
            with self._write() as db:
                return self._reclaim(db, now)

    def _reclaim(self, db: sqlite3.Connection, now: float) -> int:
        """Release expired leases; their URLs never left the queue, so only hosts change."""
        expired = db.execute(_EXPIRED, (now,)).fetchall()
        if not expired:
            return 0
        rest_from = min(now, self._clock())  # `now` may be +inf ("reclaim everything")
        policy = self.options.politeness
        total = 0
        updates = []
        for row in expired:
            timing = after_reclaim(_timing(row[2:]), rest_from, policy)
            updates.append((timing.next_fetch_at, timing.next_fetch_at, row[0]))
            total += row[1] // _LEASE_BYTES
        db.executemany(
            "UPDATE hosts SET lease_token = NULL, lease_expires = NULL, lease = NULL,"
            " next_fetch_at = ?, lease_order = ? WHERE id = ?",
            updates,
        )
        db.execute("UPDATE counters SET queued = queued + ?, leased = leased - ?", (total, total))
        return total

    def set_host_delay(self, host: str, crawl_delay: float | None) -> None:
        """See `Frontier.set_host_delay`."""
        if crawl_delay is not None and not crawl_delay >= 0:
            raise ValueError(f"crawl_delay must be >= 0 or None, not {crawl_delay!r}")
        with self._lock:
            self._check_open()
            now = self._clock()
            with self._write() as db:
                changed = db.execute(
                    "UPDATE hosts SET crawl_delay = ? WHERE name = ?", (crawl_delay, host)
                ).rowcount
                if not changed:
                    db.execute(
                        "INSERT INTO hosts(name, next_fetch_at, lease_order, crawl_delay)"
                        " VALUES (?, ?, ?, ?)",
                        (host, now, now, crawl_delay),
                    )
                    db.execute("UPDATE counters SET hosts = hosts + 1")

    def statistics(self) -> FrontierStats:
        """See `Frontier.statistics`. Counts are exact; duplicates of this process included."""
        with self._lock:
            self._check_open()
            now = self._clock()
            with self._read() as db:
                (queued, leased, done, failed, retries, dropped, dups, hosts, dead) = db.execute(
                    "SELECT queued, leased, done, failed, retries, dropped, duplicates, hosts,"
                    " dead_hosts FROM counters"
                ).fetchone()
                ready, next_ready = db.execute(
                    "SELECT count(*) FILTER (WHERE next_fetch_at <= ?), min(next_fetch_at)"
                    " FROM hosts INDEXED BY hosts_ready WHERE lease_token IS NULL AND pending > 0",
                    (now,),
                ).fetchone()
                leased_hosts = db.execute(
                    "SELECT count(*) FROM hosts INDEXED BY hosts_expiry"
                    " WHERE lease_token IS NOT NULL"
                ).fetchone()[0]
                parked, lowered = db.execute(
                    "SELECT parked, lowered FROM depth_counters"
                ).fetchone()
            return FrontierStats(
                queued=queued,
                leased=leased,
                done=done,
                failed=failed,
                retries=retries,
                hosts=hosts,
                ready_hosts=ready,
                leased_hosts=leased_hosts,
                dead_hosts=dead,
                dropped_by_budget=dropped + self._pending.dropped,
                duplicates_seen=dups + self._pending.duplicates,
                next_ready_at=next_ready,
                parked=parked,
                depth_lowered=lowered,
            )

    def failures(self) -> dict[str, int]:
        """See `Failures.failures` (a scan of the failed table)."""
        with self._lock:
            self._check_open()
            with self._read() as db:
                return {str(k): int(n) for k, n in db.execute(_FAILURES)}

    def requeue_failed(self, errors: Collection[str]) -> int:
        """See `Failures.requeue_failed` (a scan of the failed table: a resume's, once)."""
        wanted = sorted(set(errors))
        if not wanted:
            return 0
        with self._lock:
            self._check_open()
            now = self._clock()
            with self._write() as db:
                pick = (
                    "SELECT f.id, u.host_id, coalesce(f.priority, u.depth)"
                    " FROM failed AS f JOIN urls AS u ON u.id = f.id WHERE "
                )
                back = db.execute(pick + f"f.error IN ({_marks(wanted)})", wanted).fetchall()
                hosts = sorted({host_id for _, host_id, _ in back})
                revived: list[int] = []
                for chunk in _chunks(hosts):
                    query = f"SELECT id FROM hosts WHERE dead AND id IN ({_marks(chunk)})"
                    revived += [row[0] for row in db.execute(query, chunk)]
                if DEAD_HOST not in wanted:  # their URLs failed only because they were dead
                    for chunk in _chunks(revived):
                        query = pick + f"f.error = ? AND u.host_id IN ({_marks(chunk)})"
                        back += db.execute(query, (DEAD_HOST, *chunk)).fetchall()
                if not back:
                    return 0
                db.executemany("DELETE FROM failed WHERE id = ?", [(i,) for i, _, _ in back])
                db.executemany(
                    "INSERT INTO queue(host_id, priority, id) VALUES (?, ?, ?)",
                    [(host_id, priority, i) for i, host_id, priority in back],
                )
                added: dict[int, int] = {}
                for _, host_id, _ in back:
                    added[host_id] = added.get(host_id, 0) + 1
                for host_id, n in added.items():
                    pending, nxt = db.execute(
                        "SELECT pending + ?, min(next_fetch_at, ?) FROM hosts WHERE id = ?",
                        (n, now, host_id),
                    ).fetchone()
                    db.execute(
                        "UPDATE hosts SET pending = ?, next_fetch_at = ?, lease_order = ?,"
                        " backoff = 0, errors = 0, dead = 0 WHERE id = ?",
                        (pending, nxt, self.options.lease_order(nxt, pending), host_id),
                    )
                db.execute(
                    "UPDATE counters SET queued = queued + ?, failed = failed - ?,"
                    " dead_hosts = dead_hosts - ?",
                    (len(back), len(back), len(revived)),
                )
                return len(back)

    def top_hosts(self, limit: int, among: Iterable[str] | None = None) -> list[HostView]:
        """See `HostsView.top_hosts` (without `among`: a scan of the hosts table)."""
        with self._lock:
            self._check_open()
            with self._read() as db:
                return _top_hosts(db, limit, among, self.options.politeness)

    def close(self) -> None:
        """Flush the pending counters and close the connection (idempotent)."""
        with self._lock:
            if self._closed:
                return
            try:
                p = self._pending
                if p.duplicates or p.dropped:
                    with self._write() as db:
                        db.execute(
                            "UPDATE counters SET duplicates = duplicates + ?,"
                            " dropped = dropped + ?",
                            (p.duplicates, p.dropped),
                        )
                    self._pending = _Pending()
            finally:
                self._release_files()

    def _release_files(self) -> None:
        self._closed = True
        self._db.close()
        if self._writer_lock is not None:
            os.close(self._writer_lock)
            self._writer_lock = None

    def __enter__(self) -> SqliteFrontier:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


class SharedSqliteFrontier(SqliteFrontier):
    """A pool worker's `SqliteFrontier`, capped at its share of the hosts in play
    (`share()`: 1 / the pool's workers), as the cluster's RedisFrontier caps a cluster
    worker (`ShareCappedFrontier`, the same arithmetic: frontier/_share.py). `lease` leases
    no more than the share leaves room for; `hosts_over_share` says how many of the hosts
    this process holds are over it (a worker joined): the engine gives them back. The hosts
    in play are counted up to what the answer needs (`count_limit`: at most ~held / share
    rows of the partial indexes), so a crawl of many hosts never counts them all. Without a
    share below 1 it is a `SqliteFrontier`."""

    def __init__(
        self,
        path: str | PathLike[str],
        *,
        share: Share,
        clock: Callable[[], float] = time.time,
        busy_timeout: float = 60.0,
        cache_mib: int = 64,
        **knobs: Unpack[FrontierKnobs],
    ) -> None:
        super().__init__(path, clock=clock, busy_timeout=busy_timeout, cache_mib=cache_mib, **knobs)
        self._share = share
        self._held: set[str] = set()  # the tokens of this process's leases

    def _in_play(self, limit: int, now: float) -> tuple[int, int, int]:
        with self._lock:
            self._check_open()
            with self._read() as db:
                row = db.execute(_IN_PLAY, {"n": limit, "now": now}).fetchone()
        return int(row[0]), int(row[1]), int(row[2])

    def lease(self, max_hosts: int, per_host: int, now: float | None = None) -> list[HostBatch]:
        share = self._share()
        if share is not None and share < 1 and max_hosts > 0 and per_host > 0:
            at = self._clock() if now is None else now
            held = len(self._held)
            leases, ready, _ = self._in_play(count_limit(held + max_hosts, share), at)
            max_hosts = max(0, lease_room(max_hosts, held, leases, ready, share))
            if max_hosts == 0:
                return []
        batches = super().lease(max_hosts, per_host, now)
        self._held.update(b.token for b in batches)
        return batches

    def complete(
        self,
        token: str,
        outcomes: Sequence[Outcome],
        next_fetch_at: float | None = None,
        renew: int = 0,
    ) -> HostBatch | None:
        try:
            batch = super().complete(token, outcomes, next_fetch_at, renew)
        except StaleLeaseError:
            self._held.discard(token)
            raise
        self._held.discard(token)
        if batch is not None:
            self._held.add(batch.token)
        return batch

    def extend(self, token: str, until: float) -> float:
        try:
            return super().extend(token, until)
        except StaleLeaseError:
            self._held.discard(token)
            raise

    def hosts_over_share(self) -> int:
        """How many of the hosts this process holds are over its share now (`frontier/
        _share.hosts_over_share`); 0 without a share below 1. One bounded read."""
        share = self._share()
        held = len(self._held)
        if share is None or share >= 1 or held <= 1:
            return 0
        leases, _, waiting = self._in_play(count_limit(held, share), self._clock())
        return hosts_over_share(held, leases, waiting, share)
