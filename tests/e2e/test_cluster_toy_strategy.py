"""A partition strategy added as one module plus its registration (`_toy_partition`,
`contiguous`) runs a cluster crawl: `crawl --redis --partition contiguous` stores it and three
`gossamer worker` processes on a real redis-server crawl the simulated web under it (each
process imports the module before reading its command line, as a plug-in would be)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from test_cluster import UA, audit_web, logs, status, worker_procs

from gossamer.experiments.cluster_run import read_fetches
from gossamer.partition import SHARDS, shard_of
from gossamer.testweb import WebSpec, serve_in_thread

HERE = Path(__file__).resolve().parent
# `python -c` with the toy registered first, then the gossamer command line
LAUNCH = (
    f"import sys; sys.path.insert(0, {str(HERE)!r}); import _toy_partition; "
    "from gossamer.cli import main; sys.exit(main())"
)


def gossamer_with_toy(*args: str) -> list[str]:
    return [sys.executable, "-c", LAUNCH, *args]


@pytest.mark.slow
def test_three_workers_under_a_strategy_added_by_one_module(
    tmp_path: Path, redis_url: str
) -> None:
    # hosts capped at 50 pages: uncapped, one IP served 362 of the 1513 pages (18 s at the
    # 50 ms delay, two thirds of the test); capped, 1069 pages, 141 on the busiest IP
    spec = WebSpec(seed=7, hosts=45, pages_mean=30, pages_max=50)
    log = tmp_path / "web.log"
    out = tmp_path / "out"
    with serve_in_thread(spec, log_path=log) as web:
        resolve = web.write_resolve_file(tmp_path / "resolve.txt")
        seed = web.url(0, 0)
        done = subprocess.run(
            gossamer_with_toy(
                "crawl", "--redis", redis_url, seed, "--workers", "0", "--scope", "all",
                "--resolve-file", str(resolve), "--allow-private", "--delay", "0.05",
                "--user-agent", UA, "--concurrency", "16", "--partition", "contiguous",
            ),
            capture_output=True, text=True, timeout=60, check=False,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        crawl_id = done.stdout.strip()
        assert status(redis_url, crawl_id)["crawl"]["partition"] == {"name": "contiguous"}
        with worker_procs(out) as procs:
            for k in range(3):
                cmd = gossamer_with_toy(
                    "worker", "--redis", redis_url, "--crawl", crawl_id, "-o", str(out), "-q"
                )
                with (out / f"worker-{k}.log").open("wb") as wlog:
                    procs.append(subprocess.Popen(cmd, stdout=wlog, stderr=subprocess.STDOUT))
            codes = [p.wait(timeout=90) for p in procs]
        assert codes == [0, 0, 0], logs(out)
        truth, report = audit_web(web, log, seed)
    assert report.coverage == 1.0, report.format_table()
    assert report.overlap == 0.0, report.format_table()
    assert report.politeness_violations == 0, report.format_table()
    st = status(redis_url, crawl_id)
    assert st["crawl"]["state"] == "finished"
    pages = {w["id"]: w["pages"] for w in st["workers"]}
    assert sum(pages.values()) == len(truth.required) == report.fetched, pages
    assert all(n > 0 for n in pages.values()), pages  # a 50 ms delay: all three take part
    # the toy decided who fetched what: once the three workers are members, each fetches in
    # its own third of the shards (before that, fewer members share the ranges): 888-908 of
    # 1114 fetches (80 %); under `dynamic` a worker's fetches fall in its third by chance,
    # about a third of them
    ids = sorted(pages)
    fetches = read_fetches(out, strict=True)
    own = [f for f in fetches if shard_of(f.host) in _third(ids.index(f.worker))]
    assert len(own) / len(fetches) > 0.5, (len(own), len(fetches))


def _third(i: int) -> range:
    return range(i * SHARDS // 3, (i + 1) * SHARDS // 3)


def test_a_worker_without_the_module_refuses_the_strategy(tmp_path: Path) -> None:
    """Without the registration the name is not a choice: one error line, usage status."""
    done = subprocess.run(
        [sys.executable, "-m", "gossamer", "crawl", "--redis", "redis://127.0.0.1:1/0",
         "http://a.example/", "--partition", "contiguous"],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 2
    assert "--partition contiguous: expected one of dynamic" in done.stderr
