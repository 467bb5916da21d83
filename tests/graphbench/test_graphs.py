"""GraphBench's edge insertion sequences: DIMACS and edge lists read in order and written back,
the generators' sizes and properties, and their errors."""

from __future__ import annotations

import gzip
import importlib.util
import math
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from gossamer.graph.bench import reference_components, reference_distances
from gossamer.graph.bench._graphs import (
    EdgeSequence,
    graph_source,
    read_graph_file,
    write_dimacs,
    write_edgelist,
)

DATA = Path(__file__).resolve().parents[1] / "data" / "graphs"
INF = math.inf


def test_ninth_challenge_gr_file_is_read_in_order_one_based_weights_ignored() -> None:
    seq = read_graph_file(DATA / "ninth-challenge-sample.gr")
    assert seq.n == 6
    assert seq.edges == [(0, 1), (1, 2), (2, 0), (2, 3), (3, 4), (4, 4), (0, 1), (4, 3), (5, 3)]
    d = reference_distances(seq.n, seq.edges)
    assert d[0, 4] == 4  # 1→2→3→4→5: hops, not the weights' 4,599
    assert d[3, 5] == INF  # node 6 has no in-arc


@pytest.mark.parametrize("writer", [write_dimacs, write_edgelist])
def test_round_trip_keeps_n_order_repeats_self_loops_and_isolated_vertices(
    tmp_path: Path, writer: Callable[..., None]
) -> None:
    edges = [(3, 1), (1, 3), (3, 1), (2, 2), (0, 5), (5, 0), (0, 5)]  # 4 and 6 isolated
    seq = EdgeSequence(7, edges, "mixed")
    out = tmp_path / "g.txt"
    writer(seq, out)
    back = graph_source(str(out))
    assert (back.n, back.edges) == (7, edges)
    big = graph_source("sparse:300:900:seed=4")
    writer(big, out, force=True)
    again = graph_source(str(out))
    assert (again.n, again.edges) == (big.n, big.edges)


def test_writers_refuse_an_existing_file_without_force(tmp_path: Path) -> None:
    out = tmp_path / "g.gr"
    out.write_text("keep")
    with pytest.raises(ValueError, match="exists"):
        write_dimacs(EdgeSequence(2, [(0, 1)], "x"), out)
    assert out.read_text() == "keep"


def test_edge_list_comments_gz_big_ids_in_order_of_first_appearance(tmp_path: Path) -> None:
    text = (
        "# a comment\n% another\n\n"
        f"{2**70} 5\n5   {2**70}\n7\t7\n5 -3\n{2**70} 5\n"
    )
    path = tmp_path / "g.txt.gz"
    with gzip.open(path, "wt") as f:
        f.write(text)
    seq = read_graph_file(path)
    # ids by first appearance: 2**70 → 0, 5 → 1, 7 → 2, -3 → 3
    assert seq.n == 4
    assert seq.edges == [(0, 1), (1, 0), (2, 2), (1, 3), (0, 1)]
    plain = tmp_path / "small.txt"
    plain.write_text("10 20\n30 10\n20 20\n")
    assert read_graph_file(plain).edges == [(0, 1), (2, 0), (1, 1)]


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("1 2\n3\n", ":2: expected two integer ids"),
        ("1 x\n", ":1: expected two integer ids"),
        ("c hi\np sp 3 1\na 1 4 1\n", ":3: expected `a U V W` with 1 <= U, V <= 3"),
        ("p sp x 1\n", "bad DIMACS problem line"),
        ("p max 3 1\n", "bad DIMACS problem line"),
    ],
)
def test_bad_files_are_one_line_errors(tmp_path: Path, text: str, needle: str) -> None:
    path = tmp_path / "bad.txt"
    path.write_text(text)
    with pytest.raises(ValueError) as caught:
        graph_source(str(path))
    assert needle in str(caught.value) and "\n" not in str(caught.value)


def test_complete_has_every_ordered_pair_once_in_a_fixed_order() -> None:
    seq = graph_source("complete:7")
    assert (seq.n, seq.m) == (7, 7 * 6)
    assert len(set(seq.edges)) == seq.m and all(s != t for s, t in seq.edges)
    assert seq.edges == sorted(seq.edges) and seq.density == 1.0
    assert graph_source("complete:7").edges == seq.edges


def test_sparse_is_seeded_and_may_repeat() -> None:
    seq = graph_source("sparse:50")
    assert (seq.n, seq.m) == (50, 150)
    assert all(0 <= s < 50 and 0 <= t < 50 for s, t in seq.edges)
    assert graph_source("sparse:50").edges == seq.edges
    assert graph_source("sparse:50:seed=2").edges != seq.edges
    many = graph_source("sparse:5:200:seed=3")
    assert many.m == 200 and max(Counter(many.edges).values()) > 1
    assert any(s == t for s, t in many.edges)


def test_dense_has_its_density_without_loops_or_repeats() -> None:
    seq = graph_source("dense:60:0.3:seed=5")
    assert seq.n == 60 and len(set(seq.edges)) == seq.m
    assert all(s != t for s, t in seq.edges)
    assert 0.25 < seq.density < 0.35
    assert seq.edges != sorted(seq.edges)  # inserted in a random order
    assert graph_source("dense:10:1").m == 90 and graph_source("dense:10:0").m == 0


def test_road_is_a_two_way_grid_with_georgias_density() -> None:
    seq = graph_source("road:1600")
    side = 40
    assert seq.n == 1600
    assert 2.8 < seq.m / seq.n < 3.6  # Georgia: 5,016 / 1,557 = 3.2 arcs per vertex
    arcs = set(seq.edges)
    assert all((t, s) in arcs for s, t in arcs)  # every street both ways
    for s, t in arcs:  # grid neighbours only: planar
        (rs, cs), (rt, ct) = divmod(s, side), divmod(t, side)
        assert abs(rs - rt) + abs(cs - ct) == 1
    assert [s for s, _ in seq.edges] == sorted(s for s, _ in seq.edges)


def test_web_is_a_breadth_first_crawl_of_cnr_2000() -> None:
    seq = graph_source("web:400")
    assert seq.n == 400 and seq.m > 400
    assert all(0 <= s < 400 and 0 <= t < 400 for s, t in seq.edges)
    sources = [s for s, _ in seq.edges]
    assert sources == sorted(sources)  # page by page, in crawl order
    # breadth first: every page but the first was found by a link from a page crawled before
    # it, or the frontier had run dry: no page before it links past it (a new seed)
    first_link: dict[int, int] = {}
    for s, t in seq.edges:
        first_link.setdefault(t, s)
    for v in range(1, 400):
        found = first_link.get(v, v) < v
        dry = not any(s < v <= t for s, t in seq.edges)
        assert found or dry, v
    assert sum(first_link.get(v, v) >= v for v in range(1, 400)) < 10  # mostly one crawl
    assert graph_source("web:400").edges == seq.edges
    # the first pages of a longer crawl are the same pages, the same links among them
    longer = graph_source("web:800")
    assert [e for e in longer.edges if max(e) < 400] == seq.edges


def test_sanity_graphs_have_spawcs_sizes_and_hand_checked_answers() -> None:
    sizes = {1: (8, 11), 2: (8, 14), 3: (4, 6)}
    for which, size in sizes.items():
        seq = graph_source(f"sanity:{which}")
        assert (seq.n, seq.m) == size
    three = graph_source("sanity:3")
    # 0→1→2→3→0 with the chord 1→3 and 0→1 again, by hand:
    assert reference_distances(three.n, three.edges).tolist() == [
        [0, 1, 2, 2],
        [2, 0, 1, 1],
        [2, 3, 0, 1],
        [1, 2, 3, 0],
    ]
    one = graph_source("sanity:1")
    # {0,1,2} a cycle, {4,5} a 2-cycle, 3, 6 (self-loop) and 7 alone
    assert reference_components(one.n, one.edges).tolist() == [0, 0, 0, 1, 2, 2, 3, 4]
    two = graph_source("sanity:2")
    assert len(set(reference_components(two.n, two.edges).tolist())) == 1
    assert len(set(reference_components(two.n, two.edges[:-1]).tolist())) == 2


def test_ausiello_comes_from_the_apsd_module_or_says_it_is_missing() -> None:
    if importlib.util.find_spec("gossamer.graph.bench._apsd") is None:
        with pytest.raises(ValueError, match=r"_apsd\.ausiello_sequence, which is missing"):
            graph_source("ausiello:10")
    else:
        seq = graph_source("ausiello:10")
        assert seq.n >= 10 and seq.m > 0
        assert all(0 <= s < seq.n and 0 <= t < seq.n for s, t in seq.edges)


@pytest.mark.parametrize(
    ("spec", "needle"),
    [
        ("complete", "N must be a whole number (want complete:N)"),
        ("complete:-3", "N must be a whole number"),
        ("sparse:10:many", "M must be a whole number"),
        ("dense:10:2", "density must be in [0, 1]"),
        ("dense:10:x", "DENSITY must be a number"),
        ("road:9:seed=z", "bad seed"),
        ("complete:4:seed=1", "bad seed"),
        ("sanity:4", "there are sanity:1, sanity:2 and sanity:3"),
        ("complete:3:4", "too many fields"),
        ("web:999999999", "has only 325557 pages"),
        ("nothing-here.gr", "no such file"),
    ],
)
def test_bad_specs_are_one_line_errors(spec: str, needle: str) -> None:
    with pytest.raises(ValueError) as caught:
        graph_source(spec)
    assert needle in str(caught.value) and "\n" not in str(caught.value)


def test_density_counts_distinct_non_loop_edges() -> None:
    seq = EdgeSequence(3, [(0, 1), (0, 1), (1, 1), (2, 0)], "x")
    assert seq.density == pytest.approx(2 / 6)
    assert np.isclose(EdgeSequence(1, [], "y").density, 0.0)
