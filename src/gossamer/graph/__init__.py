"""The crawled web graph: built online as pages arrive, loaded from files, and measured.

- `OnlineGraph` (`_online.py`): SPAWC's UPDATE_GRAPH with pending edges, compact arrays.
- `load_graph` (`_load.py`): an edge list file or a crawl directory → `LoadedGraph`.
- `graph_statistics` (`_stats.py`): nodes, edges, components, dangling nodes, degrees.
- `distance_statistics` (`_distances.py`, when present): average distance and diameter;
  `statistics_of` passes it to `graph_statistics`, so the distance figures are null
  (`"distances": "not computed"`) in a tree without it.
- `write_graph` (`_export.py`): edge list, DIMACS or GraphML.
- `LiveGraph` (`_live.py`): a running crawl's OnlineGraph and its statistics, written to
  `DIR/graph/stats.json` every few seconds and at the end.

What a node and an edge are, and what each figure means: docs/graph.md.
"""

from __future__ import annotations

from typing import Any

import scipy.sparse as sp

from ._export import EXPORT_FORMATS, write_graph
from ._live import LiveGraph
from ._load import LoadedGraph, load_crawl_dir, load_edgelist, load_graph
from ._online import OnlineGraph
from ._stats import DistanceFunction, format_table, graph_statistics

distance_statistics: DistanceFunction | None
try:
    from ._distances import (  # type: ignore[import-not-found, unused-ignore]
        distance_statistics as _distance_statistics,
    )

    distance_statistics = _distance_statistics
except ImportError:  # written by another change: until it is merged, distances are not computed
    distance_statistics = None

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
