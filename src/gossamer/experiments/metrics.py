"""Figures every experiment reports: load balance, partition checks, error searching.

These are the measuring instruments, shared by the partition-function experiments and the
crawl experiments (which pass the URLs each worker really fetched to `error_searching`).
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class LoadStats:
    """Balance of a load vector (URLs per node, phase or crawler). `std` is the population
    standard deviation (the hash-URL paper's formula 2), `cv` = std / mean."""

    loads: tuple[int, ...]
    total: int
    mean: float
    max: int
    min: int
    max_over_mean: float
    std: float
    cv: float

    def to_dict(self) -> dict[str, Any]:
        return {
            "loads": list(self.loads),
            "total": self.total,
            "mean": self.mean,
            "max": self.max,
            "min": self.min,
            "max_over_mean": self.max_over_mean,
            "std": self.std,
            "cv": self.cv,
        }


def load_stats(loads: Sequence[int]) -> LoadStats:
    """Statistics of `loads` (at least one bin; an all-zero vector has cv 0)."""
    if not loads:
        raise ValueError("load_stats needs at least one bin")
    total = sum(loads)
    mean = total / len(loads)
    std = statistics.pstdev(loads) if len(loads) > 1 else 0.0
    return LoadStats(
        loads=tuple(loads),
        total=total,
        mean=mean,
        max=max(loads),
        min=min(loads),
        max_over_mean=max(loads) / mean if mean else 1.0,
        std=std,
        cv=std / mean if mean else 0.0,
    )


@dataclass(frozen=True, slots=True)
class PartitionCheck:
    """Whether per-member acceptance sets partition a universe of `size` items 0..size-1:
    `unassigned` items no member accepts, `multiply_assigned` items two or more accept."""

    size: int
    unassigned: int
    multiply_assigned: int

    @property
    def ok(self) -> bool:
        """Total and disjoint."""
        return self.unassigned == 0 and self.multiply_assigned == 0

    def to_dict(self) -> dict[str, Any]:
        return {
            "size": self.size,
            "unassigned": self.unassigned,
            "multiply_assigned": self.multiply_assigned,
            "total_and_disjoint": self.ok,
        }


def check_partition(
    accepted: Sequence[Sequence[int] | frozenset[int]], size: int
) -> PartitionCheck:
    """Check that the members' accepted item sets cover 0..size-1 exactly once each
    (items outside the range count as multiply assigned: they are errors too)."""
    seen = [0] * size
    stray = 0
    for items in accepted:
        for i in items:
            if 0 <= i < size:
                seen[i] += 1
            else:
                stray += 1
    return PartitionCheck(
        size=size,
        unassigned=seen.count(0),
        multiply_assigned=sum(1 for c in seen if c > 1) + stray,
    )


@dataclass(frozen=True, slots=True)
class ErrorSearching:
    """Pages fetched by more than one crawler (the hash-URL paper's "error searching").

    `fetches` counts (worker, URL) pairs after removing a worker's own repeats (a retry by
    the same worker is not a second crawler); `duplicated` is the number of URLs two or more
    workers fetched and `extra` the fetches beyond the first of each URL."""

    workers: int
    fetches: int
    distinct: int
    duplicated: int
    extra: int

    @property
    def overlap(self) -> float:
        """Cho & Garcia-Molina's overlap (N − I) / I over these fetches (0 when none)."""
        return self.extra / self.distinct if self.distinct else 0.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "workers": self.workers,
            "fetches": self.fetches,
            "distinct": self.distinct,
            "duplicated": self.duplicated,
            "extra": self.extra,
            "overlap": self.overlap,
        }


def error_searching(fetched: Mapping[str, Iterable[str]]) -> ErrorSearching:
    """Error searching from per-worker URL sets: `fetched` maps a worker id to the (canonical)
    URLs it fetched — from a crawl's logs or audit, or a partition's acceptance sets."""
    seen: set[str] = set()
    duplicated: set[str] = set()
    fetches = 0
    for urls in fetched.values():
        mine = set(urls)
        fetches += len(mine)
        duplicated |= mine & seen
        seen |= mine
    return ErrorSearching(
        workers=len(fetched),
        fetches=fetches,
        distinct=len(seen),
        duplicated=len(duplicated),
        extra=fetches - len(seen),
    )
