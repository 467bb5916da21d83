"""The `two_run_crawl` fixture (a pytest plugin, registered by tests/conftest.py): a finished
crawl directory of two runs, as the dashboard's tests of an ended crawl need one — a pool of 2
workers stopped by --max-pages, then resumed to the end — of a small simulated web, made by
the real `gossamer crawl` command (--no-live-graph, no GOSSAMER_* setting but the web's).

    def test_it(two_run_crawl: Callable[..., Path], tmp_path: Path) -> None:
        out = two_run_crawl(tmp_path / "crawl")
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest


def make_two_run_crawl(out: Path, *, delay: float = 0.02, first_pages: int = 60) -> Path:
    """`out`: a crawl of two runs that ended complete (each run's pages at `delay` s per
    host; the first run stopped after `first_pages` pages)."""
    from gossamer.testweb import WebSpec, serve_in_thread

    spec = WebSpec(seed=3, hosts=6, pages_mean=40, profile="clean")
    with serve_in_thread(spec) as web:
        env = {k: v for k, v in os.environ.items() if not k.startswith("GOSSAMER_")}
        resolve = web.write_resolve_file(out.parent / "resolve.txt")
        env.update(GOSSAMER_ALLOW_PRIVATE="true", GOSSAMER_RESOLVE_FILE=str(resolve))
        # (--no-live-graph: its graph statistics are those the dashboard computes on demand)
        first = ["-o", str(out), "--workers", "2", "--scope", "all", "--delay", str(delay),
                 "--max-pages", str(first_pages), "--no-live-graph", web.url(0, 0)]  # fmt: skip
        for args in (first, ["--resume", str(out), "--max-pages", "none"]):
            subprocess.run([sys.executable, "-m", "gossamer", "crawl", *args, "-q"], env=env,
                           check=True, timeout=300)  # fmt: skip
    return out


@pytest.fixture
def two_run_crawl() -> Callable[..., Path]:
    return make_two_run_crawl
