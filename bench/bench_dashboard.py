"""What one read of a crawl directory costs the dashboard (EmbeddedSource.snapshot): the first
read of a long crawl log, a read with nothing new, and a read after N new lines — the read
the dashboard repeats every 0.5 s while a page is open.

    .venv/bin/python bench/bench_dashboard.py                  # 500,000 log lines, ~20 s
    .venv/bin/python bench/bench_dashboard.py --lines 100000 --new 2000

The crawl directory is synthetic (crawl.json, runs.jsonl, a crawl log of --lines lines shaped
as the crawler writes them, a live graph's stats.json) in a temporary directory; no network.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import tempfile
import time
from pathlib import Path

from gossamer.dashboard import EmbeddedSource


def _line(k: int) -> bytes:
    rec = {
        "time": "2026-11-26T05:00:00.000000Z",
        "url": f"http://h{k % 400}.test/p/{k}",
        "status": 200 if k % 50 else 404,
        "bytes": 17_000,
        "type": "text/html",
        "duration": 0.004,
        "depth": k % 20,
        "parent": f"http://h{k % 400}.test/p/{k // 2}",
        "outcome": "ok" if k % 50 else "fetch/status/404",
    }
    return json.dumps(rec).encode() + b"\n"


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--lines", type=int, default=500_000, help="crawl log lines at the start")
    p.add_argument("--new", type=int, default=1_000, help="lines added before each timed read")
    p.add_argument("--reads", type=int, default=20, help="timed reads of each kind")
    args = p.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "crawl"
        (out / "graph").mkdir(parents=True)
        (out / "crawl.json").write_text(json.dumps({"seeds": ["http://h0.test/"]}))
        run = {"event": "start", "run": 1, "time": time.time(), "workers": 1}
        (out / "runs.jsonl").write_text(json.dumps(run) + "\n")
        (out / "lock").write_text(f"{os.getpid()}\n")
        (out / "graph" / "stats.json").write_text(json.dumps({"nodes": 1, "edges": 1}))
        log = out / "crawl.log.jsonl"
        with log.open("wb") as f:
            f.writelines(_line(k) for k in range(args.lines))
        size = log.stat().st_size
        source = EmbeddedSource(out)
        t0, c0 = time.perf_counter(), _cpu()
        first = source.snapshot()
        t1, c1 = time.perf_counter(), _cpu()
        print(f"crawl log: {args.lines:,} lines, {size / 1e6:.0f} MB")
        print(
            f"first read: {t1 - t0:.2f} s wall, {c1 - c0:.2f} s CPU "
            f"({(t1 - t0) / args.lines * 1e6:.1f} µs a line); pages {first['totals']['pages']:,}"
        )
        idle = []
        for _ in range(args.reads):
            t = time.perf_counter()
            source.snapshot()
            idle.append(time.perf_counter() - t)
        print(f"read with nothing new: median {statistics.median(idle) * 1e3:.2f} ms")
        grown = []
        k = args.lines
        for _ in range(args.reads):
            with log.open("ab") as f:
                f.writelines(_line(j) for j in range(k, k + args.new))
            k += args.new
            t = time.perf_counter()
            source.snapshot()
            grown.append(time.perf_counter() - t)
        med = statistics.median(grown)
        print(
            f"read after {args.new:,} new lines: median {med * 1e3:.2f} ms "
            f"({med / args.new * 1e6:.1f} µs a new line)"
        )
        print(
            f"at one read every 0.5 s: {statistics.median(idle) * 2 * 100:.2f} % of one core "
            f"idle, {med * 2 * 100:.2f} % with {args.new * 2:,} lines/s logged"
        )


if __name__ == "__main__":
    main()
