"""The robots store (`gossamer.robots_store`): one contract over every backend (a dict, an
SQLite file, a real redis-server, a real 3-master Redis Cluster), expiry from the stored
fetch time with an injected clock, SIGKILL consistency of the SQLite file, and two crawlers
sharing one store fetching each host's robots.txt once."""

from __future__ import annotations

import asyncio
import multiprocessing
import os
import signal
import sqlite3
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis

from gossamer.config import CrawlSettings
from gossamer.engine.crawler import Crawler
from gossamer.fetch import FetchRequest, FetchResult
from gossamer.frontier import MemoryFrontier
from gossamer.frontier.redis import RedisFrontier, connect, disconnect
from gossamer.partition import shard_of
from gossamer.robots import ROBOTS_MAX_BYTES, UNAVAILABLE_TTL, RobotsPolicy
from gossamer.robots_store import (
    REDIS_TTL_MARGIN,
    STORED_BODY_MAX,
    MemoryRobotsStore,
    RedisRobotsStore,
    RobotsRecord,
    RobotsStore,
    SharedRobots,
    SqliteRobotsStore,
)

UA = "gossamer/0.1 (+https://gossamer.invalid/bot)"
DAY = 86400.0
BODY = b"User-agent: *\nDisallow: /private\nCrawl-delay: 2\nSitemap: /sitemap.xml\n"


@pytest.fixture(params=["memory", "sqlite", "redis", "redis-cluster"])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[str, object]]:
    """(name, how to open the same store again): a fresh, empty store of each backend."""
    if request.param == "memory":
        shared = MemoryRobotsStore()
        yield "memory", lambda: shared
    elif request.param == "sqlite":
        yield "sqlite", lambda: SqliteRobotsStore(tmp_path / "robots.sqlite")
    else:
        fixture = "redis_url" if request.param == "redis" else "redis_cluster_url"
        url = request.getfixturevalue(fixture)
        clients: list[redis.Redis | redis.cluster.RedisCluster] = []

        def open_redis() -> RedisRobotsStore:
            clients.append(connect(url))
            return RedisRobotsStore(clients[-1], "c1")

        yield request.param, open_redis
        for client in clients:
            disconnect(client)


def _open(backend: tuple[str, object]) -> RobotsStore:
    opener = backend[1]
    assert callable(opener)
    store: RobotsStore = opener()
    return store


RECORDS = [
    RobotsRecord(200, BODY, "http://a.example/robots.txt", 1_700_000_000.123456),
    RobotsRecord(200, b"", "http://a.example/robots.txt", 0.0),  # an empty file
    RobotsRecord(200, b"\n\x00\xff\xfe binary\n\n", "http://a.example/moved/r.txt", 1.5),
    RobotsRecord(404, b"", "http://a.example/robots.txt", 2.0),
    RobotsRecord(503, b"", "http://a.example/robots.txt", 3.0),
    RobotsRecord(None, b"", "https://a.example:8443/robots.txt", 4.0),  # no answer
    RobotsRecord(None, b"", "http://a.example/robots.txt", 5.0, "fetch/error/dns"),  # its cause
]


def test_absent_host_is_none(backend: tuple[str, object]) -> None:
    store = _open(backend)
    assert store.get("a.example") is None
    store.close()


@pytest.mark.parametrize(
    "record", RECORDS, ids=lambda r: f"{r.status}-{len(r.body)}{'-' * bool(r.error)}{r.error or ''}"
)
def test_a_record_comes_back_as_it_was_put(
    backend: tuple[str, object], record: RobotsRecord
) -> None:
    store = _open(backend)
    store.put("a.example", record)
    assert store.get("a.example") == record
    store.close()


def test_put_replaces_and_hosts_are_apart(backend: tuple[str, object]) -> None:
    store = _open(backend)
    hosts = ["a.example", "a.example:8080", "[::1]:8080", "127.0.0.1", "xn--bcher-kva.example"]
    for k, host in enumerate(hosts):
        store.put(host, RobotsRecord(200, f"# {host}\n".encode(), f"http://{host}/robots.txt", k))
    store.put("a.example", RECORDS[3])
    assert store.get("a.example") == RECORDS[3]
    for k, host in enumerate(hosts[1:], 1):
        got = store.get(host)
        assert got is not None and got.body == f"# {host}\n".encode() and got.fetched_at == k
    store.close()


def test_every_opener_of_the_crawl_sees_the_others_records(backend: tuple[str, object]) -> None:
    """Two workers (two connections, or two clients) share the store."""
    first, second = _open(backend), _open(backend)
    first.put("a.example", RECORDS[0])
    assert second.get("a.example") == RECORDS[0]
    second.put("a.example", RECORDS[4])
    assert first.get("a.example") == RECORDS[4]
    first.close()
    second.close()


def test_a_long_file_is_cut_as_the_first_parse_cut_it(backend: tuple[str, object]) -> None:
    """Only STORED_BODY_MAX bytes are kept; the policy rebuilt from them is the one the full
    body gave (the rules past 500 KiB ignored, the line cut at the limit dropped)."""
    rule = b"Disallow: /d%06d\n"
    body = b"User-agent: *\n" + b"".join(rule % k for k in range(40_000))  # 760,014 bytes
    assert len(body) > ROBOTS_MAX_BYTES
    cut_line = (ROBOTS_MAX_BYTES - 14) // 19  # the rule the 500 KiB limit cuts in two
    assert (ROBOTS_MAX_BYTES - 14) % 19  # (in two: not at its end)
    record = RobotsRecord.of(200, body, "http://a.example/robots.txt", 10.0)
    assert len(record.body) == STORED_BODY_MAX
    store = _open(backend)
    store.put("a.example", record)
    stored = store.get("a.example")
    store.close()
    assert stored == record
    full = RobotsPolicy.from_response(200, body, user_agent=UA, now=10.0)
    again = stored.policy(UA)
    for k in (0, cut_line - 1, cut_line, cut_line + 1, 39_999):
        url = f"http://a.example/d{k:06d}"
        assert again.allowed(url) == full.allowed(url), k
    assert not again.allowed(f"http://a.example/d{cut_line - 1:06d}")
    assert again.allowed(f"http://a.example/d{cut_line:06d}")  # the cut line is dropped


def test_only_a_2xx_body_is_kept() -> None:
    assert RobotsRecord.of(404, b"not found page", "u", 1.0).body == b""
    assert RobotsRecord.of(None, None, "u", 1.0).body == b""
    assert RobotsRecord.of(200, None, "u", 1.0).body == b""
    assert RobotsRecord.of(200, BODY, "u", 1.0).body == BODY


# ---------------------------------------------------------------- SharedRobots and expiry
class CountingStore(MemoryRobotsStore):
    def __init__(self) -> None:
        super().__init__()
        self.gets = 0

    def get(self, host: str) -> RobotsRecord | None:
        self.gets += 1
        return super().get(host)


def test_a_second_worker_reads_the_first_workers_answer_until_it_expires(
    backend: tuple[str, object],
) -> None:
    """Expiry comes from the stored fetch time (an injected clock: `now` arguments)."""
    store = _open(backend)
    w1 = SharedRobots(store, user_agent=UA, ttl=DAY)
    w2 = SharedRobots(store, user_agent=UA, ttl=DAY)
    t0 = 1_000_000.0
    assert w1.get("a.example", t0) is None  # nobody fetched it yet
    policy = w1.put("a.example", RobotsRecord.of(200, BODY, "http://a.example/robots.txt", t0))
    assert policy.kind == "parsed" and policy.crawl_delay == 2.0
    assert policy.sitemaps == ("http://a.example/sitemap.xml",)
    got = w2.get("a.example", t0 + DAY - 1)
    assert got is not None
    assert (got.kind, got.crawl_delay, got.sitemaps, got.fetched_at, got.expires_at) == (
        "parsed", 2.0, policy.sitemaps, t0, t0 + DAY,
    )  # fmt: skip
    assert not got.allowed("http://a.example/private/x") and got.allowed("http://a.example/x")
    assert w2.statistics().store_hits == 1
    # a day after the fetch, neither worker (cache or store) has a valid answer
    assert w1.get("a.example", t0 + DAY) is None
    assert w2.get("a.example", t0 + DAY) is None
    assert SharedRobots(store, user_agent=UA).get("a.example", t0 + DAY) is None
    # the next holder of the host fetches again and replaces the record for everyone
    w2.put("a.example", RobotsRecord.of(404, b"", "http://a.example/robots.txt", t0 + DAY))
    fresh = SharedRobots(store, user_agent=UA).get("a.example", t0 + DAY + 1)
    assert fresh is not None and fresh.kind == "allow-all"
    store.close()


def test_an_unreachable_robots_txt_is_retried_after_the_unavailable_ttl(
    backend: tuple[str, object],
) -> None:
    store = _open(backend)
    w1 = SharedRobots(store, user_agent=UA)
    w1.put("a.example", RobotsRecord.of(503, b"busy", "http://a.example/robots.txt", 100.0))
    w2 = SharedRobots(store, user_agent=UA)
    got = w2.get("a.example", 100.0 + UNAVAILABLE_TTL - 0.5)
    assert got is not None and got.kind == "disallow-all"
    assert not got.allowed("http://a.example/")
    assert SharedRobots(store, user_agent=UA).get("a.example", 100.0 + UNAVAILABLE_TTL) is None
    assert w2.statistics().store_hits == 1
    store.close()


def test_the_ttl_setting_bounds_the_age_of_a_stored_answer() -> None:
    store = MemoryRobotsStore()
    store.put("a.example", RobotsRecord.of(200, BODY, "http://a.example/robots.txt", 0.0))
    short = SharedRobots(store, user_agent=UA, ttl=3600)
    assert short.get("a.example", 3599.0) is not None
    assert SharedRobots(store, user_agent=UA, ttl=3600).get("a.example", 3600.0) is None
    assert short.statistics().store_expired == 0
    assert CrawlSettings().politeness.robots_ttl == DAY
    with pytest.raises(ValueError, match="robots_ttl"):
        CrawlSettings(robots_ttl=DAY + 1)  # RFC 9309 §2.4: not over a day


def test_the_cache_answers_first_and_a_miss_asks_the_store_once() -> None:
    store = CountingStore()
    robots = SharedRobots(store, user_agent=UA)
    assert robots.get("a.example", 1.0) is None and store.gets == 1
    robots.put("a.example", RobotsRecord.of(200, BODY, "http://a.example/robots.txt", 1.0))
    for t in range(2, 50):
        assert robots.get("a.example", float(t)) is not None
    assert store.gets == 1  # parsed policies come from the cache
    other = SharedRobots(store, user_agent=UA)
    for t in range(2, 50):
        assert other.get("a.example", float(t)) is not None
    assert store.gets == 2  # read (and parsed) once by the other worker
    alone = SharedRobots(None, user_agent=UA)
    assert alone.get("a.example", 2.0) is None  # no store: this worker's cache only


def test_each_agent_gets_its_own_group_from_the_same_stored_file() -> None:
    body = b"User-agent: gossamer\nDisallow: /\n\nUser-agent: *\nAllow: /\n"
    store = MemoryRobotsStore()
    SharedRobots(store, user_agent=UA).put("a.example", RobotsRecord.of(200, body, "u", 0.0))
    ours = SharedRobots(store, user_agent=UA).get("a.example", 1.0)
    other = SharedRobots(store, user_agent="otherbot/1").get("a.example", 1.0)
    assert ours is not None and not ours.allowed("http://a.example/x")
    assert other is not None and other.allowed("http://a.example/x")


# ---------------------------------------------------------------- backend specifics
def test_redis_records_live_in_the_hosts_shard_slot_and_go_with_the_crawl(redis_url: str) -> None:
    client = connect(redis_url)
    try:
        store = RedisRobotsStore(client, "c1", max_age=DAY)
        store.put("a.example:8080", RECORDS[0])
        key = f"gs:c1:{{{shard_of('a.example:8080')}}}:rb:a.example:8080"
        assert [k.decode() for k in client.keys("gs:*")] == [key]
        # the TTL only bounds memory: a little past the longest age a record is used at
        assert DAY * 1000 < client.pttl(key) <= (DAY + REDIS_TTL_MARGIN) * 1000
        assert RedisRobotsStore(client, "c2").get("a.example:8080") is None  # another crawl
        frontier = RedisFrontier(client, "c1")
        assert frontier.delete() >= 1  # deleting the crawl deletes its robots records
        frontier.close()
        assert store.get("a.example:8080") is None
    finally:
        disconnect(client)


def test_the_sqlite_store_survives_reopening(tmp_path: Path) -> None:
    """--resume reopens the crawl directory's robots.sqlite."""
    path = tmp_path / "robots.sqlite"
    store = SqliteRobotsStore(path)
    for k, record in enumerate(RECORDS):
        store.put(f"h{k}.example", record)
    store.close()
    again = SqliteRobotsStore(path)
    assert [again.get(f"h{k}.example") for k in range(len(RECORDS))] == RECORDS
    assert len(again) == len(RECORDS)
    again.close()


def test_a_sqlite_store_made_before_the_error_column_takes_it(tmp_path: Path) -> None:
    """A crawl directory from before robots.sqlite kept the cause of an unreachable
    robots.txt (--resume reopens it): the column is added, the old records read as they
    were, and new ones keep their cause."""
    path = tmp_path / "robots.sqlite"
    db = sqlite3.connect(path)
    db.execute(
        "CREATE TABLE robots (host TEXT PRIMARY KEY, status INTEGER, fetched_at REAL NOT NULL, "
        "final_url TEXT NOT NULL, body BLOB NOT NULL)"
    )
    db.execute("INSERT INTO robots VALUES ('a.example', NULL, 1.0, 'http://a.example/r', x'')")
    db.commit()
    db.close()
    store = SqliteRobotsStore(path)
    assert store.get("a.example") == RobotsRecord(None, b"", "http://a.example/r", 1.0)
    store.put("b.example", RECORDS[-1])
    assert store.get("b.example") == RECORDS[-1]
    store.close()
    again = SqliteRobotsStore(path)  # (the column is there now: nothing to add)
    assert again.get("b.example") == RECORDS[-1]
    again.close()


def test_an_error_is_kept_only_without_a_status() -> None:
    assert RobotsRecord.of(None, None, "u", 1.0, "fetch/error/dns").error == "fetch/error/dns"
    assert RobotsRecord.of(503, b"x", "u", 1.0, "fetch/error/dns").error is None
    policy = RobotsRecord.of(None, None, "u", 1.0, "fetch/error/connect").policy(UA)
    assert policy.refusal() == "robots/unreachable/connect"


def _put_forever(path: str, ready: int) -> None:
    store = SqliteRobotsStore(path)
    k = 0
    while True:
        store.put(f"h{k % 500}.example", RobotsRecord(200, BODY * (1 + k % 50), "u", float(k)))
        k += 1
        if k == 200:
            os.write(ready, b"x")


def test_the_sqlite_store_is_consistent_after_a_sigkill(tmp_path: Path) -> None:
    path = tmp_path / "robots.sqlite"
    SqliteRobotsStore(path).close()
    r, w = os.pipe()
    proc = multiprocessing.get_context("fork").Process(target=_put_forever, args=(str(path), w))
    proc.start()
    try:
        assert os.read(r, 1) == b"x"  # 200 puts done: it is writing now
        os.kill(proc.pid or 0, signal.SIGKILL)
        proc.join(timeout=30)
        assert proc.exitcode == -signal.SIGKILL
    finally:
        os.close(r)
        os.close(w)
        if proc.is_alive():
            proc.kill()
            proc.join()
    db = sqlite3.connect(path)
    assert db.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    db.close()
    store = SqliteRobotsStore(path)
    records = [store.get(f"h{k}.example") for k in range(500)]
    assert sum(r is not None for r in records) >= 200
    for r in records:  # each record whole: a body of the length its fetch time says
        if r is not None:
            assert r.body == BODY * (1 + int(r.fetched_at) % 50)
    store.close()


def test_an_unusable_sqlite_file_is_a_storage_error(tmp_path: Path) -> None:
    path = tmp_path / "robots.sqlite"
    path.write_bytes(b"this is not an SQLite database, and long enough to be read as one" * 20)
    with pytest.raises(OSError, match="robots store"):
        SqliteRobotsStore(path)


# ---------------------------------------------------------------- two crawlers, one store
CRAWL_BODY = b"User-agent: *\nDisallow: /private\nSitemap: /sitemap.xml\n"


class RobotsFetcher:
    """Every host serves CRAWL_BODY as its robots.txt (a sitemap, no Crawl-delay) and a page
    linking to ten pages of its own; the log counts the requests by URL."""

    def __init__(self, log: Counter[str]) -> None:
        self.log = log

    async def fetch(self, req: FetchRequest) -> FetchResult:
        await asyncio.sleep(0.001)
        self.log[req.url] += 1
        host = req.url.split("/")[2]
        if req.url.endswith("/robots.txt"):
            status, ctype, body = 200, "text/plain", CRAWL_BODY
        elif req.url.endswith("/sitemap.xml"):
            status, ctype, body = 404, "text/plain", b""
        else:
            links = "".join(f'<a href="http://{host}/p{i}">x</a>' for i in range(10))
            links += f'<a href="http://{host}/private/x">x</a>'
            status, ctype, body = 200, "text/html", f"<html><body>{links}</body></html>".encode()
        head = f"HTTP/1.1 {status} X\r\nContent-Type: {ctype}\r\n\r\n".encode()
        return FetchResult(
            url=req.url, status=status, headers=(("Content-Type", ctype),), body=body,
            raw_body_len=len(body), truncated=False, error=None, ip="127.0.0.1", port=80,
            started_at=time.time(), elapsed=0.001, request_head=b"GET / HTTP/1.1\r\n\r\n",
            response_head=head, http_version="1.1",
        )  # fmt: skip


class NoSinks:
    def exchange(self, result: FetchResult) -> None:
        pass

    def log(
        self,
        result: FetchResult,
        *,
        depth: int,
        parent: str | None,
        outcome: str,
        dup: tuple[str, str] | None = None,
    ) -> None:
        pass

    def edges(self, src: str, dsts: list[tuple[str, str]]) -> None:
        pass

    def page(self, result: FetchResult, depth: int, edges: list[tuple[str, str]]) -> bool:
        return True

    def flush(self) -> None:
        pass


def test_two_crawlers_sharing_a_store_fetch_each_robots_txt_once(tmp_path: Path) -> None:
    """Two workers on one frontier, one URL a lease (a delay makes each host rest between
    leases, so every host is leased again and again, by both): each host's robots.txt and
    sitemap are fetched once in all, and both workers obey it (no /private/ URL fetched)."""
    hosts = [f"h{k}.example" for k in range(12)]
    seeds = [f"http://{h}/" for h in hosts]
    settings = CrawlSettings(  # 3 hosts at once a worker: neither can hold all 12
        seeds=seeds, scope="all", output=tmp_path, delay=0.02, per_host=1, concurrency=3,
        use_sitemaps=True,
    )  # fmt: skip
    frontier = MemoryFrontier()
    log: Counter[str] = Counter()
    stores = [SqliteRobotsStore(tmp_path / "robots.sqlite") for _ in range(2)]
    crawlers = [
        Crawler(
            settings, frontier=frontier, fetcher=RobotsFetcher(log), ip_of=lambda h: None,
            sinks=NoSinks(), robots_store=store,
        )
        for store in stores
    ]
    crawlers[0].seed(seeds)

    async def main() -> None:
        async with asyncio.timeout(60):
            await asyncio.gather(*(c.run() for c in crawlers))

    asyncio.run(main())
    for store in stores:
        store.close()
    pages = sum(c.counters.pages for c in crawlers)
    assert pages == len(hosts) * 11  # "/" and p0..p9 of every host
    assert all(c.counters.pages > 0 for c in crawlers)  # both worked
    robots = {u: n for u, n in log.items() if u.endswith("/robots.txt")}
    assert robots == {f"http://{h}/robots.txt": 1 for h in hosts}
    sitemaps = {u: n for u, n in log.items() if u.endswith("/sitemap.xml")}
    assert sitemaps == {f"http://{h}/sitemap.xml": 1 for h in hosts}
    assert not [u for u in log if "/private/" in u]
    hits = sum(c.robots.statistics().store_hits for c in crawlers)
    assert hits > 0  # the other worker's answers were read from the store


def _open_stores_at_once(paths: list[str], barrier: Any) -> None:
    """Open (and close) each new store in `paths` at once with the other processes (a
    barrier before each); exit with the number of openings that failed."""
    failed = 0
    for path in paths:
        barrier.wait()
        try:
            SqliteRobotsStore(path).close()
        except OSError:
            failed += 1
    os._exit(failed)


def test_processes_creating_the_store_at_once_all_open_it(tmp_path: Path) -> None:
    """A pool's workers open robots.sqlite at the same moment: the switch to WAL answered
    SQLITE_BUSY at once to some of them (about 1 opener in 25 here), which failed the pool.
    100 new files opened by 3 processes at once (300 openers): the same 3 processes for every
    file, a barrier before each (a fork per opener cost 15 s, the openings none of it)."""
    ctx = multiprocessing.get_context("fork")
    paths = [str(tmp_path / f"{k}.sqlite") for k in range(100)]
    barrier = ctx.Barrier(3)
    procs = [ctx.Process(target=_open_stores_at_once, args=(paths, barrier)) for _ in range(3)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=120)
    assert [p.exitcode for p in procs] == [0, 0, 0]  # openings that failed, per process
