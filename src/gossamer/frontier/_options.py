"""The limits every frontier backend takes, validated once."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from ._politeness import PolitenessPolicy

__all__ = ["FrontierOptions"]


@dataclass(frozen=True, slots=True)
class FrontierOptions:
    """Lease time-to-live (s), SPAWC max pages, per-host URL budget, attempts, politeness."""

    lease_ttl: float = 60.0
    max_pages: int | None = None
    host_budget: int | None = None
    max_attempts: int = 3
    politeness: PolitenessPolicy = field(default_factory=PolitenessPolicy)

    def __post_init__(self) -> None:
        if not (self.lease_ttl > 0 and math.isfinite(self.lease_ttl)):
            raise ValueError(f"lease_ttl must be a finite number > 0, not {self.lease_ttl!r}")
        if self.max_pages is not None and self.max_pages < 0:
            raise ValueError(f"max_pages must be >= 0 or None, not {self.max_pages}")
        if self.host_budget is not None and self.host_budget < 1:
            raise ValueError(f"host_budget must be >= 1 or None, not {self.host_budget}")
        if self.max_attempts < 1:
            raise ValueError(f"max_attempts must be >= 1, not {self.max_attempts}")
