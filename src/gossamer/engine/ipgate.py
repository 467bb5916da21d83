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
from typing import TYPE_CHECKING


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
    """Cross-process gate: slot k of an IP is the lock file `<dir>/<ip>.<k>`.

    A process that finds every slot of an IP taken holds a shared lock on `<dir>/<ip>.want`
    while it polls, so holders in any process see that someone waits (`waiting`)."""

    def __init__(self, directory: Path, limit: int, poll: float = 0.005) -> None:
        self.directory = directory
        self.directory.mkdir(parents=True, exist_ok=True)
        self.limit = limit
        self.poll = poll
        self._local = LocalIpGate(limit)  # no busy-polling against our own holders
        self._want_fds: dict[str, int] = {}  # ip -> its want file, while this process holds it
        self._held: dict[str, int] = {}  # ip -> slots this process holds

    def waiting(self, ip: str) -> bool:
        """Whether a host of this or another process waits for a slot of `ip`."""
        if self._local.waiting(ip):
            return True
        fd = self._want_fds.get(ip)
        if fd is None:
            return False
        try:  # an exclusive lock is refused while any waiter holds its shared one
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        fcntl.flock(fd, fcntl.LOCK_UN)
        return False

    @asynccontextmanager
    async def hold(self, ip: str) -> AsyncIterator[None]:
        async with self._local.hold(ip):
            fd = await self._acquire(ip)
            held = self._held
            held[ip] = held.get(ip, 0) + 1
            if ip not in self._want_fds:
                self._want_fds[ip] = self._open_want(ip)
            try:
                yield
            finally:
                fcntl.flock(fd, fcntl.LOCK_UN)
                os.close(fd)
                held[ip] -= 1
                if not held[ip]:  # the last holder of this process closes the want file
                    del held[ip]
                    os.close(self._want_fds.pop(ip))

    def _name(self, ip: str) -> str:
        return ip.replace(":", "_").replace("/", "_")

    def _open_want(self, ip: str) -> int:
        return os.open(self.directory / f"{self._name(ip)}.want", os.O_RDWR | os.O_CREAT, 0o644)

    async def _acquire(self, ip: str) -> int:
        name = self._name(ip)
        want: int | None = None
        try:
            while True:
                for k in range(self.limit):
                    fd = os.open(self.directory / f"{name}.{k}", os.O_RDWR | os.O_CREAT, 0o644)
                    try:
                        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    except BlockingIOError:
                        os.close(fd)
                        continue
                    return fd
                if want is None:  # every slot taken: say so while polling
                    want = self._open_want(ip)
                    fcntl.flock(want, fcntl.LOCK_SH)  # a holder's test lasts microseconds
                await asyncio.sleep(self.poll)
        finally:
            if want is not None:
                os.close(want)  # (drops its lock)


if TYPE_CHECKING:
    from .seams import IpGate

    def _conforms(local: LocalIpGate, files: FileIpGate) -> tuple[IpGate, IpGate]:
        return local, files  # mypy checks that both are IpGates
