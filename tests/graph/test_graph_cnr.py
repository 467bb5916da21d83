"""cnr-2000, a real web crawl (tests/data/graphs/README.md): `gossamer graph stats` through
the command line against LAW's figures and against scipy and networkx computed here from an
independent parse of the file."""

from __future__ import annotations

import gzip
from pathlib import Path

import networkx as nx
import numpy as np
import pytest
import scipy.sparse as sp
from scipy.sparse import csgraph

from graph_helpers import graph_stats_json

CNR = Path(__file__).parent.parent / "data" / "graphs" / "cnr-2000.edges.tsv.gz"


def test_cnr_2000_figures_through_the_command_line() -> None:
    stats = graph_stats_json(CNR)
    # LAW's figures (its SCC file), as the data's README gives them
    assert stats["nodes"] == 325_557
    assert stats["edges"] == 3_216_152
    assert stats["scc_count"] == 100_977
    assert stats["largest_scc"] == 112_023
    assert stats["wcc_count"] == 1
    in_degree, out_degree = stats["in_degree"], stats["out_degree"]
    assert isinstance(in_degree, dict) and isinstance(out_degree, dict)
    assert in_degree["max"] == 18_235
    # scipy on an independent parse (np.loadtxt, a plain COO matrix)
    with gzip.open(CNR, "rt") as f:
        arcs = np.loadtxt(f, dtype=np.int64)
    n = int(arcs.max()) + 1
    adj = sp.coo_array((np.ones(len(arcs)), (arcs[:, 0], arcs[:, 1])), shape=(n, n)).tocsr()
    adj.sum_duplicates()
    outs = np.diff(adj.indptr)
    ins = np.bincount(adj.indices, minlength=n)
    assert stats["dangling"] == int((outs == 0).sum())
    assert out_degree["max"] == int(outs.max())
    assert stats["self_loops"] == int((arcs[:, 0] == arcs[:, 1]).sum()) == 87_442
    for key, degrees in (("in_degree", ins), ("out_degree", outs)):
        bins = stats[key]["histogram"]  # type: ignore[index]
        assert bins[0]["count"] == int((degrees == 0).sum())
        for b in bins[1:]:
            assert b["count"] == int(((degrees >= b["min"]) & (degrees <= b["max"])).sum())
    exact = stats["exact"]
    assert isinstance(exact, dict) and exact["scc_count"] is True
    assert stats["distances"] in ("not computed", "computed")
    for key in ("average_distance", "effective_diameter"):
        assert key in stats


def test_cnr_2000_subgraph_every_figure_equals_networkx(tmp_path: Path) -> None:
    """networkx on all of cnr-2000 takes minutes: the subgraph induced by its first 40,000
    nodes (LAW's ids follow the crawl's order, so this is a crawl prefix) is checked whole."""
    with gzip.open(CNR, "rt") as f:
        arcs = np.loadtxt(f, dtype=np.int64, max_rows=600_000)
    keep = arcs[(arcs[:, 0] < 40_000) & (arcs[:, 1] < 40_000)]
    path = tmp_path / "prefix.tsv"
    np.savetxt(path, keep, fmt="%d\t%d", header="cnr-2000 prefix", comments="# ")
    stats = graph_stats_json(path)
    g = nx.DiGraph()
    g.add_edges_from(map(tuple, keep.tolist()))
    sccs = [len(c) for c in nx.strongly_connected_components(g)]
    wccs = [len(c) for c in nx.weakly_connected_components(g)]
    assert stats["nodes"] == g.number_of_nodes()
    assert stats["edges"] == g.number_of_edges()
    assert stats["scc_count"] == len(sccs) and stats["largest_scc"] == max(sccs)
    assert stats["wcc_count"] == len(wccs) and stats["largest_wcc"] == max(wccs)
    assert stats["dangling"] == sum(1 for _, d in g.out_degree() if d == 0)
    assert stats["in_degree"]["max"] == max(d for _, d in g.in_degree())  # type: ignore[index]
    assert stats["out_degree"]["max"] == max(d for _, d in g.out_degree())  # type: ignore[index]
    assert stats["self_loops"] == nx.number_of_selfloops(g)
    # PageRank: networkx's (self-loops included, as in the graph), the same top 10
    rank = nx.pagerank(g, alpha=0.85, tol=1e-13, max_iter=1000)
    top = stats["top_pages"]
    assert isinstance(top, list) and len(top) == 10
    best = sorted(rank.values(), reverse=True)
    assert [p["pagerank"] for p in top] == pytest.approx(best[:10], abs=1e-6)
    for page in top:
        assert page["url"] is None
        assert abs(page["pagerank"] - rank[int(page["id"])]) < 1e-6
        assert page["in_degree"] == g.in_degree(int(page["id"]))
    assert max(abs(rank[int(p["id"])] - p["pagerank"]) for p in top) < 1e-9
    # the scipy path agrees on the whole graph's SCCs as networkx does on the prefix
    assert csgraph.connected_components(nx.to_scipy_sparse_array(g), connection="strong")[0] == len(
        sccs
    )
