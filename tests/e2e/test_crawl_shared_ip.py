"""A worker pool on a web whose hosts all share one IP: the pool's IP gate (the parent's
broker) holds `per_ip` across the workers, judged by the web's request log."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from _crawl_helpers import USER_AGENT, crawl_settings

from gossamer.runner.run import run_crawl
from gossamer.testweb import TruthRules, WebSpec, audit, compute_truth, read_logs, serve_in_thread


@pytest.mark.slow
@pytest.mark.parametrize("per_ip", [1, 3])
def test_two_workers_on_one_ip_keep_per_ip_across_the_pool(tmp_path: Path, per_ip: int) -> None:
    """40 hosts on one address, two workers, 8 requests in flight each: never more than
    `per_ip` requests to the address at once in all (the audit's per-IP check), every page
    fetched once, and both workers fetched (the slots pass between them)."""
    spec = WebSpec(seed=7, hosts=40, pages_mean=6, max_ips=1, overrides=(("latency_ms", 3.0),))
    log = tmp_path / "web.log"
    out = tmp_path / "crawl"
    with serve_in_thread(spec, log_path=log) as web:
        assert len({h.ip for h in web.model.hosts}) == 1
        web.write_resolve_file(tmp_path / "resolve.txt")
        seeds = [web.url(h, 0) for h in range(len(web.model.hosts))]
        settings = crawl_settings(
            tmp_path, out, seeds, workers=2, per_ip=per_ip, concurrency=8
        )
        assert run_crawl(settings) == 0
        web.flush_log()
    rules = TruthRules(seeds=tuple(seeds), scope="all", user_agent=USER_AGENT)
    truth = compute_truth(web.model, rules)
    report = audit(
        web.model, read_logs([log]).records, rules, truth=truth, per_ip_limit=per_ip
    )
    assert report.coverage == 1.0, report.format_table()
    assert report.overlap == 0.0, report.format_table()
    assert report.politeness_violations == 0, report.format_table()
    assert report.ok, report.format_table()
    stats = json.loads((out / "stats.json").read_text())
    assert stats["finished"] and stats["pages"] == len(truth.required)
    assert len(stats["pages_per_worker"]) == 2 and min(stats["pages_per_worker"]) > 0
    assert not (out / "locks").exists()  # no lock files: the pool's slots are the broker's
