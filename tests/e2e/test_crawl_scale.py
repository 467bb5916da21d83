"""An embedded pool scaled while it runs, from the command line (`gossamer workers --scale N
DIR`): a real `gossamer crawl --workers 2` of the simulated web grown to 3 and shrunk to 1,
then audited (every page of the truth, none fetched twice, politeness kept); its statistics
count every worker that ran, its heartbeats follow the pool, and a resume after scaling goes
on. The dashboard's /api/scale takes the same code path
(tests/e2e/test_dashboard_control_e2e.py)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from _crawl_helpers import USER_AGENT

from gossamer.engine.heartbeat import read_beats
from gossamer.testweb import TruthRules, WebSpec, audit, compute_truth, read_logs, serve_in_thread

#: the delay between two requests to a host: the crawl lasts long enough to be scaled twice
DELAY = 0.05


def gossamer(*args: str) -> list[str]:
    return [sys.executable, "-m", "gossamer", *args]


def crawl_argv(seed: str, out: Path, resolve: Path, *extra: str) -> list[str]:
    return gossamer(
        "crawl", seed, "-o", str(out), "--scope", "all", "--resolve-file", str(resolve),
        "--allow-private", "--delay", str(DELAY), "--user-agent", USER_AGENT,
        "--concurrency", "2", "-q", *extra,
    )  # fmt: skip


def wait_for(what: str, check: Callable[[], Any], proc: subprocess.Popen[bytes],
             timeout: float = 60) -> Any:  # fmt: skip
    """Poll `check` until it is truthy (its value); fail when the crawl exits first."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        assert proc.poll() is None, f"the crawl exited ({proc.returncode}) before {what}"
        assert time.monotonic() < deadline, f"waited {timeout} s for {what}"
        time.sleep(0.05)


def running_ids(out: Path) -> set[str]:
    return {b["id"] for b in read_beats(out) if b["state"] == "running"}


def scale(out: Path, n: int) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        gossamer("workers", "--scale", str(n), str(out)),
        capture_output=True, text=True, timeout=30, check=False,
    )  # fmt: skip


@pytest.mark.slow
def test_a_pool_scaled_2_3_1_crawls_everything_once_politely(tmp_path: Path) -> None:
    # 365 pages, 91 on the largest host: at 2 hosts at a time per worker the pool is scaled
    # (about 2 s in) long before its end, and w0 alone finishes the rest (the old web of 780
    # pages only made that last stretch 12 s longer)
    spec = WebSpec(seed=5, hosts=40, pages_mean=12)
    log = tmp_path / "web.log"
    out = tmp_path / "crawl"
    with serve_in_thread(spec, log_path=log) as web:
        resolve = web.write_resolve_file(tmp_path / "resolve.txt")
        seed = web.url(0, 0)
        # a lease lasts 10 min: a retired worker's hosts that waited for their lease to end
        # would hold the crawl past the test's bound
        argv = crawl_argv(seed, out, resolve, "--workers", "2", "--lease-ttl", "600")
        with (tmp_path / "crawl.err").open("wb") as err:
            crawl = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=err)
        try:
            wait_for("w0 and w1 running", lambda: running_ids(out) == {"w0", "w1"}, crawl)
            r = scale(out, 3)
            assert r.returncode == 0, r.stderr
            assert "for 3 workers (it had 2)" in r.stderr
            wait_for("w2 running", lambda: running_ids(out) == {"w0", "w1", "w2"}, crawl)
            w2_pid = next(b["pid"] for b in read_beats(out) if b["id"] == "w2")
            wait_for("w2 crawling", lambda: any(
                b["id"] == "w2" and b["pages"] > 0 for b in read_beats(out)), crawl)  # fmt: skip
            r = scale(out, 1)
            assert r.returncode == 0, r.stderr
            # the retired workers finish their batches and leave; their beats go with them
            wait_for("w1 and w2 gone", lambda: {b["id"] for b in read_beats(out)} == {"w0"}, crawl)
            # w0 runs on, or has just ended the crawl (a small web: it may finish first)
            assert [b["state"] in ("running", "exited") for b in read_beats(out)] == [True]
            with pytest.raises(ProcessLookupError):
                import os

                os.kill(w2_pid, 0)
            assert crawl.wait(timeout=120) == 0, (tmp_path / "crawl.err").read_text()
        finally:
            if crawl.poll() is None:
                crawl.kill()
                crawl.wait()
        web.flush_log()
    rules = TruthRules(seeds=(seed,), scope="all", user_agent=USER_AGENT)
    truth = compute_truth(web.model, rules)
    # the server's timestamps, taken in this process's thread, drift by up to 6 ms from the
    # crawler's clock (4 of ~800 gaps measured 44-45 ms in 4 runs of a larger web, all after
    # the pool had shrunk to its first worker: not a scaling effect): 10 ms of tolerance, not 5
    report = audit(web.model, read_logs([log]).records, rules, truth=truth, min_delay=DELAY,
                   tolerance_s=0.01)  # fmt: skip
    assert report.coverage == 1.0, report.format_table()
    assert report.overlap == 0.0, report.format_table()
    assert report.politeness_violations == 0, report.format_table()
    stats = json.loads((out / "stats.json").read_text())
    assert stats["ended"] == "complete", stats
    assert stats["workers"] == 3 and stats["workers_retired"] == ["w1", "w2"]
    assert len(stats["pages_per_worker"]) == 3 and all(n > 0 for n in stats["pages_per_worker"])
    assert stats["pages"] == len(truth.required)
    assert not (out / "control.json").exists()  # the pool is gone: nothing to scale
    assert [b["state"] for b in read_beats(out)] == ["exited"]


@pytest.mark.slow
def test_scaling_refusals_and_a_resume_after_scaling(tmp_path: Path) -> None:
    spec = WebSpec(seed=9, hosts=100, pages_mean=150, profile="clean")  # outlasts the test
    out = tmp_path / "crawl"
    with serve_in_thread(spec) as web:
        resolve = web.write_resolve_file(tmp_path / "resolve.txt")
        seed = web.url(0, 0)
        r = scale(out, 2)
        assert (r.returncode, r.stderr.strip()) == (
            2, f"gossamer: error: {out} is not a crawl directory (no crawl.json)"
        )  # fmt: skip
        one = subprocess.Popen(crawl_argv(seed, out, resolve, "--workers", "1"),
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
        try:
            wait_for("the one process beating", lambda: running_ids(out) == {"main"}, one)
            r = scale(out, 2)
            assert r.returncode == 2 and "runs in one process (--workers 1)" in r.stderr
            one.terminate()
            assert one.wait(timeout=30) == 143
        finally:
            if one.poll() is None:
                one.kill()
                one.wait()
        r = scale(out, 2)
        assert r.returncode == 2 and f"no crawl is running in {out}" in r.stderr
        pool = subprocess.Popen(gossamer("crawl", "--resume", str(out), "--workers", "2", "-q"),
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
        try:
            # the one process's beat of the first run is gone: this run's workers wrote theirs
            wait_for("w0 and w1 running", lambda: running_ids(out) == {"w0", "w1"}, pool)
            assert {b["id"] for b in read_beats(out)} == {"w0", "w1"}
            for bad in ("0", "65"):
                r = scale(out, int(bad))
                assert r.returncode == 2 and "between 1 and 64" in r.stderr, r.stderr
            assert scale(out, 3).returncode == 0
            wait_for("w2 crawling", lambda: any(
                b["id"] == "w2" and b["pages"] > 0 for b in read_beats(out)), pool)  # fmt: skip
            pool.terminate()  # a stop while scaled: the crawl stops, as without scaling
            assert pool.wait(timeout=60) == 143
        finally:
            if pool.poll() is None:
                pool.kill()
                pool.wait()
        stats = json.loads((out / "stats.json").read_text())
        assert stats["ended"] == "SIGTERM" and stats["workers"] == 3
        assert "workers_retired" not in stats
        # and a resume of the crawl scaled to 3 goes on (with the stored --workers 2)
        launched = time.time()
        again = subprocess.Popen(gossamer("crawl", "--resume", str(out), "-q"),
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
        try:
            before = stats["frontier"]["done"]
            # (this run's beats: the last run's are cleared as it starts)
            wait_for("more pages", lambda: any(
                b["pages"] > 0 and b["started"] > launched for b in read_beats(out)
            ), again)  # fmt: skip
            again.terminate()
            assert again.wait(timeout=60) == 143
        finally:
            if again.poll() is None:
                again.kill()
                again.wait()
        after = json.loads((out / "stats.json").read_text())
        assert after["workers"] == 2 and after["frontier"]["done"] > before


def test_workers_without_a_directory_or_redis_is_one_error_line(tmp_path: Path) -> None:
    import os

    env = {k: v for k, v in os.environ.items() if k != "GOSSAMER_REDIS"}
    for args, message in [
        ((), "give a crawl directory DIR or --redis URL (or $GOSSAMER_REDIS)"),
        ((str(tmp_path), "--crawl", "x"), "--crawl ID is for a cluster crawl (--redis URL)"),
    ]:
        done = subprocess.run(gossamer("workers", "--scale", "2", *args), capture_output=True,
                              text=True, timeout=30, check=False, env=env)  # fmt: skip
        assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
        assert message in done.stderr
