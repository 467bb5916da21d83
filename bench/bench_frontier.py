"""Frontier throughput and footprint: discover, dedupe, lease+complete, a crawl-shaped mix.

    .venv/bin/python bench/bench_frontier.py                    # 1M URLs over 10k hosts
    .venv/bin/python bench/bench_frontier.py --urls 200000 --hosts 2000

Prints, for SqliteFrontier in a temporary directory (or --dir):
- discover: put_discovered of new URLs (calls of --call-size links, the links of one leased
  batch), URLs/s;
- dedupe: the same calls again (all duplicates: the in-memory seen-set path), URLs/s;
- lease+complete: lease(64 hosts, 20 URLs) then complete every batch DONE, URLs/s;
- crawl mix: per page, lease + complete + 30 links of which one is new, µs of frontier CPU per
  page (what bounds a crawler's pages/s);
- footprint: file bytes per URL, resident bytes per seen URL after reopening (a fresh process,
  2 MiB page cache: the in-memory seen-set), and the reopen time (seen-set rebuild).

Only time spent inside frontier calls is counted (building the Discovered records is not).
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import random
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import xxhash

from gossamer.frontier import Discovered, Outcome, SqliteFrontier, Verdict


def rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def url(h: int, k: int) -> Discovered:
    u = f"http://www.h{h}.example/section-{k % 37}/page-{k}.html"
    return Discovered(u, f"www.h{h}.example", 2, xxhash.xxh3_64_intdigest(u.encode()), 2,
                      f"http://www.h{h}.example/section-{k % 37}/page-{k // 30}.html")  # fmt: skip


def calls(n_urls: int, n_hosts: int, call_size: int, seed: int) -> list[tuple[int, int, int]]:
    """(host, first k, count): each call is `call_size` new links of one host."""
    per_host = n_urls // n_hosts
    out = [
        (h, k, min(call_size, per_host - k))
        for h in range(n_hosts)
        for k in range(0, per_host, call_size)
    ]
    random.Random(seed).shuffle(out)
    return out


def file_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.parent.glob(path.name + "*"))


def measure_open(path: str) -> None:
    """Child mode: RSS and time to reopen (rebuild the seen-set)."""
    gc.collect()
    before = rss_bytes()
    t0 = time.perf_counter()
    f = SqliteFrontier(path, cache_mib=2)  # a small page cache: measure the seen-set
    took = time.perf_counter() - t0
    after = rss_bytes()
    n = f.statistics().discovered
    f.close()
    print(json.dumps({"rss_delta": after - before, "open_s": took, "urls": n}))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--urls", type=int, default=1_000_000)
    ap.add_argument("--hosts", type=int, default=10_000)
    ap.add_argument("--call-size", type=int, default=600, help="links per put_discovered call")
    ap.add_argument("--mix-pages", type=int, default=100_000, help="pages in the crawl mix")
    ap.add_argument("--dir", type=Path, help="where to put the database (default: a temp dir)")
    ap.add_argument("--measure-open", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.measure_open:
        measure_open(a.measure_open)
        return 0

    tmp = Path(a.dir or tempfile.mkdtemp(prefix="bench-frontier-"))
    path = tmp / "frontier.sqlite"
    for p in tmp.glob("frontier.sqlite*"):
        p.unlink()
    print(f"SqliteFrontier: {a.urls:,} URLs over {a.hosts:,} hosts, calls of {a.call_size} links")
    print(f"  database: {path}")
    f = SqliteFrontier(path, max_host_errors=None)
    plan = calls(a.urls, a.hosts, a.call_size, 1)

    # 1. discover new URLs
    spent = 0.0
    c0 = cpu()
    added = 0
    for h, k, n in plan:
        batch = [url(h, k + i) for i in range(n)]
        t0 = time.perf_counter()
        added += f.put_discovered(batch)
        spent += time.perf_counter() - t0
    print(f"  discover      {added / spent:>12,.0f} URLs/s  ({spent:.1f} s, {added:,} new)")

    # 2. the same links again: all duplicates
    spent = 0.0
    dups = 0
    for h, k, n in plan[: max(1, len(plan) // 4)]:
        batch = [url(h, k + i) for i in range(n)]
        t0 = time.perf_counter()
        assert f.put_discovered(batch) == 0
        spent += time.perf_counter() - t0
        dups += n
    print(f"  dedupe        {dups / spent:>12,.0f} URLs/s  (all duplicates, in memory)")

    # 3. lease + complete everything
    spent = 0.0
    done = 0
    while True:
        t0 = time.perf_counter()
        batches = f.lease(64, 20)
        if not batches:
            break
        for b in batches:
            f.complete(b.token, [Outcome(u.url, u.fp, Verdict.DONE, 200) for u in b.urls])
        spent += time.perf_counter() - t0
        done += sum(len(b.urls) for b in batches)
        if done >= a.urls // 2:
            break
    print(f"  lease+complete{done / spent:>12,.0f} URLs/s  ({done:,} URLs, batches of ≤20)")
    c1 = cpu()
    f.close()
    size = file_bytes(path)
    print(f"  file          {size / a.urls:>12,.0f} bytes/URL ({size / 2**20:,.0f} MiB incl. WAL)")
    print(f"  cpu so far    {c1 - c0:>12,.1f} s")

    # 4. footprint after reopening in a fresh process
    out = subprocess.run(
        [sys.executable, __file__, "--measure-open", str(path)],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    m = json.loads(out)
    print(
        f"  seen-set      {m['rss_delta'] / m['urls']:>12,.0f} bytes/URL resident after reopen"
        f" (rebuilt in {m['open_s']:.2f} s; + the SQLite page cache, ≤ cache_mib=64 MiB)"
    )

    # 5. crawl mix: lease, complete, discover 30 links per page (1 new) — per-page cost
    f = SqliteFrontier(path, max_host_errors=None)
    rng = random.Random(2)
    next_k = [a.urls // a.hosts] * a.hosts
    pages = 0
    spent = 0.0
    while pages < a.mix_pages:
        t0 = time.perf_counter()
        batches = f.lease(64, 20)
        spent += time.perf_counter() - t0
        if not batches:
            break
        for b in batches:
            h = int(b.host.split(".")[1][1:])
            links: list[Discovered] = []
            for _ in b.urls:
                old = [url(h, rng.randrange(next_k[h])) for _ in range(29)]
                links += old
                links.append(url(h, next_k[h]))
                next_k[h] += 1
            acks = [Outcome(u.url, u.fp, Verdict.DONE, 200) for u in b.urls]
            t0 = time.perf_counter()
            f.complete(b.token, acks)
            f.put_discovered(links)
            spent += time.perf_counter() - t0
            pages += len(b.urls)
    f.close()
    print(
        f"  crawl mix     {spent / pages * 1e6:>12,.1f} µs/page"
        f"  ({pages / spent:,.0f} pages/s of frontier work; 30 links/page, 1 new)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
