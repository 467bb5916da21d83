"""Parsing fetched documents: links from HTML pages (`parse_html`), URLs from sitemaps
(`parse_sitemap`), the content-type test (`is_html`) and a text's SimHash (`simhash_text`).
See docs/crawler/parse.md.

Pure functions of their input: no I/O, no network, nothing cached between pages.
"""

from typing import Any

from .links import detect_charset, is_html, parse_html
from .sitemaps import MAX_SITEMAP_BYTES, MAX_SITEMAP_ENTRIES, parse_sitemap
from .types import LINK_RELS, ExtractedLink, ParsedPage, ParseOptions, SitemapResult

__all__ = [
    "LINK_RELS",
    "MAX_SITEMAP_BYTES",
    "MAX_SITEMAP_ENTRIES",
    "SIMHASH_BITS",
    "ExtractedLink",
    "ParseOptions",
    "ParsedPage",
    "SitemapResult",
    "detect_charset",
    "hamming",
    "is_html",
    "parse_html",
    "parse_sitemap",
    "simhash_text",
]

_SIMHASH_NAMES = ("SIMHASH_BITS", "hamming", "simhash_text")


def __getattr__(name: str) -> Any:
    # the SimHash names on first use, not with the package: a crawl without near-duplicate
    # detection never loads them (nor, where parse/_simhash.pyx was not built, numpy: a pool's
    # parent forks its workers with no numpy threads)
    if name in _SIMHASH_NAMES:
        from . import simhash

        return getattr(simhash, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
