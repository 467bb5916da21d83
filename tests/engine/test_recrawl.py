"""`--recrawl`: loading an old crawl's validators and out-edges, seeding the frontier from its
log, checking the directory, and the worker's conditional GETs and 304 handling (fakes)."""

from __future__ import annotations

import asyncio
import fcntl
import time
from pathlib import Path

import pytest

from gossamer.config import CrawlSettings
from gossamer.engine.crawler import Crawler
from gossamer.engine.recrawl import (
    NOT_MODIFIED_OUTCOME,
    Recrawl,
    check_recrawl_dir,
    conditional_headers,
    iter_refetch,
    old_seeds,
    seed_recrawl,
)
from gossamer.fetch import FetchRequest, FetchResult
from gossamer.frontier import MemoryFrontier
from gossamer.sinks import CrawlLog, GraphWriter
from gossamer.urls import fingerprint

A = "http://a.example/"
HTML = "text/html; charset=utf-8"


def _old_crawl(path: Path) -> Path:
    """A finished crawl directory with a log and a two-part graph."""
    path.mkdir()
    (path / "crawl.json").write_text('{"seeds": ["http://a.example/"]}')
    (path / "stats.json").write_text('{"finished": true}')
    with CrawlLog(path / "crawl.log.jsonl") as log:
        w = log.write
        w(url=A + "robots.txt", status=200, outcome="robots", etag='"r"')  # depth None
        w(url=A, status=200, outcome="ok", depth=0, etag='"e0"', last_modified="LM0")
        w(url=A + "p1", status=200, outcome="ok", depth=1, parent=A, last_modified="LM1")
        w(url=A + "p2", status=200, outcome="ok", depth=1, parent=A)  # no validator
        w(url=A + "p3", status=404, outcome="fetch/status/404", depth=1, etag='"x"')
        w(url=A + "go", status=301, outcome="ok", depth=1, location=A + "p4", etag='"y"')
        w(url=A + "p5", status=None, outcome="fetch/error/timeout", depth=2)
        w(url=A + "p1", status=304, outcome=NOT_MODIFIED_OUTCOME, depth=1, etag='"e1"')
        w(url="http://b.example/", status=200, outcome="ok", depth=2, etag='"b"')
    with (path / "crawl.log.jsonl").open("a") as f:
        f.write('{"url": "http://a.example/torn", "status": 200, "depth"')  # a torn line
    with GraphWriter(path, part="w0") as g:
        g.add_out_edges(A, [(A + "p1", "link"), (A + "p2", "link"), (A + "c", "canonical")])
        g.add_out_edges(A + "p2", [(A + "p9", "link")])  # p2 has no validator: not loaded
    with GraphWriter(path, part="w1") as g:
        g.add_out_edges(A, [(A + "p1", "link"), ("http://b.example/", "link")])  # a repeat
        g.add_out_edges(A + "p1", [(A, "link")])
    return path


def test_load_keeps_validators_and_out_edges_of_validated_pages(tmp_path: Path) -> None:
    rc = Recrawl.load(_old_crawl(tmp_path / "old"))
    assert rc.validators(fingerprint(A))[:2] == ('"e0"', "LM0")
    assert rc.validators(fingerprint(A))[2] is not None  # the old fetch time
    assert rc.validators(fingerprint(A + "p1"))[:2] == ('"e1"', None)  # the last line wins
    for url in (A + "p2", A + "p3", A + "go", A + "p5", A + "torn", A + "nowhere"):
        assert rc.validators(fingerprint(url)) == (None, None, None), url
    assert rc.headers(fingerprint(A)) == (("If-None-Match", '"e0"'), ("If-Modified-Since", "LM0"))
    assert rc.headers(fingerprint(A + "p2")) == ()
    # edges of all parts, deduped, first-recorded order kept
    assert rc.links(A) == [
        (A + "p1", "link"),
        (A + "p2", "link"),
        (A + "c", "canonical"),
        ("http://b.example/", "link"),
    ]
    assert rc.links(A + "p1") == [(A, "link")]
    assert rc.links(A + "p2") == []  # not a page that can answer 304: not kept
    assert len(rc) == 4 and rc.edge_count == 5  # A, p1, b.example, robots.txt


def test_load_without_graph(tmp_path: Path) -> None:
    old = _old_crawl(tmp_path / "old")
    for f in (old / "graph").iterdir():
        f.unlink()
    rc = Recrawl.load(old)
    assert rc.links(A) == [] and len(rc) == 4


def test_conditional_headers() -> None:
    assert conditional_headers(None, None) == ()
    assert conditional_headers(None, "LM") == (("If-Modified-Since", "LM"),)


def test_refetch_list_and_seeding(tmp_path: Path) -> None:
    old = _old_crawl(tmp_path / "old")
    assert [(u, d) for u, d, _ in iter_refetch(old)] == [
        (A, 0),
        (A + "p1", 1),
        (A + "p2", 1),
        (A + "go", 1),
        (A + "p1", 1),
        ("http://b.example/", 2),
    ]
    assert old_seeds(old) == [A]
    settings = CrawlSettings(seeds=[A], scope="host", output=tmp_path / "new", recrawl=old)
    frontier = MemoryFrontier()
    assert seed_recrawl(frontier, settings) == 4  # b.example is out of the host scope
    (batch,) = frontier.lease(10, 10)
    got = {(u.url, u.depth, u.parent) for u in batch.urls}
    assert got == {(A, 0, None), (A + "p1", 1, A), (A + "p2", 1, A), (A + "go", 1, None)}
    # the new limits apply
    shallow = CrawlSettings(seeds=[A], scope="all", max_depth=0, output=tmp_path / "n2")
    shallow = shallow.model_copy(update={"recrawl": old})
    assert seed_recrawl(MemoryFrontier(), shallow) == 1
    assert seed_recrawl(MemoryFrontier(), CrawlSettings(seeds=[A], output=tmp_path)) == 0


def test_check_recrawl_dir(tmp_path: Path) -> None:
    old = _old_crawl(tmp_path / "old")
    assert check_recrawl_dir(old, tmp_path / "new") is None
    assert "must differ" in (check_recrawl_dir(old, old / ".") or "")
    assert "not a directory" in (check_recrawl_dir(tmp_path / "nope") or "")
    (tmp_path / "empty").mkdir()
    assert "no crawl.json" in (check_recrawl_dir(tmp_path / "empty") or "")
    (old / "stats.json").unlink()
    assert "unfinished" in (check_recrawl_dir(old) or "")
    (old / "stats.json").write_text("{}")
    with (old / "lock").open("a+") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        assert "running" in (check_recrawl_dir(old) or "")
        fcntl.flock(fh, fcntl.LOCK_UN)
    assert check_recrawl_dir(old) is None  # an unheld lock file is fine


# ------------------------------------------------------------------ the worker, with fakes
class ConditionalFetcher:
    """Pages with an ETag; answers 304 when If-None-Match matches it. Records requests."""

    def __init__(self, pages: dict[str, tuple[str, bytes]]) -> None:
        self.pages = pages  # url -> (etag, body)
        self.requests: list[FetchRequest] = []

    async def fetch(self, req: FetchRequest) -> FetchResult:
        await asyncio.sleep(0.001)
        self.requests.append(req)
        sent = dict(req.headers)
        if req.url.endswith("/robots.txt") or req.url not in self.pages:
            status, headers, body = 404, (("Content-Type", "text/plain"),), b""
        else:
            etag, body = self.pages[req.url]
            headers = (("Content-Type", HTML), ("ETag", etag))
            status = 304 if sent.get("If-None-Match") == etag else 200
            if status == 304:
                headers, body = (("ETag", etag),), b""
        head = f"HTTP/1.1 {status} X\r\n".encode() + b"".join(
            f"{k}: {v}\r\n".encode() for k, v in headers
        )
        return FetchResult(
            url=req.url, status=status, headers=headers, body=body, raw_body_len=len(body),
            truncated=False, error=None, ip="127.0.0.1", port=80, started_at=time.time(),
            elapsed=0.001, request_head=b"GET / HTTP/1.1\r\n\r\n", response_head=head + b"\r\n",
            http_version="1.1",
        )  # fmt: skip


class Sinks:
    def __init__(self) -> None:
        self.logged: dict[str, str] = {}
        self.edges_by_src: dict[str, list[tuple[str, str]]] = {}

    def exchange(self, result: FetchResult) -> None:
        pass

    def log(
        self,
        result: FetchResult,
        *,
        depth: int,
        parent: str | None,
        outcome: str,
        dup: tuple[str, str] | None = None,
    ) -> None:
        self.logged[result.url] = outcome

    def edges(self, src: str, dsts: list[tuple[str, str]]) -> None:
        self.edges_by_src.setdefault(src, []).extend(dsts)

    def page(self, result: FetchResult, depth: int, edges: list[tuple[str, str]]) -> bool:
        return True

    def flush(self) -> None:
        pass


@pytest.mark.parametrize("changed", [False, True])
def test_worker_sends_validators_and_routes_old_links_on_304(tmp_path: Path, changed: bool) -> None:
    old = tmp_path / "old"
    old.mkdir()
    (old / "crawl.json").write_text("{}")
    (old / "stats.json").write_text("{}")
    with CrawlLog(old / "crawl.log.jsonl") as log:
        log.write(url=A, status=200, outcome="ok", depth=0, etag='"v1"')
    with GraphWriter(old) as g:
        g.add_out_edges(A, [(A + "only-linked-here", "link")])
    rc = Recrawl.load(old)
    # the page now links nowhere: on a 304 the old link is what reaches the other page
    pages = {
        A: ('"v2"' if changed else '"v1"', b"<html></html>"),
        A + "only-linked-here": ("", b""),
    }
    settings = CrawlSettings(seeds=[A], scope="all", delay=0, output=tmp_path / "new")
    fetcher, sinks = ConditionalFetcher(pages), Sinks()
    crawler = Crawler(
        settings,
        frontier=MemoryFrontier(),
        fetcher=fetcher,
        ip_of=lambda h: None,
        sinks=sinks,
        revalidate=rc,
    )
    crawler.seed([A])
    asyncio.run(asyncio.wait_for(crawler.run(), 30))
    first = next(r for r in fetcher.requests if r.url == A)
    assert first.headers == (("If-None-Match", '"v1"'),)
    if changed:
        assert sinks.logged[A] == "ok"
        assert len(fetcher.requests) == 2  # robots.txt + A: the link is gone
    else:
        assert sinks.logged[A] == NOT_MODIFIED_OUTCOME
        assert sinks.edges_by_src[A] == [(A + "only-linked-here", "link")]
        assert sinks.logged[A + "only-linked-here"] == "ok"
        other = next(r for r in fetcher.requests if r.url == A + "only-linked-here")
        assert other.headers == ()  # no stored validator: an ordinary GET
        assert crawler.counters.pages == 2
