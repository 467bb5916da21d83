"""A worker's fair share of the hosts in play, as every share-capped frontier counts it (the
cluster's RedisFrontier, a pool worker's SharedSqliteFrontier): pure arithmetic on counts the
backend brings (docs/cluster.md, "Giving hosts back").

`lease_room` caps a lease: the worker's hosts stay within ceil(share x (leases out + hosts
ready)), at least one. `hosts_over_share` is what it gives back: its hosts beyond
ceil(share x (leases out + hosts with URLs queued, resting or not)), at least one kept. The
second cap is never below the first, so a worker never leases what it would give back."""

from __future__ import annotations

import math
from collections.abc import Callable

__all__ = ["Share", "count_limit", "hosts_over_share", "lease_room", "share_cap"]

#: share() -> the fraction of the hosts in play this worker may hold at once (None: any)
Share = Callable[[], float | None]


def share_cap(in_play: int, share: float) -> int:
    """The hosts a worker with `share` of the hosts in play may hold: ceil(share x in_play),
    at least one (the float's last bit aside: 4 x 0.5 is 2, not 3)."""
    return max(1, math.ceil(in_play * share - 1e-9))


def lease_room(max_hosts: int, held: int, leases: int, ready: int, share: float) -> int:
    """`max_hosts` capped so that the `held` hosts plus the new ones stay within the share of
    `leases` (leases out, every worker's) + `ready` (hosts that could be leased now)."""
    return min(max_hosts, share_cap(leases + ready, share) - held)


def hosts_over_share(held: int, leases: int, waiting: int, share: float) -> int:
    """How many of the `held` hosts are over the share of `leases` (leases out) + `waiting`
    (unleased hosts with URLs queued, resting ones too: counted out, a host given back would
    lower the cap at once and make the worker give back another)."""
    return max(0, held - share_cap(leases + waiting, share))


def count_limit(wanted: int, share: float) -> int:
    """How many hosts in play a backend needs to count at most to know whether `wanted`
    hosts fit in the share: beyond it they do (so a count stops there, never a full scan)."""
    return math.ceil(wanted / share) + 1
