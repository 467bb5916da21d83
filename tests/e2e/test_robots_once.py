"""robots.txt once per host per crawl (issue 15), counted in the simulated web's request log:
`gossamer demo` (a pool of two worker processes), an embedded crawl killed with SIGKILL and
resumed, and a cluster crawl of two `gossamer worker` processes on a real redis-server.

Each counts the requests for every robots URL — `/robots.txt` and the redirect hops of a
moved one, `/robots-moved/<k>.txt` — and wants each exactly once. Before the shared robots
store, every worker fetched the robots.txt of each host it leased, and a resumed crawl
fetched it again: `gossamer demo` made 438 requests for its 241 robots URLs."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest
from test_cluster import audit_web, create_crawl, logs, status, workers

from gossamer.testweb import TruthRules, WebSpec, audit, compute_truth, read_logs, serve_in_thread
from gossamer.testweb.cli_demo import DEMO_OVERRIDES

UA = "gossamer-robots-once/0.1"


def robots_requests(*logs: Path) -> Counter[tuple[str, str]]:
    """Requests per robots URL (host, target) in simulated-web request logs."""
    return Counter(
        (r.host, r.target)
        for r in read_logs(list(logs)).records
        if r.target == "/robots.txt" or r.target.startswith("/robots-moved/")
    )


def twice(counts: Counter[tuple[str, str]]) -> dict[str, int]:
    return {f"{h}{t}": n for (h, t), n in sorted(counts.items()) if n > 1}


@pytest.mark.slow
def test_demo_with_two_workers_fetches_each_robots_url_once(tmp_path: Path) -> None:
    out = tmp_path / "demo"
    env = {**os.environ, "GOSSAMER_WORKERS": "2"}  # the demo's default on a 2-core machine
    proc = subprocess.run(
        [sys.executable, "-m", "gossamer", "demo", "--hosts", "60", "-o", str(out)],
        capture_output=True, text=True, timeout=240, check=False, env=env,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "verdict: OK" in proc.stdout
    assert sorted(p.name for p in (out / "crawl").glob("stats-w*.json")) == [
        "stats-w0.json", "stats-w1.json",
    ]  # fmt: skip
    counts = robots_requests(out / "web.log")
    assert len({h for h, _ in counts}) == 60  # every host's robots.txt was asked for
    assert any(t.startswith("/robots-moved/") for _, t in counts)  # redirected ones too
    assert not twice(counts), twice(counts)


def crawl_cmd(out: Path, resolve: Path, seed: str | None) -> list[str]:
    base = [sys.executable, "-m", "gossamer", "crawl"]
    if seed is None:
        return [*base, "--resume", str(out), "-q"]
    return [
        *base, seed, "-o", str(out), "--scope", "all", "--resolve-file", str(resolve),
        "--allow-private", "--delay", "0", "--user-agent", UA, "--concurrency", "4",
        "--workers", "1", "-q",
    ]  # fmt: skip


def robots_logged(out: Path) -> int:
    """robots.txt fetches in the crawl log so far (a torn last line is not counted)."""
    try:
        text = (out / "crawl.log.jsonl").read_text(errors="replace")
    except FileNotFoundError:
        return 0
    return text.count('"outcome": "robots"') + text.count('"outcome":"robots"')


def stored_hosts(out: Path) -> set[str]:
    """The hosts whose robots.txt answer is in the crawl's robots store (none without one)."""
    path = out / "robots.sqlite"
    if not path.exists():
        return set()
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return {row[0] for row in db.execute("SELECT host FROM robots")}
    finally:
        db.close()


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL], ids=["SIGTERM", "SIGKILL"])
def test_a_crawl_stopped_and_resumed_fetches_no_robots_txt_again(
    tmp_path: Path, sig: signal.Signals
) -> None:
    """The answers are in robots.sqlite, which --resume reads: hosts begun before the stop
    are not asked for robots.txt again. After a SIGTERM (in-flight requests finish) no
    robots URL is fetched twice. A SIGKILL leaves robots.sqlite whole, and no host whose
    answer it holds is asked again; only a robots.txt in flight at the kill, whose answer
    was never stored, is fetched again."""
    # 3,065 pages on 39 hosts (56 robots URLs): the stop comes after 11-12 of them, and the
    # resumed crawl fetches the 44 others (a web of 12,011 pages only made it 8 s longer)
    spec = WebSpec(seed=25, hosts=40, pages_mean=20, profile="clean", overrides=DEMO_OVERRIDES)
    log = tmp_path / "web.log"
    out = tmp_path / "crawl"
    with serve_in_thread(spec, log_path=log) as web:
        assert web.model.robots_status(0) == "ok"  # (a seed host that disallows all ends it)
        resolve = web.write_resolve_file(tmp_path / "resolve.txt")
        seed = web.url(0, 0)
        proc = subprocess.Popen(
            crawl_cmd(out, resolve, seed), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        try:
            deadline = time.monotonic() + 120
            while robots_logged(out) < 10 and proc.poll() is None:
                assert time.monotonic() < deadline, "the crawl fetched no robots.txt"
                time.sleep(0.02)
            assert proc.poll() is None, "the crawl ended before the stop"
            proc.send_signal(sig)
            assert proc.wait(timeout=60) == (143 if sig == signal.SIGTERM else -signal.SIGKILL)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        web.flush_log()
        before = robots_requests(log)
        kept = stored_hosts(out)  # (the file exists and reads after a SIGKILL)
        final = subprocess.run(
            crawl_cmd(out, resolve, None), capture_output=True, text=True, timeout=300, check=False
        )
        assert final.returncode == 0, final.stderr
        web.flush_log()
    rules = TruthRules(seeds=(seed,), scope="all", user_agent=UA)
    truth = compute_truth(web.model, rules)
    report = audit(web.model, read_logs([log]).records, rules, truth=truth)
    assert report.coverage == 1.0, report.format_table()
    counts = robots_requests(log)
    assert len(before) >= 10 and len(counts) > len(before)  # fetched before and after the stop
    if sig == signal.SIGTERM:
        assert not twice(counts), twice(counts)
    else:  # at most one robots.txt in flight per host fetched at once (--concurrency 4)
        assert len({h for h, t in counts if counts[h, t] > 1}) <= 4, twice(counts)
    assert len(kept) >= 5
    assert not [h for h, t in counts if h in kept and counts[h, t] > 1], twice(counts)


@pytest.mark.slow
def test_two_cluster_workers_fetch_each_robots_url_once(tmp_path: Path, redis_url: str) -> None:
    spec = WebSpec(seed=3, hosts=80, pages_mean=20, overrides=DEMO_OVERRIDES)
    log = tmp_path / "web.log"
    out = tmp_path / "out"
    with serve_in_thread(spec, log_path=log) as web:
        resolve = web.write_resolve_file(tmp_path / "resolve.txt")
        seed = web.url(0, 0)
        crawl_id = create_crawl(redis_url, seed, resolve)
        with workers(redis_url, crawl_id, out, 2) as procs:
            codes = [p.wait(timeout=120) for p in procs]
        assert codes == [0, 0], logs(out)
        _, report = audit_web(web, log, seed)
    assert report.coverage == 1.0, report.format_table()
    pages = {w["id"]: w["pages"] for w in status(redis_url, crawl_id)["workers"]}
    assert all(n > 0 for n in pages.values()) and len(pages) == 2, pages  # both crawled
    counts = robots_requests(log)
    assert len({h for h, _ in counts}) >= 60
    assert any(t.startswith("/robots-moved/") for _, t in counts)
    assert not twice(counts), twice(counts)
