"""A crawl graph's counts kept incrementally (the live graph's every refresh, graph/_follow.py):
nodes, distinct edges, pending links, SCCs (count, largest), WCCs, dangling nodes and the
degree distributions, updated from the nodes and arcs read since the last refresh.

    counts = GraphCounts()
    counts.update(new_node_ids, src_ids, dst_ids)   # ids as sinks.graph.node_id gives them
    counts.figures()                                # the counts graph_statistics reports
    counts.adjacency()                              # CSR in sorted-id order (= crawl_graph's)

The graph is `crawl_graph`'s (graph/_load.py): a node is a crawled page, an edge an arc between
two nodes (self-loops dropped, repeats merged), a pending link an arc from a node to a page not
crawled (yet). Arcs may arrive before their source's node (another file read first): they wait.

Edges are a sorted array of distinct 64-bit keys (source index << 32 | target index): a refresh
merges its new keys (two sorted runs: a linear merge), so it costs O(edges) memory traffic and
O(new log new) work, not a sort of every edge. SCCs are kept as an **incremental condensation**:
each node's component label and the distinct edges between components; a refresh's edges
between two components are added to that graph and scipy's SCC runs on it alone (components
that a new edge closes a cycle through merge; the rest keep their label). Since every component
is strongly connected, the SCCs of the graph with the new edges are those of this condensation,
so the figures are exact; on a web graph the condensation is far smaller than the graph
(cnr-2000: 101k components and 400k edges between them against 326k nodes and 3.2M edges).
Pending links are kept distinct by a 64-bit key of (source index, target id), as node ids are
63-bit hashes of URLs (sinks/graph.py)."""

from __future__ import annotations

import sys
from typing import Any

import numpy as np
import numpy.typing as npt
import scipy.sparse as sp
from scipy.sparse import csgraph

from ._load import adjacency
from ._stats import degree_histogram

__all__ = ["GraphCounts"]

_I64 = npt.NDArray[np.int64]
_MIX = np.uint64(0x9E3779B97F4A7C15)  # Fibonacci hashing of the source index
_EMPTY = np.empty(0, dtype=np.int64)


def _merge_sorted(a: _I64, b: _I64) -> _I64:
    """Two sorted arrays, merged (numpy's stable sort is a timsort for int64: two runs are
    merged in one linear pass)."""
    if not len(b):
        return a
    if not len(a):
        return b
    out = np.concatenate([a, b])
    out.sort(kind="stable")
    return out


def _distinct(keys: npt.NDArray[Any]) -> npt.NDArray[Any]:
    """The distinct values of `keys`, sorted. (np.unique: numpy 2.4's hash table took 12 s
    on 433,000 edge keys, whose low bits repeat; a sort takes 30 ms.)"""
    keys = np.sort(keys)
    if len(keys) > 1:
        keys = keys[np.concatenate(([True], keys[1:] != keys[:-1]))]
    return keys


def _fresh(keys: _I64, present: _I64) -> _I64:
    """The distinct `keys` that are not in the sorted array `present`, sorted."""
    keys = _distinct(keys)
    if len(present) and len(keys):
        pos = np.searchsorted(present, keys).clip(0, len(present) - 1)
        keys = keys[present[pos] != keys]
    return keys


class GraphCounts:
    """The counts of a crawl graph fed in steps (see the module docstring)."""

    def __init__(self) -> None:
        self.index: dict[int, int] = {}  # node id -> node index (arrival order)
        self._ids = np.empty(1024, dtype=np.int64)  # node index -> id
        self._n = 0
        self._sorted = _EMPTY  # node ids, sorted ...
        self._sorted_at = np.empty(0, dtype=np.int64)  # ... and the index of each
        self._edges = _EMPTY  # distinct keys src << 32 | dst (node indices), sorted
        self._in = np.zeros(1024, dtype=np.int64)
        self._out = np.zeros(1024, dtype=np.int64)
        self._pend_key = np.empty(0, dtype=np.uint64)  # distinct pending links, sorted by key
        self._pend_src = np.empty(0, dtype=np.int64)  # ... their source index
        self._pend_dst = _EMPTY  # ... and target id
        self._orphan_src = _EMPTY  # arcs whose source is not a node (yet): ids
        self._orphan_dst = _EMPTY
        self._comp = np.empty(1024, dtype=np.int64)  # node index -> component label
        self._ncomp = 0
        self._cond = _EMPTY  # distinct edges between components: cu << 32 | cv, sorted
        self._wcc: tuple[int, int] | None = (0, 0)  # None: to recompute

    # ------------------------------------------------------------------ updating
    @property
    def nodes(self) -> int:
        return self._n

    def ids(self) -> _I64:
        """Each node's id, by node index (a view)."""
        return self._ids[: self._n]

    def update(self, node_ids: list[int], src: _I64, dst: _I64) -> None:
        """Pages that became nodes (ids; repeats and known ones ignored) and arcs read (ids,
        repeats allowed, in any order relative to their nodes)."""
        new_ids = self._add_nodes(node_ids)
        src = np.concatenate([self._orphan_src, src])
        dst = np.concatenate([self._orphan_dst, dst])
        keep = src != dst
        src, dst = src[keep], dst[keep]
        si = self._lookup(src)
        orphan = si < 0
        self._orphan_src, self._orphan_dst = src[orphan], dst[orphan]
        si, dst = si[~orphan], dst[~orphan]
        di = self._lookup(dst)
        direct = di >= 0
        new_src, new_dst = [si[direct]], [di[direct]]
        # pending links whose target just became a node: edges now
        if len(new_ids) and len(self._pend_dst):
            pos = np.searchsorted(new_ids, self._pend_dst).clip(0, len(new_ids) - 1)
            hit = new_ids[pos] == self._pend_dst
            if hit.any():
                new_src.append(self._pend_src[hit])
                new_dst.append(self._lookup(self._pend_dst[hit]))
                self._pend_key = self._pend_key[~hit]
                self._pend_src = self._pend_src[~hit]
                self._pend_dst = self._pend_dst[~hit]
        self._add_pending(si[~direct], dst[~direct])
        self._add_edges(np.concatenate(new_src), np.concatenate(new_dst))
        if len(new_ids):
            self._wcc = None

    def _add_nodes(self, node_ids: list[int]) -> _I64:
        """The ids of `node_ids` not yet nodes, made nodes; sorted."""
        fresh = [i for i in dict.fromkeys(node_ids) if i not in self.index]
        if not fresh:
            return _EMPTY
        k, n = len(fresh), self._n
        if n + k > len(self._ids):
            size = max(n + k, 2 * len(self._ids))
            self._ids = np.resize(self._ids, size)
            self._comp = np.resize(self._comp, size)
            self._in = np.concatenate([self._in[:n], np.zeros(size - n, dtype=np.int64)])
            self._out = np.concatenate([self._out[:n], np.zeros(size - n, dtype=np.int64)])
        for j, node in enumerate(fresh):
            self.index[node] = n + j
        new = np.array(fresh, dtype=np.int64)
        self._ids[n : n + k] = new
        self._comp[n : n + k] = np.arange(self._ncomp, self._ncomp + k)  # singletons
        self._ncomp += k
        self._n = n + k
        order = np.argsort(new)
        new = new[order]
        at = np.arange(n, n + k, dtype=np.int64)[order]
        merged = np.concatenate([self._sorted, new])
        perm = np.argsort(merged, kind="stable")
        self._sorted = merged[perm]
        self._sorted_at = np.concatenate([self._sorted_at, at])[perm]
        return new

    def _lookup(self, ids: _I64) -> _I64:
        """The node index of each id, -1 where it is not a node."""
        if not len(self._sorted) or not len(ids):
            return np.full(len(ids), -1, dtype=np.int64)
        pos = np.searchsorted(self._sorted, ids).clip(0, len(self._sorted) - 1)
        return np.where(self._sorted[pos] == ids, self._sorted_at[pos], -1)

    def _add_pending(self, si: _I64, dst: _I64) -> None:
        if not len(si):
            return
        keys = dst.astype(np.uint64) ^ (si.astype(np.uint64) * _MIX)
        order = np.argsort(keys, kind="stable")
        keys = keys[order]
        head = np.concatenate(([True], keys[1:] != keys[:-1])) if len(keys) else order > 0
        keys, first = keys[head], order[head]
        if len(self._pend_key):
            pos = np.searchsorted(self._pend_key, keys).clip(0, len(self._pend_key) - 1)
            new = self._pend_key[pos] != keys
            keys, first = keys[new], first[new]
        if not len(keys):
            return
        merged = np.concatenate([self._pend_key, keys])
        perm = np.argsort(merged, kind="stable")
        self._pend_key = merged[perm]
        self._pend_src = np.concatenate([self._pend_src, si[first]])[perm]
        self._pend_dst = np.concatenate([self._pend_dst, dst[first]])[perm]

    def _add_edges(self, si: _I64, di: _I64) -> None:
        fresh = _fresh((si << 32) | di, self._edges)
        if not len(fresh):
            return
        self._edges = _merge_sorted(self._edges, fresh)
        s, d = fresh >> 32, fresh & 0xFFFFFFFF
        n = self._n
        self._out[:n] += np.bincount(s, minlength=n)
        self._in[:n] += np.bincount(d, minlength=n)
        self._add_condensed(self._comp[s], self._comp[d])
        self._wcc = None

    def _add_condensed(self, cu: _I64, cv: _I64) -> None:
        """Edges between components: the condensation gains them, and its SCCs merge the
        components a new edge closes a cycle through."""
        across = cu != cv
        fresh = _fresh((cu[across] << 32) | cv[across], self._cond)
        if not len(fresh):
            return
        cond = _merge_sorted(self._cond, fresh)
        k = self._ncomp
        graph = sp.csr_array(
            (np.ones(len(cond)), ((cond >> 32), cond & 0xFFFFFFFF)), shape=(k, k)
        )
        count, labels = csgraph.connected_components(graph, connection="strong")
        if count == k:  # no cycle closed: the labels stand
            self._cond = cond
            return
        labels = labels.astype(np.int64)
        self._comp[: self._n] = labels[self._comp[: self._n]]
        self._ncomp = int(count)
        a, b = labels[cond >> 32], labels[cond & 0xFFFFFFFF]
        keep = a != b
        self._cond = _distinct((a[keep] << 32) | b[keep])

    def _weak(self) -> tuple[int, int]:
        """(count, largest) of the weakly connected components, from the condensation."""
        k = self._ncomp
        if not k:
            return 0, 0
        graph = sp.csr_array(
            (np.ones(len(self._cond)), (self._cond >> 32, self._cond & 0xFFFFFFFF)),
            shape=(k, k),
        )
        count, labels = csgraph.connected_components(graph, connection="weak")
        sizes = np.bincount(labels, weights=np.bincount(self._comp[: self._n], minlength=k))
        return int(count), int(sizes.max())

    # ------------------------------------------------------------------ reading
    def figures(self) -> dict[str, Any]:
        """nodes, edges, pending, self_loops, scc_count, largest_scc, wcc_count, largest_wcc,
        dangling, in_degree and out_degree (max, mean, histogram), as graph_statistics has
        them; the power-law fits are not counted here (`power_law`: None)."""
        n = self._n
        largest = int(np.bincount(self._comp[:n]).max()) if n else 0
        if self._wcc is None:
            self._wcc = self._weak()
        return {
            "nodes": n,
            "edges": len(self._edges),
            "pending": len(self._pend_key),
            "self_loops": 0,
            "scc_count": self._ncomp if n else 0,
            "largest_scc": largest,
            "wcc_count": self._wcc[0] if n else 0,
            "largest_wcc": self._wcc[1] if n else 0,
            "dangling": int(np.count_nonzero(self._out[:n] == 0)),
            "in_degree": _degrees(self._in[:n]),
            "out_degree": _degrees(self._out[:n]),
        }

    def adjacency(self) -> tuple[sp.csr_array, _I64]:
        """(CSR adjacency, node ids) with the nodes in sorted-id order: `crawl_graph`'s."""
        n = self._n
        rank = np.empty(n, dtype=np.int64)
        rank[self._sorted_at] = np.arange(n)
        s, d = self._edges >> 32, self._edges & 0xFFFFFFFF
        return adjacency(n, rank[s], rank[d]), self._sorted.copy()

    def memory_bytes(self) -> int:
        arrays = (
            self._ids, self._sorted, self._sorted_at, self._edges, self._in, self._out,
            self._pend_key, self._pend_src, self._pend_dst, self._orphan_src, self._orphan_dst,
            self._comp, self._cond,
        )  # fmt: skip
        return sum(a.nbytes for a in arrays) + sys.getsizeof(self.index) + 64 * len(self.index)


def _degrees(degrees: _I64) -> dict[str, object]:
    return {
        "max": int(degrees.max()) if len(degrees) else 0,
        "mean": round(float(degrees.mean()), 4) if len(degrees) else 0.0,
        "histogram": degree_histogram(degrees),
        "power_law": None,
    }
