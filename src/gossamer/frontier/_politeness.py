"""When may a host be fetched again: pure functions of (host timing, outcomes, now, policy).

No clock is read here: callers pass `now`, so every rule is testable without sleeping. A host
rests `host_delay` after a batch (the one Python copy of the rule; its Lua twin is `host_delay`
in redis/lua/shard.lua): the largest of the configured delay, its robots.txt Crawl-delay and
its adaptive delay, both capped by `max_crawl_delay` (KSpider's bucket, then TIMEWAIT); 429 or
503, or a batch of network errors with no response at all, backs it off (Retry-After, else
exponentially); enough consecutive network errors make it dead. Each rule and its caps:
docs/crawler/frontier.md, "Politeness"."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

from ._protocol import Outcome

__all__ = [
    "HostTiming",
    "PolitenessPolicy",
    "after_batch",
    "after_reclaim",
    "delay_of",
    "host_delay",
]

THROTTLE_STATUSES = frozenset({429, 503})


@dataclass(frozen=True, slots=True)
class PolitenessPolicy:
    """The politeness knobs of one crawl (seconds; all ≥ 0)."""

    default_delay: float = 0.0
    max_crawl_delay: float = 30.0
    adaptive_factor: float = 0.0
    backoff_base: float = 1.0
    backoff_max: float = 300.0
    max_retry_after: float = 600.0
    max_host_errors: int | None = 10

    def __post_init__(self) -> None:
        for name in (
            "default_delay",
            "max_crawl_delay",
            "adaptive_factor",
            "backoff_base",
            "backoff_max",
            "max_retry_after",
        ):
            value = getattr(self, name)
            if not (value >= 0 and math.isfinite(value)):
                raise ValueError(f"{name} must be a finite number >= 0, not {value!r}")
        if self.max_host_errors is not None and self.max_host_errors < 1:
            raise ValueError(f"max_host_errors must be >= 1 or None, not {self.max_host_errors}")


@dataclass(frozen=True, slots=True)
class HostTiming:
    """The persisted politeness state of one host.

    `backoff` is the current exponential back-off step (0 when none); `errors` the consecutive
    network errors; `crawl_delay` the raw robots.txt value (capped when used).
    """

    next_fetch_at: float = 0.0
    crawl_delay: float | None = None
    adaptive_delay: float = 0.0
    backoff: float = 0.0
    errors: int = 0
    dead: bool = False


def host_delay(
    default_delay: float,
    crawl_delay: float | None,
    max_crawl_delay: float,
    adaptive_delay: float = 0.0,
) -> float:
    """The rest between two batches (and two requests) of a host, back-off aside: the largest
    of the crawl's configured delay, the host's robots.txt Crawl-delay (None: none) and its
    adaptive delay, the last two capped by `max_crawl_delay`."""
    delay = default_delay
    if crawl_delay is not None:
        delay = max(delay, min(crawl_delay, max_crawl_delay))
    return max(delay, min(adaptive_delay, max_crawl_delay))


def delay_of(timing: HostTiming, policy: PolitenessPolicy) -> float:
    """The rest between two batches of this host, back-off aside (`host_delay`)."""
    return host_delay(
        policy.default_delay, timing.crawl_delay, policy.max_crawl_delay, timing.adaptive_delay
    )


def _next_backoff(current: float, policy: PolitenessPolicy) -> float:
    return min(max(2.0 * current, policy.backoff_base), policy.backoff_max)


def after_batch(
    timing: HostTiming,
    outcomes: Sequence[Outcome],
    now: float,
    policy: PolitenessPolicy,
    requested: float | None = None,
) -> HostTiming:
    """The host's timing once a batch with these outcomes (in fetch order) completed at `now`.

    `requested` is the caller's lower bound for the next fetch (e.g. its own delay after the
    last response).
    """
    errors = timing.errors
    responses = 0
    network_errors = 0
    throttled = False
    retry_after: float | None = None
    elapsed_sum = 0.0
    elapsed_n = 0
    for o in outcomes:
        if o.status is not None:
            responses += 1
            errors = 0
            if o.status in THROTTLE_STATUSES:
                throttled = True
                if o.retry_after is not None and o.retry_after >= 0:
                    retry_after = max(retry_after or 0.0, o.retry_after)
        elif o.network_error:
            network_errors += 1
            errors += 1
        if o.elapsed is not None and o.elapsed >= 0:
            elapsed_sum += o.elapsed
            elapsed_n += 1

    adaptive = timing.adaptive_delay
    if elapsed_n:
        adaptive = min(policy.adaptive_factor * elapsed_sum / elapsed_n, policy.max_crawl_delay)

    if throttled:
        backoff = _next_backoff(timing.backoff, policy)
        wait = min(retry_after, policy.max_retry_after) if retry_after is not None else backoff
    elif network_errors and not responses:
        backoff = _next_backoff(timing.backoff, policy)
        wait = backoff
    else:
        backoff = 0.0
        wait = 0.0

    dead = timing.dead or (policy.max_host_errors is not None and errors >= policy.max_host_errors)
    delay = host_delay(policy.default_delay, timing.crawl_delay, policy.max_crawl_delay, adaptive)
    next_at = now + max(delay, wait)
    if requested is not None and requested > next_at:
        next_at = requested
    return HostTiming(next_at, timing.crawl_delay, adaptive, backoff, errors, dead)


def after_reclaim(timing: HostTiming, now: float, policy: PolitenessPolicy) -> HostTiming:
    """The host's timing when its expired lease is reclaimed at `now`.

    The dead holder may have fetched until the last moment, so the host rests its delay.
    """
    next_at = max(timing.next_fetch_at, now + delay_of(timing, policy))
    return replace(timing, next_fetch_at=next_at)
