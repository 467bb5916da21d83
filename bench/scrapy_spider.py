"""Scrapy with gossamer's crawl limits, for bench/bench_crawl.py: a minimal CrawlSpider
(`--spider crawl`), and the best-tuned plain Spider we could write (`--spider plain`).

    .venv/bin/python bench/scrapy_spider.py --seed http://www.h0.example/ \
        --resolve-file export/resolve.txt --concurrency 64 --stats-out scrapy.json

Scrapy is not a dependency of gossamer: install it into the venv to run this
(`.venv/bin/pip install scrapy`); bench_crawl.py skips the Scrapy run when it is missing.

The limits, the same as `gossamer crawl --scope all --delay 0 --concurrency N` (per_ip 1):

- seeds as given; allowed_domains = ["example"] (every host of the simulated web);
- robots.txt obeyed (ROBOTSTXT_OBEY, Scrapy's default Protego parser), with our own user agent;
- at most one request in flight per IP, which is gossamer's default (`per_ip` 1, and one
  connection per host): the download slot of every request is the IP its host resolves to, and
  CONCURRENT_REQUESTS_PER_DOMAIN=1 is the limit per slot;
- CONCURRENT_REQUESTS = N in all, no download delay, no AutoThrottle;
- HTML only: LinkExtractor's default deny_extensions drop non-HTML links by extension (the clean
  web has none);
- no item output, no WARC, no graph: Scrapy does less work per page than gossamer here.

Resolving: the web's URLs carry no port (`http://www.h12.example/…`) while nginx listens on
IP:PORT (`resolve.txt`: `www.h12.example:80:127.1.0.13:41234`). Scrapy's DNS_RESOLVER can map a
name to an IP but cannot change the port, so a downloader middleware sends each request to its
IP:PORT as to an HTTP proxy (`request.meta["proxy"]`): Scrapy then writes the request line in
absolute form, `GET http://www.h12.example/x HTTP/1.1`, with `Host: www.h12.example`. An origin
server must accept that form (RFC 9112 §3.2.2) and nginx does: it serves the file of that host
and logs `$host` and `$request_uri` (the path) exactly as for an origin-form request, so the
audit reads Scrapy's requests like gossamer's. The URL, the dedupe, robots.txt and link
resolution all keep seeing the original host name. Scrapy pools connections per proxy, so
hosts that share an IP share kept-alive connections (they are never fetched at once anyway).

Settings follow Scrapy's "Broad crawls" advice where it does not change the limits
(DownloaderAwarePriorityQueue, INFO logging, cookies off, no telnet console).

`--spider plain` (issue 21: users compare against the best Scrapy, not the slowest): a plain
`Spider` whose callback extracts links with selectolax (lexbor, the parser gossamer uses)
instead of LinkExtractor (lxml, then a Link object and a regex pass per link), and yields
Requests straight away; CONCURRENT_ITEMS (`--concurrent-items`, 4: how many of a callback's
outputs Scrapy processes at once — the issue measured 261–275 pages/s with 4), the spider
middlewares that do nothing on this web disabled (Referer, UrlLength, Depth: no depth limit),
and the asyncio reactor on uvloop when it is installed (`--uvloop`, the event loop gossamer
runs on). The same limits as the CrawlSpider: robots.txt obeyed, offsite links dropped
(allowed_domains), one request per download slot, fragments dropped, links with the
LinkExtractor's ignored extensions skipped, each link once per page.

`--slot host` puts every request in its host's download slot (one request in flight per
host, `--concurrency` in all): gossamer's politeness when `per_ip` is at least the
concurrency, as on bench_crawl.py's shared-IP web (every host on one IP).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urldefrag, urlsplit

from scrapy import Request, Spider
from scrapy.crawler import CrawlerProcess
from scrapy.http import Response
from scrapy.linkextractors import IGNORED_EXTENSIONS, LinkExtractor
from scrapy.spiders import CrawlSpider, Rule
from scrapy.utils.httpobj import urlparse_cached


def read_resolve_file(path: Path) -> dict[str, tuple[str, int]]:
    """`HOST:PORT:IP:PORT` lines (curl --connect-to syntax) → {"host:port": (ip, port)}."""
    mapping: dict[str, tuple[str, int]] = {}
    for line in path.read_text().splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        host, port, ip, ip_port = line.rsplit(":", 3)
        mapping[f"{host.lower()}:{port}"] = (ip, int(ip_port))
    return mapping


class ResolveMiddleware:
    """Downloader middleware: send each request to its host's IP:PORT (as to a proxy) and put
    it in the download slot of that IP (one request in flight per IP)."""

    def __init__(self, mapping: dict[str, tuple[str, int]], by_host: bool = False) -> None:
        self.mapping = mapping
        self.by_host = by_host  # the download slot is the host, not its IP

    @classmethod
    def from_crawler(cls, crawler: Any) -> ResolveMiddleware:
        return cls(
            read_resolve_file(Path(crawler.settings.get("BENCH_RESOLVE_FILE"))),
            crawler.settings.get("BENCH_SLOT") == "host",
        )

    def slot(self, request: Request) -> str | None:
        if self.by_host:
            return urlparse_cached(request).hostname
        target = self.target(request)
        return None if target is None else target[0]

    def target(self, request: Request) -> tuple[str, int] | None:
        parsed = urlparse_cached(request)
        port = parsed.port or (443 if parsed.scheme == "https" else 80)
        return self.mapping.get(f"{(parsed.hostname or '').lower()}:{port}")

    def process_request(self, request: Request) -> None:
        target = self.target(request)
        if target is not None:
            ip, port = target
            request.meta["proxy"] = f"http://{ip}:{port}"
            request.meta.setdefault("download_slot", self.slot(request) if self.by_host else ip)
        return None


class BenchSpider(CrawlSpider):
    """Follow every link on the web's hosts; no items."""

    name = "bench"
    rules = (Rule(LinkExtractor(), follow=True, process_request="set_slot"),)

    def __init__(self, *args: Any, seeds: list[str], resolver: ResolveMiddleware, **kw: Any):
        super().__init__(*args, **kw)
        self.allowed_domains = ["example"]  # every host of the simulated web
        self.start_urls = seeds
        self._resolver = resolver

    def set_slot(self, request: Request, response: Response) -> Request:
        """Slot known before scheduling (DownloaderAwarePriorityQueue reads it)."""
        slot = self._resolver.slot(request)
        if slot is not None:
            request.meta["download_slot"] = slot
        return request


_IGNORED = frozenset(f".{e}" for e in IGNORED_EXTENSIONS)


class PlainSpider(Spider):
    """Follow every link on the web's hosts with a plain Spider: selectolax link extraction,
    Requests yielded at once; no items."""

    name = "bench-plain"

    def __init__(self, *args: Any, seeds: list[str], resolver: ResolveMiddleware, **kw: Any):
        super().__init__(*args, **kw)
        self.allowed_domains = ["example"]
        self.start_urls = seeds
        self._slot = resolver.slot

    def parse(self, response: Response, **kwargs: Any) -> Iterator[Request]:
        from selectolax.lexbor import LexborHTMLParser  # (imported once, then a dict lookup)

        seen: set[str] = set()
        slot = self._slot
        for node in LexborHTMLParser(response.body).css("a[href]"):
            href = node.attributes.get("href")
            if not href:
                continue
            url = response.urljoin(href)
            if "#" in url:
                url = urldefrag(url)[0]
            if url in seen or not url.startswith(("http://", "https://")):
                continue
            seen.add(url)
            path = urlsplit(url).path
            dot = path.rfind(".")
            if dot > path.rfind("/") and path[dot:].lower() in _IGNORED:
                continue
            request = Request(url, callback=self.parse)
            s = slot(request)
            if s is not None:
                request.meta["download_slot"] = s
            yield request


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seed", action="append", required=True)
    p.add_argument("--resolve-file", type=Path, required=True)
    p.add_argument("--concurrency", type=int, default=64)
    p.add_argument("--per-slot", type=int, default=1, help="requests in flight per IP")
    p.add_argument("--user-agent", default="scrapy-bench/1.0")
    p.add_argument("--timeout", type=float, default=0, help="CLOSESPIDER_TIMEOUT (0: none)")
    p.add_argument("--max-pages", type=int, default=0, help="CLOSESPIDER_PAGECOUNT (0: none)")
    p.add_argument("--priority-queue", default="scrapy.pqueues.DownloaderAwarePriorityQueue")
    p.add_argument("--stats-out", type=Path, required=True)
    p.add_argument("--spider", choices=("crawl", "plain"), default="crawl")
    p.add_argument("--slot", choices=("ip", "host"), default="ip", help="the download slot")
    p.add_argument("--concurrent-items", type=int, default=4, help="CONCURRENT_ITEMS (plain)")
    p.add_argument("--uvloop", action="store_true", help="asyncio reactor on uvloop (plain)")
    args = p.parse_args(argv)

    settings = {
        "BOT_NAME": "scrapy-bench",
        "USER_AGENT": args.user_agent,
        "ROBOTSTXT_OBEY": True,
        "CONCURRENT_REQUESTS": args.concurrency,
        "CONCURRENT_REQUESTS_PER_DOMAIN": args.per_slot,  # per download slot = per IP
        "DOWNLOAD_DELAY": 0,
        "AUTOTHROTTLE_ENABLED": False,
        "COOKIES_ENABLED": False,
        "TELNETCONSOLE_ENABLED": False,
        "REMOTE_CONTROL_ENABLED": False,  # no listening socket of its own
        "LOG_LEVEL": "INFO",
        "SCHEDULER_PRIORITY_QUEUE": args.priority_queue,
        "DOWNLOADER_MIDDLEWARES": {f"{__name__}.ResolveMiddleware": 700},  # before proxy (750)
        "BENCH_RESOLVE_FILE": str(args.resolve_file),
        "CLOSESPIDER_TIMEOUT": args.timeout,
        "CLOSESPIDER_PAGECOUNT": args.max_pages,
        "BENCH_SLOT": args.slot,
    }
    if args.spider == "plain":
        settings["CONCURRENT_ITEMS"] = args.concurrent_items
        settings["SPIDER_MIDDLEWARES"] = {
            "scrapy.spidermiddlewares.referer.RefererMiddleware": None,
            "scrapy.spidermiddlewares.urllength.UrlLengthMiddleware": None,
            "scrapy.spidermiddlewares.depth.DepthMiddleware": None,
        }
        if args.uvloop:
            settings["TWISTED_REACTOR"] = (
                "twisted.internet.asyncioreactor.AsyncioSelectorReactor"
            )
            settings["ASYNCIO_EVENT_LOOP"] = "uvloop.Loop"
    process = CrawlerProcess(settings)
    resolver = ResolveMiddleware(read_resolve_file(args.resolve_file), args.slot == "host")
    crawler = process.create_crawler(PlainSpider if args.spider == "plain" else BenchSpider)
    started = time.monotonic()
    process.crawl(crawler, seeds=list(args.seed), resolver=resolver)
    process.start()
    elapsed = time.monotonic() - started
    stats = crawler.stats.get_stats() if crawler.stats else {}
    responses = int(stats.get("downloader/response_count", 0))
    robots = int(stats.get("robotstxt/response_count", 0))
    out = {
        "elapsed_s": elapsed,
        "requests": int(stats.get("downloader/request_count", 0)),
        "responses": responses,
        "robots_responses": robots,
        "pages": responses - robots,
        "finish_reason": stats.get("finish_reason"),
        "stats": {k: v for k, v in stats.items() if isinstance(v, (int, float, str))},
    }
    args.stats_out.write_text(json.dumps(out, indent=2, default=str) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
