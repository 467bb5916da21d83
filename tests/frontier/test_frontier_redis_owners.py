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
