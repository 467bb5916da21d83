"""The live graph of an embedded crawl, computed in a child process from the crawl's own files
(docs/graph.md, "The live graph of a crawl"): `DIR/graph/stats.json` written every few
seconds and at the end, equal then to `gossamer graph stats DIR`.

runner/livegraph.py is the child's entry and decides when to refresh; this module is imported
at the first refresh. It reads the crawl logs (the nodes) and graph parts (the arcs), both
flushed before each batch is counted done, keeping an offset per file, so each refresh parses
only the whole lines added since the last one; a resumed crawl's earlier runs are in the same
files. The graph is assembled as `graph stats DIR` assembles it (`crawl_graph`), so the final
figures are equal by construction. It never runs in the crawl's own process."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from ..sinks.graph import FOLLOW_END as END
from ..sinks.graph import node_id
from ..sinks.stats import write_stats
from ._load import crawl_dirs, crawl_graph, edge_lines, node_urls
from ._rank import UrlLookup

__all__ = ["END", "CrawlFollower", "write_once"]


class CrawlFollower:
    """The crawl graph of `directory` read incrementally from its files (module docstring)."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.nodes: set[int] = set()
        self.urls: dict[int, str] = {}  # node id -> its URL (the top pages are named)
        self._offsets: dict[Path, int] = {}
        self._src: list[npt.NDArray[np.int64]] = []
        self._dst: list[npt.NDArray[np.int64]] = []

    def read(self, *, final: bool = False) -> bool:
        """Parse what the crawl's files gained since the last call; whether anything did.
        `final`: the files are closed, so a last line without its newline counts too (as
        `graph stats DIR` reads a log)."""
        grew = False
        for d in crawl_dirs(self.directory):
            for log in d.crawl_logs():
                data = self._new_bytes(log, whole_lines=not final)
                if data:
                    grew = True
                    for url in node_urls(data.splitlines()):
                        nid = node_id(url)
                        if nid not in self.nodes:
                            self.nodes.add(nid)
                            self.urls[nid] = url
            for part in d.graph_edge_files():
                data = self._new_bytes(part, whole_lines=True)
                if data:
                    grew = True
                    src, dst = edge_lines(data, part)  # (a header: only at offset 0)
                    self._src.append(src)
                    self._dst.append(dst)
        return grew

    def _new_bytes(self, path: Path, *, whole_lines: bool) -> bytes:
        start = self._offsets.get(path, 0)
        try:
            with open(path, "rb") as f:
                f.seek(start)
                data = f.read()
        except OSError:
            return b""
        if whole_lines:
            data = data[: data.rfind(b"\n") + 1]
        self._offsets[path] = start + len(data)
        return data

    def edges(self) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
        """Every arc read so far (src ids, dst ids), repeats kept; the parts concatenated once."""
        if len(self._src) > 1:
            self._src = [np.concatenate(self._src)]
            self._dst = [np.concatenate(self._dst)]
        if not self._src:
            empty = np.empty(0, dtype=np.int64)
            return empty, empty
        return self._src[0], self._dst[0]

    def statistics(self) -> dict[str, Any]:
        """The graph's statistics as `gossamer graph stats DIR --json` computes them, with
        `memory_bytes` the follower's arrays."""
        from . import statistics_of  # (the package imports this module's parent)

        ids = np.fromiter(self.nodes, dtype=np.int64, count=len(self.nodes))
        ids.sort()
        src, dst = self.edges()
        adj, pending = crawl_graph(ids, src, dst)
        memory = ids.nbytes + src.nbytes + dst.nbytes + sys.getsizeof(self.nodes)
        memory += sys.getsizeof(self.urls) + sum(map(sys.getsizeof, self.urls.values()))
        urls = UrlLookup(ids, self.urls)
        return {"memory_bytes": memory, **statistics_of(adj, pending=pending, ids=ids, urls=urls)}


def write_once(follower: CrawlFollower, path: Path, *, final: bool) -> tuple[float, float]:
    """Read, compute and write the statistics; the seconds it took, wall and CPU."""
    began, began_cpu = time.perf_counter(), time.process_time()
    follower.read(final=final)
    stats = follower.statistics()
    took = time.perf_counter() - began
    write_stats(
        path,
        {
            "updated_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            "final": final,
            "compute_s": round(took, 3),
            **stats,
        },
    )
    return took, time.process_time() - began_cpu
