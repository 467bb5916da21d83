"""No password on the command line of any process gossamer starts for a cluster crawl, by
every path that starts one (all through runner/spawn.py), against a real redis-server that
asks for a password: `crawl --redis --workers N --live-graph` (its attached workers and its
graph consumer: cluster/control.py), `spawn_detached` (`--detach`, `workers --scale`), and
the experiments' crawls (experiments/cluster_run.py). Each child's /proc/PID/cmdline is read
while it runs; the crawl's success shows the password reached it by its environment. (The
dashboard's start: tests/dashboard/test_dashboard_control.py.)"""

from __future__ import annotations

import contextlib
import functools
import os
import re
import signal
import subprocess
import time
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from _sshd import descendants
from test_cluster import UA, gossamer, wait_for

from gossamer.testweb import WebSpec, serve_in_thread
from gossamer.testweb.redisd import RedisServer


def secret_forms(password: str) -> list[bytes]:
    """The password as given and as written in a URL (quoted)."""
    return sorted({password.encode(), quote(password, safe="").encode()})


def cmdline(pid: int) -> bytes:
    """The process's command line, NUL-separated ("" once it has exited)."""
    try:
        return (Path("/proc") / str(pid) / "cmdline").read_bytes()
    except OSError:
        return b""


def environ(pid: int) -> dict[bytes, bytes]:
    try:
        raw = (Path("/proc") / str(pid) / "environ").read_bytes()
    except OSError:
        return {}
    return dict(v.split(b"=", 1) for v in raw.split(b"\0") if b"=" in v)


def assert_no_password(password: str, lines: dict[int, bytes]) -> None:
    assert lines, "no child seen"
    for pid, line in lines.items():
        for form in secret_forms(password):
            assert form not in line, f"pid {pid}'s command line shows the password: {line!r}"


@pytest.mark.slow
def test_attached_workers_and_the_graph_consumer(
    tmp_path: Path, redis_password_server: RedisServer, redis_password_url: str
) -> None:
    """`crawl --redis URL --workers 2 --live-graph`: two `gossamer worker` children and a
    `gossamer graph follow`, none with the password in its command line; they crawl."""
    password = redis_password_server.password
    assert password is not None
    spec = WebSpec(seed=5, hosts=30, pages_mean=10)
    out = tmp_path / "out"
    seen: dict[int, bytes] = {}
    with serve_in_thread(spec) as web:
        resolve = web.write_resolve_file(tmp_path / "resolve.txt")
        crawl = subprocess.Popen(
            gossamer("crawl", "--redis", redis_password_url, web.url(0, 0), "--workers", "2",
                     "--live-graph", "-o", str(out), "--scope", "all", "--resolve-file",
                     str(resolve), "--allow-private", "--delay", "0.05", "--user-agent", UA,
                     "-q"),
            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        )  # fmt: skip
        try:
            while crawl.poll() is None:
                for pid in descendants(crawl.pid):
                    if line := cmdline(pid):
                        # the latest line: a child caught between its fork and its exec shows
                        # its parent's (on a loaded machine, often)
                        seen[pid] = line
                time.sleep(0.02)
            stdout, stderr = crawl.communicate(timeout=60)
        finally:
            if crawl.poll() is None:
                crawl.kill()
                crawl.wait()
    assert crawl.returncode == 0, stderr.decode()
    workers = [line for line in seen.values() if b"\0worker\0" in line]
    follower = [line for line in seen.values() if b"\0graph\0follow\0" in line]
    assert len(workers) == 2 and len(follower) == 1, seen
    assert_no_password(password, seen)
    assert len(list(out.glob("w*/stats.json"))) == 2 and stdout.strip()


@pytest.mark.slow
def test_detached_workers(
    tmp_path: Path, redis_password_server: RedisServer, redis_password_url: str
) -> None:
    """`spawn_detached` (the start of `crawl --redis --detach` and `workers --scale`): the
    worker's command line holds no password, its environment holds the URL, and it joins."""
    from gossamer.cluster.connect import connect_redis
    from gossamer.cluster.control import spawn_detached

    password = redis_password_server.password
    assert password is not None
    spec = WebSpec(seed=9, hosts=60, pages_mean=100, profile="clean")  # outlasts the test
    out = tmp_path / "out"
    pids: list[int] = []
    with serve_in_thread(spec) as web:
        resolve = web.write_resolve_file(tmp_path / "resolve.txt")
        done = subprocess.run(
            gossamer("crawl", "--redis", redis_password_url, web.url(0, 0), "--workers", "0",
                     "--scope", "all", "--resolve-file", str(resolve), "--allow-private",
                     "--delay", "0.2", "--user-agent", UA),
            capture_output=True, text=True, timeout=60, check=False,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        crawl_id = done.stdout.strip()
        client = connect_redis(redis_password_url)
        try:
            pids = spawn_detached(client, redis_password_url, crawl_id, out, 1)
            line = cmdline(pids[0])
            env = environ(pids[0])
            wait_for("the worker to join", lambda: (out / "w1" / "worker.json").exists(), 30)
            stop = subprocess.run(
                gossamer("stop", "--redis", redis_password_url, "--crawl", crawl_id, "--wait",
                         "60"),
                capture_output=True, text=True, timeout=90, check=False,
            )  # fmt: skip
            assert stop.returncode == 0, stop.stderr
        finally:
            client.close()
            for pid in pids:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
    assert b"\0worker\0" in line
    assert env[b"GOSSAMER_REDIS"] == redis_password_url.encode()
    assert_no_password(password, {pids[0]: line})


def test_the_experiments_workers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`experiments.cluster_run.run_cluster_crawl` on a Redis with a password (its own
    server, given one here): its `gossamer worker` processes' command lines hold no
    password, and the crawl covers the web."""
    from gossamer.experiments import cluster_run
    from gossamer.testweb import redisd

    password = "exp/pw#" + os.urandom(4).hex()
    monkeypatch.setattr(
        redisd, "RedisServer", functools.partial(RedisServer, password=password)
    )  # the harness starts `RedisServer(DIR, aof=False)`: one that asks for this password
    seen: dict[int, bytes] = {}
    envs: dict[int, dict[bytes, bytes]] = {}
    wait = cluster_run._wait

    def watching(spec: Any, procs: list[subprocess.Popen[bytes]], *args: Any) -> Any:
        for p in procs:  # started (exec'd), not yet waited for
            seen[p.pid], envs[p.pid] = cmdline(p.pid), environ(p.pid)
        return wait(spec, procs, *args)

    monkeypatch.setattr(cluster_run, "_wait", watching)
    spec = cluster_run.ClusterCrawlSpec(
        web=WebSpec(seed=2, hosts=6, pages_mean=6, profile="clean"), workers=2, timeout=120
    )
    result = cluster_run.run_cluster_crawl(spec, keep=tmp_path / "run")
    assert len(seen) == 2 and all(b"\0worker\0" in line for line in seen.values()), seen
    assert_no_password(password, seen)
    assert all(re.search(rb"redis://:[^@]+@", env[b"GOSSAMER_REDIS"]) for env in envs.values())
    assert result.report.coverage == 1.0, result.report.format_table()
