"""RedisIpGate on a real Redis: exclusion across workers, dead holders, fencing, waiting."""

from __future__ import annotations

import asyncio
import contextlib
import math
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from gossamer.cluster._redis import Keys, RedisClient
from gossamer.cluster.ipgate import _HOLD, RedisIpGate
from gossamer.frontier.redis import connect
from gossamer.testweb.redisd import RedisServer

IP = "127.1.0.9"


@pytest.fixture
def clients(redis_url: str) -> Iterator[list[RedisClient]]:
    cs = [connect(redis_url) for _ in range(3)]
    yield cs
    for c in cs:
        c.close()


async def crowd(gates: list[RedisIpGate], tasks_per_gate: int, rounds: int) -> int:
    """Every task of every gate holds IP `rounds` times; the most holders seen at once."""
    inside = 0
    most = 0

    async def one(gate: RedisIpGate) -> None:
        nonlocal inside, most
        for _ in range(rounds):
            async with gate.hold(IP):
                inside += 1
                most = max(most, inside)
                await asyncio.sleep(0.002)
                inside -= 1

    async with asyncio.TaskGroup() as tg:
        for g in gates:
            for _ in range(tasks_per_gate):
                tg.create_task(one(g))
    return most


@pytest.mark.parametrize("limit", [1, 2])
def test_at_most_limit_holders_across_workers(clients: list[RedisClient], limit: int) -> None:
    async def main() -> int:
        gates = [RedisIpGate(c, "c1", limit, owner=f"w{i}") for i, c in enumerate(clients)]
        for g in gates:
            await g.__aenter__()
        try:
            return await crowd(gates, 3, 8)
        finally:
            for g in gates:
                await g.__aexit__(None, None, None)

    assert asyncio.run(main()) == limit
    assert not clients[0].keys(f"{Keys('c1').prefix}ip:*")  # every slot released


def test_with_an_io_thread_every_redis_call_is_made_there(clients: list[RedisClient]) -> None:
    """`io=`: the cluster worker's I/O thread. The gate keeps its exclusion, and its acquire,
    release and refresh scripts run on that thread, never on the loop's (a paused Redis then
    holds only the hosts waiting for a slot)."""
    threads: Counter[tuple[str, str]] = Counter()

    def noting(name: str, script: Callable[..., Any]) -> Callable[..., Any]:
        def call(*args: Any, **kwargs: Any) -> Any:
            threads[name, threading.current_thread().name.split("_")[0]] += 1
            return script(*args, **kwargs)

        return call

    ios = [ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"io{i}") for i in range(2)]

    async def main() -> int:
        gates = [
            RedisIpGate(c, "c1", 1, owner=f"w{i}", refresh=0.02, io=io)
            for i, (c, io) in enumerate(zip(clients, ios, strict=False))
        ]
        for i, g in enumerate(gates):
            g._acquire_s = noting(f"acquire{i}", g._acquire_s)  # type: ignore[method-assign]
            g._release_s = noting(f"release{i}", g._release_s)  # type: ignore[method-assign]
            g._refresh_s = noting(f"refresh{i}", g._refresh_s)  # type: ignore[method-assign]
        async with gates[0], gates[1]:
            return await crowd(gates, 3, 10)

    try:
        assert asyncio.run(main()) == 1
    finally:
        for io in ios:
            io.shutdown()
    assert {name[:-1] for name, _ in threads} == {"acquire", "release", "refresh"}, threads
    assert all(thread == f"io{name[-1]}" for name, thread in threads), threads
    assert not clients[0].keys(f"{Keys('c1').prefix}ip:*")  # every slot released


def test_exclusion_on_redis_cluster(redis_cluster_url: str) -> None:
    cs = [connect(redis_cluster_url) for _ in range(2)]

    async def main() -> int:
        gates = [RedisIpGate(c, "cc", 1, owner=f"w{i}") for i, c in enumerate(cs)]
        async with gates[0], gates[1]:
            return await crowd(gates, 2, 6)

    try:
        assert asyncio.run(main()) == 1
    finally:
        for c in cs:
            c.close()


def test_a_dead_holder_blocks_the_ip_for_at_most_the_ttl(clients: list[RedisClient]) -> None:
    keys = Keys("c1")
    clients[1].set(keys.ip_slot(IP, 0), "w9:1", px=800)  # a worker died holding the slot

    async def main() -> float:
        gate = RedisIpGate(clients[0], "c1", 1, owner="w1", ttl=0.8)
        async with gate:
            t0 = time.monotonic()
            async with gate.hold(IP):
                return time.monotonic() - t0

    waited = asyncio.run(main())
    assert 0.4 < waited < 1.5


def test_waiting_is_seen_by_the_holder_in_another_worker(clients: list[RedisClient]) -> None:
    async def main() -> tuple[bool, bool, bool]:
        a = RedisIpGate(clients[0], "c1", 1, owner="w1", refresh=0.05)
        b = RedisIpGate(clients[1], "c1", 1, owner="w2", refresh=0.05)

        async def other_worker() -> None:
            async with b.hold(IP):
                pass

        async with a, b:
            async with a.hold(IP):
                await asyncio.sleep(0.12)
                before = a.waiting(IP)
                waiter = asyncio.create_task(other_worker())
                await asyncio.sleep(0.15)
                during = a.waiting(IP) and b.waiting(IP)  # b: a host of its own waits
            await waiter
            await asyncio.sleep(0.12)
            return before, during, a.waiting(IP)

    assert asyncio.run(main()) == (False, True, False)


class FakeFetcher:
    def __init__(self) -> None:
        self.times: list[float] = []

    def start(self, request: Any) -> asyncio.Future[Any]:
        self.times.append(time.monotonic())
        fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        fut.set_result(request)
        return fut

    async def fetch(self, request: Any) -> Any:
        self.times.append(time.monotonic())
        return request

    def poll(self) -> None:  # (with `start`: the fast path, which the guard passes through)
        pass

    async def aclose(self) -> None:
        pass


def test_a_holder_whose_slot_was_lost_waits_before_its_next_request(
    clients: list[RedisClient],
) -> None:
    """A worker frozen past the TTL: another took the IP; on waking, its next request goes
    out only once the other has released the IP (fencing), and its late release does not
    free the other's slot."""
    keys = Keys("c1")

    async def main() -> tuple[float, float, int]:
        a = RedisIpGate(clients[0], "c1", 1, owner="w1")
        fetcher = FakeFetcher()
        guarded = a.guard(fetcher)
        async with a:
            async with a.hold(IP):
                assert await guarded.start("r1") == "r1"  # valid: straight through
                # frozen: the slot expired and w2 took it
                clients[1].delete(keys.ip_slot(IP, 0))
                clients[1].set(keys.ip_slot(IP, 0), "w2:1", px=600)
                a.refresh_now()  # a refresh finds it lost
                t0 = time.monotonic()
                assert await guarded.start("r2") == "r2"
            lost = a.statistics().lost
        return t0, fetcher.times[-1], lost

    t0, sent, lost = asyncio.run(main())
    assert sent - t0 > 0.3 and lost == 1  # waited for w2's slot to expire


def test_a_stalled_holder_confirms_its_slot_then_goes_on(clients: list[RedisClient]) -> None:
    keys = Keys("c1")

    async def main() -> tuple[int, bytes | None]:
        a = RedisIpGate(clients[0], "c1", 1, owner="w1")
        guarded = a.guard(FakeFetcher())
        async with a, a.hold(IP):
            hold = _HOLD.get()
            assert hold is not None
            hold.valid_until = -math.inf  # as after a long stall
            await guarded.start("r")
            assert hold.valid_until > time.monotonic()
            return a.statistics().confirmed, clients[1].get(keys.ip_slot(IP, 0))

    confirmed, value = asyncio.run(main())
    assert confirmed == 1 and value == b"w1:1"


def test_a_release_never_frees_another_holders_slot(clients: list[RedisClient]) -> None:
    keys = Keys("c1")

    async def main() -> None:
        a = RedisIpGate(clients[0], "c1", 1, owner="w1")
        async with a, a.hold(IP):
            clients[1].set(keys.ip_slot(IP, 0), "w2:7", px=5000)  # ours expired, w2's now

    asyncio.run(main())
    assert clients[1].get(keys.ip_slot(IP, 0)) == b"w2:7"


def test_redis_down_is_waited_out(redis_server: RedisServer, redis_url: str) -> None:
    client = connect(redis_url)

    async def main() -> float:
        gate = RedisIpGate(client, "c1", 1, owner="w1")

        async def restart_later() -> None:
            await asyncio.sleep(0.5)
            redis_server.restart()  # on the main thread: the server dies with its thread

        async with gate:
            redis_server.stop()
            t0 = time.monotonic()
            async with asyncio.TaskGroup() as tg:
                tg.create_task(restart_later())
                async with gate.hold(IP):
                    waited = time.monotonic() - t0
            return waited

    try:
        waited = asyncio.run(main())
    finally:
        client.close()
    assert waited >= 0.4 and waited < 10


async def _until(cond: Callable[[], bool], bound: float = 10.0) -> None:
    """Wait for `cond` (checked every 2 ms) for at most `bound` seconds."""
    deadline = time.monotonic() + bound
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {bound} s")
        await asyncio.sleep(0.002)


def test_one_host_a_process_polls_for_an_ip(clients: list[RedisClient]) -> None:
    """Four hosts of one worker wait ~0.3 s for an IP another worker holds every slot of:
    one of them polls Redis (~20 polls at 5 → 20 ms), not each (68 before)."""

    async def main() -> tuple[int, float]:
        a = RedisIpGate(clients[0], "c1", 4, owner="w1")
        b = RedisIpGate(clients[1], "c1", 4, owner="w2")
        release = asyncio.Event()

        async def holder(gate: RedisIpGate) -> None:
            async with gate.hold(IP):
                await release.wait()

        async with a, b:
            held = [asyncio.create_task(holder(a)) for _ in range(4)]
            await _until(lambda: a.statistics().held_now == 4)
            t0 = time.monotonic()
            waiters = [asyncio.create_task(holder(b)) for _ in range(4)]
            await asyncio.sleep(0.3)
            polls, waited = b.statistics().polls, time.monotonic() - t0
            release.set()
            await asyncio.gather(*held, *waiters)
        assert b.statistics().waits == 4
        return polls, waited

    polls, waited = asyncio.run(main())
    assert polls <= 6 + waited / 0.02  # the backoff's first polls, then one each max_poll


def test_a_slot_let_go_in_this_process_wakes_its_poller(clients: list[RedisClient]) -> None:
    """limit 2: w1 holds one slot, w2 one and has a host polling for the IP with a 60 s
    poll: when w2's holder lets its slot go, that host takes it at once, not a poll later."""

    async def main() -> int:
        a = RedisIpGate(clients[0], "c1", 2, owner="w1")
        b = RedisIpGate(clients[1], "c1", 2, owner="w2", poll=60.0, max_poll=60.0)
        other, ours, theirs = asyncio.Event(), asyncio.Event(), asyncio.Event()

        async def holder(gate: RedisIpGate, release: asyncio.Event) -> None:
            async with gate.hold(IP):
                await release.wait()

        async with a, b:
            t_a = asyncio.create_task(holder(a, other))
            t_b = asyncio.create_task(holder(b, ours))
            await _until(lambda: a.statistics().held_now + b.statistics().held_now == 2)
            waiter = asyncio.create_task(holder(b, theirs))
            await _until(lambda: b.statistics().polls >= 1)
            ours.set()
            await t_b
            await _until(lambda: b.statistics().held_now == 1)  # (a 60 s poll otherwise)
            polls = b.statistics().polls
            theirs.set()
            other.set()
            await asyncio.gather(t_a, waiter)
        return polls

    assert asyncio.run(main()) == 1


def test_a_waiting_worker_gets_the_ip_before_the_holders_other_hosts(
    clients: list[RedisClient],
) -> None:
    """limit 1: w1's two hosts hold the IP in turn, back to back, 10 ms each, for 2 s; w2's
    host, waiting meanwhile (polling every 50 ms), gets the slot at its first poll after it
    queued (first come first served across workers: w1's other host, trying when the slot
    is let go, queues behind it). Before: w1's other host, woken in-process at once, took
    the slot every time, and w2 waited until w1 ran out of turns (2 s)."""

    async def main() -> float:
        a = RedisIpGate(clients[0], "c1", 1, owner="w1")
        b = RedisIpGate(clients[1], "c1", 1, owner="w2", poll=0.05, max_poll=0.05)
        stop = time.monotonic() + 2.0

        async def host(gate: RedisIpGate) -> None:
            while time.monotonic() < stop:
                async with gate.hold(IP):
                    await asyncio.sleep(0.01)

        async with a, b:
            hosts = [asyncio.create_task(host(a)) for _ in range(2)]
            await _until(lambda: a.statistics().held_now == 1)
            t0 = time.monotonic()
            async with b.hold(IP):
                waited = time.monotonic() - t0
            await asyncio.gather(*hosts)
        return waited

    waited = asyncio.run(main())
    assert waited < 0.5, f"w2 waited {waited:.2f} s"


def test_a_waiter_that_stopped_trying_leaves_the_queue(clients: list[RedisClient]) -> None:
    """A waiter that stops polling (its worker died, or the wait was cancelled) stops
    blocking the IP's queue after the waiter TTL: a later waiter takes the free slot."""

    async def main() -> float:
        a = RedisIpGate(clients[0], "c1", 1, owner="w1")
        b = RedisIpGate(clients[1], "c1", 1, owner="w2")
        release = asyncio.Event()

        async def holder() -> None:
            async with a.hold(IP):
                await release.wait()

        async with a, b:
            held = asyncio.create_task(holder())
            await _until(lambda: a.statistics().held_now == 1)
            waiter = asyncio.create_task(_hold_once(b))
            await _until(lambda: b.statistics().polls >= 1)
            waiter.cancel()  # queued, then gone without a word
            with contextlib.suppress(asyncio.CancelledError):
                await waiter
            release.set()
            await held
            t0 = time.monotonic()
            async with a.hold(IP):
                waited = time.monotonic() - t0
        return waited

    waited = asyncio.run(main())
    assert waited < 0.5 + 0.3, f"waited {waited:.2f} s"  # the waiter TTL + a margin


async def _hold_once(gate: RedisIpGate) -> None:
    async with gate.hold(IP):
        pass
