"""Whole crawls of simulated webs: gossamer against two Scrapy spiders and a bare loop.

    .venv/bin/python bench/bench_crawl.py                     # every crawler, about 4 minutes
    .venv/bin/python bench/bench_crawl.py --webs default,shared-ip   # both webs, one run
    .venv/bin/python bench/bench_crawl.py --shared-ip         # every host on one IP
    .venv/bin/python bench/bench_crawl.py --only gossamer,bare --webs few-hosts,link-heavy
    .venv/bin/python bench/bench_crawl.py --only gossamer     # gossamer alone, about 1.5 min
    .venv/bin/python bench/bench_crawl.py --profile           # + a py-spy profile of gossamer
    .venv/bin/python bench/bench_crawl.py --experiments       # + what-if runs (heap, GC, WARC)
    .venv/bin/python bench/bench_crawl.py --only none --pipeline  # per-page steps, in process
    .venv/bin/python bench/bench_crawl.py --only none --cluster 1,2  # cluster mode on Redis

The web: a clean simulated web of 400 hosts / 20,788 pages (~17 KB, ~30 links a page) plus
robots.txt files (`robots_disallow=0.3`: a third of the hosts disallow /private/, so robots
rules matter), exported as static files and served by nginx on loopback (`export_web` +
`run_nginx`, one nginx worker so the crawler has the other core). The simulated web asks for no
politeness delay, so both crawlers run with delay 0; each keeps one request in flight per IP.

1. gossamer: `python -m gossamer crawl SEED --scope all --delay 0 --concurrency N --workers W`
   as a subprocess with WARC and graph on (the defaults), one connection per host (the per-host
   bucket), once with one worker process and once with gossamer's default (one worker per
   core; `--gossamer-workers`). Measured from outside over the process tree: wall time,
   pages/s, CPU (user+sys, from wait4: the crawler and the workers it reaped), peak RSS (the
   sum of each process's VmHWM, polled), and bytes per seen URL (frontier.sqlite / URLs the
   frontier holds; RSS growth from the crawl's start / URLs, one-worker run). Then
   `gossamer testweb audit --log <nginx access log> --web <export>/web.json --crawl DIR` must
   show coverage 1.000, overlap 0 and no violation, and the graph's edges must equal the truth's:
   a fast crawl that is wrong does not count.
2. Scrapy (skipped with a note when `import scrapy` fails; it is not a gossamer dependency):
   bench/scrapy_spider.py, a minimal CrawlSpider with the same seeds, scope, robots, one request
   per IP, total concurrency and no delay, stopped after --scrapy-seconds (45 s: a full crawl at
   Scrapy's 70-80 pages/s here takes ~4.5 minutes; `--scrapy-seconds 0` runs it to the end).
   Measured the same way and audited against its own nginx log (coverage is partial by design;
   politeness and "should not be fetched" must still be clean).
3. `--profile`: one more one-worker gossamer crawl under `py-spy record --threads`
   (`.venv/bin/pip install py-spy`); prints where the main thread's CPU goes, per function, as
   a share and in µs per page.
4. `--experiments`: one-worker gossamer again with one change each (no audit):
   glibc's heap trim threshold raised (MALLOC_TRIM_THRESHOLD_), the cyclic GC made rarer
   (gc.freeze + gc.set_threshold), and WARC off (what WARC writing costs).
5. `--pipeline`: the per-page steps (parse, link routing, graph, WARC, crawl log) timed in one
   process without network, next to cheaper variants (memoised routing, batched graph edges,
   the GIL-free part of WARC writing): the figures behind the suggestions in
   docs/crawler/bench.md.

6. `--cluster N[,N]`: the same crawl in cluster mode — a redis-server (AOF on) started in the
   work directory, `gossamer crawl --redis URL … --workers N` (N local `gossamer worker`
   processes, the Redis frontier and IP gate), pages summed over the workers' stats.json,
   audited the same way — and the scaling ratio of pages/s between the worker counts.

7. The shared-IP web (`--shared-ip`, or `--webs default,shared-ip` for both in one run; issue
   21): 200 hosts x 101 pages, four links in five to another host, every host on one IP, every
   root a seed; gossamer with `--per-ip 64`, audited with that limit. Beside the CrawlSpider,
   `scrapy-plain`: the best-tuned plain Spider (selectolax links, CONCURRENT_ITEMS 4, idle
   spider middlewares off, uvloop); and `bare`: bench/bare_loop.py, pycurl + selectolax in one
   process without frontier, robots.txt or WARC, the floor of CPU a page. The last section
   prints, per web, gossamer's N workers / 1 worker (also over the fetch phase alone, and the
   ceiling this machine sets for it: its measured parallel speed-up, nginx's CPU a page beside
   the crawler's), gossamer's default / the best Scrapy (pages/s) and gossamer's 1-worker CPU
   a page / the bare loop's.

8. Issue 30's webs, both on one IP with every root a seed and gossamer at `--per-ip 64`
   (`--shared-per-ip`), audited with that limit like the shared-IP web: `few-hosts` (60 hosts
   x 251 pages = 15,060: fewer hosts than concurrency x workers, so a pool's workers must
   share hosts; `--few-hosts`, `--few-pages`) and `link-heavy` (200 hosts x 100 pages of ~15
   KB with ~31 absolute links each, every link to a page of another host: locality 0;
   `--heavy-*`). Every run reports pages/s, CPU ms a page, pages per CPU-second (pages over
   the user+sys CPU of the crawler's process tree: scaling read apart from nginx sharing the
   cores) and, for gossamer, each worker's share of the pages (stats.json's
   `pages_per_worker`). The bare loop resolves hrefs with can_ada by default, its fastest
   form (`--bare-joins can_ada,urljoin` runs both; the ratios take the one with the least CPU
   a page). The last section, "done means", prints issue 30's checks per web, each with its
   figure and PASS or FAIL: few-hosts, each of 2 workers >= 35 % of the pages, 2 workers >=
   1.5x 1 worker's pages/s and >= 0.9x its pages per CPU-second; shared-ip and default, 2
   workers' pages per CPU-second >= 0.9x 1 worker's; every web, 1 worker's CPU a page <= 1.5x
   the fastest bare loop + WARC's.

9. `--live-graph-cost`: each gossamer crawl twice in a round, `--no-live-graph` and
   `--live-graph` back to back (their order swapped every round; `--gossamer-rounds 3` or
   more), and what the live graph (on by default) costs each worker count: 1 - pages/s on /
   off, median and range of the rounds, against issue 33's ceiling (<= 3 % with 2 workers,
   <= 1 % with one: PASS or FAIL), and the crawl's CPU a page on / off (its process tree, the
   live graph's child included: the cost a saturated machine pays). `--live-graph-baseline
   SRC` adds a third crawl a round, `--live-graph` with the gossamer package of SRC (an
   earlier commit's src/) first on PYTHONPATH: the cost before and after a change, in one run.

Figures are printed, never asserted; bench/README.md and docs/crawler/bench.md record them.
Loopback only; every subprocess has a time limit (SIGTERM, then SIGKILL).
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import functools
import itertools
import json
import os
import shlex
import shutil
import signal
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gossamer.testweb import TruthRules, WebSpec, compute_truth, model_for
from gossamer.testweb._export import export_web
from gossamer.testweb._nginx import run_nginx

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from bench_testweb import _workdir, free_port  # noqa: E402

SEED_URL = "http://www.h0.example/"
SCRAPY_UA = "scrapy-bench/1.0"
CLK_TCK = os.sysconf("SC_CLK_TCK")
PAGE = os.sysconf("SC_PAGE_SIZE")


# ---------------------------------------------------------------------------- measuring


@dataclass(slots=True)
class Measured:
    """One subprocess and its descendants (a gossamer pool: the parent and its workers),
    measured from outside."""

    returncode: int
    wall_s: float
    user_s: float  # wait4: the process and every descendant it reaped
    sys_s: float
    peak_rss: int  # bytes: the sum over the processes of each one's peak (VmHWM)
    start_rss: int | None  # bytes: RSS of the tree when `started()` first held
    processes: int = 1
    thread_cpu: dict[str, float] = field(default_factory=dict)  # "pid/tid name" -> CPU s
    timed_out: bool = False

    @property
    def cpu_s(self) -> float:
        return self.user_s + self.sys_s


def _proc_mem(pid: int) -> tuple[int, int] | None:
    """(VmRSS, VmHWM) of `pid` in bytes. VmHWM is the peak RSS of the process's own address
    space since its exec; wait4's ru_maxrss is not used because Linux carries the forking
    parent's peak over into it."""
    rss = hwm = None
    with contextlib.suppress(OSError, ValueError, IndexError):
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                rss = int(line.split()[1]) * 1024
            elif line.startswith("VmHWM:"):
                hwm = int(line.split()[1]) * 1024
    return (rss, hwm) if rss is not None and hwm is not None else None


def _tree(root: int) -> list[int]:
    """`root` and its live descendants (from /proc/*/stat)."""
    children: dict[int, list[int]] = collections.defaultdict(list)
    with contextlib.suppress(OSError):
        for d in os.listdir("/proc"):
            if not d.isdigit():
                continue
            with contextlib.suppress(OSError, ValueError, IndexError):
                stat = Path(f"/proc/{d}/stat").read_text()
                children[int(stat[stat.rindex(")") + 2 :].split()[1])].append(int(d))
    out, todo = [], [root]
    while todo:
        pid = todo.pop()
        out.append(pid)
        todo.extend(children.get(pid, ()))
    return out


def _thread_cpu(pid: int, into: dict[str, float]) -> None:
    """utime+stime of each thread of `pid`, keyed by "pid/tid comm" (the last value wins)."""
    with contextlib.suppress(OSError):
        for tid in os.listdir(f"/proc/{pid}/task"):
            with contextlib.suppress(OSError, ValueError, IndexError):
                stat = Path(f"/proc/{pid}/task/{tid}/stat").read_text()
                name = stat[stat.index("(") + 1 : stat.rindex(")")]
                f = stat[stat.rindex(")") + 2 :].split()
                into[f"{pid}/{tid} {name}"] = (int(f[11]) + int(f[12])) / CLK_TCK


def tree_cpu_s(root: int) -> float:
    """utime+stime of `root` and its live descendants so far (an nginx master and its
    workers: the server's CPU, read before and after a crawl)."""
    threads: dict[str, float] = {}
    for pid in _tree(root):
        _thread_cpu(pid, threads)
    return sum(threads.values())


def run_measured(
    cmd: Sequence[str],
    *,
    log: Path,
    timeout: float,
    env: dict[str, str] | None = None,
    started: Callable[[], bool] | None = None,
) -> Measured:
    """Run `cmd`, polling /proc every 0.1 s over its process tree (RSS, peak RSS, per-thread
    CPU), and reap it with wait4 (user and system CPU of the tree). After `timeout` seconds:
    SIGTERM, SIGKILL 15 s later."""
    with log.open("wb") as out:
        proc = subprocess.Popen(
            list(cmd), stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, env=env
        )
    t0 = time.monotonic()
    start_rss: int | None = None
    peaks: dict[int, int] = {}
    threads: dict[str, float] = {}
    timed_out = False
    term_at: float | None = None
    while True:
        pid, status, ru = os.wait4(proc.pid, os.WNOHANG)
        if pid:
            break
        now = time.monotonic()
        rss_now = 0
        for p in _tree(proc.pid):
            mem = _proc_mem(p)
            if mem is not None:
                rss_now += mem[0]
                peaks[p] = max(peaks.get(p, 0), mem[1])
            _thread_cpu(p, threads)
        if start_rss is None and rss_now and (started is None or started()):
            start_rss = rss_now
        if now - t0 > timeout and term_at is None:
            timed_out = True
            term_at = now
            with contextlib.suppress(ProcessLookupError):
                os.kill(proc.pid, signal.SIGTERM)
        elif term_at is not None and now - term_at > 15:
            with contextlib.suppress(ProcessLookupError):
                os.kill(proc.pid, signal.SIGKILL)
        time.sleep(0.1)
    wall = time.monotonic() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)  # reaped here, not by Popen
    return Measured(
        returncode=proc.returncode,
        wall_s=wall,
        user_s=ru.ru_utime,
        sys_s=ru.ru_stime,
        peak_rss=sum(peaks.values()),
        start_rss=start_rss,
        processes=len(peaks),
        thread_cpu=threads,
        timed_out=timed_out,
    )


# ---------------------------------------------------------------------------- results


@dataclass(slots=True)
class CrawlRun:
    """What one crawler did, and whether it was right."""

    crawler: str
    config: str
    m: Measured
    pages: int  # page responses (robots.txt not counted)
    requests: int
    urls_seen: int
    frontier_bytes: int | None = None
    start_rss: int | None = None
    audit: dict[str, Any] | None = None
    checks: list[str] = field(default_factory=list)  # failed checks, human-readable
    notes: list[str] = field(default_factory=list)
    web: str = "default"  # which web: one of WEBS
    server_cpu_s: float | None = None  # nginx's CPU over the crawl (it shares the machine)
    workers: int = 1  # crawler processes
    fetch_span_s: float | None = None  # first to last fetch start in the crawl log
    round: int = 0  # which round of gossamer runs (--gossamer-rounds), from 0
    pages_per_worker: list[int] | None = None  # gossamer: stats.json's, one entry a worker

    @property
    def pages_per_s(self) -> float:
        return self.pages / self.m.wall_s if self.m.wall_s else 0.0

    @property
    def pages_per_cpu_s(self) -> float:
        """Pages over the CPU seconds of the crawler's process tree (user + sys): its speed
        read apart from the server and anything else sharing the cores."""
        return self.pages / self.m.cpu_s if self.m.cpu_s else float("nan")

    @property
    def worker_shares(self) -> list[float] | None:
        """Each worker's share of the pages (stats.json's `pages_per_worker`)."""
        if not self.pages_per_worker or not sum(self.pages_per_worker):
            return None
        total = sum(self.pages_per_worker)
        return [n / total for n in self.pages_per_worker]

    @property
    def cpu_ms_per_page(self) -> float:
        return self.m.cpu_s / self.pages * 1000 if self.pages else float("nan")

    @property
    def server_ms_per_page(self) -> float | None:
        if self.server_cpu_s is None or not self.pages:
            return None
        return self.server_cpu_s / self.pages * 1000

    @property
    def rss_growth_per_url(self) -> float | None:
        """(peak − RSS at the crawl's start) / URLs seen; one process only (a pool's workers
        start after the parent's start mark)."""
        if self.start_rss is None or not self.urls_seen or self.m.processes > 1:
            return None
        return (self.m.peak_rss - self.start_rss) / self.urls_seen

    @property
    def frontier_per_url(self) -> float | None:
        if self.frontier_bytes is None or not self.urls_seen:
            return None
        return self.frontier_bytes / self.urls_seen


def _dir_bytes(paths: Sequence[Path]) -> int:
    return sum(p.stat().st_size for p in paths if p.exists())


def run_audit(
    log: Path, web_json: Path, out_json: Path, extra: Sequence[str], console: Path
) -> dict[str, Any]:
    """`gossamer testweb audit` (the CLI, so the command is the one a user would type)."""
    cmd = [
        sys.executable,
        "-m",
        "gossamer",
        "testweb",
        "audit",
        "--log",
        str(log),
        "--web",
        str(web_json),
        *extra,
        "--json",
        str(out_json),
    ]
    with console.open("wb") as f:
        subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT, timeout=300, check=False)
    try:
        report: dict[str, Any] = json.loads(out_json.read_text())
    except (OSError, ValueError) as exc:
        raise RuntimeError(f"audit failed: {console.read_text()[-2000:]}") from exc
    return report


def _fresh_log(access_log: Path) -> None:
    access_log.parent.mkdir(parents=True, exist_ok=True)
    access_log.write_bytes(b"")


def _bench_path_env() -> dict[str, str]:
    """The environment with bench/ first on PYTHONPATH (an extractor of bench/ importable)."""
    env = dict(os.environ)
    here = str(Path(__file__).resolve().parent)
    env["PYTHONPATH"] = os.pathsep.join([here, *filter(None, [env.get("PYTHONPATH")])])
    return env


def _extract_costs(runs: list[CrawlRun]) -> None:
    """Each configuration's pages/s with the extractor over without it (the runs in pairs,
    the extractor's right after its plain twin): every round's ratio and their median."""
    by_config: dict[str, list[float]] = {}
    for plain, with_x in itertools.pairwise(runs):
        if with_x.config == plain.config + " + --extract" and plain.pages_per_s:
            by_config.setdefault(plain.config, []).append(with_x.pages_per_s / plain.pages_per_s)
    print("\n## what --extract costs (pages/s with it / without it, same round)")
    for config, ratios in by_config.items():
        shown = ", ".join(f"{r:.3f}" for r in ratios)
        print(f"  {config}: median {statistics.median(ratios):.3f} (rounds: {shown})")


LIVE_ON, LIVE_OFF = "--live-graph", "--no-live-graph"
BASELINE = " (baseline sources)"
#: issue 33's ceiling on what the live graph (on by default) may cost, by worker count
LIVE_GRAPH_MAX_COST = {1: 0.01, 2: 0.03}


def _live_graph_costs(runs: list[CrawlRun]) -> None:
    """What the live graph costs each worker count: per round, 1 - pages/s on / pages/s off
    (the two crawls of a round back to back, their order swapped every round); the median
    and the range of the rounds, and issue 33's ceiling, PASS or FAIL (printed, never
    asserted)."""
    by: dict[tuple[str, int], dict[str, CrawlRun]] = {}
    for r in runs:
        config, kind = r.config, "on"
        if config.endswith(BASELINE):
            config, kind = config[: -len(BASELINE)], "baseline"
        if config.endswith(LIVE_ON) or config.endswith(LIVE_OFF):
            base = config.rsplit(" ", 1)[0]
            by.setdefault((base, r.round), {})["off" if config.endswith(LIVE_OFF) else kind] = r
    costs: dict[str, list[float]] = {}
    cpu: dict[str, list[float]] = {}  # CPU a page on / off - 1: the cost on a busy machine
    workers: dict[str, int] = {}
    for (base, _rnd), runs_of in by.items():
        off = runs_of.get("off")
        for kind in ("on", "baseline"):
            if kind in runs_of and off is not None and off.pages_per_s:
                name = base if kind == "on" else base + BASELINE
                costs.setdefault(name, []).append(1 - runs_of[kind].pages_per_s / off.pages_per_s)
                cpu.setdefault(name, []).append(
                    runs_of[kind].cpu_ms_per_page / off.cpu_ms_per_page - 1
                )
                workers[name] = runs_of[kind].workers
    print("\n## what the live graph costs (1 - pages/s on / off, same round; order alternated)")
    for base, cs in costs.items():
        shown = ", ".join(f"{c:+.1%}" for c in cs)
        med = statistics.median(cs)
        limit = LIVE_GRAPH_MAX_COST.get(workers[base])
        verdict = (
            f"; issue 33: <= {limit:.0%}: {'PASS' if med <= limit else 'FAIL'}" if limit else ""
        )
        print(
            f"  {base}: median {med:+.1%}, range {min(cs):+.1%} .. {max(cs):+.1%} "
            f"({len(cs)} rounds: {shown}){verdict}; the crawl's CPU a page (its process "
            f"tree, the live graph's child included) {statistics.median(cpu[base]):+.1%} "
            f"(range {min(cpu[base]):+.1%} .. {max(cpu[base]):+.1%})"
        )


def _variant_tag(suffix: str, extra: list[str]) -> str:
    """A gossamer crawl's variant in its directory's name (after gossamer-wN)."""
    if suffix == " + --extract":
        return "-x"
    if suffix.endswith(BASELINE):
        return "-lg-base"
    if suffix.endswith(LIVE_ON):
        return "-lg"
    if suffix.endswith(LIVE_OFF):
        return "-nolg"
    return "-also" if extra else ""


def _also_costs(runs: list[CrawlRun], suffix: str) -> None:
    """`--gossamer-also`: each configuration's pages/s of its plain runs over those with the
    flags, and the CPU a page with them over without (the two crawls of a round back to
    back, their order swapped every round): every round's ratio, their median and spread."""
    by: dict[tuple[str, int], dict[bool, CrawlRun]] = {}
    for r in runs:
        also = r.config.endswith(suffix)
        config = r.config[: -len(suffix)] if also else r.config
        by.setdefault((config, r.round), {})[also] = r
    speed: dict[str, list[float]] = {}
    cpu: dict[str, list[float]] = {}
    for (config, _rnd), pair in by.items():
        plain, also_run = pair.get(False), pair.get(True)
        if plain is None or also_run is None or not also_run.pages_per_s:
            continue
        speed.setdefault(config, []).append(plain.pages_per_s / also_run.pages_per_s)
        cpu.setdefault(config, []).append(also_run.cpu_ms_per_page / plain.cpu_ms_per_page)
    print(f"\n## without{suffix[2:]!r} against with it, same round (order alternated)")
    for config, ratios in speed.items():
        shown = ", ".join(f"{r:.3f}" for r in ratios)
        cpus = cpu[config]
        print(
            f"  {config}: pages/s without / with: median {statistics.median(ratios):.3f}, "
            f"spread {min(ratios):.3f}-{max(ratios):.3f} (rounds: {shown}); CPU a page with "
            f"/ without: median {statistics.median(cpus):.3f}, spread "
            f"{min(cpus):.3f}-{max(cpus):.3f}"
        )


def gossamer_cmd(
    out: Path, resolve: Path, args: argparse.Namespace, workers: int, *extra: str
) -> list[str]:
    """The arguments after `python -m gossamer`."""
    cmd = [
        "crawl",
        *args.seeds,
        "-o",
        str(out),
        "--scope",
        "all",
        "--resolve-file",
        str(resolve),
        "--allow-private",
        "--delay",
        "0",
        "--concurrency",
        str(args.concurrency),
        "--per-ip",
        str(args.per_ip),
        "-q",
        *extra,
    ]
    if workers:
        cmd += ["--workers", str(workers)]
    return cmd


def _live_graph_final_wait(out: Path) -> float | None:
    """With the live graph on: seconds from the crawl's exit until its final statistics are
    written (the crawl does not wait for them: docs/graph.md), else None."""
    from gossamer.report.crawl import wait_live_graph

    if not (out / "graph" / "follow.lock").exists():
        return None
    began = time.perf_counter()
    if not wait_live_graph(out, 600):
        return float("inf")
    return time.perf_counter() - began


def run_gossamer(
    work: Path,
    export: Path,
    args: argparse.Namespace,
    *,
    name: str,
    config: str,
    workers: int = 1,
    extra: Sequence[str] = (),
    env: dict[str, str] | None = None,
    entry: Sequence[str] = ("-m", "gossamer"),
    check: bool = True,
    truth: Any = None,
) -> CrawlRun:
    """One gossamer crawl of the export (nginx started for it, its own access log)."""
    out = work / name
    shutil.rmtree(out, ignore_errors=True)
    access = export / "logs" / "access.log"
    _fresh_log(access)
    cmd = [
        sys.executable,
        *entry,
        *gossamer_cmd(out, export / "resolve.txt", args, workers, *extra),
    ]
    with run_nginx(export) as nginx:
        server0 = tree_cpu_s(nginx.pid)
        m = run_measured(
            cmd,
            log=work / f"{name}.console",
            timeout=args.timeout,
            env=env,
            started=lambda: (out / "frontier.sqlite").exists(),
        )
        server_cpu = tree_cpu_s(nginx.pid) - server0
        graph_wait = _live_graph_final_wait(out)
    log = work / f"{name}.access.log"
    shutil.move(access, log)
    try:
        stats = json.loads((out / "stats.json").read_text())
    except (OSError, ValueError):
        tail = (work / f"{name}.console").read_text(errors="replace")[-2000:]
        raise RuntimeError(f"gossamer crawl failed ({m.returncode}): {tail}") from None
    fr = stats.get("frontier", {})
    seen = sum(int(fr.get(k, 0)) for k in ("queued", "leased", "done", "failed"))
    run = CrawlRun(
        crawler="gossamer",
        config=config,
        m=m,
        pages=int(stats["pages"]),
        requests=int(stats["requests"]),
        urls_seen=seen,
        frontier_bytes=_dir_bytes(
            [out / "frontier.sqlite", out / "frontier.sqlite-wal", out / "frontier.sqlite-shm"]
        ),
        start_rss=m.start_rss,
        server_cpu_s=server_cpu,
        workers=workers or os.cpu_count() or 1,
        fetch_span_s=_fetch_span(out / "crawl.log.jsonl"),
        # a pool's stats.json lists its workers' pages; one worker's has only its own
        pages_per_worker=[int(n) for n in stats.get("pages_per_worker", [stats["pages"]])],
    )
    if m.returncode != 0 or m.timed_out:
        run.checks.append(f"exit status {m.returncode}{' (timed out)' if m.timed_out else ''}")
    if graph_wait is not None:
        run.notes.append(
            f"live graph: final statistics written {graph_wait:.2f} s after the crawl's exit "
            "(by a fork of its child, not in the crawl's wall or CPU time)"
        )
    if not check:
        return run
    run.audit = run_audit(
        log,
        export / "web.json",
        work / f"{name}.audit.json",
        ["--crawl", str(out), "--per-ip-limit", str(args.per_ip)],
        work / f"{name}.audit.txt",
    )
    pages = run.audit["pages"]
    if pages["coverage"] != 1.0:
        run.checks.append(f"coverage {pages['coverage']:.4f} (must be 1.000)")
    if pages["overlap"] != 0:
        run.checks.append(f"overlap {pages['overlap']:.4f} (must be 0)")
    if not run.audit["ok"]:
        run.checks.append(f"audit verdict not OK: {run.audit['violation_count']} violations")
    if truth is not None:
        from gossamer.sinks import read_graph

        ours = {e for e in read_graph(out).url_edges() if e[1] in truth.required}
        want = {(a, b, k) for a, b, k in truth.edges}
        run.notes.append(f"graph: {len(ours):,} edges, truth {len(want):,}")
        if ours != want:
            run.checks.append(
                f"graph edges differ from the truth: {len(ours - want)} extra, "
                f"{len(want - ours)} missing"
            )
    return run


def run_scrapy(
    work: Path, export: Path, args: argparse.Namespace, spider: str = "crawl"
) -> CrawlRun | None:
    """bench/scrapy_spider.py with `--spider crawl` (the minimal CrawlSpider) or `plain`
    (the tuned plain Spider), measured and audited as gossamer."""
    try:
        import scrapy
    except ImportError:
        print(
            "\n## Scrapy: not installed, skipped (`.venv/bin/pip install scrapy` to compare; "
            "it is not a gossamer dependency)"
        )
        return None
    name = f"scrapy-{spider}-{args.web_name}"
    access = export / "logs" / "access.log"
    _fresh_log(access)
    stats_out = work / f"{name}.stats.json"
    stats_out.unlink(missing_ok=True)
    cmd = [
        sys.executable,
        str(HERE / "scrapy_spider.py"),
        *(a for seed in args.seeds for a in ("--seed", seed)),
        "--spider",
        spider,
        "--slot",
        args.scrapy_slot,
        "--per-slot",
        "1",
        "--resolve-file",
        str(export / "resolve.txt"),
        "--concurrency",
        str(args.concurrency),
        "--user-agent",
        SCRAPY_UA,
        "--max-pages",
        str(args.scrapy_pages),
        "--timeout",
        str(args.scrapy_seconds),
        "--stats-out",
        str(stats_out),
    ]
    if spider == "plain":
        cmd += ["--concurrent-items", str(args.scrapy_concurrent_items)]
        with contextlib.suppress(ImportError):
            import uvloop  # noqa: F401

            cmd.append("--uvloop")
    console = work / f"{name}.console"

    def opened() -> bool:
        with contextlib.suppress(OSError):
            return b"Spider opened" in console.read_bytes()
        return False

    with run_nginx(export):
        m = run_measured(cmd, log=console, timeout=args.timeout, started=opened)
    log = work / f"{name}.access.log"
    shutil.move(access, log)
    try:
        st = json.loads(stats_out.read_text())
    except (OSError, ValueError):
        tail = (work / f"{name}.console").read_text(errors="replace")[-2000:]
        raise RuntimeError(f"scrapy failed ({m.returncode}): {tail}") from None
    s = st["stats"]
    limits = []
    if args.scrapy_seconds:
        limits.append(f"{args.scrapy_seconds:g} s")
    if args.scrapy_pages:
        limits.append(f"{args.scrapy_pages:,} pages")
    limit = f"stopped after {' or '.join(limits)}" if limits else "full crawl"
    kind = (
        "CrawlSpider"
        if spider == "crawl"
        else f"plain Spider, selectolax, CONCURRENT_ITEMS={args.scrapy_concurrent_items}"
        + (", uvloop" if "--uvloop" in cmd else "")
    )
    run = CrawlRun(
        crawler=f"Scrapy {scrapy.__version__}",
        config=f"{kind}, {limit}",
        m=m,
        pages=int(st["pages"]),
        requests=int(st["requests"]),
        urls_seen=int(s.get("scheduler/enqueued", 0)),
        start_rss=m.start_rss,
    )
    run.notes.append(f"finish reason {st.get('finish_reason')}")
    if m.returncode != 0:
        run.checks.append(f"exit status {m.returncode}")
    if errors := int(s.get("log_count/ERROR", 0)):
        run.checks.append(f"{errors} errors logged (spider exceptions: see {name}.console)")
    run.audit = run_audit(
        log,
        export / "web.json",
        work / f"{name}.audit.json",
        [
            "--seeds",
            *args.seeds,
            "--scope",
            "all",
            "--user-agent",
            SCRAPY_UA,
            "--per-ip-limit",
            str(args.per_ip),
        ],
        work / f"{name}.audit.txt",
    )
    pages = run.audit["pages"]
    dup = [u for u, _ in pages.get("duplicates", [])]
    if dup and set(dup) <= set(args.seeds):
        run.notes.append(
            f"overlap {pages['overlap']:.4f}: seeds fetched twice (Scrapy's start "
            "requests skip the dupefilter, so a later link to a seed is fetched again)"
        )
    elif pages["overlap"] != 0:
        run.checks.append(f"overlap {pages['overlap']:.4f} ({len(dup)} URLs fetched twice)")
    if pages.get("unexpected_requests"):
        run.checks.append(f"{pages['unexpected_requests']} requests that should not be made")
    if sum(run.audit["politeness"]["violations"].values()):
        run.checks.append(f"politeness violations {run.audit['politeness']['violations']}")
    return run


# ---------------------------------------------------------------------------- profile


def profile_gossamer(
    work: Path, export: Path, args: argparse.Namespace, main_cpu_per_page_us: float | None
) -> None:
    """A gossamer crawl under `py-spy record --threads` (idle samples excluded): where the main
    thread's CPU goes, per function, as a share and in µs per page."""
    pyspy = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
    if not os.access(pyspy, os.X_OK):
        print("\n## profile: py-spy not found, skipped (`.venv/bin/pip install py-spy`)")
        return
    raw = work / "profile.raw"
    out = work / "gossamer-profiled"
    shutil.rmtree(out, ignore_errors=True)
    access = export / "logs" / "access.log"
    _fresh_log(access)
    cmd = [pyspy, "record", "--threads", "-r", str(args.profile_rate), "-f", "raw"]
    cmd += ["-o", str(raw), "--", sys.executable, "-m", "gossamer"]
    cmd += gossamer_cmd(out, export / "resolve.txt", args, 1)  # one process: one main thread
    with run_nginx(export):
        m = run_measured(cmd, log=work / "profile.console", timeout=args.timeout * 2)
    try:
        pages = int(json.loads((out / "stats.json").read_text())["pages"])
        lines = raw.read_text().splitlines()
    except (OSError, ValueError, KeyError):
        print(f"\n## profile: the profiled crawl failed ({m.returncode}); skipped")
        return
    stacks: list[tuple[list[str], int]] = []
    main_tid = None
    for line in lines:
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue
        frames = stack.split(";")
        if frames[0].endswith(": MainThread"):
            main_tid = frames[0].split(":")[0]  # "thread (1234)"
        stacks.append((frames, int(count)))
    self_n: collections.Counter[str] = collections.Counter()
    incl_n: collections.Counter[str] = collections.Counter()
    total = other = 0
    for frames, n in stacks:
        if main_tid is None or frames[0].split(":")[0] != main_tid:
            other += n  # thread-pool threads (SQLite frontier calls) and py-spy's own
            continue
        total += n
        names = [_frame_name(f) for f in frames[1:]]
        if not names:
            continue
        self_n[names[-1]] += n
        for f in set(names):
            incl_n[f] += n
    if not total:
        print("\n## profile: no samples of the main thread")
        return
    per_page = main_cpu_per_page_us
    print(
        f"\n## profile: py-spy --threads, {total:,} main-thread samples ({other:,} in other "
        f"threads) over {pages:,} pages, {m.wall_s:.1f} s under the profiler. µs/page = share "
        f"× {per_page or 0:.0f} µs, the main thread's CPU per page in the unprofiled run. C code "
        "that releases the GIL (sha1, gzip, lexbor, curl) counts for the caller."
    )

    def show(title: str, counter: collections.Counter[str], n: int) -> None:
        print(f"\n  {title}")
        print("  | share | µs/page | function |")
        print("  |---:|---:|---|")
        for fn, c in counter.most_common(n):
            share = c / total
            us = f"{share * per_page:.0f}" if per_page else "-"
            print(f"  | {share * 100:.1f} % | {us} | `{fn}` |")

    show("self time (the function's own lines and the C calls it makes)", self_n, args.profile_top)
    ours = collections.Counter(
        {
            k: v
            for k, v in incl_n.items()
            if "gossamer/" in k
            and "cli.py" not in k
            and "__main__" not in k
            and not k.startswith(("run_crawl ", "_run "))
        }
    )
    show("inclusive time (with callees), gossamer functions", ours, args.profile_top)


def _frame_name(frame: str) -> str:
    """`parse_html (gossamer/parse/links.py:194)` → `parse_html (gossamer/parse/links.py)`."""
    name, sep, where = frame.partition(" (")
    if not sep:
        return frame
    path = where.rstrip(")").rsplit(":", 1)[0]
    if path in ("crawler.py", "recorder.py", "run.py", "demo.py", "report.py"):
        path = "gossamer/engine/" + path
    return f"{name} ({path})"


# ---------------------------------------------------------------------------- pipeline


def bench_pipeline(model: Any, work: Path, pages: int) -> None:
    """µs of CPU per page of the crawler's per-page steps, in one process with no network, on
    `pages` pages of the web (public APIs only), next to cheaper variants of the same work:
    the figures behind docs/crawler/bench.md's suggestions."""
    import gc
    import hashlib

    from gossamer.frontier import Discovered
    from gossamer.parse import ParseOptions, parse_html
    from gossamer.scope import Scope
    from gossamer.sinks import CrawlLog, GraphWriter, WarcWriter
    from gossamer.testweb._content import respond
    from gossamer.testweb._model import Kind, Resource
    from gossamer.urls import fingerprint, host_key

    compress: Callable[[bytes, int, int], bytes]
    try:
        from isal.isal_zlib import compress
    except ImportError:
        from zlib import compress

    items = [(h.id, i) for h in model.hosts for i in range(h.pages)][:pages]
    docs = []
    for h, i in items:
        body = respond(model, Resource(Kind.PAGE, h, i)).body
        docs.append((model.page_url(h, i), body))
    n = len(docs)
    options = ParseOptions(link_rels=frozenset({"canonical"}))
    headers = {"content-type": "text/html; charset=utf-8"}
    resp_head = b"HTTP/1.1 200 OK\r\nContent-Type: text/html; charset=utf-8\r\n\r\n"
    req_head = b"GET / HTTP/1.1\r\nHost: www.h0.example\r\n\r\n"
    scope = Scope([SEED_URL], scope="all")
    out = work / "pipeline"
    shutil.rmtree(out, ignore_errors=True)
    links = [[lk.url for lk in parse_html(body, url, headers, options).links] for url, body in docs]
    pairs = [(src, dsts) for (src, _), dsts in zip(docs, links, strict=True)]
    per_page_links = sum(len(x) for x in links) / n
    print(
        f"\n## per-page steps in one process, no network ({n:,} pages, "
        f"{per_page_links:.1f} links a page; CPU µs per page, best of 3)"
    )

    def measure(label: str, fn: Callable[[], object]) -> float:
        best = float("inf")
        for _ in range(3):
            gc.collect()
            t = time.process_time()
            fn()
            best = min(best, time.process_time() - t)
        us = best / n * 1e6
        print(f"  {label:66s} {us:7.1f}")
        return us

    measure(
        "parse_html",
        lambda: [parse_html(body, url, headers, options) for url, body in docs],
    )

    def route_now() -> None:  # what Crawler._route does for every link of every page
        for src, dsts in pairs:
            found = []
            for dst in dsts:
                host = host_key(dst)
                if scope.reject(dst, host, 1):
                    continue
                found.append(Discovered(dst, host, 1, fingerprint(dst), 1, src))

    memo: dict[str, tuple[str | None, str, int]] = {}
    sent: set[str] = set()

    def route_memo() -> None:  # proposal: a URL's scope verdict, host and fp worked out once
        for src, dsts in pairs:
            found = []
            for dst in dsts:
                m = memo.get(dst)
                if m is None:
                    host = host_key(dst)
                    m = memo[dst] = (scope.reject(dst, host, 1), host, fingerprint(dst))
                if m[0] or dst in sent:
                    continue
                sent.add(dst)
                found.append(Discovered(dst, m[1], 1, m[2], 1, src))

    measure("links: host_key + Scope.reject + fingerprint + Discovered (now)", route_now)
    route_memo()  # warm: on a crawl most links point to URLs met before
    measure("links: the same, memoised per URL + a sent-set (warm)", route_memo)
    measure(
        "  of which Scope.reject",
        lambda: [scope.reject(d, "h", 1) for dsts in links for d in dsts],
    )
    graph = GraphWriter(out / "g1")
    measure(
        "graph: GraphWriter.add_edge per link (now)",
        lambda: [graph.add_edge(src, d) for src, dsts in pairs for d in dsts],
    )
    graph2 = GraphWriter(out / "g2")
    measure(
        "graph: GraphWriter.add_edges once per page",
        lambda: [graph2.add_edges(src, dsts) for src, dsts in pairs],
    )
    graph.close()
    graph2.close()
    warc = WarcWriter(out / "warc", max_bytes=1 << 34)
    now = time.time()
    measure(
        "WARC: WarcWriter.write_exchange (request + response, gzip)",
        lambda: [
            warc.write_exchange(url, "127.1.0.1", req_head, resp_head, body, now, False)
            for url, body in docs
        ],
    )
    warc.close()

    def warc_c_part() -> None:
        for _, body in docs:
            hashlib.sha1(body).digest()
            hashlib.sha1(resp_head + body).digest()
            compress(resp_head + body, 1, 31)

    measure("  of which gzip + 2 SHA-1 (C code that releases the GIL)", warc_c_part)
    log = CrawlLog(out / "crawl.log.jsonl")

    def write_log() -> None:
        for url, body in docs:
            log.write(url=url, status=200, outcome="ok", nbytes=len(body), depth=1, parent=url)

    measure("crawl log: CrawlLog.write (one JSON line, one write)", write_log)
    log.close()


# ---------------------------------------------------------------------------- output


def _mb(n: float | None) -> str:
    return f"{n / 1e6:,.0f}" if n is not None else "-"


def _shares(r: CrawlRun) -> str:
    """Each worker's share of the pages, e.g. "51 / 49 %"; "-" when not known."""
    shares = r.worker_shares
    if shares is None:
        return "-"
    return " / ".join(f"{x * 100:.0f}" for x in shares) + " %"


def print_table(runs: list[CrawlRun]) -> None:
    print("\n## summary (markdown)\n")
    print(
        "| web | crawler | configuration | pages | wall s | pages/s | CPU s | CPU ms/page "
        "| pages per CPU-s | worker shares "
        "| peak RSS MB | RSS growth B/URL | frontier B/URL | coverage | overlap | checks |"
    )
    print("|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|")
    for r in runs:
        cov = ov = "-"
        if r.audit:
            cov = f"{r.audit['pages']['coverage']:.3f}"
            ov = f"{r.audit['pages']['overlap']:.3f}"
        growth = r.rss_growth_per_url
        fpu = r.frontier_per_url
        print(
            f"| {r.web} | {r.crawler} | {r.config} | {r.pages:,} | {r.m.wall_s:.1f} "
            f"| **{r.pages_per_s:,.0f}** | {r.m.cpu_s:.1f} | {r.cpu_ms_per_page:.2f} "
            f"| {r.pages_per_cpu_s:,.0f} | {_shares(r)} "
            f"| {_mb(r.m.peak_rss)} | {f'{growth:,.0f}' if growth is not None else '-'} "
            f"| {f'{fpu:,.0f}' if fpu is not None else '-'} | {cov} | {ov} "
            f"| {'; '.join(r.checks) or 'OK'} |"
        )


def describe(r: CrawlRun) -> None:
    busiest = max(r.m.thread_cpu.values(), default=0.0)
    others = sum(r.m.thread_cpu.values()) - busiest
    procs = f"{r.m.processes} processes, " if r.m.processes > 1 else ""
    print(
        f"  {r.crawler} ({r.config}): {r.pages:,} pages + {r.requests - r.pages:,} other "
        f"requests in {r.m.wall_s:.1f} s = {r.pages_per_s:,.0f} pages/s; CPU {r.m.cpu_s:.1f} s "
        f"(user {r.m.user_s:.1f}, sys {r.m.sys_s:.1f}; {procs}busiest thread {busiest:.1f} s, "
        f"other threads {others:.1f} s) = {r.cpu_ms_per_page:.2f} ms/page = "
        f"{r.pages_per_cpu_s:,.0f} pages per CPU-s; "
        f"RSS {_mb(r.start_rss)} MB at start, peak {_mb(r.m.peak_rss)} MB; "
        f"{r.urls_seen:,} URLs seen",
        flush=True,
    )
    if r.audit:
        p, pol = r.audit["pages"], r.audit["politeness"]
        print(
            f"    audit: coverage {p['coverage']:.4f} ({p['covered']:,}/{p['expected']:,}), "
            f"overlap {p['overlap']:.4f}, should-not-fetch {p['unexpected_requests']}, "
            f"politeness {sum(pol['violations'].values())} violations "
            f"(most in flight per IP: {max(pol['max_in_flight'].values(), default=0)}), verdict "
            f"{'OK' if r.audit['ok'] else 'NOT OK'}"
        )
    if r.server_ms_per_page is not None:
        print(f"    server: nginx CPU {r.server_cpu_s:.1f} s = {r.server_ms_per_page:.3f} ms/page "
              "(on the same cores as the crawler)")  # fmt: skip
    if r.pages_per_worker is not None:
        print(
            "    pages per worker (stats.json): "
            + ", ".join(f"{n:,}" for n in r.pages_per_worker)
            + f" = {_shares(r)}"
        )
    for note in r.notes:
        print(f"    {note}")
    for c in r.checks:
        print(f"    CHECK FAILED: {c}")


def run_bare(
    work: Path,
    export: Path,
    args: argparse.Namespace,
    *,
    warc: bool = False,
    joins: str = "can_ada",
) -> CrawlRun:
    """bench/bare_loop.py (pycurl + selectolax, one process, no frontier, robots.txt or
    WARC; hrefs resolved by `joins`: can_ada or urljoin): the floor of CPU a page; with
    `warc`, also writing each page's WARC records (gzip members, digests): the floor of an
    archiving crawler. Audited for overlap only (it ignores robots.txt, and its one bound per
    IP is its concurrency)."""
    name = f"bare{'-warc' if warc else ''}-{joins}-{args.web_name}"
    access = export / "logs" / "access.log"
    _fresh_log(access)
    stats_out = work / f"{name}.stats.json"
    stats_out.unlink(missing_ok=True)
    cmd = [
        sys.executable,
        str(HERE / "bare_loop.py"),
        *(a for seed in args.seeds for a in ("--seed", seed)),
        "--resolve-file",
        str(export / "resolve.txt"),
        "--concurrency",
        str(args.concurrency),
        "--stats-out",
        str(stats_out),
        "--joins",
        joins,
    ]
    if warc:
        cmd += ["--warc", str(work / f"{name}.warc.gz")]
    with run_nginx(export):
        m = run_measured(cmd, log=work / f"{name}.console", timeout=args.timeout)
    (work / f"{name}.warc.gz").unlink(missing_ok=True)
    log = work / f"{name}.access.log"
    shutil.move(access, log)
    try:
        st = json.loads(stats_out.read_text())
    except (OSError, ValueError):
        tail = (work / f"{name}.console").read_text(errors="replace")[-2000:]
        raise RuntimeError(f"bare loop failed ({m.returncode}): {tail}") from None
    run = CrawlRun(
        crawler="bare loop + WARC" if warc else "bare loop",
        config=f"pycurl + selectolax + {joins} joins + WARC records (ISA-L gzip, SHA-1 "
        "digests), 1 process"
        if warc
        else f"pycurl + selectolax + {joins} joins, 1 process, no frontier/robots/WARC",
        m=m,
        pages=int(st["pages"]),
        requests=int(st["requests"]),
        urls_seen=int(st["seen"]),
        start_rss=m.start_rss,
        web=args.web_name,
    )
    if m.returncode != 0 or m.timed_out:
        run.checks.append(f"exit status {m.returncode}{' (timed out)' if m.timed_out else ''}")
    run.audit = run_audit(
        log,
        export / "web.json",
        work / f"{name}.audit.json",
        [
            "--seeds",
            *args.seeds,
            "--scope",
            "all",
            "--ignore-robots",
            "--per-ip-limit",
            str(args.concurrency),
        ],
        work / f"{name}.audit.txt",
    )
    if run.audit["pages"]["overlap"] != 0:
        run.checks.append(f"overlap {run.audit['pages']['overlap']:.4f} (must be 0)")
    return run


#: what os.cpu_count() CPU-bound processes at once do, in units of one alone (main sets it)
PARALLEL: float | None = None

_SPIN = "import time\nt = time.process_time()\nx = 0\nfor i in range(6_000_000): x += i * i\n" \
    "print(time.process_time() - t)"


def parallel_speedup(rounds: int = 3) -> float:
    """The work os.cpu_count() processes spinning at once do per second, over one alone's
    (the best of `rounds`): the machine's own ceiling for N workers on N cores, before any
    crawler or server shares them."""
    cores = os.cpu_count() or 1

    def spin(n: int) -> float:
        procs = [subprocess.Popen([sys.executable, "-c", _SPIN], stdout=subprocess.PIPE)
                 for _ in range(n)]  # fmt: skip
        t0 = time.monotonic()
        for p in procs:
            p.communicate(timeout=120)
        return time.monotonic() - t0

    alone = min(spin(1) for _ in range(rounds))
    together = min(spin(cores) for _ in range(rounds))
    return cores * alone / together


def _fetch_span(crawl_log: Path) -> float | None:
    """Seconds from the first fetch's start to the last's, from the crawl log: the crawl
    without the interpreter's start, the pool's forks and the end's index and summary."""
    from datetime import datetime

    try:
        with crawl_log.open("rb") as f:
            stamps = [json.loads(line)["time"] for line in f]
    except (OSError, ValueError, KeyError):
        return None
    if len(stamps) < 2:
        return None
    times = [datetime.fromisoformat(t.replace("Z", "+00:00")).timestamp() for t in stamps]
    return max(times) - min(times)


def _fetch_ratio(one: CrawlRun, many: CrawlRun) -> float | None:
    """`many`'s pages/s over `one`'s in the fetch phase alone (`_fetch_span`)."""
    if not one.fetch_span_s or not many.fetch_span_s:
        return None
    return (many.pages / many.fetch_span_s) / (one.pages / one.fetch_span_s)


def _fetch_phase(one: CrawlRun, many: CrawlRun) -> str:
    """The same ratio over the fetch phase alone: what the start and end, which no worker
    count shortens, took off it."""
    ratio = _fetch_ratio(one, many)
    return "" if ratio is None else f" ({ratio:.2f}x from the first fetch to the last)"


def _ceiling(one: CrawlRun, many: CrawlRun) -> str:
    """What this machine allows `many`'s workers over `one`'s, when the server shares its
    cores: one worker busy on one core does 1/c pages a second (c: its CPU a page; the server
    fits on another core); N workers can do no more than N/c, nor than the machine's cores
    over the CPU a page of crawler and server together, cores/(c + n). So the ratio is at
    most min(N, cores·c/(c + n)) — and the cheaper gossamer's page, the lower that bound —
    with `cores` the work the cores do at once in single cores (PARALLEL: below 2 on a VM
    whose two vCPUs slow each other down)."""
    n = one.server_ms_per_page
    c = one.cpu_ms_per_page
    workers = many.workers
    cores = os.cpu_count() or 1
    if n is None or not c or workers < 2:
        return ""
    effective = min(PARALLEL or cores, cores)  # the cores' work at once, in single cores
    bound = min(workers * effective / cores, effective * c / (c + n))
    text = f" (this machine's ceiling for {workers} workers: {bound:.2f}x, from {cores} cores "\
        f"doing {effective:.2f}x one's work at once, gossamer {c:.3f} + nginx {n:.3f} ms a page"
    n_many = many.server_ms_per_page
    if n_many is not None and many.pages:
        # the same with the N-worker run's own CPU a page, crawler's and server's: what
        # sharing the cores cost them (caches, the scheduler) counted in
        shared = min(workers * effective / cores,
                     effective * c / (many.cpu_ms_per_page + n_many))  # fmt: skip
        text += f"; {shared:.2f}x with that run's own {many.cpu_ms_per_page:.3f} + "\
            f"{n_many:.3f} ms a page"
    return text + ")"


def print_ratios(runs: list[CrawlRun]) -> None:
    """The ratios issue 21's "done means" asks for, per web: gossamer's worker counts against
    one worker, gossamer's default against the best Scrapy, and gossamer's one-worker CPU a
    page against the bare loop's."""
    print("\n## ratios (issue 21)\n")
    for web in dict.fromkeys(r.web for r in runs):
        here = [r for r in runs if r.web == web and not r.checks]
        every_round = [
            r for r in here if r.crawler == "gossamer" and "what-if" not in r.config
        ]
        ours = [r for r in every_round if r.round == 0]  # the first round's, one line each
        one = next((r for r in ours if r.config == "1 worker"), None)
        # gossamer's default (one worker per core), else the run with the most workers
        default = next((r for r in ours if r.config.startswith("default")), None)
        if default is None and ours:
            default = max(ours, key=lambda r: r.m.processes)
        scrapy = [r for r in here if r.crawler.startswith("Scrapy")]
        best = max(scrapy, key=lambda r: r.pages_per_s, default=None)
        bare = _fastest(here, "bare loop")
        bare_warc = _fastest(here, "bare loop + WARC")
        lines = []
        if one is not None and one.pages_per_s:
            lines.extend(
                f"gossamer {r.config} / 1 worker: {r.pages_per_s / one.pages_per_s:.2f}x pages/s"
                f"{_fetch_phase(one, r)}{_ceiling(one, r)}"
                for r in ours
                if r is not one
            )
        if default is not None and best is not None and best.pages_per_s:
            lines.append(
                f"gossamer {default.config} / best Scrapy ({best.config.split(',')[0]}): "
                f"{default.pages_per_s / best.pages_per_s:.2f}x pages/s"
            )
        if one is not None and bare is not None and bare.pages:
            lines.append(
                f"gossamer 1 worker CPU a page / bare loop's: "
                f"{one.cpu_ms_per_page / bare.cpu_ms_per_page:.2f}x "
                f"({one.cpu_ms_per_page:.2f} / {bare.cpu_ms_per_page:.2f} ms)"
            )
        if bare is not None and bare_warc is not None and bare.pages:
            lines.append(
                f"bare loop + WARC CPU a page / bare loop's: "
                f"{bare_warc.cpu_ms_per_page / bare.cpu_ms_per_page:.2f}x "
                f"({bare_warc.cpu_ms_per_page:.3f} / {bare.cpu_ms_per_page:.3f} ms: what only "
                "writing WARC costs, before a frontier, robots.txt, a log or a graph)"
            )
        if one is not None and bare_warc is not None and bare_warc.pages:
            lines.append(
                f"gossamer 1 worker CPU a page / bare loop + WARC's: "
                f"{one.cpu_ms_per_page / bare_warc.cpu_ms_per_page:.2f}x"
            )
        print(f"- {web} web: " + ("; ".join(lines) or "nothing to compare (failed checks?)"))
        if len({r.round for r in every_round}) > 1:
            print(_rounds_summary(web, every_round, bare))
    print_done_means(runs)


def _fastest(runs: Sequence[CrawlRun], crawler: str) -> CrawlRun | None:
    """The run of `crawler` (a bare loop's form, with or without WARC) with the least CPU a
    page: its fastest form, e.g. can_ada joins over urljoin when --bare-joins asks for both."""
    return min(
        (r for r in runs if r.crawler == crawler and r.pages),
        key=lambda r: r.cpu_ms_per_page,
        default=None,
    )


def _joins(bare: CrawlRun) -> str:
    """A bare loop's href resolution, from its configuration: "can_ada joins"."""
    return next((part for part in bare.config.split(" + ") if part.endswith(" joins")), "?")


def _check(lines: list[str], text: str, ok: bool, *used: CrawlRun) -> None:
    """One done-means line: PASS when `ok` and none of the runs it reads failed its checks."""
    failed = [f"{r.config}: {'; '.join(r.checks)}" for r in used if r.checks]
    note = f" (checks failed: {' | '.join(failed)})" if failed else ""
    lines.append(f"  - {'PASS' if ok and not failed else 'FAIL'}: {text}{note}")


def print_done_means(runs: list[CrawlRun]) -> None:
    """Issue 30's "done means", per web, each with its figure and PASS or FAIL (printed, never
    asserted): on the few-hosts web each of 2 workers does >= 35 % of the pages, 2 workers do
    >= 1.5x 1 worker's pages/s and >= 0.9x its pages per CPU-second; on the shared-IP and
    default webs 2 workers' pages per CPU-second are >= 0.9x 1 worker's; on every web 1
    worker's CPU a page is <= 1.5x the fastest bare loop's with WARC. Ratios have 3 decimals,
    so a figure next to its threshold shows which side it is on. It reads gossamer's runs of
    the first round, by worker count; a run whose checks failed (audit: coverage 1.000,
    overlap 0, no violation; the graph's edges) fails every line it is in."""
    print("\n## done means (issue 30)\n")
    for web in dict.fromkeys(r.web for r in runs):
        ours = [
            r
            for r in runs
            if r.web == web
            and r.crawler == "gossamer"
            and "what-if" not in r.config
            and r.round == 0
        ]
        one = next((r for r in ours if r.workers == 1), None)
        two = next((r for r in ours if r.workers == 2), None)
        bare_warc = _fastest([r for r in runs if r.web == web], "bare loop + WARC")
        lines: list[str] = []
        check = functools.partial(_check, lines)
        if web == "few-hosts" and two is not None:
            shares = two.worker_shares
            if shares is not None:
                check(
                    "each of 2 workers does >= 35 % of the pages: "
                    + " / ".join(f"{x * 100:.1f} %" for x in shares)
                    + f" ({', '.join(f'{n:,}' for n in two.pages_per_worker or [])} pages)",
                    len(shares) == 2 and min(shares) >= 0.35,
                    two,
                )
            if one is not None and one.pages_per_s:
                ratio = two.pages_per_s / one.pages_per_s
                check(
                    f"2 workers >= 1.5x 1 worker's pages/s: {ratio:.3f}x "
                    f"({two.pages_per_s:,.0f} / {one.pages_per_s:,.0f})",
                    ratio >= 1.5,
                    one,
                    two,
                )
        if one is not None and two is not None:
            ratio = two.pages_per_cpu_s / one.pages_per_cpu_s
            text = (
                f"2 workers' pages per CPU-second{{}} 1 worker's: {ratio:.3f}x "
                f"({two.pages_per_cpu_s:,.0f} / {one.pages_per_cpu_s:,.0f})"
            )
            if web in ("few-hosts", "shared-ip", "default"):
                check(text.format(" >= 0.9x"), ratio >= 0.9, one, two)
            else:  # no target on this web: the figure alone
                lines.append(f"  - (no target) {text.format(' /')}")
        if one is not None and bare_warc is not None:
            ratio = one.cpu_ms_per_page / bare_warc.cpu_ms_per_page
            check(
                f"1 worker's CPU a page <= 1.5x the fastest bare loop + WARC's: {ratio:.3f}x "
                f"({one.cpu_ms_per_page:.3f} / {bare_warc.cpu_ms_per_page:.3f} ms, "
                f"{_joins(bare_warc)})",
                ratio <= 1.5,
                one,
                bare_warc,
            )
        if not lines:
            lines.append("  - nothing to check (needs gossamer with 1 and 2 workers, and bare)")
        print(f"- {web} web:")
        print("\n".join(lines))


def _spread(values: list[float]) -> str:
    """median (min–max, n) of ratios."""
    v = sorted(values)
    mid = len(v) // 2
    median = v[mid] if len(v) % 2 else (v[mid - 1] + v[mid]) / 2
    return f"median {median:.2f}x ({v[0]:.2f}–{v[-1]:.2f}x, {len(v)} rounds)"


def _rounds_summary(web: str, ours: list[CrawlRun], bare: CrawlRun | None) -> str:
    """The ratios of `--gossamer-rounds`, each taken within its round (the runs next to each
    other in time: this machine's speed drifts between minutes), as a median and a range."""
    by_round: dict[int, list[CrawlRun]] = collections.defaultdict(list)
    for r in ours:
        by_round[r.round].append(r)
    parts = []
    for config in dict.fromkeys(r.config for r in ours if r.config != "1 worker"):
        whole, fetch = [], []
        for rs in by_round.values():
            one = next((r for r in rs if r.config == "1 worker"), None)
            many = next((r for r in rs if r.config == config), None)
            if one is None or many is None or not one.pages_per_s:
                continue
            whole.append(many.pages_per_s / one.pages_per_s)
            if (ratio := _fetch_ratio(one, many)) is not None:
                fetch.append(ratio)
        if whole:
            text = f"gossamer {config} / 1 worker: {_spread(whole)}"
            if fetch:
                text += f", from the first fetch to the last {_spread(fetch)}"
            parts.append(text)
    if bare is not None and bare.pages:
        cpu = [r.cpu_ms_per_page / bare.cpu_ms_per_page for r in ours if r.config == "1 worker"]
        if cpu:
            parts.append(f"gossamer 1 worker CPU a page / bare loop's: {_spread(cpu)}")
    return f"- {web} web, over the rounds: " + ("; ".join(parts) or "nothing to compare")


def run_gossamer_cluster(
    work: Path, export: Path, args: argparse.Namespace, *, workers: int
) -> CrawlRun:
    """The same crawl in cluster mode: a redis-server (AOF on, everysec) started for it in the
    work directory, `gossamer crawl --redis URL … --workers N` (N local `gossamer worker`
    processes around the Redis frontier and the Redis IP gate), audited from nginx's log."""
    from gossamer.testweb.redisd import RedisServer

    name = f"cluster-w{workers}"
    out = work / name
    shutil.rmtree(out, ignore_errors=True)
    access = export / "logs" / "access.log"
    _fresh_log(access)
    rdir = work / f"{name}-redis"
    shutil.rmtree(rdir, ignore_errors=True)
    rdir.mkdir()
    with RedisServer(rdir) as server, run_nginx(export):
        cmd = [
            sys.executable,
            "-m",
            "gossamer",
            *gossamer_cmd(out, export / "resolve.txt", args, workers, "--redis", server.url),
        ]
        m = run_measured(cmd, log=work / f"{name}.console", timeout=args.timeout)
        used = server.info_memory()
    log = work / f"{name}.access.log"
    shutil.move(access, log)
    pages = requests = 0
    per_worker = []
    for stats_file in sorted(out.glob("*/stats.json")):
        st = json.loads(stats_file.read_text())
        pages += int(st["pages"])
        requests += int(st["requests"])
        per_worker.append(f"{stats_file.parent.name} {int(st['pages']):,}")
    if not per_worker:
        tail = (work / f"{name}.console").read_text(errors="replace")[-2000:]
        raise RuntimeError(f"cluster crawl failed ({m.returncode}): {tail}")
    run = CrawlRun(
        crawler="gossamer (cluster)",
        config=f"Redis, {workers} worker{'s' if workers > 1 else ''}",
        m=m,
        pages=pages,
        requests=requests,
        urls_seen=0,
    )
    run.notes.append("pages per worker: " + ", ".join(per_worker))
    run.notes.append(f"Redis used_memory at the end: {used / 1e6:.1f} MB")
    if m.returncode != 0 or m.timed_out:
        run.checks.append(f"exit status {m.returncode}{' (timed out)' if m.timed_out else ''}")
    # every worker's directory has the crawl's rules (crawl.json): the audit reads the first
    rules = ["--crawl", str(sorted(out.glob("*/stats.json"))[0].parent)]
    rules += ["--per-ip-limit", str(args.per_ip)]
    run.audit = run_audit(
        log, export / "web.json", work / f"{name}.audit.json", rules, work / f"{name}.audit.txt"
    )
    a = run.audit["pages"]
    if a["coverage"] != 1.0:
        run.checks.append(f"coverage {a['coverage']:.4f} (must be 1.000)")
    if a["overlap"] != 0:
        run.checks.append(f"overlap {a['overlap']:.4f} (must be 0)")
    if not run.audit["ok"]:
        run.checks.append(f"audit verdict not OK: {run.audit['violation_count']} violations")
    return run


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--seed", type=int, default=1, help="web seed")
    p.add_argument("--hosts", type=int, default=400, help="hosts (400: 20,788 pages)")
    p.add_argument("--pages-mean", type=float, default=50.0)
    p.add_argument("--robots-disallow", type=float, default=0.3)
    p.add_argument("--concurrency", type=int, default=64, help="requests in flight in all")
    p.add_argument(
        "--gossamer-workers",
        default="1,0",
        help="gossamer runs, by --workers (0: gossamer's default, one per core)",
    )
    p.add_argument(
        "--gossamer-rounds",
        type=int,
        default=1,
        help="run the gossamer worker counts this many times, alternating (1, 2, 1, 2, ...): "
        "the ratios are then the median of the rounds, with their range",
    )
    p.add_argument(
        "--split-concurrency",
        action="store_true",
        help="give an N-worker run --concurrency/N per worker: the same requests in flight in "
        "all as one worker (--concurrency is per worker; with --per-ip at --concurrency, N "
        "workers at full concurrency make the IP the limit)",
    )
    p.add_argument(
        "--gossamer-extract",
        metavar="SPEC",
        help="run each gossamer crawl again with --extract SPEC (bench/ on PYTHONPATH: "
        "bench_title:title reads each page's title) and print what it costs in pages/s",
    )
    p.add_argument(
        "--live-graph-cost",
        action="store_true",
        help="run each gossamer crawl with --no-live-graph and --live-graph in turn (the "
        "order swapped every round; use --gossamer-rounds 3 or more) and print what the live "
        "graph costs in pages/s, median and range, against issue 33's ceiling",
    )
    p.add_argument(
        "--live-graph-baseline",
        type=Path,
        metavar="SRC",
        help="with --live-graph-cost: also run --live-graph with the gossamer package of SRC "
        "first on PYTHONPATH (the src/ of an earlier commit, e.g. `git archive COMMIT src | "
        "tar -x -C /tmp/base`), in each round beside the others: the cost before and after",
    )
    p.add_argument(
        "--gossamer-also",
        metavar="FLAGS",
        help="run each gossamer crawl again with these flags, beside it (the order swapped "
        "every round; the ratios of pages/s and CPU a page, same round: "
        "'--near-dup-links off' measures near-duplicate detection, on by default, "
        "'--no-dedup-payloads' the revisit records), audited the same way",
    )
    p.add_argument("--nginx-workers", type=int, default=1)
    p.add_argument(
        "--scrapy-seconds", type=float, default=45.0, help="stop Scrapy after S s (0: never)"
    )
    p.add_argument("--scrapy-pages", type=int, default=0, help="stop Scrapy after N pages")
    p.add_argument("--timeout", type=float, default=150.0, help="seconds per crawl at most")
    p.add_argument(
        "--only",
        default="gossamer,scrapy,scrapy-plain,bare",
        help="crawlers: gossamer, scrapy (CrawlSpider), scrapy-plain (tuned Spider), bare "
        "(pycurl + selectolax loop), comma-separated (or none)",
    )
    p.add_argument(
        "--webs",
        default="default",
        help="webs, comma-separated: default (400 hosts, 1 seed, per_ip 1), shared-ip (200 "
        "hosts x 101 pages on one IP), few-hosts (60 hosts x 251 pages on one IP), link-heavy "
        "(200 hosts x 100 pages on one IP, ~31 links a page, all to other hosts)",
    )
    p.add_argument(
        "--shared-ip",
        action="store_true",
        help="the shared-IP web only (= --webs shared-ip): every host on one IP",
    )
    p.add_argument("--shared-hosts", type=int, default=200, help="shared-IP web: hosts")
    p.add_argument("--shared-pages", type=int, default=101, help="shared-IP web: pages a host")
    p.add_argument(
        "--shared-per-ip",
        type=int,
        default=64,
        help="the one-IP webs (shared-ip, few-hosts, link-heavy): gossamer's --per-ip",
    )
    p.add_argument("--few-hosts", type=int, default=60, help="few-hosts web: hosts")
    p.add_argument(
        "--few-pages", type=int, default=251, help="few-hosts web: pages a host (every host)"
    )
    p.add_argument("--heavy-hosts", type=int, default=200, help="link-heavy web: hosts")
    p.add_argument("--heavy-pages", type=int, default=100, help="link-heavy web: pages a host")
    p.add_argument(
        "--heavy-links", type=float, default=31.0, help="link-heavy web: links a page (mean)"
    )
    p.add_argument(
        "--heavy-locality",
        type=float,
        default=0.0,
        help="link-heavy web: share of links to the same host (0: every link to another host)",
    )
    p.add_argument(
        "--heavy-page-bytes", type=int, default=15_000, help="link-heavy web: bytes a page (mean)"
    )
    p.add_argument(
        "--scrapy-concurrent-items",
        type=int,
        default=4,
        help="CONCURRENT_ITEMS of the tuned plain Spider",
    )
    p.add_argument("--profile", action="store_true", help="py-spy profile of a gossamer crawl")
    p.add_argument("--profile-rate", type=int, default=250)
    p.add_argument("--profile-top", type=int, default=25)
    p.add_argument("--experiments", action="store_true", help="gossamer what-if runs")
    p.add_argument("--pipeline", action="store_true", help="per-page steps, in process")
    p.add_argument("--pipeline-pages", type=int, default=4000)
    p.add_argument(
        "--bare-joins",
        default="can_ada",
        help="the bare loop's href resolution, comma-separated: can_ada (the fastest form), "
        "urljoin (urllib.parse); the ratios take the fastest bare loop of the web",
    )
    p.add_argument("--workdir", type=Path, help="keep everything here (default: a temp dir)")
    p.add_argument(
        "--cluster",
        default="",
        metavar="N[,N]",
        help="also crawl in cluster mode (Redis) with N local workers each, e.g. 1,2",
    )
    args = p.parse_args(argv)
    parts = set(args.only.split(","))
    webs = ["shared-ip"] if args.shared_ip else args.webs.split(",")
    if bad := [w for w in webs if w not in WEBS]:
        p.error(f"unknown web {bad[0]!r}: choose from {', '.join(WEBS)}")
    if bad := sorted(parts - {"gossamer", "scrapy", "scrapy-plain", "bare", "none"}):
        p.error(f"unknown crawler {bad[0]!r} in --only")
    if bad := sorted(set(args.bare_joins.split(",")) - {"can_ada", "urljoin"}):
        p.error(f"unknown --bare-joins {bad[0]!r}: choose from can_ada, urljoin")

    print("# gossamer crawl benchmark")
    print(
        f"  machine {os.cpu_count()} CPUs, Python {sys.version.split()[0]}, "
        f"load {' '.join(f'{x:.2f}' for x in os.getloadavg())}"
    )
    if os.getloadavg()[0] > 0.5:
        print("  warning: the machine is busy (load above 0.5): figures will be low")
    global PARALLEL
    PARALLEL = parallel_speedup()
    print(
        f"  {os.cpu_count()} CPU-bound processes at once do {PARALLEL:.2f}x the work of one "
        "(a pure-Python loop; a VM's vCPUs may share a core's caches or the host's time)"
    )
    runs: list[CrawlRun] = []
    with _workdir(args.workdir) as work:
        for web in webs:
            runs += bench_web(web, parts, args, work / web)
    if runs:
        print_table(runs)
        print_ratios(runs)
    bad_runs = [r for r in runs if r.crawler == "gossamer" and r.audit and r.checks]
    return 1 if bad_runs else 0


#: The webs: "default", today's (400 hosts, one seed, 1 request per IP); "shared-ip",
#: issue 21's (every host on one IP, most links to other hosts, every root a seed); and issue
#: 30's "few-hosts" (60 hosts of 251 pages on one IP: fewer hosts than concurrency x workers,
#: where a pool's workers must share hosts) and "link-heavy" (200 hosts of 100 pages on one
#: IP, ~15 KB pages of ~31 absolute links, every one to a page of another host).
WEBS = ("default", "shared-ip", "few-hosts", "link-heavy")

#: The webs whose every host is on one IP and whose every root is a seed (per_ip: --shared-per-ip)
ONE_IP_WEBS = ("shared-ip", "few-hosts", "link-heavy")


def web_spec(web: str, args: argparse.Namespace) -> WebSpec:
    robots = (("robots_disallow", args.robots_disallow),)
    if web == "few-hosts":
        # pages_mean far above the cap: every host has the cap (60 x 251 = 15,060 pages)
        return WebSpec(
            seed=args.seed,
            hosts=args.few_hosts,
            pages_mean=1000.0,
            pages_max=args.few_pages,
            max_ips=1,
            overrides=robots,
        )
    if web == "link-heavy":
        # every host at the cap (200 x 100 pages); locality 0: every link to another host;
        # the clean profile writes every href absolute
        return WebSpec(
            seed=args.seed,
            hosts=args.heavy_hosts,
            pages_mean=1000.0,
            pages_max=args.heavy_pages,
            outdegree_mean=args.heavy_links,
            locality=args.heavy_locality,
            page_bytes_mean=args.heavy_page_bytes,
            max_ips=1,
            overrides=robots,
        )
    if web == "shared-ip":
        # 200 hosts x 101 pages: pages_mean far above the cap, so every host has the cap;
        # locality 0.2: 4 in 5 links go to another host (of the same IP)
        return WebSpec(
            seed=args.seed,
            hosts=args.shared_hosts,
            pages_mean=1000.0,
            pages_max=args.shared_pages,
            locality=0.2,
            max_ips=1,
            overrides=robots,
        )
    return WebSpec(seed=args.seed, hosts=args.hosts, pages_mean=args.pages_mean, overrides=robots)


def bench_web(web: str, parts: set[str], args: argparse.Namespace, work: Path) -> list[CrawlRun]:
    """Every crawler asked for on one web; `args` carries the web's seeds and limits."""
    work.mkdir(parents=True, exist_ok=True)
    spec = web_spec(web, args)
    model = model_for(spec)
    args.web_name = web
    if web in ONE_IP_WEBS:
        args.seeds = [f"http://{h.name}/" for h in model.hosts]
        args.per_ip = args.shared_per_ip
        args.scrapy_slot = "host"  # one request per host, the concurrency in all (<= per_ip)
        limits = f"every host's root a seed, per_ip {args.per_ip}, 1 request per host"
    else:
        args.seeds = [SEED_URL]
        args.per_ip = 1
        args.scrapy_slot = "ip"
        limits = f"seed {SEED_URL}, 1 request per IP"
    print(f"\n# web: {web}")
    print(
        f"  web     seed {spec.seed}, {len(model.hosts)} hosts, {len(model.ips())} IPs, "
        f"{model.total_pages:,} pages, clean profile + robots_disallow={args.robots_disallow}"
        + (
            f", locality {spec.locality:g}, {spec.outdegree_mean:g} links a page (mean), "
            f"{spec.page_bytes_mean:,} B a page (mean)"
            if web in ONE_IP_WEBS
            else ""
        )
    )
    print(
        f"  limits  {limits}, scope all, robots obeyed, delay 0 (the simulated web asks "
        f"for none), {args.concurrency} in flight"
    )
    runs: list[CrawlRun] = []
    export = work / "export"
    crawlers = {"gossamer", "scrapy", "scrapy-plain", "bare"}
    if parts & crawlers or args.profile or args.experiments or args.cluster:
        s = export_web(model, export, port=free_port(), workers=args.nginx_workers)
        print(
            f"  export  {s.pages:,} pages, {s.bytes / 1e6:.0f} MB in {s.seconds:.1f} s "
            f"({export}), nginx {args.nginx_workers} worker(s)"
        )
    main_run: CrawlRun | None = None  # the one-worker run: the profile's yardstick
    if "gossamer" in parts:
        truth = compute_truth(
            model, TruthRules(seeds=tuple(args.seeds), scope="all", user_agent="gossamer")
        )
        rounds = max(1, args.gossamer_rounds)
        for rnd, workers in (
            (r, int(w)) for r in range(rounds) for w in args.gossamer_workers.split(",")
        ):
            label = (
                f"{workers} worker{'s' if workers > 1 else ''}"
                if workers
                else f"default workers (one per core: {os.cpu_count()})"
            )
            n = workers or os.cpu_count() or 1
            split: list[str] = []
            if args.split_concurrency and n > 1:
                split = ["--concurrency", str(max(1, args.concurrency // n))]
                label += f" x concurrency {split[1]}"
            of = f", round {rnd + 1} of {rounds}" if rounds > 1 else ""
            variants: list[tuple[str, list[str]]] = [("", [])]
            if args.live_graph_cost:  # off and on in turn, the order swapped every round
                variants = [(" " + LIVE_OFF, [LIVE_OFF]), (" " + LIVE_ON, [LIVE_ON])]
                if args.live_graph_baseline:
                    variants.append((" " + LIVE_ON + BASELINE, [LIVE_ON]))
                if rnd % 2:
                    variants.reverse()
            if args.gossamer_extract:  # the same crawl with an extractor, right after
                variants.append((" + --extract", ["--extract", args.gossamer_extract]))
            if args.gossamer_also:  # the same crawl with other flags, the order swapped
                variants.append((f" + {args.gossamer_also}", shlex.split(args.gossamer_also)))
                if rnd % 2:  # every round (the two crawls in turn: the load shared alike)
                    variants[-2:] = variants[-1:-3:-1]
            for suffix, extract in variants:
                env = _bench_path_env() if suffix == " + --extract" else None
                if suffix.endswith(BASELINE):  # the baseline's sources first
                    env = dict(env or os.environ)
                    env["PYTHONPATH"] = os.pathsep.join(
                        [str(args.live_graph_baseline), *filter(None, [env.get("PYTHONPATH")])]
                    )
                print(
                    f"\n## gossamer, {label}{suffix}{of} (WARC + graph on, audited)", flush=True
                )
                run = run_gossamer(
                    work,
                    export,
                    args,
                    name=f"gossamer-w{workers}"
                    + _variant_tag(suffix, extract)
                    + (f"-r{rnd + 1}" if rounds > 1 else ""),
                    config=label + suffix,
                    workers=workers,
                    extra=[*split, *extract],
                    env=env,
                    truth=truth,
                )
                run.web = web
                run.round = rnd
                describe(run)
                runs.append(run)
                if workers == 1 and main_run is None:
                    main_run = run
        if args.gossamer_extract:
            _extract_costs(runs)
        if args.live_graph_cost:
            _live_graph_costs(runs)
        if args.gossamer_also:
            _also_costs(runs, f" + {args.gossamer_also}")
    cluster_runs: list[CrawlRun] = []
    for n in (int(w) for w in args.cluster.split(",") if w.strip()):
        print(f"\n## gossamer cluster mode, {n} worker(s) (Redis, audited)", flush=True)
        run = run_gossamer_cluster(work, export, args, workers=n)
        run.web = web
        describe(run)
        runs.append(run)
        cluster_runs.append(run)
    if len(cluster_runs) > 1:
        base = cluster_runs[0]
        for r in cluster_runs[1:]:
            print(
                f"  scaling {r.config} / {base.config}: "
                f"{r.pages_per_s / base.pages_per_s:.2f}x pages/s"
            )
    for spider, part, title in (
        ("crawl", "scrapy", "Scrapy CrawlSpider"),
        ("plain", "scrapy-plain", "Scrapy plain Spider, tuned"),
    ):
        if part in parts:
            print(f"\n## {title} (same limits)", flush=True)
            sr = run_scrapy(work, export, args, spider)
            if sr is not None:
                sr.web = web
                describe(sr)
                runs.append(sr)
    if "bare" in parts:
        for joins in args.bare_joins.split(","):
            print(f"\n## bare loop (pycurl + selectolax + {joins}: the floor)", flush=True)
            br = run_bare(work, export, args, joins=joins)
            describe(br)
            runs.append(br)
            print(
                f"\n## bare loop + WARC ({joins}; the floor of a crawler that archives)",
                flush=True,
            )
            br = run_bare(work, export, args, warc=True, joins=joins)
            describe(br)
            runs.append(br)
    if args.experiments:
        print("\n## gossamer what-if runs, 1 worker (not audited)", flush=True)
        gc_entry = [  # `python -c CODE crawl …`: sys.argv[1:] are the crawl arguments
            "-c",
            "import gc, sys; gc.freeze(); gc.set_threshold(50000, 50, 1000); "
            "from gossamer.cli import main; sys.exit(main(sys.argv[1:]))",
        ]
        variants: list[tuple[str, dict[str, Any]]] = [
            (
                "MALLOC_TRIM_THRESHOLD_=256 MiB",
                {"env": {"MALLOC_TRIM_THRESHOLD_": "268435456"}},
            ),
            ("gc.freeze + thresholds 50000/50/1000", {"entry": gc_entry}),
            ("--no-warc", {"extra": ["--no-warc"]}),
        ]
        for i, (label, kw) in enumerate(variants):
            if "env" in kw:
                kw["env"] = {**os.environ, **kw["env"]}
            r = run_gossamer(
                work,
                export,
                args,
                name=f"whatif-{i}",
                config=f"1 worker, {label} (what-if)",
                check=False,
                **kw,
            )
            r.web = web
            describe(r)
            runs.append(r)
    if args.pipeline:
        bench_pipeline(model, work, args.pipeline_pages)
    if args.profile:
        per_page = None
        if main_run is not None and main_run.pages:
            busiest = max(main_run.m.thread_cpu.values(), default=main_run.m.cpu_s)
            per_page = busiest / main_run.pages * 1e6
        profile_gossamer(work, export, args, per_page)
    return runs


if __name__ == "__main__":
    sys.exit(main())
