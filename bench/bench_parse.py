"""CPU cost of the per-page work after the fetch: parsing and the output sinks.

    .venv/bin/python bench/bench_parse.py                  # about a minute
    .venv/bin/python bench/bench_parse.py --pages 2000 --repeat 3
    .venv/bin/python bench/bench_parse.py --parse-only --repeat 7   # parse_html only

All figures are CPU time of this process. Pages come from the simulated web (`respond()`,
the bytes the server sends): a clean web (absolute links, ~17 KB, ~30 links a page) and a
realistic one (relative link forms, charsets, malformed markup). Prints µs per page of lexbor's
parse alone and of `parse_html` (first pass, as a crawl sees pages: the link cache warming up;
and best of --repeat), with glibc's default heap trimming and then with the trim threshold
raised (PERF-NOTES' heap fix); µs per sitemap of 1,000 URLs; µs per exchange of `WarcWriter`
(ISA-L gzip, zlib gzip, no gzip); µs per edge of `GraphWriter` and per line of `CrawlLog`.
Figures are printed, never asserted.
"""

from __future__ import annotations

import argparse
import ctypes
import ctypes.util
import gzip
import statistics
import tempfile
import time
import zlib
from collections.abc import Callable, Sequence
from pathlib import Path

from selectolax.lexbor import LexborHTMLParser

import gossamer.parse.links as links_mod
from gossamer.parse import ParseOptions, parse_html, parse_sitemap
from gossamer.sinks import CrawlLog, GraphWriter, WarcWriter
from gossamer.testweb import WebSpec, model_for
from gossamer.testweb._content import respond, sitemap_body

Page = tuple[bytes, str, dict[str, str]]
REQ = b"GET / HTTP/1.1\r\nHost: www.h0.example\r\nUser-Agent: gossamer/0.1\r\n\r\n"


def pages_of(profile: str, count: int) -> list[Page]:
    model = model_for(WebSpec(seed=1, hosts=400, profile=profile))
    out: list[Page] = []
    per_host = max(1, count // 200)
    for h in range(len(model.hosts)):
        for i in range(min(model.hosts[h].pages, per_host)):
            r = respond(model, model.resolve(h, model.page_target(h, i)), attempt=3)
            headers = dict(r.headers)
            if r.status == 200 and "Content-Encoding" not in headers:
                out.append((r.body, model.page_url(h, i), headers))
        if len(out) >= count:
            break
    return out[:count]


def per_item(fn: Callable[[], object], n: int, repeat: int) -> tuple[float, float]:
    """(first run, best run) in CPU µs per item: process CPU time, not wall time, so that other
    work on the machine's two cores does not count (all of this is single-threaded)."""
    times = []
    for _ in range(repeat):
        t = time.process_time()
        fn()
        times.append(time.process_time() - t)
    return times[0] / n * 1e6, min(times) / n * 1e6


def bench_parse(label: str, pages: Sequence[Page], repeat: int) -> None:
    opts = ParseOptions()
    for cache in links_mod._absolute_cache.values():
        cache.clear()
    kb = statistics.mean(len(p[0]) for p in pages) / 1000
    nlinks = statistics.mean(len(parse_html(b, u, h, opts).links) for b, u, h in pages)
    for cache in links_mod._absolute_cache.values():
        cache.clear()

    def parse_all() -> None:
        for b, u, h in pages:
            parse_html(b, u, h, opts)

    def lexbor_all() -> None:
        for b, _, _ in pages:
            LexborHTMLParser(b)

    first, best = per_item(parse_all, len(pages), repeat)
    _, lex = per_item(lexbor_all, len(pages), repeat)
    print(
        f"  {label:<34} {len(pages):>6} pages {kb:5.1f} KB {nlinks:5.1f} links | lexbor parse "
        f"{lex:6.1f} µs | parse_html first pass {first:6.1f} µs, best {best:6.1f} µs"
    )


def heap_fix() -> bool:
    """mallopt(M_TRIM_THRESHOLD, 256 MiB): stop glibc returning freed pages after each doc."""
    libc_name = ctypes.util.find_library("c")
    if not libc_name:
        return False
    libc = ctypes.CDLL(libc_name)
    m_trim_threshold = -1
    return bool(libc.mallopt(m_trim_threshold, 256 * 1024 * 1024))


def bench_sitemaps(repeat: int) -> None:
    model = model_for(WebSpec(seed=3, hosts=6, pages_mean=900))
    h = max(range(len(model.hosts)), key=lambda k: model.hosts[k].pages)
    body = sitemap_body(model, h, 0)
    packed = gzip.compress(body)
    url = f"http://{model.hosts[h].name}/sitemap-0.xml.gz"
    n = len(parse_sitemap(body, url).urls)
    _, xml = per_item(lambda: parse_sitemap(body, url), 1, repeat)
    _, gz = per_item(lambda: parse_sitemap(packed, url), 1, repeat)
    text = "\n".join(parse_sitemap(body, url).urls).encode()
    _, txt = per_item(lambda: parse_sitemap(text, url), 1, repeat)
    print(
        f"  sitemap of {n} URLs: XML {xml / 1000:.2f} ms, gzip XML {gz / 1000:.2f} ms, "
        f"text {txt / 1000:.2f} ms ({xml / n:.1f} µs per URL)"
    )


def bench_warc(pages: Sequence[Page], repeat: int) -> None:
    with tempfile.TemporaryDirectory(dir="/dev/shm" if Path("/dev/shm").is_dir() else None) as d:
        heads = []
        for _, _, h in pages:
            head = "HTTP/1.1 200 OK\r\n" + "".join(f"{k}: {v}\r\n" for k, v in h.items())
            heads.append(head.encode() + b"\r\n")
        variants: list[tuple[str, dict[str, object]]] = [
            ("gzip, ISA-L level 1 (default)", {}),
            ("gzip, zlib level 1", {"zlib": 1}),
            ("gzip, zlib level 6", {"zlib": 6}),
            ("no gzip", {"gzip": False}),
        ]
        total = sum(len(p[0]) for p in pages)
        for k, (label, opts) in enumerate(variants):
            w = WarcWriter(Path(d) / str(k), gzip=bool(opts.get("gzip", True)), max_bytes=1 << 40)
            if "zlib" in opts:
                level = int(str(opts["zlib"]))
                w._compress = lambda data, level=level: zlib.compress(data, level, 31)  # type: ignore[misc]

            def write_all(w: WarcWriter = w) -> None:
                now = time.time()
                for (body, url, _), head in zip(pages, heads, strict=True):
                    w.write_exchange(url, "127.1.0.1", REQ, head, body, now)

            first, best = per_item(write_all, len(pages), repeat)
            size = w.statistics().bytes / repeat
            w.close()
            print(
                f"  WARC {label:<31} {best:6.1f} µs/exchange (first {first:6.1f}), "
                f"{size / total:5.3f} of the body bytes"
            )


def bench_graph_and_log(pages: Sequence[Page], repeat: int) -> None:
    opts = ParseOptions()
    parsed = [(u, [link.url for link in parse_html(b, u, h, opts).links]) for b, u, h in pages]
    edges = sum(len(dsts) for _, dsts in parsed)
    with tempfile.TemporaryDirectory(dir="/dev/shm" if Path("/dev/shm").is_dir() else None) as d:
        g = GraphWriter(d)

        def add_all() -> None:
            for src, dsts in parsed:
                for dst in dsts:
                    g.add_edge(src, dst, "link")

        first, best = per_item(add_all, edges, repeat)
        g.close()
        print(f"  graph add_edge: {first:5.2f} µs/edge first pass (new nodes), {best:5.2f} best")
        log = CrawlLog(Path(d) / "crawl.jsonl")

        def log_all() -> None:
            for (body, url, h), _ in zip(pages, parsed, strict=True):
                log.write(
                    url=url,
                    status=200,
                    outcome="ok",
                    nbytes=len(body),
                    content_type=h.get("Content-Type"),
                    duration=0.0123,
                    depth=3,
                    parent=url,
                )

        _, best = per_item(log_all, len(pages), repeat)
        log.close()
        print(f"  crawl log write: {best:5.2f} µs/line")


def main(argv: Sequence[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--pages", type=int, default=3000, help="pages per web (default 3000)")
    ap.add_argument("--repeat", type=int, default=3, help="passes per measurement (default 3)")
    ap.add_argument(
        "--parse-only", action="store_true", help="parse_html only, default heap (no sinks)"
    )
    args = ap.parse_args(argv)
    print("building pages ...", flush=True)
    webs = {p: pages_of(p, args.pages) for p in ("clean", "realistic")}
    print("parse_html (µs per page):")
    for profile, pages in webs.items():
        bench_parse(f"{profile}, glibc default heap", pages, args.repeat)
    if args.parse_only:
        return
    fixed = heap_fix()
    for profile, pages in webs.items():
        bench_parse(f"{profile}, heap fix {'on' if fixed else 'unavailable'}", pages, args.repeat)
    print("sitemaps:")
    bench_sitemaps(args.repeat)
    print("sinks (clean web pages):")
    bench_warc(webs["clean"], args.repeat)
    bench_graph_and_log(webs["clean"], args.repeat)


if __name__ == "__main__":
    main()
