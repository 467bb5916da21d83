"""The installed gossamer version, in one place (the CLI, crawl.json, WARC headers)."""

__version__ = "0.1.0"
