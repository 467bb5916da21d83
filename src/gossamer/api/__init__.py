"""The public Python API's implementation (gossamer/__init__.py exports it; docs/python.md):
a crawl run from a program (`_crawl.py`)."""

from ._crawl import Crawl, Stats, Summary, acrawl, crawl

__all__ = ["Crawl", "Stats", "Summary", "acrawl", "crawl"]
