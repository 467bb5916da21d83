"""Experiment `parallel`: Cho & Garcia-Molina's parallel-crawler metrics for every strategy.

For `dynamic`, `modulo`, `consistent` and `phase`: real three-worker cluster crawls of one
simulated web, with and without a worker SIGKILLed mid-crawl, and a one-worker crawl as the
reference. From each: overlap and coverage (the audit), politeness violations, the hash-URL
paper's error searching, quality (PageRank of the true graph against the crawl's order) and
communication overhead. The seed's claims and the results: docs/experiments.md, section 4."""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..partition import SHARDS, Member, assignment, strategy_named
from ..testweb import WebSpec, model_for
from . import _framework as fw
from .cluster_run import ClusterCrawl, ClusterCrawlSpec, KillPlan, run_cluster_crawl, truth_for
from .crawl_metrics import communication, crawl_order, pagerank, quality, timing
from .metrics import check_partition, error_searching

NAME = "parallel"
STRATEGIES = ("dynamic", "modulo", "consistent", "phase")
FRACTIONS = (0.01, 0.05, 0.1, 0.25, 0.5)
KILL = KillPlan(worker=0, after_done=0.4)


@dataclass(frozen=True, slots=True)
class ParallelSize:
    hosts: int
    pages_mean: float
    workers: int
    concurrency: int
    period: float
    lease_ttl: float
    timeout: float
    killed: tuple[str, ...] = STRATEGIES  # the strategies also crawled with a worker killed

    def web(self, seed: int) -> WebSpec:
        return WebSpec(
            seed=seed,
            hosts=self.hosts,
            pages_mean=self.pages_mean,
            overrides=(("latency_ms", 2.0), ("latency_jitter", 0.5)),
        )


FULL = ParallelSize(
    hosts=400, pages_mean=40, workers=3, concurrency=8, period=4.0, lease_ttl=8.0, timeout=600
)
QUICK = ParallelSize(
    hosts=60,
    pages_mean=20,
    workers=3,
    concurrency=4,
    period=3.0,
    lease_ttl=3.0,
    timeout=120,
    killed=("dynamic", "consistent"),  # a kill costs a lease expiry and a sweep: seconds
)


def crawl_spec(strategy: str, size: ParallelSize, web: WebSpec, *, kill: bool) -> ClusterCrawlSpec:
    return ClusterCrawlSpec(
        web=web,
        workers=size.workers,
        partition=strategy,
        period=size.period if strategy == "phase" else None,
        concurrency=size.concurrency,
        lease_ttl=size.lease_ttl,  # a dead worker's leases come back after this
        heartbeat_ttl=2.0,  # a dead worker leaves the member list within 2 s
        kill=KILL if kill else None,
        timeout=size.timeout,
    )


def run(options: fw.RunOptions) -> fw.ExperimentResult:
    """A one-worker reference crawl, then one crawl per strategy and one with a worker
    killed (per `size.killed`); parallel.json, parallel.md, parallel-*.png."""
    out = fw.Outputs(options.out, NAME)
    size = QUICK if options.quick else FULL
    web = size.web(options.seed)
    model = model_for(web)
    seeds = (model.page_url(0, 0),)
    truth = truth_for(web, seeds)
    rank = pagerank(truth.order, ((s, d) for s, d, kind in truth.iter_edges() if kind == "link"))
    reference = {
        "bfs": quality(truth.order, rank, FRACTIONS),
        "random": {f"{f:g}": f for f in FRACTIONS},
    }
    # the same software with one worker: the single-process crawler quality is measured against
    one = dataclasses.replace(crawl_spec("dynamic", size, web, kill=False), workers=1)
    single = summarise(run_cluster_crawl(one), "dynamic", rank)
    runs: dict[str, Any] = {}
    for strategy in STRATEGIES:
        for kill in (False, True) if strategy in size.killed else (False,):
            crawl = run_cluster_crawl(crawl_spec(strategy, size, web, kill=kill))
            runs[f"{strategy}{' + kill' if kill else ''}"] = summarise(crawl, strategy, rank)
    data: dict[str, Any] = {
        "experiment": NAME,
        "seed_paper": "dynamic-partition-grid-crawler §5 (Cho & Garcia-Molina's metrics)",
        "quick": options.quick,
        "web": web.to_dict(),
        "pages": len(truth.required),
        "edges": truth.edge_count,
        "hosts": len(truth.hosts),
        "workers": size.workers,
        "kill": {"worker_started": KILL.worker + 1, "after_done": KILL.after_done},
        "definitions": DEFINITIONS,
        "pagerank": {
            "damping": 0.85,
            "max": max(rank.values()),
            "top_share_1pct": sum(sorted(rank.values(), reverse=True)[: max(1, len(rank) // 100)]),
        },
        "reference_quality": reference,
        "single_worker": single,
        "partition_checks": partition_checks(size.workers),
        "runs": runs,
    }
    _plot_quality(data, out.path(f"{NAME}-quality.png"))
    _plot_metrics(data, out.path(f"{NAME}-metrics.png"))
    return out.finish(
        data,
        _markdown,
        {
            key: f"overlap {r['overlap']:.4f}, coverage {r['coverage']:.4f}, "
            f"L/N {r['communication']['handed_per_page']:.3f}, quality@10% "
            f"{r['quality']['0.1']:.3f}, violations {r['violations']}, "
            f"error searching {r['error_searching_web']['duplicated']}"
            for key, r in runs.items()
        },
    )


DEFINITIONS = {
    "overlap": "(N - I) / I from the web's request log: N page fetches served (GET, complete, "
    "not 429/503, not robots.txt), I distinct canonical pages among them",
    "coverage": "I / U: U = pages the ground truth requires from the seed",
    "quality": "|A_N ∩ P_N| / |P_N|: A_N the first N distinct pages fetched (all workers "
    "merged by request start), P_N the N pages of highest PageRank on the true link graph",
    "communication": "L / N: L = Σ over workers A of the distinct URLs linked from A's pages "
    "that another worker fetched and A did not (handed from one worker to another through "
    "the shared frontier); N = page fetches in the workers' crawl logs",
    "error_searching": "URLs fetched by two or more workers (experiment 2's error_searching "
    "on per-worker URL sets)",
}


def summarise(crawl: ClusterCrawl, strategy: str, rank: Mapping[str, float]) -> dict[str, Any]:
    r = crawl.report
    by_log = crawl.pages_by_worker()
    by_web = {w: set(c) for w, c in crawl.web_pages_by_worker().items()}
    workers_per_host = Counter(h for hs in crawl.hosts_by_worker().values() for h in hs)
    victim = next((w.id for w in crawl.workers if w.killed), None)
    return {
        "strategy": strategy,
        "killed": victim,
        "killed_after_s": None
        if crawl.killed_at is None
        else round(crawl.killed_at - crawl.started, 2),
        "spec": crawl.spec.describe(),
        "fetched": r.fetched,
        "unique": r.unique,
        "required": len(crawl.truth.required),
        "overlap": r.overlap,
        "coverage": r.coverage,
        "violations": r.politeness_violations,
        "audit_ok": r.ok,
        "error_searching_log": error_searching(by_log).to_dict(),
        "error_searching_web": error_searching(by_web).to_dict(),
        "unattributed_web_fetches": sum(crawl.web_pages_by_worker().get("?", Counter()).values()),
        "pages_per_worker": {w: len(u) for w, u in sorted(by_log.items())},
        "hosts_on_2_or_more_workers": sum(1 for n in workers_per_host.values() if n > 1),
        "hosts": len(workers_per_host),
        "quality": quality(crawl_order(crawl), rank, FRACTIONS),
        "communication": communication(crawl),
        **timing(crawl, r.unique),
    }


def partition_checks(workers: int) -> dict[str, Any]:
    """Every static strategy's shards for the crawl's member list (w1…wM), and for the list
    after the kill (w1 gone): total and disjoint over the 1024 shards at several times."""
    members = [Member(f"w{i + 1}") for i in range(workers)]
    out: dict[str, Any] = {}
    for name in ("modulo", "consistent", "phase"):
        strategy = strategy_named(name, period=4.0 if name == "phase" else None)
        checks = []
        for ms in (members, members[1:]):
            for now in (0.0, 4.5, 9.0):
                owners = assignment(strategy, ms, now)
                checks.append(check_partition([sorted(s or ()) for s in owners.values()], SHARDS))
        out[name] = {
            "total_and_disjoint": all(c.ok for c in checks),
            "checks": len(checks),
            "unassigned": sum(c.unassigned for c in checks),
            "multiply_assigned": sum(c.multiply_assigned for c in checks),
        }
    out["dynamic"] = {"total_and_disjoint": None, "note": "ANY: leases keep one worker per host"}
    return out


# ---------------------------------------------------------------------------- output


def _markdown(data: Mapping[str, Any]) -> str:
    runs = data["runs"]
    parts = [
        "# Parallel-crawler metrics (Cho & Garcia-Molina) for every partition strategy\n",
        f"{data['pages']:,} pages on {data['hosts']:,} hosts of the simulated web (seed "
        f"{data['web']['seed']}), {data['edges']:,} link edges; {data['workers']} `gossamer "
        "worker` processes per crawl, one crawl per strategy, and one more in which the "
        "first worker process started is SIGKILLed once "
        f"{100 * data['kill']['after_done']:.0f} % of the pages are done (its registered id: "
        "`killed` in the JSON); a one-worker crawl as the single-process reference.\n",
    ]
    rows = []
    for key, r in [("dynamic, 1 worker (reference)", data["single_worker"]), *runs.items()]:
        c = r["communication"]
        rows.append(
            [
                key,
                f"{r['overlap']:.4f}",
                f"{r['coverage']:.4f}",
                f"{r['quality']['0.1']:.3f}",
                f"{c['handed_per_page']:.3f}",
                f"{c['cross_links_per_page']:.3f}",
                f"{c['frontier_sends_per_page']:.2f}",
                r["violations"],
                f"{r['error_searching_log']['duplicated']:,}",
                f"{r['error_searching_web']['duplicated']:,}",
                f"{r['hosts_on_2_or_more_workers']:,} / {r['hosts']:,}",
                f"{r['fetch_span_s']:.1f}",
                f"{r['pages_per_s']:,.0f}",
            ]
        )
    parts.append(
        fw.markdown_table(
            [
                "crawl",
                "overlap (N−I)/I",
                "coverage I/U",
                "quality at N = 10 % U",
                "L/N (handed)",
                "cross-worker links / N",
                "frontier sends / N",
                "politeness violations",
                "error searching (crawl logs)",
                "error searching (web log)",
                "hosts on 2+ workers",
                "crawl s",
                "pages/s",
            ],
            rows,
        )
    )
    ref = data["reference_quality"]
    qrows = [["BFS order (reference)", *(f"{ref['bfs'][f'{f:g}']:.3f}" for f in FRACTIONS)]]
    qrows.append(["random order (expected)", *(f"{f:.3f}" for f in FRACTIONS)])
    one = data["single_worker"]["quality"]
    qrows.append(["gossamer, 1 worker (dynamic)", *(f"{one[f'{f:g}']:.3f}" for f in FRACTIONS)])
    qrows += [[k, *(f"{r['quality'][f'{f:g}']:.3f}" for f in FRACTIONS)] for k, r in runs.items()]
    parts += [
        "## Quality |A_N ∩ P_N| / |P_N| (importance: PageRank on the true graph)\n",
        fw.markdown_table(["order", *(f"N = {100 * f:g} % of U" for f in FRACTIONS)], qrows),
    ]
    checks = data["partition_checks"]
    parts += [
        "## Partition functions (member lists before and after the kill, three times)\n",
        fw.markdown_table(
            ["strategy", "total and disjoint over 1024 shards", "unassigned", "multiply"],
            [
                [k, "ANY (no partition function)", "—", "—"]
                if v["total_and_disjoint"] is None
                else [k, str(v["total_and_disjoint"]), v["unassigned"], v["multiply_assigned"]]
                for k, v in checks.items()
            ],
        ),
        "## Definitions\n",
        "\n".join(f"- {k}: {v}" for k, v in data["definitions"].items()) + "\n",
    ]
    return fw.markdown_document(parts)


def _plot_quality(data: Mapping[str, Any], path: Path) -> None:
    fig = fw.new_figure(8, 4.5)
    ax = fig.subplots()
    xs = [100 * f for f in FRACTIONS]
    ref = data["reference_quality"]
    ax.plot(xs, [ref["bfs"][f"{f:g}"] for f in FRACTIONS], "k-o", label="BFS order", lw=2)
    ax.plot(xs, list(FRACTIONS), "k:", label="random order")
    one = data["single_worker"]["quality"]
    ax.plot(xs, [one[f"{f:g}"] for f in FRACTIONS], "-s", color="0.5", label="1 worker")
    for i, (key, r) in enumerate(data["runs"].items()):
        style = "--" if "kill" in key else "-"
        ax.plot(xs, [r["quality"][f"{f:g}"] for f in FRACTIONS], style, color=f"C{i // 2}",
                marker=".", label=key)  # fmt: skip
    ax.set_xscale("log")
    ax.set_xticks(xs, [f"{x:g}" for x in xs])
    ax.minorticks_off()
    ax.set_xlabel("N (% of the pages to crawl)")
    ax.set_ylabel("quality |A_N ∩ P_N| / |P_N|")
    ax.set_title("Quality of the first N pages fetched (PageRank on the true graph)")
    ax.legend(fontsize=7, ncol=2)
    fw.save_png(fig, path)


def _plot_metrics(data: Mapping[str, Any], path: Path) -> None:
    runs = data["runs"]
    keys = list(runs)
    fig = fw.new_figure(12, 4)
    axes = fig.subplots(1, 3)
    series = (
        ("overlap (N−I)/I", [runs[k]["overlap"] for k in keys]),
        ("communication L/N", [runs[k]["communication"]["handed_per_page"] for k in keys]),
        ("pages/s", [runs[k]["pages_per_s"] for k in keys]),
    )
    for ax, (title, values) in zip(axes, series, strict=True):
        colors = [f"C{i // 2}" for i in range(len(keys))]
        bars = ax.bar(range(len(keys)), values, color=colors)
        for b, k in zip(bars, keys, strict=True):
            if "kill" in k:
                b.set_hatch("//")
        ax.bar_label(bars, labels=[f"{v:.3g}" for v in values], fontsize=7)
        ax.set_xticks(range(len(keys)), keys, rotation=40, ha="right", fontsize=8)
        ax.set_title(title)
    fig.suptitle("Parallel-crawler metrics per strategy (hatched: a worker SIGKILLed mid-crawl)")
    fw.save_png(fig, path)
