"""OnlineGraph: UPDATE_GRAPH with pending edges, against networkx and against BFS order."""

from __future__ import annotations

import random
from collections import deque

import networkx as nx
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gossamer.graph import OnlineGraph, _online
from gossamer.sinks.graph import node_id


def edge_set(g: OnlineGraph) -> set[tuple[int, int]]:
    """The edges as (page id, page id)."""
    ids = g.node_ids()
    src, dst = g.edge_arrays()
    return {(int(ids[s]), int(ids[d])) for s, d in zip(src, dst, strict=True)}


def csr_edge_set(g: OnlineGraph) -> set[tuple[int, int]]:
    adj = g.csr().tocoo()
    ids = g.node_ids()
    return {(int(ids[r]), int(ids[c])) for r, c in zip(adj.row, adj.col, strict=True)}


def test_pending_edge_enters_when_its_target_is_crawled() -> None:
    g = OnlineGraph()
    g.update("http://a/", ["http://b/", "http://c/", "http://a/"])  # self-link left out
    assert (g.nodes, g.edges, g.pending) == (1, 0, 2)
    g.update("http://b/", ["http://a/"])
    a, b, c = node_id("http://a/"), node_id("http://b/"), node_id("http://c/")
    assert (g.nodes, g.edges, g.pending) == (2, 2, 1)
    assert edge_set(g) == {(a, b), (b, a)}
    g.update("http://c/", [])
    assert (g.nodes, g.edges, g.pending) == (3, 3, 0)
    assert edge_set(g) == csr_edge_set(g) == {(a, b), (b, a), (a, c)}


def test_a_page_crawled_again_adds_nothing_twice() -> None:
    g = OnlineGraph()
    g.update_ids(1, [2, 3, 3, 4])
    g.update_ids(2, [1])
    g.update_ids(1, [2, 3, 5])  # replayed, with one new link (5) and one new pending
    g.update_ids(2, [1, 1])
    assert (g.nodes, g.edges, g.pending) == (2, 2, 3)  # 1→2, 2→1; 1→3, 1→4, 1→5 pending
    g.update_ids(3, [])
    assert (g.nodes, g.edges, g.pending) == (3, 3, 2)
    assert edge_set(g) == {(1, 2), (2, 1), (1, 3)}
    assert g.csr().nnz == 3 and set(g.csr().data.tolist()) == {1}


def test_update_and_update_ids_agree() -> None:
    by_url, by_id = OnlineGraph(), OnlineGraph()
    pages = {f"http://h/{i}": [f"http://h/{(i * 7 + k) % 30}" for k in range(5)] for i in range(20)}
    for page, links in pages.items():
        by_url.update(page, links)
        by_id.update_ids(node_id(page), [node_id(u) for u in links])
    assert edge_set(by_url) == edge_set(by_id)
    assert by_url.pending == by_id.pending > 0


def random_web(rng: random.Random, n: int, out_mean: int) -> dict[int, list[int]]:
    """Pages 0..n-1 (ids spread over 63 bits) with links to pages in 0..1.3n (some never
    crawled), a page's links may repeat."""
    ids = [rng.getrandbits(63) for _ in range(int(n * 1.3) + 1)]
    return {
        ids[i]: [ids[rng.randrange(len(ids))] for _ in range(rng.randrange(2 * out_mean + 1))]
        for i in range(n)
    }


def bfs_order(web: dict[int, list[int]], start: int) -> list[int]:
    seen, order, queue = {start}, [], deque([start])
    while queue:
        page = queue.popleft()
        order.append(page)
        for link in web[page]:
            if link in web and link not in seen:
                seen.add(link)
                queue.append(link)
    order.extend(p for p in web if p not in seen)
    return order


def expected_graph(web: dict[int, list[int]]) -> nx.DiGraph:
    g = nx.DiGraph()
    g.add_nodes_from(web)
    g.add_edges_from((p, q) for p, links in web.items() for q in links if q in web and q != p)
    return g


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(1, 300), out_mean=st.integers(0, 8))
def test_random_order_equals_bfs_order_equals_networkx(seed: int, n: int, out_mean: int) -> None:
    """BFS order, reverse BFS order (most links wait), a random order, and a random order
    in which a third of the pages are crawled twice (a resume, a replayed event)."""
    rng = random.Random(seed)
    web = random_web(rng, n, out_mean)
    reverse_bfs = list(reversed(bfs_order(web, next(iter(web)))))  # most edges wait
    shuffled = list(web)
    rng.shuffle(shuffled)
    replayed = shuffled[: len(shuffled) // 2] + rng.sample(shuffled, len(shuffled) // 3)
    replayed += shuffled[len(shuffled) // 2 :]  # a third of the pages crawled twice
    graphs = []
    for order in (bfs_order(web, next(iter(web))), reverse_bfs, shuffled, replayed):
        g = OnlineGraph()
        for page in order:
            g.update_ids(page, web[page])
        graphs.append(g)
    truth = expected_graph(web)
    pending_truth = {(p, q) for p, links in web.items() for q in links if q not in web}
    for g in graphs:
        assert g.nodes == truth.number_of_nodes()
        assert set(g.node_ids().tolist()) == set(truth.nodes)
        assert edge_set(g) == set(truth.edges) == csr_edge_set(g)
        assert g.edges == truth.number_of_edges()
        assert g.pending == len(pending_truth)


@pytest.mark.parametrize("compact_min_dead", [_online.COMPACT_MIN_DEAD, 100])
def test_most_edges_pending_then_resolved_on_a_larger_web(
    compact_min_dead: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Reverse BFS order on 20,000 pages: most links wait; with the pending lists compacted
    often (every 100 dead entries) or never, the graph is the same."""
    monkeypatch.setattr(_online, "COMPACT_MIN_DEAD", compact_min_dead)
    rng = random.Random(7)
    web = random_web(rng, 20_000, 10)
    order = list(reversed(bfs_order(web, next(iter(web)))))
    position = {page: i for i, page in enumerate(order)}
    g = OnlineGraph()
    for page in order:
        g.update_ids(page, web[page])
    truth = expected_graph(web)
    waited = sum(1 for p, q in truth.edges if position[p] < position[q])
    assert waited > truth.number_of_edges() / 2
    assert edge_set(g) == set(truth.edges)
    assert g.pending == len({(p, q) for p, links in web.items() for q in links if q not in web})


def test_memory_is_arrays_not_objects_per_edge() -> None:
    rng = np.random.default_rng(1)
    g = OnlineGraph()
    n = 20_000
    for page in range(n):
        g.update_ids(page, rng.integers(0, n, 20).tolist())
    per_edge = g.memory_bytes() / g.edges
    assert g.edges > 300_000
    assert per_edge < 40, per_edge  # a Python tuple per edge alone would be 56+ bytes
