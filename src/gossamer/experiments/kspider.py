"""Experiment `kspider`: KSpider's Figures 9 and 10 (URLs over nodes, URLs over phases).

On ≥ 6 million page URLs of the simulated web (the paper's size; `corpus.url_corpus`): URLs per
node for N = 2..10 by the paper's equations and by gossamer's host hash (`Modulo`,
`Consistent`), with totality and disjointness checked; URLs and hosts per phase for
P = 2..10 by equation 2 and by gossamer's `Phase`, beside what random placement of these site
sizes predicts; the paper's Figure 3; and the character sum's weaknesses. Results:
docs/experiments.md, section 1."""

from __future__ import annotations

import math
import statistics
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import xxhash

from ..partition import SHARDS, Consistent, Modulo, Phase
from . import _framework as fw
from .corpus import FULL_URLS, QUICK_URLS, UrlCorpus, url_corpus
from .hashes import KSPIDER_COLUMNS, char_sum
from .metrics import LoadStats, PartitionCheck, check_partition, load_stats
from .shards import accepted_hosts, host_shards, loads_of, member_shards

NAME = "kspider"
SIZES = tuple(range(2, 11))  # nodes and phases, as in the paper's Figures 9 and 10
FIG3_NODES, FIG3_PHASES = 5, 6  # the paper's example (Figures 2 and 3)
SALTS = 32  # salted host hashes, to show how much of a host partition's balance is luck

#: Node partitions: key → label for tables and plots.
NODE_METHODS: Mapping[str, str] = {
    "url-sum": "eq. 1: Σ URL chars mod N",
    "host-sum": "eq. 2 hash for nodes: Σ host chars mod N",
    "xxh3-modulo": "gossamer: xxh3(host) → 1024 shards, modulo",
    "consistent": "gossamer: consistent (rendezvous, ε = 0.25) over 1024 shards",
}
PHASE_METHODS: Mapping[str, str] = {
    "host-sum": "eq. 2: Σ host chars mod P",
    "gossamer-phase": "gossamer phase: xxh3 shard mod P",
}


def run(options: fw.RunOptions) -> fw.ExperimentResult:
    """Compute every figure from the corpus and the real hash/partition functions, write
    kspider.json, kspider.md and the PNGs into `options.out`."""
    out = fw.Outputs(options.out, NAME)
    corpus = url_corpus(QUICK_URLS if options.quick else FULL_URLS, options.seed)
    url_sums = [char_sum(u) for u in corpus.urls]
    host_sums = [char_sum(h) for h in corpus.hosts]
    host_shard = host_shards(corpus.hosts)

    nodes = node_distributions(corpus, url_sums, host_sums, host_shard)
    phases = phase_distributions(corpus, host_sums, host_shard)
    fig3 = figure3_matrix(corpus, url_sums, host_sums)
    weak = weaknesses(corpus, url_sums, host_sums)
    data: dict[str, Any] = {
        "experiment": NAME,
        "seed_paper": "kspider-phase-partition-and-bucket-scheduler §3.1-3.2, §4 (Figs. 9, 10)",
        "quick": options.quick,
        "corpus": corpus.describe(),
        "nodes": nodes,
        "phases": phases,
        "figure3": fig3,
        "weaknesses": weak,
    }
    _plot_nodes(nodes, out.path(f"{NAME}-fig9-nodes.png"))
    _plot_phases(phases, out.path(f"{NAME}-fig10-phases.png"))
    _plot_cv(nodes, phases, out.path(f"{NAME}-cv.png"))
    _plot_sums(url_sums, host_sums, out.path(f"{NAME}-sum-range.png"))
    n10 = nodes["methods"]
    return out.finish(
        data,
        _markdown,
        {
            "urls": f"{len(corpus.urls):,} on {len(corpus.hosts):,} hosts",
            "max/mean at N=10": ", ".join(
                f"{k} {n10[k]['per_n']['10']['max_over_mean']:.3f}" for k in NODE_METHODS
            ),
            "phase CV at P=6": ", ".join(
                f"{k} {phases['methods'][k]['per_p']['6']['urls']['cv']:.3f}" for k in PHASE_METHODS
            ),
        },
    )


# ---------------------------------------------------------------- nodes (Figure 9)


def node_distributions(
    corpus: UrlCorpus, url_sums: Sequence[int], host_sums: Sequence[int], host_shard: Sequence[int]
) -> dict[str, Any]:
    """URLs per node for N in SIZES under every node method, with the partition checks.

    Equation 1 is checked on its value domain: each node's predicate (Σ mod N == node) is
    applied to every distinct Σ value; host methods on hosts (and gossamer's on shards)."""
    sum_count = Counter(url_sums)
    values = sorted(sum_count)
    total = len(corpus.urls)
    largest = max(corpus.pages)
    squares = sum(p * p for p in corpus.pages)
    methods: dict[str, dict[str, Any]] = {
        k: {"label": v, "per_n": {}} for k, v in NODE_METHODS.items()
    }
    bounds: dict[str, Any] = {}
    salted = salted_modulo_cv(corpus)
    for n in SIZES:
        by_value = [[i for i, v in enumerate(values) if v % n == node] for node in range(n)]
        url_loads = [sum(sum_count[values[i]] for i in vals) for vals in by_value]
        methods["url-sum"]["per_n"][str(n)] = _entry(
            load_stats(url_loads), check_partition(by_value, len(values)), total
        )
        by_host_sum = [[h for h, s in enumerate(host_sums) if s % n == node] for node in range(n)]
        methods["host-sum"]["per_n"][str(n)] = _entry(
            load_stats(loads_of(by_host_sum, corpus.pages)),
            check_partition(by_host_sum, len(corpus.hosts)),
            total,
        )
        for key, strategy in (("xxh3-modulo", Modulo()), ("consistent", Consistent())):
            shard_sets = member_shards(strategy, n)
            accepted = accepted_hosts(shard_sets, host_shard)
            entry = _entry(
                load_stats(loads_of(accepted, corpus.pages)),
                check_partition(accepted, len(corpus.hosts)),
                total,
            )
            entry["shards"] = load_stats([len(s) for s in shard_sets]).to_dict()
            entry["shard_check"] = check_partition(
                [sorted(s) for s in shard_sets], strategy.shards
            ).to_dict()
            methods[key]["per_n"][str(n)] = entry
        bounds[str(n)] = {
            # no host partition can beat this: the biggest host lands somewhere whole
            "host_partition_floor_max_over_mean": max(1.0, largest * n / total),
            # expected CV when hosts land on nodes independently and uniformly
            "random_host_placement_cv": math.sqrt((n - 1) * squares) / total,
            "salted_xxh3_modulo_cv": salted[n],
        }
    return {"sizes": list(SIZES), "methods": methods, "bounds": bounds}


def salted_modulo_cv(corpus: UrlCorpus, salts: int = SALTS) -> dict[int, dict[str, float]]:
    """How much a host partition's balance is luck: the CV of URLs per node under
    gossamer's modulo strategy with the host hash salted (xxh3 seeds 1..`salts`), for each N
    in SIZES: mean, smallest, largest and the 10th/90th percentiles."""
    shard_sets = {n: member_shards(Modulo(), n) for n in SIZES}
    cvs: dict[int, list[float]] = {n: [] for n in SIZES}
    for salt in range(1, salts + 1):
        shard_pages = [0] * SHARDS
        for host, pages in zip(corpus.hosts, corpus.pages, strict=True):
            shard_pages[xxhash.xxh3_64_intdigest(host.encode(), seed=salt) % SHARDS] += pages
        for n in SIZES:
            loads = [sum(shard_pages[s] for s in mine) for mine in shard_sets[n]]
            cvs[n].append(load_stats(loads).cv)
    out = {}
    for n, values in cvs.items():
        values.sort()
        deciles = statistics.quantiles(values, n=10)
        out[n] = {
            "salts": float(salts),
            "mean": statistics.fmean(values),
            "min": values[0],
            "p10": deciles[0],
            "p90": deciles[-1],
            "max": values[-1],
        }
    return out


def _entry(stats: LoadStats, check: PartitionCheck, total: int) -> dict[str, Any]:
    d = stats.to_dict()
    d["check"] = check.to_dict()
    d["check"]["urls_assigned"] = stats.total
    d["check"]["urls_total"] = total
    return d


# ---------------------------------------------------------------- phases (Figure 10)


def phase_distributions(
    corpus: UrlCorpus, host_sums: Sequence[int], host_shard: Sequence[int]
) -> dict[str, Any]:
    """URLs and hosts per phase for P in SIZES: equation 2 and gossamer's `Phase` (P members
    at time 0: member i works phase i), beside the CVs site sizes alone predict."""
    total, hosts = len(corpus.urls), len(corpus.hosts)
    squares = sum(p * p for p in corpus.pages)
    methods: dict[str, dict[str, Any]] = {
        k: {"label": v, "per_p": {}} for k, v in PHASE_METHODS.items()
    }
    predicted: dict[str, Any] = {}
    for p in SIZES:
        sets = {
            "host-sum": [[h for h, s in enumerate(host_sums) if s % p == k] for k in range(p)],
            "gossamer-phase": accepted_hosts(member_shards(Phase(phases=p), p), host_shard),
        }
        for key, by_phase in sets.items():
            urls = load_stats(loads_of(by_phase, corpus.pages))
            biggest = [max((corpus.pages[h] for h in ph), default=0) for ph in by_phase]
            methods[key]["per_p"][str(p)] = {
                "urls": urls.to_dict(),
                "hosts": load_stats([len(ph) for ph in by_phase]).to_dict(),
                "largest_host_over_mean_phase": max(biggest) / urls.mean,
                "check": check_partition(by_phase, hosts).to_dict(),
            }
        predicted[str(p)] = {
            "site_sizes_cv": math.sqrt((p - 1) * squares) / total,
            "equal_sizes_cv": math.sqrt((p - 1) / hosts),
        }
    return {"sizes": list(SIZES), "methods": methods, "random_placement": predicted}


def figure3_matrix(
    corpus: UrlCorpus, url_sums: Sequence[int], host_sums: Sequence[int]
) -> dict[str, Any]:
    """The paper's Figure 3 with counts: URLs of node n (eq. 1, N = 5) in phase k (eq. 2,
    P = 6). Every URL is counted once."""
    matrix = [[0] * FIG3_PHASES for _ in range(FIG3_NODES)]
    for h in range(len(corpus.hosts)):
        phase = host_sums[h] % FIG3_PHASES
        for i in range(corpus.offsets[h], corpus.offsets[h + 1]):
            matrix[url_sums[i] % FIG3_NODES][phase] += 1
    return {"nodes": FIG3_NODES, "phases": FIG3_PHASES, "urls": matrix}


# ---------------------------------------------------------------- weaknesses


def anagram(host: str) -> str:
    """A different host name with the same characters: every label reversed
    (`www.h12.example` → `www.21h.elpmaxe`)."""
    return ".".join(label[::-1] for label in host.split("."))


def weaknesses(
    corpus: UrlCorpus, url_sums: Sequence[int], host_sums: Sequence[int]
) -> dict[str, Any]:
    """The character sum in numbers: anagram collisions among the generated hosts and for
    constructed anagrams, and the range of Σ against a 64-bit hash."""
    hosts = corpus.hosts
    classes = Counter("".join(sorted(h)) for h in hosts)
    sum_count = Counter(host_sums)
    xxh_hosts = {xxhash.xxh3_64_intdigest(h.encode()) for h in hosts}
    constructed = [anagram(h) for h in hosts]
    distinct_anagrams = sum(1 for h, a in zip(hosts, constructed, strict=True) if a != h)
    anagram_sums = [char_sum(a) for a in constructed]
    host_xxh = [xxhash.xxh3_64_intdigest(h.encode()) % 1024 for h in hosts]
    anagram_xxh = [xxhash.xxh3_64_intdigest(a.encode()) % 1024 for a in constructed]
    same_node = {
        str(n): {
            "char_sum": _same_share([s % n for s in host_sums], [s % n for s in anagram_sums]),
            "xxh3_modulo": _same_share([s % n for s in host_xxh], [s % n for s in anagram_xxh]),
        }
        for n in (5, 10)
    }
    url_count = Counter(url_sums)
    xxh_urls = len({xxhash.xxh3_64_intdigest(u.encode()) for u in corpus.urls})
    cols_sum = Counter(s % KSPIDER_COLUMNS for s in host_sums)
    cols_xxh = Counter(xxhash.xxh3_64_intdigest(h.encode()) % KSPIDER_COLUMNS for h in hosts)
    return {
        "hosts": {
            "hosts": len(hosts),
            "anagram_classes": len(classes),
            "hosts_with_an_anagram": sum(c for c in classes.values() if c > 1),
            "largest_anagram_class": max(classes.values()),
            "example_anagram_class": _example_class(hosts, classes),
            "distinct_char_sums": len(sum_count),
            "hosts_sharing_their_char_sum": sum(c for c in sum_count.values() if c > 1),
            "char_sum_min": min(host_sums),
            "char_sum_max": max(host_sums),
            "distinct_xxh3_64": len(xxh_hosts),
        },
        "constructed_anagrams": {
            "rule": "every label reversed: www.h12.example -> www.21h.elpmaxe",
            "pairs": len(hosts),
            "pairs_with_different_names": distinct_anagrams,
            "equal_char_sum": sum(
                1 for h, a in zip(host_sums, anagram_sums, strict=True) if h == a
            ),
            "same_node_share": same_node,
        },
        "urls": {
            "urls": len(url_sums),
            "char_sum_min": min(url_sums),
            "char_sum_max": max(url_sums),
            "distinct_char_sums": len(url_count),
            "value_range_bits": math.log2(max(url_sums) - min(url_sums) + 1),
            "urls_per_distinct_sum_mean": len(url_sums) / len(url_count),
            "urls_per_distinct_sum_max": max(url_count.values()),
            "distinct_xxh3_64": xxh_urls,
            "xxh3_64_range_bits": 64,
        },
        "bucket_columns": {
            "columns": KSPIDER_COLUMNS,
            "used_by_char_sum": len(cols_sum),
            "max_hosts_per_column_char_sum": max(cols_sum.values()),
            "used_by_xxh3": len(cols_xxh),
            "max_hosts_per_column_xxh3": max(cols_xxh.values()),
        },
    }


def _same_share(a: Sequence[int], b: Sequence[int]) -> float:
    """The share of positions where `a` and `b` agree."""
    return sum(1 for x, y in zip(a, b, strict=True) if x == y) / len(a)


def _example_class(hosts: Sequence[str], classes: Counter[str]) -> list[str]:
    key, _ = classes.most_common(1)[0]
    return [h for h in hosts if "".join(sorted(h)) == key][:6]


# ---------------------------------------------------------------- outputs


def _markdown(data: Mapping[str, Any]) -> str:
    c = data["corpus"]
    nodes, phases, weak = data["nodes"], data["phases"], data["weaknesses"]
    parts = [
        "# KSpider Figures 9 and 10, reproduced\n",
        f"{c['urls']:,} page URLs on {c['hosts']:,} hosts ({c['domains']:,} sites) of the "
        f"simulated web (seed {c['spec']['seed']}, Pareto site sizes, shape "
        f"{c['spec']['pages_alpha']}; mean {c['mean_pages_per_host']:.1f} pages/host, median "
        f"{c['median_pages_per_host']}, largest {c['largest_hosts'][0]['pages']:,} = "
        f"{100 * c['largest_host_share']:.2f} % of all URLs, top 1 % of hosts "
        f"{100 * c['top_1pct_hosts_share']:.1f} %).\n",
        "## URLs per node (Figure 9): max/mean\n",
    ]
    rows = []
    for n in nodes["sizes"]:
        per = [nodes["methods"][k]["per_n"][str(n)] for k in NODE_METHODS]
        floor = nodes["bounds"][str(n)]["host_partition_floor_max_over_mean"]
        rows.append([n, *(f"{e['max_over_mean']:.4f}" for e in per), f"{floor:.4f}"])
    parts.append(fw.markdown_table(["N", *NODE_METHODS, "host-partition floor"], rows))
    parts.append(
        "\nHost-partition floor: the largest host's URLs over the mean node load (no host "
        "partition can do better).\n"
    )
    parts.append("\n## URLs per node: coefficient of variation (σ / mean)\n")
    rows = []
    for n in nodes["sizes"]:
        per = [nodes["methods"][k]["per_n"][str(n)] for k in NODE_METHODS]
        b = nodes["bounds"][str(n)]
        salted = b["salted_xxh3_modulo_cv"]
        shards = nodes["methods"]["consistent"]["per_n"][str(n)]["shards"]
        rows.append(
            [
                n,
                *(f"{e['cv']:.4f}" for e in per),
                f"{b['random_host_placement_cv']:.4f}",
                f"{salted['p10']:.4f}–{salted['p90']:.4f}",
                f"{shards['cv']:.4f} ({shards['max_over_mean']:.3f})",
            ]
        )
    headers = ["N", *NODE_METHODS, "random hosts", "salted xxh3 p10–p90", "consistent: shards"]
    parts.append(fw.markdown_table(headers, rows))
    parts.append(
        "\nRandom hosts: sqrt((N-1)·Σ sᵢ²)/U, the CV expected when hosts land on nodes uniformly "
        "at random. Salted xxh3: gossamer's modulo partition with the host hash salted "
        f"{SALTS} ways (xxh3 seeds 1..{SALTS}), the 10th to 90th percentile of its CV — where "
        "the largest hosts land is luck, and this is its spread. Consistent: shards: the CV "
        "(and max/mean) of the number of the 1024 shards each member holds.\n"
    )
    parts.append("\n## URLs per phase (Figure 10)\n")
    headers = ["P"]
    for k in PHASE_METHODS:
        headers += [f"{k} max/mean", f"{k} CV (URLs)", f"{k} CV (hosts)", f"{k} largest host/mean"]
    headers += ["predicted CV (these site sizes)", "predicted CV (equal sizes)"]
    rows = []
    for p in phases["sizes"]:
        row: list[object] = [p]
        for k in PHASE_METHODS:
            e = phases["methods"][k]["per_p"][str(p)]
            row += [
                f"{e['urls']['max_over_mean']:.4f}",
                f"{e['urls']['cv']:.4f}",
                f"{e['hosts']['cv']:.4f}",
                f"{e['largest_host_over_mean_phase']:.4f}",
            ]
        pr = phases["random_placement"][str(p)]
        row += [f"{pr['site_sizes_cv']:.4f}", f"{pr['equal_sizes_cv']:.4f}"]
        rows.append(row)
    parts.append(fw.markdown_table(headers, rows))
    f3 = data["figure3"]
    parts.append(
        f"\n## Figure 3 with counts: URLs per node (eq. 1, N = {f3['nodes']}) and phase "
        f"(eq. 2, P = {f3['phases']})\n"
    )
    parts.append(
        fw.markdown_table(
            ["node", *(f"P{k}" for k in range(f3["phases"])), "node total"],
            [
                [f"S{n}", *(f"{v:,}" for v in row), f"{sum(row):,}"]
                for n, row in enumerate(f3["urls"])
            ],
        )
    )
    h, a, u, b = weak["hosts"], weak["constructed_anagrams"], weak["urls"], weak["bucket_columns"]
    parts.append("\n## The character sum's weaknesses\n")
    same10 = a["same_node_share"]["10"]
    hosts_n = f"of {h['hosts']:,}"
    urls_n = f"of {u['urls']:,}"
    rows = [
        [
            "distinct values over the hosts",
            f"{h['distinct_char_sums']:,} {hosts_n}",
            f"{h['distinct_xxh3_64']:,} {hosts_n}",
        ],
        [
            "hosts sharing their hash value with another host",
            f"{h['hosts_sharing_their_char_sum']:,}",
            f"{h['hosts'] - h['distinct_xxh3_64']:,}",
        ],
        [
            "generated hosts with an anagram among the hosts",
            f"{h['hosts_with_an_anagram']:,} (largest class {h['largest_anagram_class']})",
            "—",
        ],
        [
            "constructed anagram pairs with equal hash",
            f"{a['equal_char_sum']:,} of {a['pairs']:,}",
            "(a 64-bit collision: ~0)",
        ],
        [
            "anagram pairs on the same node, N = 10",
            f"{100 * same10['char_sum']:.1f} %",
            f"{100 * same10['xxh3_modulo']:.1f} % (chance: 10 %)",
        ],
        [
            "value range over the URLs",
            f"{u['char_sum_min']:,}–{u['char_sum_max']:,} ({u['value_range_bits']:.1f} bits)",
            "0–2^64 (64 bits)",
        ],
        [
            "distinct values over the URLs",
            f"{u['distinct_char_sums']:,} {urls_n}",
            f"{u['distinct_xxh3_64']:,} {urls_n}",
        ],
        [
            "URLs per value (mean / max)",
            f"{u['urls_per_distinct_sum_mean']:,.0f} / {u['urls_per_distinct_sum_max']:,}",
            f"{u['urls'] / u['distinct_xxh3_64']:.3f}",
        ],
        [
            f"eq. 3 bucket columns used (of {b['columns']:,})",
            f"{b['used_by_char_sum']:,}",
            f"{b['used_by_xxh3']:,}",
        ],
        [
            "most hosts in one column",
            f"{b['max_hosts_per_column_char_sum']:,}",
            f"{b['max_hosts_per_column_xxh3']:,}",
        ],
    ]
    parts.append(fw.markdown_table(["measure", "Σ characters", "xxh3-64 (gossamer)"], rows))
    example = ", ".join(h["example_anagram_class"])
    parts.append(f"\nExample anagram class among the generated hosts: {example}.\n")
    return fw.markdown_document(parts)


def _plot_nodes(nodes: Mapping[str, Any], path: Path) -> None:
    fig = fw.new_figure(11, 7)
    axes = fig.subplots(2, 2, sharey=True)
    for ax, key in zip(axes.flat, NODE_METHODS, strict=True):
        per = nodes["methods"][key]["per_n"]
        for n in nodes["sizes"]:
            e = per[str(n)]
            ax.scatter([n] * n, [100 * x / e["mean"] for x in e["loads"]], s=12, color="tab:blue")
        ax.plot(
            nodes["sizes"],
            [100 * per[str(n)]["max_over_mean"] for n in nodes["sizes"]],
            color="tab:red",
            label="max/mean",
        )
        bounds = nodes["bounds"]
        ax.plot(
            nodes["sizes"],
            [100 * bounds[str(n)]["host_partition_floor_max_over_mean"] for n in nodes["sizes"]],
            color="grey",
            linestyle=":",
            label="host-partition floor",
        )
        ax.axhline(100, color="black", linewidth=0.6)
        ax.set_title(NODE_METHODS[key], fontsize=9)
        ax.set_xlabel("nodes N")
        ax.set_ylabel("URLs of a node, % of the mean")
        ax.legend(fontsize=7)
    fig.suptitle("Distribution of URLs in each node (KSpider Fig. 9), one dot per node")
    fw.save_png(fig, path)


def _plot_phases(phases: Mapping[str, Any], path: Path) -> None:
    fig = fw.new_figure(11, 4.2)
    axes = fig.subplots(1, 2, sharey=True)
    for ax, key in zip(axes, PHASE_METHODS, strict=True):
        per = phases["methods"][key]["per_p"]
        for p in phases["sizes"]:
            e = per[str(p)]
            urls, hosts = e["urls"], e["hosts"]
            ax.scatter(
                [p - 0.12] * p,
                [100 * x / urls["mean"] for x in urls["loads"]],
                s=12,
                color="tab:blue",
                label="URLs" if p == 2 else None,
            )
            ax.scatter(
                [p + 0.12] * p,
                [100 * x / hosts["mean"] for x in hosts["loads"]],
                s=12,
                facecolors="none",
                edgecolors="tab:green",
                label="hosts" if p == 2 else None,
            )
        ax.axhline(100, color="black", linewidth=0.6)
        ax.set_title(PHASE_METHODS[key], fontsize=9)
        ax.set_xlabel("phases P")
        ax.set_ylabel("a phase's share, % of the mean")
        ax.legend(fontsize=7)
    fig.suptitle("Distribution of URLs in each phase (KSpider Fig. 10), one dot per phase")
    fw.save_png(fig, path)


def _plot_cv(nodes: Mapping[str, Any], phases: Mapping[str, Any], path: Path) -> None:
    """CV of URLs per node for every node method, with what random host placement predicts
    and the spread of salted host hashes."""
    fig = fw.new_figure(8, 4.5)
    ax = fig.subplots()
    sizes = nodes["sizes"]
    for key in NODE_METHODS:
        per = nodes["methods"][key]["per_n"]
        ax.plot(sizes, [per[str(n)]["cv"] for n in sizes], marker="o", label=key)
    # eq. 2 over P phases is the host-sum line at N = P: the same function
    salted = [nodes["bounds"][str(n)]["salted_xxh3_modulo_cv"] for n in sizes]
    ax.fill_between(
        sizes,
        [s["p10"] for s in salted],
        [s["p90"] for s in salted],
        color="tab:orange",
        alpha=0.15,
        label=f"xxh3-modulo with {SALTS} salted hashes, p10–p90",
    )
    rp = phases["random_placement"]
    for key, colour, label in (
        ("site_sizes_cv", "grey", "random host placement, these site sizes"),
        ("equal_sizes_cv", "black", "random host placement, equal sizes"),
    ):
        ax.plot(sizes, [rp[str(p)][key] for p in sizes], color=colour, linestyle=":", label=label)
    ax.set_xlabel("nodes N (host-sum at N = eq. 2 over P = N phases)")
    ax.set_ylabel("coefficient of variation of URLs")
    ax.legend(fontsize=7)
    ax.set_title("Balance: URL partition vs host partitions")
    fw.save_png(fig, path)


def _plot_sums(url_sums: Sequence[int], host_sums: Sequence[int], path: Path) -> None:
    # histograms of the distinct values weighted by their counts: matplotlib is slow on a
    # list of millions of numbers
    fig = fw.new_figure(10, 3.8)
    left, right = fig.subplots(1, 2)
    for ax, sums, colour, what in (
        (left, url_sums, "tab:blue", "URLs"),
        (right, host_sums, "tab:orange", "host names"),
    ):
        count = Counter(sums)
        values = sorted(count)
        bins = min(100, values[-1] - values[0] + 1)
        ax.hist(values, bins=bins, weights=[count[v] for v in values], color=colour)
        ax.set_title(f"Σ characters of {len(sums):,} {what}", fontsize=9)
        ax.set_xlabel("Σ (a 64-bit hash spreads over 0 … 1.8e19)")
        ax.set_ylabel(what)
    fig.suptitle("The character sum's narrow value range")
    fw.save_png(fig, path)
