"""Ranking the pages of a graph: PageRank by power iteration on the CSR adjacency, and the
top-k pages by PageRank and by in-degree.

PageRank is networkx's (`networkx.pagerank` with its defaults, no personalisation, every
edge of weight 1): x ← α (xᵀP + Σ_{dangling} x / n) + (1 − α) / n, with α = 0.85, P the
adjacency with each row divided by its out-degree, and the mass of the dangling nodes (no
out-edge) spread uniformly over every node. The iteration stops when the L1 change of x is
below `tol` (1e-9 by default, not scaled by n as networkx's `n · tol`: at a million nodes
that is 1, met at once), so every value is within α/(1 − α) · tol ≈ 6e-9 (L1, all nodes
together) of the fixed point. docs/graph.md, "Ranking"."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any, Final, overload

import numpy as np
import numpy.typing as npt
import scipy.sparse as sp

__all__ = ["DAMPING", "TOLERANCE", "PageRank", "UrlLookup", "pagerank", "top_pages"]

DAMPING: Final = 0.85
TOLERANCE: Final = 1e-9  # the L1 change of x at which the iteration stops
MAX_ITERATIONS: Final = 1000
TOP_K: Final = 10


class PageRank:
    """PageRank's vector `values` (sums to 1), the `iterations` it took and its `seconds`."""

    __slots__ = ("iterations", "seconds", "values")

    def __init__(self, values: npt.NDArray[np.float64], iterations: int, seconds: float) -> None:
        self.values, self.iterations, self.seconds = values, iterations, seconds


def pagerank(
    adj: sp.csr_array | sp.csr_matrix,
    *,
    alpha: float = DAMPING,
    tol: float = TOLERANCE,
    max_iter: int = MAX_ITERATIONS,
) -> PageRank:
    """PageRank of the graph whose n × n CSR adjacency is `adj` (row i: i's out-neighbours;
    values ignored, a repeated entry counts once as `adjacency` merges them). Raises
    RuntimeError when `max_iter` iterations do not reach `tol` (as networkx does)."""
    started = time.perf_counter()
    n = int(adj.shape[0])
    if n == 0:
        return PageRank(np.empty(0), 0, 0.0)
    out_degree = np.diff(adj.indptr)
    dangling = out_degree == 0
    inverse = np.zeros(n)
    np.divide(1.0, out_degree, out=inverse, where=~dangling)
    # the in-links as a CSR (a gather per node beats the scatter of a CSC product), float64
    # ones so that scipy's product converts nothing per iteration
    transposed = sp.csr_array(
        (np.ones(len(adj.indices)), adj.indices, adj.indptr), shape=adj.shape, copy=False
    ).T.tocsr()
    x = np.full(n, 1.0 / n)
    teleport = (1.0 - alpha) / n
    for iteration in range(1, max_iter + 1):
        spread = alpha * float(x[dangling].sum()) / n + teleport
        new = transposed @ (x * inverse)
        new *= alpha
        new += spread
        change = float(np.abs(new - x).sum())
        x = new
        if change < tol:
            return PageRank(x, iteration, time.perf_counter() - started)
    raise RuntimeError(f"PageRank did not converge in {max_iter} iterations (tol {tol})")


class UrlLookup(Sequence[str | None]):
    """The URL of node i, looked up from the node ids and an id → URL map when asked (only
    the top pages' are): no list of every URL built at each refresh of a live graph."""

    def __init__(self, ids: npt.NDArray[np.int64], urls: Mapping[int, str]) -> None:
        self._ids, self._urls = ids, urls

    def __len__(self) -> int:
        return len(self._ids)

    @overload
    def __getitem__(self, i: int) -> str | None: ...
    @overload
    def __getitem__(self, i: slice) -> Sequence[str | None]: ...
    def __getitem__(self, i: int | slice) -> str | Sequence[str | None] | None:
        if isinstance(i, slice):
            return [self._urls.get(int(x)) for x in self._ids[i]]
        return self._urls.get(int(self._ids[i]))


def _top(score: npt.NDArray[Any], tie: npt.NDArray[Any], k: int) -> npt.NDArray[np.int64]:
    """The indices of the k largest `score`, ties broken by the larger `tie`, then the lower
    index."""
    n = len(score)
    if n > 4 * k:  # a partition first: the candidates are the k largest scores and their ties
        threshold = np.partition(score, n - k)[n - k]
        candidates = np.flatnonzero(score >= threshold)
    else:
        candidates = np.arange(n)
    order = np.lexsort((candidates, -tie[candidates], -score[candidates]))
    return candidates[order[:k]].astype(np.int64)


def top_pages(
    rank: npt.NDArray[np.float64],
    in_degree: npt.NDArray[Any],
    out_degree: npt.NDArray[Any],
    *,
    ids: Sequence[Any] | npt.NDArray[Any] | None = None,
    urls: Sequence[str | None] | None = None,
    k: int = TOP_K,
) -> dict[str, list[dict[str, object]]]:
    """`top_pages` (the k pages of highest PageRank, ties by in-degree) and
    `top_pages_by_in_degree` (ties by PageRank), each page `{"url", "id", "pagerank",
    "in_degree", "out_degree"}`: `url` None without `urls`, `id` the node's original id as
    text (its index without `ids`)."""

    def page(i: int) -> dict[str, object]:
        return {
            "url": urls[i] if urls is not None else None,
            "id": str(ids[i]) if ids is not None else str(i),
            "pagerank": float(rank[i]),
            "in_degree": int(in_degree[i]),
            "out_degree": int(out_degree[i]),
        }

    by_rank = _top(rank, in_degree, k).tolist()
    by_degree = _top(in_degree, rank, k).tolist()
    return {
        "top_pages": [page(i) for i in by_rank],
        "top_pages_by_in_degree": [page(i) for i in by_degree],
    }
