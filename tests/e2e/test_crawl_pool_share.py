"""A worker pool on a web of few hosts splits them: each of 2 workers fetches a fair part of
the pages (its share of the hosts: runner/build.PoolShare over frontier.SharedSqliteFrontier),
not the first worker all of them while the second finds every host leased. Judged by the
crawl's stats.json and the web's request log (coverage, overlap, politeness)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from _crawl_helpers import USER_AGENT, crawl_settings

from gossamer.engine.heartbeat import read_beats
from gossamer.runner.run import run_crawl
from gossamer.testweb import TruthRules, WebSpec, audit, compute_truth, read_logs, serve_in_thread

#: 8 hosts of about the same size (a light tail), ~100 pages each
SPEC = WebSpec(seed=3, hosts=8, pages_mean=100, pages_alpha=20.0)


@pytest.mark.slow
def test_two_workers_split_a_web_of_8_hosts(tmp_path: Path) -> None:
    """Every host seeded, no delay, 16 hosts at a time per worker (enough for all 8): each
    worker fetches at least 35 % of the pages. Before the share (the first worker leased
    every host and kept it through renewals) the split was ~99 % / 1 %."""
    log = tmp_path / "web.log"
    out = tmp_path / "crawl"
    with serve_in_thread(SPEC, log_path=log) as web:
        web.write_resolve_file(tmp_path / "resolve.txt")
        seeds = [web.url(h, 0) for h in range(len(web.model.hosts))]
        settings = crawl_settings(tmp_path, out, seeds, workers=2, per_ip=64, concurrency=16)
        assert run_crawl(settings) == 0
        web.flush_log()
    rules = TruthRules(seeds=tuple(seeds), scope="all", user_agent=USER_AGENT)
    truth = compute_truth(web.model, rules)
    report = audit(web.model, read_logs([log]).records, rules, truth=truth, per_ip_limit=64)
    assert report.coverage == 1.0, report.format_table()
    assert report.overlap == 0.0, report.format_table()
    assert report.politeness_violations == 0, report.format_table()
    stats = json.loads((out / "stats.json").read_text())
    assert stats["finished"] and stats["pages"] == len(truth.required)
    per_worker = stats["pages_per_worker"]
    assert len(per_worker) == 2, stats
    assert min(per_worker) >= 0.35 * sum(per_worker), per_worker


def wait_for(what: str, check: Callable[[], Any], proc: subprocess.Popen[bytes],
             timeout: float = 60) -> Any:  # fmt: skip
    """Poll `check` until it is truthy (its value); fail when the crawl exits first."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        assert proc.poll() is None, f"the crawl exited ({proc.returncode}) before {what}"
        assert time.monotonic() < deadline, f"waited {timeout} s for {what}"
        time.sleep(0.05)


def _beats_hosts(out: Path) -> dict[str, int]:
    """The running workers' hosts in hand, by worker id (their heartbeats)."""
    return {b["id"]: len(b["hosts"]) for b in read_beats(out) if b["state"] == "running"}


@pytest.mark.slow
def test_a_worker_that_joins_gets_its_share(tmp_path: Path) -> None:
    """A pool of 2 holds 4 of 8 hosts each (no delay: each keeps its hosts through
    renewals); scaled to 4 (`gossamer workers --scale 4`), the first two give hosts back and
    every worker crawls 2 (each host's pages take seconds: 20 ms a response)."""
    spec = WebSpec(seed=3, hosts=8, pages_mean=400, pages_alpha=20.0,
                   overrides=(("latency_ms", 20.0),))  # fmt: skip
    out = tmp_path / "crawl"
    with serve_in_thread(spec) as web:
        resolve = web.write_resolve_file(tmp_path / "resolve.txt")
        argv = [sys.executable, "-m", "gossamer", "crawl", "-o", str(out), "--scope", "all",
                "--resolve-file", str(resolve), "--allow-private", "--delay", "0",
                "--user-agent", USER_AGENT, "--concurrency", "8", "--workers", "2", "-q",
                *(web.url(h, 0) for h in range(len(web.model.hosts)))]  # fmt: skip
        env = {**os.environ, "GOSSAMER_PER_IP": "64"}
        with (tmp_path / "crawl.err").open("wb") as err:
            crawl = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=err, env=env)
        try:
            wait_for("2 workers with 4 hosts each",
                     lambda: _beats_hosts(out) == {"w0": 4, "w1": 4}, crawl)  # fmt: skip
            r = subprocess.run(
                [sys.executable, "-m", "gossamer", "workers", "--scale", "4", str(out)],
                capture_output=True, text=True, timeout=30, check=False,
            )  # fmt: skip
            assert r.returncode == 0, r.stderr
            wait_for("4 workers with 2 hosts each", lambda: _beats_hosts(out) == {
                "w0": 2, "w1": 2, "w2": 2, "w3": 2}, crawl)  # fmt: skip
            crawl.terminate()
            assert crawl.wait(timeout=60) == 143, (tmp_path / "crawl.err").read_text()
        finally:
            if crawl.poll() is None:
                crawl.kill()
                crawl.wait()
