"""The live graph of an embedded crawl (gossamer.graph.LiveGraph, `--live-graph`): its
statistics in DIR/graph/stats.json, written during the crawl and at its end, equal the ones
`gossamer graph stats DIR` computes from the crawl's files — with one worker, with a pool, and
after a resume (the live graph seeded with the earlier run's pages)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from _crawl_helpers import crawl_settings

from gossamer.graph import LiveGraph
from gossamer.report.crawl import wait_live_graph
from gossamer.runner.run import run_crawl
from gossamer.sinks.graph import node_id
from gossamer.testweb import WebSpec, serve_in_thread
from graph_helpers import graph_stats_json

# the figures the live graph and `graph stats DIR` must agree on
_KEYS = (
    "nodes",
    "edges",
    "pending",
    "scc_count",
    "largest_scc",
    "wcc_count",
    "largest_wcc",
    "dangling",
    "in_degree",
    "out_degree",
    "pagerank",
    "top_pages",  # with the pages' URLs
    "top_pages_by_in_degree",
)
_SPEC = WebSpec(
    seed=11,
    hosts=12,
    pages_mean=14,
    overrides=(("redirect_link", 0.1), ("dead_link", 0.1), ("nonhtml_link", 0.05)),
)


def _live(out: Path) -> dict[str, Any]:
    """The live graph's statistics, once its final ones are written (the crawl does not wait
    for them: a fork of the live graph's child computes them after the crawl's exit)."""
    assert wait_live_graph(out, 120), "the final statistics were not written within 120 s"
    stats: dict[str, Any] = json.loads((out / "graph" / "stats.json").read_text())
    return stats


@pytest.mark.parametrize("workers", [1, 2])
def test_the_live_graph_at_the_end_equals_graph_stats_of_the_crawl(
    tmp_path: Path, workers: int
) -> None:
    out = tmp_path / "crawl"
    with serve_in_thread(_SPEC) as web:
        web.write_resolve_file(tmp_path / "resolve.txt")
        settings = crawl_settings(tmp_path, out, web.url(0, 0), workers=workers, live_graph=True)
        assert run_crawl(settings) == 0
    live, files = _live(out), graph_stats_json(out)
    assert live["final"] is True
    assert live["nodes"] > 50 and live["edges"] > live["nodes"]
    assert live["dangling"] > 0  # the non-HTML pages: nodes without out-edges
    assert {k: live[k] for k in _KEYS} == {k: files[k] for k in _KEYS}
    report = subprocess.run(
        [sys.executable, "-m", "gossamer", "report", str(out)],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert report.returncode == 0, report.stderr
    line = next(x for x in report.stdout.splitlines() if x.strip().startswith("web graph"))
    assert f"{live['nodes']:,} nodes, {live['edges']:,} edges" in line and "(final)" in line


def test_a_resumed_crawls_live_graph_holds_every_run(tmp_path: Path) -> None:
    out = tmp_path / "crawl"
    with serve_in_thread(_SPEC) as web:
        web.write_resolve_file(tmp_path / "resolve.txt")
        settings = crawl_settings(tmp_path, out, web.url(0, 0), max_pages=40, live_graph=True)
        assert run_crawl(settings) == 0
        first = _live(out)
        assert 0 < first["nodes"] <= 40
        more = crawl_settings(tmp_path, out, web.url(0, 0), max_pages=100_000)
        assert run_crawl(more, resume=True) == 0
    live, files = _live(out), graph_stats_json(out)
    assert live["nodes"] > first["nodes"]
    assert {k: live[k] for k in _KEYS} == {k: files[k] for k in _KEYS}


def test_with_the_live_graph_off_no_statistics_are_written(tmp_path: Path) -> None:
    out = tmp_path / "crawl"
    with serve_in_thread(WebSpec(seed=3, hosts=3, pages_mean=5)) as web:
        web.write_resolve_file(tmp_path / "resolve.txt")
        settings = crawl_settings(tmp_path, out, web.url(0, 0), live_graph=False)
        assert run_crawl(settings) == 0
    assert any((out / "graph").glob("edges*.tsv"))  # the graph files are written
    assert not (out / "graph" / "stats.json").exists()


def test_the_statistics_are_rewritten_while_pages_arrive(tmp_path: Path) -> None:
    """The writer thread refreshes stats.json as the graph grows, not only at the end."""
    path = tmp_path / "graph" / "stats.json"
    with LiveGraph(path, interval=0.05) as live:
        for batch in range(3):
            for i in range(batch * 10, batch * 10 + 10):
                live.update(f"http://a.test/{i}", [f"http://a.test/{i + 1}"])
            want = batch * 10 + 10
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:  # a state, not a time: the file's node count
                try:
                    seen = json.loads(path.read_text())
                except (OSError, ValueError):
                    seen = {}
                if seen.get("nodes") == want:
                    break
                time.sleep(0.01)
            assert seen.get("nodes") == want and seen["final"] is False
            assert seen["pending"] == 1  # the link to the page after the last one
    final = json.loads(path.read_text())
    assert final["final"] is True and final["nodes"] == 30 and final["edges"] == 29
    # a chain's last page ranks first; the pages are named by the URLs fed
    assert [p["url"] for p in final["top_pages"][:2]] == ["http://a.test/29", "http://a.test/28"]
    assert final["top_pages"][0]["in_degree"] == 1
    assert live.writes >= 4


def test_seeding_from_a_crawl_directory_applies_its_pages(tmp_path: Path) -> None:
    out = tmp_path / "crawl"
    with serve_in_thread(WebSpec(seed=4, hosts=4, pages_mean=8)) as web:
        web.write_resolve_file(tmp_path / "resolve.txt")
        assert run_crawl(crawl_settings(tmp_path, out, web.url(0, 0), live_graph=False)) == 0
    live = LiveGraph(tmp_path / "stats.json")
    pages = live.seed_from(out)
    files = graph_stats_json(out)
    assert pages == files["nodes"] == live.graph.nodes
    assert live.graph.edges == files["edges"]
    assert node_id(_first_url(out)) in set(live.graph.node_ids().tolist())
    # the pages of the earlier run are named: the same top pages as `graph stats DIR`
    stats = live.write(final=True)
    assert stats is not None
    for key in ("top_pages", "top_pages_by_in_degree"):
        ours = [(p["url"], p["in_degree"]) for p in stats[key]]
        theirs = [(p["url"], p["in_degree"]) for p in files[key]]
        assert [p["pagerank"] for p in stats[key]] == pytest.approx(
            [p["pagerank"] for p in files[key]], abs=1e-9
        )
        if key == "top_pages_by_in_degree":
            assert sorted(d for _, d in ours) == sorted(d for _, d in theirs)
        assert all(url and url.startswith("http://") for url, _ in ours)


def _first_url(out: Path) -> str:
    for line in (out / "crawl.log.jsonl").read_text().splitlines():
        record = json.loads(line)
        if record.get("depth") == 0 and 200 <= record.get("status", 0) < 400:
            url: str = record["url"]
            return url
    raise AssertionError("no seed fetched")


_NO_NUMPY_CRAWL = """
import sys
from pathlib import Path
sys.path.insert(0, {helpers!r})
from _crawl_helpers import crawl_settings
from gossamer.report.crawl import wait_live_graph
from gossamer.runner.run import run_crawl
from gossamer.testweb import WebSpec, serve_in_thread
tmp = Path({tmp!r})
with serve_in_thread(WebSpec(seed=5, hosts=4, pages_mean=8)) as web:
    web.write_resolve_file(tmp / "resolve.txt")
    settings = crawl_settings(tmp, tmp / "crawl", web.url(0, 0), workers=2, live_graph=True)
    code = run_crawl(settings)
print(code, "numpy" in sys.modules, "scipy" in sys.modules)
"""


def test_the_crawls_own_process_imports_no_numpy(tmp_path: Path) -> None:
    """The statistics are a child's work: the crawl (here a pool's parent, which forks its
    workers) never imports numpy or scipy, yet its live statistics are written."""
    script = _NO_NUMPY_CRAWL.format(helpers=str(Path(__file__).parent), tmp=str(tmp_path))
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["0", "False", "False"], done.stderr
    live = _live(tmp_path / "crawl")
    assert live["final"] is True and live["nodes"] > 10


def _crawl_cmd(out: Path, resolve: Path, seed: str) -> list[str]:
    return [
        sys.executable, "-m", "gossamer", "crawl", seed, "-o", str(out), "--scope", "all",
        "--resolve-file", str(resolve), "--allow-private", "--delay", "0", "--concurrency", "8",
        "--workers", "2", "--live-graph", "-q",
    ]  # fmt: skip


def _wait_for_lines(proc: subprocess.Popen[bytes], path: Path, lines: int) -> None:
    """Until `path` holds `lines` lines (a state, not a time), within 60 s."""
    deadline = time.monotonic() + 60
    while proc.poll() is None and time.monotonic() < deadline:
        if path.exists() and path.read_bytes().count(b"\n") >= lines:
            return
        time.sleep(0.02)
    raise AssertionError(f"{path} never held {lines} lines while the crawl ran")


def _followers_of(out: Path) -> list[int]:
    """The live-graph children following `out` (their command line names it)."""
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                argv = (entry / "cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if b"gossamer.runner.livegraph" in argv and str(out).encode() in argv:
                pids.append(int(entry.name))
    return pids


_BIG = WebSpec(seed=9, hosts=100, pages_mean=150, profile="clean")  # outlasts the waits


def test_a_crawl_stopped_by_a_terminals_sigint_writes_its_final_statistics(
    tmp_path: Path,
) -> None:
    """^C reaches the crawl's whole process group; the follower has its own session, so it
    outlives the crawl's stop and writes the final statistics of what was crawled."""
    out = tmp_path / "crawl"
    with serve_in_thread(_BIG) as web:
        resolve = web.write_resolve_file(tmp_path / "resolve.txt")
        proc = subprocess.Popen(
            _crawl_cmd(out, resolve, web.url(0, 0)), start_new_session=True,
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        try:
            _wait_for_lines(proc, out / "crawl.log.jsonl", 300)
            os.killpg(proc.pid, signal.SIGINT)
            assert proc.wait(timeout=120) == 130
        finally:
            proc.kill()
            proc.wait()
    live, files = _live(out), graph_stats_json(out)
    assert live["final"] is True and live["nodes"] >= 100
    assert {k: live[k] for k in _KEYS} == {k: files[k] for k in _KEYS}
    assert not _followers_of(out)


def test_the_follower_exits_when_its_crawl_is_killed(tmp_path: Path) -> None:
    out = tmp_path / "crawl"
    with serve_in_thread(_BIG) as web:
        resolve = web.write_resolve_file(tmp_path / "resolve.txt")
        proc = subprocess.Popen(
            _crawl_cmd(out, resolve, web.url(0, 0)), start_new_session=True,
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        try:
            _wait_for_lines(proc, out / "crawl.log.jsonl", 300)
            assert _followers_of(out)
        finally:
            os.killpg(proc.pid, signal.SIGKILL)  # the crawl and its workers, not the follower
            proc.wait()
    deadline = time.monotonic() + 60
    while _followers_of(out) and time.monotonic() < deadline:  # its stdin closed: it exits
        time.sleep(0.05)
    assert not _followers_of(out)
    stats = out / "graph" / "stats.json"
    assert not stats.exists() or json.loads(stats.read_text())["final"] is False
