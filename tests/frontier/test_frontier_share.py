"""The fair share of the hosts in play, one contract over every share-capped backend: a pool
worker's `SharedSqliteFrontier` (two workers on one file) and the cluster's `RedisFrontier`
(two owners of one crawl; real redis-servers). Both count with frontier/_share.py: 4 hosts
and 2 workers of half a share each lease 2 each, never all 4 to the first; a worker over its
share (the second joined after the first leased all 4) counts 2 to give back, and after
giving them back counts none (resting hosts stay in play)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import xxhash
from _frontier_helpers import FakeClock

from gossamer.frontier import Discovered, Frontier, ShareCappedFrontier, SqliteFrontier
from gossamer.frontier._share import Share, count_limit, hosts_over_share, lease_room, share_cap
from gossamer.frontier.redis import RedisFrontier, connect, disconnect
from gossamer.frontier.sqlite import SharedSqliteFrontier

#: make(owner, share) -> that worker's frontier on the one crawl under test
Make = Callable[[str, Share], Frontier]


def _urls(host: str, n: int) -> list[Discovered]:
    out = []
    for i in range(n):
        url = f"http://{host}/page/{i}.html"
        out.append(Discovered(url, host, 1, xxhash.xxh3_64_intdigest(url.encode())))
    return out


@pytest.fixture(params=["sqlite", "redis_url", "redis_cluster_url"])
def make(request: pytest.FixtureRequest, tmp_path: Path, clock: FakeClock) -> Iterator[Make]:
    made: list[Frontier] = []
    if request.param == "sqlite":
        path = tmp_path / "frontier.sqlite"

        def build(owner: str, share: Share) -> Frontier:
            return SharedSqliteFrontier(path, share=share, clock=clock)
    else:
        client = connect(request.getfixturevalue(request.param))
        request.addfinalizer(lambda: disconnect(client))
        crawl = f"share{abs(hash(str(tmp_path)))}"

        def build(owner: str, share: Share) -> Frontier:
            return RedisFrontier(client, crawl, clock=clock, owner=owner, share=share)

    def _make(owner: str, share: Share) -> Frontier:
        f = build(owner, share)
        made.append(f)
        return f

    yield _make
    for f in made:
        if isinstance(f, RedisFrontier):
            f.delete()
        f.close()


def _over(f: Frontier) -> int:
    assert isinstance(f, ShareCappedFrontier)
    return f.hosts_over_share()


def test_the_arithmetic() -> None:
    assert share_cap(4, 0.5) == 2 and share_cap(0, 0.5) == 1 and share_cap(5, 0.5) == 3
    assert lease_room(64, 0, 0, 4, 0.5) == 2
    assert lease_room(64, 2, 2, 2, 0.5) == 0
    assert hosts_over_share(4, 4, 0, 0.5) == 2 and hosts_over_share(2, 2, 2, 0.5) == 0
    # counted up to count_limit, the hosts in play decide nothing more: the room is full
    for held, want in ((0, 64), (3, 61), (10, 5)):
        n = count_limit(held + want, 0.5)
        assert lease_room(want, held, n, 0, 0.5) == want


def test_two_workers_take_half_of_few_hosts_each(make: Make) -> None:
    a, b = make("w1", lambda: 0.5), make("w2", lambda: 0.5)
    hosts = [f"fair{i}.example" for i in range(4)]
    for h in hosts:
        a.put_discovered(_urls(h, 3))
    first = a.lease(64, 5)
    assert len(first) == 2
    assert a.lease(64, 5) == []  # a holds its share
    second = b.lease(64, 5)
    assert len(second) == 2
    assert sorted(x.host for x in first + second) == hosts
    assert (_over(a), _over(b)) == (0, 0)


def test_a_worker_over_its_share_counts_the_hosts_to_give_back(
    make: Make, clock: FakeClock
) -> None:
    shares: dict[str, float | None] = {"w1": None, "w2": None}
    a = make("w1", lambda: shares["w1"])
    b = make("w2", lambda: shares["w2"])
    hosts = [f"shed{i}.example" for i in range(4)]
    for h in hosts:
        a.put_discovered(_urls(h, 3))
    held = a.lease(64, 5)
    assert len(held) == 4 and _over(a) == 0  # alone: no share
    shares.update(w1=0.5, w2=0.5)  # a second worker joined
    assert (_over(a), _over(b)) == (2, 0)
    assert b.lease(64, 5) == []  # every host is leased
    back = sorted(held, key=lambda x: x.host)[:2]
    for x in back:
        a.complete(x.token, [], next_fetch_at=clock() + 10)  # given back, URLs unfetched
    a.reclaim_expired()  # (Redis: its index calls bring the counts now)
    assert _over(a) == 0  # the resting hosts count in play: it keeps its 2
    assert a.lease(64, 5) == []  # at its share
    assert b.lease(64, 5) == []  # the 2 given back rest for their delay
    clock.advance(10)
    taken = b.lease(64, 5)
    assert sorted(x.host for x in taken) == [x.host for x in back]
    assert sorted(len(x.urls) for x in taken) == [3, 3]  # their URLs, none lost
    assert (_over(a), _over(b)) == (0, 0)


def test_a_shared_sqlite_frontier_without_a_share_is_a_sqlite_frontier(
    tmp_path: Path, clock: FakeClock
) -> None:
    f = SharedSqliteFrontier(tmp_path / "f.sqlite", share=lambda: None, clock=clock)
    try:
        for i in range(4):
            f.put_discovered(_urls(f"all{i}.example", 2))
        assert len(f.lease(64, 5)) == 4 and f.hosts_over_share() == 0
        assert isinstance(f, SqliteFrontier)
    finally:
        f.close()
    # the embedded crawl's own frontier is not share-capped (the engine does not poll it)
    plain = SqliteFrontier(tmp_path / "g.sqlite", clock=clock)
    try:
        assert not isinstance(plain, ShareCappedFrontier)
    finally:
        plain.close()
