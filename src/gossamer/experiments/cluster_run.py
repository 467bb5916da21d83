"""Real cluster crawls for the crawl experiments (`grid`, `parallel`, `phases`).

`run_cluster_crawl(spec)` starts a redis-server, serves the simulated web from its own process
with its request log, creates the crawl with the given partition strategy, runs `spec.workers`
real `gossamer worker` processes (optionally SIGKILLing one once the crawl is a given fraction
done), waits for them within `spec.timeout`, and returns every worker's fetches, the web's
request log with the worker behind each connection, the truth and its audit, and the crawl's
final status. Every process and server is stopped on the way out, errors and timeouts
included; all traffic stays on 127.0.0.0/8 (docs/experiments.md, "The crawls")."""

from __future__ import annotations

import contextlib
import datetime
import json
import math
import shutil
import signal
import subprocess
import tempfile
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, Literal

from ..config import CLUSTER_DEFAULTS
from ..crawldir import ClusterDir
from ..runner.spawn import gossamer_command, start
from ..testweb import (
    AuditReport,
    LogRecord,
    Truth,
    TruthRules,
    WebSpec,
    audit,
    canonical_url,
    compute_truth,
    model_for,
    read_logs,
    serve_subprocess,
)
from ..testweb._truth import request_url
from ..urls import URLError, host_key

UA = "gossamer-experiment/0.1"
POLL_S = 0.2


class ClusterRunError(RuntimeError):
    """A crawl that did not end as it must (a worker failed, a timeout); the message has the
    tails of the workers' logs."""


@dataclass(frozen=True, slots=True)
class KillPlan:
    """SIGKILL worker number `worker` (0-based, in start order) once the frontier counts
    `after_done` of the truth's pages done."""

    worker: int = 0
    after_done: float = 0.4


@dataclass(frozen=True, slots=True)
class ClusterCrawlSpec:
    """One cluster crawl: the web, the workers and the crawl's settings.

    `seeds` default to the home page of host 0. `weights` are the `sized` strategy's (shard,
    size) pairs. `capacities` (one per worker, default 1) go to `gossamer worker --capacity`.
    `lease_order` is the crawl's setting: "largest-first" (the default) or "ready"."""

    web: WebSpec
    workers: int = 3
    partition: str = CLUSTER_DEFAULTS.partition
    epsilon: float | None = None
    period: float | None = None
    phases: int | None = None
    weights: tuple[tuple[int, float], ...] | None = None
    capacities: tuple[float, ...] = ()
    seeds: tuple[str, ...] = ()
    concurrency: int = 16
    per_host: int = 20
    per_ip: int = 1
    delay: float = 0.0
    lease_ttl: float = 8.0
    heartbeat_ttl: float = CLUSTER_DEFAULTS.heartbeat_ttl
    lease_order: str = "largest-first"
    kill: KillPlan | None = None
    timeout: float = 300.0

    def describe(self) -> dict[str, Any]:
        """JSON-able: everything that regenerates the crawl (weights summarised)."""
        return {
            "web": self.web.to_dict(),
            "workers": self.workers,
            "partition": self.partition,
            "epsilon": self.epsilon,
            "period": self.period,
            "phases": self.phases,
            "weights": None if self.weights is None else [list(w) for w in self.weights],
            "capacities": list(self.capacities),
            "seeds": len(self.seeds) or 1,
            "concurrency": self.concurrency,
            "per_host": self.per_host,
            "per_ip": self.per_ip,
            "delay": self.delay,
            "lease_ttl": self.lease_ttl,
            "heartbeat_ttl": self.heartbeat_ttl,
            "lease_order": self.lease_order,
            "kill": None
            if self.kill is None
            else {"worker": self.kill.worker, "after_done": self.kill.after_done},
            "warc": False,
            "user_agent": UA,
        }


@dataclass(frozen=True, slots=True)
class Fetch:
    """One request of one worker, from its crawl log."""

    worker: str
    start: float  # time.time() when the request began
    duration: float  # seconds it took (the crawl log's `duration`)
    url: str  # canonical
    host: str  # `gossamer.urls.host_key(url)`, as partitions and site sizes key a site
    outcome: str
    status: int | None
    parent: str | None  # canonical URL of the page it was found on (None: seed, robots.txt)

    @property
    def is_page(self) -> bool:
        """A page fetch (not robots.txt), answered with a page (outcome ok)."""
        return self.outcome.startswith("ok") and not self.url.endswith("/robots.txt")


@dataclass(frozen=True, slots=True)
class WorkerRun:
    """One `gossamer worker` process of the crawl."""

    id: str  # w1, w2, … (registered id; "" when it never registered)
    pid: int
    capacity: float
    exit_code: int | None
    killed: bool


@dataclass(slots=True)
class ClusterCrawl:
    """What a cluster crawl did (see the module docstring)."""

    spec: ClusterCrawlSpec
    crawl_id: str
    workers: tuple[WorkerRun, ...]
    fetches: tuple[Fetch, ...]
    records: tuple[LogRecord, ...]
    truth: Truth
    report: AuditReport
    status: dict[str, Any]
    started: float  # time.time() when the first worker started
    ended: float  # … when the last one exited
    killed_at: float | None = None
    owner: dict[str, str] = field(default_factory=dict)  # web connection -> worker id

    @property
    def wall(self) -> float:
        return self.ended - self.started

    @property
    def worker_ids(self) -> list[str]:
        return [w.id for w in self.workers if w.id]

    @property
    def fetch_span(self) -> float:
        """Seconds from the first request's start to the last request's end (0 without any)."""
        if not self.fetches:
            return 0.0
        return max(f.start + f.duration for f in self.fetches) - min(f.start for f in self.fetches)

    def pages_by_worker(self) -> dict[str, set[str]]:
        """The page URLs each worker fetched (ok outcomes of its crawl log, canonical)."""
        return self._page_fetches_by_worker(lambda f: f.url)

    def hosts_by_worker(self) -> dict[str, set[str]]:
        """The web hosts each worker fetched pages from (ok outcomes of its crawl log)."""
        return self._page_fetches_by_worker(lambda f: f.host)

    def _page_fetches_by_worker(self, key: Callable[[Fetch], str]) -> dict[str, set[str]]:
        out: dict[str, set[str]] = {w: set() for w in self.worker_ids}
        for f in self.fetches:
            if f.is_page:
                out.setdefault(f.worker, set()).add(key(f))
        return out

    def web_pages_by_worker(self) -> dict[str, Counter[str]]:
        """The page URLs the web served (the audit's counted fetches: GET, complete, not
        429/503, not robots.txt), per worker behind the connection ("?" when the
        connection could not be matched: a killed worker's unlogged requests)."""
        out: dict[str, Counter[str]] = defaultdict(Counter)
        for r in self.records:
            if r.method != "GET" or r.outcome != "ok" or r.status in (0, 429, 503):
                continue
            url = request_url(r.host, r.target)
            if url is None or url.endswith("/robots.txt"):
                continue
            out[self.owner.get(r.conn, "?")][url] += 1
        return dict(out)


# ---------------------------------------------------------------------------- reading


def _epoch(iso: str) -> float:
    return datetime.datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp()


def _host_key(url: str) -> str:
    """`gossamer.urls.host_key` (the key partitions and site sizes use), "" for no URL."""
    try:
        return host_key(url)
    except URLError:
        return ""


def read_fetches(out: Path, *, strict: bool = False) -> list[Fetch]:
    """Every request of every worker under `out` (DIR/<worker id>/crawl.log.jsonl), by start.
    A line that does not parse (torn by a kill) is skipped, or with `strict` raises ValueError."""
    from ..sinks.crawllog import read_crawl_log

    fetches = []
    for worker in ClusterDir(out).workers():
        path, wid = worker.crawl_log, worker.path.name
        if not path.is_file():
            continue
        for r in read_crawl_log(path, strict=strict):
            url = canonical_url(r["url"]) or r["url"]
            parent = r.get("parent")
            fetches.append(
                Fetch(
                    worker=wid,
                    start=_epoch(r["time"]),
                    duration=float(r.get("duration") or 0.0),
                    url=url,
                    host=_host_key(url),
                    outcome=str(r.get("outcome", "")),
                    status=r.get("status"),
                    parent=(canonical_url(parent) or parent) if parent else None,
                )
            )
    fetches.sort(key=lambda f: f.start)
    return fetches


def connection_owners(
    records: Sequence[LogRecord], fetches: Sequence[Fetch], *, within: float = 0.5
) -> dict[str, str]:
    """The worker behind each connection of the web's request log: the worker most of its
    requests point to (`connection_votes`; a connection belongs to one worker process). A
    killed worker's last requests are in no crawl log: a connection with only those stays
    unmatched, it is not given to the worker that fetched the same URLs again later."""
    votes = connection_votes(records, fetches, within=within)
    return {conn: v.most_common(1)[0][0] for conn, v in votes.items()}


def connection_votes(
    records: Sequence[LogRecord], fetches: Sequence[Fetch], *, within: float = 0.5
) -> dict[str, Counter[str]]:
    """Per connection of the web's request log, how many of its requests point to each
    worker. The web logs no client port, so a connection is matched by its requests: each
    is looked up in the workers' crawl logs (same canonical URL, the nearest start time, at
    most `within` seconds apart: client and server share this machine's clock; math.inf:
    the nearest, however far). Connections none of whose requests matched are left out."""
    by_url: dict[str, list[Fetch]] = defaultdict(list)
    for f in fetches:
        by_url[f.url].append(f)
    votes: dict[str, Counter[str]] = defaultdict(Counter)
    for r in records:
        url = request_url(r.host, r.target) if r.host else None
        cands = by_url.get(url or "")
        if cands:
            best = min(cands, key=lambda f: abs(f.start - r.start))
            if abs(best.start - r.start) <= within:
                votes[r.conn][best.worker] += 1
    return dict(votes)


@lru_cache(maxsize=4)
def truth_for(web: WebSpec, seeds: tuple[str, ...]) -> Truth:
    """The ground truth of a crawl of `web` from `seeds` under the harness's rules (cached:
    the grid experiment crawls one web six times)."""
    return compute_truth(model_for(web), rules_for(seeds))


def rules_for(seeds: tuple[str, ...]) -> TruthRules:
    return TruthRules(seeds=seeds, scope="all", user_agent=UA)


# ---------------------------------------------------------------------------- running


def _die_with_parent() -> Any:
    """A preexec_fn: SIGKILL the worker when the thread that started it dies (Linux), so a
    killed experiment leaves no worker retrying a dead Redis forever."""
    from ..testweb.redisd import _die_with_parent_fn

    return _die_with_parent_fn()


def _start_worker(
    url: str, crawl_id: str, out: Path, capacity: float, log: Path
) -> subprocess.Popen[bytes]:
    """A `gossamer worker` of the crawl, its Redis URL in its environment (never on its
    command line: runner/spawn.py), its output in `log`; it dies with the thread that
    started it."""
    command = gossamer_command(
        "worker", "--crawl", crawl_id, "-o", str(out), "-q", "--capacity", repr(capacity),
        redis=url,
    )  # fmt: skip
    return start(command, log=log, preexec_fn=_die_with_parent())


def _tails(out: Path, limit: int = 1500) -> str:
    parts = [
        f"--- {p.name}\n{p.read_text(errors='replace')[-limit:]}"
        for p in sorted(out.glob("worker-*.log"))
    ]
    return "\n".join(parts) or "(no worker logs)"


@contextlib.contextmanager
def _workdir(keep: Path | None) -> Iterator[Path]:
    if keep is not None:
        shutil.rmtree(keep, ignore_errors=True)
        keep.mkdir(parents=True)
        yield keep
        return
    d = Path(tempfile.mkdtemp(prefix="gossamer-exp-"))
    try:
        yield d
    finally:
        shutil.rmtree(d, ignore_errors=True)


def run_cluster_crawl(spec: ClusterCrawlSpec, *, keep: Path | None = None) -> ClusterCrawl:
    """Run the crawl `spec` describes and return what happened (module docstring). Work files
    go to a temporary directory (removed) or to `keep` (emptied first, kept). Raises
    ClusterRunError when a worker exits with an error (the killed one aside) or the crawl
    does not end within `spec.timeout` seconds."""
    import redis

    from ..cluster.control import crawl_status
    from ..cluster.crawls import create_crawl, load_crawl
    from ..config import load_settings
    from ..testweb.redisd import RedisServer

    if spec.capacities and len(spec.capacities) != spec.workers:
        raise ValueError("give one capacity per worker (or none)")
    model = model_for(spec.web)
    seeds = spec.seeds or (model.page_url(0, 0),)
    truth = truth_for(spec.web, seeds)
    with _workdir(keep) as work:
        out = work / "out"
        out.mkdir()
        log = work / "web.log"
        procs: list[subprocess.Popen[bytes]] = []
        server = RedisServer(work / "redis", aof=False)
        try:
            with serve_subprocess(spec.web, log_path=log) as web:
                resolve = web.write_resolve_file(work / "resolve.txt")
                settings = load_settings(
                    {
                        "seeds": list(seeds),
                        "output": out,
                        "scope": "all",
                        "resolve_file": resolve,
                        "allow_private": True,
                        "delay": spec.delay,
                        "user_agent": UA,
                        "concurrency": spec.concurrency,
                        "per_host": spec.per_host,
                        "per_ip": spec.per_ip,
                        "lease_ttl": spec.lease_ttl,
                        "lease_order": spec.lease_order,
                        "warc": False,
                        "connect_timeout": 5.0,
                        "first_byte_timeout": 10.0,
                        "total_timeout": 20.0,
                        "partition": spec.partition,
                        "epsilon": spec.epsilon,
                        "phase_period": spec.period,
                        "phases": spec.phases,
                        "heartbeat_ttl": spec.heartbeat_ttl,
                    }
                )
                client = redis.Redis.from_url(server.url)
                try:
                    crawl_id = create_crawl(client, list(seeds), settings, weights=spec.weights)
                    started = time.time()
                    capacities = spec.capacities or (1.0,) * spec.workers
                    for k, cap in enumerate(capacities):
                        log_path = out / f"worker-{k}.log"
                        procs.append(_start_worker(server.url, crawl_id, out, cap, log_path))
                    killed_at = _wait(spec, procs, client, crawl_id, len(truth.required), out)
                    ended = time.time()
                    record = load_crawl(client, crawl_id)
                    status = crawl_status(client, record)
                finally:
                    client.close()
                web.flush_log()
        finally:
            for p in procs:
                if p.poll() is None:
                    p.kill()
                    p.wait()
            server.stop()
        codes = [p.returncode for p in procs]
        victim = spec.kill.worker if spec.kill is not None else None
        bad = [c for k, c in enumerate(codes) if k != victim and c != 0]
        if bad:
            raise ClusterRunError(f"workers exited with {codes}:\n{_tails(out)}")
        fetches = read_fetches(out)
        logset = read_logs([log])
        records = tuple(r for r in logset.records if r.host)
        report = audit(
            model,
            logset.records,
            rules_for(seeds),
            truth=truth,
            min_delay=spec.delay,
            per_ip_limit=spec.per_ip,
            user_agent=UA,
            log_malformed=logset.malformed,
        )
        workers = _worker_runs(out, procs, capacities, victim)
    return ClusterCrawl(
        spec=spec,
        crawl_id=crawl_id,
        workers=workers,
        fetches=tuple(fetches),
        records=records,
        truth=truth,
        report=report,
        status=status,
        started=started,
        ended=ended,
        killed_at=killed_at,
        owner=connection_owners(records, fetches),
    )


def _wait(
    spec: ClusterCrawlSpec,
    procs: list[subprocess.Popen[bytes]],
    client: Any,
    crawl_id: str,
    required: int,
    out: Path,
) -> float | None:
    """Until every worker exited (SIGKILLing the victim on the way); the kill time or None."""
    deadline = time.monotonic() + spec.timeout
    kill = spec.kill
    killed_at: float | None = None
    while any(p.poll() is None for p in procs):
        if time.monotonic() > deadline:
            raise ClusterRunError(
                f"the crawl did not end within {spec.timeout:g} s:\n{_tails(out)}"
            )
        if kill is not None and killed_at is None:
            done = _pages_done(client, crawl_id, spec.heartbeat_ttl)
            if done >= kill.after_done * required:
                victim = procs[kill.worker]
                if victim.poll() is not None:
                    raise ClusterRunError(f"worker {kill.worker} ended before the kill")
                victim.send_signal(signal.SIGKILL)
                killed_at = time.time()
        time.sleep(POLL_S)
    return killed_at


def _pages_done(client: Any, crawl_id: str, heartbeat_ttl: float) -> int:
    """Pages of every worker together, from their last heartbeats (cheap: no frontier scan)."""
    from ..cluster.members import Membership

    return sum(w.pages for w in Membership(client, crawl_id, ttl=heartbeat_ttl).statuses())


def _worker_runs(
    out: Path,
    procs: Sequence[subprocess.Popen[bytes]],
    capacities: Sequence[float],
    victim: int | None,
) -> tuple[WorkerRun, ...]:
    """The workers, their registered ids matched by pid (DIR/<id>/worker.json)."""
    ids: dict[int, str] = {}
    for worker in ClusterDir(out).workers():
        with contextlib.suppress(ValueError, OSError, KeyError):
            ids[int(json.loads(worker.worker_record.read_text())["pid"])] = worker.path.name
    return tuple(
        WorkerRun(
            id=ids.get(p.pid, ""),
            pid=p.pid,
            capacity=cap,
            exit_code=p.returncode,
            killed=k == victim,
        )
        for k, (p, cap) in enumerate(zip(procs, capacities, strict=True))
    )


# ---------------------------------------------------------------------------- helpers


def busy_time(intervals: Sequence[tuple[float, float]]) -> float:
    """Length of the union of (start, end) intervals."""
    total, end = 0.0, -math.inf
    for s, e in sorted(intervals):
        if s > end:
            total += e - s
            end = e
        elif e > end:
            total += e - end
            end = e
    return total


def phase_windows(
    records: Sequence[LogRecord],
    owner: Mapping[str, str],
    period: float,
    since: float = -math.inf,
    *,
    by: Literal["host", "ip"] = "host",
) -> dict[tuple[int, str], set[str]]:
    """(window k, web host — or its IP, `by`) -> the workers (`owner` of the connection)
    whose requests to it started (server time) in [k·T, (k+1)·T), for windows starting at
    or after `since`."""
    first = math.ceil(since / period) if math.isfinite(since) else -math.inf
    seen: dict[tuple[int, str], set[str]] = defaultdict(set)
    for r in records:
        k = math.floor(r.start / period)
        if k >= first and r.conn in owner:
            seen[(k, r.host if by == "host" else r.ip)].add(owner[r.conn])
    return seen


__all__ = [
    "UA",
    "ClusterCrawl",
    "ClusterCrawlSpec",
    "ClusterRunError",
    "Fetch",
    "KillPlan",
    "WorkerRun",
    "busy_time",
    "connection_owners",
    "connection_votes",
    "phase_windows",
    "read_fetches",
    "rules_for",
    "run_cluster_crawl",
    "truth_for",
]
