"""`gossamer report` of a cluster crawl: a real redis-server, two `gossamer worker` processes
writing under one -o directory, the simulated web on loopback. `report DIR` sums every
worker's directory (per-worker lines and totals, --json too), `report DIR/w1` labels its one
run as run 1, and `report --redis URL --crawl ID` gives the crawl's totals from Redis — each
equal to the crawl's truth and to what `gossamer status` says (docs/cluster.md, "Outputs and
`gossamer report`")."""

from __future__ import annotations

import json
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from test_cluster import UA, create_crawl, gossamer, logs, status, workers

from gossamer.testweb import TruthRules, WebSpec, compute_truth, serve_in_thread
from gossamer.testweb.redisd import RedisServer


def report(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        gossamer("report", *args), capture_output=True, text=True, timeout=120, check=False
    )


def report_json(*args: str) -> Any:
    done = report(*args, "--json")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


@dataclass(frozen=True)
class ClusterCrawl:
    out: Path  # the workers' -o directory
    redis_url: str
    crawl_id: str
    seed: str
    required: int  # the truth: the pages the crawl must fetch
    status: dict[str, Any]  # `gossamer status --json` once it finished


@pytest.fixture(scope="module")
def cluster_crawl(
    tmp_path_factory: pytest.TempPathFactory, redis_server: RedisServer
) -> ClusterCrawl:
    """A finished cluster crawl of two `gossamer worker`s under one -o directory."""
    if not redis_server.running:
        redis_server.restart()
    with redis_server.client() as client:
        client.flushall()
    redis_url = redis_server.url
    tmp = tmp_path_factory.mktemp("cluster-report")
    spec = WebSpec(seed=3, hosts=60, pages_mean=12)
    out = tmp / "cl"
    with serve_in_thread(spec, log_path=tmp / "web.log") as web:
        resolve = web.write_resolve_file(tmp / "resolve.txt")
        seed = web.url(0, 0)
        crawl_id = create_crawl(redis_url, seed, resolve)
        with workers(redis_url, crawl_id, out, 2) as procs:
            codes = [p.wait(timeout=90) for p in procs]
        assert codes == [0, 0], logs(out)
        truth = compute_truth(web.model, TruthRules(seeds=(seed,), scope="all", user_agent=UA))
    st = status(redis_url, crawl_id)
    assert st["crawl"]["state"] == "finished"
    assert st["frontier"]["done"] == len(truth.required)
    assert sorted(w["id"] for w in st["workers"]) == ["w1", "w2"]
    return ClusterCrawl(out, redis_url, crawl_id, seed, len(truth.required), st)


def test_report_of_a_clusters_directory_sums_every_worker(cluster_crawl: ClusterCrawl) -> None:
    c = cluster_crawl
    st, required, out = c.status, c.required, c.out
    by_worker = {w["id"]: w for w in st["workers"]}
    data = report_json(str(out))
    (crawl,) = data["crawls"]
    assert crawl["crawl"] == c.crawl_id and crawl["seeds"] == [c.seed]
    assert [w["worker"] for w in crawl["workers"]] == ["w1", "w2"]
    for w in crawl["workers"]:
        assert w["pages"] == by_worker[w["worker"]]["pages"], w
        assert w["requests"] == by_worker[w["worker"]]["requests"], w
    totals = crawl["totals"]
    assert totals["workers"] == 2
    assert totals["pages"] == required == sum(w["pages"] for w in st["workers"])
    assert totals["requests"] == sum(w["requests"] for w in st["workers"])
    assert totals["fetches"] >= totals["pages"]
    assert sum(totals["statuses"].values()) == totals["requests"]  # no fetch failed
    assert crawl["end_reason"] == "complete"
    assert crawl["frontier"]["done"] == required and crawl["frontier"]["queued"] == 0
    assert crawl["warc"]["files"] == sum(1 for _ in out.glob("w*/warc/*.warc.gz"))
    # the link files over both workers, as `gossamer graph stats` merges them
    one = [report_json(str(out / wid))["graph"]["nodes"] for wid in ("w1", "w2")]
    assert max(one) <= crawl["graph"]["nodes"] <= sum(one)
    text = report(str(out))
    assert text.returncode == 0, text.stderr
    assert f"crawl {c.crawl_id}, 2 worker(s) here" in text.stdout
    assert f"pages        {required:,} (distinct URLs over every worker" in text.stdout
    for wid in ("w1", "w2"):
        assert f"    {wid}  " in text.stdout


def test_report_of_one_workers_directory_labels_its_run(cluster_crawl: ClusterCrawl) -> None:
    w1 = cluster_crawl.out / "w1"
    text = report(str(w1))
    assert text.returncode == 0, text.stderr
    assert "    run 1  " in text.stdout and "(cluster worker w1)" in text.stdout
    assert "run 0" not in text.stdout
    assert report_json(str(w1))["runs"][0]["run"] == 1


def test_report_of_a_cluster_crawl_from_redis(cluster_crawl: ClusterCrawl) -> None:
    c = cluster_crawl
    st = c.status
    data = report_json("--redis", c.redis_url, "--crawl", c.crawl_id)
    assert data["crawl"]["id"] == c.crawl_id and data["crawl"]["state"] == "finished"
    t = data["totals"]
    assert t["pages"] == st["frontier"]["done"] == c.required
    assert t["worker_pages"] == c.required
    assert t["requests"] == sum(w["requests"] for w in st["workers"])
    assert t["errors"] == sum(w["errors"] for w in st["workers"])
    assert t["workers"] == 2
    assert [w["id"] for w in data["workers"]] == ["w1", "w2"]
    assert data["frontier"]["failed"] == st["frontier"]["failed"]
    text = report("--redis", c.redis_url, "--crawl", c.crawl_id)
    assert text.returncode == 0, text.stderr
    assert f"cluster crawl {c.crawl_id}  finished" in text.stdout
    assert f"pages        {c.required:,} done in the crawl's frontier" in text.stdout
    # DIR and --redis together, or --crawl with DIR: usage errors
    assert report(str(c.out), "--redis", c.redis_url).returncode == 2
    assert report(str(c.out), "--crawl", c.crawl_id).returncode == 2
