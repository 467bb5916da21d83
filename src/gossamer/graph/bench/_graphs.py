"""GraphBench's edge insertion sequences: read from files, written to files, or generated from a
spec string for the graphs of SPAWC's Appendix C (docs/graphbench.md, "Graph sources").

A sequence (`EdgeSequence`) is `n` vertices `0 … n-1` and the edges `(src, tgt)` in insertion
order, repeated edges and self-loops kept. `graph_source(text)` is the one entry point: a file
(DIMACS `.gr` or an edge list, optionally gzipped) or a spec (`complete:N`, `sparse:N`,
`dense:N`, `ausiello:N`, `road:N`, `web:N`, `sanity:1|2|3`). Generated graphs are seeded and
deterministic; a file this module wrote keeps its ids and n through a round trip."""

from __future__ import annotations

import functools
import importlib
import math
import os
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import numpy as np
import numpy.typing as npt

from .._load import (
    _dimacs_header,
    _first_bad_line,
    _read_bytes,
    _strip_comments,
    dimacs_arcs,
    int_tokens,
)

__all__ = [
    "GENERATORS",
    "EdgeSequence",
    "graph_source",
    "read_dimacs",
    "read_edgelist",
    "read_graph_file",
    "write_dimacs",
    "write_edgelist",
    "write_graph_file",
]

# cnr-2000, in the repository (tests/data/README.md): the crawled web graph of `web:N`
WEB_GRAPH: Final = Path(__file__).resolve().parents[4] / "tests/data/graphs/cnr-2000.edges.tsv.gz"
_EDGELIST_HEADER: Final = re.compile(rb"#\s*graphbench n=(\d+)")


@dataclass(frozen=True, slots=True)
class EdgeSequence:
    """n vertices 0 … n-1 and the edges inserted, in order (repeats and self-loops kept)."""

    n: int
    edges: list[tuple[int, int]]
    name: str

    @property
    def m(self) -> int:
        return len(self.edges)

    @property
    def density(self) -> float:
        """Distinct non-loop edges over n(n-1), as SPAWC's Appendix C table gives it."""
        if self.n < 2:
            return 0.0
        distinct = {(s, t) for s, t in self.edges if s != t}
        return len(distinct) / (self.n * (self.n - 1))


# --- files ------------------------------------------------------------------------------


def read_graph_file(path: Path) -> EdgeSequence:
    """A DIMACS file or an edge list (module docstring). ValueError (one line) on bad input."""
    if path.is_dir():
        raise ValueError(f"{path}: a directory, not a graph file")
    if not path.exists():
        raise ValueError(f"{path}: no such file")
    data = _read_bytes(path)
    header = _dimacs_header(data)
    if header is not None:
        return read_dimacs(path, data, header)
    return read_edgelist(path, data)


def read_dimacs(path: Path, data: bytes, header: bytes) -> EdgeSequence:
    """The arcs of a DIMACS shortest-path file in file order, 0-based; weights ignored."""
    fields = header.split()
    if len(fields) != 4 or fields[1] != b"sp" or not fields[2].isdigit():
        raise ValueError(f"{path}: bad DIMACS problem line {header[:80]!r} (want `p sp N M`)")
    n = int(fields[2])
    edges = dimacs_arcs(path, data, n)
    return EdgeSequence(n, edges, path.name)


def read_edgelist(path: Path, data: bytes) -> EdgeSequence:
    """An edge list in file order (module docstring: how ids become 0 … n-1)."""
    first = data.lstrip()[:200]
    declared = _EDGELIST_HEADER.match(first)
    text = _strip_comments(data)
    values = int_tokens(text)
    if values is None or len(values) % 2:
        raise ValueError(_first_bad_line(path, data))
    if declared is not None:
        n = int(declared.group(1))
        if len(values) and (values.min() < 0 or values.max() >= n):
            raise ValueError(f"{path}: an id is outside 0..{n - 1} (its header says n={n})")
        flat = values.tolist()
    elif len(values) and (values.min() <= -(2**63) or values.max() >= 2**63 - 1):
        # fromstring saturates ids beyond 64 bits: remap them as Python ints (slow, rare)
        index: dict[int, int] = {}
        flat = [index.setdefault(int(t), len(index)) for t in text.split()]
        n = len(index)
    else:
        distinct, first_at, inverse = np.unique(values, return_index=True, return_inverse=True)
        rank = np.argsort(np.argsort(first_at))  # distinct value -> order of first appearance
        flat = rank[inverse].tolist()
        n = len(distinct)
    return EdgeSequence(n, list(zip(flat[0::2], flat[1::2], strict=True)), path.name)


def _write_atomically(out: Path, lines: Iterator[str], force: bool) -> None:
    if out.exists() and not force:
        raise ValueError(f"{out}: exists (give --force to overwrite it)")
    partial = out.with_name(out.name + ".partial")
    with open(partial, "w", encoding="ascii") as f:
        f.writelines(lines)
    os.replace(partial, out)


def write_dimacs(seq: EdgeSequence, out: Path, *, force: bool = False) -> None:
    """`c` comment, `p sp N M`, `a U V 1` per edge in order, 1-based (OSError propagates)."""

    def lines() -> Iterator[str]:
        yield f"c graphbench {seq.name}: {seq.n} vertices, {seq.m} edges in insertion order\n"
        yield f"p sp {seq.n} {seq.m}\n"
        for lo in range(0, seq.m, 1 << 16):
            yield "".join(f"a {s + 1} {t + 1} 1\n" for s, t in seq.edges[lo : lo + (1 << 16)])

    _write_atomically(out, lines(), force)


def write_edgelist(seq: EdgeSequence, out: Path, *, force: bool = False) -> None:
    """`# graphbench n=N` header (keeps n and the ids on reading), `src<TAB>dst` per edge."""

    def lines() -> Iterator[str]:
        yield f"# graphbench n={seq.n} ({seq.name}: {seq.m} edges in insertion order)\n"
        for lo in range(0, seq.m, 1 << 16):
            yield "".join(f"{s}\t{t}\n" for s, t in seq.edges[lo : lo + (1 << 16)])

    _write_atomically(out, lines(), force)


CONVERT_FORMATS: Final = ("dimacs", "edgelist")


def write_graph_file(seq: EdgeSequence, out: Path, fmt: str, *, force: bool = False) -> None:
    """Write `seq` as `fmt` (one of CONVERT_FORMATS)."""
    if fmt == "dimacs":
        write_dimacs(seq, out, force=force)
    elif fmt == "edgelist":
        write_edgelist(seq, out, force=force)
    else:
        raise ValueError(f"--to must be one of {', '.join(CONVERT_FORMATS)}, not {fmt!r}")


# --- generators -------------------------------------------------------------------------


def complete(n: int) -> EdgeSequence:
    return EdgeSequence(
        n, [(u, v) for u in range(n) for v in range(n) if u != v], f"complete:{n}"
    )


def sparse(n: int, m: int | None = None, seed: int = 1) -> EdgeSequence:
    m = 3 * n if m is None else m
    if n == 0 and m:
        raise ValueError("sparse:0 cannot have edges")
    rng = np.random.default_rng(seed)
    pairs = rng.integers(0, max(n, 1), size=(m, 2))
    edges = list(zip(pairs[:, 0].tolist(), pairs[:, 1].tolist(), strict=True))
    return EdgeSequence(n, edges, f"sparse:{n}:{m}:seed={seed}")


def dense(n: int, density: float = 0.5, seed: int = 1) -> EdgeSequence:
    if not 0.0 <= density <= 1.0:
        raise ValueError(f"dense: the density must be in [0, 1], not {density}")
    rng = np.random.default_rng(seed)
    keep = rng.random((n, n)) < density
    np.fill_diagonal(keep, False)
    src, dst = np.nonzero(keep)
    order = rng.permutation(len(src))
    edges = list(zip(src[order].tolist(), dst[order].tolist(), strict=True))
    return EdgeSequence(n, edges, f"dense:{n}:{density:g}:seed={seed}")


def ausiello(n: int) -> EdgeSequence:
    # imported when asked for (by name: the module is another part of GraphBench, which
    # may be absent from a partial checkout), never written here
    try:
        sequence = importlib.import_module(f"{__package__}._apsd").ausiello_sequence
    except (ImportError, AttributeError):
        raise ValueError(
            "ausiello:N needs gossamer.graph.bench._apsd.ausiello_sequence, which is missing"
        ) from None
    size, edges = sequence(n)
    return EdgeSequence(size, list(edges), f"ausiello:{n}")


def road(n: int, seed: int = 1) -> EdgeSequence:
    side = max(1, math.isqrt(max(n, 1)))
    while side * side < n:
        side += 1
    rng = np.random.default_rng(seed)
    adjacency: list[list[int]] = [[] for _ in range(n)]
    for v in range(n):
        row, col = divmod(v, side)
        for w in (v + 1 if col + 1 < side else -1, v + side if row + 1 < side else -1):
            if 0 <= w < n and rng.random() < 0.8:  # the street kept: two arcs
                adjacency[v].append(w)
                adjacency[w].append(v)
    edges = [(v, w) for v in range(n) for w in sorted(adjacency[v])]
    return EdgeSequence(n, edges, f"road:{n}:seed={seed}")


@functools.lru_cache(maxsize=2)
def _web_csr(path: Path) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """(indptr, targets in file order) of the web graph in `path` (0.6 s for cnr-2000)."""
    data = _strip_comments(_read_bytes(path))
    values = np.fromstring(data, dtype=np.int64, sep=" ")
    if len(values) % 2 or (len(values) and values.min() < 0):
        raise ValueError(f"{path}: not an edge list of non-negative integer ids")
    src, dst = values[0::2], values[1::2]
    n = int(values.max()) + 1 if len(values) else 0
    order = np.argsort(src, kind="stable")  # each page's links stay in file order
    indptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(src, minlength=n), out=indptr[1:])
    return indptr, dst[order]


def web(n: int, path: Path | None = None) -> EdgeSequence:
    source = WEB_GRAPH if path is None else path
    if not source.is_file():
        raise ValueError(f"web: {source}: no such file")
    indptr, targets = _web_csr(source)
    total = len(indptr) - 1
    if n > total:
        raise ValueError(f"web:{n}: {source.name} has only {total} pages")
    position = np.full(total, -1, dtype=np.int64)  # page -> crawl order
    crawl: list[int] = []
    next_root = 0
    head = 0
    while len(crawl) < n:
        if head == len(crawl):  # the frontier ran dry: start from the first page not seen
            while position[next_root] >= 0:
                next_root += 1
            position[next_root] = len(crawl)
            crawl.append(next_root)
        page = crawl[head]
        head += 1
        for link in targets[indptr[page] : indptr[page + 1]].tolist():
            if position[link] < 0 and len(crawl) < n:
                position[link] = len(crawl)
                crawl.append(link)
    edges: list[tuple[int, int]] = []
    for page in crawl:
        links = position[targets[indptr[page] : indptr[page + 1]]]
        here = int(position[page])
        edges.extend((here, int(t)) for t in links.tolist() if 0 <= t < n)
    return EdgeSequence(n, edges, f"web:{n}")


# Hand-written graphs of SPAWC's sanity-check sizes (module docstring).
_SANITY: Final[dict[int, tuple[int, list[tuple[int, int]]]]] = {
    # 8 vertices, 11 edges: a 3-cycle 0→1→2→0, a tail 2→3→4, the 2-cycle 4⇄5, a self-loop on
    # 6, 6→0, 7 isolated, and 0→1 repeated
    1: (8, [(0, 1), (1, 2), (2, 0), (2, 3), (3, 4), (4, 5), (5, 4), (6, 6), (6, 0), (0, 1),
            (1, 3)]),
    # 8 vertices, 14 edges: two 4-cycles 0→1→2→3→0 and 4→5→6→7→4 joined one way by 3→4 and
    # chords, so two components until 7→3 (last) merges them
    2: (8, [(0, 1), (1, 2), (2, 3), (3, 0), (4, 5), (5, 6), (6, 7), (7, 4), (3, 4), (0, 2),
            (4, 6), (1, 5), (2, 2), (7, 3)]),
    # 4 vertices, 6 edges (SPAWC's Figure 6 graph size): a path 0→1→2→3 closed by 3→0, 1→3
    3: (4, [(0, 1), (1, 2), (2, 3), (3, 0), (1, 3), (0, 1)]),
}  # fmt: skip


def sanity(which: int) -> EdgeSequence:
    if which not in _SANITY:
        raise ValueError(f"sanity:{which}: there are sanity:1, sanity:2 and sanity:3")
    n, edges = _SANITY[which]
    return EdgeSequence(n, list(edges), f"sanity:{which}")


# --- specs ------------------------------------------------------------------------------

GENERATORS: Final[dict[str, str]] = {
    "complete": "complete:N",
    "sparse": "sparse:N[:M][:seed=S]",
    "dense": "dense:N[:DENSITY][:seed=S]",
    "ausiello": "ausiello:N",
    "road": "road:N[:seed=S]",
    "web": "web:N[:FILE]",
    "sanity": "sanity:1|2|3",
}


def _parse_spec(spec: str) -> Callable[[], EdgeSequence]:
    kind, _, rest = spec.partition(":")
    usage = GENERATORS[kind]
    parts = rest.split(":") if rest else []
    seed = 1
    if parts and parts[-1].startswith("seed="):
        seed_text = parts.pop()[5:]
        if not seed_text.isdigit() or kind not in ("sparse", "dense", "road"):
            raise ValueError(f"{spec!r}: bad seed (want {usage})")
        seed = int(seed_text)
    if kind == "web" and len(parts) == 2:
        n_text, file_text = parts
        if not n_text.isdigit():
            raise ValueError(f"{spec!r}: N must be a whole number (want {usage})")
        return functools.partial(web, int(n_text), Path(file_text))
    if not parts or not parts[0].isdigit():
        raise ValueError(f"{spec!r}: N must be a whole number (want {usage})")
    n = int(parts[0])
    extra = parts[1:]
    if kind == "sparse" and len(extra) <= 1:
        if extra and not extra[0].isdigit():
            raise ValueError(f"{spec!r}: M must be a whole number (want {usage})")
        return functools.partial(sparse, n, int(extra[0]) if extra else None, seed)
    if kind == "dense" and len(extra) <= 1:
        try:
            density = float(extra[0]) if extra else 0.5
        except ValueError:
            raise ValueError(f"{spec!r}: DENSITY must be a number (want {usage})") from None
        return functools.partial(dense, n, density, seed)
    if extra:
        raise ValueError(f"{spec!r}: too many fields (want {usage})")
    one: dict[str, Callable[[int], EdgeSequence]] = {
        "complete": complete, "ausiello": ausiello, "web": web, "sanity": sanity,
        "road": functools.partial(road, seed=seed),
    }  # fmt: skip
    return functools.partial(one[kind], n)


def graph_source(text: str) -> EdgeSequence:
    """The sequence named by `text`: a generator spec (`kind:…`, module docstring) or a file.
    ValueError (one line) for a bad spec or an unreadable file."""
    kind = text.partition(":")[0]
    if kind in GENERATORS and not Path(text).exists():
        return _parse_spec(text)()
    return read_graph_file(Path(text))
