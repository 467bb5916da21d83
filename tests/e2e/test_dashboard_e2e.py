"""`gossamer dashboard` as a real process (uvicorn on a free loopback port) watching real
crawls: an embedded crawl of the simulated web and a cluster crawl on a real redis-server.
Its event stream is read as a browser's EventSource reads it; the stop button's POST is sent
as the page sends it. Also: how soon a change reaches an open stream (measured), the
heartbeat, a --token, and bad command lines."""

from __future__ import annotations

import contextlib
import json
import math
import os
import re
import signal
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx2
import pytest

from gossamer.testweb import WebSpec, serve_in_thread

_BIG = WebSpec(seed=9, hosts=100, pages_mean=150, profile="clean")  # outlasts every test
_CRAWL_FLAGS = ("--scope", "all", "--allow-private", "--delay", "0", "--concurrency", "4")


def gossamer(*args: str) -> list[str]:
    return [sys.executable, "-m", "gossamer", *args]


@contextlib.contextmanager
def dashboard(
    *args: str, env: dict[str, str] | None = None, cwd: Path | None = None
) -> Iterator[str]:
    """`gossamer dashboard ARGS --port 0`; its base URL (read from the line it prints). Its
    stderr is read to the end by a thread (a pipe nobody reads fills and blocks the writer:
    the dashboard's log lines would stall it), and its last lines are printed as it stops
    (pytest shows them with a failure)."""
    proc = subprocess.Popen(
        gossamer("dashboard", "--port", "0", *args), stderr=subprocess.PIPE, text=True,
        env=env, cwd=cwd,
    )  # fmt: skip
    assert proc.stderr is not None
    lines: list[str] = []
    found: list[str] = []
    started = threading.Event()

    def read(stream: Any) -> None:
        for line in stream:  # ends when the process does
            lines.append(line)
            m = re.search(r"dashboard: (http://\S+?)/(\?token=\S+)?$", line.strip())
            if m and not found:
                found.append(m.group(1))
                started.set()
        started.set()

    reader = threading.Thread(target=read, args=(proc.stderr,), daemon=True)
    reader.start()
    try:
        started.wait(timeout=60)
        if not found:
            raise AssertionError(f"the dashboard did not start: {''.join(lines)}")
        yield found[0]
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=15)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            reader.join(timeout=10)
            proc.stderr.close()
            print(f"the dashboard's stderr ({len(lines)} lines), its last ones:")
            print("".join(lines[-40:]))


class Events:
    """The /events stream, read as EventSource reads it: each status event with the
    monotonic time it arrived, heartbeat comments counted."""

    def __init__(self, base: str, headers: dict[str, str] | None = None) -> None:
        self._client = httpx2.Client(timeout=httpx2.Timeout(10.0))
        self._cm = self._client.stream("GET", f"{base}/events", headers=headers or {})
        response = self._cm.__enter__()
        assert response.status_code == 200, response.read()
        assert response.headers["content-type"].startswith("text/event-stream")
        self._lines = response.iter_lines()
        self.heartbeats = 0
        #: the last status event read (its arrival time, the status): the dashboard's state
        #: now, as it sends an event only when its state changes
        self.latest: tuple[float, dict[str, Any]] | None = None

    def next(self, deadline: float = math.inf) -> tuple[float, dict[str, Any]]:
        """The next status event; TimeoutError at a heartbeat after `deadline` (monotonic)."""
        for line in self._lines:
            if line.startswith(": heartbeat"):
                self.heartbeats += 1
                if time.monotonic() > deadline:
                    raise TimeoutError
            elif line.startswith("data: "):
                self.latest = (time.monotonic(), json.loads(line[6:]))
                return self.latest
        raise AssertionError("the event stream ended")

    def until(
        self, what: str, check: Callable[[dict[str, Any]], bool], timeout: float = 30
    ) -> tuple[float, dict[str, Any]]:
        """The first status that passes `check`: the last one read already (no event comes
        while nothing changes), or the next ones within `timeout` seconds."""
        if self.latest is not None and check(self.latest[1]):
            return self.latest
        deadline = time.monotonic() + timeout
        last: dict[str, Any] | None = None
        while time.monotonic() < deadline:
            try:  # (no status changes, no event: the heartbeats bound the wait)
                t, status = self.next(deadline)
            except TimeoutError:
                break
            if check(status):
                return t, status
            last = status
        raise AssertionError(f"no event with {what} within {timeout} s; last: {last}")

    def close(self) -> None:
        self._cm.__exit__(None, None, None)
        self._client.close()


@contextlib.contextmanager
def events(base: str, headers: dict[str, str] | None = None) -> Iterator[Events]:
    stream = Events(base, headers)
    try:
        yield stream
    finally:
        stream.close()


def stop_as_the_page_does(base: str) -> httpx2.Response:
    page = httpx2.get(f"{base}/", timeout=10)
    csrf = re.search(r'name="gossamer-csrf" content="([^"]+)"', page.text)
    assert csrf, page.text
    return httpx2.post(
        f"{base}/api/stop",
        headers={"Origin": base, "X-Gossamer-CSRF": csrf.group(1)},
        timeout=30,
    )


def finished_crawl_dir(tmp_path: Path) -> Path:
    out = tmp_path / "crawl"
    (out / "graph").mkdir(parents=True)
    (out / "crawl.json").write_text(json.dumps({"seeds": ["http://a.test/"]}))
    t = time.time()
    (out / "runs.jsonl").write_text(
        json.dumps({"event": "start", "run": 1, "time": t - 5, "workers": 1}) + "\n"
        + json.dumps({"event": "end", "run": 1, "time": t, "exit": 0, "stats": None}) + "\n"
    )  # fmt: skip
    return out


def _write_graph_stats(out: Path, nodes: int) -> None:
    tmp = out / "graph" / "stats.json.tmp"
    tmp.write_text(json.dumps({"nodes": nodes, "edges": 2 * nodes, "final": False}))
    tmp.replace(out / "graph" / "stats.json")  # as the live graph writes it: whole


def test_a_change_reaches_an_open_event_stream_within_a_second(tmp_path: Path) -> None:
    out = finished_crawl_dir(tmp_path)
    latencies = []
    with dashboard(str(out)) as base, events(base) as stream:
        _, first = stream.next()
        assert first["crawl"]["state"] == "ended" and first["graph"] is None
        for nodes in range(1, 6):
            t0 = time.monotonic()
            _write_graph_stats(out, nodes)
            t, _ = stream.until(f"{nodes} nodes", lambda s, n=nodes: (s["graph"] or {}).get(
                "nodes") == n)  # fmt: skip
            latencies.append(t - t0)
        # nothing changes now: the stream stays open with heartbeats, not repeated statuses
        t0 = time.monotonic()
        while stream.heartbeats == 0:
            for line in stream._lines:
                assert not line.startswith("data: "), "a status event without a change"
                if line.startswith(": heartbeat"):
                    stream.heartbeats += 1
                    break
        assert 4.0 <= time.monotonic() - t0 <= 8.0
    print(f"event latency (s): {', '.join(f'{x:.3f}' for x in latencies)}")
    assert statistics.median(latencies) < 1.0, latencies


def test_watch_and_stop_an_embedded_crawl(tmp_path: Path) -> None:
    out = tmp_path / "crawl"
    with serve_in_thread(_BIG) as web:
        resolve = web.write_resolve_file(tmp_path / "resolve.txt")
        with (tmp_path / "crawl.log").open("wb") as log:
            crawl = subprocess.Popen(
                gossamer("crawl", web.url(0, 0), "-o", str(out), "--resolve-file", str(resolve),
                         *_CRAWL_FLAGS, "-q"),
                stdout=log, stderr=subprocess.STDOUT,
            )  # fmt: skip
        try:
            deadline = time.monotonic() + 30
            while not (out / "crawl.json").is_file() and crawl.poll() is None:
                assert time.monotonic() < deadline, "the crawl did not start"
                time.sleep(0.05)
            with dashboard(str(out)) as base, events(base) as stream:
                _, s1 = stream.until("pages", lambda s: s["totals"]["pages"] > 0)
                assert s1["crawl"]["state"] == "running" and s1["crawl"]["pid"] == crawl.pid
                # one row per crawling process: the default, one per core (a pool of
                # forked workers w0, w1, … on 2 or more; the crawl's process alone on one)
                _, s1 = stream.until("every worker's beat", lambda s: len(s["workers"]) == (
                    os.cpu_count() or 1))  # fmt: skip
                if (os.cpu_count() or 1) > 1:
                    assert [w["id"] for w in s1["workers"]] == [
                        f"w{k}" for k in range(os.cpu_count() or 1)]  # fmt: skip
                    for w in s1["workers"]:
                        stat = Path(f"/proc/{w['pid']}/stat").read_text()
                        assert int(stat.rpartition(")")[2].split()[1]) == crawl.pid  # its ppid
                else:
                    assert [(w["id"], w["pid"]) for w in s1["workers"]] == [("main", crawl.pid)]
                _, s2 = stream.until(
                    "more pages", lambda s: s["totals"]["pages"] > s1["totals"]["pages"]
                )
                assert s2["frontier"]["queued"] > 0 and s2["totals"]["bytes"] > 0
                metrics = httpx2.get(f"{base}/metrics", timeout=10).text
                pages = re.search(r'^gossamer_pages_total\{crawl="crawl"\} (\S+)$', metrics, re.M)
                assert pages and float(pages.group(1)) >= s2["totals"]["pages"]
                r = stop_as_the_page_does(base)
                assert r.status_code == 200, r.text
                code = crawl.wait(timeout=30)
                assert code == 143, (tmp_path / "crawl.log").read_text()  # SIGTERM: resumable
                _, end = stream.until("the end", lambda s: s["crawl"]["state"] == "ended")
                assert end["crawl"]["end_reason"] == "SIGTERM"
                assert end["crawl"]["pid"] is None
        finally:
            if crawl.poll() is None:
                crawl.kill()
            crawl.wait()
    assert json.loads((out / "stats.json").read_text())["ended"] == "SIGTERM"


def test_watch_and_stop_a_cluster_crawl(tmp_path: Path, redis_url: str) -> None:
    out = tmp_path / "out"
    out.mkdir()
    with serve_in_thread(_BIG) as web:
        resolve = web.write_resolve_file(tmp_path / "resolve.txt")
        done = subprocess.run(
            gossamer("crawl", "--redis", redis_url, web.url(0, 0), "--workers", "0",
                     "--resolve-file", str(resolve), *_CRAWL_FLAGS),
            capture_output=True, text=True, timeout=60, check=False,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        crawl_id = done.stdout.strip()
        env = {**os.environ, "GOSSAMER_REDIS": redis_url}
        worker = gossamer("worker", "--crawl", crawl_id, "-o", str(out), "-q")
        quiet = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL}
        procs = [subprocess.Popen(worker, env=env, **quiet) for _ in range(2)]
        try:
            with (
                dashboard("--redis", redis_url, "--crawl", crawl_id) as base,
                events(base) as stream,
            ):
                _, s = stream.until(
                    "two workers crawling",
                    lambda s: sum(1 for w in s["workers"] if w["pages"] > 0) == 2,
                )
                assert s["crawl"]["id"] == crawl_id and s["crawl"]["state"] == "running"
                assert sorted(w["pid"] for w in s["workers"]) == sorted(p.pid for p in procs)
                assert {w["id"] for w in s["workers"]} == {"w1", "w2"}
                assert s["totals"]["pages"] == sum(w["pages"] for w in s["workers"])
                assert s["frontier"]["queued"] > 0
                t0 = time.monotonic()
                r = stop_as_the_page_does(base)
                assert r.status_code == 200, r.text
                t, _ = stream.until(
                    "stopping", lambda s: s["crawl"]["state"] in ("stopping", "stopped")
                )
                print(f"stop to event: {t - t0:.3f} s")
                assert t - t0 < 1.0 + 1.0  # the POST's own time, then one push interval
                assert [p.wait(timeout=30) for p in procs] == [0, 0]
                _, end = stream.until("stopped", lambda s: s["crawl"]["state"] == "stopped")
                assert {w["state"] for w in end["workers"]} == {"stopped"}
        finally:
            for p in procs:
                if p.poll() is None:
                    p.kill()
                p.wait()


def test_a_token_guards_the_real_server_and_its_event_stream(tmp_path: Path) -> None:
    out = finished_crawl_dir(tmp_path)
    with dashboard(str(out), "--token", "t0ken") as base:
        assert httpx2.get(f"{base}/api/status", timeout=10).status_code == 401
        with httpx2.stream("GET", f"{base}/events", timeout=10) as r:
            assert r.status_code == 401
        ok = httpx2.get(f"{base}/api/status", headers={"X-Gossamer-Token": "t0ken"}, timeout=10)
        assert ok.status_code == 200
        with events(base, {"X-Gossamer-Token": "t0ken"}) as stream:
            assert stream.next()[1]["crawl"]["state"] == "ended"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ((), "give a crawl directory DIR or --redis URL"),
        (("OTHER",), "not a crawl directory"),  # a directory of other files
        (("DIR/crawl.json",), "is not a directory"),
        (("DIR", "--redis", "redis://127.0.0.1:1/0"), "(one of them)"),
        (("DIR", "--crawl", "x"), "--crawl ID is for a cluster crawl"),
        (("DIR", "--token", ""), "--token must not be empty"),
    ],
)
def test_bad_command_lines_are_one_error_line(
    tmp_path: Path, args: tuple[str, ...], message: str
) -> None:
    out = finished_crawl_dir(tmp_path)
    # (a directory that does not exist yet is a crawl to start:
    # tests/dashboard/test_dashboard_control.py)
    named = {"DIR": out, "OTHER": tmp_path, "DIR/crawl.json": out / "crawl.json"}
    argv = [str(named.get(a, a)) for a in args]
    env = {k: v for k, v in os.environ.items() if k != "GOSSAMER_REDIS"}
    done = subprocess.run(
        gossamer("dashboard", *argv), capture_output=True, text=True, timeout=30, check=False,
        env=env,
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert message in done.stderr and len(done.stderr.strip().splitlines()) == 1, done.stderr


def test_an_unreachable_redis_is_one_error_line_and_exit_69(tmp_path: Path) -> None:
    env = {**os.environ, "GOSSAMER_REDIS": "redis://:hunter2@127.0.0.1:1/0"}  # nothing listens
    done = subprocess.run(
        gossamer("dashboard"), capture_output=True, text=True, timeout=30, check=False, env=env
    )
    assert done.returncode == 69, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and "hunter2" not in done.stderr


def test_a_busy_port_is_one_error_line(tmp_path: Path) -> None:
    out = finished_crawl_dir(tmp_path)
    with dashboard(str(out)) as base:
        port = base.rsplit(":", 1)[1]
        done = subprocess.run(
            gossamer("dashboard", str(out), "--port", port),
            capture_output=True, text=True, timeout=30, check=False,
        )  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert "cannot listen on 127.0.0.1:" in done.stderr
