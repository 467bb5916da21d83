"""The crawled web graph: built online as pages arrive, loaded from files, and measured.

`OnlineGraph` (SPAWC's UPDATE_GRAPH with pending edges), `load_graph` (an edge list or a crawl
directory), `graph_statistics` and `distance_statistics` (exact, or estimated with their
errors), PageRank and the top pages (`_rank.py`, in the statistics), `write_graph`
(GraphML, GEXF and Parquet with each node's URL and attributes, edge list, DIMACS),
`LiveGraph` (an OnlineGraph fed page events, its statistics written every few seconds:
`gossamer graph follow`); `_follow.py` is an embedded crawl's live graph, read from the
crawl's files in a child process. This package imports numpy and scipy: a crawl's own
process never imports it. What a node, an edge and each figure are: docs/graph.md."""

from __future__ import annotations

import os

# One BLAS thread: the graph's algorithms use none (sparse graphs, integer arrays), and
# OpenBLAS starts its worker threads when numpy is imported, with SIGINT/SIGTERM unblocked.
# A crawl holds those signals (blocked in its threads) while it starts, and a thread that
# does not block them takes a held signal early (seen: `crawl --redis` forwarding a held
# SIGTERM to one worker too few). Set before numpy's first import; a value given wins.
for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

from collections.abc import Sequence  # noqa: E402
from typing import Any  # noqa: E402

import scipy.sparse as sp  # noqa: E402

from ._distances import distance_statistics  # noqa: E402
from ._export import EXPORT_FORMATS, write_graph  # noqa: E402
from ._live import LiveGraph  # noqa: E402
from ._load import LoadedGraph, load_crawl_dir, load_edgelist, load_graph  # noqa: E402
from ._online import OnlineGraph  # noqa: E402
from ._stats import format_table, graph_statistics  # noqa: E402

__all__ = [
    "EXPORT_FORMATS",
    "LiveGraph",
    "LoadedGraph",
    "OnlineGraph",
    "distance_statistics",
    "format_table",
    "graph_statistics",
    "load",
    "load_crawl_dir",
    "load_edgelist",
    "load_graph",
    "statistics_of",
    "stats",
    "to_networkx",
    "write_graph",
]


def statistics_of(
    adj: sp.csr_array,
    *,
    pending: int | None = None,
    ids: Any = None,
    urls: Sequence[str | None] | None = None,
) -> dict[str, Any]:
    """`graph_statistics` with the distance figures when `distance_statistics` is present;
    `ids` and `urls` (one per node) name the top pages."""
    return graph_statistics(adj, pending=pending, distances=distance_statistics, ids=ids, urls=urls)


def load(source: str | os.PathLike[str]) -> LoadedGraph:
    """The link graph of a crawl directory (every worker's parts, all runs) or of an edge
    list file: `LoadedGraph` (`adj`, a scipy CSR adjacency matrix; `ids`, each node's
    original id; `nodes`, `edges`). ValueError (one line) for bad input."""
    return load_graph(source)


def stats(source: str | os.PathLike[str] | LoadedGraph) -> dict[str, Any]:
    """The statistics `gossamer graph stats --json SOURCE` prints, as a dict (nodes, edges,
    components, degrees and power laws, distances; docs/graph.md) of a crawl directory, an
    edge list file or a graph `load` returned."""
    graph = source if isinstance(source, LoadedGraph) else load_graph(source)
    return statistics_of(graph.adj, pending=graph.pending, ids=graph.ids, urls=graph.urls)


def to_networkx(source: str | os.PathLike[str] | LoadedGraph) -> Any:
    """The graph as a `networkx.DiGraph` whose nodes are the original ids, with each page's
    `url` as a node attribute when the source is a crawl directory (needs networkx, which
    gossamer does not install)."""
    import networkx as nx

    graph = source if isinstance(source, LoadedGraph) else load_graph(source)
    digraph = nx.DiGraph()
    ids = [str(i) for i in graph.ids]
    urls = graph.urls
    if urls is not None:
        digraph.add_nodes_from((i, {"url": u}) for i, u in zip(ids, urls, strict=True))
    else:
        digraph.add_nodes_from(ids)
    src, dst = graph.edge_pairs()
    digraph.add_edges_from(zip((ids[i] for i in src), (ids[j] for j in dst), strict=True))
    return digraph
