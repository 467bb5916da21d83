"""Distance statistics of a directed, unweighted graph: exact when small, estimated when large.

Only ordered pairs u ≠ v with v reachable from u count. `distance_statistics` gives the
average distance, the effective diameter (the interpolated 90th percentile), the diameter
and the distance distribution. Up to `exact_limit` nodes everything is exact (BFS from every
node). Above it the figures are HyperBall's estimates with standard errors (a delete-a-group
jackknife over the registers; Woodruff's for the percentile), and the diameter is given as
bounds that hold with certainty: a multi-sweep BFS below, the strongly connected components'
condensation above. Definitions, methods and how to read the errors: docs/graph.md,
"Distances: exact and estimated"."""

from __future__ import annotations

import math
import time
from typing import Any, Final

import numpy as np
import numpy.typing as npt
import scipy.sparse as sp
from scipy.sparse import csgraph

_hyperball: Any
try:
    from . import _hyperball
except ImportError:  # not built (no C compiler at install): test_hyperball_compiled.py fails
    _hyperball = None
#: whether `hyperball` runs the compiled iteration (graph/_hyperball.pyx)
COMPILED: Final = _hyperball is not None

__all__ = [
    "COMPILED",
    "bfs_depths",
    "distance_statistics",
    "eccentricity",
    "hyperball",
    "hyperball_reference",
]

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]

PERCENTILE = 0.9
# Rows of the n x n distance matrix computed at once by the exact method: 256 rows x 2,000
# columns of float64 is 4 MB.
_EXACT_CHUNK_ROWS = 256
# HyperBall's default registers per counter: 64 (p = 6, counters' rsd 13 %) up to 5M edges,
# 32 (p = 5, rsd 18 %) above, where the registers are what a run costs: on 1M nodes / 10.5M
# edges the whole call took 7.9 CPU seconds at p = 5 against 12.3 at p = 6 (bench/README.md),
# the average distance's standard error 0.09 against 0.08 (on 7.5).
_P6_EDGES = 5_000_000
# Out-lists up to this long are gathered a column at a time (a call per column: 8,000 calls
# an iteration if every width up to 4,096 were done so); longer ones, of the few nodes with
# hundreds of links, in one 3-D gather of at most _GATHER_BYTES.
_COLUMNS_ONE_BY_ONE = 32
_GATHER_BYTES = 64 << 20
# Counters re-estimated at once (their register pairs as float32): 64k x 32 x 4 bytes = 8 MB
# at m = 64.
_ROW_CHUNK = 1 << 16


def _structure(adj: Any) -> tuple[int, IntArray, IntArray]:
    """n, indptr and indices of a square sparse adjacency (values ignored, explicit zeros too
    count as arcs: the structure is the graph)."""
    if not sp.issparse(adj):
        raise TypeError(f"adjacency must be a scipy.sparse matrix, not {type(adj).__name__}")
    rows, cols = adj.shape
    if rows != cols:
        raise ValueError(f"adjacency must be square, not {rows}x{cols}")
    csr = sp.csr_array(adj)
    return rows, csr.indptr.astype(np.int64), csr.indices.astype(np.int64)


def _unit_csr(n: int, indptr: IntArray, indices: IntArray) -> sp.csr_array:
    data = np.ones(len(indices), dtype=np.float64)
    return sp.csr_array((data, indices, indptr), shape=(n, n))


# ---------------------------------------------------------------------------------------------
# Shared: figures from a distance distribution


def _figures(dist: FloatArray) -> tuple[float | None, float | None]:
    """Average distance and interpolated effective diameter of a distribution (entry t: pairs
    at distance t, entry 0 ignored)."""
    counts = np.asarray(dist, dtype=np.float64).copy()
    if len(counts) == 0:
        return None, None
    counts[0] = 0.0
    counts = np.maximum(counts, 0.0)
    total = float(counts.sum())
    if total <= 0.0:
        return None, None
    t = np.arange(len(counts), dtype=np.float64)
    average = float((t * counts).sum() / total)
    cumulative = np.cumsum(counts) / total
    reach = int(np.searchsorted(cumulative, PERCENTILE - 1e-12, side="left"))
    reach = min(reach, len(counts) - 1)
    before = float(cumulative[reach - 1]) if reach > 0 else 0.0
    step = float(cumulative[reach]) - before
    effective = (reach - 1) + ((PERCENTILE - before) / step if step > 0 else 1.0)
    return average, float(effective)


# ---------------------------------------------------------------------------------------------
# Exact: BFS from every node


def _exact(n: int, indptr: IntArray, indices: IntArray) -> dict[str, object]:
    graph = _unit_csr(n, indptr, indices)
    counts = np.zeros(1, dtype=np.int64)
    for start in range(0, n, _EXACT_CHUNK_ROWS):
        rows = np.arange(start, min(n, start + _EXACT_CHUNK_ROWS))
        matrix = csgraph.shortest_path(graph, method="D", unweighted=True, indices=rows)
        finite = matrix[np.isfinite(matrix)].astype(np.int64)
        chunk = np.bincount(finite)
        if len(chunk) > len(counts):
            counts = np.pad(counts, (0, len(chunk) - len(counts)))
        counts[: len(chunk)] += chunk
    counts[0] = 0  # d(u, u): not a pair
    nonzero = np.flatnonzero(counts)
    diameter = int(nonzero[-1]) if len(nonzero) else 0
    distribution = counts[: diameter + 1]
    average, effective = _figures(distribution.astype(np.float64))
    keys = ["average_distance", "effective_diameter", "diameter", "distance_distribution"]
    return {
        "average_distance": average,
        "effective_diameter": effective,
        "diameter": diameter,
        "distance_distribution": [int(c) for c in distribution],
        "reachable_pairs": int(distribution.sum()),
        "exact": {k: True for k in [*keys, "reachable_pairs"]},
        "method": {k: "bfs-all" for k in [*keys, "reachable_pairs"]},
        "error": {},
    }


# ---------------------------------------------------------------------------------------------
# BFS (scipy's, in C) for the diameter bounds


def eccentricity(graph: sp.csr_array, source: int) -> tuple[int, int]:
    """The largest finite distance from `source` along `graph`'s arcs and a node at that
    distance. scipy's BFS (C) lists nodes by non-decreasing distance, so its last node is a
    farthest one and its predecessor chain's length is the eccentricity: measured 0.15 s on
    10M edges, against 2 s for a numpy frontier BFS."""
    order, predecessors = csgraph.breadth_first_order(
        graph, source, directed=True, return_predecessors=True
    )
    far = int(order[-1])
    steps, node = 0, far
    while node != source:
        node = int(predecessors[node])
        steps += 1
    return steps, far


def _sweep_lower_bound(
    n: int, forward: sp.csr_array, backward: sp.csr_array, sweeps: int, rng: np.random.Generator
) -> tuple[int, int]:
    """Multi-sweep: from each start, BFS forward, backward, forward, backward, each from the
    farthest node of the previous one; the starts are the node of largest out-degree, then
    random nodes. Returns the largest eccentricity seen (a distance that exists, so a lower
    bound on the diameter) and the number of BFS."""
    if n == 0:
        return 0, 0
    out_degree = np.diff(forward.indptr)
    starts = [int(np.argmax(out_degree)), *(int(x) for x in rng.integers(0, n, size=sweeps - 1))]
    best = 0
    done = 0
    for source in starts:
        node = source
        for graph in (forward, backward, forward, backward):
            far, node = eccentricity(graph, node)
            done += 1
            if far == 0:
                break
            best = max(best, far)
    return best, done


def bfs_depths(graph: sp.csr_array, source: int) -> IntArray:
    """Every node's distance from `source` (-1: unreachable): scipy's BFS tree, its depths by
    pointer jumping (log2 of the eccentricity passes over the reached nodes)."""
    order, predecessors = csgraph.breadth_first_order(
        graph, source, directed=True, return_predecessors=True
    )
    n = graph.shape[0]
    depth = np.full(n, -1, dtype=np.int64)
    jump = np.where(predecessors < 0, source, predecessors).astype(np.int64)
    hops = np.ones(n, dtype=np.int64)
    hops[source] = 0
    reached = order.astype(np.int64)
    while True:
        ahead = jump[reached]
        if (ahead == source).all():
            break
        # hops[v] += hops[jump[v]], jump[v] = jump[jump[v]], synchronously
        hops[reached], jump[reached] = hops[reached] + hops[ahead], jump[ahead]
    depth[reached] = hops[reached]
    return depth


def _scc_upper_bound(
    n: int, forward: sp.csr_array, backward: sp.csr_array, bfs_scc_min: int
) -> int:
    """A sound upper bound on the largest finite distance (see the module's docstring)."""
    count, labels = csgraph.connected_components(forward, directed=True, connection="strong")
    labels = labels.astype(np.int64)
    sizes = np.bincount(labels, minlength=count)
    weight = sizes - 1  # a shortest path inside C visits each of its nodes at most once
    largest = int(np.argmax(sizes)) if count else -1
    for comp in np.flatnonzero(sizes >= bfs_scc_min):
        members = np.flatnonzero(labels == comp)
        # one root, the node with the most in-links; the bound depends on the root (on
        # cnr-2000's largest SCC: 34 + 59 from it, 34 + 61 from the one with the most
        # out-links, 86 to 97 from others)
        if comp == largest:
            # distances between nodes of one SCC are the same in the whole graph, so BFS
            # there and keep the members' depths: no subgraph to cut out (1 s on 1M nodes)
            in_degree = np.diff(backward.indptr)[members]
            root = int(members[np.argmax(in_degree)])
            through = int(bfs_depths(forward, root)[members].max()) + int(
                bfs_depths(backward, root)[members].max()
            )
        else:
            inside = sp.csr_array(forward[members][:, members])
            reverse = sp.csr_array(inside.T)
            root = int(np.argmax(np.diff(reverse.indptr)))
            through = eccentricity(inside, root)[0] + eccentricity(reverse, root)[0]
        weight[comp] = min(int(weight[comp]), through)
    # the condensation DAG, its arcs tail -> head between different components
    src = np.repeat(np.arange(n, dtype=np.int64), np.diff(forward.indptr))
    tail, head = labels[src], labels[forward.indices]
    keep = tail != head
    arcs = np.unique(tail[keep] * count + head[keep])
    tail, head = arcs // count, arcs % count  # sorted by tail
    dag_indptr = np.concatenate([[0], np.cumsum(np.bincount(tail, minlength=count))])
    # longest path (component weights + 1 per arc) level by level in Kahn's topological order
    indegree = np.bincount(head, minlength=count)
    longest = weight.astype(np.int64)  # the longest path ending at each component
    frontier = np.flatnonzero(indegree == 0)
    while len(frontier):
        starts = dag_indptr[frontier]
        lengths = dag_indptr[frontier + 1] - starts
        total = int(lengths.sum())
        if total == 0:
            break
        # arcs starts[i] .. starts[i] + lengths[i] - 1 of every frontier component
        arc = np.repeat(starts - np.cumsum(lengths) + lengths, lengths) + np.arange(total)
        heads = head[arc]
        np.maximum.at(longest, heads, np.repeat(longest[frontier], lengths) + 1 + weight[heads])
        np.subtract.at(indegree, heads, 1)
        reached = heads[indegree[heads] == 0]
        frontier = np.flatnonzero(np.bincount(reached, minlength=count))
    return int(longest.max()) if count else 0


# ---------------------------------------------------------------------------------------------
# HyperBall


def _splitmix64(x: npt.NDArray[np.uint64]) -> npt.NDArray[np.uint64]:
    with np.errstate(over="ignore"):
        z = x + np.uint64(0x9E3779B97F4A7C15)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return z ^ (z >> np.uint64(31))


def _salt(seed: int) -> np.uint64:
    """The hash's salt for `seed` (the same in the numpy and the compiled counters)."""
    with np.errstate(over="ignore"):
        salt: np.uint64 = _splitmix64(np.array([seed], dtype=np.uint64))[0]
    return salt


def _initial_registers(n: int, p: int, seed: int) -> npt.NDArray[np.uint8]:
    """Each node's counter holding the node itself: register = low p bits of a seeded 64-bit
    hash, value = 1 + trailing zeros of the remaining bits."""
    m = 1 << p
    with np.errstate(over="ignore"):
        h = _splitmix64(np.arange(n, dtype=np.uint64) ^ _salt(seed))
    bucket = (h & np.uint64(m - 1)).astype(np.int64)
    rest = h >> np.uint64(p)
    with np.errstate(over="ignore"):
        lowest = rest & (~rest + np.uint64(1))  # the lowest set bit
    zeros = np.where(rest == 0, 64 - p, np.log2(np.maximum(lowest, 1).astype(np.float64)))
    registers = np.zeros((n, m), dtype=np.uint8)
    registers[np.arange(n), bucket] = (zeros + 1).astype(np.uint8)
    return registers


def _alpha(m: int) -> float:
    return {16: 0.673, 32: 0.697, 64: 0.709}.get(m, 0.7213 / (1 + 1.079 / m))


class _Estimator:
    """The HLL estimate of a block of counters, with every register and with each group of
    registers left out (column 0: all, column 1 + g: without group g; group g is the g-th run
    of m/groups consecutive registers)."""

    def __init__(self, m: int, groups: int) -> None:
        self.m, self.groups = m, groups
        self.sizes = np.array([m] + [m - m // groups] * groups, dtype=np.float64)
        self.alpha = np.array([_alpha(int(s)) for s in self.sizes])
        # HLL's raw estimate: alpha m^2 / sum 2^-M; linear counting at or below 2.5 m
        self.scale32 = (self.alpha * self.sizes**2).astype(np.float32)
        self.small32 = (2.5 * self.sizes).astype(np.float32)
        # two registers at a time (a uint16 view): one lookup gives 2**-a + 2**-b, another the
        # count of empty ones; measured 2x faster than a lookup per register. float32: 2**-k is
        # exact and a sum of at most 2**16 of them loses < 1e-7 relative.
        low, high = np.arange(1 << 16) & 0xFF, np.arange(1 << 16) >> 8
        self.pair_powers = (np.ldexp(1.0, -low) + np.ldexp(1.0, -high)).astype(np.float32)
        self.pair_zeros = ((low == 0).astype(np.int8) + (high == 0)).astype(np.int8)
        # linear counting's estimate s log(s / z) of each column for z = 1..m empty registers
        # (a table, so that the compiled estimate gives the same bits; z = 0: never used)
        empty = np.maximum(np.arange(m + 1, dtype=np.float64), 1.0)
        sizes = self.sizes[:, None]
        self.linear32 = (sizes * np.log(sizes / empty[None, :])).astype(np.float32)
        self.bound = 2.5 * self.sizes

    def kernel_tables(self) -> tuple[Any, ...]:
        """The compiled `estimate`'s arguments after its four first (graph/_hyperball.pyx)."""
        return (self.groups, self.pair_powers, self.pair_zeros, self.scale32, self.bound,
                self.linear32)  # fmt: skip

    def __call__(self, registers: npt.NDArray[np.uint8]) -> npt.NDArray[np.float32]:
        rows = registers.shape[0]
        pairs = np.ascontiguousarray(registers).view(np.uint16)
        blocks = pairs.reshape(rows, self.groups, self.m // (2 * self.groups))
        powers = np.take(self.pair_powers, blocks)
        # the group sums by adding slices: a reduction over a short last axis is ~5x slower
        group_sums = powers[:, :, 0].copy()
        for k in range(1, powers.shape[2]):
            group_sums += powers[:, :, k]
        # float32 throughout (2x faster than float64 here, measured): the estimates are kept
        # as float32 and summed in float64. Every sum is added in a stated order (group by
        # group, as the compiled estimate in graph/_hyperball.pyx adds them), not by
        # `sum(axis=1)`, whose order is numpy's to choose
        sums = np.empty((rows, self.groups + 1), dtype=np.float32)
        total = sums[:, 0]
        total[:] = group_sums[:, 0]
        for g in range(1, self.groups):
            total += group_sums[:, g]
        np.subtract(sums[:, :1], group_sums, out=sums[:, 1:])
        estimates = np.divide(self.scale32, sums, out=sums)
        # small range: linear counting where the raw estimate is <= 2.5 m and a register is
        # empty (only those rows pay for counting empty registers)
        small = np.flatnonzero((estimates <= self.small32).any(axis=1))
        if len(small):
            group_zeros = np.take(self.pair_zeros, blocks[small]).sum(axis=2, dtype=np.int64)
            zeros = np.empty((len(small), self.groups + 1), dtype=np.int64)
            zeros[:, 0] = group_zeros.sum(axis=1)
            zeros[:, 1:] = zeros[:, :1] - group_zeros
            linear = self.linear32[np.arange(self.groups + 1)[None, :], zeros]
            use = (estimates[small] <= self.bound) & (zeros > 0)
            estimates[small] = np.where(use, linear, estimates[small])
        return estimates

    def estimate(self, registers: npt.NDArray[np.uint8]) -> npt.NDArray[np.float32]:
        """Per-row estimates, (rows, groups + 1), in bounded blocks."""
        out = np.empty((registers.shape[0], self.groups + 1), dtype=np.float32)
        for start in range(0, registers.shape[0], _ROW_CHUNK):
            out[start : start + _ROW_CHUNK] = self(registers[start : start + _ROW_CHUNK])
        return out


def _padded_rows(n: int, indptr: IntArray, indices: IntArray) -> list[tuple[IntArray, Any]]:
    """The out-lists as dense blocks: the nodes of the same out-degree w (above
    _COLUMNS_ONE_BY_ONE: rounded up to a power of two), with their out-neighbours as a
    (w, nodes) int32 matrix (column i: node i's list) padded with n (a counter that stays
    empty). A register-wise max over every node's out-neighbours is then w gathers (`np.take`,
    a row copy each) and w in-place maxima of contiguous (nodes, m) arrays. Measured on 1M
    nodes x 8 neighbours x 64 registers: 0.05 s, against 0.16 s for one gather of
    (nodes, 8, 64) and a halving max, 1.2 s for `np.maximum.reduceat` over edges sorted by
    source, 1.7 s for `np.maximum.at`. The padding at most doubles the gathered edges of the
    few long lists."""
    degree = np.diff(indptr)
    nonempty = np.flatnonzero(degree)
    # exact widths up to _COLUMNS_ONE_BY_ONE (most nodes: no padding), powers of two above
    width = np.where(
        degree[nonempty] <= _COLUMNS_ONE_BY_ONE,
        degree[nonempty],
        np.left_shift(1, np.ceil(np.log2(np.maximum(degree[nonempty], 1))).astype(np.int64)),
    )
    blocks = []
    for w in np.unique(width):
        rows = nonempty[width == w]
        slots = indptr[rows][None, :] + np.arange(w, dtype=np.int64)[:, None]
        valid = slots < indptr[rows + 1][None, :]
        matrix = np.where(valid, indices[np.minimum(slots, len(indices) - 1)], n)
        blocks.append((rows, matrix.astype(np.int32)))
    return blocks


def _halving_max(gathered: npt.NDArray[np.uint8]) -> npt.NDArray[np.uint8]:
    """The max over axis 1 (a power of two long) by halving: element-wise maxima over long
    contiguous runs, measured 2x faster than `gathered.max(axis=1)`, whose inner loop is one
    counter's m registers."""
    width = gathered.shape[1]
    while width > 1:
        width //= 2
        gathered = np.maximum(gathered[:, :width], gathered[:, width : 2 * width])
    return gathered[:, 0]


def _registers(p: int, groups: int) -> int:
    """The registers of a counter (2**p), checked to form `groups` groups of pairs."""
    m = 1 << p
    if m < 2 * groups or m % (2 * groups):
        raise ValueError(f"2**p = {m} registers cannot form {groups} groups of pairs")
    return m


def hyperball_reference(
    n: int,
    indptr: IntArray,
    indices: IntArray,
    *,
    p: int = 6,
    seed: int = 0,
    groups: int = 16,
) -> tuple[FloatArray, int]:
    """`hyperball` in numpy: the definition the compiled one is tested against
    (tests/graph/test_hyperball_compiled.py), and what runs where it is not built. The memory
    figure counts the padded out-lists instead of the compiled iteration's lists."""
    m = _registers(p, groups)
    estimator = _Estimator(m, groups)
    # row n: the empty counter the padding points to
    registers = np.zeros((n + 1, m), dtype=np.uint8)
    registers[:n] = _initial_registers(n, p, seed)
    # float32: 4 bytes a node and group (68 MB at 1M nodes, 16 groups); sums in float64
    estimates = estimator.estimate(registers[:n])
    totals = [estimates.sum(axis=0, dtype=np.float64)]
    blocks = _padded_rows(n, indptr, indices)
    memory = registers.nbytes * 2 + estimates.nbytes + sum(b[1].nbytes for b in blocks)
    changed = np.ones(n + 1, dtype=bool)
    changed[n] = False
    while True:
        # a counter can change only if one of its out-neighbours' did at the last iteration
        seen = np.concatenate([[0], np.cumsum(changed[indices], dtype=np.int32)])
        active = seen[indptr[1:]] > seen[indptr[:-1]]
        moved_rows, moved_values = [], []
        for rows, matrix in blocks:
            pick = np.flatnonzero(active[rows])
            if len(pick) == 0:
                continue
            rows_now = rows[pick]
            old = np.take(registers, rows_now, axis=0)
            merged = old.copy()
            if len(matrix) <= _COLUMNS_ONE_BY_ONE:
                for column in matrix:
                    np.maximum(merged, np.take(registers, column[pick], axis=0), out=merged)
            else:  # few nodes with long lists: one (nodes, w, m) gather per chunk of nodes
                lists = matrix[:, pick].T
                step = max(1, _GATHER_BYTES // (len(matrix) * m))
                for start in range(0, len(pick), step):
                    gathered = np.take(registers, lists[start : start + step], axis=0)
                    np.maximum(
                        merged[start : start + step],
                        _halving_max(gathered),
                        out=merged[start : start + step],
                    )
            # compare 8 registers at a time
            moved = (merged.view(np.uint64) != old.view(np.uint64)).any(axis=1)
            if moved.any():
                moved_rows.append(rows_now[moved])
                moved_values.append(merged[moved])
        if not moved_rows:
            break
        # in node order, as the compiled iteration lists them: the totals' float64 sums add
        # the same numbers in the same order
        rows_moved = np.concatenate(moved_rows)
        order = np.argsort(rows_moved, kind="stable")
        rows_moved = rows_moved[order]
        registers[rows_moved] = np.concatenate(moved_values)[order]  # synchronous: after all reads
        changed = np.zeros(n + 1, dtype=bool)
        changed[rows_moved] = True
        new_estimates = estimator.estimate(np.take(registers, rows_moved, axis=0))
        _add_changes(totals, estimates, rows_moved, new_estimates)
    return np.array(totals), int(memory)


def _add_changes(
    totals: list[FloatArray],
    estimates: npt.NDArray[np.float32],
    rows: IntArray,
    new_estimates: npt.NDArray[np.float32],
) -> None:
    """N(t) from N(t - 1) and the changed counters' new estimates (in node order): their
    changes (float32) added one after the other in float64, as the compiled estimate adds
    them (a cumulative sum is sequential; `sum` is pairwise)."""
    change = np.zeros(estimates.shape[1], dtype=np.float64)
    for start in range(0, len(rows), _ROW_CHUNK):
        part = rows[start : start + _ROW_CHUNK]
        steps = np.empty((len(part) + 1, len(change)), dtype=np.float64)
        steps[0] = change
        steps[1:] = new_estimates[start : start + _ROW_CHUNK] - estimates[part]
        change = np.cumsum(steps, axis=0)[-1]
    totals.append(totals[-1] + change)
    estimates[rows] = new_estimates


def hyperball(
    n: int,
    indptr: IntArray,
    indices: IntArray,
    *,
    p: int = 6,
    seed: int = 0,
    groups: int = 16,
) -> tuple[FloatArray, int]:
    """One HyperBall run: N(t) for t = 0, 1, ... until no counter changes, as an array
    (T, groups + 1) (column 0 with every register, column 1 + g without group g); and the
    memory of the counters, their estimates and the iteration's lists in bytes. Compiled
    (graph/_hyperball.pyx); `hyperball_reference` (numpy) when it is not built, with the same
    registers at every iteration and the same N(t) to the bit."""
    if _hyperball is None:
        return hyperball_reference(n, indptr, indices, p=p, seed=seed, groups=groups)
    m = _registers(p, groups)
    indptr = np.ascontiguousarray(indptr, dtype=np.int64)
    indices = np.ascontiguousarray(indices, dtype=np.int64)
    # the kernel reads rows by these numbers unchecked: check them once
    if len(indptr) != n + 1 or indptr[0] != 0 or indptr[-1] != len(indices):
        raise ValueError("indptr must have n + 1 entries, from 0 to len(indices)")
    if np.any(np.diff(indptr) < 0) or (
        len(indices) and not 0 <= indices.min() <= indices.max() < n
    ):
        raise ValueError("indptr must not decrease and every index must be in [0, n)")
    estimator = _Estimator(m, groups)
    tables = estimator.kernel_tables()
    # row n: the empty counter no node reads (the reference's padding); scratch: the new rows
    registers = np.empty((n + 1, m), dtype=np.uint8)
    _hyperball.initial(registers, p, int(_salt(seed)))
    scratch = np.empty_like(registers)
    estimates = np.zeros((n, groups + 1), dtype=np.float32)
    change = np.empty(groups + 1, dtype=np.float64)
    _hyperball.estimate(registers, np.arange(n, dtype=np.int64), estimates, change, *tables)
    totals = [estimates.sum(axis=0, dtype=np.float64)]
    changed = np.ones(n + 1, dtype=np.uint8)
    changed[n] = 0
    moved = np.empty(n, dtype=np.int64)
    memory = registers.nbytes * 2 + estimates.nbytes + changed.nbytes + moved.nbytes
    while True:
        count = _hyperball.iterate(registers, scratch, indptr, indices, changed, moved)
        if count == 0:
            break
        # the changed counters' estimates in place, and the sum of their changes
        _hyperball.estimate(registers, moved[:count], estimates, change, *tables)
        totals.append(totals[-1] + change)
    return np.array(totals), int(memory)


def _fraction_within(function: FloatArray, at: float) -> float:
    """F(at): the fraction of the pairs (u != v) within distance `at`, linear between integer
    distances, from a neighbourhood function N(0), N(1), ..."""
    pairs = function - function[0]
    total = float(pairs[-1])
    if total <= 0:
        return 0.0
    return float(np.interp(at, np.arange(len(pairs)), pairs / total))


def _jackknife_variance(values: list[float]) -> float:
    """Delete-a-group jackknife: (g - 1)/g times the sum of squared deviations."""
    arr = np.array(values, dtype=np.float64)
    return float((len(arr) - 1) / len(arr) * ((arr - arr.mean()) ** 2).sum())


def _estimated(
    n: int, indptr: IntArray, indices: IntArray, *, p: int, runs: int, seed: int, groups: int
) -> dict[str, object]:
    m = 1 << p
    rsd = 1.04 / math.sqrt(m)
    averages, effectives, pairs = [], [], []
    average_vars, effective_vars = [], []
    functions = []
    memory = 0
    for run in range(runs):
        neighbourhood, memory = hyperball(n, indptr, indices, p=p, seed=seed + run, groups=groups)
        full = neighbourhood[:, 0]
        functions.append(full)
        pairs.append(float(full[-1] - full[0]))
        average, effective = _figures(np.diff(full, prepend=full[0]))
        if average is None or effective is None:
            continue
        averages.append(average)
        effectives.append(effective)
        # the average distance is a smooth function of the N(t): jackknife it directly
        left_out = [neighbourhood[:, 1 + g] for g in range(groups)]
        left_out_averages = [_figures(np.diff(f, prepend=f[0]))[0] for f in left_out]
        # a graph so small that leaving a group out loses every pair has no jackknife error
        average_vars.append(
            _jackknife_variance([a for a in left_out_averages if a is not None])
            if None not in left_out_averages
            else math.nan
        )
        # a percentile is not smooth (the jackknife fails on quantiles): jackknife F at the
        # estimate instead and divide by F's slope there (Woodruff's interval, delta method)
        reach = min(math.floor(effective) + 1, len(full) - 1)
        slope = _fraction_within(full, reach) - _fraction_within(full, reach - 1)
        spread = _jackknife_variance([_fraction_within(f, effective) for f in left_out])
        effective_vars.append(spread / slope**2 if slope > 0 else math.nan)
    length = max(len(f) for f in functions)
    padded = np.array([np.pad(f, (0, length - len(f)), mode="edge") for f in functions])
    function = padded.mean(axis=0)
    distribution = np.diff(function, prepend=function[0])
    label = f"hyperball(p={p}, m={m}, runs={runs}, seed={seed})"

    def combine(values: list[float], variances: list[float]) -> tuple[float | None, float | None]:
        if not values:
            return None, None
        se = math.sqrt(float(np.mean(variances)) / len(values))
        return float(np.mean(values)), (se if math.isfinite(se) else None)

    average, average_se = combine(averages, average_vars)
    effective, effective_se = combine(effectives, effective_vars)
    reachable = float(np.mean(pairs))
    # N(t)'s relative standard deviation is bounded by a counter's (HyperANF, Theorem 1)
    reachable_se = rsd * reachable / math.sqrt(runs)
    return {
        "average_distance": average,
        "effective_diameter": effective,
        "distance_distribution": [float(c) for c in distribution],
        "neighbourhood_function": [float(c) for c in function],
        "reachable_pairs": reachable,
        "iterations": length - 1,
        "counter_bytes": memory,
        "exact": {
            "average_distance": False,
            "effective_diameter": False,
            "distance_distribution": False,
            "reachable_pairs": False,
        },
        "method": {
            "average_distance": label,
            "effective_diameter": label,
            "distance_distribution": label,
            "reachable_pairs": label,
        },
        "error": {
            "counter_relative_standard_deviation": rsd,
            "neighbourhood_function_relative_standard_deviation_bound": rsd,
            "average_distance_standard_error": average_se,
            "effective_diameter_standard_error": effective_se,
            "reachable_pairs_standard_error": reachable_se,
            "standard_error_method": (
                f"average distance: delete-a-group jackknife over {groups} register groups; "
                "effective diameter: the jackknife of F at it over F's slope (Woodruff); "
                "reachable pairs: the counters' relative standard deviation (HyperANF Thm. 1)"
            ),
        },
    }


# ---------------------------------------------------------------------------------------------


def distance_statistics(
    adj: Any,
    *,
    exact_limit: int = 2000,
    seed: int = 0,
    p: int | None = None,
    runs: int = 1,
    groups: int = 16,
    sweeps: int = 2,
    upper_bound: bool = True,
    bfs_scc_min: int = 64,
) -> dict[str, object]:
    """Distance statistics of the directed graph whose CSR adjacency is `adj` (n x n; row i
    lists i's out-neighbours; values ignored). See the module's docstring for what each key
    means. Exact (BFS from every node) when n ≤ `exact_limit`; above, HyperBall with 2**p
    registers per counter (by default 64 up to 5M edges, 32 above) and `runs` runs, seeded by
    `seed` (the same input and arguments give the same figures); the diameter bounded by
    `sweeps` multi-sweeps (lower) and, when `upper_bound`, the SCC condensation (upper)."""
    started = time.perf_counter()
    n, indptr, indices = _structure(adj)
    if p is None:
        p = 6 if len(indices) <= _P6_EDGES else 5
    if exact_limit < 0 or runs < 1 or sweeps < 1 or not 5 <= p <= 16:
        raise ValueError("need exact_limit >= 0, runs >= 1, sweeps >= 1 and 5 <= p <= 16")
    if n <= exact_limit:
        result = _exact(n, indptr, indices)
        result["nodes"] = n
        result["seconds"] = {"total": time.perf_counter() - started}
        return result
    result = _estimated(n, indptr, indices, p=p, runs=runs, seed=seed, groups=groups)
    estimated = time.perf_counter()
    forward = _unit_csr(n, indptr, indices)
    backward = sp.csr_array(forward.T)
    lower, bfs_count = _sweep_lower_bound(n, forward, backward, sweeps, np.random.default_rng(seed))
    swept = time.perf_counter()
    exact = result["exact"]
    method = result["method"]
    assert isinstance(exact, dict) and isinstance(method, dict)
    result["diameter_lower_bound"] = lower
    exact["diameter_lower_bound"] = False
    method["diameter_lower_bound"] = f"multi-sweep BFS ({bfs_count} BFS)"
    seconds = {"hyperball": estimated - started, "lower_bound": swept - estimated}
    if upper_bound:
        result["diameter_upper_bound"] = _scc_upper_bound(n, forward, backward, bfs_scc_min)
        exact["diameter_upper_bound"] = False
        method["diameter_upper_bound"] = (
            f"SCC condensation: longest DAG path, components' internal diameters bounded by "
            f"BFS from one root (components of >= {bfs_scc_min} nodes) or size - 1"
        )
        seconds["upper_bound"] = time.perf_counter() - swept
    seconds["total"] = time.perf_counter() - started
    result["nodes"] = n
    result["seconds"] = seconds
    return result
