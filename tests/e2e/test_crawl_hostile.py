"""The hostile profile: the crawl finishes, every error class is logged with its outcome,
nothing disallowed or out of scope is fetched, traps stop at their budgets."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from gossamer.config import load_settings
from gossamer.runner.run import run_crawl
from gossamer.testweb import (
    Kind,
    PageFlag,
    TruthRules,
    WebSpec,
    audit,
    compute_truth,
    read_logs,
    serve_in_thread,
)
from gossamer.urls import host_of

UA = "gossamer-hostile/0.1"
BUDGET = 150
# hostile hosts ask for Crawl-delays of 0.5-2 s: capped at 0.05 s (ten times the latency, so a
# crawl that ignored it still shows as violations); at 0.2 s a Crawl-delay trap host took 30 s
# to reach its budget
MAX_CRAWL_DELAY = 0.05


@pytest.mark.slow
def test_hostile_web(tmp_path: Path) -> None:
    spec = WebSpec(
        seed=5,
        hosts=30,
        pages_mean=12,
        profile="hostile",
        overrides=(
            ("slow_first_byte_s", 4.0),  # beyond the first-byte time-out below
            ("trickle_s", 8.0),  # beyond the total time-out below
            ("huge_page_bytes", 200e6),
            ("latency_ms", 5.0),
            ("trap_host", 0.5),
            # rate-limited hosts answer 429 + Retry-After: 2 above this (5/s in the profile): a
            # rate-limited trap host then took a minute of back-offs to reach its budget, which
            # tests nothing here (no check reads the 429s; the frontier's tests do)
            ("rate_limit_per_s", 50.0),
            # slow hosts' latency ×3, not ×10: one with 145 URLs took 25 s, one at a time
            ("slow_host_factor", 3.0),
        ),
    )
    log = tmp_path / "web.log"
    out = tmp_path / "crawl"
    with serve_in_thread(spec, log_path=log) as web:
        resolve = web.write_resolve_file(tmp_path / "resolve.txt")
        seed = web.url(0, 0)
        settings = load_settings(
            {
                "seeds": [seed],
                "output": out,
                "scope": "all",
                "resolve_file": resolve,
                "allow_private": True,
                "delay": 0.0,
                "user_agent": UA,
                "connect_timeout": 1.0,
                "first_byte_timeout": 2.0,
                "total_timeout": 4.0,
                "max_body": 1024 * 1024,
                "host_budget": BUDGET,
                "max_attempts": 2,
                "max_crawl_delay": MAX_CRAWL_DELAY,
            }
        )
        assert run_crawl(settings) == 0
        web.flush_log()
    model = web.model
    stats = json.loads((out / "stats.json").read_text())
    assert stats["finished"]
    lines = [json.loads(x) for x in (out / "crawl.log.jsonl").read_text().splitlines()]
    outcomes = Counter(x["outcome"] for x in lines)

    rules = TruthRules(seeds=(seed,), scope="all", user_agent=UA)
    truth = compute_truth(model, rules)
    # which error classes the truth says a correct crawler meets
    expected: set[str] = set()
    for url in truth.required:
        host, _, rest = url[7:].partition("/")
        res = model.resolve(model.by_name[host], "/" + rest)
        if res.kind is Kind.MISSING:
            expected.add("fetch/status/404")
        elif res.kind is Kind.GONE:
            expected.add("fetch/status/410")
        elif res.kind is Kind.HUGE:
            expected.add("ok/truncated")
        elif res.kind is Kind.PAGE:
            f = model.plan(res.host, res.a).flags
            if f & PageFlag.HANG:
                expected.add("fetch/error/timeout")
            if f & PageFlag.RESET_ALWAYS:
                expected.add("fetch/error/reset")
            if f & PageFlag.ERROR_500:
                expected.add("fetch/status/500")
            if f & PageFlag.BROKEN_GZIP:
                expected.add("fetch/error/decode")
    assert len(expected) >= 5, expected
    missing = expected - set(outcomes)
    assert not missing, (missing, outcomes)

    report = audit(
        model, read_logs([log]).records, rules, truth=truth, max_crawl_delay=MAX_CRAWL_DELAY
    )
    wrong = report.to_dict()["pages"]
    unexpected = {k: v for k, v in report.unexpected.items() if k != "trap"}
    assert not unexpected, (unexpected, report.format_table())
    assert report.politeness_violations == 0, report.format_table()
    # traps stop at their budget: no host got more than BUDGET distinct URLs requested
    per_host = Counter(host_of(u) for u in {x["url"] for x in lines if x["depth"] is not None})
    assert max(per_host.values()) <= BUDGET, per_host.most_common(3)
    assert wrong["trap_requests"] > 0  # there were traps, and they were entered
