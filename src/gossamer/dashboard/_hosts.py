"""The dashboard's top hosts (`top_hosts` in /api/status): the hosts with the most URLs
queued, then the most fetched (docs/dashboard.md, "Top hosts").

An embedded crawl: one read-only query on the SQLite frontier's `hosts` table, a scan (no
index orders hosts by queue length, and the frontier's hot path should not pay for one), so
the source reads it at most every TOP_HOSTS_EVERY_S. A cluster crawl: never a scan of Redis;
the candidates are the hosts the live workers are crawling now (their heartbeats), each read
from its shard's keys in two pipelined round trips."""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Final, cast

__all__ = [
    "CLUSTER_CANDIDATES",
    "TOP_HOSTS",
    "TOP_HOSTS_EVERY_S",
    "cluster_top_hosts",
    "sqlite_top_hosts",
]

#: hosts shown
TOP_HOSTS: Final = 20
#: the least time between two reads of an embedded crawl's top hosts: 10,000 hosts (105,000
#: URLs) cost 1.0-1.5 ms a query on this machine, a 2-core machine shared with other test
#: runs (bench/bench_dashboard.py --hosts 10000), a quarter of a status read after 1,500 new
#: log lines; read at most every 2 s rather than at every 0.5 s status read: 0.05 % of a core
TOP_HOSTS_EVERY_S: Final = 2.0
#: hosts of a cluster crawl looked at at most (the live workers' current hosts)
CLUSTER_CANDIDATES: Final = 100

_TOP_SQL = (
    "SELECT name, pending, total, errors, dead, lease_token IS NOT NULL, next_fetch_at,"
    " crawl_delay, adaptive_delay, backoff FROM hosts"
    " ORDER BY pending DESC, total - pending DESC, name LIMIT ?"
)


def _state(dead: bool, leased: bool, queued: int, next_fetch_at: float | None, now: float) -> str:
    if dead:
        return "dead"
    if leased:
        return "leased"
    if queued <= 0:
        return "done"
    if next_fetch_at is not None and next_fetch_at > now:
        return "waiting"
    return "ready"


def _delay(*delays: Any) -> float:
    """The host's gap between two requests: the largest of the crawl's --delay (the
    caller's first value) and the host's Crawl-delay, adaptive delay and back-off
    (frontier/_politeness.py)."""
    values = [float(d) for d in delays if d is not None and d != ""]
    return round(max(values, default=0.0), 3)


def sqlite_top_hosts(
    path: Path, limit: int = TOP_HOSTS, *, base_delay: float = 0.0
) -> list[dict[str, Any]] | None:
    """The embedded frontier's top hosts (None: no frontier yet). `queued` counts the URLs
    leased too (the frontier's `pending` until their batch completes); `fetched` is accepted
    minus queued (done or failed); `errors` the host's consecutive fetch errors."""
    if not path.is_file():
        return None
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=1.0)
    try:
        rows = db.execute(_TOP_SQL, (limit,)).fetchall()
    finally:
        db.close()
    now = time.time()
    return [
        {
            "host": name,
            "queued": int(pending),
            "fetched": max(0, int(total) - int(pending)),
            "errors": int(errors),
            "delay_s": _delay(base_delay, cd, ad, bo),
            "state": _state(bool(dead), bool(leased), int(pending), nx, now),
        }
        for name, pending, total, errors, dead, leased, nx, cd, ad, bo in rows
    ]


def _text(v: Any) -> str:
    return v.decode() if isinstance(v, bytes) else str(v)


def cluster_top_hosts(
    client: Any,
    crawl: str,
    hosts: Iterable[str],
    now: float,
    limit: int = TOP_HOSTS,
    *,
    base_delay: float = 0.0,
) -> list[dict[str, Any]]:
    """The top hosts among `hosts` (the live workers' current ones) of the cluster crawl
    `crawl`, read from their shards: HMGET of the host's state and ZRANGE of its queued
    priorities, then LLEN of each priority's list (two pipelined round trips). `queued`
    counts the URLs in its lists (its leased ones are out of them); `fetched` is accepted
    minus queued and leased where the shard counts a host's URLs accepted (`tt`: only under
    a host budget, `host_budget`), else null: nothing else in Redis counts them."""
    from ..partition import shard_of

    names = list(dict.fromkeys(hosts))[:CLUSTER_CANDIDATES]
    if not names:
        return []
    prefixes = [f"gs:{crawl}:{{{shard_of(h)}}}:" for h in names]
    pipe = client.pipeline(transaction=False)
    for h, p in zip(names, prefixes, strict=True):
        pipe.hmget(f"{p}h:{h}", "tt", "er", "dd", "tk", "nx", "cd", "ad", "bo", "lf")
        pipe.zrange(f"{p}p:{h}", 0, -1)
    replies = cast(list[Any], pipe.execute())
    pipe = client.pipeline(transaction=False)
    lens: list[int] = []
    for k, (h, p) in enumerate(zip(names, prefixes, strict=True)):
        prios = replies[2 * k + 1] or []
        lens.append(len(prios))
        for pr in prios:
            pipe.llen(f"{p}q:{_text(pr)}:{h}")
    counts = cast(list[Any], pipe.execute()) if sum(lens) else []
    out: list[dict[str, Any]] = []
    at = 0
    for k, h in enumerate(names):
        tt, er, dd, tk, nx, cd, ad, bo, lf = (
            _text(v) if v is not None else None for v in replies[2 * k]
        )
        queued = sum(int(n) for n in counts[at : at + lens[k]])
        at += lens[k]
        leased_urls = len(lf.split("\x02")) if lf else 0
        accepted = int(float(tt)) if tt else 0  # kept only under a host budget
        out.append(
            {
                "host": h,
                "queued": queued,
                "fetched": max(0, accepted - queued - leased_urls) if accepted else None,
                "errors": int(float(er or 0)),
                "delay_s": _delay(base_delay, cd, ad, bo),
                "state": _state(
                    dd not in (None, "0", ""), bool(tk), queued + leased_urls,
                    float(nx) if nx else None, now,
                ),
            }
        )  # fmt: skip
    out.sort(key=lambda r: (-r["queued"], -(r["fetched"] or 0), r["host"]))
    return out[:limit]
