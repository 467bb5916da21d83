"""The live graph of an embedded crawl, computed in a child process from the crawl's own files
(docs/graph.md, "The live graph"): `DIR/graph/stats.json` written every few seconds and at the
end, equal then to `gossamer graph stats DIR`.

    python -m gossamer.graph._follow DIR [--interval S]    # engine/run.py `_live_graph`

The child (`python -m gossamer.graph._follow DIR`) reads the crawl logs
(`DIR/crawl*.log.jsonl`: the nodes) and graph parts (`DIR/graph/edges*.tsv`: the arcs), both
flushed before each batch is counted done, keeping an offset per file so each refresh parses
only the bytes added since the last one (whole lines only: a line being written is read at the
next refresh). A resumed crawl's earlier runs are in the same files, so they are counted with
no seeding. The graph is assembled as `graph stats DIR` does it (`crawl_graph`), so the final
figures are equal by construction.

Why a process and not a thread fed by page events (issue 18's measurement, docs/graph.md
"What it costs"): the events cost the crawl's event loop ~31 µs a page for the online graph's
update plus the event itself, and the statistics thread (numpy, scipy, the distances' Python
loops) held the crawl's GIL often enough to take 18–21 % of pages/s in all. In a child the
crawl's interpreter does nothing per page for the graph, a pool's parent imports no numpy
before it forks its workers, and the child runs at a lower priority (`os.nice`).

The parent (engine/run.py `_live_graph`) starts the child in its own session, so a ^C meant
for the crawl does not stop it (the crawl's clean stop ends it), and imports none of this
package (numpy, scipy). The control channel is the child's stdin: the line `end` asks for the
final statistics (the crawl's files are closed); end of file without it (the crawl was
killed) makes it exit without writing.

The crawl does not wait for the final statistics. On `end` the child forks: the fork reads
what is left and writes the final `stats.json` (`"final": true`), and the child exits at once,
so the crawl's exit is not held for them (they took 0.3 s at 20,000 pages and ~1.5 s at
90,000: most of the live graph's cost to a short crawl's pages/s; bench/README.md). The child,
and then the fork, hold `graph/follow.lock` (flock) until they exit: `gossamer report` waits on
it when the crawl has ended (engine/report.py `wait_live_graph`), and the child of a resumed
crawl waits for it before reading, so an earlier run's final statistics never land after a
later run's.
"""

from __future__ import annotations

import fcntl
import os
import select
import sys
import time
from pathlib import Path
from typing import IO, Any, Final

import numpy as np
import numpy.typing as npt

from ..sinks.graph import FOLLOW_LOCK, node_id
from ..sinks.stats import write_stats
from ._live import _BACKOFF, INTERVAL_S
from ._load import crawl_dirs, crawl_graph, edge_lines, node_urls

__all__ = ["END", "CrawlFollower", "run"]

END: Final = b"end\n"
_NICE: Final = 10  # the child's niceness: the crawl's processes come first on a busy machine
# A refresh waits at least this many times the CPU time the last one took, so the periodic
# statistics take at most ~1/21 of a core: on a machine whose cores the crawl keeps busy
# (a pool), that core time is the crawl's. Measured (bench/README.md): with 2 workers on 2
# cores, 4 refreshes of 55,000 pages took ~2.4 s of CPU in a 21 s crawl at _BACKOFF (10,
# wall time) alone.
_CPU_BACKOFF: Final = 20.0


class CrawlFollower:
    """The crawl graph of `directory` read incrementally from its files (module docstring)."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.nodes: set[int] = set()
        self._offsets: dict[Path, int] = {}
        self._src: list[npt.NDArray[np.int64]] = []
        self._dst: list[npt.NDArray[np.int64]] = []

    def read(self, *, final: bool = False) -> bool:
        """Parse what the crawl's files gained since the last call; whether anything did.
        `final`: the files are closed, so a last line without its newline counts too (as
        `graph stats DIR` reads a log)."""
        grew = False
        for d in crawl_dirs(self.directory):
            for log in sorted(d.glob("crawl*.log.jsonl")):
                data = self._new_bytes(log, whole_lines=not final)
                if data:
                    grew = True
                    self.nodes.update(node_id(u) for u in node_urls(data.splitlines()))
            for part in sorted((d / "graph").glob("edges*.tsv")):
                data = self._new_bytes(part, whole_lines=True)
                if data:
                    grew = True
                    src, dst = edge_lines(data, part)  # (a header: only at offset 0)
                    self._src.append(src)
                    self._dst.append(dst)
        return grew

    def _new_bytes(self, path: Path, *, whole_lines: bool) -> bytes:
        start = self._offsets.get(path, 0)
        try:
            with open(path, "rb") as f:
                f.seek(start)
                data = f.read()
        except OSError:
            return b""
        if whole_lines:
            data = data[: data.rfind(b"\n") + 1]
        self._offsets[path] = start + len(data)
        return data

    def edges(self) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
        """Every arc read so far (src ids, dst ids), repeats kept; the parts concatenated once."""
        if len(self._src) > 1:
            self._src = [np.concatenate(self._src)]
            self._dst = [np.concatenate(self._dst)]
        if not self._src:
            empty = np.empty(0, dtype=np.int64)
            return empty, empty
        return self._src[0], self._dst[0]

    def statistics(self) -> dict[str, Any]:
        """The graph's statistics as `gossamer graph stats DIR --json` computes them, with
        `memory_bytes` the follower's arrays."""
        from . import statistics_of  # (the package imports this module's parent)

        ids = np.fromiter(self.nodes, dtype=np.int64, count=len(self.nodes))
        ids.sort()
        src, dst = self.edges()
        adj, pending = crawl_graph(ids, src, dst)
        memory = ids.nbytes + src.nbytes + dst.nbytes + sys.getsizeof(self.nodes)
        return {"memory_bytes": memory, **statistics_of(adj, pending=pending)}


def write_once(follower: CrawlFollower, path: Path, *, final: bool) -> tuple[float, float]:
    """Read, compute and write the statistics; the seconds it took, wall and CPU."""
    began, began_cpu = time.perf_counter(), time.process_time()
    follower.read(final=final)
    stats = follower.statistics()
    took = time.perf_counter() - began
    write_stats(
        path,
        {
            "updated_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            "final": final,
            "compute_s": round(took, 3),
            **stats,
        },
    )
    return took, time.process_time() - began_cpu


def _hold_lock(directory: Path) -> int:
    """`graph/follow.lock` held (flock, blocking: an earlier run's final statistics are
    written first); the descriptor, which the process keeps until it exits."""
    (directory / "graph").mkdir(parents=True, exist_ok=True)
    fd = os.open(directory / "graph" / FOLLOW_LOCK, os.O_RDWR | os.O_CREAT, 0o644)
    fcntl.flock(fd, fcntl.LOCK_EX)
    return fd


def _write_final(follower: CrawlFollower, path: Path) -> int:
    try:
        write_once(follower, path, final=True)
    except (OSError, ValueError) as exc:
        print(f"gossamer: cannot write {path}: {exc}", file=sys.stderr)
        return 1
    return 0


def run(
    directory: Path,
    control: IO[bytes],
    *,
    interval: float = INTERVAL_S,
    detach_final: bool = False,
) -> int:
    """The child's loop: refresh every `interval` s (at least `_BACKOFF` times the last
    refresh's wall time and `_CPU_BACKOFF` times its CPU time) while the crawl's files grow,
    until `control` says `end` (final write, 0) or closes (the crawl is gone: 1).
    `detach_final`: the final write is done by a fork and this returns 0 at once (module
    docstring)."""
    lock = _hold_lock(directory)  # (a fork keeps its copy: held until both have exited)
    try:
        return _follow(directory, control, interval, detach_final)
    finally:
        os.close(lock)


def _follow(directory: Path, control: IO[bytes], interval: float, detach_final: bool) -> int:
    path = directory / "graph" / "stats.json"
    follower = CrawlFollower(directory)
    wait = interval
    fd = control.fileno()
    while True:
        ready, _, _ = select.select([fd], [], [], wait)
        if ready:
            line = control.readline()
            if line == END:
                if not detach_final:
                    return _write_final(follower, path)
                sys.stdout.flush()
                sys.stderr.flush()
                if os.fork() == 0:  # the fork: it inherits the lock's descriptor
                    code = 1
                    try:
                        code = _write_final(follower, path)
                    finally:
                        os._exit(code)
                return 0
            if not line:
                return 1
            continue
        try:
            if follower.read():
                took, cpu = write_once(follower, path, final=False)
                wait = max(interval, _BACKOFF * took, _CPU_BACKOFF * cpu)
        except (OSError, ValueError) as exc:  # the next refresh tries again; the end says
            print(f"gossamer: the live graph's statistics: {exc}", file=sys.stderr)
            wait = max(wait, 60.0)


def main(argv: list[str]) -> int:
    interval = INTERVAL_S
    if len(argv) == 3 and argv[1] == "--interval":
        interval = float(argv[2])
    elif len(argv) != 1:
        print("usage: python -m gossamer.graph._follow DIR [--interval S]", file=sys.stderr)
        return 2
    os.nice(_NICE)
    return run(Path(argv[0]), sys.stdin.buffer, interval=interval, detach_final=True)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
