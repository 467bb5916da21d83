"""A worker stopped while its Redis is down exits within its patience (`--stop-patience`),
or at once on a second SIGTERM, with exit 75 and one line saying what it leaves unrecorded;
its WARC and crawl log are whole (docs/cluster.md, "A stop while Redis is down"). A real
redis-server, SIGKILLed mid-crawl, and a real `gossamer worker` against the simulated web."""

from __future__ import annotations

import json
import signal
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from test_cluster import create_crawl, gossamer, wait_for, workers_by_pid

from gossamer.testweb import WebSpec, serve_in_thread
from gossamer.testweb.redisd import RedisServer

PATIENCE_S = 3.0  # the crawl's --stop-patience in the first test
MARGIN_S = 10.0  # the exit after the patience (closing the outputs, the interpreter's exit)
LONG_PATIENCE_S = 120.0  # the second test's: never reached
PROMPT_S = 10.0  # a second SIGTERM ends the worker within this


_Crawling = tuple[subprocess.Popen[bytes], RedisServer, Path, Path]


@contextmanager
def _crawling_worker(tmp_path: Path, patience: float) -> Iterator[_Crawling]:
    """A worker crawling (pages recorded, hosts leased) a crawl with `--stop-patience
    patience`: (its process, the Redis server, its directory, its log)."""
    server = RedisServer(tmp_path / "redis")
    # 40 hosts at a 0.5 s delay: batches of 20 URLs take 10 s, so the worker holds leases
    spec = WebSpec(seed=7, hosts=40, pages_mean=30)
    try:
        with serve_in_thread(spec, log_path=tmp_path / "web.log") as web:
            resolve = web.write_resolve_file(tmp_path / "resolve.txt")
            crawl_id = create_crawl(
                server.url, web.url(0, 0), resolve, "--delay", "0.5",
                "--stop-patience", str(patience),
            )  # fmt: skip
            out, log = tmp_path / "out", tmp_path / "worker.log"
            cmd = gossamer("worker", "--redis", server.url, "--crawl", crawl_id, "-o", str(out),
                           "-q")  # fmt: skip
            with log.open("wb") as fh:
                proc = subprocess.Popen(cmd, stdout=fh, stderr=subprocess.STDOUT)
            try:
                wait_for(
                    "pages from the worker, hosts in hand",
                    lambda: any(
                        w["pages"] > 10 and w["hosts"]
                        for w in workers_by_pid(server.url, crawl_id).values()
                    ),
                    120,
                    show=log.read_text,
                )
                yield proc, server, out / "w1", log
            finally:
                if proc.poll() is None:
                    proc.kill()
                    proc.wait()
    finally:
        server.stop()


def _signal_taken(pid: int, signum: int) -> bool:
    """Whether `signum` is no longer pending for process `pid` (delivered: a second one is
    a second signal, not merged with the first)."""
    bit = 1 << (signum - 1)
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(("ShdPnd:", "SigPnd:")) and int(line.split()[1], 16) & bit:
            return False
    return True


def _exit(proc: subprocess.Popen[bytes], log: Path, timeout: float) -> tuple[int, float]:
    started = time.monotonic()
    try:
        code = proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        pytest.fail(f"the worker still runs {timeout:g} s after SIGTERM:\n{log.read_text()}")
    return code, time.monotonic() - started


def _gave_up_lines(log: Path) -> list[str]:
    return [line for line in log.read_text(errors="replace").splitlines()
            if "gossamer: error:" in line]  # fmt: skip


def _outputs_whole(wdir: Path) -> None:
    """The worker's WARC files are closed and read to their end, its crawl log is whole JSON
    lines, its stats.json written."""
    from warcio.archiveiterator import ArchiveIterator

    warcs = sorted((wdir / "warc").glob("*.warc*"))
    assert warcs, list(wdir.iterdir())
    responses = 0
    for path in warcs:
        assert not path.name.endswith(".open"), path
        with path.open("rb") as f:
            responses += sum(1 for r in ArchiveIterator(f) if r.rec_type == "response")
    lines = (wdir / "crawl.log.jsonl").read_text().splitlines()
    assert lines and all(json.loads(line)["url"] for line in lines)
    assert responses >= len(lines) > 10, (responses, len(lines))
    stats = json.loads((wdir / "stats.json").read_text())
    assert stats["stopped_by"] == "SIGTERM" and stats["frontier"] is None, stats
    assert stats["pages"] > 10, stats


@pytest.mark.slow
def test_a_worker_stopped_with_redis_down_exits_within_its_patience(tmp_path: Path) -> None:
    with _crawling_worker(tmp_path, PATIENCE_S) as (proc, server, wdir, log):
        server.kill()  # SIGKILL: connections refused from now on
        proc.send_signal(signal.SIGTERM)
        code, took = _exit(proc, log, PATIENCE_S + MARGIN_S)
    text = log.read_text(errors="replace")
    assert code == 75, (code, text)
    assert PATIENCE_S - 0.5 <= took < PATIENCE_S + MARGIN_S, (took, text)
    lines = _gave_up_lines(log)
    assert len(lines) == 1, text
    assert f"Redis unreachable for {PATIENCE_S:g} s while stopping" in lines[0], text
    assert "fetched again" in lines[0], text
    assert "Traceback" not in text and "unexpected state" not in text, text
    _outputs_whole(wdir)


@pytest.mark.slow
def test_a_second_sigterm_ends_the_wait_for_redis_at_once(tmp_path: Path) -> None:
    with _crawling_worker(tmp_path, LONG_PATIENCE_S) as (proc, server, wdir, log):
        server.kill()
        proc.send_signal(signal.SIGTERM)
        wait_for("the first SIGTERM taken", lambda: _signal_taken(proc.pid, signal.SIGTERM), 10)
        proc.send_signal(signal.SIGTERM)
        code, took = _exit(proc, log, PROMPT_S * 3)
    text = log.read_text(errors="replace")
    assert code == 75, (code, text)
    assert took < PROMPT_S, (took, text)
    lines = _gave_up_lines(log)
    assert len(lines) == 1 and "Redis unreachable, stopped again" in lines[0], text
    assert "Traceback" not in text and "unexpected state" not in text, text
    _outputs_whole(wdir)
