"""The simulated web's graph: hosts, pages, links and what every URL is.

Everything is a pure function of the `WebSpec`: per-host metadata is computed once (a few
numbers per host, so 100,000 hosts fit easily); a page's flags and links are drawn from a
random generator seeded by (seed, host, page), so a 10-million-page web needs no storage.
The server renders responses from this model and the truth function walks the same links,
which is why the truth is exact.

Page addressing: host `www.h12.example` has pages 0..n-1; page 0 is `/`, page i is
`/<section>/page-<i>.html` (or `/view.php?cat=<section>&id=<i>` on query-URL hosts). Every
page links to its navigation children 3i+1..3i+3, so a whole site is reachable from `/`.
"""

from __future__ import annotations

import math
import posixpath
import random
from dataclasses import dataclass
from datetime import date as _date
from enum import IntEnum
from functools import lru_cache
from typing import NamedTuple

import xxhash

from ._spec import Realism, WebSpec

SECTIONS = ("news", "about", "products", "blog", "docs", "archive", "team", "help")
HOST_LABELS = ("www", "blog", "shop", "docs", "news")
CHARSETS = ("iso-8859-1", "windows-1252", "shift_jis")
SESSION_PARAMS = ("sessionid", "jsessionid", "phpsessid", "sid")
NAV_FANOUT = 3
SITEMAP_URLS_PER_FILE = 1000
TRAP_DEEP_MAX_CHARS = 1500
TRAP_ENTRIES = ("/calendar/2026/11/", "/deep/a/", "/search.php?q=shoes&sort=price&page=1")


class HostFlag:
    """Host behaviour bits (plain ints: enum.IntFlag arithmetic is slow on the hot path)."""

    DISALLOW = 1 << 0
    AGENT_BLOCK = 1 << 1
    CRAWL_DELAY = 1 << 2
    SITEMAP = 1 << 3
    ROBOTS_404 = 1 << 4
    ROBOTS_500 = 1 << 5
    ROBOTS_TIMEOUT = 1 << 6
    ROBOTS_REDIRECT = 1 << 7
    DEAD = 1 << 8
    RATE_LIMIT = 1 << 9
    GZIP = 1 << 10
    CHARSET = 1 << 11
    CONDITIONAL = 1 << 12
    QUERY_URLS = 1 << 13
    TRAPS = 1 << 14
    SLOW = 1 << 15
    NEAR_DUPS = 1 << 16


def flag_names(cls: type, value: int) -> list[str]:
    """Names of the bits of `value` in HostFlag or PageFlag, for humans and reports."""
    return [k for k, v in vars(cls).items() if k.isupper() and isinstance(v, int) and value & v]


_DISALLOW = HostFlag.DISALLOW
_QUERY_URLS = HostFlag.QUERY_URLS


class PageFlag:
    """Page behaviour bits (plain ints, like HostFlag)."""

    ERROR_500 = 1 << 0
    TRANSIENT_503 = 1 << 1
    RESET_ALWAYS = 1 << 2
    RESET_ONCE = 1 << 3
    HANG = 1 << 4
    SLOW_FIRST_BYTE = 1 << 5
    TRICKLE = 1 << 6
    BROKEN_GZIP = 1 << 7
    INVALID_UTF8 = 1 << 8
    MALFORMED = 1 << 9
    MANY_LINKS = 1 << 10
    BASE_HREF = 1 << 11
    META_NOFOLLOW = 1 << 12  # meta robots noindex,nofollow
    META_NOINDEX = 1 << 13  # meta robots noindex only
    XROBOTS_NOFOLLOW = 1 << 14
    XROBOTS_NOINDEX = 1 << 15
    CHANGING = 1 << 16
    RETRY_AFTER = 1 << 17  # the 503 carries Retry-After


_META_NOFOLLOW = PageFlag.META_NOFOLLOW
_META_NOINDEX = PageFlag.META_NOINDEX
_XROBOTS_NOFOLLOW = PageFlag.XROBOTS_NOFOLLOW
_XROBOTS_NOINDEX = PageFlag.XROBOTS_NOINDEX
_RETRY_AFTER = PageFlag.RETRY_AFTER
_BASE_HREF = PageFlag.BASE_HREF
_MANY_LINKS = PageFlag.MANY_LINKS

# The order in which page flags are drawn: fixed forever (changing it changes every web).
_PAGE_FLAG_RATES: tuple[tuple[int, str], ...] = (
    (PageFlag.ERROR_500, "error_500"),
    (PageFlag.TRANSIENT_503, "transient_503"),
    (PageFlag.RESET_ALWAYS, "reset_always"),
    (PageFlag.RESET_ONCE, "reset_once"),
    (PageFlag.HANG, "hang_page"),
    (PageFlag.SLOW_FIRST_BYTE, "slow_first_byte"),
    (PageFlag.TRICKLE, "trickle"),
    (PageFlag.BROKEN_GZIP, "broken_gzip"),
    (PageFlag.INVALID_UTF8, "invalid_utf8"),
    (PageFlag.MALFORMED, "malformed_html"),
    (PageFlag.MANY_LINKS, "many_links"),
    (PageFlag.BASE_HREF, "base_href"),
    (PageFlag.CHANGING, "changing"),
)

# Pages whose answer depends on how often they were asked (the server counts attempts).
ATTEMPT_DEPENDENT = PageFlag.TRANSIENT_503 | PageFlag.RESET_ONCE
# Pages that never deliver a parseable body.
NO_CONTENT = PageFlag.ERROR_500 | PageFlag.RESET_ALWAYS | PageFlag.HANG | PageFlag.BROKEN_GZIP
_HOME_CLEARED = NO_CONTENT | PageFlag.META_NOFOLLOW | PageFlag.XROBOTS_NOFOLLOW


class Kind(IntEnum):
    """What a URL on a host is."""

    NOT_FOUND = 0
    PAGE = 1
    ROBOTS = 2  # /robots.txt
    ROBOTS_MOVED = 3  # /robots-moved/<k>.txt (redirect chain of robots.txt)
    SITEMAP = 4  # /sitemap.xml (urlset or index)
    SITEMAP_PART = 5  # /sitemap-<k>.xml.gz
    REDIRECT = 6  # /go/<target host>/<target page>/<hops>
    LOOP = 7  # /loop/<id>/<length>/<k>
    PDF = 8  # /files/doc-<k>.pdf
    IMAGE = 9  # /img/pic-<k>.jpg
    MEDIA = 10  # /media/item-<k> (PNG, no extension: MIME only)
    LYING_PDF = 11  # /files/report-<k>.pdf served as text/html (with links)
    LYING_HTML = 12  # /docs/manual-<k>.html served as application/pdf
    MISSING = 13  # /missing/<k>.html -> 404
    GONE = 14  # /gone/<k>.html -> 410
    HUGE = 15  # /big/huge-<k>.html
    TRAP_CALENDAR = 16  # /calendar/<y>/<m>/
    TRAP_DEEP = 17  # /deep/<seg>/.../
    TRAP_SEARCH = 18  # /search.php?...
    DUP_PRINT = 19  # /print/<page>.html: page's text, no links (a printer-friendly copy)
    DUP_MIRROR = 20  # /mirror/<page>.html: the page under another path (<base> to it)
    DUP_SESSION = 21  # <page target>?ref=<k>: the page under a parameter (rel=canonical)
    DUP_CALENDAR = 22  # /events?day=YYYY-MM-DD: a day's page, the same text every day


TRAP_KINDS = frozenset({Kind.TRAP_CALENDAR, Kind.TRAP_DEEP, Kind.TRAP_SEARCH})
#: near-duplicates of a page (or of each other: the calendar's days), on NEAR_DUPS hosts
DUP_KINDS = frozenset({Kind.DUP_PRINT, Kind.DUP_MIRROR, Kind.DUP_SESSION, Kind.DUP_CALENDAR})
#: the calendar of a NEAR_DUPS host: linked from its home page, a day's page links the days
#: before and after (the date window of gossamer's calendar filter lets them all through)
DUP_CALENDAR_ENTRY = "/events?day=2026-07-14"
NON_HTML_EXTENSION_KINDS = frozenset({Kind.PDF, Kind.IMAGE, Kind.LYING_PDF})


@dataclass(frozen=True, slots=True)
class Host:
    id: int
    name: str  # lower-case host name, e.g. www.h12.example
    domain: str  # registrable domain, e.g. h12.example
    ip: str  # intended IPv4 address on loopback (127.1.x.y)
    pages: int
    flags: int  # HostFlag bits
    crawl_delay: float  # 0 when robots.txt declares none
    charset: str  # utf-8 or one of CHARSETS
    charset_decl: int  # 0 header, 1 meta, 2 both, 3 neither
    latency_ms: float  # mean added latency per request
    robots_hops: int  # redirects before the real robots.txt (ROBOTS_REDIRECT)


@dataclass(frozen=True, slots=True)
class Resource:
    """A classified request target on a host."""

    kind: Kind
    host: int
    a: int = 0  # page id / k / target host / year ...
    b: int = 0  # target page / length / month ...
    c: int = 0  # hops / position
    session: bool = False  # the target carried a session-id parameter
    text: str = ""  # trap path or query


class Link(NamedTuple):
    """One link on a page: `url` is what a correct crawler resolves `href` to (absolute,
    lower-case host, no default port, no fragment; session ids kept). A tuple: pages have
    thousands of links and tuples are built fastest."""

    url: str
    href: str
    nofollow: bool = False


def _h64(*parts: object) -> int:
    return xxhash.xxh64_intdigest("|".join(map(str, parts)).encode())


def _unit(*parts: object) -> float:
    return (_h64(*parts) >> 11) / float(1 << 53)


def ip_for_index(n: int) -> str:
    """127.1.0.1, 127.1.0.2, …: loopback addresses, avoiding .0 and .255."""
    return f"127.{1 + n // (254 * 256)}.{(n // 254) % 256}.{1 + n % 254}"


class WebModel:
    """The deterministic web of one `WebSpec`."""

    def __init__(self, spec: WebSpec) -> None:
        self.spec = spec
        self.realism: Realism = spec.realism()
        self.hosts: list[Host] = []
        self.by_name: dict[str, int] = {}
        self._build_hosts()
        self.huge_host: dict[int, list[int]] = {}
        for k in range(self.realism.huge_pages):
            self.huge_host.setdefault((k * 7919 + 13) % len(self.hosts), []).append(k)
        self._popular = self._host_popularity()
        self._page_rates = [
            (flag, float(getattr(self.realism, name))) for flag, name in _PAGE_FLAG_RATES
        ]
        self.plan = lru_cache(maxsize=8192)(self._plan)

    # ---------------------------------------------------------------- hosts
    def _build_hosts(self) -> None:
        spec, r = self.spec, self.realism
        rng = random.Random(_h64("hosts", spec.seed))
        xm = spec.pages_mean * (spec.pages_alpha - 1.0) / spec.pages_alpha
        domain = 0
        ip_of_domain: list[int] = []
        next_ip = 0
        while len(self.hosts) < spec.hosts:
            u = rng.random()
            labels = 1 if u < 0.7 else (2 if u < 0.92 else 3)
            if domain > 0 and rng.random() < spec.ip_share:
                ip_index = ip_of_domain[rng.randrange(domain)]
            else:
                ip_index = next_ip % spec.max_ips
                next_ip += 1
            ip_of_domain.append(ip_index)
            dname = f"h{domain}.example"
            for label in HOST_LABELS[:labels]:
                if len(self.hosts) >= spec.hosts:
                    break
                hid = len(self.hosts)
                pages = max(1, int(xm * (1.0 - rng.random()) ** (-1.0 / spec.pages_alpha)))
                pages = min(pages, spec.pages_max)
                self.hosts.append(
                    self._make_host(hid, f"{label}.{dname}", dname, ip_index, pages, r)
                )
                self.by_name[self.hosts[-1].name] = hid
            domain += 1

    def _make_host(
        self, hid: int, name: str, dname: str, ip_index: int, pages: int, r: Realism
    ) -> Host:
        seed = self.spec.seed
        flags = 0
        for flag, fname, rate in (
            (HostFlag.DISALLOW, "DISALLOW", r.robots_disallow),
            (HostFlag.AGENT_BLOCK, "AGENT_BLOCK", r.robots_agent_block),
            (HostFlag.CRAWL_DELAY, "CRAWL_DELAY", r.robots_crawl_delay),
            (HostFlag.SITEMAP, "SITEMAP", r.robots_sitemap),
            (HostFlag.DEAD, "DEAD", r.dead_host),
            (HostFlag.RATE_LIMIT, "RATE_LIMIT", r.rate_limit_host),
            (HostFlag.GZIP, "GZIP", r.gzip_host),
            (HostFlag.CHARSET, "CHARSET", r.charset_host),
            (HostFlag.CONDITIONAL, "CONDITIONAL", r.conditional_host),
            (HostFlag.QUERY_URLS, "QUERY_URLS", r.query_url_host),
            (HostFlag.TRAPS, "TRAPS", r.trap_host),
            (HostFlag.SLOW, "SLOW", r.slow_host),
            (HostFlag.NEAR_DUPS, "NEAR_DUPS", r.near_dup_host),
        ):
            if rate > 0 and _unit(seed, "host", hid, fname) < rate:
                flags |= flag
        # robots.txt status: one of 404 / 500 / timeout / redirect / normal
        u = _unit(seed, "robots-status", hid)
        edge = 0.0
        for flag, rate in (
            (HostFlag.ROBOTS_404, r.robots_404),
            (HostFlag.ROBOTS_500, r.robots_500),
            (HostFlag.ROBOTS_TIMEOUT, r.robots_timeout),
            (HostFlag.ROBOTS_REDIRECT, r.robots_redirect),
        ):
            edge += rate
            if u < edge:
                flags |= flag
                break
        crawl_delay = 0.0
        if flags & HostFlag.CRAWL_DELAY and r.crawl_delays:
            crawl_delay = r.crawl_delays[_h64(seed, "delay", hid) % len(r.crawl_delays)]
        charset = "utf-8"
        if flags & HostFlag.CHARSET:
            charset = CHARSETS[_h64(seed, "charset", hid) % len(CHARSETS)]
        charset_decl = _h64(seed, "charset-decl", hid) % 4
        if charset != "utf-8" and charset_decl == 3:
            charset_decl = 2  # a non-UTF-8 page always declares its charset somewhere
        latency = r.latency_ms * (0.25 + 1.5 * _unit(seed, "latency", hid))
        if flags & HostFlag.SLOW:
            latency = max(latency, 10.0) * r.slow_host_factor
        hops = 1 + _h64(seed, "robots-hops", hid) % 3
        return Host(
            hid,
            name,
            dname,
            ip_for_index(ip_index),
            pages,
            flags,
            crawl_delay,
            charset,
            charset_decl,
            latency,
            hops,
        )

    def _host_popularity(self) -> list[int]:
        """Host ids sorted by size, largest first: external links prefer big sites."""
        return sorted(range(len(self.hosts)), key=lambda h: (-self.hosts[h].pages, h))

    def host_by_name(self, name: str) -> Host | None:
        hid = self.by_name.get(name.lower().rstrip("."))
        return None if hid is None else self.hosts[hid]

    @property
    def total_pages(self) -> int:
        return sum(h.pages for h in self.hosts)

    def ips(self) -> list[str]:
        return sorted({h.ip for h in self.hosts})

    # ---------------------------------------------------------------- addressing
    def section(self, host: Host, i: int) -> str:
        if host.flags & _DISALLOW and i % 10 == 7:
            return "private"
        return SECTIONS[((i * 2654435761) >> 7) & 7]

    def page_target(self, h: int, i: int) -> str:
        """Path (and query) of page i of host h."""
        if i == 0:
            return "/"
        f = self.hosts[h].flags
        sec = "private" if f & _DISALLOW and i % 10 == 7 else SECTIONS[((i * 2654435761) >> 7) & 7]
        if f & _QUERY_URLS:
            return f"/view.php?cat={sec}&id={i}"
        return f"/{sec}/page-{i}.html"

    def page_url(self, h: int, i: int) -> str:
        return f"http://{self.hosts[h].name}{self.page_target(h, i)}"

    def url_of(self, h: int, target: str) -> str:
        return f"http://{self.hosts[h].name}{target}"

    def resolve(self, h: int, target: str) -> Resource:
        """Classify a request target (origin-form: path plus optional query) on host h."""
        host = self.hosts[h]
        path, _, query = target.partition("?")
        nf = Resource(Kind.NOT_FOUND, h)
        session = False
        if query:
            params = query.split("&")
            kept = [p for p in params if p.partition("=")[0].lower() not in SESSION_PARAMS]
            session = len(kept) != len(params)
            query = "&".join(kept)
        if path == "/":
            return Resource(Kind.PAGE, h, 0, session=session) if not query else nf
        parts = path.split("/")  # ['', a, b, ...]
        head = parts[1]
        n = len(parts)
        if path == "/robots.txt":
            return Resource(Kind.ROBOTS, h) if not query else nf
        if host.flags & HostFlag.NEAR_DUPS and not session:
            dup = self._resolve_dup(h, path, head, n, parts, query)
            if dup is not None:
                return dup
        if query and not (head == "view.php" or head == "search.php"):
            return nf
        try:
            if head == "view.php" and n == 2 and host.flags & HostFlag.QUERY_URLS:
                q = dict(p.partition("=")[::2] for p in query.split("&"))
                if set(q) != {"cat", "id"} or not query.startswith("cat="):
                    return nf
                i = _nat(q["id"])
                if 0 < i < host.pages and q["cat"] == self.section(host, i):
                    return Resource(Kind.PAGE, h, i, session=session)
                return nf
            if n == 3 and parts[2].startswith("page-") and parts[2].endswith(".html"):
                if host.flags & HostFlag.QUERY_URLS:
                    return nf
                i = _nat(parts[2][5:-5])
                if 0 < i < host.pages and head == self.section(host, i):
                    return Resource(Kind.PAGE, h, i, session=session)
                return nf
            if session:
                return nf
            if head == "robots-moved" and n == 3 and parts[2].endswith(".txt"):
                k = _nat(parts[2][:-4])
                if host.flags & HostFlag.ROBOTS_REDIRECT and k < host.robots_hops:
                    return Resource(Kind.ROBOTS_MOVED, h, k)
                return nf
            if head == "sitemap.xml" and n == 2 and host.flags & HostFlag.SITEMAP:
                return Resource(Kind.SITEMAP, h)
            if n == 2 and head.startswith("sitemap-") and head.endswith(".xml.gz"):
                k = _nat(head[8:-7])
                if host.flags & HostFlag.SITEMAP and k < self.sitemap_parts(h):
                    return Resource(Kind.SITEMAP_PART, h, k)
                return nf
            if head == "go" and n == 5:
                th, tp, hops = _nat(parts[2]), _nat(parts[3]), _nat(parts[4])
                if th < len(self.hosts) and tp < self.hosts[th].pages and 1 <= hops <= 16:
                    return Resource(Kind.REDIRECT, h, th, tp, hops)
                return nf
            if head == "loop" and n == 5:
                ident, length, k = _nat(parts[2]), _nat(parts[3]), _nat(parts[4])
                if 1 <= length <= 8 and k < length:
                    return Resource(Kind.LOOP, h, ident, length, k)
                return nf
            if n == 3:
                leaf = parts[2]
                for kind, d, prefix, suffix in _LEAF_KINDS:
                    if head == d and leaf.startswith(prefix) and leaf.endswith(suffix):
                        k = _nat(leaf[len(prefix) : len(leaf) - len(suffix)])
                        return Resource(kind, h, k)
            if head == "big" and n == 3 and parts[2].startswith("huge-"):
                if parts[2].endswith(".html"):
                    k = _nat(parts[2][5:-5])
                    if k in self.huge_host.get(h, ()):
                        return Resource(Kind.HUGE, h, k)
                return nf
            if host.flags & HostFlag.TRAPS:
                if head == "calendar" and n == 5 and parts[4] == "":
                    y = _nat(parts[2])
                    m = int(parts[3]) if len(parts[3]) == 2 and parts[3].isdigit() else 0
                    if 1900 <= y <= 9999 and 1 <= m <= 12:
                        return Resource(Kind.TRAP_CALENDAR, h, y, m)
                    return nf
                if (
                    head == "deep"
                    and n >= 4
                    and parts[-1] == ""
                    and len(path) <= TRAP_DEEP_MAX_CHARS
                ):
                    if all(p in _DEEP_SEGMENTS for p in parts[2:-1]):
                        return Resource(Kind.TRAP_DEEP, h, n - 3, text=path)
                    return nf
                if head == "search.php" and n == 2 and query:
                    q = dict(p.partition("=")[::2] for p in query.split("&"))
                    if set(q) == {"q", "sort", "page"} and q["sort"] in _SORTS:
                        page = _nat(q["page"])
                        if 1 <= page <= 10_000:
                            return Resource(Kind.TRAP_SEARCH, h, page, text=query)
                    return nf
        except ValueError:
            return nf
        return nf

    def _resolve_dup(
        self, h: int, path: str, head: str, n: int, parts: list[str], query: str
    ) -> Resource | None:
        """A near-duplicate's target on a NEAR_DUPS host (DUP_KINDS), else None."""
        try:
            if query.startswith("ref=") and len(query) == 5 and query[4].isdigit():
                page = self.resolve(h, path)
                if page.kind is Kind.PAGE:
                    return Resource(Kind.DUP_SESSION, h, page.a, int(query[4]))
                return Resource(Kind.NOT_FOUND, h)
            if path == "/events" and query.startswith("day="):
                day = _date.fromisoformat(query[4:])
                if len(query) == 14 and 1900 <= day.year <= 9999:
                    return Resource(Kind.DUP_CALENDAR, h, day.toordinal())
                return Resource(Kind.NOT_FOUND, h)
            if head in ("print", "mirror") and n == 3 and parts[2].endswith(".html") and not query:
                i = _nat(parts[2][:-5])
                kind = Kind.DUP_PRINT if head == "print" else Kind.DUP_MIRROR
                if i < self.hosts[h].pages:
                    return Resource(kind, h, i)
                return Resource(Kind.NOT_FOUND, h)
        except ValueError:
            return Resource(Kind.NOT_FOUND, h)
        return None

    def dup_links(self, h: int, i: int) -> list[Link]:
        """The links page i of a NEAR_DUPS host has to its near-duplicates: its printer-
        friendly copy, its mirror (every third page), a variant under `?ref=1` (every fourth
        page but the home page), and on the home page the calendar."""
        host = self.hosts[h]
        if not host.flags & HostFlag.NEAR_DUPS:
            return []
        targets = [f"/print/{i}.html"]
        if i % 3 == 0:
            targets.append(f"/mirror/{i}.html")
        if i % 4 == 1 and not host.flags & HostFlag.QUERY_URLS:
            targets.append(self.page_target(h, i) + "?ref=1")
        if i == 0:
            targets.append(DUP_CALENDAR_ENTRY)
        return [Link(self.url_of(h, t), t) for t in targets]

    def sitemap_parts(self, h: int) -> int:
        pages = self.hosts[h].pages
        return 0 if pages <= SITEMAP_URLS_PER_FILE else -(-pages // SITEMAP_URLS_PER_FILE)

    # ---------------------------------------------------------------- pages
    def page_flags(self, h: int, i: int) -> int:
        return self.plan(h, i).flags

    def _plan(self, h: int, i: int) -> PagePlan:
        """Flags, links and size of page i of host h: one seeded generator, fixed draw order."""
        host = self.hosts[h]
        r = self.realism
        rng = random.Random(_h64(self.spec.seed, "page", h, i))
        flags = 0
        for flag, rate in self._page_rates:
            if rng.random() < rate:
                flags |= flag
        u = rng.random()
        if u < r.meta_robots:
            flags |= _META_NOFOLLOW if u < r.meta_robots / 2 else _META_NOINDEX
        u = rng.random()
        if u < r.x_robots_tag:
            flags |= _XROBOTS_NOFOLLOW if u < r.x_robots_tag / 2 else _XROBOTS_NOINDEX
        if rng.random() < 0.5:
            flags |= _RETRY_AFTER
        if i == 0:
            # home pages stay reachable and well-behaved: they anchor every site
            flags &= ~_HOME_CLEARED
        size = int(rng.lognormvariate(math.log(self.spec.page_bytes_mean) - 0.125, 0.5))
        size = max(300, min(size, 20 * self.spec.page_bytes_mean))
        base_dir = posixpath.dirname(self.page_target(h, i).partition("?")[0])
        base_href = ""
        if flags & _BASE_HREF:
            other = SECTIONS[rng.randrange(len(SECTIONS))]
            base_dir = f"/{other}"
            base_href = f"http://{host.name}/{other}/"
        links = self._draw_links(rng, host, i, flags, base_dir, base_href)
        if host.flags & HostFlag.NEAR_DUPS:
            links += self.dup_links(h, i)
        return PagePlan(h, i, flags, size, base_href, tuple(links), rng.getrandbits(32))

    def _draw_links(
        self,
        rng: random.Random,
        host: Host,
        i: int,
        flags: int,
        base_dir: str,
        base_href: str,
    ) -> list[Link]:
        r = self.realism
        spec = self.spec
        h = host.id
        n = host.pages
        cur_target = self.page_target(h, i)
        cur_path = cur_target.partition("?")[0]
        links: list[Link] = []
        ctx = _FormContext(host.name, base_dir, cur_path if not base_href else "")
        # navigation: home, parent, children
        nav = [0] if i else []
        if i:
            nav.append((i - 1) // NAV_FANOUT)
        nav.extend(range(NAV_FANOUT * i + 1, min(n, NAV_FANOUT * i + NAV_FANOUT + 1)))
        links.extend(self._form(rng, ctx, host, self.page_target(h, j), False) for j in nav)
        degree = 0
        if spec.outdegree_mean > 0:
            sigma = 1.0
            mu = math.log(spec.outdegree_mean) - sigma * sigma / 2
            degree = min(int(rng.lognormvariate(mu, sigma)), int(20 * spec.outdegree_mean) + 1)
        degree = max(0, degree - len(nav))
        if flags & _MANY_LINKS:
            degree = r.many_links_count
        # Hot loop (every served page runs it): rates hoisted into locals, one draw per
        # decision, and special links only looked at when a special rate is set.
        nhosts = len(self.hosts)
        rand = rng.random
        locality = spec.locality
        p_nofollow = r.nofollow_link
        p_session = r.session_link
        c_redirect = r.redirect_link
        c_loop = c_redirect + r.redirect_loop
        c_dead = c_loop + r.dead_link
        c_nonhtml = c_dead + r.nonhtml_link
        c_junk = c_nonhtml + r.junk_link
        plain = r.link_forms <= 0
        popular = self._popular
        hosts = self.hosts
        form = self._form
        new_tuple = tuple.__new__
        for _ in range(degree):
            if nhosts == 1 or rand() < locality:
                th = h
                tp = int(n * rand() ** 2)
            else:
                th = popular[int(nhosts * rand() ** 3)]
                tp = 0 if rand() < 0.5 else int(hosts[th].pages * rand())
            nofollow = p_nofollow > 0 and rand() < p_nofollow
            if c_junk > 0:
                special = rand()
                if special < c_junk:
                    if special < c_redirect:
                        hops = 1 + rng.randrange(max(1, r.redirect_max_hops))
                        target = f"/go/{th}/{tp}/{hops}"
                    elif special < c_loop:
                        target = f"/loop/{rng.randrange(1000)}/{1 + rng.randrange(4)}/0"
                    elif special < c_dead:
                        k = rng.randrange(100_000)
                        target = f"/missing/{k}.html" if k % 3 else f"/gone/{k}.html"
                    elif special < c_nonhtml:
                        d, prefix, suffix = _NONHTML_TARGETS[rng.randrange(len(_NONHTML_TARGETS))]
                        target = f"/{d}/{prefix}{rng.randrange(1000)}{suffix}"
                    else:
                        links.append(Link("", _JUNK[rng.randrange(len(_JUNK))]))
                        continue
                    links.append(form(rng, ctx, host, target, nofollow))
                    continue
            if tp == 0:
                target = "/"
            else:
                f = hosts[th].flags
                if f & _DISALLOW and tp % 10 == 7:
                    sec = "private"
                else:
                    sec = SECTIONS[((tp * 2654435761) >> 7) & 7]
                if f & _QUERY_URLS:
                    target = f"/view.php?cat={sec}&id={tp}"
                else:
                    target = f"/{sec}/page-{tp}.html"
            if p_session > 0 and rand() < p_session:
                target += ("&" if "?" in target else "?") + f"sessionid={rng.getrandbits(48):012x}"
            if plain:
                url = f"http://{hosts[th].name}{target}"
                links.append(new_tuple(Link, (url, url, nofollow)))  # skips NamedTuple.__new__
            else:
                links.append(form(rng, ctx, hosts[th], target, nofollow))
        if i == 0:
            extra = [f"/big/huge-{k}.html" for k in self.huge_host.get(h, ())]
            if host.flags & HostFlag.TRAPS:
                extra += TRAP_ENTRIES
            links.extend(self._form(rng, ctx, host, target, False) for target in extra)
        return links

    def _form(
        self,
        rng: random.Random,
        ctx: _FormContext,
        target_host: Host,
        target: str,
        nofollow: bool,
    ) -> Link:
        """The link to `target` on `target_host`, written in one of the surface forms."""
        url = f"http://{target_host.name}{target}"
        if self.realism.link_forms <= 0 or rng.random() >= self.realism.link_forms:
            return Link(url, url, nofollow)
        same = target_host.name == ctx.host
        form = rng.randrange(10)
        path, q, query = target.partition("?")
        if same and form == 0:
            href = target  # root-relative
        elif same and form in (1, 2):
            rel = posixpath.relpath(path, ctx.base_dir)
            if path.endswith("/") and rel != ".":
                rel += "/"
            if rel == ".":
                rel = "./"
            if form == 2 and not rel.startswith("."):
                rel = "./" + rel
            href = rel + q + query
        elif same and form == 3 and q and path == ctx.doc_path:
            href = "?" + query  # query-only relative reference
        elif form == 4:
            href = f"//{target_host.name}{target}"
        elif form == 5:
            name = "".join(c.upper() if rng.random() < 0.5 else c for c in target_host.name)
            href = f"http://{name}{target}"
        elif form == 6:
            href = f"http://{target_host.name}:80{target}"
        elif form == 7:
            href = f"http://{target_host.name}{target}#{_FRAGMENTS[rng.randrange(len(_FRAGMENTS))]}"
        elif form == 8:
            href = f"  {target}\n" if same else f" {url} "
        elif same and path.count("/") >= 2:
            head = path.split("/")[1]
            href = f"/{head}/../{path.lstrip('/')}" + q + query  # dot segments
        else:
            href = url
        return Link(url, href, nofollow)

    # ---------------------------------------------------------------- other resources
    def resource_links(self, res: Resource) -> list[Link]:
        """Links inside non-page HTML resources (traps, lying PDFs, huge pages)."""
        host = self.hosts[res.host]
        h = res.host
        n = host.pages
        home = Link(f"http://{host.name}/", "/")
        kind = res.kind
        if kind is Kind.TRAP_CALENDAR:
            y, m = res.a, res.b
            py, pm = (y, m - 1) if m > 1 else (y - 1, 12)
            ny, nm = (y, m + 1) if m < 12 else (y + 1, 1)
            out = [home]
            for yy, mm in ((py, pm), (ny, nm)):
                if 1900 <= yy <= 9999:
                    t = f"/calendar/{yy}/{mm:02d}/"
                    out.append(Link(self.url_of(h, t), t))
            return out
        if kind is Kind.TRAP_DEEP:
            out = [home]
            if len(res.text) + 4 <= TRAP_DEEP_MAX_CHARS:
                for seg in _DEEP_SEGMENTS[:2]:
                    t = f"{res.text}{seg}/"
                    out.append(Link(self.url_of(h, t), f"{seg}/"))
            return out
        if kind is Kind.TRAP_SEARCH:
            q = dict(p.partition("=")[::2] for p in res.text.split("&"))
            out = [home]
            page = int(q["page"])
            for sort in _SORTS:
                for nxt in (page, page + 1):
                    if (sort, nxt) == (q["sort"], page) or nxt > 10_000:
                        continue
                    params = [("q", q["q"]), ("sort", sort), ("page", str(nxt))]
                    if (nxt + len(sort)) % 2:
                        params.reverse()  # endless permutations of the same query
                    t = "/search.php?" + "&".join(f"{k}={v}" for k, v in params)
                    out.append(Link(self.url_of(h, t), t))
            return out
        if kind is Kind.DUP_CALENDAR:
            out = [home]
            for delta in (-1, 1):
                day = res.a + delta
                if _date(1900, 1, 1).toordinal() <= day <= _date(9999, 12, 31).toordinal():
                    t = f"/events?day={_date.fromordinal(day).isoformat()}"
                    out.append(Link(self.url_of(h, t), t))
            return out
        if kind is Kind.LYING_PDF or kind is Kind.HUGE:
            return [
                Link(self.page_url(h, j), self.page_target(h, j))
                for j in sorted({0, res.a % n, (res.a * 7 + 1) % n})
            ]
        return []

    def redirect_location(self, res: Resource) -> tuple[int, str]:
        """(status, absolute Location URL) of a redirect resource."""
        h = res.host
        status = _REDIRECT_STATUSES[(res.a + res.b + res.c) % 4]
        if res.kind is Kind.REDIRECT:
            if res.c > 1:
                return status, self.url_of(h, f"/go/{res.a}/{res.b}/{res.c - 1}")
            return status, self.page_url(res.a, res.b)
        if res.kind is Kind.LOOP:
            return status, self.url_of(h, f"/loop/{res.a}/{res.b}/{(res.c + 1) % res.b}")
        if res.kind is Kind.ROBOTS or res.kind is Kind.ROBOTS_MOVED:
            host = self.hosts[h]
            nxt = host.robots_hops - 1 if res.kind is Kind.ROBOTS else res.a - 1
            return 301, self.url_of(h, f"/robots-moved/{nxt}.txt")
        raise ValueError(f"{res.kind.name} is not a redirect")

    def is_redirect(self, res: Resource) -> bool:
        if res.kind is Kind.REDIRECT or res.kind is Kind.LOOP:
            return True
        host = self.hosts[res.host]
        if res.kind is Kind.ROBOTS and host.flags & HostFlag.ROBOTS_REDIRECT:
            return True
        return res.kind is Kind.ROBOTS_MOVED and res.a > 0

    # ---------------------------------------------------------------- robots.txt
    def robots_txt(self, h: int) -> str:
        """The body of host h's real robots.txt (whatever status /robots.txt answers with)."""
        host = self.hosts[h]
        lines = [f"# robots.txt for {host.name}", "User-agent: *"]
        if host.flags & HostFlag.DISALLOW:
            lines.append("Disallow: /private/")
            if host.flags & HostFlag.QUERY_URLS:
                lines.append("Disallow: /*cat=private")
            lines.append("Allow: /private/page-1")
        if host.flags & HostFlag.TRAPS:
            lines.append("Disallow: /cgi-bin/")
        if not host.flags & HostFlag.DISALLOW and not host.flags & HostFlag.TRAPS:
            lines.append("Disallow:")
        if host.crawl_delay:
            lines.append(f"Crawl-delay: {host.crawl_delay:g}")
        lines += ["", "User-agent: badbot", "Disallow: /"]
        if host.flags & HostFlag.AGENT_BLOCK:
            lines += ["", "User-agent: gossamer", "Disallow: /"]
        if host.flags & HostFlag.SITEMAP:
            lines += ["", f"Sitemap: http://{host.name}/sitemap.xml"]
        return "\n".join(lines) + "\n"

    def robots_status(self, h: int) -> str:
        """How /robots.txt answers: ok, 404, 500, timeout, redirect or dead."""
        f = self.hosts[h].flags
        if f & HostFlag.DEAD:
            return "dead"
        for flag, name in (
            (HostFlag.ROBOTS_404, "404"),
            (HostFlag.ROBOTS_500, "500"),
            (HostFlag.ROBOTS_TIMEOUT, "timeout"),
            (HostFlag.ROBOTS_REDIRECT, "redirect"),
        ):
            if f & flag:
                return name
        return "ok"

    def sitemap_page_ids(self, h: int, part: int | None) -> range:
        n = self.hosts[h].pages
        if part is None:
            return range(n)
        return range(part * SITEMAP_URLS_PER_FILE, min(n, (part + 1) * SITEMAP_URLS_PER_FILE))


class PagePlan(NamedTuple):
    """Everything that decides a page's bytes (a tuple: built once per served page)."""

    host: int
    page: int
    flags: int  # PageFlag bits
    size: int  # target HTML size in bytes
    base_href: str
    links: tuple[Link, ...]
    content_seed: int

    @property
    def nofollow_page(self) -> bool:
        return bool(self.flags & (PageFlag.META_NOFOLLOW | PageFlag.XROBOTS_NOFOLLOW))


class _FormContext(NamedTuple):
    host: str
    base_dir: str
    doc_path: str  # the document's own path when no <base> is set (for ?query links)


def _nat(s: str) -> int:
    """A canonical non-negative decimal (no signs, no leading zeros)."""
    if not s.isascii() or not s.isdigit() or (len(s) > 1 and s[0] == "0") or len(s) > 12:
        raise ValueError(s)
    return int(s)


_LEAF_KINDS = (
    (Kind.PDF, "files", "doc-", ".pdf"),
    (Kind.LYING_PDF, "files", "report-", ".pdf"),
    (Kind.IMAGE, "img", "pic-", ".jpg"),
    (Kind.MEDIA, "media", "item-", ""),
    (Kind.LYING_HTML, "docs", "manual-", ".html"),
    (Kind.MISSING, "missing", "", ".html"),
    (Kind.GONE, "gone", "", ".html"),
)
_NONHTML_TARGETS = (
    ("files", "doc-", ".pdf"),
    ("img", "pic-", ".jpg"),
    ("media", "item-", ""),
    ("files", "report-", ".pdf"),
    ("docs", "manual-", ".html"),
)
_REDIRECT_STATUSES = (301, 302, 307, 308)
_FRAGMENTS = ("top", "section-2", "comments", "")
_JUNK = ("mailto:webmaster@example.org", "javascript:void(0)", "tel:+15555550100", "data:,x")
_DEEP_SEGMENTS = ("a", "b", "c")
_SORTS = ("price", "name", "date")


@lru_cache(maxsize=16)
def model_for(spec: WebSpec) -> WebModel:
    """A shared model per spec (building 100,000 hosts takes a moment)."""
    return WebModel(spec)
