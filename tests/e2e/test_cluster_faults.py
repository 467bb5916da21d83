"""Cluster mode end to end under faults: a worker SIGKILLed mid-crawl, Redis SIGKILLed and
restarted mid-crawl. Real redis-servers, real `gossamer worker` processes, the simulated
web on loopback; judged by its audit (coverage, overlap, politeness) and `status`."""

from __future__ import annotations

import json
import signal
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from test_cluster import (
    audit_web,
    create_crawl,
    logs,
    settings_file,
    status,
    status_now,
    wait_for,
    wait_for_pages,
    workers,
    workers_by_pid,
)

from gossamer.frontier.redis import connect, disconnect
from gossamer.testweb import WebSpec, canonical_url, read_logs, serve_in_thread
from gossamer.testweb._truth import request_url
from gossamer.testweb.redisd import RedisServer


def leases(redis_url: str, crawl_id: str) -> dict[str, tuple[str, frozenset[str]]]:
    """Every lease of the crawl's frontier in Redis (one server or a Redis Cluster): token ->
    (host, its leased URLs).

    Read from the frontier's keys (docstring of gossamer.frontier.redis._keys): per shard, `t`
    maps lease tokens to hosts; a leased host's `h:<host>` hash holds its token (`tk`) and
    its leased URLs (`lf`: entries `score \\1 member` joined by `\\2`, a member being
    `fp \\0 attempts \\0 depth \\0 parent \\0 url`)."""
    out: dict[str, tuple[str, frozenset[str]]] = {}
    r = connect(redis_url)
    try:
        for key in r.scan_iter(match=f"gs:{crawl_id}:{{*}}:t", count=1000):
            prefix = key[: -len(b"t")]
            for token, host in r.hgetall(key).items():
                tk, lf = r.hmget(prefix + b"h:" + host, "tk", "lf")
                if tk != token:  # completed between the two reads
                    continue
                urls = {
                    entry.split(b"\1", 1)[1].split(b"\0", 4)[4].decode()
                    for entry in (lf or b"").split(b"\2")
                    if entry
                }
                out[token.decode()] = (host.decode(), frozenset(urls))
    finally:
        disconnect(r)
    return out


def fetched_counts(log: Path) -> Counter[str]:
    """Page fetches per canonical URL that the audit counts (GET, answered, not 429/503,
    not robots.txt): the URLs with a count above 1 are the audit's duplicates."""
    counts: Counter[str] = Counter()
    for r in read_logs([log]).records:
        if r.method != "GET" or r.outcome != "ok" or r.status in (0, 429, 503) or not r.host:
            continue
        url = request_url(r.host, r.target)
        if url is not None and not url.endswith("/robots.txt"):
            counts[url] += 1
    return counts


@pytest.mark.slow
def test_a_worker_killed_mid_crawl_costs_at_most_its_leased_urls(
    tmp_path: Path, redis_url: str
) -> None:
    """SIGKILL one of three workers while it holds leases: the others finish the crawl
    (its leases expire after the lease TTL, 3 s here, and go back to the queues), coverage
    stays 1, politeness is kept, and the pages fetched twice are at most the URLs the dead
    worker held leased when it died — each of them one of those URLs.

    Which leases were the victim's: it is frozen (SIGSTOP) first, so its leases cannot
    change; a snapshot of every lease in Redis then, and another 0.5 s later: the tokens in
    both are the victim's and those of other workers' batches that lasted (batches are 5
    URLs, ~0.2 s, unless they wait for an IP), so their URLs bound the victim's from above.
    The victim's last heartbeat (status) names hosts it held: one of them must be among
    those leases, or the victim held none and the freeze is tried again a little later.

    The test fails when expiry or reclaim go wrong; run once by hand with each break:
    `reclaim.lua` dropping the URLs of an expired lease instead of requeueing them: coverage
    0.97; `reclaim.lua` reclaiming leases that expire within 10 s (live ones): pages fetched
    three times and twice outside the victim's leases."""
    spec = WebSpec(seed=12, hosts=60, pages_mean=40)
    log = tmp_path / "web.log"
    out = tmp_path / "out"
    with serve_in_thread(spec, log_path=log) as web:
        resolve = web.write_resolve_file(tmp_path / "resolve.txt")
        seed = web.url(0, 0)
        config = settings_file(tmp_path, lease_ttl=3.0)
        crawl_id = create_crawl(
            redis_url, seed, resolve, "--config", str(config), "--delay", "0.03",
            "--per-host", "5", "--heartbeat-ttl", "2",
        )  # fmt: skip
        with workers(redis_url, crawl_id, out, 3) as procs:
            victim = procs[0]

            def by_pid() -> dict[int, dict[str, Any]]:
                return workers_by_pid(redis_url, crawl_id)

            wait_for_pages(redis_url, crawl_id, victim.pid, 20, 120)  # the victim's first pages
            held: dict[str, tuple[str, frozenset[str]]] = {}
            for _attempt in range(20):
                victim.send_signal(signal.SIGSTOP)
                first = leases(redis_url, crawl_id)
                time.sleep(0.5)
                second = leases(redis_url, crawl_id)
                held = {t: v for t, v in second.items() if first.get(t) == v}
                named = set(by_pid()[victim.pid]["hosts"])
                if named & {host for host, _ in held.values()}:
                    break
                victim.send_signal(signal.SIGCONT)
                time.sleep(0.3)
            else:
                pytest.fail("the victim never held a lease when frozen")
            victim.kill()  # SIGKILL (frozen: its leases are those of the snapshot)
            remaining = status_now(redis_url, crawl_id)["frontier"]["queued"]
            bound = frozenset().union(*(urls for _, urls in held.values()))
            codes = [p.wait(timeout=90) for p in procs]
        assert codes == [-signal.SIGKILL, 0, 0], logs(out)
        print(f"killed holding <= {len(bound)} URLs in {len(held)} leases, {remaining} queued")
        assert remaining > 100, "the crawl was nearly over at the kill: the test shows little"
        truth, report = audit_web(web, log, seed)
        counts = fetched_counts(log)
    assert report.coverage == 1.0, report.format_table()
    assert report.politeness_violations == 0 and report.ok, report.format_table()
    dups = {url for url, n in counts.items() if n > 1}
    assert report.fetched - report.unique == sum(counts[u] - 1 for u in dups)
    assert all(counts[u] == 2 for u in dups), [(u, counts[u]) for u in dups if counts[u] > 2]
    print(f"{len(dups)} URLs fetched twice")
    assert len(dups) <= len(bound), (len(dups), len(bound))
    canonical = {canonical_url(u) for u in bound}
    assert dups <= canonical, sorted(dups - canonical)[:10]
    st = status(redis_url, crawl_id)
    assert st["crawl"]["state"] == "finished"
    assert st["frontier"]["queued"] == 0 and st["frontier"]["leased"] == 0
    assert st["frontier"]["done"] == len(truth.required)
    states = {w["pid"]: w["state"] for w in st["workers"]}
    assert states[victim.pid] == "dead"
    assert sorted(states.values()) == ["dead", "stopped", "stopped"]
    # the survivors' own accounts (stats.json) agree with their last status records
    for w in st["workers"]:
        if w["pid"] != victim.pid:
            stats = json.loads((Path(w["out"]) / "stats.json").read_text())
            assert stats["finished"] and stats["pages"] == w["pages"]


@pytest.mark.slow
def test_workers_wait_out_a_redis_restart(tmp_path: Path) -> None:
    """Redis SIGKILLed mid-crawl and started again on its port a second later, its AOF
    reloaded: the three workers wait the outage out (the frontier retries connection
    errors, the heartbeat and the IP gate back off), none exits, and the crawl finishes
    complete and polite. Redis writes the AOF before it replies, so a SIGKILL loses no
    acknowledged write: nothing is fetched twice either."""
    spec = WebSpec(seed=12, hosts=60, pages_mean=40)
    log = tmp_path / "web.log"
    out = tmp_path / "out"
    server = RedisServer(tmp_path / "redis")  # AOF on, appendfsync everysec
    try:
        url = server.url
        with serve_in_thread(spec, log_path=log) as web:
            resolve = web.write_resolve_file(tmp_path / "resolve.txt")
            seed = web.url(0, 0)
            # a lease whose reply the kill lost is orphaned until it expires: 10 s, not 120
            config = settings_file(tmp_path, lease_ttl=10.0)
            # a 0.1 s host delay: the crawl still has most of its pages queued at the restart
            crawl_id = create_crawl(url, seed, resolve, "--config", str(config), "--delay", "0.1")
            with workers(url, crawl_id, out, 3) as procs:

                def crawling() -> bool:
                    ws = status(url, crawl_id)["workers"]
                    return len(ws) == 3 and all(w["pages"] > 0 for w in ws)

                wait_for("pages from every worker", crawling, 30)
                before = status(url, crawl_id)
                server.kill()
                time.sleep(1.0)
                assert all(p.poll() is None for p in procs), logs(out)
                server.restart()
                after = status(url, crawl_id)
                codes = [p.wait(timeout=90) for p in procs]
            assert codes == [0, 0, 0], logs(out)
            truth, report = audit_web(web, log, seed)
        assert before["frontier"]["queued"] > 100, "the crawl was nearly over at the restart"
        assert after["frontier"]["done"] >= before["frontier"]["done"]  # the AOF came back
        assert report.coverage == 1.0, report.format_table()
        assert report.politeness_violations == 0 and report.ok, report.format_table()
        assert report.overlap == 0.0, report.format_table()
        st = status(url, crawl_id)
        assert st["crawl"]["state"] == "finished"
        assert st["frontier"]["queued"] == 0 and st["frontier"]["leased"] == 0
        assert sum(w["pages"] for w in st["workers"]) == len(truth.required)
        assert all(w["state"] == "stopped" for w in st["workers"]), st["workers"]
        text = logs(out)
        assert "Redis unreachable" in text or "heartbeat failed" in text, text
        assert "Traceback" not in text, text
    finally:
        server.stop()
