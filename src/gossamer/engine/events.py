"""Crawl events: the typed facts the engine publishes per page, and their compact encoding.

A `PageEvent` is one crawled page (a fetch the frontier counts done) with the graph edges found
on it. The engine hands it, once per page, to every sink that overrides `PageSink.page` (the
sink registry is the subscriber list); with no subscriber it is not built. `GraphApplier`
promises that a page's event applied twice adds nothing (the first event of a page wins), so a
transport may deliver at least once, never less. `encode_events` / `decode_events` are what
crosses a process boundary (the pool's socket, the cluster's Redis stream): a batch as one
zlib-compressed JSON array."""

from __future__ import annotations

import json
import zlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Final, Protocol

from ..sinks.graph import is_node_status, node_id

__all__ = [
    "GraphApplier",
    "GraphLike",
    "PageEvent",
    "decode_events",
    "encode_events",
]

_KIND_LETTER: Final = {"link": "l", "redirect": "r", "canonical": "c", "sitemap": "s"}
_LETTER_KIND: Final = {v: k for k, v in _KIND_LETTER.items()}
_ZLIB_LEVEL: Final = 1  # level 1: ~5x smaller than the JSON at a fraction of level 6's CPU


@dataclass(frozen=True, slots=True)
class PageEvent:
    """A page recorded: its URL, HTTP status, crawl depth (seeds 0), the worker that fetched
    it (its part name, "" for an embedded crawl of one worker; the cluster worker's id), when
    the fetch started (Unix time), its Content-Type, and its graph edges as (target URL,
    kind) pairs (no self-link, no repeated target; kind `link`, `redirect` or `canonical`)."""

    url: str
    status: int
    depth: int
    worker: str
    time: float
    content_type: str | None
    links: tuple[tuple[str, str], ...]

    @property
    def page_id(self) -> int:
        """The page's graph id (sinks/graph.py `node_id`: the id its graph-file lines use)."""
        return node_id(self.url)

    def link_urls(self) -> list[str]:
        """The targets of the page's edges, in order."""
        return [dst for dst, _ in self.links]


class GraphLike(Protocol):
    """What a graph consumer feeds: `update(page, links)` once per crawled page with the
    URLs it links to (gossamer.graph.OnlineGraph implements it)."""

    def update(self, page: str, links: Iterable[str]) -> None: ...


class GraphApplier:
    """Applies page events to `graph`, each page once (see the module docstring): `apply`
    returns whether the event changed the graph. `seen` restores the ids of pages applied
    before (a restarted consumer's checkpoint). Pages fetched with an error status are not
    applied: the graph's nodes are the pages fetched with 2xx or 3xx (`is_node_status`)."""

    def __init__(self, graph: GraphLike, seen: Iterable[int] = ()) -> None:
        self.graph = graph
        self.applied: set[int] = set(seen)
        self.skipped = 0  # events of pages applied before (replays, re-fetches)
        self.not_nodes = 0  # events of pages that are no node (an error status)

    def apply(self, event: PageEvent) -> bool:
        if not is_node_status(event.status):  # an error page is no node (docs/graph.md)
            self.not_nodes += 1
            return False
        page_id = event.page_id
        if page_id in self.applied:
            self.skipped += 1
            return False
        self.graph.update(event.url, event.link_urls())
        self.applied.add(page_id)
        return True

    def apply_all(self, events: Iterable[PageEvent]) -> int:
        """Apply each event; how many changed the graph."""
        return sum(self.apply(event) for event in events)


def encode_events(events: Sequence[PageEvent], *, worker: str | None = None) -> bytes:
    """A batch of events as one compressed blob (see the module docstring); `worker`, when
    given, replaces each event's worker (a cluster worker's id for its part name "")."""
    rows = [
        [
            e.url,
            e.status,
            e.depth,
            e.worker if worker is None else worker,
            round(e.time, 3),
            e.content_type,
            [dst for dst, _ in e.links],
            "".join(_KIND_LETTER.get(kind, "l") for _, kind in e.links),
        ]
        for e in events
    ]
    text = json.dumps(rows, ensure_ascii=False, separators=(",", ":"))
    return zlib.compress(text.encode("utf-8", "surrogatepass"), _ZLIB_LEVEL)


def decode_events(blob: bytes) -> list[PageEvent]:
    """The events of `encode_events(events)`. Raises ValueError for a blob that is not one."""
    try:
        rows = json.loads(zlib.decompress(blob).decode("utf-8", "surrogatepass"))
        if not isinstance(rows, list):
            raise ValueError("not a list of events")
        events = []
        for url, status, depth, worker, at, ctype, links, kinds in rows:
            if len(links) != len(kinds):
                raise ValueError("links and kinds differ in length")
            pairs = tuple(zip(links, (_LETTER_KIND[k] for k in kinds), strict=True))
            events.append(PageEvent(url, status, depth, worker, at, ctype, pairs))
    except (zlib.error, UnicodeDecodeError, TypeError, KeyError) as exc:
        raise ValueError(f"not an encoded event batch: {exc}") from exc
    return events
