"""Which discovered URLs a crawl keeps: scope, depth, type and trap filters (pure).

`Scope.reject(url, host, depth)` returns None to keep a URL or a structured reason key
(`scope/out-of-scope`, `scope/depth`, `scope/non-html`, `scope/trap-path`,
`scope/trap-segments`, `scope/trap-calendar`) to drop it. The stateful query-string caps
(`scope/trap-query`, `scope/trap-params`) are `traps.QueryTraps`, in the engine's routing.

`host` is always `urls.host_key(url)`, and the seeds are keyed the same way: `--scope host`
keeps the seeds' host keys (the port counts: a seed on `127.0.0.1:8081` keeps that server,
not `127.0.0.1:9000`; http and https of one host are one), `--scope domain` their registrable
domains on any port (see "Keys" in gossamer.urls).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable

from .traps import CalendarWindow, path_segments
from .urls import has_non_html_extension, host_key, registrable_domain


class Scope:
    def __init__(
        self,
        seeds: Iterable[str],
        *,
        scope: str = "host",
        allow: Iterable[str] = (),
        deny: Iterable[str] = (),
        max_depth: int | None = None,
        html_only: bool = True,
        max_path_repeat: int = 3,
        max_path_segments: int | None = None,
        calendar: CalendarWindow | None = None,
    ) -> None:
        if scope not in ("host", "domain", "all"):
            raise ValueError(f"scope must be host, domain or all, got {scope!r}")
        self.scope = scope
        # the key `reject` gets for discovered URLs: seeds keyed by host name alone (no port)
        # never matched the links of a seed on a non-default port, which were all dropped
        self.hosts = frozenset(host_key(s) for s in seeds)
        self.domains = frozenset(registrable_domain(h) for h in self.hosts)
        self.allow = [re.compile(p) for p in allow]
        self.deny = [re.compile(p) for p in deny]
        self.max_depth = max_depth
        self.html_only = html_only
        self.max_path_repeat = max_path_repeat
        self._domain_cache: dict[str, bool] = {}
        self.max_path_segments = max_path_segments
        self.calendar = calendar

    def reject(self, url: str, host: str, depth: int) -> str | None:
        """None when `url` (canonical, on `host`, at `depth`) is kept, else the reason key."""
        if self.max_depth is not None and depth > self.max_depth:
            return "scope/depth"
        return self.reject_url(url, host)

    def reject_url(self, url: str, host: str) -> str | None:
        """`reject` without the depth check: what depends on the URL alone (memoisable)."""
        if self.scope == "host":
            if host not in self.hosts:
                return "scope/out-of-scope"
        elif self.scope == "domain":
            ok = self._domain_cache.get(host)
            if ok is None:
                ok = registrable_domain(host) in self.domains  # drops the port, [::1] too
                self._domain_cache[host] = ok
            if not ok:
                return "scope/out-of-scope"
        if self.allow and not any(p.search(url) for p in self.allow):
            return "scope/out-of-scope"
        if self.deny and any(p.search(url) for p in self.deny):
            return "scope/out-of-scope"
        if self.html_only and has_non_html_extension(url):
            return "scope/non-html"
        if self.max_path_repeat and _repeats(url) > self.max_path_repeat:
            return "scope/trap-path"
        limit = self.max_path_segments
        # n path segments take n + 2 slashes at least: most URLs are decided by the count
        if limit is not None and url.count("/") > limit + 2 and path_segments(url) > limit:
            return "scope/trap-segments"
        if self.calendar is not None and self.calendar.is_trap(url):
            return "scope/trap-calendar"
        return None


def _repeats(url: str) -> int:
    """How often the most frequent path segment occurs (ever-deeper path traps)."""
    if url.count("/") < 6:  # "scheme://host" + fewer than four path segments
        return 0
    path = url.split("://", 1)[-1].partition("/")[2].partition("?")[0]
    segments = [s for s in path.split("/") if s]
    if len(segments) < 4:
        return 0
    return Counter(segments).most_common(1)[0][1]
