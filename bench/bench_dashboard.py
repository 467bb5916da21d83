"""What one read of a crawl directory costs the dashboard (EmbeddedSource.snapshot): the first
read of a long crawl log, a read with nothing new, and a read after N new lines — the read
the dashboard repeats every 0.5 s while a page is open. Then the log tail's part of it (the
same read with the log ring fed and without) and what a log stream's batch costs, and the
top hosts query on a real SQLite frontier of --hosts hosts.

    .venv/bin/python bench/bench_dashboard.py                  # 500,000 log lines, ~30 s
    .venv/bin/python bench/bench_dashboard.py --lines 100000 --new 2000
    .venv/bin/python bench/bench_dashboard.py --lines 20000 --new 1500 --hosts 10000

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
from gossamer.dashboard._hosts import sqlite_top_hosts
from gossamer.dashboard._logtail import LogRing
from gossamer.frontier import Discovered
from gossamer.frontier.sqlite import SqliteFrontier
from gossamer.urls import fingerprint


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
    p.add_argument("--hosts", type=int, default=10_000, help="hosts of the top hosts' frontier")
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
        k = _log_tail(source, log, k, args)
    _top_hosts(args.hosts, args.reads)


def _log_tail(source: EmbeddedSource, log: Path, k: int, args: argparse.Namespace) -> int:
    """The log tail's share of a read after --new lines (the ring fed, or not), and a log
    stream's batch: the ring's `since` and the event's JSON."""
    tail = source._tail
    cost: dict[str, list[float]] = {"with the log ring": [], "without": []}
    for n in range(2 * args.reads):
        with log.open("ab") as f:
            f.writelines(_line(j) for j in range(k, k + args.new))
        k += args.new
        fed = n % 2 == 0
        tail.ring = source.log_ring if fed else None
        t = time.perf_counter()
        source.snapshot()
        cost["with the log ring" if fed else "without"].append(time.perf_counter() - t)
    tail.ring = source.log_ring
    with_ring, without = (statistics.median(v) for v in cost.values())
    extra = with_ring - without
    print(
        f"log tail: a read after {args.new:,} new lines takes {with_ring * 1e3:.2f} ms with "
        f"the log ring fed, {without * 1e3:.2f} ms without: {extra * 1e3:.2f} ms "
        f"({extra / args.new * 1e6:.2f} µs a line; {extra * 2 * 100:.2f} % of one core at "
        f"{args.new * 2:,} lines/s)"
    )
    ring: LogRing = source.log_ring
    batches = []
    for _ in range(args.reads):
        cursor = (ring.added - args.new, ring.warnings - args.new // 50)
        t = time.perf_counter()
        records, skipped, _ = ring.since(cursor)
        json.dumps(records)
        batches.append(time.perf_counter() - t)
    b = statistics.median(batches)
    print(
        f"a log stream's batch ({len(records)} records, {skipped:,} skipped of {args.new:,} "
        f"new): {b * 1e3:.2f} ms; every 0.5 s, {b * 2 * 100:.2f} % of one core a stream"
    )
    return k


def _top_hosts(hosts: int, reads: int) -> None:
    """The top hosts' query on a real SQLite frontier of `hosts` hosts (1 to 20 URLs each,
    some leased)."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "frontier.sqlite"
        f = SqliteFrontier(path)
        items = []
        for h in range(hosts):
            for j in range(1 + h % 20):
                url = f"http://h{h}.test/p{j}"
                items.append(Discovered(url=url, host=f"h{h}.test", depth=1, fp=fingerprint(url)))
        f.put_discovered(items)
        f.lease(min(hosts, 500), 4, now=time.time())
        f.close()
        times = []
        for _ in range(reads):
            t = time.perf_counter()
            top = sqlite_top_hosts(path)
            times.append(time.perf_counter() - t)
        assert top is not None and len(top) == min(20, hosts)
        med = statistics.median(times)
        print(
            f"top hosts of {hosts:,} hosts ({len(items):,} URLs): median {med * 1e3:.2f} ms "
            f"a query (connection included); read at most every 2 s: {med / 2 * 100:.2f} % "
            "of one core"
        )


if __name__ == "__main__":
    main()
