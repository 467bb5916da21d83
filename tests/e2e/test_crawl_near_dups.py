"""Near-duplicates on a real server: a static site on 127.0.0.1 (nginx) whose 20 calendar pages
differ only in their date, beside distinct pages. `gossamer report` shows them as one cluster
of 20, the crawl log marks 19 of them `"dup": "near"` against the first, and by default
(`--near-dup-links skip`) the link that only a near-duplicate has (the calendar's next day
after the last one listed) is not followed, where `--near-dup-links follow` follows it."""

from __future__ import annotations

import json
import random
import subprocess
from pathlib import Path

import pytest
from test_real_site import free_port, installed_gossamer, write_nginx_conf

from gossamer.config import load_settings
from gossamer.report.crawl import print_report
from gossamer.runner.run import run_crawl
from gossamer.sinks import read_crawl_log
from gossamer.testweb._nginx import NginxError, find_nginx, run_nginx

_WORDS = (
    "river", "mountain", "garden", "kitchen", "window", "morning", "evening", "summer",
    "winter", "letter", "market", "station", "bridge", "forest", "harbour", "village", "valley",
    "island", "meadow", "library", "museum", "theatre", "circus", "planet", "quick", "bright",
    "quiet", "gentle", "simple", "modern", "ancient", "golden", "silver", "hidden", "open",
    "careful", "steady"
)


def _text(seed: int, words: int) -> str:
    rng = random.Random(seed)
    return " ".join(rng.choice(_WORDS) for _ in range(words))


def _site(tmp_path: Path) -> tuple[Path, str, Path]:
    """index.html linking to cal/2026-07-01 … -20 and three distinct pages; each calendar
    page links to the next day (the 20th to the 21st, linked from nowhere else)."""
    try:
        find_nginx()
    except NginxError:
        pytest.skip("nginx is not installed")
    docroot = tmp_path / "www"
    (docroot / "cal").mkdir(parents=True)
    body = _text(1, 1200)  # the calendar's events: the same on every day's page
    days = [f"2026-07-{d:02d}" for d in range(1, 22)]
    links = [f"cal/{day}.html" for day in days[:20]] + [f"p{k}.html" for k in range(3)]
    (docroot / "index.html").write_text(
        "<html><body><p>" + _text(2, 300) + "</p>"
        + "".join(f'<a href="{href}">{href}</a> ' for href in links) + "</body></html>"
    )  # fmt: skip
    for k in range(3):
        (docroot / f"p{k}.html").write_text(
            f"<html><body><p>{_text(10 + k, 1200)}</p><a href='/'>home</a></body></html>"
        )
    for i, day in enumerate(days):
        nxt = f'<a href="{days[i + 1]}.html">next day</a>' if i + 1 < len(days) else ""
        (docroot / "cal" / f"{day}.html").write_text(
            f"<html><head><title>Events on {day}</title></head><body><h1>Events on {day}</h1>"
            f"<p>{body}</p>{nxt} <a href='/'>home</a></body></html>"
        )
    port = free_port()
    access_log = write_nginx_conf(tmp_path / "nginx", docroot, port)
    return tmp_path / "nginx", f"http://127.0.0.1:{port}/", access_log


def test_a_calendar_of_twenty_dates_is_one_cluster_and_its_next_day_is_not_followed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    server, seed, _ = _site(tmp_path)
    skip, follow = tmp_path / "skip", tmp_path / "follow"
    with run_nginx(server):
        for out, mode in ((skip, "skip"), (follow, "follow")):
            settings = load_settings(
                {"seeds": [seed], "output": out, "workers": 1, "delay": 0.0,
                 "allow_private": True, "near_dup_links": mode}
            )  # fmt: skip
            assert run_crawl(settings) == 0
    capsys.readouterr()
    calendar = f"{seed}cal/"
    first = f"{calendar}2026-07-01.html"
    for out, days in ((skip, 20), (follow, 21)):
        records = [r for r in read_crawl_log(out / "crawl.log.jsonl") if r["depth"] is not None]
        fetched = {r["url"] for r in records if r["url"].startswith(calendar)}
        assert len(fetched) == days  # skip: the 21st day is linked from a near-duplicate only
        near = {r["url"]: r["dup_of"] for r in records if r.get("dup") == "near"}
        assert set(near) == fetched - {first} and set(near.values()) == {first}
    # the command's JSON (one process), and its text
    done = subprocess.run(
        [installed_gossamer(), "report", str(skip), "--json"], capture_output=True, text=True,
        timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    clusters = json.loads(done.stdout)["near_duplicates"]
    assert [c["size"] for c in clusters] == [20]
    assert clusters[0]["representative"] == first and len(clusters[0]["examples"]) == 5
    assert print_report(skip) == 0
    text = capsys.readouterr().out
    assert "near-duplicates: 1 cluster, 20 pages; pages marked near 19" in text, text
    assert f"{20:>10,}  {first}" in text, text
