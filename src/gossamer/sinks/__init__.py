"""The crawl's outputs: WARC files, the crawl log, the link graph, the statistics file.

Sinks never call back into the engine (they import nothing of it): the engine hands them
finished facts. Formats are documented in docs/crawler/outputs.md.
"""

from .crawllog import CrawlLog, CrawlLogStats, iso_time, read_crawl_log
from .graph import EDGE_KINDS, Graph, GraphStats, GraphWriter, node_id, read_graph
from .stats import append_run_record, read_run_records, read_stats, write_stats
from .warc import RecordLocation, RecoveryReport, WarcStats, WarcWriter, recover

__all__ = [
    "EDGE_KINDS",
    "CrawlLog",
    "CrawlLogStats",
    "Graph",
    "GraphStats",
    "GraphWriter",
    "RecordLocation",
    "RecoveryReport",
    "WarcStats",
    "WarcWriter",
    "append_run_record",
    "iso_time",
    "node_id",
    "read_crawl_log",
    "read_graph",
    "read_run_records",
    "read_stats",
    "recover",
    "write_stats",
]
