"""What a Redis round trip costs the event loop, three ways (issue 17's design choice for the
cluster worker, docs/cluster.md "Redis off the event loop"):

- inline:    a redis-py call made on the loop's thread (the worker before): the loop is
             blocked for the whole round trip, and for as long as Redis does not answer;
- io-thread: the same call on one dedicated thread, awaited (`run_in_executor`);
- asyncio:   redis.asyncio, awaited.

For each: wall time per call (calls made one after another by one task, then by 16 tasks at
once), and the loop thread's CPU time per call (what the loop cannot spend on pages). The
call is an EVALSHA of a small Lua script, as the frontier's and the IP gate's are.

    .venv/bin/python bench/bench_redis_loop.py [--calls 5000]
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import redis
import redis.asyncio

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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calls", type=int, default=5000)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp, RedisServer(Path(tmp) / "redis") as server:
        rows = asyncio.run(bench(server.url, args.calls))
    print("| way | tasks | wall µs/call | loop-thread CPU µs/call |")
    print("|---|---:|---:|---:|")
    for name, tasks, wall, cpu in rows:
        print(f"| {name} | {tasks} | {wall:.0f} | {cpu:.0f} |")


if __name__ == "__main__":
    main()
