"""gossamer.urls: canonical form, link resolution, keys, registrable domains, extensions.

The canonical form must agree with the simulated web's truth on every link the web renders:
`test_resolver_agrees_with_the_simulated_web` parses rendered pages with a real HTML5 parser
and resolves every href with `LinkResolver`.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest
from hypothesis import given
from hypothesis import strategies as st
from selectolax.lexbor import LexborHTMLParser

from gossamer import urls
from gossamer.testweb import HostFlag, PageFlag, WebModel, WebSpec, canonical_url
from gossamer.testweb._content import respond
from gossamer.testweb._model import SESSION_PARAMS as WEB_SESSION_PARAMS
from gossamer.testweb._truth import NON_HTML_EXTENSIONS as TRUTH_NON_HTML
from gossamer.urls import (
    LinkResolver,
    URLError,
    canonicalize,
    fingerprint,
    has_non_html_extension,
    host_key,
    host_of,
    registrable_domain,
    split_host_key,
)

# ------------------------------------------------------------------ canonicalize


@pytest.mark.parametrize(
    ("url", "canonical"),
    [
        ("HTTP://WWW.Example.COM/", "http://www.example.com/"),
        ("http://example.com", "http://example.com/"),
        ("http://example.com:80/a", "http://example.com/a"),
        ("https://example.com:443/a", "https://example.com/a"),
        ("http://example.com:8080/a", "http://example.com:8080/a"),
        ("https://example.com:80/a", "https://example.com:80/a"),
        ("http://example.com/a/./b/../c", "http://example.com/a/c"),
        ("http://example.com/a/%2e%2E/c", "http://example.com/c"),
        ("http://example.com/a#frag", "http://example.com/a"),
        ("http://example.com/a?#frag", "http://example.com/a"),
        ("http://example.com/a?", "http://example.com/a"),
        ("http://example.com/%7euser/%41%62", "http://example.com/~user/Ab"),
        ("http://example.com/a%2fb%3a", "http://example.com/a%2Fb%3A"),
        ("http://example.com/?q=%e2%82%ac", "http://example.com/?q=%E2%82%AC"),
        ("http://example.com/%%36%31%7e", "http://example.com/%%36%31%7E"),
        ("http://example.com/100%/%41", "http://example.com/100%/%41"),
        ("http://example.com/caf\u00e9", "http://example.com/caf%C3%A9"),
        ("http://B\u00fccher.de/", "http://xn--bcher-kva.de/"),
        ("http://example.com./a", "http://example.com/a"),
        ("http://example.com..:8080/a", "http://example.com:8080/a"),
        ("http://0x7f.1/", "http://127.0.0.1/"),
        ("http://[::FFFF:127.0.0.1]:80/", "http://[::ffff:7f00:1]/"),
        ("  http://example.com/a b  ", "http://example.com/a%20b"),
        ("http://example.com/Path?B=2&a=1", "http://example.com/Path?B=2&a=1"),
        ("http://example.com//a//b", "http://example.com//a//b"),
        ("http://user:pw@example.com/", "http://user:pw@example.com/"),
    ],
)
def test_canonicalize(url: str, canonical: str) -> None:
    assert canonicalize(url) == canonical
    assert canonicalize(canonical) == canonical


@pytest.mark.parametrize(
    ("url", "stripped", "kept"),
    [
        ("http://h/p?sessionid=abc", "http://h/p", "http://h/p?sessionid=abc"),
        ("http://h/p?a=1&SID=2&b=3", "http://h/p?a=1&b=3", "http://h/p?a=1&SID=2&b=3"),
        ("http://h/p?JSESSIONID=1&PhpSessId=2", "http://h/p", None),
        ("http://h/p?sid", "http://h/p", None),
        ("http://h/p?side=1&sids=2&xsid=3", "http://h/p?side=1&sids=2&xsid=3", None),
        ("http://h/p?%73id=1&x=2", "http://h/p?x=2", "http://h/p?sid=1&x=2"),
        ("http://h/p?a=1#sid=2", "http://h/p?a=1", None),
    ],
)
def test_session_ids(url: str, stripped: str, kept: str | None) -> None:
    assert canonicalize(url) == stripped
    assert canonicalize(url, strip_session_ids=False) == (kept or url.partition("#")[0])


def test_session_params_are_the_simulated_webs() -> None:
    assert urls.SESSION_PARAMS == WEB_SESSION_PARAMS


@pytest.mark.parametrize(
    "url",
    ["", "example.com/a", "/relative", "http://", "http://exa mple.com/", "http://[::1/",
     "http://a:99999/", "http://./"],
)  # fmt: skip
def test_canonicalize_rejects_invalid(url: str) -> None:
    with pytest.raises(URLError):
        canonicalize(url)


@pytest.mark.parametrize(
    "url", ["ftp://example.com/", "mailto:a@b.c", "javascript:void(0)", "file:///etc/passwd"]
)
def test_canonicalize_rejects_other_schemes(url: str) -> None:
    with pytest.raises(URLError, match="only http and https"):
        canonicalize(url)


def test_url_error_is_a_value_error() -> None:
    assert issubclass(URLError, ValueError)


# a printable-ASCII URL tail, with the characters that exercise every step
_TAIL = st.lists(
    st.sampled_from([*"abcXYZ019-._~%/?#&=;:@!$'()*+,[]{}|\\^` \u00e9", "%41", "%7e", "%2e", ".."]),
    max_size=30,
).map("".join)


@given(
    scheme=st.sampled_from(["http", "https", "HTTP"]),
    host=st.sampled_from(["example.com", "WWW.Example.com.", "127.0.0.1", "xn--bcher-kva.de"]),
    port=st.sampled_from(["", ":80", ":443", ":8080"]),
    tail=_TAIL,
)
def test_canonicalize_is_idempotent(scheme: str, host: str, port: str, tail: str) -> None:
    try:
        once = canonicalize(f"{scheme}://{host}{port}/{tail}")
    except URLError:
        return
    assert canonicalize(once) == once
    assert "#" not in once
    assert "?" not in once or once.partition("?")[2]  # no empty query
    assert once == once.strip()


# ------------------------------------------------------------------ LinkResolver

PAGE = "http://www.h1.example/news/page-3.html"


@pytest.mark.parametrize(
    ("href", "resolved"),
    [
        ("page-4.html", "http://www.h1.example/news/page-4.html"),
        ("../blog/page-5.html", "http://www.h1.example/blog/page-5.html"),
        ("./page-6.html#top", "http://www.h1.example/news/page-6.html"),
        ("/", "http://www.h1.example/"),
        ("?cat=news&id=3", "http://www.h1.example/news/page-3.html?cat=news&id=3"),
        ("//WWW.H2.Example/x", "http://www.h2.example/x"),
        ("http://www.h2.example:80/x", "http://www.h2.example/x"),
        ("HTTPS://www.h2.example:443/x", "https://www.h2.example/x"),
        ("  /news/page-7.html\n", "http://www.h1.example/news/page-7.html"),
        ("/a?sessionid=12ab&x=1", "http://www.h1.example/a?x=1"),
        ("#top", "http://www.h1.example/news/page-3.html"),
        ("", None),
        ("   ", None),
        ("mailto:webmaster@example.org", None),
        ("javascript:void(0)", None),
        ("tel:+15555550100", None),
        ("data:,x", None),
        ("ftp://example.com/x", None),
        ("http://exa mple.com/", None),
        ("http://[::1", None),
        ("http://./", None),
    ],
)
def test_resolve(href: str, resolved: str | None) -> None:
    assert LinkResolver(PAGE).resolve(href) == resolved


def test_resolve_keeps_session_ids_when_asked() -> None:
    resolver = LinkResolver(PAGE, strip_session_ids=False)
    assert resolver.resolve("/a?sessionid=1") == "http://www.h1.example/a?sessionid=1"


@pytest.mark.parametrize(
    ("base_href", "resolved"),
    [
        ("/docs/", "http://www.h1.example/docs/x.html"),
        ("http://other.example/base/", "http://other.example/base/x.html"),
        ("javascript:alert(1)", "http://www.h1.example/news/x.html"),  # ignored
        ("http://[::1", "http://www.h1.example/news/x.html"),  # unparseable: ignored
        ("", "http://www.h1.example/news/x.html"),
    ],
)
def test_resolve_against_base_href(base_href: str, resolved: str) -> None:
    assert LinkResolver(PAGE, base_href).resolve("x.html") == resolved


@pytest.mark.parametrize("page", ["not a url", "ftp://example.com/", "/relative"])
def test_resolver_needs_an_http_page(page: str) -> None:
    with pytest.raises(URLError):
        LinkResolver(page)


def _rendered_links(
    model: WebModel, pages_per_host: int
) -> Iterator[tuple[str, list[str], list[str], str | None]]:
    """(page URL, hrefs as an HTML5 parser sees them, the model's link URLs, base href) of
    every page that renders its links."""
    skip = PageFlag.RESET_ALWAYS | PageFlag.RESET_ONCE | PageFlag.HANG
    skip |= PageFlag.ERROR_500 | PageFlag.TRANSIENT_503 | PageFlag.BROKEN_GZIP
    for h, host in enumerate(model.hosts):
        if host.flags & HostFlag.DEAD:
            continue
        for i in range(min(host.pages, pages_per_host)):
            plan = model.plan(h, i)
            if plan.flags & skip:
                continue
            resp = respond(model, model.resolve(h, model.page_target(h, i)))
            assert resp.status == 200
            tree = LexborHTMLParser(resp.body.decode(host.charset, errors="replace"))
            base = tree.css_first("base[href]")
            base_href = base.attributes.get("href") if base is not None else None
            hrefs = [
                (n.attributes.get("src") if n.tag == "iframe" else n.attributes.get("href")) or ""
                for n in tree.css("a[href], area[href], iframe[src]")
            ]
            want = [link.url for link in plan.links]
            yield model.page_url(h, i), hrefs, want, base_href


@pytest.mark.parametrize("profile", ["realistic", "hostile"])
def test_resolver_agrees_with_the_simulated_web(profile: str) -> None:
    """Every rendered href, resolved and canonicalised here, is the model's link URL; with
    session ids stripped it is the truth's canonical URL. Junk links (mailto:, javascript:,
    tel:, data:) have no model URL and resolve to None."""
    model = WebModel(
        WebSpec(
            seed=5,
            hosts=60,
            pages_mean=15,
            profile=profile,
            overrides=(("link_forms", 1.0), ("session_link", 0.2), ("junk_link", 0.1)),
        )
    )
    links = 0
    for page, hrefs, want, base_href in _rendered_links(model, 8):
        keep = LinkResolver(page, base_href, strip_session_ids=False)
        strip = LinkResolver(page, base_href)
        assert len(hrefs) == len(want), page
        for href, url in zip(hrefs, want, strict=True):
            if not url:
                assert keep.resolve(href) is None, (page, href)
                continue
            assert keep.resolve(href) == url, (page, href)
            assert strip.resolve(href) == canonical_url(url), (page, href)
            links += 1
    assert links > 3000


# ------------------------------------------------------------------ keys


def test_fingerprint_is_unsigned_64_bit_and_stable() -> None:
    fp = fingerprint("http://www.h1.example/")
    assert 0 <= fp < 2**64
    assert fp == fingerprint("http://www.h1.example/")
    assert fp != fingerprint("http://www.h1.example/x")
    assert fingerprint("http://example.com/\udcff") >= 0  # lone surrogates do not raise
    fps = {fingerprint(f"http://h{i}.example/p/{i}") for i in range(20_000)}
    assert len(fps) == 20_000


@pytest.mark.parametrize(
    ("url", "key", "host"),
    [
        ("http://WWW.Example.COM:80/x", "www.example.com", "www.example.com"),
        ("https://example.com:443/", "example.com", "example.com"),
        ("https://example.com:8443/", "example.com:8443", "example.com"),
        ("http://example.com:443/", "example.com:443", "example.com"),
        ("http://example.com.:81/", "example.com:81", "example.com"),
        ("http://example.com./", "example.com", "example.com"),
        ("http://user:pw@example.com/", "example.com", "example.com"),
        ("http://[::1]:8080/", "[::1]:8080", "[::1]"),
        ("http://B\u00fccher.de/", "xn--bcher-kva.de", "xn--bcher-kva.de"),
        # the scheme is not part of the key: http and https of one host are one host
        ("http://h.example/", "h.example", "h.example"),
        ("https://h.example/", "h.example", "h.example"),
        ("http://h.example:80/", "h.example", "h.example"),
        ("https://H.EXAMPLE:443/a", "h.example", "h.example"),
        ("https://h.example:80/", "h.example:80", "h.example"),  # 80 is http's default only
        ("http://h.example:08080/", "h.example:8080", "h.example"),
        # IPv4: any spelling WHATWG accepts is dotted-decimal in the key
        ("http://127.0.0.1:8081/index.html", "127.0.0.1:8081", "127.0.0.1"),
        ("http://0x7f.1:8081/", "127.0.0.1:8081", "127.0.0.1"),
        ("http://2130706433/", "127.0.0.1", "127.0.0.1"),
        ("https://127.0.0.1:443/", "127.0.0.1", "127.0.0.1"),
        # IPv6: brackets kept, compressed, default port dropped
        ("http://[::1]/", "[::1]", "[::1]"),
        ("https://[::1]:443/", "[::1]", "[::1]"),
        ("http://[0:0:0:0:0:0:0:1]:8080/", "[::1]:8080", "[::1]"),
        ("http://[2001:DB8::A]:80/", "[2001:db8::a]", "[2001:db8::a]"),
        # IDNA with a port, upper case and a trailing dot
        ("http://B\u00dcCHER.ex.:8080/", "xn--bcher-kva.ex:8080", "xn--bcher-kva.ex"),
        ("https://xn--bcher-kva.example/", "xn--bcher-kva.example", "xn--bcher-kva.example"),
    ],
)
def test_host_key_and_host_of(url: str, key: str, host: str) -> None:
    assert host_key(url) == key
    assert host_of(url) == host


@pytest.mark.parametrize(
    "url",
    [
        "http://WWW.B\u00fccher.example.:8080/a/../b?x#y",
        "https://[0:0::1]:443/",
        "http://0x7f.0.0.1:8081/",
        "http://h.example:80/",
    ],
)
def test_host_key_is_the_same_for_a_url_and_its_canonical_form(url: str) -> None:
    # the frontier keys canonical URLs, Scope keys the seeds as given: both must agree
    assert host_key(canonicalize(url)) == host_key(url)


@pytest.mark.parametrize(
    ("key", "parts"),
    [
        ("h.example", ("h.example", None)),
        ("h.example:8080", ("h.example", 8080)),
        ("127.0.0.1:8081", ("127.0.0.1", 8081)),
        ("[::1]", ("[::1]", None)),
        ("[::1]:8080", ("[::1]", 8080)),
        ("[2001:db8::a]:443", ("[2001:db8::a]", 443)),
    ],
)
def test_split_host_key(key: str, parts: tuple[str, int | None]) -> None:
    assert split_host_key(key) == parts


@pytest.mark.parametrize(
    "url", ["http://h.example:8080/", "http://[::1]:8080/", "https://10.0.0.1/", "http://h/"]
)
def test_split_host_key_inverts_host_key(url: str) -> None:
    name, port = split_host_key(host_key(url))
    assert name == host_of(url)
    assert (f"{name}:{port}" if port is not None else name) == host_key(url)


def test_split_host_key_rejects_a_port_that_is_no_number() -> None:
    with pytest.raises(URLError):
        split_host_key("h.example:http")


@pytest.mark.parametrize("url", ["mailto:a@b.c", "not a url", "ftp://example.com/"])
def test_host_key_rejects(url: str) -> None:
    with pytest.raises(URLError):
        host_key(url)
    with pytest.raises(URLError):
        host_of(url)


@pytest.mark.parametrize(
    ("host", "domain"),
    [
        ("www.h12.example", "h12.example"),
        ("blog.h12.example", "h12.example"),
        ("h12.example", "h12.example"),
        ("www.bbc.co.uk", "bbc.co.uk"),
        ("a.b.c.example.com", "example.com"),
        ("WWW.Example.COM.", "example.com"),
        ("www.example.com:8080", "example.com"),
        ("foo.blogspot.com", "foo.blogspot.com"),
        ("www.b\u00fccher.de", "xn--bcher-kva.de"),
        ("co.uk", "co.uk"),
        ("example", "example"),
        ("localhost", "localhost"),
        ("127.0.0.1", "127.0.0.1"),
        ("127.1.0.13", "127.1.0.13"),
        ("[::1]", "[::1]"),
        ("[::1]:8080", "[::1]"),
        ("127.0.0.1:8081", "127.0.0.1"),
        ("[2001:db8::a]:8080", "[2001:db8::a]"),
        ("a.example.com:8080", "example.com"),
        ("xn--bcher-kva.example:8080", "xn--bcher-kva.example"),
    ],
)
def test_registrable_domain(host: str, domain: str) -> None:
    assert registrable_domain(host) == domain


def test_registrable_domain_needs_no_network(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_network(*args: object, **kwargs: object) -> None:
        raise AssertionError("network used")

    monkeypatch.setattr(socket, "socket", no_network)
    monkeypatch.setattr(socket, "create_connection", no_network)
    monkeypatch.setattr(socket, "getaddrinfo", no_network)
    urls._psl.cache_clear()
    registrable_domain.cache_clear()
    assert registrable_domain("news.example.co.jp") == "example.co.jp"


def test_registrable_domain_matches_the_simulated_webs_domains() -> None:
    model = WebModel(WebSpec(seed=3, hosts=50))
    for host in model.hosts:
        assert registrable_domain(host.name) == host.name.split(".", 1)[1]


# ------------------------------------------------------------------ extensions


@pytest.mark.parametrize(
    ("url", "non_html"),
    [
        ("http://h/files/doc-1.pdf", True),
        ("http://h/img/PIC.JPG", True),
        ("http://h/a.tar.gz?x=1", True),
        ("http://h/a.css#x", True),
        ("/x/y.mp4", True),
        ("http://h/page.html", False),
        ("http://h/view.php?file=a.pdf", False),
        ("http://h/dir.pdf/", False),
        ("http://h/media/item-3", False),
        ("http://h.pdf", False),
        ("http://h/", False),
        ("http://h/.pdf", True),
    ],
)
def test_has_non_html_extension(url: str, non_html: bool) -> None:
    assert has_non_html_extension(url) is non_html


def test_non_html_extensions_are_the_truths() -> None:
    assert urls.NON_HTML_EXTENSIONS == TRUTH_NON_HTML


def test_split_userinfo_keeps_delimiters_in_the_password() -> None:
    from gossamer.urls import split_userinfo

    assert split_userinfo("redis://host:6379/0") is None
    assert split_userinfo("redis://:pw@host/0") == ("redis://", "", "pw", "host/0")
    parts = ("http://", "u", "p/w#x@y", "proxy:3128")
    assert split_userinfo("http://u:p/w#x@y@proxy:3128") == parts
    assert split_userinfo("http://user@proxy") == ("http://", "user", None, "proxy")
    assert split_userinfo("u:pw@proxy:3128") == ("", "u", "pw", "proxy:3128")
    assert split_userinfo("http://u:@h") == ("http://", "u", "", "h")
