"""`gossamer crawl --redis URL --workers N`, the command that creates a cluster crawl and waits
for its local workers: its exit status is the crawl's outcome's (a worker killed on the way
does not fail a crawl the others finished), and its workers' lines stay out of its live
display. Real redis-server, real processes, the simulated web on loopback."""

from __future__ import annotations

import os
import pty
import re
import select
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from test_cluster import UA, audit_web, gossamer, status, wait_for

from gossamer.testweb import WebSpec, serve_in_thread

_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b[()][0-9A-B]|\r")


def crawl_args(redis_url: str, seed: str, resolve: Path, out: Path, *extra: str) -> list[str]:
    return gossamer(
        "crawl", "--redis", redis_url, seed, "-o", str(out), "--scope", "all",
        "--resolve-file", str(resolve), "--allow-private", "--user-agent", UA, *extra,
    )  # fmt: skip


def crawl_id_of(redis_url: str) -> str:
    """The id of the only crawl in Redis (once `crawl --redis` has created it)."""
    import redis

    from gossamer.cluster.crawls import list_crawls

    client = redis.Redis.from_url(redis_url)
    try:
        crawls = list_crawls(client)
    finally:
        client.close()
    return crawls[0].id if len(crawls) == 1 else ""


@pytest.mark.slow
def test_a_crawl_finished_despite_a_killed_worker_exits_0(tmp_path: Path, redis_url: str) -> None:
    """Four sites, `crawl --redis … --workers 2`, one worker SIGKILLed once it has fetched
    pages: the other takes its hosts over and finishes the crawl, and the command exits 0
    (before: 137, the killed worker's status) with one line naming the dead worker and
    saying that its hosts were taken over."""
    spec = WebSpec(seed=21, hosts=4, pages_mean=60, pages_alpha=30, ip_share=0)
    log = tmp_path / "web.log"
    out = tmp_path / "out"
    with serve_in_thread(spec, log_path=log) as web:
        resolve = web.write_resolve_file(tmp_path / "resolve.txt")
        seed = web.url(0, 0)
        args = crawl_args(redis_url, seed, resolve, out, "--workers", "2", "--delay", "0.1",
                          "--heartbeat-ttl", "3")  # fmt: skip
        with subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE) as proc:
            try:
                wait_for("the crawl", lambda: bool(crawl_id_of(redis_url)), 30)
                crawl_id = crawl_id_of(redis_url)

                def workers() -> list[dict[str, Any]]:
                    return list(status(redis_url, crawl_id)["workers"])

                wait_for(
                    "two workers with pages",
                    lambda: sum(1 for w in workers() if w["pages"] >= 10) == 2,
                    30,
                    show=workers,
                )
                victim = max(workers(), key=lambda w: len(w["hosts"]))
                os.kill(victim["pid"], signal.SIGKILL)
                left = status(redis_url, crawl_id)["frontier"]["queued"]
                stdout, stderr = proc.communicate(timeout=120)
            finally:
                if proc.poll() is None:
                    proc.kill()
        err = stderr.decode()
        truth, report = audit_web(web, log, seed)
    assert left > 20, "the crawl was nearly over at the kill: the test shows little"
    assert proc.returncode == 0, err
    assert stdout.decode().strip() == crawl_id
    said = (
        f"crawl {crawl_id} finished; worker {victim['id']} (pid {victim['pid']}) was killed "
        "by SIGKILL; its hosts were taken over by the other workers"
    )
    assert said in err, err
    assert report.coverage == 1.0, report.format_table()
    assert report.politeness_violations == 0, report.format_table()
    st = status(redis_url, crawl_id)
    assert st["crawl"]["state"] == "finished"
    assert st["frontier"]["done"] == len(truth.required)


@pytest.mark.slow
def test_the_workers_lines_stay_out_of_the_live_display(tmp_path: Path, redis_url: str) -> None:
    """`crawl --redis … --workers 2` on a terminal (a pty): the screen holds the display's
    frames and the command's own lines — one when the workers start (where their outputs
    and logs are), one for each worker as it ends (its own end line: pages and why) — and
    none of the workers' raw lines (before: each worker's `joins crawl …` and end lines
    were written into the display as they came). Each worker's lines are in its log,
    `DIR/logs/worker-<pid>.log`."""
    spec = WebSpec(seed=5, hosts=20, pages_mean=15)
    log = tmp_path / "web.log"
    out = tmp_path / "out"
    with serve_in_thread(spec, log_path=log) as web:
        resolve = web.write_resolve_file(tmp_path / "resolve.txt")
        seed = web.url(0, 0)
        args = crawl_args(redis_url, seed, resolve, out, "--workers", "2", "--delay", "0.05")
        master, slave = pty.openpty()
        env = {**os.environ, "COLUMNS": "200", "LINES": "40", "TERM": "xterm-256color"}
        proc = subprocess.Popen(
            args, stdin=slave, stdout=slave, stderr=slave, env=env, close_fds=True
        )  # fmt: skip
        os.close(slave)
        screen = b""
        deadline = time.monotonic() + 120
        try:
            while time.monotonic() < deadline:
                ready, _, _ = select.select([master], [], [], 0.2)
                if not ready:
                    continue
                try:
                    data = os.read(master, 65536)
                except OSError:  # EIO: the command closed its side
                    break
                if not data:
                    break
                screen += data
            code = proc.wait(timeout=max(1.0, deadline - time.monotonic()))
        finally:
            os.close(master)
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        _, report = audit_web(web, log, seed)
    text = _ANSI.sub("", screen.decode("utf-8", "replace"))
    assert code == 0, text
    assert report.coverage == 1.0, report.format_table()
    crawl_id = crawl_id_of(redis_url)
    workers = status(redis_url, crawl_id)["workers"]
    assert len(workers) == 2
    assert "joins crawl" not in text, text  # a worker's own line, raw
    lines = [line.strip() for line in text.splitlines() if "gossamer: " in line]
    assert sum("2 local workers" in line for line in lines) == 1, lines
    for w in workers:
        own = (out / "logs" / f"worker-{w['pid']}.log").read_text()
        assert f"worker {w['id']} ({os.uname().nodename}, pid {w['pid']}) joins crawl" in own
        end = f"worker {w['id']}: {w['pages']} pages; the crawl is finished"
        assert end in own, own
        assert sum(f"{end} (pid {w['pid']})" in line for line in lines) == 1, lines
    # nothing on the screen but the command's lines and the display's
    frame = re.compile(r"(crawling|stopping)\s|queue [\d,]+|^\S+$|^$")
    other = [line for line in text.splitlines() if "gossamer: " not in line]
    assert all(frame.search(line.strip()) for line in other), other
