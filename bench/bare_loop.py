"""The floor for bench/bench_crawl.py: the least a Python crawler of the simulated web does.

    .venv/bin/python bench/bare_loop.py --seed http://www.h0.example/ \
        --resolve-file export/resolve.txt --concurrency 64 --stats-out bare.json

One process, one thread: pycurl's multi interface (libcurl keeps the connections alive) and
selectolax's link extraction, a set of seen URLs and a deque of URLs per host — no frontier,
no robots.txt, no WARC, no crawl log, no graph, no URL canonicalisation beyond dropping the
fragment. The same shape as the crawlers it is the floor of: every host of the web
(`*.example`), one request in flight per host, `--concurrency` in all, no delay (every request
of the simulated web's hosts share one IP on the shared-IP web: the concurrency, at most the
`per_ip` the others get, is then the limit per IP too). What it does not do, every crawler
must: so gossamer's CPU a page over this one's is the price of a real crawler, in Python.
"""

from __future__ import annotations

import argparse
import collections
import json
import sys
import time
from io import BytesIO
from pathlib import Path
from urllib.parse import urldefrag, urljoin, urlsplit

import pycurl
from selectolax.lexbor import LexborHTMLParser as HTMLParser


def connect_to(path: Path) -> list[str]:
    """`HOST:PORT:IP:PORT` lines (curl --connect-to syntax, gossamer's resolve file)."""
    lines = (line.strip() for line in path.read_text().splitlines())
    return [line for line in lines if line and not line.startswith("#")]


def crawl(
    seeds: list[str], mapping: list[str], concurrency: int, user_agent: str
) -> dict[str, int]:
    seen: set[str] = set(seeds)
    todo: dict[str, collections.deque[str]] = collections.defaultdict(collections.deque)
    for url in seeds:
        todo[urlsplit(url).hostname or ""].append(url)
    ready = collections.deque(todo)  # hosts with URLs and no request in flight
    busy: set[str] = set()
    multi = pycurl.CurlMulti()
    free = []
    for _ in range(concurrency):
        c = pycurl.Curl()
        c.setopt(pycurl.CONNECT_TO, mapping)
        c.setopt(pycurl.USERAGENT, user_agent)
        c.setopt(pycurl.NOSIGNAL, 1)
        c.setopt(pycurl.TIMEOUT, 30)
        free.append(c)
    pages = requests = 0

    def start() -> None:
        while free and ready:
            host = ready.popleft()
            queue = todo[host]
            if not queue:
                continue
            url = queue.popleft()
            c = free.pop()
            buf = BytesIO()
            c.setopt(pycurl.URL, url)
            c.setopt(pycurl.WRITEDATA, buf)
            c.bench = (url, host, buf)  # type: ignore[attr-defined]
            busy.add(host)
            multi.add_handle(c)

    start()
    while busy:
        while multi.perform()[0] == pycurl.E_CALL_MULTI_PERFORM:
            pass
        _, ok, failed = multi.info_read()
        for c in ok + [f[0] for f in failed]:
            multi.remove_handle(c)
            url, host, buf = c.bench  # type: ignore[attr-defined]
            requests += 1
            status = c.getinfo(pycurl.RESPONSE_CODE)
            ctype = c.getinfo(pycurl.CONTENT_TYPE) or ""
            free.append(c)
            busy.discard(host)
            if status == 200 and ctype.startswith("text/html"):
                pages += 1
                for node in HTMLParser(buf.getvalue()).css("a[href]"):
                    href = node.attributes.get("href")
                    if not href:
                        continue
                    link = urldefrag(urljoin(url, href))[0]
                    if link in seen or not link.startswith(("http://", "https://")):
                        continue
                    lhost = urlsplit(link).hostname or ""
                    if not lhost.endswith(".example"):
                        continue
                    seen.add(link)
                    if not todo[lhost] and lhost not in busy:
                        ready.append(lhost)
                    todo[lhost].append(link)
            if todo[host]:
                ready.append(host)
        start()
        if busy:
            multi.select(1.0)
    return {"pages": pages, "requests": requests, "seen": len(seen)}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seed", action="append", required=True)
    p.add_argument("--resolve-file", type=Path, required=True)
    p.add_argument("--concurrency", type=int, default=64)
    p.add_argument("--user-agent", default="bare-loop/1.0")
    p.add_argument("--stats-out", type=Path, required=True)
    args = p.parse_args(argv)
    began = time.monotonic()
    stats = crawl(args.seed, connect_to(args.resolve_file), args.concurrency, args.user_agent)
    out = {"elapsed_s": time.monotonic() - began, **stats}
    args.stats_out.write_text(json.dumps(out, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
