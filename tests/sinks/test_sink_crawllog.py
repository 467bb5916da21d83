"""CrawlLog: fields, append across reopen, torn lines, several writers on one file."""

from __future__ import annotations

import json
import multiprocessing
import re
import time
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
    with pytest.raises(ValueError, match=r"crawl.jsonl:2: not a JSON object"):
        list(read_crawl_log(path, strict=True))


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


def _big_writer(path: str) -> None:
    with CrawlLog(path) as log:
        for i in range(4000):  # 64 KiB writes of many pages each
            log.write(url=f"http://big.example/{i}", status=200, outcome="ok", pad="y" * 2000)


def _opener(path: str, times: int) -> None:
    for _ in range(times):
        CrawlLog(path).close()  # each open checks the file's tail for a torn line


def test_opening_the_log_during_another_process_write_adds_no_empty_line(tmp_path: Path) -> None:
    """A file grows a page at a time during a big write: an opener that looked at its tail
    then, unlocked, took it for a torn line and added a newline (an empty line in the log:
    1501 lines for 1500 once in test_several_processes_share_one_log)."""
    path = tmp_path / "race.jsonl"
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_big_writer, args=(str(path),))]
    procs += [ctx.Process(target=_opener, args=(str(path), 3000)) for _ in range(2)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
        assert p.exitcode == 0
    lines = path.read_bytes().split(b"\n")
    assert lines[-1] == b""  # ends with a newline
    assert [n for n, line in enumerate(lines[:-1]) if not line] == []
    assert len(lines) - 1 == 4000


def test_lines_are_buffered_until_flush_or_close(tmp_path: Path) -> None:
    path = tmp_path / "c.jsonl"
    log = CrawlLog(path)
    log.write(url="http://a.example/1", status=200, outcome="ok", started_at=1_790_000_000.5)
    assert path.read_bytes() == b""  # buffered
    log.flush()
    assert [r["url"] for r in read_crawl_log(path)] == ["http://a.example/1"]
    log.write(url="http://a.example/2", status=None, outcome="fetch/error/timeout")
    log.close()  # close writes what is buffered
    assert [r["url"] for r in read_crawl_log(path)][-1] == "http://a.example/2"
    big = CrawlLog(tmp_path / "big.jsonl")  # a full buffer is written by itself
    for i in range(2000):
        big.write(url=f"http://a.example/{i}", status=200, outcome="ok")
    assert 0 < len(list(read_crawl_log(tmp_path / "big.jsonl"))) < 2000
    big.close()
    assert len(list(read_crawl_log(tmp_path / "big.jsonl"))) == 2000


@pytest.mark.parametrize("worker", [None, "w1"])
def test_direct_lines_equal_json_dumps(tmp_path: Path, worker: str | None) -> None:
    """The hand-built common line is exactly what json.dumps writes, for odd values too; a
    pool worker's lines end with its `worker` (before the caller's extra fields)."""
    path = tmp_path / "c.jsonl"
    cases: list[dict[str, object]] = [
        {"url": 'http://a.example/é"\\\n\u2028', "status": 200, "outcome": "ok"},
        {"url": "http://a.example/", "status": None, "outcome": "x", "error": "tab\there"},
        {"url": "u", "status": 301, "outcome": "ok", "location": "l\udcff", "depth": 0},
        {"url": "u", "status": True, "outcome": "ok", "nbytes": 3},  # bool: general path
        {"url": "u", "status": 200, "outcome": "ok", "duration": float("inf")},
        {"url": "u", "status": 200, "outcome": "ok", "duration": 3},
        {"url": "u", "status": 200, "outcome": "ok", "attempt": 2, "parent": "p"},
        {"url": "u", "status": 200, "outcome": "ok", "duration": 1e-7, "content_type": ""},
        {"url": "u", "status": 200, "outcome": "ok", "etag": '"a\\b"', "last_modified": "lm"},
        {"url": "u", "status": 304, "outcome": "ok/not-modified", "last_modified": "lm"},
        {"url": "u", "status": 200, "outcome": "ok", "etag": 'W/"e"', "attempt": 2},
        {"url": "u", "status": True, "outcome": "ok", "etag": "e", "location": "l"},
    ]
    with CrawlLog(path, worker=worker) as log:
        for case in cases:
            log.write(started_at=1_790_000_000.25, **case)  # type: ignore[arg-type]
    lines = path.read_bytes().splitlines()
    assert len(lines) == len(cases)
    for case, line in zip(cases, lines, strict=True):
        record = {
            "time": time.strftime("%Y-%m-%dT%H:%M:%S.250000Z", time.gmtime(1_790_000_000)),
            "url": case["url"],
            "status": case["status"],
            "bytes": case.get("nbytes", 0),
            "type": case.get("content_type"),
            "duration": round(case.get("duration", 0.0), 6),  # type: ignore[call-overload]
            "depth": case.get("depth"),
            "parent": case.get("parent"),
            "outcome": case["outcome"],
        }
        for key in ("error", "location", "etag", "last_modified"):
            if key in case:
                record[key] = case[key]
        if worker is not None:
            record["worker"] = worker
        if "attempt" in case:
            record["attempt"] = case["attempt"]
        expected = json.dumps(record, ensure_ascii=False, separators=(",", ":"))
        assert line == expected.encode("utf-8", "surrogateescape")


def test_failed_write_keeps_the_rest_and_ends_the_torn_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import os

    import gossamer.sinks.crawllog as crawllog_mod

    path = tmp_path / "c.jsonl"
    log = CrawlLog(path)
    for i in range(3):
        log.write(url=f"http://a.example/{i}", status=200, outcome="ok")
    real_write = os.write

    def part_then_enospc(fd: int, data: bytes | memoryview) -> int:
        monkeypatch.setattr(crawllog_mod.os, "write", enospc)
        return real_write(fd, bytes(data[: len(data) // 2]))  # 1 whole line and a half

    def enospc(fd: int, data: bytes | memoryview) -> int:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(crawllog_mod.os, "write", part_then_enospc)
    with pytest.raises(OSError, match="No space"):
        log.flush()
    monkeypatch.setattr(crawllog_mod.os, "write", real_write)
    log.write(url="http://a.example/3", status=200, outcome="ok")
    log.close()
    urls = [r["url"] for r in read_crawl_log(path)]
    assert urls == ["http://a.example/0", "http://a.example/2", "http://a.example/3"]
    assert all(line.startswith(b"{") for line in path.read_bytes().splitlines()[2:])


def test_validators_are_logged_only_when_given(tmp_path: Path) -> None:
    path = tmp_path / "c.jsonl"
    with CrawlLog(path) as log:
        log.write(url="u", status=200, outcome="ok", etag='"x"', last_modified="Mon, 01 Jan 2024")
        log.write(url="v", status=200, outcome="ok", etag=None, last_modified=None)
    first, second = (json.loads(x) for x in path.read_text().splitlines())
    assert list(first)[-2:] == ["etag", "last_modified"]
    assert (first["etag"], first["last_modified"]) == ('"x"', "Mon, 01 Jan 2024")
    assert "etag" not in second and "last_modified" not in second
