"""Near-duplicate pages of a crawl, found by their text's 64-bit SimHash (parse/simhash.py)
against every page fingerprinted before in the crawl, by any worker.

The crawl's fingerprints are an append-only log of (fingerprint, URL) in the crawl's store
(`SqliteNearDupStore`: neardup.sqlite in the crawl directory, for an embedded crawl and a
pool; `RedisNearDupStore`: one Redis list under the crawl's keys, for a cluster). Each worker
keeps a `NearDupIndex` of that log in memory and asks it, page by page, with no I/O: Manku,
Jain and Das Sarma's block index (WWW 2007), the 64 bits cut into k+1 blocks, each block's
value a key of its own table; two fingerprints within k bits agree exactly on one block at
least (pigeonhole), so the candidates are the entries that share a block with the page, and
the Hamming distance is checked on those alone: a lookup reads k+1 table slots and their
few entries, not the whole log. `NearDups` is the worker's door: `match()` on the page path,
`exchange()` off the event loop at most every SYNC_S (the pages this worker added go to the
store, those the others added come back), `absorb()` on the loop. Two workers that meet
near-duplicates within the same SYNC_S may both keep theirs as originals: duplicates are
missed for at most that long, never invented.

Memory: in each worker ~50 bytes a page (k=3: its fingerprint, four chain links, a list slot,
the arrays' room to grow) besides its URL string, plus 1 MB of tables (2 MB in Python;
measured in tests/test_neardup.py); in the store a row of the URL and 8 bytes (docs/crawler.md,
"Near-duplicates")."""

from __future__ import annotations

import sqlite3
import time
from array import array
from collections.abc import Callable, Sequence
from os import PathLike
from pathlib import Path
from typing import Any, Final, Protocol

__all__ = [
    "SYNC_S",
    "NearDupIndex",
    "NearDupIndexReference",
    "NearDupStore",
    "NearDups",
    "RedisNearDupStore",
    "SqliteNearDupStore",
]

#: how often a worker sends its fingerprints to the store and reads the others' (seconds)
SYNC_S: Final = 0.5
_MASK64: Final = (1 << 64) - 1


class NearDupIndexReference:
    """Fingerprints and their pages' URLs, indexed by k+1 blocks of bits (`distance` k): the
    definition, in Python, that the compiled `NearDupIndex` (_neardup.pyx: a lookup and an
    add in well under a µs rather than ~4) answers the same as
    (tests/test_neardup_compiled.py).

    Each block's table is a chain per block value: `heads[value]` is the last entry added
    with it, `nexts[entry]` the one before (-1 ends a chain); blocks of at most 16 bits (k
    >= 3) keep their heads in a flat array (2**16 slots, 512 KB a table, whatever the
    crawl's size), wider ones in a dict. A page costs 8 bytes of fingerprint, 4 x (k+1)
    bytes of chain links and its URL's list slot (8) besides the URL string itself."""

    def __init__(self, distance: int = 3) -> None:
        if not 0 <= distance <= 7:
            raise ValueError(f"near-duplicate distance must be 0..7 bits, got {distance}")
        self.distance = distance
        blocks = distance + 1
        width = 64 // blocks
        self._shifts = tuple(i * width for i in range(blocks))
        widths = [64 - s if i == blocks - 1 else width for i, s in enumerate(self._shifts)]
        self._masks = tuple((1 << w) - 1 for w in widths)
        self._heads: list[Any] = [
            array("l", [-1]) * (1 << w) if w <= 16 else {} for w in widths
        ]
        self._nexts = [array("l") for _ in range(blocks)]
        self._fps = array("Q")
        self._urls: list[str] = []

    def __len__(self) -> int:
        return len(self._fps)

    def find(self, fp: int) -> str | None:
        """The URL of the first page added whose fingerprint is within `distance` bits of
        `fp`, or None."""
        fps = self._fps
        best = -1
        k = self.distance
        for heads, nexts, shift, mask in zip(
            self._heads, self._nexts, self._shifts, self._masks, strict=True
        ):
            key = (fp >> shift) & mask
            i = heads[key] if type(heads) is array else heads.get(key, -1)
            while i >= 0:  # newest first: the last match met is the earliest
                if (fps[i] ^ fp).bit_count() <= k and (best < 0 or i < best):
                    best = i
                i = nexts[i]
        return None if best < 0 else self._urls[best]

    def add(self, fp: int, url: str) -> None:
        i = len(self._fps)
        self._fps.append(fp & _MASK64)
        self._urls.append(url)
        for heads, nexts, shift, mask in zip(
            self._heads, self._nexts, self._shifts, self._masks, strict=True
        ):
            key = (fp >> shift) & mask
            if type(heads) is array:
                nexts.append(heads[key])
                heads[key] = i
            else:
                nexts.append(heads.get(key, -1))
                heads[key] = i


NearDupIndex: type[NearDupIndexReference]
try:
    from ._neardup import NearDupIndex  # type: ignore[assignment]
except ImportError:  # not built (no C compiler at install): tests/test_neardup_compiled.py fails
    NearDupIndex = NearDupIndexReference


class NearDupStore(Protocol):
    """The crawl's log of fingerprints, shared by its workers (see the module docstring)."""

    def exchange(
        self, mine: Sequence[tuple[int, str]], after: int
    ) -> tuple[list[tuple[int, str]], int]:
        """Append `mine` ((fingerprint, URL) pairs), then return the entries after position
        `after` that others appended (`mine` left out) and the position now read up to."""
        ...

    def close(self) -> None: ...


class SqliteNearDupStore:
    """`NearDupStore` in an SQLite file (WAL), shared by the processes of one machine."""

    def __init__(self, path: str | PathLike[str]) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        db = sqlite3.connect(
            self.path, timeout=60.0, check_same_thread=False, isolation_level=None
        )
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA synchronous=NORMAL")
        db.execute(
            "CREATE TABLE IF NOT EXISTS pages"
            " (id INTEGER PRIMARY KEY, fp INTEGER NOT NULL, url TEXT NOT NULL)"
        )
        self._db: sqlite3.Connection | None = db

    def exchange(
        self, mine: Sequence[tuple[int, str]], after: int
    ) -> tuple[list[tuple[int, str]], int]:
        db = self._db
        if db is None:
            raise ValueError("exchange on a closed SqliteNearDupStore")
        # one write transaction: nobody appends between our rows and our read
        db.execute("BEGIN IMMEDIATE")
        try:
            first = last = 0
            if mine:
                db.executemany(
                    "INSERT INTO pages (fp, url) VALUES (?, ?)",
                    [(_signed(fp), url) for fp, url in mine],
                )
                last = int(db.execute("SELECT max(id) FROM pages").fetchone()[0])
                first = last - len(mine) + 1  # ours are contiguous (the lock was held)
            rows = db.execute(
                "SELECT id, fp, url FROM pages WHERE id > ? AND NOT id BETWEEN ? AND ?"
                " ORDER BY id",
                (after, first, last),
            ).fetchall()
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise
        end = max(last, rows[-1][0] if rows else after)
        return [(fp & _MASK64, url) for _, fp, url in rows], end

    def close(self) -> None:
        if self._db is not None:
            self._db.close()
            self._db = None


class RedisNearDupStore:
    """`NearDupStore` in one Redis list of the crawl, `gs:<crawl>:nd`, an entry a page:
    the fingerprint's 16 hex digits, a space, the URL. One round trip an exchange."""

    def __init__(self, client: Any, crawl: str) -> None:
        self.client = client
        self.key = f"gs:{crawl}:nd"

    def exchange(
        self, mine: Sequence[tuple[int, str]], after: int
    ) -> tuple[list[tuple[int, str]], int]:
        # ours go in first, at once (RPUSH of many values is atomic: they are contiguous at
        # [end - len(mine), end)), then everything after `after` is read in the same round
        # trip; no MULTI, so it works on Redis Cluster too (one key, one slot)
        pipe = self.client.pipeline(transaction=False)
        if mine:
            pipe.rpush(self.key, *(f"{fp:016x} {url}" for fp, url in mine))
        pipe.lrange(self.key, after, -1)
        answers = pipe.execute()
        end = int(answers[0]) if mine else after
        ours = range(end - len(mine), end)
        rows = []
        position = after
        for raw in answers[-1]:
            if position not in ours:
                text = raw.decode("utf-8", "surrogateescape") if isinstance(raw, bytes) else raw
                fp, _, url = text.partition(" ")
                rows.append((int(fp, 16), url))
            position += 1
        return rows, position

    def close(self) -> None:
        pass


class NearDups:
    """One worker's near-duplicate detection: `match()` per page (in memory), `exchange()`
    with the crawl's store off the loop and `absorb()` its answer on the loop."""

    def __init__(
        self,
        store: NearDupStore | None,
        distance: int = 3,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.store = store
        self.index = NearDupIndex(distance)
        self.clock = clock
        self._pending: list[tuple[int, str]] = []
        self._read_to = 0
        self._synced_at = -SYNC_S
        self.pages = 0  # pages fingerprinted by this worker
        self.near = 0  # … found near-duplicates

    def match(self, fp: int, url: str) -> str | None:
        """The URL of a page crawled before whose fingerprint is within the distance of
        `fp` (the page at `url` is then a near-duplicate of it), else None, and the page
        is added as an original (the page itself found again is no duplicate)."""
        self.pages += 1
        found = self.index.find(fp)
        if found == url:  # the page itself, fetched again (a resumed batch)
            return None
        if found is not None:
            self.near += 1
            return found
        self.index.add(fp, url)
        if self.store is not None:
            self._pending.append((fp, url))
        return None

    def sync_due(self) -> bool:
        return self.store is not None and self.clock() - self._synced_at >= SYNC_S

    def take(self) -> tuple[list[tuple[int, str]], int]:
        """What to send now (on the loop): the pages added since, and the position read."""
        self._synced_at = self.clock()
        mine, self._pending = self._pending, []
        return mine, self._read_to

    def exchange(
        self, mine: list[tuple[int, str]], after: int
    ) -> tuple[list[tuple[int, str]], int]:
        """The store's exchange (any thread)."""
        assert self.store is not None
        return self.store.exchange(mine, after)

    def absorb(self, rows: list[tuple[int, str]], read_to: int) -> None:
        """The others' pages (on the loop)."""
        add = self.index.add
        for fp, url in rows:
            add(fp, url)
        self._read_to = max(self._read_to, read_to)

    def close(self) -> None:
        """Send what is left (a page added since the last exchange) and close the store."""
        if self.store is None:
            return
        try:
            if self._pending:
                mine, after = self.take()
                self.store.exchange(mine, after)
        finally:
            self.store.close()


def _signed(fp: int) -> int:
    """A 64-bit fingerprint as SQLite's signed INTEGER."""
    return fp - (1 << 64) if fp >= 1 << 63 else fp
