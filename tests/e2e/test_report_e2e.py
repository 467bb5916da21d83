"""`gossamer report` against crawls whose truth is known: a two-process pool crawl (the graph
is written in one part per worker) and a crawl SIGKILLed twice and resumed to the end (the
totals are over every run, not the last one's)."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from _crawl_helpers import USER_AGENT, crawl_settings

from gossamer.report.crawl import crawl_report, print_report
from gossamer.runner.run import run_crawl
from gossamer.sinks import read_graph
from gossamer.testweb import TruthRules, WebSpec, audit, read_logs, serve_in_thread


def printed(out: Path, capsys: pytest.CaptureFixture[str]) -> tuple[dict[str, int | None], str]:
    """`gossamer report out` as a user reads it: the numbers of its pages, runs and graph
    lines (None for a line it lacks)."""
    assert print_report(out) == 0
    text = capsys.readouterr().out
    numbers: dict[str, int | None] = {}
    for key, pattern in (
        ("pages", r"^  pages +([\d,]+) "),
        ("runs", r"^  runs +(\d+)$"),
        ("nodes", r"^  link files +([\d,]+) URLs"),
        ("edges", r"^  link files +[\d,]+ URLs, ([\d,]+) links"),
    ):
        match = re.search(pattern, text, re.MULTILINE)
        numbers[key] = int(match.group(1).replace(",", "")) if match else None
    return numbers, text


def graph_lines(out: Path) -> tuple[dict[str, set[int]], int]:
    """The node ids of each graph part file, and the edge lines of all parts (headers out)."""
    nodes: dict[str, set[int]] = {}
    for path in sorted((out / "graph").glob("nodes*.tsv")):
        lines = path.read_text().splitlines()
        assert lines[0] == "id\turl"
        nodes[path.name] = {int(line.split("\t")[0]) for line in lines[1:]}
    edges = sum(
        len(path.read_text().splitlines()) - 1 for path in (out / "graph").glob("edges*.tsv")
    )
    return nodes, edges


def test_report_of_a_pool_crawl_counts_every_part(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = WebSpec(seed=5, hosts=24, pages_mean=10, profile="clean")
    log = tmp_path / "web.log"
    out = tmp_path / "crawl"
    with serve_in_thread(spec, log_path=log) as web:
        web.write_resolve_file(tmp_path / "resolve.txt")
        seed = web.url(0, 0)
        # 4 hosts at a time per worker, 20 ms between a host's requests: one worker alone
        # cannot crawl the 24 hosts before the other has started (with 16 and no delay, w0
        # sometimes did, leaving w1's part empty)
        settings = crawl_settings(tmp_path, out, seed, workers=2, concurrency=4, delay=0.02)
        assert run_crawl(settings) == 0
        web.flush_log()
    rules = TruthRules(seeds=(seed,), scope="all", user_agent=USER_AGENT)
    truth = audit(web.model, read_logs([log]).records, rules)
    assert truth.coverage == 1.0 and truth.overlap == 0.0, truth.format_table()

    per_part, edge_lines = graph_lines(out)
    assert sorted(per_part) == ["nodes-w0.tsv", "nodes-w1.tsv"]  # one part per worker
    graph = read_graph(out)  # every part, deduped
    assert len(graph.nodes) == len(set().union(*per_part.values())) > 0
    # a URL both workers met (a link from each one's hosts) is in both parts: one node
    assert len(per_part["nodes-w0.tsv"] & per_part["nodes-w1.tsv"]) > 0
    assert len(graph.edges) == edge_lines > 0  # no edge recorded twice in a clean run

    numbers, text = printed(out, capsys)
    assert numbers["nodes"] == len(graph.nodes), text
    assert numbers["edges"] == len(graph.edges), text
    assert numbers["pages"] == truth.unique == truth.fetched, text
    assert numbers["runs"] == 1, text
    report = crawl_report(out)
    assert report["graph"]["parts"] == ["w0", "w1"]
    assert report["graph"]["edges_by_kind"] == {
        kind: sum(1 for e in graph.edges if e[2] == kind) for kind in {e[2] for e in graph.edges}
    }
    totals = report["totals"]
    assert totals["requests"] == log_lines(out / "crawl.log.jsonl")
    assert totals["pages"] == report["stats"]["pages"]  # one run: its statistics agree
    assert report["runs"][0]["end_reason"] == "complete"


def crawl_cmd(out: Path, resolve: Path | None = None, seed: str | None = None) -> list[str]:
    base = [sys.executable, "-m", "gossamer", "crawl"]
    if seed is None:
        return [*base, "--resume", str(out), "-q"]
    assert resolve is not None
    # a delay per host keeps the crawl running for a few seconds, long enough to be killed
    return [
        *base, seed, "-o", str(out), "--scope", "all", "--resolve-file", str(resolve),
        "--allow-private", "--delay", "0.05", "--user-agent", USER_AGENT, "--workers", "2",
        "--concurrency", "8", "-q",
    ]  # fmt: skip


def log_lines(path: Path) -> int:
    try:
        with path.open("rb") as f:
            return sum(1 for _ in f)
    except FileNotFoundError:
        return 0


def kill_group_after(cmd: list[str], log: Path, more_lines: int, timeout: float = 120.0) -> int:
    """Start `cmd` in a process group of its own, wait until its crawl log has grown by
    `more_lines`, SIGKILL the whole group (parent and forked workers). The lines logged
    before the kill."""
    before = log_lines(log)
    proc = subprocess.Popen(
        cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
    )
    deadline = time.monotonic() + timeout
    try:
        while log_lines(log) < before + more_lines:
            assert proc.poll() is None, f"the crawl ended before the kill ({proc.returncode})"
            assert time.monotonic() < deadline, "the crawl did not log enough lines"
            time.sleep(0.02)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    return log_lines(log)


def test_report_sums_the_runs_of_a_killed_and_resumed_crawl(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = WebSpec(seed=6, hosts=12, pages_mean=40, profile="clean")
    web_log = tmp_path / "web.log"
    out = tmp_path / "crawl"
    crawl_log = out / "crawl.log.jsonl"
    with serve_in_thread(spec, log_path=web_log) as web:
        resolve = web.write_resolve_file(tmp_path / "resolve.txt")
        seed = web.url(0, 0)
        kill_group_after(crawl_cmd(out, resolve, seed), crawl_log, 60)
        kill_group_after(crawl_cmd(out), crawl_log, 60)
        final = subprocess.run(
            crawl_cmd(out), capture_output=True, text=True, timeout=300, check=False
        )
        assert final.returncode == 0, final.stderr
        web.flush_log()
    rules = TruthRules(seeds=(seed,), scope="all", user_agent=USER_AGENT)
    truth = audit(web.model, read_logs([web_log]).records, rules)
    assert truth.coverage == 1.0, truth.format_table()

    numbers, text = printed(out, capsys)
    # every distinct page the server answered, over the three runs (a page fetched again
    # after a kill counts once)
    assert numbers["pages"] == truth.unique, text
    assert numbers["runs"] == 3, text
    last_run = json.loads((out / "stats.json").read_text())
    assert last_run["pages"] < truth.unique  # what the old report showed: the last run alone
    report = crawl_report(out)
    runs = report["runs"]
    assert [r["ended_by"] for r in runs] == ["killed or crashed (no end recorded)"] * 2 + [
        "complete: frontier exhausted"
    ]
    assert [r["resume"] for r in runs] == [False, True, True]
    assert all(r["log_lines"] >= 60 for r in runs[:2]), runs
    assert sum(r["log_lines"] for r in runs) == report["totals"]["requests"]
    assert report["totals"]["fetches"] >= truth.unique
    assert report["totals"]["duration_estimated"]  # the killed runs' durations are estimates
    assert report["totals"]["duration_s"] > runs[2]["duration_s"] > 0
    graph = read_graph(out)
    assert (report["graph"]["nodes"], report["graph"]["edges"]) == (
        len(graph.nodes),
        len(graph.edges),
    )


def test_report_of_cluster_worker_directories(
    tmp_path: Path, redis_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Each cluster worker's directory (docs/cluster.md: `gossamer report DIR/w3`) is one
    run with its own statistics; the workers' pages add up to the crawl's."""
    from test_cluster import UA, create_crawl, logs, workers

    spec = WebSpec(seed=7, hosts=30, pages_mean=10, profile="clean")
    log = tmp_path / "web.log"
    out = tmp_path / "out"
    with serve_in_thread(spec, log_path=log) as web:
        resolve = web.write_resolve_file(tmp_path / "resolve.txt")
        seed = web.url(0, 0)
        crawl_id = create_crawl(redis_url, seed, resolve)
        with workers(redis_url, crawl_id, out, 2) as procs:
            codes = [p.wait(timeout=120) for p in procs]
        assert codes == [0, 0], logs(out)
        web.flush_log()
    rules = TruthRules(seeds=(seed,), scope="all", user_agent=UA)
    truth = audit(web.model, read_logs([log]).records, rules)
    assert truth.coverage == 1.0 and truth.overlap == 0.0, truth.format_table()
    pages = 0
    wdirs = sorted(p for p in out.iterdir() if (p / "worker.json").is_file())
    assert [p.name for p in wdirs] == ["w1", "w2"]
    for wdir in wdirs:
        numbers, text = printed(wdir, capsys)
        graph = read_graph(wdir)
        assert (numbers["nodes"], numbers["edges"]) == (len(graph.nodes), len(graph.edges)), text
        assert numbers["runs"] == 1, text
        (run,) = crawl_report(wdir)["runs"]
        assert run["cluster_worker"] == wdir.name and run["end_reason"] == "complete", run
        assert numbers["pages"] is not None
        pages += numbers["pages"]
    assert pages == truth.unique
