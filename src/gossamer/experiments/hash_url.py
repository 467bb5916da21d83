"""Experiment `hash-url`: the hash-URL scheduling paper's load balance and "error searching".

On the `kspider` experiment's URL set, for n = 5 and 20 crawlers, every method gives each
crawler its acceptance set, and from those sets: the paper's formula 2 (σ of URLs per
crawler), error searching (URLs in more than one set, and in none) and hosts split over several
crawlers. Methods: the paper's Σ Transfer of the host and of its site, KSpider's URL sum, and
gossamer's `modulo`, `consistent` and `phase`. `dynamic` has no acceptance set (any worker may
lease any ready host), so its balance and overlap exist only in a crawl: experiments `grid` and
`parallel`. Results: docs/experiments.md, section 2."""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..partition import Consistent, Modulo, Phase, Strategy
from . import _framework as fw
from .corpus import FULL_URLS, QUICK_URLS, UrlCorpus, url_corpus
from .hashes import char_sum, site_of, transfer_sum
from .metrics import check_partition, error_searching, load_stats
from .shards import accepted_hosts, host_shards, member_shards

NAME = "hash-url"
CRAWLERS = (5, 20)

METHODS: Mapping[str, str] = {
    "host-sum": "paper: Σ Transfer(host) mod n",
    "site-sum": "paper: Σ Transfer(site of host) mod n",
    "url-sum": "KSpider eq. 1: Σ URL chars mod n (URL partition)",
    "modulo": "gossamer modulo: xxh3 shard mod n",
    "consistent": "gossamer consistent: rendezvous, ε = 0.25",
    "phase": "gossamer phase: one window, P = n",
}

DYNAMIC_NOTE = (
    "dynamic is not a partition function: Dynamic.shards_for answers ANY (every worker may "
    "lease any ready host; the frontier hands the largest ready sites out first and its leases "
    "keep one worker per host at a time), so per-crawler load and error searching are outcomes "
    "of a crawl, measured by the crawl experiments with error_searching(), not here."
)


def run(options: fw.RunOptions) -> fw.ExperimentResult:
    """Compute the table for n = 5 and 20 from the corpus and the real partition functions,
    write hash-url.json, hash-url.md and hash-url-std.png into `options.out`."""
    out = fw.Outputs(options.out, NAME)
    corpus = url_corpus(QUICK_URLS if options.quick else FULL_URLS, options.seed)
    per_n = {str(n): crawler_table(corpus, n) for n in CRAWLERS}
    data: dict[str, Any] = {
        "experiment": NAME,
        "seed_paper": "hash-url-scheduling §2.2 formula 2, §4-5 (error searching)",
        "quick": options.quick,
        "corpus": corpus.describe(),
        "crawlers": per_n,
        "random_placement_cv": {str(n): random_placement_cv(corpus, n) for n in CRAWLERS},
        "dynamic": DYNAMIC_NOTE,
    }
    _plot(per_n, out.path(f"{NAME}-std.png"))
    return out.finish(
        data,
        _markdown,
        {
            f"σ/mean at n={n}": ", ".join(
                f"{k} {100 * per_n[str(n)][k]['cv']:.2f} %" for k in METHODS
            )
            for n in CRAWLERS
        }
        | {"error searching (URLs on 2+ crawlers)": str(_duplicated(per_n))},
    )


def _duplicated(per_n: Mapping[str, Mapping[str, Any]]) -> int:
    return sum(e["error_searching"]["duplicated"] for t in per_n.values() for e in t.values())


def random_placement_cv(corpus: UrlCorpus, n: int) -> dict[str, float]:
    """σ/mean of URLs per crawler expected when whole hosts (or whole sites) land on `n`
    crawlers uniformly at random: sqrt((n-1)·Σ sᵢ²)/U over the units' sizes sᵢ."""
    sites: dict[str, int] = {}
    for domain, pages in zip(corpus.domains, corpus.pages, strict=True):
        sites[domain] = sites.get(domain, 0) + pages
    total = len(corpus.urls)
    return {
        unit: math.sqrt((n - 1) * sum(s * s for s in sizes)) / total
        for unit, sizes in (("hosts", corpus.pages), ("sites", tuple(sites.values())))
    }


def acceptance_sets(corpus: UrlCorpus, method: str, n: int) -> list[list[int]]:
    """Each crawler's accepted hosts (for host methods) by its own test. `url-sum` has no
    host sets (see `url_sum_sets`)."""
    hosts = corpus.hosts
    if method in ("host-sum", "site-sum"):
        keys = [transfer_sum(h if method == "host-sum" else site_of(h)) for h in hosts]
        return [[h for h, k in enumerate(keys) if k % n == me] for me in range(n)]
    strategies: dict[str, Strategy] = {
        "modulo": Modulo(),
        "consistent": Consistent(),
        "phase": Phase(phases=n),
    }
    strategy = strategies[method]
    return accepted_hosts(member_shards(strategy, n), host_shards(hosts))


def url_sum_sets(corpus: UrlCorpus, n: int) -> list[list[int]]:
    """Equation 1's URL sets (URL indices): crawler i takes the URLs with Σ mod n == i
    (every crawler's test applied in one pass over the URLs)."""
    sets: list[list[int]] = [[] for _ in range(n)]
    for i, url in enumerate(corpus.urls):
        sets[char_sum(url) % n].append(i)
    return sets


def crawler_table(corpus: UrlCorpus, n: int) -> dict[str, Any]:
    """Formula 2, error searching and split hosts for every method at `n` crawlers."""
    table: dict[str, Any] = {}
    urls, offsets = corpus.urls, corpus.offsets
    for method in METHODS:
        if method == "url-sum":
            url_sets = url_sum_sets(corpus, n)
            by_worker = {f"w{i:02d}": [urls[j] for j in s] for i, s in enumerate(url_sets)}
            owner = [0] * len(urls)
            for i, s in enumerate(url_sets):
                for j in s:
                    owner[j] = i
            split = [
                h
                for h in range(len(corpus.hosts))
                if len({owner[j] for j in range(offsets[h], offsets[h + 1])}) > 1
            ]
            host_check = host_counts = None
        else:
            host_sets = acceptance_sets(corpus, method, n)
            by_worker = {
                f"w{i:02d}": [u for h in s for u in corpus.host_urls(h)]
                for i, s in enumerate(host_sets)
            }
            split = []  # a host test accepts all of a host's URLs or none
            host_check = check_partition(host_sets, len(corpus.hosts)).to_dict()
            host_counts = load_stats([len(s) for s in host_sets]).to_dict()
        stats = load_stats([len(v) for v in by_worker.values()])
        errors = error_searching(by_worker)
        entry = stats.to_dict()
        entry["error_searching"] = errors.to_dict()
        entry["unassigned_urls"] = len(urls) - errors.distinct
        entry["hosts_split"] = len(split)
        entry["urls_on_split_hosts"] = sum(corpus.pages[h] for h in split)
        entry["host_check"] = host_check
        entry["hosts"] = host_counts  # hosts per crawler (host methods)
        table[method] = entry
    return table


_HEADERS = (
    "method",
    "σ (URLs)",
    "σ / mean",
    "σ / mean of hosts",
    "max / mean",
    "error searching (URLs)",
    "unassigned URLs",
    "hosts split",
    "URLs on split hosts",
)


def _markdown(data: Mapping[str, Any]) -> str:
    c = data["corpus"]
    parts = [
        "# Hash-URL scheduling: standard deviation of load and error searching\n",
        f"{c['urls']:,} page URLs on {c['hosts']:,} hosts of the simulated web (seed "
        f"{c['spec']['seed']}; the same set as the kspider experiment). σ is formula 2 "
        "(population standard deviation of URLs per crawler).\n",
    ]
    for n, table in data["crawlers"].items():
        parts.append(f"\n## n = {n} crawlers (mean {table['host-sum']['mean']:,.0f} URLs each)\n")
        rows = [
            [
                METHODS[k],
                f"{e['std']:,.0f}",
                f"{100 * e['cv']:.2f} %",
                "—" if e["hosts"] is None else f"{100 * e['hosts']['cv']:.2f} %",
                f"{e['max_over_mean']:.3f}",
                f"{e['error_searching']['duplicated']:,}",
                f"{e['unassigned_urls']:,}",
                f"{e['hosts_split']:,}",
                f"{e['urls_on_split_hosts']:,}",
            ]
            for k, e in table.items()
        ]
        parts.append(fw.markdown_table(_HEADERS, rows))
        expected = data["random_placement_cv"][n]
        parts.append(
            "σ/mean expected when whole units land on crawlers at random: "
            f"{100 * expected['hosts']:.2f} % for hosts, {100 * expected['sites']:.2f} % for "
            "sites (sqrt((n-1)·Σ sᵢ²)/U)."
        )
    parts.append(f"\n`dynamic`: {data['dynamic']}\n")
    return fw.markdown_document(parts)


def _plot(per_n: Mapping[str, Mapping[str, Any]], path: Path) -> None:
    fig = fw.new_figure(11, 4.5)
    axes = fig.subplots(1, len(per_n), sharey=True)
    for ax, (n, table) in zip(axes, per_n.items(), strict=True):
        keys = list(METHODS)
        cvs = [100 * table[k]["cv"] for k in keys]
        bars = ax.bar(range(len(keys)), cvs, color="tab:blue")
        ax.bar_label(bars, labels=[f"{v:.2f}" for v in cvs], fontsize=7)
        ax.set_xticks(range(len(keys)), keys, rotation=30, ha="right", fontsize=8)
        ax.set_title(f"n = {n} crawlers")
        ax.set_ylabel("σ / mean of URLs per crawler (%)")
    fig.suptitle("Formula 2: standard deviation of load across crawlers")
    fw.save_png(fig, path)
