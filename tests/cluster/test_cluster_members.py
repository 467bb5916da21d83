"""Membership on a real Redis (and Redis Cluster), and the partition function it feeds."""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Iterator

import pytest

from gossamer.cluster._redis import RedisClient
from gossamer.cluster.members import MOURN_TTLS, Membership, PartitionView, WorkerStatus
from gossamer.frontier.redis import connect, disconnect
from gossamer.partition import SHARDS, Dynamic, Member, Modulo, Phase, assignment


@pytest.fixture
def client(redis_url: str) -> Iterator[RedisClient]:
    c = connect(redis_url)
    yield c
    c.close()


def status(wid: str, **kw: object) -> WorkerStatus:
    fields: dict[str, object] = {"machine": "m1", "pid": 100, "state": "crawling"}
    fields.update(kw)
    return WorkerStatus(wid, **fields)  # type: ignore[arg-type]


def test_ids_are_unique_under_concurrent_registration(client: RedisClient) -> None:
    ids: list[str] = []

    def register() -> None:
        m = Membership(client, "c1")
        ids.extend(m.new_id() for _ in range(50))

    threads = [threading.Thread(target=register) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(ids, key=lambda s: int(s[1:])) == [f"w{n}" for n in range(1, 201)]


def test_beats_list_live_members_with_capacities(client: RedisClient) -> None:
    m = Membership(client, "c1", ttl=5.0)
    a = m.beat(status("w1", capacity=2.0))
    assert a.members == (Member("w1", 2.0),) and a.expired  # a first beat registers
    b = m.beat(status("w2", hosts=("h1.example", "h2.example"), pages=7))
    assert set(b.members) == {Member("w1", 2.0), Member("w2", 1.0)} and not b.stop_requested
    assert not m.beat(status("w1", capacity=2.0)).expired
    now = time.time()
    listed = {s.id: s for s in m.statuses()}
    assert listed["w2"].hosts == ("h1.example", "h2.example") and listed["w2"].pages == 7
    assert abs(listed["w1"].last_beat - now) < 5
    assert [x.id for x in m.members()] == ["w1", "w2"]


def test_silent_workers_die_after_the_ttl_and_come_back(client: RedisClient) -> None:
    m = Membership(client, "c1", ttl=1.0)
    m.beat(status("w1"))
    m.beat(status("w2"))
    t0 = time.monotonic()
    time.sleep(0.2)
    assert {x.id for x in m.beat(status("w1")).members} == {"w1", "w2"}
    while len(m.beat(status("w1")).members) == 2:  # w1 beats on, w2 is silent
        assert time.monotonic() - t0 < 5, "w2 never died"
        time.sleep(0.1)
    assert time.monotonic() - t0 >= 0.95  # not before its TTL
    assert {s.id: s.state for s in m.statuses()} == {"w1": "crawling", "w2": "dead"}
    back = m.beat(status("w2"))  # a frozen worker thawed: same id, back in the list
    assert back.expired and [x.id for x in back.members] == ["w1", "w2"]


def test_the_dead_are_answered_with_their_incarnation_after_the_ttl(client: RedisClient) -> None:
    """A silent worker is answered dead (with the incarnation it died in) a TTL after its last
    beat, not before; back from a freeze it has a new incarnation and is not dead any more."""
    m = Membership(client, "c1", ttl=1.0)
    first = m.beat(status("w1"))
    w2 = m.beat(status("w2")).incarnation
    assert first.dead == {} and first.sent > 0
    t0 = time.monotonic()
    while not (dead := m.beat(status("w1")).dead):  # w1 beats on, w2 is silent
        assert time.monotonic() - t0 < 5, "w2 never counted dead"
        time.sleep(0.1)
    assert time.monotonic() - t0 >= 0.95  # not before its TTL
    assert dead == {"w2": w2}
    back = m.beat(status("w2"))  # thawed: a new incarnation, alive again
    assert back.expired and back.incarnation == w2 + 1
    assert m.beat(status("w1")).dead == {}
    assert m.beat(status("w2")).incarnation == w2 + 1  # (only an expired record bumps it)


def test_nobody_is_dead_until_a_ttl_of_beats_after_all_beats_stopped(client: RedisClient) -> None:
    """No beat from anyone for longer than the TTL (Redis paused, or down): every record
    looks old, but the first beat after it starts a new run of beats, and a worker counts
    dead only once it stayed silent for a TTL of that run — the others get their chance to
    beat again before their hosts are taken."""
    m = Membership(client, "c1", ttl=1.0)
    m.beat(status("w1"))
    m.beat(status("w2"))
    time.sleep(1.5)  # nobody beats (as through a Redis pause)
    t0 = time.monotonic()
    assert m.beat(status("w1")).dead == {}  # w2's beat is 1.5 s old, but the run just began
    while not m.beat(status("w1")).dead:
        assert time.monotonic() - t0 < 5, "w2 never counted dead"
        time.sleep(0.1)
    assert time.monotonic() - t0 >= 0.95


def test_the_long_dead_are_answered_no_more_and_still_shown(client: RedisClient) -> None:
    """A worker silent for MOURN_TTLS TTLs leaves the beats' answer (every live worker has
    reclaimed its leases by then), so what a beat returns does not grow with every worker the
    crawl ever had; `statuses` still shows it dead with its last beat, and back from its
    freeze it is a live member again, counted dead again if it falls silent again."""
    m = Membership(client, "c1", ttl=0.2)
    m.beat(status("w1"))
    w2 = m.beat(status("w2"))
    last = {s.id: s.last_beat for s in m.statuses()}["w2"]
    t0 = time.monotonic()
    while not m.beat(status("w1")).dead:
        assert time.monotonic() - t0 < 10, "w2 never counted dead"
        time.sleep(0.02)
    answered_at = time.monotonic()
    while m.beat(status("w1")).dead:  # w1 beats on, as a live worker does
        assert time.monotonic() - t0 < 30, "w2 answered dead for ever"
        time.sleep(0.02)
    # not before MOURN_TTLS TTLs of silence (~2 s here; it was answered from ~1 TTL)
    assert time.monotonic() - answered_at >= (MOURN_TTLS - 1.5) * 0.2
    shown = {s.id: s for s in m.statuses()}["w2"]
    assert shown.state == "dead" and shown.last_beat == last
    back = m.beat(status("w2"))
    assert back.expired and back.incarnation == w2.incarnation + 1
    assert {x.id for x in m.beat(status("w1")).members} == {"w1", "w2"}
    assert {s.id: s.state for s in m.statuses()}["w2"] == "crawling"
    t1 = time.monotonic()
    while not (dead := m.beat(status("w1")).dead):
        assert time.monotonic() - t1 < 10, "w2 never counted dead again"
        time.sleep(0.02)
    assert dead == {"w2": w2.incarnation + 1}


def test_deregister_leaves_at_once_and_keeps_the_last_record(client: RedisClient) -> None:
    m = Membership(client, "c1", ttl=5.0)
    m.beat(status("w1"))
    m.beat(status("w2"))
    m.ask_to_stop(["w2"])
    assert m.beat(status("w2")).stop_requested and not m.beat(status("w1")).stop_requested
    assert m.deregister(status("w2", state="stopped", pages=12)) == ""  # no crawl record
    assert m.stop_requested() == set()
    assert [x.id for x in m.beat(status("w1")).members] == ["w1"]
    last = {s.id: s for s in m.statuses()}["w2"]
    assert (last.state, last.pages) == ("stopped", 12)


def test_membership_in_one_slot_works_on_redis_cluster(redis_cluster_url: str) -> None:
    c = connect(redis_cluster_url)
    try:
        m = Membership(c, "cc", ttl=5.0)
        m.beat(status(m.new_id()))
        beat = m.beat(status(m.new_id(), capacity=3.0))
        assert beat.members == (Member("w1"), Member("w2", 3.0))
        m.ask_to_stop(["w1"])
        assert m.deregister(status("w1", state="stopped")) == ""
        assert [s.state for s in m.statuses()] == ["stopped", "crawling"]
    finally:
        disconnect(c)  # a RedisCluster client's close() leaves its nodes' sockets open


# ---------------------------------------------------------------------------- PartitionView


def test_dynamic_is_unrestricted_for_members_and_sizes_leases_by_capacity() -> None:
    view = PartitionView(Dynamic(), "w2")
    assert view.partition(100.0) == (frozenset(), 101.0)  # not listed yet: lease nothing
    assert view.lease_size(20) == 20
    view.update([Member("w1", 1.0), Member("w2", 3.0)])
    assert view.partition(100.0) == (None, math.inf)
    assert view.lease_size(20) == 30  # 20 x 3 / mean 2
    view.update([Member("w1", 1.0)])  # dropped (expired): nothing until it is back
    assert view.partition(100.0)[0] == frozenset() and view.problem


def test_a_worker_shares_the_hosts_by_capacity_under_dynamic_only() -> None:
    view = PartitionView(Dynamic(), "w2")
    assert view.share() is None  # not listed yet
    view.update([Member("w2", 3.0)])
    assert view.share() is None  # alone: no cap
    view.update([Member("w1", 1.0), Member("w2", 3.0)])
    assert view.share() == 0.75
    static = PartitionView(Modulo(), "w2")
    static.update([Member("w1", 1.0), Member("w2", 3.0)])
    assert static.share() is None  # its shards are its share already


def test_static_strategies_follow_the_member_list() -> None:
    members = [Member(f"w{i}") for i in range(1, 4)]
    views = {m.id: PartitionView(Modulo(), m.id) for m in members}
    for v in views.values():
        v.update(members)
    got = {wid: v.partition(5.0) for wid, v in views.items()}
    assert {wid: s for wid, (s, _) in got.items()} == assignment(Modulo(), members, 5.0)
    shards: set[int] = set()
    for s, until in got.values():
        assert s is not None and until == math.inf and not shards & s
        shards |= s
    assert shards == set(range(SHARDS))
    v = views["w1"]
    v.update(members[:2])  # w3 died: w1's share grows
    assert len(v.partition(5.0)[0] or ()) == SHARDS // 2


def test_phase_answers_hold_until_the_phase_ends() -> None:
    members = [Member("w1"), Member("w2")]
    view = PartitionView(Phase(period=10.0), "w1")
    view.update(members)
    s1, until1 = view.partition(12.0)
    assert until1 == 20.0 and s1 == Phase(period=10.0).shards_for("w1", members, 12.0)
    assert view.partition(19.9) == (s1, 20.0)
    s2, until2 = view.partition(20.0)
    assert until2 == 30.0 and s2 is not None and s1 is not None and not s1 & s2
    crowded = PartitionView(Phase(period=10.0, phases=1), "w2")
    crowded.update(members)  # two workers, one phase: w2 must not lease
    assert crowded.partition(3.0) == (frozenset(), 4.0) and "phases" in (crowded.problem or "")
