"""The live graph's follower (gossamer/graph/_follow.py): the crawl's files read incrementally
(torn lines left for the next read, new parts picked up) give the figures `graph stats DIR`
computes from them, and its child process refreshes stats.json, writes the final one on `end`
and none on end of file."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import IO, Any

from gossamer.graph import graph_statistics, load_crawl_dir
from gossamer.graph._follow import END, CrawlFollower
from gossamer.report.crawl import live_graph_finishing, live_graph_locked, wait_live_graph
from gossamer.sinks.graph import node_id

_KEYS = ("nodes", "edges", "pending", "scc_count", "largest_scc", "dangling", "self_loops")


def _log_line(url: str, status: int = 200, depth: int | None = 1) -> bytes:
    return json.dumps({"url": url, "status": status, "depth": depth}).encode() + b"\n"


def _edge_line(src: str, dst: str, kind: str = "link") -> bytes:
    return f"{node_id(src)}\t{node_id(dst)}\t{kind}\n".encode()


def _append(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "ab") as f:
        f.write(data)


def _files_figures(crawl: Path) -> dict[str, Any]:
    loaded = load_crawl_dir(crawl)
    stats = graph_statistics(loaded.adj, pending=loaded.pending)
    return {k: stats.get(k) for k in _KEYS}


def _url(i: int) -> str:
    return f"http://a.test/{i}"


def _wait_unlocked(crawl: Path, timeout: float = 60) -> None:
    """Until no live graph process holds crawl/graph/follow.lock (a state, not a time)."""
    deadline = time.monotonic() + timeout
    while live_graph_locked(crawl):
        assert time.monotonic() < deadline, "graph/follow.lock still held"
        time.sleep(0.02)


def test_reading_in_steps_gives_the_figures_of_the_whole_files(tmp_path: Path) -> None:
    crawl = tmp_path / "crawl"
    log, part1, part2 = (
        crawl / "crawl.log.jsonl", crawl / "graph" / "edges.tsv", crawl / "graph" / "edges.w2.tsv"
    )  # fmt: skip
    _append(log, _log_line(_url(0), depth=0) + _log_line("http://a.test/robots.txt", depth=None))
    header = b"src\tdst\tkind\n"
    _append(part1, header + _edge_line(_url(0), _url(1)) + _edge_line(_url(0), _url(2)))
    follower = CrawlFollower(crawl)
    assert follower.read() is True
    assert follower.nodes == {node_id(_url(0))}  # robots.txt is not a page
    assert follower.statistics()["pending"] == 2
    assert follower.read() is False  # nothing new

    # a line being written: read at the next call, once whole
    line, edge = _log_line(_url(1)), _edge_line(_url(1), _url(0))
    _append(log, line[:10])
    _append(part1, edge[:7])
    follower.read()
    assert follower.nodes == {node_id(_url(0))} and follower.arcs == 2
    _append(log, line[10:] + _log_line(_url(2), status=404) + _log_line(_url(3), status=301))
    _append(part1, edge[7:] + _edge_line(_url(1), _url(1)))  # a self-loop: dropped
    # a new part (another worker's), with its header
    _append(part2, header + _edge_line(_url(3), _url(1), "redirect"))
    assert follower.read() is True
    assert follower.nodes == {node_id(_url(i)) for i in (0, 1, 3)}
    mine = follower.statistics()
    assert {k: mine.get(k) for k in _KEYS} == _files_figures(crawl)
    assert mine["nodes"] == 3 and mine["edges"] == 3 and mine["pending"] == 1  # 0 → 2 (404)
    assert mine["memory_bytes"] > 0


def test_the_final_read_takes_a_last_log_line_without_its_newline(tmp_path: Path) -> None:
    crawl = tmp_path / "crawl"
    _append(crawl / "crawl.log.jsonl", _log_line(_url(0)) + _log_line(_url(1)).rstrip(b"\n"))
    follower = CrawlFollower(crawl)
    follower.read()
    assert len(follower.nodes) == 1
    follower.read(final=True)
    assert len(follower.nodes) == 2 == _files_figures(crawl)["nodes"]


def _wait_for(path: Path, want: dict[str, Any]) -> dict[str, Any]:
    """stats.json once it holds `want` (a state, not a time), within 60 s."""
    deadline = time.monotonic() + 60
    seen: dict[str, Any] = {}
    while time.monotonic() < deadline:
        try:
            seen = json.loads(path.read_text())
        except (OSError, ValueError):
            seen = {}
        if all(seen.get(k) == v for k, v in want.items()):
            return seen
        time.sleep(0.02)
    raise AssertionError(f"{path}: {seen} never held {want}")


#: refreshes as often as the interval says, busy machine or not (runner/livegraph.py's budget)
_NO_BUDGET = {**os.environ, "GOSSAMER_LIVE_GRAPH_CPU": "1000"}


def _child(crawl: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "gossamer.runner.livegraph", str(crawl), "--interval", "0.05"],
        stdin=subprocess.PIPE,
        env=_NO_BUDGET,
    )


def _say(stdin: IO[bytes] | None, data: bytes) -> None:
    assert stdin is not None
    stdin.write(data)
    stdin.close()


def test_the_child_refreshes_the_statistics_and_writes_the_final_ones_on_end(
    tmp_path: Path,
) -> None:
    crawl = tmp_path / "crawl"
    stats = crawl / "graph" / "stats.json"
    log, part = crawl / "crawl.log.jsonl", crawl / "graph" / "edges.tsv"
    _append(part, b"src\tdst\tkind\n")
    child = _child(crawl)
    try:
        for batch in range(3):
            for i in range(batch * 10, batch * 10 + 10):
                _append(part, _edge_line(_url(i), _url(i + 1)))
                _append(log, _log_line(_url(i)))
            seen = _wait_for(stats, {"nodes": batch * 10 + 10})
            assert seen["final"] is False and seen["pending"] == 1
        _say(child.stdin, END)
        assert child.wait(timeout=60) == 0  # (its reason, if not: on the captured stderr)
    finally:
        child.kill()
        child.wait()
        if child.stdin is not None:
            child.stdin.close()
    _wait_unlocked(crawl)  # the final statistics: written by the child's fork
    final = json.loads(stats.read_text())
    assert final["final"] is True and final["nodes"] == 30 and final["edges"] == 29
    assert {k: final.get(k) for k in _KEYS} == _files_figures(crawl)


def test_the_child_exits_without_a_final_write_when_its_crawl_is_gone(tmp_path: Path) -> None:
    crawl = tmp_path / "crawl"
    _append(crawl / "crawl.log.jsonl", _log_line(_url(0)))
    child = _child(crawl)
    try:
        seen = _wait_for(crawl / "graph" / "stats.json", {"nodes": 1})
        _say(child.stdin, b"")  # end of file, no `end`: the crawl was killed
        assert child.wait(timeout=60) == 1
    finally:
        child.kill()
        child.wait()
        if child.stdin is not None:
            child.stdin.close()
    assert json.loads((crawl / "graph" / "stats.json").read_text()) == seen
    assert seen["final"] is False


_GATED_CHILD = """
import sys, time
from pathlib import Path
import gossamer.graph._follow as follow
gate = Path({gate!r})
real = follow.write_once
def gated(follower, path, *, final, full=True):
    while final and not gate.exists():  # the final write waits for the test's word
        time.sleep(0.01)
    return real(follower, path, final=final, full=full)
follow.write_once = gated
from gossamer.runner import livegraph
sys.exit(livegraph.main([{crawl!r}, "--interval", "0.05"]))
"""


def test_the_crawl_does_not_wait_for_the_final_statistics(tmp_path: Path) -> None:
    """On `end` the child exits at once; a fork of it writes the final statistics, holding
    graph/follow.lock until they are written: `gossamer report` (wait_live_graph) waits on
    that once the crawl's run has ended."""
    crawl, gate = tmp_path / "crawl", tmp_path / "gate"
    _append(crawl / "crawl.log.jsonl", _log_line(_url(0)))
    _append(crawl / "runs.jsonl", b'{"event": "start", "run": 1, "time": 1.0}\n')
    script = _GATED_CHILD.format(gate=str(gate), crawl=str(crawl))
    child = subprocess.Popen(
        [sys.executable, "-c", script], stdin=subprocess.PIPE, start_new_session=True,
        env=_NO_BUDGET,
    )  # fmt: skip
    try:
        _wait_for(crawl / "graph" / "stats.json", {"nodes": 1})
        assert live_graph_locked(crawl) and not live_graph_finishing(crawl)  # still running
        _append(crawl / "crawl.log.jsonl", _log_line(_url(1)))
        _say(child.stdin, END)
        assert child.wait(timeout=60) == 0  # gone while its final write waits at the gate
        _append(crawl / "runs.jsonl", b'{"event": "end", "run": 1, "time": 2.0}\n')
        assert live_graph_finishing(crawl)
        assert not wait_live_graph(crawl, 0.2)  # held: the final statistics are not written
        assert json.loads((crawl / "graph" / "stats.json").read_text())["final"] is False
        gate.touch()
        assert wait_live_graph(crawl, 60)
    finally:
        child.kill()
        child.wait()
        if child.stdin is not None:
            child.stdin.close()
        gate.touch()
    final = json.loads((crawl / "graph" / "stats.json").read_text())
    assert final["final"] is True and final["nodes"] == 2
