"""GraphBench's dynamic strongly connected components algorithms (SPAWC section 6, Figures 10
and 13, Figure 5's SCCAlgorithmFactory list), each registered by name with `register_scc`:
`naive` (Warshall's closure from scratch), `tarjan` (from scratch), `yellin` (incremental
closure), `algorithm1-b` (Figure 13 on numpy rows of b-bit blocks), `algorithm2` and
`algorithm3` (Figure 13 on Python-int rows, touching only the rows that gain bits).

Self-loops change nothing and a repeated edge is one edge; components are labelled by one
member's id (`canonical` renumbers them). Why numpy for some and Python integers or plain
Python for others, and their measurements: docs/graphbench/scc-algorithms.md."""

from __future__ import annotations

import functools
from collections.abc import Iterator
from typing import Any

import numpy as np
import numpy.typing as npt

from ._api import Labels, register_scc

__all__ = [
    "Algorithm1",
    "Algorithm2",
    "Algorithm3",
    "NaiveClosure",
    "RecomputedTarjan",
    "Yellin",
]

# The largest n each dense structure is meant for: a bool n × n matrix (naive: 16 MB at 4000,
# and O(n³) per insertion makes anything larger pointless), an n × n bit matrix (Algorithm 1:
# 200 MB at 40 000), two of them as Python ints (Algorithm 2: rows and columns).
_NAIVE_MAX_N = 4_000
_BITMATRIX_MAX_N = 40_000
_BITMATRIX2_MAX_N = 28_000
# Yellin keeps a count, a descendant and an ancestor entry per pair of the closure: 538 MB at
# n = 2000 on 4000 random edges (closure nearly full; `bench/bench_scc.py --only memory`).
_YELLIN_MAX_N = 2_000


def _check(n: int, src: int, tgt: int) -> None:
    if not (0 <= src < n and 0 <= tgt < n):
        raise ValueError(f"edge ({src}, {tgt}) outside the graph's vertices 0 … {n - 1}")


def _bits(x: int) -> list[int]:
    """The positions of the set bits of x (≥ 0), lowest first. Up to 32 set bits, peeled off
    one at a time (each peel is a C loop over x's digits); beyond that, x's bytes unpacked by
    numpy in one pass, whose fixed cost (a few µs) peeling pays after a few dozen bits
    (`.venv/bin/python bench/bench_scc.py --only rows`, "set bits of a 4000-bit int")."""
    if x.bit_count() <= 32:
        out = []
        while x:
            low = x & -x
            out.append(low.bit_length() - 1)
            x ^= low
        return out
    raw = np.frombuffer(x.to_bytes((x.bit_length() + 7) // 8, "little"), dtype=np.uint8)
    positions: list[int] = np.flatnonzero(np.unpackbits(raw, bitorder="little")).tolist()
    return positions


@register_scc(
    "naive",
    "transitive closure recomputed by Warshall's algorithm (numpy booleans) after every "
    "insertion, then every pair (i, j) with T[i][j] and T[j][i] merged (SPAWC Figure 10)",
    max_n=_NAIVE_MAX_N,
)
class NaiveClosure:
    """SCC NAIVE ADD EDGE (Figure 10): the edge is added to the adjacency matrix, the closure T
    recomputed from it by Warshall's algorithm (the boolean Floyd–Warshall: for each k, row i
    gains row k where T[i][k]; n numpy steps of n × n each, O(n³) per insertion), then the
    components read from T ∧ Tᵀ: every pair that reaches each other is merged (vectorised:
    each vertex takes the smallest id it is mutually reachable with, O(n²))."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.adjacency = np.eye(n, dtype=np.bool_)
        self.labels: Labels = np.arange(n, dtype=np.int64)

    def add_edge(self, src: int, tgt: int) -> None:
        _check(self.n, src, tgt)
        self.adjacency[src, tgt] = True
        closure = self.adjacency.copy()
        for k in range(self.n):
            # i reaches j through k: rows that reach k gain row k (Warshall's update)
            closure |= closure[:, k : k + 1] & closure[k]
        mutual = closure & closure.T
        self.labels = np.argmax(mutual, axis=1).astype(np.int64)

    def flush(self) -> None:
        pass

    def components(self) -> Labels:
        return self.labels.copy()


@register_scc(
    "tarjan",
    "Tarjan's algorithm recomputed from scratch after every insertion (iterative, pure Python "
    "over adjacency lists: O(n + m) Python steps per insertion)",
)
class RecomputedTarjan:
    """SCCTarjan: the graph as adjacency lists (a set per vertex drops repeated edges), and
    after every insertion Tarjan's one-pass DFS with lowlinks, written iteratively (an explicit
    stack of (vertex, iterator over its successors)) so deep graphs do not hit Python's
    recursion limit. Pure Python on purpose: its cost is Tarjan's O(n + m) steps, not a C
    library's (scipy's connected_components is the reference the others are checked against)."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.successors: list[set[int]] = [set() for _ in range(n)]
        self.labels: Labels = np.arange(n, dtype=np.int64)

    def add_edge(self, src: int, tgt: int) -> None:
        _check(self.n, src, tgt)
        self.successors[src].add(tgt)
        self.labels = np.asarray(self._tarjan(), dtype=np.int64)

    def _tarjan(self) -> list[int]:
        n = self.n
        successors = self.successors
        index = [-1] * n
        low = [0] * n
        on_stack = [False] * n
        label = [0] * n
        stack: list[int] = []
        counter = 0
        for root in range(n):
            if index[root] >= 0:
                continue
            index[root] = low[root] = counter
            counter += 1
            stack.append(root)
            on_stack[root] = True
            work: list[tuple[int, Iterator[int]]] = [(root, iter(successors[root]))]
            while work:
                v, it = work[-1]
                for w in it:
                    if index[w] < 0:
                        index[w] = low[w] = counter
                        counter += 1
                        stack.append(w)
                        on_stack[w] = True
                        work.append((w, iter(successors[w])))
                        break
                    if on_stack[w] and index[w] < low[v]:
                        low[v] = index[w]
                else:
                    work.pop()
                    if work:
                        parent = work[-1][0]
                        if low[v] < low[parent]:
                            low[parent] = low[v]
                    if low[v] == index[v]:
                        while True:
                            w = stack.pop()
                            on_stack[w] = False
                            label[w] = v
                            if w == v:
                                break
        return label

    def flush(self) -> None:
        pass

    def components(self) -> Labels:
        return self.labels.copy()


@register_scc(
    "yellin",
    "Yellin's (1993) incremental transitive closure with reference counts, O(d · m*) over a "
    "sequence; the component of src read from its descendants ∩ ancestors after an insertion",
    max_n=_YELLIN_MAX_N,
)
class Yellin:
    """Yellin, "Speeding up dynamic transitive closure for bounded degree graphs" (Acta
    Informatica 30, 1993), insertions only. For every pair (x, y) it keeps
    `count[x][y]` = the number of edges (z, y) with z reachable from x (x itself included):
    y is reachable from x exactly when the count is positive (or y = x). Inserting (a, b) adds 1
    to count[x][b] for every x reaching a; a pair whose count becomes positive is new, and
    each new pair (x, y) adds 1 to count[x][c] for the d out-edges (y, c) of y, so each pair of
    the final closure m* is paid for once, by d increments: O(d · m*) over the whole sequence.
    (The counts are what lets Yellin delete edges too; insertions alone would need only the
    sets, and the counts are kept so the work done is Yellin's.)

    The variant in SPAWC's GraphBench "was not fully working"; this one is checked against
    scipy in tests/graphbench/test_scc.py. Components: an insertion (a, b) can only create a
    cycle through a, so when b reaches a afterwards, the component of a becomes
    descendants(a) ∩ ancestors(a) (a set intersection) and every member takes a's label."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.successors: list[set[int]] = [set() for _ in range(n)]
        self.count: list[dict[int, int]] = [{} for _ in range(n)]
        self.descendants: list[set[int]] = [{v} for v in range(n)]
        self.ancestors: list[set[int]] = [{v} for v in range(n)]
        self.labels = list(range(n))

    def add_edge(self, src: int, tgt: int) -> None:
        _check(self.n, src, tgt)
        if tgt in self.successors[src]:
            return  # a repeated edge: the counts already hold it
        self.successors[src].add(tgt)
        successors = self.successors
        for x in list(self.ancestors[src]):
            count = self.count[x]
            descendants = self.descendants[x]
            pending = [tgt]
            while pending:
                y = pending.pop()
                seen = count.get(y, 0)
                count[y] = seen + 1
                if seen == 0 and y not in descendants:
                    descendants.add(y)
                    self.ancestors[y].add(x)
                    pending.extend(successors[y])
        if src in self.descendants[tgt] and self.labels[src] != self.labels[tgt]:
            label = self.labels[src]
            for v in self.descendants[src] & self.ancestors[src]:
                self.labels[v] = label

    def flush(self) -> None:
        pass

    def components(self) -> Labels:
        return np.asarray(self.labels, dtype=np.int64)


_BLOCK_TYPES: dict[int, type[np.unsignedinteger[Any]]] = {
    8: np.uint8,
    16: np.uint16,
    32: np.uint32,
    64: np.uint64,
}


class Algorithm1:
    """SCC ALGORITHM1 ADD EDGE (SPAWC Figure 13): the transitive closure T as a bit matrix,
    row u holding the vertices u reaches (u included), each row ⌈n/b⌉ blocks of b bits
    (`block_bits` b = 8/16/32/64: numpy uint8/16/32/64). As in the figure, `size` is one past
    the largest vertex seen so far and only the first ⌈size/b⌉ blocks of a row are touched.

    Per insertion (src, tgt): set T[src][tgt], OR the blocks of row tgt into row src (lines
    11–12), merge src and tgt when tgt reaches src (line 15); then every predecessor n of src
    (T[n][src]: one block read per row, line 22) ORs the blocks of row src into its own (lines
    25–26) and is merged with src when src reaches it (line 29). O(size · ⌈size/b⌉) block
    operations per insertion, the figure's O(n³/b) over a sequence; MERGE COMPONENTS is O(n).

    How the block width shows in the work: T is stored block-major, `blocks[i, v]` = block i
    of row v, and lines 25–26 for all predecessors are one numpy call,
    `blocks[:nb, preds] |= blocks[:nb, src]`: a gather/OR/scatter along the last axis, which
    numpy runs one element — one b-bit block — at a time. So the call does ⌈size/b⌉ · |preds|
    block operations and 8-bit blocks cost up to 8 times 64-bit ones, as SPAWC's C loop did
    (its Figure 14). Measured with `.venv/bin/python bench/bench_scc.py --only rows`: n = 4000,
    one row OR-ed into all 4000 rows: 2.0–2.6 ms with uint8, 1.2–1.4 ms uint16, 0.6–0.8 ms
    uint32, 0.3–0.5 ms uint64. Stored row-major instead (`T[preds] |= T[src]`, whole
    contiguous rows), numpy copies rows with memcpy and ORs them with SIMD whatever the element
    type: 0.17–0.3 ms for the 16-, 32- and 64-bit widths alike — faster, but the block width
    would no longer mean anything, so it is not what Algorithm 1 measures."""

    def __init__(self, n: int, block_bits: int = 64) -> None:
        self.n = n
        self.block_bits = block_bits
        dtype = _BLOCK_TYPES[block_bits]
        self.blocks = np.zeros((-(-n // block_bits), n), dtype=dtype)
        self.masks = np.ones(block_bits, dtype=dtype) << np.arange(block_bits, dtype=dtype)
        vertices = np.arange(n)
        self.blocks[vertices // block_bits, vertices] |= self.masks[vertices % block_bits]
        self.size = 0
        self.labels: Labels = np.arange(n, dtype=np.int64)

    def _row_bits(self, row: int, nb: int) -> npt.NDArray[np.bool_]:
        """Row `row` of T as booleans (little-endian bytes of its blocks: bit i of block w is
        vertex w·b + i)."""
        raw = np.ascontiguousarray(self.blocks[:nb, row]).view(np.uint8)
        return np.unpackbits(raw, bitorder="little").astype(np.bool_)

    def add_edge(self, src: int, tgt: int) -> None:
        _check(self.n, src, tgt)
        if src == tgt:
            return
        b = self.block_bits
        blocks = self.blocks
        self.size = size = max(self.size, src + 1, tgt + 1)
        nb = -(-size // b)
        blocks[tgt // b, src] |= self.masks[tgt % b]
        blocks[:nb, src] |= blocks[:nb, tgt]  # lines 11-12
        if blocks[src // b, tgt] & self.masks[src % b]:  # line 15
            self._merge_pair(src, tgt)
        # lines 19-22: the predecessors of src, bit src of each row (block src // b)
        preds = np.flatnonzero(blocks[src // b, :size] & self.masks[src % b])
        preds = preds[(preds != src) & (preds != tgt)]
        if preds.size == 0:
            return
        blocks[:nb, preds] |= blocks[:nb, src, None]  # lines 25-26, every predecessor at once
        self._merge_predecessors(src, preds, nb)

    def _merge_pair(self, src: int, tgt: int) -> None:
        """Line 16: src and tgt reach each other; their components merge (relabel, O(n))."""
        old = self.labels[tgt]
        self.labels[self.labels == old] = self.labels[src]

    def _merge_predecessors(self, src: int, preds: npt.NDArray[np.intp], nb: int) -> None:
        """Lines 29-30: a predecessor that src reaches merges with src. Every vertex of their
        components is such a predecessor, so relabelling them all is the merge."""
        reached = preds[self._row_bits(src, nb)[preds]]
        if reached.size:
            self.labels[reached] = self.labels[src]

    def flush(self) -> None:
        pass

    def components(self) -> Labels:
        return self.labels.copy()


# One registration per block width; the factory is a functools.partial of the class (not a
# closure) so that it pickles, should a harness hand it to a child process.
for _block_bits in (8, 16, 32, 64):
    register_scc(
        f"algorithm1-{_block_bits}",
        f"SPAWC's Algorithm 1 (Figure 13): bit-matrix transitive closure, rows of "
        f"{_block_bits}-bit blocks (numpy), predecessors' rows OR-ed, components merged when "
        "both ways reachable",
        max_n=_BITMATRIX_MAX_N,
    )(functools.partial(Algorithm1, block_bits=_block_bits))


@register_scc(
    "algorithm2",
    "SPAWC's Algorithm 2 (its crawler's): Algorithm 1 on Python-int rows and columns; an edge "
    "already implied costs O(1), only rows that gain bits are OR-ed",
    max_n=_BITMATRIX2_MAX_N,
)
class Algorithm2:
    """SCCAlgorithm2_64, "similar to Algorithm 1" with implementation-specific optimisations
    (SPAWC does not print them; these are gossamer's choices):

    - rows *and* columns of T as Python ints (arbitrary-length bitsets: `|`, `&` run in C over
      the integer's digits, so OR-ing a row is the 64-bit-block loop of Algorithm 1 without a
      numpy call per insertion). The column of src, `ancestors[src]`, gives the predecessors
      at once instead of reading one block per row (Figure 13 line 22 scans every row).
    - an edge whose target src already reaches adds nothing: O(1), no row read.
    - of the predecessors of src, only those not already reaching tgt gain bits (a row that
      holds tgt already holds everything tgt reaches), and only the vertices src newly reaches
      gain ancestors: work is proportional to the rows and columns that change, each O(n/64)
      words. The worst case stays Algorithm 1's O(n²/64) per insertion, twice the memory.
    - components: when tgt reaches src, the new component of src is
      descendants(src) ∩ ancestors(src), one AND; its members take src's label."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.descendants = [1 << v for v in range(n)]
        self.ancestors = [1 << v for v in range(n)]
        self.labels = list(range(n))

    def add_edge(self, src: int, tgt: int) -> None:
        _check(self.n, src, tgt)
        descendants = self.descendants
        if descendants[src] >> tgt & 1:
            return  # src reaches tgt already (self-loops and repeated edges included)
        ancestors = self.ancestors
        gained = descendants[tgt] & ~descendants[src]  # what src (and its ancestors) may gain
        updated = ancestors[src] & ~ancestors[tgt]  # the rows that do not hold tgt yet
        for x in _bits(updated):
            descendants[x] |= gained
        for y in _bits(gained):
            ancestors[y] |= updated
        if descendants[tgt] >> src & 1:
            label = self.labels[src]
            for v in _bits(descendants[src] & ancestors[src]):
                self.labels[v] = label

    def flush(self) -> None:
        pass

    def components(self) -> Labels:
        return np.asarray(self.labels, dtype=np.int64)


@register_scc(
    "algorithm3",
    "SPAWC's Algorithm 3: Algorithm 2 with less memory: one Python-int row per component "
    "(a merged component's other rows freed at once), no columns; predecessors scanned",
    max_n=_BITMATRIX_MAX_N,
)
class Algorithm3:
    """SCCAlgorithm3_64: "uses slightly less memory than Algorithm 2 but … frees memory more
    often" (SPAWC section 6.3, nothing more is said). gossamer's reading:

    - no column bitsets (half Algorithm 2's memory): the predecessors are found as in Figure 13,
      by reading bit src of every row (line 22), so that scan is back;
    - one row per component instead of one per vertex (all members of a component reach the
      same vertices): when components merge, the rows of all but the representative are
      freed at that moment, so the matrix shrinks as the graph condenses — memory freed "more
      often", and the predecessor scan runs over components, not vertices;
    - a row is a Python int, as long as its highest set bit: it grows lazily and a vertex that
      reaches nothing costs one small int;
    - an edge already implied (tgt's bit set in src's component row) costs O(1), as in
      Algorithm 2.
    Components: `rep[v]` is v's representative; a merge points the members at src's."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.rep = list(range(n))
        self.rows: dict[int, int] = {v: 1 << v for v in range(n)}
        self.members: dict[int, list[int]] = {}

    def add_edge(self, src: int, tgt: int) -> None:
        _check(self.n, src, tgt)
        rep = self.rep
        rows = self.rows
        s, t = rep[src], rep[tgt]
        row_src = rows[s]
        if row_src >> tgt & 1:
            return  # already implied (self-loops, repeated edges, same component)
        row_src |= rows[t]
        rows[s] = row_src
        src_bit = 1 << src
        tgt_bit = 1 << tgt
        cycle = 0  # the representatives src reaches that reach src: one component with s
        for r, row in rows.items():
            if r != s and row & src_bit and not row & tgt_bit:
                rows[r] = row | row_src
                if row_src >> r & 1:
                    cycle |= 1 << r
        if rows[t] & src_bit:
            cycle |= 1 << t
        if cycle:
            self._merge(s, cycle)

    def _merge(self, s: int, others: int) -> None:
        members = self.members.setdefault(s, [s])
        for r in _bits(others):
            if r == s:
                continue
            del self.rows[r]  # the freed row: s's row is the component's
            for v in self.members.pop(r, [r]):
                self.rep[v] = s
                members.append(v)

    def flush(self) -> None:
        pass

    def components(self) -> Labels:
        return np.asarray(self.rep, dtype=np.int64)
