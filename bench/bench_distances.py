"""Distance statistics (gossamer.graph._distances) on a generated web-like graph and cnr-2000.

    .venv/bin/python bench/bench_distances.py                  # 1M nodes / 10M edges, cnr-2000
    .venv/bin/python bench/bench_distances.py --nodes 200000 --skip-cnr
    .venv/bin/python bench/bench_distances.py --p 5 --runs 2
    .venv/bin/python bench/bench_distances.py --edges 8000000 --skip-cnr   # bench_graph's graph
    .venv/bin/python bench/bench_distances.py --edges 8000000 --skip-cnr --reference

The generated graph (seeded, numpy only): hosts of Zipf-distributed sizes laid out as runs of
consecutive ids; out-degrees from a discrete power law (mean --degree); 80 % of a page's links
stay on its host, aimed at its low ids (home and section pages: id = host start + size * u²),
20 % go anywhere, aimed at globally popular pages (id = n * u³: preferential attachment by
rank). With --edges, bench_graph.py's generated graph instead (Chung-Lu with locality, exactly
that many edges: the 1M / 8M graph of the goal in bench/README.md). Prints the figures, the
seconds of each step, HyperBall's wall and CPU time, and the memory of the counters;
--reference runs HyperBall's numpy reference instead of the compiled one.
"""

from __future__ import annotations

import argparse
import gzip
import os
import resource
import time
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp

from gossamer.graph import _distances
from gossamer.graph._distances import distance_statistics

ROOT = Path(__file__).resolve().parents[1]
CNR = ROOT / "tests" / "data" / "graphs" / "cnr-2000.edges.tsv.gz"


def web_like(nodes: int, degree: float, seed: int) -> sp.csr_array:
    rng = np.random.default_rng(seed)
    sizes = np.minimum(rng.zipf(1.6, size=nodes), 50_000)
    ends = np.cumsum(sizes)
    hosts = int(np.searchsorted(ends, nodes)) + 1
    starts = np.concatenate([[0], ends[: hosts - 1]])
    sizes = np.minimum(sizes[:hosts], nodes - starts)
    host_of = np.repeat(np.arange(hosts), sizes)
    out = np.minimum(rng.zipf(2.1, size=nodes), 5_000).astype(np.float64)
    out = np.round(out * degree / out.mean()).astype(np.int64)
    src = np.repeat(np.arange(nodes, dtype=np.int64), out)
    local = rng.random(len(src)) < 0.8
    host = host_of[src]
    near = starts[host] + (sizes[host] * rng.random(len(src)) ** 2).astype(np.int64)
    far = (nodes * rng.random(len(src)) ** 3).astype(np.int64)
    dst = np.where(local, near, far)
    graph = sp.csr_array((np.ones(len(src), dtype=np.float32), (src, dst)), shape=(nodes, nodes))
    graph.sum_duplicates()
    return graph


def load_edges(path: Path) -> sp.csr_array:
    with gzip.open(path, "rb") as f:
        text = f.read().replace(b"\t", b" ")
    pairs = np.array(text.split(), dtype=np.int64).reshape(-1, 2)
    n = int(pairs.max()) + 1
    data = np.ones(len(pairs), dtype=np.float32)
    return sp.csr_array((data, (pairs[:, 0], pairs[:, 1])), shape=(n, n))


def report(name: str, graph: sp.csr_array, args: argparse.Namespace) -> None:
    spent = [0.0, 0.0]  # HyperBall's wall and CPU seconds, every run
    original = _distances.hyperball
    run = _distances.hyperball_reference if args.reference else original

    def timed(*a: Any, **k: Any) -> Any:
        wall, cpu = time.perf_counter(), time.process_time()
        try:
            return run(*a, **k)
        finally:
            spent[0] += time.perf_counter() - wall
            spent[1] += time.process_time() - cpu

    _distances.hyperball = timed  # what _distances._estimated calls
    try:
        started, cpu = time.perf_counter(), time.process_time()
        stats = distance_statistics(graph, seed=args.seed, p=args.p, runs=args.runs)
        wall, cpu = time.perf_counter() - started, time.process_time() - cpu
    finally:
        _distances.hyperball = original
    error = stats["error"]
    assert isinstance(error, dict)
    print(f"{name}: {graph.shape[0]:,} nodes, {graph.nnz:,} edges")
    print(
        f"  average distance {stats['average_distance']:.3f} "
        f"± {error['average_distance_standard_error']:.3f} (1 s.e.)"
    )
    print(
        f"  effective diameter {stats['effective_diameter']:.3f} "
        f"± {error['effective_diameter_standard_error']:.3f}"
    )
    print(
        f"  diameter in [{stats['diameter_lower_bound']}, {stats.get('diameter_upper_bound')}]"
        f"  reachable pairs {stats['reachable_pairs']:.4g}"
    )
    rsd = error["counter_relative_standard_deviation"]
    print(f"  HyperBall iterations {stats['iterations']}, counter rsd {rsd:.3f}")
    seconds = stats["seconds"]
    assert isinstance(seconds, dict)
    print(f"  seconds {({k: round(v, 2) for k, v in seconds.items()})}, wall {wall:.2f}")
    print(f"  CPU seconds {cpu:.2f} (the machine is shared: wall time varies with the load)")
    kind = "numpy reference" if args.reference else f"compiled: {_distances.COMPILED}"
    print(f"  HyperBall ({kind}): wall {spent[0]:.2f} s, CPU {spent[1]:.2f} s")
    print(f"  load average {os.getloadavg()}")
    memory = stats["counter_bytes"]
    assert isinstance(memory, int)
    print(f"  HyperBall memory {memory / 2**20:.0f} MiB ({memory / graph.nnz:.1f} bytes/edge)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=1_000_000)
    parser.add_argument("--degree", type=float, default=11.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--p", type=int, default=None, help="log2 of the registers per counter (default: auto)"
    )
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument(
        "--edges", type=int, default=None, help="bench_graph.py's graph of this many edges"
    )
    parser.add_argument("--reference", action="store_true", help="HyperBall's numpy reference")
    parser.add_argument("--skip-cnr", action="store_true")
    parser.add_argument("--skip-generated", action="store_true")
    args = parser.parse_args()
    print(f"load average {os.getloadavg()}")
    if not args.skip_generated:
        started = time.perf_counter()
        if args.edges is None:
            graph = web_like(args.nodes, args.degree, args.seed)
        else:
            from bench_graph import web_like as chung_lu
            from gossamer.graph._load import adjacency

            graph = adjacency(args.nodes, *chung_lu(args.nodes, args.edges, 1))
        print(f"generated in {time.perf_counter() - started:.2f} s")
        report("web-like", graph, args)
        del graph
    if not args.skip_cnr:
        report("cnr-2000", load_edges(CNR), args)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**10
    print(f"peak RSS {peak:.0f} MiB")


if __name__ == "__main__":
    main()
