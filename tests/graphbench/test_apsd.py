"""GraphBench's APSD algorithms (gossamer.graph.bench._apsd) validated against scipy's
distances on generated insertion sequences: every registered algorithm, 20 graphs of each kind,
intermediate answers too; a broken algorithm is caught by the same check."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import pytest

from gossamer.graph.bench import APSD, APSDAlgorithm, apsd_named, names, reference_distances
from gossamer.graph.bench._apsd import (
    Algorithm1,
    Algorithm2,
    Ausiello,
    Matrix,
    _sentinel,
    ausiello_sequence,
)

Edges = list[tuple[int, int]]
Graph = tuple[int, Edges]
GRAPHS_PER_KIND = 20
THRESHOLDS = (1, 2, 5, 13, 1000)  # batch thresholds, one per graph in turn


def check_apsd(
    make: Callable[[int], APSDAlgorithm],
    n: int,
    edges: Sequence[tuple[int, int]],
    *,
    threshold: int | None = None,
    checks: int = 4,
) -> None:
    """Feed `edges` to `make(n)` as the harness does (`flush()` every `threshold` insertions
    when batching, and at the end) and compare `distances()` with scipy's after about
    `checks` evenly spaced prefixes and after the last edge. AssertionError on a difference."""
    alg = make(n)
    every = max(1, len(edges) // checks) if checks else len(edges) + 1
    for k, (src, tgt) in enumerate(edges, 1):
        alg.add_edge(src, tgt)
        flushed = threshold is None or k % threshold == 0
        if threshold is not None and flushed:
            alg.flush()
        if flushed and k % every == 0 and k < len(edges):
            _compare(alg, n, edges[:k])
    alg.flush()
    _compare(alg, n, edges)


def _compare(alg: APSDAlgorithm, n: int, prefix: Sequence[tuple[int, int]]) -> None:
    got = alg.distances()
    want = reference_distances(n, prefix)
    assert got.dtype == np.float64 and got.shape == (n, n)
    if not np.array_equal(got, want):
        bad = np.argwhere(got != want)[0]
        u, v = int(bad[0]), int(bad[1])
        raise AssertionError(
            f"d({u}, {v}) = {got[u, v]}, expected {want[u, v]} after {len(prefix)} edges "
            f"of {n} vertices: {list(prefix)}"
        )


def _pairs(rng: np.random.Generator, n: int, m: int) -> Edges:
    return [(int(a), int(b)) for a, b in rng.integers(0, n, size=(m, 2))]


def random_sparse(rng: np.random.Generator) -> Graph:
    n = int(rng.integers(2, 61))
    return n, _pairs(rng, n, int(rng.integers(n // 2, 2 * n + 1)))


def random_dense(rng: np.random.Generator) -> Graph:
    n = int(rng.integers(2, 21))
    edges = [(u, v) for u in range(n) for v in range(n) if u != v and rng.random() < 0.6]
    order = rng.permutation(len(edges))
    return n, [edges[i] for i in order]


def complete(rng: np.random.Generator) -> Graph:
    n = int(rng.integers(1, 13))
    edges = [(u, v) for u in range(n) for v in range(n) if u != v]
    order = rng.permutation(len(edges))
    return n, [edges[i] for i in order]


def path_back_to_front(rng: np.random.Generator) -> Graph:
    """0 → 1 → … → n−1 inserted from its end: the edge k → k+1 gives k a distance to every
    vertex after it; then the closing edge n−1 → 0 makes every pair reachable — Θ(n²)
    distance updates over n edges."""
    n = int(rng.integers(2, 61))
    return n, [(k, k + 1) for k in range(n - 2, -1, -1)] + [(n - 1, 0)]


def ausiello(rng: np.random.Generator) -> Graph:
    return ausiello_sequence(int(rng.integers(3, 61)))


def odd(rng: np.random.Generator) -> Graph:
    """Self-loops, repeated edges, and isolated vertices past the largest id in the edges."""
    used = int(rng.integers(1, 25))
    n = used + int(rng.integers(1, 6))
    edges = _pairs(rng, used, int(rng.integers(used, 3 * used + 1)))
    edges += [(v, v) for v in rng.integers(0, used, size=3).tolist()]
    edges += [edges[i] for i in rng.integers(0, len(edges), size=len(edges) // 2).tolist()]
    order = rng.permutation(len(edges))
    return n, [edges[i] for i in order]


KINDS: dict[str, Callable[[np.random.Generator], Graph]] = {
    "random-sparse": random_sparse,
    "random-dense": random_dense,
    "complete": complete,
    "path-back-to-front": path_back_to_front,
    "ausiello-cubic": ausiello,
    "loops-repeats-isolated": odd,
}
EXPECTED = {
    "floyd-warshall",
    "bfs",
    "ausiello",
    "algorithm1",
    "algorithm2",
    "batch-floyd-warshall",
    "batch-bfs",
}


def test_every_apsd_algorithm_is_registered_with_its_kind() -> None:
    assert set(names("apsd")) >= EXPECTED
    for name in EXPECTED:
        info, make = apsd_named(name)
        assert info.name == name and info.summary
        assert info.batch == name.startswith("batch-")
        assert isinstance(make(3), APSDAlgorithm)


@pytest.mark.parametrize("kind", list(KINDS))
@pytest.mark.parametrize("name", sorted(APSD))
def test_algorithm_validates_on_generated_graphs(name: str, kind: str) -> None:
    info, make = apsd_named(name)
    rng = np.random.default_rng([sorted(APSD).index(name), list(KINDS).index(kind)])
    for index in range(GRAPHS_PER_KIND):
        n, edges = KINDS[kind](rng)
        threshold = THRESHOLDS[index % len(THRESHOLDS)] if info.batch else None
        check_apsd(make, n, edges, threshold=threshold)


class AlwaysGathers(Algorithm2):
    gather_below = 10**9  # the pruned (gathered columns) update on every insertion


class NeverGathers(Algorithm2):
    gather_below = 0  # whole rows, as Algorithm 1, after the early stop


@pytest.mark.parametrize("variant", [AlwaysGathers, NeverGathers])
def test_both_updates_of_algorithm2(variant: Callable[[int], APSDAlgorithm]) -> None:
    # The graphs above (n ≤ 60) never have fewer than nc / 64 changed columns.
    rng = np.random.default_rng(5)
    for kind in KINDS.values():
        for _ in range(GRAPHS_PER_KIND // 2):
            check_apsd(variant, *kind(rng))


@pytest.mark.parametrize("name", sorted(APSD))
def test_every_intermediate_answer_of_a_singular_algorithm(name: str) -> None:
    info, make = apsd_named(name)
    if info.batch:
        # A batch algorithm answers after a flush: every insertion checked is threshold 1.
        check_apsd(make, *path_back_to_front(np.random.default_rng(3)), threshold=1, checks=60)
        return
    rng = np.random.default_rng(7)
    for kind in ("random-sparse", "path-back-to-front", "loops-repeats-isolated"):
        n, edges = KINDS[kind](rng)
        check_apsd(make, n, edges, checks=len(edges))


class SkipsAncestors(Algorithm1):
    """Algorithm 1 without lines 14–22: only row src is updated."""

    def _through_src(self, src: int, tgt: int, nc: int, row: Matrix) -> None:
        pass


class ForgetsTheNewEdgeForAncestors(Algorithm2):
    """Algorithm 2 writing D[src, tgt] = 1 before looking for changed columns (a bug this
    module had): ancestors of src never learn their distance to tgt itself."""

    def add_edge(self, src: int, tgt: int) -> None:
        d = self._d
        if src == tgt or d[src, tgt] == 1:
            return
        nc = self._node_count = max(self._node_count, src + 1, tgt + 1)
        d[src, tgt] = 1  # the bug: column tgt is no longer seen as changed
        row = d[src, :nc]
        via = d[tgt, :nc] + 1
        changed = np.flatnonzero(via < row)
        row[changed] = via[changed]
        anc = self._ancestors(src, tgt, nc)
        block = np.ix_(anc, changed)
        d[block] = np.minimum(d[block], d[anc, src, None] + row[None, changed])


@pytest.mark.parametrize("broken", [SkipsAncestors, ForgetsTheNewEdgeForAncestors])
def test_a_broken_algorithm_is_caught(broken: Callable[[int], APSDAlgorithm]) -> None:
    caught = 0
    rng = np.random.default_rng(11)
    for _ in range(GRAPHS_PER_KIND):
        n, edges = random_sparse(rng)
        try:
            check_apsd(broken, n, edges)
        except AssertionError as exc:
            assert "expected" in str(exc)
            caught += 1
    assert caught >= GRAPHS_PER_KIND // 2
    with pytest.raises(AssertionError, match="expected"):
        check_apsd(broken, 4, [(0, 1), (1, 2), (2, 3)])  # 0 must learn d(0, 2)


def test_ausiello_sequence_forces_cubic_updates() -> None:
    for n, edge_count in ((300, 397), (900, 1197), (1500, 1997)):  # SPAWC's a300, a900, a1500
        got_n, edges = ausiello_sequence(n)
        assert got_n == n and len(edges) == edge_count and len(set(edges)) == edge_count
    n, edges = ausiello_sequence(32)  # k = 10, vertex 30 and 31 isolated
    k = 10
    sources, sinks = np.arange(k), np.arange(2 * k, 3 * k)
    shortcuts = k - 1
    before = reference_distances(n, edges[:-shortcuts])[np.ix_(sources, sinks)]
    assert np.all(before == np.inf)  # s_i → x_1 does not yet lead into the path
    previous = reference_distances(n, edges[: -shortcuts + 1])[np.ix_(sources, sinks)]
    assert np.all(previous == k + 1)  # s → x_1 → x_2 → … → x_k → t
    for cut in range(-shortcuts + 2, 1):
        now = reference_distances(n, edges[: len(edges) + cut])[np.ix_(sources, sinks)]
        assert np.all(now == previous - 1)  # each shortcut x_1 → x_i shortens all k² pairs
        previous = now
    assert np.all(reference_distances(n, edges)[30:, :30] == np.inf)
    with pytest.raises(ValueError, match="at least 3"):
        ausiello_sequence(2)


@pytest.mark.parametrize("name", sorted(APSD))
def test_empty_graph_and_an_edge_outside_the_vertices(name: str) -> None:
    _, make = apsd_named(name)
    alg = make(0)
    alg.flush()
    assert alg.distances().shape == (0, 0)
    alg = make(3)
    with pytest.raises(ValueError, match="outside"):
        alg.add_edge(0, 3)
    alg.flush()
    np.testing.assert_array_equal(alg.distances(), reference_distances(3, []))


def test_distance_matrix_type_and_sentinel() -> None:
    assert _sentinel(16382) == (np.int16, 16383)
    assert _sentinel(16383)[0] is np.int32
    for dtype, inf in (_sentinel(10), _sentinel(20000)):
        # a min-plus step adds two sentinels: it must not wrap around
        assert int(np.iinfo(dtype).max) >= 2 * inf


def test_ausiello_keeps_its_minimal_path_trees() -> None:
    """After each graph, DESC(x) and ANC(y) are minimal-path trees: FORWARD[x][y] is a vertex
    one step closer to x with an edge to y, BACKWARD[y][x] one with an edge from x one step
    closer to y, and the children sets are exactly the inverse of those pointers."""
    rng = np.random.default_rng(13)
    for kind in KINDS.values():
        for _ in range(5):
            n, edges = kind(rng)
            alg = Ausiello(n)
            for src, tgt in edges:
                alg.add_edge(src, tgt)
            d = alg._d
            for x in range(n):
                desc_children: dict[int, set[int]] = {}
                for y in range(n):
                    if x == y or d[x][y] >= n:
                        assert alg._forward[x][y] == -1 and alg._backward[y][x] == -1
                        continue
                    p = alg._forward[x][y]
                    assert d[x][p] + 1 == d[x][y] and d[p][y] == 1
                    desc_children.setdefault(p, set()).add(y)
                    h = alg._backward[y][x]
                    assert d[h][y] + 1 == d[x][y] and d[x][h] == 1
                assert {k: v for k, v in alg._desc[x].items() if v} == desc_children
            for y in range(n):
                want: dict[int, set[int]] = {}
                for x in range(n):
                    h = alg._backward[y][x]
                    if h != -1:
                        want.setdefault(h, set()).add(x)
                assert {k: v for k, v in alg._anc[y].items() if v} == want
