"""Reading hosts of a crawl in Redis without a frontier: `read_hosts` (what a display, the
dashboard of a cluster crawl, reads given a client and the crawl's id) and `host_names`
(every host of the crawl, by a SCAN: for small crawls and tests). `RedisFrontier.top_hosts`
reads through them too. Plain reads, no script: they change nothing."""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from typing import Any, cast

from ...partition import shard_of
from .._hosts import host_view
from .._options import FrontierOptions
from .._protocol import HostView
from ._connect import RedisClient, _scan
from ._keys import TIMING_FIELDS, _s, _timing, crawl_prefix, shard_prefix

__all__ = ["host_names", "read_hosts"]

#: a host's state fields read besides its timing: URLs accepted (kept under a host budget
#: only), its leased URLs (lua/shard.lua's `lf`: entries joined by \x02)
_COUNT_FIELDS = ("tt", "lf")


def read_hosts(
    client: RedisClient, crawl: str, hosts: Iterable[str], options: FrontierOptions
) -> list[HostView]:
    """The hosts `hosts` of crawl `crawl` as its frontier (under `options`, the crawl's) holds
    them, in the order given; repeats and unknown hosts left out. Two pipelined round trips:
    HMGET of each host's state and ZRANGE of its queued priorities, then LLEN of each
    priority's list. `fetched` is None without a host budget: only under one do the shards
    count a host's URLs."""
    names = list(dict.fromkeys(hosts))
    if not names:
        return []
    prefixes = [shard_prefix(crawl, shard_of(h)) for h in names]
    pipe = client.pipeline(transaction=False)
    for h, p in zip(names, prefixes, strict=True):
        pipe.hmget(f"{p}h:{h}", [*TIMING_FIELDS, *_COUNT_FIELDS])
        pipe.zrange(f"{p}p:{h}", 0, -1)
    replies = cast(list[Any], pipe.execute())
    pipe = client.pipeline(transaction=False)
    lens: list[int] = []
    for k, (h, p) in enumerate(zip(names, prefixes, strict=True)):
        prios = replies[2 * k + 1] or []
        lens.append(len(prios))
        for pr in prios:
            pipe.llen(f"{p}q:{_s(pr)}:{h}")
    counts = cast(list[Any], pipe.execute()) if sum(lens) else []
    out: list[HostView] = []
    at = 0
    for k, h in enumerate(names):
        state = replies[2 * k]
        queued = sum(int(n) for n in counts[at : at + lens[k]])
        at += lens[k]
        if state[0] is None:  # no `nx`: a host the crawl does not know
            continue
        tt, lf = state[len(TIMING_FIELDS) :]
        leased = len(lf.split(b"\x02")) if lf else 0
        fetched: int | None = None
        if options.host_budget is not None:
            fetched = max(0, int(float(tt or 0)) - queued - leased)
        timing = _timing(state[: len(TIMING_FIELDS)])
        out.append(host_view(h, queued, leased, fetched, timing, options.politeness))
    return out


def host_names(client: RedisClient, crawl: str) -> Iterator[str]:
    """Every host of crawl `crawl` (a SCAN of all the server's keys: not for a big crawl)."""
    prefix = crawl_prefix(crawl)
    state = re.compile(re.escape(prefix.encode()) + rb"\{\d+\}:h:(.*)", re.DOTALL)
    for key in _scan(client, f"{prefix}*:h:*"):
        m = state.fullmatch(key)
        if m is not None:
            yield _s(m[1])

