"""The extractor `bench_crawl.py --gossamer-extract bench_title:title` runs: each page's
title, as one item (the cost of an extractor that reads the page: issue 31's yardstick)."""

from __future__ import annotations

from collections.abc import Iterator

from gossamer import Page


def title(page: Page) -> Iterator[dict[str, str | None]]:
    yield {"title": page.title}
