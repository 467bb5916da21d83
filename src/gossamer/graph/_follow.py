"""The live graph of an embedded crawl, computed in a child process from the crawl's own files
(docs/graph.md, "The live graph of a crawl"): `DIR/graph/stats.json` written every few
seconds and at the end, equal then to `gossamer graph stats DIR`.

runner/livegraph.py is the child's entry and decides when to refresh; this module is imported
at the first refresh. It reads the crawl logs (the nodes) and graph parts (the arcs), both
flushed before each batch is counted done, keeping an offset per file, so each refresh parses
only the whole lines added since the last one; a resumed crawl's earlier runs are in the same
files. What it read updates the graph's counts incrementally (`GraphCounts`, graph/_counts.py:
nodes, edges, components, degrees) at every refresh; a *full* refresh also computes the
PageRank, the top pages, the power-law fits and the distances on the graph `crawl_graph`
would assemble (the same nodes, in sorted-id order, and the same edges), so the final figures
equal `graph stats DIR`'s. Between two full refreshes the figures of the last one are kept,
with their age (`distances_age_s`, `ranking_age_s`). It never runs in the crawl's own
process."""

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
from ._counts import GraphCounts
from ._load import crawl_dirs, edge_lines, int_tokens, node_urls
from ._rank import UrlLookup

__all__ = ["END", "CrawlFollower", "write_once"]

_KINDS = (b"link", b"redirect", b"canonical", b"sitemap")  # sinks/graph.py's EDGE_KINDS


def _edge_ids(data: bytes, path: Path) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """`edge_lines` (src ids, dst ids) three times faster: the kind words cut out and the
    ids parsed in C; `edge_lines` itself (and its error) for anything else."""
    body = data[data.find(b"\n") + 1 :] if data.startswith(b"src\t") else data
    for kind in _KINDS:
        body = body.replace(b"\t" + kind + b"\n", b"\n")
    values = int_tokens(body)
    if values is None or len(values) % 2 or body.count(b"\n") * 2 != len(values):
        return edge_lines(data, path)
    return values[0::2].copy(), values[1::2].copy()


class CrawlFollower:
    """The crawl graph of `directory` read incrementally from its files (module docstring)."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.counts = GraphCounts()
        self.urls: dict[int, str] = {}  # node id -> its URL (the top pages are named)
        self.arcs = 0  # arcs read (repeats included)
        self._offsets: dict[Path, int] = {}
        self._full: dict[str, Any] | None = None  # the last full refresh's figures
        self._full_at = 0.0  # ... and when (time.monotonic)

    @property
    def nodes(self) -> Any:
        """The node ids read so far (a set-like view)."""
        return self.counts.index.keys()

    def read(self, *, final: bool = False) -> bool:
        """Parse what the crawl's files gained since the last call and update the counts;
        whether anything was new. `final`: the files are closed, so a last line without its
        newline counts too (as `graph stats DIR` reads a log)."""
        grew = False
        new_nodes: list[int] = []
        srcs: list[npt.NDArray[np.int64]] = []
        dsts: list[npt.NDArray[np.int64]] = []
        for d in crawl_dirs(self.directory):
            for log in d.crawl_logs():
                data = self._new_bytes(log, whole_lines=not final)
                if data:
                    grew = True
                    for url in node_urls(data.splitlines()):
                        nid = node_id(url)
                        if nid not in self.urls:
                            self.urls[nid] = url
                            new_nodes.append(nid)
            for part in d.graph_edge_files():
                data = self._new_bytes(part, whole_lines=True)
                if data:
                    grew = True
                    src, dst = _edge_ids(data, part)  # (a header: only at offset 0)
                    srcs.append(src)
                    dsts.append(dst)
        if grew:
            empty = np.empty(0, dtype=np.int64)
            src = np.concatenate(srcs) if srcs else empty
            dst = np.concatenate(dsts) if dsts else empty
            self.arcs += len(src)
            self.counts.update(new_nodes, src, dst)
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

    def memory_bytes(self) -> int:
        urls = sys.getsizeof(self.urls) + sum(map(sys.getsizeof, self.urls.values()))
        return self.counts.memory_bytes() + urls

    def statistics(self, *, full: bool = True) -> dict[str, Any]:
        """The graph's statistics as `gossamer graph stats DIR --json` computes them, with
        `memory_bytes` the follower's arrays. `full`: PageRank, top pages, power-law fits and
        distances computed now; else the counts alone, with the last full refresh's other
        figures and their age (`distances_age_s`, `ranking_age_s`; null before any)."""
        if full:
            from . import statistics_of  # (the package imports this module's parent)

            adj, ids = self.counts.adjacency()
            urls = UrlLookup(ids, self.urls)
            stats = statistics_of(adj, pending=self.counts.figures()["pending"], ids=ids, urls=urls)
            self._full, self._full_at = stats, time.monotonic()
            return {"memory_bytes": self.memory_bytes(), "distances_age_s": 0.0,
                    "ranking_age_s": 0.0, **stats}  # fmt: skip
        began = time.perf_counter()
        counts = self.counts.figures()
        last, age = self._full or {}, round(time.monotonic() - self._full_at, 1)
        for side in ("in_degree", "out_degree"):  # the fits: the last full refresh's
            counts[side]["power_law"] = (last.get(side) or {}).get("power_law")
        seconds = dict(last.get("seconds") or {})
        seconds["structure"] = round(time.perf_counter() - began, 3)
        # every other figure (PageRank, top pages, distances, `exact`): the last full one's
        return {**last, "memory_bytes": self.memory_bytes(),
                "distances_age_s": age if last else None,
                "ranking_age_s": age if last else None, **counts,
                "seconds": seconds}  # fmt: skip


def write_once(
    follower: CrawlFollower, path: Path, *, final: bool, full: bool = True
) -> tuple[float, float]:
    """Read, compute (`full`: every figure; else the counts, the rest carried over) and write
    the statistics; the seconds it took, wall and CPU."""
    began, began_cpu = time.perf_counter(), time.process_time()
    follower.read(final=final)
    stats = follower.statistics(full=full or final)
    took = time.perf_counter() - began
    write_stats(
        path,
        {
            "updated_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            "final": final,
            "full": full or final,
            "compute_s": round(took, 3),
            **stats,
        },
    )
    return took, time.process_time() - began_cpu
