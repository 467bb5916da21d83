"""The live graph's child process of an embedded crawl (`--live-graph`; docs/graph.md, "The
live graph of a crawl"): when to refresh `DIR/graph/stats.json`, and the final statistics.

    python -m gossamer.runner.livegraph DIR [--interval S]    # runner/run.py `_live_graph`

This module imports only the standard library: numpy, scipy and the graph code
(gossamer.graph._follow) are imported at the first refresh, so a short crawl never pays for
them. A refresh is due every `interval` seconds (and at least ten times its last wall time and
twenty times its CPU time after it), but runs only while the machine has half a core idle, or
while the child's CPU stays within `cpu_share` of the CPU time the crawl's processes (the
child's parent and its other children, from /proc) used since the child started
(`GOSSAMER_LIVE_GRAPH_CPU`). Its stdin is the control channel: `end` asks for the final
statistics, written by a fork so the crawl does not wait: the fork starts computing at the
end of file that follows, which the crawl sends once it has finished (its CDX index and
summary written), so the final statistics do not take the CPU the crawl's end needs; end of
file without `end` exits without writing. The child, then its fork, hold `graph/follow.lock`.
A refresh updates the graph's counts; every FULL_EVERY intervals (and at least FULL_BACKOFF
times the last full refresh's wall time) it is a full one: PageRank, top pages, power-law fits
and distances too (graph/_follow.py)."""

from __future__ import annotations

import fcntl
import os
import resource
import select
import sys
import time
from pathlib import Path
from typing import IO, Any, Final

from ..crawldir import CrawlDir
from ..sinks.graph import FOLLOW_END, REFRESH_BACKOFF, REFRESH_INTERVAL_S

__all__ = ["CPU_SHARE", "END", "INTERVAL_S", "main", "run"]

END: Final = FOLLOW_END
INTERVAL_S: Final = REFRESH_INTERVAL_S  # seconds between two refreshes, at least
INTERVAL_ENV: Final = "GOSSAMER_LIVE_GRAPH_INTERVAL"
BACKOFF: Final = REFRESH_BACKOFF  # ... and at least this many times the last refresh's wall time
_CPU_BACKOFF: Final = 20.0  # ... and this many times its CPU time: ≤ ~5 % of one core
#: the share of the crawl's own CPU time (its processes': the crawl and its workers) the
#: child may use when no core is spare: on a machine the crawl keeps busy, its pages/s cost
#: at most about this much, however loaded the machine (a share of one core over the wall
#: time, as before, let the child take a fifth of what a starved crawl got)
CPU_SHARE: Final = 0.02
CPU_ENV: Final = "GOSSAMER_LIVE_GRAPH_CPU"
#: idle cores (over the last look) that make a refresh free to run: it takes idle time
_SPARE_CORES: Final = 0.5
#: what a first refresh is expected to cost in CPU: numpy and scipy's import (0.33 s) and
#: the first statistics (0.3 s at 20,000 pages)
_FIRST_COST_S: Final = 0.6
_RECHECK_S: Final = 1.0  # over the budget: look again after this long
_NICE: Final = 10  # the crawl's processes come first on a busy machine
#: a full refresh (distances, PageRank, fits) every this many intervals at most ...
FULL_EVERY: Final = 6
#: ... and at least this many times the last full refresh's wall time after it
FULL_BACKOFF: Final = 20.0


_TICK: Final = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def _tree_cpu(pid: int) -> float | None:
    """CPU seconds (user + system) of process `pid` and its descendants, the live ones and
    those it reaped, from /proc; this process (the child) left out; None when unreadable."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()
        total = sum(int(x) for x in fields[11:15]) / _TICK  # utime stime cutime cstime
        children: list[int] = []
        for task in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{task}/children", "rb") as f:
                children += [int(c) for c in f.read().split()]
    except (OSError, ValueError, IndexError):
        return None
    for child in children:
        if child != os.getpid():
            total += _tree_cpu(child) or 0.0
    return total


def _cpu_used() -> float:
    """This process's CPU seconds so far (its start and imports included)."""
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


class _Machine:
    """Idle cores since the last look, from /proc/stat (None where it cannot be read)."""

    def __init__(self) -> None:
        self._last = self._times()

    @staticmethod
    def _times() -> tuple[int, int] | None:
        try:
            with open("/proc/stat", "rb") as f:
                fields = f.readline().split()[1:]
            ticks = [int(x) for x in fields[:8]]
        except (OSError, ValueError):
            return None
        return ticks[3] + ticks[4], sum(ticks)  # (idle + iowait, all)

    def idle_cores(self) -> float | None:
        now, last = self._times(), self._last
        self._last = now
        if now is None or last is None or now[1] <= last[1]:
            return None
        return (now[0] - last[0]) / (now[1] - last[1]) * (os.cpu_count() or 1)


def _hold_lock(directory: Path) -> int:
    """`graph/follow.lock` held (flock, blocking: an earlier run's final statistics are
    written first); the descriptor, which the process keeps until it exits."""
    crawl = CrawlDir(directory)
    crawl.graph_dir.mkdir(parents=True, exist_ok=True)
    fd = os.open(crawl.follow_lock, os.O_RDWR | os.O_CREAT, 0o644)
    fcntl.flock(fd, fcntl.LOCK_EX)
    return fd


def run(
    directory: Path,
    control: IO[bytes],
    *,
    interval: float = INTERVAL_S,
    detach_final: bool = False,
    cpu_share: float = CPU_SHARE,
    crawl_pid: int | None = None,
) -> int:
    """The child's loop (module docstring) until `control` says `end` (final write: 0) or
    closes (the crawl is gone: 1). `detach_final`: a fork writes the final statistics and
    this returns 0 at once. `crawl_pid`: the crawl's process, whose CPU time (its workers'
    included) the budget is a share of; None, or unreadable: one core's time instead."""
    lock = _hold_lock(directory)  # (a fork keeps its copy: held until both have exited)
    try:
        return _loop(directory, control, interval, detach_final, cpu_share, crawl_pid)
    finally:
        os.close(lock)


def _follow_module() -> Any:
    from ..graph import _follow  # numpy, scipy: at the first refresh, not at the start

    return _follow


def _loop(
    directory: Path,
    control: IO[bytes],
    interval: float,
    detach_final: bool,
    cpu_share: float,
    crawl_pid: int | None = None,
) -> int:
    path = CrawlDir(directory).live_graph_stats
    follower: Any = None

    def made() -> Any:
        """The follower, made (numpy and scipy imported) at its first use."""
        nonlocal follower
        if follower is None:
            follower = _follow_module().CrawlFollower(directory)
        return follower

    started = time.monotonic()
    crawl_cpu0 = _tree_cpu(crawl_pid) if crawl_pid is not None else None

    def crawl_cpu(now: float) -> float:
        """The crawl's CPU seconds since the child started (one core's time without it)."""
        if crawl_pid is not None and crawl_cpu0 is not None:
            used = _tree_cpu(crawl_pid)
            if used is not None:
                return used - crawl_cpu0
        return now - started

    due = started + interval
    full_due = 0.0  # the first refresh is a full one
    cost = _FIRST_COST_S
    machine = _Machine()
    fd = control.fileno()
    while True:
        ready, _, _ = select.select([fd], [], [], max(0.0, due - time.monotonic()))
        if ready:
            line = control.readline()
            if line == END:
                return _final(_follow_module, made, path, detach_final, fd)
            if not line:
                return 1
            continue
        now = time.monotonic()
        if now < due:
            continue
        spare = machine.idle_cores()
        if (spare is None or spare < _SPARE_CORES) and (
            _cpu_used() + cost > cpu_share * crawl_cpu(now)
        ):
            due = now + _RECHECK_S  # no spare core, and over the budget: not yet
            continue
        try:
            if made().read():
                full = now >= full_due
                took, cpu = _follow_module().write_once(made(), path, final=False, full=full)
                cost = cpu
                done = time.monotonic()
                due = done + max(interval, BACKOFF * took, _CPU_BACKOFF * cpu)
                if full:
                    full_due = done + max(FULL_EVERY * interval, FULL_BACKOFF * took)
            else:
                due = now + interval
        except (OSError, ValueError) as exc:  # the next refresh tries again; the end says
            print(f"gossamer: the live graph's statistics: {exc}", file=sys.stderr)
            due = now + 60.0


def _wait_end_of_file(fd: int) -> None:
    """Until the control channel `fd` is closed (what else comes is ignored)."""
    while True:
        select.select([fd], [], [])
        try:
            if not os.read(fd, 4096):
                return
        except OSError:
            return


def _final(follow: Any, follower: Any, path: Path, detach_final: bool, control: int) -> int:
    """The final statistics (`follow`, `follower`: called for the module and the follower,
    so a fork imports numpy and scipy itself when no refresh did); detached, once `control`
    reaches its end of file."""

    def write() -> int:
        try:
            if detach_final:
                _wait_end_of_file(control)
            follow().write_once(follower(), path, final=True)
        except (OSError, ValueError) as exc:
            print(f"gossamer: cannot write {path}: {exc}", file=sys.stderr)
            return 1
        return 0

    if not detach_final:
        return write()
    sys.stdout.flush()
    sys.stderr.flush()
    if os.fork() == 0:  # the fork: it inherits the lock's descriptor
        code = 1
        try:
            code = write()
        finally:
            os._exit(code)
    return 0


def _positive_from_env(name: str, default: float, what: str) -> float:
    """The number in environment variable `name` (> 0), else `default` (said on stderr when
    the variable holds something else)."""
    value = os.environ.get(name)
    if not value:
        return default
    try:
        number = float(value)
    except ValueError:
        number = -1.0
    if not number > 0:
        print(f"gossamer: {name}={value!r} is not {what} above 0; using {default}",
              file=sys.stderr)  # fmt: skip
        return default
    return number


def cpu_share_from_env() -> float:
    """`GOSSAMER_LIVE_GRAPH_CPU` (a share of one core, > 0), else CPU_SHARE."""
    return _positive_from_env(CPU_ENV, CPU_SHARE, "a share of a core")


def interval_from_env() -> float:
    """`GOSSAMER_LIVE_GRAPH_INTERVAL` (seconds between two refreshes, > 0), else INTERVAL_S:
    read by an embedded crawl's child and by `gossamer graph follow` (tests: a quicker
    refresh)."""
    return _positive_from_env(INTERVAL_ENV, INTERVAL_S, "a number of seconds")


def main(argv: list[str]) -> int:
    interval = interval_from_env()
    if len(argv) == 3 and argv[1] == "--interval":
        interval = float(argv[2])
    elif len(argv) != 1:
        print("usage: python -m gossamer.runner.livegraph DIR [--interval S]", file=sys.stderr)
        return 2
    os.nice(_NICE)
    return run(
        Path(argv[0]), sys.stdin.buffer, interval=interval, detach_final=True,
        cpu_share=cpu_share_from_env(), crawl_pid=os.getppid(),
    )  # fmt: skip


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
