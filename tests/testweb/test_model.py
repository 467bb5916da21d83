"""The simulated web's model and content: determinism, shape, and every content-level switch.

Links are checked the way a crawler sees them: the rendered HTML is parsed with a real HTML5
parser (selectolax/lexbor) and every href resolved with a WHATWG URL parser (ada), which must
give exactly the URLs the model says the page links to.
"""

from __future__ import annotations

import gzip
import statistics
import zlib

import can_ada
import protego
import pytest
from selectolax.lexbor import LexborHTMLParser

from gossamer.testweb import HostFlag, Kind, PageFlag, WebModel, WebSpec
from gossamer.testweb._content import respond, sitemap_body
from gossamer.testweb._model import SESSION_PARAMS

SMALL = WebSpec(seed=7, hosts=60, pages_mean=30, profile="realistic")


def forced(**rates: float) -> WebModel:
    """A small realistic web with some switches forced to the given rates."""
    return WebModel(
        WebSpec(
            seed=11, hosts=40, pages_mean=25, profile="realistic", overrides=tuple(rates.items())
        )
    )


def extract(body: bytes, doc_url: str, charset: str = "utf-8") -> list[str]:
    """What a crawler extracts: hrefs of a/area/iframe, resolved against <base> or the URL,
    fragments dropped, http(s) only."""
    tree = LexborHTMLParser(body.decode(charset, errors="replace"))
    base = can_ada.parse(doc_url)
    node = tree.css_first("base[href]")
    if node is not None:
        base = base + (node.attributes.get("href") or "")
    out = []
    for n in tree.css("a[href], area[href], iframe[src]"):
        href = n.attributes.get("href") if n.tag != "iframe" else n.attributes.get("src")
        u = base + (href or "")
        if u.protocol not in ("http:", "https:"):
            continue
        u.hash = ""
        out.append(u.href)
    return out


def url_parts(url: str) -> tuple[str, str]:
    u = can_ada.parse(url)
    return u.hostname, u.pathname + u.search


def fetch(model: WebModel, url: str, **kw: object) -> tuple[int, dict[str, str], bytes]:
    host, target = url_parts(url)
    res = model.resolve(model.by_name[host], target)
    r = respond(model, res, **kw)  # type: ignore[arg-type]
    return r.status, dict(r.headers), r.body


# ------------------------------------------------------------------ determinism


def test_same_seed_same_bytes() -> None:
    a, b = WebModel(SMALL), WebModel(SMALL)
    assert a.hosts == b.hosts
    for h in range(0, 60, 7):
        for i in range(min(a.hosts[h].pages, 15)):
            ra = respond(a, a.resolve(h, a.page_target(h, i)), accept_encoding="gzip")
            rb = respond(b, b.resolve(h, b.page_target(h, i)), accept_encoding="gzip")
            assert (ra.status, ra.headers, ra.body) == (rb.status, rb.headers, rb.body)
        assert a.robots_txt(h) == b.robots_txt(h)


def test_different_seed_different_web() -> None:
    a = WebModel(SMALL)
    b = WebModel(WebSpec(seed=8, hosts=60, pages_mean=30, profile="realistic"))
    assert [h.pages for h in a.hosts] != [h.pages for h in b.hosts]
    assert a.plan(0, 0).links != b.plan(0, 0).links


def test_spec_round_trips_and_validates() -> None:
    spec = WebSpec(seed=3, hosts=10, profile="hostile", overrides=(("trap_host", 0.5),))
    assert WebSpec.from_json(spec.to_json()) == spec
    assert spec.realism().trap_host == 0.5
    for bad in (
        {"hosts": 0},
        {"hosts": 100_001},
        {"locality": 1.5},
        {"pages_alpha": 1.0},
        {"profile": "nice"},
        {"overrides": (("no_such_switch", 1.0),)},
        {"overrides": (("reset_once", -1.0),)},
    ):
        with pytest.raises(ValueError):
            WebSpec(**bad)  # type: ignore[arg-type]


# ------------------------------------------------------------------ shape


def test_heavy_tailed_sites_and_link_locality() -> None:
    m = WebModel(WebSpec(seed=5, hosts=3000, pages_mean=50))
    sizes = sorted(h.pages for h in m.hosts)
    assert 0.5 * 50 < statistics.mean(sizes) < 2.0 * 50
    assert sizes[-1] > 20 * statistics.median(sizes)  # a few big sites, many small ones
    local = total = 0
    degrees = []
    for h in range(0, 3000, 150):
        for i in range(min(m.hosts[h].pages, 40)):
            links = m.plan(h, i).links
            degrees.append(len(links))
            for link in links:
                total += 1
                local += url_parts(link.url)[0] == m.hosts[h].name
    assert 20 < statistics.mean(degrees) < 45
    assert max(degrees) > 3 * statistics.median(degrees)
    assert 0.7 < local / total < 0.95


def test_page_size_distribution() -> None:
    m = WebModel(WebSpec(seed=5, hosts=200))
    sizes = [
        len(respond(m, m.resolve(h, m.page_target(h, i))).body)
        for h in range(0, 200, 10)
        for i in range(min(m.hosts[h].pages, 20))
    ]
    assert 10_000 < statistics.mean(sizes) < 22_000


def test_host_names_ips_and_sharing() -> None:
    m = WebModel(WebSpec(seed=2, hosts=500, ip_share=0.3))
    names = [h.name for h in m.hosts]
    assert len(set(names)) == 500
    assert all(n.endswith(".example") and n.split(".")[0] in ("www", "blog", "shop") for n in names)
    assert any(n.startswith("blog.") for n in names)
    by_ip: dict[str, set[str]] = {}
    for h in m.hosts:
        assert h.ip.startswith("127.") and h.domain == h.name.split(".", 1)[1]
        by_ip.setdefault(h.ip, set()).add(h.domain)
    assert any(len(domains) > 1 for domains in by_ip.values())  # shared hosting
    assert len(by_ip) > 100
    assert m.host_by_name("WWW.H0.EXAMPLE.") is m.hosts[0]


# ------------------------------------------------------------------ links as a crawler sees them


@pytest.mark.parametrize("profile", ["clean", "realistic", "hostile"])
def test_rendered_links_resolve_to_the_model_links(profile: str) -> None:
    m = WebModel(WebSpec(seed=13, hosts=80, pages_mean=20, profile=profile))
    checked = 0
    for h in range(80):
        host = m.hosts[h]
        if host.flags & HostFlag.DEAD:
            continue
        for i in range(min(host.pages, 6)):
            plan = m.plan(h, i)
            if plan.flags & (PageFlag.RESET_ALWAYS | PageFlag.RESET_ONCE | PageFlag.HANG):
                continue
            if plan.flags & (PageFlag.ERROR_500 | PageFlag.TRANSIENT_503 | PageFlag.BROKEN_GZIP):
                continue
            r = respond(m, m.resolve(h, m.page_target(h, i)))
            assert r.status == 200
            got = extract(r.body, m.page_url(h, i), host.charset)
            want = [link.url for link in plan.links if link.url]
            canonical = m.page_url(h, i)
            if i % 5 == 0:
                want_extra = [canonical]  # <link rel=canonical> is not an <a>: not extracted
                assert f'<link rel="canonical" href="{want_extra[0]}">'.encode() in r.body
            assert got == want, (profile, h, i)
            checked += 1
    assert checked > 100


def test_every_link_target_exists_on_the_web() -> None:
    m = WebModel(SMALL)
    kinds: set[Kind] = set()
    for h in range(60):
        for i in range(min(m.hosts[h].pages, 20)):
            for link in m.plan(h, i).links:
                if not link.url:
                    continue
                host, target = url_parts(link.url)
                res = m.resolve(m.by_name[host], target)
                assert res.kind is not Kind.NOT_FOUND, link
                kinds.add(res.kind)
    assert {Kind.PAGE, Kind.REDIRECT, Kind.MISSING, Kind.PDF, Kind.MEDIA} <= kinds


def test_link_surface_forms_are_varied() -> None:
    m = forced(link_forms=1.0)
    hrefs = [link.href for h in range(40) for link in m.plan(h, 0).links if link.url]
    assert any(x.startswith("../") or x.startswith("./") for x in hrefs)
    assert any(x.startswith("//") for x in hrefs)
    assert any(":80/" in x for x in hrefs)
    assert any("#" in x for x in hrefs)
    assert any(x != x.strip() for x in hrefs)
    assert any("/../" in x for x in hrefs)
    assert any(any(c.isupper() for c in x.split("/")[2]) for x in hrefs if x.startswith("http"))


def test_query_url_hosts_and_query_only_links() -> None:
    m = forced(query_url_host=1.0, link_forms=1.0)
    h = next(h for h in range(40) if m.hosts[h].pages > 30)
    assert m.page_target(h, 5).startswith("/view.php?cat=")
    assert m.resolve(h, m.page_target(h, 5)).a == 5
    assert m.resolve(h, "/view.php?id=5&cat=x").kind is Kind.NOT_FOUND
    hrefs = [link.href for i in range(1, 30) for link in m.plan(h, i).links]
    assert any(x.startswith("?cat=") for x in hrefs)
    body = respond(m, m.resolve(h, m.page_target(h, 4))).body
    assert b"&amp;id=" in body


def test_nofollow_meta_robots_and_x_robots_tag() -> None:
    m = forced(nofollow_link=0.5, meta_robots=1.0, x_robots_tag=1.0)
    seen_meta, seen_header, seen_rel = set(), set(), False
    for h in range(40):
        for i in range(1, min(m.hosts[h].pages, 10)):
            plan = m.plan(h, i)
            if plan.flags & (PageFlag.RESET_ALWAYS | PageFlag.RESET_ONCE | PageFlag.HANG):
                continue
            r = respond(m, m.resolve(h, m.page_target(h, i)))
            if r.status != 200:
                continue
            headers = dict(r.headers)
            if plan.flags & PageFlag.META_NOFOLLOW:
                assert b'<meta name="robots" content="noindex,nofollow">' in r.body
                seen_meta.add("nofollow")
            if plan.flags & PageFlag.META_NOINDEX:
                assert b'<meta name="robots" content="noindex">' in r.body
                seen_meta.add("noindex")
            if plan.flags & PageFlag.XROBOTS_NOFOLLOW:
                assert headers["X-Robots-Tag"] == "nofollow"
                seen_header.add("nofollow")
            if plan.flags & PageFlag.XROBOTS_NOINDEX:
                assert headers["X-Robots-Tag"] == "noindex"
                seen_header.add("noindex")
            if any(link.nofollow for link in plan.links) and not plan.flags & PageFlag.MALFORMED:
                assert b'rel="nofollow"' in r.body
                seen_rel = True
    assert seen_meta == {"nofollow", "noindex"} and seen_header == {"nofollow", "noindex"}
    assert seen_rel


def test_base_href_changes_resolution() -> None:
    m = forced(base_href=1.0, link_forms=1.0)
    h, i = next(
        (h, i) for h in range(40) for i in range(1, m.hosts[h].pages) if m.plan(h, i).base_href
    )
    r = respond(m, m.resolve(h, m.page_target(h, i)))
    assert f'<base href="{m.plan(h, i).base_href}">'.encode() in r.body


def test_malformed_html_still_yields_every_link() -> None:
    m = forced(malformed_html=1.0, link_forms=1.0)
    h = next(h for h in range(40) if not m.hosts[h].flags & HostFlag.DEAD)
    plan = m.plan(h, 0)
    r = respond(m, m.resolve(h, "/"))
    assert b"<A HREF=" in r.body or b"href='" in r.body
    got = extract(r.body, m.page_url(h, 0), m.hosts[h].charset)
    assert got == [link.url for link in plan.links if link.url]


def test_many_links_page() -> None:
    m = forced(many_links=1.0)
    plan = m.plan(0, 1) if m.hosts[0].pages > 1 else m.plan(1, 1)
    assert len(plan.links) >= 10_000


def test_session_ids_and_canonical() -> None:
    m = forced(session_link=0.5)
    link = next(
        link
        for h in range(40)
        for i in range(min(m.hosts[h].pages, 10))
        for link in m.plan(h, i).links
        if "sessionid=" in link.url
    )
    host, target = url_parts(link.url)
    res = m.resolve(m.by_name[host], target)
    assert res.kind is Kind.PAGE and res.session
    clean = m.page_url(res.host, res.a)
    r = respond(m, res)
    assert f'<link rel="canonical" href="{clean}">'.encode() in r.body
    assert "sessionid" in SESSION_PARAMS


# ------------------------------------------------------------------ robots.txt and sitemaps


def test_robots_rules_match_the_model() -> None:
    m = forced(robots_disallow=1.0, robots_crawl_delay=1.0, robots_agent_block=0.2)
    seen_block = False
    for h in range(40):
        host = m.hosts[h]
        rp = protego.Protego.parse(m.robots_txt(h))
        blocked = bool(host.flags & HostFlag.AGENT_BLOCK)
        seen_block |= blocked
        assert rp.crawl_delay("gossamer") == (None if blocked else host.crawl_delay)
        assert rp.crawl_delay("somebot") == host.crawl_delay
        assert not rp.can_fetch(m.page_url(h, 0), "badbot")
        for i in range(1, min(host.pages, 40)):
            private = m.section(host, i) == "private"
            allowed = rp.can_fetch(m.page_url(h, i), "somebot")
            if private and i != 1 and not str(i).startswith("1"):
                assert not allowed, m.page_url(h, i)
            elif not private:
                assert allowed
            assert not blocked or not rp.can_fetch(m.page_url(h, i), "gossamer/1.0")
    assert seen_block


def test_robots_status_variants() -> None:
    m = WebModel(
        WebSpec(
            seed=4,
            hosts=200,
            profile="realistic",
            overrides=(
                ("robots_404", 0.2),
                ("robots_500", 0.2),
                ("robots_timeout", 0.2),
                ("robots_redirect", 0.2),
                ("dead_host", 0.0),
            ),
        )
    )
    seen = set()
    for h in range(200):
        status = m.robots_status(h)
        seen.add(status)
        r = respond(m, m.resolve(h, "/robots.txt"))
        if status == "404":
            assert r.status == 404
        elif status == "500":
            assert r.status == 500
        elif status == "timeout":
            assert r.action == "hang"
        elif status == "redirect":
            hops = 0
            while r.status in (301, 302, 307, 308):
                loc = dict(r.headers)["Location"]
                host, target = url_parts(loc)
                assert host == m.hosts[h].name
                r = respond(m, m.resolve(h, target))
                hops += 1
            assert r.status == 200 and 1 <= hops <= 5
            assert r.body.decode() == m.robots_txt(h)
        else:
            assert r.status == 200 and r.body.decode() == m.robots_txt(h)
    assert seen == {"ok", "404", "500", "timeout", "redirect"}


def test_sitemaps_list_every_page() -> None:
    m = WebModel(
        WebSpec(
            seed=9, hosts=30, pages_mean=800, profile="clean", overrides=(("robots_sitemap", 1.0),)
        )
    )
    big = max(range(30), key=lambda h: m.hosts[h].pages)
    small = min(range(30), key=lambda h: m.hosts[h].pages)
    assert m.hosts[big].pages > 1000
    for h in (big, small):
        assert f"Sitemap: http://{m.hosts[h].name}/sitemap.xml" in m.robots_txt(h)
        status, _, body = fetch(m, f"http://{m.hosts[h].name}/sitemap.xml")
        assert status == 200
        locs: list[str] = []
        if b"<sitemapindex" in body:
            for part in LexborHTMLParser(body.decode()).css("loc"):
                status, headers, gz = fetch(m, part.text())
                assert headers["Content-Type"] == "application/gzip"
                locs += [
                    n.text() for n in LexborHTMLParser(gzip.decompress(gz).decode()).css("loc")
                ]
        else:
            locs = [n.text() for n in LexborHTMLParser(body.decode()).css("loc")]
        assert locs == [m.page_url(h, i) for i in range(m.hosts[h].pages)]
    assert sitemap_body(m, big, 0).count(b"<url>") == 1000


# ------------------------------------------------------------------ redirects, errors, resources


def test_redirect_chains_reach_their_target_and_loops_cycle() -> None:
    m = forced(redirect_link=0.3, redirect_loop=0.1)
    chains = loops = 0
    statuses = set()
    for h in range(40):
        if m.hosts[h].flags & HostFlag.DEAD:
            continue
        for i in range(min(m.hosts[h].pages, 8)):
            for link in m.plan(h, i).links:
                _host, target = url_parts(link.url) if link.url else ("", "")
                if not (target.startswith("/go/") or target.startswith("/loop/")):
                    continue
                seen = [link.url]
                url = link.url
                for _ in range(12):
                    status, headers, _ = fetch(m, url)
                    if status not in (301, 302, 307, 308):
                        break
                    statuses.add(status)
                    base = can_ada.parse(url)
                    url = (base + headers["Location"]).href
                    if url in seen:
                        break
                    seen.append(url)
                if target.startswith("/go/"):
                    _, th, tp, hops = target.rsplit("/", 3)
                    assert url == m.page_url(int(th), int(tp)) and len(seen) == int(hops) + 1
                    chains += 1
                else:
                    assert url in seen  # came back: a loop
                    loops += 1
    assert chains > 10 and loops > 2 and statuses == {301, 302, 307, 308}


def test_error_pages_and_non_html_resources() -> None:
    m = forced(error_500=1.0)
    transport = PageFlag.RESET_ALWAYS | PageFlag.RESET_ONCE | PageFlag.HANG
    h, i = next(
        (h, i)
        for h in range(40)
        if not m.hosts[h].flags & HostFlag.DEAD
        for i in range(1, m.hosts[h].pages)
        if not m.plan(h, i).flags & transport
    )
    assert fetch(m, m.page_url(h, i))[0] == 500
    m = WebModel(SMALL)
    name = m.hosts[0].name
    expect = {
        "/missing/5.html": (404, "text/html"),
        "/gone/6.html": (410, "text/html"),
        "/files/doc-1.pdf": (200, "application/pdf"),
        "/img/pic-2.jpg": (200, "image/jpeg"),
        "/media/item-3": (200, "image/png"),
        "/files/report-4.pdf": (200, "text/html; charset=utf-8"),  # MIME lies about .pdf
        "/docs/manual-5.html": (200, "application/pdf"),  # and about .html
        "/nothing/here": (404, "text/html"),
    }
    for target, (status, ctype) in expect.items():
        got_status, headers, _body = fetch(m, f"http://{name}{target}")
        assert (got_status, headers["Content-Type"]) == (status, ctype), target
    assert fetch(m, f"http://{name}/files/doc-1.pdf")[2].startswith(b"%PDF-")
    assert fetch(m, f"http://{name}/media/item-3")[2].startswith(b"\x89PNG")


def test_transient_and_reset_pages_depend_on_attempt() -> None:
    m = forced(transient_503=1.0)
    h = next(h for h in range(40) if m.hosts[h].pages > 1 and not m.hosts[h].flags & HostFlag.DEAD)
    res = m.resolve(h, m.page_target(h, 1))
    first, second = respond(m, res, attempt=0), respond(m, res, attempt=1)
    assert first.status == 503 and second.status == 200
    ra = {
        (p in dict(respond(m, m.resolve(hh, m.page_target(hh, 1))).headers))
        for p in ["Retry-After"]
        for hh in range(40)
        if m.hosts[hh].pages > 1 and not m.hosts[hh].flags & HostFlag.DEAD
    }
    assert ra == {True, False}  # with and without Retry-After
    m = forced(reset_once=1.0)
    res = m.resolve(h, m.page_target(h, 1))
    assert respond(m, res, attempt=0).action == "reset"
    assert respond(m, res, attempt=1).status == 200


def test_home_pages_are_always_served() -> None:
    m = forced(error_500=1.0, reset_always=1.0, hang_page=1.0, meta_robots=1.0)
    for h in range(40):
        if not m.hosts[h].flags & HostFlag.DEAD:
            assert respond(m, m.resolve(h, "/")).status == 200


def test_dead_host_never_answers() -> None:
    m = forced(dead_host=1.0)
    assert respond(m, m.resolve(0, "/robots.txt")).action == "hang"
    assert respond(m, m.resolve(0, "/")).action == "hang"


def test_huge_page_is_streamed() -> None:
    m = WebModel(WebSpec(seed=1, hosts=20, overrides=(("huge_pages", 2), ("huge_page_bytes", 1e9))))
    found = 0
    for h, ks in m.huge_host.items():
        for k in ks:
            r = respond(m, m.resolve(h, f"/big/huge-{k}.html"))
            assert r.stream_size == 1_000_000_000 and r.filler and len(r.body) < 10_000
            assert f"/big/huge-{k}.html" in [url_parts(x.url)[1] for x in m.plan(h, 0).links]
            found += 1
    assert found == 2


# ------------------------------------------------------------------ encodings and charsets


def test_charsets_are_declared_and_decodable() -> None:
    m = WebModel(WebSpec(seed=3, hosts=120, overrides=(("charset_host", 0.8),)))
    seen = set()
    for h in range(120):
        host = m.hosts[h]
        r = respond(m, m.resolve(h, "/"))
        ctype = dict(r.headers)["Content-Type"]
        declared_header = "charset=" in ctype
        declared_meta = f'<meta charset="{host.charset}">'.encode() in r.body
        assert declared_header == (host.charset_decl in (0, 2))
        assert declared_meta == (host.charset_decl in (1, 2))
        r.body.decode(host.charset)  # strict
        if host.charset != "utf-8":
            seen.add(host.charset)
            assert declared_header or declared_meta
    assert seen == {"iso-8859-1", "windows-1252", "shift_jis"}


def test_invalid_utf8_pages() -> None:
    m = forced(invalid_utf8=1.0, charset_host=0.0)
    r = respond(m, m.resolve(1, m.page_target(1, 1) if m.hosts[1].pages > 1 else "/"))
    with pytest.raises(UnicodeDecodeError):
        r.body.decode("utf-8")


def test_gzip_deflate_and_broken_gzip() -> None:
    m = forced(gzip_host=1.0, broken_gzip=0.0, conditional_host=0.0)
    plain = respond(m, m.resolve(0, "/")).body
    r = respond(m, m.resolve(0, "/"), accept_encoding="gzip, deflate")
    assert dict(r.headers)["Content-Encoding"] == "gzip" and gzip.decompress(r.body) == plain
    r = respond(m, m.resolve(0, "/"), accept_encoding="deflate")
    assert dict(r.headers)["Content-Encoding"] == "deflate" and zlib.decompress(r.body) == plain
    assert "Content-Encoding" not in dict(respond(m, m.resolve(0, "/")).headers)
    m = forced(broken_gzip=1.0)
    h = next(h for h in range(40) if m.hosts[h].pages > 1 and not m.hosts[h].flags & HostFlag.DEAD)
    r = respond(m, m.resolve(h, m.page_target(h, 1)))
    assert dict(r.headers)["Content-Encoding"] == "gzip"
    with pytest.raises((OSError, EOFError, zlib.error)):
        gzip.decompress(r.body)


# ------------------------------------------------------------------ conditional GET and change


def test_conditional_requests_and_changing_pages() -> None:
    m = forced(conditional_host=1.0, changing=1.0, gzip_host=0.0)
    h = next(h for h in range(40) if not m.hosts[h].flags & HostFlag.DEAD)
    res = m.resolve(h, "/")
    r0 = respond(m, res, epoch=0)
    headers = dict(r0.headers)
    etag, lm = headers["ETag"], headers["Last-Modified"]
    assert respond(m, res, epoch=0, if_none_match=etag).status == 304
    assert respond(m, res, epoch=0, if_modified_since=lm).status == 304
    assert respond(m, res, epoch=0, if_none_match='"other"').status == 200
    assert respond(m, res, epoch=0, if_modified_since="Thu, 01 Jan 2015 00:00:00 GMT").status == 200
    r1 = respond(m, res, epoch=1)
    assert r1.body != r0.body and dict(r1.headers)["ETag"] != etag
    assert respond(m, res, epoch=1, if_none_match=etag).status == 200
    assert respond(m, res, epoch=1, if_modified_since=lm).status == 200
    steady = WebModel(
        WebSpec(
            seed=11, hosts=40, pages_mean=25, profile="realistic", overrides=(("changing", 0.0),)
        )
    )
    res = steady.resolve(h, "/")
    assert respond(steady, res, epoch=0).body == respond(steady, res, epoch=5).body


# ------------------------------------------------------------------ traps


def test_traps_are_endless() -> None:
    m = forced(trap_host=1.0)
    h = next(h for h in range(40) if not m.hosts[h].flags & HostFlag.DEAD)
    name = m.hosts[h].name
    home = [url_parts(x.url)[1] for x in m.plan(h, 0).links]
    assert "/calendar/2026/11/" in home and "/deep/a/" in home
    # calendar: 50 months forward, each page links to the next
    url = f"http://{name}/calendar/2026/11/"
    for _ in range(50):
        status, _, body = fetch(m, url)
        assert status == 200
        nxt = [u for u in extract(body, url) if "/calendar/" in u]
        url = max(nxt)
    assert "/calendar/2031/" in url
    # deep: paths keep growing
    url = f"http://{name}/deep/a/"
    for _ in range(30):
        status, _, body = fetch(m, url)
        url = [u for u in extract(body, url) if "/deep/" in u][-1]
    assert url.count("/") > 30
    # search: permutations of the same parameters are distinct URLs
    status, _, body = fetch(m, f"http://{name}/search.php?q=shoes&sort=price&page=1")
    links = [u for u in extract(body, f"http://{name}/") if "search.php" in u]
    assert status == 200 and len(links) >= 4
    assert any(u.split("?")[1].startswith("page=") for u in links)


def test_ten_million_page_web_is_servable_without_storage() -> None:
    m = WebModel(WebSpec(seed=1, hosts=100_000, pages_mean=100))
    assert 8_000_000 < m.total_pages < 12_000_000
    assert len(m.ips()) == 4096  # max_ips: domains wrap around
    big = max(m.hosts, key=lambda h: h.pages)
    last = big.pages - 1
    res = m.resolve(big.id, m.page_target(big.id, last))
    assert res.kind is Kind.PAGE and res.a == last
    assert respond(m, res).status == 200
    assert m.resolve(big.id, f"/news/page-{big.pages}.html").kind is Kind.NOT_FOUND
