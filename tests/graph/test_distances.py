"""Distance statistics: exact against networkx, HyperBall within its stated error, sound
diameter bounds, and cnr-2000 against an exact BFS from a sample of sources."""

from __future__ import annotations

import gzip
import math
import time
from pathlib import Path
from typing import Any

import networkx as nx
import numpy as np
import pytest
import scipy.sparse as sp
from scipy.sparse import csgraph

from gossamer.graph._distances import bfs_depths, distance_statistics, eccentricity
from graph_helpers import graph_stats_json

CNR = Path(__file__).resolve().parents[1] / "data" / "graphs" / "cnr-2000.edges.tsv.gz"


def adjacency(graph: nx.DiGraph) -> sp.csr_array:
    n = graph.number_of_nodes()
    return sp.csr_array(nx.to_scipy_sparse_array(graph, nodelist=range(n), format="csr"))


def reference(graph: nx.DiGraph) -> dict[str, Any]:
    """The figures from networkx's all-pairs BFS, computed here without the module's code."""
    distances = sorted(
        d
        for u, lengths in nx.all_pairs_shortest_path_length(graph)
        for v, d in lengths.items()
        if u != v
    )
    if not distances:
        return {"pairs": 0, "average": None, "effective": None, "diameter": 0, "counts": [0]}
    counts = [0] * (distances[-1] + 1)
    for d in distances:
        counts[d] += 1
    total = len(distances)
    # the interpolated 90th percentile: the smallest t with F(t) >= 0.9, then linear from t - 1
    t = next(t for t in range(len(counts)) if sum(counts[: t + 1]) / total >= 0.9)
    below = sum(counts[:t]) / total
    effective = (t - 1) + (0.9 - below) / (counts[t] / total)
    return {
        "pairs": total,
        "average": sum(distances) / total,
        "effective": effective,
        "diameter": distances[-1],
        "counts": counts,
    }


def small_graphs() -> list[tuple[str, nx.DiGraph]]:
    graphs: list[tuple[str, nx.DiGraph]] = [
        ("single node", nx.empty_graph(1, create_using=nx.DiGraph)),
        ("no edges", nx.empty_graph(6, create_using=nx.DiGraph)),
        ("cycle", nx.cycle_graph(7, create_using=nx.DiGraph)),
        ("path", nx.path_graph(6, create_using=nx.DiGraph)),
        (
            "two components",
            nx.disjoint_union(nx.cycle_graph(4, nx.DiGraph), nx.path_graph(5, nx.DiGraph)),
        ),
    ]
    loops = nx.path_graph(4, create_using=nx.DiGraph)
    loops.add_edge(2, 2)
    graphs.append(("self-loop", loops))
    for seed, (n, p) in enumerate([(20, 0.05), (40, 0.03), (60, 0.1), (120, 0.012), (150, 0.02)]):
        graphs.append((f"gnp({n}, {p})", nx.gnp_random_graph(n, p, seed=seed, directed=True)))
    return graphs


@pytest.mark.parametrize(("name", "graph"), small_graphs(), ids=[g[0] for g in small_graphs()])
def test_exact_equals_networkx(name: str, graph: nx.DiGraph) -> None:
    stats = distance_statistics(adjacency(graph))
    want = reference(graph)
    assert stats["distance_distribution"] == want["counts"], name
    assert stats["reachable_pairs"] == want["pairs"]
    assert stats["diameter"] == want["diameter"]
    if want["average"] is None:
        assert stats["average_distance"] is None and stats["effective_diameter"] is None
    else:
        assert stats["average_distance"] == pytest.approx(want["average"], rel=1e-12)
        assert stats["effective_diameter"] == pytest.approx(want["effective"], rel=1e-12)
    exact = stats["exact"]
    assert isinstance(exact, dict) and all(exact.values())
    assert set(stats["method"].values()) == {"bfs-all"}  # type: ignore[union-attr]


def test_exact_by_hand_on_a_path() -> None:
    """0→1→2→3: three pairs at 1, two at 2, one at 3; F(2) = 5/6 < 0.9 ≤ F(3)."""
    stats = distance_statistics(adjacency(nx.path_graph(4, create_using=nx.DiGraph)))
    assert stats["distance_distribution"] == [0, 3, 2, 1]
    assert stats["average_distance"] == pytest.approx(10 / 6)
    assert stats["effective_diameter"] == pytest.approx(2 + (0.9 - 5 / 6) / (1 / 6))
    assert stats["diameter"] == 3


def test_empty_graph_and_bad_input() -> None:
    stats = distance_statistics(sp.csr_array((0, 0)))
    assert stats["average_distance"] is None and stats["diameter"] == 0
    with pytest.raises(ValueError, match="square"):
        distance_statistics(sp.csr_array((2, 3)))
    with pytest.raises(TypeError, match=r"scipy\.sparse"):
        distance_statistics(np.zeros((2, 2)))


def web_like(n: int, degree: float, seed: int) -> sp.csr_array:
    """Hosts of 50 pages, 80 % of links on the host (towards its first pages), 20 % anywhere
    (towards low ids: popular pages)."""
    rng = np.random.default_rng(seed)
    src = np.repeat(np.arange(n), rng.poisson(degree, n))
    local = rng.random(len(src)) < 0.8
    near = src // 50 * 50 + (50 * rng.random(len(src)) ** 2).astype(np.int64)
    far = (n * rng.random(len(src)) ** 2).astype(np.int64)
    dst = np.minimum(np.where(local, near, far), n - 1)
    return sp.csr_array((np.ones(len(src)), (src, dst)), shape=(n, n))


def test_hyperball_within_three_standard_errors_of_exact() -> None:
    graph = web_like(5000, 4.0, seed=3)
    exact = distance_statistics(graph, exact_limit=5000)
    estimate = distance_statistics(graph, exact_limit=0, seed=0)
    assert estimate["exact"] == {key: False for key in estimate["exact"]}  # type: ignore[union-attr]
    error = estimate["error"]
    assert isinstance(error, dict)
    assert error["counter_relative_standard_deviation"] == pytest.approx(1.04 / 8)
    for key, se in [
        ("average_distance", "average_distance_standard_error"),
        ("effective_diameter", "effective_diameter_standard_error"),
        ("reachable_pairs", "reachable_pairs_standard_error"),
    ]:
        # an error of each figure at most the counters' relative one (1.04/8 = 13 %)
        assert 0 < error[se] < 1.04 / 8 * abs(exact[key])  # type: ignore[operator]
        assert abs(estimate[key] - exact[key]) <= 3 * error[se], key  # type: ignore[operator]
    # seeded: the same figures again
    again = distance_statistics(graph, exact_limit=0, seed=0)
    assert again["average_distance"] == estimate["average_distance"]
    assert again["distance_distribution"] == estimate["distance_distribution"]
    other = distance_statistics(graph, exact_limit=0, seed=1)
    assert other["average_distance"] != estimate["average_distance"]


@pytest.mark.parametrize("seed", range(6))
def test_diameter_bounds_hold(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n = int(rng.integers(100, 600))
    if seed % 2:
        graph = web_like(n, float(rng.uniform(1.0, 3.0)), seed)
    else:
        g = nx.gnp_random_graph(n, float(rng.uniform(0.5, 2.0)) / n, seed=seed, directed=True)
        graph = adjacency(g)
    exact = distance_statistics(graph)
    bounded = distance_statistics(graph, exact_limit=0, seed=seed, sweeps=2, bfs_scc_min=8)
    lower, upper = bounded["diameter_lower_bound"], bounded["diameter_upper_bound"]
    assert lower <= exact["diameter"] <= upper  # type: ignore[operator]


def test_diameter_bounds_are_tight_on_a_path_and_a_cycle() -> None:
    for graph in [nx.path_graph(300, nx.DiGraph), nx.cycle_graph(300, nx.DiGraph)]:
        stats = distance_statistics(adjacency(graph), exact_limit=0)
        assert stats["diameter_lower_bound"] == stats["diameter_upper_bound"] == 299


def test_eccentricity_is_the_bfs_depth() -> None:
    graph = nx.gnp_random_graph(300, 0.01, seed=7, directed=True)
    adj = adjacency(graph)
    for source in range(0, 300, 37):
        depth = nx.single_source_shortest_path_length(graph, source)
        far, node = eccentricity(adj, source)
        assert far == max(depth.values()) and depth[node] == far


def load_cnr() -> sp.csr_array:
    with gzip.open(CNR, "rb") as f:
        pairs = np.array(f.read().split(), dtype=np.int64).reshape(-1, 2)
    n = int(pairs.max()) + 1
    return sp.csr_array((np.ones(len(pairs)), (pairs[:, 0], pairs[:, 1])), shape=(n, n))


@pytest.mark.slow
def test_cnr_2000_estimates_agree_with_a_bfs_sample() -> None:
    """HyperBall on the real graph against exact BFS from 48 random sources: the sample's
    ratio estimate of the average distance (with its own standard error) and of the reachable
    pairs; every distance the sample sees is at most the upper bound."""
    graph = load_cnr()
    assert graph.shape == (325_557, 325_557) and graph.nnz == 3_216_152
    started = time.perf_counter()
    stats = distance_statistics(graph, seed=0)
    seconds = time.perf_counter() - started
    assert seconds < 120, seconds  # 3.5 s on this machine under load (bench/README.md)
    error = stats["error"]
    assert isinstance(error, dict)

    sources = np.random.default_rng(0).choice(graph.shape[0], size=48, replace=False)
    dist = csgraph.shortest_path(graph, method="D", unweighted=True, indices=sources)
    finite = np.isfinite(dist) & (dist > 0)
    reach = finite.sum(axis=1).astype(np.float64)  # pairs from each source
    total = np.where(finite, dist, 0).sum(axis=1)  # their summed distances
    ratio = total.sum() / reach.sum()
    # the ratio estimator's standard error (delta method)
    k = len(sources)
    residual = total - ratio * reach
    ratio_se = math.sqrt((residual**2).sum() / (k - 1) / k) / reach.mean()
    combined = math.hypot(ratio_se, error["average_distance_standard_error"])
    assert abs(stats["average_distance"] - ratio) <= 3 * combined  # type: ignore[operator]

    pairs = graph.shape[0] * reach.mean()
    pairs_se = graph.shape[0] * reach.std(ddof=1) / math.sqrt(k)
    combined = math.hypot(pairs_se, error["reachable_pairs_standard_error"])
    assert abs(stats["reachable_pairs"] - pairs) <= 3 * combined  # type: ignore[operator]

    lower, upper = stats["diameter_lower_bound"], stats["diameter_upper_bound"]
    assert isinstance(lower, int) and isinstance(upper, int)
    assert dist[finite].max() <= upper and lower <= upper
    assert stats["effective_diameter"] <= lower  # type: ignore[operator]


def test_runs_average_independent_hashes() -> None:
    graph = web_like(3000, 3.0, seed=5)
    one = [distance_statistics(graph, exact_limit=0, seed=s) for s in (4, 5)]
    both = distance_statistics(graph, exact_limit=0, seed=4, runs=2)
    averages = [r["average_distance"] for r in one]
    assert both["average_distance"] == pytest.approx(np.mean(averages))  # type: ignore[arg-type]
    errors = [r["error"]["average_distance_standard_error"] for r in one]  # type: ignore[index]
    combined = both["error"]["average_distance_standard_error"]  # type: ignore[index]
    assert combined == pytest.approx(math.sqrt(np.mean(np.square(errors)) / 2))


def test_estimate_of_a_graph_too_small_for_the_jackknife() -> None:
    """One arc: leaving out the register group that holds its target loses the only pair, so
    no standard error is claimed (rather than a made-up one)."""
    stats = distance_statistics(sp.csr_array(np.array([[0, 1], [0, 0]])), exact_limit=0)
    assert stats["average_distance"] == 1.0
    assert stats["error"]["average_distance_standard_error"] is None  # type: ignore[index]
    assert stats["diameter_lower_bound"] == stats["diameter_upper_bound"] == 1


def test_bfs_depths_are_networkx_distances() -> None:
    graph = nx.gnp_random_graph(400, 0.006, seed=11, directed=True)
    adj = adjacency(graph)
    for source in (0, 17, 399):
        want = nx.single_source_shortest_path_length(graph, source)
        depths = bfs_depths(adj, source)
        assert {v: int(d) for v, d in enumerate(depths) if d >= 0} == want


def test_graph_stats_command_gives_networkx_distances(tmp_path: Path) -> None:
    """`gossamer graph stats --json` end to end on an edge list with large, sparse ids and
    two components: the distance figures are networkx's, flagged exact."""
    graph = nx.gnp_random_graph(300, 0.008, seed=21, directed=True)
    graph.add_edges_from([(300, 301), (301, 302), (302, 300)])
    path = tmp_path / "edges.txt"
    big = 10**12  # ids of any size; isolated nodes are not in the file, nor in any pair
    lines = "".join(f"{u * 7919 + big} {v * 7919 + big}\n" for u, v in graph.edges)
    path.write_text("# a comment\n" + lines)
    stats = graph_stats_json(path)
    want = reference(graph)
    assert stats["distances"] == "computed"
    assert stats["average_distance"] == pytest.approx(want["average"])
    assert stats["effective_diameter"] == pytest.approx(want["effective"])
    assert stats["diameter"] == want["diameter"]
    assert all(stats["exact"][k] for k in ("average_distance", "effective_diameter", "diameter"))


def test_graph_stats_command_bounds_and_estimates_above_the_exact_limit(tmp_path: Path) -> None:
    graph = web_like(3000, 2.0, seed=8)
    rows = np.repeat(np.arange(3000), np.diff(graph.indptr))
    path = tmp_path / "edges.tsv"
    np.savetxt(path, np.column_stack([rows, graph.indices]), fmt="%d\t%d")
    stats = graph_stats_json(path)
    exact = distance_statistics(graph, exact_limit=3000)
    assert "diameter" not in stats or stats["diameter"] is None
    assert stats["diameter_lower_bound"] <= exact["diameter"] <= stats["diameter_upper_bound"]
    assert stats["exact"]["average_distance"] is False
    assert stats["exact"]["diameter_upper_bound"] is False
    se = stats["error"]["average_distance_standard_error"]
    assert abs(stats["average_distance"] - exact["average_distance"]) <= 3 * se
