"""An embedded crawl's worker heartbeats: each crawling process (a pool's worker `wK`, or the
one process of a crawl without a pool, `main`) keeps `DIR/workers/<id>.json` — its pid,
state, the hosts it is crawling, its pages, pages/s and errors, and when it last beat —
rewritten atomically every BEAT_INTERVAL_S by a timer on its event loop, and a last time as
it exits. The dashboard's worker table reads them (dashboard/_sources.py), and a pool's
parent its progress display's pages (`BeatPages`); the workers never do. A beat is off the
per-page path (its cost: bench/README.md, `python -m gossamer.engine.heartbeat --bench`)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import time
from collections import deque
from pathlib import Path
from typing import Any, Protocol

from ..crawldir import CrawlDir
from .crawler import CrawlCounters
from .machine import ResourceSampler

__all__ = [
    "BEAT_INTERVAL_S",
    "BeatPages",
    "Heartbeat",
    "beat_path",
    "clear_beats",
    "forget_beat",
    "read_beats",
    "write_beat",
]

#: seconds between two beats: the dashboard reads at most every 0.5 s, and a table a second
#: old is fresh enough to read; a faster beat would only cost writes
BEAT_INTERVAL_S = 1.0
#: seconds of beats a worker's pages/s is measured over (as the dashboard's total)
RATE_WINDOW_S = 5.0


def beat_path(out: Path, worker_id: str) -> Path:
    return CrawlDir(out).heartbeat(worker_id)


def write_beat(path: Path, record: dict[str, Any]) -> None:
    """Write `record` to `path` atomically (a reader sees the old beat or the new one)."""
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(record))
    os.replace(tmp, path)


def clear_beats(out: Path) -> None:
    """Remove the beats of an earlier run (a new run's workers write theirs): called with
    the directory's lock held, before any worker starts."""
    folder = CrawlDir(out).heartbeats
    if not folder.is_dir():
        return
    for path in folder.iterdir():
        if path.suffix in (".json", ".tmp"):
            with contextlib.suppress(FileNotFoundError):
                path.unlink()


def forget_beat(out: Path, worker_id: str) -> None:
    """A retired pool worker's beat, once it has exited (its pages are in its stats part):
    the dashboard's table shows the workers of the pool as it is."""
    with contextlib.suppress(FileNotFoundError):
        beat_path(out, worker_id).unlink()


def read_beats(out: Path) -> list[dict[str, Any]]:
    """Every beat in `out/workers/`, by worker number (`main` first); a file being replaced
    or torn is skipped."""
    folder = CrawlDir(out).heartbeats
    try:
        paths = [p for p in folder.iterdir() if p.suffix == ".json" and not p.name.startswith(".")]
    except OSError:
        return []
    beats = []
    for path in paths:
        try:
            rec = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        if isinstance(rec, dict):
            beats.append(rec)
    return sorted(beats, key=lambda r: _number(str(r.get("id", ""))))


class BeatPages:
    """The pages this run's workers have fetched, from their beats in `out` (a worker counts
    a page as it is fetched, and beats every BEAT_INTERVAL_S): what a pool's parent shows,
    where the frontier counts a batch's pages only once the batch completes (a batch of 20
    URLs at a 1 s delay: 20 s). Each worker's last count is kept, so the pages of a worker
    whose beat is gone (retired by a scale-down: `forget_beat`) stay counted. Call it from
    one thread."""

    def __init__(self, out: Path) -> None:
        self.out = out
        self._last: dict[str, int] = {}

    def __call__(self) -> int:
        for beat in read_beats(self.out):
            pages = beat.get("pages")
            if isinstance(pages, int):
                self._last[str(beat.get("id"))] = pages
        return sum(self._last.values())


def _number(worker_id: str) -> int:
    try:
        return int(worker_id.lstrip("w"))
    except ValueError:
        return -1


class _Crawling(Protocol):
    """What a beat reads of a `Crawler`."""

    @property
    def counters(self) -> CrawlCounters: ...

    @property
    def stopping(self) -> bool: ...

    def hosts_crawling(self) -> list[str]: ...


class Heartbeat:
    """One worker's beat: `start()` on its event loop writes one now and then every
    BEAT_INTERVAL_S (a loop timer: nothing runs per page), `finish()` writes the last one
    (state `exited`) and stops the timer. A beat that cannot be written is skipped (the
    crawl's own writes say when the disk is full)."""

    def __init__(self, crawler: _Crawling, out: Path, worker_id: str) -> None:
        self.crawler = crawler
        self.path = beat_path(out, worker_id)
        self.worker_id = worker_id
        self.started = time.time()
        self._samples: deque[tuple[float, int]] = deque()
        self._timer: asyncio.TimerHandle | None = None
        self._resources = ResourceSampler(out)

    def record(self, state: str) -> dict[str, Any]:
        c = self.crawler.counters
        now = time.time()
        self._samples.append((now, c.pages))
        while len(self._samples) > 2 and now - self._samples[1][0] >= RATE_WINDOW_S:
            self._samples.popleft()
        t0, p0 = self._samples[0]
        res = self._resources.sample(c.wire_in, c.wire_out)
        disk = getattr(self.crawler, "disk", None)
        return {
            "id": self.worker_id,
            "pid": os.getpid(),
            "state": state,
            "hosts": self.crawler.hosts_crawling(),
            "pages": c.pages,
            "pages_per_s": round((c.pages - p0) / (now - t0), 1) if now > t0 else 0.0,
            "requests": c.requests,
            "errors": sum(c.errors.values()),
            "started": self.started,
            "last_heartbeat": now,
            # what this process costs its machine (engine/machine.py)
            "cpu_percent": res.cpu_percent,
            "rss_bytes": res.rss_bytes,
            "disk_free_bytes": res.disk_free_bytes,
            "bytes_in_per_s": res.bytes_in_per_s,
            "bytes_out_per_s": res.bytes_out_per_s,
            "disk_low": disk is not None and disk.tripped is not None,
        }

    def beat(self, state: str | None = None) -> None:
        if state is None:
            state = "stopping" if self.crawler.stopping else "running"
        with contextlib.suppress(OSError):
            write_beat(self.path, self.record(state))

    def start(self) -> None:
        with contextlib.suppress(OSError):
            self.path.parent.mkdir(exist_ok=True)
        self._tick()

    def _tick(self) -> None:
        self.beat()
        self._timer = asyncio.get_running_loop().call_later(BEAT_INTERVAL_S, self._tick)

    def finish(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self.beat("exited")


def _bench(n: int = 2000) -> None:
    """The cost of one beat (a record built and written atomically), in a temporary
    directory of the current file system."""
    import tempfile

    class Busy:  # a crawler in the middle of a crawl, as a beat reads it
        counters = CrawlCounters(pages=123456, requests=130000)
        counters.errors.update({"fetch/status/404": 120, "fetch/error/timeout": 3})
        stopping = False

        def hosts_crawling(self) -> list[str]:
            return [f"host{k}.example.org" for k in range(16)]

    with tempfile.TemporaryDirectory(dir=".") as tmp:
        beat = Heartbeat(Busy(), Path(tmp), "w0")
        beat.path.parent.mkdir()
        t0 = time.perf_counter()
        for _ in range(n):
            beat.beat("running")
        each = (time.perf_counter() - t0) / n
    print(f"one beat: {each * 1e6:.0f} µs; at one a second: {each * 100:.4f} % of a core")


if __name__ == "__main__":
    import sys

    if sys.argv[1:] == ["--bench"]:
        _bench()
