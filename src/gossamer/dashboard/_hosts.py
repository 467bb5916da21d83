"""The dashboard's top hosts (`top_hosts` in /api/status): the hosts with the most URLs
queued, then the most fetched (docs/dashboard.md, "Top hosts"), made of the frontier's own
reads of its hosts (`HostView`s), never of its tables or keys: `delay_s` is the host's rest as
the frontier applies it (its Crawl-delay capped by `max_crawl_delay`, or its back-off).

An embedded crawl: `frontier.sqlite.read_top_hosts`, a scan, so read at most every
TOP_HOSTS_EVERY_S. A cluster crawl: never a scan of Redis; the candidates are the hosts the
live workers are crawling now (their heartbeats), read by `frontier.redis.read_hosts`."""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, Final, TypeVar

from pydantic import BaseModel, ValidationError

from ..config import FrontierSettings, PolitenessSettings
from ..frontier import FrontierOptions, HostView
from ..frontier.sqlite import read_top_hosts

__all__ = [
    "CLUSTER_CANDIDATES",
    "TOP_HOSTS",
    "TOP_HOSTS_EVERY_S",
    "cluster_top_hosts",
    "crawl_options",
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
#: the frontier's options when the crawl's settings are not known
_DEFAULT_OPTIONS: Final = FrontierOptions()
_G = TypeVar("_G", bound=BaseModel)


def _group(model: type[_G], settings: Mapping[str, Any]) -> _G:
    """The settings group `model` from flat stored settings (its defaults when not valid)."""
    given = {k: v for k, v in settings.items() if k in model.model_fields}
    try:
        return model.model_validate(given)
    except ValidationError:
        return model.model_validate({})


def crawl_options(settings: Mapping[str, Any]) -> FrontierOptions:
    """The frontier options of a crawl that its hosts' read needs (politeness, host budget),
    from its stored settings (crawl.json, or the cluster registry's record: flat names)."""
    knobs = _group(PolitenessSettings, settings).knobs()
    knobs["host_budget"] = _group(FrontierSettings, settings).host_budget
    return FrontierOptions.of(**knobs)


def _row(view: HostView, queued: int, now: float) -> dict[str, Any]:
    return {
        "host": view.host,
        "queued": queued,
        "fetched": view.fetched,
        "errors": view.errors,
        "delay_s": round(view.rest, 3),
        "state": view.state(now),
    }


def sqlite_top_hosts(
    path: Path, limit: int = TOP_HOSTS, *, options: FrontierOptions = _DEFAULT_OPTIONS
) -> list[dict[str, Any]] | None:
    """The embedded frontier's top hosts (None: no frontier yet; sqlite3.Error: it cannot be
    read). `queued` counts the URLs leased too (a host's until their batch completes);
    `fetched` its URLs done or failed; `errors` its consecutive fetch errors."""
    views = read_top_hosts(path, limit, options)
    if views is None:
        return None
    now = time.time()
    return [_row(v, v.queued + v.leased, now) for v in views]


def cluster_top_hosts(
    client: Any,
    crawl: str,
    hosts: Iterable[str],
    now: float,
    limit: int = TOP_HOSTS,
    *,
    options: FrontierOptions = _DEFAULT_OPTIONS,
) -> list[dict[str, Any]]:
    """The top hosts among `hosts` (the live workers' current ones) of the cluster crawl
    `crawl`. `queued` counts the URLs in its queue (its leased ones are out of it);
    `fetched` is known where the shards count a host's URLs (under a host budget,
    `options.host_budget`), else null."""
    from ..frontier.redis import read_hosts

    names = list(dict.fromkeys(hosts))[:CLUSTER_CANDIDATES]
    rows = [_row(v, v.queued, now) for v in read_hosts(client, crawl, names, options)]
    rows.sort(key=lambda r: (-r["queued"], -(r["fetched"] or 0), r["host"]))
    return rows[:limit]
