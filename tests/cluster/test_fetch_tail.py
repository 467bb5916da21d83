"""A cluster worker's sample of its fetches on the crawl's fetch stream (cluster/fetchstream.py):
the sample (bounded, warnings first, spread over the tick, in order), the bounded hand-over
queue, and every fetch not sent counted — also when Redis refuses the connection, and when it
hangs (the hand-over never waits for it)."""

from __future__ import annotations

import json
import logging
import socket
import time
from typing import Any

import pytest
import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from gossamer.cluster import fetchstream
from gossamer.cluster.fetchstream import (
    FetchTail,
    FetchTailSink,
    is_warning,
    read_fetch_stream,
    sample,
)


def _fetch(k: int, status: int | None = 200, depth: int = 1, outcome: str = "ok") -> Any:
    return (1000.0 + k, f"http://h.test/{k}", status, depth, outcome, None)


def test_is_warning_is_the_log_tails_warning() -> None:
    assert not is_warning(_fetch(0))
    assert not is_warning(_fetch(0, 301))  # a redirect is ok
    assert is_warning(_fetch(0, None, outcome="fetch/error/timeout"))
    assert is_warning(_fetch(0, 404, outcome="fetch/status/404"))
    assert not is_warning(_fetch(0, 404, depth=-1, outcome="fetch/status/404"))  # robots.txt


def test_the_sample_is_bounded_prefers_warnings_and_spreads_over_the_tick() -> None:
    few = [_fetch(k) for k in range(5)]
    assert sample(few, 15) == (few, 0)
    fetches = [_fetch(k) for k in range(1000)]
    for k in (10, 500, 990):
        fetches[k] = _fetch(k, 503, outcome="fetch/status/503")
    picked, warnings_out = sample(fetches, 15)
    assert len(picked) == 15 and warnings_out == 0
    assert [f[0] for f in picked] == sorted(f[0] for f in picked)  # in their order
    assert {1010.0, 1500.0, 1990.0} <= {f[0] for f in picked}  # every warning
    # the plain ones spread over the whole tick, not its first 12
    assert picked[0][0] < 1100 and picked[-1][0] > 1900
    errors = [_fetch(k, None, outcome="fetch/error/reset") for k in range(100)]
    picked, warnings_out = sample(errors + fetches, 15)
    assert all(f[2] is None for f in picked) and warnings_out == 103 - 15


def _entries(client: redis.Redis, crawl: str = "c1") -> list[dict[str, Any]]:
    return read_fetch_stream(client, crawl, "0", 10_000)[0]


def test_a_tick_sends_one_bounded_entry_and_counts_the_rest(redis_url: str) -> None:
    client = redis.Redis.from_url(redis_url)
    try:
        tail = FetchTail(client, "c1", "w3", rate=30, tick=0.5, queue_max=800, start=False,
                         clock=lambda: 2000.0)  # fmt: skip
        for k in range(1000):  # a queue of 800: 200 dropped
            tail.put(_fetch(k, 404, outcome="fetch/status/404") if k == 7 else _fetch(k))
        assert tail.send_tick()
        for k in range(1000, 1010):
            tail.put(_fetch(k))
        assert tail.send_tick()
        assert not tail.send_tick()  # nothing new: no entry
        first, second = _entries(client)
        assert client.xlen("gs:c1:{m}:fetches") == 2
    finally:
        client.close()
    assert first["worker"] == "w3" and first["time"] == 2000.0 and first["rate"] == 30
    assert len(first["fetches"]) == 15  # 30 a second, a tick of 0.5 s
    assert first["fetches"][0] == {"time": 1000.0, "url": "http://h.test/0", "status": 200,
                                   "depth": 1, "outcome": "ok"}  # fmt: skip
    assert any(f["status"] == 404 for f in first["fetches"])  # the warning was kept
    assert first["unsent"] == 1000 - 15 and first["unsent_warnings"] == 0
    assert len(second["fetches"]) == 10 and second["unsent"] == 0
    s = tail.statistics()
    assert (s.handed, s.sent, s.dropped, s.sampled_out, s.entries) == (1010, 25, 200, 785, 2)
    # every fetch handed over is in an entry or in an entry's `unsent`
    assert sum(len(e["fetches"]) + e["unsent"] for e in (first, second)) == s.handed


def test_a_refused_send_is_counted_in_the_next_entry(redis_url: str) -> None:
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    down = redis.Redis(port=port, socket_connect_timeout=1, retry=Retry(NoBackoff(), 0))
    client = redis.Redis.from_url(redis_url)
    try:
        tail = FetchTail(down, "c1", "w1", rate=10, tick=1.0, start=False)
        tail.put(_fetch(0, None, outcome="fetch/error/timeout"))
        for k in range(1, 30):
            tail.put(_fetch(k))
        assert not tail.send_tick()
        assert tail.statistics().send_errors == 1 and tail.statistics().failed == 10
        tail.client = client  # Redis is back
        tail.put(_fetch(30))
        assert tail.send_tick()
        (entry,) = _entries(client)
    finally:
        down.close()
        client.close()
    assert [f["url"] for f in entry["fetches"]] == ["http://h.test/30"]
    assert entry["unsent"] == 30 and entry["unsent_warnings"] == 1


def test_a_hung_redis_never_holds_the_hand_over(redis_url: str) -> None:
    # a server that accepts connections into its backlog and never answers: the sender
    # thread waits in its first XADD, as with a paused (SIGSTOPped) Redis
    with socket.create_server(("127.0.0.1", 0)) as hole:
        hung = redis.Redis(port=hole.getsockname()[1], retry=Retry(NoBackoff(), 0))
        tail = FetchTail(hung, "c1", "w1", tick=0.01, queue_max=100)
        try:
            tail.put(_fetch(0))
            deadline = time.monotonic() + 10
            while tail._queue and time.monotonic() < deadline:  # the thread took it
                time.sleep(0.01)
            assert not tail._queue
            for k in range(1, 10_001):
                tail.put(_fetch(k))
            s = tail.statistics()
            assert (s.handed, s.dropped, len(tail._queue)) == (10_001, 9_900, 100)
            started = time.monotonic()
            tail.close(timeout=0.2)
            assert time.monotonic() - started < 5  # bounded: the thread is left waiting
            assert tail._thread.is_alive() and s.entries == 0
        finally:
            hung.close()
    # (the listening socket closed: the waiting connection is reset, the thread ends)
    tail._thread.join(10)
    assert not tail._thread.is_alive()


def test_the_sink_hands_every_fetch_over_and_the_rate_comes_from_the_environment(
    redis_url: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    from gossamer.fetch import FetchResult

    client = redis.Redis.from_url(redis_url)
    ctx: Any = None  # (the factory reads nothing of it)
    try:
        monkeypatch.setenv(fetchstream.RATE_ENV, "0")
        assert FetchTailSink.factory(client, "c1", "w1")(ctx) is None  # turned off
        monkeypatch.setenv(fetchstream.RATE_ENV, "many")
        with caplog.at_level(logging.WARNING, logger="gossamer.cluster.fetchstream"):
            sink = FetchTailSink.factory(client, "c1", "w1")(ctx)
        assert "GOSSAMER_FETCH_TAIL_RATE='many' is not a whole number" in caplog.text
        assert sink is not None and sink.tail.rate == fetchstream.DEFAULT_RATE
        monkeypatch.setenv(fetchstream.RATE_ENV, "4")
        sink.close()
        sink = FetchTailSink.factory(client, "c1", "w2")(ctx)
        assert sink is not None and sink.tail.budget == 2
        result = FetchResult(url="http://h.test/x", status=None, headers=(), body=b"",
                             raw_body_len=0, truncated=False, error="timed out", ip=None,
                             port=None, started_at=1234.5, elapsed=1.0, request_head=b"",
                             response_head=b"", http_version="")  # fmt: skip
        sink.log(result, depth=2, parent=None, outcome="fetch/error/timeout")
        sink.close()  # the last tick sent before it stops
        (entry,) = [e for e in _entries(client) if e["worker"] == "w2"]
    finally:
        client.close()
    assert entry["fetches"] == [{"time": 1234.5, "url": "http://h.test/x", "status": None,
                                 "depth": 2, "outcome": "fetch/error/timeout",
                                 "error": "timed out"}]  # fmt: skip
    assert json.dumps(entry)  # (plain JSON)
