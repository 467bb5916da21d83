"""The engine's seams: what `Crawler` asks of its sinks and its IP gate (the fetcher's
protocols, `Fetching` and its fast path `StartingFetcher`, live with the fetcher in
`gossamer.fetch`). Each is checked statically (mypy) and by contract tests run on every
implementation (tests/engine/test_seams_contract.py)."""

from __future__ import annotations

from contextlib import AbstractAsyncContextManager
from typing import Protocol

from ..fetch import Fetching, FetchResult, StartingFetcher

__all__ = ["Fetching", "IpGate", "Sinks", "StartingFetcher"]


class Sinks(Protocol):
    """Where the crawler records what it fetched (`Recorder`: WARC, crawl log, link graph).
    Lines may be buffered until `flush()`, which the crawler calls before the frontier
    counts a batch done."""

    def exchange(self, result: FetchResult) -> None:
        """Store one request/response exchange (a 304 of a re-crawl as a revisit)."""
        ...

    def log(
        self,
        result: FetchResult,
        *,
        depth: int,
        parent: str | None,
        outcome: str,
        dup: tuple[str, str] | None = None,
    ) -> None:
        """One crawl-log line; depth -1 for requests that are not pages (robots.txt);
        `dup`: the page's duplicate status, ("near", URL of the page it is near)."""
        ...

    def edges(self, src: str, dsts: list[tuple[str, str]]) -> None:
        """The graph edges of one page: (dst URL, kind) pairs."""
        ...

    def page(self, result: FetchResult, depth: int, edges: list[tuple[str, str]]) -> bool:
        """A crawled page and its graph edges (the `PageEvent` of engine/events.py). False
        when a subscriber refuses it: the page gets no outcome (the frontier queues it
        again, no attempt counted)."""
        ...

    def flush(self) -> None:
        """Hand buffered output to the OS; raises the first error met (a full disk)."""
        ...


class IpGate(Protocol):
    """Per-IP politeness: at most a limit of hosts of one IP address fetched at once
    (`LocalIpGate` in one process, `FileIpGate` across a pool, `RedisIpGate` across a
    cluster)."""

    def waiting(self, ip: str) -> bool:
        """Whether some host waits for a slot of `ip` (a holder should let it go)."""
        ...

    def hold(self, ip: str) -> AbstractAsyncContextManager[None]:
        """Hold one slot of `ip` while the context is entered (waits for a free one)."""
        ...
