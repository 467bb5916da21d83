"""Scope: which discovered URLs a crawl keeps (pure)."""

from __future__ import annotations

import pytest

from gossamer.scope import Scope, _repeats
from gossamer.urls import canonicalize, host_key


def test_host_scope_keeps_seed_hosts_only() -> None:
    s = Scope(["http://www.a.example/"], scope="host")
    assert s.reject("http://www.a.example/x", "www.a.example", 1) is None
    assert s.reject("http://blog.a.example/x", "blog.a.example", 1) == "scope/out-of-scope"


def test_domain_scope_uses_registrable_domain() -> None:
    s = Scope(["http://www.a.co.uk/"], scope="domain")
    assert s.reject("http://blog.a.co.uk/", "blog.a.co.uk", 1) is None
    assert s.reject("http://b.co.uk/", "b.co.uk", 1) == "scope/out-of-scope"
    # the verdict is cached per host and stays the same
    assert s.reject("http://b.co.uk/y", "b.co.uk", 1) == "scope/out-of-scope"


# ------------------------------------------------------------------ the same host key
# Each case: a seed, a discovered URL, and whether --scope host / domain / all keep it. The
# discovered URL is keyed as the crawler keys it (host_key of its canonical form).
_IN = None
_OUT = "scope/out-of-scope"

SAME_HOST_CASES = [
    # ports: the seed's own port is the seed's host; another port is another host
    ("http://127.0.0.1:8081/index.html", "http://127.0.0.1:8081/a/b.html", _IN, _IN, _IN),
    ("http://127.0.0.1:8081/", "http://127.0.0.1:9000/", _OUT, _IN, _IN),
    ("http://127.0.0.1:8081/", "http://127.0.0.1/", _OUT, _IN, _IN),
    ("http://127.0.0.1:8081/", "http://127.0.0.2:8081/", _OUT, _OUT, _IN),
    ("http://a.example.com:8080/", "http://a.example.com:8080/x", _IN, _IN, _IN),
    ("http://a.example.com:8080/", "http://b.example.com:8080/", _OUT, _IN, _IN),
    ("http://a.example.com:8080/", "http://b.example.com/", _OUT, _IN, _IN),
    ("http://a.example.com:8080/", "https://a.example.com:8443/", _OUT, _IN, _IN),
    ("http://a.example.com:8080/", "http://a.example.org:8080/", _OUT, _OUT, _IN),
    # a default port written out is no port; http and https of one host are one host
    ("http://h.example:80/", "http://h.example/x", _IN, _IN, _IN),
    ("http://h.example/", "http://h.example:80/x", _IN, _IN, _IN),
    ("http://h.example/", "https://h.example/x", _IN, _IN, _IN),
    ("https://h.example:443/", "http://h.example/x", _IN, _IN, _IN),
    ("http://h.example/", "http://h.example:8080/x", _OUT, _IN, _IN),
    ("http://h.example/", "https://h.example:80/x", _OUT, _IN, _IN),
    # upper case and trailing dots, in the seed or the link
    ("http://H.Example./", "http://h.example/x", _IN, _IN, _IN),
    ("http://h.example:8080/", "http://H.EXAMPLE.:8080/x", _IN, _IN, _IN),
    # IPv4 spellings
    ("http://0x7f.1:8081/", "http://127.0.0.1:8081/x", _IN, _IN, _IN),
    ("http://127.0.0.1/", "http://127.0.0.1:80/x", _IN, _IN, _IN),
    # IPv6
    ("http://[::1]:8080/", "http://[::1]:8080/x", _IN, _IN, _IN),
    ("http://[0:0:0:0:0:0:0:1]:8080/", "http://[::1]:8080/x", _IN, _IN, _IN),
    ("http://[::1]/", "http://[::1]:80/x", _IN, _IN, _IN),
    ("http://[::1]:8080/", "http://[::1]:9000/", _OUT, _IN, _IN),
    ("http://[::1]:8080/", "http://[::2]:8080/", _OUT, _OUT, _IN),
    ("http://[::1]:8080/", "http://127.0.0.1:8080/", _OUT, _OUT, _IN),
    # IDNA: the seed and the link may spell the name in Unicode or punycode
    ("http://b\u00fccher.example/", "http://xn--bcher-kva.example/x", _IN, _IN, _IN),
    ("http://xn--bcher-kva.example:8080/", "http://B\u00dcCHER.example:8080/x", _IN, _IN, _IN),
    ("http://www.b\u00fccher.example/", "http://shop.xn--bcher-kva.example/", _OUT, _IN, _IN),
    ("http://b\u00fccher.example/", "http://bucher.example/", _OUT, _OUT, _IN),
]


@pytest.mark.parametrize(("seed", "url", "host", "domain", "all_"), SAME_HOST_CASES)
def test_scope_keys_seeds_and_links_alike(
    seed: str, url: str, host: str | None, domain: str | None, all_: str | None
) -> None:
    canonical = canonicalize(url)
    key = host_key(canonical)
    for scope, expected in (("host", host), ("domain", domain), ("all", all_)):
        s = Scope([seed], scope=scope)
        assert s.reject_url(canonical, key) == expected, (scope, seed, url)
        assert s.reject(canonical, key, 5) == expected, (scope, seed, url)
        # the seed itself is always in scope
        seed_canonical = canonicalize(seed)
        assert s.reject_url(seed_canonical, host_key(seed_canonical)) is None, (scope, seed)


def test_scope_with_several_seeds_keeps_each_seeds_host() -> None:
    s = Scope(["http://127.0.0.1:8081/", "http://[::1]:8082/"], scope="host")
    assert s.hosts == {"127.0.0.1:8081", "[::1]:8082"}
    for url in ("http://127.0.0.1:8081/x", "http://[::1]:8082/y"):
        assert s.reject_url(url, host_key(url)) is None
    for url in ("http://127.0.0.1:8082/x", "http://[::1]:8081/y"):
        assert s.reject_url(url, host_key(url)) == "scope/out-of-scope"


def test_depth_is_checked_first_and_reject_url_ignores_it() -> None:
    s = Scope(["http://a.example/"], scope="all", max_depth=2)
    assert s.reject("http://a.example/x.pdf", "a.example", 3) == "scope/depth"
    assert s.reject("http://a.example/x", "a.example", 2) is None
    assert s.reject_url("http://a.example/x.pdf", "a.example") == "scope/non-html"
    assert s.reject_url("http://a.example/x", "a.example") is None


def test_allow_and_deny_patterns() -> None:
    s = Scope(["http://a.example/"], scope="all", allow=[r"/docs/"], deny=[r"\?print="])
    assert s.reject_url("http://a.example/docs/1", "a.example") is None
    assert s.reject_url("http://a.example/blog/1", "a.example") == "scope/out-of-scope"
    assert s.reject_url("http://a.example/docs/1?print=1", "a.example") == "scope/out-of-scope"


def test_non_html_extension_only_when_html_only() -> None:
    assert Scope([], scope="all").reject_url("http://a.example/f.PDF", "a.example") == (
        "scope/non-html"
    )
    assert Scope([], scope="all", html_only=False).reject_url("http://a.example/f.pdf", "x") is None


@pytest.mark.parametrize(
    ("url", "count"),
    [
        ("http://a.example/", 0),
        ("http://a.example/a/b/c", 0),  # fewer than four segments: not counted
        ("http://a.example/a/a/a/a", 4),
        ("http://a.example/a//a/b/a?x=/a/a/a", 3),  # empty segments and the query ignored
        ("http://a.example/x/y/x/y/x/y/x?q", 4),
    ],
)
def test_repeats(url: str, count: int) -> None:
    assert _repeats(url) == count


def test_path_repeat_trap() -> None:
    s = Scope([], scope="all", max_path_repeat=3)
    assert s.reject_url("http://a.example/a/b/a/b/a/b", "a.example") is None
    assert s.reject_url("http://a.example/a/b/a/b/a/b/a", "a.example") == "scope/trap-path"
    assert (
        Scope([], scope="all", max_path_repeat=0).reject_url(
            "http://a.example/a/a/a/a/a/a", "a.example"
        )
        is None
    )


def test_unknown_scope_is_refused() -> None:
    with pytest.raises(ValueError, match="scope must be"):
        Scope([], scope="planet")
