"""The audit end to end: a real server on loopback, real sockets, a tiny client of our own.

A polite client that discovers the web by parsing the HTML the server sends must fetch
exactly the truth, and the audit of the server's log must find nothing wrong with it; an
impolite client and a duplicating client must be caught. These prove the audit can fail.
"""

from __future__ import annotations

import http.client
import json
import time
from collections import deque
from collections.abc import Callable
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import urljoin

import pytest
from protego import Protego

from gossamer.cli import main
from gossamer.testweb import RunningWeb, WebModel, WebSpec, serve_in_thread, serve_subprocess
from gossamer.testweb._audit import AuditReport, audit
from gossamer.testweb._export import export_web
from gossamer.testweb._logread import read_logs
from gossamer.testweb._nginx import NginxError, find_nginx, run_nginx
from gossamer.testweb._truth import Truth, TruthRules, canonical_url, compute_truth, split_url

UA = "gossamer-e2e/1.0"
SKIP_EXTENSIONS = (".pdf", ".jpg", ".jpeg", ".png", ".gif")


class _Links(HTMLParser):
    """Links, <base>, rel=nofollow, rel=canonical and meta robots of one page."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.base: str | None = None
        self.links: list[tuple[str, bool]] = []  # (href, nofollow)
        self.canonical: str | None = None
        self.nofollow_page = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {k.lower(): (v or "") for k, v in attrs}
        rel = a.get("rel", "").lower().split()
        if tag == "base" and self.base is None and "href" in a:
            self.base = a["href"]
        elif tag in ("a", "area") and "href" in a:
            self.links.append((a["href"], "nofollow" in rel))
        elif tag == "iframe" and "src" in a:
            self.links.append((a["src"], False))
        elif tag == "link" and "canonical" in rel and "href" in a:
            self.canonical = a["href"]
        elif tag == "meta" and a.get("name", "").lower() == "robots":
            self.nofollow_page = "nofollow" in a.get("content", "").lower()


class TinyCrawler:
    """Sequential BFS over one real server: robots.txt first (RFC 9309 statuses), crawl
    delays (capped at `max_delay`), retries of 503/429/resets, redirects enqueued, links
    parsed from the served HTML. No traps handling: use it on webs without traps."""

    def __init__(
        self,
        model: WebModel,
        address_of: Callable[[str], tuple[str, int]],
        *,
        max_delay: float = 0.5,
        repeat_every: int = 0,
    ) -> None:
        self.model = model
        self.address_of = address_of
        self.max_delay = max_delay
        self.repeat_every = repeat_every
        self.conns: dict[str, http.client.HTTPConnection] = {}
        self.robots: dict[str, Protego | bool] = {}  # True allow all, False disallow all
        self.delay: dict[str, float] = {}
        self.last_end: dict[str, float] = {}
        self.pages: list[str] = []  # canonical URLs requested (robots.txt excluded)
        self.repeats = 0

    # ---------------------------------------------------------------- transport
    def _request(self, name: str, target: str) -> http.client.HTTPResponse | None:
        wait = self.last_end.get(name, 0.0) + self.delay.get(name, 0.0) - time.monotonic()
        if wait > 0:
            time.sleep(wait + 0.002)
        conn = self.conns.get(name)
        if conn is None:
            ip, port = self.address_of(name)
            conn = self.conns[name] = http.client.HTTPConnection(ip, port, timeout=10)
        try:
            conn.request("GET", target, headers={"Host": name, "User-Agent": UA})
            resp = conn.getresponse()
            resp.body = resp.read()  # type: ignore[attr-defined]
        except (ConnectionError, http.client.HTTPException):
            conn.close()
            del self.conns[name]
            return None
        finally:
            self.last_end[name] = time.monotonic()
        if resp.will_close:
            conn.close()
            del self.conns[name]
        return resp

    def fetch(self, url: str, *, tries: int = 3) -> http.client.HTTPResponse | None:
        name, target = split_url(url)
        self.pages.append(url)
        for _ in range(tries):
            resp = self._request(name, target)
            if resp is not None and resp.status not in (429, 503):
                return resp
            time.sleep(0.05)
        return None

    def close(self) -> None:
        for conn in self.conns.values():
            conn.close()

    # ---------------------------------------------------------------- robots
    def allowed(self, url: str) -> bool:
        name = split_url(url)[0]
        if name not in self.robots:
            self._read_robots(name)
        rules = self.robots[name]
        if isinstance(rules, bool):
            return rules
        return bool(rules.can_fetch(url, "gossamer"))

    def _read_robots(self, name: str) -> None:
        target = "/robots.txt"
        rules: Protego | bool = True
        for _hop in range(6):
            resp = self._request(name, target)
            if resp is None or resp.status >= 500:
                rules = False
            elif 300 <= resp.status < 400:
                loc = canonical_url(urljoin(f"http://{name}{target}", resp.getheader("Location")))
                if loc is not None and split_url(loc)[0] == name:
                    target = split_url(loc)[1]
                    continue
            elif resp.status == 200:
                rules = Protego.parse(resp.body.decode("utf-8", "replace"))  # type: ignore[attr-defined]
                delay = rules.crawl_delay("gossamer")
                if delay:
                    self.delay[name] = min(float(delay), self.max_delay)
            break
        self.robots[name] = rules

    # ---------------------------------------------------------------- crawl
    def crawl(self, seed: str) -> None:
        queue = deque([seed])
        seen = {seed}

        def add(href: str, base: str) -> None:
            url = canonical_url(urljoin(base, href.strip()))
            if url is None or url in seen or self.model.host_by_name(split_url(url)[0]) is None:
                return
            if split_url(url)[1].partition("?")[0].lower().endswith(SKIP_EXTENSIONS):
                return
            seen.add(url)
            queue.append(url)

        while queue:
            url = queue.popleft()
            if not self.allowed(url):
                continue
            resp = self.fetch(url)
            if self.repeat_every and len(self.pages) % self.repeat_every == 0:
                self.repeats += 1
                self.fetch(url)
            if resp is None:
                continue
            if 300 <= resp.status < 400 and resp.getheader("Location"):
                add(resp.getheader("Location", ""), url)
                continue
            ctype = resp.getheader("Content-Type", "")
            if resp.status != 200 or not ctype.startswith("text/html"):
                continue
            page = _Links()
            page.feed(resp.body.decode("latin-1"))  # type: ignore[attr-defined]  # hrefs are ASCII
            page.close()
            base = urljoin(url, page.base) if page.base else url
            if page.canonical:
                add(page.canonical, base)
            xrobots = (resp.getheader("X-Robots-Tag") or "").lower()
            if page.nofollow_page or "nofollow" in xrobots:
                continue
            for href, nofollow in page.links:
                if not nofollow:
                    add(href, base)


def audited(web: RunningWeb, log: Path, rules: TruthRules, **kw: object) -> AuditReport:
    web.flush_log()
    logs = read_logs([log])
    assert logs.spec == web.spec
    assert logs.malformed == 0
    return audit(web.model, logs.records, rules, **kw)  # type: ignore[arg-type]


# A clean web with most link, page and robots switches on (no traps, hangs or slow hosts).
POLITE_WEB = WebSpec(
    seed=21,
    hosts=12,
    pages_mean=8,
    overrides=(
        ("link_forms", 1.0),
        ("robots_disallow", 0.5),
        ("robots_404", 0.2),
        ("robots_redirect", 0.2),
        ("robots_crawl_delay", 0.5),
        ("query_url_host", 0.3),
        ("charset_host", 0.3),
        ("nofollow_link", 0.1),
        ("session_link", 0.05),
        ("redirect_link", 0.05),
        ("redirect_loop", 0.02),
        ("dead_link", 0.05),
        ("nonhtml_link", 0.05),
        ("junk_link", 0.05),
        ("meta_robots", 0.1),
        ("x_robots_tag", 0.1),
        ("base_href", 0.2),
        ("malformed_html", 0.2),
        ("invalid_utf8", 0.1),
        ("transient_503", 0.05),
        ("reset_once", 0.03),
        ("error_500", 0.03),
    ),
)


@pytest.fixture(scope="module")
def polite_truth() -> Truth:
    return compute_truth(WebModel(POLITE_WEB), TruthRules(scope="all"))


@pytest.mark.slow
def test_polite_client_fetches_exactly_the_truth(tmp_path: Path, polite_truth: Truth) -> None:
    truth = polite_truth
    assert len(truth.required) > 100 and truth.crawl_delay  # a web worth crawling
    log = tmp_path / "web.log"
    with serve_in_thread(POLITE_WEB, log_path=log) as web:
        client = TinyCrawler(web.model, web.address_of, max_delay=0.02)
        try:
            client.crawl(truth.rules.seeds[0])
        finally:
            client.close()
        rep = audited(web, log, truth.rules, max_crawl_delay=0.02, truth=truth, user_agent=UA)
    assert set(client.pages) == truth.required
    assert rep.coverage == 1.0, rep.format_table()
    assert rep.overlap == 0.0
    assert rep.unexpected_requests == 0
    assert rep.politeness_violations == 0, rep.format_table()
    assert rep.ok
    assert rep.not_counted.get("503", 0) > 0  # retries happened and were not duplicates
    assert rep.auxiliary_requests >= len(truth.hosts)


@pytest.mark.slow
def test_duplicating_client_has_the_exact_overlap(tmp_path: Path, polite_truth: Truth) -> None:
    truth = polite_truth
    log = tmp_path / "web.log"
    with serve_in_thread(POLITE_WEB, log_path=log) as web:
        client = TinyCrawler(web.model, web.address_of, max_delay=0.02, repeat_every=7)
        try:
            client.crawl(truth.rules.seeds[0])
            # and one page again through a session id, which canonicalises to the same URL
            page = next(u for u in truth.order if "?" not in u and split_url(u)[1] != "/")
            client.fetch(page + "?sessionid=00000000beef")
        finally:
            client.close()
        rep = audited(web, log, truth.rules, max_crawl_delay=0.02, truth=truth)
    assert client.repeats > 5
    duplicates = client.repeats + 1  # every repeat is answered (503s are once only), + session
    assert rep.unique == len(truth.required)
    assert rep.fetched == rep.unique + duplicates
    assert rep.overlap == pytest.approx(duplicates / len(truth.required))
    assert rep.coverage == 1.0
    assert rep.politeness_violations == 0 and rep.unexpected_requests == 0
    assert not rep.ok or rep.overlap > 0  # overlap is a measure, not a violation


# A web where every host declares a Crawl-delay and every page is slow to start answering.
SLOW_WEB = WebSpec(
    seed=4,
    hosts=6,
    pages_mean=6,
    overrides=(
        ("robots_crawl_delay", 1.0),
        ("slow_first_byte", 1.0),
        ("slow_first_byte_s", 0.3),
    ),
)


def _host_with_pages(web: RunningWeb, n: int) -> tuple[str, list[str]]:
    host = next(h for h in web.model.hosts if h.pages >= n)
    return host.name, [web.model.page_target(host.id, i) for i in range(n)]


def _get(conn: http.client.HTTPConnection, name: str, target: str) -> None:
    conn.request("GET", target, headers={"Host": name, "User-Agent": UA})


def _read(conn: http.client.HTTPConnection) -> int:
    resp = conn.getresponse()
    resp.read()
    return resp.status


@pytest.mark.slow
def test_audit_catches_an_impolite_client(tmp_path: Path) -> None:
    log = tmp_path / "web.log"
    delay = 0.4  # the audit caps every Crawl-delay to this (max_crawl_delay)
    with serve_in_thread(SLOW_WEB, log_path=log) as web:
        name, targets = _host_with_pages(web, 3)
        ip, port = web.address_of(name)
        rules = TruthRules(seeds=(f"http://{name}/",), scope="host")
        a = http.client.HTTPConnection(ip, port, timeout=10)
        b = http.client.HTTPConnection(ip, port, timeout=10)
        try:
            # polite part: robots.txt, then one page after the delay
            _get(a, name, "/robots.txt")
            assert _read(a) == 200
            time.sleep(delay + 0.05)
            _get(a, name, targets[0])
            assert _read(a) == 200
            time.sleep(delay + 0.05)
            # impolite: two connections to one host at once (each answer takes 0.3 s) ...
            _get(a, name, targets[1])
            _get(b, name, targets[2])
            assert _read(a) == 200 and _read(b) == 200
            # ... and a request right after, long before the crawl delay
            _get(a, name, targets[0])
            assert _read(a) == 200
        finally:
            a.close()
            b.close()
        rep = audited(web, log, rules, max_crawl_delay=delay)
    assert rep.politeness["host-overlap"] == 1, rep.format_table()
    assert rep.politeness["ip-concurrency"] == 1
    assert rep.politeness["host-delay"] == 1
    assert rep.politeness["robots-first"] == 0
    assert rep.max_in_flight[ip] == 2
    assert not rep.ok
    assert {v.kind for v in rep.violations} == {"host-overlap", "ip-concurrency", "host-delay"}
    # the same log is fine for an audit that allows two requests per IP and no delay ...
    relaxed = audit(web.model, read_logs([log]).records, rules, max_crawl_delay=0.0, per_ip_limit=2)
    assert relaxed.politeness["ip-concurrency"] == 0
    assert relaxed.politeness["host-delay"] == 0
    assert relaxed.politeness["host-overlap"] == 1  # ... but never two at once to one host


@pytest.mark.slow
def test_audit_catches_concurrency_on_a_shared_ip(tmp_path: Path) -> None:
    log = tmp_path / "web.log"
    with serve_in_thread(SLOW_WEB, log_path=log) as web:
        by_ip: dict[str, list[str]] = {}
        for h in web.model.hosts:
            by_ip.setdefault(h.ip, []).append(h.name)
        names = next(v for v in by_ip.values() if len(v) >= 2)[:2]
        ip, port = web.address_of(names[0])
        conns = [http.client.HTTPConnection(ip, port, timeout=10) for _ in names]
        try:
            for conn, name in zip(conns, names, strict=True):
                _get(conn, name, "/robots.txt")
                assert _read(conn) == 200
            time.sleep(0.45)
            for conn, name in zip(conns, names, strict=True):
                _get(conn, name, "/")
            assert all(_read(conn) == 200 for conn in conns)
        finally:
            for conn in conns:
                conn.close()
        rep = audited(web, log, TruthRules(scope="all"), max_crawl_delay=0.4)
    assert rep.politeness["host-overlap"] == 0, rep.format_table()
    assert rep.politeness["host-delay"] == 0
    assert rep.politeness["ip-concurrency"] >= 1
    assert rep.max_in_flight[ip] == 2


@pytest.mark.slow
def test_multi_process_server_log_through_the_cli(
    tmp_path: Path, polite_truth: Truth, capsys: pytest.CaptureFixture[str]
) -> None:
    """Two server processes write web.log.0 and web.log.1; the CLI merges and audits them."""
    truth = polite_truth
    log = tmp_path / "web.log"
    with serve_subprocess(POLITE_WEB, log_path=log, processes=2) as web:
        model = WebModel(POLITE_WEB)
        client = TinyCrawler(model, web.address_of, max_delay=0.02)
        try:
            client.crawl(truth.rules.seeds[0])
        finally:
            client.close()
    assert set(client.pages) == truth.required
    parts = sorted(p.name for p in tmp_path.iterdir() if p.name.startswith("web.log."))
    assert parts == ["web.log.0", "web.log.1"]
    crawl = tmp_path / "crawl"
    crawl.mkdir()
    (crawl / "crawl.json").write_text(
        json.dumps({"seeds": list(truth.rules.seeds), "scope": "all"})
    )
    out = tmp_path / "audit.json"
    args = ["testweb", "audit", "--log", str(log), "--crawl", str(crawl), "--json", str(out)]
    code = main([*args, "--max-crawl-delay", "0.02", "--fail-on-violation"])
    report = json.loads(out.read_text())
    assert code == 0, capsys.readouterr().out
    assert report["pages"]["coverage"] == 1.0
    assert report["pages"]["overlap"] == 0.0
    assert len(report["log"]["files"]) == 2
    # the same log against a stricter audit: the crawl delays were capped at 0.02 s
    assert main([*args, "--fail-on-violation"]) == 1
    assert json.loads(out.read_text())["politeness"]["violations"]["host-delay"] > 0


# A clean web with the switches a static export reproduces.
STATIC_WEB = WebSpec(
    seed=34,
    hosts=10,
    pages_mean=10,
    overrides=(
        ("robots_disallow", 0.4),
        ("robots_crawl_delay", 0.3),
        ("robots_404", 0.3),
        ("charset_host", 0.5),
        ("malformed_html", 0.2),
        ("base_href", 0.1),
        ("meta_robots", 0.1),
        ("nofollow_link", 0.1),
        ("link_forms", 0.6),
        ("junk_link", 0.05),
    ),
)


def _ip(model: WebModel, name: str) -> str:
    host = model.host_by_name(name)
    assert host is not None
    return host.ip


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.slow
def test_nginx_access_log(tmp_path: Path) -> None:
    try:
        find_nginx()
    except NginxError:
        pytest.skip("nginx is not installed")
    model = WebModel(STATIC_WEB)
    truth = compute_truth(model, TruthRules(scope="all"))
    out = tmp_path / "export"
    export_web(model, out, port=_free_port(), workers=1)
    with run_nginx(out) as ng:
        client = TinyCrawler(model, lambda name: (_ip(model, name), ng.port), max_delay=0.02)
        try:
            client.crawl(truth.rules.seeds[0])
            page = next(u for u in truth.order if split_url(u)[1] != "/")
            client.fetch(page)
            client.fetch(page)
        finally:
            client.close()
        assert ng.access_log is not None
        access_log = ng.access_log
    assert set(client.pages) == truth.required
    logs = read_logs([access_log])
    assert logs.formats == ("nginx",) and logs.malformed == 0 and logs.spec is None
    rep = audit(model, logs.records, truth.rules, max_crawl_delay=0.02, truth=truth)
    assert rep.coverage == 1.0, rep.format_table()
    assert rep.fetched == rep.unique + 2
    assert rep.overlap == pytest.approx(2 / len(truth.required))
    assert rep.politeness_violations == 0, rep.format_table()
    assert rep.ok
    assert set(rep.max_in_flight) == {h.ip for h in model.hosts if h.name in truth.hosts}
