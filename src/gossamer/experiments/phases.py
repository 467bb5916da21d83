"""Experiment `phases`: KSpider's phase swapping — exclusivity per window, and its cost.

Real cluster crawls with three workers under `--partition phase` (P phases, period T on the
Redis server's clock) and, as the baseline, `dynamic`, of one simulated web with a host delay.
Exclusivity: from the moment the member list is stable, no web host (nor IP whose hosts share
a phase) is contacted by two workers within one window [k·T, (k+1)·T). Cost: pages per second
against `dynamic`, with its reasons. The seed's claims and the results: docs/experiments.md,
section 5."""

from __future__ import annotations

import dataclasses
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..partition import shard_of
from ..testweb import WebSpec, model_for
from . import _framework as fw
from .cluster_run import (
    ClusterCrawl,
    ClusterCrawlSpec,
    phase_windows,
    run_cluster_crawl,
    truth_for,
)
from .crawl_metrics import phase_exclusivity, rate_until, stable_since, timing

NAME = "phases"
HEARTBEAT_TTL = 2.0


@dataclass(frozen=True, slots=True)
class PhaseSize:
    hosts: int
    pages_mean: float
    pages_max: int  # no site much bigger than the others: the rate, not one site's tail
    workers: int
    delay: float
    lease_ttl: float
    configs: tuple[tuple[int, float], ...]  # (P, T)
    timeout: float

    @property
    def safety(self) -> float:
        """How long before a lease's end the engine starts no request:
        min(engine.crawler.LEASE_SAFETY_S = 2 s, lease TTL / 4)."""
        return min(2.0, self.lease_ttl / 4)

    def web(self, seed: int) -> WebSpec:
        return WebSpec(
            seed=seed,
            hosts=self.hosts,
            pages_mean=self.pages_mean,
            pages_max=self.pages_max,
            overrides=(("latency_ms", 2.0), ("latency_jitter", 0.5)),
        )


FULL = PhaseSize(
    hosts=300,
    pages_mean=40,
    pages_max=150,
    workers=3,
    delay=0.05,
    lease_ttl=8.0,
    configs=((3, 3.0), (3, 6.0), (3, 12.0), (6, 6.0), (6, 12.0)),
    timeout=600,
)
QUICK = PhaseSize(
    hosts=50,
    pages_mean=20,
    pages_max=50,
    workers=3,
    delay=0.04,
    lease_ttl=4.0,
    configs=((3, 2.0), (6, 2.0)),
    timeout=120,
)


def run(options: fw.RunOptions) -> fw.ExperimentResult:
    """A `dynamic` crawl and one `phase` crawl per (P, T); phases.json/.md/.png."""
    out = fw.Outputs(options.out, NAME)
    size = QUICK if options.quick else FULL
    web = size.web(options.seed)
    seeds = (model_for(web).page_url(0, 0),)
    truth = truth_for(web, seeds)
    base = ClusterCrawlSpec(
        web=web,
        workers=size.workers,
        seeds=seeds,
        delay=size.delay,
        lease_ttl=size.lease_ttl,
        heartbeat_ttl=HEARTBEAT_TTL,
        timeout=size.timeout,
    )
    runs: dict[str, Any] = {}
    dynamic = run_cluster_crawl(base)
    runs["dynamic"] = summarise(dynamic, None, None, size.safety)
    for phases, period in size.configs:
        spec = dataclasses.replace(base, partition="phase", phases=phases, period=period)
        crawl = run_cluster_crawl(spec)
        runs[f"phase P={phases} T={period:g}"] = summarise(crawl, phases, period, size.safety)
    base_rate = runs["dynamic"]["pages_per_s"]
    base_80 = runs["dynamic"]["pages_per_s_to_80pct"]
    for r in runs.values():
        r["throughput_vs_dynamic"] = r["pages_per_s"] / base_rate if base_rate else 0.0
        r["rate_to_80pct_vs_dynamic"] = r["pages_per_s_to_80pct"] / base_80 if base_80 else 0.0
    data: dict[str, Any] = {
        "experiment": NAME,
        "seed_paper": "kspider-phase-partition-and-bucket-scheduler §3.2-3.3",
        "quick": options.quick,
        "web": web.to_dict(),
        "pages": len(truth.required),
        "hosts": len(truth.hosts),
        "workers": size.workers,
        "settings": {
            "delay": size.delay,
            "lease_ttl": size.lease_ttl,
            "heartbeat_ttl": HEARTBEAT_TTL,
            "safety_s": size.safety,
            "concurrency": base.concurrency,
            "per_host": base.per_host,
        },
        "runs": runs,
    }
    _plot(data, out.path(f"{NAME}-cost.png"))
    return out.finish(
        data,
        _markdown,
        {
            key: f"{r['pages_per_s']:,.0f} pages/s ({r['throughput_vs_dynamic']:.2f}× dynamic)"
            + (
                ""
                if r["exclusivity"] is None
                else f", max workers per host per window "
                f"{r['exclusivity']['max_workers_per_host_window']} over "
                f"{r['exclusivity']['windows']} windows"
            )
            for key, r in runs.items()
        },
    )


def summarise(
    crawl: ClusterCrawl, phases: int | None, period: float | None, safety: float
) -> dict[str, Any]:
    r = crawl.report
    out: dict[str, Any] = {
        "phases": phases,
        "period": period,
        "fetched": r.fetched,
        "unique": r.unique,
        "coverage": r.coverage,
        "overlap": r.overlap,
        "violations": r.politeness_violations,
        **timing(crawl, r.unique),
        "pages_per_s_to_80pct": round(rate_until(crawl, 0.8), 1),
        "pages_per_worker": {w: len(u) for w, u in sorted(crawl.pages_by_worker().items())},
        "exclusivity": None,
        "ip_exclusivity": None,
    }
    if phases is None or period is None:
        return out
    since = stable_since(crawl, HEARTBEAT_TTL / 5)
    out["exclusivity"] = phase_exclusivity(crawl, period, since)
    out["ip_exclusivity"] = _ip_exclusivity(crawl, phases, period, since)
    out["usable_window_share"] = max(0.0, period - safety) / period
    out["active_phase_share"] = min(1.0, crawl.spec.workers / phases)
    out["predicted_vs_dynamic"] = out["usable_window_share"] * out["active_phase_share"]
    return out


def _ip_exclusivity(
    crawl: ClusterCrawl, phases: int, period: float, since: float
) -> dict[str, Any]:
    """Distinct workers per (window, IP) for IPs whose hosts all fall in one phase (such an
    IP is one web server to the phases: it must see one worker per window)."""
    classes: dict[str, set[int]] = defaultdict(set)
    for h in crawl.truth.hosts:
        host = model_for(crawl.spec.web).host_by_name(h)
        if host is not None:
            classes[host.ip].add(shard_of(h) % phases)
    one_phase = {ip for ip, cs in classes.items() if len(cs) == 1}
    windows = phase_windows(crawl.records, crawl.owner, period, since, by="ip")
    seen = {(k, ip): ws for (k, ip), ws in windows.items() if ip in one_phase}
    return {
        "ips_in_one_phase": len(one_phase),
        "ips": len(classes),
        "ip_windows": len(seen),
        "max_workers_per_ip_window": max((len(ws) for ws in seen.values()), default=0),
    }


# ---------------------------------------------------------------------------- output


def _markdown(data: Mapping[str, Any]) -> str:
    runs = data["runs"]
    st = data["settings"]
    parts = [
        "# KSpider phase swapping: one worker per web server per phase, and what it costs\n",
        f"{data['pages']:,} pages on {data['hosts']:,} hosts of the simulated web (seed "
        f"{data['web']['seed']}), {data['workers']} `gossamer worker` processes, host delay "
        f"{st['delay']:g} s, lease TTL {st['lease_ttl']:g} s (the engine stops "
        f"{st['safety_s']:g} s before a lease's end), heartbeat TTL {st['heartbeat_ttl']:g} s."
        "\n",
    ]
    rows = []
    for key, r in runs.items():
        ex, ipx = r["exclusivity"], r["ip_exclusivity"]
        rows.append(
            [
                key,
                "—" if ex is None else ex["max_workers_per_host_window"],
                "—" if ex is None else f"{ex['host_windows']:,} ({ex['windows']} windows)",
                "—" if ex is None else ex["host_windows_with_2_or_more"],
                "—" if ipx is None else ipx["max_workers_per_ip_window"],
                "—" if ex is None else ex["hosts_seen_by_several_workers_over_the_crawl"],
                f"{r['fetch_span_s']:.1f}",
                f"{r['pages_per_s']:,.0f}",
                f"{r['throughput_vs_dynamic']:.2f}",
                f"{r['pages_per_s_to_80pct']:,.0f} ({r['rate_to_80pct_vs_dynamic']:.2f}×)",
                "—" if ex is None else f"{r['usable_window_share']:.2f}",
                "—" if ex is None else f"{r['active_phase_share']:.2f}",
                "—" if ex is None else f"{r['predicted_vs_dynamic']:.2f}",
                f"{r['coverage']:.3f}",
                f"{r['overlap']:.4f}",
                r["violations"],
            ]
        )
    parts.append(
        fw.markdown_table(
            [
                "crawl",
                "max workers per host per window",
                "host-windows checked",
                "host-windows with 2+ workers",
                "max workers per IP per window",
                "hosts worked by 2+ workers over the crawl",
                "crawl s",
                "pages/s",
                "× dynamic",
                "pages/s to 80 % of pages (× dynamic)",
                "usable window share (T − margin)/T",
                "active phases N/P",
                "predicted × dynamic (product)",
                "coverage",
                "overlap",
                "violations",
            ],
            rows,
        )
    )
    return fw.markdown_document(parts)


def _plot(data: Mapping[str, Any], path: Path) -> None:
    runs = data["runs"]
    keys = list(runs)
    fig = fw.new_figure(10, 4)
    axes = fig.subplots(1, 2)
    rates = [runs[k]["pages_per_s"] for k in keys]
    bars = axes[0].bar(range(len(keys)), rates, color=["C0"] + ["C1"] * (len(keys) - 1))
    axes[0].bar_label(bars, labels=[f"{v:,.0f}" for v in rates], fontsize=7)
    predicted = [rates[0] * runs[k]["predicted_vs_dynamic"] for k in keys[1:]]
    axes[0].plot(range(1, len(keys)), predicted, "kD", label="dynamic × (T − margin)/T × N/P")
    axes[0].legend(fontsize=7)
    axes[0].set_xticks(range(len(keys)), keys, rotation=30, ha="right", fontsize=8)
    axes[0].set_ylabel("pages/s")
    axes[0].set_title("Throughput")
    ex = [runs[k]["exclusivity"] for k in keys[1:]]
    maxes = [e["max_workers_per_host_window"] for e in ex]
    bars = axes[1].bar(range(len(ex)), maxes, color="C1")
    axes[1].axhline(1, color="k", ls="--", lw=0.8)
    axes[1].bar_label(bars, labels=[f"{e['host_windows']:,} checked" for e in ex], fontsize=7)
    axes[1].set_xticks(range(len(ex)), keys[1:], rotation=30, ha="right", fontsize=8)
    axes[1].set_ylabel("max distinct workers per host per window")
    axes[1].set_ylim(0, max([2, *maxes]) + 0.5)
    axes[1].set_title("Exclusivity (must be ≤ 1)")
    fig.suptitle("KSpider phase swapping in gossamer: exclusivity and cost against dynamic")
    fw.save_png(fig, path)
