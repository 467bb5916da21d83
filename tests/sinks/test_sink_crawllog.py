"""CrawlLog: fields, append across reopen, torn lines, several writers on one file."""

from __future__ import annotations

import json
import multiprocessing
import re
from pathlib import Path

import pytest

from gossamer.sinks import CrawlLog, iso_time, read_crawl_log


def test_fields_order_and_optional_keys(tmp_path: Path) -> None:
    path = tmp_path / "logs" / "crawl.jsonl"
    with CrawlLog(path) as log:
        log.write(
            url="http://www.example.com/",
            status=200,
            outcome="ok",
            nbytes=1234,
            content_type="text/html",
            duration=0.0123456789,
            depth=0,
            parent=None,
            started_at=1_790_000_000.25,
        )
        log.write(
            url="http://www.example.com/go",
            status=301,
            outcome="ok",
            depth=1,
            parent="http://www.example.com/",
            location="http://www.example.com/there",
        )
        log.write(
            url="http://www.example.com/slow",
            status=None,
            outcome="fetch/error/timeout",
            error="no first byte within 10 s",
            attempt=2,
        )
        assert log.statistics().lines == 3
    lines = path.read_text().splitlines()
    first = json.loads(lines[0])
    assert list(first) == [
        "time", "url", "status", "bytes", "type", "duration", "depth", "parent", "outcome"
    ]  # fmt: skip
    assert first["time"] == iso_time(1_790_000_000.25)
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.250000Z", first["time"])
    assert first["duration"] == 0.012346 and first["bytes"] == 1234
    second, third = json.loads(lines[1]), json.loads(lines[2])
    assert second["location"] == "http://www.example.com/there" and "error" not in second
    assert third["status"] is None and third["error"].startswith("no first byte")
    assert third["attempt"] == 2 and third["outcome"] == "fetch/error/timeout"


def test_appends_on_reopen_and_repairs_a_torn_line(tmp_path: Path) -> None:
    path = tmp_path / "crawl.jsonl"
    with CrawlLog(path) as log:
        log.write(url="http://a.example/1", status=200, outcome="ok")
    with open(path, "ab") as f:
        f.write(b'{"time": "2026-11-22T00:00:00.000000Z", "url": "http://a.ex')  # killed mid-line
    with CrawlLog(path) as log:
        log.write(url="http://a.example/2", status=200, outcome="ok", note="ünïcode")
    records = list(read_crawl_log(path))
    assert [r["url"] for r in records] == ["http://a.example/1", "http://a.example/2"]
    assert records[1]["note"] == "ünïcode"
    assert path.read_bytes().count(b"\n") == 3


def test_closed_log_refuses_writes(tmp_path: Path) -> None:
    log = CrawlLog(tmp_path / "c.jsonl")
    log.close()
    log.close()
    with pytest.raises(ValueError, match="closed"):
        log.write(url="http://a.example/", status=200, outcome="ok")


def _writer(path: str, worker: int) -> None:
    with CrawlLog(path) as log:
        for i in range(500):
            log.write(url=f"http://w{worker}.example/{i}", status=200, outcome="ok", pad="x" * 300)


def test_several_processes_share_one_log(tmp_path: Path) -> None:
    path = tmp_path / "shared.jsonl"
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_writer, args=(str(path), w)) for w in range(3)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    lines = path.read_bytes().splitlines()
    assert len(lines) == 1500
    urls = {json.loads(line)["url"] for line in lines}  # every line whole
    assert len(urls) == 1500
