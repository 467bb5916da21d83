"""gossamer: a polite, fast, fault-tolerant web crawler, and its Python API.

    import gossamer

    for page in gossamer.crawl(["http://127.0.0.1:8081/"], allow_private=True, delay=0):
        print(page.status, page.url, page.title)

`crawl` yields each crawled `Page` as it arrives, `acrawl` is its asyncio twin, `Crawl`
gives control over a running crawl (stats, stop, resume, summary); `gossamer.graph` loads
and measures a crawl's link graph. The tutorial and reference: docs/python.md. Importing
gossamer is cheap: each name is imported when first used."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from ._version import __version__

if TYPE_CHECKING:
    from . import graph
    from .api import Crawl, Stats, Summary, acrawl, crawl
    from .config import SettingsError
    from .crawldir import CrawlError
    from .page import Link, Page

__all__ = [
    "Crawl",
    "CrawlError",
    "Link",
    "Page",
    "SettingsError",
    "Stats",
    "Summary",
    "__version__",
    "acrawl",
    "crawl",
    "graph",
]

# each public name: the module it is imported from on first use
_WHERE = {
    "Crawl": ".api",
    "Stats": ".api",
    "Summary": ".api",
    "acrawl": ".api",
    "crawl": ".api",
    "Page": ".page",
    "Link": ".page",
    "SettingsError": ".config",
    "CrawlError": ".crawldir",
}


def __getattr__(name: str) -> Any:
    if name == "graph":
        return importlib.import_module(".graph", __name__)
    where = _WHERE.get(name)
    if where is None:
        raise AttributeError(f"module 'gossamer' has no attribute {name!r}")
    value = getattr(importlib.import_module(where, __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
