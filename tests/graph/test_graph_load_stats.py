"""Loading edge lists and DIMACS, the statistics against networkx, the power-law fit, export
round trips, and the command line's errors."""

from __future__ import annotations

import gzip
import json
import math
import random
import subprocess
import sys
from pathlib import Path
from typing import Any

import networkx as nx
import numpy as np
import pytest

from gossamer.graph import graph_statistics, load_graph
from gossamer.graph._stats import fit_power_law

GOSSAMER = [sys.executable, "-m", "gossamer"]


def run(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*GOSSAMER, *map(str, args)], capture_output=True, text=True, timeout=120, check=False
    )


def nx_figures(g: nx.DiGraph) -> dict[str, Any]:
    """The figures graph_statistics gives, computed by networkx."""
    sccs = list(nx.strongly_connected_components(g))
    wccs = list(nx.weakly_connected_components(g))
    ins = [d for _, d in g.in_degree()]
    outs = [d for _, d in g.out_degree()]
    return {
        "nodes": g.number_of_nodes(),
        "edges": g.number_of_edges(),
        "self_loops": nx.number_of_selfloops(g),
        "scc_count": len(sccs),
        "largest_scc": max(map(len, sccs)),
        "wcc_count": len(wccs),
        "largest_wcc": max(map(len, wccs)),
        "dangling": sum(1 for d in outs if d == 0),
        "in_max": max(ins),
        "out_max": max(outs),
        "in_sorted": sorted(ins),
        "out_sorted": sorted(outs),
    }


def our_figures(stats: dict[str, Any]) -> dict[str, Any]:
    keys = ("nodes", "edges", "self_loops", "scc_count", "largest_scc", "wcc_count")
    out = {k: stats[k] for k in keys}
    out.update(largest_wcc=stats["largest_wcc"], dangling=stats["dangling"])
    out["in_max"] = stats["in_degree"]["max"]
    out["out_max"] = stats["out_degree"]["max"]
    return out


def random_digraph(seed: int, n: int, m: int) -> list[tuple[int, int]]:
    rng = random.Random(seed)
    ids = [rng.getrandbits(40) for _ in range(n)]
    return [(ids[rng.randrange(n)], ids[min(n - 1, int(rng.paretovariate(1.2)) - 1)])
            for _ in range(m)]  # fmt: skip


@pytest.mark.parametrize("seed", range(6))
def test_statistics_equal_networkx_on_random_graphs(tmp_path: Path, seed: int) -> None:
    edges = random_digraph(seed, 50 + 200 * seed, 150 + 900 * seed)
    path = tmp_path / "g.txt"
    path.write_text("# a comment\n% another\n\n" + "".join(f"{a} {b}\n" for a, b in edges))
    graph = load_graph(path)
    stats = graph_statistics(graph.adj)
    truth = nx.DiGraph(edges)
    expected = nx_figures(truth)
    assert our_figures(stats) == {k: v for k, v in expected.items() if "sorted" not in k}
    hist_total = sum(b["count"] for b in stats["in_degree"]["histogram"])
    assert hist_total == truth.number_of_nodes()
    for key, degrees in (
        ("in_degree", expected["in_sorted"]),
        ("out_degree", expected["out_sorted"]),
    ):
        for b in stats[key]["histogram"]:
            assert b["count"] == sum(1 for d in degrees if b["min"] <= d <= b["max"])
    assert stats["exact"]["scc_count"] is True and stats["exact"]["in_degree"]["power_law"] is False


def test_edgelist_forms_gz_whitespace_and_huge_ids(tmp_path: Path) -> None:
    big = 10**30
    text = f"% header\n{big} 5\n5\t{big + 1}\n  {big + 1}   {big}  \n#\n5 5\n5 5\n"
    plain = tmp_path / "g.txt"
    plain.write_text(text)
    gz = tmp_path / "g.txt.gz"
    gz.write_bytes(gzip.compress(text.encode()))
    for path in (plain, gz):
        graph = load_graph(path)
        assert (graph.nodes, graph.edges) == (3, 4)
        assert list(graph.ids) == ["5", str(big), str(big + 1)]
        stats = graph_statistics(graph.adj)
        assert (stats["scc_count"], stats["largest_scc"], stats["self_loops"]) == (1, 3, 1)


def test_small_ids_and_sparse_ids_map_alike(tmp_path: Path) -> None:
    small = tmp_path / "small.txt"
    small.write_text("0 1\n1 2\n2 0\n2 3\n")
    sparse = tmp_path / "sparse.txt"
    sparse.write_text("-7 9\n9 100000000000\n100000000000 -7\n100000000000 12345678901234\n")
    a, b = load_graph(small), load_graph(sparse)
    assert (a.adj != b.adj).nnz == 0  # ids sorted: -7 < 9 < 1e11 < 1.2e13 is 0 1 2 3 relabelled
    assert list(b.ids) == [-7, 9, 100000000000, 12345678901234]


@pytest.mark.parametrize(
    ("text", "where"),
    [("1 2\n2 x\n", ":2:"), ("1 2 3\n", ":1:"), ("# c\n1\n", ":2:"), ("1 2\n3.5 4\n", ":2:")],
)
def test_a_bad_line_is_one_error_naming_file_and_line(
    tmp_path: Path, text: str, where: str
) -> None:
    path = tmp_path / "bad.txt"
    path.write_text(text)
    done = run("graph", "stats", path)
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and f"{path}{where}" in lines[0], done.stderr


def test_missing_source_unknown_format_and_existing_out_are_refused(tmp_path: Path) -> None:
    src = tmp_path / "g.txt"
    src.write_text("1 2\n")
    out = tmp_path / "out.txt"
    out.write_text("keep me")
    for args, needle in (
        (("graph", "stats", tmp_path / "nope.txt"), "no such file"),
        (("graph", "export", src, tmp_path / "x", "--format", "gml"), "--format must be"),
        (("graph", "export", src, out, "--format", "edgelist"), "exists"),
    ):
        done = run(*args)
        assert done.returncode == 2, done
        assert len(done.stderr.strip().splitlines()) == 1 and needle in done.stderr
    assert out.read_text() == "keep me"
    assert run("graph", "export", src, out, "--format", "edgelist", "--force").returncode == 0
    assert out.read_text().splitlines()[1:] == ["1\t2"]


def test_export_round_trip_edgelist_dimacs_graphml(tmp_path: Path) -> None:
    edges = random_digraph(3, 400, 3000)
    src = tmp_path / "g.txt"
    src.write_text("".join(f"{a}\t{b}\n" for a, b in edges))
    dimacs, graphml, again = tmp_path / "g.dimacs", tmp_path / "g.graphml", tmp_path / "g2.txt"
    assert run("graph", "export", src, dimacs, "--format", "dimacs").returncode == 0
    lines = dimacs.read_text().splitlines()
    truth = nx.DiGraph(edges)
    n, m = truth.number_of_nodes(), truth.number_of_edges()
    assert f"p sp {n} {m}" in lines and sum(1 for x in lines if x.startswith("a ")) == m
    assert run("graph", "export", dimacs, graphml, "--format", "graphml").returncode == 0
    read = nx.read_graphml(graphml)
    rank = {v: i + 1 for i, v in enumerate(sorted(truth.nodes))}  # DIMACS numbers ids in order
    assert set(read.edges) == {(str(rank[a]), str(rank[b])) for a, b in truth.edges}
    assert read.number_of_nodes() == n and read.is_directed()
    assert run("graph", "export", dimacs, again, "--format", "edgelist").returncode == 0
    back = load_graph(again)
    assert (back.nodes, back.edges) == (n, m)
    stats = json.loads(run("graph", "stats", graphml.with_name("g.dimacs"), "--json").stdout)
    assert stats["scc_count"] == nx.number_strongly_connected_components(truth)


def zeta_sample(rng: np.random.Generator, alpha: float, xmin: int, size: int) -> np.ndarray:
    """Discrete power-law samples (CSN appendix D's approximation: continuous, rounded)."""
    u = rng.random(size)
    return np.floor((xmin - 0.5) * (1 - u) ** (-1 / (alpha - 1)) + 0.5).astype(np.int64)


@pytest.mark.parametrize("alpha", [2.1, 2.5, 3.0])
def test_power_law_fit_recovers_alpha_within_its_error(alpha: float) -> None:
    rng = np.random.default_rng(int(alpha * 10))
    body = rng.integers(1, 5, 20_000)  # not a power law below xmin 5
    tail = zeta_sample(rng, alpha, 5, 20_000)
    fitted = fit_power_law(np.concatenate([body, tail]))
    assert fitted is not None
    fit: dict[str, Any] = dict(fitted)
    assert abs(fit["alpha"] - alpha) < max(4 * fit["sigma"], 0.05), fit
    assert 3 <= fit["xmin"] <= 8, fit
    assert fit_power_law(np.array([0, 1, 2])) is None
    expected_sigma = (fit["alpha"] - 1) / math.sqrt(fit["n_tail"])
    assert math.isclose(fit["sigma"], expected_sigma, rel_tol=1e-2)


def exact_distances(adj: Any) -> dict[str, object]:
    """Distances by BFS from every node (scipy), for a small graph."""
    from scipy.sparse import csgraph

    d = csgraph.shortest_path(adj, unweighted=True)
    finite = d[np.isfinite(d) & (d > 0)]
    return {
        "average_distance": float(finite.mean()),
        "effective_diameter": float(np.percentile(finite, 90)),
        "diameter": int(finite.max()),
        "exact": {"average_distance": True, "effective_diameter": True, "diameter": True},
        "method": "BFS from every node",
    }


def test_a_distance_function_is_merged_with_its_exact_flags(tmp_path: Path) -> None:
    path = tmp_path / "cycle.txt"
    path.write_text("".join(f"{i} {(i + 1) % 6}\n" for i in range(6)))
    adj = load_graph(path).adj
    without = graph_statistics(adj)
    assert without["distances"] == "not computed" and without["diameter"] is None
    assert without["exact"]["diameter"] is None  # type: ignore[index]
    stats = graph_statistics(adj, distances=exact_distances)
    assert (stats["diameter"], stats["average_distance"]) == (5, 3.0)
    assert stats["distances"] == "computed" and stats["method"] == "BFS from every node"
    assert stats["exact"]["diameter"] is True  # type: ignore[index]
    from gossamer.graph import format_table

    table = format_table(stats)
    assert "diameter" in table and "average distance" in table
    assert "not computed" in format_table(without)


def test_human_table_and_crawl_dir_errors(tmp_path: Path) -> None:
    path = tmp_path / "g.txt"
    path.write_text("1 2\n2 1\n2 3\n")
    done = run("graph", "stats", path)
    assert done.returncode == 0
    assert "strongly connected components" in done.stdout and "dangling" in done.stdout
    empty = tmp_path / "notacrawl"
    empty.mkdir()
    done = run("graph", "stats", empty)
    assert done.returncode == 2 and "not a crawl directory" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


def test_estimated_figures_show_their_standard_error_in_text() -> None:
    """What `--json` knows the text says: every estimated figure with a standard error in
    `error` is written `value ± error` (the error to two significant digits, the value to
    the same decimals), in `graph stats`'s table and in the live graph's line."""
    import functools

    import scipy.sparse as sp

    from gossamer.graph import distance_statistics, format_table
    from gossamer.report.crawl import graph_stats_line

    rng = random.Random(3)  # 600 nodes, 4 links each, mostly to the next 30: distances ~5
    edges = {(u, (u + rng.randint(1, 30)) % 600) for u in range(600) for _ in range(4)}
    rows, cols = zip(*sorted(edges), strict=True)
    adj = sp.csr_array(([1] * len(rows), (rows, cols)), shape=(600, 600))
    stats = graph_statistics(adj, distances=functools.partial(distance_statistics, exact_limit=100))
    errors = {k.removesuffix("_standard_error"): v for k, v in stats["error"].items()  # type: ignore[union-attr]
              if k.endswith("_standard_error") and v is not None}  # fmt: skip
    assert set(errors) == {"average_distance", "effective_diameter", "reachable_pairs"}
    table = format_table(stats).splitlines()
    for key in errors:
        (line,) = [x for x in table if x.startswith(key.replace("_", " ") + " ")]
        assert " ± " in line and line.endswith("estimate"), line
    # the diameter's bounds hold with certainty: bounds, not estimates
    for key in ("diameter lower bound", "diameter upper bound"):
        (line,) = [x for x in table if x.startswith(key)]
        assert line.endswith("bound"), line

    # the figure, and others, rounded as said
    shown = {**stats, "average_distance": 6.939, "effective_diameter": 8.45678,
             "reachable_pairs": 305_692.3,
             "error": {"average_distance_standard_error": 0.153,
                       "effective_diameter_standard_error": 0.01234,
                       "reachable_pairs_standard_error": 39_740.0}}  # fmt: skip
    text = format_table(shown)
    assert "6.94 ± 0.15" in text and "6.939" not in text
    assert "8.457 ± 0.012" in text and "305,692 ± 39,740" in text
    line = graph_stats_line({**shown, "final": True})
    assert "average distance 6.94 ± 0.15," in line, line
    # an estimate whose error is unknown (a graph too small for the jackknife) keeps its ~
    unknown = {**shown, "error": {"average_distance_standard_error": None}}
    assert "average distance ~6.94," in graph_stats_line(unknown)
    assert "6.939" in format_table(unknown) and "±" not in format_table(unknown).split(
        "average distance", 1)[1].splitlines()[0]  # fmt: skip


def test_export_of_an_edge_list_carries_degrees_and_pagerank(tmp_path: Path) -> None:
    """An edge list has no URLs: GraphML, GEXF and Parquet carry its ids, degrees and
    PageRank (networkx's), and no kind; `-o` and OUT after SOURCE are the same; both at once
    or neither is one error line."""
    import pyarrow.parquet as pq

    edges = random_digraph(5, 300, 1500)
    src = tmp_path / "g.txt"
    src.write_text("".join(f"{a}\t{b}\n" for a, b in edges))
    truth = nx.DiGraph(edges)
    rank = nx.pagerank(truth, tol=1e-13, max_iter=1000)
    graphs = {}
    for fmt in ("graphml", "gexf"):
        out = tmp_path / f"g.{fmt}"
        assert run("graph", "export", src, "-o", out, "--format", fmt).returncode == 0
        graphs[fmt] = nx.read_graphml(out) if fmt == "graphml" else nx.read_gexf(out)
    assert run("graph", "export", src, "-o", tmp_path / "p", "--format", "parquet").returncode == 0
    nodes = pq.read_table(tmp_path / "p" / "nodes.parquet").to_pylist()
    parquet_edges = pq.read_table(tmp_path / "p" / "edges.parquet").to_pylist()
    assert {(r["src"], r["dst"]) for r in parquet_edges} == set(truth.edges)
    assert len(parquet_edges) == truth.number_of_edges()
    assert set(nodes[0]) == {"id", "in_degree", "out_degree", "pagerank"}
    for row in nodes:
        assert abs(row["pagerank"] - rank[row["id"]]) < 1e-9
        assert row["in_degree"] == truth.in_degree(row["id"])
    for g in graphs.values():
        assert set(g.edges) == {(str(a), str(b)) for a, b in truth.edges}
        for node, attrs in g.nodes(data=True):
            assert "url" not in attrs and attrs["out_degree"] == truth.out_degree(int(node))
            assert abs(attrs["pagerank"] - rank[int(node)]) < 1e-9
        assert all("kind" not in attrs for _a, _b, attrs in g.edges(data=True))
    for args in ((src, tmp_path / "a", "-o", tmp_path / "b"), (src,)):
        done = run("graph", "export", *args, "--format", "edgelist")
        assert done.returncode == 2 and "give the file to write once" in done.stderr


def test_export_escapes_urls_and_joins_kinds(tmp_path: Path) -> None:
    """URLs with XML's special characters come back whole from GraphML and GEXF; a character
    XML cannot hold is percent-encoded; an edge recorded as a link and as canonical is
    `link,canonical`; an arc to a page not crawled is not an edge."""
    from gossamer.crawldir import CrawlDir
    from gossamer.sinks.crawllog import CrawlLog
    from gossamer.sinks.graph import GraphWriter

    crawl = tmp_path / "crawl"
    a, b, c = "http://x.test/?a=1&b=<2>", 'http://x.test/"q"', "http://x.test/\x01ctl"
    with CrawlLog(CrawlDir(crawl).crawl_log) as log:
        for depth, url in enumerate((a, b, c)):
            log.write(url=url, status=200, outcome="ok", depth=depth, content_type="text/html")
    with GraphWriter(crawl) as writer:
        writer.add_edge(a, b, "link")
        writer.add_edge(a, b, "canonical")
        writer.add_edge(b, c, "redirect")
        writer.add_edge(c, "http://x.test/never-crawled", "link")
    for fmt in ("graphml", "gexf"):
        out = tmp_path / f"g.{fmt}"
        assert run("graph", "export", crawl, "-o", out, "--format", fmt).returncode == 0, fmt
        g = nx.read_graphml(out) if fmt == "graphml" else nx.read_gexf(out)
        url = {n: attrs["url"] for n, attrs in g.nodes(data=True)}
        assert sorted(url.values()) == sorted([a, b, "http://x.test/%01ctl"])
        edges = {(url[s], url[d]): attrs["kind"] for s, d, attrs in g.edges(data=True)}
        assert edges == {(a, b): "link,canonical", (b, "http://x.test/%01ctl"): "redirect"}
        depth = {attrs["url"]: attrs["depth"] for _n, attrs in g.nodes(data=True)}
        assert depth[a] == 0 and depth[b] == 1
