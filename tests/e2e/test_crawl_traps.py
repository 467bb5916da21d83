"""Traps end by default: crawls of the realistic and hostile webs with no --max-depth finish on
their own, trap pages are dropped under their keys, the rest is covered, politely.

The web is small (seconds a crawl) but has several trap hosts; every crawl is audited against
the truth of the rules it recorded in crawl.json (so the default max_depth of 20 is the
truth's too: trap pages within it are permitted, never required)."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from _crawl_helpers import crawl_settings

from gossamer.runner.run import run_crawl
from gossamer.testweb import (
    AuditReport,
    TruthRules,
    WebSpec,
    audit,
    compute_truth,
    read_logs,
    serve_in_thread,
)
from gossamer.testweb._model import TRAP_KINDS, HostFlag, WebModel
from gossamer.urls import host_of

# realistic and hostile with more trap hosts than their 5 % and 30 %, and timings short
# enough for a test, within crawl_settings' time-outs (3 s to the first byte, 5 s in all): the
# pages behind a slow page are required by the truth, which assumes it answers
FAST = (
    ("latency_ms", 5.0),
    ("slow_first_byte_s", 1.0),
    ("trickle_s", 2.0),
    ("huge_page_bytes", 20e6),
    ("trap_host", 0.4),
    # rate-limited hosts answer 429 above this (5/s in both profiles): a rate-limited trap
    # host then takes a minute of Retry-After back-offs, which tests nothing more here
    ("rate_limit_per_s", 50.0),
    # slow hosts' latency ×3, not ×10: the hostile web's slow trap host (130 requests, one at a
    # time) was 14 s of its 15
    ("slow_host_factor", 3.0),
)
MAX_CRAWL_DELAY = 0.02  # robots.txt Crawl-delays of 0.5-2 s, capped


def _crawl(
    tmp_path: Path, spec: WebSpec, **extra: Any
) -> tuple[WebModel, AuditReport, dict[str, Any]]:
    log = tmp_path / "web.log"
    out = tmp_path / "crawl"
    with serve_in_thread(spec, log_path=log) as web:
        web.write_resolve_file(tmp_path / "resolve.txt")
        settings = crawl_settings(
            tmp_path, out, web.url(0, 0), max_crawl_delay=MAX_CRAWL_DELAY, **extra
        )
        assert run_crawl(settings) == 0
        web.flush_log()
    manifest = json.loads((out / "crawl.json").read_text())
    rules = TruthRules.from_dict(manifest)
    truth = compute_truth(web.model, rules)
    report = audit(
        web.model,
        read_logs([log]).records,
        rules,
        truth=truth,
        max_crawl_delay=manifest["max_crawl_delay"],
        user_agent=manifest["user_agent"],
    )
    stats = json.loads((out / "stats.json").read_text())
    return web.model, report, stats


def _trap_hosts(model: WebModel) -> int:
    return sum(1 for h in model.hosts if h.flags & HostFlag.TRAPS)


@pytest.mark.slow
@pytest.mark.timeout(240)
@pytest.mark.parametrize(
    ("profile", "seed"), [("realistic", 6), ("hostile", 5)], ids=["realistic", "hostile"]
)
def test_default_crawl_ends_with_traps_dropped(tmp_path: Path, profile: str, seed: int) -> None:
    spec = WebSpec(seed=seed, hosts=16, pages_mean=8, profile=profile, overrides=FAST)
    model, report, stats = _crawl(tmp_path, spec)
    assert _trap_hosts(model) >= 5
    assert stats["finished"], stats
    assert json.loads((tmp_path / "crawl" / "crawl.json").read_text())["max_depth"] == 20
    # every trap page fetched is within the rules (permitted by the depth limit), none
    # required; every other page the truth requires is covered; no politeness violation
    assert report.unexpected == {}, report.format_table()
    assert report.politeness_violations == 0, report.format_table()
    assert report.coverage == 1.0, report.format_table()
    assert report.trap_requests > 0, report.format_table()
    dropped = stats["dropped"]
    # the calendars and search pages end at the depth limit, the ever-deeper paths at the
    # path-repetition filter: each counted under its key
    assert dropped.get("scope/depth", 0) > 0 and dropped.get("scope/trap-path", 0) > 0, dropped
    # bounded: a trap host costs at most a few hundred requests (measured: see the report)
    assert report.trap_requests <= 400 * _trap_hosts(model), report.format_table()


@pytest.mark.slow
@pytest.mark.timeout(240)
def test_detectors_end_traps_without_a_depth_limit(tmp_path: Path) -> None:
    """--max-depth none: the calendar window, the query-string cap and the path-repetition
    filter end the three traps by themselves (windows and caps small, for a short test;
    near-duplicate detection off: it would end the search trap first, its pages alike)."""
    spec = WebSpec(seed=6, hosts=16, pages_mean=8, profile="realistic", overrides=FAST)
    limits = {
        "near_dup_links": "off",
        "max_depth": "none",
        "calendar_years_back": 1,
        "calendar_years_ahead": 1,
        "max_queries_per_path": 20,
    }
    model, report, stats = _crawl(tmp_path, spec, **limits)
    traps = _trap_hosts(model)
    assert stats["finished"], stats
    dropped = stats["dropped"]
    for key in ("scope/trap-calendar", "scope/trap-query", "scope/trap-path"):
        assert dropped.get(key, 0) > 0, dropped
    assert "scope/depth" not in dropped
    # without a depth limit the truth permits no trap page: those fetched are the entries
    # and what the detectors let through, nothing else is unexpected
    assert set(report.unexpected) == {"trap"}, report.format_table()
    assert report.coverage == 1.0, report.format_table()
    assert report.politeness_violations == 0, report.format_table()
    # per trap host: calendar 2026-11 ± one year (at most 12 × 3 months), search 20 queries
    # of /search.php, ever-deeper paths up to 3 repeats of a and b (68 directories)
    assert report.trap_requests <= traps * (36 + 20 + 68), report.format_table()
    per_kind = Counter(
        model.resolve(model.by_name[host_of(u)], "/" + u.split("/", 3)[3]).kind
        for u, _reason in report.unexpected_sample
    )
    assert set(per_kind) <= TRAP_KINDS
