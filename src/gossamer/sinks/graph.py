"""The link graph: pages as nodes, links as typed edges, in two append-only TSV files
(`graph/nodes.tsv`, `graph/edges.tsv`; one pair per worker part when several processes write).

Node ids are the URL's 64-bit fingerprint with the top bit cleared: no coordination, stable
across resumes, processes and runs. A node line is written before the first edge that names
it. Lines are buffered and written on `flush()` (nodes first): call it before acknowledging
work to the frontier, so a crash cannot lose the edges of completed pages. Edges may repeat
across calls (a page fetched again after a crash); `read_graph` dedupes. The live graph's
shared constants live here too (its lock file, the child's `end` line, the refresh timing).
Formats: docs/crawler/outputs.md, "Link graph"."""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import xxhash

from ..crawldir import CrawlDir

__all__ = [
    "EDGE_KINDS",
    "Graph",
    "GraphStats",
    "GraphWriter",
    "is_node_status",
    "node_id",
    "read_graph",
]

EDGE_KINDS: Final = frozenset({"link", "redirect", "canonical", "sitemap"})
_MASK: Final = (1 << 63) - 1
_FLUSH_BYTES: Final = 256 * 1024
_KEYS_MAX: Final = 1 << 16  # URLs whose id text is memoised (~10 MB)
_NODES_HEADER: Final = "id\turl\n"
_EDGES_HEADER: Final = "src\tdst\tkind\n"


def is_node_status(status: int) -> bool:
    """Whether a page fetched with HTTP `status` is a node of the crawled graph (the live
    graph, `gossamer graph stats DIR`): 2xx and 3xx, a redirect being a node with one edge;
    error pages are not (docs/graph.md)."""
    return 200 <= status < 400


#: the line on the live-graph child's stdin that says the crawl has ended (its final refresh)
FOLLOW_END: Final = b"end\n"
#: seconds between two refreshes of a live graph's statistics, at least ...
REFRESH_INTERVAL_S: Final = 5.0
#: ... and at least this many times the last refresh's wall time
REFRESH_BACKOFF: Final = 10.0


def node_id(url: str) -> int:
    """The graph id of `url`: xxh3-64 of its UTF-8 bytes, top bit cleared."""
    return xxhash.xxh3_64_intdigest(url.encode("utf-8", "surrogatepass")) & _MASK


def _escape(url: str) -> str:
    if "\t" in url or "\n" in url or "\r" in url:
        return url.replace("\t", "%09").replace("\n", "%0A").replace("\r", "%0D")
    return url


def _open_append(path: Path, header: str) -> int:
    """Open for appending; cut a torn last line; write the header to a new file."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)
    size = os.fstat(fd).st_size
    if size == 0:
        os.write(fd, header.encode())
        return fd
    with open(path, "rb") as f:
        f.seek(max(0, size - 65536))
        tail = f.read()
    if not tail.endswith(b"\n"):
        cut = tail.rfind(b"\n")
        keep = size - len(tail) + cut + 1 if cut >= 0 else 0
        os.ftruncate(fd, keep)
        if keep == 0:
            os.write(fd, header.encode())
    return fd


@dataclass(frozen=True, slots=True)
class GraphStats:
    """A snapshot: distinct nodes known to this writer, edges written, lines still buffered."""

    nodes: int
    edges: int
    buffered: int


class GraphWriter:
    """Appends the link graph to `<directory>/graph/` (see the module docstring)."""

    def __init__(self, directory: str | os.PathLike[str], *, part: str = "") -> None:
        crawl = CrawlDir(Path(directory))
        self.directory = crawl.graph_dir
        self.directory.mkdir(parents=True, exist_ok=True)
        self.nodes_path = crawl.graph_nodes(part)
        self.edges_path = crawl.graph_edges(part)
        self._nodes_fd: int | None = _open_append(self.nodes_path, _NODES_HEADER)
        self._edges_fd: int | None = _open_append(self.edges_path, _EDGES_HEADER)
        self._ids: set[int] = set(_read_node_ids(self.nodes_path))
        self._node_lines: list[str] = []
        self._edge_lines: list[str] = []
        self._pending = 0  # bytes buffered
        self._edges = self._edges_buffered = 0
        self._last_src: str | None = None
        self._last_id = ""
        self._keys: dict[str, str] = {}

    def _node(self, url: str) -> int:
        nid = xxhash.xxh3_64_intdigest(url.encode("utf-8", "surrogatepass")) & _MASK
        if nid not in self._ids:
            self._ids.add(nid)
            line = f"{nid}\t{_escape(url)}\n"
            self._node_lines.append(line)
            self._pending += len(line)
        return nid

    def _node_key(self, url: str) -> str:
        """The id of `url` as text, its node line buffered the first time; memoised, as the
        links of a crawl mostly point to URLs met before (site navigation)."""
        key = self._keys.get(url)
        if key is None:
            if len(self._keys) >= _KEYS_MAX:
                self._keys.clear()
            key = self._keys[url] = str(self._node(url))
        return key

    def add_edge(self, src: str, dst: str, kind: str = "link") -> bool:
        """Record one edge; False (nothing written) for a self-link. Raises ValueError for
        an unknown kind."""
        if kind not in EDGE_KINDS:
            raise ValueError(f"edge kind must be one of {sorted(EDGE_KINDS)}, not {kind!r}")
        if self._edges_fd is None:
            raise ValueError("write to a closed GraphWriter")
        if src == dst:
            return False
        if src is not self._last_src:  # a page's edges come together: hash its URL once
            self._last_src, self._last_id = src, f"{self._node(src)}\t"
        line = f"{self._last_id}{self._node(dst)}\t{kind}\n"
        self._edge_lines.append(line)
        self._pending += len(line)
        self._edges += 1
        self._edges_buffered += 1
        if self._pending >= _FLUSH_BYTES:
            self.flush()
        return True

    def add_edges(self, src: str, dsts: Iterable[str], kind: str = "link") -> int:
        """Record edges from `src` to each of `dsts` (self-links and repeats left out);
        returns how many were recorded. Raises ValueError for an unknown kind."""
        if kind not in EDGE_KINDS:
            raise ValueError(f"edge kind must be one of {sorted(EDGE_KINDS)}, not {kind!r}")
        if self._edges_fd is None:
            raise ValueError("write to a closed GraphWriter")
        s = self._node(src)
        seen = {src}
        lines = self._edge_lines
        n = 0
        for dst in dsts:
            if dst in seen:
                continue
            seen.add(dst)
            line = f"{s}\t{self._node(dst)}\t{kind}\n"
            lines.append(line)
            self._pending += len(line)
            n += 1
        self._edges += n
        self._edges_buffered += n
        if self._pending >= _FLUSH_BYTES:
            self.flush()
        return n

    def add_out_edges(self, src: str, edges: Iterable[tuple[str, str]]) -> int:
        """Record the edges of one page: `edges` are (dst, kind) pairs (self-links and
        repeated pairs left out); returns how many were recorded. One call per page costs
        about half of one `add_edge` call per link. Raises ValueError for an unknown kind
        (before recording any edge of the call)."""
        if self._edges_fd is None:
            raise ValueError("write to a closed GraphWriter")
        edges = list(edges)
        kinds = {kind for _, kind in edges}
        if not kinds <= EDGE_KINDS:
            bad = sorted(kinds - EDGE_KINDS)[0]
            raise ValueError(f"edge kind must be one of {sorted(EDGE_KINDS)}, not {bad!r}")
        keys, key = self._keys, self._node_key
        s = key(src)
        seen = {(src, kind) for kind in kinds}
        add = seen.add
        parts: list[str] = []
        for edge in edges:
            if edge in seen:
                continue
            add(edge)
            dst = edge[0]
            parts.append(f"{s}\t{keys.get(dst) or key(dst)}\t{edge[1]}\n")
        if not parts:
            return 0
        chunk = "".join(parts)
        self._edge_lines.append(chunk)
        self._pending += len(chunk)
        self._edges += len(parts)
        self._edges_buffered += len(parts)
        if self._pending >= _FLUSH_BYTES:
            self.flush()
        return len(parts)

    def flush(self) -> None:
        """Write buffered node lines, then edge lines (so no edge precedes its nodes)."""
        if self._nodes_fd is None or self._edges_fd is None:
            return
        if self._node_lines:
            _write_all(self._nodes_fd, "".join(self._node_lines).encode("utf-8", "surrogatepass"))
            self._node_lines.clear()
        if self._edge_lines:
            _write_all(self._edges_fd, "".join(self._edge_lines).encode("ascii"))
            self._edge_lines.clear()
        self._pending = self._edges_buffered = 0

    def close(self) -> None:
        """Flush, fsync and close. Idempotent."""
        if self._nodes_fd is None or self._edges_fd is None:
            return
        self.flush()
        for fd in (self._nodes_fd, self._edges_fd):
            os.fsync(fd)
            os.close(fd)
        self._nodes_fd = self._edges_fd = None

    def statistics(self) -> GraphStats:
        return GraphStats(
            nodes=len(self._ids),
            edges=self._edges,
            buffered=len(self._node_lines) + self._edges_buffered,
        )

    def __enter__(self) -> GraphWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _read_node_ids(path: Path) -> Iterable[int]:
    with open(path, "rb") as f:
        for line in f:
            head = line.split(b"\t", 1)[0]
            if head.isdigit():
                yield int(head)


@dataclass(frozen=True, slots=True)
class Graph:
    """A graph read back: `nodes` id → URL, `edges` (src, dst, kind) without repeats, in
    first-seen order."""

    nodes: dict[int, str]
    edges: list[tuple[int, int, str]]

    def url_edges(self) -> set[tuple[str, str, str]]:
        """The edges as (source URL, target URL, kind)."""
        nodes = self.nodes
        return {(nodes[s], nodes[d], k) for s, d, k in self.edges}


def read_graph(directory: str | os.PathLike[str]) -> Graph:
    """Read every `nodes*.tsv` / `edges*.tsv` under `<directory>/graph/` (all parts), skipping
    headers and torn lines, deduping nodes and edges. Raises ValueError when an edge names a
    node that no nodes file lists."""
    crawl = CrawlDir(Path(directory))
    nodes: dict[int, str] = {}
    for path in crawl.graph_node_files():
        with open(path, encoding="utf-8", errors="surrogateescape") as f:
            for line in f:
                nid, tab, url = line.rstrip("\n").partition("\t")
                if tab and nid.isdigit() and line.endswith("\n"):
                    nodes.setdefault(int(nid), url)
    edges: dict[tuple[int, int, str], None] = {}
    for path in crawl.graph_edge_files():
        with open(path, encoding="ascii") as f:
            for line in f:
                parts = line.split("\t")
                if len(parts) != 3 or not parts[0].isdigit() or not line.endswith("\n"):
                    continue
                src, dst, kind = int(parts[0]), int(parts[1]), parts[2].rstrip("\n")
                if src not in nodes or dst not in nodes:
                    raise ValueError(f"{path}: edge {src} -> {dst} names an unknown node")
                edges[(src, dst, kind)] = None
    return Graph(nodes=nodes, edges=list(edges))
