"""Ground truth: the exact set of URLs a correct crawler fetches from given seeds under rules.

`compute_truth(model, rules)` walks the model's links breadth-first over canonical URLs as a
correct crawler would: robots.txt read per host (RFC 9309 status handling), the scope kept,
nofollow links and known non-HTML extensions skipped, redirects and rel=canonical followed,
transient failures retried, crawler traps never walked into. Nothing is fetched: the model
knows every answer, so the truth is exact by construction. Every URL met is `required`,
`permitted` (bounded trap pages under `max_depth`) or `excluded` with the first reason that
ruled it out. Definitions (depth, required, trap, the trap filters applied): docs/testweb.md,
"Ground truth"."""

from __future__ import annotations

import json
import re
from array import array
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urljoin, urlsplit

from protego import Protego

from ..scope import Scope
from ..traps import CalendarWindow
from ..urls import NON_HTML_EXTENSIONS as _URL_NON_HTML_EXTENSIONS
from ._content import page_outcome, respond
from ._model import DUP_KINDS, SESSION_PARAMS, TRAP_KINDS, Host, HostFlag, Kind, Resource, WebModel

SCOPES = ("host", "domain", "all")

# Extensions a crawler with `html_only` does not request: one list for crawler and truth.
NON_HTML_EXTENSIONS = _URL_NON_HTML_EXTENSIONS

#: Why a URL met during the walk is not required.
EXCLUDE_REASONS = (
    "robots",
    "robots-unavailable",
    "scope",
    "nofollow",
    "depth",
    "non-html",
    "trap",
    "not-found-host",
)

EDGE_KINDS = ("link", "redirect", "canonical", "sitemap")
# the pages that name themselves with rel=canonical (every fifth, and session variants), and
# their copies that do (a mirror, a `?ref=` variant: _content.render_page)
_CANONICAL_KINDS = frozenset({Kind.PAGE, Kind.DUP_MIRROR, Kind.DUP_SESSION})
_LINK, _REDIRECT, _CANONICAL, _SITEMAP = range(4)

_ROBOTS_MAX_HOPS = 5

# URL states during the walk
_REQUIRED = 1
_PERMITTED = 2  # a trap URL within max_depth: may be fetched, never required
_NOFOLLOW = 3  # excluded only because every way to it so far was nofollow
_EXCLUDED = 4


# ------------------------------------------------------------------------- canonical URLs
def _remove_dot_segments(path: str) -> str:
    """RFC 3986 section 5.2.4 for an absolute path."""
    if "." not in path:
        return path
    segments = path.split("/")
    out: list[str] = []
    for seg in segments:
        if seg == "..":
            if len(out) > 1:
                out.pop()
        elif seg != ".":
            out.append(seg)
    if segments[-1] in (".", ".."):
        out.append("")
    result = "/".join(out)
    return result if result.startswith("/") else "/" + result


# every session parameter name contains one of these: a cheap test before splitting a query
_SESSION_HINTS = ("sess", "sid")
assert all(any(h in p for h in _SESSION_HINTS) for p in SESSION_PARAMS)


def _may_have_session(query: str) -> bool:
    q = query.lower()
    return "sess" in q or "sid" in q


def strip_session_params(query: str) -> str:
    """`query` without parameters named in SESSION_PARAMS (case-insensitive), order kept."""
    if not _may_have_session(query):
        return query
    params = query.split("&")
    kept = [p for p in params if p.partition("=")[0].lower() not in SESSION_PARAMS]
    return query if len(kept) == len(params) else "&".join(kept)


def _strip_url_session(url: str) -> str:
    base, _, query = url.partition("?")
    if not _may_have_session(query):
        return url
    query = strip_session_params(query)
    return f"{base}?{query}" if query else base


def canonical_url(url: str, *, strip_session_ids: bool = True) -> str | None:
    """The canonical form of an absolute http URL, or None when it is not one."""
    url = url.strip()
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        return None
    if parts.scheme.lower() != "http":
        return None
    host = (parts.hostname or "").rstrip(".")
    if not host:
        return None
    netloc = host if port in (None, 80) else f"{host}:{port}"
    path = _remove_dot_segments(parts.path or "/")
    query = parts.query
    if query and strip_session_ids:
        query = strip_session_params(query)
    return f"http://{netloc}{path}?{query}" if query else f"http://{netloc}{path}"


def request_url(host: str, target: str, *, strip_session_ids: bool = True) -> str | None:
    """The canonical URL of a request: `target` as received (origin or absolute form) on
    `host` (the Host header). None when it is not an http URL."""
    if target.startswith("/"):
        if (
            "/." not in target
            and "#" not in target
            and " " not in target
            and target.isascii()
            and target.isprintable()
            and host.isascii()
            and host.islower()
            and ":" not in host
            and not host.endswith(".")
        ):  # already canonical apart from session ids (the common case: fast)
            url = f"http://{host}{target}"
            if strip_session_ids and "?" in target:
                url = _strip_url_session(url)
            return url[:-1] if url.endswith("?") else url
        return canonical_url(f"http://{host}{target}", strip_session_ids=strip_session_ids)
    if target.lower().startswith("http://"):
        return canonical_url(target, strip_session_ids=strip_session_ids)
    return None


def split_url(url: str) -> tuple[str, str]:
    """(host, target) of a canonical URL."""
    rest = url[7:]
    slash = rest.find("/")
    if slash < 0:
        return rest, "/"
    return rest[:slash], rest[slash:]


def has_non_html_extension(target: str) -> bool:
    """True when the path of `target` ends in one of NON_HTML_EXTENSIONS."""
    path = target.partition("?")[0]
    leaf = path[path.rfind("/") + 1 :]
    dot = leaf.rfind(".")
    return dot >= 0 and leaf[dot:].lower() in NON_HTML_EXTENSIONS


def product_token(user_agent: str) -> str:
    """The product token of a User-Agent (`gossamer` for `gossamer/0.1 (+http://…)`)."""
    token = user_agent.strip().split(None, 1)[0] if user_agent.strip() else ""
    return token.split("/", 1)[0].lower()


# ------------------------------------------------------------------------- rules
@dataclass(frozen=True, slots=True)
class TruthRules:
    """What a correct crawler is told to do. Seeds are absolute http URLs."""

    seeds: tuple[str, ...] = ()
    scope: str = "host"
    allow: tuple[str, ...] = ()  # regexes (re.search on the canonical URL); any must match
    deny: tuple[str, ...] = ()  # regexes; none may match
    max_depth: int | None = None
    max_pages: int | None = None
    user_agent: str = "gossamer"
    obey_robots: bool = True
    follow_nofollow: bool = False
    html_only: bool = True
    strip_session_ids: bool = True
    follow_canonical: bool = True
    use_sitemaps: bool = False
    # the crawler's per-URL trap filters (gossamer.scope; 0 / None: off)
    max_path_repeat: int = 0
    max_path_segments: int | None = None
    calendar_years_back: int | None = None
    calendar_years_ahead: int | None = None
    calendar_now_year: int | None = None  # the year the calendar window is centred on (now)

    def __post_init__(self) -> None:
        for name in ("seeds", "allow", "deny"):
            value = getattr(self, name)
            if isinstance(value, str):
                value = (value,)
            object.__setattr__(self, name, tuple(value))
        problems = []
        if self.scope not in SCOPES:
            problems.append(f"scope must be one of {', '.join(SCOPES)}, got {self.scope!r}")
        if self.max_depth is not None and self.max_depth < 0:
            problems.append(f"max_depth must be >= 0, got {self.max_depth}")
        if self.max_pages is not None and self.max_pages < 1:
            problems.append(f"max_pages must be >= 1, got {self.max_pages}")
        if not product_token(self.user_agent):
            problems.append("user_agent must not be empty")
        problems += [
            f"seed {seed!r} is not an absolute http URL"
            for seed in self.seeds
            if canonical_url(seed) is None
        ]
        for pattern in (*self.allow, *self.deny):
            try:
                re.compile(pattern)
            except re.error as exc:
                problems.append(f"bad regex {pattern!r}: {exc}")
        if problems:
            raise ValueError("; ".join(problems))

    def with_default_seeds(self, model: WebModel) -> TruthRules:
        """These rules, seeded with the home page of host 0 when no seeds are given."""
        if self.seeds:
            return self
        return _replace(self, seeds=(model.page_url(0, 0),))

    def to_dict(self) -> dict[str, Any]:
        return {
            "seeds": list(self.seeds),
            "scope": self.scope,
            "allow": list(self.allow),
            "deny": list(self.deny),
            "max_depth": self.max_depth,
            "max_pages": self.max_pages,
            "user_agent": self.user_agent,
            "obey_robots": self.obey_robots,
            "follow_nofollow": self.follow_nofollow,
            "html_only": self.html_only,
            "strip_session_ids": self.strip_session_ids,
            "follow_canonical": self.follow_canonical,
            "use_sitemaps": self.use_sitemaps,
            "max_path_repeat": self.max_path_repeat,
            "max_path_segments": self.max_path_segments,
            "calendar_years_back": self.calendar_years_back,
            "calendar_years_ahead": self.calendar_years_ahead,
            "calendar_now_year": self.calendar_now_year,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> TruthRules:
        """Rules from a mapping such as a crawler's crawl.json; unknown keys are ignored
        (crawl.json holds more than rules), missing keys take the defaults."""
        known = set(cls.__dataclass_fields__)
        kwargs = {k: v for k, v in d.items() if k in known}
        for name in ("seeds", "allow", "deny"):
            if name in kwargs:
                value = kwargs[name]
                if value is None:
                    value = ()
                kwargs[name] = (value,) if isinstance(value, str) else tuple(value)
        return cls(**kwargs)


def _replace(rules: TruthRules, **changes: Any) -> TruthRules:
    d = rules.to_dict()
    d.update(changes)
    return TruthRules.from_dict(d)


# ------------------------------------------------------------------------- robots
@dataclass(frozen=True, slots=True)
class HostRobots:
    """What a correct crawler learns from one host's robots.txt.

    status: `ok` (a file was read, possibly after redirects), `missing` (4xx or more than five
    redirects: allow all), `unavailable` (5xx, no answer, reset: disallow all).
    """

    host: str
    status: str
    fetches: tuple[str, ...]  # the URLs requested to read it (robots.txt, then redirect hops)
    crawl_delay: float | None
    sitemaps: tuple[str, ...]
    parser: Protego | None = field(default=None, compare=False, repr=False)
    agent: str = "gossamer"

    def allowed(self, target: str) -> bool:
        if self.status == "unavailable":
            return False
        if self.parser is None:
            return True
        return bool(self.parser.can_fetch(f"http://{self.host}{target}", self.agent))


def own_group(text: str, agent: str) -> str:
    """The robots.txt reduced to the one group RFC 9309 §2.2.1 applies to `agent`: the group
    whose user-agent equals the product token (case-insensitively), else the `*` group.

    protego matches a group whose name is a *substring* of the agent (`gossamer` would apply to
    `gossamer-hostile`); the simulated web's files are simple (one user-agent line per group,
    no merging), so the selection is done here and protego only sees `User-agent: *`.
    Sitemap lines are kept."""
    groups: list[tuple[str, list[str]]] = []
    other: list[str] = []
    for raw in text.splitlines():
        line = raw.split("#", 1)[0].strip()
        key, _, value = line.partition(":")
        key = key.strip().lower()
        if key == "user-agent":
            if not groups or groups[-1][1]:
                groups.append((value.strip().lower(), []))
            else:  # consecutive user-agent lines share a group
                groups[-1] = (groups[-1][0] + "\n" + value.strip().lower(), [])
        elif key == "sitemap":
            other.append(line)
        elif groups and key:
            groups[-1][1].append(line)
    chosen = next((rules for names, rules in groups if agent in names.split("\n")), None)
    if chosen is None:
        chosen = next((rules for names, rules in groups if "*" in names.split("\n")), [])
    return "\n".join(["User-agent: *", *chosen, *other]) + "\n"


class RobotsOracle:
    """robots.txt of every host as the server answers it, parsed once per host (protego)."""

    def __init__(self, model: WebModel, user_agent: str = "gossamer") -> None:
        self.model = model
        self.agent = product_token(user_agent)
        self._cache: dict[int, HostRobots] = {}

    def robots(self, h: int) -> HostRobots:
        hit = self._cache.get(h)
        if hit is None:
            hit = self._cache[h] = self._read(h)
        return hit

    def allowed(self, h: int, target: str) -> bool:
        return self.robots(h).allowed(target)

    def crawl_delay(self, h: int) -> float | None:
        return self.robots(h).crawl_delay

    def _read(self, h: int) -> HostRobots:
        model = self.model
        name = model.hosts[h].name
        url = f"http://{name}/robots.txt"
        fetches = [url]
        cur = h
        res = model.resolve(h, "/robots.txt")
        for _hop in range(_ROBOTS_MAX_HOPS + 1):
            resp = respond(model, res)
            if resp.action != "send" or resp.status >= 500 or resp.status == 0:
                return HostRobots(name, "unavailable", tuple(fetches), None, (), None, self.agent)
            if 300 <= resp.status < 400:
                if len(fetches) > _ROBOTS_MAX_HOPS:
                    break
                location = dict(resp.headers).get("Location", "")
                nxt = canonical_url(urljoin(url, location), strip_session_ids=False)
                target_host = model.host_by_name(split_url(nxt)[0]) if nxt else None
                if nxt is None or target_host is None:
                    break
                url = nxt
                fetches.append(url)
                cur = target_host.id
                res = model.resolve(cur, split_url(url)[1])
                continue
            if resp.status >= 400:
                break
            parser = Protego.parse(own_group(resp.body.decode("utf-8", "replace"), self.agent))
            delay = parser.crawl_delay(self.agent)
            return HostRobots(
                name,
                "ok",
                tuple(fetches),
                None if delay is None else float(delay),
                tuple(parser.sitemaps),
                parser,
                self.agent,
            )
        return HostRobots(name, "missing", tuple(fetches), None, (), None, self.agent)


# ------------------------------------------------------------------------- truth
@dataclass(frozen=True, slots=True)
class Truth:
    """The answer for one (web, rules). `order` lists the required URLs in BFS order."""

    rules: TruthRules
    order: tuple[str, ...]
    required: frozenset[str]
    depth: Mapping[str, int]  # required and permitted URLs
    excluded: Mapping[str, str]  # URL -> one of EXCLUDE_REASONS
    trap: frozenset[str]  # every trap URL met (permitted ones included)
    permitted: frozenset[str]  # trap URLs within max_depth, near-duplicates (no fault)
    hosts: tuple[str, ...]  # hosts whose robots.txt a correct crawler reads, first-reached order
    robots_status: Mapping[str, str]  # host -> ok | missing | unavailable (for `hosts`)
    crawl_delay: Mapping[str, float]  # host -> declared Crawl-delay (hosts that declare one)
    sitemaps: tuple[str, ...]  # sitemap files read (use_sitemaps)
    max_pages: int | None
    _nodes: tuple[str, ...] = field(repr=False, default=())
    _edges: array[int] = field(repr=False, default_factory=lambda: array("q"))

    @property
    def edges(self) -> list[tuple[str, str, str]]:
        """(src, dst, kind) for every link, redirect, canonical and sitemap edge a correct
        crawler traverses to a required URL, in discovery order (kind in EDGE_KINDS; a sitemap
        edge's src is the sitemap file; several links from one page to one URL are one edge;
        self-links are left out). Built on demand: webs have millions of links."""
        return list(self.iter_edges())

    def iter_edges(self) -> Iterator[tuple[str, str, str]]:
        nodes = self._nodes
        mask = (1 << 32) - 1
        for e in self._edges:
            yield nodes[e >> 34], nodes[(e >> 2) & mask], EDGE_KINDS[e & 3]

    @property
    def edge_count(self) -> int:
        return len(self._edges)

    @property
    def expected_pages(self) -> int:
        """How many required pages a crawl should fetch: min(max_pages, |required|)."""
        n = len(self.required)
        return n if self.max_pages is None else min(n, self.max_pages)

    def excluded_counts(self) -> dict[str, int]:
        counts = dict.fromkeys(EXCLUDE_REASONS, 0)
        for reason in self.excluded.values():
            counts[reason] += 1
        return counts

    def summary(self) -> dict[str, Any]:
        return {
            "rules": self.rules.to_dict(),
            "required": len(self.required),
            "expected_pages": self.expected_pages,
            "max_pages": self.max_pages,
            "max_depth_reached": max(self.depth.values(), default=0),
            "hosts": len(self.hosts),
            "edges": self.edge_count,
            "excluded": self.excluded_counts(),
            "trap": len(self.trap),
            "permitted": len(self.permitted),
            "sitemaps": len(self.sitemaps),
            "robots_status": _count(self.robots_status.values()),
            "crawl_delay": dict(self.crawl_delay),
        }

    def to_dict(self, *, edges: bool = True) -> dict[str, Any]:
        """Everything, JSON-ready (URLs in BFS order, edges as [src, dst, kind])."""
        d = self.summary()
        d.update(
            {
                "order": list(self.order),
                "depth": {u: self.depth[u] for u in self.order},
                "excluded_urls": dict(sorted(self.excluded.items())),
                "trap_urls": sorted(self.trap),
                "permitted_urls": sorted(self.permitted),
                "host_names": list(self.hosts),
                "robots": dict(self.robots_status),
                "sitemap_urls": list(self.sitemaps),
            }
        )
        if edges:
            d["edge_list"] = [list(e) for e in self.iter_edges()]
        return d

    def to_json(self, *, edges: bool = True) -> str:
        return json.dumps(self.to_dict(edges=edges), sort_keys=True)


def _count(values: Iterator[str] | Sequence[str] | Any) -> dict[str, int]:
    out: dict[str, int] = {}
    for v in values:
        out[v] = out.get(v, 0) + 1
    return dict(sorted(out.items()))


def near_duplicate_group(model: WebModel, url: str) -> tuple[str, int, int] | None:
    """Which pages `url` is a near-duplicate of, as a group key shared by all of them, or
    None: on a NEAR_DUPS host (the `duplicates` profile) a page, its printer-friendly copy,
    its mirror and its `?ref=` variants are one group (the same text), the calendar's days
    another; every other page is in none (the simulated web's pages share a paragraph only
    by chance). The key: (kind, host id, page id)."""
    hostname, target = split_url(url)
    hid = model.by_name.get(hostname)
    if hid is None or not model.hosts[hid].flags & HostFlag.NEAR_DUPS:
        return None
    res = model.resolve(hid, target)
    if res.kind is Kind.DUP_CALENDAR:
        return ("calendar", hid, 0)
    if res.kind is Kind.PAGE or res.kind in DUP_KINDS:
        return ("page", hid, res.a)
    return None


def compute_truth(model: WebModel, rules: TruthRules) -> Truth:
    """The exact set of URLs a correct crawler fetches from `rules.seeds` (host 0's home page
    when empty) on `model`, with the link graph between them. Deterministic."""
    rules = rules.with_default_seeds(model)
    return _Walker(model, rules).run()


class _Walker:
    """One BFS. Level by level: items at the current depth (seeds, redirect and canonical
    targets) go to `cur`, links to `nxt`. An item is a URL id, or -(host+1) for a host's
    sitemaps, read in the level at which the host was first reached."""

    def __init__(self, model: WebModel, rules: TruthRules) -> None:
        self.model = model
        self.rules = rules
        self.oracle = RobotsOracle(model, rules.user_agent)
        self.strip = rules.strip_session_ids
        self.max_depth = rules.max_depth
        self.allow = [re.compile(p) for p in rules.allow]
        self.deny = [re.compile(p) for p in rules.deny]
        self.trap_filter = _trap_filter(rules)
        self.ids: dict[str, int] = {}
        self.urls: list[str] = []
        self.state = bytearray()
        self.depths: list[int] = []
        self.res: list[Resource | None] = []
        self.reason: dict[int, str] = {}
        self.traps: dict[int, None] = {}
        self.touched: dict[int, None] = {}
        self.host_scope: dict[int, bool] = {}
        self.order: list[int] = []
        self.sitemap_files: list[str] = []
        self.edges: array[int] = array("q")  # src << 34 | dst << 2 | kind
        self.level = 0
        self.cur: list[int] = []
        self.nxt: list[int] = []
        seeds = [canonical_url(s, strip_session_ids=self.strip) or "" for s in rules.seeds]
        self.seeds = seeds
        self.seed_hosts = {split_url(s)[0] for s in seeds}
        self.seed_domains = {
            h.domain for s in seeds if (h := model.host_by_name(split_url(s)[0])) is not None
        }

    # ---------------------------------------------------------------- walk
    def run(self) -> Truth:
        for url in self.seeds:
            uid = self.ids.get(url)
            if uid is None or self.state[uid] == _NOFOLLOW:
                self._classify(url, uid, 0, True)
        while self.cur:
            i = 0
            cur = self.cur
            while i < len(cur):  # grows while we walk it (same-depth targets)
                self._expand(cur[i])
                i += 1
            self.cur, self.nxt = self.nxt, []
            self.level += 1
        return self._result()

    def _new_id(self, url: str) -> int:
        uid = len(self.urls)
        self.ids[url] = uid
        self.urls.append(url)
        self.state.append(0)
        self.depths.append(-1)
        self.res.append(None)
        return uid

    def _exclude(self, uid: int, reason: str) -> int:
        self.state[uid] = _NOFOLLOW if reason == "nofollow" else _EXCLUDED
        self.reason[uid] = reason
        return self.state[uid]

    def _in_scope(self, hid: int, url: str) -> bool:
        ok = self.host_scope.get(hid)
        if ok is None:
            host = self.model.hosts[hid]
            scope = self.rules.scope
            if scope == "host":
                ok = host.name in self.seed_hosts
            elif scope == "domain":
                ok = host.domain in self.seed_domains
            else:
                ok = True
            self.host_scope[hid] = ok
        if not ok:
            return False
        if self.allow and not any(p.search(url) for p in self.allow):
            return False
        return not any(p.search(url) for p in self.deny)

    def _classify(self, url: str, uid: int | None, depth: int, followed: bool) -> int:
        """Decide a URL met at `depth`; admit it to the walk or record why not. Returns its
        state."""
        if uid is None:
            uid = self._new_id(url)
        model = self.model
        hostname, target = split_url(url)
        hid = model.by_name.get(hostname)
        if hid is None:
            return self._exclude(uid, "not-found-host")
        if not self._in_scope(hid, url):
            return self._exclude(uid, "scope")
        if not followed:
            return self._exclude(uid, "nofollow")
        if self.rules.html_only and has_non_html_extension(target):
            return self._exclude(uid, "non-html")
        res = model.resolve(hid, target)
        state = _REQUIRED
        if res.kind in DUP_KINDS:  # a near-duplicate: may be fetched, never required
            state = _PERMITTED
        if res.kind in TRAP_KINDS:
            self.traps[uid] = None
            if self.max_depth is None:
                return self._exclude(uid, "trap")
            state = _PERMITTED
        if self.trap_filter is not None and self.trap_filter.reject_url(url, hostname):
            return self._exclude(uid, "trap")
        if self.max_depth is not None and depth > self.max_depth:
            return self._exclude(uid, "depth")
        if hid not in self.touched:
            self.touched[hid] = None
            if self.rules.use_sitemaps and self.oracle.robots(hid).sitemaps:
                (self.cur if depth == self.level else self.nxt).append(-(hid + 1))
        if self.rules.obey_robots:
            robots = self.oracle.robots(hid)
            if not robots.allowed(target):
                reason = "robots-unavailable" if robots.status == "unavailable" else "robots"
                return self._exclude(uid, reason)
        self.reason.pop(uid, None)
        self.state[uid] = state
        self.depths[uid] = depth
        self.res[uid] = res
        (self.cur if depth == self.level else self.nxt).append(uid)
        return state

    def _edge(self, src: int, dst: int, kind: int) -> None:
        self.edges.append(src << 34 | dst << 2 | kind)

    def _target(self, src: int, url: str, kind: int) -> None:
        """A redirect's Location or a rel=canonical: same depth as the page naming it.

        The URL may already wait in the next level (met as a link earlier in this level):
        it moves up to this level, its stale entry in `nxt` is skipped later."""
        if self.strip and "?" in url:
            url = _strip_url_session(url)
        depth = self.level
        uid = self.ids.get(url)
        state = self.state[uid] if uid is not None else 0
        if uid is None or state == _NOFOLLOW or self.reason.get(uid) == "depth":
            state = self._classify(url, uid, depth, True)
            uid = self.ids[url]
        elif state in (_REQUIRED, _PERMITTED) and self.depths[uid] > depth:
            self.depths[uid] = depth
            self.cur.append(uid)
        if state == _REQUIRED and uid != src:
            self._edge(src, uid, kind)

    def _expand(self, uid: int) -> None:
        if uid < 0:
            self._expand_sitemaps(-uid - 1)
            return
        depth = self.level
        if self.depths[uid] != depth:
            return  # moved up to an earlier level by a redirect or canonical: done there
        if self.state[uid] == _REQUIRED:
            self.order.append(uid)
        res = self.res[uid]
        assert res is not None
        model = self.model
        kind = res.kind
        if kind is Kind.REDIRECT or kind is Kind.LOOP:
            _status, location = model.redirect_location(res)
            # the model writes Locations in canonical form; _target strips session ids
            self._target(uid, location, _REDIRECT)
            return
        is_html, links, nofollow_page = page_outcome(model, res)
        if not is_html:
            return
        if (
            kind in _CANONICAL_KINDS
            and self.rules.follow_canonical
            and (res.a % 5 == 0 or res.session or kind is Kind.DUP_SESSION)
        ):
            self._target(uid, model.page_url(res.host, res.a), _CANONICAL)
        follow_nofollow = self.rules.follow_nofollow
        strip = self.strip
        ids = self.ids
        state = self.state
        classify = self._classify
        nd = depth + 1
        if nofollow_page and not follow_nofollow:
            for link in links:  # nothing is followed: only note why new URLs are not
                url = link[0]
                if url:
                    if strip and "?" in url:
                        url = _strip_url_session(url)
                    if url not in ids:
                        classify(url, None, nd, False)
            return
        # Hot loop: every link of every required page passes here. One packed int per edge
        # (src << 34 | dst << 2 | kind; kind link is 0), each (src, dst) once per page.
        edges = self.edges
        linked: set[int] = {uid}
        base = uid << 34
        for link in links:
            url = link[0]
            if not url:
                continue  # mailto:, javascript:, tel:, #top
            if strip and "?" in url:
                url = _strip_url_session(url)
            followed = follow_nofollow or not link[2]
            dst = ids.get(url)
            if dst is not None:
                st = state[dst]
                if st != _NOFOLLOW or not followed:
                    if st == _REQUIRED and followed and dst not in linked:
                        linked.add(dst)
                        edges.append(base | dst << 2)
                    continue
            if classify(url, dst, nd, followed) == _REQUIRED:
                dst = ids[url]
                linked.add(dst)
                edges.append(base | dst << 2)

    def _expand_sitemaps(self, hid: int) -> None:
        """The pages listed by the sitemaps named in host `hid`'s robots.txt."""
        model = self.model
        depth = self.level + 1
        for sm_url in self.oracle.robots(hid).sitemaps:
            sm = canonical_url(sm_url, strip_session_ids=False)
            if sm is None:
                continue
            host = model.host_by_name(split_url(sm)[0])
            if host is None:
                continue
            res = model.resolve(host.id, split_url(sm)[1])
            if res.kind is not Kind.SITEMAP:
                continue
            self.sitemap_files.append(sm)
            files: list[tuple[str, int | None]] = [(sm, None)]
            nparts = model.sitemap_parts(host.id)
            if nparts:  # a sitemap index: its parts list the pages
                files = [(model.url_of(host.id, f"/sitemap-{k}.xml.gz"), k) for k in range(nparts)]
                self.sitemap_files.extend(f for f, _ in files)
            for file_url, part in files:
                src = self.ids.get(file_url)
                if src is None:
                    src = self._new_id(file_url)
                for i in model.sitemap_page_ids(host.id, part):
                    self._sitemap_entry(src, model.page_url(host.id, i), depth)

    def _sitemap_entry(self, src: int, url: str, depth: int) -> None:
        uid = self.ids.get(url)
        state = self.state[uid] if uid is not None else 0
        if uid is None or state == _NOFOLLOW:
            state = self._classify(url, uid, depth, True)
            uid = self.ids[url]
        if state == _REQUIRED:
            self._edge(src, uid, _SITEMAP)

    # ---------------------------------------------------------------- result
    def _result(self) -> Truth:
        urls = self.urls
        state = self.state
        required = frozenset(urls[u] for u in self.order)
        # trap URLs within max_depth, and near-duplicates (DUP_KINDS)
        permitted = frozenset(urls[u] for u in range(len(urls)) if state[u] == _PERMITTED)
        depth = {
            urls[u]: self.depths[u] for u in range(len(urls)) if state[u] in (_REQUIRED, _PERMITTED)
        }
        excluded = {urls[u]: r for u, r in self.reason.items()}
        oracle = self.oracle
        hosts = [self.model.hosts[h] for h in self.touched]
        return Truth(
            rules=self.rules,
            order=tuple(urls[u] for u in self.order),
            required=required,
            depth=depth,
            excluded=excluded,
            trap=frozenset(urls[u] for u in self.traps),
            permitted=permitted,
            hosts=tuple(h.name for h in hosts),
            robots_status={h.name: oracle.robots(h.id).status for h in hosts},
            crawl_delay=_delays(oracle, hosts),
            sitemaps=tuple(dict.fromkeys(self.sitemap_files)),
            max_pages=self.rules.max_pages,
            _nodes=tuple(urls),
            _edges=self.edges,
        )


def _trap_filter(rules: TruthRules) -> Scope | None:
    """The crawler's own per-URL trap checks for these rules (a Scope that keeps every host
    and type), or None when every one is off."""
    back, ahead = rules.calendar_years_back, rules.calendar_years_ahead
    calendar = None
    if back is not None or ahead is not None:
        calendar = CalendarWindow(years_back=back, years_ahead=ahead)
        if rules.calendar_now_year is not None:
            calendar = CalendarWindow(back, ahead, now_year=rules.calendar_now_year)
    if not rules.max_path_repeat and rules.max_path_segments is None and calendar is None:
        return None
    return Scope(
        (),
        scope="all",
        html_only=False,
        max_path_repeat=rules.max_path_repeat,
        max_path_segments=rules.max_path_segments,
        calendar=calendar,
    )


def _delays(oracle: RobotsOracle, hosts: Sequence[Host]) -> dict[str, float]:
    out = {}
    for h in hosts:
        delay = oracle.crawl_delay(h.id)
        if delay is not None:
            out[h.name] = delay
    return out
