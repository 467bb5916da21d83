"""GraphWriter / read_graph: format, ids, dedupe, resume, torn lines, parts."""

from __future__ import annotations

from pathlib import Path

import pytest

from gossamer.sinks import GraphWriter, node_id, read_graph


def test_format_ids_and_kinds(tmp_path: Path) -> None:
    a, b, c = "http://a.example/", "http://a.example/b", "http://c.example/"
    with GraphWriter(tmp_path) as g:
        assert g.add_edges(a, [b, c, b, a, c], "link") == 2  # repeats and self-link dropped
        assert g.add_edge(b, a, "redirect")
        assert not g.add_edge(a, a, "canonical")
        assert g.add_edge("http://a.example/sitemap.xml", c, "sitemap")
        with pytest.raises(ValueError, match="kind"):
            g.add_edge(a, b, "frame")
        stats = g.statistics()
    assert (stats.nodes, stats.edges) == (4, 4)
    nodes = (tmp_path / "graph" / "nodes.tsv").read_text().splitlines()
    edges = (tmp_path / "graph" / "edges.tsv").read_text().splitlines()
    assert nodes[0] == "id\turl" and edges[0] == "src\tdst\tkind"
    sitemap = "http://a.example/sitemap.xml"
    assert nodes[1:] == [f"{node_id(u)}\t{u}" for u in (a, b, c, sitemap)]
    assert edges[1] == f"{node_id(a)}\t{node_id(b)}\tlink"
    assert all(0 <= node_id(u) < 2**63 for u in (a, b, c))
    graph = read_graph(tmp_path)
    assert graph.url_edges() == {
        (a, b, "link"),
        (a, c, "link"),
        (b, a, "redirect"),
        ("http://a.example/sitemap.xml", c, "sitemap"),
    }


def test_nodes_are_written_before_their_edges_and_escaped(tmp_path: Path) -> None:
    g = GraphWriter(tmp_path)
    g.add_edge("http://a.example/", "http://a.example/x\ty\nz")
    assert g.statistics().buffered == 3
    g.flush()
    assert g.statistics().buffered == 0
    assert "x%09y%0Az" in (tmp_path / "graph" / "nodes.tsv").read_text()
    assert len(read_graph(tmp_path).edges) == 1
    g.close()
    g.close()


def test_resume_keeps_ids_and_does_not_repeat_nodes(tmp_path: Path) -> None:
    with GraphWriter(tmp_path) as g:
        g.add_edges("http://a.example/", ["http://a.example/1", "http://a.example/2"])
    with GraphWriter(tmp_path) as g:  # a resumed crawl records a page again
        assert g.statistics().nodes == 3
        g.add_edges("http://a.example/", ["http://a.example/1", "http://a.example/3"])
    nodes = (tmp_path / "graph" / "nodes.tsv").read_text().splitlines()
    assert len(nodes) == 1 + 4  # header + 4 distinct URLs, each once
    raw_edges = (tmp_path / "graph" / "edges.tsv").read_text().splitlines()
    assert len(raw_edges) == 1 + 4  # at-least-once: the repeated edge is in the file ...
    assert len(read_graph(tmp_path).edges) == 3  # ... and read once


def test_torn_last_lines_are_cut_on_open(tmp_path: Path) -> None:
    with GraphWriter(tmp_path) as g:
        g.add_edge("http://a.example/", "http://a.example/1")
    gdir = tmp_path / "graph"
    with open(gdir / "nodes.tsv", "a") as f:
        f.write("123\thttp://a.exa")  # killed in the middle of a flush
    with open(gdir / "edges.tsv", "a") as f:
        f.write("1")
    with GraphWriter(tmp_path) as g:
        g.add_edge("http://a.example/1", "http://a.example/2")
    assert not (gdir / "nodes.tsv").read_text().count("http://a.exa\n")
    graph = read_graph(tmp_path)
    assert len(graph.nodes) == 3 and len(graph.edges) == 2


def test_buffer_flushes_by_itself(tmp_path: Path) -> None:
    g = GraphWriter(tmp_path)
    for i in range(3000):
        g.add_edges(f"http://a.example/{i}", [f"http://a.example/{i}/{j}" for j in range(10)])
    assert (tmp_path / "graph" / "edges.tsv").stat().st_size > 200_000  # before close
    g.close()
    assert len(read_graph(tmp_path).edges) == 30_000


def test_parts_of_several_writers_merge(tmp_path: Path) -> None:
    with GraphWriter(tmp_path, part="w0") as g0, GraphWriter(tmp_path, part="w1") as g1:
        g0.add_edge("http://a.example/", "http://b.example/")
        g1.add_edge("http://b.example/", "http://a.example/")
        g1.add_edge("http://a.example/", "http://b.example/")
    names = sorted(p.name for p in (tmp_path / "graph").iterdir())
    assert names == ["edges-w0.tsv", "edges-w1.tsv", "nodes-w0.tsv", "nodes-w1.tsv"]
    graph = read_graph(tmp_path)
    assert len(graph.nodes) == 2 and len(graph.edges) == 2


def test_read_graph_refuses_edges_to_unknown_nodes(tmp_path: Path) -> None:
    gdir = tmp_path / "graph"
    gdir.mkdir()
    (gdir / "nodes.tsv").write_text("id\turl\n1\thttp://a.example/\n")
    (gdir / "edges.tsv").write_text("src\tdst\tkind\n1\t2\tlink\n")
    with pytest.raises(ValueError, match="unknown node"):
        read_graph(tmp_path)


def test_add_out_edges_records_a_page_in_one_call(tmp_path: Path) -> None:
    a, b, c = "http://a.example/", "http://a.example/b", "http://c.example/"
    with GraphWriter(tmp_path) as g:
        pairs = [(b, "link"), (a, "link"), (c, "canonical"), (b, "link"), (b, "redirect")]
        assert g.add_out_edges(a, pairs) == 3  # the self-link and the repeat left out
        assert g.statistics().buffered == 3 + 3  # three nodes, three edges
        assert g.add_out_edges(b, [(c, "link")]) == 1
        assert g.add_out_edges(c, []) == 0
        with pytest.raises(ValueError, match="kind"):
            g.add_out_edges(a, [(c, "link"), (b, "nope")])
        assert g.statistics().edges == 4
    graph = read_graph(tmp_path)
    assert graph.url_edges() == {
        (a, b, "link"),
        (a, c, "canonical"),
        (a, b, "redirect"),
        (b, c, "link"),
    }
    assert set(graph.nodes) == {node_id(a), node_id(b), node_id(c)}
    with GraphWriter(tmp_path) as g:  # reopened: known nodes are not written again
        g.add_out_edges(a, [(b, "link")])
    nodes = (tmp_path / "graph" / "nodes.tsv").read_text().splitlines()
    assert len(nodes) == 1 + 3
