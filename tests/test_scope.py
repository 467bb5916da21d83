"""Scope: which discovered URLs a crawl keeps (pure)."""

from __future__ import annotations

import pytest

from gossamer.scope import Scope, _repeats


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
