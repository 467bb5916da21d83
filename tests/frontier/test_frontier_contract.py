"""The frontier contract, run against every backend (the `make` fixture, conftest.BACKENDS)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from _frontier_helpers import (
    FakeClock,
    check_sqlite_counters,
    done,
    failed,
    fp_of,
    item,
    items,
    retry,
    stats_tuple,
    url_of,
)

from gossamer.frontier import (
    DEAD_HOST,
    Discovered,
    Failures,
    Frontier,
    FrontierError,
    HostBatch,
    HostsView,
    HostView,
    Outcome,
    Outlinks,
    StaleLeaseError,
    Verdict,
)

Make = Callable[..., Frontier]
A, B, C = "a.example", "b.example", "c.example"


def urls(batch: HostBatch) -> list[str]:
    return [u.url for u in batch.urls]


def only(batches: list[HostBatch]) -> HostBatch:
    assert len(batches) == 1, batches
    return batches[0]


# ---------------------------------------------------------------------- dedupe


def test_is_a_frontier(make: Make) -> None:
    assert isinstance(make(), Frontier)


def test_put_discovered_counts_new_urls_and_dedupes(make: Make) -> None:
    f = make()
    assert f.put_discovered(items(A, 3)) == 3
    assert f.put_discovered(items(A, 5)) == 2  # 0..2 known
    assert f.put_discovered([item(B, 0), item(B, 0), item(B, 1)]) == 2  # repeat within a call
    s = f.statistics()
    assert (s.queued, s.hosts, s.duplicates_seen, s.discovered) == (7, 2, 4, 7)


def test_dedupe_is_by_fingerprint_and_forever(make: Make) -> None:
    f = make()
    f.put_discovered(items(A, 2))
    b = only(f.lease(1, 10))
    f.complete(b.token, [done(u) for u in b.urls])
    assert f.put_discovered(items(A, 2)) == 0  # done URLs stay seen
    other = Discovered("http://a.example/other", A, 0, fp_of(url_of(A, 0)))
    assert f.put_discovered([other]) == 0  # same fp: same URL as far as the frontier knows
    assert f.statistics().queued == 0


def test_empty_put_is_harmless(make: Make) -> None:
    f = make()
    assert f.put_discovered([]) == 0
    assert f.lease(5, 5) == []
    s = f.statistics()
    assert (s.discovered, s.hosts, s.next_ready_at) == (0, 0, None)


# ---------------------------------------------------------------------- lease


def test_lease_respects_per_host_and_max_hosts(make: Make) -> None:
    f = make()
    for h in (A, B, C):
        f.put_discovered(items(h, 5))
    batches = f.lease(2, 3)
    assert len(batches) == 2
    assert all(len(b.urls) == 3 for b in batches)
    assert len({b.host for b in batches}) == 2
    assert len({b.token for b in batches}) == 2
    s = f.statistics()
    assert (s.leased, s.queued, s.leased_hosts) == (6, 9, 2)
    assert [b.backlog for b in batches] == [2, 2]  # each host's URLs still queued


def test_big_backlog_is_leased_before_earlier_ready_hosts(make: Make, clock: FakeClock) -> None:
    f = make()
    f.put_discovered(items(B, 300) + items(C, 5))
    b, c = sorted(f.lease(2, 1), key=lambda x: x.host)
    assert (b.host, c.host) == (B, C)
    f.complete(c.token, [done(u) for u in c.urls])  # C ready now, 4 left
    clock.advance(1.0)
    f.complete(b.token, [done(u) for u in b.urls])  # B ready 1 s later, 299 left
    # B's head start (299 x 10 ms) outweighs the second C has been waiting
    assert [x.host for x in f.lease(1, 1)] == [B]
    assert [x.host for x in f.lease(1, 1)] == [C]


def test_ready_lease_order_ignores_the_backlog(make: Make, clock: FakeClock) -> None:
    """backlog_lead 0 (the crawl setting lease_order = "ready"): hosts go in the order they
    became ready, however much they have queued."""
    f = make(backlog_lead=0.0)
    f.put_discovered(items(B, 300) + items(C, 5))
    b, c = sorted(f.lease(2, 1), key=lambda x: x.host)
    f.complete(c.token, [done(u) for u in c.urls])  # C ready now
    clock.advance(1.0)
    f.complete(b.token, [done(u) for u in b.urls])  # B ready 1 s later
    assert [x.host for x in f.lease(1, 1)] == [C]
    assert [x.host for x in f.lease(1, 1)] == [B]


def test_backlog_counts_what_stays_queued_after_the_lease(make: Make) -> None:
    f = make()
    f.put_discovered(items(A, 25))
    b = only(f.lease(1, 20))
    assert (len(b.urls), b.backlog) == (20, 5)
    f.complete(b.token, [done(u) for u in b.urls[:15]])  # 5 unfinished go back
    b = only(f.lease(1, 20))
    assert (len(b.urls), b.backlog) == (10, 0)


def test_a_leased_host_is_not_leased_again(make: Make) -> None:
    f = make()
    f.put_discovered(items(A, 5))
    first = only(f.lease(5, 2))
    assert f.lease(5, 2) == []  # A is held, even though it has queued URLs
    f.put_discovered(items(A, 2, start=10))
    assert f.lease(5, 2) == []
    f.complete(first.token, [done(u) for u in first.urls])
    assert urls(only(f.lease(5, 2))) == [url_of(A, 2), url_of(A, 3)]


def test_urls_come_by_priority_then_fifo(make: Make) -> None:
    f = make()
    f.put_discovered(
        [
            item(A, 1, priority=2),
            item(A, 2, priority=1),
            item(A, 3, priority=2),
            item(A, 4, priority=0),
            item(A, 5, priority=1),
        ]
    )
    f.put_discovered([item(A, 6, priority=0)])
    b = only(f.lease(1, 10))
    assert urls(b) == [url_of(A, i) for i in (4, 6, 2, 5, 1, 3)]


def test_leased_url_carries_what_was_discovered(make: Make) -> None:
    f = make()
    f.put_discovered([item(A, 1, depth=3, priority=0, parent="http://a.example/")])
    (u,) = only(f.lease(1, 1)).urls
    assert (u.url, u.fp, u.depth, u.parent, u.attempts) == (
        url_of(A, 1),
        fp_of(url_of(A, 1)),
        3,
        "http://a.example/",
        0,
    )


def test_large_fingerprints_round_trip(make: Make) -> None:
    f = make()
    big = [Discovered(f"http://a.example/{i}", A, 0, (1 << 64) - 1 - i) for i in range(3)]
    small = [Discovered(f"http://a.example/s{i}", A, 0, i) for i in range(3)]
    assert f.put_discovered(big + small) == 6
    assert f.put_discovered(big + small) == 0
    b = only(f.lease(1, 10))
    assert sorted(u.fp for u in b.urls) == sorted(d.fp for d in big + small)
    f.complete(b.token, [done(u) for u in b.urls])
    assert f.statistics().done == 6


def test_new_hosts_with_equal_times_are_leased_by_name(make: Make) -> None:
    f = make()
    for h in (C, B, A):
        f.put_discovered(items(h, 3))
    assert [b.host for b in f.lease(3, 1)] == [A, B, C]


def test_ready_order_follows_next_fetch_at(make: Make, clock: FakeClock) -> None:
    f = make(default_delay=5.0)
    for h in (A, B, C):
        f.put_discovered(items(h, 3))
    held = {b.host: b for b in f.lease(3, 1)}
    for h in (C, A, B):
        f.complete(held[h].token, [done(u) for u in held[h].urls])
        clock.advance(1.0)
    assert f.lease(3, 1) == []  # all resting
    clock.advance(2.0)  # C rested 5 s, A 4 s, B 3 s
    assert [b.host for b in f.lease(3, 1)] == [C]
    clock.advance(2.0)
    assert [b.host for b in f.lease(3, 1)] == [A, B]


def test_zero_and_negative_arguments(make: Make) -> None:
    f = make()
    f.put_discovered(items(A, 2))
    assert f.lease(0, 5) == []
    assert f.lease(5, 0) == []
    with pytest.raises(ValueError):
        f.lease(-1, 5)
    assert f.statistics().queued == 2


# ---------------------------------------------------------------------- complete


def test_verdicts_are_applied(make: Make) -> None:
    f = make(max_attempts=3)
    f.put_discovered(items(A, 4))
    b = only(f.lease(1, 4))
    u0, u1, u2, u3 = b.urls
    f.complete(b.token, [done(u0), failed(u1, error="robots/disallowed"), retry(u2)])
    s = f.statistics()
    assert (s.done, s.failed, s.queued, s.leased, s.retries) == (1, 1, 2, 0, 1)
    again = only(f.lease(1, 4))
    # u2 (retried) and u3 (unfinished) are back, in their original order
    assert [(u.url, u.attempts) for u in again.urls] == [(u2.url, 1), (u3.url, 0)]


def test_retry_fails_after_max_attempts(make: Make, clock: FakeClock) -> None:
    f = make(max_attempts=3, backoff_base=1.0)
    f.put_discovered(items(A, 1))
    for attempt in range(3):
        b = only(f.lease(1, 1))
        assert b.urls[0].attempts == attempt
        f.complete(b.token, [retry(b.urls[0], status=500)])
        clock.advance(1000)
    s = f.statistics()
    assert (s.failed, s.retries, s.queued) == (1, 2, 0)
    assert f.lease(1, 1) == []


def test_unfinished_urls_go_back_without_an_attempt(make: Make) -> None:
    f = make()
    f.put_discovered(items(A, 3))
    b = only(f.lease(1, 3))
    f.complete(b.token, [done(b.urls[1])])
    again = only(f.lease(1, 3))
    assert [(u.url, u.attempts) for u in again.urls] == [(b.urls[0].url, 0), (b.urls[2].url, 0)]
    f.complete(again.token, [])  # giving everything back is allowed
    s = f.statistics()
    assert (s.done, s.queued, s.leased, s.retries) == (1, 2, 0, 0)


def test_outcome_for_a_foreign_url_is_refused_and_changes_nothing(make: Make) -> None:
    f = make()
    f.put_discovered(items(A, 2) + items(B, 1))
    b = only(f.lease(1, 5))
    before = stats_tuple(f)
    stranger = Outcome(url_of(B, 0), fp_of(url_of(B, 0)), Verdict.DONE, 200)
    with pytest.raises(ValueError):
        f.complete(b.token, [done(b.urls[0]), stranger])
    with pytest.raises(ValueError):
        f.complete(b.token, [done(b.urls[0]), failed(b.urls[0])])
    assert stats_tuple(f) == before
    f.complete(b.token, [done(u) for u in b.urls])  # the lease is still held
    assert f.statistics().done == 2


# ---------------------------------------------------------------------- fencing and expiry


def test_completing_twice_is_refused(make: Make) -> None:
    f = make()
    f.put_discovered(items(A, 2))
    b = only(f.lease(1, 2))
    f.complete(b.token, [done(b.urls[0])])
    before = stats_tuple(f)
    with pytest.raises(StaleLeaseError):
        f.complete(b.token, [done(b.urls[1])])
    with pytest.raises(StaleLeaseError):
        f.extend(b.token, 1e12)
    with pytest.raises(StaleLeaseError):
        f.complete("no-such-token", [])
    assert stats_tuple(f) == before


def test_expired_lease_is_reclaimed_and_late_ack_refused(make: Make, clock: FakeClock) -> None:
    f = make(lease_ttl=10.0, default_delay=2.0)
    f.put_discovered(items(A, 3))
    dead = only(f.lease(1, 2))
    assert dead.expires_at == clock.t + 10.0
    clock.advance(9.0)
    assert f.reclaim_expired() == 0
    clock.advance(1.0)
    assert f.reclaim_expired() == 2
    assert f.statistics().leased == 0
    assert f.lease(1, 5) == []  # the reclaimed host rests its delay first
    clock.advance(2.0)
    fresh = only(f.lease(1, 5))
    assert urls(fresh) == [url_of(A, i) for i in range(3)]
    before = stats_tuple(f)
    with pytest.raises(StaleLeaseError):
        f.complete(dead.token, [done(u) for u in dead.urls])
    assert stats_tuple(f) == before
    f.complete(fresh.token, [done(u) for u in fresh.urls])
    assert f.statistics().done == 3


def test_lease_reclaims_expired_leases_itself(make: Make, clock: FakeClock) -> None:
    f = make(lease_ttl=10.0)
    f.put_discovered(items(A, 2))
    dead = only(f.lease(1, 2))
    clock.advance(10.0)
    again = only(f.lease(1, 2))
    assert urls(again) == urls(dead) and again.token != dead.token
    with pytest.raises(StaleLeaseError):
        f.complete(dead.token, [])


def test_expired_but_unreclaimed_lease_still_completes(make: Make, clock: FakeClock) -> None:
    f = make(lease_ttl=10.0)
    f.put_discovered(items(A, 2))
    b = only(f.lease(1, 2))
    clock.advance(60.0)
    f.complete(b.token, [done(u) for u in b.urls])
    assert f.statistics().done == 2
    assert f.reclaim_expired() == 0


def test_extend_keeps_a_lease_and_never_shortens_it(make: Make, clock: FakeClock) -> None:
    f = make(lease_ttl=10.0)
    f.put_discovered(items(A, 2))
    b = only(f.lease(1, 2))
    assert f.extend(b.token, clock.t + 30.0) == clock.t + 30.0
    assert f.extend(b.token, clock.t + 1.0) == clock.t + 30.0  # no effect
    clock.advance(29.0)
    assert f.reclaim_expired() == 0
    clock.advance(1.0)
    assert f.reclaim_expired() == 2


def test_reclaim_everything_at_infinity(make: Make, clock: FakeClock) -> None:
    f = make(lease_ttl=100.0, default_delay=1.0)
    for h in (A, B):
        f.put_discovered(items(h, 2))
    assert len(f.lease(5, 5)) == 2
    assert f.reclaim_expired(float("inf")) == 4
    clock.advance(1.0)  # rested from the real `now`, not from infinity
    assert len(f.lease(5, 5)) == 2


# ---------------------------------------------------------------------- max pages


def test_max_pages_counts_done_plus_in_flight(make: Make) -> None:
    f = make(max_pages=5)
    for h in (A, B):
        f.put_discovered(items(h, 4))
    first = f.lease(5, 3)
    assert sum(len(b.urls) for b in first) == 5  # 3 + 2: never beyond max_pages
    assert f.lease(5, 3) == []
    a, b = first
    f.complete(a.token, [done(a.urls[0]), failed(a.urls[1]), retry(a.urls[2], status=500)])
    # done 1, in flight 2 (batch b): 2 slots free
    s = f.statistics()
    assert (s.published, s.done, s.leased) == (3, 1, 2)
    f.complete(b.token, [done(b.urls[0])])  # one unfinished URL frees its slot too
    s = f.statistics()
    assert (s.published, s.queued) == (2, 5)
    got = f.lease(5, 5)
    assert sum(len(x.urls) for x in got) == 3
    for x in got:
        f.complete(x.token, [done(u) for u in x.urls])
    s = f.statistics()
    assert (s.done, s.published) == (5, 5)
    assert f.lease(5, 5) == []


def test_max_pages_zero_leases_nothing(make: Make) -> None:
    f = make(max_pages=0)
    f.put_discovered(items(A, 2))
    assert f.lease(5, 5) == []


# ---------------------------------------------------------------------- host budget


def test_host_budget_drops_and_counts(make: Make) -> None:
    f = make(host_budget=3)
    assert f.put_discovered(items(A, 5)) == 3
    assert f.put_discovered(items(A, 2, start=10)) == 0
    assert f.put_discovered(items(A, 2)) == 0  # known URLs are duplicates, not drops
    assert f.put_discovered(items(B, 2)) == 2
    s = f.statistics()
    assert (s.queued, s.dropped_by_budget, s.duplicates_seen) == (5, 4, 2)
    b = only(f.lease(1, 5))
    f.complete(b.token, [done(u) for u in b.urls])
    assert f.put_discovered(items(A, 1, start=20)) == 0  # done URLs still count
    assert f.statistics().dropped_by_budget == 5


def test_host_budget_within_one_call(make: Make) -> None:
    f = make(host_budget=2)
    batch = [item(A, 0), item(A, 1), item(A, 1), item(A, 2), item(A, 2), item(B, 0)]
    assert f.put_discovered(batch) == 3
    s = f.statistics()
    assert (s.queued, s.duplicates_seen, s.dropped_by_budget) == (3, 1, 2)


# ---------------------------------------------------------------------- politeness


def _cycle(f: Frontier, outcome: Callable[..., Outcome] = done, **kw: Any) -> None:
    b = only(f.lease(1, 1))
    f.complete(b.token, [outcome(b.urls[0], **kw)])


def _ready_in(f: Frontier, clock: FakeClock) -> float | None:
    s = f.statistics()
    return None if s.next_ready_at is None else s.next_ready_at - clock.t


def test_host_rests_default_delay_after_a_batch(make: Make, clock: FakeClock) -> None:
    f = make(default_delay=3.0)
    f.put_discovered(items(A, 3))
    _cycle(f)
    assert _ready_in(f, clock) == 3.0
    clock.advance(2.9)
    assert f.lease(1, 1) == []
    assert f.statistics().ready_hosts == 0
    clock.advance(0.1)
    assert f.statistics().ready_hosts == 1
    _cycle(f)


def test_crawl_delay_is_used_and_capped(make: Make, clock: FakeClock) -> None:
    f = make(default_delay=1.0, max_crawl_delay=10.0)
    f.put_discovered(items(A, 5) + items(B, 5))
    f.set_host_delay(A, 4.0)
    f.set_host_delay(B, 100.0)
    f.set_host_delay(C, 2.0)  # a host with no URLs yet is fine
    for b in f.lease(2, 1):
        f.complete(b.token, [done(b.urls[0])])
    clock.advance(4.0)
    assert [b.host for b in f.lease(2, 1)] == [A]
    clock.advance(6.0)
    assert [b.host for b in f.lease(2, 1)] == [B]
    f.set_host_delay(C, None)
    assert f.statistics().hosts == 3


def test_callers_next_fetch_at_is_a_lower_bound(make: Make, clock: FakeClock) -> None:
    f = make(default_delay=2.0)
    f.put_discovered(items(A, 3))
    b = only(f.lease(1, 1))
    f.complete(b.token, [done(b.urls[0])], next_fetch_at=clock.t + 7.0)
    assert _ready_in(f, clock) == 7.0
    clock.advance(7.0)
    b = only(f.lease(1, 1))
    f.complete(b.token, [done(b.urls[0])], next_fetch_at=clock.t + 0.5)  # own delay is longer
    assert _ready_in(f, clock) == 2.0


def test_429_honours_retry_after(make: Make, clock: FakeClock) -> None:
    f = make(default_delay=1.0, max_retry_after=60.0)
    f.put_discovered(items(A, 3))
    _cycle(f, retry, status=429, retry_after=30.0)
    assert _ready_in(f, clock) == 30.0
    clock.advance(30.0)
    _cycle(f, retry, status=429, retry_after=3600.0)
    assert _ready_in(f, clock) == 60.0  # capped
    clock.advance(60.0)
    b = only(f.lease(1, 5))
    assert [u.attempts for u in b.urls] == [2, 0, 0]


def test_503_backs_off_exponentially_then_resets(make: Make, clock: FakeClock) -> None:
    f = make(default_delay=0.5, backoff_base=2.0, backoff_max=10.0, max_attempts=10)
    f.put_discovered(items(A, 10))
    waits = []
    for _ in range(4):
        _cycle(f, retry, status=503)
        w = _ready_in(f, clock)
        assert w is not None
        waits.append(w)
        clock.advance(w)
    assert waits == [2.0, 4.0, 8.0, 10.0]
    _cycle(f)
    assert _ready_in(f, clock) == 0.5
    clock.advance(0.5)
    _cycle(f, retry, status=503)
    assert _ready_in(f, clock) == 2.0


def test_network_errors_back_off_and_kill_a_host(make: Make, clock: FakeClock) -> None:
    f = make(max_host_errors=3, backoff_base=1.0, max_attempts=10)
    f.put_discovered(items(A, 6) + items(B, 1))
    b, other = f.lease(2, 2)
    f.complete(other.token, [done(u) for u in other.urls])
    f.complete(b.token, [retry(b.urls[0]), retry(b.urls[1])])  # 2 consecutive errors
    assert f.statistics().dead_hosts == 0
    clock.advance(1.0)
    b = only(f.lease(1, 2))
    f.complete(b.token, [retry(b.urls[0]), done(b.urls[1])])  # a response resets the count
    clock.advance(10.0)
    b = only(f.lease(1, 3))
    f.complete(b.token, [retry(b.urls[0]), retry(b.urls[1])])
    assert f.statistics().dead_hosts == 0
    clock.advance(10.0)
    b = only(f.lease(1, 1))
    f.complete(b.token, [retry(b.urls[0])])  # errors: 3 -> dead
    s = f.statistics()
    assert s.dead_hosts == 1
    assert (s.queued, s.done, s.failed) == (0, 2, 5)
    assert f.put_discovered(items(A, 2, start=100)) == 0  # recorded as failed at once
    s = f.statistics()
    assert (s.failed, s.queued) == (7, 0)
    clock.advance(1000.0)
    assert f.lease(5, 5) == []


def test_non_network_failures_do_not_count_as_host_errors(make: Make, clock: FakeClock) -> None:
    f = make(max_host_errors=1)
    f.put_discovered(items(A, 3))
    b = only(f.lease(1, 3))
    f.complete(
        b.token,
        [
            failed(b.urls[0], error="robots/disallowed"),
            done(b.urls[1], status=None, error="policy/not-html"),
            done(b.urls[2], status=404),
        ],
    )
    assert f.statistics().dead_hosts == 0


def test_adaptive_delay_from_response_times(make: Make, clock: FakeClock) -> None:
    f = make(default_delay=0.5, adaptive_factor=2.0, max_crawl_delay=5.0)
    f.put_discovered(items(A, 5))
    b = only(f.lease(1, 2))
    f.complete(b.token, [done(b.urls[0], elapsed=1.0), done(b.urls[1], elapsed=2.0)])
    assert _ready_in(f, clock) == 3.0  # 2 × mean 1.5
    clock.advance(3.0)
    _cycle(f, elapsed=10.0)
    assert _ready_in(f, clock) == 5.0  # capped by max_crawl_delay
    clock.advance(5.0)
    _cycle(f)  # no timing: the adaptive delay stays
    assert _ready_in(f, clock) == 5.0


def test_statistics_snapshot(make: Make, clock: FakeClock) -> None:
    f = make(default_delay=5.0)
    f.put_discovered(items(A, 2) + items(B, 2) + items(C, 2))
    held = f.lease(1, 2)
    s = f.statistics()
    assert (s.hosts, s.ready_hosts, s.leased_hosts, s.next_ready_at) == (3, 2, 1, clock.t)
    f.complete(held[0].token, [done(u) for u in held[0].urls])
    f.lease(2, 2)
    s = f.statistics()
    assert (s.ready_hosts, s.leased_hosts, s.next_ready_at) == (0, 2, None)


# ------------------------------------------------------------ hosts, as a display reads them


def hosts_of(f: Frontier, limit: int = 100, among: list[str] | None = None) -> list[HostView]:
    assert isinstance(f, HostsView)
    return f.top_hosts(limit, among)


def test_top_hosts_count_and_order_the_hosts(make: Make, clock: FakeClock) -> None:
    f = make(default_delay=1.0, host_budget=100)
    f.put_discovered(items(A, 5) + items(B, 3) + items(C, 1))
    a = only(f.lease(1, 2))  # new hosts go by name
    f.complete(a.token, [done(u) for u in a.urls])
    b = only(f.lease(1, 2))  # A rests: B
    assert (a.host, b.host) == (A, B)
    top = hosts_of(f)
    assert [v.host for v in top] == [A, B, C]  # A and B have 3 URLs left: A fetched more
    va, vb, vc = top
    assert va == HostView(A, queued=3, leased=0, fetched=2, errors=0, dead=False,
                          next_fetch_at=clock.t + 1.0, crawl_delay=None, delay=1.0,
                          backoff=0.0)  # fmt: skip
    assert (vb.queued, vb.leased, vb.fetched, vb.next_fetch_at) == (1, 2, 0, clock.t)
    assert (vc.queued, vc.leased, vc.fetched) == (1, 0, 0)
    assert [v.state(clock.t) for v in top] == ["waiting", "leased", "ready"]
    assert va.state(clock.t + 1.0) == "ready"
    assert hosts_of(f, 2) == top[:2] and hosts_of(f, 0) == []
    assert hosts_of(f, 10, [C, "unknown.example", A, C]) == [va, vc]
    f.complete(b.token, [done(u) for u in b.urls])
    clock.advance(1.0)
    c = only(f.lease(1, 1))  # C, ready the longest
    f.complete(c.token, [done(c.urls[0])])
    (vc,) = hosts_of(f, 10, [C])
    assert (c.host, vc.queued, vc.leased, vc.fetched, vc.state(clock.t)) == (C, 0, 0, 1, "done")


def test_top_hosts_fetched_is_counted_or_none(make: Make, backend: Any) -> None:
    f = make()  # no host budget: Redis does not count a host's URLs
    f.put_discovered(items(A, 3))
    a = only(f.lease(1, 2))
    f.complete(a.token, [done(u) for u in a.urls])
    (va,) = hosts_of(f)
    assert (va.queued, va.leased) == (1, 0)
    assert va.fetched == (None if backend.name.startswith("redis") else 2)


def test_top_hosts_show_the_crawl_delay_capped(make: Make, clock: FakeClock) -> None:
    f = make(default_delay=1.0, max_crawl_delay=30.0, lease_ttl=60.0)
    f.put_discovered(items(A, 3))
    f.set_host_delay(A, 3600.0)
    f.set_host_delay(B, 0.5)  # below the crawl's delay; a host with no URLs yet
    va, vb = hosts_of(f)
    assert (va.host, va.crawl_delay, va.delay, va.rest) == (A, 3600.0, 30.0, 30.0)
    assert (vb.host, vb.crawl_delay, vb.delay, vb.queued) == (B, 0.5, 1.0, 0)
    assert vb.state(clock.t) == "done"
    _cycle(f)  # the rest after a batch: the capped Crawl-delay
    assert hosts_of(f, 1)[0].next_fetch_at == clock.t + 30.0
    clock.advance(30.0)
    only(f.lease(1, 1))
    clock.advance(61.0)  # the lease expires: reclaimed, the host rests its capped delay
    assert f.reclaim_expired() == 1
    va = hosts_of(f, 1)[0]
    assert (va.next_fetch_at, va.queued, va.leased) == (clock.t + 30.0, 2, 0)


def test_top_hosts_show_back_off_errors_and_death(make: Make, clock: FakeClock) -> None:
    f = make(default_delay=0.5, backoff_base=2.0, max_host_errors=2, max_attempts=10)
    f.put_discovered(items(A, 4))
    b = only(f.lease(1, 1))
    f.complete(b.token, [retry(b.urls[0])])
    va = hosts_of(f)[0]
    assert (va.errors, va.backoff, va.delay, va.rest, va.dead) == (1, 2.0, 0.5, 2.0, False)
    assert va.next_fetch_at == clock.t + 2.0 and va.state(clock.t) == "waiting"
    clock.advance(2.0)
    b = only(f.lease(1, 1))
    f.complete(b.token, [retry(b.urls[0])])  # a second error in a row: dead
    va = hosts_of(f)[0]
    assert (va.errors, va.dead, va.queued, va.leased, va.state(clock.t)) == (2, True, 0, 0, "dead")


# ---------------------------------------------------------------------- lifecycle, threads


# ------------------------------------------------ failed URLs, and their second chance (resume)

#: the backends implementing `Failures` (the embedded ones: a cluster crawl is not resumed)
FAILURES_BACKENDS = pytest.mark.parametrize("backend", ["memory", "sqlite"], indirect=True)


def failures_of(f: Frontier) -> Failures:
    assert isinstance(f, Failures)
    return f


@FAILURES_BACKENDS
def test_failures_count_the_failed_urls_by_their_error(make: Make, clock: FakeClock) -> None:
    f = make(max_attempts=2, backoff_base=1.0)
    f.put_discovered(items(A, 5))
    b = only(f.lease(1, 5))
    u0, u1, u2, u3, u4 = b.urls
    blocked = "robots/unreachable/blocked-address"
    f.complete(
        b.token,
        [
            failed(u0, error=blocked),
            failed(u1, error=blocked),
            failed(u2),  # no error key
            retry(u3, error="fetch/error/connect"),
            done(u4),
        ],
    )
    assert failures_of(f).failures() == {blocked: 2, "": 1}
    clock.advance(1000)
    b = only(f.lease(1, 5))
    f.complete(b.token, [retry(b.urls[0], error="fetch/error/connect")])  # its last attempt
    assert failures_of(f).failures() == {blocked: 2, "": 1, "fetch/error/connect": 1}
    assert f.statistics().failed == 4


@FAILURES_BACKENDS
def test_requeue_failed_brings_back_only_the_errors_asked_for(
    make: Make, clock: FakeClock
) -> None:
    f = make(max_attempts=2)
    f.put_discovered([*items(A, 3), item(A, 3, depth=2)])
    b = only(f.lease(1, 4))
    u0, u1, u2, u3 = b.urls
    f.complete(
        b.token,
        [
            failed(u0, error="robots/unreachable/blocked-address"),
            failed(u1, error="robots/disallowed"),
            done(u2),
            failed(u3, error="fetch/error/blocked-address"),
        ],
    )
    clock.advance(1000)
    fails = failures_of(f)
    assert fails.requeue_failed([]) == 0
    assert fails.requeue_failed(["fetch/error/timeout"]) == 0
    wanted = ["robots/unreachable/blocked-address", "fetch/error/blocked-address"]
    assert fails.requeue_failed(wanted) == 2
    s = f.statistics()
    assert (s.queued, s.failed, s.done, s.leased) == (2, 1, 1, 0)
    assert fails.failures() == {"robots/disallowed": 1}
    assert f.put_discovered([item(A, 0), item(A, 3)]) == 0  # still known: no duplicate
    again = only(f.lease(1, 4))  # as never tried, by their priority (depth 0, then 2)
    assert [(u.url, u.depth, u.attempts) for u in again.urls] == [
        (u0.url, 0, 0),
        (u3.url, 2, 0),
    ]
    f.complete(again.token, [done(u) for u in again.urls])
    assert fails.requeue_failed(wanted) == 0
    s = f.statistics()
    assert (s.queued, s.failed, s.done) == (0, 1, 3)


@FAILURES_BACKENDS
def test_requeue_failed_revives_a_dead_host_and_what_it_failed(
    make: Make, clock: FakeClock
) -> None:
    f = make(max_host_errors=2, backoff_base=10.0, max_attempts=5)
    f.put_discovered(items(A, 4))
    for _ in range(2):  # two consecutive network errors: dead, its queue failed with them
        b = only(f.lease(1, 1))
        f.complete(b.token, [retry(b.urls[0], error="fetch/error/connect")])
        clock.advance(100)
    assert f.statistics().dead_hosts == 1
    assert f.put_discovered(items(A, 2, start=10)) == 0  # failed at once: A is dead
    assert failures_of(f).failures() == {"fetch/error/connect": 4, DEAD_HOST: 2}
    assert failures_of(f).requeue_failed(["fetch/error/timeout"]) == 0  # not why it died
    assert failures_of(f).requeue_failed(["fetch/error/connect"]) == 6
    s = f.statistics()
    assert (s.dead_hosts, s.failed, s.queued) == (0, 0, 6)
    # alive, no back-off, ready at once, and taking new URLs again
    assert f.put_discovered(items(A, 1, start=20)) == 1
    (view,) = hosts_of(f, among=[A])
    assert (view.dead, view.errors, view.backoff, view.state(clock.t)) == (
        False,
        0,
        0.0,
        "ready",
    )
    again = only(f.lease(1, 10))
    assert len(again.urls) == 7
    assert all(u.attempts == 0 for u in again.urls)


@FAILURES_BACKENDS
def test_requeue_failed_of_dead_host_urls_alone_revives_the_host(make: Make) -> None:
    f = make(max_host_errors=1, max_attempts=1)
    f.put_discovered(items(A, 1))
    b = only(f.lease(1, 1))
    f.complete(b.token, [retry(b.urls[0], error="fetch/error/dns")])
    f.put_discovered(items(A, 2, start=5))
    assert failures_of(f).requeue_failed([DEAD_HOST]) == 2
    s = f.statistics()
    assert (s.dead_hosts, s.failed, s.queued) == (0, 1, 2)


@pytest.mark.parametrize("backend", ["sqlite"], indirect=True)  # (the persistent ones)
def test_failures_survive_a_reopen(make: Make, tmp_path: Path) -> None:
    store = tmp_path / "failures.sqlite"
    f = make(path=store)
    f.put_discovered(items(A, 2))
    b = only(f.lease(1, 2))
    f.complete(b.token, [failed(u, error="fetch/error/proxy") for u in b.urls])
    f.close()
    g = make(path=store)
    assert failures_of(g).failures() == {"fetch/error/proxy": 2}
    assert failures_of(g).requeue_failed(["fetch/error/proxy"]) == 2
    g.close()
    check_sqlite_counters(store)
    h = make(path=store)
    assert failures_of(h).failures() == {}
    assert only(h.lease(1, 5)).urls[0].attempts == 0


def test_closed_frontier_refuses_calls(make: Make) -> None:
    f = make()
    f.close()
    f.close()
    with pytest.raises(FrontierError):
        f.put_discovered(items(A, 1))
    with pytest.raises(FrontierError):
        f.statistics()


def test_threads_never_share_a_url(make: Make) -> None:
    f = make(clock=lambda: 0.0)
    hosts = [f"h{i}.example" for i in range(20)]
    for h in hosts:
        f.put_discovered(items(h, 30))
    leased: list[list[int]] = [[] for _ in range(4)]
    errors: list[BaseException] = []

    deadline = time.monotonic() + 30.0  # a bug must fail the test, not hang it

    def worker(k: int) -> None:
        try:
            while time.monotonic() < deadline:
                batches = f.lease(3, 4, now=0.0)
                if not batches:
                    if f.statistics().queued == 0:
                        return
                    continue
                for b in batches:
                    leased[k].extend(u.fp for u in b.urls)
                    f.put_discovered([item(b.host, 1000 + u.fp % 7) for u in b.urls])
                    f.complete(b.token, [done(u) for u in b.urls])
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert not errors
    assert time.monotonic() < deadline, "the workers did not finish"
    every = [fp for lst in leased for fp in lst]
    assert len(every) == len(set(every))
    s = f.statistics()
    assert s.done == len(every) == s.discovered and s.queued == s.leased == 0


# ---------------------------------------------------------------------- renewal


def test_renew_hands_a_ready_host_straight_back(make: Make) -> None:
    f = make()
    f.put_discovered(items(A, 7) + items(B, 2))
    a = only(f.lease(1, 3))
    assert a.host == A
    again = f.complete(a.token, [done(u) for u in a.urls], renew=3)
    assert again is not None and again.host == A and again.token != a.token
    assert urls(again) == [url_of(A, i) for i in range(3, 6)]  # FIFO continues
    assert again.backlog == 1
    s = f.statistics()
    assert (s.done, s.leased, s.queued, s.leased_hosts) == (3, 3, 3, 1)
    with pytest.raises(StaleLeaseError):  # the old token is spent
        f.complete(a.token, [])
    # the renewed lease is an ordinary lease: completing it settles and releases the host
    assert f.complete(again.token, [done(u) for u in again.urls]) is None
    assert {b.host for b in f.lease(5, 5)} == {A, B}


def test_renew_without_urls_left_releases_the_host(make: Make) -> None:
    f = make()
    f.put_discovered(items(A, 2))
    a = only(f.lease(1, 5))
    assert f.complete(a.token, [done(u) for u in a.urls], renew=5) is None
    s = f.statistics()
    assert (s.done, s.leased, s.leased_hosts) == (2, 0, 0)


def test_renew_never_skips_a_hosts_rest(make: Make, clock: FakeClock) -> None:
    f = make(default_delay=2.0)
    f.put_discovered(items(A, 4))
    a = only(f.lease(1, 2))
    assert f.complete(a.token, [done(u) for u in a.urls], renew=2) is None
    assert _ready_in(f, clock) == 2.0
    g = make(default_delay=0.0)
    g.put_discovered(items(A, 4))
    b = only(g.lease(1, 2))
    # the caller's own next_fetch_at (e.g. the last request's end + a Crawl-delay) counts too
    assert g.complete(b.token, [done(u) for u in b.urls], clock.t + 1.0, renew=2) is None
    # a 429 backs the host off: no renewal either
    clock.advance(1.0)
    c = only(g.lease(1, 2))
    assert g.complete(c.token, [retry(c.urls[0], status=429), done(c.urls[1])], renew=2) is None


def test_renew_respects_max_pages(make: Make) -> None:
    f = make(max_pages=5)
    f.put_discovered(items(A, 10))
    a = only(f.lease(1, 3))
    again = f.complete(a.token, [done(u) for u in a.urls], renew=3)
    assert again is not None and len(again.urls) == 2  # 3 done + 2 in flight = 5
    assert f.complete(again.token, [done(u) for u in again.urls], renew=3) is None
    assert f.statistics().done == 5


def test_renew_stops_at_a_dead_host(make: Make, clock: FakeClock) -> None:
    f = make(max_host_errors=1)
    f.put_discovered(items(A, 4))
    a = only(f.lease(1, 1))
    err = Outcome(a.urls[0].url, a.urls[0].fp, Verdict.RETRY, error="fetch/error/connect")
    assert f.complete(a.token, [err], renew=2) is None
    assert f.statistics().dead_hosts == 1


def test_negative_renew_is_refused_and_changes_nothing(make: Make) -> None:
    f = make()
    f.put_discovered(items(A, 3))
    a = only(f.lease(1, 1))
    with pytest.raises(ValueError):
        f.complete(a.token, [done(a.urls[0])], renew=-1)
    assert f.complete(a.token, [done(a.urls[0])]) is None


# ---------------------------------------------------------------------- depth (max_depth)
# With a max_depth the frontier keeps each URL's depth the shortest path found so far: URLs
# beyond it are parked, a smaller depth lowers a known URL's, and the children recorded for a
# lowered URL (offers naming it as parent_fp) are relaxed in turn (docs/crawler/frontier.md).


def link(
    host: str, i: int, depth: int, parent: Discovered | None = None, delta: int = 1
) -> Discovered:
    """URL i of `host` found at `depth` on `parent` (an edge adding `delta`)."""
    u = url_of(host, i)
    return Discovered(
        u,
        host,
        depth,
        fp_of(u),
        depth,
        None if parent is None else parent.url,
        None if parent is None else parent.fp,
        delta,
    )


def fetch_all(
    f: Frontier, outlinks: dict[str, list[Discovered | Outlinks]] | None = None
) -> dict[str, int]:
    """Lease and complete (DONE) everything ready, putting each page's `outlinks` before its
    batch completes as the engine does; returns url -> depth of what was leased."""
    got: dict[str, int] = {}
    while batches := f.lease(10, 10):
        for b in batches:
            for u in b.urls:
                got[u.url] = u.depth
                if outlinks and u.url in outlinks:
                    f.put_discovered(outlinks[u.url])
            f.complete(b.token, [done(u) for u in b.urls])
    return got


def test_depth_of_a_queued_url_is_lowered(make: Make) -> None:
    f = make(max_depth=5)
    assert f.put_discovered([link(A, 0, 3), link(A, 1, 2)]) == 2
    assert f.put_discovered([link(A, 0, 1)]) == 0  # known: lowered, not added
    s = f.statistics()
    assert (s.queued, s.discovered, s.depth_lowered, s.duplicates_seen) == (2, 2, 1, 1)
    assert f.put_discovered([link(A, 0, 4)]) == 0  # deeper: changes nothing
    assert fetch_all(f) == {url_of(A, 0): 1, url_of(A, 1): 2}
    assert f.statistics().depth_lowered == 1


def test_lowered_queued_url_moves_up_its_queue(make: Make, backend: Any) -> None:
    """Priority moves with depth (the engine's priority is the depth). Redis keeps a lowered
    URL where it is in its host's queue (only its depth changes): see docs/crawler/frontier.md."""
    if backend.name.startswith("redis"):
        pytest.skip("Redis lowers a queued URL's depth, not its place in the queue")
    f = make(max_depth=5)
    f.put_discovered([link(A, 0, 3), link(A, 1, 2)])
    f.put_discovered([link(A, 0, 1)])
    b = only(f.lease(1, 1))
    assert [(u.url, u.depth) for u in b.urls] == [(url_of(A, 0), 1)]


def test_url_beyond_max_depth_is_parked_then_queued_when_found_closer(make: Make) -> None:
    f = make(max_depth=1)
    assert f.put_discovered([link(A, 0, 0), link(B, 1, 2), link(B, 2, 3)]) == 1
    s = f.statistics()
    assert (s.queued, s.discovered, s.parked, s.duplicates_seen) == (1, 1, 2, 0)
    assert f.put_discovered([link(B, 1, 5)]) == 0  # parked again, deeper: still parked
    assert fetch_all(f) == {url_of(A, 0): 0}
    assert f.put_discovered([link(B, 1, 1)]) == 1  # found within max_depth: queued
    s = f.statistics()
    assert (s.queued, s.discovered, s.parked) == (1, 2, 1)
    assert fetch_all(f) == {url_of(B, 1): 1}
    assert f.statistics().parked == 1  # B2 was never found closer


def test_children_of_a_done_url_are_relaxed(make: Make) -> None:
    """P was fetched at depth 2 (its child C at 3, its grandchild D at 4: parked); P found at
    depth 0 lowers C to 1 (already fetched) and unparks D at 2."""
    f = make(max_depth=3)
    p = link(A, 0, 2)
    c = link(B, 0, 3, parent=p)
    d = link(C, 0, 4, parent=c)
    f.put_discovered([p])
    assert fetch_all(f, {p.url: [c], c.url: [d]}) == {p.url: 2, c.url: 3}
    s = f.statistics()
    assert (s.done, s.parked, s.depth_lowered) == (2, 1, 0)
    assert f.put_discovered([link(A, 0, 0)]) == 1  # D queued
    s = f.statistics()
    assert (s.queued, s.parked, s.depth_lowered) == (1, 0, 2)
    assert fetch_all(f) == {d.url: 2}  # P and C are not fetched again


def test_children_of_a_leased_url_follow_its_lowered_depth(make: Make) -> None:
    """P is lowered while leased: children put afterwards with P's old depth + 1 are capped
    by P's depth now (the engine only knows the depth P was leased at)."""
    f = make(max_depth=2)
    f.put_discovered([link(A, 0, 2)])
    b = only(f.lease(1, 1))
    p = link(A, 0, 2)
    assert f.put_discovered([link(A, 0, 0)]) == 0  # lowered while leased
    assert f.put_discovered([link(B, 0, 3, parent=p)]) == 1  # 0 + 1, not 3: queued
    f.complete(b.token, [done(b.urls[0])])
    assert fetch_all(f) == {url_of(B, 0): 1}
    assert f.statistics().parked == 0


def test_redirect_and_canonical_edges_add_no_depth(make: Make) -> None:
    f = make(max_depth=1)
    p = link(A, 0, 1)
    r = link(B, 0, 1, parent=p, delta=0)  # a redirect target: P's depth
    k = link(C, 0, 2, parent=p)  # a link: one deeper, parked
    f.put_discovered([p])
    assert fetch_all(f, {p.url: [r, k]}) == {p.url: 1, r.url: 1}
    assert f.statistics().parked == 1
    r2 = link(B, 1, 2, parent=r)  # R's own link, one deeper than R: parked
    f.put_discovered([r2])
    assert f.statistics().parked == 2
    # P at 0: R (its redirect) at 0 + 0, then R's link and P's link at 1: both unparked
    assert f.put_discovered([link(A, 0, 0)]) == 2
    assert fetch_all(f) == {k.url: 1, r2.url: 1}
    s = f.statistics()
    assert (s.parked, s.depth_lowered) == (0, 2)


def test_parked_urls_take_no_max_pages_slot(make: Make) -> None:
    f = make(max_depth=0, max_pages=2)
    seed = link(A, 0, 0)
    f.put_discovered([seed] + [link(B, i, 1, parent=seed) for i in range(5)])
    s = f.statistics()
    assert (s.queued, s.parked, s.published) == (1, 5, 0)
    assert fetch_all(f) == {seed.url: 0}
    assert f.put_discovered([link(B, 0, 0), link(B, 1, 0)]) == 2
    assert len(fetch_all(f)) == 1  # max_pages: 1 done + 1 = 2
    s = f.statistics()
    assert (s.done, s.queued, s.parked, s.published) == (2, 1, 3, 2)


def test_reopened_store_keeps_parked_and_relaxed_state(
    backend: Any, make: Make, tmp_path: Path
) -> None:
    if not backend.persistent:
        pytest.skip("not persistent")
    store = tmp_path / "depth.sqlite"  # (for Redis: names the crawl)
    f = make(path=store, max_depth=2)
    p = link(A, 0, 2)
    c = link(B, 0, 3, parent=p)
    f.put_discovered([p, link(C, 0, 9)])
    assert fetch_all(f, {p.url: [c]}) == {p.url: 2}
    f.put_discovered([link(A, 1, 2)])
    f.put_discovered([link(A, 1, 1)])  # lowered before the restart
    f.close()
    g = make(path=store, max_depth=2)
    s = g.statistics()
    assert (s.parked, s.depth_lowered, s.queued, s.done) == (2, 1, 1, 1)
    assert g.put_discovered([link(A, 0, 1)]) == 1  # P's recorded child comes back at 2
    assert fetch_all(g) == {url_of(A, 1): 1, c.url: 2}
    assert g.statistics().parked == 1


def edges_only(page: Discovered, depth: int, *children: tuple[Discovered, int]) -> Outlinks:
    """`page`'s links to `children` (each with its delta) as edges only, the page fetched at
    `depth` (what the engine sends for links it offered before)."""
    return Outlinks(
        page.url,
        page.fp,
        depth,
        [c.fp for c, _ in children],
        [c.host for c, _ in children],
        [delta for _, delta in children],
    )


def test_outlinks_children_are_relaxed_when_the_page_is_lowered(make: Make) -> None:
    """C was offered by another page; P, fetched at 2, links it too (an edge only). P found
    at 0 lowers C through that edge to 1, and C's parked child D to 2 (queued)."""
    f = make(max_depth=3)
    p, c = link(A, 0, 2), link(B, 0, 3)
    d = link(C, 0, 4, parent=c)
    f.put_discovered([p, c])
    assert fetch_all(f, {p.url: [edges_only(p, 2, (c, 1))], c.url: [d]}) == {p.url: 2, c.url: 3}
    assert (f.statistics().parked, f.statistics().duplicates_seen) == (1, 0)
    assert f.put_discovered([link(A, 0, 0)]) == 1  # D unparked
    s = f.statistics()
    assert (s.queued, s.parked, s.depth_lowered) == (1, 0, 2)
    assert fetch_all(f) == {d.url: 2}


def test_outlinks_of_a_page_lowered_while_fetched_are_relaxed_at_once(make: Make) -> None:
    """The engine computed P's children from the depth P was leased at (2); P is at 0 by the
    time its links come, so its edge-only children are relaxed in the same call."""
    f = make(max_depth=2)
    p, c = link(A, 0, 2), link(B, 0, 3)
    f.put_discovered([p, c])  # C parked
    b = only(f.lease(1, 1))
    assert f.put_discovered([link(A, 0, 0)]) == 0  # lowered while leased
    assert f.put_discovered([edges_only(p, 2, (c, 1))]) == 1  # C at 0 + 1: queued
    f.complete(b.token, [done(b.urls[0])])
    assert fetch_all(f) == {c.url: 1}
    assert f.statistics().parked == 0


def test_outlinks_apply_after_the_offers_of_their_call(make: Make) -> None:
    """An edge-only child may be new to the frontier when another batch of the same call
    offers it: the offer is applied first, then the edge relaxes it."""
    f = make(max_depth=2)
    p = link(A, 0, 2)
    f.put_discovered([p])
    b = only(f.lease(1, 1))
    f.put_discovered([link(A, 0, 0)])
    c = link(B, 0, 3)  # offered by another page of the call, at 3
    assert f.put_discovered([edges_only(p, 2, (c, 1)), c]) == 1  # at 0 + 1, not parked at 3
    f.complete(b.token, [done(b.urls[0])])
    assert fetch_all(f) == {c.url: 1}


def test_outlinks_of_a_page_not_accepted_record_nothing(make: Make) -> None:
    f = make(max_depth=3)
    p, c = link(A, 0, 2), link(B, 0, 3)
    f.put_discovered([c])
    assert f.put_discovered([edges_only(p, 2, (c, 1))]) == 0  # P unknown: no edge
    f.put_discovered([link(A, 0, 0)])  # P accepted at 0: C stays at 3
    assert fetch_all(f) == {p.url: 0, c.url: 3}
    assert f.statistics().depth_lowered == 0


def test_redirect_edges_among_outlinks_add_no_depth(make: Make) -> None:
    f = make(max_depth=2)
    p, r, k = link(A, 0, 2), link(B, 0, 2), link(C, 0, 3)
    f.put_discovered([p, r, k])  # K parked
    assert fetch_all(f, {p.url: [edges_only(p, 2, (r, 0), (k, 1))]}) == {p.url: 2, r.url: 2}
    assert f.put_discovered([link(A, 0, 0)]) == 1  # R at 0 + 0, K at 0 + 1: queued
    assert fetch_all(f) == {k.url: 1}
    assert f.statistics().depth_lowered == 2


# A page may reach one URL by several edges: a link and its canonical or redirect, the same
# link offered again, an edge-only record after an offer. The frontier keeps one edge a page
# and child, the smallest delta, and a lowered page relaxes each child once, smallest delta
# first (docs/crawler/frontier.md, "Depth is the shortest path"): `depth_lowered` then counts
# the same on every backend, however a backend packs its edges.


@pytest.mark.parametrize("second", ["same put", "later put", "edges only"])
def test_a_child_reached_by_two_edges_of_one_page_takes_the_smaller_delta(
    make: Make, second: str
) -> None:
    """P (at 2) links to C (delta 1: C at 3, parked; the same link twice) and names C as its
    canonical (delta 0). P found at 0 brings C to 0 + 0 in one step: P's smaller edge, not
    1 (its link) and then 0. (Hypothesis's falsifying example of the SQLite depth machine:
    SQLite relaxed both edges, the link first, and counted one lowering more than the model;
    Redis kept the first edge of a put, the link, and relaxed C to 1.)"""
    f = make(max_depth=2)
    p = link(A, 0, 2)
    c_link, c_canonical = link(B, 0, 3, parent=p), link(B, 0, 2, parent=p, delta=0)
    f.put_discovered([p])
    if second == "same put":
        assert f.put_discovered([c_link, c_link, c_canonical]) == 1
    elif second == "later put":
        assert f.put_discovered([c_link, c_link]) == 0  # parked
        assert f.put_discovered([c_canonical]) == 1
    else:
        assert f.put_discovered([c_link, c_link]) == 0  # parked
        assert f.put_discovered([edges_only(p, 2, (c_canonical, 0))]) == 0  # an edge only
    # P at 0: C lowered from 2 to 0 (once), or with an edge only unparked at 0 (queued)
    unparked = second == "edges only"
    assert f.put_discovered([link(A, 0, 0)]) == unparked
    s = f.statistics()
    assert (s.queued, s.parked, s.depth_lowered) == (2, 0, 1 if unparked else 2)
    assert fetch_all(f) == {p.url: 0, c_link.url: 0}


def test_depth_machine_example(make: Make) -> None:
    """The falsifying example Hypothesis found for the SQLite depth machine
    (test_frontier_machine.py), step by step: A1's edges to B1 are a link (an offer) and
    an edge-only record adding 0. A1 found at 0 lowers B1 once, to 0, as the model does
    (SQLite lowered it to 1, then to 0, and counted 3). The five identical offers of A0
    (naming itself as parent, not yet accepted: no edge) are as found, not needed."""
    f = make(max_depth=2)
    a1, a0 = link(A, 1, 1), link(A, 0, 0)
    b1 = link(B, 1, 2, parent=a1)
    assert f.put_discovered([a1]) == 1
    assert f.put_discovered([link(A, 0, 0, parent=a0, delta=0)] * 5 + [b1]) == 2
    assert f.put_discovered([edges_only(a1, 0, (b1, 0))]) == 0  # A1 is at 1: no relaxation
    assert f.put_discovered([link(A, 1, 0)]) == 0
    assert f.statistics().depth_lowered == 2  # A1 and B1, once each
    assert fetch_all(f) == {a0.url: 0, a1.url: 0, b1.url: 0}

@pytest.mark.parametrize("link_first", [False, True], ids=["redirect-first", "link-first"])
def test_children_are_relaxed_smallest_delta_first(make: Make, link_first: bool) -> None:
    """P's children: Q by a redirect (delta 0), R by a link (delta 1); Q and R both redirect
    to Z. P found at 0 relaxes Q before R whichever edge was recorded first, so Z is lowered
    once (through Q, to 0), not through R to 1 and then through Q to 0: the count does not
    depend on the order the edges were found in, nor on how a backend stores them."""
    f = make(max_depth=3)
    p = link(A, 0, 2)
    q, r = link(A, 1, 2, parent=p, delta=0), link(A, 2, 3, parent=p)
    f.put_discovered([p])
    assert f.put_discovered([r, q] if link_first else [q, r]) == 2
    z_by_q, z_by_r = link(A, 3, 2, parent=q, delta=0), link(A, 3, 3, parent=r, delta=0)
    assert f.put_discovered([z_by_q, z_by_r]) == 1  # Z at 2
    assert f.put_discovered([link(A, 0, 0)]) == 0
    assert f.statistics().depth_lowered == 4  # P, Q, R and Z, each once
    assert fetch_all(f) == {p.url: 0, q.url: 0, r.url: 1, z_by_q.url: 0}


def test_without_max_depth_the_first_depth_is_kept_and_nothing_parks(make: Make) -> None:
    f = make()
    p = link(A, 0, 0)
    f.put_discovered([p, link(B, 0, 7, parent=p)])
    f.put_discovered([link(B, 0, 1, parent=p)])
    s = f.statistics()
    assert (s.queued, s.parked, s.depth_lowered) == (2, 0, 0)
    assert fetch_all(f) == {p.url: 0, url_of(B, 0): 7}
