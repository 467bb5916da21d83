"""parse_html: link extraction, robots directives, <base>, charsets; checked on hand-written
documents and on every page of realistic and hostile simulated webs against the model."""

from __future__ import annotations

import pytest

from gossamer.parse import ExtractedLink, ParseOptions, detect_charset, is_html, parse_html
from gossamer.testweb import HostFlag, PageFlag, WebModel, WebSpec
from gossamer.testweb._content import respond
from gossamer.urls import LinkResolver, URLError, canonicalize

PAGE = "http://www.example.com/dir/page.html"
DEFAULT = ParseOptions()


def links(
    html: str | bytes, options: ParseOptions = DEFAULT, **headers: str
) -> list[tuple[str, str]]:
    body = html.encode() if isinstance(html, str) else html
    hdrs = {k.replace("_", "-"): v for k, v in headers.items()}
    return [(link.url, link.kind) for link in parse_html(body, PAGE, hdrs, options).links]


# ------------------------------------------------------------------ elements and resolution


def test_elements_in_document_order_resolved_and_canonical() -> None:
    html = """<html><head><link rel="canonical" href="/dir/page.html#x"></head><body>
    <a href="a.html">a</a>
    <map name=m><area href="../area.html" alt=x></map>
    <iframe src="//OTHER.example.com:80/frame"></iframe>
    <a href="HTTP://www.Example.com/./b/../c?x=1&amp;y=2#frag">c</a>
    <a href="a.html">again</a>
    </body></html>"""
    assert links(html) == [
        ("http://www.example.com/dir/page.html", "canonical"),
        ("http://www.example.com/dir/a.html", "a"),
        ("http://www.example.com/area.html", "area"),
        ("http://other.example.com/frame", "frame"),
        ("http://www.example.com/c?x=1&y=2", "a"),
        ("http://www.example.com/dir/a.html", "a"),  # duplicates are kept
    ]


def test_frameset_frames() -> None:
    html = '<html><frameset><frame src="left.html"><frame src="right.html"></frameset></html>'
    assert links(html) == [
        ("http://www.example.com/dir/left.html", "frame"),
        ("http://www.example.com/dir/right.html", "frame"),
    ]
    assert links(html, ParseOptions(frames=False)) == []


def test_junk_and_missing_hrefs_are_dropped() -> None:
    html = """<a href="mailto:x@example.com">m</a><a href="javascript:void(0)">j</a>
    <a href="tel:+1555">t</a><a href="data:,x">d</a><a href="ftp://example.com/f">f</a>
    <a name="anchor">no href</a><a href>empty attr</a><a href="http://[bad/">bad</a>
    <a href="https://secure.example.com/">ok</a>"""
    assert links(html) == [("https://secure.example.com/", "a")]


def test_session_ids_stripped_unless_asked() -> None:
    html = '<a href="/x?id=3&sessionid=abc">x</a>'
    assert links(html) == [("http://www.example.com/x?id=3", "a")]
    keep = ParseOptions(strip_session_ids=False)
    assert links(html, keep) == [("http://www.example.com/x?id=3&sessionid=abc", "a")]


def test_absolute_link_cache_does_not_leak_between_options() -> None:
    html = '<a href="http://www.example.com/y?sessionid=1">y</a>'
    assert links(html) == [("http://www.example.com/y", "a")]
    assert links(html, ParseOptions(strip_session_ids=False)) == [
        ("http://www.example.com/y?sessionid=1", "a")
    ]
    assert links(html) == [("http://www.example.com/y", "a")]


@pytest.mark.parametrize(
    ("base", "expected"),
    [
        ("http://cdn.example.net/assets/", "http://cdn.example.net/assets/x.html"),
        ("/other/", "http://www.example.com/other/x.html"),
        ("sub/", "http://www.example.com/dir/sub/x.html"),
        ("javascript:alert(1)", "http://www.example.com/dir/x.html"),  # unusable: ignored
    ],
)
def test_base_href(base: str, expected: str) -> None:
    assert links(f'<head><base href="{base}"></head><a href="x.html">x</a>') == [(expected, "a")]


def test_base_applies_to_links_before_it_and_only_the_first_counts() -> None:
    html = '<a href="x.html">x</a><base href="/first/"><base href="/second/"><a href="y">y</a>'
    page = parse_html(html.encode(), PAGE, None, DEFAULT)
    assert [link.url for link in page.links] == [
        "http://www.example.com/first/x.html",
        "http://www.example.com/first/y",
    ]
    assert page.base == "http://www.example.com/first/"
    assert parse_html(b"<a href=x>x</a>", PAGE, None, DEFAULT).base is None


def test_link_rels_as_configured() -> None:
    html = """<head><link rel="canonical" href="/c"><link rel="next" href="/n">
    <link rel="alternate" hreflang="de" href="/de/"><link rel="stylesheet" href="/s.css">
    <link rel="alternate stylesheet" href="/alt.css"><link rel="icon" href="/i.ico">
    <link rel="Canonical Next" href="/both"></head>"""
    assert links(html) == [
        ("http://www.example.com/c", "canonical"),
        ("http://www.example.com/both", "canonical"),
    ]
    every = ParseOptions(link_rels=frozenset({"canonical", "next", "alternate"}))
    assert links(html, every) == [
        ("http://www.example.com/c", "canonical"),
        ("http://www.example.com/n", "next"),
        ("http://www.example.com/de/", "alternate"),
        ("http://www.example.com/both", "canonical"),
    ]
    assert links(html, ParseOptions(link_rels=frozenset())) == []


def test_unknown_link_rel_option_is_refused() -> None:
    with pytest.raises(ValueError, match="stylesheet"):
        ParseOptions(link_rels=frozenset({"stylesheet"}))


def test_invalid_page_url_raises() -> None:
    with pytest.raises(URLError):
        parse_html(b"<a href=x>", "not a url", None, DEFAULT)


def test_empty_and_garbage_bodies() -> None:
    assert parse_html(b"", PAGE, None, DEFAULT).links == ()
    page = parse_html(bytes(range(256)) * 40, PAGE, None, DEFAULT)
    assert page.links == () and page.title is None


# ------------------------------------------------------------------ robots directives


def test_rel_nofollow_links_are_skipped_unless_followed() -> None:
    html = '<a href="/f" rel="external NoFollow">f</a><a href="/k" rel="noopener">k</a>'
    assert links(html) == [("http://www.example.com/k", "a")]
    assert links(html, ParseOptions(follow_nofollow=True)) == [
        ("http://www.example.com/f", "a"),
        ("http://www.example.com/k", "a"),
    ]


@pytest.mark.parametrize(
    ("content", "nofollow", "noindex"),
    [
        ("noindex,nofollow", True, True),
        ("NOFOLLOW", True, False),
        ("noindex", False, True),
        ("none", True, True),
        ("index, follow", False, False),
        ("noarchive nofollow", True, False),
    ],
)
def test_meta_robots(content: str, nofollow: bool, noindex: bool) -> None:
    html = f"""<head><meta name="Robots" content="{content}">
    <link rel=canonical href="/dir/page.html"></head><a href="/x">x</a>"""
    page = parse_html(html.encode(), PAGE, None, DEFAULT)
    assert (page.nofollow, page.noindex) == (nofollow, noindex)
    urls = [link.url for link in page.links]
    # the canonical link names the page itself: it is kept even on a nofollow page
    expected = [PAGE] if nofollow else [PAGE, "http://www.example.com/x"]
    assert urls == expected
    followed = parse_html(html.encode(), PAGE, None, ParseOptions(follow_nofollow=True))
    assert followed.nofollow == nofollow
    assert [link.url for link in followed.links] == [PAGE, "http://www.example.com/x"]


def test_meta_for_our_agent_counts_and_others_do_not() -> None:
    ours = '<meta name="gossamer" content="nofollow"><a href="/x">x</a>'
    theirs = '<meta name="googlebot" content="nofollow"><a href="/x">x</a>'
    assert parse_html(ours.encode(), PAGE, None, DEFAULT).nofollow
    assert not parse_html(theirs.encode(), PAGE, None, DEFAULT).nofollow
    other_agent = ParseOptions(robots_agent="googlebot")
    assert parse_html(theirs.encode(), PAGE, None, other_agent).nofollow


@pytest.mark.parametrize(
    ("value", "nofollow", "noindex"),
    [
        ("nofollow", True, False),
        ("noindex", False, True),
        ("none", True, True),
        ("noindex, nofollow", True, True),
        ("googlebot: nofollow", False, False),
        ("gossamer: nofollow", True, False),
        ("unavailable_after: 25 Jun 2010 15:00:00 PST, noindex", False, True),
        ("max-snippet: 20, nofollow", True, False),
    ],
)
def test_x_robots_tag(value: str, nofollow: bool, noindex: bool) -> None:
    page = parse_html(b'<a href="/x">x</a>', PAGE, {"X-Robots-Tag": value}, DEFAULT)
    assert (page.nofollow, page.noindex) == (nofollow, noindex)
    assert len(page.links) == (0 if nofollow else 1)


# ------------------------------------------------------------------ charsets and title


def test_title_whitespace_folded() -> None:
    page = parse_html(b"<title>\n  A   title\t here </title>", PAGE, None, DEFAULT)
    assert page.title == "A title here"


@pytest.mark.parametrize(
    ("body", "content_type", "name", "title"),
    [
        (
            "<title>café</title>".encode("cp1252"),
            "text/html; charset=ISO-8859-1",
            "windows-1252",
            "café",
        ),
        (
            "<title>€uro</title>".encode("cp1252"),
            'text/html; charset="windows-1252"',
            "windows-1252",
            "€uro",
        ),
        (
            '<meta charset="shift_jis"><title>日本語</title>'.encode("shift_jis"),
            "text/html",
            "shift_jis",
            "日本語",
        ),
        (
            (
                '<meta http-equiv="Content-Type" content="text/html; charset=Shift_JIS">'
                "<title>テスト</title>"
            ).encode("shift_jis"),
            None,
            "shift_jis",
            "テスト",
        ),
        ("<title>naïve</title>".encode(), "text/html", "utf-8", "naïve"),
        (b"\xef\xbb\xbf<title>bom</title>", "text/html; charset=windows-1252", "utf-8", "bom"),
        ("<title>utf16</title>".encode("utf-16"), None, "utf-16le", "utf16"),
        # the header wins over the meta tag
        (
            '<meta charset="utf-8"><title>é</title>'.encode("cp1252"),
            "text/html; charset=latin1",
            "windows-1252",
            "é",
        ),
        # a meta tag claiming UTF-16 is read as UTF-8 (HTML standard)
        ('<meta charset="utf-16"><title>ü</title>'.encode(), None, "utf-8", "ü"),
        # unknown labels fall through to the next source
        (
            '<meta charset="x-no-such"><title>ü</title>'.encode(),
            "text/html; charset=bogus",
            "utf-8",
            "ü",
        ),
        (
            b"<title>broken \xff\xfe ok</title>",
            "text/html; charset=utf-8",
            "utf-8",
            "broken \ufffd\ufffd ok",
        ),
    ],
)
def test_charsets(body: bytes, content_type: str | None, name: str, title: str) -> None:
    headers = {"content-type": content_type} if content_type else None
    link = '<a href="/x">x</a>'.encode("utf-16-le" if name == "utf-16le" else "ascii")
    page = parse_html(body + link, PAGE, headers, DEFAULT)
    assert page.charset == name
    assert page.title == title
    assert [link.url for link in page.links] == ["http://www.example.com/x"]


def test_detect_charset_ignores_meta_beyond_1024_bytes() -> None:
    body = b"<!--" + b"x" * 1100 + b'--><meta charset="shift_jis">'
    assert detect_charset(body, None)[0] == "utf-8"
    assert detect_charset(b'<meta charset="euc-jp">', None)[:2] == ("euc-jp", "euc_jp")
    assert detect_charset(b"", "text/html; charset=base64")[0] == "utf-8"  # not a text codec


def test_non_ascii_href_in_legacy_encoding() -> None:
    body = '<a href="/caf\u00e9">c</a>'.encode("cp1252")
    page = parse_html(body, PAGE, {"Content-Type": "text/html; charset=windows-1252"}, DEFAULT)
    assert [link.url for link in page.links] == ["http://www.example.com/caf%C3%A9"]


# ------------------------------------------------------------------ is_html


@pytest.mark.parametrize(
    ("content_type", "body", "expected"),
    [
        ("text/html", None, True),
        ("TEXT/HTML; charset=utf-8", None, True),
        ("application/xhtml+xml", None, True),
        ("application/pdf", b"<html>", False),
        ("text/plain", None, False),
        ("image/png", None, False),
        (None, b"  <!DOCTYPE html><html>", True),
        ("", b"<HTML><body>", True),
        (None, b"%PDF-1.4", False),
        (None, b"\x89PNG\r\n", False),
        (None, None, False),
    ],
)
def test_is_html(content_type: str | None, body: bytes | None, expected: bool) -> None:
    assert is_html(content_type, body) is expected


# ------------------------------------------------------------------ the simulated web


def _expected(model: WebModel, h: int, i: int, session: bool = False) -> list[str]:
    """What a correct crawler follows on page i of host h (docs/testweb.md, Ground truth)."""
    plan = model.plan(h, i)
    out = [] if plan.nofollow_page else [
        canonicalize(link.url) for link in plan.links if link.url and not link.nofollow
    ]  # fmt: skip
    if i % 5 == 0 or session:
        out.insert(0, model.page_url(h, i))
    return out


@pytest.mark.parametrize("profile", ["realistic", "hostile"])
def test_every_page_of_a_simulated_web(profile: str) -> None:
    """For every 200 HTML page: the followed links are exactly the model's, in order."""
    model = WebModel(WebSpec(seed=5, hosts=50, pages_mean=20, profile=profile))
    pages = nofollow_pages = charset_pages = 0
    for h, host in enumerate(model.hosts):
        for i in range(host.pages):
            res = model.resolve(h, model.page_target(h, i))
            r = respond(model, res, attempt=3)  # past first-request 503s and resets
            headers = dict(r.headers)
            if r.status != 200 or "Content-Encoding" in headers:
                continue  # errors, hangs, resets and broken gzip have no links
            url = model.page_url(h, i)
            page = parse_html(r.body, url, headers, DEFAULT)
            assert [link.url for link in page.links] == _expected(model, h, i), url
            assert (page.title or "").lower() == f"{host.name} page {i}"  # malformed: upper case
            if host.charset != "utf-8" and host.charset_decl != 3:
                assert page.charset == {"iso-8859-1": "windows-1252"}.get(
                    host.charset, host.charset
                ), url
                charset_pages += 1
            flags = model.plan(h, i).flags
            meta_nf = bool(flags & (PageFlag.META_NOFOLLOW | PageFlag.XROBOTS_NOFOLLOW))
            assert page.nofollow == meta_nf
            assert page.noindex == bool(
                flags & (PageFlag.META_NOFOLLOW | PageFlag.META_NOINDEX | PageFlag.XROBOTS_NOINDEX)
            )
            pages += 1
            nofollow_pages += page.nofollow
    assert pages > 500 and nofollow_pages > 0 and charset_pages > 0


def test_session_url_pages_name_their_clean_url() -> None:
    model = WebModel(WebSpec(seed=5, hosts=20, pages_mean=20, profile="realistic"))
    target = model.page_target(0, 1) + "?sessionid=00ff00ff00ff"
    res = model.resolve(0, target)
    r = respond(model, res)
    page = parse_html(r.body, model.url_of(0, target), dict(r.headers), DEFAULT)
    assert page.links[0] == ExtractedLink(model.page_url(0, 1), "canonical")
    assert [link.url for link in page.links] == _expected(model, 0, 1, session=True)


def test_non_page_html_resources_of_the_web() -> None:
    """Trap pages and HTML served under a .pdf name: links as the model lists them."""
    model = WebModel(
        WebSpec(seed=2, hosts=30, pages_mean=20, profile="hostile", overrides=(("trap_host", 1.0),))
    )
    checked = 0
    for h, host in enumerate(model.hosts[:10]):
        assert host.flags & HostFlag.TRAPS
        if host.flags & HostFlag.DEAD:
            continue  # answers nothing
        for target in (
            "/calendar/2026/11/",
            "/deep/a/b/",
            "/search.php?q=shoes&sort=price&page=1",
            "/files/report-7.pdf",
        ):
            res = model.resolve(h, target)
            r = respond(model, res)
            assert r.status == 200, target
            page = parse_html(r.body, model.url_of(h, target), dict(r.headers), DEFAULT)
            expected = [canonicalize(link.url) for link in model.resource_links(res)]
            assert [link.url for link in page.links] == expected
            checked += 1
    assert checked >= 32


@pytest.mark.parametrize(
    "base",
    [
        "http://www.example.com/dir/page.html",
        "https://user:pw@www.example.com:8443/a/b?q=1#frag",
        "http://[::1]:8080/x/",
    ],
)
def test_link_caches_resolve_exactly_like_the_resolver(base: str) -> None:
    """The absolute and root-relative caches never change a result (tricky hrefs included),
    neither when filling nor when hit."""
    hrefs = [
        "/a", "/a/../b", "/./c", "/%2e%2e/d", "/?q=1", "/#f", "/x y", "/x\t/y", "/\t/evil.example/",
        "/\\evil.example/", "//evil.example/p", "/a\\b", "/a\n/b", "/café",
        "/sessionid=1?sessionid=2",
        "http://www.example.com/a", "https://www.example.com/a#x", "http://Ex.COM:80/./z ",
        "page.html", "../up", "?only", "#frag", "", " /lead",
    ]  # fmt: skip
    html = (
        "".join(f'<a href="{h}">x</a>' for h in hrefs).replace("\t", "&#9;").replace("\n", "&#10;")
    )
    for strip in (True, False):
        resolver = LinkResolver(base, strip_session_ids=strip)
        expected = [u for u in map(resolver.resolve, hrefs) if u is not None]
        options = ParseOptions(strip_session_ids=strip)
        for _ in range(2):  # cold, then from the cache
            page = parse_html(html.encode(), base, None, options)
            assert [link.url for link in page.links] == expected
