"""The fetchers by name: the composition root (runner/build.py) builds a crawl's fetcher
with `open_fetcher(name, settings, resolver)`. The built-in "curl" (`CurlFetcher`, pycurl
on asyncio, with the fast path) registers at the end of this module. A new fetcher is one
module implementing `Fetcher` (`fetch`, `statistics`, `aclose`; `start`/`poll` too for the
crawler's fast path, `StartingFetcher`) plus one `register_fetcher(name, factory)` call
(tests/engine/_streams_fetcher.py is one).

A factory gets the crawl's settings and its `Resolver` (host overrides, DNS cache, the
private-address guard: the crawler asks it for a host's IP, so the fetcher must connect
where it says) and returns the fetcher. In a cluster crawl the composition root wraps it in
the Redis IP gate's guard."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from .._named import Named
from ..plugins import FETCHERS as FETCHER_PLUGINS
from ._types import Fetcher
from .resolve import Resolver

if TYPE_CHECKING:
    from ..config import CrawlSettings

__all__ = [
    "FETCHERS",
    "FetcherFactory",
    "fetcher_names",
    "open_fetcher",
    "register_fetcher",
    "unregister_fetcher",
]

FetcherFactory = Callable[["CrawlSettings", Resolver], Fetcher]


#: the registered fetchers: `register_fetcher(name, factory, summary=…)` makes
#: `open_fetcher(name, …)` build a fetcher with `factory` (a name is registered once:
#: ValueError otherwise); `unregister_fetcher(name)`, `fetcher_names()`
FETCHERS: Named[FetcherFactory] = Named("fetcher", ValueError, FETCHER_PLUGINS)
register_fetcher = FETCHERS.register
unregister_fetcher = FETCHERS.unregister
fetcher_names = FETCHERS.names


def open_fetcher(name: str, settings: CrawlSettings, resolver: Resolver) -> Fetcher:
    """A new fetcher built by the registered `name` (ValueError when none is)."""
    return FETCHERS.factory(name)(settings, resolver)


def _curl(settings: CrawlSettings, resolver: Resolver) -> Fetcher:
    from .curl import CurlFetcher

    return CurlFetcher(
        resolver=resolver,
        user_agent=settings.fetch.user_agent,
        connect_timeout=settings.fetch.connect_timeout,
        first_byte_timeout=settings.fetch.first_byte_timeout,
        total_timeout=settings.fetch.total_timeout,
        max_body=settings.fetch.max_body,
        max_connections=max(1024, settings.fetch.concurrency * 4),
        low_speed_limit=settings.fetch.low_speed_limit,
        low_speed_time=settings.fetch.low_speed_time,
        **settings.fetch_options(),  # -H headers, --proxy
    )


register_fetcher("curl", _curl, summary="pycurl's CurlMulti on asyncio, with the fast path")
