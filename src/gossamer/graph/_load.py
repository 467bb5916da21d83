"""Loading a graph: an edge list file, or a crawl directory (every worker's parts merged).

An edge list is one `src dst` arc a line (`#`/`%` comments, `.gz` read as gzip); ids of any
size are remapped to 0..n-1 in increasing order, repeated arcs count once, self-loops are kept.
A crawl directory's nodes are the pages its crawl logs show fetched with status 200–399, its
edges the lines of every `graph/edges*.tsv` part whose ends are both nodes (the others are
pending); a cluster crawl's per-worker directories are merged the same way. A text that cannot
be read whole names its first bad line. Formats and why: docs/graph.md, "Sources"."""

from __future__ import annotations

import gzip
import json
import os
import re
import warnings
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import scipy.sparse as sp

from ..crawldir import CRAWL_LOG, ClusterDir, CrawlDir
from ..sinks.graph import is_node_status, node_id

__all__ = ["LoadedGraph", "load_crawl_dir", "load_edgelist", "load_graph"]

_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1
_INT_TOKEN = re.compile(rb"[+-]?[0-9]+")


@dataclass(frozen=True, slots=True)
class LoadedGraph:
    """A graph read from a file: `adj` n × n CSR (a 1 per distinct edge), `ids` the original
    id of each node (str, as ids may exceed 64 bits), `pending` the links to pages not
    crawled (None for an edge list, which has no such notion), `urls` each node's URL (a
    crawl directory's; None for an edge list)."""

    adj: sp.csr_array
    ids: list[str] | npt.NDArray[np.int64]
    pending: int | None
    source: str
    urls: list[str] | None = None

    @property
    def nodes(self) -> int:
        return int(self.adj.shape[0])

    @property
    def edges(self) -> int:
        return int(self.adj.nnz)

    def edge_pairs(self) -> tuple[npt.NDArray[np.int32], npt.NDArray[np.int32]]:
        """(sources, targets) node indices of every edge, sorted."""
        indptr = self.adj.indptr
        src = np.repeat(np.arange(self.nodes, dtype=np.int32), np.diff(indptr))
        return src, self.adj.indices.astype(np.int32)


def adjacency(n: int, src: npt.NDArray[Any], dst: npt.NDArray[Any]) -> sp.csr_array:
    """n × n CSR with a 1 at each (src, dst), repeats merged; int32 indices (scipy's
    csgraph wants them: int64 ones are converted, 0.3 s for 10M edges, at every call)."""
    data = np.ones(len(src), dtype=np.int8)
    rows, cols = np.asarray(src, dtype=np.int32), np.asarray(dst, dtype=np.int32)
    adj = sp.csr_array((data, (rows, cols)), shape=(n, n))
    adj.sum_duplicates()
    adj.data[:] = 1
    return adj


def load_graph(source: str | os.PathLike[str]) -> LoadedGraph:
    """A crawl directory or an edge list file. Raises ValueError (one line) for bad input."""
    path = Path(source)
    if path.is_dir():
        return load_crawl_dir(path)
    if not path.exists():
        raise ValueError(f"{path}: no such file or directory")
    return load_edgelist(path)


def _dimacs_header(data: bytes) -> bytes | None:
    """The `p` line when `data` is DIMACS (its first line not a `c` comment is `p …`)."""
    for line in data[:65536].split(b"\n"):
        stripped = line.strip()
        if stripped and not stripped.startswith(b"c"):
            return stripped if stripped.startswith(b"p ") else None
    return None


def dimacs_arcs(path: Path, data: bytes, n: int) -> list[tuple[int, int]]:
    """The `a U V W` arcs of a DIMACS shortest-path file of `n` nodes, in file order and
    0-based (weights ignored; `c` and `p` lines skipped). ValueError naming the line for any
    other line or a node outside 1 … n. Shared by `graph stats` and GraphBench."""
    arcs: list[tuple[int, int]] = []
    for number, raw in enumerate(data.split(b"\n"), 1):
        line = raw.strip()
        if not line or line[:1] in (b"c", b"p"):
            continue
        parts = line.split()
        if parts[0] != b"a" or len(parts) not in (3, 4) or not all(
            p.isdigit() and 1 <= int(p) <= n for p in parts[1:3]
        ):
            shown = raw[:80].decode("utf-8", "replace")
            raise ValueError(
                f"{path}:{number}: expected `a U V W` with 1 <= U, V <= {n}, got {shown!r}"
            )
        arcs.append((int(parts[1]) - 1, int(parts[2]) - 1))
    return arcs


def _load_dimacs(path: Path, data: bytes, header: bytes) -> LoadedGraph:
    """A DIMACS shortest-path file: `p sp N M`, `a U V W` arcs (1-based; weights ignored)."""
    fields = header.split()
    if len(fields) != 4 or not fields[2].isdigit() or not fields[3].isdigit():
        raise ValueError(f"{path}: bad DIMACS problem line {header[:80]!r} (want `p sp N M`)")
    n = int(fields[2])
    arcs = dimacs_arcs(path, data, n)
    flat = np.array(arcs, dtype=np.int64).reshape(-1) if arcs else np.empty(0, dtype=np.int64)
    ids = np.arange(1, n + 1, dtype=np.int64)
    return LoadedGraph(adj=adjacency(n, flat[0::2], flat[1::2]), ids=ids, pending=None,
                       source=str(path))


def _read_bytes(path: Path) -> bytes:
    try:
        if path.name.endswith(".gz"):
            from isal import igzip  # 4x faster than gzip (0.06 s against 0.24 s for cnr-2000)

            with igzip.open(path, "rb") as f:  # type: ignore[no-untyped-call]
                data: bytes = f.read()
                return data
        return path.read_bytes()
    except (OSError, EOFError, gzip.BadGzipFile) as exc:
        raise ValueError(f"{path}: cannot read: {exc}") from None


def _strip_comments(data: bytes) -> bytes:
    if b"#" not in data and b"%" not in data:
        return data
    lines = data.split(b"\n")
    return b"\n".join(b"" if ln.lstrip()[:1] in (b"#", b"%") else ln for ln in lines)


def int_tokens(text: bytes) -> npt.NDArray[np.int64] | None:
    """The whitespace-separated integers of `text` (comments stripped), parsed in C; None when
    a token is not an integer (fromstring warns, and stops, at the first it cannot read). Ids
    beyond 64 bits saturate at the int64 bounds: callers check for those."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        try:
            values: npt.NDArray[np.int64] = np.fromstring(text, dtype=np.int64, sep=" ")
        except (ValueError, DeprecationWarning):
            return None
    return values


def _first_bad_line(path: Path, data: bytes) -> str:
    for number, raw in enumerate(data.split(b"\n"), 1):
        line = raw.strip()
        if not line or line[:1] in (b"#", b"%"):
            continue
        fields = line.split()
        if len(fields) != 2 or not all(_INT_TOKEN.fullmatch(f) for f in fields):
            shown = raw[:80].decode("utf-8", "replace")
            return f"{path}:{number}: expected two integer ids `src dst`, got {shown!r}"
    return f"{path}: not a list of integer id pairs"


def load_edgelist(path: Path) -> LoadedGraph:
    """Read an edge list (see the module docstring)."""
    raw = _read_bytes(path)
    header = _dimacs_header(raw)
    if header is not None:
        return _load_dimacs(path, raw, header)
    data = _strip_comments(raw)
    values = int_tokens(data)
    if values is None or len(values) % 2:
        raise ValueError(_first_bad_line(path, raw))
    ids: list[str] | npt.NDArray[np.int64]
    if len(values) and (values.min() == _INT64_MIN or values.max() == _INT64_MAX):
        # fromstring saturates ids beyond 64 bits: read them as Python ints (slow, rare)
        tokens = data.split()
        if not all(_INT_TOKEN.fullmatch(t) for t in tokens):
            raise ValueError(_first_bad_line(path, raw))
        big = sorted({int(t) for t in tokens})
        index = {v: i for i, v in enumerate(big)}
        flat = np.fromiter((index[int(t)] for t in tokens), dtype=np.int64, count=len(tokens))
        ids = [str(v) for v in big]
    else:
        flat, ids = _remap(values)
    n = len(ids)
    return LoadedGraph(
        adj=adjacency(n, flat[0::2], flat[1::2]), ids=ids, pending=None, source=str(path)
    )


def _remap(values: npt.NDArray[np.int64]) -> tuple[npt.NDArray[Any], npt.NDArray[np.int64]]:
    """(dense index of each value, the distinct values sorted). Small non-negative ids (the
    usual 0..n-1 of a web graph) go through a table: 15 ms for cnr-2000, against 0.7 s for
    np.unique's sort."""
    if not len(values):
        return values.astype(np.int32), values
    lo, hi = int(values.min()), int(values.max())
    if lo >= 0 and hi < 4 * len(values) + 1024:
        present = np.zeros(hi + 1, dtype=bool)
        present[values] = True
        index = np.cumsum(present, dtype=np.int64) - 1
        return index[values].astype(np.int32), np.flatnonzero(present).astype(np.int64)
    distinct, inverse = np.unique(values, return_inverse=True)
    return inverse.astype(np.int32), distinct


def crawl_dirs(directory: Path) -> list[CrawlDir]:
    """The directories whose logs and graph parts make the crawl in `directory`: itself (an
    embedded crawl), or its cluster workers' `w*/` directories; [] when it is neither."""
    crawl = CrawlDir(directory)
    if crawl.crawl_logs():
        return [crawl]
    return [
        worker for worker in ClusterDir(directory).workers()
        if worker.worker_record.is_file() and worker.crawl_logs()
    ]  # fmt: skip


def _crawled_urls(directory: Path) -> list[str]:
    """URLs fetched as pages with status 200–399, from every crawl log of the crawl in
    `directory` (its cluster workers' too)."""
    logs = sorted(log for d in crawl_dirs(directory) for log in d.crawl_logs())
    if not logs:
        raise ValueError(
            f"{directory}: not a crawl directory (no {CRAWL_LOG}, nor cluster workers' "
            "w*/ directories holding one)"
        )
    urls: dict[str, None] = {}
    for log in logs:
        with open(log, "rb") as f:
            urls.update(dict.fromkeys(node_urls(f)))
    return list(urls)


def node_urls(lines: Iterable[bytes]) -> Iterator[str]:
    """The URLs of crawl log lines that make nodes: fetched as a page (depth not null) with
    status 200–399; lines that are not JSON objects (torn by a kill) are skipped."""
    for raw in lines:
        try:
            record = json.loads(raw)
        except ValueError:
            continue  # a line torn by a kill
        if not isinstance(record, dict) or record.get("depth") is None:
            continue
        status, url = record.get("status"), record.get("url")
        if isinstance(status, int) and is_node_status(status) and isinstance(url, str):
            yield url


_BLOCK = 32 << 20  # bytes of a graph part parsed at a time


def _line_blocks(path: Path) -> Iterator[bytes]:
    """The whole lines of `path` in blocks of about _BLOCK bytes (a torn last line left out):
    splitting a block into tokens holds ~12 times its size, not the whole file's."""
    with open(path, "rb") as f:
        rest = b""
        while block := f.read(_BLOCK):
            block = rest + block
            cut = block.rfind(b"\n") + 1
            rest = block[cut:]
            if cut:
                yield block[:cut]


def _edge_part(path: Path) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """(src ids, dst ids) of one graph/edges*.tsv part: header and a torn last line skipped."""
    parts = [edge_lines(block, path) for block in _line_blocks(path)]
    if not parts:
        empty = np.empty(0, dtype=np.int64)
        return empty, empty
    return np.concatenate([s for s, _ in parts]), np.concatenate([d for _, d in parts])


def edge_lines(
    data: bytes, path: Path
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """(src ids, dst ids) of whole `src<TAB>dst<TAB>kind` lines of a graph part (its header
    line skipped when `data` starts with it). ValueError naming `path` for other lines."""
    if data.startswith(b"src\t"):
        data = data[data.find(b"\n") + 1 :]
    tokens = data.split()
    if len(tokens) % 3:
        raise ValueError(f"{path}: not `src<TAB>dst<TAB>kind` lines")
    try:
        src = np.array(tokens[0::3]).astype(np.int64)
        dst = np.array(tokens[1::3]).astype(np.int64)
    except (ValueError, OverflowError):
        raise ValueError(f"{path}: not `src<TAB>dst<TAB>kind` lines") from None
    return src, dst


def node_records(directory: Path) -> dict[str, tuple[int, int | None, str | None]]:
    """{URL: (status, depth, content type)} of each page of the crawl in `directory` that is a
    node, from the first crawl log line that makes it one (the export's node attributes)."""
    records: dict[str, tuple[int, int | None, str | None]] = {}
    for log in sorted(log for d in crawl_dirs(directory) for log in d.crawl_logs()):
        with open(log, "rb") as f:
            for raw in f:
                try:
                    record = json.loads(raw)
                except ValueError:
                    continue
                if not isinstance(record, dict) or record.get("depth") is None:
                    continue
                url, status = record.get("url"), record.get("status")
                if (isinstance(status, int) and is_node_status(status)
                        and isinstance(url, str) and url not in records):  # fmt: skip
                    depth, kind = record.get("depth"), record.get("type")
                    records[url] = (
                        status,
                        depth if isinstance(depth, int) else None,
                        kind if isinstance(kind, str) else None,
                    )
    return records


def edge_kind_parts(
    directory: Path, kinds: Iterable[str]
) -> list[tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]]:
    """For each of `kinds`, (src ids, dst ids) of the arcs of that kind in every graph part
    of the crawl in `directory` (repeats kept)."""
    names = [k.encode()[:1] for k in kinds]  # (their first letters differ)
    if len(set(names)) != len(names):
        raise ValueError(f"edge kinds whose first letters are the same: {kinds}")
    found: list[list[tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]]] = [[] for _ in names]
    blocks = (b for d in crawl_dirs(directory) for p in d.graph_edge_files()
              for b in _line_blocks(p))  # fmt: skip
    for data in blocks:
        if data.startswith(b"src\t"):
            data = data[data.find(b"\n") + 1 :]
        tokens = data.split()
        try:
            if len(tokens) % 3:
                raise ValueError
            src = np.array(tokens[0::3]).astype(np.int64)
            dst = np.array(tokens[1::3]).astype(np.int64)
        except (ValueError, OverflowError):
            raise ValueError(f"{directory}: not `src<TAB>dst<TAB>kind` lines") from None
        column = np.array(tokens[2::3], dtype="S1")
        del tokens
        for i, name in enumerate(names):
            hit = column == name
            found[i].append((src[hit], dst[hit]))
    empty = np.empty(0, dtype=np.int64)
    return [
        (np.concatenate([s for s, _ in parts]), np.concatenate([d for _, d in parts]))
        if parts else (empty, empty)
        for parts in found
    ]  # fmt: skip


def crawled_pages(directory: Path) -> list[int]:
    """The graph ids (`node_id`) of the pages of the crawl in `directory` that are nodes
    (fetched with status 200–399), in the order the crawl logs first name them; [] when it
    has no crawl log yet."""
    return list(crawled_page_urls(directory))


def crawled_page_urls(directory: Path) -> dict[int, str]:
    """`crawled_pages` with each page's URL: {graph id: URL}, in the same order."""
    try:
        urls = _crawled_urls(directory)
    except ValueError:
        return {}
    pages: dict[int, str] = {}
    for url in urls:
        pages.setdefault(node_id(url), url)
    return pages


def edge_parts(directory: Path) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """(src ids, dst ids) of every graph/edges*.tsv part of the crawl in `directory`,
    concatenated (repeats kept)."""
    paths = [p for d in crawl_dirs(directory) for p in d.graph_edge_files()]
    parts = [_edge_part(p) for p in paths]
    if not parts:
        empty = np.empty(0, dtype=np.int64)
        return empty, empty
    return np.concatenate([s for s, _ in parts]), np.concatenate([d for _, d in parts])


def load_crawl_dir(directory: Path) -> LoadedGraph:
    """Read a crawl directory (see the module docstring)."""
    by_id = {node_id(u): u for u in reversed(_crawled_urls(directory))}  # (the first URL)
    ids = np.array(sorted(by_id), dtype=np.int64)
    src, dst = edge_parts(directory)
    adj, pending = crawl_graph(ids, src, dst)
    urls = [by_id[i] for i in ids.tolist()]
    return LoadedGraph(adj=adj, ids=ids, pending=pending, source=str(directory), urls=urls)


def crawl_graph(
    ids: npt.NDArray[np.int64], src: npt.NDArray[np.int64], dst: npt.NDArray[np.int64]
) -> tuple[sp.csr_array, int]:
    """(adjacency, pending) of a crawl whose nodes are the sorted graph ids `ids` and whose
    graph parts hold the arcs (src, dst): the arcs between two nodes (self-loops dropped) and
    the number of distinct arcs from a node to a page not crawled. Shared by `graph stats DIR`
    and the live graph's follower (graph/_follow.py), so their figures agree."""
    n = len(ids)
    si = np.searchsorted(ids, src).clip(0, max(n - 1, 0))
    di = np.searchsorted(ids, dst).clip(0, max(n - 1, 0))
    src_crawled = (ids[si] == src) if n else np.zeros(len(src), dtype=bool)
    dst_crawled = (ids[di] == dst) if n else np.zeros(len(dst), dtype=bool)
    keep = src_crawled & dst_crawled & (src != dst)
    waiting = src_crawled & ~dst_crawled
    pending = 0
    if waiting.any():
        pairs = np.unique(np.stack([src[waiting], dst[waiting]], axis=1), axis=0)
        pending = len(pairs)
    return adjacency(n, si[keep], di[keep]), pending
