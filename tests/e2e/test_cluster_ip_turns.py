"""The hosts of one IP take turns across cluster workers: four sites on one IP (`--per-ip`
1), two `gossamer worker` processes, and no host waits for its first request, or between two
of its requests, longer than (hosts of the IP) × (the delay) + an allowance for a response
and the hand-overs. Real redis-server, the simulated web on loopback, judged from the web's
request log."""

from __future__ import annotations

import itertools
from collections import defaultdict
from pathlib import Path

import pytest
from test_cluster import UA, create_crawl, logs, start_worker, worker_procs

from gossamer.testweb import TruthRules, WebSpec, audit, compute_truth, read_logs, serve_in_thread

HOSTS = 4
DELAY = 0.2  # between two requests to a host
# a response, the lease and completion round trips of a hand-over, the gate's 20 ms polls
# and 0.25 s refreshes (how soon a holder learns another worker waits), and a margin for
# this loaded machine
ALLOWANCE = 1.0
BOUND = HOSTS * DELAY + ALLOWANCE


@pytest.mark.slow
def test_hosts_of_one_ip_take_turns_across_workers(tmp_path: Path, redis_url: str) -> None:
    """4 sites of ~30 pages on one IP, every page a seed, 0.2 s between requests to a host,
    per-IP 1, two workers started together. From the first request the web saw: every
    host's first request within BOUND (1.8 s), and no gap between two requests of a host
    longer than BOUND while it has pages left; coverage 1, no overlap, no politeness
    violation (one host of the IP fetched at a time).

    Before: a host kept the IP for its whole batch (20 requests, 4 s) and the worker's other
    host of the IP took the slot it let go before the other worker's next poll; the other
    worker's hosts waited until the first worker ran out of turns."""
    spec = WebSpec(seed=21, hosts=HOSTS, pages_mean=30, pages_alpha=30, max_ips=1)
    log = tmp_path / "web.log"
    out = tmp_path / "out"
    with serve_in_thread(spec, log_path=log) as web:
        assert len({h.ip for h in web.model.hosts}) == 1
        resolve = web.write_resolve_file(tmp_path / "resolve.txt")
        seeds = [web.url(h.id, i) for h in web.model.hosts for i in range(h.pages)]
        seeds_file = tmp_path / "seeds.txt"
        seeds_file.write_text("\n".join(seeds) + "\n")
        crawl_id = create_crawl(
            redis_url, seeds[0], resolve, "-i", str(seeds_file), "--delay", str(DELAY),
            "--per-ip", "1",
        )  # fmt: skip
        with worker_procs(out) as procs:
            start_worker(redis_url, crawl_id, out, procs)
            start_worker(redis_url, crawl_id, out, procs)
            codes = [p.wait(timeout=180) for p in procs]
        assert codes == [0, 0], logs(out)
        web.flush_log()
        records = read_logs([log]).records
        rules = TruthRules(seeds=tuple(seeds), scope="all", user_agent=UA)
        truth = compute_truth(web.model, rules)
        report = audit(web.model, records, rules, truth=truth)
    assert report.coverage == 1.0, report.format_table()
    assert report.overlap == 0.0, report.format_table()
    assert report.politeness_violations == 0 and report.ok, report.format_table()

    starts: dict[str, list[float]] = defaultdict(list)
    for r in records:
        starts[r.host].append(r.start_us / 1e6)
    assert len(starts) == HOSTS, sorted(starts)
    t0 = min(min(ts) for ts in starts.values())
    waits: dict[str, float] = {}
    for host, ts in starts.items():
        ts.sort()
        gaps = [b - a for a, b in itertools.pairwise(ts)]
        waits[host] = max([ts[0] - t0, *gaps])
    print({h: f"{w:.2f} s" for h, w in sorted(waits.items())})
    assert max(waits.values()) <= BOUND, (BOUND, waits)
