"""Per-IP politeness: at most `limit` hosts of one IP address fetched at once.

`LocalIpGate` counts in one process; `FileIpGate` holds `limit` lock files per IP under a
directory with `flock`, so worker processes sharing a crawl directory respect one limit
together (a dead worker's locks vanish with it).
"""

from __future__ import annotations

import asyncio
import fcntl
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path


class LocalIpGate:
    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._locks: dict[str, asyncio.Semaphore] = {}
        self._waiting: dict[str, int] = {}

    def waiting(self, ip: str) -> bool:
        """Whether a host of this process waits for a slot of `ip` (a holder that could
        keep its slot longer should let it go instead)."""
        return self._waiting.get(ip, 0) > 0

    @asynccontextmanager
    async def hold(self, ip: str) -> AsyncIterator[None]:
        sem = self._locks.setdefault(ip, asyncio.Semaphore(self.limit))
        waiting = self._waiting
        waiting[ip] = waiting.get(ip, 0) + 1
        try:
            await sem.acquire()
        finally:
            if waiting[ip] == 1:
                del waiting[ip]
            else:
                waiting[ip] -= 1
        try:
            yield
        finally:
            sem.release()


class FileIpGate:
    """Cross-process gate: slot k of an IP is the lock file `<dir>/<ip>.<k>`."""

    def __init__(self, directory: Path, limit: int, poll: float = 0.005) -> None:
        self.directory = directory
        self.directory.mkdir(parents=True, exist_ok=True)
        self.limit = limit
        self.poll = poll
        self._local = LocalIpGate(limit)  # no busy-polling against our own holders

    def waiting(self, ip: str) -> bool:
        """Whether a host of this process waits for `ip` (other processes' waiters are not
        seen: the engine bounds how long a host keeps a slot by time as well)."""
        return self._local.waiting(ip)

    @asynccontextmanager
    async def hold(self, ip: str) -> AsyncIterator[None]:
        async with self._local.hold(ip):
            fd = await self._acquire(ip)
            try:
                yield
            finally:
                fcntl.flock(fd, fcntl.LOCK_UN)
                os.close(fd)

    async def _acquire(self, ip: str) -> int:
        name = ip.replace(":", "_").replace("/", "_")
        while True:
            for k in range(self.limit):
                fd = os.open(self.directory / f"{name}.{k}", os.O_RDWR | os.O_CREAT, 0o644)
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    os.close(fd)
                    continue
                return fd
            await asyncio.sleep(self.poll)
