"""The Redis frontier's lease owners: a dead worker's leases come back as soon as its death is
reported (not when they expire), a worker back from a freeze keeps the leases of its new
incarnation, and a fair share caps how many hosts one worker takes while others have none.
Real redis-servers: one Redis and a 3-master Redis Cluster."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import xxhash
from _frontier_helpers import FakeClock

from gossamer.frontier import Discovered, Outcome, StaleLeaseError, Verdict
from gossamer.frontier.redis import RedisClient, RedisFrontier, connect, disconnect, token_owner

SERVERS = ["redis_url", "redis_cluster_url"]
TTL = 120.0  # the default lease TTL: what a dead worker's hosts waited for before


def _urls(host: str, n: int) -> list[Discovered]:
    out = []
    for i in range(n):
        url = f"http://{host}/page/{i}.html"
        out.append(Discovered(url, host, 1, xxhash.xxh3_64_intdigest(url.encode())))
    return out


@pytest.fixture(params=SERVERS)
def client(request: pytest.FixtureRequest) -> Iterator[RedisClient]:
    c = connect(request.getfixturevalue(request.param))
    yield c
    disconnect(c)


def _done(batch_urls: tuple[object, ...]) -> list[Outcome]:
    return [Outcome(u.url, u.fp, Verdict.DONE, 200) for u in batch_urls]  # type: ignore[attr-defined]


def test_a_dead_owners_leases_come_back_at_once(client: RedisClient) -> None:
    clock = FakeClock()
    dead: dict[str, int] = {}
    hosts = [f"site{i}.example" for i in range(4)]

    def worker(owner: str) -> RedisFrontier:
        return RedisFrontier(
            client, "owners", clock=clock, lease_ttl=TTL, default_delay=1.0, owner=owner,
            dead_owners=lambda: dead,
        )  # fmt: skip

    a, b = worker("w1"), worker("w2")
    for h in hosts:
        a.put_discovered(_urls(h, 3))
    held = a.lease(64, 5)
    assert sorted(x.host for x in held) == hosts
    assert {token_owner(x.token) for x in held} == {("w1", 0)}
    assert b.lease(64, 5) == []  # every host is a's

    dead["w1"] = 0  # a's heartbeat expired (cluster.members reports it)
    st = b.statistics()
    assert (st.queued, st.leased) == (0, 12)
    # b's next lease reclaims them: every URL queued again, the hosts ready one delay later
    # (a's last request may have just ended)
    assert b.lease(64, 5) == []
    st = b.statistics()
    assert (st.queued, st.leased) == (12, 0)
    clock.advance(1.0)
    # far before the leases' expiry (TTL = 120 s), b gets every host back, every URL with it
    taken = b.lease(64, 5)
    assert sorted(x.host for x in taken) == hosts
    assert sum(len(x.urls) for x in taken) == 12
    st = b.statistics()
    assert (st.queued, st.leased, st.done) == (0, 12, 0)
    # a's late completion (a zombie: it was only frozen) is refused: fetched once more at most
    for x in held:
        with pytest.raises(StaleLeaseError):
            a.complete(x.token, _done(x.urls))
    for x in taken:
        b.complete(x.token, _done(x.urls))
    assert b.statistics().done == 12
    assert b.statistics().leased == 0


def test_a_worker_back_from_a_freeze_keeps_its_new_incarnations_leases(
    client: RedisClient,
) -> None:
    clock = FakeClock()
    dead = {"w1": 0}  # incarnation 0 of w1 died; w1 came back as incarnation 1
    a = RedisFrontier(client, "back", clock=clock, lease_ttl=TTL, owner="w1", dead_owners=dict)
    b = RedisFrontier(client, "back", clock=clock, lease_ttl=TTL, owner="w2",
                      dead_owners=lambda: dead)  # fmt: skip
    a.incarnation = 1
    a.put_discovered(_urls("back.example", 2))
    (batch,) = a.lease(1, 5)
    assert token_owner(batch.token) == ("w1", 1)
    assert b.lease(1, 5) == []  # the death of incarnation 0 leaves incarnation 1's lease
    assert b.reclaim_expired() == 0  # and so does the periodic sweep
    assert a.extend(batch.token, clock() + 1) > clock()  # still a's
    dead["w1"] = 1  # it dies again
    assert b.reclaim_expired() == 2  # the sweep reclaims it too
    with pytest.raises(StaleLeaseError):
        a.extend(batch.token, clock() + 1)
    with pytest.raises(StaleLeaseError):
        a.complete(batch.token, _done(batch.urls))
    with pytest.raises(ValueError, match="owner"):
        RedisFrontier(client, "back", owner="w-1")


def test_a_worker_takes_its_share_of_few_hosts(client: RedisClient) -> None:
    """4 hosts, 2 idle workers of equal capacity: each leases 2, not the first one all 4 (the
    first lease's count of hosts in play: 4 ready shards; then 2 leases out + 2 ready)."""
    clock = FakeClock()
    half = 0.5

    def worker(owner: str) -> RedisFrontier:
        return RedisFrontier(client, "fair", clock=clock, owner=owner, share=lambda: half)

    a, b = worker("w1"), worker("w2")
    hosts = [f"fair{i}.example" for i in range(4)]
    for h in hosts:
        a.put_discovered(_urls(h, 3))
    first = a.lease(64, 5)
    assert len(first) == 2
    assert a.lease(64, 5) == []  # a holds its share
    second = b.lease(64, 5)
    assert len(second) == 2
    assert sorted(x.host for x in first + second) == hosts
    # one worker alone (share None: it is the only member) takes what is ready
    for x in first:
        a.complete(x.token, [])  # nothing fetched: the URLs go back
    half_none = RedisFrontier(client, "fair", clock=clock, owner="w3", share=lambda: None)
    assert len(half_none.lease(64, 5)) == 2


def test_a_worker_over_its_share_counts_the_hosts_to_give_back(client: RedisClient) -> None:
    """4 hosts leased by a worker alone (no share); a second joins (1/2 each): the first is 2
    hosts over its share, the second none, with no round trip. Once it gave 2 back (nothing
    fetched, resting 10 s) it is over by none, the resting hosts still counted in play (out
    of play, its cap would be 1 of the 2 leased and it would give back another); the second
    leases the 2 once they are ready, not before."""
    clock = FakeClock()
    shares: dict[str, float | None] = {"w1": None, "w2": None}

    def worker(owner: str) -> RedisFrontier:
        return RedisFrontier(
            client, "shed", clock=clock, owner=owner, share=lambda: shares[owner]
        )

    a, b = worker("w1"), worker("w2")
    assert a.hosts_over_share() == 0  # nothing held, nothing counted yet
    hosts = [f"shed{i}.example" for i in range(4)]
    for h in hosts:
        a.put_discovered(_urls(h, 3))
    held = a.lease(64, 5)
    assert len(held) == 4 and a.hosts_over_share() == 0  # alone: no share
    shares.update(w1=0.5, w2=0.5)  # w2 is in the member list now
    assert (a.hosts_over_share(), b.hosts_over_share()) == (2, 0)
    assert b.lease(64, 5) == []  # every host is leased
    back = sorted(held, key=lambda x: x.host)[:2]
    for x in back:
        a.complete(x.token, [], next_fetch_at=clock() + 10)  # given back, URLs unfetched
    assert a.hosts_over_share() == 0
    a.reclaim_expired()  # (its index calls: the counts now, 2 leased, 2 resting)
    assert a.hosts_over_share() == 0
    assert a.lease(64, 5) == []  # at its share
    assert b.lease(64, 5) == []  # the 2 given back rest for their delay
    clock.advance(10)
    taken = b.lease(64, 5)
    assert sorted(x.host for x in taken) == [x.host for x in back]
    assert sorted(len(x.urls) for x in taken) == [3, 3]  # their URLs, none lost
    assert (a.hosts_over_share(), b.hosts_over_share()) == (0, 0)
    a.delete()
