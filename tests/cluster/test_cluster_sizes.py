"""Site sizes for `--partition sized`: from a crawl directory's crawl logs or a HOST PAGES
file, and the strategy's (shard, weight) pairs."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from gossamer.cluster.sizes import SiteSizesError, read_site_sizes, shard_weights
from gossamer.partition import shard_of
from gossamer.sinks import CrawlLog


def test_sizes_from_crawl_logs_count_distinct_pages(tmp_path: Path) -> None:
    crawl = tmp_path / "crawl"
    (crawl / "w1").mkdir(parents=True)
    with CrawlLog(crawl / "crawl.log.jsonl") as log:
        log.write(url="http://a.example/", status=200, outcome="ok", depth=0)
        log.write(url="http://a.example/x", status=404, outcome="fetch/status/404", depth=1)
        log.write(url="http://a.example/robots.txt", status=200, outcome="robots", depth=-1)
        log.write(url="http://b.example:8080/", status=None, outcome="fetch/error/dns", depth=0)
    with CrawlLog(crawl / "w1" / "crawl.log.jsonl") as log:  # a cluster worker's log
        log.write(url="http://a.example/", status=200, outcome="ok", depth=0)  # again
        log.write(url="http://B.example:8080/y", status=200, outcome="ok", depth=2)
    assert read_site_sizes(crawl) == {"a.example": 2, "b.example:8080": 1}


def test_sizes_from_a_text_file(tmp_path: Path) -> None:
    f = tmp_path / "sizes.txt"
    f.write_text("# host pages\nwww.a.example 120\nb.example:8080, 7  # a comment\n\nA.example 3\n")
    assert read_site_sizes(f) == {"www.a.example": 120, "b.example:8080": 7, "a.example": 3}


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("a.example\n", "expected HOST PAGES"),
        ("a.example many\n", "'many' is not a page count"),
        ("a.example -1\n", "a page count is >= 0"),
        ("a b.example 1\n", "expected HOST PAGES"),
        ("exa%mple 1\n", "'exa%mple' is not a host name"),
        ("a.example/x 1\n", "is not a host name"),
        ("# nothing\n", "names no site"),
    ],
)
def test_a_bad_sizes_file_says_where(tmp_path: Path, text: str, message: str) -> None:
    f = tmp_path / "sizes.txt"
    f.write_text(text)
    with pytest.raises(SiteSizesError, match=message):
        read_site_sizes(f)


def test_missing_or_empty_sources(tmp_path: Path) -> None:
    with pytest.raises(SiteSizesError, match="neither a crawl directory nor a file"):
        read_site_sizes(tmp_path / "missing")
    with pytest.raises(SiteSizesError, match=r"no crawl\.log\.jsonl"):
        read_site_sizes(tmp_path)
    (tmp_path / "crawl.log.jsonl").write_text("")
    with pytest.raises(SiteSizesError, match="record no page"):
        read_site_sizes(tmp_path)


def test_shard_weights_sum_sites_per_shard() -> None:
    sizes = {f"h{i}.example": i + 1 for i in range(50)}
    weights = dict(shard_weights(sizes))
    assert sum(weights.values()) == sum(sizes.values())
    for host, pages in sizes.items():
        assert weights[shard_of(host)] >= pages
    equal = dict(shard_weights(sizes, equal=True))
    assert sum(equal.values()) == 50 and set(equal) == set(weights)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--partition", "sized"], "--partition sized and --site-sizes SOURCE go together"),
        (["--site-sizes", "x.txt"], "--partition sized and --site-sizes SOURCE go together"),
        (["--partition", "sized", "--site-sizes", "missing"], "neither a crawl directory"),
    ],
)
def test_the_command_line_refuses_bad_site_sizes(
    tmp_path: Path, args: list[str], message: str
) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "gossamer", "crawl", "http://a.example/", "-o", str(tmp_path),
         "--redis", "redis://127.0.0.1:1/0", *args],
        capture_output=True, text=True, timeout=60, check=False, cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 2
    assert message in done.stderr
