"""The digest store (`gossamer.frontier.digests`): one contract over every backend (a dict, an
SQLite file, a real redis-server, a real 3-master Redis Cluster), a second opener seeing what
the first added, the first capture of a digest kept, and the Redis keys under the crawl's
prefix (deleted with the crawl)."""

from __future__ import annotations

import hashlib
import multiprocessing
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import redis

from gossamer.frontier.digests import (
    CHECKPOINT_EVERY,
    Capture,
    DigestStore,
    MemoryDigestStore,
    RedisDigestStore,
    SqliteDigestStore,
)
from gossamer.frontier.redis import RedisFrontier, connect, disconnect


def digest(k: int) -> bytes:
    return hashlib.sha1(b"payload %d" % k).digest()


@pytest.fixture(params=["memory", "sqlite", "redis", "redis-cluster"])
def opener(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Callable[[], DigestStore]]:
    """How to open the same (first empty) store again, as another worker would."""
    if request.param == "memory":
        shared = MemoryDigestStore()
        yield lambda: shared
    elif request.param == "sqlite":
        yield lambda: SqliteDigestStore(tmp_path / "digests.sqlite")
    else:
        url = request.getfixturevalue("redis_url" if request.param == "redis" else
                                      "redis_cluster_url")  # fmt: skip
        clients: list[redis.Redis | redis.cluster.RedisCluster] = []
        crawl = f"dg{tmp_path.name[-12:].replace('_', '')}"  # a crawl of its own

        def open_redis() -> RedisDigestStore:
            clients.append(connect(url))
            return RedisDigestStore(clients[-1], crawl)

        yield open_redis
        RedisFrontier(clients[0], crawl).delete()
        for client in clients:
            disconnect(client)


def test_the_first_capture_of_a_digest_is_kept_and_seen_by_every_opener(
    opener: Callable[[], DigestStore],
) -> None:
    a, b = opener(), opener()
    assert a.get(digest(1)) is None
    first = Capture("http://a.example/x?q=1", 1_790_000_000.123456)
    odd = Capture("http://b.example/\u00fc/\udcff", 0.5)  # non-ASCII, a lone surrogate
    a.add([(digest(1), first), (digest(2), odd), (digest(1), Capture("http://later/", 9.0))])
    a.add([])
    assert b.get(digest(1)) == first  # exact: the URI, and the time to the microsecond
    assert b.get(digest(2)) == odd
    b.add([(digest(1), Capture("http://c.example/", 2.0)), (digest(3), first)])
    assert a.get(digest(1)) == first and a.get(digest(3)) == first
    assert a.get(digest(4)) is None
    for store in (a, b):
        store.close()


def _add_many(path: Path, start: int) -> None:
    store = SqliteDigestStore(path)
    for k in range(start, start + 200, 10):
        batch = [(digest(j), Capture(f"http://p{start}/{j}", float(j))) for j in range(k, k + 10)]
        store.add(batch)
    store.close()


def test_processes_adding_at_once_to_one_sqlite_file(tmp_path: Path) -> None:
    """Two processes (a pool's workers) adding overlapping digests: every digest once, with
    the capture of whichever added it first."""
    path = tmp_path / "digests.sqlite"
    ctx = multiprocessing.get_context("fork")
    procs = [ctx.Process(target=_add_many, args=(path, s)) for s in (0, 100)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=60)
        assert p.exitcode == 0
    store = SqliteDigestStore(path)
    assert len(store) == 300
    for j in range(300):
        capture = store.get(digest(j))
        assert capture is not None and capture.date == float(j)
        assert capture.uri in (f"http://p0/{j}", f"http://p100/{j}")
    store.close()


def test_redis_keys_live_under_the_crawl_and_go_with_it(redis_url: str) -> None:
    client = connect(redis_url)
    try:
        store = RedisDigestStore(client, "dgkeys")
        store.add([(digest(k), Capture(f"http://a.example/{k}", 1.0)) for k in range(5)])
        keys = sorted(client.keys(b"gs:dgkeys:*"))
        assert keys == sorted(b"gs:dgkeys:dg:" + digest(k) for k in range(5))
        assert RedisDigestStore(client, "other").get(digest(0)) is None  # another crawl's
        assert RedisFrontier(client, "dgkeys").delete() >= 5  # (and the frontier's own)
        assert not client.keys(b"gs:dgkeys:*") and store.get(digest(0)) is None
    finally:
        disconnect(client)


def test_sqlite_commits_leave_checkpoints_to_maintain(tmp_path: Path) -> None:
    """No checkpoint (its fsyncs) in a commit, on the event loop's thread: one is due every
    CHECKPOINT_EVERY commits, done by `maintain` (run off the loop) on its own connection."""
    path = tmp_path / "digests.sqlite"
    store = SqliteDigestStore(path)
    wal = tmp_path / "digests.sqlite-wal"
    for k in range(CHECKPOINT_EVERY):
        assert not store.maintenance_due()
        store.add([(digest(k), Capture(f"http://a/{k}", float(k)))])
    grown = wal.stat().st_size
    assert grown > 4096 * CHECKPOINT_EVERY // 2  # every commit's pages still in the WAL
    assert store.maintenance_due() and not store.maintenance_due()  # once a round
    reader = SqliteDigestStore(path)
    store.maintain()
    store.add([(digest(-1), Capture("http://a/x", 0.0))])
    assert wal.stat().st_size == grown  # checkpointed: the WAL is written from its start again
    assert all(reader.get(digest(k)) == Capture(f"http://a/{k}", float(k)) for k in range(100))
    for s in (store, reader):
        s.close()
