"""Near-duplicates on the simulated web's `duplicates` profile (printer-friendly copies,
mirrored pages, `?ref=` variants and a calendar of days that differ only in their date, the
truth knowing which pages are near-duplicates of which): the crawl log's marks score
precision and recall >= 0.95 against the truth, and not following a near-duplicate's links
(the default) fetches >= 90 % fewer calendar pages than following them, with every page the
truth requires covered either way."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from _crawl_helpers import crawl_settings

from gossamer.runner.run import run_crawl
from gossamer.sinks import read_crawl_log
from gossamer.testweb import (
    AuditReport,
    HostFlag,
    TruthRules,
    WebSpec,
    audit,
    compute_truth,
    near_duplicate_scores,
    read_logs,
    serve_in_thread,
)
from gossamer.testweb._model import Kind, WebModel
from gossamer.testweb._truth import split_url

SPEC = WebSpec(seed=7, hosts=6, pages_mean=8, profile="duplicates")


def _crawl(
    tmp_path: Path, links: str, workers: int
) -> tuple[WebModel, AuditReport, list[dict[str, Any]]]:
    log = tmp_path / f"web-{links}.log"
    out = tmp_path / links
    with serve_in_thread(SPEC, log_path=log) as web:
        web.write_resolve_file(tmp_path / "resolve.txt")
        settings = crawl_settings(
            tmp_path, out, web.url(0, 0), near_dup_links=links, workers=workers
        )
        assert run_crawl(settings) == 0
        web.flush_log()
    rules = TruthRules.from_dict(json.loads((out / "crawl.json").read_text()))
    truth = compute_truth(web.model, rules)
    report = audit(web.model, read_logs([log]).records, rules, truth=truth)
    return web.model, report, list(read_crawl_log(out / "crawl.log.jsonl"))


def _calendar_fetches(model: WebModel, records: list[dict[str, Any]]) -> int:
    n = 0
    for rec in records:
        host, target = split_url(rec["url"])
        if rec["depth"] is not None and model.resolve(model.by_name[host], target).kind is (
            Kind.DUP_CALENDAR
        ):
            n += 1
    return n


@pytest.mark.timeout(180)
def test_near_duplicates_are_found_and_their_links_end_the_calendar(tmp_path: Path) -> None:
    # two workers (their fingerprints shared through neardup.sqlite), then one
    model, skip, skipped = _crawl(tmp_path, "skip", 2)
    assert sum(1 for h in model.hosts if h.flags & HostFlag.NEAR_DUPS) >= 3
    _, follow, followed = _crawl(tmp_path, "follow", 1)
    for report in (skip, follow):  # no page the truth requires is lost, nothing unexpected
        assert report.coverage == 1.0 and report.unexpected == {}, report.format_table()
    for records in (skipped, followed):
        score = near_duplicate_scores(model, records)
        print(f"near-duplicates: {score.to_dict()}")
        assert score.groups >= 10 and score.precision >= 0.95 and score.recall >= 0.95, score
    on, off = _calendar_fetches(model, skipped), _calendar_fetches(model, followed)
    print(f"calendar pages fetched: {on} with --near-dup-links skip, {off} with follow")
    assert on <= 0.1 * off, (on, off)
