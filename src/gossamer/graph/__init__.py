"""The crawled web graph: built online as pages arrive, loaded from files, and measured.

- `OnlineGraph` (`_online.py`): SPAWC's UPDATE_GRAPH with pending edges, compact arrays.
- `load_graph` (`_load.py`): an edge list file or a crawl directory → `LoadedGraph`.
- `graph_statistics` (`_stats.py`): nodes, edges, components, dangling nodes, degrees.
- `distance_statistics` (`_distances.py`): average distance, effective diameter and diameter,
  exact or estimated; `statistics_of` passes it to `graph_statistics`.
- `write_graph` (`_export.py`): edge list, DIMACS or GraphML.
- `LiveGraph` (`_live.py`): an OnlineGraph fed page events and its statistics, written every
  few seconds and at the end (`gossamer graph follow`, a cluster crawl's live graph).
- `_follow.py`: an embedded crawl's live graph (`--live-graph`), a child process reading the
  crawl's files; its statistics in `DIR/graph/stats.json`.

What a node and an edge are, and what each figure means: docs/graph.md.
"""

from __future__ import annotations

import os

# One BLAS thread: the graph's algorithms use none (sparse graphs, integer arrays), and
# OpenBLAS starts its worker threads when numpy is imported, with SIGINT/SIGTERM unblocked.
# A crawl holds those signals (blocked in its threads) while it starts, and a thread that
# does not block them takes a held signal early (seen: `crawl --redis` forwarding a held
# SIGTERM to one worker too few). Set before numpy's first import; a value given wins.
for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

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
    "load_crawl_dir",
    "load_edgelist",
    "load_graph",
    "statistics_of",
    "write_graph",
]


def statistics_of(adj: sp.csr_array, *, pending: int | None = None) -> dict[str, Any]:
    """`graph_statistics` with the distance figures when `distance_statistics` is present."""
    return graph_statistics(adj, pending=pending, distances=distance_statistics)
