"""The sinks of a crawl, by name: `Recorder` builds every registered sink, in registration
order, and hands each what it implements. The built-in ones (`warc`, `crawl-log`, `graph`)
register themselves in engine/recorder.py; a new output is one module with a `PageSink`
subclass and a `register_sink(name, factory)` call (tests/engine/_titles_sink.py is one).
The registry is also the subscriber list of the crawl's events (engine/events.py): a sink
that overrides `page` receives a `PageEvent` for every crawled page, one that overrides
`fetched` the page's whole response.

A factory gets the `SinkContext` and returns its sink, or None when the settings turn it
off (`warc` with --no-warc). Sinks never call back into the engine."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ..config import CrawlSettings
from ..fetch import FetchResult
from .events import PageEvent

if TYPE_CHECKING:
    from .recrawl import Recrawl

__all__ = [
    "PageSink",
    "SinkContext",
    "SinkFactory",
    "build_sinks",
    "load_sink_plugins",
    "register_sink",
    "sink_names",
    "unregister_sink",
]


@dataclass(frozen=True, slots=True)
class SinkContext:
    """What a sink is built from: the crawl directory, the settings, gossamer's version,
    the worker's part name ("" for the embedded crawl and a pool's parent) and the
    validators of a re-crawled crawl (--recrawl)."""

    out: Path
    settings: CrawlSettings
    version: str
    part: str = ""
    recrawl: Recrawl | None = None


class PageSink:
    """One output of a crawl. Override what the sink records; the methods left as they are
    here are never called (`Recorder` dispatches only to overridden ones: no cost per page
    for what a sink ignores). `flush()` hands buffered output to the OS (before the frontier
    counts a batch done); `close()` writes what is pending and closes."""

    def exchange(self, result: FetchResult) -> None:
        """One request/response exchange (every fetched page, robots.txt and sitemaps)."""

    def log(
        self,
        result: FetchResult,
        *,
        depth: int,
        parent: str | None,
        outcome: str,
        dup: tuple[str, str] | None = None,
    ) -> None:
        """One fetch's outcome; depth -1 for requests that are not pages (robots.txt);
        `dup`: a page's duplicate status when it has one, ("near", URL of the page crawled
        before that it is a near-duplicate of); only passed when not None."""

    def edges(self, src: str, dsts: list[tuple[str, str]]) -> None:
        """The graph edges of one page: (dst URL, kind) pairs."""

    def page(self, event: PageEvent) -> None:
        """One crawled page and its edges (engine/events.py), after its `log` and `edges`."""

    def fetched(self, result: FetchResult, depth: int, edges: list[tuple[str, str]]) -> bool:
        """One crawled page in full (its response, body included), after `page`: for a
        sink that reads the page itself (extractors, a Python program's `Page` objects).
        False refuses the page: it gets no outcome, and the frontier queues it again (a
        program that stopped reading pages)."""
        return True

    def flush(self) -> None:
        """Hand buffered output to the OS."""

    def close(self) -> None:
        """Write what is pending and close."""


SinkFactory = Callable[[SinkContext], PageSink | None]

_REGISTRY: dict[str, SinkFactory] = {}


def register_sink(name: str, factory: SinkFactory) -> None:
    """Register the sink `name` (built by every crawl from now on, after those registered
    before it). A name is registered once: ValueError otherwise."""
    if name in _REGISTRY:
        raise ValueError(f"a sink named {name!r} is registered already")
    _REGISTRY[name] = factory


def unregister_sink(name: str) -> None:
    """Remove the sink `name` (KeyError when none is registered)."""
    del _REGISTRY[name]


def sink_names() -> list[str]:
    """The registered sinks' names, in the order they are built."""
    return list(_REGISTRY)


def load_sink_plugins() -> int:
    """Register the installed sink plugins (entry points of gossamer.sinks, each naming a
    factory) not registered yet, under their names; how many. PluginError (one line) for
    one that fails to load. `build_sinks` calls it; a command calls it first to refuse a
    broken plugin before the crawl starts."""
    from ..plugins import SINKS, register_group

    return register_group(SINKS, register_sink, sink_names)


def build_sinks(ctx: SinkContext) -> list[tuple[str, PageSink]]:
    """Every registered sink the settings turn on (installed sink plugins included), in
    registration order."""
    load_sink_plugins()
    built = []
    for name, factory in _REGISTRY.items():
        sink = factory(ctx)
        if sink is not None:
            built.append((name, sink))
    return built


def overrides(sink: PageSink, method: str) -> bool:
    """Whether `sink`'s class implements `method` (not PageSink's no-op)."""
    return getattr(type(sink), method) is not getattr(PageSink, method)
