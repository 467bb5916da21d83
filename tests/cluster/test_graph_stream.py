"""The page events stream on a real redis-server (cluster/stream.py): the worker's sink, the
consumer group, the journal, a replay after a consumer died between reading and
acknowledging, and a torn journal."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import redis

from gossamer.cluster._redis import Keys
from gossamer.cluster.stream import (
    GROUP,
    StreamSink,
    ensure_group,
    follow,
    read_journal,
)
from gossamer.crawldir import JOURNAL
from gossamer.engine.events import PageEvent, decode_events, encode_events
from gossamer.engine.sink_registry import SinkContext
from gossamer.graph import OnlineGraph
from graph_helpers import CountingGraph

CRAWL = "c1"


@pytest.fixture
def client(redis_url: str) -> Iterator[redis.Redis]:
    with redis.Redis.from_url(redis_url) as r:
        r.hset(Keys(CRAWL).meta, "state", "running")
        yield r


def _page(k: int) -> PageEvent:
    links = tuple((f"http://a.example/{j}", "link") for j in range(k % 5))
    return PageEvent(f"http://a.example/{k}", 200, 1, "", 10.0 + k, "text/html", links)


def _publish(client: redis.Redis, events: list[PageEvent], worker: str = "w1") -> None:
    with ThreadPoolExecutor(1) as io:
        sink = StreamSink.factory(client, Keys(CRAWL), worker, io)(
            SinkContext(Path("."), None, "t")  # type: ignore[arg-type]  # (unread)
        )
        for e in events:
            sink.page(e)
        sink.flush()
        sink.close()


def test_a_workers_flush_is_entries_of_its_events(client: redis.Redis) -> None:
    events = [_page(k) for k in range(600)]
    _publish(client, events)
    entries = client.xrange(Keys(CRAWL).events)
    assert len(entries) == 3  # 256 events an entry
    got = [e for _, fields in entries for e in decode_events(fields[b"e"])]
    assert [e.url for e in got] == [e.url for e in events]
    assert {e.worker for e in got} == {"w1"}  # the worker's id, for the engine's part ""


def test_follow_applies_each_page_once_and_a_restart_replays_its_journal(
    client: redis.Redis, tmp_path: Path
) -> None:
    _publish(client, [_page(k) for k in range(40)])
    _publish(client, [_page(k) for k in range(30, 50)])  # 10 pages fetched again
    graph = CountingGraph()
    done = follow(client, CRAWL, graph, tmp_path, until_ended=False)
    assert (done.events, done.applied, done.replayed) == (60, 50, 0)
    assert set(graph.updates.values()) == {1} and len(graph.updates) == 50
    assert graph.links["http://a.example/3"] == {f"http://a.example/{j}" for j in range(3)}
    # a new consumer process: the journal rebuilds the graph, the stream has nothing new
    again = CountingGraph()
    later = follow(client, CRAWL, again, tmp_path, until_ended=False)
    assert (later.events, later.applied, later.replayed) == (0, 0, 50)
    assert again.links == graph.links and set(again.updates.values()) == {1}
    assert client.xpending(Keys(CRAWL).events, GROUP)["pending"] == 0


def test_entries_read_but_never_acknowledged_are_taken_over(
    client: redis.Redis, tmp_path: Path
) -> None:
    """A consumer killed after reading (and, for some pages, after journaling) but before
    acknowledging: the next one claims the entries (XAUTOCLAIM), applies what its journal
    lacks and skips the rest."""
    keys = Keys(CRAWL)
    _publish(client, [_page(k) for k in range(10)])
    follow(client, CRAWL, CountingGraph(), tmp_path, until_ended=False)
    _publish(client, [_page(k) for k in range(5, 20)])  # pages 5..9 journaled already
    ensure_group(client, keys)
    read = client.xreadgroup(GROUP, "dead", {keys.events: ">"})
    assert len(read[0][1]) == 1  # delivered to "dead", never acknowledged
    assert client.xpending(keys.events, GROUP)["pending"] == 1
    graph = CountingGraph()
    done = follow(client, CRAWL, graph, tmp_path, until_ended=False)
    assert (done.replayed, done.entries, done.events, done.applied) == (10, 1, 15, 10)
    assert len(graph.updates) == 20 and set(graph.updates.values()) == {1}
    assert client.xpending(keys.events, GROUP)["pending"] == 0
    assert Counter(e.page_id for e in read_journal(tmp_path)).most_common(1)[0][1] == 1


def test_a_torn_journal_record_is_cut(client: redis.Redis, tmp_path: Path) -> None:
    _publish(client, [_page(k) for k in range(8)])
    follow(client, CRAWL, CountingGraph(), tmp_path, until_ended=False)
    whole = (tmp_path / JOURNAL).stat().st_size
    with (tmp_path / JOURNAL).open("ab") as f:  # a kill in the middle of a write
        f.write(b"\x00\x00\x10\x00" + encode_events([_page(99)])[:5])
    assert len(read_journal(tmp_path)) == 8
    graph = CountingGraph()
    assert follow(client, CRAWL, graph, tmp_path, until_ended=False).replayed == 8
    assert (tmp_path / JOURNAL).stat().st_size == whole


def test_follow_ends_with_the_crawl(client: redis.Redis, tmp_path: Path) -> None:
    """With the crawl finished, `follow` reads what is left and returns."""
    _publish(client, [_page(k) for k in range(12)])
    client.hset(Keys(CRAWL).meta, "state", "finished")
    graph = OnlineGraph()
    done = follow(client, CRAWL, graph, tmp_path)
    assert done.state == "finished" and done.applied == 12
    assert graph.nodes == 12
    # page k links to 0..k%5-1, all crawled (pages 0..11)
    assert graph.edges == sum(k % 5 for k in range(12)) and graph.pending == 0
