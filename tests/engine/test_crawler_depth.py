"""The engine's side of "depth is the shortest path": with a max_depth and a frontier that
relaxes depths for it, every in-scope link goes to the frontier (beyond max_depth too, with
its parent's fingerprint and the edge's delta); with any other frontier links beyond
max_depth are dropped in the engine, as before (a frontier without max_depth would queue
them). The crawls themselves: tests/e2e/test_crawl_depth.py."""

from __future__ import annotations

from test_crawler_unit import HTML, _crawl, _page

from gossamer.frontier import MemoryFrontier
from gossamer.urls import fingerprint

# p0 -> p1 -> p2; p0 -> p3 -> p2; p0 -> r (a redirect to p4)
PAGES = {
    "http://a.example/p0": (
        200, HTML, _page(["http://a.example/p1", "http://a.example/p3", "http://a.example/r"]), ()
    ),
    "http://a.example/p1": (200, HTML, _page(["http://a.example/p2"]), ()),
    "http://a.example/p3": (200, HTML, _page(["http://a.example/p2"]), ()),
    "http://a.example/p2": (200, HTML, _page([]), ()),
    "http://a.example/r": (301, "text/html", b"", (("Location", "/p4"),)),
    "http://a.example/p4": (200, HTML, _page(["http://a.example/p5"]), ()),
}  # fmt: skip


def test_links_beyond_max_depth_are_parked_in_a_relaxing_frontier() -> None:
    frontier = MemoryFrontier(max_depth=1)
    seeds = ["http://a.example/p0"]
    crawler, fetcher, sinks, _ = _crawl(PAGES, seeds, frontier=frontier, max_depth=1)
    fetched = {u for u, _, _ in fetcher.log if not u.endswith("robots.txt")}
    # the redirect keeps r's depth (1): p4 is fetched, its link p5 (depth 2) is not
    assert fetched == {f"http://a.example/{p}" for p in ("p0", "p1", "p3", "r", "p4")}
    s = frontier.statistics()
    # p2 (offered twice: a parked URL offered again is no duplicate, it was never accepted)
    # and p5 parked
    assert (s.parked, s.done, s.duplicates_seen) == (2, 5, 0)
    assert crawler.counters.dropped["scope/depth"] == 3  # p2 twice, p5
    # the frontier recorded each edge with its delta (p4 from the redirect: 0)
    children = frontier._children  # the reference model's record, read for the test
    assert children[fingerprint("http://a.example/r")] == {fingerprint("http://a.example/p4"): 0}
    assert set(children[fingerprint("http://a.example/p1")]) == {fingerprint("http://a.example/p2")}
    assert sinks.edges_by_src["http://a.example/p1"] == [("http://a.example/p2", "link")]


def test_a_frontier_without_max_depth_gets_no_link_beyond_it() -> None:
    frontier = MemoryFrontier()  # no max_depth: it would queue whatever it is given
    crawler, fetcher, _, _ = _crawl(PAGES, ["http://a.example/p0"], frontier=frontier, max_depth=1)
    fetched = {u for u, _, _ in fetcher.log if not u.endswith("robots.txt")}
    assert fetched == {f"http://a.example/{p}" for p in ("p0", "p1", "p3", "r", "p4")}
    assert frontier.statistics().parked == 0
    assert crawler.counters.dropped["scope/depth"] == 3
