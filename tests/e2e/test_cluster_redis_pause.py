"""A paused Redis (SIGSTOP: connections open, no reply) does not block a worker's event loop:
its Redis calls wait on the worker's I/O thread (docs/cluster.md, "Redis off the event
loop"), so the fetches in flight finish and are recorded meanwhile, the loop's lag stays
small, and after SIGCONT the crawl completes."""

from __future__ import annotations

import json
import os
import signal
import time
from datetime import datetime
from pathlib import Path

import pytest
from test_cluster import audit_web, create_crawl, logs, status, wait_for, workers

from gossamer.testweb import WebSpec, serve_in_thread
from gossamer.testweb.redisd import RedisServer

PAUSE_S = 10.0  # the scenario of issue 17: Redis paused for 10 s mid-crawl
MAX_LOOP_LAG_MS = 100.0


def recorded(crawl_log: Path) -> list[dict[str, object]]:
    """The worker's crawl log lines written so far (a partial last line skipped)."""
    if not crawl_log.exists():
        return []
    out = []
    for line in crawl_log.read_text(errors="replace").splitlines():
        try:
            out.append(json.loads(line))
        except ValueError:
            continue
    return out


def _epoch(iso: str) -> float:
    return datetime.fromisoformat(iso).timestamp()


@pytest.mark.slow
def test_a_paused_redis_never_blocks_the_workers_event_loop(tmp_path: Path) -> None:
    spec = WebSpec(seed=12, hosts=60, pages_mean=40)
    log = tmp_path / "web.log"
    out = tmp_path / "out"
    server = RedisServer(tmp_path / "redis")
    try:
        url = server.url
        with serve_in_thread(spec, log_path=log) as web:
            resolve = web.write_resolve_file(tmp_path / "resolve.txt")
            seed = web.url(0, 0)
            # a 0.1 s host delay: the crawl still has most of its pages queued at the pause
            crawl_id = create_crawl(url, seed, resolve, "--delay", "0.1")
            with workers(url, crawl_id, out, 1) as procs:
                crawl_log = out / "w1" / "crawl.log.jsonl"

                def crawling() -> bool:
                    ws = status(url, crawl_id)["workers"]
                    return len(ws) == 1 and ws[0]["pages"] > 20

                wait_for("pages from the worker", crawling, 30)
                before = status(url, crawl_id)
                os.kill(server.pid, signal.SIGSTOP)
                paused_at, paused_wall = time.monotonic(), time.time()
                try:

                    def fetched_in_pause() -> list[str]:
                        # pages fetched a second or more into the pause, and recorded (the
                        # log is flushed as a batch ends, before its links go to Redis): a
                        # loop blocked by a Redis call (made within 50 ms: the next lease)
                        # records none before SIGCONT; a free one goes on with the batches
                        # it holds (how many hosts still have URLs in hand varies: 2-3 seen)
                        return [
                            str(r["url"])
                            for r in recorded(crawl_log)
                            if _epoch(str(r["time"])) >= paused_wall + 1.0
                        ]

                    wait_for(
                        "pages fetched and recorded with Redis paused",
                        # (one page proves a free loop; a fresh-clone run on a loaded
                        # machine once saw 2, so 2 is asked, not 3)
                        lambda: len(fetched_in_pause()) >= 2,
                        PAUSE_S - 1.5,
                        show=fetched_in_pause,
                    )
                    assert procs[0].poll() is None, logs(out)
                    time.sleep(max(0.0, PAUSE_S - (time.monotonic() - paused_at)))
                finally:
                    os.kill(server.pid, signal.SIGCONT)
                code = procs[0].wait(timeout=120)
            assert code == 0, logs(out)
            _truth, report = audit_web(web, log, seed)
        assert before["frontier"]["queued"] > 100, "the crawl was nearly over at the pause"
        assert report.coverage == 1.0, report.format_table()
        assert report.politeness_violations == 0 and report.ok, report.format_table()
        stats = json.loads((out / "w1" / "stats.json").read_text())
        assert stats["finished"], stats
        assert stats["loop_lag_samples"] > 100, stats
        assert stats["loop_lag_max_ms"] < MAX_LOOP_LAG_MS, stats
        assert stats["loop_lag_p99_ms"] <= stats["loop_lag_max_ms"], stats
        assert "Traceback" not in logs(out)
    finally:
        server.stop()
