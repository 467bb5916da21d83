"""SIGKILL the crawler at random moments, resume each time: nothing is lost, duplicates are
bounded by what was in flight, WARC files stay valid. SIGTERM it at any moment, from its
start-up on: it stops cleanly (exit 143, statistics, no lease, WARC files closed)."""

from __future__ import annotations

import json
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gossamer.frontier import SqliteFrontier
from gossamer.testweb import TruthRules, WebSpec, audit, compute_truth, read_logs, serve_in_thread

UA = "gossamer-killtest/0.1"


def crawl_cmd(out: Path, resolve: Path, seed: str | None) -> list[str]:
    base = [sys.executable, "-m", "gossamer", "crawl"]
    if seed is None:
        return [*base, "--resume", str(out), "-q"]
    return [
        *base, seed, "-o", str(out), "--scope", "all", "--resolve-file", str(resolve),
        "--allow-private", "--delay", "0", "--user-agent", UA, "--concurrency", "8", "-q",
    ]  # fmt: skip


def leased_now(out: Path) -> int:
    f = SqliteFrontier(out / "frontier.sqlite")
    try:
        return f.statistics().leased
    finally:
        f.close()


def started_by(proc: subprocess.Popen[bytes], path: Path, timeout: float = 60.0) -> None:
    """Wait until the crawler has created `path` (a cold start on a fresh machine, compiling
    and loading its modules, can take longer than the kill delay) or has exited."""
    deadline = time.monotonic() + timeout
    while not path.exists() and proc.poll() is None:
        assert time.monotonic() < deadline, f"the crawler did not create {path}"
        time.sleep(0.02)


@pytest.mark.slow
def test_sigkill_five_times_then_resume(tmp_path: Path) -> None:
    rng = random.Random(20261122)
    # big enough that five kills land before the end: the crawler does thousands of pages/s
    spec = WebSpec(seed=8, hosts=120, pages_mean=150, profile="clean")
    log = tmp_path / "web.log"
    out = tmp_path / "crawl"
    in_flight = []
    with serve_in_thread(spec, log_path=log) as web:
        resolve = web.write_resolve_file(tmp_path / "resolve.txt")
        seed = web.url(0, 0)
        for k in range(5):
            proc = subprocess.Popen(
                crawl_cmd(out, resolve, seed if k == 0 else None),
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            started_by(proc, out / "frontier.sqlite")
            time.sleep(rng.uniform(0.3, 1.3))
            if proc.poll() is not None:
                break  # finished before the kill: fine
            proc.send_signal(signal.SIGKILL)
            proc.wait(timeout=30)
            in_flight.append(leased_now(out))
        final = subprocess.run(
            crawl_cmd(out, resolve, None), capture_output=True, text=True, timeout=300, check=False
        )
        assert final.returncode == 0, final.stderr
        web.flush_log()
    assert len(in_flight) >= 3, "the crawl was too short to be killed"
    rules = TruthRules(seeds=(seed,), scope="all", user_agent=UA)
    truth = compute_truth(web.model, rules)
    report = audit(web.model, read_logs([log]).records, rules, truth=truth)
    assert report.coverage == 1.0, report.format_table()
    duplicates = round(report.overlap * len(truth.required))
    assert duplicates <= sum(in_flight), (duplicates, in_flight)
    assert report.politeness_violations == 0, report.format_table()
    stats = json.loads((out / "stats.json").read_text())
    assert stats["finished"]
    from warcio.archiveiterator import ArchiveIterator

    responses = 0
    for path in sorted((out / "warc").glob("*.warc*")):  # not index.cdxj and cdx/
        assert path.name.endswith(".warc.gz"), f"unrecovered file {path.name}"
        with path.open("rb") as f:
            for rec in ArchiveIterator(f):  # raises on a corrupt record
                # (a page fetched again after the kill may be a revisit of its first capture,
                # when that capture's claim was in the store: docs/crawler/outputs.md)
                responses += rec.rec_type in ("response", "revisit")
    assert responses >= len(truth.required)
    # the CDX index of the last run covers every run's WARC files, the recovered ones too
    index = (out / "warc" / "index.cdxj").read_text().splitlines()
    assert len(index) == responses


@pytest.mark.slow
@pytest.mark.parametrize("after", [0.0, 0.3, 1.0])
def test_sigterm_finishes_in_flight_work_and_flushes(tmp_path: Path, after: float) -> None:
    # `after` seconds once the frontier exists: 0.0 lands while the parent seeds and forks
    # (it was killed by the default action then), 0.3 while the workers start (one was
    # killed before installing its handler) or early in the crawl (a worker stopping first
    # made the parent send the other a second SIGTERM, which killed it while writing its
    # outputs: its WARC file was left `.open`), 1.0 in full flight
    spec = WebSpec(seed=9, hosts=100, pages_mean=150, profile="clean")  # outlasts 1 s
    log = tmp_path / "web.log"
    out = tmp_path / "crawl"
    with serve_in_thread(spec, log_path=log) as web:
        resolve = web.write_resolve_file(tmp_path / "resolve.txt")
        seed = web.url(0, 0)
        proc = subprocess.Popen(
            crawl_cmd(out, resolve, seed), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        started_by(proc, out / "frontier.sqlite")
        time.sleep(after)
        assert proc.poll() is None, "the crawl ended before the signal"
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 143
        stats = json.loads((out / "stats.json").read_text())
        assert stats["stopped_by"] == stats["ended"] == "SIGTERM" and not stats["finished"]
        # every worker handled the signal and wrote its statistics (none was killed by it)
        assert len(list(out.glob("stats-w*.json"))) == stats["workers"]
        assert leased_now(out) == 0  # every batch was completed or handed back
        assert not list((out / "warc").glob("*.open"))  # WARC files closed
        again = subprocess.run(
            crawl_cmd(out, resolve, None), capture_output=True, text=True, timeout=300, check=False
        )
        assert again.returncode == 0, again.stderr
        web.flush_log()
    rules = TruthRules(seeds=(seed,), scope="all", user_agent=UA)
    report = audit(web.model, read_logs([log]).records, rules)
    assert report.coverage == 1.0 and report.overlap == 0.0, report.format_table()


# A pool worker whose own process receives SIGTERM just before its WARC writer is closed,
# as a second SIGTERM (the parent's, a repeated Ctrl-C) can while it writes its outputs.
_SIGNAL_WHILE_CLOSING = """
import os, signal, sys
from gossamer.engine.recorder import Recorder
close = Recorder.close
def close_after_a_signal(self):
    os.kill(os.getpid(), signal.SIGTERM)
    close(self)
Recorder.close = close_after_a_signal
from gossamer.cli import main
sys.exit(main(sys.argv[1:]))
"""


def test_sigterm_while_a_worker_writes_its_outputs_changes_nothing(tmp_path: Path) -> None:
    # a worker kept its SIGTERM handler only until its crawl loop ended: a signal while it
    # closed its WARC file killed it (the file left `.open`, its statistics never written)
    spec = WebSpec(seed=3, hosts=6, pages_mean=10, profile="clean")
    out = tmp_path / "crawl"
    with serve_in_thread(spec) as web:
        resolve = web.write_resolve_file(tmp_path / "resolve.txt")
        args = crawl_cmd(out, resolve, web.url(0, 0))[3:]  # crawl SEED -o OUT …
        run = subprocess.run(
            [sys.executable, "-c", _SIGNAL_WHILE_CLOSING, *args, "--workers", "2"],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
    assert run.returncode == 0, run.stderr  # the crawl had ended: the late signal is moot
    stats = json.loads((out / "stats.json").read_text())
    assert stats["finished"] and stats["ended"] == "complete" and stats["pages"] > 0
    assert sorted(p.name for p in out.glob("stats-w*.json")) == ["stats-w0.json", "stats-w1.json"]
    assert list((out / "warc").glob("*.warc.gz"))
    assert not list((out / "warc").glob("*.open"))
