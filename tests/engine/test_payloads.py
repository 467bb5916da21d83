"""A worker's identical-payload check (`gossamer.engine.payloads`): which responses count, a
payload claimed only once its page is written, claims seen by this worker at once and by
another worker over the same store from the flush on, a failed write claiming nothing; and
in the crawler, inline or on an off-loop frontier's I/O thread."""

from __future__ import annotations

import asyncio
import hashlib
import threading
from collections.abc import Sequence
from typing import Any

import pytest
from test_crawler_off_loop import _OffLoop
from test_crawler_unit import HTML, FakeSinks, StartingFakeFetcher, _page

from gossamer.config import CrawlSettings
from gossamer.engine.crawler import Crawler
from gossamer.engine.payloads import MIN_PAYLOAD, IdenticalPayloads
from gossamer.fetch import FetchResult
from gossamer.frontier import MemoryFrontier
from gossamer.frontier.digests import Capture, MemoryDigestStore

BODY = b"<html><body>" + b"<p>the same words</p>" * 40 + b"</body></html>"


def result(
    url: str,
    body: bytes = BODY,
    *,
    status: int | None = 200,
    truncated: bool = False,
    error: str | None = None,
    at: float = 1_790_000_000.5,
) -> FetchResult:
    return FetchResult(
        url=url, status=status, headers=(("Content-Type", "text/html"),), body=body,
        raw_body_len=len(body), truncated=truncated, error=error, ip="127.0.0.1", port=80,
        started_at=at, elapsed=0.01, request_head=b"GET / HTTP/1.1\r\n\r\n",
        response_head=b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\n\r\n", http_version="1.1",
    )  # fmt: skip


def record(p: IdenticalPayloads, r: FetchResult) -> Capture | None:
    """What the crawler does for a page: check, the sinks read the verdict, recorded."""
    p.check(r)
    verdict = p.verdict(r)
    assert verdict is not None and verdict.digest == hashlib.sha1(r.body).digest()
    p.recorded(r)
    assert p.verdict(r) is None  # forgotten once recorded
    return verdict.first


def test_which_responses_are_checked() -> None:
    p = IdenticalPayloads(MemoryDigestStore())
    assert p.wants(result("http://a/"))
    assert p.wants(result("http://a/", status=203))
    assert p.wants(result("http://a/", b"x" * MIN_PAYLOAD))
    assert not p.wants(result("http://a/", b"x" * (MIN_PAYLOAD - 1)))  # too small to be worth it
    assert not p.wants(result("http://a/", b""))
    for status in (None, 206, 301, 304, 404, 500):
        assert not p.wants(result("http://a/", status=status)), status
    assert not p.wants(result("http://a/", truncated=True))  # not the whole payload
    assert not p.wants(result("http://a/", error="fetch/error/decode"))
    assert p.check(result("http://a/", status=404)) is None
    assert p.verdict(result("http://a/")) is None  # never checked


def test_a_payload_seen_again_refers_to_its_first_capture() -> None:
    store = MemoryDigestStore()
    p = IdenticalPayloads(store)
    assert record(p, result("http://a/1", at=10.0)) is None  # the first: stored whole
    first = Capture("http://a/1", 10.0)
    assert record(p, result("http://a/2", at=11.0)) == first  # this worker knows at once
    assert record(p, result("http://b/3", at=12.0)) == first  # any URL, any host
    assert record(p, result("http://a/4", BODY + b" ")) is None  # another payload
    assert store.captures == {}  # nothing in the store before the flush
    p.flush()
    assert store.captures == {
        hashlib.sha1(BODY).digest(): first,
        hashlib.sha1(BODY + b" ").digest(): Capture("http://a/4", 1_790_000_000.5),
    }
    p.flush()  # nothing more to add
    other = IdenticalPayloads(store)  # another worker, after the flush
    assert record(other, result("http://c/5", at=20.0)) == first
    stats = p.statistics()
    assert (stats.checked, stats.revisits, stats.bytes_saved, stats.claimed) == (
        4, 2, 2 * len(BODY), 2
    )


def test_a_page_not_written_claims_nothing() -> None:
    store = MemoryDigestStore()
    p = IdenticalPayloads(store)
    r = result("http://a/1")
    p.check(r)
    p.forget(r)  # a sink failed (a full disk): its record is not in the WARC
    p.flush()
    assert store.captures == {} and p.verdict(r) is None
    assert record(p, result("http://a/2")) is None  # so the next copy is stored whole


class FailingOnce(MemoryDigestStore):
    def __init__(self) -> None:
        super().__init__()
        self.fail = True

    def add(self, captures: Sequence[tuple[bytes, Capture]]) -> None:
        if self.fail:
            self.fail = False
            raise OSError("disk full")
        super().add(captures)


def test_a_failed_flush_keeps_its_claims_for_the_next() -> None:
    store = FailingOnce()
    p = IdenticalPayloads(store)
    record(p, result("http://a/1", at=1.0))
    with pytest.raises(OSError):
        p.flush()
    record(p, result("http://a/2", BODY * 2, at=2.0))
    p.flush()
    assert sorted(c.uri for c in store.captures.values()) == ["http://a/1", "http://a/2"]


# ---------------------------------------------------------------------- in the crawler


class _Sinks(FakeSinks):
    """Fake sinks that note the verdict each exchange and log line saw."""

    def __init__(self, payloads: IdenticalPayloads) -> None:
        super().__init__()
        self.payloads = payloads
        self.seen: dict[str, Capture | None] = {}
        self.logged_dup: dict[str, bool] = {}

    def exchange(self, result: FetchResult) -> None:
        super().exchange(result)
        verdict = self.payloads.verdict(result)
        if verdict is not None:
            self.seen[result.url] = verdict.first

    def log(
        self,
        result: FetchResult,
        *,
        depth: int,
        parent: str | None,
        outcome: str,
        dup: tuple[str, str] | None = None,
    ) -> None:
        super().log(result, depth=depth, parent=parent, outcome=outcome, dup=dup)
        self.logged_dup[result.url] = self.payloads.verdict(result) is not None


class _Checking(IdenticalPayloads):
    """Notes the thread the store is asked on (`lookup`: inline `check`, or alone on an
    off-loop frontier's I/O thread)."""

    threads: set[str]

    def lookup(self, result: FetchResult) -> Any:
        self.threads.add(threading.current_thread().name.split("_")[0])
        return super().lookup(result)


@pytest.mark.parametrize("off_loop", [False, True])
def test_the_crawler_checks_before_recording_and_claims_before_completing(
    off_loop: bool,
) -> None:
    """Ten identical pages on two hosts and one other: each seen by the sinks with its
    verdict, one first capture, the rest referring to it; the claims in the store once the
    crawl ends; `check` inline with a frontier on the loop's thread, on the I/O thread of an
    off-loop one (the cluster's Redis)."""
    same = (200, HTML, BODY, ())
    pages: dict[str, Any] = {f"http://{h}.example/d{k}": same for h in "ab" for k in range(5)}
    pages["http://a.example/"] = (200, HTML, _page(sorted(pages)), ())
    store = MemoryDigestStore()
    payloads = _Checking(store)
    payloads.threads = set()
    sinks = _Sinks(payloads)
    settings = CrawlSettings(seeds=["http://a.example/"], scope="all", output="/tmp/unused",
                             delay=0)  # fmt: skip
    frontier = _OffLoop() if off_loop else MemoryFrontier()
    crawler = Crawler(
        settings, frontier=frontier, fetcher=StartingFakeFetcher(pages, 0.001),
        ip_of=lambda h: None, sinks=sinks, payloads=payloads,
    )  # fmt: skip
    crawler.seed(settings.seeds)
    asyncio.run(asyncio.wait_for(crawler.run(), 30))
    frontier.close()
    copies = {u: f for u, f in sinks.seen.items() if "/d" in u}
    assert len(copies) == 10
    firsts = [u for u, f in copies.items() if f is None]
    assert len(firsts) == 1
    assert all(f is not None and f.uri == firsts[0] for u, f in copies.items() if u != firsts[0])
    assert all(sinks.logged_dup[u] for u in copies)  # the log line saw the same verdict
    digest = hashlib.sha1(BODY).digest()
    assert store.captures[digest].uri == firsts[0]  # claimed, flushed before completing
    assert payloads.statistics().revisits == 9
    assert payloads.threads == ({"frontier-io"} if off_loop else {"MainThread"})
    assert payloads._verdicts == {}  # every verdict forgotten once recorded
