"""Per-page CPU of the output sinks on the crawler's hot path, in µs per page.

Feeds each sink what the engine hands it for a crawl of real pages (17 KB HTML from a
`gossamer testweb` export, ~30 links each), the way the engine calls them: one exchange, one
log line and one page's edges per page, `flush()` after every host batch of 20 pages.
Prints, per sink, the best of `--repeat` passes of the calling thread's CPU time (and the
wall time: on a busy machine the two part).

    .venv/bin/python bench/bench_sinks.py [--pages 3000] [--repeat 5] [--sites DIR]
"""

from __future__ import annotations

import argparse
import random
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from gossamer.parse import ParseOptions, parse_html
from gossamer.sinks import CrawlLog, GraphWriter, WarcWriter

BATCH = 20
REQ = (
    b"GET {path} HTTP/1.1\r\nHost: {host}\r\nUser-Agent: gossamer/0.1 (+https://example.org)"
    b"\r\nAccept: text/html,*/*;q=0.8\r\nAccept-Encoding: gzip, deflate, br\r\n\r\n"
)
RESP = (
    b"HTTP/1.1 200 OK\r\nServer: gossamer-testweb\r\nDate: Sun, 22 Nov 2026 10:15:02 GMT\r\n"
    b"Content-Type: text/html; charset=utf-8\r\nContent-Encoding: gzip\r\n"
    b"Content-Length: 5120\r\nLast-Modified: Sun, 22 Nov 2026 09:00:00 GMT\r\n\r\n"
)

# url, request head, response head, body, edges (dst, kind) as the engine passes them
Page = tuple[str, bytes, bytes, bytes, list[tuple[str, str]]]


def load_pages(sites: Path, count: int) -> list[Page]:
    files = sorted(sites.glob("*/**/*.html"))
    random.Random(7).shuffle(files)
    opts = ParseOptions()
    pages: list[Page] = []
    for f in files[:count]:
        host = f.relative_to(sites).parts[0]
        path = "/" + "/".join(f.relative_to(sites).parts[1:])
        url = f"http://{host}{path}"
        body = f.read_bytes()
        links: list[tuple[str, str]] = []
        seen = {url}
        for link in parse_html(body, url, {}, opts).links:  # as the engine hands them over
            if link.url not in seen:
                seen.add(link.url)
                kind = link.kind if link.kind in ("redirect", "canonical") else "link"
                links.append((link.url, kind))
        req = REQ.replace(b"{path}", path.encode()).replace(b"{host}", host.encode())
        pages.append((url, req, RESP, body, links))
    return pages


def best_of(fn: Callable[[], None], n: int, repeat: int) -> tuple[float, float]:
    """(thread CPU, wall) µs per item, best of `repeat` passes."""
    cpu = wall = float("inf")
    for _ in range(repeat):
        c0, w0 = time.thread_time(), time.perf_counter()
        fn()
        c1, w1 = time.thread_time(), time.perf_counter()
        cpu, wall = min(cpu, (c1 - c0) / n * 1e6), min(wall, (w1 - w0) / n * 1e6)
    return cpu, wall


def bench(pages: Sequence[Page], repeat: int, directory: Path) -> None:
    n = len(pages)
    now = time.time()
    opts = ParseOptions()

    def parse_all() -> None:  # the engine's main other work per page, for the wall times
        for url, _, _, body, _ in pages:
            parse_html(body, url, {}, opts)

    _, parse_wall = best_of(parse_all, n, repeat)
    w = WarcWriter(directory / "warc", max_bytes=1 << 40)

    def warc_all(parse: bool = False) -> None:
        for i, (url, req, resp, body, _) in enumerate(pages):
            if parse:
                parse_html(body, url, {}, opts)
            w.write_exchange(url, "127.1.0.1", req, resp, body, now + i * 0.0007)

    cpu, wall = best_of(warc_all, n, repeat)
    _, with_parse = best_of(lambda: warc_all(parse=True), n, repeat)
    w.close()
    print(
        f"  {'WARC':<26} {cpu:6.1f} µs/page CPU, {wall:6.1f} µs/page wall "
        f"(with parse_html: +{with_parse - parse_wall:.1f} µs/page wall over parsing alone)"
    )

    log = CrawlLog(directory / "crawl.log.jsonl")

    def log_all() -> None:
        for i, (url, _, _, body, links) in enumerate(pages):
            log.write(
                url=url,
                status=200,
                outcome="ok",
                nbytes=len(body),
                content_type="text/html; charset=utf-8",
                duration=0.0123 + i * 1e-6,
                depth=3,
                parent=links[0][0] if links else None,
                started_at=now + i * 0.0007,
            )
            if i % BATCH == BATCH - 1:
                log.flush()
        log.flush()

    cpu, wall = best_of(log_all, n, repeat)
    log.close()
    print(f"  {'crawl log':<26} {cpu:6.1f} µs/page CPU, {wall:6.1f} µs/page wall")

    for label, per_page in (("graph, add_edge per link", False), ("graph, add_out_edges", True)):
        g = GraphWriter(directory / f"g{int(per_page)}")

        def graph_all(g: GraphWriter = g, per_page: bool = per_page) -> None:
            for i, (url, _, _, _, links) in enumerate(pages):
                if per_page:
                    g.add_out_edges(url, links)
                else:
                    for dst, kind in links:
                        g.add_edge(url, dst, kind)
                if i % BATCH == BATCH - 1:
                    g.flush()
            g.flush()

        first_cpu, _ = best_of(graph_all, n, 1)
        cpu, _ = best_of(graph_all, n, repeat)
        g.close()
        print(f"  {label:<26} {cpu:6.1f} µs/page CPU (first pass, new nodes: {first_cpu:.1f})")


def main(argv: Sequence[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--pages", type=int, default=3000)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--sites", type=Path, default=Path("/tmp/bc0/export/sites"))
    args = ap.parse_args(argv)
    pages = load_pages(args.sites, args.pages)
    links = sum(len(p[4]) for p in pages) / max(1, len(pages))
    size = sum(len(p[3]) for p in pages) / max(1, len(pages))
    print(f"{len(pages)} pages, {size / 1000:.1f} KB and {links:.1f} links each (µs per page):")
    with tempfile.TemporaryDirectory() as d:
        bench(pages, args.repeat, Path(d))


if __name__ == "__main__":
    main()
