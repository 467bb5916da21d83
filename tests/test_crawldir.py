"""The crawl directory's layout (gossamer.crawldir): the paths `CrawlDir` and `ClusterDir` give,
its lock, and that no module of src/gossamer but crawldir.py spells a name of the layout.

The scan reads every module's string constants and f-strings (docstrings aside: they document
the layout). File names with an extension are looked for anywhere in a string; the directory
names are ordinary words ("graph" is also a subcommand, "warc" a setting and a sink), so they
count only where they are used as a path component: an operand of `/`, an argument of
`Path(…)` / `.joinpath(…)` / `os.path.join(…)`, or a module or class constant.
"""

from __future__ import annotations

import ast
import dataclasses
import os
import re
from pathlib import Path

import pytest

from gossamer import crawldir
from gossamer.crawldir import (
    ClusterDir,
    CrawlDir,
    CrawlError,
    dir_lock,
    flock_held,
    graph_part,
    stats_part,
)

ROOT = Path(__file__).resolve().parents[1]
PKG = ROOT / "src" / "gossamer"

#: the layout's file names, wherever a string holds one (`*` or a part in place of `[^/\s]*`)
FILE_NAMES = re.compile(
    r"(?<![\w.-])(?:"
    r"crawl\.json|frontier\.sqlite|robots\.sqlite|neardup\.sqlite|index\.cdxj"
    r"|crawl[^/\s]*\.log\.jsonl|gossamer\.log\.jsonl"
    r"|(?:nodes|edges)[^/\s]*\.tsv|stats[^/\s]*\.json|runs\.jsonl|control\.json"
    r"|follow\.lock|follow\.log|worker\.json|resolve\.txt|journal\.bin|items[^/\s]*\.jsonl"
    r")(?![\w.])"
)
#: the layout's directory names (and the lock file's): only as path components
DIR_NAMES = frozenset({"warc", "cdx", "graph", "workers", "locks", "lock", "logs", "items"})

#: (module under src/gossamer, name) → why that module may spell it
EXCEPTIONS = {
    ("cluster/stream.py", "graph"): "GROUP, the Redis consumer group's name: no path",
    ("testweb/_export.py", "resolve.txt"): "the simulated web's export directory's own file",
    ("testweb/cli_export.py", "resolve.txt"): "the simulated web's export directory's own file",
    ("testweb/cli_demo.py", "resolve.txt"): "the simulated web's file in the demo's directory",
    ("runner/demo.py", "resolve.txt"): "the simulated web's file beside the demo's crawl",
    ("experiments/cluster_run.py", "resolve.txt"): "the simulated web's, in the work directory",
    ("testweb/_export.py", "logs"): "nginx's log directory in an exported web",
    ("testweb/_nginx.py", "logs"): "nginx's log directory in an exported web",
}


def _docstrings(tree: ast.AST) -> set[int]:
    ids = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            first = node.body[0] if node.body else None
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                ids.add(id(first.value))
    return ids


def _text(node: ast.expr) -> str | None:
    """A string constant's value, or an f-string with `*` for each value it formats."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(v.value if isinstance(v, ast.Constant) else "*" for v in node.values)
    return None


def _path_parts(tree: ast.Module) -> list[ast.expr]:
    """The expressions used as path components (module docstring)."""
    parts: list[ast.expr] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div):
            parts += [node.left, node.right]
        elif isinstance(node, ast.Call):
            f = node.func
            name = f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", "")
            if name in ("Path", "PurePath", "joinpath", "join"):
                parts += node.args
    for scope in [tree, *(n for n in ast.walk(tree) if isinstance(n, ast.ClassDef))]:
        for stmt in scope.body:
            if isinstance(stmt, ast.Assign | ast.AnnAssign) and stmt.value is not None:
                parts.append(stmt.value)
    return parts


def layout_spellings(source: str) -> list[tuple[int, str]]:
    """(line, name) of each name of the layout `source` spells (module docstring)."""
    tree = ast.parse(source)
    docs = _docstrings(tree)
    inner = {id(v) for n in ast.walk(tree) if isinstance(n, ast.JoinedStr) for v in n.values}
    found = []
    for node in ast.walk(tree):
        if id(node) in docs or id(node) in inner or not isinstance(node, ast.expr):
            continue
        text = _text(node)
        if text is not None:
            found += [(node.lineno, m.group()) for m in FILE_NAMES.finditer(text)]
    for part in _path_parts(tree):
        if _text(part) in DIR_NAMES:
            found.append((part.lineno, str(_text(part))))
    return sorted(found)


def test_no_module_but_crawldir_spells_a_name_of_the_layout() -> None:
    found, excused = [], set()
    for path in sorted(PKG.rglob("*.py")):
        module = path.relative_to(PKG).as_posix()
        if module == "crawldir.py":
            continue
        for line, name in layout_spellings(path.read_text()):
            if (module, name) in EXCEPTIONS:
                excused.add((module, name))
            else:
                found.append(f"src/gossamer/{module}:{line}: {name!r}")
    assert not found, "take these from gossamer.crawldir (CrawlDir, its constants):\n" + (
        "\n".join(found)
    )
    assert excused == set(EXCEPTIONS), f"no longer needed: {set(EXCEPTIONS) - excused}"


@pytest.mark.parametrize(
    ("source", "names"),
    [
        ('p = out / "crawl.json"', ["crawl.json"]),
        ('p = out / f"stats-{part}.json"', ["stats-*.json"]),
        ('ps = sorted(g.glob("edges*.tsv"))', ["edges*.tsv"]),
        ('ps = out.glob("w*/crawl.log.jsonl")', ["crawl.log.jsonl"]),
        ('e = ValueError(f"{out}: no crawl.json")', ["crawl.json"]),
        ('h = "then writing stats.json"', ["stats.json"]),
        ('p = out / "warc" / name', ["warc"]),
        ("p = Path(out, 'graph')", ["graph"]),
        ('p = out.joinpath("workers")', ["workers"]),
        ('HEARTBEATS = "workers"', ["workers"]),
        ('class A:\n    DIR: str = "locks"', ["locks"]),
        ('"""Writes DIR/crawl.json and DIR/graph/."""', []),
        ('def f():\n    """stats.json"""', []),
        ('register_sink("warc", WarcSink)', []),
        ('p = sub.add_parser("graph")', []),
        ('d = {"workers": 2, "graph": None}', []),
        ('w = root / "tests/data/graphs/cnr-2000.edges.tsv.gz"', []),
        ('r = out / "results.json"', []),
    ],
)
def test_the_scan_finds_each_kind_of_spelling(source: str, names: list[str]) -> None:
    assert [name for _, name in layout_spellings(source)] == names


def _layout_constants() -> dict[str, str]:
    public = {k: v for k, v in vars(crawldir).items() if k.isupper() and not k.startswith("_")}
    return {k: v for k, v in public.items() if isinstance(v, str) and "*" not in v}


def test_the_scan_knows_every_name_and_the_docs_list_them() -> None:
    names = _layout_constants()
    assert len(names) >= 20
    unscanned = [v for v in names.values() if not FILE_NAMES.fullmatch(v) and v not in DIR_NAMES]
    assert not unscanned, f"add them to FILE_NAMES or DIR_NAMES: {unscanned}"
    doc = crawldir.__doc__ or ""
    assert not [v for v in names.values() if v not in doc], "crawldir's docstring lacks a name"
    outputs = (ROOT / "docs" / "crawler" / "outputs.md").read_text()
    cluster_only = {crawldir.SPAWN_LOGS, crawldir.FOLLOW_LOG, crawldir.JOURNAL}
    missing = [v for v in names.values() if v not in outputs and v not in cluster_only]
    assert not missing, f"docs/crawler/outputs.md lacks {missing}"
    cluster = (ROOT / "docs" / "cluster.md").read_text()
    assert all(name in cluster for name in cluster_only)


# ------------------------------------------------------------------------------ the object


def test_the_paths_of_a_crawl_directory() -> None:
    d = CrawlDir(Path("DIR"))
    paths = {
        "manifest": "DIR/crawl.json",
        "frontier": "DIR/frontier.sqlite",
        "robots": "DIR/robots.sqlite",
        "near_dups": "DIR/neardup.sqlite",
        "warc_dir": "DIR/warc",
        "cdx_index": "DIR/warc/index.cdxj",
        "crawl_log": "DIR/crawl.log.jsonl",
        "diagnostics": "DIR/gossamer.log.jsonl",
        "graph_dir": "DIR/graph",
        "live_graph_stats": "DIR/graph/stats.json",
        "follow_lock": "DIR/graph/follow.lock",
        "stats": "DIR/stats.json",
        "runs": "DIR/runs.jsonl",
        "lock": "DIR/lock",
        "ip_locks": "DIR/locks",
        "heartbeats": "DIR/workers",
        "control": "DIR/control.json",
        "worker_record": "DIR/worker.json",
        "resolve_file": "DIR/resolve.txt",
    }
    assert {name: str(getattr(d, name)) for name in paths} == paths
    assert str(d.graph_nodes()) == "DIR/graph/nodes.tsv"
    assert str(d.graph_edges()) == "DIR/graph/edges.tsv"
    assert str(d.graph_nodes("w0")) == "DIR/graph/nodes-w0.tsv"
    assert str(d.graph_edges("w12")) == "DIR/graph/edges-w12.tsv"
    assert str(d.worker_stats("w3")) == "DIR/stats-w3.json"
    assert str(d.heartbeat("main")) == "DIR/workers/main.json"
    assert CrawlDir(Path("DIR")) == d and hash(CrawlDir(Path("DIR"))) == hash(d)
    with pytest.raises(dataclasses.FrozenInstanceError):
        d.path = Path("elsewhere")  # type: ignore[misc]


def test_parts_are_found_and_named(tmp_path: Path) -> None:
    d = CrawlDir(tmp_path)
    assert d.crawl_logs() == d.graph_node_files() == d.worker_stats_files() == []
    d.graph_dir.mkdir()
    for part in ("w1", "", "w0"):
        d.graph_nodes(part).touch()
        d.graph_edges(part).touch()
        d.worker_stats(part or "w10").touch()
    (d.graph_dir / "nodes.tsv.bak").touch()
    d.stats.touch()
    d.worker_stats("x").touch()
    d.crawl_log.touch()
    (tmp_path / "crawl-w0.log.jsonl").touch()
    assert [p.name for p in d.graph_node_files()] == ["nodes-w0.tsv", "nodes-w1.tsv", "nodes.tsv"]
    assert [p.name for p in d.graph_edge_files()] == ["edges-w0.tsv", "edges-w1.tsv", "edges.tsv"]
    assert [graph_part(p) for p in d.graph_edge_files()] == ["w0", "w1", ""]
    assert [stats_part(p) for p in d.worker_stats_files()] == ["w0", "w1", "w10"]
    assert [p.name for p in d.crawl_logs()] == ["crawl-w0.log.jsonl", "crawl.log.jsonl"]


def test_the_writers_use_its_paths(tmp_path: Path) -> None:
    from gossamer.engine.heartbeat import beat_path
    from gossamer.sinks import GraphWriter

    with GraphWriter(tmp_path, part="w2") as graph:
        graph.add_edges("http://a.example/", ["http://b.example/"])
    d = CrawlDir(tmp_path)
    assert d.graph_nodes("w2").read_text().count("\n") == 3
    assert d.graph_edges("w2").read_text().count("\n") == 2
    assert beat_path(tmp_path, "w2") == d.heartbeat("w2")


def test_the_lock_holds_the_pid_of_its_holder(tmp_path: Path) -> None:
    d = CrawlDir(tmp_path)
    assert not d.locked() and d.lock_pid() is None and not flock_held(d.lock)
    with dir_lock(tmp_path):
        assert d.locked() and d.lock_pid() == os.getpid()
        with pytest.raises(CrawlError, match="another crawler is running"), dir_lock(tmp_path):
            pass
    assert not d.locked() and d.lock_pid() == os.getpid()  # who held it last
    d.lock.write_text("not a pid\n")
    assert d.lock_pid() is None


def test_a_cluster_directory(tmp_path: Path) -> None:
    c = ClusterDir(tmp_path)
    assert c.workers() == []
    for name in ("w2", "w10", "x1"):
        (tmp_path / name).mkdir()
    (tmp_path / "w9").touch()  # a file, not a worker's directory
    assert c.workers() == [c.worker("w10"), c.worker("w2")]
    assert c.worker("w2") == CrawlDir(tmp_path / "w2")
    assert c.spawn_logs == tmp_path / "logs"
    assert c.graph_state == tmp_path / "graph"
    assert c.follow_log == tmp_path / "graph" / "follow.log"
