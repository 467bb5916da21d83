"""A minimal reference client for the simulated web: sequential, polite, correct, slow.

It is NOT gossamer's crawler. It exists to show (in `gossamer testweb demo`) and to prove (in
the tests) that the truth and the audit agree with a straightforward correct client, and to
be made deliberately wrong (`impolite=True`, `duplicate_every=k`) so that tests can watch the
audit fail. One request at a time, robots.txt first for every host, crawl-delay honoured, BFS
order, retries of 429/503/resets, redirects enqueued rather than followed inline.
"""

from __future__ import annotations

import http.client
import time
import zlib
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

import can_ada
import protego
from selectolax.lexbor import LexborHTMLParser

from ._model import SESSION_PARAMS

NON_HTML_EXTENSIONS = (
    ".pdf",
    ".jpg",
    ".jpeg",
    ".png",
    ".gif",
    ".zip",
    ".gz",
    ".mp4",
    ".css",
    ".js",
)


@dataclass(slots=True)
class RefStats:
    fetched: int = 0
    errors: int = 0
    robots_fetched: int = 0
    seconds: float = 0.0
    urls: list[str] = field(default_factory=list)


def canonical(url: str, *, strip_session_ids: bool = True) -> str | None:
    """Absolute http URL without fragment (and session ids), or None if not crawlable."""
    try:
        u = can_ada.parse(url)
    except ValueError:
        return None
    if u.protocol != "http:":
        return None
    u.hash = ""
    if strip_session_ids and u.search:
        params = u.search[1:].split("&")
        kept = [p for p in params if p.partition("=")[0].lower() not in SESSION_PARAMS]
        if len(kept) != len(params):
            u.search = "?" + "&".join(kept) if kept else ""
    return str(u.href)


class ReferenceClient:
    """Crawl the web served at `addr_of(host) -> (ip, port)` from `seeds`."""

    def __init__(
        self,
        addr_of: Callable[[str], tuple[str, int] | None],
        *,
        user_agent: str = "gossamer-refclient/0.1",
        scope_hosts: set[str] | None = None,
        max_pages: int = 100_000,
        timeout: float = 2.0,
        max_crawl_delay: float = 5.0,
        impolite: bool = False,
        duplicate_every: int = 0,
        on_page: Callable[[str, int], None] | None = None,
    ) -> None:
        self.addr_of = addr_of
        self.user_agent = user_agent
        self.scope_hosts = scope_hosts
        self.max_pages = max_pages
        self.timeout = timeout
        self.max_crawl_delay = max_crawl_delay
        self.impolite = impolite
        self.duplicate_every = duplicate_every
        self.on_page = on_page
        self._robots: dict[str, protego.Protego | bool] = {}  # True allow all, False deny all
        self._next_at: dict[str, float] = {}
        self._conns: dict[str, http.client.HTTPConnection] = {}

    # ------------------------------------------------------------------ transport
    def _request(self, host: str, target: str) -> tuple[int, dict[str, str], bytes] | None:
        """GET over a kept-alive connection per host; None on a network error or timeout."""
        addr = self.addr_of(host)
        if addr is None:
            return None
        if not self.impolite:
            wait = self._next_at.get(host, 0.0) - time.monotonic()
            if wait > 0:
                time.sleep(wait)
        for _ in range(2):  # one reconnect when a kept-alive connection went stale
            conn = self._conns.get(host)
            fresh = conn is None
            if conn is None:
                conn = http.client.HTTPConnection(addr[0], addr[1], timeout=self.timeout)
                self._conns[host] = conn
            try:
                conn.request(
                    "GET",
                    target,
                    headers={
                        "Host": host,
                        "User-Agent": self.user_agent,
                        "Accept-Encoding": "gzip, deflate",
                    },
                )
                resp = conn.getresponse()
                body = resp.read(20 * 1024 * 1024)
                if resp.length:  # over our size cap: drop the connection
                    conn.close()
                    self._conns.pop(host, None)
                headers = {k.lower(): v for k, v in resp.getheaders()}
                if resp.will_close:
                    conn.close()
                    self._conns.pop(host, None)
                self._rest(host)
                return resp.status, headers, body
            except (OSError, http.client.HTTPException):
                conn.close()
                self._conns.pop(host, None)
                self._rest(host)
                if fresh:
                    return None
        return None

    def _rest(self, host: str) -> None:
        rules = self._robots.get(host)
        delay = 0.0
        if isinstance(rules, protego.Protego):
            delay = min(float(rules.crawl_delay(self.user_agent) or 0.0), self.max_crawl_delay)
        self._next_at[host] = time.monotonic() + delay

    def close(self) -> None:
        for conn in self._conns.values():
            conn.close()
        self._conns.clear()

    # ------------------------------------------------------------------ robots
    def _allowed(self, url: str, host: str) -> bool:
        if host not in self._robots:
            self._robots[host] = self._fetch_robots(host)
        rules = self._robots[host]
        if isinstance(rules, bool):
            return rules
        return bool(rules.can_fetch(url, self.user_agent))

    def _fetch_robots(self, host: str) -> protego.Protego | bool:
        target = "/robots.txt"
        for _ in range(6):
            got = self._request(host, target)
            self.stats.robots_fetched += 1
            if got is None:
                return False  # unreachable: disallow all (RFC 9309)
            status, headers, body = got
            if status in (301, 302, 307, 308) and "location" in headers:
                nxt = canonical(
                    str((can_ada.parse(f"http://{host}{target}") + headers["location"]).href)
                )
                if nxt is None or can_ada.parse(nxt).hostname != host:
                    return True
                u = can_ada.parse(nxt)
                target = u.pathname + u.search
                continue
            if 200 <= status < 300:
                return protego.Protego.parse(_decode(body, headers).decode("utf-8", "replace"))
            return 400 <= status < 500  # 4xx allow all, 5xx disallow all
        return True  # too many redirects: treated as unavailable (allow)

    # ------------------------------------------------------------------ crawl
    def crawl(self, seeds: list[str]) -> RefStats:
        self.stats = RefStats()
        start = time.monotonic()
        queue: deque[tuple[str, int]] = deque()
        seen: set[str] = set()
        for s in seeds:
            c = canonical(s)
            if c and c not in seen:
                seen.add(c)
                queue.append((c, 0))
        count = 0
        while queue and count < self.max_pages:
            url, attempt = queue.popleft()
            u = can_ada.parse(url)
            host = u.hostname
            if self.scope_hosts is not None and host not in self.scope_hosts:
                continue
            if u.pathname.lower().endswith(NON_HTML_EXTENSIONS):
                continue
            if not self._allowed(url, host):
                continue
            got = self._request(host, u.pathname + u.search)
            if got is None or got[0] in (429, 503):
                if attempt < 2:
                    queue.append((url, attempt + 1))
                else:
                    self.stats.errors += 1
                continue
            count += 1
            self.stats.fetched += 1
            self.stats.urls.append(url)
            status, headers, body = got
            if self.on_page:
                self.on_page(url, status)
            if self.duplicate_every and count % self.duplicate_every == 0:
                self._request(host, u.pathname + u.search)  # deliberately fetch it again
                self.stats.fetched += 1
            for link in self._links(url, status, headers, body):
                if link not in seen:
                    seen.add(link)
                    queue.append((link, 0))
        self.close()
        self.stats.seconds = time.monotonic() - start
        return self.stats

    def _links(self, url: str, status: int, headers: dict[str, str], body: bytes) -> list[str]:
        if status in (301, 302, 307, 308) and "location" in headers:
            try:
                nxt = canonical(str((can_ada.parse(url) + headers["location"]).href))
            except ValueError:
                return []
            return [nxt] if nxt else []
        if status != 200 or not headers.get("content-type", "").startswith("text/html"):
            return []
        if "nofollow" in headers.get("x-robots-tag", "").lower():
            return []
        try:
            raw = _decode(body, headers)
        except (OSError, EOFError, zlib.error):
            return []
        tree = LexborHTMLParser(raw)  # lexbor sniffs the charset from the bytes
        for meta in tree.css('meta[name="robots"]'):
            if "nofollow" in (meta.attributes.get("content") or "").lower():
                return []
        base = can_ada.parse(url)
        node = tree.css_first("base[href]")
        if node is not None:
            try:
                base = base + (node.attributes.get("href") or "")
            except ValueError:
                pass
        out = []
        for n in tree.css("a[href], area[href], iframe[src], link[rel=canonical][href]"):
            if "nofollow" in (n.attributes.get("rel") or "").lower():
                continue
            href = n.attributes.get("src" if n.tag == "iframe" else "href") or ""
            try:
                c = canonical(str((base + href).href))
            except ValueError:
                continue
            if c:
                out.append(c)
        return out


def _decode(body: bytes, headers: dict[str, str]) -> bytes:
    enc = headers.get("content-encoding", "").lower()
    if enc == "gzip":
        return zlib.decompress(body, 16 + zlib.MAX_WBITS)
    if enc == "deflate":
        return zlib.decompress(body)
    return body
