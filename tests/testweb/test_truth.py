"""Ground truth: canonical URLs, determinism, rule behaviour, cross-checks with the model."""

from __future__ import annotations

import dataclasses
import re

import pytest
from protego import Protego

from gossamer.testweb import WebModel, WebSpec
from gossamer.testweb._content import page_outcome
from gossamer.testweb._model import TRAP_KINDS, HostFlag, Kind
from gossamer.testweb._truth import (
    EXCLUDE_REASONS,
    RobotsOracle,
    Truth,
    TruthRules,
    canonical_url,
    compute_truth,
    has_non_html_extension,
    product_token,
    request_url,
    split_url,
    strip_session_params,
)


def spec_with(*overrides: tuple[str, float], **kw: object) -> WebSpec:
    base: dict[str, object] = {"seed": 11, "hosts": 40, "pages_mean": 12.0}
    base.update(kw)
    return WebSpec(overrides=tuple(overrides), **base)  # type: ignore[arg-type]


def resolve(model: WebModel, url: str) -> tuple[int, Kind]:
    name, target = split_url(url)
    h = model.by_name[name]
    return h, model.resolve(h, target).kind


# ------------------------------------------------------------------ canonical URLs
@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("http://WWW.H1.Example/a/b.html", "http://www.h1.example/a/b.html"),
        ("http://www.h1.example:80/x", "http://www.h1.example/x"),
        ("http://www.h1.example:8080/x", "http://www.h1.example:8080/x"),
        ("http://www.h1.example", "http://www.h1.example/"),
        ("http://www.h1.example./x#frag", "http://www.h1.example/x"),
        ("http://www.h1.example/news/../docs/./p.html", "http://www.h1.example/docs/p.html"),
        ("http://www.h1.example/a/b/..", "http://www.h1.example/a/"),
        ("http://www.h1.example/../../x", "http://www.h1.example/x"),
        ("  http://www.h1.example/x?sessionid=abc \n", "http://www.h1.example/x"),
        (
            "http://www.h1.example/view.php?cat=news&id=3&JSESSIONID=9",
            "http://www.h1.example/view.php?cat=news&id=3",
        ),
        ("http://www.h1.example/v?SID=1&id=2", "http://www.h1.example/v?id=2"),
        ("http://www.h1.example/v?", "http://www.h1.example/v"),
        ("https://www.h1.example/", None),
        ("mailto:webmaster@example.org", None),
        ("javascript:void(0)", None),
        ("/relative/only", None),
        ("http://www.h1.example:99999/", None),
    ],
)
def test_canonical_url(url: str, expected: str | None) -> None:
    assert canonical_url(url) == expected


def test_canonical_url_can_keep_session_ids() -> None:
    url = "http://h/x?a=1&sessionid=2"
    assert canonical_url(url, strip_session_ids=False) == url
    assert strip_session_params("a=1&PHPSESSID=2&b=3") == "a=1&b=3"
    assert strip_session_params("session=1&sids=2") == "session=1&sids=2"


def test_request_url_origin_and_absolute_form() -> None:
    assert request_url("www.h1.example", "/a/../b") == "http://www.h1.example/b"
    assert request_url("www.h1.example", "http://www.h2.example/c") == "http://www.h2.example/c"
    assert request_url("www.h1.example", "*") is None


def test_request_url_fast_path_agrees_with_canonical_url() -> None:
    model = WebModel(WebSpec(seed=8, hosts=30, pages_mean=12, profile="hostile"))
    targets = {
        (model.hosts[h].name, link.href)
        for h in range(len(model.hosts))
        for i in range(min(4, model.hosts[h].pages))
        for link in model.plan(h, i).links
        if link.href.startswith("/")
    }
    assert len(targets) > 100
    odd = ["/a/./b", "/a/../b?x=1", "/x?", "/x?SID=1&a=2", "/p#f", "/ä", "/a b", "/x?sessionid=1"]
    targets |= {("www.h1.example", t) for t in odd}
    targets |= {(h, "/x") for h in ("WWW.H1.EXAMPLE", "www.h1.example:80", "www.h1.example.")}
    for host, target in targets:
        for strip in (True, False):
            want = canonical_url(f"http://{host}{target}", strip_session_ids=strip)
            assert request_url(host, target, strip_session_ids=strip) == want, (host, target)


def test_helpers() -> None:
    assert has_non_html_extension("/files/doc-3.pdf")
    assert has_non_html_extension("/img/PIC-1.JPG?x=1")
    assert not has_non_html_extension("/media/item-3")
    assert not has_non_html_extension("/docs/manual-1.html")
    assert not has_non_html_extension("/a.pdf/b")
    assert product_token("gossamer/0.1 (+http://example.org)") == "gossamer"
    assert product_token("  BadBot ") == "badbot"


def test_rules_validate() -> None:
    with pytest.raises(ValueError, match="scope"):
        TruthRules(scope="planet")
    with pytest.raises(ValueError, match="seed"):
        TruthRules(seeds=("ftp://x/",))
    with pytest.raises(ValueError, match="regex"):
        TruthRules(deny=("(",))
    with pytest.raises(ValueError, match="max_depth"):
        TruthRules(max_depth=-1)
    rules = TruthRules.from_dict({"seeds": "http://a.example/", "scope": "all", "extra": 1})
    assert rules.seeds == ("http://a.example/",)
    assert TruthRules.from_dict(rules.to_dict()) == rules


# ------------------------------------------------------------------ determinism
def test_same_spec_same_truth() -> None:
    spec = WebSpec(seed=3, hosts=60, pages_mean=10, profile="hostile")
    rules = TruthRules(scope="all", max_depth=6, use_sitemaps=True)
    a = compute_truth(WebModel(spec), rules)
    b = compute_truth(WebModel(spec), rules)
    assert a.order == b.order
    assert a.edges == b.edges
    assert dict(a.excluded) == dict(b.excluded)
    assert dict(a.depth) == dict(b.depth)
    assert a.to_json() == b.to_json()
    other = compute_truth(WebModel(dataclasses.replace(spec, seed=4)), rules)
    assert other.order != a.order


def test_default_seed_is_home_of_host_zero() -> None:
    model = WebModel(spec_with())
    truth = compute_truth(model, TruthRules())
    assert truth.rules.seeds == (model.page_url(0, 0),)
    assert truth.order[0] == model.page_url(0, 0)
    assert truth.depth[model.page_url(0, 0)] == 0


# ------------------------------------------------------------------ clean web: exact sets
def test_clean_host_scope_is_exactly_the_site() -> None:
    model = WebModel(WebSpec(seed=2, hosts=30, pages_mean=25))
    for h in (0, 5):
        host = model.hosts[h]
        truth = compute_truth(model, TruthRules(seeds=(model.page_url(h, 0),)))
        assert truth.required == {model.page_url(h, i) for i in range(host.pages)}
        assert truth.hosts == (host.name,)
        assert set(truth.excluded.values()) <= {"scope"}


def test_clean_all_scope_is_closed_under_links() -> None:
    model = WebModel(WebSpec(seed=2, hosts=30, pages_mean=25))
    truth = compute_truth(model, TruthRules(scope="all"))
    for url in truth.order:
        h, kind = resolve(model, url)
        assert kind is Kind.PAGE
        _is_html, links, _nofollow = page_outcome(model, model.resolve(h, split_url(url)[1]))
        for link in links:
            assert link.url in truth.required
    # every host reached is complete (navigation links reach every page)
    for name in truth.hosts:
        host = model.host_by_name(name)
        assert host is not None
        assert all(model.page_url(host.id, i) in truth.required for i in range(host.pages))
    assert len(truth.required) == sum(model.host_by_name(n).pages for n in truth.hosts)  # type: ignore[union-attr]


def test_edges_and_depths_are_consistent() -> None:
    model = WebModel(spec_with(profile="realistic"))
    truth = compute_truth(model, TruthRules(scope="all"))
    incoming: dict[str, list[tuple[str, str]]] = {}
    for src, dst, kind in truth.edges:
        assert dst in truth.required
        if kind != "sitemap":
            assert src in truth.required
        step = 1 if kind == "link" else 0
        assert truth.depth[dst] <= truth.depth[src] + step
        incoming.setdefault(dst, []).append((src, kind))
    seeds = set(truth.rules.seeds)
    for url in truth.order:
        if url in seeds:
            continue
        d = truth.depth[url]
        assert any(truth.depth[s] + (1 if k == "link" else 0) == d for s, k in incoming[url]), url
    depths = [truth.depth[u] for u in truth.order]
    assert depths == sorted(depths)  # BFS order


# ------------------------------------------------------------------ realistic cross-checks
@pytest.fixture(scope="module")
def realistic() -> tuple[WebModel, Truth]:
    model = WebModel(WebSpec(seed=5, hosts=150, pages_mean=12, profile="hostile"))
    return model, compute_truth(model, TruthRules(scope="all"))


def test_required_urls_exist_and_are_not_traps(realistic: tuple[WebModel, Truth]) -> None:
    model, truth = realistic
    kinds = set()
    for url in truth.required:
        _h, kind = resolve(model, url)
        assert kind is not Kind.NOT_FOUND, url
        assert kind not in TRAP_KINDS, url
        kinds.add(kind)
        assert not has_non_html_extension(split_url(url)[1])
        assert "sessionid=" not in url
    # a hostile web has them all: errors, redirects, loops, MIME-only media, lying HTML
    assert {Kind.PAGE, Kind.REDIRECT, Kind.LOOP, Kind.MISSING, Kind.GONE, Kind.MEDIA} <= kinds
    assert truth.trap and not truth.permitted
    for url in truth.trap:
        assert resolve(model, url)[1] in TRAP_KINDS
        assert truth.excluded[url] == "trap"
    assert set(truth.excluded.values()) <= set(EXCLUDE_REASONS)


def test_robots_verdicts_agree_with_protego(realistic: tuple[WebModel, Truth]) -> None:
    model, truth = realistic
    parsers: dict[int, Protego] = {}

    def verdict(url: str) -> bool | None:
        """Independent robots verdict from the model's robots status and protego."""
        host = model.host_by_name(split_url(url)[0])
        assert host is not None
        status = model.robots_status(host.id)
        if status in ("500", "timeout", "dead"):
            return False
        if status == "404":
            return True
        if host.id not in parsers:
            parsers[host.id] = Protego.parse(model.robots_txt(host.id))
        return bool(parsers[host.id].can_fetch(url, "gossamer"))

    for url in truth.required:
        assert verdict(url) is True, url
    reasons = {"robots": 0, "robots-unavailable": 0}
    for url, reason in truth.excluded.items():
        if reason in reasons:
            reasons[reason] += 1
            assert verdict(url) is False, url
    assert reasons["robots"] > 0 and reasons["robots-unavailable"] > 0
    statuses = {model.robots_status(model.by_name[n]) for n in truth.hosts}
    assert {"ok", "404", "500"} <= statuses


def test_error_pages_are_required_without_links() -> None:
    clean = compute_truth(WebModel(spec_with()), TruthRules(scope="all"))
    # every page but the home pages answers 500: required, but only home pages have links
    broken = compute_truth(WebModel(spec_with(("error_500", 1.0))), TruthRules(scope="all"))
    assert broken.required < clean.required
    assert {split_url(src)[1] for src, _dst, _kind in broken.edges} == {"/"}
    assert sum(1 for u in broken.order if split_url(u)[1] != "/") > len(broken.hosts)
    # a 503 on the first attempt (or a reset) is retried: its links count
    for override in ("transient_503", "reset_once"):
        retried = compute_truth(WebModel(spec_with((override, 1.0))), TruthRules(scope="all"))
        assert retried.order == clean.order
        assert retried.edges == clean.edges


# ------------------------------------------------------------------ rule behaviour
@pytest.fixture(scope="module")
def web() -> WebModel:
    return WebModel(WebSpec(seed=8, hosts=120, pages_mean=12, profile="realistic"))


def test_depth_limit_shrinks_the_truth(web: WebModel) -> None:
    full = compute_truth(web, TruthRules(scope="all"))
    previous: frozenset[str] = frozenset()
    for d in range(4):
        t = compute_truth(web, TruthRules(scope="all", max_depth=d))
        assert previous <= t.required <= full.required
        assert max(t.depth.values()) <= d
        if d > 0:
            assert previous < t.required
        previous = t.required
    assert "depth" in compute_truth(web, TruthRules(scope="all", max_depth=1)).excluded.values()
    assert compute_truth(web, TruthRules(max_depth=0)).order == (web.page_url(0, 0),)


def test_scope_host_domain_all(web: WebModel) -> None:
    multi = next(h for h in web.hosts if h.name.startswith("blog."))
    seeds = (web.page_url(multi.id, 0),)
    by_scope = {
        s: compute_truth(web, TruthRules(seeds=seeds, scope=s)) for s in ("host", "domain", "all")
    }
    assert by_scope["host"].required < by_scope["domain"].required < by_scope["all"].required
    assert {split_url(u)[0] for u in by_scope["host"].required} == {multi.name}
    domains = {web.host_by_name(split_url(u)[0]).domain for u in by_scope["domain"].required}  # type: ignore[union-attr]
    assert domains == {multi.domain}
    assert "scope" in by_scope["domain"].excluded.values()


def test_allow_and_deny(web: WebModel) -> None:
    full = compute_truth(web, TruthRules(scope="all"))
    denied = compute_truth(web, TruthRules(scope="all", deny=(r"/news/",)))
    assert not any("/news/" in u for u in denied.required)
    assert any(r == "scope" and "/news/" in u for u, r in denied.excluded.items())
    assert denied.required < full.required
    allowed = compute_truth(web, TruthRules(scope="all", allow=(r"^http://www\.",)))
    assert all(u.startswith("http://www.") for u in allowed.required)


def test_switches_grow_the_truth(web: WebModel) -> None:
    base = compute_truth(web, TruthRules(scope="all"))
    assert "nofollow" in base.excluded.values()
    assert "non-html" in base.excluded.values()
    for change, reason in (
        ({"follow_nofollow": True}, "nofollow"),
        ({"html_only": False}, "non-html"),
        ({"obey_robots": False}, "robots"),
    ):
        grown = compute_truth(web, TruthRules(scope="all", **change))  # type: ignore[arg-type]
        assert base.required < grown.required, change
        assert reason not in grown.excluded.values()
    # with session ids kept, session URLs are distinct required URLs whose canonical is clean
    kept = compute_truth(web, TruthRules(scope="all", strip_session_ids=False))
    sessions = [u for u in kept.required if re.search(r"[?&]sessionid=", u)]
    assert sessions
    assert not any(re.search(r"[?&]sessionid=", u) for u in base.required)
    canon = {(s, d) for s, d, k in kept.edges if k == "canonical"}
    for url in sessions:
        if resolve(web, url)[1] is Kind.PAGE and url.count("?") == 1:
            clean = canonical_url(url)
            assert clean in kept.required
    assert any(s in sessions for s, _d in canon)


def test_max_pages_is_recorded(web: WebModel) -> None:
    full = compute_truth(web, TruthRules(scope="all"))
    capped = compute_truth(web, TruthRules(scope="all", max_pages=10))
    assert capped.required == full.required
    assert capped.expected_pages == 10
    assert compute_truth(web, TruthRules(max_pages=10**9)).expected_pages == len(
        compute_truth(web, TruthRules()).required
    )


def test_traps_are_excluded_or_bounded() -> None:
    model = WebModel(spec_with(("trap_host", 1.0)))
    free = compute_truth(model, TruthRules())
    assert len(free.trap) == 3  # the three entries on the home page, never expanded
    assert all(free.excluded[u] == "trap" for u in free.trap)
    bounded = compute_truth(model, TruthRules(max_depth=4))
    assert bounded.permitted and bounded.permitted <= bounded.trap
    assert not bounded.permitted & bounded.required
    assert max(bounded.depth[u] for u in bounded.permitted) == 4
    assert len(bounded.trap) > 3


def test_robots_status_handling() -> None:
    def run(*overrides: tuple[str, float], **rules: object) -> Truth:
        model = WebModel(spec_with(("robots_disallow", 1.0), *overrides))
        big = max(model.hosts, key=lambda h: h.pages)  # has /private/ pages
        seeds = (model.page_url(big.id, 0),)
        return compute_truth(model, TruthRules(seeds=seeds, **rules))  # type: ignore[arg-type]

    plain = run()
    assert "robots" in plain.excluded.values()
    assert not any("/private/" in u and "page-1" not in u for u in plain.required)
    # through a redirect chain the same file applies
    redirected = run(("robots_redirect", 1.0))
    assert redirected.required == plain.required
    assert redirected.robots_status == {plain.hosts[0]: "ok"}
    oracle = RobotsOracle(WebModel(spec_with(("robots_redirect", 1.0))))
    for h in range(5):
        assert len(oracle.robots(h).fetches) == 1 + oracle.model.hosts[h].robots_hops
    # 404: allow all
    missing = run(("robots_404", 1.0))
    assert plain.required < missing.required
    assert "robots" not in missing.excluded.values()
    # 500 and timeout: disallow all, even the seed
    for status in ("robots_500", "robots_timeout"):
        closed = run((status, 1.0))
        assert not closed.required
        assert set(closed.excluded.values()) == {"robots-unavailable"}
    # a group for our product token
    blocked = run(("robots_agent_block", 1.0))
    assert not blocked.required
    other = run(("robots_agent_block", 1.0), user_agent="otherbot/2.0")
    assert other.required == plain.required


def test_crawl_delay_and_sitemaps() -> None:
    model = WebModel(spec_with(("robots_crawl_delay", 1.0), ("robots_sitemap", 1.0)))
    truth = compute_truth(model, TruthRules(scope="all"))
    assert truth.crawl_delay == {n: model.host_by_name(n).crawl_delay for n in truth.hosts}  # type: ignore[union-attr]
    assert set(truth.crawl_delay.values()) <= {0.5, 1.0, 2.0}
    shallow = compute_truth(model, TruthRules(max_depth=1))
    mapped = compute_truth(model, TruthRules(max_depth=1, use_sitemaps=True))
    home = model.hosts[0]
    every_page = {model.page_url(0, i) for i in range(home.pages)}
    assert every_page <= mapped.required
    assert shallow.required < mapped.required
    assert all(mapped.depth[u] <= 1 for u in every_page)
    assert f"http://{home.name}/sitemap.xml" in mapped.sitemaps
    assert any(k == "sitemap" for _s, _d, k in mapped.edges)
    assert not shallow.sitemaps


def test_robots_oracle_matches_model_flags() -> None:
    model = WebModel(WebSpec(seed=9, hosts=300, pages_mean=3, profile="hostile"))
    oracle = RobotsOracle(model)
    expected = {"ok": "ok", "redirect": "ok", "404": "missing"}
    for host in model.hosts:
        got = oracle.robots(host.id)
        assert got.status == expected.get(model.robots_status(host.id), "unavailable")
        if got.status == "ok" and not host.flags & HostFlag.AGENT_BLOCK:
            assert (got.crawl_delay or 0.0) == host.crawl_delay
