"""Redis frontier throughput and footprint: discover, duplicates, lease+complete, seen-set bytes.

    .venv/bin/python bench/bench_redis_frontier.py                      # RedisFrontier, 1M URLs
    .venv/bin/python bench/bench_redis_frontier.py --urls 100000        # a quick run
    .venv/bin/python bench/bench_redis_frontier.py --backend redis,sqlite --workers 1,2
    .venv/bin/python bench/bench_redis_frontier.py --backend cluster    # 3-master Redis Cluster

Backends: `redis` (RedisFrontier on one redis-server), `cluster` (RedisFrontier on a 3-master
Redis Cluster), `sqlite` (SqliteFrontier, the embedded backend, for comparison). Each scenario
gets a fresh store in a temporary directory on disk (--dir): a redis-server (or cluster)
started by the benchmark with AOF on (`appendfsync everysec`, as a user would run it) on a free
loopback port, always stopped at the end; or a new SQLite file.

The URLs: --urls over --hosts hosts with heavy-tailed sizes (Pareto, alpha 1.2, the largest
host ~200 times the smallest). put_discovered calls look like a page's links: 24 links of one
host plus 6 of other hosts (calls of 30), or those calls' links buffered into calls of 1000.

Scenarios (each on a fresh store):
1. discover, calls of 30; duplicates (--dup-fraction of the same calls again: all already
   seen); lease+complete with `lease(max_hosts=64, per_host=20)` + `complete(token, all DONE)`
   until the frontier is empty (`default_delay=0`); bytes per seen URL (`seen="exact"`).
2. discover, calls of 1000; lease+complete with `renew=20` (complete hands the host back).
3. for each K > 1 in --workers, twice (a fresh store each): K processes discover concurrently
   (calls of 1000, process k making calls k, k + K, ...; the records built before the clock
   starts), then K processes lease+complete concurrently, with renew 0, then renew 20 (the
   crawler's way: a host's next batch comes with the completion of its last); the total
   URLs/s of each, wall time from the first process's start to the last one's finish (the way
   a cluster's workers share one frontier).
4. discover in sitemap-shaped calls: each call up to 1000 URLs of one host (a sitemap or a
   seed list; the per-URL cost without the per-host and per-shard costs of link-shaped calls).
5. `seen="bloom"` (when RedisFrontier accepts it): scenario 2 again, for its bytes per URL.

Figures: URLs/s (only time inside frontier calls for discover; the whole lease+complete loop,
building the outcomes included), the client's CPU seconds in those calls, the servers' CPU
seconds (redis-server processes, from /proc), Redis `used_memory` per URL with every URL
queued, per seen URL once all are done (only the seen-set is left: (used_memory after -
used_memory of the empty frontier) / URLs), and `used_memory_peak`. For sqlite the bytes are
the file's (database + WAL) on disk. Goals (issue 4): discover >= 100k URLs/s, lease+complete
>= 50k URLs/s, <= 10 bytes per seen URL (exact). Figures are printed, never asserted.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import multiprocessing
import os
import random
import resource
import shutil
import sys
import tempfile
import time
from array import array
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gossamer.frontier import Discovered, Frontier, HostBatch, Outcome, SqliteFrontier, Verdict
from gossamer.testweb.redisd import RedisClusterServers, RedisServer
from gossamer.urls import fingerprint

CLK_TCK = os.sysconf("SC_CLK_TCK")
MAX_HOSTS, PER_HOST = 64, 20
LOCAL_LINKS, EXTERNAL_LINKS = 24, 6  # a call of 30: one page's links
HOST_BITS = 32


# ---------------------------------------------------------------------------- the URLs


def host_sizes(n_urls: int, n_hosts: int, seed: int) -> list[int]:
    """Heavy-tailed site sizes summing to `n_urls`, each >= 1 (Pareto alpha 1.2, weights
    capped at 200 times the smallest)."""
    n_hosts = max(1, min(n_hosts, n_urls))
    rng = random.Random(seed)
    weights = [min(rng.paretovariate(1.2), 200.0) for _ in range(n_hosts)]
    spare = n_urls - n_hosts  # every host has one URL; the rest by weight
    total = sum(weights)
    sizes = [1 + int(spare * w / total) for w in weights]
    order = sorted(range(n_hosts), key=lambda h: -weights[h])
    for i in range(n_urls - sum(sizes)):  # rounding leftovers to the heaviest hosts
        sizes[order[i % n_hosts]] += 1
    return sizes


def plan_calls(sizes: Sequence[int], seed: int) -> list[array[int]]:
    """put_discovered calls of ~30 links, each URL exactly once: 24 of one host (its next
    URLs) plus 6 taken from other hosts; URLs encoded as host << 32 | k."""
    rng = random.Random(seed)
    local: list[array[int]] = []
    external = array("Q")
    for h, size in enumerate(sizes):
        n_local = max(1, (size * 4 + 4) // 5)  # ~80 % of a host's URLs are found on itself
        codes = [h << HOST_BITS | k for k in range(size)]
        local.extend(
            array("Q", codes[i : min(i + LOCAL_LINKS, n_local)])
            for i in range(0, n_local, LOCAL_LINKS)
        )
        external.extend(codes[n_local:])
    rng.shuffle(local)
    ext = list(external)
    rng.shuffle(ext)
    calls: list[array[int]] = []
    e = 0
    for chunk in local:
        take = ext[e : e + EXTERNAL_LINKS]
        e += len(take)
        chunk.extend(take)
        calls.append(chunk)
    calls.extend(array("Q", ext[i : i + 30]) for i in range(e, len(ext), 30))
    return calls


def rechunk(calls: Sequence[array[int]], size: int) -> list[array[int]]:
    """The same links in calls of `size` (a worker buffering the links of many pages)."""
    flat = array("Q")
    for c in calls:
        flat.extend(c)
    return [flat[i : i + size] for i in range(0, len(flat), size)]


def plan_sitemaps(sizes: Sequence[int]) -> list[array[int]]:
    """Calls of up to 1000 URLs of one host each (a sitemap, a seed list), hosts shuffled."""
    calls = [
        array("Q", (h << HOST_BITS | k for k in range(i, min(i + 1000, size))))
        for h, size in enumerate(sizes)
        for i in range(0, size, 1000)
    ]
    random.Random(len(sizes)).shuffle(calls)
    return calls


_HOSTS: dict[int, str] = {}


def discovered(code: int) -> Discovered:
    h, k = code >> HOST_BITS, code & (1 << HOST_BITS) - 1
    host = _HOSTS.get(h) or _HOSTS.setdefault(h, f"www.h{h}.example")
    url = f"http://{host}/section-{k % 37}/page-{k}.html"
    parent = f"http://{host}/section-{k % 37}/page-{k // 30}.html"
    return Discovered(url, host, 2, fingerprint(url), 2, parent)


# ---------------------------------------------------------------------------- stores


def redis_frontier_class() -> Any:
    """gossamer.frontier.redis.RedisFrontier, imported only when a Redis backend is asked."""
    try:
        module = importlib.import_module("gossamer.frontier.redis")
        return module.RedisFrontier
    except (ImportError, AttributeError) as exc:
        raise SystemExit(
            f"the redis and cluster backends need gossamer.frontier.redis.RedisFrontier ({exc});"
            " use --backend sqlite meanwhile"
        ) from exc


def proc_cpu(pid: int) -> float:
    """CPU seconds of `pid` and its reaped children (AOF rewrites), 0 when it is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return 0.0
    f = stat[stat.rindex(")") + 2 :].split()
    return sum(int(x) for x in f[11:15]) / CLK_TCK


def frontier_options(seen: str) -> dict[str, Any]:
    """RedisFrontier's keywords: no politeness delay; `seen` only when not the default."""
    options: dict[str, Any] = {"default_delay": 0.0}
    if seen != "exact":
        options["seen"] = seen  # a TypeError when RedisFrontier has no such option
    return options


def key_kind(key: bytes) -> str:
    """`gs:<crawl>:{<shard>}:s:12` → `{…}:s`; keys without a hash tag: their first two
    colon-separated parts."""
    if b"}:" in key:
        return "{…}:" + key.split(b"}:", 1)[1].split(b":", 1)[0].decode(errors="replace")
    return ":".join(key.decode(errors="replace").split(":")[:2])


def key_usage(servers: Sequence[RedisServer]) -> dict[str, tuple[int, int]]:
    """Every key of the servers by kind → (keys, bytes by MEMORY USAGE, all samples)."""
    usage: dict[str, list[int]] = {}
    for server in servers:
        with server.client() as c:
            keys = list(c.scan_iter(count=1000))
            for i in range(0, len(keys), 1000):
                chunk = keys[i : i + 1000]
                pipe = c.pipeline(transaction=False)
                for k in chunk:
                    pipe.memory_usage(k, samples=0)
                for k, size in zip(chunk, pipe.execute(), strict=True):
                    entry = usage.setdefault(key_kind(k), [0, 0])
                    entry[0] += 1
                    entry[1] += int(size or 0)
    return {kind: (n, size) for kind, (n, size) in usage.items()}


class Store:
    """A fresh backend store for one scenario."""

    label = ""

    def opener(self, crawl: str, seen: str) -> Callable[[], Frontier]:
        raise NotImplementedError

    def used_memory(self) -> int | None:
        return None

    def peak_memory(self) -> int | None:
        return None

    def key_usage(self) -> dict[str, tuple[int, int]]:
        """Redis keys by kind → (keys, MEMORY USAGE bytes); empty without Redis."""
        return {}

    def disk_bytes(self) -> int | None:
        return None

    def server_cpu(self) -> float | None:
        return None  # no server

    def close(self) -> None:
        pass


class SqliteStore(Store):
    label = "SqliteFrontier (one SQLite file, WAL)"

    def __init__(self, directory: Path) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        self.path = directory / "frontier.sqlite"

    def opener(self, crawl: str, seen: str) -> Callable[[], Frontier]:
        if seen != "exact":
            raise TypeError("SqliteFrontier has only an exact seen-set")
        path = self.path
        return lambda: SqliteFrontier(path, max_host_errors=None)

    def disk_bytes(self) -> int | None:
        return sum(p.stat().st_size for p in self.path.parent.glob(self.path.name + "*"))


class RedisStore(Store):
    label = "RedisFrontier (one redis-server, AOF everysec)"

    def __init__(self, directory: Path) -> None:
        self.cls = redis_frontier_class()
        self.server = RedisServer(directory)
        self._cpu0 = proc_cpu(self.server.pid)

    def opener(self, crawl: str, seen: str) -> Callable[[], Frontier]:
        server, cls = self.server, self.cls

        def make() -> Frontier:
            f: Frontier = cls(server.client(), crawl, **frontier_options(seen))
            return f

        return make

    def used_memory(self) -> int | None:
        return self.server.info_memory()

    def peak_memory(self) -> int | None:
        with self.server.client() as c:
            return int(c.info("memory")["used_memory_peak"])

    def key_usage(self) -> dict[str, tuple[int, int]]:
        return key_usage([self.server])

    def server_cpu(self) -> float:
        return proc_cpu(self.server.pid) - self._cpu0

    def close(self) -> None:
        self.server.stop()


class ClusterStore(Store):
    label = "RedisFrontier (Redis Cluster, 3 masters, AOF everysec)"

    def __init__(self, directory: Path) -> None:
        self.cls = redis_frontier_class()
        self.cluster = RedisClusterServers(directory, masters=3)
        self._cpu0 = self._cpu()

    def _cpu(self) -> float:
        return sum(proc_cpu(n.pid) for n in self.cluster.nodes)

    def opener(self, crawl: str, seen: str) -> Callable[[], Frontier]:
        cluster, cls = self.cluster, self.cls

        def make() -> Frontier:
            f: Frontier = cls(cluster.client(), crawl, **frontier_options(seen))
            return f

        return make

    def used_memory(self) -> int | None:
        return sum(n.info_memory() for n in self.cluster.nodes)

    def peak_memory(self) -> int | None:
        total = 0
        for n in self.cluster.nodes:
            with n.client() as c:
                total += int(c.info("memory")["used_memory_peak"])
        return total  # the sum of each node's peak (an upper bound of the cluster's)

    def key_usage(self) -> dict[str, tuple[int, int]]:
        return key_usage(self.cluster.nodes)

    def server_cpu(self) -> float:
        return self._cpu() - self._cpu0

    def close(self) -> None:
        self.cluster.stop()


STORES: dict[str, Callable[[Path], Store]] = {
    "redis": RedisStore,
    "cluster": ClusterStore,
    "sqlite": SqliteStore,
}


# ---------------------------------------------------------------------------- measuring


@dataclass(slots=True)
class Row:
    step: str
    value: float | None
    unit: str
    wall_s: float | None = None
    client_cpu_s: float | None = None
    server_cpu_s: float | None = None
    note: str = ""


@dataclass(slots=True)
class Report:
    title: str
    rows: list[Row] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def since(store: Store, cpu0: float | None) -> float | None:
    """The store's server CPU seconds since `cpu0` (None without a server)."""
    now = store.server_cpu()
    return None if now is None or cpu0 is None else now - cpu0


def cpu_self() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


@dataclass(slots=True)
class Discover:
    """What one discover phase did: URLs offered and accepted, wall and client CPU seconds
    inside put_discovered, and whether it got through every call before its time limit."""

    calls: int = 0
    offered: int = 0
    added: int = 0
    wall_s: float = 0.0
    cpu_s: float = 0.0
    finished: bool = True


def built(calls: Sequence[array[int]]) -> Iterator[list[Discovered]]:
    """Each call's records, built when the next call is asked for."""
    return ([discovered(c) for c in call] for call in calls)


def discover(f: Frontier, batches: Iterable[Sequence[Discovered]], limit_s: float) -> Discover:
    """put_discovered every batch (only the calls are timed, not building the records: `batches`
    may build them lazily, see `built`), for `limit_s` s at most."""
    out = Discover()
    perf, proc = time.perf_counter, time.process_time
    deadline = perf() + limit_s
    for items in batches:
        if perf() > deadline:
            out.finished = False
            break
        t0, c0 = perf(), proc()
        out.added += f.put_discovered(items)
        out.cpu_s += proc() - c0
        out.wall_s += perf() - t0
        out.offered += len(items)
        out.calls += 1
    return out


def drain(f: Frontier, renew: int, limit_s: float) -> tuple[int, float, bool]:
    """lease + complete (all DONE) until nothing is queued or leased; (URLs done, wall s,
    finished). Another process may hold the last hosts: then wait for them."""
    done = 0
    t0 = time.perf_counter()
    deadline = t0 + limit_s
    while time.perf_counter() < deadline:
        batches = f.lease(max_hosts=MAX_HOSTS, per_host=PER_HOST)
        if not batches:
            st = f.statistics()
            if st.queued == 0 and st.leased == 0:
                return done, time.perf_counter() - t0, True
            time.sleep(0.0005)
            continue
        for first in batches:
            batch: HostBatch | None = first
            while batch is not None:
                done += len(batch.urls)
                outcomes = [Outcome(u.url, u.fp, Verdict.DONE, 200) for u in batch.urls]
                batch = f.complete(batch.token, outcomes, renew=renew)
    return done, time.perf_counter() - t0, False


def _drain_worker(
    opener: Callable[[], Frontier],
    renew: int,
    limit_s: float,
    barrier: Any,
    results: Any,
) -> None:
    f = opener()
    barrier.wait(120)
    start = time.monotonic()
    c0 = cpu_self()
    done, _, finished = drain(f, renew, limit_s)
    results.put((done, start, time.monotonic(), cpu_self() - c0, finished))
    f.close()


def _discover_worker(
    opener: Callable[[], Frontier],
    calls: Sequence[array[int]],
    limit_s: float,
    barrier: Any,
    results: Any,
) -> None:
    f = opener()
    batches = list(built(calls))  # before the clock starts
    barrier.wait(120)
    start = time.monotonic()
    c0 = cpu_self()
    d = discover(f, batches, limit_s)
    results.put((d.added, d.offered, start, time.monotonic(), cpu_self() - c0, d.finished))
    f.close()


def _forked(
    target: Callable[..., None], arglists: Sequence[tuple[Any, ...]], limit_s: float
) -> list[Any]:
    """Run `target(*args, barrier, results)` in a forked process per args, all started
    together behind a barrier; each puts one tuple into `results`. Returns the tuples."""
    ctx = multiprocessing.get_context("fork")
    barrier = ctx.Barrier(len(arglists))
    results = ctx.Queue()
    procs = [ctx.Process(target=target, args=(*args, barrier, results)) for args in arglists]
    for p in procs:
        p.start()
    got: list[Any] = []
    try:
        got.extend(results.get(timeout=limit_s + 150) for _ in procs)
    finally:
        for p in procs:
            p.join(10)
            if p.is_alive():
                p.kill()
                p.join(5)
    return got


def discover_parallel(
    opener: Callable[[], Frontier], calls: Sequence[array[int]], workers: int, limit_s: float
) -> tuple[int, int, float, float, bool]:
    """`workers` forked processes put_discovered the calls together (process k makes calls
    k, k + workers, ...); (URLs accepted, offered, wall s from the first start to the last
    finish, their CPU s, finished)."""
    arglists = [(opener, calls[k::workers], limit_s) for k in range(workers)]
    got = _forked(_discover_worker, arglists, limit_s)
    wall = max(g[3] for g in got) - min(g[2] for g in got)
    return (
        sum(g[0] for g in got),
        sum(g[1] for g in got),
        wall,
        sum(g[4] for g in got),
        all(g[5] for g in got),
    )


def drain_parallel(
    opener: Callable[[], Frontier], workers: int, renew: int, limit_s: float
) -> tuple[int, float, float, bool]:
    """`workers` forked processes drain the frontier together; (URLs done, wall s from the
    first start to the last finish, their CPU s, finished)."""
    got = _forked(_drain_worker, [(opener, renew, limit_s)] * workers, limit_s)
    done = sum(g[0] for g in got)
    wall = max(g[2] for g in got) - min(g[1] for g in got)
    return done, wall, sum(g[3] for g in got), all(g[4] for g in got)


# ---------------------------------------------------------------------------- scenarios


class Bench:
    def __init__(self, args: argparse.Namespace, workdir: Path) -> None:
        self.a = args
        self.limit: float = args.phase_limit
        self.workdir = workdir
        self.sizes = host_sizes(args.urls, args.hosts, args.seed)
        self.calls30 = plan_calls(self.sizes, args.seed)
        self.calls1000 = rechunk(self.calls30, 1000)
        self.sitemaps = plan_sitemaps(self.sizes)
        self._scenario = 0

    @contextlib.contextmanager
    def store(self, backend: str) -> Iterator[Store]:
        self._scenario += 1
        d = self.workdir / f"{backend}-{self._scenario}"
        s = STORES[backend](d)
        try:
            yield s
        finally:
            s.close()
            shutil.rmtree(d, ignore_errors=True)

    def _discover(
        self, store: Store, f: Frontier, calls: Sequence[array[int]], label: str
    ) -> tuple[Row, int, int]:
        """Discover phase → its row, the URLs the frontier accepted and the calls made."""
        s0 = store.server_cpu()
        d = discover(f, built(calls), self.limit)
        note = ""
        if not d.finished:
            note = f"stopped after {self.limit:g} s: {d.offered:,} URLs offered"
        elif d.added != d.offered:
            note = f"only {d.added:,} of {d.offered:,} accepted!"
        row = Row(label, d.added / d.wall_s, "URLs/s", d.wall_s, d.cpu_s, since(store, s0), note)
        return row, d.added, d.calls

    def _drain(
        self, store: Store, f: Frontier, renew: int, queued: int, label: str
    ) -> tuple[Row, bool]:
        """Lease+complete phase → its row and whether every queued URL is done."""
        s0, c0 = store.server_cpu(), cpu_self()
        done, wall, finished = drain(f, renew, self.limit)
        row = Row(label, done / wall, "URLs/s", wall, cpu_self() - c0, since(store, s0))
        if not finished:
            row.note = f"stopped after {self.limit:g} s: {done:,} of {queued:,} URLs done"
        elif done != queued:
            row.note = f"{done:,} URLs done of {queued:,}!"
        return row, finished and done == queued

    def _memory_rows(
        self, store: Store, base: int | None, full: int | None, urls: int, drained: bool, seen: str
    ) -> list[Row]:
        rows = []
        after = store.used_memory()
        if base is not None and full is not None:
            rows.append(Row("used_memory, every URL queued", (full - base) / urls, "B/URL"))
        if base is not None and after is not None:
            rows.append(
                Row(
                    f"frontier ({seen} seen-set): used_memory, all done",
                    (after - base) / urls if drained else None,
                    "B/URL",
                    note=f"{urls:,} URLs" if drained else "not drained: no figure",
                )
            )
        if drained:
            usage = store.key_usage()
            # the seen-set itself: its keys' MEMORY USAGE (exact: intsets `:s`, Bloom: `:b`)
            tag = "{…}:s" if seen == "exact" else "{…}:b"
            seen_keys = [v for k, v in usage.items() if k == tag]
            if seen_keys:
                size = sum(sz for _, sz in seen_keys)
                rows.append(Row(f"seen-set ({seen}): its keys", size / urls, "B/URL"))
            kinds = sorted(usage.items(), key=lambda kv: -kv[1][1])
            rows.extend(
                Row(f"  of which keys {kind} ({n:,})", size / urls, "B/URL", note="MEMORY USAGE")
                for kind, (n, size) in kinds
            )
        peak = store.peak_memory()
        if peak is not None:
            rows.append(Row("used_memory_peak", peak / 2**20, "MiB"))
        disk = store.disk_bytes()
        if disk is not None:
            rows.append(Row("file on disk (database + WAL), all done", disk / urls, "B/URL"))
        return rows

    def scenario_small_calls(self, backend: str, report: Report) -> None:
        """Discover in calls of 30, duplicates, drain without renewal, exact seen-set bytes."""
        with self.store(backend) as store:
            f = store.opener("bench-a", "exact")()
            try:
                base = store.used_memory()
                row, urls, calls = self._discover(store, f, self.calls30, "discover, calls of 30")
                report.rows.append(row)
                full = store.used_memory()
                # the first calls again (only calls made: a stopped phase did not make them all)
                k = min(calls, max(1, int(len(self.calls30) * self.a.dup_fraction)))
                s0 = store.server_cpu()
                d = discover(f, built(self.calls30[:k]), self.limit)
                note = f"{d.offered:,} URLs offered again"
                if d.added:
                    note += f"; {d.added:,} accepted!"
                report.rows.append(
                    Row(
                        "duplicates, calls of 30",
                        d.offered / d.wall_s,
                        "URLs/s",
                        d.wall_s,
                        d.cpu_s,
                        since(store, s0),
                        note,
                    )
                )
                row, drained = self._drain(store, f, 0, urls, "lease+complete, 1 process")
                report.rows.append(row)
                report.rows.extend(self._memory_rows(store, base, full, urls, drained, "exact"))
            finally:
                f.close()

    def scenario_renew(self, backend: str, report: Report, seen: str = "exact") -> None:
        """Discover in calls of 1000, then drain with renew=20."""
        with self.store(backend) as store:
            try:
                f = store.opener(f"bench-{seen}", seen)()
            except (TypeError, ValueError) as exc:
                report.notes.append(f'seen="{seen}" not measured: {exc}')
                return
            try:
                base = store.used_memory()
                tag = "" if seen == "exact" else f' (seen="{seen}")'
                label = f"discover, calls of 1000{tag}"
                row, urls, _ = self._discover(store, f, self.calls1000, label)
                report.rows.append(row)
                full = store.used_memory()
                row, drained = self._drain(
                    store, f, 20, urls, f"lease+complete, renew=20, 1 process{tag}"
                )
                report.rows.append(row)
                if seen != "exact":
                    report.rows.extend(self._memory_rows(store, base, full, urls, drained, seen))
            finally:
                f.close()

    def scenario_sitemaps(self, backend: str, report: Report) -> None:
        """Discover in calls of one host's URLs (up to 1000): the per-URL cost alone."""
        with self.store(backend) as store:
            f = store.opener("bench-sm", "exact")()
            try:
                label = "discover, sitemap calls (<= 1000 URLs of one host)"
                row, _, _ = self._discover(store, f, self.sitemaps, label)
                report.rows.append(row)
            finally:
                f.close()

    def scenario_workers(self, backend: str, report: Report, workers: int, renew: int) -> None:
        """`workers` processes discover concurrently, then drain concurrently (`renew`)."""
        with self.store(backend) as store:
            opener = store.opener("bench-w", "exact")
            opener().close()  # the crawl's state, made once (each process opens its own)
            s0 = store.server_cpu()
            urls, offered, wall, cpu, finished = discover_parallel(
                opener, self.calls1000, workers, self.limit
            )
            row = Row(
                f"discover, calls of 1000, {workers} processes",
                urls / wall,
                "URLs/s",
                wall,
                cpu,
                since(store, s0),
            )
            if not finished:
                row.note = f"stopped after {self.limit:g} s: {offered:,} URLs offered"
            elif urls != offered:
                row.note = f"only {urls:,} of {offered:,} accepted!"
            report.rows.append(row)
            s0 = store.server_cpu()
            done, wall, cpu, finished = drain_parallel(opener, workers, renew, self.limit)
            how = f"renew={renew}, " if renew else ""
            label = f"lease+complete, {how}{workers} processes"
            row = Row(label, done / wall, "URLs/s", wall, cpu, since(store, s0))
            if not finished:
                row.note = f"stopped after {self.limit:g} s: {done:,} of {urls:,} URLs done"
            elif done != urls:
                row.note = f"{done:,} URLs done of {urls:,}!"
            report.rows.append(row)


# ---------------------------------------------------------------------------- output


def fmt(x: float | None, digits: int = 1) -> str:
    if x is None:
        return "-"
    if abs(x) >= 1000:
        return f"{x:,.0f}"
    return f"{x:,.{digits}f}"


def print_report(report: Report) -> None:
    print(f"\n{report.title}")
    header = ("step", "value", "unit", "wall s", "client CPU s", "server CPU s", "note")
    table = [header] + [
        (
            r.step,
            fmt(r.value),
            r.unit,
            fmt(r.wall_s),
            fmt(r.client_cpu_s),
            fmt(r.server_cpu_s),
            r.note,
        )
        for r in report.rows
    ]
    widths = [max(len(row[i]) for row in table) for i in range(len(header))]
    for i, row in enumerate(table):
        cells = [
            c.ljust(w) if j in (0, 2, 6) else c.rjust(w)
            for j, (c, w) in enumerate(zip(row, widths, strict=True))
        ]
        print("  " + "  ".join(cells).rstrip())
        if i == 0:
            print("  " + "  ".join("-" * w for w in widths))
    for note in report.notes:
        print(f"  note: {note}")
    goals(report)


def goals(report: Report) -> None:
    """The issue's goals against the figures (printed, never asserted)."""
    parts = []
    for prefix, goal, higher in (
        ("discover", 100_000.0, True),
        ("lease+complete", 50_000.0, True),
        ("seen-set (exact)", 10.0, False),
    ):
        rows = [r for r in report.rows if r.step.startswith(prefix) and r.value is not None]
        if not rows:
            continue
        pick = max if higher else min
        best = pick(rows, key=lambda r: r.value or 0.0)
        value = best.value or 0.0
        met = value >= goal if higher else value <= goal
        sign = ">=" if higher else "<="
        also = ""
        one = [r for r in rows if "processes" not in r.step]
        if higher and one and best not in one:  # say what one process does too
            single = max(one, key=lambda r: r.value or 0.0)
            also = f"; one process: {fmt(single.value)}, {single.step}"
        parts.append(
            f"{prefix} {sign} {goal:,g} {best.unit}: {'met' if met else 'NOT met'}"
            f" (best {fmt(value)}, {best.step}{also})"
        )
    for part in parts:
        print(f"  goal: {part}")


def main() -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    ap.add_argument("--backend", default="redis", help="redis, cluster, sqlite (comma list)")
    ap.add_argument("--urls", type=int, default=1_000_000)
    ap.add_argument("--hosts", type=int, default=20_000)
    ap.add_argument(
        "--workers", default="1", help="K[,K...]: also discover and drain with K processes"
    )
    ap.add_argument("--seen", default="exact,bloom", help="seen-set kinds to measure")
    ap.add_argument("--dup-fraction", type=float, default=0.25, help="share of calls replayed")
    ap.add_argument(
        "--phase-limit", type=float, default=45.0, help="s per discover or drain, at most"
    )
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--dir", type=Path, help="work directory (default: a temp dir on disk)")
    a = ap.parse_args()
    backends = [b.strip() for b in a.backend.split(",") if b.strip()]
    unknown = [b for b in backends if b not in STORES]
    if unknown:
        ap.error(f"unknown backend(s) {unknown}: choose among {sorted(STORES)}")
    if {"redis", "cluster"} & set(backends):
        redis_frontier_class()  # fail now, not after the SQLite rows
    workers = sorted({int(k) for k in a.workers.split(",") if k.strip()})
    seens = [s.strip() for s in a.seen.split(",") if s.strip()]

    if a.dir is not None:
        a.dir.mkdir(parents=True, exist_ok=True)
    workdir = Path(tempfile.mkdtemp(prefix="bench-redis-frontier-", dir=a.dir))
    t_start = time.monotonic()
    try:
        bench = Bench(a, workdir)
        sizes = sorted(bench.sizes)
        print(
            f"{a.urls:,} URLs over {len(sizes):,} hosts (sizes {sizes[0]:,}–{sizes[-1]:,},"
            f" median {sizes[len(sizes) // 2]:,}); {len(bench.calls30):,} calls of ~30,"
            f" {len(bench.calls1000):,} of 1000; lease({MAX_HOSTS} hosts, {PER_HOST} URLs);"
            f" load average {os.getloadavg()[0]:.2f}; work dir {workdir}"
        )
        for backend in backends:
            report = Report(f"{getattr(STORES[backend], 'label', backend)} [{backend}]")
            bench.scenario_small_calls(backend, report)
            bench.scenario_renew(backend, report)
            bench.scenario_sitemaps(backend, report)
            for k in workers:
                if k > 1:
                    for renew in (0, 20):
                        bench.scenario_workers(backend, report, k, renew)
            for seen in seens:
                if seen != "exact" and backend != "sqlite":
                    bench.scenario_renew(backend, report, seen)
            print_report(report)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    print(f"\n(total {time.monotonic() - t_start:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
