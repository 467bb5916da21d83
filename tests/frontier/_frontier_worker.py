"""A crawl worker over a synthetic web, run as a separate process by the SQLite tests.

usage: python _frontier_worker.py DB HOSTS PAGES [--max-pages N] [--lease-ttl S] [--pause S]

Page i of host h links to pages 2i+1 and 2i+2 of h and page i of the next host, so every
page is reachable from the seeds (page 0 of each host, put by the parent). After each
committed `complete` the worker prints `D fp fp …` (the URLs it marked done) and flushes, so
a parent that kills it knows what was committed.
"""

from __future__ import annotations

import argparse
import sys
import time

import xxhash

from gossamer.frontier import Discovered, Outcome, SqliteFrontier, Verdict


def page(h: int, i: int, depth: int = 0, parent: str | None = None) -> Discovered:
    url = f"http://h{h}.example/p{i}"
    return Discovered(url, f"h{h}.example", depth, xxhash.xxh3_64_intdigest(url.encode()),
                      depth, parent)  # fmt: skip


def parse(url: str) -> tuple[int, int]:
    host, _, path = url.removeprefix("http://").partition("/")
    return int(host[1:].split(".")[0]), int(path[1:])


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("db")
    ap.add_argument("hosts", type=int)
    ap.add_argument("pages", type=int)
    ap.add_argument("--max-pages", type=int)
    ap.add_argument("--lease-ttl", type=float, default=600.0)
    ap.add_argument("--pause", type=float, default=0.0)
    ap.add_argument("--deadline", type=float, default=60.0)
    a = ap.parse_args()
    end = time.monotonic() + a.deadline
    f = SqliteFrontier(a.db, lease_ttl=a.lease_ttl, max_pages=a.max_pages, busy_timeout=30.0)
    while time.monotonic() < end:
        batches = f.lease(4, 5)
        if not batches:
            s = f.statistics()
            if s.leased == 0 and (s.queued == 0 or s.published == a.max_pages):
                break
            time.sleep(0.002)
            continue
        for b in batches:
            found = []
            for u in b.urls:
                h, i = parse(u.url)
                found += [page(h, j, u.depth + 1, u.url) for j in (2 * i + 1, 2 * i + 2)
                          if j < a.pages]  # fmt: skip
                found.append(page((h + 1) % a.hosts, i, u.depth + 1, u.url))
            if a.pause:
                time.sleep(a.pause)
            f.complete(b.token, [Outcome(u.url, u.fp, Verdict.DONE, 200) for u in b.urls])
            print("D", *(u.fp for u in b.urls), flush=True)
            f.put_discovered(found)
    f.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
