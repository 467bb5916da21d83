"""A paused Redis (SIGSTOP: connections open, no reply) at either end of a worker's life:
its start-up's Redis calls wait on its I/O thread or are interrupted, so a SIGTERM stops a
worker still starting at once, with its exit status; and a crawl whose Redis pauses as it
ends (leaving, the final statistics, closing the frontier) closes cleanly once Redis
answers again (docs/cluster.md, "Redis off the event loop")."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from test_cluster import audit_web, create_crawl, gossamer, status, wait_for

from gossamer.testweb import WebSpec, serve_in_thread
from gossamer.testweb.redisd import RedisServer

PAUSING_WORKER = Path(__file__).with_name("_pausing_worker.py")
PROMPT_S = 3.0  # a stop while starting ends the worker within this (it took ~0.1 s)


def _no_resolve(tmp_path: Path) -> Path:
    path = tmp_path / "resolve.txt"
    path.write_text("")
    return path


def _stopped(pid: int) -> bool:
    """Whether process `pid` is stopped (SIGSTOP): state T in /proc/PID/stat."""
    stat = Path(f"/proc/{pid}/stat").read_text()
    return stat[stat.rindex(")") + 2] in "Tt"


@contextmanager
def _server(tmp_path: Path) -> Iterator[RedisServer]:
    server = RedisServer(tmp_path / "redis")
    try:
        yield server
    finally:
        if _stopped(server.pid):
            os.kill(server.pid, signal.SIGCONT)
        server.stop()


@contextmanager
def _worker(cmd: list[str], log: Path, env: dict[str, str]) -> Iterator[subprocess.Popen[bytes]]:
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("wb") as fh:
        proc = subprocess.Popen(cmd, stdout=fh, stderr=subprocess.STDOUT, env=env)
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def _stops_promptly(proc: subprocess.Popen[bytes], log: Path) -> None:
    proc.send_signal(signal.SIGTERM)
    sent = time.monotonic()
    try:
        code = proc.wait(timeout=PROMPT_S * 3)
    except subprocess.TimeoutExpired:
        pytest.fail(f"the worker did not stop in {PROMPT_S * 3} s:\n{log.read_text()}")
    took = time.monotonic() - sent
    text = log.read_text(errors="replace")
    assert code == 143, (code, text)  # its exit status, not killed by the signal (-15)
    assert took < PROMPT_S, (took, text)
    assert "stopped by SIGTERM while starting" in text, text
    assert "Traceback" not in text, text


@pytest.mark.slow
def test_a_worker_connecting_to_a_paused_redis_stops_at_once_on_sigterm(
    tmp_path: Path,
) -> None:
    with _server(tmp_path) as server:
        crawl_id = create_crawl(server.url, "http://a.example/", _no_resolve(tmp_path))
        os.kill(server.pid, signal.SIGSTOP)
        out, log = tmp_path / "out", tmp_path / "worker.log"
        cmd = gossamer(
            "worker", "--redis", server.url, "--crawl", crawl_id, "-o", str(out), "-q"
        )
        with _worker(cmd, log, dict(os.environ)) as proc:
            # connecting: the TCP connection is accepted by the kernel, the first command
            # (INFO) waits for a reply that does not come
            wait_for("the worker connected", lambda: _connected(proc.pid, server.port), 30)
            _stops_promptly(proc, log)


def _connected(pid: int, port: int) -> bool:
    """Whether process `pid` has a TCP connection established to 127.0.0.1:`port`."""
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    for line in Path(f"/proc/{pid}/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        remote, state, inode = fields[2], fields[3], fields[9]
        if state == "01" and int(remote.split(":")[1], 16) == port and inode in inodes:
            return True
    return False


@pytest.mark.slow
def test_a_worker_joining_while_redis_pauses_stops_at_once_on_sigterm(tmp_path: Path) -> None:
    with _server(tmp_path) as server:
        crawl_id = create_crawl(server.url, "http://a.example/", _no_resolve(tmp_path))
        out, log = tmp_path / "out", tmp_path / "worker.log"
        env = {
            **os.environ,
            "GOSSAMER_TEST_REDIS_PID": str(server.pid),
            "GOSSAMER_TEST_PAUSE_AT": "join",
        }
        cmd = [sys.executable, str(PAUSING_WORKER), "--redis", server.url, "--crawl", crawl_id,
               "-o", str(out), "-q"]  # fmt: skip
        with _worker(cmd, log, env) as proc:
            # paused once the worker has its id; it writes worker.json, then its loop starts
            # and its first beat waits (on its I/O thread)
            wait_for("Redis paused by the worker", lambda: _stopped(server.pid), 30)
            wait_for("the worker's worker.json", lambda: (out / "w1" / "worker.json").exists(), 30)
            wait_for("the worker's loop waiting", lambda: _waiting_in_loop(proc.pid), 30)
            _stops_promptly(proc, log)


def _waiting_in_loop(pid: int) -> bool:
    """Whether process `pid` has its I/O thread (a second thread) and its main thread waits
    in epoll (its event loop)."""
    threads = list(Path(f"/proc/{pid}/task").iterdir())
    if len(threads) < 2:
        return False
    syscall = Path(f"/proc/{pid}/task/{pid}/syscall").read_text().split()
    return bool(syscall) and syscall[0] in ("232", "281", "441")  # epoll_wait/_pwait/_pwait2


@pytest.mark.slow
def test_a_crawl_whose_redis_pauses_as_it_ends_closes_once_resumed(tmp_path: Path) -> None:
    spec = WebSpec(seed=5, hosts=8, pages_mean=10)
    web_log = tmp_path / "web.log"
    with _server(tmp_path) as server, serve_in_thread(spec, log_path=web_log) as web:
        resolve = web.write_resolve_file(tmp_path / "resolve.txt")
        seed = web.url(0, 0)
        crawl_id = create_crawl(server.url, seed, resolve)
        out, log = tmp_path / "out", tmp_path / "worker.log"
        env = {
            **os.environ,
            "GOSSAMER_TEST_REDIS_PID": str(server.pid),
            "GOSSAMER_TEST_PAUSE_AT": "leave",
        }
        cmd = [sys.executable, str(PAUSING_WORKER), "--redis", server.url, "--crawl", crawl_id,
               "-o", str(out), "-q"]  # fmt: skip
        with _worker(cmd, log, env) as proc:
            wait_for("Redis paused as the crawl ends", lambda: _stopped(server.pid), 60)
            paused = time.monotonic()
            while time.monotonic() - paused < 3.0:  # the pause: 3 s (under 2 TTLs)
                assert proc.poll() is None, log.read_text()
                time.sleep(0.1)
            os.kill(server.pid, signal.SIGCONT)
            code = proc.wait(timeout=60)
        text = log.read_text(errors="replace")
        assert code == 0, text
        assert "Traceback" not in text, text
        stats = json.loads((out / "w1" / "stats.json").read_text())
        assert stats["finished"] and stats["ended"] == "complete", stats
        after = status(server.url, crawl_id)
        assert after["crawl"]["state"] == "finished", after
        assert [w["state"] for w in after["workers"]] == ["stopped"], after
        _truth, report = audit_web(web, web_log, seed)
        assert report.coverage == 1.0, report.format_table()
