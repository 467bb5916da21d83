"""A cluster worker that took every host while alone gives the hosts over its share back when
a second worker joins: within a heartbeat interval and a page, not when its batches end.
Real redis-server, real `gossamer worker` processes, the simulated web on loopback, judged
from the leases in Redis and the web's request log (audit: coverage, overlap, politeness)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from test_cluster import UA, create_crawl, logs, start_worker, wait_for, worker_procs
from test_cluster_dead_worker import _owners

from gossamer.cluster.members import Membership
from gossamer.frontier.redis import connect, disconnect
from gossamer.testweb import TruthRules, WebSpec, audit, compute_truth, read_logs, serve_in_thread

HEARTBEAT_TTL = 3.0  # a beat every 0.6 s: how soon a worker learns of a new member
DELAY = 0.5  # between two requests to a host: a batch of 20 URLs lasts ~10 s
# a beat interval (the first worker learns of the second), a page (the request in flight
# ends; a wait for the host's delay ends at once), the engine's 50 ms look, the completion's
# round trip, and a margin for this loaded machine and the 0.2 s polls below
BOUND = HEARTBEAT_TTL / 5 + DELAY + 1.0


def _live(redis_url: str, crawl_id: str) -> set[str]:
    """The live members, as `gossamer status` shows them (its statuses, read in-process: a
    `status` command takes ~0.5 s to start, more than the time measured here)."""
    client = connect(redis_url)
    try:
        statuses = Membership(client, crawl_id, ttl=HEARTBEAT_TTL).statuses()
    finally:
        disconnect(client)
    return {s.id for s in statuses if s.state not in ("dead", "stopped")}


@pytest.mark.slow
def test_a_worker_over_its_share_gives_hosts_back_when_another_joins(
    tmp_path: Path, redis_url: str
) -> None:
    """4 sites of ~30 pages, every page a seed (the first lease takes 20 URLs of each), 0.5 s
    between requests. w1 starts alone and leases all four sites (alone, it has no share);
    then w2 starts. Once w2 is a member (status shows it), w1 holds at most its share, 2,
    within a heartbeat interval + a page + a margin (2.1 s); w2 takes the hosts given back
    after their delay. The crawl ends with coverage 1, no page fetched twice, no politeness
    violation (a given-back host's next request waited for its delay from w1's last).

    Before: w1 kept all four until its batches of 20 ended (~10 s), with w2 idle; this test
    timed out at the 2.1 s bound."""
    spec = WebSpec(seed=21, hosts=4, pages_mean=30, pages_alpha=30, ip_share=0)
    log = tmp_path / "web.log"
    out = tmp_path / "out"
    with serve_in_thread(spec, log_path=log) as web:
        resolve = web.write_resolve_file(tmp_path / "resolve.txt")
        seeds = [web.url(h.id, i) for h in web.model.hosts for i in range(h.pages)]
        seeds_file = tmp_path / "seeds.txt"
        seeds_file.write_text("\n".join(seeds) + "\n")
        crawl_id = create_crawl(
            redis_url, seeds[0], resolve, "-i", str(seeds_file), "--delay", str(DELAY),
            "--heartbeat-ttl", str(HEARTBEAT_TTL),
        )  # fmt: skip
        hosts = {h.name for h in web.model.hosts}
        with worker_procs(out) as procs:
            start_worker(redis_url, crawl_id, out, procs)

            def w1_holds_all() -> bool:
                return _owners(redis_url, crawl_id).get("w1", set()) == hosts

            wait_for("w1 alone holding all four sites", w1_holds_all, 60,
                     show=lambda: _owners(redis_url, crawl_id))  # fmt: skip
            start_worker(redis_url, crawl_id, out, procs)
            wait_for("w2 a member", lambda: "w2" in _live(redis_url, crawl_id), 60)
            joined_at = time.monotonic()
            held: dict[str, set[str]] = {}

            def w1_at_its_share() -> bool:
                nonlocal held
                held = _owners(redis_url, crawl_id)
                return len(held.get("w1", ())) <= 2

            wait_for("w1 to hold at most its share", w1_at_its_share, BOUND, show=lambda: held)
            took = time.monotonic() - joined_at

            def w2_holds_some() -> bool:
                nonlocal held
                held = _owners(redis_url, crawl_id)
                return bool(held.get("w2"))

            wait_for("w2 to hold a host", w2_holds_some, BOUND + DELAY, show=lambda: held)
            print(f"w1 at its share {took:.2f} s after w2 was a member; then {held}")
            codes = [p.wait(timeout=120) for p in procs]
        assert codes == [0, 0], logs(out)
        web.flush_log()
        rules = TruthRules(seeds=tuple(seeds), scope="all", user_agent=UA)
        truth = compute_truth(web.model, rules)
        report = audit(web.model, read_logs([log]).records, rules, truth=truth)
    assert report.coverage == 1.0, report.format_table()
    assert report.overlap == 0.0, report.format_table()
    assert report.politeness_violations == 0 and report.ok, report.format_table()
