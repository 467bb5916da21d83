"""The extractors of docs/python.md's tutorial, for `gossamer crawl --extract shop:prices`
or `--extract shop:Catalogue` (with `PYTHONPATH=examples`)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import gossamer


def prices(page: gossamer.Page) -> Iterator[dict[str, Any]]:
    """A page's title and price (its `.price` element), when it has one."""
    node = page.css_first(".price")
    if node is not None:
        yield {"title": page.title, "price": float(node.text())}


class Catalogue:
    """Every page's title; follows only the links to product and category pages."""

    def extract(self, page: gossamer.Page) -> dict[str, Any]:
        return {"url": page.url, "title": page.title}

    def follow(self, page: gossamer.Page, link: gossamer.Link) -> bool:
        return "/product/" in link.url or "/category/" in link.url
