"""The live graph's incremental counts (gossamer/graph/_counts.py): fed nodes and arcs in
steps, in any order (arcs before their nodes, repeats, self-loops, links to pages never
crawled), they equal at every step what `graph_statistics` computes from scratch on
`crawl_graph` of everything read so far."""

from __future__ import annotations

import numpy as np
import pytest

from gossamer.graph._counts import GraphCounts
from gossamer.graph._load import crawl_graph
from gossamer.graph._stats import graph_statistics

_KEYS = ("nodes", "edges", "pending", "self_loops", "scc_count", "largest_scc", "wcc_count",
         "largest_wcc", "dangling")  # fmt: skip


def _scratch(nodes: set[int], src: list[int], dst: list[int]) -> dict[str, object]:
    ids = np.array(sorted(nodes), dtype=np.int64)
    adj, pending = crawl_graph(ids, np.array(src, dtype=np.int64), np.array(dst, dtype=np.int64))
    return graph_statistics(adj, pending=pending)


@pytest.mark.parametrize("seed", range(3))
def test_counts_in_steps_equal_a_computation_from_scratch(seed: int) -> None:
    rng = np.random.default_rng(seed)
    pages = rng.choice(2**62, size=300, replace=False).astype(np.int64)  # ids: 63-bit hashes
    crawled = rng.permutation(250)  # 50 pages are never crawled: their links stay pending
    counts = GraphCounts()
    nodes: set[int] = set()
    src: list[int] = []
    dst: list[int] = []
    for step in np.array_split(crawled, 8):
        new_nodes = [int(pages[i]) for i in step]
        # each new page's links (power-law-ish, local), plus repeats of earlier arcs and links
        # from pages whose node arrives in a later step (another file read first)
        s, d = [], []
        for i in step:
            k = int(rng.zipf(2.0)) % 20
            for j in rng.integers(0, 300, size=k):
                s.append(int(pages[i]))
                d.append(int(pages[j]))
        if src:
            again = rng.integers(0, len(src), size=5)
            s += [src[a] for a in again]
            d += [dst[a] for a in again]
        early = rng.choice(crawled, size=3)
        s += [int(pages[i]) for i in early]
        d += [int(pages[(i + 1) % 300]) for i in early]
        counts.update(new_nodes + new_nodes[:2], np.array(s, dtype=np.int64),
                      np.array(d, dtype=np.int64))  # fmt: skip
        nodes.update(new_nodes)
        src += s
        dst += d
        want = _scratch(nodes, src, dst)
        got = counts.figures()
        assert {k: got[k] for k in _KEYS} == {k: want[k] for k in _KEYS}
        for side in ("in_degree", "out_degree"):
            w = dict(want[side])  # type: ignore[call-overload]
            w["power_law"] = None
            assert got[side] == w
    adj, ids = counts.adjacency()
    ref = crawl_graph(np.array(sorted(nodes), dtype=np.int64),
                      np.array(src, dtype=np.int64), np.array(dst, dtype=np.int64))[0]  # fmt: skip
    assert (adj != ref).nnz == 0 and list(ids) == sorted(nodes)
