"""The crawl experiments (`grid`, `parallel`, `phases`) through the real command, `--quick`:
real redis-servers, real `gossamer worker` processes, the simulated web on loopback. Each
asserts the invariants of issue 5 on what the crawls did: partition functions total and
disjoint, coverage 1.000, overlap 0 without faults, no politeness violation, at most one
worker per web server per phase window; and that every figure is consistent with the data it
was computed from. Plus the measuring instruments on small hand-made inputs."""

from __future__ import annotations

import json
import math
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from test_experiment_cli import assert_valid_png

from gossamer.experiments.cluster_run import Fetch, busy_time
from gossamer.experiments.crawl_metrics import pagerank, quality, workers_settled

GOSSAMER = str(Path(sys.executable).parent / "gossamer")


def _experiment(name: str, out: Path) -> dict[str, Any]:
    done = subprocess.run(
        [GOSSAMER, "experiment", name, "--quick", "-o", str(out)],
        capture_output=True, text=True, timeout=180, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr + done.stdout
    assert f"{name}: " in done.stdout
    for png in out.glob(f"{name}-*.png"):
        assert_valid_png(png)
    assert "|---|" in (out / f"{name}.md").read_text()
    data: dict[str, Any] = json.loads((out / f"{name}.json").read_text())
    assert data["quick"] is True
    return data


# ---------------------------------------------------------------------------- instruments


def test_pagerank_of_small_graphs() -> None:
    cycle = pagerank(["a", "b", "c"], [("a", "b"), ("b", "c"), ("c", "a")])
    assert all(math.isclose(v, 1 / 3) for v in cycle.values())
    # a star into "hub" (whose own rank, dangling, is spread evenly): closed form
    leaves = [f"l{i}" for i in range(4)]
    star = pagerank(["hub", *leaves], [(leaf, "hub") for leaf in leaves] + [("x", "hub")])
    d, n = 0.85, 5
    leaf = (1 - d) / n + d * star["hub"] / n
    assert math.isclose(star["l0"], leaf, rel_tol=1e-9)
    assert math.isclose(star["hub"], (1 - d) / n + d * (4 * leaf + star["hub"] / n))
    assert math.isclose(sum(star.values()), 1.0)


def test_quality_and_busy_time() -> None:
    rank = {"a": 0.4, "b": 0.3, "c": 0.2, "d": 0.1}
    assert quality(["a", "b", "c", "d"], rank, [0.25, 0.5]) == {"0.25": 1.0, "0.5": 1.0}
    assert quality(["d", "c", "b", "a"], rank, [0.5, 1.0]) == {"0.5": 0.0, "1": 1.0}
    assert busy_time([(0, 2), (1, 3), (5, 6), (5.5, 5.7)]) == 4.0


def test_workers_settled_is_the_last_first_fetch_plus_one_beat() -> None:
    def fetch(worker: str, start: float) -> Fetch:
        url = f"http://h{start:g}.example/"
        return Fetch(worker, start, 0.1, url, f"h{start:g}.example", "ok", 200, None)

    fetches = [fetch("w2", 12.0), fetch("w1", 10.0), fetch("w2", 11.0), fetch("w3", 15.0)]
    assert workers_settled(fetches, ["w1", "w2"], 1.0) == 12.0  # w2's first: 11
    assert workers_settled(fetches, ("w1", "w2", "w3"), 0.5) == 15.5
    # a worker without a fetch is left out; none at all: the default plus the beat
    assert workers_settled(fetches, ["w1", "w9"], 1.0) == 11.0
    assert workers_settled([], ["w1"], 1.0, default=100.0) == 101.0
    assert workers_settled(iter(fetches), {"w1": 0, "w3": 0}, 0.0) == 15.0


# ---------------------------------------------------------------------------- experiments


@pytest.mark.slow
def test_grid_quick(tmp_path: Path) -> None:
    data = _experiment("grid", tmp_path)
    assert set(data["methods"]) == {
        "static-random", "static-size", "dynamic-random", "dynamic-size",
        "modulo", "consistent", "phase",
    }  # fmt: skip
    for check in data["partition_checks"].values():
        assert check["total_and_disjoint"], check
        assert sum(check["pages_per_worker"].values()) == data["pages"]
    for key, m in data["methods"].items():
        a = m["audit"]
        assert a["coverage"] == 1.0 and a["overlap"] == 0.0, (key, a)
        assert a["violations"] == 0 and a["ok"], (key, a)
        assert m["error_searching"]["duplicated"] == 0, key
        wl = m["workload"]
        assert len(wl["workers"]) == data["workers"]
        norm = list(wl["normalised"].values())
        assert math.isclose(sum(norm), 1.0)
        assert math.isclose(wl["stdev"], statistics.stdev(norm), abs_tol=1e-12)  # n - 1
        assert math.isclose(wl["pstdev"], statistics.pstdev(norm), abs_tol=1e-12)
        total = sum(wl["download_s"].values())
        for w in wl["workers"]:
            assert math.isclose(wl["normalised"][w], wl["download_s"][w] / total, abs_tol=1e-4)
        assert sum(wl["pages"].values()) == data["pages"]
        # static methods: pages taken outside the final assignment while workers registered
        static = key in data["partition_checks"]
        assert (m["misplaced_pages"] is not None) == static, key
    # Static-Random deals equal numbers of sites; Static-Size balances the known pages
    checks = data["partition_checks"]
    sites = list(checks["static-random"]["sites_per_worker"].values())
    assert sum(sites) == len(data["sites"]) and max(sites) - min(sites) <= 1
    by_size = list(checks["static-size"]["pages_per_worker"].values())
    # largest first: no worker above the mean by more than one site (LPT's bound)
    assert max(by_size) <= sum(by_size) / len(by_size) + max(
        s["pages"] for s in data["sites"].values()
    )
    p = data["predicted"]
    assert p["random_equal_counts"]["p10"] <= p["random_equal_counts"]["p90"]
    assert p["largest_first_by_time"] <= p["random_uniform"]["mean"]


@pytest.mark.slow
def test_parallel_quick(tmp_path: Path) -> None:
    data = _experiment("parallel", tmp_path)
    # --quick kills a worker in two of the crawls (the full size in one per strategy)
    assert set(data["runs"]) == {
        "dynamic",
        "modulo",
        "consistent",
        "phase",
        "dynamic + kill",
        "consistent + kill",
    }
    for name, check in data["partition_checks"].items():
        assert name == "dynamic" or check["total_and_disjoint"], (name, check)
    ref = data["reference_quality"]["bfs"]
    one = data["single_worker"]  # the reference crawl: one worker hands nothing to another
    assert one["coverage"] == 1.0 and one["overlap"] == 0.0 and one["violations"] == 0
    assert one["communication"]["handed"] == one["communication"]["cross_links"] == 0
    assert list(one["pages_per_worker"].values()) == [one["required"]]
    for key, r in data["runs"].items():
        assert r["coverage"] == 1.0, (key, r)
        assert r["violations"] == 0, (key, r)
        assert all(0.0 <= q <= 1.0 for q in r["quality"].values())
        assert r["quality"]["0.5"] >= 0.5 * ref["0.5"], key
        c = r["communication"]
        assert c["handed"] <= c["cross_links"] and c["handed"] <= c["frontier_sends"]
        if "kill" in key:
            assert r["killed"] is not None and r["killed_after_s"] is not None, key
        else:
            assert r["killed"] is None
            assert r["overlap"] == 0.0 and r["audit_ok"], (key, r)
            assert r["error_searching_log"]["duplicated"] == 0, key
            assert r["error_searching_web"]["duplicated"] == 0, key
            assert r["unattributed_web_fetches"] == 0, key
        # the overlap is the audit's; error searching on the web log sees the same extra fetches
        extra = r["fetched"] - r["unique"]
        assert r["error_searching_web"]["extra"] <= extra


@pytest.mark.slow
def test_phases_quick(tmp_path: Path) -> None:
    data = _experiment("phases", tmp_path)
    runs = data["runs"]
    assert "dynamic" in runs and len(runs) >= 3
    for key, r in runs.items():
        assert r["coverage"] == 1.0 and r["violations"] == 0, (key, r)
        if r["exclusivity"] is None:
            assert key == "dynamic"
            continue
        ex = r["exclusivity"]
        assert ex["max_workers_per_host_window"] == 1, (key, ex)
        assert ex["host_windows_with_2_or_more"] == 0, (key, ex)
        assert ex["windows"] >= 2, (key, ex)
        assert ex["requests_matched_to_a_worker"] >= 0.9 * ex["requests"], (key, ex)
        assert ex["hosts_seen_by_several_workers_over_the_crawl"] > 0  # the phases rotate
        assert r["ip_exclusivity"]["max_workers_per_ip_window"] <= 1, (key, r)
        assert r["pages_per_s"] > 0
