"""What a page's near-duplicate fingerprint costs in-process (parse/simhash.py), and the
`<body>` text it reads, on pages of bench_crawl.py's default web (`gossamer.testweb`, seed 1).

    .venv/bin/python bench/bench_simhash.py                 # ~10 s
    .venv/bin/python bench/bench_simhash.py --pages 300 --calls 2000

Prints the median µs a call (and the 10th percentile, the closest to a quiet machine's) of
`simhash_text` (the compiled one, parse/_simhash.pyx, if it is built) and of its numpy
reference `simhash_text_reference`, alternated page by page, on the web's pages, on a
2,000-word and a 300-word text made of their words, and of the text extraction
(`LexborHTMLParser(...).body.text(separator=" ", strip=True)`, as selectolax builds it).

Then the page path as a crawl takes it: `parse_html` of each page's bytes with the fingerprint
(`simhash_node`: the text read from lexbor's nodes, compiled where it can be) and the lookup
and add in a `NearDups` index (`match`, compiled: _neardup.pyx), against `parse_html` alone
and against the path before those two (the fingerprint of selectolax's `text()` str, the
Python index), the three in turn, each the best of `--rounds` passes over the pages (CPU
time): what detection adds to a page's CPU, and that as a share of `--crawl-ms` (the CPU a
page of a one-worker crawl of that web, from bench_crawl.py; default 0.6 ms).
Figures are printed, never asserted; docs/crawler.md "Near-duplicates" quotes them.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from collections.abc import Callable

from selectolax.lexbor import LexborHTMLParser

from gossamer.parse.simhash import COMPILED, simhash_text, simhash_text_reference
from gossamer.testweb import WebSpec, model_for
from gossamer.testweb._content import render_page


def timed(f: Callable[[], object], calls: int) -> tuple[float, float]:
    """The median and the 10th percentile of `calls` calls of f, in µs."""
    times = []
    clock = time.perf_counter_ns
    for _ in range(calls):
        start = clock()
        f()
        times.append(clock() - start)
    times.sort()
    return statistics.median(times) / 1e3, times[len(times) // 10] / 1e3


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--pages", type=int, default=200, help="pages of the web (default 200)")
    p.add_argument("--calls", type=int, default=1000, help="calls a text (default 1000)")
    p.add_argument("--rounds", type=int, default=7, help="passes of the page path (default 7)")
    p.add_argument(
        "--crawl-ms", type=float, default=0.6, help="a crawl's CPU ms a page (default 0.6)"
    )
    args = p.parse_args()
    model = model_for(WebSpec(seed=1, hosts=100, pages_mean=50.0))
    trees, texts, pages = [], [], []
    for k in range(args.pages):
        host = k % len(model.hosts)
        page = k // len(model.hosts) % model.hosts[host].pages
        charset = model.hosts[host].charset
        raw = render_page(model, model._plan(host, page))
        pages.append((f"http://{model.hosts[host].name}/p{page}", raw, charset))
        tree = LexborHTMLParser(raw.decode(charset))
        if tree.body is not None:
            trees.append(tree)
            texts.append(tree.body.text(separator=" ", strip=True))
    chars = statistics.mean(map(len, texts))
    words_a_page = statistics.mean(t.count(" ") + 1 for t in texts)
    print(f"load {os.getloadavg()[0]:.2f}; {len(texts)} pages of {chars:,.0f} characters and")
    print(f"{words_a_page:,.0f} words of text (mean)")
    print(f"simhash_text: {'compiled' if COMPILED else 'the reference (not built)'}")
    assert all(simhash_text(t) == simhash_text_reference(t) for t in texts)
    calls = max(1, args.calls * 20 // len(texts))
    functions = (("simhash_text", simhash_text), ("simhash_text_reference", simhash_text_reference))
    fp: dict[str, list[tuple[float, float]]] = {name: [] for name, _ in functions}
    for t in texts:  # alternated, page by page: the machine's load is shared alike
        for name, f in functions:
            fp[name].append(timed(lambda t=t, f=f: f(t), calls))  # type: ignore[misc]
    tx = [timed(lambda b=tree.body: b.text(separator=" ", strip=True), calls) for tree in trees]
    rows = [(f"{name}, a page of the web", got) for name, got in fp.items()]
    for name, got in [*rows, ("the <body>'s text, a page", tx)]:
        median = statistics.median(m for m, _ in got)
        print(f"{name}: median {median:.1f} µs (p10 {statistics.median(q for _, q in got):.1f})")
    words = max(texts, key=len).split()
    for n in (2000, 300):
        text = " ".join((words * (n // len(words) + 1))[:n])
        size = len(text.encode())
        for name, f in functions:
            median, p10 = timed(lambda t=text, f=f: f(t), args.calls)  # type: ignore[misc]
            print(f"{name}, {n:,} words ({size:,} bytes): median {median:.1f} µs (p10 {p10:.1f})")
    page_path(pages, args.rounds, args.crawl_ms)
    print(f"load {os.getloadavg()[0]:.2f}")


def page_path(pages: list[tuple[str, bytes, str]], rounds: int, crawl_ms: float) -> None:
    """parse_html with the fingerprint and NearDups.match against parse_html alone."""
    from gossamer.neardup import NearDupIndex, NearDupIndexReference, NearDups
    from gossamer.parse import ParseOptions, parse_html
    from gossamer.parse import simhash as simhash_module
    from gossamer.parse.simhash import simhash_node_text

    plain, with_fp = ParseOptions(), ParseOptions(fingerprint=True)
    heads = [{"content-type": f"text/html; charset={charset}"} for _, _, charset in pages]

    def without(_near: NearDups) -> None:
        for (url, raw, _), head in zip(pages, heads, strict=True):
            parse_html(raw, url, head, plain)

    def detected(near: NearDups) -> None:
        for (url, raw, _), head in zip(pages, heads, strict=True):
            fp = parse_html(raw, url, head, with_fp).simhash
            if fp is not None:
                near.match(fp, url)

    def text_and_python(near: NearDups) -> None:  # before: selectolax's str, Python index
        near.index = NearDupIndexReference(near.index.distance)
        compiled, simhash_module.simhash_node = simhash_module.simhash_node, simhash_node_text
        try:
            detected(near)
        finally:
            simhash_module.simhash_node = compiled

    runs = (("off", without), ("on", detected), ("before", text_and_python))
    best = dict.fromkeys((name for name, _ in runs), float("inf"))
    for _ in range(rounds):  # alternated: the machine's load is shared alike
        for name, f in runs:
            near = NearDups(None)  # (a crawl makes its tables once: not timed)
            started = time.process_time()
            f(near)
            best[name] = min(best[name], (time.process_time() - started) / len(pages) * 1e6)
    walk = simhash_module.simhash_node is not simhash_node_text
    print(
        f"the page path ({len(pages)} pages, best of {rounds}): parse_html "
        f"{best['off']:.1f} µs a page"
    )
    for name, what in (
        ("on", f"the fingerprint ({'read from lexbor' if walk else 'of text()'}) and the "
         f"lookup ({NearDupIndex.__module__})"),
        ("before", "the fingerprint of text()'s str and the lookup in Python"),
    ):  # fmt: skip
        extra = best[name] - best["off"]
        print(
            f"  with {what}: {best[name]:.1f} µs, +{extra:.1f} µs, "
            f"{extra / (crawl_ms * 1000):.1%} of a crawl's {crawl_ms} ms a page"
        )

if __name__ == "__main__":
    main()
