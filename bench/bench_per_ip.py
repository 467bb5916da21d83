"""What `per_ip` costs when many hosts share one IP (shared hosting, a CDN).

    .venv/bin/python bench/bench_per_ip.py                 # per_ip 1, 4 and 24; about 4 min
    .venv/bin/python bench/bench_per_ip.py --per-ip 1,2    # other values

The web: 24 hosts of ~10 pages on ONE address (`max_ips=1`), 20 ms latency a request (a
small dynamic site), served by the simulated web on loopback. Each run crawls it with the
default delay (1.0 s between two requests to a host) until `--max-pages` pages, and prints
pages/s, the wall time and the audit's politeness verdict (host delay and per-IP concurrency
against the run's own per_ip). A host keeps its IP slot for its whole bucket (up to `per_host`
URLs over one connection, its delay between them), so with per_ip = 1 the IP serves one
request per host delay: ~1 page/s, whatever the number of hosts behind it.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from gossamer.config import load_settings
from gossamer.runner.run import run_crawl
from gossamer.testweb import TruthRules, WebSpec, audit, read_logs, serve_in_thread

UA = "gossamer-bench/0.1"


def one(per_ip: int, max_pages: int, tmp: Path) -> None:
    spec = WebSpec(seed=7, hosts=24, pages_mean=10, max_ips=1, overrides=(("latency_ms", 20.0),))
    log = tmp / f"web-{per_ip}.log"
    out = tmp / f"crawl-{per_ip}"
    with serve_in_thread(spec, log_path=log) as web:
        resolve = web.write_resolve_file(tmp / f"resolve-{per_ip}.txt")
        # seeds: every host's home page, so every host has work from the start
        seeds = [web.url(h.id, 0) for h in web.model.hosts]
        settings = load_settings(
            {
                "seeds": seeds,
                "output": out,
                "scope": "all",
                "resolve_file": resolve,
                "allow_private": True,
                "user_agent": UA,
                "per_ip": per_ip,
                "max_pages": max_pages,
                "workers": 1,
            }
        )
        began = time.monotonic()
        assert run_crawl(settings) == 0
        wall = time.monotonic() - began
        web.flush_log()
    records = read_logs([log]).records
    rules = TruthRules(seeds=tuple(seeds), scope="all", user_agent=UA)
    report = audit(web.model, records, rules, min_delay=1.0, per_ip_limit=per_ip)
    pages = sum(1 for r in records if r.target != "/robots.txt")
    # the server's view: first request to last response (no process start-up or output writing)
    span = (max(r.end_us for r in records) - min(r.start_us for r in records)) / 1e6
    print(
        f"per_ip {per_ip:>2}: {pages} page requests; wall {wall:6.1f} s = {pages / wall:5.2f} "
        f"pages/s; served over {span:6.1f} s = {pages / span:5.2f} pages/s; politeness "
        f"violations {report.politeness_violations}",
        flush=True,
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--per-ip", default="1,4,24", help="comma-separated values (1,4,24)")
    ap.add_argument("--max-pages", type=int, default=200, help="pages per run (200)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        for value in (int(v) for v in args.per_ip.split(",")):
            one(value, args.max_pages, Path(d))


if __name__ == "__main__":
    main()
