"""HTTP clients for crawling, measured: gossamer's CurlFetcher against aiohttp (and raw pycurl).

    .venv/bin/python bench/bench_fetch.py                      # all clients, about a minute
    .venv/bin/python bench/bench_fetch.py --clients curl-uvloop,aiohttp-uvloop --repeat 3
    .venv/bin/python bench/bench_fetch.py --pages 5000

A clean simulated web (400 hosts, ~21k pages of ~17 KB) is exported and served by nginx on
loopback (`gossamer testweb export`); every client fetches the same shuffled list of every page
once, 64 requests in flight, at most 8 per host, keep-alive, each in its own process. Printed
per client: pages/s, µs of CPU per request in the client process (user + system, from
getrusage: nginx's CPU is not in it), peak RSS, the connections nginx saw (from its access log)
and a check that every answer was a 200 with the exported bytes. aiohttp is needed only here
(`.venv/bin/pip install aiohttp`); the clients it does not find are skipped. Figures are
printed, never asserted; docs/crawler/fetch.md records them.

Clients:
- curl-uvloop / curl-asyncio: `gossamer.fetch.CurlFetcher` (FetchResult with headers, heads,
  decoded body) on uvloop / the default asyncio loop;
- aiohttp-uvloop / aiohttp-asyncio: aiohttp ClientSession (TCPConnector limit_per_host=8, a
  resolver mapping the web's hosts like curl's --connect-to), `await resp.read()`;
- pycurl-raw: a bare CurlMulti + select loop with no asyncio and no result objects: the floor
  that CurlFetcher's asyncio glue adds to.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import random
import resource
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

CLIENTS = ("curl-uvloop", "curl-asyncio", "aiohttp-uvloop", "aiohttp-asyncio", "pycurl-raw")
CONCURRENCY = 64
PER_HOST = 8


# ---------------------------------------------------------------------------- client side
def _host_of(url: str) -> str:
    return url.split("/", 3)[2]


def _load_rules(resolve_lines: list[str]) -> dict[str, tuple[str, int]]:
    """`HOST:80:IP:PORT` lines → {host: (ip, port)}."""
    rules = {}
    for line in resolve_lines:
        host, _, ip, port = line.strip().split(":")
        rules[host] = (ip, int(port))
    return rules


async def _drive(
    urls: list[str], fetch: Callable[[str], Awaitable[tuple[int, int]]]
) -> Counter[Any]:
    """Fetch every URL: CONCURRENCY workers, at most PER_HOST in flight per host."""
    it = iter(urls)
    host_sems: dict[str, asyncio.Semaphore] = {}
    tally: Counter[Any] = Counter()

    async def worker() -> None:
        for url in it:
            host = _host_of(url)
            sem = host_sems.get(host)
            if sem is None:
                sem = host_sems[host] = asyncio.Semaphore(PER_HOST)
            async with sem:
                status, size = await fetch(url)
            tally[status] += 1
            tally["bytes"] += size

    async with asyncio.TaskGroup() as tg:
        for _ in range(CONCURRENCY):
            tg.create_task(worker())
    return tally


async def _run_curl(urls: list[str], resolve_lines: list[str]) -> Counter[Any]:
    from gossamer.fetch import CurlFetcher, FetchRequest, Resolver

    resolver = Resolver(resolve_lines, allow_private=True)
    fetcher = CurlFetcher(resolver=resolver, max_connections=1024)

    async def fetch(url: str) -> tuple[int, int]:
        r = await fetcher.fetch(FetchRequest(url))
        return (r.status or 0) if r.error is None else r.error, len(r.body)  # type: ignore[return-value]

    try:
        return await _drive(urls, fetch)
    finally:
        await fetcher.aclose()


async def _run_aiohttp(urls: list[str], resolve_lines: list[str]) -> Counter[Any]:
    import aiohttp
    from aiohttp.abc import AbstractResolver, ResolveResult

    rules = _load_rules(resolve_lines)

    class MapResolver(AbstractResolver):
        async def resolve(
            self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
        ) -> list[ResolveResult]:
            ip, real_port = rules[host]
            return [
                ResolveResult(
                    hostname=host, host=ip, port=real_port, family=socket.AF_INET, proto=0,
                    flags=socket.AI_NUMERICHOST,
                )
            ]  # fmt: skip

        async def close(self) -> None:
            return None

    connector = aiohttp.TCPConnector(
        limit=0, limit_per_host=PER_HOST, resolver=MapResolver(), ttl_dns_cache=None
    )
    timeout = aiohttp.ClientTimeout(total=60, connect=10)
    headers = {"User-Agent": "bench/1", "Accept-Encoding": "gzip, deflate, br"}
    async with aiohttp.ClientSession(connector=connector, timeout=timeout, headers=headers) as s:

        async def fetch(url: str) -> tuple[int, int]:
            try:
                async with s.get(url, allow_redirects=False) as resp:
                    body = await resp.read()
                    return resp.status, len(body)
            except (aiohttp.ClientError, TimeoutError) as exc:
                return type(exc).__name__, 0  # type: ignore[return-value]

        return await _drive(urls, fetch)


def _run_pycurl_raw(urls: list[str], lines: list[str]) -> Counter[Any]:
    import pycurl

    multi = pycurl.CurlMulti()
    multi.setopt(pycurl.M_MAXCONNECTS, 1024)
    free = []
    for _ in range(CONCURRENCY):
        c = pycurl.Curl()
        c.setopt(pycurl.CONNECT_TO, lines)
        c.setopt(pycurl.ACCEPT_ENCODING, "gzip, deflate, br")
        c.setopt(pycurl.NOSIGNAL, 1)
        free.append(c)
    tally: Counter[Any] = Counter()
    waiting: list[str] = list(reversed(urls))
    blocked: list[str] = []
    per_host: Counter[str] = Counter()
    bufs: dict[Any, tuple[list[bytes], str]] = {}

    def start() -> None:
        while free and waiting:
            url = waiting.pop()
            host = _host_of(url)
            if per_host[host] >= PER_HOST:
                blocked.append(url)
                continue
            per_host[host] += 1
            c = free.pop()
            chunks: list[bytes] = []
            c.setopt(pycurl.URL, url)
            c.setopt(pycurl.WRITEFUNCTION, chunks.append)
            bufs[c] = (chunks, host)
            multi.add_handle(c)

    def done(c: Any, status: Any) -> None:
        chunks, host = bufs.pop(c)
        per_host[host] -= 1
        tally[status] += 1
        tally["bytes"] += sum(map(len, chunks))
        multi.remove_handle(c)
        free.append(c)

    start()
    while bufs:
        while multi.perform()[0] == pycurl.E_CALL_MULTI_PERFORM:
            pass
        while True:
            queued, ok, failed = multi.info_read()
            for c in ok:
                done(c, c.getinfo(pycurl.RESPONSE_CODE))
            for c, code, _msg in failed:
                done(c, f"curl{code}")
            if not queued:
                break
        if blocked:
            waiting.extend(reversed(blocked))
            blocked.clear()
        start()
        if bufs:
            multi.select(1.0)
    multi.close()
    return tally


def run_client(name: str, urls_file: Path, resolve_file: Path) -> dict[str, Any]:
    """One client over every URL in this process; returns the figures."""
    urls = urls_file.read_text().split()
    resolve_lines = resolve_file.read_text().split()
    loop_factory: Callable[[], asyncio.AbstractEventLoop] | None = None
    if name.endswith("-uvloop"):
        import uvloop

        loop_factory = uvloop.new_event_loop
    # imports outside the measured window
    __import__("pycurl" if "curl" in name else "aiohttp")
    if name.startswith("curl-"):
        import gossamer.fetch  # noqa: F401
    r0 = resource.getrusage(resource.RUSAGE_SELF)
    t0 = time.perf_counter()
    if name.startswith("curl-"):
        with asyncio.Runner(loop_factory=loop_factory) as runner:
            tally = runner.run(_run_curl(urls, resolve_lines))
    elif name.startswith("aiohttp-"):
        with asyncio.Runner(loop_factory=loop_factory) as runner:
            tally = runner.run(_run_aiohttp(urls, resolve_lines))
    elif name == "pycurl-raw":
        tally = _run_pycurl_raw(urls, resolve_lines)
    else:
        raise SystemExit(f"unknown client {name}")
    wall = time.perf_counter() - t0
    r1 = resource.getrusage(resource.RUSAGE_SELF)
    cpu = (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
    return {
        "client": name,
        "requests": len(urls),
        "wall_s": wall,
        "cpu_s": cpu,
        "user_s": r1.ru_utime - r0.ru_utime,
        "sys_s": r1.ru_stime - r0.ru_stime,
        "max_rss_mb": r1.ru_maxrss / 1024,
        "tally": {str(k): v for k, v in tally.items()},
    }


# ---------------------------------------------------------------------------- orchestration
def _available(name: str) -> bool:
    mods = {"curl": "pycurl", "pycurl": "pycurl", "aiohttp": "aiohttp"}
    need = [mods[name.split("-")[0]]] + (["uvloop"] if name.endswith("-uvloop") else [])
    for mod in need:
        try:
            __import__(mod)
        except ImportError:
            return False
    return True


def _connections_in_log(log: Path, offset: int) -> tuple[int, int]:
    """(requests, distinct connections) in nginx's access log after byte `offset`."""
    conns = set()
    n = 0
    with log.open("rb") as f:
        f.seek(offset)
        for line in f:
            fields = line.split(b"\t")
            if len(fields) > 3:
                conns.add(fields[2])
                n += 1
    return n, len(conns)


@contextlib.contextmanager
def _workdir() -> Iterator[Path]:
    shm = Path("/dev/shm")
    base = None
    with contextlib.suppress(OSError):
        if shm.is_dir() and shutil.disk_usage(shm).free > 2 * 1024**3:
            base = str(shm)
    d = Path(tempfile.mkdtemp(prefix="gossamer-bench-fetch-", dir=base))
    try:
        yield d
    finally:
        shutil.rmtree(d, ignore_errors=True)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--hosts", type=int, default=400, help="hosts of the clean web (400: ~21k)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--pages", type=int, default=0, help="fetch this many pages (0: all)")
    p.add_argument("--clients", default=",".join(CLIENTS))
    p.add_argument("--repeat", type=int, default=2, help="runs per client; the best is kept")
    p.add_argument("--nginx-workers", type=int, default=1)
    p.add_argument("--run-client", help=argparse.SUPPRESS)
    p.add_argument("--urls", type=Path, help=argparse.SUPPRESS)
    p.add_argument("--resolve", type=Path, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.run_client:  # child process: one client, figures as JSON on stdout
        print(json.dumps(run_client(args.run_client, args.urls, args.resolve)))
        return 0

    from gossamer.testweb import WebSpec, model_for
    from gossamer.testweb._export import export_web
    from gossamer.testweb._nginx import run_nginx

    clients = [c for c in args.clients.split(",") if c]
    for c in clients:
        if c not in CLIENTS:
            p.error(f"unknown client {c}; known: {', '.join(CLIENTS)}")
    model = model_for(WebSpec(seed=args.seed, hosts=args.hosts))
    urls = [model.page_url(h.id, i) for h in model.hosts for i in range(h.pages)]
    random.Random(args.seed).shuffle(urls)
    if args.pages:
        urls = urls[: args.pages]
    print("# gossamer fetch benchmark")
    print(f"  machine  {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.2f}")
    print(f"  web      {len(model.hosts)} hosts, {model.total_pages} pages (clean), nginx "
          f"{args.nginx_workers} worker(s)")  # fmt: skip
    print(f"  load     {len(urls)} pages per run, {CONCURRENCY} in flight, <= {PER_HOST} per "
          f"host, keep-alive; best of {args.repeat}")  # fmt: skip
    results: list[dict[str, Any]] = []
    with _workdir() as work:
        export = work / "export"
        t0 = time.perf_counter()
        summary = export_web(model, export, port=_free_port(), workers=args.nginx_workers)
        print(f"  export   {summary.pages} pages in {time.perf_counter() - t0:.1f} s ({export})")
        urls_file = work / "urls.txt"
        urls_file.write_text("\n".join(urls) + "\n")
        resolve_file = export / "resolve.txt"
        expected_bytes = sum(
            (export / "sites" / _host_of(u) / (u.split("/", 3)[3] or "index.html")).stat().st_size
            for u in urls
        )
        with run_nginx(export) as ng:
            log = ng.access_log
            for name in clients:
                if not _available(name):
                    print(f"  {name}: skipped (not installed)")
                    continue
                best: dict[str, Any] | None = None
                for _ in range(args.repeat):
                    offset = log.stat().st_size if log else 0
                    out = subprocess.run(
                        [sys.executable, __file__, "--run-client", name, "--urls",
                         str(urls_file), "--resolve", str(resolve_file)],
                        capture_output=True, text=True, timeout=900, check=False,
                    )  # fmt: skip
                    if out.returncode != 0:
                        print(f"  {name}: failed\n{out.stderr[-3000:]}")
                        break
                    r = json.loads(out.stdout.strip().splitlines()[-1])
                    time.sleep(0.3)  # nginx writes its log line after the response
                    if log:
                        r["server_requests"], r["connections"] = _connections_in_log(log, offset)
                    ok = r["tally"].get("200", 0)
                    r["correct"] = ok == len(urls) and r["tally"].get("bytes") == expected_bytes
                    print(f"  {name:16s} {len(urls) / r['wall_s']:8,.0f} pages/s "
                          f"{r['cpu_s'] / len(urls) * 1e6:6.1f} µs CPU/req  "
                          f"rss {r['max_rss_mb']:.0f} MB  conns {r.get('connections', '?')}  "
                          f"{'ok' if r['correct'] else 'WRONG ' + str(r['tally'])}")  # fmt: skip
                    if best is None or r["wall_s"] < best["wall_s"]:
                        best = r
                if best is not None:
                    results.append(best)
    print("\n| client | pages/s | µs CPU / request | user / sys s | peak RSS MB | connections "
          "| all 200, bytes equal |")  # fmt: skip
    print("|---|---:|---:|---:|---:|---:|---|")
    for r in results:
        n = r["requests"]
        print(f"| {r['client']} | {n / r['wall_s']:,.0f} | {r['cpu_s'] / n * 1e6:.1f} | "
              f"{r['user_s']:.2f} / {r['sys_s']:.2f} | {r['max_rss_mb']:.0f} | "
              f"{r.get('connections', '?')} | {'yes' if r['correct'] else 'NO'} |")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
