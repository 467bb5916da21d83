"""What a worker costs its machine, and a guard for the disk its outputs are written to.

`ResourceSampler.sample(in_bytes, out_bytes)` gives this process's CPU percent, resident
memory, the free space of its output directory's disk and its HTTP bytes a second in and
out, each over the time since the previous sample (a cluster worker's heartbeat calls it
every beat: docs/cluster.md, "Machines watched"). Linux's /proc where it has it; the standard
library elsewhere. `DiskGuard.low()` says when that free space is under a margin: the engine
then takes no more hosts and stops before a WARC could be cut short."""

from __future__ import annotations

import os
import resource
import shutil
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

__all__ = ["DiskGuard", "ResourceSampler", "Resources", "disk_free", "rss_bytes"]

_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096
MB = 1024 * 1024


def rss_bytes() -> int:
    """This process's resident memory now (/proc/self/statm; elsewhere its peak)."""
    try:
        with open("/proc/self/statm", "rb") as f:
            return int(f.read().split()[1]) * _PAGE
    except (OSError, ValueError, IndexError):
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def disk_free(path: str | os.PathLike[str]) -> int | None:
    """Bytes free to an unprivileged user on the disk of `path` (its nearest existing
    ancestor); None when it cannot be read."""
    p = Path(path).absolute()
    while not p.exists() and p != p.parent:
        p = p.parent
    try:
        return shutil.disk_usage(p).free
    except OSError:
        return None


@dataclass(frozen=True, slots=True)
class Resources:
    """One sample: CPU percent of one core (200 = two cores busy), resident bytes, free
    bytes of the output disk (None: unknown), HTTP bytes a second received and sent."""

    cpu_percent: float
    rss_bytes: int
    disk_free_bytes: int | None
    bytes_in_per_s: float
    bytes_out_per_s: float


class ResourceSampler:
    """Samples over the interval since the previous call (the first one: since its
    creation). Thread-safe: the heartbeat thread calls it."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        clock: Callable[[], float] = time.monotonic,
        cpu: Callable[[], float] | None = None,
    ) -> None:
        self.path = path
        self._clock = clock
        self._cpu = cpu or _cpu_seconds
        self._lock = threading.Lock()
        self._last = (clock(), self._cpu(), 0, 0)

    def sample(self, in_bytes: int = 0, out_bytes: int = 0) -> Resources:
        """The sample now; `in_bytes`, `out_bytes`: the worker's HTTP bytes so far."""
        now, cpu = self._clock(), self._cpu()
        with self._lock:
            t0, c0, i0, o0 = self._last
            self._last = (now, cpu, in_bytes, out_bytes)
        span = now - t0
        if span <= 0:
            return Resources(0.0, rss_bytes(), disk_free(self.path), 0.0, 0.0)
        return Resources(
            cpu_percent=round(max(0.0, cpu - c0) / span * 100, 1),
            rss_bytes=rss_bytes(),
            disk_free_bytes=disk_free(self.path),
            bytes_in_per_s=round(max(0, in_bytes - i0) / span, 1),
            bytes_out_per_s=round(max(0, out_bytes - o0) / span, 1),
        )


def _cpu_seconds() -> float:
    t = os.times()
    return t.user + t.system


class DiskGuard:
    """Whether the free space of `path`'s disk is under `margin` bytes, read at most every
    `every` seconds (a statvfs: microseconds). `low()` latches: once under the margin, the
    worker stops, so it stays low for it."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        margin: int,
        *,
        every: float = 0.1,
        clock: Callable[[], float] = time.monotonic,
        free: Callable[[str | os.PathLike[str]], int | None] = disk_free,
    ) -> None:
        self.path = path
        self.margin = margin
        self._every = every
        self._clock = clock
        self._free = free
        self._next = -float("inf")
        #: the free bytes seen when it went under the margin (None: not yet)
        self.tripped: int | None = None

    def low(self) -> bool:
        if self.tripped is not None:
            return True
        if self.margin <= 0:
            return False
        now = self._clock()
        if now < self._next:
            return False
        self._next = now + self._every
        free = self._free(self.path)
        if free is not None and free < self.margin:
            self.tripped = free
            return True
        return False

    def message(self) -> str:
        """The one line that says why the worker stops (after `low()` said so)."""
        free = self.tripped or 0
        return (
            f"only {free / MB:,.1f} MB free on the disk of {self.path}, under the margin of "
            f"{self.margin / MB:,.0f} MB (--disk-margin): it takes no more hosts, ends the "
            "requests in flight with their records whole, and stops; nothing is lost (its "
            "URLs go back to the frontier)"
        )
