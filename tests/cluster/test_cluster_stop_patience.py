"""A worker's patience with an unreachable Redis (cluster/_redis.py `Patience`): for ever
while it crawls, `seconds` once it stops, none after a second stop; the I/O thread's calls
failed at once when it gives up; the leases it leaves behind counted. No Redis needed."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import pytest
import redis.exceptions

from gossamer.cluster._redis import Patience, retrying
from gossamer.cluster.members import PartitionView
from gossamer.cluster.stores import ClusterFrontier, RedisIo
from gossamer.frontier import Discovered, FrontierUnreachable, MemoryFrontier
from gossamer.partition import Dynamic, Member
from gossamer.urls import fingerprint


class Clock:
    """A clock that moves only when told (each failed call below takes 1 s of it)."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _failing(
    clock: Clock, calls: list[int], succeed_after: int | None = None, takes: float = 1.0
) -> Callable[[], str]:
    """A call to a Redis that refuses connections (each try `takes` seconds of `clock`),
    answering after `succeed_after` tries."""

    def call() -> str:
        calls.append(1)
        if succeed_after is not None and len(calls) > succeed_after:
            return "ok"
        clock.now += takes
        raise redis.exceptions.ConnectionError("Connection refused")

    return call


def test_retrying_waits_for_ever_while_crawling_then_for_the_patience_once_stopping() -> None:
    clock = Clock()
    patience = Patience(3.0, clock=clock)
    calls: list[int] = []
    # crawling: an outage of 40 s (of the clock: 4 tries, 0.75 s of real back-off) is
    # waited out
    call = _failing(clock, calls, succeed_after=4, takes=10.0)
    assert retrying(call, what="t", patience=patience) == "ok"
    assert len(calls) == 5 and not patience.over()
    # stopping: 3 s of failures, then FrontierUnreachable (from the Redis error)
    patience.stopping()
    calls.clear()
    with pytest.raises(FrontierUnreachable) as caught:
        retrying(_failing(clock, calls), what="t", patience=patience)
    assert len(calls) == 3 and patience.over() and patience.why == "time"
    assert isinstance(caught.value.__cause__, redis.exceptions.ConnectionError)
    # once given up, no call is made at all
    calls.clear()
    with pytest.raises(FrontierUnreachable):
        retrying(_failing(clock, calls), what="t", patience=patience)
    assert calls == []
    patience.close()


def test_an_answer_while_stopping_gives_the_patience_again() -> None:
    clock = Clock()
    patience = Patience(3.0, clock=clock)
    patience.stopping()
    calls: list[int] = []
    # 2 s of failures, an answer: the next outage has 3 s again
    assert retrying(_failing(clock, calls, succeed_after=2), what="t", patience=patience) == "ok"
    assert patience.deadline() == clock.now + 3.0
    calls.clear()
    with pytest.raises(FrontierUnreachable):
        retrying(_failing(clock, calls), what="t", patience=patience)
    assert len(calls) == 3
    patience.close()


def test_a_second_stop_gives_up_at_once_and_tells_each_callback_once() -> None:
    patience = Patience(3600.0)
    told: list[str] = []
    patience.on_give_up(lambda: told.append("a"))
    patience.stopping()
    patience.stopping()  # (no second watchdog, no new start)
    assert not patience.over()
    patience.give_up("signal")
    patience.give_up("time")  # the first reason stays
    assert patience.over() and patience.why == "signal" and told == ["a"]
    patience.on_give_up(lambda: told.append("b"))  # too late: called at once
    assert told == ["a", "b"]
    started = time.monotonic()
    patience.sleep(10)  # ends at once
    assert time.monotonic() - started < 1.0
    patience.close()


def test_the_watchdog_gives_up_when_no_call_is_retrying() -> None:
    patience = Patience(0.2)
    gave_up = threading.Event()
    patience.on_give_up(gave_up.set)
    patience.stopping()
    assert gave_up.wait(10) and patience.why == "time"
    # closed without a stop: nothing given up
    quiet = Patience(0.0)
    quiet.close()
    assert not quiet.over() and quiet.why is None


def test_redis_io_abandon_fails_the_calls_waiting_and_every_later_one_at_once() -> None:
    io = RedisIo()
    release, ran = threading.Event(), threading.Event()
    stuck = io.submit(release.wait, 30)  # a call waiting for a paused Redis's reply
    queued = io.submit(ran.set)
    io.abandon()
    for future in (stuck, queued, io.submit(ran.set)):
        with pytest.raises(FrontierUnreachable):
            future.result(timeout=1)
    started = time.monotonic()
    io.shutdown(wait=True)  # does not wait for the stuck call
    assert time.monotonic() - started < 1.0
    release.set()  # the stuck call ends (its result dropped); the queued one never runs
    assert not ran.wait(0.3)


def test_a_cluster_frontier_that_gave_up_keeps_counting_the_leases_it_leaves() -> None:
    clock = Clock()
    patience = Patience(3.0, clock=clock)
    inner = MemoryFrontier()
    urls = [f"http://h{i}.example/{k}" for i in range(2) for k in range(5)]
    inner.put_discovered([Discovered(u, u.split("/")[2], 0, fingerprint(u)) for u in urls])
    view = PartitionView(Dynamic(), "w1")
    view.update([Member("w1")])
    f = ClusterFrontier(inner, view, patience=patience)
    a, b = f.lease(2, 5)
    leases, held, expire = f.held_leases()
    assert (leases, held) == (2, 10) and 0 < expire <= inner.options.lease_ttl
    f.complete(a.token, [], None)
    assert f.held_leases()[:2] == (1, 5)
    patience.give_up("signal")
    with pytest.raises(FrontierUnreachable):
        f.complete(b.token, [], None)
    assert f.held_leases()[:2] == (1, 5)  # its lease stays held in Redis, until it expires
    f.close()  # neither sends nor waits
    patience.close()
