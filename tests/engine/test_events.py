"""Crawl events (engine/events.py): the event type, its encoding, the applier's each-page-once
contract, the recorder's subscribers, and the embedded graph feed (runner/graphfeed.py) over
crawls of the simulated web with one worker and with a pool of two."""

from __future__ import annotations

import json
import multiprocessing
import os
import signal
import sys
import threading
import time
import zlib
from collections import Counter
from pathlib import Path

import pytest

from gossamer.config import CrawlSettings
from gossamer.engine.events import GraphApplier, PageEvent, decode_events, encode_events
from gossamer.engine.recorder import Recorder
from gossamer.engine.sink_registry import PageSink, register_sink, sink_names, unregister_sink
from gossamer.fetch import FetchResult
from gossamer.runner.graphfeed import FEED_SINK, GraphFeed
from gossamer.runner.run import run_crawl
from gossamer.sinks import read_crawl_log, read_graph
from gossamer.sinks.graph import node_id
from gossamer.testweb import WebSpec, serve_in_thread

sys.path.insert(0, str(Path(__file__).parents[1] / "e2e"))
from _crawl_helpers import crawl_settings

from graph_helpers import CountingGraph


def _event(url: str = "http://a.example/p", n: int = 30, worker: str = "w0") -> PageEvent:
    links = tuple((f"http://a.example/section/{k % 7}/page-{k}.html", "link") for k in range(n))
    return PageEvent(url, 200, 2, worker, 1764123456.123, "text/html", (*links,))


def test_an_encoded_batch_decodes_to_the_same_events() -> None:
    events = [
        _event(),
        PageEvent(
            "http://b.example/r", 301, 0, "", 1.5, None, (("http://b.example/", "redirect"),)
        ),
        PageEvent(
            "http://c.example/é\t", 404, 3, "w1", 2.25, "text/html; charset=utf-8",
            (("http://c.example/x", "canonical"), ("http://c.example/y", "sitemap")),
        ),
        PageEvent("http://d.example/", 200, 1, "w1", 3.0, "image/png", ()),
    ]
    assert decode_events(encode_events(events)) == events
    relabelled = decode_events(encode_events(events, worker="w7"))
    assert [e.worker for e in relabelled] == ["w7"] * 4
    assert decode_events(encode_events([])) == []


def test_a_blob_that_is_not_a_batch_is_a_value_error() -> None:
    for bad in (b"", b"not zlib", zlib.compress(b"{}"), zlib.compress(b'[["u",200]]')):
        with pytest.raises(ValueError):
            decode_events(bad)
    with pytest.raises(ValueError, match="links and kinds"):
        decode_events(zlib.compress(b'[["u",200,0,"",1.0,null,["a","b"],"l"]]'))


def test_the_page_id_is_the_graph_files_node_id() -> None:
    assert _event().page_id == node_id("http://a.example/p")


def test_the_applier_applies_each_page_once() -> None:
    graph = CountingGraph()
    applier = GraphApplier(graph)
    a, b = _event("http://a.example/1", 3), _event("http://a.example/2", 2)
    assert applier.apply_all([a, b, a]) == 2
    assert not applier.apply(b)  # a replay: nothing more
    assert applier.skipped == 2
    assert graph.updates == Counter({a.url: 1, b.url: 1})
    assert graph.links[a.url] == set(a.link_urls())
    # a restarted consumer's checkpoint: the pages applied before are skipped
    again = GraphApplier(graph, seen=[a.page_id])
    assert not again.apply(a) and graph.updates[a.url] == 1


def _result(url: str, status: int = 200) -> FetchResult:
    body = b"<html></html>"
    return FetchResult(
        url=url, status=status, headers=(("content-type", "text/html"),), body=body,
        raw_body_len=len(body), truncated=False, error=None, ip="127.0.0.1", port=80,
        started_at=12.5, elapsed=0.01, request_head=b"GET / HTTP/1.1\r\n\r\n",
        response_head=b"HTTP/1.1 200 OK\r\ncontent-type: text/html\r\n\r\n", http_version="1.1",
    )  # fmt: skip


def test_the_recorder_publishes_page_events_to_its_subscribers_only(tmp_path: Path) -> None:
    got: list[PageEvent] = []

    class Pages(PageSink):
        def page(self, event: PageEvent) -> None:
            got.append(event)

    settings = CrawlSettings(seeds=["http://a.example/"], warc=False)
    plain = Recorder(tmp_path / "plain", settings, version="t")
    assert plain._page == []  # no subscriber: no event is built
    plain.page(_result("http://a.example/"), 0, [("http://a.example/x", "link")])
    plain.close()
    register_sink("pages", lambda ctx: Pages())
    try:
        rec = Recorder(tmp_path / "sub", settings, version="t", part="w3")
    finally:
        unregister_sink("pages")
    rec.page(_result("http://a.example/"), 1, [("http://a.example/x", "link")])
    rec.close()
    assert got == [
        PageEvent(
            "http://a.example/", 200, 1, "w3", 12.5, "text/html", (("http://a.example/x", "link"),)
        )
    ]


def _crawled(out: Path) -> set[str]:
    """The pages a crawl counted done, from its crawl log: answered, not to be retried."""
    return {
        r["url"]
        for r in read_crawl_log(out / "crawl.log.jsonl")
        if r.get("depth") is not None and r["status"] is not None and r["status"] not in (429, 503)
    }


def _file_edges(out: Path, crawled: set[str]) -> set[tuple[str, str]]:
    """The graph files' edges (every part) between crawled pages; sitemap edges start at a
    sitemap, not a page."""
    return {
        (s, d) for s, d, kind in read_graph(out).url_edges()
        if kind != "sitemap" and s in crawled and d in crawled
    }  # fmt: skip


@pytest.mark.parametrize("workers", [1, 2])
def test_the_feed_graph_equals_the_graph_files_restricted_to_crawled_pages(
    tmp_path: Path, workers: int
) -> None:
    spec = WebSpec(seed=7, hosts=6, pages_mean=25)
    out = tmp_path / "crawl"
    graph = CountingGraph()
    with serve_in_thread(spec) as web:
        web.write_resolve_file(tmp_path / "resolve.txt")
        settings = crawl_settings(tmp_path, out, web.url(0, 0), workers=workers, concurrency=8)
        captured: list[PageEvent] = []

        class Capture(PageSink):  # another subscriber: the events as the workers publish them
            def page(self, event: PageEvent) -> None:
                captured.append(event)

        register_sink("capture", lambda ctx: Capture())
        try:
            with GraphFeed(graph) as feed:
                assert FEED_SINK in sink_names()
                assert run_crawl(settings, feed=feed) == 0
            assert FEED_SINK not in sink_names()
        finally:
            unregister_sink("capture")
    crawled = _crawled(out)
    assert len(crawled) > 50
    assert set(graph.links) == crawled  # node for node
    assert graph.crawled_edges() == _file_edges(out, crawled)  # edge for edge
    assert len(graph.crawled_edges()) > 200
    assert set(graph.updates.values()) == {1}
    assert feed.events == len(crawled)  # no worker was killed: no page fetched twice
    if workers == 2:  # the events came from both workers, through the parent
        assert len(list((out / "graph").glob("edges-w*.tsv"))) == 2
        return
    # bytes per page event on the stream or socket, in batches of 5 pages (a host batch)
    assert [e.url for e in captured] and {e.url for e in captured} == crawled
    raw = sum(len(json.dumps([e.url, e.link_urls()], separators=(",", ":"))) for e in captured)
    blobs = sum(len(encode_events(captured[k : k + 5])) for k in range(0, len(captured), 5))
    links = sum(len(e.links) for e in captured) / len(captured)
    print(f"{len(captured)} pages, {links:.1f} links a page: {raw / len(captured):.0f} B of JSON "
          f"a page, {blobs / len(captured):.0f} B encoded in batches of 5")  # fmt: skip
    assert blobs * 2 < raw


def test_a_pool_worker_killed_mid_crawl_loses_no_event_of_a_page_counted_done(
    tmp_path: Path,
) -> None:
    """SIGKILL one of two pool workers mid-crawl (the parent then stops the other), resume
    with the same feed: the graph equals the graph files restricted to crawled pages. An
    event the killed worker sent before its pages counted done must reach the parent: the
    resumed run does not fetch those pages again."""
    spec = WebSpec(seed=9, hosts=10, pages_mean=40)
    out = tmp_path / "crawl"
    graph = CountingGraph()
    with serve_in_thread(spec) as web:
        web.write_resolve_file(tmp_path / "resolve.txt")
        settings = crawl_settings(
            tmp_path, out, web.url(0, 0), workers=2, concurrency=4, delay=0.01
        )
        log = out / "crawl.log.jsonl"
        killed: list[int] = []

        def kill_one() -> None:
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                lines = log.read_bytes().count(b"\n") if log.exists() else 0
                children = multiprocessing.active_children()
                if lines > 60 and children:
                    os.kill(children[0].pid or 0, signal.SIGKILL)
                    killed.append(lines)
                    return
                time.sleep(0.01)

        with GraphFeed(graph) as feed:
            killer = threading.Thread(target=kill_one)
            killer.start()
            first = run_crawl(settings, feed=feed)
            killer.join()
            after_kill = len(graph.links)
            assert run_crawl(settings, resume=True, feed=feed) == 0
    assert killed and first != 0, (killed, first)
    crawled = _crawled(out)
    print(
        f"killed after {killed[0]} log lines; {after_kill} pages in the graph then, "
        f"{len(crawled)} in all; {feed.applier.skipped} events of pages fetched again"
    )
    assert 0 < after_kill < len(crawled)
    assert set(graph.links) == crawled
    assert graph.crawled_edges() == _file_edges(out, crawled)
    assert set(graph.updates.values()) == {1}
