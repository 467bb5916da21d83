"""The limits every frontier backend takes, validated once."""

from __future__ import annotations

import math
from dataclasses import dataclass, field, fields
from typing import Any, TypedDict, Unpack

from ._politeness import PolitenessPolicy

__all__ = ["FrontierKnobs", "FrontierOptions"]


#: `FrontierOptions.backlog_lead`'s default: 10 ms of head start per queued URL.
DEFAULT_BACKLOG_LEAD = 0.01


class FrontierKnobs(TypedDict, total=False):
    """The keyword arguments every frontier's constructor takes (`FrontierOptions.of`): the
    one list of the frontier's knobs. Each is a field of `FrontierOptions` or of its
    `PolitenessPolicy`, which hold the defaults and the checks (tests/frontier/test_options.py
    holds the three together)."""

    lease_ttl: float
    max_pages: int | None
    host_budget: int | None
    max_attempts: int
    default_delay: float
    max_crawl_delay: float
    adaptive_factor: float
    backoff_base: float
    backoff_max: float
    max_retry_after: float
    max_host_errors: int | None
    backlog_lead: float
    max_depth: int | None


#: The knobs `FrontierOptions.of` hands to `PolitenessPolicy`.
_POLITENESS_KNOBS = frozenset(f.name for f in fields(PolitenessPolicy))


@dataclass(frozen=True, slots=True)
class FrontierOptions:
    """Lease time-to-live (s), SPAWC max pages, per-host URL budget, attempts, politeness."""

    lease_ttl: float = 60.0
    max_pages: int | None = None
    host_budget: int | None = None
    max_attempts: int = 3
    politeness: PolitenessPolicy = field(default_factory=PolitenessPolicy)
    # Lease order among ready hosts: next_fetch_at minus a head start of `backlog_lead` s per
    # URL the host still has queued (when its last lease completed), at most
    # `max_backlog_lead` s. Big sites go first so a crawl does not end with one site
    # crawling alone; politeness is untouched (a host is leased only once it is ready).
    backlog_lead: float = DEFAULT_BACKLOG_LEAD
    max_backlog_lead: float = 30.0
    # The crawl's depth limit (seeds are 0): with it the frontier keeps every URL's depth the
    # shortest path found so far (parking URLs beyond it, relaxing recorded children); None:
    # depth decides nothing and no edge is recorded (the hot path of an unlimited crawl).
    max_depth: int | None = None

    @classmethod
    def of(cls, **knobs: Unpack[FrontierKnobs]) -> FrontierOptions:
        """The options from a frontier constructor's flat keywords (`FrontierKnobs`): the
        politeness ones go to `PolitenessPolicy`, the rest to these options; a knob not given
        takes the field's default. One place for every backend, and no list of knobs here:
        `FrontierKnobs` names them, the two dataclasses hold their defaults."""
        given: dict[str, Any] = dict(knobs)
        policy = {k: given.pop(k) for k in _POLITENESS_KNOBS if k in given}
        return cls(politeness=PolitenessPolicy(**policy), **given)

    def lease_order(self, next_fetch_at: float, backlog: int) -> float:
        return next_fetch_at - min(backlog * self.backlog_lead, self.max_backlog_lead)

    def __post_init__(self) -> None:
        if not (self.lease_ttl > 0 and math.isfinite(self.lease_ttl)):
            raise ValueError(f"lease_ttl must be a finite number > 0, not {self.lease_ttl!r}")
        if self.max_pages is not None and self.max_pages < 0:
            raise ValueError(f"max_pages must be >= 0 or None, not {self.max_pages}")
        if self.host_budget is not None and self.host_budget < 1:
            raise ValueError(f"host_budget must be >= 1 or None, not {self.host_budget}")
        if not (self.backlog_lead >= 0 and 0 <= self.max_backlog_lead < math.inf):
            raise ValueError("backlog_lead and max_backlog_lead must be finite numbers >= 0")
        if self.max_depth is not None and self.max_depth < 0:
            raise ValueError(f"max_depth must be >= 0 or None, not {self.max_depth}")
        if self.max_attempts < 1:
            raise ValueError(f"max_attempts must be >= 1, not {self.max_attempts}")
