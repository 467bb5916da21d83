"""parse_sitemap: the crawler-commons conformance files (every one, expectation written per
file), the simulated web's sitemaps, limits, broken input and XML attacks."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest

import gossamer.parse.sitemaps as sitemaps_mod
from gossamer.parse import MAX_SITEMAP_ENTRIES, parse_sitemap
from gossamer.testweb import HostFlag, WebModel, WebSpec
from gossamer.testweb._content import respond
from gossamer.urls import URLError

CONFORMANCE = Path(__file__).resolve().parents[1] / "data" / "conformance" / "sitemaps"
BASE = "http://www.example.com/sitemap.xml"

# Every file of tests/data/conformance/sitemaps/ (crawler-commons; see tests/data/README.md)
# and what we expect from it: (kind, page URLs, sitemap URLs, first URL, why)
EXPECTED: dict[str, tuple[str, int, int, str | None, str]] = {
    "atom.xml": (
        "feed", 1, 0, "http://example.org/2003/12/13/atom03",
        "Atom feed: the first rel=alternate (or rel-less) <link> of each <entry>; the feed's "
        "own links and rel=edit are not pages (crawler-commons: 1 URL)",
    ),
    "do-not-visit.txt": (
        "text", 1, 0, "http://www.example.com/do-not-visit-here",
        "bait for XXE tests (test_external_entity_is_never_read); as a text sitemap: one URL",
    ),
    "sitemap-with-bom.txt": (
        "text", 2, 0, "http://www.domain.com/page1.html",
        "UTF-8 BOM before the first URL of a text sitemap is dropped",
    ),
    "sitemap.badns.xml": (
        "urlset", 2, 0, "http://www.example.com/1",
        "wrong namespace (google.com/schemas/sitemap/0.9) accepted as crawler-commons' lenient "
        "mode does; whitespace around <loc> text trimmed",
    ),
    "sitemap.index.xml": (
        "index", 0, 15, "https://example.com/sitemap.jss?portalCode=10260&lang=en",
        "index whose <sitemap> elements hold the URL as bare text, no <loc>; &amp; decoded",
    ),
    "sitemap.ns.xml": (
        "urlset", 2, 0, "http://www.example.com/1",
        "namespace with a prefix (sit:urlset, sit:loc)",
    ),
    "sitemap.txt": ("text", 2, 0, "http://www.domain.com/page1.html", "plain text sitemap"),
    "sitemap.txt.gz": (
        "text", 5, 0, "http://www.example.com/",
        "gzip (detected by magic bytes) around a text sitemap",
    ),
    "xmlSitemap.gz": (
        "urlset", 5, 0, "http://www.example.com/",
        "gzip around an XML urlset; &amp; in <loc> decoded",
    ),
    "extension/hebdenbridgetimes-articles-sitemap.xml": (
        "urlset", 74, 0,
        "http://www.hebdenbridgetimes.co.uk/news/local/video-tour-de-yorkshire-in-calderdale-1-7242580",
        "news site with mobile, image and video extensions: only <url><loc> are pages",
    ),
    "extension/pagemaps-sitemap.xml": (
        "urlset", 2, 0, "http://www.example.com/foo",
        "PageMap extension (default namespace redeclared inside <url>) ignored",
    ),
    "extension/shinpaideshou-news-sitemap.xml": (
        "urlset", 3, 0,
        "https://shinpaideshou.wordpress.com/2017/04/25/job-opening-reischauer-policy-research-fellow/",
        "Google News extension ignored",
    ),
    "extension/sitemap-images.xml": (
        "urlset", 1, 0, "http://www.example.com/images/some_image_landing_page.html",
        "image:loc is an image, not a page: only the <url><loc>",
    ),
    "extension/sitemap-links.xml": (
        "urlset", 3, 0, "http://www.example.com/english/",
        "xhtml:link hreflang alternates ignored (each is also listed as a <loc>)",
    ),
    "extension/sitemap-mobile.xml": (
        "urlset", 3, 0, "http://www.example.com/mobile-friendly-1/", "mobile extension ignored",
    ),
    "extension/sitemap-news.xml": (
        "urlset", 2, 0, "http://www.example.org/business/article55.html",
        "news extension (with empty fields) ignored",
    ),
    "extension/sitemap-videos-tvshow.xml": (
        "urlset", 1, 0, "https://example.org/my-tv-show/23/13/",
        "<loc> after a large video:video block; video:*_loc are not pages",
    ),
    "extension/sitemap-videos.xml": (
        "urlset", 3, 0, "http://www.example.com/videos/some_video_landing_page.html",
        "video extension ignored",
    ),
}  # fmt: skip


def test_every_conformance_file_has_an_expectation() -> None:
    files = {p.relative_to(CONFORMANCE).as_posix() for p in CONFORMANCE.rglob("*") if p.is_file()}
    assert files == set(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_conformance_file(name: str) -> None:
    kind, n_urls, n_sitemaps, first, _why = EXPECTED[name]
    result = parse_sitemap((CONFORMANCE / name).read_bytes(), BASE)
    assert result.kind == kind
    assert (len(result.urls), len(result.sitemaps)) == (n_urls, n_sitemaps)
    assert (result.urls or result.sitemaps)[0] == first
    assert result.error is None and not result.truncated
    assert len(set(result.urls)) == len(result.urls)


# ------------------------------------------------------------------ the simulated web


def test_simulated_web_sitemaps_list_every_page() -> None:
    """/sitemap.xml lists every page; a host with > 1000 pages gets an index of gzip parts."""
    model = WebModel(
        WebSpec(seed=3, hosts=6, pages_mean=900, profile="realistic",
                overrides=(("robots_sitemap", 1.0), ("dead_host", 0.0)))
    )  # fmt: skip
    indexes = 0
    for h, host in enumerate(model.hosts):
        assert host.flags & HostFlag.SITEMAP
        top_url = f"http://{host.name}/sitemap.xml"
        r = respond(model, model.resolve(h, "/sitemap.xml"))
        assert r.status == 200
        top = parse_sitemap(r.body, top_url)
        assert top.error is None
        if top.kind == "index":
            indexes += 1
            pages: list[str] = []
            for part in top.sitemaps:
                target = part.removeprefix(f"http://{host.name}")
                body = respond(model, model.resolve(h, target)).body
                assert body[:2] == b"\x1f\x8b"
                result = parse_sitemap(body, part)
                assert result.kind == "urlset" and result.error is None
                pages.extend(result.urls)
        else:
            assert top.kind == "urlset"
            pages = list(top.urls)
        assert pages == [model.page_url(h, i) for i in range(host.pages)]
    assert indexes >= 1


# ------------------------------------------------------------------ formats and leniency


def _urlset(*locs: str) -> bytes:
    items = "".join(f"<url><loc>{loc}</loc></url>" for loc in locs)
    return (
        '<?xml version="1.0" encoding="UTF-8"?>'
        f'<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">{items}</urlset>'
    ).encode()


def test_cdata_entities_and_nested_url_in_loc() -> None:
    body = (
        b'<?xml version="1.0"?><urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">'
        b"<url><loc><![CDATA[http://www.example.com/a?x=1&y=2]]></loc></url>"
        b"<url><loc>http://www.example.com/b?x=1&amp;y=2</loc></url>"
        b"<url><loc>http://www.example.com/c<![CDATA[?d=1&e=2]]></loc></url>"
        b"<url><loc><url><![CDATA[http://www.example.com/d]]></url></loc></url>"
        b"</urlset>"
    )
    assert parse_sitemap(body, BASE).urls == (
        "http://www.example.com/a?x=1&y=2",
        "http://www.example.com/b?x=1&y=2",
        "http://www.example.com/c?d=1&e=2",
        "http://www.example.com/d",
    )


def test_non_http_relative_and_empty_locs_are_skipped() -> None:
    body = _urlset(
        "ftp://www.example.com/f",
        "/relative",
        "",
        "   ",
        "mailto:x@y",
        "HTTPS://WWW.Example.com/ok#f",
    )
    assert parse_sitemap(body, BASE).urls == ("https://www.example.com/ok",)


def test_whitespace_before_xml_declaration_and_utf16() -> None:
    body = b"\n\n  " + _urlset("http://www.example.com/1")
    assert parse_sitemap(body, BASE).urls == ("http://www.example.com/1",)
    utf16 = _urlset("http://www.example.com/2").decode().replace("UTF-8", "UTF-16").encode("utf-16")
    assert parse_sitemap(utf16, BASE).urls == ("http://www.example.com/2",)
    bom = b"\xef\xbb\xbf" + _urlset("http://www.example.com/3")
    assert parse_sitemap(bom, BASE).urls == ("http://www.example.com/3",)


def test_rss_feeds() -> None:
    rss2 = b"""<?xml version="1.0"?><rss version="2.0"><channel>
    <link>http://www.example.com/</link>
    <item><title>a</title><link>http://www.example.com/post/1</link></item>
    <item><guid isPermaLink="true">http://www.example.com/guid.html</guid></item>
    <item><guid isPermaLink="false">not-a-url-123</guid></item>
    <item><link>http://www.example.com/post/2</link><guid>http://www.example.com/g2</guid></item>
    </channel></rss>"""
    result = parse_sitemap(rss2, BASE)
    assert result.kind == "feed"
    assert result.urls == (
        "http://www.example.com/post/1",
        "http://www.example.com/guid.html",
        "http://www.example.com/post/2",
    )
    rss1 = b"""<?xml version="1.0"?><rdf:RDF xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#"
    xmlns="http://purl.org/rss/1.0/"><channel rdf:about="http://www.example.com/news.rss">
    <link>http://www.example.com/pub</link></channel>
    <item rdf:about="http://www.example.com/pub/x.html"><link>http://www.example.com/pub/x.html</link></item>
    </rdf:RDF>"""
    assert parse_sitemap(rss1, BASE).urls == ("http://www.example.com/pub/x.html",)


def test_text_sitemap_skips_junk_lines() -> None:
    body = (
        b"# comment\r\nhttp://www.example.com/a\r\n\r\n  https://www.example.com/b  \nnot a url\n"
    )
    result = parse_sitemap(body, BASE)
    assert result.kind == "text"
    assert result.urls == ("http://www.example.com/a", "https://www.example.com/b")
    assert parse_sitemap(b"this is a bogus sitemap", BASE).kind == "unknown"
    assert parse_sitemap(b"", BASE).kind == "unknown"


def test_unknown_xml_root() -> None:
    result = parse_sitemap(b"<html><body><a href='http://x.example/'>x</a></body></html>", BASE)
    assert result.kind == "unknown" and result.urls == ()
    assert result.error is not None and "html" in result.error


def test_invalid_sitemap_url_raises() -> None:
    with pytest.raises(URLError):
        parse_sitemap(b"http://www.example.com/a", "sitemap.txt")


# ------------------------------------------------------------------ broken input and limits


def test_truncated_xml_keeps_what_was_complete() -> None:
    body = _urlset("http://www.example.com/1", "http://www.example.com/2")
    cut = body[: body.index(b"/2</loc>") + 2]  # inside the second <loc>
    result = parse_sitemap(cut, BASE)
    assert result.urls == ("http://www.example.com/1",)
    assert result.kind == "urlset" and result.error is not None
    index = (
        b'<sitemapindex xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">'
        b"<sitemap><loc>http://www.example.com/s1.xml.gz</loc><las"
    )
    partial = parse_sitemap(index, BASE)
    assert partial.kind == "index" and partial.sitemaps == ("http://www.example.com/s1.xml.gz",)


def test_malformed_xml_reports_an_error() -> None:
    body = (
        b'<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9"><url><loc>'
        b"http://www.example.com/a</loc></url></url></urlset>"
    )
    result = parse_sitemap(body, BASE)
    assert result.urls == ("http://www.example.com/a",)
    assert result.error is not None and result.error.startswith("xml:")


def test_corrupt_and_truncated_gzip() -> None:
    packed = gzip.compress(_urlset("http://www.example.com/1"))
    truncated = parse_sitemap(packed[: len(packed) // 2], BASE)
    assert truncated.error is not None and "gzip" in truncated.error
    corrupt = parse_sitemap(packed[:10] + b"\x00" * 40, BASE)
    assert corrupt.error is not None and corrupt.urls == ()
    # concatenated gzip members are one stream
    text = gzip.compress(b"http://www.example.com/a\n") + gzip.compress(
        b"http://www.example.com/b\n"
    )
    assert parse_sitemap(text, BASE).urls == (
        "http://www.example.com/a",
        "http://www.example.com/b",
    )


def test_entry_limit() -> None:
    lines = "".join(f"http://www.example.com/{i}\n" for i in range(MAX_SITEMAP_ENTRIES + 5))
    result = parse_sitemap(lines.encode(), BASE)
    assert len(result.urls) == MAX_SITEMAP_ENTRIES and result.truncated
    xml = _urlset(*(f"http://www.example.com/{i}" for i in range(MAX_SITEMAP_ENTRIES + 1)))
    result = parse_sitemap(xml, BASE)
    assert len(result.urls) == MAX_SITEMAP_ENTRIES and result.truncated
    assert result.urls[-1] == f"http://www.example.com/{MAX_SITEMAP_ENTRIES - 1}"


def test_size_limit_on_plain_and_gzip_bodies(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sitemaps_mod, "MAX_SITEMAP_BYTES", 1000)
    lines = b"".join(b"http://www.example.com/%d\n" % i for i in range(200))
    plain = parse_sitemap(lines, BASE)
    assert plain.truncated and 30 < len(plain.urls) < 45  # 1000 bytes of ~26-byte lines
    bomb = parse_sitemap(gzip.compress(lines + b"\n" * 10_000_000), BASE)
    assert bomb.truncated and 30 < len(bomb.urls) < 45


def test_billion_laughs_is_refused() -> None:
    body = b"""<?xml version="1.0"?>
<!DOCTYPE urlset [<!ENTITY a "aaaaaaaaaa"><!ENTITY b "&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;">
<!ENTITY c "&b;&b;&b;&b;&b;&b;&b;&b;&b;&b;"><!ENTITY d "&c;&c;&c;&c;&c;&c;&c;&c;&c;&c;">]>
<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9"><url><loc>http://x.example/&d;</loc></url></urlset>"""
    result = parse_sitemap(body, BASE)
    assert result.urls == () and result.error is not None
    assert "Entit" in result.error


def test_external_entity_is_never_read() -> None:
    """XXE: an entity pointing at a local file (do-not-visit.txt) must not be expanded."""
    bait = (CONFORMANCE / "do-not-visit.txt").resolve().as_uri()
    body = f"""<?xml version="1.0"?>
<!DOCTYPE urlset [<!ENTITY xxe SYSTEM "{bait}">]>
<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9"><url><loc>&xxe;</loc></url>
<url><loc>http://www.example.com/ok</loc></url></urlset>""".encode()
    result = parse_sitemap(body, BASE)
    assert "do-not-visit" not in " ".join(result.urls)
    assert result.urls == () and result.error is not None
    param = f"""<?xml version="1.0"?>
<!DOCTYPE urlset [<!ENTITY % ext SYSTEM "{bait}"> %ext;]>
<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9"><url><loc>http://www.example.com/ok</loc></url></urlset>""".encode()
    assert "do-not-visit" not in " ".join(parse_sitemap(param, BASE).urls)
