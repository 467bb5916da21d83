"""The reference frontier: plain dicts and heaps, no persistence.

Written to be obviously right rather than fast (a lease sorts the ready hosts: O(hosts)); the
contract tests run against it and the Hypothesis state machine uses it as the model the real
backends are compared with. Also handy for engine unit tests.
"""

from __future__ import annotations

import heapq
import math
import secrets
import threading
import time
from collections import Counter, deque
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass, field, replace
from operator import itemgetter
from typing import Unpack

from ._hosts import host_view, top
from ._options import FrontierKnobs, FrontierOptions
from ._politeness import HostTiming, after_batch, after_reclaim
from ._protocol import (
    DEAD_HOST,
    Discovered,
    FrontierError,
    FrontierStats,
    HostBatch,
    HostView,
    LeasedURL,
    Outcome,
    Outlinks,
    StaleLeaseError,
)
from ._settle import death_cause, failure_errors, settle

__all__ = ["MemoryFrontier"]


@dataclass(slots=True)
class _URL:
    item: Discovered
    seq: int
    state: str = "queued"  # queued | leased | done | failed
    attempts: int = 0
    error: str = ""  # failed: the key it failed under (Failures)


@dataclass(slots=True)
class _Host:
    name: str
    timing: HostTiming
    queue: list[tuple[int, int, int]] = field(default_factory=list)  # (priority, seq, fp) heap
    total: int = 0
    token: str | None = None
    expires: float = 0.0
    leased: list[int] = field(default_factory=list)
    order: float = 0.0  # lease order: FrontierOptions.lease_order at the last completion


class MemoryFrontier:
    """`Frontier` in memory; same constructor knobs as `SqliteFrontier` (minus storage)."""

    def __init__(
        self,
        *,
        clock: Callable[[], float] = time.time,
        **knobs: Unpack[FrontierKnobs],
    ) -> None:
        self.options = FrontierOptions.of(**knobs)
        self._clock = clock
        self._lock = threading.Lock()
        self._urls: dict[int, _URL] = {}
        self._hosts: dict[str, _Host] = {}
        self._by_token: dict[str, _Host] = {}
        self._seq = 0
        self._counts = {"queued": 0, "leased": 0, "done": 0, "failed": 0}
        self._retries = 0
        self._dropped = 0
        self._duplicates = 0
        self._parked: dict[int, Discovered] = {}  # fp -> URL seen only beyond max_depth
        # parent fp -> {child fp: smallest delta}, in the order those deltas were recorded
        self._children: dict[int, dict[int, int]] = {}
        self._lowered = 0
        self._closed = False

    def _host(self, name: str) -> _Host:
        h = self._hosts.get(name)
        if h is None:
            now = self._clock()
            h = self._hosts[name] = _Host(name, HostTiming(next_fetch_at=now), order=now)
        return h

    def _move(self, u: _URL, state: str) -> None:
        self._counts[u.state] -= 1
        self._counts[state] += 1
        u.state = state

    def _check_open(self) -> None:
        if self._closed:
            raise FrontierError("frontier is closed")

    def put_discovered(self, items: Sequence[Discovered | Outlinks]) -> int:
        """See `Frontier.put_discovered`."""
        with self._lock:
            self._check_open()
            if self.options.max_depth is not None:
                return self._put_relaxing(items, self.options.max_depth)
            added = 0
            for it in items:
                if isinstance(it, Outlinks):
                    raise ValueError("Outlinks go only to a frontier with a max_depth")
                if it.fp in self._urls:
                    self._duplicates += 1
                    continue
                added += self._accept(it)
            return added

    def _accept(self, it: Discovered) -> int:
        """Accept a URL not seen before (budget permitting); 1 if it was queued."""
        h = self._host(it.host)
        budget = self.options.host_budget
        if budget is not None and h.total >= budget:
            self._dropped += 1
            return 0
        h.total += 1
        self._seq += 1
        u = _URL(it, self._seq, "failed" if h.timing.dead else "queued")
        if h.timing.dead:
            u.error = DEAD_HOST
        self._urls[it.fp] = u
        self._counts[u.state] += 1
        if h.timing.dead:
            return 0
        heapq.heappush(h.queue, (it.priority, u.seq, it.fp))
        return 1

    def _put_relaxing(self, items: Sequence[Discovered | Outlinks], max_depth: int) -> int:
        """put_discovered with a max_depth: a shortest-path relaxation over a worklist of
        (fp, depth, offered item or None for a recorded child)."""
        work: deque[tuple[int, int, Discovered | None]] = deque()
        later: list[tuple[int, int, Discovered | None]] = []  # after the offers (see Outlinks)
        for offered in items:
            if isinstance(offered, Outlinks):
                page = self._urls.get(offered.fp)
                if page is None:
                    continue
                kids = self._children.setdefault(offered.fp, {})
                now_at = page.item.depth
                for child, delta in zip(offered.fps, offered.deltas, strict=True):
                    self._record(kids, child, delta)
                    if now_at < offered.depth:  # lowered while it was fetched
                        later.append((child, now_at + delta, None))
                continue
            d = offered.depth
            pfp = offered.parent_fp
            parent = None if pfp is None else self._urls.get(pfp)
            if pfp is not None and parent is not None:  # record the edge; never deeper
                kids = self._children.setdefault(pfp, {})  # than the parent allows
                self._record(kids, offered.fp, offered.delta)
                d = min(d, parent.item.depth + offered.delta)
            work.append((offered.fp, d, offered))
        work.extend(later)
        added = 0
        while work:
            fp, d, it = work.popleft()
            u = self._urls.get(fp)
            if u is not None:
                if it is not None:
                    self._duplicates += 1
                if d < u.item.depth:
                    self._lower(u, d)
                    kids = self._children.get(fp, {})  # smallest delta first (stable sort)
                    for child, delta in sorted(kids.items(), key=itemgetter(1)):
                        work.append((child, d + delta, None))
                continue
            parked = self._parked.get(fp)
            src = it if parked is None else parked
            if d > max_depth:
                if src is not None and (parked is None or d < parked.depth):
                    self._parked[fp] = _at_depth(src, d)
                continue
            if src is None:  # a recorded child the frontier never accepted (host budget)
                continue
            self._parked.pop(fp, None)
            added += self._accept(_at_depth(src, d))
        return added

    @staticmethod
    def _record(kids: dict[int, int], child: int, delta: int) -> None:
        """Record a page's edge to `child`: one edge a page and child, with the smallest
        delta offered, placed where that delta was first recorded (a lowered page relaxes
        its children smallest delta first, then in that order)."""
        known = kids.get(child)
        if known is None or delta < known:
            kids.pop(child, None)
            kids[child] = delta

    def _lower(self, u: _URL, depth: int) -> None:
        """Lower an accepted URL's depth (and its priority by as much; re-sorted if queued)."""
        u.item = _at_depth(u.item, depth)
        self._lowered += 1
        if u.state == "queued":
            h = self._hosts[u.item.host]
            h.queue = [(u.item.priority if f == u.item.fp else p, s, f) for p, s, f in h.queue]
            heapq.heapify(h.queue)

    def lease(self, max_hosts: int, per_host: int, now: float | None = None) -> list[HostBatch]:
        """See `Frontier.lease`."""
        if max_hosts < 0 or per_host < 0:
            raise ValueError("max_hosts and per_host must be >= 0")
        with self._lock:
            self._check_open()
            now = self._clock() if now is None else now
            if max_hosts == 0 or per_host == 0:
                return []
            self._reclaim(now)
            slots = self._slots()
            if slots <= 0:
                return []
            ready = sorted(
                (h for h in self._hosts.values() if self._ready(h, now)),
                key=lambda h: (h.order, h.name),
            )[:max_hosts]
            out = []
            for h in ready:
                if slots <= 0:
                    break
                out.append(self._lease_host(h, int(min(per_host, slots)), now))
                slots -= len(out[-1].urls)
            return out

    def _slots(self) -> float:
        """Pages that may still be leased under max_pages (inf without a limit)."""
        if self.options.max_pages is None:
            return math.inf
        return self.options.max_pages - self._counts["done"] - self._counts["leased"]

    def _lease_host(self, h: _Host, take: int, now: float) -> HostBatch:
        take = min(take, len(h.queue))
        fps = [heapq.heappop(h.queue)[2] for _ in range(take)]
        token = secrets.token_hex(16)
        h.token, h.expires, h.leased = token, now + self.options.lease_ttl, fps
        self._by_token[token] = h
        urls = []
        for fp in fps:
            u = self._urls[fp]
            self._move(u, "leased")
            urls.append(LeasedURL(u.item.url, fp, u.item.depth, u.item.parent, u.attempts))
        return HostBatch(h.name, token, h.expires, tuple(urls), len(h.queue))

    @staticmethod
    def _ready(h: _Host, now: float) -> bool:
        return h.token is None and bool(h.queue) and h.timing.next_fetch_at <= now

    def _release(self, h: _Host) -> None:
        assert h.token is not None
        del self._by_token[h.token]
        h.token, h.expires, h.leased = None, 0.0, []

    def _requeue(self, h: _Host, fp: int) -> None:
        u = self._urls[fp]
        self._move(u, "queued")
        heapq.heappush(h.queue, (u.item.priority, u.seq, fp))

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
        with self._lock:
            self._check_open()
            h = self._by_token.get(token)
            if h is None:
                raise StaleLeaseError(f"lease {token!r} is not held (completed or reclaimed)")
            leased = {fp: self._urls[fp].attempts for fp in h.leased}
            s = settle(leased, outcomes, self.options.max_attempts)
            now = self._clock()
            h.timing = after_batch(h.timing, outcomes, now, self.options.politeness, next_fetch_at)
            self._release(h)
            for fp in s.done:
                self._move(self._urls[fp], "done")
            why = failure_errors(outcomes)
            for fp in s.failed:
                self._move(self._urls[fp], "failed")
                self._urls[fp].error = why[fp]
            for fp, attempts in s.requeued:
                self._urls[fp].attempts = attempts
                self._requeue(h, fp)
            for fp in s.unfinished:
                self._requeue(h, fp)
            self._retries += s.retried
            if h.timing.dead:  # give up the host: fail everything it still has queued
                cause = death_cause(outcomes)
                for _, _, fp in h.queue:
                    self._move(self._urls[fp], "failed")
                    self._urls[fp].error = cause
                h.queue.clear()
            h.order = self.options.lease_order(h.timing.next_fetch_at, len(h.queue))
            if renew and self._ready(h, now):
                slots = self._slots()
                if slots > 0:
                    return self._lease_host(h, int(min(renew, slots)), now)
            return None

    def extend(self, token: str, until: float) -> float:
        """See `Frontier.extend`."""
        with self._lock:
            self._check_open()
            h = self._by_token.get(token)
            if h is None:
                raise StaleLeaseError(f"lease {token!r} is not held (completed or reclaimed)")
            h.expires = max(h.expires, until)
            return h.expires

    def reclaim_expired(self, now: float | None = None) -> int:
        """See `Frontier.reclaim_expired`."""
        with self._lock:
            self._check_open()
            return self._reclaim(self._clock() if now is None else now)

    def _reclaim(self, now: float) -> int:
        rest_from = min(now, self._clock())
        n = 0
        for h in [h for h in self._by_token.values() if h.expires <= now]:
            fps = h.leased
            self._release(h)
            for fp in fps:
                self._requeue(h, fp)
            h.timing = after_reclaim(h.timing, rest_from, self.options.politeness)
            h.order = h.timing.next_fetch_at
            n += len(fps)
        return n

    def set_host_delay(self, host: str, crawl_delay: float | None) -> None:
        """See `Frontier.set_host_delay`."""
        if crawl_delay is not None and not crawl_delay >= 0:
            raise ValueError(f"crawl_delay must be >= 0 or None, not {crawl_delay!r}")
        with self._lock:
            self._check_open()
            h = self._host(host)
            h.timing = replace(h.timing, crawl_delay=crawl_delay)

    def statistics(self) -> FrontierStats:
        """See `Frontier.statistics`."""
        with self._lock:
            self._check_open()
            now = self._clock()
            waiting = [
                h.timing.next_fetch_at for h in self._hosts.values() if h.token is None and h.queue
            ]
            return FrontierStats(
                queued=self._counts["queued"],
                leased=self._counts["leased"],
                done=self._counts["done"],
                failed=self._counts["failed"],
                retries=self._retries,
                hosts=len(self._hosts),
                ready_hosts=sum(1 for t in waiting if t <= now),
                leased_hosts=len(self._by_token),
                dead_hosts=sum(1 for h in self._hosts.values() if h.timing.dead),
                dropped_by_budget=self._dropped,
                duplicates_seen=self._duplicates,
                next_ready_at=min(waiting) if waiting else None,
                parked=len(self._parked),
                depth_lowered=self._lowered,
            )

    def top_hosts(self, limit: int, among: Iterable[str] | None = None) -> list[HostView]:
        """See `HostsView.top_hosts`."""
        with self._lock:
            self._check_open()
            if among is None:
                hosts = list(self._hosts.values())
            else:
                hosts = [self._hosts[n] for n in dict.fromkeys(among) if n in self._hosts]
            policy = self.options.politeness
            views = []
            for h in hosts:
                queued, leased = len(h.queue), len(h.leased)
                fetched = h.total - queued - leased
                views.append(host_view(h.name, queued, leased, fetched, h.timing, policy))
            return top(views, limit)

    def failures(self) -> dict[str, int]:
        """See `Failures.failures`."""
        with self._lock:
            self._check_open()
            counts = Counter(u.error for u in self._urls.values() if u.state == "failed")
            return dict(counts.most_common())

    def requeue_failed(self, errors: Collection[str]) -> int:
        """See `Failures.requeue_failed`."""
        wanted = set(errors)
        with self._lock:
            self._check_open()
            failed = [u for u in self._urls.values() if u.state == "failed"]
            back = [u for u in failed if u.error in wanted]
            hosts = {u.item.host for u in back}
            revived = {n for n in hosts if self._hosts[n].timing.dead}
            back += [
                u
                for u in failed
                if u.error == DEAD_HOST and u.error not in wanted and u.item.host in revived
            ]
            for u in back:
                u.attempts, u.error = 0, ""
                self._requeue(self._hosts[u.item.host], u.item.fp)
            now = self._clock()
            for name in hosts:
                h = self._hosts[name]
                nxt = min(h.timing.next_fetch_at, now)
                h.timing = replace(h.timing, next_fetch_at=nxt, backoff=0.0, errors=0, dead=False)
                h.order = self.options.lease_order(nxt, len(h.queue))
            return len(back)

    def close(self) -> None:
        """Mark closed (idempotent); later calls raise FrontierError."""
        self._closed = True


def _at_depth(it: Discovered, depth: int) -> Discovered:
    """`it` at `depth` (its priority moved by as much as its depth)."""
    if depth == it.depth:
        return it
    return replace(it, depth=depth, priority=it.priority - (it.depth - depth))
