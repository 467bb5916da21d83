"""GraphBench's dynamic SCC algorithms (gossamer.graph.bench._scc): seconds per edge-insertion
sequence, and why Algorithm 1 uses numpy rows and Algorithms 2 and 3 Python-int rows.

    .venv/bin/python bench/bench_scc.py                        # sizes 200 and 1000, ~2 minutes
    .venv/bin/python bench/bench_scc.py --sizes 300 --cap 5    # one size, 5 s per run at most
    .venv/bin/python bench/bench_scc.py --only rows            # the row-OR measurement alone

Sequences (seeded): `path` inserts (0,1), (1,2), … (n-2,n-1) then (n-1,0): every insertion
gives each of its predecessors a new vertex (Θ(n²) closure updates, the SCC analogue of
SPAWC's Appendix C.1 sequences) and the last edge merges everything; `sparse`: 2n random
edges; `dense`: min(n²/4, 20 000) random edges; `complete`: every ordered pair of n/4
vertices, shuffled ((n/4)(n/4 - 1) edges). A run is abandoned after `--cap` seconds (`>cap`)
and larger sizes of that sequence skipped (`-`); every answer is checked against scipy (`!`
marks a wrong one). `memory`: the peak of Python's allocations (tracemalloc, numpy's arrays
included) while each algorithm runs the `sparse` and `path` sequences of the largest size
(tracemalloc slows Python code down, so these runs may take 4 × `--cap`).
"""

from __future__ import annotations

import argparse
import random
import time
import tracemalloc
from collections.abc import Callable

import numpy as np

from gossamer.graph.bench import SCC, SCCAlgorithm, canonical, names, reference_components

Edges = list[tuple[int, int]]


def path_then_close(n: int, rng: random.Random) -> tuple[int, Edges]:
    return n, [*((v, v + 1) for v in range(n - 1)), (n - 1, 0)]


def sparse(n: int, rng: random.Random) -> tuple[int, Edges]:
    return n, [(rng.randrange(n), rng.randrange(n)) for _ in range(2 * n)]


def dense(n: int, rng: random.Random) -> tuple[int, Edges]:
    return n, [(rng.randrange(n), rng.randrange(n)) for _ in range(min(n * n // 4, 20_000))]


def complete(n: int, rng: random.Random) -> tuple[int, Edges]:
    k = max(n // 4, 2)
    pairs = [(u, v) for u in range(k) for v in range(k) if u != v]
    rng.shuffle(pairs)
    return k, pairs


SEQUENCES: dict[str, Callable[[int, random.Random], tuple[int, Edges]]] = {
    "path": path_then_close,
    "sparse": sparse,
    "dense": dense,
    "complete": complete,
}


def run(
    make: Callable[[int], SCCAlgorithm], n: int, edges: Edges, cap: float
) -> tuple[float, bool | None]:
    """Seconds for the sequence and whether the answer is scipy's; None when the run passed
    `cap` seconds (checked every 16 insertions) and was abandoned."""
    start = time.perf_counter()
    algorithm = make(n)
    for i, (src, tgt) in enumerate(edges):
        algorithm.add_edge(src, tgt)
        if i % 16 == 15 and time.perf_counter() - start > cap:
            return time.perf_counter() - start, None
    algorithm.flush()
    seconds = time.perf_counter() - start
    ok = bool(np.array_equal(canonical(algorithm.components()), reference_components(n, edges)))
    return seconds, ok


def algorithms(sizes: list[int], cap: float, only: list[str] | None) -> None:
    chosen = [a for a in names("scc") if not only or a in only]
    for sequence, build in SEQUENCES.items():
        print(f"\n{sequence}: seconds for the whole sequence (min of 1 run)")
        print(f"{'algorithm':<15}" + "".join(f"{'n=' + str(s):>12}" for s in sizes))
        graphs = [build(s, random.Random(s)) for s in sizes]
        for name in chosen:
            make = SCC[name][1]
            cells = []
            over = False
            for n, edges in graphs:
                if over:
                    cells.append("-")
                    continue
                seconds, ok = run(make, n, edges, cap)
                over = ok is None
                cells.append(f">{cap:g}" if ok is None else f"{seconds:.3f}" + ("" if ok else " !"))
            print(f"{name:<15}" + "".join(f"{c:>12}" for c in cells))
        print("edges: " + ", ".join(f"n={n}: {len(e)}" for n, e in graphs))


def rows(n: int, preds: int, repeat: int = 50) -> None:
    """OR one row of an n × n bit matrix into `preds` other rows, µs per update: numpy
    uint8…uint64 blocks stored block-major (`blocks[:, preds] |= blocks[:, src]`, one element
    per block: Algorithm 1), the same stored row-major (`T[preds] |= T[src]`: whole rows,
    memcpy + SIMD), and Python ints (a loop over the rows: Algorithms 2 and 3)."""
    rng = np.random.default_rng(1)
    chosen = np.sort(rng.choice(n, size=preds, replace=False))
    print(f"\nn={n}, one row OR-ed into {preds} rows: µs per update")
    print(f"  {'':<12}{'block-major':>12}{'row-major':>12}")
    for bits, dtype in ((8, np.uint8), (16, np.uint16), (32, np.uint32), (64, np.uint64)):
        T = rng.integers(0, 2**bits, size=(n, -(-n // bits)), dtype=dtype)
        blocks = np.ascontiguousarray(T.T)
        blocks[:, chosen] |= blocks[:, 0:1]  # warm up (first-call costs)
        start = time.perf_counter()
        for _ in range(repeat):
            blocks[:, chosen] |= blocks[:, 0:1]
        by_block = (time.perf_counter() - start) / repeat * 1e6
        start = time.perf_counter()
        for _ in range(repeat):
            T[chosen] |= T[0]
        by_row = (time.perf_counter() - start) / repeat * 1e6
        print(f"  numpy uint{bits:<2}{by_block:12.1f}{by_row:12.1f}")
    ints = [int.from_bytes(rng.bytes(-(-n // 8)), "little") for _ in range(n)]
    start = time.perf_counter()
    for _ in range(repeat):
        row = ints[0]
        for i in chosen.tolist():
            ints[i] |= row
    print(f"  Python int  {(time.perf_counter() - start) / repeat * 1e6:12.1f}")


def memory(n: int, cap: float, only: list[str] | None) -> None:
    chosen = [a for a in names("scc") if not only or a in only]
    print(f"\nmemory: peak MB allocated while running, n={n}")
    print(f"{'algorithm':<15}{'sparse':>12}{'path':>12}")
    for name in chosen:
        cells = []
        for build in (sparse, path_then_close):
            size, edges = build(n, random.Random(n))
            tracemalloc.start()
            _, ok = run(SCC[name][1], size, edges, 4 * cap)
            peak = tracemalloc.get_traced_memory()[1]
            tracemalloc.stop()
            cells.append(f">{4 * cap:g} s" if ok is None else f"{peak / 1e6:.2f}")
        print(f"{name:<15}" + "".join(f"{c:>12}" for c in cells))


def set_bits(n: int = 4000, repeat: int = 200) -> None:
    """Listing the set bits of an n-bit Python int: peeling the lowest bit off one at a time
    against numpy's unpackbits of its bytes (gossamer.graph.bench._scc._bits picks by count)."""
    rng = random.Random(n)
    print(f"\nset bits of a {n}-bit int: µs per listing")
    print(f"  {'bits set':<10}{'peeling':>10}{'numpy':>10}")
    for k in (1, 8, 32, 128, 1000):
        x = sum(1 << b for b in rng.sample(range(n), k)) | 1 << (n - 1)
        start = time.perf_counter()
        for _ in range(repeat):
            y, out = x, []
            while y:
                low = y & -y
                out.append(low.bit_length() - 1)
                y ^= low
        peel = (time.perf_counter() - start) / repeat * 1e6
        start = time.perf_counter()
        for _ in range(repeat):
            raw = np.frombuffer(x.to_bytes((x.bit_length() + 7) // 8, "little"), dtype=np.uint8)
            np.flatnonzero(np.unpackbits(raw, bitorder="little")).tolist()
        unpack = (time.perf_counter() - start) / repeat * 1e6
        print(f"  {k:<10}{peel:10.1f}{unpack:10.1f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[200, 1000])
    parser.add_argument("--cap", type=float, default=5.0, help="seconds a run may take")
    parser.add_argument("--only", nargs="+", help="algorithm names, 'rows' or 'memory'")
    args = parser.parse_args()
    chosen = [a for a in args.only or [] if a not in ("rows", "memory")] or None
    if not args.only or chosen:
        algorithms(args.sizes, args.cap, chosen)
    if not args.only or "memory" in args.only:
        memory(max(args.sizes), args.cap, chosen)
    if not args.only or "rows" in args.only:
        for n, preds in ((1000, 1), (1000, 30), (1000, 1000), (4000, 300), (4000, 4000)):
            rows(n, preds)
        set_bits()


if __name__ == "__main__":
    main()
