"""How long trickling pages hold their IP, with and without the low-speed cut.

    .venv/bin/python bench/bench_trickle.py                      # cut on (defaults), ~2 min
    .venv/bin/python bench/bench_trickle.py --low-speed-limit 0  # cut off, ~8 min

The web of tests/e2e/test_crawl_polite.py: 6 hosts on ONE address (seed 3, 67 pages), 4 of
the pages trickled at ~15 bytes/s (`trickle_s` 1000). Crawled with the default settings
(per_ip 1, time-outs, low_speed_limit 100 bytes/s for 30 s) but delay 0; prints the wall time,
the outcomes and how long each cut or timed-out page took.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from collections import Counter
from pathlib import Path

from gossamer.config import load_settings
from gossamer.runner.run import run_crawl
from gossamer.testweb import WebSpec, serve_in_thread


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--low-speed-limit", type=int, default=100, help="bytes/s (100; 0: off)")
    args = ap.parse_args()
    spec = WebSpec(
        seed=3, hosts=6, pages_mean=10, max_ips=1,
        overrides=(("trickle", 0.08), ("trickle_s", 1000.0)),
    )  # fmt: skip
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        out = tmp / "crawl"
        with serve_in_thread(spec) as web:
            resolve = web.write_resolve_file(tmp / "resolve.txt")
            settings = load_settings(
                {
                    "seeds": [web.url(0, 0)],
                    "output": out,
                    "scope": "all",
                    "resolve_file": resolve,
                    "allow_private": True,
                    "delay": 0.0,
                    "low_speed_limit": args.low_speed_limit,
                }
            )
            began = time.monotonic()
            rc = run_crawl(settings)
            wall = time.monotonic() - began
        lines = [json.loads(x) for x in (out / "crawl.log.jsonl").read_text().splitlines()]
    slow = [round(x["duration"], 1) for x in lines if x["outcome"].startswith("fetch/error/t")]
    print(
        json.dumps(
            {
                "low_speed_limit": args.low_speed_limit,
                "exit": rc,
                "wall_s": round(wall, 1),
                "outcomes": Counter(x["outcome"] for x in lines),
                "cut_or_timed_out_s": slow,
            }
        )
    )


if __name__ == "__main__":
    main()
