"""robots.txt answers shared by every worker of a crawl: one fetch per host per crawl.

The worker holding a host's lease fetches its robots.txt and puts the outcome in the crawl's
`RobotsStore` (a `RobotsRecord`: final status, body, URL after redirects, fetch time, the error
of a fetch without an answer — not the parsed rules); any later holder, in any process or on
any machine, rebuilds the same policy from it. A record older than the policy's TTL counts as
absent: expiry is the stored fetch time's, never the backend's. Backends: `SqliteRobotsStore`
(robots.sqlite in the crawl directory), `RedisRobotsStore` (one key a host, in the host's shard
slot), `MemoryRobotsStore` (tests). A put is atomic; two holders racing after an expired lease
both put and the last wins, both answers of the same server (docs/crawler/urls-robots.md)."""

from __future__ import annotations

import math
import sqlite3
import threading
import time
from collections.abc import Collection
from dataclasses import dataclass
from os import PathLike
from pathlib import Path
from typing import Any, Final, Protocol

from .frontier.sqlite import sqlite_storage_error
from .robots import DEFAULT_TTL, ROBOTS_MAX_BYTES, UNAVAILABLE_TTL, RobotsCache, RobotsPolicy

__all__ = [
    "STORED_BODY_MAX",
    "MemoryRobotsStore",
    "RedisRobotsStore",
    "RobotsRecord",
    "RobotsStore",
    "SharedRobots",
    "SharedRobotsStats",
    "SqliteRobotsStore",
]

#: Body bytes stored: RFC 9309's 500 KiB that are parsed, plus one byte, so that a rebuilt
#: policy knows the file was longer and drops its cut last line as the first parse did.
STORED_BODY_MAX: Final = ROBOTS_MAX_BYTES + 1
#: Seconds a Redis record outlives the longest age it may be used at (a margin for clocks).
REDIS_TTL_MARGIN: Final = 3600.0


@dataclass(frozen=True, slots=True)
class RobotsRecord:
    """The outcome of fetching a host's robots.txt, as stored.

    status: the final HTTP status, None when there was no answer (refused, reset, time-out,
    DNS failure, a redirect without a usable Location); body: the final response's body (only
    kept for a 2xx, cut at STORED_BODY_MAX); final_url: the URL the body came from, after
    redirects; fetched_at: when the fetch ended, on the crawl's clock; error: the fetch's
    error key when there was no answer (`fetch/error/dns`: what the URLs held back by it are
    counted under, `RobotsPolicy.refusal`)."""

    status: int | None
    body: bytes
    final_url: str
    fetched_at: float
    error: str | None = None

    @classmethod
    def of(
        cls,
        status: int | None,
        body: bytes | None,
        final_url: str,
        fetched_at: float,
        error: str | None = None,
    ) -> RobotsRecord:
        """The record of a fetch: the body kept only for a 2xx (the only status whose body
        counts, RFC 9309 §2.3.1.1), cut at STORED_BODY_MAX; the error only without a status."""
        ok = status is not None and 200 <= status < 300
        body = body[:STORED_BODY_MAX] if body and ok else b""
        return cls(status, body, final_url, fetched_at, error if status is None else None)

    def policy(
        self,
        user_agent: str,
        *,
        ttl: float = DEFAULT_TTL,
        unavailable_ttl: float = UNAVAILABLE_TTL,
    ) -> RobotsPolicy:
        """The policy this answer gives `user_agent`, expiring `ttl` (or `unavailable_ttl`
        for a disallow-all answer) after `fetched_at`."""
        return RobotsPolicy.from_response(
            self.status,
            self.body,
            user_agent=user_agent,
            now=self.fetched_at,
            ttl=ttl,
            unavailable_ttl=unavailable_ttl,
            final_url=self.final_url,
            error=self.error,
        )


class RobotsStore(Protocol):
    """Where a crawl's workers share robots.txt answers, by host key (`urls.host_key`).

    `get` returns the last record put for the host (however old: the caller judges its age),
    or None; `put` replaces it. Both are short blocking calls, made once per host a worker
    meets (the worker's `RobotsCache` answers the rest)."""

    def get(self, host: str) -> RobotsRecord | None: ...

    def put(self, host: str, record: RobotsRecord) -> None: ...

    def close(self) -> None: ...


class MemoryRobotsStore:
    """`RobotsStore` in a dict: for one process (tests, a crawler built without a store)."""

    def __init__(self) -> None:
        self._records: dict[str, RobotsRecord] = {}

    def get(self, host: str) -> RobotsRecord | None:
        return self._records.get(host)

    def put(self, host: str, record: RobotsRecord) -> None:
        self._records[host] = record

    def close(self) -> None:
        pass


_SQLITE_SCHEMA: Final = """
CREATE TABLE IF NOT EXISTS robots (
    host TEXT PRIMARY KEY,
    status INTEGER,
    fetched_at REAL NOT NULL,
    final_url TEXT NOT NULL,
    body BLOB NOT NULL,
    error TEXT
)
"""


class SqliteRobotsStore:
    """`RobotsStore` in an SQLite file (WAL), shared by every process that opens it.

    Each call is one statement in its own transaction: a crash or SIGKILL loses at most the
    put it was making (the host's robots.txt is then fetched again). Errors of the file
    (disk full, I/O) raise `FrontierStorageError`, an OSError."""

    def __init__(self, path: str | PathLike[str], *, busy_timeout: float = 60.0) -> None:
        self.path = Path(path)
        self._lock = threading.Lock()
        try:
            self._db = sqlite3.connect(
                self.path, timeout=busy_timeout, isolation_level=None, check_same_thread=False
            )
        except sqlite3.Error as exc:
            raise sqlite_storage_error(exc, self.path, "robots store") from exc
        try:
            self._set_wal(busy_timeout)
            self._db.execute("PRAGMA synchronous=NORMAL")
            self._db.execute(_SQLITE_SCHEMA)
            self._add_error_column()
        except sqlite3.Error as exc:
            self._db.close()
            raise sqlite_storage_error(exc, self.path, "robots store") from exc

    def _set_wal(self, busy_timeout: float) -> None:
        """Switch to WAL. Processes opening a new file at once (a pool's workers starting)
        got SQLITE_BUSY at once from the switch, without the busy handler's wait (6 of 150
        openers in 50 rounds of 3 here): retried until `busy_timeout`."""
        deadline = time.monotonic() + busy_timeout
        while True:
            try:
                self._db.execute("PRAGMA journal_mode=WAL")
                return
            except sqlite3.OperationalError as exc:
                if "locked" not in str(exc) or time.monotonic() > deadline:
                    raise
                time.sleep(0.005)

    def _add_error_column(self) -> None:
        """The `error` column in a file made before it (a resumed crawl's): added once; a
        process that opened the file at the same moment may have added it first."""
        columns = {row[1] for row in self._db.execute("PRAGMA table_info(robots)")}
        if "error" in columns:
            return
        try:
            self._db.execute("ALTER TABLE robots ADD COLUMN error TEXT")
        except sqlite3.OperationalError as exc:
            if "duplicate column" not in str(exc):
                raise

    def get(self, host: str) -> RobotsRecord | None:
        try:
            with self._lock:
                row = self._db.execute(
                    "SELECT status, body, final_url, fetched_at, error FROM robots WHERE host = ?",
                    (host,),
                ).fetchone()
        except sqlite3.Error as exc:
            raise sqlite_storage_error(exc, self.path, "robots store") from exc
        if row is None:
            return None
        return RobotsRecord(row[0], bytes(row[1]), row[2], row[3], row[4])

    def put(self, host: str, record: RobotsRecord) -> None:
        try:
            with self._lock:
                self._db.execute(
                    "INSERT INTO robots (host, status, fetched_at, final_url, body, error) "
                    "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (host) DO UPDATE SET "
                    "status = excluded.status, fetched_at = excluded.fetched_at, "
                    "final_url = excluded.final_url, body = excluded.body, "
                    "error = excluded.error",
                    (
                        host, record.status, record.fetched_at, record.final_url, record.body,
                        record.error,
                    ),
                )  # fmt: skip
        except sqlite3.Error as exc:
            raise sqlite_storage_error(exc, self.path, "robots store") from exc

    def forget_unanswered(self, errors: Collection[str]) -> int:
        """Delete the records of fetches that got no answer with an error of `errors` (fetch
        error keys), so that their hosts' robots.txt is fetched again at once, not when the
        disallow-all verdict expires: what a resume does when a setting given with it (say,
        --allow-private) may fix that error. How many were deleted."""
        wanted = sorted(set(errors))
        if not wanted:
            return 0
        marks = ",".join("?" * len(wanted))
        try:
            with self._lock:
                return self._db.execute(
                    f"DELETE FROM robots WHERE status IS NULL AND error IN ({marks})", wanted
                ).rowcount
        except sqlite3.Error as exc:
            raise sqlite_storage_error(exc, self.path, "robots store") from exc

    def __len__(self) -> int:
        with self._lock:
            return int(self._db.execute("SELECT count(*) FROM robots").fetchone()[0])

    def close(self) -> None:
        with self._lock:
            self._db.close()


class RedisRobotsStore:
    """`RobotsStore` in Redis, under the crawl's namespace (see the module docstring).

    A record is one string, written by one SET (atomic on one Redis and on Redis Cluster):
    ``<status>\\n<fetched_at>\\n<final URL>\\n<body bytes>``, where ``<status>`` is the
    status's digits, or without one the fetch's error key (``fetch/error/dns``) or nothing.
    Its Redis TTL is
    `max_age` plus REDIS_TTL_MARGIN: a record nobody may use any more goes away by itself;
    whether a record may be used is decided from its fetch time, not from the TTL. Redis
    errors are raised as they are (the cluster worker retries them through outages)."""

    def __init__(self, client: Any, crawl: str, *, max_age: float = DEFAULT_TTL) -> None:
        self.client = client
        self.crawl = crawl
        self._keep_ms = math.ceil((max(max_age, UNAVAILABLE_TTL) + REDIS_TTL_MARGIN) * 1000)

    def key(self, host: str) -> str:
        """The record's key: in the host's frontier shard slot, `gs:<crawl>:{<shard>}:rb:…`."""
        from .partition import shard_of

        return f"gs:{self.crawl}:{{{shard_of(host)}}}:rb:{host}"

    def get(self, host: str) -> RobotsRecord | None:
        raw = self.client.get(self.key(host))
        if raw is None:
            return None
        status, fetched_at, final_url, body = bytes(raw).split(b"\n", 3)
        code = int(status) if status.isdigit() else None
        return RobotsRecord(
            code,
            body,
            final_url.decode("utf-8", "surrogateescape"),
            float(fetched_at),
            status.decode("utf-8", "replace") if code is None and status else None,
        )

    def put(self, host: str, record: RobotsRecord) -> None:
        if record.status is not None:
            status = str(record.status).encode()
        else:  # (an error key is never digits)
            status = (record.error or "").encode("utf-8", "replace")
        url = record.final_url.encode("utf-8", "surrogateescape")
        head = b"\n".join((status, repr(record.fetched_at).encode(), url))
        self.client.set(self.key(host), head + b"\n" + record.body, px=self._keep_ms)

    def close(self) -> None:
        pass  # the client belongs to the caller


@dataclass(frozen=True, slots=True)
class SharedRobotsStats:
    """A snapshot of a SharedRobots: the first level's, and how the store answered its
    misses (`store_hits`: a policy another worker, or an earlier run, fetched)."""

    cache_hits: int
    cache_misses: int
    store_hits: int
    store_misses: int
    store_expired: int
    puts: int


class SharedRobots:
    """A worker's robots.txt policies: its own `RobotsCache` in front of the crawl's
    `RobotsStore` (None: this worker's cache only).

    The cache keeps parsed policies, so a host leased again by the same worker costs a dict
    lookup, not a store call and a parse of its file; a host the cache lacks is read from the
    store once and parsed. Not thread-safe (one per event loop)."""

    __slots__ = (
        "_puts",
        "_store_expired",
        "_store_hits",
        "_store_misses",
        "cache",
        "store",
        "ttl",
        "unavailable_ttl",
        "user_agent",
    )

    def __init__(
        self,
        store: RobotsStore | None,
        *,
        user_agent: str,
        ttl: float = DEFAULT_TTL,
        unavailable_ttl: float = UNAVAILABLE_TTL,
        cache: RobotsCache | None = None,
    ) -> None:
        self.store = store
        self.user_agent = user_agent
        self.ttl = ttl
        self.unavailable_ttl = unavailable_ttl
        self.cache = cache if cache is not None else RobotsCache()
        self._store_hits = self._store_misses = self._store_expired = self._puts = 0

    def get(self, host: str, now: float) -> RobotsPolicy | None:
        """The policy of `host` valid at `now`, from the cache or else the store; None when
        neither has one that is still valid (then fetch robots.txt and `put` the answer)."""
        policy = self.cache.get(host, now)
        if policy is not None or self.store is None:
            return policy
        record = self.store.get(host)
        if record is None:
            self._store_misses += 1
            return None
        policy = record.policy(self.user_agent, ttl=self.ttl, unavailable_ttl=self.unavailable_ttl)
        if policy.expired(now):
            self._store_expired += 1
            return None
        self._store_hits += 1
        self.cache.put(host, policy)
        return policy

    def put(self, host: str, record: RobotsRecord) -> RobotsPolicy:
        """Keep a fresh answer for `host` (cache and store); returns its policy."""
        policy = record.policy(self.user_agent, ttl=self.ttl, unavailable_ttl=self.unavailable_ttl)
        self._puts += 1
        self.cache.put(host, policy)
        if self.store is not None:
            self.store.put(host, record)
        return policy

    def statistics(self) -> SharedRobotsStats:
        c = self.cache.statistics()
        return SharedRobotsStats(
            c.hits, c.misses, self._store_hits, self._store_misses, self._store_expired, self._puts
        )
