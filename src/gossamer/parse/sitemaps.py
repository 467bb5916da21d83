"""Sitemaps (sitemaps.org 0.9): XML urlsets and sitemap indexes, RSS/Atom feeds, plain text,
gzip-compressed or not. Lenient like crawler-commons' parser: any (or no) namespace, a
`<sitemap>` with its URL as bare text instead of `<loc>`, whitespace around URLs, BOMs, a
truncated file (what was read before the error is kept).

Safety: XML goes through defusedxml (entity declarations and external entities are refused,
so neither a billion-laughs bomb nor an XXE file read is possible; nothing is fetched), gzip is
inflated with a cap, and limits follow sitemaps.org: 50 MB decoded, 50,000 entries.
Only absolute http/https URLs are kept, canonicalised by `urls.LinkResolver`. Whether a listed
URL is in the sitemap's scope (same host, under its directory) is for the caller to decide.
"""

from __future__ import annotations

import io
import xml.etree.ElementTree as ET
import zlib
from typing import Final

from defusedxml import DefusedXmlException
from defusedxml.ElementTree import iterparse

from ..urls import LinkResolver
from .types import SitemapKind, SitemapResult

__all__ = ["MAX_SITEMAP_BYTES", "MAX_SITEMAP_ENTRIES", "parse_sitemap"]

#: sitemaps.org limits: 50 MB (52,428,800 bytes) uncompressed, 50,000 URLs per file.
MAX_SITEMAP_BYTES: Final = 52_428_800
MAX_SITEMAP_ENTRIES: Final = 50_000

_GZIP_MAGIC: Final = b"\x1f\x8b"
_BOMS: Final = (b"\xef\xbb\xbf", b"\xff\xfe", b"\xfe\xff")
_FEED_ROOTS: Final = frozenset({"rss", "feed", "rdf"})


class _Collector:
    """Accumulates entries with the entry limit and the resolver."""

    __slots__ = ("_resolve", "seen_limit", "sitemaps", "urls")

    def __init__(self, url: str) -> None:
        self._resolve = LinkResolver(url).resolve
        self.urls: list[str] = []
        self.sitemaps: list[str] = []
        self.seen_limit = False

    def add(self, into: list[str], text: str | None) -> bool:
        """Add an absolute http(s) URL; False once the entry limit is reached."""
        if text is None:
            return True
        loc = text.strip()
        if loc[:7].lower() != "http://" and loc[:8].lower() != "https://":
            return True
        if len(into) >= MAX_SITEMAP_ENTRIES:
            self.seen_limit = True
            return False
        resolved = self._resolve(loc)
        if resolved is not None:
            into.append(resolved)
        return True


def _local(tag: str) -> str:
    """Local name of an ElementTree tag ('{ns}loc' or 'sit:loc' → 'loc'), lower case."""
    if tag[:1] == "{":
        tag = tag[tag.find("}") + 1 :]
    return tag.rpartition(":")[2].lower()


def _inflate(body: bytes) -> tuple[bytes, bool, str | None]:
    """Decompress gzip members (concatenated ones too) up to the size cap:
    (data, truncated, error)."""
    out: list[bytes] = []
    size = 0
    data = body
    while data[:2] == _GZIP_MAGIC:
        d = zlib.decompressobj(wbits=31)
        try:
            chunk = d.decompress(data, MAX_SITEMAP_BYTES + 1 - size)
        except zlib.error as exc:
            return b"".join(out), False, f"gzip: {exc}"
        out.append(chunk)
        size += len(chunk)
        if size > MAX_SITEMAP_BYTES:
            return b"".join(out)[:MAX_SITEMAP_BYTES], True, None
        if not d.eof:
            return b"".join(out), False, "gzip: truncated stream"
        data = d.unused_data
    return b"".join(out), False, None


def parse_sitemap(body: bytes, url: str) -> SitemapResult:
    """Parse a sitemap fetched from `url` (relative entries are resolved against it, though
    the protocol asks for absolute ones). gzip is recognised by its magic bytes, XML by a
    leading '<', anything else is read as a text sitemap. Never raises on a bad body; raises
    urls.URLError when `url` is not an absolute http(s) URL."""
    truncated = False
    error: str | None = None
    if body[:2] == _GZIP_MAGIC:
        body, truncated, error = _inflate(body)
    elif len(body) > MAX_SITEMAP_BYTES:
        body, truncated = body[:MAX_SITEMAP_BYTES], True
    start = 0
    for bom in _BOMS:
        if body.startswith(bom):
            start = len(bom)
            break
    utf16 = body[:2] in (b"\xff\xfe", b"\xfe\xff")
    collector = _Collector(url)
    if utf16 or body[start : start + 512].lstrip()[:1] == b"<":
        # expat rejects whitespace before the XML declaration: drop it (and a UTF-8 BOM)
        kind, xml_error = _parse_xml(body if utf16 else body[start:].lstrip(), collector)
        error = error or xml_error
    else:
        kind = _parse_text(body[start:], collector)
    return SitemapResult(
        urls=tuple(collector.urls),
        sitemaps=tuple(collector.sitemaps),
        kind=kind,
        truncated=truncated or collector.seen_limit,
        error=error,
    )


def _parse_text(body: bytes, collector: _Collector) -> SitemapKind:
    """One URL per line (UTF-8); lines that are not absolute http(s) URLs are skipped."""
    text = body.decode("utf-8", "replace")
    for line in text.splitlines():
        if not collector.add(collector.urls, line):
            break
    return "text" if collector.urls else "unknown"


_ENTRIES: Final = frozenset({"url", "sitemap", "item", "entry"})


def _parse_xml(body: bytes, collector: _Collector) -> tuple[SitemapKind, str | None]:
    """Stream the XML; returns (kind, error). Entries are taken at their end tags, so a
    document cut short keeps everything before the cut.

    urlset/index: the first `<loc>` of each `<url>`/`<sitemap>`, or the entry's own text when
    it has no `<loc>`. Feeds: the first `<link>` of each RSS `<item>` (its text) or Atom
    `<entry>` (its href, rel alternate or none), else the item's permalink `<guid>`."""
    kind: SitemapKind = "unknown"
    stack: list[str] = []
    taken = False  # the current entry gave its URL already
    guid: str | None = None  # RSS permalink guid of the current item
    urls, sitemaps = collector.urls, collector.sitemaps
    add = collector.add
    try:
        events = iterparse(
            io.BytesIO(body), events=("start", "end"), forbid_dtd=False, forbid_entities=True,
            forbid_external=True,
        )  # fmt: skip
        names: dict[str, str] = {}  # tag → local name: a sitemap has a handful of tags
        for event, elem in events:
            tag = elem.tag
            name = names.get(tag)
            if name is None:
                name = names[tag] = _local(tag)
            if event == "start":
                if not stack and kind == "unknown":
                    kind = _kind_of_root(name)
                    if kind == "unknown":
                        return kind, f"not a sitemap: root element <{name}>"
                if name in _ENTRIES and (len(stack) <= 2 and "loc" not in stack):
                    taken, guid = False, None
                stack.append(name)
                continue
            stack.pop()
            parent = stack[-1] if stack else ""
            more = True
            if kind == "feed":
                if name == "link" and parent in ("item", "entry") and not taken:
                    rel = (elem.get("rel") or "alternate").strip().lower()
                    if rel == "alternate":
                        href = elem.get("href")
                        before = len(urls)
                        more = add(urls, href if href is not None else "".join(elem.itertext()))
                        taken = len(urls) > before
                elif name == "guid" and parent == "item":
                    if (elem.get("isPermaLink") or "true").strip().lower() != "false":
                        guid = elem.text
                elif name == "item" and not taken and guid:
                    more = add(urls, guid)
            elif name == "loc" and parent in ("url", "sitemap") and not taken:
                taken = True
                more = add(urls if parent == "url" else sitemaps, "".join(elem.itertext()))
            elif name in ("url", "sitemap") and not taken:
                taken = True  # no <loc>: the URL is the entry's own text (seen in the wild)
                more = add(urls if name == "url" else sitemaps, elem.text)
            if name in _ENTRIES:
                elem.clear()  # keep memory flat on 50,000-entry files
            if not more:
                break
    except (ET.ParseError, DefusedXmlException, ValueError) as exc:
        return kind, f"xml: {type(exc).__name__}: {exc}"
    return kind, None


def _kind_of_root(name: str) -> SitemapKind:
    if name == "urlset":
        return "urlset"
    if name == "sitemapindex":
        return "index"
    if name in _FEED_ROOTS:
        return "feed"
    return "unknown"
