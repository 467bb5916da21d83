"""What a Redis round trip costs the event loop, three ways (issue 17's design choice for the
cluster worker, docs/cluster.md "Redis off the event loop"):

- inline:    a redis-py call made on the loop's thread (the worker before): the loop is
             blocked for the whole round trip, and for as long as Redis does not answer;
- io-thread: the same call on one dedicated thread, awaited (`run_in_executor`);
- asyncio:   redis.asyncio, awaited.

For each: wall time per call (calls made one after another by one task, then by 16 tasks at
once), and the loop thread's CPU time per call (what the loop cannot spend on pages). The
call is an EVALSHA of a small Lua script, as the frontier's and the IP gate's are.

With `--pause S`, also: Redis paused (SIGSTOP) for S seconds while one task keeps calling it,
each way: the event loop's lag meanwhile (the worker's own `LoopLag`: a 10 ms timer, how late
it fires), its largest and 99th percentile, and how many timer ticks the loop ran while Redis
was paused (a loop blocked by the call runs none). tests/e2e/test_cluster_redis_pause.py
asserts only that the worker's loop is never stuck for a pause; the figures are here.

    .venv/bin/python bench/bench_redis_loop.py [--calls 5000] [--pause 3]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import signal
import tempfile
import threading
import time
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import redis
import redis.asyncio

from gossamer.cluster.looplag import LoopLag
from gossamer.testweb.redisd import RedisServer

SCRIPT = "return redis.call('INCR', KEYS[1])"


async def measure(
    call: Callable[[], Awaitable[object]], calls: int, tasks: int
) -> tuple[float, float]:
    """(wall µs per call, loop-thread CPU µs per call) for `calls` calls over `tasks` tasks."""

    async def run(n: int) -> None:
        for _ in range(n):
            await call()

    cpu0, t0 = time.thread_time(), time.perf_counter()
    await asyncio.gather(*(run(calls // tasks) for _ in range(tasks)))
    wall, cpu = time.perf_counter() - t0, time.thread_time() - cpu0
    n = calls // tasks * tasks
    return wall / n * 1e6, cpu / n * 1e6


async def bench(url: str, calls: int) -> list[tuple[str, int, float, float]]:
    sync = redis.Redis.from_url(url)
    script = sync.register_script(SCRIPT)
    io = ThreadPoolExecutor(max_workers=1, thread_name_prefix="redis-io")
    aclient = redis.asyncio.Redis.from_url(url)
    ascript = aclient.register_script(SCRIPT)
    loop = asyncio.get_running_loop()

    async def inline() -> object:
        return script(keys=["k"])

    async def io_thread() -> object:
        return await loop.run_in_executor(io, lambda: script(keys=["k"]))

    async def asyncio_call() -> object:
        return await ascript(keys=["k"])

    rows = []
    for tasks in (1, 16):
        for name, call in (("inline", inline), ("io-thread", io_thread), ("asyncio", asyncio_call)):
            await measure(call, calls // 10, tasks)  # warm up (connections, script cache)
            wall, cpu = await measure(call, calls, tasks)
            rows.append((name, tasks, wall, cpu))
    io.shutdown()
    await aclient.aclose()
    sync.close()
    return rows


async def paused(url: str, pid: int, pause_s: float) -> list[tuple[str, float, float, int]]:
    """Per way: (name, lag max ms, lag p99 ms, timer ticks while Redis was paused), one task
    calling Redis again and again from 0.5 s before the pause to 0.5 s after it."""
    sync = redis.Redis.from_url(url)
    script = sync.register_script(SCRIPT)
    io = ThreadPoolExecutor(max_workers=1, thread_name_prefix="redis-io")
    aclient = redis.asyncio.Redis.from_url(url)
    ascript = aclient.register_script(SCRIPT)
    loop = asyncio.get_running_loop()

    async def inline() -> object:
        return script(keys=["k"])

    async def io_thread() -> object:
        return await loop.run_in_executor(io, lambda: script(keys=["k"]))

    async def asyncio_call() -> object:
        return await ascript(keys=["k"])

    rows = []
    for name, call in (("inline", inline), ("io-thread", io_thread), ("asyncio", asyncio_call)):
        await call()  # connections and the script cache ready

        async def calling(call: Callable[[], Awaitable[object]] = call) -> None:
            while True:
                await call()
                await asyncio.sleep(0.001)  # (a worker's calls come between pages)

        async with LoopLag() as lag, asyncio.TaskGroup() as tg:
            caller = tg.create_task(calling())
            await asyncio.sleep(0.5)
            ticks: list[int] = [len(lag.lags)]

            def resume(ticks: list[int] = ticks, lag: LoopLag = lag) -> None:
                # (a thread: the loop may be the one stuck)
                ticks.append(len(lag.lags))
                os.kill(pid, signal.SIGCONT)

            os.kill(pid, signal.SIGSTOP)
            timer = threading.Timer(pause_s, resume)
            timer.start()
            try:
                await asyncio.sleep(pause_s + 0.5)
            finally:
                timer.join()
            caller.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await caller
        rows.append((name, lag.max_ms, lag.p99_ms, ticks[1] - ticks[0]))
    io.shutdown()
    await aclient.aclose()
    sync.close()
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calls", type=int, default=5000)
    ap.add_argument("--pause", type=float, default=0.0, metavar="S",
                    help="also pause Redis for S seconds under each way (loop lag)")  # fmt: skip
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp, RedisServer(Path(tmp) / "redis") as server:
        rows = asyncio.run(bench(server.url, args.calls))
        pause_rows = asyncio.run(paused(server.url, server.pid, args.pause)) if args.pause else []
    print("| way | tasks | wall µs/call | loop-thread CPU µs/call |")
    print("|---|---:|---:|---:|")
    for name, tasks, wall, cpu in rows:
        print(f"| {name} | {tasks} | {wall:.0f} | {cpu:.0f} |")
    if pause_rows:
        print(f"\nRedis paused {args.pause:g} s, one task calling it; load average "
              f"{os.getloadavg()[0]:.1f}:\n")  # fmt: skip
        print("| way | loop lag max ms | loop lag p99 ms | 10 ms ticks while paused |")
        print("|---|---:|---:|---:|")
        for name, max_ms, p99_ms, ticks in pause_rows:
            print(f"| {name} | {max_ms:.1f} | {p99_ms:.1f} | {ticks} |")


if __name__ == "__main__":
    main()
