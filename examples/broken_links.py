"""A broken-link checker: crawl a site and print every link that answers 4xx or 5xx (or
cannot be fetched), with the pages that link to it.

    python examples/broken_links.py https://example.org/ [--allow-private] [--delay 1]

Exit status 1 when a broken link was found, 0 when none. The crawl keeps to the seed's
host (gossamer's default scope) and is polite (robots.txt, one request a second per host:
--delay 0 for a local server of your own)."""

from __future__ import annotations

import argparse
import sys
from collections import defaultdict
from typing import Any

import gossamer


def broken_links(seed: str, **settings: Any) -> dict[str, tuple[int, list[str]]]:
    """{broken URL: (status, [pages linking to it])} of the site crawled from `seed`."""
    sources: dict[str, set[str]] = defaultdict(set)  # a URL -> the pages linking to it
    status: dict[str, int] = {}
    for page in gossamer.crawl(seed, **settings):
        status[page.url] = page.status
        for url, _kind in page.followed:  # the links the crawl followed from the page
            sources[url].add(page.url)
    return {
        url: (code, sorted(sources[url]))
        for url, code in sorted(status.items())
        if code >= 400
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("seed", help="the site's start URL")
    parser.add_argument("--allow-private", action="store_true", help="a site on this machine")
    parser.add_argument("--delay", type=float, default=1.0, help="seconds between requests")
    args = parser.parse_args()
    broken = broken_links(args.seed, allow_private=args.allow_private, delay=args.delay)
    for url, (code, pages) in broken.items():
        print(f"{code} {url}")
        for page in pages:
            print(f"    linked from {page}")
    print(f"{len(broken)} broken link(s)", file=sys.stderr)
    return 1 if broken else 0


if __name__ == "__main__":
    sys.exit(main())
