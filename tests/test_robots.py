"""gossamer.robots: RFC 9309 status handling, parsing fixes around protego, the cache."""

from __future__ import annotations

import codecs
import http.client
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from gossamer.robots import (
    MAX_LINE_LENGTH,
    ROBOTS_MAX_BYTES,
    UNAVAILABLE_TTL,
    RobotsCache,
    RobotsPolicy,
    decode_body,
    escape_pattern,
    path_params_query,
    prepare,
    product_token,
    robots_url,
)
from gossamer.testweb import (
    RunningWeb,
    TruthRules,
    WebSpec,
    compute_truth,
    model_for,
    serve_in_thread,
)
from gossamer.urls import URLError, canonicalize, host_key, host_of, whatwg_href

UA = "gossamer/0.1 (+http://example.org/bot)"
BODY = b"""User-agent: *
Disallow: /private/
Allow: /private/page-1
Crawl-delay: 2
Sitemap: http://www.h1.example/sitemap.xml

User-agent: badbot
Disallow: /
"""


def policy(body: bytes | str, agent: str = UA) -> RobotsPolicy:
    return RobotsPolicy.parse(body, user_agent=agent)


# ------------------------------------------------------------------ status handling


def test_2xx_is_parsed() -> None:
    p = RobotsPolicy.from_response(200, BODY, user_agent=UA, now=100.0, ttl=50.0)
    assert p.kind == "parsed"
    assert (p.fetched_at, p.expires_at, p.status, p.agent) == (100.0, 150.0, 200, "gossamer")
    assert p.crawl_delay == 2.0
    assert p.sitemaps == ("http://www.h1.example/sitemap.xml",)
    assert p.allowed("http://www.h1.example/news/page-1.html")
    assert not p.allowed("http://www.h1.example/private/page-27.html")
    assert p.allowed("http://www.h1.example/private/page-17.html")  # Allow: /private/page-1
    assert p.allowed("http://www.h1.example/private/page-1")  # longest match wins
    assert not p.expired(149.9)
    assert p.expired(150.0)


@pytest.mark.parametrize("status", [204, 299])
def test_2xx_without_body_allows_all(status: int) -> None:
    p = RobotsPolicy.from_response(status, None, user_agent=UA, now=0.0)
    assert p.kind == "parsed"
    assert p.allowed("http://h/anything")


@pytest.mark.parametrize("status", [400, 401, 403, 404, 410, 451, 499])
def test_4xx_allows_all(status: int) -> None:
    p = RobotsPolicy.from_response(status, b"User-agent: *\nDisallow: /", user_agent=UA, now=10.0)
    assert p.kind == "allow-all"
    assert p.allowed("http://h/private/x")
    assert p.expires_at == 10.0 + 86400.0
    assert p.crawl_delay is None and p.sitemaps == ()


@pytest.mark.parametrize("status", [301, 302, 307, 308])
def test_redirect_limit_reached_allows_all(status: int) -> None:
    # the engine follows five redirects; a sixth 3xx means the file is unavailable (RFC 9309
    # section 2.3.1.2), which is "allow all" as for 4xx
    assert RobotsPolicy.from_response(status, b"", user_agent=UA, now=0.0).kind == "allow-all"


@pytest.mark.parametrize("status", [None, 500, 502, 503, 504, 599, 429, 100, 0, 600])
def test_unreachable_disallows_all_for_a_short_while(status: int | None) -> None:
    p = RobotsPolicy.from_response(status, b"User-agent: *\nAllow: /", user_agent=UA, now=10.0)
    assert p.kind == "disallow-all"
    assert not p.allowed("http://h/")
    assert not p.allowed("http://h/robots.txt")
    assert p.expires_at == 10.0 + UNAVAILABLE_TTL
    p2 = RobotsPolicy.from_response(status, None, user_agent=UA, now=10.0, unavailable_ttl=30)
    assert p2.expires_at == 40.0


@pytest.mark.parametrize(
    ("status", "body", "error", "key"),
    [
        (200, b"User-agent: *\nDisallow: /", None, "robots/disallowed"),
        (None, None, "fetch/error/connect", "robots/unreachable/connect"),
        (None, None, "fetch/error/dns", "robots/unreachable/dns"),
        (None, None, "fetch/error/blocked-address", "robots/unreachable/blocked-address"),
        (None, None, None, "robots/unreachable/no-answer"),
        (503, None, None, "robots/unreachable/http-503"),
        (429, None, "fetch/error/timeout", "robots/unreachable/http-429"),  # a status: no error
    ],
)
def test_a_refused_url_is_counted_under_the_real_cause(
    status: int | None, body: bytes | None, error: str | None, key: str
) -> None:
    """A robots.txt that could not be fetched (RFC 9309 §2.3.1.4) is no rule that disallows:
    its key names why it could not be fetched."""
    p = RobotsPolicy.from_response(status, body, user_agent=UA, now=0.0, error=error)
    assert not p.allowed("http://h/x")
    assert p.refusal() == key


def test_product_token() -> None:
    assert product_token("gossamer/0.1 (+http://example.org/bot)") == "gossamer"
    assert product_token("  FooBot ") == "foobot"
    assert product_token("AB42bot/2") == "ab42bot"
    with pytest.raises(ValueError):
        product_token("   ")
    with pytest.raises(ValueError):
        RobotsPolicy.from_response(200, b"", user_agent="", now=0.0)


# ------------------------------------------------------------------ groups and agents


def test_our_group_wins_over_star() -> None:
    body = b"User-agent: *\nDisallow: /\n\nUser-agent: gossamer\nDisallow: /private/\n"
    p = policy(body)
    assert p.allowed("http://h/news/")
    assert not p.allowed("http://h/private/x")
    assert not policy(body, "otherbot").allowed("http://h/news/")


def test_agent_block_group() -> None:
    body = b"User-agent: *\nDisallow: /private/\n\nUser-agent: gossamer\nDisallow: /\n"
    assert not policy(body).allowed("http://h/news/")
    assert policy(body, "someone").allowed("http://h/news/")


def test_agent_match_is_exact_and_case_insensitive() -> None:
    body = b"User-agent: goss\nDisallow: /\n\nUser-agent: GOSSAMER-x\nDisallow: /\n"
    assert policy(body).allowed("http://h/")  # neither 'goss' nor 'gossamer-x' is us
    assert not policy(b"User-agent: GoSsAmEr\nDisallow: /\n").allowed("http://h/")
    assert not policy(b"User-agent: gossamer/2.0\nDisallow: /\n").allowed("http://h/")


def test_unknown_lines_do_not_split_groups() -> None:
    body = b"User-agent: gossamer\nFoo: bar\nUser-agent: other\nDisallow: /x\n"
    assert not policy(body).allowed("http://h/x")


def test_crawl_delay_inside_a_run_of_agents_does_not_split_the_group() -> None:
    body = b"User-agent: otherbot\nCrawl-delay: 10\nUser-agent: gossamer\nDisallow: /p/\n"
    p = policy(body)
    assert not p.allowed("http://h/p/1")
    assert p.crawl_delay == 10.0
    # a blank line ends the run: two groups
    body = b"User-agent: otherbot\nCrawl-delay: 10\n\nUser-agent: gossamer\nDisallow: /p/\n"
    p = policy(body)
    assert not p.allowed("http://h/p/1")
    assert p.crawl_delay is None


def test_groups_for_one_agent_are_merged() -> None:
    body = b"User-agent: gossamer\nDisallow: /a\n\nUser-agent: *\nDisallow: /\n\n" + (
        b"User-agent: gossamer\nDisallow: /b\n"
    )
    p = policy(body)
    assert not p.allowed("http://h/a")
    assert not p.allowed("http://h/b")
    assert p.allowed("http://h/c")


def test_crawl_delay_of_our_group() -> None:
    body = b"User-agent: *\nCrawl-delay: 5\n\nUser-agent: gossamer\nCrawl-delay: 0.5\n"
    assert policy(body).crawl_delay == 0.5
    assert policy(body, "other").crawl_delay == 5.0
    assert policy(b"User-agent: *\nCrawl-delay: soon\n").crawl_delay is None
    assert policy(b"User-agent: *\nCrawl-delay: -1\n").crawl_delay is None
    assert policy(b"User-agent: *\nCrawl-delay: inf\n").crawl_delay is None


# ------------------------------------------------------------------ paths


@pytest.mark.parametrize(
    ("rule", "url", "allowed"),
    [
        ("/private/", "http://h/private/", False),
        ("/private/", "http://h/private", True),
        ("/*.gif$", "http://h/a/b.gif", False),
        ("/*.gif$", "http://h/a/b.gif?x", True),
        ("/*cat=private", "http://h/view.php?cat=private&id=7", False),
        ("/*cat=private", "http://h/view.php?cat=news&id=7", True),
        ("/caf\u00e9", "http://h/caf%C3%A9/x", False),
        ("/caf%c3%a9", "http://h/caf%C3%A9", False),
        ("/a%2Fb", "http://h/a%2Fb", False),
        ("/a%2Fb", "http://h/a/b", True),
        ("/%7Euser", "http://h/~user", True),  # escapes match octet for octet (Google)
        ("/%7Euser", "http://h/%7Euser", False),
        ("/a$b", "http://h/a$b", False),
        ("//double", "http://h//double/x", False),
        ("/search?q=", "http://h/search?q=a", False),
        ("/x;y", "http://h/x;y=1", False),
        ("/page#frag", "http://h/page-2", False),  # '#' starts a comment in robots.txt
    ],
)
def test_rule_matching(rule: str, url: str, allowed: bool) -> None:
    body = f"User-agent: *\nDisallow: {rule}\n".encode()
    assert policy(body).allowed(url) is allowed


def test_robots_txt_itself_is_always_allowed_when_parsed() -> None:
    assert policy(b"User-agent: *\nDisallow: /\n").allowed("http://h/robots.txt")  # RFC 9309


@pytest.mark.parametrize(
    ("url", "path"),
    [
        ("http://h", "/"),
        ("http://h/a/b?c=d#e", "/a/b?c=d"),
        ("http://h?x", "/?x"),
        ("http://h//a", "//a"),
        ("/a/b", "/a/b"),
    ],
)
def test_path_params_query(url: str, path: str) -> None:
    assert path_params_query(url) == path


def test_escape_pattern() -> None:
    assert escape_pattern("/caf\u00e9/%7e") == "/caf%C3%A9/%7E"
    assert escape_pattern("/plain") == "/plain"


# ------------------------------------------------------------------ bodies


def test_bom_and_encodings() -> None:
    text = "User-agent: *\nDisallow: /x\n"
    for raw in (
        codecs.BOM_UTF8 + text.encode(),
        codecs.BOM_UTF8[:2] + text.encode(),
        codecs.BOM_UTF16_LE + text.encode("utf-16-le"),
        codecs.BOM_UTF16_BE + text.encode("utf-16-be"),
    ):
        assert decode_body(raw) == text
        assert not policy(raw).allowed("http://h/x")
    assert decode_body(b"Disallow: /\xff\n") == "Disallow: /\ufffd\n"


@pytest.mark.parametrize("eol", [b"\n", b"\r\n", b"\r"])
def test_line_ends(eol: bytes) -> None:
    body = eol.join([b"User-agent: *", b"Disallow: /x", b""])
    assert not policy(body).allowed("http://h/x")


def test_body_is_capped_at_500_kib() -> None:
    head = b"User-agent: *\nDisallow: /early\n"
    filler = b"# " + b"x" * 100 + b"\n"
    body = head + filler * (ROBOTS_MAX_BYTES // len(filler) + 1) + b"Disallow: /late\n"
    assert len(body) > ROBOTS_MAX_BYTES
    p = policy(body)
    assert not p.allowed("http://h/early")
    assert p.allowed("http://h/late")  # beyond the cap: ignored


def test_a_line_cut_by_the_cap_is_dropped() -> None:
    body = b"User-agent: *\n" + b"#" * (ROBOTS_MAX_BYTES - 30) + b"\nAllow: /private/and-more\n"
    text = decode_body(body)
    assert "Allow" not in text
    assert text.endswith("\n")


def test_long_lines_are_cut() -> None:
    rule = "/x/" + "a" * MAX_LINE_LENGTH
    p = policy(f"User-agent: *\nDisallow: {rule}/tail\n".encode())
    assert not p.allowed("http://h" + rule)  # the rule kept only its beginning


def test_prepare_output() -> None:
    text = "User-agent: Other/1.0\nDisallow: /a # comment\nNoise here\nuser agent: gossamer\n"
    assert prepare(text, "gossamer") == ("user-agent: ~other~\ndisallow: /a\nuser-agent: gossamer")


# ------------------------------------------------------------------ sitemaps


def test_sitemaps_are_resolved_canonicalised_and_deduplicated() -> None:
    body = (
        b"Sitemap: /sitemap.xml\nsitemap: HTTP://WWW.H1.example:80/s2.xml\n"
        b"Sitemap: http://www.h1.example/s2.xml\nSitemap: mailto:x@y\nSitemap:\n"
        b"User-agent: *\nSitemap: http://other.example/s.xml?SID=1\n"
    )
    p = RobotsPolicy.from_response(
        200, body, user_agent=UA, now=0.0, final_url="http://www.h1.example/robots-moved/1.txt"
    )
    assert p.sitemaps == (
        "http://www.h1.example/sitemap.xml",
        "http://www.h1.example/s2.xml",
        "http://other.example/s.xml?SID=1",  # session ids are the site's business here
    )
    no_base = RobotsPolicy.from_response(200, body, user_agent=UA, now=0.0)
    assert "http://www.h1.example/sitemap.xml" not in no_base.sitemaps


# ------------------------------------------------------------------ robots_url


@pytest.mark.parametrize(
    ("url", "robots"),
    [
        ("http://WWW.H1.example/a/b?c#d", "http://www.h1.example/robots.txt"),
        ("https://h.example:443/x", "https://h.example/robots.txt"),
        ("HTTPS://h.example:8443/x", "https://h.example:8443/robots.txt"),
        ("http://h.example.:8080", "http://h.example:8080/robots.txt"),
        ("  HTTPS://user@h.example/x  ", "https://h.example/robots.txt"),
    ],
)
def test_robots_url(url: str, robots: str) -> None:
    assert robots_url(url) == robots


def test_robots_url_rejects_other_schemes() -> None:
    with pytest.raises(URLError):
        robots_url("ftp://h.example/")


# ------------------------------------------------------------------ cache


def _policy(now: float, ttl: float = 10.0) -> RobotsPolicy:
    return RobotsPolicy.from_response(404, None, user_agent=UA, now=now, ttl=ttl)


def test_cache_get_put_and_expiry() -> None:
    cache = RobotsCache(capacity=10)
    assert cache.get("h1", 0.0) is None
    p = _policy(0.0)
    cache.put("h1", p)
    assert cache.get("h1", 5.0) is p
    assert "h1" in cache
    assert cache.get("h1", 10.0) is None  # expired: dropped
    assert "h1" not in cache
    s = cache.statistics()
    assert (s.size, s.hits, s.misses, s.expired, s.puts) == (0, 1, 2, 1, 1)


def test_cache_evicts_least_recently_used() -> None:
    cache = RobotsCache(capacity=2)
    cache.put("a", _policy(0.0))
    cache.put("b", _policy(0.0))
    assert cache.get("a", 1.0) is not None  # a is now the most recently used
    cache.put("c", _policy(0.0))
    assert "b" not in cache
    assert "a" in cache and "c" in cache
    assert len(cache) == 2
    assert cache.statistics().evictions == 1


def test_cache_put_replaces() -> None:
    cache = RobotsCache()
    cache.put("a", _policy(0.0))
    newer = _policy(100.0)
    cache.put("a", newer)
    assert cache.get("a", 105.0) is newer
    assert len(cache) == 1


def test_cache_capacity_must_be_positive() -> None:
    with pytest.raises(ValueError):
        RobotsCache(capacity=0)


# ------------------------------------------------------------------ end to end


def _fetch_robots(
    web: RunningWeb, url: str, timeout: float
) -> tuple[int | None, bytes | None, str]:
    """GET `url` from the simulated web, following at most five redirects (the engine's
    contract): (last status or None when there was no answer, body, last URL)."""
    for _hop in range(6):
        host = host_of(url)
        ip, port = web.address_of(host)
        conn = http.client.HTTPConnection(ip, port, timeout=timeout)
        try:
            target = url.split(host, 1)[1] or "/"
            conn.request("GET", target, headers={"Host": host, "User-Agent": UA})
            resp = conn.getresponse()
            body = resp.read()
        except OSError:
            return None, None, url
        finally:
            conn.close()
        location = resp.getheader("Location")
        if 300 <= resp.status < 400 and location and _hop < 5:
            url = canonicalize(whatwg_href(location, url))
            continue
        return resp.status, body, url
    raise AssertionError("unreachable")


@pytest.mark.slow
def test_policies_agree_with_the_simulated_webs_truth(tmp_path: Path) -> None:
    """Every host's robots.txt fetched over loopback and read by RobotsPolicy gives the same
    verdicts as the web's truth: URLs it excludes for robots reasons are disallowed, required
    URLs are allowed; statuses, crawl delays and sitemaps agree too."""
    spec = WebSpec(
        seed=21,
        hosts=40,
        pages_mean=12,
        profile="realistic",
        overrides=(
            ("robots_disallow", 1.0),
            ("robots_agent_block", 0.25),
            ("robots_crawl_delay", 0.5),
            ("robots_sitemap", 0.5),
            ("robots_404", 0.15),
            ("robots_500", 0.1),
            ("robots_timeout", 0.05),
            ("robots_redirect", 0.3),
            ("dead_host", 0.0),
            ("latency_ms", 0.0),
            ("query_url_host", 0.3),
        ),
    )
    model = model_for(spec)
    seeds = tuple(model.page_url(h, 0) for h in range(len(model.hosts)))
    truth = compute_truth(model, TruthRules(seeds=seeds, scope="all", user_agent="gossamer"))

    def fetch(host: str) -> tuple[int | None, bytes | None, str]:
        return _fetch_robots(web, robots_url(f"http://{host}/"), 1.0)

    with (
        serve_in_thread(spec, log_path=tmp_path / "web.log") as web,
        ThreadPoolExecutor(max_workers=8) as pool,
    ):
        answers = dict(zip(truth.hosts, pool.map(fetch, truth.hosts), strict=True))
    policies = {
        host: RobotsPolicy.from_response(
            status, body, user_agent="gossamer/0.1 (+http://x/)", now=0.0, final_url=final
        )
        for host, (status, body, final) in answers.items()
    }
    kinds = {"ok": "parsed", "missing": "allow-all", "unavailable": "disallow-all"}
    for host, policy in policies.items():
        assert policy.kind == kinds[truth.robots_status[host]], host
        assert policy.crawl_delay == truth.crawl_delay.get(host), host
    seen = {"robots": 0, "robots-unavailable": 0, "required": 0}
    for url, reason in truth.excluded.items():
        if reason in ("robots", "robots-unavailable"):
            assert not policies[host_key(url)].allowed(url), (reason, url)
            seen[reason] += 1
    for url in truth.required:
        assert policies[host_key(url)].allowed(url), url
        seen["required"] += 1
    assert min(seen.values()) > 0, seen
    redirected = [h for h, (_, _, final) in answers.items() if final != f"http://{h}/robots.txt"]
    assert redirected  # some files were read after redirects
    assert {p.kind for p in policies.values()} == set(kinds.values())
    assert any(p.crawl_delay for p in policies.values())
    assert any(p.sitemaps for p in policies.values())
    for host, policy in policies.items():
        for sitemap in policy.sitemaps:
            assert host_of(sitemap) == host or truth.robots_status[host] == "ok"
