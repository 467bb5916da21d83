"""A stopped cluster crawl goes on: `gossamer crawl --resume --redis URL --crawl ID`. Real
redis-server, real `gossamer worker` processes, the simulated web on loopback, judged by its
audit (coverage, pages fetched twice, politeness) and `status`."""

from __future__ import annotations

import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from test_cluster import (
    audit_web,
    create_crawl,
    gossamer,
    logs,
    status,
    wait_for_pages,
    workers,
    workers_by_pid,
)
from test_cluster_faults import fetched_counts, leases

from gossamer.frontier.redis import token_owner
from gossamer.testweb import WebSpec, canonical_url, serve_in_thread


def run(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        gossamer(*args), capture_output=True, text=True, timeout=timeout, check=False
    )


@pytest.mark.slow
def test_a_stopped_crawl_is_resumed_with_nothing_lost(tmp_path: Path, redis_url: str) -> None:
    """Two workers crawl; one is SIGKILLed while it holds leases and the crawl is stopped at
    once (`gossamer stop`): the survivor completes its batches and leaves before anyone
    counts the dead worker dead, so the stopped crawl keeps URLs queued and the dead
    worker's leases out. Then:

    - `gossamer worker` does not join it: exit 2, one line with the URLs queued and the
      command that resumes it (before: "is stopped: nothing to do", exit 0);
    - `crawl --resume --redis … --workers 0` sets it running with its frontier intact and
      the dead worker's leases reclaimed at once (queued + leased of the stop, now all
      queued; done unchanged) — not when they expire (120 s);
    - stopped again (no worker: at once), `crawl --resume --redis … --workers 2 -o DIR` (the
      first run's DIR: the new workers are w3 and w4) runs it to the end and exits 0.

    The crawl covers the whole simulated web; the pages fetched twice are only among the
    URLs the dead worker held leased (at-least-once for its batches, nothing else twice)."""
    spec = WebSpec(seed=12, hosts=60, pages_mean=40)
    log = tmp_path / "web.log"
    out = tmp_path / "out"
    with serve_in_thread(spec, log_path=log) as web:
        resolve = web.write_resolve_file(tmp_path / "resolve.txt")
        seed = web.url(0, 0)
        crawl_id = create_crawl(
            redis_url, seed, resolve, "--delay", "0.05", "--per-host", "5"
        )  # fmt: skip
        with workers(redis_url, crawl_id, out, 2) as procs:
            victim = procs[0]

            def by_pid() -> dict[int, dict[str, Any]]:
                return workers_by_pid(redis_url, crawl_id)

            wait_for_pages(redis_url, crawl_id, victim.pid, 20, 30)  # the victim's first pages
            bound: set[str] = set()  # the URLs the victim held leased when it died
            for _attempt in range(20):
                victim.send_signal(signal.SIGSTOP)  # its leases cannot change now
                victim_id = by_pid()[victim.pid]["id"]
                bound = {
                    u for t, (_, urls) in leases(redis_url, crawl_id).items()
                    if (token_owner(t) or ("",))[0] == victim_id for u in urls
                }  # fmt: skip
                if bound:
                    break
                victim.send_signal(signal.SIGCONT)
                time.sleep(0.3)
            else:
                pytest.fail("the victim never held a lease when frozen")
            victim.kill()
            stop = run("stop", "--redis", redis_url, "--crawl", crawl_id, "--wait", "30")
            assert stop.returncode == 0, stop.stderr
            codes = [p.wait(timeout=30) for p in procs]
        assert codes == [-signal.SIGKILL, 0], logs(out)
        stopped = status(redis_url, crawl_id)
        assert stopped["crawl"]["state"] == "stopped"
        fr = stopped["frontier"]
        assert fr["queued"] > 100, "the crawl was nearly over at the stop: the test shows little"
        assert fr["leased"] == len(bound), (fr, len(bound))  # the dead worker's, still out

        joined = run("worker", "--redis", redis_url, "--crawl", crawl_id, "-o", str(out))
        assert joined.returncode == 2, joined.stderr
        assert f"is stopped with {fr['queued']:,} URLs queued" in joined.stderr, joined.stderr
        command = f"gossamer crawl --resume --redis {redis_url} --crawl {crawl_id}"
        assert command in joined.stderr, joined.stderr
        assert len(joined.stderr.strip().splitlines()) == 1, joined.stderr

        resumed = run("crawl", "--resume", "--redis", redis_url, "--crawl", crawl_id,
                      "--workers", "0")  # fmt: skip
        assert resumed.returncode == 0, resumed.stderr
        assert resumed.stdout.strip() == crawl_id
        assert f"crawl {crawl_id} resumed" in resumed.stderr, resumed.stderr
        running = status(redis_url, crawl_id)
        assert running["crawl"]["state"] == "running" and running["crawl"]["ended"] is None
        now = running["frontier"]
        assert now["leased"] == 0, now  # reclaimed at the resume, not at their expiry
        assert now["queued"] == fr["queued"] + fr["leased"], (now, fr)
        assert (now["done"], now["failed"]) == (fr["done"], fr["failed"])

        again = run("stop", "--redis", redis_url, "--crawl", crawl_id)
        assert again.returncode == 0 and "stopped" in again.stderr, again.stderr
        t0 = time.monotonic()
        done = run("crawl", "--resume", "--redis", redis_url, "--crawl", crawl_id,
                   "--workers", "2", "-o", str(out), "-q", timeout=180)  # fmt: skip
        took = time.monotonic() - t0
        assert done.returncode == 0, done.stderr + logs(out)
        assert done.stdout.strip() == crawl_id
        truth, report = audit_web(web, log, seed)
        counts = fetched_counts(log)
    print(f"resumed and finished in {took:.1f}s; the victim held {len(bound)} URLs leased")
    assert report.coverage == 1.0, report.format_table()
    assert report.politeness_violations == 0 and report.ok, report.format_table()
    twice = {url for url, n in counts.items() if n > 1}
    assert all(counts[u] == 2 for u in twice), [(u, counts[u]) for u in twice if counts[u] > 2]
    assert twice <= {canonical_url(u) for u in bound}, sorted(twice)[:10]
    st = status(redis_url, crawl_id)
    assert st["crawl"]["state"] == "finished"
    assert st["frontier"]["queued"] == 0 and st["frontier"]["leased"] == 0
    assert st["frontier"]["done"] == len(truth.required)
    assert [w["id"] for w in st["workers"]] == ["w1", "w2", "w3", "w4"]
    assert sorted(p.name for p in out.iterdir() if p.is_dir()) == [
        "graph", "w1", "w2", "w3", "w4",  # (graph: the live graph consumer's state)
    ]


UNREACHABLE = "redis://127.0.0.1:9/0"  # never connected to: each error comes first


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["--resume"], "--resume needs DIR, the crawl directory (or --redis URL"),
        (["--resume", "old", "--redis", UNREACHABLE],
         "--resume old: a cluster crawl is resumed by its id, not a directory"),
        (["--resume", "--redis", UNREACHABLE, "--max-depth", "2"],
         "--max-depth: a resumed cluster crawl goes on with the settings stored with it"),
        (["--resume", "--redis", UNREACHABLE, "http://a.example/"],
         "SEED: a resumed cluster crawl goes on with the settings stored with it"),
        (["--redis", UNREACHABLE, "http://a.example/", "--crawl", "c1"],
         "--crawl ID is for --resume: a new crawl gets a new id"),
        (["http://a.example/", "--crawl", "c1"], "--crawl is for cluster crawls: add --redis"),
    ],
)  # fmt: skip
def test_resume_arguments_are_checked_first(tmp_path: Path, args: list[str], said: str) -> None:
    """`crawl --resume` without DIR is a cluster crawl's (with --redis, its id by --crawl);
    its settings are the stored ones: a flag for one is refused, naming it, before Redis
    is asked anything (exit 2, one line, nothing written)."""
    done = subprocess.run(
        gossamer("crawl", *args), capture_output=True, text=True, timeout=60, check=False,
        cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert done.stderr.count("\n") == 1 and said in done.stderr, done.stderr
    assert list(tmp_path.iterdir()) == []
