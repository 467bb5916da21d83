"""The dashboard's data against real crawls: a real `gossamer dashboard` process watching an
embedded crawl of a simulated web with dead links (its 404s reach the log stream as
warnings; the level filter; top hosts equal the frontier's queue; the tail of a crawl
killed with SIGKILL still answers) and a cluster crawl of two workers on a real
redis-server (their diagnostics and a sample of their fetches reach the log stream through
Redis, filtered by worker and level, the sample bounded and every fetch not sent counted;
bytes, statuses and outcomes summed from their heartbeats equal their crawl logs; top hosts;
/api/history; /metrics scraped)."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2
import redis
from prometheus_client.parser import text_string_to_metric_families
from test_dashboard_e2e import _CRAWL_FLAGS, dashboard, events, gossamer, stop_as_the_page_does

from gossamer.cluster.fetchstream import read_fetch_stream
from gossamer.dashboard._logtail import fetch_level
from gossamer.testweb import WebSpec, serve_in_thread

#: a web with many dead links (404 and 410): warnings in the crawl log from the first pages
_DEAD_LINKS = WebSpec(seed=9, hosts=100, pages_mean=150, profile="clean",
                      overrides=(("dead_link", 0.2),))  # fmt: skip


def log_events(base: str, query: str, timeout: float = 30) -> Iterator[list[dict[str, Any]]]:
    """The batches of /events/log?QUERY, as EventSource reads them, until `timeout` s."""
    deadline = time.monotonic() + timeout
    with (
        httpx2.Client(timeout=httpx2.Timeout(10.0)) as client,
        client.stream("GET", f"{base}/events/log?{query}") as r,
    ):
        assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream")
        event = None
        for line in r.iter_lines():
            if time.monotonic() > deadline:
                raise AssertionError(f"/events/log?{query}: nothing expected within {timeout} s")
            if line.startswith("event: "):
                event = line[7:]
            elif line.startswith("data: ") and event == "log":
                yield json.loads(line[6:])


def first_record(base: str, query: str, want: Any, timeout: float = 30) -> dict[str, Any]:
    """The first record of /events/log?QUERY for which `want(record)` holds; every record
    seen on the way must match the query's level."""
    least = {"warning": 2, "error": 3}.get(query.partition("level=")[2].split("&")[0], 0)
    rank = {"debug": 0, "info": 1, "warning": 2, "error": 3}
    for batch in log_events(base, query, timeout):
        for rec in batch:
            assert rank[rec["level"]] >= least, rec
            if want(rec):
                return rec
    raise AssertionError("the stream ended")


def get(base: str, path: str) -> Any:
    r = httpx2.get(f"{base}{path}", timeout=10)
    assert r.status_code == 200, r.text
    return r.json()


def crawl_log(path: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in path.read_text().splitlines() if x.endswith("}")]


def test_embedded_log_tail_top_hosts_and_a_killed_crawl(tmp_path: Path) -> None:
    out = tmp_path / "crawl"
    with serve_in_thread(_DEAD_LINKS) as web:
        resolve = web.write_resolve_file(tmp_path / "resolve.txt")
        crawl = subprocess.Popen(
            gossamer("crawl", web.url(0, 0), "-o", str(out), "--resolve-file", str(resolve),
                     *_CRAWL_FLAGS, "--workers", "2", "-q"),
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        try:
            deadline = time.monotonic() + 30
            while not (out / "crawl.json").is_file() and crawl.poll() is None:
                assert time.monotonic() < deadline, "the crawl did not start"
                time.sleep(0.05)
            with dashboard(str(out)) as base:
                # a 404 the crawl really met reaches the warning stream
                gone = first_record(
                    base, "level=warning", lambda r: r["kind"] == "fetch" and r["status"] == 404
                )
                assert gone["outcome"] == "fetch/status/404" and gone["level"] == "warning"
                logged = {(r["url"], r["status"]) for r in crawl_log(out / "crawl.log.jsonl")}
                assert (gone["url"], 404) in logged
                # the info stream has the ok pages too
                ok = first_record(base, "level=info", lambda r: r.get("outcome") == "ok")
                assert ok["level"] == "info" and ok["status"] == 200
                warnings = get(base, "/api/log?level=warning&n=1000")["records"]
                assert warnings and all(r["level"] in ("warning", "error") for r in warnings)
                last = get(base, "/api/log?n=50")["records"]
                assert len(last) == 50  # (in the crawl log's order: a fetch's time is its start)
                # a pool's fetch records name their worker (the crawl log's `worker`): w0's
                w0 = get(base, "/api/log?worker=w0")["records"]
                assert w0 and {r["worker"] for r in w0} == {"w0"}
                assert any(r["kind"] == "fetch" for r in w0)
                with events(base) as stream:
                    _, status = stream.until("bytes/s", lambda s: s["totals"]["bytes_per_s"] > 0)
                assert status["crawl"]["state"] == "running"
                assert status["top_hosts"] and len(status["top_hosts"]) <= 20
            crawl.send_signal(signal.SIGKILL)  # no end recorded, the frontier as it was
            crawl.wait(timeout=30)
        finally:
            if crawl.poll() is None:
                crawl.kill()
            crawl.wait()
    # the frontier's own queue, counted apart from the `pending` column top hosts read
    with sqlite3.connect(f"file:{out / 'frontier.sqlite'}?mode=ro", uri=True) as db:
        counts = dict(
            db.execute(
                "SELECT h.name, COUNT(q.id) FROM hosts h LEFT JOIN queue q ON q.host_id = h.id"
                " GROUP BY h.id"
            ).fetchall()
        )
    with dashboard(str(out)) as base:  # a new dashboard on the killed crawl
        status = get(base, "/api/status")
        assert status["crawl"]["state"] == "killed"
        top = status["top_hosts"]
        assert [(t["host"], t["queued"]) for t in top] == [(t["host"], counts[t["host"]])
                                                           for t in top]  # fmt: skip
        assert [t["queued"] for t in top] == sorted(counts.values(), reverse=True)[: len(top)]
        assert all(t["state"] in ("ready", "waiting", "done", "dead", "leased") for t in top)
        warnings = get(base, "/api/log?level=warning&n=1000")["records"]
        # the first read of the killed crawl's log: its last 1,000 warnings, in its order
        logged = [r["url"] for r in crawl_log(out / "crawl.log.jsonl") if fetch_level(r) != "info"]
        assert len(logged) > 100 and [r["url"] for r in warnings] == logged[-1000:]
        assert {r["status"] for r in warnings} >= {404, 410}


def test_cluster_log_tail_totals_top_hosts_and_metrics(tmp_path: Path, redis_url: str) -> None:
    out = tmp_path / "out"
    out.mkdir()
    with serve_in_thread(_DEAD_LINKS) as web:
        resolve = web.write_resolve_file(tmp_path / "resolve.txt")
        done = subprocess.run(
            gossamer("crawl", "--redis", redis_url, web.url(0, 0), "--workers", "0",
                     "--resolve-file", str(resolve), *_CRAWL_FLAGS),
            capture_output=True, text=True, timeout=60, check=False,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        crawl_id = done.stdout.strip()
        env = {**os.environ, "GOSSAMER_REDIS": redis_url}
        worker = gossamer("worker", "--crawl", crawl_id, "-o", str(out), "-q")
        quiet = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL}
        with dashboard("--redis", redis_url, "--crawl", crawl_id) as base:
            # their joining comes through Redis (read from the log stream's start)
            procs = [subprocess.Popen(worker, env=env, **quiet) for _ in range(2)]
            stream = log_events(base, "level=info&worker=w2&n=10")
            try:
                joined = next(r for batch in stream for r in batch)
                assert joined["worker"] == "w2" and joined["kind"] == "diagnostic"
                assert joined["message"].startswith("worker w2 (")
                assert "joins crawl" in joined["message"]
                stream.close()
                warned = get(base, "/api/log?level=warning&worker=w1")["records"]
                # (its 404s may be there, and the count of its fetches not sent)
                assert [r for r in warned if r["kind"] not in ("fetch", "skipped")] == []
                assert {(r["worker"], r["level"]) for r in warned} <= {("w1", "warning")}
                # (its fetches, and the count of those not sent, may be there already)
                w1 = [r for r in get(base, "/api/log?worker=w1")["records"]
                      if r["kind"] == "diagnostic"]  # fmt: skip
                assert [r["worker"] for r in w1] == ["w1"] and "joins crawl" in w1[0]["message"]
                with events(base) as status_stream:
                    _, s = status_stream.until(
                        "both workers' bytes and 404s",
                        lambda s: s["totals"]["bytes"] > 0
                        and "404" in (s["totals"]["statuses"] or {})
                        and len([w for w in s["workers"] if w["pages"] > 0]) == 2,
                    )
                    assert s["totals"]["outcomes"]["ok"] > 0
                    # a sample of each worker's fetches, through the crawl's fetch stream
                    for w in ("w1", "w2"):
                        rec = first_record(base, f"worker={w}&n=1000",
                                           lambda r: r["kind"] == "fetch")  # fmt: skip
                        assert rec["worker"] == w and rec["url"] in rec["message"]
                    tail = get(base, "/api/log?n=1000")["records"]
                    assert {r["worker"] for r in tail if r["kind"] == "fetch"} == {"w1", "w2"}
                    mine = get(base, "/api/log?worker=w2&n=1000")["records"]
                    assert {r["worker"] for r in mine} == {"w2"}
                    assert {"fetch", "diagnostic"} <= {r["kind"] for r in mine}
                    assert s["totals"]["outcomes"].get("fetch/status/404", 0) > 0
                    crawling = {h for w in s["workers"] for h in w["hosts"]}
                    assert s["top_hosts"] and {t["host"] for t in s["top_hosts"]} <= crawling
                    metrics = httpx2.get(f"{base}/metrics", timeout=10).text
                    names = {x.name for f in text_string_to_metric_families(metrics)
                             for x in f.samples}  # fmt: skip
                    assert {"gossamer_responses_total", "gossamer_outcomes_total",
                            "gossamer_body_bytes_total"} <= names  # fmt: skip
                    _, s = status_stream.until("bytes/s", lambda s: s["totals"]["bytes_per_s"] > 0)
                    # the charts' history has two samples of the running crawl (the hub keeps
                    # one a second: on a loaded machine, wait for the second)
                    deadline = time.monotonic() + 60
                    while len(get(base, "/api/history")["t"]) < 2:
                        assert time.monotonic() < deadline, get(base, "/api/history")
                        time.sleep(0.2)
                    assert stop_as_the_page_does(base).status_code == 200
                    assert [p.wait(timeout=60) for p in procs] == [0, 0]
                    _, end = status_stream.until(
                        "stopped", lambda s: s["crawl"]["state"] == "stopped"
                    )
            finally:
                for p in procs:
                    if p.poll() is None:
                        p.kill()
                    p.wait()
            # the ended crawl's totals are its workers' crawl logs'
            logs = [rec for w in ("w1", "w2") for rec in crawl_log(out / w / "crawl.log.jsonl")]
            statuses = Counter(str(r["status"]) for r in logs if r["status"] is not None)
            assert end["totals"]["statuses"] == dict(statuses)
            # (a worker counts the bytes of pages: not robots.txt or sitemaps, no depth)
            assert end["totals"]["bytes"] == sum(int(r["bytes"] or 0) for r in logs
                                                 if r["status"] is not None
                                                 and r["depth"] is not None)  # fmt: skip
            outcomes = Counter(str(r["outcome"]) for r in logs)
            top = dict(outcomes.most_common(20))
            assert {k: end["totals"]["outcomes"][k] for k in top} == top
            # the ended crawl's tail: each worker's last words
            for w in ("w1", "w2"):
                said = [r["message"] for r in get(base, f"/api/log?worker={w}")["records"]]
                assert any(m.startswith(f"worker {w}: ") and " pages; " in m for m in said), said
            # the bound: at most 15 fetches (30 a second) in a worker's entry, a tick's; every
            # other fetch counted in the entries' `unsent`, which the tail says
            client = redis.Redis.from_url(redis_url)
            try:
                entries = read_fetch_stream(client, crawl_id, "0", 100_000)[0]
            finally:
                client.close()
            for w in ("w1", "w2"):
                sent = [e for e in entries if e["worker"] == w]
                assert max(len(e["fetches"]) for e in sent) == 15
                assert sum(e["unsent"] for e in sent) > 0  # (it fetched faster than that)
                lines = len(crawl_log(out / w / "crawl.log.jsonl"))
                assert sum(len(e["fetches"]) + e["unsent"] for e in sent) == lines
            unsent = [r for r in get(base, "/api/log?n=1000")["records"]
                      if r["kind"] == "skipped" and r["worker"]]  # fmt: skip
            assert unsent and " fetches not sent" in unsent[-1]["message"]
            history = get(base, "/api/history")
            assert len(history["t"]) >= 2 and history["pages"][-1] >= history["pages"][0]
            assert history["t"] == sorted(history["t"])
