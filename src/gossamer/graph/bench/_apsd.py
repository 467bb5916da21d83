"""GraphBench's dynamic all-pairs shortest distances (APSD) algorithms (SPAWC §5, Figure 5)
and SPAWC's Appendix C.1 insertion sequence (`ausiello_sequence`).

Registered by name (gossamer.graph.bench._api.register_apsd): `floyd-warshall` and `bfs` (the
naive recomputations after every insertion), `ausiello` (Ausiello et al. 1991, iterative),
`algorithm1` (SPAWC's Algorithm 1, one numpy expression over the vertices that reach the new
edge's source), `algorithm2` (Algorithm 1 with Ausiello's pruning applied to columns) and the
batch forms `batch-floyd-warshall` and `batch-bfs`. Distance matrices are numpy int16 below
16383 vertices, int32 above, with a sentinel for "unreachable"; `distances()` converts to
float64 with inf. What each does, which of SPAWC's classes it stands for, and the measurements
behind the representation: docs/graphbench-apsd.md."""

from __future__ import annotations

import time
from typing import Any

import numpy as np
import numpy.typing as npt
import scipy.sparse as sp

from ._api import register_apsd

__all__ = [
    "Algorithm1",
    "Algorithm2",
    "Ausiello",
    "BatchBFS",
    "BatchFloydWarshall",
    "FloydWarshall",
    "NaiveBFS",
    "ausiello_sequence",
]

Matrix = npt.NDArray[np.signedinteger[Any]]
_INF16 = 16383
_INF32 = 2**30 - 1
_CHUNK = 128  # ancestors updated together by Algorithms 1 and 2 (Algorithm1._through_src)
# Algorithm 2 gathers the changed columns only when fewer than nc / _GATHER_BELOW changed, and
# updates whole rows otherwise: a gathered element (np.ix_) costs some 50 contiguous ones.
# Measured (random 1000 vertices / 4000 edges; Appendix C.1 sequence of 900 vertices):
# always gathered 3.10 s / 0.202 s, below nc/16 0.65 / 0.033, below nc/64 0.50 / 0.034,
# never (whole rows, still stopping when no column changed) 0.45 / 0.060 s.
_GATHER_BELOW = 64


def _sentinel(n: int) -> tuple[type[np.int16] | type[np.int32], int]:
    """The distance dtype for n vertices and its "unreachable" value: int16 while every real
    distance (≤ n − 1) stays below the sentinel and sentinel + sentinel fits."""
    return (np.int16, _INF16) if n < _INF16 else (np.int32, _INF32)


def _as_float(d: Matrix, inf: int) -> npt.NDArray[np.float64]:
    out = d.astype(np.float64)
    out[d >= inf] = np.inf
    return out


def _check(n: int, src: int, tgt: int) -> None:
    if not (0 <= src < n and 0 <= tgt < n):
        raise ValueError(f"edge ({src}, {tgt}) outside the graph's vertices 0 … {n - 1}")


class _Recompute:
    """Shared by the naive and batch recomputes: the adjacency (a set of edges) and the
    distance matrix of the last recompute."""

    def __init__(self, n: int) -> None:
        self.n = n
        self._dtype, self._inf = _sentinel(n)
        self._edges: set[tuple[int, int]] = set()
        self._d: Matrix = self._initial()
        self._dirty = False  # (batch: edges came in since the last recompute)

    def _initial(self) -> Matrix:
        d: Matrix = np.full((self.n, self.n), self._inf, dtype=self._dtype)
        np.fill_diagonal(d, 0)
        return d

    def _record(self, src: int, tgt: int) -> bool:
        _check(self.n, src, tgt)
        if src == tgt or (src, tgt) in self._edges:
            return False
        self._edges.add((src, tgt))
        return True

    def _recompute(self) -> None:
        raise NotImplementedError

    def distances(self) -> npt.NDArray[np.float64]:
        return _as_float(self._d, self._inf)


class _Naive(_Recompute):
    """The naive approach (before its recompute in the bases): the whole matrix recomputed
    after every insertion that adds an edge."""

    def add_edge(self, src: int, tgt: int) -> None:
        if self._record(src, tgt):
            self._recompute()

    def flush(self) -> None:
        pass


class _Batch(_Recompute):
    """A batch recompute (before its recompute in the bases): edges recorded, the matrix
    recomputed at `flush()` when edges came in."""

    def add_edge(self, src: int, tgt: int) -> None:
        self._dirty |= self._record(src, tgt)

    def flush(self) -> None:
        if self._dirty:
            self._recompute()
            self._dirty = False


class _FloydWarshallRecompute(_Recompute):
    def _recompute(self) -> None:
        d = self._initial()
        if self._edges:
            arr = np.fromiter(
                (v for e in self._edges for v in e), dtype=np.int64, count=2 * len(self._edges)
            ).reshape(-1, 2)
            d[arr[:, 0], arr[:, 1]] = 1
        for k in range(self.n):
            # Row k and column k do not change in step k (d[k, k] = 0): in place is safe.
            np.minimum(d, d[:, k, None] + d[None, k, :], out=d)
        self._d = d


class _BFSRecompute(_Recompute):
    def _recompute(self) -> None:
        n = self.n
        d = self._initial()
        if self._edges:
            arr = np.array(sorted(self._edges), dtype=np.int64).reshape(-1, 2)
            adj = sp.csr_array(
                (np.ones(len(arr), dtype=np.int8), (arr[:, 0], arr[:, 1])), shape=(n, n)
            )
            seen = np.eye(n, dtype=bool)
            # Row s of the frontier: the vertices at distance `level` from source s.
            frontier = sp.csr_array(sp.eye_array(n, dtype=np.int8, format="csr"))
            level = 0
            while frontier.nnz:
                level += 1
                reached = (frontier @ adj).tocoo()
                rows, cols = reached.row, reached.col
                new = ~seen[rows, cols]
                rows, cols = rows[new], cols[new]
                seen[rows, cols] = True
                d[rows, cols] = level
                frontier = sp.csr_array(
                    (np.ones(len(rows), dtype=np.int8), (rows, cols)), shape=(n, n)
                )
        self._d = d


@register_apsd(
    "floyd-warshall",
    "naive: Floyd–Warshall recomputed after every insertion (numpy, O(n³) per edge)",
    max_n=1000,
)
class FloydWarshall(_Naive, _FloydWarshallRecompute):
    """SPAWC §5.2: the whole distance matrix recomputed by Floyd–Warshall per insertion."""


@register_apsd(
    "bfs",
    "naive: BFS from every vertex recomputed after every insertion (scipy sparse frontiers)",
    max_n=4000,
)
class NaiveBFS(_Naive, _BFSRecompute):
    """SPAWC §5.2 with BFS from every vertex instead of Floyd–Warshall (module docstring)."""


@register_apsd(
    "batch-floyd-warshall",
    "batch: Floyd–Warshall recomputed at each flush (SPAWC's APSPBatchFloydWarshall)",
    batch=True,
    max_n=1000,
)
class BatchFloydWarshall(_Batch, _FloydWarshallRecompute):
    """Edges recorded; Floyd–Warshall recomputed at `flush()` when edges came in."""


@register_apsd(
    "batch-bfs",
    "batch: BFS from every vertex recomputed at each flush",
    batch=True,
    max_n=4000,
)
class BatchBFS(_Batch, _BFSRecompute):
    """Edges recorded; BFS from every vertex recomputed at `flush()` when edges came in."""


@register_apsd(
    "ausiello",
    "Ausiello et al. 1991: DESC/ANC minimal-path trees, FORWARD/BACKWARD, pruned (iterative)",
    max_n=2000,  # ~0.5 kB per reachable pair (module docstring): 2 GB for 2000² of them
)
class Ausiello:
    """Ausiello, Italiano, Marchetti-Spaccamela and Nanni's incremental algorithm for unit
    weights (SPAWC §5.3; module docstring). Per vertex x: `_d[x]` its distances,
    `_forward[x][y]` the parent of y in DESC(x) (−1: y not reached), `_desc[x]` the children
    of each node of DESC(x); `_backward[y][x]` the parent of x in ANC(y) — the vertex after x
    on a minimal path from x to y —, `_anc[y]` the children of each node of ANC(y)."""

    def __init__(self, n: int) -> None:
        self.n = n
        self._inf = n  # any distance is ≤ n − 1
        self._d = [[n] * n for _ in range(n)]
        for x in range(n):
            self._d[x][x] = 0
        self._forward = [[-1] * n for _ in range(n)]
        self._backward = [[-1] * n for _ in range(n)]
        self._desc: list[dict[int, set[int]]] = [{} for _ in range(n)]
        self._anc: list[dict[int, set[int]]] = [{} for _ in range(n)]

    def add_edge(self, i: int, j: int) -> None:
        _check(self.n, i, j)
        d = self._d
        if i == j or d[i][j] == 1:
            return  # a self-loop or an edge already there changes no distance
        dj = d[j]
        forward_j, desc_j = self._forward[j], self._desc[j]
        backward_i, anc_i = self._backward[i], self._anc[i]
        # ANC(i) is walked from its root i; each x carries T, the subtree of DESC(j) (root j)
        # of the vertices whose distance decreased for the vertex before x in ANC(i) (None:
        # all of DESC(j), for i itself). Neither ANC(i) nor DESC(j) changes during the walk:
        # d(x, i) and d(j, y) cannot decrease through the new edge (it would close a cycle).
        stack: list[tuple[int, dict[int, list[int]] | None]] = [(i, None)]
        while stack:
            x, tree = stack.pop()
            dx = d[x]
            through = dx[i] + 1  # d(x, i) + w(i, j)
            if through >= dx[j]:
                continue  # j not closer: nothing below it is, nor for x's ancestors (pruned)
            hop = j if x == i else backward_i[x]
            forward_x, desc_x = self._forward[x], self._desc[x]
            decreased: dict[int, list[int]] = {}
            todo = [j]
            while todo:
                y = todo.pop()
                dx[y] = through + dj[y]
                parent = i if y == j else forward_j[y]
                old = forward_x[y]
                if old != -1:
                    desc_x[old].discard(y)
                forward_x[y] = parent
                desc_x.setdefault(parent, set()).add(y)
                backward_y, anc_y = self._backward[y], self._anc[y]
                old = backward_y[x]
                if old != -1:
                    anc_y[old].discard(x)
                backward_y[x] = hop
                anc_y.setdefault(hop, set()).add(x)
                children = desc_j.get(y, ()) if tree is None else tree.get(y, ())
                kept = [z for z in children if through + dj[z] < dx[z]]
                if kept:
                    decreased[y] = kept
                    todo.extend(kept)
            stack.extend((u, decreased) for u in anc_i.get(x, ()))

    def flush(self) -> None:
        pass

    def distances(self) -> npt.NDArray[np.float64]:
        d = np.array(self._d, dtype=np.float64).reshape(self.n, self.n)
        d[d >= self._inf] = np.inf
        return d


@register_apsd(
    "algorithm1",
    "SPAWC's APSD Algorithm 1 (Figure 8): row src from tgt, then every ancestor through src",
    max_n=12000,
)
class Algorithm1:
    """SPAWC §5.4, Figure 8, on an int16/int32 matrix (module docstring). `node_count` is one
    past the largest vertex inserted so far: rows and columns past it are not touched."""

    def __init__(self, n: int) -> None:
        self.n = n
        self._dtype, self._inf = _sentinel(n)
        self._d: Matrix = np.full((n, n), self._inf, dtype=self._dtype)
        np.fill_diagonal(self._d, 0)
        self._node_count = 0

    def add_edge(self, src: int, tgt: int) -> None:
        _check(self.n, src, tgt)
        d = self._d
        if src == tgt or d[src, tgt] == 1:
            return  # Figure 8 line 2: the edge is there already (or a self-loop)
        nc = self._node_count = max(self._node_count, src + 1, tgt + 1)
        d[src, tgt] = 1
        row = d[src, :nc]
        np.minimum(row, d[tgt, :nc] + 1, out=row)  # lines 10–11
        self._through_src(src, tgt, nc, row)

    def _ancestors(self, src: int, tgt: int, nc: int) -> npt.NDArray[np.intp]:
        """Lines 14–18: every n < node_count, not src nor tgt, with D[n, src] < ∞."""
        reach = self._d[:nc, src] < self._inf
        reach[src] = False
        reach[tgt] = False
        return np.flatnonzero(reach)

    def _through_src(self, src: int, tgt: int, nc: int, row: Matrix) -> None:
        anc = self._ancestors(src, tgt, nc)
        d = self._d
        # Lines 21–22 for _CHUNK ancestors at once: one block of all of them made a temporary
        # of |anc| × nc that was mapped and unmapped per insertion (page faults: 5.5 s for
        # 4000 edges on 1000 vertices, 0.47 s in blocks of 128 rows, 0.85 s of 32).
        for start in range(0, anc.size, _CHUNK):
            rows = anc[start : start + _CHUNK]
            through = d[rows, src, None] + row[None, :]
            np.minimum(through, d[rows, :nc], out=through)
            d[rows, :nc] = through

    def flush(self) -> None:
        pass

    def distances(self) -> npt.NDArray[np.float64]:
        return _as_float(self._d, self._inf)


@register_apsd(
    "algorithm2",
    "Algorithm 1 with Ausiello's pruning: only columns whose D[src, ·] decreased (see docs)",
    max_n=12000,
)
class Algorithm2(Algorithm1):
    """SPAWC's APSPAlgorithm2 is not described in the seed; this is Algorithm 1 with the
    column pruning of Ausiello's algorithm (module docstring)."""

    gather_below = _GATHER_BELOW

    def add_edge(self, src: int, tgt: int) -> None:
        _check(self.n, src, tgt)
        d = self._d
        if src == tgt or d[src, tgt] == 1:
            return
        nc = self._node_count = max(self._node_count, src + 1, tgt + 1)
        row = d[src, :nc]
        via = d[tgt, :nc] + 1  # via[tgt] = 1: D[src, tgt] is among the changed columns
        changed = np.flatnonzero(via < row)
        row[changed] = via[changed]
        if not changed.size:
            return
        if changed.size * self.gather_below < nc:
            anc = self._ancestors(src, tgt, nc)
            to = row[None, changed]
            for start in range(0, anc.size, _CHUNK):  # in blocks, as Algorithm 1
                rows = anc[start : start + _CHUNK]
                block = np.ix_(rows, changed)
                through = d[rows, src, None] + to
                np.minimum(through, d[block], out=through)
                d[block] = through
        else:
            self._through_src(src, tgt, nc, row)


def ausiello_sequence(n: int) -> tuple[int, list[tuple[int, int]]]:
    """SPAWC's Appendix C.1 (after Ausiello et al. 1991, Figure 19): an insertion sequence on
    n vertices forcing Θ(n³) distance updates. With k = n // 3, vertices s_1…s_k (0…k−1),
    x_1…x_k (k…2k−1) and t_1…t_k (2k…3k−1): edges s_i → x_1 for every i, the path
    x_2 → x_3 → … → x_k, x_k → t_i for every i, and then x_1 → x_i for i = 2, 3, …, k in that
    order. Each of those last k − 1 insertions shortens every one of the k² distances
    d(s_a, t_b) by one: (k − 1)·k² = Θ(n³) updates over 4k − 3 edges (SPAWC's a300, a900 and
    a1500 have 397, 1197 and 1997 edges: the same count). Vertices past 3k (n not a multiple
    of 3) are isolated. Returns (n, edges)."""
    if n < 3:
        raise ValueError(f"the Ausiello sequence needs at least 3 vertices, not {n}")
    k = n // 3
    s = range(k)
    x = [k + a for a in range(k)]
    t = range(2 * k, 3 * k)
    edges = [(si, x[0]) for si in s]
    edges += [(x[a], x[a + 1]) for a in range(1, k - 1)]
    edges += [(x[k - 1], ti) for ti in t]
    edges += [(x[0], x[a]) for a in range(1, k)]
    return n, edges


def _representation_timing(n: int = 1500, m: int = 6000, seed: int = 1) -> None:
    """Print Algorithm 1's time on one random graph with int16, int32 and float64 matrices
    (the measurement the module docstring quotes)."""
    rng = np.random.default_rng(seed)
    edges = [(int(a), int(b)) for a, b in rng.integers(0, n, size=(m, 2))]
    for dtype, inf in ((np.int16, _INF16), (np.int32, _INF32), (np.float64, np.inf)):
        alg = Algorithm1(n)
        alg._d = np.full((n, n), inf, dtype=dtype)
        np.fill_diagonal(alg._d, 0)
        alg._inf = inf  # type: ignore[assignment]
        start = time.perf_counter()
        for a, b in edges:
            alg.add_edge(a, b)
        print(f"{np.dtype(dtype).name} {time.perf_counter() - start:.2f} s")
