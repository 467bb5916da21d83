"""Writing a graph: an edge list, DIMACS (as SPAWC's GraphBench converts it), GraphML, GEXF
or Parquet.

- `edgelist`: a `#` comment line, then `src<TAB>dst` per edge with the original ids (a crawl's
  64-bit URL ids; an edge list's own ids), readable back by `gossamer graph stats`.
- `dimacs`: the shortest-path format of the 9th DIMACS challenge, which GraphBench's
  `--convert` reads: `c` comment lines, `p sp N M`, then `a U V 1` per edge, nodes numbered
  1..N in the order of their ids (node i of `gossamer graph stats` is i + 1).
- `graphml` (Gephi, networkx, igraph) and `gexf` (Gephi's own): a directed graph, node ids
  the original ids, each node with its attributes (`NodeTable`: url, host, status, depth,
  content_type from a crawl's logs; in_degree, out_degree and pagerank computed) and each
  edge with its `kind` (a crawl's: `link`, `redirect`, `canonical`, `sitemap`, several joined
  by `,` when the files record the same edge with several kinds).
- `parquet`: a directory holding `nodes.parquet` (one row per node, the same attributes, and
  `id`) and `edges.parquet` (`src`, `dst` ids and `kind`), for pandas, DuckDB or polars;
  pyarrow is imported only here.

Written in chunks: the edges are read from the graph's CSR (and a crawl's kinds from one byte
an edge beside it), never copied whole into text or into another graph. The output goes to
OUT.partial, renamed when complete, so OUT is never half written; an OUT that exists is
refused unless `force`.
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Final
from urllib.parse import urlsplit

import numpy as np
import numpy.typing as npt

from ..sinks.graph import EDGE_KINDS
from ._load import LoadedGraph, edge_kind_parts, node_records
from ._rank import pagerank

__all__ = ["EXPORT_FORMATS", "NodeTable", "node_table", "write_graph"]

EXPORT_FORMATS: Final = ("edgelist", "dimacs", "graphml", "gexf", "parquet")
_CHUNK: Final = 1 << 16  # edges formatted per write
_PARQUET_ROWS: Final = 1 << 20  # rows per Parquet row group
#: the edge kinds in the order their bits (1, 2, 4, 8) are given and their names joined
KIND_ORDER: Final = ("link", "redirect", "canonical", "sitemap")
assert set(KIND_ORDER) == EDGE_KINDS
_XML_BAD = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")


@dataclass(frozen=True, slots=True)
class NodeTable:
    """Each node's attributes, by node index: `url`, `host`, `status`, `depth`,
    `content_type` (None for an edge list: it has none), `in_degree`, `out_degree`,
    `pagerank`; `kinds` one byte per edge in CSR order (bit i: KIND_ORDER[i]), None when the
    source has no kinds."""

    url: list[str] | None
    host: list[str] | None
    status: list[int | None] | None
    depth: list[int | None] | None
    content_type: list[str | None] | None
    in_degree: npt.NDArray[np.int64]
    out_degree: npt.NDArray[np.int64]
    pagerank: npt.NDArray[np.float64]
    kinds: npt.NDArray[np.uint8] | None


def node_table(graph: LoadedGraph) -> NodeTable:
    """The attributes of `graph`'s nodes and the kinds of its edges (see NodeTable)."""
    adj = graph.adj
    n = graph.nodes
    in_degree = np.bincount(adj.indices, minlength=n).astype(np.int64)
    out_degree = np.diff(adj.indptr).astype(np.int64)
    rank = pagerank(adj).values
    if graph.urls is None:
        return NodeTable(None, None, None, None, None, in_degree, out_degree, rank, None)
    records = node_records(Path(graph.source))
    urls = graph.urls
    rec = [records.get(u, (None, None, None)) for u in urls]
    return NodeTable(
        url=urls,
        host=[urlsplit(u).hostname or "" for u in urls],
        status=[r[0] for r in rec],
        depth=[r[1] for r in rec],
        content_type=[r[2] for r in rec],
        in_degree=in_degree,
        out_degree=out_degree,
        pagerank=rank,
        kinds=edge_kinds(graph),
    )


def edge_kinds(graph: LoadedGraph) -> npt.NDArray[np.uint8]:
    """One byte per edge of a crawl directory's graph, in CSR order: bit i set when its
    graph files record the edge with kind KIND_ORDER[i]. Each arc between two nodes becomes
    one int64, (source index · n + target index) · 16 + its kind's bit; sorted, those are in
    the CSR's order, and the bits of one edge are OR-ed together."""
    ids = np.asarray(graph.ids, dtype=np.int64)
    n = len(ids)
    codes: list[npt.NDArray[np.int64]] = []
    for bit, (src, dst) in enumerate(edge_kind_parts(Path(graph.source), KIND_ORDER)):
        if not n or not len(src):
            continue
        si = np.searchsorted(ids, src).clip(0, n - 1)
        di = np.searchsorted(ids, dst).clip(0, n - 1)
        keep = (ids[si] == src) & (ids[di] == dst) & (src != dst)
        codes.append((si[keep] * n + di[keep]) * 16 + (1 << bit))
    merged = np.concatenate(codes) if codes else np.empty(0, dtype=np.int64)
    merged.sort()  # (np.unique hashes first: 4.8 s for 3M codes, against 0.3 s for a sort)
    merged = merged[np.diff(merged, prepend=-1) != 0]
    edge = merged >> 4
    starts = np.flatnonzero(np.diff(edge, prepend=-1))
    kinds = np.bitwise_or.reduceat((merged & 15).astype(np.uint8), starts) if len(starts) else (
        np.empty(0, dtype=np.uint8)
    )  # fmt: skip
    edge = edge[starts]
    adj = graph.adj
    if len(edge) != graph.edges or not (
        np.array_equal(edge % max(n, 1), adj.indices)
        and np.array_equal(np.bincount(edge // max(n, 1), minlength=n), np.diff(adj.indptr))
    ):
        raise ValueError(f"{graph.source}: the graph files changed while being read")
    return np.asarray(kinds, dtype=np.uint8)


_KIND_NAMES: Final = [
    ",".join(k for i, k in enumerate(KIND_ORDER) if mask >> i & 1) for mask in range(16)
]


def _xml(text: str) -> str:
    """`text` for an XML attribute or element: escaped, characters XML forbids replaced by
    their UTF-8 bytes percent-encoded (as in a URL)."""
    text = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    text = text.replace('"', "&quot;")
    if _XML_BAD.search(text):
        text = _XML_BAD.sub(
            lambda m: "".join(
                f"%{b:02X}" for b in m.group().encode("utf-8", "surrogatepass")
            ),
            text,
        )
    return text


def _names(graph: LoadedGraph, one_based: bool) -> list[str]:
    if one_based:
        return [str(i) for i in range(1, graph.nodes + 1)]
    return [str(i) for i in graph.ids]


def _chunks(graph: LoadedGraph, template: str, one_based: bool) -> Iterator[str]:
    src, dst = graph.edge_pairs()
    names = _names(graph, one_based)
    for lo in range(0, len(src), _CHUNK):
        s, d = src[lo : lo + _CHUNK].tolist(), dst[lo : lo + _CHUNK].tolist()
        yield "".join(template.format(names[a], names[b]) for a, b in zip(s, d, strict=True))


# (key, GraphML type, GEXF type) of each node attribute, in the files' order
_NODE_KEYS: Final = (
    ("url", "string", "string"),
    ("host", "string", "string"),
    ("status", "int", "integer"),
    ("depth", "int", "integer"),
    ("content_type", "string", "string"),
    ("in_degree", "int", "integer"),
    ("out_degree", "int", "integer"),
    ("pagerank", "double", "double"),
)


def _node_attributes(table: NodeTable, lo: int, hi: int, wrap: str) -> list[str]:
    """For nodes lo..hi-1, the text of their attributes: each attribute the node has
    formatted with `wrap` ({0}: its index in _NODE_KEYS, {1}: its key, {2}: its value),
    built column by column (a comprehension per attribute, not a loop per node)."""
    texts: list[list[str]] = []
    for k, (key, _g, _x) in enumerate(_NODE_KEYS):
        column = getattr(table, key)
        if column is None:
            continue
        part = column[lo:hi]
        if isinstance(part, np.ndarray):
            part = part.tolist()
        head, tail = wrap.format(k, key, "\0").split("\0")
        if key == "pagerank":
            texts.append([f"{head}{v!r}{tail}" for v in part])
        elif key in ("in_degree", "out_degree"):
            texts.append([f"{head}{v}{tail}" for v in part])
        else:
            texts.append([
                "" if v is None else f"{head}{_xml(v) if isinstance(v, str) else v}{tail}"
                for v in part
            ])  # fmt: skip
    if not texts:
        return [""] * (hi - lo)
    return ["".join(row) for row in zip(*texts, strict=True)]


def _edge_texts(
    graph: LoadedGraph, table: NodeTable, template: str, with_kind: str
) -> Iterator[str]:
    """Each edge formatted with `template` (source name, target name, edge number) or, when
    the graph has kinds, with `with_kind` (source, target, kind names, edge number)."""
    src, dst = graph.edge_pairs()
    names = _names(graph, one_based=False)
    kinds = table.kinds
    for lo in range(0, len(src), _CHUNK):
        s, d = src[lo : lo + _CHUNK].tolist(), dst[lo : lo + _CHUNK].tolist()
        if kinds is None:
            yield "".join(map(template.format, map(names.__getitem__, s),
                              map(names.__getitem__, d), range(lo, lo + len(s))))  # fmt: skip
        else:
            ks = map(_KIND_NAMES.__getitem__, kinds[lo : lo + _CHUNK].tolist())
            yield "".join(map(with_kind.format, map(names.__getitem__, s),
                              map(names.__getitem__, d), ks, range(lo, lo + len(s))))  # fmt: skip


def _graphml(graph: LoadedGraph, table: NodeTable) -> Iterator[str]:
    yield (
        '<?xml version="1.0" encoding="UTF-8"?>\n'
        '<graphml xmlns="http://graphml.graphdrawing.org/xmlns">\n'
    )
    present = [k for k, (key, _g, _x) in enumerate(_NODE_KEYS) if getattr(table, key) is not None]
    for k in present:
        key, gtype, _x = _NODE_KEYS[k]
        yield f'<key id="{key}" for="node" attr.name="{key}" attr.type="{gtype}"/>\n'
    if table.kinds is not None:
        yield '<key id="kind" for="edge" attr.name="kind" attr.type="string"/>\n'
    yield '<graph id="G" edgedefault="directed">\n'
    names = _names(graph, one_based=False)
    for lo in range(0, graph.nodes, _CHUNK):
        hi = min(graph.nodes, lo + _CHUNK)
        attributes = _node_attributes(table, lo, hi, '<data key="{1}">{2}</data>')
        yield "".join(
            f'<node id="{name}">{text}</node>\n'
            for name, text in zip(names[lo:hi], attributes, strict=True)
        )
    yield from _edge_texts(
        graph, table, '<edge source="{}" target="{}"/>\n',
        '<edge source="{0}" target="{1}"><data key="kind">{2}</data></edge>\n',
    )  # fmt: skip
    yield "</graph>\n</graphml>\n"


def _gexf(graph: LoadedGraph, table: NodeTable) -> Iterator[str]:
    yield (
        '<?xml version="1.0" encoding="UTF-8"?>\n'
        '<gexf xmlns="http://www.gexf.net/1.2draft" version="1.2">\n'
        f"<meta><creator>gossamer</creator><description>{_xml(graph.source)}</description>"
        "</meta>\n"
        '<graph mode="static" defaultedgetype="directed">\n'
        '<attributes class="node">\n'
    )
    for k, (key, _g, xtype) in enumerate(_NODE_KEYS):
        if getattr(table, key) is not None:
            yield f'<attribute id="n{k}" title="{key}" type="{xtype}"/>\n'
    yield "</attributes>\n"
    if table.kinds is not None:
        yield '<attributes class="edge">\n<attribute id="e0" title="kind" type="string"/>\n'
        yield "</attributes>\n"
    yield "<nodes>\n"
    names = _names(graph, one_based=False)
    urls = table.url
    for lo in range(0, graph.nodes, _CHUNK):
        hi = min(graph.nodes, lo + _CHUNK)
        attributes = _node_attributes(table, lo, hi, '<attvalue for="n{0}" value="{2}"/>')
        labels = [_xml(u) for u in urls[lo:hi]] if urls is not None else names[lo:hi]
        yield "".join(
            f'<node id="{name}" label="{label}"><attvalues>{text}</attvalues></node>\n'
            for name, label, text in zip(names[lo:hi], labels, attributes, strict=True)
        )
    yield "</nodes>\n<edges>\n"
    yield from _edge_texts(
        graph, table, '<edge id="{2}" source="{0}" target="{1}"/>\n',
        '<edge id="{3}" source="{0}" target="{1}"><attvalues>'
        '<attvalue for="e0" value="{2}"/></attvalues></edge>\n',
    )  # fmt: skip
    yield "</edges>\n</graph>\n</gexf>\n"


def _lines(graph: LoadedGraph, fmt: str) -> Iterator[str]:
    n, m = graph.nodes, graph.edges
    if fmt == "edgelist":
        yield f"# gossamer graph export of {graph.source}: {n} nodes, {m} edges\n"
        yield from _chunks(graph, "{}\t{}\n", one_based=False)
    elif fmt == "dimacs":
        yield f"c gossamer graph export of {graph.source}\n"
        yield f"p sp {n} {m}\n"
        yield from _chunks(graph, "a {} {} 1\n", one_based=True)
    elif fmt == "graphml":
        yield from _graphml(graph, node_table(graph))
    else:
        yield from _gexf(graph, node_table(graph))


def _write_parquet(graph: LoadedGraph, directory: Path) -> None:
    """`nodes.parquet` and `edges.parquet` in `directory` (module docstring)."""
    import pyarrow as pa  # 0.4 s to import: only here
    import pyarrow.parquet as pq

    table = node_table(graph)
    big_ids = isinstance(graph.ids, list)  # ids beyond 64 bits: text
    id_type = pa.string() if big_ids else pa.int64()
    ids = graph.ids if big_ids else np.asarray(graph.ids, dtype=np.int64)
    node_fields = [pa.field("id", id_type)]
    for key, gtype, _x in _NODE_KEYS:
        if getattr(table, key) is not None:
            kind = {"string": pa.string(), "int": pa.int64(), "double": pa.float64()}[gtype]
            node_fields.append(pa.field(key, kind))
    node_schema = pa.schema(node_fields)
    with pq.ParquetWriter(directory / "nodes.parquet", node_schema) as writer:
        for lo in range(0, graph.nodes, _PARQUET_ROWS):
            hi = min(graph.nodes, lo + _PARQUET_ROWS)
            columns = [pa.array(ids[lo:hi], type=id_type)]
            columns.extend(
                pa.array(getattr(table, f.name)[lo:hi], type=f.type) for f in node_fields[1:]
            )
            writer.write_table(pa.Table.from_arrays(columns, schema=node_schema))
    edge_fields = [pa.field("src", id_type), pa.field("dst", id_type)]
    if table.kinds is not None:
        edge_fields.append(pa.field("kind", pa.dictionary(pa.int8(), pa.string())))
    edge_schema = pa.schema(edge_fields)
    src, dst = graph.edge_pairs()
    kind_names = pa.array(_KIND_NAMES, type=pa.string())
    with pq.ParquetWriter(directory / "edges.parquet", edge_schema) as writer:
        for lo in range(0, graph.edges, _PARQUET_ROWS):
            hi = min(graph.edges, lo + _PARQUET_ROWS)
            s, d = src[lo:hi], dst[lo:hi]
            if big_ids:
                cols = [pa.array([ids[i] for i in s.tolist()], type=id_type),
                        pa.array([ids[i] for i in d.tolist()], type=id_type)]  # fmt: skip
            else:
                cols = [pa.array(ids[s]), pa.array(ids[d])]
            if table.kinds is not None:
                codes = pa.array(table.kinds[lo:hi].astype(np.int8))
                cols.append(pa.DictionaryArray.from_arrays(codes, kind_names))
            writer.write_table(pa.Table.from_arrays(cols, schema=edge_schema))


def write_graph(graph: LoadedGraph, out: Path, fmt: str, *, force: bool = False) -> None:
    """Write `graph` to `out` in `fmt` (see the module docstring; `parquet` makes `out` a
    directory). Raises ValueError for an unknown format or an existing `out` (without
    `force`), OSError when writing fails."""
    if fmt not in EXPORT_FORMATS:
        raise ValueError(f"--format must be one of {', '.join(EXPORT_FORMATS)}, not {fmt!r}")
    if out.exists() and not force:
        raise ValueError(f"{out}: exists (give --force to overwrite it)")
    if out.is_dir() and fmt != "parquet":
        raise ValueError(f"{out}: is a directory")
    if fmt == "parquet" and out.exists() and not out.is_dir():
        raise ValueError(f"{out}: not a directory (parquet writes a directory)")
    partial = out.with_name(out.name + ".partial")
    try:
        if fmt == "parquet":
            shutil.rmtree(partial, ignore_errors=True)
            partial.mkdir()
            _write_parquet(graph, partial)
            if out.exists():
                shutil.rmtree(out)
            os.replace(partial, out)
            return
        with open(partial, "w", encoding="utf-8", errors="replace") as f:
            for text in _lines(graph, fmt):
                f.write(text)
        os.replace(partial, out)
    except BaseException:
        if partial.is_dir():
            shutil.rmtree(partial, ignore_errors=True)
        else:
            partial.unlink(missing_ok=True)
        raise
