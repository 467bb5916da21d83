"""A crawl of the simulated web, then its graph ranked and exported: `gossamer graph stats
--json`'s top pages (URL, PageRank, in-degree) against networkx's PageRank on the truth's
graph restricted to the crawled pages, and `gossamer graph export` to GraphML, GEXF and
Parquet read back (networkx, pyarrow) node for node and edge for edge, with every node's URL
and attributes and every edge's kind."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import networkx as nx
import pyarrow.parquet as pq
import pytest
from _crawl_helpers import USER_AGENT, crawl_settings

from gossamer.runner.run import run_crawl
from gossamer.sinks.graph import read_graph
from gossamer.testweb import TruthRules, WebSpec, compute_truth, read_logs, serve_in_thread
from graph_helpers import graph_stats_json


@pytest.fixture(scope="module")
def crawled(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, nx.DiGraph]]:
    """(crawl directory, the truth's graph on the pages crawled: URLs as nodes)."""
    tmp_path = tmp_path_factory.mktemp("rank")
    links = (("redirect_link", 0.1), ("dead_link", 0.1), ("nonhtml_link", 0.05))
    spec = WebSpec(seed=7, hosts=12, pages_mean=20, overrides=links)
    log = tmp_path / "web.log"
    out = tmp_path / "crawl"
    with serve_in_thread(spec, log_path=log) as web:
        web.write_resolve_file(tmp_path / "resolve.txt")
        seed = web.url(0, 0)
        assert run_crawl(crawl_settings(tmp_path, out, seed, workers=2)) == 0
        web.flush_log()
    truth = compute_truth(web.model, TruthRules(seeds=(seed,), scope="all", user_agent=USER_AGENT))
    served = {
        (r.host, r.target)
        for r in read_logs([log]).records
        if r.method == "GET" and 200 <= r.status < 400
    }

    def key(url: str) -> tuple[str, str]:
        parts = urlsplit(url)
        return parts.hostname or "", parts.path + (f"?{parts.query}" if parts.query else "")

    pages = {u for u in truth.required if key(u) in served}
    expected = nx.DiGraph()
    expected.add_nodes_from(pages)
    expected.add_edges_from(
        (a, b) for a, b, _kind in truth.edges if a in pages and b in pages and a != b
    )
    assert expected.number_of_nodes() > 150 and expected.number_of_edges() > 300
    yield out, expected


def _crawl_log(out: Path) -> dict[str, dict[str, object]]:
    """URL -> the first crawl log record that makes it a node."""
    records: dict[str, dict[str, object]] = {}
    for log in sorted(out.glob("crawl*.log.jsonl")):
        for line in log.read_text().splitlines():
            r = json.loads(line)
            status = r["status"]
            if r.get("depth") is not None and isinstance(status, int) and 200 <= status < 400:
                records.setdefault(r["url"], r)
    return records


def _kinds(out: Path) -> dict[tuple[str, str], str]:
    """(source URL, target URL) -> its kinds as the export names them."""
    order = ("link", "redirect", "canonical", "sitemap")
    found: dict[tuple[str, str], set[str]] = {}
    for a, b, kind in read_graph(out).url_edges():
        found.setdefault((a, b), set()).add(kind)
    return {e: ",".join(k for k in order if k in ks) for e, ks in found.items()}


def test_top_pages_equal_networkx_pagerank(crawled: tuple[Path, nx.DiGraph]) -> None:
    out, expected = crawled
    truth = nx.pagerank(expected, alpha=0.85, tol=1e-13, max_iter=1000)
    stats = graph_stats_json(out)
    top = stats["top_pages"]
    assert len(top) == 10
    for page in top:
        assert set(page) >= {"url", "pagerank", "in_degree"}
        assert abs(page["pagerank"] - truth[page["url"]]) < 1e-6
        assert page["in_degree"] == expected.in_degree(page["url"])
    assert max(abs(p["pagerank"] - truth[p["url"]]) for p in top) < 1e-9  # (tol 1e-9, L1)
    # the same top 10 as networkx's: each value is networkx's 10 largest, in order (pages
    # with equal PageRank may come in any order)
    best = sorted(truth.values(), reverse=True)
    assert [p["pagerank"] for p in top] == pytest.approx(best[:10], abs=1e-6)
    assert best[9] - best[10] > 1e-6  # (no tie at the cut: the set of 10 is networkx's)
    assert {p["url"] for p in top} == set(sorted(truth, key=truth.__getitem__)[-10:])
    by_degree = stats["top_pages_by_in_degree"]
    degrees = sorted((d for _, d in expected.in_degree()), reverse=True)
    assert [p["in_degree"] for p in by_degree] == degrees[:10]
    for page in by_degree:
        assert expected.in_degree(page["url"]) == page["in_degree"]
    # the text output names the same pages
    text = subprocess.run(
        [sys.executable, "-m", "gossamer", "graph", "stats", str(out)],
        capture_output=True, text=True, timeout=120, check=True,
    ).stdout  # fmt: skip
    assert "top pages by PageRank" in text and top[0]["url"] in text


def _export(out: Path, fmt: str, target: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "gossamer", "graph", "export", str(out), "-o", str(target),
         "--format", fmt],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr


def _check_nodes_and_edges(
    out: Path,
    expected: nx.DiGraph,
    nodes: dict[str, dict[str, object]],
    edges: dict[tuple[str, str], str],
) -> None:
    """`nodes` URL -> attributes and `edges` (URL, URL) -> kind, against the crawl."""
    assert set(nodes) == set(expected.nodes)
    assert set(edges) == set(expected.edges)
    truth = nx.pagerank(expected, alpha=0.85, tol=1e-13, max_iter=1000)
    log = _crawl_log(out)
    for url, attrs in nodes.items():
        assert attrs["host"] == urlsplit(url).hostname
        assert attrs["status"] == log[url]["status"]
        assert attrs["depth"] == log[url]["depth"]
        assert attrs["content_type"] == log[url]["type"]
        assert attrs["in_degree"] == expected.in_degree(url)
        assert attrs["out_degree"] == expected.out_degree(url)
        assert abs(float(attrs["pagerank"]) - truth[url]) < 1e-6  # type: ignore[arg-type]
    kinds = _kinds(out)
    assert edges == {e: kinds[e] for e in edges}
    assert "redirect" in edges.values() and "link" in edges.values()


@pytest.mark.parametrize("fmt", ["graphml", "gexf"])
def test_graphml_and_gexf_load_in_networkx_with_urls(
    crawled: tuple[Path, nx.DiGraph], tmp_path: Path, fmt: str
) -> None:
    out, expected = crawled
    target = tmp_path / f"crawl.{fmt}"
    _export(out, fmt, target)
    g = nx.read_graphml(target) if fmt == "graphml" else nx.read_gexf(target)
    assert g.is_directed()
    url_of = {node: attrs["url"] for node, attrs in g.nodes(data=True)}
    nodes = {attrs["url"]: attrs for _node, attrs in g.nodes(data=True)}
    assert len(nodes) == g.number_of_nodes()
    edges = {(url_of[a], url_of[b]): attrs["kind"] for a, b, attrs in g.edges(data=True)}
    assert len(edges) == g.number_of_edges()
    _check_nodes_and_edges(out, expected, nodes, edges)
    if fmt == "gexf":  # Gephi shows the label: the URL
        assert all(attrs["label"] == attrs["url"] for _n, attrs in g.nodes(data=True))


def test_parquet_loads_in_pyarrow_with_urls(
    crawled: tuple[Path, nx.DiGraph], tmp_path: Path
) -> None:
    out, expected = crawled
    target = tmp_path / "crawl.parquet"
    _export(out, "parquet", target)
    node_rows = pq.read_table(target / "nodes.parquet").to_pylist()
    edge_rows = pq.read_table(target / "edges.parquet").to_pylist()
    url_of = {r["id"]: r["url"] for r in node_rows}
    nodes = {r["url"]: r for r in node_rows}
    assert len(nodes) == len(node_rows)
    edges = {(url_of[r["src"]], url_of[r["dst"]]): r["kind"] for r in edge_rows}
    assert len(edges) == len(edge_rows)
    _check_nodes_and_edges(out, expected, nodes, edges)
