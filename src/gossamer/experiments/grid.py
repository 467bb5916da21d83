"""Experiment `grid`: the grid crawler's Table 1 — normalised workload per crawl process.

Real cluster crawls (`cluster_run`) with six one-at-a-time workers over 30 sites of unequal
sizes and latencies, each partition method crawling the same web from the same seeds to
coverage 1: the paper's Static-Random, Static-Size, Dynamic-Random and Dynamic-Size (through
`sized`, `dynamic` and `--lease-order`), and gossamer's `modulo`, `consistent` and `phase`. A
worker's workload is the sum of its requests' durations over all workers' (busy time beside
it). The seed's figures and the results: docs/experiments.md, section 3."""

from __future__ import annotations

import dataclasses
import random
import statistics
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..cluster.sizes import shard_weights
from ..partition import SHARDS, Member, Sized, Strategy, assignment, shard_of, strategy_named
from ..testweb import WebSpec, model_for
from ..urls import host_key
from . import _framework as fw
from .cluster_run import ClusterCrawl, ClusterCrawlSpec, run_cluster_crawl, truth_for
from .crawl_metrics import site_download_times, timing, workload
from .metrics import check_partition, error_searching

NAME = "grid"

#: The seed's Table 1: normalised workload of C-procs 1–6 and the stdev (as printed: the
#: sample standard deviation, n − 1, of the six workloads).
PAPER: Mapping[str, tuple[tuple[float, ...], float]] = {
    "static-random": ((0.27, 0.20, 0.09, 0.14, 0.16, 0.14), 0.0619),
    "static-size": ((0.15, 0.23, 0.14, 0.16, 0.14, 0.18), 0.0344),
    "dynamic-random": ((0.17, 0.14, 0.20, 0.19, 0.16, 0.14), 0.0250),
    "dynamic-size": ((0.17, 0.16, 0.17, 0.18, 0.16, 0.16), 0.0082),
}
LABELS: Mapping[str, str] = {
    "static-random": "Static-Random",
    "static-size": "Static-Size",
    "dynamic-random": "Dynamic-Random",
    "dynamic-size": "Dynamic-Size",
    "modulo": "modulo",
    "consistent": "consistent",
    "phase": "phase",
}
HOW: Mapping[str, str] = {
    "static-random": "sized, weight 1 per site (equal site counts, hash order)",
    "static-size": "sized, weight = the site's pages (ground truth)",
    "dynamic-random": "dynamic, lease order ready",
    "dynamic-size": "dynamic (largest ready site first)",
    "modulo": "modulo (shard mod M)",
    "consistent": "consistent (rendezvous, ε = 0.25)",
    "phase": "phase (P = workers)",
}


@dataclass(frozen=True, slots=True)
class GridSize:
    """The experiment's size: the web, the workers, the phase period."""

    workers: int
    sites: int
    pages_mean: float
    latency_ms: float
    period: float
    timeout: float

    def web(self, seed: int) -> WebSpec:
        return WebSpec(
            seed=seed,
            hosts=self.sites,
            pages_mean=self.pages_mean,
            pages_alpha=2.0,
            ip_share=0.0,
            overrides=(("latency_ms", self.latency_ms), ("latency_jitter", 0.5)),
        )


FULL = GridSize(workers=6, sites=30, pages_mean=3500, latency_ms=2.0, period=10.0, timeout=900)
QUICK = GridSize(workers=3, sites=12, pages_mean=120, latency_ms=1.0, period=3.0, timeout=120)


def pages_per_site(urls: Iterable[str]) -> dict[str, int]:
    """Pages per site, a site keyed as `--site-sizes` keys it (`gossamer.urls.host_key`:
    lower case, with the port unless it is the scheme's default) — the placement `sized`
    computes from these is the one a cluster crawl computes from the same sizes."""
    return dict(Counter(host_key(u) for u in urls))


def method_spec(
    method: str,
    size: GridSize,
    web: WebSpec,
    seeds: tuple[str, ...],
    site_pages: Mapping[str, int],
) -> ClusterCrawlSpec:
    """The crawl of one method (same web, seeds and settings for all)."""
    base = ClusterCrawlSpec(
        web=web,
        workers=size.workers,
        seeds=seeds,
        concurrency=1,
        per_ip=3,  # a site is a host; a domain's hosts (≤ 3) share an IP: one connection each
        timeout=size.timeout,
    )
    partition: dict[str, Any] = {"partition": method}
    if method == "static-random":
        partition = {"partition": "sized", "weights": shard_weights(site_pages, equal=True)}
    elif method == "static-size":
        partition = {"partition": "sized", "weights": shard_weights(site_pages, equal=False)}
    elif method == "dynamic-random":
        partition = {"partition": "dynamic", "lease_order": "ready"}
    elif method == "dynamic-size":
        partition = {"partition": "dynamic"}
    elif method == "phase":
        partition = {"partition": "phase", "period": size.period}
    return dataclasses.replace(base, **partition)


def run(options: fw.RunOptions) -> fw.ExperimentResult:
    """Crawl the web once per method, write grid.json, grid.md and grid-*.png."""
    out = fw.Outputs(options.out, NAME)
    size = QUICK if options.quick else FULL
    web = size.web(options.seed)
    model = model_for(web)
    seeds = tuple(model.page_url(h, 0) for h in range(len(model.hosts)))
    truth = truth_for(web, seeds)
    site_pages = pages_per_site(truth.required)
    methods: dict[str, Any] = {}
    site_times: dict[str, list[float]] = {}
    for method in LABELS:
        spec = method_spec(method, size, web, seeds, site_pages)
        crawl = run_cluster_crawl(spec)
        methods[method] = summarise(crawl, method, static_strategy(method, site_pages))
        for host, t in site_download_times(crawl).items():
            site_times.setdefault(host, []).append(t)
    mean_site_time = {h: statistics.fmean(ts) for h, ts in site_times.items()}
    data: dict[str, Any] = {
        "experiment": NAME,
        "seed_paper": "dynamic-partition-grid-crawler §5, Table 1",
        "quick": options.quick,
        "web": web.to_dict(),
        "sites": {
            h: {
                "pages": site_pages.get(h, 0),
                "latency_ms": round(model.host_by_name(h).latency_ms, 3),  # type: ignore[union-attr]
                "shard": shard_of(h),
                "download_s_mean": round(mean_site_time.get(h, 0.0), 4),
            }
            for h in sorted(site_pages, key=lambda h: -site_pages[h])
        },
        "pages": len(truth.required),
        "workers": size.workers,
        "settings": {
            "concurrency": 1,
            "per_host": 20,
            "per_ip": 3,
            "delay": 0.0,
            "lease_ttl": 8.0,
            "phase_period": size.period,
        },
        "download_time": (
            "download time of a worker = the sum of the duration of every request in its "
            "crawl log (pages, robots.txt, errors); normalised workload = download time / "
            "the sum over workers; stdev = sample standard deviation (n − 1) of the "
            "normalised workloads, as the paper's Table 1 (busy time = the union of a "
            "worker's request intervals, beside it)"
        ),
        "paper": {k: {"normalised": list(v[0]), "stdev": v[1]} for k, v in PAPER.items()},
        "methods": methods,
        "predicted": predicted(mean_site_time, site_pages, size.workers, options.seed),
        "partition_checks": partition_checks(site_pages, size.workers),
    }
    _plot_workloads(data, out.path(f"{NAME}-workload.png"))
    _plot_stdev(data, out.path(f"{NAME}-stdev.png"))
    return out.finish(
        data,
        _markdown,
        {
            "stdev of normalised workload": ", ".join(
                f"{LABELS[k]} {100 * m['workload']['stdev']:.2f} %" for k, m in methods.items()
            ),
            "paper": ", ".join(f"{LABELS[k]} {100 * v[1]:.2f} %" for k, v in PAPER.items()),
            "audit": ", ".join(
                f"{LABELS[k]} cov {m['audit']['coverage']:.3f}/ovl {m['audit']['overlap']:.3f}/"
                f"viol {m['audit']['violations']}"
                for k, m in methods.items()
            ),
        },
    )


def summarise(crawl: ClusterCrawl, method: str, static: Strategy | None) -> dict[str, Any]:
    """One method's figures: workload, who crawled which sites, the audit, the time; for a
    static method the pages fetched outside the final assignment (`misplaced_pages`)."""
    wl = workload(crawl)
    fetched = crawl.pages_by_worker()
    sites = crawl.hosts_by_worker()
    r = crawl.report
    return {
        "label": LABELS[method],
        "how": HOW[method]
        if method != "phase"
        else f"phase (P = {crawl.spec.workers}, T = {crawl.spec.period:g} s)",
        "spec": crawl.spec.describe(),
        "workload": wl,
        "sites_per_worker": {w: len(s) for w, s in sorted(sites.items())},
        "workers_per_site": dict(sorted(Counter(h for s in sites.values() for h in s).items())),
        "error_searching": error_searching(fetched).to_dict(),
        "audit": {
            "coverage": r.coverage,
            "overlap": r.overlap,
            "violations": r.politeness_violations,
            "fetched": r.fetched,
            "unique": r.unique,
            "ok": r.ok,
        },
        "misplaced_pages": None if static is None else misplaced_pages(crawl, static),
        **timing(crawl, len(crawl.truth.required)),
    }


def predicted(
    site_time: Mapping[str, float], site_pages: Mapping[str, int], workers: int, seed: int
) -> dict[str, Any]:
    """What placing whole sites up front gives, from the measured per-site download times
    (mean over the methods' crawls): random placement with equal site counts (the paper's
    Static-Random) and independent uniform placement (a hash), 2,000 draws each (mean,
    10th and 90th percentiles of the stdev); largest-first by pages (Static-Size's rule) and
    by measured time (an oracle that knows each site's download time)."""
    hosts = sorted(site_time)
    times = [site_time[h] for h in hosts]
    total = sum(times)
    rng = random.Random(seed)

    def stdev(loads: Sequence[float]) -> float:
        return statistics.stdev([x / total for x in loads])

    def summary(samples: list[float]) -> dict[str, float]:
        samples.sort()
        return {
            "mean": statistics.fmean(samples),
            "p10": samples[len(samples) // 10],
            "p90": samples[(9 * len(samples)) // 10],
        }

    equal, uniform = [], []
    for _ in range(2000):
        order = list(range(len(hosts)))
        rng.shuffle(order)
        loads = [0.0] * workers
        for k, i in enumerate(order):
            loads[k % workers] += times[i]
        equal.append(stdev(loads))
        loads = [0.0] * workers
        for t in times:
            loads[rng.randrange(workers)] += t
        uniform.append(stdev(loads))

    def lpt(key: Mapping[str, float]) -> float:
        loads = [0.0] * workers
        keyed = [0.0] * workers
        for h in sorted(hosts, key=lambda h: (-key[h], h)):
            i = min(range(workers), key=lambda k: (keyed[k], k))
            keyed[i] += key[h]
            loads[i] += site_time[h]
        return stdev(loads)

    return {
        "random_equal_counts": summary(equal),
        "random_uniform": summary(uniform),
        "largest_first_by_pages": lpt({h: float(site_pages.get(h, 0)) for h in hosts}),
        "largest_first_by_time": lpt(site_time),
        "largest_site_share": max(times) / total if total else 0.0,
    }


def static_strategy(method: str, site_pages: Mapping[str, int]) -> Strategy | None:
    """The partition function of a static method (None for dynamic and phase)."""
    if method == "static-random":
        return Sized(shard_weights(site_pages, equal=True))
    if method == "static-size":
        return Sized(shard_weights(site_pages, equal=False))
    if method in ("modulo", "consistent"):
        return strategy_named(method)
    return None


def partition_checks(site_pages: Mapping[str, int], workers: int) -> dict[str, Any]:
    """The static partitions as functions of the full member list (w1…wM): every shard (and
    so every site) to exactly one worker; the sites and pages each worker is given."""
    members = [Member(f"w{i + 1}") for i in range(workers)]
    out = {}
    for key in ("static-random", "static-size", "modulo", "consistent"):
        strategy = static_strategy(key, site_pages)
        assert strategy is not None
        owners = assignment(strategy, members, 0.0)
        check = check_partition([sorted(s or ()) for s in owners.values()], SHARDS).to_dict()
        pages: Counter[str] = Counter(dict.fromkeys(owners, 0))
        sites: Counter[str] = Counter(dict.fromkeys(owners, 0))
        for host, n in site_pages.items():
            for w, shards in owners.items():
                if shards is not None and shard_of(host) in shards:
                    pages[w] += n
                    sites[w] += 1
        check["pages_per_worker"] = dict(sorted(pages.items()))
        check["sites_per_worker"] = dict(sorted(sites.items()))
        out[key] = check
    return out


def misplaced_pages(crawl: ClusterCrawl, strategy: Strategy) -> int:
    """Pages a worker fetched from a site its strategy gives another worker under the full
    member list: taken while the workers were still registering (the first worker alone
    owns everything until the others join; a join is known to the others at their next
    heartbeat, and a host already leased stays with its worker for its lease renewals)."""
    members = [Member(w) for w in crawl.worker_ids]
    owners = assignment(strategy, members, 0.0)
    owner_of = {s: w for w, shards in owners.items() for s in shards or ()}
    return sum(1 for f in crawl.fetches if f.is_page and owner_of.get(shard_of(f.host)) != f.worker)


# ---------------------------------------------------------------------------- output


def _pct(x: float) -> str:
    return f"{100 * x:.2f} %"


def _markdown(data: Mapping[str, Any]) -> str:
    n = data["workers"]
    methods = data["methods"]
    parts = [
        "# Grid crawler Table 1: normalised workload per crawl process\n",
        f"{data['pages']:,} pages on {len(data['sites'])} sites of the simulated web (seed "
        f"{data['web']['seed']}), {n} `gossamer worker` processes (concurrency 1, per-host "
        "batches of 20, no delay), one real cluster crawl per method, each to coverage 1.\n",
        f"Download time: {data['download_time']}.\n",
    ]
    headers = [
        "method",
        "gossamer",
        *(f"{i + 1}" for i in range(n)),
        "stdev (n−1)",
        "paper stdev",
        "stdev (n)",
    ]
    rows = []
    for key, m in methods.items():
        wl = m["workload"]
        paper = PAPER.get(key)
        rows.append(
            [
                m["label"],
                m["how"],
                *(f"{wl['normalised'][w]:.3f}" for w in wl["workers"]),
                f"**{_pct(wl['stdev'])}**",
                _pct(paper[1]) if paper else "—",
                _pct(wl["pstdev"]),
            ]
        )
    parts += ["## Normalised workload (download time / sum)\n", fw.markdown_table(headers, rows)]
    rows = []
    for m in methods.values():
        wl, a = m["workload"], m["audit"]
        rows.append(
            [
                m["label"],
                _pct(wl["stdev_busy"]),
                f"{wl['max_over_mean']:.3f}",
                " ".join(str(v) for v in m["sites_per_worker"].values()),
                "—" if m["misplaced_pages"] is None else f"{m['misplaced_pages']:,}",
                " ".join(f"{v:,}" for v in wl["pages"].values()),
                f"{m['fetch_span_s']:.1f}",
                f"{m['pages_per_s']:,.0f}",
                f"{a['coverage']:.3f}",
                f"{a['overlap']:.3f}",
                a["violations"],
            ]
        )
    parts += [
        "## Per method: busy time, sites, pages, time, audit\n",
        fw.markdown_table(
            [
                "method",
                "stdev (n−1) of busy time",
                "max / mean",
                "sites per worker",
                "pages outside the assignment",
                "pages per worker",
                "crawl s",
                "pages/s",
                "coverage",
                "overlap",
                "violations",
            ],
            rows,
        ),
    ]
    p = data["predicted"]
    parts += [
        "## Placing whole sites up front, predicted from the measured site download times\n",
        fw.markdown_table(
            ["placement", "stdev"],
            [
                [
                    "random, equal site counts (2,000 draws): mean (p10–p90)",
                    f"{_pct(p['random_equal_counts']['mean'])} "
                    f"({_pct(p['random_equal_counts']['p10'])}–"
                    f"{_pct(p['random_equal_counts']['p90'])})",
                ],
                [
                    "random, uniform per site (a hash): mean (p10–p90)",
                    f"{_pct(p['random_uniform']['mean'])} "
                    f"({_pct(p['random_uniform']['p10'])}–{_pct(p['random_uniform']['p90'])})",
                ],
                ["largest first by pages (Static-Size's rule)", _pct(p["largest_first_by_pages"])],
                ["largest first by measured time (oracle)", _pct(p["largest_first_by_time"])],
                ["largest site's share of all download time", _pct(p["largest_site_share"])],
            ],
        ),
    ]
    rows = [
        [h, f"{s['pages']:,}", f"{s['latency_ms']:.2f}", s["shard"], f"{s['download_s_mean']:.1f}"]
        for h, s in data["sites"].items()
    ]
    parts += [
        "## The sites\n",
        fw.markdown_table(["site", "pages", "mean latency (ms)", "shard", "download s"], rows),
    ]
    return fw.markdown_document(parts)


def _plot_workloads(data: Mapping[str, Any], path: Path) -> None:
    methods = data["methods"]
    fig = fw.new_figure(11, 4.5)
    axes = fig.subplots(1, 2, sharey=True, width_ratios=[4, 3])
    width = 0.8 / data["workers"]
    keys = list(methods)
    ours = {k: list(methods[k]["workload"]["normalised"].values()) for k in keys}
    paper = {k: list(v[0]) for k, v in PAPER.items()}
    for ax, title, series in ((axes[0], "gossamer (real crawls)", ours), (axes[1], "paper", paper)):
        for j, values in enumerate(series.values()):
            for i, v in enumerate(values):
                ax.bar(j + (i - (len(values) - 1) / 2) * width, v, width * 0.95, color=f"C{i}")
        ax.axhline(1 / data["workers"] if ax is axes[0] else 1 / 6, color="k", lw=0.8, ls="--")
        ax.set_xticks(range(len(series)), [LABELS[k] for k in series], rotation=30, ha="right")
        ax.set_title(title)
    axes[0].set_ylabel("normalised workload per process")
    fig.suptitle("Normalised workload per crawl process (bars: processes 1…n; dashed: 1/n)")
    fw.save_png(fig, path)


def _plot_stdev(data: Mapping[str, Any], path: Path) -> None:
    methods = data["methods"]
    fig = fw.new_figure(8, 4)
    ax = fig.subplots()
    keys = list(methods)
    ours = [100 * methods[k]["workload"]["stdev"] for k in keys]
    bars = ax.bar([i - 0.2 for i in range(len(keys))], ours, 0.4, label="gossamer")
    ax.bar_label(bars, labels=[f"{v:.2f}" for v in ours], fontsize=7)
    paper_keys = [i for i, k in enumerate(keys) if k in PAPER]
    paper = [100 * PAPER[keys[i]][1] for i in paper_keys]
    pbars = ax.bar([i + 0.2 for i in paper_keys], paper, 0.4, label="paper")
    ax.bar_label(pbars, labels=[f"{v:.2f}" for v in paper], fontsize=7)
    ax.set_xticks(range(len(keys)), [LABELS[k] for k in keys], rotation=30, ha="right")
    ax.set_ylabel("stdev (n−1) of normalised workload (%)")
    ax.legend()
    ax.set_title("Load balance per partition method")
    fw.save_png(fig, path)
