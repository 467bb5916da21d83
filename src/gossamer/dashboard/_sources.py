"""Where the dashboard's figures come from: a crawl directory (`EmbeddedSource`) or a cluster
crawl in Redis (`ClusterSource`). Both answer `snapshot()` with the same JSON-able shape (the
`/api/status` body, docs/dashboard.md) and `stop()`; both are synchronous (file and Redis
reads) and are called off the event loop.

The embedded source reads only what the crawl writes anyway — crawl.json, runs.jsonl, the
`lock` file's pid, the crawl log, the frontier's counters and top hosts (through
the frontier's own reads), stats.json and the live
graph's graph/stats.json — so watching costs the crawl nothing but the reads. The crawl log
is tailed: each snapshot reads only the lines appended since the last one (counted by
`report.crawl.count_log_record`, as `gossamer report` counts them), so a snapshot's cost
does not grow with the crawl. A crawl that does not run is shown whole: its time over every
run, its pages by worker and its rate over time from the crawl log, its graph statistics
computed on demand (_graphstats.py). The cluster source is `gossamer status`'s
`crawl_status`."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import sqlite3
import subprocess
import threading
import time
from collections import Counter, deque
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Protocol

from ..crawldir import MANIFEST, CrawlDir
from ..engine.heartbeat import read_beats
from ..frontier.sqlite import read_counts
from ..report.crawl import (
    count_log_record,
    live_graph_locked,
    live_graph_stats,
    stats_end_reason,
)
from ..report.progress import nothing_fetched
from ..runner.pool import MAX_POOL_WORKERS, gossamer_alive, read_control
from ..sinks import read_run_records
from ._graphstats import GraphOnDemand
from ._history import RateBins, crawl_history
from ._hosts import TOP_HOSTS_EVERY_S, cluster_top_hosts, crawl_options, sqlite_top_hosts
from ._logtail import (
    LogRing,
    RingEntry,
    diagnostic_record,
    fetch_entry,
    fetch_level,
    record_entry,
    unsent_record,
)
from ._setup import problem_of

__all__ = ["ClusterSource", "EmbeddedSource", "SourceError", "StatusSource"]


class SourceError(Exception):
    """The source cannot be opened or cannot do what was asked; the message says why."""


class StatusSource(Protocol):
    """What the dashboard reads a crawl through."""

    def snapshot(self) -> dict[str, Any]:
        """The crawl's status now (the `/api/status` body)."""
        ...

    def stop(self) -> str:
        """Ask the crawl to stop gracefully; what was done, in words (SourceError: cannot)."""
        ...

    def close(self) -> None: ...

    # the log tail (_logtail.py): the ring the sources add records to, and a read that
    # brings it up to date
    log_ring: LogRing

    def read_log(self) -> None: ...


#: seconds of samples the embedded source's pages/s is measured over
RATE_WINDOW_S = 5.0


class _Rate:
    """pages/s over the last RATE_WINDOW_S seconds, from (time, pages) samples."""

    def __init__(self) -> None:
        self._samples: deque[tuple[float, int]] = deque()

    def add(self, now: float, pages: int) -> float:
        self._samples.append((now, pages))
        while len(self._samples) > 2 and now - self._samples[1][0] >= RATE_WINDOW_S:
            self._samples.popleft()
        t0, p0 = self._samples[0]
        return round((pages - p0) / (now - t0), 1) if now > t0 else 0.0


_CHUNK = 4 << 20


class _LogTail:
    """The crawl log's counts, read incrementally: only the bytes appended since the last
    call. A line not yet ended (a write in progress) waits for the next call; a log that
    shrank (replaced) is read again from its start."""

    def __init__(self, path: Path, ring: LogRing | None = None) -> None:
        self.path = path
        self.ring = ring  # fetch records go there too (the log tail: _logtail.py)
        self._offset = 0
        self._rest = b""
        self._reset()

    def _reset(self) -> None:
        self._offset, self._rest = 0, b""
        self.requests = self.pages = self.bytes = 0
        self.duplicates = 0  # pages the log marks `dup` (near-duplicates, identical payloads)
        self.outcomes: Counter[str] = Counter()
        self.statuses: Counter[str] = Counter()
        self.errors: Counter[str] = Counter()
        self.modified: float | None = None
        #: worker id (the line's `worker`, `main` for a one-process crawl's) -> [requests,
        #: pages, errors] over every run: a crawl that does not run shows these
        self.by_worker: dict[str, list[int]] = {}
        self.bins = RateBins()  # pages and bytes over time: its history

    def read(self) -> None:
        try:
            st = self.path.stat()
        except FileNotFoundError:
            return
        if st.st_size < self._offset:
            self._reset()
        self.modified = st.st_mtime
        if st.st_size == self._offset:
            return
        with self.path.open("rb") as f:
            f.seek(self._offset)
            # in chunks: the first read of a long crawl's log (GBs) holds one chunk at a time
            while chunk := f.read(_CHUNK):
                self._offset += len(chunk)
                data = self._rest + chunk
                cut = data.rfind(b"\n") + 1
                self._rest = data[cut:]
                self._count(data[:cut])

    def _count(self, lines: bytes) -> None:
        ring = self.ring
        rows = lines.splitlines()
        # the log tail's records: only the last ring-full of lines can stay in the ring, and
        # the warnings (their own ring); the rest would be pushed out at once
        recent = len(rows) - ring.size if ring is not None else len(rows)
        entries: list[RingEntry] = []
        bins, by_worker = self.bins, self.by_worker
        for k, raw in enumerate(rows):
            try:
                rec = json.loads(raw)
            except ValueError:
                continue  # a torn line of a killed run
            if not isinstance(rec, dict):
                continue
            self.requests += 1
            nbytes = int(rec.get("bytes") or 0)
            self.bytes += nbytes
            page = count_log_record(rec, self.outcomes, self.statuses, self.errors)
            self.pages += page
            if page and rec.get("dup"):
                self.duplicates += 1
            bins.add(rec.get("time"), page, nbytes)
            wid = rec.get("worker") or "main"
            worker = by_worker.get(wid)
            if worker is None:
                worker = by_worker[str(wid)] = [0, 0, 0]
            worker[0] += 1
            worker[1] += page
            # an error as count_log_record counts one: no response, or a page's error
            if rec.get("status") is None or (rec.get("error") and rec.get("depth") is not None):
                worker[2] += 1
            if ring is not None and (k >= recent or fetch_level(rec) == "warning"):
                entries.append(fetch_entry(rec))
        if entries:
            assert ring is not None
            ring.extend(entries)


class _DiagnosticsTail:
    """The crawl's diagnostics file (`CrawlDir.diagnostics`), read from where the last call
    stopped, into the log ring. A handful of lines a run: no chunking needed beyond the
    ring's bound."""

    def __init__(self, path: Path, ring: LogRing) -> None:
        self.path = path
        self.ring = ring
        self._offset = 0

    def read(self) -> None:
        try:
            size = self.path.stat().st_size
        except FileNotFoundError:
            return
        if size < self._offset:
            self._offset = 0
        if size == self._offset:
            return
        with self.path.open("rb") as f:
            f.seek(max(self._offset, size - (1 << 20)))  # the last MB at most
            data = f.read(size - f.tell())
        cut = data.rfind(b"\n") + 1
        self._offset = size - len(data) + cut
        for raw in data[:cut].splitlines():
            try:
                rec = json.loads(raw)
            except ValueError:
                continue
            if isinstance(rec, dict):
                self.ring.add(diagnostic_record(rec))


class EmbeddedSource:
    """A crawl directory (`gossamer crawl -o DIR`), running or not."""

    kind = "embedded"

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.crawl = crawl = CrawlDir(directory)
        manifest = crawl.manifest
        # a directory that does not exist yet (or is empty): the crawl to be started there
        # from the page (POST /api/start); its settings are read once crawl.json appears
        self._settings: dict[str, Any] = {}
        if directory.exists() and not directory.is_dir():
            raise SourceError(f"{directory} is not a directory")
        if not manifest.is_file() and directory.is_dir() and any(directory.iterdir()):
            raise SourceError(
                f"{directory} is not a crawl directory (no {MANIFEST}); give the -o "
                "directory of a crawl (or a new one to start a crawl in), or --redis URL "
                "for a cluster crawl"
            )
        if manifest.is_file():
            try:
                self._settings = json.loads(manifest.read_text())
            except (OSError, ValueError) as exc:
                raise SourceError(f"cannot read {manifest}: {exc}") from exc
        self.log_ring = LogRing()
        self._lock = threading.Lock()  # snapshots may overlap (/api/status, the event loop)
        self._start_reading()

    def _start_reading(self) -> None:
        """What is read of the crawl, from its start (the log ring stays: its past lines
        are the page's)."""
        directory = self.directory
        crawl = CrawlDir(directory)
        self._tail = _LogTail(crawl.crawl_log, self.log_ring)
        self._diagnostics = _DiagnosticsTail(crawl.diagnostics, self.log_ring)
        self._rate = _Rate()
        self._bytes_rate = _Rate()
        self._hosts_read = 0.0  # monotonic time top_hosts was last read
        self._top_hosts: list[dict[str, Any]] | None = None
        self._stop_sent: int | None = None  # the pid sent SIGTERM by stop()
        self._graph = GraphOnDemand(directory)  # an ended crawl's graph statistics
        self._runs: list[tuple[float, float]] = []  # the last snapshot's runs (start, end)

    def lock_pid(self) -> int | None:
        """The pid in the directory's lock file: the process that holds it, or held it last."""
        return self.crawl.lock_pid()

    def _running_pid(self, runs: list[dict[str, Any]]) -> int | None:
        """The crawling process's pid, None when no crawl runs in the directory: its last run
        has no end recorded and the pid in its lock file is alive."""
        last_start = next((r for r in reversed(runs) if r.get("event") == "start"), None)
        if last_start is None:
            return None
        ended = any(r.get("event") == "end" and r.get("run") == last_start.get("run") for r in runs)
        pid = self.crawl.lock_pid()
        if ended or pid is None or not gossamer_alive(pid):
            return None
        return pid

    def snapshot(self) -> dict[str, Any]:
        with self._lock:
            return self._snapshot()

    def _snapshot(self) -> dict[str, Any]:
        now = time.time()
        out, crawl = self.directory, self.crawl
        if not self._settings:  # a crawl started since: its settings
            self._settings = _read_json(crawl.manifest) or {}
        runs = read_run_records(crawl.runs)
        starts = [r for r in runs if r.get("event") == "start"]
        pid = self._running_pid(runs)
        stats = _read_json(crawl.stats)
        max_pages = self._settings.get("max_pages")
        end_reason = None
        if pid is not None:
            state = "stopping" if self._stop_sent == pid else "running"
        elif not starts:
            state = "not started"
        else:
            last = starts[-1]
            end = next(
                (r for r in runs if r.get("event") == "end" and r.get("run") == last.get("run")),
                None,
            )
            stats = (end or {}).get("stats") or stats  # the last run's
            end_reason = stats_end_reason(stats, max_pages)
            state = "ended" if end is not None else "killed"
        self._tail.read()
        tail = self._tail
        frontier, frontier_error = None, None
        try:
            frontier = read_counts(crawl.frontier)
        except sqlite3.Error as exc:
            frontier_error = str(exc)
        started = float(starts[-1]["time"]) if starts else None
        self._runs = _run_spans(runs, tail, now if pid is not None else None)
        elapsed = sum(end - start for start, end in self._runs)
        rate = self._rate.add(now, tail.pages) if pid is not None else 0.0
        bytes_rate = self._bytes_rate.add(now, tail.bytes) if pid is not None else 0.0
        if self._top_hosts is None or time.monotonic() - self._hosts_read >= TOP_HOSTS_EVERY_S:
            self._hosts_read = time.monotonic()
            try:
                self._top_hosts = sqlite_top_hosts(
                    crawl.frontier, options=crawl_options(self._settings)
                )
            except sqlite3.Error:
                self._top_hosts = None  # (frontier_error says why, from the counters read)
        errors = sum(tail.errors.values())
        workers = _beat_rows(out, now, running=pid is not None)
        if pid is None and tail.by_worker:  # the whole crawl's pages by worker
            workers = _log_worker_rows(workers, tail, now, self.crawl.lock_pid())
        if not workers and (pid is not None or starts):  # no beat yet (or none written)
            workers.append(
                {
                    "id": "main",
                    "machine": socket.gethostname(),
                    "pid": pid if pid is not None else self.crawl.lock_pid(),
                    "state": state,
                    "pages": tail.pages,
                    "pages_per_s": rate,
                    "errors": errors,
                    "processes": int(starts[-1].get("workers") or 1) if starts else None,
                    "hosts": [],
                    "last_heartbeat": tail.modified,
                    "beat_age_s": round(max(0.0, now - tail.modified), 1)
                    if tail.modified
                    else None,
                }
            )
        # a crawl that ended having tried and fetched no page: why, and it may start again
        unfetched = (
            state == "ended" and stats is not None and nothing_fetched(stats) and tail.pages == 0
        )
        problem = problem_of(stats) if unfetched else None
        graph, graph_state, graph_error = self._graph_stats(out, pid is None and tail.pages > 0)
        return {
            "source": {"kind": self.kind, "directory": str(out)},
            "crawl": {
                "id": out.name,
                "state": state,
                "end_reason": end_reason,
                "pid": pid,
                "started": started,
                "elapsed_s": round(elapsed, 1),
                "runs": len(starts),
                "max_pages": max_pages,
                "seeds": list(self._settings.get("seeds") or []),
                "problem": problem,
            },
            "totals": {
                "pages": tail.pages,
                "duplicates": tail.duplicates,
                "pages_per_s": rate,
                "requests": tail.requests,
                "bytes": tail.bytes,
                "errors": errors,
                "statuses": {k: v for k, v in sorted(tail.statuses.items()) if k != "None"},
                "outcomes": dict(tail.outcomes.most_common()),
                "workers": sum(1 for w in workers if w["state"] in ("running", "stopping")),
                "bytes_per_s": bytes_rate,
            },
            "frontier": frontier,
            "frontier_error": frontier_error,
            "workers": workers,
            "top_hosts": self._top_hosts,
            "graph": graph,
            "graph_state": graph_state,
            "graph_error": graph_error,
            "time": now,
            "control": _embedded_control(out, state, end_reason, pid, unfetched=unfetched),
        }

    def _graph_stats(
        self, out: Path, ended: bool
    ) -> tuple[dict[str, Any] | None, str | None, str | None]:
        """(graph, graph_state, graph_error): the live graph's statistics while the crawl
        runs (or while its live graph writes its final ones); once it does not run and has
        none final, those computed on demand (`ended`: it does not run and has pages)."""
        live = live_graph_stats(CrawlDir(out).live_graph_stats)
        if not ended or (live is not None and live.get("final")) or live_graph_locked(out):
            return live, "live" if live is not None else None, None
        state, stats, error = self._graph.read()
        if stats is None and live is not None:  # a killed crawl's last live figures, meanwhile
            return live, state, error
        return stats, state, error

    def crawl_history(self) -> dict[str, list[float | None]] | None:
        """The crawl's whole history from its crawl log (`GET /api/history` of a crawl that
        does not run), None while it runs or before it started."""
        with self._lock:
            status = self._snapshot()
            if status["crawl"]["state"] in ("running", "stopping", "not started"):
                return None
            return crawl_history(self._tail.bins, self._runs)

    @contextlib.contextmanager
    def new_crawl(self, status: dict[str, Any]) -> Iterator[None]:
        """Around a start in this directory, whose `status` allows it (`control.can_start`).
        A directory holding a crawl that fetched no page is started afresh by the crawl
        itself (runner/run.py, `start_afresh`: the command's own rule); what this source read
        of the old crawl is dropped, and the status read from the new one."""
        if status["crawl"]["state"] == "not started":
            yield
            return
        try:
            yield
        finally:
            with self._lock:
                self._settings = {}
                self._graph.close()
                self._start_reading()

    def read_log(self) -> None:
        """Bring the log ring up to date (the crawl log's new fetches, the new diagnostics):
        the same tail the status reads, so the crawl log is read once for both."""
        with self._lock:
            self._tail.read()
            self._diagnostics.read()

    def stop(self) -> str:
        """SIGTERM to the crawling process, as a terminal's `kill` would: a graceful stop
        (it finishes its batches, writes its statistics; `gossamer crawl --resume` goes on)."""
        with self._lock:
            pid = self._running_pid(read_run_records(self.crawl.runs))
            if pid is None:
                raise SourceError(f"no crawl is running in {self.directory}")
            try:
                os.kill(pid, signal.SIGTERM)
            except ProcessLookupError:
                raise SourceError(f"no crawl is running in {self.directory}") from None
            self._stop_sent = pid
            return f"sent SIGTERM to the crawl's process {pid}"

    def close(self) -> None:
        self._graph.close()


def _beat_rows(out: Path, now: float, *, running: bool) -> list[dict[str, Any]]:
    """The worker table of an embedded crawl: one row per heartbeat file (engine/heartbeat.py;
    this run's: a run clears the last one's). A crawl that is not running has no running
    worker, whatever its last beats (a killed crawl's) say."""
    machine = socket.gethostname()
    rows = []
    for b in read_beats(out):
        last = b.get("last_heartbeat")
        state = str(b.get("state") or "running") if running else "exited"
        rows.append(
            {
                "id": str(b.get("id")),
                "machine": machine,
                "pid": b.get("pid"),
                "state": state,
                "hosts": list(b.get("hosts") or []),
                "pages": int(b.get("pages") or 0),
                "pages_per_s": float(b.get("pages_per_s") or 0.0) if state != "exited" else 0.0,
                "errors": int(b.get("errors") or 0),
                "requests": int(b.get("requests") or 0),
                "last_heartbeat": last,
                "beat_age_s": round(max(0.0, now - float(last)), 1) if last else None,
                **{k: b.get(k) for k in _RESOURCE_KEYS},
                "disk_low": bool(b.get("disk_low")),
            }
        )
    return rows


#: what a worker's beat says it costs its machine (engine/machine.py)
_RESOURCE_KEYS = (
    "cpu_percent", "rss_bytes", "disk_free_bytes", "bytes_in_per_s", "bytes_out_per_s",
)  # fmt: skip


def _run_spans(
    runs: list[dict[str, Any]], tail: _LogTail, now: float | None
) -> list[tuple[float, float]]:
    """Each run's (start, end), as `gossamer report` times them: its end record; else, for
    the run going on (`now` given), now; else (killed) its last activity in the crawl log."""
    ends = {r.get("run"): float(r["time"]) for r in runs
            if r.get("event") == "end" and isinstance(r.get("time"), int | float)}  # fmt: skip
    starts = sorted(
        (float(r["time"]), r.get("run")) for r in runs
        if r.get("event") == "start" and isinstance(r.get("time"), int | float)
    )  # fmt: skip
    spans = []
    for k, (start, run) in enumerate(starts):
        following = starts[k + 1][0] if k + 1 < len(starts) else None
        until = ends.get(run)
        if until is None and following is None:  # the last run: going on, or killed
            until = now if now is not None else tail.modified
        elif until is None and following is not None:  # an earlier run, killed: its last fetch
            last = tail.bins.last_before(following)
            until = min(last, following) if last is not None else None
        spans.append((start, max(start, until if until is not None else start)))
    return spans


def _log_worker_rows(
    beats: list[dict[str, Any]], tail: _LogTail, now: float, main_pid: int | None
) -> list[dict[str, Any]]:
    """The worker table of a crawl that does not run: every worker of every run, its
    requests, pages and errors counted in the crawl log (so the pages add up to the crawl's),
    its pid and last heartbeat from its beat when the last run had one (else the crawl
    log's last write, and a one-process crawl's pid from the lock file)."""
    rows = {r["id"]: r for r in beats}
    machine = socket.gethostname()
    seen = tail.modified
    for wid in sorted(set(rows) | set(tail.by_worker)):
        requests, pages, errors = tail.by_worker.get(wid, (0, 0, 0))
        row = rows.setdefault(wid, {
            "id": wid, "machine": machine, "pid": main_pid if wid == "main" else None,
            "state": "exited", "hosts": [], "last_heartbeat": seen,
            "beat_age_s": round(max(0.0, now - seen), 1) if seen else None,
        })  # fmt: skip
        row.update(pages=pages, requests=requests, errors=errors, pages_per_s=0.0)
    return [rows[wid] for wid in sorted(rows)]


def _embedded_control(
    out: Path, state: str, end_reason: str | None, pid: int | None, *, unfetched: bool = False
) -> dict[str, Any]:
    """What the page may ask of this crawl now (the `control` key). A crawl that fetched no
    page (`unfetched`) may be started again, its files replaced (EmbeddedSource.new_crawl)."""
    control = read_control(out) if pid is not None else None
    pool = control is not None and control.get("pid") == pid
    workers: int | None = None
    if pool:
        assert control is not None
        workers = int(control.get("workers") or 0) or None
    elif pid is not None:
        workers = 1
    return {
        "workers": workers,
        "can_start": unfetched or (state == "not started" and not CrawlDir(out).manifest.exists()),
        "can_resume": state in ("ended", "killed") and end_reason != "complete",
        "can_stop": state == "running",
        "can_scale": state == "running" and pool,
        "max_workers": MAX_POOL_WORKERS,
    }


def _number(value: Any) -> float:
    """A setting's number (0 when absent or not a number)."""
    return float(value) if isinstance(value, int | float) else 0.0


def _read_json(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


#: fetch stream entries a read takes at most (the newest): ≤ 16 records each
FETCH_ENTRIES_READ = 200


def _fetch_entries(batch: dict[str, Any]) -> list[tuple[float, RingEntry]]:
    """A worker's fetch stream entry (cluster/fetchstream.py) as timed ring entries: its
    fetches as the crawl log's fetch records (made when read), then what it did not send."""
    worker = str(batch.get("worker"))
    out: list[tuple[float, RingEntry]] = []
    for rec in batch.get("fetches") or ():
        if isinstance(rec, dict) and isinstance(rec.get("time"), int | float):
            rec["worker"] = worker
            out.append((float(rec["time"]), fetch_entry(rec)))
    unsent = batch.get("unsent")
    if isinstance(unsent, int) and unsent > 0:
        warnings = int(batch.get("unsent_warnings") or 0)
        now = _number(batch.get("time"))
        rec = unsent_record(worker, unsent, warnings, batch.get("rate"), now)
        out.append((now, record_entry(rec)))
    return out


class ClusterSource:
    """A cluster crawl in Redis (`gossamer crawl --redis`): `crawl_status`, as `gossamer
    status --json` shows it, in the dashboard's shape. The Redis URL is kept here and only
    its redacted form (`redact`) ever leaves this object."""

    kind = "cluster"

    def __init__(self, url: str, crawl_id: str | None) -> None:
        from ..cluster._redis import RedisConnectError, redact
        from ..cluster.connect import CONTROL_PATIENCE, connect_redis
        from ..cluster.crawls import CrawlRecordError, list_crawls, load_crawl

        self._url = url  # (for the crawls and workers the dashboard starts; never shown)
        self._shown_url = redact(url)
        try:
            self._client = connect_redis(url, patience=CONTROL_PATIENCE)
        except RedisConnectError as exc:
            raise SourceError(str(exc)) from exc
        # None: no crawl in this Redis yet — one is started from the page (POST /api/start)
        self._crawl_id: str | None = None
        try:
            if crawl_id is not None or list_crawls(self._client):
                self._crawl_id = load_crawl(self._client, crawl_id).id
        except CrawlRecordError as exc:
            self._client.close()
            raise SourceError(str(exc)) from exc
        except Exception as exc:
            self._client.close()
            raise SourceError(f"cannot read the crawls in {self._shown_url}: {exc}") from exc
        self._lock = threading.Lock()  # one redis-py client, used from worker threads
        self.log_ring = LogRing()
        self._log_after = "0"  # the last log stream entry read
        self._fetches_after = "0"  # … and fetch stream entry
        self._bytes_rate = _Rate()
        #: where workers started from the dashboard write (the last start's -o), else the
        #: default of `gossamer workers`
        self.workers_out = Path("gossamer-worker")
        #: the live graph's consumer (`gossamer graph follow`) the dashboard started last
        self.graph_follower: subprocess.Popen[bytes] | None = None

    def read_log(self) -> None:
        """The workers' new diagnostics from the crawl's log stream (cluster/logstream.py)
        and their new fetch samples from its fetch stream (cluster/fetchstream.py), into the
        log ring in time order: one XRANGE of at most a ring-full of diagnostics, one
        XREVRANGE of the newest FETCH_ENTRIES_READ entries (a worker sends 2 a second, so a
        read every 0.5 s misses none up to 200 workers)."""
        from ..cluster.fetchstream import read_fetch_stream
        from ..cluster.logstream import read_log_stream

        if self._crawl_id is None:  # no crawl yet (the dashboard may start one)
            return
        with self._lock:
            lines, self._log_after = read_log_stream(
                self._client, self._crawl_id, self._log_after, self.log_ring.size
            )
            batches, self._fetches_after = read_fetch_stream(
                self._client, self._crawl_id, self._fetches_after, FETCH_ENTRIES_READ
            )
        timed: list[tuple[float, RingEntry]] = []
        for line in lines:
            try:
                rec = json.loads(line)
            except ValueError:
                continue
            if isinstance(rec, dict):
                d = diagnostic_record(rec)
                timed.append((d["time"] or 0.0, record_entry(d)))
        for batch in batches:
            timed.extend(_fetch_entries(batch))
        # the workers send a tick's sample at its end: a diagnostic logged meanwhile comes
        # first in Redis, but goes after the fetches before it in the tail
        timed.sort(key=lambda t: t[0])
        self.log_ring.extend([e for _, e in timed])

    @property
    def crawl_id(self) -> str | None:
        return self._crawl_id

    def redis_url(self) -> str:
        """The Redis URL with its password, for the commands the dashboard runs (never sent
        to the page)."""
        return self._url

    def scale(self, target: int) -> str:
        """`target` workers on this machine, as `gossamer workers --scale N` (the same
        function), or across the crawl's machines when it has a machine list (as `gossamer
        workers --scale N` for such a crawl: `scale_machines`, reached with the dashboard's
        $GOSSAMER_SSH and $GOSSAMER_REMOTE_COMMAND); what was done (SourceError: the crawl
        does not run, or no machine can take the workers)."""
        from ..cluster.control import scale_message, scale_workers
        from ..cluster.crawls import CrawlRecordError, load_crawl

        with self._lock:
            if self._crawl_id is None:
                raise SourceError(f"no crawl in {self._shown_url} yet: start one")
            try:
                record = load_crawl(self._client, self._crawl_id)
            except CrawlRecordError as exc:
                raise SourceError(str(exc)) from exc
            if record.state != "running":
                raise SourceError(f"crawl {record.id} is {record.state}")
            if record.machines:
                return self._scale_machines(record, target)
            result = scale_workers(self._client, self._url, record, target, self.workers_out)
            return scale_message(record, target, result)

    def _scale_machines(self, record: Any, target: int) -> str:
        from ..cluster.control import Machines, scale_machines
        from ..runner.machines import DEFAULT_REMOTE, DEFAULT_SSH, REMOTE_ENV, SSH_ENV

        reach = Machines(
            (),
            ssh=os.environ.get(SSH_ENV) or DEFAULT_SSH,
            remote=os.environ.get(REMOTE_ENV) or DEFAULT_REMOTE,
        )
        try:
            machines = reach.for_crawl(record)
            assert machines is not None  # (record.machines is not empty)
            done, problems = scale_machines(
                self._client, self._url, record, target, machines, str(self.workers_out)
            )
        except ValueError as exc:
            raise SourceError(str(exc)) from exc
        if not done:
            raise SourceError(
                f"crawl {record.id}: no machine of its list can take workers: "
                + "; ".join(problems)
            )
        return f"crawl {record.id}: " + " · ".join([*done, *problems])

    def crawl_record(self, crawl_id: str) -> Any:
        """The registry's record of crawl `crawl_id` (CrawlRecordError: none)."""
        from ..cluster.crawls import load_crawl

        with self._lock:
            return load_crawl(self._client, crawl_id)

    def follow(self, crawl_id: str) -> None:
        """Show crawl `crawl_id` from now on (one the dashboard started)."""
        with self._lock:
            if crawl_id != self._crawl_id:
                self._log_after = self._fetches_after = "0"  # its streams from their start
            self._crawl_id = crawl_id

    def _not_started(self) -> dict[str, Any]:
        from ..cluster.crawls import list_crawls

        crawls = list_crawls(self._client)
        if crawls:  # created since (from a command line): follow it if it is the only one
            running = [c for c in crawls if c.state in ("running", "stopping")]
            if len(crawls) == 1 or len(running) == 1:
                self._crawl_id = (crawls[0] if len(crawls) == 1 else running[0]).id
                return {}
        return {
            "source": {"kind": self.kind, "redis": self._shown_url},
            "crawl": {"id": None, "state": "not started", "end_reason": None, "pid": None,
                      "started": None, "elapsed_s": 0.0, "runs": None, "max_pages": None,
                      "seeds": [], "partition": None, "problem": None},
            "totals": {"pages": 0, "pages_per_s": 0.0, "requests": 0, "bytes": None,
                       "errors": 0, "statuses": None, "outcomes": None, "workers": 0,
                       "bytes_per_s": 0.0},
            "frontier": None,
            "frontier_error": None,
            "workers": [],
            "graph": None,
            "graph_state": None,
            "graph_error": None,
            "top_hosts": None,
            "time": time.time(),
            "control": {"workers": None, "can_start": True, "can_resume": False,
                        "can_stop": False, "can_scale": False,
                        "max_workers": MAX_POOL_WORKERS},
        }

    def snapshot(self) -> dict[str, Any]:
        from ..cluster.control import crawl_status
        from ..cluster.crawls import load_crawl, settle_stopped

        with self._lock:
            if self._crawl_id is None and (empty := self._not_started()):
                return empty
            assert self._crawl_id is not None
            record = load_crawl(self._client, self._crawl_id)
            if record.state == "stopping" and settle_stopped(self._client, record):
                record = load_crawl(self._client, record.id)  # its workers are gone
            data = crawl_status(self._client, record)
            live_hosts = [
                h for w in data["workers"] if w["state"] not in ("dead", "stopped")
                for h in w["hosts"]
            ]  # fmt: skip
            top_hosts = cluster_top_hosts(
                self._client, record.id, live_hosts, float(data["server_time"]),
                options=crawl_options(record.settings),
            )  # fmt: skip
        c, tot, fr = data["crawl"], data["totals"], data["frontier"]
        # the workers' heartbeats carry bytes and their most common statuses and outcomes
        # (cluster/members.py WorkerStatus): summed here
        statuses: Counter[str] = Counter()
        outcomes: Counter[str] = Counter()
        for w in data["workers"]:
            statuses.update(w.get("statuses") or {})
            outcomes.update(w.get("outcomes") or {})
        total_bytes = sum(int(w.get("body_bytes") or 0) for w in data["workers"])
        running = c["state"] in ("running", "stopping")
        bytes_rate = self._bytes_rate.add(time.time(), total_bytes) if running else 0.0
        workers = [
            {
                "id": w["id"],
                "machine": w["machine"],
                "pid": w["pid"],
                "state": w["state"],
                "pages": w["pages"],
                "pages_per_s": w["pages_per_s"],
                "errors": w["errors"],
                "requests": w["requests"],
                "hosts": w["hosts"],
                "last_heartbeat": w["last_beat"] or None,
                "beat_age_s": w["beat_age_s"],
                # what the worker costs its machine (its heartbeat's: docs/cluster.md,
                # "Machines watched"); a dead or stopped worker's are its last
                "cpu_percent": w.get("cpu_percent"),
                "rss_bytes": w.get("rss_bytes"),
                "disk_free_bytes": w.get("disk_free_bytes"),
                "bytes_in_per_s": w.get("bytes_in_per_s"),
                "bytes_out_per_s": w.get("bytes_out_per_s"),
                "disk_low": bool(w.get("disk_low")),
            }
            for w in data["workers"]
        ]
        return {
            "source": {"kind": self.kind, "redis": self._shown_url},
            "machines": data.get("machines") or [],
            "crawl": {
                "id": c["id"],
                "state": c["state"],
                "end_reason": None,
                "pid": None,
                "started": c["created"],
                "elapsed_s": tot["elapsed_s"],
                "runs": None,
                "max_pages": c["max_pages"],
                "seeds": c["seeds"],
                "partition": c["partition"].get("name"),
                "problem": None,
            },
            "totals": {
                "pages": tot["pages"],
                "pages_per_s": tot["pages_per_s"],
                "requests": sum(w["requests"] for w in workers),
                "bytes": total_bytes,
                "errors": sum(w["errors"] for w in workers),
                "statuses": dict(sorted(statuses.items(), key=lambda kv: kv[0].zfill(3))),
                "outcomes": dict(outcomes.most_common()),
                "workers": tot["workers"],
                "bytes_per_s": bytes_rate,
            },
            "frontier": fr,
            "frontier_error": data["frontier_error"],
            "workers": workers,
            "top_hosts": top_hosts,
            "graph": data["graph"],
            "graph_state": "live" if data["graph"] is not None else None,
            "graph_error": None,
            "time": data["server_time"],
            "control": {
                # the slider's value: the workers it scales (with a machine list, the
                # workers of every machine; else this machine's)
                "workers": sum(1 for w in workers if (record.machines
                               or w["machine"] == socket.gethostname())
                               and w["state"] not in ("dead", "stopped", "stopping")),
                "can_start": c["state"] in ("stopped", "finished"),
                # stopped with URLs to crawl: queued, or leased by workers that died (the
                # resume queues them again); a running crawl goes on as workers join it
                "can_resume": c["state"] == "stopped" and fr is not None
                and fr["queued"] + fr["leased"] > 0,
                "can_stop": c["state"] == "running",
                "can_scale": c["state"] == "running",
                "max_workers": MAX_POOL_WORKERS,
            },
        }

    def stop(self) -> str:
        """As `gossamer stop`: the crawl is set stopping; every worker finishes its batches
        and leaves."""
        from ..cluster.crawls import load_crawl, request_stop

        with self._lock:
            if self._crawl_id is None:
                raise SourceError(f"no crawl in {self._shown_url} yet")
            record = load_crawl(self._client, self._crawl_id)
            if record.state in ("stopped", "finished"):
                raise SourceError(f"crawl {record.id} is {record.state} already")
            state = record.state
            if state == "running":
                state = request_stop(self._client, record)
            return f"crawl {record.id}: {state}"

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self._client.close()
