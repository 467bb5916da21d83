"""The composition root: builds a crawl from its settings and runs and supervises its
processes (the embedded crawl, its pool, the live-graph child). Imports no cluster code."""
