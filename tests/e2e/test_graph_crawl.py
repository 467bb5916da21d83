"""A crawl of the simulated web, then `gossamer graph stats DIR`: the graph is the truth's
edges restricted to the pages crawled (status 200–399, as the web server logged them), node
for node and edge for edge, and its statistics are networkx's on that graph."""

from __future__ import annotations

import random
from pathlib import Path
from urllib.parse import urlsplit

import networkx as nx
from _crawl_helpers import USER_AGENT, crawl_settings

from gossamer.graph import OnlineGraph, load_graph
from gossamer.runner.run import run_crawl
from gossamer.sinks.graph import node_id, read_graph
from gossamer.testweb import TruthRules, WebSpec, compute_truth, read_logs, serve_in_thread
from graph_helpers import graph_stats_json


def test_graph_of_a_crawl_equals_the_truths_graph_on_crawled_pages(tmp_path: Path) -> None:
    links = (("redirect_link", 0.1), ("dead_link", 0.1), ("nonhtml_link", 0.05))
    spec = WebSpec(seed=5, hosts=15, pages_mean=15, overrides=(*links, ("session_link", 0.05)))
    log = tmp_path / "web.log"
    out = tmp_path / "crawl"
    with serve_in_thread(spec, log_path=log) as web:
        web.write_resolve_file(tmp_path / "resolve.txt")
        seed = web.url(0, 0)
        assert run_crawl(crawl_settings(tmp_path, out, seed, workers=2)) == 0
        web.flush_log()
    assert len(list((out / "graph").glob("edges*.tsv"))) == 2  # both workers' parts merged
    rules = TruthRules(seeds=(seed,), scope="all", user_agent=USER_AGENT)
    truth = compute_truth(web.model, rules)
    served = {
        (r.host, r.target)
        for r in read_logs([log]).records
        if r.method == "GET" and 200 <= r.status < 400
    }

    def key(url: str) -> tuple[str, str]:
        parts = urlsplit(url)
        return parts.hostname or "", parts.path + (f"?{parts.query}" if parts.query else "")

    crawled = {u for u in truth.required if key(u) in served}
    assert len(crawled) < len(truth.required)  # some pages answered 4xx/5xx: not nodes
    expected = nx.DiGraph()
    expected.add_nodes_from(crawled)
    expected.add_edges_from(
        (a, b) for a, b, _kind in truth.edges if a in crawled and b in crawled and a != b
    )
    redirects = sum(1 for _a, _b, kind in truth.edges if kind == "redirect")
    assert redirects and expected.number_of_edges() > 3 * len(crawled) / 2

    graph = load_graph(out)
    ids = {node_id(u): u for u in crawled}
    assert set(graph.ids.tolist()) == set(ids)  # type: ignore[union-attr]
    src, dst = graph.edge_pairs()
    ours = {(ids[int(graph.ids[a])], ids[int(graph.ids[b])]) for a, b in zip(src, dst, strict=True)}
    assert ours == set(expected.edges)

    stats = graph_stats_json(out)
    sccs = [len(c) for c in nx.strongly_connected_components(expected)]
    wccs = [len(c) for c in nx.weakly_connected_components(expected)]
    assert stats["nodes"] == expected.number_of_nodes()
    assert stats["edges"] == expected.number_of_edges()
    assert (stats["scc_count"], stats["largest_scc"]) == (len(sccs), max(sccs))
    assert (stats["wcc_count"], stats["largest_wcc"]) == (len(wccs), max(wccs))
    assert stats["dangling"] == sum(1 for _, d in expected.out_degree() if d == 0)
    assert stats["in_degree"]["max"] == max(d for _, d in expected.in_degree())
    assert stats["out_degree"]["max"] == max(d for _, d in expected.out_degree())
    # links from crawled pages to required pages that failed wait for ever (and links to
    # pages out of the truth's rules, which the graph files also record)
    failed_targets = {
        (a, b) for a, b, _k in truth.edges if a in crawled and b in truth.required - crawled
    }
    assert stats["pending"] >= len(failed_targets) > 0

    # the online graph fed the crawl's pages in a shuffled order (as events would arrive from
    # several workers) is the same graph, with the same pending links
    out_links: dict[str, list[str]] = {}
    for a, b, _kind in read_graph(out).url_edges():
        out_links.setdefault(a, []).append(b)
    order = sorted(crawled)
    random.Random(1).shuffle(order)
    online = OnlineGraph()
    for url in order:
        online.update(url, out_links.get(url, []))
    names = {node_id(u): u for u in crawled}
    node_urls = [names[int(i)] for i in online.node_ids()]
    osrc, odst = online.edge_arrays()
    assert {(node_urls[a], node_urls[b]) for a, b in zip(osrc, odst, strict=True)} == ours
    assert (online.nodes, online.pending) == (len(crawled), stats["pending"])
