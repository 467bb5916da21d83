"""What every backend's `top_hosts` shares: a `HostView` made from the backend's counts and
the host's `HostTiming` (its delay by `_politeness.delay_of`, so a display shows the rest the
frontier applies), and the order of the top hosts (`top`; SqliteFrontier's scan orders the
same way in SQL)."""

from __future__ import annotations

import heapq
from collections.abc import Iterable

from ._politeness import HostTiming, PolitenessPolicy, delay_of
from ._protocol import HostView

__all__ = ["host_view", "top", "top_order"]


def host_view(
    host: str,
    queued: int,
    leased: int,
    fetched: int | None,
    timing: HostTiming,
    policy: PolitenessPolicy,
) -> HostView:
    """The view of `host` with these counts (see `HostView`) and this timing."""
    return HostView(
        host=host,
        queued=queued,
        leased=leased,
        fetched=fetched,
        errors=timing.errors,
        dead=timing.dead,
        next_fetch_at=timing.next_fetch_at,
        crawl_delay=timing.crawl_delay,
        delay=delay_of(timing, policy),
        backoff=timing.backoff,
    )


def top_order(view: HostView) -> tuple[int, int, str]:
    """The top hosts' order: most URLs not settled, then most fetched, then the name."""
    return (-(view.queued + view.leased), -(view.fetched or 0), view.host)


def top(views: Iterable[HostView], limit: int) -> list[HostView]:
    """The first `limit` of `views` in `top_order`."""
    return heapq.nsmallest(max(0, limit), views, key=top_order)
