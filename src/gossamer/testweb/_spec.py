"""Parameters of a simulated web: the graph shape and the realism switches.

A `WebSpec` is everything needed to regenerate a web byte for byte: the same spec gives the
same hosts, pages, links and truth. Realism switches are rates (fraction of hosts, pages or
links) grouped in a `Realism` record; a profile (clean, realistic, hostile) sets them all and
`overrides` changes single ones (`--set trap_host=0.5`); `duplicates` is the clean web with
near-duplicates on half its hosts.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from typing import Any

PROFILES = ("clean", "realistic", "hostile", "duplicates")


@dataclass(frozen=True, slots=True)
class Realism:
    """Rates and magnitudes of every realism switch. 0 turns a switch off.

    Host rates are the fraction of hosts with the behaviour, page rates the fraction of pages,
    link rates the fraction of links on a page.
    """

    # robots.txt (host rates)
    robots_disallow: float = 0.0  # Disallow: /private/ (and a wildcard rule on query-URL hosts)
    robots_agent_block: float = 0.0  # a group for one named crawler that disallows everything
    robots_crawl_delay: float = 0.0  # Crawl-delay: one of crawl_delays
    robots_sitemap: float = 0.0  # Sitemap: lines (the host also serves the sitemaps)
    robots_404: float = 0.0  # robots.txt answers 404 (allow all)
    robots_500: float = 0.0  # robots.txt answers 500 (disallow all, RFC 9309)
    robots_timeout: float = 0.0  # robots.txt never answers (disallow all)
    robots_redirect: float = 0.0  # robots.txt redirects (once or a chain) to the real file
    # whole-host behaviour (host rates)
    dead_host: float = 0.0  # accepts connections, never answers anything
    rate_limit_host: float = 0.0  # answers 429 + Retry-After to bursts above rate_limit_per_s
    gzip_host: float = 0.0  # gzip/deflate when the client accepts it
    charset_host: float = 0.0  # a non-UTF-8 charset (iso-8859-1, windows-1252, shift_jis)
    conditional_host: float = 0.0  # Last-Modified / ETag, 304 on conditional requests
    query_url_host: float = 0.0  # page URLs with query strings (/view.php?cat=..&id=..)
    trap_host: float = 0.0  # crawler traps: calendar, ever-deeper paths, query permutations
    # near-duplicates: printer-friendly copies (/print/), mirrored pages (/mirror/), session
    # variants (?ref=N, a parameter no crawler strips) and a calendar of days (/events?day=)
    near_dup_host: float = 0.0
    slow_host: float = 0.0  # latency multiplied by slow_host_factor (politeness-bound hosts)
    latency_ms: float = 0.0  # mean per-request latency of a host
    latency_jitter: float = 0.0  # +- fraction of the latency, uniform per request
    # pages (page rates)
    error_500: float = 0.0  # answers 500 every time
    transient_503: float = 0.0  # answers 503 (half with Retry-After) to the first request
    reset_always: float = 0.0  # connection reset (RST) every time
    reset_once: float = 0.0  # connection reset on the first request, then fine
    hang_page: float = 0.0  # never answers (the client must time out)
    slow_first_byte: float = 0.0  # first byte after slow_first_byte_s
    trickle: float = 0.0  # body trickled over trickle_s (slowloris)
    broken_gzip: float = 0.0  # Content-Encoding: gzip with a corrupt stream, always
    invalid_utf8: float = 0.0  # bytes that are not UTF-8 inside a UTF-8 page
    malformed_html: float = 0.0  # upper-case tags, unquoted attributes, unclosed elements
    many_links: float = 0.0  # pages with many_links_count links
    base_href: float = 0.0  # <base href> pointing to another directory
    meta_robots: float = 0.0  # <meta name=robots content=noindex,nofollow> (or noindex only)
    x_robots_tag: float = 0.0  # X-Robots-Tag: nofollow header (or noindex only)
    changing: float = 0.0  # content changes with the web's epoch (re-crawl tests)
    # links (link rates)
    redirect_link: float = 0.0  # link to a redirect chain (1..redirect_max_hops, 301/302/307/308)
    redirect_loop: float = 0.0  # link to a redirect loop
    dead_link: float = 0.0  # link to a page that answers 404 or 410
    nonhtml_link: float = 0.0  # link to a PDF / image (by extension, by MIME only, lying)
    nofollow_link: float = 0.0  # rel=nofollow
    link_forms: float = 0.0  # relative, ../, ?query-only, //host, MiXeD case, :80, #fragment
    session_link: float = 0.0  # ?sessionid=… duplicates (served with rel=canonical)
    junk_link: float = 0.0  # mailto:, javascript:, tel:, data: (never crawlable)
    # huge responses (a count over the whole web, linked from home pages)
    huge_pages: int = 0
    huge_page_bytes: int = 50 * 1024 * 1024
    # magnitudes
    crawl_delays: tuple[float, ...] = (0.5, 1.0, 2.0)
    rate_limit_per_s: float = 5.0
    slow_host_factor: float = 10.0
    slow_first_byte_s: float = 3.0
    trickle_s: float = 5.0
    many_links_count: int = 10_000
    redirect_max_hops: int = 5


_CLEAN = Realism()

_REALISTIC = Realism(
    robots_disallow=0.3,
    robots_agent_block=0.02,
    robots_crawl_delay=0.1,
    robots_sitemap=0.3,
    robots_404=0.15,
    robots_500=0.02,
    robots_timeout=0.01,
    robots_redirect=0.03,
    dead_host=0.01,
    rate_limit_host=0.03,
    gzip_host=0.5,
    charset_host=0.1,
    conditional_host=0.7,
    query_url_host=0.15,
    trap_host=0.05,
    slow_host=0.03,
    latency_ms=20.0,
    latency_jitter=0.5,
    error_500=0.005,
    transient_503=0.005,
    reset_always=0.001,
    reset_once=0.003,
    hang_page=0.0005,
    slow_first_byte=0.002,
    trickle=0.001,
    broken_gzip=0.002,
    invalid_utf8=0.01,
    malformed_html=0.05,
    many_links=0.0005,
    base_href=0.03,
    meta_robots=0.02,
    x_robots_tag=0.01,
    changing=0.2,
    redirect_link=0.02,
    redirect_loop=0.001,
    dead_link=0.01,
    nonhtml_link=0.03,
    nofollow_link=0.03,
    link_forms=0.6,
    session_link=0.01,
    junk_link=0.02,
    huge_pages=1,
    huge_page_bytes=50 * 1024 * 1024,
)

_HOSTILE = dataclasses.replace(
    _REALISTIC,
    robots_500=0.1,
    robots_timeout=0.05,
    robots_redirect=0.1,
    dead_host=0.05,
    rate_limit_host=0.2,
    trap_host=0.3,
    slow_host=0.1,
    latency_ms=50.0,
    latency_jitter=0.9,
    error_500=0.03,
    transient_503=0.03,
    reset_always=0.01,
    reset_once=0.02,
    hang_page=0.005,
    slow_first_byte=0.01,
    trickle=0.005,
    broken_gzip=0.01,
    invalid_utf8=0.05,
    malformed_html=0.3,
    many_links=0.002,
    redirect_link=0.05,
    redirect_loop=0.01,
    dead_link=0.05,
    nonhtml_link=0.1,
    session_link=0.05,
    junk_link=0.05,
    huge_pages=2,
    huge_page_bytes=5 * 1024**3,
    slow_first_byte_s=10.0,
    trickle_s=30.0,
)

#: a clean web whose every other host serves near-duplicates (the truth knows them: _truth.py
#: `near_duplicate_group`), for scoring near-duplicate detection
_DUPLICATES = dataclasses.replace(_CLEAN, near_dup_host=0.5)

_PROFILE_REALISM = {
    "clean": _CLEAN,
    "realistic": _REALISTIC,
    "hostile": _HOSTILE,
    "duplicates": _DUPLICATES,
}

REALISM_FIELDS = {f.name: f for f in dataclasses.fields(Realism)}


def realism_for(profile: str, overrides: tuple[tuple[str, float], ...] = ()) -> Realism:
    """The profile's switches with `overrides` applied; raises ValueError on unknown names."""
    try:
        base = _PROFILE_REALISM[profile]
    except KeyError:
        raise ValueError(
            f"unknown profile {profile!r}; choose one of {', '.join(PROFILES)}"
        ) from None
    changes: dict[str, Any] = {}
    for name, value in overrides:
        if name not in REALISM_FIELDS:
            raise ValueError(f"unknown realism switch {name!r}")
        if name == "crawl_delays":
            raise ValueError("crawl_delays cannot be overridden with a single number")
        current = getattr(base, name)
        changes[name] = int(value) if isinstance(current, int) else float(value)
        if changes[name] < 0:
            raise ValueError(f"realism switch {name} must be >= 0, got {value}")
    return dataclasses.replace(base, **changes)


@dataclass(frozen=True, slots=True)
class WebSpec:
    """The shape of a simulated web. Same spec, same web: byte for byte."""

    seed: int = 1
    hosts: int = 100
    pages_mean: float = 50.0  # mean pages per host (discrete Pareto, heavy tail)
    pages_alpha: float = 1.5  # Pareto shape: smaller means a heavier tail
    pages_max: int = 1_000_000  # cap on one host's pages
    outdegree_mean: float = 30.0  # mean links per page (heavy tail)
    locality: float = 0.8  # fraction of links to the same host
    page_bytes_mean: int = 15_000  # mean HTML size (log-normal)
    ip_share: float = 0.25  # fraction of domains sharing an IP with another domain
    max_ips: int = 4096  # distinct IPs at most (domains wrap around)
    profile: str = "clean"
    overrides: tuple[tuple[str, float], ...] = field(default=())

    def __post_init__(self) -> None:
        problems = []
        if not 1 <= self.hosts <= 100_000:
            problems.append(f"hosts must be 1..100000, got {self.hosts}")
        if self.pages_mean < 1:
            problems.append(f"pages_mean must be >= 1, got {self.pages_mean}")
        if self.pages_alpha <= 1.0:
            problems.append(f"pages_alpha must be > 1, got {self.pages_alpha}")
        if self.pages_max < 1:
            problems.append(f"pages_max must be >= 1, got {self.pages_max}")
        if not 0 <= self.outdegree_mean <= 1000:
            problems.append(f"outdegree_mean must be 0..1000, got {self.outdegree_mean}")
        if not 0.0 <= self.locality <= 1.0:
            problems.append(f"locality must be 0..1, got {self.locality}")
        if not 200 <= self.page_bytes_mean <= 10_000_000:
            problems.append(f"page_bytes_mean must be 200..10000000, got {self.page_bytes_mean}")
        if not 0.0 <= self.ip_share <= 1.0:
            problems.append(f"ip_share must be 0..1, got {self.ip_share}")
        if not 1 <= self.max_ips <= 60_000:
            problems.append(f"max_ips must be 1..60000, got {self.max_ips}")
        if problems:
            raise ValueError("; ".join(problems))
        self.realism()  # validates profile and overrides

    def realism(self) -> Realism:
        return realism_for(self.profile, self.overrides)

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["overrides"] = [list(o) for o in self.overrides]
        return d

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> WebSpec:
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = set(d) - known
        if unknown:
            raise ValueError(f"unknown web spec fields: {', '.join(sorted(unknown))}")
        d = dict(d)
        d["overrides"] = tuple((str(k), float(v)) for k, v in d.get("overrides", ()))
        return cls(**d)

    @classmethod
    def from_json(cls, text: str) -> WebSpec:
        return cls.from_dict(json.loads(text))
