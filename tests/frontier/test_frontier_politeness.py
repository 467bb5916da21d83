"""The pure politeness core and outcome settlement: no frontier, no clock, no sleeping."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gossamer.frontier import (
    HostTiming,
    Outcome,
    PolitenessPolicy,
    Verdict,
    after_batch,
    after_reclaim,
    delay_of,
)
from gossamer.frontier._settle import settle

NOW = 5000.0
P = PolitenessPolicy(
    default_delay=1.0,
    max_crawl_delay=10.0,
    adaptive_factor=0.0,
    backoff_base=2.0,
    backoff_max=30.0,
    max_retry_after=100.0,
    max_host_errors=3,
)


def ok(status: int = 200, elapsed: float | None = None) -> Outcome:
    return Outcome("http://a/", 1, Verdict.DONE, status=status, elapsed=elapsed)


def throttled(status: int = 429, retry_after: float | None = None) -> Outcome:
    return Outcome("http://a/", 1, Verdict.RETRY, status=status, retry_after=retry_after)


def neterr(verdict: Verdict = Verdict.RETRY) -> Outcome:
    return Outcome("http://a/", 1, verdict, error="fetch/error/timeout")


# ---------------------------------------------------------------------- delay


def test_delay_is_the_largest_of_configured_robots_and_adaptive() -> None:
    assert delay_of(HostTiming(), P) == 1.0
    assert delay_of(HostTiming(crawl_delay=4.0), P) == 4.0
    assert delay_of(HostTiming(crawl_delay=0.5), P) == 1.0
    assert delay_of(HostTiming(crawl_delay=500.0), P) == 10.0  # capped
    assert delay_of(HostTiming(adaptive_delay=7.0), P) == 7.0
    assert delay_of(HostTiming(adaptive_delay=70.0), P) == 10.0  # capped
    assert delay_of(HostTiming(crawl_delay=3.0, adaptive_delay=5.0), P) == 5.0


def test_a_clean_batch_rests_the_delay() -> None:
    t = after_batch(HostTiming(crawl_delay=4.0), [ok(), ok(404)], NOW, P)
    assert t.next_fetch_at == NOW + 4.0
    assert (t.backoff, t.errors, t.dead) == (0.0, 0, False)


def test_an_empty_batch_rests_the_delay() -> None:
    assert after_batch(HostTiming(), [], NOW, P).next_fetch_at == NOW + 1.0


def test_requested_time_is_a_lower_bound_only() -> None:
    assert after_batch(HostTiming(), [ok()], NOW, P, requested=NOW + 9).next_fetch_at == NOW + 9
    assert after_batch(HostTiming(), [ok()], NOW, P, requested=NOW + 0.1).next_fetch_at == NOW + 1


# ---------------------------------------------------------------------- back-off


def test_retry_after_is_honoured_and_capped() -> None:
    t = after_batch(HostTiming(), [ok(), throttled(retry_after=42.0)], NOW, P)
    assert t.next_fetch_at == NOW + 42.0
    t = after_batch(HostTiming(), [throttled(503, retry_after=1e6)], NOW, P)
    assert t.next_fetch_at == NOW + 100.0
    t = after_batch(HostTiming(crawl_delay=8.0), [throttled(retry_after=0.0)], NOW, P)
    assert t.next_fetch_at == NOW + 8.0  # never less than the delay


def test_throttling_backs_off_exponentially_up_to_the_cap() -> None:
    t = HostTiming()
    waits = []
    for _ in range(6):
        t = after_batch(t, [throttled(503)], NOW, P)
        waits.append(t.next_fetch_at - NOW)
    assert waits == [2.0, 4.0, 8.0, 16.0, 30.0, 30.0]
    t = after_batch(t, [ok()], NOW, P)
    assert (t.backoff, t.next_fetch_at) == (0.0, NOW + 1.0)


def test_retry_after_still_climbs_the_backoff_ladder() -> None:
    t = after_batch(HostTiming(), [throttled(retry_after=5.0)], NOW, P)
    t = after_batch(t, [throttled()], NOW, P)
    assert t.next_fetch_at == NOW + 4.0


def test_other_statuses_do_not_back_off() -> None:
    t = after_batch(HostTiming(backoff=8.0), [ok(500), ok(404), ok(301)], NOW, P)
    assert (t.backoff, t.next_fetch_at) == (0.0, NOW + 1.0)


# ---------------------------------------------------------------------- network errors


def test_network_error_batches_back_off_and_count() -> None:
    t = after_batch(HostTiming(), [neterr()], NOW, P)
    assert (t.errors, t.next_fetch_at, t.dead) == (1, NOW + 2.0, False)
    t = after_batch(t, [neterr(Verdict.FAILED)], NOW, P)
    assert (t.errors, t.next_fetch_at, t.dead) == (2, NOW + 4.0, False)
    t = after_batch(t, [neterr()], NOW, P)
    assert (t.errors, t.dead) == (3, True)


def test_a_response_resets_consecutive_errors_in_order() -> None:
    t = after_batch(HostTiming(errors=2), [ok(), neterr()], NOW, P)
    assert (t.errors, t.dead) == (1, False)
    assert t.next_fetch_at == NOW + 1.0  # a response came: no back-off
    t = after_batch(HostTiming(errors=1), [neterr(), ok()], NOW, P)
    assert t.errors == 0


def test_dead_stays_dead() -> None:
    t = after_batch(HostTiming(errors=5, dead=True), [ok()], NOW, P)
    assert t.dead


def test_no_dead_hosts_when_disabled() -> None:
    p = PolitenessPolicy(max_host_errors=None)
    t = HostTiming()
    for _ in range(50):
        t = after_batch(t, [neterr()], NOW, p)
    assert not t.dead and t.errors == 50


@pytest.mark.parametrize(
    "outcome",
    [
        Outcome("u", 1, Verdict.FAILED, error="robots/disallowed"),
        Outcome("u", 1, Verdict.DONE, error="fetch/error/reset"),  # DONE: skipped on purpose
        Outcome("u", 1, Verdict.RETRY),  # no error key
        Outcome("u", 1, Verdict.RETRY, status=500, error="fetch/status/500"),
    ],
)
def test_what_is_not_a_network_error(outcome: Outcome) -> None:
    assert not outcome.network_error
    t = after_batch(HostTiming(errors=2), [outcome], NOW, P)
    assert t.errors == (0 if outcome.status else 2)
    assert not t.dead and t.backoff == 0


# ---------------------------------------------------------------------- adaptive, reclaim


def test_adaptive_delay_follows_the_last_batch() -> None:
    p = PolitenessPolicy(default_delay=0.2, adaptive_factor=3.0, max_crawl_delay=5.0)
    t = after_batch(HostTiming(), [ok(elapsed=0.1), ok(elapsed=0.3), ok()], NOW, p)
    assert t.adaptive_delay == pytest.approx(0.6)
    assert t.next_fetch_at == pytest.approx(NOW + 0.6)
    t = after_batch(t, [ok(elapsed=4.0)], NOW, p)
    assert t.adaptive_delay == 5.0
    t = after_batch(t, [ok()], NOW, p)
    assert t.adaptive_delay == 5.0


def test_reclaimed_host_rests_from_now_but_never_earlier() -> None:
    assert after_reclaim(HostTiming(next_fetch_at=0.0), NOW, P).next_fetch_at == NOW + 1.0
    assert after_reclaim(HostTiming(next_fetch_at=NOW + 50), NOW, P).next_fetch_at == NOW + 50


@pytest.mark.parametrize(
    "kw",
    [
        {"default_delay": -1.0},
        {"max_crawl_delay": math.inf},
        {"backoff_base": math.nan},
        {"max_host_errors": 0},
    ],
)
def test_policy_validation(kw: dict[str, float]) -> None:
    with pytest.raises(ValueError):
        PolitenessPolicy(**kw)  # type: ignore[arg-type]


_outcomes = st.lists(
    st.one_of(
        st.builds(ok, st.sampled_from([200, 404, 500]), st.none() | st.floats(0, 100)),
        st.builds(throttled, st.sampled_from([429, 503]), st.none() | st.floats(0, 1e9)),
        st.builds(neterr, st.sampled_from(list(Verdict))),
    ),
    max_size=6,
)


@given(
    outcomes=_outcomes,
    backoff=st.floats(0, 100),
    errors=st.integers(0, 5),
    crawl_delay=st.none() | st.floats(0, 1e6),
    requested=st.none() | st.floats(0, 1e5),
)
def test_bounds_hold_for_any_batch(
    outcomes: list[Outcome],
    backoff: float,
    errors: int,
    crawl_delay: float | None,
    requested: float | None,
) -> None:
    p = PolitenessPolicy(default_delay=0.5, adaptive_factor=1.0, max_crawl_delay=20.0)
    t = HostTiming(backoff=backoff, errors=errors, crawl_delay=crawl_delay)
    new = after_batch(t, outcomes, NOW, p, requested=requested)
    wait = new.next_fetch_at - NOW
    eps = 1e-9  # NOW + d - NOW is d only up to rounding
    assert wait >= delay_of(new, p) - eps
    assert wait <= max(p.max_crawl_delay, p.backoff_max, p.max_retry_after, (requested or 0) - NOW)
    assert 0 <= new.backoff <= max(p.backoff_max, backoff)
    if requested is not None:
        assert new.next_fetch_at >= requested


# ---------------------------------------------------------------------- settle


def _o(fp: int, verdict: Verdict) -> Outcome:
    return Outcome(f"http://a/{fp}", fp, verdict)


def test_settle_sorts_every_leased_url() -> None:
    leased = {1: 0, 2: 0, 3: 1, 4: 2, 5: 0}
    s = settle(
        leased,
        [_o(1, Verdict.DONE), _o(2, Verdict.FAILED), _o(3, Verdict.RETRY), _o(4, Verdict.RETRY)],
        max_attempts=3,
    )
    assert s.done == (1,)
    assert s.failed == (2, 4)  # 4 reached 3 attempts
    assert s.requeued == ((3, 2),)
    assert s.unfinished == (5,)
    assert s.retried == 1


def test_settle_refuses_strangers_and_repeats() -> None:
    with pytest.raises(ValueError, match="not in this batch"):
        settle({1: 0}, [_o(2, Verdict.DONE)], 3)
    with pytest.raises(ValueError, match="two outcomes"):
        settle({1: 0}, [_o(1, Verdict.DONE), _o(1, Verdict.RETRY)], 3)


def test_settle_with_one_attempt_fails_on_first_retry() -> None:
    assert settle({7: 0}, [_o(7, Verdict.RETRY)], 1).failed == (7,)
