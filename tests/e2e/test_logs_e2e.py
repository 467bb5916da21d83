"""`--log-format json` as a user runs it (subprocesses): a crawl of the simulated web, a resume
with nothing to do, a foreign -o directory, a dead seed, and a cluster crawl whose worker
process (started by the command) logs its join line as JSON because its parent was told to.
Every stderr line is then a JSON object; the exit statuses are those of the human format."""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from gossamer.exitcodes import Exit
from gossamer.testweb import WebSpec, serve_in_thread

UA = "gossamer-logtest/0.1"
TS = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")


def gossamer(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gossamer", *args],
        capture_output=True, text=True, timeout=180, check=False,
        env={**os.environ, **(env or {})},
    )  # fmt: skip


def web_args(resolve: Path, *extra: str) -> list[str]:
    return [
        "--scope", "all", "--resolve-file", str(resolve), "--allow-private", "--delay", "0",
        "--user-agent", UA, "--concurrency", "16", *extra,
    ]  # fmt: skip


def json_lines(stderr: str) -> list[dict[str, Any]]:
    """Every line of `stderr` as a log record; fails on any line that is not one."""
    records = []
    for line in stderr.splitlines():
        record = json.loads(line)  # raises on a human line, a progress line's text, …
        assert isinstance(record, dict) and TS.match(record["ts"]), line
        assert record["level"] in ("debug", "info", "warning", "error"), line
        assert record["logger"].startswith("gossamer"), line
        records.append(record)
    return records


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _alive(pid: int) -> bool:
    """Whether `pid` runs (a zombie does not: an orphan's reaper may be slow, or none)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def test_an_embedded_crawl_logs_json_lines(tmp_path: Path) -> None:
    spec = WebSpec(seed=4, hosts=6, pages_mean=8, profile="clean")
    out = tmp_path / "crawl"
    with serve_in_thread(spec) as web:
        resolve = web.write_resolve_file(tmp_path / "resolve.txt")
        seed = web.url(0, 0)
        # a pool of two forked workers (test_logs.py: a forked process logs as its parent)
        done = gossamer(
            "crawl", seed, "-o", str(out), *web_args(resolve, "--workers", "2"),
            "--log-format", "json",
        )  # fmt: skip
        assert done.returncode == Exit.OK, done.stderr
        assert json_lines(done.stderr) == []  # no progress display, no summary: nothing to say
        assert json.loads((out / "stats.json").read_text())["pages"] > 10
        # the variable does what the flag does: a resume of the complete crawl says so
        again = gossamer("crawl", "--resume", str(out), env={"GOSSAMER_LOG_FORMAT": "json"})
    assert again.returncode == Exit.OK, again.stderr
    (note,) = json_lines(again.stderr)
    assert note["level"] == "info" and note["logger"] == "gossamer.runner.run"
    assert note["message"].startswith(f"{out}: the crawl is complete") and note["path"] == str(out)
    # the human form of the same: the line users saw before
    human = gossamer("crawl", "--resume", str(out))
    assert human.stderr == f"gossamer: {note['message']}\n"


def test_errors_are_json_lines_with_the_same_exit_status(tmp_path: Path) -> None:
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("notes\n")
    seed = "http://a.example/"
    human = gossamer("crawl", seed, "-o", str(mine))
    as_json = gossamer("crawl", seed, "-o", str(mine), "--log-format", "json")
    assert human.returncode == as_json.returncode == Exit.USAGE
    (error,) = json_lines(as_json.stderr)
    assert error["level"] == "error" and "the directory holds other files" in error["message"]
    assert human.stderr == f"gossamer: error: {error['message']}\n"
    assert sorted(p.name for p in mine.iterdir()) == ["notes.txt"]

    # a dead seed: nothing fetched, exit 3, the main failure as one JSON error line
    out = tmp_path / "dead"
    dead = f"http://127.0.0.1:{_free_port()}/"
    done = gossamer("crawl", dead, "-o", str(out), "--allow-private", "--log-format", "json")
    assert done.returncode == Exit.NOTHING_FETCHED, done.stderr
    (error,) = json_lines(done.stderr)
    assert error["level"] == "error" and error["logger"] == "gossamer.report.progress"
    assert error["message"].startswith("no page fetched: ") and "fetch/error/connect" in (
        error["message"]
    )
    assert error["path"] == str(out)

    # --log-level error leaves the info line of a resume out
    quiet = gossamer(
        "crawl", "--resume", str(out), "--log-format", "json", "--log-level", "error"
    )  # fmt: skip
    loud = gossamer("crawl", "--resume", str(out), "--log-format", "json")
    assert quiet.returncode == loud.returncode
    assert [r["level"] for r in json_lines(quiet.stderr)] == [
        r["level"] for r in json_lines(loud.stderr) if r["level"] == "error"
    ]


@pytest.mark.parametrize("level", ["info", "debug"])
def test_a_cluster_worker_logs_as_its_parent_was_told(
    tmp_path: Path, redis_url: str, level: str
) -> None:
    """`crawl --redis --workers 1 --log-format json`: the worker is a subprocess (`gossamer
    worker`), told by GOSSAMER_LOG_FORMAT and GOSSAMER_LOG_LEVEL; its join line and its end
    line are JSON records with the worker's and the crawl's ids, and nothing on stderr is not
    JSON. Its IP gate's counts are internals: shown at `--log-level debug` only."""
    spec = WebSpec(seed=6, hosts=5, pages_mean=6, profile="clean")
    out = tmp_path / "cluster"
    with serve_in_thread(spec) as web:
        resolve = web.write_resolve_file(tmp_path / "resolve.txt")
        done = gossamer(
            "crawl", "--redis", redis_url, web.url(0, 0), "-o", str(out), "--workers", "1",
            *web_args(resolve), "--log-format", "json", "--log-level", level,
        )  # fmt: skip
    assert done.returncode == Exit.OK, done.stderr
    crawl_id = done.stdout.strip()
    records = json_lines(done.stderr)
    worker = [r for r in records if r["logger"] == "gossamer.cluster.worker"]
    joins = [r for r in worker if "joins crawl" in r["message"]]
    assert len(joins) == 1, records
    join = joins[0]
    assert join["level"] == "info" and join["worker_id"] == "w1"
    assert join["crawl_id"] == crawl_id and join["path"] == str(out.absolute() / "w1")
    assert isinstance(join["pid"], int) and join["pid"] != os.getpid()
    assert join["message"].startswith(f"worker w1 ({join['machine']}, pid {join['pid']}) joins")
    ends = [r for r in worker if r["message"].startswith("worker w1: ") and "pages" in r]
    assert len(ends) == 1 and ends[0]["pages"] > 0 and ends[0]["crawl_id"] == crawl_id, records
    gate = [r for r in worker if "IP gate" in r["message"]]
    if level == "info":
        assert gate == [], gate
    else:
        assert [r["level"] for r in gate] == ["debug"], gate


def test_workers_scale_hands_json_to_its_detached_workers(tmp_path: Path, redis_url: str) -> None:
    """`workers --scale 1 --log-format json`: its own line is JSON, and the detached worker it
    starts (in its own session, logging to DIR/logs/worker-PID.log) logs JSON too."""
    spec = WebSpec(seed=7, hosts=5, pages_mean=6, profile="clean")
    out = tmp_path / "out"
    with serve_in_thread(spec) as web:
        resolve = web.write_resolve_file(tmp_path / "resolve.txt")
        create = gossamer(
            "crawl", "--redis", redis_url, web.url(0, 0), "--workers", "0", *web_args(resolve)
        )  # fmt: skip
        assert create.returncode == Exit.OK, create.stderr
        crawl_id = create.stdout.strip()
        scale = gossamer(
            "workers", "--redis", redis_url, "--crawl", crawl_id, "--scale", "1", "-o", str(out),
            "--log-format", "json",
        )  # fmt: skip
        assert scale.returncode == Exit.OK, scale.stderr
        (said,) = json_lines(scale.stderr)
        assert said["crawl_id"] == crawl_id and said["workers"] == 1
        (pid,) = (int(p) for p in re.findall(r"started 1 \(pids (\d+)\)", said["message"]))
        log = out / "logs" / f"worker-{pid}.log"
        deadline = time.monotonic() + 60
        try:
            # the worker leaves once the (small) crawl is finished; init reaps it
            while _alive(pid):
                assert time.monotonic() < deadline, log.read_text() if log.exists() else "no log"
                time.sleep(0.1)
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
    records = json_lines(log.read_text())
    assert any(r["message"].endswith("pages; the crawl is finished") for r in records), records
    join = next(r for r in records if "joins crawl" in r["message"])
    assert join["pid"] == pid and join["crawl_id"] == crawl_id and join["worker_id"] == "w1"
