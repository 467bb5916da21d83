"""The embedded crawler end to end against the simulated web, judged by its audit."""

from __future__ import annotations

import gzip
import json
from collections import Counter
from pathlib import Path

import pytest
from _crawl_helpers import USER_AGENT, crawl_settings
from starlette.testclient import TestClient

from gossamer.dashboard import EmbeddedSource, make_app
from gossamer.runner.run import run_crawl
from gossamer.sinks import read_graph
from gossamer.testweb import (
    TruthRules,
    WebSpec,
    audit,
    compute_truth,
    read_logs,
    serve_in_thread,
)


def warc_responses(out: Path) -> list[str]:
    from warcio.archiveiterator import ArchiveIterator

    uris = []
    for path in sorted((out / "warc").glob("*.warc.gz")):
        with path.open("rb") as f:
            uris.extend(
                rec.rec_headers.get_header("WARC-Target-URI")
                for rec in ArchiveIterator(f)
                if rec.rec_type == "response"
            )
    return uris


def graph_edges(out: Path) -> set[tuple[str, str, str]]:
    return read_graph(out).url_edges()


@pytest.mark.slow
def test_clean_web_full_coverage_no_overlap_polite(tmp_path: Path) -> None:
    spec = WebSpec(seed=3, hosts=60, pages_mean=12)
    log = tmp_path / "web.log"
    out = tmp_path / "crawl"
    with serve_in_thread(spec, log_path=log) as web:
        web.write_resolve_file(tmp_path / "resolve.txt")
        seed = web.url(0, 0)
        settings = crawl_settings(tmp_path, out, seed, workers=2)
        assert run_crawl(settings) == 0
        web.flush_log()
    rules = TruthRules(seeds=(seed,), scope="all", user_agent=USER_AGENT)
    truth = compute_truth(web.model, rules)
    per_worker = json.loads((out / "stats.json").read_text())["pages_per_worker"]
    assert len(per_worker) == 2 and min(per_worker) > 0  # both processes took hosts
    assert len({u.split("/")[2] for u in truth.required}) >= 50
    report = audit(web.model, read_logs([log]).records, rules, truth=truth)
    assert report.coverage == 1.0, report.format_table()
    assert report.overlap == 0.0, report.format_table()
    assert report.ok, report.format_table()
    stats = json.loads((out / "stats.json").read_text())
    assert stats["finished"] and stats["pages"] == len(truth.required)
    fetched = warc_responses(out)
    robots = [u for u in fetched if u.endswith("/robots.txt")]
    assert len(fetched) - len(robots) == len(truth.required)
    assert set(fetched) - set(robots) == set(truth.required)
    truth_edges = {(a, b, k) for a, b, k in truth.edges}
    ours = {e for e in graph_edges(out) if e[1] in truth.required}
    assert ours == truth_edges
    lines = (out / "crawl.log.jsonl").read_text().splitlines()
    assert sum(1 for x in lines if json.loads(x)["outcome"] == "ok") == len(truth.required)
    # each line names the pool worker that fetched: their pages are the workers' counts
    logged = [json.loads(x) for x in lines]
    ok_by_worker = Counter(r["worker"] for r in logged if r["outcome"] == "ok")
    assert ok_by_worker == {f"w{i}": n for i, n in enumerate(per_worker)}
    # and the dashboard's log tail filters the fetches by it
    page = TestClient(make_app(EmbeddedSource(out)), base_url="http://127.0.0.1:8700")
    tail = page.get("/api/log", params={"worker": "w1", "n": 50}).json()["records"]
    assert tail and {r["worker"] for r in tail} == {"w1"}
    assert any(r["kind"] == "fetch" for r in tail)
    with gzip.open(sorted((out / "warc").glob("*.warc.gz"))[0], "rb") as f:
        assert b"WARC/1.1" in f.read(200)


def test_max_pages_is_exact_across_workers(tmp_path: Path) -> None:
    spec = WebSpec(seed=4, hosts=20, pages_mean=20)
    log = tmp_path / "web.log"
    out = tmp_path / "crawl"
    with serve_in_thread(spec, log_path=log) as web:
        web.write_resolve_file(tmp_path / "resolve.txt")
        seed = web.url(0, 0)
        settings = crawl_settings(tmp_path, out, seed, max_pages=57)
        assert run_crawl(settings) == 0
        web.flush_log()
    rules = TruthRules(seeds=(seed,), scope="all", user_agent=USER_AGENT, max_pages=57)
    report = audit(web.model, read_logs([log]).records, rules)
    assert report.ok, report.format_table()
    assert report.to_dict()["pages"]["fetched"] == 57
    assert json.loads((out / "stats.json").read_text())["pages"] == 57


def test_sitemaps_seed_the_hosts_that_name_them(tmp_path: Path) -> None:
    """--sitemaps: every host's robots.txt names a sitemap (an index with gzipped parts on the
    big hosts); with max_depth 1 the seed host's sitemap URLs are depth 1, so the crawl must
    reach every page of the seed host, exactly as the truth computed with use_sitemaps does,
    with the sitemap edges in the graph."""
    spec = WebSpec(seed=12, hosts=12, pages_mean=40, overrides=(("robots_sitemap", 1.0),))
    log = tmp_path / "web.log"
    out = tmp_path / "crawl"
    with serve_in_thread(spec, log_path=log) as web:
        web.write_resolve_file(tmp_path / "resolve.txt")
        hosts = web.model.hosts
        seed = web.url(max(range(len(hosts)), key=lambda h: hosts[h].pages), 0)  # the biggest
        settings = crawl_settings(tmp_path, out, seed, max_depth=1, use_sitemaps=True, workers=1)
        assert run_crawl(settings) == 0
        web.flush_log()
    rules = TruthRules(
        seeds=(seed,), scope="all", user_agent=USER_AGENT, max_depth=1, use_sitemaps=True
    )
    truth = compute_truth(web.model, rules)
    without = compute_truth(web.model, TruthRules(seeds=(seed,), scope="all", max_depth=1))
    assert len(truth.required) > len(without.required) + 30  # the sitemaps matter here
    report = audit(web.model, read_logs([log]).records, rules, truth=truth)
    assert report.coverage == 1.0, report.format_table()
    assert report.overlap == 0.0, report.format_table()
    assert report.ok, report.format_table()
    truth_edges = {(a, b, k) for a, b, k in truth.edges}
    ours = {e for e in graph_edges(out) if e[1] in truth.required}
    assert ours == truth_edges
    assert any(k == "sitemap" for _s, _d, k in ours)
    logged = [json.loads(x) for x in (out / "crawl.log.jsonl").read_text().splitlines()]
    assert {r["url"] for r in logged if r["outcome"] == "sitemap"} == set(truth.sitemaps)
