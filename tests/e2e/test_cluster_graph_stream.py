"""The page events stream of a cluster crawl end to end (cluster/stream.py): a real
redis-server, two `gossamer worker` processes (one SIGKILLed mid-crawl), and a graph consumer
process SIGKILLed mid-crawl and started again; the simulated web on loopback."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import redis
from test_cluster import (
    UA,
    create_crawl,
    gossamer,
    logs,
    settings_file,
    status,
    status_now,
    wait_for,
    workers,
)

from gossamer.cluster._redis import Keys
from gossamer.cluster.stream import GROUP, read_journal
from gossamer.sinks import read_crawl_log, read_graph
from gossamer.sinks.graph import is_node_status
from gossamer.testweb import WebSpec, serve_in_thread
from graph_helpers import graph_stats_json

FOLLOW = Path(__file__).with_name("_follow_counting.py")


def _crawled(dirs: list[Path]) -> set[str]:
    """The graph's nodes: the pages the workers fetched with 2xx/3xx, from their crawl logs."""
    return {
        r["url"]
        for d in dirs
        for r in read_crawl_log(d / "crawl.log.jsonl")
        if r.get("depth") is not None and r["status"] is not None and is_node_status(r["status"])
    }


def _logging(out: Path) -> list[Path]:
    """The worker directories under `out` whose crawl log exists yet (a worker creates its
    directory before its log)."""
    return sorted(d for d in out.glob("w*") if (d / "crawl.log.jsonl").is_file())


def _file_edges(dirs: list[Path], crawled: set[str]) -> set[tuple[str, str]]:
    """The union of the workers' graph files' edges between crawled pages."""
    return {
        (s, d) for out in dirs for s, d, kind in read_graph(out).url_edges()
        if kind != "sitemap" and s in crawled and d in crawled
    }  # fmt: skip


@pytest.mark.slow
def test_the_consumed_graph_survives_a_killed_worker_and_a_killed_consumer(
    tmp_path: Path, redis_url: str
) -> None:
    spec = WebSpec(seed=12, hosts=50, pages_mean=30)
    out = tmp_path / "out"
    state = tmp_path / "state"
    result = tmp_path / "graph.json"
    with serve_in_thread(spec) as web:
        resolve = web.write_resolve_file(tmp_path / "resolve.txt")
        config = settings_file(tmp_path, lease_ttl=3.0)
        crawl_id = create_crawl(
            redis_url, web.url(0, 0), resolve, "--config", str(config), "--delay", "0.03",
            "--per-host", "5", "--heartbeat-ttl", "2",
        )  # fmt: skip

        def consumer() -> subprocess.Popen[bytes]:
            cmd = [sys.executable, str(FOLLOW), redis_url, crawl_id, str(state), str(result)]
            return subprocess.Popen(cmd)

        first = consumer()
        try:
            with workers(redis_url, crawl_id, out, 2) as procs:
                victim = procs[0]

                def by_pid() -> dict[int, dict[str, Any]]:
                    # (read here, not by a `gossamer status` process: the crawl races this)
                    return {w["pid"]: w for w in status_now(redis_url, crawl_id)["workers"]}

                wait_for("the consumer's first events", lambda: len(read_journal(state)) > 30, 60)
                first.kill()  # SIGKILL, mid-crawl
                assert first.wait(timeout=10) == -signal.SIGKILL
                wait_for(
                    "the victim's first pages",
                    lambda: by_pid().get(victim.pid, {}).get("pages", 0) > 30,
                    60,
                )
                victim.kill()  # SIGKILL: its leases expire, the survivor fetches them again
                remaining = status_now(redis_url, crawl_id)["frontier"]["queued"]
                applied_before = len(read_journal(state))
                second = consumer()
                try:
                    codes = [p.wait(timeout=120) for p in procs]
                    assert second.wait(timeout=60) == 0
                finally:
                    if second.poll() is None:
                        second.kill()
                dirs = [Path(w["out"]) for w in status(redis_url, crawl_id)["workers"]]
        finally:
            if first.poll() is None:
                first.kill()
        # the same web crawled by one embedded crawl, typed as a user would
        embedded = tmp_path / "embedded"
        alone = subprocess.run(
            gossamer(
                "crawl", web.url(0, 0), "-o", str(embedded), "--scope", "all", "--resolve-file",
                str(resolve), "--allow-private", "--delay", "0", "--user-agent", UA, "-q",
            ),
            capture_output=True, text=True, timeout=300, check=False,
        )  # fmt: skip
        assert alone.returncode == 0, alone.stderr
    assert codes == [-signal.SIGKILL, 0], logs(out)
    assert remaining >= 50, "the crawl was nearly over at the kill: the test shows little"
    got = json.loads(result.read_text())
    crawled = _crawled(dirs)
    print(
        f"{len(crawled)} pages; consumer killed after {applied_before} events, replayed "
        f"{got['replayed']}, applied {got['applied']} more of {got['events']} read"
    )
    assert got["state"] == "finished" and got["replayed"] == applied_before > 0
    links = {p: set(ds) for p, ds in got["links"].items()}
    assert set(links) == crawled  # node for node: no page lost
    edges = {(s, d) for s, ds in links.items() for d in ds if d in links}
    assert edges == _file_edges(dirs, crawled)  # edge for edge
    assert len(edges) > 1000
    # … and the graph the embedded crawl of the same web makes, node for node, edge for edge
    alone_nodes = _crawled([embedded])
    assert set(links) == alone_nodes
    assert edges == _file_edges([embedded], alone_nodes)
    # no double effect: each page applied once by the final consumer (its journal's replay
    # included), and the journal of both runs holds each page once
    assert set(got["updates"].values()) == {1}
    journal = Counter(e.page_id for e in read_journal(state))
    assert len(journal) == len(crawled) and set(journal.values()) == {1}
    with redis.Redis.from_url(redis_url) as r:
        pending = r.xpending(Keys(crawl_id).events, GROUP)
    assert pending["pending"] == 0  # everything acknowledged


def test_graph_follow_without_a_crawl_is_one_error_line(redis_url: str) -> None:
    done = subprocess.run(
        gossamer("graph", "follow", "--redis", redis_url, "--crawl", "nope"),
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert "no crawl nope" in done.stderr and len(done.stderr.strip().splitlines()) == 1


def test_graph_follow_with_an_unwritable_state_is_one_error_line(
    tmp_path: Path, redis_url: str
) -> None:
    resolve = tmp_path / "resolve.txt"
    resolve.write_text("")
    crawl_id = create_crawl(redis_url, "http://a.example/", resolve)
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    follow = ("graph", "follow", "--redis", redis_url, "--crawl", crawl_id)
    done = subprocess.run(
        gossamer(*follow, "--state", str(blocker)),
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 74, done.stderr
    assert "cannot write the consumer's journal" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


def test_graph_follow_keeps_the_live_statistics_that_status_shows(
    tmp_path: Path, redis_url: str
) -> None:
    """`gossamer graph follow` (the command) beside a 2-worker crawl: its statistics in
    STATE/<crawl>/stats.json and in Redis, shown by `gossamer status`, and at the end the
    crawled pages and the edges between them, as the workers' files hold them."""
    out, state = tmp_path / "out", tmp_path / "state"
    with serve_in_thread(WebSpec(seed=21, hosts=12, pages_mean=12)) as web:
        resolve = web.write_resolve_file(tmp_path / "resolve.txt")
        crawl_id = create_crawl(redis_url, web.url(0, 0), resolve, "--delay", "0")
        follow = subprocess.Popen(
            gossamer("graph", "follow", "--redis", redis_url, "--crawl", crawl_id, "--json",
                     "--state", str(state)),
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        try:
            with workers(redis_url, crawl_id, out, 2) as procs:
                codes = [p.wait(timeout=120) for p in procs]
            stdout, stderr = follow.communicate(timeout=120)
        finally:
            if follow.poll() is None:
                follow.kill()
        data = status(redis_url, crawl_id)
        human = subprocess.run(
            gossamer("status", "--redis", redis_url, "--crawl", crawl_id),
            capture_output=True, text=True, timeout=60, check=False,
        )  # fmt: skip
    assert codes == [0, 0], logs(out)
    assert follow.returncode == 0, stderr
    dirs = [Path(w["out"]) for w in data["workers"]]
    crawled = _crawled(dirs)
    edges = _file_edges(dirs, crawled)
    summary = json.loads(stdout)
    assert (summary["pages"], summary["edges"]) == (len(crawled), len(edges))
    live = json.loads((state / crawl_id / "stats.json").read_text())
    assert live["final"] is True
    assert (live["nodes"], live["edges"]) == (len(crawled), len(edges))
    assert data["graph"] is not None and data["graph"]["nodes"] == len(crawled)
    assert data["graph"]["scc_count"] == live["scc_count"]
    line = next(x for x in human.stdout.splitlines() if x.startswith("graph "))
    assert f"{len(crawled):,} nodes, {len(edges):,} edges" in line
    # `graph stats DIR` on the crawl's -o directory merges its workers' w*/ directories
    files = graph_stats_json(out)
    keys = ("nodes", "edges", "pending", "scc_count", "largest_scc", "dangling", "in_degree")
    assert {k: files[k] for k in keys} == {k: live[k] for k in keys}


def _crawl_redis(redis_url: str, seed: str, resolve: Path, out: Path, *extra: str) -> list[str]:
    return gossamer(
        "crawl", "--redis", redis_url, seed, "--workers", "2", "-o", str(out), "--scope", "all",
        "--resolve-file", str(resolve), "--allow-private", "--user-agent", UA, "--live-graph",
        "-q", *extra,
    )  # fmt: skip


def test_crawl_redis_with_live_graph_runs_the_graph_consumer(
    tmp_path: Path, redis_url: str
) -> None:
    """`gossamer crawl --redis … --workers 2 --live-graph`, typed as a user would: the
    command runs the crawl's graph consumer beside its workers, and its final statistics
    are the crawled pages and the edges between them."""
    out = tmp_path / "out"
    with serve_in_thread(WebSpec(seed=21, hosts=12, pages_mean=12)) as web:
        resolve = web.write_resolve_file(tmp_path / "resolve.txt")
        done = subprocess.run(
            _crawl_redis(redis_url, web.url(0, 0), resolve, out, "--delay", "0"),
            capture_output=True, text=True, timeout=300, check=False,
        )  # fmt: skip
    assert done.returncode == 0, done.stderr
    crawl_id = done.stdout.strip()
    data = status(redis_url, crawl_id)
    dirs = [Path(w["out"]) for w in data["workers"]]
    crawled = _crawled(dirs)
    edges = _file_edges(dirs, crawled)
    live = json.loads((out / "graph" / crawl_id / "stats.json").read_text())
    assert live["final"] is True
    assert (live["nodes"], live["edges"]) == (len(crawled), len(edges)) and len(edges) > 100
    assert data["graph"]["nodes"] == len(crawled)


def test_crawl_redis_with_live_graph_stopped_by_sigint_keeps_every_page(
    tmp_path: Path, redis_url: str
) -> None:
    """^C to `crawl --redis … --live-graph`: the workers stop, then the graph consumer reads
    what they sent and writes its final statistics: every page the workers logged is in."""
    out = tmp_path / "out"
    with serve_in_thread(WebSpec(seed=22, hosts=20, pages_mean=30)) as web:
        resolve = web.write_resolve_file(tmp_path / "resolve.txt")
        crawl = subprocess.Popen(
            _crawl_redis(redis_url, web.url(0, 0), resolve, out, "--delay", "0.05"),
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        try:
            wait_for(
                "40 pages logged",
                lambda: len(_crawled(_logging(out))) >= 40,
                120,
            )
            crawl.send_signal(signal.SIGINT)
            stdout, stderr = crawl.communicate(timeout=300)
        finally:
            if crawl.poll() is None:
                crawl.kill()
                crawl.wait()
    assert crawl.returncode == 130, stderr
    crawl_id = stdout.strip()
    dirs = [Path(w["out"]) for w in status(redis_url, crawl_id)["workers"]]
    crawled = _crawled(dirs)
    live = json.loads((out / "graph" / crawl_id / "stats.json").read_text())
    assert live["final"] is True
    assert live["nodes"] == len(crawled) >= 40
    assert live["edges"] == len(_file_edges(dirs, crawled))


def test_a_graph_consumer_told_to_stop_as_it_starts_writes_its_final_statistics(
    tmp_path: Path, redis_url: str
) -> None:
    """A crawl that ends at once (or a loaded machine) tells its graph consumer to stop
    while that is still starting: the SIGTERM waits for its handler, which reads the stream
    and writes the final statistics, and the consumer exits 0."""
    from gossamer.cluster.connect import connect_redis
    from gossamer.cluster.control import _end_follower, start_graph_follower
    from gossamer.cluster.crawls import load_crawl

    out = tmp_path / "out"
    with serve_in_thread(WebSpec(seed=23, hosts=2, pages_mean=3)) as web:
        resolve = web.write_resolve_file(tmp_path / "resolve.txt")
        crawl_id = create_crawl(redis_url, web.url(0, 0), resolve, "--live-graph")
    client = connect_redis(redis_url)
    record = load_crawl(client, crawl_id)
    for _ in range(3):  # (before the fix, an immediate SIGTERM killed it in most starts)
        follower = start_graph_follower(redis_url, record, out)
        _end_follower(follower, out)
        assert follower.returncode == 0, (out / "graph" / "follow.log").read_text()
        live = json.loads((out / "graph" / crawl_id / "stats.json").read_text())
        assert live["final"] is True
        (out / "graph" / crawl_id / "stats.json").unlink()
