"""Link extraction from HTML (the per-page hot path): selectolax's lexbor parser and one CSS
pass that finds, in document order, the elements links come from and the `<base>`, `<meta>`
and `<title>` elements, read in a single loop.

Links come out canonical (resolved against the first `<base href>` or the page URL); non-http
links are dropped; nofollow, meta robots and X-Robots-Tag are honoured; the charset is found in
the HTML standard's order. What is extracted, how, and what it costs: docs/crawler/parse.md."""

from __future__ import annotations

import codecs
import re
import threading
from collections.abc import Mapping
from functools import lru_cache
from typing import Final

from selectolax.lexbor import LexborCSSSelector, LexborHTMLParser

from ..urls import LinkResolver
from .types import ExtractedLink, ParsedPage, ParseOptions

__all__ = ["detect_charset", "is_html", "parse_html"]

# One CSS pass finds every element parse_html reads, in document order (a node matching two of
# the selectors is reported twice: an <iframe href src>, a <meta href>, a <title href>).
_SELECTOR: Final = "[href], meta[name][content], title"
_SELECTOR_FRAMES: Final = "[href], iframe, frame, meta[name][content], title"
_css = threading.local()


def _node_kinds() -> dict[int, str]:
    """lexbor tag id → what parse_html does with the element: the link kind for the elements
    links come from ("link": the rel says), else base, meta or title."""
    html = "<base href><meta name content><title></title><a href><area href><link href>"
    html += "<iframe src></iframe><svg><frame src>"
    kinds = {"a": "a", "area": "area", "link": "link", "iframe": "frame", "frame": "frame"}
    kinds.update(base="base", meta="meta", title="title")
    ids = {n.tag: n.tag_id for n in LexborHTMLParser(html).css("[href], [src], meta, title")}
    return {ids[tag]: kind for tag, kind in kinds.items()}


_KINDS: Final = _node_kinds()
_A_ID: Final = next(i for i, k in _KINDS.items() if k == "a")
_LINK_REL_ORDER: Final = ("canonical", "next", "alternate")
_HTML_TYPES: Final = frozenset({"text/html", "application/xhtml+xml"})
# X-Robots-Tag directives that carry a value after a colon (not an agent prefix)
_VALUED_DIRECTIVES: Final = frozenset(
    {"unavailable_after", "max-snippet", "max-image-preview", "max-video-preview"}
)
_META_CHARSET = re.compile(rb"""<meta[^>]*?charset\s*=\s*["']?\s*([A-Za-z0-9_:.+-]+)""", re.I)
_HEADER_CHARSET = re.compile(r"""charset\s*=\s*["']?\s*([A-Za-z0-9_:.+-]+)""", re.I)
_HTML_SNIFF = re.compile(
    rb"\s*(?:<!doctype\s+html|<html|<head|<body|<title|<script|<iframe|<h1|<div|<font"
    rb"|<table|<a[\s>]|<style|<b[\s>]|<br|<p[\s>]|<!--)",
    re.I,
)

# WHATWG Encoding standard labels → (name, Python codec), for the encodings met on the web.
_LABELS: Final[dict[str, tuple[str, str]]] = {}
for _name, _codec, _labels in (
    ("utf-8", "utf-8", "utf-8 utf8 unicode-1-1-utf-8 unicode11utf8 unicode20utf8 x-unicode20utf8"),
    (
        "windows-1252",
        "cp1252",
        "windows-1252 ansi_x3.4-1968 ascii cp1252 cp819 csisolatin1 ibm819 iso-8859-1 "
        "iso-ir-100 iso8859-1 iso88591 iso_8859-1 iso_8859-1:1987 l1 latin1 us-ascii x-cp1252",
    ),
    (
        "shift_jis",
        "cp932",
        "shift_jis csshiftjis ms932 ms_kanji shift-jis sjis windows-31j x-sjis",
    ),
    ("euc-jp", "euc_jp", "euc-jp cseucpkdfmtjapanese x-euc-jp"),
    ("iso-2022-jp", "iso2022_jp", "iso-2022-jp csiso2022jp"),
    (
        "gb18030",
        "gb18030",
        "gb18030 gbk chinese csgb2312 csiso58gb231280 gb2312 gb_2312 gb_2312-80 iso-ir-58 "
        "x-gbk",
    ),
    ("big5", "big5hkscs", "big5 big5-hkscs cn-big5 csbig5 x-x-big5"),
    ("euc-kr", "cp949", "euc-kr cseuckr csksc56011987 iso-ir-149 korean ks_c_5601-1987 "
     "ks_c_5601-1989 ksc5601 ksc_5601 windows-949"),
    ("utf-16le", "utf-16-le", "utf-16le utf-16 csunicode iso-10646-ucs-2 ucs-2 unicode "
     "unicodefeff"),
    ("utf-16be", "utf-16-be", "utf-16be"),
):  # fmt: skip
    for _label in _labels.split():
        _LABELS[_label] = (_name, _codec)

_UTF8: Final = ("utf-8", "utf-8")

# Canonical forms of absolute hrefs ("http://…", "https://…"), which do not depend on the page
# they appear on: popular URLs (home pages, navigation) are linked from many pages, and a dict
# hit (~50 ns) replaces a WHATWG parse + canonicalisation (~2.8 µs). A relative href is looked
# up as the absolute URL it resolves to, spelled by prefixing it with part of the base URL —
# "//host/x" with the scheme, "/about" with the origin, "page.html" and "../x" with the base's
# directory, "?q" with the base minus its query, "#top" with the base minus its fragment —
# which the WHATWG parser reads exactly as it reads the relative form (once leading and
# trailing spaces and control characters are stripped, as the parser does), unless the href
# holds a backslash or an (ignored) tab/newline, which can change what it is relative to
# ("/\\x", "/\t/x" are protocol-relative) or, for a path, a colon (a scheme: "mailto:x").
# Hrefs with another scheme (mailto:, javascript:, tel:...) are kept too, as None: they never
# resolve to an http(s) URL, whatever the base. A value is the ExtractedLink of kind "a" (the
# usual kind, so most links are shared, not built) or None for a dropped href. Keyed by
# strip_session_ids; cleared when full, so memory stays bounded (~30 MB at the cap).
_ABSOLUTE_CACHE_MAX: Final = 100_000
_absolute_cache: Final[dict[bool, dict[str, ExtractedLink | None]]] = {True: {}, False: {}}
_NOT_PLAIN = re.compile(r"[\\\t\n\r]").search
_OTHER_SCHEME = re.compile(r"(?!https?:)[a-z][a-z0-9+.-]*:", re.I | re.A).match
_MISS: Final = ExtractedLink("", "")  # a cache miss (compared by identity)
_C0_SPACE: Final = "".join(map(chr, range(0x21)))


@lru_cache(maxsize=256)
def _encoding_for_label(label: str) -> tuple[str, str] | None:
    """(WHATWG name, Python codec) for a charset label, or None when unknown."""
    key = label.strip().lower()
    known = _LABELS.get(key)
    if known is not None:
        return known
    try:
        info = codecs.lookup(key)
    except LookupError:
        return None
    if not _is_text_codec(info):
        return None
    return info.name, info.name


def _is_text_codec(info: codecs.CodecInfo) -> bool:
    # codecs.lookup also finds bytes-to-bytes codecs (base64, zlib, rot13...)
    try:
        return isinstance(info.decode(b"a")[0], str)
    except (TypeError, ValueError, LookupError):
        return False


def _header_charset(content_type: str | None) -> tuple[str, str] | None:
    if not content_type or "charset" not in content_type.lower():
        return None
    m = _HEADER_CHARSET.search(content_type)
    return _encoding_for_label(m.group(1)) if m else None


def detect_charset(body: bytes, content_type: str | None) -> tuple[str, str, int]:
    """(WHATWG name, Python codec, BOM length) of an HTML body: BOM, else the Content-Type
    charset, else a meta declaration in the first 1024 bytes, else UTF-8."""
    if body[:3] == b"\xef\xbb\xbf":
        return "utf-8", "utf-8", 3
    if body[:2] == b"\xff\xfe":
        return "utf-16le", "utf-16-le", 2
    if body[:2] == b"\xfe\xff":
        return "utf-16be", "utf-16-be", 2
    found = _header_charset(content_type)
    if found is None:
        m = _META_CHARSET.search(body, 0, 1024)
        if m is not None:
            found = _encoding_for_label(m.group(1).decode("ascii"))
            if found is not None and found[0].startswith("utf-16"):
                found = _UTF8  # a meta tag readable as ASCII cannot be UTF-16 (HTML standard)
    if found is None:
        found = _UTF8
    return found[0], found[1], 0


def is_html(content_type: str | None, body_start: bytes | None = None) -> bool:
    """True when a response is HTML by its Content-Type (text/html, application/xhtml+xml;
    parameters and case ignored). Without a Content-Type, `body_start` (the first bytes of the
    body) is sniffed for an HTML tag at its start, as the MIME Sniffing standard does; with
    neither, False."""
    if content_type:
        mime = content_type.partition(";")[0].strip().lower()
        if mime:
            return mime in _HTML_TYPES
    if body_start:
        return _HTML_SNIFF.match(body_start, 0, 512) is not None
    return False


def _robots_directives(content: str) -> tuple[bool, bool]:
    """(nofollow, noindex) from a meta robots content value."""
    tokens = content.lower().replace(",", " ").split()
    none = "none" in tokens
    return none or "nofollow" in tokens, none or "noindex" in tokens


def _x_robots(value: str, agent: str) -> tuple[bool, bool]:
    """(nofollow, noindex) from an X-Robots-Tag value: `noindex, nofollow`, or directives
    prefixed by an agent (`otherbot: noindex`), which apply to that agent only."""
    nofollow = noindex = False
    applies = True
    for raw in value.lower().split(","):
        part = raw.strip()
        name, colon, rest = part.partition(":")
        if colon and name.strip() not in _VALUED_DIRECTIVES:
            who = name.strip()
            applies = who == agent or who == "*"
            part = rest.strip()
        if not applies:
            continue
        for token in part.split():
            if token == "nofollow" or token == "none":
                nofollow = True
            if token == "noindex" or token == "none":
                noindex = True
    return nofollow, noindex


def _selector() -> LexborCSSSelector:
    """This thread's CSS engine (made once: selectolax would make one per document)."""
    try:
        return _css.selector  # type: ignore[no-any-return]
    except AttributeError:
        _css.selector = LexborCSSSelector()  # type: ignore[no-untyped-call]
        return _css.selector  # type: ignore[no-any-return]


def parse_html(
    body: bytes, url: str, headers: Mapping[str, str] | None, options: ParseOptions
) -> ParsedPage:
    """Parse an HTML page fetched from `url` (canonical, absolute) with response `headers`
    (any case; Content-Type and X-Robots-Tag are read). Never raises for bad markup or
    bytes; raises urls.URLError when `url` itself is not an absolute http(s) URL."""
    content_type = x_robots = None
    if headers:
        for key, value in headers.items():
            lk = key.lower()
            if lk == "content-type":
                content_type = value
            elif lk == "x-robots-tag":
                x_robots = value
    name, codec, bom = detect_charset(body, content_type)
    if codec == "utf-8":
        tree = LexborHTMLParser(body[bom:] if bom else body)
    else:
        tree = LexborHTMLParser(body[bom:].decode(codec, "replace"))
    agent = options.robots_agent
    follow_nofollow = options.follow_nofollow
    link_rels = options.link_rels
    header_nofollow = header_noindex = False
    if x_robots:
        header_nofollow, header_noindex = _x_robots(x_robots, agent)
    frames = options.frames
    root = tree.root
    selector = _SELECTOR_FRAMES if frames else _SELECTOR
    nodes = _selector().find(selector, root) if root is not None else []
    strip = options.strip_session_ids
    cache = _absolute_cache[strip]
    if len(cache) > _ABSOLUTE_CACHE_MAX:
        cache.clear()
    cached = cache.get
    new = tuple.__new__
    # Shaped for speed (every µs counts at thousands of pages a second): one CSS pass and one
    # loop over what it found, links resolved as they come. What applies to links found
    # before it is settled afterwards: a <base href> later in the document restarts the loop
    # (the first base wins wherever it stands), a meta nofollow drops the links already kept.
    kind_of = _KINDS.get
    a_id = _A_ID
    base_href: str | None = None
    while True:
        resolver = LinkResolver(url, base_href, strip_session_ids=strip)
        resolve = resolver.resolve
        # the prefixes that make relative hrefs absolute (see _absolute_cache), on a first miss
        origin = scheme = no_fragment = no_query = directory = ""
        nofollow, noindex = header_nofollow, header_noindex
        only_canonical = nofollow and not follow_nofollow  # a nofollow page: canonical only
        title: str | None = None
        links: list[ExtractedLink] = []
        append = links.append
        seen_frames: set[int] = set()
        for node in nodes:
            tag_id = node.tag_id
            kind = "a" if tag_id == a_id else kind_of(tag_id)
            if kind == "a" or kind == "area":
                if only_canonical:
                    continue
                attrs = node.attributes
                href = attrs.get("href")
                if href is None:
                    continue
                rel = attrs.get("rel")
                if rel and not follow_nofollow and "nofollow" in rel.lower().split():
                    continue
            elif kind == "frame":
                # matched by [href] even when frames are not wanted; twice with an href too
                if only_canonical or not frames or node.mem_id in seen_frames:
                    continue
                seen_frames.add(node.mem_id)
                href = node.attributes.get("src")
                if href is None:
                    continue
            elif kind == "link":
                if not link_rels:
                    continue
                attrs = node.attributes
                rel = attrs.get("rel")
                href = attrs.get("href")
                if not rel or href is None:
                    continue
                tokens = rel.lower().split()
                if "stylesheet" in tokens or (not follow_nofollow and "nofollow" in tokens):
                    continue
                for kind in _LINK_REL_ORDER:
                    if kind in tokens and kind in link_rels:
                        break
                else:
                    continue
                if only_canonical and kind != "canonical":
                    continue
            elif kind == "meta":
                attrs = node.attributes
                if "name" not in attrs or "content" not in attrs:
                    continue  # a <meta href> found by [href]
                meta_name = (attrs["name"] or "").strip().lower()
                if meta_name == "robots" or meta_name == agent:
                    nf, ni = _robots_directives(attrs["content"] or "")
                    nofollow = nofollow or nf
                    noindex = noindex or ni
                    if nofollow and not follow_nofollow and not only_canonical:
                        only_canonical = True  # and the links kept so far go
                        links = [link for link in links if link[1] == "canonical"]
                        append = links.append
                continue
            elif kind == "title":
                if title is None:
                    title = " ".join(node.text().split())
                continue
            else:  # <base>, or another element with an href
                if kind == "base" and base_href is None:
                    base_href = node.attributes.get("href")
                    if base_href is not None:
                        break  # start again, resolving against it
                continue
            link = cached(href, _MISS)
            if link is _MISS:
                if not origin:
                    base_url = resolver.base_url
                    path_at = base_url.find("/", base_url.find("//") + 2)
                    origin = base_url[:path_at]  # scheme://authority
                    scheme = base_url[: base_url.find(":") + 1]  # "http:"
                    end = base_url.find("#", path_at)
                    no_fragment = base_url if end < 0 else base_url[:end]
                    end = no_fragment.find("?", path_at)
                    no_query = no_fragment if end < 0 else no_fragment[:end]
                    directory = no_query[: no_query.rfind("/") + 1]
                key = href
                if href[:1] <= " " or href[-1:] <= " ":  # the parser strips C0 and spaces
                    key = href.strip(_C0_SPACE)
                    if not "!" <= key[:1] <= "~":
                        key = href  # LinkResolver's own rules for blank hrefs apply
                first = key[:1]
                if first == "/":
                    if not _NOT_PLAIN(key):
                        key = (scheme if key[1:2] == "/" else origin) + key
                elif first == "?" or first == "#":
                    if not _NOT_PLAIN(key):
                        key = (no_query if first == "?" else no_fragment) + key
                elif first > " " and ":" not in key and not _NOT_PLAIN(key):
                    key = directory + key
                if key is not href:
                    link = cached(key, _MISS)
                if link is _MISS:
                    target = resolve(key)
                    if target is not None:
                        link = new(ExtractedLink, (key if target == key else target, "a"))
                    else:
                        link = None
                    if key[:7] == "http://" or key[:8] == "https://":
                        cache[key] = link
                    elif link is None and _OTHER_SCHEME(key) and not _NOT_PLAIN(key):
                        cache[key] = None  # mailto:, javascript:, tel:... wherever they stand
            if link is not None:
                append(link if kind == "a" else new(ExtractedLink, (link[0], kind)))
        else:
            break
    simhash = None
    if options.fingerprint:
        body_node = tree.body
        if body_node is not None:
            # (imported by the first page fingerprinted; compiled: parse/_simhash.pyx. Only
            # its numpy reference, where the module was not built, would load numpy)
            from .simhash import simhash_node

            simhash = simhash_node(body_node)
    return ParsedPage(
        links=tuple(links),
        nofollow=nofollow,
        noindex=noindex,
        base=resolver.base_url if base_href is not None else None,
        charset=name,
        title=title,
        simhash=simhash,
    )
