"""A SIGKILLed cluster worker's hosts come back when its death is detected, not when its leases
expire; and two workers share four hosts instead of one taking them all. Real redis-server
(and Redis Cluster), real `gossamer worker` processes, the simulated web on loopback, judged
from the web's request log (every request with its time) and its audit."""

from __future__ import annotations

import signal
import subprocess
import time
from collections import Counter
from pathlib import Path

import pytest
from test_cluster import audit_web, create_crawl, logs, status, status_now, wait_for, workers
from test_cluster_faults import fetched_counts, leases

from gossamer.frontier.redis import token_owner
from gossamer.testweb import WebSpec, canonical_url, read_logs, serve_in_thread

# `status` shows a worker dead this long after its last beat (the default is 5 s; the bound
# below scales with it: the worker beats every TTL / 5 and is seen dead a TTL after its last
# beat, so 3 s shows the same thing 2 s sooner and is still far from a stall on this machine)
HEARTBEAT_TTL = 3.0
LEASE_TTL = 120.0  # the default lease: what its hosts waited for before
DELAY = 0.1  # between two requests to a host
# how soon after both workers are members neither holds all four sites: a beat interval (the
# first to start learns of the other: alone, it had no share and may have leased all four),
# a page (it gives the hosts over its share back between two pages), and a margin for this
# loaded machine and the ~0.5 s a `status` command takes
SHARE_BOUND = HEARTBEAT_TTL / 5 + DELAY + 1.0


def _owners(redis_url: str, crawl_id: str) -> dict[str, set[str]]:
    """The hosts each worker holds leases on now (from the tokens in Redis)."""
    out: dict[str, set[str]] = {}
    for token, (host, _) in leases(redis_url, crawl_id).items():
        owner = token_owner(token)
        if owner is not None:
            out.setdefault(owner[0], set()).add(host)
    return out


@pytest.mark.slow
@pytest.mark.parametrize("server", ["redis_url", "redis_cluster_url"])
def test_a_killed_workers_hosts_are_fetched_again_within_the_heartbeat_ttl(
    tmp_path: Path, server: str, request: pytest.FixtureRequest
) -> None:
    """4 sites of ~60 pages (0.1 s between requests: ~6 s a site, most of it still to crawl
    when a worker dies and its hosts wait for the TTL), 2 workers, a 3 s heartbeat TTL and
    the default lease TTL (120 s). Each worker takes its share: from a beat interval + a page
    after both are members (`status`), no worker holds all four sites, and both hold some
    (the first to start may lease all four before the other registers: alone, it has no
    share; it gives two back when it learns of the other). Then the worker holding hosts is
    SIGKILLed (frozen first, so that the leases it held are read from Redis exactly): each of its
    hosts is requested again, by the survivor, within heartbeat TTL + 2 s of the freeze
    (before: 120 s, the lease's expiry). The crawl ends with coverage 1, no politeness
    violation, and the pages fetched twice among the URLs it held leased."""
    redis_url = request.getfixturevalue(server)
    spec = WebSpec(seed=21, hosts=4, pages_mean=60, pages_alpha=30, ip_share=0)
    log = tmp_path / "web.log"
    out = tmp_path / "out"
    with serve_in_thread(spec, log_path=log) as web:
        resolve = web.write_resolve_file(tmp_path / "resolve.txt")
        seed = web.url(0, 0)
        crawl_id = create_crawl(
            redis_url, seed, resolve, "--delay", str(DELAY), "--heartbeat-ttl",
            str(HEARTBEAT_TTL),
        )  # fmt: skip
        assert len(web.model.hosts) == 4
        with workers(redis_url, crawl_id, out, 2) as procs:
            # both workers crawling, and what each holds, until one holds hosts a while
            held_most: Counter[str] = Counter()  # worker -> the most hosts it held at once,
            # from SHARE_BOUND after both were members
            both_at: float | None = None  # when `status` first showed both
            pids: dict[str, int] = {}  # worker -> its process

            def sample() -> bool:
                nonlocal both_at
                owners = _owners(redis_url, crawl_id)
                # (read in this process: a `status` process takes seconds on a loaded machine,
                # and these sites are crawled in ~6 s each)
                live = {w["id"]: w["pid"] for w in status_now(redis_url, crawl_id)["workers"]}
                now = time.monotonic()
                if len(live) == 2 and both_at is None:
                    both_at = now
                    pids.update(live)
                if both_at is None or now < both_at + SHARE_BOUND:
                    return False
                for who, hosts in owners.items():
                    held_most[who] = max(held_most[who], len(hosts))
                return len(owners) == 2 and sum(held_most.values()) >= 4

            wait_for("both workers holding hosts", sample, 60, show=lambda: dict(held_most))
            # the victim: the worker holding the most hosts, frozen (its heartbeats stop) and
            # its leases read. Between a batch's completion and its next lease a worker holds
            # none for a moment (and the crawl went on while `status` ran): then it goes on,
            # and the next sample is frozen.
            victim_id = ""
            victim: subprocess.Popen[bytes] | None = None
            held: dict[str, tuple[str, frozenset[str]]] = {}
            frozen_at = 0.0

            def freeze_one_holding_leases() -> bool:
                nonlocal victim_id, victim, held, frozen_at
                owners = _owners(redis_url, crawl_id)
                if not owners:
                    return False
                victim_id = min(owners, key=lambda w: (-len(owners[w]), w))
                victim = next(p for p in procs if p.pid == pids[victim_id])
                victim.send_signal(signal.SIGSTOP)
                frozen_at = time.time()
                held = {
                    t: v for t, v in leases(redis_url, crawl_id).items()
                    if (token_owner(t) or ("",))[0] == victim_id
                }  # fmt: skip
                if not held:
                    victim.send_signal(signal.SIGCONT)
                return bool(held)

            wait_for("a worker frozen holding leases", freeze_one_holding_leases, 30)
            assert victim is not None
            victim.kill()
            victim_hosts = {host for host, _ in held.values()}
            bound = frozenset().union(*(urls for _, urls in held.values()))
            assert victim_hosts, "the victim held no lease when frozen"
            codes = [p.wait(timeout=120) for p in procs]
        assert sorted(codes) == sorted([-signal.SIGKILL, 0]), logs(out)
        truth, report = audit_web(web, log, seed)
        counts = fetched_counts(log)
        records = read_logs([log]).records
    # fairness: nobody held every site while the other sat idle, once both were members
    assert len(held_most) == 2 and max(held_most.values()) < 4, held_most
    # the victim's hosts: requested again within the heartbeat TTL + 2 s of the freeze
    back = {}
    for host in victim_hosts:
        after = [r.start for r in records if r.host == host and r.start > frozen_at]
        assert after, f"{host} never requested again"
        back[host] = min(after) - frozen_at
    print(f"victim {victim_id} held {sorted(victim_hosts)} ({len(bound)} URLs); back after "
          f"{ {h: round(s, 2) for h, s in back.items()} } s")  # fmt: skip
    assert max(back.values()) <= HEARTBEAT_TTL + 2.0, back
    assert report.coverage == 1.0, report.format_table()
    assert report.politeness_violations == 0 and report.ok, report.format_table()
    dups = {url for url, n in counts.items() if n > 1}
    print(f"{len(dups)} URLs fetched twice")
    assert all(counts[u] == 2 for u in dups), [(u, counts[u]) for u in dups if counts[u] > 2]
    assert dups <= {canonical_url(u) for u in bound}, sorted(dups)[:10]
    st = status(redis_url, crawl_id)
    assert st["crawl"]["state"] == "finished"
    assert st["frontier"]["done"] == len(truth.required)
