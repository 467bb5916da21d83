"""A title and meta extractor: every HTML page's title, meta description, canonical URL and
first heading, as items in the crawl's feed (DIR/items.jsonl), from the site's links and
its sitemaps.

As an extractor of `gossamer crawl`, in every worker:

    PYTHONPATH=examples gossamer crawl https://example.org/ -o out --sitemaps \\
        --extract titles_meta:extract

or run here, which does the same from Python and prints the feed's lines:

    python examples/titles_meta.py https://example.org/ out [--allow-private] [--delay 1]
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import gossamer


def extract(page: gossamer.Page) -> Iterator[dict[str, Any]]:
    """One item an HTML page answered 200: its title, description, canonical and h1."""
    if page.status != 200 or not page.is_html:
        return
    description = page.css_first('meta[name="description"]')
    canonical = next((link.url for link in page.links if link.kind == "canonical"), None)
    h1 = page.css_first("h1")
    yield {
        "title": page.title,
        "description": description.attributes.get("content") if description else None,
        "canonical": canonical,
        "h1": h1.text(strip=True) if h1 else None,
        "depth": page.depth,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("seed", help="the site's start URL")
    parser.add_argument("output", type=Path, help="the crawl directory (resumed if it exists)")
    parser.add_argument("--allow-private", action="store_true", help="a site on this machine")
    parser.add_argument("--delay", type=float, default=1.0, help="seconds between requests")
    args = parser.parse_args()
    sys.path.insert(0, str(Path(__file__).resolve().parent))  # the crawl imports this module
    crawl = gossamer.Crawl(
        args.seed,
        args.output,
        extract="titles_meta:extract",
        use_sitemaps=True,
        allow_private=args.allow_private,
        delay=args.delay,
    )
    with crawl:
        pages = sum(1 for _ in crawl)
    feed = args.output / "items.jsonl"
    lines = feed.read_text().splitlines() if feed.exists() else []
    for line in lines:
        print(json.dumps(json.loads(line)["item"] | {"url": json.loads(line)["url"]}))
    print(f"{pages} pages crawled, {len(lines)} items in {feed}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
