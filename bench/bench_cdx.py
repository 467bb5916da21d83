"""What the CDX index of a crawl costs: lines written by the WARC writer as it goes, against
cdxj-indexer re-reading the WARC files at the end of the crawl.

Crawls the simulated web (served in this process, `--hosts 400`: 20,788 pages) with a pool
of 2 workers into a temporary directory, then prints:

- the crawl's wall time, and its WARC files (records, MB);
- `write_crawl_index` as the crawl ran it (merging the per-file indexes the writers wrote);
- the same with no per-file index, i.e. cdxj-indexer reading every WARC file (what the end
  of the crawl would cost with the library alone);
- per exchange, `WarcWriter.write_exchange` with `cdx=True` against `cdx=False` over the
  crawl's own exchanges (best of `--repeat`, CPU time of this thread).

    .venv/bin/python bench/bench_cdx.py [--hosts 400] [--repeat 3] [--exchanges 5000]
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from warcio.archiveiterator import ArchiveIterator

from gossamer.config import load_settings
from gossamer.crawldir import CDX_PARTS
from gossamer.runner.run import run_crawl
from gossamer.sinks import WarcWriter
from gossamer.sinks.cdx import write_crawl_index
from gossamer.testweb import WebSpec, serve_in_thread

Exchange = tuple[str, bytes, bytes, float]  # url, response head, body, time


def crawl(directory: Path, hosts: int) -> float:
    spec = WebSpec(seed=1, hosts=hosts)
    with serve_in_thread(spec) as web:
        resolve = web.write_resolve_file(directory / "resolve.txt")
        settings = load_settings(
            {
                "seeds": [web.url(0, 0)],
                "output": directory / "crawl",
                "scope": "all",
                "resolve_file": resolve,
                "allow_private": True,
                "delay": 0.0,
                "workers": 2,
            }
        )
        start = time.perf_counter()
        code = run_crawl(settings)
        elapsed = time.perf_counter() - start
    if code != 0:
        sys.exit(f"the crawl failed: exit {code}")
    return elapsed


def exchanges(warc_dir: Path, count: int) -> list[Exchange]:
    out: list[Exchange] = []
    for path in sorted(warc_dir.glob("*.warc.gz")):
        with path.open("rb") as f:
            for rec in ArchiveIterator(f):
                if rec.rec_type != "response":
                    continue
                head = rec.http_headers.to_bytes()
                out.append((rec.rec_headers.get_header("WARC-Target-URI"), head,
                            rec.content_stream().read(), time.time()))  # fmt: skip
                if len(out) >= count:
                    return out
    return out


def writer_us(pages: Sequence[Exchange], directory: Path, cdx: bool, repeat: int) -> float:
    req = b"GET / HTTP/1.1\r\nHost: bench.example\r\n\r\n"
    best = float("inf")
    for k in range(repeat):
        target = directory / f"w-{cdx}-{k}"
        start = time.thread_time()
        with WarcWriter(target, cdx=cdx) as w:
            for url, head, body, when in pages:
                w.write_exchange(url, "127.0.0.1", req, head, body, when, decoded=False)
        best = min(best, time.thread_time() - start)
        shutil.rmtree(target)
    return best / len(pages) * 1e6


def main(argv: Sequence[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--hosts", type=int, default=400)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--exchanges", type=int, default=5000)
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="bench-cdx-") as tmp:
        directory = Path(tmp)
        crawl_s = crawl(directory, args.hosts)
        warc_dir = directory / "crawl" / "warc"
        warcs = sorted(warc_dir.glob("*.warc.gz"))
        mb = sum(p.stat().st_size for p in warcs) / 1e6
        start = time.perf_counter()
        merged = write_crawl_index(warc_dir)
        merge_s = time.perf_counter() - start
        index = (warc_dir / "index.cdxj").read_text()
        library_s = float("inf")
        for _ in range(args.repeat):
            shutil.rmtree(warc_dir / CDX_PARTS)
            start = time.perf_counter()
            reread = write_crawl_index(warc_dir)
            library_s = min(library_s, time.perf_counter() - start)
        assert len(reread.indexed_by_library) == len(warcs)
        same = (warc_dir / "index.cdxj").read_text() == index
        pages = exchanges(warc_dir, args.exchanges)
        with_cdx = writer_us(pages, directory, True, args.repeat)
        without = writer_us(pages, directory, False, args.repeat)
    n = merged.lines
    print(f"crawl: {n:,} indexed records (responses) in {len(warcs)} WARC files, {mb:,.0f} MB,")
    print(f"       crawled in {crawl_s:.2f} s (2 workers)")
    print("| index written by | end-of-crawl s | µs/record | share of the crawl's wall time |")
    print("|---|---:|---:|---:|")
    print(f"| merging the writers' per-file indexes | {merge_s:.3f} | {merge_s / n * 1e6:.1f} | "
          f"{merge_s / crawl_s:.1%} |")  # fmt: skip
    print(f"| cdxj-indexer reading every WARC (best of {args.repeat}) | {library_s:.2f} | "
          f"{library_s / n * 1e6:.0f} | {library_s / crawl_s:.0%} |")  # fmt: skip
    print(f"identical index both ways: {same}")
    print(f"WarcWriter.write_exchange over {len(pages):,} of the crawl's exchanges (best of "
          f"{args.repeat}, thread CPU): cdx=True {with_cdx:.1f} µs, cdx=False {without:.1f} µs, "
          f"the index lines {with_cdx - without:.1f} µs an exchange")  # fmt: skip


if __name__ == "__main__":
    main()
