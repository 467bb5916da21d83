"""The dashboard's data: the log tail (its ring, the level of a fetch, GET /api/log,
/events/log with its bounded batches), the crawl's diagnostics file, top hosts from a real
SQLite frontier, bytes/s and GET /api/history, the /metrics additions, and a finished crawl
of two runs shown whole (its time over both runs, its pages by worker, its history from the
crawl log, its graph statistics computed on demand and cached) — through Starlette's test
client over crawl directories as a crawl writes them."""

from __future__ import annotations

import contextlib
import json
import logging
import multiprocessing
import os
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families
from starlette.testclient import TestClient
from test_dashboard import LOCAL, _log_line, make_crawl_dir

from gossamer import logs
from gossamer.crawldir import DIAGNOSTICS
from gossamer.crawldir import GRAPH_ON_DEMAND as ON_DEMAND_FILE
from gossamer.dashboard import EmbeddedSource, make_app
from gossamer.dashboard._history import BINS_MAX, History, RateBins, crawl_history
from gossamer.dashboard._hosts import sqlite_top_hosts
from gossamer.dashboard._logtail import BATCH_MAX, LogRing, fetch_level, fetch_record
from gossamer.frontier import Discovered, FrontierOptions, Outcome, Verdict
from gossamer.frontier.sqlite import SqliteFrontier
from gossamer.report.crawl import crawl_report
from gossamer.sinks import iso_time
from gossamer.urls import fingerprint


def _rec(level: str, worker: str | None = None, message: str = "m") -> dict[str, Any]:
    return {"time": 1.0, "level": level, "worker": worker, "kind": "diagnostic",
            "message": message}  # fmt: skip


# ------------------------------------------------------------------------------ the ring


def test_the_ring_filters_by_level_and_worker_and_keeps_warnings_longer() -> None:
    ring = LogRing(size=5)
    ring.add(_rec("warning", "w1", "old warning"))
    for k in range(10):  # pushes the warning out of the ring of every level
        ring.add(_rec("info", "w0", f"info {k}"))
    ring.add(_rec("error", "w0", "an error"))
    assert [r["message"] for r in ring.last(3)] == ["info 8", "info 9", "an error"]
    assert [r["message"] for r in ring.last(10, "warning")] == ["old warning", "an error"]
    assert [r["message"] for r in ring.last(10, "error")] == ["an error"]
    assert [r["message"] for r in ring.last(10, "warning", "w1")] == ["old warning"]
    assert ring.last(10, "debug", "w9") == []


def test_since_sends_the_newest_and_counts_what_it_left_out() -> None:
    ring = LogRing(size=50)
    cursor = ring.cursor
    for k in range(30):
        ring.add(_rec("info", "w0", f"r{k}"))
    records, skipped, cursor = ring.since(cursor, limit=10)
    assert [r["message"] for r in records] == [f"r{k}" for k in range(20, 30)]
    assert skipped == 20
    assert ring.since(cursor) == ([], 0, cursor)
    for k in range(70):  # more than the ring holds: 20 left it unseen
        ring.add(_rec("info", "w0", f"s{k}"))
    records, skipped, cursor = ring.since(cursor, limit=BATCH_MAX)
    assert len(records) == 50 and records[-1]["message"] == "s69" and skipped == 20
    # a warning stream reads the warning ring: its own count of what it missed
    ring.add(_rec("warning", "w0", "w"))
    records, skipped, _ = ring.since(cursor, "warning")
    assert [r["message"] for r in records] == ["w"] and skipped == 0


def test_fetch_levels() -> None:
    page = {"depth": 1, "status": 200, "outcome": "ok"}
    assert fetch_level(page) == "info"
    assert fetch_level({**page, "outcome": "ok/truncated"}) == "info"
    assert fetch_level({**page, "status": 304, "outcome": "ok/not-modified"}) == "info"
    assert fetch_level({**page, "status": 404, "outcome": "fetch/status/404"}) == "warning"
    assert fetch_level({**page, "status": 503, "outcome": "fetch/status/503"}) == "warning"
    assert fetch_level({**page, "status": None, "outcome": "fetch/error/dns"}) == "warning"
    assert fetch_level({**page, "outcome": "parse/error/decode"}) == "warning"
    robots = {"depth": -1, "status": 404, "outcome": "robots"}
    assert fetch_level(robots) == "info"  # no robots.txt: the normal answer
    assert fetch_level({**robots, "status": None}) == "warning"
    rec = fetch_record({"time": "2026-11-26T05:00:00.000000Z", "url": "http://a.test/x",
                        "status": 404, "depth": 0, "outcome": "fetch/status/404"})  # fmt: skip
    assert rec["level"] == "warning" and rec["kind"] == "fetch" and rec["status"] == 404
    assert rec["message"] == "404 http://a.test/x (fetch/status/404)"
    assert rec["time"] == pytest.approx(1795669200.0) and rec["worker"] is None
    failed = {"url": "http://a.test/y", "status": None, "depth": 0,
              "outcome": "fetch/error/timeout", "error": "fetch/error/timeout"}  # fmt: skip
    assert fetch_record(failed)["message"] == "error http://a.test/y (fetch/error/timeout)"


# ------------------------------------------------------------------- the diagnostics file


def test_a_crawls_diagnostics_go_to_its_file_with_the_worker(tmp_path: Path) -> None:
    log = logging.getLogger("gossamer.test.data")
    with logs.diagnostics_file(tmp_path) as path:
        log.warning("main says", extra={"path": "x"})
        log.warning("a cluster worker says", extra={"worker_id": "w7"})
        ctx = multiprocessing.get_context("fork")
        p = ctx.Process(target=log.warning, args=("a pool worker says",), name="w3")
        p.start()
        p.join(10)
    log.warning("after: not in the file")
    lines = [json.loads(x) for x in path.read_text().splitlines()]
    assert [(x["message"], x["worker"], x["level"]) for x in lines] == [
        ("main says", "main", "warning"),
        ("a cluster worker says", "w7", "warning"),
        ("a pool worker says", "w3", "warning"),
    ]
    assert all(abs(x["time"] - time.time()) < 60 and x["ts"].endswith("Z") for x in lines)
    assert lines[0]["path"] == "x"
    assert DIAGNOSTICS == path.name == "gossamer.log.jsonl"


# ------------------------------------------------------------------------- the endpoints


def _with_diagnostics(out: Path, *recs: dict[str, Any]) -> None:
    with (out / DIAGNOSTICS).open("a") as f:
        f.writelines(json.dumps(r) + "\n" for r in recs)


def test_api_log_answers_the_last_records_filtered(tmp_path: Path) -> None:
    out = make_crawl_dir(tmp_path)  # 2 ok pages, 1 fetch error
    _with_diagnostics(
        out,
        {"time": 5.0, "level": "info", "worker": "w0", "message": "w0 starts"},
        {"time": 6.0, "level": "warning", "worker": "w1", "message": "w1 waits"},
    )
    client = TestClient(make_app(EmbeddedSource(out)), base_url=LOCAL)
    records = client.get("/api/log").json()["records"]
    kinds = sorted((r["kind"], r["level"]) for r in records)
    assert kinds == [("diagnostic", "info"), ("diagnostic", "warning"), ("fetch", "info"),
                     ("fetch", "info"), ("fetch", "warning")]  # fmt: skip
    warnings = client.get("/api/log?level=warning").json()["records"]
    assert sorted(r["message"] for r in warnings) == [
        "error http://a.test/c (fetch/error/x): timeout", "w1 waits"
    ]
    assert [r["message"] for r in client.get("/api/log?worker=w0").json()["records"]] == [
        "w0 starts"
    ]
    assert len(client.get("/api/log?n=2").json()["records"]) == 2
    for bad in ("level=loud", "n=0", "n=1001", "n=x"):
        r = client.get(f"/api/log?{bad}")
        assert r.status_code == 400 and "error" in r.json(), bad
    assert TestClient(client.app, base_url="http://evil.example").get("/api/log").status_code == 403


def _events(lines: Any) -> Any:
    """The data of each `event: log` of an SSE line iterator."""
    event = None
    for line in lines:
        if line.startswith("event: "):
            event = line[7:]
        elif line.startswith("data: ") and event == "log":
            yield json.loads(line[6:])


@contextlib.contextmanager
def _log_stream(out: Path, query: str) -> Iterator[Iterator[list[dict[str, Any]]]]:
    """/events/log?QUERY of a dashboard over `out`, its app's lifespan running (the log
    hub's reads): the data of each event."""
    with (
        TestClient(make_app(EmbeddedSource(out)), base_url=LOCAL) as client,
        client.stream("GET", f"/events/log?{query}") as stream,
    ):
        assert stream.headers["content-type"].startswith("text/event-stream")
        yield _events(stream.iter_lines())


def test_events_log_streams_new_records_in_bounded_batches(tmp_path: Path) -> None:
    out = make_crawl_dir(tmp_path)
    with _log_stream(out, "level=warning&n=5") as events:
        first = next(events)  # n=5: the last warnings first
        assert [r["message"] for r in first] == ["error http://a.test/c (fetch/error/x): timeout"]
        with (out / "crawl.log.jsonl").open("a") as f:
            f.write(_log_line("http://a.test/ok", 200, 10))  # info: not for this stream
            f.write(_log_line("http://a.test/gone", 404, 10, outcome="fetch/status/404"))
        batch = next(events)
        assert [(r["kind"], r["status"], r["url"]) for r in batch] == [
            ("fetch", 404, "http://a.test/gone")
        ]
        burst = 3 * BATCH_MAX
        lines = "".join(
            _log_line(f"http://a.test/e{k}", None, 0, error="timeout") for k in range(burst)
        )
        with (out / "crawl.log.jsonl").open("ab", buffering=0) as raw:
            raw.write(lines.encode())  # one write: read at once, more than a batch holds
        sent, skipped, batches = [], 0, []
        while not sent or sent[-1]["url"] != f"http://a.test/e{burst - 1}":
            batch = next(events)
            batches.append(batch)
            assert len(batch) <= BATCH_MAX + 1
            for r in batch:
                if r["kind"] == "skipped":
                    assert r["level"] == "warning" and r is batch[0]
                    skipped += int(r["message"].removesuffix(" records skipped"))
                else:
                    sent.append(r)
        assert len(sent) + skipped == burst and skipped >= burst - 2 * BATCH_MAX
        assert batches[-1][0]["kind"] == "skipped" and len(batches[-1]) == BATCH_MAX + 1


def test_an_info_stream_of_one_worker(tmp_path: Path) -> None:
    out = make_crawl_dir(tmp_path)
    with _log_stream(out, "worker=w2") as events:
        assert next(events) == []  # the stream's first event (no n=): it is open, caught up
        _with_diagnostics(
            out,
            {"time": 5.0, "level": "info", "worker": "w1", "message": "not this one"},
            {"time": 6.0, "level": "debug", "worker": "w2", "message": "this one"},
        )
        assert [r["message"] for r in next(events)] == ["this one"]


# ------------------------------------------------------------------------- top hosts


def _frontier_with_hosts(path: Path, sizes: dict[str, int]) -> SqliteFrontier:
    f = SqliteFrontier(path)
    items = []
    for host, n in sizes.items():
        for k in range(n):
            url = f"http://{host}/p{k}"
            items.append(Discovered(url=url, host=host, depth=0, fp=fingerprint(url)))
    f.put_discovered(items)
    return f


def test_top_hosts_are_what_the_sqlite_frontier_holds(tmp_path: Path) -> None:
    sizes = {f"h{k}.test": k + 1 for k in range(30)}
    f = _frontier_with_hosts(tmp_path / "frontier.sqlite", sizes)
    try:
        batches = f.lease(30, 3, now=time.time())  # 3 URLs of every host leased
        assert len(batches) == 30
        for batch in batches:  # … and fetched, but h28's, which stays leased
            if batch.host != "h28.test":
                done = [Outcome(u.url, u.fp, Verdict.DONE, status=200) for u in batch.urls]
                f.complete(batch.token, done)
        top = sqlite_top_hosts(tmp_path / "frontier.sqlite")
    finally:
        f.close()
    assert top is not None and len(top) == 20
    by_host = {t["host"]: t for t in top}
    assert [t["host"] for t in top[:3]] == ["h28.test", "h29.test", "h27.test"]
    assert by_host["h29.test"] == {"host": "h29.test", "queued": 27, "fetched": 3,
                                   "errors": 0, "delay_s": 0.0, "state": "ready"}  # fmt: skip
    assert by_host["h28.test"]["queued"] == 29 and by_host["h28.test"]["fetched"] == 0
    assert by_host["h28.test"]["state"] == "leased"
    assert "h0.test" not in by_host  # 20 shown: the smallest left out
    assert sqlite_top_hosts(tmp_path / "none.sqlite") is None
    # the crawl's --delay counts: a host's gap is at least it
    paced = sqlite_top_hosts(
        tmp_path / "frontier.sqlite", options=FrontierOptions.of(default_delay=0.2)
    )
    assert paced is not None and {t["delay_s"] for t in paced} == {0.2}


def test_status_has_top_hosts_bytes_per_s_and_history(tmp_path: Path) -> None:
    out = make_crawl_dir(tmp_path)
    _frontier_with_hosts(out / "frontier.sqlite", {"a.test": 2, "b.test": 1}).close()
    client = TestClient(make_app(EmbeddedSource(out)), base_url=LOCAL)
    status = client.get("/api/status").json()
    assert [h["host"] for h in status["top_hosts"]] == ["a.test", "b.test"]
    assert status["totals"]["bytes_per_s"] == 0.0  # the crawl ended
    history = client.get("/api/history").json()  # an ended crawl's: from its crawl log
    assert set(history) == {"t", "pages", "pages_per_s", "bytes", "bytes_per_s"}
    assert history["pages"][-1] == 2.0 and history["bytes"][-1] == 1500.0


def test_history_keeps_one_sample_every_2_s_for_an_hour() -> None:
    h = History(every=2.0, span=10.0)
    for k in range(40):  # a read every 0.5 s for 20 s
        h.add({"time": 1000 + k * 0.5, "totals": {"pages": k, "pages_per_s": 2.0, "bytes": 9}})
    j = h.as_json()
    assert j["t"] == [1008.0, 1010.0, 1012.0, 1014.0, 1016.0, 1018.0]  # the last 10 s
    assert j["pages"] == [16.0, 20.0, 24.0, 28.0, 32.0, 36.0] and j["bytes_per_s"] == [0.0] * 6
    assert History().as_json() == {"t": [], "pages": [], "pages_per_s": [], "bytes": [],
                                   "bytes_per_s": []}  # fmt: skip


def test_rate_bins_widen_and_the_history_keeps_the_totals_with_a_gap_between_runs() -> None:
    bins = RateBins()
    t0 = 1_800_000_000.0
    # run 1: 3,000 s, a page a second; run 2, an hour later: 100 s, 5 pages a second
    for k in range(3000):
        bins.add(iso_time(t0 + k + 0.5), True, 10)
    for k in range(500):
        bins.add(iso_time(t0 + 6600 + k / 5), True, 10)
    bins.add("not a time", True, 10)  # not counted
    assert len(bins.bins) <= BINS_MAX and bins.width == 2
    assert sum(p for p, _ in bins.bins.values()) == 3500
    runs = [(t0, t0 + 3000), (t0 + 6600, t0 + 6700)]
    h = crawl_history(bins, runs, points=500)
    assert len(h["t"]) <= 500 and h["t"] == sorted(h["t"])
    assert h["pages"][-1] == 3500 and h["bytes"][-1] == 35_000
    gap = h["pages_per_s"].index(None)  # one gap, between the runs (not an hour of zeros)
    assert h["pages_per_s"].count(None) == 1 and t0 + 3000 <= h["t"][gap] < t0 + 6600
    width = h["t"][1] - h["t"][0]
    assert h["pages_per_s"][1] == 1.0 and max(v or 0 for v in h["pages_per_s"]) == 5.0, width
    assert crawl_history(RateBins(), runs)["t"] == []


@pytest.mark.slow
def test_a_finished_crawl_of_two_runs_is_shown_whole(
    tmp_path: Path, two_run_crawl: Callable[..., Path]
) -> None:
    out = two_run_crawl(tmp_path / "crawl")
    report = crawl_report(out)
    totals = report["totals"]
    assert totals["runs"] == 2
    client = TestClient(make_app(EmbeddedSource(out)), base_url=LOCAL)
    s = client.get("/api/status").json()
    assert s["crawl"]["state"] == "ended" and s["crawl"]["runs"] == 2
    # the crawl's time over both runs, as `gossamer report` times it (not the last run's)
    assert abs(s["crawl"]["elapsed_s"] - totals["duration_s"]) <= 0.06, (s["crawl"], totals)
    assert s["crawl"]["elapsed_s"] > report["runs"][-1]["duration_s"] + 0.05
    # the worker table: every worker's pages over both runs, adding up to the crawl's
    log = [json.loads(line) for line in (out / "crawl.log.jsonl").read_text().splitlines()]
    pages = Counter(r["worker"] for r in log if r.get("depth") is not None and r.get("status"))
    requests = Counter(r["worker"] for r in log)
    assert s["totals"]["pages"] == totals["fetches"] == sum(pages.values())
    assert {w["id"]: w["pages"] for w in s["workers"]} == dict(pages)
    assert {w["id"]: w["requests"] for w in s["workers"]} == dict(requests)
    assert {w["state"] for w in s["workers"]} == {"exited"}
    # the history: the whole crawl from its log, both runs
    h = client.get("/api/history").json()
    starts = [run["started"] for run in report["runs"]]
    assert h["pages"][-1] == totals["fetches"] and h["t"] == sorted(h["t"])
    assert starts[0] - 1 <= h["t"][0] <= starts[0] + 1 and h["t"][-1] >= starts[1]
    assert sum(v or 0 for v in h["pages_per_s"]) == totals["fetches"]  # 1 s bins
    # the graph statistics: computed on demand, `gossamer graph stats`'s figures
    expected = json.loads(subprocess.run(
        [sys.executable, "-m", "gossamer", "graph", "stats", str(out), "--json"],
        capture_output=True, check=True, timeout=120,
    ).stdout)  # fmt: skip
    assert s["graph_state"] == "computing" and s["graph"] is None
    deadline = time.monotonic() + 60
    while (s := client.get("/api/status").json())["graph_state"] == "computing":
        assert time.monotonic() < deadline, "the graph statistics took over 60 s"
        time.sleep(0.1)
    assert s["graph_state"] == "computed" and s["graph_error"] is None
    for key in ("nodes", "edges", "scc_count", "largest_scc", "dangling", "diameter"):
        assert s["graph"][key] == expected[key], key
    assert s["graph"]["final"] and s["graph"]["computed"]
    # cached in the crawl's graph/ directory: the next dashboard reads them at once …
    assert (out / "graph" / ON_DEMAND_FILE).is_file()
    again = EmbeddedSource(out)
    assert again.snapshot()["graph_state"] == "computed"
    # … until the crawl's files change (a resumed crawl's): computed again
    edges = sorted((out / "graph").glob("edges*.tsv"))[0]
    os.utime(edges, ns=(time.time_ns(), time.time_ns() + 10**9))
    assert again.snapshot()["graph_state"] == "computing"
    again.close()


def test_metrics_has_the_new_families(tmp_path: Path) -> None:
    out = make_crawl_dir(tmp_path)
    _frontier_with_hosts(out / "frontier.sqlite", {"a.test": 2}).close()
    (out / "graph" / "stats.json").write_text(json.dumps(
        {"nodes": 2, "edges": 1, "diameter_lower_bound": 3,
         "in_degree": {"max": 4, "mean": 1.5, "histogram": []}}
    ))  # fmt: skip
    text = TestClient(make_app(EmbeddedSource(out)), base_url=LOCAL).get("/metrics").text
    names = {s.name for fam in text_string_to_metric_families(text) for s in fam.samples}
    for name in ("gossamer_body_bytes_per_second", "gossamer_frontier_dead_hosts",
                 "gossamer_frontier_retries_total", "gossamer_worker_errors_total",
                 "gossamer_worker_up", "gossamer_worker_heartbeat_age_seconds",
                 "gossamer_graph_diameter_lower_bound", "gossamer_graph_in_degree_max",
                 "gossamer_graph_in_degree_mean", "gossamer_top_host_queued"):  # fmt: skip
        assert name in names, name


# ------------------------------------------------------------------ a cluster crawl's parts


def test_cluster_top_hosts_read_the_hosts_shards(redis_url: str) -> None:
    import redis

    from gossamer.dashboard._hosts import cluster_top_hosts
    from gossamer.frontier.redis import RedisFrontier

    client = redis.Redis.from_url(redis_url)
    f = RedisFrontier(client, "c1")
    try:
        sizes = {"a.test": 5, "b.test": 9, "c.test": 2, "d.test": 7}
        items = [
            Discovered(url=u, host=h, depth=0, fp=fingerprint(u))
            for h, n in sizes.items()
            for u in (f"http://{h}/p{k}" for k in range(n))
        ]
        f.put_discovered(items)
        batches = {b.host: b for b in f.lease(4, 2, now=time.time())}
        assert set(batches) == set(sizes)
        b = batches["a.test"]  # a.test's 2: fetched
        f.complete(b.token, [Outcome(u.url, u.fp, Verdict.DONE, status=200) for u in b.urls])
        top = cluster_top_hosts(client, "c1", ["a.test", "b.test", "c.test", "d.test", "a.test"],
                                now=time.time())  # fmt: skip
    finally:
        f.delete()
        client.close()
    assert top == [
        {"host": "b.test", "queued": 7, "fetched": None, "errors": 0, "delay_s": 0.0,
         "state": "leased"},
        {"host": "d.test", "queued": 5, "fetched": None, "errors": 0, "delay_s": 0.0,
         "state": "leased"},
        {"host": "a.test", "queued": 3, "fetched": None, "errors": 0, "delay_s": 0.0,
         "state": "ready"},
        {"host": "c.test", "queued": 0, "fetched": None, "errors": 0, "delay_s": 0.0,
         "state": "leased"},
    ]  # fmt: skip (fetched: no host budget, so the shards do not count a host's URLs)
    # with a host budget the shards count what each host accepted: fetched is known
    client = redis.Redis.from_url(redis_url)
    f = RedisFrontier(client, "c2", host_budget=100)
    try:
        f.put_discovered(items)
        batches = {b.host: b for b in f.lease(4, 2, now=time.time())}
        b = batches["a.test"]
        f.complete(b.token, [Outcome(u.url, u.fp, Verdict.DONE, status=200) for u in b.urls])
        top = cluster_top_hosts(
            client, "c2", list(sizes), now=time.time(), options=FrontierOptions(host_budget=100)
        )
    finally:
        f.delete()
        client.close()
    assert [(t["host"], t["queued"], t["fetched"]) for t in top] == [
        ("b.test", 7, 0), ("d.test", 5, 0), ("a.test", 3, 2), ("c.test", 0, 0)
    ]


def test_cluster_top_hosts_show_the_crawl_delay_capped(redis_url: str) -> None:
    import redis

    from gossamer.dashboard._hosts import cluster_top_hosts, crawl_options
    from gossamer.frontier.redis import RedisFrontier

    # the crawl's settings as the registry stores them (flat names)
    options = crawl_options({"delay": 0.5, "max_crawl_delay": 30.0, "host_budget": None})
    assert (options.politeness.default_delay, options.host_budget) == (0.5, None)
    client = redis.Redis.from_url(redis_url)
    f = RedisFrontier(client, "c3", default_delay=0.5, max_crawl_delay=30.0)
    try:
        url = "http://slow.test/"
        f.put_discovered([Discovered(url=url, host="slow.test", depth=0, fp=fingerprint(url))])
        f.set_host_delay("slow.test", 3600.0)  # robots.txt's Crawl-delay: 3600
        f.set_host_delay("quick.test", 0.1)  # below the crawl's delay
        top = cluster_top_hosts(client, "c3", ["slow.test", "quick.test"], time.time(),
                                options=options)  # fmt: skip
    finally:
        f.delete()
        client.close()
    assert [(t["host"], t["delay_s"]) for t in top] == [("slow.test", 30.0), ("quick.test", 0.5)]


def test_a_heartbeat_carries_bytes_statuses_and_outcomes(redis_url: str) -> None:
    import redis

    from gossamer.cluster.members import Membership, WorkerStatus

    client = redis.Redis.from_url(redis_url)
    try:
        m = Membership(client, "c1", ttl=5.0)
        st = WorkerStatus(id="w1", machine="m", pid=1, state="crawling", body_bytes=1234,
                          statuses={"200": 5, "404": 1}, outcomes={"ok": 5, "fetch/status/404": 1})
        m.beat(st)  # fmt: skip
        (back,) = m.statuses()
    finally:
        client.close()
    assert (back.body_bytes, back.statuses, back.outcomes) == (1234, st.statuses, st.outcomes)
    old = WorkerStatus.from_json('{"id": "w2", "machine": "m", "pid": 2, "state": "idle"}')
    assert (old.body_bytes, old.statuses, old.outcomes) == (0, {}, {})  # an older worker's


def test_cluster_diagnostics_go_to_a_capped_stream(
    redis_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    import redis

    from gossamer.cluster import logstream

    monkeypatch.setattr(logstream, "LOG_STREAM_MAXLEN", 100)
    client = redis.Redis.from_url(redis_url)
    log = logging.getLogger("gossamer.test.cluster")
    log.setLevel(logging.INFO)
    try:
        with logstream.redis_diagnostics(client, "c1", "w4"):
            for k in range(1000):
                log.info(f"line {k}")
        assert client.xlen("gs:c1:{m}:log") < 300  # MAXLEN ~ 100: whole nodes trimmed
        lines, last = logstream.read_log_stream(client, "c1", "0", 10)
        recs = [json.loads(x) for x in lines]
        assert [r["message"] for r in recs] == [f"line {k}" for k in range(990, 1000)]
        assert {r["worker"] for r in recs} == {"w4"} and recs[0]["level"] == "info"
        assert logstream.read_log_stream(client, "c1", last, 10) == ([], last)
    finally:
        log.setLevel(logging.NOTSET)
        client.close()


def test_cluster_fetch_samples_merge_with_the_diagnostics_in_time_order(redis_url: str) -> None:
    import redis

    from gossamer.cluster import logstream
    from gossamer.cluster.fetchstream import FetchTail
    from gossamer.dashboard._sources import ClusterSource

    client = redis.Redis.from_url(redis_url)
    log = logging.getLogger("gossamer.test.cluster")
    log.setLevel(logging.INFO)
    source = ClusterSource(redis_url, None)
    try:
        with logstream.redis_diagnostics(client, "c1", "w1"):
            log.info("worker w1 joins")
        now = time.time()  # after the diagnostic's time; w1's first fetch before it
        w1 = FetchTail(client, "c1", "w1", rate=4, tick=1.0, start=False, clock=lambda: now + 1)
        w2 = FetchTail(client, "c1", "w2", rate=4, tick=1.0, start=False, clock=lambda: now + 2)
        for k in range(3):
            w1.put((now + k / 10 if k else now - 10, f"http://a.test/{k}", 200, 1, "ok", None))
        w1.put((now + 0.5, "http://a.test/gone", 404, 1, "fetch/status/404", None))
        for k in range(10):
            w2.put((now + 1.2 + k / 100, f"http://b.test/{k}", 200, 0, "ok", None))
        assert w1.send_tick() and w2.send_tick()
        source.follow("c1")
        source.read_log()
        records = source.log_ring.last(100)
        assert [r["kind"] for r in records] == ["fetch", "diagnostic"] + ["fetch"] * 7 \
            + ["skipped"]  # fmt: skip
        assert [r["time"] for r in records] == sorted(r["time"] for r in records)
        fetches = [r for r in records if r["kind"] == "fetch"]
        assert fetches[3] == fetch_record({"time": now + 0.5, "url": "http://a.test/gone",
                                           "status": 404, "depth": 1, "worker": "w1",
                                           "outcome": "fetch/status/404"})  # fmt: skip
        assert fetches[3]["level"] == "warning" and fetches[3]["worker"] == "w1"
        assert [r["worker"] for r in fetches] == ["w1"] * 4 + ["w2"] * 4
        skipped = records[-1]
        assert (skipped["worker"], skipped["level"]) == ("w2", "info")
        assert skipped["message"].startswith("6 fetches not sent (a sample of 4 a second")
        # the worker filter
        mine = source.log_ring.last(100, worker="w2")
        assert {r["worker"] for r in mine} == {"w2"} and len(mine) == 5
        assert [r["url"] for r in source.log_ring.last(100, "warning")] == ["http://a.test/gone"]
        source.read_log()  # nothing new: nothing added twice
        assert source.log_ring.added == len(records)
    finally:
        log.setLevel(logging.NOTSET)
        source.close()
        client.close()
