"""The live graph's refresh at the sizes a crawl reaches: a graph fed in steps (as a crawl's
refreshes read it), each step's counts (nodes, edges, SCCs, largest SCC, WCCs, dangling,
degrees) computed two ways, side by side in the same run:

- recompute: `crawl_graph` of everything read so far, then scipy's SCC on the whole graph and
  the weak components on its condensation (what every refresh did before issue 33);
- incremental: `GraphCounts.update` with the step's nodes and arcs, then `figures()` (the
  counts merged in, SCCs from the incremental condensation: graph/_counts.py).

    .venv/bin/python bench/bench_live_counts.py                      # cnr-2000, 20 steps
    .venv/bin/python bench/bench_live_counts.py --steps 50 --edges FILE

The graph: tests/data/graphs/cnr-2000.edges.tsv.gz (325,557 nodes, 3.2M edges; its nodes
arrive in id order, each with its out-links, as a crawl's pages do). Prints, per step, both
CPU times (process time: the figures hold on a loaded machine) and the graph's size, and
checks that both give the same figures."""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
from scipy.sparse import csgraph

from gossamer.graph._counts import GraphCounts
from gossamer.graph._load import crawl_graph, load_edgelist

HERE = Path(__file__).resolve().parent
DEFAULT = HERE.parent / "tests" / "data" / "graphs" / "cnr-2000.edges.tsv.gz"


def recompute(ids: np.ndarray, src: np.ndarray, dst: np.ndarray) -> tuple[dict[str, int], float]:
    """The counts from scratch, and the seconds scipy's SCC alone took."""
    adj, pending = crawl_graph(np.sort(ids), src, dst)
    n = adj.shape[0]
    began = time.process_time()
    count, labels = csgraph.connected_components(adj, connection="strong")
    scc_s = time.process_time() - began
    out = np.diff(adj.indptr)
    return {"nodes": n, "edges": int(adj.nnz), "pending": pending, "scc_count": int(count),
            "largest_scc": int(np.bincount(labels).max()),
            "dangling": int(np.count_nonzero(out == 0))}, scc_s  # fmt: skip


def main() -> None:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    p.add_argument("--edges", type=Path, default=DEFAULT)
    p.add_argument("--steps", type=int, default=20)
    args = p.parse_args()
    g = load_edgelist(args.edges)
    n = g.adj.shape[0]
    coo = g.adj.tocoo()
    order = np.argsort(coo.row, kind="stable")
    src_all, dst_all = coo.row[order].astype(np.int64), coo.col[order].astype(np.int64)
    # ids as a crawl's: 63-bit hashes, not 0..n-1 (the lookups sort them)
    ids_all = np.random.default_rng(1).choice(2**62, size=n, replace=False).astype(np.int64)
    src_all, dst_all = ids_all[src_all], ids_all[dst_all]
    cuts = np.linspace(0, n, args.steps + 1).astype(int)
    counts = GraphCounts()
    total_r = total_i = 0.0
    print(f"# {args.edges.name}: {n:,} nodes, {len(src_all):,} edges, {args.steps} steps")
    print("step      nodes       edges    SCCs  recompute s  (scipy SCC s)  incremental s")
    lo_e = 0
    for k in range(args.steps):
        hi_n = cuts[k + 1]
        hi_e = int(np.searchsorted(coo.row[order], hi_n))
        began = time.process_time()
        counts.update(ids_all[cuts[k]:hi_n].tolist(), src_all[lo_e:hi_e], dst_all[lo_e:hi_e])
        mine = counts.figures()
        t_inc = time.process_time() - began
        began = time.process_time()
        ref, scc_s = recompute(ids_all[:hi_n], src_all[:hi_e], dst_all[:hi_e])
        t_rec = time.process_time() - began
        assert all(mine[key] == ref[key] for key in ref), (mine, ref)
        total_r += t_rec
        total_i += t_inc
        print(f"{k + 1:4d} {ref['nodes']:10,} {ref['edges']:11,} {ref['scc_count']:7,} "
              f"{t_rec:12.3f} {scc_s:14.3f} {t_inc:14.3f}")  # fmt: skip
        lo_e = hi_e
    print(f"total {total_r:.2f} s recomputing, {total_i:.2f} s incremental "
          f"(the last step: see above); figures equal at every step")


if __name__ == "__main__":
    main()
