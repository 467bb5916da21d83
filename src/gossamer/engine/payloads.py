"""Identical payloads: a worker's view of the crawl's digest → first capture map.

A page response whose payload's SHA-1 the crawl has stored whole before (any URL, any worker,
an earlier run) is written as a WARC `revisit` record with the identical-payload-digest profile
(WARC 1.1 §6.7.2), referring to that first capture, as Heritrix's deduplication does; its crawl
log line says `"dup": "identical"` and `"dup_of"`. What counts: a page fetch (not robots.txt or
a sitemap) with a 2xx status other than 206, its body whole (not truncated, no error) and at
least MIN_PAYLOAD bytes.

The crawler calls `check(result)` before handing the page to the sinks (inline with SQLite, on
the frontier's I/O thread with Redis: a round trip), the WARC and crawl-log sinks read
`verdict(result)`, and the crawler calls `recorded(result)` once they have it: a payload
stored whole is then claimed, in a buffer that `flush()` adds to the store before the frontier
counts the batch done. So a digest is never claimed for a record that was not written, and a
page the frontier counts done has its digest in the store (a resume writes no second copy). A
claim is seen by this worker at once and by the others from the flush on: two workers storing
the same payload within one batch's time may both keep it whole (never a wrong revisit)."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Final

from ..fetch import FetchResult
from ..frontier.digests import Capture, DigestStore

__all__ = ["MIN_PAYLOAD", "IdenticalPayloads", "PayloadStats", "PayloadVerdict"]

#: Payloads smaller than this are always stored whole: a revisit record's extra fields
#: (WARC-Profile, WARC-Refers-To-Target-URI and -Date: ~150 bytes and the first URI) would
#: outweigh what it saves, and an empty or tiny body (a "200 OK" placeholder) would send
#: replay to another capture for nothing. Heritrix and warcprox apply no minimum by
#: default (warcprox has --dedup-min-text-size/--dedup-min-binary-size, 0); typical HTML
#: pages (a few KB) are far above it.
MIN_PAYLOAD: Final = 256


@dataclass(frozen=True, slots=True)
class PayloadVerdict:
    """A checked payload: its SHA-1 (20 bytes) and the capture it duplicates (None: the
    first time the crawl sees it)."""

    digest: bytes
    first: Capture | None


@dataclass(frozen=True, slots=True)
class PayloadStats:
    """A snapshot: payloads checked, found identical to an earlier capture (revisits) and
    their bytes (saved), claims added to the store."""

    checked: int
    revisits: int
    bytes_saved: int
    claimed: int


class IdenticalPayloads:
    """One worker's identical-payload check over the crawl's `DigestStore` (see the module
    docstring). Not thread-safe: `check` and `flush` may run on the frontier's I/O thread,
    the rest on the loop's, never at once (the crawler awaits them)."""

    __slots__ = ("_bytes_saved", "_checked", "_claimed", "_pending", "_revisits", "_verdicts",
                 "min_payload", "store")  # fmt: skip

    def __init__(self, store: DigestStore, *, min_payload: int = MIN_PAYLOAD) -> None:
        self.store = store
        self.min_payload = min_payload
        # id(result) -> (result, its verdict), from `check` to `recorded`/`forget`: the result
        # held, so its id is not reused meanwhile
        self._verdicts: dict[int, tuple[FetchResult, PayloadVerdict]] = {}
        # claims not yet in the store, in order: digest -> first capture
        self._pending: dict[bytes, Capture] = {}
        self._checked = self._revisits = self._bytes_saved = self._claimed = 0

    def wants(self, result: FetchResult) -> bool:
        """Whether `result` is a page response whose payload is checked."""
        status = result.status
        return (
            status is not None
            and 200 <= status < 300
            and status != 206
            and not result.truncated
            and result.error is None
            and len(result.body) >= self.min_payload
        )

    def check(self, result: FetchResult) -> PayloadVerdict | None:
        """Hash `result`'s payload and look its digest up (this worker's claims, then the
        store); kept for `verdict` until `recorded`. None when it is not checked (`wants`)."""
        found = self.lookup(result)
        return None if found is None else self.settle(result, *found)

    def lookup(self, result: FetchResult) -> tuple[bytes, Capture | None] | None:
        """`result`'s payload digest and its first capture (this worker's claims, then the
        store's; None: none), without keeping a verdict; None when it is not checked."""
        if not self.wants(result):
            return None
        digest = hashlib.sha1(result.body).digest()
        first = self._pending.get(digest)
        if first is None:
            first = self.store.get(digest)
        return digest, first

    def settle(self, result: FetchResult, digest: bytes, first: Capture | None) -> PayloadVerdict:
        """Keep the verdict of a `lookup` for `verdict` until `recorded`."""
        verdict = PayloadVerdict(digest, first)
        self._verdicts[id(result)] = (result, verdict)
        self._checked += 1
        return verdict

    def unanswered(self, result: FetchResult) -> PayloadVerdict:
        """The store did not answer in time (Redis paused or unreachable): the payload is
        judged by this worker's own claims only, so it is stored whole unless this worker
        stored it first (a revisit missed, never a wrong one)."""
        digest = hashlib.sha1(result.body).digest()
        return self.settle(result, digest, self._pending.get(digest))

    def verdict(self, result: FetchResult) -> PayloadVerdict | None:
        """The verdict of `check(result)` (None: not checked)."""
        entry = self._verdicts.get(id(result))
        return entry[1] if entry is not None else None

    def recorded(self, result: FetchResult) -> None:
        """`result` is written (its sinks returned): a payload stored whole is claimed for
        the next flush, a revisit counted."""
        entry = self._verdicts.pop(id(result), None)
        if entry is None:
            return
        verdict = entry[1]
        if verdict.first is None:
            if verdict.digest not in self._pending:
                self._pending[verdict.digest] = Capture(result.url, result.started_at)
        else:
            self._revisits += 1
            self._bytes_saved += len(result.body)

    def forget(self, result: FetchResult) -> None:
        """`result` was not written (a sink failed): no claim."""
        self._verdicts.pop(id(result), None)

    def flush(self) -> None:
        """Add the claims since the last flush to the store (one call)."""
        pending = self._pending
        if not pending:
            return
        self._pending = {}  # (claims made meanwhile, on the loop's thread, go to the next)
        try:
            self.store.add(list(pending.items()))
        except BaseException:
            pending.update(self._pending)
            self._pending = pending  # kept for the next flush
            raise
        self._claimed += len(pending)

    def maintenance_due(self) -> bool:
        """Whether the store has housekeeping to do (`maintain`, off the event loop)."""
        return self.store.maintenance_due()

    def maintain(self) -> None:
        self.store.maintain()

    def statistics(self) -> PayloadStats:
        return PayloadStats(self._checked, self._revisits, self._bytes_saved, self._claimed)
