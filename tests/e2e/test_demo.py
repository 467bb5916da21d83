"""The README's demo command, end to end: a real server subprocess, a real crawl, an audit."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from gossamer.testweb import WebSpec, model_for
from gossamer.testweb.cli_demo import DEMO_OVERRIDES


@pytest.mark.slow
def test_demo_crawls_the_whole_truth_politely(tmp_path: Path) -> None:
    out = tmp_path / "demo"
    proc = subprocess.run(
        [sys.executable, "-m", "gossamer", "testweb", "demo", "--hosts", "30", "-o", str(out)],
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "verdict: OK" in proc.stdout
    # the URLs a complete crawl fetches (by kind) are the URLs the reference client fetched
    truth = next(x for x in proc.stdout.splitlines() if x.startswith("a complete crawl from"))
    fetched = next(x for x in proc.stdout.splitlines() if x.startswith("  fetched "))
    assert _numbers(truth.partition(" fetches ")[2])[0] == _numbers(fetched)[0], (truth, fetched)
    report = json.loads((out / "audit.json").read_text())
    assert report["pages"]["coverage"] == 1.0
    assert report["pages"]["overlap"] == 0.0
    assert (out / "web.log").stat().st_size > 0
    assert (out / "resolve.txt").read_text().count(":80:127.") == 30


def _numbers(text: str) -> list[int]:
    return [int(n.replace(",", "")) for n in re.findall(r"\d[\d,]*", text)]


def test_gossamer_demo_says_what_its_numbers_count(tmp_path: Path) -> None:
    """`gossamer demo`: the web's HTML pages, then what a complete crawl fetches by kind
    (most URLs are redirects, dead links and other files), the same number the crawl's
    summary calls pages; robots.txt requests as many as the summary's robots.txt responses,
    and not among its HTTP errors."""
    out = tmp_path / "demo"
    proc = subprocess.run(
        [sys.executable, "-m", "gossamer", "demo", "--hosts", "30", "-o", str(out)],
        capture_output=True, text=True, timeout=240, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    web, truth = proc.stdout.splitlines()[:2]
    model = model_for(WebSpec(seed=1, hosts=30, pages_mean=25.0, overrides=DEMO_OVERRIDES))
    assert web.startswith(f"simulated web: 30 hosts, {model.total_pages:,} HTML pages, "), web
    stats = json.loads((out / "crawl" / "stats.json").read_text())
    head, _, kinds = truth.partition(": ")
    assert head == (
        f"a complete crawl from http://www.h0.example/ fetches {stats['pages']:,} URLs "
        "(the crawl's pages below)"
    ), truth
    by_kind, _, robots = kinds.partition("; and ")
    html, *others = re.split(r", (?![^(]*\))", by_kind)  # not inside parentheses
    assert html.startswith(f"{html.split()[0]} of the {model.total_pages:,} HTML pages")
    assert sum(_numbers(x)[0] for x in (html, *others)) == stats["pages"], truth
    assert any("redirects" in x for x in others) and any("dead links" in x for x in others)
    requests = _numbers(robots)[0]
    summary = next(x for x in proc.stderr.splitlines() if x.startswith("  robots.txt: "))
    assert summary.startswith(f"  robots.txt: {requests:,} responses ("), (robots, summary)
    assert sum(stats["robots_sitemap_statuses"].values()) == requests
