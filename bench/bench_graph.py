"""The web graph's costs: statistics (all but distances) and PageRank on a generated web-like
graph of 1,000,000 nodes and 10,000,000 edges, OnlineGraph's update rate and memory per edge, and
cnr-2000 (tests/data/graphs) loaded and measured, in process and through `gossamer graph stats`.

    .venv/bin/python bench/bench_graph.py [--nodes 1000000] [--edges 10000000] [--seed 1]
                                          [--online-pages N] [--repeat 3]

The generated graph (seeded, vectorised numpy): a directed Chung-Lu graph with locality. Each
edge's source is drawn with probability proportional to an out-weight and its target, half the
time, proportional to an in-weight (both Pareto, shape 1.1 and 1.5: heavy-tailed in- and
out-degrees, as on the web), the other half near its source (a two-sided geometric offset of
mean 100 in id order: links within a site, ids being assigned in crawl order). Repeated edges
and self-loops are dropped and the rest cut to exactly --edges.
"""

from __future__ import annotations

import argparse
import os
import platform
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from gossamer.graph import OnlineGraph, graph_statistics, load_graph, statistics_of
from gossamer.graph._load import adjacency

CNR = Path(__file__).resolve().parent.parent / "tests" / "data" / "graphs" / "cnr-2000.edges.tsv.gz"


def web_like(n: int, m: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """(src, dst) of a web-like graph: see the module docstring."""
    rng = np.random.default_rng(seed)
    out_w = np.cumsum(rng.pareto(1.5, n) + 1.0)
    in_w = np.cumsum(rng.pareto(1.1, n) + 1.0)
    keys = np.empty(0, dtype=np.int64)
    while len(keys) < m:  # draw more until enough distinct edges (repeats: heavy tails)
        extra = int((m - len(keys)) * 1.3) + 1000
        src = np.searchsorted(out_w, rng.random(extra) * out_w[-1]).astype(np.int64)
        far = np.searchsorted(in_w, rng.random(extra) * in_w[-1]).astype(np.int64)
        offset = rng.geometric(0.01, extra) * rng.choice([-1, 1], extra)
        near = (src + offset) % n
        dst = np.where(rng.random(extra) < 0.5, far, near)
        keys = np.unique(np.concatenate([keys, src * n + dst]))
        keys = keys[keys // n != keys % n]
    keys = rng.choice(keys, m, replace=False)
    return keys // n, keys % n


def best_of(repeat: int, fn: Callable[[], Any]) -> tuple[float, Any]:
    best, result = float("inf"), None
    for _ in range(repeat):
        started = time.perf_counter()
        result = fn()
        best = min(best, time.perf_counter() - started)
    return best, result


def bench_statistics(n: int, m: int, seed: int, repeat: int) -> tuple[np.ndarray, np.ndarray]:
    started = time.perf_counter()
    src, dst = web_like(n, m, seed)
    print(f"generated {n:,} nodes, {len(src):,} edges in {time.perf_counter() - started:.1f} s")
    t_csr, adj = best_of(repeat, lambda: adjacency(n, src, dst))
    print(f"CSR adjacency from the edge arrays: {t_csr:.3f} s")
    t_stats, stats = best_of(repeat, lambda: graph_statistics(adj))
    print(f"statistics without distances: {t_stats:.3f} s (best of {repeat})")
    from scipy.sparse import csgraph

    components = csgraph.connected_components
    for label, fn in (
        ("  for comparison, scipy SCC on int8 CSR", lambda: components(adj, connection="strong")),
        ("  for comparison, scipy weak (not used)", lambda: components(adj, connection="weak")),
        ("  degrees + histograms", lambda: (np.diff(adj.indptr), np.bincount(adj.indices))),
    ):
        t, _ = best_of(repeat, fn)
        print(f"{label}: {t:.3f} s")
    from gossamer.graph._rank import pagerank

    t_rank, rank = best_of(repeat, lambda: pagerank(adj))
    print(
        f"  PageRank (damping 0.85, L1 tolerance 1e-9): {t_rank:.3f} s, {rank.iterations} "
        f"iterations ({t_rank / rank.iterations * 1000:.0f} ms each, the transpose included)"
    )
    from gossamer.graph._stats import fit_power_law

    ins = np.bincount(adj.indices, minlength=n)
    t_fit, _ = best_of(repeat, lambda: (fit_power_law(ins), fit_power_law(np.diff(adj.indptr))))
    print(f"  power-law fits (in and out): {t_fit:.3f} s")
    print(
        f"  SCCs {stats['scc_count']:,}, largest {stats['largest_scc']:,}; dangling "
        f"{stats['dangling']:,}; max in {stats['in_degree']['max']:,}, out "
        f"{stats['out_degree']['max']:,}; alpha in {stats['in_degree']['power_law']['alpha']}"
        f" out {stats['out_degree']['power_law']['alpha']}"
    )
    return src, dst


def bench_online(src: np.ndarray, dst: np.ndarray, n: int, pages: int, seed: int) -> None:
    """Feed `pages` pages (random crawl order: most links wait) to an OnlineGraph."""
    order = np.argsort(src, kind="stable")
    s, d = src[order], dst[order]
    starts = np.searchsorted(s, np.arange(n + 1))
    crawl = np.random.default_rng(seed).permutation(n)[:pages]
    links = [d[starts[p] : starts[p + 1]].tolist() for p in crawl]
    g = OnlineGraph()
    started = time.perf_counter()
    for page, out in zip(crawl.tolist(), links, strict=True):
        g.update_ids(page, out)
    seconds = time.perf_counter() - started
    edges, pending = g.edges, g.pending
    memory = g.memory_bytes()
    print(
        f"OnlineGraph: {pages:,} pages in random order in {seconds:.1f} s "
        f"({pages / seconds:,.0f} pages/s, {(edges + pending) / seconds:,.0f} links/s); "
        f"{g.nodes:,} nodes, {edges:,} edges, {pending:,} pending"
    )
    print(
        f"  memory_bytes {memory / 2**20:,.0f} MiB: {memory / max(1, edges + pending):.1f} "
        f"bytes per edge (edges and pending links)"
    )


def bench_cnr(repeat: int) -> None:
    t_load, graph = best_of(repeat, lambda: load_graph(CNR))
    t_stats, stats = best_of(repeat, lambda: statistics_of(graph.adj))
    print(
        f"cnr-2000: load {t_load:.2f} s, statistics {t_stats:.2f} s (distances: "
        f"{stats['distances']}); {stats['nodes']:,} nodes, {stats['edges']:,} edges, "
        f"{stats['scc_count']:,} SCCs, largest {stats['largest_scc']:,}"
    )
    command = [sys.executable, "-m", "gossamer", "graph", "stats", str(CNR), "--json"]
    t_cli, _done = best_of(repeat, lambda: subprocess.run(command, capture_output=True, check=True))
    print(f"cnr-2000: `gossamer graph stats --json` end to end {t_cli:.2f} s (best of {repeat})")
    from gossamer.graph._rank import pagerank

    t_rank, rank = best_of(repeat, lambda: pagerank(graph.adj))
    print(f"cnr-2000: PageRank {t_rank:.2f} s, {rank.iterations} iterations")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=1_000_000)
    parser.add_argument("--edges", type=int, default=10_000_000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--online-pages", type=int, default=None, help="default: --nodes; 0 skips OnlineGraph"
    )
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    print(
        f"{platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, Python "
        f"{platform.python_version()}, numpy {np.__version__}; load {os.getloadavg()[0]:.2f}"
    )
    src, dst = bench_statistics(args.nodes, args.edges, args.seed, args.repeat)
    pages = args.nodes if args.online_pages is None else args.online_pages
    if pages:
        bench_online(src, dst, args.nodes, pages, args.seed)
    bench_cnr(args.repeat)


if __name__ == "__main__":
    main()
