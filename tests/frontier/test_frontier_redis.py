"""What only the Redis frontier has: its seen-sets (exact, linear-hashed intsets; Bloom),
the crawl-wide choice of seen-set, the reclaim grace, and riding out a Redis restart. Real
redis-servers."""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import xxhash
from _frontier_helpers import FakeClock

import gossamer.frontier.redis._frontier as redis_frontier
from gossamer.frontier import Discovered, FrontierError, Outcome, StaleLeaseError, Verdict
from gossamer.frontier.redis import RedisFrontier, connect, disconnect
from gossamer.testweb.redisd import RedisServer


def _urls(host: str, n: int, start: int = 0) -> list[Discovered]:
    out = []
    for i in range(start, start + n):
        url = f"http://{host}/page/{i}.html"
        out.append(Discovered(url, host, 1, xxhash.xxh3_64_intdigest(url.encode())))
    return out


def _seen_sets(client: object, crawl: str) -> dict[bytes, tuple[bytes, int]]:
    c = client  # a redis.Redis
    return {
        key: (c.object("encoding", key), c.scard(key))  # type: ignore[attr-defined]
        for key in c.scan_iter(match=f"gs:{crawl}:*:s:*", count=1000)  # type: ignore[attr-defined]
    }


def test_exact_seen_set_stays_compact_and_exact_as_a_shard_grows(redis_url: str) -> None:
    client = connect(redis_url)
    try:
        f = RedisFrontier(client, "grow")
        items = _urls("big.example", 12_000)  # one host: one shard, many splits
        added = sum(f.put_discovered(items[k : k + 500]) for k in range(0, len(items), 500))
        assert added == 12_000
        assert f.put_discovered(items) == 0  # every one found again after the splits
        assert f.statistics().duplicates_seen == 12_000
        sets = _seen_sets(client, "grow")
        assert sum(n for _, n in sets.values()) == 12_000  # each fingerprint once
        assert all(enc == b"intset" and n <= 512 for enc, n in sets.values()), sets
        assert 12_000 / 400 <= len(sets) <= 12_000 / 100  # 100-400 a bucket
        used = sum(client.memory_usage(k) or 0 for k in sets)
        assert used / 12_000 < 10.5  # ~9 bytes a seen URL
        assert f.statistics().seen_false_positives == 0.0
    finally:
        disconnect(client)


@pytest.mark.parametrize("server", ["redis_url", "redis_cluster_url"])
def test_one_call_of_a_large_site_is_taken_whole(
    server: str, request: pytest.FixtureRequest
) -> None:
    # a sitemap or a seed list of 12,000 URLs of one host in one call: on Redis Cluster too
    # (one call per shard there, so its URLs must be cut: Lua's unpack takes < 8000 values)
    client = connect(request.getfixturevalue(server))
    try:
        f = RedisFrontier(client, "sitemap")
        assert f.put_discovered(_urls("big.example", 12_000)) == 12_000
        assert f.statistics().queued == 12_000
        b = f.lease(1, 500)
        assert len(b) == 1 and len(b[0].urls) == 500
        assert [u.url for u in b[0].urls][:2] == [
            "http://big.example/page/0.html",
            "http://big.example/page/1.html",
        ]
    finally:
        disconnect(client)


def test_a_split_moves_exactly_the_fingerprints_whose_next_bit_is_set(redis_url: str) -> None:
    # put.lua's split decides by comparing the stored integers with one threshold; run that
    # code at every level a shard reaches (0-14) against the bit it stands for
    from importlib import resources

    from gossamer.frontier.redis._keys import _seen_member

    src = (resources.files("gossamer.frontier.redis") / "lua" / "put.lua").read_text()
    start = src.index("local function dec_ge")
    split = src.index("local function split_one()")
    body = src[src.index("  if L == 0 then\n", split) : src.index("  if #moving > 0 then", split)]
    lua = (
        "local L, S = tonumber(ARGV[1]), tonumber(ARGV[2])\n"
        + src[start:split]
        + "local moving, members = {}, {}\n"
        + "for i = 3, #ARGV do members[#members + 1] = ARGV[i] end\n"
        + body
        + "return moving"
    )
    client = connect(redis_url)
    rng = random.Random(11)
    try:
        for level in range(15):
            for _ in range(8):
                s = rng.randrange(2**level)
                fps = [rng.randrange(2**64) >> level << level | s for _ in range(100)]
                top = (2**64 - 1) >> level << level | s  # the bucket's extremes
                fps += [s, top, 1 << level | s, top ^ (1 << level)]
                members = [_seen_member(fp) for fp in fps]
                moved = {m.decode() for m in client.eval(lua, 0, level, s, *members)}
                assert moved == {m for fp, m in zip(fps, members, strict=True) if fp >> level & 1}
    finally:
        disconnect(client)


def test_bloom_seen_set_counts_its_false_positives(redis_url: str) -> None:
    client = connect(redis_url)
    try:
        f = RedisFrontier(client, "bloomy", seen="bloom")
        items = _urls("b.example", 30_000)
        added = sum(f.put_discovered(items[k : k + 1000]) for k in range(0, len(items), 1000))
        lost = 30_000 - added  # new URLs the filter took as seen: never to be fetched
        s = f.statistics()
        assert s.queued == added and s.duplicates_seen == lost
        # the estimate follows what happened (a few per mille at ~10 bits a URL)
        assert s.seen_false_positives > 0
        assert lost <= 3 * s.seen_false_positives + 10
        assert lost < 0.01 * 30_000
        assert f.put_discovered(items) == 0  # no false negatives: everything added is seen
        bloom_bytes = sum(
            client.memory_usage(k) or 0 for k in client.scan_iter(match="gs:bloomy:*:b:*")
        )
        assert bloom_bytes / 30_000 < 4.0  # ~26 bits a URL here, against ~74 exact
    finally:
        disconnect(client)


def test_an_expired_lease_waits_out_the_reclaim_grace(redis_url: str) -> None:
    """With `reclaim_grace` g, a lease expired less than g ago stays its holder's: another
    worker neither reclaims nor leases the host, and the holder's late complete counts; once
    g has passed it is reclaimed as usual (and the holder's complete is refused)."""
    now = [1000.0]
    client = connect(redis_url)
    try:

        def frontier() -> RedisFrontier:
            return RedisFrontier(
                client, "grace", lease_ttl=10, reclaim_grace=4, clock=lambda: now[0]
            )

        a, b = frontier(), frontier()
        a.put_discovered(_urls("late.example", 3))
        (first,) = a.lease(1, 5)
        now[0] += 12  # expired 2 s ago: within the grace
        assert b.reclaim_expired() == 0
        assert b.lease(5, 5) == []  # the host is still a's
        a.complete(first.token, [Outcome(u.url, u.fp, Verdict.DONE, 200) for u in first.urls])
        assert b.statistics().done == 3

        a.put_discovered(_urls("third.example", 2))
        (held,) = a.lease(1, 5)
        now[0] += 10 + 4.5  # expired 4.5 s ago: past the grace
        assert b.reclaim_expired() == 2
        with pytest.raises(StaleLeaseError):
            a.complete(held.token, [Outcome(u.url, u.fp, Verdict.DONE, 200) for u in held.urls])
        assert [x.host for x in b.lease(5, 5)] == ["third.example"]
        with pytest.raises(ValueError, match="reclaim_grace"):
            RedisFrontier(client, "grace", reclaim_grace=-1)
    finally:
        disconnect(client)


def test_a_lease_outside_the_partition_is_not_renewed(redis_url: str) -> None:
    """A worker whose partition no longer holds a leased host's shard (a member joined)
    completes the batch but gets no renewal: the host goes back to the frontier for its
    owner. While the shard is still its own, the renewal comes as usual."""
    from gossamer.partition import shard_of

    host = "moved.example"
    owned: list[frozenset[int] | None] = [frozenset({shard_of(host)})]
    client = connect(redis_url)
    try:
        f = RedisFrontier(client, "moved", partition=lambda now: (owned[0], float("inf")))
        f.put_discovered(_urls(host, 6))
        (batch,) = f.lease(1, 2)
        ok = [Outcome(u.url, u.fp, Verdict.DONE, 200) for u in batch.urls]
        renewed = f.complete(batch.token, ok, renew=2)
        assert renewed is not None and len(renewed.urls) == 2
        owned[0] = frozenset({(shard_of(host) + 1) % 1024})  # the shard moved away
        ok = [Outcome(u.url, u.fp, Verdict.DONE, 200) for u in renewed.urls]
        assert f.complete(renewed.token, ok, renew=2) is None
        st = f.statistics()
        assert (st.done, st.queued, st.leased) == (4, 2, 0)
        assert f.lease(1, 2) == []  # not this worker's shard any more
        owned[0] = None  # ANY: dynamic
        assert [b.host for b in f.lease(1, 2)] == [host]
    finally:
        disconnect(client)


def test_a_crawl_of_another_frontier_layout_is_refused(redis_url: str) -> None:
    client = connect(redis_url)
    try:
        f = RedisFrontier(client, "layout")
        assert f.put_discovered(_urls("a.example", 3)) == 3
        assert client.get("gs:layout:{g}:layout") == b"3"
        assert RedisFrontier(client, "layout").statistics().queued == 3  # same layout: fine
        client.set("gs:layout:{g}:layout", "2")  # a crawl the previous gossamer wrote
        with pytest.raises(FrontierError, match="frontier layout 2; this one reads 3"):
            RedisFrontier(client, "layout")
        client.delete("gs:layout:{g}:layout")  # one an older gossamer wrote (layout 1)
        with pytest.raises(FrontierError, match="frontier layout 1; this one reads 3"):
            RedisFrontier(client, "layout")
        client.set("gs:layout:{g}:layout", "4")  # or a newer one
        with pytest.raises(FrontierError, match="frontier layout 4"):
            RedisFrontier(client, "layout")
    finally:
        disconnect(client)


def test_the_seen_set_kind_belongs_to_the_crawl(redis_url: str) -> None:
    client = connect(redis_url)
    try:
        RedisFrontier(client, "kind", seen="bloom")
        assert RedisFrontier(client, "kind", seen="bloom").seen == "bloom"
        with pytest.raises(FrontierError, match="bloom seen-set"):
            RedisFrontier(client, "kind")  # a worker deduping differently would refetch
        with pytest.raises(ValueError):
            RedisFrontier(client, "other", seen="cuckoo")
    finally:
        disconnect(client)


def test_calls_wait_out_a_redis_restart_and_lose_nothing_written(tmp_path: Path) -> None:
    with RedisServer(tmp_path, extra=("appendfsync always",)) as server:
        client = connect(server.url)
        try:
            f = RedisFrontier(client, "restart", retry_for=20.0)
            f.put_discovered(_urls("a.example", 50))
            batch = f.lease(1, 10)[0]
            server.kill()  # a crash: AOF (fsync always) has every acknowledged write
            outcomes = [Outcome(u.url, u.fp, Verdict.DONE, 200) for u in batch.urls]
            errors: list[BaseException] = []

            def complete() -> None:  # retries while the server is down
                try:
                    f.complete(batch.token, outcomes)
                except BaseException as exc:  # reported below
                    errors.append(exc)

            t = threading.Thread(target=complete)
            t.start()
            time.sleep(1.0)
            assert t.is_alive()  # still waiting for Redis
            server.restart()  # (from this thread: a server dies with the thread starting it)
            t.join(timeout=20)
            assert not t.is_alive() and not errors
            s = f.statistics()
            assert (s.done, s.queued, s.leased) == (10, 40, 0)
            assert f.put_discovered(_urls("a.example", 50)) == 0  # the seen-set came back
        finally:
            disconnect(client)


def test_an_unreachable_redis_is_a_storage_error_after_retry_for(tmp_path: Path) -> None:
    with RedisServer(tmp_path) as server:
        client = connect(server.url)
        try:
            f = RedisFrontier(client, "gone", retry_for=1.0)
            server.stop()
            started = time.monotonic()
            with pytest.raises(OSError, match="unreachable"):
                f.put_discovered(_urls("a.example", 1))
            assert 0.9 <= time.monotonic() - started < 10
        finally:
            disconnect(client)


# ---------------------------------------------------------------------- killed mid-relaxation
# With a max_depth, one put_discovered is several round trips (lua/depth.lua: edges, rounds
# of relax, then put.lua). A worker killed between two of them leaves its step half done; the
# pages it held are fetched again once their lease is reclaimed, and their links, offered
# again, must finish the step. Killed after every round trip in turn (and part-way through a
# pipeline), the crawl still fetches every page within max_depth.


class _Killed(BaseException):
    """The worker's process is gone (no frontier code may catch it)."""


class _DiesAt(RedisFrontier):
    """Dies before its `die_at`-th script call; a pipeline that reaches it ran its first
    calls only (a process killed while Redis read its pipeline)."""

    def __init__(self, *args: Any, die_at: int, **kw: Any) -> None:
        super().__init__(*args, **kw)
        self.left = die_at

    def _shard_many(self, calls: Sequence[tuple[str, int, Sequence[Any]]]) -> list[Any]:
        if self.left < len(calls):
            if self.left > 0:
                super()._shard_many(calls[: self.left])
            self.left = 0
            raise _Killed
        self.left -= len(calls)
        return super()._shard_many(calls)

    def _put(self, items: Sequence[Discovered]) -> int:
        if self.left <= 0:
            raise _Killed
        self.left -= 1
        return super()._put(items)


def _page(host: str, depth: int, parent: Discovered | None = None) -> Discovered:
    url = f"http://{host}/"
    fp = xxhash.xxh3_64_intdigest(url.encode())
    up, upfp = (None, None) if parent is None else (parent.url, parent.fp)
    return Discovered(url, host, depth, fp, depth, up, upfp, 1)


def _crawl_killed_once(client: Any, crawl: str, die_at: int) -> tuple[dict[str, int], bool]:
    """The contract's relaxation case (P found at 2, later at 0: its done child C lowered, C's
    parked child D queued, D's child E queued) on host-per-page pages, the worker killed at
    its `die_at`-th script call and replaced. Returns url -> depth fetched (the last time),
    and whether the worker died."""
    clock = FakeClock()
    p = _page("p.example", 2)
    c = _page("c.example", 3, p)
    d = _page("d.example", 4, c)
    e = _page("e.example", 5, d)
    links = {p.url: [c], c.url: [d], d.url: [e]}
    got: dict[str, int] = {}

    def fetch(f: RedisFrontier) -> None:
        while batches := f.lease(10, 10):
            for b in batches:
                for u in b.urls:
                    got[u.url] = u.depth
                    kids = [replace(k, depth=u.depth + 1, priority=u.depth + 1)
                            for k in links.get(u.url, [])]  # fmt: skip
                    if kids:
                        f.put_discovered(kids)
                f.complete(b.token, [Outcome(u.url, u.fp, Verdict.DONE, status=200)
                                     for u in b.urls])  # fmt: skip

    steps: list[tuple[bool, Callable[[RedisFrontier], object]]] = [  # (a page's offer?, step)
        (True, lambda f: f.put_discovered([p])),
        (False, fetch),
        (True, lambda f: f.put_discovered([_page("p.example", 0)])),  # P linked from a seed
        (False, fetch),
    ]
    f: Any = _DiesAt(client, crawl, clock=clock, max_depth=3, lease_ttl=5.0,
                               die_at=die_at)  # fmt: skip
    died = False
    for offer, step in steps:
        try:
            step(f)
        except _Killed:
            died = True
            clock.advance(10.0)  # its leases expire: the replacement fetches its pages again
            f = RedisFrontier(client, crawl, clock=clock, max_depth=3, lease_ttl=5.0)
            if offer:
                step(f)  # the page that made the offer is fetched again: the same offer
    if not died:
        f.left = 1 << 30  # (the statistics below are no step of the crawl)
    fetch(f)
    s = f.statistics()
    assert (s.queued, s.leased) == (0, 0)
    f.close()
    return got, died


@pytest.mark.parametrize("held", [1, 512])  # marks cleared after each put, or held
@pytest.mark.parametrize("server", ["redis_url", "redis_cluster_url"])
def test_a_worker_killed_between_two_calls_of_a_relaxation_loses_nothing(
    server: str, held: int, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(redis_frontier, "_CLEARS_HELD", held)
    client = connect(request.getfixturevalue(server))
    # D and E at their depths through P at 0; P and C at 2 and 3, or at 0 and 1 when the
    # killed worker held them (fetched again once P was found closer)
    want = {"http://d.example/": 2, "http://e.example/": 3}
    try:
        for k in range(1, 200):
            got, died = _crawl_killed_once(client, f"kill{k}", k)
            assert {u: got.get(u) for u in want} == want, f"killed at call {k}"
            assert {got["http://p.example/"], got["http://c.example/"] - 1} <= {0, 2}, k
            if not died:
                break
        else:
            pytest.fail("never ran to the end")
        assert k > 10  # (the case has that many calls to be killed at)
    finally:
        disconnect(client)


def test_a_cycle_of_edges_adding_no_depth_is_relaxed_once(redis_url: str) -> None:
    """A page canonical to itself (an edge adding no depth back to the page): lowering it
    must not replay its own lowering forever (its lw mark answers `lowered` again at the same
    depth; the call expands a (URL, depth) once)."""
    client = connect(redis_url)
    try:
        f = RedisFrontier(client, "selfloop", max_depth=3)
        p = _page("p.example", 2)
        f.put_discovered([p])
        (batch,) = f.lease(1, 1)
        itself = replace(p, parent=p.url, parent_fp=p.fp, delta=0)  # rel=canonical to itself
        f.put_discovered([itself, _page("c.example", 3, p)])
        done = [Outcome(u.url, u.fp, Verdict.DONE, status=200) for u in batch.urls]
        f.complete(batch.token, done)
        finished = threading.Event()

        def lower() -> None:
            f.put_discovered([_page("p.example", 0)])  # P found from a seed
            finished.set()

        threading.Thread(target=lower, daemon=True).start()
        assert finished.wait(20), "put_discovered replayed the self-loop forever"
        got = {u.url: u.depth for b in f.lease(5, 5) for u in b.urls}
        assert got == {"http://c.example/": 1}
    finally:
        disconnect(client)
