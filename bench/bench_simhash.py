"""What a page's near-duplicate fingerprint costs in-process (parse/simhash.py), and the
`<body>` text it reads, on pages of bench_crawl.py's default web (`gossamer.testweb`, seed 1).

    .venv/bin/python bench/bench_simhash.py                 # ~10 s
    .venv/bin/python bench/bench_simhash.py --pages 300 --calls 2000

Prints the median µs a call (and the 10th percentile, the closest to a quiet machine's) of
`simhash_text` (the compiled one, parse/_simhash.pyx, if it is built) and of its numpy
reference `simhash_text_reference`, alternated page by page, on the web's pages, on a
2,000-word and a 300-word text made of their words, and of the text extraction
(`LexborHTMLParser(...).body.text(separator=" ", strip=True)`, as parse_html does).
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
    args = p.parse_args()
    model = model_for(WebSpec(seed=1, hosts=100, pages_mean=50.0))
    trees, texts = [], []
    for k in range(args.pages):
        host = k % len(model.hosts)
        page = k // len(model.hosts) % model.hosts[host].pages
        charset = model.hosts[host].charset
        tree = LexborHTMLParser(render_page(model, model._plan(host, page)).decode(charset))
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
    print(f"load {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
