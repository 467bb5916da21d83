"""`gossamer graphbench` end to end: the real command line in a subprocess, with the test-only
algorithms of tests/graphbench_algorithms.py registered before `gossamer.cli.main` runs."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parents[1]
# the real entry point, after importing the test-only algorithms (they register themselves)
LAUNCH = (
    f"import sys; sys.path.insert(0, {str(TESTS)!r}); import graphbench_algorithms; "
    "from gossamer.cli import main; sys.exit(main(sys.argv[1:]))"
)
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def gossamer(*args: str | Path, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", LAUNCH, *map(str, args)],
        capture_output=True, text=True, timeout=timeout, check=False,
    )  # fmt: skip


def test_list_names_every_registered_algorithm_with_its_summary() -> None:
    done = gossamer("graphbench", "list")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith("apsd: ")
    batch = r"  test-batch +test only: works in flush\(\) \[batch\]"
    assert any(re.fullmatch(batch, x) for x in lines)
    assert any(re.fullmatch(r"  test-small +test only: max_n 4 \[n <= 4\]", x) for x in lines)
    assert any(re.fullmatch(r"  algorithm1 +SPAWC's APSD Algorithm 1 .*", x) for x in lines)
    markdown = gossamer("graphbench", "list", "--markdown").stdout
    assert "| scc | `test-reference` | no | - | test only: the scipy reference |" in markdown


def test_validation_failure_exits_non_zero_and_names_the_difference() -> None:
    done = gossamer(
        "graphbench", "run", "--family", "scc", "--algorithm", "test-reference", "test-broken",
        "--graph", "sanity:2", "--trials", "2", "--validate",
    )  # fmt: skip
    assert done.returncode == 1, done
    out = done.stdout.splitlines()
    assert out[0] == "graph sanity:2: 8 vertices, 14 edges, density 23.21%"
    assert out[1].startswith("test-reference ") and out[1].endswith("ok, passed")
    assert "trials=2 " in out[1]
    assert out[2].startswith("test-broken ") and out[2].endswith("wrong answer, FAILED")
    assert out[3].startswith("  validation FAILED: 8 of 8 vertices in a wrong component")
    assert done.stderr.strip() == "gossamer: test-broken: wrong answer on sanity:2"


def test_show_prints_the_distance_matrix_like_spawcs_figure_6() -> None:
    done = gossamer(
        "graphbench", "run", "--family", "apsd", "--algorithm", "test-reference",
        "--graph", "sanity:3", "--trials", "1", "--validate", "--show",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[2:] == [
        "    0  1  2  3",
        " 0  0  1  2  2",
        " 1  2  0  1  1",
        " 2  2  3  0  1",
        " 3  1  2  3  0",
    ]
    scc = gossamer(
        "graphbench", "run", "--family", "scc", "--algorithm", "test-reference",
        "--graph", "sanity:1", "--trials", "1", "--show",
    )  # fmt: skip
    assert scc.stdout.splitlines()[2:] == [
        "5 strongly connected components:",
        "  0: {0, 1, 2}",
        "  1: {3}",
        "  2: {4, 5}",
        "  3: {6}",
        "  4: {7}",
    ]


def test_json_and_a_timeout_which_is_a_result_not_a_failure() -> None:
    done = gossamer(
        "graphbench", "run", "--family", "apsd", "--algorithm", "test-reference", "test-slow",
        "--graph", "sparse:10:40", "--trials", "2", "--timeout", "0.5", "--json",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    ok, slow = json.loads(done.stdout)
    assert ok["status"] == "ok" and len(ok["trials"]) == 2 and ok["mean"] > 0
    assert ok["validated"] is None and ok["memory"] >= 0
    assert slow["status"] == "timeout" and slow["mean"] is None
    assert slow["error"] == "stopped after 0.5 s"


def test_convert_spec_to_dimacs_to_edgelist_and_back(tmp_path: Path) -> None:
    gr, txt = tmp_path / "g.gr", tmp_path / "g.txt"
    done = gossamer("graphbench", "convert", "sparse:12:30:seed=9", gr, "--to", "dimacs")
    assert done.returncode == 0
    assert done.stdout.strip() == f"wrote {gr}: 12 vertices, 30 edges (dimacs)"
    assert gr.read_text().splitlines()[1] == "p sp 12 30"
    assert gossamer("graphbench", "convert", gr, txt, "--to", "edgelist").returncode == 0
    again = tmp_path / "again.gr"
    assert gossamer("graphbench", "convert", txt, again, "--to", "dimacs").returncode == 0
    assert again.read_text().splitlines()[1:] == gr.read_text().splitlines()[1:]
    refused = gossamer("graphbench", "convert", txt, gr, "--to", "dimacs")
    assert refused.returncode == 2 and "exists (give --force" in refused.stderr
    assert gossamer("graphbench", "convert", txt, gr, "--to", "dimacs", "--force").returncode == 0


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (("run", "--family", "apsd", "--algorithm", "nope", "--graph", "sanity:1"),
         "no apsd algorithm 'nope' (known: floyd-warshall, bfs, "),
        (("run", "--family", "scc", "--algorithm", "all", "--graph", "missing.gr"),
         "missing.gr: no such file"),
        (("run", "--family", "scc", "--algorithm", "all", "--graph", "sparse:x"),
         "'sparse:x': N must be a whole number (want sparse:N[:M][:seed=S])"),
        (("run", "--family", "apsd", "--algorithm", "test-reference", "--graph", "complete:31",
          "--show"), "--show prints an n × n result: complete:31 has 31 vertices, more than 30"),
        (("run", "--family", "apsd", "--algorithm", "test-reference", "--graph", "sanity:1",
          "--trials", "0"), "trials and threshold must be at least 1"),
        (("reproduce", "-o", "x", "--quick", "--algorithm", "test-reference", "nope"),
         "no algorithm 'nope' in any family (known: floyd-warshall, "),
        (("convert", "sanity:1", "out.x", "--to", "graphml"),
         "--to must be one of dimacs, edgelist"),
        (("run", "--family", "bfs", "--algorithm", "x", "--graph", "sanity:1"),
         "--family bfs: expected one of apsd, scc"),
    ],
)  # fmt: skip
def test_bad_input_is_one_error_line_and_exit_2(
    tmp_path: Path, args: tuple[str, ...], needle: str
) -> None:
    done = gossamer("graphbench", *args)
    assert done.returncode == 2, done
    assert needle in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr  # no usage dump
    assert done.stdout == ""


def test_reproduce_quick_writes_tables_and_plots(tmp_path: Path) -> None:
    out = tmp_path / "figures"
    algorithms = ("test-reference", "test-broken", "test-slow", "test-batch")
    done = gossamer(
        "graphbench", "reproduce", "-o", out, "--quick", "--timeout", "0.5",
        "--algorithm", *algorithms,
    )  # fmt: skip
    # test-broken's wrong answers are found and make the command fail, after writing it all
    assert done.returncode == 1, done.stderr
    assert "gossamer: wrong answer: apsd test-broken sparse:8:24:seed=1" in done.stderr
    names = {p.name for p in out.iterdir()}
    assert {"apsd.md", "scc.md", "results.json"} <= names
    for kind in ("sparse", "road", "web", "complete"):
        assert f"apsd-{kind}.png" in names and f"scc-{kind}.png" in names
    assert "scc-dense.png" in names
    for png in out.glob("*.png"):
        assert png.read_bytes()[:8] == PNG_MAGIC, png
    apsd = (out / "apsd.md").read_text()
    assert "## sparse: random sparse, m = 3n" in apsd and "![apsd sparse](apsd-sparse.png)" in apsd
    assert "| 8 | 24 | " in apsd and "**WRONG**" in apsd
    assert "| test-slow | none (timeout at 8) |" in apsd
    assert "| test-reference | 32 |" in apsd  # --quick stops at n = 32
    assert "| n | m | test-reference | test-broken | test-slow | test-batch |" in apsd
    assert "test-raises" not in apsd  # registered, not asked for
    results = json.loads((out / "results.json").read_text())
    assert {r["family"] for r in results} == {"apsd", "scc"}
    assert all(r["validated"] is not None for r in results if r["status"] in ("ok", "failed"))


def test_docs_algorithm_table_is_the_registrys() -> None:
    """docs/graphbench.md's table between its markers is `gossamer graphbench list
    --markdown` of the product (no test-only algorithm): regenerate it when one is added."""
    doc = (TESTS.parent / "docs" / "graphbench.md").read_text()
    begin = "<!-- graphbench list --markdown: begin -->\n"
    table = doc[doc.index(begin) + len(begin) : doc.index("<!-- graphbench list --markdown: end")]
    done = subprocess.run(
        [sys.executable, "-m", "gossamer", "graphbench", "list", "--markdown"],
        capture_output=True, text=True, timeout=60, check=True,
    )  # fmt: skip
    assert table == done.stdout, "paste `gossamer graphbench list --markdown` into the doc"
