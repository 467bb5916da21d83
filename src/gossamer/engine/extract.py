"""Extractors: user code run on every crawled page, in every worker (docs/python.md,
"Extractors"). `load_extractor` turns the `extract` setting (an entry point of the
`gossamer.extractors` group, or `MODULE:CALLABLE`) into an `Extractor`; `Extraction` is the
worker's sink that runs it on each page and writes its items to the worker's part
(sinks/items.py), and the crawler's `follow` hook when the extractor decides which links
to follow.

What an extractor may be: a callable taking a `Page` and returning its items (an iterable
of dicts or dataclass instances, one dict or dataclass, or None); a class, instantiated
once per worker with no arguments, whose instances have such an `extract(page)` method (or
are such a callable) and, optionally, `follow(page, link) -> bool` — only the links it
returns True for are followed (the page's edges keep them all out)."""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from ..crawldir import CrawlDir
from ..fetch import FetchResult
from ..page import Link, Page
from ..parse import ParsedPage
from ..plugins import EXTRACTORS, PluginError, load_object
from ..sinks.items import ItemsWriter
from .sink_registry import PageSink, SinkContext

__all__ = ["Extraction", "Extractor", "load_extractor"]

_log = logging.getLogger(__name__)
#: how many failures of an extractor are logged one by one (then one a thousand)
_LOGGED_FAILURES = 10


@dataclasses.dataclass(frozen=True, slots=True)
class Extractor:
    """An extractor loaded: its name as given, the items of a page (`extract`) and, when
    it decides which links to follow, `follow(page, link) -> bool`."""

    name: str
    extract: Callable[[Page], Any]
    follow: Callable[[Page, Link], bool] | None = None


def load_extractor(spec: str) -> Extractor:
    """The extractor `spec` names (an entry point of gossamer.extractors, or
    MODULE:CALLABLE), a class instantiated. PluginError (one line) when it cannot be
    loaded or is not an extractor."""
    obj = load_object(spec, EXTRACTORS)
    if isinstance(obj, type):
        try:
            obj = obj()
        except Exception as exc:
            raise PluginError(
                f"extractor {spec}: {obj.__name__}() failed: {type(exc).__name__}: {exc}"
            ) from exc
    extract = getattr(obj, "extract", None)
    if not callable(extract):
        extract = obj if callable(obj) else None
    if extract is None:
        raise PluginError(
            f"extractor {spec}: {obj!r} is not callable and has no extract(page) method"
        )
    follow = getattr(obj, "follow", None)
    return Extractor(spec, extract, follow if callable(follow) else None)


def items_of(returned: Any) -> list[Any]:
    """An extractor's return value as a list of JSON-ready items: a dict or dataclass is
    one item, None none, any other iterable (a list, a generator) its elements, each a
    dict or a dataclass instance (TypeError otherwise)."""
    if returned is None:
        return []
    if isinstance(returned, dict) or _is_dataclass(returned):
        returned = [returned]
    elif isinstance(returned, str | bytes) or not isinstance(returned, Iterable):
        raise TypeError(f"an extractor returns dicts or dataclasses, not {type(returned).__name__}")
    out = []
    for item in returned:
        if _is_dataclass(item):
            item = dataclasses.asdict(item)
        elif not isinstance(item, dict):
            raise TypeError(f"an item is a dict or a dataclass, not {type(item).__name__}")
        out.append(item)
    return out


def _is_dataclass(obj: Any) -> bool:
    return dataclasses.is_dataclass(obj) and not isinstance(obj, type)


class Extraction(PageSink):
    """One worker's run of an extractor: each crawled page's items appended to the worker's
    part (`items/items-<part>.jsonl`), flushed with the crawl's other outputs before the
    frontier counts the page done. An extractor that raises on a page (or returns what is
    not items) is logged and the page has no items; the crawl goes on."""

    def __init__(self, extractor: Extractor, ctx: SinkContext) -> None:
        self.extractor = extractor
        self.writer = ItemsWriter(CrawlDir(ctx.out).items_part(ctx.part))
        self.failures = 0
        self._last: tuple[FetchResult, Page] | None = None  # the page `follow` built

    def follow(
        self, result: FetchResult, depth: int, parsed: ParsedPage
    ) -> Sequence[tuple[str, str]]:
        """The links of an HTML page the crawl follows: those the extractor's `follow`
        keeps (all without one). The page's `Page` is built here, its title taken from the
        crawler's parse (not parsed again), for `fetched` to hand to the extractor."""
        page = Page.from_result(result, depth)
        page._seed(title=parsed.title)
        self._last = (result, page)
        decide = self.extractor.follow
        if decide is None:
            return parsed.links
        try:
            return [(url, kind) for url, kind in parsed.links if decide(page, Link(url, kind))]
        except Exception as exc:
            self._failed(page.url, "follow", exc)
            return parsed.links

    def fetched(self, result: FetchResult, depth: int, edges: list[tuple[str, str]]) -> bool:
        last = self._last
        if last is not None and last[0] is result:  # parsed already by `follow`: reuse it
            page = last[1]
            page._set_followed(edges)
        else:
            page = Page.from_result(result, depth, edges)
        self._last = None
        try:
            items = items_of(self.extractor.extract(page))
            self.writer.write(page.url, page.fetched_at, items)
        except Exception as exc:
            self._failed(page.url, "extract", exc)
        return True

    def _failed(self, url: str, what: str, exc: Exception) -> None:
        self.failures += 1
        n = self.failures
        if n <= _LOGGED_FAILURES or n % 1000 == 0:
            more = f" ({n:,} failures so far)" if n > _LOGGED_FAILURES else ""
            _log.warning(
                f"extractor {self.extractor.name}: {what} failed on {url}: "
                f"{type(exc).__name__}: {exc}{more}",
                extra={"url": url},
            )

    def flush(self) -> None:
        self.writer.flush()

    def close(self) -> None:
        self.writer.close()
