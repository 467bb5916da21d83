"""What `--replica-acks 1` (WAIT 1 after each completion) costs the Redis frontier.

    .venv/bin/python bench/bench_redis_wait.py                 # 40k URLs, 400 hosts, 3 rounds
    .venv/bin/python bench/bench_redis_wait.py --urls 100000 --rounds 5

A master and one replica (redis-server, AOF `everysec`, on free loopback ports, started and
stopped here). Each round, for replica_acks 0 then 1 (alternated, a fresh crawl each): the
URLs are put, then one client leases (64 hosts, 20 URLs each) and completes every batch
(all DONE, no renewal) until the frontier is empty. Printed: lease+complete URLs/s, the
mean time of a `complete` call, and the completions the replica did not acknowledge within
the time-out. Figures are printed, never asserted (bench/README.md records them).
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from gossamer.frontier import Discovered, Outcome, Verdict
from gossamer.frontier.redis import RedisFrontier
from gossamer.testweb.redisd import HOST, RedisServer
from gossamer.urls import fingerprint


def run(client: object, crawl: str, urls: int, hosts: int, acks: int) -> tuple[float, float, int]:
    f = RedisFrontier(client, crawl, default_delay=0.0, replica_acks=acks)  # type: ignore[arg-type]
    items = []
    for i in range(urls):
        host = f"h{i % hosts}.example"
        url = f"http://{host}/p{i}"
        items.append(Discovered(url, host, 0, fingerprint(url)))
    for lo in range(0, len(items), 1000):
        f.put_discovered(items[lo : lo + 1000])
    done = 0
    spent = 0.0
    calls = 0
    start = time.perf_counter()
    while True:
        batches = f.lease(64, 20)
        if not batches:
            if f.statistics().queued == 0:
                break
            continue
        for b in batches:
            outcomes = [Outcome(u.url, u.fp, Verdict.DONE, 200) for u in b.urls]
            t = time.perf_counter()
            f.complete(b.token, outcomes)
            spent += time.perf_counter() - t
            calls += 1
            done += len(b.urls)
    wall = time.perf_counter() - start
    assert done == urls, (done, urls)
    shortfalls = f.replica_shortfalls
    f.close()
    return done / wall, spent / calls * 1e6, shortfalls


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--urls", type=int, default=40_000)
    ap.add_argument("--hosts", type=int, default=400)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    with (
        tempfile.TemporaryDirectory() as tmp,
        RedisServer(Path(tmp) / "master") as master,
        RedisServer(Path(tmp) / "replica", extra=(f"replicaof {HOST} {master.port}",)) as replica,
    ):
        deadline = time.monotonic() + 30
        with replica.client() as rc:
            while rc.info("replication").get("master_link_status") != "up":
                assert time.monotonic() < deadline, "the replica did not sync"
                time.sleep(0.05)
        figures: dict[int, list[tuple[float, float, int]]] = {0: [], 1: []}
        with master.client() as client:
            for r in range(args.rounds):
                for acks in (0, 1):
                    fig = run(client, f"wait{r}x{acks}", args.urls, args.hosts, acks)
                    figures[acks].append(fig)
                    print(
                        f"round {r + 1} replica_acks={acks}: {fig[0]:,.0f} URLs/s "
                        f"lease+complete, {fig[1]:.0f} µs a complete, "
                        f"{fig[2]} not acknowledged in time",
                        flush=True,
                    )
        for acks, figs in figures.items():
            rates = [f[0] for f in figs]
            lat = [f[1] for f in figs]
            print(
                f"replica_acks={acks}: median {statistics.median(rates):,.0f} URLs/s "
                f"({min(rates):,.0f}-{max(rates):,.0f}), median "
                f"{statistics.median(lat):.0f} µs a complete"
            )


if __name__ == "__main__":
    main()
