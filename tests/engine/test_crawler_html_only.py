"""--html-only in the worker loop: pages are requested `html_only` (robots.txt and sitemaps
never), a body the fetcher stopped for not being HTML is logged `ok/not-html`, and the bytes
its Content-Length announced and were not read are counted (docs/crawler/fetch.md,
"Non-HTML bodies")."""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Any

from test_crawler_unit import HTML, FakeSinks, StartingFakeFetcher, _page

from gossamer.config import CrawlSettings
from gossamer.engine.crawler import NOT_HTML_OUTCOME, Crawler
from gossamer.fetch import FetchRequest, FetchResult
from gossamer.frontier import MemoryFrontier
from gossamer.parse import is_html
from gossamer.report.progress import end_summary
from gossamer.report.summary import worker_summary

MB = 1_000_000
ROBOTS_AT = "http://a.example/robots-file"  # where the fake serves robots.txt from
ROBOTS = b"User-agent: *\nDisallow: /private\nSitemap: http://a.example/sitemap.xml\n"
SITEMAP = (
    b'<?xml version="1.0"?><urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">'
    b"<url><loc>http://a.example/from-sitemap</loc></url></urlset>"
)


class StoppingFetcher(StartingFakeFetcher):
    """Stops a non-HTML body after 100 bytes when the request is html_only, as CurlFetcher
    does; robots.txt and the sitemap are served (text/plain, application/xml)."""

    def __init__(self, pages: dict[str, Any]) -> None:
        super().__init__(pages)
        self.asked: list[tuple[str, bool]] = []  # (url, html_only) of every request

    def _respond(self, req: FetchRequest, start: float) -> FetchResult:
        self.asked.append((req.url, req.html_only))
        if req.url.endswith("/robots.txt"):  # (FakeFetcher answers 404 to every robots.txt)
            served = super()._respond(dataclasses.replace(req, url=ROBOTS_AT), start)
            return dataclasses.replace(served, url=req.url)
        result = super()._respond(req, start)
        html = is_html(result.header("content-type"), result.body)
        if req.html_only and result.status == 200 and not html:
            return dataclasses.replace(
                result, body=result.body[:100], raw_body_len=100, truncated=True, not_html=True
            )
        return result


def crawl(pages: dict[str, Any], **over: Any) -> tuple[Crawler, StoppingFetcher, FakeSinks]:
    settings = CrawlSettings(
        seeds=["http://a.example/"], scope="all", output="/tmp/unused", delay=0,
        use_sitemaps=True, **over,
    )  # fmt: skip
    fetcher = StoppingFetcher(pages)
    sinks = FakeSinks()
    crawler = Crawler(
        settings, frontier=MemoryFrontier(), fetcher=fetcher, ip_of=lambda h: None, sinks=sinks
    )
    crawler.seed(settings.seeds)
    asyncio.run(asyncio.wait_for(crawler.run(), 30))
    return crawler, fetcher, sinks


def site() -> dict[str, Any]:
    pdf = b"%PDF-1.4\n" + bytes(1000)
    length = {k: (("Content-Length", str(k * MB)),) for k in (20, 30)}
    return {
        "http://a.example/": (200, HTML, _page(["/doc/1", "/doc/2", "/feed", "/bare"]), ()),
        "http://a.example/doc/1": (200, "application/pdf", pdf, length[20]),
        "http://a.example/doc/2": (200, "application/pdf", pdf, length[30]),
        "http://a.example/feed": (200, "application/json", b"{}" * 100, ()),  # chunked
        # no Content-Type: sniffed as HTML, so parsed (the fetcher's rule is the parser's)
        "http://a.example/bare": (200, "", _page(["/from-bare"]), ()),
        "http://a.example/sitemap.xml": (200, "application/xml", SITEMAP, ()),
        ROBOTS_AT: (200, "text/plain", ROBOTS, ()),
        "http://a.example/from-bare": (200, HTML, _page([]), ()),
        "http://a.example/from-sitemap": (200, HTML, _page([]), ()),
    }


def test_pages_are_fetched_html_only_and_stopped_bodies_counted() -> None:
    crawler, fetcher, sinks = crawl(site())
    asked = dict(fetcher.asked)
    assert asked.pop("http://a.example/robots.txt") is False
    assert asked.pop("http://a.example/sitemap.xml") is False
    assert set(asked.values()) == {True}  # every page
    # "/bare" has no Content-Type and looks like HTML: its links are followed
    assert "http://a.example/from-bare" in asked and "http://a.example/from-sitemap" in asked
    outcomes = dict(sinks.logged)
    assert outcomes["http://a.example/doc/1"] == NOT_HTML_OUTCOME
    assert outcomes["http://a.example/feed"] == NOT_HTML_OUTCOME
    assert outcomes["http://a.example/bare"] == "ok"
    c = crawler.counters
    assert (c.not_html, c.not_html_unknown) == (3, 1)
    assert c.not_html_saved == 20 * MB - 100 + 30 * MB - 100
    summary = worker_summary(crawler, crawler.frontier.statistics(), 0.0, [])
    assert summary["not_html"] == {
        "bodies": 3, "bytes_saved": 50 * MB - 200, "unknown_length": 1,
    }  # fmt: skip
    lines = end_summary(summary, crawler.settings.output)
    assert "  non-HTML bodies not downloaded: 3 (50.0 MB saved, 1 of unknown length)" in lines


def test_without_html_only_nothing_is_requested_html_only() -> None:
    crawler, fetcher, sinks = crawl(site(), html_only=False)
    assert {flag for _, flag in fetcher.asked} == {False}
    assert crawler.counters.not_html == 0
    assert NOT_HTML_OUTCOME not in dict(sinks.logged).values()
    summary = worker_summary(crawler, crawler.frontier.statistics(), 0.0, [])
    assert not any("non-HTML" in line for line in end_summary(summary, crawler.settings.output))
