"""Per-link costs of gossamer.urls and gossamer.robots on real link mixes of the simulated web.

    .venv/bin/python bench/bench_urls.py [--hosts 200] [--repeat 5]

Links come from rendered pages of a realistic web with every link form switched on (relative,
../, ?query, //host, MiXeD case, :80, #fragment, whitespace, session ids, junk schemes). Prints
µs per operation (best of --repeat runs), next to the bare can_ada join the hot path is built on
and a calibration loop (xxh3 of a short string), so figures from machines of different speed can
be compared.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

import can_ada
import xxhash
from selectolax.lexbor import LexborHTMLParser

from gossamer.robots import RobotsPolicy
from gossamer.testweb import WebModel, WebSpec
from gossamer.testweb._content import respond
from gossamer.urls import (
    LinkResolver,
    canonicalize,
    fingerprint,
    has_non_html_extension,
    host_key,
    registrable_domain,
)


def collect(hosts: int) -> list[tuple[str, list[str]]]:
    model = WebModel(
        WebSpec(
            seed=9,
            hosts=hosts,
            pages_mean=20,
            profile="realistic",
            overrides=(("link_forms", 1.0), ("session_link", 0.05), ("junk_link", 0.05)),
        )
    )
    pages = []
    for h, host in enumerate(model.hosts):
        for i in range(min(host.pages, 5)):
            r = respond(model, model.resolve(h, model.page_target(h, i)))
            if r.status != 200 or not r.body:
                continue
            tree = LexborHTMLParser(r.body.decode(host.charset, errors="replace"))
            hrefs = [n.attributes.get("href") or "" for n in tree.css("a[href]")]
            pages.append((model.page_url(h, i), hrefs))
    return pages


def best(fn: Callable[[], int], repeat: int) -> tuple[float, int]:
    times = []
    n = 0
    for _ in range(repeat):
        t0 = time.perf_counter()
        n = fn()
        times.append(time.perf_counter() - t0)
    return min(times), n


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hosts", type=int, default=200)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    pages = collect(args.hosts)
    links = sum(len(h) for _, h in pages)
    resolved = [u for page, hrefs in pages for u in map(LinkResolver(page).resolve, hrefs) if u]
    hosts = [host_key(u) for u in resolved]
    print(f"{len(pages)} pages, {links} links ({links / len(pages):.1f}/page), ", end="")
    print(f"{len(resolved)} crawlable, {len(set(hosts))} hosts")

    def bare_join() -> int:
        for page, hrefs in pages:
            base = can_ada.parse(page)
            for href in hrefs:
                (base + href).href  # noqa: B018
        return links

    def resolve() -> int:
        for page, hrefs in pages:
            r = LinkResolver(page).resolve
            for href in hrefs:
                r(href)
        return links

    def each(fn: Callable[[str], object], items: list[str]) -> Callable[[], int]:
        def run() -> int:
            for item in items:
                fn(item)
            return len(items)

        return run

    robots = RobotsPolicy.parse(
        b"User-agent: *\nDisallow: /private/\nDisallow: /*cat=private\nAllow: /private/page-1\n"
        b"User-agent: badbot\nDisallow: /\n",
        user_agent="gossamer/0.1",
    )
    calib = [f"http://www.h{i}.example/" for i in range(1000)]

    def xxh3(text: str) -> int:
        return xxhash.xxh3_64_intdigest(text.encode())

    rows = [
        ("calibration: xxh3_64(str.encode())", each(xxh3, calib)),
        ("can_ada (base + href).href (bare)", bare_join),
        ("LinkResolver.resolve (canonical URL)", resolve),
        ("canonicalize (absolute URL)", each(canonicalize, resolved)),
        ("fingerprint", each(fingerprint, resolved)),
        ("host_key", each(host_key, resolved)),
        ("registrable_domain (cached)", each(registrable_domain, hosts)),
        ("has_non_html_extension", each(has_non_html_extension, resolved)),
        ("RobotsPolicy.allowed", each(robots.allowed, resolved)),
    ]  # fmt: skip
    for name, fn in rows:
        seconds, n = best(fn, args.repeat)
        print(f"{name:42s} {seconds / n * 1e6:7.3f} µs/op  ({n} ops)")


if __name__ == "__main__":
    main()
