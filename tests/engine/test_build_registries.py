"""The composition root (runner/build.py) and the registries it looks up by name: frontier
backends (frontier/_registry.py) and fetchers (fetch/_registry.py). A backend and a fetcher
added as one module each plus their registration (tests/engine/_dict_frontier.py,
tests/engine/_streams_fetcher.py) crawl the simulated web, and find what the built-in ones
find."""

from __future__ import annotations

import gzip
import json
import sys
from collections.abc import Iterator
from pathlib import Path

import _dict_frontier
import _streams_fetcher
import pytest

from gossamer.cluster import stores as cluster_stores_mod
from gossamer.cluster.crawls import create_crawl, load_crawl
from gossamer.cluster.ipgate import RedisIpGate
from gossamer.cluster.members import PartitionView
from gossamer.cluster.stores import ClusterFrontier, ClusterRobotsStore
from gossamer.config import CrawlSettings
from gossamer.engine.ipgate import FileIpGate, IpGateBroker, LocalIpGate, PoolIpGate
from gossamer.fetch import CurlFetcher, Resolver
from gossamer.fetch._registry import (
    fetcher_names,
    open_fetcher,
    register_fetcher,
    unregister_fetcher,
)
from gossamer.frontier import FrontierError, SqliteFrontier
from gossamer.frontier._registry import (
    FrontierPlace,
    frontier_names,
    open_frontier,
    register_frontier,
    unregister_frontier,
)
from gossamer.frontier.redis import RedisFrontier, connect
from gossamer.robots_store import RedisRobotsStore, SqliteRobotsStore
from gossamer.runner import build
from gossamer.runner.run import run_crawl
from gossamer.sinks import read_crawl_log
from gossamer.testweb import WebSpec, serve_in_thread

sys.path.insert(0, str(Path(__file__).parents[1] / "e2e"))
from _crawl_helpers import crawl_settings

SPEC = WebSpec(seed=11, hosts=4, pages_mean=15)


@pytest.fixture
def added() -> Iterator[None]:
    _dict_frontier.register()
    _streams_fetcher.register()
    try:
        yield
    finally:
        unregister_frontier(_dict_frontier.NAME)
        unregister_fetcher(_streams_fetcher.NAME)


def test_the_built_in_backends_and_fetchers() -> None:
    assert frontier_names() == ("sqlite", "redis")
    assert fetcher_names() == ("curl",)
    assert (build.EMBEDDED.frontier, build.EMBEDDED.fetcher) == ("sqlite", "curl")
    cluster = cluster_stores_mod.CLUSTER
    assert (cluster.frontier, cluster.fetcher) == ("redis", "curl")


def test_a_name_is_registered_once_and_an_unknown_one_is_refused(added: None) -> None:
    settings = CrawlSettings(seeds=["http://a.example/"])
    with pytest.raises(FrontierError, match="'sqlite' is registered already"):
        register_frontier("sqlite", _dict_frontier.open_dict_frontier)
    with pytest.raises(ValueError, match="'curl' is registered already"):
        register_fetcher("curl", _streams_fetcher.StreamsFetcher)
    with pytest.raises(FrontierError, match="unknown frontier backend 'lmdb': choose sqlite, "
                       "redis or dict"):  # fmt: skip
        open_frontier("lmdb", settings, FrontierPlace())
    with pytest.raises(ValueError, match="unknown fetcher 'h2': choose curl or streams"):
        open_fetcher("h2", settings, Resolver())


def test_a_backend_refuses_a_place_it_cannot_use() -> None:
    settings = CrawlSettings(seeds=["http://a.example/"])
    with pytest.raises(FrontierError, match="sqlite frontier lives in a crawl directory"):
        open_frontier("sqlite", settings, FrontierPlace())
    with pytest.raises(FrontierError, match="redis frontier needs a Redis client"):
        open_frontier("redis", settings, FrontierPlace(directory=Path(".")))


def test_the_embedded_frontier_is_the_crawl_directory_s_sqlite(tmp_path: Path) -> None:
    settings = CrawlSettings(seeds=["http://a.example/"], output=tmp_path, lease_ttl=42.0)
    frontier = build.open_frontier(settings)
    try:
        assert isinstance(frontier, SqliteFrontier)
        assert frontier.options.lease_ttl == 42.0
        assert (tmp_path / "frontier.sqlite").is_file()
    finally:
        frontier.close()


def test_the_registered_curl_fetcher_takes_the_settings() -> None:
    settings = CrawlSettings(seeds=["http://a.example/"], max_body=1234)
    fetcher = open_fetcher("curl", settings, Resolver())
    assert isinstance(fetcher, CurlFetcher)
    assert fetcher.max_body == 1234


def _fetched(out: Path) -> dict[str, int | None]:
    return {r["url"]: r["status"] for r in read_crawl_log(out / "crawl.log.jsonl")}


def _warc_requests(out: Path) -> bytes:
    return b"".join(gzip.decompress(p.read_bytes()) for p in (out / "warc").glob("*.warc.gz"))


def test_a_crawl_with_a_registered_backend_and_fetcher(tmp_path: Path, added: None) -> None:
    """The simulated web crawled with the "dict" frontier and the "streams" fetcher (one
    worker) fetches exactly what the built-in "sqlite" and "curl" fetch, with the same
    statuses; nothing of the frontier is on disk, and every request went through the
    streams fetcher (the WARC's request records are its HTTP/1.0 ones)."""
    _dict_frontier.opened.clear()
    _streams_fetcher.fetchers.clear()
    with serve_in_thread(SPEC) as web:
        web.write_resolve_file(tmp_path / "resolve.txt")
        seed = web.url(0, 0)
        built_in = tmp_path / "built-in"
        assert run_crawl(crawl_settings(tmp_path, built_in, seed, workers=1)) == 0
        added_out = tmp_path / "added"
        backends = build.Backends(frontier=_dict_frontier.NAME, fetcher=_streams_fetcher.NAME)
        settings = crawl_settings(tmp_path, added_out, seed, workers=1)
        assert run_crawl(settings, backends=backends) == 0
    expected = _fetched(built_in)
    assert len(expected) > 20
    assert _fetched(added_out) == expected
    assert (built_in / "frontier.sqlite").exists()
    assert not list(added_out.glob("frontier.sqlite*"))
    assert len(_dict_frontier.opened) == 1  # the crawl's one frontier (closed by now)
    stats = json.loads((added_out / "stats.json").read_text())
    assert stats["ended"] == "complete" and stats["frontier"]["queued"] == 0
    assert stats["frontier"]["done"] == json.loads((built_in / "stats.json").read_text())[
        "frontier"
    ]["done"]
    [fetcher] = _streams_fetcher.fetchers
    assert sorted(fetcher.urls) == sorted(expected)  # robots.txt included
    warc = _warc_requests(added_out)
    assert warc.count(b" HTTP/1.0\r\nHost: ") == len(expected)
    assert _warc_requests(built_in).count(b" HTTP/1.1\r\nHost: ") == len(expected)  # curl


def test_a_pool_s_workers_use_the_registered_fetcher(tmp_path: Path, added: None) -> None:
    """A pool's forked workers build their fetcher from the same registry: 2 workers on
    the "sqlite" frontier with the "streams" fetcher fetch every page once, by HTTP/1.0."""
    with serve_in_thread(SPEC) as web:
        web.write_resolve_file(tmp_path / "resolve.txt")
        out = tmp_path / "pool"
        settings = crawl_settings(tmp_path, out, web.url(0, 0), workers=2)
        backends = build.Backends(fetcher=_streams_fetcher.NAME)
        assert run_crawl(settings, backends=backends) == 0
    fetched = _fetched(out)
    assert len(fetched) > 20
    warc = _warc_requests(out)
    assert warc.count(b" HTTP/1.0\r\nHost: ") == len(fetched)
    assert warc.count(b" HTTP/1.1\r\nHost: ") == 0


def test_the_embedded_stores_of_a_crawl_and_of_a_pool_worker(tmp_path: Path) -> None:
    """The embedded crawl gets a LocalIpGate, a pool's worker a PoolIpGate on its socket to
    the parent's broker, a worker run by hand a FileIpGate on the crawl's lock files; all
    the crawl directory's SQLite frontier and robots store."""
    settings = CrawlSettings(seeds=["http://a.example/"], output=tmp_path, per_ip=2)
    broker = IpGateBroker(1, 2)
    sock = broker.worker_socket(0)
    for part, gate, gate_socket in (
        ("", LocalIpGate, None),
        ("w0", PoolIpGate, sock),
        ("w0", FileIpGate, None),
    ):
        stores = build.embedded_stores(settings, part=part, ip_gate_socket=gate_socket)
        try:
            assert isinstance(stores.frontier, SqliteFrontier)
            assert isinstance(stores.robots_store, SqliteRobotsStore)
            assert type(stores.ip_gate) is gate
            assert stores.ip_gate.limit == 2  # type: ignore[attr-defined]
        finally:
            stores.frontier.close()
            stores.robots_store.close()
    sock.close()
    broker.stop()
    assert (tmp_path / "frontier.sqlite").is_file() and (tmp_path / "robots.sqlite").is_file()


def test_a_cluster_worker_s_stores_on_a_real_redis(tmp_path: Path, redis_url: str) -> None:
    """A cluster worker's frontier is the registered "redis" backend (the crawl's seeded
    RedisFrontier, leasing from its partition) inside a ClusterFrontier, whose one I/O
    thread its RedisIpGate shares; robots.txt answers in the crawl's Redis keys."""
    client = connect(redis_url)
    try:
        (tmp_path / "resolve.txt").write_text("www.h0.example:80:127.1.0.1:8080\n")
        settings = crawl_settings(tmp_path, tmp_path / "out", "http://www.h0.example/")
        crawl_id = create_crawl(client, settings.seeds, settings)
        record = load_crawl(client, crawl_id)
        view = PartitionView(record.strategy(), "w1")
        ws = record.worker_settings(tmp_path / "w1")
        stores = cluster_stores_mod.cluster_stores(client, record, ws, view=view, worker_id="w1")
        try:
            assert isinstance(stores.frontier, ClusterFrontier)
            assert isinstance(stores.frontier.inner, RedisFrontier)
            assert stores.frontier.statistics().queued == 1  # the seed create_crawl put
            assert isinstance(stores.ip_gate, RedisIpGate)
            assert stores.ip_gate.owner == "w1"
            assert isinstance(stores.robots_store, ClusterRobotsStore)
            assert isinstance(stores.robots_store.inner, RedisRobotsStore)
        finally:
            stores.frontier.close()
            stores.robots_store.close()
    finally:
        client.close()
