"""Cluster mode end to end, per partition strategy: three `gossamer worker` processes on a
real redis-server crawl the simulated web under `--partition dynamic|modulo|consistent|phase`
(audit: coverage 1, overlap 0, no politeness violation; per-worker pages from `status`), and
workers joining a running crawl (dynamic, consistent: what moved is exactly what the
newcomer owns)."""

from __future__ import annotations

import math
import subprocess
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import pytest
from test_cluster import (
    UA,
    audit_web,
    create_crawl,
    gossamer,
    logs,
    settings_file,
    start_worker,
    status,
    status_now,
    wait_for,
    worker_procs,
)

from gossamer.cluster.sizes import read_site_sizes, shard_weights
from gossamer.experiments.cluster_run import Fetch, connection_votes, phase_windows, read_fetches
from gossamer.experiments.crawl_metrics import workers_settled
from gossamer.partition import SHARDS, Consistent, Member, Sized, assignment, shard_of
from gossamer.testweb import LogRecord, RunningWeb, WebSpec, read_logs, serve_in_thread

LEASE_TTL = 2.0  # seconds (crawl setting `lease_ttl`): short, so a join's grace is short
JOIN_DELAY = 0.1  # the join tests' host delay: the crawl lasts long enough after the join
JOIN_PER_HOST = 5  # … and short batches (5 URLs, ~0.5 s)
JOIN_HEARTBEAT_TTL = 2.0  # beats every 0.4 s: the member list spreads quickly
BEAT = 1.0  # the heartbeat interval of the other crawls: the default TTL (5 s) / 5


def worker_pages(st: dict[str, Any]) -> dict[str, int]:
    return {w["id"]: w["pages"] for w in st["workers"]}


def check_finished(redis_url: str, crawl_id: str, required: int, workers: int) -> dict[str, int]:
    """The crawl is finished, nothing left in the frontier, every worker exited cleanly and
    the per-worker pages of `status --json` add up to the pages the truth requires."""
    st = status(redis_url, crawl_id)
    assert st["crawl"]["state"] == "finished"
    assert st["frontier"]["queued"] == 0 and st["frontier"]["leased"] == 0
    pages = worker_pages(st)
    assert sorted(pages) == [f"w{k}" for k in range(1, workers + 1)], pages
    assert all(w["state"] == "stopped" for w in st["workers"]), st["workers"]
    assert sum(pages.values()) == required, pages
    return pages


def crawl_with_three_workers(
    redis_url: str, seed: str, resolve: Path, out: Path, *extra: str
) -> str:
    """Create a crawl (`gossamer crawl --redis … *extra`), run three workers to its end (each
    must exit 0) and return its id."""
    crawl_id = create_crawl(redis_url, seed, resolve, *extra)
    with worker_procs(out) as procs:
        for _ in range(3):
            start_worker(redis_url, crawl_id, out, procs)
        codes = [p.wait(timeout=90) for p in procs]
    assert codes == [0, 0, 0], logs(out)
    return crawl_id


# ---------------------------------------------------------------------------- phase windows


def workers_of_connections(records: list[LogRecord], fetches: list[Fetch]) -> dict[str, str]:
    """The worker behind each connection of the web's request log, each request matched to
    the nearest fetch of its URL in the crawl logs however far (`connection_votes`). A
    connection belongs to one worker process: every request on it must point to the same
    worker."""
    owner = {}
    for conn, v in connection_votes(records, fetches, within=math.inf).items():
        assert len(v) == 1, f"connection {conn} matched several workers: {v}"
        owner[conn] = next(iter(v))
    return owner


# ---------------------------------------------------------------------------- tests

PHASE_PERIOD = 3.0
STRATEGIES = {
    "dynamic": (),
    "modulo": (),
    "consistent": (),
    # a host delay stretches the crawl over ~6 phases
    "phase": ("--phase-period", str(PHASE_PERIOD), "--delay", "0.05"),
}


@pytest.mark.slow
@pytest.mark.parametrize("partition", list(STRATEGIES))
def test_three_workers_under_each_partition_strategy(
    tmp_path: Path, redis_url: str, partition: str
) -> None:
    """Coverage 1, overlap 0, no politeness violation, pages of `status` adding up to the
    truth, under every strategy. For the static ones every worker fetches (each owns a third
    of the shards). For `phase` (T = 3 s, ~6 windows in the crawl), KSpider's property:
    within each window [k·T, (k+1)·T) of the shared clock, every web host is contacted by
    one worker at most (the web's requests mapped to workers through their crawl logs).

    The lease TTL is 8 s so that the engine's safety margin is its full 2 s (min(2 s,
    TTL / 4)): a phase's leases end at the phase's end, and a batch completed after that
    finds its lease reclaimed by the next phase's worker, who fetches its pages again. With
    a 2 s TTL (0.5 s margin) that happened on this 2-core machine (overlap 0.05-0.13).

    The phase check fails when the property is broken: run once by hand with `valid_until`
    returning math.inf in `Phase` (leases no longer capped at the phase's end, so a worker
    keeps a host past its phase while the next phase's worker takes the host's shard),
    5 (window, host) pairs had two workers."""
    # hosts capped at 50 pages (1485 pages, 114 on the busiest IP; uncapped 1587 and 135):
    # the phase crawl lasts ~18 s, not ~21, and its checked windows span 5.2 periods (6.1
    # uncapped; 3 are asked)
    spec = WebSpec(seed=12, hosts=60, pages_mean=40, pages_max=50)
    log = tmp_path / "web.log"
    out = tmp_path / "out"
    extra = ["--partition", partition, *STRATEGIES[partition]]
    with serve_in_thread(spec, log_path=log) as web:
        resolve = web.write_resolve_file(tmp_path / "resolve.txt")
        seed = web.url(0, 0)
        config = settings_file(tmp_path, lease_ttl=8.0)  # the engine's full 2 s margin
        crawl_id = crawl_with_three_workers(
            redis_url, seed, resolve, out, "--config", str(config), *extra
        )
        truth, report = audit_web(web, log, seed)
        records = _web_records(web, log)
    assert report.coverage == 1.0, report.format_table()
    assert report.overlap == 0.0, report.format_table()
    assert report.politeness_violations == 0, report.format_table()
    assert report.ok, report.format_table()
    pages = check_finished(redis_url, crawl_id, len(truth.required), 3)
    assert sum(pages.values()) == report.fetched, (pages, report.fetched)
    if partition != "dynamic":
        assert all(n > 0 for n in pages.values()), pages
    fetches = read_fetches(out, strict=True)  # the workers exited cleanly: no torn line
    assert Counter(f.worker for f in fetches if f.outcome == "ok") == {
        w: n for w, n in pages.items() if n
    }
    if partition == "phase":
        _check_phase_property(web, records, fetches, period=PHASE_PERIOD)


@pytest.mark.slow
def test_sized_places_sites_by_a_previous_crawl(tmp_path: Path, redis_url: str) -> None:
    """`--partition sized --site-sizes DIR`: an embedded crawl of the web first; its crawl
    log gives each site's pages, and the cluster crawl of the same web places the sites on
    its three workers largest first. Every page is fetched by the worker whose shards hold
    its host (the placement `Sized` computes from those sizes) once the member list is
    stable: from one heartbeat interval after every worker's first fetch, plus 1.5 s for
    the batches leased before to end (while the workers register, the first one owns
    everything; a batch of a shard no longer the worker's is not renewed), all but a few
    pages (batches leased earlier that waited for their IP); coverage 1, overlap 0. A
    50 ms host delay makes a fifth of the crawl come after that."""
    spec = WebSpec(seed=12, hosts=60, pages_mean=40)
    before = tmp_path / "before"
    with serve_in_thread(spec, log_path=tmp_path / "web0.log") as web:
        resolve = web.write_resolve_file(tmp_path / "resolve0.txt")
        done = subprocess.run(
            gossamer(
                "crawl", web.url(0, 0), "-o", str(before), "--scope", "all",
                "--resolve-file", str(resolve), "--allow-private", "--delay", "0",
                "--user-agent", UA, "--no-warc", "-q",
            ),
            capture_output=True, text=True, timeout=120, check=False,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
    sizes = read_site_sizes(before)
    log = tmp_path / "web.log"
    out = tmp_path / "out"
    with serve_in_thread(spec, log_path=log) as web:
        resolve = web.write_resolve_file(tmp_path / "resolve.txt")
        seed = web.url(0, 0)
        extra = ["--partition", "sized", "--site-sizes", str(before), "--delay", "0.05"]
        crawl_id = crawl_with_three_workers(redis_url, seed, resolve, out, *extra)
        truth, report = audit_web(web, log, seed)
    assert report.coverage == 1.0 and report.overlap == 0.0, report.format_table()
    assert report.politeness_violations == 0, report.format_table()
    assert sum(sizes.values()) == len(truth.required)  # the first crawl found every page
    pages = check_finished(redis_url, crawl_id, len(truth.required), 3)
    assert all(n > 0 for n in pages.values()), pages
    members = [Member(w) for w in sorted(pages)]
    strategy = Sized(shard_weights(sizes))
    owned = {m.id: strategy.shards_for(m.id, members, 0.0) for m in members}
    fetched = [f for f in read_fetches(out, strict=True) if f.is_page]
    stable = workers_settled(fetched, owned, BEAT)
    late = [f for f in fetched if f.start >= stable + 1.5]
    outside = [f for f in late if shard_of(f.host) not in owned[f.worker]]
    assert len(late) >= len(fetched) // 8, (len(late), len(fetched))
    # a batch leased before the member list settled may still wait for its IP slot: a batch
    # or two (up to 20 pages each: 2-3 % seen); without the placement two thirds would be
    assert len(outside) <= 0.1 * len(late), [(f.worker, f.host) for f in outside[:10]]


def _web_records(web: RunningWeb, log: Path) -> list[LogRecord]:
    web.flush_log()
    return [r for r in read_logs([log]).records if r.host]


def _check_phase_property(
    web: RunningWeb,
    records: list[LogRecord],
    fetches: list[Fetch],
    *,
    period: float,
) -> None:
    owner = workers_of_connections(records, fetches)
    assert len(owner) >= len({r.conn for r in records}) * 0.9, "connections not matched"
    # The phases hold for a stable member list: while the workers register one by one, the
    # phase count (P = members) and the indices change, and leases taken under the old
    # list last to the end of their window. A worker fetches only after its first beat,
    # and the others know it one heartbeat interval (TTL / 5 = 1 s) after that beat: the
    # windows from then on are checked.
    stable = workers_settled(fetches, ("w1", "w2", "w3"), BEAT)
    first = math.ceil(stable / period)
    records = [r for r in records if r.start >= first * period]
    by_host = phase_windows(records, owner, period)
    shared = {key: ws for key, ws in by_host.items() if len(ws) > 1}
    assert not shared, f"hosts contacted by two workers within one phase: {sorted(shared)[:10]}"
    span = (records[-1].start - records[0].start) / period
    assert span >= 3, f"{span:.1f} phases checked: too few to test rotation"
    # the phases rotate: a host is fetched by more than one worker over the crawl
    workers_per_host: dict[str, set[str]] = defaultdict(set)
    for (_, host), ws in by_host.items():
        workers_per_host[host] |= ws
    assert any(len(ws) > 1 for ws in workers_per_host.values())
    # per IP: hosts of one IP whose shards fall in one phase class are one web server to
    # the phases, so it sees one worker per window
    phases = 3
    classes: dict[str, set[int]] = defaultdict(set)
    for h in web.model.hosts:
        classes[h.ip].add(shard_of(h.name) % phases)
    by_ip = phase_windows(records, owner, period, by="ip")
    shared_ip = {key: ws for key, ws in by_ip.items() if len(ws) > 1 and len(classes[key[1]]) == 1}
    assert not shared_ip, f"IPs contacted by two workers within one phase: {sorted(shared_ip)}"


# ---------------------------------------------------------------------------- joins


def _join_mid_crawl(
    tmp_path: Path, redis_url: str, partition: str, pages_max: int
) -> tuple[dict[str, int], list[Fetch], float, Any]:
    """Two workers crawl; after both fetched for a while a third joins. Returns the pages
    per worker, every worker's requests, the (server) time the third joined and the audit.

    The crawl lasts as long as its busiest IP's requests, one per JOIN_DELAY: uncapped 209
    pages (~22 s), capped at 60 pages a host 128, at 80 148; the join comes with over 300 URLs
    queued either way."""
    spec = WebSpec(seed=21, hosts=60, pages_mean=40, pages_max=pages_max)
    log = tmp_path / "web.log"
    out = tmp_path / "out"
    with serve_in_thread(spec, log_path=log) as web:
        resolve = web.write_resolve_file(tmp_path / "resolve.txt")
        seed = web.url(0, 0)
        config = settings_file(tmp_path, lease_ttl=LEASE_TTL)
        crawl_id = create_crawl(
            redis_url, seed, resolve, "--config", str(config), "--partition", partition,
            "--delay", str(JOIN_DELAY), "--per-host", str(JOIN_PER_HOST), "--heartbeat-ttl",
            str(JOIN_HEARTBEAT_TTL),
        )  # fmt: skip
        with worker_procs(out) as procs:
            for _ in range(2):
                start_worker(redis_url, crawl_id, out, procs)
            # read in this process (a `gossamer status` process takes seconds to start on a
            # loaded machine, while the crawl, paced by its host delay, goes on toward its end)
            each = 2 * JOIN_PER_HOST  # both fetched for a while: two batches each
            wait_for(
                f"{each} pages from both workers",
                lambda: sum(
                    1 for n in worker_pages(status_now(redis_url, crawl_id)).values() if n >= each
                ) == 2,
                30,
            )  # fmt: skip
            st = status_now(redis_url, crawl_id)
            assert st["frontier"]["queued"] > 300, "the crawl is nearly over before the join"
            start_worker(redis_url, crawl_id, out, procs)
            seen: list[float] = []  # the server's time when w3 was first seen crawling

            def joined() -> bool:
                s = status_now(redis_url, crawl_id)
                if any(w["id"] == "w3" and w["state"] != "starting" for w in s["workers"]):
                    seen.append(s["server_time"])
                return bool(seen)

            wait_for("w3 registered", joined, 20)
            # seen crawling: a little after its first beat, when the others may learn of it
            # (the grace below is counted from here and has a margin for that)
            joined_at = seen[0]
            codes = [p.wait(timeout=90) for p in procs]
        assert codes == [0, 0, 0], logs(out)
        truth, report = audit_web(web, log, seed)
    pages = check_finished(redis_url, crawl_id, len(truth.required), 3)
    return pages, read_fetches(out, strict=True), joined_at, report


@pytest.mark.slow
def test_a_worker_joining_a_dynamic_crawl_takes_a_share(tmp_path: Path, redis_url: str) -> None:
    pages, _, _, report = _join_mid_crawl(tmp_path, redis_url, "dynamic", pages_max=60)
    assert report.coverage == 1.0, report.format_table()
    assert report.overlap == 0.0, report.format_table()
    assert report.politeness_violations == 0 and report.ok, report.format_table()
    assert pages["w3"] > 0, pages


@pytest.mark.slow
def test_a_worker_joining_a_consistent_crawl_takes_only_its_shards(
    tmp_path: Path, redis_url: str
) -> None:
    """After w3 joins, the old workers fetch only hosts whose shards they own under the new
    membership (after a grace: one heartbeat interval to learn the new member list, one
    lease TTL for leases taken before, and the engine's lease renewals, bounded by
    RENEW_MAX_S = 2 s of holding an IP), and what moved from the old assignment to the new
    is exactly w3's shards (no shard moved between the old members).

    Fails when the old workers do not follow the join: run once by hand with
    `PartitionView.update` ignoring member lists after the first two, w1 went on fetching
    hosts of w3's shards to the end."""
    # 80 pages a host: the old workers fetch for seconds after the grace, where the check
    # below looks (on a loaded machine, where the join comes later: 88-126 late fetches; 57-133
    # capped at 60; 272 uncapped)
    pages, fetches, joined_at, report = _join_mid_crawl(
        tmp_path, redis_url, "consistent", pages_max=80
    )
    assert report.coverage == 1.0, report.format_table()
    assert report.overlap == 0.0, report.format_table()
    assert report.politeness_violations == 0 and report.ok, report.format_table()
    assert pages["w3"] > 0, pages
    strategy = Consistent()
    old = assignment(strategy, [Member("w1"), Member("w2")], 0.0)
    new = assignment(strategy, [Member("w1"), Member("w2"), Member("w3")], 0.0)
    moved = {s for s in range(SHARDS) if _owner(old, s) != _owner(new, s)}
    assert moved == new["w3"], "shards moved between old members"
    assert all(_owner(old, s) in ("w1", "w2") for s in moved)
    assert 0.2 * SHARDS < len(moved) < 0.5 * SHARDS  # ≈ Q/M
    # heartbeat interval; then a host leased before may stay with its worker for one lease
    # (extended while its batch runs) and the engine's renewals (RENEW_MAX_S = 2 s of
    # holding an IP, then one more batch); a margin for a loaded machine
    batch = JOIN_PER_HOST * (JOIN_DELAY + 0.05)
    grace = JOIN_HEARTBEAT_TTL / 5 + max(LEASE_TTL, 2.0 + batch) + 1.0
    late = [f for f in fetches if f.worker != "w3" and f.start > joined_at + grace]
    assert late, "no fetches by the old workers after the grace: the test shows nothing"
    wrong = [f for f in late if shard_of(f.host) not in (new[f.worker] or ())]
    assert not wrong, f"old workers fetched hosts they no longer own: {wrong[:5]}"
    mine = [f for f in fetches if f.worker == "w3"]
    assert all(shard_of(f.host) in (new["w3"] or ()) for f in mine)


def _owner(assigned: dict[str, frozenset[int] | None], shard: int) -> str:
    owners = [m for m, shards in assigned.items() if shards is not None and shard in shards]
    assert len(owners) == 1, (shard, owners)
    return owners[0]
