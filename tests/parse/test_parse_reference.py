"""parse_html against a straightforward reference extraction: one CSS pass over every element
links can come from, in document order, each href resolved by a fresh urls.LinkResolver (no
cache). The production code takes shortcuts (one `[href]`-based selector for links, base, meta
and title, read in a single loop that restarts on a late <base>, tag ids, prefix-keyed caches
for relative hrefs); these tests pin that the shortcuts never change a result, on whole
simulated webs and on hand-written edge cases."""

from __future__ import annotations

from collections.abc import Mapping

import pytest
from selectolax.lexbor import LexborHTMLParser

import gossamer.parse.links as links_mod
from gossamer.parse import ExtractedLink, ParsedPage, ParseOptions, parse_html
from gossamer.parse.links import _robots_directives, _x_robots, detect_charset
from gossamer.testweb import WebModel, WebSpec
from gossamer.testweb._content import respond
from gossamer.urls import LinkResolver

_SELECTOR = (
    "a[href], area[href], frame[src], iframe[src], link[href], base[href], "
    "meta[name][content], title"
)


def reference(
    body: bytes, url: str, headers: Mapping[str, str] | None, options: ParseOptions
) -> ParsedPage:
    """What parse_html returns, computed the plain way."""
    lower = {k.lower(): v for k, v in (headers or {}).items()}
    name, codec, bom = detect_charset(body, lower.get("content-type"))
    data = body[bom:]
    tree = LexborHTMLParser(data if codec == "utf-8" else data.decode(codec, "replace"))
    nofollow = noindex = False
    if lower.get("x-robots-tag"):
        nofollow, noindex = _x_robots(lower["x-robots-tag"], options.robots_agent)
    base: str | None = None
    title: str | None = None
    raw: list[tuple[str, str]] = []
    for node in tree.css(_SELECTOR):
        tag, attrs = node.tag, node.attributes
        rel_tokens = (attrs.get("rel") or "").lower().split()
        nofollow_rel = not options.follow_nofollow and "nofollow" in rel_tokens
        if tag in ("a", "area") and attrs.get("href") is not None and not nofollow_rel:
            raw.append((attrs["href"] or "", tag))
        elif tag in ("frame", "iframe") and options.frames and attrs.get("src") is not None:
            raw.append((attrs["src"] or "", "frame"))
        elif tag == "link" and attrs.get("href") is not None and rel_tokens:
            if "stylesheet" in rel_tokens or nofollow_rel:
                continue
            kinds = [k for k in ("canonical", "next", "alternate") if k in rel_tokens]
            kinds = [k for k in kinds if k in options.link_rels]
            if kinds:
                raw.append((attrs["href"] or "", kinds[0]))
        elif tag == "base" and base is None:
            base = attrs.get("href")
        elif tag == "meta":
            if (attrs.get("name") or "").strip().lower() in ("robots", options.robots_agent):
                nf, ni = _robots_directives(attrs.get("content") or "")
                nofollow, noindex = nofollow or nf, noindex or ni
        elif tag == "title" and title is None:
            title = " ".join(node.text().split())
    if nofollow and not options.follow_nofollow:
        raw = [item for item in raw if item[1] == "canonical"]
    resolver = LinkResolver(url, base, strip_session_ids=options.strip_session_ids)
    found = [(resolver.resolve(href), kind) for href, kind in raw]
    return ParsedPage(
        links=tuple(ExtractedLink(u, k) for u, k in found if u is not None),
        nofollow=nofollow,
        noindex=noindex,
        base=resolver.base_url if base is not None else None,
        charset=name,
        title=title,
    )


OPTIONS = [
    ParseOptions(),
    ParseOptions(follow_nofollow=True, link_rels=frozenset({"canonical", "next", "alternate"})),
    ParseOptions(frames=False, link_rels=frozenset(), strip_session_ids=False),
    ParseOptions(robots_agent="", link_rels=frozenset({"next"})),
]


def _check(body: bytes, url: str, headers: Mapping[str, str] | None) -> None:
    for options in OPTIONS:
        expected = reference(body, url, headers, options)
        assert parse_html(body, url, headers, options) == expected, (url, options)
        assert parse_html(body, url, headers, options) == expected, (url, options)  # cached


@pytest.mark.parametrize("profile", ["realistic", "hostile"])
def test_every_page_of_a_simulated_web_matches_the_reference(profile: str) -> None:
    model = WebModel(WebSpec(seed=11, hosts=40, pages_mean=15, profile=profile))
    for cache in links_mod._absolute_cache.values():
        cache.clear()
    checked = 0
    for h, host in enumerate(model.hosts):
        for i in range(host.pages):
            r = respond(model, model.resolve(h, model.page_target(h, i)), attempt=3)
            headers = dict(r.headers)
            if r.status == 200 and "Content-Encoding" not in headers:
                _check(r.body, model.page_url(h, i), headers)
                checked += 1
    assert checked > 200


EDGE_CASES = [
    # several kinds of link element interleaved, inside and outside <head>
    "<link rel=canonical href=/c><a href=a1><map><area href=ar></map><iframe src=if></iframe>"
    "<a href=a2><link rel=next href=n><frameset><frame src=fr></frameset>",
    # an <iframe>/<frame> with an href as well as a src; elements with href and odd tags
    "<iframe href=/h src=/s></iframe><a href=/x><foo href=/foo></foo><img href=/img src=/i>"
    "<svg><a href=/svg-a>s</a><use href=/use /><title>svg title</title><frame src=/sf /></svg>",
    # <template> content is not part of the document; <noscript> parsed as markup
    "<head><template><a href=/t></a><base href=/tb/></template><noscript>"
    "<link rel=canonical href=/ns></noscript></head><a href=x>",
    # bases: valueless, several, relative, unusable
    "<base href><base target=_top><base href=/b1/><base href=/b2/><a href=x>x</a>",
    '<base href="javascript:alert(1)"><a href=y>',
    '<base href="//other.example/dir/sub?q#f"><a href="z"><a href="?q2"><a href="#f2">',
    # metas: missing name/content, valueless, agent name, upper case, later in the body
    "<meta content=nofollow><meta name><meta name=robots><a href=a><meta name=ROBOTS "
    "content=NOINDEX><p><meta name=gossamer content='none'>",
    '<meta name="" content=nofollow><a href=q>',
    # elements found by [href] that are not links: meta, title, base
    "<meta href=/m><meta name=robots href=/m2><meta name=robots content=noindex href=/m3>"
    "<title href=/t>t</title><title>u</title><base href><base href=/b/ target=x><a href=a>",
    # a meta nofollow and a <base> after the links they apply to
    "<a href=1><link rel=canonical href=c><iframe src=f></iframe><base href=/late/><a href=2>"
    "<meta name=robots content=nofollow><a href=3><base href=/later/><link rel=next href=n>",
    # titles: none, empty, several, in svg
    "<title></title><title>second</title>",
    "<svg><title> svg  first </title></svg><title>html</title>",
    # rel tokens, case, whitespace
    "<a href=1 rel='NoFollow noopener'>1</a><a href=2 rel=nofollowx>2</a><a href=3 rel>3</a>"
    "<link rel='alternate stylesheet' href=/alt.css><link rel='Next Canonical' href=/n>"
    "<link rel=canonical><link href=/no-rel><link rel=' ' href=/blank-rel>",
    # frames without src, empty src, hrefs that are blank or junk
    "<iframe></iframe><iframe src></iframe><iframe src=''></iframe><a href=''>"
    "<a href=' '><a href='&#9;'><a href='&#160;'><a href='mailto:x'><a href='http://[bad/'>",
    # upper-case and malformed markup
    "<A HREF=/UP>up</A><AREA HREF=/area><IFRAME SRC=/if></IFRAME><a href=/unclosed><p>x</a>"
    "<table><a href=/fostered></a><tr><td><a href=/cell></a></td></tr></table>",
]


@pytest.mark.parametrize("html", EDGE_CASES)
def test_edge_cases_match_the_reference(html: str) -> None:
    url = "http://www.example.com/dir/page.html?x=1#top"
    _check(html.encode(), url, {"Content-Type": "text/html"})
    _check(html.encode(), url, {"X-Robots-Tag": "otherbot: nofollow"})


BASES = [
    "http://www.example.com/dir/page.html",
    "http://www.example.com/dir/",
    "http://www.example.com",
    "https://user:pw@www.example.com:8443/a/b?q=1#frag",
    "http://[::1]:8080/x/y?z",
    "http://www.example.com/a/b/c/d.html?sessionid=abc#x",
]
HREFS = [
    "page.html", "./page.html", "../up", "../../../../above-root", "a/./b/../c", "%2e%2e/x",
    "x/%2E/y", ".", "..", "sub/", "x?y=1#z", "x y", "café/é", "x:y", "1:2", "mailto:x",
    "javascript:void(0)", "x\\y", "x\ty", "x\ny", " page.html ", "\x01page.html\x02",
    "\xa0page", "page\xa0", "\xa0", " \xa0", "\x01\xa0 ", " ", "", "?", "?q=1", "?q=1#f", "??",
    "#", "#f", "#f?x",
    " #f", "# f", "//other.example/p", "//Other.Example:80/./p/../q", "///triple/p",
    "//", "//user@host.example/", "//[::1]/v6", "// spaced", "/\\\\evil.example/",
    "\\\\evil.example/", "/a", "/a/../b", " /lead", "/x\t/y", "/sessionid=1?sessionid=2",
    "http:relative", "HTTPS:relative", "http\t:x", "ftp:x", "Tel:+1", "\u212aa:b", "a\tb:c",
    "http://www.example.com/abs", " http://www.example.com/padded ",
    "HTTP://WWW.EXAMPLE.COM:80/./z", "https://www.example.com/a#x", "?sessionid=zz&a=b",
]  # fmt: skip


@pytest.mark.parametrize("base", BASES)
def test_relative_href_cache_resolves_exactly_like_the_resolver(base: str) -> None:
    """Every form of href, resolved cold and then from the cache keyed by its absolute
    spelling, equals a fresh LinkResolver's answer; with a <base> too."""
    html = "".join(
        f'<a href="{h}">x</a>'.replace("\t", "&#9;").replace("\n", "&#10;") for h in HREFS
    )
    for strip in (True, False):
        for cache in links_mod._absolute_cache.values():
            cache.clear()
        resolver = LinkResolver(base, strip_session_ids=strip)
        expected = [u for u in map(resolver.resolve, HREFS) if u is not None]
        options = ParseOptions(strip_session_ids=strip)
        for _ in range(2):  # cold, then from the cache
            page = parse_html(html.encode(), base, None, options)
            assert [link.url for link in page.links] == expected
        # the same hrefs against a <base>, after the cache was filled by another page
        based = f'<base href="../other/base.html?b#c">{html}'
        page = parse_html(based.encode(), base, None, options)
        assert page == reference(based.encode(), base, None, options)
