"""The packages of src/gossamer import one way: no import cycle between two of them, and no
import of a layer above (the layers are drawn in docs/architecture.md, "Layers"). Every
import counts, those inside functions too; those under `if TYPE_CHECKING:` do not."""

from __future__ import annotations

import ast
import re
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src"


def _module_name(path: Path, src: Path) -> str:
    parts = list(path.relative_to(src).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _type_checking_nodes(tree: ast.AST) -> set[int]:
    ids: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for stmt in node.body:  # (the else branch runs)
                ids.update(id(sub) for sub in ast.walk(stmt))
    return ids


def module_imports(src: Path, top: str = "gossamer") -> dict[str, set[str]]:
    """Each module of the package `top` under `src` and the modules of `top` it imports."""
    paths = sorted((src / top).rglob("*.py"))
    modules = {_module_name(p, src) for p in paths}
    found: dict[str, set[str]] = {}
    for path in paths:
        name = _module_name(path, src)
        tree = ast.parse(path.read_text(), str(path))
        skip = _type_checking_nodes(tree)
        base = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
        targets: set[str] = set()
        for node in ast.walk(tree):
            if id(node) in skip:
                continue
            if isinstance(node, ast.Import):
                targets.update(a.name for a in node.names)
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    up = base[: len(base) - (node.level - 1)]
                    target = ".".join(up + ([node.module] if node.module else []))
                else:
                    target = node.module or ""
                for alias in node.names:  # `from . import logs` imports gossamer.logs
                    sub = f"{target}.{alias.name}"
                    targets.add(sub if sub in modules else target)
        found[name] = {t for t in targets if t in modules and t != name}
    return found


def unit_of(module: str) -> str:
    """The unit a module belongs to: its top-level package or module below gossamer."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def unit_edges(imports: dict[str, set[str]]) -> dict[tuple[str, str], list[str]]:
    edges: dict[tuple[str, str], list[str]] = defaultdict(list)
    for src_mod, targets in imports.items():
        for target in targets:
            a, b = unit_of(src_mod), unit_of(target)
            if a != b:
                edges[a, b].append(f"{src_mod} -> {target}")
    return edges


def cycles(edges: dict[tuple[str, str], list[str]]) -> list[list[str]]:
    """The strongly connected components of more than one unit (Tarjan)."""
    graph: dict[str, set[str]] = defaultdict(set)
    for a, b in edges:
        graph[a].add(b)
        graph.setdefault(b, set())
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def layers_from_doc(text: str) -> list[list[str]]:
    """The layers drawn in docs/architecture.md's ```layers block, top first."""
    block = re.search(r"```layers\n(.*?)```", text, flags=re.DOTALL)
    assert block, "docs/architecture.md has no ```layers block"
    rows = []
    for line in block.group(1).splitlines():
        names = line.split("#", 1)[0].split()
        if names:
            rows.append([n.rstrip("/").removesuffix(".py") for n in names])
    return rows


def upward(
    edges: dict[tuple[str, str], list[str]], layers: list[list[str]]
) -> list[str]:
    """The imports of a unit in a layer above the importer's (layers: top first)."""
    rank = {name: i for i, row in enumerate(layers) for name in row}
    bad = []
    for (a, b), where in sorted(edges.items()):
        if rank[b] < rank[a]:
            bad.extend(f"{w} (layer {rank[a]} imports layer {rank[b]})" for w in where)
    return bad


def test_no_cycle_between_packages() -> None:
    found = cycles(unit_edges(module_imports(SRC)))
    assert not found, f"import cycles between packages: {found}"


def test_no_upward_import_against_the_documented_layers() -> None:
    layers = layers_from_doc((ROOT / "docs" / "architecture.md").read_text())
    edges = unit_edges(module_imports(SRC))
    units = {unit_of(m) for m in module_imports(SRC)}
    drawn = {name for row in layers for name in row}
    assert units <= drawn, f"units missing from docs/architecture.md's layers: {units - drawn}"
    assert drawn <= units, f"layers name units that do not exist: {drawn - units}"
    bad = upward(edges, layers)
    assert not bad, "upward imports:\n" + "\n".join(bad)


def _tree(tmp_path: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = tmp_path / "gossamer" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return tmp_path


def test_the_check_finds_a_cycle_through_a_function_level_import(tmp_path: Path) -> None:
    src = _tree(
        tmp_path,
        {
            "__init__.py": "",
            "a/__init__.py": "",
            "a/x.py": "from ..b import y\n",
            "b/__init__.py": "",
            "b/y.py": "def f():\n    from ..a import x\n",
        },
    )
    assert cycles(unit_edges(module_imports(src))) == [["a", "b"]]


def test_the_check_ignores_type_checking_imports_and_finds_upward_ones(tmp_path: Path) -> None:
    src = _tree(
        tmp_path,
        {
            "__init__.py": "",
            "low.py": (
                "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from . import high\n"
            ),
            "high.py": "from . import low\n",
            "mid.py": "import gossamer.high\n",
        },
    )
    edges = unit_edges(module_imports(src))
    assert cycles(edges) == []
    assert set(edges) == {("high", "low"), ("mid", "high")}
    assert upward(edges, [["high"], ["mid"], ["low"]]) == [
        "gossamer.mid -> gossamer.high (layer 1 imports layer 0)"
    ]
