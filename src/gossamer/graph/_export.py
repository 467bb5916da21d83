"""Writing a graph: an edge list, DIMACS (as SPAWC's GraphBench converts it) or GraphML.

- `edgelist`: a `#` comment line, then `src<TAB>dst` per edge with the original ids (a crawl's
  64-bit URL ids; an edge list's own ids), readable back by `gossamer graph stats`.
- `dimacs`: the shortest-path format of the 9th DIMACS challenge, which GraphBench's
  `--convert` reads: `c` comment lines, `p sp N M`, then `a U V 1` per edge, nodes numbered
  1..N in the order of their ids (node i of `gossamer graph stats` is i + 1).
- `graphml`: directed GraphML (for Gephi and networkx), node ids the original ids.

The file is written to OUT.partial and renamed, so OUT is never half written; an OUT that
exists is refused unless `force`.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Final

from ._load import LoadedGraph

__all__ = ["EXPORT_FORMATS", "write_graph"]

EXPORT_FORMATS: Final = ("edgelist", "dimacs", "graphml")
_CHUNK: Final = 1 << 16  # edges formatted per write


def _chunks(graph: LoadedGraph, template: str, one_based: bool) -> Iterator[str]:
    src, dst = graph.edge_pairs()
    if one_based:
        names = [str(i) for i in range(1, graph.nodes + 1)]
    else:
        names = [str(i) for i in graph.ids]
    for lo in range(0, len(src), _CHUNK):
        s, d = src[lo : lo + _CHUNK].tolist(), dst[lo : lo + _CHUNK].tolist()
        yield "".join(template.format(names[a], names[b]) for a, b in zip(s, d, strict=True))


def _lines(graph: LoadedGraph, fmt: str) -> Iterator[str]:
    n, m = graph.nodes, graph.edges
    if fmt == "edgelist":
        yield f"# gossamer graph export of {graph.source}: {n} nodes, {m} edges\n"
        yield from _chunks(graph, "{}\t{}\n", one_based=False)
    elif fmt == "dimacs":
        yield f"c gossamer graph export of {graph.source}\n"
        yield f"p sp {n} {m}\n"
        yield from _chunks(graph, "a {} {} 1\n", one_based=True)
    else:
        yield (
            '<?xml version="1.0" encoding="UTF-8"?>\n'
            '<graphml xmlns="http://graphml.graphdrawing.org/xmlns">\n'
            '<graph id="G" edgedefault="directed">\n'
        )
        for lo in range(0, n, _CHUNK):
            yield "".join(f'<node id="{i}"/>\n' for i in graph.ids[lo : lo + _CHUNK])
        yield from _chunks(graph, '<edge source="{}" target="{}"/>\n', one_based=False)
        yield "</graph>\n</graphml>\n"


def write_graph(graph: LoadedGraph, out: Path, fmt: str, *, force: bool = False) -> None:
    """Write `graph` to `out` in `fmt` (see the module docstring). Raises ValueError for an
    unknown format or an existing `out` (without `force`), OSError when writing fails."""
    if fmt not in EXPORT_FORMATS:
        raise ValueError(f"--format must be one of {', '.join(EXPORT_FORMATS)}, not {fmt!r}")
    if out.exists() and not force:
        raise ValueError(f"{out}: exists (give --force to overwrite it)")
    if out.is_dir():
        raise ValueError(f"{out}: is a directory")
    partial = out.with_name(out.name + ".partial")
    try:
        with open(partial, "w", encoding="ascii") as f:
            for text in _lines(graph, fmt):
                f.write(text)
        os.replace(partial, out)
    except BaseException:
        partial.unlink(missing_ok=True)
        raise
